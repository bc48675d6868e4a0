/*
 * The supervisor's per-child state machine: states x events -> next state and
 * one action for the caller to carry out. Pure: no system calls, time is an
 * argument, so every transition and the whole restart policy are unit-tested.
 * The table itself is printed at the top of sup_state.c.
 */
#ifndef SEPCSI_SUP_STATE_H
#define SEPCSI_SUP_STATE_H

#include "sup_config.h"

#include <stdbool.h>
#include <stdint.h>

enum sup_state {
	SUP_ST_STOPPED = 0, /* not running, not to be restarted (initial, or stopped) */
	SUP_ST_STARTING,    /* spawned, READY not yet received */
	SUP_ST_RUNNING,     /* READY received */
	SUP_ST_BACKOFF,     /* dead; restart due at restart_at_ms */
	SUP_ST_FAILED,      /* given up: never restarted again */
};

enum sup_event {
	SUP_EV_SPAWNED = 0, /* the caller forked the child */
	SUP_EV_READY,       /* the child sent SUP_CTL_READY */
	SUP_EV_EXITED,      /* the child was reaped; wstatus says how */
	SUP_EV_TIMER,       /* the clock passed sup_sm_deadline() */
	SUP_EV_STOP,        /* the supervisor is stopping: no more restarts */
	SUP_EV_ACCUSED,     /* its peer reported a protocol violation on their channel */
};

enum sup_action {
	SUP_ACT_NONE = 0,
	SUP_ACT_SPAWN,   /* spawn the child now, then send SUP_EV_SPAWNED */
	SUP_ACT_BACKOFF, /* entered BACKOFF: log the delay, wait for the timer */
	SUP_ACT_GIVE_UP, /* entered FAILED: log why at level error, stop the supervisor */
	SUP_ACT_STOPPED, /* entered STOPPED after a stop was requested */
	SUP_ACT_KILL,    /* READY twice, none in time, or accused: SIGKILL it (kill_reason) */
	SUP_ACT_BUG,     /* this event cannot happen in this state: a supervisor bug */
};

/* Restart policy; the same for both children except sigsys_fatal. */
struct sup_policy {
	unsigned limit;           /* this many deaths within window_ms => FAILED */
	int64_t window_ms;        /* length of the death-counting window */
	int64_t ready_timeout_ms; /* no READY this long after the spawn => KILL */
	bool sigsys_fatal;        /* death by SIGSYS (a seccomp kill) => FAILED at once */
};

/* The longest restart delay: the last entry of the table in sup_backoff_ms(). */
#define SUP_BACKOFF_MAX_MS 1000

/* Why a child entered FAILED. */
enum sup_failure {
	SUP_FAIL_NONE = 0,
	SUP_FAIL_SIGSYS, /* killed by SIGSYS with sigsys_fatal: seccomp caught it */
	SUP_FAIL_LIMIT,  /* ndeaths reached the policy's limit within the window */
};

struct sup_sm {
	enum sup_state state;
	bool stop_requested;
	int64_t restart_at_ms; /* valid in BACKOFF */
	int64_t ready_by_ms;   /* valid in STARTING; INT64_MAX once the child was killed */
	/* Deaths inside the window, oldest first; a death before READY is two entries. */
	unsigned ndeaths;
	int64_t deaths[SUP_RESTART_LIMIT_MAX + 1];
	/* Why it entered FAILED; SUP_FAIL_NONE until it does. */
	enum sup_failure failure;
	/* Why the last SUP_ACT_KILL was asked for, for the log. */
	const char *kill_reason;
};

void sup_sm_init(struct sup_sm *sm);

/*
 * Apply one event. now_ms is a monotonic clock; wstatus is the waitpid()
 * status for SUP_EV_EXITED and ignored otherwise.
 */
enum sup_action sup_sm_step(struct sup_sm *sm, const struct sup_policy *pol, enum sup_event ev,
                            int64_t now_ms, int wstatus);

/*
 * Restart delay after n deaths in the window (n >= 1): 0, 250, 500, then
 * SUP_BACKOFF_MAX_MS (1000 ms) for every further death.
 */
int64_t sup_backoff_ms(unsigned n);

/*
 * When this child next needs a SUP_EV_TIMER: the restart in BACKOFF, the
 * ready deadline in STARTING; INT64_MAX for none.
 */
int64_t sup_sm_deadline(const struct sup_sm *sm);

/*
 * True if, under pol, a child that never reports READY ends in FAILED (found
 * by running this state machine); false if the ready timeout is so long that
 * its deaths never pile up within the window, and it would be restarted for
 * ever. The supervisor warns about the latter at start.
 */
bool sup_policy_fails_hung_child(const struct sup_policy *pol);

/* True while a process exists for this child (STARTING or RUNNING). */
bool sup_sm_alive(const struct sup_sm *sm);

const char *sup_state_name(enum sup_state s);
const char *sup_event_name(enum sup_event e);

#endif
