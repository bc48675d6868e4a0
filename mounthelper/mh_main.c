/*
 * sepcsi-mounthelper: the privileged half of sepcsi. It serves rpcd's requests
 * over one SOCK_SEQPACKET socket (fd 3) and nothing else: no network, no
 * files outside its data directory and the policy's allowed roots.
 *
 * Start-up, in this order (docs/helper.md):
 *   1. parse arguments; refuse unless uid 0; load the policy (broken = exit 2);
 *   2. make the data directory; enter the helper's own view of the file
 *      system (mh_view.c: a private mount namespace, pivoted onto a tmpfs);
 *   3. inside it, open the data directory, images/ and snapshots/ (0700) and
 *      audit.log (append, 0600); thaw what a dead helper left frozen, and
 *      remove its half-made files and unused loop devices (mh_sweep);
 *   4. start sepcsi-runner (mh_tools.c): a child leaves the view, drops every
 *      capability and execs it; it installs its own filter;
 *   5. confine: capabilities (pol_caps_confine_helper, policy/caps_roles.c: the table in
 *      policy/caps.c, locked securebits, no_new_privs), then the seccomp
 *      allowlist (pol_seccomp_install(&pol_sc_helper)); nothing after this
 *      point can exec, open a socket, load a module, trace a process or make a
 *      namespace;
 *   6. ask the runner what the data directory's file system can do (FICLONE,
 *      the largest file); count what is promised (mh_space.c); tell the
 *      supervisor READY on fd 4 (if it is open);
 *   7. loop: one datagram, one decoded request; a read-only request is
 *      answered at once, any other runs in a worker (mh_worker.c), so requests
 *      about different volumes never wait for each other. The main loop sends
 *      every answer itself: exactly one per request, and only on the channel
 *      the request came on (each channel has a generation number).
 *
 * SIGTERM or SIGINT: stop reading requests, wait for the workers in flight to
 * finish, exit 0. The signals are blocked except inside ppoll(), so the
 * handler only ever interrupts the wait and never an operation.
 *
 * Runs as root with (after step 5) only the capabilities of the table, under
 * seccomp. Fatal: any start-up failure (exit 1; exit 2 for a broken policy)
 * and any protocol violation from the supervisor (exit 3). A protocol
 * violation from rpcd (an empty, malformed or oversized datagram, an unknown
 * type, an answer sent as a request) is fatal only when unsupervised (exit 3).
 * Under a supervisor rpcd is the suspect, not the helper: the helper reports
 * SUP_CTL_PEER_VIOLATION on fd 4, drops the channel and keeps running, so
 * that rpcd is killed and restarted and a compromised rpcd cannot spend the
 * helper's restart limit. End of the channel is a clean exit 0 when
 * unsupervised (after the workers finish); under a supervisor, rpcd going
 * away (or being killed) only means waiting for the replacement channel
 * (SUP_CTL_PEER_FD on fd 4).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <linux/magic.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mh.h"
#include "mh_audit.h"
#include "mh_dir_area.h"
#include "mh_identity.h"
#include "mh_image_life.h"
#include "mh_loop.h"
#include "mh_helper_ops.h"
#include "mh_pause.h"
#include "mh_space.h"
#include "mh_tools.h"
#include "mh_view.h"
#include "mh_worker.h"
#include "pol_caps.h"
#include "pol_seccomp.h"
#include "supctl.h"
#include "policy_all.h"
#include "mh_proto_all.h"

#define EXIT_POLICY      2
#define EXIT_PROTOCOL    3
#define DEFAULT_DATA_DIR "/var/lib/sepcsi/data"

struct args {
	const char *policy, *data_dir;
	const char *node_id; /* --node-id: a node plugin's, recorded on each shared base */
	bool node_only;      /* --node-only: serves no Controller service (leaves shared areas) */
	int core_fd;         /* the capable core's channel, -1 without one */
	int reader_fd;       /* its reader's (STATS, LIST of mounts), given with core_fd */
	bool no_core;        /* serve everything itself, as with directory volumes (tests) */
	bool user;           /* --user: the identity it takes once its own core runs */
	uid_t uid;
	gid_t gid;
	const char *fmt_name, *lvl_name; /* for the runner */
	enum log_format fmt;
	enum log_level lvl;
};

static void usage(FILE *f)
{
	fprintf(
	    f, "usage: sepcsi-mounthelper [options]\n"
	       "The privileged helper of sepcsi. Started by sepcsi-supervisor with its\n"
	       "request channel on fd 3 and the control channel on fd 4; not for manual use.\n"
	       "\n"
	       "  --policy FILE          policy file (default: built-in policy, docs/policy.md)\n"
	       "  --data-dir DIR         where volume images live (default " DEFAULT_DATA_DIR ")\n"
	       "  --log-format text|json log line format (default text)\n"
	       "  --log-level LEVEL      error, warn, info or debug (default info)\n"
	       "  --core-fd N            the capable core's channel (sepcsi-core): it mounts,\n"
	       "                         unmounts, grows and looks at volumes for the helper\n"
	       "  --reader-fd N          with --core-fd: the core's reader (sepcsi-reader), which\n"
	       "                         answers STATS and LIST of mounts\n"
	       "  --no-core              start no core: mount itself, as with directory volumes\n"
	       "                         (tests of the helper's own handlers)\n"
	       "  --user UID:GID         the identity it takes once the core it starts runs;\n"
	       "                         it owns the images (without it: stays uid 0)\n"
	       "  --node-id ID           this node plugin's node id, recorded on each shared\n"
	       "                         base (a controller-only driver passes none)\n"
	       "  --node-only            it serves a node plugin only: what killed requests left\n"
	       "                         in a shared base's areas is the controller's to remove\n"
	       "  --help                 this text\n"
	       "\n"
	       "Exit status: 0 channel closed, 1 start-up failure, 2 broken policy,\n"
	       "3 protocol violation (by the supervisor; by rpcd only when unsupervised).\n");
}

static void parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
	    {"policy", required_argument, NULL, 'p'},
	    {"data-dir", required_argument, NULL, 'd'},
	    {"log-format", required_argument, NULL, 'f'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"core-fd", required_argument, NULL, 'c'},
	    {"reader-fd", required_argument, NULL, 'r'},
	    {"no-core", no_argument, NULL, 'n'},
	    {"user", required_argument, NULL, 'u'},
	    {"node-id", required_argument, NULL, 'i'},
	    {"node-only", no_argument, NULL, 'o'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	char *end;
	*a = (struct args){.data_dir = DEFAULT_DATA_DIR,
	                   .core_fd = -1,
	                   .reader_fd = -1,
	                   .fmt_name = "text",
	                   .lvl_name = "info",
	                   .fmt = LOG_FMT_TEXT,
	                   .lvl = LOG_LVL_INFO};
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			a->policy = optarg;
			break;
		case 'd':
			a->data_dir = optarg;
			break;
		case 'f':
			a->fmt_name = optarg;
			if (log_parse_format(optarg, &a->fmt) < 0) {
				fprintf(stderr, "sepcsi-mounthelper: bad --log-format '%s'\n",
				        optarg);
				exit(1);
			}
			break;
		case 'l':
			a->lvl_name = optarg;
			if (log_parse_level(optarg, &a->lvl) < 0) {
				fprintf(stderr, "sepcsi-mounthelper: bad --log-level '%s'\n",
				        optarg);
				exit(1);
			}
			break;
		case 'c':
		case 'r': {
			errno = 0;
			long fd = strtol(optarg, &end, 10);
			int *to = c == 'c' ? &a->core_fd : &a->reader_fd;
			*to = errno || *end || fd > 1024 ? -1 : (int)fd;
			if (*to <= SEPCSI_FD_CONTROL) {
				fprintf(stderr, "sepcsi-mounthelper: bad --%s-fd '%s'\n",
				        c == 'c' ? "core" : "reader", optarg);
				exit(1);
			}
			break;
		}
		case 'n':
			a->no_core = true;
			break;
		case 'i':
			a->node_id = optarg;
			break;
		case 'o':
			a->node_only = true;
			break;
		case 'u': {
			unsigned long u, g;
			errno = 0;
			u = strtoul(optarg, &end, 10);
			g = *end == ':' ? strtoul(end + 1, &end, 10) : 0;
			if (errno || *end || u == 0 || g == 0 || u >= UINT32_MAX ||
			    g >= UINT32_MAX) {
				fprintf(stderr, "sepcsi-mounthelper: bad --user '%s'\n", optarg);
				exit(1);
			}
			a->user = true;
			a->uid = (uid_t)u;
			a->gid = (gid_t)g;
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(1);
		}
	}
	if (optind != argc) {
		usage(stderr);
		exit(1);
	}
	if (a->data_dir[0] != '/') {
		fprintf(stderr, "sepcsi-mounthelper: --data-dir must be absolute\n");
		exit(1);
	}
}

/* fds 0-2 must be open, so that no later fd (a pipe to mkfs, say) lands on them. */
static void ensure_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) < 0) {
			int n = open("/dev/null", O_RDWR);
			if (n != fd)
				exit(1);
		}
	}
}

/* mkdir -p for the data directory: each missing component is made 0700. */
static void make_dirs(const char *path)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		log_fatal("data dir path too long");
	for (char *s = buf + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char saved = *s;
			*s = '\0';
			if (mkdir(buf, 0700) < 0 && errno != EEXIST)
				log_fatal("cannot create %s: %s", buf, strerror(errno));
			*s = saved;
			if (!saved)
				break;
		}
	}
}

/*
 * path as the kernel resolves it, into out (PATH_MAX): its longest existing
 * prefix through realpath(3), then the components not made yet, as written.
 */
static void real_path(const char *path, char *out)
{
	char head[PATH_MAX];
	size_t n = strlen(path);
	if (n >= sizeof(head))
		log_fatal("path too long: %s", path);
	memcpy(head, path, n + 1);
	for (;;) {
		char *cut = strrchr(head, '/');
		if (realpath(head[0] ? head : "/", out)) {
			const char *rest = path + strlen(head);
			size_t used = strcmp(out, "/") == 0 ? 0 : strlen(out), more = strlen(rest);
			if (used + more >= PATH_MAX)
				log_fatal("path too long: %s", path);
			if (more)
				memcpy(out + used, rest, more + 1);
			return;
		}
		if (errno != ENOENT || !cut)
			log_fatal("cannot resolve %s: %s", path, strerror(errno));
		*cut = '\0';
	}
}

/* The directory must be ours alone: owned by root, not writable by group or others. */
static void check_private_dir(int fd, const char *what)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode))
		log_fatal("%s: not a directory", what);
	if (st.st_uid != 0 || (st.st_mode & 022))
		log_fatal("%s must be owned by root and not group/other writable", what);
}

/* <data-dir>/<name>, a directory: made 0700 if missing, opened without following a link. */
static int make_subdir(int dfd, const char *data_dir, const char *name)
{
	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
		log_fatal("cannot create %s/%s: %s", data_dir, name, strerror(errno));
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		log_fatal("cannot open %s/%s: %s", data_dir, name, strerror(errno));
	return fd;
}

/* <data-dir>/<name>: created 0700 if missing, must be ours alone. */
static int open_private_subdir(int dfd, const char *data_dir, const char *name)
{
	int fd = make_subdir(dfd, data_dir, name);
	check_private_dir(fd, name);
	if (fchmod(fd, 0700) < 0)
		log_fatal("cannot chmod %s/%s: %s", data_dir, name, strerror(errno));
	return fd;
}

/*
 * The data directory, root's; images/ and snapshots/ the owner's (root, or
 * the identity the helper takes beside its core); without a core, loops/.
 * The audit file is audit.log, root's; beside its own core, the helper, no
 * longer root once it runs, writes helper-audit.log instead, through its
 * audit writer (mh_audit.c), and never holds audit.log, the core's.
 */
static void open_data_dir(const char *data_dir, struct mh_ctx *ctx, uid_t owner, gid_t group,
                          bool records, bool log_only)
{
	const char *audit = owner ? "helper-audit.log" : "audit.log";
	make_dirs(data_dir);
	int dfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		log_fatal("cannot open data dir %s: %s", data_dir, strerror(errno));
	check_private_dir(dfd, data_dir);
	ctx->data_fd = dfd;
	ctx->owner = owner;
	/* The directories of images, handed to their owner whole (mh_identity.c). */
	ctx->images_fd = make_subdir(dfd, data_dir, "images");
	ctx->snaps_fd = make_subdir(dfd, data_dir, "snapshots");
	/*
	 * File by file once per owner, and again when a directory is not the
	 * owner's now (a release that ran the helper as root took it back).
	 */
	struct stat di, ds;
	bool walk = !mh_identity_handed(dfd, owner) || fstat(ctx->images_fd, &di) < 0 ||
	            fstat(ctx->snaps_fd, &ds) < 0 || di.st_uid != owner || ds.st_uid != owner;
	bool handed = mh_identity_hand_images(ctx->images_fd, owner, walk);
	handed = mh_identity_hand_images(ctx->snaps_fd, owner, walk) && handed;
	if (walk && handed)
		mh_identity_record(dfd, owner);
	/*
	 * At every start, before the helper loses sight of trusted.* marks: the
	 * mark it reads, given back from the core's where the owner removed it.
	 */
	mh_image_marks_upgrade(ctx);
	/* Which loop devices back which image (mh_loop_records.c); rebuilt at every start. */
	if (records)
		mh_loop_records_open(open_private_subdir(dfd, data_dir, "loops"));
	/* The audit file: append-only for us, and nothing rpcd can reach. */
	ctx->audit_fd =
	    openat(dfd, audit, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat st;
	if (ctx->audit_fd < 0 || fstat(ctx->audit_fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != 0 || (st.st_mode & 077) != 0)
		log_fatal("%s/%s: cannot open, or not a root-only regular file", data_dir, audit);
	/* The helper about to leave root keeps no descriptor of it: its writer does. */
	if (owner)
		ctx->audit_fd = mh_audit_writer_start(ctx->audit_fd, owner, group, log_only);
}

static bool is_socket(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void log_violation(const char *what, uint32_t id, uint16_t type)
{
	char idbuf[16], tbuf[16];
	snprintf(idbuf, sizeof(idbuf), "%u", id);
	snprintf(tbuf, sizeof(tbuf), "%u", type);
	log_kv(LOG_LVL_ERROR, "protocol_violation", "what", what, "req", idbuf, "type", tbuf, NULL);
}

/* A violation on the control channel: the supervisor is not to be argued with. */
static void __attribute__((noreturn)) violation(const char *what, uint32_t id, uint16_t type)
{
	log_violation(what, id, type);
	exit(EXIT_PROTOCOL);
}

/* What one datagram from rpcd came to. */
enum served {
	SERVED,        /* answered, handed to a worker, or nothing to read yet */
	SERVE_ENDED,   /* rpcd closed the channel, or it broke */
	SERVE_VIOLATED /* rpcd broke the protocol (already logged) */
};

static enum served rpcd_violation(const char *what, uint32_t id, uint16_t type)
{
	log_violation(what, id, type);
	return SERVE_VIOLATED;
}

/*
 * Has rpcd shut down its end of the channel (closed it, exited, or
 * shutdown(SHUT_WR))? The kernel marks our end RCV_SHUTDOWN for good, and
 * poll reports that as POLLRDHUP; POLLHUP comes with a full shutdown.
 */
static bool peer_hung_up(int peer)
{
	struct pollfd p = {.fd = peer, .events = POLLRDHUP};
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/*
 * One datagram from rpcd. Never exits: what a violation means is the
 * caller's choice.
 *
 * recv() returns 0 both for a zero-length datagram and for end of file, and
 * no flag of recvmsg() tells them apart. The kernel reports end of file on a
 * SOCK_SEQPACKET socket only once the peer has shut down its end, and that
 * mark never goes away. So a 0 while the peer has not hung up (asked after the
 * recv) can only have been an empty datagram: a violation. A 0 once it has hung
 * up is treated as end of file even if an empty datagram happened to be the
 * last thing it sent: the sender is gone either way, and its going is the
 * supervisor's to count.
 */
struct serve_bufs {
	uint8_t buf[MH_MSG_MAX + 1];
	uint8_t out[MH_MSG_MAX];
	struct mh_msg req, ans;
};

static enum served serve_one(const struct mh_ctx *ctx, int peer, uint32_t gen, int ctl)
{
	static struct serve_bufs *m;
	size_t len;

	if (!m)
		m = mh_main_only(sizeof(*m)); /* no worker keeps a copy of a request */

	ssize_t n = recv(peer, m->buf, sizeof(m->buf), MSG_TRUNC | MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return SERVED;
		return SERVE_ENDED; /* ECONNRESET and friends: the peer is gone */
	}
	if (n == 0)
		return peer_hung_up(peer) ? SERVE_ENDED : rpcd_violation("empty datagram", 0, 0);
	if ((size_t)n > MH_MSG_MAX)
		return rpcd_violation("oversized datagram", 0, 0);
	if (mh_msg_decode(m->buf, (size_t)n, &m->req) < 0)
		return rpcd_violation("undecodable message", 0, 0);
	if (!mh_ops_known(m->req.type))
		return rpcd_violation("not a request this helper serves", m->req.id, m->req.type);
	/* With a core, what it answers is asked by a worker, never by this loop. */
	bool asks_core = m->req.type == MH_REQ_STATS ||
	                 (m->req.type == MH_REQ_LIST && m->req.u.list.what == MH_LIST_MOUNTS);
	if (!mh_ops_row(m->req.type)->read_only || (ctx->core && asks_core)) {
		mh_worker_start(ctx, &m->req, peer, gen, ctl); /* answered when it is done */
		return SERVED;
	}
	if (mh_ops_handle(ctx, &m->req, &m->ans) < 0)
		return rpcd_violation("not a request this helper serves", m->req.id, m->req.type);
	if (mh_msg_encode(&m->ans, m->out, sizeof(m->out), &len) < 0)
		log_fatal("cannot encode answer to request %u", m->req.id); /* our own bug */
	if (send(peer, m->out, len, MSG_NOSIGNAL) != (ssize_t)len)
		return SERVE_ENDED; /* rpcd went away; the answer is lost with it */
	return SERVED;
}

/*
 * rpcd broke the protocol on peer (logged already). Unsupervised: exit 3, as
 * nobody else can act on it. Supervised: tell the supervisor, which kills and
 * restarts rpcd; the caller then drops the channel and waits for a new one.
 * If the channel has already hung up, the rpcd that sent the datagram is gone
 * and its death is being counted: no report, so that the report names the
 * rpcd still at the other end of this channel (a new rpcd is spawned only
 * after the old one has been reaped, and its death hangs the channel up).
 * Only an rpcd that dies in the instant between the check and the report
 * could make the supervisor kill its successor: one extra rpcd restart, never
 * a helper restart.
 */
static void report_violation(int ctl, int peer)
{
	if (ctl < 0)
		exit(EXIT_PROTOCOL);
	if (peer_hung_up(peer)) {
		log_info("rpcd has gone already; not reported");
		return;
	}
	if (sup_ctl_send(ctl, SUP_CTL_PEER_VIOLATION, -1) < 0) {
		/* Nobody can remove rpcd: fall back to leaving, which gets us a new channel. */
		log_error("cannot report the violation to the supervisor: %s", strerror(errno));
		exit(EXIT_PROTOCOL);
	}
	log_info("violation reported to the supervisor; waiting for a new channel");
}

/* A message from the supervisor. Returns true if *peer is a new channel now; or exits. */
static bool control_one(int ctl, int *peer)
{
	struct sup_ctl_msg m;
	if (sup_ctl_recv(ctl, &m) < 0) {
		if (errno == 0 || errno == ECONNRESET) {
			log_info("supervisor closed the control channel; exiting");
			exit(0);
		}
		if (errno == EINTR || errno == EAGAIN)
			return false;
		if (errno == EPROTO)
			violation("malformed control message", 0, 0);
		log_fatal("control channel: %s", strerror(errno));
	}
	if (m.type != SUP_CTL_PEER_FD || m.fd < 0 || !is_socket(m.fd)) {
		if (m.fd >= 0)
			close(m.fd);
		violation("unexpected control message", 0, (uint16_t)m.type);
	}
	/*
	 * The new channel takes fd 3; dup2 closes the old one, if any. If fd 3
	 * was free, the kernel may have put the new descriptor right there.
	 */
	if (m.fd != SEPCSI_FD_PEER) {
		if (dup2(m.fd, SEPCSI_FD_PEER) < 0)
			log_fatal("dup2 new channel: %s", strerror(errno));
		close(m.fd);
	}
	log_info("new request channel from the supervisor");
	*peer = SEPCSI_FD_PEER;
	return true;
}

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	stop_requested = sig;
}

/*
 * SIGTERM/SIGINT only note the request. They stay blocked except inside
 * ppoll() (the mask it installs for the wait), so a signal can never
 * interrupt an operation half done, nor slip in between a check and the wait.
 */
static void setup_signals(sigset_t *unblocked)
{
	struct sigaction sa;
	sigset_t block;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	if (sigprocmask(SIG_BLOCK, &block, unblocked) < 0 || sigaction(SIGTERM, &sa, NULL) < 0 ||
	    sigaction(SIGINT, &sa, NULL) < 0)
		log_fatal("cannot set up signal handling: %s", strerror(errno));
	sigdelset(unblocked, SIGTERM);
	sigdelset(unblocked, SIGINT);
}

/* Wait until every worker has finished its request and ended, and send their answers. */
/* What the core's channel (or its reader's) is watched for: answers, room for questions. */
static struct pollfd core_poll(int chan)
{
	return (struct pollfd){.fd = mh_workers_core_fd(chan),
	                       .events =
	                           (short)(POLLIN | (mh_workers_core_waiting(chan) ? POLLOUT : 0))};
}

static void core_io(const struct pollfd *p)
{
	for (int chan = 0; chan < MH_CHANS; chan++) {
		if (p[chan].revents & POLLOUT)
			mh_workers_core_send(chan);
		if (p[chan].revents & ~POLLOUT)
			mh_workers_core_answer(chan); /* an answer, or the end of the channel */
	}
}

static void drain_workers(const struct mh_ctx *ctx, int peer, uint32_t gen)
{
	mh_workers_end_all();
	while (mh_workers_count() > 0) {
		struct pollfd p[MH_CHANS + MH_WORKERS_MAX] = {core_poll(MH_CHAN_CORE),
		                                              core_poll(MH_CHAN_READER)};
		size_t n = mh_workers_pollfds(p + MH_CHANS, MH_WORKERS_MAX);
		if (poll(p, MH_CHANS + n, mh_workers_timeout_ms(ctx)) < 0 && errno != EINTR)
			log_fatal("poll: %s", strerror(errno));
		core_io(p); /* work in flight finishes, with the core's part */
		mh_workers_reap(ctx, peer, gen, p + MH_CHANS, n);
		mh_workers_enforce(ctx);
	}
}

/*
 * Ready only once the core serves (its start-up done: the thaw, the loop
 * records, the sweep, its confinement): one PING, under id 0, which the main
 * loop's questions never use; a core that ends instead ends the helper.
 */
static void core_wait_ready(int fd)
{
	struct mh_msg ping = {.type = MH_REQ_PING, .id = 0}, ans;
	uint8_t buf[MH_MSG_MAX];
	size_t len;
	ssize_t n;
	if (mh_msg_encode(&ping, buf, sizeof(buf), &len) < 0 ||
	    send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		log_fatal("cannot ask the capable core: %s", strerror(errno));
	do
		n = recv(fd, buf, sizeof(buf), 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0 || mh_msg_decode(buf, (size_t)n, &ans) < 0 || ans.type != MH_ANS_PING)
		log_fatal("the capable core did not start");
}

/*
 * May the loop devices of the data directory's images read and write them
 * with direct I/O? Asked once, at the start, of an unnamed file there (every
 * image lies in the same file system), and given to the core at its start:
 * only at the 512-byte logical blocks every image's file system was made for
 * (mkfs formats the image file as 512-byte sectors), so not where the file
 * system needs a coarser O_DIRECT alignment (a disk of 4 KiB sectors: a
 * device of 4 KiB blocks would no longer mount those file systems); not on
 * btrfs, which checksums data, so that a block written with O_DIRECT from a
 * buffer its writer changes meanwhile (a pod's own O_DIRECT on its raw block
 * device) would be stored under a checksum it fails. A file system that does
 * not tell (no STATX_DIOALIGN) is tried: the kernel decides at attach.
 */
static void forecast_direct_io(struct mh_ctx *ctx)
{
	const char *why = "no unnamed file in the data directory";
	struct statx stx;
	struct statfs fs;
	int tmp = openat(ctx->images_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (tmp >= 0 && fstatfs(tmp, &fs) == 0 && fs.f_type == BTRFS_SUPER_MAGIC)
		why = "btrfs checksums what direct I/O writes while its writer may change it";
	else if (tmp >= 0 && (statx(tmp, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0 ||
	                      !(stx.stx_mask & STATX_DIOALIGN)))
		why = NULL;
	else if (tmp >= 0)
		why = stx.stx_dio_offset_align == 0
		          ? "the data directory's file system has no direct I/O"
		      : stx.stx_dio_offset_align > 512 ? "the data directory's file system needs "
		                                         "direct I/O aligned beyond 512 bytes"
		                                       : NULL;
	mh_closep(&tmp);
	ctx->direct_io = why == NULL;
	if (why)
		log_kv(LOG_LVL_WARN, "loop_devices_buffered", "why", why, NULL);
}

/*
 * Steps 1 to 6 of the header: everything before the first request, in the
 * order the confinement needs. Returns the policy; a broken one ends the
 * helper with EXIT_POLICY.
 */
static struct pol *start_up(const struct args *a, struct mh_ctx *ctx, sigset_t *unblocked)
{
	char err[512];
	struct pol *pol = NULL;

	/* Logging once now also makes glibc load its time zone data before seccomp. */
	log_init("mounthelper", a->fmt, a->lvl);
	log_kv(LOG_LVL_INFO, "start", "policy", a->policy ? a->policy : "(built-in)", "data_dir",
	       a->data_dir, NULL);
	if (getuid() != 0 || geteuid() != 0)
		log_fatal("must run as root (uid 0)");
	/*
	 * Not dumpable: beside a core it holds no capability, and any other process
	 * of uid 0 without one (its runners, the tools, a root pod on the host's pid
	 * namespace) could otherwise open its /proc/<pid>/mem, fds and root.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_fatal("PR_SET_DUMPABLE: %s", strerror(errno));
	/* Neither the runners nor a tool inherit the core's channel, nor its reader's. */
	if ((a->core_fd >= 0) != (a->reader_fd >= 0))
		log_fatal(
		    "--core-fd and --reader-fd go together: the reader answers STATS and LIST");
	for (int i = 0; i < 2; i++) {
		int fd = i ? a->reader_fd : a->core_fd;
		if (fd >= 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
			log_fatal("fd %d: %s", fd, strerror(errno));
	}
	if (pol_load(a->policy, &pol, err, sizeof(err)) < 0) {
		log_kv(LOG_LVL_ERROR, "policy_error", "error", err, NULL);
		exit(EXIT_POLICY);
	}
	ctx->pol = pol;
	if (!pol_path_syntax_ok(a->data_dir))
		log_fatal("--data-dir must be a canonical absolute path");
	/*
	 * The images never in kubelet's tree: the view (and the runners') takes them
	 * apart. Compared as the kernel will resolve them (a symbolic link on either
	 * path is followed), before anything is made.
	 */
	char data_real[PATH_MAX], other_real[PATH_MAX];
	real_path(a->data_dir, data_real);
	for (size_t i = 0; pol_root(pol, i) || pol_base_dir(pol, i); i++) {
		const char *root = pol_root(pol, i), *base = pol_base_dir(pol, i);
		for (int k = 0; k < 2; k++) {
			const char *other = k ? base : root;
			if (!other || (real_path(other, other_real),
			               !pol_paths_nested(data_real, other_real)))
				continue;
			snprintf(err, sizeof(err), "--data-dir %s and %s %s overlap", a->data_dir,
			         k ? "base directory" : "allowed root", other);
			log_kv(LOG_LVL_ERROR, "policy_error", "error", err, NULL);
			exit(EXIT_POLICY);
		}
	}
	make_dirs(a->data_dir);
	/*
	 * Without directory bases, the capable core does what needs CAP_SYS_ADMIN
	 * (started below, in the helper's view); with them, the helper keeps doing
	 * it all itself, for now (docs/helper.md).
	 */
	int core_fd = a->core_fd, reader_fd = a->reader_fd;
	bool start_core = core_fd < 0 && pol_base_dir(pol, 0) == NULL && !a->no_core;
	mh_tools_locate(); /* beside the helper's binary, which its view does not show */
	if (start_core)
		mh_core_locate();
	/* From here on the helper sees only its own view of the file system. */
	mh_view_enter(pol, a->data_dir);
	/* Beside its own core, the images are the identity the helper takes (--user). */
	uid_t owner = start_core && a->user ? a->uid : 0;
	open_data_dir(a->data_dir, ctx, owner, a->gid, core_fd < 0 && !start_core,
	              pol_seccomp_log_only(pol));
	/* A node id that is no plain name is recorded nowhere: no controller publishes to it. */
	const char *node = a->node_id && pol_dir_name_ok(a->node_id) && !strchr(a->node_id, '/')
	                       ? a->node_id
	                       : NULL;
	if (a->node_id && !node)
		log_kv(LOG_LVL_WARN, "node_id_not_recorded", "node_id", a->node_id, "why",
		       "not a plain name of [A-Za-z0-9._-]", NULL);
	mh_dir_set_node(node, a->node_only);
	for (size_t i = 0; pol_base_dir(pol, i); i++) {
		struct mh_res r = {0};
		if (pol_base_shared(pol, i) && mh_dir_shared_check(ctx, i, node, &r) < 0)
			log_fatal("shared base directory %s: %s (docs/operations.md)",
			          pol_base_dir(pol, i), r.reason);
	}
	forecast_direct_io(ctx); /* the core is told, at its start */
	if (start_core)
		core_fd = mh_core_start(pol, a->data_dir, a->fmt_name, a->lvl_name, ctx->direct_io,
		                        &reader_fd);
	if (core_fd >= 0)
		mh_view_leave_to_core(pol); /* before the runners: they see none of it either */
	mh_pause_init(ctx->images_fd);
	if (owner) {
		umask(0007); /* its images are 0660, group root's, for the core */
		mh_identity_take(a->uid, a->gid); /* its runners are started as that uid, too */
	}
	ctx->core = core_fd >= 0;
	if (ctx->core && pol_base_dir(pol, 0) != NULL)
		log_fatal("directory volumes are served by the helper alone: not with --core-fd");
	/* With a core, the core records and sweeps (and thaws) the devices, at its own start. */
	if (!ctx->core)
		mh_loop_records_rebuild(ctx->images_fd); /* no worker yet: one look at every one */
	/* Before the helper's filter (no execve), and before the sweep, which empties trees. */
	mh_tools_start(pol, a->data_dir, a->fmt_name, a->lvl_name);
	if (!ctx->core)
		mh_sweep(ctx, NULL); /* no worker yet: what a dead helper's workers left */
	else
		mh_view_drop_proc(); /* its runner keeps its own (it reopens images by fd there) */
	if (!is_socket(SEPCSI_FD_PEER))
		log_fatal("fd %d is not the request socket", SEPCSI_FD_PEER);
	if (core_fd >= 0 && (!is_socket(core_fd) || !is_socket(reader_fd)))
		log_fatal("fd %d or %d is not the capable core's channel or its reader's", core_fd,
		          reader_fd);
	mh_workers_set_core(core_fd, reader_fd);
	setup_signals(unblocked);

	if ((ctx->core ? pol_caps_confine_helper_core()
	               : pol_caps_confine_helper(pol_base_dir(pol, 0) != NULL)) < 0)
		log_fatal("cannot confine capabilities: %s", strerror(errno));
	if (pol_seccomp_install(&pol_sc_helper, pol_seccomp_log_only(pol)) < 0)
		log_fatal("cannot install the seccomp filter");
	if (pol_seccomp_log_only(pol))
		log_warn("seccomp in log-only mode: violations are logged, not killed");
	/* What the data directory's file system can do, asked of the capability-less runner. */
	struct mh_res probe = {0};
	if (mh_tools_probe(ctx->images_fd, &ctx->reflink, &ctx->max_file_bytes, &probe) < 0)
		log_kv(LOG_LVL_WARN, "probe_failed", "reason", probe.reason, NULL);
	mh_space_init(ctx);
	mh_workers_init();
	if (core_fd >= 0) {
		core_wait_ready(core_fd);
		core_wait_ready(reader_fd); /* its confinement in place, too */
	}
	return pol;
}

/*
 * Step 7: requests until a stop signal, or until the channel ends with no
 * supervisor to send another. *peer and *gen are the channel in use and its
 * generation, for the drain that follows.
 */
static void serve(const struct mh_ctx *ctx, int ctl, const sigset_t *unblocked, int *peer,
                  uint32_t *gen)
{
	bool closing = false; /* unsupervised and the channel ended: finish, then exit */
	while (!stop_requested && !closing) {
		mh_workers_purge(ctx); /* what dead operations left, in a worker (not here) */
		struct pollfd p[7 + MH_WORKERS_MAX] = {
		    core_poll(MH_CHAN_CORE), /* -1: none */
		    core_poll(MH_CHAN_READER),
		    {.fd = *peer, .events = POLLIN},
		    {.fd = ctl, .events = POLLIN},
		    {.fd = mh_tools_pidfd(MH_RUNNER_TOOLS), .events = POLLIN},
		    {.fd = mh_tools_pidfd(MH_RUNNER_TREE), .events = POLLIN},
		    {.fd = mh_audit_writer_fd(), .events = 0}}; /* its end only */
		size_t nw = mh_workers_pollfds(p + 7, MH_WORKERS_MAX);
		int wait_ms = mh_workers_timeout_ms(ctx);
		struct timespec ts = {.tv_sec = wait_ms / 1000,
		                      .tv_nsec = (wait_ms % 1000) * 1000000L};
		if (ppoll(p, 7 + nw, wait_ms < 0 ? NULL : &ts, unblocked) < 0) {
			if (errno == EINTR)
				continue;
			log_fatal("ppoll: %s", strerror(errno));
		}
		/* Before a request is read: answered workers release their ids first. */
		core_io(p); /* answers to the workers waiting for them */
		mh_workers_reap(ctx, *peer, *gen, p + 7, nw);
		mh_workers_enforce(ctx); /* a freeze that ran out is ended now */
		if (p[6].revents)
			log_fatal("the audit writer is gone; the helper does not act unrecorded");
		if (p[4].revents)
			log_fatal(
			    "the tool runner died; the helper cannot format volumes without it");
		if (p[5].revents)
			log_fatal(
			    "the tree runner died; the helper cannot delete or copy directory "
			    "volumes without it");
		if (p[3].revents) {
			*gen += control_one(ctl, peer); /* a new channel, even on the same fd */
			continue;
		}
		if (!p[2].revents)
			continue;
		switch (serve_one(ctx, *peer, *gen, ctl)) {
		case SERVED:
			continue;
		case SERVE_VIOLATED:
			report_violation(ctl, *peer); /* returns only when supervised */
			break;
		case SERVE_ENDED:
			if (ctl < 0) {
				log_info("request channel closed; exiting");
				closing = true;
				continue;
			}
			log_info("request channel closed; waiting for a new one");
			break;
		}
		/*
		 * Supervised: rpcd is being restarted; wait for the new channel.
		 * Answers of the workers in flight go nowhere: nobody asked the
		 * next rpcd's questions.
		 */
		close(*peer);
		*peer = -1;
		(*gen)++;
	}
}

int main(int argc, char **argv)
{
	struct args a;
	struct mh_ctx ctx = {0};
	sigset_t unblocked;

	ensure_std_fds();
	parse_args(argc, argv, &a);
	int ctl = is_socket(SEPCSI_FD_CONTROL) ? SEPCSI_FD_CONTROL : -1;
	struct pol *pol = start_up(&a, &ctx, &unblocked);
	int peer = SEPCSI_FD_PEER;
	uint32_t gen = 1; /* the channel's generation: a new one for each channel, and none */
	if (ctl >= 0 && sup_ctl_send(ctl, SUP_CTL_READY, -1) < 0)
		log_fatal("cannot send READY: %s", strerror(errno));
	log_kv(LOG_LVL_INFO, "ready", "reflink", ctx.reflink ? "yes" : "no", NULL);
	mh_workers_find_leftovers(&ctx); /* emptied by workers once serving, never before READY */

	serve(&ctx, ctl, &unblocked, &peer, &gen);
	if (stop_requested)
		log_info("signal received: finishing operations in flight, then exiting");
	drain_workers(&ctx, peer, gen);
	close(ctx.images_fd);
	close(ctx.snaps_fd);
	close(ctx.data_fd);
	if (ctx.audit_fd != mh_audit_writer_fd())
		close(ctx.audit_fd); /* the writer's socket is ended by its exit handler */
	pol_free(pol);
	return 0;
}
