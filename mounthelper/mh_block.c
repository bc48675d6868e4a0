/*
 * Raw block volumes (CSI access type "block"): the volume's loop device node
 * is bound onto regular files instead of a file system being mounted.
 *
 *   STAGE     attach a loop device WITHOUT autoclear (read-only if asked),
 *             create <staging>/dev (O_CREAT|O_EXCL, 0600) and bind the node
 *             /dev/loopN onto it; no probe, no mkfs, no mount of a file system
 *   PUBLISH   create the file target_path and bind <staging>/dev onto it; a
 *             read-only publication of a read-write staging gets its own
 *             read-only loop device on the same image (see below)
 *   UNSTAGE   unmount and unlink <staging>/dev, detach the loop device(s)
 *   UNPUBLISH (of a file target, from mh_ops.c) unmount, unlink the file,
 *             detach a read-only publication's own loop device
 *
 * Runs in a worker of the helper as root under seccomp. Nothing here is fatal.
 *
 * Safety argument for binding device nodes without nodev. Every file system
 * mount the helper makes forces nodev (mh_mount.c, and the seccomp filter
 * refuses an fsmount without it), so no device node from inside a volume is
 * ever usable. The binds made here are the one place without nodev, and they
 * are safe because: the node bound is always /dev/loopN of a loop device the
 * helper attached to one of its own images (checked: S_ISBLK and the device
 * number of that loop, backed by this image's (st_dev, st_ino)), never a
 * node named by rpcd or found inside a volume; the file it is bound onto was
 * created by the helper itself (O_CREAT|O_EXCL beneath the allowed root,
 * without symlinks) or is a regular file there; the bind carries nosuid; and
 * it exists only beneath an allowed root, where kubelet hands it to exactly
 * the pod that asked for this volume. A pod thus gets the block device of its
 * own volume and nothing else. A bind follows the device NUMBER, so a loop
 * device must never be detached (and its number handed to another image)
 * while a bind of it remains: UNSTAGE answers BUSY while any bind of this
 * image's devices is left beneath the allowed roots, and UNPUBLISH detaches a
 * read-only publication's own device only once its last bind is gone.
 *
 * Read-only: MOUNT_ATTR_RDONLY on a bind of a device node does not stop
 * opening it for writing (the kernel checks a read-only mount only for
 * regular files, directories and symlinks). A read-only publication of a
 * volume staged read-write therefore binds its own read-only loop device
 * (LO_FLAGS_READ_ONLY) on the same image, whose writes the block layer
 * refuses; the bind is read-only too. UNPUBLISH detaches it.
 */
#include "mh_block.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mh_common.h"
#include "mh_image.h"
#include "mh_path.h"

#define DEV_NAME  "dev" /* the device file inside a block staging directory */
#define LOOPS_MAX 8
#define BIND_MAX  8 /* stacked binds on one target we are willing to peel */

/* O_PATH fd of /dev/loopN, checked to be that very device. */
static int open_node(const struct mh_loop *l, struct mh_res *r)
{
	struct stat st;
	int fd = open(l->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return mh_fail(r, MH_E_FAILED, errno, "open %s: %s", l->path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != l->rdev) {
		close(fd);
		return mh_fail(r, MH_E_FAILED, EINVAL, "%s is not the loop device", l->path);
	}
	return fd;
}

/* What is bound on fd: 1 this image's loop device (*l set), 0 nothing bound, -1 r set. */
static int bound_loop(int fd, const struct mh_vol *v, struct mh_fmnt *fm, struct mh_loop *l,
                      const char *what, struct mh_res *r)
{
	if (mh_mount_file_info(fd, fm, r) < 0)
		return -1;
	if (!fm->mounted)
		return 0;
	int m = S_ISBLK(fm->st.st_mode)
	            ? mh_loop_by_rdev(fm->st.st_rdev, v->st.st_dev, v->st.st_ino, l, r)
	            : 0;
	if (m < 0)
		return -1;
	if (m == 0)
		return mh_fail(r, MH_E_EXISTS, EEXIST, "something else is bound at the %s", what);
	return 1;
}

/* Detach every loop device of the image that is not autoclear and bound nowhere. */
static int detach_leftovers(const struct mh_ctx *c, const struct mh_vol *v, struct mh_res *r)
{
	struct mh_loop loops[LOOPS_MAX];
	char where[MH_PATH_MAX + 1];
	int n = mh_loop_find_all(v->st.st_dev, v->st.st_ino, loops, LOOPS_MAX, r);
	for (int i = 0; i < n; i++) {
		if (loops[i].lo_flags & LO_FLAGS_AUTOCLEAR)
			continue; /* a file system staging's device: it clears itself */
		int used = mh_mount_other_dev_use(c->pol, v->st.st_dev, v->st.st_ino, loops[i].rdev,
		                                  -1, where, sizeof(where), r);
		if (used < 0)
			return -1;
		if (used)
			return mh_fail(r, MH_E_BUSY, EBUSY, "device is still bound at %s", where);
		if (mh_loop_detach(&loops[i], v->st.st_dev, v->st.st_ino, r) < 0)
			return -1;
	}
	return n < 0 ? -1 : 0;
}

int mh_block_stage(const struct mh_ctx *c, const struct mh_req_stage *q, const char *root,
                   struct mh_audit *a, struct mh_res *r)
{
	struct mh_vol v = {0};
	struct mh_fmnt fm;
	struct mh_mnt m;
	struct mh_loop l;
	int img = -1, dir = -1, dev = -1, node = -1, lfd = -1, ret = -1;
	bool made_dir = false, made_dev = false, attached = false, ro = q->readonly;

	if (q->mount_flags[0] || q->mkfs_options[0] || (q->flags & MH_F_MOUNT_GROUP))
		return mh_fail(r, MH_E_REFUSED, EINVAL,
		               "raw block volumes take no mount options, mkfs options or group");
	if (q->fs_type[0] && !pol_fs_allowed(c->pol, q->fs_type))
		return mh_fail(r, MH_E_REFUSED, EPERM, "filesystem type not allowed by policy");
	if ((img = mh_image_open(c, q->volume_id, ro, r)) < 0)
		return -1;
	if (fstat(img, &v.st) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "stat image: %s", strerror(errno));
		goto out;
	}
	if ((q->flags & MH_F_CREATE_DIR) && mh_make_dir(root, q->staging_path, &made_dir, r) < 0)
		goto out;
	if ((dir = mh_path_open_dir(root, q->staging_path, r)) < 0 || mh_mount_info(dir, &m, r) < 0)
		goto out;
	if (m.mounted) {
		mh_fail(r, MH_E_EXISTS, EEXIST, "%s is mounted at the staging path", m.source);
		goto out;
	}
	dev = mh_path_open_child_flags(dir, DEV_NAME, O_PATH, 0, r);
	if (dev >= 0) {
		int b = bound_loop(dev, &v, &fm, &l, "staging device file", r);
		if (b < 0)
			goto out;
		if (b == 1) {
			if (!!(l.lo_flags & LO_FLAGS_READ_ONLY) != ro) {
				mh_fail(r, MH_E_EXISTS, EEXIST, "already staged %s",
				        ro ? "read-write" : "read-only");
				goto out;
			}
			a->note = "already staged";
			ret = 0;
			goto out;
		}
		if (!S_ISREG(fm.st.st_mode)) {
			mh_fail(r, MH_E_EXISTS, EEXIST,
			        "staging device file is not a regular file");
			goto out;
		}
	} else if (r->kind == MH_E_NOTFOUND) {
		*r = (struct mh_res){0};
		/* Safety: a new file of ours, beneath the root, no symlink followed. */
		dev = mh_path_open_child_flags(dir, DEV_NAME, O_CREAT | O_EXCL | O_WRONLY, 0600, r);
		if (dev < 0)
			goto out;
		made_dev = true;
		mh_closep(&dev);
		if ((dev = mh_path_open_child_flags(dir, DEV_NAME, O_PATH, 0, r)) < 0)
			goto out;
	} else {
		goto out;
	}

	/* A loop device left by a block STAGE that crashed before its bind is re-used. */
	struct mh_loop loops[LOOPS_MAX];
	char where[MH_PATH_MAX + 1];
	int n = mh_loop_find_all(v.st.st_dev, v.st.st_ino, loops, LOOPS_MAX, r);
	if (n < 0)
		goto out;
	if (n > 0) {
		int used = mh_mount_other_dev_use(c->pol, v.st.st_dev, v.st.st_ino, 0, -1, where,
		                                  sizeof(where), r);
		if (used < 0)
			goto out;
		if (n > 1 || used || (loops[0].lo_flags & LO_FLAGS_AUTOCLEAR) ||
		    !!(loops[0].lo_flags & LO_FLAGS_READ_ONLY) != ro) {
			mh_fail(r, MH_E_BUSY, EBUSY, "volume is attached as %s but not staged here",
			        loops[0].path);
			goto out;
		}
		l = loops[0];
		a->note = "re-used the volume's loop device";
	} else {
		/* Safety: the loop device exposes our own image file, opened by us. */
		if ((lfd = mh_loop_attach(img, q->volume_id, ro, false, &l, r)) < 0)
			goto out;
		attached = true;
	}
	/* Safety: see the top of this file (our loop node, our file, nosuid). */
	if ((node = open_node(&l, r)) < 0 || mh_mount_bind_dev(node, dev, ro, r) < 0)
		goto out;
	ret = 0;
out:
	mh_closep(&node);
	mh_closep(&dev);
	mh_closep(&lfd);
	if (ret < 0 && attached) {
		struct mh_res ignore = {0};
		mh_loop_detach(&l, v.st.st_dev, v.st.st_ino, &ignore);
	}
	if (ret < 0 && made_dev)
		unlinkat(dir, DEV_NAME, 0);
	mh_closep(&dir);
	if (ret < 0 && made_dir) {
		struct mh_res ignore = {0};
		mh_remove_dir(root, q->staging_path, &ignore);
	}
	mh_closep(&img);
	return ret;
}

int mh_block_unstage(const struct mh_ctx *c, const struct mh_req_unstage *q, const char *root,
                     struct mh_audit *a, struct mh_res *r)
{
	struct mh_vol v = {0};
	struct mh_fmnt fm;
	struct mh_loop l;
	char where[MH_PATH_MAX + 1];
	int dir = -1, dev = -1, ret = -1;

	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0) {
		if (r->kind != MH_E_NOTFOUND)
			return -1;
		*r = (struct mh_res){0}; /* no image: nothing bound can be ours */
	}
	if ((dir = mh_path_open_flags(root, q->staging_path, O_RDONLY | O_DIRECTORY, r)) < 0) {
		if (r->kind != MH_E_NOTFOUND)
			return -1;
		*r = (struct mh_res){0};
		a->note = "staging path does not exist";
		return v.st.st_ino ? detach_leftovers(c, &v, r) : 0;
	}
	for (int i = 0; i < BIND_MAX; i++) {
		dev = mh_path_open_child_flags(dir, DEV_NAME, O_PATH, 0, r);
		if (dev < 0) {
			if (r->kind != MH_E_NOTFOUND)
				goto out;
			*r = (struct mh_res){0};
			break;
		}
		int b = v.st.st_ino ? bound_loop(dev, &v, &fm, &l, "staging device file", r)
		                    : mh_mount_file_info(dev, &fm, r);
		mh_closep(&dev);
		if (b < 0)
			goto out;
		if (!fm.mounted)
			break;
		if (b != 1) {
			mh_fail(r, MH_E_REFUSED, EPERM,
			        "something else is bound at the staging path");
			goto out;
		}
		int used = mh_mount_other_dev_use(c->pol, v.st.st_dev, v.st.st_ino, 0, fm.id, where,
		                                  sizeof(where), r);
		if (used < 0)
			goto out;
		if (used) {
			mh_fail(r, MH_E_BUSY, EBUSY, "volume is still published at %s", where);
			goto out;
		}
		/* Safety: the bind at dir/dev was just shown to be this volume's device. */
		if (mh_umount(dir, DEV_NAME, fm.id, r) < 0)
			goto out;
	}
	struct stat st;
	if (fstatat(dir, DEV_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    unlinkat(dir, DEV_NAME, 0) < 0 && errno != ENOENT) {
		mh_fail(r, MH_E_FAILED, errno, "remove staging device file: %s", strerror(errno));
		goto out;
	}
	/* Never a false success: the device must really be gone (EBUSY is an answer). */
	if (v.st.st_ino && detach_leftovers(c, &v, r) < 0)
		goto out;
	ret = 0;
out:
	mh_closep(&dev);
	mh_closep(&dir);
	return ret;
}

int mh_block_publish(const struct mh_ctx *c, const struct mh_req_publish *q, const char *sroot,
                     const char *troot, struct mh_audit *a, struct mh_res *r)
{
	struct mh_vol v = {0};
	struct mh_fmnt sfm, tfm;
	struct mh_loop sl, tl, rl;
	const char *name;
	int sdir = -1, sdev = -1, parent = -1, tfd = -1, img = -1, lfd = -1, node = -1, ret = -1;
	bool created = false, attached = false;

	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0 ||
	    (sdir = mh_path_open_dir(sroot, q->staging_path, r)) < 0 ||
	    (sdev = mh_path_open_child_flags(sdir, DEV_NAME, O_PATH, 0, r)) < 0) {
		if (r->kind == MH_E_NOTFOUND)
			r->kind = MH_E_PRECONDITION;
		goto out;
	}
	int b = bound_loop(sdev, &v, &sfm, &sl, "staging device file", r);
	if (b <= 0) {
		*r = (struct mh_res){0};
		mh_fail(r, MH_E_PRECONDITION, 0, "volume is not staged at the staging path");
		goto out;
	}
	bool ro = q->readonly || (sl.lo_flags & LO_FLAGS_READ_ONLY);

	if ((parent = mh_path_open_parent(troot, q->target_path, &name, r)) < 0)
		goto out;
	tfd = mh_path_open_child_flags(parent, name, O_PATH, 0, r);
	if (tfd < 0 && r->kind == MH_E_NOTFOUND) {
		/* The SP creates the target file (CSI NodePublishVolume, block). */
		*r = (struct mh_res){0};
		tfd = mh_path_open_child_flags(parent, name, O_CREAT | O_EXCL | O_WRONLY, 0640, r);
		if (tfd < 0)
			goto out;
		created = true;
		mh_closep(&tfd);
		tfd = mh_path_open_child_flags(parent, name, O_PATH, 0, r);
	}
	if (tfd < 0)
		goto out;
	b = bound_loop(tfd, &v, &tfm, &tl, "target", r);
	if (b < 0)
		goto out;
	if (b == 1) {
		bool tro = tfm.ro || (tl.lo_flags & LO_FLAGS_READ_ONLY);
		if (tro != ro)
			mh_fail(r, MH_E_EXISTS, EEXIST, "already published %s",
			        tro ? "read-only" : "read-write");
		else
			a->note = "already published";
		ret = tro == ro ? 0 : -1;
		goto out;
	}
	if (!S_ISREG(tfm.st.st_mode)) {
		mh_fail(r, MH_E_EXISTS, EEXIST, "target exists and is not a regular file");
		goto out;
	}
	if (ro && !(sl.lo_flags & LO_FLAGS_READ_ONLY)) {
		/* A read-only bind would not stop writes: a read-only loop device does. */
		if ((img = mh_image_open(c, q->volume_id, true, r)) < 0 ||
		    (lfd = mh_loop_attach(img, q->volume_id, true, false, &rl, r)) < 0)
			goto out;
		attached = true;
		if ((node = open_node(&rl, r)) < 0)
			goto out;
	}
	/* Safety: see the top of this file (our loop node, our file, nosuid). */
	if (mh_mount_bind_dev(node >= 0 ? node : sdev, tfd, ro, r) < 0)
		goto out;
	ret = 0;
out:
	mh_closep(&node);
	mh_closep(&lfd);
	mh_closep(&img);
	if (ret < 0 && attached) {
		struct mh_res ignore = {0};
		mh_loop_detach(&rl, v.st.st_dev, v.st.st_ino, &ignore);
	}
	mh_closep(&tfd);
	if (ret < 0 && created)
		unlinkat(parent, name, 0); /* leave no file we made */
	mh_closep(&parent);
	mh_closep(&sdev);
	mh_closep(&sdir);
	return ret;
}

int mh_block_unpublish(const struct mh_ctx *c, const char *volume_id, int parent, const char *name,
                       int fd, struct mh_audit *a, struct mh_res *r)
{
	struct mh_vol v = {0};
	struct mh_fmnt fm;
	struct mh_loop l;
	char where[MH_PATH_MAX + 1];
	int ret = -1;
	bool have_vol = mh_vol_lookup(c, volume_id, &v, r) == 0;
	if (!have_vol) {
		if (r->kind != MH_E_NOTFOUND)
			goto out;
		*r = (struct mh_res){0};
	}
	for (int i = 0; i < BIND_MAX; i++) {
		if (fd < 0 && (fd = mh_path_open_child_flags(parent, name, O_PATH, 0, r)) < 0)
			goto out;
		int b = have_vol ? bound_loop(fd, &v, &fm, &l, "target", r)
		                 : mh_mount_file_info(fd, &fm, r);
		mh_closep(&fd);
		if (b < 0 && r->kind == MH_E_EXISTS)
			r->kind = MH_E_REFUSED; /* never unmount what is not ours */
		if (b < 0)
			goto out;
		if (!fm.mounted)
			break;
		if (b != 1) {
			mh_fail(r, MH_E_REFUSED, EPERM, "something else is bound at the target");
			goto out;
		}
		/* Safety: the bind on parent/name was just shown to be this volume's device. */
		if (mh_umount(parent, name, fm.id, r) < 0)
			goto out;
		/* A read-only publication's own loop device goes with its last bind. */
		/* NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): b == 1: bound_loop() set l */
		int used = mh_mount_other_dev_use(c->pol, v.st.st_dev, v.st.st_ino, l.rdev, -1,
		                                  where, sizeof(where), r);
		if (used < 0)
			goto out;
		if (!used && (l.lo_flags & LO_FLAGS_READ_ONLY) &&
		    !(l.lo_flags & LO_FLAGS_AUTOCLEAR) &&
		    mh_loop_detach(&l, v.st.st_dev, v.st.st_ino, r) < 0)
			goto out;
	}
	struct stat st;
	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    unlinkat(parent, name, 0) < 0 && errno != ENOENT) {
		mh_fail(r, MH_E_FAILED, errno, "remove target file: %s", strerror(errno));
		goto out;
	}
	a->note = NULL;
	ret = 0;
out:
	mh_closep(&fd);
	return ret;
}
