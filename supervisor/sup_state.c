/*
 * The whole supervision policy for one child, as a state machine. Runs in the
 * supervisor (root) but makes no system call: the caller feeds events with the
 * time and carries out the returned action (sup_main.c). Nothing here is
 * fatal; an event that cannot happen in a state returns SUP_ACT_BUG and the
 * caller stops.
 *
 *              SPAWNED    READY      EXITED            TIMER           STOP
 *   STOPPED    STARTING   bug        bug               -               -
 *   STARTING   bug        RUNNING    death, weight 2   -               no restarts
 *   RUNNING    bug        KILL       death, weight 1   -               no restarts
 *   BACKOFF    STARTING   bug        bug               if due: SPAWN   STOPPED
 *   FAILED     bug        bug        bug               -               -
 *
 *   death:  a stop was requested             -> STOPPED
 *           killed by SIGSYS (sigsys_fatal)  -> FAILED  (seccomp caught it)
 *           deaths in window >= limit        -> FAILED
 *           otherwise                        -> BACKOFF for sup_backoff_ms(deaths)
 *
 * Deaths are remembered with their time; those older than the window are
 * forgotten. A child that dies before READY did no work, so its death counts
 * twice (Postfix throttles such a child the same way). The restart delay is
 * derived from the same tally: the first death in a window restarts at once,
 * each further one waits twice as long as the last, capped. A child that
 * stays up longer than the window starts over with a clean record.
 */
#include "sup_state.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

void sup_sm_init(struct sup_sm *sm)
{
	memset(sm, 0, sizeof(*sm));
	sm->state = SUP_ST_STOPPED;
}

int64_t sup_backoff_ms(unsigned n)
{
	if (n <= 1)
		return 0;
	if (n - 2 >= 6) /* 250 << 6 is past the cap already */
		return SUP_BACKOFF_MAX_MS;
	int64_t d = (int64_t)SUP_BACKOFF_STEP_MS << (n - 2);
	return d < SUP_BACKOFF_MAX_MS ? d : SUP_BACKOFF_MAX_MS;
}

bool sup_sm_alive(const struct sup_sm *sm)
{
	return sm->state == SUP_ST_STARTING || sm->state == SUP_ST_RUNNING;
}

/* Forget deaths that fell out of the window, then record this one. */
static void tally(struct sup_sm *sm, const struct sup_policy *pol, int64_t now, unsigned weight)
{
	const unsigned cap = sizeof(sm->deaths) / sizeof(sm->deaths[0]);
	unsigned keep = 0;

	for (unsigned i = 0; i < sm->ndeaths; i++)
		if (sm->deaths[i] > now - pol->window_ms)
			sm->deaths[keep++] = sm->deaths[i];
	sm->ndeaths = keep;
	for (unsigned i = 0; i < weight; i++) {
		if (sm->ndeaths == cap) { /* full means past any limit; drop the oldest */
			memmove(sm->deaths, sm->deaths + 1, (cap - 1) * sizeof(sm->deaths[0]));
			sm->ndeaths--;
		}
		sm->deaths[sm->ndeaths++] = now;
	}
}

static enum sup_action death(struct sup_sm *sm, const struct sup_policy *pol, int64_t now,
                             int wstatus, unsigned weight)
{
	if (sm->stop_requested) {
		sm->state = SUP_ST_STOPPED;
		return SUP_ACT_STOPPED;
	}
	tally(sm, pol, now, weight);
	if (pol->sigsys_fatal && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGSYS) {
		sm->state = SUP_ST_FAILED;
		sm->failed_reason = "killed by SIGSYS: a syscall outside its seccomp allowlist";
		return SUP_ACT_GIVE_UP;
	}
	if (sm->ndeaths >= pol->limit) {
		sm->state = SUP_ST_FAILED;
		sm->failed_reason = "died too often within the restart window";
		return SUP_ACT_GIVE_UP;
	}
	sm->state = SUP_ST_BACKOFF;
	sm->restart_at_ms = now + sup_backoff_ms(sm->ndeaths);
	return SUP_ACT_BACKOFF;
}

enum sup_action sup_sm_step(struct sup_sm *sm, const struct sup_policy *pol, enum sup_event ev,
                            int64_t now_ms, int wstatus)
{
	const enum sup_state st = sm->state;

	switch (ev) {
	case SUP_EV_SPAWNED:
		if ((st != SUP_ST_STOPPED && st != SUP_ST_BACKOFF) || sm->stop_requested)
			return SUP_ACT_BUG;
		sm->state = SUP_ST_STARTING;
		return SUP_ACT_NONE;
	case SUP_EV_READY:
		if (st == SUP_ST_RUNNING)
			return SUP_ACT_KILL; /* READY twice: the child breaks the protocol */
		if (st != SUP_ST_STARTING)
			return SUP_ACT_BUG; /* a dead child's channel is closed at once */
		sm->state = SUP_ST_RUNNING;
		return SUP_ACT_NONE;
	case SUP_EV_EXITED:
		if (!sup_sm_alive(sm))
			return SUP_ACT_BUG;
		return death(sm, pol, now_ms, wstatus, st == SUP_ST_STARTING ? 2 : 1);
	case SUP_EV_TIMER:
		if (st == SUP_ST_BACKOFF && now_ms >= sm->restart_at_ms)
			return SUP_ACT_SPAWN;
		return SUP_ACT_NONE;
	case SUP_EV_STOP:
		sm->stop_requested = true;
		if (st == SUP_ST_BACKOFF) {
			sm->state = SUP_ST_STOPPED;
			return SUP_ACT_STOPPED;
		}
		return SUP_ACT_NONE;
	}
	return SUP_ACT_BUG;
}

const char *sup_state_name(enum sup_state s)
{
	static const char *const names[] = {"STOPPED", "STARTING", "RUNNING", "BACKOFF", "FAILED"};
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

const char *sup_event_name(enum sup_event e)
{
	static const char *const names[] = {"spawned", "ready", "exited", "timer", "stop"};
	return (unsigned)e < sizeof(names) / sizeof(names[0]) ? names[e] : "?";
}
