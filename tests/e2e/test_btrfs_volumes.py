"""Directory volumes on a btrfs base, through CSI: each volume a subvolume whose size is
its quota group's referenced-bytes limit (a write past it fails with EDQUOT, an expansion
lifts it, the stats are the quota group's), snapshots read-only subvolumes made whole by
the kernel, restores and clones writable snapshots of them, and deletes, archives and
snapshots of a hostile tree (a million files, symlinks out, subvolumes of the tenant's own)
that touch nothing outside the volume. The generic directory-volume tests run on a btrfs
base too (test_dir_volumes.py, test_dir_helper.py)."""
import errno
import os
import subprocess

import pytest

from conftest import Driver, running
from test_dir_helper import btrfs_base, write
from test_dir_volumes import create, dir_cap, params, pod_target

MiB = 1 << 20


@pytest.fixture(params=["full", "simple"])
def bd(request):
    """A btrfs base with full quota accounting, or with simple quotas."""
    yield from running(Driver(setup=lambda d: btrfs_base(d, quota=request.param,
                                                         size=4096 * MiB)))


@pytest.fixture
def noquota():
    yield from running(Driver(setup=lambda d: btrfs_base(d, quota=None)))


def subvol_id(path):
    out = subprocess.run(["btrfs", "inspect-internal", "rootid", path], check=True,
                         capture_output=True, text=True).stdout
    return int(out)


def qgroup(d, path):
    """(referenced, max referenced) of path's subvolume's quota group 0/<id>, as `btrfs
    qgroup show` prints them."""
    out = subprocess.run(["btrfs", "qgroup", "show", "--raw", "-r", d.base], check=True,
                         capture_output=True, text=True).stdout
    want = "0/%d" % subvol_id(path)
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == want:
            return int(f[1]), (0 if f[3] == "none" else int(f[3]))
    raise AssertionError("no quota group %s in %s" % (want, out))


def is_subvol(path, ro):
    out = subprocess.run(["btrfs", "property", "get", "-ts", path, "ro"], check=True,
                         capture_output=True, text=True).stdout.strip()
    return os.stat(path).st_ino == 256 and out == "ro=%s" % ("true" if ro else "false")


def publish(d, vid, ctx, pod):
    staging = os.path.join(d.root, "staging", pod)
    os.makedirs(staging)
    d.client.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
                  volume_capability=dir_cap(), volume_context=ctx)
    t = pod_target(d, pod, "pv-" + pod)
    d.client.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
                  target_path=t, volume_capability=dir_cap(), volume_context=ctx)
    return t


def full_tree(path):
    """Everything a restore must keep: content, owners, modes, times, xattrs with their
    values, and which names are one file."""
    out, first = {}, {}
    for dirpath, dirs, files in os.walk(path):
        for n in sorted(dirs + files):
            full = os.path.join(dirpath, n)
            rel = os.path.relpath(full, path)
            st = os.lstat(full)
            info = [oct(st.st_mode), st.st_uid, st.st_gid, st.st_mtime_ns,
                    first.setdefault(st.st_ino, rel)]
            if os.path.islink(full):
                info.append(os.readlink(full))
            else:
                info.append({k: os.getxattr(full, k, follow_symlinks=False)
                             for k in os.listxattr(full, follow_symlinks=False)})
                if os.path.isfile(full):
                    info.append(open(full, "rb").read())
            out[rel] = info
    return out


def test_capacity_enforced_expanded_and_reported(bd):
    c = bd.client
    v = create(bd, "claim", 32 * MiB)
    ctx = dict(v.volume_context)
    assert ctx["capacity"] == "quota"
    vdir = os.path.join(bd.base, "claim")
    assert is_subvol(vdir, ro=False)
    assert qgroup(bd, vdir)[1] == 32 * MiB
    t = publish(bd, v.volume_id, ctx, "p1")
    assert write(os.path.join(t, "a"), 48 * MiB) == errno.EDQUOT
    subprocess.run(["btrfs", "filesystem", "sync", bd.base], check=True)
    stats = c.node("NodeGetVolumeStats", volume_id=v.volume_id, volume_path=t)
    used, limit = qgroup(bd, vdir)
    b = [u for u in stats.usage if u.unit == c.pb.VolumeUsage.BYTES][0]
    assert (b.total, b.used, b.available) == (limit, used, limit - used)
    assert 24 * MiB < used <= 32 * MiB
    # The volume's capacity is its limit: expansion lifts it, no node step.
    exp = c.controller("ControllerExpandVolume", volume_id=v.volume_id,
                       capacity_range=c.pb.CapacityRange(required_bytes=96 * MiB))
    assert exp.capacity_bytes == 96 * MiB and not exp.node_expansion_required
    assert qgroup(bd, vdir)[1] == 96 * MiB
    assert write(os.path.join(t, "b"), 48 * MiB) == 0
    snap = c.controller("CreateSnapshot", source_volume_id=v.volume_id, name="s").snapshot
    os.unlink(os.path.join(t, "b"))
    subprocess.run(["btrfs", "filesystem", "sync", bd.base], check=True)
    if bd.simple:
        # Simple quotas charge an extent to the volume that wrote it while anything keeps
        # it: what the snapshot keeps still counts against the volume.
        assert qgroup(bd, vdir)[0] > 72 * MiB
        assert write(os.path.join(t, "c"), 32 * MiB) == errno.EDQUOT
    else:
        # Full accounting counts what the volume references: freed for the volume, kept
        # by the snapshot.
        assert qgroup(bd, vdir)[0] < 40 * MiB
        assert write(os.path.join(t, "c"), 56 * MiB) == 0
        assert write(os.path.join(t, "d"), 48 * MiB) == errno.EDQUOT
    # A restore (at least its snapshot's size) is limited on its own, and counts what it
    # shares with its origin.
    r = create(bd, "restored", 96 * MiB, volume_content_source=c.pb.VolumeContentSource(
        snapshot=c.pb.VolumeContentSource.SnapshotSource(snapshot_id=snap.snapshot_id)))
    rdir = os.path.join(bd.base, "restored")
    subprocess.run(["btrfs", "filesystem", "sync", bd.base], check=True)
    assert is_subvol(rdir, ro=False) and qgroup(bd, rdir)[1] == 96 * MiB
    if bd.simple:  # what it shares stays charged to its origin; what it writes, to it
        assert write(os.path.join(rdir, "more"), 80 * MiB) == 0
        assert write(os.path.join(rdir, "more2"), 32 * MiB) == errno.EDQUOT
    else:  # it references what it shares
        assert qgroup(bd, rdir)[0] > 72 * MiB
        assert write(os.path.join(rdir, "more"), 32 * MiB) == errno.EDQUOT
    c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=t)
    c.node("NodeUnstageVolume", volume_id=v.volume_id,
           staging_target_path=os.path.join(bd.root, "staging", "p1"))
    for vid in (r.volume_id, v.volume_id):
        c.controller("DeleteVolume", volume_id=vid)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    assert sorted(n for n in os.listdir(bd.base) if not n.startswith(".")) == []


def test_snapshot_restore_keep_everything(bd):
    c = bd.client
    v = create(bd, "src", 64 * MiB)
    src = os.path.join(bd.base, "src")
    os.makedirs(os.path.join(src, "d", "e"))
    with open(os.path.join(src, "d", "e", "f"), "w") as f:
        f.write("inner")
    os.link(os.path.join(src, "d", "e", "f"), os.path.join(src, "d", "hard"))
    os.symlink("/etc/passwd", os.path.join(src, "d", "to-etc"))
    os.chown(os.path.join(src, "d", "e", "f"), 1000, 1001)
    os.chmod(os.path.join(src, "d", "e"), 0o2750)
    os.chmod(os.path.join(src, "d"), 0o1777)
    os.setxattr(os.path.join(src, "d", "e", "f"), "user.k", b"value")
    os.setxattr(os.path.join(src, "d"), "user.dir", b"on a directory")
    os.mkfifo(os.path.join(src, "fifo"))
    os.chown(src, 1000, 2000)
    os.chmod(src, 0o2770)
    before = full_tree(src)
    snap = c.controller("CreateSnapshot", source_volume_id=v.volume_id, name="s1").snapshot
    sdir = os.path.join(bd.base, ".sepcsi-snapshots", snap.snapshot_id)
    assert snap.ready_to_use and is_subvol(sdir, ro=True)
    with open(os.path.join(src, "later"), "w") as f:
        f.write("after the snapshot")
    r = create(bd, "restored", 64 * MiB, volume_content_source=c.pb.VolumeContentSource(
        snapshot=c.pb.VolumeContentSource.SnapshotSource(snapshot_id=snap.snapshot_id)))
    k = create(bd, "cloned", 64 * MiB, volume_content_source=c.pb.VolumeContentSource(
        volume=c.pb.VolumeContentSource.VolumeSource(volume_id=v.volume_id)))
    rdir, kdir = os.path.join(bd.base, "restored"), os.path.join(bd.base, "cloned")
    assert full_tree(rdir) == before and full_tree(sdir) == before
    assert "later" in os.listdir(kdir)
    for path in (rdir, sdir):
        st = os.stat(path)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1000, 2000, 0o2770)
    # Each is its own volume: marked for its own id, writable, apart from its origin.
    assert os.getxattr(rdir, "trusted.sepcsi.owner").decode() == "%s:256" % r.volume_id
    assert os.getxattr(sdir, "trusted.sepcsi.owner").decode() == "%s:256" % snap.snapshot_id
    with open(os.path.join(rdir, "d", "e", "f"), "w") as f:
        f.write("changed")
    assert open(os.path.join(src, "d", "e", "f")).read() == "inner"
    for vid in (r.volume_id, k.volume_id, v.volume_id):
        c.controller("DeleteVolume", volume_id=vid)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    for area in (".sepcsi-snapshots", ".sepcsi-trash", ".sepcsi-work"):
        assert os.listdir(os.path.join(bd.base, area)) == [], area


def test_hostile_tree_is_snapshotted_archived_and_deleted_whole(bd):
    """A million empty files, symlinks to /etc and out of the volume, and subvolumes the
    tenant made itself (nested, and a snapshot of its own volume, mark and all): snapshot,
    restore, archive and delete take one kernel call each and touch nothing outside."""
    c = bd.client
    outside = os.path.join(bd.base, "outside")
    os.mkdir(outside)
    with open(os.path.join(outside, "precious"), "w") as f:
        f.write("do not touch")
    etc_before = sorted(os.listdir("/etc"))
    v = create(bd, "hostile", 1024 * MiB, parameters=params(bd, onDelete="delete"))
    vdir = os.path.join(bd.base, "hostile")
    for i in range(1000):
        sd = os.path.join(vdir, "m", "%03d" % i)
        os.makedirs(sd)
        for k in range(1000):
            os.close(os.open(os.path.join(sd, str(k)), os.O_CREAT | os.O_WRONLY, 0o644))
    os.symlink("/etc", os.path.join(vdir, "to-etc"))
    os.symlink(outside, os.path.join(vdir, "to-outside"))
    with pytest.raises(OSError) as e:  # a subvolume is a link domain of its own
        os.link(os.path.join(outside, "precious"), os.path.join(vdir, "hard-out"))
    assert e.value.errno == errno.EXDEV
    os.makedirs(os.path.join(vdir, "x", "y"))
    subprocess.run(["btrfs", "-q", "subvolume", "create", os.path.join(vdir, "x", "y", "sub")],
                   check=True)
    subprocess.run(["btrfs", "-q", "subvolume", "create",
                    os.path.join(vdir, "x", "y", "sub", "deeper")], check=True)
    subprocess.run(["btrfs", "-q", "subvolume", "snapshot", vdir, os.path.join(vdir, "self")],
                   check=True)
    snap = c.controller("CreateSnapshot", source_volume_id=v.volume_id, name="hs").snapshot
    r = create(bd, "hostile-copy", 1024 * MiB, parameters=params(bd, onDelete="archive"),
               volume_content_source=c.pb.VolumeContentSource(
                   snapshot=c.pb.VolumeContentSource.SnapshotSource(
                       snapshot_id=snap.snapshot_id)))
    rdir = os.path.join(bd.base, "hostile-copy")
    assert len(os.listdir(os.path.join(rdir, "m", "999"))) == 1000
    c.controller("DeleteVolume", volume_id=v.volume_id)
    c.controller("DeleteVolume", volume_id=r.volume_id)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    assert sorted(n for n in os.listdir(bd.base) if not n.startswith(".")) == \
        ["archived-hostile-copy", "outside"]
    for area in (".sepcsi-snapshots", ".sepcsi-trash", ".sepcsi-work"):
        assert os.listdir(os.path.join(bd.base, area)) == [], area
    out = subprocess.run(["btrfs", "subvolume", "list", "-o", bd.base], check=True,
                         capture_output=True, text=True).stdout
    assert "hostile/" not in out and ".sepcsi" not in out, out
    assert open(os.path.join(outside, "precious")).read() == "do not touch"
    assert sorted(os.listdir(outside)) == ["precious"]
    assert sorted(os.listdir("/etc")) == etc_before


def test_without_quota_groups_sizes_are_advisory(noquota):
    """quota off on the base: volumes are still subvolumes (snapshots and deletes stay
    O(1)); their capacity is advisory, and said so."""
    c = noquota.client
    v = create(noquota, "free", 32 * MiB)
    assert dict(v.volume_context)["capacity"] == "advisory"
    vdir = os.path.join(noquota.base, "free")
    assert is_subvol(vdir, ro=False)
    assert write(os.path.join(vdir, "a"), 48 * MiB) == 0
    snap = c.controller("CreateSnapshot", source_volume_id=v.volume_id, name="f").snapshot
    assert is_subvol(os.path.join(noquota.base, ".sepcsi-snapshots", snap.snapshot_id), ro=True)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    c.controller("DeleteVolume", volume_id=v.volume_id)
    assert sorted(n for n in os.listdir(noquota.base) if not n.startswith(".")) == []


def test_subvolumes_a_tenant_makes(bd):
    """A tenant makes subvolumes of its own inside its volume (no privilege needed) and
    writes there: each has a quota group of its own, outside the volume's limit (simple
    quotas would add it to a group of the volume's, but the tenant can ask the kernel not
    to, and a group the helper made could be joined by another volume's tenant: so the
    limit stays on the volume's own group). The volume's condition says so (docs/helper.md,
    "Known gaps"), and the delete destroys them."""
    c = bd.client
    v = create(bd, "nest", 32 * MiB)
    t = publish(bd, v.volume_id, dict(v.volume_context), "n")
    st = c.node("NodeGetVolumeStats", volume_id=v.volume_id, volume_path=t)
    assert not st.volume_condition.abnormal
    subprocess.run(["btrfs", "-q", "subvolume", "create", os.path.join(t, "own")], check=True)
    subprocess.run(["btrfs", "-q", "subvolume", "snapshot", t, os.path.join(t, "self")],
                   check=True)
    assert write(os.path.join(t, "own", "a"), 48 * MiB) == 0
    st = c.node("NodeGetVolumeStats", volume_id=v.volume_id, volume_path=t)
    assert st.volume_condition.abnormal and "subvolumes" in st.volume_condition.message
    c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=t)
    c.node("NodeUnstageVolume", volume_id=v.volume_id,
           staging_target_path=os.path.join(bd.root, "staging", "n"))
    c.controller("DeleteVolume", volume_id=v.volume_id)
    out = subprocess.run(["btrfs", "subvolume", "list", bd.base], check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "", out
