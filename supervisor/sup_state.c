/*
 * The whole supervision policy for one child, as a state machine. Runs in the
 * supervisor (root) but makes no system call: the caller feeds events with the
 * time and carries out the returned action (sup_child.c). Nothing here is
 * fatal; an event that cannot happen in a state returns SUP_ACT_BUG and the
 * caller stops.
 *
 *              SPAWNED    READY      EXITED            TIMER             STOP         ACCUSED
 *   STOPPED    STARTING   bug        bug               -                 -            -
 *   STARTING   bug        RUNNING    death, weight 2   if overdue: KILL  no restarts  KILL
 *   RUNNING    bug        KILL       death, weight 1   -                 no restarts  KILL
 *   BACKOFF    STARTING   bug        bug               if due: SPAWN     STOPPED      -
 *   FAILED     bug        bug        bug               -                 -            -
 *
 *   death:  a stop was requested             -> STOPPED
 *           killed by SIGSYS (sigsys_fatal)  -> FAILED  (seccomp caught it)
 *           deaths in window >= limit        -> FAILED
 *           otherwise                        -> BACKOFF for sup_backoff_ms(deaths)
 *   overdue: no READY within ready_timeout_ms of the spawn, and no stop
 *           requested (the stop has its own timeout); asked once per spawn.
 *   accused: the other child reported that this one broke the protocol of
 *           their channel (the helper about rpcd). A live child is killed and
 *           its death is counted like any other; a dead one has nothing left
 *           to kill (its death was counted when it was reaped).
 *
 * Deaths are remembered with their time; those older than the window are
 * forgotten. A child that dies before READY did no work, so its death counts
 * twice (Postfix throttles such a child the same way); one that never gets
 * READY is killed at the deadline and so dies before READY. The restart delay
 * is derived from the same tally: the first death in a window restarts at
 * once, the next ones wait 250 ms, 500 ms, then 1 s each (sup_backoff_ms()).
 * A child that stays up longer than the window starts over with a clean
 * record. FAILED is final, and the caller answers it by stopping the whole
 * supervisor (sup_child.c), so that the orchestrator restarts the driver.
 */
#include "sup_state.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

void sup_sm_init(struct sup_sm *sm)
{
	memset(sm, 0, sizeof(*sm));
	sm->state = SUP_ST_STOPPED;
	sm->ready_by_ms = INT64_MAX;
}

/*
 * Short on purpose: the backoff only spaces out the restarts of a child that
 * keeps dying; the restart limit is what ends such a loop (and then the whole
 * driver exits and the orchestrator's own, longer backoff takes over). Every
 * millisecond waited here is a millisecond in which nothing serves, so the
 * first death restarts at once and no wait exceeds one second.
 */
int64_t sup_backoff_ms(unsigned n)
{
	/* Indexed by deaths in the window - 1; the last entry holds for any more. */
	static const int64_t table[] = {0, 250, 500, SUP_BACKOFF_MAX_MS};
	const unsigned last = sizeof(table) / sizeof(table[0]) - 1;
	const unsigned i = n > 0 ? n - 1 : 0;

	return table[i < last ? i : last];
}

int64_t sup_sm_deadline(const struct sup_sm *sm)
{
	if (sm->state == SUP_ST_BACKOFF)
		return sm->restart_at_ms;
	if (sm->state == SUP_ST_STARTING && !sm->stop_requested)
		return sm->ready_by_ms;
	return INT64_MAX;
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
		sm->failure = SUP_FAIL_SIGSYS;
		return SUP_ACT_GIVE_UP;
	}
	if (sm->ndeaths >= pol->limit) {
		sm->state = SUP_ST_FAILED;
		sm->failure = SUP_FAIL_LIMIT;
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
		sm->ready_by_ms =
		    pol->ready_timeout_ms > 0 && now_ms <= INT64_MAX - pol->ready_timeout_ms
		        ? now_ms + pol->ready_timeout_ms
		        : INT64_MAX;
		return SUP_ACT_NONE;
	case SUP_EV_READY:
		if (st == SUP_ST_RUNNING) {
			sm->kill_reason = "protocol violation: READY sent twice";
			return SUP_ACT_KILL;
		}
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
		if (st == SUP_ST_STARTING && !sm->stop_requested && now_ms >= sm->ready_by_ms) {
			sm->ready_by_ms = INT64_MAX; /* one kill; its death comes as EXITED */
			sm->kill_reason = "no READY within the ready timeout";
			return SUP_ACT_KILL;
		}
		return SUP_ACT_NONE;
	case SUP_EV_ACCUSED:
		if (!sup_sm_alive(sm))
			return SUP_ACT_NONE;
		sm->kill_reason = "its peer reported a protocol violation on their channel";
		return SUP_ACT_KILL;
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

bool sup_policy_fails_hung_child(const struct sup_policy *pol)
{
	struct sup_sm sm;
	int64_t t = 0;

	if (pol->ready_timeout_ms <= 0)
		return false;
	sup_sm_init(&sm);
	/* Every cycle adds two deaths; past limit cycles the tally is in its steady state. */
	for (unsigned i = 0; i <= pol->limit; i++) {
		if (sup_sm_step(&sm, pol, SUP_EV_SPAWNED, t, 0) != SUP_ACT_NONE)
			return false;
		t = sm.ready_by_ms;
		if (sup_sm_step(&sm, pol, SUP_EV_TIMER, t, 0) != SUP_ACT_KILL)
			return false;
		switch (sup_sm_step(&sm, pol, SUP_EV_EXITED, t, W_EXITCODE(0, SIGKILL))) {
		case SUP_ACT_GIVE_UP:
			return true;
		case SUP_ACT_BACKOFF:
			t = sm.restart_at_ms;
			if (sup_sm_step(&sm, pol, SUP_EV_TIMER, t, 0) != SUP_ACT_SPAWN)
				return false;
			break;
		default:
			return false;
		}
	}
	return false;
}

const char *sup_state_name(enum sup_state s)
{
	static const char *const names[] = {"STOPPED", "STARTING", "RUNNING", "BACKOFF", "FAILED"};
	return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

const char *sup_event_name(enum sup_event e)
{
	static const char *const names[] = {"spawned", "ready", "exited",
	                                    "timer",   "stop",  "accused"};
	return (unsigned)e < sizeof(names) / sizeof(names[0]) ? names[e] : "?";
}
