/*
 * rpcd's half of the helper channel: one stub mh_X() per privileged operation,
 * matching the helper's mh_answer_X(). Thread-safe: any number of worker
 * threads may call concurrently; each call gets its own request id and waits
 * for the answer with that id. Runs in rpcd, unprivileged.
 *
 * Every stub returns 0 on success, or -1 with *err filled. If the helper dies
 * or the channel breaks, calls in flight and later calls fail at once with
 * kind MH_E_UNAVAILABLE (never hang) until mh_client_set_fd() hands in a new
 * channel; a call the helper does not answer in time fails with MH_E_TIMEOUT.
 */
#ifndef SEPCSI_MH_CLIENT_H
#define SEPCSI_MH_CLIENT_H

#include <stdbool.h>
#include <stdint.h>

#include "mh_proto.h"

struct mh_client;

struct mh_err {
	enum mh_err_kind kind;
	int sys_errno;
	char reason[MH_REASON_MAX + 1];
};

/* Takes ownership of fd (a SOCK_SEQPACKET socket to the helper); fd may be -1 (no helper yet). */
struct mh_client *mh_client_new(int fd);
/* Closes the channel; calls still waiting fail with MH_E_UNAVAILABLE. NULL is fine. */
void mh_client_free(struct mh_client *c);
/* Replace the channel (helper restarted). Takes ownership of fd; in-flight calls fail UNAVAILABLE.
 */
void mh_client_set_fd(struct mh_client *c, int fd);
/*
 * Each call waits at most this long for its answer, then fails with
 * MH_E_TIMEOUT (the late answer is dropped when it comes): quick reads (PING,
 * CAPACITY, STATS), copies (SNAPSHOT, CLONE), and all other work.
 */
#define MH_DEADLINE_QUICK_S 10
#define MH_DEADLINE_WORK_S  300
#define MH_DEADLINE_COPY_S  3600
void mh_client_set_deadlines(struct mh_client *c, unsigned quick_s, unsigned work_s,
                             unsigned copy_s);

/* True while a channel is open and has not seen EOF or an error. */
bool mh_client_connected(struct mh_client *c);
/* True if that channel is open and the helper answered a request on it within ms. */
bool mh_client_answered_within(struct mh_client *c, int64_t ms);

/*
 * Failed calls since start, for metrics: fn is called for each request type
 * (MH_REQ_X) and kind (the helper's answer, or MH_E_UNAVAILABLE/MH_E_TIMEOUT
 * on this side) that has failed at least once, with the count.
 */
#define MH_CLIENT_TYPES 64
#define MH_CLIENT_KINDS 10
typedef void mh_client_error_fn(void *arg, uint16_t type, enum mh_err_kind kind, uint64_t n);
void mh_client_errors(struct mh_client *c, mh_client_error_fn *fn, void *arg);

int mh_ping(struct mh_client *c, struct mh_err *err);
int mh_create(struct mh_client *c, const char *volume_id, uint64_t size_bytes, uint64_t *out_size,
              struct mh_err *err);
int mh_delete(struct mh_client *c, const char *volume_id, struct mh_err *err);
int mh_stage(struct mh_client *c, const struct mh_req_stage *req, struct mh_err *err);
int mh_unstage(struct mh_client *c, const char *volume_id, const char *staging_path,
               struct mh_err *err);
int mh_publish(struct mh_client *c, const struct mh_req_publish *req, struct mh_err *err);
int mh_unpublish(struct mh_client *c, const char *volume_id, const char *target_path,
                 struct mh_err *err);

/* mh_unstage with flags: MH_F_BLOCK, MH_F_REMOVE_DIR (mh_unstage passes 0). */
int mh_unstage_flags(struct mh_client *c, const char *volume_id, const char *staging_path,
                     uint8_t flags, struct mh_err *err);
int mh_resize(struct mh_client *c, const char *volume_id, uint64_t size_bytes, uint64_t *out_size,
              struct mh_err *err);
int mh_snapshot(struct mh_client *c, const char *snapshot_id, const char *volume_id,
                struct mh_ans_copy *out, struct mh_err *err);
int mh_delete_snapshot(struct mh_client *c, const char *snapshot_id, struct mh_err *err);
/* Snapshots of 2 to MH_GROUP_MAX volumes at one point in time (every one frozen at once). */
int mh_group_snapshot(struct mh_client *c, const struct mh_req_group *q, struct mh_ans_group *out,
                      struct mh_err *err);
/* One page of a snapshot's allocated ranges, or of two snapshots' differences (MH_REQ_BLOCKS). */
int mh_blocks(struct mh_client *c, const struct mh_req_blocks *q, struct mh_ans_blocks *out,
              struct mh_err *err);
int mh_clone(struct mh_client *c, const struct mh_req_clone *req, struct mh_ans_copy *out,
             struct mh_err *err);
int mh_capacity(struct mh_client *c, struct mh_ans_capacity *out, struct mh_err *err);
int mh_expand(struct mh_client *c, const struct mh_req_expand *req, uint64_t *out_size,
              struct mh_err *err);
/* One page of what the helper made (MH_LIST_*), after the cursor (first page: ""). */
int mh_list(struct mh_client *c, uint32_t what, const char *after, struct mh_ans_list *out,
            struct mh_err *err);
/*
 * A directory-volume request (type: one of MH_REQ_DIR_*), sent as q gives it;
 * the answer's payload, if the type has one, in *ans (may be NULL).
 */
int mh_dir(struct mh_client *c, uint16_t type, const struct mh_req_dir *q, struct mh_msg *ans,
           struct mh_err *err);
int mh_stats(struct mh_client *c, const struct mh_req_stats *req, struct mh_ans_stats *out,
             struct mh_err *err);

#endif
