"""Which number an attach takes (free_number, mounthelper/mh_loop.c), against a tenant
given a raw block device, as a pod is (raw_tenant.Pod: root without any capability,
holding only its node). The loop driver lets whoever holds a device open detach it
(LOOP_CLR_FD); as its only opener, the pod tears the device down at its close, and its
number is free while the pod's node and the binds it came through still lead to it. No
attach ever takes such a number, the core killed or not between, and the way to another
number never waits for anyone's file system, nor makes a device per attach (the filter
lets the core make a new device only as the kernel numbers it: tests/unit/test_seccomp.c).

Found by two reviews of 2026-12-03 (the first run of the attack through sepcsi read the
next tenant's image); docs/security.md, "Tenants and their bytes", says what is left."""
import fcntl
import os
import signal
import subprocess

import pytest

from mh_wire import F_BLOCK, Msg, T
from raw_tenant import Pod
from stallfuse import StallFuse
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


@pytest.mark.parametrize("how,where", CASES)
def test_a_tenant_that_detaches_its_device_never_reaches_the_next_volume(core, where, how):
    """A pod given a raw block device detaches it itself (LOOP_CLR_FD on its open device;
    renamed first, its device is no longer one the core knows as its volume's), closes
    it, and so tears it down as its only opener; around it the core may die or be ended
    and start again. The device's number is then free, while the pod's node and the binds
    it came through still lead to it. The core's next attach (another tenant's volume)
    never takes a number whose node is still bound anywhere: the pod, opening its node
    again, reads its own volume or nothing, never the next tenant's."""
    _marked(core, VOL, b"TENANT-1")
    _marked(core, VOL2, b"TENANT-2")
    st, blk2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    node = os.path.join(st, "dev")
    if where == "readonly publication":
        node = os.path.join(core.dir("pods/p1"), "vol")
        core.ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=node,
                    readonly=1, flags=F_BLOCK))
    rdev = os.stat(node).st_rdev
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
        core.ok(stage(VOL2, blk2, fs="", flags=F_BLOCK))
        assert os.stat(os.path.join(blk2, "dev")).st_rdev != rdev
        assert pod.do("read") in ("data TENANT-1", "data", "error ENXIO")  # "data": 0 bytes
    finally:
        pod.end()
    core.ok(unstage(VOL2, blk2, flags=F_BLOCK))
    assert mh_wire_loops(core.img(VOL2)) == []
    for d in mh_wire_loops(core.img(VOL)):  # the pod's own volume: only root can mend it
        subprocess.run(["losetup", "-d", d], check=False)


def test_with_no_other_free_device_the_next_volume_gets_a_new_one(core):
    """As above, and every other loop device of the machine is bound (root's, here): the
    only free number is the one still bound at the pod's staging. The next volume gets a
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
    system): which devices are bound it reads from sysfs. The next STAGE is answered."""
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
    """A tenant holds its device open after its volume was unstaged (a descriptor passed
    to another of its processes), detaches it as its only opener and keeps it: the device
    is in its teardown, every new open of it fails ENXIO, for as long as the tenant likes.
    Another of its raw volumes is detached under its node, so the number the kernel
    offers first is still bound. Looking for another, the core takes the held device for
    bound (sysfs still shows its backing file): the next STAGE gets a free one, or a new
    one, and is answered."""
    core.image(VOL, fs=None)
    core.image(VOL2, fs=None)
    core.image(VOL3, fs=None)
    st, st3, blk2 = core.dir("blk/v1"), core.dir("blk/v3"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    node = os.path.join(core.out, "container-dev")  # the runtime's node in the container
    os.mknod(node, 0o600 | 0o60000, os.stat(os.path.join(st, "dev")).st_rdev)
    scratch = core.image(None, fs=None, size=MiB, path=os.path.join(core.out, "root.img"),
                         uid=0)
    holder, pod, roots = Pod(node), None, []
    try:
        assert holder.do("open rw") == "ok"
        core.call(unstage(VOL, st, flags=F_BLOCK))  # BUSY, EALREADY: left to clear itself
        core.ok(unstage(VOL, st, flags=F_BLOCK))
        assert holder.do("clr") == "ok"  # only opener: in its teardown, still held
        core.ok(stage(VOL3, st3, fs="", flags=F_BLOCK))
        rdev3 = os.stat(os.path.join(st3, "dev")).st_rdev
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

