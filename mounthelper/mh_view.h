/* The helper's own view of the file system (mh_view.c). */
#ifndef SEPCSI_MH_VIEW_H
#define SEPCSI_MH_VIEW_H

#include "policy.h"

/*
 * Build the view and move into it: a private mount namespace whose root
 * holds the allowed roots (shared with the host), the base directories of
 * directory volumes (read-write and read-only), the data directory, the
 * tools read-only, /sys read-only, a process-only /proc and a /dev of the
 * helper's own. Needs CAP_SYS_ADMIN and CAP_MKNOD; fatal on any failure.
 */
void mh_view_enter(const struct pol *pol, const char *data_dir);

/*
 * The helper's view once its core runs in a namespace of its own: the
 * allowed roots detached (kubelet's directories, and every mount beneath
 * them, out of its sight and reach) and /dev/loop-control removed (no loop
 * device added, removed or found free), then its root tmpfs made read-only.
 * The roots are made private first (with every mount beneath them) and the
 * core's view is its own (mh_view_enter again, in the core's child), so none
 * of this reaches another namespace. Fatal on any failure.
 */
void mh_view_leave_to_core(const struct pol *pol);

/*
 * Detach every mount stacked on path (a root that kubelet, say, bound onto
 * itself meanwhile holds two), top first, each made private before, with
 * every mount beneath it, so that no detach reaches a peer; then check that
 * what is left is a directory of the view's own tmpfs. 0, or -1 with errno.
 */
int mh_view_detach(const char *path);

/*
 * And, once its runners are started, /proc detached from it: a procfs shows
 * every process of the host's pid namespace that its reader may ptrace-read,
 * and a process without capabilities may read every other one of its uid
 * without capabilities (a root pod that dropped them all, say). The helper
 * reads nothing there after its start (capabilities are read with capget).
 */
void mh_view_drop_proc(void);

#endif
