/*
 * What is mounted where, read-only. Two kinds of look:
 *  - what is mounted on an fd: its statx mount id, then statmount(2) of that
 *    one mount where the kernel has it, else libmount's view of
 *    /proc/self/mountinfo by that id; never by path string;
 *  - every mount of the helper's view, as a table of the few facts the
 *    helper asks of each (mh_mounts_look): listmount(2), and statmount(2) of
 *    each mount the process has not seen before, where the kernel has them;
 *    else mountinfo read whole. From it: whether a loop device is still
 *    mounted or bound anywhere, the file system mounted from a loop device,
 *    the loop devices file systems are mounted from, the mount point of a
 *    mount id, and LIST's mounts (mh_list.c).
 *
 * Runs in the helper (main loop and workers) as root under seccomp; changes
 * nothing. Nothing here is fatal.
 */
#include "mh_mount.h"

#include <errno.h>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "openat2.h"

#define MOUNTINFO "/proc/self/mountinfo"

/*
 * statmount(2) (kernel 6.8, the source string 6.11), which Debian 12's headers
 * predate: one mount described by its unique id, at a cost that does not grow
 * with the number of mounts, where reading mountinfo does. listmount(2)
 * (kernel 6.8): the unique ids of every mount reachable from the caller's
 * root, the mounts /proc/self/mountinfo shows, in increasing order.
 */
#define NR_STATMOUNT        457
#define NR_LISTMOUNT        458
#define LSMT_ROOT           (~(uint64_t)0)
#define STATX_MNT_ID_UNIQUE 0x4000U
enum {
	SM_SB_BASIC = 0x1,
	SM_MNT_BASIC = 0x2,
	SM_MNT_ROOT = 0x8,
	SM_MNT_POINT = 0x10,
	SM_FS_TYPE = 0x20,
	SM_SB_SOURCE = 0x200,
	SM_WANT = SM_SB_BASIC | SM_MNT_BASIC | SM_MNT_ROOT | SM_FS_TYPE | SM_SB_SOURCE,
};
#define SB_RDONLY_FLAG 1u
/*
 * A mount's attributes as mountinfo's options name them, no more: what either
 * source reports (strictatime is where mountinfo names neither relatime nor
 * noatime).
 */
#define MNT_ATTRS                                                                                  \
	(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC |            \
	 MOUNT_ATTR_NOATIME | MOUNT_ATTR_STRICTATIME | MOUNT_ATTR_NODIRATIME)

struct sm_head { /* struct statmount before its strings (<linux/mount.h>) */
	uint32_t size, mnt_opts;
	uint64_t mask;
	uint32_t sb_dev_major, sb_dev_minor;
	uint64_t sb_magic;
	uint32_t sb_flags, fs_type;
	uint64_t mnt_id, mnt_parent_id;
	uint32_t mnt_id_old, mnt_parent_id_old;
	uint64_t mnt_attr, mnt_propagation, mnt_peer_group, mnt_master, propagate_from;
	uint32_t mnt_root, mnt_point;
	uint64_t mnt_ns_id;
	uint32_t fs_subtype, sb_source;
	uint32_t opt_num, opt_array, opt_sec_num, opt_sec_array;
	uint64_t supported_mask;
	uint32_t uidmap_num, uidmap, gidmap_num, gidmap;
	uint64_t spare[43];
};
_Static_assert(sizeof(struct sm_head) == 512 && offsetof(struct sm_head, mnt_id_old) == 56 &&
                   offsetof(struct sm_head, sb_source) == 124,
               "struct statmount's layout");

static bool opt_set(const char *optstr, const char *name)
{
	return optstr && mnt_optstr_get_option(optstr, name, NULL, NULL) == 0;
}

/*
 * The facts of a mount, read in one place for each source (st and mounted are
 * the caller's): from libmount's view of a mountinfo line here, from
 * statmount in from_sm. A row of the table (row_of) is made from them too.
 */
static void from_fs(struct libmnt_fs *fs, struct mh_mnt *out)
{
	const char *src = mnt_fs_get_source(fs), *type = mnt_fs_get_fstype(fs);
	const char *root = mnt_fs_get_root(fs);
	/* libmount's parser only reads the string it walks. */
	char *cur = (char *)mnt_fs_get_vfs_options(fs), *name, *value;
	size_t nsz, vsz;
	out->id = mnt_fs_get_id(fs);
	out->dev = mnt_fs_get_devno(fs);
	out->sb_ro = opt_set(mnt_fs_get_fs_options(fs), "ro");
	out->attr = 0;
	/* The attributes the options name, by the table the helper's own mounts are made by. */
	while (cur && mnt_optstr_next_option(&cur, &name, &nsz, &value, &vsz) == 0) {
		const struct pol_vfs_opt *v = pol_vfs_opt(name, nsz);
		out->attr |= v ? v->attr_set & MNT_ATTRS : 0;
	}
	if (!(out->attr & MOUNT_ATTR_NOATIME) && !opt_set(mnt_fs_get_vfs_options(fs), "relatime"))
		out->attr |= MOUNT_ATTR_STRICTATIME;
	out->ro = out->sb_ro || (out->attr & MOUNT_ATTR_RDONLY);
	snprintf(out->source, sizeof(out->source), "%s", src ? src : "");
	snprintf(out->fstype, sizeof(out->fstype), "%s", type ? type : "");
	snprintf(out->root, sizeof(out->root), "%s", root ? root : "");
}

/* A string of a statmount answer, if its offset lies within the answer. */
static const char *sm_str(const struct sm_head *h, uint32_t off)
{
	size_t room = h->size > sizeof(*h) ? h->size - sizeof(*h) : 0;
	return off < room ? (const char *)(h + 1) + off : "";
}

/*
 * statmount(2) of the mount with unique id uid, asking for want, into buf (an
 * sm_head followed by room for strings): 1, 0 if the mount is gone, -1 if the
 * kernel cannot answer it all. The request is struct mnt_id_req, its first
 * version: u32 size (24) and u32 spare (0), little-endian in the first word
 * (the filters are x86_64 only), then the unique id and what to report.
 */
static int sm_ask(uint64_t uid, uint64_t want, struct sm_head *buf, size_t len)
{
	const uint64_t q[3] = {24, uid, want};
	if (syscall(NR_STATMOUNT, q, buf, len, 0) < 0)
		return errno == ENOENT ? 0 : -1;
	return (buf->mask & want) == want && buf->size <= len ? 1 : -1;
}

/*
 * The facts of the mount with unique id uid from statmount (SM_WANT), as
 * from_fs reads them from mountinfo: 1, 0 if the mount is gone, -1 if the
 * kernel cannot answer it all.
 */
static int from_sm(uint64_t uid, struct mh_mnt *out)
{
	static union {
		struct sm_head h;
		char bytes[sizeof(struct sm_head) + 3 * ((size_t)MH_PATH_MAX + 1)];
	} buf;
	const struct sm_head *h = &buf.h;
	int rc = sm_ask(uid, SM_WANT, &buf.h, sizeof(buf.bytes));
	if (rc != 1)
		return rc;
	out->id = (int)h->mnt_id_old;
	out->dev = makedev(h->sb_dev_major, h->sb_dev_minor);
	out->sb_ro = (h->sb_flags & SB_RDONLY_FLAG) != 0;
	out->ro = out->sb_ro || (h->mnt_attr & MOUNT_ATTR_RDONLY);
	out->attr = h->mnt_attr & MNT_ATTRS;
	snprintf(out->source, sizeof(out->source), "%s", sm_str(h, h->sb_source));
	snprintf(out->fstype, sizeof(out->fstype), "%s", sm_str(h, h->fs_type));
	snprintf(out->root, sizeof(out->root), "%s", sm_str(h, h->mnt_root));
	return 1;
}

/* From mountinfo: the mount with id; 1 (out filled), 0 none, -1 with r. */
static int by_mountinfo(int id, struct mh_mnt *out, struct mh_res *r)
{
	struct libmnt_table *tb = mnt_new_table_from_file(MOUNTINFO);
	struct libmnt_fs *fs = NULL;
	if (!tb)
		return mh_fail(r, MH_E_FAILED, errno ? errno : EIO, "cannot read " MOUNTINFO);
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	if (!it)
		abort();
	while (mnt_table_next_fs(tb, it, &fs) == 0 && mnt_fs_get_id(fs) != id)
		fs = NULL;
	if (fs)
		from_fs(fs, out);
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return fs != NULL;
}

/* File systems whose answers come from a daemon or a server, which may never answer. */
static bool answered_elsewhere(const char *fstype)
{
	static const char *const types[] = {
	    "fuse",      "fuseblk", "nfs",   "nfs4",   "cifs",     "smb3",   "smbfs",    "ceph",
	    "glusterfs", "9p",      "afs",   "lustre", "virtiofs", "autofs", "orangefs", "pvfs2",
	    "coda",      "gfs2",    "ocfs2", "beegfs", "gpfs",     "ncpfs",  "vboxsf",   "vmhgfs"};
	if (strncmp(fstype, "fuse.", 5) == 0)
		return true;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(fstype, types[i]) == 0)
			return true;
	return false;
}

/* File systems that answer by asking layers beneath them, of types they do not show. */
static bool stacked(const char *fstype)
{
	static const char *const types[] = {"overlay", "aufs", "ecryptfs", "shiftfs", "unionfs"};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(fstype, types[i]) == 0)
			return true;
	return false;
}

dev_t mh_mount_admins[POL_BASES_MAX];
size_t mh_mount_nadmins;

/* Superblocks the node's administrator put there: the allowed root's and the bases'. */
static bool admins(dev_t sb, dev_t root_sb)
{
	bool found = sb == root_sb;
	for (size_t i = 0; i < mh_mount_nadmins && !found; i++)
		found = mh_mount_admins[i] == sb;
	return found;
}

/*
 * The facts of the mount fd is on (m->mounted: fd is its root), as statx with
 * how finds it: by statmount of its unique id (*uid) where the kernel has both,
 * else from mountinfo by its id; with plain_too false, none read when fd is no
 * mount's root. 0; 1, none read, when its unique id is known; or -1 with r.
 */
static int facts(int fd, int how, bool plain_too, uint64_t known, struct mh_mnt *m, uint64_t *uid,
                 struct mh_res *r)
{
	struct statx stx;
	*uid = 0;
	errno = 0; /* the reason below is this look's, never an earlier call's */
	for (unsigned want = STATX_MNT_ID_UNIQUE; want;
	     want = want == STATX_MNT_ID ? 0 : STATX_MNT_ID) {
		if (statx(fd, "", how, want, &stx) < 0 || !(stx.stx_mask & want) ||
		    !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
			continue;
		m->mounted = (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
		if (!m->mounted && !plain_too)
			return 0; /* a plain directory or file: nothing mounted on it */
		if (want == STATX_MNT_ID_UNIQUE && stx.stx_mnt_id == known)
			return 1; /* looked at before */
		if (want == STATX_MNT_ID_UNIQUE) {
			*uid = stx.stx_mnt_id;
			if (from_sm(*uid, m) == 1)
				return 0;
		} else if (by_mountinfo((int)stx.stx_mnt_id, m, r) == 1) {
			return 0;
		}
	}
	return mh_fail(r, MH_E_FAILED, errno ? errno : ENOSYS, "which mount holds the path: %s",
	               strerror(errno ? errno : ENOSYS));
}

int mh_mount_check_local(int fd, const char *what, dev_t *root_sb, struct mh_res *r)
{
	static _Atomic uint64_t last_local; /* a unique mount id is never reused: one look each */
	struct mh_mnt m = {0};
	uint64_t uid;
	/* The cached attributes only: nothing here waits on the file system itself. */
	const int how = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC;
	int rc = facts(fd, how, true, last_local, &m, &uid, r);
	if (*root_sb == 0)
		*root_sb = rc == 1 ? MH_SB_PLAIN : m.dev;
	if (rc != 0) /* 1: looked at before, neither answered elsewhere nor stacked */
		return rc < 0 ? -1 : 0;
	bool elsewhere = answered_elsewhere(m.fstype), layered = stacked(m.fstype);
	if ((elsewhere || layered) && !admins(m.dev, *root_sb))
		return mh_fail(r, MH_E_REFUSED, EREMOTE,
		               elsewhere
		                   ? "%s is on a %s file system, whose answers come from a "
		                     "daemon or a server that may never answer: never looked into"
		                   : "%s is on a %s file system mounted beneath the allowed "
		                     "root, whose answers come from layers of any type: never "
		                     "looked into",
		               what, m.fstype);
	if (uid && !elsewhere && !layered)
		last_local = uid;
	return 0;
}

int mh_open_local(const char *path, struct mh_res *r)
{
	char comp[MH_PATH_MAX + 1];
	dev_t root_sb = 0;
	if (path[0] != '/' || strlen(path) > MH_PATH_MAX)
		return mh_fail(r, MH_E_FAILED, EINVAL, "not an absolute path: %.100s", path);
	int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || mh_mount_check_local(fd, "/", &root_sb, r) < 0)
		goto fail;
	for (const char *s = path + 1; *s != '\0';) {
		size_t n = strcspn(s, "/");
		memcpy(comp, s, n);
		comp[n] = '\0';
		s += n + (s[n] == '/');
		if (n == 0)
			continue;
		int next =
		    openat2_retry(fd, comp, O_PATH | O_NOFOLLOW, 0,
		                  RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
		close(fd);
		fd = next;
		if (fd < 0 || mh_mount_check_local(fd, "a mount point's path", &root_sb, r) < 0)
			goto fail;
	}
	return fd;
fail:
	if (fd < 0)
		mh_fail(r, mh_kind_of_errno(errno), errno, "cannot open %.100s: %s", path,
		        strerror(errno));
	mh_closep(&fd);
	return -1;
}

int mh_mount_info(int fd, struct mh_mnt *out, struct mh_res *r)
{
	uint64_t uid;
	memset(out, 0, sizeof(*out));
	if (fstat(fd, &out->st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "fstat: %s", strerror(errno));
	return facts(fd, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, false, 0, out, &uid,
	             r);
}

bool mh_mount_is_loop(const struct mh_mnt *m, const struct mh_loop *l)
{
	if (!m->mounted || strcmp(m->source, l->path) != 0)
		return false;
	/* btrfs reports an anonymous device number; the others report the block device. */
	return m->dev == l->rdev || strcmp(m->fstype, "btrfs") == 0;
}

/* ---- every mount: the table ------------------------------------------------ */

/*
 * The last complete look, in the order the kernel lists the mounts. A row's
 * facts do not change for the mount's life, and the kernel never gives a
 * unique id twice while it runs, so with listmount a look asks statmount only
 * about mounts the process has not seen yet: the rows are kept by unique id,
 * in increasing order, as listmount gives them. From mountinfo (no unique
 * ids), every look reads the whole table again and keeps the mount points.
 * The table is per process (the main loop, each worker).
 */
static struct mh_mount_row *rows;
static size_t nrows;

static void rows_free(struct mh_mount_row *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].target);
	free(v);
}

/* A complete look (ok): it becomes the table; else it is dropped. 0, or -1. */
static int rows_keep(struct mh_mount_row *now, size_t nnow, bool ok)
{
	if (!ok) {
		rows_free(now, nnow);
		return -1;
	}
	rows_free(rows, nrows);
	rows = now;
	nrows = nnow;
	return 0;
}

/* One more row at the end of *v (grown as needed); NULL when memory ran out. */
static struct mh_mount_row *row_add(struct mh_mount_row **v, size_t *n, size_t *cap)
{
	if (*n == *cap) {
		size_t more = *cap ? 2 * *cap : 256;
		struct mh_mount_row *nv = realloc(*v, more * sizeof(**v));
		if (!nv)
			return NULL;
		*v = nv;
		*cap = more;
	}
	memset(&(*v)[*n], 0, sizeof(**v));
	return &(*v)[(*n)++];
}

/* A row of the table from the facts of its mount (uid 0 when they come from mountinfo). */
static void row_of(const struct mh_mnt *f, uint64_t uid, struct mh_mount_row *m)
{
	*m = (struct mh_mount_row){.uid = uid,
	                           .id = f->id,
	                           .dev = f->dev,
	                           .sb_ro = f->sb_ro,
	                           .src_nr = mh_loop_nr_of(f->source, "/dev/loop"),
	                           .sub = strcmp(f->root, "/") != 0};
	snprintf(m->fstype, sizeof(m->fstype), "%.*s", MH_FSTYPE_MAX, f->fstype);
	m->nodes =
	    m->sub && (strcmp(m->fstype, "devtmpfs") == 0 ||
	               (strcmp(m->fstype, "tmpfs") == 0 && strcmp(f->source, MH_VIEW_SOURCE) == 0));
}

/* statmount of the mount with unique id uid into m: 1, 0 if it is gone, -1 if it cannot. */
static int learn(uint64_t uid, struct mh_mount_row *m)
{
	struct mh_mnt f;
	int rc = from_sm(uid, &f);
	if (rc == 1)
		row_of(&f, uid, m);
	return rc;
}

/*
 * The table by listmount: every mount now, those seen before taken from the
 * last look. Unique ids only grow, so a mount made during the look is listed
 * in a later batch; one removed meanwhile is skipped. 0, or -1 if the kernel
 * cannot answer this way (or memory ran out): the table is then unchanged.
 */
static int look_listmount(void)
{
	static uint64_t ids[1024];
	struct mh_mount_row *now = NULL;
	size_t nnow = 0, cap = 0, j = 0;
	uint64_t last = 0;
	long n;
	do {
		const uint64_t q[3] = {24, LSMT_ROOT, last};
		n = syscall(NR_LISTMOUNT, q, ids, sizeof(ids) / sizeof(ids[0]), 0);
		for (long i = 0; i < n; i++) {
			struct mh_mount_row m;
			while (j < nrows && rows[j].uid < ids[i])
				j++; /* gone since the last look */
			int known = j < nrows && rows[j].uid == ids[i] ? (m = rows[j], 1)
			                                               : learn(ids[i], &m);
			struct mh_mount_row *to = known > 0 ? row_add(&now, &nnow, &cap) : NULL;
			if (known < 0 || (known > 0 && !to))
				return rows_keep(now, nnow, false);
			if (to)
				*to = m;
		}
		if (n > 0)
			last = ids[n - 1];
	} while (n == (long)(sizeof(ids) / sizeof(ids[0])));
	return rows_keep(now, nnow, n >= 0);
}

/* The table from mountinfo, read whole: 0, or -1 with r. */
static int look_mountinfo(struct mh_res *r)
{
	struct libmnt_table *tb = mnt_new_table_from_file(MOUNTINFO);
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	struct mh_mount_row *now = NULL;
	size_t nnow = 0, cap = 0;
	int ret = 0;
	if (!it)
		abort();
	if (!tb)
		ret = mh_fail(r, MH_E_FAILED, errno ? errno : EIO, "cannot read " MOUNTINFO);
	while (ret == 0 && mnt_table_next_fs(tb, it, &fs) == 0) {
		struct mh_mount_row *m = row_add(&now, &nnow, &cap);
		const char *t = mnt_fs_get_target(fs);
		struct mh_mnt f;
		from_fs(fs, &f);
		if (m)
			row_of(&f, 0, m);
		if (!m || !(m->target = strdup(t ? t : ""))) {
			ret = mh_fail(r, MH_E_FAILED, ENOMEM, "out of memory");
			break;
		}
	}
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return rows_keep(now, nnow, ret == 0);
}

int mh_mounts_look(const struct mh_mount_row **table, size_t *n, struct mh_res *r)
{
	if (look_listmount() < 0 && look_mountinfo(r) < 0)
		return -1;
	*table = rows;
	*n = nrows;
	return 0;
}

int mh_mount_row_target(const struct mh_mount_row *m, char *buf, size_t len)
{
	static union {
		struct sm_head h;
		char bytes[sizeof(struct sm_head) + (size_t)MH_PATH_MAX + 1];
	} sm;
	if (m->target) {
		snprintf(buf, len, "%s", m->target);
		return 1;
	}
	int rc = sm_ask(m->uid, SM_MNT_POINT, &sm.h, sizeof(sm.bytes));
	snprintf(buf, len, "%s", rc == 1 ? sm_str(&sm.h, sm.h.mnt_point) : "");
	return rc;
}

int mh_mount_row_node(const struct mh_mount_row *m, dev_t *rdev)
{
	struct mh_mount_row *row = &rows[m - rows]; /* one of ours: its finding is kept */
	char target[MH_PATH_MAX + 1];
	struct statx stx;
	const unsigned want = row->uid ? STATX_MNT_ID_UNIQUE : STATX_MNT_ID;
	if (!row->nodes)
		return 0; /* a file system's own root is a directory; not a node the helper bound */
	int seen =
	    row->node == MH_NODE_UNSEEN ? mh_mount_row_target(row, target, sizeof(target)) : -1;
	if (seen == 0)
		row->node = MH_NODE_NONE; /* unmounted since the listing: it holds nothing now */
	if (seen == 1) {
		/* Its mount point leads to its root only if no other mount hides it. */
		/* Each component's file system looked at before it is walked through: never a
		 * request to one that may be a tenant's (a FUSE daemon that does not answer). */
		int fd = mh_open_local(target, &(struct mh_res){0});
		if (fd >= 0 &&
		    statx(fd, "",
		          AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT |
		              AT_STATX_DONT_SYNC,
		          want | STATX_TYPE, &stx) == 0 &&
		    (stx.stx_mask & want) &&
		    stx.stx_mnt_id == (row->uid ? row->uid : (uint64_t)row->id)) {
			row->node = S_ISBLK(stx.stx_mode) ? MH_NODE_BLOCK : MH_NODE_NONE;
			row->rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
		}
		if (fd >= 0)
			close(fd);
		/*
		 * Not seen at its mount point: hidden, or unmounted meanwhile (a
		 * concurrent unpublish of another volume). Only a mount the kernel
		 * no longer knows by its unique id is proved to hold nothing.
		 */
		if (row->node == MH_NODE_UNSEEN && row->uid &&
		    mh_mount_row_target(row, target, sizeof(target)) == 0)
			row->node = MH_NODE_NONE;
	}
	*rdev = row->rdev;
	return row->node == MH_NODE_UNSEEN ? -1 : row->node == MH_NODE_BLOCK;
}

/* ---- what the table answers ------------------------------------------------ */

/*
 * A file system on the device (its source /dev/loopN, or its device number),
 * or a bind of its node, proved by the device number of the node at the
 * bind's root (mh_mount_row_node): wherever it is, whatever its mount point
 * or the node is called (1). A false match only makes a detach wait; a missed
 * one could hand the device to another volume. So a bind from where the
 * helper's nodes are whose root cannot be looked at (hidden beneath another
 * mount, or beneath a directory the helper may not enter) may be the
 * device's (2), and no detach passes it.
 */
static int row_uses(const struct mh_mount_row *m, const struct mh_loop *l)
{
	dev_t rdev;
	if (m->src_nr == l->nr || m->dev == l->rdev)
		return 1;
	int node = mh_mount_row_node(m, &rdev);
	return node > 0 ? rdev == l->rdev : node < 0 ? 2 : 0;
}

/* NOLINTNEXTLINE(readability-non-const-parameter): where is written */
int mh_loop_in_use(const struct mh_loop *l, int except_id, char *where, size_t wlen,
                   struct mh_res *r)
{
	const struct mh_mount_row *v;
	size_t n;
	int used = 0;
	if (mh_mounts_look(&v, &n, r) < 0)
		return -1;
	for (size_t i = 0; i < n && used != 1; i++) {
		int u = v[i].id == except_id ? 0 : row_uses(&v[i], l);
		if (u == 0 || u == used)
			continue;
		used = u; /* a use seen (1) is named before a bind that could not be looked at */
		if (mh_mount_row_target(&v[i], where, wlen) != 1)
			snprintf(where, wlen, "?");
	}
	return used;
}

int mh_mount_find_loop(const struct mh_loop *l, struct mh_mnt *m, struct mh_res *r)
{
	const struct mh_mount_row *v;
	size_t n;
	if (mh_mounts_look(&v, &n, r) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i].src_nr != l->nr)
			continue;
		*m = (struct mh_mnt){.mounted = true,
		                     .id = v[i].id,
		                     .dev = v[i].dev,
		                     .sb_ro = v[i].sb_ro,
		                     .ro = v[i].sb_ro};
		snprintf(m->source, sizeof(m->source), "%s", l->path);
		snprintf(m->fstype, sizeof(m->fstype), "%s", v[i].fstype);
		if (mh_mount_is_loop(m, l))
			return 1;
	}
	return 0;
}

/* NOLINTNEXTLINE(readability-non-const-parameter): written */
int mh_mount_target(int mnt_id, char *target, size_t len, struct mh_res *r)
{
	const struct mh_mount_row *v;
	size_t n;
	if (mh_mounts_look(&v, &n, r) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i].id != mnt_id)
			continue;
		int rc = mh_mount_row_target(&v[i], target, len);
		return rc >= 0 ? rc
		               : mh_fail(r, MH_E_FAILED, errno, "mount point of mount %d", mnt_id);
	}
	return 0;
}
