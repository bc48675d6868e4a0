/*
 * Checks and lookups shared by the operation handlers (mh_common.c): id and
 * path validation, "this volume" (its image and loop device), and the careful
 * unmount of what is proven to be this volume's mount.
 */
#ifndef SEPCSI_MH_COMMON_H
#define SEPCSI_MH_COMMON_H

#include <stdbool.h>
#include <sys/stat.h>

#include "mh.h"
#include "mh_loop.h"
#include "mh_mount.h"

int mh_check_volume_id(const char *id, struct mh_res *r);
int mh_check_snapshot_id(const char *id, struct mh_res *r);

/* pol_path_check with an answer: REFUSED if malformed or outside the roots; *root set. */
int mh_check_path(const struct mh_ctx *c, const char *path, const char *what, const char **root,
                  struct mh_res *r);

/* Is one of the two canonical paths equal to or beneath the other? */
bool mh_nested(const char *a, const char *b);

/* The volume's image identity and, if attached, its (first) loop device. */
struct mh_vol {
	struct stat st;
	bool attached;
	struct mh_loop loop;
};

/* Look the volume up; 0, or -1 with r (NOTFOUND if there is no image). */
int mh_vol_lookup(const struct mh_ctx *c, const char *id, struct mh_vol *v, struct mh_res *r);

/* True if m is a mount of the volume's loop device. */
bool mh_vol_owns(const struct mh_vol *v, const struct mh_mnt *m);

/*
 * Unmount this volume's mount(s) at path. Returns 0 when nothing of ours is
 * mounted there any more, -1 with r otherwise (REFUSED if what is mounted is
 * not ours). dirfd (may be -1) is consumed: an open fd inside the mount would
 * keep it busy.
 */
int mh_unmount_ours(const char *root, const char *path, const struct mh_vol *v, int dirfd,
                    struct mh_res *r);

/* rmdir path (beneath root): missing is fine, anything else that fails is FAILED. */
int mh_remove_dir(const char *root, const char *path, struct mh_res *r);

/* mkdir path (beneath root, 0750) unless it exists; its parent must exist. *created says which. */
int mh_make_dir(const char *root, const char *path, bool *created, struct mh_res *r);

#endif
