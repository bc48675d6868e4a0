/*
 * Directory volumes' project quotas: a project of its own for each volume's
 * directory, inherited by all made in it, with a hard limit of the volume's
 * size, on bases whose file system keeps project quotas (xfs prjquota, ext4
 * project+quota); elsewhere a directory volume's size is advisory.
 *
 * Which project is a volume's is the helper's own record, never what the
 * volume's files say: in the initial user namespace the owner of a file may
 * give it any project id (FS_IOC_FSSETXATTR), the volume's root directory
 * included, so a tenant could point the helper at another volume's project,
 * whose limit DIR_EXPAND would raise and DIR_DELETE clear. The record is
 * trusted.sepcsi.project on the volume's directory, set when the project is
 * given, and only CAP_SYS_ADMIN can set or change it. (The same rule lets a
 * file's owner move it out of its volume's project and past its limit: a
 * project quota bounds only pods that run in a user namespace of their own;
 * docs/security.md.)
 *
 * Runs in a helper worker (DIR_STATS and DIR_CAPACITY: the main loop) as
 * root with CAP_SYS_ADMIN (quotactl on another project, and setting one's
 * limit), under seccomp. Nothing here is fatal.
 */
#include "mh_quota.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef PRJQUOTA
#define PRJQUOTA 2
#endif

#define QUOTA_UNIT    1024u /* the block limits of struct dqblk count KiB */
#define PROJECT_XATTR "trusted.sepcsi.project"

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

/* The project the helper recorded for the volume directory fd: 0, or -1 if none. */
static int projid_recorded(int fd, uint32_t *id)
{
	char buf[16], *end;
	ssize_t n = fgetxattr(fd, PROJECT_XATTR, buf, sizeof(buf) - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	unsigned long v = strtoul(buf, &end, 10);
	if (n == 0 || *end || v == 0 || v > UINT32_MAX) {
		errno = EINVAL;
		return -1;
	}
	*id = (uint32_t)v;
	return 0;
}

#define PROJID_TRIES 64u

/* The i-th project id a volume may be given: from a hash of its id. */
static uint32_t projid_cand(const char *volume_id, uint32_t i)
{
	uint32_t h = 2166136261u;
	for (const char *s = volume_id; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return 0x10000u + (h + i) % 0x7ffe0000u;
}

/* A project id no directory uses yet: of the volume's candidates, the first free one. */
static int projid_pick(int base, const char *volume_id, uint32_t *id, struct mh_res *r)
{
	for (uint32_t i = 0; i < PROJID_TRIES; i++) {
		struct dqblk q;
		uint32_t cand = projid_cand(volume_id, i);
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
	/* Safety: the record, on the directory still in the work area, before it has a name. */
	char rec[16];
	snprintf(rec, sizeof(rec), "%" PRIu32, id);
	if (fsetxattr(fd, PROJECT_XATTR, rec, strlen(rec), XATTR_CREATE) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "record the project: %s", strerror(errno));
	return mh_quota_set(base, id, bytes, r);
}

/*
 * The project of a volume directory made before the record was kept: the one
 * its root says, only if it is one of the volume's own candidates (what a
 * helper then could have given it) and has a limit. A tenant may set its
 * root's project to any id, but of these only to one its own volume could
 * have; two volumes share a candidate only if their hashes fall within
 * PROJID_TRIES of each other. Recorded where the base is writable.
 */
static int projid_legacy(int fd, const char *volume_id, uint32_t *id, struct dqblk *q, int base)
{
	struct fsxattr x;
	if (ioctl(fd, FS_IOC_FSGETXATTR, &x) < 0)
		return -1;
	for (uint32_t i = 0; i < PROJID_TRIES; i++) {
		if (x.fsx_projid != projid_cand(volume_id, i))
			continue;
		if (quotactl_fd(base, Q_GETQUOTA, x.fsx_projid, q) < 0 || q->dqb_bhardlimit == 0)
			return -1;
		char rec[16];
		snprintf(rec, sizeof(rec), "%" PRIu32, x.fsx_projid);
		(void)fsetxattr(fd, PROJECT_XATTR, rec, strlen(rec), XATTR_CREATE);
		*id = x.fsx_projid;
		return 0;
	}
	return -1;
}

/*
 * The quota of volume volume_id's directory fd: the project the helper
 * recorded for it (*id) and its limit in *bytes (0: none). A directory
 * without a record has none, unless it was made before the record was kept
 * (projid_legacy), or on a base without quotas.
 */
int mh_quota_of(int base, int fd, const char *volume_id, uint32_t *id, uint64_t *bytes,
                struct dqblk *q)
{
	*id = 0;
	*bytes = 0;
	if (!mh_quota_on(base))
		return -1;
	if (projid_recorded(fd, id) < 0) {
		if (errno != ENODATA || projid_legacy(fd, volume_id, id, q, base) < 0)
			return -1;
	} else if (quotactl_fd(base, Q_GETQUOTA, *id, q) < 0) {
		return -1;
	}
	*bytes = (uint64_t)q->dqb_bhardlimit * QUOTA_UNIT;
	return 0;
}
