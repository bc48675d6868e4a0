/*
 * Directory volumes' project quotas: a project of its own for each volume's
 * directory, inherited by all made in it, with a hard limit of the volume's
 * size, on bases whose file system keeps project quotas (xfs prjquota, ext4
 * project+quota); elsewhere a directory volume's size is advisory.
 *
 * Runs in a helper worker (DIR_STATS and DIR_CAPACITY: the main loop) as
 * root with CAP_SYS_ADMIN (quotactl on another project, and setting one's
 * limit), under seccomp. Nothing here is fatal.
 */
#include "mh_quota.h"

#include <errno.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif

#define QUOTA_UNIT 1024u /* the block limits of struct dqblk count KiB */

/* QCMD(cmd, PRJQUOTA), shifted unsigned: the commands' top bit would overflow an int. */
static long quotactl_fd(int fd, unsigned cmd, uint32_t id, void *addr)
{
	return syscall(SYS_quotactl_fd, fd, (cmd << SUBCMDSHIFT) | PRJQUOTA, id, addr);
}

/* Does the base's file system keep project quotas (xfs prjquota, ext4 project+quota)? */
bool mh_quota_on(int base)
{
	struct dqinfo info;
	return quotactl_fd(base, Q_GETINFO, 0, &info) == 0;
}

static int projid_of(int fd, uint32_t *id)
{
	struct fsxattr x;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &x) < 0)
		return -1;
	*id = x.fsx_projid;
	return 0;
}

/* A project id no directory uses yet: from a hash of the volume id, the first free one. */
static int projid_pick(int base, const char *volume_id, uint32_t *id, struct mh_res *r)
{
	uint32_t h = 2166136261u;
	for (const char *s = volume_id; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	for (uint32_t i = 0; i < 64; i++) {
		struct dqblk q;
		uint32_t cand = 0x10000u + (h + i) % 0x7ffe0000u;
		if (quotactl_fd(base, Q_GETQUOTA, cand, &q) < 0
		        ? errno == ENOENT || errno == ESRCH
		        : q.dqb_bhardlimit == 0 && q.dqb_ihardlimit == 0 && q.dqb_curspace == 0 &&
		              q.dqb_curinodes == 0) {
			*id = cand;
			return 0;
		}
	}
	return mh_fail(r, MH_E_FAILED, EEXIST, "no free project id");
}

int mh_quota_set(int base, uint32_t id, uint64_t bytes, struct mh_res *r)
{
	struct dqblk q = {.dqb_bhardlimit = (bytes + QUOTA_UNIT - 1) / QUOTA_UNIT,
	                  .dqb_valid = QIF_BLIMITS};
	if (quotactl_fd(base, Q_SETQUOTA, id, &q) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "set the project quota: %s", strerror(errno));
	return 0;
}

/* Give the new directory fd its own project, inherited by all made in it, limited to bytes. */
int mh_quota_start(int base, int fd, const char *volume_id, uint64_t bytes, struct mh_res *r)
{
	struct fsxattr x;
	uint32_t id = 0;
	if (projid_pick(base, volume_id, &id, r) < 0)
		return -1;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &x) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "read project: %s", strerror(errno));
	x.fsx_projid = id;
	x.fsx_xflags |= FS_XFLAG_PROJINHERIT;
	if (ioctl(fd, FS_IOC_FSSETXATTR, &x) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "set project: %s", strerror(errno));
	return mh_quota_set(base, id, bytes, r);
}

/* The quota of the volume directory fd: its project *id and limit in *bytes (0: none). */
int mh_quota_of(int base, int fd, uint32_t *id, uint64_t *bytes, struct dqblk *q)
{
	*id = 0;
	*bytes = 0;
	if (!mh_quota_on(base) || projid_of(fd, id) < 0 || *id == 0 ||
	    quotactl_fd(base, Q_GETQUOTA, *id, q) < 0)
		return -1;
	*bytes = (uint64_t)q->dqb_bhardlimit * QUOTA_UNIT;
	return 0;
}
