/*
 * Opening policy-checked paths beneath their allowed root without following
 * any symlink (mh_path.c). Every path given here has passed pol_path_check().
 */
#ifndef SEPCSI_MH_PATH_H
#define SEPCSI_MH_PATH_H

#include <sys/types.h>

#include "mh.h"

/*
 * Open path (beneath root) as O_PATH|O_DIRECTORY. If something is mounted on
 * it, the fd is the root of the top-most mount there. Returns the fd (caller
 * closes), or -1 with r filled: NOTFOUND if a component is missing, REFUSED
 * for a symlink, an escape attempt or a non-directory.
 */
int mh_path_open_dir(const char *root, const char *path, struct mh_res *r);

/*
 * Open the parent directory of path as O_RDONLY|O_DIRECTORY (a real directory
 * fd, usable with fchdir, mkdirat and unlinkat) and point *name at the final
 * component inside path. Same errors as mh_path_open_dir().
 */
int mh_path_open_parent(const char *root, const char *path, const char **name, struct mh_res *r);

/* Open name inside the directory dirfd as O_PATH|O_DIRECTORY, never following a symlink. */
int mh_path_open_child(int dirfd, const char *name, struct mh_res *r);

/*
 * Like mh_path_open_dir() and mh_path_open_child() with the open flags given
 * (O_RDONLY|O_DIRECTORY for an fd that ioctl and fstatvfs accept, O_PATH for
 * a file, O_CREAT|O_EXCL|O_WRONLY to make one, ...). Same errors; a target
 * that exists already is EXISTS with O_EXCL.
 */
int mh_path_open_flags(const char *root, const char *path, int flags, struct mh_res *r);
int mh_path_open_child_flags(int dirfd, const char *name, int flags, mode_t mode, struct mh_res *r);

#endif
