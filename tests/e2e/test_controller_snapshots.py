"""Controller service, snapshots and copies: CreateSnapshot, DeleteSnapshot,
ListSnapshots, GetSnapshot, CreateVolume from a snapshot and from a volume
(the same data when staged, next to a still-mounted source), the
GroupController service, and concurrency: a clone in flight holds only its own
name and source, and Probe and other volumes are served meanwhile. Each success path is called
twice; each error code the spec lists for these RPCs is provoked."""
import hashlib
import os
import subprocess
import threading
import time

import grpc
import pytest

from csi_client import block_cap, mount_cap
from hostcaps import CAP_SYS_RESOURCE, bounding_has
from conftest import Driver

MiB = 1 << 20
GiB = 1 << 30
SIZES = {"ext4": 64 * MiB, "xfs": 300 * MiB, "btrfs": 128 * MiB}


def code_of(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code()


def twice(fn, *args, **kw):
    a = fn(*args, **kw)
    b = fn(*args, **kw)
    assert a == b
    return a


def create(c, name, cap=None, req=32 * MiB, lim=0, snapshot=None, volume=None, params=None):
    pb = c.pb
    src = None
    if snapshot:
        src = pb.VolumeContentSource(
            snapshot=pb.VolumeContentSource.SnapshotSource(snapshot_id=snapshot))
    elif volume:
        src = pb.VolumeContentSource(volume=pb.VolumeContentSource.VolumeSource(volume_id=volume))
    return c.controller("CreateVolume", name=name, volume_capabilities=[cap or mount_cap("")],
                        capacity_range=pb.CapacityRange(required_bytes=req, limit_bytes=lim),
                        volume_content_source=src, parameters=params or {}).volume


def snap(c, name, vid, **params):
    return c.controller("CreateSnapshot", name=name, source_volume_id=vid,
                        parameters=params).snapshot


class Staged:
    """A volume staged at <root>/staging/<name> (a file system, or a raw block device)."""

    def __init__(self, driver, vid, name, cap):
        self.c, self.vid, self.cap = driver.client, vid, cap
        self.path = os.path.join(driver.root, "staging", name)
        os.makedirs(self.path, exist_ok=True)
        self.c.node("NodeStageVolume", volume_id=vid, staging_target_path=self.path,
                    volume_capability=cap)

    def file(self, name):
        return os.path.join(self.path, name)

    def unstage(self):
        self.c.node("NodeUnstageVolume", volume_id=self.vid, staging_target_path=self.path)


def write_data(path, mib):
    """mib MiB of pseudo-random bytes plus a marker; returns their sha256."""
    h = hashlib.sha256()
    with open(path, "wb") as f:
        block = os.urandom(MiB)
        for i in range(mib):
            chunk = block[i:] + block[:i]
            f.write(chunk)
            h.update(chunk)
        f.flush()
        os.fsync(f.fileno())
    return h.hexdigest()


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MiB), b""):
            h.update(chunk)
    return h.hexdigest()


def snapshot_files(driver):
    return sorted(os.listdir(os.path.join(driver.data, "snapshots")))


@pytest.mark.parametrize("fs", ["ext4", "xfs", "btrfs"])
def test_snapshot_restore_and_clone_same_data(driver, fs):
    """Data written to a staged volume is in its snapshot's restore and in its clone,
    each staged while the source is still mounted (xfs copies need nouuid for that)."""
    c = driver.client
    cap = mount_cap(fs)
    v = create(c, "src-" + fs, cap, SIZES[fs])
    src = Staged(driver, v.volume_id, "src-" + fs, cap)
    digest = write_data(src.file("blob"), 8)
    with open(src.file("hello.txt"), "w") as f:
        f.write("before the snapshot")
    os.sync()

    s = twice(snap, c, "snap-" + fs, v.volume_id)
    assert s.ready_to_use and s.size_bytes == SIZES[fs]
    assert s.source_volume_id == v.volume_id and s.creation_time.seconds > 1700000000
    assert snapshot_files(driver) == [s.snapshot_id + ".img"]
    with open(src.file("hello.txt"), "w") as f:
        f.write("after the snapshot")  # not in the snapshot

    r = twice(create, c, "restore-" + fs, cap, snapshot=s.snapshot_id)
    assert r.content_source.snapshot.snapshot_id == s.snapshot_id
    assert r.capacity_bytes == SIZES[fs]
    restored = Staged(driver, r.volume_id, "restore-" + fs, cap)
    assert sha256(restored.file("blob")) == digest
    with open(restored.file("hello.txt")) as f:
        assert f.read() == "before the snapshot"

    cl = twice(create, c, "clone-" + fs, cap, volume=v.volume_id)
    assert cl.content_source.volume.volume_id == v.volume_id
    cloned = Staged(driver, cl.volume_id, "clone-" + fs, cap)
    assert sha256(cloned.file("blob")) == digest
    with open(cloned.file("hello.txt")) as f:
        assert f.read() == "after the snapshot"
    # The copies are independent of each other and of the source.
    with open(cloned.file("hello.txt"), "w") as f:
        f.write("clone's own")
    with open(src.file("hello.txt")) as f:
        assert f.read() == "after the snapshot"

    for st in (cloned, restored, src):
        st.unstage()
    for vid in (cl.volume_id, r.volume_id, v.volume_id):
        c.controller("DeleteVolume", volume_id=vid)
    twice(c.controller, "DeleteSnapshot", snapshot_id=s.snapshot_id)
    assert snapshot_files(driver) == []


def test_block_snapshot_restore(driver):
    c = driver.client
    v = create(c, "blk-src", block_cap(), 8 * MiB)
    src = Staged(driver, v.volume_id, "blk-src", block_cap())
    with open(src.file("dev"), "r+b") as f:
        f.write(b"raw block data")
    os.sync()
    s = snap(c, "blk-snap", v.volume_id)
    src.unstage()
    r = create(c, "blk-restore", block_cap(), snapshot=s.snapshot_id)
    dst = Staged(driver, r.volume_id, "blk-restore", block_cap())
    with open(dst.file("dev"), "rb") as f:
        assert f.read(14) == b"raw block data"
    dst.unstage()
    # A raw block snapshot restores only as raw block.
    assert code_of(create, c, "blk-as-fs", mount_cap(""), snapshot=s.snapshot_id) == \
        grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_restore_larger(driver, fs):
    """A restore larger than its snapshot has the larger size once staged (spec,
    CreateVolume: the file system is grown at or before NodePublishVolume)."""
    c = driver.client
    cap = mount_cap(fs)
    small = SIZES[fs]
    v = create(c, "small", cap, small)
    src = Staged(driver, v.volume_id, "small", cap)  # formatted at the small size
    with open(src.file("kept"), "w") as f:
        f.write("small")
    before = os.statvfs(src.path)
    src.unstage()
    s = snap(c, "small-snap", v.volume_id)
    r = create(c, "bigger", cap, small + 128 * MiB, snapshot=s.snapshot_id)
    assert r.capacity_bytes == small + 128 * MiB
    img = os.path.join(driver.data, "images", r.volume_id + ".img")
    assert os.stat(img).st_size == small + 128 * MiB
    st = Staged(driver, r.volume_id, "bigger", cap)
    with open(st.file("kept")) as f:
        assert f.read() == "small"
    after = os.statvfs(st.path)
    grown = after.f_blocks * after.f_frsize - before.f_blocks * before.f_frsize
    if fs == "ext4" and not bounding_has(CAP_SYS_RESOURCE):
        # The kernel grows a mounted ext4 only for CAP_SYS_RESOURCE, which this
        # machine's bounding set withholds from every process: the stage
        # succeeds with the data, and the helper's audit says it did not grow.
        assert grown == 0
        assert "NOT grown" in driver.logs()
        print("NOTE: ext4 online growth not possible here: no CAP_SYS_RESOURCE in CapBnd")
    else:
        assert grown > 100 * MiB
    st.unstage()


def test_snapshot_outlives_its_volume(driver):
    c = driver.client
    v = create(c, "gone")
    s = snap(c, "of-gone", v.volume_id)
    twice(c.controller, "DeleteVolume", volume_id=v.volume_id)
    listed = c.controller("ListSnapshots", source_volume_id=v.volume_id).entries
    assert [e.snapshot.snapshot_id for e in listed] == [s.snapshot_id]
    assert c.controller("GetSnapshot", snapshot_id=s.snapshot_id).snapshot == s
    assert snap(c, "of-gone", v.volume_id) == s  # still idempotent
    r = twice(create, c, "from-gone", snapshot=s.snapshot_id)
    assert r.capacity_bytes == 32 * MiB
    # The restore stays valid, and repeats, after its snapshot is gone too.
    c.controller("DeleteSnapshot", snapshot_id=s.snapshot_id)
    assert create(c, "from-gone", snapshot=s.snapshot_id) == r


def test_snapshot_errors(driver):
    c = driver.client
    E = grpc.StatusCode
    v = create(c, "snap-err")
    w = create(c, "snap-err-2")
    s = snap(c, "taken", v.volume_id)
    assert code_of(snap, c, "taken", w.volume_id) == E.ALREADY_EXISTS
    assert code_of(snap, c, "missing-src", "sv-" + "7" * 32) == E.NOT_FOUND
    assert code_of(snap, c, "evil-src", "../../etc") == E.NOT_FOUND
    assert code_of(snap, c, "", v.volume_id) == E.INVALID_ARGUMENT
    assert code_of(snap, c, "no-src", "") == E.INVALID_ARGUMENT
    assert code_of(snap, c, "bad-param", v.volume_id, retention="7d") == E.INVALID_ARGUMENT
    # The sidecars' metadata parameters are accepted.
    snap(c, "with-meta", v.volume_id,
         **{"csi.storage.k8s.io/volumesnapshot/name": "vs", "csi.storage.k8s.io/foo": "x"})

    assert code_of(c.controller, "GetSnapshot", snapshot_id="ss-" + "8" * 32) == E.NOT_FOUND
    assert code_of(c.controller, "GetSnapshot", snapshot_id="../x") == E.NOT_FOUND
    assert code_of(c.controller, "GetSnapshot") == E.INVALID_ARGUMENT
    assert twice(c.controller, "GetSnapshot", snapshot_id=s.snapshot_id).snapshot == s

    c.controller("DeleteSnapshot", snapshot_id="ss-" + "9" * 32)
    c.controller("DeleteSnapshot", snapshot_id="ss-/../../etc")
    assert code_of(c.controller, "DeleteSnapshot") == E.INVALID_ARGUMENT

    # Restores: missing sources, incompatible requests, sizes below the source.
    assert code_of(create, c, "r1", snapshot="ss-" + "a" * 32) == E.NOT_FOUND
    assert code_of(create, c, "r2", volume="sv-" + "a" * 32) == E.NOT_FOUND
    assert code_of(create, c, "r3", snapshot="/etc/shadow") == E.NOT_FOUND
    assert code_of(create, c, "r4", mount_cap("xfs"), req=300 * MiB,
                   snapshot=s.snapshot_id) == E.INVALID_ARGUMENT
    assert code_of(create, c, "r5", req=0, lim=16 * MiB, snapshot=s.snapshot_id) == \
        E.OUT_OF_RANGE
    assert code_of(create, c, "r6", req=0, lim=16 * MiB, volume=v.volume_id) == E.OUT_OF_RANGE
    create(c, "r7", snapshot=s.snapshot_id)
    assert code_of(create, c, "r7", volume=v.volume_id) == E.ALREADY_EXISTS
    assert code_of(create, c, "r7") == E.ALREADY_EXISTS


def test_list_snapshots(driver):
    c = driver.client
    E = grpc.StatusCode
    a = create(c, "ls-a")
    b = create(c, "ls-b")
    ids_a = sorted(snap(c, "a-%d" % i, a.volume_id).snapshot_id for i in range(5))
    ids_b = sorted(snap(c, "b-%d" % i, b.volume_id).snapshot_id for i in range(2))
    everything = sorted(ids_a + ids_b)
    r = twice(c.controller, "ListSnapshots")
    assert [e.snapshot.snapshot_id for e in r.entries] == everything and not r.next_token
    assert all(e.snapshot.ready_to_use for e in r.entries)
    r = c.controller("ListSnapshots", source_volume_id=b.volume_id)
    assert [e.snapshot.snapshot_id for e in r.entries] == ids_b
    r = c.controller("ListSnapshots", snapshot_id=ids_a[2])
    assert [e.snapshot.snapshot_id for e in r.entries] == [ids_a[2]]
    r = c.controller("ListSnapshots", snapshot_id=ids_a[2], source_volume_id=b.volume_id)
    assert list(r.entries) == []
    for fields in (dict(snapshot_id="ss-" + "b" * 32), dict(snapshot_id="nonsense"),
                   dict(source_volume_id="sv-" + "b" * 32), dict(source_volume_id="/etc")):
        assert list(c.controller("ListSnapshots", **fields).entries) == [], fields
    # Pages of 2 over a's five; the token survives a deletion and a creation.
    seen, token = [], ""
    while True:
        r = c.controller("ListSnapshots", source_volume_id=a.volume_id, max_entries=2,
                         starting_token=token)
        assert len(r.entries) <= 2
        seen += [e.snapshot.snapshot_id for e in r.entries]
        token = r.next_token
        if not token:
            break
        if len(seen) == 2:
            c.controller("DeleteSnapshot", snapshot_id=token)
    assert seen == ids_a
    assert code_of(c.controller, "ListSnapshots", starting_token="junk") == E.ABORTED
    assert code_of(c.controller, "ListSnapshots", starting_token=a.volume_id) == E.ABORTED
    assert code_of(c.controller, "ListSnapshots", max_entries=-2) == E.INVALID_ARGUMENT


def group(c, name, vids, **params):
    return c.group_controller("CreateVolumeGroupSnapshot", name=name, source_volume_ids=vids,
                              parameters=params).group_snapshot


def test_group_snapshots(driver):
    c = driver.client
    E = grpc.StatusCode
    cap = mount_cap("ext4")
    v1, v2, v3 = (create(c, "g%d" % i, cap) for i in (1, 2, 3))
    # Data in v1 and v2, written while staged; only v1 stays staged (one writer at most).
    for v, text in ((v1, "one"), (v2, "two")):
        st = Staged(driver, v.volume_id, "g-" + text, cap)
        with open(st.file("who"), "w") as f:
            f.write(text)
        if text == "two":
            st.unstage()
    os.sync()

    g = twice(group, c, "grp", [v1.volume_id, v2.volume_id])
    assert g.group_snapshot_id.startswith("gs-") and g.ready_to_use
    assert len(g.snapshots) == 2 and g.creation_time.seconds > 1700000000
    assert {s.source_volume_id for s in g.snapshots} == {v1.volume_id, v2.volume_id}
    assert all(s.group_snapshot_id == g.group_snapshot_id and s.ready_to_use
               for s in g.snapshots)
    assert group(c, "grp", [v2.volume_id, v1.volume_id]) == g  # order does not matter
    member_ids = [s.snapshot_id for s in g.snapshots]

    assert code_of(group, c, "grp", [v1.volume_id, v3.volume_id]) == E.ALREADY_EXISTS
    assert code_of(group, c, "grp", [v1.volume_id, v2.volume_id], x="y") == E.INVALID_ARGUMENT
    assert code_of(group, c, "grp-missing", [v1.volume_id, "sv-" + "c" * 32]) == E.NOT_FOUND
    assert code_of(group, c, "grp-dup", [v1.volume_id, v1.volume_id]) == E.INVALID_ARGUMENT
    assert code_of(group, c, "grp-none", []) == E.INVALID_ARGUMENT
    assert code_of(group, c, "", [v1.volume_id]) == E.INVALID_ARGUMENT
    # Two volumes in use are cut together (test_group_snapshot_of_volumes_in_use); a raw
    # block volume in use cannot be frozen, so no group with it and another in use.
    blk = create(c, "g-block", block_cap())
    busy = Staged(driver, blk.volume_id, "g-block", block_cap())
    assert code_of(group, c, "grp-busy", [v1.volume_id, blk.volume_id]) == \
        E.FAILED_PRECONDITION
    busy.unstage()
    assert len(snapshot_files(driver)) == 2

    # Members: listed and gettable snapshots that only the group may delete.
    got = twice(c.group_controller, "GetVolumeGroupSnapshot",
                group_snapshot_id=g.group_snapshot_id, snapshot_ids=member_ids[::-1])
    assert got.group_snapshot == g
    assert c.controller("GetSnapshot", snapshot_id=member_ids[0]).snapshot.group_snapshot_id \
        == g.group_snapshot_id
    listed = {e.snapshot.snapshot_id for e in c.controller("ListSnapshots").entries}
    assert set(member_ids) <= listed
    assert code_of(c.controller, "DeleteSnapshot", snapshot_id=member_ids[0]) == \
        E.INVALID_ARGUMENT
    assert code_of(c.group_controller, "GetVolumeGroupSnapshot",
                   group_snapshot_id=g.group_snapshot_id,
                   snapshot_ids=member_ids[:1]) == E.INVALID_ARGUMENT
    assert code_of(c.group_controller, "GetVolumeGroupSnapshot",
                   group_snapshot_id="gs-" + "d" * 32, snapshot_ids=member_ids) == E.NOT_FOUND
    assert code_of(c.group_controller, "GetVolumeGroupSnapshot",
                   snapshot_ids=member_ids) == E.INVALID_ARGUMENT

    # Each member restores its own volume's data.
    for s in g.snapshots:
        r = create(c, "from-" + s.snapshot_id, cap, snapshot=s.snapshot_id)
        st = Staged(driver, r.volume_id, "from-" + s.snapshot_id, cap)
        with open(st.file("who")) as f:
            assert f.read() == ("one" if s.source_volume_id == v1.volume_id else "two")
        st.unstage()

    assert code_of(c.group_controller, "DeleteVolumeGroupSnapshot",
                   group_snapshot_id=g.group_snapshot_id, snapshot_ids=member_ids[:1]) == \
        E.INVALID_ARGUMENT
    assert code_of(c.group_controller, "DeleteVolumeGroupSnapshot",
                   snapshot_ids=member_ids) == E.INVALID_ARGUMENT
    twice(c.group_controller, "DeleteVolumeGroupSnapshot",
          group_snapshot_id=g.group_snapshot_id, snapshot_ids=member_ids)
    c.group_controller("DeleteVolumeGroupSnapshot", group_snapshot_id="gs-" + "e" * 32,
                       snapshot_ids=["ss-" + "e" * 32])
    assert snapshot_files(driver) == []
    assert code_of(c.group_controller, "GetVolumeGroupSnapshot",
                   group_snapshot_id=g.group_snapshot_id, snapshot_ids=member_ids) == \
        E.NOT_FOUND


WRITER = """
import os, sys
fds = [os.open(p, os.O_WRONLY | os.O_CREAT, 0o644) for p in sys.argv[1:]]
n = 0
while True:
    n += 1
    for fd in fds:  # the first volume, then the second: never ahead of the first
        os.pwrite(fd, b"%020d" % n, 0)
"""


def live_seq(path):
    """The number the writer last wrote at path (0 before its first write)."""
    try:
        with open(path) as f:
            return int(f.read() or 0)
    except FileNotFoundError:
        return 0


def wait_past(path, n, timeout=60):
    """Wait until the writer has written a number above n at path, however slow it starts."""
    deadline = time.monotonic() + timeout
    while live_seq(path) <= n:
        assert time.monotonic() < deadline, "the writer wrote nothing above %d" % n
        time.sleep(0.05)


def seq_of(driver, c, cap, snapshot_id, name):
    """The sequence number in a restore of snapshot_id."""
    r = create(c, name, cap, snapshot=snapshot_id)
    st = Staged(driver, r.volume_id, name, cap)
    with open(st.file("seq")) as f:
        n = int(f.read())
    st.unstage()
    c.controller("DeleteVolume", volume_id=r.volume_id)
    return n


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_group_snapshot_of_volumes_in_use(driver, fs):
    """Two volumes in use, one process writing a growing sequence number into the first
    and then the second, over and over: every group snapshot restores a consistent pair
    (the second equal to the first, or one behind), and the writer goes on after each."""
    c = driver.client
    cap = mount_cap(fs)
    vols = [create(c, "cg-%s-%d" % (fs, i), cap, SIZES[fs]) for i in (1, 2)]
    staged = [Staged(driver, v.volume_id, "cg-%s-%d" % (fs, i), cap)
              for i, v in enumerate(vols)]
    writer = subprocess.Popen(["/usr/bin/python3", "-c", WRITER] +
                              [st.file("seq") for st in staged])
    try:
        last = 0
        for k in range(3):
            wait_past(staged[1].file("seq"), last)  # both written, and past the last group
            g = group(c, "cg-%s-%d" % (fs, k), [v.volume_id for v in vols])
            by_vol = {s.source_volume_id: s.snapshot_id for s in g.snapshots}
            first, second = (seq_of(driver, c, cap, by_vol[v.volume_id],
                                    "cg-%s-%d-r%d" % (fs, k, i))
                             for i, v in enumerate(vols))
            assert second <= first <= second + 1, (first, second)
            assert first > last, "the writer made no progress between group snapshots"
            last = first
            c.group_controller("DeleteVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id,
                               snapshot_ids=list(by_vol.values()))
        assert writer.poll() is None, "the writer died"
    finally:
        writer.kill()
        writer.wait()
    for st in staged:
        st.unstage()
    for v in vols:
        c.controller("DeleteVolume", volume_id=v.volume_id)
    assert snapshot_files(driver) == []


def driver_with_data_dir(setup):
    """A Driver whose data directory is prepared by setup(path) before the driver starts."""
    real = os.makedirs

    def makedirs(path, *a, **kw):
        real(path, *a, **kw)
        parent = os.path.dirname(path)
        if os.path.basename(path) == "root" and \
                os.path.basename(parent).startswith("sepcsi-e2e-"):
            data = os.path.join(parent, "data")
            real(data, mode=0o700)
            setup(data)
    os.makedirs = makedirs
    try:
        return Driver()
    finally:
        os.makedirs = real


def test_snapshot_resource_exhausted():
    """A data directory that cannot hold the copy: RESOURCE_EXHAUSTED, nothing left behind."""
    d = driver_with_data_dir(lambda p: subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=96m,mode=0700", "tmpfs", p], check=True))
    try:
        c = d.client
        cap = mount_cap("ext4")
        v = create(c, "full", cap, 64 * MiB)
        st = Staged(d, v.volume_id, "full", cap)
        write_data(st.file("fill"), 48)
        st.unstage()
        assert code_of(snap, c, "too-big", v.volume_id) == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert snapshot_files(d) == []
        assert list(c.controller("ListSnapshots").entries) == []
        assert code_of(create, c, "no-room", req=64 * MiB) == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert c.controller("GetCapacity").available_capacity < 64 * MiB
    finally:
        d.stop()
        d.cleanup()


def test_slow_clone_blocks_only_its_own(pausable_driver):
    """While a clone is held in flight (a test pause point in the helper, so
    its length owes nothing to sizes or machine speed): Probe answers, other
    volumes are served, and the clone's name and source are ABORTED for anyone
    else. Released, the clone completes with the source's data."""
    driver = pausable_driver
    c = driver.client
    E = grpc.StatusCode
    v = create(c, "big-src", mount_cap("ext4"), 256 * MiB)
    other = create(c, "bystander")
    img = os.path.join(driver.data, "images", v.volume_id + ".img")
    data = os.urandom(4 * MiB)
    with open(img, "r+b") as f:
        f.seek(100 * MiB)
        f.write(data)
        os.fsync(f.fileno())

    result = {}

    def clone():
        try:
            result["vol"] = create(c, "big-clone", mount_cap("ext4"), 256 * MiB,
                                   volume=v.volume_id)
        except grpc.RpcError as e:
            result["err"] = e

    driver.hold("copy@" + v.volume_id)
    t = threading.Thread(target=clone)
    t.start()
    try:
        driver.paused("copy@" + v.volume_id)
        # The clone is in flight: its name and its source are taken...
        assert code_of(create, c, "big-clone", mount_cap("ext4"), 256 * MiB,
                       volume=v.volume_id) == E.ABORTED
        assert code_of(c.controller, "DeleteVolume", volume_id=v.volume_id) == E.ABORTED
        assert code_of(snap, c, "of-busy", v.volume_id) == E.ABORTED
        assert code_of(c.controller, "ControllerExpandVolume", volume_id=v.volume_id,
                       capacity_range=c.pb.CapacityRange(required_bytes=512 * MiB)) == E.ABORTED
        # ...and nothing else is: Probe, another volume's snapshot and growth, a new volume.
        for _ in range(20):
            assert c.identity("Probe").ready.value
        twice(snap, c, "of-bystander", other.volume_id)
        c.controller("ControllerExpandVolume", volume_id=other.volume_id,
                     capacity_range=c.pb.CapacityRange(required_bytes=64 * MiB))
        create(c, "newcomer")
        assert t.is_alive(), "the clone finished while held"
    finally:
        driver.release("copy@" + v.volume_id)
        t.join(120)
    assert "err" not in result, result.get("err")
    # The clone itself is whole: a copy of the source's data.
    cl = result["vol"]
    copy = os.path.join(driver.data, "images", cl.volume_id + ".img")
    with open(copy, "rb") as f:
        f.seek(100 * MiB)
        assert f.read(len(data)) == data
    assert twice(create, c, "big-clone", mount_cap("ext4"), 256 * MiB,
                 volume=v.volume_id).volume_id == cl.volume_id
