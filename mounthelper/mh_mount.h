/* Mounting and unmounting by file descriptor (mh_mount.c); what is mounted where (mh_mountinfo.c).
 */
#ifndef SEPCSI_MH_MOUNT_H
#define SEPCSI_MH_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "mh.h"
#include "mh_loop.h"

/*
 * The source of the helper's view's tmpfs (mh_view.c), whose /dev holds the
 * loop nodes the helper binds: a mount the tables here know as its own.
 */
#define MH_VIEW_SOURCE "sepcsi-helper"

/* What is mounted on a directory or file, read from the fd of its top-most mount. */
struct mh_mnt {
	bool mounted;   /* the fd is the root of a mount (something is mounted on the path) */
	int id;         /* mount id (first field of /proc/self/mountinfo) */
	dev_t dev;      /* the mount's device number (major:minor field) */
	bool ro;        /* read-only, per mount or per superblock */
	bool sb_ro;     /* the superblock is read-only */
	uint64_t attr;  /* MOUNT_ATTR_* of the mount (ro, nosuid, nodev, noexec, atime) */
	struct stat st; /* the object itself (the mount's root, if mounted) */
	char source[MH_PATH_MAX + 1];
	char fstype[32];
	char root[64]; /* the mount's root inside its file system ("/" for a whole one) */
};

/*
 * Is fd (O_PATH) on a file system that answers for itself? 0; or -1 with r,
 * REFUSED for one whose answers come from a daemon or a server (FUSE, NFS,
 * CIFS, Ceph, 9p, ...), which a tenant may run and stall: the helper and the
 * core never stat, open or walk into one, so no request waits on it. Asked
 * without a call into that file system (statx with AT_STATX_DONT_SYNC, and
 * the mount's type from statmount or mountinfo). what names fd in the reason.
 *
 * A stacked file system (overlay and its kind) passes on each question to
 * layers whose types its own does not show, so it is refused too.
 *
 * Neither is refused on a superblock the node's administrator put there:
 * that of the allowed root the walk started from (a node whose kubelet
 * directory lies in its container's overlay), or a base's (mh_mount_admins),
 * which a directory volume's bind shows. root_sb: 0 when fd is the allowed
 * root (its superblock is then stored there, MH_SB_PLAIN for a file system
 * that is neither), else what was stored then.
 */
#define MH_SB_PLAIN ((dev_t)-1)
int mh_mount_check_local(int fd, const char *what, dev_t *root_sb, struct mh_res *r);

/*
 * Open the absolute path O_PATH from "/", one component at a time, no
 * symlink, each component's file system checked by mh_mount_check_local
 * before the walk goes through it (the superblock of "/" standing for the
 * allowed root's). The fd, or -1 with r (REFUSED: a component on a file
 * system the helper never looks into).
 */
int mh_open_local(const char *path, struct mh_res *r);

/*
 * The superblocks of the administrator's besides the allowed root's (the
 * bases'): filled by whoever builds the view (mh_view.c), at start, before any
 * request; none in a process that did not build it, such as the core.
 */
extern dev_t mh_mount_admins[POL_BASES_MAX];
extern size_t mh_mount_nadmins;

/* Describe fd (O_PATH or open, of a directory or a file); 0, or -1 with r. */
int mh_mount_info(int fd, struct mh_mnt *out, struct mh_res *r);

/* True if m is a mount of loop device l ("/dev/loopN" as source, and its device number). */
bool mh_mount_is_loop(const struct mh_mnt *m, const struct mh_loop *l);

/*
 * Is loop device l in use by any mount in the helper's view, other than mount
 * except_id: a file system mounted from it, or a bind of its device node,
 * whatever the mount point's name? 1 (where = one such mount point), 2 when
 * the only one is a bind whose root cannot be looked at (it may be l's), 0,
 * or -1 with r. Loop devices are never detached while this says 1 or 2.
 */
int mh_loop_in_use(const struct mh_loop *l, int except_id, char *where, size_t wlen,
                   struct mh_res *r);

/*
 * A detached mount of the file system already mounted from loop device l,
 * found through any of its mounts (for FIFREEZE, FITHAW, online growing and
 * statvfs, without going through a path). The fd (caller closes), -1 with r
 * unset if l holds no mounted file system, or -1 with r set.
 */
int mh_mount_fs_fd(const struct mh_loop *l, struct mh_res *r);

/*
 * Every mount of the helper's view, as the looks below need it: one row each,
 * in the kernel's order (mh_mountinfo.c says how it is read).
 */
struct mh_mount_row {
	uint64_t uid; /* the mount's unique id (statmount), 0 when read from mountinfo */
	int id;       /* its mount id (first field of /proc/self/mountinfo) */
	dev_t dev;    /* its superblock's device number */
	int src_nr;   /* N when its source is exactly /dev/loopN, else -1 */
	bool sub;     /* its root is not its file system's root: a bind of a directory or file */
	bool nodes;   /* a bind from where the helper's loop nodes are: a helper's /dev, devtmpfs */
	bool sb_ro;   /* the superblock is read-only */
	char fstype[MH_FSTYPE_MAX + 1];
	char *target; /* its mount point, when read from mountinfo; else NULL */
	/* What its root is, once looked at (mh_mount_row_node): kept for the mount's life. */
	enum { MH_NODE_UNSEEN, MH_NODE_NONE, MH_NODE_BLOCK } node;
	dev_t rdev; /* MH_NODE_BLOCK: the device number of the block device node at its root */
};

/*
 * Look at every mount now: *table and *n hold it until the next look of
 * this process (the table is its own; the caller frees nothing). 0, or -1 with r.
 */
int mh_mounts_look(const struct mh_mount_row **table, size_t *n, struct mh_res *r);

/* The mount point of a row into buf: 1, 0 if the mount is gone, -1 if the kernel cannot say. */
int mh_mount_row_target(const struct mh_mount_row *m, char *buf, size_t len);

/*
 * Is the mount of row m (one of the last look's) a bind of a block device
 * node, and of which: 1 with *rdev, 0 not one, -1 it cannot be looked at now
 * (hidden beneath another mount, or gone). Never by a name: the object at its
 * root, reached through its mount point and proved to be that mount's root.
 * Only binds from where the helper's nodes are (row.nodes) are looked at: a
 * node elsewhere is not one the helper bound, and a tenant's file system (a
 * FUSE daemon that does not answer) is never asked.
 */
int mh_mount_row_node(const struct mh_mount_row *m, dev_t *rdev);

/* The file system mounted from loop device l (its first mount): 1 with *m, 0 none, -1 with r. */
int mh_mount_find_loop(const struct mh_loop *l, struct mh_mnt *m, struct mh_res *r);

/* The mount point of mount mnt_id into target: 1, 0 if it is gone, -1 with r. */
int mh_mount_target(int mnt_id, char *target, size_t len, struct mh_res *r);

/* A policy-checked option list, split into what goes where. */
struct mh_mount_opts {
	uint64_t attr; /* MOUNT_ATTR_* for fsmount(); NOSUID|NODEV always set */
	unsigned sb;   /* POL_SB_*: superblock flags (ro, sync, dirsync, lazytime) */
	char *fs;      /* filesystem-specific options for fsconfig (libmount-allocated) */
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
 * Mount the file system on loop device l on the directory target_fd and set
 * *id to the new mount's id. With o->set_group, the root directory of the
 * still detached mount gets group o->gid, g+rwx and setgid first (if it does
 * not have them yet). When o is for a second mount of a file system already
 * mounted (PUBLISH), the kernel hands back the same superblock.
 */
int mh_mount_fs(const struct mh_loop *l, const char *fstype, struct mh_mount_opts *o, int target_fd,
                int *id, struct mh_res *r);

/*
 * The directory dirfd (a volume's root) gets group gid, g+rwx and setgid,
 * unless it has them; *changed says it was changed. It must be owned by root.
 */
int mh_mount_set_group(int dirfd, gid_t gid, bool *changed, struct mh_res *r);
/*
 * Bind src_fd onto target_fd and set *id, not recursively (mounts beneath src
 * are not carried along), with the attributes of src's mount. Either the
 * device node src_fd (O_PATH of the helper's own /dev/loopN) onto a regular
 * file: the helper's /dev is nosuid, noexec, but not nodev, or the node would
 * be useless (mh_block.c says why that is safe); or a directory volume's
 * directory (beneath a base in the helper's view, whose mount is
 * nosuid,nodev, and read-only for a read-only bind) onto a directory.
 */
int mh_mount_bind(int src_fd, int target_fd, int *id, struct mh_res *r);

/*
 * Unmount the mount with id mnt_id from name inside parent_fd: fchdir(parent),
 * check the top mount at name is still mnt_id, umount2(name, UMOUNT_NOFOLLOW).
 * An EBUSY that only a moment's wait explains is retried briefly. 0, or -1
 * with r (EBUSY -> MH_E_BUSY).
 */
int mh_umount(int parent_fd, const char *name, int mnt_id, struct mh_res *r);

/*
 * Undo a mount the helper just made, wherever it is now: its mount point
 * from the mount table, walked without symlinks, checked to still carry
 * mnt_id, unmounted. 0, or -1 with r.
 */
int mh_umount_id(int mnt_id, struct mh_res *r);

#endif
