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
		    NULL, NULL                                                                     \
	}
#define MS(name, reqtype, fn)                                                                      \
	{                                                                                          \
		"/csi.v1.SnapshotMetadata/" #name, RPCD_SNAPSHOT_METADATA,                         \
		    &csi__v1__##reqtype##__descriptor, NULL, NULL, fn                              \
	}
#define MI(name, reqtype, fn)                                                                      \
	{                                                                                          \
		"/csi.v1.Identity/" #name, RPCD_IDENTITY, &csi__v1__##reqtype##__descriptor, NULL, \
		    fn, NULL                                                                       \
	}

static const struct rpcd_method methods[] = {
    MI(GetPluginInfo, get_plugin_info_request, rpcd_get_plugin_info),
    MI(GetPluginCapabilities, get_plugin_capabilities_request, rpcd_get_plugin_capabilities),
    MI(Probe, probe_request, rpcd_probe),
    M(Controller, CreateVolume, create_volume_request, CONTROLLER, ctl_create_volume),
    M(Controller, DeleteVolume, delete_volume_request, CONTROLLER, ctl_delete_volume),
    M(Controller, ControllerGetCapabilities, controller_get_capabilities_request, CONTROLLER,
      ctl_controller_get_capabilities),
    M(Controller, ControllerPublishVolume, controller_publish_volume_request, CONTROLLER,
      ctl_controller_publish_volume),
    M(Controller, ControllerUnpublishVolume, controller_unpublish_volume_request, CONTROLLER,
      ctl_controller_unpublish_volume),
    M(Controller, ValidateVolumeCapabilities, validate_volume_capabilities_request, CONTROLLER,
      ctl_validate_volume_capabilities),
    M(Controller, ListVolumes, list_volumes_request, CONTROLLER, ctl_list_volumes),
    M(Controller, GetCapacity, get_capacity_request, CONTROLLER, ctl_get_capacity),
    M(Controller, CreateSnapshot, create_snapshot_request, CONTROLLER, ctl_create_snapshot),
    M(Controller, DeleteSnapshot, delete_snapshot_request, CONTROLLER, ctl_delete_snapshot),
    M(Controller, ListSnapshots, list_snapshots_request, CONTROLLER, ctl_list_snapshots),
    M(Controller, GetSnapshot, get_snapshot_request, CONTROLLER, ctl_get_snapshot),
    M(Controller, ControllerExpandVolume, controller_expand_volume_request, CONTROLLER,
      ctl_controller_expand_volume),
    M(Controller, ControllerGetVolume, controller_get_volume_request, CONTROLLER,
      ctl_controller_get_volume),
    M(Controller, ControllerModifyVolume, controller_modify_volume_request, CONTROLLER,
      ctl_controller_modify_volume),
    /* The GroupController service is served wherever the Controller service is. */
    M(GroupController, GroupControllerGetCapabilities, group_controller_get_capabilities_request,
      CONTROLLER, ctl_group_controller_get_capabilities),
    M(GroupController, CreateVolumeGroupSnapshot, create_volume_group_snapshot_request, CONTROLLER,
      ctl_create_volume_group_snapshot),
    M(GroupController, DeleteVolumeGroupSnapshot, delete_volume_group_snapshot_request, CONTROLLER,
      ctl_delete_volume_group_snapshot),
    M(GroupController, GetVolumeGroupSnapshot, get_volume_group_snapshot_request, CONTROLLER,
      ctl_get_volume_group_snapshot),
    /* With --snapshot-metadata; its two methods stream their answers. */
    MS(GetMetadataAllocated, get_metadata_allocated_request, ctl_get_metadata_allocated),
    MS(GetMetadataDelta, get_metadata_delta_request, ctl_get_metadata_delta),
    M(Node, NodeStageVolume, node_stage_volume_request, NODE, ctl_node_stage_volume),
    M(Node, NodeUnstageVolume, node_unstage_volume_request, NODE, ctl_node_unstage_volume),
    M(Node, NodePublishVolume, node_publish_volume_request, NODE, ctl_node_publish_volume),
    M(Node, NodeUnpublishVolume, node_unpublish_volume_request, NODE, ctl_node_unpublish_volume),
    M(Node, NodeGetCapabilities, node_get_capabilities_request, NODE, ctl_node_get_capabilities),
    M(Node, NodeGetInfo, node_get_info_request, NODE, ctl_node_get_info),
    M(Node, NodeGetVolumeStats, node_get_volume_stats_request, NODE, ctl_node_get_volume_stats),
    M(Node, NodeExpandVolume, node_expand_volume_request, NODE, ctl_node_expand_volume),
};

#define NMETHODS (sizeof(methods) / sizeof(methods[0]))
_Static_assert(NMETHODS <= RPCD_METHODS_MAX, "RPCD_METHODS_MAX is too small");

size_t rpcd_method_count(void)
{
	return NMETHODS;
}

const struct rpcd_method *rpcd_method_at(size_t i)
{
	return &methods[i];
}

size_t rpcd_method_index(const struct rpcd_method *m)
{
	return (size_t)(m - methods);
}

const struct rpcd_method *rpcd_method_find(const char *path, size_t len)
{
	for (size_t i = 0; i < NMETHODS; i++) {
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
	case RPCD_SNAPSHOT_METADATA:
		return r->cfg.mode != CTL_MODE_NODE && r->snapshot_metadata;
	}
	return false;
}
