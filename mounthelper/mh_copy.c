/*
 * SNAPSHOT, CLONE, DELETE_SNAPSHOT and CAPACITY: copies of backing images
 * inside the data directory, and how much room is left there.
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
 * device, whose writes go through the image file's page cache, which the copy
 * reads. Raw block volumes are copied crash-consistent, as they are.
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

#include "log.h"
#include "mh_common.h"
#include "mh_image_life.h"
#include "mh_helper_ops.h"
#include "mh_pause.h"
#include "mh_space.h"
#include "mh_tools.h"
#include "mh_worker.h"

static int io_fail(struct mh_res *r, int err, const char *step)
{
	return mh_fail(r, (err == ENOSPC || err == EDQUOT) ? MH_E_NOSPACE : MH_E_FAILED, err,
	               "%s: %s", step, strerror(err));
}

/* ---- freezing the source ------------------------------------------------- */

/* Freeze the volume's file system if mounted: the fd to thaw later, or -1 (none, or r set). */
static int freeze_source(const struct mh_ctx *c, const char *volume_id, struct mh_res *r)
{
	struct mh_vol v = {0};
	if (mh_vol_lookup(c, volume_id, &v, r) < 0)
		return -1;
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
 * With a core, the core freezes (its FREEZE holds the freeze to the policy's
 * bound itself, whatever becomes of this worker) and thaws. 1 frozen, 0
 * nothing mounted to freeze (copied as it is), -1 with r.
 */
static int freeze_by_core(const struct mh_ctx *c, const char *volume_id, struct mh_res *r)
{
	struct mh_msg q = {.type = MH_REQ_FREEZE}, ans;
	struct mh_res why = {0};
	snprintf(q.u.freeze.volume_id, sizeof(q.u.freeze.volume_id), "%s", volume_id);
	q.u.freeze.seconds = pol_freeze_max_seconds(c->pol);
	mh_core_flush(volume_id); /* the freeze then has little left to write back */
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
	mh_worker_note(MH_NOTE_THAWED);
}

static void thaw(int *fd)
{
	if (*fd >= 0) {
		(void)ioctl(*fd, FITHAW, 0);
		mh_worker_note(MH_NOTE_THAWED);
	}
	mh_closep(fd);
}

void mh_copy_thaw(const struct mh_ctx *c, const char *volume_id)
{
	struct mh_res r = {0};
	struct mh_vol v = {0};
	/* What the core froze, it thaws at its deadline, which the worker's bound matches. */
	if (c->core || !pol_volume_id_valid(volume_id) || mh_vol_lookup(c, volume_id, &v, &r) < 0 ||
	    !v.attached)
		return;
	int fd = mh_mount_fs_fd(&v.loop, &r);
	thaw(&fd); /* EINVAL when it was not frozen: nothing to do */
}

/* ---- copying ------------------------------------------------------------ */

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
	char tmp[MH_ID_MAX + 24];
	int dst = -1, frozen = -1, ret = -1;
	bool by_core = false; /* the core froze freeze_id */
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	/* A temporary file left by a crash mid-copy is ours to remove. */
	if (unlinkat(dir, tmp, 0) < 0 && errno != ENOENT)
		return io_fail(r, errno, "remove stale temporary");
	dst =
	    openat(dir, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, MH_IMAGE_MODE(c));
	if (dst < 0)
		return io_fail(r, errno, "create copy");
	if (dir == c->images_fd) /* a clone: a new image, which no loop device backs yet */
		mh_loop_record_new(dst);
	/* A copy of bytes a pod may have written raw is marked so too, before it has a name. */
	if (mh_image_taken_raw(src) && mh_image_mark_raw(dst, true, r) < 0)
		goto out;
	if (freeze_id && c->core) {
		int rc = freeze_by_core(c, freeze_id, r);
		if (rc < 0)
			goto out;
		by_core = rc == 1;
	} else if (freeze_id && (frozen = freeze_source(c, freeze_id, r)) < 0 &&
	           r->kind != MH_E_OK) {
		goto out;
	}
	if (frozen >= 0 || by_core)
		mh_worker_note(MH_NOTE_FROZEN); /* the main loop bounds the freeze in time */
	mh_pause(c, "copy", src_id); /* tests: a copy in flight, its source frozen if mounted */
	/* Copied, grown and made durable by the runner, which needs no capability for it. */
	int rc = mh_tools_copy(src, dst, (uint64_t)size, reflinked, r);
	thaw(&frozen); /* always, and as early as possible */
	thaw_by_core(freeze_id, &by_core);
	if (rc < 0)
		goto out;
	if (renameat2(dir, tmp, dir, name, RENAME_NOREPLACE) < 0) {
		io_fail(r, errno, "rename copy");
		goto out;
	}
	if (fsync(dir) < 0) {
		io_fail(r, errno, "sync directory");
		goto out;
	}
	ret = 0;
out:
	thaw(&frozen);
	thaw_by_core(freeze_id, &by_core);
	mh_closep(&dst);
	if (ret < 0)
		unlinkat(dir, tmp, 0);
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
	int src = mh_image_open(c, q->volume_id, true, r);
	if (src < 0)
		return -1;
	struct stat st;
	bool reflinked = false;
	int ret = -1;
	if (fstat(src, &st) == 0 && copy_to(c, src, q->volume_id, st.st_size, q->volume_id,
	                                    c->snaps_fd, name, &reflinked, r) == 0) {
		out->size_bytes = (uint64_t)st.st_size;
		out->reflinked = reflinked;
		a->note = reflinked ? "reflinked" : "sparse copy";
		ret = 0;
	}
	close(src);
	return ret;
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
	} else if ((src = mh_image_open(c, q->source_id, true, r)) < 0) {
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
