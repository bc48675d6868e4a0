/*
 * The capable core's whole surface in one table (the rows of the helper it
 * serves, with the helper's own handlers, re-checking everything they are
 * given, and its own FREEZE and THAW): every row mounts, unmounts, attaches,
 * detaches, marks or freezes only what it proves this volume's, in kubelet's
 * CSI directories. What it does not
 * serve is not here: creating, deleting, resizing or copying images, probing
 * and formatting them, capacity, listing, directory volumes. How a request
 * meets its row: mh_dispatch.c.
 */
#include "core.h"

/* STAGE without a look inside the image: a blank one fails at the mount. */
static int answer_stage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                        struct mh_audit *a, struct mh_res *r)
{
	(void)ans;
	return mh_stage_volume(c, req, a, NULL, NULL, r);
}

/* UNSTAGE, after thawing what the core froze of it: an unmount would wait for the thaw. */
static int answer_unstage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                          struct mh_audit *a, struct mh_res *r)
{
	if (pol_volume_id_valid(req->u.unstage.volume_id))
		core_thaw_volume(req->u.unstage.volume_id);
	return mh_answer_unstage(c, req, ans, a, r);
}

/* EXPAND, after thawing what the core froze of it: the grow ioctl would wait for the thaw. */
static int answer_expand(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                         struct mh_audit *a, struct mh_res *r)
{
	if (pol_volume_id_valid(req->u.expand.volume_id))
		core_thaw_volume(req->u.expand.volume_id);
	return mh_answer_expand(c, req, ans, a, r);
}

const struct mh_op_row mh_op_rows[] = {
    MH_ROW_PING,
    {MH_REQ_STAGE, MH_ANS_STAGE, answer_stage, "STAGE", false,
     MH_F_BLOCK | MH_F_CREATE_DIR | MH_F_MOUNT_GROUP,
     "attaches only images/<id>.img, a regular file its owner could read and write itself, "
     "and mounts it, nosuid,nodev, on an empty root-only directory of a staging pattern, "
     "resolved again right before and checked after; never formats"},
    {MH_REQ_UNSTAGE, MH_ANS_UNSTAGE, answer_unstage, "UNSTAGE", false, MH_F_BLOCK | MH_F_REMOVE_DIR,
     "thaws what the core froze of this volume, then unmounts only a mount proved this "
     "volume's (its loop device backed by the image); detaches only when no mount or bind "
     "of the device is left anywhere"},
    MH_ROW_PUBLISH,
    MH_ROW_UNPUBLISH,
    {MH_REQ_EXPAND, MH_ANS_EXPAND, answer_expand, "EXPAND", false, MH_F_BLOCK,
     "thaws what the core froze of this volume, then grows only a file system proved to be "
     "this volume's mount, with that file system's own ioctl on the verified mount"},
    MH_ROW_STATS,
    {MH_REQ_FREEZE, MH_ANS_FREEZE, core_answer_freeze, "FREEZE", false, 0,
     "freezes only the file system mounted from this volume's own loop device, and thaws it "
     "itself at the deadline (the policy's freeze_max_seconds at most), at its end, or at "
     "the next start"},
    {MH_REQ_THAW, MH_ANS_THAW, core_answer_thaw, "THAW", false, 0,
     "thaws only what the core froze for this volume"},
};

const size_t mh_op_nrows = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
const size_t mh_op_npeer = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
