/*
 * The helper's whole privileged surface: a dispatch table of operations, one
 * handler mh_answer_X() per request MH_REQ_X, and the audit line for each.
 *
 * Runs in the helper as root with CAP_SYS_ADMIN under seccomp. Nothing here is
 * fatal: a well-formed request that is refused or fails gets MH_ANS_ERROR with
 * a reason; only a message outside the table is a protocol violation (the
 * caller exits).
 *
 * Every handler re-validates its input before touching anything, because the
 * helper trusts nothing rpcd says: the volume id against the fixed syntax, each
 * path against the policy roots (then opened beneath its root without symlinks,
 * mh_path.c), the filesystem type and options against the allowlists, sizes
 * against the bounds. Every operation is idempotent, and never acts on a mount
 * it has not proved belongs to the volume named in the request: a mount is
 * "this volume's" only if its source is the loop device currently backed by
 * this volume's image (same st_dev/st_ino), see mh_mount_is_loop().
 */
#include "mh_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mh_image.h"
#include "mh_loop.h"
#include "mh_mkfs.h"
#include "mh_mount.h"
#include "mh_path.h"

#define UNMOUNT_MAX 8 /* stacked mounts of the same volume we are willing to peel */

/* ---- results ------------------------------------------------------------ */

int mh_fail(struct mh_res *r, enum mh_err_kind kind, int err, const char *fmt, ...)
{
	va_list ap;
	if (r->kind != MH_E_OK)
		return -1; /* keep the first (root) cause */
	r->kind = kind;
	r->sys_errno = err;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	return -1;
}

enum mh_err_kind mh_kind_of_errno(int err)
{
	switch (err) {
	case ENOENT:
		return MH_E_NOTFOUND;
	case EEXIST:
		return MH_E_EXISTS;
	case EBUSY:
		return MH_E_BUSY;
	case ENOSPC:
	case EDQUOT:
		return MH_E_NOSPACE;
	default:
		return MH_E_FAILED;
	}
}

void mh_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* What the audit line names; set by each handler as soon as it knows. */
struct mh_audit {
	const char *volume_id, *path, *staging_path;
	const char *note; /* why an idempotent success did nothing */
};

/* ---- shared checks ------------------------------------------------------ */

static int check_id(const char *id, struct mh_res *r)
{
	if (!pol_volume_id_valid(id))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "malformed volume id");
	return 0;
}

static int check_path(const struct mh_ctx *c, const char *path, const char *what, const char **root,
                      struct mh_res *r)
{
	int rc = pol_path_check(c->pol, path, root);
	if (rc == -EINVAL)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "malformed %s", what);
	if (rc < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM, "%s outside the allowed roots", what);
	return 0;
}

static bool nested(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	return (strncmp(a, b, lb) == 0 && (a[lb] == '\0' || a[lb] == '/')) ||
	       (strncmp(b, a, la) == 0 && (b[la] == '\0' || b[la] == '/'));
}

/* The volume's image identity and, if attached, its loop device. */
struct vol {
	struct stat st;
	bool attached;
	struct mh_loop loop;
};

/* Look the volume up; returns 0 or -1 with r (NOTFOUND if there is no image). */
static int vol_lookup(const struct mh_ctx *c, const char *id, struct vol *v, struct mh_res *r)
{
	int fd = mh_image_open(c, id, true, r);
	if (fd < 0)
		return -1;
	int rc = fstat(fd, &v->st);
	close(fd);
	if (rc < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat image: %s", strerror(errno));
	int found = mh_loop_find(v->st.st_dev, v->st.st_ino, &v->loop, r);
	if (found < 0)
		return -1;
	v->attached = found == 1;
	return 0;
}

static bool vol_owns(const struct vol *v, const struct mh_mnt *m)
{
	return v->attached && mh_mount_is_loop(m, &v->loop);
}

/*
 * Unmount this volume's mount(s) at path. Returns 0 when nothing of ours is
 * mounted there any more, -1 with r otherwise (REFUSED if what is mounted is
 * not ours). dirfd is consumed: an open fd inside the mount would keep it busy.
 */
static int unmount_ours(const char *root, const char *path, const struct vol *v, int dirfd,
                        struct mh_res *r)
{
	const char *name;
	int parent = mh_path_open_parent(root, path, &name, r), ret = -1;
	if (parent < 0) {
		mh_closep(&dirfd);
		return -1;
	}
	for (int i = 0; i < UNMOUNT_MAX; i++) {
		struct mh_mnt m;
		if (dirfd < 0 && (dirfd = mh_path_open_child(parent, name, r)) < 0)
			break;
		if (mh_mount_info(dirfd, &m, r) < 0)
			break;
		mh_closep(&dirfd);
		if (!m.mounted) {
			ret = 0;
			break;
		}
		if (!vol_owns(v, &m)) {
			/* Never unmount what is not ours. */
			mh_fail(r, MH_E_REFUSED, EPERM, "%s is mounted there, not this volume",
			        m.source);
			break;
		}
		/*
		 * Safety: the top mount at parent/name was just shown to be this
		 * volume's loop device; mh_umount re-checks the mount id right
		 * before umount2(UMOUNT_NOFOLLOW), relative to the verified parent.
		 */
		if (mh_umount(parent, name, m.id, r) < 0)
			break;
	}
	if (ret < 0 && r->kind == MH_E_OK)
		mh_fail(r, MH_E_BUSY, EBUSY, "too many stacked mounts");
	mh_closep(&dirfd);
	mh_closep(&parent);
	return ret;
}

/* ---- handlers ----------------------------------------------------------- */

static int mh_answer_ping(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                          struct mh_audit *a, struct mh_res *r)
{
	return 0;
}

static int mh_answer_create(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                            struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_create *q = &req->u.create;
	a->volume_id = q->volume_id;
	if (check_id(q->volume_id, r) < 0)
		return -1;
	uint64_t min = pol_min_volume_bytes(c->pol), max = pol_max_volume_bytes(c->pol);
	/* Bounds first (max <= 2^62, so rounding up to 4 KiB cannot overflow). */
	if (q->size_bytes < min || q->size_bytes > max)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "size %llu outside [%llu, %llu]",
		               (unsigned long long)q->size_bytes, (unsigned long long)min,
		               (unsigned long long)max);
	uint64_t size = (q->size_bytes + 4095) & ~(uint64_t)4095;
	if (size > max)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "size rounded to 4 KiB exceeds %llu",
		               (unsigned long long)max);
	return mh_image_create(c, q->volume_id, size, &ans->u.create_ans.size_bytes, r);
}

static int mh_answer_delete(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                            struct mh_audit *a, struct mh_res *r)
{
	a->volume_id = req->u.del.volume_id;
	if (check_id(req->u.del.volume_id, r) < 0)
		return -1;
	return mh_image_delete(c, req->u.del.volume_id, r);
}

static int mh_answer_stage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                           struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_stage *q = &req->u.stage;
	const char *root;
	char why[200];
	struct mh_mount_opts o = {0};
	struct vol v = {0};
	struct mh_mnt m;
	int img = -1, dir = -1, lfd = -1, ret = -1;

	a->volume_id = q->volume_id;
	a->path = q->staging_path;
	if (check_id(q->volume_id, r) < 0 ||
	    check_path(c, q->staging_path, "staging path", &root, r) < 0)
		return -1;
	if (q->readonly > 1)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "readonly must be 0 or 1");
	if (!pol_fs_allowed(c->pol, q->fs_type))
		return mh_fail(r, MH_E_REFUSED, EPERM, "filesystem type not allowed by policy");
	if (pol_mount_options_check(c->pol, q->mount_flags, why, sizeof(why)) < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM, "%s", why);
	if (mh_mount_opts_parse(q->mount_flags, q->readonly, &o, r) < 0)
		return -1;
	bool ro = o.sb_ro;

	if ((img = mh_image_open(c, q->volume_id, ro, r)) < 0)
		goto out;
	if (fstat(img, &v.st) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "stat image: %s", strerror(errno));
		goto out;
	}
	if ((dir = mh_path_open_dir(root, q->staging_path, r)) < 0)
		goto out;
	int found = mh_loop_find(v.st.st_dev, v.st.st_ino, &v.loop, r);
	if (found < 0 || mh_mount_info(dir, &m, r) < 0)
		goto out;
	v.attached = found == 1;
	if (m.mounted) {
		if (!vol_owns(&v, &m))
			mh_fail(r, MH_E_EXISTS, EEXIST, "%s is already mounted at the staging path",
			        m.source);
		else if (strcmp(m.fstype, q->fs_type) != 0 || m.ro != ro)
			mh_fail(r, MH_E_EXISTS, EEXIST, "already staged as %s%s", m.fstype,
			        m.ro ? " read-only" : " read-write");
		else {
			a->note = "already staged";
			ret = 0;
		}
		goto out;
	}
	if (v.attached) {
		mh_fail(r, MH_E_BUSY, EBUSY, "volume is attached as %s but not staged here",
		        v.loop.path);
		goto out;
	}

	/* Safety: the loop device exposes our own image file, opened by us. */
	if ((lfd = mh_loop_attach(img, q->volume_id, ro, &v.loop, r)) < 0)
		goto out;
	int probe = mh_probe(lfd, q->fs_type, r);
	if (probe < 0)
		goto out;
	if (probe == MH_PROBE_BLANK) {
		if (ro) {
			mh_fail(r, MH_E_PRECONDITION, 0, "blank volume cannot be staged read-only");
			goto out;
		}
		/*
		 * Safety: blkid found no signature of any kind, so no data is lost.
		 * mkfs writes the image file (see mh_mkfs.c); the loop device's
		 * cache still holds what the probe read, so drop it, and check.
		 */
		char name[MH_IMAGE_NAME_MAX];
		mh_image_name(q->volume_id, name, sizeof(name));
		if (mh_mkfs(q->fs_type, c->images_fd, name, r) < 0 || mh_loop_flush(lfd, r) < 0)
			goto out;
		if (mh_probe(lfd, q->fs_type, r) != MH_PROBE_MATCH) {
			mh_fail(r, MH_E_FAILED, 0, "no %s signature after mkfs", q->fs_type);
			goto out;
		}
	}
	/* Safety: see mh_mount.c (fd target, nosuid,nodev forced, detached until attached). */
	if (mh_mount_fs(v.loop.path, q->fs_type, &o, dir, r) < 0)
		goto out;
	ret = 0;
out:
	/* The mount holds the device now; without one, closing lfd lets autoclear detach it. */
	mh_closep(&lfd);
	if (ret < 0 && v.loop.path[0] && !v.attached) {
		struct mh_res ignore = {0};
		if (mh_loop_ensure_detached(v.st.st_dev, v.st.st_ino, &ignore) < 0)
			log_kv(LOG_LVL_ERROR, "loop_leak", "device", v.loop.path, "reason",
			       ignore.reason, NULL);
	}
	mh_closep(&img);
	mh_closep(&dir);
	mh_mount_opts_free(&o);
	return ret;
}

static int mh_answer_unstage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                             struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_unstage *q = &req->u.unstage;
	const char *root;
	char where[MH_PATH_MAX + 1];
	struct vol v = {0};
	struct mh_mnt m;
	int dir = -1;

	a->volume_id = q->volume_id;
	a->path = q->staging_path;
	if (check_id(q->volume_id, r) < 0 ||
	    check_path(c, q->staging_path, "staging path", &root, r) < 0)
		return -1;
	if ((dir = mh_path_open_dir(root, q->staging_path, r)) < 0) {
		if (r->kind != MH_E_NOTFOUND)
			return -1;
		*r = (struct mh_res){0};
		a->note = "staging path does not exist";
		return 0;
	}
	if (mh_mount_info(dir, &m, r) < 0)
		goto fail;
	if (!m.mounted) {
		mh_closep(&dir);
		a->note = "not staged";
		return 0;
	}
	if (vol_lookup(c, q->volume_id, &v, r) < 0 && r->kind != MH_E_NOTFOUND)
		goto fail;
	*r = (struct mh_res){0}; /* a missing image just means the mount is not ours */
	if (!vol_owns(&v, &m)) {
		mh_fail(r, MH_E_REFUSED, EPERM,
		        "%s is mounted at the staging path, not this volume", m.source);
		goto fail;
	}
	int other = mh_mount_other_use(c->pol, &v.loop, m.id, where, sizeof(where), r);
	if (other < 0)
		goto fail;
	if (other) {
		mh_fail(r, MH_E_BUSY, EBUSY, "volume is still mounted at %s", where);
		goto fail;
	}
	if (unmount_ours(root, q->staging_path, &v, dir, r) < 0)
		return -1;
	/* The device should autoclear with its last mount; make sure it did. */
	return mh_loop_ensure_detached(v.st.st_dev, v.st.st_ino, r);
fail:
	mh_closep(&dir);
	return -1;
}

static int mh_answer_publish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                             struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_publish *q = &req->u.publish;
	const char *sroot, *troot, *name;
	struct vol v = {0};
	struct mh_mnt sm, tm;
	int sdir = -1, parent = -1, tdir = -1, ret = -1;
	bool created = false;

	a->volume_id = q->volume_id;
	a->path = q->target_path;
	a->staging_path = q->staging_path;
	if (check_id(q->volume_id, r) < 0 ||
	    check_path(c, q->staging_path, "staging path", &sroot, r) < 0 ||
	    check_path(c, q->target_path, "target path", &troot, r) < 0)
		return -1;
	if (q->readonly > 1)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "readonly must be 0 or 1");
	if (nested(q->staging_path, q->target_path))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "target and staging paths overlap");

	if (vol_lookup(c, q->volume_id, &v, r) < 0) {
		if (r->kind == MH_E_NOTFOUND)
			r->kind = MH_E_PRECONDITION;
		return -1;
	}
	if ((sdir = mh_path_open_dir(sroot, q->staging_path, r)) < 0 ||
	    mh_mount_info(sdir, &sm, r) < 0) {
		if (r->kind == MH_E_NOTFOUND)
			r->kind = MH_E_PRECONDITION;
		goto out;
	}
	if (!vol_owns(&v, &sm)) {
		mh_fail(r, MH_E_PRECONDITION, 0, "volume is not staged at the staging path");
		goto out;
	}
	/* A read-only staging can only be published read-only; say so in the mount. */
	bool ro = q->readonly || sm.ro;

	if ((parent = mh_path_open_parent(troot, q->target_path, &name, r)) < 0)
		goto out;
	if (mkdirat(parent, name, 0750) == 0)
		created = true;
	else if (errno != EEXIST) {
		mh_fail(r, mh_kind_of_errno(errno), errno, "cannot create target: %s",
		        strerror(errno));
		goto out;
	}
	if ((tdir = mh_path_open_child(parent, name, r)) < 0 || mh_mount_info(tdir, &tm, r) < 0)
		goto out;
	if (tm.mounted) {
		if (!vol_owns(&v, &tm))
			mh_fail(r, MH_E_EXISTS, EEXIST, "%s is already mounted at the target",
			        tm.source);
		else if (tm.ro != ro)
			mh_fail(r, MH_E_EXISTS, EEXIST, "already published %s",
			        tm.ro ? "read-only" : "read-write");
		else {
			a->note = "already published";
			ret = 0;
		}
		goto out;
	}
	/* Safety: a clone of the mount just proved to be this volume's, onto our fd. */
	if (mh_mount_bind(sdir, tdir, ro, r) < 0)
		goto out;
	ret = 0;
out:
	mh_closep(&tdir);
	if (ret < 0 && created)
		unlinkat(parent, name, AT_REMOVEDIR); /* leave no directory we made */
	mh_closep(&parent);
	mh_closep(&sdir);
	return ret;
}

static int mh_answer_unpublish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                               struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_unpublish *q = &req->u.unpublish;
	const char *root, *name;
	struct vol v = {0};
	struct mh_mnt m;
	int parent = -1, tdir = -1, ret = -1;

	a->volume_id = q->volume_id;
	a->path = q->target_path;
	if (check_id(q->volume_id, r) < 0 ||
	    check_path(c, q->target_path, "target path", &root, r) < 0)
		return -1;
	if ((parent = mh_path_open_parent(root, q->target_path, &name, r)) < 0 ||
	    (tdir = mh_path_open_child(parent, name, r)) < 0) {
		if (r->kind == MH_E_NOTFOUND) {
			*r = (struct mh_res){0};
			a->note = "target does not exist";
			ret = 0;
		}
		goto out;
	}
	if (mh_mount_info(tdir, &m, r) < 0)
		goto out;
	if (m.mounted) {
		if (vol_lookup(c, q->volume_id, &v, r) < 0 && r->kind != MH_E_NOTFOUND)
			goto out;
		*r = (struct mh_res){0};
		if (!vol_owns(&v, &m)) {
			mh_fail(r, MH_E_REFUSED, EPERM,
			        "%s is mounted at the target, not this volume", m.source);
			goto out;
		}
		int fd = tdir;
		tdir = -1;
		if (unmount_ours(root, q->target_path, &v, fd, r) < 0)
			goto out;
	}
	mh_closep(&tdir);
	/* rmdir only: an unexpected file inside stays, and so does the directory. */
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
		mh_fail(r, MH_E_FAILED, errno, "cannot remove target directory: %s",
		        strerror(errno));
		goto out;
	}
	ret = 0;
out:
	mh_closep(&tdir);
	mh_closep(&parent);
	return ret;
}

/* ---- dispatch ----------------------------------------------------------- */

typedef int (*mh_answer_fn)(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                            struct mh_audit *a, struct mh_res *r);

/* The whole privileged surface. A request type not listed here ends the helper. */
static const struct {
	uint16_t req, ans;
	mh_answer_fn answer;
	const char *name;
} dispatch[] = {
    {MH_REQ_PING, MH_ANS_PING, mh_answer_ping, "PING"},
    {MH_REQ_CREATE, MH_ANS_CREATE, mh_answer_create, "CREATE"},
    {MH_REQ_DELETE, MH_ANS_DELETE, mh_answer_delete, "DELETE"},
    {MH_REQ_STAGE, MH_ANS_STAGE, mh_answer_stage, "STAGE"},
    {MH_REQ_UNSTAGE, MH_ANS_UNSTAGE, mh_answer_unstage, "UNSTAGE"},
    {MH_REQ_PUBLISH, MH_ANS_PUBLISH, mh_answer_publish, "PUBLISH"},
    {MH_REQ_UNPUBLISH, MH_ANS_UNPUBLISH, mh_answer_unpublish, "UNPUBLISH"},
};

static const char *const kind_names[] = {
    [MH_E_OK] = "OK",
    [MH_E_REFUSED] = "REFUSED",
    [MH_E_NOTFOUND] = "NOTFOUND",
    [MH_E_EXISTS] = "EXISTS",
    [MH_E_BUSY] = "BUSY",
    [MH_E_NOSPACE] = "NOSPACE",
    [MH_E_FAILED] = "FAILED",
    [MH_E_PRECONDITION] = "PRECONDITION",
    [MH_E_UNAVAILABLE] = "UNAVAILABLE",
};

int mh_ops_handle(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans)
{
	size_t i;
	for (i = 0; i < sizeof(dispatch) / sizeof(dispatch[0]); i++)
		if (dispatch[i].req == req->type)
			break;
	if (i == sizeof(dispatch) / sizeof(dispatch[0]))
		return -1;

	struct mh_res r = {0};
	struct mh_audit a = {0};
	memset(ans, 0, sizeof(*ans));
	ans->id = req->id;
	ans->type = dispatch[i].ans;
	int rc = dispatch[i].answer(c, req, ans, &a, &r);
	if (rc < 0 && r.kind == MH_E_OK)
		mh_fail(&r, MH_E_FAILED, 0,
		        "internal error"); /* never report success by accident */
	if (rc < 0 || r.kind != MH_E_OK) {
		memset(&ans->u, 0, sizeof(ans->u));
		ans->type = MH_ANS_ERROR;
		ans->u.error.kind = (uint32_t)r.kind;
		ans->u.error.sys_errno = (uint32_t)r.sys_errno;
		snprintf(ans->u.error.reason, sizeof(ans->u.error.reason), "%s", r.reason);
	}

	char idbuf[16], errbuf[16];
	snprintf(idbuf, sizeof(idbuf), "%u", req->id);
	snprintf(errbuf, sizeof(errbuf), "%d", r.sys_errno);
	bool failed = r.kind == MH_E_FAILED || r.kind == MH_E_NOSPACE;
	const char *result = r.kind == MH_E_OK ? "ok" : failed ? "failed" : "refused";
	log_kv(req->type == MH_REQ_PING ? LOG_LVL_DEBUG : LOG_LVL_INFO, "audit", "req", idbuf, "op",
	       dispatch[i].name, "volume_id", a.volume_id, "path", a.path, "staging_path",
	       a.staging_path, "result", result, "kind",
	       r.kind == MH_E_OK ? NULL : kind_names[r.kind], "errno", r.sys_errno ? errbuf : NULL,
	       "reason", r.kind == MH_E_OK ? a.note : r.reason, NULL);
	return 0;
}
