"""The helper acts only on what it owns: every way past the volumes that a
hostile CSI client, a compromised rpcd or a local user racing in kubelet's tree
could try, driven through the CSI socket and through the helper protocol as a
compromised rpcd would (hostile.py). Each test proves that nothing outside the
volume changed (files, mountinfo, loop devices) and that the driver still serves.

The drivers here use the default policy's patterns, kubelet's own CSI
directories, beneath a test root laid out as kubelet lays out its directory:
    config.yaml, pki/kubelet.crt, pods/<uid>/volumes/kubernetes.io~secret/...
    plugins/kubernetes.io/csi/<driver>/<hash>/globalmount        (staging)
    pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount               (target)
    plugins/kubernetes.io/csi/volumeDevices/{staging,publish}/... (raw block)
(Protocol violations, the seventh way, are in test_violations.py.)
"""
import hashlib
import os
import subprocess
import threading
import time

import grpc
import pytest

import mh_wire
from conftest import Driver, loops_backed_by, running
from csi_client import block_cap, mount_cap
from mh_wire import E, Msg, T

MiB = 1 << 20
GiB = 1 << 30
POD = "0a1b2c3d-0000-4000-8000-00000000000a"
OTHER_POD = "0a1b2c3d-0000-4000-8000-00000000000b"


def code_of(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code()


class Kubelet:
    """kubelet's directory beneath a driver's root, with its own files in it."""

    def __init__(self, root):
        self.root = root
        self.secrets = {
            "config.yaml": b"apiVersion: kubelet.config.k8s.io/v1beta1\n",
            "pki/kubelet.crt": b"-----BEGIN CERTIFICATE-----\n",
            "pki/kubelet.key": b"-----BEGIN PRIVATE KEY-----\n",
            "pods/%s/volumes/kubernetes.io~secret/token/token" % OTHER_POD: b"eyJhbGciOi...",
        }
        for rel, data in self.secrets.items():
            path = self.path(rel)
            os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        os.makedirs(self.path("pods/%s/volumes/kubernetes.io~empty-dir/scratch" % OTHER_POD))

    def path(self, rel):
        return os.path.join(self.root, rel)

    def staging(self, pv, make=True):
        p = self.path("plugins/kubernetes.io/csi/local.sepcsi.io/%s/globalmount" %
                      hashlib.sha256(pv.encode()).hexdigest())
        if make:
            os.makedirs(p, mode=0o750, exist_ok=True)
        return p

    def target(self, pv, pod=POD):
        d = self.path("pods/%s/volumes/kubernetes.io~csi/%s" % (pod, pv))
        os.makedirs(d, mode=0o750, exist_ok=True)
        return os.path.join(d, "mount")

    def block_staging(self, pv):
        p = self.path("plugins/kubernetes.io/csi/volumeDevices/staging/%s" % pv)
        os.makedirs(p, mode=0o750, exist_ok=True)
        return p

    def block_target(self, pv, pod=POD):
        d = self.path("plugins/kubernetes.io/csi/volumeDevices/publish/%s" % pv)
        os.makedirs(d, mode=0o750, exist_ok=True)
        return os.path.join(d, pod)

    def untouched(self):
        """kubelet's own files are all there, byte for byte."""
        for rel, data in self.secrets.items():
            with open(self.path(rel), "rb") as f:
                assert f.read() == data, rel
        assert os.path.isdir(self.path("pods/%s/volumes/kubernetes.io~empty-dir/scratch" %
                                       OTHER_POD))


def host_state(driver):
    """Everything outside the volumes a test could change: files, mounts, loops."""
    files = {}
    for dirpath, dirnames, filenames in os.walk(driver.root):
        for n in filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            files[p] = (st.st_mode, st.st_size, st.st_ino)
        for n in dirnames:
            p = os.path.join(dirpath, n)
            files[p] = (os.lstat(p).st_mode, 0, os.lstat(p).st_ino)
    with open("/proc/self/mountinfo") as f:
        mounts = sorted(" ".join(ln.split()[3:5]) for ln in f)
    return files, mounts, sorted(loops_backed_by(driver.data))


@pytest.fixture
def kdriver():
    """A driver with the default path patterns, and kubelet's tree beneath its root."""
    d = Driver(kubelet=True, env={"SEPCSI_TEST_PAUSE": "1"})
    d.kubelet = Kubelet(d.root)
    yield from running(d)


@pytest.fixture
def khostile():
    """The same with a hostile stand-in as rpcd (hostile.py)."""
    import hostile
    hd = hostile.HostileDriver(kubelet=True, env={"SEPCSI_TEST_PAUSE": "1"})
    hd.driver.kubelet = Kubelet(hd.driver.root)
    yield from running(hd)


def create(c, name, cap, size=64 * MiB):
    return c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                        capacity_range=c.pb.CapacityRange(required_bytes=size)).volume.volume_id


def stage(c, vid, staging, cap):
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=cap)


def publish(c, vid, staging, target, cap, readonly=False):
    c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging, target_path=target,
           volume_capability=cap, readonly=readonly)


def stage_held_at_mount(driver, c, vid, staging, cap, meanwhile):
    """The code of a STAGE (None: it did not fail) held at the mount pause point, its path
    resolved, while meanwhile() runs."""
    driver.hold("mount")
    result = {}
    t = threading.Thread(
        target=lambda: result.update(code=code_of(stage, c, vid, staging, cap)))
    t.start()
    try:
        driver.paused("mount")
        meanwhile()
    finally:
        driver.release("mount")
        t.join(60)
    return result.get("code")


def serves(driver, name="still-serving"):
    """The driver still serves a whole lifecycle in kubelet's layout."""
    c, k = driver.client, driver.kubelet
    cap = mount_cap("ext4")
    vid = create(c, name, cap)
    st, tg = k.staging(name), k.target(name)
    stage(c, vid, st, cap)
    publish(c, vid, st, tg, cap)
    with open(os.path.join(tg, "f"), "w") as f:
        f.write("ok")
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=tg)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
    c.controller("DeleteVolume", volume_id=vid)
    assert not os.path.exists(tg)


def audit_results(driver, op):
    with open(os.path.join(driver.data, "audit.log")) as f:
        return [ln for ln in f if '"op":"%s"' % op in ln]


# ---- 1. unpublish never deletes what the helper did not make --------------------------


def test_unpublish_deletes_nothing_of_kubelets(kdriver):
    d, c, k = kdriver, kdriver.client, kdriver.kubelet
    vid = create(c, "victim-finder", mount_cap("ext4"))
    before = host_state(d)
    # Files and directories anywhere else in kubelet's tree: refused by the patterns.
    for rel in list(k.secrets) + ["pods/%s/volumes/kubernetes.io~empty-dir/scratch" % OTHER_POD,
                                  "pki"]:
        assert code_of(c.node, "NodeUnpublishVolume", volume_id=vid,
                       target_path=k.path(rel)) != grpc.StatusCode.OK, rel
    # Inside a CSI target directory: a file holding data that sepcsi did not make stays,
    # and the call fails; an empty directory it did not make stays too (nothing to do).
    tg = k.target("someone-elses")
    with open(tg, "wb") as f:
        f.write(b"not sepcsi's")
    empty = k.target("empty-dir")
    os.mkdir(empty)
    for_after = host_state(d)
    assert code_of(c.node, "NodeUnpublishVolume", volume_id=vid,
                   target_path=tg) == grpc.StatusCode.INVALID_ARGUMENT
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=empty)
    assert host_state(d) == for_after
    with open(tg, "rb") as f:
        assert f.read() == b"not sepcsi's"
    os.unlink(tg)
    os.rmdir(empty)
    assert host_state(d)[0].keys() >= before[0].keys()
    k.untouched()
    refused = [ln for ln in audit_results(d, "UNPUBLISH") if '"result":"refused"' in ln]
    assert refused and not any('"result":"ok"' in ln and "config.yaml" in ln
                               for ln in audit_results(d, "UNPUBLISH"))
    serves(d)


def test_unpublish_as_compromised_rpcd(khostile):
    """UNPUBLISH of kubelet's files, straight to the helper, with a real volume's id."""
    d, r, k = khostile.driver, khostile.rpcd, khostile.driver.kubelet
    vid = "sv-" + "5" * 32
    assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=64 * MiB)).type == T.ANS_CREATE
    before = host_state(d)
    for rel in list(k.secrets) + ["pki", "pods/%s/volumes" % OTHER_POD]:
        a = r.call(Msg(T.REQ_UNPUBLISH, volume_id=vid, target_path=k.path(rel)))
        assert a.type == T.ANS_ERROR and a.kind == E.REFUSED, (rel, a)
    tg = k.target("planted")
    with open(tg, "wb") as f:
        f.write(b"x")
    a = r.call(Msg(T.REQ_UNPUBLISH, volume_id=vid, target_path=tg))
    assert a.type == T.ANS_ERROR and a.kind == E.REFUSED
    assert os.path.exists(tg)
    os.unlink(tg)
    assert host_state(d)[0].keys() >= before[0].keys()
    k.untouched()
    assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE
    assert r.ping()


# ---- 2. nothing is mounted or bound over what is not an empty CSI directory ------------


def test_stage_and_publish_only_on_empty_csi_directories(kdriver):
    d, c, k = kdriver, kdriver.client, kdriver.kubelet
    cap, bcap = mount_cap("ext4"), block_cap()
    vid = create(c, "over-pki", cap)
    bid = create(c, "over-config", bcap)
    before = host_state(d)
    for where in (k.path("pki"), k.path("pods/%s" % OTHER_POD), k.path("plugins")):
        assert code_of(stage, c, vid, where, cap) != grpc.StatusCode.OK, where
    # A staging directory of the right shape that holds something: refused, untouched.
    full = k.staging("full")
    with open(os.path.join(full, "keep"), "w") as f:
        f.write("keep")
    assert code_of(stage, c, vid, full, cap) == grpc.StatusCode.ALREADY_EXISTS
    # Raw block: never bound over kubelet's config, nor over a target file holding data.
    bst = k.block_staging("over-config")
    stage(c, bid, bst, bcap)
    assert code_of(publish, c, bid, bst, k.path("config.yaml"), bcap) != grpc.StatusCode.OK
    btg = k.block_target("over-config")
    with open(btg, "wb") as f:
        f.write(b"someone's data")
    assert code_of(publish, c, bid, bst, btg, bcap) == grpc.StatusCode.ALREADY_EXISTS
    with open(btg, "rb") as f:
        assert f.read() == b"someone's data"
    os.unlink(btg)
    os.unlink(os.path.join(full, "keep"))
    c.node("NodeUnstageVolume", volume_id=bid, staging_target_path=bst)
    after = host_state(d)
    assert after[1] == before[1] and after[2] == before[2]  # no mount, no loop device left
    k.untouched()
    serves(d)


def test_stage_over_kubelets_files_as_compromised_rpcd(khostile):
    d, r, k = khostile.driver, khostile.rpcd, khostile.driver.kubelet
    vid = "sv-" + "6" * 32
    assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=64 * MiB)).type == T.ANS_CREATE
    before = host_state(d)
    for where in (k.path("pki"), k.path("pods"), k.path("plugins/kubernetes.io/csi")):
        a = r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=where, fs_type="ext4"))
        assert a.type == T.ANS_ERROR and a.kind == E.REFUSED, (where, a)
        a = r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=where, fs_type="ext4",
                       flags=mh_wire.F_BLOCK))
        assert a.type == T.ANS_ERROR, (where, a)
    a = r.call(Msg(T.REQ_PUBLISH, volume_id=vid, staging_path=k.staging("x"),
                   target_path=k.path("config.yaml"), flags=mh_wire.F_BLOCK))
    assert a.type == T.ANS_ERROR
    assert host_state(d)[1:] == before[1:]
    k.untouched()
    assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE


def test_nothing_is_made_beneath_a_volume(kdriver):
    """The default patterns let a caller of the CSI socket stage a tenant's file system at
    volumeDevices/publish/globalmount, where a raw block publication of another volume
    would then lie beneath it. Its tenant, owner of its root, could hide that bind from
    every look (the core cannot enter a directory root made its own and closed), and every
    UNSTAGE on the node would answer BUSY for good. Refused: no walk passes a mount point
    where the policy lets volumes be mounted; both volumes come apart as usual."""
    d, c, k = kdriver, kdriver.client, kdriver.kubelet
    cap, bcap = mount_cap("ext4"), block_cap()
    tenant, victim, other = (create(c, "tenant", cap), create(c, "victim", bcap),
                             create(c, "other", cap))
    st = k.path("plugins/kubernetes.io/csi/volumeDevices/publish/globalmount")
    os.makedirs(st, mode=0o750)
    stage(c, tenant, st, cap)
    os.chown(st, 0, 0)  # the tenant, root in its pod, keeps its volume's root as kubelet's
    os.chmod(st, 0o755)
    os.mkdir(os.path.join(st, POD), 0o755)
    bst, ost = k.block_staging("victim"), k.staging("other")
    stage(c, victim, bst, bcap)
    stage(c, other, ost, cap)
    before = host_state(d)
    for target in (os.path.join(st, "x"), os.path.join(st, POD)):
        assert code_of(publish, c, victim, bst, target, bcap) == grpc.StatusCode.INVALID_ARGUMENT
        assert code_of(publish, c, other, ost, target, cap) == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(os.listdir(st)) == sorted(["lost+found", POD])
    assert os.listdir(os.path.join(st, POD)) == []
    assert host_state(d)[1:] == before[1:]  # nothing mounted, bound or attached
    for vid, path in ((victim, bst), (other, ost), (tenant, st)):
        c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=path)
        c.controller("DeleteVolume", volume_id=vid)
    assert not loops_backed_by(d.data)
    serves(d)


@pytest.fixture
def kdir_driver():
    """kdriver with directory volumes on: the helper mounts by itself, and runs requests for
    different volumes at once."""
    from test_dir_helper import xfs_base
    d = Driver(kubelet=True, setup=xfs_base, env={"SEPCSI_TEST_PAUSE": "1"})
    d.kubelet = Kubelet(d.root)
    yield from running(d)


def test_nothing_is_covered_by_a_racing_mount(kdir_driver):
    """A STAGE at volumeDevices/publish/globalmount finds the directory empty; before its
    mount lands, another volume's raw block publication is made inside it (its walk passed
    a directory that was no mount point yet). The mount would cover that bind for good:
    its UNPUBLISH refused, its UNSTAGE BUSY. The covered directory is looked at again
    after the mount, and the mount undone; both volumes come apart as usual."""
    d, c, k = kdir_driver, kdir_driver.client, kdir_driver.kubelet
    cap, bcap = mount_cap("ext4"), block_cap()
    tenant, victim = create(c, "tenant", cap), create(c, "victim", bcap)
    st = k.path("plugins/kubernetes.io/csi/volumeDevices/publish/globalmount")
    os.makedirs(st, mode=0o750)
    bst, btg = k.block_staging("victim"), os.path.join(st, POD)
    stage(c, victim, bst, bcap)
    # The publication's walk passes st: no mount point yet.
    code = stage_held_at_mount(d, c, tenant, st, cap,
                               lambda: publish(c, victim, bst, btg, bcap))
    assert code == grpc.StatusCode.INTERNAL
    assert "made in the mount point meanwhile" in d.logs()
    with open("/proc/self/mountinfo") as f:
        assert not any((" %s " % st) in ln for ln in f)  # nothing covers the bind
    c.node("NodeUnpublishVolume", volume_id=victim, target_path=btg)
    c.node("NodeUnstageVolume", volume_id=victim, staging_target_path=bst)
    stage(c, tenant, st, cap)  # nothing beneath it now
    c.node("NodeUnstageVolume", volume_id=tenant, staging_target_path=st)
    for vid in (victim, tenant):
        c.controller("DeleteVolume", volume_id=vid)
    assert not loops_backed_by(d.data)


# ---- 3. racing in kubelet's tree ---------------------------------------------------------


def test_directories_others_may_write_are_refused(kdriver):
    """A local user who owns (or may write) a directory on the way could rename it
    while the helper works: the helper acts only where nobody but root can."""
    d, c, k = kdriver, kdriver.client, kdriver.kubelet
    cap = mount_cap("ext4")
    vid = create(c, "user-owned", cap)
    st = k.staging("user-owned")
    parent = os.path.dirname(st)
    os.chown(parent, 1000, 1000)
    assert code_of(stage, c, vid, st, cap) == grpc.StatusCode.INVALID_ARGUMENT
    os.chown(parent, 0, 0)
    os.chmod(os.path.dirname(parent), 0o777)  # the driver's directory, world-writable
    assert code_of(stage, c, vid, st, cap) == grpc.StatusCode.INVALID_ARGUMENT
    os.chmod(os.path.dirname(parent), 0o750)
    stage(c, vid, st, cap)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
    c.controller("DeleteVolume", volume_id=vid)


def test_directories_others_may_write_as_compromised_rpcd(khostile):
    d, r, k = khostile.driver, khostile.rpcd, khostile.driver.kubelet
    vid = "sv-" + "c" * 32
    assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=64 * MiB)).type == T.ANS_CREATE
    st = k.staging("user-owned")
    os.chown(os.path.dirname(st), 1000, 1000)
    before = host_state(d)
    for m in (Msg(T.REQ_STAGE, volume_id=vid, staging_path=st, fs_type="ext4"),
              Msg(T.REQ_STAGE, volume_id=vid, staging_path=st, flags=mh_wire.F_BLOCK),
              Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st)):
        a = r.call(m)
        assert a.type == T.ANS_ERROR and a.kind == E.REFUSED and "root" in a.reason, a
    assert host_state(d)[1:] == before[1:]
    assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE


def test_path_moved_before_the_mount_is_undone(kdriver):
    """The staging directory is moved away (within kubelet's tree: only root can
    now) after the helper resolved it for the mount: the mount that lands
    elsewhere is undone, the call fails, nothing stays mounted, and the volume can
    still be deleted."""
    d, c, k = kdriver, kdriver.client, kdriver.kubelet
    cap = mount_cap("ext4")
    vid = create(c, "moved", cap)
    st = k.staging("moved")
    elsewhere = os.path.join(d.root, "elsewhere")
    before = host_state(d)
    code = stage_held_at_mount(d, c, vid, st, cap, lambda: os.rename(st, elsewhere))
    assert code == grpc.StatusCode.INTERNAL
    assert "path changed" in d.logs()
    with open("/proc/self/mountinfo") as f:
        assert not any(elsewhere in ln or st in ln for ln in f)
    assert loops_backed_by(d.data) == []
    os.rename(elsewhere, st)
    c.controller("DeleteVolume", volume_id=vid)  # not BUSY: nothing holds it
    assert host_state(d)[1:] == before[1:]
    serves(d)


# ---- 4. a loop device is never detached while a bind of it remains anywhere --------------


def test_stale_bind_keeps_its_loop_device(kdriver):
    d, c, k = kdriver, kdriver.client, kdriver.kubelet
    bcap = block_cap()
    vid = create(c, "stale", bcap, 32 * MiB)
    st, tg = k.block_staging("stale"), k.block_target("stale")
    stage(c, vid, st, bcap)
    publish(c, vid, st, tg, bcap)
    with open(tg, "r+b") as f:
        f.write(b"volume A's data")
    # The publication's parent is renamed to a name no path check would accept.
    pub = os.path.dirname(tg)
    weird = os.path.join(os.path.dirname(pub), "stale\nrenamed")
    os.rename(pub, weird)
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=tg)  # nothing there any more
    assert code_of(c.node, "NodeUnstageVolume", volume_id=vid,
                   staging_target_path=st) == grpc.StatusCode.FAILED_PRECONDITION
    devs = loops_backed_by(d.data)
    assert devs, "the loop device was detached under a remaining bind"
    # Another block volume gets another device: the stale bind never shows its data.
    other = create(c, "other", bcap, 32 * MiB)
    ost, otg = k.block_staging("other"), k.block_target("other")
    stage(c, other, ost, bcap)
    publish(c, other, ost, otg, bcap)
    with open(otg, "r+b") as f:
        f.write(b"volume B's data")
    with open(os.path.join(weird, POD), "rb") as f:
        assert f.read(15) == b"volume A's data"
    # The bind goes away (by whoever renamed it); then everything unwinds.
    subprocess.run(["umount", os.path.join(weird, POD)], check=True)
    os.unlink(os.path.join(weird, POD))
    os.rmdir(weird)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
    c.node("NodeUnpublishVolume", volume_id=other, target_path=otg)
    c.node("NodeUnstageVolume", volume_id=other, staging_target_path=ost)
    for v in (vid, other):
        c.controller("DeleteVolume", volume_id=v)
    assert loops_backed_by(d.data) == []


def test_stale_bind_as_compromised_rpcd(khostile):
    """UNSTAGE of a raw block volume whose device is still bound somewhere the
    helper did not put it (any name): BUSY, the device stays attached."""
    d, r, k = khostile.driver, khostile.rpcd, khostile.driver.kubelet
    vid = "sv-" + "d" * 32
    st = k.block_staging("stale-hostile")
    assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=32 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=st,
                      flags=mh_wire.F_BLOCK)).type == T.ANS_STAGE
    stale = k.path("pods/%s/volumes/kubernetes.io~csi/stale\nbind" % OTHER_POD)
    os.makedirs(os.path.dirname(stale), exist_ok=True)
    open(stale, "w").close()
    subprocess.run(["mount", "--bind", os.path.join(st, "dev"), stale], check=True)
    try:
        a = r.call(Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st, flags=mh_wire.F_BLOCK))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY, a
        assert loops_backed_by(d.data), "detached under a remaining bind"
    finally:
        subprocess.run(["umount", stale], check=True)
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st,
                      flags=mh_wire.F_BLOCK)).type == T.ANS_UNSTAGE
    assert loops_backed_by(d.data) == []
    assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE


# ---- 5. nothing the helper does can leave a file system frozen ---------------------------


def write_finishes(path, timeout=20):
    """A write in a child process; False if it hangs (a frozen file system)."""
    p = subprocess.Popen(["sh", "-c", "echo after > '%s' && sync '%s'" % (path, path)])
    try:
        return p.wait(timeout) == 0
    except subprocess.TimeoutExpired:
        return False  # left behind; it finishes once thawed, and the tree is then removed


def gone(pid):
    """Dead: no such process, or a zombie its new parent has not reaped yet."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_helper_killed_mid_snapshot_leaves_nothing_frozen(kdriver):
    d, c, k = kdriver, kdriver.client, kdriver.kubelet
    cap = mount_cap("ext4")
    vid = create(c, "frozen", cap)
    st, tg = k.staging("frozen"), k.target("frozen")
    stage(c, vid, st, cap)
    publish(c, vid, st, tg, cap)
    d.hold("copy@" + vid)
    t = threading.Thread(target=lambda: code_of(
        c.controller, "CreateSnapshot", name="snap-frozen", source_volume_id=vid))
    t.start()
    worker = d.paused("copy@" + vid)  # the source is frozen now
    helper = d.children()["sepcsi-mounthel"]
    reconciled = d.logs().count("reconciled result=")
    os.kill(helper, 9)
    deadline = time.monotonic() + 30
    while not gone(worker):  # killed with the helper (PR_SET_PDEATHSIG), still paused
        assert time.monotonic() < deadline, "the worker outlived its helper"
        time.sleep(0.02)
    t.join(60)
    while d.children().get("sepcsi-mounthel") in (None, helper):
        assert time.monotonic() < deadline, "the helper was not restarted"
        time.sleep(0.02)
    d.release("copy@" + vid)
    assert write_finishes(os.path.join(tg, "after"))
    # Thawed by the next start (which says so), or, where the core froze it, by the dying
    # core itself: it reads the end of its channel before its parent-death signal, and
    # thaws what it froze as it ends (which it may not live to log).
    assert "frozen by a process that died during a copy" in d.logs() or "core_started" in \
        d.logs()
    # rpcd settles the snapshot's intent once the new helper is there, holding the volume's
    # lock meanwhile: the calls below come after that, not racing it (ABORTED).
    deadline = time.monotonic() + 30
    while d.logs().count("reconciled result=") == reconciled:
        assert time.monotonic() < deadline, "rpcd did not reconcile after the helper restart"
        time.sleep(0.02)
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=tg)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=st)
    c.controller("DeleteVolume", volume_id=vid)


def test_violation_mid_snapshot_leaves_nothing_frozen(khostile):
    """A compromised rpcd breaks the protocol while a copy holds the source frozen:
    rpcd is restarted, the helper and its copy carry on, the source is thawed."""
    d, r, k = khostile.driver, khostile.rpcd, khostile.driver.kubelet
    vid, sid = "sv-" + "7" * 32, "ss-" + "7" * 32
    st = k.staging("frozen-hostile")
    assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=64 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=st,
                      fs_type="ext4")).type == T.ANS_STAGE
    helper = khostile.children()["sepcsi-mounthel"]
    d.hold("copy@" + vid)
    r.send(Msg(T.REQ_SNAPSHOT, volume_id=vid, snapshot_id=sid))
    d.paused("copy@" + vid)
    old = r.pid
    r.send_raw(mh_wire.VIOLATIONS["empty"])
    r = khostile.wait_new_rpcd(old)
    d.release("copy@" + vid)
    assert khostile.children()["sepcsi-mounthel"] == helper
    assert write_finishes(os.path.join(st, "after"))
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st)).type == T.ANS_UNSTAGE
    r.call(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=sid))
    assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE


@pytest.fixture
def khostile_fast_freeze():
    """A hostile-rpcd driver whose policy bounds a freeze to 2 s."""
    import hostile
    hd = hostile.HostileDriver(kubelet=True, env={"SEPCSI_TEST_PAUSE": "1"},
                               policy_extra="[volumes]\nfreeze_max_seconds = 2\n")
    hd.driver.kubelet = Kubelet(hd.driver.root)
    yield from running(hd)


def test_freeze_is_bounded_in_time(khostile_fast_freeze):
    """A copy that keeps its source frozen past freeze_max_seconds (held at a pause
    point) is abandoned and the source thawed, whatever the copy was doing."""
    hd = khostile_fast_freeze
    d, r, k = hd.driver, hd.rpcd, hd.driver.kubelet
    vid, sid = "sv-" + "8" * 32, "ss-" + "8" * 32
    st = k.staging("bounded")
    assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=64 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=st,
                      fs_type="ext4")).type == T.ANS_STAGE
    d.hold("copy@" + vid)
    try:
        a = r.call(Msg(T.REQ_SNAPSHOT, volume_id=vid, snapshot_id=sid), timeout=60)
    finally:
        d.release("copy@" + vid)
    assert a.type == T.ANS_ERROR and "freeze_max_seconds" in a.reason, a
    assert write_finishes(os.path.join(st, "after"))
    assert not os.path.exists(os.path.join(d.data, "snapshots", sid + ".img"))
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st)).type == T.ANS_UNSTAGE
    assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE


def staged_ext4(r, k, vids, prefix):
    """Each volume created (64 MiB) and staged as ext4: its staging path by id."""
    st = {}
    for v in vids:
        st[v] = k.staging(prefix + "-" + v)
        assert r.call(Msg(T.REQ_CREATE, volume_id=v, size_bytes=64 * MiB)).type == \
            T.ANS_CREATE
        assert r.call(Msg(T.REQ_STAGE, volume_id=v, staging_path=st[v],
                          fs_type="ext4")).type == T.ANS_STAGE
    return st


def group_msg(pairs, **extra):
    """A GROUP_SNAPSHOT of (volume id, snapshot id) pairs, every other slot empty."""
    fields = {"n": len(pairs)}
    for i, (v, s) in enumerate(pairs):
        fields["volume_id_%d" % i], fields["snapshot_id_%d" % i] = v, s
    fields.update(extra)
    return Msg(T.REQ_GROUP_SNAPSHOT, **fields)


def test_group_snapshot_as_compromised_rpcd(khostile):
    """GROUP_SNAPSHOT from a compromised rpcd: a repeated volume or snapshot, a member
    past n, an id that is a path, a missing volume, a raw block device in use, some of
    the snapshots there already: each refused with no snapshot left and nothing
    frozen. Then a real group: every member cut, and a retry answers the same."""
    d, r, k = khostile.driver, khostile.rpcd, khostile.driver.kubelet
    v1, v2, blk = ("sv-" + c * 32 for c in "abc")
    s1, s2, s3 = ("ss-" + c * 32 for c in "abc")
    st = staged_ext4(r, k, (v1, v2), "group")
    bst = k.block_staging("group-block")
    assert r.call(Msg(T.REQ_CREATE, volume_id=blk, size_bytes=32 * MiB)).type == T.ANS_CREATE
    assert r.call(Msg(T.REQ_STAGE, volume_id=blk, staging_path=bst,
                      flags=mh_wire.F_BLOCK)).type == T.ANS_STAGE
    snaps = os.path.join(d.data, "snapshots")
    refused = [
        (group_msg([(v1, s1), (v1, s2)]), E.REFUSED),
        (group_msg([(v1, s1), (v2, s1)]), E.REFUSED),
        (group_msg([(v1, s1), (v2, s2)], volume_id_2="sv-" + "d" * 32), E.REFUSED),
        (group_msg([(v1, s1), (v2, "ss-../../../etc/passwd")]), E.REFUSED),
        (group_msg([(v1, s1), ("sv-" + "e" * 32, s2)]), E.NOTFOUND),
        (group_msg([(v1, s1), (blk, s2)]), E.PRECONDITION),
    ]
    for m, kind in refused:
        a = r.call(m, timeout=60)
        assert a.type == T.ANS_ERROR and a.kind == kind, (m, a)
        assert os.listdir(snaps) == []
        assert all(write_finishes(os.path.join(st[v], "after")) for v in (v1, v2))
    assert "raw block" in a.reason, a

    a = r.call(group_msg([(v1, s1), (v2, s2)]), timeout=60)
    assert a.type == T.ANS_GROUP_SNAPSHOT, a
    assert a.size_bytes_0 == a.size_bytes_1 == 64 * MiB and a.size_bytes_2 == 0
    assert sorted(os.listdir(snaps)) == [s1 + ".img", s2 + ".img"]
    again = r.call(group_msg([(v1, s1), (v2, s2)]), timeout=60)
    assert again.type == T.ANS_GROUP_SNAPSHOT and again.size_bytes_1 == 64 * MiB, again
    a = r.call(group_msg([(v1, s1), (v2, s3)]), timeout=60)
    assert a.type == T.ANS_ERROR and a.kind == E.EXISTS, a
    assert sorted(os.listdir(snaps)) == [s1 + ".img", s2 + ".img"]
    assert all(write_finishes(os.path.join(st[v], "after2")) for v in (v1, v2))
    for s in (s1, s2):
        r.call(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=s))
    for v in (v1, v2):
        assert r.call(Msg(T.REQ_UNSTAGE, volume_id=v, staging_path=st[v])).type == \
            T.ANS_UNSTAGE
    assert r.call(Msg(T.REQ_UNSTAGE, volume_id=blk, staging_path=bst,
                      flags=mh_wire.F_BLOCK)).type == T.ANS_UNSTAGE
    for v in (v1, v2, blk):
        assert r.call(Msg(T.REQ_DELETE, volume_id=v)).type == T.ANS_DELETE


def test_group_freeze_is_bounded_in_time(khostile_fast_freeze):
    """A group whose copies keep its members frozen past freeze_max_seconds (held at a
    pause point with every member frozen) is abandoned: every member thawed, no
    snapshot of any member left."""
    hd = khostile_fast_freeze
    d, r, k = hd.driver, hd.rpcd, hd.driver.kubelet
    v1, v2 = "sv-" + "6" * 32, "sv-" + "5" * 32
    s1, s2 = "ss-" + "6" * 32, "ss-" + "5" * 32
    st = staged_ext4(r, k, (v1, v2), "bounded")
    d.hold("copy@" + v1)
    try:
        a = r.call(group_msg([(v1, s1), (v2, s2)]), timeout=60)
    finally:
        d.release("copy@" + v1)
    assert a.type == T.ANS_ERROR and "freeze_max_seconds" in a.reason, a
    assert all(write_finishes(os.path.join(st[v], "after")) for v in (v1, v2))
    for s in (s1, s2):  # a temporary file may wait for its purge; no snapshot
        assert not os.path.exists(os.path.join(d.data, "snapshots", s + ".img"))
    for v in (v1, v2):
        assert r.call(Msg(T.REQ_UNSTAGE, volume_id=v, staging_path=st[v])).type == \
            T.ANS_UNSTAGE
        assert r.call(Msg(T.REQ_DELETE, volume_id=v)).type == T.ANS_DELETE


# ---- 6. the data directory cannot be promised away --------------------------------------


def small_data_dir(driver):
    """A 512 MiB xfs (reflink off) mounted as the driver's data directory."""
    img = os.path.join(driver.tmp, "small-data.img")
    with open(img, "wb") as f:
        f.truncate(512 * MiB)
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=0", img], check=True)
    os.makedirs(driver.data, mode=0o700)
    subprocess.run(["mount", "-o", "loop", img, driver.data], check=True)
    os.chmod(driver.data, 0o700)


def test_capacity_is_counted_by_the_helper():
    """Sparse images cannot promise more than the data directory holds (ratio 1.0):
    CreateVolume is RESOURCE_EXHAUSTED when the promises would pass it, GetCapacity
    says what is left, staging every volume made never runs out of space, and a
    deleted volume's bytes come back."""
    d = Driver(kubelet=True, setup=small_data_dir)
    try:
        d.kubelet = Kubelet(d.root)
        c = d.client
        cap = mount_cap("ext4")
        size = 160 * MiB
        free0 = c.controller("GetCapacity", volume_capabilities=[cap]).available_capacity
        assert 400 * MiB < free0 <= 512 * MiB
        made = []
        while True:
            try:
                made.append(create(c, "fill-%d" % len(made), cap, size))
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
                break
            assert len(made) <= 3, "more than 512 MiB promised"
        assert len(made) == free0 // size
        free1 = c.controller("GetCapacity", volume_capabilities=[cap]).available_capacity
        assert free1 < size and free1 <= free0 - len(made) * size + 32 * MiB
        # Every promise holds: all of them staged (mkfs and all) without ENOSPC.
        for i, vid in enumerate(made):
            stage(c, vid, d.kubelet.staging("fill-%d" % i), cap)
        for i, vid in enumerate(made):
            c.node("NodeUnstageVolume", volume_id=vid,
                   staging_target_path=d.kubelet.staging("fill-%d" % i))
        c.controller("DeleteVolume", volume_id=made.pop())
        made.append(create(c, "again", cap, size))
        assert code_of(create, c, "too-much", cap, size) == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert code_of(c.controller, "ControllerExpandVolume", volume_id=made[0],
                       capacity_range=c.pb.CapacityRange(required_bytes=2 * size)) == \
            grpc.StatusCode.RESOURCE_EXHAUSTED
        for vid in made:
            c.controller("DeleteVolume", volume_id=vid)
    finally:
        d.stop()
        d.cleanup()


def test_group_snapshot_is_counted():
    """A GROUP_SNAPSHOT promises every member's size: one that would pass what the data
    directory may promise is NOSPACE at once, with nothing copied; one that fits is
    counted, and its snapshots' deletion gives the bytes back."""
    import hostile
    SIZE = 104 * MiB  # three do not leave room for two more; two do (512 MiB)
    hd = hostile.HostileDriver(setup=small_data_dir)
    try:
        r, d = hd.rpcd, hd.driver
        vids = ["sv-" + c * 32 for c in "abc"]
        for v in vids:
            assert r.call(Msg(T.REQ_CREATE, volume_id=v, size_bytes=SIZE)).type == \
                T.ANS_CREATE
        assert r.call(Msg(T.REQ_CAPACITY)).available_bytes < 2 * SIZE
        a = r.call(group_msg([(vids[0], "ss-" + "a" * 32), (vids[1], "ss-" + "b" * 32)]))
        assert a.type == T.ANS_ERROR and a.kind == E.NOSPACE, a
        assert os.listdir(os.path.join(d.data, "snapshots")) == []
        assert r.call(Msg(T.REQ_DELETE, volume_id=vids[2])).type == T.ANS_DELETE
        free = r.call(Msg(T.REQ_CAPACITY)).available_bytes
        assert free >= 2 * SIZE
        a = r.call(group_msg([(vids[0], "ss-" + "a" * 32), (vids[1], "ss-" + "b" * 32)]))
        assert a.type == T.ANS_GROUP_SNAPSHOT, a
        assert free - r.call(Msg(T.REQ_CAPACITY)).available_bytes == 2 * SIZE
        for c in "ab":
            r.call(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id="ss-" + c * 32))
        assert r.call(Msg(T.REQ_CAPACITY)).available_bytes == free
        for v in vids[:2]:
            assert r.call(Msg(T.REQ_DELETE, volume_id=v)).type == T.ANS_DELETE
    finally:
        hd.stop()
        hd.cleanup()


def test_capacity_as_compromised_rpcd(khostile):
    """The helper counts itself: a compromised rpcd cannot promise past the limit."""
    r, d = khostile.rpcd, khostile.driver
    cap = r.call(Msg(T.REQ_CAPACITY))
    assert cap.type == T.ANS_CAPACITY and 0 < cap.available_bytes <= cap.total_bytes
    big = (cap.total_bytes // 4096 + 1) * 4096  # more than the data dir may promise (ratio 1)
    vid = "sv-" + "9" * 32
    for m in (Msg(T.REQ_CREATE, volume_id=vid, size_bytes=big),
              Msg(T.REQ_CLONE, volume_id=vid, source_kind=mh_wire.SRC_VOLUME,
                  source_id="sv-" + "a" * 32, size_bytes=big)):
        a = r.call(m)
        assert a.type == T.ANS_ERROR and a.kind == E.NOSPACE, a
    assert os.listdir(os.path.join(d.data, "images")) == []
    small = "sv-" + "b" * 32
    assert r.call(Msg(T.REQ_CREATE, volume_id=small, size_bytes=MiB)).type == T.ANS_CREATE
    a = r.call(Msg(T.REQ_RESIZE, volume_id=small, size_bytes=big))
    assert a.type == T.ANS_ERROR and a.kind == E.NOSPACE, a
    assert r.call(Msg(T.REQ_DELETE, volume_id=small)).type == T.ANS_DELETE


def test_largest_volume_fits_the_data_directory():
    """Even where the space would allow it (overcommit 100), no volume is larger than
    the data directory's file system can hold as one file (ext4, 4 KiB blocks: just
    under 16 TiB): OUT_OF_RANGE for CreateVolume and ControllerExpandVolume, and
    GetCapacity's maximum says so."""
    d = Driver(kubelet=True, policy_extra="[volumes]\novercommit_ratio = 100\n")
    try:
        c = d.client
        cap = mount_cap("ext4")
        r = c.controller("GetCapacity", volume_capabilities=[cap])
        largest = r.maximum_volume_size.value
        assert 0 < largest <= r.available_capacity
        fs = os.statvfs(d.data)
        if fs.f_blocks * fs.f_frsize * 100 > 16 << 40:  # room enough: the file size bounds it
            assert largest < 16 << 40
        assert code_of(create, c, "too-large", cap, 16 << 40) == grpc.StatusCode.OUT_OF_RANGE
        vid = create(c, "grows-too-far", cap)
        with pytest.raises(grpc.RpcError) as e:
            c.controller("ControllerExpandVolume", volume_id=vid,
                         capacity_range=c.pb.CapacityRange(required_bytes=16 << 40))
        assert e.value.code() == grpc.StatusCode.OUT_OF_RANGE
        assert "at most" in e.value.details()
        c.controller("DeleteVolume", volume_id=vid)
    finally:
        d.stop()
        d.cleanup()
