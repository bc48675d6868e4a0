/*
 * Controller service: ListVolumes and ListSnapshots. Runs in rpcd,
 * unprivileged, and only reads the store.
 *
 * Pagination is keyset: next_token is the id of the last entry returned and
 * the next page starts strictly after it, so a token stays valid while
 * volumes or snapshots are created or deleted (even the one it names). A
 * token that is not an id of the listed kind is ABORTED, as the spec asks.
 */
#include "ctl_cs.h"

#include <string.h>

static int check_paging(struct ctl_status *st, int32_t max_entries, const char *token,
                        bool (*valid)(const char *))
{
	if (max_entries < 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "max_entries must not be negative");
	if (token && *token && !valid(token))
		return ctl_fail(st, CTL_ABORTED, "starting_token '%.80s' is not valid", token);
	return CTL_OK;
}

int ctl_list_volumes(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                     struct ctl_status *st)
{
	const Csi__V1__ListVolumesRequest *req = r;
	struct store_volume **l = NULL;
	size_t n = 0;

	if (check_paging(st, req->max_entries, req->starting_token, pol_volume_id_valid))
		return st->code;
	/* One more than asked for tells whether there is a next page. */
	size_t limit = req->max_entries ? (size_t)req->max_entries + 1 : 0;
	int rc =
	    store_volume_list(c->st, req->starting_token ? req->starting_token : "", limit, &l, &n);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "list volumes", rc);

	Csi__V1__ListVolumesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__list_volumes_response__init(out);
	size_t page =
	    req->max_entries && n > (size_t)req->max_entries ? (size_t)req->max_entries : n;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	out->entries = ctl_alloc(a, (page ? page : 1) * sizeof(*out->entries));
	for (size_t i = 0; i < page; i++) {
		if (ctl_volume_is_ephemeral(l[i])) /* the Node service's: the CO never made it */
			continue;
		Csi__V1__ListVolumesResponse__Entry *e = ctl_alloc(a, sizeof(*e));
		csi__v1__list_volumes_response__entry__init(e);
		e->volume = ctl_volume_msg(c, a, l[i]);
		Csi__V1__ListVolumesResponse__VolumeStatus *vs = ctl_alloc(a, sizeof(*vs));
		csi__v1__list_volumes_response__volume_status__init(vs);
		if (ctl_published_nodes(c, st, l[i]->id, a, &vs->published_node_ids,
		                        &vs->n_published_node_ids))
			goto out;
		/* The condition last found (ControllerGetVolume looks again). */
		vs->volume_condition = ctl_condition_msg(a, l[i]->condition);
		e->status = vs;
		out->entries[out->n_entries++] = e;
	}
	if (page < n)
		out->next_token = ctl_strdup(a, l[page - 1]->id);
	*resp = out;
	st->code = CTL_OK;
out:
	store_volume_list_free(l, n);
	return st->code;
}

int ctl_list_snapshots(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                       struct ctl_status *st)
{
	const Csi__V1__ListSnapshotsRequest *req = r;
	struct store_snapshot **l = NULL, *one = NULL;
	size_t n = 0;
	int rc;

	if (check_paging(st, req->max_entries, req->starting_token, pol_snapshot_id_valid))
		return st->code;
	const char *sid = req->snapshot_id ? req->snapshot_id : "";
	const char *vid = req->source_volume_id ? req->source_volume_id : "";
	Csi__V1__ListSnapshotsResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__list_snapshots_response__init(out);

	/* Filters that name nothing this driver could hold match nothing: an empty page. */
	if ((*sid && !pol_snapshot_id_valid(sid)) || (*vid && !pol_volume_id_valid(vid))) {
		*resp = out;
		return st->code = CTL_OK;
	}
	if (*sid) {
		rc = store_snapshot_get(c->st, sid, &one);
		if (rc == STORE_OK && (!*vid || strcmp(one->source_volume_id, vid) == 0) &&
		    strcmp(one->id, req->starting_token ? req->starting_token : "") > 0) {
			/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
			out->entries = ctl_alloc(a, sizeof(*out->entries));
			Csi__V1__ListSnapshotsResponse__Entry *e = ctl_alloc(a, sizeof(*e));
			csi__v1__list_snapshots_response__entry__init(e);
			e->snapshot = ctl_snapshot_msg(a, one);
			out->entries[out->n_entries++] = e;
		} else if (rc != STORE_OK && rc != STORE_NOTFOUND) {
			ctl_fail_store(st, "look up snapshot", rc);
			goto out;
		}
		*resp = out;
		st->code = CTL_OK;
		goto out;
	}
	size_t limit = req->max_entries ? (size_t)req->max_entries + 1 : 0;
	rc = store_snapshot_list(c->st, vid, req->starting_token ? req->starting_token : "", limit,
	                         &l, &n);
	if (rc != STORE_OK) {
		ctl_fail_store(st, "list snapshots", rc);
		goto out;
	}
	size_t page =
	    req->max_entries && n > (size_t)req->max_entries ? (size_t)req->max_entries : n;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	out->entries = ctl_alloc(a, (page ? page : 1) * sizeof(*out->entries));
	for (size_t i = 0; i < page; i++) {
		Csi__V1__ListSnapshotsResponse__Entry *e = ctl_alloc(a, sizeof(*e));
		csi__v1__list_snapshots_response__entry__init(e);
		e->snapshot = ctl_snapshot_msg(a, l[i]);
		out->entries[out->n_entries++] = e;
	}
	if (page < n)
		out->next_token = ctl_strdup(a, l[page - 1]->id);
	*resp = out;
	st->code = CTL_OK;
out:
	store_snapshot_list_free(l, n);
	store_snapshot_free(one);
	return st->code;
}
