"""A read-only raw block device against its tenant (raw_tenant.Pod: root without any
capability, holding only its node). The loop driver lets whoever holds a read-only loop
device open give it another backing file of the same size (LOOP_CHANGE_FD), with no
capability. A tenant that gave its device a file on a FUSE file system whose daemon then
stops answering made every later question of that device's status hang the core's one
thread (LOOP_GET_STATUS64 asks the backing file's file system): its UNPUBLISH, ATTACHED,
DELETE, and the look at every device at each start, so every volume of the node.

So a raw block device is never read-only as the loop driver sees it (LO_FLAGS_READ_ONLY,
which LOOP_CHANGE_FD requires): a read-only one is read-only at the block layer
(BLKROSET, which only CAP_SYS_ADMIN changes and which every write path obeys), and every
attach sets that state, since the kernel keeps it for the number across a detach
(mh_loop_attach, mounthelper/mh_loop.c). Found by a review of 2026-12-03;
docs/security.md, "Tenants and their bytes"."""
import fcntl
import os
import struct
import subprocess

import pytest

from mh_wire import F_BLOCK, Msg, T
from raw_tenant import Pod
from stallfuse import StallFuse
from test_core import VOL, core, fresh, stage, unpublish, unstage  # noqa: F401
from test_core_review import HANG, mh_wire_loops
from test_loop_numbers import _free_devices, _loops, _marked, _unpin

BLKROSET = 0x125D
BLKROGET = 0x125E


def _readonly_node(c, vid, where):
    """The staging and the node a pod gets of a read-only raw block volume: a read-only
    staging's, or a read-only publication's own device (of a writable staging)."""
    st = c.dir("blk/" + where.split()[1])
    if where == "readonly staging":
        c.ok(stage(vid, st, fs="", flags=F_BLOCK, readonly=1))
        return st, os.path.join(st, "dev"), None
    c.ok(stage(vid, st, fs="", flags=F_BLOCK))
    target = os.path.join(c.dir("pods/p1"), "vol")
    c.ok(Msg(T.REQ_PUBLISH, volume_id=vid, staging_path=st, target_path=target, readonly=1,
             flags=F_BLOCK))
    return st, target, target


def _name(rdev):
    """loopN, the kernel's name of the device with that number."""
    return os.path.basename(os.readlink("/sys/dev/block/%d:%d" % (os.major(rdev),
                                                                os.minor(rdev))))


def _ro(node):
    with open("/sys/block/%s/ro" % _name(os.stat(node).st_rdev)) as f:
        return f.read().strip() == "1"


@pytest.mark.parametrize("where", ["readonly staging", "readonly publication"])
def test_a_tenant_cannot_give_its_readonly_device_a_backing_file_that_stalls(core, where):
    """The pod asks its read-only device to read a file of its own on a FUSE file system
    (the same size as its image) and stops that file system's daemon: the loop driver
    refuses the change, the pod writes nothing either way, and the core answers every
    question about the volume's devices."""
    img = _marked(core, VOL, b"TENANT-1")
    mp = os.path.join(core.out, "fuse")
    os.makedirs(mp)
    fs = StallFuse(mp, file_size=os.path.getsize(img))
    st, node, target = _readonly_node(core, VOL, where)
    assert _ro(node)
    pod = Pod(node)
    try:
        assert pod.do("open ro", "changefd " + os.path.join(mp, "img")) == "error EINVAL"
        assert pod.do("close", "open rw", "write") == "error EPERM"
        assert pod.do("changefd " + os.path.join(mp, "img")) == "error EINVAL"
        fs.stall()
        ans = core.call(Msg(T.REQ_ATTACHED, volume_id=VOL), timeout=HANG)
        assert ans.type == T.ANS_ATTACHED and ans.devices >= 1, ans
        assert pod.do("close", "read") == "data TENANT-1"
    finally:
        pod.end()
        for name in _loops():  # the pod's device, had the change passed: root mends it
            try:
                with open("/sys/block/%s/loop/backing_file" % name) as f:
                    fused = f.read().strip().endswith("/fuse/img")
            except OSError:
                fused = False
            if fused:
                subprocess.run(["losetup", "-d", "/dev/" + name], check=False)
        fs.close()
    rdev = os.stat(node).st_rdev
    if target:
        core.ok(unpublish(VOL, target))
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert mh_wire_loops(img) == []
    # Its number is left writable for whoever attaches it next (the kernel would keep it
    # read-only): the core's detach, as its only opener, said so before the end.
    fd = os.open("/dev/" + _name(rdev), os.O_RDONLY)
    try:
        assert struct.unpack("i", fcntl.ioctl(fd, BLKROGET, bytes(4)))[0] == 0
    finally:
        os.close(fd)


def test_a_number_left_read_only_is_writable_at_its_next_attach(core):
    """The kernel keeps a device's read-only state (BLKROSET) for its number across a
    detach: a tenant's read-only device torn down under its node, or any device someone
    made read-only, leaves its number read-only. A writable raw block staging on such a
    number is writable; a read-only one stays so."""
    img = _marked(core, VOL, b"TENANT-1")
    _free_devices(2)
    made_ro = []
    try:
        for name in sorted(_loops()):
            if not os.path.exists("/sys/block/%s/loop" % name):
                fd = os.open("/dev/" + name, os.O_RDONLY)
                fcntl.ioctl(fd, BLKROSET, struct.pack("i", 1))
                os.close(fd)
                made_ro.append(name)
        st = core.dir("blk/rw")
        core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
        node = os.path.join(st, "dev")
        assert not _ro(node)
        pod = Pod(node)
        try:
            assert pod.do("open rw", "write", "close", "read") == "data TENANT-X"
        finally:
            pod.end()
        core.ok(unstage(VOL, st, flags=F_BLOCK))
    finally:
        for name in made_ro:
            try:
                fd = os.open("/dev/" + name, os.O_RDONLY)
                fcntl.ioctl(fd, BLKROSET, struct.pack("i", 0))
                os.close(fd)
            except OSError:
                pass
    assert mh_wire_loops(img) == []


def test_a_number_a_tenant_left_read_only_is_writable_once_its_image_is_let_go(core):
    """A tenant tears its read-only device down itself (LOOP_CLR_FD as its only opener, its
    pin removed first by root, as a device of a version without pins had none):
    the kernel keeps the number read-only, which a later attacher that does not set it
    (another driver, a host's losetup) would inherit. When the core finds the image held
    by no device any more (ATTACHED, before the orchestrator deletes or formats it), the
    number its records knew is made writable again, if it is still bound to nothing."""
    img = _marked(core, VOL, b"TENANT-1")
    st, node, _ = _readonly_node(core, VOL, "readonly staging")
    name = _name(os.stat(node).st_rdev)
    _unpin(os.stat(node).st_rdev)  # as a device of a version without pins
    pod = Pod(node)
    try:
        assert pod.do("open ro", "clr", "close") == "ok"
    finally:
        pod.end()
    assert not os.path.exists("/sys/block/%s/loop" % name)  # torn down
    fd = os.open("/dev/" + name, os.O_RDONLY)
    try:
        assert struct.unpack("i", fcntl.ioctl(fd, BLKROGET, bytes(4)))[0] == 1
        ans = core.ok(Msg(T.REQ_ATTACHED, volume_id=VOL))
        assert ans.devices == 0, ans
        assert struct.unpack("i", fcntl.ioctl(fd, BLKROGET, bytes(4)))[0] == 0
    finally:
        os.close(fd)
        subprocess.run(["umount", node], check=False)  # the tenant's broken staging
    assert mh_wire_loops(img) == []
