"""Bad requests get the spec's gRPC codes with a message naming the problem,
and hostile paths or ids touch nothing on the host."""
import os

import grpc
import pytest

from csi_client import mount_cap
from conftest import loops_backed_by, mounts_under

MiB = 1 << 20


def code_of(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code(), e.value.details()


def test_unknown_method_unimplemented(driver):
    code, _ = code_of(driver.client.raw, "Controller", "NoSuchMethod", b"")
    assert code == grpc.StatusCode.UNIMPLEMENTED
    code, _ = code_of(driver.client.raw, "Elsewhere", "GetPluginInfo", b"")
    assert code == grpc.StatusCode.UNIMPLEMENTED


def test_undecodable_request_invalid_argument(driver):
    # field 1, wire type 2 (length-delimited), length 100, but only 2 bytes follow
    code, msg = code_of(driver.client.raw, "Controller", "CreateVolume", b"\x0a\x64ab")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "decode" in msg


@pytest.mark.parametrize("method,fields,field", [
    ("CreateVolume", {}, "name"),
    ("CreateVolume", {"name": "v"}, "volume_capabilities"),
    ("DeleteVolume", {}, "volume_id"),
])
def test_controller_missing_fields(driver, method, fields, field):
    code, msg = code_of(driver.client.controller, method, **fields)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert field in msg


def test_node_missing_fields(driver, paths):
    c = driver.client
    staging, target = paths
    cap = mount_cap()
    vid = "sv-" + "1" * 32
    cases = [
        ("NodeStageVolume", dict(staging_target_path=staging, volume_capability=cap), "volume_id"),
        ("NodeStageVolume", dict(volume_id=vid, volume_capability=cap), "staging_target_path"),
        ("NodeStageVolume", dict(volume_id=vid, staging_target_path=staging), "volume_capability"),
        ("NodeUnstageVolume", dict(staging_target_path=staging), "volume_id"),
        ("NodeUnstageVolume", dict(volume_id=vid), "staging_target_path"),
        ("NodePublishVolume", dict(staging_target_path=staging, target_path=target,
                                   volume_capability=cap), "volume_id"),
        ("NodePublishVolume", dict(volume_id=vid, staging_target_path=staging,
                                   volume_capability=cap), "target_path"),
        ("NodePublishVolume", dict(volume_id=vid, staging_target_path=staging,
                                   target_path=target), "volume_capability"),
        ("NodeUnpublishVolume", dict(target_path=target), "volume_id"),
        ("NodeUnpublishVolume", dict(volume_id=vid), "target_path"),
    ]
    for method, fields, field in cases:
        code, msg = code_of(c.node, method, **fields)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (method, field, code)
        assert field in msg, (method, field, msg)


def test_unknown_volume_not_found(driver, paths):
    c = driver.client
    staging, target = paths
    vid = "sv-" + "2" * 32
    code, _ = code_of(c.node, "NodeStageVolume", volume_id=vid, staging_target_path=staging,
                      volume_capability=mount_cap())
    assert code == grpc.StatusCode.NOT_FOUND
    code, _ = code_of(c.node, "NodeUnpublishVolume", volume_id=vid, target_path=target)
    assert code == grpc.StatusCode.NOT_FOUND


def test_multi_node_mode_refused(driver):
    code, msg = code_of(driver.client.controller, "CreateVolume", name="mn",
                        volume_capabilities=[mount_cap(mode="MULTI_NODE_MULTI_WRITER")])
    assert code == grpc.StatusCode.INVALID_ARGUMENT


def test_topology_elsewhere_resource_exhausted(driver):
    c = driver.client
    req = c.pb.TopologyRequirement(requisite=[c.pb.Topology(
        segments={"topology.sepcsi.io/node": "another-node"})])
    code, _ = code_of(c.controller, "CreateVolume", name="topo",
                      volume_capabilities=[mount_cap()], accessibility_requirements=req)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED


@pytest.fixture
def volume(driver):
    c = driver.client
    v = c.controller("CreateVolume", name="pvc-hostile", volume_capabilities=[mount_cap()],
                     capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB))
    return v.volume.volume_id


def snapshot_tree(top):
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        if os.path.basename(dirpath) == "metrics":  # the file the supervisor is rewriting
            filenames = [f for f in filenames if not (f.startswith(".") and f.endswith(".tmp"))]
        if os.path.basename(dirpath) == "loops":  # the helper's hints, made at a first attach
            filenames = []
        out.append((dirpath, sorted(dirnames), sorted(filenames)))
    return sorted(out)


def test_paths_outside_allowed_roots_refused(driver, volume, paths):
    c = driver.client
    staging, target = paths
    outside = os.path.join(driver.tmp, "outside")
    os.makedirs(outside)
    # A symlink inside the allowed root that points outside it.
    link = os.path.join(driver.root, "escape")
    os.symlink(outside, link)
    before = snapshot_tree(driver.tmp)
    hostile = [outside, "/etc", "/", driver.root + "/../outside", os.path.join(link, "x"),
               driver.root, "relative/path", driver.root + "/staging/../../outside"]
    for p in hostile:
        code, msg = code_of(c.node, "NodeStageVolume", volume_id=volume, staging_target_path=p,
                            volume_capability=mount_cap())
        assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), (p, code, msg)
    # Publishing onto a hostile target from a good staging path is refused too.
    c.node("NodeStageVolume", volume_id=volume, staging_target_path=staging,
           volume_capability=mount_cap())
    for p in hostile + [os.path.join(link, "target")]:
        code, msg = code_of(c.node, "NodePublishVolume", volume_id=volume,
                            staging_target_path=staging, target_path=p,
                            volume_capability=mount_cap())
        assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), (p, code, msg)
        code, msg = code_of(c.node, "NodeUnpublishVolume", volume_id=volume, target_path=p)
        assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), (p, code, msg)
    assert os.listdir(outside) == []
    assert [m for m in mounts_under(driver.tmp) if m != staging] == []
    c.node("NodeUnstageVolume", volume_id=volume, staging_target_path=staging)
    assert snapshot_tree(driver.tmp) == before
    assert loops_backed_by(driver.data) == []


@pytest.mark.parametrize("vid", ["../../etc", "sv-../../x", "a/b", "..", "/etc/passwd",
                                 "sv-" + "0" * 31 + "/", "SV-" + "0" * 32])
def test_hostile_volume_ids_refused(driver, paths, vid):
    c = driver.client
    staging, target = paths
    before = snapshot_tree(driver.tmp)
    for method, fields in [
        ("NodeStageVolume", dict(staging_target_path=staging, volume_capability=mount_cap())),
        ("NodeUnstageVolume", dict(staging_target_path=staging)),
        ("NodePublishVolume", dict(staging_target_path=staging, target_path=target,
                                   volume_capability=mount_cap())),
        ("NodeUnpublishVolume", dict(target_path=target)),
    ]:
        code, _ = code_of(c.node, method, volume_id=vid, **fields)
        assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND)
    c.controller("DeleteVolume", volume_id=vid)  # OK: no such volume
    assert snapshot_tree(driver.tmp) == before


def test_many_parameters_or_members_answered(driver):
    """Sorting a long map or list (glibc's qsort asks the memory size first) must not
    break rpcd's confinement: many parameters or group members get an answer, and
    rpcd is still the same process afterwards."""
    before = driver.children()["sepcsi-rpcd"]
    params = {"p%04d" % i: "v" for i in range(300)}
    code, msg = code_of(driver.client.controller, "CreateVolume", name="pvc-many-params",
                        parameters=params, volume_capabilities=[mount_cap()],
                        capacity_range={"required_bytes": 16 * MiB})
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "unknown key" in msg
    vids = ["sv-%032x" % i for i in range(300)]
    code, msg = code_of(driver.client.group_controller, "CreateVolumeGroupSnapshot",
                        name="group-many", source_volume_ids=vids)
    assert code == grpc.StatusCode.NOT_FOUND, (code, msg)
    assert driver.children()["sepcsi-rpcd"] == before
