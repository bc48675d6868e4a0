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

#include <stdio.h>
#include <string.h>

static int access_type(const Csi__V1__VolumeCapability *cap)
{
	return cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK ? 1 : 2;
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
	/* This driver's only node is the one it runs on (volumes are node-local). */
	if (strcmp(req->node_id, c->cfg.node_id) != 0)
		return ctl_fail(st, CTL_NOT_FOUND,
		                "node %.80s does not exist: this controller serves node %s",
		                req->node_id, c->cfg.node_id);
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
	if (!ctl_cap_fits_volume(req->volume_capability, v, why, sizeof(why))) {
		ctl_fail(st, CTL_INVALID_ARGUMENT, "volume_capability: %s", why);
		goto out;
	}

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
