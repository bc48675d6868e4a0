"""Controller service, volumes: CreateVolume (sizes, file systems, raw block,
parameters, topology, capacity), DeleteVolume, ControllerPublishVolume and
ControllerUnpublishVolume, ValidateVolumeCapabilities, ListVolumes,
GetCapacity, ControllerGetVolume, ControllerExpandVolume,
ControllerModifyVolume and the capabilities. Each success path is called twice
(idempotency); each error code the spec lists for an RPC is provoked.
Snapshots, clones and group snapshots: test_controller_snapshots.py."""
import os
import re
import subprocess

import grpc
import pytest

from csi_client import block_cap, mount_cap
from conftest import Driver

MiB = 1 << 20
GiB = 1 << 30
TOPO_KEY = "topology.sepcsi.io/node"


def code_of(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code()


def twice(fn, *args, **kw):
    a = fn(*args, **kw)
    b = fn(*args, **kw)
    assert a == b
    return a


def create(c, name, caps=None, req=32 * MiB, lim=0, params=None, mutable=None, **kw):
    return c.controller("CreateVolume", name=name,
                        volume_capabilities=caps or [mount_cap("")],
                        capacity_range=c.pb.CapacityRange(required_bytes=req, limit_bytes=lim),
                        parameters=params or {}, mutable_parameters=mutable or {}, **kw).volume


def image_path(driver, vid):
    return os.path.join(driver.data, "images", vid + ".img")


def mount_entry(path):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == path:
                return fields[fields.index("-") + 1]
    return None


def rpc_types(resp):
    return {cap.rpc.type for cap in resp.capabilities}


def test_capabilities(driver):
    c = driver.client
    R = c.pb.ControllerServiceCapability.RPC
    want = {R.CREATE_DELETE_VOLUME, R.PUBLISH_UNPUBLISH_VOLUME, R.LIST_VOLUMES, R.GET_CAPACITY,
            R.CREATE_DELETE_SNAPSHOT, R.LIST_SNAPSHOTS, R.CLONE_VOLUME, R.PUBLISH_READONLY,
            R.EXPAND_VOLUME, R.LIST_VOLUMES_PUBLISHED_NODES, R.VOLUME_CONDITION, R.GET_VOLUME,
            R.SINGLE_NODE_MULTI_WRITER, R.MODIFY_VOLUME, R.GET_SNAPSHOT}
    assert rpc_types(twice(c.controller, "ControllerGetCapabilities")) == want
    G = c.pb.GroupControllerServiceCapability.RPC
    assert rpc_types(twice(c.group_controller, "GroupControllerGetCapabilities")) == \
        {G.CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT}
    S = c.pb.PluginCapability.Service
    services = {cap.service.type for cap in c.identity("GetPluginCapabilities").capabilities
                if cap.HasField("service")}
    assert {S.CONTROLLER_SERVICE, S.GROUP_CONTROLLER_SERVICE,
            S.VOLUME_ACCESSIBILITY_CONSTRAINTS} <= services


def test_create_sizes_and_types(driver):
    c = driver.client
    # Default 1 GiB; sizes rounded up to whole MiB; the image is exactly that big.
    v = twice(create, c, "size-default", req=0)
    assert v.capacity_bytes == GiB
    v = twice(create, c, "size-odd", req=20 * MiB + 1, lim=30 * MiB)
    assert v.capacity_bytes == 21 * MiB
    assert os.stat(image_path(driver, v.volume_id)).st_size == 21 * MiB
    assert dict(v.accessible_topology[0].segments) == {TOPO_KEY: driver.node_id}
    # Each file system's minimum: ext4 16 MiB, btrfs 109 MiB, xfs 300 MiB; block 1 MiB.
    assert create(c, "min-ext4", req=1).capacity_bytes == 16 * MiB
    assert create(c, "min-btrfs", caps=[mount_cap("btrfs")], req=1).capacity_bytes == 109 * MiB
    assert create(c, "min-xfs", req=1, params={"fsType": "xfs"}).capacity_bytes == 300 * MiB
    assert create(c, "min-block", caps=[block_cap()], req=1).capacity_bytes == MiB
    # ReadWriteOncePod and friends: the single-node modes.
    for mode in ("SINGLE_NODE_SINGLE_WRITER", "SINGLE_NODE_MULTI_WRITER",
                 "SINGLE_NODE_READER_ONLY"):
        twice(create, c, "mode-" + mode.lower(), caps=[mount_cap("", mode)])


def test_create_fs_type_reaches_the_node(driver):
    """fsType from the StorageClass decides the file system made at stage time."""
    c = driver.client
    v = create(c, "fs-param", req=300 * MiB, params={"fsType": "xfs"})
    staging = os.path.join(driver.root, "staging", "fs-param")
    os.makedirs(staging)
    c.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
           volume_capability=mount_cap(""))
    assert mount_entry(staging) == "xfs"
    c.node("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)


def test_create_mkfs_options(driver):
    """mkfsOptions travel with the volume to the helper, which checks them at stage time."""
    c = driver.client
    v = twice(create, c, "mkfs-ok", params={"mkfsOptions": "-m 0"})
    staging = os.path.join(driver.root, "staging", "mkfs-ok")
    os.makedirs(staging)
    c.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
           volume_capability=mount_cap(""))
    c.node("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)
    sb = subprocess.run(["dumpe2fs", "-h", image_path(driver, v.volume_id)],
                        capture_output=True, text=True, check=True).stdout
    assert re.search(r"^Reserved block count:\s+0$", sb, re.M)  # -m 0 was applied
    # An option outside the policy: the volume exists, staging it is refused.
    v = create(c, "mkfs-bad", params={"mkfsOptions": "-d /etc"})
    staging = os.path.join(driver.root, "staging", "mkfs-bad")
    os.makedirs(staging)
    assert code_of(c.node, "NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
                   volume_capability=mount_cap("")) == grpc.StatusCode.INVALID_ARGUMENT
    assert mount_entry(staging) is None


@pytest.mark.parametrize("kw,code", [
    (dict(name=""), "INVALID_ARGUMENT"),
    (dict(name="x" * 129), "INVALID_ARGUMENT"),
    (dict(caps="none"), "INVALID_ARGUMENT"),
    (dict(caps=[mount_cap("", "MULTI_NODE_MULTI_WRITER")]), "INVALID_ARGUMENT"),
    (dict(caps=[mount_cap("", "MULTI_NODE_READER_ONLY")]), "INVALID_ARGUMENT"),
    (dict(caps=[mount_cap("ntfs")]), "INVALID_ARGUMENT"),
    (dict(caps=[mount_cap("ext4"), mount_cap("xfs")]), "INVALID_ARGUMENT"),
    (dict(caps=[mount_cap(""), block_cap()]), "INVALID_ARGUMENT"),
    (dict(params={"fsType": "xfs"}, caps=[mount_cap("ext4")]), "INVALID_ARGUMENT"),
    (dict(params={"fsType": "zfs"}), "INVALID_ARGUMENT"),
    (dict(params={"noSuchKey": "1"}), "INVALID_ARGUMENT"),
    (dict(mutable={"noSuchKey": "1"}), "INVALID_ARGUMENT"),
    (dict(mutable={"expandLimitBytes": "1Mi"}), "INVALID_ARGUMENT"),
    (dict(req=-1), "INVALID_ARGUMENT"),
    (dict(req=20 * MiB, lim=10 * MiB), "INVALID_ARGUMENT"),
    (dict(req=1, lim=1), "OUT_OF_RANGE"),
    (dict(lim=200 * MiB, params={"fsType": "xfs"}), "OUT_OF_RANGE"),
    (dict(lim=100 * MiB, caps=[mount_cap("btrfs")]), "OUT_OF_RANGE"),
    (dict(req=1 << 40), "RESOURCE_EXHAUSTED"),
])
def test_create_errors(driver, kw, code):
    c = driver.client
    caps = kw.pop("caps", None)
    if caps == "none":
        assert code_of(c.controller, "CreateVolume", name="bad") == grpc.StatusCode.INVALID_ARGUMENT
        return
    name = kw.pop("name", "bad-create")
    assert code_of(create, c, name, caps=caps, **kw) == getattr(grpc.StatusCode, code)
    assert os.listdir(os.path.join(driver.data, "images")) == []


def test_create_topology(driver):
    c = driver.client
    pb = c.pb
    here = pb.Topology(segments={TOPO_KEY: driver.node_id})
    there = pb.Topology(segments={TOPO_KEY: "elsewhere"})
    v = twice(create, c, "topo-here",
              accessibility_requirements=pb.TopologyRequirement(requisite=[there, here],
                                                                preferred=[here]))
    assert dict(v.accessible_topology[0].segments) == {TOPO_KEY: driver.node_id}
    twice(create, c, "topo-preferred",
          accessibility_requirements=pb.TopologyRequirement(preferred=[there, here]))
    # Not this node: RESOURCE_EXHAUSTED, so the scheduler tries another.
    assert code_of(create, c, "topo-there",
                   accessibility_requirements=pb.TopologyRequirement(requisite=[there])) == \
        grpc.StatusCode.RESOURCE_EXHAUSTED
    # The same name again, but not here: the volume exists and is incompatible.
    assert code_of(create, c, "topo-here",
                   accessibility_requirements=pb.TopologyRequirement(requisite=[there])) == \
        grpc.StatusCode.ALREADY_EXISTS


def test_create_idempotency(driver):
    c = driver.client
    v = create(c, "same", req=40 * MiB, params={"csi.storage.k8s.io/pvc/name": "a"})
    # The sidecars' metadata does not make a request different; a smaller required
    # size with a limit the volume meets is the same volume too.
    again = create(c, "same", req=40 * MiB, params={"csi.storage.k8s.io/pvc/name": "b"})
    assert again == v
    assert create(c, "same", req=20 * MiB, lim=40 * MiB) == v
    for kw in (dict(req=80 * MiB), dict(req=MiB, lim=30 * MiB),
               dict(params={"fsType": "xfs"}), dict(caps=[block_cap()]),
               dict(params={"mkfsOptions": "-m 0"}),
               dict(mutable={"expandLimitBytes": "1Gi"})):
        assert code_of(create, c, "same", **kw) == grpc.StatusCode.ALREADY_EXISTS, kw
    assert len(os.listdir(os.path.join(driver.data, "images"))) == 1


def test_delete(driver, paths):
    c = driver.client
    staging, target = paths
    v = create(c, "del")
    # In use (staged, node-published, controller-published): FAILED_PRECONDITION, image kept.
    c.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
           volume_capability=mount_cap(""))
    assert code_of(c.controller, "DeleteVolume", volume_id=v.volume_id) == \
        grpc.StatusCode.FAILED_PRECONDITION
    c.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
           target_path=target, volume_capability=mount_cap(""))
    assert code_of(c.controller, "DeleteVolume", volume_id=v.volume_id) == \
        grpc.StatusCode.FAILED_PRECONDITION
    c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=target)
    c.node("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)
    c.controller("ControllerPublishVolume", volume_id=v.volume_id, node_id=driver.node_id,
                 volume_capability=mount_cap(""))
    assert code_of(c.controller, "DeleteVolume", volume_id=v.volume_id) == \
        grpc.StatusCode.FAILED_PRECONDITION
    assert os.path.exists(image_path(driver, v.volume_id))
    c.controller("ControllerUnpublishVolume", volume_id=v.volume_id, node_id=driver.node_id)
    twice(c.controller, "DeleteVolume", volume_id=v.volume_id)
    assert not os.path.exists(image_path(driver, v.volume_id))
    assert code_of(c.controller, "DeleteVolume") == grpc.StatusCode.INVALID_ARGUMENT


def test_controller_publish(driver):
    c = driver.client
    v = create(c, "pub")
    b = create(c, "pub-blk", caps=[block_cap()])
    node = driver.node_id
    cap = mount_cap("")
    r = twice(c.controller, "ControllerPublishVolume", volume_id=v.volume_id, node_id=node,
              volume_capability=cap, readonly=True)
    assert dict(r.publish_context) == {}
    E = grpc.StatusCode
    cases = [
        # already published there, differently
        (dict(volume_id=v.volume_id, node_id=node, volume_capability=cap, readonly=False),
         E.ALREADY_EXISTS),
        (dict(volume_id=v.volume_id, node_id=node, readonly=True,
              volume_capability=mount_cap("", "SINGLE_NODE_READER_ONLY")), E.ALREADY_EXISTS),
        # unknown volume, unknown node
        (dict(volume_id="sv-" + "1" * 32, node_id=node, volume_capability=cap), E.NOT_FOUND),
        (dict(volume_id="../x", node_id=node, volume_capability=cap), E.NOT_FOUND),
        (dict(volume_id=v.volume_id, node_id="other-node", volume_capability=cap), E.NOT_FOUND),
        # missing fields, a capability the volume does not have
        (dict(node_id=node, volume_capability=cap), E.INVALID_ARGUMENT),
        (dict(volume_id=v.volume_id, volume_capability=cap), E.INVALID_ARGUMENT),
        (dict(volume_id=v.volume_id, node_id=node), E.INVALID_ARGUMENT),
        (dict(volume_id=b.volume_id, node_id=node, volume_capability=cap), E.INVALID_ARGUMENT),
        (dict(volume_id=v.volume_id, node_id=node,
              volume_capability=mount_cap("", "MULTI_NODE_MULTI_WRITER")), E.INVALID_ARGUMENT),
    ]
    for fields, code in cases:
        assert code_of(c.controller, "ControllerPublishVolume", **fields) == code, fields
    twice(c.controller, "ControllerPublishVolume", volume_id=b.volume_id, node_id=node,
          volume_capability=block_cap())

    got = c.controller("ControllerGetVolume", volume_id=v.volume_id)
    assert list(got.status.published_node_ids) == [node]

    twice(c.controller, "ControllerUnpublishVolume", volume_id=v.volume_id, node_id=node)
    # Unknown volume or node, or no node at all: nothing to do, OK.
    c.controller("ControllerUnpublishVolume", volume_id="sv-" + "2" * 32, node_id=node)
    c.controller("ControllerUnpublishVolume", volume_id=v.volume_id, node_id="other-node")
    twice(c.controller, "ControllerUnpublishVolume", volume_id=b.volume_id)
    assert code_of(c.controller, "ControllerUnpublishVolume", node_id=node) == \
        E.INVALID_ARGUMENT
    got = c.controller("ControllerGetVolume", volume_id=b.volume_id)
    assert list(got.status.published_node_ids) == []


def test_controller_publish_max_volumes():
    d = Driver(extra_args=["--max-volumes-per-node", "1"])
    try:
        c = d.client
        a = create(c, "max-a")
        b = create(c, "max-b")
        c.controller("ControllerPublishVolume", volume_id=a.volume_id, node_id=d.node_id,
                     volume_capability=mount_cap(""))
        assert code_of(c.controller, "ControllerPublishVolume", volume_id=b.volume_id,
                       node_id=d.node_id, volume_capability=mount_cap("")) == \
            grpc.StatusCode.RESOURCE_EXHAUSTED
        c.controller("ControllerUnpublishVolume", volume_id=a.volume_id, node_id=d.node_id)
        c.controller("ControllerPublishVolume", volume_id=b.volume_id, node_id=d.node_id,
                     volume_capability=mount_cap(""))
    finally:
        d.stop()
        d.cleanup()


def test_validate_volume_capabilities(driver):
    c = driver.client
    v = create(c, "val", req=300 * MiB, params={"fsType": "xfs"},
               mutable={"expandLimitBytes": "2Gi"})
    caps = [mount_cap("xfs"), mount_cap("", "SINGLE_NODE_MULTI_WRITER")]
    r = twice(c.controller, "ValidateVolumeCapabilities", volume_id=v.volume_id,
              volume_capabilities=caps, parameters={"fsType": "xfs"},
              mutable_parameters={"expandLimitBytes": "2Gi"},
              volume_context={"storage.kubernetes.io/csiProvisionerIdentity": "x"})
    assert list(r.confirmed.volume_capabilities) == caps
    assert dict(r.confirmed.parameters) == {"fsType": "xfs"}
    for kw in (dict(volume_capabilities=[block_cap()]),
               dict(volume_capabilities=[mount_cap("ext4")]),
               dict(volume_capabilities=[mount_cap("", "MULTI_NODE_MULTI_WRITER")]),
               dict(volume_capabilities=caps, parameters={"fsType": "ext4"}),
               dict(volume_capabilities=caps, parameters={"unknown": "1"}),
               dict(volume_capabilities=caps, mutable_parameters={"expandLimitBytes": "1Gi"})):
        r = c.controller("ValidateVolumeCapabilities", volume_id=v.volume_id, **kw)
        assert not r.HasField("confirmed") and r.message, kw
    E = grpc.StatusCode
    assert code_of(c.controller, "ValidateVolumeCapabilities", volume_id="sv-" + "3" * 32,
                   volume_capabilities=caps) == E.NOT_FOUND
    assert code_of(c.controller, "ValidateVolumeCapabilities",
                   volume_capabilities=caps) == E.INVALID_ARGUMENT
    assert code_of(c.controller, "ValidateVolumeCapabilities",
                   volume_id=v.volume_id) == E.INVALID_ARGUMENT
    assert code_of(c.controller, "ValidateVolumeCapabilities", volume_id=v.volume_id,
                   volume_capabilities=[c.pb.VolumeCapability(
                       mount=c.pb.VolumeCapability.MountVolume())]) == E.INVALID_ARGUMENT


def list_all(c, max_entries):
    seen, token, pages = [], "", 0
    while True:
        r = c.controller("ListVolumes", max_entries=max_entries, starting_token=token)
        assert max_entries == 0 or len(r.entries) <= max_entries
        seen += [e.volume.volume_id for e in r.entries]
        pages += 1
        token = r.next_token
        if not token:
            return seen, pages


def test_list_volumes(driver):
    c = driver.client
    ids = sorted(create(c, "list-%d" % i).volume_id for i in range(7))
    r = twice(c.controller, "ListVolumes")
    assert sorted(e.volume.volume_id for e in r.entries) == ids and not r.next_token
    for e in r.entries:
        assert e.volume.capacity_bytes == 32 * MiB
        assert e.status.volume_condition.abnormal is False
        assert list(e.status.published_node_ids) == []
    assert list_all(c, 3) == (ids, 3)
    assert list_all(c, 1) == (ids, 7)
    assert list_all(c, 7) == (ids, 1)
    # Tokens stay valid while volumes come and go, even the one a token names.
    r = c.controller("ListVolumes", max_entries=2)
    token = r.next_token
    c.controller("DeleteVolume", volume_id=token)
    new = create(c, "list-new").volume_id
    rest, _ = list_all_from(c, token)
    assert set(rest) == {i for i in ids if i > token} | ({new} if new > token else set())
    # Published nodes.
    first = min(ids[0], new)
    c.controller("ControllerPublishVolume", volume_id=first, node_id=driver.node_id,
                 volume_capability=mount_cap(""))
    r = c.controller("ListVolumes", max_entries=1)
    assert r.entries[0].volume.volume_id == first
    assert list(r.entries[0].status.published_node_ids) == [driver.node_id]
    E = grpc.StatusCode
    assert code_of(c.controller, "ListVolumes", starting_token="garbage") == E.ABORTED
    assert code_of(c.controller, "ListVolumes", starting_token="ss-" + "0" * 32) == E.ABORTED
    assert code_of(c.controller, "ListVolumes", max_entries=-1) == E.INVALID_ARGUMENT


def list_all_from(c, token):
    seen = []
    while True:
        r = c.controller("ListVolumes", max_entries=2, starting_token=token)
        seen += [e.volume.volume_id for e in r.entries]
        token = r.next_token
        if not token:
            return seen, None


def test_get_capacity(driver):
    c = driver.client
    pb = c.pb
    st = os.statvfs(driver.data)
    free = st.f_bavail * st.f_frsize
    r = c.controller("GetCapacity")
    assert abs(r.available_capacity - free) < 256 * MiB  # the same file system, moments apart
    assert abs(c.controller("GetCapacity").available_capacity - r.available_capacity) < 256 * MiB
    assert r.maximum_volume_size.value == r.available_capacity // MiB * MiB
    assert r.minimum_volume_size.value == 16 * MiB
    here = pb.Topology(segments={TOPO_KEY: driver.node_id})
    there = pb.Topology(segments={TOPO_KEY: "elsewhere"})
    assert c.controller("GetCapacity", accessible_topology=here).available_capacity > 0
    assert c.controller("GetCapacity", accessible_topology=there).available_capacity == 0
    r = c.controller("GetCapacity", volume_capabilities=[mount_cap("xfs")])
    assert r.available_capacity > 0 and r.minimum_volume_size.value == 300 * MiB
    r = c.controller("GetCapacity", parameters={"fsType": "btrfs"})
    assert r.minimum_volume_size.value == 109 * MiB
    r = c.controller("GetCapacity", volume_capabilities=[block_cap()])
    assert r.available_capacity > 0 and r.minimum_volume_size.value == MiB
    # Capabilities no volume here can have: no capacity for them.
    for caps in ([mount_cap("", "MULTI_NODE_MULTI_WRITER")], [mount_cap("vfat")],
                 [mount_cap(""), block_cap()]):
        assert c.controller("GetCapacity", volume_capabilities=caps).available_capacity == 0
    E = grpc.StatusCode
    assert code_of(c.controller, "GetCapacity", parameters={"color": "blue"}) == \
        E.INVALID_ARGUMENT
    assert code_of(c.controller, "GetCapacity", volume_capabilities=[pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume())]) == E.INVALID_ARGUMENT


def test_get_volume_and_condition(driver):
    c = driver.client
    v = create(c, "cond")
    r = twice(c.controller, "ControllerGetVolume", volume_id=v.volume_id)
    assert r.volume == v
    assert r.status.volume_condition.abnormal is False and r.status.volume_condition.message
    # The image vanishes behind the driver's back: abnormal, and ListVolumes says so too.
    os.unlink(image_path(driver, v.volume_id))
    r = c.controller("ControllerGetVolume", volume_id=v.volume_id)
    assert r.status.volume_condition.abnormal is True
    assert "missing" in r.status.volume_condition.message
    entries = c.controller("ListVolumes").entries
    assert [e.status.volume_condition.abnormal for e in entries] == [True]
    E = grpc.StatusCode
    assert code_of(c.controller, "ControllerGetVolume", volume_id="sv-" + "4" * 32) == \
        E.NOT_FOUND
    assert code_of(c.controller, "ControllerGetVolume", volume_id="/etc") == E.NOT_FOUND
    assert code_of(c.controller, "ControllerGetVolume") == E.INVALID_ARGUMENT


def test_expand(driver, paths):
    c = driver.client
    pb = c.pb
    staging, target = paths
    v = create(c, "grow", req=300 * MiB, params={"fsType": "xfs"})
    c.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
           volume_capability=mount_cap(""))
    c.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
           target_path=target, volume_capability=mount_cap(""))
    before = os.statvfs(target)
    r = twice(c.controller, "ControllerExpandVolume", volume_id=v.volume_id,
              capacity_range=pb.CapacityRange(required_bytes=400 * MiB),
              volume_capability=mount_cap("xfs"))
    assert r.capacity_bytes == 400 * MiB and r.node_expansion_required
    assert os.stat(image_path(driver, v.volume_id)).st_size == 400 * MiB
    # Online: the node grows the mounted file system.
    c.node("NodeExpandVolume", volume_id=v.volume_id, volume_path=target,
           staging_target_path=staging, capacity_range=pb.CapacityRange(required_bytes=400 * MiB))
    s = os.statvfs(target)
    assert (s.f_blocks - before.f_blocks) * s.f_frsize == 100 * MiB
    # Already that big: OK and nothing changes.
    r = c.controller("ControllerExpandVolume", volume_id=v.volume_id,
                     capacity_range=pb.CapacityRange(required_bytes=100 * MiB))
    assert r.capacity_bytes == 400 * MiB
    # Raw block: nothing for the node to do.
    b = create(c, "grow-blk", caps=[block_cap()], req=8 * MiB)
    r = twice(c.controller, "ControllerExpandVolume", volume_id=b.volume_id,
              capacity_range=pb.CapacityRange(required_bytes=16 * MiB))
    assert r.capacity_bytes == 16 * MiB and not r.node_expansion_required
    E = grpc.StatusCode
    cases = [
        (dict(volume_id=v.volume_id, capacity_range=pb.CapacityRange(required_bytes=500 * MiB),
              volume_capability=block_cap()), E.INVALID_ARGUMENT),
        (dict(volume_id=v.volume_id), E.INVALID_ARGUMENT),
        (dict(capacity_range=pb.CapacityRange(required_bytes=GiB)), E.INVALID_ARGUMENT),
        (dict(volume_id="sv-" + "5" * 32, capacity_range=pb.CapacityRange(required_bytes=GiB)),
         E.NOT_FOUND),
        (dict(volume_id=v.volume_id,
              capacity_range=pb.CapacityRange(required_bytes=MiB, limit_bytes=200 * MiB)),
         E.OUT_OF_RANGE),
        (dict(volume_id=v.volume_id, capacity_range=pb.CapacityRange(required_bytes=1 << 40)),
         E.RESOURCE_EXHAUSTED),
    ]
    for fields, code in cases:
        assert code_of(c.controller, "ControllerExpandVolume", **fields) == code, fields
    assert os.stat(image_path(driver, v.volume_id)).st_size == 400 * MiB
    c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=target)
    c.node("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)


def test_modify(driver):
    c = driver.client
    pb = c.pb
    v = create(c, "mod", req=64 * MiB, mutable={"expandLimitBytes": "128Mi"})
    grow = dict(volume_id=v.volume_id, capacity_range=pb.CapacityRange(required_bytes=256 * MiB))
    assert code_of(c.controller, "ControllerExpandVolume", **grow) == grpc.StatusCode.OUT_OF_RANGE
    twice(c.controller, "ControllerModifyVolume", volume_id=v.volume_id,
          mutable_parameters={"expandLimitBytes": "256Mi"})
    assert c.controller("ControllerExpandVolume", **grow).capacity_bytes == 256 * MiB
    E = grpc.StatusCode
    for fields, code in [
            (dict(volume_id=v.volume_id, mutable_parameters={"iops": "100"}), E.INVALID_ARGUMENT),
            (dict(volume_id=v.volume_id, mutable_parameters={"expandLimitBytes": "64Mi"}),
             E.INVALID_ARGUMENT),
            (dict(volume_id=v.volume_id), E.INVALID_ARGUMENT),
            (dict(mutable_parameters={"expandLimitBytes": "0"}), E.INVALID_ARGUMENT),
            (dict(volume_id="sv-" + "6" * 32, mutable_parameters={"expandLimitBytes": "0"}),
             E.NOT_FOUND)]:
        assert code_of(c.controller, "ControllerModifyVolume", **fields) == code, fields
    twice(c.controller, "ControllerModifyVolume", volume_id=v.volume_id,
          mutable_parameters={"expandLimitBytes": "0"})
    r = c.controller("ControllerExpandVolume", volume_id=v.volume_id,
                     capacity_range=pb.CapacityRange(required_bytes=GiB))
    assert r.capacity_bytes == GiB
    # The modified value is what ValidateVolumeCapabilities confirms now.
    r = c.controller("ValidateVolumeCapabilities", volume_id=v.volume_id,
                     volume_capabilities=[mount_cap("")],
                     mutable_parameters={"expandLimitBytes": "0"})
    assert r.HasField("confirmed")
