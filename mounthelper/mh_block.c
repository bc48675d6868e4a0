/*
 * Raw block volumes (CSI access type "block"): the volume's loop device node
 * is bound onto regular files instead of a file system being mounted.
 *
 *   STAGE     attach a loop device WITHOUT autoclear (read-only if asked),
 *             pinned (mh_loop.c: no pod is ever its only opener),
 *             create <staging>/dev (marked as ours, mh_at.c) and bind the
 *             node /dev/loopN onto it; no probe, no mkfs, no file system
 *   PUBLISH   create the file target_path (marked), or use an existing empty
 *             one, and bind the loop device's node onto it; a read-only
 *             publication of a read-write staging gets its own read-only loop
 *             device on the same image (see below)
 *   UNSTAGE   (mh_ops.c) unmount and unlink <staging>/dev, detach the loop
 *             device(s), each after its pins
 *   UNPUBLISH (mh_ops.c) unmount this volume's binds, unlink the file if it
 *             is ours, detach a read-only publication's own loop device
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
 * created by the helper itself (O_CREAT|O_EXCL in a root-only directory,
 * without symlinks) or is an empty regular file there, never one holding
 * data (a node bound over kubelet's config would hide it); the bind carries
 * nosuid; and it exists only in kubelet's CSI directories, where kubelet
 * hands it to exactly the pod that asked for this volume. A pod thus gets the
 * block device of its own volume and nothing else. A bind follows the device
 * NUMBER, so a loop device must never be detached (and its number handed to
 * another image) while a bind of it remains anywhere: UNSTAGE answers BUSY
 * while any mount or bind of this image's devices is left in the helper's
 * view, whatever the mount point is called (mh_loop_in_use), and UNPUBLISH
 * detaches a read-only publication's own device only once no bind is left.
 *
 * Read-only: MOUNT_ATTR_RDONLY on a bind of a device node does not stop
 * opening it for writing (the kernel checks a read-only mount only for
 * regular files, directories and symlinks). A read-only publication of a
 * volume staged read-write therefore binds its own read-only loop device on
 * the same image, whose writes the block layer refuses (the bind itself
 * cannot be made read-only for a device node). UNPUBLISH detaches it once no
 * bind of it is left. A raw block device is read-only at the block layer
 * (BLKROSET), never as the loop driver sees it (LO_FLAGS_READ_ONLY): a pod
 * holding a device of the driver's read-only kind could give it another
 * backing file (mh_loop_attach).
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
#include "mh_pause.h"
#include "mh_image.h"

/* O_PATH fd of the helper's /dev/loopN, checked to be that very device. */
static int open_node(const struct mh_loop *l, struct mh_res *r)
{
	struct stat st;
	int fd = mh_loop_node(l, r);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISBLK(st.st_mode) || st.st_rdev != l->rdev) {
		close(fd);
		return mh_fail(r, MH_E_FAILED, EINVAL, "%s is not the loop device", l->path);
	}
	return fd;
}

/* mh_at_vacant for a file: 0 too when nothing is there (*exists false). */
static int look(const struct mh_at *sub, const struct mh_vol *v, struct mh_mnt *m,
                struct mh_loop *l, bool *exists, struct mh_res *r)
{
	int fd, b = mh_at_vacant(sub, v, false, m, l, &fd, r);
	*exists = !(b < 0 && mh_absent(r));
	mh_closep(&fd);
	return *exists ? b : 0;
}

/* Bind l's node onto sub's name (made and marked first if absent), checked afterwards. */
static int bind_checked(const struct mh_ctx *c, const struct mh_at *sub, const struct mh_loop *l,
                        const char *volume_id, const char *path, unsigned role, bool *made,
                        struct mh_res *r)
{
	int node = -1, fd = -1, id, ret = -1;
	int mk = mh_at_make(c, sub, false, volume_id, r);
	if (mk < 0)
		return -1;
	*made = mk == 1;
	if ((node = open_node(l, r)) < 0 || (fd = mh_at_child(sub, O_PATH, r)) < 0)
		goto out;
	/* Safety: see the top of this file (our loop node, our or an empty file, nosuid). */
	if (mh_mount_bind(node, fd, &id, r) < 0)
		goto out;
	mh_closep(&fd);
	if (path) {
		ret = mh_verify_mount(c, path, role, id, r);
	} else {
		struct mh_mnt m;
		fd = mh_at_child(sub, O_PATH, r);
		ret = fd >= 0 && mh_mount_info(fd, &m, r) == 0 && m.mounted && m.id == id
		          ? 0
		          : mh_fail(r, MH_E_FAILED, EAGAIN, "the staging device changed meanwhile");
		if (ret < 0)
			mh_umount_id(id, &(struct mh_res){0});
	}
out:
	mh_closep(&fd);
	mh_closep(&node);
	return ret;
}

/*
 * The loop device a raw block staging binds: the one left by a STAGE that
 * crashed before its bind (attached, used by nothing, no autoclear, the mode
 * asked for), else a new one on our image. Any other device of the image that
 * nothing mounts or binds (an UNSTAGE's whose holder put its detach off, left
 * autoclear and pinned; a killed STAGE's of the other mode) is detached first:
 * BUSY while one is mounted or bound anywhere, or still held. *lfd is the new
 * device's descriptor; it stays -1 when the left one is re-used.
 */
static int stage_loop(const struct mh_ctx *c, const struct mh_req_stage *q, int img,
                      const struct mh_vol *v, struct mh_loop *l, int *lfd, struct mh_audit *a,
                      struct mh_res *r)
{
	struct mh_loop loops[8];
	int n = mh_loop_find(v->st.st_dev, v->st.st_ino, false, loops, 8, r);
	if (n < 0)
		return -1;
	if (n > 0) {
		char where[MH_PATH_MAX + 1];
		int used = mh_loop_in_use(&loops[0], -1, where, sizeof(where), r);
		if (used < 0)
			return -1;
		if (n > 1 || used || (loops[0].lo_flags & LO_FLAGS_AUTOCLEAR) ||
		    !!(loops[0].lo_flags & LO_FLAGS_READ_ONLY) != q->readonly) {
			n = mh_detach_unused(v, true, r); /* Safety: as UNSTAGE's detach */
			if (n == 0)
				a->note = "detached the volume's unused loop devices first";
		}
	}
	if (n < 0)
		return -1;
	if (n > 0) {
		*l = loops[0];
		a->note = "re-used the volume's loop device";
		/* Pinned at its attach, unless that attach was killed in between. */
		if (mh_loop_pin(l, r) < 0)
			return -1;
		return q->readonly ? 0 : mh_image_mark_raw(img, false, r);
	}
	/* Safety: the loop device exposes our own image file, opened by us; when it is
	 * writable, the image records it first (mh_image.h), and only an image no other
	 * staging uses (a busy one is refused above, unmarked). */
	if ((!q->readonly && mh_image_mark_raw(img, true, r) < 0) ||
	    (*lfd = mh_loop_attach(img, q->volume_id, q->readonly, false, c->direct_io, l, r)) < 0)
		return -1;
	mh_pause(c, "attached", q->volume_id); /* tests: a device not bound yet */
	return 0;
}

int mh_block_stage(const struct mh_ctx *c, const struct mh_req_stage *q, unsigned role,
                   struct mh_audit *a, struct mh_res *r)
{
	struct mh_vol v = {0};
	struct mh_mnt m;
	struct mh_loop l = {0};
	struct mh_at at = {.dir = -1}, sub = {.dir = -1};
	int img = -1, lfd = -1, ret = -1;
	bool made_dir = false, made_dev = false, attached = false, exists, ro = q->readonly;

	if (q->mount_flags[0] || q->mkfs_options[0] || (q->flags & MH_F_MOUNT_GROUP))
		return mh_fail(r, MH_E_REFUSED, EINVAL,
		               "raw block volumes take no mount options, mkfs options or group");
	if (q->fs_type[0] && !pol_fs_allowed(c->pol, q->fs_type))
		return mh_fail(r, MH_E_REFUSED, EPERM, "filesystem type not allowed by policy");
	/* Writable even when read-only: a raw device is read-only at the block layer only. */
	if ((img = mh_image_open(c, q->volume_id, false, &v.st, r)) < 0)
		return -1;
	if (mh_at_open(c, q->staging_path, role, &at, r) < 0)
		goto out;
	if (q->flags & MH_F_CREATE_DIR) {
		int mk = mh_at_make(c, &at, true, q->volume_id, r);
		if (mk < 0)
			goto out;
		made_dir = mk == 1;
	}
	/* The staging directory: root's, nothing mounted on it, nothing in it but our device. */
	if (mh_at_descend(&at, MH_BLOCK_DEV, &sub, r) < 0 || mh_mount_info(sub.dir, &m, r) < 0)
		goto out;
	if (m.mounted) {
		mh_fail(r, MH_E_EXISTS, EEXIST, "%s is mounted at the staging path", m.source);
		goto out;
	}
	int b = look(&sub, &v, &m, &l, &exists, r);
	if (b < 0)
		goto out;
	if (b == 1) {
		ret = mh_already(a, r, !!(l.lo_flags & LO_FLAGS_READ_ONLY) == ro, "already staged",
		                 "", !ro);
		goto out;
	}
	if (!exists)
		mh_at_remove_temp(&sub, q->volume_id); /* the device file an attempt began */
	if (!exists && mh_dir_has_entries(sub.dir, r) != 0) {
		if (r->kind == MH_E_OK)
			mh_fail(r, MH_E_EXISTS, ENOTEMPTY, "the staging directory is not empty");
		goto out;
	}

	if (stage_loop(c, q, img, &v, &l, &lfd, a, r) < 0)
		goto out;
	attached = lfd >= 0;
	ret = bind_checked(c, &sub, &l, q->volume_id, NULL, role, &made_dev, r);
out:
	mh_closep(&lfd);
	if (ret < 0 && attached) /* never under a bind that could not be undone */
		mh_detach_unused(&v, false, &(struct mh_res){0});
	if (ret < 0 && made_dev)
		mh_at_remove_ours(&sub, q->volume_id, &(struct mh_res){0});
	if (ret < 0 && made_dir)
		mh_at_remove_ours(&at, q->volume_id, &(struct mh_res){0});
	mh_at_close(&sub);
	mh_at_close(&at);
	mh_closep(&img);
	return ret;
}

int mh_block_publish(const struct mh_ctx *c, const struct mh_req_publish *q, const struct mh_vol *v,
                     struct mh_audit *a, struct mh_res *r)
{
	struct mh_at sat = {.dir = -1}, sub = {.dir = -1}, tat = {.dir = -1};
	struct mh_mnt sm, tm;
	struct mh_loop sl = {0}, tl = {0}, rl = {0};
	int img = -1, lfd = -1, ret = -1;
	bool made = false, attached = false, exists;

	if (mh_at_open(c, q->staging_path, POL_STAGING, &sat, r) < 0 ||
	    mh_at_descend(&sat, MH_BLOCK_DEV, &sub, r) < 0 ||
	    look(&sub, v, &sm, &sl, &exists, r) != 1) {
		mh_refail(r, MH_E_PRECONDITION, 0, "volume is not staged at the staging path");
		goto out;
	}
	bool ro = q->readonly || (sl.lo_flags & LO_FLAGS_READ_ONLY);
	if (mh_at_open(c, q->target_path, POL_TARGET, &tat, r) < 0)
		goto out;
	int b = look(&tat, v, &tm, &tl, &exists, r);
	if (b < 0)
		goto out;
	if (b == 1) {
		ret = mh_already(a, r, !!(tl.lo_flags & LO_FLAGS_READ_ONLY) == ro,
		                 "already published", "", !ro);
		goto out;
	}
	rl = sl;
	if (ro && !(sl.lo_flags & LO_FLAGS_READ_ONLY)) {
		/* A read-only bind would not stop writes: a read-only loop device does. */
		if ((img = mh_image_open(c, q->volume_id, false, NULL, r)) < 0 ||
		    (lfd = mh_loop_attach(img, q->volume_id, true, false, c->direct_io, &rl, r)) <
		        0)
			goto out;
		attached = true;
	}
	ret = bind_checked(c, &tat, &rl, q->volume_id, q->target_path, POL_TARGET, &made, r);
out:
	mh_closep(&lfd);
	mh_closep(&img);
	if (ret < 0 && attached) /* never under a bind that could not be undone */
		mh_detach_unused(v, false, &(struct mh_res){0});
	if (ret < 0 && made)
		mh_at_remove_ours(&tat, q->volume_id,
		                  &(struct mh_res){0}); /* leave no file we made */
	mh_at_close(&tat);
	mh_at_close(&sub);
	mh_at_close(&sat);
	return ret;
}
