/*
 * The helper's side of its runners (runner/): sepcsi-runner, the one process
 * on the helper's side that may execve, which holds no capability at all, and
 * sepcsi-tree-runner.
 *
 * The helper's own seccomp filter has no execve, and a filter can only be
 * narrowed, never widened, by a descendant: so the mkfs tools cannot be
 * started by the helper or its workers. Instead the helper forks a child at
 * start, before it confines itself; the child leaves the helper's view (below),
 * empties every capability set (bounding included), locks the securebits,
 * sets no_new_privs and execs sepcsi-runner from the helper's own directory
 * (opened before the helper entered its view, on a descriptor), with the job
 * socket on fd 3. The runner installs its own filter and serves jobs
 * (proto/rn_job.h): a tool from its fixed table with arguments (each already
 * an allowlist entry of the policy, checked again there for form), or the
 * sizing or copying of an image file the helper opened. Each job brings a
 * private answer socket; closing it (the worker gave up, or died) makes the
 * runner kill the tool or stop the copy.
 *
 * The runner runs as uid 0 with no capability, in a view of its own: the
 * helper's less kubelet's directories, the data directory, /sys and the loop
 * nodes (own_view). It reaches an image only through the descriptor a job
 * carries: a tool formats the one image it is given, as /proc/self/fd/3, and
 * sees no other volume's. /proc stays for that, and for mkfs.btrfs, which
 * reads /proc/self/mounts to refuse a mounted target; with no capability the
 * runner cannot look into the helper's processes through it. It ends with
 * the helper (PR_SET_PDEATHSIG) or when its socket closes; if it dies, the
 * helper exits and is restarted with a new one.
 *
 * The tools runner also reads what an image or its device holds (RN_SIGNATURE:
 * libblkid and the ext4 superblock) for the helper, which links no parser of
 * bytes a tenant wrote; its answer is read here as tenant-shaped text
 * (mh_tools_signature).
 *
 * With directory volumes the helper starts a second program the same way,
 * the tree runner (sepcsi-tree-runner, runner/tree.c), which empties and
 * copies a volume's tree on the directory fds the helper checked and passes
 * (mh_tree.c). It holds CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID and
 * CAP_CHOWN (policy/caps_roles.c: pol_caps_confine_tree), carried across its exec
 * as ambient capabilities, and nothing else; the tools runner's view less
 * /proc, so that it reaches a pod's tree only through those fds, and no image
 * and no other process at all; and a filter of its own without exec, mount
 * API or loop ioctls. Pod-controlled names, links and modes are thus walked
 * by a process that cannot mount or unmount anything.
 */
#include "mh_tools.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mh_view.h"
#include "pol_caps.h"
#include "pol_seccomp.h"
#include "pol_view.h"
#include "policy_all.h"

static int runner_exe[MH_RUNNERS] = {-1, -1};
static const char *const runner_names[MH_RUNNERS] = {"sepcsi-runner", "sepcsi-tree-runner"};
static struct {
	int fd, pidfd;
} runners[MH_RUNNERS] = {{-1, -1}, {-1, -1}};

void mh_tools_locate(void)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	struct stat st;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		log_fatal("cannot find the helper's own binary: %s", strerror(errno));
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	*slash = '\0';
	for (int i = 0; i < MH_RUNNERS; i++) {
		snprintf(path, sizeof(path), "%s/%s", self, runner_names[i]);
		runner_exe[i] = open(path, O_PATH | O_CLOEXEC);
		/* As trusted as the helper's own binary: beside it, and nobody else may change it.
		 */
		if (runner_exe[i] < 0 || fstat(runner_exe[i], &st) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != 0 || (st.st_mode & 022))
			log_fatal("%s: missing, or not a root-owned file only root may write",
			          path);
	}
}

/*
 * A runner's view: the helper's, less what the tools never need: kubelet's
 * directories, the base directories of directory volumes, the data directory
 * (a job carries the descriptors of its files), /sys, and the helper's /dev
 * with its loop nodes (a /dev of its own with null only); the tree runner's,
 * less /proc too (pol_view_tree). In a mount namespace of its own, made
 * private first so that nothing it takes away is taken from anyone else.
 * Still privileged here.
 */
static int own_view(const struct pol *pol, const char *data_dir, enum mh_runner which)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	for (size_t i = 0; pol_root(pol, i); i++) /* gone already beside a core: nothing to do */
		if (mh_view_detach(pol_root(pol, i)) < 0)
			return -1;
	for (size_t i = 0; pol_base_dir(pol, i); i++)
		if (umount2(pol_base_dir(pol, i), MNT_DETACH) < 0 ||
		    umount2(pol_view_ro_base(i), MNT_DETACH) < 0)
			return -1;
	if (umount2("/sys", MNT_DETACH) < 0 || umount2(data_dir, MNT_DETACH) < 0)
		return -1;
	if (which == MH_RUNNER_TREE && umount2("/proc", MNT_DETACH) < 0)
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

/* In the runner's child, still privileged: its view, its capabilities, then the exec. */
static void __attribute__((noreturn))
exec_runner(int sock, pid_t parent, const struct pol *pol, const char *data_dir,
            const char *log_format, const char *log_level, enum mh_runner which)
{
	const char *argv[] = {runner_names[which],
	                      "--log-format",
	                      log_format,
	                      "--log-level",
	                      log_level,
	                      pol_seccomp_log_only(pol) ? "--seccomp-log-only" : NULL,
	                      NULL};
	const char *name = which == MH_RUNNER_TREE ? "tree" : "tools";
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(1);
	if (own_view(pol, data_dir, which) < 0) {
		log_kv(LOG_LVL_ERROR, "runner_start_failed", "runner", name, "error",
		       "cannot make its view", NULL);
		_exit(1);
	}
	/* The job socket on fd 3, the program on fd 4 (close-on-exec), nothing else but stdio. */
	int s = fcntl(sock, F_DUPFD, 10), e = fcntl(runner_exe[which], F_DUPFD, 11);
	if (s < 0 || e < 0 || dup2(s, RN_FD_JOBS) < 0 || dup2(e, 4) < 0 ||
	    fcntl(4, F_SETFD, FD_CLOEXEC) < 0 || close_range(5, ~0U, 0) < 0)
		_exit(1);
	if ((which == MH_RUNNER_TREE ? pol_caps_confine_tree() : pol_caps_confine_tools()) < 0) {
		log_kv(LOG_LVL_ERROR, "runner_start_failed", "runner", name, "error",
		       "cannot drop its capabilities", NULL);
		_exit(1);
	}
	syscall(SYS_execveat, 4, "", (char *const *)argv, environ, AT_EMPTY_PATH);
	log_kv(LOG_LVL_ERROR, "runner_start_failed", "runner", name, "error",
	       "cannot exec its program", NULL);
	_exit(127);
}

void mh_wait_for_exec(int started[2])
{
	char byte;
	close(started[1]);
	while (read(started[0], &byte, 1) < 0 && errno == EINTR)
		;
	close(started[0]);
}

static void start_one(const struct pol *pol, const char *data_dir, const char *log_format,
                      const char *log_level, enum mh_runner which)
{
	int sv[2], started[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(started, O_CLOEXEC) < 0)
		log_fatal("runner socket: %s", strerror(errno));
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		log_fatal("fork a runner: %s", strerror(errno));
	if (pid == 0) {
		close(sv[0]);
		exec_runner(sv[1], parent, pol, data_dir, log_format, log_level, which);
	}
	mh_wait_for_exec(started);
	close(sv[1]);
	runners[which].fd = sv[0];
	runners[which].pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (runners[which].pidfd < 0)
		log_fatal("pidfd of a runner: %s", strerror(errno));
}

void mh_tools_start(const struct pol *pol, const char *data_dir, const char *log_format,
                    const char *log_level)
{
	start_one(pol, data_dir, log_format, log_level, MH_RUNNER_TOOLS);
	if (pol_base_dir(pol, 0))
		start_one(pol, data_dir, log_format, log_level, MH_RUNNER_TREE);
	mh_closep(&runner_exe[MH_RUNNER_TOOLS]);
	mh_closep(&runner_exe[MH_RUNNER_TREE]);
}

int mh_tools_pidfd(enum mh_runner which)
{
	return runners[which].pidfd;
}

/*
 * Send job j with a new answer socket and its nfds descriptors after it.
 * Returns the helper's end of the answer socket, or -1 with r.
 */
static int send_job(enum mh_runner which, struct rn_job *j, const int *fds, uint32_t nfds,
                    struct mh_res *r)
{
	int ans[2], all[3];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ans) < 0)
		return mh_fail(r, MH_E_FAILED, errno, "runner job: %s", strerror(errno));
	all[0] = ans[1];
	memcpy(all + 1, fds, nfds * sizeof(int));
	j->nfds = nfds + 1;
	union {
		char buf[CMSG_SPACE(sizeof(all))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = {.iov_base = j, .iov_len = sizeof(*j)};
	struct msghdr m = {.msg_iov = &iov,
	                   .msg_iovlen = 1,
	                   .msg_control = u.buf,
	                   .msg_controllen = CMSG_SPACE(j->nfds * sizeof(int))};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(j->nfds * sizeof(int));
	memcpy(CMSG_DATA(c), all, j->nfds * sizeof(int));
	ssize_t n = sendmsg(runners[which].fd, &m, MSG_NOSIGNAL);
	int err = errno;
	close(ans[1]);
	if (n != (ssize_t)sizeof(*j)) {
		close(ans[0]);
		return mh_fail(r, MH_E_FAILED, err, "the %s runner is gone: %s",
		               which == MH_RUNNER_TREE ? "tree" : "tool", strerror(err));
	}
	return ans[0];
}

static int recv_answer(int ans, struct rn_answer *a, struct mh_res *r)
{
	ssize_t n;
	while ((n = recv(ans, a, sizeof(*a), 0)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(*a))
		return mh_fail(r, MH_E_FAILED, EPROTO, "the tool runner did not answer");
	return 0;
}

int mh_tools_run(enum rn_tool tool, const char *const *args, size_t nargs, int img, char *out,
                 size_t cap, long timeout_ms, int *status, struct mh_res *r)
{
	static struct rn_job j;
	struct rn_answer a;
	int pipefd[2] = {-1, -1}, ans = -1, ret = -1;
	size_t len = 0;
	memset(&j, 0, sizeof(j));
	j.kind = RN_TOOL;
	j.tool = tool;
	if (nargs >= RN_ARGS_MAX) /* the runner appends the target */
		return mh_fail(r, MH_E_REFUSED, E2BIG, "too many tool arguments");
	for (size_t i = 0; i < nargs; i++)
		if (snprintf(j.argv[i], RN_ARG_LEN, "%s", args[i]) >= RN_ARG_LEN)
			return mh_fail(r, MH_E_REFUSED, E2BIG, "tool argument too long");
	j.argc = (uint32_t)nargs;
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		mh_fail(r, MH_E_FAILED, errno, "tool setup: %s", strerror(errno));
		goto out;
	}
	if ((ans = send_job(MH_RUNNER_TOOLS, &j, (int[]){img, pipefd[1]}, 2, r)) < 0)
		goto out;
	mh_closep(&pipefd[1]);
	/* The output until EOF (the tool and what it forked are done), within the time. */
	int64_t deadline = mono_ms() + timeout_ms;
	for (;;) {
		int64_t left = deadline - mono_ms();
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		if (left <= 0) {
			mh_fail(r, MH_E_FAILED, ETIMEDOUT, "%s timed out", args[0]);
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
	if (recv_answer(ans, &a, r) < 0)
		goto out;
	*status = a.status;
	ret = 0;
out:
	out[len] = '\0';
	mh_closep(&pipefd[0]);
	mh_closep(&pipefd[1]);
	mh_closep(&ans);
	return ret;
}

int mh_tools_job(enum mh_runner which, uint32_t kind, const int *fds, uint32_t nfds, uint64_t size,
                 struct rn_answer *a, struct mh_res *r)
{
	static struct rn_job j;
	memset(&j, 0, sizeof(j));
	j.kind = kind;
	j.size = size;
	int ans = send_job(which, &j, fds, nfds, r);
	if (ans < 0)
		return -1;
	int ret = recv_answer(ans, a, r);
	close(ans);
	return ret;
}

int mh_tools_subvol(uint64_t what, int subvol, int work, const char *name, struct rn_answer *a,
                    struct mh_res *r)
{
	static struct rn_job j;
	memset(&j, 0, sizeof(j));
	j.kind = RN_TREE_SUBVOL;
	j.size = what;
	j.argc = 1;
	snprintf(j.argv[0], sizeof(j.argv[0]), "%s", name);
	int ans = send_job(MH_RUNNER_TREE, &j, (int[]){subvol, work}, 2, r);
	if (ans < 0)
		return -1;
	int ret = recv_answer(ans, a, r);
	close(ans);
	return ret;
}

int mh_tools_blocks(uint32_t what, uint64_t offset, int target, int base, struct rn_blocks *b,
                    struct mh_res *r)
{
	static struct rn_job j;
	memset(&j, 0, sizeof(j));
	j.kind = RN_BLOCKS;
	j.tool = what;
	j.size = offset;
	int ans = send_job(MH_RUNNER_TOOLS, &j, (int[]){target, base}, 2, r);
	if (ans < 0)
		return -1;
	ssize_t n;
	while ((n = recv(ans, b, sizeof(*b), 0)) < 0 && errno == EINTR)
		;
	close(ans);
	if (n != (ssize_t)sizeof(*b))
		return mh_fail(r, MH_E_FAILED, EPROTO, "the tool runner did not answer");
	if (b->err)
		return mh_fail(r, MH_E_FAILED, b->err, "read the snapshots' ranges: %s",
		               strerror(b->err));
	return 0;
}

/* A file job (RN_SIZE, RN_COPY, RN_PROBE): its answer, or -1 with r. */
static int file_job(uint32_t kind, const int *fds, uint32_t nfds, uint64_t size,
                    struct rn_answer *a, struct mh_res *r)
{
	int ret = mh_tools_job(MH_RUNNER_TOOLS, kind, fds, nfds, size, a, r);
	if (ret == 0 && a->err)
		return mh_fail(r,
		               a->err == ENOSPC || a->err == EDQUOT ? MH_E_NOSPACE
		               : a->err == EFBIG                    ? MH_E_REFUSED
		                                                    : MH_E_FAILED,
		               a->err, "%s: %s",
		               kind == RN_COPY    ? "copy"
		               : kind == RN_PROBE ? "probe the data directory"
		                                  : "size image",
		               strerror(a->err));
	return ret;
}

int mh_tools_size(int fd, uint64_t size, struct mh_res *r)
{
	struct rn_answer a;
	return file_job(RN_SIZE, &fd, 1, size, &a, r);
}

int mh_tools_probe(int dir, bool *reflink, uint64_t *max_file, struct mh_res *r)
{
	struct rn_answer a = {0};
	/* Two unnamed files there, not the directory: the runner reaches no image. */
	int f[2] = {openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600),
	            openat(dir, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)};
	int ret = f[0] < 0 || f[1] < 0
	              ? mh_fail(r, MH_E_FAILED, errno, "unnamed files in the data directory: %s",
	                        strerror(errno))
	              : file_job(RN_PROBE, f, 2, 0, &a, r);
	mh_closep(&f[0]);
	mh_closep(&f[1]);
	*reflink = a.reflinked != 0;
	*max_file = a.bytes;
	return ret;
}

int mh_tools_copy(int src, int dst, uint64_t size, bool *reflinked, struct mh_res *r)
{
	struct rn_answer a = {0};
	int ret = file_job(RN_COPY, (int[]){src, dst}, 2, size, &a, r);
	*reflinked = a.reflinked != 0;
	return ret;
}

/* A string of the answer: NUL-terminated within len, printable. */
static bool answer_text(const char *s, size_t len)
{
	size_t n = strnlen(s, len);
	if (n == len)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return false;
	return true;
}

int mh_tools_signature(int fd, struct rn_answer *a, struct mh_res *r)
{
	memset(a, 0, sizeof(*a));
	if (mh_tools_job(MH_RUNNER_TOOLS, RN_SIGNATURE, &fd, 1, 0, a, r) < 0)
		return -1;
	if (a->err)
		return mh_fail(r, MH_E_FAILED, a->err, "signature probe: %s", strerror(a->err));
	if (a->status < RN_SIG_BLANK || a->status > RN_SIG_AMBIVALENT ||
	    !answer_text(a->type, sizeof(a->type)) || !answer_text(a->pttype, sizeof(a->pttype)))
		return mh_fail(r, MH_E_FAILED, EPROTO, "signature probe: a malformed answer");
	return 0;
}
