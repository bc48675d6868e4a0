/*
 * sepcsi-reader: the looks the capable core's orchestrating side asks that
 * need no capability, out of the process that holds CAP_SYS_ADMIN: STATS (a
 * volume's usage and condition, for NodeGetVolumeStats), LIST of the
 * mounts of sepcsi's loop devices (for reconciliation) and STAGE_CHECK (the
 * checks of a STAGE, before the helper formats an image). The helper (its
 * peer, fd 3) asks them as it used to ask the core; the core no longer
 * serves them.
 *
 * It sees what the core sees: its starter is the core's (mh_relay.c), which
 * forks it once the core's view is built and before the core's exec, so the
 * two share one mount namespace and the mount ids LIST names are the core's.
 * It runs as uid 0 (kubelet's directories and the loop devices are root's),
 * with no capability in any set, the securebits locked and no_new_privs
 * (pol_caps_confine_tools, by its starter: checked here), not dumpable,
 * killed with its parent, and confined twice: Landlock to reading
 * (reader_landlock.c: no file written, made, removed or truncated anywhere,
 * files read only under /proc, /sys, /dev and the images) and its own
 * seccomp filter (policy/seccomp_reader.c, carried compiled in the policy
 * it reads, as the core's is).
 *
 * Safety argument. Its rows only read (reader_table.c), re-check every id and
 * path as the helper's handlers always did, and answer only its peer; a peer
 * that asks anything else, or sends a malformed datagram, ends it (exit 3),
 * and the helper ends with it. Taken over, it could read what its ruleset
 * lets it read and tell lies about usage and mounts: the helper acts on
 * neither (the core checks every mount it is asked to act on itself).
 *
 * With --flusher it is the core's flusher instead (reader_flush.c): the same
 * start, then only its socket to the core and the flusher's filter.
 *
 * Exit status: 0 its channel ended, 1 start-up failure, 2 broken policy,
 * 3 protocol violation.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "mh.h"
#include "mh_loop.h"
#include "mh_ops.h"
#include "openat2.h"
#include "pol_sc_load.h"
#include "reader.h"

struct args {
	bool flusher;
	enum log_format fmt;
	enum log_level lvl;
};

static void __attribute__((noreturn)) usage(int status)
{
	fprintf(status ? stderr : stdout,
	        "usage: sepcsi-reader [--log-format F] [--log-level L]\n"
	        "       sepcsi-reader --flusher [--log-format F] [--log-level L]\n"
	        "(started by sepcsi-mounthelper beside its core: its channel on fd %d, the "
	        "images directory on fd %d, whose owner owns the images, the compiled policy on "
	        "fd %d; the flusher's socket "
	        "to the core on fd %d)\n",
	        READER_FD_PEER, READER_FD_IMAGES, READER_FD_POLICY, POL_SC_FLUSH_FD);
	exit(status);
}

static void parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
	    {"flusher", no_argument, NULL, 'F'},
	    {"log-format", required_argument, NULL, 'f'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int c;
	*a = (struct args){.fmt = LOG_FMT_TEXT, .lvl = LOG_LVL_INFO};
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'F':
			a->flusher = true;
			break;
		case 'f':
			if (log_parse_format(optarg, &a->fmt) < 0)
				usage(1);
			break;
		case 'l':
			if (log_parse_level(optarg, &a->lvl) < 0)
				usage(1);
			break;
		case 'h':
			usage(0);
		default:
			usage(1);
		}
	}
	if (optind != argc)
		usage(1);
}

/*
 * Its starter confined it (pol_caps_confine_tools): no capability in any set,
 * no_new_privs, and the securebits that keep an exec or a uid change from
 * giving any back, locked.
 */
static void check_confined(void)
{
	const int locked = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
	                   SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED;
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	int bits = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	bool none = syscall(SYS_capget, &h, d) == 0 &&
	            prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 && bits >= 0 &&
	            (bits & locked) == locked && !(bits & SECBIT_KEEP_CAPS);
	for (int i = 0; none && i < 2; i++)
		none = !d[i].effective && !d[i].permitted && !d[i].inheritable;
	for (unsigned cap = 0; none && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		none = prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0;
	if (!none)
		log_fatal(
		    "its starter did not take every capability away, set no_new_privs and lock "
		    "the securebits");
}

static bool is_a(int fd, mode_t type)
{
	struct stat st;
	return fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

/* A violation of the protocol by its peer: logged, exit 3 (the helper ends with it). */
static void __attribute__((noreturn)) violation(const char *what)
{
	log_kv(LOG_LVL_ERROR, "protocol_violation", "what", what, NULL);
	exit(3);
}

int main(int argc, char **argv)
{
	static struct mh_msg req, ans;
	static uint8_t in[MH_MSG_MAX + 1], out[MH_MSG_MAX];
	struct mh_ctx ctx = {
	    .data_fd = -1, .images_fd = READER_FD_IMAGES, .snaps_fd = -1, .audit_fd = -1};
	struct pol *pol = NULL;
	struct args a;
	char err[512];
	size_t flen;

	parse_args(argc, argv, &a);
	log_init(a.flusher ? "flusher" : "reader", a.fmt, a.lvl);
	if (getuid() != 0 || geteuid() != 0)
		log_fatal("must run as root (uid 0): kubelet's directories are root's");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		log_fatal("PR_SET_DUMPABLE: %s", strerror(errno));
	check_confined();
	if (pol_load_compiled(READER_FD_POLICY, &pol, err, sizeof(err)) < 0) {
		log_kv(LOG_LVL_ERROR, "policy_error", "error", err, NULL);
		return 2;
	}
	close(READER_FD_POLICY);
	if (a.flusher) {
		const void *ff = pol_core_filter(pol, POL_FILTER_FLUSHER, &flen);
		(void)prctl(PR_SET_NAME, "sepcsi-flusher", 0, 0, 0); /* in ps, beside the reader */
		if (!is_a(POL_SC_FLUSH_FD, S_IFSOCK))
			log_fatal("fd %d must be its socket to the core", POL_SC_FLUSH_FD);
		/* Nothing but its socket: the descriptor the core hands over is all it reaches. */
		if (close_range(0, POL_SC_FLUSH_FD - 1, 0) < 0 ||
		    close_range(POL_SC_FLUSH_FD + 1, ~0U, 0) < 0 || pol_seccomp_load(ff, flen) < 0)
			_exit(1);
		reader_flush_serve();
	}
	struct stat images;
	if (!is_a(READER_FD_PEER, S_IFSOCK) || fstat(READER_FD_IMAGES, &images) < 0 ||
	    !S_ISDIR(images.st_mode))
		log_fatal("fd %d must be its channel and fd %d the images directory",
		          READER_FD_PEER, READER_FD_IMAGES);
	ctx.pol = pol;
	ctx.owner = images.st_uid;  /* as the core's: the owner of images/ owns the images */
	mh_loop_make_nodes = false; /* the core's /dev is the core's to fill */
	openat2_no_syscall = reader_openat2_one_name; /* its filter answers openat2 ENOSYS */
	int ll = reader_landlock(READER_FD_IMAGES);
	if (ll < 0)
		log_fatal("cannot set up Landlock: %s", strerror(errno));
	if (ll == 0)
		log_kv(LOG_LVL_WARN, "landlock_unavailable", "then",
		       "its filter keeps it from writing, not from reading what uid 0 may read",
		       NULL);
	const void *filter = pol_core_filter(pol, POL_FILTER_READER, &flen);
	if (pol_seccomp_load(filter, flen) < 0)
		log_fatal("cannot install the seccomp filter");
	log_kv(LOG_LVL_INFO, "ready", "landlock", ll ? "yes" : "no", NULL);

	for (;;) {
		size_t len;
		ssize_t n = recv(READER_FD_PEER, in, sizeof(in), MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break; /* its channel broke: the helper is gone */
		if (n == 0) {
			/* End of file, or an empty datagram from a peer still there. */
			struct pollfd p = {.fd = READER_FD_PEER, .events = POLLRDHUP};
			if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
				break;
			violation("empty datagram");
		}
		if ((size_t)n > MH_MSG_MAX)
			violation("oversized datagram");
		if (mh_msg_decode_in(&mh_codecs_reader, in, (size_t)n, &req) < 0)
			violation("undecodable message");
		if (!mh_ops_known(req.type) || mh_ops_handle(&ctx, &req, &ans) < 0)
			violation("not a request the reader serves");
		if (mh_msg_encode_in(&mh_codecs_reader, &ans, out, sizeof(out), &len) < 0)
			log_fatal("cannot encode answer to request %u", ans.id); /* our own bug */
		if (send(READER_FD_PEER, out, len, MSG_NOSIGNAL) != (ssize_t)len)
			break;
	}
	pol_free(pol);
	return 0;
}

/*
 * Loop records (mh_loop.h): the reader keeps none, so each look at an image's
 * devices scans them all (STATS only; LIST asks each mount's own device).
 */
/* NOLINTNEXTLINE(readability-non-const-parameter): mh_loop.h's, which others write */
int mh_loop_record_read(dev_t dev, ino_t ino, int nr[MH_LOOP_RECORD_MAX])
{
	(void)dev;
	(void)ino;
	(void)nr;
	return -1;
}

void mh_loop_record_attach(dev_t dev, ino_t ino, int new_nr)
{
	(void)dev;
	(void)ino;
	(void)new_nr;
}

void mh_loop_record_forget(dev_t dev, ino_t ino)
{
	(void)dev;
	(void)ino;
}

void mh_loop_record_none(dev_t dev, ino_t ino)
{
	(void)dev;
	(void)ino;
}
