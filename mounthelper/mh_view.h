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

#endif
