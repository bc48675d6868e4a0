/*
 * Directory volumes on a btrfs base: each volume and each snapshot is a
 * subvolume of its own, its capacity the referenced-bytes limit of the
 * subvolume's quota group. Made, snapshotted and destroyed by the kernel in
 * one call each, whatever the tree holds: nothing here reads, walks or
 * follows anything a tenant wrote. Quota and subvolume facts come from the
 * kernel's own trees (BTRFS_IOC_TREE_SEARCH of the quota and root trees),
 * never from a file.
 *
 * Runs in a helper worker (DIR_STATS and DIR_CAPACITY: the main loop) as root
 * with the helper's capabilities, under seccomp. Nothing here is fatal.
 *
 * Safety argument. Every call acts on a descriptor the caller opened and
 * proved (a marked directory, one of the helper's areas, a base), or on a
 * name in a helper area. The one call that names a subvolume by id, the
 * destruction of a subvolume a tenant made inside its own volume (which would
 * otherwise keep the volume's from being destroyed), takes its ids only from
 * the root tree's records of what lies beneath the volume being destroyed,
 * a volume already renamed into the trash area.
 */
#include "mh_btrfs.h"

#include <endian.h>
#include <fcntl.h>
#include <limits.h>
#include <errno.h>
#include <linux/btrfs.h>
#include <linux/btrfs_tree.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "mh_tree.h"
#include "openat2.h"
#include "rn_job.h"

#define BTRFS_MAGIC 0x9123683EL
#define NESTED_MAX  4096  /* subvolumes inside a volume destroyed by one call */
#define LOOKS_MAX   65536 /* searches of the root tree by one call */
/* BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE (Linux 6.7), newer than Debian 12's headers */
#define QUOTA_SIMPLE (1ULL << 3)

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
	struct btrfs_qgroup_status_item s;
	if (h->len >= sizeof(s)) {
		memcpy(&s, item, sizeof(s));
		*(uint64_t *)arg = le64toh(s.flags);
	}
}

/* The quota status flags of fd's file system: 0 when quota groups are off. */
static uint64_t quota_flags(int fd)
{
	uint64_t flags = 0;
	if (!mh_btrfs_on(fd) || search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_STATUS_KEY, 0,
	                               0, 1, take_status, &flags) != 1)
		return 0;
	return (flags & BTRFS_QGROUP_STATUS_FLAG_ON) ? flags : 0;
}

bool mh_btrfs_quota_on(int fd)
{
	return quota_flags(fd) != 0;
}

/*
 * The quota group that bounds subvolume id. With simple quotas, 1/<id>: it
 * holds the volume's own group and, the kernel adding them, every subvolume
 * made inside it later, a tenant's own included; with full accounting,
 * 0/<id>, the volume's own (a subvolume made inside is outside it).
 */
static uint64_t bounding_group(int fd, uint64_t id)
{
	return (quota_flags(fd) & QUOTA_SIMPLE) ? (1ULL << 48) | id : id;
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

struct backref {
	uint64_t parent, dirid;
	char name[NAME_MAX + 1];
};

static void take_backref(const struct btrfs_ioctl_search_header *h, const void *item, void *arg)
{
	struct backref *b = arg;
	struct btrfs_root_ref ref;
	if (h->len < sizeof(ref))
		return;
	memcpy(&ref, item, sizeof(ref));
	size_t n = le16toh(ref.name_len);
	if (n == 0 || n > NAME_MAX || sizeof(ref) + n > h->len)
		return;
	b->parent = h->offset;
	b->dirid = le64toh(ref.dirid);
	memcpy(b->name, (const char *)item + sizeof(ref), n);
	b->name[n] = '\0';
}

/*
 * Subvolume sub (inside subvolume top, which fd is), opened: its path beneath
 * top from the kernel's records (each subvolume's back reference in the root
 * tree: its parent, the directory it is in and its name; that directory's
 * path from BTRFS_IOC_INO_LOOKUP), opened beneath fd without a symlink, and
 * proved sub by its id. The fd, or -1.
 */
static int open_nested(int fd, uint64_t top, uint64_t sub)
{
	char path[PATH_MAX] = "", tmp[PATH_MAX];
	for (uint64_t at = sub; at != top;) {
		struct backref b = {.parent = 0};
		struct btrfs_ioctl_ino_lookup_args a;
		if (strlen(path) > PATH_MAX / 2 ||
		    search(fd, BTRFS_ROOT_TREE_OBJECTID, at, BTRFS_ROOT_BACKREF_KEY, 0, UINT64_MAX,
		           1, take_backref, &b) != 1 ||
		    !b.parent)
			return -1;
		a = (struct btrfs_ioctl_ino_lookup_args){.treeid = b.parent, .objectid = b.dirid};
		if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &a) < 0)
			return -1;
		a.name[sizeof(a.name) - 1] = '\0';
		if (snprintf(tmp, sizeof(tmp), "%s%s%s%s", a.name, b.name, path[0] ? "/" : "",
		             path) >= (int)sizeof(tmp))
			return -1;
		memcpy(path, tmp, sizeof(path));
		at = b.parent;
	}
	int nfd = openat2_retry(fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, RESOLVE_IN_TREE);
	if (nfd >= 0 && subvol_id(nfd) != sub) {
		close(nfd);
		return -1;
	}
	return nfd;
}

/*
 * Subvolume sub inside top made writable (a tenant made it read-only, and
 * what is inside it cannot be destroyed then), by the tree runner: the
 * tenant owns it. 0, or -1.
 */
static int make_writable(int fd, uint64_t top, uint64_t sub, struct mh_res *r)
{
	int nfd = open_nested(fd, top, sub);
	if (nfd < 0)
		return -1;
	int rc = mh_tree_subvol(RN_SUBVOL_RW, nfd, -1, "-", r);
	close(nfd);
	return rc;
}

/*
 * No limit on quota group g any more: destroying a subvolume reserves room
 * charged to its parent's group, which refuses it when full (EDQUOT), and the
 * parent is being destroyed too. Through dir, outside the volume. Best
 * effort: the destroy that follows says whether it was enough.
 */
static void unlimit(int dir, uint64_t g)
{
	struct btrfs_ioctl_qgroup_limit_args a = {
	    .qgroupid = g, .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER, .max_rfer = UINT64_MAX}};
	(void)ioctl(dir, BTRFS_IOC_QGROUP_LIMIT, &a);
}

/*
 * Destroy every subvolume beneath subvolume id (the root tree's records of
 * it: kernel-made, never a path), one leaf at a time: down the first child
 * until one has none, that one destroyed by id. Any depth or width; every
 * call destroys at least one while any is left, so a tree larger than one
 * call's budget goes in later calls.
 */
static int destroy_nested(int dir, int fd, uint64_t id, uint64_t group, struct mh_res *r)
{
	int looks = LOOKS_MAX;
	for (int destroyed = 0; destroyed < NESTED_MAX; destroyed++) {
		struct kids k = {.n = 0};
		uint64_t leaf = id, up = id;
		for (;;) {
			k.n = 0;
			if (--looks < 0)
				return mh_fail(
				    r, MH_E_FAILED, EMLINK,
				    "too many subvolumes inside: %d destroyed, more later",
				    destroyed);
			if (search(fd, BTRFS_ROOT_TREE_OBJECTID, leaf, BTRFS_ROOT_REF_KEY, 0,
			           UINT64_MAX, 1, take_child, &k) < 0)
				return mh_fail(r, MH_E_FAILED, errno,
				               "list the subvolumes inside: %s", strerror(errno));
			if (k.n == 0)
				break;
			up = leaf;
			leaf = k.id[0];
		}
		if (leaf == id)
			return 0;
		struct btrfs_ioctl_vol_args_v2 a = {.flags = BTRFS_SUBVOL_SPEC_BY_ID,
		                                    .subvolid = leaf};
		int rc = ioctl(dir, BTRFS_IOC_SNAP_DESTROY_V2, &a);
		if (rc < 0 && errno == EDQUOT) { /* its parent is full: the limit goes first */
			unlimit(dir, up == id ? group : up);
			rc = ioctl(dir, BTRFS_IOC_SNAP_DESTROY_V2, &a);
		}
		if (rc < 0 && errno == EROFS && up != id && make_writable(fd, id, up, r) == 0)
			rc = ioctl(dir, BTRFS_IOC_SNAP_DESTROY_V2,
			           &a); /* its parent was read-only */
		if (rc < 0 && errno != ENOENT)
			return mh_fail(r, MH_E_FAILED, errno, "destroy subvolume %llu inside: %s",
			               (unsigned long long)leaf, strerror(errno));
	}
	return mh_fail(r, MH_E_FAILED, EMLINK, "more than %d subvolumes inside: more later",
	               NESTED_MAX);
}

int mh_btrfs_escapes(int fd)
{
	struct kids k = {.n = 0};
	uint64_t id = subvol_id(fd);
	if (!id || (quota_flags(fd) & QUOTA_SIMPLE))
		return id ? 0 : -1;
	return search(fd, BTRFS_ROOT_TREE_OBJECTID, id, BTRFS_ROOT_REF_KEY, 0, UINT64_MAX, 1,
	              take_child, &k);
}

int mh_btrfs_destroy(int dir, const char *name, int fd, struct mh_res *r)
{
	uint64_t id = subvol_id(fd);
	if (!id)
		return mh_fail(r, MH_E_FAILED, errno, "which subvolume is %s: %s", name,
		               strerror(errno));
	uint64_t group = bounding_group(fd, id);
	if (destroy_nested(dir, fd, id, group, r) < 0)
		return -1;
	struct btrfs_ioctl_vol_args_v2 a = {0};
	snprintf(a.name, sizeof(a.name), "%s", name);
	if (ioctl(dir, BTRFS_IOC_SNAP_DESTROY_V2, &a) < 0 && errno != ENOENT)
		return mh_fail(r, mh_kind_of_errno(errno), errno, "destroy subvolume %s: %s", name,
		               strerror(errno));
	if (group != id) { /* its 1/<id>, emptied and removed: best effort, nothing depends on it */
		struct btrfs_ioctl_qgroup_assign_args un = {.assign = 0, .src = id, .dst = group};
		struct btrfs_ioctl_qgroup_create_args rm = {.create = 0, .qgroupid = group};
		(void)ioctl(dir, BTRFS_IOC_QGROUP_ASSIGN, &un);
		(void)ioctl(dir, BTRFS_IOC_QGROUP_CREATE, &rm);
	}
	return 0;
}

int mh_btrfs_limit(int base, int fd, uint64_t bytes, struct mh_res *r)
{
	uint64_t id = subvol_id(fd), group = id ? bounding_group(fd, id) : 0;
	if (!id)
		return mh_fail(r, MH_E_FAILED, errno, "which subvolume: %s", strerror(errno));
	if (group != id) { /* made once, the volume's own group in it: nothing else is */
		struct btrfs_ioctl_qgroup_create_args mk = {.create = 1, .qgroupid = group};
		struct btrfs_ioctl_qgroup_assign_args in = {.assign = 1, .src = id, .dst = group};
		if ((ioctl(base, BTRFS_IOC_QGROUP_CREATE, &mk) < 0 && errno != EEXIST) ||
		    (ioctl(base, BTRFS_IOC_QGROUP_ASSIGN, &in) < 0 && errno != EEXIST))
			return mh_fail(r, MH_E_FAILED, errno, "the volume's quota group 1/%llu: %s",
			               (unsigned long long)id, strerror(errno));
	}
	struct btrfs_ioctl_qgroup_limit_args a = {
	    .qgroupid = group,
	    .lim = {.flags = BTRFS_QGROUP_LIMIT_MAX_RFER, .max_rfer = bytes ? bytes : UINT64_MAX}};
	if (ioctl(base, BTRFS_IOC_QGROUP_LIMIT, &a) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "set the subvolume's quota group limit: %s",
		               strerror(errno));
	return 0;
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

int mh_btrfs_usage(int fd, uint64_t *used, uint64_t *limit)
{
	uint64_t id = subvol_id(fd), g = id && mh_btrfs_quota_on(fd) ? bounding_group(fd, id) : 0;
	*used = *limit = 0;
	if (!g || search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_INFO_KEY, g, g, 1, take_u64,
	                 used) != 1)
		return -1;
	if (search(fd, BTRFS_QUOTA_TREE_OBJECTID, 0, BTRFS_QGROUP_LIMIT_KEY, g, g, 1, take_u64,
	           limit) < 0)
		return -1;
	return 0;
}
