/*
 * Signature probing (libblkid) and formatting (mkfs.* in a child process).
 *
 * Runs in a worker of the helper as root with the helper's capabilities under
 * seccomp; the mkfs child runs under the same filter with no capability at
 * all. Nothing here is fatal.
 *
 * Safety argument. Data loss is the risk here, so formatting needs proof that
 * the device is blank: libblkid's safe probe with superblocks AND partition
 * tables enabled must report nothing. Any signature other than the requested
 * filesystem, a partition table, or an ambivalent result (two signatures) is
 * refused with MH_E_EXISTS and the device is left untouched. The device is a
 * loop device backed by one of our own images (mh_loop.c), never a path from
 * rpcd.
 *
 * The mkfs child formats the image FILE (relative to the images directory, its
 * working directory), never a block device: mkfs.xfs on a block device needs
 * BLKBSZSET, i.e. CAP_SYS_ADMIN, and the tool must hold no capability. The
 * blocks the probe cached on the loop device are then dropped by the caller.
 * The tool is exec'd by absolute path from a fixed table, with
 * a fixed argument vector and environment, stdin from /dev/null (a prompt reads
 * EOF and fails), stdout and stderr into a pipe we keep for the error reason,
 * every other fd closed, PR_SET_PDEATHSIG so it cannot outlive the helper. It
 * drops its own capabilities before exec (capset to empty); and even without
 * that, the locked securebits (SECBIT_NOROOT) and empty inheritable/ambient
 * sets mean exec by uid 0 grants nothing. It inherits the seccomp filter: no
 * network, no mount, no namespace, no ptrace. It is killed after a timeout.
 */
#include "mh_mkfs.h"

#include <blkid/blkid.h>
#include <cap-ng.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define MKFS_TIMEOUT_MS (15L * 60 * 1000) /* a huge sparse xfs can discard for a while */
#define MKFS_OUTPUT_MAX 4096

/* The only programs the helper ever runs. Debian (merged /usr) installs them in /sbin. */
static const struct {
	const char *fstype;
	const char *path;
	const char *const argv[4]; /* the device is appended */
} mkfs_tools[] = {
    {"ext4", "/sbin/mkfs.ext4", {"mkfs.ext4", "-q", NULL}},
    {"xfs", "/sbin/mkfs.xfs", {"mkfs.xfs", "-q", NULL}},
    {"btrfs", "/sbin/mkfs.btrfs", {"mkfs.btrfs", "-q", NULL}},
};

int mh_probe(int devfd, const char *want, struct mh_res *r)
{
	blkid_probe pr = blkid_new_probe();
	const char *type = NULL, *pttype = NULL;
	int ret = -1;
	if (!pr)
		return mh_fail(r, MH_E_FAILED, ENOMEM, "blkid_new_probe failed");
	if (blkid_probe_set_device(pr, devfd, 0, 0) != 0) {
		mh_fail(r, MH_E_FAILED, errno, "blkid cannot use the device");
		goto out;
	}
	blkid_probe_enable_superblocks(pr, 1);
	blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
	blkid_probe_enable_partitions(pr, 1);

	int rc = blkid_do_safeprobe(pr);
	if (rc == 1) {
		ret = MH_PROBE_BLANK;
		goto out;
	}
	if (rc == -2) {
		mh_fail(r, MH_E_EXISTS, 0, "device carries ambivalent signatures; not touched");
		goto out;
	}
	if (rc != 0) {
		mh_fail(r, MH_E_FAILED, errno, "blkid probe failed");
		goto out;
	}
	blkid_probe_lookup_value(pr, "TYPE", &type, NULL);
	blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL);
	if (pttype)
		mh_fail(r, MH_E_EXISTS, 0, "device carries a %s partition table; not touched",
		        pttype);
	else if (!type)
		mh_fail(r, MH_E_EXISTS, 0, "device carries an unidentified signature; not touched");
	else if (strcmp(type, want) != 0)
		mh_fail(r, MH_E_EXISTS, 0, "device already holds %s, not %s; not touched", type,
		        want);
	else
		ret = MH_PROBE_MATCH;
out:
	blkid_free_probe(pr);
	return ret;
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/*
 * In the child, between fork and exec. The helper is single-threaded, so the
 * child could call anything; it keeps to a few system calls, then exec or _exit.
 */
static void __attribute__((noreturn))
child_exec(pid_t parent, int dirfd, int devnull, int out, const char *path, char *const argv[])
{
	static char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(126);
	if (fchdir(dirfd) < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(126);
	if (close_range(3, ~0U, 0) < 0)
		_exit(126);
	/* The helper blocks SIGTERM/SIGINT outside its poll; the tool starts clean. */
	sigset_t none;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		_exit(126);
	/* No capability survives into the tool, whatever its file carries. */
	capng_clear(CAPNG_SELECT_CAPS);
	if (capng_apply(CAPNG_SELECT_CAPS) != 0)
		_exit(126);
	execve(path, argv, envp);
	_exit(127);
}

/* Read the child's output until EOF or the deadline; keep the first MKFS_OUTPUT_MAX bytes. */
static bool collect_output(int fd, char *buf, size_t cap, size_t *len)
{
	long deadline = now_ms() + MKFS_TIMEOUT_MS;
	*len = 0;
	for (;;) {
		long left = deadline - now_ms();
		if (left <= 0)
			return false;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int n = poll(&p, 1, (int)(left > 60000 ? 60000 : left));
		if (n < 0 && errno != EINTR)
			return false;
		if (n <= 0)
			continue;
		char tmp[512];
		ssize_t got = read(fd, tmp, sizeof(tmp));
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return true; /* EOF: the tool (and anything it forked) closed its output */
		size_t keep = (size_t)got < cap - 1 - *len ? (size_t)got : cap - 1 - *len;
		memcpy(buf + *len, tmp, keep);
		*len += keep;
	}
}

/* Squash the tool's output into one printable line for the reason field. */
static void one_line(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = ' ';
}

int mh_mkfs(const char *fstype, char *const *args, size_t nargs, int dirfd, const char *name,
            struct mh_res *r)
{
	size_t t;
	for (t = 0; t < sizeof(mkfs_tools) / sizeof(mkfs_tools[0]); t++)
		if (strcmp(mkfs_tools[t].fstype, fstype) == 0)
			break;
	if (t == sizeof(mkfs_tools) / sizeof(mkfs_tools[0]))
		return mh_fail(r, MH_E_REFUSED, EINVAL, "no mkfs for %s", fstype);

	char *argv[8 + POL_MKFS_ARGS_MAX];
	size_t argc = 0;
	if (nargs > POL_MKFS_ARGS_MAX)
		return mh_fail(r, MH_E_REFUSED, E2BIG, "too many mkfs options");
	for (; mkfs_tools[t].argv[argc]; argc++)
		argv[argc] = (char *)mkfs_tools[t].argv[argc];
	for (size_t i = 0; i < nargs; i++)
		argv[argc++] = args[i]; /* each one exactly an allowlist entry */
	argv[argc++] = (char *)name;    /* relative to dirfd, the child's working directory */
	argv[argc] = NULL;

	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int pipefd[2] = {-1, -1};
	if (devnull < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		int err = errno;
		mh_closep(&devnull);
		return mh_fail(r, MH_E_FAILED, err, "mkfs setup: %s", strerror(err));
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0)
		child_exec(parent, dirfd, devnull, pipefd[1], mkfs_tools[t].path, argv);
	int fork_err = errno;
	mh_closep(&devnull);
	mh_closep(&pipefd[1]);
	if (pid < 0) {
		mh_closep(&pipefd[0]);
		return mh_fail(r, MH_E_FAILED, fork_err, "fork: %s", strerror(fork_err));
	}

	char out[MKFS_OUTPUT_MAX];
	size_t len;
	bool finished = collect_output(pipefd[0], out, sizeof(out), &len);
	out[len] = '\0';
	mh_closep(&pipefd[0]);
	if (!finished)
		kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (finished && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;

	one_line(out);
	log_kv(LOG_LVL_WARN, "mkfs_failed", "tool", mkfs_tools[t].path, "image", name, "output",
	       out, NULL);
	if (!finished)
		return mh_fail(r, MH_E_FAILED, ETIMEDOUT, "%s timed out", argv[0]);
	if (WIFSIGNALED(status))
		return mh_fail(r, MH_E_FAILED, 0, "%s killed by signal %d: %s", argv[0],
		               WTERMSIG(status), out);
	return mh_fail(r, MH_E_FAILED, 0, "%s exited with status %d: %s", argv[0],
	               WEXITSTATUS(status), out);
}
