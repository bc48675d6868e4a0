"""A hostile review's attacks on directory volumes on a btrfs base (subvolumes, quota group
limits, snapshots), kept as regression tests. The tenant acts through the published bind
mount, as root without CAP_SYS_ADMIN (a container's default capability set, via setpriv):
it cannot lift its limit; its own subvolumes, nested deep or wide, read-only, or
snapshots of its volume carrying the helper's mark, never stop a delete nor lead the helper
elsewhere. Its finding that a tenant's own subvolume escapes the limit under full quota
accounting is test_btrfs_volumes.py's test_subvolumes_a_tenant_makes (docs/helper.md,
"Known gaps")."""
import errno
import os
import subprocess

import pytest

from conftest import running
from hostile import HostileDriver
from mh_wire import DIR_ARCHIVE, SRC_VOLUME, E, T
from test_dir_helper import MiB, SNAP, VOL, VOL2, Peer, btrfs_base, req, write

# A container runtime's default capabilities: no CAP_SYS_ADMIN.
POD_CAPS = ("-all,+chown,+dac_override,+fowner,+fsetid,+kill,+setgid,+setuid,+setpcap,"
            "+net_bind_service,+sys_chroot,+mknod,+audit_write,+setfcap")


def tenant(script, cwd):
    """Run a shell script as the pod's root (no CAP_SYS_ADMIN), in cwd (inside the bind)."""
    return subprocess.run(["setpriv", "--bounding-set", POD_CAPS, "--inh-caps", "-all",
                           "/bin/bash", "-ec", script], cwd=cwd, capture_output=True, text=True)


@pytest.fixture(params=["full", "simple"])
def bp(request):
    for hd in running(HostileDriver(setup=lambda d: btrfs_base(d, quota=request.param))):
        yield Peer(hd)


def published(bp, vid, name, pod="p1"):
    bp.create(vid, name)
    t = bp.target(pod)
    bp.publish(vid, name, t)
    return t


def subvols(base):
    out = subprocess.run(["btrfs", "subvolume", "list", base], capture_output=True,
                         text=True, check=True).stdout
    return [line.split(" path ")[1] for line in out.splitlines()]


def test_tenant_has_no_sys_admin(bp):
    t = published(bp, VOL, "v")
    r = tenant("grep CapEff /proc/self/status; btrfs quota disable . 2>&1 || true", t)
    assert "0000000000000000" not in r.stdout
    r2 = tenant("btrfs qgroup limit none . 2>&1 && echo LIMIT-LIFTED || true", t)
    assert "LIMIT-LIFTED" not in r2.stdout, r2.stdout


def chain(depth):
    return "for i in $(seq %d); do btrfs subvolume create s >/dev/null; cd s; done" % depth


def delete_until_gone(bp, tries=3):
    """DIR_DELETE again until it succeeds: each attempt destroys what it can."""
    for _ in range(tries):
        ans = bp.r.call(req(T.REQ_DIR_DELETE, volume_id=VOL, base=bp.base, name="v"))
        if ans.type == T.ANS_DIR_DELETE:
            return
    raise AssertionError(ans)


def test_deep_nesting_is_destroyed(bp):
    """66 subvolumes nested one in another (deeper than any fixed recursion): destroyed,
    deepest first, and the volume with them."""
    t = published(bp, VOL, "v")
    r = tenant(chain(66) + "; echo data > f", t)
    assert r.returncode == 0, r.stderr
    bp.unpublish(VOL, "v", t)
    delete_until_gone(bp, tries=1)
    assert subvols(bp.base) == []


def test_wide_nesting_is_destroyed(bp):
    """600 subvolumes side by side: destroyed, and the volume with them."""
    t = published(bp, VOL, "v")
    r = tenant("for i in $(seq 600); do btrfs subvolume create s$i >/dev/null; done", t)
    assert r.returncode == 0, r.stderr
    bp.unpublish(VOL, "v", t)
    delete_until_gone(bp, tries=1)
    assert subvols(bp.base) == []


def test_readonly_volume_does_not_block_archive(bp):
    """The tenant owns its volume root: it may make its own subvolume read-only. (Attack
    failed: archive renames a read-only subvolume fine.)"""
    t = published(bp, VOL, "v")
    r = tenant("btrfs property set . ro true && btrfs property get . ro", t)
    bp.unpublish(VOL, "v", t)
    ans = bp.r.call(req(T.REQ_DIR_DELETE, volume_id=VOL, base=bp.base, name="v",
                        mode=DIR_ARCHIVE))
    assert ans.type == T.ANS_DIR_DELETE, ans
    assert os.path.isdir(os.path.join(bp.base, "archived-v"))


def test_readonly_nested_is_destroyed(bp):
    """The tenant owns the subvolumes it makes: it makes one read-only with subvolumes
    inside, two deep (destroying what is inside needs its parent writable). The helper
    finds each one's path from the kernel's records, opens it without a symlink, proves it
    by its id, and has the tree runner make it writable: the delete succeeds."""
    t = published(bp, VOL, "v")
    r = tenant("mkdir -p d/e; btrfs subvolume create d/e/a >/dev/null;"
               "btrfs subvolume create d/e/a/b >/dev/null; btrfs subvolume create d/e/a/b/c"
               " >/dev/null; echo data > d/e/a/b/c/f; btrfs property set d/e/a/b ro true;"
               "btrfs property set d/e/a ro true", t)
    assert r.returncode == 0, r.stderr
    bp.unpublish(VOL, "v", t)
    delete_until_gone(bp, tries=1)
    assert subvols(bp.base) == []


def test_readonly_nested_and_delete(bp):
    t = published(bp, VOL, "v")
    r = tenant("btrfs subvolume create a >/dev/null; btrfs subvolume create a/b >/dev/null;"
               "btrfs subvolume snapshot -r . c >/dev/null;"
               "btrfs property set . ro true", t)
    assert r.returncode == 0, r.stderr
    bp.unpublish(VOL, "v", t)
    bp.delete(VOL, "v")
    assert subvols(bp.base) == []


def test_copied_mark_in_nested_snapshot(bp):
    """A snapshot of the volume inside itself carries '<vol>:256', a mark that proves
    itself for any subvolume root (every one is inode 256)."""
    t = published(bp, VOL, "v")
    r = tenant("btrfs subvolume snapshot . inner >/dev/null", t)
    assert r.returncode == 0, r.stderr
    inner = os.path.join(bp.base, "v", "inner")
    mark = os.getxattr(inner, "trusted.sepcsi.owner").decode()
    assert mark == "%s:256" % VOL
    # Can the helper be led to it? Names through a marked directory are refused.
    bp.ok(req(T.REQ_DIR_DELETE, volume_id=VOL, base=bp.base, name="v/inner"))  # "left alone"
    assert os.path.isdir(inner)
    # A clone of the volume, then a snapshot: nested ones become empty directories.
    bp.create(VOL2, "w", source_kind=SRC_VOLUME, source_id=VOL, source_name="v")
    assert os.listdir(os.path.join(bp.base, "w", "inner")) == []
    bp.unpublish(VOL, "v", t)
    bp.delete(VOL2, "w")
    bp.delete(VOL, "v")
    assert subvols(bp.base) == []


def test_readonly_chowned_volume_snapshot_expand_clone(bp):
    """The tenant makes its volume root another uid's and read-only: snapshot, expand,
    clone, delete of the snapshot and the volume still work and stay within it."""
    t = published(bp, VOL, "v")
    r = tenant("echo x > f; chown 1234:1234 .; chmod 0700 .; btrfs property set . ro true", t)
    assert r.returncode == 0, r.stderr
    bp.ok(req(T.REQ_DIR_SNAPSHOT, snapshot_id=SNAP, volume_id=VOL, base=bp.base, name="v"))
    sdir = os.path.join(bp.base, ".sepcsi-snapshots", SNAP)
    ro = subprocess.run(["btrfs", "property", "get", sdir, "ro"], capture_output=True,
                        text=True).stdout
    assert "ro=true" in ro
    bp.ok(req(T.REQ_DIR_EXPAND, volume_id=VOL, base=bp.base, name="v", size_bytes=128 * MiB))
    bp.create(VOL2, "w", source_kind=SRC_VOLUME, source_id=VOL, source_name="v")
    w = os.path.join(bp.base, "w")
    assert "ro=false" in subprocess.run(["btrfs", "property", "get", w, "ro"],
                                        capture_output=True, text=True).stdout
    bp.unpublish(VOL, "v", t)
    bp.ok(req(T.REQ_DIR_DELETE_SNAPSHOT, snapshot_id=SNAP, base=bp.base))
    bp.delete(VOL2, "w")
    bp.delete(VOL, "v")
    assert subvols(bp.base) == []
