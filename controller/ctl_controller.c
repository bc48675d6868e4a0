/*
 * Controller service: CreateVolume (empty, from a snapshot, from a volume);
 * DeleteVolume is ctl_delete.c, ValidateVolumeCapabilities and
 * ControllerGetCapabilities are ctl_capabilities.c.
 * Runs in rpcd, unprivileged. A volume is a sparse image the helper creates
 * (or copies) in its data directory; here we decide its id, size and file
 * system, record it in the store, and keep every call idempotent by name and
 * by id. Other Controller RPCs: ctl_publish.c, ctl_volume.c, ctl_list.c,
 * ctl_snapshot.c; the GroupController service: ctl_group.c.
 */
#include "ctl_cs.h"
#include "ctl_intent.h"
#include "mh_proto_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The size for a new volume: required_bytes, else the source's size, else
 * 1 GiB (or limit_bytes if smaller); never below the file system's minimum or
 * the source's size; rounded up to whole MiB; OUT_OF_RANGE if that exceeds
 * limit_bytes.
 */
static int pick_capacity(struct ctl_status *st, const Csi__V1__CapacityRange *r, const char *fs,
                         bool dir, int64_t source_bytes, int64_t *out)
{
	int64_t req = r ? r->required_bytes : 0, lim = r ? r->limit_bytes : 0;
	int64_t min = dir ? CTL_DIR_MIN_BYTES : ctl_min_volume_bytes(fs);
	if (req < 0 || lim < 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "capacity_range must not be negative");
	if (lim && req > lim)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "capacity_range.required_bytes %lld exceeds limit_bytes %lld",
		                (long long)req, (long long)lim);
	if (lim && source_bytes > lim)
		return ctl_fail(st, CTL_OUT_OF_RANGE,
		                "capacity_range.limit_bytes %lld is smaller than the source (%lld "
		                "bytes)",
		                (long long)lim, (long long)source_bytes);
	int64_t size = req ? req : source_bytes ? source_bytes : CTL_DEFAULT_VOLUME_BYTES;
	if (!req && lim && lim < size)
		size = lim;
	if (size < min)
		size = min;
	if (size < source_bytes)
		size = source_bytes;
	if (size > INT64_MAX - CTL_MiB)
		return ctl_fail(st, CTL_OUT_OF_RANGE, "capacity_range is too large");
	size = (size + CTL_MiB - 1) / CTL_MiB * CTL_MiB;
	if (lim && size > lim)
		return ctl_fail(
		    st, CTL_OUT_OF_RANGE,
		    "cannot honour limit_bytes %lld: the smallest %s volume is %lld bytes",
		    (long long)lim,
		    dir   ? STORE_KIND_DIRECTORY
		    : *fs ? fs
		          : "raw block",
		    (long long)size);
	*out = size;
	return CTL_OK;
}

/*
 * Node-local volumes: a topology requirement that does not name this node
 * cannot be satisfied here. RESOURCE_EXHAUSTED makes Kubernetes try another
 * node (spec: "Unable to provision in accessible_topology").
 */
static int check_topology(struct ctl *c, struct ctl_status *st,
                          const Csi__V1__TopologyRequirement *tr)
{
	if (!tr || (tr->n_requisite == 0 && tr->n_preferred == 0))
		return CTL_OK;
	Csi__V1__Topology **lists[2] = {tr->requisite, tr->preferred};
	const size_t counts[2] = {tr->n_requisite, tr->n_preferred};
	for (int l = 0; l < 2; l++) {
		for (size_t i = 0; i < counts[l]; i++) {
			const Csi__V1__Topology *t = lists[l][i];
			bool match = t->n_segments > 0;
			for (size_t s = 0; s < t->n_segments; s++) {
				if (strcmp(t->segments[s]->key, CTL_TOPOLOGY_KEY) != 0 ||
				    strcmp(t->segments[s]->value, c->cfg.node_id) != 0)
					match = false;
			}
			if (match)
				return CTL_OK;
		}
		if (counts[0] > 0)
			break; /* when requisite is given, preferred is a subset of it */
	}
	return ctl_fail(st, CTL_RESOURCE_EXHAUSTED,
	                "accessibility_requirements do not include node %s "
	                "(topology key " CTL_TOPOLOGY_KEY ")",
	                c->cfg.node_id);
}

/* What a CreateVolume request asks for, once checked. */
struct create_args {
	struct ctl_shape shape;
	struct ctl_vparams params;
	const char *fs_asked;        /* named by a capability or fsType, "" if neither */
	char source[MH_ID_MAX + 16]; /* "" or "snapshot:<id>" / "volume:<id>" */
	uint8_t source_kind;         /* 0, MH_SRC_SNAPSHOT or MH_SRC_VOLUME */
	const char *source_id;
	int64_t req, lim;
	/* A directory volume (params.dir): its name beneath params.base, and a source's name. */
	char dir_name[MH_DIRNAME_MAX + 1];
	char source_name[MH_DIRNAME_MAX + 1];
	bool shared; /* params.base is shared by every node (the helper's DIR_CAPACITY says) */
};

static int parse_source(struct ctl_status *st, const Csi__V1__VolumeContentSource *cs,
                        struct create_args *ca)
{
	if (!cs)
		return CTL_OK;
	if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT && cs->snapshot) {
		if (ctl_check_required(st, cs->snapshot->snapshot_id,
		                       "volume_content_source.snapshot.snapshot_id"))
			return st->code;
		ca->source_kind = MH_SRC_SNAPSHOT;
		ca->source_id = cs->snapshot->snapshot_id;
		if (!pol_snapshot_id_valid(ca->source_id))
			return ctl_fail(st, CTL_NOT_FOUND, "source snapshot %.80s does not exist",
			                ca->source_id);
		snprintf(ca->source, sizeof(ca->source), "snapshot:%s", ca->source_id);
		return CTL_OK;
	}
	if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME && cs->volume) {
		if (ctl_check_required(st, cs->volume->volume_id,
		                       "volume_content_source.volume.volume_id"))
			return st->code;
		ca->source_kind = MH_SRC_VOLUME;
		ca->source_id = cs->volume->volume_id;
		if (!pol_volume_id_valid(ca->source_id))
			return ctl_fail(st, CTL_NOT_FOUND, "source volume %.80s does not exist",
			                ca->source_id);
		snprintf(ca->source, sizeof(ca->source), "volume:%s", ca->source_id);
		return CTL_OK;
	}
	return ctl_fail(st, CTL_INVALID_ARGUMENT,
	                "volume_content_source must name a snapshot or a volume");
}

/* Everything that can be checked without the store or the helper (topology aside). */
static int check_create(struct ctl *c, struct ctl_status *st,
                        const Csi__V1__CreateVolumeRequest *req, struct ctl_arena *a,
                        struct create_args *ca)
{
	memset(ca, 0, sizeof(*ca));
	ca->req = req->capacity_range ? req->capacity_range->required_bytes : 0;
	ca->lim = req->capacity_range ? req->capacity_range->limit_bytes : 0;
	/* Multi-node modes only for a directory volume, once its base proves shared. */
	if (ctl_check_name(st, req->name, "name") ||
	    ctl_vparams_parse(st, CTL_KV(a, req, parameters), req->n_parameters,
	                      CTL_KV(a, req, mutable_parameters), req->n_mutable_parameters,
	                      &ca->params) ||
	    ctl_caps_shape(st, req->volume_capabilities, req->n_volume_capabilities,
	                   "volume_capabilities", ca->params.dir, &ca->shape))
		return st->code;
	if (ca->req < 0 || ca->lim < 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "capacity_range must not be negative");
	if (ca->lim && ca->req > ca->lim)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "capacity_range.required_bytes %lld exceeds limit_bytes %lld",
		                (long long)ca->req, (long long)ca->lim);
	ca->fs_asked = "";
	if (ca->params.dir) {
		/* A directory on the base's file system: mount access, nothing to format. */
		for (size_t i = 0; i < req->n_volume_capabilities; i++)
			if (ctl_dir_check_capability(st, req->volume_capabilities[i],
			                             "volume_capabilities", true))
				return st->code;
		if (ctl_vparams_dir_name(st, &ca->params, CTL_KV(a, req, parameters),
		                         req->n_parameters, req->name, ca->dir_name))
			return st->code;
	} else if (!ca->shape.block) {
		/* A raw block volume has no file system: fsType only concerns mounts. */
		const char *p = ca->params.fs_type;
		if (*ca->shape.fs && *p && strcmp(ca->shape.fs, p) != 0)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "parameters: " CTL_P_FS_TYPE
			                " %s disagrees with volume_capabilities (%s)",
			                p, ca->shape.fs);
		ca->fs_asked = *ca->shape.fs ? ca->shape.fs : p;
	}
	return parse_source(st, req->volume_content_source, ca);
}

/* An existing volume satisfies a repeated request only if nothing differs. */
static bool same_request(const struct store_volume *v, const struct create_args *ca)
{
	if (ca->req && v->capacity_bytes < ca->req)
		return false;
	if (ca->lim && v->capacity_bytes > ca->lim)
		return false;
	if (ca->params.dir != ctl_volume_is_dir(v) ||
	    (ca->params.dir && strcmp(ca->dir_name, v->dir_name) != 0))
		return false;
	/* A directory volume has no file system of its own ("" like raw block). */
	if (!ca->params.dir && ca->shape.block != (v->fs_type[0] == '\0'))
		return false;
	if (*ca->fs_asked && strcmp(ca->fs_asked, v->fs_type) != 0)
		return false;
	return strcmp(v->parameters, ca->params.canon) == 0 &&
	       strcmp(v->mutable_parameters, ca->params.mutable_canon) == 0 &&
	       strcmp(v->content_source, ca->source) == 0;
}

/*
 * The source's file system and size, or NOT_FOUND. A copy keeps its source's
 * file system (or lack of one), so the request may not ask for another.
 */
static int resolve_source(struct ctl *c, struct ctl_status *st, struct create_args *ca,
                          const char **fs, int64_t *bytes, struct store_volume **sv,
                          struct store_snapshot **ss)
{
	const char *src_fs, *src_kind, *src_base;
	int rc;
	if (ca->source_kind == MH_SRC_SNAPSHOT) {
		rc = store_snapshot_get(c->st, ca->source_id, ss);
		if (rc == STORE_NOTFOUND)
			return ctl_fail(st, CTL_NOT_FOUND, "source snapshot %s does not exist",
			                ca->source_id);
		if (rc != STORE_OK)
			return ctl_fail_store(st, "look up source snapshot", rc);
		src_fs = (*ss)->fs_type;
		*bytes = (*ss)->size_bytes;
		src_kind = (*ss)->kind;
		src_base = (*ss)->dir_base;
	} else {
		rc = ctl_volume_get(c, ca->source_id, sv);
		if (rc == STORE_NOTFOUND)
			return ctl_fail(st, CTL_NOT_FOUND, "source volume %s does not exist",
			                ca->source_id);
		if (rc != STORE_OK)
			return ctl_fail_store(st, "look up source volume", rc);
		src_fs = (*sv)->fs_type;
		*bytes = (*sv)->capacity_bytes;
		src_kind = (*sv)->kind;
		src_base = (*sv)->dir_base;
		snprintf(ca->source_name, sizeof(ca->source_name), "%s", (*sv)->dir_name);
	}
	bool src_dir = strcmp(src_kind, STORE_KIND_DIRECTORY) == 0;
	if (src_dir != ca->params.dir)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume_content_source %s is %s, the request asks for %s",
		                ca->source_id,
		                src_dir ? "a directory volume's" : "an image volume's",
		                ca->params.dir ? "a directory volume" : "an image volume");
	if (src_dir) {
		if (strcmp(src_base, ca->params.base) != 0)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "volume_content_source %s lives in base directory %s, not "
			                "in " CTL_P_BASE_DIR " %s: a copy is made within one base",
			                ca->source_id, src_base, ca->params.base);
		*fs = "";
		return CTL_OK;
	}
	if (ca->shape.block != (src_fs[0] == '\0'))
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume_content_source %s is %s, volume_capabilities ask for %s",
		                ca->source_id, src_fs[0] ? "a file system volume" : "raw block",
		                ca->shape.block ? "raw block" : "a file system");
	if (*ca->fs_asked && strcmp(ca->fs_asked, src_fs) != 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "volume_content_source %s holds %s, the request asks for %s",
		                ca->source_id, src_fs, ca->fs_asked);
	*fs = src_fs;
	return CTL_OK;
}

static Csi__V1__CreateVolumeResponse *create_response(struct ctl *c, struct ctl_arena *a,
                                                      const struct store_volume *v)
{
	Csi__V1__CreateVolumeResponse *resp = ctl_alloc(a, sizeof(*resp));
	csi__v1__create_volume_response__init(resp);
	resp->volume = ctl_volume_msg(c, a, v);
	return resp;
}

/*
 * The image of a new volume: empty, or a copy of its source. Done again by a
 * retry, it finds the first attempt's image (the helper's requests are
 * idempotent); one that differs (the first attempt asked for another size)
 * is not recorded anywhere, so it is removed and made again.
 */
static int make_image(struct ctl *c, struct ctl_status *st, const struct create_args *ca,
                      const char *id, int64_t size, bool again, uint64_t *real)
{
	struct mh_err e;
	for (int attempt = 0;; attempt++) {
		int rc;
		if (ca->source_kind) {
			struct mh_req_clone cl = {.source_kind = ca->source_kind,
			                          .size_bytes = (uint64_t)size};
			struct mh_ans_copy ans = {0};
			snprintf(cl.volume_id, sizeof(cl.volume_id), "%s", id);
			snprintf(cl.source_id, sizeof(cl.source_id), "%s", ca->source_id);
			rc = mh_clone(c->mh, &cl, &ans, &e);
			*real = ans.size_bytes;
		} else {
			rc = mh_create(c->mh, id, (uint64_t)size, real, &e);
		}
		if (rc == 0)
			return CTL_OK;
		if (!again || attempt > 0 || e.kind != MH_E_EXISTS || mh_delete(c->mh, id, &e) != 0)
			break;
	}
	return ctl_fail_mh(st,
	                   !ca->source_kind                     ? "create image"
	                   : ca->source_kind == MH_SRC_SNAPSHOT ? "restore snapshot"
	                                                        : "clone volume",
	                   &e);
}

/*
 * The directory of a new directory volume: empty, or a copy of its source in
 * the same base, with a quota of size where the base supports project
 * quotas. Done again by a retry, the helper finds its first attempt's
 * directory (same volume id and name); a directory that is not this
 * volume's (another volume's, a retained or archived one, a stranger's) is
 * EXISTS, and is never removed here.
 */
static int make_dir(struct ctl *c, struct ctl_status *st, const struct create_args *ca,
                    const char *id, int64_t size, struct mh_ans_dir *out)
{
	struct mh_req_dir q = {.size_bytes = (uint64_t)size, .source_kind = ca->source_kind};
	struct mh_msg ans = {0};
	struct mh_err e;
	snprintf(q.volume_id, sizeof(q.volume_id), "%s", id);
	snprintf(q.base, sizeof(q.base), "%s", ca->params.base);
	snprintf(q.name, sizeof(q.name), "%s", ca->dir_name);
	if (ca->source_kind) {
		snprintf(q.source_id, sizeof(q.source_id), "%s", ca->source_id);
		if (ca->source_kind == MH_SRC_VOLUME)
			snprintf(q.source_name, sizeof(q.source_name), "%s", ca->source_name);
	}
	if (mh_dir(c->mh, MH_REQ_DIR_CREATE, &q, &ans, &e) == 0) {
		*out = ans.u.dir_ans;
		return CTL_OK;
	}
	if (e.kind == MH_E_EXISTS)
		return ctl_fail(st, CTL_ALREADY_EXISTS,
		                "directory %s/%s already exists and is not a directory this driver "
		                "made for this volume (%s)",
		                ca->params.base, ca->dir_name, e.reason);
	return ctl_fail_mh(st, "create directory", &e);
}

/* Remove a new directory volume's directory again (nothing records it). 0 or -1. */
static int unmake_dir(struct ctl *c, const char *id, const char *base, const char *name)
{
	struct mh_req_dir q = {.mode = MH_DIR_DELETE};
	struct mh_err e;
	snprintf(q.volume_id, sizeof(q.volume_id), "%s", id);
	snprintf(q.base, sizeof(q.base), "%s", base);
	snprintf(q.name, sizeof(q.name), "%s", name);
	return mh_dir(c->mh, MH_REQ_DIR_DELETE, &q, NULL, &e);
}

/* A volume already under this name: the same request is answered with it, another refused. */
static int answer_existing(struct ctl *c, struct ctl_status *st, struct ctl_arena *a,
                           const Csi__V1__CreateVolumeRequest *req, const struct create_args *ca,
                           const struct store_volume *old, void **resp)
{
	struct ctl_status topo = {0};
	/* The volume is on this node: a requirement without it is incompatible too. */
	if (!same_request(old, ca) || (!ctl_volume_is_shared(old) &&
	                               check_topology(c, &topo, req->accessibility_requirements)))
		return ctl_fail(st, CTL_ALREADY_EXISTS,
		                "volume '%s' exists with a different capacity, access type, file "
		                "system, parameters, content source or topology",
		                req->name);
	*resp = create_response(c, a, old);
	st->code = CTL_OK;
	return CTL_OK;
}

/* The size is within expandLimitBytes, and fits the data directory (sparse images, counted). */
static int check_fits(struct ctl *c, struct ctl_status *st, const struct create_args *ca,
                      int64_t size)
{
	uint64_t avail = 0, largest = 0;
	const char *where = ca->params.dir ? "the base directory" : "the data directory";
	if (ca->params.expand_limit && ca->params.expand_limit < size)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                CTL_P_EXPAND_LIMIT " %lld is below the volume's size %lld",
		                (long long)ca->params.expand_limit, (long long)size);
	if (ctl_data_available(c, st, ca->params.dir ? ca->params.base : NULL, &avail, &largest,
	                       NULL))
		return st->code;
	/* Bigger than any volume may be (policy, file system): no retry can help. */
	if ((uint64_t)size > largest)
		return ctl_fail(st, CTL_OUT_OF_RANGE,
		                "node %s: the largest volume %s takes is %llu bytes, %lld asked",
		                c->cfg.node_id, where, (unsigned long long)largest,
		                (long long)size);
	if ((uint64_t)size > avail)
		return ctl_fail(st, CTL_RESOURCE_EXHAUSTED,
		                "node %s: %s has %llu bytes free, the volume needs %lld",
		                c->cfg.node_id, where, (unsigned long long)avail, (long long)size);
	return CTL_OK;
}

/*
 * Make the image and record the volume, under an intent. A first attempt that
 * did not finish (rpcd or the helper died, the answer was lost) left its
 * intent: this attempt completes that one, with the same volume id, instead of
 * making a second image.
 */
static int create_new(struct ctl *c, struct ctl_status *st, struct ctl_arena *a,
                      const Csi__V1__CreateVolumeRequest *req, const struct create_args *ca,
                      const char *fs, int64_t size, void **resp)
{
	char id[36];
	uint64_t real = 0;
	struct mh_ans_dir dir = {0};
	/* A directory volume's intent names its directory, for reconciliation. */
	char *detail = ca->params.dir
	                   ? ctl_dir_detail(ca->params.base, ca->dir_name, "source", ca->source)
	                   : strdup(ca->source);
	if (!detail)
		abort();
	int again = ctl_intent_resume(c, CTL_OP_CREATE, req->name, detail, id, sizeof(id));
	if (again < 0) {
		free(detail);
		return ctl_fail(st, CTL_UNAVAILABLE,
		                "an earlier attempt under this name cannot be undone yet");
	}
	if (!again)
		ctl_new_volume_id(id);
	int failed = !again && ctl_intent_begin(c, st, CTL_OP_CREATE, req->name, id, detail);
	free(detail);
	if (failed || (ca->params.dir ? make_dir(c, st, ca, id, size, &dir)
	                              : make_image(c, st, ca, id, size, again == 1, &real)))
		return st->code;
	if (ca->params.dir)
		real = dir.size_bytes;
	struct store_volume v = {
	    .id = id,
	    .name = (char *)req->name,
	    .capacity_bytes = (int64_t)real,
	    .fs_type = (char *)fs,
	    .parameters = ca->params.canon,
	    .content_source = (char *)ca->source,
	    .created_unix_ns = ctl_now_unix_ns(),
	    /* Nothing is ever formatted on a raw block volume. */
	    .mkfs_options = ca->shape.block ? "" : (char *)ca->params.mkfs_options,
	    /* A copy of an xfs image has its source's UUID: mount it with nouuid. */
	    .nouuid = ca->source_kind && strcmp(fs, "xfs") == 0,
	    .mutable_parameters = ca->params.mutable_canon,
	    .condition = "",
	    .kind = ca->params.dir ? STORE_KIND_DIRECTORY : STORE_KIND_IMAGE,
	    .dir_base = ca->params.dir ? (char *)ca->params.base : "",
	    .dir_name = (char *)ca->dir_name,
	    .on_delete = ca->params.dir ? (char *)ctl_dir_mode_name(ca->params.on_delete) : "",
	    .quota = dir.quota != 0,
	    .shared = ca->shared ? STORE_SHARED_MADE : STORE_SHARED_NO,
	};
	int rc = ctl_record_begin(c);
	if (rc == STORE_OK)
		rc = ctl_record_end(c, store_volume_put(c->st, &v), CTL_OP_CREATE, req->name);
	if (rc != STORE_OK) {
		/* Roll back so a retry starts clean; the image or directory is unused. */
		struct mh_err e;
		if ((ca->params.dir ? unmake_dir(c, id, ca->params.base, ca->dir_name)
		                    : mh_delete(c->mh, id, &e)) == 0)
			ctl_intent_end(c, CTL_OP_CREATE, req->name);
		return ctl_fail_store(st, "record volume", rc);
	}
	*resp = create_response(c, a, &v);
	st->code = CTL_OK;
	return CTL_OK;
}

/* No other volume has this directory (the store's unique index says the same, later). */
static int check_dir_free(struct ctl *c, struct ctl_status *st, const struct create_args *ca)
{
	struct store_volume *other = NULL;
	int rc = store_volume_get_by_directory(c->st, ca->params.base, ca->dir_name, &other);
	if (rc == STORE_OK)
		ctl_fail(st, CTL_ALREADY_EXISTS,
		         "directory %s/%s is already volume %s's (name '%.128s'): choose "
		         "another " CTL_P_PATH_PATTERN " or " CTL_P_BASE_DIR,
		         ca->params.base, ca->dir_name, other->id, other->name);
	else if (rc != STORE_NOTFOUND)
		ctl_fail_store(st, "look up directory", rc);
	store_volume_free(other);
	return rc == STORE_NOTFOUND ? (int)CTL_OK : (int)st->code;
}

/*
 * Whether the base is shared (the helper's policy says so, in DIR_CAPACITY);
 * a node-local one serves single-node access modes only.
 */
static int check_dir_shared(struct ctl *c, struct ctl_status *st,
                            const Csi__V1__CreateVolumeRequest *req, struct create_args *ca)
{
	uint64_t avail;
	if (ctl_data_available(c, st, ca->params.base, &avail, NULL, &ca->shared))
		return st->code;
	for (size_t i = 0; !ca->shared && i < req->n_volume_capabilities; i++)
		if (ctl_dir_check_capability(st, req->volume_capabilities[i], "volume_capabilities",
		                             false))
			return st->code;
	return CTL_OK;
}

int ctl_create_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                      struct ctl_status *st)
{
	const Csi__V1__CreateVolumeRequest *req = r;
	struct create_args ca;
	struct store_volume *old = NULL, *src_vol = NULL;
	struct store_snapshot *src_snap = NULL;
	char name_key[256] = "", dir_key[MH_PATH_MAX + MH_DIRNAME_MAX + 8] = "";
	const char *keys[3], *busy = NULL;
	size_t nkeys = 0;
	bool locked = false;
	int64_t size = 0, source_bytes = 0;
	const char *fs;
	int rc;

	if (check_create(c, st, req, a, &ca))
		goto out;
	/* The name, and the source so that it cannot be deleted while it is copied. */
	snprintf(name_key, sizeof(name_key), CTL_KEY_VOLUME_NAME "%s", req->name);
	keys[nkeys++] = name_key;
	if (ca.source_kind)
		keys[nkeys++] = ca.source_id;
	/* Two names may ask for one directory: one of them makes it, the other is refused. */
	if (ca.params.dir) {
		snprintf(dir_key, sizeof(dir_key), "dir:%s/%s", ca.params.base, ca.dir_name);
		keys[nkeys++] = dir_key;
	}
	if (!(locked = ctl_lock_keys(c, keys, nkeys, &busy))) {
		ctl_fail_busy(st, busy == name_key ? req->name : busy);
		goto out;
	}
	rc = store_volume_get_by_name(c->st, req->name, &old);
	if (rc == STORE_OK) {
		answer_existing(c, st, a, req, &ca, old, resp);
		goto out;
	} else if (rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up volume name", rc);
		goto out;
	}
	if (ca.params.dir && (check_dir_free(c, st, &ca) || check_dir_shared(c, st, req, &ca)))
		goto out;
	/* A volume on a shared base is reached from every node: no topology to meet. */
	if (!ca.shared && check_topology(c, st, req->accessibility_requirements))
		goto out;
	/* NOLINTNEXTLINE(clang-analyzer-core.NullDereference): check_create() set fs_asked */
	fs = ca.shape.block || ca.params.dir ? "" : *ca.fs_asked ? ca.fs_asked : "ext4";
	if (ca.source_kind && resolve_source(c, st, &ca, &fs, &source_bytes, &src_vol, &src_snap))
		goto out;
	if (pick_capacity(st, req->capacity_range, fs, ca.params.dir, source_bytes, &size) ||
	    check_fits(c, st, &ca, size))
		goto out;
	create_new(c, st, a, req, &ca, fs, size, resp);
out:
	if (locked)
		ctl_unlock_keys(c, keys, nkeys);
	store_volume_free(old);
	store_volume_free(src_vol);
	store_snapshot_free(src_snap);
	ctl_vparams_release(&ca.params);
	return st->code;
}
