/*
 * sepcsi-core: the capable core of sepcsi. It holds CAP_SYS_ADMIN and serves
 * the closed table of core/core_table.c, one request at a time, to the
 * orchestrating side over one SOCK_SEQPACKET socket (fd 3), and nothing else.
 * It trusts nothing it is told: every row re-checks the ids, the policy's
 * paths, the ownership of what it touches (marks, device and inode, mount
 * ids) itself, exactly as the helper's rows do (it runs the same handlers).
 *
 * What it never does: look inside an image (no probe, no mkfs: a blank image
 * fails at its mount), run a tool, fork or exec, keep a worker. Its flusher,
 * started beside it without capabilities (fd 6: sepcsi-reader --flusher),
 * writes back a volume's file system when its peer asks FLUSH, before UNSTAGE
 * or FREEZE of it (core_flush.c), so that the write-back never holds the
 * other requests; its reader, beside it too, answers STATS and LIST of
 * mounts, which it does not serve.
 * The images belong to the orchestrating side, which owns images/ (fd 7):
 * the core attaches only a regular file that uid owns, so it can never be
 * made to expose a file its peer could not already read and write
 * (mh_image.c).
 *
 * Start-up, in this order (docs/helper.md, "The capable core"):
 *   1. parse arguments (its log's and direct I/O: no number, no path); refuse
 *      unless uid 0; read the compiled policy from fd 5 (the file's parser
 *      is not linked here: sepcsi-policy compiles);
 *   2. nothing of its own for its view: it runs in the one it is started in
 *      (a view like the helper's, built by the helper's mh_view_enter in the
 *      core's child before the exec);
 *   3. take images/ (the owner's, group root, 02750) and audit.log (root's),
 *      which its starter opened (fds 7 and 8; the data directory is root's:
 *      the peer cannot replace what lies in it); thaw what a dead process
 *      left frozen, detach the raw block devices it left that nothing uses
 *      (mh_sweep.c);
 *   4. find its flusher (fd 6); confine: its capabilities are its starter's (set
 *      before the exec: mh_relay.c), checked here against the compiled
 *      policy's set; start the thread that keeps the freezes' deadlines
 *      (core_freeze.c); then its own seccomp allowlist, both threads'
 *      (policy/seccomp_core.c: no fork, exec, signal or socketpair);
 *   5. READY on fd 4 if it is open; then one datagram at a time, each run and
 *      answered at once, in order (a FLUSH's answer waits for its write-back).
 *
 * A protocol violation (an empty, malformed or oversized datagram, a type
 * outside the table) ends the core with exit 3; the end of the channel, or
 * SIGTERM between requests, or a peer that stops reading its answers (a send
 * never waits), with exit 0, after thawing what it froze. Start-up failures exit 1, a
 * broken policy 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "log.h"
#include "mh.h"
#include "mh_loop.h"
#include "mh_pause.h"
#include "pol_sc_load.h"
#include "sup_fds.h"

#define EXIT_POLICY   2
#define EXIT_PROTOCOL 3

struct args {
	bool direct_io; /* its starter's forecast for the data directory (mh_main.c) */
	enum log_format fmt;
	enum log_level lvl;
};

/* Started by sepcsi-mounthelper only, as mh_relay.c passes them (docs/helper.md). */
static void parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {{"log-format", required_argument, NULL, 'f'},
	                                     {"log-level", required_argument, NULL, 'l'},
	                                     {"direct-io", no_argument, NULL, 'd'},
	                                     {NULL, 0, NULL, 0}};
	int o;
	bool bad = false;
	*a = (struct args){.fmt = LOG_FMT_TEXT, .lvl = LOG_LVL_INFO}; /* buffered unless told */
	while (!bad && (o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		bad = o == '?' || (o == 'f' && log_parse_format(optarg, &a->fmt) < 0) ||
		      (o == 'l' && log_parse_level(optarg, &a->lvl) < 0);
		a->direct_io |= o == 'd';
	}
	if (bad || optind != argc)
		log_fatal("usage: sepcsi-core [--log-format F] [--log-level L] [--direct-io] "
		          "(started by sepcsi-mounthelper, fds as docs/helper.md lists them)");
}

/*
 * Its images directory and audit.log, opened by its starter in the core's
 * view (mh_relay.c), once the helper made the data directory (root's) and
 * gave images/ to its owner (mh_main.c, mh_identity.c): a directory, group
 * root, that others may not write, whose owner is the owner of every image it
 * attaches (mh_image.c); and a regular file only root may read or write. The
 * core makes nothing there.
 */
static void take_data(struct mh_ctx *ctx)
{
	struct stat st;
	ctx->data_fd = ctx->snaps_fd = -1;
	ctx->images_fd = CORE_FD_IMAGES;
	ctx->audit_fd = CORE_FD_AUDIT;
	if (fstat(CORE_FD_IMAGES, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_gid != 0 ||
	    (st.st_mode & S_IWOTH))
		log_fatal("fd %d is not the images directory (the owner's, group root)",
		          CORE_FD_IMAGES);
	ctx->owner = st.st_uid;
	int fl = fcntl(CORE_FD_AUDIT, F_GETFL);
	if (fstat(CORE_FD_AUDIT, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 077) != 0 || st.st_nlink != 1 || fl < 0 ||
	    (fl & (O_ACCMODE | O_APPEND)) != (O_WRONLY | O_APPEND))
		log_fatal("fd %d is not audit.log, a root-only regular file open to append",
		          CORE_FD_AUDIT);
}

/*
 * Its capabilities are its starter's (mh_relay.c, pol_caps_confine_core: set
 * before the exec, carried across it): here the ones kept for that exec are
 * dropped (it execs nothing), and what the kernel says is checked against the
 * compiled policy's set: effective, permitted and bounding exactly that set
 * (the optional ones as held), no_new_privs, and the securebits that keep a
 * uid change or an exec from giving any back, locked.
 */
static void check_caps(const struct pol *pol)
{
	/* Its starter locks NO_CAP_AMBIENT_RAISE too; moot once the inheritable set is empty. */
	const int locked = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
	                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	uint64_t caps, optional;
	pol_core_caps(pol, &caps, &optional);
	int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    syscall(SYS_capget, &h, d) < 0)
		log_fatal("cannot read its capabilities: %s", strerror(errno));
	d[0].inheritable = d[1].inheritable = 0;
	uint64_t eff = d[0].effective | (uint64_t)d[1].effective << 32,
	         prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
	bool ok = syscall(SYS_capset, &h, d) == 0 && eff == prm && (prm & caps) == caps &&
	          !(prm & ~(caps | optional)) && prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 &&
	          bits >= 0 && (bits & locked) == locked && !(bits & SECBIT_KEEP_CAPS);
	int in;
	for (unsigned cap = 0; ok && (in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0)) >= 0; cap++)
		ok = in == (int)(prm >> cap & 1);
	if (!ok)
		log_fatal("its starter did not confine it to the policy's capabilities");
}

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	stop_requested = sig;
}

/* SIGTERM and SIGINT only note the request; they are let in only while waiting. */
static void setup_signals(sigset_t *unblocked)
{
	struct sigaction sa = {.sa_handler = on_stop};
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	if (sigprocmask(SIG_BLOCK, &block, unblocked) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGINT, &sa, NULL) < 0)
		log_fatal("cannot set up signal handling: %s", strerror(errno));
	sigdelset(unblocked, SIGTERM);
	sigdelset(unblocked, SIGINT);
}

static void __attribute__((noreturn)) violation(const char *what, const struct mh_msg *q)
{
	char id[16], type[16];
	snprintf(id, sizeof(id), "%u", q ? q->id : 0U);
	snprintf(type, sizeof(type), "%u", q ? (unsigned)q->type : 0U);
	log_kv(LOG_LVL_ERROR, "protocol_violation", "what", what, "req", id, "type", type, NULL);
	core_thaw_all(); /* a peer's bad datagram leaves nothing frozen behind */
	exit(EXIT_PROTOCOL);
}

struct bufs {
	uint8_t in[MH_MSG_MAX + 1], out[MH_MSG_MAX];
	struct mh_msg req, ans;
};

/* Send b->ans. false: the channel has ended. */
static bool send_answer(int peer, struct bufs *b)
{
	size_t len;
	if (mh_msg_encode_in(&mh_codecs_core, &b->ans, b->out, sizeof(b->out), &len) < 0)
		log_fatal("cannot encode answer to request %u", b->ans.id); /* our own bug */
	/* Never blocks: a peer that stops reading must not hold the loop (and a freeze's end). */
	if (send(peer, b->out, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)len)
		return true;
	log_kv(LOG_LVL_ERROR, "answer_not_sent", "why", strerror(errno), NULL);
	return false;
}

/*
 * Run req's row and send its answer, or, for a FLUSH handed to the flusher,
 * leave it for flushed(). false: the channel has ended.
 */
static bool answer(const struct mh_ctx *ctx, int peer, struct bufs *b, const struct mh_msg *req)
{
	if (mh_ops_handle(ctx, req, &b->ans) < 0)
		violation("not a request the core serves", req);
	return b->ans.type == 0 || send_answer(peer, b); /* 0: a FLUSH, answered by flushed() */
}

/* The FLUSHes whose write-back is done, or left undone by a flusher gone, answered. */
static bool flushed(int peer, struct bufs *b)
{
	uint32_t id;
	while (core_flush_done(&id) == 1) {
		b->ans = (struct mh_msg){.type = MH_ANS_FLUSH, .id = id};
		if (!send_answer(peer, b))
			return false;
	}
	return true;
}

/* One datagram, answered. false: the channel has ended. */
static bool serve_one(const struct mh_ctx *ctx, int peer, struct bufs *b)
{
	ssize_t n = recv(peer, b->in, sizeof(b->in), MSG_TRUNC | MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN;
	if (n == 0) {
		/* End of file, or an empty datagram from a peer still there (mh_main.c). */
		struct pollfd p = {.fd = peer, .events = POLLRDHUP};
		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return false;
		violation("empty datagram", NULL);
	}
	if ((size_t)n > MH_MSG_MAX)
		violation("oversized datagram", NULL);
	if (mh_msg_decode_in(&mh_codecs_core, b->in, (size_t)n, &b->req) < 0)
		violation("undecodable message", NULL);
	return answer(ctx, peer, b, &b->req);
}

int main(int argc, char **argv)
{
	static struct bufs b;
	struct mh_ctx ctx = {0};
	struct pol *pol = NULL;
	struct args a;
	sigset_t unblocked;
	char err[512];

	parse_args(argc, argv, &a);
	log_init("core", a.fmt, a.lvl);
	if (getuid() != 0 || geteuid() != 0)
		log_fatal("must run as root (uid 0)");
	/* Not dumpable (nor its flusher and reader): no /proc/<pid>/root into its view. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_fatal("PR_SET_DUMPABLE: %s", strerror(errno));
	if (pol_load_compiled(CORE_FD_POLICY, &pol, err, sizeof(err)) < 0) {
		log_kv(LOG_LVL_ERROR, "policy_error", "error", err, NULL);
		return EXIT_POLICY;
	}
	close(CORE_FD_POLICY);
	ctx.pol = pol;
	ctx.direct_io = a.direct_io;
	struct stat st;
	if (fstat(SEPCSI_FD_PEER, &st) < 0 || !S_ISSOCK(st.st_mode))
		log_fatal("fd %d is not the request socket", SEPCSI_FD_PEER);
	int ctl =
	    fstat(SEPCSI_FD_CONTROL, &st) == 0 && S_ISSOCK(st.st_mode) ? SEPCSI_FD_CONTROL : -1;

	take_data(&ctx);
	mh_pause_init(ctx.images_fd);
	mh_loop_records_rebuild(ctx.images_fd); /* in memory: core_loops.c */
	mh_sweep(&ctx, NULL); /* what a dead core froze, raw block devices it left unused */
	setup_signals(&unblocked);
	size_t clen;
	const void *filter = pol_core_filter(pol, POL_FILTER_CORE, &clen);
	if (core_flush_init() < 0)
		log_kv(LOG_LVL_ERROR, "no_flusher", "error", strerror(errno), "then",
		       "unmounts and freezes write back in the core's own thread", NULL);
	check_caps(pol);
	/* After the check (capabilities are each thread's: it takes these), before the filter. */
	if (core_freeze_init() < 0)
		log_fatal("cannot start the freezes' deadline thread: %s", strerror(errno));
	if (pol_seccomp_load(filter, clen) < 0)
		log_fatal("cannot install the seccomp filter");
	/* READY is one byte (sup_fds.h); the core links none of the control channel's code. */
	if (ctl >= 0 && send(ctl, &(uint8_t){SEPCSI_CTL_READY}, 1, MSG_NOSIGNAL) != 1)
		log_fatal("cannot send READY: %s", strerror(errno));
	log_kv(LOG_LVL_INFO, "ready", NULL);

	while (!stop_requested) {
		struct pollfd p[2] = {{.fd = SEPCSI_FD_PEER, .events = POLLIN},
		                      {.fd = core_flush_fd(), .events = POLLIN}};
		int n = ppoll(p, 2, NULL, &unblocked);
		if (n < 0 && errno != EINTR)
			log_fatal("ppoll: %s", strerror(errno));
		if (n > 0 && p[1].revents && !flushed(SEPCSI_FD_PEER, &b))
			break;
		if (n > 0 && p[0].revents && !serve_one(&ctx, SEPCSI_FD_PEER, &b))
			break;
		/* A flusher lost while sending to it: what it was given is answered now. */
		if (core_flush_fd() < 0 && !flushed(SEPCSI_FD_PEER, &b))
			break;
	}
	core_thaw_all();
	log_info(stop_requested ? "signal received; exiting" : "channel closed; exiting");
	pol_free(pol);
	return 0;
}
