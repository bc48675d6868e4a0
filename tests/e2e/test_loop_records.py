"""The records of which loop devices back which image (mounthelper/mh_loop.h).

The helper that mounts by itself (with directory volumes) keeps them on disk
(<data-dir>/loops, mounthelper/mh_loop_records.c): written when an image is made and
rewritten in place before every attach, each listing exactly the devices that back its
image, with a hash of its numbers; a missing record, or one whose hash is wrong, makes
the helper look at every device, as before; a wrong record never makes it act on a
device that does not back the volume's image (every number is checked against the
image); and a restart of the helper rebuilds every record from one look at every device.

The capable core keeps them in memory (mounthelper/core/core_loops.c): it writes no
file, a core started again finds the devices a killed one attached, and its table stays
bounded. In both, a device a pod renamed still holds its image: never removed under it."""
import os
import re
import signal
import threading
import time

import grpc
import pytest

from conftest import Driver, descendants, loops_backed_by, pins_of, proc_status, running
from csi_client import block_cap
from hostile import HostileDriver
from mh_wire import F_BLOCK, E, Msg, T
from raw_tenant import Pod
from stallfuse import StalledReadonlyDevice
from test_core_review import HANG

MiB = 1 << 20


def plain_base(d):
    """A base directory for directory volumes: the helper then mounts by itself."""
    d.base = os.path.join(d.tmp, "base")
    os.makedirs(d.base, mode=0o755)
    with open(d.policy, "a") as f:
        f.write("[directories]\nbase_dirs = %s\n" % d.base)


@pytest.fixture
def hdriver():
    """A driver whose helper mounts by itself, and so keeps its records on disk."""
    yield from running(Driver(setup=plain_base))
RECORD_BYTES = 192  # mounthelper/mh_loop.c: "<hash> <nr> <nr> ...\n", zero-padded


def fnv1a(data):
    h = 2166136261
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def record_bytes(numbers):
    """A well-formed record listing numbers, as the helper writes one."""
    nums = (" ".join(str(n) for n in numbers) + "\n").encode()
    return ("%08x " % fnv1a(nums)).encode() + nums + b"\0" * (RECORD_BYTES - 9 - len(nums))


def record_of(d, vid):
    """(path, numbers listed) of the record for vid's image; path None if it has none."""
    st = os.stat(os.path.join(d.data, "images", vid + ".img"))
    path = os.path.join(d.data, "loops", "%x-%x" % (st.st_dev, st.st_ino))
    if not os.path.exists(path):
        return path, None
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == RECORD_BYTES
    line = data[:data.index(b"\n") + 1]
    assert int(line[:8], 16) == fnv1a(line[9:])  # whole: its hash matches its numbers
    assert data == record_bytes([int(w) for w in line[9:].split()])
    return path, sorted(int(w) for w in line[9:].split())


def device_of(d, vid):
    """The numbers of the loop devices backed by vid's image (the kernel's view)."""
    img = os.path.join(d.data, "images", vid + ".img")
    st = os.stat(img)
    found = []
    for name in os.listdir("/sys/block"):
        if not name.startswith("loop") or not os.path.exists("/sys/block/%s/loop" % name):
            continue
        try:
            with open("/sys/block/%s/loop/backing_file" % name) as f:
                back = f.read().strip()
        except OSError:  # ENOENT or ENODEV: detached (by anyone) between the two looks
            continue
        # The helper attached it in its own view: match by the image's name, then identity.
        if back.endswith("/images/%s.img" % vid) and loops_match(name, st):
            found.append(int(name[4:]))
    return sorted(found)


def loops_match(name, st):
    import subprocess
    res = subprocess.run(["losetup", "-n", "-O", "BACK-MAJ:MIN,BACK-INO", "/dev/" + name],
                         capture_output=True, text=True, check=False)
    words = res.stdout.split()
    return len(words) == 2 and words[1] == str(st.st_ino) and \
        words[0] == "%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev))


def stage(d, name):
    c = d.client
    vid = c.controller("CreateVolume", name=name, volume_capabilities=[block_cap()],
                       capacity_range=c.pb.CapacityRange(required_bytes=16 * MiB)
                       ).volume.volume_id
    staging = os.path.join(d.root, "staging", name)
    os.makedirs(staging)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
           volume_capability=block_cap())
    return vid, staging


def unstage_and_delete(d, vid, staging):
    """NodeUnstageVolume finds the volume's device and detaches it; then DeleteVolume."""
    d.client.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    assert device_of(d, vid) == []
    d.client.controller("DeleteVolume", volume_id=vid)
    assert loops_backed_by(d.data) == []


def wait_for(pred, timeout=20):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_records_list_exactly_the_devices(hdriver):
    c = hdriver.client
    vid = c.controller("CreateVolume", name="rec-new", volume_capabilities=[block_cap()],
                       capacity_range=c.pb.CapacityRange(required_bytes=16 * MiB)
                       ).volume.volume_id
    # A new image: an empty record (no device can back it yet).
    assert record_of(hdriver, vid)[1] == []
    staging = os.path.join(hdriver.root, "staging", "rec-new")
    os.makedirs(staging)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
           volume_capability=block_cap())
    devs = device_of(hdriver, vid)
    assert len(devs) == 1 and record_of(hdriver, vid)[1] == devs
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    assert device_of(hdriver, vid) == []
    path, _ = record_of(hdriver, vid)
    c.controller("DeleteVolume", volume_id=vid)
    assert not os.path.exists(path)  # gone with its image


def test_half_written_record_is_none(hdriver):
    """A record whose hash does not match (a write seen half done, a crash) counts as
    none: the helper looks at every device and finds the right one."""
    vid, staging = stage(hdriver, "rec-torn")
    path, listed = record_of(hdriver, vid)
    assert listed == device_of(hdriver, vid)
    torn = bytearray(record_bytes([int(listed[0]) + 1]))
    torn[:8] = record_bytes(listed)[:8]  # the old hash over new numbers
    with open(path, "wb") as f:
        f.write(torn)
    unstage_and_delete(hdriver, vid, staging)


def test_missing_record_falls_back_to_a_look_at_every_device(hdriver):
    vid, staging = stage(hdriver, "rec-missing")
    path, listed = record_of(hdriver, vid)
    assert listed == device_of(hdriver, vid)
    os.unlink(path)
    unstage_and_delete(hdriver, vid, staging)


def test_wrong_record_never_touches_another_volume_and_a_restart_rebuilds(hdriver):
    a, a_staging = stage(hdriver, "rec-a")
    b, b_staging = stage(hdriver, "rec-b")
    (a_dev,), (b_dev,) = device_of(hdriver, a), device_of(hdriver, b)
    # A's record made to name B's device instead of its own (only root could).
    path, _ = record_of(hdriver, a)
    os.unlink(path)
    with open(path, "wb") as f:
        f.write(record_bytes([b_dev]))
    os.chmod(path, 0o600)
    hdriver.client.node("NodeUnstageVolume", volume_id=a, staging_target_path=a_staging)
    # B's device is checked against A's image, found not to back it, and left alone.
    assert device_of(hdriver, b) == [b_dev]
    assert os.path.exists(os.path.join(b_staging, "dev"))
    # A's own device, which the wrong record hid, is found by the restarted helper's
    # look at every device, its records rebuilt, and the unused device detached.
    old = hdriver.children()["sepcsi-mounthel"]
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: hdriver.children().get("sepcsi-mounthel") not in (None, old))
    wait_for(lambda: device_of(hdriver, a) == [])
    # Rebuilt from what was attached at the restart (A's device, detached just after
    # by the start-up sweep: a stale number is harmless, it is checked before use).
    assert record_of(hdriver, a)[1] in ([], [a_dev])
    assert record_of(hdriver, b)[1] == [b_dev]
    hdriver.client.node("NodeUnstageVolume", volume_id=b, staging_target_path=b_staging)
    for v in (a, b):
        hdriver.client.controller("DeleteVolume", volume_id=v)
    assert loops_backed_by(hdriver.data) == []


def test_a_restart_records_attached_images_only(hdriver):
    """The records rebuilt at a start name the attached images only, and their devices'
    records of pins: names planted in images/ (empty files, as many as one likes) cost no
    file in loops/, and an image no device backs is looked for by a look at every
    device."""
    vid, staging = stage(hdriver, "rec-kept")
    c = hdriver.client
    idle = c.controller("CreateVolume", name="rec-idle", volume_capabilities=[block_cap()],
                        capacity_range=c.pb.CapacityRange(required_bytes=16 * MiB)
                        ).volume.volume_id
    images = os.path.join(hdriver.data, "images")
    for i in range(500):
        os.close(os.open(os.path.join(images, "sv-%032x.img" % (0xf00 + i)),
                         os.O_CREAT | os.O_WRONLY, 0o600))
    old = hdriver.children()["sepcsi-mounthel"]
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: hdriver.children().get("sepcsi-mounthel") not in (None, old))
    hdriver.client.identity("Probe")
    wait_for(lambda: record_of(hdriver, vid)[1] == device_of(hdriver, vid))
    dev = os.stat(os.path.join(staging, "dev")).st_rdev
    assert sorted(os.listdir(os.path.join(hdriver.data, "loops"))) == sorted(
        [os.path.basename(record_of(hdriver, vid)[0]), "0-%x" % dev])
    assert record_of(hdriver, idle)[1] is None
    hdriver.client.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    for v in (vid, idle):
        hdriver.client.controller("DeleteVolume", volume_id=v)
    for i in range(500):
        os.unlink(os.path.join(images, "sv-%032x.img" % (0xf00 + i)))


def core_pid(d):
    """The capable core: the helper's child named sepcsi-core (its reader and flusher are the core's)."""
    helper = d.children().get("sepcsi-mounthel")
    for p in descendants(helper) if helper else ():
        try:
            st = proc_status(p)
        except OSError:
            continue
        if st["Name"] == "sepcsi-core" and int(st["PPid"]) == helper:
            return p
    return None


def test_core_keeps_records_in_memory_and_a_new_core_finds_the_devices(driver):
    """The core writes no record; killed while a device backs a staged volume, the core
    started again (with its helper) finds that device from its one look at every device,
    and NodeUnstageVolume detaches it."""
    vid, staging = stage(driver, "rec-core")
    (dev,) = device_of(driver, vid)
    loops = os.path.join(driver.data, "loops")
    assert not os.path.isdir(loops) or os.listdir(loops) == []
    old = core_pid(driver)
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: core_pid(driver) not in (None, old))
    assert device_of(driver, vid) == [dev]
    deadline = time.monotonic() + 20
    while True:  # the driver is back once its new helper is ready
        try:
            driver.client.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
            break
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE and time.monotonic() < deadline
            time.sleep(0.1)
    assert device_of(driver, vid) == []
    driver.client.controller("DeleteVolume", volume_id=vid)
    assert loops_backed_by(driver.data) == []
    assert not os.path.isdir(loops) or os.listdir(loops) == []


def test_core_records_are_bounded_by_the_loop_devices_not_the_images(driver):
    """The core keeps one entry per loop number it has met: a peer that stages and unstages
    ever new images cannot grow its memory past the machine's loop devices (the kernel
    gives the lowest free one), and an image attached after them is still found."""
    c = driver.client
    made = []
    for i in range(70):
        vid, staging = stage(driver, "rec-churn-%d" % i)
        c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
        made.append(vid)
    vid, staging = stage(driver, "rec-churn-kept")  # attached after: still found
    rooms = [int(n) for n in re.findall(r"loop_records_grown room=(\d+)", driver.logs())]
    highest = max(int(n[4:]) for n in os.listdir("/sys/block")
                  if n.startswith("loop") and n[4:].isdigit())
    assert rooms and all(r <= highest + 1 for r in rooms), (rooms, highest)
    assert device_of(driver, vid) != []
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    assert device_of(driver, vid) == []
    for v in made + [vid]:
        c.controller("DeleteVolume", volume_id=v)
    assert loops_backed_by(driver.data) == []


LOOP_GET_STATUS64, LOOP_SET_STATUS64 = 0x4C05, 0x4C04
NAME_AT, NAME_LEN = 56, 64  # lo_file_name in struct loop_info64


def rename_device(node, name):
    """What a pod may do to the raw block device it holds open for writing (no capability
    needed): rename it (LOOP_SET_STATUS64). Returns the name it had."""
    import fcntl
    import struct
    fd = os.open(node, os.O_RDWR)
    try:
        buf = bytearray(232)
        fcntl.ioctl(fd, LOOP_GET_STATUS64, buf)
        old = bytes(buf[NAME_AT:NAME_AT + NAME_LEN]).rstrip(b"\0").decode()
        struct.pack_into("%ds" % NAME_LEN, buf, NAME_AT, name.encode())
        fcntl.ioctl(fd, LOOP_SET_STATUS64, buf)
        return old
    finally:
        os.close(fd)


@pytest.mark.parametrize("directories", [False, True], ids=["core", "helper"])
def test_an_image_a_renamed_device_holds_is_never_removed(directories):
    """A pod renames its raw block device: sepcsi no longer takes the device for its own
    (UNSTAGE leaves its bind), and a DELETE from a compromised rpcd, which skips the
    store's "still staged", is refused: the image whose space the device still uses is
    not removed under it (then counted free while used: repeated, the data directory
    fills). Named back, the volume unstages and deletes. Beside the core (ATTACHED) and
    in the helper that mounts by itself."""
    for hd in running(HostileDriver(setup=plain_base if directories else None)):
        d, r = hd.driver, hd.rpcd
        vid = "sv-" + "0" * 31 + "7"
        st = os.path.join(d.root, "staging", "renamed")
        os.makedirs(st)
        assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=16 * MiB)).type == \
            T.ANS_CREATE
        assert r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=st, flags=F_BLOCK)).type \
            == T.ANS_STAGE
        (dev,) = device_of(d, vid)
        assert rename_device("/dev/loop%d" % dev, "tenant-was-here") == vid
        a = r.call(Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st, flags=F_BLOCK))
        assert a.type == T.ANS_ERROR, a
        assert device_of(d, vid) == [dev]  # not sepcsi's any more: left alone
        a = r.call(Msg(T.REQ_DELETE, volume_id=vid))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY and "held by a loop device" in \
            a.reason, a
        assert os.path.exists(os.path.join(d.data, "images", vid + ".img"))
        rename_device("/dev/loop%d" % dev, vid)  # named back: sepcsi's again
        a = r.call(Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st, flags=F_BLOCK))
        assert a.type == T.ANS_UNSTAGE, a
        assert device_of(d, vid) == []
        assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE
        assert loops_backed_by(d.data) == []


@pytest.mark.parametrize("directories", [False, True], ids=["core", "helper"])
def test_a_tenant_cannot_tear_its_device_down_or_rebind_it(directories):
    """A pod detaches its raw block device itself (LOOP_CLR_FD, no capability needed) and
    closes it. As the device's only opener it would have it torn down, its number free
    while the pod's node and the staging bind it came through still lead to it, and the
    pod could bind it to a file of its own (LOOP_SET_FD). The device's pin (mh_loop.c)
    holds it: it stays bound to the pod's own image, takes no file of the pod's, the next
    volume gets another number, and UNSTAGE leaves neither the device nor its pin, beside
    the core and in the helper that mounts by itself."""
    for d in running(Driver(setup=plain_base if directories else None)):
        va, sta = stage(d, "freed-a")
        with open(os.path.join(d.data, "images", va + ".img"), "r+b") as f:
            f.write(b"TENANT-1")
            os.fsync(f.fileno())
        node = os.path.join(sta, "dev")
        rdev = os.stat(node).st_rdev
        (dev,) = device_of(d, va)
        own = os.path.join(d.root, "own.img")
        with open(own, "wb") as f:
            f.truncate(MiB)
        assert len(pins_of(rdev)) == 1
        pod = Pod(node)
        try:
            assert pod.do("open rw", "clr", "close") == "ok"
            assert pod.do("open rw", "setfd " + own) == "error EBUSY"
            assert pod.do("close") == "ok"
            time.sleep(0.5)  # a teardown would be done by now
            assert device_of(d, va) == [dev] and len(pins_of(rdev)) == 1
            vb, stb = stage(d, "freed-b")
            assert os.stat(os.path.join(stb, "dev")).st_rdev != rdev
            assert pod.do("read") == "data TENANT-1"
        finally:
            pod.end()
        d.client.node("NodeUnstageVolume", volume_id=va, staging_target_path=sta)
        assert device_of(d, va) == [] and pins_of(rdev) == []
        d.client.controller("DeleteVolume", volume_id=va)
        unstage_and_delete(d, vb, stb)


def test_a_raw_stage_never_waits_for_a_foreign_device_in_the_helper():
    """In the helper that mounts by itself (which keeps its records on disk): a read-only
    loop device of someone else's, backed by a file of a FUSE file system whose daemon
    stops answering. A raw block volume's pin is recorded, empty, before it is attached,
    and found by that record at NodeUnstageVolume, so neither asks that device its status:
    both are answered."""
    for d in running(Driver(setup=plain_base)):
        c = d.client
        with StalledReadonlyDevice(d.tmp):
            vid = c.controller("CreateVolume", name="blk", volume_capabilities=[block_cap()],
                               capacity_range=c.pb.CapacityRange(required_bytes=16 * MiB)
                               ).volume.volume_id
            st = os.path.join(d.root, "staging", "blk")
            os.makedirs(st)
            c.node("NodeStageVolume", volume_id=vid, staging_target_path=st,
                   volume_capability=block_cap(), timeout=HANG)
            c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st, timeout=HANG)
            assert device_of(d, vid) == []
        c.controller("DeleteVolume", volume_id=vid)
        assert loops_backed_by(d.data) == []


def test_a_raw_unstage_after_the_helper_s_restart_never_waits_for_a_foreign_device():
    """As above, with the helper killed between the stage and the unstage: its start
    rebuilds the records of pins with those of the images (the devices backed by each
    device's node), so the unstage after it still asks no device but its pin."""
    for d in running(Driver(setup=plain_base)):
        c = d.client
        vid, st = stage(d, "restarted")
        helper = d.children()["sepcsi-mounthel"]
        os.kill(helper, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len(re.findall(r"child_ready\W+role\W+mounthelper", d.logs())) < 2:
            assert time.monotonic() < deadline, "no new helper"
            time.sleep(0.05)
        with StalledReadonlyDevice(d.tmp):
            c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st, timeout=HANG)
            assert device_of(d, vid) == []
        c.controller("DeleteVolume", volume_id=vid)
        assert loops_backed_by(d.data) == []


@pytest.mark.parametrize("directories", [False, True], ids=["core", "helper"])
def test_a_moment_s_holder_at_unstage_is_waited_for(directories):
    """Something holds a raw block device for a moment as NodeUnstageVolume comes (udev's
    probe, a reader). The detach finds it held and pins the device again; the helper asks
    again at growing intervals for up to 2 s, so the call is answered OK once the holder
    lets go, with no device and no pin left."""
    for d in running(Driver(setup=plain_base if directories else None)):
        vid, st = stage(d, "held")
        rdev = os.stat(os.path.join(st, "dev")).st_rdev
        node = os.path.join(d.tmp, "probe-node")
        os.mknod(node, 0o600 | 0o60000, rdev)
        fd = os.open(node, os.O_RDONLY)
        threading.Timer(0.3, os.close, [fd]).start()
        d.client.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
        assert device_of(d, vid) == [] and pins_of(rdev) == []
        d.client.controller("DeleteVolume", volume_id=vid)
        assert loops_backed_by(d.data) == []
