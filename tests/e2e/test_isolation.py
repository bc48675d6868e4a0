"""What tenants, clients and a compromised rpcd cannot reach through the newer
features: directory volumes seen from the host, images written raw and then
mounted, one directory volume inside another, quotas a tenant steers, work a
tenant sizes in the helper's main loop, a directory named like a loop device,
and metrics that break the file (docs/security.md, "Tenants and their bytes").

Each test acts through the CSI socket and, where a compromised rpcd could do
the same, through the helper protocol (hostile.py), and checks that nothing
outside the volume changed and that the driver still serves.
"""
import errno
import fcntl
import os
import signal
import stat
import struct
import subprocess
import sys
import time

import grpc
import pytest

from conftest import Driver, loops_backed_by, mounts_under, running
from csi_client import block_cap, mount_cap
from hostile import HostileDriver
from mh_wire import F_BLOCK, LIST_MOUNTS, SRC_SNAPSHOT, SRC_VOLUME, E, Msg, T
from stallfuse import fuse_subpath
from test_dir_helper import xfs_base

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "chaos"))
import chaos  # noqa: E402

MiB = 1 << 20
NOBODY = 65534
VOL = "sv-" + "0" * 31 + "1"
VOL2 = "sv-" + "0" * 31 + "2"
VOL3 = "sv-" + "0" * 31 + "3"
SNAP = "ss-" + "0" * 31 + "1"


def code_of(fn, *a, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*a, **kw)
    return e.value.code(), e.value.details()


@pytest.fixture
def dd():
    yield from running(Driver(setup=xfs_base))


@pytest.fixture
def driver():
    yield from running(Driver())


@pytest.fixture
def hd():
    yield from running(HostileDriver(setup=xfs_base))


def dir_params(d, **extra):
    p = {"type": "directory", "baseDir": d.base}
    p.update(extra)
    return p


def pvc(ns, name):
    return {"csi.storage.k8s.io/pvc/namespace": ns, "csi.storage.k8s.io/pvc/name": name,
            "csi.storage.k8s.io/pv/name": "pv-" + name}


def create_dir(d, name, params, size=64 * MiB):
    c = d.client
    return c.controller("CreateVolume", name=name, volume_capabilities=[mount_cap("")],
                        parameters=params,
                        capacity_range=c.pb.CapacityRange(required_bytes=size)).volume


def publish_dir(d, v, pod):
    """Stage (once) and publish directory volume v for pod, as kubelet would: the target."""
    c, cap, ctx = d.client, mount_cap(""), dict(v.volume_context)
    staging = os.path.join(d.root, "staging", v.volume_id)
    os.makedirs(staging, exist_ok=True)
    c.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
           volume_capability=cap, volume_context=ctx)
    parent = os.path.join(d.root, "pods", pod, "volumes", "kubernetes.io~csi", v.volume_id)
    os.makedirs(parent, exist_ok=True)
    target = os.path.join(parent, "mount")
    c.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
           target_path=target, volume_capability=cap, volume_context=ctx)
    return target


def unpublish_dir(d, v, target):
    c = d.client
    c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=target)
    c.node("NodeUnstageVolume", volume_id=v.volume_id,
           staging_target_path=os.path.join(d.root, "staging", v.volume_id))


def as_nobody(code):
    """Run python code as uid/gid 65534 without groups; its exit status and output."""
    r = subprocess.run(["setpriv", "--reuid", str(NOBODY), "--regid", str(NOBODY),
                        "--clear-groups", "/usr/bin/python3", "-c", code],
                       capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


REACH = """
import os, subprocess, sys
d = sys.argv[1] if len(sys.argv) > 1 else %r
out = []
try:
    out.append(subprocess.run([d + "/suid-id", "-u"], capture_output=True, text=True).stdout)
except OSError as e:
    out.append("exec:%%d" %% e.errno)
for name, flags in (("null", os.O_WRONLY), ("secret", os.O_RDONLY)):
    try:
        os.close(os.open(d + "/" + name, flags))
        out.append(name + ":open")
    except OSError as e:
        out.append("%%s:%%d" %% (name, e.errno))
print(" ".join(x.strip() for x in out))
"""


def plant(target):
    """What a tenant that is root in its pod writes through its bind."""
    subprocess.run(["cp", "/usr/bin/id", os.path.join(target, "suid-id")], check=True)
    os.chmod(os.path.join(target, "suid-id"), 0o4755)
    os.mknod(os.path.join(target, "null"), 0o20666, os.makedev(1, 3))
    with open(os.path.join(target, "secret"), "w") as f:
        f.write("tenant data")
    os.chmod(os.path.join(target, "secret"), 0o644)


def unreachable(path):
    """A local user gets nothing through the host's path: no set-id, no device, no read."""
    rc, out = as_nobody(REACH % path)
    assert rc == 0, out
    words = out.split()
    assert words == ["exec:%d" % errno.EACCES, "null:%d" % errno.EACCES,
                     "secret:%d" % errno.EACCES], out


# ---- 1. a directory volume's content from the host ------------------------------------


def test_directory_volume_content_is_not_reachable_from_the_host(dd):
    c = dd.client
    assert os.stat(dd.base).st_mode & 0o7777 == 0o700  # made private at start
    v = create_dir(dd, "exposed", dir_params(dd, onDelete="retain"))
    t = publish_dir(dd, v, "pod1")
    plant(t)
    # Through the pod's bind (nosuid,nodev) the planted things do nothing either.
    rc, out = as_nobody("import os\nos.close(os.open(%r, os.O_WRONLY))" %
                        os.path.join(t, "null"))
    assert rc != 0 and "Permission denied" in out, out
    host = os.path.join(dd.base, "exposed")
    unreachable(host)
    # An administrator's chmod is taken back at the next request on that base.
    os.chmod(dd.base, 0o755)
    c.node("NodeGetVolumeStats", volume_id=v.volume_id, volume_path=t)
    assert os.stat(dd.base).st_mode & 0o7777 == 0o700
    assert "base_dir_private" in dd.logs()
    unreachable(host)
    # Retained after its delete, and archived: still out of reach.
    unpublish_dir(dd, v, t)
    c.controller("DeleteVolume", volume_id=v.volume_id)
    unreachable(host)
    a = create_dir(dd, "archived", dir_params(dd, onDelete="archive"))
    t = publish_dir(dd, a, "pod2")
    plant(t)
    unpublish_dir(dd, a, t)
    c.controller("DeleteVolume", volume_id=a.volume_id)
    unreachable(os.path.join(dd.base, "archived-archived"))
    c.identity("Probe")


# ---- 3. no directory volume inside another ------------------------------------------


def test_no_directory_volume_inside_another(dd):
    c = dd.client
    flat = dir_params(dd, pathPattern="${.PVC.name}")
    nested = dir_params(dd, pathPattern="${.PVC.namespace}/${.PVC.name}")
    outer = create_dir(dd, "outer", dict(flat, **pvc("default", "team-a")))
    odir = os.path.join(dd.base, "team-a")
    t = publish_dir(dd, outer, "pod-outer")
    # A claim of namespace team-a would land inside the claim named team-a: refused.
    code, msg = code_of(create_dir, dd, "inner", dict(nested, **pvc("team-a", "db")))
    assert code == grpc.StatusCode.ALREADY_EXISTS and "inside another" in msg, msg
    # So is a hostile client's literal pattern, also through a directory the tenant made.
    os.mkdir(os.path.join(t, "x"))
    for pattern in ("team-a/x", "team-a/x/y", "team-a/y"):
        code, msg = code_of(create_dir, dd, "lit-" + pattern.replace("/", "-"),
                            dir_params(dd, pathPattern=pattern))
        assert code == grpc.StatusCode.ALREADY_EXISTS, (pattern, msg)
    assert os.listdir(odir) == ["x"] and os.listdir(os.path.join(odir, "x")) == []
    # The other order: a nested volume first, then a claim named like its parent.
    inner = create_dir(dd, "inner-b", dict(nested, **pvc("team-b", "db")))
    code, msg = code_of(create_dir, dd, "outer-b", dict(flat, **pvc("default", "team-b")))
    assert code == grpc.StatusCode.ALREADY_EXISTS, msg
    assert os.listdir(os.path.join(dd.base, "team-b")) == ["db"]
    unpublish_dir(dd, outer, t)
    for v in (outer, inner):
        c.controller("DeleteVolume", volume_id=v.volume_id)
    assert not os.path.exists(os.path.join(dd.base, "team-b", "db"))
    c.identity("Probe")


def test_no_directory_volume_inside_another_as_compromised_rpcd(hd):
    r, base = hd.rpcd, hd.driver.base

    def dir_req(t, vid, name, **kw):
        return r.call(Msg(t, volume_id=vid, base=base, name=name, **kw))

    assert dir_req(T.REQ_DIR_CREATE, VOL, "outer", size_bytes=64 * MiB).type == \
        T.ANS_DIR_CREATE
    os.mkdir(os.path.join(base, "outer", "x"))  # the outer tenant's own directory
    with open(os.path.join(base, "outer", "x", "data"), "w") as f:
        f.write("outer's")
    for name in ("outer/inner", "outer/x/inner"):
        a = dir_req(T.REQ_DIR_CREATE, VOL2, name, size_bytes=64 * MiB)
        assert a.type == T.ANS_ERROR and a.kind == E.EXISTS and "inside another" in a.reason, a
    # Nor is anything in there found, deleted or published as another volume
    # (a delete leaves it alone, as it leaves every directory not that volume's).
    assert dir_req(T.REQ_DIR_DELETE, VOL2, "outer/x").type == T.ANS_DIR_DELETE
    target = os.path.join(hd.driver.root, "pods", "p", "mount")
    os.makedirs(os.path.dirname(target))
    a = dir_req(T.REQ_DIR_PUBLISH, VOL2, "outer/x", path=target)
    assert a.type == T.ANS_ERROR, a
    assert open(os.path.join(base, "outer", "x", "data")).read() == "outer's"
    assert not os.path.exists(target)
    assert dir_req(T.REQ_DIR_DELETE, VOL, "outer").type == T.ANS_DIR_DELETE
    assert r.call(Msg(T.REQ_PING)).type == T.ANS_PING


# ---- 6. a loop device's bind is known by what it is, not by its name ------------------


def loop_nr(d):
    """The number of the one loop device backed by d's images."""
    devs = loops_backed_by(d.data)
    assert len(devs) == 1, devs
    return int(devs[0][len("/dev/loop"):])


def test_a_directory_named_like_a_loop_device_holds_nothing(dd):
    c = dd.client
    # An image volume on /dev/loopN, staged and published.
    cap = mount_cap("ext4")
    vid = c.controller("CreateVolume", name="img", volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    st = os.path.join(dd.root, "staging", "img")
    os.makedirs(st)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=st, volume_capability=cap)
    nr = loop_nr(dd)
    # A directory volume named loopN, published; and a pod's subPath of that name on a tmpfs.
    dv = create_dir(dd, "named", dir_params(dd, pathPattern="loop%d" % nr))
    t = publish_dir(dd, dv, "pod-dir")
    scratch = os.path.join(dd.root, "pods", "pod-sub", "volumes", "kubernetes.io~empty-dir", "s")
    os.makedirs(os.path.join(scratch))
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", scratch], check=True)
    os.mkdir(os.path.join(scratch, "loop%d" % nr))
    sub = os.path.join(dd.root, "pods", "pod-sub", "volume-subpaths", "s", "c", "0")
    os.makedirs(sub)
    subprocess.run(["mount", "--bind", os.path.join(scratch, "loop%d" % nr), sub], check=True)
    try:
        # The image volume's unstage is not held up by either, and its device goes.
        c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
        assert loops_backed_by(dd.data) == []
        c.controller("DeleteVolume", volume_id=vid)
    finally:
        subprocess.run(["umount", sub], check=True)
        subprocess.run(["umount", scratch], check=True)
    unpublish_dir(dd, dv, t)
    c.controller("DeleteVolume", volume_id=dv.volume_id)
    c.identity("Probe")


def test_a_directory_named_like_a_loop_device_as_compromised_rpcd(hd):
    d, r = hd.driver, hd.rpcd
    st = os.path.join(d.root, "staging", "blk")
    tg = os.path.join(d.root, "pods", "p-blk", "dev")
    os.makedirs(st)
    os.makedirs(os.path.dirname(tg))
    assert r.call(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=32 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=st,
                      flags=F_BLOCK)).type == T.ANS_STAGE
    assert r.call(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=tg,
                      flags=F_BLOCK)).type == T.ANS_PUBLISH
    nr = loop_nr(d)
    name = "loop%d" % nr
    dtg = os.path.join(d.root, "pods", "p-dir", "mount")
    os.makedirs(os.path.dirname(dtg))
    assert r.call(Msg(T.REQ_DIR_CREATE, volume_id=VOL2, base=d.base, name=name,
                      size_bytes=32 * MiB)).type == T.ANS_DIR_CREATE
    assert r.call(Msg(T.REQ_DIR_PUBLISH, volume_id=VOL2, base=d.base, name=name,
                      path=dtg)).type == T.ANS_DIR_PUBLISH
    # LIST reports the two binds of the device, by what they are, and not the directory.
    mounts = r.call(Msg(T.REQ_LIST, what=LIST_MOUNTS, after=""))
    assert mounts.type == T.ANS_LIST
    assert sorted(line.split(" ", 3)[1:] for line in mounts.text.splitlines()) == [
        ["b", VOL, tg], ["b", VOL, os.path.join(st, "dev")]], mounts.text
    # With its real bind gone, the device goes; the directory named after it holds nothing.
    assert r.call(Msg(T.REQ_UNPUBLISH, volume_id=VOL, target_path=tg)).type == T.ANS_UNPUBLISH
    a = r.call(Msg(T.REQ_UNSTAGE, volume_id=VOL, staging_path=st, flags=F_BLOCK))
    assert a.type == T.ANS_UNSTAGE, a
    assert loops_backed_by(d.data) == []
    assert r.call(Msg(T.REQ_DIR_UNPUBLISH, volume_id=VOL2, base=d.base, name=name,
                      path=dtg)).type == T.ANS_DIR_UNPUBLISH
    assert r.call(Msg(T.REQ_DELETE, volume_id=VOL)).type == T.ANS_DELETE
    assert r.call(Msg(T.REQ_PING)).type == T.ANS_PING


def staged_block(d, name):
    """A raw block volume staged and published, then unpublished: its device stays bound
    at the staging path. (volume id, staging path)"""
    c, blk = d.client, block_cap()
    vid = c.controller("CreateVolume", name=name, volume_capabilities=[blk],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    st, tg = os.path.join(d.root, "staging", name), os.path.join(d.root, "pods", name, "dev")
    os.makedirs(st)
    os.makedirs(os.path.dirname(tg))
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=st, volume_capability=blk)
    c.node("NodePublishVolume", volume_id=vid, staging_target_path=st, target_path=tg,
           volume_capability=blk)
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=tg)
    return vid, st


def test_a_tenants_node_of_a_loop_device_holds_nothing(driver):
    """A pod root in its pod (CAP_MKNOD) makes a node with another volume's loop device
    number in its emptyDir, and kubelet binds it for a subPath: not a bind the helper
    made, so the other volume's device is still detached when it is unstaged."""
    d, c = driver, driver.client
    vid, st = staged_block(d, "blk")
    rdev = os.stat(loops_backed_by(d.data)[0]).st_rdev
    scratch = os.path.join(d.root, "pods", "pod-mk", "volumes", "kubernetes.io~empty-dir", "s")
    os.makedirs(scratch)
    subprocess.run(["mount", "-t", "tmpfs", "tmpfs", scratch], check=True)
    node = os.path.join(scratch, "disk")
    os.mknod(node, 0o600 | stat.S_IFBLK, rdev)
    sub = os.path.join(d.root, "pods", "pod-mk", "volume-subpaths", "s", "c", "0")
    os.makedirs(sub)
    open(sub + "-f", "w").close()
    subprocess.run(["mount", "--bind", node, sub + "-f"], check=True)
    try:
        c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
        assert loops_backed_by(d.data) == []
    finally:
        subprocess.run(["umount", sub + "-f"], check=True)
        subprocess.run(["umount", scratch], check=True)
    c.controller("DeleteVolume", volume_id=vid)


def test_list_of_mounts_never_waits_for_a_tenants_fuse_daemon(hd):
    d, r = hd.driver, hd.rpcd
    fs, _ = fuse_subpath(d.root, "pod-fuse")
    try:
        fs.stall()
        assert r.call(Msg(T.REQ_LIST, what=LIST_MOUNTS, after=""), timeout=20).type == T.ANS_LIST
        assert r.call(Msg(T.REQ_PING), timeout=10).type == T.ANS_PING
    finally:
        fs.close()


def test_unstage_never_waits_for_a_tenants_fuse_daemon(driver):
    """Another pod's FUSE volume (its daemon the pod's, not answering) with a subPath:
    a block volume's unstage, which looks for binds of its device, is not held."""
    d, c = driver, driver.client
    vid, st = staged_block(d, "blk")
    fs, _ = fuse_subpath(d.root, "pod-fuse")
    fs.stall()
    try:
        c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st, timeout=20)
        assert loops_backed_by(d.data) == []
    finally:
        fs.close()
    c.controller("DeleteVolume", volume_id=vid)


def test_helper_restart_never_waits_for_a_tenants_fuse_daemon(driver):
    """The helper's start (its sweep looks at every bind of a raw staging's device) with
    a stalled FUSE volume on the node: it comes back and serves."""
    d, c = driver, driver.client
    vid, st = staged_block(d, "blk")
    fs, _ = fuse_subpath(d.root, "pod-fuse")
    fs.stall()
    try:
        old = d.children()[chaos.HELPER]
        os.kill(old, signal.SIGKILL)

        def unstaged():
            try:
                c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st, timeout=10)
                return True
            except grpc.RpcError as e:  # the helper restarting: UNAVAILABLE until it is back
                assert e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED), e
                return False
        wait_until(unstaged, "the new helper serves", 90)
        assert d.children()[chaos.HELPER] != old
        assert loops_backed_by(d.data) == []
    finally:
        fs.close()
    c.controller("DeleteVolume", volume_id=vid)


# ---- 2. bytes a pod wrote raw are never mounted as a file system ----------------------


def super_options(path):
    """The superblock options mountinfo shows for the mount at path."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == path:
                return set(fields[fields.index("-") + 3].split(","))
    return None


def test_a_volume_written_raw_is_never_mounted(driver):
    d, c = driver, driver.client
    fs, blk = mount_cap("ext4"), block_cap()
    vid = c.controller("CreateVolume", name="raw", volume_capabilities=[fs],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    st, bst = os.path.join(d.root, "staging", "raw"), os.path.join(d.root, "staging", "raw-b")
    tg = os.path.join(d.root, "pods", "p1", "dev")
    for p in (st, bst, os.path.dirname(tg)):
        os.makedirs(p)
    # The pod gets the volume raw and writes a file system of its own making.
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=bst, volume_capability=blk)
    c.node("NodePublishVolume", volume_id=vid, staging_target_path=bst, target_path=tg,
           volume_capability=blk)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-e", "panic", tg], check=True)
    subprocess.run(["tune2fs", "-E", "mount_opts=nodelalloc", tg], check=True,
                   capture_output=True)
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=tg)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=bst)
    before = mounts_under(d.root)
    code, msg = code_of(c.node, "NodeStageVolume", volume_id=vid, staging_target_path=st,
                        volume_capability=fs)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "raw" in msg, msg
    assert mounts_under(d.root) == before and loops_backed_by(d.data) == []
    # Nor its snapshot restored, nor its clone: they hold the same bytes.
    snap = c.controller("CreateSnapshot", source_volume_id=vid, name="raw-snap").snapshot
    src = c.pb.VolumeContentSource
    kids = [c.controller("CreateVolume", name=n, volume_capabilities=[fs],
                         capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB),
                         volume_content_source=s).volume.volume_id
            for n, s in (("from-snap", src(snapshot=src.SnapshotSource(snapshot_id=snap.snapshot_id))),
                         ("clone", src(volume=src.VolumeSource(volume_id=vid))))]
    for k in kids:
        code, msg = code_of(c.node, "NodeStageVolume", volume_id=k, staging_target_path=st,
                            volume_capability=fs)
        assert code == grpc.StatusCode.FAILED_PRECONDITION, msg
    assert mounts_under(d.root) == before and loops_backed_by(d.data) == []
    # As a block volume it still serves its pod.
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=bst, volume_capability=blk)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=bst)
    for k in kids + [vid]:
        c.controller("DeleteVolume", volume_id=k)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    # A volume never exposed raw is staged as always, and errors are the policy's.
    ok = c.controller("CreateVolume", name="fs", volume_capabilities=[fs],
                      capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    c.node("NodeStageVolume", volume_id=ok, staging_target_path=st, volume_capability=fs)
    assert "errors=remount-ro" in super_options(st)
    c.node("NodeUnstageVolume", volume_id=ok, staging_target_path=st)
    c.controller("DeleteVolume", volume_id=ok)


def test_superblock_error_policy_is_not_the_images(driver):
    """Whatever the image's superblock says about errors, the mount says remount-ro."""
    d, c, fs = driver, driver.client, mount_cap("ext4")
    vid = c.controller("CreateVolume", name="sb", volume_capabilities=[fs],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    st = os.path.join(d.root, "staging", "sb")
    os.makedirs(st)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=st, volume_capability=fs)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
    subprocess.run(["tune2fs", "-e", "panic", os.path.join(d.data, "images", vid + ".img")],
                   check=True, capture_output=True)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=st, volume_capability=fs)
    assert "errors=remount-ro" in super_options(st)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
    c.controller("DeleteVolume", volume_id=vid)


def test_a_volume_written_raw_is_never_mounted_as_compromised_rpcd(hd):
    d, r = hd.driver, hd.rpcd
    st, bst = os.path.join(d.root, "staging", "fs"), os.path.join(d.root, "staging", "blk")
    for p in (st, bst):
        os.makedirs(p)
    assert r.call(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=32 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=bst,
                      flags=F_BLOCK)).type == T.ANS_STAGE
    subprocess.run(["mkfs.ext4", "-q", "-F", "-e", "panic", os.path.join(bst, "dev")],
                   check=True)
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=VOL, staging_path=bst,
                      flags=F_BLOCK)).type == T.ANS_UNSTAGE
    a = r.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=st, fs_type="ext4"))
    assert a.type == T.ANS_ERROR and a.kind == E.PRECONDITION, a
    # Its copies carry the mark: a snapshot, a volume cloned from it, a clone.
    assert r.call(Msg(T.REQ_SNAPSHOT, volume_id=VOL, snapshot_id=SNAP)).type == T.ANS_SNAPSHOT
    for vid, kind, src in ((VOL2, SRC_SNAPSHOT, SNAP), (VOL3, SRC_VOLUME, VOL)):
        assert r.call(Msg(T.REQ_CLONE, volume_id=vid, source_kind=kind, source_id=src,
                          size_bytes=32 * MiB)).type == T.ANS_CLONE
        a = r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=st, fs_type="ext4"))
        assert a.type == T.ANS_ERROR and a.kind == E.PRECONDITION, a
    assert mounts_under(d.root) == [] and loops_backed_by(d.data) == []
    for vid in (VOL, VOL2, VOL3):
        assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE
    assert r.call(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=SNAP)).type == T.ANS_DELETE_SNAPSHOT
    assert r.call(Msg(T.REQ_PING)).type == T.ANS_PING


def test_a_refused_raw_staging_leaves_no_mark(hd):
    """A block STAGE of a volume staged as a file system is refused (its device is in
    use) before anything is recorded: the file system's next staging still mounts."""
    d, r = hd.driver, hd.rpcd
    st, bst = os.path.join(d.root, "staging", "fs"), os.path.join(d.root, "staging", "blk")
    for p in (st, bst):
        os.makedirs(p)
    assert r.call(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=32 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=st,
                      fs_type="ext4")).type == T.ANS_STAGE
    a = r.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=bst, flags=F_BLOCK))
    assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=VOL, staging_path=st)).type == T.ANS_UNSTAGE
    a = r.call(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=st, fs_type="ext4"))
    assert a.type == T.ANS_STAGE, a
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=VOL, staging_path=st)).type == T.ANS_UNSTAGE
    assert r.call(Msg(T.REQ_DELETE, volume_id=VOL)).type == T.ANS_DELETE


def test_a_raw_staging_from_before_the_mark_is_marked_at_start(driver):
    """A helper before the mark kept none: the next one marks what is staged raw now."""
    d, c, blk = driver, driver.client, block_cap()
    vid = c.controller("CreateVolume", name="old-raw", volume_capabilities=[mount_cap("ext4")],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    bst = os.path.join(d.root, "staging", "old-raw")
    os.makedirs(bst)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=bst, volume_capability=blk)
    img = os.path.join(d.data, "images", vid + ".img")
    marks = ("user.sepcsi.raw", "trusted.sepcsi.raw")  # the mark, and an older release's
    assert [os.getxattr(img, m) for m in marks] == [b"1", b"1"]
    for m in marks:
        os.removexattr(img, m)  # as a helper before the mark left it

    def restart_helper():
        helper, settled = d.children()["sepcsi-mounthel"], d.logs().count(" reconciled ")
        os.kill(helper, 9)
        # The helper restarted, and rpcd's reconciliation after it (which holds each volume
        # while it looks) done: only then is the volume free for the next call.
        deadline = time.monotonic() + 30
        while d.logs().count(" reconciled ") == settled:
            assert time.monotonic() < deadline, "the helper was not restarted and reconciled"
            time.sleep(0.02)
    restart_helper()
    assert [os.getxattr(img, m) for m in marks] == [b"1", b"1"]
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=bst)
    # An image an older release marked (trusted.* alone, which a process without
    # CAP_SYS_ADMIN cannot see) gets the mark the helper reads, at every start of the helper:
    # so does one whose mark the images' owner removed (a compromised helper), though the
    # images were handed over whole before (the core's trusted.* mark gives it back).
    os.removexattr(img, marks[0])
    assert os.path.exists(os.path.join(d.data, "handed"))
    restart_helper()
    assert os.getxattr(img, marks[0]) == b"1"
    st = os.path.join(d.root, "staging", "old-raw-fs")
    os.makedirs(st)
    code, msg = code_of(c.node, "NodeStageVolume", volume_id=vid, staging_target_path=st,
                        volume_capability=mount_cap("ext4"))
    assert code == grpc.StatusCode.FAILED_PRECONDITION, msg
    c.controller("DeleteVolume", volume_id=vid)


# ---- 4. no tenant-sized work in the helper's main loop, nor before READY ---------------


def wait_until(cond, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def a_tree(d, name, files=2000):
    """A tree a tenant sized: many empty files (what it costs to empty is the tenant's)."""
    top = os.path.join(d.base, name)
    for i in range(files // 100):
        sub = os.path.join(top, "d%d" % i)
        os.mkdir(sub)
        for j in range(100):
            open(os.path.join(sub, "f%d" % j), "w").close()


@pytest.fixture
def hdp():
    yield from running(HostileDriver(setup=xfs_base, env={"SEPCSI_TEST_PAUSE": "1"},
                                     policy_extra="[volumes]\nfreeze_max_seconds = 1\n"))


def test_leftover_trees_are_emptied_by_workers(hdp):
    d, r = hdp.driver, hdp.rpcd
    trash = os.path.join(d.base, ".sepcsi-trash")
    assert r.call(Msg(T.REQ_DIR_CREATE, volume_id=VOL, base=d.base, name="tree",
                      size_bytes=64 * MiB)).type == T.ANS_DIR_CREATE
    a_tree(d, "tree")
    # A delete whose worker dies with the tree in the trash, not yet emptied.
    d.hold("trashed@" + VOL)
    r.send(Msg(T.REQ_DIR_DELETE, volume_id=VOL, base=d.base, name="tree"))
    worker = d.paused("trashed@" + VOL)
    d.hold("purge@" + VOL)
    os.kill(worker, 9)
    a = r.recv()
    assert a.type == T.ANS_ERROR and a.kind == E.FAILED, a
    d.release("trashed@" + VOL)
    d.paused("purge@" + VOL)  # the main loop gave the tree to a worker
    # Meanwhile the main loop serves, and bounds a freeze, whatever the tree holds.
    assert r.ping(timeout=10)
    a = r.call(Msg(T.REQ_DIR_DELETE, volume_id=VOL, base=d.base, name="tree"), timeout=10)
    assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
    st = os.path.join(d.root, "staging", "frozen")
    os.makedirs(st)
    assert r.call(Msg(T.REQ_CREATE, volume_id=VOL2, size_bytes=32 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=VOL2, staging_path=st,
                      fs_type="ext4")).type == T.ANS_STAGE
    d.hold("copy@" + VOL2)
    try:
        a = r.call(Msg(T.REQ_SNAPSHOT, volume_id=VOL2, snapshot_id=SNAP), timeout=20)
    finally:
        d.release("copy@" + VOL2)
    assert a.type == T.ANS_ERROR and "freeze_max_seconds" in a.reason, a
    assert os.listdir(trash) == [VOL]  # still held
    d.release("purge@" + VOL)
    wait_until(lambda: os.listdir(trash) == [], "the purge did not empty the trash")

    def purged():
        with open(os.path.join(d.data, "audit.log")) as f:
            return any('"op":"PURGE"' in ln and VOL in ln and '"result":"ok"' in ln
                       for ln in f)
    wait_until(purged, "no audit record of the purge")
    # The id is free once the main loop has the worker's answer (BUSY a moment before).
    wait_until(lambda: r.call(Msg(T.REQ_DIR_DELETE, volume_id=VOL, base=d.base,
                                  name="tree")).type == T.ANS_DIR_DELETE,
               "DIR_DELETE refused after the purge")
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=VOL2, staging_path=st)).type == T.ANS_UNSTAGE
    # A copy's temporary file (its extents are the tenant's writes) is removed by a worker too.
    vol4 = "sv-" + "0" * 31 + "4"
    assert r.call(Msg(T.REQ_CREATE, volume_id=vol4, size_bytes=32 * MiB)).type == T.ANS_CREATE
    d.hold("copy@" + vol4)
    r.send(Msg(T.REQ_CLONE, volume_id=VOL3, source_kind=SRC_VOLUME, source_id=vol4,
               size_bytes=32 * MiB))
    worker = d.paused("copy@" + vol4)
    d.hold("purge@" + VOL3)
    os.kill(worker, 9)
    assert r.recv().kind == E.FAILED
    d.release("copy@" + vol4)
    d.paused("purge@" + VOL3)
    assert r.ping(timeout=10)
    assert os.path.exists(os.path.join(d.data, "images", VOL3 + ".img.tmp"))
    d.release("purge@" + VOL3)
    wait_until(lambda: not os.path.exists(os.path.join(d.data, "images", VOL3 + ".img.tmp")),
               "the purge did not remove the temporary file")
    for vid in (VOL2, vol4):
        assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE


def test_leftover_trees_wait_for_no_ready():
    """A helper killed with a tree in the trash: the next one is ready and serves while a
    worker empties it."""
    d = Driver(setup=xfs_base, env={"SEPCSI_TEST_PAUSE": "1"})
    try:
        c = d.client
        v = create_dir(d, "big", dir_params(d))
        a_tree(d, "big")
        vid = v.volume_id
        d.hold("trashed@" + vid)
        d.hold("purge@" + vid)
        ready = d.logs().count("mounthelper: ready")
        import threading
        t = threading.Thread(target=lambda: code_of(c.controller, "DeleteVolume",
                                                    volume_id=vid))
        t.start()
        d.paused("trashed@" + vid)
        os.kill(d.children()["sepcsi-mounthel"], 9)
        wait_until(lambda: d.logs().count("mounthelper: ready") > ready, "no new helper")
        d.release("trashed@" + vid)
        d.paused("purge@" + vid)  # the new helper's worker, after READY
        t.join(60)
        assert c.controller("GetCapacity").available_capacity > 0  # served meanwhile
        d.release("purge@" + vid)
        trash = os.path.join(d.base, ".sepcsi-trash")
        wait_until(lambda: os.listdir(trash) == [], "the purge did not empty the trash")
        c.controller("DeleteVolume", volume_id=vid)
    finally:
        d.stop()
        d.cleanup()


# ---- 5. a quota is the helper's record, not what the tenant's files say ----------------

FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR = 0x801C581F, 0x401C5820


def projid(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return struct.unpack("5I8x", fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28)))[3]
    finally:
        os.close(fd)


def set_projid(path, pid):
    """What a tenant that owns its files may do in the initial user namespace."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        x = list(struct.unpack("5I8x", fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28))))
        x[3] = pid
        fcntl.ioctl(fd, FS_IOC_FSSETXATTR, struct.pack("5I8x", *x))
    finally:
        os.close(fd)


def quota_calls(d, what):
    with open(d.quota_log) as f:
        return [tuple(int(x) for x in ln.split()[1:]) for ln in f if ln.startswith(what + " ")]


def emu_prefix():
    """Project quotas answered by tests/unit/quota_emu.c (this kernel may keep none)."""
    import conftest
    return [os.path.join(conftest.BIN, "quota_emu")]


@pytest.fixture
def qd():
    log = os.path.join("/tmp", "sepcsi-quota-%d.log" % os.getpid())
    d = Driver(setup=xfs_base, prefix=emu_prefix() + [log, "--"])
    d.quota_log = log
    try:
        yield d
    finally:
        d.stop()
        d.cleanup()
        if os.path.exists(log):
            os.unlink(log)


def test_quota_is_the_helpers_record(qd):
    d, c = qd, qd.client
    a = create_dir(d, "a", dir_params(d), 64 * MiB)
    b = create_dir(d, "b", dir_params(d), 64 * MiB)
    assert dict(a.volume_context)["capacity"] == "quota"
    pa, pb = projid(os.path.join(d.base, "a")), projid(os.path.join(d.base, "b"))
    assert pa != pb and (pa, 64 * MiB) in quota_calls(d, "setquota")
    # The tenant of a points its root at b's project (and could move its files anywhere).
    set_projid(os.path.join(d.base, "a"), pb)
    exp = c.controller("ControllerExpandVolume", volume_id=a.volume_id,
                       capacity_range=c.pb.CapacityRange(required_bytes=128 * MiB))
    assert exp.capacity_bytes == 128 * MiB
    assert quota_calls(d, "setquota")[-1] == (pa, 128 * MiB)  # a's own, not b's
    assert int(os.getxattr(os.path.join(d.base, "a"), "trusted.sepcsi.project")) == pa
    c.controller("DeleteVolume", volume_id=a.volume_id)
    assert quota_calls(d, "setquota")[-1] == (pa, 0)
    assert (pb, 0) not in quota_calls(d, "setquota") and \
        (pb, 128 * MiB) not in quota_calls(d, "setquota")
    t = publish_dir(d, b, "pod-b")
    stats = c.node("NodeGetVolumeStats", volume_id=b.volume_id, volume_path=t)
    assert [u.total for u in stats.usage if u.unit == 1] == [64 * MiB]  # b's limit stands
    unpublish_dir(d, b, t)
    c.controller("DeleteVolume", volume_id=b.volume_id)
    assert quota_calls(d, "setquota")[-1] == (pb, 0)


def test_quota_of_a_volume_made_before_the_record(qd):
    """A directory volume made by a helper that kept no record keeps its own quota (its
    root's project, one its id could have been given); a tenant who points such a root
    at another volume's project gains nothing."""
    d, c = qd, qd.client
    a = create_dir(d, "a", dir_params(d), 64 * MiB)
    b = create_dir(d, "b", dir_params(d), 64 * MiB)
    pa, pb = projid(os.path.join(d.base, "a")), projid(os.path.join(d.base, "b"))
    for n in ("a", "b"):  # as an older helper left them
        os.removexattr(os.path.join(d.base, n), "trusted.sepcsi.project")
    c.controller("ControllerExpandVolume", volume_id=a.volume_id,
                 capacity_range=c.pb.CapacityRange(required_bytes=96 * MiB))
    assert quota_calls(d, "setquota")[-1] == (pa, 96 * MiB)
    assert int(os.getxattr(os.path.join(d.base, "a"), "trusted.sepcsi.project")) == pa
    # b's tenant, its record not yet made, points its root at a's project.
    set_projid(os.path.join(d.base, "b"), pa)
    exp = c.controller("ControllerExpandVolume", volume_id=b.volume_id,
                       capacity_range=c.pb.CapacityRange(required_bytes=128 * MiB))
    assert exp.capacity_bytes == 128 * MiB
    assert (pa, 128 * MiB) not in quota_calls(d, "setquota")
    c.controller("DeleteVolume", volume_id=b.volume_id)
    assert (pa, 0) not in quota_calls(d, "setquota") and (pb, 0) not in quota_calls(d, "setquota")
    c.controller("DeleteVolume", volume_id=a.volume_id)
    assert quota_calls(d, "setquota")[-1] == (pa, 0)


def test_quota_is_the_helpers_record_as_compromised_rpcd():
    log = os.path.join("/tmp", "sepcsi-quota-h-%d.log" % os.getpid())
    hd = HostileDriver(setup=xfs_base, prefix=emu_prefix() + [log, "--"])
    try:
        d, r = hd.driver, hd.rpcd
        d.quota_log = log
        for vid, name in ((VOL, "a"), (VOL2, "b")):
            a = r.call(Msg(T.REQ_DIR_CREATE, volume_id=vid, base=d.base, name=name,
                           size_bytes=64 * MiB))
            assert a.type == T.ANS_DIR_CREATE and a.quota == 1, a
        pa, pb = (projid(os.path.join(d.base, n)) for n in ("a", "b"))
        set_projid(os.path.join(d.base, "a"), pb)
        a = r.call(Msg(T.REQ_DIR_EXPAND, volume_id=VOL, base=d.base, name="a",
                       size_bytes=96 * MiB))
        assert a.type == T.ANS_DIR_EXPAND and a.size_bytes == 96 * MiB, a
        assert quota_calls(d, "setquota")[-1] == (pa, 96 * MiB)
        assert r.call(Msg(T.REQ_DIR_DELETE, volume_id=VOL, base=d.base,
                          name="a")).type == T.ANS_DIR_DELETE
        assert quota_calls(d, "setquota")[-1] == (pa, 0)
        a = r.call(Msg(T.REQ_DIR_CREATE, volume_id=VOL2, base=d.base, name="b",
                       size_bytes=64 * MiB))
        assert a.size_bytes == 64 * MiB and a.quota == 1, a
    finally:
        hd.driver.stop()
        hd.driver.cleanup()
        if os.path.exists(log):
            os.unlink(log)
