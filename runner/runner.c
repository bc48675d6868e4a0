/*
 * sepcsi-runner: the helper's hands for work that needs no mount privilege,
 * always on descriptors the helper opened and passed (proto/rn_job.h); it
 * opens no path of its own. The helper starts two of them, each confined on
 * its own:
 *
 *  - the tools runner runs the mkfs tools, sizes image files and copies them,
 *    with no capability at all, under the tools' filter (policy/seccomp_tools.c:
 *    exec and file I/O; no mount API, loop ioctl, xattr, mknod or network call);
 *  - the tree runner (--tree, only with directory volumes) empties and copies
 *    a directory volume's tree (tree.c), with the four file capabilities that
 *    work on files of other owners needs (CAP_DAC_OVERRIDE, CAP_FOWNER,
 *    CAP_FSETID, CAP_CHOWN) and nothing else, under the tree's filter (file
 *    calls on descriptors; no exec, no mount API, no loop ioctl).
 *
 * The helper starts each at its own start, before confining itself: a forked
 * child leaves the helper's view (kubelet's directories, the base
 * directories, the data directory, /sys and the loop nodes are not there; for
 * the tree runner not /proc either), sets its capabilities
 * (policy/caps.c), locks the securebits, sets no_new_privs and execs this
 * program on a descriptor (docs/helper.md). Here it installs its filter and
 * serves jobs from fd 3, one datagram each. For each tool, copy or tree job it
 * forks a child, so a long one never holds up the next job; the child answers
 * on the job's own answer socket. If the requester goes away (the helper's
 * worker gave up, or died), that socket hangs up: the child kills its tool,
 * or stops its copy or walk. Sizing a file (two calls) runs in a thread
 * instead: a fork would cost more than the job. A malformed job, or one of
 * the other runner's kinds, is dropped (the requester sees its answer socket
 * close). A runner ends with the helper (PR_SET_PDEATHSIG, set before the
 * exec) or when fd 3 closes.
 *
 * Why a program of its own: none of this needs the helper's CAP_SYS_ADMIN, so
 * it is not part of the privileged helper an auditor reads first
 * (tools/helper_size.py counts it apart).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "pol_seccomp.h"
#include "runner.h"

#define COPY_CHUNK (64 << 20) /* copy_file_range per call: a hang-up is noticed between */
#define BUF_CHUNK  (1 << 20)  /* the read/write fallback's buffer */

static const char *const tool_paths[RN_TOOL_COUNT] = {
    [RN_MKFS_EXT4] = "/sbin/mkfs.ext4",
    [RN_MKFS_XFS] = "/sbin/mkfs.xfs",
    [RN_MKFS_BTRFS] = "/sbin/mkfs.btrfs",
};

/* The descriptors each kind of job carries, the answer socket first. */
static const uint32_t job_fds[] = {[RN_TOOL] = 3,  [RN_SIZE] = 2,       [RN_COPY] = 3,
                                   [RN_PROBE] = 3, [RN_TREE_EMPTY] = 2, [RN_TREE_COPY] = 3};

/* Which runner this is: the tools runner serves RN_TOOL to RN_PROBE, the tree runner the rest. */
static bool tree_runner;

/*
 * A job from the helper, of a kind this runner serves, with its fds;
 * arguments NUL-terminated and printable.
 */
static bool job_ok(const struct rn_job *j, uint32_t nfds)
{
	bool tree = j->kind == RN_TREE_EMPTY || j->kind == RN_TREE_COPY;
	if (j->kind < RN_TOOL || j->kind > RN_TREE_COPY || tree != tree_runner ||
	    nfds != job_fds[j->kind] || j->nfds != nfds)
		return false;
	if (j->kind != RN_TOOL)
		return j->size <= (uint64_t)INT64_MAX;
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

/* The job's one answer; a requester that has gone away gets none. */
static void send_answer(int sock, const struct rn_answer *a)
{
	(void)!send(sock, a, sizeof(*a), MSG_NOSIGNAL);
}

/* In a job's child: answer, and end. */
static void __attribute__((noreturn)) answer(int sock, const struct rn_answer *a)
{
	send_answer(sock, a);
	_exit(0);
}

/* Has the requester gone away? Asked between chunks of a copy. */
bool rn_hung_up(int sock)
{
	struct pollfd p = {.fd = sock, .events = 0};
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR));
}

/*
 * In the job's child: start the tool on the image, wait for it or for the
 * requester to leave. The tool finds the image on its fd 3 and names it
 * RN_TOOL_TARGET, its last argument; it has no other way to any image, the
 * data directory not being in the runner's view. Its working directory is the
 * runner's, the view's root (the helper's after pivot_root).
 */
static void __attribute__((noreturn)) run_tool(const struct rn_job *j, const int *fds)
{
	static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	char *argv[RN_ARGS_MAX + 1]; /* argc < RN_ARGS_MAX, the target, NULL */
	int sock = fds[0], img = fds[1], out = fds[2];
	struct rn_answer a = {.status = -1};
	struct stat st;
	for (uint32_t i = 0; i < j->argc; i++)
		argv[i] = (char *)j->argv[i];
	argv[j->argc] = (char *)RN_TOOL_TARGET;
	argv[j->argc + 1] = NULL;
	if (fstat(img, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (fcntl(img, F_GETFL) & O_ACCMODE) != O_RDWR) {
		close(out);
		answer(sock, &a);
	}
	pid_t job = getpid(), pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		sigset_t none;
		sigemptyset(&none);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != job ||
		    devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0 ||
		    dup2(img, 3) < 0 || close_range(4, ~0U, 0) < 0 ||
		    sigprocmask(SIG_SETMASK, &none, NULL) < 0)
			_exit(126);
		execve(tool_paths[j->tool], argv, envp);
		_exit(127);
	}
	close(out); /* the requester sees EOF when the tool (and what it forked) is done */
	if (pid < 0)
		answer(sock, &a);
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	struct pollfd p[2] = {{.fd = pfd, .events = POLLIN}, {.fd = sock, .events = 0}};
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
	while (waitpid(pid, &a.status, 0) < 0 && errno == EINTR)
		;
	answer(sock, &a);
}

/* Copy [off, off + len) of src to the same offset of dst; 0 or an errno. */
static int copy_range(int src, int dst, off_t off, off_t len, int sock)
{
	off_t in = off, out = off, end = off + len;
	static char *buf;
	while (in < end) {
		ssize_t n;
		size_t want = (size_t)(end - in);
		if (rn_hung_up(sock))
			return ECANCELED;
		if (!buf) {
			n = copy_file_range(src, &in, dst, &out,
			                    want < COPY_CHUNK ? want : COPY_CHUNK, 0);
			if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS ||
			              errno == EINVAL)) {
				buf = malloc(BUF_CHUNK); /* the kernel will not: copy by hand */
				if (!buf)
					return ENOMEM;
				continue;
			}
		} else {
			n = pread(src, buf, want < BUF_CHUNK ? want : BUF_CHUNK, in);
			if (n > 0 && pwrite(dst, buf, (size_t)n, out) != n)
				n = -1;
			if (n > 0) {
				in += n;
				out += n;
			}
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : 0; /* 0: the source shrank */
	}
	return 0;
}

/* Fill the new, empty dst with src: a reflink if the file system can, else its data extents. */
int rn_copy_file(int src, int dst, int sock, uint32_t *reflinked)
{
	struct stat st;
	if (fstat(src, &st) < 0)
		return errno;
	if (ioctl(dst, FICLONE, src) == 0) {
		*reflinked = 1;
		return 0;
	}
	if (errno != EOPNOTSUPP && errno != EXDEV && errno != EINVAL && errno != ENOTTY)
		return errno;
	if (ftruncate(dst, st.st_size) < 0)
		return errno;
	for (off_t off = 0; off < st.st_size;) {
		off_t data = lseek(src, off, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		off_t hole = data < 0 ? -1 : lseek(src, data, SEEK_HOLE);
		if (data < 0 || hole < 0)
			return errno;
		if (hole > st.st_size)
			hole = st.st_size;
		int err = copy_range(src, dst, data, hole - data, sock);
		if (err)
			return err;
		off = hole;
	}
	return 0;
}

/*
 * What the data directory's file system can do, found with two empty unnamed
 * files the helper made there (O_TMPFILE: nothing is left behind): FICLONE of
 * one block, and the largest size ftruncate accepts (bisection to 4 KiB; a
 * sparse file allocates nothing).
 */
static struct rn_answer probe_files(int x, int y)
{
	static const char block[4096];
	struct rn_answer a = {0};
	struct stat sx, sy;
	uint64_t lo = 0, hi = (uint64_t)1 << 62;
	if (fstat(x, &sx) < 0 || fstat(y, &sy) < 0 || !S_ISREG(sx.st_mode) ||
	    !S_ISREG(sy.st_mode) || sx.st_size != 0 || sy.st_size != 0 || sx.st_nlink != 0 ||
	    sy.st_nlink != 0) {
		a.err = EINVAL; /* only empty unnamed files: never one of the volumes' images */
		return a;
	}
	a.reflinked =
	    write(x, block, sizeof(block)) == (ssize_t)sizeof(block) && ioctl(y, FICLONE, x) == 0;
	while (hi - lo > 4096) {
		uint64_t mid = (lo + (hi - lo) / 2) & ~(uint64_t)4095;
		if (ftruncate(x, (off_t)mid) == 0)
			lo = mid;
		else
			hi = mid;
	}
	a.bytes = lo;
	return a;
}

/* Size or copy a file the helper opened; the answer says how it went. */
static struct rn_answer file_job(const struct rn_job *j, const int *fds)
{
	struct rn_answer a = {0};
	int sock = fds[0], dst = j->kind == RN_COPY ? fds[2] : fds[1];
	struct stat st;
	if (fstat(dst, &st) < 0 || !S_ISREG(st.st_mode))
		a.err = EINVAL;
	else if (j->kind == RN_COPY)
		a.err = rn_copy_file(fds[1], dst, sock, &a.reflinked);
	/* Grow to the size asked for: never shrink (a copy is at least its source's size). */
	if (!a.err && fstat(dst, &st) == 0 && (uint64_t)st.st_size < j->size &&
	    ftruncate(dst, (off_t)j->size) < 0)
		a.err = errno;
	if (!a.err && fsync(dst) < 0)
		a.err = errno;
	return a;
}

struct size_job {
	struct rn_job j;
	int fds[2];
};

static void *size_job(void *arg)
{
	struct size_job *s = arg;
	struct rn_answer a = file_job(&s->j, s->fds);
	send_answer(s->fds[0], &a);
	close(s->fds[0]);
	close(s->fds[1]);
	free(s);
	return NULL;
}

/*
 * RN_SIZE: two calls on one fresh file, not worth a process of its own; in a
 * thread, so that its fsync holds up no other job. Takes the job's fds.
 */
static void size_job_start(const struct rn_job *j, const int *fds)
{
	pthread_attr_t attr;
	pthread_t t;
	struct size_job *s = malloc(sizeof(*s));
	if (!s || pthread_attr_init(&attr) != 0)
		abort();
	s->j = *j;
	s->fds[0] = fds[0];
	s->fds[1] = fds[1];
	if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
	    pthread_create(&t, &attr, size_job, s) != 0)
		size_job(s); /* no thread to be had: here, then */
	pthread_attr_destroy(&attr);
}

/* Serve jobs on fd 3 until the helper closes it. */
static void __attribute__((noreturn)) serve(int sock)
{
	pid_t runner = getpid();
	for (;;) {
		static struct rn_job j;
		int fds[3] = {-1, -1, -1};
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
		bool ok = n == (ssize_t)sizeof(j) && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
		          job_ok(&j, nfds);
		if (ok && j.kind == RN_PROBE) {
			struct rn_answer a = probe_files(fds[1], fds[2]); /* once, at the start */
			send_answer(fds[0], &a);
		} else if (ok && j.kind == RN_SIZE) {
			size_job_start(&j, fds); /* takes the fds */
			continue;
		} else if (ok && fork() == 0) {
			/* Nothing outlives the helper: the job dies with the runner. */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != runner)
				_exit(1);
			(void)signal(SIGCHLD, SIG_DFL); /* the runner ignores it; a job waits */
			close(sock);
			if (j.kind == RN_TOOL)
				run_tool(&j, fds);
			struct rn_answer a = {0};
			if (j.kind == RN_TREE_EMPTY)
				rn_tree_empty(fds[0], fds[1], &a);
			else if (j.kind == RN_TREE_COPY)
				rn_tree_copy(fds[0], fds[1], fds[2], &a);
			else
				a = file_job(&j, fds);
			answer(fds[0], &a);
		}
		for (int i = 0; i < 3; i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"log-format", required_argument, NULL, 'f'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"seccomp-log-only", no_argument, NULL, 's'},
	    {"tree", no_argument, NULL, 't'},
	    {NULL, 0, NULL, 0},
	};
	enum log_format fmt = LOG_FMT_TEXT;
	enum log_level lvl = LOG_LVL_INFO;
	bool log_only = false;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if ((c == 'f' && log_parse_format(optarg, &fmt) == 0) ||
		    (c == 'l' && log_parse_level(optarg, &lvl) == 0))
			continue;
		if (c == 's' || c == 't') {
			*(c == 's' ? &log_only : &tree_runner) = true;
			continue;
		}
		fprintf(stderr, "usage: sepcsi-runner [--tree] [--log-format F] [--log-level L] "
		                "[--seccomp-log-only]\nStarted by sepcsi-mounthelper only.\n");
		return 1;
	}
	log_init(tree_runner ? "tree-runner" : "runner", fmt, lvl);
	/*
	 * Started by the helper only, with no_new_privs: the tools runner with no
	 * capability, the tree runner with the tree's file capabilities only.
	 */
	struct stat st;
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1 || fstat(RN_FD_JOBS, &st) < 0 ||
	    !S_ISSOCK(st.st_mode))
		log_fatal("not started by sepcsi-mounthelper (no_new_privs and fd 3 expected)");
	(void)signal(SIGCHLD, SIG_IGN); /* job children reap themselves */
	if (pol_seccomp_install(tree_runner ? &pol_sc_tree : &pol_sc_tools, log_only) < 0)
		log_fatal("cannot install the seccomp filter");
	serve(RN_FD_JOBS);
}
