/*
 * GroupController service: GroupControllerGetCapabilities,
 * CreateVolumeGroupSnapshot, DeleteVolumeGroupSnapshot and
 * GetVolumeGroupSnapshot. Runs in rpcd, unprivileged.
 *
 * A group snapshot is one snapshot per source volume (as CreateSnapshot
 * makes them), recorded together with the group in one store transaction.
 * The spec demands write-order consistency across the group or failure.
 * While at most one of the volumes can be written (a volume that is neither
 * staged nor published has no writer), the snapshots are cut one after the
 * other. With two or more in use, the helper cuts them all in one
 * GROUP_SNAPSHOT: every member's file system frozen before the first copy,
 * thawed after the last, all within one freeze_max_seconds, and no snapshot
 * left if any member fails. A raw block volume in use cannot be frozen: such
 * a group is refused with FAILED_PRECONDITION, as is one of more than
 * MH_GROUP_MAX volumes with two in use. Group ids are "gs-" + 32 hex digits.
 */
#include "ctl_cs.h"
#include "ctl_intent.h"
#include "policy_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

int ctl_group_controller_get_capabilities(struct ctl *c, const void *r, void **resp,
                                          struct ctl_arena *a, struct ctl_status *st)
{
	Csi__V1__GroupControllerGetCapabilitiesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__group_controller_get_capabilities_response__init(out);
	Csi__V1__GroupControllerServiceCapability *cap = ctl_alloc(a, sizeof(*cap));
	csi__v1__group_controller_service_capability__init(cap);
	Csi__V1__GroupControllerServiceCapability__RPC *rpc = ctl_alloc(a, sizeof(*rpc));
	csi__v1__group_controller_service_capability__rpc__init(rpc);
	rpc->type =
	    CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT;
	cap->type_case = CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
	cap->rpc = rpc;
	out->n_capabilities = 1;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	out->capabilities = ctl_alloc(a, sizeof(*out->capabilities));
	out->capabilities[0] = cap;
	*resp = out;
	return st->code = CTL_OK;
}

/* The group and its member snapshots as a message. */
static int group_msg(struct ctl *c, struct ctl_status *st, struct ctl_arena *a,
                     const struct store_group_snapshot *g, Csi__V1__VolumeGroupSnapshot **out)
{
	struct store_snapshot **m = NULL;
	size_t n = 0;
	int rc = store_snapshot_list_group(c->st, g->id, &m, &n);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "list group members", rc);
	Csi__V1__VolumeGroupSnapshot *gs = ctl_alloc(a, sizeof(*gs));
	csi__v1__volume_group_snapshot__init(gs);
	gs->group_snapshot_id = ctl_strdup(a, g->id);
	gs->creation_time = ctl_timestamp(a, g->created_unix_ns);
	gs->ready_to_use = true;
	gs->n_snapshots = n;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	gs->snapshots = ctl_alloc(a, (n ? n : 1) * sizeof(*gs->snapshots));
	for (size_t i = 0; i < n; i++)
		gs->snapshots[i] = ctl_snapshot_msg(a, m[i]);
	store_snapshot_list_free(m, n);
	*out = gs;
	return st->code = CTL_OK;
}

/* Sorted copy of the request's ids as "id\n" lines; INVALID_ARGUMENT for empty or repeated. */
static int canon_ids(struct ctl_status *st, char *const *ids, size_t n, const char *field,
                     char **out)
{
	const char **sorted = calloc(n ? n : 1, sizeof(*sorted));
	size_t len = 1;
	*out = NULL;
	if (!sorted)
		abort();
	if (n == 0) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "%s is required", field);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!ids[i] || !*ids[i]) {
			ctl_fail(st, CTL_INVALID_ARGUMENT, "%s[%zu] is empty", field, i);
			goto out;
		}
		sorted[i] = ids[i];
		len += strlen(ids[i]) + 1;
	}
	qsort(sorted, n, sizeof(*sorted), cmp_str);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(sorted[i], sorted[i - 1]) == 0) {
			ctl_fail(st, CTL_INVALID_ARGUMENT, "%s names %.80s twice", field,
			         sorted[i]);
			goto out;
		}
	}
	char *s = malloc(len);
	if (!s)
		abort();
	s[0] = '\0';
	for (size_t i = 0, o = 0; i < n; i++)
		o += (size_t)snprintf(s + o, len - o, "%s\n", sorted[i]);
	*out = s;
	st->code = CTL_OK;
out:
	free(sorted);
	return st->code;
}

/* Whether a volume can be written right now: staged or published on this node. */
static int in_use(struct ctl *c, struct ctl_status *st, const char *id, bool *used)
{
	struct store_staging *s = NULL;
	size_t pubs = 0;
	int rc = store_staging_get(c->st, id, &s);
	store_staging_free(s);
	if (rc != STORE_OK && rc != STORE_NOTFOUND)
		return ctl_fail_store(st, "look up staging", rc);
	*used = rc == STORE_OK;
	rc = store_publication_count(c->st, id, &pubs);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "count publications", rc);
	*used = *used || pubs > 0;
	return CTL_OK;
}

static Csi__V1__CreateVolumeGroupSnapshotResponse *create_response(struct ctl_arena *a,
                                                                   Csi__V1__VolumeGroupSnapshot *g)
{
	Csi__V1__CreateVolumeGroupSnapshotResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__create_volume_group_snapshot_response__init(out);
	out->group_snapshot = g;
	return out;
}

/* One CreateVolumeGroupSnapshot in progress: what its steps share. */
struct group_create {
	const Csi__V1__CreateVolumeGroupSnapshotRequest *req;
	size_t n, cut; /* members; snapshots cut so far (removed again on failure) */
	size_t used;   /* members staged or published: two or more are cut together */
	struct store_snapshot *members;
	char (*snap_ids)[36];
	char *ids, *params; /* canonical: sorted source ids, parameters */
	bool intent;
};

/* A group under this name already: CTL_OK with *resp, or ALREADY_EXISTS; 1 if there is none. */
static int find_existing(struct ctl *c, struct ctl_status *st, struct ctl_arena *a,
                         const struct group_create *g, void **resp)
{
	struct store_group_snapshot *old = NULL;
	Csi__V1__VolumeGroupSnapshot *gm = NULL;
	int rc = store_group_snapshot_get_by_name(c->st, g->req->name, &old);
	if (rc == STORE_NOTFOUND)
		return 1;
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up group snapshot name", rc);
	if (strcmp(old->source_volume_ids, g->ids) != 0 || strcmp(old->parameters, g->params) != 0)
		ctl_fail(st, CTL_ALREADY_EXISTS,
		         "group snapshot '%s' exists with other source_volume_ids or parameters",
		         g->req->name);
	else if (group_msg(c, st, a, old, &gm) == CTL_OK)
		*resp = create_response(a, gm);
	store_group_snapshot_free(old);
	return st->code;
}

/* Every source volume exists; those in use can be frozen together (one point in time). */
static int load_members(struct ctl *c, struct ctl_status *st, struct group_create *g)
{
	const char *raw = NULL; /* a raw block volume in use */
	/* NOLINTNEXTLINE(clang-analyzer-optin.portability.UnixAPI): n > 0: canon_ids() checked */
	g->members = calloc(g->n, sizeof(*g->members));
	g->snap_ids = calloc(g->n, sizeof(*g->snap_ids));
	if (!g->members || !g->snap_ids)
		abort();
	for (size_t i = 0; i < g->n; i++) {
		const char *vid = g->req->source_volume_ids[i];
		struct store_volume *v = NULL;
		bool u = false;
		int rc = ctl_volume_get(c, vid, &v);
		if (rc != STORE_OK)
			return rc == STORE_NOTFOUND
			           ? ctl_fail(st, CTL_NOT_FOUND,
			                      "source volume %.80s does not exist", vid)
			           : ctl_fail_store(st, "look up source volume", rc);
		if (ctl_volume_is_dir(v)) {
			store_volume_free(v);
			return ctl_fail(
			    st, CTL_INVALID_ARGUMENT,
			    "source volume %s is a directory volume: group snapshots of "
			    "directory volumes are not supported",
			    vid);
		}
		g->members[i].source_volume_id = (char *)vid;
		g->members[i].fs_type = strdup(v->fs_type);
		store_volume_free(v);
		if (!g->members[i].fs_type)
			abort();
		if (in_use(c, st, vid, &u))
			return st->code;
		g->used += u;
		if (u && !g->members[i].fs_type[0])
			raw = vid;
	}
	if (g->used > 1 && raw)
		return ctl_fail(st, CTL_FAILED_PRECONDITION,
		                "source volume %s is a raw block volume in use, which cannot be "
		                "frozen: with %zu volumes in use, no point in time would hold "
		                "across the group",
		                raw, g->used);
	if (g->used > 1 && g->n > MH_GROUP_MAX)
		return ctl_fail(st, CTL_FAILED_PRECONDITION,
		                "%zu of the %zu volumes are in use: at most %d volumes can be "
		                "frozen together",
		                g->used, g->n, MH_GROUP_MAX);
	return CTL_OK;
}

/* Every member's snapshot in one GROUP_SNAPSHOT: frozen together, or none made. */
static int cut_together(struct ctl *c, struct ctl_status *st, struct group_create *g,
                        const struct store_group_snapshot *gs)
{
	struct mh_req_group q = {.n = (uint32_t)g->n};
	struct mh_ans_group ans = {0};
	struct mh_err e;
	for (size_t i = 0; i < g->n; i++) {
		snprintf(q.volume_id[i], sizeof(q.volume_id[i]), "%s",
		         g->members[i].source_volume_id);
		snprintf(q.snapshot_id[i], sizeof(q.snapshot_id[i]), "%s", g->snap_ids[i]);
	}
	g->cut = g->n; /* on failure every one is removed again: a lost answer may hide some */
	if (mh_group_snapshot(c->mh, &q, &ans, &e) != 0)
		return ctl_fail_mh(st, "group snapshot", &e);
	for (size_t i = 0; i < g->n; i++) {
		struct store_snapshot *m = &g->members[i];
		m->id = g->snap_ids[i];
		m->size_bytes = (int64_t)ans.size_bytes[i];
		m->parameters = "";
		m->created_unix_ns = gs->created_unix_ns;
	}
	return st->code;
}

/* Choose the ids, record them as an intent, then cut one snapshot per member. */
static int cut_members(struct ctl *c, struct ctl_status *st, struct group_create *g,
                       const struct store_group_snapshot *gs)
{
	size_t cap = g->n * sizeof(g->snap_ids[0]) + 1, len = 0; /* each id and a space or end */
	char *detail = calloc(1, cap);
	struct mh_err e;
	if (!detail)
		abort();
	for (size_t i = 0; i < g->n; i++) {
		ctl_new_snapshot_id(g->snap_ids[i]);
		len +=
		    (size_t)snprintf(detail + len, cap - len, "%s%s", i ? " " : "", g->snap_ids[i]);
	}
	if (ctl_intent_settle_held(c, CTL_OP_GROUP, g->req->name) != 0)
		ctl_fail(st, CTL_UNAVAILABLE,
		         "an earlier attempt under this name cannot be undone yet");
	else if (ctl_intent_begin(c, st, CTL_OP_GROUP, g->req->name, gs->id, detail) == CTL_OK)
		g->intent = true;
	free(detail);
	if (g->intent && g->used > 1)
		return cut_together(c, st, g, gs);
	for (; g->intent && g->cut < g->n; g->cut++) {
		struct store_snapshot *m = &g->members[g->cut];
		struct mh_ans_copy ans = {0};
		if (mh_snapshot(c->mh, g->snap_ids[g->cut], m->source_volume_id, &ans, &e) != 0)
			return ctl_fail_mh(st, "snapshot", &e);
		m->id = g->snap_ids[g->cut];
		m->size_bytes = (int64_t)ans.size_bytes;
		m->parameters = "";
		m->created_unix_ns = gs->created_unix_ns;
	}
	return st->code;
}

/* A failure after some snapshots were cut: remove them, the group never existed. */
static void undo_and_free(struct ctl *c, struct group_create *g)
{
	struct mh_err e;
	for (size_t i = 0; i < g->cut; i++)
		g->intent = mh_delete_snapshot(c->mh, g->snap_ids[i], &e) == 0 && g->intent;
	if (g->intent) /* recorded, or every cut snapshot removed again */
		ctl_intent_end(c, CTL_OP_GROUP, g->req->name);
	for (size_t i = 0; g->members && i < g->n; i++)
		free(g->members[i].fs_type);
	free(g->members);
	free(g->snap_ids);
	free(g->ids);
	free(g->params);
}

int ctl_create_volume_group_snapshot(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                     struct ctl_status *st)
{
	struct group_create g = {
	    .req = r,
	    .n = ((const Csi__V1__CreateVolumeGroupSnapshotRequest *)r)->n_source_volume_ids};
	const char **keys = NULL, *busy = NULL;
	char name_key[256], gid[36];
	size_t nkeys = 0;
	bool locked = false;
	Csi__V1__VolumeGroupSnapshot *gm = NULL;

	if (ctl_check_name(st, g.req->name, "name") ||
	    canon_ids(st, g.req->source_volume_ids, g.n, "source_volume_ids", &g.ids) ||
	    ctl_kv_canon(st, CTL_KV(a, g.req, parameters), g.req->n_parameters, NULL, "parameters",
	                 &g.params))
		goto out;
	/* The name and every source volume. */
	snprintf(name_key, sizeof(name_key), CTL_KEY_GROUP_NAME "%s", g.req->name);
	keys = calloc(g.n + 1, sizeof(*keys));
	if (!keys)
		abort();
	keys[nkeys++] = name_key;
	for (size_t i = 0; i < g.n; i++)
		keys[nkeys++] = g.req->source_volume_ids[i];
	if (!(locked = ctl_lock_keys(c, keys, nkeys, &busy))) {
		ctl_fail_busy(st, busy == name_key ? g.req->name : busy);
		goto out;
	}
	if (find_existing(c, st, a, &g, resp) != 1 || load_members(c, st, &g) != CTL_OK)
		goto out;
	ctl_new_group_id(gid);
	struct store_group_snapshot gs = {.id = gid,
	                                  .name = (char *)g.req->name,
	                                  .source_volume_ids = g.ids,
	                                  .parameters = g.params,
	                                  .created_unix_ns = ctl_now_unix_ns()};
	if (cut_members(c, st, &g, &gs) != CTL_OK)
		goto out;
	int rc = store_group_snapshot_put(c->st, &gs, g.members, g.n);
	if (rc != STORE_OK) {
		ctl_fail_store(st, "record group snapshot", rc);
		goto out;
	}
	g.cut = 0; /* recorded: nothing to roll back */
	if (group_msg(c, st, a, &gs, &gm) == CTL_OK)
		*resp = create_response(a, gm);
out:
	undo_and_free(c, &g);
	if (locked)
		ctl_unlock_keys(c, keys, nkeys);
	free(keys);
	return st->code;
}

/*
 * The members of an existing group must be exactly snapshot_ids (spec: the
 * field is required, and a mismatch is reported when it can be detected).
 * *members is the list from the store.
 */
static int check_members(struct ctl *c, struct ctl_status *st, const char *gid, char *const *want,
                         size_t nwant, struct store_snapshot ***members, size_t *n)
{
	char *canon = NULL;
	if (nwant == 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT,
		                "snapshot_ids is required for group snapshot %s", gid);
	int rc = store_snapshot_list_group(c->st, gid, members, n);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "list group members", rc);
	if (canon_ids(st, want, nwant, "snapshot_ids", &canon))
		return st->code;
	size_t len = 0;
	for (size_t i = 0; i < *n; i++)
		len += strlen((*members)[i]->id) + 1;
	char *have = calloc(len + 1, 1);
	if (!have)
		abort();
	for (size_t i = 0, o = 0; i < *n; i++) /* the store lists members ordered by id */
		o += (size_t)snprintf(have + o, len + 1 - o, "%s\n", (*members)[i]->id);
	/* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): canon_ids() set canon */
	if (strcmp(have, canon) != 0)
		ctl_fail(st, CTL_INVALID_ARGUMENT,
		         "snapshot_ids do not match the %zu snapshots of group snapshot %s", *n,
		         gid);
	else
		st->code = CTL_OK;
	free(have);
	free(canon);
	return st->code;
}

int ctl_delete_volume_group_snapshot(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                     struct ctl_status *st)
{
	const Csi__V1__DeleteVolumeGroupSnapshotRequest *req = r;
	struct store_group_snapshot *g = NULL;
	struct store_snapshot **m = NULL;
	size_t n = 0, nkeys = 0;
	const char **keys = NULL, *busy = NULL;
	bool locked = false;
	int rc;

	if (ctl_check_required(st, req->group_snapshot_id, "group_snapshot_id"))
		return st->code;
	Csi__V1__DeleteVolumeGroupSnapshotResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__delete_volume_group_snapshot_response__init(out);
	if (!pol_group_id_valid(req->group_snapshot_id)) {
		*resp = out;
		return st->code = CTL_OK;
	}
	/* The group and the snapshots named, so no restore from one runs meanwhile. */
	keys = calloc(req->n_snapshot_ids + 1, sizeof(*keys));
	if (!keys)
		abort();
	keys[nkeys++] = req->group_snapshot_id;
	for (size_t i = 0; i < req->n_snapshot_ids; i++)
		keys[nkeys++] = req->snapshot_ids[i] ? req->snapshot_ids[i] : "";
	if (!(locked = ctl_lock_keys(c, keys, nkeys, &busy))) {
		ctl_fail_busy(st, busy);
		goto out;
	}
	rc = store_group_snapshot_get(c->st, req->group_snapshot_id, &g);
	if (rc == STORE_NOTFOUND) {
		*resp = out;
		st->code = CTL_OK;
		goto out;
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "look up group snapshot", rc);
		goto out;
	}
	/* A group that is gone is deleted whatever the list says; one that is here needs it. */
	if (check_members(c, st, g->id, req->snapshot_ids, req->n_snapshot_ids, &m, &n))
		goto out;
	/*
	 * Images first, rows after, under an intent: a retry finds the same group
	 * and finishes the job, and so does reconciliation if no retry comes.
	 */
	if (ctl_intent_begin(c, st, CTL_OP_DELETE_GROUP, g->id, g->id, ""))
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct mh_err e;
		if (mh_delete_snapshot(c->mh, m[i]->id, &e) != 0 && e.kind != MH_E_NOTFOUND) {
			ctl_fail_mh(st, "delete snapshot", &e);
			goto out;
		}
	}
	rc = store_group_snapshot_delete(c->st, g->id);
	if (rc != STORE_OK && rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "forget group snapshot", rc);
		goto out;
	}
	ctl_intent_end(c, CTL_OP_DELETE_GROUP, g->id);
	*resp = out;
	st->code = CTL_OK;
out:
	if (locked)
		ctl_unlock_keys(c, keys, nkeys);
	free(keys);
	store_snapshot_list_free(m, n);
	store_group_snapshot_free(g);
	return st->code;
}

int ctl_get_volume_group_snapshot(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                  struct ctl_status *st)
{
	const Csi__V1__GetVolumeGroupSnapshotRequest *req = r;
	struct store_group_snapshot *g = NULL;
	struct store_snapshot **m = NULL;
	Csi__V1__VolumeGroupSnapshot *gm = NULL;
	size_t n = 0;

	if (ctl_check_required(st, req->group_snapshot_id, "group_snapshot_id"))
		return st->code;
	if (!pol_group_id_valid(req->group_snapshot_id))
		return ctl_fail(st, CTL_NOT_FOUND, "group snapshot %.80s does not exist",
		                req->group_snapshot_id);
	int rc = store_group_snapshot_get(c->st, req->group_snapshot_id, &g);
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "group snapshot %s does not exist",
		                req->group_snapshot_id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up group snapshot", rc);
	if (check_members(c, st, g->id, req->snapshot_ids, req->n_snapshot_ids, &m, &n) ||
	    group_msg(c, st, a, g, &gm))
		goto out;
	Csi__V1__GetVolumeGroupSnapshotResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__get_volume_group_snapshot_response__init(out);
	out->group_snapshot = gm;
	*resp = out;
	st->code = CTL_OK;
out:
	store_snapshot_list_free(m, n);
	store_group_snapshot_free(g);
	return st->code;
}
