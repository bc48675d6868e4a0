/*
 * Controller service: DeleteVolume. Runs in rpcd, unprivileged. A volume
 * still staged, published or controller-published is refused
 * (FAILED_PRECONDITION) and nothing is touched; otherwise the helper removes
 * its image or directory under an intent (ctl_intent.c), and then the store
 * forgets it, so a delete cut short by a crash is finished, never half done.
 * Its snapshots stay: they are independent copies. An id this driver could
 * never have issued, or no longer knows, is already deleted (OK).
 */
#include "ctl_cs.h"
#include "ctl_intent.h"
#include "mh_proto_all.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Remove a volume's data under a delete intent: its image, or its directory
 * as its on-delete mode says (removed, retained, or archived as
 * archived-<name>). The mode is recorded in the intent, so a delete cut
 * short is finished with the same one.
 */
static int remove_data(struct ctl *c, struct ctl_status *st, const struct store_volume *v)
{
	struct mh_err e;
	if (!ctl_volume_is_dir(v)) {
		if (ctl_intent_begin(c, st, CTL_OP_DELETE, v->id, v->id, ""))
			return st->code;
		if (mh_delete(c->mh, v->id, &e) != 0 && e.kind != MH_E_NOTFOUND)
			return ctl_fail_mh(st, "delete image", &e);
		return CTL_OK;
	}
	struct mh_req_dir q;
	ctl_dir_req(v, &q);
	/* A mode this build cannot read keeps the data: nothing is removed by mistake. */
	if (!ctl_dir_mode_parse(v->on_delete, &q.mode))
		q.mode = MH_DIR_RETAIN;
	char *detail = ctl_dir_detail(q.base, q.name, "mode", ctl_dir_mode_name(q.mode));
	int failed = ctl_intent_begin(c, st, CTL_OP_DELETE, v->id, v->id, detail);
	free(detail);
	if (failed)
		return st->code;
	if (mh_dir(c->mh, MH_REQ_DIR_DELETE, &q, NULL, &e) != 0 && e.kind != MH_E_NOTFOUND)
		return ctl_fail_mh(st, "delete directory", &e);
	return CTL_OK;
}

int ctl_delete_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                      struct ctl_status *st)
{
	const Csi__V1__DeleteVolumeRequest *req = r;
	struct store_volume *v = NULL;
	struct store_staging *stg = NULL;
	struct store_attachment **att = NULL;
	size_t pubs = 0, natt = 0;
	bool locked = false;

	if (ctl_check_required(st, req->volume_id, "volume_id"))
		return st->code;
	Csi__V1__DeleteVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__delete_volume_response__init(out);
	/* An id this driver could never have issued names no volume: already gone. */
	if (!pol_volume_id_valid(req->volume_id)) {
		*resp = out;
		return st->code = CTL_OK;
	}
	if (!(locked = ctl_lock(c, req->volume_id))) {
		ctl_fail_busy(st, req->volume_id);
		goto done;
	}
	int rc = ctl_volume_get(c, req->volume_id, &v); /* an ephemeral one is not the CO's */
	if (rc == STORE_NOTFOUND) {
		*resp = out;
		st->code = CTL_OK;
		goto done;
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "look up volume", rc);
		goto done;
	}
	/* In use by another resource: the spec's FAILED_PRECONDITION, nothing touched. */
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
	if (store_attachment_list(c->st, req->volume_id, &att, &natt) == STORE_OK && natt > 0) {
		ctl_fail(st, CTL_FAILED_PRECONDITION,
		         "volume %s is controller-published to node %s", req->volume_id,
		         att[0]->node_id);
		goto done;
	}
	/* Snapshots are independent copies: they stay, and stay usable as sources. */
	if (remove_data(c, st, v))
		goto done;
	rc = ctl_record_begin(c);
	if (rc == STORE_OK) {
		rc = store_volume_delete(c->st, req->volume_id);
		rc = ctl_record_end(c, rc == STORE_NOTFOUND ? STORE_OK : rc, CTL_OP_DELETE,
		                    req->volume_id);
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "forget volume", rc);
		goto done;
	}
	*resp = out;
	st->code = CTL_OK;
done:
	if (locked)
		ctl_unlock(c, req->volume_id);
	store_attachment_list_free(att, natt);
	store_staging_free(stg);
	store_volume_free(v);
	return st->code;
}
