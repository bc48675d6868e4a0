/*
 * Controller service: ValidateVolumeCapabilities and
 * ControllerGetCapabilities. Runs in rpcd, unprivileged; reads the store
 * only. CreateVolume is ctl_controller.c, DeleteVolume ctl_delete.c.
 */
#include "ctl_cs.h"

#include <stdio.h>
#include <string.h>

/*
 * Echo a request map into a response map of another generated type: both are
 * arrays of {base, key, value} messages, built here with the entry's own
 * init function.
 */
#define ECHO_MAP(a, dst, dst_type, init, src, n)                                                   \
	do {                                                                                       \
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */             \
		(dst) = ctl_alloc((a), ((n) ? (n) : 1) * sizeof(*(dst)));                          \
		for (size_t i_ = 0; i_ < (n); i_++) {                                              \
			/* NOLINTNEXTLINE(bugprone-macro-parentheses): a type name */              \
			dst_type *e_ = ctl_alloc((a), sizeof(*e_));                                \
			init(e_);                                                                  \
			e_->key = ctl_strdup((a), (src)[i_]->key);                                 \
			e_->value = ctl_strdup((a), (src)[i_]->value);                             \
			(dst)[i_] = e_;                                                            \
		}                                                                                  \
	} while (0)

/* Every line of canonical text sub is a line of canonical text of. */
static bool canon_subset(const char *sub, const char *of)
{
	for (const char *line = sub; *line;) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		bool found = false;
		for (const char *l2 = of; *l2 && !found;) {
			const char *nl2 = strchr(l2, '\n');
			size_t len2 = nl2 ? (size_t)(nl2 - l2) : strlen(l2);
			found = len2 == len && strncmp(l2, line, len) == 0;
			l2 += len2 + (nl2 != NULL);
		}
		if (!found)
			return false;
		line += len + (nl != NULL);
	}
	return true;
}

/*
 * Whether the volume has every capability, parameter and mutable parameter
 * asked about; why not in msg. Malformed capabilities are INVALID_ARGUMENT.
 */
static int validate_against(struct ctl_status *st,
                            const Csi__V1__ValidateVolumeCapabilitiesRequest *req,
                            const struct store_volume *v, struct ctl_arena *a, bool *ok, char *msg,
                            size_t msgsz)
{
	struct ctl_vparams p;
	struct ctl_status pst = {0};
	*ok = false;
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		if (ctl_cap_wellformed(st, req->volume_capabilities[i], "volume_capabilities"))
			return st->code;
	}
	for (size_t i = 0; i < req->n_volume_capabilities; i++) {
		if (!ctl_cap_fits_volume(req->volume_capabilities[i], v, msg, msgsz))
			return st->code = CTL_OK;
	}
	if (ctl_vparams_parse(&pst, CTL_KV(a, req, parameters), req->n_parameters,
	                      CTL_KV(a, req, mutable_parameters), req->n_mutable_parameters, &p)) {
		snprintf(msg, msgsz, "%s", pst.msg);
		return st->code = CTL_OK;
	}
	/* Each parameter and mutable parameter asked about must have that value. */
	if (!canon_subset(p.canon, v->parameters)) {
		snprintf(msg, msgsz, "volume %s was created with other parameters", v->id);
		goto done;
	}
	if (!canon_subset(p.mutable_canon, v->mutable_parameters)) {
		snprintf(msg, msgsz, "volume %s has other mutable_parameters", v->id);
		goto done;
	}
	*ok = true;
done:
	ctl_vparams_release(&p);
	return st->code = CTL_OK;
}

int ctl_validate_volume_capabilities(struct ctl *c, const void *r, void **resp, struct ctl_arena *a,
                                     struct ctl_status *st)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *req = r;
	struct store_volume *v = NULL;
	char msg[CTL_MSG_MAX] = "";
	bool ok = false;

	if (ctl_check_required(st, req->volume_id, "volume_id"))
		return st->code;
	if (req->n_volume_capabilities == 0)
		return ctl_fail(st, CTL_INVALID_ARGUMENT, "volume_capabilities is required");
	int rc = ctl_volume_get(c, req->volume_id, &v);
	if (rc == STORE_NOTFOUND)
		return ctl_fail(st, CTL_NOT_FOUND, "volume %.80s does not exist", req->volume_id);
	if (rc != STORE_OK)
		return ctl_fail_store(st, "look up volume", rc);
	if (validate_against(st, req, v, a, &ok, msg, sizeof(msg)))
		goto out;

	Csi__V1__ValidateVolumeCapabilitiesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__validate_volume_capabilities_response__init(out);
	if (ok) {
		Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *cf =
		    ctl_alloc(a, sizeof(*cf));
		csi__v1__validate_volume_capabilities_response__confirmed__init(cf);
		/* Echo what was confirmed; the capabilities are borrowed from the request. */
		cf->n_volume_capabilities = req->n_volume_capabilities;
		cf->volume_capabilities = req->volume_capabilities;
		cf->n_volume_context = req->n_volume_context;
		ECHO_MAP(
		    a, cf->volume_context,
		    Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed__VolumeContextEntry,
		    csi__v1__validate_volume_capabilities_response__confirmed__volume_context_entry__init,
		    req->volume_context, req->n_volume_context);
		cf->n_parameters = req->n_parameters;
		ECHO_MAP(
		    a, cf->parameters,
		    Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed__ParametersEntry,
		    csi__v1__validate_volume_capabilities_response__confirmed__parameters_entry__init,
		    req->parameters, req->n_parameters);
		cf->n_mutable_parameters = req->n_mutable_parameters;
		ECHO_MAP(
		    a, cf->mutable_parameters,
		    Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed__MutableParametersEntry,
		    csi__v1__validate_volume_capabilities_response__confirmed__mutable_parameters_entry__init,
		    req->mutable_parameters, req->n_mutable_parameters);
		out->confirmed = cf;
	} else {
		out->message = ctl_strdup(a, msg);
	}
	*resp = out;
	st->code = CTL_OK;
out:
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
	/* Exactly what this file and its siblings implement. */
	static const Csi__V1__ControllerServiceCapability__RPC__Type types[] = {
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_SNAPSHOTS,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME,
	    CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_SNAPSHOT,
	};
	Csi__V1__ControllerGetCapabilitiesResponse *out = ctl_alloc(a, sizeof(*out));
	csi__v1__controller_get_capabilities_response__init(out);
	out->n_capabilities = sizeof(types) / sizeof(types[0]);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of message pointers */
	out->capabilities = ctl_alloc(a, out->n_capabilities * sizeof(*out->capabilities));
	for (size_t i = 0; i < out->n_capabilities; i++)
		out->capabilities[i] = rpc_cap(a, types[i]);
	*resp = out;
	return st->code = CTL_OK;
}
