/*
 * The mechanics behind each child's state machine. Runs in the supervisor
 * (root, trimmed capabilities, single-threaded, called from the poll loop in
 * sup_main.c). A state machine answering SUP_ACT_BUG is fatal (log_fatal);
 * everything a child does (dying, a bad control message, a full socket) is
 * handled and never fatal to the supervisor.
 *
 * Re-plumbing. rpcd and the helper talk over one socketpair, fd 3 in both.
 * Whenever one of them is spawned, it gets a fresh channel: one end becomes
 * its fd 3, the other goes to the other child. If that one is running it
 * receives the end as SUP_CTL_PEER_FD and swaps channels without a restart
 * (so a helper restart does not restart rpcd, and an rpcd restart leaves the
 * helper and its mounts alone); if it is waiting to restart, the end is kept
 * for its next spawn; if it is FAILED, the end is closed. The supervisor
 * closes its copies at once, so a dead child means EOF for its peer.
 *
 * Violations. A child that sends anything but one READY (and, for the
 * helper, PEER_VIOLATION) on its control socket is killed. PEER_VIOLATION is
 * the helper's report that rpcd broke the helper protocol: rpcd, not the
 * helper, is killed, so a compromised rpcd spends only its own restart limit.
 *
 * Giving up. A child in FAILED (too many deaths in the window, or a helper
 * killed by SIGSYS) is never restarted, and without either child the driver
 * cannot serve: the supervisor logs give_up with the reason and stops the
 * other child in the usual order, and sup_main.c exits 3, so that kubelet or
 * systemd restarts the whole driver rather than keep a half of it alive.
 *
 * Our end of each control socket is non-blocking: a child that stops reading
 * can make a send fail, never make the supervisor wait.
 */
#include "sup_child.h"

#include "clock.h"
#include "log.h"
#include "sup_spawn.h"
#include "supctl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static enum sup_role other(enum sup_role r)
{
	return r == SUP_RPCD ? SUP_HELPER : SUP_RPCD;
}

/* Small decimal strings for log values. */
struct num {
	char s[24];
};

static struct num num(long long v)
{
	struct num n;
	snprintf(n.s, sizeof(n.s), "%lld", v);
	return n;
}

static void close_ctl(struct sup_child *c)
{
	if (c->ctl >= 0)
		close(c->ctl);
	c->ctl = -1;
}

static void kill_child(struct sup_child *c, const char *why)
{
	if (c->pid <= 0)
		return;
	log_kv(LOG_LVL_ERROR, "child_kill", "role", c->name, "pid", num(c->pid).s, "reason", why,
	       NULL);
	snprintf(c->killed_for, sizeof(c->killed_for), "%s", why);
	kill(c->pid, SIGKILL);
}

static void feed(struct sup *s, enum sup_role r, enum sup_event ev, int wstatus);

/* Give child r one end of a fresh rpcd<->helper channel; takes ownership of fd. */
static void hand_peer(struct sup *s, enum sup_role r, int fd)
{
	struct sup_child *c = &s->child[r];

	if (c->sm.state == SUP_ST_FAILED) {
		close(fd);
		return;
	}
	if (sup_sm_alive(&c->sm)) {
		if (c->ctl >= 0 && sup_ctl_send(c->ctl, SUP_CTL_PEER_FD, fd) == 0) {
			log_kv(LOG_LVL_INFO, "peer_channel_sent", "role", c->name, "pid",
			       num(c->pid).s, NULL);
			close(fd);
			return;
		}
		/* It cannot get the new channel: restart it; the end waits for that. */
		kill_child(c, "cannot receive the new rpcd<->helper channel");
	}
	if (c->pending_peer >= 0)
		close(c->pending_peer);
	c->pending_peer = fd;
}

static void tell_rpcd_helper_failed(struct sup *s)
{
	struct sup_child *c = &s->child[SUP_RPCD];

	if (!sup_sm_alive(&c->sm) || c->ctl < 0)
		return; /* a later rpcd is told when it is spawned */
	if (sup_ctl_send(c->ctl, SUP_CTL_HELPER_FAILED, -1) < 0)
		log_kv(LOG_LVL_WARN, "helper_failed_not_sent", "error", strerror(errno), NULL);
	else
		log_kv(LOG_LVL_INFO, "helper_failed_sent", "pid", num(c->pid).s, NULL);
}

/*
 * spawn_child() -> feed() -> apply() -> spawn_child() is a cycle of calls but
 * never a recursion: spawn_child() feeds only SPAWNED and EXITED, and the
 * state machine answers SPAWN to neither (only to a TIMER in BACKOFF).
 */
/* NOLINTNEXTLINE(misc-no-recursion): a cycle of calls, not a recursion (above) */
static void spawn_child(struct sup *s, enum sup_role r)
{
	struct sup_child *c = &s->child[r];
	int mine = c->pending_peer, ctl[2];

	c->pending_peer = -1;
	if (mine < 0) {
		int ch[2];
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ch) < 0)
			log_fatal("socketpair: %s", strerror(errno));
		mine = ch[0];
		hand_peer(s, other(r), ch[1]);
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0 ||
	    fcntl(ctl[0], F_SETFL, O_NONBLOCK) < 0)
		log_fatal("control socketpair: %s", strerror(errno));

	const struct sup_spawn sp = {
	    .role = c->name,
	    .path = c->path,
	    .argv = c->argv,
	    .peer_fd = mine,
	    .ctl_fd = ctl[1],
	    .drop_privilege = r == SUP_RPCD,
	    .uid = s->cfg->rpcd_uid,
	    .gid = s->cfg->rpcd_gid,
	};
	pid_t pid = sup_spawn(&sp);
	int fork_errno = errno;

	close(mine);
	close(ctl[1]);
	feed(s, r, SUP_EV_SPAWNED, 0);
	if (pid < 0) {
		close(ctl[0]);
		log_kv(LOG_LVL_ERROR, "spawn_failed", "role", c->name, "step", "fork", "error",
		       strerror(fork_errno), NULL);
		feed(s, r, SUP_EV_EXITED, W_EXITCODE(127, 0)); /* a death before READY */
		return;
	}
	c->pid = pid;
	c->ctl = ctl[0];
	c->term_sent = false;
	c->killed_for[0] = '\0';
	c->spawned_at_ms = mono_ms();
	log_kv(LOG_LVL_INFO, "child_spawned", "role", c->name, "pid", num(pid).s, "path", c->path,
	       NULL);
	if (r == SUP_RPCD && s->child[SUP_HELPER].sm.state == SUP_ST_FAILED)
		tell_rpcd_helper_failed(s);
}

/*
 * Child r has entered FAILED: say why in one line, tell rpcd if it is the
 * helper (Probe then answers not ready while rpcd finishes its calls), and
 * begin the stop that ends in exit status 3.
 */
static void give_up(struct sup *s, enum sup_role r)
{
	struct sup_child *c = &s->child[r];
	const struct sup_child *o = &s->child[other(r)];
	static const char sigsys[] =
	    "killed by SIGSYS: a system call outside its seccomp allowlist";
	char why[128], then[96];

	if (c->sm.failure == SUP_FAIL_SIGSYS)
		snprintf(why, sizeof(why), "%s", sigsys);
	else
		snprintf(why, sizeof(why), "%u deaths in %u s (limit %u)", c->sm.ndeaths,
		         s->cfg->restart_window_s, c->pol.limit);
	if (sup_sm_alive(&o->sm))
		snprintf(then, sizeof(then), "stop %s, exit %d", o->name, SUP_EXIT_FAILED);
	else
		snprintf(then, sizeof(then), "exit %d", SUP_EXIT_FAILED);
	log_kv(LOG_LVL_ERROR, "give_up", "role", c->name, "reason", why, "last_death",
	       c->last_death, "then", then, NULL);
	if (r == SUP_HELPER) {
		if (c->pending_peer >= 0)
			close(c->pending_peer); /* rpcd sees EOF on that channel */
		c->pending_peer = -1;
		tell_rpcd_helper_failed(s);
		sup_begin_stop(s, "mounthelper failed");
	} else {
		sup_begin_stop(s, "rpcd failed");
	}
}

/* NOLINTNEXTLINE(misc-no-recursion): the cycle is not a recursion, see spawn_child() */
static void apply(struct sup *s, enum sup_role r, enum sup_action act)
{
	struct sup_child *c = &s->child[r];

	switch (act) {
	case SUP_ACT_NONE:
	case SUP_ACT_BUG: /* handled in feed() */
		break;
	case SUP_ACT_SPAWN:
		spawn_child(s, r);
		break;
	case SUP_ACT_BACKOFF:
		log_kv(LOG_LVL_WARN, "child_restart", "role", c->name, "in_ms",
		       num(c->sm.restart_at_ms - mono_ms()).s, "deaths_in_window",
		       num(c->sm.ndeaths).s, "limit", num(c->pol.limit).s, NULL);
		break;
	case SUP_ACT_GIVE_UP:
		give_up(s, r);
		break;
	case SUP_ACT_STOPPED:
		log_kv(LOG_LVL_INFO, "child_stopped", "role", c->name, NULL);
		break;
	case SUP_ACT_KILL:
		kill_child(c, c->sm.kill_reason);
		break;
	}
}

/* NOLINTNEXTLINE(misc-no-recursion): the cycle is not a recursion, see spawn_child() */
static void feed(struct sup *s, enum sup_role r, enum sup_event ev, int wstatus)
{
	struct sup_child *c = &s->child[r];
	enum sup_state from = c->sm.state;
	enum sup_action act = sup_sm_step(&c->sm, &c->pol, ev, mono_ms(), wstatus);

	if (act == SUP_ACT_BUG)
		log_fatal("state machine of %s: event %s cannot happen in state %s", c->name,
		          sup_event_name(ev), sup_state_name(from));
	if (from != c->sm.state)
		log_kv(LOG_LVL_DEBUG, "child_state", "role", c->name, "from", sup_state_name(from),
		       "to", sup_state_name(c->sm.state), "event", sup_event_name(ev), NULL);
	apply(s, r, act);
}

void sup_child_init(struct sup *s, const struct sup_config *cfg)
{
	static const char *const names[SUP_NROLES] = {"mounthelper", "rpcd"};

	memset(s, 0, sizeof(*s));
	s->cfg = cfg;
	s->metrics.start_unix_s = (int64_t)time(NULL);
	for (int r = 0; r < SUP_NROLES; r++) {
		struct sup_child *c = &s->child[r];
		c->name = names[r];
		sup_sm_init(&c->sm);
		c->pol.limit = cfg->restart_limit;
		c->pol.window_ms = (int64_t)cfg->restart_window_s * 1000;
		c->pol.ready_timeout_ms = (int64_t)cfg->ready_timeout_s * 1000;
		/* A seccomp kill in the privileged helper is never retried. */
		c->pol.sigsys_fatal = r == SUP_HELPER;
		c->pid = -1;
		c->ctl = -1;
		c->pending_peer = -1;
	}
	snprintf(s->max_volumes, sizeof(s->max_volumes), "%lld",
	         (long long)cfg->max_volumes_per_node);

	/* The argument strings are never written to; execve just wants char *. */
	char **a = s->child[SUP_RPCD].argv;
	int n = 0;
	a[n++] = (char *)"sepcsi-rpcd";
	a[n++] = (char *)"--endpoint";
	a[n++] = (char *)cfg->endpoint;
	a[n++] = (char *)"--driver-name";
	a[n++] = (char *)cfg->driver_name;
	a[n++] = (char *)"--node-id";
	a[n++] = (char *)cfg->node_id;
	a[n++] = (char *)"--mode";
	a[n++] = (char *)sup_mode_name(cfg->mode);
	if (cfg->snapshot_metadata)
		a[n++] = (char *)"--snapshot-metadata";
	a[n++] = (char *)"--state-dir";
	a[n++] = (char *)cfg->state_dir;
	a[n++] = (char *)"--log-format";
	a[n++] = (char *)sup_log_format_name(cfg->log_format);
	a[n++] = (char *)"--log-level";
	a[n++] = (char *)sup_log_level_name(cfg->log_level);
	a[n++] = (char *)"--max-volumes-per-node";
	a[n++] = s->max_volumes;
	if (cfg->metrics_file[0]) {
		snprintf(s->metrics_interval, sizeof(s->metrics_interval), "%u",
		         cfg->metrics_interval_s);
		a[n++] = (char *)"--metrics-interval";
		a[n++] = s->metrics_interval;
	}
	a[n] = NULL;

	a = s->child[SUP_HELPER].argv;
	n = 0;
	a[n++] = (char *)"sepcsi-mounthelper";
	a[n++] = (char *)"--data-dir";
	a[n++] = (char *)cfg->data_dir;
	snprintf(s->helper_user, sizeof(s->helper_user), "%u:%u", (unsigned)cfg->helper_uid,
	         (unsigned)cfg->helper_gid);
	a[n++] = (char *)"--user";
	a[n++] = s->helper_user;
	if (cfg->policy[0]) {
		a[n++] = (char *)"--policy";
		a[n++] = (char *)cfg->policy;
	}
	if (cfg->mode != SUP_MODE_CONTROLLER) { /* a node plugin: its id, for shared bases */
		a[n++] = (char *)"--node-id";
		a[n++] = (char *)cfg->node_id;
	}
	if (cfg->mode == SUP_MODE_NODE)
		a[n++] = (char *)"--node-only";
	a[n++] = (char *)"--log-format";
	a[n++] = (char *)sup_log_format_name(cfg->log_format);
	a[n++] = (char *)"--log-level";
	a[n++] = (char *)sup_log_level_name(cfg->log_level);
	a[n] = NULL;
}

void sup_start(struct sup *s)
{
	spawn_child(s, SUP_HELPER);
	spawn_child(s, SUP_RPCD);
}

/*
 * The helper reports that rpcd broke the helper protocol; it has dropped that
 * channel and waits for a new one. rpcd is the suspect: it is killed, its
 * death is counted against its own restart limit, and its restart brings the
 * helper a fresh channel. The helper is never restarted for what rpcd sent.
 */
static void peer_violation(struct sup *s)
{
	struct sup_child *rpcd = &s->child[SUP_RPCD];

	log_kv(LOG_LVL_ERROR, "peer_violation", "role", rpcd->name, "pid", num(rpcd->pid).s,
	       "reason", "protocol violation on the helper channel, reported by mounthelper",
	       "rpcd", sup_sm_alive(&rpcd->sm) ? "killed" : "not running", NULL);
	feed(s, SUP_RPCD, SUP_EV_ACCUSED, 0);
}

void sup_control(struct sup *s, enum sup_role r)
{
	struct sup_child *c = &s->child[r];
	struct sup_ctl_msg m;

	if (sup_ctl_recv(c->ctl, &m) < 0) {
		int e = errno;
		if (e == EAGAIN || e == EINTR)
			return;
		close_ctl(c);
		if (e == 0) /* it closed fd 4 or is exiting; SIGCHLD will tell */
			log_kv(LOG_LVL_DEBUG, "control_eof", "role", c->name, NULL);
		else
			kill_child(c, e == EPROTO ? "malformed control message" : strerror(e));
		return;
	}
	if (r == SUP_HELPER && m.type == SUP_CTL_PEER_VIOLATION && c->sm.state == SUP_ST_RUNNING) {
		peer_violation(s);
		return;
	}
	/*
	 * rpcd's metrics: at most two reports a second are read, accepted or not;
	 * more are dropped unread.
	 */
	if (r == SUP_RPCD && m.type == SUP_CTL_METRICS && c->sm.state == SUP_ST_RUNNING) {
		if (s->metrics.read_ms && mono_ms() - s->metrics.read_ms < 500) {
			close(m.fd);
		} else {
			s->metrics.read_ms = mono_ms();
			sup_metrics_from_rpcd(s, m.fd);
		}
		return;
	}
	if (m.type != SUP_CTL_READY) {
		if (m.fd >= 0)
			close(m.fd);
		close_ctl(c);
		kill_child(c, r == SUP_HELPER && m.type == SUP_CTL_PEER_VIOLATION
		                  ? "PEER_VIOLATION before READY"
		                  : "control message other than READY");
		return;
	}
	enum sup_state before = c->sm.state;
	feed(s, r, SUP_EV_READY, 0);
	if (before == SUP_ST_STARTING) {
		log_kv(LOG_LVL_INFO, "child_ready", "role", c->name, "pid", num(c->pid).s,
		       "startup_ms", num(mono_ms() - c->spawned_at_ms).s, NULL);
		sup_metrics_write(s);
	}
}

static const char *sig_name(int sig)
{
	const char *n = sigabbrev_np(sig);
	return n ? n : "?";
}

static void describe_status(int st, char *buf, size_t n)
{
	if (WIFEXITED(st))
		snprintf(buf, n, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		snprintf(buf, n, "signal SIG%s%s", sig_name(WTERMSIG(st)),
		         WCOREDUMP(st) ? " (core dumped)" : "");
	else
		snprintf(buf, n, "status %#x", (unsigned)st);
}

static void child_died(struct sup *s, enum sup_role r, int st)
{
	struct sup_child *c = &s->child[r];
	char how[48];
	enum log_level lvl = c->sm.stop_requested ? LOG_LVL_INFO : LOG_LVL_WARN;

	describe_status(st, how, sizeof(how));
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGSYS)
		lvl = LOG_LVL_ERROR;
	log_kv(lvl, "child_exited", "role", c->name, "pid", num(c->pid).s, "how", how, "uptime_ms",
	       num(mono_ms() - c->spawned_at_ms).s, "was_ready",
	       c->sm.state == SUP_ST_RUNNING ? "yes" : "no", NULL);
	/* For the give_up line: how it ended, and why, if we killed it. */
	char killed[sizeof(c->killed_for) + 16] = "";
	if (c->killed_for[0])
		snprintf(killed, sizeof(killed), ", killed: %s", c->killed_for);
	snprintf(c->last_death, sizeof(c->last_death), "%s%s%s", how,
	         c->sm.state == SUP_ST_RUNNING ? "" : " before READY", killed);
	close_ctl(c);
	if (!c->sm.stop_requested)
		sup_metrics_death(s, r, st, c->killed_for[0] != '\0');
	if (r == SUP_RPCD)
		sup_metrics_rpcd_gone(s);
	c->pid = -1;
	c->term_sent = false;
	feed(s, r, SUP_EV_EXITED, st);
	sup_metrics_write(s);
}

void sup_reap(struct sup *s)
{
	for (;;) {
		siginfo_t si;
		int st = 0, r;

		/* Look first (WNOWAIT): the zombie keeps its pid, so that id cannot be reused yet.
		 */
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0) {
			if (errno == EINTR)
				continue;
			return; /* ECHILD: no children at all */
		}
		if (si.si_pid == 0)
			return;
		pid_t pid = si.si_pid;
		for (r = 0; r < SUP_NROLES && s->child[r].pid != pid; r++)
			;
		/* Whatever our child (or a metrics check) left in its process group dies with it.
		 */
		if (r < SUP_NROLES || pid == s->metrics.check.pid)
			kill(-pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (r < SUP_NROLES)
			child_died(s, (enum sup_role)r, st);
		else if (!sup_metrics_check_ended(s, pid, st))
			log_kv(LOG_LVL_DEBUG, "reaped_orphan", "pid", num(pid).s, NULL);
	}
}

void sup_timers(struct sup *s)
{
	sup_metrics_check_timer(s);
	for (int r = 0; r < SUP_NROLES; r++) {
		struct sup_child *c = &s->child[r];
		if (mono_ms() >= sup_sm_deadline(&c->sm))
			feed(s, (enum sup_role)r, SUP_EV_TIMER, 0);
		if (c->term_sent && c->pid > 0 && mono_ms() >= c->kill_at_ms) {
			log_kv(LOG_LVL_WARN, "stop_timeout", "role", c->name, "pid", num(c->pid).s,
			       "after_ms", num(SUP_STOP_TIMEOUT_MS).s, NULL);
			kill(c->pid, SIGKILL);
			c->kill_at_ms = INT64_MAX;
		}
	}
}

int sup_next_timeout(const struct sup *s)
{
	int64_t next = INT64_MAX, now = mono_ms();

	for (int r = 0; r < SUP_NROLES; r++) {
		const struct sup_child *c = &s->child[r];
		if (sup_sm_deadline(&c->sm) < next)
			next = sup_sm_deadline(&c->sm);
		if (c->term_sent && c->pid > 0 && c->kill_at_ms < next)
			next = c->kill_at_ms;
	}
	if (s->metrics.check.pid > 0 && !s->metrics.check.killed &&
	    s->metrics.check.deadline < next)
		next = s->metrics.check.deadline;
	if (next == INT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	return next - now > INT_MAX ? INT_MAX : (int)(next - now);
}

void sup_begin_stop(struct sup *s, const char *why)
{
	if (s->stopping) {
		log_kv(LOG_LVL_INFO, "stop_in_progress", "reason", why, NULL);
		return;
	}
	s->stopping = true;
	s->stop_reason = why;
	log_kv(LOG_LVL_INFO, "stopping", "reason", why, NULL);
}

bool sup_stop_step(struct sup *s)
{
	static const enum sup_role order[] = {SUP_RPCD, SUP_HELPER};

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		struct sup_child *c = &s->child[order[i]];
		if (!c->sm.stop_requested)
			feed(s, order[i], SUP_EV_STOP, 0);
		if (!sup_sm_alive(&c->sm))
			continue;
		if (!c->term_sent) {
			kill(c->pid, SIGTERM);
			c->term_sent = true;
			c->kill_at_ms = mono_ms() + SUP_STOP_TIMEOUT_MS;
			log_kv(LOG_LVL_INFO, "child_stop", "role", c->name, "pid", num(c->pid).s,
			       "signal", "SIGTERM", "kill_after_ms", num(SUP_STOP_TIMEOUT_MS).s,
			       NULL);
		}
		return false; /* wait for this one before the next */
	}
	return true;
}
