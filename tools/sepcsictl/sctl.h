/*
 * sepcsictl's internal interfaces: the RPC table (sctl_rpcs.c), the request
 * builder that turns flags into protobuf-c messages (sctl_build.c), the text
 * and JSON printers (sctl_print.c), and the read-only views of the store and
 * the audit log (sctl_store.c, sctl_audit.c). Runs as the operator; it holds
 * no privilege of its own and never writes to the store or the log.
 */
#ifndef SEPCSI_SCTL_H
#define SEPCSI_SCTL_H

#include <getopt.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes (docs/sepcsictl.md): a gRPC status ends the process with 10 + its code. */
enum sctl_exit {
	SCTL_EXIT_OK = 0,
	SCTL_EXIT_FAILURE = 1, /* a local failure: unreadable file, sqlite error, ... */
	SCTL_EXIT_USAGE = 2,   /* bad command line */
	SCTL_EXIT_ABSENT = 3,  /* the store or the audit log to read does not exist */
	SCTL_EXIT_GRPC = 10,   /* + the gRPC status code, 11 (CANCELLED) .. 26 (UNAUTHENTICATED) */
};

enum sctl_output { SCTL_OUT_TEXT = 0, SCTL_OUT_JSON };

struct json_object;

/* The global flags, which may appear anywhere on the command line. */
struct sctl_opts {
	const char *endpoint;
	enum sctl_output output;
	int64_t timeout_ms;
};

/*
 * The command line is read level by level with getopt_long: the top
 * (sepcsictl), a service (controller), and an RPC, store or audit; argv[0]
 * names the level. Every level takes the global flags and --help: its table
 * of long flags ends with SCTL_COMMON_OPTIONS, and its own flags have codes
 * from SCTL_OPT_OWN up.
 */
enum {
	SCTL_OPT_USAGE = -2, /* sctl_getopt: a usage error, already printed */
	SCTL_OPT_HELP = 'h',
	SCTL_OPT_OUTPUT = 'o',
	SCTL_OPT_ENDPOINT = 0x100,
	SCTL_OPT_TIMEOUT,
	SCTL_OPT_OWN = 0x200,
};

#define SCTL_COMMON_OPTIONS                                                                        \
	{"endpoint", required_argument, NULL, SCTL_OPT_ENDPOINT},                                  \
	    {"output", required_argument, NULL, SCTL_OPT_OUTPUT},                                  \
	    {"timeout", required_argument, NULL, SCTL_OPT_TIMEOUT},                                \
	    {"help", no_argument, NULL, SCTL_OPT_HELP},                                            \
	{                                                                                          \
		NULL, 0, NULL, 0                                                                   \
	}

/*
 * The next flag of a level's argv, by getopt_long; set optind = 0 first.
 * optstring is "+:o:h" (stop at the first argument that is not a flag, with
 * -1 and optind on it) or "-:o:h" (read them all: the first goes to
 * *positional if positional is not NULL; any other, or any after "--", is a
 * usage error), plus the level's own short flags. The global flags are
 * applied to o here; long flags must be spelled out (getopt_long takes
 * prefixes). Returns another flag's code (its value in optarg, NULL for an
 * optional value not given), -1 at the end, or SCTL_OPT_USAGE after printing
 * why, prefixed by "sepcsictl: " and level ("store: "; "" at the top).
 */
int sctl_getopt(int argc, char **argv, const char *optstring, const struct option *longopts,
                const char *level, struct sctl_opts *o, const char **positional);

/* How a flag's value lands in the request. */
enum sctl_fk {
	FK_STR,  /* string field */
	FK_STRS, /* repeated string field; the flag repeats */
	FK_INT,  /* integer field */
	FK_SIZE, /* int64 byte count, with units (1Gi) */
	FK_BOOL, /* bool; "--flag" alone is true, "--flag=false" */
	FK_MAP,  /* map<string,string>; KEY=VALUE, the flag repeats */
	FK_TOPO, /* Topology (singular, or appended to a repeated field): KEY=VALUE,... */
};

struct sctl_flag {
	const char *name; /* without the leading "--" */
	enum sctl_fk kind;
	const char *path; /* dotted field path in the request: "capacity_range.required_bytes" */
	bool required;    /* REQUIRED by the spec (shown in --help; the driver enforces it) */
	const char *help;
};

/* Where the capability flags (--access-type ...) put a VolumeCapability. */
enum sctl_cap {
	SCTL_CAP_NONE = 0,
	SCTL_CAP_ONE,           /* singular field, optional */
	SCTL_CAP_ONE_REQUIRED,  /* singular field, REQUIRED: a default is sent */
	SCTL_CAP_MANY,          /* repeated field, optional */
	SCTL_CAP_MANY_REQUIRED, /* repeated field, REQUIRED: a default is sent */
};

struct sctl_rpc {
	const char *service; /* "controller" */
	const char *name;    /* "create-volume" */
	const char *method;  /* "/csi.v1.Controller/CreateVolume" */
	const char *summary;
	const ProtobufCMessageDescriptor *req, *resp;
	enum sctl_cap cap;
	const char *cap_path;
	const struct sctl_flag *flags; /* ended by a {NULL} entry */
	bool streams;                  /* server streaming: resp is each message's type */
};

struct sctl_service {
	const char *name;      /* "group-controller" */
	const char *grpc_name; /* "GroupController" */
	const char *summary;
};

extern const struct sctl_service sctl_services[];
extern const size_t sctl_nservices;
extern const struct sctl_rpc sctl_rpcs[];
extern const size_t sctl_nrpcs;

/* The service named name (or its gRPC name), or NULL. */
const struct sctl_service *sctl_service_find(const char *name);
/* The RPC of service named name, or by its gRPC method name ("CreateVolume"), or NULL. */
const struct sctl_rpc *sctl_rpc_find(const struct sctl_service *svc, const char *name);
/* The gRPC method name of r ("CreateVolume"): the last part of its path. */
const char *sctl_rpc_method_name(const struct sctl_rpc *r);

/*
 * Builds r's request from the RPC flags in argv[1..argc) (argv[0] names the
 * RPC), global flags into o. Returns SCTL_EXIT_OK with *out set (free with
 * protobuf_c_message_free_unpacked(*out, NULL)), or with *out NULL after
 * printing the help --help asked for, or SCTL_EXIT_USAGE after printing why to
 * stderr. A value given to --secret is never printed, not even in an error.
 */
int sctl_build_request(const struct sctl_rpc *r, int argc, char **argv, struct sctl_opts *o,
                       ProtobufCMessage **out);
/* The --help text of r. */
void sctl_rpc_help(FILE *o, const struct sctl_rpc *r);

/* A message printed for humans (indented key: value lines) or as one JSON object. */
void sctl_print_text(FILE *o, const ProtobufCMessage *m);
void sctl_print_json(FILE *o, const ProtobufCMessage *m);
/* j as compact JSON text ("/" not escaped), no newline; frees j. */
void sctl_json_print(FILE *o, struct json_object *j);
/* A new JSON string of b's n bytes in hex. */
struct json_object *sctl_json_hex(const uint8_t *b, size_t n);
/* "2026-11-22T10:00:00Z" (nanos > 0: with a 9-digit fraction), in UTC. */
void sctl_format_time(int64_t seconds, int32_t nanos, char *buf, size_t len);

/*
 * The printer of the SnapshotMetadata streams (sctl_ranges.c), each message
 * as it arrives: csic_call_stream's each, with a struct sctl_ranges as its
 * arg, zeroed but for o and output. Text: the block_metadata_type and
 * volume_capacity_bytes once (again if a message changes them), then every
 * range as a list item; JSON: each message as one object on a line. Returns
 * nonzero, which stops the stream, when o cannot be written: write_errno
 * then says why.
 */
struct sctl_ranges {
	FILE *o;
	enum sctl_output output;
	bool started, listing; /* a header is out; so is its "block_metadata:" line */
	int type;              /* of the header printed last */
	int64_t capacity;
	int write_errno;
};
int sctl_print_ranges(const ProtobufCMessage *m, void *arg);

/* `sepcsictl store|audit|metrics ...`: argv[0] is "store", "audit" or "metrics". */
int sctl_store_main(int argc, char **argv, struct sctl_opts *o);
int sctl_audit_main(int argc, char **argv, struct sctl_opts *o);
int sctl_metrics_main(int argc, char **argv, struct sctl_opts *o);

#endif
