/*
 * What is mounted where, read-only: what is mounted on an fd (statx mount id,
 * then statmount(2) of that one mount where the kernel has it, else libmount's
 * view of /proc/self/mountinfo by that id; never by path string), whether a mount is one of a loop
 * device, whether a loop device is still mounted or bound anywhere (listmount(2), and statmount(2)
 * of every mount the process has not seen before, where the kernel has them; else mountinfo),
 * and the mount point of a mount id.
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
	SM_USE = SM_SB_BASIC | SM_MNT_BASIC | SM_MNT_ROOT | SM_SB_SOURCE,
};
#define SB_RDONLY_FLAG 1u

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

static struct libmnt_table *mountinfo_load(struct mh_res *r)
{
	struct libmnt_table *tb = mnt_new_table_from_file(MOUNTINFO);
	if (!tb)
		mh_fail(r, MH_E_FAILED, errno ? errno : EIO, "cannot read " MOUNTINFO);
	return tb;
}

static bool opt_set(const char *optstr, const char *name)
{
	return optstr && mnt_optstr_get_option(optstr, name, NULL, NULL) == 0;
}

static void fill_from_fs(struct libmnt_fs *fs, struct mh_mnt *out)
{
	static const struct {
		const char *opt;
		uint64_t attr;
	} attrs[] = {
	    {"ro", MOUNT_ATTR_RDONLY},         {"nosuid", MOUNT_ATTR_NOSUID},
	    {"nodev", MOUNT_ATTR_NODEV},       {"noexec", MOUNT_ATTR_NOEXEC},
	    {"noatime", MOUNT_ATTR_NOATIME},   {"nodiratime", MOUNT_ATTR_NODIRATIME},
	    {"relatime", MOUNT_ATTR_RELATIME},
	};
	const char *src = mnt_fs_get_source(fs), *type = mnt_fs_get_fstype(fs);
	const char *root = mnt_fs_get_root(fs), *vfs = mnt_fs_get_vfs_options(fs);
	out->id = mnt_fs_get_id(fs);
	out->dev = mnt_fs_get_devno(fs);
	out->sb_ro = opt_set(mnt_fs_get_fs_options(fs), "ro");
	out->ro = out->sb_ro || opt_set(vfs, "ro");
	out->attr = 0;
	for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
		if (opt_set(vfs, attrs[i].opt))
			out->attr |= attrs[i].attr;
	snprintf(out->source, sizeof(out->source), "%s", src ? src : "");
	snprintf(out->fstype, sizeof(out->fstype), "%s", type ? type : "");
	snprintf(out->root, sizeof(out->root), "%s", root ? root : "");
}

/*
 * Walk the mount table; for each entry call fn, which returns 1 to stop with
 * that entry (0 to go on). 1 found, 0 not, -1 with r.
 */
int mh_mount_each(int (*fn)(struct libmnt_fs *fs, void *arg), void *arg, struct mh_res *r)
{
	struct libmnt_table *tb = mountinfo_load(r);
	if (!tb)
		return -1;
	struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
	struct libmnt_fs *fs;
	int found = 0;
	if (!it)
		abort();
	while (!found && mnt_table_next_fs(tb, it, &fs) == 0)
		found = fn(fs, arg);
	mnt_free_iter(it);
	mnt_unref_table(tb);
	return found;
}

struct by_id {
	int id;
	struct mh_mnt *out;
	char *target;
	size_t tlen;
};

static int match_id(struct libmnt_fs *fs, void *arg)
{
	struct by_id *b = arg;
	if (mnt_fs_get_id(fs) != b->id)
		return 0;
	if (b->out)
		fill_from_fs(fs, b->out);
	if (b->target) {
		const char *t = mnt_fs_get_target(fs);
		snprintf(b->target, b->tlen, "%s", t ? t : "");
	}
	return 1;
}

/* A string of a statmount answer, if its offset lies within the answer. */
static const char *sm_str(const struct sm_head *h, uint32_t off)
{
	size_t room = h->size > sizeof(*h) ? h->size - sizeof(*h) : 0;
	return off < room ? (const char *)(h + 1) + off : "";
}

/* Fill out from statmount of the mount with unique id uid; -1 if the kernel cannot. */
static int by_statmount(uint64_t uid, struct mh_mnt *out)
{
	static union {
		struct sm_head h;
		char bytes[sizeof(struct sm_head) + 3 * ((size_t)MH_PATH_MAX + 1)];
	} buf;
	const uint64_t attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
	                       MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOATIME | MOUNT_ATTR_NODIRATIME;
	/*
	 * struct mnt_id_req, its first version: u32 size (24) and u32 spare (0),
	 * little-endian in the first word (the filters are x86_64 only), then the
	 * mount's unique id and what to report.
	 */
	const uint64_t q[3] = {24, uid, SM_WANT};
	const struct sm_head *h = &buf.h;
	if (syscall(NR_STATMOUNT, q, buf.bytes, sizeof(buf.bytes), 0) < 0 ||
	    (h->mask & SM_WANT) != SM_WANT || h->size > sizeof(buf))
		return -1;
	out->id = (int)h->mnt_id_old;
	out->dev = makedev(h->sb_dev_major, h->sb_dev_minor);
	out->sb_ro = (h->sb_flags & SB_RDONLY_FLAG) != 0;
	out->ro = out->sb_ro || (h->mnt_attr & MOUNT_ATTR_RDONLY);
	out->attr = h->mnt_attr & attrs; /* what the mountinfo options name, no more */
	snprintf(out->source, sizeof(out->source), "%s", sm_str(h, h->sb_source));
	snprintf(out->fstype, sizeof(out->fstype), "%s", sm_str(h, h->fs_type));
	snprintf(out->root, sizeof(out->root), "%s", sm_str(h, h->mnt_root));
	return 0;
}

int mh_mount_info(int fd, struct mh_mnt *out, struct mh_res *r)
{
	struct statx stx;
	const int how = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT;
	memset(out, 0, sizeof(*out));
	if (fstat(fd, &out->st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "fstat: %s", strerror(errno));
	if (statx(fd, "", how, STATX_MNT_ID_UNIQUE, &stx) == 0 &&
	    (stx.stx_mask & STATX_MNT_ID_UNIQUE) &&
	    (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT)) {
		if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
			return 0; /* a plain directory or file: nothing mounted on it */
		out->mounted = true;
		if (by_statmount(stx.stx_mnt_id, out) == 0)
			return 0;
	}
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_MNT_ID,
	          &stx) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "statx: %s", strerror(errno));
	if (!(stx.stx_mask & STATX_MNT_ID) || !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return mh_fail(r, MH_E_FAILED, ENOSYS, "kernel reports no mount id");
	if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return 0; /* a plain directory or file: nothing mounted on it */
	out->mounted = true;
	struct by_id b = {.id = (int)stx.stx_mnt_id, .out = out};
	int found = mh_mount_each(match_id, &b, r);
	if (found == 0)
		mh_fail(r, MH_E_FAILED, ENOENT, "mount %d not in " MOUNTINFO, b.id);
	return found == 1 ? 0 : -1;
}

bool mh_mount_is_loop(const struct mh_mnt *m, const struct mh_loop *l)
{
	if (!m->mounted || strcmp(m->source, l->path) != 0)
		return false;
	/* btrfs reports an anonymous device number; the others report the block device. */
	return m->dev == l->rdev || strcmp(m->fstype, "btrfs") == 0;
}

struct use {
	const struct mh_loop *l;
	int except;
	char *where;
	size_t wlen;
	int found_id;
};

/*
 * A file system on the device (by name or device number), or a bind of its
 * node (a mount whose root is a file named loopN, on devtmpfs or the helper's
 * own /dev): wherever it is, whatever its mount point is called. A false
 * match only makes a detach wait; a missed one could hand the device to
 * another volume, so the test is broad.
 */
static bool is_use(const struct use *u, int id, const char *src, dev_t dev, const char *root)
{
	const char *base = root ? strrchr(root, '/') : NULL;
	char node[24];
	snprintf(node, sizeof(node), "loop%d", u->l->nr);
	return id != u->except && ((src && strcmp(src, u->l->path) == 0) || dev == u->l->rdev ||
	                           (base && strcmp(base + 1, node) == 0));
}

static int match_use(struct libmnt_fs *fs, void *arg)
{
	struct use *u = arg;
	if (!is_use(u, mnt_fs_get_id(fs), mnt_fs_get_source(fs), mnt_fs_get_devno(fs),
	            mnt_fs_get_root(fs)))
		return 0;
	const char *t = mnt_fs_get_target(fs);
	snprintf(u->where, u->wlen, "%s", t ? t : "?");
	u->found_id = mnt_fs_get_id(fs);
	return 1;
}

/*
 * What is_use() needs to know of a mount, kept by the mount's unique id: the
 * kernel never gives a unique id twice while it runs, and a mount's
 * superblock, source and root do not change for the mount's life. So a look
 * at every mount asks the kernel (statmount) only about the mounts the
 * process has not seen yet; the rest is one listmount. The list is per
 * process (the main loop, each worker) and holds exactly the mounts of the
 * last complete look, in id order.
 */
struct seen {
	uint64_t uid;
	int id;      /* the mount id of mountinfo */
	dev_t dev;   /* the superblock's device */
	int src_nr;  /* N when the source is exactly /dev/loopN, else -1 */
	int root_nr; /* N when the root's last component is exactly loopN, else -1 */
};

static struct seen *seen;
static size_t nseen;

int mh_loop_nr_of(const char *s, const char *prefix)
{
	size_t len = strlen(prefix);
	char again[32];
	if (!s || strncmp(s, prefix, len) != 0 || s[len] < '0' || s[len] > '9')
		return -1;
	long nr = strtol(s + len, NULL, 10);
	if (nr < 0 || nr > 1 << 20)
		return -1;
	snprintf(again, sizeof(again), "%s%ld", prefix, nr);
	return strcmp(again, s) == 0 ? (int)nr : -1;
}

/* statmount of the mount with unique id uid into out: 1, 0 if it is gone, -1 if the kernel
 * cannot say (then the whole look is made from mountinfo instead). */
static int learn(uint64_t uid, struct seen *out)
{
	static union {
		struct sm_head h;
		char bytes[sizeof(struct sm_head) + 2 * ((size_t)MH_PATH_MAX + 1)];
	} buf;
	const struct sm_head *h = &buf.h;
	const uint64_t q[3] = {24, uid, SM_USE}; /* struct mnt_id_req, as in by_statmount */
	if (syscall(NR_STATMOUNT, q, buf.bytes, sizeof(buf.bytes), 0) < 0)
		return errno == ENOENT ? 0 : -1;
	if ((h->mask & SM_USE) != SM_USE || h->size > sizeof(buf))
		return -1;
	const char *root = sm_str(h, h->mnt_root), *base = strrchr(root, '/');
	*out = (struct seen){.uid = uid,
	                     .id = (int)h->mnt_id_old,
	                     .dev = makedev(h->sb_dev_major, h->sb_dev_minor),
	                     .src_nr = mh_loop_nr_of(sm_str(h, h->sb_source), "/dev/loop"),
	                     .root_nr = mh_loop_nr_of(base ? base + 1 : root, "loop")};
	return 1;
}

/* is_use() of a mount seen; for one in use, its mount point into u->where. */
static bool use_of_seen(struct use *u, const struct seen *m)
{
	if (m->id == u->except ||
	    !(m->src_nr == u->l->nr || m->dev == u->l->rdev || m->root_nr == u->l->nr))
		return false;
	static union {
		struct sm_head h;
		char bytes[sizeof(struct sm_head) + (size_t)MH_PATH_MAX + 1];
	} buf;
	const struct sm_head *h = &buf.h;
	const uint64_t p[3] = {24, m->uid, SM_MNT_POINT};
	bool named = syscall(NR_STATMOUNT, p, buf.bytes, sizeof(buf.bytes), 0) == 0 &&
	             (h->mask & SM_MNT_POINT) && h->size <= sizeof(buf);
	snprintf(u->where, u->wlen, "%s", named ? sm_str(h, h->mnt_point) : "?");
	u->found_id = m->id;
	return true;
}

/*
 * mh_loop_in_use by listmount, and statmount of the mounts not seen before:
 * the same test on the same mounts as reading mountinfo. Unique ids only grow,
 * so a mount made during the look is listed in a later batch; one removed
 * meanwhile is skipped. 1 in use, 0 not, -1 if the kernel cannot answer this
 * way (or memory ran out).
 */
static int in_use_by_listmount(struct use *u)
{
	static uint64_t ids[1024];
	struct seen *now = NULL;
	size_t nnow = 0, cap = 0, j = 0;
	uint64_t last = 0;
	int ret = 0;
	long n;
	do {
		const uint64_t q[3] = {24, LSMT_ROOT, last};
		n = syscall(NR_LISTMOUNT, q, ids, sizeof(ids) / sizeof(ids[0]), 0);
		for (long i = 0; i < n && ret == 0; i++) {
			struct seen m;
			while (j < nseen && seen[j].uid < ids[i])
				j++; /* gone since the last look */
			int known = j < nseen && seen[j].uid == ids[i] ? (m = seen[j], 1)
			                                               : learn(ids[i], &m);
			if (known < 0)
				ret = -1;
			if (known <= 0)
				continue;
			if (nnow == cap) {
				cap = cap ? 2 * cap : 256;
				struct seen *more = realloc(now, cap * sizeof(*now));
				if (!more) {
					ret = -1;
					break;
				}
				now = more;
			}
			now[nnow++] = m;
			if (use_of_seen(u, &m))
				ret = 1;
		}
		if (n > 0)
			last = ids[n - 1];
	} while (ret == 0 && n == (long)(sizeof(ids) / sizeof(ids[0])));
	if (n < 0)
		ret = -1;
	if (ret == 0) { /* a whole look: it is what this process has seen */
		free(seen);
		seen = now;
		nseen = nnow;
	} else {
		free(now);
	}
	return ret;
}

/* NOLINTNEXTLINE(readability-non-const-parameter): written through struct use */
int mh_loop_in_use(const struct mh_loop *l, int except_id, char *where, size_t wlen,
                   struct mh_res *r)
{
	struct use u = {.l = l, .except = except_id, .where = where, .wlen = wlen};
	int used = in_use_by_listmount(&u);
	return used >= 0 ? used : mh_mount_each(match_use, &u, r);
}

struct loop_list {
	int *nrs;
	size_t n, max;
};

static int collect_loop(struct libmnt_fs *fs, void *arg)
{
	struct loop_list *ll = arg;
	const char *src = mnt_fs_get_source(fs);
	char *end;
	if (!src || strncmp(src, "/dev/loop", 9) != 0 || src[9] < '0' || src[9] > '9')
		return 0;
	long nr = strtol(src + 9, &end, 10);
	if (*end || nr < 0 || nr > 1 << 20)
		return 0;
	for (size_t i = 0; i < ll->n; i++)
		if (ll->nrs[i] == (int)nr)
			return 0;
	if (ll->n < ll->max)
		ll->nrs[ll->n++] = (int)nr;
	return 0;
}

/* NOLINTNEXTLINE(readability-non-const-parameter): filled through struct loop_list */
int mh_mount_loop_numbers(int *nrs, size_t max, struct mh_res *r)
{
	struct loop_list ll = {.nrs = nrs, .max = max};
	if (mh_mount_each(collect_loop, &ll, r) < 0)
		return -1;
	return (int)ll.n;
}

struct fs_of {
	const struct mh_loop *l;
	struct mh_mnt m;
};

static int match_fs(struct libmnt_fs *fs, void *arg)
{
	struct fs_of *f = arg;
	const char *src = mnt_fs_get_source(fs);
	if (!src || strcmp(src, f->l->path) != 0)
		return 0;
	fill_from_fs(fs, &f->m);
	f->m.mounted = true;
	return mh_mount_is_loop(&f->m, f->l);
}

/* The file system mounted from loop device l (its first mount): 1 with *m, 0 none, -1 with r. */
int mh_mount_find_loop(const struct mh_loop *l, struct mh_mnt *m, struct mh_res *r)
{
	struct fs_of f = {.l = l};
	int found = mh_mount_each(match_fs, &f, r);
	if (found == 1)
		*m = f.m;
	return found;
}

/* NOLINTNEXTLINE(readability-non-const-parameter): match_id writes it, through b */
int mh_mount_target(int mnt_id, char *target, size_t len, struct mh_res *r)
{
	struct by_id b = {.id = mnt_id, .target = target, .tlen = len};
	return mh_mount_each(match_id, &b, r);
}
