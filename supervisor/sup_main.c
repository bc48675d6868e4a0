/*
 * sepcsi-supervisor: the one command an operator runs. It checks its flags,
 * trims its own privilege, prepares the directories, spawns the mount helper
 * and rpcd (sup_spawn.c), and then only watches: one poll loop over a
 * signalfd, the two control sockets and a timeout, feeding what it sees to
 * each child's state machine (sup_state.c) and carrying out the action that
 * comes back. It trusts nothing a child says: the only messages it accepts
 * are one READY per child and, from a ready helper, PEER_VIOLATION (rpcd broke
 * the helper protocol: rpcd is killed and restarted); anything else gets the
 * sender killed and restarted.
 *
 * Runs as root with the capabilities listed in sup_caps.c. Fatal: bad flags
 * or not root (exit 2), a failed preparation or privilege trim (exit 1), a
 * broken internal invariant (exit 1 via log_fatal; the children die with us
 * through their parent-death signal). A child's death is never fatal by
 * itself; a child given up on (FAILED) stops the supervisor in order, with
 * exit 3, so that kubelet or systemd restarts the whole driver.
 *
 * Signals are only noted: they are blocked and read from a signalfd in the
 * loop, so no handler ever runs. It may be PID 1 in a container, so every
 * child is reaped, ours or inherited.
 */
#include "log.h"
#include "sepcsi_version.h"
#include "sup_caps.h"
#include "sup_child.h"
#include "sup_config.h"
#include "sup_prep.h"
#include "sup_spawn.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

static int usage_error(const char *msg)
{
	fprintf(stderr, "sepcsi-supervisor: %s\nTry 'sepcsi-supervisor --help'.\n", msg);
	return SUP_EXIT_USAGE;
}

/* Block the signals we watch and return a signalfd that reports them. */
static int setup_signals(void)
{
	sigset_t set;
	struct sigaction ign;

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	/* A write to a dead child's socket is an EPIPE, never a signal. */
	sigaction(SIGPIPE, &ign, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		log_fatal("sigprocmask: %s", strerror(errno));
	int fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		log_fatal("signalfd: %s", strerror(errno));
	return fd;
}

/* Drain the signalfd: note a stop request, reap on SIGCHLD. */
static void read_signals(struct sup *s, int sigfd)
{
	struct signalfd_siginfo si;
	bool chld = false;

	while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			chld = true;
			break;
		case SIGTERM:
			sup_begin_stop(s, "SIGTERM");
			break;
		case SIGINT:
			sup_begin_stop(s, "SIGINT");
			break;
		default: /* SIGHUP: nothing to reload; a closed terminal must not stop us */
			log_kv(LOG_LVL_INFO, "signal_ignored", "signal", "SIGHUP", NULL);
			break;
		}
	}
	if (chld)
		sup_reap(s);
}

static int run(struct sup *s)
{
	int sigfd = setup_signals();

	/* The helper first: it is confined before the network-facing rpcd exists. */
	sup_start(s);
	for (;;) {
		struct pollfd pfd[1 + SUP_NROLES];
		enum sup_role role_of[1 + SUP_NROLES];
		nfds_t n = 0;

		/* Stop first, so a child due for restart is not started just to be stopped. */
		if (s->stopping && sup_stop_step(s))
			break;
		sup_timers(s);

		pfd[n].fd = sigfd;
		pfd[n++].events = POLLIN;
		for (int r = 0; r < SUP_NROLES; r++) {
			if (s->child[r].ctl < 0)
				continue;
			role_of[n] = (enum sup_role)r;
			pfd[n].fd = s->child[r].ctl;
			pfd[n++].events = POLLIN;
		}
		if (poll(pfd, n, sup_next_timeout(s)) < 0) {
			if (errno == EINTR)
				continue;
			log_fatal("poll: %s", strerror(errno));
		}
		/* Control messages before deaths: a READY sent just before dying still counts. */
		for (nfds_t i = 1; i < n; i++)
			if (pfd[i].revents)
				sup_control(s, role_of[i]);
		if (pfd[0].revents)
			read_signals(s, sigfd);
	}
	close(sigfd);
	/* The status says why we stopped; the log line says it in words. */
	const bool helper_failed = s->child[SUP_HELPER].sm.state == SUP_ST_FAILED;
	const bool rpcd_failed = s->child[SUP_RPCD].sm.state == SUP_ST_FAILED;
	const int status = helper_failed || rpcd_failed ? SUP_EXIT_FAILED : SUP_EXIT_OK;
	char st[4];
	snprintf(st, sizeof(st), "%d", status);
	log_kv(status ? LOG_LVL_ERROR : LOG_LVL_INFO, "supervisor_exit", "status", st, "reason",
	       s->stop_reason ? s->stop_reason : "?", "failed",
	       rpcd_failed     ? (helper_failed ? "rpcd,mounthelper" : "rpcd")
	       : helper_failed ? "mounthelper"
	                       : "no",
	       NULL);
	return status;
}

/*
 * --print-privileges: the tables are printed by sepcsi-privileges, found
 * beside the children and given the same arguments, so that this process, which
 * holds capabilities, links no printer and no other process's tables.
 */
static int print_privileges(char **argv, char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (sup_prep_program("sepcsi-privileges", path, err, errlen) < 0)
		return usage_error(err);
	fflush(NULL);
	execv(path, argv);
	snprintf(err, errlen, "cannot run sepcsi-privileges: %s", strerror(errno));
	return usage_error(err);
}

int main(int argc, char **argv)
{
	static struct sup_config cfg;
	static struct sup s;
	char err[1024];

	switch (sup_config_parse(&cfg, argc, argv, err, sizeof(err))) {
	case SUP_PARSE_OK:
		break;
	case SUP_PARSE_HELP:
		sup_config_usage(stdout);
		return fflush(stdout) == 0 ? SUP_EXIT_OK : SUP_EXIT_FATAL;
	case SUP_PARSE_VERSION:
		printf("sepcsi-supervisor %s\n", SEPCSI_VERSION);
		return fflush(stdout) == 0 ? SUP_EXIT_OK : SUP_EXIT_FATAL;
	case SUP_PARSE_ERROR:
		return usage_error(err);
	}
	if (cfg.print_privileges)
		return print_privileges(argv, err, sizeof(err));
	/* Both ids: a set-user-ID install would let anyone pick the directories. */
	if (getuid() != 0 || geteuid() != 0)
		return usage_error("must be run as root (it spawns the privileged mount helper)");

	umask(022);
	sup_prep_stdio();
	log_init("supervisor", cfg.log_format, cfg.log_level);
	if (sup_prep_policy(&cfg, err, sizeof(err)) < 0)
		return usage_error(err);
	sup_child_init(&s, &cfg);
	if (sup_prep_binaries(s.child[SUP_RPCD].path, s.child[SUP_HELPER].path, err, sizeof(err)) <
	    0)
		log_fatal("%s", err);
	if (cfg.metrics_file[0] &&
	    sup_prep_program("sepcsi-metrics-check", s.metrics.check_path, err, sizeof(err)) < 0)
		log_fatal("%s", err);
	if (sup_caps_trim(err, sizeof(err)) < 0)
		log_fatal("%s", err);
	if (sup_prep_dirs(&cfg, err, sizeof(err)) < 0)
		log_fatal("%s", err);
	sup_spawn_init_env();

	char kept[24], pid[16];
	snprintf(kept, sizeof(kept), "%016llx", (unsigned long long)sup_caps_kept_permitted());
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	log_kv(LOG_LVL_INFO, "supervisor_start", "version", SEPCSI_VERSION, "pid", pid, "endpoint",
	       cfg.endpoint, "driver", cfg.driver_name, "node_id", cfg.node_id, "mode",
	       sup_mode_name(cfg.mode), "caps_kept", kept, NULL);
	if (!sup_policy_fails_hung_child(&s.child[SUP_HELPER].pol))
		log_kv(LOG_LVL_WARN, "config_warning", "problem",
		       "--ready-timeout is too long for --restart-limit and --restart-window: a "
		       "child that never reports READY would be restarted for ever, never FAILED",
		       NULL);
	return run(&s);
}
