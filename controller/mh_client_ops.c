/*
 * The typed calls on the helper channel: one function per request type,
 * copying the caller's arguments into bounded request fields (refused here,
 * with a reason, when they do not fit) and the answer's fields out. Runs in
 * rpcd, unprivileged, on any gRPC worker thread; the transport is
 * mh_client.c.
 */
#include "mh_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mh_client_int.h"
#include "mh_proto_all.h"

/* Copy a caller's string into a bounded request field, or refuse locally with a reason. */
static int copy_arg(char *dst, size_t cap, const char *src, const char *what, struct mh_err *err)
{
	size_t n = src != NULL ? strnlen(src, cap) : cap;

	if (n >= cap) {
		char reason[MH_REASON_MAX + 1];
		snprintf(reason, sizeof(reason), "%s is missing or longer than %zu bytes", what,
		         cap - 1);
		mh_client_set_err(err, MH_E_REFUSED, 0, reason);
		return -1;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

/* dst is always an array field of the request, so sizeof gives its bound. */
#define COPY_ARG(dst, src, what, err) copy_arg((dst), sizeof(dst), (src), (what), (err))

int mh_ping(struct mh_client *c, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_PING};

	return mh_client_call(c, &req, MH_ANS_PING, err);
}

int mh_create(struct mh_client *c, const char *volume_id, uint64_t size_bytes, uint64_t *out_size,
              struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_CREATE};

	if (COPY_ARG(req.u.create.volume_id, volume_id, "volume_id", err) < 0)
		return -1;
	req.u.create.size_bytes = size_bytes;
	if (mh_client_call(c, &req, MH_ANS_CREATE, err) < 0)
		return -1;
	if (out_size != NULL)
		*out_size = req.u.size_ans.size_bytes;
	return 0;
}

int mh_delete(struct mh_client *c, const char *volume_id, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_DELETE};

	if (COPY_ARG(req.u.del.volume_id, volume_id, "volume_id", err) < 0)
		return -1;
	return mh_client_call(c, &req, MH_ANS_DELETE, err);
}

int mh_stage(struct mh_client *c, const struct mh_req_stage *r, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_STAGE};
	struct mh_req_stage *q = &req.u.stage;

	if (COPY_ARG(q->volume_id, r->volume_id, "volume_id", err) < 0 ||
	    COPY_ARG(q->staging_path, r->staging_path, "staging_path", err) < 0 ||
	    COPY_ARG(q->fs_type, r->fs_type, "fs_type", err) < 0 ||
	    COPY_ARG(q->mount_flags, r->mount_flags, "mount_flags", err) < 0 ||
	    COPY_ARG(q->mkfs_options, r->mkfs_options, "mkfs_options", err) < 0)
		return -1;
	q->readonly = r->readonly;
	q->flags = r->flags;
	q->gid = r->gid;
	return mh_client_call(c, &req, MH_ANS_STAGE, err);
}

int mh_unstage(struct mh_client *c, const char *volume_id, const char *staging_path,
               struct mh_err *err)
{
	return mh_unstage_flags(c, volume_id, staging_path, 0, err);
}

int mh_unstage_flags(struct mh_client *c, const char *volume_id, const char *staging_path,
                     uint8_t flags, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_UNSTAGE};

	if (COPY_ARG(req.u.unstage.volume_id, volume_id, "volume_id", err) < 0 ||
	    COPY_ARG(req.u.unstage.staging_path, staging_path, "staging_path", err) < 0)
		return -1;
	req.u.unstage.flags = flags;
	return mh_client_call(c, &req, MH_ANS_UNSTAGE, err);
}

int mh_publish(struct mh_client *c, const struct mh_req_publish *r, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_PUBLISH};
	struct mh_req_publish *q = &req.u.publish;

	if (COPY_ARG(q->volume_id, r->volume_id, "volume_id", err) < 0 ||
	    COPY_ARG(q->staging_path, r->staging_path, "staging_path", err) < 0 ||
	    COPY_ARG(q->target_path, r->target_path, "target_path", err) < 0)
		return -1;
	q->readonly = r->readonly;
	q->flags = r->flags;
	return mh_client_call(c, &req, MH_ANS_PUBLISH, err);
}

int mh_unpublish(struct mh_client *c, const char *volume_id, const char *target_path,
                 struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_UNPUBLISH};

	if (COPY_ARG(req.u.unpublish.volume_id, volume_id, "volume_id", err) < 0 ||
	    COPY_ARG(req.u.unpublish.target_path, target_path, "target_path", err) < 0)
		return -1;
	return mh_client_call(c, &req, MH_ANS_UNPUBLISH, err);
}

int mh_resize(struct mh_client *c, const char *volume_id, uint64_t size_bytes, uint64_t *out_size,
              struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_RESIZE};

	if (COPY_ARG(req.u.resize.volume_id, volume_id, "volume_id", err) < 0)
		return -1;
	req.u.resize.size_bytes = size_bytes;
	if (mh_client_call(c, &req, MH_ANS_RESIZE, err) < 0)
		return -1;
	if (out_size != NULL)
		*out_size = req.u.size_ans.size_bytes;
	return 0;
}

int mh_snapshot(struct mh_client *c, const char *snapshot_id, const char *volume_id,
                struct mh_ans_copy *out, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_SNAPSHOT};

	if (COPY_ARG(req.u.snapshot.snapshot_id, snapshot_id, "snapshot_id", err) < 0 ||
	    COPY_ARG(req.u.snapshot.volume_id, volume_id, "volume_id", err) < 0)
		return -1;
	if (mh_client_call(c, &req, MH_ANS_SNAPSHOT, err) < 0)
		return -1;
	if (out != NULL)
		*out = req.u.copy_ans;
	return 0;
}

int mh_group_snapshot(struct mh_client *c, const struct mh_req_group *q, struct mh_ans_group *out,
                      struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_GROUP_SNAPSHOT};

	req.u.group = *q;
	if (mh_client_call(c, &req, MH_ANS_GROUP_SNAPSHOT, err) < 0)
		return -1;
	if (out != NULL)
		*out = req.u.group_ans;
	return 0;
}

int mh_blocks(struct mh_client *c, const struct mh_req_blocks *q, struct mh_ans_blocks *out,
              struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_BLOCKS};

	req.u.blocks = *q;
	if (mh_client_call(c, &req, MH_ANS_BLOCKS, err) < 0)
		return -1;
	*out = req.u.blocks_ans;
	return 0;
}

int mh_delete_snapshot(struct mh_client *c, const char *snapshot_id, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_DELETE_SNAPSHOT};

	if (COPY_ARG(req.u.del_snapshot.snapshot_id, snapshot_id, "snapshot_id", err) < 0)
		return -1;
	return mh_client_call(c, &req, MH_ANS_DELETE_SNAPSHOT, err);
}

int mh_clone(struct mh_client *c, const struct mh_req_clone *r, struct mh_ans_copy *out,
             struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_CLONE};
	struct mh_req_clone *q = &req.u.clone;

	if (COPY_ARG(q->volume_id, r->volume_id, "volume_id", err) < 0 ||
	    COPY_ARG(q->source_id, r->source_id, "source_id", err) < 0)
		return -1;
	q->source_kind = r->source_kind;
	q->size_bytes = r->size_bytes;
	if (mh_client_call(c, &req, MH_ANS_CLONE, err) < 0)
		return -1;
	if (out != NULL)
		*out = req.u.copy_ans;
	return 0;
}

int mh_capacity(struct mh_client *c, struct mh_ans_capacity *out, struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_CAPACITY};

	if (mh_client_call(c, &req, MH_ANS_CAPACITY, err) < 0)
		return -1;
	if (out != NULL)
		*out = req.u.capacity_ans;
	return 0;
}

int mh_expand(struct mh_client *c, const struct mh_req_expand *r, uint64_t *out_size,
              struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_EXPAND};
	struct mh_req_expand *q = &req.u.expand;

	if (COPY_ARG(q->volume_id, r->volume_id, "volume_id", err) < 0 ||
	    COPY_ARG(q->staging_path, r->staging_path, "staging_path", err) < 0 ||
	    COPY_ARG(q->fs_type, r->fs_type, "fs_type", err) < 0)
		return -1;
	q->flags = r->flags;
	if (mh_client_call(c, &req, MH_ANS_EXPAND, err) < 0)
		return -1;
	if (out_size != NULL)
		*out_size = req.u.size_ans.size_bytes;
	return 0;
}

int mh_stats(struct mh_client *c, const struct mh_req_stats *r, struct mh_ans_stats *out,
             struct mh_err *err)
{
	struct mh_msg req = {.type = MH_REQ_STATS};
	struct mh_req_stats *q = &req.u.stats;

	if (COPY_ARG(q->volume_id, r->volume_id, "volume_id", err) < 0 ||
	    COPY_ARG(q->path, r->path, "path", err) < 0)
		return -1;
	q->flags = r->flags;
	if (mh_client_call(c, &req, MH_ANS_STATS, err) < 0)
		return -1;
	if (out != NULL)
		*out = req.u.stats_ans;
	return 0;
}

int mh_list(struct mh_client *c, uint32_t what, const char *after, struct mh_ans_list *out,
            struct mh_err *err)
{
	struct mh_msg *req = calloc(1, sizeof(*req)); /* a big answer: not on the stack */
	int rc = -1;

	if (req == NULL)
		abort();
	req->type = MH_REQ_LIST;
	req->u.list.what = what;
	if (COPY_ARG(req->u.list.after, after, "after", err) == 0 &&
	    mh_client_call(c, req, MH_ANS_LIST, err) == 0) {
		*out = req->u.list_ans;
		rc = 0;
	}
	free(req);
	return rc;
}

int mh_dir(struct mh_client *c, uint16_t type, const struct mh_req_dir *q, struct mh_msg *ans,
           struct mh_err *err)
{
	struct mh_msg req = {.type = type};

	if ((type < MH_REQ_DIR_CREATE || type > MH_REQ_DIR_DELETE_SNAPSHOT || (type & 1) == 0) &&
	    type != MH_REQ_DIR_NODE) {
		mh_client_set_err(err, MH_E_REFUSED, 0, "not a directory-volume request");
		return -1;
	}
	req.u.dir = *q;
	if (mh_client_call(c, &req, (uint16_t)(type + 1), err) < 0)
		return -1;
	if (ans != NULL)
		*ans = req;
	return 0;
}
