"""Crash consistency, one kill at a time. Each operation of a volume's life is held
at a named point (the helper's test pause points: the temporary image made, the copy
running, the loop device attached, mkfs, the path resolved before the mount, a
directory made but not marked yet, the worker's answer about to be sent or just sent),
and the helper's worker, the helper or rpcd is killed -9 there. The CO then retries the call with the
same arguments until it succeeds, and the volume's life goes on to its end, data
written and read back. At the end nothing may be left: no loop device, mount, image,
temporary file, path in kubelet's tree or store row, and the first attempt must not
have made a second volume or snapshot.

Also: a reboot (every process killed, every mount and loop device torn down behind the
driver) brings staged and published ext4 and raw block volumes back with their data
before the CO asks."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import grpc
import pytest

import csi_client
from conftest import Driver, detach_loop, loops_backed_by, mounts_under, running
from csi_client import block_cap, mount_cap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "chaos"))
import chaos  # noqa: E402

MiB = 1 << 20
SIZE = 32 * MiB
RETRY_SECONDS = 60
CONTROLLER = {"CreateVolume", "DeleteVolume", "CreateSnapshot", "DeleteSnapshot",
              "ControllerExpandVolume", "ListVolumes"}
GROUP_CONTROLLER = {"CreateVolumeGroupSnapshot", "DeleteVolumeGroupSnapshot",
                    "GetVolumeGroupSnapshot"}


def service_of(method):
    return ("controller" if method in CONTROLLER else
            "group_controller" if method in GROUP_CONTROLLER else "node")


@pytest.fixture
def kd():
    """A pausable driver in kubelet's layout that restarts its children without limit."""
    d = Driver(kubelet=True, env={"SEPCSI_TEST_PAUSE": "1"},
               extra_args=["--restart-limit", "100", "--restart-window", "1"])
    d.kubelet = chaos.kubelet_layout(d)
    d.before = chaos.tree(d.root)
    yield from running(d)


def retried(d, method, **fields):
    """The call, retried as a CO retries (every error, a fresh channel each time)."""
    service = service_of(method)
    deadline = time.monotonic() + RETRY_SECONDS
    while True:
        with csi_client.CsiClient(d.endpoint) as c:
            try:
                return getattr(c, service)(method, timeout=30, **fields)
            except grpc.RpcError as e:
                assert time.monotonic() < deadline, "%s never succeeded: %s %s" % (
                    method, e.code(), e.details())
        time.sleep(0.05)


class Attempt(threading.Thread):
    """The first attempt, in a thread: it is held at the pause point meanwhile."""

    def __init__(self, d, method, fields):
        super().__init__(daemon=True)
        self.d, self.method, self.fields = d, method, fields
        self.code = None
        self.start()

    def run(self):
        service = service_of(self.method)
        with csi_client.CsiClient(self.d.endpoint) as c:
            try:
                getattr(c, service)(self.method, timeout=120, **self.fields)
                self.code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                self.code = e.code()


def victim_pid(d, victim, worker):
    if victim == "worker":
        return worker
    return d.children()[chaos.HELPER if victim == "helper" else chaos.RPCD]


class Life:
    """One volume's life, step by step; one step is interrupted as the test says."""

    def __init__(self, d, name, block, method, point, victim):
        self.d, self.name, self.block = d, name, block
        self.method, self.point, self.victim = method, point, victim
        self.ids = {}
        self.first = None  # the interrupted attempt's code
        self.core = False  # the process held was the helper's core, not a worker

    def call(self, method, **fields):
        if method != self.method:
            return retried(self.d, method, **fields)
        point = self.point.format(**self.ids)
        # An unkeyed gate after the work also holds rpcd's start-up reconciliation (its
        # LIST, no key), which may still run: only a request with an id is the one sent.
        keyed = point in ("answering", "answered")
        self.d.hold(point, keyed)
        attempt = Attempt(self.d, method, fields)
        try:
            worker = self.d.paused(point, keyed=keyed)
            with open("/proc/%d/comm" % worker) as f:
                self.core = f.read().strip() == "sepcsi-core"  # the step is the core's
            os.kill(victim_pid(self.d, self.victim, worker), signal.SIGKILL)
        finally:
            self.d.release(point)
        attempt.join(120)
        assert not attempt.is_alive(), "%s stuck after the kill" % method
        self.first = attempt.code
        print("%s held at %s, %s killed: first attempt %s" % (method, point, self.victim,
                                                               attempt.code))
        return retried(self.d, method, **fields)

    def run(self):
        d, k, name = self.d, self.d.kubelet, self.name
        cap = block_cap() if self.block else mount_cap("ext4")
        pb = csi_client.pb
        vid = self.call("CreateVolume", name=name, volume_capabilities=[cap],
                        capacity_range=pb.CapacityRange(required_bytes=SIZE)).volume.volume_id
        self.ids["vid"] = vid
        # The retry (and reconciliation) settled the first attempt: one volume, one image.
        wait_until(lambda: images(d) == [vid], "only the retried volume's image")
        if self.block:
            staging, target = k.block_staging(name), k.block_target(name)
            write, check = chaos.write_block, chaos.check_block
        else:
            staging, target = k.staging(name), k.target(name)
            write, check = chaos.write_fs, chaos.check_fs
        stage = dict(volume_id=vid, staging_target_path=staging, volume_capability=cap)
        self.call("NodeStageVolume", **stage)
        self.call("NodePublishVolume", target_path=target, readonly=False, **stage)
        assert write(target, name) is None
        sid = self.call("CreateSnapshot", name=name + "-snap",
                        source_volume_id=vid).snapshot.snapshot_id
        self.ids["sid"] = sid
        wait_until(lambda: snapshots(d) == [sid], "only the retried snapshot's copy")
        self.call("ControllerExpandVolume", volume_id=vid,
                  capacity_range=pb.CapacityRange(required_bytes=2 * SIZE),
                  volume_capability=cap)
        assert os.path.getsize(image_path(d, vid)) == 2 * SIZE
        self.call("DeleteSnapshot", snapshot_id=sid)
        assert check(target, name) is None
        self.call("NodeUnpublishVolume", volume_id=vid, target_path=target)
        self.call("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
        self.call("DeleteVolume", volume_id=vid)
        # What kubelet removes after unstaging.
        for path in ([staging] if self.block else [staging, os.path.dirname(staging)]) + [
                os.path.dirname(target)]:
            os.rmdir(path)


def wait_until(pred, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "never: " + what
        time.sleep(0.05)


def image_path(d, vid):
    return os.path.join(d.data, "images", vid + ".img")


def listing(d, sub):
    return sorted(n[:-4] for n in os.listdir(os.path.join(d.data, sub)) if n.endswith(".img"))


def images(d):
    return listing(d, "images")


def snapshots(d):
    return listing(d, "snapshots")


def assert_nothing_left(d):
    """No leak of any kind, once reconciliation has had its turn; then no store row."""
    def leaks():
        return {k: v for k, v in chaos.driver_leaks(d, d.before).items() if v}
    deadline = time.monotonic() + 30
    while leaks() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leaks() == {}
    assert len(retried(d, "ListVolumes").entries) == 0
    assert d.stop() == 0
    integrity, rows = chaos.store_check(os.path.join(d.state, chaos.STORE_FILE))
    assert integrity == "ok"
    assert {t: n for t, n in rows.items() if n} == {}


# (method, point, block): a point with {vid} or {sid} holds that volume's or snapshot's
# worker; a point without an id holds the next worker that reaches it.
POINTS = [
    ("CreateVolume", "image", False),
    ("CreateVolume", "answered", False),
    ("NodeStageVolume", "mkfs@{vid}", False),
    ("NodeStageVolume", "mount", False),
    ("NodeStageVolume", "answered@{vid}", False),
    ("NodeStageVolume", "attached@{vid}", True),
    ("NodeStageVolume", "made@{vid}", True),
    ("NodeStageVolume", "answered@{vid}", True),
    ("NodePublishVolume", "made@{vid}", False),
    ("NodePublishVolume", "answered@{vid}", True),
    ("CreateSnapshot", "copy@{vid}", False),
    ("CreateSnapshot", "answered", False),
    ("ControllerExpandVolume", "answered@{vid}", False),
    ("DeleteSnapshot", "answered@{sid}", False),
    ("NodeUnpublishVolume", "answered@{vid}", True),
    ("NodeUnstageVolume", "answered@{vid}", False),
    ("DeleteVolume", "answered@{vid}", False),
]


@pytest.mark.parametrize("victim", ["worker", "helper", "rpcd"])
@pytest.mark.parametrize("method,point,block", POINTS,
                         ids=["%s-%s-%s" % (m, p.split("@")[0], "block" if b else "fs")
                              for m, p, b in POINTS])
def test_kill_at(kd, method, point, block, victim):
    if victim != "worker":
        # The helper forwards a worker's answer as it arrives: to kill the helper or rpcd
        # with the work done and the answer not yet out, hold the worker before it sends.
        point = point.replace("answered", "answering")
    life = Life(kd, "pvc-crash", block, method, point, victim)
    life.run()
    if victim == "helper":  # the answer died with the helper
        assert life.first == grpc.StatusCode.UNAVAILABLE
    elif victim == "worker" and life.core:  # the core, mid-way: the helper ends with it
        assert life.first == grpc.StatusCode.UNAVAILABLE
        # Its reader dies with it (PDEATHSIG), and which of the two channels ends first
        # is the kernel's: the core's closes when its last thread has gone, the reader is
        # killed when the first (its parent) has.
        assert re.search(r"the (capable core|core's reader) ended its channel", kd.logs())
    elif victim == "rpcd":  # the call died with rpcd
        assert life.first == grpc.StatusCode.UNAVAILABLE
    elif point.startswith("answered"):  # a worker killed after its answer: that answer
        assert life.first == grpc.StatusCode.OK
    else:  # a worker killed mid-way is answered for
        assert life.first == grpc.StatusCode.INTERNAL
    if victim == "worker" and not life.core:
        assert kd.logs().count("child_exited") == 0  # nothing but the worker died
    assert_nothing_left(kd)


def test_a_leftover_whose_id_a_request_holds_is_purged_once_that_request_is_over(kd):
    """A dead operation's temporary file whose id a request in flight holds when the helper
    looks (here a snapshot's copy of that volume, which removes nothing of it) is removed
    once that request is over, not forgotten until some later look."""
    d, cap = kd, mount_cap("ext4")
    vid = retried(d, "CreateVolume", name="pvc-held", volume_capabilities=[cap],
                  capacity_range=csi_client.pb.CapacityRange(required_bytes=SIZE)
                  ).volume.volume_id
    left = os.path.join(d.data, "images", vid + ".img.tmp")
    copy = "copy@" + vid
    d.hold(copy)
    snap = Attempt(d, "CreateSnapshot", dict(name="snap-held", source_volume_id=vid))
    try:
        d.paused(copy)
        open(left, "w").close()  # as a create of that id killed long ago would have left it
        # A worker's death makes the helper look for leftovers: one killed making an image.
        d.hold("image")
        other = Attempt(d, "CreateVolume", dict(name="pvc-other", volume_capabilities=[cap],
                                                capacity_range=csi_client.pb.CapacityRange(
                                                    required_bytes=SIZE)))
        os.kill(d.paused("image"), signal.SIGKILL)
        d.release("image")
        other.join(120)
        assert other.code == grpc.StatusCode.INTERNAL, other.code
        wait_until(lambda: not [n for n in os.listdir(os.path.join(d.data, "images"))
                                if n.endswith(".img.tmp") and n != vid + ".img.tmp"],
                   "the killed create's temporary file purged")
        assert os.path.exists(left)  # its id held by the copy: not now
    finally:
        d.release(copy)
    snap.join(120)
    assert snap.code == grpc.StatusCode.OK, snap.code
    wait_until(lambda: not os.path.exists(left), "the held id's temporary file purged after")
    sid = retried(d, "CreateSnapshot", name="snap-held",
                  source_volume_id=vid).snapshot.snapshot_id
    retried(d, "DeleteSnapshot", snapshot_id=sid)
    other = retried(d, "CreateVolume", **other.fields).volume.volume_id  # as the CO retries
    for v in (vid, other):
        retried(d, "DeleteVolume", volume_id=v)
    assert_nothing_left(d)


def test_group_delete_cut_short_is_finished_without_a_retry(kd):
    """DeleteVolumeGroupSnapshot loses rpcd after its first member's copy is gone, and the
    CO never asks again: reconciliation finishes the delete (no member copy, no row)."""
    d, pb, cap = kd, csi_client.pb, mount_cap("ext4")
    vids = [retried(d, "CreateVolume", name="pvc-group-%d" % i, volume_capabilities=[cap],
                    capacity_range=pb.CapacityRange(required_bytes=SIZE)).volume.volume_id
            for i in range(2)]
    g = retried(d, "CreateVolumeGroupSnapshot", name="group",
                source_volume_ids=vids).group_snapshot
    members = sorted(s.snapshot_id for s in g.snapshots)
    point = "answering@" + members[0]  # the store lists members by id: this one goes first
    d.hold(point)
    attempt = Attempt(d, "DeleteVolumeGroupSnapshot",
                      dict(group_snapshot_id=g.group_snapshot_id, snapshot_ids=members))
    try:
        d.paused(point)
        os.kill(d.children()[chaos.RPCD], signal.SIGKILL)
    finally:
        d.release(point)
    attempt.join(120)
    assert attempt.code == grpc.StatusCode.UNAVAILABLE
    wait_until(lambda: snapshots(d) == [], "the group's copies removed by reconciliation")

    def group_gone():
        with csi_client.CsiClient(d.endpoint) as c:
            try:
                c.group_controller("GetVolumeGroupSnapshot",
                                   group_snapshot_id=g.group_snapshot_id, snapshot_ids=members)
            except grpc.RpcError as e:
                return e.code() == grpc.StatusCode.NOT_FOUND
        return False
    wait_until(group_gone, "the group forgotten by reconciliation")
    for vid in vids:
        retried(d, "DeleteVolume", volume_id=vid)
    assert_nothing_left(d)


def test_worker_killed_after_answer_does_not_wedge(kd):
    """Many workers killed right after answering: every later call is served."""
    c = kd.client
    cap = mount_cap("ext4")
    for i in range(5):
        name = "pvc-wedge-%d" % i
        kd.hold("answered")
        attempt = Attempt(kd, "CreateVolume", dict(
            name=name, volume_capabilities=[cap],
            capacity_range=c.pb.CapacityRange(required_bytes=SIZE)))
        try:
            os.kill(kd.paused("answered"), signal.SIGKILL)
        finally:
            kd.release("answered")
        attempt.join(60)
        assert attempt.code == grpc.StatusCode.OK
        assert c.identity("Probe").ready.value
    vols = [e.volume.volume_id for e in c.controller("ListVolumes").entries]
    assert sorted(vols) == images(kd) and len(vols) == 5
    assert "answer_dropped" not in kd.logs()
    for vid in vols:
        c.controller("DeleteVolume", volume_id=vid)
    assert_nothing_left(kd)


def reboot(d):
    """Every process of the driver killed, then every mount and loop device it had gone."""
    os.killpg(d.proc.pid, signal.SIGKILL)
    d.proc.wait()
    d.client.close()
    for mp in reversed(mounts_under(d.root)):
        subprocess.run(["umount", "-l", mp], check=True)
    for dev in loops_backed_by(d.data):
        detach_loop(dev)
    assert mounts_under(d.root) == [] and loops_backed_by(d.data) == []
    d.proc = subprocess.Popen(d.args, stdout=d.log, stderr=subprocess.STDOUT,
                              start_new_session=True,
                              env=dict(os.environ, SEPCSI_TEST_PAUSE="1"))
    csi_client.wait_ready(d.endpoint, 20)
    d.client = csi_client.CsiClient(d.endpoint)


def test_reboot_restages_and_republishes(kd):
    """ext4 and raw block volumes staged and published, with data; after the reboot
    reconciliation mounts them again by itself, the CO's calls find them done, and
    the data is there."""
    k, c = kd.kubelet, kd.client
    vols = []
    for name, block in (("pvc-boot-fs", False), ("pvc-boot-block", True)):
        cap = block_cap() if block else mount_cap("ext4")
        vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                           capacity_range=c.pb.CapacityRange(required_bytes=SIZE)
                           ).volume.volume_id
        staging = k.block_staging(name) if block else k.staging(name)
        target = k.block_target(name) if block else k.target(name)
        stage = dict(volume_id=vid, staging_target_path=staging, volume_capability=cap)
        c.node("NodeStageVolume", **stage)
        c.node("NodePublishVolume", target_path=target, readonly=False, **stage)
        assert (chaos.write_block if block else chaos.write_fs)(target, name) is None
        vols.append((name, block, vid, stage, target))
    reboot(kd)
    wait_until(lambda: kd.logs().count('reconciled result="everything settled"') == 2, "reconciled")
    restored = [ln for ln in kd.logs().splitlines() if "reconcile_restore" in ln]
    assert len(restored) == 4, restored  # two stagings, two publications
    c = kd.client
    for name, block, vid, stage, target in vols:
        # Back before the CO asks: the data is readable at the pod's target.
        assert (chaos.check_block if block else chaos.check_fs)(target, name) is None
        c.node("NodeStageVolume", **stage)
        c.node("NodePublishVolume", target_path=target, readonly=False, **stage)
        c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
        c.node("NodeUnstageVolume", volume_id=vid,
               staging_target_path=stage["staging_target_path"])
        c.controller("DeleteVolume", volume_id=vid)
        staging = stage["staging_target_path"]
        for path in ([staging] if block else [staging, os.path.dirname(staging)]) + [
                os.path.dirname(target)]:
            os.rmdir(path)
    assert_nothing_left(kd)


def mount_ids_under(prefix):
    """(mount id, mount point) of the mounts at or below prefix, as the host sees them."""
    with open("/proc/self/mountinfo") as f:
        rows = [ln.split() for ln in f]
    return sorted((r[0], r[4]) for r in rows if r[4].startswith(prefix + "/"))


@pytest.mark.parametrize("victim", [chaos.HELPER, "sepcsi-core"])
def test_restart_leaves_every_mount_where_it_was(kd, victim):
    """The helper (or its core) killed and started again with a file-system and a raw
    block volume staged and published: every staging and publication is still the same
    mount on the host (its mount id unchanged), never unmounted and made again. The new
    helper narrows its own view (kubelet's tree detached from it): a detach that reached
    the host's peers would unmount them all, and rpcd's reconciliation would hide it by
    staging them again."""
    k, c = kd.kubelet, kd.client
    for name, cap, st, tg in (
            ("pvc-kept-fs", mount_cap("ext4"), k.staging("pvc-kept-fs"), k.target("pvc-kept-fs")),
            ("pvc-kept-blk", block_cap(), k.block_staging("pvc-kept-blk"),
             k.block_target("pvc-kept-blk"))):
        vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                           capacity_range=c.pb.CapacityRange(required_bytes=SIZE)
                           ).volume.volume_id
        stage = dict(volume_id=vid, staging_target_path=st, volume_capability=cap)
        c.node("NodeStageVolume", **stage)
        c.node("NodePublishVolume", target_path=tg, readonly=False, **stage)
    before = mount_ids_under(kd.root)
    assert len(before) == 4, before
    helper = kd.children()[chaos.HELPER]
    started = kd.logs().count("core_started")
    settled = kd.logs().count("reconciled result=")
    if victim == chaos.HELPER:
        os.kill(helper, signal.SIGKILL)
    else:
        with open("/proc/%d/task/%d/children" % (helper, helper)) as f:
            for pid in f.read().split():
                with open("/proc/%s/comm" % pid) as g:
                    if g.read().strip() == victim:
                        os.kill(int(pid), signal.SIGKILL)
    wait_until(lambda: kd.logs().count("core_started") > started and
               kd.children().get(chaos.HELPER) not in (None, helper), "a new helper and core")
    wait_until(lambda: kd.logs().count("reconciled result=") > settled, "reconciled")
    assert mount_ids_under(kd.root) == before
    assert "reconcile_restore" not in kd.logs()


def test_rpcd_killed_with_many_volumes_published(kd):
    """rpcd killed on a node with 70 raw block volumes staged and published: its
    reconciliation LISTs 70 images and 140 binds, which the helper sorts (glibc's qsort
    then asks the memory size, once); the helper answers, keeps its pid, and nothing
    is restaged twice."""
    k, c = kd.kubelet, kd.client
    cap = block_cap()
    vols = []
    for i in range(70):
        name = "pvc-many-%02d" % i
        vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                           capacity_range=c.pb.CapacityRange(required_bytes=SIZE)
                           ).volume.volume_id
        stage = dict(volume_id=vid, staging_target_path=k.block_staging(name),
                     volume_capability=cap)
        c.node("NodeStageVolume", **stage)
        c.node("NodePublishVolume", target_path=k.block_target(name), readonly=False, **stage)
        vols.append((vid, stage, k.block_target(name)))
    helper = kd.children()[chaos.HELPER]
    settled = kd.logs().count('reconciled result="everything settled"')
    os.kill(kd.children()[chaos.RPCD], signal.SIGKILL)
    wait_until(lambda: kd.logs().count('reconciled result="everything settled"') > settled,
               "reconciled")
    assert kd.children()[chaos.HELPER] == helper
    assert "reconcile_restore" not in kd.logs()
    for vid, stage, target in vols:
        retried(kd, "NodeUnpublishVolume", volume_id=vid, target_path=target)
        retried(kd, "NodeUnstageVolume", volume_id=vid,
                staging_target_path=stage["staging_target_path"])
        retried(kd, "DeleteVolume", volume_id=vid)
        os.rmdir(stage["staging_target_path"])
        os.rmdir(os.path.dirname(target))
    assert_nothing_left(kd)


@pytest.fixture(params=["xfs", "btrfs-simple"])
def dkd(request):
    """A pausable driver with an xfs base for directory volumes, or a btrfs one (volumes as
    subvolumes), restarting without limit."""
    from test_dir_helper import BASES
    d = Driver(kubelet=True, setup=BASES[request.param], env={"SEPCSI_TEST_PAUSE": "1"},
               extra_args=["--restart-limit", "100", "--restart-window", "1"])
    d.kubelet = chaos.kubelet_layout(d)
    d.before = chaos.tree(d.root)
    yield from running(d)


def base_listing(d, sub=""):
    return sorted(os.listdir(os.path.join(d.base, sub)))


@pytest.mark.parametrize("victim", ["worker", "helper", "rpcd"])
def test_directory_volume_killed_mid_way(dkd, victim):
    """A directory volume's create, snapshot and delete, each killed -9 at the point
    where the helper has made or moved the directory and not yet finished: the
    CO's retry succeeds, one directory per volume and snapshot, and nothing stays
    in the helper's work and trash areas or in the store."""
    d = dkd
    cap = mount_cap("")
    params = {"type": "directory", "baseDir": d.base}
    life = Life(d, "dirvol", False, None, None, victim)

    def killed(method, point, **fields):
        life.method, life.point = method, point
        return life.call(method, **fields)

    vid = killed("CreateVolume", "dir-made", name="dirvol", volume_capabilities=[cap],
                 parameters=params,
                 capacity_range=csi_client.pb.CapacityRange(required_bytes=SIZE)
                 ).volume.volume_id
    wait_until(lambda: base_listing(d, ".sepcsi-work") == [], "the work area emptied")
    assert [n for n in base_listing(d) if not n.startswith(".")] == ["dirvol"]
    target, staging = d.kubelet.target("dirvol"), d.kubelet.staging("dirvol")
    retried(d, "NodeStageVolume", volume_id=vid, staging_target_path=staging,
            volume_capability=cap)
    retried(d, "NodePublishVolume", volume_id=vid, target_path=target, volume_capability=cap,
            readonly=False, staging_target_path=staging)
    with open(os.path.join(target, "data"), "w") as f:
        f.write("kept")
    sid = killed("CreateSnapshot", "dir-made", name="dirsnap",
                 source_volume_id=vid).snapshot.snapshot_id
    wait_until(lambda: base_listing(d, ".sepcsi-snapshots") == [sid], "one snapshot")
    assert open(os.path.join(d.base, ".sepcsi-snapshots", sid, "data")).read() == "kept"
    retried(d, "NodeUnpublishVolume", volume_id=vid, target_path=target)
    retried(d, "NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    killed("DeleteSnapshot", "trashed", snapshot_id=sid)
    killed("DeleteVolume", "trashed", volume_id=vid)
    wait_until(lambda: base_listing(d, ".sepcsi-trash") == [], "the trash emptied")
    assert [n for n in base_listing(d) if not n.startswith(".")] == []
    assert base_listing(d, ".sepcsi-snapshots") == []
    for path in (staging, os.path.dirname(staging), os.path.dirname(target)):
        os.rmdir(path)  # what kubelet removes
    assert_nothing_left(d)


def test_reboot_republishes_directory_volume(dkd):
    """A directory volume published read-write and read-only, with data; after the
    reboot reconciliation binds it again by itself, and the CO's calls find it done."""
    d, k = dkd, dkd.kubelet
    c = d.client
    cap = mount_cap("")
    vid = c.controller("CreateVolume", name="pvc-boot-dir", volume_capabilities=[cap],
                       parameters={"type": "directory", "baseDir": d.base},
                       capacity_range=c.pb.CapacityRange(required_bytes=SIZE)).volume.volume_id
    staging, target = k.staging("pvc-boot-dir"), k.target("pvc-boot-dir")
    ro_target = k.target("pvc-boot-dir-ro")
    stage = dict(volume_id=vid, staging_target_path=staging, volume_capability=cap)
    c.node("NodeStageVolume", **stage)
    c.node("NodePublishVolume", target_path=target, readonly=False, **stage)
    c.node("NodePublishVolume", target_path=ro_target, readonly=True, **stage)
    with open(os.path.join(target, "data"), "w") as f:
        f.write("survives")
    reboot(d)  # every bind gone (checked there), the base's file system stays
    wait_until(lambda: d.logs().count('reconciled result="everything settled"') == 2, "reconciled")
    restored = [ln for ln in d.logs().splitlines() if "reconcile_restore" in ln]
    assert len(restored) == 2, restored  # two publications; a directory has no staging mount
    c = d.client
    assert open(os.path.join(target, "data")).read() == "survives"
    assert open(os.path.join(ro_target, "data")).read() == "survives"
    with pytest.raises(OSError):
        open(os.path.join(ro_target, "nope"), "w")
    c.node("NodeStageVolume", **stage)
    c.node("NodePublishVolume", target_path=target, readonly=False, **stage)
    for t in (target, ro_target):
        c.node("NodeUnpublishVolume", volume_id=vid, target_path=t)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=vid)
    for path in (staging, os.path.dirname(staging), os.path.dirname(target),
                 os.path.dirname(ro_target)):
        os.rmdir(path)
    assert_nothing_left(d)
