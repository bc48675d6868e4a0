/*
 * sepcsi-bench: a load generator for any CSI driver. It drives N full volume
 * lifecycles (or a Probe storm) with C concurrent clients over standard CSI
 * calls only, and prints per-RPC latency percentiles, lifecycles per second,
 * errors by gRPC code and, given the driver's pids, their peak RSS and PSS.
 *
 * Runs as the operator: it needs the CSI socket, write access to the staging
 * and target roots, and (for --pids) the right to read the driver's
 * /proc/PID/smaps_rollup; in practice root. Exit status: 0 when every call
 * succeeded, 1 when any failed or the driver could not be asked, 2 for usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "sepcsi_version.h"

#define DEFAULT_LIFECYCLES 100
#define DEFAULT_CLIENTS    4
#define DEFAULT_CAPACITY   "64Mi"
#define DEFAULT_TIMEOUT_MS 60000
#define MAX_CLIENTS        1024

static void usage(FILE *o)
{
	fprintf(
	    o,
	    "usage: sepcsi-bench [flags]\n\n"
	    "Drives full CSI volume lifecycles (CreateVolume, [ControllerPublishVolume],\n"
	    "[NodeStageVolume], NodePublishVolume, NodeUnpublishVolume, [NodeUnstageVolume],\n"
	    "[ControllerUnpublishVolume], DeleteVolume) against any CSI driver, with concurrent\n"
	    "clients, using standard calls only; bracketed calls are made when the driver's\n"
	    "capabilities ask for them, as a CO would.\n\n"
	    "  --endpoint URL          CSI endpoint (default $CSI_ENDPOINT, else "
	    "unix:///run/sepcsi/csi.sock)\n"
	    "  -n, --lifecycles N      lifecycles to run (default %d)\n"
	    "  -c, --clients C         concurrent client threads, one channel each (default %d)\n"
	    "  --capacity SIZE         required bytes of each volume: 64Mi (default), 1Gi; 0: "
	    "driver default\n"
	    "  --fs-type FS            filesystem type (default: the driver's default)\n"
	    "  --access-type TYPE      mount (default) or block\n"
	    "  --access-mode MODE      single-node-writer (default), ...\n"
	    "  --param KEY=VALUE       CreateVolume parameter (repeat)\n"
	    "  --staging-root DIR      per-lifecycle staging dirs are created here "
	    "(required for node calls)\n"
	    "  --staging-leaf NAME     stage at <staging-root>/<prefix>-<i>/NAME, as kubelet's\n"
	    "                          .../<hash>/globalmount (default: no NAME component)\n"
	    "  --target-root DIR       per-lifecycle target parents are created here "
	    "(required for node calls)\n"
	    "  --skip-node             controller calls only: CreateVolume and DeleteVolume\n"
	    "  --attach auto|yes|no    ControllerPublish/Unpublish: when the driver reports\n"
	    "                          PUBLISH_UNPUBLISH_VOLUME (auto, default), always, or never\n"
	    "                          (no: like Kubernetes with attachRequired: false)\n"
	    "  --pids PID,...          report peak RSS (VmHWM) and PSS of these processes\n"
	    "                          (the PSS total also counts their descendants)\n"
	    "  --probe-storm SECONDS   instead of lifecycles, Probe calls from C clients for "
	    "SECONDS\n"
	    "  --timeout DURATION      deadline of each call (default 60s)\n"
	    "  --name-prefix PREFIX    volume names and dirs are PREFIX-<i> "
	    "(default sepcsi-bench-<pid>-<time>)\n"
	    "  --json                  the report as one JSON object\n"
	    "  --help, --version\n\n"
	    "A progress bar is drawn on stderr when it is a terminal. Exit status: 0 when every\n"
	    "call succeeded, 1 when any failed, 2 for usage.\n",
	    DEFAULT_LIFECYCLES, DEFAULT_CLIENTS);
}

static int bad(const char *flag, const char *why)
{
	fprintf(stderr, "sepcsi-bench: %s: %s (see --help)\n", flag, why);
	return 2;
}

static int parse_count(const char *s, long min, long max, long *out)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_mode(const char *s, int *out)
{
	const ProtobufCEnumDescriptor *d =
	    &csi__v1__volume_capability__access_mode__mode__descriptor;
	char up[64];
	size_t i;

	for (i = 0; i < sizeof(up) - 1 && s[i]; i++)
		up[i] = (char)(s[i] == '-' ? '_' : s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
	up[i] = '\0';
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(d, up);
	if (!ev || ev->value == 0)
		return -1;
	*out = ev->value;
	return 0;
}

static int parse_pids(const char *s, struct bench_cfg *cfg)
{
	char *copy = strdup(s), *save = NULL;

	if (!copy)
		abort();
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v;
		if (cfg->npids == BENCH_MAX_PIDS || parse_count(tok, 1, INT_MAX, &v) != 0) {
			free(copy);
			return -1;
		}
		cfg->pids[cfg->npids++] = (int)v;
	}
	free(copy);
	return cfg->npids ? 0 : -1;
}

/* A root for per-lifecycle directories: made absolute, created if missing. */
static int check_root(const char *flag, const char **root)
{
	static char resolved[2][PATH_MAX];
	static int used;

	if (mkdir(*root, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "sepcsi-bench: %s: cannot create %s: %s\n", flag, *root,
		        strerror(errno));
		return -1;
	}
	if (!realpath(*root, resolved[used])) {
		fprintf(stderr, "sepcsi-bench: %s: %s: %s\n", flag, *root, strerror(errno));
		return -1;
	}
	*root = resolved[used++];
	return 0;
}

enum {
	OPT_ENDPOINT = 256,
	OPT_CAPACITY,
	OPT_FS_TYPE,
	OPT_ACCESS_TYPE,
	OPT_ACCESS_MODE,
	OPT_PARAM,
	OPT_STAGING_ROOT,
	OPT_STAGING_LEAF,
	OPT_TARGET_ROOT,
	OPT_SKIP_NODE,
	OPT_ATTACH,
	OPT_PIDS,
	OPT_PROBE_STORM,
	OPT_TIMEOUT,
	OPT_NAME_PREFIX,
	OPT_JSON,
	OPT_HELP,
	OPT_VERSION,
};

static const struct option options[] = {
    {"endpoint", required_argument, NULL, OPT_ENDPOINT},
    {"lifecycles", required_argument, NULL, 'n'},
    {"clients", required_argument, NULL, 'c'},
    {"capacity", required_argument, NULL, OPT_CAPACITY},
    {"fs-type", required_argument, NULL, OPT_FS_TYPE},
    {"access-type", required_argument, NULL, OPT_ACCESS_TYPE},
    {"access-mode", required_argument, NULL, OPT_ACCESS_MODE},
    {"param", required_argument, NULL, OPT_PARAM},
    {"staging-root", required_argument, NULL, OPT_STAGING_ROOT},
    {"staging-leaf", required_argument, NULL, OPT_STAGING_LEAF},
    {"target-root", required_argument, NULL, OPT_TARGET_ROOT},
    {"skip-node", no_argument, NULL, OPT_SKIP_NODE},
    {"attach", required_argument, NULL, OPT_ATTACH},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"probe-storm", required_argument, NULL, OPT_PROBE_STORM},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"name-prefix", required_argument, NULL, OPT_NAME_PREFIX},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Fills cfg from argv; returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, struct bench_cfg *cfg)
{
	const char *capacity = DEFAULT_CAPACITY;
	long v;
	int opt;

	while ((opt = getopt_long(argc, argv, "n:c:", options, NULL)) != -1) {
		switch (opt) {
		case OPT_ENDPOINT:
			cfg->endpoint = optarg;
			break;
		case 'n':
			if (parse_count(optarg, 1, 100000000, &v) != 0)
				return bad("--lifecycles", "expected a positive count");
			cfg->lifecycles = (size_t)v;
			break;
		case 'c':
			if (parse_count(optarg, 1, MAX_CLIENTS, &v) != 0)
				return bad("--clients", "expected 1 to 1024");
			cfg->clients = (int)v;
			break;
		case OPT_CAPACITY:
			capacity = optarg;
			break;
		case OPT_FS_TYPE:
			cfg->fs_type = optarg;
			break;
		case OPT_ACCESS_TYPE:
			if (strcmp(optarg, "mount") != 0 && strcmp(optarg, "block") != 0)
				return bad("--access-type", "expected mount or block");
			cfg->block = strcmp(optarg, "block") == 0;
			break;
		case OPT_ACCESS_MODE:
			if (parse_mode(optarg, &cfg->access_mode) != 0)
				return bad("--access-mode", "unknown access mode");
			break;
		case OPT_PARAM:
			if (!strchr(optarg, '=') || optarg[0] == '=' || strlen(optarg) >= 256)
				return bad("--param", "expected KEY=VALUE");
			if (cfg->nparams == BENCH_MAX_PARAMS)
				return bad("--param", "too many");
			cfg->params[cfg->nparams++] = optarg;
			break;
		case OPT_STAGING_ROOT:
			cfg->staging_root = optarg;
			break;
		case OPT_STAGING_LEAF:
			if (!*optarg || strchr(optarg, '/') || strcmp(optarg, ".") == 0 ||
			    strcmp(optarg, "..") == 0)
				return bad("--staging-leaf", "expected one path component");
			cfg->staging_leaf = optarg;
			break;
		case OPT_TARGET_ROOT:
			cfg->target_root = optarg;
			break;
		case OPT_SKIP_NODE:
			cfg->skip_node = true;
			break;
		case OPT_ATTACH:
			if (strcmp(optarg, "auto") == 0)
				cfg->attach = BENCH_ATTACH_AUTO;
			else if (strcmp(optarg, "yes") == 0)
				cfg->attach = BENCH_ATTACH_YES;
			else if (strcmp(optarg, "no") == 0)
				cfg->attach = BENCH_ATTACH_NO;
			else
				return bad("--attach", "expected auto, yes or no");
			break;
		case OPT_PIDS:
			if (parse_pids(optarg, cfg) != 0)
				return bad("--pids", "expected PID,PID,... (at most 16)");
			break;
		case OPT_PROBE_STORM: {
			char *end;
			cfg->probe_storm_s = strtod(optarg, &end);
			if (end == optarg || *end || !(cfg->probe_storm_s > 0) ||
			    cfg->probe_storm_s > 86400)
				return bad("--probe-storm", "expected seconds, > 0");
			break;
		}
		case OPT_TIMEOUT:
			if (units_parse_duration_ms(optarg, &cfg->timeout_ms) != 0 ||
			    cfg->timeout_ms <= 0)
				return bad("--timeout", "expected a duration such as 60s");
			break;
		case OPT_NAME_PREFIX:
			if (!*optarg || strlen(optarg) >= sizeof(cfg->prefix) ||
			    strchr(optarg, '/'))
				return bad("--name-prefix", "expected 1 to 63 characters, no '/'");
			snprintf(cfg->prefix, sizeof(cfg->prefix), "%s", optarg);
			break;
		case OPT_JSON:
			cfg->json = true;
			break;
		case OPT_HELP:
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("sepcsi-bench %s\n", SEPCSI_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		return bad(argv[optind], "unexpected argument");
	if (units_parse_size(capacity, &cfg->capacity) != 0)
		return bad("--capacity", "expected a size such as 64Mi or 1Gi");
	if (cfg->block && cfg->fs_type[0])
		return bad("--fs-type", "not with --access-type block");
	bool node = !cfg->skip_node && cfg->probe_storm_s <= 0;
	if (node && (!cfg->staging_root || !cfg->target_root))
		return bad("--staging-root/--target-root",
		           "both are needed for node calls (or use --skip-node)");
	if (node && (check_root("--staging-root", &cfg->staging_root) != 0 ||
	             check_root("--target-root", &cfg->target_root) != 0))
		return 1;
	return -1;
}

/* The capability every call uses, built once and shared read-only by the threads. */
static Csi__V1__VolumeCapability *make_cap(const struct bench_cfg *cfg)
{
	static Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	static Csi__V1__VolumeCapability__AccessMode mode =
	    CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	static Csi__V1__VolumeCapability__MountVolume mount =
	    CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	static Csi__V1__VolumeCapability__BlockVolume block =
	    CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;

	mode.mode = cfg->access_mode;
	cap.access_mode = &mode;
	if (cfg->block) {
		cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap.block = &block;
	} else {
		cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		mount.fs_type = (char *)cfg->fs_type;
		cap.mount = &mount;
	}
	return &cap;
}

int main(int argc, char **argv)
{
	struct bench_cfg cfg = {
	    .endpoint = csic_default_endpoint(),
	    .lifecycles = DEFAULT_LIFECYCLES,
	    .clients = DEFAULT_CLIENTS,
	    .fs_type = "",
	    .access_mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER,
	    .timeout_ms = DEFAULT_TIMEOUT_MS,
	};
	snprintf(cfg.prefix, sizeof(cfg.prefix), "sepcsi-bench-%d-%lld", (int)getpid(),
	         (long long)time(NULL));
	int rc = parse_args(argc, argv, &cfg);
	if (rc >= 0)
		return rc;

	struct bench_run run = {.cfg = &cfg};
	csic_global_init();
	rc = 1;
	if (cfg.probe_storm_s <= 0 && bench_plan(&run) != 0)
		goto out;
	run.cap = make_cap(&cfg);
	if (bench_mem_start(&run) != 0)
		goto out;
	bench_execute(&run);
	bench_mem_stop(&run);
	if (cfg.json)
		bench_report_json(&run);
	else
		bench_report_text(&run);
	rc = atomic_load(&run.errors) ? 1 : 0;
out:
	if (run.threads) {
		for (int i = 0; i < cfg.clients; i++)
			for (int r = 0; r < BR_N; r++)
				free(run.threads[i].lat[r].ns);
		free(run.threads);
	}
	bench_plan_free(&run.plan);
	csic_global_shutdown();
	return rc;
}
