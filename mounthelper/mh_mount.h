/* Mounting and unmounting by file descriptor (mh_mount.c). */
#ifndef SEPCSI_MH_MOUNT_H
#define SEPCSI_MH_MOUNT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
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
	/* MH_F_MOUNT_GROUP: give the new file system's root directory this group */
	bool set_group;
	gid_t gid;
	bool group_changed; /* out: the root directory's group or mode was changed */
};

/*
 * Split opts (already allowed by pol_mount_options_check) with libmount: VFS
 * options become mount attributes or superblock flags, the rest are passed to
 * the filesystem. readonly adds MOUNT_ATTR_RDONLY and a read-only superblock.
 * 0, or -1 with r (an option the helper cannot map is refused).
 */
int mh_mount_opts_parse(const char *opts, bool readonly, struct mh_mount_opts *o, struct mh_res *r);
void mh_mount_opts_free(struct mh_mount_opts *o);

/*
 * Mount the filesystem on device dev (a loop device path) on the directory
 * target_fd. With o->set_group, the root directory of the still detached mount
 * gets group o->gid, g+rwx and setgid first (if it does not have them yet).
 */
int mh_mount_fs(const char *dev, const char *fstype, struct mh_mount_opts *o, int target_fd,
                struct mh_res *r);

/*
 * Bind the device node src_fd (O_PATH of /dev/loopN, or of a file it is
 * already bound on) onto the regular file target_fd: nosuid (+rdonly), but
 * not nodev, or the node would be useless. See mh_block.c for why that is safe.
 */
int mh_mount_bind_dev(int src_fd, int target_fd, bool ro, struct mh_res *r);

/* What is bound on a file (or directory) fd: mounted (a mount root), its mount id, its stat. */
struct mh_fmnt {
	bool mounted;
	int id;
	bool ro; /* read-only mount */
	struct stat st;
};
int mh_mount_file_info(int fd, struct mh_fmnt *out, struct mh_res *r);

/*
 * Is a device node backed by the image (dev, ino) (any of its loop devices,
 * or only the one with device number only_rdev if that is not 0) bound
 * anywhere beneath an allowed root other than mount except_id?
 * 1 (where = that mount point), 0, or -1 with r.
 */
int mh_mount_other_dev_use(const struct pol *pol, dev_t dev, ino_t ino, dev_t only_rdev,
                           int except_id, char *where, size_t wlen, struct mh_res *r);

/* Bind a clone of the mount whose root is src_fd onto target_fd, nosuid,nodev(,rdonly). */
int mh_mount_bind(int src_fd, int target_fd, bool ro, struct mh_res *r);

/*
 * Unmount the mount with id mnt_id from name inside parent_fd (a real
 * directory fd): fchdir(parent), check the top mount at name is still mnt_id,
 * umount2(name, UMOUNT_NOFOLLOW). 0, or -1 with r (EBUSY -> MH_E_BUSY).
 */
int mh_umount(int parent_fd, const char *name, int mnt_id, struct mh_res *r);

#endif
