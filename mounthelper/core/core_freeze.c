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
 * freeze_max_seconds. A thread of its own keeps the deadlines, whatever
 * request the core is in: a request can take as long as an image's owner
 * likes (a mount of an ext4 whose MMP block says another node uses it sleeps
 * in the mounting thread; a crafted journal keeps the kernel busy for
 * minutes, past any signal: a hostile review, 2026-12-05), and a deadline kept
 * between requests waited for it. That thread does nothing but wait, FITHAW,
 * close and log, under the same filter (started before it: TSYNC). The core
 * thaws everything when the channel ends or a signal stops it, and a core
 * killed with something frozen is followed by one that thaws it at start
 * (mh_sweep.c). THAW thaws only what this core froze; at most FROZEN_MAX at
 * once.
 */
#include "core.h"

#include <errno.h>
#include <linux/fs.h>
#include <pthread.h>
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

/* The table is the two threads'; a thaw is done holding it, nothing slower. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

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
	if (core_frozen(q->volume_id))
		return mh_fail(r, MH_E_BUSY, EBUSY, "the volume is frozen already");
	/* Its write-back holds the file system: a freeze now would outlast its deadline. */
	if (core_flush_holds(q->volume_id))
		return mh_fail(r, MH_E_BUSY, EINPROGRESS, "a FLUSH of the volume is not done yet");
	pthread_mutex_lock(&lock);
	struct frozen *f = slot_of(""); /* only this thread takes one: free now, free later */
	pthread_mutex_unlock(&lock);
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
	int64_t until = mono_ms() + 1000LL * s; /* from the freeze, not from the lock's wait */
	pthread_mutex_lock(&lock);
	snprintf(f->id, sizeof(f->id), "%s", q->volume_id);
	f->fd = fd;
	f->until_ms = until;
	pthread_cond_signal(&changed);
	pthread_mutex_unlock(&lock);
	a->note = "frozen until THAW or its deadline";
	return 0;
}

int core_answer_thaw(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	(void)c, (void)ans, (void)r;
	if (!core_thaw_volume(req->u.del.volume_id, "THAW"))
		a->note = "not frozen by the core"; /* ran out, or never was: nothing to do */
	return 0;
}

bool core_frozen(const char *volume_id)
{
	pthread_mutex_lock(&lock);
	bool found = volume_id[0] && slot_of(volume_id) != NULL; /* "" names the free slots */
	pthread_mutex_unlock(&lock);
	return found;
}

bool core_thaw_volume(const char *volume_id, const char *why)
{
	pthread_mutex_lock(&lock);
	struct frozen *f = volume_id[0] ? slot_of(volume_id) : NULL;
	if (f)
		thaw_slot(f, why);
	pthread_mutex_unlock(&lock);
	return f != NULL;
}

/* Thaw what has run out (all: everything); the nearest deadline left, -1 if none. */
static int64_t expire(bool all)
{
	int64_t now = mono_ms(), next = -1;
	for (size_t i = 0; i < FROZEN_MAX; i++) {
		if (frozen[i].id[0] && (all || frozen[i].until_ms <= now))
			thaw_slot(&frozen[i], all ? "the core is ending" : "its deadline passed");
		else if (frozen[i].id[0] && (next < 0 || frozen[i].until_ms < next))
			next = frozen[i].until_ms;
	}
	return next;
}

static bool started; /* the thread has run: the C library set it up (rseq...) before */

/* The deadlines' thread: asleep until the nearest one, or until a freeze is added. */
static void *keep_deadlines(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	started = true;
	pthread_cond_broadcast(&changed);
	for (;;) {
		int64_t next = expire(false);
		struct timespec at = {.tv_sec = next / 1000, .tv_nsec = next % 1000 * 1000000L};
		if (next < 0)
			pthread_cond_wait(&changed, &lock);
		else
			pthread_cond_clockwait(&changed, &lock, CLOCK_MONOTONIC, &at);
	}
	return NULL;
}

int core_freeze_init(void)
{
	pthread_t t;
	/* It takes the caller's mask: SIGTERM and SIGINT blocked, the main thread's to take. */
	int err = pthread_create(&t, NULL, keep_deadlines, NULL);
	/* Its first calls are not in the filter that follows: it is loaded once they are made. */
	pthread_mutex_lock(&lock);
	while (!err && !started)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
	errno = err;
	return err ? -1 : 0;
}

void core_thaw_all(void)
{
	pthread_mutex_lock(&lock);
	expire(true);
	pthread_mutex_unlock(&lock);
}
