"""A tenant given a raw block device, as a pod is (raw_tenant.Pod: root without any
capability, holding only its node), against its device's number. The loop driver lets
whoever holds a device open detach it (LOOP_CLR_FD) and bind a torn-down one to a file of
its own (LOOP_SET_FD), neither needing a capability; as its device's only opener, the pod
would have it torn down at its close.

- Every raw block device is pinned (mounthelper/mh_loop.c, "pins"): a read-only loop
  device of the driver's own backed by it holds it open, so the pod is never its only
  opener: its LOOP_CLR_FD only marks the device autoclear, the device stays bound to its
  image, takes no file of the pod's, and its pin outlives the core; the detach removes
  the pins first, so nothing is left.
- Which number an attach takes (free_number): where a device was torn down under its
  node all the same (its pin removed by root, or a device of a version without pins),
  no attach takes that number while a bind of it is left, the core killed or not
  between, and the way to another number never waits for anyone's file system, nor
  makes a device per attach (the filter lets the core make a new device only as the
  kernel numbers it: tests/unit/test_seccomp.c).

Found by two reviews of 2026-12-03 (the first run of the attack through sepcsi read the
next tenant's image); docs/security.md, "Tenants and their bytes", says what is left."""
import errno
import fcntl
import os
import signal
import subprocess
import time

import pytest

from mh_wire import F_BLOCK, F_REMOVE_DIR, Msg, T
from conftest import detach_loop, pins_of
from raw_tenant import Pod
from stallfuse import StalledReadonlyDevice, StallFuse
from mh_wire import E
from test_core import (MiB, VOL, VOL2, core, fresh, publish, stage, unpublish,  # noqa: F401
                       unstage)
from test_core_review import HANG, mh_wire_loops

VOL3 = "sv-" + "0" * 31 + "3"
VOL4 = "sv-" + "0" * 31 + "4"
def _marked(c, vid, mark):
    img = c.image(vid, fs=None)
    with open(img, "r+b") as f:
        f.write(mark)
    return img


def _restart(c, kill):
    """The core ends, killed (a crash, an OOM kill; its starter's end) or by its peer
    closing the channel, and the next one starts and sweeps."""
    if kill:
        os.killpg(c.proc.pid, signal.SIGKILL)
        c.proc.wait(10)
    c.stop()
    c.start()


HOW = ["detached", "detached, then the core killed", "detached, then the channel closed",
       "detached and held over a restart"]
CASES = [(how, where) for how in HOW for where in ("staging", "readonly publication")] + [
    ("renamed, detached after a restart", "staging")]  # a read-only device keeps its name


def _unpin(rdev):
    """Root removes a device's pins: as a device attached by a version without pins was."""
    pins = pins_of(rdev)
    assert pins, "a raw block device without its pin"
    for pin in pins:
        subprocess.run(["losetup", "-d", pin], check=True)


LOOP_CLR_FD = 0x4C01


def path_of(rdev):
    return "/dev/" + os.path.basename(os.readlink("/sys/dev/block/%d:%d" % (
        os.major(rdev), os.minor(rdev))))


def _bound(rdev):
    name = os.path.basename(os.readlink("/sys/dev/block/%d:%d" % (os.major(rdev),
                                                                os.minor(rdev))))
    return os.path.exists("/sys/block/%s/loop" % name)


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "unpinned"])
@pytest.mark.parametrize("how,where", CASES)
def test_a_tenant_that_detaches_its_device_never_reaches_the_next_volume(core, where, how,
                                                                         pinned):
    """A pod given a raw block device detaches it itself (LOOP_CLR_FD on its open device;
    renamed first, its device is no longer one the core knows as its volume's) and closes
    it; around it the core may die or be ended and start again. Pinned, the device stays
    bound to the pod's own volume, takes no backing file of the pod's, and comes apart
    with no device or pin left when the volume is unstaged. Unpinned by root first, it is
    torn down, its number free while the pod's node and the binds it came through still
    lead to it: the core's next attach (another tenant's volume) never takes that number.
    The pod, opening its node again, reads its own volume or nothing, never the next
    tenant's."""
    _marked(core, VOL, b"TENANT-1")
    _marked(core, VOL2, b"TENANT-2")
    st, blk2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    node, target = os.path.join(st, "dev"), None
    if where == "readonly publication":
        node = target = os.path.join(core.dir("pods/p1"), "vol")
        core.ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=node,
                    readonly=1, flags=F_BLOCK))
    rdev = os.stat(node).st_rdev
    own = os.path.join(core.out, "own.img")
    with open(own, "wb") as f:
        f.truncate(MiB)
    if not pinned:
        _unpin(rdev)
    pod = Pod(node)
    try:
        mode = "open " + ("ro" if where == "readonly publication" else "rw")
        if how.startswith("renamed"):
            assert pod.do(mode, "rename x") == "ok"
            _restart(core, kill=True)
            assert pod.do("clr", "close") == "ok"
        elif how == "detached and held over a restart":
            assert pod.do(mode, "clr") == "ok"
            _restart(core, kill=True)
            assert pod.do("close") == "ok"
        else:
            assert pod.do(mode, "clr", "close") == "ok"
            if how != "detached":
                _restart(core, kill=how.endswith("killed"))
        if pinned:  # still bound, and takes no file of the pod's
            assert _bound(rdev) and pins_of(rdev)
            assert pod.do("open ro", "setfd " + own) == "error EBUSY"
            assert pod.do("close") == "ok"
        core.ok(stage(VOL2, blk2, fs="", flags=F_BLOCK))
        assert os.stat(os.path.join(blk2, "dev")).st_rdev != rdev
        assert pod.do("read") in (("data TENANT-1",) if pinned else
                                  ("data TENANT-1", "data", "error ENXIO"))  # "data": 0 bytes
    finally:
        pod.end()
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))
    assert mh_wire_loops(core.img(VOL2)) == []
    if pinned and not how.startswith("renamed"):  # the pod's own volume comes apart whole
        if target:
            core.ok(unpublish(VOL, target))
        core.ok(unstage(VOL, st, flags=F_BLOCK))
        assert mh_wire_loops(core.img(VOL)) == [] and pins_of(rdev) == []
    for d in mh_wire_loops(core.img(VOL)):  # renamed or torn down: only root can mend it
        detach_loop(d)


def test_with_no_other_free_device_the_next_volume_gets_a_new_one(core):
    """As above (unpinned), and every other loop device of the machine is bound (root's,
    here): the only free number is the one still bound at the pod's staging. The next volume gets a
    new device, the kernel's next unused number (LOOP_CTL_ADD, which the core's filter
    allows only so), and the pod still reaches nothing of it."""
    _marked(core, VOL, b"TENANT-1")
    _marked(core, VOL2, b"TENANT-2")
    st, blk2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    node = os.path.join(st, "dev")
    rdev = os.stat(node).st_rdev
    scratch = core.image(None, fs=None, size=MiB, path=os.path.join(core.out, "root.img"),
                         uid=0)
    _unpin(rdev)
    pod, roots = Pod(node), []
    try:
        assert pod.do("open rw", "clr", "close") == "ok"
        for name in sorted(os.listdir("/sys/block")):
            dev = "/dev/" + name
            if (name.startswith("loop") and os.stat(dev).st_rdev != rdev and
                    not os.path.exists("/sys/block/%s/loop/backing_file" % name)):
                subprocess.run(["losetup", dev, scratch], check=True)
                roots.append(dev)
        before = {n for n in os.listdir("/sys/block") if n.startswith("loop")}
        core.ok(stage(VOL2, blk2, fs="", flags=F_BLOCK))
        new = os.stat(os.path.join(blk2, "dev")).st_rdev
        name = os.path.basename(os.readlink("/sys/dev/block/%d:%d" % (os.major(new),
                                                                    os.minor(new))))
        assert new != rdev and name not in before, name
        assert pod.do("read") in ("data", "error ENXIO")
    finally:
        pod.end()
        for dev in roots:
            subprocess.run(["losetup", "-d", dev], check=False)
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))
    assert mh_wire_loops(core.img(VOL2)) == []



def _loops():
    return {n for n in os.listdir("/sys/block") if n.startswith("loop")}


def _free_devices(at_least):
    """At least that many loop devices bound to nothing, made (LOOP_CTL_ADD) if the machine
    has fewer: a count of devices before and after then depends on the driver alone."""
    free = [n for n in _loops() if not os.path.exists("/sys/block/%s/loop" % n)]
    ctl = os.open("/dev/loop-control", os.O_RDWR)
    try:
        for _ in range(at_least - len(free)):
            fcntl.ioctl(ctl, 0x4C80, -1)  # LOOP_CTL_ADD, the kernel's next number
    finally:
        os.close(ctl)


def _bind_every_free(scratch, but):
    """Every free loop device but the number named bound to root's scratch file: the only
    free number is then the one still bound under the pod's node. The devices bound."""
    roots = []
    for name in sorted(_loops()):
        dev = "/dev/" + name
        if (os.stat(dev).st_rdev != but and
                not os.path.exists("/sys/block/%s/loop" % name) and
                subprocess.run(["losetup", dev, scratch]).returncode == 0):
            roots.append(dev)
    return roots


def test_the_way_to_another_number_never_waits_for_a_foreign_backing_file(core):
    """One loop device of the machine is backed by a file on a FUSE file system whose
    daemon stops answering (anyone's: a host's, a tenant's). Looking for another number,
    the core asks no device its status (LOOP_GET_STATUS64 asks the backing file's file
    system): which devices are bound it reads from sysfs. The next STAGE is answered.
    (The pod's own device is unpinned first, so that its number is free and bound.)"""
    _marked(core, VOL, b"TENANT-1")
    core.image(VOL2, fs=None)
    mp = os.path.join(core.out, "fuse")
    os.makedirs(mp)
    fs = StallFuse(mp, file_size=MiB)
    scratch = core.image(None, fs=None, size=MiB, path=os.path.join(core.out, "root.img"),
                         uid=0)
    st, blk2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    rdev = os.stat(os.path.join(st, "dev")).st_rdev
    _unpin(rdev)
    pod, roots = Pod(os.path.join(st, "dev")), []
    try:
        assert pod.do("open rw", "clr", "close") == "ok"
        fused = subprocess.run(["losetup", "-f", "--show", os.path.join(mp, "img")],
                               capture_output=True, text=True, check=True).stdout.strip()
        roots = [fused] + _bind_every_free(scratch, rdev)
        fs.stall()
        ans = core.call(stage(VOL2, blk2, fs="", flags=F_BLOCK), timeout=HANG)
        assert ans.type == T.ANS_STAGE, ans
    finally:
        fs.close()
        pod.end()
        for dev in roots:
            subprocess.run(["losetup", "-d", dev], check=False)
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))


def test_a_device_held_in_its_teardown_is_never_taken_for_free(core):
    """A tenant holds its device open after its volume was unstaged (a node of its own, as
    a container runtime makes; the device unpinned by root, as a version without pins
    left it), detaches it as its only opener and keeps it: the device
    is in its teardown, every new open of it fails ENXIO, for as long as the tenant likes.
    Another of its raw volumes is detached under its node (unpinned first by root), so
    the number the kernel offers first is still bound. Looking for another, the core
    takes the held device for bound (sysfs still shows its backing file): the next STAGE
    gets a free one, or a new one, and is answered."""
    core.image(VOL, fs=None)
    core.image(VOL2, fs=None)
    core.image(VOL3, fs=None)
    st, st3, blk2 = core.dir("blk/v1"), core.dir("blk/v3"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    node = os.path.join(core.out, "container-dev")  # the runtime's node in the container
    os.mknod(node, 0o600 | 0o60000, os.stat(os.path.join(st, "dev")).st_rdev)
    scratch = core.image(None, fs=None, size=MiB, path=os.path.join(core.out, "root.img"),
                         uid=0)
    _unpin(os.stat(node).st_rdev)
    holder, pod, roots = Pod(node), None, []
    try:
        assert holder.do("open rw") == "ok"
        core.call(unstage(VOL, st, flags=F_BLOCK))  # BUSY, EALREADY: its holder keeps it
        assert holder.do("clr") == "ok"  # only opener: in its teardown, still held
        core.ok(unstage(VOL, st, flags=F_BLOCK))
        core.ok(stage(VOL3, st3, fs="", flags=F_BLOCK))
        rdev3 = os.stat(os.path.join(st3, "dev")).st_rdev
        _unpin(rdev3)
        pod = Pod(os.path.join(st3, "dev"))
        assert pod.do("open rw", "clr", "close") == "ok"
        roots = _bind_every_free(scratch, rdev3)
        core.ok(stage(VOL2, blk2, fs="", flags=F_BLOCK))
    finally:
        holder.end()
        if pod:
            pod.end()
        for dev in roots:
            subprocess.run(["losetup", "-d", dev], check=False)
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))


def _bound_loops():
    """How many loop devices are bound: which numbers a re-pin takes is the kernel's."""
    return sum(1 for n in os.listdir("/sys/block")
               if n.startswith("loop") and os.path.exists("/sys/block/%s/loop" % n))


def _holder(c, rdev):
    """A tenant's own node of the device numbered rdev (as a container runtime makes one),
    as a Pod that holds it open read-write."""
    node = os.path.join(c.out, "container-dev")
    os.mknod(node, 0o600 | 0o60000, rdev)
    holder = Pod(node)
    assert holder.do("open rw") == "ok"
    return holder


def test_a_holder_kept_over_unstage_never_becomes_the_only_opener(core):
    """A tenant holds its device open past the UNSTAGE (a node of its own, as a container
    runtime makes). The detach removes the device's pin, finds the holder still there and
    pins it again before it lets go: UNSTAGE is BUSY (EALREADY) while the holder keeps it,
    the holder's LOOP_CLR_FD and close tear nothing down, the device takes no file of the
    holder's, and once the holder is gone the next UNSTAGE leaves no device and no pin."""
    img = _marked(core, VOL, b"TENANT-1")
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    rdev = os.stat(os.path.join(st, "dev")).st_rdev
    own = os.path.join(core.out, "own.img")
    with open(own, "wb") as f:
        f.truncate(MiB)
    holder = _holder(core, rdev)
    try:
        for _ in range(2):
            a = core.call(unstage(VOL, st, flags=F_BLOCK))
            assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
            assert _bound(rdev) and len(pins_of(rdev)) == 1
        assert holder.do("clr", "close") == "ok"
        assert _bound(rdev) and len(pins_of(rdev)) == 1
        assert holder.do("open ro", "setfd " + own) == "error EBUSY"
        assert holder.do("close") == "ok"
    finally:
        holder.end()
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == [] and pins_of(rdev) == []


def test_a_readonly_publication_its_holder_set_autoclear_comes_apart(core):
    """A pod marks its read-only publication's own device autoclear (LOOP_CLR_FD, which a
    read-only descriptor may ask). Its pin would hold such a device for good, so it is
    no longer taken for one that clears itself: UNSTAGE is BUSY while it is still bound
    at the target, UNPUBLISH detaches it and its pin, and nothing is left."""
    img = _marked(core, VOL, b"TENANT-1")
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    target = os.path.join(core.dir("pods/p1"), "vol")
    core.ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=target,
                readonly=1, flags=F_BLOCK))
    rdev = os.stat(target).st_rdev
    pod = Pod(target)
    try:
        assert pod.do("open ro", "clr", "close") == "ok"
    finally:
        pod.end()
    a = core.call(unstage(VOL, st, flags=F_BLOCK))
    assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
    core.ok(unpublish(VOL, target))
    assert pins_of(rdev) == [] and not _bound(rdev)
    _restart(core, kill=True)  # the sweep leaves the staged device and its pin
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == []


def test_no_pin_look_waits_for_a_foreign_read_only_device(core):
    """Someone (a host, or a tenant that got a device of its own) has a read-only loop
    device backed by a file of a FUSE file system whose daemon stops answering: its
    status question would wait for good. Finding a raw block device's pins asks only the
    devices the loop records name as that device's (backed by its node): raw STAGE and
    UNSTAGE are answered."""
    _marked(core, VOL, b"TENANT-1")
    core.image(VOL2, fs=None)
    st, blk2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    with StalledReadonlyDevice(core.out):
        ans = core.call(stage(VOL2, blk2, fs="", flags=F_BLOCK), timeout=HANG)
        assert ans.type == T.ANS_STAGE, ans
        ans = core.call(unstage(VOL, st, flags=F_BLOCK), timeout=HANG)
        assert ans.type == T.ANS_UNSTAGE, ans
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))
    assert mh_wire_loops(core.img(VOL)) == [] and mh_wire_loops(core.img(VOL2)) == []


def test_a_bind_that_cannot_be_looked_at_holds_no_number_up(core):
    """A raw block bind whose mount point the core cannot reach (a directory on its way
    made unreadable: the core has no CAP_DAC_OVERRIDE; only root can do it now, a tenant
    could beneath its own volume until nothing was published beneath a volume): the
    core cannot see which device that bind is of. It keeps every detach away from it
    (UNSTAGE is BUSY), but it does not take it for a bind of every number: attaches go on
    on the free devices, and a STAGE that fails again and again (an image with no file
    system) makes no new device."""
    for vid in (VOL, VOL2, VOL4):
        core.image(vid, fs=None)
    tdir = core.dir("pub/t")
    st, blk2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    target = os.path.join(tdir, "vol")
    core.ok(publish(VOL, st, target, flags=F_BLOCK))
    _free_devices(2)  # VOL2's, and one for each failing STAGE in turn
    before = _loops()
    os.chmod(tdir, 0)
    try:
        core.ok(stage(VOL2, blk2, fs="", flags=F_BLOCK))
        for _ in range(5):
            core.call(stage(VOL4, core.dir("fs4")))
        assert _loops() == before
    finally:
        os.chmod(tdir, 0o750)
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))
    core.ok(unpublish(VOL, target))
    core.ok(unstage(VOL, st, flags=F_BLOCK))



@pytest.mark.parametrize("renamed", [False, True], ids=["", "renamed"])
@pytest.mark.parametrize("where", ["staging", "read-only staging", "read-only publication"])
def test_a_device_whose_pin_a_kill_in_its_detach_took_is_pinned_again_at_start(core, where,
                                                                              renamed):
    """The core killed inside a detach, after it took the pins of a device a holder keeps
    past UNSTAGE (or UNPUBLISH) away and before it pinned the device again: the holder is
    left its only opener, the device marked autoclear by the detach's LOOP_CLR_FD. The
    next core's sweep tells a raw block device from a file system's by what no holder
    changes (its image's raw mark, or read-only at the block layer alone) and pins it
    first, whatever the holder renamed it to meanwhile (opened for writing, as a runtime
    may let a pod open a read-only one): the holder's close tears nothing down, and the
    call asked again ends it (a renamed device is left to root, pinned). The image's mark
    is read from the device's own backing file, however many names it has. A file
    system's device staged beside it is not pinned, even with its image marked raw (as a
    compromised orchestrator may mark it). Found by two reviews of 2026-12-04."""
    img = _marked(core, VOL, b"TENANT-1")
    fs_img, fs_st = core.image(VOL2), core.dir("fs/v2")
    core.ok(stage(VOL2, fs_st))
    fs_rdev = os.stat(mh_wire_loops(fs_img)[0]).st_rdev
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK, readonly=int(where == "read-only staging")))
    path = os.path.join(st, "dev")
    if where == "read-only publication":
        path = os.path.join(core.dir("pods/p1"), "vol")
        core.ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=path,
                    readonly=1, flags=F_BLOCK))
    rdev = os.stat(path).st_rdev
    node = os.path.join(core.out, "container-dev")
    os.mknod(node, 0o600 | 0o60000, rdev)
    holder = Pod(node)
    try:
        ro = "read-only" in where and not renamed
        assert holder.do("open ro" if ro else "open rw") == "ok"
        # What the killed detach did: the bind and its file gone, the pins taken away,
        # LOOP_CLR_FD on its own descriptor of the held device (autoclear), then the kill.
        subprocess.run(["umount", path], check=True)
        os.unlink(path)
        _unpin(rdev)
        fd = os.open(path_of(rdev), os.O_RDONLY | os.O_NONBLOCK)
        try:
            fcntl.ioctl(fd, LOOP_CLR_FD)
        finally:
            os.close(fd)
        if renamed:
            assert holder.do("rename x") == "ok"
        os.setxattr(fs_img, "user.sepcsi.raw", b"1")
        os.link(img, img + ".link")  # as a compromised orchestrator may name it twice
        _restart(core, kill=True)
        os.unlink(img + ".link")
        assert _bound(rdev) and len(pins_of(rdev)) == 1
        assert pins_of(fs_rdev) == []
        assert holder.do("close") == "ok"
        assert _bound(rdev) and len(pins_of(rdev)) == 1
    finally:
        holder.end()
    core.ok(unstage(VOL2, fs_st))
    assert mh_wire_loops(fs_img) == []
    if where == "read-only publication":
        core.ok(unpublish(VOL, path))
        assert renamed or (pins_of(rdev) == [] and not _bound(rdev))
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    if renamed:  # no longer the volume's: left bound, pinned, for root
        assert _bound(rdev) and len(pins_of(rdev)) == 1
        detach_loop(path_of(rdev))
    assert mh_wire_loops(img) == [] and pins_of(rdev) == []


def test_an_administrator_s_read_only_device_of_a_raw_image_is_never_pinned(core):
    """Root's losetup -r of a raw block volume's image (a backup, say): no device the
    driver attached, read-only as the loop driver sees it, which none of the driver's raw
    devices is. The start's sweep leaves it unpinned, so root's losetup -d ends it."""
    img = _marked(core, VOL, b"TENANT-1")
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))  # marks the image raw
    dev = subprocess.run(["losetup", "-r", "-f", "--show", img], capture_output=True,
                         text=True, check=True).stdout.strip()
    try:
        _restart(core, kill=True)
        assert pins_of(os.stat(dev).st_rdev) == []
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
    assert dev not in mh_wire_loops(img)
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == []


def test_a_stage_after_a_busy_unstage_finishes_its_detach(core):
    """An UNSTAGE answered BUSY because a tenant still held its device leaves that device
    pinned and marked autoclear, bound nowhere. If the CO then asks STAGE rather than the
    UNSTAGE again (kubelet does, once a new pod wants the volume), the STAGE finishes that
    detach (no mount or bind of the device is left anywhere) and stages on a new device,
    instead of answering BUSY until an UNSTAGE that never comes. While the holder still
    keeps the device, each STAGE the CO retries is BUSY and changes nothing: it takes the
    device's pin away and back, and 50 of them leave that device bound with one pin, and
    no other loop device made or left."""
    img = _marked(core, VOL, b"TENANT-1")
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    rdev = os.stat(os.path.join(st, "dev")).st_rdev
    holder = _holder(core, rdev)
    try:
        a = core.call(unstage(VOL, st, flags=F_BLOCK))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        before = _bound_loops()
        for _ in range(50):
            a = core.call(stage(VOL, st, fs="", flags=F_BLOCK))
            assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        assert _bound(rdev) and len(pins_of(rdev)) == 1 and _bound_loops() == before
        assert not os.path.exists(os.path.join(st, "dev"))
        assert holder.do("close") == "ok"
    finally:
        holder.end()
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    with open(core.path("data/audit.log")) as f:  # the core's record says what it did
        assert "detached the volume's unused loop devices first" in f.read().splitlines()[-1]
    now = os.stat(os.path.join(st, "dev")).st_rdev
    assert len(mh_wire_loops(img)) == 1 and len(pins_of(now)) == 1
    if now != rdev:
        assert pins_of(rdev) == [] and not _bound(rdev)
    with open(os.path.join(st, "dev"), "rb") as f:
        assert f.read(8) == b"TENANT-1"
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == [] and pins_of(now) == []


def _autoclear(rdev):
    with open("/sys/block/%s/loop/autoclear" % os.path.basename(path_of(rdev))) as f:
        return f.read().strip() == "1"


def test_a_stage_never_detaches_a_device_in_use_elsewhere(core):
    """What a STAGE that does not re-use a device may detach is only what nothing mounts
    or binds: a STAGE of the volume at a second staging path, and a STAGE at the first
    path after an UNSTAGE left a read-only publication's own device bound at its target,
    are BUSY and change nothing: each device stays bound, pinned, not autoclear."""
    img = _marked(core, VOL, b"TENANT-1")
    st, st2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    rdev = os.stat(os.path.join(st, "dev")).st_rdev
    for ro in (0, 1):
        a = core.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=st2, fs_type="",
                          readonly=ro, flags=F_BLOCK))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        assert _bound(rdev) and len(pins_of(rdev)) == 1 and not _autoclear(rdev)
    target = os.path.join(core.dir("pods/p1"), "vol")
    core.ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=target,
                readonly=1, flags=F_BLOCK))
    pub = os.stat(target).st_rdev
    a = core.call(unstage(VOL, st, flags=F_BLOCK))
    assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
    for ro in (0, 1):
        a = core.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=st, fs_type="",
                          readonly=ro, flags=F_BLOCK))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        assert _bound(pub) and len(pins_of(pub)) == 1 and not _autoclear(pub)
        assert os.stat(target).st_rdev == pub
    core.ok(unpublish(VOL, target))
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == []


def test_a_stage_leaves_an_administrator_s_writable_device_of_the_image_alone(core):
    """Root's writable losetup of a raw block volume's image, made before the volume is
    staged: a device the driver never attached, named by its path, not by the volume.
    A STAGE that does not re-use a device (and detaches what of the image is unused)
    leaves it bound, unpinned and not autoclear, and so does the UNSTAGE after; root's
    losetup -d still ends it."""
    img = _marked(core, VOL, b"TENANT-1")
    st = core.dir("blk/v1")
    dev = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        rdev = os.stat(dev).st_rdev
        core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
        assert _bound(rdev) and pins_of(rdev) == [] and not _autoclear(rdev)
        assert os.stat(os.path.join(st, "dev")).st_rdev != rdev
        core.ok(unstage(VOL, st, flags=F_BLOCK))
        assert _bound(rdev) and pins_of(rdev) == [] and not _autoclear(rdev)
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
    assert not _bound(rdev)
    assert mh_wire_loops(img) == []


def test_a_read_write_stage_after_a_killed_read_only_one_detaches_its_device(core):
    """A read-only raw block STAGE killed after its attach, before its bind (what is left
    is made here by root: the bind and its file removed), leaves a read-only device of
    the image, pinned, bound nowhere. A read-write STAGE that the CO asks next does not
    re-use it: it detaches it and its pin, and stages on a writable device of its own,
    which writes reach."""
    img = _marked(core, VOL, b"TENANT-1")
    st = core.dir("blk/v1")
    core.ok(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=st, fs_type="", readonly=1,
                flags=F_BLOCK))
    node = os.path.join(st, "dev")
    old = os.stat(node).st_rdev
    assert len(pins_of(old)) == 1
    subprocess.run(["umount", node], check=True)
    os.unlink(node)
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    now = os.stat(node).st_rdev
    assert mh_wire_loops(img) == [path_of(now)] and len(pins_of(now)) == 1
    if now != old:  # else the number was taken again
        assert pins_of(old) == [] and not _bound(old)
    with open(node, "r+b") as f:
        f.write(b"TENANT-9")
        f.flush()
        os.fsync(f.fileno())
    with open(img, "rb") as f:
        assert f.read(8) == b"TENANT-9"
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == [] and pins_of(now) == []


def test_a_file_system_unstage_never_takes_a_raw_block_volume_s_binds(core):
    """UNSTAGE without the block flag (a compromised orchestrator's, or one that took the
    volume for a file system) of a raw block volume: at a read-only publication's target,
    an ephemeral one's (remove the directory), it is REFUSED and the pod's bind of its own
    device stays; at the staging directory, which holds the device file, not a mount, it
    is not staged there: OK, with the staging's bind left. Each bind is this volume's, so
    nothing past the volume was at stake; only UNPUBLISH and a raw UNSTAGE take them."""
    img = _marked(core, VOL, b"TENANT-1")
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    staged = os.stat(os.path.join(st, "dev")).st_rdev
    target = os.path.join(core.dir("pods/p1"), "vol")
    core.ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=target,
                readonly=1, flags=F_BLOCK))
    pub = os.stat(target).st_rdev
    for flags in (0, F_REMOVE_DIR):
        a = core.call(unstage(VOL, target, flags=flags))
        assert a.type == T.ANS_ERROR and a.kind == E.REFUSED, a
        if flags:  # at a target, as an ephemeral volume's staging
            assert "holds the volume as a raw block device" in a.reason, a
        assert os.stat(target).st_rdev == pub and _bound(pub) and len(pins_of(pub)) == 1
    core.ok(unstage(VOL, st))
    assert os.stat(os.path.join(st, "dev")).st_rdev == staged and _bound(staged)
    core.ok(unpublish(VOL, target))
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == []


def test_a_raw_unstage_never_walks_into_a_mounted_staging_directory(core):
    """UNSTAGE with the block flag at a path where another volume's file system is
    staged: the staging directory is a mount, so the core never looks for its device
    file inside that tenant's file system (nor removes anything there); it is REFUSED,
    the raw volume's own staging untouched, the file system still mounted and whole."""
    img = _marked(core, VOL, b"TENANT-1")
    core.image(VOL2)
    raw, fs = core.dir("blk/v1"), core.dir("staging/v2")
    core.ok(stage(VOL, raw, fs="", flags=F_BLOCK))
    core.ok(stage(VOL2, fs))
    os.chmod(fs, 0o755)
    names = ["dev", ".dev.sepcsi-" + VOL]  # the tenant's: the device file's and its temp
    for name in names:
        open(os.path.join(fs, name), "w").close()
    a = core.call(unstage(VOL, fs, flags=F_BLOCK))
    assert a.type == T.ANS_ERROR and a.kind == E.REFUSED, a
    assert "is mounted at the staging path" in a.reason, a
    assert sorted(os.listdir(fs)) == sorted(names + ["lost+found"])
    assert os.path.ismount(fs) and len(mh_wire_loops(img)) == 1
    core.ok(unstage(VOL2, fs))
    core.ok(unstage(VOL, raw, flags=F_BLOCK))
    assert mh_wire_loops(img) == []


# ---- A file system's UNSTAGE and the other devices of its image (review of 44517db) ----

LOOP_SET_STATUS64, LOOP_GET_STATUS64 = 0x4C04, 0x4C05


def _named(dev, name):
    """Root sets a loop device's name (lo_file_name), as mh_loop_attach names the core's."""
    fd = os.open(dev, os.O_RDONLY)
    try:
        info = bytearray(fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(232)))
        info[56:120] = name.encode().ljust(64, b"\0")
        fcntl.ioctl(fd, LOOP_SET_STATUS64, bytes(info))
    finally:
        os.close(fd)


def _root_losetup(img, ro, dev=None):
    """Root's own losetup of img (named by its path): the device."""
    args = ["losetup"] + (["-r"] if ro else []) + ([dev] if dev else ["-f", "--show"]) + [img]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    return dev or out


def _nr(dev):
    return int(os.path.basename(dev)[len("loop"):])


def _bind_node(c, dev, name):
    """Root's bind of dev's node on a file outside the core's paths: the mount point."""
    hold = os.path.join(c.out, name)
    open(hold, "w").close()
    subprocess.run(["mount", "--bind", dev, hold], check=True)
    return hold


def _left_over(c, vid, dev=None, ro=True):
    """A read-only device of vid's image that nothing mounts, named by vid as the core
    names its own: what a STAGE killed between its attach and its mount leaves when the
    device does not clear itself (made here by root: losetup -r, then the name; dev: on
    that number; ro False: writable). The core learns of it as of every device, at its
    start (one look at each); a bind of its node holds it over that start, so that the
    start's sweep leaves it, and is then removed: the device is left to the next
    UNSTAGE. Unless dev is given, it is numbered above the image's devices (as a device
    attached later is)."""
    has = mh_wire_loops(c.img(vid))
    return _left_overs(c, vid, [dev or (_free_above(max(has, key=_nr)) if has else None)],
                       ro)[0]


def _left_overs(c, vid, devs, ro=True):
    """As _left_over, one device on each number of devs (None: the lowest free), all
    made before the one start."""
    made, holds = [], []
    for dev in devs:
        made.append(_root_losetup(c.img(vid), ro, dev))
        _named(made[-1], vid)
        holds.append(_bind_node(c, made[-1], "hold-" + os.path.basename(made[-1])))
    try:
        _restart(c, kill=False)
    finally:
        for hold in holds:
            subprocess.run(["umount", hold], check=True)
    return made


def _free_above(dev):
    """A loop device bound to nothing numbered above dev's (made if there is none): where
    a leftover goes that the core, which looks at an image's devices by number, meets
    after the staging's device."""
    free = sorted(_nr(n) for n in _loops() if not os.path.exists("/sys/block/%s/loop" % n))
    above = [n for n in free if n > _nr(dev)]
    if above:
        return "/dev/loop%d" % above[0]
    ctl = os.open("/dev/loop-control", os.O_RDWR)
    try:
        nr = fcntl.ioctl(ctl, 0x4C80, max(_nr(n) for n in _loops()) + 1)  # LOOP_CTL_ADD
    finally:
        os.close(ctl)
    return "/dev/loop%d" % nr


def _end_loops(*imgs):
    for img in imgs:
        for d in mh_wire_loops(img):
            detach_loop(d)


def test_a_file_system_unstage_detaches_a_leftover_unused_device_of_its_image(core):
    """A file system volume is staged; a device of its image that nothing mounts or binds
    is left beside its staging's (a STAGE killed before its mount, its device kept). The
    UNSTAGE unmounts the staging and detaches both: no device of the image is left, no
    pin, and the volume stages again."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    try:
        [staged] = mh_wire_loops(img)
        left = _left_over(core, VOL)
        assert _nr(left) > _nr(staged)  # the core looks at an image's devices by number
        assert sorted(mh_wire_loops(img)) == sorted([staged, left])
        rdevs = [os.stat(d).st_rdev for d in (staged, left)]
        core.ok(unstage(VOL, st))
        assert not os.path.ismount(st)
        assert mh_wire_loops(img) == [] and all(pins_of(r) == [] for r in rdevs)
        core.ok(stage(VOL, st))
        core.ok(unstage(VOL, st))
        assert mh_wire_loops(img) == []
    finally:
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        _end_loops(img)


@pytest.mark.parametrize("restart", [False, True], ids=["", "known at start"])
@pytest.mark.parametrize("ro", [True, False], ids=["read-only", "read-write"])
def test_a_file_system_unstage_leaves_an_administrator_s_device_of_the_image_alone(core, ro,
                                                                                  restart):
    """Root's own losetup of a file system volume's image (a backup, say), made before
    the STAGE: a device the driver never attached, named by its path. Known to the core
    or not (made before its start, every device is), the STAGE stages on a device of its
    own, and STAGE and UNSTAGE leave root's bound, not autoclear, unpinned; root's
    losetup -d still ends it."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    dev = _root_losetup(img, ro)
    try:
        rdev = os.stat(dev).st_rdev
        if restart:
            _restart(core, kill=False)
        for _ in range(2):
            core.ok(stage(VOL, st))
            assert os.stat(st).st_dev != os.stat(core.dir("staging")).st_dev
            assert _bound(rdev) and pins_of(rdev) == [] and not _autoclear(rdev)
            core.ok(unstage(VOL, st))
            assert not os.path.ismount(st)
            assert _bound(rdev) and pins_of(rdev) == [] and not _autoclear(rdev)
            assert mh_wire_loops(img) == [dev]
    finally:
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)
    assert not _bound(rdev)
    assert mh_wire_loops(img) == []


def test_a_file_system_unstage_never_tears_down_a_leftover_device_a_tenant_holds(core):
    """As above, and a tenant holds the leftover device open (a node of its own, as a
    container runtime makes). The UNSTAGE unmounts the staging and detaches its device,
    then finds the leftover held: BUSY (EALREADY) at once, the device still bound to the
    volume's image (only marked to clear itself), never torn down under its holder. Once
    the holder closes it, it is gone, and the UNSTAGE asked again is OK with no device of
    the image left. Another volume staged beside it is untouched throughout."""
    img, img2 = core.image(VOL), core.image(VOL2)
    st, st2 = core.dir("staging/v1"), core.dir("staging/v2")
    core.ok(stage(VOL, st))
    core.ok(stage(VOL2, st2))
    holder = None
    try:
        [staged], [other] = mh_wire_loops(img), mh_wire_loops(img2)
        left = _left_over(core, VOL)
        rdev = os.stat(left).st_rdev
        node = os.path.join(core.out, "container-dev")
        os.mknod(node, 0o600 | 0o60000, rdev)
        holder = Pod(node)
        assert holder.do("open ro") == "ok"
        for _ in range(3):
            a = core.call(unstage(VOL, st))
            assert a.type in (T.ANS_ERROR, T.ANS_UNSTAGE), a
            assert a.type == T.ANS_UNSTAGE or a.kind == E.BUSY, a
            assert not os.path.ismount(st) and _bound(rdev) and mh_wire_loops(img) == [left]
            assert not _bound(os.stat(staged).st_rdev) or staged == left
        assert holder.do("close") == "ok"
        holder.end()
        holder = None
        core.ok(unstage(VOL, st))
        assert mh_wire_loops(img) == [] and not _bound(rdev) and pins_of(rdev) == []
        assert os.path.ismount(st2) and mh_wire_loops(img2) == [other]
    finally:
        if holder:
            holder.end()
        for p in (st, st2):
            if os.path.ismount(p):
                subprocess.run(["umount", p], check=False)
        _end_loops(img, img2)


def _looked(dev):
    """What a device is: bound to which file (its st_dev, st_ino), under which name,
    autoclear or not, and its pins."""
    rdev = os.stat(dev).st_rdev
    if not _bound(rdev):
        return None
    fd = os.open(dev, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(232))
    finally:
        os.close(fd)
    return (info[0:16], info[56:120].rstrip(b"\0"), _autoclear(rdev), tuple(pins_of(rdev)))


def test_a_file_system_unstage_leaves_devices_of_other_files_named_like_the_volume(core):
    """Devices named or backed confusingly beside a staged file system volume, each made
    before a start of the core (so it knows every one): another raw block volume's,
    renamed by its pod to this volume's id (LOOP_SET_STATUS64 on its open device); root's
    of a third volume's image through a symlink that looks like this volume's image,
    renamed to this volume's id; root's of a copy of this image whose file name is this
    volume's, renamed likewise; root's of this very image through a hard link (named by
    that path; the link then removed). The UNSTAGE is OK and leaves each bound as it was: same backing file,
    name, autoclear, pins; the raw volume's staging and publication are whole."""
    img = core.image(VOL)
    raw2 = _marked(core, VOL2, b"TENANT-2")
    img3 = core.image(VOL3)
    st, blk2 = core.dir("staging/v1"), core.dir("blk/v2")
    target = os.path.join(core.dir("pods/p2"), "vol")
    core.ok(stage(VOL, st))
    core.ok(stage(VOL2, blk2, fs="", flags=F_BLOCK))
    core.ok(publish(VOL2, blk2, target, flags=F_BLOCK))
    pod, devs = Pod(target), []
    try:
        assert pod.do("open rw", "rename " + VOL) == "ok"
        pod_dev = path_of(os.stat(target).st_rdev)
        link = os.path.join(core.out, VOL + ".img")  # a symlink to VOL3's image
        os.symlink(img3, link)
        devs.append(_root_losetup(link, True))
        _named(devs[-1], VOL)
        copy = os.path.join(core.out, "copy", VOL + ".img")
        os.makedirs(os.path.dirname(copy))
        subprocess.run(["cp", "--sparse=always", img, copy], check=True)
        devs.append(_root_losetup(copy, False))
        _named(devs[-1], VOL)
        hard = os.path.join(core.out, "backup.img")
        os.link(img, hard)
        devs.append(_root_losetup(hard, True))
        os.unlink(hard)  # a second name of the image: every request on it is refused
        _restart(core, kill=False)
        before = {d: _looked(d) for d in devs + [pod_dev]}
        assert all(before.values()), before
        core.ok(unstage(VOL, st))
        assert not os.path.ismount(st)
        assert {d: _looked(d) for d in before} == before
        assert mh_wire_loops(img) == [devs[2]]  # root's, through its hard link
        assert os.stat(target).st_rdev == os.stat(pod_dev).st_rdev
        assert os.stat(os.path.join(blk2, "dev")).st_rdev == os.stat(pod_dev).st_rdev
        with open(os.path.join(blk2, "dev"), "rb") as f:
            assert f.read(8) == b"TENANT-2"
    finally:
        pod.end()
        for d in devs:
            subprocess.run(["losetup", "-d", d], check=False)
    core.ok(unpublish(VOL2, target))
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))
    _end_loops(img, raw2, img3)  # the renamed device is no longer the volume's: root's
    assert mh_wire_loops(img) == [] and mh_wire_loops(raw2) == []


def _root_use(c, dev, how):
    """Root's use of dev outside every path of the driver's: its file system mounted
    (read-only), or its node bound on a file. The mount point."""
    if how == "bound":
        return _bind_node(c, dev, "root-bind")
    mp = os.path.join(c.out, "root-mnt")
    os.makedirs(mp)
    subprocess.run(["mount", "-o", "ro,noload", dev, mp], check=True)
    return mp


@pytest.mark.parametrize("how", ["mounted", "bound"])
def test_a_file_system_unstage_never_detaches_a_device_of_its_image_in_use_elsewhere(core,
                                                                                    how):
    """A device of the volume's image (named by it: a leftover) that root mounts or binds
    outside every kubelet path. The UNSTAGE is BUSY and leaves that use alone: the mount
    or bind still there, the device bound, not autoclear, unpinned, readable."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    mp = None
    try:
        left = _left_over(core, VOL)
        rdev = os.stat(left).st_rdev
        mp = _root_use(core, left, how)
        a = core.call(unstage(VOL, st))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        assert "in use at " + mp in a.reason, a
        assert os.path.ismount(mp) and _bound(rdev) and not _autoclear(rdev)
        assert pins_of(rdev) == [] and mh_wire_loops(img) == [left]
        if how == "mounted":
            assert "lost+found" in os.listdir(mp)
        else:
            with open(mp, "rb") as f:
                assert len(f.read(4096)) == 4096
    finally:
        if mp:
            subprocess.run(["umount", mp], check=False)
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        _end_loops(img)


def test_a_file_system_unstage_asked_again_after_its_busy_finishes_the_detach(core):
    """As above: the UNSTAGE was BUSY for root's mount of a leftover device, after it had
    unmounted the staging. Root then unmounts it. The UNSTAGE the CO asks again must not
    be a false success: it detaches the now unused device (as a raw block UNSTAGE asked
    again does), or stays BUSY; once it is OK the volume stages again."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    try:
        left = _left_over(core, VOL)
        mp = _root_use(core, left, "mounted")
        a = core.call(unstage(VOL, st))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        subprocess.run(["umount", mp], check=True)
        core.ok(unstage(VOL, st))
        assert mh_wire_loops(img) == []
        core.ok(stage(VOL, st))
        core.ok(unstage(VOL, st))
    finally:
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        _end_loops(img)


def test_a_file_system_stage_after_a_busy_unstage_finishes_its_detach(core):
    """As above, but the CO never asks that UNSTAGE again (kubelet asks NodeStage once a
    new pod wants the volume). While root's mount of the leftover stays, STAGE is BUSY and
    changes nothing; once root unmounts it, STAGE detaches the unused device first (and
    says so in its audit record), stages on a device of its own, and UNSTAGE leaves
    nothing."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    try:
        left = _left_over(core, VOL)
        mp = _root_use(core, left, "mounted")
        a = core.call(unstage(VOL, st))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        assert not os.path.ismount(st) and mh_wire_loops(img) == [left]
        a = core.call(stage(VOL, st))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY and mp in a.reason, a
        assert not os.path.ismount(st) and mh_wire_loops(img) == [left] and os.path.ismount(mp)
        subprocess.run(["umount", mp], check=True)
        core.ok(stage(VOL, st))
        with open(core.path("data/audit.log")) as f:
            assert "detached the volume's unused loop devices first" in f.read().splitlines()[-1]
        [now] = mh_wire_loops(img)
        assert os.path.ismount(st) and os.stat(st).st_dev == os.stat(now).st_rdev
        core.ok(unstage(VOL, st))
        assert mh_wire_loops(img) == []
    finally:
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        _end_loops(img)


def test_a_file_system_unstage_detaches_a_leftover_numbered_below_its_staging_device(core):
    """As test_a_file_system_unstage_detaches_a_leftover_unused_device_of_its_image, the
    leftover on a lower number than the staging's device (a number that was free again
    when it was attached). The UNSTAGE must still see its own mount, unmount it and
    detach both devices, however the devices are numbered."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    scratch = core.image(None, fs=None, size=MiB, path=os.path.join(core.out, "root.img"),
                         uid=0)
    low = _root_losetup(scratch, True)  # the lowest free number, root's for a moment
    try:
        core.ok(stage(VOL, st))
        [staged] = mh_wire_loops(img)
        subprocess.run(["losetup", "-d", low], check=True)
        left = _left_over(core, VOL, dev=low)
        assert _nr(left) < _nr(staged)
        core.ok(unstage(VOL, st))
        assert not os.path.ismount(st) and mh_wire_loops(img) == []
    finally:
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        subprocess.run(["losetup", "-d", low], check=False, stderr=subprocess.DEVNULL)
        _end_loops(img)


def test_unstages_replayed_with_and_without_the_block_flag_touch_nothing_else(core):
    """A compromised orchestrator replays UNSTAGE of a file system volume, with and
    without the block flag, at its own staging path and at its neighbours': another
    file system volume's staging and a raw block volume's staging and publication. Only
    the one UNSTAGE without the flag at the volume's own staging unmounts it (and
    detaches its device); every other is REFUSED or OK and changes nothing, before and
    after, however often it is asked: the neighbours stay mounted and bound, their
    devices bound, pinned as they were."""
    img, img2 = core.image(VOL), core.image(VOL2)
    raw3 = _marked(core, VOL3, b"TENANT-3")
    st, st2, blk3 = core.dir("staging/v1"), core.dir("staging/v2"), core.dir("blk/v3")
    target = os.path.join(core.dir("pods/p3"), "vol")
    core.ok(stage(VOL, st))
    core.ok(stage(VOL2, st2))
    core.ok(stage(VOL3, blk3, fs="", flags=F_BLOCK))
    core.ok(publish(VOL3, blk3, target, flags=F_BLOCK))
    try:
        foreign = [(st2, 0), (st2, F_BLOCK), (blk3, 0), (blk3, F_BLOCK), (target, 0),
                   (target, F_BLOCK), (target, F_REMOVE_DIR)]
        for _ in range(3):
            core.harmless(unstage(VOL, st, flags=F_BLOCK), E.REFUSED)  # a mount: no walk
            for path, flags in foreign:
                ans = core.harmless(unstage(VOL, path, flags=flags))
                assert ans.type in (T.ANS_UNSTAGE, T.ANS_ERROR), ans
                assert ans.type == T.ANS_UNSTAGE or ans.kind in (E.REFUSED, E.EXISTS), ans
        neighbours = [_looked(d) for d in mh_wire_loops(img2) + mh_wire_loops(raw3)]
        core.ok(unstage(VOL, st))
        assert not os.path.ismount(st) and mh_wire_loops(img) == []
        for _ in range(20):
            for path, flags in [(st, 0), (st, F_BLOCK)] + foreign:
                ans = core.harmless(unstage(VOL, path, flags=flags))
                assert ans.type == T.ANS_UNSTAGE or ans.kind in (E.REFUSED, E.EXISTS), ans
        assert [_looked(d) for d in mh_wire_loops(img2) + mh_wire_loops(raw3)] == neighbours
        assert os.path.ismount(st2) and os.path.ismount(target)
        with open(target, "rb") as f:
            assert f.read(8) == b"TENANT-3"
    finally:
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
    core.ok(unpublish(VOL3, target))
    core.ok(unstage(VOL3, blk3, flags=F_BLOCK))
    core.ok(unstage(VOL2, st2))
    assert mh_wire_loops(img2) == [] and mh_wire_loops(raw3) == []


def test_a_leftover_mounted_where_the_core_cannot_see_is_never_torn_down_under_its_mount(
        core):
    """Root mounts a leftover device of the volume's image in a mount namespace of its own,
    made before the volume was staged (the host's, say, where the driver's container has
    another view): the core sees no use of it. The UNSTAGE detaches the staging's device,
    and its LOOP_CLR_FD finds the leftover open: the kernel only marks it to clear
    itself, the UNSTAGE is BUSY (EALREADY), and root's mount stays whole and readable.
    When root unmounts it the device clears itself, and the UNSTAGE asked again leaves
    no device of the image."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    mp = os.path.join(core.out, "host-mnt")
    os.makedirs(mp)
    ns = subprocess.Popen(  # made before the stage: no copy of the staging's mount in it
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'echo ready && read dev && mount -o ro,noload "$dev" "$1" && echo mounted && '
         'read x && ls "$1" && umount "$1"', "sh", mp],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert ns.stdout.readline().strip() == "ready"
        core.ok(stage(VOL, st))
        left = _left_over(core, VOL)
        rdev = os.stat(left).st_rdev
        ns.stdin.write(left + "\n")
        ns.stdin.flush()
        assert ns.stdout.readline().strip() == "mounted"
        assert not os.path.ismount(mp)  # not in the core's view
        a = core.call(unstage(VOL, st))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY and a.sys_errno == errno.EALREADY, a
        assert not os.path.ismount(st) and mh_wire_loops(img) == [left]
        assert _bound(rdev) and _autoclear(rdev)
        out, _ = ns.communicate("\n", timeout=20)
        assert ns.returncode == 0 and "lost+found" in out, out
        deadline = time.monotonic() + 60  # torn down at its last close, by the kernel's work
        while _bound(rdev) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _bound(rdev), "root's unmount left the device bound"
        core.ok(unstage(VOL, st))
        assert mh_wire_loops(img) == []
    finally:
        if ns.poll() is None:
            ns.kill()
            ns.wait()
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        _end_loops(img)


def test_a_publish_binds_its_staging_s_file_system_never_a_second_one(core):
    """A writable leftover device of the image, numbered below the staging's (found first
    by a look at the image's devices). PUBLISH mounts the superblock the staging's own
    device holds, never a second file system from the leftover (two ext4 superblocks of
    one image would each overwrite what the other allocated). Found by a review of the
    change that reads a file system's device from its mount's source: PUBLISH still
    mounted from the first device found, and answered OK with two superblocks."""
    img, st = core.image(VOL), core.dir("staging/v1")
    target = os.path.join(core.dir("pods/p1"), "vol")
    scratch = core.image(None, fs=None, size=MiB, path=os.path.join(core.out, "r.img"), uid=0)
    low = _root_losetup(scratch, True)  # the lowest free number, root's for a moment
    try:
        core.ok(stage(VOL, st))
        [staged] = mh_wire_loops(img)
        subprocess.run(["losetup", "-d", low], check=True)
        left = _left_over(core, VOL, dev=low, ro=False)
        assert _nr(left) < _nr(staged)
        core.ok(publish(VOL, st, target))
        assert os.stat(target).st_dev == os.stat(st).st_dev == os.stat(staged).st_rdev
        core.ok(unpublish(VOL, target))
        core.ok(unstage(VOL, st))
        assert mh_wire_loops(img) == []
    finally:
        for p in (target, st):
            while os.path.ismount(p):
                subprocess.run(["umount", p], check=False)
        subprocess.run(["losetup", "-d", low], check=False, stderr=subprocess.DEVNULL)
        _end_loops(img)


def test_an_unstage_detaches_every_unused_leftover_past_one_held_open(core):
    """Two leftover devices of a file system's image, the first held open by a tenant, the
    second not clearing itself. The UNSTAGE asked again after its BUSY detaches the second
    all the same (the one held is marked to clear itself at its holder's close, so the
    answer is OK); once the holder closes, nothing of the image is left."""
    img, st = core.image(VOL), core.dir("staging/v1")
    core.ok(stage(VOL, st))
    holder = None
    try:
        # Both made before one start (a start's sweep detaches what nothing binds).
        above = _free_above(mh_wire_loops(img)[0])
        first, second = _left_overs(core, VOL, [above, _free_above(above)])
        assert _nr(first) < _nr(second) and len(mh_wire_loops(img)) == 3
        node = os.path.join(core.out, "container-dev")
        os.mknod(node, 0o600 | 0o60000, os.stat(first).st_rdev)
        holder = Pod(node)
        assert holder.do("open ro") == "ok"
        a = core.call(unstage(VOL, st))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        core.ok(unstage(VOL, st))
        assert mh_wire_loops(img) == [first] and _autoclear(os.stat(first).st_rdev)
        assert not _bound(os.stat(second).st_rdev)
        assert holder.do("close") == "ok"
        assert mh_wire_loops(img) == []
    finally:
        if holder:
            holder.end()
        if os.path.ismount(st):
            subprocess.run(["umount", st], check=False)
        _end_loops(img)
