/*
 * Fork and exec one child of the supervisor, always the same way. The parent
 * side runs in the supervisor (root, trimmed capabilities, single-threaded);
 * everything after fork() runs in the child before exec. In the child any
 * failure is fatal to the child only: it logs the step that failed and
 * _exit(127)s, and the supervisor counts a death before READY.
 *
 * The child, in this order:
 *   1. setsid(): its own session and process group, so a terminal's ^C reaches
 *      only the supervisor (which stops the children in order) and the
 *      supervisor can kill whatever the child leaves behind as one group;
 *   2. every signal disposition back to default, then an empty signal mask;
 *   3. the channel to fd 3, the control socket to fd 4, stdin from /dev/null,
 *      every descriptor >= 5 closed (stdout and stderr stay: logs go there;
 *      for a quiet child, the metrics check, they are /dev/null too);
 *   4. for rpcd only, privilege dropped for good, in this order:
 *        a. bounding set emptied (needs CAP_SETPCAP, so before the uid change),
 *        b. ambient set cleared,
 *        c. setgroups(0), setresgid(g, g, g), setresuid(u, u, u) - groups and
 *           gid first, while CAP_SETGID is still held,
 *        d. effective, permitted and inheritable sets emptied explicitly (the
 *           uid change empties the first two unless a securebit says otherwise),
 *        e. verified: all three uids and gids are the target, no supplementary
 *           groups, all five capability sets empty, and uid 0 cannot be
 *           regained; anything else ends the child,
 *        f. no_new_privs (already inherited from the supervisor; set again so
 *           the drop does not depend on it);
 *      the helper keeps uid 0 and exactly the supervisor's kept capabilities;
 *      it confines itself (capability drop, no_new_privs, seccomp) at start;
 *   5. parent-death signal SIGKILL, set after the credential change (which
 *      would clear it), so no child outlives a crashed supervisor and a
 *      restarted supervisor never runs two children of one role;
 *   6. execve() with a clean environment (a fixed PATH and an allowlist).
 */
#include "sup_spawn.h"

#include "log.h"
#include "sup_caps.h"
#include "supctl.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Children's PATH: fixed, never the operator's; tools are run by absolute path anyway. */
#define CHILD_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* Variables passed through to both children; everything else is dropped. */
static const char *const env_pass[] = {
    "ASAN_OPTIONS",       /* sanitizer builds (CI): where and how to report */
    "UBSAN_OPTIONS",      /* likewise */
    "LSAN_OPTIONS",       /* likewise */
    "GRPC_VERBOSITY",     /* gRPC core diagnostics in rpcd, for an operator debugging */
    "GRPC_TRACE",         /* likewise */
    "SEPCSI_SECCOMP_LOG", /* rpcd: log instead of kill on a syscall outside its table (debug) */
    "SEPCSI_TEST_PAUSE",  /* helper: test pause points (mounthelper/mh_pause.c), tests only */
};

#define NPASS (sizeof(env_pass) / sizeof(env_pass[0]))

static char *child_env[NPASS + 2];

void sup_spawn_init_env(void)
{
	size_t n = 0;

	child_env[n++] = (char *)CHILD_PATH;
	for (size_t i = 0; i < NPASS; i++) {
		size_t len = strlen(env_pass[i]);
		for (char **e = environ; e && *e; e++) {
			if (strncmp(*e, env_pass[i], len) == 0 && (*e)[len] == '=') {
				child_env[n++] = *e;
				break;
			}
		}
	}
	child_env[n] = NULL;
}

static __attribute__((noreturn)) void child_fail(const struct sup_spawn *sp, const char *step)
{
	const char *e = strerror(errno);

	log_kv(LOG_LVL_ERROR, "spawn_failed", "role", sp->role, "step", step, "error", e, NULL);
	_exit(127);
}

static void reset_signals(const struct sup_spawn *sp)
{
	struct sigaction sa;
	sigset_t none;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &sa, NULL); /* EINVAL for KILL, STOP and libc's own: fine */
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		child_fail(sp, "sigprocmask");
}

static void setup_fds(const struct sup_spawn *sp)
{
	/* Move both ends above the target numbers first so no dup2 overwrites the other. */
	int peer = fcntl(sp->peer_fd, F_DUPFD_CLOEXEC, 10);
	int ctl = fcntl(sp->ctl_fd, F_DUPFD_CLOEXEC, 10);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (peer < 0 || ctl < 0 || null < 0)
		child_fail(sp, "dup channel");
	/* dup2 gives the new descriptor no close-on-exec flag: these survive exec. */
	if (dup2(null, STDIN_FILENO) < 0 || dup2(peer, SEPCSI_FD_PEER) < 0 ||
	    dup2(ctl, SEPCSI_FD_CONTROL) < 0 ||
	    (sp->quiet && (dup2(null, STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0)))
		child_fail(sp, "dup2");
	if (close_range(SEPCSI_FD_CONTROL + 1, ~0U, 0) < 0)
		child_fail(sp, "close_range");
}

static void drop_privilege(const struct sup_spawn *sp)
{
	struct sup_capsets cs;
	uid_t r, e, s;
	gid_t rg, eg, sg;

	if (sup_caps_drop_bounding() < 0)
		child_fail(sp, "drop bounding set");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		child_fail(sp, "clear ambient set");
	if (setgroups(0, NULL) < 0)
		child_fail(sp, "setgroups");
	if (setresgid(sp->gid, sp->gid, sp->gid) < 0)
		child_fail(sp, "setresgid");
	if (setresuid(sp->uid, sp->uid, sp->uid) < 0)
		child_fail(sp, "setresuid");
	if (sup_caps_clear() < 0)
		child_fail(sp, "clear capabilities");

	if (getresuid(&r, &e, &s) < 0 || r != sp->uid || e != sp->uid || s != sp->uid)
		child_fail(sp, "verify uid");
	if (getresgid(&rg, &eg, &sg) < 0 || rg != sp->gid || eg != sp->gid || sg != sp->gid)
		child_fail(sp, "verify gid");
	if (getgroups(0, NULL) != 0)
		child_fail(sp, "verify groups");
	if (sup_caps_read(&cs) < 0 || cs.effective || cs.permitted || cs.inheritable ||
	    cs.bounding || cs.ambient)
		child_fail(sp, "verify capabilities");
	if (setresuid(0, 0, 0) == 0 || setuid(0) == 0) {
		errno = EPERM;
		child_fail(sp, "verify uid 0 cannot be regained");
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		child_fail(sp, "no_new_privs");
}

static __attribute__((noreturn)) void child_exec(const struct sup_spawn *sp, pid_t parent)
{
	if (setsid() < 0)
		child_fail(sp, "setsid");
	reset_signals(sp);
	setup_fds(sp);
	if (sp->drop_privilege)
		drop_privilege(sp);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		child_fail(sp, "parent-death signal");
	if (getppid() != parent) { /* the supervisor died before the line above */
		errno = ESRCH;
		child_fail(sp, "parent gone");
	}
	execve(sp->path, sp->argv, child_env);
	child_fail(sp, "execve");
}

pid_t sup_spawn(const struct sup_spawn *sp)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid == 0)
		child_exec(sp, parent);
	return pid;
}
