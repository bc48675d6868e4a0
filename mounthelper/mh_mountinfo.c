/*
 * What is mounted where, read-only: what is mounted on an fd (statx mount id,
 * then libmount's view of /proc/self/mountinfo by that id, never by path
 * string), whether a mount is one of a loop device, whether a loop device is
 * still mounted or bound anywhere, and the mount point of a mount id.
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
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define MOUNTINFO "/proc/self/mountinfo"

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

int mh_mount_info(int fd, struct mh_mnt *out, struct mh_res *r)
{
	struct statx stx;
	memset(out, 0, sizeof(*out));
	if (fstat(fd, &out->st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "fstat: %s", strerror(errno));
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

static int match_use(struct libmnt_fs *fs, void *arg)
{
	struct use *u = arg;
	const char *src = mnt_fs_get_source(fs), *root = mnt_fs_get_root(fs);
	const char *base = root ? strrchr(root, '/') : NULL;
	char node[24];
	snprintf(node, sizeof(node), "loop%d", u->l->nr);
	if (mnt_fs_get_id(fs) == u->except)
		return 0;
	/*
	 * A file system on the device (by name or device number), or a bind of
	 * its node (a mount whose root is a file named loopN, on devtmpfs or
	 * the helper's own /dev): wherever it is, whatever its mount point is
	 * called. A false match only makes a detach wait; a missed one could
	 * hand the device to another volume, so the test is broad.
	 */
	if ((src && strcmp(src, u->l->path) == 0) || mnt_fs_get_devno(fs) == u->l->rdev ||
	    (base && strcmp(base + 1, node) == 0)) {
		const char *t = mnt_fs_get_target(fs);
		snprintf(u->where, u->wlen, "%s", t ? t : "?");
		u->found_id = mnt_fs_get_id(fs);
		return 1;
	}
	return 0;
}

/* NOLINTNEXTLINE(readability-non-const-parameter): written through struct use */
int mh_loop_in_use(const struct mh_loop *l, int except_id, char *where, size_t wlen,
                   struct mh_res *r)
{
	struct use u = {.l = l, .except = except_id, .where = where, .wlen = wlen};
	return mh_mount_each(match_use, &u, r);
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
