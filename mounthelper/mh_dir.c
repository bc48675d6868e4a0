/*
 * Directory volumes: a directory per volume beneath a base directory that the
 * policy names ([directories] base_dirs), for many volumes sharing one file
 * system. The handlers of every MH_REQ_DIR_* request.
 *
 * Runs in a helper worker (DIR_STATS and DIR_CAPACITY: the main loop) as root
 * with the helper's capabilities, under seccomp. Nothing here is fatal.
 *
 * Safety argument. A request names a base (exactly one of the policy's) and a
 * name beneath it (pol_dir_name_ok: 1 to 4 plain components, never '.', '..',
 * a leading '.' or "archived-"), so it can only ever name a directory inside
 * a base, and never one of the helper's own areas there:
 *   <base>/.sepcsi-work/<id>       a volume or snapshot being made
 *   <base>/.sepcsi-trash/<id>      a volume or snapshot being removed
 *   <base>/.sepcsi-snapshots/<id>  snapshots
 * The base and every directory above a volume's are walked without symlinks
 * and must be root's alone (as in kubelet's tree, mh_at.c). A volume's
 * directory is made in the work area, marked as the volume's (trusted xattr
 * naming the volume and the inode, mh_at.c), given its project quota and its
 * content there, and only then renamed into place without replacing
 * anything (on a btrfs base the directory is a subvolume, and a snapshot or
 * a copy of a subvolume is made by the kernel, mh_btrfs.c): a name never
 * shows a half-made volume, and a directory the helper
 * did not mark for this volume (another volume's, a retained or archived one,
 * an administrator's) is never published, grown, copied, archived or
 * removed. Removal first renames the marked directory into the trash area,
 * then empties it there (mh_tree.c: no symlink followed, no mount crossed;
 * a subvolume is destroyed instead, mh_btrfs.c);
 * what a killed worker leaves in the work and trash areas is removed by the
 * next request for that id, and by PURGE, the main loop's own request to a
 * worker after start and after a worker's death (mh_worker.c): a tree's size
 * is a tenant's to choose, so it is never emptied by the main loop. A publication binds
 * the marked directory itself (nosuid, nodev; read-only from the read-only
 * clone of its base) on a target of the policy's target patterns, exactly as
 * PUBLISH does for image volumes.
 *
 * A shared base (shared_base_dirs) is the same directories seen by every
 * node's helper. There a mark is a record in the base's own area, naming the
 * directory's inode and birth time (mh_dir_area.c), read the same way by every
 * node: what a request or a volume_context says is never proof. Each node
 * records its publications there before it opens a directory, and a delete
 * or an archive looks for them after it moved the directory: nothing is
 * emptied or renamed away while any node publishes it, and a node removes
 * only its own records (its --node-id, never a request's). Retained and
 * archived directories keep a mark that is no longer the volume's
 * (mh_dir_keep), on every base.
 */
#include "mh_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/quota.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mh_btrfs.h"
#include "mh_dir_area.h"
#include "mh_quota.h"
#include "mh_helper_ops.h"
#include "mh_pause.h"
#include "mh_tree.h"
#include "openat2.h"
#include "pol_view.h"
#include "policy_all.h"
#include "mh_proto_all.h"

/* ---- which fields each request uses ------------------------------------------ */

enum { U_VOL = 1, U_NAME = 2, U_PATH = 4, U_SNAP = 8, U_SRC = 16, U_SIZE = 32, U_MODE = 64 };

static unsigned uses(uint16_t type)
{
	switch (type) {
	case MH_REQ_DIR_CREATE:
		return U_VOL | U_NAME | U_SRC | U_SIZE;
	case MH_REQ_DIR_DELETE:
		return U_VOL | U_NAME | U_MODE;
	case MH_REQ_DIR_EXPAND:
		return U_VOL | U_NAME | U_SIZE;
	case MH_REQ_DIR_PUBLISH:
		return U_VOL | U_NAME | U_PATH | U_MODE;
	case MH_REQ_DIR_UNPUBLISH:
	case MH_REQ_DIR_STATS:
		return U_VOL | U_NAME | U_PATH;
	case MH_REQ_DIR_SNAPSHOT:
		return U_VOL | U_NAME | U_SNAP;
	case MH_REQ_DIR_DELETE_SNAPSHOT:
		return U_SNAP;
	case MH_REQ_DIR_NODE:
		return U_NAME;
	default: /* DIR_CAPACITY */
		return 0;
	}
}

/*
 * The fields a request does not use must be empty, the ones it uses well
 * formed (ids, flags and paths are checked by the dispatch and by mh_at_open).
 */
static int check_fields(const struct mh_ctx *c, uint16_t type, const struct mh_req_dir *q,
                        struct mh_res *r)
{
	unsigned u = uses(type);
	if (!pol_base_dir_known(c->pol, q->base))
		return mh_fail(r, MH_E_REFUSED, EPERM, "not a base directory the policy allows");
	if (((u & U_VOL) != 0) != (q->volume_id[0] != '\0') ||
	    ((u & U_SNAP) != 0) != (q->snapshot_id[0] != '\0'))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "volume or snapshot id missing or unused");
	if ((u & U_NAME)
	        ? !pol_dir_name_ok(q->name) || (type == MH_REQ_DIR_NODE && strchr(q->name, '/'))
	        : q->name[0] != '\0')
		return mh_fail(r, MH_E_REFUSED, EINVAL,
		               "malformed directory name: 1 to 4 components of letters, digits, "
		               "'.', '_' and '-', none starting with '.' or \"archived-\"");
	if ((!(u & U_PATH) && q->path[0]) ||
	    ((type == MH_REQ_DIR_PUBLISH || type == MH_REQ_DIR_UNPUBLISH) && !q->path[0]))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "target path missing or unused");
	if (!(u & U_SIZE) && q->size_bytes)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "size unused");
	if ((!(u & U_MODE) && q->mode) || (type == MH_REQ_DIR_PUBLISH && q->mode > 1))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "mode unused or not valid");
	if (type != MH_REQ_DIR_PUBLISH && (q->flags || q->gid))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "flags unused");
	if ((q->flags & MH_F_MOUNT_GROUP) ? q->gid == UINT32_MAX : q->gid != 0)
		return mh_fail(r, MH_E_REFUSED, EINVAL,
		               "gid given without MH_F_MOUNT_GROUP, or -1");
	bool src_ok = q->source_kind == 0                 ? !q->source_id[0] && !q->source_name[0]
	              : q->source_kind == MH_SRC_SNAPSHOT ? !q->source_name[0]
	                                                  : pol_dir_name_ok(q->source_name);
	if ((!(u & U_SRC) && q->source_kind) || !src_ok)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "source missing, unused or malformed");
	if ((u & U_SIZE) && (q->size_bytes < pol_min_volume_bytes(c->pol) ||
	                     q->size_bytes > pol_max_volume_bytes(c->pol)))
		return mh_fail(r, MH_E_REFUSED, ERANGE, "size outside the policy's volume bounds");
	return 0;
}

/*
 * The enforced size of volume directory fd: its btrfs subvolume's quota group
 * limit, or its project quota's; with the bytes and inodes it holds (inodes:
 * project quotas only). 0, or -1 if the size is not enforced.
 */
static int quota_of(int base, int fd, const char *volume_id, uint64_t *limit, uint64_t *used,
                    uint64_t *inodes)
{
	struct dqblk dq;
	uint32_t id;
	*inodes = 0;
	if (mh_btrfs_subvol(fd))
		return mh_btrfs_usage(fd, used, limit) == 0 && *limit ? 0 : -1;
	if (mh_quota_of(base, fd, volume_id, &id, limit, &dq) < 0 || !*limit)
		return -1;
	*used = dq.dqb_curspace;
	*inodes = dq.dqb_curinodes;
	return 0;
}

static void answer_size(int base, int fd, const struct mh_req_dir *q, struct mh_ans_dir *ans)
{
	uint64_t limit, used, inodes;
	ans->quota = quota_of(base, fd, q->volume_id, &limit, &used, &inodes) == 0;
	ans->size_bytes = ans->quota ? limit : q->size_bytes;
}

/* Give the new directory fd its size: a quota group limit on btrfs, else a project quota. */
static int quota_start(int base, int fd, const struct mh_req_dir *q, struct mh_res *r)
{
	if (mh_btrfs_subvol(fd))
		return mh_btrfs_quota_on(fd) ? mh_btrfs_limit(base, fd, q->size_bytes, r) : 0;
	/* A shared base's size is advisory: its project record would be a trusted.* one. */
	return !mh_dir_shared() && mh_quota_on(base)
	           ? mh_quota_start(base, fd, q->volume_id, q->size_bytes, r)
	           : 0;
}

/* ---- the handlers ----------------------------------------------------------------- */

/* The source of a new volume: a snapshot or a volume's directory, both in this base. */
static int source_open(int base, const struct mh_req_dir *q, struct mh_res *r)
{
	if (q->source_kind == MH_SRC_SNAPSHOT) {
		int s = mh_dir_area(base, MH_DIR_SNAPS, true, r), fd = -1;
		if (s >= 0) {
			fd = mh_dir_open_marked(s, q->source_id, q->source_id, r);
			close(s);
		}
		return fd;
	}
	struct mh_req_dir src = {0};
	snprintf(src.volume_id, sizeof(src.volume_id), "%s", q->source_id);
	snprintf(src.name, sizeof(src.name), "%s", q->source_name);
	return mh_dir_volume_open(base, &src, false, r);
}

int mh_answer_dir_create(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                         struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct mh_at at = {.dir = -1};
	struct mh_tree_copied copied = {0};
	bool whole = false;
	int base = -1, work = -1, fd = -1, src = -1, ret = -1;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0 ||
	    mh_dir_locate(base, q->name, true, &at, r) < 0)
		goto out;
	if ((fd = mh_dir_open_marked(at.dir, at.name, q->volume_id, r)) >= 0) {
		a->note = "exists already";
		answer_size(base, fd, q, &ans->u.dir_ans);
		ret = 0;
		goto out;
	}
	if (!mh_absent(r))
		goto out;
	if (q->source_kind && (src = source_open(base, q, r)) < 0) {
		mh_missing_means(r, MH_E_NOTFOUND);
		goto out;
	}
	if ((work = mh_dir_area(base, MH_DIR_WORK, true, r)) < 0 ||
	    (fd = mh_dir_work_make(c, work, q->volume_id, src, &whole, r)) < 0)
		goto out;
	if (quota_start(base, fd, q, r) < 0)
		goto out;
	if (src >= 0 && !whole && mh_tree_copy(src, fd, &copied, r) < 0)
		goto out;
	if (fsync(fd) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "fsync: %s", strerror(errno));
		goto out;
	}
	mh_pause(c, "dir-made", q->volume_id); /* tests: whole in the work area, not in place */
	/* Safety: in place only now, whole and marked, never over anything there. */
	if (renameat2(work, q->volume_id, at.dir, at.name, RENAME_NOREPLACE) < 0) {
		mh_fail(r, errno == EEXIST ? MH_E_EXISTS : MH_E_FAILED, errno,
		        "cannot move the new directory into place: %s", strerror(errno));
		goto out;
	}
	(void)fsync(at.dir);
	answer_size(base, fd, q, &ans->u.dir_ans);
	ans->u.dir_ans.reflinked = src >= 0 && (whole || copied.reflinked);
	a->note = copied.skipped ? "device nodes, FIFOs or sockets of the source not copied" : NULL;
	ret = 0;
out:
	if (ret < 0 && work >= 0)
		mh_dir_purge(c, work, q->volume_id, &(struct mh_res){0});
	mh_closep(&src);
	mh_closep(&fd);
	mh_closep(&work);
	mh_at_close(&at);
	mh_closep(&base);
	return ret;
}

/* An archive's name beside the volume's: archived-<name>, else archived-<name>-<id>. */
static int archive(int dir, const char *name, const char *id, char *to, size_t len,
                   struct mh_res *r)
{
	snprintf(to, len, "archived-%s", name);
	if (renameat2(dir, name, dir, to, RENAME_NOREPLACE) < 0 && errno == EEXIST &&
	    snprintf(to, len, "archived-%s-%s", name, id) < NAME_MAX)
		(void)renameat2(dir, name, dir, to, RENAME_NOREPLACE);
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
		return mh_fail(r, MH_E_FAILED, EEXIST, "cannot rename it to %s", to);
	if (mh_dir_shared() && mh_dir_still_free(id, dir, name, dir, to, r) < 0)
		return -1;
	(void)fsync(dir);
	return 0;
}

int mh_answer_dir_delete(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                         struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	static char note[NAME_MAX + 32];
	char to[NAME_MAX + 1];
	struct mh_at at = {.dir = -1};
	struct dqblk dq;
	uint64_t limit = 0;
	uint32_t id = 0;
	int base = -1, fd = -1, work = -1, tr = -1, ret = -1;
	(void)ans;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0)
		goto out;
	/* What a killed create or delete left in the work or trash area goes first. */
	if ((work = mh_dir_area(base, MH_DIR_WORK, true, r)) < 0 ||
	    mh_dir_purge(c, work, q->volume_id, r) < 0 ||
	    (tr = mh_dir_area(base, MH_DIR_TRASH, true, r)) < 0 ||
	    mh_dir_purge(c, tr, q->volume_id, r) < 0)
		goto out;
	if (mh_dir_locate(base, q->name, false, &at, r) < 0 ||
	    (fd = mh_dir_open_marked(at.dir, at.name, q->volume_id, r)) < 0) {
		if (mh_absent(r)) {
			a->note = "no such directory";
			ret = 0;
		} else if (r->kind == MH_E_EXISTS) {
			*r = (struct mh_res){0};
			a->note = "the directory there is not this volume's: left alone";
			ret = 0;
		}
		goto out;
	}
	/* Shared: not while a node publishes it (checked again after a move), kept or not. */
	if (mh_dir_shared() && mh_dir_published(q->volume_id, r) != 0)
		goto out;
	/* Kept (retained, archived): its mark is no longer the volume's (mh_dir_keep). */
	switch (q->mode) {
	case MH_DIR_RETAIN:
		a->note = "retained";
		ret = mh_dir_keep(fd, q->volume_id, r);
		break;
	case MH_DIR_ARCHIVE:
		ret = archive(at.dir, at.name, q->volume_id, to, sizeof(to), r);
		if (ret == 0)
			ret = mh_dir_keep(fd, q->volume_id, r);
		snprintf(note, sizeof(note), "archived as %s", to);
		a->note = note;
		break;
	default:
		if (mh_quota_of(base, fd, q->volume_id, &id, &limit, &dq) < 0)
			id = 0;
		mh_closep(&fd);
		ret = mh_dir_trash(c, base, at.dir, at.name, q->volume_id, r);
		if (ret == 0 && id)
			ret = mh_quota_set(base, id, 0, r);
	}
out:
	mh_closep(&fd);
	mh_closep(&tr);
	mh_closep(&work);
	mh_at_close(&at);
	mh_closep(&base);
	return ret;
}

int mh_answer_dir_expand(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                         struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct dqblk dq;
	uint64_t limit, used;
	uint32_t id = 0;
	int base = -1, fd = -1, ret = -1;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0 ||
	    (fd = mh_dir_volume_open(base, q, false, r)) < 0)
		goto out;
	if (mh_btrfs_subvol(fd) && mh_btrfs_usage(fd, &used, &limit) == 0) {
		if (limit && limit >= q->size_bytes)
			a->note = "the quota group's limit is that large already";
		else if (mh_btrfs_limit(base, fd, q->size_bytes, r) < 0)
			goto out;
	} else if (mh_quota_of(base, fd, q->volume_id, &id, &limit, &dq) == 0) {
		if (limit >= q->size_bytes)
			a->note = "the quota is that large already";
		else if (mh_quota_set(base, id, q->size_bytes, r) < 0)
			goto out;
	} else {
		a->note = "no project quota: the size is advisory";
	}
	answer_size(base, fd, q, &ans->u.dir_ans);
	ret = 0;
out:
	mh_closep(&fd);
	mh_closep(&base);
	return ret;
}

int mh_answer_dir_publish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                          struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct mh_vol v = {.dir = true};
	struct mh_mnt tm;
	struct mh_at tat = {.dir = -1};
	struct stat st;
	bool ro = q->mode == 1, made = false, changed = false, noted = false, shared;
	int base = -1, fd = -1, bind = -1, tfd = -1, ret = -1, id;
	(void)ans;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0) {
		mh_missing_means(r, MH_E_PRECONDITION);
		goto out;
	}
	/*
	 * On a shared base, this node's record of the publication comes before the
	 * directory is opened (a delete on any node looks for it after it moved the
	 * directory away), and no other node's may stand in its way (a single-node
	 * access mode's, mh_dir_other_nodes).
	 */
	shared = mh_dir_shared();
	bool one = q->flags & MH_F_ONE_NODE;
	if (shared && (mh_dir_pub_note(q->volume_id, q->path, one, &noted, r) < 0 ||
	               mh_dir_other_nodes(q->volume_id, one, r) != 0))
		goto out;
	if ((fd = mh_dir_volume_open(base, q, false, r)) < 0 || fstat(fd, &v.st) < 0) {
		mh_missing_means(r, MH_E_PRECONDITION);
		goto out;
	}
	if ((q->flags & MH_F_MOUNT_GROUP) && mh_mount_set_group(fd, q->gid, &changed, r) < 0)
		goto out;
	/* Read-only: the same directory, reached through the base's read-only clone. */
	if (ro) {
		mh_closep(&base);
		if ((base = mh_dir_base_open(c, q->base, true, r)) < 0 ||
		    (bind = mh_dir_volume_open(base, q, false, r)) < 0 || fstat(bind, &st) < 0)
			goto out;
		if (st.st_dev != v.st.st_dev || st.st_ino != v.st.st_ino) {
			mh_fail(r, MH_E_FAILED, EAGAIN, "the volume's directory changed meanwhile");
			goto out;
		}
	}
	int rc = mh_mount_point(c, q->path, POL_TARGET, &v, q->volume_id, true, &tat, &tfd, &tm,
	                        &made, r);
	if (rc < 0)
		goto out;
	if (rc == 1) {
		if (tm.ro != ro)
			mh_fail(r, MH_E_EXISTS, EEXIST, "already published %s",
			        tm.ro ? "read-only" : "read-write");
		else
			a->note = "already published";
		ret = r->kind == MH_E_OK ? 0 : -1;
		goto out;
	}
	mh_pause(c, "mount", NULL); /* tests: the target resolved, not yet mounted */
	rc = mh_mount_bind(ro ? bind : fd, tfd, &id, r);
	if (rc == 0)
		rc = mh_mount_covers_nothing(tfd, id, r);
	mh_closep(&tfd);
	mh_at_close(&tat);
	if (rc == 0)
		ret = mh_verify_mount(c, q->path, POL_TARGET, id, r);
out:
	mh_closep(&tfd);
	mh_at_close(&tat);
	if (ret < 0 && made)
		mh_remove_made(c, q->path, POL_TARGET, q->volume_id);
	if (ret < 0 && noted) { /* through the base itself: a read-only bind opened its clone */
		mh_closep(&base);
		base = mh_dir_base_open(c, q->base, false, &(struct mh_res){0});
		if (base >= 0)
			mh_dir_pub_undo(q->volume_id, q->path, q->flags & MH_F_ONE_NODE);
	}
	mh_closep(&bind);
	mh_closep(&fd);
	mh_closep(&base);
	return ret;
}

int mh_answer_dir_unpublish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                            struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct mh_vol v = {.dir = true};
	struct mh_at at = {.dir = -1};
	int base = -1, fd = -1, ret = -1, unmounted = 0;
	(void)ans;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0)
		goto out;
	if (mh_at_open(c, q->path, POL_TARGET, &at, r) < 0) {
		if (mh_absent(r)) {
			a->note = "target does not exist";
			ret = 0;
		}
		goto unnote;
	}
	/* Without its directory nothing mounted can be proved the volume's: none is touched. */
	if ((fd = mh_dir_volume_open(base, q, true, r)) < 0 ? !mh_absent(r) : fstat(fd, &v.st) < 0)
		goto out;
	if (mh_unmount_ours(&at, &v, &unmounted, r) < 0)
		goto out;
	int rm = mh_at_remove_ours(&at, q->volume_id, r);
	if (rm < 0)
		goto out;
	a->note = rm == 0     ? "target left in place: not made by sepcsi"
	          : unmounted ? NULL
	                      : "nothing was published there";
	ret = 0;
unnote: /* Shared: nothing of it is bound at the target any more. */
	if (ret == 0 && mh_dir_shared() && mh_dir_pub_note(q->volume_id, q->path, -1, NULL, r) < 0)
		ret = -1;
out:
	mh_closep(&fd);
	mh_at_close(&at);
	mh_closep(&base);
	return ret;
}

int mh_answer_dir_stats(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                        struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct mh_ans_stats *s = &ans->u.stats_ans;
	struct mh_vol v = {.dir = true};
	struct mh_at at = {.dir = -1};
	struct mh_mnt m;
	struct statvfs vfs;
	uint64_t limit, used, inodes;
	int base = -1, fd = -1, tfd = -1, ret = -1;
	(void)a;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0 ||
	    (fd = mh_dir_volume_open(base, q, false, r)) < 0 || fstat(fd, &v.st) < 0)
		goto out;
	if (q->path[0]) { /* it must be published there */
		if (mh_at_open(c, q->path, POL_TARGET | POL_STAGING, &at, r) < 0 ||
		    (tfd = mh_at_child(&at, O_PATH, r)) < 0 || mh_mount_info(tfd, &m, r) < 0)
			goto out;
		if (!mh_vol_owns(&v, &m, NULL)) {
			mh_fail(r, MH_E_NOTFOUND, ENOENT,
			        "the volume is not published at the path");
			goto out;
		}
	}
	if (fstatvfs(fd, &vfs) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "statvfs: %s", strerror(errno));
		goto out;
	}
	s->inodes_total = vfs.f_files;
	s->inodes_free = vfs.f_ffree;
	if (quota_of(base, fd, q->volume_id, &limit, &used, &inodes) == 0) {
		s->bytes_total = limit;
		s->bytes_used = used;
		s->bytes_available = limit > used ? limit - used : 0;
		s->inodes_used = inodes;
		if (mh_btrfs_subvol(fd) &&
		    mh_btrfs_escapes(fd) > 0) { /* docs/helper.md: known gap */
			s->abnormal = 1;
			snprintf(s->message, sizeof(s->message),
			         "the volume holds btrfs subvolumes of its own: what they hold is "
			         "outside its quota group's limit");
		}
	} else { /* advisory: the base's own figures */
		s->bytes_total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
		s->bytes_available = (uint64_t)vfs.f_bavail * vfs.f_frsize;
		s->bytes_used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
		s->inodes_used = vfs.f_files - vfs.f_ffree;
	}
	ret = 0;
out:
	mh_closep(&tfd);
	mh_at_close(&at);
	mh_closep(&fd);
	mh_closep(&base);
	return ret;
}

int mh_answer_dir_capacity(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                           struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct mh_ans_capacity *cap = &ans->u.capacity_ans;
	struct statvfs vfs;
	int base = -1;
	(void)a;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0)
		return -1;
	if (fstatvfs(base, &vfs) < 0) {
		close(base);
		return mh_fail(r, MH_E_FAILED, errno, "statvfs: %s", strerror(errno));
	}
	cap->available_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	cap->total_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	cap->max_volume_bytes = pol_max_volume_bytes(c->pol);
	cap->shared = mh_dir_shared();
	cap->quota = !cap->shared && (mh_quota_on(base) || mh_btrfs_quota_on(base));
	close(base);
	return 0;
}

int mh_answer_dir_snapshot(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                           struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	struct mh_tree_copied copied = {0};
	uint64_t limit;
	bool whole = false;
	int base = -1, fd = -1, snaps = -1, work = -1, wfd = -1, ret = -1;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0 ||
	    (snaps = mh_dir_area(base, MH_DIR_SNAPS, true, r)) < 0)
		goto out;
	if ((wfd = mh_dir_open_marked(snaps, q->snapshot_id, q->snapshot_id, r)) >= 0) {
		a->note = "exists already";
		/* a worker killed after the rename may have left it writable */
		ret = mh_btrfs_subvol(wfd) ? mh_btrfs_set_ro(wfd, true, r) : 0;
		goto out;
	}
	if (!mh_absent(r) || (fd = mh_dir_volume_open(base, q, false, r)) < 0 ||
	    (work = mh_dir_area(base, MH_DIR_WORK, true, r)) < 0 ||
	    (wfd = mh_dir_work_make(c, work, q->snapshot_id, fd, &whole, r)) < 0 ||
	    (!whole && mh_tree_copy(fd, wfd, &copied, r) < 0))
		goto out;
	if (whole && mh_btrfs_usage(fd, &copied.bytes, &limit) < 0)
		copied.bytes = 0;                /* no quota groups: what it holds is not counted */
	mh_pause(c, "dir-made", q->snapshot_id); /* tests: copied, not in place */
	if (fsync(wfd) < 0 ||
	    renameat2(work, q->snapshot_id, snaps, q->snapshot_id, RENAME_NOREPLACE) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "cannot move the snapshot into place: %s",
		        strerror(errno));
		goto out;
	}
	(void)fsync(snaps);
	if (whole && mh_btrfs_set_ro(wfd, true, r) < 0)
		goto out;
	ans->u.copy_ans.size_bytes = copied.bytes;
	ans->u.copy_ans.reflinked = whole || copied.reflinked;
	a->note = copied.skipped ? "device nodes, FIFOs or sockets not copied" : NULL;
	ret = 0;
out:
	if (ret < 0 && work >= 0)
		mh_dir_purge(c, work, q->snapshot_id, &(struct mh_res){0});
	mh_closep(&wfd);
	mh_closep(&work);
	mh_closep(&snaps);
	mh_closep(&fd);
	mh_closep(&base);
	return ret;
}

int mh_answer_dir_delete_snapshot(const struct mh_ctx *c, const struct mh_msg *req,
                                  struct mh_msg *ans, struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	int base = -1, snaps = -1, fd = -1, ret = -1;
	(void)ans;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0 ||
	    (snaps = mh_dir_area(base, MH_DIR_SNAPS, true, r)) < 0)
		goto out;
	if ((fd = mh_dir_open_marked(snaps, q->snapshot_id, q->snapshot_id, r)) < 0) {
		if (mh_absent(r)) {
			a->note = "no such snapshot";
			ret = 0;
		}
		goto out;
	}
	mh_closep(&fd);
	ret = mh_dir_trash(c, base, snaps, q->snapshot_id, q->snapshot_id, r);
out:
	mh_closep(&fd);
	mh_closep(&snaps);
	mh_closep(&base);
	return ret;
}

int mh_answer_dir_node(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                       struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_dir *q = &req->u.dir;
	int base = -1, ret = -1;
	(void)ans;
	(void)a;
	if (check_fields(c, req->type, q, r) < 0 ||
	    (base = mh_dir_base_open(c, q->base, false, r)) < 0)
		goto out;
	if (!mh_dir_shared())
		mh_fail(r, MH_E_REFUSED, EINVAL, "not a shared base: its only node is this one");
	else
		ret = mh_dir_node_known(base, q->name, r);
out:
	mh_closep(&base);
	return ret;
}
