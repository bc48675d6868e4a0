/*
 * sepcsi-rpcd: the unprivileged CSI endpoint. Started by the supervisor with
 * the helper channel on fd 3 and the control channel on fd 4, already running
 * as a non-root uid with no capabilities and no_new_privs. It refuses to run
 * as root. Fatal here: bad flags, a store that cannot be opened, an endpoint
 * that cannot be bound. Everything after start-up is answered, not fatal.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <malloc.h>
#include <grpc/grpc.h>
#include <pthread.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mh_client.h"
#include "pol_seccomp.h"
#include "rpcd.h"
#include "rpcd_metrics.h"
#include "sepcsi_version.h"
#include "store.h"
#include "supctl.h"

#define RPCD_WORKERS 8

static void usage(FILE *f)
{
	fprintf(f, "usage: sepcsi-rpcd --endpoint unix:///PATH --driver-name NAME --node-id ID\n"
	           "                   --state-dir DIR [--mode all|controller|node]\n"
	           "                   [--max-volumes-per-node N] [--log-format text|json]\n"
	           "                   [--log-level error|warn|info|debug]\n"
	           "                   [--metrics-interval SECONDS] [--snapshot-metadata]\n"
	           "Normally started by sepcsi-supervisor, which passes the helper channel on\n"
	           "fd 3 and its control channel on fd 4.\n");
}

static int parse_args(int argc, char **argv, struct rpcd *r)
{
	static const struct option opts[] = {
	    {"endpoint", required_argument, NULL, 'e'},
	    {"driver-name", required_argument, NULL, 'd'},
	    {"node-id", required_argument, NULL, 'n'},
	    {"mode", required_argument, NULL, 'm'},
	    {"state-dir", required_argument, NULL, 's'},
	    {"max-volumes-per-node", required_argument, NULL, 'x'},
	    {"log-format", required_argument, NULL, 'f'},
	    {"log-level", required_argument, NULL, 'l'},
	    {"metrics-interval", required_argument, NULL, 'i'},
	    {"snapshot-metadata", no_argument, NULL, 'b'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	enum log_format fmt = LOG_FMT_TEXT;
	enum log_level lvl = LOG_LVL_INFO;
	int c;
	char *end;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'e':
			r->endpoint = optarg;
			break;
		case 'd':
			r->cfg.driver_name = optarg;
			break;
		case 'n':
			r->cfg.node_id = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "all") == 0)
				r->cfg.mode = CTL_MODE_ALL;
			else if (strcmp(optarg, "controller") == 0)
				r->cfg.mode = CTL_MODE_CONTROLLER;
			else if (strcmp(optarg, "node") == 0)
				r->cfg.mode = CTL_MODE_NODE;
			else
				return -1;
			break;
		case 's':
			r->state_dir = optarg;
			break;
		case 'b':
			r->snapshot_metadata = true;
			break;
		case 'x':
			errno = 0;
			r->cfg.max_volumes_per_node = strtoll(optarg, &end, 10);
			if (errno || *end || r->cfg.max_volumes_per_node < 0)
				return -1;
			break;
		case 'i':
			errno = 0;
			r->metrics_interval_s = strtoul(optarg, &end, 10);
			if (errno || *end || r->metrics_interval_s == 0 ||
			    r->metrics_interval_s > 3600)
				return -1;
			break;
		case 'f':
			if (log_parse_format(optarg, &fmt))
				return -1;
			break;
		case 'l':
			if (log_parse_level(optarg, &lvl))
				return -1;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("sepcsi-rpcd %s\n", SEPCSI_VERSION);
			exit(0);
		default:
			return -1;
		}
	}
	log_init("rpcd", fmt, lvl);
	if (optind != argc || !r->endpoint || !r->cfg.driver_name || !r->cfg.node_id ||
	    !r->state_dir)
		return -1;
	return 0;
}

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) != -1;
}

/*
 * Reconciliation (ctl_reconcile) runs on a thread of its own: at start, after
 * each new helper channel (the helper restarted), and again while something
 * is left over (a key busy, the helper unavailable), less and less often.
 */
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rec_cv = PTHREAD_COND_INITIALIZER;
static bool rec_wanted = true, rec_stop;

static void reconcile_wanted(void)
{
	pthread_mutex_lock(&rec_mu);
	rec_wanted = true;
	pthread_cond_signal(&rec_cv);
	pthread_mutex_unlock(&rec_mu);
}

static void *reconcile_thread(void *arg)
{
	struct rpcd *r = arg;
	unsigned again_s = 0; /* 0: nothing left; else seconds until the next run */
	pthread_mutex_lock(&rec_mu);
	for (;;) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += again_s;
		while (!rec_wanted && !rec_stop &&
		       (again_s == 0 ? pthread_cond_wait(&rec_cv, &rec_mu)
		                     : pthread_cond_timedwait(&rec_cv, &rec_mu, &until)) == 0)
			;
		if (rec_stop)
			break;
		rec_wanted = false;
		pthread_mutex_unlock(&rec_mu);
		bool left = ctl_reconcile(r->ctl) != 0;
		again_s = !left ? 0 : again_s == 0 ? 1 : again_s < 64 ? 2 * again_s : 120;
		pthread_mutex_lock(&rec_mu);
	}
	pthread_mutex_unlock(&rec_mu);
	return NULL;
}

/* Messages from the supervisor: a new helper channel, or the helper given up on. */
static void *control_thread(void *arg)
{
	struct rpcd *r = arg;
	struct sup_ctl_msg m;
	while (sup_ctl_recv(SEPCSI_FD_CONTROL, &m) == 0) {
		switch (m.type) {
		case SUP_CTL_PEER_FD:
			log_info("new helper channel from the supervisor");
			atomic_store(&r->helper_failed, false);
			mh_client_set_fd(r->mh, m.fd);
			reconcile_wanted();
			break;
		case SUP_CTL_HELPER_FAILED:
			log_error(
			    "the supervisor reports the helper failed; Probe answers not ready");
			atomic_store(&r->helper_failed, true);
			if (m.fd >= 0)
				close(m.fd);
			break;
		default:
			if (m.fd >= 0)
				close(m.fd);
			break;
		}
	}
	/* The supervisor is gone: stop serving gracefully. */
	log_warn("control channel closed; stopping");
	kill(getpid(), SIGTERM);
	return NULL;
}

int main(int argc, char **argv)
{
	struct rpcd r = {.cfg = {.mode = CTL_MODE_ALL}};
	/*
	 * glibc gives each thread that allocates an arena of its own; rpcd's
	 * twenty-odd threads allocate little, and two arenas keep about half a
	 * MiB less resident (docs/benchmarks.md).
	 */
	mallopt(M_ARENA_MAX, 2);
	if (parse_args(argc, argv, &r) != 0) {
		usage(stderr);
		return 2;
	}
	if (getuid() == 0 || geteuid() == 0 || getgid() == 0 || getegid() == 0)
		log_fatal("refusing to run as root: rpcd must run as an unprivileged uid/gid");

	/* Signals go to the main thread only; every other thread inherits this mask. */
	sigset_t sigs;
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
		log_fatal("cannot ignore SIGPIPE");

	char dbpath[4096];
	if (snprintf(dbpath, sizeof(dbpath), "%s/sepcsi.db", r.state_dir) >= (int)sizeof(dbpath))
		log_fatal("--state-dir is too long");
	if (store_open(dbpath, &r.st) != STORE_OK)
		log_fatal("cannot open store %s: %s", dbpath, store_last_error());

	r.mh = mh_client_new(fd_open(SEPCSI_FD_PEER) ? SEPCSI_FD_PEER : -1);
	r.ctl = ctl_new(&r.cfg, r.st, r.mh);

	pthread_t ctl_thr;
	bool have_control = fd_open(SEPCSI_FD_CONTROL);
	if (have_control && pthread_create(&ctl_thr, NULL, control_thread, &r) != 0)
		log_fatal("cannot start control thread");

	/*
	 * Confine before any network-facing code runs: the store is open, the
	 * helper and control channels are set up; from here rpcd can only do
	 * what its seccomp table allows (policy/seccomp_rpcd.c).
	 */
	if (pol_seccomp_install(&pol_sc_rpcd, getenv("SEPCSI_SECCOMP_LOG") != NULL) != 0)
		log_fatal("cannot install the seccomp filter");

	pthread_t rec_thr;
	if (pthread_create(&rec_thr, NULL, reconcile_thread, &r) != 0)
		log_fatal("cannot start the reconciliation thread");

	grpc_init();
	struct rpcd_server *srv = rpcd_server_start(&r, RPCD_WORKERS);
	log_kv(LOG_LVL_INFO, "serving", "endpoint", r.endpoint, "driver", r.cfg.driver_name,
	       "node_id", r.cfg.node_id, "version", SEPCSI_VERSION, NULL);
	if (have_control && sup_ctl_send(SEPCSI_FD_CONTROL, SUP_CTL_READY, -1) != 0)
		log_warn("cannot report readiness to the supervisor: %s", strerror(errno));
	/* Metrics go to the supervisor, which takes them only after READY. */
	if (have_control && r.metrics_interval_s)
		rpcd_metrics_start(&r, (unsigned)r.metrics_interval_s);

	int sig = 0;
	sigwait(&sigs, &sig);
	log_info("signal %d: finishing calls in flight", sig);
	rpcd_server_stop_and_free(srv);
	grpc_shutdown();
	rpcd_metrics_stop();
	pthread_mutex_lock(&rec_mu);
	rec_stop = true;
	pthread_cond_signal(&rec_cv);
	pthread_mutex_unlock(&rec_mu);
	mh_client_set_fd(r.mh, -1); /* a reconciliation waiting on the helper gives up now */
	pthread_join(rec_thr, NULL);

	ctl_free(r.ctl);
	mh_client_free(r.mh);
	store_close(r.st);
	log_info("stopped");
	return 0;
}
