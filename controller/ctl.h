/*
 * The CSI volume lifecycle for the Controller and Node services, free of gRPC:
 * requests and responses are the protobuf-c structs generated from csi.proto,
 * outcomes are a {code, message} status whose codes are gRPC's numbers.
 * Runs in rpcd, unprivileged. Talks to the store (intent) and, through
 * mh_client, to the privileged helper (the kernel side).
 *
 * Ownership: a response is allocated from the caller's arena (ctl_arena) and
 * lives until ctl_arena_free(); requests are borrowed.
 */
#ifndef SEPCSI_CTL_H
#define SEPCSI_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csi.pb-c.h"

struct store;
struct mh_client;

/* gRPC status codes, by number (the CSI spec speaks in these). */
enum ctl_code {
	CTL_OK = 0,
	CTL_CANCELLED = 1,
	CTL_UNKNOWN = 2,
	CTL_INVALID_ARGUMENT = 3,
	CTL_DEADLINE_EXCEEDED = 4,
	CTL_NOT_FOUND = 5,
	CTL_ALREADY_EXISTS = 6,
	CTL_PERMISSION_DENIED = 7,
	CTL_RESOURCE_EXHAUSTED = 8,
	CTL_FAILED_PRECONDITION = 9,
	CTL_ABORTED = 10,
	CTL_OUT_OF_RANGE = 11,
	CTL_UNIMPLEMENTED = 12,
	CTL_INTERNAL = 13,
	CTL_UNAVAILABLE = 14,
};

#define CTL_MSG_MAX 512

struct ctl_status {
	enum ctl_code code;
	char msg[CTL_MSG_MAX];
};

/* Set st and return its code; printf-style message. */
int ctl_fail(struct ctl_status *st, enum ctl_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *ctl_code_name(enum ctl_code code);

/* Per-call bump allocator for responses. Allocation failure aborts. */
struct ctl_arena;
struct ctl_arena *ctl_arena_new(void);
void ctl_arena_free(struct ctl_arena *a);       /* NULL is fine */
void *ctl_alloc(struct ctl_arena *a, size_t n); /* zeroed */
char *ctl_strdup(struct ctl_arena *a, const char *s);

enum ctl_mode { CTL_MODE_ALL = 0, CTL_MODE_CONTROLLER, CTL_MODE_NODE };

struct ctl_config {
	const char *driver_name;
	const char *node_id;
	enum ctl_mode mode;
	int64_t max_volumes_per_node; /* 0 = no limit reported */
};

#define CTL_TOPOLOGY_KEY "topology.sepcsi.io/node"

struct ctl;

/* Borrows st and mh (they must outlive the ctl). Copies cfg's strings. */
struct ctl *ctl_new(const struct ctl_config *cfg, struct store *st, struct mh_client *mh);
void ctl_free(struct ctl *c);
/* Images (snapshot false) or snapshots the last reconciliation found unrecorded and kept. */
unsigned ctl_unrecorded(struct ctl *c, bool snapshot);

/*
 * Make the node agree with the store (ctl_reconcile.c): settle the intents of
 * operations that died half done, unmount what the helper mounted that
 * nothing records (images and snapshots nothing records are kept and
 * reported, never removed), and stage and publish again what the store
 * records and a reboot took away. Safe while requests are served. 0 when everything is settled,
 * -1 when something is left for a later run (helper unavailable, a key busy).
 */
int ctl_reconcile(struct ctl *c);
const struct ctl_config *ctl_config(const struct ctl *c);

/*
 * Every RPC handler has this shape: req is the decoded request of the method's
 * type; on CTL_OK *resp points to a response of the method's type allocated
 * from a. Returns st->code.
 */
typedef int (*ctl_handler)(struct ctl *c, const void *req, void **resp, struct ctl_arena *a,
                           struct ctl_status *st);

int ctl_create_volume(struct ctl *, const void *, void **, struct ctl_arena *, struct ctl_status *);
int ctl_delete_volume(struct ctl *, const void *, void **, struct ctl_arena *, struct ctl_status *);
int ctl_controller_get_capabilities(struct ctl *, const void *, void **, struct ctl_arena *,
                                    struct ctl_status *);

int ctl_node_stage_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                          struct ctl_status *);
int ctl_node_unstage_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                            struct ctl_status *);
int ctl_node_publish_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                            struct ctl_status *);
int ctl_node_unpublish_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                              struct ctl_status *);
int ctl_node_get_capabilities(struct ctl *, const void *, void **, struct ctl_arena *,
                              struct ctl_status *);
int ctl_node_get_info(struct ctl *, const void *, void **, struct ctl_arena *, struct ctl_status *);
int ctl_node_get_volume_stats(struct ctl *, const void *, void **, struct ctl_arena *,
                              struct ctl_status *);
int ctl_node_expand_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                           struct ctl_status *);

/* Controller service beyond the skeleton (ctl_controller.c, ctl_delete.c, ctl_publish.c,
 * ctl_volume.c, ctl_list.c, ctl_snapshot.c) and the GroupController service (ctl_group.c). */
int ctl_validate_volume_capabilities(struct ctl *, const void *, void **, struct ctl_arena *,
                                     struct ctl_status *);
int ctl_controller_publish_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                                  struct ctl_status *);
int ctl_controller_unpublish_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                                    struct ctl_status *);
int ctl_controller_expand_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                                 struct ctl_status *);
int ctl_controller_modify_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                                 struct ctl_status *);
int ctl_controller_get_volume(struct ctl *, const void *, void **, struct ctl_arena *,
                              struct ctl_status *);
int ctl_get_capacity(struct ctl *, const void *, void **, struct ctl_arena *, struct ctl_status *);
int ctl_list_volumes(struct ctl *, const void *, void **, struct ctl_arena *, struct ctl_status *);
int ctl_list_snapshots(struct ctl *, const void *, void **, struct ctl_arena *,
                       struct ctl_status *);
int ctl_create_snapshot(struct ctl *, const void *, void **, struct ctl_arena *,
                        struct ctl_status *);
int ctl_delete_snapshot(struct ctl *, const void *, void **, struct ctl_arena *,
                        struct ctl_status *);
int ctl_get_snapshot(struct ctl *, const void *, void **, struct ctl_arena *, struct ctl_status *);
int ctl_group_controller_get_capabilities(struct ctl *, const void *, void **, struct ctl_arena *,
                                          struct ctl_status *);
int ctl_create_volume_group_snapshot(struct ctl *, const void *, void **, struct ctl_arena *,
                                     struct ctl_status *);
int ctl_delete_volume_group_snapshot(struct ctl *, const void *, void **, struct ctl_arena *,
                                     struct ctl_status *);
int ctl_get_volume_group_snapshot(struct ctl *, const void *, void **, struct ctl_arena *,
                                  struct ctl_status *);

/*
 * Server-streaming RPCs: the SnapshotMetadata service (ctl_snapmeta.c). A
 * start handler checks the request: on CTL_OK *out is the call's stream,
 * else st is the call's status. ctl_stream_next gives the next message (1,
 * *resp allocated from a), nothing yet (2: a page of the helper's had no
 * range; call it again, or end the call), ends the stream (0, st CTL_OK) or
 * fails it (-1, st says why); ctl_stream_free ends it in any state.
 */
struct ctl_stream;
typedef int (*ctl_stream_handler)(struct ctl *c, const void *req, struct ctl_stream **out,
                                  struct ctl_status *st);
int ctl_get_metadata_allocated(struct ctl *, const void *, struct ctl_stream **,
                               struct ctl_status *);
int ctl_get_metadata_delta(struct ctl *, const void *, struct ctl_stream **, struct ctl_status *);
int ctl_stream_next(struct ctl_stream *s, void **resp, struct ctl_arena *a, struct ctl_status *st);
void ctl_stream_free(struct ctl_stream *s);

#endif
