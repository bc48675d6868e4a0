/*
 * Unit test of the supervisor's state machine and restart policy
 * (supervisor/sup_state.c): every cell of the states x events table, the
 * backoff sequence (and its cap under a raised limit), the death tally and
 * its window, deaths before READY counting double, SIGSYS giving up at once,
 * stopping, and a child its peer accuses of a protocol violation.
 */
#include "sup_state.h"
#include "tap.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>

static const struct sup_policy pol = {
    .limit = 5, .window_ms = 60000, .ready_timeout_ms = 10000, .sigsys_fatal = true};

#define EXIT1         W_EXITCODE(1, 0)
#define SIGSYS_STATUS W_EXITCODE(0, SIGSYS)

static struct sup_sm in_state(enum sup_state st)
{
	struct sup_sm sm;
	sup_sm_init(&sm);
	sm.state = st;
	sm.restart_at_ms = 0; /* a BACKOFF here is due */
	sm.ready_by_ms = 0;   /* a STARTING here is overdue */
	return sm;
}

struct cell {
	enum sup_state from;
	enum sup_event ev;
	enum sup_state to;
	enum sup_action act;
};

/* The table printed at the top of sup_state.c, cell by cell. */
static const struct cell table[] = {
    {SUP_ST_STOPPED, SUP_EV_SPAWNED, SUP_ST_STARTING, SUP_ACT_NONE},
    {SUP_ST_STOPPED, SUP_EV_READY, SUP_ST_STOPPED, SUP_ACT_BUG},
    {SUP_ST_STOPPED, SUP_EV_EXITED, SUP_ST_STOPPED, SUP_ACT_BUG},
    {SUP_ST_STOPPED, SUP_EV_TIMER, SUP_ST_STOPPED, SUP_ACT_NONE},
    {SUP_ST_STOPPED, SUP_EV_STOP, SUP_ST_STOPPED, SUP_ACT_NONE},
    {SUP_ST_STOPPED, SUP_EV_ACCUSED, SUP_ST_STOPPED, SUP_ACT_NONE},

    {SUP_ST_STARTING, SUP_EV_SPAWNED, SUP_ST_STARTING, SUP_ACT_BUG},
    {SUP_ST_STARTING, SUP_EV_READY, SUP_ST_RUNNING, SUP_ACT_NONE},
    {SUP_ST_STARTING, SUP_EV_EXITED, SUP_ST_BACKOFF, SUP_ACT_BACKOFF},
    {SUP_ST_STARTING, SUP_EV_TIMER, SUP_ST_STARTING, SUP_ACT_KILL},
    {SUP_ST_STARTING, SUP_EV_STOP, SUP_ST_STARTING, SUP_ACT_NONE},
    {SUP_ST_STARTING, SUP_EV_ACCUSED, SUP_ST_STARTING, SUP_ACT_KILL},

    {SUP_ST_RUNNING, SUP_EV_SPAWNED, SUP_ST_RUNNING, SUP_ACT_BUG},
    {SUP_ST_RUNNING, SUP_EV_READY, SUP_ST_RUNNING, SUP_ACT_KILL},
    {SUP_ST_RUNNING, SUP_EV_EXITED, SUP_ST_BACKOFF, SUP_ACT_BACKOFF},
    {SUP_ST_RUNNING, SUP_EV_TIMER, SUP_ST_RUNNING, SUP_ACT_NONE},
    {SUP_ST_RUNNING, SUP_EV_STOP, SUP_ST_RUNNING, SUP_ACT_NONE},
    {SUP_ST_RUNNING, SUP_EV_ACCUSED, SUP_ST_RUNNING, SUP_ACT_KILL},

    {SUP_ST_BACKOFF, SUP_EV_SPAWNED, SUP_ST_STARTING, SUP_ACT_NONE},
    {SUP_ST_BACKOFF, SUP_EV_READY, SUP_ST_BACKOFF, SUP_ACT_BUG},
    {SUP_ST_BACKOFF, SUP_EV_EXITED, SUP_ST_BACKOFF, SUP_ACT_BUG},
    {SUP_ST_BACKOFF, SUP_EV_TIMER, SUP_ST_BACKOFF, SUP_ACT_SPAWN},
    {SUP_ST_BACKOFF, SUP_EV_STOP, SUP_ST_STOPPED, SUP_ACT_STOPPED},
    {SUP_ST_BACKOFF, SUP_EV_ACCUSED, SUP_ST_BACKOFF, SUP_ACT_NONE},

    {SUP_ST_FAILED, SUP_EV_SPAWNED, SUP_ST_FAILED, SUP_ACT_BUG},
    {SUP_ST_FAILED, SUP_EV_READY, SUP_ST_FAILED, SUP_ACT_BUG},
    {SUP_ST_FAILED, SUP_EV_EXITED, SUP_ST_FAILED, SUP_ACT_BUG},
    {SUP_ST_FAILED, SUP_EV_TIMER, SUP_ST_FAILED, SUP_ACT_NONE},
    {SUP_ST_FAILED, SUP_EV_STOP, SUP_ST_FAILED, SUP_ACT_NONE},
    {SUP_ST_FAILED, SUP_EV_ACCUSED, SUP_ST_FAILED, SUP_ACT_NONE},
};

static void test_table(void)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct cell *c = &table[i];
		struct sup_sm sm = in_state(c->from);
		enum sup_action a = sup_sm_step(&sm, &pol, c->ev, 1000, EXIT1);
		if (a != c->act || sm.state != c->to)
			fprintf(stderr, "cell %s x %s: got %s/%d\n", sup_state_name(c->from),
			        sup_event_name(c->ev), sup_state_name(sm.state), (int)a);
		CHECK(a == c->act);
		CHECK(sm.state == c->to);
	}
}

static void test_backoff_sequence(void)
{
	/* Deaths in the window -> delay: at once, then short steps, never over 1 s. */
	static const struct {
		unsigned deaths;
		int64_t ms;
	} want[] = {
	    {0, 0},    {1, 0},    {2, 250},    {3, 500},           {4, 1000},
	    {5, 1000}, {6, 1000}, {100, 1000}, {UINT32_MAX, 1000},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (sup_backoff_ms(want[i].deaths) != want[i].ms)
			fprintf(stderr, "backoff after %u deaths: %lld ms\n", want[i].deaths,
			        (long long)sup_backoff_ms(want[i].deaths));
		CHECK(sup_backoff_ms(want[i].deaths) == want[i].ms);
	}
	CHECK(SUP_BACKOFF_MAX_MS == 1000);
	/* Never shorter than the one before: more deaths never mean a quicker restart. */
	for (unsigned n = 1; n <= SUP_RESTART_LIMIT_MAX + 1; n++)
		CHECK(sup_backoff_ms(n) >= sup_backoff_ms(n - 1) &&
		      sup_backoff_ms(n) <= SUP_BACKOFF_MAX_MS);
}

/* Spawn and (optionally) get READY, at time t. */
static void start(struct sup_sm *sm, int64_t t, int ready)
{
	if (sm->state == SUP_ST_BACKOFF)
		CHECK(sup_sm_step(sm, &pol, SUP_EV_TIMER, t, 0) == SUP_ACT_SPAWN);
	CHECK(sup_sm_step(sm, &pol, SUP_EV_SPAWNED, t, 0) == SUP_ACT_NONE);
	if (ready)
		CHECK(sup_sm_step(sm, &pol, SUP_EV_READY, t, 0) == SUP_ACT_NONE);
}

/*
 * The limit and the window raised to their maxima, a death 100 ms after each
 * start: the child is back within a second every time, so a burst of deaths
 * never leaves the driver unserving for longer, and the limit still ends it.
 */
static void test_burst_under_a_high_limit(void)
{
	struct sup_policy high = pol;
	struct sup_sm sm;
	int64_t t = 0, longest = 0;
	unsigned spawns = 0;

	high.limit = SUP_RESTART_LIMIT_MAX;
	high.window_ms = (int64_t)SUP_RESTART_WINDOW_MAX * 1000;
	sup_sm_init(&sm);
	for (;;) {
		start(&sm, t, 1);
		spawns++;
		t += 100;
		enum sup_action a = sup_sm_step(&sm, &high, SUP_EV_EXITED, t, EXIT1);
		if (a == SUP_ACT_GIVE_UP || spawns > 2 * SUP_RESTART_LIMIT_MAX)
			break;
		CHECK(a == SUP_ACT_BACKOFF);
		if (sm.restart_at_ms - t > longest)
			longest = sm.restart_at_ms - t;
		t = sm.restart_at_ms;
	}
	CHECK(sm.state == SUP_ST_FAILED && sm.failure == SUP_FAIL_LIMIT);
	CHECK(spawns == SUP_RESTART_LIMIT_MAX);
	CHECK(longest == SUP_BACKOFF_MAX_MS);
}

static void test_deaths_within_window_fail(void)
{
	static const int64_t delays[] = {0, 250, 500, 1000};
	struct sup_sm sm;
	int64_t t = 0;

	sup_sm_init(&sm);
	for (int i = 0; i < 4; i++) {
		start(&sm, t, 1);
		t += 1000;
		CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, t, EXIT1) == SUP_ACT_BACKOFF);
		CHECK(sm.state == SUP_ST_BACKOFF);
		CHECK(sm.restart_at_ms - t == delays[i]);
		/* Not due yet (except the immediate first restart). */
		if (delays[i] > 0)
			CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, t, 0) == SUP_ACT_NONE);
		t = sm.restart_at_ms;
	}
	start(&sm, t, 1);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, t + 1000, EXIT1) == SUP_ACT_GIVE_UP);
	CHECK(sm.state == SUP_ST_FAILED);
	CHECK(sm.failure == SUP_FAIL_LIMIT && sm.ndeaths == 5);
	/* FAILED is final: no timer restarts it. */
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, t + 100000, 0) == SUP_ACT_NONE);
	CHECK(sm.state == SUP_ST_FAILED);
}

static void test_deaths_outside_window_forgotten(void)
{
	struct sup_sm sm;
	int64_t t = 0;

	sup_sm_init(&sm);
	for (int i = 0; i < 20; i++) {
		start(&sm, t, 1);
		t += 61000; /* each death more than a window after the last */
		CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, t, EXIT1) == SUP_ACT_BACKOFF);
		CHECK(sm.ndeaths == 1);
		CHECK(sm.restart_at_ms == t); /* always the immediate first restart */
	}
}

static void test_death_before_ready_counts_double(void)
{
	struct sup_sm sm;
	int64_t t = 0;
	int spawns = 0;

	sup_sm_init(&sm);
	start(&sm, t, 0);
	spawns++;
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, t + 10, EXIT1) == SUP_ACT_BACKOFF);
	CHECK(sm.ndeaths == 2);
	CHECK(sm.restart_at_ms == t + 10 + 250); /* not immediate: it did no work */

	/* A child that never gets READY: bounded number of spawns before FAILED. */
	for (;;) {
		t = sm.restart_at_ms;
		start(&sm, t, 0);
		spawns++;
		enum sup_action a = sup_sm_step(&sm, &pol, SUP_EV_EXITED, t + 10, EXIT1);
		if (a == SUP_ACT_GIVE_UP)
			break;
		CHECK(a == SUP_ACT_BACKOFF);
		if (spawns > 10)
			break;
	}
	CHECK(sm.state == SUP_ST_FAILED);
	CHECK(spawns == 3); /* 2 + 2 + 2 >= 5 */
}

static void test_sigsys(void)
{
	struct sup_sm sm;
	struct sup_policy lenient = pol;

	sup_sm_init(&sm);
	start(&sm, 0, 1);
	CHECK(sm.failure == SUP_FAIL_NONE);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, 5, SIGSYS_STATUS) == SUP_ACT_GIVE_UP);
	CHECK(sm.state == SUP_ST_FAILED && sm.failure == SUP_FAIL_SIGSYS);

	/* Where SIGSYS is not fatal (rpcd), it is an ordinary death. */
	lenient.sigsys_fatal = false;
	sup_sm_init(&sm);
	start(&sm, 0, 1);
	CHECK(sup_sm_step(&sm, &lenient, SUP_EV_EXITED, 5, SIGSYS_STATUS) == SUP_ACT_BACKOFF);
	/* Other signals are ordinary deaths even for the helper. */
	sup_sm_init(&sm);
	start(&sm, 0, 1);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, 5, W_EXITCODE(0, SIGKILL)) == SUP_ACT_BACKOFF);
}

static void test_limit_one(void)
{
	struct sup_policy once = pol;
	struct sup_sm sm;

	once.limit = 1;
	sup_sm_init(&sm);
	start(&sm, 0, 1);
	CHECK(sup_sm_step(&sm, &once, SUP_EV_EXITED, 5, EXIT1) == SUP_ACT_GIVE_UP);
}

static void test_stop(void)
{
	struct sup_sm sm;

	/* A death after a stop request is the end, not a restart, and not a tally. */
	sup_sm_init(&sm);
	start(&sm, 0, 1);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_STOP, 10, 0) == SUP_ACT_NONE);
	CHECK(sm.stop_requested && sm.state == SUP_ST_RUNNING);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, 20, W_EXITCODE(0, 0)) == SUP_ACT_STOPPED);
	CHECK(sm.state == SUP_ST_STOPPED && sm.ndeaths == 0);
	/* Nothing spawns a stopped child again. */
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_SPAWNED, 30, 0) == SUP_ACT_BUG);

	/* Even a SIGSYS death during a stop is just a stop. */
	sup_sm_init(&sm);
	start(&sm, 0, 0);
	sup_sm_step(&sm, &pol, SUP_EV_STOP, 10, 0);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, 20, SIGSYS_STATUS) == SUP_ACT_STOPPED);

	/* A stop during backoff cancels the restart. */
	sup_sm_init(&sm);
	start(&sm, 0, 1);
	sup_sm_step(&sm, &pol, SUP_EV_EXITED, 20, EXIT1);
	CHECK(sm.state == SUP_ST_BACKOFF);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_STOP, 20, 0) == SUP_ACT_STOPPED);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, 100000, 0) == SUP_ACT_NONE);
	CHECK(sm.state == SUP_ST_STOPPED);
}

static void test_ready_timeout(void)
{
	struct sup_sm sm;

	/* Spawned at 1000: nothing to do before 11000, one KILL at it, then nothing more. */
	sup_sm_init(&sm);
	CHECK(sup_sm_deadline(&sm) == INT64_MAX);
	start(&sm, 1000, 0);
	CHECK(sup_sm_deadline(&sm) == 11000);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, 10999, 0) == SUP_ACT_NONE);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, 11000, 0) == SUP_ACT_KILL);
	CHECK(sm.kill_reason != NULL && strstr(sm.kill_reason, "READY") != NULL);
	CHECK(sm.state == SUP_ST_STARTING);
	CHECK(sup_sm_deadline(&sm) == INT64_MAX); /* no busy loop while the kill lands */
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, 20000, 0) == SUP_ACT_NONE);
	/* Its death is a death before READY: weight 2, not an immediate restart. */
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, 11005, W_EXITCODE(0, SIGKILL)) ==
	      SUP_ACT_BACKOFF);
	CHECK(sm.ndeaths == 2 && sm.restart_at_ms == 11005 + 250);
	CHECK(sup_sm_deadline(&sm) == sm.restart_at_ms);

	/* A fresh spawn gets a fresh deadline; READY in time clears it. */
	start(&sm, 20000, 0);
	CHECK(sup_sm_deadline(&sm) == 30000);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_READY, 29999, 0) == SUP_ACT_NONE);
	CHECK(sup_sm_deadline(&sm) == INT64_MAX);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, 100000, 0) == SUP_ACT_NONE);

	/* During a stop the stop timeout governs: no ready kill. */
	sup_sm_init(&sm);
	start(&sm, 0, 0);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_STOP, 10, 0) == SUP_ACT_NONE);
	CHECK(sup_sm_deadline(&sm) == INT64_MAX);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, 50000, 0) == SUP_ACT_NONE);

	/* A child that never gets READY: bounded spawns, each killed at its deadline. */
	sup_sm_init(&sm);
	int64_t t = 0;
	int spawns = 0;
	for (;;) {
		start(&sm, t, 0);
		spawns++;
		t = sup_sm_deadline(&sm);
		CHECK(sup_sm_step(&sm, &pol, SUP_EV_TIMER, t, 0) == SUP_ACT_KILL);
		enum sup_action a =
		    sup_sm_step(&sm, &pol, SUP_EV_EXITED, t, W_EXITCODE(0, SIGKILL));
		if (a == SUP_ACT_GIVE_UP || spawns > 10)
			break;
		CHECK(a == SUP_ACT_BACKOFF);
		t = sm.restart_at_ms;
	}
	CHECK(sm.state == SUP_ST_FAILED);
	CHECK(spawns == 3);       /* 2 + 2 + 2 >= 5 */
	CHECK(t < pol.window_ms); /* all three fit the window: the default flags must allow this */

	/* Zero means no timeout (the state machine allows it; the flag does not). */
	struct sup_policy none = pol;
	none.ready_timeout_ms = 0;
	sup_sm_init(&sm);
	sup_sm_step(&sm, &none, SUP_EV_SPAWNED, 0, 0);
	CHECK(sup_sm_deadline(&sm) == INT64_MAX);
}

static void test_hung_child_bound(void)
{
	struct sup_policy p = pol;

	/* The defaults (10 s, 5 deaths, 60 s): three spawns in about 31 s, then FAILED. */
	CHECK(sup_policy_fails_hung_child(&p));
	/* Three deaths must fit the window: 2 * timeout + 1.25 s of backoff < 60 s. */
	p.ready_timeout_ms = 29000;
	CHECK(sup_policy_fails_hung_child(&p));
	p.ready_timeout_ms = 30000;
	CHECK(!sup_policy_fails_hung_child(&p));
	p.ready_timeout_ms = 3600000;
	CHECK(!sup_policy_fails_hung_child(&p));
	/* A limit of 1 or 2: the first death before READY is enough. */
	p.limit = 2;
	CHECK(sup_policy_fails_hung_child(&p));
	p.limit = 100;
	p.ready_timeout_ms = 1000;
	p.window_ms = 86400000;
	CHECK(sup_policy_fails_hung_child(&p));
	p.ready_timeout_ms = 0;
	CHECK(!sup_policy_fails_hung_child(&p));
}

static void test_deadline(void)
{
	struct sup_sm sm;

	sup_sm_init(&sm);
	start(&sm, 0, 1);
	CHECK(sup_sm_deadline(&sm) == INT64_MAX); /* RUNNING: nothing timed */
	sup_sm_step(&sm, &pol, SUP_EV_EXITED, 100, EXIT1);
	CHECK(sup_sm_deadline(&sm) == 100); /* first death: restart at once */
	sm.state = SUP_ST_FAILED;
	CHECK(sup_sm_deadline(&sm) == INT64_MAX);
}

/* Accused by its peer: a live child is killed once per report, its death counted as usual. */
static void test_accused(void)
{
	struct sup_sm sm;

	sup_sm_init(&sm);
	start(&sm, 0, 1);
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_ACCUSED, 10, 0) == SUP_ACT_KILL);
	CHECK(sm.kill_reason != NULL && strstr(sm.kill_reason, "protocol violation"));
	CHECK(sm.state == SUP_ST_RUNNING); /* until its death is reaped */
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_EXITED, 20, W_EXITCODE(0, SIGKILL)) == SUP_ACT_BACKOFF);
	CHECK(sm.ndeaths == 1 && sm.restart_at_ms == 20);
	/* A late report about the dead child kills nothing and counts nothing. */
	CHECK(sup_sm_step(&sm, &pol, SUP_EV_ACCUSED, 21, 0) == SUP_ACT_NONE);
	CHECK(sm.state == SUP_ST_BACKOFF && sm.ndeaths == 1);

	/* Five accusations in a few seconds: FAILED by the ordinary restart limit. */
	sup_sm_init(&sm);
	int64_t t = 0;
	enum sup_action a = SUP_ACT_NONE;
	int spawns = 0;
	while (sm.state != SUP_ST_FAILED && spawns < 10) {
		start(&sm, t, 1);
		spawns++;
		CHECK(sup_sm_step(&sm, &pol, SUP_EV_ACCUSED, t + 1, 0) == SUP_ACT_KILL);
		a = sup_sm_step(&sm, &pol, SUP_EV_EXITED, t + 2, W_EXITCODE(0, SIGKILL));
		t = sm.restart_at_ms;
	}
	CHECK(a == SUP_ACT_GIVE_UP && spawns == 5);
}

static void test_names(void)
{
	CHECK(sup_state_name(SUP_ST_FAILED)[0] == 'F');
	CHECK(sup_state_name((enum sup_state)42)[0] == '?');
	CHECK(sup_event_name(SUP_EV_STOP)[0] == 's');
	CHECK(sup_event_name(SUP_EV_ACCUSED)[0] == 'a');
	CHECK(sup_sm_alive(&(struct sup_sm){.state = SUP_ST_STARTING}));
	CHECK(!sup_sm_alive(&(struct sup_sm){.state = SUP_ST_BACKOFF}));
}

int main(void)
{
	test_table();
	test_backoff_sequence();
	test_burst_under_a_high_limit();
	test_deaths_within_window_fail();
	test_deaths_outside_window_forgotten();
	test_death_before_ready_counts_double();
	test_sigsys();
	test_limit_one();
	test_stop();
	test_ready_timeout();
	test_deadline();
	test_hung_child_bound();
	test_accused();
	test_names();
	return tap_done("test_sup_state");
}
