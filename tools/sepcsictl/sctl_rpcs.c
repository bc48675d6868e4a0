/*
 * sepcsictl's table of CSI RPCs: for each, its subcommand name, method path,
 * protobuf-c request and answer types, and one flag per request field with the
 * field path it fills. Runs as the operator; data only.
 *
 * Subcommand names are the method name without its service prefix, in
 * kebab-case (ControllerPublishVolume -> controller publish-volume); the
 * method name itself is accepted too. The capability flags (--access-type,
 * --fs-type, --mount-flag, --mount-group, --access-mode) are added by the
 * builder to every RPC whose request carries a VolumeCapability. The two
 * SnapshotMetadata RPCs stream their answers: streams is set, and resp is the
 * type of each streamed message.
 */
#include <string.h>
#include <strings.h>

#include "csi.pb-c.h"
#include "sctl.h"

#define END                                                                                        \
	{                                                                                          \
		NULL, FK_STR, NULL, false, NULL                                                    \
	}
#define SECRETS                                                                                    \
	{                                                                                          \
		"secret", FK_MAP, "secrets", false,                                                \
		    "credentials KEY=VALUE (repeat; never printed)"                                \
	}
#define VOLUME_ID(req)                                                                             \
	{                                                                                          \
		"volume-id", FK_STR, "volume_id", req, "volume id"                                 \
	}
#define VOLUME_CONTEXT                                                                             \
	{                                                                                          \
		"context", FK_MAP, "volume_context", false,                                        \
		    "volume context from CreateVolume, KEY=VALUE (repeat)"                         \
	}
#define PUBLISH_CONTEXT                                                                            \
	{                                                                                          \
		"publish-context", FK_MAP, "publish_context", false,                               \
		    "publish context from ControllerPublishVolume, KEY=VALUE (repeat)"             \
	}
#define PARAMS                                                                                     \
	{                                                                                          \
		"param", FK_MAP, "parameters", false, "parameter KEY=VALUE (repeat)"               \
	}
#define MUTABLE_PARAMS                                                                             \
	{                                                                                          \
		"mutable-param", FK_MAP, "mutable_parameters", false,                              \
		    "mutable parameter KEY=VALUE (repeat)"                                         \
	}
#define CAPACITY(prefix)                                                                           \
	{"capacity", FK_SIZE, prefix "capacity_range.required_bytes", false,                       \
	 "required bytes, with units: 1Gi, 512Mi, 1G"},                                            \
	{                                                                                          \
		"limit", FK_SIZE, prefix "capacity_range.limit_bytes", false,                      \
		    "limit bytes, with units"                                                      \
	}
#define PAGING                                                                                     \
	{"max-entries", FK_INT, "max_entries", false, "page size (0: no limit)"},                  \
	{                                                                                          \
		"starting-token", FK_STR, "starting_token", false,                                 \
		    "next_token of the previous page"                                              \
	}

static const struct sctl_flag no_flags[] = {END};

/* ---- Controller ---- */
static const struct sctl_flag create_volume_flags[] = {
    {"name", FK_STR, "name", true, "CO-chosen name, the idempotency key"},
    CAPACITY(""),
    PARAMS,
    SECRETS,
    {"snapshot-id", FK_STR, "volume_content_source.snapshot.snapshot_id", false,
     "restore from this snapshot"},
    {"source-volume-id", FK_STR, "volume_content_source.volume.volume_id", false,
     "clone this volume"},
    {"requisite", FK_TOPO, "accessibility_requirements.requisite", false,
     "requisite topology KEY=VALUE,... (repeat for several)"},
    {"preferred", FK_TOPO, "accessibility_requirements.preferred", false,
     "preferred topology KEY=VALUE,... (repeat, most preferred first)"},
    MUTABLE_PARAMS,
    END,
};
static const struct sctl_flag delete_volume_flags[] = {VOLUME_ID(true), SECRETS, END};
static const struct sctl_flag ctl_publish_flags[] = {
    VOLUME_ID(true),
    {"node-id", FK_STR, "node_id", true, "node id from NodeGetInfo"},
    {"readonly", FK_BOOL, "readonly", false, "publish read-only"},
    SECRETS,
    VOLUME_CONTEXT,
    END,
};
static const struct sctl_flag ctl_unpublish_flags[] = {
    VOLUME_ID(true),
    {"node-id", FK_STR, "node_id", false, "node to detach from (empty: every node)"},
    SECRETS,
    END,
};
static const struct sctl_flag validate_flags[] = {
    VOLUME_ID(true), VOLUME_CONTEXT, PARAMS, SECRETS, MUTABLE_PARAMS, END,
};
static const struct sctl_flag list_volumes_flags[] = {PAGING, END};
static const struct sctl_flag get_capacity_flags[] = {
    PARAMS,
    {"topology", FK_TOPO, "accessible_topology", false,
     "count only storage reachable from KEY=VALUE,..."},
    END,
};
static const struct sctl_flag create_snapshot_flags[] = {
    {"source-volume-id", FK_STR, "source_volume_id", true, "volume to snapshot"},
    {"name", FK_STR, "name", true, "CO-chosen name, the idempotency key"},
    SECRETS,
    PARAMS,
    END,
};
static const struct sctl_flag snapshot_id_flags[] = {
    {"snapshot-id", FK_STR, "snapshot_id", true, "snapshot id"},
    SECRETS,
    END,
};
static const struct sctl_flag list_snapshots_flags[] = {
    PAGING,
    {"source-volume-id", FK_STR, "source_volume_id", false, "only snapshots of this volume"},
    {"snapshot-id", FK_STR, "snapshot_id", false, "only this snapshot"},
    SECRETS,
    END,
};
static const struct sctl_flag ctl_expand_flags[] = {VOLUME_ID(true), CAPACITY(""), SECRETS, END};
static const struct sctl_flag get_volume_flags[] = {VOLUME_ID(true), END};
static const struct sctl_flag modify_volume_flags[] = {
    VOLUME_ID(true),
    SECRETS,
    MUTABLE_PARAMS,
    END,
};

/* ---- GroupController ---- */
static const struct sctl_flag create_group_flags[] = {
    {"name", FK_STR, "name", true, "CO-chosen name, the idempotency key"},
    {"source-volume-id", FK_STRS, "source_volume_ids", true, "a member volume (repeat)"},
    SECRETS,
    PARAMS,
    END,
};
static const struct sctl_flag group_id_flags[] = {
    {"group-snapshot-id", FK_STR, "group_snapshot_id", true, "group snapshot id"},
    {"snapshot-id", FK_STRS, "snapshot_ids", true, "a member snapshot id (repeat)"},
    SECRETS,
    END,
};

/* ---- SnapshotMetadata ---- */
#define BLOCK_RANGE_FLAGS                                                                          \
	{"starting-offset", FK_SIZE, "starting_offset", false,                                     \
	 "byte position to start from, with units: 0 (default), 1Gi"},                             \
	{                                                                                          \
		"max-results", FK_INT, "max_results", false,                                       \
		    "most ranges per streamed message (0: the plugin chooses)"                     \
	}
static const struct sctl_flag allocated_flags[] = {
    {"snapshot-id", FK_STR, "snapshot_id", true, "snapshot id"},
    BLOCK_RANGE_FLAGS,
    SECRETS,
    END,
};
static const struct sctl_flag delta_flags[] = {
    {"base-snapshot-id", FK_STR, "base_snapshot_id", true, "the older snapshot"},
    {"target-snapshot-id", FK_STR, "target_snapshot_id", true,
     "the newer snapshot, of the same volume"},
    BLOCK_RANGE_FLAGS,
    SECRETS,
    END,
};

/* ---- Node ---- */
static const struct sctl_flag stage_flags[] = {
    VOLUME_ID(true),
    PUBLISH_CONTEXT,
    {"staging-path", FK_STR, "staging_target_path", true,
     "staging directory (created by the CO, that is you)"},
    SECRETS,
    VOLUME_CONTEXT,
    END,
};
static const struct sctl_flag unstage_flags[] = {
    VOLUME_ID(true),
    {"staging-path", FK_STR, "staging_target_path", true, "staging directory"},
    END,
};
static const struct sctl_flag node_publish_flags[] = {
    VOLUME_ID(true),
    PUBLISH_CONTEXT,
    {"staging-path", FK_STR, "staging_target_path", false, "where the volume was staged"},
    {"target-path", FK_STR, "target_path", true,
     "where to publish (its parent exists; the driver creates it)"},
    {"readonly", FK_BOOL, "readonly", false, "publish read-only"},
    SECRETS,
    VOLUME_CONTEXT,
    END,
};
static const struct sctl_flag node_unpublish_flags[] = {
    VOLUME_ID(true),
    {"target-path", FK_STR, "target_path", true, "where the volume is published"},
    END,
};
static const struct sctl_flag stats_flags[] = {
    VOLUME_ID(true),
    {"volume-path", FK_STR, "volume_path", true, "a path where the volume is staged or published"},
    {"staging-path", FK_STR, "staging_target_path", false, "staging directory"},
    END,
};
static const struct sctl_flag node_expand_flags[] = {
    VOLUME_ID(true),
    {"volume-path", FK_STR, "volume_path", true, "a path where the volume is available"},
    CAPACITY(""),
    {"staging-path", FK_STR, "staging_target_path", false, "staging directory"},
    SECRETS,
    END,
};

#define RPC(svc, cli, gsvc, meth, type, summ, capk, capp, fl, strm)                                \
	{                                                                                          \
		svc, cli, "/csi.v1." gsvc "/" #meth, summ, &csi__v1__##type##_request__descriptor, \
		    &csi__v1__##type##_response__descriptor, capk, capp, fl, strm                  \
	}
#define ID(cli, meth, type, summ)                                                                  \
	RPC("identity", cli, "Identity", meth, type, summ, 0, NULL, no_flags, false)
#define CTL(cli, meth, type, summ, capk, capp, fl)                                                 \
	RPC("controller", cli, "Controller", meth, type, summ, capk, capp, fl, false)
#define GRP(cli, meth, type, summ, fl)                                                             \
	RPC("group-controller", cli, "GroupController", meth, type, summ, 0, NULL, fl, false)
#define NODE(cli, meth, type, summ, capk, capp, fl)                                                \
	RPC("node", cli, "Node", meth, type, summ, capk, capp, fl, false)
#define SMD(cli, meth, type, summ, fl)                                                             \
	RPC("snapshot-metadata", cli, "SnapshotMetadata", meth, type, summ, 0, NULL, fl, true)

const struct sctl_rpc sctl_rpcs[] = {
    ID("get-plugin-info", GetPluginInfo, get_plugin_info, "name and version of the plugin"),
    ID("get-plugin-capabilities", GetPluginCapabilities, get_plugin_capabilities,
       "services and features of the plugin"),
    ID("probe", Probe, probe, "is the plugin ready"),

    CTL("create-volume", CreateVolume, create_volume, "provision a volume", SCTL_CAP_MANY_REQUIRED,
        "volume_capabilities", create_volume_flags),
    CTL("delete-volume", DeleteVolume, delete_volume, "deprovision a volume", 0, NULL,
        delete_volume_flags),
    CTL("publish-volume", ControllerPublishVolume, controller_publish_volume,
        "make a volume available to a node (attach)", SCTL_CAP_ONE_REQUIRED, "volume_capability",
        ctl_publish_flags),
    CTL("unpublish-volume", ControllerUnpublishVolume, controller_unpublish_volume,
        "undo publish-volume (detach)", 0, NULL, ctl_unpublish_flags),
    CTL("validate-volume-capabilities", ValidateVolumeCapabilities, validate_volume_capabilities,
        "does a volume support these capabilities", SCTL_CAP_MANY_REQUIRED, "volume_capabilities",
        validate_flags),
    CTL("list-volumes", ListVolumes, list_volumes, "list volumes, page by page", 0, NULL,
        list_volumes_flags),
    CTL("get-capacity", GetCapacity, get_capacity, "space left for new volumes", SCTL_CAP_MANY,
        "volume_capabilities", get_capacity_flags),
    CTL("get-capabilities", ControllerGetCapabilities, controller_get_capabilities,
        "what the Controller service offers", 0, NULL, no_flags),
    CTL("create-snapshot", CreateSnapshot, create_snapshot, "cut a snapshot of a volume", 0, NULL,
        create_snapshot_flags),
    CTL("delete-snapshot", DeleteSnapshot, delete_snapshot, "delete a snapshot", 0, NULL,
        snapshot_id_flags),
    CTL("list-snapshots", ListSnapshots, list_snapshots, "list snapshots, page by page", 0, NULL,
        list_snapshots_flags),
    CTL("get-snapshot", GetSnapshot, get_snapshot, "one snapshot's current state", 0, NULL,
        snapshot_id_flags),
    CTL("expand-volume", ControllerExpandVolume, controller_expand_volume,
        "grow a volume on the storage side", SCTL_CAP_ONE, "volume_capability", ctl_expand_flags),
    CTL("get-volume", ControllerGetVolume, controller_get_volume, "one volume's current state", 0,
        NULL, get_volume_flags),
    CTL("modify-volume", ControllerModifyVolume, controller_modify_volume,
        "change a volume's mutable parameters", 0, NULL, modify_volume_flags),

    GRP("get-capabilities", GroupControllerGetCapabilities, group_controller_get_capabilities,
        "what the GroupController service offers", no_flags),
    GRP("create-volume-group-snapshot", CreateVolumeGroupSnapshot, create_volume_group_snapshot,
        "snapshot several volumes at one point in time", create_group_flags),
    GRP("delete-volume-group-snapshot", DeleteVolumeGroupSnapshot, delete_volume_group_snapshot,
        "delete a group snapshot and its members", group_id_flags),
    GRP("get-volume-group-snapshot", GetVolumeGroupSnapshot, get_volume_group_snapshot,
        "one group snapshot's current state", group_id_flags),

    NODE("stage-volume", NodeStageVolume, node_stage_volume,
         "format if blank and mount a volume at its staging path", SCTL_CAP_ONE_REQUIRED,
         "volume_capability", stage_flags),
    NODE("unstage-volume", NodeUnstageVolume, node_unstage_volume, "undo stage-volume", 0, NULL,
         unstage_flags),
    NODE("publish-volume", NodePublishVolume, node_publish_volume,
         "make a staged volume visible at a target path", SCTL_CAP_ONE_REQUIRED,
         "volume_capability", node_publish_flags),
    NODE("unpublish-volume", NodeUnpublishVolume, node_unpublish_volume, "undo publish-volume", 0,
         NULL, node_unpublish_flags),
    NODE("get-volume-stats", NodeGetVolumeStats, node_get_volume_stats,
         "usage and health of a volume", 0, NULL, stats_flags),
    NODE("expand-volume", NodeExpandVolume, node_expand_volume,
         "grow the filesystem of a staged or published volume", SCTL_CAP_ONE, "volume_capability",
         node_expand_flags),
    NODE("get-capabilities", NodeGetCapabilities, node_get_capabilities,
         "what the Node service offers", 0, NULL, no_flags),
    NODE("get-info", NodeGetInfo, node_get_info, "node id, limits and topology", 0, NULL, no_flags),

    SMD("get-metadata-allocated", GetMetadataAllocated, get_metadata_allocated,
        "the allocated block ranges of a snapshot, streamed", allocated_flags),
    SMD("get-metadata-delta", GetMetadataDelta, get_metadata_delta,
        "the block ranges that changed between two snapshots, streamed", delta_flags),
};
const size_t sctl_nrpcs = sizeof(sctl_rpcs) / sizeof(sctl_rpcs[0]);

const struct sctl_service sctl_services[] = {
    {"identity", "Identity", "who the plugin is, what it offers, is it ready"},
    {"controller", "Controller", "volumes and snapshots, wherever they live"},
    {"group-controller", "GroupController", "group snapshots"},
    {"node", "Node", "staging and publishing on this node"},
    {"snapshot-metadata", "SnapshotMetadata",
     "allocated and changed block ranges of snapshots (alpha, streamed)"},
};
const size_t sctl_nservices = sizeof(sctl_services) / sizeof(sctl_services[0]);

const struct sctl_service *sctl_service_find(const char *name)
{
	for (size_t i = 0; i < sctl_nservices; i++) {
		if (strcmp(name, sctl_services[i].name) == 0 ||
		    strcasecmp(name, sctl_services[i].grpc_name) == 0)
			return &sctl_services[i];
	}
	return NULL;
}

const char *sctl_rpc_method_name(const struct sctl_rpc *r)
{
	return strrchr(r->method, '/') + 1;
}

const struct sctl_rpc *sctl_rpc_find(const struct sctl_service *svc, const char *name)
{
	for (size_t i = 0; i < sctl_nrpcs; i++) {
		const struct sctl_rpc *r = &sctl_rpcs[i];
		if (strcmp(r->service, svc->name) != 0)
			continue;
		if (strcmp(name, r->name) == 0 || strcmp(name, sctl_rpc_method_name(r)) == 0)
			return r;
	}
	return NULL;
}
