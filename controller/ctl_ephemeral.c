/*
 * Ephemeral inline volumes: a volume that lives exactly as long as one pod.
 * NodePublishVolume with volume_context "csi.storage.k8s.io/ephemeral=true"
 * creates the image, formats and mounts it straight at the target path;
 * NodeUnpublishVolume unmounts it and deletes the image. Runs in rpcd,
 * unprivileged. The CO names the volume with its own id; we record it under a
 * name no CreateVolume can use (CTL_EPHEMERAL_PREFIX) and give the image one
 * of our ids, so the CO's id never reaches the helper.
 *
 * Volume attributes: "size" (e.g. "256Mi"; default 1Gi), "fsType" (ext4,
 * xfs or btrfs; default the capability's, else ext4).
 */
#include "ctl_int.h"
#include "ctl_intent.h"
#include "policy_all.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define EPHEMERAL_DEFAULT_SIZE (1LL << 30)
#define EPHEMERAL_MIN_SIZE     (16LL << 20)
#define EPHEMERAL_ID_MAX       128

bool ctl_is_ephemeral(const Csi__V1__NodePublishVolumeRequest *req)
{
	for (size_t i = 0; i < req->n_volume_context; i++) {
		if (strcmp(req->volume_context[i]->key, CTL_EPHEMERAL_KEY) == 0)
			return strcmp(req->volume_context[i]->value, "true") == 0;
	}
	return false;
}

static const char *context(const Csi__V1__NodePublishVolumeRequest *req, const char *key)
{
	for (size_t i = 0; i < req->n_volume_context; i++) {
		if (strcmp(req->volume_context[i]->key, key) == 0)
			return req->volume_context[i]->value;
	}
	return NULL;
}

/* Size and file system from the volume attributes; refuses anything unknown. */
static int attributes(const Csi__V1__NodePublishVolumeRequest *req, struct ctl_status *st,
                      int64_t *size, const char **fs)
{
	for (size_t i = 0; i < req->n_volume_context; i++) {
		const char *k = req->volume_context[i]->key;
		if (strcmp(k, "type") == 0 &&
		    strcmp(req->volume_context[i]->value, STORE_KIND_DIRECTORY) == 0)
			return ctl_fail(
			    st, CTL_INVALID_ARGUMENT,
			    "volume_context: directory volumes (type: directory) cannot be "
			    "ephemeral inline volumes");
		if (strcmp(k, "size") != 0 && strcmp(k, "fsType") != 0 &&
		    strncmp(k, "csi.storage.k8s.io/", 19) != 0)
			return ctl_fail(
			    st, CTL_INVALID_ARGUMENT,
			    "volume_context: unknown attribute '%.64s' for an ephemeral "
			    "volume",
			    k);
	}
	const char *sz = context(req, "size");
	*size = EPHEMERAL_DEFAULT_SIZE;
	if (sz && units_parse_size(sz, size) != 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume_context size '%.32s' is not a size (e.g. 256Mi, 1Gi)", sz);
	if (*size < EPHEMERAL_MIN_SIZE)
		*size = EPHEMERAL_MIN_SIZE;
	const char *cap_fs = ctl_cap_fs_type(req->volume_capability);
	*fs = context(req, "fsType");
	if (!*fs || !**fs)
		*fs = *cap_fs ? cap_fs : "ext4";
	if (!pol_fs_known(*fs))
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "fsType '%.16s' is not supported", *fs);
	if (*cap_fs && strcmp(cap_fs, *fs) != 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "fsType %s disagrees with volume_capability's %s", *fs, cap_fs);
	if (req->volume_capability->access_type_case !=
	    CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "ephemeral volumes are file system volumes (mount access)");
	return CTL_OK;
}

/* Create (if new), stage at the target, and record staging and publication. */
int ctl_ephemeral_publish(struct ctl *c, const Csi__V1__NodePublishVolumeRequest *req,
                          struct ctl_status *st)
{
	char name[EPHEMERAL_ID_MAX + 32], id[36];
	struct store_volume *v = NULL;
	int64_t size;
	const char *fs = "";
	bool created = false, intent = false;
	struct mh_err e;

	if (strlen(req->volume_id) > EPHEMERAL_ID_MAX)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "volume_id is longer than %d bytes",
		                EPHEMERAL_ID_MAX);
	if (attributes(req, st, &size, &fs))
		return st->code;
	if (!ctl_lock(c, req->volume_id))
		return ctl_fail(st, CTL_ABORTED, "an operation on volume %s is already in progress",
		                req->volume_id);
	snprintf(name, sizeof(name), CTL_EPHEMERAL_PREFIX "%s", req->volume_id);
	int rc = store_volume_get_by_name(c->st, name, &v);
	if (rc == STORE_OK) {
		struct store_staging *stg = NULL;
		if (store_staging_get(c->st, v->id, &stg) == STORE_OK &&
		    strcmp(stg->staging_path, req->target_path) != 0) {
			ctl_fail(st, CTL_ALREADY_EXISTS,
			         "ephemeral volume %s is already published at %s", req->volume_id,
			         stg->staging_path);
			store_staging_free(stg);
			goto out;
		}
		store_staging_free(stg);
		snprintf(id, sizeof(id), "%s", v->id);
		fs = v->fs_type;
	} else if (rc == STORE_NOTFOUND) {
		uint64_t real = 0;
		ctl_new_volume_id(id);
		/* A first attempt that did not finish is undone; this one is recorded first. */
		if (ctl_intent_settle_held(c, CTL_OP_EPHEMERAL, req->volume_id) != 0) {
			ctl_fail(st, CTL_UNAVAILABLE,
			         "an earlier attempt for this volume cannot be undone yet");
			goto out;
		}
		if (ctl_intent_begin(c, st, CTL_OP_EPHEMERAL, req->volume_id, id, req->target_path))
			goto out;
		intent = true;
		/* NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): attributes() set size */
		if (mh_create(c->mh, id, (uint64_t)size, &real, &e) != 0) {
			ctl_fail_mh(st, "create ephemeral image", &e);
			goto out;
		}
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		struct store_volume nv = {
		    .id = id,
		    .name = name,
		    .capacity_bytes = (int64_t)real,
		    .fs_type = (char *)fs,
		    .parameters = "",
		    .content_source = "",
		    .created_unix_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec,
		};
		if ((rc = store_volume_put(c->st, &nv)) != STORE_OK) {
			mh_delete(c->mh, id, &e);
			ctl_fail_store(st, "record ephemeral volume", rc);
			goto out;
		}
		created = true;
	} else {
		ctl_fail_store(st, "look up ephemeral volume", rc);
		goto out;
	}

	bool ro = req->readonly || ctl_mode_readonly(req->volume_capability);
	struct mh_req_stage ms = {.readonly = ro, .flags = MH_F_CREATE_DIR};
	snprintf(ms.volume_id, sizeof(ms.volume_id), "%s", id);
	snprintf(ms.staging_path, sizeof(ms.staging_path), "%s", req->target_path);
	snprintf(ms.fs_type, sizeof(ms.fs_type), "%s", fs);
	if (ctl_cap_mount_flags(st, req->volume_capability, ms.mount_flags, sizeof(ms.mount_flags)))
		goto undo;
	if (mh_stage(c->mh, &ms, &e) != 0) {
		ctl_fail_mh(st, "stage ephemeral volume", &e);
		goto undo;
	}
	struct store_staging s = {
	    .volume_id = id,
	    .staging_path = (char *)req->target_path,
	    .fs_type = (char *)fs,
	    .mount_flags = ms.mount_flags,
	    .access_type = 2,
	    .access_mode = (int)req->volume_capability->access_mode->mode,
	};
	rc = store_staging_put(c->st, &s);
	if (rc != STORE_OK && rc != STORE_EXISTS) {
		ctl_fail_store(st, "record ephemeral staging", rc);
		goto out;
	}
	if (intent)
		ctl_intent_end(c, CTL_OP_EPHEMERAL, req->volume_id);
	st->code = CTL_OK;
	goto out;
undo:
	/* A fresh volume that could not be mounted is removed again: nothing leaks. */
	if (created && mh_delete(c->mh, id, &e) == 0 && store_volume_delete(c->st, id) == STORE_OK)
		ctl_intent_end(c, CTL_OP_EPHEMERAL, req->volume_id);
out:
	ctl_unlock(c, req->volume_id);
	store_volume_free(v);
	return st->code;
}

/* Unmount at the target, remove the directory, delete the image and the record. */
int ctl_ephemeral_unpublish(struct ctl *c, const struct store_volume *v, const char *target,
                            struct ctl_status *st)
{
	struct mh_err e;
	struct store_staging *stg = NULL;
	int rc = store_staging_get(c->st, v->id, &stg);
	if (rc == STORE_OK && strcmp(stg->staging_path, target) != 0) {
		/* Not this target: nothing of this volume is here. */
		store_staging_free(stg);
		return st->code = CTL_OK;
	}
	store_staging_free(stg);
	/* Its subject is the CO's volume id, the key the request holds. */
	const char *co_id = v->name + strlen(CTL_EPHEMERAL_PREFIX);
	if (ctl_intent_begin(c, st, CTL_OP_EPHEMERAL_END, co_id, v->id, target))
		return st->code;
	if (mh_unstage_flags(c->mh, v->id, target, MH_F_REMOVE_DIR, &e) != 0)
		return ctl_fail_mh(st, "unstage ephemeral volume", &e);
	rc = store_staging_delete(c->st, v->id);
	if (rc != STORE_OK && rc != STORE_NOTFOUND)
		return ctl_fail_store(st, "forget ephemeral staging", rc);
	if (mh_delete(c->mh, v->id, &e) != 0)
		return ctl_fail_mh(st, "delete ephemeral image", &e);
	rc = store_volume_delete(c->st, v->id);
	if (rc != STORE_OK && rc != STORE_NOTFOUND)
		return ctl_fail_store(st, "forget ephemeral volume", rc);
	ctl_intent_end(c, CTL_OP_EPHEMERAL_END, co_id);
	return st->code = CTL_OK;
}
