/*
 * Controller service: ControllerExpandVolume, ControllerModifyVolume,
 * ControllerGetVolume and GetCapacity. Runs in rpcd, unprivileged.
 *
 * Expansion grows the image through the helper (mh_resize, which also
 * refreshes an attached loop device); the file system is grown on the node
 * (NodeExpandVolume), so node_expansion_required is true for mount volumes
 * and false for raw block volumes, whose loop device the resize refreshed.
 * The one mutable parameter, expandLimitBytes, is a ceiling that
 * ControllerExpandVolume honours. Capacity is the data directory's real free
 * space, on this node's topology segment only.
 */
#include "ctl_cs.h"
#include "ctl_intent.h"
#include "mh_proto_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The volume a request names, or NOT_FOUND (a malformed id names none). */
static int find_volume(struct ctl *c, struct ctl_status *st, const char *id,
                       struct store_volume **v)
{
	int rc = ctl_volume_get(c, id, v);
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist", id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up volume", rc);
	return CTL_OK;
}

/* The effective expandLimitBytes of a volume: mutable parameters win. */
static int64_t expand_limit(const struct store_volume *v)
{
	char buf[64];
	int64_t n = 0;
	struct ctl_status ignore = {0};
	if (ctl_canon_get(v->mutable_parameters, CTL_P_EXPAND_LIMIT, buf, sizeof(buf)) ||
	    ctl_canon_get(v->parameters, CTL_P_EXPAND_LIMIT, buf, sizeof(buf)))
		ctl_parse_expand_limit(&ignore, buf, &n);
	return n;
}

int ctl_volume_grow(struct ctl *c, const struct store_volume *v, uint64_t bytes, uint64_t *real,
                    struct mh_err *e)
{
	if (!ctl_volume_is_dir(v))
		return mh_resize(c->mh, v->id, bytes, real, e);
	struct mh_req_dir q;
	struct mh_msg ans = {0};
	ctl_dir_req(v, &q);
	q.size_bytes = bytes;
	if (mh_dir(c->mh, MH_REQ_DIR_EXPAND, &q, &ans, e) != 0)
		return -1;
	*real = ans.u.dir_ans.size_bytes;
	return 0;
}

int ctl_controller_expand_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                 struct ctl_status *st)
{
	const Csi__V1__ControllerExpandVolumeRequest *req = r;
	const Csi__V1__CapacityRange *cr = req->capacity_range;
	struct store_volume *v = NULL;
	char why[CTL_MSG_MAX];
	bool locked = false;

	if (ctl_check_required(st, req->volume_id, "volume_id"))
		return st->code;
	if (!cr || (cr->required_bytes == 0 && cr->limit_bytes == 0))
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "capacity_range is required");
	if (cr->required_bytes < 0 || cr->limit_bytes < 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "capacity_range must not be negative");
	if (cr->limit_bytes && cr->required_bytes > cr->limit_bytes)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "capacity_range.required_bytes %lld exceeds limit_bytes %lld",
		                (long long)cr->required_bytes, (long long)cr->limit_bytes);
	if (req->volume_capability &&
	    ctl_cap_wellformed(st, req->volume_capability, "volume_capability"))
		return st->code;
	/* Lock, then read: what was read stays true until the lock is released. */
	if (!pol_volume_id_valid(req->volume_id))
		return ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist", req->volume_id);
	if (!(locked = ctl_lock(c, req->volume_id)))
		return ctl_fail_busy(st, req->volume_id);
	if (find_volume(c, st, req->volume_id, &v))
		goto out;
	if (req->volume_capability &&
	    !ctl_cap_fits_volume(req->volume_capability, v, why, sizeof(why))) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "volume_capability: %s", why);
		goto out;
	}

	int64_t want = cr->required_bytes ? cr->required_bytes : cr->limit_bytes;
	if (want > INT64_MAX - CTL_MiB) {
		ctl_fail(st, CTL_OUT_OF_RANGE, "capacity_range is too large");
		goto out;
	}
	want = (want + CTL_MiB - 1) / CTL_MiB * CTL_MiB;
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): find_volume() sets v on CTL_OK */
	int64_t size = v->capacity_bytes;
	if (size >= want) {
		/* Already large enough: OK, unless it exceeds the limit (images never shrink). */
		if (cr->limit_bytes && size > cr->limit_bytes) {
			ctl_fail(st, CTL_OUT_OF_RANGE,
			         "volume %s is %lld bytes, above limit_bytes %lld: volumes do not "
			         "shrink",
			         v->id, (long long)size, (long long)cr->limit_bytes);
			goto out;
		}
	} else {
		int64_t ceiling = expand_limit(v);
		if (cr->limit_bytes && want > cr->limit_bytes) {
			ctl_fail(st, CTL_OUT_OF_RANGE,
			         "cannot honour limit_bytes %lld: sizes are whole MiB",
			         (long long)cr->limit_bytes);
			goto out;
		}
		if (ceiling && want > ceiling) {
			ctl_fail(st, CTL_OUT_OF_RANGE,
			         "volume %s may not grow beyond " CTL_P_EXPAND_LIMIT " %lld bytes",
			         v->id, (long long)ceiling);
			goto out;
		}
		uint64_t avail = 0, max = 0;
		bool dir = ctl_volume_is_dir(v);
		if (ctl_data_available(c, st, dir ? v->dir_base : NULL, &avail, &max, NULL))
			goto out;
		if (max && (uint64_t)want > max) {
			ctl_fail(st, CTL_OUT_OF_RANGE,
			         "node %s: a volume can hold at most %llu bytes here (%s), %lld "
			         "asked",
			         c->cfg.node_id, (unsigned long long)max,
			         dir ? "the base directory's largest quota"
			             : "the data directory's largest file",
			         (long long)want);
			goto out;
		}
		if ((uint64_t)(want - size) > avail) {
			ctl_fail(
			    st, CTL_RESOURCE_EXHAUSTED,
			    "node %s: the %s directory has %llu bytes free, growing needs %lld",
			    c->cfg.node_id, dir ? "base" : "data", (unsigned long long)avail,
			    (long long)(want - size));
			goto out;
		}
		uint64_t real = 0;
		struct mh_err e;
		char bytes[24];
		snprintf(bytes, sizeof(bytes), "%lld", (long long)want);
		if (ctl_intent_begin(c, st, CTL_OP_EXPAND, v->id, v->id, bytes))
			goto out;
		if (ctl_volume_grow(c, v, (uint64_t)want, &real, &e) != 0) {
			ctl_fail_mh(st, dir ? "raise the directory's quota" : "resize image", &e);
			goto out;
		}
		v->capacity_bytes = (int64_t)real;
		int rc = ctl_record_begin(c);
		if (rc == STORE_OK)
			rc = ctl_record_end(c, store_volume_update(c->st, v), CTL_OP_EXPAND, v->id);
		if (rc != STORE_OK) {
			ctl_fail_store(st, "record new capacity", rc);
			goto out;
		}
		size = v->capacity_bytes;
	}
	Csi__V1__ControllerExpandVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__controller_expand_volume_response__init(out);
	out->capacity_bytes = size;
	/*
	 * A file system must be grown on the node; a raw block volume is ready as
	 * it is, and so is a directory volume (its quota is all there is).
	 */
	out->node_expansion_required = v->fs_type[0] != '\0' && !ctl_volume_is_dir(v);
	*resp = out;
	st->code = CTL_OK;
out:
	if (locked)
		ctl_unlock(c, req->volume_id);
	store_volume_free(v);
	return st->code;
}

/*
 * Only keys given are changed (spec). expandLimitBytes may be set to any size
 * not below the volume's current capacity, or to 0 (no limit).
 */
int ctl_controller_modify_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                 struct ctl_status *st)
{
	static const char *const mutable_known[] = {CTL_P_EXPAND_LIMIT, NULL};
	const Csi__V1__ControllerModifyVolumeRequest *req = r;
	struct store_volume *v = NULL;
	char *canon = NULL, *merged = NULL, value[64];
	bool locked = false;
	int64_t limit = 0;

	if (ctl_check_required(st, req->volume_id, "volume_id"))
		return st->code;
	if (req->n_mutable_parameters == 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "mutable_parameters is required");
	if (ctl_kv_canon(st, CTL_KV(a, req, mutable_parameters), req->n_mutable_parameters,
	                 mutable_known, "mutable_parameters", &canon))
		return st->code;
	bool has_limit = ctl_canon_get(canon, CTL_P_EXPAND_LIMIT, value, sizeof(value));
	if (!has_limit && strstr(canon, CTL_P_EXPAND_LIMIT "=")) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, CTL_P_EXPAND_LIMIT " is too long");
		goto out;
	}
	if (has_limit && ctl_parse_expand_limit(st, value, &limit))
		goto out;
	if (!pol_volume_id_valid(req->volume_id)) {
		ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist", req->volume_id);
		goto out;
	}
	if (!(locked = ctl_lock(c, req->volume_id))) {
		ctl_fail_busy(st, req->volume_id);
		goto out;
	}
	if (find_volume(c, st, req->volume_id, &v))
		goto out;
	if (!has_limit) { /* only csi.storage.k8s.io/ keys: nothing to change */
		st->code = CTL_OK;
		goto done;
	}
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): find_volume() sets v on CTL_OK */
	if (limit && limit < v->capacity_bytes) {
		ctl_fail(st, CTL_INVALID_ARGUMENT,
		         CTL_P_EXPAND_LIMIT " %lld is below volume %s's capacity %lld",
		         (long long)limit, v->id, (long long)v->capacity_bytes);
		goto out;
	}
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): find_volume() sets v on CTL_OK */
	merged = ctl_canon_set(v->mutable_parameters, CTL_P_EXPAND_LIMIT, value);
	if (strcmp(merged, v->mutable_parameters) != 0) {
		free(v->mutable_parameters);
		v->mutable_parameters = merged;
		merged = NULL;
		int rc = store_volume_update(c->st, v);
		if (rc != STORE_OK) {
			ctl_fail_store(st, "record mutable parameters", rc);
			goto out;
		}
	}
done:;
	Csi__V1__ControllerModifyVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__controller_modify_volume_response__init(out);
	*resp = out;
	st->code = CTL_OK;
out:
	if (locked)
		ctl_unlock(c, req->volume_id);
	store_volume_free(v);
	free(canon);
	free(merged);
	return st->code;
}

/*
 * The controller's view of a volume's health: its backing image must exist.
 * The helper is asked to grow the image to the size recorded (a no-op that
 * fails with NOT_FOUND when the image is gone); the finding is kept in the
 * store, which ListVolumes reports. If another operation holds the volume, or
 * the helper cannot answer, the last finding stands.
 */
static void refresh_condition(struct ctl *c, struct store_volume **vp)
{
	struct store_volume *v = NULL;
	struct mh_err e;
	struct mh_msg ans = {0};
	uint64_t real = 0;
	const char *found;

	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): *vp is find_volume()'s volume */
	if (!ctl_lock(c, (*vp)->id))
		return;
	/* Read again under the lock: an expansion may have finished meanwhile. */
	if (store_volume_get(c->st, (*vp)->id, &v) != STORE_OK)
		goto out;
	store_volume_free(*vp);
	*vp = v;
	if (ctl_volume_is_dir(v)) {
		/* The directory itself is measured (path ""): NOT_FOUND when it is gone. */
		struct mh_req_dir q;
		ctl_dir_req(v, &q);
		if (mh_dir(c->mh, MH_REQ_DIR_STATS, &q, &ans, &e) != 0)
			found = e.kind == MH_E_NOTFOUND
			            ? "the volume's directory is missing from its base directory"
			            : NULL;
		else if (!ans.u.stats_ans.abnormal)
			found = "";
		else
			found = ans.u.stats_ans.message[0] ? ans.u.stats_ans.message
			                                   : "the volume's directory is abnormal";
		if (!found)
			goto out;
	} else if (mh_resize(c->mh, v->id, (uint64_t)v->capacity_bytes, &real, &e) == 0) {
		found = "";
	} else if (e.kind == MH_E_NOTFOUND) {
		found = "the volume's backing image is missing from the data directory";
	} else {
		goto out;
	}
	if (strcmp(found, v->condition) != 0) {
		free(v->condition);
		v->condition = strdup(found);
		if (!v->condition)
			abort();
		store_volume_update(c->st, v);
	}
out:
	ctl_unlock(c, (*vp)->id);
}

int ctl_controller_get_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                              struct ctl_status *st)
{
	const Csi__V1__ControllerGetVolumeRequest *req = r;
	struct store_volume *v = NULL;

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    find_volume(c, st, req->volume_id, &v))
		return st->code;
	refresh_condition(c, &v);
	Csi__V1__ControllerGetVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__controller_get_volume_response__init(out);
	out->volume = ctl_volume_msg(c, a, v);
	Csi__V1__ControllerGetVolumeResponse__VolumeStatus *vs = ctl_alloc(a, sizeof(*vs));
	csi__v1__controller_get_volume_response__volume_status__init(vs);
	if (ctl_published_nodes(c, st, v->id, a, &vs->published_node_ids,
	                        &vs->n_published_node_ids))
		goto out;
	vs->volume_condition = ctl_condition_msg(a, v->condition);
	out->status = vs;
	*resp = out;
	st->code = CTL_OK;
out:
	store_volume_free(v);
	return st->code;
}

/* A topology names this node when every segment is this node's one segment. */
static bool topology_is_here(struct ctl *c, const Csi__V1__Topology *t)
{
	for (size_t i = 0; t && i < t->n_segments; i++) {
		if (strcmp(t->segments[i]->key, CTL_TOPOLOGY_KEY) != 0 ||
		    strcmp(t->segments[i]->value, c->cfg.node_id) != 0)
			return false;
	}
	return true;
}

/*
 * Free space for volumes that satisfy every capability and the parameters,
 * on this node's segment. Malformed input is INVALID_ARGUMENT; well-formed
 * capabilities this driver cannot honour (multi-node modes, other file
 * systems, block mixed with mount) have 0 bytes, as does any other segment.
 */
int ctl_get_capacity(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                     struct ctl_status *st)
{
	const Csi__V1__GetCapacityRequest *req = r;
	struct ctl_vparams p;
	struct ctl_shape shape = {.fs = ""};
	struct ctl_status why = {0};
	bool fits = true, shared = false;
	uint64_t avail = 0;

	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		if (ctl_cap_wellformed(st, req->volume_capabilities[i], "volume_capabilities"))
			return st->code;
	}
	if (ctl_vparams_parse(st, CTL_KV(a, req, parameters), req->n_parameters, NULL, 0, &p))
		return st->code;
	if (req->n_volume_capabilities &&
	    ctl_caps_shape(&why, req->volume_capabilities, req->n_volume_capabilities,
	                   "volume_capabilities", p.dir, &shape))
		fits = false;
	if (fits && !shape.block && *shape.fs && *p.fs_type && strcmp(shape.fs, p.fs_type) != 0)
		fits = false;
	const char *fs = shape.block ? "" : *shape.fs ? shape.fs : *p.fs_type ? p.fs_type : "ext4";
	int64_t min_bytes = p.dir ? CTL_DIR_MIN_BYTES : ctl_min_volume_bytes(fs);

	uint64_t largest = 0;
	if (fits && ctl_data_available(c, st, p.dir ? p.base : NULL, &avail, &largest, &shared)) {
		ctl_vparams_release(&p);
		return st->code;
	}
	/* A shared base is the same from every segment. */
	if (fits && !shared && !topology_is_here(c, req->accessible_topology))
		fits = false;
	/* A directory volume: mount access only, no file system named, one node unless shared. */
	for (size_t i = 0; fits && p.dir && i < req->n_volume_capabilities; i++)
		fits = ctl_dir_check_capability(&why, req->volume_capabilities[i],
		                                "volume_capabilities", shared) == CTL_OK;
	if (!fits)
		avail = 0;
	ctl_vparams_release(&p);
	Csi__V1__GetCapacityResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__get_capacity_response__init(out);
	out->available_capacity = avail > INT64_MAX ? INT64_MAX : (int64_t)avail;
	if (fits) {
		/* CreateVolume rounds up to whole MiB and needs that much free. */
		Google__Protobuf__Int64Value *max = ctl_alloc(a, sizeof(*max));
		google__protobuf__int64_value__init(max);
		uint64_t m = largest < avail ? largest : avail;
		max->value = (int64_t)(m > INT64_MAX ? INT64_MAX : m) / CTL_MiB * CTL_MiB;
		out->maximum_volume_size = max;
	}
	Google__Protobuf__Int64Value *min = ctl_alloc(a, sizeof(*min));
	google__protobuf__int64_value__init(min);
	min->value = min_bytes;
	out->minimum_volume_size = min;
	*resp = out;
	return st->code = CTL_OK;
}
