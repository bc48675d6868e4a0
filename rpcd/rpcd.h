/*
 * rpcd: the unprivileged CSI server. It holds no capability, runs as a non-root
 * uid under no_new_privs and a seccomp allowlist, and trusts nothing from the
 * network. Shared state of the process and the method table.
 */
#ifndef SEPCSI_RPCD_H
#define SEPCSI_RPCD_H

#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ctl.h"

struct rpcd {
	struct ctl_config cfg;
	const char *endpoint;
	const char *state_dir;
	struct store *st;
	struct mh_client *mh;
	struct ctl *ctl;
	atomic_bool helper_failed;        /* the supervisor gave up on the helper */
	unsigned long metrics_interval_s; /* 0: no metrics reports (rpcd_metrics.c) */
	bool snapshot_metadata;           /* --snapshot-metadata: serve that service */
};

enum rpcd_service {
	RPCD_IDENTITY = 1,
	RPCD_CONTROLLER = 2,
	RPCD_NODE = 4,
	RPCD_SNAPSHOT_METADATA = 8 /* with the Controller service, if --snapshot-metadata */
};

typedef int (*rpcd_handler)(struct rpcd *r, const void *req, void **resp, struct ctl_arena *a,
                            struct ctl_status *st);

struct rpcd_method {
	const char *path; /* "/csi.v1.Node/NodeStageVolume" */
	enum rpcd_service service;
	const ProtobufCMessageDescriptor *req;
	ctl_handler ctl_fn;           /* one of these three is set */
	rpcd_handler rpcd_fn;         /* Identity lives in rpcd itself */
	ctl_stream_handler stream_fn; /* server-streaming: SnapshotMetadata */
};

/* The method for a path, or NULL when the path is not a CSI method this build knows. */
const struct rpcd_method *rpcd_method_find(const char *path, size_t len);
/* The table by position, for metrics: 0 <= i < rpcd_method_count() <= RPCD_METHODS_MAX. */
#define RPCD_METHODS_MAX 48
size_t rpcd_method_count(void);
const struct rpcd_method *rpcd_method_at(size_t i);
size_t rpcd_method_index(const struct rpcd_method *m);
/* Whether the mode serves the method's service. */
bool rpcd_method_enabled(const struct rpcd *r, const struct rpcd_method *m);

/* Identity service (rpcd_identity.c). */
int rpcd_get_plugin_info(struct rpcd *, const void *, void **, struct ctl_arena *,
                         struct ctl_status *);
int rpcd_get_plugin_capabilities(struct rpcd *, const void *, void **, struct ctl_arena *,
                                 struct ctl_status *);
int rpcd_probe(struct rpcd *, const void *, void **, struct ctl_arena *, struct ctl_status *);

/*
 * The gRPC server (rpcd_server.c): binds the endpoint, serves with nworkers
 * threads on one completion queue until rpcd_server_stop() is called from
 * another thread, then finishes the calls in flight and returns.
 */
struct rpcd_server;
struct rpcd_server *rpcd_server_start(struct rpcd *r, int nworkers);
void rpcd_server_stop_and_free(struct rpcd_server *s);

#endif
