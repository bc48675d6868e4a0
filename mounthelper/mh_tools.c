/*
 * The tool runner: the one process on the helper's side that may execve, and
 * it holds no capability at all.
 *
 * The helper's own seccomp filter has no execve, and a filter can only be
 * narrowed, never widened, by a descendant: so the mkfs tools cannot be
 * started by the helper or its workers. Instead the helper forks this runner
 * at start, before it confines itself; the runner empties every capability
 * set (bounding included), locks the securebits, sets no_new_privs and
 * installs the tools' own filter (policy/seccomp_helper.c, pol_sc_tools: exec
 * and file I/O, but no mount API, loop ioctl, xattr, mknod or network call).
 * It then serves jobs: one datagram naming a tool from the fixed table below
 * and its arguments (each already an allowlist entry of the policy, checked
 * again here for form), with three descriptors: the directory the tool runs
 * in (the images directory), the write end of a pipe for its output, and a
 * private answer socket. For each job it forks a child that starts the tool
 * (stdio on the pipe, in that directory, every other fd closed, signals
 * unblocked) and waits for it; the exit status goes back on the answer
 * socket. If the requester goes away (the worker gave up, or died), the
 * answer socket hangs up and the child kills the tool through its pidfd.
 *
 * Runs as uid 0 with no capability, in a view of its own: the helper's less
 * kubelet's directories, /sys and the loop nodes (own_view). /proc stays:
 * mkfs.btrfs reads /proc/self/mounts to refuse a mounted target, and with no
 * capability the runner cannot look into the helper's processes through it. A job
 * that is malformed is dropped (the worker sees its answer socket close); the
 * runner itself ends with the helper (PR_SET_PDEATHSIG) or when its socket
 * closes.
 */
#include "mh_tools.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pol_caps.h"
#include "pol_seccomp.h"
#include "policy.h"

#define TOOL_ARGS_MAX 24
#define TOOL_ARG_LEN  72

/* The only programs the helper ever runs. Debian (merged /usr) installs them in /sbin. */
static const char *const tool_paths[MH_TOOL_COUNT] = {
    [MH_TOOL_MKFS_EXT4] = "/sbin/mkfs.ext4",
    [MH_TOOL_MKFS_XFS] = "/sbin/mkfs.xfs",
    [MH_TOOL_MKFS_BTRFS] = "/sbin/mkfs.btrfs",
};

struct job {
	uint32_t tool;
	uint32_t argc;
	char argv[TOOL_ARGS_MAX][TOOL_ARG_LEN];
};

static int runner_fd = -1, runner_pidfd = -1;

/* Every argument NUL-terminated inside its slot and printable: a job from the helper. */
static bool job_ok(const struct job *j)
{
	if (j->tool >= MH_TOOL_COUNT || j->argc < 1 || j->argc > TOOL_ARGS_MAX)
		return false;
	for (uint32_t i = 0; i < j->argc; i++) {
		const char *a = j->argv[i];
		size_t n = strnlen(a, TOOL_ARG_LEN);
		if (n == 0 || n == TOOL_ARG_LEN)
			return false;
		for (size_t k = 0; k < n; k++)
			if ((unsigned char)a[k] < 0x20 || a[k] == 0x7f)
				return false;
	}
	return true;
}

/* In the job's child: start the tool, wait for it or for the requester to leave. */
static void __attribute__((noreturn)) run_job(const struct job *j, int dir, int out, int answer)
{
	static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	char *argv[TOOL_ARGS_MAX + 1];
	pid_t runner_pid = getppid();
	(void)signal(SIGCHLD, SIG_DFL); /* the runner ignores it; this child waits for its tool */
	/* Nothing outlives the helper: the job dies with the runner, the tool with the job. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != runner_pid)
		_exit(1);
	for (uint32_t i = 0; i < j->argc; i++)
		argv[i] = (char *)j->argv[i];
	argv[j->argc] = NULL;
	pid_t job = getpid(), pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		sigset_t none;
		sigemptyset(&none);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != job ||
		    devnull < 0 || fchdir(dir) < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 ||
		    dup2(out, 2) < 0 || close_range(3, ~0U, 0) < 0 ||
		    sigprocmask(SIG_SETMASK, &none, NULL) < 0)
			_exit(126);
		execve(tool_paths[j->tool], argv, envp);
		_exit(127);
	}
	close(out); /* the requester sees EOF when the tool (and what it forked) is done */
	int status = -1;
	if (pid > 0) {
		int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		struct pollfd p[2] = {{.fd = pfd, .events = POLLIN}, {.fd = answer, .events = 0}};
		for (;;) {
			if (poll(p, 2, -1) < 0 && errno != EINTR)
				break;
			if (p[0].revents)
				break; /* the tool ended */
			if (p[1].revents & (POLLHUP | POLLERR)) {
				/* The requester is gone: the tool has no one to answer to. */
				syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
				break;
			}
		}
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	(void)!send(answer, &status, sizeof(status), MSG_NOSIGNAL);
	_exit(0);
}

/*
 * The runner's view: the helper's, less what the tools never need: kubelet's
 * directories, /sys, /proc, and the helper's /dev (a /dev of its own with
 * null only). In a mount namespace of its own, made private first so that
 * nothing it takes away is taken from anyone else. Still privileged here.
 */
static int own_view(const struct pol *pol)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	for (size_t i = 0; pol_root(pol, i); i++)
		if (umount2(pol_root(pol, i), MNT_DETACH) < 0)
			return -1;
	if (umount2("/sys", MNT_DETACH) < 0)
		return -1;
	int fs = fsopen("tmpfs", FSOPEN_CLOEXEC), m = -1, ret = -1;
	if (fs >= 0 && fsconfig(fs, FSCONFIG_SET_STRING, "size", "64k", 0) == 0 &&
	    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0 &&
	    (m = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC)) >= 0 &&
	    mknodat(m, "null", S_IFCHR | 0666, makedev(1, 3)) == 0 &&
	    move_mount(m, "", AT_FDCWD, "/dev", MOVE_MOUNT_F_EMPTY_PATH) == 0)
		ret = 0;
	if (m >= 0)
		close(m);
	if (fs >= 0)
		close(fs);
	return ret;
}

static void __attribute__((noreturn)) runner(int sock, pid_t parent, const struct pol *pol)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(1);
	if (own_view(pol) < 0) {
		log_kv(LOG_LVL_ERROR, "tool_runner", "error", "cannot make its view", NULL);
		_exit(1);
	}
	if (dup2(sock, 3) < 0 || close_range(4, ~0U, 0) < 0)
		_exit(1);
	sock = 3;
	(void)signal(SIGCHLD, SIG_IGN); /* job children reap themselves */
	if (pol_caps_confine_tools() < 0 ||
	    pol_seccomp_install(&pol_sc_tools, pol_seccomp_log_only(pol)) < 0) {
		log_kv(LOG_LVL_ERROR, "tool_runner", "error", "cannot confine itself", NULL);
		_exit(1);
	}
	for (;;) {
		static struct job j;
		union {
			char buf[CMSG_SPACE(3 * sizeof(int))];
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
		int fds[3] = {-1, -1, -1};
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(fds)))
			memcpy(fds, CMSG_DATA(c), sizeof(fds));
		if (n == (ssize_t)sizeof(j) && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
		    fds[2] >= 0 && job_ok(&j) && fork() == 0) {
			close(sock);
			run_job(&j, fds[0], fds[1], fds[2]);
		}
		for (int i = 0; i < 3; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
}

void mh_tools_start(const struct pol *pol)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		log_fatal("tool runner socket: %s", strerror(errno));
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		log_fatal("fork the tool runner: %s", strerror(errno));
	if (pid == 0) {
		close(sv[0]);
		runner(sv[1], parent, pol);
	}
	close(sv[1]);
	runner_fd = sv[0];
	runner_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (runner_pidfd < 0)
		log_fatal("pidfd of the tool runner: %s", strerror(errno));
}

int mh_tools_pidfd(void)
{
	return runner_pidfd;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int mh_tools_run(enum mh_tool tool, const char *const *args, size_t nargs, int dir, char *out,
                 size_t cap, long timeout_ms, int *status, struct mh_res *r)
{
	static struct job j;
	int pipefd[2] = {-1, -1}, ans[2] = {-1, -1}, ret = -1;
	size_t len = 0;
	memset(&j, 0, sizeof(j));
	j.tool = tool;
	if (nargs > TOOL_ARGS_MAX)
		return mh_fail(r, MH_E_REFUSED, E2BIG, "too many tool arguments");
	for (size_t i = 0; i < nargs; i++)
		if (snprintf(j.argv[i], TOOL_ARG_LEN, "%s", args[i]) >= TOOL_ARG_LEN)
			return mh_fail(r, MH_E_REFUSED, E2BIG, "tool argument too long");
	j.argc = (uint32_t)nargs;
	if (pipe2(pipefd, O_CLOEXEC) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ans) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "tool setup: %s", strerror(errno));
		goto out;
	}
	int fds[3] = {dir, pipefd[1], ans[1]};
	union {
		char buf[CMSG_SPACE(sizeof(fds))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = {.iov_base = &j, .iov_len = sizeof(j)};
	struct msghdr m = {.msg_iov = &iov,
	                   .msg_iovlen = 1,
	                   .msg_control = u.buf,
	                   .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	if (sendmsg(runner_fd, &m, MSG_NOSIGNAL) != (ssize_t)sizeof(j)) {
		mh_fail(r, MH_E_FAILED, errno, "the tool runner is gone: %s", strerror(errno));
		goto out;
	}
	mh_closep(&pipefd[1]);
	mh_closep(&ans[1]);
	/* The output until EOF (the tool and what it forked are done), within the time. */
	long deadline = now_ms() + timeout_ms;
	for (;;) {
		long left = deadline - now_ms();
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		if (left <= 0) {
			mh_fail(r, MH_E_FAILED, ETIMEDOUT, "%s timed out", tool_paths[tool]);
			goto out; /* closing ans makes the runner kill the tool */
		}
		int n = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
		if (n <= 0)
			continue;
		char tmp[512];
		ssize_t got = read(pipefd[0], tmp, sizeof(tmp));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		size_t keep = (size_t)got < cap - 1 - len ? (size_t)got : cap - 1 - len;
		memcpy(out + len, tmp, keep);
		len += keep;
	}
	out[len] = '\0';
	if (recv(ans[0], status, sizeof(*status), 0) != (ssize_t)sizeof(*status)) {
		mh_fail(r, MH_E_FAILED, EPROTO, "the tool runner did not answer");
		goto out;
	}
	ret = 0;
out:
	out[len] = '\0';
	mh_closep(&pipefd[0]);
	mh_closep(&pipefd[1]);
	mh_closep(&ans[0]);
	mh_closep(&ans[1]);
	return ret;
}
