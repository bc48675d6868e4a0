/*
 * The image and filesystem lifecycle handlers: PING, CREATE, DELETE, STAGE,
 * UNSTAGE, PUBLISH, UNPUBLISH (raw block variants in mh_block.c; the dispatch
 * table and the audit record in mh_dispatch.c).
 *
 * Runs in a worker process of the helper (PING inline) as root with the
 * helper's capabilities under seccomp. Nothing here is fatal: a well-formed
 * request that is refused or fails gets MH_ANS_ERROR with a reason.
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
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mh_block.h"
#include "mh_common.h"
#include "mh_image.h"
#include "mh_loop.h"
#include "mh_mkfs.h"
#include "mh_mount.h"
#include "mh_path.h"
#include "mh_resize.h"

/* ---- handlers ----------------------------------------------------------- */

int mh_answer_ping(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                   struct mh_audit *a, struct mh_res *r)
{
	return 0;
}

int mh_answer_create(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_create *q = &req->u.create;
	a->volume_id = q->volume_id;
	if (mh_check_volume_id(q->volume_id, r) < 0)
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

int mh_answer_delete(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	a->volume_id = req->u.del.volume_id;
	if (mh_check_volume_id(req->u.del.volume_id, r) < 0)
		return -1;
	return mh_image_delete(c, req->u.del.volume_id, r);
}

/*
 * CSI: a volume restored or cloned larger than its source has the larger size
 * once staged. Best effort: the mount stays even if growing fails (ext4
 * without CAP_SYS_RESOURCE); the audit record says so and EXPAND can retry.
 */
static void grow_after_stage(const char *root, const struct mh_req_stage *q, int img,
                             const struct mh_loop *l, struct mh_audit *a)
{
	struct mh_res r = {0};
	struct mh_mnt m;
	uint64_t size = 0;
	bool grown = false;
	int fd = mh_path_open_flags(root, q->staging_path, O_RDONLY | O_DIRECTORY, &r);
	if (fd >= 0 && mh_mount_info(fd, &m, &r) == 0 && mh_mount_is_loop(&m, l) &&
	    mh_loop_size(l, &size, &r) == 0 &&
	    mh_resize_grow_if_smaller(fd, q->fs_type, img, size, &grown, &r) == 0) {
		if (grown)
			a->note = "file system grown to the volume's size";
	} else if (r.kind != MH_E_OK) {
		log_kv(LOG_LVL_WARN, "grow_after_stage", "volume_id", q->volume_id, "reason",
		       r.reason, NULL);
		a->note = "staged; file system NOT grown to the volume's size (see log)";
	}
	mh_closep(&fd);
}

int mh_answer_stage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                    struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_stage *q = &req->u.stage;
	const char *root;
	char why[200], mkfs_buf[MH_OPTS_MAX + POL_MKFS_ARGS_MAX + 1];
	char *mkfs_args[POL_MKFS_ARGS_MAX];
	struct mh_mount_opts o = {0};
	struct mh_vol v = {0};
	struct mh_mnt m;
	int img = -1, dir = -1, lfd = -1, ret = -1;
	bool made_dir = false;

	a->volume_id = q->volume_id;
	a->path = q->staging_path;
	if (mh_check_volume_id(q->volume_id, r) < 0 ||
	    mh_check_path(c, q->staging_path, "staging path", &root, r) < 0)
		return -1;
	if (q->readonly > 1)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "readonly must be 0 or 1");
	if (q->flags & ~(MH_F_BLOCK | MH_F_CREATE_DIR | MH_F_MOUNT_GROUP))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "flag not valid for STAGE");
	if (q->flags & MH_F_BLOCK)
		return mh_block_stage(c, q, root, a, r);
	if (!pol_fs_allowed(c->pol, q->fs_type))
		return mh_fail(r, MH_E_REFUSED, EPERM, "filesystem type not allowed by policy");
	if (pol_mount_options_check(c->pol, q->mount_flags, why, sizeof(why)) < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM, "%s", why);
	int nargs =
	    pol_mkfs_options_check(c->pol, q->fs_type, q->mkfs_options, mkfs_buf, sizeof(mkfs_buf),
	                           mkfs_args, POL_MKFS_ARGS_MAX, why, sizeof(why));
	if (nargs < 0)
		return mh_fail(r, MH_E_REFUSED, EPERM, "%s", why);
	if ((q->flags & MH_F_MOUNT_GROUP) && q->gid == UINT32_MAX)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "group id out of range");
	if (mh_mount_opts_parse(q->mount_flags, q->readonly, &o, r) < 0)
		return -1;
	o.set_group = (q->flags & MH_F_MOUNT_GROUP) != 0;
	o.gid = (gid_t)q->gid;
	bool ro = o.sb_ro;

	if ((img = mh_image_open(c, q->volume_id, ro, r)) < 0)
		goto out;
	if (fstat(img, &v.st) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "stat image: %s", strerror(errno));
		goto out;
	}
	/* Ephemeral inline volumes: the staging path is the pod's target, made here. */
	if ((q->flags & MH_F_CREATE_DIR) && mh_make_dir(root, q->staging_path, &made_dir, r) < 0)
		goto out;
	if ((dir = mh_path_open_dir(root, q->staging_path, r)) < 0)
		goto out;
	int found = mh_loop_find(v.st.st_dev, v.st.st_ino, &v.loop, r);
	if (found < 0 || mh_mount_info(dir, &m, r) < 0)
		goto out;
	v.attached = found == 1;
	if (m.mounted) {
		if (!mh_vol_owns(&v, &m))
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
	if ((lfd = mh_loop_attach(img, q->volume_id, ro, true, &v.loop, r)) < 0)
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
		if (mh_mkfs(q->fs_type, mkfs_args, (size_t)nargs, c->images_fd, name, r) < 0 ||
		    mh_loop_flush(lfd, r) < 0)
			goto out;
		if (mh_probe(lfd, q->fs_type, r) != MH_PROBE_MATCH) {
			mh_fail(r, MH_E_FAILED, 0, "no %s signature after mkfs", q->fs_type);
			goto out;
		}
	}
	/* Safety: see mh_mount.c (fd target, nosuid,nodev forced, detached until attached). */
	if (mh_mount_fs(v.loop.path, q->fs_type, &o, dir, r) < 0)
		goto out;
	if (o.group_changed)
		a->note = "volume root given the mount group";
	/* An existing file system on a bigger image (a larger restore or clone): grow it. */
	if (probe == MH_PROBE_MATCH && !ro)
		grow_after_stage(root, q, img, &v.loop, a);
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
	if (ret < 0 && made_dir) {
		struct mh_res ignore = {0};
		mh_remove_dir(root, q->staging_path, &ignore); /* leave no directory we made */
	}
	mh_mount_opts_free(&o);
	return ret;
}

int mh_answer_unstage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                      struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_unstage *q = &req->u.unstage;
	const char *root;
	char where[MH_PATH_MAX + 1];
	struct mh_vol v = {0};
	struct mh_mnt m;
	int dir = -1;

	a->volume_id = q->volume_id;
	a->path = q->staging_path;
	if (mh_check_volume_id(q->volume_id, r) < 0 ||
	    mh_check_path(c, q->staging_path, "staging path", &root, r) < 0)
		return -1;
	if (q->flags & ~(MH_F_BLOCK | MH_F_REMOVE_DIR))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "flag not valid for UNSTAGE");
	if (q->flags & MH_F_BLOCK) {
		if (mh_block_unstage(c, q, root, a, r) < 0)
			return -1;
		return (q->flags & MH_F_REMOVE_DIR) ? mh_remove_dir(root, q->staging_path, r) : 0;
	}
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
		return (q->flags & MH_F_REMOVE_DIR) ? mh_remove_dir(root, q->staging_path, r) : 0;
	}
	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0 && r->kind != MH_E_NOTFOUND)
		goto fail;
	*r = (struct mh_res){0}; /* a missing image just means the mount is not ours */
	if (!mh_vol_owns(&v, &m)) {
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
	if (mh_unmount_ours(root, q->staging_path, &v, dir, r) < 0)
		return -1;
	/* The device should autoclear with its last mount; make sure it did. */
	if (mh_loop_ensure_detached(v.st.st_dev, v.st.st_ino, r) < 0)
		return -1;
	return (q->flags & MH_F_REMOVE_DIR) ? mh_remove_dir(root, q->staging_path, r) : 0;
fail:
	mh_closep(&dir);
	return -1;
}

int mh_answer_publish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                      struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_publish *q = &req->u.publish;
	const char *sroot, *troot, *name;
	struct mh_vol v = {0};
	struct mh_mnt sm, tm;
	int sdir = -1, parent = -1, tdir = -1, ret = -1;
	bool created = false;

	a->volume_id = q->volume_id;
	a->path = q->target_path;
	a->staging_path = q->staging_path;
	if (mh_check_volume_id(q->volume_id, r) < 0 ||
	    mh_check_path(c, q->staging_path, "staging path", &sroot, r) < 0 ||
	    mh_check_path(c, q->target_path, "target path", &troot, r) < 0)
		return -1;
	if (q->readonly > 1)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "readonly must be 0 or 1");
	if (q->flags & ~MH_F_BLOCK)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "flag not valid for PUBLISH");
	if (mh_nested(q->staging_path, q->target_path))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "target and staging paths overlap");
	if (q->flags & MH_F_BLOCK)
		return mh_block_publish(c, q, sroot, troot, a, r);

	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0) {
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
	if (!mh_vol_owns(&v, &sm)) {
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
		if (!mh_vol_owns(&v, &tm))
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

int mh_answer_unpublish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                        struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_unpublish *q = &req->u.unpublish;
	const char *root, *name;
	struct mh_vol v = {0};
	struct mh_mnt m;
	int parent = -1, tdir = -1, ret = -1;

	a->volume_id = q->volume_id;
	a->path = q->target_path;
	if (mh_check_volume_id(q->volume_id, r) < 0 ||
	    mh_check_path(c, q->target_path, "target path", &root, r) < 0)
		return -1;
	if ((parent = mh_path_open_parent(root, q->target_path, &name, r)) < 0 ||
	    (tdir = mh_path_open_child_flags(parent, name, O_PATH, 0, r)) < 0) {
		if (r->kind == MH_E_NOTFOUND) {
			*r = (struct mh_res){0};
			a->note = "target does not exist";
			ret = 0;
		}
		goto out;
	}
	struct stat tst;
	if (fstat(tdir, &tst) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "stat target: %s", strerror(errno));
		goto out;
	}
	if (!S_ISDIR(tst.st_mode)) {
		/* A raw block publication: a file with a device node bound on it. */
		int fd = tdir;
		tdir = -1;
		ret = mh_block_unpublish(c, q->volume_id, parent, name, fd, a, r);
		goto out;
	}
	mh_closep(&tdir);
	if ((tdir = mh_path_open_child(parent, name, r)) < 0)
		goto out;
	if (mh_mount_info(tdir, &m, r) < 0)
		goto out;
	if (m.mounted) {
		if (mh_vol_lookup(c, q->volume_id, &v, r) < 0 && r->kind != MH_E_NOTFOUND)
			goto out;
		*r = (struct mh_res){0};
		if (!mh_vol_owns(&v, &m)) {
			mh_fail(r, MH_E_REFUSED, EPERM,
			        "%s is mounted at the target, not this volume", m.source);
			goto out;
		}
		int fd = tdir;
		tdir = -1;
		if (mh_unmount_ours(root, q->target_path, &v, fd, r) < 0)
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
