/*
 * The capable core's whole surface in one table (the rows of the helper it
 * serves, with the helper's own handlers, re-checking everything they are
 * given, and its own FREEZE and THAW): every row mounts, unmounts, attaches,
 * detaches, marks or freezes only what it proves this volume's, in kubelet's
 * CSI directories. What it does not
 * serve is not here: creating, deleting, resizing or copying images (REFRESH
 * only gives its loop devices an image's new size), probing and formatting
 * them, capacity, listing files, directory volumes. How a request
 * meets its row: mh_dispatch.c.
 */
#include "core.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mh_common.h"
#include "mh_image.h"
#include "mh_loop.h"
#include "mh_resize.h"

/* STAGE without a look inside the image: a blank one fails at the mount. */
static int answer_stage(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                        struct mh_audit *a, struct mh_res *r)
{
	(void)ans;
	return mh_stage_volume(c, req, a, NULL, NULL, r);
}

/*
 * UNSTAGE and EXPAND, after thawing the volume's file system: the unmount, or
 * the grow ioctl, would wait for the thaw, and the core's one thread with it.
 * What this core froze, and what any other froze (a core before it, killed
 * with its peer while the image had another name, so that its sweep passed
 * the device over): the file system mounted from this volume's own loop
 * device, never a path.
 */
static int answer_thawed(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                         struct mh_audit *a, struct mh_res *r)
{
	bool unstage = req->type == MH_REQ_UNSTAGE;
	struct mh_vol v = {0};
	core_thaw_volume(a->volume_id,
	                 unstage ? "the volume is being unstaged" : "the volume is being grown");
	if (mh_vol_lookup(c, a->volume_id, &v, &(struct mh_res){0}) == 0 && v.attached)
		mh_thaw_loop(&v.loop, a->volume_id, "frozen by another than this core");
	return (unstage ? mh_answer_unstage : mh_answer_expand)(c, req, ans, a, r);
}

/*
 * REFRESH: the orchestrating side grew images/<id>.img (a controller's
 * expansion of a raw block volume in use); the core's loop devices of it take
 * the new size. Never a smaller one: a device is never shrunk under what uses it.
 */
static int answer_refresh(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                          struct mh_audit *a, struct mh_res *r)
{
	struct stat st;
	int img = mh_image_open(c, req->u.del.volume_id, true, &st, r), n = -1;
	if (img < 0)
		return -1;
	if ((n = mh_resize_refresh_loops(&st, r)) > 0) /* the core's own devices only */
		a->note = "loop devices refreshed";
	ans->u.size_ans.size_bytes = (uint64_t)st.st_size & ~511ULL; /* what a device holds */
	close(img);
	return n < 0 ? -1 : 0;
}

/*
 * ATTACHED: whether a loop device backs images/<id>.img, whatever the device's
 * name (a pod may rename its raw block device), for the orchestrating side,
 * which never opens one: it formats an image, or removes it, only while
 * none does (the volume's key held meanwhile, so none comes). With none, the
 * image's loop record goes (the orchestrating side cannot drop it when it
 * removes the image; an image with no record has no device: core_loops.c).
 */
static int answer_attached(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                           struct mh_audit *a, struct mh_res *r)
{
	struct mh_vol v;
	(void)a;
	if (mh_vol_lookup(c, req->u.del.volume_id, &v, r) < 0)
		return -1;
	/* Every device holding the image counts, a pod's renamed one too (any_name). */
	int held = mh_loop_find(v.st.st_dev, v.st.st_ino, true, NULL, MH_LOOP_RECORD_MAX, r);
	if (held < 0)
		return -1;
	ans->u.attached.devices = (uint32_t)held;
	if (held == 0)
		mh_loop_record_forget(v.st.st_dev, v.st.st_ino);
	return 0;
}

/*
 * FLUSH: the volume's file system written back by the flusher, out of the
 * core's one thread (core_flush.c), answered once that is done; with nothing
 * to hand over (not mounted from its own loop device, frozen, no flusher or
 * none free), answered at once, nothing done.
 */
static int answer_flush(const struct mh_ctx *c, const struct mh_msg *req, struct mh_msg *ans,
                        struct mh_audit *a, struct mh_res *r)
{
	(void)r;
	bool handed = core_flush_begin(c, req->u.del.volume_id, req->id);
	a->note = handed ? "handed to the flusher" : "nothing handed to the flusher";
	if (handed)
		ans->type = 0; /* no answer now: once the write-back is done (core_main.c) */
	return 0;
}

/* Every type the core serves is one the helper's table shares (mh_dispatch.c). */
void mh_fields_more(const struct mh_msg *q, struct mh_fields *f)
{
	(void)q;
	(void)f;
}

const struct mh_op_row mh_op_rows[] = {
    MH_ROW_PING,
    {MH_REQ_STAGE, MH_ANS_STAGE, answer_stage, "STAGE", false,
     MH_F_BLOCK | MH_F_CREATE_DIR | MH_F_MOUNT_GROUP,
     "attaches only images/<id>.img, a regular file its owner could read and write itself, "
     "and mounts it, nosuid,nodev, on an empty root-only directory of a staging pattern, "
     "resolved again right before and checked after; never formats; detaches first only "
     "devices of that image named for the volume that no mount or bind uses anywhere"},
    {MH_REQ_UNSTAGE, MH_ANS_UNSTAGE, answer_thawed, "UNSTAGE", false, MH_F_BLOCK | MH_F_REMOVE_DIR,
     "thaws this volume's file system (on its own loop device), then unmounts only a mount "
     "proved this "
     "volume's (its loop device backed by the image); detaches only when no mount or bind "
     "of the device is left anywhere"},
    MH_ROW_PUBLISH(mh_answer_publish),
    MH_ROW_UNPUBLISH(mh_answer_unpublish),
    {MH_REQ_EXPAND, MH_ANS_EXPAND, answer_thawed, "EXPAND", false, MH_F_BLOCK,
     "thaws this volume's file system (on its own loop device), then grows only a file "
     "system proved to be this volume's mount, with that file system's own ioctl on the "
     "verified mount; an xfs by 1,024 groups at most each time, to 65,536 in all"},
    {MH_REQ_FREEZE, MH_ANS_FREEZE, core_answer_freeze, "FREEZE", false, 0,
     "freezes only the file system mounted from this volume's own loop device, and thaws it "
     "itself at the deadline (the policy's freeze_max_seconds at most), at its end, or at "
     "the next start"},
    {MH_REQ_THAW, MH_ANS_THAW, core_answer_thaw, "THAW", false, 0,
     "thaws only what the core froze for this volume"},
    {MH_REQ_REFRESH, MH_ANS_REFRESH, answer_refresh, "REFRESH", false, 0,
     "sets the size of only the core's own loop devices of images/<id>.img (a regular file "
     "of the owner's, one name) to that image's size, never smaller than it checked; a "
     "device shrunk by a truncation meanwhile is reported"},
    {MH_REQ_ATTACHED, MH_ANS_ATTACHED, answer_attached, "ATTACHED", true, 0,
     "tells whether a loop device backs images/<id>.img; changes nothing but, with none, "
     "drops that image's loop record, a hint it keeps itself"},
    {MH_REQ_FLUSH, MH_ANS_FLUSH, answer_flush, "FLUSH", true, 0,
     "writes back, out of its thread, only the file system mounted from this volume's own "
     "loop device, never a frozen one; changes nothing a user sees"},
};

const size_t mh_op_nrows = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
const size_t mh_op_npeer = sizeof(mh_op_rows) / sizeof(mh_op_rows[0]);
