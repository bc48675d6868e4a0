/*
 * STATS: usage and condition of a staged or published volume, for CSI
 * NodeGetVolumeStats (usage and VolumeCondition).
 *
 * Runs inline in the helper's main loop (it only reads) as root under
 * seccomp. Nothing here is fatal.
 *
 * What it answers, for a path of this volume (staging or target):
 *  - path missing, or something that is not this volume mounted there:
 *    NOTFOUND ("not a sepcsi mount of this volume");
 *  - a plain directory (the mount is gone, e.g. unmounted behind our back) or
 *    no loop device backs the image any more: abnormal=1 with a message;
 *  - this volume's mount: statvfs figures; abnormal=1 if the file system
 *    reports errors (ext4: /sys/fs/ext4/<dev>/errors_count > 0; a shut-down
 *    xfs, or any file system, answers statvfs with EIO);
 *  - MH_F_BLOCK: path is the staging directory (its "dev" file) or the target
 *    file; bytes_total is the device size, the rest 0; abnormal if the loop
 *    device no longer backs the image.
 *
 * Safety argument: reading only (statx, statvfs, sysfs, BLKGETSIZE64); paths
 * are opened beneath their allowed root without following symlinks, so a
 * hostile rpcd learns at most the usage of a mount beneath the allowed roots.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mh_common.h"
#include "mh_ops.h"
#include "mh_path.h"

static void abnormal(struct mh_ans_stats *s, const char *msg)
{
	s->abnormal = 1;
	snprintf(s->message, sizeof(s->message), "%s", msg);
}

/* ext4 counts errors since mkfs in sysfs, named after the block device. */
static long ext4_errors(const struct mh_loop *l)
{
	char p[64], buf[32] = "";
	snprintf(p, sizeof(p), "/sys/fs/ext4/loop%d/errors_count", l->nr);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return strtol(buf, NULL, 10);
}

static int fs_stats(const struct mh_vol *v, int fd, struct mh_ans_stats *s, struct mh_res *r)
{
	struct mh_mnt m;
	struct statvfs sv;
	if (mh_mount_info(fd, &m, r) < 0)
		return -1;
	if (!m.mounted) {
		abnormal(s, "volume is not mounted at the path (the mount is gone)");
		return 0;
	}
	if (!v->attached) {
		/* Our loop devices are named in the source: one that backs nothing now is ours
		 * lost. */
		if (strncmp(m.source, "/dev/loop", 9) == 0) {
			abnormal(s, "loop device no longer backs the volume's image");
			return 0;
		}
		return mh_fail(r, MH_E_NOTFOUND, ENOENT, "not a sepcsi mount of this volume");
	}
	if (!mh_vol_owns(v, &m))
		return mh_fail(r, MH_E_NOTFOUND, ENOENT, "not a sepcsi mount of this volume");
	if (fstatvfs(fd, &sv) < 0) {
		char msg[96];
		snprintf(msg, sizeof(msg), "file system does not answer: %s", strerror(errno));
		abnormal(s, msg); /* EIO: a shut-down xfs, a failing device */
		return 0;
	}
	s->bytes_total = (uint64_t)sv.f_blocks * sv.f_frsize;
	s->bytes_available = (uint64_t)sv.f_bavail * sv.f_frsize;
	s->bytes_used = (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
	s->inodes_total = sv.f_files;
	s->inodes_free = sv.f_favail;
	s->inodes_used = sv.f_files - sv.f_ffree;
	long errs = strcmp(m.fstype, "ext4") == 0 ? ext4_errors(&v->loop) : 0;
	if (errs > 0) {
		char msg[96];
		snprintf(msg, sizeof(msg), "ext4 reports %ld error(s) on the volume", errs);
		abnormal(s, msg);
	}
	return 0;
}

static int block_stats(const struct mh_vol *v, int fd, struct mh_ans_stats *s, struct mh_res *r)
{
	struct stat st;
	struct mh_fmnt fm;
	struct mh_loop l;
	int dev = -1, ret = -1;
	if (fstat(fd, &st) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "stat: %s", strerror(errno));
	/* The staging directory holds the device file "dev"; a target is the file itself. */
	if (S_ISDIR(st.st_mode)) {
		if ((dev = mh_path_open_child_flags(fd, "dev", O_PATH, 0, r)) < 0)
			return -1;
		fd = dev;
	}
	if (mh_mount_file_info(fd, &fm, r) < 0)
		goto out;
	if (!fm.mounted) {
		abnormal(s, "device is not bound at the path (the bind is gone)");
		ret = 0;
		goto out;
	}
	if (!S_ISBLK(fm.st.st_mode)) {
		mh_fail(r, MH_E_NOTFOUND, ENOENT, "not a sepcsi device of this volume");
		goto out;
	}
	int found = mh_loop_by_rdev(fm.st.st_rdev, v->st.st_dev, v->st.st_ino, &l, r);
	if (found < 0)
		goto out;
	if (found == 0) {
		if (major(fm.st.st_rdev) != 7) {
			mh_fail(r, MH_E_NOTFOUND, ENOENT, "not a sepcsi device of this volume");
			goto out;
		}
		abnormal(s, "loop device no longer backs the volume's image");
		ret = 0;
		goto out;
	}
	if (mh_loop_size(&l, &s->bytes_total, r) < 0)
		goto out;
	ret = 0;
out:
	mh_closep(&dev);
	return ret;
}

int mh_answer_stats(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                    struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_stats *q = &req->u.stats;
	const char *root;
	struct mh_vol v = {0};
	a->volume_id = q->volume_id;
	a->path = q->path;
	if (mh_check_volume_id(q->volume_id, r) < 0 ||
	    mh_check_path(c, q->path, "path", &root, r) < 0)
		return -1;
	if (q->flags & ~MH_F_BLOCK)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "flag not valid for STATS");
	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0)
		return -1;
	bool block = (q->flags & MH_F_BLOCK) != 0;
	/* A directory is opened for statvfs; a block target may be a file. */
	int fd = mh_path_open_flags(root, q->path, block ? O_PATH : O_RDONLY | O_DIRECTORY, r);
	if (fd < 0) {
		if (r->kind == MH_E_REFUSED && r->sys_errno == ENOTDIR)
			r->kind = MH_E_NOTFOUND; /* a file where a mount should be */
		if (r->sys_errno == EIO) {       /* a shut-down file system cannot even be opened */
			*r = (struct mh_res){0};
			abnormal(&ans->u.stats_ans, "file system does not answer: I/O error");
			a->note = ans->u.stats_ans.message;
			return 0;
		}
		return -1;
	}
	int ret = block ? block_stats(&v, fd, &ans->u.stats_ans, r)
	                : fs_stats(&v, fd, &ans->u.stats_ans, r);
	close(fd);
	if (ret == 0 && ans->u.stats_ans.abnormal)
		a->note = ans->u.stats_ans.message;
	return ret;
}
