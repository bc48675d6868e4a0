/*
 * Unit test of sepcsi-supervisor's flag parsing (supervisor/sup_config.c):
 * defaults, environment fallbacks and their precedence, every validation rule
 * with a value just inside and just outside it, the directory-layout checks,
 * and a --help that names every flag and variable.
 */
#include "sup_config.h"
#include "tap.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const env_names[] = {
    "CSI_ENDPOINT",
    "SEPCSI_DRIVER_NAME",
    "NODE_ID",
    "SEPCSI_MODE",
    "SEPCSI_STATE_DIR",
    "SEPCSI_DATA_DIR",
    "SEPCSI_POLICY",
    "SEPCSI_RPCD_USER",
    "SEPCSI_LOG_FORMAT",
    "SEPCSI_LOG_LEVEL",
    "SEPCSI_MAX_VOLUMES_PER_NODE",
    "SEPCSI_RESTART_LIMIT",
    "SEPCSI_RESTART_WINDOW",
    "SEPCSI_READY_TIMEOUT",
};

static struct sup_config cfg;
static char err[1024];

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
		unsetenv(env_names[i]);
}

/* parse("--a", "b", NULL) */
static enum sup_parse_result parse(const char *first, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)"sepcsi-supervisor";
	va_start(ap, first);
	for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return sup_config_parse(&cfg, argc, argv, err, sizeof(err));
}

static int ok1(const char *flag, const char *val)
{
	return parse(flag, val, NULL) == SUP_PARSE_OK;
}

static int bad1(const char *flag, const char *val)
{
	return parse(flag, val, NULL) == SUP_PARSE_ERROR && strstr(err, flag) != NULL;
}

static void test_defaults(void)
{
	char host[300] = "";

	clear_env();
	CHECK(parse(NULL) == SUP_PARSE_OK);
	CHECK(strcmp(cfg.endpoint, "unix:///run/sepcsi/csi.sock") == 0);
	CHECK(strcmp(cfg.socket_path, "/run/sepcsi/csi.sock") == 0);
	CHECK(strcmp(cfg.driver_name, "local.sepcsi.io") == 0);
	gethostname(host, sizeof(host) - 1);
	CHECK(strcmp(cfg.node_id, host) == 0);
	CHECK(cfg.mode == SUP_MODE_ALL);
	CHECK(strcmp(cfg.state_dir, "/var/lib/sepcsi/state") == 0);
	CHECK(strcmp(cfg.data_dir, "/var/lib/sepcsi/data") == 0);
	CHECK(cfg.policy[0] == '\0');
	CHECK(cfg.rpcd_uid == 65532 && cfg.rpcd_gid == 65532);
	CHECK(cfg.log_format == LOG_FMT_TEXT && cfg.log_level == LOG_LVL_INFO);
	CHECK(cfg.max_volumes_per_node == 0);
	CHECK(cfg.restart_limit == 5 && cfg.restart_window_s == 60);
	CHECK(cfg.ready_timeout_s == 10);
}

static void test_env_and_precedence(void)
{
	clear_env();
	setenv("CSI_ENDPOINT", "unix:///csi/csi.sock", 1);
	setenv("SEPCSI_DRIVER_NAME", "x.example.com", 1);
	setenv("NODE_ID", "node-7", 1);
	setenv("SEPCSI_MODE", "node", 1);
	setenv("SEPCSI_LOG_FORMAT", "json", 1);
	setenv("SEPCSI_RPCD_USER", "1000:1001", 1);
	CHECK(parse(NULL) == SUP_PARSE_OK);
	CHECK(strcmp(cfg.socket_path, "/csi/csi.sock") == 0);
	CHECK(strcmp(cfg.driver_name, "x.example.com") == 0);
	CHECK(strcmp(cfg.node_id, "node-7") == 0);
	CHECK(cfg.mode == SUP_MODE_NODE);
	CHECK(cfg.log_format == LOG_FMT_JSON);
	CHECK(cfg.rpcd_uid == 1000 && cfg.rpcd_gid == 1001);

	/* A flag beats the environment, in both spellings. */
	CHECK(parse("--mode", "controller", "--node-id=n2", NULL) == SUP_PARSE_OK);
	CHECK(cfg.mode == SUP_MODE_CONTROLLER && strcmp(cfg.node_id, "n2") == 0);

	/* An empty variable counts as unset. */
	setenv("SEPCSI_MODE", "", 1);
	CHECK(parse(NULL) == SUP_PARSE_OK && cfg.mode == SUP_MODE_ALL);

	/* A bad variable is an error that names it. */
	setenv("SEPCSI_MODE", "both", 1);
	CHECK(parse(NULL) == SUP_PARSE_ERROR && strstr(err, "$SEPCSI_MODE") != NULL);
	/* A flag replaces the variable entirely, bad or not. */
	CHECK(parse("--mode", "all", NULL) == SUP_PARSE_OK && cfg.mode == SUP_MODE_ALL);
	clear_env();
}

static void test_endpoint(void)
{
	char longp[200];

	clear_env();
	CHECK(ok1("--endpoint", "unix:///var/lib/kubelet/plugins/x/csi.sock"));
	CHECK(ok1("--endpoint", "unix:////csi//csi.sock"));
	CHECK(strcmp(cfg.endpoint, "unix:///csi/csi.sock") == 0);
	CHECK(bad1("--endpoint", "tcp://127.0.0.1:10000"));
	CHECK(bad1("--endpoint", "unix:/csi/csi.sock"));
	CHECK(bad1("--endpoint", "unix://csi.sock"));
	CHECK(bad1("--endpoint", "unix:///csi.sock")); /* would hand '/' to rpcd */
	CHECK(bad1("--endpoint", "unix:///csi/../etc/csi.sock"));
	CHECK(bad1("--endpoint", "/csi/csi.sock"));
	CHECK(bad1("--endpoint", ""));
	/* sun_path holds 107 characters and a NUL. */
	memset(longp, 0, sizeof(longp));
	strcpy(longp, "unix:///d/");
	memset(longp + strlen(longp), 'a', 107 - 3);
	CHECK(strlen(longp) - 7 == 107);
	CHECK(ok1("--endpoint", longp));
	snprintf(longp + strlen(longp), sizeof(longp) - strlen(longp), "b");
	CHECK(bad1("--endpoint", longp));
}

static void test_driver_name(void)
{
	char name[80];

	clear_env();
	CHECK(ok1("--driver-name", "a"));
	CHECK(ok1("--driver-name", "local.sepcsi.io"));
	CHECK(ok1("--driver-name", "A-1.b"));
	CHECK(bad1("--driver-name", "-abc"));
	CHECK(bad1("--driver-name", "abc."));
	CHECK(bad1("--driver-name", "a_b"));
	CHECK(bad1("--driver-name", "a/b"));
	CHECK(bad1("--driver-name", ""));
	memset(name, 'x', 63);
	name[63] = '\0';
	CHECK(ok1("--driver-name", name));
	name[63] = 'x';
	name[64] = '\0';
	CHECK(bad1("--driver-name", name));
}

static void test_node_id(void)
{
	char id[300];

	clear_env();
	CHECK(ok1("--node-id", "worker-1.example_2"));
	CHECK(bad1("--node-id", "a b"));
	CHECK(bad1("--node-id", "a/b"));
	CHECK(bad1("--node-id", ""));
	memset(id, 'n', 256);
	id[256] = '\0';
	CHECK(ok1("--node-id", id));
	id[256] = 'n';
	id[257] = '\0';
	CHECK(bad1("--node-id", id));
}

static void test_rpcd_user(void)
{
	clear_env();
	CHECK(ok1("--rpcd-user", "65532:65532"));
	CHECK(ok1("--rpcd-user", "4294967294:1"));
	CHECK(cfg.rpcd_uid == 4294967294u && cfg.rpcd_gid == 1);
	CHECK(bad1("--rpcd-user", "0:65532"));
	CHECK(bad1("--rpcd-user", "65532:0"));
	CHECK(bad1("--rpcd-user", "4294967295:1")); /* (uid_t)-1 */
	CHECK(bad1("--rpcd-user", "nobody:nogroup"));
	CHECK(bad1("--rpcd-user", "65532"));
	CHECK(bad1("--rpcd-user", "-1:5"));
	CHECK(bad1("--rpcd-user", "+5:5"));
	CHECK(bad1("--rpcd-user", "5:"));
	CHECK(bad1("--rpcd-user", ":5"));
	CHECK(bad1("--rpcd-user", "1:2:3"));
	CHECK(bad1("--rpcd-user", " 5:5"));
	CHECK(bad1("--rpcd-user", "99999999999999999999:1"));
}

static void test_enums_and_numbers(void)
{
	clear_env();
	CHECK(ok1("--mode", "node") && cfg.mode == SUP_MODE_NODE);
	CHECK(bad1("--mode", "Node"));
	CHECK(ok1("--log-format", "json"));
	CHECK(bad1("--log-format", "xml"));
	CHECK(ok1("--log-level", "debug") && cfg.log_level == LOG_LVL_DEBUG);
	CHECK(bad1("--log-level", "trace"));
	CHECK(ok1("--max-volumes-per-node", "9223372036854775807"));
	CHECK(cfg.max_volumes_per_node == INT64_MAX);
	CHECK(bad1("--max-volumes-per-node", "9223372036854775808"));
	CHECK(bad1("--max-volumes-per-node", "-1"));
	CHECK(bad1("--max-volumes-per-node", "1e3"));
	CHECK(ok1("--restart-limit", "1") && cfg.restart_limit == 1);
	CHECK(ok1("--restart-limit", "100"));
	CHECK(bad1("--restart-limit", "0"));
	CHECK(bad1("--restart-limit", "101"));
	CHECK(ok1("--restart-window", "86400"));
	CHECK(bad1("--restart-window", "0"));
	CHECK(bad1("--restart-window", "86401"));
	CHECK(ok1("--ready-timeout", "1") && cfg.ready_timeout_s == 1);
	CHECK(ok1("--ready-timeout", "3600") && cfg.ready_timeout_s == 3600);
	CHECK(bad1("--ready-timeout", "0"));
	CHECK(bad1("--ready-timeout", "3601"));
	CHECK(bad1("--ready-timeout", "1s"));
	setenv("SEPCSI_READY_TIMEOUT", "7", 1);
	CHECK(parse(NULL) == SUP_PARSE_OK && cfg.ready_timeout_s == 7);
	unsetenv("SEPCSI_READY_TIMEOUT");
}

static void test_paths_and_layout(void)
{
	clear_env();
	CHECK(ok1("--state-dir", "//srv//sepcsi/state/"));
	CHECK(strcmp(cfg.state_dir, "/srv/sepcsi/state") == 0);
	CHECK(bad1("--state-dir", "relative/state"));
	CHECK(bad1("--state-dir", "/"));
	CHECK(bad1("--data-dir", "/var/lib/../data"));
	CHECK(bad1("--data-dir", "/var/./lib"));
	CHECK(ok1("--data-dir", "/var/lib/..data")); /* a name, not a component */
	CHECK(ok1("--policy", "/etc/sepcsi/policy.ini"));
	CHECK(strcmp(cfg.policy, "/etc/sepcsi/policy.ini") == 0);
	CHECK(bad1("--policy", "policy.ini"));

	/* The rpcd user must never own a path to root's data or policy. */
	CHECK(parse("--state-dir", "/a", "--data-dir", "/a/data", NULL) == SUP_PARSE_ERROR);
	CHECK(parse("--state-dir", "/a/state", "--data-dir", "/a", NULL) == SUP_PARSE_ERROR);
	CHECK(parse("--state-dir", "/a", "--data-dir", "/a", NULL) == SUP_PARSE_ERROR);
	CHECK(parse("--endpoint", "unix:///a/csi.sock", "--data-dir", "/a/data", NULL) ==
	      SUP_PARSE_ERROR);
	CHECK(parse("--state-dir", "/s", "--policy", "/s/policy.ini", NULL) == SUP_PARSE_ERROR);
	CHECK(parse("--endpoint", "unix:///r/csi.sock", "--policy", "/r/p", NULL) ==
	      SUP_PARSE_ERROR);
	CHECK(parse("--endpoint", "unix:///s/csi.sock", "--state-dir", "/s", NULL) ==
	      SUP_PARSE_ERROR);
	/* Siblings are fine; so is a prefix that is not a parent. */
	CHECK(parse("--state-dir", "/a/state", "--data-dir", "/a/data", NULL) == SUP_PARSE_OK);
	CHECK(parse("--state-dir", "/a", "--data-dir", "/ab", NULL) == SUP_PARSE_OK);

	CHECK(sup_path_within("/a/b", "/a"));
	CHECK(sup_path_within("/a", "/a"));
	CHECK(!sup_path_within("/ab", "/a"));
	CHECK(sup_path_within("/x", "/"));
}

static void test_argv_shape(void)
{
	clear_env();
	CHECK(parse("--help", NULL) == SUP_PARSE_HELP);
	CHECK(parse("--mode", "node", "-h", NULL) == SUP_PARSE_HELP);
	CHECK(parse("--version", NULL) == SUP_PARSE_VERSION);
	CHECK(parse("--bogus", NULL) == SUP_PARSE_ERROR && strstr(err, "--bogus"));
	CHECK(parse("--end", "unix:///a/b", NULL) == SUP_PARSE_ERROR); /* no abbreviations */
	CHECK(parse("extra", NULL) == SUP_PARSE_ERROR);
	CHECK(parse("--mode", NULL) == SUP_PARSE_ERROR && strstr(err, "needs a value"));
	CHECK(parse("-m", "node", NULL) == SUP_PARSE_ERROR);
	/* Later flags win. */
	CHECK(parse("--mode", "node", "--mode", "controller", NULL) == SUP_PARSE_OK);
	CHECK(cfg.mode == SUP_MODE_CONTROLLER);
	CHECK(strcmp(sup_mode_name(SUP_MODE_NODE), "node") == 0);
	CHECK(strcmp(sup_log_format_name(LOG_FMT_JSON), "json") == 0);
	CHECK(strcmp(sup_log_level_name(LOG_LVL_WARN), "warn") == 0);
}

static void test_usage(void)
{
	static const char *const flags[] = {
	    "--endpoint",
	    "--driver-name",
	    "--node-id",
	    "--mode",
	    "--state-dir",
	    "--data-dir",
	    "--policy",
	    "--rpcd-user",
	    "--log-format",
	    "--log-level",
	    "--max-volumes-per-node",
	    "--restart-limit",
	    "--restart-window",
	    "--ready-timeout",
	    "--help",
	    "--version",
	};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	sup_config_usage(f);
	CHECK(fclose(f) == 0);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		CHECK(strstr(buf, flags[i]) != NULL);
	for (size_t i = 0; i < sizeof(env_names) / sizeof(env_names[0]); i++)
		CHECK(strstr(buf, env_names[i]) != NULL);
	CHECK(strstr(buf, "Exit status") != NULL);
	free(buf);
}

int main(void)
{
	test_defaults();
	test_env_and_precedence();
	test_endpoint();
	test_driver_name();
	test_node_id();
	test_rpcd_user();
	test_enums_and_numbers();
	test_paths_and_layout();
	test_argv_shape();
	test_usage();
	return tap_done("test_sup_config");
}
