/*
 * Controller service: CreateSnapshot, DeleteSnapshot and GetSnapshot.
 * Runs in rpcd, unprivileged.
 *
 * A snapshot is a copy of a volume's image that the helper makes in its
 * data directory (a reflink where the file system can share extents, else a
 * sparse copy). It is cut when the helper answers, so ready_to_use is always
 * true, and it is independent of its source: it outlives the volume and
 * stays usable as a source for CreateVolume. Snapshot ids are "ss-" + 32
 * hex digits and never paths; the helper builds the file name itself.
 */
#include "ctl_cs.h"
#include "ctl_intent.h"
#include "mh_proto_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Cut the copy: the image's (SNAPSHOT), or the directory's into its base's
 * snapshot area (DIR_SNAPSHOT). A directory snapshot's size is the volume's
 * capacity, so a volume restored from it fits what it holds.
 */
static int cut(struct ctl *c, const struct store_volume *v, const char *id, struct mh_ans_copy *ans,
               struct mh_err *e)
{
	if (!ctl_volume_is_dir(v))
		return mh_snapshot(c->mh, id, v->id, ans, e);
	struct mh_req_dir q;
	ctl_dir_req(v, &q);
	snprintf(q.snapshot_id, sizeof(q.snapshot_id), "%s", id);
	if (mh_dir(c->mh, MH_REQ_DIR_SNAPSHOT, &q, NULL, e) != 0)
		return -1;
	ans->size_bytes = (uint64_t)v->capacity_bytes;
	return 0;
}

int ctl_snapshot_remove(struct ctl *c, const char *id, const char *base, struct mh_err *e)
{
	if (!base)
		return mh_delete_snapshot(c->mh, id, e);
	struct mh_req_dir q = {0};
	snprintf(q.snapshot_id, sizeof(q.snapshot_id), "%s", id);
	snprintf(q.base, sizeof(q.base), "%s", base);
	return mh_dir(c->mh, MH_REQ_DIR_DELETE_SNAPSHOT, &q, NULL, e);
}

static Csi__V1__CreateSnapshotResponse *create_response(struct ctl_arena *a,
                                                        const struct store_snapshot *s)
{
	Csi__V1__CreateSnapshotResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__create_snapshot_response__init(out);
	out->snapshot = ctl_snapshot_msg(a, s);
	return out;
}

int ctl_create_snapshot(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                        struct ctl_status *st)
{
	const Csi__V1__CreateSnapshotRequest *req = r;
	struct store_snapshot *old = NULL;
	struct store_volume *v = NULL;
	char *params = NULL, *detail = NULL, name_key[256];
	const char *keys[2], *busy = NULL;
	bool locked = false;
	int rc;

	/* No snapshot parameters of our own; the sidecars' metadata keys are ignored. */
	if (ctl_check_required(st, req->source_volume_id, "source_volume_id") ||
	    ctl_check_name(st, req->name, "name") ||
	    ctl_kv_canon(st, CTL_KV(a, req, parameters), req->n_parameters, NULL, "parameters",
	                 &params))
		goto out;
	snprintf(name_key, sizeof(name_key), CTL_KEY_SNAPSHOT_NAME "%s", req->name);
	keys[0] = name_key;
	keys[1] = req->source_volume_id;
	if (!(locked = ctl_lock_keys(c, keys, 2, &busy))) {
		ctl_fail_busy(st, busy == name_key ? req->name : busy);
		goto out;
	}

	/* Idempotent by name, even after the source volume is gone. */
	rc = store_snapshot_get_by_name(c->st, req->name, &old);
	if (rc == STORE_OK) {
		if (strcmp(old->source_volume_id, req->source_volume_id) != 0 ||
		    strcmp(old->parameters, params) != 0) {
			ctl_fail(st, CTL_ALREADY_EXISTS, "snapshot '%s' exists for volume %s%s",
			         req->name, old->source_volume_id,
			         strcmp(old->source_volume_id, req->source_volume_id) == 0
			             ? " with other parameters"
			             : "");
			goto out;
		}
		*resp = create_response(a, old);
		st->code = CTL_OK;
		goto out;
	} else if (rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up snapshot name", rc);
		goto out;
	}

	if ((rc = ctl_volume_get(c, req->source_volume_id, &v)) == STORE_NOTFOUND) {
		ctl_fail(st, CTL_NOT_FOUND, "source volume %.80s does not exist",
		         req->source_volume_id);
		goto out;
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "look up source volume", rc);
		goto out;
	}

	/*
	 * A first attempt that did not finish is completed, under its snapshot
	 * id. A directory volume's intent also names the base its copy lives in.
	 */
	char id[36];
	bool dir = ctl_volume_is_dir(v);
	detail = dir ? ctl_dir_detail(v->dir_base, "", "source", v->id) : strdup(v->id);
	if (!detail)
		abort();
	int again = ctl_intent_resume(c, CTL_OP_SNAPSHOT, req->name, detail, id, sizeof(id));
	if (again < 0) {
		ctl_fail(st, CTL_UNAVAILABLE,
		         "an earlier attempt under this name cannot be undone yet");
		goto out;
	}
	if (!again)
		ctl_new_snapshot_id(id);
	if (!again && ctl_intent_begin(c, st, CTL_OP_SNAPSHOT, req->name, id, detail))
		goto out;
	struct mh_ans_copy ans = {0};
	struct mh_err e;
	if (cut(c, v, id, &ans, &e) != 0) {
		ctl_fail_mh(st, "snapshot", &e);
		goto out;
	}
	struct store_snapshot s = {
	    .id = id,
	    .name = (char *)req->name,
	    .source_volume_id = v->id,
	    .size_bytes = (int64_t)ans.size_bytes,
	    .fs_type = v->fs_type,
	    .parameters = params,
	    .group_id = "",
	    .created_unix_ns = ctl_now_unix_ns(),
	    .kind = v->kind,
	    .dir_base = v->dir_base,
	};
	rc = ctl_record_begin(c);
	if (rc == STORE_OK)
		rc = ctl_record_end(c, store_snapshot_put(c->st, &s), CTL_OP_SNAPSHOT, req->name);
	if (rc != STORE_OK) {
		/* Nothing refers to the copy yet: remove it so a retry starts clean. */
		if (ctl_snapshot_remove(c, id, dir ? v->dir_base : NULL, &e) == 0)
			ctl_intent_end(c, CTL_OP_SNAPSHOT, req->name);
		ctl_fail_store(st, "record snapshot", rc);
		goto out;
	}
	*resp = create_response(a, &s);
	st->code = CTL_OK;
out:
	if (locked)
		ctl_unlock_keys(c, keys, 2);
	store_snapshot_free(old);
	store_volume_free(v);
	free(params);
	free(detail);
	return st->code;
}

int ctl_delete_snapshot(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                        struct ctl_status *st)
{
	const Csi__V1__DeleteSnapshotRequest *req = r;
	struct store_snapshot *s = NULL;
	bool locked = false;
	int rc;

	if (ctl_check_required(st, req->snapshot_id, "snapshot_id"))
		return st->code;
	Csi__V1__DeleteSnapshotResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__delete_snapshot_response__init(out);
	/* An id this driver could never have issued names no snapshot: already gone. */
	if (!pol_snapshot_id_valid(req->snapshot_id)) {
		*resp = out;
		return st->code = CTL_OK;
	}
	if (!(locked = ctl_lock(c, req->snapshot_id))) {
		ctl_fail_busy(st, req->snapshot_id);
		goto done;
	}
	rc = store_snapshot_get(c->st, req->snapshot_id, &s);
	if (rc == STORE_NOTFOUND) {
		*resp = out;
		st->code = CTL_OK;
		goto done;
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "look up snapshot", rc);
		goto done;
	}
	if (s->group_id[0]) {
		ctl_fail(st, CTL_INVALID_ARGUMENT,
		         "snapshot %s is part of group snapshot %s: delete the group "
		         "(DeleteVolumeGroupSnapshot)",
		         s->id, s->group_id);
		goto done;
	}
	/* Volumes restored from it are copies, not users: it is never in use. */
	struct mh_err e;
	bool dir = strcmp(s->kind, STORE_KIND_DIRECTORY) == 0;
	char *detail = dir ? ctl_dir_detail(s->dir_base, "", NULL, NULL) : strdup("");
	if (!detail)
		abort();
	int failed = ctl_intent_begin(c, st, CTL_OP_DELETE_SNAP, s->id, s->id, detail);
	free(detail);
	if (failed)
		goto done;
	if (ctl_snapshot_remove(c, s->id, dir ? s->dir_base : NULL, &e) != 0 &&
	    e.kind != MH_E_NOTFOUND) {
		ctl_fail_mh(st, "delete snapshot", &e);
		goto done;
	}
	rc = ctl_record_begin(c);
	if (rc == STORE_OK) {
		rc = store_snapshot_delete(c->st, s->id);
		rc = ctl_record_end(c, rc == STORE_NOTFOUND ? STORE_OK : rc, CTL_OP_DELETE_SNAP,
		                    s->id);
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "forget snapshot", rc);
		goto done;
	}
	*resp = out;
	st->code = CTL_OK;
done:
	if (locked)
		ctl_unlock(c, req->snapshot_id);
	store_snapshot_free(s);
	return st->code;
}

int ctl_get_snapshot(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                     struct ctl_status *st)
{
	const Csi__V1__GetSnapshotRequest *req = r;
	struct store_snapshot *s = NULL;

	if (ctl_check_required(st, req->snapshot_id, "snapshot_id"))
		return st->code;
	if (!pol_snapshot_id_valid(req->snapshot_id))
		return ctl_fail(st, CTL_NOT_FOUND, "snapshot %.80s does not exist",
		                req->snapshot_id);
	int rc = store_snapshot_get(c->st, req->snapshot_id, &s);
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "snapshot %s does not exist", req->snapshot_id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up snapshot", rc);
	Csi__V1__GetSnapshotResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__get_snapshot_response__init(out);
	out->snapshot = ctl_snapshot_msg(a, s);
	*resp = out;
	store_snapshot_free(s);
	return st->code = CTL_OK;
}
