/* The helper's own view of the file system (mh_view.c). */
#ifndef SEPCSI_MH_VIEW_H
#define SEPCSI_MH_VIEW_H

#include "policy.h"

/* The source of the view's tmpfs, whose /dev holds the loop nodes the helper binds. */
#define MH_VIEW_SOURCE "sepcsi-helper"

/*
 * Build the view and move into it: a private mount namespace whose root
 * holds the allowed roots (shared with the host), the base directories of
 * directory volumes (read-write and read-only), the data directory, the
 * tools read-only, /sys read-only, a process-only /proc and a /dev of the
 * helper's own. Needs CAP_SYS_ADMIN and CAP_MKNOD; fatal on any failure.
 */
void mh_view_enter(const struct pol *pol, const char *data_dir);

/*
 * Inside the view, for the capable core before its exec: a mount namespace
 * of its own with a /dev of its own (null, loop-control, and the loop nodes
 * it makes), so that its loop nodes are in no other process's view. The
 * allowed roots stay shared with the host. Fatal on any failure.
 */
void mh_view_own_dev(void);

/*
 * The helper's view once its core runs in a namespace of its own: the
 * allowed roots detached (kubelet's directories, and every mount beneath
 * them, out of its sight and reach) and /dev/loop-control removed (no loop
 * device added, removed or found free). The roots are made private first
 * (with every mount beneath them) and the core's /dev is its own, so neither
 * change reaches another namespace. Fatal on any failure.
 */
void mh_view_leave_to_core(const struct pol *pol);

#endif
