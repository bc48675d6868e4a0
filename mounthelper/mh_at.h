/*
 * Where the helper acts: a staging or target path resolved beneath its
 * allowed root, every directory on the way checked, and the objects the
 * helper made there marked as its own (mh_at.c).
 */
#ifndef SEPCSI_MH_AT_H
#define SEPCSI_MH_AT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "mh.h"

/* A path's parent directory, resolved and checked, and its last component. */
struct mh_at {
	int dir;          /* O_PATH|O_DIRECTORY fd of the parent; -1 when closed */
	const char *name; /* the last component (points into the path given) */
	const char *root; /* the allowed root the path lies beneath (owned by the policy) */
	dev_t root_sb;    /* the superblock of the allowed root (mh_mount_check_local) */
};

/*
 * Check path against the policy (roles: a mask of enum pol_role) and open its
 * parent: from the root down, one component at a time, no symlink, and every
 * directory on the way (the root and the parent included) a directory owned
 * by root that no one else may write to, so that no one but root can rename
 * or replace anything the helper is about to act on. 0, or -1 with r:
 * REFUSED (policy, symlink, a directory others may write to), NOTFOUND (a
 * component is missing).
 */
int mh_at_open(const struct mh_ctx *c, const char *path, unsigned roles, struct mh_at *at,
               struct mh_res *r);
void mh_at_close(struct mh_at *at);

/*
 * Step into the last component of at, a directory only root may change, and
 * make sub the place of name inside it (for a raw block staging directory's
 * device file). 0, or -1 with r (NOTFOUND if the directory is missing).
 */
int mh_at_descend(const struct mh_at *at, const char *name, struct mh_at *sub, struct mh_res *r);

/*
 * Open the last component with flags (O_PATH, O_RDONLY|O_DIRECTORY, ...),
 * never following a symlink; returns the fd, or -1 with r (NOTFOUND if it
 * does not exist). It is first opened O_PATH and its file system's type
 * looked at (mh_mount_check_local) before anything asks that file system.
 */
int mh_at_child(const struct mh_at *at, int flags, struct mh_res *r);

/*
 * What the last component is, as mh_at_child(at, O_PATH) finds it, its
 * stat in st: the one way the helper looks at a name in kubelet's tree.
 * Returns the O_PATH fd, or -1 with r (NOTFOUND if it does not exist).
 */
int mh_at_look(const struct mh_at *at, struct stat *st, struct mh_res *r);

/*
 * Remove what a killed mh_at_make for volume_id left under its temporary
 * name in at's parent: an empty directory or an empty regular file.
 */
void mh_at_remove_temp(const struct mh_at *at, const char *volume_id);

/*
 * Create the last component, a directory (0750) or an empty regular file
 * (0600), marked as made by the helper for volume_id (an extended attribute
 * in the trusted namespace, which only CAP_SYS_ADMIN can set, naming the
 * volume and the object's inode) before it takes its name. Returns 1
 * created, 0 it existed already (left as it is), -1 with r.
 */
int mh_at_make(const struct mh_ctx *c, const struct mh_at *at, bool dir, const char *volume_id,
               struct mh_res *r);

/*
 * Remove the last component if, and only if, it is a directory or regular
 * file the helper made for volume_id (its mark, checked against the object's
 * own inode right before the unlink, and the unlink checked afterwards).
 * Returns 1 removed (or absent), 0 present but not made by the helper for
 * this volume (left alone), -1 with r (EBUSY while something is mounted on it).
 */
int mh_at_remove_ours(const struct mh_at *at, const char *volume_id, struct mh_res *r);

/*
 * A directory only root may change: owned by uid 0, not writable by group or
 * others. 0, or -1 with r (REFUSED); what names it in the reason.
 */
int mh_at_check_dir(int fd, const char *what, struct mh_res *r);
/*
 * Mark the object fd, just made, as made for id (a volume or snapshot id):
 * the trusted.sepcsi.owner attribute, "<id>:<inode>". Never replacing one,
 * but with replace: only replacing one (a btrfs snapshot's, copied by the
 * kernel from the subvolume it was made of).
 */
int mh_at_mark(int fd, const char *id, bool replace, struct mh_res *r);
/* Does the open object fd, of stat st, carry the mark of id for its own inode? */
bool mh_at_marked(int fd, const struct stat *st, const char *id);
#define MH_AT_MARK_XATTR "trusted.sepcsi.owner"
/* Does the directory the O_PATH or O_RDONLY fd refers to hold any entry? 1 yes, 0 no, -1 r. */
int mh_dir_has_entries(int dirfd, struct mh_res *r);

#endif
