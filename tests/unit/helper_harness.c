/*
 * The harness shared by the helper's process tests (test_helper_proc.c,
 * test_helper_ops.c): start the real sepcsi-mounthelper on a socketpair,
 * send requests, read the kernel's view (mountinfo, loop devices), and clean
 * up mounts, loop devices and the temp dir even after a failed check.
 */
#include "helper_harness.h"
#include "mh_proto_all.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/loop.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SEPCSI_MOUNTHELPER
#define SEPCSI_MOUNTHELPER "sepcsi-mounthelper"
#endif

const char *helper_bin = SEPCSI_MOUNTHELPER;
char tmp[64], root[128], data[128], policy[128], logfile[128];

/* ---- helpers: processes -------------------------------------------------- */

int run(const char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void write_policy(const char *path, const char *extra)
{
	FILE *f = fopen(path, "w");
	const char *log_only = getenv("SEPCSI_TEST_SECCOMP_LOG") ? "true" : "false";
	fprintf(f,
	        "# test policy\n[paths]\nallowed_roots = %s\nstaging_paths = **\n"
	        "target_paths = **\n[filesystems]\ntypes = ext4 xfs "
	        "btrfs\n[volumes]\nmin_bytes = 1Mi\nmax_bytes = 1Ti\n[seccomp]\nlog_only = %s\n%s",
	        root, log_only, extra ? extra : "");
	if (fclose(f) != 0)
		perror(path);
}

bool helper_before_statmount;

/*
 * A filter beneath the helper's own in which listmount(2) and statmount(2)
 * fail with ENOSYS, as on a kernel older than 6.8: the helper must then look
 * at the mounts through mountinfo, with the same answers.
 */
static void deny_statmount(void)
{
	struct sock_filter prog[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 458 /* listmount */, 1, 0),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 457 /* statmount */, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog fp = {.len = sizeof(prog) / sizeof(prog[0]), .filter = prog};
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) != 0)
		_exit(126);
}

/* Start the helper with the request channel on fd 3 and, if ctl_fd >= 0, control on fd 4. */
void helper_start_ctl(struct helper *h, const char *policy_file, int ctl_fd)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	h->pid = fork();
	if (h->pid == 0) {
		int log = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		dup2(log, 2);
		/* Move both ends out of the way first: either may already be fd 3 or 4. */
		int peer = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
		int ctl = ctl_fd >= 0 ? fcntl(ctl_fd, F_DUPFD_CLOEXEC, 10) : -1;
		dup2(peer, 3); /* the request channel */
		if (ctl >= 0)
			dup2(ctl, 4); /* supervised */
		close_range(ctl_fd >= 0 ? 5 : 4, ~0U, 0);
		/* In sanitizer builds: LeakSanitizer needs ptrace, which the filter forbids. */
		setenv("ASAN_OPTIONS", "detect_leaks=0", 0);
		setenv("SEPCSI_TEST_PAUSE", "1", 1); /* pause points, held by pause_hold() */
		const char *strace = getenv("SEPCSI_TEST_STRACE");
		if (strace) {
			const char *argv[] = {"strace",    "-f",         "-qq",      "-o",
			                      strace,      "-A",         helper_bin, "--policy",
			                      policy_file, "--data-dir", data,       "--log-level",
			                      "debug",     "--no-core",  NULL};
			execvp("strace", (char *const *)argv);
		}
		/* The helper's own handlers: no core (tests/e2e/test_core_relay.py has it). */
		const char *argv[] = {helper_bin,    "--policy", policy_file, "--data-dir", data,
		                      "--log-level", "debug",    "--no-core", NULL};
		if (helper_before_statmount)
			deny_statmount();
		execv(helper_bin, (char *const *)argv);
		_exit(127);
	}
	close(sv[1]);
	h->fd = sv[0];
}

void helper_start_with(struct helper *h, const char *policy_file)
{
	helper_start_ctl(h, policy_file, -1);
}

void helper_start(struct helper *h)
{
	helper_start_with(h, policy);
}

/* ---- test pause points (mounthelper/mh_pause.c) ------------------------- */

static char *gate_path(const char *gate, char *buf, size_t len)
{
	snprintf(buf, len, "%s/test-pause/%s", data, gate);
	return buf;
}

static long log_mark; /* pause_wait looks only at what the helper logged after pause_hold */

void pause_hold(const char *gate)
{
	char p[300], d[300];
	struct stat st;
	log_mark = stat(logfile, &st) == 0 ? (long)st.st_size : 0;
	snprintf(d, sizeof(d), "%s/test-pause", data);
	mkdir(d, 0700);
	int fd = open(gate_path(gate, p, sizeof(p)), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
}

void pause_release(const char *gate)
{
	char p[300];
	unlink(gate_path(gate, p, sizeof(p)));
}

pid_t pause_wait(const char *gate, int timeout_ms)
{
	char want[160], line[1024];
	snprintf(want, sizeof(want), "test_pause point=%s pid=", gate);
	for (int waited = 0; waited <= timeout_ms; waited += 5) {
		FILE *f = fopen(logfile, "re");
		long pid = 0;
		if (f && fseek(f, log_mark, SEEK_SET) < 0) {
			(void)fclose(f);
			f = NULL;
		}
		while (f && fgets(line, sizeof(line), f)) {
			const char *at = strstr(line, want);
			if (at)
				pid = strtol(at + strlen(want), NULL, 10);
		}
		if (f)
			(void)fclose(f);
		if (pid > 0)
			return (pid_t)pid;
		tap_sleep_ms(5);
	}
	return 0;
}

/* Close the channel and reap the helper; returns its exit status (or 128+signal). */
int helper_stop(struct helper *h)
{
	int st = 0;
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	if (h->pid <= 0)
		return -1;
	for (int i = 0; i < 600; i++) { /* up to 60 s */
		pid_t p = waitpid(h->pid, &st, WNOHANG);
		if (p == h->pid) {
			h->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
		nanosleep(&(struct timespec){.tv_nsec = 100L * 1000 * 1000}, NULL);
	}
	kill(h->pid, SIGKILL);
	waitpid(h->pid, &st, 0);
	h->pid = 0;
	return -1;
}

/* ---- helpers: requests ---------------------------------------------------- */

static uint32_t next_id = 1;

/* Send req, wait for the answer; returns the answer type, or -1 if the helper is gone. */
int call(struct helper *h, struct mh_msg *req, struct mh_msg *ans)
{
	uint8_t buf[MH_MSG_MAX];
	size_t len;
	req->id = next_id++;
	if (mh_msg_encode(req, buf, sizeof(buf), &len) < 0)
		abort();
	if (send(h->fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		return -1;
	struct pollfd p = {.fd = h->fd, .events = POLLIN};
	if (poll(&p, 1, 300000) != 1)
		return -1;
	ssize_t n = recv(h->fd, buf, sizeof(buf), 0);
	if (n <= 0 || mh_msg_decode(buf, (size_t)n, ans) < 0 || ans->id != req->id)
		return -1;
	if (ans->type == MH_ANS_ERROR)
		fprintf(stderr, "  # %s -> error kind %u errno %u: %s\n", mh_type_name(req->type),
		        ans->u.error.kind, ans->u.error.sys_errno, ans->u.error.reason);
	return ans->type;
}

/* The answer kind: MH_E_OK for the right success type, the error kind, or -1. */
int kind_of(int type, uint16_t want, const struct mh_msg *ans)
{
	if (type == want)
		return MH_E_OK;
	if (type == MH_ANS_ERROR)
		return (int)ans->u.error.kind;
	return -1;
}

int do_ping(struct helper *h)
{
	struct mh_msg q = {.type = MH_REQ_PING}, a;
	return kind_of(call(h, &q, &a), MH_ANS_PING, &a);
}

int do_create(struct helper *h, const char *id, uint64_t size, uint64_t *real)
{
	struct mh_msg q = {.type = MH_REQ_CREATE}, a;
	snprintf(q.u.create.volume_id, sizeof(q.u.create.volume_id), "%s", id);
	q.u.create.size_bytes = size;
	int k = kind_of(call(h, &q, &a), MH_ANS_CREATE, &a);
	if (real)
		*real = k == MH_E_OK ? a.u.size_ans.size_bytes : 0;
	return k;
}

int do_delete(struct helper *h, const char *id)
{
	struct mh_msg q = {.type = MH_REQ_DELETE}, a;
	snprintf(q.u.del.volume_id, sizeof(q.u.del.volume_id), "%s", id);
	return kind_of(call(h, &q, &a), MH_ANS_DELETE, &a);
}

int do_stage(struct helper *h, const char *id, const char *path, const char *fs, const char *opts,
             int ro, struct mh_msg *out)
{
	struct mh_msg q = {.type = MH_REQ_STAGE}, a;
	snprintf(q.u.stage.volume_id, sizeof(q.u.stage.volume_id), "%s", id);
	snprintf(q.u.stage.staging_path, sizeof(q.u.stage.staging_path), "%s", path);
	snprintf(q.u.stage.fs_type, sizeof(q.u.stage.fs_type), "%s", fs);
	snprintf(q.u.stage.mount_flags, sizeof(q.u.stage.mount_flags), "%s", opts);
	q.u.stage.readonly = (uint8_t)ro;
	int k = kind_of(call(h, &q, &a), MH_ANS_STAGE, &a);
	if (out)
		*out = a;
	return k;
}

int do_unstage(struct helper *h, const char *id, const char *path)
{
	struct mh_msg q = {.type = MH_REQ_UNSTAGE}, a;
	snprintf(q.u.unstage.volume_id, sizeof(q.u.unstage.volume_id), "%s", id);
	snprintf(q.u.unstage.staging_path, sizeof(q.u.unstage.staging_path), "%s", path);
	return kind_of(call(h, &q, &a), MH_ANS_UNSTAGE, &a);
}

int do_publish(struct helper *h, const char *id, const char *staging, const char *target, int ro)
{
	struct mh_msg q = {.type = MH_REQ_PUBLISH}, a;
	snprintf(q.u.publish.volume_id, sizeof(q.u.publish.volume_id), "%s", id);
	snprintf(q.u.publish.staging_path, sizeof(q.u.publish.staging_path), "%s", staging);
	snprintf(q.u.publish.target_path, sizeof(q.u.publish.target_path), "%s", target);
	q.u.publish.readonly = (uint8_t)ro;
	return kind_of(call(h, &q, &a), MH_ANS_PUBLISH, &a);
}

int do_unpublish(struct helper *h, const char *id, const char *target)
{
	struct mh_msg q = {.type = MH_REQ_UNPUBLISH}, a;
	snprintf(q.u.unpublish.volume_id, sizeof(q.u.unpublish.volume_id), "%s", id);
	snprintf(q.u.unpublish.target_path, sizeof(q.u.unpublish.target_path), "%s", target);
	return kind_of(call(h, &q, &a), MH_ANS_UNPUBLISH, &a);
}

/* ---- helpers: the kernel's view ------------------------------------------- */

int mountinfo_lines(void)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int n = 0, c;
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	(void)fclose(f);
	return n;
}

/* The per-mount options of the last mount on path ("" if none). */
void mount_opts_at(const char *path, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX], opts[512];
		if (sscanf(line, "%*d %*d %*s %*s %4095s %511s", mp, opts) == 2 &&
		    strcmp(mp, path) == 0)
			snprintf(out, len, "%s", opts);
	}
	(void)fclose(f);
}

bool has_opt(const char *opts, const char *o)
{
	size_t n = strlen(o);
	for (const char *s = opts; (s = strstr(s, o)) != NULL; s += n)
		if ((s == opts || s[-1] == ',') && (s[n] == ',' || s[n] == '\0'))
			return true;
	return false;
}

/* Is (dev, ino) a file of the data dir's images/ or snapshots/? */
static bool data_file(dev_t dev, ino_t ino)
{
	static const char *const subs[] = {"images", "snapshots"};
	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", data, subs[i]);
		DIR *d = opendir(p);
		struct dirent *e;
		while (d && (e = readdir(d)) != NULL) {
			struct stat st;
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode) && st.st_dev == dev && st.st_ino == ino) {
				closedir(d);
				return true;
			}
		}
		if (d)
			closedir(d);
	}
	return false;
}

/*
 * Number of loop devices backed by a file of our data dir: by the file's
 * identity (LOOP_GET_STATUS64), since the kernel names a backing file by its
 * path in the attaching process's view, which for the helper is its own.
 */
int our_loops(bool detach)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL) {
		char p[300];
		struct loop_info64 li;
		if (strncmp(e->d_name, "loop", 4) != 0)
			continue;
		snprintf(p, sizeof(p), "/dev/%s", e->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (ioctl(fd, LOOP_GET_STATUS64, &li) == 0 &&
		    data_file((dev_t)li.lo_device, (ino_t)li.lo_inode)) {
			n++;
			if (detach)
				ioctl(fd, LOOP_CLR_FD, 0);
		}
		close(fd);
	}
	closedir(d);
	return n;
}

bool file_has(const char *path, const char *want)
{
	char buf[64] = "";
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && strncmp(buf, want, strlen(want)) == 0;
}

int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int err = n < 0 ? errno : 0;
	if (close(fd) < 0 && !err)
		err = errno;
	return -err;
}

bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* ---- cleanup (also after failures) ------------------------------------------ */

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)remove(p);
	return 0; /* best effort: keep walking */
}

void cleanup(void)
{
	if (!tmp[0])
		return;
	for (int round = 0; round < 8; round++) {
		FILE *f = fopen("/proc/self/mountinfo", "re");
		char line[4096], mps[64][PATH_MAX];
		int n = 0;
		while (f && fgets(line, sizeof(line), f) && n < 64)
			if (sscanf(line, "%*d %*d %*s %*s %4095s", mps[n]) == 1 &&
			    strncmp(mps[n], tmp, strlen(tmp)) == 0)
				n++;
		if (f)
			(void)fclose(f);
		if (n == 0)
			break;
		while (n-- > 0)
			umount2(mps[n], MNT_DETACH);
	}
	our_loops(true);
	nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* ---- protocol v2 requests ------------------------------------------------ */

uint32_t send_req(struct helper *h, struct mh_msg *req)
{
	uint8_t buf[MH_MSG_MAX];
	size_t len;
	req->id = next_id++;
	if (mh_msg_encode(req, buf, sizeof(buf), &len) < 0)
		abort();
	if (send(h->fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		return 0;
	return req->id;
}

int recv_ans(struct helper *h, struct mh_msg *ans, int timeout_ms)
{
	uint8_t buf[MH_MSG_MAX];
	struct pollfd p = {.fd = h->fd, .events = POLLIN};
	if (poll(&p, 1, timeout_ms) != 1)
		return -1;
	ssize_t n = recv(h->fd, buf, sizeof(buf), 0);
	if (n <= 0 || mh_msg_decode(buf, (size_t)n, ans) < 0)
		return -1;
	return ans->type;
}

int do_stage2(struct helper *h, const struct mh_req_stage *q, struct mh_msg *out)
{
	struct mh_msg m = {.type = MH_REQ_STAGE}, a;
	m.u.stage = *q;
	int k = kind_of(call(h, &m, &a), MH_ANS_STAGE, &a);
	if (out)
		*out = a;
	return k;
}

int do_unstage2(struct helper *h, const char *id, const char *path, uint8_t flags)
{
	struct mh_msg q = {.type = MH_REQ_UNSTAGE}, a;
	snprintf(q.u.unstage.volume_id, sizeof(q.u.unstage.volume_id), "%s", id);
	snprintf(q.u.unstage.staging_path, sizeof(q.u.unstage.staging_path), "%s", path);
	q.u.unstage.flags = flags;
	return kind_of(call(h, &q, &a), MH_ANS_UNSTAGE, &a);
}

int do_publish2(struct helper *h, const char *id, const char *staging, const char *target, int ro,
                uint8_t flags)
{
	struct mh_msg q = {.type = MH_REQ_PUBLISH}, a;
	snprintf(q.u.publish.volume_id, sizeof(q.u.publish.volume_id), "%s", id);
	snprintf(q.u.publish.staging_path, sizeof(q.u.publish.staging_path), "%s", staging);
	snprintf(q.u.publish.target_path, sizeof(q.u.publish.target_path), "%s", target);
	q.u.publish.readonly = (uint8_t)ro;
	q.u.publish.flags = flags;
	return kind_of(call(h, &q, &a), MH_ANS_PUBLISH, &a);
}

int do_resize(struct helper *h, const char *id, uint64_t size, uint64_t *real)
{
	struct mh_msg q = {.type = MH_REQ_RESIZE}, a;
	snprintf(q.u.resize.volume_id, sizeof(q.u.resize.volume_id), "%s", id);
	q.u.resize.size_bytes = size;
	int k = kind_of(call(h, &q, &a), MH_ANS_RESIZE, &a);
	if (real)
		*real = k == MH_E_OK ? a.u.size_ans.size_bytes : 0;
	return k;
}

int do_snapshot(struct helper *h, const char *ssid, const char *vid, struct mh_ans_copy *out)
{
	struct mh_msg q = {.type = MH_REQ_SNAPSHOT}, a;
	snprintf(q.u.snapshot.snapshot_id, sizeof(q.u.snapshot.snapshot_id), "%s", ssid);
	snprintf(q.u.snapshot.volume_id, sizeof(q.u.snapshot.volume_id), "%s", vid);
	int k = kind_of(call(h, &q, &a), MH_ANS_SNAPSHOT, &a);
	if (out)
		*out = k == MH_E_OK ? a.u.copy_ans : (struct mh_ans_copy){0};
	return k;
}

int do_delete_snapshot(struct helper *h, const char *ssid)
{
	struct mh_msg q = {.type = MH_REQ_DELETE_SNAPSHOT}, a;
	snprintf(q.u.del_snapshot.snapshot_id, sizeof(q.u.del_snapshot.snapshot_id), "%s", ssid);
	return kind_of(call(h, &q, &a), MH_ANS_DELETE_SNAPSHOT, &a);
}

void clone_req(struct mh_msg *q, const char *id, int kind, const char *src, uint64_t size)
{
	memset(q, 0, sizeof(*q));
	q->type = MH_REQ_CLONE;
	snprintf(q->u.clone.volume_id, sizeof(q->u.clone.volume_id), "%s", id);
	q->u.clone.source_kind = (uint8_t)kind;
	snprintf(q->u.clone.source_id, sizeof(q->u.clone.source_id), "%s", src);
	q->u.clone.size_bytes = size;
}

int do_clone(struct helper *h, const char *id, int kind, const char *src, uint64_t size,
             struct mh_ans_copy *out)
{
	struct mh_msg q, a;
	clone_req(&q, id, kind, src, size);
	int k = kind_of(call(h, &q, &a), MH_ANS_CLONE, &a);
	if (out)
		*out = k == MH_E_OK ? a.u.copy_ans : (struct mh_ans_copy){0};
	return k;
}

int do_capacity(struct helper *h, struct mh_ans_capacity *out)
{
	struct mh_msg q = {.type = MH_REQ_CAPACITY}, a;
	int k = kind_of(call(h, &q, &a), MH_ANS_CAPACITY, &a);
	if (out)
		*out = k == MH_E_OK ? a.u.capacity_ans : (struct mh_ans_capacity){0};
	return k;
}

int do_expand(struct helper *h, const char *id, const char *staging, const char *fs, uint8_t flags,
              uint64_t *size, struct mh_msg *out)
{
	struct mh_msg q = {.type = MH_REQ_EXPAND}, a;
	snprintf(q.u.expand.volume_id, sizeof(q.u.expand.volume_id), "%s", id);
	snprintf(q.u.expand.staging_path, sizeof(q.u.expand.staging_path), "%s", staging);
	snprintf(q.u.expand.fs_type, sizeof(q.u.expand.fs_type), "%s", fs);
	q.u.expand.flags = flags;
	int k = kind_of(call(h, &q, &a), MH_ANS_EXPAND, &a);
	if (size)
		*size = k == MH_E_OK ? a.u.size_ans.size_bytes : 0;
	if (out)
		*out = a;
	return k;
}

int do_stats(struct helper *h, const char *id, const char *path, uint8_t flags,
             struct mh_ans_stats *out)
{
	struct mh_msg q = {.type = MH_REQ_STATS}, a;
	snprintf(q.u.stats.volume_id, sizeof(q.u.stats.volume_id), "%s", id);
	snprintf(q.u.stats.path, sizeof(q.u.stats.path), "%s", path);
	q.u.stats.flags = flags;
	int k = kind_of(call(h, &q, &a), MH_ANS_STATS, &a);
	if (out)
		*out = k == MH_E_OK ? a.u.stats_ans : (struct mh_ans_stats){0};
	return k;
}

int do_list(struct helper *h, uint32_t what, const char *after, struct mh_ans_list *out)
{
	static struct mh_msg q, a;
	q = (struct mh_msg){.type = MH_REQ_LIST};
	q.u.list.what = what;
	snprintf(q.u.list.after, sizeof(q.u.list.after), "%s", after);
	int k = kind_of(call(h, &q, &a), MH_ANS_LIST, &a);
	if (out) {
		out->more = k == MH_E_OK ? a.u.list_ans.more : 0;
		snprintf(out->text, sizeof(out->text), "%s", k == MH_E_OK ? a.u.list_ans.text : "");
	}
	return k;
}

void stage_req(struct mh_req_stage *q, const char *id, const char *path, const char *fs,
               const char *opts, int ro, uint8_t flags)
{
	memset(q, 0, sizeof(*q));
	snprintf(q->volume_id, sizeof(q->volume_id), "%s", id);
	snprintf(q->staging_path, sizeof(q->staging_path), "%s", path);
	snprintf(q->fs_type, sizeof(q->fs_type), "%s", fs);
	snprintf(q->mount_flags, sizeof(q->mount_flags), "%s", opts);
	q->readonly = (uint8_t)ro;
	q->flags = flags;
}

bool loop_dev_of(const char *id, char *out, size_t len)
{
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	bool found = false;
	while (d && !found && (e = readdir(d)) != NULL) {
		char p[300], bf[PATH_MAX] = "";
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", e->d_name);
		FILE *f = fopen(p, "re");
		if (f && fgets(bf, sizeof(bf), f) && strstr(bf, id)) {
			snprintf(out, len, "/dev/%s", e->d_name);
			found = true;
		}
		if (f)
			(void)fclose(f);
	}
	if (d)
		closedir(d);
	return found;
}

/* Write len bytes of a non-zero pattern at off in path (a file or a device). */
int fill_file(const char *path, uint64_t off, uint64_t len)
{
	static char buf[1 << 20];
	memset(buf, 0x5a, sizeof(buf));
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	while (len > 0) {
		size_t n = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n) {
			close(fd);
			return -1;
		}
		off += n;
		len -= n;
	}
	int rc = fsync(fd);
	close(fd);
	return rc;
}

int harness_setup(const char *name)
{
	/* Our own mount namespace: nothing we mount leaks out, even if we crash. */
	/*
	 * A private namespace for the test, whose mounts are then shared among
	 * themselves (as a host's are under systemd): the helper's own
	 * namespace reaches them through that propagation, as it reaches
	 * kubelet's directory on a node.
	 */
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_SHARED, NULL) < 0) {
		perror("unshare/mount private");
		return -1;
	}
	snprintf(tmp, sizeof(tmp), "/tmp/sepcsi-%s-XXXXXX", name);
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return -1;
	}
	if (atexit(cleanup) != 0) {
		fprintf(stderr, "atexit failed\n");
		return -1;
	}
	snprintf(root, sizeof(root), "%s/root", tmp);
	snprintf(data, sizeof(data), "%s/data", tmp);
	snprintf(policy, sizeof(policy), "%s/policy.ini", tmp);
	snprintf(logfile, sizeof(logfile), "%s/helper.log", tmp);
	mkdir(root, 0750);
	char p[200];
	snprintf(p, sizeof(p), "%s/staging", root);
	mkdir(p, 0750);
	snprintf(p, sizeof(p), "%s/pods", root);
	mkdir(p, 0750);
	write_policy(policy, NULL);
	return 0;
}

void dump_log(void)
{
	char line[4096];
	fprintf(stderr, "---- helper log ----\n");
	FILE *lf = fopen(logfile, "re");
	while (lf && fgets(line, sizeof(line), lf))
		fputs(line, stderr);
	if (lf)
		(void)fclose(lf);
}
