/*
 * Node service: stage, unstage, publish and unpublish, for file system and raw
 * block volumes. Runs in rpcd, unprivileged. The store says what the CO asked
 * for; the helper does the mounts and is asked again even when the store says
 * the work is done, because its operations are idempotent and the kernel may
 * have lost the mounts (a reboot) while the store kept the intent.
 */
#include "ctl_cs.h"
#include "ctl_int.h"
#include "ctl_intent.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACCESS_BLOCK 1
#define ACCESS_MOUNT 2

/*
 * Common prologue: volume id present, volume known, lock held. An ephemeral
 * inline volume is only ever published (ctl_ephemeral.c) and unpublished
 * (ephemeral_ok): staging or publishing it as a persistent volume would leave
 * records that outlive its NodeUnpublishVolume.
 */
static int enter(struct ctl *c, struct ctl_status *st, const char *volume_id, bool ephemeral_ok,
                 struct store_volume **v)
{
	if (ctl_check_required(st, volume_id, "volume_id"))
		return st->code;
	if (ctl_volume_resolve(c, st, volume_id, v))
		return st->code;
	if (!ephemeral_ok && ctl_volume_is_ephemeral(*v)) {
		store_volume_free(*v);
		*v = NULL;
		return ctl_fail(st, CTL_FAILED_PRECONDITION,
		                "volume %.140s is an ephemeral inline volume: it is only published "
		                "and unpublished",
		                volume_id);
	}
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

/*
 * A new read-write publication of volume id with access mode `mode`: a
 * SINGLE_NODE_SINGLE_WRITER volume is published read-write at one target at
 * a time (spec: FAILED_PRECONDITION for the second), so it fails if it is
 * single-writer and any read-write publication exists, or any existing one
 * is single-writer. Read-only publications never count.
 */
static bool single_writer_taken(struct ctl *c, struct ctl_status *st, const char *id, int mode)
{
	const int snsw = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER;
	size_t n, single;
	int rc = store_publication_writers(c->st, id, snsw, &n, &single);
	if (rc != STORE_OK)
		ctl_fail_store(st, "look up publications", rc);
	else if (single > 0 || (mode == snsw && n > 0))
		ctl_fail(st, CTL_FAILED_PRECONDITION,
		         "volume %s is SINGLE_NODE_SINGLE_WRITER and already published read-write "
		         "at another target",
		         id);
	else
		return false;
	return true;
}

static bool cap_is_block(const Csi__V1__VolumeCapability *cap)
{
	return cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
}

/*
 * The capability must fit the volume: a mount needs a volume with a file
 * system of that type; raw block access works on any volume (it sees the image).
 */
static int check_cap_fits(struct ctl_status *st, const struct store_volume *v,
                          const Csi__V1__VolumeCapability *cap)
{
	if (ctl_volume_is_dir(v))
		return ctl_dir_check_capability(st, cap, "volume_capability",
		                                ctl_volume_is_shared(v));
	if (ctl_check_capability(st, cap, "volume_capability"))
		return st->code; /* an image: single-node access modes only */
	if (cap_is_block(cap))
		return CTL_OK;
	const char *fs = ctl_cap_fs_type(cap);
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): callers pass enter()'s volume */
	if (!v->fs_type[0])
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume %s is a raw block volume; it cannot be mounted", v->id);
	if (*fs && strcmp(fs, v->fs_type) != 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume %s holds %s, volume_capability asks for %s", v->id,
		                v->fs_type, fs);
	return CTL_OK;
}

/* volume_mount_group: a numeric gid (Kubernetes passes fsGroup this way). */
static int mount_group(struct ctl_status *st, const Csi__V1__VolumeCapability *cap, uint8_t *flags,
                       uint32_t *gid)
{
	if (cap_is_block(cap) || !cap->mount || !cap->mount->volume_mount_group ||
	    !cap->mount->volume_mount_group[0])
		return CTL_OK;
	const char *g = cap->mount->volume_mount_group;
	char *end;
	errno = 0;
	unsigned long n = strtoul(g, &end, 10);
	if (errno || *end || *g < '0' || *g > '9' || n == 0 || n > 0x7fffffffUL)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume_capability.mount.volume_mount_group must be a non-zero "
		                "numeric group id, not '%.40s'",
		                g);
	*flags |= MH_F_MOUNT_GROUP;
	*gid = (uint32_t)n;
	return CTL_OK;
}

void ctl_volume_mount_extras(const struct store_volume *v, struct mh_req_stage *ms)
{
	if (v->mkfs_options)
		snprintf(ms->mkfs_options, sizeof(ms->mkfs_options), "%s", v->mkfs_options);
	/*
	 * An xfs copy carries its source's UUID; xfs refuses to mount two file
	 * systems with one UUID unless told nouuid.
	 */
	if (v->nouuid && strcmp(v->fs_type, "xfs") == 0) {
		size_t n = strlen(ms->mount_flags);
		snprintf(ms->mount_flags + n, sizeof(ms->mount_flags) - n, "%snouuid",
		         n ? "," : "");
	}
}

/* A publication's intent: subject "<volume> <target>", detail "b|f <target>". */
static void publication_intent(const char *vid, const char *target, bool block,
                               char subject[MH_ID_MAX + MH_PATH_MAX + 2],
                               char detail[MH_PATH_MAX + 4])
{
	snprintf(subject, MH_ID_MAX + MH_PATH_MAX + 2, "%s %s", vid, target);
	snprintf(detail, MH_PATH_MAX + 4, "%c %s", block ? 'b' : 'f', target);
}

int ctl_node_stage_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                          struct ctl_status *st)
{
	const Csi__V1__NodeStageVolumeRequest *req = r;
	struct store_volume *v = NULL;
	struct store_staging *old = NULL;
	char flags[MH_OPTS_MAX + 1];

	/* Multi-node modes are checked against the volume (a shared base's only), below. */
	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_path(st, req->staging_target_path, "staging_target_path") ||
	    ctl_check_capability_modes(st, req->volume_capability, "volume_capability", true) ||
	    ctl_cap_mount_flags(st, req->volume_capability, flags, sizeof(flags)))
		return st->code;
	if (ctl_dir_adopt(c, st, req->volume_id, CTL_KV(a, req, volume_context),
	                  req->n_volume_context) ||
	    enter(c, st, req->volume_id, false, &v))
		return st->code;

	const Csi__V1__VolumeCapability *cap = req->volume_capability;
	struct mh_req_stage ms = {.readonly = ctl_mode_readonly(cap)};
	if (check_cap_fits(st, v, cap) || mount_group(st, cap, &ms.flags, &ms.gid))
		goto out;
	int mode = access_mode(cap), type = cap_is_block(cap) ? ACCESS_BLOCK : ACCESS_MOUNT;
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): enter() sets v on CTL_OK */
	int rc = store_staging_get(c->st, v->id, &old);
	if (rc == STORE_OK) {
		if (strcmp(old->staging_path, req->staging_target_path) != 0) {
			ctl_fail(st, CTL_FAILED_PRECONDITION, "volume %s is already staged at %s",
			         v->id, old->staging_path);
			goto out;
		}
		if (strcmp(old->mount_flags, flags) != 0 || old->access_mode != mode ||
		    old->access_type != type) {
			ctl_fail(st, CTL_ALREADY_EXISTS,
			         "volume %s is staged at %s with a different volume_capability",
			         v->id, old->staging_path);
			goto out;
		}
	} else if (rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up staging", rc);
		goto out;
	}

	snprintf(ms.volume_id, sizeof(ms.volume_id), "%s", v->id);
	snprintf(ms.staging_path, sizeof(ms.staging_path), "%s", req->staging_target_path);
	if (type == ACCESS_BLOCK) {
		ms.flags |= MH_F_BLOCK;
	} else {
		snprintf(ms.fs_type, sizeof(ms.fs_type), "%s", v->fs_type);
		snprintf(ms.mount_flags, sizeof(ms.mount_flags), "%s", flags);
		ctl_volume_mount_extras(v, &ms);
	}
	struct mh_err e;
	char detail[MH_PATH_MAX + 4];
	snprintf(detail, sizeof(detail), "%c %s", type == ACCESS_BLOCK ? 'b' : 'f',
	         req->staging_target_path);
	/*
	 * A directory volume is bound straight from its directory at publish:
	 * nothing is mounted at the staging path, only the staging is recorded.
	 */
	bool dir = ctl_volume_is_dir(v);
	if (!old && !dir && ctl_intent_begin(c, st, CTL_OP_STAGE, v->id, v->id, detail))
		goto out;
	if (!dir && mh_stage(c->mh, &ms, &e) != 0) {
		ctl_fail_mh(st, "stage", &e);
		goto out;
	}
	if (!old) {
		struct store_staging s = {
		    .volume_id = v->id,
		    .staging_path = (char *)req->staging_target_path,
		    .fs_type = v->fs_type,
		    .mount_flags = flags,
		    .access_type = type,
		    .access_mode = mode,
		    .mount_group = (int64_t)ms.gid,
		};
		rc = ctl_record_begin(c);
		if (rc == STORE_OK)
			rc = ctl_record_end(c, store_staging_put(c->st, &s),
			                    dir ? NULL : CTL_OP_STAGE, v->id);
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
	if (st->code != CTL_OK)
		ctl_dir_forget(c, v); /* adopted for this request: nothing of it is here */
	store_staging_free(old);
	leave(c, req->volume_id, v);
	return st->code;
}

int ctl_node_unstage_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                            struct ctl_status *st)
{
	const Csi__V1__NodeUnstageVolumeRequest *req = r;
	struct store_volume *v = NULL;
	struct store_staging *stg = NULL;
	size_t pubs = 0;

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_path(st, req->staging_target_path, "staging_target_path"))
		return st->code;
	if (enter(c, st, req->volume_id, false, &v))
		return st->code;
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): enter() sets v on CTL_OK */
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
	rc = store_staging_get(c->st, v->id, &stg);
	if (rc != STORE_OK && rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up staging", rc);
		goto out;
	}
	uint8_t fl = stg && stg->access_type == ACCESS_BLOCK ? MH_F_BLOCK : 0;
	struct mh_err e;
	char detail[MH_PATH_MAX + 4];
	bool dir = ctl_volume_is_dir(v); /* nothing is mounted at a directory volume's staging */
	snprintf(detail, sizeof(detail), "%c %s", fl ? 'b' : 'f', req->staging_target_path);
	if (stg && !dir && ctl_intent_begin(c, st, CTL_OP_UNSTAGE, v->id, v->id, detail))
		goto out;
	if (!dir && mh_unstage_flags(c->mh, v->id, req->staging_target_path, fl, &e) != 0) {
		ctl_fail_mh(st, "unstage", &e);
		goto out;
	}
	rc = ctl_record_begin(c);
	if (rc == STORE_OK) {
		rc = store_staging_delete(c->st, v->id);
		rc = ctl_record_end(c, rc == STORE_NOTFOUND ? STORE_OK : rc,
		                    stg && !dir ? CTL_OP_UNSTAGE : NULL, v->id);
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "forget staging", rc);
		goto out;
	}
	ctl_dir_forget(c, v); /* made elsewhere on a shared base: nothing of it left here */
	Csi__V1__NodeUnstageVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_unstage_volume_response__init(out);
	*resp = out;
	st->code = CTL_OK;
out:
	store_staging_free(stg);
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
	bool eph = ctl_is_ephemeral(req);

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    (!eph && ctl_check_path(st, req->staging_target_path, "staging_target_path")) ||
	    ctl_check_path(st, req->target_path, "target_path") ||
	    ctl_check_capability_modes(st, req->volume_capability, "volume_capability", !eph) ||
	    ctl_cap_mount_flags(st, req->volume_capability, flags, sizeof(flags)))
		return st->code;
	if (eph) {
		if (ctl_ephemeral_publish(c, req, st) == CTL_OK) {
			Csi__V1__NodePublishVolumeResponse *out = ctl_alloc(a, sizeof(*out));
			csi__v1__node_publish_volume_response__init(out);
			*resp = out;
		}
		return st->code;
	}
	if (ctl_dir_adopt(c, st, req->volume_id, CTL_KV(a, req, volume_context),
	                  req->n_volume_context) ||
	    enter(c, st, req->volume_id, false, &v))
		return st->code;

	const Csi__V1__VolumeCapability *cap = req->volume_capability;
	bool ro = req->readonly || ctl_mode_readonly(cap);
	int mode = access_mode(cap), type = cap_is_block(cap) ? ACCESS_BLOCK : ACCESS_MOUNT;
	if (check_cap_fits(st, v, cap))
		goto out;
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): enter() sets v on CTL_OK */
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
	if (stg->access_type != type) {
		ctl_fail(st, CTL_FAILED_PRECONDITION, "volume %s is staged for %s access", v->id,
		         stg->access_type == ACCESS_BLOCK ? "block" : "mount");
		goto out;
	}
	rc = store_publication_get(c->st, v->id, req->target_path, &old);
	if (rc == STORE_OK) {
		if (old->readonly != ro || old->access_mode != mode || old->access_type != type ||
		    strcmp(old->mount_flags, flags) != 0) {
			ctl_fail(st, CTL_ALREADY_EXISTS,
			         "volume %s is published at %s with different arguments", v->id,
			         req->target_path);
			goto out;
		}
	} else if (rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up publication", rc);
		goto out;
	} else if (!ro && single_writer_taken(c, st, v->id, mode)) {
		goto out;
	}

	struct mh_req_publish mp = {.readonly = ro, .flags = type == ACCESS_BLOCK ? MH_F_BLOCK : 0};
	snprintf(mp.volume_id, sizeof(mp.volume_id), "%s", v->id);
	snprintf(mp.staging_path, sizeof(mp.staging_path), "%s", req->staging_target_path);
	snprintf(mp.target_path, sizeof(mp.target_path), "%s", req->target_path);
	struct mh_err e;
	char subject[MH_ID_MAX + MH_PATH_MAX + 2], detail[MH_PATH_MAX + 4];
	bool dir = ctl_volume_is_dir(v);
	uint8_t gflags = 0;
	uint32_t gid = 0;
	if (dir && mount_group(st, cap, &gflags, &gid))
		goto out;
	publication_intent(v->id, req->target_path, type == ACCESS_BLOCK, subject, detail);
	if (!old && ctl_intent_begin(c, st, CTL_OP_PUBLISH, subject, v->id, detail))
		goto out;
	/* A directory volume: its directory is bound onto the target (DIR_PUBLISH). */
	if (dir ? ctl_dir_publish(c, v, req->target_path, ro, gid, mode, &e) != 0
	        : mh_publish(c->mh, &mp, &e) != 0) {
		ctl_fail_mh(st, "publish", &e);
		goto out;
	}
	if (!old) {
		struct store_publication p = {
		    .volume_id = v->id,
		    .target_path = (char *)req->target_path,
		    .staging_path = (char *)req->staging_target_path,
		    .readonly = ro,
		    .access_type = type,
		    .access_mode = mode,
		    .mount_flags = flags,
		};
		rc = ctl_record_begin(c);
		if (rc == STORE_OK)
			rc = ctl_record_end(c, store_publication_put(c->st, &p), CTL_OP_PUBLISH,
			                    subject);
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
	if (st->code != CTL_OK)
		ctl_dir_forget(c, v); /* adopted for this request: nothing of it is here */
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
	if (enter(c, st, req->volume_id, true, &v))
		return st->code;
	if (ctl_volume_is_ephemeral(v)) {
		if (ctl_ephemeral_unpublish(c, v, req->target_path, st))
			goto out;
	} else {
		struct mh_err e;
		struct store_publication *p = NULL;
		char subject[MH_ID_MAX + MH_PATH_MAX + 2], detail[MH_PATH_MAX + 4];
		/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): enter() sets v on CTL_OK */
		bool known = store_publication_get(c->st, v->id, req->target_path, &p) == STORE_OK;
		publication_intent(v->id, req->target_path, known && p->access_type == ACCESS_BLOCK,
		                   subject, detail);
		store_publication_free(p);
		if (known && ctl_intent_begin(c, st, CTL_OP_UNPUBLISH, subject, v->id, detail))
			goto out;
		if ((ctl_volume_is_dir(v)
		         ? ctl_dir_unpublish(c, v, req->target_path, &e)
		         : mh_unpublish(c->mh, v->id, req->target_path, &e)) != 0) {
			ctl_fail_mh(st, "unpublish", &e);
			goto out;
		}
		int rc = ctl_record_begin(c);
		if (rc == STORE_OK) {
			rc = store_publication_delete(c->st, v->id, req->target_path);
			rc = ctl_record_end(c, rc == STORE_NOTFOUND ? STORE_OK : rc,
			                    known ? CTL_OP_UNPUBLISH : NULL, subject);
		}
		if (rc != STORE_OK) {
			ctl_fail_store(st, "forget publication", rc);
			goto out;
		}
		ctl_dir_forget(c, v);
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
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_MOUNT_GROUP,
	};
	Csi__V1__NodeGetCapabilitiesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__node_get_capabilities_response__init(out);
	out->n_capabilities = sizeof(types) / sizeof(types[0]);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
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
