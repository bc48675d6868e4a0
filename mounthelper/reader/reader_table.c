/*
 * sepcsi-reader's whole surface: PING, STATS, LIST of mounts and STAGE_CHECK,
 * with the helper's own handlers (mh_stats.c, mh_list_mounts.c, mh_ops.c,
 * mh_at.c), which re-check every id and path they are given. Each only
 * reads: the row's safety argument is that of its handler, and what the
 * reader may do at all is its filter's and its Landlock ruleset's. How a
 * request meets its row: mh_dispatch.c.
 */
#include <errno.h>

#include "mh_at.h"
#include "mh_common.h"
#include "mh_list.h"
#include "mh_looks.h"
#include "mh_ops.h"

/* LIST of mounts; the images and snapshots are the orchestrating side's to list. */
static int answer_list(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                       struct mh_audit *a, struct mh_res *r)
{
	(void)a;
	if (req->u.list.what != MH_LIST_MOUNTS)
		return mh_fail(r, MH_E_REFUSED, EINVAL, "the reader lists mounts only");
	return mh_list_mounts(c, req->u.list.after, &ans->u.list_ans, r);
}

/*
 * STAGE_CHECK: what STAGE would refuse its request for before it acts (the
 * policy, the options, the path up to its parent), with nothing done, for the
 * orchestrating side, which formats a blank image only for a STAGE that can
 * go on and sees no path of kubelet's itself. Only a hint: the core's STAGE
 * makes every check again, so a reader taken over could only make the helper
 * format, or not, a blank image the helper owns.
 */
static int answer_stage_check(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                              struct mh_audit *a, struct mh_res *r)
{
	const struct mh_req_stage *q = &req->u.stage;
	struct mh_mount_opts o = {0};
	struct mh_at at;
	(void)ans;
	(void)a;
	int checked = (q->flags & MH_F_BLOCK) ? 0 : mh_stage_check(c, q, &o, r);
	mh_mount_opts_free(&o);
	if (checked < 0 ||
	    mh_at_open(c, q->staging_path, (q->flags & MH_F_CREATE_DIR) ? POL_TARGET : POL_STAGING,
	               &at, r) < 0)
		return -1;
	mh_at_close(&at);
	return 0;
}

/* The types the helper's table does not share (mh_dispatch.c): STATS, and STAGE_CHECK as STAGE. */
void mh_fields_more(const struct mh_msg *q, struct mh_fields *f)
{
	if (q->type == MH_REQ_STATS)
		mh_stats_fields(q, f);
	if (q->type == MH_REQ_STAGE_CHECK) {
		f->a = (struct mh_audit){.volume_id = q->u.stage.volume_id,
		                         .path = q->u.stage.staging_path};
		f->flags = q->u.stage.flags;
		f->readonly = q->u.stage.readonly;
	}
}

const struct mh_op_row mh_op_rows[] = {
    MH_ROW_PING,
    MH_ROW_STATS(mh_answer_stats),
    {MH_REQ_LIST, MH_ANS_LIST, answer_list, "LIST", true, 0,
     "lists only the mounts of sepcsi's loop devices and binds of their nodes, with volume "
     "ids; changes nothing"},
    {MH_REQ_STAGE_CHECK, MH_ANS_STAGE_CHECK, answer_stage_check, "STAGE_CHECK", true,
     MH_F_BLOCK | MH_F_CREATE_DIR | MH_F_MOUNT_GROUP,
     "STAGE's checks of the policy, the options and the path, nothing made or changed"},
};

const size_t mh_op_nrows = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
const size_t mh_op_npeer = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
