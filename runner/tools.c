/*
 * sepcsi-runner, the tools runner: the helper's hands for work on image files
 * that needs no privilege at all, always on descriptors the helper opened and
 * passed (proto/rn_job.h); it opens no path of its own. It runs the mkfs
 * tools, sizes image files and copies them, finds what the data directory's
 * file system can do, and reads what an image or a device holds (signature.c:
 * libblkid and the ext4 superblock, the only code that parses bytes a tenant
 * wrote, here because this process holds no capability), under the tools'
 * filter (policy/seccomp_tools.c: exec and file I/O; no mount API, loop
 * ioctl, xattr, mknod or network call).
 *
 * The helper starts it at its own start, before confining itself: a forked
 * child leaves the helper's view (kubelet's directories, the base
 * directories, the data directory, /sys and the loop nodes are not there),
 * empties every capability set, locks the securebits, sets no_new_privs and
 * execs this program on a descriptor (docs/helper.md). It then installs its
 * filter and serves jobs from fd 3 (serve.c). For each tool or copy it forks
 * a child, so a long one never holds up the next job; the child answers on
 * the job's own answer socket. If the requester goes away (the helper's
 * worker gave up, or died), that socket hangs up: the child kills its tool,
 * or stops its copy. Sizing a file (two calls) runs in a thread instead: a
 * fork would cost more than the job. Reading a signature runs in a child of
 * its own under a narrower filter still (probe_child). It ends with the
 * helper (PR_SET_PDEATHSIG, set before the exec) or when fd 3 closes.
 *
 * Why a program of its own: none of this needs the helper's CAP_SYS_ADMIN, so
 * it is not part of the privileged helper an auditor reads first, and the
 * tree runner (tree.c), which holds file capabilities, links none of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner.h"

static const char *const tool_paths[RN_TOOL_COUNT] = {
    [RN_MKFS_EXT4] = "/sbin/mkfs.ext4",
    [RN_MKFS_XFS] = "/sbin/mkfs.xfs",
    [RN_MKFS_BTRFS] = "/sbin/mkfs.btrfs",
};

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
		rn_answer_exit(sock, &a);
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
		rn_answer_exit(sock, &a);
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
	rn_answer_exit(sock, &a);
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

/*
 * RN_SIGNATURE, in a child of its own for each probe: libblkid parses bytes a
 * tenant wrote, so what it runs in keeps nothing of any other job. The child
 * holds only the answer socket, on PROBE_ANSWER_FD, and a read-only descriptor
 * of the one image or device (opened again through /proc/self/fd, the job's
 * own closed), on PROBE_IMAGE_FD: nothing else, not even stdio. It has an alarm
 * of PROBE_SECONDS, and installs the probe filter (policy/seccomp_tools.c:
 * reads, anonymous memory, the answer on its fixed descriptor) over the
 * tools' before the first read.
 * Not a thread: threads reading beside the forks of tool jobs fault on every
 * page each fork makes copy-on-write (twice the time for 8 concurrent stages,
 * docs/benchmarks.md); nor the loop itself: one stuck probe would hold up every
 * volume's jobs.
 */
#define PROBE_SECONDS   60
#define PROBE_ANSWER_FD POL_SC_PROBE_ANSWER_FD
#define PROBE_IMAGE_FD  (POL_SC_PROBE_ANSWER_FD + 1)

static void __attribute__((noreturn)) probe_child(int sock, int fd)
{
	struct rn_answer a = {0};
	char self[32];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	int ro = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (ro < 0) {
		a.err = errno;
		rn_answer_exit(sock, &a);
	}
	close(fd);
	/* The two on their fixed numbers (moved above them first), every other one closed. */
	int s = fcntl(sock, F_DUPFD, 16), i = fcntl(ro, F_DUPFD, 16);
	if (s < 0 || i < 0 || dup2(s, PROBE_ANSWER_FD) < 0 || dup2(i, PROBE_IMAGE_FD) < 0 ||
	    close_range(0, PROBE_ANSWER_FD - 1, 0) < 0 ||
	    close_range(PROBE_IMAGE_FD + 1, ~0U, 0) < 0)
		_exit(1);
	alarm(PROBE_SECONDS);
	if (pol_seccomp_install(&pol_sc_probe, rn_seccomp_log_only()) < 0)
		_exit(1);
	rn_signature(PROBE_IMAGE_FD, &a);
	rn_answer_exit(PROBE_ANSWER_FD, &a);
}

/*
 * RN_BLOCKS, in a child of its own for each page: it holds only the job's
 * three descriptors (on 3, 4 and 5; stdio kept for a crash's message), none
 * the runner holds for other jobs, and has BLOCKS_SECONDS to answer.
 */
#define BLOCKS_SECONDS 600

static void __attribute__((noreturn)) blocks_child(const struct rn_job *j, const int *fds)
{
	int moved[3];
	for (int i = 0; i < 3; i++)
		if ((moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16)) < 0)
			_exit(1);
	for (int i = 0; i < 3; i++)
		if (dup2(moved[i], 3 + i) < 0)
			_exit(1);
	if (close_range(6, ~0U, 0) < 0)
		_exit(1);
	alarm(BLOCKS_SECONDS);
	rn_blocks(j, (const int[]){3, 4, 5});
	_exit(0);
}

/* A job run in a thread: a copy of the job and its descriptors. */
struct thread_job {
	struct rn_job j;
	int fds[2];
};

static void *thread_job(void *arg)
{
	struct thread_job *t = arg;
	struct rn_answer a = file_job(&t->j, t->fds);
	rn_send_answer(t->fds[0], &a);
	close(t->fds[0]);
	close(t->fds[1]);
	free(t);
	return NULL;
}

/* The descriptors each kind of job carries, the answer socket first; 0: the tree runner's. */
static const uint32_t job_fds[] = {
    [RN_TOOL] = 3,  [RN_SIZE] = 2,      [RN_COPY] = 3,
    [RN_PROBE] = 3, [RN_SIGNATURE] = 2, [RN_BLOCKS] = 3,
};

static void take(const struct rn_job *j, int fds[RN_FDS_MAX])
{
	if (j->kind == RN_PROBE) {
		struct rn_answer a = probe_files(fds[1], fds[2]); /* once, at the start */
		rn_send_answer(fds[0], &a);
	} else if (j->kind == RN_SIGNATURE) {
		if (rn_fork_job() == 0)
			probe_child(fds[0], fds[1]);
	} else if (j->kind == RN_BLOCKS) {
		if (rn_fork_job() == 0)
			blocks_child(j, fds);
	} else if (j->kind == RN_SIZE) {
		struct thread_job *t = malloc(sizeof(*t));
		if (!t)
			abort();
		t->j = *j;
		t->fds[0] = fds[0];
		t->fds[1] = fds[1];
		fds[0] = fds[1] = -1;
		rn_thread(thread_job, t);
	} else if (rn_fork_job() == 0) {
		if (j->kind == RN_TOOL)
			run_tool(j, fds);
		struct rn_answer a = file_job(j, fds);
		rn_answer_exit(fds[0], &a);
	}
}

static const struct rn_role tools_role = {
    .program = "sepcsi-runner",
    .log_name = "runner",
    .filter = &pol_sc_tools,
    .fds = job_fds,
    .nkinds = sizeof(job_fds) / sizeof(job_fds[0]),
    .take = take,
};

int main(int argc, char **argv)
{
	return rn_main(argc, argv, &tools_role);
}
