/*
 * The supervisor's command line: flags, their environment fallbacks and
 * defaults, validated into one struct. Pure (no side effects but reading the
 * environment and the host name), so it is unit-tested directly.
 */
#ifndef SEPCSI_SUP_CONFIG_H
#define SEPCSI_SUP_CONFIG_H

#include "log.h"

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define SUP_DRIVER_NAME_MAX      63  /* CSI: at most 63 characters */
#define SUP_NODE_ID_MAX          256 /* CSI: node_id at most 256 bytes */
#define SUP_SOCKET_PATH_MAX      107 /* sizeof(sun_path) - 1 */
#define SUP_RESTART_LIMIT_MAX    100
#define SUP_RESTART_WINDOW_MAX   86400
#define SUP_READY_TIMEOUT_MAX    3600
#define SUP_METRICS_INTERVAL_MAX 3600

enum sup_mode { SUP_MODE_ALL = 0, SUP_MODE_CONTROLLER, SUP_MODE_NODE };

struct sup_config {
	char endpoint[sizeof("unix://") + SUP_SOCKET_PATH_MAX]; /* as given to rpcd */
	const char *socket_path; /* points into endpoint, after "unix://" */
	char driver_name[SUP_DRIVER_NAME_MAX + 1];
	char node_id[SUP_NODE_ID_MAX + 1];
	enum sup_mode mode;
	char state_dir[PATH_MAX];
	char data_dir[PATH_MAX];
	char policy[PATH_MAX]; /* "" = the helper's embedded defaults */
	uid_t rpcd_uid;
	gid_t rpcd_gid;
	uid_t helper_uid; /* the helper's own identity beside its core (it owns the images) */
	gid_t helper_gid;
	uid_t metrics_uid; /* the check of rpcd's metrics reports (sup_metrics_check.c) */
	gid_t metrics_gid;
	enum log_format log_format;
	enum log_level log_level;
	int64_t max_volumes_per_node; /* 0 = unlimited */
	unsigned restart_limit;       /* deaths within the window that mean FAILED */
	unsigned restart_window_s;
	unsigned ready_timeout_s;    /* a child not READY this long after its spawn is killed */
	char metrics_file[PATH_MAX]; /* Prometheus text file; "" = no metrics (sup_metrics.c) */
	unsigned metrics_interval_s; /* how often rpcd reports its part */
	bool snapshot_metadata;      /* rpcd serves the SnapshotMetadata service */
	bool print_privileges;       /* --print-privileges: print them and exit */
};

enum sup_parse_result {
	SUP_PARSE_OK = 0,
	SUP_PARSE_HELP,    /* --help: print sup_config_usage(), exit 0 */
	SUP_PARSE_VERSION, /* --version: print the version, exit 0 */
	SUP_PARSE_ERROR,   /* err holds one line for the operator; exit 2 */
};

/*
 * Fill cfg from defaults, then the environment, then argv (later wins). Every
 * value is validated; on SUP_PARSE_ERROR err names the flag or variable and
 * what was wrong with it.
 */
enum sup_parse_result sup_config_parse(struct sup_config *cfg, int argc, char *const argv[],
                                       char *err, size_t errlen);

/* The --help text, generated from the same table the parser uses. */
void sup_config_usage(FILE *out);

const char *sup_mode_name(enum sup_mode m);
const char *sup_log_format_name(enum log_format f);
const char *sup_log_level_name(enum log_level l);

/* True if path a equals b or lies beneath it (both absolute and normalised). */
int sup_path_within(const char *a, const char *b);

#endif
