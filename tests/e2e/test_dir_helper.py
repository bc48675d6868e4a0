"""Directory volumes at the helper's door: the DIR_* requests sent as rpcd
(or a compromised rpcd) would send them, to the real supervisor and helper,
on a real xfs base mounted with prjquota (a loop-mounted image).

What must hold: a volume is a directory beneath its base, made whole and
marked before it takes its name; its project quota stops writes with EDQUOT
and DIR_EXPAND lifts it; it is bound nosuid,nodev (read-only on request) on
any number of targets; delete, retain and archive do what they say; snapshot
and restore copy owners, modes, times, xattrs, hard links, symlinks and
holes; and no request, however hostile, makes the helper touch anything
outside the volume: not through a symlink planted in the volume, not through
a hard link to a file outside it, not through a name that climbs, not a
directory it did not make.
"""
import errno
import fcntl
import os
import shutil
import struct
import subprocess
import time

import pytest

from conftest import running
from hostile import ChannelClosed, HostileDriver
from mh_wire import DIR_ARCHIVE, DIR_DELETE, DIR_RETAIN, F_MOUNT_GROUP, SRC_SNAPSHOT, SRC_VOLUME
from mh_wire import E, Msg, T

MiB = 1 << 20
VOL = "sv-" + "0" * 31 + "1"
VOL2 = "sv-" + "0" * 31 + "2"
VOL3 = "sv-" + "0" * 31 + "3"
SNAP = "ss-" + "0" * 31 + "1"


def xfs_base(d, quota=True):
    """An xfs mounted at <tmp>/base, named in the policy: with project quotas
    (prjquota) where the kernel has them (CONFIG_XFS_QUOTA); without, where it
    has not (or quota is False), and then the capacity is advisory (d.quota says which)."""
    img = os.path.join(d.tmp, "base.img")
    d.base = os.path.join(d.tmp, "base")
    with open(img, "wb") as f:
        f.truncate(512 * MiB)
    subprocess.run(["mkfs.xfs", "-q", img], check=True)
    os.makedirs(d.base)
    d.quota = quota and subprocess.run(["mount", "-o", "loop,prjquota", img, d.base],
                                       stderr=subprocess.DEVNULL).returncode == 0
    if not d.quota:
        if quota:
            print("this kernel has no xfs project quotas: directory volume capacity is "
                  "advisory")
        subprocess.run(["mount", "-o", "loop", img, d.base], check=True)
    os.chmod(d.base, 0o755)
    with open(d.policy, "a") as f:
        f.write("[directories]\nbase_dirs = %s\n" % d.base)


def btrfs_quota_simple(path):
    """Turn on simple quotas (Linux 6.7) on the btrfs at path: BTRFS_IOC_QUOTA_CTL with
    BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA, which Debian 12's btrfs-progs cannot ask for."""
    quota_ctl = (3 << 30) | (16 << 16) | (0x94 << 8) | 40  # _IOWR(0x94, 40, 16 bytes)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.ioctl(fd, quota_ctl, bytearray(struct.pack("QQ", 4, 0)))
    finally:
        os.close(fd)


def btrfs_base(d, quota="full", size=1024 * MiB):
    """A btrfs mounted at <tmp>/base, named in the policy, with quota groups: full
    accounting (`btrfs quota enable`), simple quotas, or None (off). Volumes are
    subvolumes there."""
    img = os.path.join(d.tmp, "base.img")
    d.base = os.path.join(d.tmp, "base")
    with open(img, "wb") as f:
        f.truncate(size)
    subprocess.run(["mkfs.btrfs", "-q", img], check=True)
    os.makedirs(d.base)
    subprocess.run(["mount", "-o", "loop", img, d.base], check=True)
    if quota == "full":
        subprocess.run(["btrfs", "quota", "enable", d.base], check=True)
    elif quota == "simple":
        btrfs_quota_simple(d.base)
    d.quota, d.btrfs, d.simple = quota is not None, True, quota == "simple"
    os.chmod(d.base, 0o755)
    with open(d.policy, "a") as f:
        f.write("[directories]\nbase_dirs = %s\n" % d.base)


# A shared base's own areas: marks, publications and node plugins, made at the helper's start.
SHARED_AREAS = [".sepcsi-marks", ".sepcsi-nodes", ".sepcsi-published"]


def mark_of(base, path):
    """The mark of the directory at path: its trusted.sepcsi.owner attribute, or on a
    shared base its record's id with the inode ("<id>:<inode>" either way)."""
    if os.path.isdir(os.path.join(base, ".sepcsi-marks")):
        from test_shared_base import records
        return "%s:%d" % (records(base, path)["mark"], os.stat(path).st_ino)
    return os.getxattr(path, "trusted.sepcsi.owner").decode()


def shared_base(d):
    """An xfs without quotas at <tmp>/base, named in the policy as a shared base
    (shared_base_dirs: what every node mounts, here only this one): the same suites, with
    the base's records for marks instead of trusted.* attributes, and advisory sizes."""
    xfs_base(d, quota=False)
    with open(d.policy) as f:
        text = f.read().replace("base_dirs =", "shared_base_dirs =")
    with open(d.policy, "w") as f:
        f.write(text)
    d.shared = True


BASES = {"xfs": xfs_base, "btrfs": btrfs_base,
         "btrfs-simple": lambda d: btrfs_base(d, quota="simple"), "shared": shared_base}


@pytest.fixture(params=list(BASES))
def hd(request):
    """The real supervisor and helper, a hostile stand-in as rpcd, an xfs base or a btrfs
    one (volumes as subvolumes with quota group limits, full or simple)."""
    yield from running(HostileDriver(setup=BASES[request.param]))


def req(t, **kw):
    return Msg(t, **kw)


class Peer:
    def __init__(self, hd):
        self.hd, self.r = hd, hd.rpcd
        self.base = hd.driver.base
        self.quota = int(hd.driver.quota)
        self.btrfs = getattr(hd.driver, "btrfs", False)
        self.root = hd.driver.root

    def ok(self, msg):
        ans = self.r.call(msg)
        assert ans.type == T(msg.type + 1), ans
        return ans

    def err(self, msg, kind=None):
        ans = self.r.call(msg)
        assert ans.type == T.ANS_ERROR, ans
        if kind is not None:
            assert ans.kind == kind, ans
        assert ans.reason
        return ans

    def create(self, vid, name, size=64 * MiB, **kw):
        return self.ok(req(T.REQ_DIR_CREATE, volume_id=vid, base=self.base, name=name,
                           size_bytes=size, **kw))

    def publish(self, vid, name, target, ro=0, **kw):
        return self.ok(req(T.REQ_DIR_PUBLISH, volume_id=vid, base=self.base, name=name,
                           path=target, mode=ro, **kw))

    def unpublish(self, vid, name, target):
        return self.ok(req(T.REQ_DIR_UNPUBLISH, volume_id=vid, base=self.base, name=name,
                           path=target))

    def delete(self, vid, name, mode=DIR_DELETE):
        return self.ok(req(T.REQ_DIR_DELETE, volume_id=vid, base=self.base, name=name,
                           mode=mode))

    def target(self, pod):
        parent = os.path.join(self.root, "pods", pod)
        os.makedirs(parent, exist_ok=True)
        return os.path.join(parent, "mount")


@pytest.fixture
def p(hd):
    return Peer(hd)


def mount_options(path):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == path:
                return set(fields[5].split(","))
    return None


def write(path, n):
    """Write n bytes to path with fsync; the errno that stopped it, or 0."""
    try:
        with open(path, "wb") as f:
            chunk = b"x" * MiB
            for _ in range(n // MiB):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        return e.errno
    return 0


def test_lifecycle_with_quota(p):
    """Create (with a nested name), publish on two targets and write from both,
    read-only publication, quota stops a write with EDQUOT, expansion lifts it,
    stats report against the quota, and every delete mode."""
    ans = p.create(VOL, "ns/claim-a")
    assert (ans.size_bytes, ans.quota) == (64 * MiB, p.quota)
    vdir = os.path.join(p.base, "ns", "claim-a")
    st = os.stat(vdir)
    assert (st.st_uid, oct(st.st_mode & 0o7777)) == (0, "0o755")
    assert mark_of(p.base, vdir) == "%s:%d" % (VOL, st.st_ino)
    assert p.create(VOL, "ns/claim-a").quota == p.quota  # idempotent
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL2, base=p.base, name="ns/claim-a",
              size_bytes=64 * MiB), E.EXISTS)

    t1, t2, t3 = p.target("p1"), p.target("p2"), p.target("p3")
    p.publish(VOL, "ns/claim-a", t1)
    p.publish(VOL, "ns/claim-a", t1)  # idempotent
    p.publish(VOL, "ns/claim-a", t2)
    p.publish(VOL, "ns/claim-a", t3, ro=1)
    assert {"nosuid", "nodev", "rw"} <= mount_options(t1)
    assert {"nosuid", "nodev", "ro"} <= mount_options(t3)
    with open(os.path.join(t1, "from-1"), "w") as f:
        f.write("one")
    with open(os.path.join(t2, "from-2"), "w") as f:
        f.write("two")
    assert sorted(os.listdir(vdir)) == ["from-1", "from-2"]
    assert open(os.path.join(t3, "from-2")).read() == "two"
    with pytest.raises(OSError) as e:
        open(os.path.join(t3, "nope"), "w")
    assert e.value.errno == errno.EROFS

    # With project quotas the write past the capacity fails; without, it is advisory.
    assert write(os.path.join(t1, "big"), 80 * MiB) == (errno.EDQUOT if p.quota else 0)
    stats = p.ok(req(T.REQ_DIR_STATS, volume_id=VOL, base=p.base, name="ns/claim-a", path=t2))
    if p.quota:
        assert stats.bytes_total == 64 * MiB and stats.bytes_used > 60 * MiB
        assert stats.inodes_used >= 3 or p.btrfs  # quota groups count no inodes
    else:  # the base's own figures
        assert stats.bytes_total > 400 * MiB and stats.bytes_used > 80 * MiB
    p.err(req(T.REQ_DIR_STATS, volume_id=VOL, base=p.base, name="ns/claim-a",
              path=p.target("nowhere")), E.NOTFOUND)
    os.unlink(os.path.join(t1, "big"))
    ans = p.ok(req(T.REQ_DIR_EXPAND, volume_id=VOL, base=p.base, name="ns/claim-a",
                   size_bytes=128 * MiB))
    assert (ans.size_bytes, ans.quota) == (128 * MiB, p.quota)
    assert write(os.path.join(t1, "big"), 80 * MiB) == 0
    cap = p.ok(req(T.REQ_DIR_CAPACITY, base=p.base))
    assert cap.quota == p.quota and 0 < cap.available_bytes < cap.total_bytes

    for t in (t1, t2, t3):
        p.unpublish(VOL, "ns/claim-a", t)
        assert not os.path.exists(t)
    p.unpublish(VOL, "ns/claim-a", t1)  # idempotent

    # retain, archive, delete
    p.create(VOL2, "keep-me")
    p.delete(VOL2, "keep-me", DIR_RETAIN)
    assert os.path.isdir(os.path.join(p.base, "keep-me"))
    p.create(VOL3, "ns/old")
    open(os.path.join(p.base, "ns", "old", "data"), "w").write("kept")
    p.delete(VOL3, "ns/old", DIR_ARCHIVE)
    assert not os.path.exists(os.path.join(p.base, "ns", "old"))
    assert open(os.path.join(p.base, "ns", "archived-old", "data")).read() == "kept"
    p.delete(VOL3, "ns/old", DIR_ARCHIVE)  # idempotent: nothing there any more
    p.delete(VOL, "ns/claim-a")
    assert not os.path.exists(vdir)
    assert os.listdir(os.path.join(p.base, ".sepcsi-trash")) == []
    p.delete(VOL, "ns/claim-a")  # idempotent


def test_mount_group(p):
    """VOLUME_MOUNT_GROUP: the volume's directory gets the group, g+rwx and setgid."""
    p.create(VOL, "grp")
    t = p.target("g")
    p.publish(VOL, "grp", t, flags=F_MOUNT_GROUP, gid=4321)
    st = os.stat(os.path.join(p.base, "grp"))
    assert st.st_gid == 4321 and st.st_mode & 0o2070 == 0o2070
    p.unpublish(VOL, "grp", t)


def plant(vdir, outside):
    """A tenant's tree: symlinks to the outside, a hard link to a file outside,
    hard links inside, a sparse file, owners, modes, an xattr, a deep chain."""
    os.symlink(outside, os.path.join(vdir, "to-outside"))
    os.symlink("/etc", os.path.join(vdir, "to-etc"))
    try:
        os.link(os.path.join(outside, "precious"), os.path.join(vdir, "hardlink-out"))
    except OSError as e:  # btrfs: a subvolume is a link domain of its own
        assert e.errno == errno.EXDEV
    os.makedirs(os.path.join(vdir, "d", "e"))
    with open(os.path.join(vdir, "d", "e", "f"), "w") as f:
        f.write("inner")
    os.link(os.path.join(vdir, "d", "e", "f"), os.path.join(vdir, "d", "f2"))
    os.chown(os.path.join(vdir, "d", "e", "f"), 1234, 5678)
    os.chmod(os.path.join(vdir, "d", "e"), 0o700)
    os.chown(os.path.join(vdir, "d", "e"), 1234, 5678)
    os.chmod(os.path.join(vdir, "d"), 0o1777)
    with open(os.path.join(vdir, "sparse"), "wb") as f:
        f.seek(20 * MiB)
        f.write(b"end")
    os.setxattr(os.path.join(vdir, "sparse"), "user.tag", b"v1")
    os.symlink(os.path.join(outside, "precious"), os.path.join(vdir, "d", "e", "link"))
    deep = vdir
    for i in range(80):  # deeper than the removal's descriptor depth
        deep = os.path.join(deep, "x")
        os.mkdir(deep)
    os.mkfifo(os.path.join(vdir, "fifo"))
    os.mkdir(os.path.join(vdir, ".sepcsi-deep-0"))  # the name the removal moves deep ones to


def tree(path):
    """Everything about a tree a copy must keep, by relative name."""
    out = {}
    inodes = {}
    for dirpath, dirs, files in os.walk(path):
        for n in dirs + files:
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            info = [oct(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns]
            if os.path.islink(full):
                info.append(os.readlink(full))
            elif os.path.isfile(full) and not n == "fifo":
                info += [open(full, "rb").read(), sorted(os.listxattr(full))]
                if st.st_nlink > 1:
                    info.append(inodes.setdefault(st.st_ino, rel))
            out[rel] = info
    return out


def test_hostile_tree_snapshot_restore_delete(p):
    """A volume whose content points outside it, by symlinks and a hard link:
    snapshot, restore, clone, archive and delete touch nothing outside."""
    outside = os.path.join(p.base, "outside")  # on the base's file system, as a hard link needs
    os.mkdir(outside)
    with open(os.path.join(outside, "precious"), "w") as f:
        f.write("do not touch")
    os.chmod(outside, 0o755)
    etc_before = sorted(os.listdir("/etc"))
    p.create(VOL, "t/vol", 256 * MiB)
    vdir = os.path.join(p.base, "t", "vol")
    plant(vdir, outside)
    before = tree(vdir)

    snap = p.ok(req(T.REQ_DIR_SNAPSHOT, snapshot_id=SNAP, volume_id=VOL, base=p.base,
                    name="t/vol"))
    # What the volume holds: its files' sizes copied, or its quota group's referenced bytes.
    assert snap.size_bytes >= (16 * 1024 if p.btrfs else 20 * MiB)
    sdir = os.path.join(p.base, ".sepcsi-snapshots", SNAP)
    assert os.stat(os.path.join(p.base, ".sepcsi-snapshots")).st_mode & 0o777 == 0o700
    p.create(VOL2, "t/restored", 256 * MiB, source_kind=SRC_SNAPSHOT, source_id=SNAP)
    p.create(VOL3, "t/cloned", 256 * MiB, source_kind=SRC_VOLUME, source_id=VOL,
             source_name="t/vol")
    for copy in (sdir, os.path.join(p.base, "t", "restored"), os.path.join(p.base, "t", "cloned")):
        after = tree(copy)
        want = dict(before)
        if not p.btrfs:
            # The hard link to the outside file became a file of its own in the copy.
            assert after.pop("hardlink-out")[4] == b"do not touch"
            want.pop("hardlink-out")
            want.pop("fifo")  # FIFOs are not copied; a btrfs snapshot keeps them
        for k in want:
            assert after.get(k) == want[k], (copy, k)
        assert os.stat(os.path.join(copy, "sparse")).st_blocks * 512 < 2 * MiB
        assert os.stat(os.path.join(copy, "d", "f2")).st_ino == \
            os.stat(os.path.join(copy, "d", "e", "f")).st_ino

    p.delete(VOL3, "t/cloned", DIR_ARCHIVE)
    p.delete(VOL2, "t/restored")
    p.delete(VOL, "t/vol")
    p.ok(req(T.REQ_DIR_DELETE_SNAPSHOT, snapshot_id=SNAP, base=p.base))
    assert not os.path.exists(vdir) and not os.path.exists(sdir)
    assert os.path.isdir(os.path.join(p.base, "t", "archived-cloned"))
    st = os.stat(os.path.join(outside, "precious"))
    assert open(os.path.join(outside, "precious")).read() == "do not touch"
    assert st.st_nlink == 1
    assert sorted(os.listdir(outside)) == ["precious"]
    assert sorted(os.listdir("/etc")) == etc_before


@pytest.mark.parametrize("name", [
    "../escape", "a/../b", "/abs", ".sepcsi-work", "ns/.hidden", "archived-x", "ns/archived-y",
    "a/b/c/d/e", "a//b", "a/", "", "sp ace", "caf\u00e9", "a\nb", "a\\b"])
def test_names_that_could_leave_the_base_are_refused(p, name):
    ans = p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base=p.base, name=name,
                    size_bytes=64 * MiB), E.REFUSED)
    assert "name" in ans.reason
    assert sorted(n for n in os.listdir(p.base) if n not in SHARED_AREAS) == []


def test_hostile_requests(p, hd):
    """Bases the policy does not name, directories the helper did not make,
    symlinks on the way, fields a request does not use: refused or left alone."""
    mb = 64 * MiB
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base="/etc", name="x", size_bytes=mb),
          E.REFUSED)
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base=p.base + "/", name="x", size_bytes=mb),
          E.REFUSED)
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base=p.base, name="x", size_bytes=1),
          E.REFUSED)
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base=p.base, name="x", size_bytes=mb,
              path="/tmp"), E.REFUSED)
    p.err(req(T.REQ_DIR_DELETE, volume_id=VOL, base=p.base, name="x", size_bytes=mb),
          E.REFUSED)
    # An administrator's directory in the base: never adopted, published or removed.
    admin = os.path.join(p.base, "admins")
    os.mkdir(admin)
    open(os.path.join(admin, "file"), "w").close()
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base=p.base, name="admins", size_bytes=mb),
          E.EXISTS)
    p.err(req(T.REQ_DIR_PUBLISH, volume_id=VOL, base=p.base, name="admins",
              path=p.target("h1")))
    assert p.delete(VOL, "admins")
    p.err(req(T.REQ_DIR_SNAPSHOT, snapshot_id=SNAP, volume_id=VOL, base=p.base, name="admins"))
    assert os.listdir(admin) == ["file"]
    # Something in the helper's own areas it did not make (no mark, not empty): kept.
    for area in (".sepcsi-work", ".sepcsi-trash"):
        planted = os.path.join(p.base, area, VOL)
        os.makedirs(planted)
        open(os.path.join(planted, "keep"), "w").close()
    p.delete(VOL, "nothing-here")
    for area in (".sepcsi-work", ".sepcsi-trash"):
        assert os.listdir(os.path.join(p.base, area, VOL)) == ["keep"]
        shutil.rmtree(os.path.join(p.base, area, VOL))
    # Another volume's directory, named with the wrong id.
    p.create(VOL2, "theirs")
    p.delete(VOL, "theirs")
    p.err(req(T.REQ_DIR_EXPAND, volume_id=VOL, base=p.base, name="theirs", size_bytes=2 * mb))
    assert os.path.isdir(os.path.join(p.base, "theirs"))
    # A symlink on the way: nothing is made where it points.
    elsewhere = os.path.join(hd.driver.tmp, "elsewhere")
    os.mkdir(elsewhere)
    os.symlink(elsewhere, os.path.join(p.base, "link"))
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base=p.base, name="link/x", size_bytes=mb))
    assert os.listdir(elsewhere) == []
    # A directory above the volume that others may write to.
    os.mkdir(os.path.join(p.base, "open"))
    os.chmod(os.path.join(p.base, "open"), 0o777)
    p.err(req(T.REQ_DIR_CREATE, volume_id=VOL, base=p.base, name="open/x", size_bytes=mb),
          E.REFUSED)
    # A target outside the policy's patterns.
    p.create(VOL3, "mine")
    p.err(req(T.REQ_DIR_PUBLISH, volume_id=VOL3, base=p.base, name="mine",
              path=os.path.join(hd.driver.tmp, "t")), E.REFUSED)
    # Every refusal is in the helper's own audit file, with its reason, base and directory.
    import json
    with open(os.path.join(hd.driver.data, "audit.log")) as f:
        records = [json.loads(line) for line in f]
    last = records[-1]
    assert (last["op"], last["result"], last["volume_id"]) == ("DIR_PUBLISH", "refused", VOL3)
    assert last["base"] == p.base and last["directory"] == "mine" and last["reason"]
    assert all(r["reason"] for r in records if r["result"] != "ok")


def test_tree_too_deep_to_copy(p):
    """A tree deeper than the copy goes (256 directories): DIR_SNAPSHOT is REFUSED with a
    reason that says so (the tree runner's answer, mapped by the helper), nothing is left
    in the work area or as a snapshot, and the volume is still deleted whole."""
    p.create(VOL, "deep")
    deep = os.path.join(p.base, "deep")
    for _ in range(300):
        deep = os.path.join(deep, "x")
    os.makedirs(deep)
    snap = req(T.REQ_DIR_SNAPSHOT, snapshot_id=SNAP, volume_id=VOL, base=p.base, name="deep")
    if p.btrfs:  # a subvolume snapshot walks nothing: any depth is kept
        p.ok(snap)
        assert os.path.isdir(os.path.join(p.base, ".sepcsi-snapshots", SNAP, *["x"] * 300))
        p.ok(req(T.REQ_DIR_DELETE_SNAPSHOT, snapshot_id=SNAP, base=p.base))
    else:
        ans = p.err(snap, E.REFUSED)
        assert "deeper than 256" in ans.reason, ans
    assert os.listdir(os.path.join(p.base, ".sepcsi-work")) == []
    assert os.listdir(os.path.join(p.base, ".sepcsi-snapshots")) == []
    p.delete(VOL, "deep")
    assert not os.path.exists(os.path.join(p.base, "deep"))
    assert os.listdir(os.path.join(p.base, ".sepcsi-trash")) == []


def test_start_sweep_empties_a_crowded_trash(p, hd):
    """After start, the helper's workers remove every leftover in the trash and work areas
    that is an id's (here: 70 empty directories named by ids, what workers killed between
    mkdir and mark leave), not only the first 64 it reads; and nothing else (a shared
    base's too: this helper serves the Controller service; a node plugin's leaves them,
    test_shared_attack.py)."""
    p.create(VOL, "first")  # the areas exist from here on
    p.delete(VOL, "first")
    left = ["sv-%032x" % (0xabc000 + i) for i in range(70)]
    for area in (".sepcsi-trash", ".sepcsi-work"):
        for vid in left:
            os.mkdir(os.path.join(p.base, area, vid))
    os.mkdir(os.path.join(p.base, ".sepcsi-trash", "not-an-id"))
    old = hd.helper_pid()
    os.kill(old, 9)
    deadline = time.monotonic() + 30
    while hd.helper_pid() in (None, old) and time.monotonic() < deadline:
        time.sleep(0.01)
    while True:  # the old channel's end first, then the new helper's answer
        try:
            assert p.r.ping(10)  # it has started
            break
        except ChannelClosed:
            assert time.monotonic() < deadline
    while (os.listdir(os.path.join(p.base, ".sepcsi-work")) or  # purged by workers
           os.listdir(os.path.join(p.base, ".sepcsi-trash")) != ["not-an-id"]):
        assert time.monotonic() < deadline, "leftovers not purged"
        time.sleep(0.02)
    os.rmdir(os.path.join(p.base, ".sepcsi-trash", "not-an-id"))


def test_mount_inside_volume_is_not_reached(p, hd):
    """Something mounted inside the tree on the host: the helper's view holds
    each base's own mount only, so the delete removes the volume's directory
    (the mount point) and what is mounted there is never reached."""
    p.create(VOL, "m")
    vdir = os.path.join(p.base, "m")
    inner = os.path.join(hd.driver.tmp, "inner")
    os.mkdir(inner)
    open(os.path.join(inner, "keep"), "w").close()
    os.mkdir(os.path.join(vdir, "mnt"))
    subprocess.run(["mount", "--bind", inner, os.path.join(vdir, "mnt")], check=True)
    try:
        p.delete(VOL, "m")
        assert os.listdir(inner) == ["keep"]
    finally:
        subprocess.run(["umount", "-l", os.path.join(vdir, "mnt")], check=False)


@pytest.fixture
def khd():
    """As hd, with the default policy's patterns: kubelet's CSI directories only."""
    yield from running(HostileDriver(setup=xfs_base, kubelet=True))


def test_hostile_targets_in_kubelets_tree(khd):
    """A directory volume bound only on a target of kubelet's CSI layout: never on
    kubelet's own files, never through a symlink planted in its tree, never over
    another volume, and never unmounted from a target it is not bound on."""
    p = Peer(khd)
    root = khd.driver.root
    pod = os.path.join(root, "pods", "uid-1", "volumes", "kubernetes.io~csi")
    os.makedirs(pod)
    target = os.path.join(pod, "pv-1", "mount")
    os.makedirs(os.path.dirname(target))
    p.create(VOL, "mine")
    p.create(VOL2, "theirs")
    for bad in (os.path.join(root, "config.yaml"), os.path.join(root, "pki"),
                os.path.join(root, "pods", "uid-1", "volumes", "kubernetes.io~secret", "s"),
                os.path.join(root, "pods", "uid-1", "etc-hosts")):
        p.err(req(T.REQ_DIR_PUBLISH, volume_id=VOL, base=p.base, name="mine", path=bad),
              E.REFUSED)
    # A symlink where a pod's volume directory should be: refused, nothing on /etc.
    os.symlink("/etc", os.path.join(pod, "pv-evil"))
    p.err(req(T.REQ_DIR_PUBLISH, volume_id=VOL, base=p.base, name="mine",
              path=os.path.join(pod, "pv-evil", "mount")), E.REFUSED)
    assert mount_options("/etc") is None
    # Another volume bound on the target: not stacked over, not unmounted.
    p.publish(VOL2, "theirs", target)
    p.err(req(T.REQ_DIR_PUBLISH, volume_id=VOL, base=p.base, name="mine", path=target),
          E.EXISTS)
    p.err(req(T.REQ_DIR_UNPUBLISH, volume_id=VOL, base=p.base, name="mine", path=target),
          E.REFUSED)
    assert mount_options(target) is not None
    p.unpublish(VOL2, "theirs", target)
    assert not os.path.exists(target)
