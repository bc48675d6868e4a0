/*
 * The CSI method table: path -> request type -> handler. Runs in rpcd,
 * unprivileged. A method not listed here is answered UNIMPLEMENTED; a method
 * whose service the --mode does not serve is answered UNIMPLEMENTED too.
 */
#include "rpcd.h"

#include <string.h>

#define M(svc, name, reqtype, field, fn)                                                           \
	{                                                                                          \
		"/csi.v1." #svc "/" #name, RPCD_##field, &csi__v1__##reqtype##__descriptor, fn,    \
		    NULL                                                                           \
	}
#define MI(name, reqtype, fn)                                                                      \
	{                                                                                          \
		"/csi.v1.Identity/" #name, RPCD_IDENTITY, &csi__v1__##reqtype##__descriptor, NULL, \
		    fn                                                                             \
	}

static const struct rpcd_method methods[] = {
    MI(GetPluginInfo, get_plugin_info_request, rpcd_get_plugin_info),
    MI(GetPluginCapabilities, get_plugin_capabilities_request, rpcd_get_plugin_capabilities),
    MI(Probe, probe_request, rpcd_probe),
    M(Controller, CreateVolume, create_volume_request, CONTROLLER, ctl_create_volume),
    M(Controller, DeleteVolume, delete_volume_request, CONTROLLER, ctl_delete_volume),
    M(Controller, ControllerGetCapabilities, controller_get_capabilities_request, CONTROLLER,
      ctl_controller_get_capabilities),
    M(Node, NodeStageVolume, node_stage_volume_request, NODE, ctl_node_stage_volume),
    M(Node, NodeUnstageVolume, node_unstage_volume_request, NODE, ctl_node_unstage_volume),
    M(Node, NodePublishVolume, node_publish_volume_request, NODE, ctl_node_publish_volume),
    M(Node, NodeUnpublishVolume, node_unpublish_volume_request, NODE, ctl_node_unpublish_volume),
    M(Node, NodeGetCapabilities, node_get_capabilities_request, NODE, ctl_node_get_capabilities),
    M(Node, NodeGetInfo, node_get_info_request, NODE, ctl_node_get_info),
};

const struct rpcd_method *rpcd_method_find(const char *path, size_t len)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		if (strlen(methods[i].path) == len && memcmp(methods[i].path, path, len) == 0)
			return &methods[i];
	}
	return NULL;
}

bool rpcd_method_enabled(const struct rpcd *r, const struct rpcd_method *m)
{
	switch (m->service) {
	case RPCD_IDENTITY:
		return true;
	case RPCD_CONTROLLER:
		return r->cfg.mode != CTL_MODE_NODE;
	case RPCD_NODE:
		return r->cfg.mode != CTL_MODE_CONTROLLER;
	}
	return false;
}
