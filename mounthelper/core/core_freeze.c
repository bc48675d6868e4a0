/*
 * FREEZE and THAW, the core's own rows, for the orchestrating side's copies
 * (a snapshot or clone of a volume in use): one point in time, without
 * trusting the orchestrator to ever come back.
 *
 * Runs in sepcsi-core as root with CAP_SYS_ADMIN under seccomp. Nothing here
 * is fatal.
 *
 * Safety argument. FREEZE acts only on the file system mounted from the loop
 * device the core attached to this volume's image (mh_vol_lookup, then
 * mh_mount_fs_fd: a detached clone of that mount, never a path), so no other
 * file system can be frozen. Every freeze has a deadline the core keeps
 * itself: the request's seconds, never more than the policy's
 * freeze_max_seconds. The loop thaws what has run out before it reads the
 * next request and wakes for it when idle (core_main.c), thaws everything
 * when the channel ends or a signal stops it, and a core killed with
 * something frozen is followed by one that thaws it at start (mh_sweep.c).
 * THAW thaws only what this core froze; at most FROZEN_MAX at once.
 */
#include "core.h"

#include <errno.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mh_common.h"

#define FROZEN_MAX 64

static struct frozen {
	char id[MH_ID_MAX + 1]; /* "" when the slot is free */
	int fd;                 /* the detached mount FIFREEZE was given */
	int64_t until_ms;
} frozen[FROZEN_MAX];

static struct frozen *slot_of(const char *id)
{
	for (size_t i = 0; i < FROZEN_MAX; i++)
		if (strcmp(frozen[i].id, id) == 0)
			return &frozen[i];
	return NULL;
}

static void thaw_slot(struct frozen *f, const char *why)
{
	if (ioctl(f->fd, FITHAW, 0) < 0 && errno != EINVAL)
		log_kv(LOG_LVL_ERROR, "thaw_failed", "volume_id", f->id, "error", strerror(errno),
		       NULL);
	else
		log_kv(LOG_LVL_INFO, "thawed", "volume_id", f->id, "why", why, NULL);
	close(f->fd);
	f->id[0] = '\0';
}

int core_answer_freeze(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                       struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_freeze *q = &req->u.freeze;
	struct mh_vol v = {0};
	(void)ans;
	if (q->seconds == 0 || q->seconds > MH_FREEZE_MAX_S)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "seconds must be 1 to %d", MH_FREEZE_MAX_S);
	if (slot_of(q->volume_id))
		return mh_fail(r, MH_E_BUSY, EBUSY, "the volume is frozen already");
	/* Its write-back holds the file system: a freeze now would outlast its deadline. */
	if (core_flush_holds(q->volume_id))
		return mh_fail(r, MH_E_BUSY, EINPROGRESS, "a FLUSH of the volume is not done yet");
	struct frozen *f = slot_of("");
	if (!f)
		return mh_fail(r, MH_E_BUSY, EAGAIN, "%d volumes are frozen already", FROZEN_MAX);
	if (mh_vol_lookup(c, q->volume_id, &v, r) < 0)
		return -1;
	int fd = v.attached ? mh_mount_fs_fd(&v.loop, r) : -1;
	if (fd < 0) {
		if (r->kind == MH_E_OK)
			mh_fail(r, MH_E_PRECONDITION, 0, "the volume has no mounted file system");
		return -1;
	}
	if (ioctl(fd, FIFREEZE, 0) < 0) {
		int err = errno;
		close(fd);
		if (err == EBUSY)
			return mh_fail(r, MH_E_BUSY, err, "the file system is frozen already");
		return mh_fail(r, MH_E_FAILED, err, "FIFREEZE: %s", strerror(err));
	}
	unsigned s = q->seconds < pol_freeze_max_seconds(c->pol) ? q->seconds
	                                                         : pol_freeze_max_seconds(c->pol);
	snprintf(f->id, sizeof(f->id), "%s", q->volume_id);
	f->fd = fd;
	f->until_ms = mono_ms() + 1000LL * s;
	a->note = "frozen until THAW or its deadline";
	return 0;
}

int core_answer_thaw(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	struct frozen *f = slot_of(req->u.del.volume_id);
	(void)c, (void)ans, (void)r;
	if (!f)
		a->note = "not frozen by the core"; /* ran out, or never was: nothing to do */
	else
		thaw_slot(f, "THAW");
	return 0;
}

bool core_frozen(const char *volume_id)
{
	return volume_id[0] && slot_of(volume_id) != NULL; /* "" names the free slots */
}

void core_thaw_volume(const char *volume_id, const char *why)
{
	struct frozen *f = volume_id[0] ? slot_of(volume_id) : NULL;
	if (f)
		thaw_slot(f, why);
}

int core_freeze_wait_ms(void)
{
	int64_t now = mono_ms(), wait = -1;
	for (size_t i = 0; i < FROZEN_MAX; i++) {
		if (!frozen[i].id[0])
			continue;
		int64_t left = frozen[i].until_ms > now ? frozen[i].until_ms - now : 0;
		if (wait < 0 || left < wait)
			wait = left;
	}
	return (int)wait;
}

void core_freeze_expire(bool all)
{
	int64_t now = mono_ms();
	for (size_t i = 0; i < FROZEN_MAX; i++)
		if (frozen[i].id[0] && (all || frozen[i].until_ms <= now))
			thaw_slot(&frozen[i], all ? "the core is ending" : "its deadline passed");
}
