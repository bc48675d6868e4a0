/*
 * EXPAND (grow a staged volume's file system online to the size of its
 * image) and the loop devices' new size after RESIZE (mh_image_life.c).
 *
 * Runs in a worker of the helper as root under seccomp. Nothing here is fatal.
 *
 * The online grow is done by the helper itself with the file systems' own
 * ioctls on a directory fd of the verified staging mount, not by running
 * resize2fs / xfs_growfs / btrfs in a child: those tools only issue the same
 * ioctls, and each ioctl needs a capability a capability-less child lacks:
 *   ext4   EXT4_IOC_RESIZE_FS (new block count)   CAP_SYS_RESOURCE
 *          (ext4_resize_begin(); resize2fs without it: "Permission denied")
 *   xfs    XFS_IOC_FSGROWFSDATA (new data blocks) CAP_SYS_ADMIN
 *   btrfs  BTRFS_IOC_RESIZE ("max")               CAP_SYS_ADMIN
 * CAP_SYS_RESOURCE is an optional capability of the helper (policy/caps.c):
 * without it, EXPAND of ext4 fails with a reason saying so.
 *
 * Safety argument. The image file is one of ours (name from a checked id);
 * LOOP_SET_CAPACITY only makes a loop device re-read the size of the file
 * that already backs it. The grow ioctls act on the file system whose mount
 * at the staging path (root-only parents, no symlink: mh_at.c) was just
 * proven to be this volume's loop device, and
 * grow it towards the size of that device, which is the size of our image
 * (an xfs by bounded steps, below): they cannot touch any other file system,
 * and never shrink one.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/btrfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mh_common.h"
#include "mh_image.h"
#include "mh_ops.h"
#include "mh_resize.h"

/* From <linux/ext4.h> (not shipped by linux-libc-dev) and xfsprogs' <xfs/xfs_fs.h>. */
#define EXT4_IOC_RESIZE_FS _IOW('f', 16, uint64_t)

struct xfs_fsop_geom_v1 {
	uint32_t blocksize, rtextsize, agblocks, agcount, logblocks, sectsize, inodesize, imaxpct;
	uint64_t datablocks, rtblocks, rtextents, logstart;
	unsigned char uuid[16];
	uint32_t sunit, swidth;
	int32_t version;
	uint32_t flags, logsectsize, rtsectsize, dirblocksize;
};

struct xfs_growfs_data {
	uint64_t newblocks;
	uint32_t imaxpct;
};

_Static_assert(sizeof(struct xfs_fsop_geom_v1) == 112, "xfs_fsop_geom_v1 layout");
_Static_assert(sizeof(struct xfs_growfs_data) == 16, "xfs_growfs_data layout");
_Static_assert(sizeof(struct btrfs_ioctl_vol_args) == 4096, "btrfs_ioctl_vol_args layout");

#define XFS_IOC_FSGEOMETRY_V1 _IOR('X', 100, struct xfs_fsop_geom_v1)
#define XFS_IOC_FSGROWFSDATA  _IOW('X', 110, struct xfs_growfs_data)

int mh_resize_refresh_loops(const struct stat *st, struct mh_res *r)
{
	struct mh_loop *loops;
	uint64_t before, after;
	int n = mh_loop_list(st->st_dev, st->st_ino, &loops, r);
	/* Never a device shrunk under what uses it: each checked against the image first. */
	for (int i = 0; i < n; i++)
		if (mh_loop_size(&loops[i], &before, r) < 0)
			n = -1;
		else if (before > (uint64_t)st->st_size)
			n = mh_fail(r, MH_E_PRECONDITION, EINVAL,
			            "the image is smaller than %s: a device is never shrunk",
			            loops[i].path);
	/*
	 * The kernel reads the file's size again at LOOP_SET_CAPACITY, and the
	 * image's owner may have truncated it meanwhile: a device found smaller
	 * after is reported, never answered as a success.
	 */
	for (int i = 0; i < n; i++)
		if (mh_loop_size(&loops[i], &before, r) < 0 ||
		    mh_loop_set_capacity(&loops[i], r) < 0 ||
		    mh_loop_size(&loops[i], &after, r) < 0)
			n = -1;
		else if (after < before)
			n = mh_fail(
			    r, MH_E_FAILED, EINVAL,
			    "the image shrank while %s took its size: the device is smaller now",
			    loops[i].path);
	free(loops);
	return n;
}

/*
 * How far one EXPAND grows an xfs (mh_resize.h). The kernel sets up each new
 * allocation group in the calling thread, and rewrites every group's
 * superblock at each growth, while the image's size is its owner's to
 * choose: a 512 MiB xfs grown to 15 TiB at once held the core's one thread
 * for 100 s (a hostile review, 2026-12-04), every other volume's request and
 * freeze deadline with it. So an xfs grows by steps, each its own request,
 * until it fills its device (the helper asks again: mh_relay_expand); and
 * since a step's time grows with the groups there are (0.7 s at 32,768 here,
 * 2.4 s at 122,880), never to more than MH_GROW_MAX_GROUPS (mkfs.xfs makes
 * four groups on a volume of a few GiB, so it grows to 16,384 times the size
 * it was made with: 8 TiB from 512 MiB). A step also costs a fixed part
 * (about 0.2 s here),
 * so larger steps cost less in all: to 4 TiB, 1,024 groups a step took 13 s,
 * 64 took 112 s (tests/bench/core_serial.py).
 */

/*
 * Grow the file system mounted at fd (type fstype) towards dev_size bytes,
 * by one step at most: 0, with *more when a step is left; or -1 with r.
 */
static int grow_fs(int fd, const char *fstype, uint64_t dev_size, bool *more, struct mh_audit *a,
                   struct mh_res *r)
{
	if (strcmp(fstype, "ext4") == 0) {
		struct statvfs sv;
		if (fstatvfs(fd, &sv) < 0 || sv.f_frsize == 0)
			return mh_fail(r, MH_E_FAILED, errno, "statvfs: %s", strerror(errno));
		/*
		 * At once: statfs leaves ext4's overhead out of f_blocks, so no step
		 * can be measured from it, and asking less than it holds is a shrink
		 * the kernel refuses. (Its growth needs CAP_SYS_RESOURCE, optional.)
		 */
		uint64_t blocks = dev_size / sv.f_frsize;
		if (ioctl(fd, EXT4_IOC_RESIZE_FS, &blocks) < 0)
			return mh_fail(
			    r, MH_E_FAILED, errno, "ext4 online resize: %s%s", strerror(errno),
			    errno == EPERM ? " (the helper lacks CAP_SYS_RESOURCE)" : "");
		return 0;
	}
	if (strcmp(fstype, "xfs") == 0) {
		struct xfs_fsop_geom_v1 g;
		memset(&g, 0, sizeof(g));
		if (ioctl(fd, XFS_IOC_FSGEOMETRY_V1, &g) < 0 || g.blocksize == 0)
			return mh_fail(r, MH_E_FAILED, errno, "xfs geometry: %s", strerror(errno));
		uint64_t want = dev_size / g.blocksize,
		         most = g.datablocks + (uint64_t)MH_GROW_STEP_GROUPS * g.agblocks;
		struct xfs_growfs_data in = {.newblocks = want < most ? want : most,
		                             .imaxpct = g.imaxpct};
		if (in.newblocks <= g.datablocks) {
			a->note = "file system already fills the device";
			return 0; /* never ask xfs to shrink */
		}
		if (g.agblocks && want / g.agblocks >= MH_GROW_MAX_GROUPS)
			return mh_fail(r, MH_E_REFUSED, EFBIG,
			               "an xfs of %u blocks a group is not grown past %d groups "
			               "(%llu bytes): make it with larger groups",
			               g.agblocks, MH_GROW_MAX_GROUPS,
			               (unsigned long long)g.agblocks * g.blocksize *
			                   (MH_GROW_MAX_GROUPS - 1));
		if (ioctl(fd, XFS_IOC_FSGROWFSDATA, &in) < 0)
			return mh_fail(r, MH_E_FAILED, errno, "xfs grow: %s", strerror(errno));
		*more = want > most;
		return 0;
	}
	/* btrfs records its device's new size: no work per group. */
	if (strcmp(fstype, "btrfs") == 0) {
		struct btrfs_ioctl_vol_args args;
		memset(&args, 0, sizeof(args));
		snprintf(args.name, sizeof(args.name), "max");
		if (ioctl(fd, BTRFS_IOC_RESIZE, &args) < 0)
			return mh_fail(r, MH_E_FAILED, errno, "btrfs resize: %s", strerror(errno));
		return 0;
	}
	return mh_fail(r, MH_E_REFUSED, EINVAL, "cannot grow %s", fstype);
}

int mh_answer_expand(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_expand *q = &req->u.expand;
	struct mh_vol v = {0};
	struct mh_at at = {.dir = -1}, sub = {.dir = -1};
	struct mh_mnt m;
	int fd = -1, ret = -1;
	bool block = (q->flags & MH_F_BLOCK) != 0;
	if (!block && q->fs_type[0] && !pol_fs_allowed(c->pol, q->fs_type))
		return mh_fail(r, MH_E_REFUSED, EPERM, "filesystem type not allowed by policy");
	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0)
		return -1;
	/* An ephemeral volume is staged at its pod's target path. */
	if (mh_at_open(c, q->staging_path, POL_STAGING | POL_TARGET, &at, r) < 0 ||
	    (block && mh_at_descend(&at, "dev", &sub, r) < 0))
		goto precondition;
	/* The staged device file, or the staging mount, must be this volume's. */
	fd = mh_at_child(block ? &sub : &at, block ? O_PATH : O_RDONLY | O_DIRECTORY, r);
	if (fd < 0 || mh_mount_info(fd, &m, r) < 0)
		goto precondition;
	if (!mh_vol_owns(&v, &m, &v.loop)) {
		mh_fail(r, MH_E_PRECONDITION, 0, "volume is not staged at the staging path");
		goto out;
	}
	if (!block && q->fs_type[0] && strcmp(q->fs_type, m.fstype) != 0) {
		mh_fail(r, MH_E_REFUSED, EINVAL, "volume is staged as %s, not %s", m.fstype,
		        q->fs_type);
		goto out;
	}
	if (!block && m.ro) {
		mh_fail(r, MH_E_PRECONDITION, EROFS, "volume is staged read-only");
		goto out;
	}
	uint64_t size = 0;
	bool more = false;
	if (mh_resize_refresh_loops(&v.st, r) < 0 || mh_loop_size(&v.loop, &size, r) < 0)
		goto out;
	/* Safety: the file system just proved to be this volume's, grown to its device's size. */
	if (!block && grow_fs(fd, m.fstype, size, &more, a, r) < 0)
		goto out;
	if (more) {
		mh_fail(r, MH_E_BUSY, EINPROGRESS, "grown by %d groups; ask again to go on",
		        MH_GROW_STEP_GROUPS);
		goto out;
	}
	ans->u.size_ans.size_bytes = size;
	ret = 0;
	goto out;
precondition:
	mh_missing_means(r, MH_E_PRECONDITION);
out:
	mh_closep(&fd);
	mh_at_close(&sub);
	mh_at_close(&at);
	return ret;
}
