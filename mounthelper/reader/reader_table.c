/*
 * sepcsi-reader's whole surface: PING, STATS and LIST of mounts, with the
 * helper's own handlers (mh_stats.c, mh_list_mounts.c), which re-check every
 * id and path they are given. Each only reads: the row's safety argument is
 * that of its handler, and what the reader may do at all is its filter's
 * and its Landlock ruleset's. How a request meets its row: mh_dispatch.c.
 */
#include <errno.h>

#include "mh_common.h"
#include "mh_list.h"
#include "mh_looks.h"

/* LIST of mounts; the images and snapshots are the orchestrating side's to list. */
static int answer_list(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                       struct mh_audit *a, struct mh_res *r)
{
	(void)a;
	if (req->u.list.what != MH_LIST_MOUNTS)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "the reader lists mounts only");
	return mh_list_mounts(c, req->u.list.after, &ans->u.list_ans, r);
}

/* Every type the reader serves is one the helper's table shares (mh_dispatch.c). */
void mh_fields_more(const struct mh_msg *q, struct mh_fields *f)
{
	if (q->type == MH_REQ_STATS)
		mh_stats_fields(q, f);
}

const struct mh_op_row mh_op_rows[] = {
    MH_ROW_PING,
    MH_ROW_STATS(mh_answer_stats),
    {MH_REQ_LIST, MH_ANS_LIST, answer_list, "LIST", true, 0,
     "lists only the mounts of sepcsi's loop devices and binds of their nodes, with volume "
     "ids; changes nothing"},
};

const size_t mh_op_nrows = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
const size_t mh_op_npeer = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
