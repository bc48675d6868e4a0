/*
 * LIST: what exists that the helper made, one page at a time, for rpcd's
 * reconciliation at start (it compares with its store and asks for what is
 * left over to be removed, through the ordinary requests and their rules).
 *
 *  - images and snapshots: the "<id>.img" files of the images and snapshots
 *    directories, with their sizes;
 *  - mounts: every mount, anywhere in the helper's view, of a loop device that
 *    its image backs (a file system), or a bind of such a device's node (a raw
 *    block staging or publication), with the volume id and the mount point.
 *
 * Pages are in id order (mount id for mounts) and start after the caller's
 * cursor, so an entry that appears or goes between pages moves nothing else.
 *
 * Also the sweep (mh_sweep), which needs no rpcd: at start, and whenever a
 * worker dies, the temporary files of half-made images and copies, and the
 * loop devices a raw block staging attached but never bound (no autoclear),
 * are removed, except those of operations still in flight.
 *
 * Runs inline in the helper's main loop as root under seccomp. Safety
 * argument: LIST changes nothing, and tells what a rpcd could learn anyway:
 * ids it made, sizes it asked for, and mount points in kubelet's CSI
 * directories it named itself. The sweep acts only on the helper's own files
 * and on loop devices backed by them that no mount or bind uses anywhere
 * (mh_detach_unused). Nothing here is fatal.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "mh_dir.h"
#include "mh_common.h"
#include "mh_image.h"
#include "mh_loop.h"
#include "mh_mount.h"
#include "mh_ops.h"
#include "policy.h"

struct entry {
	long key;               /* mount id (mounts) */
	char id[MH_ID_MAX + 1]; /* image or snapshot id (files) */
	char *line;
};

struct page {
	const char *after;
	long after_key;
	struct entry *e;
	size_t n, cap;
	bool failed; /* out of memory: the page is refused, not cut short silently */
};

static void add(struct page *p, const struct entry *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add(struct page *p, const struct entry *e, const char *fmt, ...)
{
	va_list ap;
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 256;
		struct entry *ne = realloc(p->e, cap * sizeof(*ne));
		if (!ne) {
			p->failed = true;
			return;
		}
		p->e = ne;
		p->cap = cap;
	}
	struct entry *to = &p->e[p->n];
	*to = *e;
	va_start(ap, fmt);
	int ok = vasprintf(&to->line, fmt, ap);
	va_end(ap);
	if (ok < 0)
		p->failed = true;
	else
		p->n++;
}

/* "<id>.img" in a directory of the helper's, after the cursor. */
static void file_entry(int dirfd, const char *name, void *arg)
{
	struct page *p = arg;
	struct entry e = {0};
	struct stat st;
	const char *dot = strchr(name, '.');
	size_t n = dot ? (size_t)(dot - name) : 0;
	if (!dot || n > MH_ID_MAX || strcmp(dot, ".img") != 0)
		return;
	memcpy(e.id, name, n);
	if (strcmp(e.id, p->after) > 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode))
		add(p, &e, "%s %lld\n", e.id, (long long)st.st_size);
}

/*
 * The loop devices the helper's images back; for LIST, v sorted by number and
 * by_rdev the positions in v sorted by device number (index_ours), so that
 * each mount is matched in O(log n), not against every device.
 */
struct ours {
	const struct mh_ctx *c;
	struct our_loop {
		struct mh_loop l;
		char vid[MH_ID_MAX + 1];
	} * v;
	size_t n, cap;
	struct rdev_pos {
		dev_t rdev;
		size_t i; /* in v */
	} * by_rdev;
};

static int our_loop(int nr, void *arg)
{
	struct ours *o = arg;
	struct mh_loop l;
	char name[MH_ID_MAX + 1], img[MH_IMAGE_NAME_MAX];
	struct stat st;
	dev_t dev;
	ino_t ino;
	if (mh_loop_status(nr, &l, &dev, &ino, name, sizeof(name)) < 0 ||
	    !pol_volume_id_valid(name))
		return 0;
	mh_image_name(name, img, sizeof(img));
	if (fstatat(o->c->images_fd, img, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != dev ||
	    st.st_ino != ino)
		return 0;
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 64;
		void *nv = realloc(o->v, cap * sizeof(*o->v));
		if (!nv)
			return -1;
		o->v = nv;
		o->cap = cap;
	}
	o->v[o->n].l = l;
	memcpy(o->v[o->n].vid, name, sizeof(name));
	o->n++;
	return 0;
}

static int by_nr(const void *a, const void *b)
{
	int x = ((const struct our_loop *)a)->l.nr, y = ((const struct our_loop *)b)->l.nr;
	return (x > y) - (x < y);
}

static int by_dev(const void *a, const void *b)
{
	dev_t x = ((const struct rdev_pos *)a)->rdev, y = ((const struct rdev_pos *)b)->rdev;
	return (x > y) - (x < y);
}

static int index_ours(struct ours *o)
{
	if (o->n == 0)
		return 0;
	qsort(o->v, o->n, sizeof(*o->v), by_nr);
	o->by_rdev = calloc(o->n, sizeof(*o->by_rdev));
	if (!o->by_rdev)
		return -1;
	for (size_t i = 0; i < o->n; i++)
		o->by_rdev[i] = (struct rdev_pos){.rdev = o->v[i].l.rdev, .i = i};
	qsort(o->by_rdev, o->n, sizeof(*o->by_rdev), by_dev);
	return 0;
}

/* Ours whose number is nr (-1: none), or NULL. */
static const struct our_loop *numbered_nr(const struct ours *o, int nr)
{
	const struct our_loop key = {.l.nr = nr};
	if (nr < 0 || !o->v)
		return NULL;
	return bsearch(&key, o->v, o->n, sizeof(*o->v), by_nr);
}

/* Ours whose device number is dev, or NULL. */
static const struct our_loop *numbered_dev(const struct ours *o, dev_t dev)
{
	const struct rdev_pos key = {.rdev = dev};
	if (!o->by_rdev)
		return NULL;
	const struct rdev_pos *at = bsearch(&key, o->by_rdev, o->n, sizeof(*o->by_rdev), by_dev);
	return at ? &o->v[at->i] : NULL;
}

/*
 * Add each mount of one of ours after the cursor: a file system on the
 * device (its source is /dev/loopN, or its device number the device's), else
 * a bind of the device's node (its root ends in /loopN).
 */
static int mount_entries(const struct ours *o, struct page *p, struct mh_res *r)
{
	const struct mh_mount_row *v;
	char target[MH_PATH_MAX + 1];
	size_t n;
	if (mh_mounts_look(&v, &n, r) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (v[i].id <= p->after_key)
			continue;
		const struct our_loop *fsys = numbered_nr(o, v[i].src_nr);
		if (!fsys)
			fsys = numbered_dev(o, v[i].dev);
		const struct our_loop *l = fsys ? fsys : numbered_nr(o, v[i].root_nr);
		if (l && mh_mount_row_target(&v[i], target, sizeof(target)) == 1)
			add(p, &(struct entry){.key = v[i].id}, "%d %c %s %s\n", v[i].id,
			    fsys ? 'f' : 'b', l->vid, target);
	}
	return 0;
}

static int by_id(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->id, ((const struct entry *)b)->id);
}

static int by_key(const void *a, const void *b)
{
	long x = ((const struct entry *)a)->key, y = ((const struct entry *)b)->key;
	return (x > y) - (x < y);
}

/* As many sorted entries as fit; "more" if any is left for the next page. */
static void fill(struct page *p, int (*cmp)(const void *, const void *), struct mh_ans_list *out)
{
	size_t used = 0;
	if (p->n) /* qsort wants an array, even of nothing */
		qsort(p->e, p->n, sizeof(p->e[0]), cmp);
	out->more = 0;
	out->text[0] = '\0';
	for (size_t i = 0; i < p->n && !out->more; i++) {
		size_t len = strlen(p->e[i].line);
		if (used + len > MH_LIST_TEXT_MAX) {
			out->more = 1;
			continue;
		}
		memcpy(out->text + used, p->e[i].line, len + 1);
		used += len;
	}
}

static void page_free(struct page *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->e[i].line);
	free(p->e);
}

int mh_answer_list(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                   struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_list *q = &req->u.list;
	struct page p = {.after = q->after};
	struct ours o = {.c = c};
	int (*order)(const void *, const void *) = by_id;
	char *end = NULL;
	int ret = -1;
	(void)a;
	if (q->what == MH_LIST_MOUNTS) {
		order = by_key;
		p.after_key = q->after[0] ? strtol(q->after, &end, 10) : 0;
		if (end && *end)
			mh_fail(r, MH_E_REFUSED, EINVAL, "a mount cursor is a mount id");
		else if (mh_loop_each(our_loop, &o, r) != 0 || index_ours(&o) < 0)
			mh_fail(r, MH_E_FAILED, ENOMEM, "cannot list the loop devices");
		else
			ret = mount_entries(&o, &p, r);
	} else if (mh_dir_each(q->what == MH_LIST_IMAGES ? c->images_fd : c->snaps_fd, file_entry,
	                       &p) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "cannot list the data directory: %s",
		        strerror(errno));
	} else {
		ret = 0;
	}
	if (ret == 0 && p.failed)
		ret = mh_fail(r, MH_E_FAILED, ENOMEM, "out of memory");
	if (ret == 0)
		fill(&p, order, &ans->u.list_ans);
	page_free(&p);
	free(o.v);
	free(o.by_rdev);
	return ret;
}

void mh_sweep(const struct mh_ctx *c, bool (*held)(const char *id))
{
	struct ours o = {.c = c};
	struct mh_res r = {0};
	mh_image_sweep(c, held);
	mh_dir_sweep(c, held);
	if (mh_loop_each(our_loop, &o, &r) == 0) {
		for (size_t i = 0; i < o.n; i++) {
			struct mh_vol v = {.attached = true, .loop = o.v[i].l};
			char img[MH_IMAGE_NAME_MAX];
			if ((held && held(o.v[i].vid)) || (o.v[i].l.lo_flags & LO_FLAGS_AUTOCLEAR))
				continue;
			mh_image_name(o.v[i].vid, img, sizeof(img));
			if (fstatat(c->images_fd, img, &v.st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			r = (struct mh_res){0};
			if (mh_detach_unused(&v, false, &r) < 0)
				log_kv(LOG_LVL_WARN, "sweep_failed", "volume_id", o.v[i].vid,
				       "reason", r.reason, NULL);
		}
	}
	free(o.v);
}
