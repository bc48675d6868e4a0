/*
 * The helper's operations: one handler mh_answer_X() per request MH_REQ_X,
 * spread over mh_ops.c (filesystem lifecycle), mh_block.c (raw block),
 * mh_copy.c (snapshots, clones, capacity), mh_resize.c (resize, expand) and
 * mh_stats.c, and the dispatch table that names them all (mh_dispatch.c).
 */
#ifndef SEPCSI_MH_OPS_H
#define SEPCSI_MH_OPS_H

#include <stdbool.h>
#include <stddef.h>

#include "mh.h"

/* What the audit record names; set by each handler as soon as it knows. */
struct mh_audit {
	const char *volume_id, *snapshot_id, *source_id, *path, *staging_path;
	const char *base, *directory; /* a directory volume's base and its name there */
	const char *note;             /* why an idempotent success did nothing, or what was done */
};

/*
 * A handler: validate req, act, fill ans (its type is already set) and return
 * 0; or return -1 with r filled (the caller turns it into MH_ANS_ERROR).
 */
typedef int mh_answer_fn(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                         struct mh_audit *a, struct mh_res *r);

/* The handlers both tables hold (the helper's other rows: mh_helper_ops.h). */
mh_answer_fn mh_answer_ping, mh_answer_unstage, mh_answer_publish, mh_answer_unpublish,
    mh_answer_expand;
/*
 * STAGE of an image volume, in two halves. What readies the attached image
 * before its mount: the helper's probes it and formats it if blank
 * (mh_mkfs.c, the STAGE handler there, whose arg is the checked mkfs
 * options); the core passes NULL and never looks inside an image, so a blank
 * one fails at the mount. prep returns 0, or -1 with r. lfd is the loop
 * device just attached to img. (A file system found on a bigger image is
 * grown afterwards by an EXPAND, as the helper asks it: mh_mkfs.c.)
 */
typedef int mh_stage_prep_fn(const struct mh_ctx *c, const struct mh_req_stage *q, int img, int lfd,
                             bool ro, void *arg, struct mh_res *r);
/* A file-system STAGE's own checks: type, mount options (parsed into *o), group; 0 or -1. */
struct mh_mount_opts;
int mh_stage_check(const struct mh_ctx *c, const struct mh_req_stage *q, struct mh_mount_opts *o,
                   struct mh_res *r);
int mh_stage_volume(const struct mh_ctx *c, const struct mh_msg *req, struct mh_audit *a,
                    mh_stage_prep_fn *prep, void *arg, struct mh_res *r);

/*
 * One row per operation: its handler, whether it only reads, the flags it
 * takes (any other is refused before the handler runs), and its safety
 * argument in one line. Each binary links one table: the helper's
 * (mh_table.c) or the core's (core/core_table.c). The first mh_op_npeer rows
 * are the requests its peer may send; any after are its own (the helper's
 * PURGE, from its main loop to a worker).
 */
struct mh_op_row {
	uint16_t req, ans;
	mh_answer_fn *answer;
	const char *name;
	bool read_only;
	uint8_t flags;
	const char *safety;
};
extern const struct mh_op_row mh_op_rows[];

/* The rows both tables hold, with the helper's handlers: one text for their arguments. */
#define MH_ROW_PING                                                                                \
	{                                                                                          \
		MH_REQ_PING, MH_ANS_PING, mh_answer_ping, "PING", true, 0, "changes nothing"       \
	}
#define MH_ROW_PUBLISH(handler)                                                                    \
	{                                                                                          \
		MH_REQ_PUBLISH, MH_ANS_PUBLISH, handler, "PUBLISH", false, MH_F_BLOCK,             \
		    "a second mount of the staged file system (a bind of its loop node for raw "   \
		    "block), "                                                                     \
		    "nosuid,nodev, on an empty target of a target pattern it made and marked or "  \
		    "found "                                                                       \
		    "empty; checked after"                                                         \
	}
#define MH_ROW_UNPUBLISH(handler)                                                                  \
	{                                                                                          \
		MH_REQ_UNPUBLISH, MH_ANS_UNPUBLISH, handler, "UNPUBLISH", false, 0,                \
		    "unmounts only this volume's mounts at the target; removes the target only "   \
		    "if its "                                                                      \
		    "mark says it made it for this volume, and checks the unlink after"            \
	}
extern const size_t mh_op_nrows, mh_op_npeer;

/*
 * Answer one decoded message. Returns 0 with *ans filled (the operation's
 * answer, or MH_ANS_ERROR with a reason) and the audit record written;
 * returns -1 if req is not a request in the dispatch table (a protocol
 * violation: the caller ends the helper).
 */
int mh_ops_handle(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans);

/*
 * True if type is a request rpcd may send: in the dispatch table, and not one
 * of the main loop's own (PURGE), which from rpcd is a violation.
 */
bool mh_ops_known(uint16_t type);

/*
 * The dispatch row of a request type, NULL if none: its name, its one-line
 * safety argument, and whether it only reads (PING, CAPACITY, STATS, LIST,
 * DIR_STATS, DIR_CAPACITY: the helper's main loop answers it at once; every
 * other request runs in a worker, mh_worker.c).
 */
const struct mh_op_row *mh_ops_row(uint16_t type);

/* What a request names and carries that every operation checks the same way. */
struct mh_fields {
	struct mh_audit a;   /* its ids and paths, as the audit record names them */
	int flags, readonly; /* -1: the request has no such field */
	bool source_is_snapshot;
};

/* What req names and carries (mh_dispatch.c, with mh_fields_more). */
struct mh_fields mh_ops_fields(const struct mh_msg *q);

/*
 * The fields of the request types only the helper's table has (mh_table.c:
 * images made and copied, directory volumes); the core's table has none
 * (core_table.c). The shared types' are mh_dispatch.c's.
 */
void mh_fields_more(const struct mh_msg *q, struct mh_fields *f);

/*
 * Detach what dead operations left: unused loop devices of raw block volumes
 * (mh_sweep.c), except those of ids for which held() is true (held NULL: no
 * operation is in flight).
 */
void mh_sweep(const struct mh_ctx *c, bool (*held)(const char *id));

/*
 * Thaw the file system mounted from l, a loop device proved volume_id's (a
 * detached mount of it, never a path), if it is frozen: logged as "thawed",
 * with why (mh_sweep.c). Best effort.
 */
struct mh_loop;
void mh_thaw_loop(const struct mh_loop *l, const char *volume_id, const char *why);

/*
 * This volume is there already (what: "already staged" or "already published"):
 * 0 when as asked, noted as what; else EXISTS, naming the file system type
 * there (or "") and whether it is read-only.
 */
int mh_already(struct mh_audit *a, struct mh_res *r, bool same, const char *what,
               const char *fstype, bool ro);

/* ans made MH_ANS_ERROR with r's kind, errno and reason (its id kept). */
void mh_ops_to_error(struct mh_msg *ans, const struct mh_res *r);
/* The audit record of req, the operation op, as a and r say (mh_ops_handle's, and the helper's
 * refusals: mh_ops_refuse). */
void mh_ops_audit(const struct mh_ctx *c, const struct mh_msg *req, const char *op,
                  const struct mh_audit *a, const struct mh_res *r);

#endif
