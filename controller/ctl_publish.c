/*
 * Controller service: ControllerPublishVolume and ControllerUnpublishVolume.
 * Runs in rpcd, unprivileged. Image volumes live on the node that holds the
 * data directory, so there is nothing to attach: publishing records the
 * attachment in the store (for clusters deployed with attachRequired: true,
 * and for LIST_VOLUMES_PUBLISHED_NODES), checks it against the volume and
 * the node, and answers an empty publish_context. The Node service does the
 * real work at NodeStageVolume.
 */
#include "ctl_cs.h"
#include "mh_proto_all.h"

#include <stdio.h>
#include <string.h>

static int access_type(const Csi__V1__VolumeCapability *cap)
{
	return cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK ? 1 : 2;
}

/* Whether node_id is no node plugin of v's shared base: NOT_FOUND, or the helper's error. */
static bool shared_node_unknown(struct ctl *c, struct ctl_status *st, const struct store_volume *v,
                                const char *node_id)
{
	struct mh_req_dir q;
	struct mh_err e;
	ctl_dir_req(v, &q);
	q.volume_id[0] = '\0';
	if (snprintf(q.name, sizeof(q.name), "%s", node_id) >= (int)sizeof(q.name)) {
		ctl_fail(st, CTL_NOT_FOUND, "node %.80s does not exist", node_id);
		return true;
	}
	if (mh_dir(c->mh, MH_REQ_DIR_NODE, &q, NULL, &e) == 0)
		return false;
	if (e.kind == MH_E_NOTFOUND || e.kind == MH_E_REFUSED)
		ctl_fail(st, CTL_NOT_FOUND, "node %.80s does not exist: %s", node_id, e.reason);
	else
		ctl_fail_mh(st, "look up node", &e);
	return true;
}

/*
 * A shared volume attached to another node already: refused (FAILED_PRECONDITION,
 * as the spec asks) when either attachment's mode is a single-node one, or both
 * write with MULTI_NODE_SINGLE_WRITER.
 */
static bool other_node_conflicts(struct ctl *c, struct ctl_status *st, const char *id,
                                 const Csi__V1__ControllerPublishVolumeRequest *req)
{
	const int mnsw = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER;
	int mode = (int)req->volume_capability->access_mode->mode;
	struct store_attachment **all = NULL;
	size_t n = 0;
	int rc = store_attachment_list(c->st, id, &all, &n);
	if (rc != STORE_OK && rc != STORE_NOTFOUND) {
		ctl_fail_store(st, "look up attachments", rc);
		return true;
	}
	for (size_t i = 0; i < n && st->code == CTL_OK; i++) {
		const struct store_attachment *at = all[i];
		if (strcmp(at->node_id, req->node_id) == 0)
			continue;
		bool single = !ctl_access_mode_multi_node(mode) ||
		              !ctl_access_mode_multi_node(at->access_mode);
		bool writers =
		    mode == mnsw && at->access_mode == mnsw && !req->readonly && !at->readonly;
		if (single || writers)
			ctl_fail(st, CTL_FAILED_PRECONDITION,
			         "volume %s is published to node %s, and its access mode allows no "
			         "other %s",
			         id, at->node_id, single ? "node" : "writer");
	}
	store_attachment_list_free(all, n);
	return st->code != CTL_OK;
}

int ctl_controller_publish_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                  struct ctl_status *st)
{
	const Csi__V1__ControllerPublishVolumeRequest *req = r;
	struct store_volume *v = NULL;
	struct store_attachment *old = NULL;
	char why[CTL_MSG_MAX];
	bool locked = false;
	int rc;

	if (ctl_check_required(st, req->volume_id, "volume_id") ||
	    ctl_check_required(st, req->node_id, "node_id") ||
	    ctl_cap_wellformed(st, req->volume_capability, "volume_capability"))
		return st->code;
	if (!pol_volume_id_valid(req->volume_id))
		return ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist", req->volume_id);
	if (!(locked = ctl_lock(c, req->volume_id))) {
		ctl_fail_busy(st, req->volume_id);
		goto out;
	}
	rc = ctl_volume_get(c, req->volume_id, &v);
	if (rc == STORE_NOTFOUND) {
		ctl_fail(st, CTL_NOT_FOUND, "volume %s does not exist", req->volume_id);
		goto out;
	}
	if (rc != STORE_OK) {
		ctl_fail_store(st, "look up volume", rc);
		goto out;
	}
	/*
	 * A node-local volume's only node is the one it runs on; a shared base's,
	 * every node whose plugin has started there (its helper's record, DIR_NODE).
	 */
	if (ctl_volume_is_shared(v) ? shared_node_unknown(c, st, v, req->node_id)
	                            : strcmp(req->node_id, c->cfg.node_id) != 0 &&
	                                  ctl_fail(st, CTL_NOT_FOUND,
	                                           "node %.80s does not exist: this controller "
	                                           "serves node %s",
	                                           req->node_id, c->cfg.node_id))
		goto out;
	if (!ctl_cap_fits_volume(req->volume_capability, v, why, sizeof(why))) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "volume_capability: %s", why);
		goto out;
	}
	if (ctl_volume_is_shared(v) && other_node_conflicts(c, st, v->id, req))
		goto out;

	int type = access_type(req->volume_capability);
	int mode = (int)req->volume_capability->access_mode->mode;
	rc = store_attachment_get(c->st, v->id, req->node_id, &old);
	if (rc == STORE_OK) {
		if (old->readonly != (bool)req->readonly || old->access_type != type ||
		    old->access_mode != mode) {
			ctl_fail(st, CTL_ALREADY_EXISTS,
			         "volume %s is published to node %s with a different "
			         "volume_capability or readonly flag",
			         v->id, req->node_id);
			goto out;
		}
	} else if (rc == STORE_NOTFOUND) {
		size_t attached = 0;
		if (c->cfg.max_volumes_per_node > 0) {
			rc = store_attachment_count_node(c->st, req->node_id, &attached);
			if (rc != STORE_OK) {
				ctl_fail_store(st, "count attachments", rc);
				goto out;
			}
			if ((int64_t)attached >= c->cfg.max_volumes_per_node) {
				ctl_fail(st, CTL_RESOURCE_EXHAUSTED,
				         "node %s already has %zu volumes attached (the maximum)",
				         req->node_id, attached);
				goto out;
			}
		}
		struct store_attachment at = {
		    .volume_id = v->id,
		    .node_id = (char *)req->node_id,
		    .readonly = req->readonly,
		    .access_type = type,
		    .access_mode = mode,
		};
		rc = store_attachment_put(c->st, &at);
		if (rc != STORE_OK) {
			ctl_fail_store(st, "record attachment", rc);
			goto out;
		}
	} else {
		ctl_fail_store(st, "look up attachment", rc);
		goto out;
	}
	Csi__V1__ControllerPublishVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__controller_publish_volume_response__init(out);
	*resp = out;
	st->code = CTL_OK;
out:
	if (locked)
		ctl_unlock(c, req->volume_id);
	store_attachment_free(old);
	store_volume_free(v);
	return st->code;
}

/*
 * Idempotent: a volume or node that is unknown, or not attached, is already
 * unpublished from it (the spec asks for OK then). No node_id: every node.
 */
int ctl_controller_unpublish_volume(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                    struct ctl_status *st)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *req = r;

	if (ctl_check_required(st, req->volume_id, "volume_id"))
		return st->code;
	Csi__V1__ControllerUnpublishVolumeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__controller_unpublish_volume_response__init(out);
	if (!pol_volume_id_valid(req->volume_id)) {
		*resp = out;
		return st->code = CTL_OK;
	}
	if (!ctl_lock(c, req->volume_id))
		return ctl_fail_busy(st, req->volume_id);
	int rc = store_attachment_delete(c->st, req->volume_id,
	                                 req->node_id && *req->node_id ? req->node_id : NULL);
	ctl_unlock(c, req->volume_id);
	if (rc != STORE_OK && rc != STORE_NOTFOUND)
		return ctl_fail_store(st, "forget attachment", rc);
	*resp = out;
	return st->code = CTL_OK;
}
