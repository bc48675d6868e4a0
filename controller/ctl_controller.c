/*
 * Controller service: CreateVolume, DeleteVolume, ControllerGetCapabilities.
 * Runs in rpcd, unprivileged. A volume is a sparse image the helper creates in
 * its data directory; here we decide its id, size and file system, record it
 * in the store, and keep every call idempotent by name and by id.
 */
#include "ctl_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB                 (1024LL * 1024)
#define GiB                 (1024 * MiB)
#define DEFAULT_VOLUME_SIZE (1 * GiB)
#define MIN_VOLUME_SIZE     (16 * MiB)
#define NAME_MAX_BYTES      128
#define K8S_PARAM_PREFIX    "csi.storage.k8s.io/"

/* The spec bans control characters other than common white space in names. */
static int check_name(struct ctl_status *st, const char *name)
{
	if (ctl_check_required(st, name, "name"))
		return st->code;
	if (strlen(name) > NAME_MAX_BYTES)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "name is longer than %d bytes",
		                NAME_MAX_BYTES);
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		if ((*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') || *p == 0x7f)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "name contains a forbidden control character");
		/* U+0080..U+009F in UTF-8: 0xC2 0x80..0x9F */
		if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "name contains a forbidden control character");
	}
	return CTL_OK;
}

/* Size within [required, limit], rounded up to whole MiB, never below the minimum. */
static int pick_capacity(struct ctl_status *st, const Csi__V1__CapacityRange *r, int64_t *out)
{
	int64_t req = r ? r->required_bytes : 0, lim = r ? r->limit_bytes : 0;
	if (req < 0 || lim < 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "capacity_range must not be negative");
	if (lim && req > lim)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "capacity_range.required_bytes %lld exceeds limit_bytes %lld",
		                (long long)req, (long long)lim);
	int64_t size = req ? req : DEFAULT_VOLUME_SIZE;
	if (!req && lim && lim < size)
		size = lim;
	if (size < MIN_VOLUME_SIZE)
		size = MIN_VOLUME_SIZE;
	if (size > INT64_MAX - MiB)
		return ctl_fail(st, CTL_OUT_OF_RANGE, "capacity_range is too large");
	size = (size + MiB - 1) / MiB * MiB;
	if (lim && size > lim)
		return ctl_fail(st, CTL_OUT_OF_RANGE,
		                "cannot honour limit_bytes %lld: the smallest volume is %lld bytes",
		                (long long)lim, (long long)size);
	*out = size;
	return CTL_OK;
}

static int cmp_entry(const void *a, const void *b)
{
	const Csi__V1__CreateVolumeRequest__ParametersEntry *const *x = a, *const *y = b;
	return strcmp((*x)->key, (*y)->key);
}

/*
 * Parameters: keys the Kubernetes sidecars add (csi.storage.k8s.io/...) are
 * accepted and ignored; anything else is unknown to this version and refused,
 * so a typo in a StorageClass is reported rather than silently dropped. The
 * canonical form (sorted "k=v\n") is what idempotency compares.
 */
static int check_parameters(struct ctl_status *st, const Csi__V1__CreateVolumeRequest *req,
                            char **canon)
{
	size_t n = req->n_parameters, len = 1;
	Csi__V1__CreateVolumeRequest__ParametersEntry **sorted = calloc(n ? n : 1, sizeof(*sorted));
	if (!sorted)
		abort();
	if (n)
		memcpy(sorted, req->parameters, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_entry);
	for (size_t i = 0; i < n; i++) {
		if (strncmp(sorted[i]->key, K8S_PARAM_PREFIX, strlen(K8S_PARAM_PREFIX)) != 0) {
			ctl_fail(st, CTL_INVALID_ARGUMENT, "parameters: unknown key '%.64s'",
			         sorted[i]->key);
			free(sorted);
			return st->code;
		}
		len += strlen(sorted[i]->key) + strlen(sorted[i]->value) + 2;
	}
	char *s = malloc(len);
	if (!s)
		abort();
	s[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		/* Only our own keys affect the volume; the sidecars' metadata does not. */
		if (strncmp(sorted[i]->key, K8S_PARAM_PREFIX, strlen(K8S_PARAM_PREFIX)) == 0)
			continue;
		strcat(s, sorted[i]->key);
		strcat(s, "=");
		strcat(s, sorted[i]->value);
		strcat(s, "\n");
	}
	free(sorted);
	*canon = s;
	return CTL_OK;
}

/* All capabilities must agree on one file system; default ext4. */
static int pick_fs_type(struct ctl_status *st, const Csi__V1__CreateVolumeRequest *req,
                        const char **fs)
{
	*fs = "";
	if (req->n_volume_capabilities == 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "volume_capabilities is required");
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		if (ctl_check_capability(st, req->volume_capabilities[i], "volume_capabilities"))
			return st->code;
		const char *f = ctl_cap_fs_type(req->volume_capabilities[i]);
		if (**fs && *f && strcmp(*fs, f) != 0)
			return ctl_fail(st, CTL_INVALID_ARGUMENT,
			                "volume_capabilities ask for two file systems (%s, %s)",
			                *fs, f);
		if (*f)
			*fs = f;
	}
	if (!**fs)
		*fs = "ext4";
	return CTL_OK;
}

/*
 * Node-local volumes: a requisite topology that does not name this node cannot
 * be satisfied here. RESOURCE_EXHAUSTED makes Kubernetes try another node.
 */
static int check_topology(struct ctl *c, struct ctl_status *st,
                          const Csi__V1__TopologyRequirement *tr)
{
	if (!tr || (tr->n_requisite == 0 && tr->n_preferred == 0))
		return CTL_OK;
	Csi__V1__Topology **lists[2] = {tr->requisite, tr->preferred};
	size_t counts[2] = {tr->n_requisite, tr->n_preferred};
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

static Csi__V1__CreateVolumeResponse *volume_response(struct ctl *c, struct ctl_arena *a,
                                                      const struct store_volume *v)
{
	Csi__V1__CreateVolumeResponse *resp = ctl_alloc(a, sizeof(*resp));
	csi__v1__create_volume_response__init(resp);
	Csi__V1__Volume *vol = ctl_alloc(a, sizeof(*vol));
	csi__v1__volume__init(vol);
	vol->capacity_bytes = v->capacity_bytes;
	vol->volume_id = ctl_strdup(a, v->id);
	vol->n_accessible_topology = 1;
	vol->accessible_topology = ctl_alloc(a, sizeof(*vol->accessible_topology));
	vol->accessible_topology[0] = ctl_node_topology(c, a);
	resp->volume = vol;
	return resp;
}

/* An existing volume satisfies a repeated request only if nothing differs. */
static bool same_request(const struct store_volume *v, int64_t req_bytes, int64_t lim_bytes,
                         const char *fs, const char *params)
{
	if (req_bytes && v->capacity_bytes < req_bytes)
		return false;
	if (lim_bytes && v->capacity_bytes > lim_bytes)
		return false;
	return strcmp(v->fs_type, fs) == 0 && strcmp(v->parameters, params) == 0 &&
	       strcmp(v->content_source, "") == 0;
}

int ctl_create_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                      struct ctl_status *st)
{
	const Csi__V1__CreateVolumeRequest *req = r;
	const char *fs;
	char *params = NULL;
	int64_t size = 0;
	char key[NAME_MAX_BYTES + 8] = "";
	struct store_volume *old = NULL;
	bool locked = false;

	if (check_name(st, req->name) || pick_fs_type(st, req, &fs) ||
	    pick_capacity(st, req->capacity_range, &size) || check_parameters(st, req, &params))
		goto out;
	if (req->volume_content_source) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "volume_content_source is not supported yet");
		goto out;
	}
	if (check_topology(c, st, req->accessibility_requirements))
		goto out;

	snprintf(key, sizeof(key), "name:%s", req->name);
	if (!(locked = ctl_lock(c, key))) {
		ctl_fail(st, CTL_ABORTED, "an operation on volume name '%s' is already in progress",
		         req->name);
		goto out;
	}

	int rc = store_volume_get_by_name(c->st, req->name, &old);
	if (rc == STORE_OK) {
		int64_t rq = req->capacity_range ? req->capacity_range->required_bytes : 0;
		int64_t lm = req->capacity_range ? req->capacity_range->limit_bytes : 0;
		if (!same_request(old, rq, lm, fs, params)) {
			ctl_fail(st, CTL_ALREADY_EXISTS,
			         "volume '%s' exists with different capacity, file system or "
			         "parameters",
			         req->name);
			goto out;
		}
		*resp = volume_response(c, a, old);
		st->code = CTL_OK;
		goto out;
	} else if (rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up volume name", rc);
		goto out;
	}

	char id[36];
	ctl_new_volume_id(id);
	uint64_t real = 0;
	struct mh_err e;
	if (mh_create(c->mh, id, (uint64_t)size, &real, &e) != 0) {
		ctl_fail_mh(st, "create image", &e);
		goto out;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	struct store_volume v = {
	    .id = id,
	    .name = (char *)req->name,
	    .capacity_bytes = (int64_t)real,
	    .fs_type = (char *)fs,
	    .parameters = params,
	    .content_source = "",
	    .created_unix_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec,
	};
	rc = store_volume_put(c->st, &v);
	if (rc != STORE_OK) {
		/* Roll back so a retry starts clean; the image is unused. */
		mh_delete(c->mh, id, &e);
		ctl_fail_store(st, "record volume", rc);
		goto out;
	}
	*resp = volume_response(c, a, &v);
	st->code = CTL_OK;
out:
	if (locked)
		ctl_unlock(c, key);
	store_volume_free(old);
	free(params);
	return st->code;
}

int ctl_delete_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                      struct ctl_status *st)
{
	const Csi__V1__DeleteVolumeRequest *req = r;
	struct store_volume *v = NULL;
	bool locked = false;
	size_t pubs = 0;
	struct store_staging *stg = NULL;

	if (ctl_check_required(st, req->volume_id, "volume_id"))
		return st->code;
	Csi__V1__DeleteVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__delete_volume_response__init(out);
	/* An id this driver could never have issued names no volume: already gone. */
	if (!ctl_volume_id_valid(req->volume_id)) {
		*resp = out;
		return st->code = CTL_OK;
	}
	if (!(locked = ctl_lock(c, req->volume_id))) {
		ctl_fail(st, CTL_ABORTED, "an operation on volume %s is already in progress",
		         req->volume_id);
		goto done;
	}
	int rc = store_volume_get(c->st, req->volume_id, &v);
	if (rc == STORE_NOTFOUND) {
		*resp = out;
		st->code = CTL_OK;
		goto done;
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "look up volume", rc);
		goto done;
	}
	rc = store_staging_get(c->st, req->volume_id, &stg);
	if (rc == STORE_OK) {
		ctl_fail(st, CTL_FAILED_PRECONDITION, "volume %s is staged at %s", req->volume_id,
		         stg->staging_path);
		goto done;
	}
	if (store_publication_count(c->st, req->volume_id, &pubs) == STORE_OK && pubs > 0) {
		ctl_fail(st, CTL_FAILED_PRECONDITION, "volume %s is published at %zu targets",
		         req->volume_id, pubs);
		goto done;
	}
	struct mh_err e;
	if (mh_delete(c->mh, req->volume_id, &e) != 0) {
		ctl_fail_mh(st, "delete image", &e);
		goto done;
	}
	rc = store_volume_delete(c->st, req->volume_id);
	if (rc != STORE_OK && rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "forget volume", rc);
		goto done;
	}
	*resp = out;
	st->code = CTL_OK;
done:
	if (locked)
		ctl_unlock(c, req->volume_id);
	store_staging_free(stg);
	store_volume_free(v);
	return st->code;
}

static Csi__V1__ControllerServiceCapability *
rpc_cap(struct ctl_arena *a, Csi__V1__ControllerServiceCapability__RPC__Type t)
{
	Csi__V1__ControllerServiceCapability *cap = ctl_alloc(a, sizeof(*cap));
	csi__v1__controller_service_capability__init(cap);
	Csi__V1__ControllerServiceCapability__RPC *rpc = ctl_alloc(a, sizeof(*rpc));
	csi__v1__controller_service_capability__rpc__init(rpc);
	rpc->type = t;
	cap->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
	cap->rpc = rpc;
	return cap;
}

int ctl_controller_get_capabilities(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                    struct ctl_status *st)
{
	static const Csi__V1__ControllerServiceCapability__RPC__Type types[] = {
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
	};
	Csi__V1__ControllerGetCapabilitiesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__controller_get_capabilities_response__init(out);
	out->n_capabilities = sizeof(types) / sizeof(types[0]);
	out->capabilities = ctl_alloc(a, out->n_capabilities * sizeof(*out->capabilities));
	for (size_t i = 0; i < out->n_capabilities; i++)
		out->capabilities[i] = rpc_cap(a, types[i]);
	*resp = out;
	return st->code = CTL_OK;
}
