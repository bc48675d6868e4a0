/*
 * The file system lifecycle handlers: PING, STAGE, UNSTAGE, PUBLISH,
 * UNPUBLISH (raw block STAGE and PUBLISH in mh_block.c; the dispatch table and the
 * audit record in mh_dispatch.c; CREATE and DELETE in mh_image_life.c; what
 * STAGE does to a blank image before its mount in mh_mkfs.c).
 *
 * Runs in a worker process of the helper (PING inline) as root with the
 * helper's capabilities under seccomp. Nothing here is fatal: a well-formed
 * request that is refused or fails gets MH_ANS_ERROR with a reason.
 *
 * Every handler re-validates its input before touching anything, because the
 * helper trusts nothing rpcd says: the volume id against the fixed syntax, each
 * path against the policy's patterns for its role (then walked beneath its
 * root, no symlink, every directory root-only: mh_at.c), the filesystem type
 * and options against the allowlists, sizes against the bounds. Every
 * operation is idempotent, and:
 *  - mounts only on an empty directory with nothing mounted on it (a staging
 *    or target directory that holds anything is refused), resolved again
 *    right before the mount (after mkfs), and checked again after it;
 *  - unmounts only a mount it proved to be this volume's: its source is the
 *    loop device currently backed by this volume's image (same st_dev/st_ino),
 *    see mh_vol_owns();
 *  - removes only a directory it made for this volume (its mark, mh_at.c):
 *    anything else at a target is left untouched, and unless it is an empty
 *    directory or file the call fails.
 */
#include "mh_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mh_block.h"
#include "mh_common.h"
#include "mh_image.h"
#include "mh_loop.h"
#include "mh_mount.h"
#include "mh_pause.h"

/* ---- handlers ----------------------------------------------------------- */

int mh_answer_ping(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                   struct mh_audit *a, struct mh_res *r)
{
	return 0;
}

int mh_at_vacant(const struct mh_at *at, const struct mh_vol *v, bool dir, struct mh_mnt *m,
                 struct mh_loop *l, int *fd, struct mh_res *r)
{
	int has = 0;
	memset(m, 0, sizeof(*m));
	if ((*fd = mh_at_child(at, O_PATH | (dir ? O_DIRECTORY : 0), r)) < 0 ||
	    mh_mount_info(*fd, m, r) < 0)
		has = -1;
	else if (m->mounted)
		has = mh_vol_owns(v, m, l)
		          ? 1
		          : mh_fail(r, MH_E_EXISTS, EEXIST, "%s%s is already mounted there",
		                    m->source, strcmp(m->root, "/") ? m->root : "");
	else if (dir ? (has = mh_dir_has_entries(*fd, r)) != 0
	             : !S_ISREG(m->st.st_mode) || m->st.st_size != 0)
		has = has < 0 ? -1
		              : mh_fail(r, MH_E_EXISTS, ENOTEMPTY,
		                        "not empty: a volume goes only where nothing is");
	if (has < 0)
		mh_closep(fd);
	return has;
}

int mh_mount_point(const struct mh_ctx *c, const char *path, unsigned role, const struct mh_vol *v,
                   const char *volume_id, bool make, struct mh_at *at, int *fd, struct mh_mnt *m,
                   bool *made, struct mh_res *r)
{
	int rc = 0;
	*fd = -1;
	if (mh_at_open(c, path, role, at, r) < 0)
		return -1;
	if (make && !*made && (rc = mh_at_make(c, at, true, volume_id, r)) >= 0)
		*made = rc == 1;
	if (rc >= 0 && (rc = mh_at_vacant(at, v, true, m, NULL, fd, r)) >= 0)
		return rc;
	mh_at_close(at);
	return -1;
}

/* Mount o's file system from l on the directory path, checked before and after. */
static int mount_checked(const struct mh_ctx *c, const char *path, unsigned role,
                         const struct mh_vol *v, const char *fstype, struct mh_mount_opts *o,
                         struct mh_res *r)
{
	struct mh_at at;
	struct mh_mnt m;
	bool made = true; /* made or not, it is there now */
	int fd, id;
	int rc = mh_mount_point(c, path, role, v, NULL, false, &at, &fd, &m, &made, r);
	if (rc != 0) {
		if (rc > 0) {
			close(fd);
			mh_at_close(&at);
			return mh_fail(r, MH_E_BUSY, EBUSY, "volume mounted there meanwhile");
		}
		return -1;
	}
	mh_pause(c, "mount", NULL); /* tests: the path resolved again, not yet mounted */
	/* Safety: see mh_mount.c (fd target, nosuid,nodev forced, detached until attached). */
	rc = mh_mount_fs(&v->loop, fstype, o, fd, &id, r);
	if (rc == 0)
		rc = mh_mount_covers_nothing(fd, id, r);
	close(fd);
	mh_at_close(&at);
	if (rc < 0)
		return -1;
	return mh_verify_mount(c, path, role, id, r);
}

/* A file-system STAGE's own checks: type, mount options, group. 0, or -1 with r. */
int mh_stage_check(const struct mh_ctx *c, const struct mh_req_stage *q, struct mh_mount_opts *o,
                   struct mh_res *r)
{
	char why[200];
	if (!pol_fs_allowed(c->pol, q->fs_type))
		return mh_fail(r, MH_E_REFUSED, EPERM, "filesystem type not allowed by policy");
	if (pol_mount_options_check(c->pol, q->mount_flags, why, sizeof(why)) < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM, "%s", why);
	if ((q->flags & MH_F_MOUNT_GROUP) && q->gid == UINT32_MAX)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "group id out of range");
	if (mh_mount_opts_parse(q->mount_flags, q->readonly, o, r) < 0)
		return -1;
	o->set_group = (q->flags & MH_F_MOUNT_GROUP) != 0;
	o->gid = (gid_t)q->gid;
	return 0;
}

int mh_stage_volume(const struct mh_ctx *c, const struct mh_msg *req, struct mh_audit *a,
                    mh_stage_prep_fn *prep, void *arg, struct mh_res *r)
{
	const struct mh_req_stage *q = &req->u.stage;
	struct mh_mount_opts o = {0};
	struct mh_vol v = {0};
	struct mh_mnt m;
	struct mh_at at = {.dir = -1};
	int img = -1, dir = -1, lfd = -1, ret = -1;
	bool made_dir = false, attached_here = false;
	/* An ephemeral volume is staged straight at the pod's target path, made here. */
	unsigned role = (q->flags & MH_F_CREATE_DIR) ? POL_TARGET : POL_STAGING;

	if (q->flags & MH_F_BLOCK)
		return mh_block_stage(c, q, role, a, r);
	if (mh_stage_check(c, q, &o, r) < 0) {
		mh_mount_opts_free(&o);
		return -1;
	}
	bool ro = (o.sb & POL_SB_RO) != 0;

	if ((img = mh_image_open(c, q->volume_id, ro, &v.st, r)) < 0)
		goto out;
	/* Safety: no file system whose bytes a pod could write raw is ever mounted (mh_image.h). */
	if (mh_image_raw(img)) {
		mh_fail(r, MH_E_PRECONDITION, EPERM,
		        "the volume was exposed as a raw block device, so a pod may have written "
		        "its bytes: it is never mounted as a file system, only staged as a block "
		        "volume");
		goto out;
	}
	int found = mh_loop_find(v.st.st_dev, v.st.st_ino, false, &v.loop, 1, r);
	if (found < 0)
		goto out;
	v.attached = found == 1;
	/* A first look, for the idempotent answer and an early refusal. */
	int rc = mh_mount_point(c, q->staging_path, role, &v, q->volume_id,
	                        (q->flags & MH_F_CREATE_DIR) != 0, &at, &dir, &m, &made_dir, r);
	mh_closep(&dir);
	mh_at_close(&at);
	if (rc < 0)
		goto out;
	if (rc == 1) {
		ret = mh_already(a, r, strcmp(m.fstype, q->fs_type) == 0 && m.ro == ro,
		                 "already staged", m.fstype, m.ro);
		goto out;
	}
	/* Devices of the image not staged here (an UNSTAGE put off, a STAGE killed before its
	 * mount) go first if unused; one in use elsewhere is BUSY (the unused ones gone). */
	if (v.attached && mh_detach_unused(&v, true, r) < 0)
		goto out;
	if (v.attached)
		a->note = "detached the volume's unused loop devices first";

	/* Safety: the loop device exposes our own image file, opened by us. */
	if ((lfd = mh_loop_attach(img, q->volume_id, ro, true, c->direct_io, &v.loop, r)) < 0)
		goto out;
	v.attached = attached_here = true;
	if (prep && prep(c, q, img, lfd, ro, arg, r) < 0)
		goto out;
	/* The path is resolved again now, after mkfs, and checked after the mount. */
	if (mount_checked(c, q->staging_path, role, &v, q->fs_type, &o, r) < 0)
		goto out;
	if (o.group_changed)
		a->note = "volume root given the mount group";
	ret = 0;
out:
	/* The mount holds the device now; without one, closing lfd lets autoclear detach it. */
	mh_closep(&lfd);
	if (ret < 0 && attached_here) {
		struct mh_res ignore = {0};
		/* EALREADY: held for a moment (a probe); it goes by itself (autoclear). */
		if (mh_loop_detach(&v.loop, v.st.st_dev, v.st.st_ino, &ignore) < 0) {
			bool pending = ignore.sys_errno == EALREADY;
			log_kv(pending ? LOG_LVL_INFO : LOG_LVL_ERROR,
			       pending ? "loop_detach_pending" : "loop_leak", "device", v.loop.path,
			       "reason", ignore.reason, NULL);
		}
	}
	mh_closep(&img);
	if (ret < 0 && made_dir) /* leave no directory we made */
		mh_remove_made(c, q->staging_path, role, q->volume_id);
	mh_mount_opts_free(&o);
	return ret;
}

int mh_answer_unstage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                      struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_unstage *q = &req->u.unstage;
	char where[MH_PATH_MAX + 1];
	struct mh_vol v = {0};
	struct mh_mnt m;
	struct mh_loop l = {0};
	/* What is staged: a file system on the directory, a raw device bound on its file "dev". */
	struct mh_at at, sub = {.dir = -1}, *obj = &at;
	bool block = (q->flags & MH_F_BLOCK) != 0;
	int fd = -1, ret = -1;

	if (mh_at_open(c, q->staging_path, (q->flags & MH_F_REMOVE_DIR) ? POL_TARGET : POL_STAGING,
	               &at, r) < 0) {
		if (!mh_absent(r))
			return -1;
		a->note = "staging path does not exist";
		return 0;
	}
	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0 && !mh_absent(r))
		goto out;
	if (block && mh_at_descend(&at, MH_BLOCK_DEV, obj = &sub, r) < 0) {
		/* Nothing bound: what a STAGE killed before its bind left is detached. */
		if (mh_absent(r)) {
			a->note = "staging path does not exist";
			ret = v.st.st_ino ? mh_detach_unused(&v, true, r) : 0;
		}
		goto out;
	}
	/* A raw block staging directory is never a mount: no walk into a file system. */
	if (block && mh_mount_info(sub.dir, &m, r) < 0)
		goto out;
	if (block && m.mounted) {
		mh_fail(r, MH_E_REFUSED, EPERM, "%s is mounted at the staging path", m.source);
		goto out;
	}
	/* 1: this volume's mount or bind is there; anything else is left as it is. */
	int b = mh_at_vacant(obj, &v, false, &m, &l, &fd, r);
	mh_closep(&fd); /* an open root of the mount would keep it busy */
	if (b < 0 && r->kind != MH_E_NOTFOUND && r->kind != MH_E_EXISTS)
		goto out; /* never a success while it cannot be looked at */
	if (b < 0 && m.mounted) {
		mh_refail(r, MH_E_REFUSED, EPERM, "something else is mounted at the staging path");
		goto out;
	}
	*r = (struct mh_res){0};
	if (b == 1 && !!S_ISBLK(m.st.st_mode) != block) {
		mh_fail(r, MH_E_REFUSED, EINVAL, "the staging path holds the volume as %s",
		        block ? "a file system" : "a raw block device");
		goto out;
	}
	if (b == 1) {
		int used = mh_loop_in_use(&l, m.id, where, sizeof(where), r);
		if (used != 0) {
			if (used > 0)
				mh_fail(r, MH_E_BUSY, EBUSY, "volume is still in use at %s", where);
			goto out;
		}
		if (mh_unmount_ours(obj, &v, NULL, r) < 0)
			goto out;
	} else {
		a->note = "not staged";
	}
	if (block && mh_at_remove_ours(obj, q->volume_id, r) < 0)
		goto out;
	/* Never a false success: the devices must really be gone (BUSY is an answer). */
	if (!v.st.st_ino)
		ret = 0;
	else if (b == 1)
		ret = mh_detach_unused_but(&v, &l, r);
	else /* not staged here (asked again after a BUSY): what of the image is unused now goes */
		ret = mh_detach_unused(&v, block, r);
	/* A file system's device in use elsewhere stays; one held open goes at its close. */
	if (ret < 0 && !block && b != 1 && r->sys_errno == EALREADY) {
		ret = 0;
		*r = (struct mh_res){0};
	}
out:
	if (ret == 0 && (q->flags & MH_F_REMOVE_DIR) && mh_at_remove_ours(&at, q->volume_id, r) < 0)
		ret = -1;
	mh_closep(&fd);
	mh_at_close(&sub);
	mh_at_close(&at);
	return ret;
}

int mh_answer_publish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                      struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_publish *q = &req->u.publish;
	struct mh_vol v = {0};
	struct mh_mnt sm, tm;
	struct mh_at sat, tat;
	int sfd = -1, tfd = -1, ret = -1;
	bool made = false;

	if (pol_paths_nested(q->staging_path, q->target_path))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "target and staging paths overlap");
	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0) {
		mh_missing_means(r, MH_E_PRECONDITION);
		return -1;
	}
	if (q->flags & MH_F_BLOCK)
		return mh_block_publish(c, q, &v, a, r);

	/* The staging must be this volume's mount. */
	if (mh_at_open(c, q->staging_path, POL_STAGING, &sat, r) < 0) {
		mh_missing_means(r, MH_E_PRECONDITION);
		return -1;
	}
	sfd = mh_at_child(&sat, O_PATH, r);
	mh_at_close(&sat);
	if (sfd < 0 || mh_mount_info(sfd, &sm, r) < 0) {
		mh_missing_means(r, MH_E_PRECONDITION);
		goto out;
	}
	mh_closep(&sfd);
	/* v.loop: the staging's own device, whichever of the image's it is (never a second sb). */
	if (!mh_vol_owns(&v, &sm, &v.loop)) {
		mh_fail(r, MH_E_PRECONDITION, 0, "volume is not staged at the staging path");
		goto out;
	}
	/* A read-only staging can only be published read-only; say so in the mount. */
	bool ro = q->readonly || sm.ro;
	int rc = mh_mount_point(c, q->target_path, POL_TARGET, &v, q->volume_id, true, &tat, &tfd,
	                        &tm, &made, r);
	mh_closep(&tfd);
	if (rc < 0)
		goto out;
	mh_at_close(&tat);
	if (rc == 1) {
		ret = mh_already(a, r, tm.ro == ro, "already published", "", tm.ro);
		goto out;
	}
	/*
	 * Safety: a second mount of the superblock just proved to be this
	 * volume's staging (same loop device, same read-only state, so the
	 * kernel hands back that superblock), with the staging's attributes,
	 * nosuid and nodev, and read-only if asked: no mount_setattr needed.
	 */
	struct mh_mount_opts o = {.attr = sm.attr | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
	                                  (ro ? MOUNT_ATTR_RDONLY : 0),
	                          .sb = sm.sb_ro ? POL_SB_RO : 0};
	ret = mount_checked(c, q->target_path, POL_TARGET, &v, sm.fstype, &o, r);
out:
	mh_closep(&sfd);
	if (ret < 0 && made) /* leave nothing we made */
		mh_remove_made(c, q->target_path, POL_TARGET, q->volume_id);
	return ret;
}

int mh_already(struct mh_audit *a, struct mh_res *r, bool same, const char *what,
               const char *fstype, bool ro)
{
	if (same) {
		a->note = what;
		return 0;
	}
	return mh_fail(r, MH_E_EXISTS, EEXIST, "%s%s%s %s", what, fstype[0] ? " as " : "", fstype,
	               ro ? "read-only" : "read-write");
}

/* Is the last component of at an empty directory or an empty regular file? */
static bool empty_object(const struct mh_at *at)
{
	struct mh_res ignore = {0};
	struct stat st;
	int fd = mh_at_child(at, O_PATH, &ignore);
	bool empty = false;
	if (fd >= 0 && fstat(fd, &st) == 0)
		empty = S_ISDIR(st.st_mode) ? mh_dir_has_entries(fd, &ignore) == 0
		                            : S_ISREG(st.st_mode) && st.st_size == 0;
	mh_closep(&fd);
	return empty;
}

int mh_answer_unpublish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                        struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_unpublish *q = &req->u.unpublish;
	struct mh_vol v = {0};
	struct mh_at at;
	int ret = -1, unmounted = 0;

	if (mh_at_open(c, q->target_path, POL_TARGET, &at, r) < 0) {
		if (!mh_absent(r))
			return -1;
		a->note = "target does not exist";
		/* A read-only raw publication's own device a holder kept at the last try. */
		if (mh_vol_lookup(c, q->volume_id, &v, r) < 0)
			return mh_absent(r) ? 0 : -1; /* no image: nothing of it to detach */
		return mh_detach_published(&v, r);
	}
	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0 && !mh_absent(r))
		goto out;
	if (mh_unmount_ours(&at, &v, &unmounted, r) < 0)
		goto out;
	/* A read-only raw block publication had its own loop device: it goes with its bind
	 * (or at a retry, after a holder kept it at the first try). */
	if (v.st.st_ino && mh_detach_published(&v, r) < 0)
		goto out;
	int rm = mh_at_remove_ours(&at, q->volume_id, r);
	if (rm < 0)
		goto out;
	ret = 0;
	if (rm == 1) {
		a->note = unmounted ? NULL : "nothing was published there";
		goto out;
	}
	/* Not made by us: leave it. An empty directory or file is harmless; anything else is not.
	 */
	if (empty_object(&at)) {
		a->note = "target left in place: not made by sepcsi";
	} else if (!unmounted) {
		ret = mh_fail(r, MH_E_REFUSED, EPERM,
		              "the target holds something sepcsi did not make; left untouched");
	} else {
		a->note = "unpublished; target left in place: not made by sepcsi";
	}
out:
	mh_at_close(&at);
	return ret;
}
