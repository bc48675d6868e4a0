/*
 * quota_emu LOG -- COMMAND [ARG...]: run COMMAND (the supervisor) with every
 * quotactl_fd(2) of it and its descendants answered by this process, for the
 * tests of project quotas on kernels that keep none (no CONFIG_XFS_QUOTA, no
 * CONFIG_QFMT_V2, as on this project's CI machines).
 *
 * A seccomp filter installed here, before the fork, sends each quotactl_fd to
 * this process (SECCOMP_RET_USER_NOTIF); the command's own filters, stacked
 * on it, still decide whether the call is allowed at all. The project quotas
 * of one file system are kept in a table: Q_GETINFO succeeds; Q_GETQUOTA of a
 * project with a limit answers it (usage 0), of another fails with ESRCH;
 * Q_SETQUOTA sets the block hard limit. Every call is appended to LOG as one
 * line, "getinfo 0 0", "getquota <id> <limit bytes>" or "setquota <id>
 * <limit bytes>", so a test can see which project the helper acted on. The
 * rest of the file-system calls (FS_IOC_FSSETXATTR, the project ids on files)
 * are the kernel's own. Exits with the command's status.
 *
 * A test tool, run as root; it trusts the command, and fails loudly.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/quota.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROJECTS_MAX 4096

static struct {
	uint32_t id;
	uint64_t limit; /* bytes */
} projects[PROJECTS_MAX];
static size_t nprojects;
static FILE *calls;

static void die(const char *what)
{
	fprintf(stderr, "quota_emu: %s: %s\n", what, strerror(errno));
	exit(125);
}

static int install_filter(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_quotactl_fd, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	                      SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0)
		die("seccomp");
	return fd;
}

static size_t find(uint32_t id)
{
	size_t i = 0;
	while (i < nprojects && projects[i].id != id)
		i++;
	return i;
}

/* Copy between this process and pid's memory; 0, or -1 (the caller is gone). */
static int peek(pid_t pid, uint64_t addr, void *buf, size_t len, int write)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	/* NOLINTNEXTLINE(performance-no-int-to-ptr): an address in the other process */
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0)
	                  : process_vm_readv(pid, &local, 1, &remote, 1, 0);
	return n == (ssize_t)len ? 0 : -1;
}

/* The answer to one quotactl_fd(fd, cmd, id, addr): 0, or a negative errno. */
static int answer(pid_t pid, unsigned cmd, uint32_t id, uint64_t addr)
{
	unsigned sub = cmd >> SUBCMDSHIFT;
	struct dqblk q;
	size_t i = find(id);
	if ((cmd & SUBCMDMASK) != PRJQUOTA)
		return -ENOSYS;
	switch (sub) {
	case Q_GETINFO: {
		struct dqinfo info = {0};
		fprintf(calls, "getinfo 0 0\n");
		return peek(pid, addr, &info, sizeof(info), 1) ? -EFAULT : 0;
	}
	case Q_GETQUOTA:
		if (i == nprojects)
			return -ESRCH;
		fprintf(calls, "getquota %u %llu\n", id, (unsigned long long)projects[i].limit);
		q = (struct dqblk){.dqb_bhardlimit = projects[i].limit / 1024,
		                   .dqb_valid = QIF_ALL};
		return peek(pid, addr, &q, sizeof(q), 1) ? -EFAULT : 0;
	case Q_SETQUOTA:
		if (peek(pid, addr, &q, sizeof(q), 0))
			return -EFAULT;
		if (i == nprojects && nprojects == PROJECTS_MAX)
			return -ENOSPC;
		if (i == nprojects)
			projects[nprojects++].id = id;
		if (q.dqb_valid & QIF_BLIMITS)
			projects[i].limit = q.dqb_bhardlimit * 1024;
		fprintf(calls, "setquota %u %llu\n", id, (unsigned long long)projects[i].limit);
		return 0;
	default:
		return -ENOSYS;
	}
}

static void serve(int listener)
{
	struct seccomp_notif_sizes sizes;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
		die("notif sizes");
	struct seccomp_notif *req = calloc(1, sizes.seccomp_notif);
	struct seccomp_notif_resp *resp = calloc(1, sizes.seccomp_notif_resp);
	if (!req || !resp)
		die("calloc");
	memset(req, 0, sizes.seccomp_notif);
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
		if (errno == EINTR || errno == ENOENT)
			goto out; /* interrupted, or the caller went away before we read it */
		die("notif recv");
	}
	int rc = answer((pid_t)req->pid, (unsigned)req->data.args[1], (uint32_t)req->data.args[2],
	                req->data.args[3]);
	fflush(calls);
	memset(resp, 0, sizes.seccomp_notif_resp);
	resp->id = req->id;
	resp->error = rc;
	resp->val = 0;
	/* The caller may have died meanwhile: then there is nobody to answer. */
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && errno != ENOENT)
		die("notif send");
out:
	free(req);
	free(resp);
}

int main(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[2], "--") != 0) {
		fprintf(stderr, "usage: quota_emu LOG -- COMMAND [ARG...]\n");
		return 2;
	}
	if (!(calls = fopen(argv[1], "a")))
		die(argv[1]);
	int listener = install_filter();
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		close(listener);
		execv(argv[3], argv + 3);
		die(argv[3]);
	}
	int pidfd = (int)syscall(SYS_pidfd_open, child, 0);
	if (pidfd < 0)
		die("pidfd_open");
	/* A TERM for this process is for the command (the tests signal the supervisor). */
	(void)signal(SIGTERM, SIG_IGN);
	for (;;) {
		struct pollfd p[2] = {{.fd = listener, .events = POLLIN},
		                      {.fd = pidfd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[0].revents & POLLIN)
			serve(listener);
		if (p[1].revents) {
			int st;
			if (waitpid(child, &st, 0) < 0)
				die("waitpid");
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
	}
}
