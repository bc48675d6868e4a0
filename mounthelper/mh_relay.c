/*
 * The helper's capable core: started here (mh_core_start, at the helper's
 * start, without directory volumes), or given (--core-fd). The rows the helper
 * hands to it each ask the core the request as rpcd sent it, and answer what
 * the core answered. The core checks everything again itself
 * (mounthelper/core/); the helper's own checks (ids, flags: mh_dispatch.c) ran
 * before. Without a core, the helper's own handler runs, as it always did.
 *
 * The rows run in a worker of the helper and nothing there is fatal;
 * mh_core_start runs in the main process before confinement and is fatal.
 */
#include "mh_helper_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "pol_caps.h"
#include "mh_common.h"
#include "mh_looks.h"
#include "mh_loop.h"
#include "mh_resize.h"
#include "mh_tools.h"
#include "mh_view.h"
#include "mh_worker.h"
#include "policy_all.h"

/* Its environment: nothing of the helper's but the tests' switches and the sanitizers'. */
static char **kept_env(void)
{
	static const char *const keep[] = {"SEPCSI_TEST_PAUSE", "ASAN_OPTIONS", "UBSAN_OPTIONS",
	                                   "LSAN_OPTIONS"};
	static char vars[4][512];
	static char *envp[5];
	size_t n = 0;
	for (size_t i = 0; i < 4; i++) {
		const char *v = getenv(keep[i]);
		int w = v ? snprintf(vars[n], sizeof(vars[n]), "%s=%s", keep[i], v) : -1;
		if (w > 0 && (size_t)w < sizeof(vars[n])) {
			envp[n] = vars[n];
			n++;
		}
	}
	envp[n] = NULL;
	return envp;
}

/*
 * The core's reader and its flusher (sepcsi-reader, sepcsi-reader --flusher),
 * each forked by the core's child once the core's view is built, so that
 * they see the core's mounts by the core's mount ids: each dies with the
 * core; fds[i] at descriptor i for each i of 3 to 6 where fds[i] >= 0 (the
 * reader: its channel, the images directory, the compiled policy; the
 * flusher: the compiled policy, its socket to the core), nothing else; uid 0
 * without any capability (pol_caps_confine_tools: every set empty, the
 * securebits locked, no_new_privs), which the exec keeps; at most
 * READER_FDS_MAX descriptors open.
 */
#define READER_FDS_MAX 16

static void __attribute__((noreturn))
exec_reader(int exe, const int fds[7], pid_t parent, char *const argv[])
{
	int moved[7];
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(127);
	for (int i = 3; i < 7; i++)
		if ((moved[i] = fds[i] < 0 ? -1 : fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0 &&
		    fds[i] >= 0)
			_exit(127);
	int e = fcntl(exe, F_DUPFD_CLOEXEC, 10);
	/* Everything closes at the exec but what dup2 places (which clears its close-on-exec). */
	if (e < 0 || close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		_exit(127);
	for (int i = 3; i < 7; i++)
		if (moved[i] >= 0 && dup2(moved[i], i) != i)
			_exit(127);
	/*
	 * Few descriptors: it needs about 8, and one taken over could otherwise hold
	 * thousands of kubelet's mounts busy (an O_PATH descriptor pins a mount).
	 */
	if (setrlimit(RLIMIT_NOFILE, &(struct rlimit){READER_FDS_MAX, READER_FDS_MAX}) < 0 ||
	    pol_caps_confine_tools() < 0)
		_exit(127);
	fexecve(e, argv, kept_env());
	_exit(127);
}

/*
 * The child, before exec: dies with the helper; a view of its own, built as
 * the helper's was but from inside the helper's (a tmpfs root no other process
 * shares: the helper could otherwise rename what lies in the core's root,
 * its /dev or the directories leading to the allowed roots); its channel on
 * fd 3, the compiled policy on fd 5, its flusher's socket on fd 6, images/
 * (the owner's, made and handed at the helper's start) and audit.log (root's,
 * made here if missing, open to append) opened in its view on fds 7 and 8,
 * and nothing else of the helper's (not rpcd's channel, not the supervisor's:
 * fd 4 closed, so it has no supervisor); its capabilities set
 * (pol_caps_confine_core), which the exec keeps.
 */
struct core_start {
	int exe, chan, policy;                      /* the core's */
	int reader_exe, reader_chan, reader_policy; /* its reader's */
	int flusher_policy; /* its flusher's (the same binary as the reader) */
	char **argv, **reader_argv, **flusher_argv;
};

static void __attribute__((noreturn))
exec_core(const struct core_start *s, pid_t parent, const struct pol *pol, const char *data_dir)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		_exit(127);
	mh_view_enter(pol, data_dir);
	/* The images directory as the core sees it: its reader's ".." is the core's view. */
	char path[PATH_MAX];
	int fl[2], images = -1, audit = -1;
	if (snprintf(path, sizeof(path), "%s/images", data_dir) < (int)sizeof(path))
		images = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (snprintf(path, sizeof(path), "%s/audit.log", data_dir) < (int)sizeof(path))
		audit = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (images < 0 || audit < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fl) < 0)
		_exit(127);
	pid_t core = getpid(), reader = fork();
	if (reader == 0)
		exec_reader(
		    s->reader_exe,
		    (const int[7]){-1, -1, -1, s->reader_chan, images, s->reader_policy, -1}, core,
		    s->reader_argv);
	pid_t flusher = reader < 0 ? -1 : fork();
	if (flusher == 0)
		exec_reader(s->reader_exe,
		            (const int[7]){-1, -1, -1, -1, -1, s->flusher_policy, fl[1]}, core,
		            s->flusher_argv);
	int exe = s->exe, chan = s->chan, policy = s->policy;
	if (flusher < 0 || close(s->reader_chan) < 0 || close(fl[1]) < 0)
		_exit(127);
	/* Its channel, policy, flusher's socket (core_flush.c), images/ and audit.log: fds 3, 5-8.
	 */
	const int want[6] = {chan, -1, policy, fl[0], images, audit};
	int moved[6], e = fcntl(exe, F_DUPFD_CLOEXEC, 10);
	for (int i = 0; i < 6; i++)
		if ((moved[i] = want[i] < 0 ? -1 : fcntl(want[i], F_DUPFD, 10)) < 0 && want[i] >= 0)
			_exit(127);
	for (int i = 0; i < 6; i++)
		if (e < 0 || (moved[i] >= 0 && dup2(moved[i], 3 + i) != 3 + i))
			_exit(127);
	close(4);
	/* Its capabilities, set here and kept across the exec: the core only checks them. */
	if (close_range(9, ~0U, CLOSE_RANGE_CLOEXEC) < 0 || pol_caps_confine_core() < 0)
		_exit(127);
	fexecve(e, s->argv, kept_env());
	_exit(127);
}

static int core_exe = -1, reader_exe = -1;

void mh_core_locate(void)
{
	char self[PATH_MAX], path[PATH_MAX + 16];
	struct stat st;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || !memchr(self, '/', (size_t)n))
		log_fatal("cannot find the helper's own binary: %s", strerror(errno));
	self[n] = '\0';
	*strrchr(self, '/') = '\0';
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", self, i ? "sepcsi-reader" : "sepcsi-core");
		/* As trusted as the helper's binary: beside it, and nobody else may change it. */
		int exe = open(path, O_PATH | O_CLOEXEC);
		if (exe < 0 || fstat(exe, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
		    (st.st_mode & 022))
			log_fatal("%s: missing, or not a root-owned file only root may write",
			          path);
		/* Unreadable even by root, its owner: not dumpable from its exec on (CMakeLists).
		 */
		if (i && (st.st_mode & 0444))
			log_fatal("%s: must be execute-only (mode 0111), as installed", path);
		*(i ? &reader_exe : &core_exe) = exe;
	}
}

/* The policy as the core and its reader read it: compiled, in a file of no name. */
static int compiled_policy(const struct pol *pol)
{
	/* Sealed once written: no one, the core included, changes it afterwards. */
	int policy = memfd_create("sepcsi-policy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	FILE *f = policy < 0 ? NULL : fdopen(fcntl(policy, F_DUPFD_CLOEXEC, 0), "w");
	if (!f || pol_compile(pol, f) < 0 || fclose(f) != 0 || lseek(policy, 0, SEEK_SET) != 0 ||
	    fcntl(policy, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) <
	        0)
		log_fatal("cannot compile the policy for the core: %s", strerror(errno));
	return policy;
}

int mh_core_start(const struct pol *pol, const char *data_dir, const char *fmt, const char *lvl,
                  bool direct_io, int *reader)
{
	int sv[2], rv[2];
	if (core_exe < 0 || reader_exe < 0)
		log_fatal("the capable core's binary was not located"); /* our own bug */
	/* One each: the core and its reader each read theirs from its start. */
	int policy = compiled_policy(pol), reader_policy = compiled_policy(pol),
	    flusher_policy = compiled_policy(pol);
	int started[2]; /* its end closes at the exec: the core has its namespace by then */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rv) < 0 ||
	    pipe2(started, O_CLOEXEC) < 0)
		log_fatal("cannot make the core's channel: %s", strerror(errno));
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		/* The images' owner is images/'s (the core's fd 7, the reader's fd 4). */
		char *argv[] = {"sepcsi-core", "--log-format", (char *)fmt,
		                "--log-level", (char *)lvl,    direct_io ? "--direct-io" : NULL,
		                NULL};
		char *reader_argv[] = {"sepcsi-reader", "--log-format", (char *)fmt,
		                       "--log-level",   (char *)lvl,    NULL};
		char *flusher_argv[] = {
		    "sepcsi-reader", "--flusher", "--log-format", (char *)fmt, "--log-level",
		    (char *)lvl,     NULL};
		struct core_start s = {.exe = core_exe,
		                       .chan = sv[1],
		                       .policy = policy,
		                       .reader_exe = reader_exe,
		                       .reader_chan = rv[1],
		                       .reader_policy = reader_policy,
		                       .flusher_policy = flusher_policy,
		                       .argv = argv,
		                       .reader_argv = reader_argv,
		                       .flusher_argv = flusher_argv};
		exec_core(&s, parent, pol, data_dir);
	}
	if (pid < 0)
		log_fatal("cannot start the capable core: %s", strerror(errno));
	mh_wait_for_exec(started); /* the helper changes its view next: the core's is its own */
	close(sv[1]);
	close(rv[1]);
	close(policy);
	close(reader_policy);
	close(flusher_policy);
	close(core_exe);
	close(reader_exe);
	*reader = rv[0];
	char pidbuf[16];
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)pid);
	log_kv(LOG_LVL_INFO, "core_started", "pid", pidbuf, NULL);
	return sv[0];
}

int mh_relay(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
             struct mh_audit *a, struct mh_res *r)
{
	uint32_t id = ans->id;
	(void)c;
	int rc = mh_core_ask(req, ans, r);
	ans->id = id;
	if (rc < 0)
		return -1;
	a->note = "done by the capable core";
	return 0;
}

int mh_core_attached(const char *volume_id, struct mh_res *r)
{
	struct mh_msg q = {.type = MH_REQ_ATTACHED}, ans;
	snprintf(q.u.del.volume_id, sizeof(q.u.del.volume_id), "%s", volume_id);
	if (mh_core_ask(&q, &ans, r) < 0)
		return -1;
	return ans.u.attached.devices > INT_MAX ? INT_MAX : (int)ans.u.attached.devices;
}

#define RELAYED(name, own)                                                                         \
	int name(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,             \
	         struct mh_audit *a, struct mh_res *r)                                             \
	{                                                                                          \
		return (c->core ? mh_relay : (own))(c, req, ans, a, r);                            \
	}

void mh_core_flush(const char *volume_id)
{
	struct mh_msg q = {.type = MH_REQ_FLUSH}, ans;
	struct mh_res ignore = {0};
	snprintf(q.u.del.volume_id, sizeof(q.u.del.volume_id), "%s", volume_id);
	(void)mh_core_ask(&q, &ans, &ignore); /* what it leaves, the request after writes back */
}

/* How many loop devices back the volume's image now (any name): 0, more, or -1 with r. */
static int attached_now(const struct mh_ctx *c, const char *volume_id, struct mh_res *r)
{
	struct mh_vol v;
	if (c->core)
		return mh_core_attached(volume_id, r);
	if (mh_vol_lookup(c, volume_id, &v, r) < 0)
		return -1;
	return mh_loop_find(v.st.st_dev, v.st.st_ino, true, NULL, MH_LOOP_RECORD_MAX, r);
}

/*
 * UNSTAGE and UNPUBLISH, whose detach found a loop device held open by
 * another process (udev's probe after an unmount, a reader, a pod's node kept
 * past its UNSTAGE): the handler answers BUSY with EALREADY at once, never
 * waiting (the core has one thread for every volume). A file system's device
 * goes by itself when that holder closes it; a raw block one (pinned, raw) is
 * pinned again meanwhile (mh_loop.c), so that the holder never becomes its
 * only opener, and goes at the next detach once the holder is gone. The wait
 * is here, in this worker, for 2 s at most, at growing intervals (20 ms to
 * 160 ms): a file system's until fewer devices back the image than right
 * after the answer (ATTACHED; none: at once), a raw block one's at each
 * interval; then the request again, whose answer stands once it is not that
 * BUSY (it finds nothing left to unmount, and does the rest: the detach, a
 * directory to remove). Past that the BUSY stands, and the CO's retry asks
 * again; ATTACHED counts the device until it goes, so its image is neither
 * formatted nor removed. A device that went between the answer and the first
 * ATTACHED, while another stays (a read-only publication's, beside its
 * staging's), is missed: that BUSY too stands.
 */
static int detached(mh_answer_fn *fn, const char *volume_id, bool raw, const struct mh_ctx *c,
                    const struct mh_msg *req, struct mh_msg *ans, struct mh_audit *a,
                    struct mh_res *r)
{
	struct mh_res ignore = {0};
	int rc = fn(c, req, ans, a, r);
	int64_t end = mono_ms() + 2000; /* from the first answer */
	long ms = 20;
	while (rc < 0 && r->kind == MH_E_BUSY && r->sys_errno == EALREADY && mono_ms() < end) {
		int before = raw ? 1 : attached_now(c, volume_id, &ignore), n = before;
		if (before < 0)
			break;
		do {
			nanosleep(&(struct timespec){0, ms * 1000000L}, NULL);
			ms = ms < 160 ? ms * 2 : ms;
			if (!raw && (n = attached_now(c, volume_id, &ignore)) < 0)
				return rc;
		} while (!raw && n > 0 && n >= before && mono_ms() < end);
		if (!raw && n > 0 && n >= before)
			break; /* still held at the deadline: the BUSY stands */
		*r = (struct mh_res){0};
		if ((rc = fn(c, req, ans, a, r)) == 0)
			a->note = "done once the loop device another process held was let go";
	}
	return rc;
}

/* UNSTAGE; a file system's written back first, by the core's flusher. */
int mh_relay_unstage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                     struct mh_audit *a, struct mh_res *r)
{
	if (c->core && !(req->u.unstage.flags & MH_F_BLOCK))
		mh_core_flush(req->u.unstage.volume_id);
	bool raw = (req->u.unstage.flags & MH_F_BLOCK) != 0;
	return detached(c->core ? mh_relay : mh_answer_unstage, req->u.unstage.volume_id, raw, c,
	                req, ans, a, r);
}

int mh_relay_unpublish(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                       struct mh_audit *a, struct mh_res *r)
{
	/* Only a raw block publication's own device is detached at UNPUBLISH. */
	return detached(c->core ? mh_relay : mh_answer_unpublish, req->u.unpublish.volume_id, true,
	                c, req, ans, a, r);
}

RELAYED(mh_relay_publish, mh_answer_publish)

/*
 * EXPAND: an xfs grows by bounded steps, each its own request (mh_resize.c),
 * so that no one request holds the core's one thread for the whole growth;
 * asked again until it fills its device, or as many times as the most
 * groups an xfs is grown to take (from four), and two to spare.
 */
#define GROW_STEPS_MAX (MH_GROW_MAX_GROUPS / MH_GROW_STEP_GROUPS + 2)

int mh_relay_expand(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                    struct mh_audit *a, struct mh_res *r)
{
	int rc, steps = GROW_STEPS_MAX;
	do {
		*r = (struct mh_res){0};
		rc = (c->core ? mh_relay : mh_answer_expand)(c, req, ans, a, r);
	} while (rc < 0 && r->kind == MH_E_BUSY && r->sys_errno == EINPROGRESS && --steps > 0);
	if (steps == 0)
		mh_refail(r, MH_E_FAILED, EINPROGRESS, "still growing after %d steps",
		          GROW_STEPS_MAX);
	return rc;
}
RELAYED(mh_relay_stats, mh_answer_stats)
