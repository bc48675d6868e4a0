/*
 * The job loop both runners share: one datagram per job on fd 3 (a struct
 * rn_job, proto/rn_job.h) with its descriptors, checked for form and handed to
 * the runner's own take(). Runs in sepcsi-runner and sepcsi-tree-runner after
 * their start checks and filter (rn_main). A malformed job, or one of a kind
 * this runner does not serve, is dropped: the requester sees its answer
 * socket close. The loop ends when the helper closes fd 3.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "runner.h"

/* A job of a kind role serves, with its fds; arguments NUL-terminated and printable. */
static bool job_ok(const struct rn_role *role, const struct rn_job *j, uint32_t nfds)
{
	if (j->kind >= role->nkinds || role->fds[j->kind] == 0 || nfds != role->fds[j->kind] ||
	    j->nfds != nfds || j->size > (uint64_t)INT64_MAX)
		return false;
	if (j->kind != RN_TOOL)
		return true;
	if (j->tool >= RN_TOOL_COUNT || j->argc < 1 || j->argc >= RN_ARGS_MAX)
		return false;
	for (uint32_t i = 0; i < j->argc; i++) {
		const char *a = j->argv[i];
		size_t n = strnlen(a, RN_ARG_LEN);
		if (n == 0 || n == RN_ARG_LEN)
			return false;
		for (size_t k = 0; k < n; k++)
			if ((unsigned char)a[k] < 0x20 || a[k] == 0x7f)
				return false;
	}
	return true;
}

void rn_send_answer(int sock, const struct rn_answer *a)
{
	(void)!send(sock, a, sizeof(*a), MSG_NOSIGNAL);
}

void rn_answer_exit(int sock, const struct rn_answer *a)
{
	rn_send_answer(sock, a);
	_exit(0);
}

/* Asked between chunks of a copy, and between entries of a walk. */
bool rn_hung_up(int sock)
{
	struct pollfd p = {.fd = sock, .events = 0};
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

static pid_t runner_pid;
static bool log_only;

bool rn_seccomp_log_only(void)
{
	return log_only;
}

int rn_fork_job(void)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	/* Nothing outlives the helper: the job dies with the runner. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != runner_pid)
		_exit(1);
	(void)signal(SIGCHLD, SIG_DFL); /* the runner ignores it; a job waits */
	close(RN_FD_JOBS);
	return 0;
}

void rn_thread(void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	if (pthread_attr_init(&attr) != 0)
		abort();
	if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
	    pthread_create(&t, &attr, fn, arg) != 0)
		fn(arg); /* no thread to be had: here, then */
	pthread_attr_destroy(&attr);
}

/* Serve jobs on sock until the helper closes it. */
static void __attribute__((noreturn)) serve(const struct rn_role *role, int sock)
{
	for (;;) {
		static struct rn_job j;
		int fds[RN_FDS_MAX] = {-1, -1, -1};
		union {
			char buf[CMSG_SPACE(sizeof(fds))];
			struct cmsghdr align;
		} u;
		struct iovec iov = {.iov_base = &j, .iov_len = sizeof(j)};
		struct msghdr m = {.msg_iov = &iov,
		                   .msg_iovlen = 1,
		                   .msg_control = u.buf,
		                   .msg_controllen = sizeof(u.buf)};
		ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
		if (n == 0 || (n < 0 && errno != EINTR))
			_exit(0); /* the helper is gone */
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		uint32_t nfds = 0;
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len <= CMSG_LEN(sizeof(fds))) {
			nfds = (uint32_t)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			memcpy(fds, CMSG_DATA(c), nfds * sizeof(int));
		}
		if (n == (ssize_t)sizeof(j) && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
		    job_ok(role, &j, nfds))
			role->take(&j, fds);
		for (int i = 0; i < RN_FDS_MAX; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
}

int rn_main(int argc, char **argv, const struct rn_role *role)
{
	static const struct option opts[] = {
	    {"log-format", required_argument, NULL, 'f'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"seccomp-log-only", no_argument, NULL, 's'},
	    {NULL, 0, NULL, 0},
	};
	enum log_format fmt = LOG_FMT_TEXT;
	enum log_level lvl = LOG_LVL_INFO;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if ((c == 'f' && log_parse_format(optarg, &fmt) == 0) ||
		    (c == 'l' && log_parse_level(optarg, &lvl) == 0))
			continue;
		if (c == 's') {
			log_only = true;
			continue;
		}
		fprintf(stderr,
		        "usage: %s [--log-format F] [--log-level L] [--seccomp-log-only]\n"
		        "Started by sepcsi-mounthelper only.\n",
		        role->program);
		return 1;
	}
	log_init(role->log_name, fmt, lvl);
	/* Started by the helper only, with no_new_privs and its job socket on fd 3. */
	struct stat st;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 || fstat(RN_FD_JOBS, &st) < 0 ||
	    !S_ISSOCK(st.st_mode))
		log_fatal("not started by sepcsi-mounthelper (no_new_privs and fd 3 expected)");
	/* Not dumpable (its exec made it so again): no other root process opens its memory. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_fatal("PR_SET_DUMPABLE: %s", strerror(errno));
	runner_pid = getpid();
	(void)signal(SIGCHLD, SIG_IGN); /* job children reap themselves */
	if (pol_seccomp_install(role->filter, log_only) < 0)
		log_fatal("cannot install the seccomp filter");
	serve(role, RN_FD_JOBS);
}
