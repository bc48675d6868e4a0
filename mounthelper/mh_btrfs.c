/*
 * Directory volumes on a btrfs base: each volume and each snapshot is a
 * subvolume of its own, its capacity the referenced-bytes limit of the
 * subvolume's quota group. Made, snapshotted and destroyed by the kernel in
 * one call each, whatever the tree holds: nothing here reads a tenant's
 * bytes or walks its tree. Quota and subvolume facts come from the kernel's
 * own trees (BTRFS_IOC_TREE_SEARCH of the quota, root and subvolume trees),
 * never from a file.
 *
 * Runs in a helper worker (DIR_STATS and DIR_CAPACITY: the main loop) as root
 * with the helper's capabilities, under seccomp. Nothing here is fatal.
 *
 * Safety argument. Every call acts on a descriptor the caller opened and
 * proved (a marked directory, one of the helper's areas, a base), or on a
 * name in a helper area. What a delete destroys besides that (subvolumes a
 * tenant made inside its own volume, which would otherwise keep the volume's
 * from being destroyed) is found only from the root tree's records of what
 * lies beneath the volume being destroyed, a volume already renamed into the
 * trash area: destroyed by id, or where the tenant put something in the way,
 * by name in a directory opened one component at a time beneath the trashed
 * volume (names from the kernel's records, no symlink followed, each step
 * proved by inode number and subvolume id). The limits it raises on the way
 * are those of groups beneath the volume, and are put back if it stays.
 */
#include "mh_btrfs.h"

#include <endian.h>
#include <fcntl.h>
#include <limits.h>
#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "mh_tree.h"
#include "openat2.h"
#include "rn_job.h"

#define BTRFS_MAGIC  0x9123683EL
#define NESTED_MAX   4096       /* subvolumes inside a volume destroyed by one call */
#define STEPS_MAX    (1L << 20) /* searches and opens one request spends on a tenant's layout */
#define CHAIN_MAX    64         /* subvolumes between a volume and one opened in it by name */
#define LOOSENED_MAX 64         /* full quota groups given room by one request */
#define ROOM         (64 << 20) /* room a full group is given for a destroy to reserve */
#define DEPTH_MAX    16384      /* directories between a subvolume's root and one opened in it */

bool mh_btrfs_on(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_MAGIC;
}

bool mh_btrfs_subvol(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&
	       st.st_ino == BTRFS_FIRST_FREE_OBJECTID && mh_btrfs_on(fd);
}

/* The id of the subvolume whose root is fd: 0 if it cannot be learnt. */
static uint64_t subvol_id(int fd)
{
	struct btrfs_ioctl_ino_lookup_args a = {.objectid = BTRFS_FIRST_FREE_OBJECTID};
	return ioctl(fd, BTRFS_IOC_INO_LOOKUP, &a) == 0 ? a.treeid : 0;
}

/*
 * The kernel's items of key (objectid, type, offset from lo to hi) in tree:
 * each passed to each(); at most max. The number found, or -1 with errno.
 */
static int search(int fd, uint64_t tree, uint64_t objectid, uint32_t type, uint64_t lo, uint64_t hi,
                  int max,
                  void (*each)(const struct btrfs_ioctl_search_header *, const void *, void *),
                  void *arg)
{
	struct btrfs_ioctl_search_args a;
	int found = 0;
	while (found < max) {
		memset(&a, 0, sizeof(a));
		a.key = (struct btrfs_ioctl_search_key){.tree_id = tree,
		                                        .min_objectid = objectid,
		                                        .max_objectid = objectid,
		                                        .min_type = type,
		                                        .max_type = type,
		                                        .min_offset = lo,
		                                        .max_offset = hi,
		                                        .max_transid = UINT64_MAX,
		                                        .nr_items = 512};
		if (ioctl(fd, BTRFS_IOC_TREE_SEARCH, &a) < 0)
			return -1;
		if (a.key.nr_items == 0)
			break;
		size_t off = 0;
		uint64_t last = hi;
		for (uint32_t i = 0; i < a.key.nr_items && found < max; i++) {
			struct btrfs_ioctl_search_header h;
			memcpy(&h, a.buf + off, sizeof(h));
			off += sizeof(h);
			if (off + h.len > sizeof(a.buf))
				return errno = EIO, -1;
			if (h.objectid == objectid && h.type == type) {
				each(&h, a.buf + off, arg);
				found++;
			}
			off += h.len;
			last = h.offset;
		}
		if (last >= hi)
			break;
		lo = last + 1;
	}
	return found;
}

static void take_status(const struct btrfs_ioctl_search_header *h, const void *item, void *arg)
{
	struct btrfs_qgroup_status_item st;
	if (h->len >= sizeof(st)) {
		memcpy(&st, item, sizeof(st));
		*(bool *)arg = (le64toh(st.flags) & BTRFS_QGROUP_STATUS_FLAG_ON) != 0;
	}
}

bool mh_btrfs_quota_on(int fd)
{
	bool on = false;
	return mh_btrfs_on(fd) &&
	       search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_STATUS_KEY, 0, 0, 1,
	              take_status, &on) == 1 &&
	       on;
}

int mh_btrfs_make(int dir, const char *name, int src, struct mh_res *r)
{
	if (src >= 0) /* a snapshot needs src's owner or CAP_FOWNER: the tree runner's */
		return mh_tree_subvol(RN_SUBVOL_SNAP, src, dir, name, r);
	struct btrfs_ioctl_vol_args a = {0};
	snprintf(a.name, sizeof(a.name), "%s", name);
	if (ioctl(dir, BTRFS_IOC_SUBVOL_CREATE, &a) < 0)
		return mh_fail(r, mh_kind_of_errno(errno), errno, "create subvolume %s: %s", name,
		               strerror(errno));
	return 0;
}

int mh_btrfs_set_ro(int fd, bool ro, struct mh_res *r)
{
	return mh_tree_subvol(ro ? RN_SUBVOL_RO : RN_SUBVOL_RW, fd, -1, "-", r);
}

struct kids {
	uint64_t id[512];
	int n;
};

static void take_child(const struct btrfs_ioctl_search_header *h, const void *item, void *arg)
{
	struct kids *k = arg;
	(void)item;
	if (k->n < (int)(sizeof(k->id) / sizeof(k->id[0])))
		k->id[k->n++] = h->offset;
}

/*
 * A place in the kernel's records: a subvolume's in its parent subvolume
 * (a ROOT_BACKREF item: parent, directory, name), or a directory's in its
 * parent directory (an INODE_REF item: parent, name).
 */
struct place {
	uint64_t ino, parent, dirid;
	char name[NAME_MAX + 1];
};

/* An item holding a fixed part of fixed bytes, its name's length at len_at, then the name. */
static void take_place(const struct btrfs_ioctl_search_header *h, const void *item, struct place *p,
                       size_t fixed, size_t len_at)
{
	uint16_t len;
	if (h->len < fixed)
		return;
	memcpy(&len, (const char *)item + len_at, sizeof(len));
	size_t n = le16toh(len);
	if (n == 0 || n > NAME_MAX || fixed + n > h->len)
		return;
	p->parent = h->offset;
	memcpy(p->name, (const char *)item + fixed, n);
	p->name[n] = '\0';
}

static void take_backref(const struct btrfs_ioctl_search_header *h, const void *item, void *arg)
{
	struct place *p = arg;
	uint64_t dirid;
	take_place(h, item, p, sizeof(struct btrfs_root_ref),
	           offsetof(struct btrfs_root_ref, name_len));
	if (p->parent) { /* taken: the fixed part, dirid first, is there */
		memcpy(&dirid, item, sizeof(dirid));
		p->dirid = le64toh(dirid);
	}
}

static void take_iref(const struct btrfs_ioctl_search_header *h, const void *item, void *arg)
{
	take_place(h, item, arg, sizeof(struct btrfs_inode_ref),
	           offsetof(struct btrfs_inode_ref, name_len));
}

/* One destroy of a volume's subvolumes: its descriptors, its budget, the limits it raised. */
struct destroying {
	int dir, fd;                  /* the trash area; the trashed volume's root */
	uint64_t top;                 /* the trashed volume's subvolume id */
	long steps;                   /* searches and opens left to this request */
	int nlo;                      /* limits raised, to be put back if the volume stays */
	uint64_t lo[LOOSENED_MAX][2]; /* group, its limit */
	struct mh_res *r;
};

/* One more step of the work a tenant's layout costs; false once the request's budget is spent. */
static bool step(struct destroying *d)
{
	return --d->steps >= 0;
}

/*
 * Directory ino of subvolume tree, whose root directory root is, opened: its
 * names up to that root from the subvolume's inode references (the kernel's
 * records), then down again one component at a time beneath root, never
 * through a symlink, each directory proved by its inode number and
 * subvolume. Any depth up to DEPTH_MAX, whatever the path's length. A new
 * fd, or -1.
 */
static int open_dir_in(struct destroying *d, int root, uint64_t tree, uint64_t ino)
{
	int fd = d->fd;
	struct place *up = calloc(DEPTH_MAX, sizeof(*up));
	int n = 0, cur = -1;
	for (uint64_t at = ino; up && at != BTRFS_FIRST_FREE_OBJECTID; at = up[n++].parent) {
		up[n].ino = at;
		if (n == DEPTH_MAX - 1 || !step(d) ||
		    search(fd, tree, at, BTRFS_INODE_REF_KEY, 0, UINT64_MAX, 1, take_iref,
		           &up[n]) != 1 ||
		    !up[n].parent)
			goto out;
	}
	cur = up ? openat2_retry(root, ".", O_RDONLY | O_DIRECTORY, 0, RESOLVE_IN_TREE) : -1;
	for (int i = n - 1; cur >= 0 && i >= 0; i--) {
		struct stat st;
		int next = !step(d)
		               ? -1
		               : openat2_retry(cur, up[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
		                               0, RESOLVE_IN_TREE);
		close(cur);
		cur = next;
		if (cur >= 0 &&
		    (fstat(cur, &st) < 0 || st.st_ino != up[i].ino || subvol_id(cur) != tree)) {
			close(cur);
			cur = -1;
		}
	}
out:
	free(up);
	return cur;
}

/*
 * Subvolume sub, nested in subvolume top (whose root fd is), opened one
 * subvolume at a time from top down: each one's place in its parent from its
 * back reference in the root tree (the parent, the directory it is in, its
 * name), that directory opened as above, the subvolume beneath it without a
 * symlink, proved by its id. A new fd, or -1.
 */
static int open_subvol(struct destroying *d, uint64_t sub)
{
	int fd = d->fd;
	uint64_t top = d->top;
	struct place *chain = calloc(CHAIN_MAX, sizeof(*chain));
	int n = 0, cur = -1;
	for (uint64_t at = sub; chain && at != top; at = chain[n++].parent)
		if (n == CHAIN_MAX || !step(d) ||
		    search(fd, BTRFS_ROOT_TREE_OBJECTID, at, BTRFS_ROOT_BACKREF_KEY, 0, UINT64_MAX,
		           1, take_backref, &chain[n]) != 1 ||
		    !chain[n].parent)
			goto out;
	cur = chain ? openat2_retry(fd, ".", O_RDONLY | O_DIRECTORY, 0, RESOLVE_IN_TREE) : -1;
	for (int i = n - 1; cur >= 0 && i >= 0; i--) {
		uint64_t want = i ? chain[i - 1].parent : sub; /* chain[i] is want's place */
		int dir = open_dir_in(d, cur, chain[i].parent, chain[i].dirid);
		close(cur);
		cur = dir < 0
		          ? -1
		          : openat2_retry(dir, chain[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW,
		                          0, RESOLVE_IN_TREE);
		if (dir >= 0)
			close(dir);
		if (cur >= 0 && subvol_id(cur) != want) {
			close(cur);
			cur = -1;
		}
	}
out:
	free(chain);
	return cur;
}

static void take_u64(const struct btrfs_ioctl_search_header *h, const void *item, void *arg)
{
	/* rfer is an info item's second field, max_rfer a limit item's */
	if (h->len >= 2 * sizeof(uint64_t)) {
		uint64_t v[2];
		memcpy(v, item, sizeof(v));
		*(uint64_t *)arg = le64toh(v[1]);
	}
}

/* Quota group g's referenced bytes and limit (0: none), as of the last commit; -1 none. */
static int group_usage(int fd, uint64_t g, uint64_t *used, uint64_t *limit)
{
	*used = *limit = 0;
	if (search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_INFO_KEY, g, g, 1, take_u64,
	           used) != 1 ||
	    search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_LIMIT_KEY, g, g, 1, take_u64,
	           limit) < 0)
		return -1;
	if (*limit == UINT64_MAX)
		*limit = 0;
	return 0;
}

/* Quota group g limited to bytes (0: none), through dir. */
static int set_limit(int dir, uint64_t g, uint64_t bytes)
{
	struct btrfs_ioctl_qgroup_limit_args a = {
	    .qgroupid = g,
	    .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER, .max_rfer = bytes ? bytes : UINT64_MAX}};
	return ioctl(dir, BTRFS_IOC_QGROUP_LIMIT, &a);
}

/*
 * Quota group up is too full for a destroy to reserve its room (EDQUOT):
 * given ROOM more than it holds, its limit recorded to be put back if the
 * volume stays. Each group once per request. True if raised.
 */
static bool make_room(struct destroying *d, uint64_t up)
{
	uint64_t used, limit;
	int e = errno; /* the destroy's EDQUOT, kept when no room is made */
	for (int i = 0; i < d->nlo; i++)
		if (d->lo[i][0] == up)
			return false;
	if (d->nlo == LOOSENED_MAX || group_usage(d->fd, up, &used, &limit) < 0 || !limit ||
	    set_limit(d->dir, up, (used > limit ? used : limit) + ROOM) < 0) {
		errno = e;
		return false;
	}
	d->lo[d->nlo][0] = up;
	d->lo[d->nlo++][1] = limit;
	return true;
}

/*
 * Destroy subvolume leaf, whose parent is subvolume up, by name in the
 * directory holding it, both opened from the kernel's records (open_subvol,
 * open_dir_in): what a tenant can put in the way of a destroy by id. An up
 * the tenant made read-only (EROFS) is made writable, and a sticky directory
 * of another uid's (EPERM) loses its sticky bit, by the tree runner
 * (CAP_FOWNER): the volume is in the trash, being destroyed. The ioctl's
 * result, errno set.
 */
static int destroy_by_name(struct destroying *d, uint64_t up, uint64_t leaf)
{
	struct place b = {.parent = 0};
	int pfd = -1, dfd = -1, rc = -1;
	int found = search(d->fd, BTRFS_ROOT_TREE_OBJECTID, leaf, BTRFS_ROOT_BACKREF_KEY, up, up, 1,
	                   take_backref, &b);
	if (found != 1) {
		if (found == 0)
			errno = ENOENT; /* gone meanwhile */
		return -1;
	}
	if ((pfd = up == d->top
	               ? openat2_retry(d->fd, ".", O_RDONLY | O_DIRECTORY, 0, RESOLVE_IN_TREE)
	               : open_subvol(d, up)) < 0 ||
	    (dfd = open_dir_in(d, pfd, up, b.dirid)) < 0) {
		errno = d->steps < 0 ? EAGAIN : ELOOP; /* deeper than followed, or moved */
		goto out;
	}
	struct btrfs_ioctl_vol_args_v2 a = {0};
	snprintf(a.name, sizeof(a.name), "%s", b.name);
	rc = ioctl(dfd, BTRFS_IOC_SNAP_DESTROY_V2, &a);
	if (rc < 0 && errno == EDQUOT && make_room(d, up))
		rc = ioctl(dfd, BTRFS_IOC_SNAP_DESTROY_V2, &a);
	/* up, the trashed volume itself included, made read-only by its tenant */
	if (rc < 0 && errno == EROFS) {
		if (mh_tree_subvol(RN_SUBVOL_RW, pfd, -1, "-", d->r) < 0)
			goto out; /* d->r says why */
		rc = ioctl(dfd, BTRFS_IOC_SNAP_DESTROY_V2, &a);
	}
	if (rc < 0 && errno == EPERM) {
		if (mh_tree_subvol(RN_SUBVOL_UNSTICK, dfd, -1, "-", d->r) < 0)
			goto out;
		rc = ioctl(dfd, BTRFS_IOC_SNAP_DESTROY_V2, &a);
	}
out:;
	int e = errno;
	mh_closep(&dfd);
	mh_closep(&pfd);
	errno = e;
	return rc;
}

/*
 * Destroy subvolume leaf (parent up): by id through the trash area, the
 * kernel finding it (cheap whatever the layout); where the tenant put
 * something in the way (a full parent, a read-only one, a sticky directory,
 * a path longer than the kernel names), as above. 0, or -1 with d->r.
 */
static int destroy_leaf(struct destroying *d, uint64_t up, uint64_t leaf)
{
	struct btrfs_ioctl_vol_args_v2 a = {.flags = BTRFS_SUBVOL_SPEC_BY_ID, .subvolid = leaf};
	int rc = ioctl(d->dir, BTRFS_IOC_SNAP_DESTROY_V2, &a);
	if (rc < 0 && errno == EDQUOT && make_room(d, up))
		rc = ioctl(d->dir, BTRFS_IOC_SNAP_DESTROY_V2, &a);
	/* EOPNOTSUPP: by id on an idmapped mount of the base */
	if (rc < 0 && (errno == EROFS || errno == EPERM || errno == ENAMETOOLONG ||
	               errno == EDQUOT || errno == EOPNOTSUPP))
		rc = destroy_by_name(d, up, leaf);
	if (d->r->kind != MH_E_OK) /* the tree runner failed */
		return -1;
	if (rc == 0 || errno == ENOENT)
		return 0;
	int e = errno;
	const char *why = e == EAGAIN ? "too much work for one request, more later"
	                  : e == ELOOP
	                      ? "it lies deeper than the helper follows, or moved meanwhile"
	                      : strerror(e);
	return mh_fail(d->r, MH_E_FAILED, e, "destroy subvolume %llu inside: %s",
	               (unsigned long long)leaf, why);
}

/*
 * Destroy every subvolume beneath the trashed volume (the root tree's records
 * of it: kernel-made, never a path), one leaf at a time: down the first child
 * until one has none, that one destroyed. Any depth or width; every request
 * destroys at least one while any is left and its budget allows, the rest
 * by the next.
 */
static int destroy_nested(struct destroying *d)
{
	for (int destroyed = 0; destroyed < NESTED_MAX; destroyed++) {
		struct kids k = {.n = 0};
		uint64_t leaf = d->top, up = d->top;
		for (;;) {
			k.n = 0;
			if (!step(d))
				return mh_fail(
				    d->r, MH_E_FAILED, EAGAIN,
				    "too many subvolumes inside: %d destroyed, more later",
				    destroyed);
			if (search(d->fd, BTRFS_ROOT_TREE_OBJECTID, leaf, BTRFS_ROOT_REF_KEY, 0,
			           UINT64_MAX, 1, take_child, &k) < 0)
				return mh_fail(d->r, MH_E_FAILED, errno,
				               "list the subvolumes inside: %s", strerror(errno));
			if (k.n == 0)
				break;
			up = leaf;
			leaf = k.id[0];
		}
		if (leaf == d->top)
			return 0;
		if (destroy_leaf(d, up, leaf) < 0)
			return -1;
	}
	return mh_fail(d->r, MH_E_FAILED, EAGAIN, "more than %d subvolumes inside: more later",
	               NESTED_MAX);
}

int mh_btrfs_escapes(int fd)
{
	struct kids k = {.n = 0};
	uint64_t id = subvol_id(fd);
	return id ? search(fd, BTRFS_ROOT_TREE_OBJECTID, id, BTRFS_ROOT_REF_KEY, 0, UINT64_MAX, 1,
	                   take_child, &k)
	          : -1;
}

int mh_btrfs_destroy(int dir, const char *name, int fd, struct mh_res *r)
{
	struct destroying d = {
	    .dir = dir, .fd = fd, .top = subvol_id(fd), .steps = STEPS_MAX, .r = r};
	if (!d.top)
		return mh_fail(r, MH_E_FAILED, errno, "which subvolume is %s: %s", name,
		               strerror(errno));
	int rc = destroy_nested(&d);
	if (rc == 0) {
		struct btrfs_ioctl_vol_args_v2 a = {0};
		snprintf(a.name, sizeof(a.name), "%s", name);
		if (ioctl(dir, BTRFS_IOC_SNAP_DESTROY_V2, &a) < 0 && errno != ENOENT)
			rc = mh_fail(r, mh_kind_of_errno(errno), errno, "destroy subvolume %s: %s",
			             name, strerror(errno));
	}
	for (int i = 0; rc < 0 && i < d.nlo; i++) /* the volume stays: its limits too */
		(void)set_limit(dir, d.lo[i][0], d.lo[i][1]);
	return rc;
}

int mh_btrfs_limit(int base, int fd, uint64_t bytes, struct mh_res *r)
{
	uint64_t id = subvol_id(fd);
	if (!id)
		return mh_fail(r, MH_E_FAILED, errno, "which subvolume: %s", strerror(errno));
	if (set_limit(base, id, bytes) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "set the subvolume's quota group limit: %s",
		               strerror(errno));
	return 0;
}

int mh_btrfs_usage(int fd, uint64_t *used, uint64_t *limit)
{
	uint64_t id = subvol_id(fd);
	*used = *limit = 0;
	if (!id || !mh_btrfs_quota_on(fd))
		return -1;
	return group_usage(fd, id, used, limit);
}
