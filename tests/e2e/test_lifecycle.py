"""One volume through its whole CSI life, with real loop devices, mkfs and
mounts; every call is repeated to prove it is idempotent."""
import errno
import os
import time

import grpc
import pytest

from csi_client import mount_cap
from conftest import Driver, loops_backed_by, mounts_under, running

GiB = 1 << 30
MiB = 1 << 20


def mountinfo_lines():
    with open("/proc/self/mountinfo") as f:
        return f.read().splitlines()


def mount_entry(path):
    """(fields, super options) of the mount at path, or None."""
    for line in mountinfo_lines():
        f = line.split()
        if f[4] == path:
            sep = f.index("-")
            return f, f[sep + 3]
    return None


def twice(fn, *args, **kw):
    """Call fn twice with the same arguments; both must succeed with equal answers."""
    a = fn(*args, **kw)
    b = fn(*args, **kw)
    assert a == b
    return a


def test_identity(driver):
    c = driver.client
    info = c.identity("GetPluginInfo")
    assert info.name == "local.sepcsi.io"
    assert info.vendor_version
    caps = c.identity("GetPluginCapabilities")
    services = {cap.service.type for cap in caps.capabilities if cap.HasField("service")}
    pb = c.pb
    assert pb.PluginCapability.Service.CONTROLLER_SERVICE in services
    assert pb.PluginCapability.Service.VOLUME_ACCESSIBILITY_CONSTRAINTS in services
    exp = [cap.volume_expansion.type for cap in caps.capabilities
           if cap.HasField("volume_expansion")]
    assert exp == [pb.PluginCapability.VolumeExpansion.ONLINE]
    probe = c.identity("Probe")
    assert probe.HasField("ready") and probe.ready.value


def test_node_info_and_capabilities(driver):
    c = driver.client
    info = c.node("NodeGetInfo")
    assert info.node_id == driver.node_id
    assert dict(info.accessible_topology.segments) == {"topology.sepcsi.io/node": driver.node_id}
    caps = c.node("NodeGetCapabilities")
    assert c.pb.NodeServiceCapability.RPC.STAGE_UNSTAGE_VOLUME in \
        {cap.rpc.type for cap in caps.capabilities}
    ccaps = c.controller("ControllerGetCapabilities")
    assert c.pb.ControllerServiceCapability.RPC.CREATE_DELETE_VOLUME in \
        {cap.rpc.type for cap in ccaps.capabilities}


def test_whole_lifecycle(driver, paths):
    c = driver.client
    staging, target = paths
    cap = mount_cap("ext4")

    # Create (idempotent by name: same id, same answer)
    vol = twice(c.controller, "CreateVolume", name="pvc-life", volume_capabilities=[cap],
                capacity_range=c.pb.CapacityRange(required_bytes=64 * MiB))
    vid = vol.volume.volume_id
    assert vol.volume.capacity_bytes >= 64 * MiB
    assert dict(vol.volume.accessible_topology[0].segments) == \
        {"topology.sepcsi.io/node": driver.node_id}
    images = os.listdir(os.path.join(driver.data, "images"))
    assert images == [vid + ".img"]

    # Stage: a loop device backed by the image, formatted ext4, mounted nosuid,nodev
    twice(c.node, "NodeStageVolume", volume_id=vid, staging_target_path=staging,
          volume_capability=cap)
    fields, _ = mount_entry(staging)
    assert fields[fields.index("-") + 1] == "ext4"
    assert "nosuid" in fields[5] and "nodev" in fields[5]
    assert len(loops_backed_by(driver.data)) == 1
    before = len(mountinfo_lines())

    # Publish: a bind mount at the target the driver creates
    twice(c.node, "NodePublishVolume", volume_id=vid, staging_target_path=staging,
          target_path=target, volume_capability=cap, readonly=False)
    assert len(mountinfo_lines()) == before + 1  # the repeat stacked nothing
    with open(os.path.join(target, "hello.txt"), "w") as f:
        f.write("kept across unstage")

    twice(c.node, "NodeUnpublishVolume", volume_id=vid, target_path=target)
    assert not os.path.exists(target)
    twice(c.node, "NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    assert mount_entry(staging) is None
    assert loops_backed_by(driver.data) == []

    # Stage again: the data is still there (no second mkfs)
    twice(c.node, "NodeStageVolume", volume_id=vid, staging_target_path=staging,
          volume_capability=cap)
    with open(os.path.join(staging, "hello.txt")) as f:
        assert f.read() == "kept across unstage"

    # Publish read-only: writes fail
    twice(c.node, "NodePublishVolume", volume_id=vid, staging_target_path=staging,
          target_path=target, volume_capability=cap, readonly=True)
    fields, _ = mount_entry(target)
    assert fields[5].split(",")[0] == "ro"
    with pytest.raises(OSError) as e:
        open(os.path.join(target, "nope.txt"), "w")
    assert e.value.errno == errno.EROFS
    with open(os.path.join(target, "hello.txt")) as f:
        assert f.read() == "kept across unstage"

    twice(c.node, "NodeUnpublishVolume", volume_id=vid, target_path=target)
    twice(c.node, "NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    twice(c.controller, "DeleteVolume", volume_id=vid)

    # Nothing of the test remains: no image, no mount, no loop device
    assert os.listdir(os.path.join(driver.data, "images")) == []
    assert mounts_under(driver.root) == []
    assert loops_backed_by(driver.data) == []


def test_create_same_name_incompatible(driver):
    c = driver.client
    cap = mount_cap("ext4")
    c.controller("CreateVolume", name="pvc-x", volume_capabilities=[cap],
                 capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB))
    with pytest.raises(grpc.RpcError) as e:
        c.controller("CreateVolume", name="pvc-x", volume_capabilities=[cap],
                     capacity_range=c.pb.CapacityRange(required_bytes=2 * GiB))
    assert e.value.code() == grpc.StatusCode.ALREADY_EXISTS


def test_capacity_range_honoured(driver):
    c = driver.client
    cap = mount_cap("ext4")
    v = c.controller("CreateVolume", name="pvc-cap", volume_capabilities=[cap],
                     capacity_range=c.pb.CapacityRange(required_bytes=100 * MiB + 1,
                                                       limit_bytes=200 * MiB))
    assert 100 * MiB < v.volume.capacity_bytes <= 200 * MiB
    size = os.stat(os.path.join(driver.data, "images", v.volume.volume_id + ".img")).st_size
    assert size == v.volume.capacity_bytes
    with pytest.raises(grpc.RpcError) as e:
        c.controller("CreateVolume", name="pvc-tiny", volume_capabilities=[cap],
                     capacity_range=c.pb.CapacityRange(required_bytes=1, limit_bytes=1))
    assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE


def test_delete_unknown_volume_is_ok(driver):
    c = driver.client
    c.controller("DeleteVolume", volume_id="sv-" + "0" * 32)
    c.controller("DeleteVolume", volume_id="no-such-volume")


def test_sigterm_stops_cleanly(driver):
    """SIGTERM: rpcd drains and exits, then the helper; status 0; no seccomp kill anywhere."""
    driver.client.identity("Probe")
    assert driver.stop() == 0
    logs = driver.logs()
    assert "SIGSYS" not in logs
    assert 'child_exited role=rpcd' in logs and 'how="exit 0"' in logs


@pytest.fixture
def quiet_driver():
    """A driver with no metrics report, whose CAPACITY every interval would be an answer
    from the helper that the test does not control."""
    yield from running(Driver(extra_args=["--metrics-file", "none"]))


def test_probe_asks_the_helper_only_when_it_has_not_answered_lately(quiet_driver):
    """Probe is ready when the helper answered on the current channel within a second;
    otherwise it asks (PING). So a burst of Probes right after other work costs no helper
    round trip, and an idle driver's Probe still reaches the helper."""
    d = quiet_driver
    c = d.client

    def pings():
        return d.logs().count("op=PING ")

    c.controller("GetCapacity")  # the helper answers CAPACITY
    before = pings()
    t0 = time.monotonic()
    for _ in range(50):
        assert c.identity("Probe").ready.value
    elapsed = time.monotonic() - t0
    # At most one PING per second of the burst (each answer counts for a second), not 50.
    assert pings() - before <= 1 + int(elapsed)
    time.sleep(1.3)  # nothing else asks the helper meanwhile
    before = pings()
    assert c.identity("Probe").ready.value
    deadline = time.monotonic() + 5
    while pings() == before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pings() == before + 1


def test_concurrent_raw_block_lifecycles_see_no_other_volumes_binds(driver):
    """Eight clients run raw block lifecycles side by side (stage, publish, unpublish,
    unstage, delete). A bind of another volume's device that is unmounted while a worker
    looks at every mount for its own device's users is gone, not a user: no unstage is
    refused as "still published" (before, a few in two hundred were, at a mount point the
    helper could no longer name), and nothing is left attached or mounted."""
    import threading
    from csi_client import block_cap
    c, errors = driver.client, []

    def lifecycles(k):
        for i in range(25):
            try:
                vid = c.controller("CreateVolume", name="conc-%d-%d" % (k, i),
                                   volume_capabilities=[block_cap()],
                                   capacity_range=c.pb.CapacityRange(required_bytes=1 << 20)
                                   ).volume.volume_id
                staging = os.path.join(driver.root, "staging", "c%d-%d" % (k, i))
                os.makedirs(staging)
                target = os.path.join(driver.root, "pods", "c%d-%d" % (k, i), "dev")
                os.makedirs(os.path.dirname(target))
                c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
                       volume_capability=block_cap())
                c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
                       target_path=target, volume_capability=block_cap())
                c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
                c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
                c.controller("DeleteVolume", volume_id=vid)
            except grpc.RpcError as e:
                errors.append((k, i, e.code(), e.details()))

    threads = [threading.Thread(target=lifecycles, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert loops_backed_by(driver.data) == []
    assert mounts_under(driver.root) == []
