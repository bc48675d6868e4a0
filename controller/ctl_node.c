/*
 * Node service: stage, unstage, publish, unpublish, capabilities and info.
 * Runs in rpcd, unprivileged. The store says what the CO asked for; the helper
 * does the mounts and is asked again even when the store says the work is
 * done, because its operations are idempotent and the kernel may have lost
 * the mounts (a reboot) while the store kept the intent.
 */
#include "ctl_int.h"

#include <stdio.h>
#include <string.h>

/* Common prologue: volume id present and well formed, volume known, lock held. */
static int enter(struct ctl *c, struct ctl_status *st, const char *volume_id,
                 struct store_volume **v)
{
	if (ctl_check_required(st, volume_id, "volume_id"))
		return st->code;
	if (!ctl_volume_id_valid(volume_id))
		return ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist", volume_id);
	int rc = store_volume_get(c->st, volume_id, v);
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "volume %s does not exist", volume_id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up volume", rc);
	if (!ctl_lock(c, volume_id)) {
		store_volume_free(*v);
		*v = NULL;
		return ctl_fail(st, CTL_ABORTED, "an operation on volume %s is already in progress",
		                volume_id);
	}
	return CTL_OK;
}

static void leave(struct ctl *c, const char *volume_id, struct store_volume *v)
{
	if (v) {
		ctl_unlock(c, volume_id);
		store_volume_free(v);
	}
}

static int access_mode(const Csi__V1__VolumeCapability *cap)
{
	return cap->access_mode ? (int)cap->access_mode->mode : 0;
}

int ctl_node_stage_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                          struct ctl_status *st)
{
	const Csi__V1__NodeStageVolumeRequest *req = r;
	struct store_volume *v = NULL;
	struct store_staging *old = NULL;
	char flags[MH_OPTS_MAX + 1];

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_path(st, req->staging_target_path, "staging_target_path") ||
	    ctl_check_capability(st, req->volume_capability, "volume_capability") ||
	    ctl_cap_mount_flags(st, req->volume_capability, flags, sizeof(flags)))
		return st->code;
	if (enter(c, st, req->volume_id, &v))
		return st->code;

	const char *fs = ctl_cap_fs_type(req->volume_capability);
	if (*fs && strcmp(fs, v->fs_type) != 0) {
		ctl_fail(st, CTL_INVALID_ARGUMENT,
		         "volume %s holds %s, volume_capability asks for %s", v->id, v->fs_type,
		         fs);
		goto out;
	}
	int mode = access_mode(req->volume_capability);
	int rc = store_staging_get(c->st, v->id, &old);
	if (rc == STORE_OK) {
		if (strcmp(old->staging_path, req->staging_target_path) != 0) {
			ctl_fail(st, CTL_FAILED_PRECONDITION, "volume %s is already staged at %s",
			         v->id, old->staging_path);
			goto out;
		}
		if (strcmp(old->mount_flags, flags) != 0 || old->access_mode != mode) {
			ctl_fail(st, CTL_ALREADY_EXISTS,
			         "volume %s is staged at %s with a different volume_capability",
			         v->id, old->staging_path);
			goto out;
		}
	} else if (rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up staging", rc);
		goto out;
	}

	struct mh_req_stage ms = {.readonly = ctl_mode_readonly(req->volume_capability)};
	snprintf(ms.volume_id, sizeof(ms.volume_id), "%s", v->id);
	snprintf(ms.staging_path, sizeof(ms.staging_path), "%s", req->staging_target_path);
	snprintf(ms.fs_type, sizeof(ms.fs_type), "%s", v->fs_type);
	snprintf(ms.mount_flags, sizeof(ms.mount_flags), "%s", flags);
	struct mh_err e;
	if (mh_stage(c->mh, &ms, &e) != 0) {
		ctl_fail_mh(st, "stage", &e);
		goto out;
	}
	if (!old) {
		struct store_staging s = {
		    .volume_id = v->id,
		    .staging_path = (char *)req->staging_target_path,
		    .fs_type = v->fs_type,
		    .mount_flags = flags,
		    .access_type = 2,
		    .access_mode = mode,
		};
		rc = store_staging_put(c->st, &s);
		if (rc != STORE_OK) {
			ctl_fail_store(st, "record staging", rc);
			goto out;
		}
	}
	Csi__V1__NodeStageVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_stage_volume_response__init(out);
	*resp = out;
	st->code = CTL_OK;
out:
	store_staging_free(old);
	leave(c, req->volume_id, v);
	return st->code;
}

int ctl_node_unstage_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                            struct ctl_status *st)
{
	const Csi__V1__NodeUnstageVolumeRequest *req = r;
	struct store_volume *v = NULL;
	size_t pubs = 0;

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_path(st, req->staging_target_path, "staging_target_path"))
		return st->code;
	if (enter(c, st, req->volume_id, &v))
		return st->code;
	int rc = store_publication_count(c->st, v->id, &pubs);
	if (rc != STORE_OK) {
		ctl_fail_store(st, "count publications", rc);
		goto out;
	}
	if (pubs > 0) {
		ctl_fail(st, CTL_FAILED_PRECONDITION,
		         "volume %s is still published at %zu targets; unpublish first", v->id,
		         pubs);
		goto out;
	}
	struct mh_err e;
	if (mh_unstage(c->mh, v->id, req->staging_target_path, &e) != 0) {
		ctl_fail_mh(st, "unstage", &e);
		goto out;
	}
	rc = store_staging_delete(c->st, v->id);
	if (rc != STORE_OK && rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "forget staging", rc);
		goto out;
	}
	Csi__V1__NodeUnstageVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_unstage_volume_response__init(out);
	*resp = out;
	st->code = CTL_OK;
out:
	leave(c, req->volume_id, v);
	return st->code;
}

int ctl_node_publish_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                            struct ctl_status *st)
{
	const Csi__V1__NodePublishVolumeRequest *req = r;
	struct store_volume *v = NULL;
	struct store_staging *stg = NULL;
	struct store_publication *old = NULL;
	char flags[MH_OPTS_MAX + 1];

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_path(st, req->staging_target_path, "staging_target_path") ||
	    ctl_check_path(st, req->target_path, "target_path") ||
	    ctl_check_capability(st, req->volume_capability, "volume_capability") ||
	    ctl_cap_mount_flags(st, req->volume_capability, flags, sizeof(flags)))
		return st->code;
	if (enter(c, st, req->volume_id, &v))
		return st->code;

	bool ro = req->readonly || ctl_mode_readonly(req->volume_capability);
	int mode = access_mode(req->volume_capability);
	int rc = store_staging_get(c->st, v->id, &stg);
	if (rc == STORE_NOTFOUND ||
	    (rc == STORE_OK && strcmp(stg->staging_path, req->staging_target_path) != 0)) {
		ctl_fail(st, CTL_FAILED_PRECONDITION, "volume %s is not staged at %s", v->id,
		         req->staging_target_path);
		goto out;
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "look up staging", rc);
		goto out;
	}
	rc = store_publication_get(c->st, v->id, req->target_path, &old);
	if (rc == STORE_OK) {
		if (old->readonly != ro || old->access_mode != mode ||
		    strcmp(old->mount_flags, flags) != 0) {
			ctl_fail(st, CTL_ALREADY_EXISTS,
			         "volume %s is published at %s with different arguments", v->id,
			         req->target_path);
			goto out;
		}
	} else if (rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up publication", rc);
		goto out;
	}

	struct mh_req_publish mp = {.readonly = ro};
	snprintf(mp.volume_id, sizeof(mp.volume_id), "%s", v->id);
	snprintf(mp.staging_path, sizeof(mp.staging_path), "%s", req->staging_target_path);
	snprintf(mp.target_path, sizeof(mp.target_path), "%s", req->target_path);
	struct mh_err e;
	if (mh_publish(c->mh, &mp, &e) != 0) {
		ctl_fail_mh(st, "publish", &e);
		goto out;
	}
	if (!old) {
		struct store_publication p = {
		    .volume_id = v->id,
		    .target_path = (char *)req->target_path,
		    .staging_path = (char *)req->staging_target_path,
		    .readonly = ro,
		    .access_type = 2,
		    .access_mode = mode,
		    .mount_flags = flags,
		};
		rc = store_publication_put(c->st, &p);
		if (rc != STORE_OK) {
			ctl_fail_store(st, "record publication", rc);
			goto out;
		}
	}
	Csi__V1__NodePublishVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_publish_volume_response__init(out);
	*resp = out;
	st->code = CTL_OK;
out:
	store_publication_free(old);
	store_staging_free(stg);
	leave(c, req->volume_id, v);
	return st->code;
}

int ctl_node_unpublish_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                              struct ctl_status *st)
{
	const Csi__V1__NodeUnpublishVolumeRequest *req = r;
	struct store_volume *v = NULL;

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_path(st, req->target_path, "target_path"))
		return st->code;
	if (enter(c, st, req->volume_id, &v))
		return st->code;
	struct mh_err e;
	if (mh_unpublish(c->mh, v->id, req->target_path, &e) != 0) {
		ctl_fail_mh(st, "unpublish", &e);
		goto out;
	}
	int rc = store_publication_delete(c->st, v->id, req->target_path);
	if (rc != STORE_OK && rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "forget publication", rc);
		goto out;
	}
	Csi__V1__NodeUnpublishVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_unpublish_volume_response__init(out);
	*resp = out;
	st->code = CTL_OK;
out:
	leave(c, req->volume_id, v);
	return st->code;
}

int ctl_node_get_capabilities(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                              struct ctl_status *st)
{
	static const Csi__V1__NodeServiceCapability__RPC__Type types[] = {
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
	};
	Csi__V1__NodeGetCapabilitiesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_get_capabilities_response__init(out);
	out->n_capabilities = sizeof(types) / sizeof(types[0]);
	out->capabilities = ctl_alloc(a, out->n_capabilities * sizeof(*out->capabilities));
	for (size_t i = 0; i < out->n_capabilities; i++) {
		Csi__V1__NodeServiceCapability *cap = ctl_alloc(a, sizeof(*cap));
		csi__v1__node_service_capability__init(cap);
		Csi__V1__NodeServiceCapability__RPC *rpc = ctl_alloc(a, sizeof(*rpc));
		csi__v1__node_service_capability__rpc__init(rpc);
		rpc->type = types[i];
		cap->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		cap->rpc = rpc;
		out->capabilities[i] = cap;
	}
	*resp = out;
	return st->code = CTL_OK;
}

int ctl_node_get_info(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                      struct ctl_status *st)
{
	Csi__V1__NodeGetInfoResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_get_info_response__init(out);
	out->node_id = ctl_strdup(a, c->cfg.node_id);
	out->max_volumes_per_node = c->cfg.max_volumes_per_node;
	out->accessible_topology = ctl_node_topology(c, a);
	*resp = out;
	return st->code = CTL_OK;
}
