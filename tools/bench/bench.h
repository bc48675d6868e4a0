/*
 * sepcsi-bench's internal interfaces: the configuration (bench_main.c), the
 * client threads that run lifecycles or a Probe storm (bench_run.c), the
 * latency and memory figures (bench_stats.c) and the report (bench_report.c).
 * Runs as the operator; it speaks only standard CSI, so it measures any driver.
 */
#ifndef SEPCSI_BENCH_H
#define SEPCSI_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csi.pb-c.h"
#include "csic.h"

/* Every RPC the bench sends, in lifecycle order; the table is in bench_run.c. */
enum bench_rpc {
	BR_CREATE = 0,
	BR_CPUBLISH,
	BR_STAGE,
	BR_PUBLISH,
	BR_UNPUBLISH,
	BR_UNSTAGE,
	BR_CUNPUBLISH,
	BR_DELETE,
	BR_PROBE,
	BR_N,
};
const char *bench_rpc_name(enum bench_rpc r);

#define BENCH_MAX_PIDS   16
#define BENCH_MAX_PARAMS 32

struct bench_cfg {
	const char *endpoint;
	size_t lifecycles;
	int clients;
	int64_t capacity;
	const char *fs_type; /* "" = the driver's default */
	bool block;
	int access_mode;
	const char *params[BENCH_MAX_PARAMS]; /* "k=v" */
	size_t nparams;
	const char *staging_root, *target_root;
	const char *staging_leaf; /* NULL: stage at <root>/<prefix>-<i>, else .../<leaf> */
	bool skip_node;
	enum { BENCH_ATTACH_AUTO, BENCH_ATTACH_YES, BENCH_ATTACH_NO } attach;
	int pids[BENCH_MAX_PIDS];
	size_t npids;
	double probe_storm_s; /* > 0: a Probe storm instead of lifecycles */
	int64_t timeout_ms;
	bool json;
	char prefix[64]; /* names and directories: <prefix>-<i> */
};

/* What the driver said about itself before the run: which calls a CO would make. */
struct bench_plan {
	bool stage;                  /* Node STAGE_UNSTAGE_VOLUME */
	bool controller_publish;     /* PUBLISH_UNPUBLISH_VOLUME, or --attach yes */
	char *node_id;               /* from NodeGetInfo; NULL with --skip-node */
	Csi__V1__Topology *topology; /* NodeGetInfo's accessible_topology, if the plugin
	                                has VOLUME_ACCESSIBILITY_CONSTRAINTS */
	ProtobufCMessage *node_info; /* owns node_id's and topology's storage */
};

/* Latencies of one RPC, in nanoseconds. */
struct bench_lat {
	int64_t *ns;
	size_t n, cap;
};

/* One client thread's figures; merged after the run, so no locking. */
struct bench_thread {
	struct bench_run *run;
	int index;
	struct bench_lat lat[BR_N];
	uint64_t errors[BR_N][CSIC_NCODES + 1]; /* last column: codes out of range */
	char first_error[BR_N][256];
};

struct bench_mem_pid {
	int pid;
	char name[32];
	int64_t hwm_kib, rss_kib; /* VmHWM and VmRSS at the end */
	int64_t pss_start_kib, pss_peak_kib, pss_final_kib;
	bool gone;
};

struct bench_mem {
	struct bench_mem_pid pid[BENCH_MAX_PIDS];
	size_t n;
	int64_t total_start_kib, total_peak_kib, total_final_kib; /* sums of one sample */
};

struct bench_run {
	const struct bench_cfg *cfg;
	struct bench_plan plan;
	Csi__V1__VolumeCapability *cap; /* shared, read-only during the run */
	struct bench_thread *threads;
	atomic_size_t next, ok, failed, calls, errors;
	atomic_int running;
	atomic_bool stop;
	atomic_llong last_done_ns;
	int64_t start_ns, end_ns;
	struct bench_mem mem;
};

/* bench_run.c */
/* Asks the driver what a CO would ask (capabilities, node info); 0 or -1 after a message. */
int bench_plan(struct bench_run *run);
void bench_plan_free(struct bench_plan *p);
/* Runs the lifecycles or the Probe storm on cfg->clients threads; returns when all are done. */
void bench_execute(struct bench_run *run);

/* bench_stats.c */
void bench_lat_add(struct bench_lat *l, int64_t ns);
/* Merges every thread's latencies of r into out (sorted); free out->ns. */
void bench_lat_merge(const struct bench_run *run, enum bench_rpc r, struct bench_lat *out);
/* The p-th percentile (nearest rank) of sorted latencies, in ms. */
double bench_lat_pct_ms(const struct bench_lat *l, double p);
/* Memory sampling of cfg->pids: start, periodic (in its own thread), final. */
int bench_mem_start(struct bench_run *run);
void bench_mem_stop(struct bench_run *run);

/* bench_report.c */
void bench_report_text(const struct bench_run *run);
void bench_report_json(const struct bench_run *run);
/* The progress bar on stderr (a terminal only); done clears it. */
void bench_progress(const struct bench_run *run, bool done);

#endif
