/*
 * sepcsictl: a command-line CSI client. Every Identity, Controller,
 * GroupController, Node and SnapshotMetadata RPC is a subcommand with a flag
 * per request field; answers print as text or JSON (a streamed answer message
 * by message, as it arrives); a failed call prints its gRPC status and
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
	        "       sepcsictl audit [--data-dir DIR] [--follow] [--volume ID]\n"
	        "       sepcsictl metrics [--file PATH]\n\n"
	        "A CSI client: every Identity, Controller, GroupController, Node and "
	        "SnapshotMetadata RPC,\na flag per field.\n\nservices:\n");
	for (size_t i = 0; i < sctl_nservices; i++)
		fprintf(o, "  %-18s %s\n", sctl_services[i].name, sctl_services[i].summary);
	fprintf(o,
	        "\nread-only views (no CSI socket needed):\n"
	        "  %-18s rows of sepcsi's sqlite store, opened read-only\n"
	        "  %-18s the audit log of the core and the helper\n"
	        "  %-18s the metrics file the supervisor writes\n",
	        "store", "audit", "metrics");
	fprintf(o, "\nglobal flags (anywhere on the line):\n"
	           "  --endpoint URL         CSI endpoint (default $CSI_ENDPOINT, else "
	           "unix:///run/sepcsi/csi.sock)\n"
	           "  --output, -o FORMAT    text (default) or json: one object (one per line "
	           "for a stream),\n"
	           "                         proto field names as keys\n"
	           "  --timeout DURATION     deadline of the call (of a whole stream): 30s "
	           "(default), 500ms, 2m\n"
	           "  --help, -h             help of this level; --version\n\n"
	           "exit status: 0 success, 1 local failure, 2 usage, 3 store, audit log or "
	           "metrics file absent,\n"
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

int sctl_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
                const char *level, struct sctl_opts *o, const char **positional)
{
	opterr = 0; /* our own messages */
	for (;;) {
		int prev = optind ? optind : 1, li = -1;
		int c = getopt_long(argc, argv, optstring, longopts, &li);
		bool after_dashes = c == -1 && optstring[0] == '-' && optind < argc;
		if (c == -1 && !after_dashes)
			return -1;
		if (c == 1 && positional && !*positional) {
			*positional = optarg;
			continue;
		}
		if (c == 1 || after_dashes) {
			fprintf(stderr, "sepcsictl: %sunexpected argument '%s' (see --help)\n",
			        level, c == 1 ? optarg : argv[optind]);
			return SCTL_OPT_USAGE;
		}
		const char *a = argv[prev];      /* the flag as written */
		int alen = (int)strcspn(a, "="); /* without its value */
		if (li >= 0 && (size_t)alen != 2 + strlen(longopts[li].name)) {
			fprintf(stderr,
			        "sepcsictl: %sunknown flag %.*s (flags are not abbreviated)\n",
			        level, alen, a);
			return SCTL_OPT_USAGE;
		}
		switch (c) {
		case SCTL_OPT_ENDPOINT:
			o->endpoint = optarg;
			break;
		case SCTL_OPT_OUTPUT:
			if (strcmp(optarg, "text") != 0 && strcmp(optarg, "json") != 0) {
				fprintf(stderr, "sepcsictl: --output: expected text or json\n");
				return SCTL_OPT_USAGE;
			}
			o->output = strcmp(optarg, "json") == 0 ? SCTL_OUT_JSON : SCTL_OUT_TEXT;
			break;
		case SCTL_OPT_TIMEOUT:
			if (units_parse_duration_ms(optarg, &o->timeout_ms) != 0 ||
			    o->timeout_ms <= 0) {
				fprintf(stderr, "sepcsictl: --timeout: expected a duration such as "
				                "30s, 500ms or 2m\n");
				return SCTL_OPT_USAGE;
			}
			break;
		case ':':
			fprintf(stderr, "sepcsictl: %s%.*s: needs a value (see --help)\n", level,
			        alen, a);
			return SCTL_OPT_USAGE;
		case '?':
			fprintf(stderr, "sepcsictl: %sunknown flag %.*s (see --help)\n", level,
			        alen, a);
			return SCTL_OPT_USAGE;
		default:
			return c;
		}
	}
}

/* A unary call, its answer printed once it is all there. */
static int call_unary(struct csic_conn *c, const struct sctl_rpc *r, const ProtobufCMessage *req,
                      const struct sctl_opts *o, struct csic_status *st)
{
	ProtobufCMessage *resp = NULL;

	int code = csic_call(c, r->method, req, r->resp, &resp, o->timeout_ms, st);
	if (code == CSIC_OK) {
		if (o->output == SCTL_OUT_JSON)
			sctl_print_json(stdout, resp);
		else
			sctl_print_text(stdout, resp);
		protobuf_c_message_free_unpacked(resp, NULL);
	}
	return code;
}

static int run_rpc(const struct sctl_rpc *r, int argc, char **argv, struct sctl_opts *o)
{
	ProtobufCMessage *req = NULL;
	struct csic_status st;
	struct sctl_ranges out = {.o = stdout, .output = o->output};

	int rc = sctl_build_request(r, argc, argv, o, &req);
	if (rc != SCTL_EXIT_OK || !req)
		return rc;
	csic_global_init();
	struct csic_conn *c = csic_open(o->endpoint);
	/* A stream prints each message as it comes, whatever the status at its end. */
	int code = r->streams ? csic_call_stream(c, r->method, req, r->resp, sctl_print_ranges,
	                                         &out, o->timeout_ms, &st)
	                      : call_unary(c, r, req, o, &st);
	if (out.write_errno) {
		fprintf(stderr, "sepcsictl: %s: cannot write the answer: %s\n",
		        sctl_rpc_method_name(r), strerror(out.write_errno));
		rc = SCTL_EXIT_FAILURE;
	} else if (code == CSIC_OK) {
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

/* `sepcsictl <service> ...`: argv[0] is the service. */
static int service_main(const struct sctl_service *svc, int argc, char **argv, struct sctl_opts *o)
{
	static const struct option longopts[] = {SCTL_COMMON_OPTIONS};
	char level[64];

	snprintf(level, sizeof(level), "%s: ", svc->name);
	optind = 0;
	int c = sctl_getopt(argc, argv, "+:o:h", longopts, level, o, NULL);
	const char *name = optind < argc ? argv[optind] : NULL; /* the rpc */
	if (c != -1 && c != SCTL_OPT_HELP)
		return SCTL_EXIT_USAGE;
	if (c == SCTL_OPT_HELP || (name && strcmp(name, "help") == 0)) {
		service_help(stdout, svc);
		return SCTL_EXIT_OK;
	}
	if (!name) {
		service_help(stderr, svc);
		return SCTL_EXIT_USAGE;
	}
	const struct sctl_rpc *r = sctl_rpc_find(svc, name);
	if (!r) {
		fprintf(stderr, "sepcsictl: %s has no rpc '%s' (see sepcsictl %s --help)\n",
		        svc->name, name, svc->name);
		return SCTL_EXIT_USAGE;
	}
	return run_rpc(r, argc - optind, argv + optind, o);
}

int main(int argc, char **argv)
{
	enum { OPT_VERSION = SCTL_OPT_OWN };
	static const struct option longopts[] = {{"version", no_argument, NULL, OPT_VERSION},
	                                         SCTL_COMMON_OPTIONS};
	struct sctl_opts o = {
	    .endpoint = csic_default_endpoint(),
	    .output = SCTL_OUT_TEXT,
	    .timeout_ms = DEFAULT_TIMEOUT_MS,
	};

	optind = 0;
	switch (sctl_getopt(argc, argv, "+:o:h", longopts, "", &o, NULL)) {
	case -1: /* at the service */
		break;
	case SCTL_OPT_HELP:
		top_help(stdout);
		return SCTL_EXIT_OK;
	case OPT_VERSION:
		printf("sepcsictl %s\n", SEPCSI_VERSION);
		return SCTL_EXIT_OK;
	default:
		return SCTL_EXIT_USAGE;
	}
	int n = argc - optind;
	char **args = argv + optind;
	if (n == 0) {
		top_help(stderr);
		return SCTL_EXIT_USAGE;
	}
	if (strcmp(args[0], "help") == 0) {
		top_help(stdout);
		return SCTL_EXIT_OK;
	}
	if (strcmp(args[0], "store") == 0)
		return sctl_store_main(n, args, &o);
	if (strcmp(args[0], "audit") == 0)
		return sctl_audit_main(n, args, &o);
	if (strcmp(args[0], "metrics") == 0)
		return sctl_metrics_main(n, args, &o);
	const struct sctl_service *svc = sctl_service_find(args[0]);
	if (!svc) {
		fprintf(stderr, "sepcsictl: unknown service '%s' (see sepcsictl --help)\n",
		        args[0]);
		return SCTL_EXIT_USAGE;
	}
	return service_main(svc, n, args, &o);
}
