/* Mounting and unmounting by file descriptor (mh_mount.c). */
#ifndef SEPCSI_MH_MOUNT_H
#define SEPCSI_MH_MOUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "mh.h"
#include "mh_loop.h"

/* What is mounted on a directory. */
struct mh_mnt {
	bool mounted; /* the directory is the root of a mount (something is mounted on it) */
	int id;       /* mount id (first field of /proc/self/mountinfo) */
	dev_t dev;    /* the mount's device number (major:minor field) */
	bool ro;      /* read-only, per mount or per superblock */
	char source[MH_PATH_MAX + 1];
	char fstype[32];
};

/* Describe what is mounted on the directory dirfd refers to; 0, or -1 with r. */
int mh_mount_info(int dirfd, struct mh_mnt *out, struct mh_res *r);

/* True if m is a mount of loop device l ("/dev/loopN" as source, and its device number). */
bool mh_mount_is_loop(const struct mh_mnt *m, const struct mh_loop *l);

/*
 * Is loop device l mounted anywhere beneath an allowed root other than the
 * mount with id except_id? 1 (where = one such mount point), 0, or -1 with r.
 */
int mh_mount_other_use(const struct pol *pol, const struct mh_loop *l, int except_id, char *where,
                       size_t wlen, struct mh_res *r);

/* A policy-checked option list, split into what goes where. */
struct mh_mount_opts {
	uint64_t attr; /* MOUNT_ATTR_* for fsmount(); NOSUID|NODEV always set */
	bool sb_ro;    /* superblock read-only */
	bool sb_sync, sb_dirsync, sb_lazytime;
	char *fs; /* filesystem-specific options for fsconfig (libmount-allocated) */
};

/*
 * Split opts (already allowed by pol_mount_options_check) with libmount: VFS
 * options become mount attributes or superblock flags, the rest are passed to
 * the filesystem. readonly adds MOUNT_ATTR_RDONLY and a read-only superblock.
 * 0, or -1 with r (an option the helper cannot map is refused).
 */
int mh_mount_opts_parse(const char *opts, bool readonly, struct mh_mount_opts *o, struct mh_res *r);
void mh_mount_opts_free(struct mh_mount_opts *o);

/* Mount the filesystem on device dev (a loop device path) on the directory target_fd. */
int mh_mount_fs(const char *dev, const char *fstype, const struct mh_mount_opts *o, int target_fd,
                struct mh_res *r);

/* Bind a clone of the mount whose root is src_fd onto target_fd, nosuid,nodev(,rdonly). */
int mh_mount_bind(int src_fd, int target_fd, bool ro, struct mh_res *r);

/*
 * Unmount the mount with id mnt_id from name inside parent_fd (a real
 * directory fd): fchdir(parent), check the top mount at name is still mnt_id,
 * umount2(name, UMOUNT_NOFOLLOW). 0, or -1 with r (EBUSY -> MH_E_BUSY).
 */
int mh_umount(int parent_fd, const char *name, int mnt_id, struct mh_res *r);

#endif
