/*
 * Command-line parsing for sepcsi-supervisor. Runs in the supervisor, as root,
 * before anything else happens, and touches nothing: it only reads argv, the
 * environment and the host name. One table drives the parser, the environment
 * fallbacks and the --help text, so the three cannot drift apart.
 *
 * Every value that later reaches a child's argv or a privileged filesystem
 * operation is validated here: absolute normalised paths without "." or ".."
 * components, a unix:// endpoint that fits sun_path, a numeric non-root
 * rpcd uid:gid. The directory layout is checked too, so that the unprivileged
 * rpcd can never own a directory that leads to the helper's data or policy.
 * Nothing here is fatal: errors come back as one line for the operator.
 */
#include "sup_config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"

#define ENDPOINT_SCHEME "unix://"

typedef int (*sup_setter)(struct sup_config *cfg, const char *val, char *why, size_t n);

struct sup_opt {
	const char *name;    /* the flag, without "--" */
	const char *env;     /* environment fallback */
	const char *metavar; /* shown in --help */
	const char *def;     /* default value; NULL when computed (see help_def) */
	const char *help_def;
	const char *help;
	sup_setter set;
};

static int why(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return -1;
}

/* Decimal digits only (no sign, no spaces), at most max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

/*
 * Copy an operator's absolute path into dst, collapsing repeated slashes and
 * dropping a trailing one, then hold it to the one path rule of the tree
 * (pol_path_syntax_ok, policy/syntax.c): what the helper is given passes its
 * own check.
 */
static int norm_path(char *dst, size_t cap, const char *src, char *w, size_t wn)
{
	size_t len = 0;

	if (src[0] != '/')
		return why(w, wn, "'%s' is not an absolute path", src);
	for (const char *p = src; *p; p++) {
		if (*p == '/' && len > 0 && dst[len - 1] == '/')
			continue;
		if (len + 1 >= cap)
			return why(w, wn, "path is too long (at most %zu bytes)", cap - 1);
		dst[len++] = *p;
	}
	if (len > 1 && dst[len - 1] == '/')
		len--;
	dst[len] = '\0';
	if (strcmp(dst, "/") != 0 && !pol_path_syntax_ok(dst))
		return why(w, wn,
		           "'%s' is not a usable path: a control character, a '.' or '..' "
		           "component, or a component over %d bytes",
		           src, NAME_MAX);
	return 0;
}

static int set_dir(char *dst, const char *val, char *w, size_t wn)
{
	char tmp[PATH_MAX];

	if (norm_path(tmp, sizeof(tmp), val, w, wn) < 0)
		return -1;
	if (strcmp(tmp, "/") == 0)
		return why(w, wn, "'/' cannot be used");
	memcpy(dst, tmp, strlen(tmp) + 1);
	return 0;
}

static int set_endpoint(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	const size_t sl = strlen(ENDPOINT_SCHEME);
	char path[SUP_SOCKET_PATH_MAX + 1];

	if (strncmp(val, ENDPOINT_SCHEME, sl) != 0)
		return why(w, wn, "'%s' must start with unix:// (only unix sockets are served)",
		           val);
	if (norm_path(path, sizeof(path), val + sl, w, wn) < 0)
		return -1;
	const char *slash = strrchr(path, '/');
	if (slash == path)
		return why(w, wn, "the socket needs a directory of its own, not '/'");
	snprintf(cfg->endpoint, sizeof(cfg->endpoint), "%s%s", ENDPOINT_SCHEME, path);
	cfg->socket_path = cfg->endpoint + sl;
	return 0;
}

static int set_driver_name(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	size_t len = strlen(val);
	bool ok = len >= 1 && len <= SUP_DRIVER_NAME_MAX && isalnum((unsigned char)val[0]) &&
	          isalnum((unsigned char)val[len - 1]);

	for (size_t i = 0; ok && i < len; i++)
		ok = isalnum((unsigned char)val[i]) || val[i] == '.' || val[i] == '-';
	if (!ok)
		return why(w, wn,
		           "'%s' is not a driver name: 1-63 of [a-zA-Z0-9.-], starting and "
		           "ending with a letter or digit",
		           val);
	memcpy(cfg->driver_name, val, len + 1);
	return 0;
}

static int set_node_id(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	size_t len = strlen(val);
	bool ok = len >= 1 && len <= SUP_NODE_ID_MAX;

	for (size_t i = 0; ok && i < len; i++)
		ok = isalnum((unsigned char)val[i]) || strchr("._-", val[i]);
	if (!ok)
		return why(w, wn, "'%s' is not a node id: 1-%d of [a-zA-Z0-9._-]", val,
		           SUP_NODE_ID_MAX);
	memcpy(cfg->node_id, val, len + 1);
	return 0;
}

static const char *const mode_names[] = {"all", "controller", "node"};

static int set_mode(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	for (size_t i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++) {
		if (strcmp(val, mode_names[i]) == 0) {
			cfg->mode = (enum sup_mode)i;
			return 0;
		}
	}
	return why(w, wn, "'%s' is not one of all, controller, node", val);
}

static int set_snapshot_metadata(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
		return why(w, wn, "'%s' is not one of on, off", val);
	cfg->snapshot_metadata = strcmp(val, "on") == 0;
	return 0;
}

static int set_state_dir(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_dir(cfg->state_dir, val, w, wn);
}

static int set_data_dir(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_dir(cfg->data_dir, val, w, wn);
}

static int set_policy(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_dir(cfg->policy, val, w, wn);
}

/* "UID:GID", neither 0 (who is named for the message). */
static int set_user(uid_t *uid_out, gid_t *gid_out, const char *who, const char *val, char *w,
                    size_t wn)
{
	char u[16], g[16];
	const char *colon = strchr(val, ':');
	uint64_t uid, gid;

	/* (uid_t)-1 means "unchanged" to setresuid: never a valid target. */
	if (!colon || (size_t)(colon - val) >= sizeof(u) || strlen(colon + 1) >= sizeof(g))
		return why(w, wn, "'%s' is not UID:GID (two numbers)", val);
	memcpy(u, val, (size_t)(colon - val));
	u[colon - val] = '\0';
	snprintf(g, sizeof(g), "%s", colon + 1);
	if (parse_u64(u, UINT32_MAX - 1, &uid) < 0 || parse_u64(g, UINT32_MAX - 1, &gid) < 0)
		return why(w, wn, "'%s' is not UID:GID (two numbers below 4294967295)", val);
	if (uid == 0 || gid == 0)
		return why(w, wn, "'%s': %s must not run with uid 0 or gid 0", val, who);
	*uid_out = (uid_t)uid;
	*gid_out = (gid_t)gid;
	return 0;
}

static int set_rpcd_user(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_user(&cfg->rpcd_uid, &cfg->rpcd_gid, "rpcd", val, w, wn);
}

static int set_helper_user(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_user(&cfg->helper_uid, &cfg->helper_gid, "the helper", val, w, wn);
}

static int set_metrics_user(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_user(&cfg->metrics_uid, &cfg->metrics_gid, "the metrics check", val, w, wn);
}

static int set_log_format(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	if (log_parse_format(val, &cfg->log_format) < 0)
		return why(w, wn, "'%s' is not one of text, json", val);
	return 0;
}

static int set_log_level(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	if (log_parse_level(val, &cfg->log_level) < 0)
		return why(w, wn, "'%s' is not one of error, warn, info, debug", val);
	return 0;
}

static int set_max_volumes(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	uint64_t v;

	if (parse_u64(val, INT64_MAX, &v) < 0)
		return why(w, wn, "'%s' is not a number >= 0", val);
	cfg->max_volumes_per_node = (int64_t)v;
	return 0;
}

static int set_restart_limit(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	uint64_t v;

	if (parse_u64(val, SUP_RESTART_LIMIT_MAX, &v) < 0 || v == 0)
		return why(w, wn, "'%s' is not a number from 1 to %d", val, SUP_RESTART_LIMIT_MAX);
	cfg->restart_limit = (unsigned)v;
	return 0;
}

/* A number of seconds from 1 to max, into *dst. */
static int set_seconds(unsigned *dst, const char *val, unsigned max, char *w, size_t wn)
{
	uint64_t v;

	if (parse_u64(val, max, &v) < 0 || v == 0)
		return why(w, wn, "'%s' is not a number of seconds from 1 to %u", val, max);
	*dst = (unsigned)v;
	return 0;
}

static int set_restart_window(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_seconds(&cfg->restart_window_s, val, SUP_RESTART_WINDOW_MAX, w, wn);
}

static int set_ready_timeout(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_seconds(&cfg->ready_timeout_s, val, SUP_READY_TIMEOUT_MAX, w, wn);
}

static int set_metrics_file(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	if (strcmp(val, "none") == 0) {
		cfg->metrics_file[0] = '\0';
		return 0;
	}
	if (set_dir(cfg->metrics_file, val, w, wn) < 0)
		return -1;
	if (strrchr(cfg->metrics_file, '/') == cfg->metrics_file)
		return why(w, wn, "'%s': the file needs a directory other than '/'", val);
	return 0;
}

static int set_metrics_interval(struct sup_config *cfg, const char *val, char *w, size_t wn)
{
	return set_seconds(&cfg->metrics_interval_s, val, SUP_METRICS_INTERVAL_MAX, w, wn);
}

static const struct sup_opt opts[] = {
    {"endpoint", "CSI_ENDPOINT", "URL", "unix:///run/sepcsi/csi.sock", NULL,
     "CSI socket rpcd serves: unix:// and an absolute path. Its directory is\n"
     "created if missing and given to the rpcd user.",
     set_endpoint},
    {"driver-name", "SEPCSI_DRIVER_NAME", "NAME", "local.sepcsi.io", NULL,
     "CSI driver name: at most 63 of [a-zA-Z0-9.-], alphanumeric at both ends.", set_driver_name},
    {"node-id", "NODE_ID", "ID", NULL, "the host name",
     "This node's id in NodeGetInfo and topology: [a-zA-Z0-9._-], at most 256.", set_node_id},
    {"mode", "SEPCSI_MODE", "all|controller|node", "all", NULL, "CSI services rpcd offers.",
     set_mode},
    {"snapshot-metadata", "SEPCSI_SNAPSHOT_METADATA", "on|off", "off", NULL,
     "Serve and announce the CSI SnapshotMetadata service (changed-block\n"
     "tracking) wherever the Controller service is served.",
     set_snapshot_metadata},
    {"state-dir", "SEPCSI_STATE_DIR", "DIR", "/var/lib/sepcsi/state", NULL,
     "rpcd's store; made mode 0700 and owned by the rpcd user.", set_state_dir},
    {"data-dir", "SEPCSI_DATA_DIR", "DIR", "/var/lib/sepcsi/data", NULL,
     "The helper's volume images; made mode 0700 and owned by root.", set_data_dir},
    {"policy", "SEPCSI_POLICY", "FILE", NULL, "none: the helper's built-in policy",
     "Helper policy file; must be owned by root and writable by root only.", set_policy},
    {"rpcd-user", "SEPCSI_RPCD_USER", "UID:GID", "65532:65532", NULL,
     "Numeric uid and gid rpcd runs as; neither may be 0.", set_rpcd_user},
    {"helper-user", "SEPCSI_HELPER_USER", "UID:GID", "65531:65531", NULL,
     "Numeric uid and gid the helper takes once its capable core runs (it owns\n"
     "the images); neither may be 0, nor rpcd's.",
     set_helper_user},
    {"metrics-user", "SEPCSI_METRICS_USER", "UID:GID", "65533:65533", NULL,
     "Numeric uid and gid of the check of rpcd's metrics reports; neither may\n"
     "be 0, nor rpcd's or the helper's.",
     set_metrics_user},
    {"log-format", "SEPCSI_LOG_FORMAT", "text|json", "text", NULL,
     "Log line format, for all three processes.", set_log_format},
    {"log-level", "SEPCSI_LOG_LEVEL", "error|warn|info|debug", "info", NULL,
     "Least severe level logged, for all three processes.", set_log_level},
    {"max-volumes-per-node", "SEPCSI_MAX_VOLUMES_PER_NODE", "N", "0", NULL,
     "Volumes this node accepts, reported in NodeGetInfo; 0 = unlimited.", set_max_volumes},
    {"restart-limit", "SEPCSI_RESTART_LIMIT", "N", "5", NULL,
     "Give up on a child (state FAILED) after N deaths within the restart\n"
     "window; a death before READY counts twice. Giving up stops the other\n"
     "child and exits 3, for kubelet or systemd to restart the whole driver.\n"
     "A dead child is restarted at once, then after 0.25, 0.5 and 1 s (the\n"
     "most) as deaths pile up in the window. 1 to 100.",
     set_restart_limit},
    {"restart-window", "SEPCSI_RESTART_WINDOW", "SECONDS", "60", NULL,
     "Length of the window --restart-limit counts deaths in. 1 to 86400.", set_restart_window},
    {"ready-timeout", "SEPCSI_READY_TIMEOUT", "SECONDS", "10", NULL,
     "A child that has not reported READY this long after its start is\n"
     "killed; that counts as a death before READY. 1 to 3600.",
     set_ready_timeout},
    {"metrics-file", "SEPCSI_METRICS_FILE", "FILE|none", "/var/lib/sepcsi/metrics.prom", NULL,
     "Prometheus text-format metrics, replaced atomically (for node-exporter's\n"
     "textfile collector, and `sepcsictl metrics`); 'none' writes none.\n"
     "Its directory is made if missing; not inside --state-dir or --data-dir.",
     set_metrics_file},
    {"metrics-interval", "SEPCSI_METRICS_INTERVAL", "SECONDS", "15", NULL,
     "How often the metrics file is brought up to date. 1 to 3600.", set_metrics_interval},
};

#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static int apply(struct sup_config *cfg, const struct sup_opt *o, const char *val, bool from_env,
                 char *err, size_t errlen)
{
	char w[512];

	if (o->set(cfg, val, w, sizeof(w)) == 0)
		return 0;
	if (from_env)
		snprintf(err, errlen, "$%s (environment, for --%s): %s", o->env, o->name, w);
	else
		snprintf(err, errlen, "--%s: %s", o->name, w);
	return -1;
}

static int default_node_id(struct sup_config *cfg, char *err, size_t errlen)
{
	char host[SUP_NODE_ID_MAX + 1] = "";
	char w[512];

	if (gethostname(host, sizeof(host) - 1) < 0 || host[0] == '\0') {
		snprintf(err, errlen, "cannot read the host name; pass --node-id");
		return -1;
	}
	if (set_node_id(cfg, host, w, sizeof(w)) < 0) {
		snprintf(err, errlen, "the host name cannot be the node id (%s); pass --node-id",
		         w);
		return -1;
	}
	return 0;
}

/* The rpcd user must never own a directory that leads to root's data or policy. */
static int check_layout(const struct sup_config *cfg, char *err, size_t errlen)
{
	char sockdir[PATH_MAX];
	const char *slash = strrchr(cfg->socket_path, '/');
	const char *rpcd_dirs[2][2] = {{cfg->state_dir, "--state-dir"}, {sockdir, "--endpoint"}};

	snprintf(sockdir, sizeof(sockdir), "%.*s", (int)(slash - cfg->socket_path),
	         cfg->socket_path);
	/*
	 * rpcd must not read or write what the helper owns (the volumes' images),
	 * nor reach into the check of its own reports (ptrace rules: uid and gid).
	 */
	if (cfg->helper_uid == cfg->rpcd_uid || cfg->helper_gid == cfg->rpcd_gid ||
	    cfg->metrics_uid == cfg->rpcd_uid || cfg->metrics_gid == cfg->rpcd_gid ||
	    cfg->metrics_uid == cfg->helper_uid || cfg->metrics_gid == cfg->helper_gid) {
		snprintf(
		    err, errlen,
		    "--rpcd-user, --helper-user and --metrics-user must differ in uid and gid");
		return -1;
	}
	if (strcmp(sockdir, cfg->state_dir) == 0) {
		snprintf(err, errlen,
		         "the --endpoint socket needs a directory other than --state-dir");
		return -1;
	}
	if (cfg->metrics_file[0] && sup_path_within(cfg->metrics_file, cfg->data_dir)) {
		snprintf(err, errlen, "--metrics-file %s must not lie in --data-dir %s",
		         cfg->metrics_file, cfg->data_dir);
		return -1;
	}
	for (size_t i = 0; i < 2; i++) {
		const char *d = rpcd_dirs[i][0], *flag = rpcd_dirs[i][1];
		if (sup_path_within(cfg->data_dir, d) || sup_path_within(d, cfg->data_dir)) {
			snprintf(err, errlen,
			         "--data-dir %s and %s directory %s must not contain each other",
			         cfg->data_dir, flag, d);
			return -1;
		}
		if (cfg->metrics_file[0] && sup_path_within(cfg->metrics_file, d)) {
			snprintf(
			    err, errlen,
			    "--metrics-file %s must not lie in the %s directory %s (rpcd owns it)",
			    cfg->metrics_file, flag, d);
			return -1;
		}
		if (cfg->policy[0] && sup_path_within(cfg->policy, d)) {
			snprintf(err, errlen,
			         "--policy %s must not lie in the %s directory %s (rpcd owns it)",
			         cfg->policy, flag, d);
			return -1;
		}
	}
	return 0;
}

/* getopt_long takes any unambiguous prefix; an operator's flags are spelled out. */
static bool spelled_out(const char *arg, const char *name)
{
	size_t n = strlen(name);
	return strncmp(arg, "--", 2) == 0 && strncmp(arg + 2, name, n) == 0 &&
	       (arg[2 + n] == '\0' || arg[2 + n] == '=');
}

enum { OPT_HELP = 'h', OPT_VERSION = 0x100, OPT_PRIVILEGES, OPT_TABLE /* + index in opts */ };

enum sup_parse_result sup_config_parse(struct sup_config *cfg, int argc, char *const argv[],
                                       char *err, size_t errlen)
{
	const char *flag_val[NOPTS] = {NULL};
	bool print_privileges = false;
	struct option longopts[NOPTS + 4] = {
	    {"help", no_argument, NULL, OPT_HELP},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {"print-privileges", no_argument, NULL, OPT_PRIVILEGES},
	};
	for (size_t i = 0; i < NOPTS; i++)
		longopts[3 + i] =
		    (struct option){opts[i].name, required_argument, NULL, OPT_TABLE + (int)i};

	memset(cfg, 0, sizeof(*cfg));
	err[0] = '\0';
	opterr = 0; /* our own messages, in err */
	optind = 0; /* a fresh scan (tests parse many times) */
	for (;;) {
		int prev = optind ? optind : 1, li = -1;
		int c = getopt_long(argc, argv, "+:h", longopts, &li);
		if (c == -1)
			break;
		if (li >= 0 && !spelled_out(argv[prev], longopts[li].name)) {
			snprintf(err, errlen, "unknown option '%s' (options are not abbreviated)",
			         argv[prev]);
			return SUP_PARSE_ERROR;
		}
		if (c == OPT_HELP)
			return SUP_PARSE_HELP;
		if (c == OPT_VERSION)
			return SUP_PARSE_VERSION;
		if (c == OPT_PRIVILEGES) {
			print_privileges = true;
		} else if (c >= OPT_TABLE && c < OPT_TABLE + (int)NOPTS) {
			flag_val[c - OPT_TABLE] = optarg; /* a repeated flag: the last wins */
		} else if (c == ':') {
			const struct sup_opt *o = &opts[optopt - OPT_TABLE];
			snprintf(err, errlen, "--%s needs a value (%s)", o->name, o->metavar);
			return SUP_PARSE_ERROR;
		} else {
			snprintf(err, errlen, "unknown option '%s'", argv[prev]);
			return SUP_PARSE_ERROR;
		}
	}
	if (optind < argc) {
		snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
		return SUP_PARSE_ERROR;
	}

	/* Each option once: its flag, else its variable (empty = unset), else its default. */
	for (size_t i = 0; i < NOPTS; i++) {
		const char *env = getenv(opts[i].env);
		bool from_env = !flag_val[i] && env && *env;
		const char *v = flag_val[i] ? flag_val[i] : from_env ? env : opts[i].def;
		if (v && apply(cfg, &opts[i], v, from_env, err, errlen) < 0)
			return SUP_PARSE_ERROR;
	}
	if (cfg->node_id[0] == '\0' && default_node_id(cfg, err, errlen) < 0)
		return SUP_PARSE_ERROR;
	if (check_layout(cfg, err, errlen) < 0)
		return SUP_PARSE_ERROR;
	cfg->print_privileges = print_privileges;
	return SUP_PARSE_OK;
}

void sup_config_usage(FILE *out)
{
	fputs("Usage: sepcsi-supervisor [OPTION]...\n"
	      "Start and supervise the sepcsi CSI driver: sepcsi-rpcd (unprivileged, serves\n"
	      "CSI) and sepcsi-mounthelper (root, confined), both found beside this program,\n"
	      "or in ../libexec/sepcsi from its directory (where cmake --install puts them).\n"
	      "Must run as root. An option not given falls back to its environment variable,\n"
	      "then to its default; an empty variable counts as unset. --opt VALUE and\n"
	      "--opt=VALUE both work.\n\n",
	      out);
	for (size_t i = 0; i < NOPTS; i++) {
		const struct sup_opt *o = &opts[i];
		fprintf(out, "  --%s %s\n        ", o->name, o->metavar);
		for (const char *p = o->help; *p; p++) {
			fputc(*p, out);
			if (*p == '\n')
				fputs("        ", out);
		}
		fprintf(out, "\n        [$%s; default %s]\n", o->env,
		        o->def ? o->def : o->help_def);
	}
	fputs("  --print-privileges\n        Print, for each process, its uid/gid, capabilities,\n"
	      "        seccomp table and file-system view (from the tables the code installs\n"
	      "        and the options given; JSON with --log-format json) and exit.\n"
	      "  --help\n        Print this help and exit.\n"
	      "  --version\n        Print the version and exit.\n\n"
	      "Exit status: 0 stopped cleanly; 1 start-up or internal failure; 2 bad usage\n"
	      "or not root; 3 a child was given up on (FAILED), and the supervisor\n"
	      "stopped the other one and exited by itself.\n"
	      "See sepcsi-supervisor(8).\n",
	      out);
}

const char *sup_mode_name(enum sup_mode m)
{
	return mode_names[m];
}

const char *sup_log_format_name(enum log_format f)
{
	return f == LOG_FMT_JSON ? "json" : "text";
}

const char *sup_log_level_name(enum log_level l)
{
	static const char *const names[] = {"error", "warn", "info", "debug"};
	return names[l];
}

int sup_path_within(const char *a, const char *b)
{
	size_t bl = strlen(b);

	if (strcmp(b, "/") == 0)
		return 1;
	return strncmp(a, b, bl) == 0 && (a[bl] == '\0' || a[bl] == '/');
}
