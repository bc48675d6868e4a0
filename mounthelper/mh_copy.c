/*
 * SNAPSHOT, GROUP_SNAPSHOT, CLONE, DELETE_SNAPSHOT and CAPACITY: copies of
 * backing images inside the data directory, and how much room is left there.
 *
 *   snapshot: <data>/snapshots/<snapshot-id>.img  from  images/<volume-id>.img
 *   clone:    images/<new-id>.img  from  snapshots/<id>.img or images/<id>.img,
 *             then grown to the size asked for
 *
 * A copy is a reflink (FICLONE: the new file shares the extents, so its cost
 * does not grow with the volume's size) where the data directory's file
 * system supports it (xfs with reflink=1, btrfs), else a sparse-aware copy:
 * SEEK_DATA/SEEK_HOLE find the data extents, copy_file_range copies only
 * those, and holes stay holes. The copying is sepcsi-runner's, which holds no
 * capability, on the two descriptors the helper opened (mh_tools_copy); the
 * names are the helper's: every copy is written under a temporary name it
 * made, fsync'd, and published with renameat2(RENAME_NOREPLACE) plus an fsync
 * of the directory, so a crash leaves either nothing or a whole copy, and an
 * existing snapshot or image is never replaced. A runner job still copying
 * for a worker that died writes only into that worker's temporary file, which
 * the retry unlinks before it makes its own.
 *
 * Consistency: if the source volume is mounted (staged as a file system), its
 * file system is frozen (FIFREEZE on a directory fd of the mount) for the copy
 * and always thawed afterwards; frozen, it has written everything to the loop
 * device, which writes it into the image file the copy reads. Raw block
 * volumes are copied crash-consistent, as they are. A copy that outlasts its
 * freeze's bound fails: it would not be of one point in time. A group
 * snapshot freezes every member before the first copy and thaws them after
 * the last, all within one bound; a raw block member in use, which nothing
 * can freeze, fails the group, and any failure removes every member's copy.
 *
 * Runs in a worker of the helper (CAPACITY inline) as root under seccomp.
 * Nothing here is fatal.
 *
 * Safety argument. Every file name is built by the helper from an id that
 * passed pol_volume_id_valid / pol_snapshot_id_valid ("sv-"/"ss-" + 32 hex
 * digits: no '/', no ".."), inside directories opened once at start
 * (root-owned, 0700), with O_NOFOLLOW; a CVE-style "../../etc" id cannot
 * reach a path. FIFREEZE (CAP_SYS_ADMIN) is applied only to a mount the
 * helper proved to be this volume's (its source is the loop device backed by
 * this image) beneath an allowed root; a worker killed mid-copy is noticed by
 * the main loop, which thaws the volume (mh_copy_thaw).
 */
#include "mh_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mh_common.h"
#include "mh_helper_ops.h"
#include "mh_image_life.h"
#include "mh_pause.h"
#include "mh_proto_all.h"
#include "mh_space.h"
#include "mh_tools.h"
#include "mh_worker.h"

static int io_fail(struct mh_res *r, int err, const char *step)
{
	return mh_fail(r, (err == ENOSPC || err == EDQUOT) ? MH_E_NOSPACE : MH_E_FAILED, err,
	               "%s: %s", step, strerror(err));
}

/* ---- freezing the source ------------------------------------------------- */

/*
 * Freeze the volume's file system if mounted: the fd to thaw later, or -1
 * (none, or r set); *attached whether a loop device backs its image.
 */
static int freeze_source(const struct mh_ctx *c, const char *volume_id, bool *attached,
                         struct mh_res *r)
{
	struct mh_vol v = {0};
	if (mh_vol_lookup(c, volume_id, &v, r) < 0)
		return -1;
	*attached = v.attached;
	if (!v.attached)
		return -1;
	int fd = mh_mount_fs_fd(&v.loop, r);
	if (fd < 0)
		return -1;
	/* Safety: this volume's own file system, mounted by us; thawed right after the copy. */
	if (ioctl(fd, FIFREEZE, 0) < 0) {
		int err = errno;
		close(fd);
		if (err == EBUSY)
			return mh_fail(r, MH_E_BUSY, err, "volume's file system is already frozen");
		if (err == EOPNOTSUPP)
			return -1; /* cannot be frozen: copy it as it is */
		return mh_fail(r, MH_E_FAILED, err, "FIFREEZE: %s", strerror(err));
	}
	return fd;
}

/*
 * With a core, the core freezes (its FREEZE holds the freeze to at most
 * seconds itself, whatever becomes of this worker) and thaws. 1 frozen, 0
 * nothing mounted to freeze (copied as it is), -1 with r.
 */
static int freeze_by_core(const char *volume_id, unsigned seconds, struct mh_res *r)
{
	struct mh_msg q = {.type = MH_REQ_FREEZE}, ans;
	struct mh_res why = {0};
	snprintf(q.u.freeze.volume_id, sizeof(q.u.freeze.volume_id), "%s", volume_id);
	q.u.freeze.seconds = seconds;
	if (mh_core_ask(&q, &ans, &why) == 0)
		return 1;
	if (why.kind == MH_E_PRECONDITION || why.kind == MH_E_NOTFOUND)
		return 0; /* not staged, or no file system mounted: nothing is written meanwhile */
	*r = why;
	return -1;
}

static void thaw_by_core(const char *volume_id, bool *frozen)
{
	struct mh_msg q = {.type = MH_REQ_THAW}, ans;
	struct mh_res why = {0};
	if (!*frozen)
		return;
	*frozen = false;
	snprintf(q.u.del.volume_id, sizeof(q.u.del.volume_id), "%s", volume_id);
	if (mh_core_ask(&q, &ans, &why) < 0) /* the core's deadline thaws it anyway */
		log_kv(LOG_LVL_ERROR, "thaw_failed", "volume_id", volume_id, "reason", why.reason,
		       NULL);
}

static void thaw(int *fd)
{
	if (*fd >= 0)
		(void)ioctl(*fd, FITHAW, 0);
	mh_closep(fd);
}

/* A source volume frozen for a copy: by the core, by this worker (fd), or not at all. */
struct frozen_src {
	const char *id;
	int fd;
	bool by_core;
	bool attached; /* without a core: a loop device backs the image (frozen or not) */
};

/*
 * Freeze volume id's file system, if mounted, for at most seconds (with a
 * core, which keeps the bound; without, the main loop keeps the policy's).
 * 0 frozen or nothing to freeze (f says which), -1 with r.
 */
static int freeze(const struct mh_ctx *c, const char *id, unsigned seconds, struct frozen_src *f,
                  struct mh_res *r)
{
	*f = (struct frozen_src){.id = id, .fd = -1};
	if (c->core) {
		int rc = freeze_by_core(id, seconds, r);
		f->by_core = rc == 1;
		return rc < 0 ? -1 : 0;
	}
	f->fd = freeze_source(c, id, &f->attached, r);
	return f->fd < 0 && r->kind != MH_E_OK ? -1 : 0;
}

static bool is_frozen(const struct frozen_src *f)
{
	return f->fd >= 0 || f->by_core;
}

/*
 * Thaw what f froze. The caller tells the main loop once every source it
 * froze is thawed (MH_NOTE_THAWED ends the main loop's bound on the worker).
 */
static void thaw_src(struct frozen_src *f)
{
	thaw(&f->fd);
	thaw_by_core(f->id, &f->by_core);
}

void mh_copy_thaw(const struct mh_ctx *c, const char *volume_id)
{
	struct mh_res r = {0};
	struct mh_vol v = {0};
	/* What the core froze, it thaws at its deadline, which the worker's bound matches. */
	if (c->core || !pol_volume_id_valid(volume_id) || mh_vol_lookup(c, volume_id, &v, &r) < 0 ||
	    !v.attached)
		return;
	mh_thaw_loop(&v.loop, volume_id, "its copy ended without thawing it");
}

/* Thaw a copy's source, and say so if it was frozen. */
static void thaw_and_note(struct frozen_src *f)
{
	bool was = is_frozen(f);
	thaw_src(f);
	if (was)
		mh_worker_note(MH_NOTE_THAWED);
}

/* ---- copying ------------------------------------------------------------ */

/* A copy being made: dir/<name>, written as dir/<name>.tmp until published. */
struct copy {
	int dir, dst;
	bool published;
	char name[MH_ID_MAX + 16], tmp[MH_ID_MAX + 24];
};

/* The temporary file of a new copy of src, marked raw as src is. 0, or -1 with r. */
static int copy_open(const struct mh_ctx *c, int src, int dir, const char *name, struct copy *cp,
                     struct mh_res *r)
{
	*cp = (struct copy){.dir = dir, .dst = -1};
	snprintf(cp->name, sizeof(cp->name), "%s", name);
	snprintf(cp->tmp, sizeof(cp->tmp), "%s.tmp", name);
	/* A temporary file left by a crash mid-copy is ours to remove. */
	if (unlinkat(dir, cp->tmp, 0) < 0 && errno != ENOENT)
		return io_fail(r, errno, "remove stale temporary");
	cp->dst = openat(dir, cp->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	                 MH_IMAGE_MODE(c));
	if (cp->dst < 0)
		return io_fail(r, errno, "create copy");
	if (dir == c->images_fd) /* a clone: a new image, which no loop device backs yet */
		mh_loop_record_new(cp->dst);
	/* A copy of bytes a pod may have written raw is marked so too, before it has a name. */
	return mh_image_taken_raw(src) ? mh_image_mark_raw(cp->dst, true, r) : 0;
}

/* The copy under its name, never replacing a file (the directory's fsync is the caller's). */
static int copy_publish(struct copy *cp, struct mh_res *r)
{
	if (renameat2(cp->dir, cp->tmp, cp->dir, cp->name, RENAME_NOREPLACE) < 0)
		return io_fail(r, errno, "rename copy");
	cp->published = true;
	return 0;
}

/* Close the copy; unless published, its temporary file goes too. */
static void copy_close(struct copy *cp)
{
	if (cp->dst >= 0 && !cp->published)
		unlinkat(cp->dir, cp->tmp, 0);
	mh_closep(&cp->dst);
}

/* Whether a freeze begun at t0_ms, for at most the policy's bound, still holds. */
static int still_frozen(const struct mh_ctx *c, int64_t t0_ms, struct mh_res *r)
{
	if (mono_ms() - t0_ms < 1000LL * pol_freeze_max_seconds(c->pol))
		return 0;
	return mh_fail(r, MH_E_FAILED, ETIMEDOUT,
	               "the copy outlasted freeze_max_seconds (%u s): the source was thawed "
	               "before it ended, so it is no copy of one point in time",
	               pol_freeze_max_seconds(c->pol));
}

/*
 * The whole copy: src into dir/<name> via dir/<name>.tmp, grown to size
 * (>= src's size), durable, never replacing an existing file. src_id names
 * the source (volume or snapshot id); freeze_id names the source volume to
 * freeze during the copy (NULL for a snapshot source).
 */
static int copy_to(const struct mh_ctx *c, int src, const char *src_id, off_t size,
                   const char *freeze_id, int dir, const char *name, bool *reflinked,
                   struct mh_res *r)
{
	struct copy cp;
	struct frozen_src f = {.fd = -1};
	int ret = -1;
	int64_t t0 = 0;
	if (copy_open(c, src, dir, name, &cp, r) < 0)
		goto out;
	if (freeze_id && c->core)
		mh_core_flush(freeze_id); /* the freeze then has little left to write back */
	t0 = mono_ms();
	if (freeze_id && freeze(c, freeze_id, pol_freeze_max_seconds(c->pol), &f, r) < 0)
		goto out;
	if (is_frozen(&f))
		mh_worker_note(MH_NOTE_FROZEN); /* the main loop bounds the freeze in time */
	mh_pause(c, "copy", src_id); /* tests: a copy in flight, its source frozen if mounted */
	/* Copied, grown and made durable by the runner, which needs no capability for it. */
	int rc = mh_tools_copy(src, cp.dst, (uint64_t)size, reflinked, r);
	if (rc == 0 && is_frozen(&f))
		rc = still_frozen(c, t0, r);
	thaw_and_note(&f); /* always, and as early as possible */
	if (rc < 0 || copy_publish(&cp, r) < 0)
		goto out;
	if (fsync(dir) < 0) {
		io_fail(r, errno, "sync directory");
		goto out;
	}
	ret = 0;
out:
	thaw_and_note(&f);
	copy_close(&cp);
	return ret;
}

/* An existing copy: a regular file; its size in *size. 1 exists, 0 not, -1 error. */
static int existing(int dir, const char *name, uint64_t *size, struct mh_res *r)
{
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : io_fail(r, errno, "stat");
	if (!S_ISREG(st.st_mode))
		return mh_fail(r, MH_E_EXISTS, EEXIST, "%s exists and is not a regular file", name);
	*size = (uint64_t)st.st_size;
	return 1;
}

/* ---- handlers ------------------------------------------------------------ */

int mh_answer_snapshot(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                       struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_snapshot *q = &req->u.snapshot;
	char name[MH_ID_MAX + 16];
	struct mh_ans_copy *out = &ans->u.copy_ans;
	snprintf(name, sizeof(name), "%s.img", q->snapshot_id);
	int ex = existing(c->snaps_fd, name, &out->size_bytes, r);
	if (ex != 0) {
		out->reflinked = c->reflink;
		a->note = "snapshot exists";
		return ex < 0 ? -1 : 0;
	}
	struct stat st;
	int src = mh_image_open(c, q->volume_id, true, &st, r);
	if (src < 0)
		return -1;
	bool reflinked = false;
	int ret = -1;
	if (copy_to(c, src, q->volume_id, st.st_size, q->volume_id, c->snaps_fd, name, &reflinked,
	            r) == 0) {
		out->size_bytes = (uint64_t)st.st_size;
		out->reflinked = reflinked;
		a->note = reflinked ? "reflinked" : "sparse copy";
		ret = 0;
	}
	close(src);
	return ret;
}

/* ---- group snapshots ------------------------------------------------------ */

/* Every member's ids valid and distinct, every slot after the n-th empty. */
static int group_check(const struct mh_req_group *q, struct mh_res *r)
{
	if (q->n < 2 || q->n > MH_GROUP_MAX) /* the codec's bounds, kept here too */
		return mh_fail(r, MH_E_REFUSED, EINVAL, "a group has 2 to %d members",
		               MH_GROUP_MAX);
	for (size_t i = 0; i < MH_GROUP_MAX; i++) {
		if (i >= q->n) {
			if (q->volume_id[i][0] || q->snapshot_id[i][0])
				return mh_fail(r, MH_E_REFUSED, EINVAL, "member %zu is beyond n",
				               i);
			continue;
		}
		if (mh_check_volume_id(q->volume_id[i], r) < 0 ||
		    mh_check_snapshot_id(q->snapshot_id[i], r) < 0)
			return -1;
		for (size_t k = 0; k < i; k++)
			if (strcmp(q->volume_id[k], q->volume_id[i]) == 0 ||
			    strcmp(q->snapshot_id[k], q->snapshot_id[i]) == 0)
				return mh_fail(
				    r, MH_E_REFUSED, EINVAL,
				    "members %zu and %zu name the same volume or snapshot", k, i);
	}
	return 0;
}

/*
 * Freeze member id for what is left of the group's one bound, begun at t0_ms
 * (each later freeze asks for less, so none outlasts the first one's
 * deadline). A member still attached but with nothing to freeze is a raw
 * block device in use, whose writes nothing can hold: refused.
 */
static int freeze_member(const struct mh_ctx *c, const char *id, int64_t t0_ms,
                         struct frozen_src *f, struct mh_res *r)
{
	int64_t left = t0_ms + 1000LL * pol_freeze_max_seconds(c->pol) - mono_ms();
	*f = (struct frozen_src){.id = id, .fd = -1};
	if (left <= 0)
		return still_frozen(c, t0_ms, r);
	if (freeze(c, id, (unsigned)((left + 999) / 1000), f, r) < 0)
		return -1;
	int attached = is_frozen(f) ? 0 : c->core ? mh_core_attached(id, r) : f->attached;
	if (attached < 0)
		return -1;
	if (attached)
		return mh_fail(r, MH_E_PRECONDITION, EBUSY,
		               "volume %s is in use as a raw block device, which cannot be frozen: "
		               "no point in time would hold across the group",
		               id);
	return 0;
}

struct member {
	int src;
	off_t size;
	struct copy cp;
	struct frozen_src f;
};

/* Open each member's image and its copy; flush what is staged. 0, or -1 with r. */
static int group_open(const struct mh_ctx *c, const struct mh_req_group *q, struct member *m,
                      struct mh_res *r)
{
	for (size_t i = 0; i < q->n; i++) {
		struct stat st;
		char name[MH_ID_MAX + 16];
		snprintf(name, sizeof(name), "%s.img", q->snapshot_id[i]);
		if ((m[i].src = mh_image_open(c, q->volume_id[i], true, &st, r)) < 0)
			return -1;
		m[i].size = st.st_size;
		if (copy_open(c, m[i].src, c->snaps_fd, name, &m[i].cp, r) < 0)
			return -1;
	}
	for (size_t i = 0; c->core && i < q->n; i++)
		mh_core_flush(q->volume_id[i]); /* all before the first freeze: it then is short */
	return 0;
}

/*
 * Thaw every member, then tell the main loop, which bounds the group's freeze
 * until that note: none stays frozen unbounded behind another's thaw.
 */
static void thaw_all(const struct mh_req_group *q, struct member *m)
{
	bool any = false;
	for (size_t i = 0; i < q->n; i++) {
		any = any || is_frozen(&m[i].f);
		thaw_src(&m[i].f);
	}
	if (any)
		mh_worker_note(MH_NOTE_THAWED);
}

/* Freeze every member, copy every one, check the freezes held, thaw, publish. */
static int group_copy(const struct mh_ctx *c, const struct mh_req_group *q, struct member *m,
                      bool *reflinked, struct mh_res *r)
{
	int64_t t0 = mono_ms();
	bool noted = false;
	for (size_t i = 0; i < q->n; i++) {
		if (freeze_member(c, q->volume_id[i], t0, &m[i].f, r) < 0)
			return -1;
		if (is_frozen(&m[i].f) && !noted) /* the main loop bounds it from the first one */
			mh_worker_note(MH_NOTE_FROZEN), noted = true;
	}
	mh_pause(c, "copy", q->volume_id[0]); /* tests: every member frozen, none copied */
	*reflinked = true;
	for (size_t i = 0; i < q->n; i++) {
		bool one = false;
		if (mh_tools_copy(m[i].src, m[i].cp.dst, (uint64_t)m[i].size, &one, r) < 0)
			return -1;
		*reflinked = *reflinked && one;
	}
	if (noted && still_frozen(c, t0, r) < 0)
		return -1;
	thaw_all(q, m); /* as early as possible */
	for (size_t i = 0; i < q->n; i++)
		if (copy_publish(&m[i].cp, r) < 0)
			return -1;
	return fsync(c->snaps_fd) < 0 ? io_fail(r, errno, "sync snapshots directory") : 0;
}

/*
 * An audit record per member after the first (the request's own record names
 * the first and the result), before anything is done: what was asked of whom.
 */
static void audit_members(const struct mh_ctx *c, const struct mh_msg *req)
{
	char idbuf[16], nbuf[16];
	snprintf(idbuf, sizeof(idbuf), "%u", req->id);
	for (size_t i = 1; i < req->u.group.n && i < MH_GROUP_MAX; i++) {
		snprintf(nbuf, sizeof(nbuf), "%zu", i);
		const char *kv[] = {"req",         idbuf,
		                    "op",          "GROUP_SNAPSHOT",
		                    "member",      nbuf,
		                    "volume_id",   req->u.group.volume_id[i],
		                    "snapshot_id", req->u.group.snapshot_id[i]};
		size_t n = sizeof(kv) / sizeof(kv[0]);
		log_kv(LOG_LVL_INFO, "audit_member", kv[0], kv[1], kv[2], kv[3], kv[4], kv[5],
		       kv[6], kv[7], kv[8], kv[9], NULL);
		if (c->audit_fd >= 0)
			log_record(c->audit_fd, "audit_member", kv, n);
	}
}

int mh_answer_group_snapshot(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                             struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_group *q = &req->u.group;
	struct mh_ans_group *out = &ans->u.group_ans;
	struct member m[MH_GROUP_MAX];
	size_t have = 0;
	bool reflinked = false;
	audit_members(c, req);
	if (group_check(q, r) < 0)
		return -1;
	for (size_t i = 0; i < q->n; i++) {
		char name[MH_ID_MAX + 16];
		snprintf(name, sizeof(name), "%s.img", q->snapshot_id[i]);
		int ex = existing(c->snaps_fd, name, &out->size_bytes[i], r);
		if (ex < 0)
			return -1;
		have += (size_t)ex;
	}
	if (have == q->n) { /* a retry of a group that was made */
		out->reflinked = c->reflink;
		a->note = "group snapshot exists";
		return 0;
	}
	if (have > 0) /* rpcd removes what an attempt left before it tries again */
		return mh_fail(r, MH_E_EXISTS, EEXIST, "%zu of the group's %u snapshots exist",
		               have, q->n);
	for (size_t i = 0; i < q->n; i++)
		m[i] = (struct member){.src = -1, .cp = {.dst = -1}, .f = {.fd = -1}};
	int ret = group_open(c, q, m, r) < 0 ? -1 : group_copy(c, q, m, &reflinked, r);
	thaw_all(q, m); /* every member, before anything else is undone */
	for (size_t i = 0; i < q->n; i++) {
		if (ret < 0 && m[i].cp.published) /* one point in time, or no group at all */
			unlinkat(c->snaps_fd, m[i].cp.name, 0);
		copy_close(&m[i].cp);
		mh_closep(&m[i].src);
		out->size_bytes[i] = (uint64_t)m[i].size;
	}
	if (ret < 0)
		return -1;
	out->reflinked = reflinked;
	a->note = reflinked ? "group reflinked" : "group copied sparse";
	return 0;
}

int mh_answer_delete_snapshot(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                              struct mh_audit *a, struct mh_res *r)
{
	const char *id = req->u.del_snapshot.snapshot_id;
	char name[MH_ID_MAX + 16];
	snprintf(name, sizeof(name), "%s.img", id);
	if (unlinkat(c->snaps_fd, name, 0) < 0) {
		if (errno == ENOENT) {
			a->note = "snapshot does not exist";
			return 0;
		}
		return io_fail(r, errno, "remove snapshot");
	}
	if (fsync(c->snaps_fd) < 0)
		return io_fail(r, errno, "sync snapshots directory");
	return 0;
}

int mh_answer_clone(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                    struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_clone *q = &req->u.clone;
	char name[MH_ID_MAX + 16];
	struct mh_ans_copy *out = &ans->u.copy_ans;
	bool from_snap = q->source_kind == MH_SRC_SNAPSHOT;
	uint64_t size;
	if (mh_space_size_ok(c, q->size_bytes, &size, r) < 0)
		return -1;
	mh_image_name(q->volume_id, name, sizeof(name));
	int ex = existing(c->images_fd, name, &out->size_bytes, r);
	if (ex < 0)
		return -1;
	if (ex) {
		if (out->size_bytes != size)
			return mh_fail(r, MH_E_EXISTS, EEXIST, "volume exists with size %llu",
			               (unsigned long long)out->size_bytes);
		out->reflinked = c->reflink;
		a->note = "volume exists";
		return 0;
	}
	int src;
	if (from_snap) {
		char src_name[MH_ID_MAX + 16];
		snprintf(src_name, sizeof(src_name), "%s.img", q->source_id);
		src = openat(c->snaps_fd, src_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (src < 0)
			return errno == ENOENT
			           ? mh_fail(r, MH_E_NOTFOUND, ENOENT, "snapshot does not exist")
			           : io_fail(r, errno, "open snapshot");
	} else if ((src = mh_image_open(c, q->source_id, true, NULL, r)) < 0) {
		return -1;
	}
	struct stat st;
	bool reflinked = false;
	int ret = -1;
	if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode)) {
		mh_fail(r, MH_E_FAILED, EINVAL, "source is not a regular file");
	} else if ((uint64_t)st.st_size > size) {
		mh_fail(r, MH_E_REFUSED, EINVAL, "size %llu is smaller than the source (%lld)",
		        (unsigned long long)size, (long long)st.st_size);
	} else if (copy_to(c, src, q->source_id, (off_t)size, from_snap ? NULL : q->source_id,
	                   c->images_fd, name, &reflinked, r) == 0) {
		out->size_bytes = size;
		out->reflinked = reflinked;
		a->note = reflinked ? "reflinked" : "sparse copy";
		ret = 0;
	}
	close(src);
	return ret;
}

int mh_answer_capacity(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                       struct mh_audit *a, struct mh_res *r)
{
	struct statvfs sv;
	if (fstatvfs(c->data_fd, &sv) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "statvfs: %s", strerror(errno));
	/* What may still be promised (mh_space.c), not merely what is free on disk. */
	ans->u.capacity_ans.available_bytes = mh_space_available(c);
	ans->u.capacity_ans.total_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
	ans->u.capacity_ans.max_volume_bytes = mh_space_max_volume(c);
	ans->u.capacity_ans.reflink = c->reflink;
	ans->u.capacity_ans.direct_io = c->direct_io;
	return 0;
}
