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
 * Safety argument: reading only (statx, statvfs on an O_PATH descriptor, sysfs,
 * BLKGETSIZE64); paths
 * must be staging or target paths of the policy and are opened beneath their
 * root without following symlinks (mh_at.c), so a hostile rpcd learns at
 * most the usage of a mount in kubelet's CSI directories.
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
#include "mh_looks.h"

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
	return mh_read_text(p, buf, sizeof(buf)) < 0 ? 0 : strtol(buf, NULL, 10);
}

static int fs_stats(const struct mh_vol *v, int fd, const struct mh_mnt *m, struct mh_ans_stats *s,
                    struct mh_res *r)
{
	struct statvfs sv;
	if (!m->mounted) {
		abnormal(s, "volume is not mounted at the path (the mount is gone)");
		return 0;
	}
	if (!v->attached) {
		/* Our loop devices are named in the source: one that backs nothing now is ours
		 * lost. */
		if (strncmp(m->source, "/dev/loop", 9) == 0) {
			abnormal(s, "loop device no longer backs the volume's image");
			return 0;
		}
		return mh_fail(r, MH_E_NOTFOUND, ENOENT, "not a sepcsi mount of this volume");
	}
	if (!mh_vol_owns(v, m, NULL))
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
	long errs = strcmp(m->fstype, "ext4") == 0 ? ext4_errors(&v->loop) : 0;
	if (errs > 0) {
		char msg[96];
		snprintf(msg, sizeof(msg), "ext4 reports %ld error(s) on the volume", errs);
		abnormal(s, msg);
	}
	return 0;
}

static int block_stats(const struct mh_vol *v, const struct mh_mnt *m, struct mh_ans_stats *s,
                       struct mh_res *r)
{
	struct mh_loop l;
	if (!m->mounted) {
		abnormal(s, "device is not bound at the path (the bind is gone)");
		return 0;
	}
	if (!S_ISBLK(m->st.st_mode))
		return mh_fail(r, MH_E_NOTFOUND, ENOENT, "not a sepcsi device of this volume");
	if (!mh_vol_owns(v, m, &l)) {
		if (major(m->st.st_rdev) != 7)
			return mh_fail(r, MH_E_NOTFOUND, ENOENT,
			               "not a sepcsi device of this volume");
		abnormal(s, "loop device no longer backs the volume's image");
		return 0;
	}
	return mh_loop_size(&l, &s->bytes_total, r);
}

/*
 * The volume's image (v->st, mh_vol_image) first; then, once the path's mount is known,
 * whether a loop device of ours backs it (v->loop): the device a file system
 * mounted there names, one look at it; only if that is not the volume's, a
 * look at every device, as mh_vol_lookup. The reader keeps no loop records,
 * so the answer for a healthy volume costs no look at the machine's other
 * devices (nor holds any of them open a moment).
 */
static int vol_loop(struct mh_vol *v, const struct mh_mnt *m, struct mh_res *r)
{
	int nr = m->mounted ? mh_loop_nr_of(m->source, "/dev/loop") : -1;
	int found = nr >= 0 ? mh_loop_bound(nr, v->st.st_dev, v->st.st_ino, false, &v->loop) : 0;
	if (found != 1 && m->mounted)
		found = mh_loop_find(v->st.st_dev, v->st.st_ino, false, &v->loop, 1, r);
	v->attached = found == 1;
	return found < 0 ? -1 : 0;
}

int mh_answer_stats(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                    struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_stats *q = &req->u.stats;
	struct mh_vol v = {0};
	struct mh_at at = {.dir = -1}, sub = {.dir = -1};
	struct mh_mnt m;
	struct stat st;
	int fd = -1, ret = -1;
	bool block = (q->flags & MH_F_BLOCK) != 0;
	if (mh_vol_image(c, q->volume_id, &v, r) < 0 ||
	    mh_at_open(c, q->path, POL_STAGING | POL_TARGET, &at, r) < 0)
		return -1;
	/* A block staging directory holds the device file "dev"; a target is the file itself. */
	const struct mh_at *where = &at;
	if (block && (fd = mh_at_look(&at, &st, r)) >= 0 && S_ISDIR(st.st_mode)) {
		mh_closep(&fd);
		if (mh_at_descend(&at, "dev", &sub, r) < 0)
			goto out;
		where = &sub;
	}
	mh_closep(&fd);
	/*
	 * O_PATH: statvfs and the mount's look need no more, and nothing of the
	 * volume is opened for reading (the reader may list no directory there).
	 * A file system's root is a directory; a block target may be a file.
	 */
	if (r->kind == MH_E_OK)
		fd = mh_at_child(where, O_PATH | (block ? 0 : O_DIRECTORY), r);
	if (fd < 0) {
		if (r->kind == MH_E_REFUSED && r->sys_errno == ENOTDIR) /* a file, not a mount */
			mh_refail(r, MH_E_NOTFOUND, ENOTDIR, "not a sepcsi mount of this volume");
		if (r->sys_errno == EIO) {       /* a shut-down file system cannot even be opened */
			*r = (struct mh_res){0}; /* an answer: abnormal, below */
			abnormal(&ans->u.stats_ans, "file system does not answer: I/O error");
			a->note = ans->u.stats_ans.message;
			ret = 0;
		}
		goto out;
	}
	/* A raw block volume's device is proved by its node (block_stats), not looked up. */
	if (mh_mount_info(fd, &m, r) < 0 || (!block && vol_loop(&v, &m, r) < 0))
		goto out;
	ret = block ? block_stats(&v, &m, &ans->u.stats_ans, r)
	            : fs_stats(&v, fd, &m, &ans->u.stats_ans, r);
	if (ret == 0 && ans->u.stats_ans.abnormal)
		a->note = ans->u.stats_ans.message;
out:
	mh_closep(&fd);
	mh_at_close(&sub);
	mh_at_close(&at);
	return ret;
}

void mh_stats_fields(const struct mh_msg *q, struct mh_fields *f)
{
	f->a = (struct mh_audit){.volume_id = q->u.stats.volume_id, .path = q->u.stats.path};
	f->flags = q->u.stats.flags;
}
