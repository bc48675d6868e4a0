/*
 * What rpcd reports for the metrics file: CSI calls by method and status
 * code, their latency as histograms, the store's counts (volumes by state and
 * kind, snapshots, attachments, operations in progress), the room the helper
 * says is left, and the helper's failed requests by operation and kind.
 *
 * Runs in rpcd, unprivileged. Calls are counted with relaxed atomics on the
 * gRPC worker threads (no lock on the call path); a report is rendered on the
 * metrics thread every --metrics-interval, into a memfd that is sealed and
 * handed to the supervisor on the control channel (SUP_CTL_METRICS), which
 * checks it and writes the file (supervisor/sup_metrics.c). rpcd opens no
 * file and no socket for this. Nothing here is fatal.
 */
#include "rpcd_metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "grpc_codes.h"
#include "log.h"
#include "mh_client.h"
#include "store.h"
#include "supctl.h"

#define CODES GRPC_CODES_COUNT

/* Upper bounds of the latency buckets, in seconds (+Inf is implied). */
static const double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                0.1,    0.25,  0.5,    1,     2.5,  5,     10};
#define NBOUNDS (sizeof(bounds) / sizeof(bounds[0]))

struct method_stats {
	_Atomic uint64_t calls[CODES];
	_Atomic uint64_t in_bucket[NBOUNDS + 1]; /* not cumulative; the last is above 10 s */
	_Atomic uint64_t micros;
};

/* One per method of the table, and one more for paths that name none. */
static struct method_stats stats[RPCD_METHODS_MAX + 1];

void rpcd_metrics_call(const struct rpcd_method *m, int code, double seconds)
{
	struct method_stats *ms = &stats[m ? rpcd_method_index(m) : RPCD_METHODS_MAX];
	size_t b = 0;

	while (b < NBOUNDS && seconds > bounds[b])
		b++;
	atomic_fetch_add_explicit(&ms->calls[code >= 0 && code < CODES ? code : CTL_UNKNOWN], 1,
	                          memory_order_relaxed);
	atomic_fetch_add_explicit(&ms->in_bucket[b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&ms->micros, (uint64_t)(seconds * 1e6), memory_order_relaxed);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static const char *method_label(size_t i)
{
	return i < rpcd_method_count() ? strrchr(rpcd_method_at(i)->path, '/') + 1 : "unknown";
}

static void render_calls(FILE *f)
{
	family(f, "sepcsi_csi_calls_total", "counter",
	       "CSI calls answered, by method and gRPC status code.");
	for (size_t i = 0; i <= rpcd_method_count(); i++) {
		size_t at = i < rpcd_method_count() ? i : RPCD_METHODS_MAX;
		for (int c = 0; c < CODES; c++) {
			uint64_t n =
			    atomic_load_explicit(&stats[at].calls[c], memory_order_relaxed);
			if (n)
				fprintf(f,
				        "sepcsi_csi_calls_total{method=\"%s\",code=\"%s\"} %llu\n",
				        method_label(i), grpc_code_name(c), (unsigned long long)n);
		}
	}
	family(f, "sepcsi_csi_call_duration_seconds", "histogram",
	       "Time from a CSI call's arrival to its answer, by method.");
	for (size_t i = 0; i <= rpcd_method_count(); i++) {
		struct method_stats *ms = &stats[i < rpcd_method_count() ? i : RPCD_METHODS_MAX];
		uint64_t seen = 0, in[NBOUNDS + 1];
		for (size_t b = 0; b <= NBOUNDS; b++)
			seen += in[b] =
			    atomic_load_explicit(&ms->in_bucket[b], memory_order_relaxed);
		if (!seen)
			continue;
		uint64_t cum = 0;
		for (size_t b = 0; b <= NBOUNDS; b++) {
			char le[16];
			cum += in[b];
			if (b < NBOUNDS)
				snprintf(le, sizeof(le), "%g", bounds[b]);
			else
				snprintf(le, sizeof(le), "+Inf");
			fprintf(f,
			        "sepcsi_csi_call_duration_seconds_bucket{method=\"%s\",le=\"%s\"} "
			        "%llu\n",
			        method_label(i), le, (unsigned long long)cum);
		}
		fprintf(f, "sepcsi_csi_call_duration_seconds_sum{method=\"%s\"} %.6f\n",
		        method_label(i),
		        (double)atomic_load_explicit(&ms->micros, memory_order_relaxed) / 1e6);
		fprintf(f, "sepcsi_csi_call_duration_seconds_count{method=\"%s\"} %llu\n",
		        method_label(i), (unsigned long long)seen);
	}
}

/* The store's groups, collected first: sqlite's lock is held while they arrive. */
struct group {
	char table[24], a[48], b[48];
	int64_t rows;
	uint64_t bytes;
};
struct groups {
	struct group g[128];
	size_t n;
	uint64_t promised;
};

static void collect(void *arg, const char *table, const char *a, const char *b, int64_t rows,
                    uint64_t bytes)
{
	struct groups *gs = arg;
	if (strcmp(table, "volumes") == 0)
		gs->promised += bytes;
	if (gs->n == sizeof(gs->g) / sizeof(gs->g[0]))
		return;
	struct group *g = &gs->g[gs->n++];
	snprintf(g->table, sizeof(g->table), "%s", table);
	snprintf(g->a, sizeof(g->a), "%s", a);
	snprintf(g->b, sizeof(g->b), "%s", b);
	g->rows = rows;
	g->bytes = bytes;
}

/* Label values come from the store (a file system type, an op): keep them plain. */
static const char *plain(char *s)
{
	for (char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
			*p = '_';
	return s;
}

static void render_store(struct rpcd *r, FILE *f)
{
	static const struct {
		const char *table, *name, *help, *label_a, *label_b;
		bool bytes;
	} kinds[] = {
	    {"volumes", "sepcsi_volumes",
	     "Volumes in the store, by how far they are set up on "
	     "this node (created, staged, published) and kind.",
	     "state", "kind", false},
	    {"volumes", "sepcsi_volume_bytes", "Bytes promised to volumes (their capacity).",
	     "state", "kind", true},
	    {"snapshots", "sepcsi_snapshots", "Snapshots in the store, single or group members.",
	     "type", NULL, false},
	    {"snapshots", "sepcsi_snapshot_bytes", "Bytes of the volumes snapshots were taken of.",
	     "type", NULL, true},
	    {"group_snapshots", "sepcsi_group_snapshots", "Volume group snapshots in the store.",
	     NULL, NULL, false},
	    {"attachments", "sepcsi_attachments",
	     "Controller attachments (ControllerPublishVolume), by access.", "access", NULL, false},
	    {"intents", "sepcsi_operations_in_progress",
	     "Operations begun and not yet finished or undone (the store's intents), by "
	     "operation.",
	     "op", NULL, false},
	};
	struct groups *gs = calloc(1, sizeof(*gs));
	if (!gs)
		abort();
	if (store_tally(r->st, collect, gs) != STORE_OK) {
		log_warn("metrics: the store's counts: %s", store_last_error());
		free(gs);
		return;
	}
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		family(f, kinds[k].name, "gauge", kinds[k].help);
		for (size_t i = 0; i < gs->n; i++) {
			struct group *g = &gs->g[i];
			if (strcmp(g->table, kinds[k].table) != 0)
				continue;
			fprintf(f, "%s", kinds[k].name);
			if (kinds[k].label_a && kinds[k].label_b)
				fprintf(f, "{%s=\"%s\",%s=\"%s\"}", kinds[k].label_a, plain(g->a),
				        kinds[k].label_b, plain(g->b));
			else if (kinds[k].label_a)
				fprintf(f, "{%s=\"%s\"}", kinds[k].label_a, plain(g->a));
			fprintf(
			    f, " %llu\n",
			    (unsigned long long)(kinds[k].bytes ? g->bytes : (uint64_t)g->rows));
		}
	}
	family(f, "sepcsi_unrecorded_files", "gauge",
	       "Images and snapshots in the data directory that the store has no row for, kept "
	       "by the last reconciliation (a lost or older store: see docs/operations.md).");
	fprintf(f, "sepcsi_unrecorded_files{what=\"image\"} %u\n", ctl_unrecorded(r->ctl, false));
	fprintf(f, "sepcsi_unrecorded_files{what=\"snapshot\"} %u\n", ctl_unrecorded(r->ctl, true));
	family(f, "sepcsi_bytes_promised", "gauge",
	       "Bytes promised to all volumes in the store (the sum of their capacities).");
	fprintf(f, "sepcsi_bytes_promised %llu\n", (unsigned long long)gs->promised);
	free(gs);
	uint64_t commits, syncs;
	store_sync_counts(r->st, &commits, &syncs);
	family(f, "sepcsi_store_commits_total", "counter",
	       "Store commits since rpcd started, each durable before its call returned.");
	fprintf(f, "sepcsi_store_commits_total %llu\n", (unsigned long long)commits);
	family(f, "sepcsi_store_syncs_total", "counter",
	       "fdatasyncs of the store's WAL since rpcd started; one serves every commit made "
	       "while the one before it ran.");
	fprintf(f, "sepcsi_store_syncs_total %llu\n", (unsigned long long)syncs);
}

static const char *const kind_names[MH_CLIENT_KINDS] = {
    "ok",       "refused", "not_found",    "exists",      "busy",
    "no_space", "failed",  "precondition", "unavailable", "timeout"};

static void helper_error(void *arg, uint16_t type, enum mh_err_kind kind, uint64_t n)
{
	const char *name = mh_type_name(type);
	if (strncmp(name, "REQ_", 4) == 0)
		name += 4;
	fprintf((FILE *)arg, "sepcsi_helper_errors_total{operation=\"%s\",kind=\"%s\"} %llu\n",
	        name, kind_names[kind], (unsigned long long)n);
}

static void render_helper(struct rpcd *r, FILE *f)
{
	struct mh_ans_capacity cap;
	struct mh_err e;
	bool up = !atomic_load(&r->helper_failed) && mh_capacity(r->mh, &cap, &e) == 0;

	family(f, "sepcsi_helper_reachable", "gauge",
	       "1 if the helper answered rpcd's last question for this report.");
	fprintf(f, "sepcsi_helper_reachable %d\n", up);
	if (up) {
		family(f, "sepcsi_bytes_available", "gauge",
		       "Bytes new volumes may still be promised in the data directory (the "
		       "helper's answer: free space within the policy's ratio).");
		fprintf(f, "sepcsi_bytes_available %llu\n",
		        (unsigned long long)cap.available_bytes);
		family(f, "sepcsi_data_dir_bytes", "gauge",
		       "Size of the file system of the helper's data directory.");
		fprintf(f, "sepcsi_data_dir_bytes %llu\n", (unsigned long long)cap.total_bytes);
		family(f, "sepcsi_data_dir_direct_io", "gauge",
		       "1 if the data directory's file system takes loop devices' direct I/O "
		       "(a volume's data cached once, in the volume), as the helper found at "
		       "its start; 0 if it keeps them buffered (the log says why).");
		fprintf(f, "sepcsi_data_dir_direct_io %d\n", cap.direct_io ? 1 : 0);
	}
	family(f, "sepcsi_helper_errors_total", "counter",
	       "Helper requests that failed, by operation and kind; kind \"refused\" is the "
	       "helper's refusal (outside its policy, or malformed: nothing touched).");
	mh_client_errors(r->mh, helper_error, f);
}

char *rpcd_metrics_render(struct rpcd *r, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);
	if (!f)
		abort();
	render_calls(f);
	render_store(r, f);
	render_helper(r, f);
	if (fclose(f) != 0)
		abort();
	return buf;
}

/* The report in a sealed memfd, sent to the supervisor. */
static void report(struct rpcd *r)
{
	size_t len = 0;
	char *text = rpcd_metrics_render(r, &len);
	int fd = memfd_create("sepcsi-metrics", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	size_t off = 0;

	if (fd < 0) {
		log_warn("metrics: memfd_create: %s", strerror(errno));
		free(text);
		return;
	}
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	free(text);
	if (off != len ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0 ||
	    sup_ctl_send(SEPCSI_FD_CONTROL, SUP_CTL_METRICS, fd) < 0)
		log_warn("metrics: report not sent: %s", strerror(errno));
	close(fd);
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv;
static bool stopping;
static pthread_t thread;
static bool started;

struct job {
	struct rpcd *r;
	unsigned interval_s;
};

static void *metrics_main(void *arg)
{
	struct job j = *(struct job *)arg;
	free(arg);
	pthread_mutex_lock(&mu);
	while (!stopping) {
		pthread_mutex_unlock(&mu);
		report(j.r);
		pthread_mutex_lock(&mu);
		struct timespec until;
		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += j.interval_s;
		while (!stopping && pthread_cond_timedwait(&cv, &mu, &until) == 0)
			;
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

void rpcd_metrics_start(struct rpcd *r, unsigned interval_s)
{
	pthread_condattr_t ca;
	struct job *j = malloc(sizeof(*j));

	if (!j)
		abort();
	*j = (struct job){r, interval_s};
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&thread, NULL, metrics_main, j) != 0)
		log_fatal("cannot start the metrics thread");
	started = true;
}

void rpcd_metrics_stop(void)
{
	if (!started)
		return;
	pthread_mutex_lock(&mu);
	stopping = true;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(thread, NULL);
	started = false;
}
