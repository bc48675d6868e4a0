/*
 * sepcsictl: a command-line CSI client. Every Identity, Controller,
 * GroupController and Node RPC is a subcommand with a flag per request field;
 * answers print as text or JSON; a failed call prints its gRPC status and
 * message on stderr and exits 10 + the status code. `store` and `audit` read
 * sepcsi's store and the helper's audit log directly, read-only, without the
 * CSI socket.
 *
 * Runs as the operator. It needs no privilege beyond access to the socket
 * (or to the files for store/audit) and never writes to the store or the
 * log. Usage errors exit 2; see docs/sepcsictl.md for the whole table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csic.h"
#include "sctl.h"
#include "sepcsi_version.h"

#define DEFAULT_TIMEOUT_MS 30000

static void top_help(FILE *o)
{
	fprintf(o,
	        "usage: sepcsictl [--endpoint URL] [--output text|json] [--timeout DURATION]\n"
	        "                 <service> <rpc> [flags]\n"
	        "       sepcsictl store volumes|snapshots|group-snapshots|stagings|publications|\n"
	        "                       attachments|intents|info|check [--state-dir DIR]\n"
	        "       sepcsictl audit [--data-dir DIR] [--follow] [--volume ID]\n\n"
	        "A CSI client: every Identity, Controller, GroupController and Node RPC, a flag "
	        "per field.\n\nservices:\n");
	for (size_t i = 0; i < sctl_nservices; i++)
		fprintf(o, "  %-18s %s\n", sctl_services[i].name, sctl_services[i].summary);
	fprintf(o,
	        "\nread-only views (no CSI socket needed):\n"
	        "  %-18s rows of sepcsi's sqlite store, opened read-only\n"
	        "  %-18s the privileged helper's audit log\n",
	        "store", "audit");
	fprintf(o,
	        "\nglobal flags (anywhere on the line):\n"
	        "  --endpoint URL         CSI endpoint (default $CSI_ENDPOINT, else "
	        "unix:///run/sepcsi/csi.sock)\n"
	        "  --output, -o FORMAT    text (default) or json: one object, proto field "
	        "names as keys\n"
	        "  --timeout DURATION     deadline of the call: 30s (default), 500ms, 2m\n"
	        "  --help, -h             help of this level; --version\n\n"
	        "exit status: 0 success, 1 local failure, 2 usage, 3 store or audit log absent,\n"
	        "10 + the gRPC status code when the call fails (15 NOT_FOUND, 22 UNIMPLEMENTED, "
	        "...).\n"
	        "`sepcsictl <service> --help` lists its RPCs.\n");
}

static void service_help(FILE *o, const struct sctl_service *s)
{
	fprintf(o, "usage: sepcsictl [global flags] %s <rpc> [flags]\n\n%s service: %s.\n\nrpcs:\n",
	        s->name, s->grpc_name, s->summary);
	for (size_t i = 0; i < sctl_nrpcs; i++) {
		const struct sctl_rpc *r = &sctl_rpcs[i];
		if (strcmp(r->service, s->name) == 0)
			fprintf(o, "  %-30s %s\n", r->name, r->summary);
	}
	fprintf(o, "\n`sepcsictl %s <rpc> --help` lists its flags.\n", s->name);
}

static bool is_help(const char *a)
{
	return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "help") == 0;
}

int sctl_flag_value(int argc, char **argv, int *i, const char *name, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(name);

	if (strncmp(a, name, n) != 0 || (a[n] != '\0' && a[n] != '='))
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (*i + 1 >= argc) {
		fprintf(stderr, "sepcsictl: %s needs a value\n", name);
		return -1;
	}
	*val = argv[++*i];
	return 1;
}

/*
 * Takes the global flags out of argv (they may appear anywhere), leaving the
 * rest in order. Returns SCTL_EXIT_OK or SCTL_EXIT_USAGE.
 */
static int global_flags(int *argc, char **argv, struct sctl_opts *o)
{
	int out = 0;

	for (int i = 0; i < *argc; i++) {
		const char *v = NULL;
		int r;
		if ((r = sctl_flag_value(*argc, argv, &i, "--endpoint", &v)) != 0) {
			if (r < 0)
				return SCTL_EXIT_USAGE;
			o->endpoint = v;
		} else if ((r = sctl_flag_value(*argc, argv, &i, "--output", &v)) != 0 ||
		           (r = sctl_flag_value(*argc, argv, &i, "-o", &v)) != 0) {
			if (r < 0)
				return SCTL_EXIT_USAGE;
			if (strcmp(v, "text") == 0) {
				o->output = SCTL_OUT_TEXT;
			} else if (strcmp(v, "json") == 0) {
				o->output = SCTL_OUT_JSON;
			} else {
				fprintf(stderr, "sepcsictl: --output: expected text or json\n");
				return SCTL_EXIT_USAGE;
			}
		} else if ((r = sctl_flag_value(*argc, argv, &i, "--timeout", &v)) != 0) {
			if (r < 0)
				return SCTL_EXIT_USAGE;
			if (units_parse_duration_ms(v, &o->timeout_ms) != 0 || o->timeout_ms <= 0) {
				fprintf(stderr, "sepcsictl: --timeout: expected a duration such as "
				                "30s, 500ms or 2m\n");
				return SCTL_EXIT_USAGE;
			}
		} else {
			argv[out++] = argv[i];
		}
	}
	*argc = out;
	return SCTL_EXIT_OK;
}

static int run_rpc(const struct sctl_rpc *r, int argc, char **argv, const struct sctl_opts *o)
{
	ProtobufCMessage *req = NULL, *resp = NULL;
	struct csic_status st;

	int rc = sctl_build_request(r, argc, argv, &req);
	if (rc != SCTL_EXIT_OK)
		return rc;
	csic_global_init();
	struct csic_conn *c = csic_open(o->endpoint);
	int code = csic_call(c, r->method, req, r->resp, &resp, o->timeout_ms, &st);
	if (code == CSIC_OK) {
		if (o->output == SCTL_OUT_JSON)
			sctl_print_json(stdout, resp);
		else
			sctl_print_text(stdout, resp);
		protobuf_c_message_free_unpacked(resp, NULL);
		rc = SCTL_EXIT_OK;
	} else {
		fprintf(stderr, "sepcsictl: %s: %s: %s\n", sctl_rpc_method_name(r),
		        csic_code_name(code), st.message);
		rc = code > 0 && code < CSIC_NCODES ? SCTL_EXIT_GRPC + code
		                                    : SCTL_EXIT_GRPC + CSIC_UNKNOWN;
	}
	protobuf_c_message_free_unpacked(req, NULL);
	csic_close(c);
	csic_global_shutdown();
	return rc;
}

int main(int argc, char **argv)
{
	struct sctl_opts o = {
	    .endpoint = csic_default_endpoint(),
	    .output = SCTL_OUT_TEXT,
	    .timeout_ms = DEFAULT_TIMEOUT_MS,
	};
	int n = argc - 1;
	char **args = argv + 1;

	if (global_flags(&n, args, &o) != SCTL_EXIT_OK)
		return SCTL_EXIT_USAGE;
	if (n == 0) {
		top_help(stderr);
		return SCTL_EXIT_USAGE;
	}
	if (is_help(args[0])) {
		top_help(stdout);
		return SCTL_EXIT_OK;
	}
	if (strcmp(args[0], "--version") == 0) {
		printf("sepcsictl %s\n", SEPCSI_VERSION);
		return SCTL_EXIT_OK;
	}
	if (strcmp(args[0], "store") == 0)
		return sctl_store_main(n, args, &o);
	if (strcmp(args[0], "audit") == 0)
		return sctl_audit_main(n, args, &o);

	const struct sctl_service *svc = sctl_service_find(args[0]);
	if (!svc) {
		fprintf(stderr, "sepcsictl: unknown service '%s' (see sepcsictl --help)\n",
		        args[0]);
		return SCTL_EXIT_USAGE;
	}
	if (n < 2) {
		service_help(stderr, svc);
		return SCTL_EXIT_USAGE;
	}
	if (is_help(args[1])) {
		service_help(stdout, svc);
		return SCTL_EXIT_OK;
	}
	const struct sctl_rpc *r = sctl_rpc_find(svc, args[1]);
	if (!r) {
		fprintf(stderr, "sepcsictl: %s has no rpc '%s' (see sepcsictl %s --help)\n",
		        svc->name, args[1], svc->name);
		return SCTL_EXIT_USAGE;
	}
	for (int i = 2; i < n; i++) {
		if (strcmp(args[i], "--help") == 0 || strcmp(args[i], "-h") == 0) {
			sctl_rpc_help(stdout, r);
			return SCTL_EXIT_OK;
		}
	}
	return run_rpc(r, n - 2, args + 2, &o);
}
