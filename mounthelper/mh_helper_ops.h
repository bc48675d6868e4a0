/*
 * The helper's own rows, which the capable core does not serve: images made,
 * resized, copied and listed, capacity, directory volumes, the main loop's
 * PURGE, and the rows it asks of its core (mh_relay.c). The rows both tables
 * hold, and how a request meets its row: mh_ops.h.
 */
#ifndef SEPCSI_MH_HELPER_OPS_H
#define SEPCSI_MH_HELPER_OPS_H

#include "mh_ops.h"
#include "mh_proto_all.h"

mh_answer_fn mh_answer_create, mh_answer_delete, mh_answer_stage, mh_answer_resize,
    mh_answer_snapshot, mh_answer_group_snapshot, mh_answer_delete_snapshot, mh_answer_clone,
    mh_answer_capacity, mh_answer_list, mh_answer_blocks;
/*
 * With a capable core (mh_ctx.core): the request asked of it as it came
 * (mh_relay), and the rows that are only that, else the helper's own handler
 * (mh_relay.c).
 */
mh_answer_fn mh_relay, mh_relay_unstage, mh_relay_publish, mh_relay_unpublish, mh_relay_expand,
    mh_relay_stats;
/*
 * Ask the core to write back volume_id's file system out of its thread (FLUSH),
 * before an UNSTAGE or FREEZE of it; what it does not, that request does.
 */
void mh_core_flush(const char *volume_id);
/* How many loop devices back images/<id>.img, asked of the core (which alone can look); -1. */
int mh_core_attached(const char *volume_id, struct mh_res *r);
/* Directory volumes (mh_dir.c). */
mh_answer_fn mh_answer_dir_create, mh_answer_dir_delete, mh_answer_dir_expand,
    mh_answer_dir_publish, mh_answer_dir_unpublish, mh_answer_dir_stats, mh_answer_dir_capacity,
    mh_answer_dir_snapshot, mh_answer_dir_delete_snapshot, mh_answer_dir_node;
/* The main loop's own (mh_list.c). */
mh_answer_fn mh_answer_purge;

/* Rows of the helper's table whose text is the shared handlers' (the core's own differ). */
#define MH_ROW_UNSTAGE(handler)                                                                    \
	{                                                                                          \
		MH_REQ_UNSTAGE, MH_ANS_UNSTAGE, handler, "UNSTAGE", false,                         \
		    MH_F_BLOCK | MH_F_REMOVE_DIR,                                                  \
		    "unmounts only a mount proved this volume's (its loop device backed by the "   \
		    "image); "                                                                     \
		    "detaches only when no mount or bind of the device is left anywhere"           \
	}
#define MH_ROW_EXPAND(handler)                                                                     \
	{                                                                                          \
		MH_REQ_EXPAND, MH_ANS_EXPAND, handler, "EXPAND", false, MH_F_BLOCK,                \
		    "grows only a file system proved to be this volume's mount, with that file "   \
		    "system's own ioctl on the verified mount; an xfs by 1,024 groups at most "    \
		    "each time, to 65,536 in all"                                                  \
	}

#define MH_OPS_KEYS_MAX ((size_t)2 * MH_GROUP_MAX) /* a GROUP_SNAPSHOT's volumes and snapshots */

/*
 * The ids and paths a request acts on, as strings (pointers into req): two
 * requests that share one may not run at the same time. Returns the count.
 * The helper's (mh_table.c): the core runs one request at a time.
 */
size_t mh_ops_keys(const struct mh_msg *req, const char *keys[MH_OPS_KEYS_MAX]);

/* An error answer for req, with its audit record (used when a worker cannot run or died). */
void mh_ops_refuse(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                   enum mh_err_kind kind, int err, const char *reason);

#endif
