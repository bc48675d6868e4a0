/*
 * Identity service: who we are, what we offer, and whether we are ready.
 * Runs in rpcd, unprivileged. Probe is ready only when the store is open, the
 * helper answers a ping, and the supervisor has not given up on the helper;
 * "not ready" is a successful answer with ready=false, as the spec asks.
 */
#include "rpcd.h"

#include "mh_client.h"
#include "sepcsi_version.h"

int rpcd_get_plugin_info(struct rpcd *r, const void *req, void **resp, struct ctl_arena *a,
                         struct ctl_status *st)
{
	Csi__V1__GetPluginInfoResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__get_plugin_info_response__init(out);
	out->name = ctl_strdup(a, r->cfg.driver_name);
	out->vendor_version = ctl_strdup(a, SEPCSI_VERSION);
	*resp = out;
	return st->code = CTL_OK;
}

static Csi__V1__PluginCapability *service_cap(struct ctl_arena *a,
                                              Csi__V1__PluginCapability__Service__Type t)
{
	Csi__V1__PluginCapability *cap = ctl_alloc(a, sizeof(*cap));
	csi__v1__plugin_capability__init(cap);
	Csi__V1__PluginCapability__Service *svc = ctl_alloc(a, sizeof(*svc));
	csi__v1__plugin_capability__service__init(svc);
	svc->type = t;
	cap->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	cap->service = svc;
	return cap;
}

int rpcd_get_plugin_capabilities(struct rpcd *r, const void *req, void **resp, struct ctl_arena *a,
                                 struct ctl_status *st)
{
	Csi__V1__GetPluginCapabilitiesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__get_plugin_capabilities_response__init(out);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	out->capabilities = ctl_alloc(a, 5 * sizeof(*out->capabilities));
	size_t n = 0;
	if (r->cfg.mode != CTL_MODE_NODE) {
		out->capabilities[n++] =
		    service_cap(a, CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE);
		/* CreateVolumeGroupSnapshot and friends (controller/ctl_group.c). */
		out->capabilities[n++] = service_cap(
		    a, CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__GROUP_CONTROLLER_SERVICE);
	}
	/* GetMetadataAllocated and GetMetadataDelta (controller/ctl_snapmeta.c). */
	if (r->cfg.mode != CTL_MODE_NODE && r->snapshot_metadata)
		out->capabilities[n++] = service_cap(
		    a, CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__SNAPSHOT_METADATA_SERVICE);
	out->capabilities[n++] = service_cap(
	    a, CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS);

	Csi__V1__PluginCapability *exp = ctl_alloc(a, sizeof(*exp));
	csi__v1__plugin_capability__init(exp);
	Csi__V1__PluginCapability__VolumeExpansion *ve = ctl_alloc(a, sizeof(*ve));
	csi__v1__plugin_capability__volume_expansion__init(ve);
	ve->type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
	exp->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
	exp->volume_expansion = ve;
	out->capabilities[n++] = exp;
	out->n_capabilities = n;
	*resp = out;
	return st->code = CTL_OK;
}

#define PROBE_FRESH_MS 1000

int rpcd_probe(struct rpcd *r, const void *req, void **resp, struct ctl_arena *a,
               struct ctl_status *st)
{
	struct mh_err e;
	Csi__V1__ProbeResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__probe_response__init(out);
	Google__Protobuf__BoolValue *ready = ctl_alloc(a, sizeof(*ready));
	google__protobuf__bool_value__init(ready);
	/*
	 * Ready: the store is open, the supervisor has not given up on the helper,
	 * and the helper answers. An answer on the current channel within the last
	 * second is proof enough; otherwise it is asked (PING). So a Probe storm, or
	 * a Probe while volumes are served, costs no helper round trip, and a helper
	 * that stops answering is still seen within a second.
	 */
	ready->value =
	    r->st && !atomic_load(&r->helper_failed) &&
	    (mh_client_answered_within(r->mh, PROBE_FRESH_MS) || mh_ping(r->mh, &e) == 0);
	out->ready = ready;
	*resp = out;
	return st->code = CTL_OK;
}
