"""Directory volumes on a base every node shares ([directories] shared_base_dirs), as a
cluster runs them: one driver in `--mode controller` and two in `--mode node`, each with
its own node id, state directory, data directory, socket and kubelet tree, over one base
(a local directory standing for the network file system every node mounts at the same
path). A volume the controller makes is published on both nodes, written on one and read
on the other, expanded, snapshotted and restored, and deleted in each onDelete mode; a
delete while a node still publishes it is refused. The marks are records in the base,
never trusted.* attributes. Then what a tenant or a client can try across nodes: a
volume_context pointing at another volume, inside a volume, through a symlink, a forged
record inside the tenant's own directory, a base this node does not share."""
import ctypes
import os
import struct
import subprocess
import time

import grpc
import pytest

from conftest import Driver, claim_tmp, cleanup_tree, mounts_under, running
from csi_client import mount_cap
from test_dir_helper import btrfs_base

MiB = 1 << 20
MNMW, MNRO, SNW = "MULTI_NODE_MULTI_WRITER", "MULTI_NODE_READER_ONLY", "SINGLE_NODE_WRITER"


class Cluster:
    """The shared base, a node-local base of the controller's, and the three drivers."""

    def __init__(self):
        self.tmp, self.lock = claim_tmp("sepcsi-e2e-")
        self.base = os.path.join(self.tmp, "shared")
        self.local = os.path.join(self.tmp, "local")
        os.makedirs(self.base, mode=0o700)
        self.drivers = []
        self.ctl = self.start("controller", "ctl-node",
                              "shared_base_dirs = %s\nbase_dirs = %s\n" % (self.base, self.local))
        self.a = self.start("node", "node-a", "shared_base_dirs = %s\n" % self.base)
        self.b = self.start("node", "node-b", "shared_base_dirs = %s\n" % self.base)

    def start(self, mode, node_id, dirs):
        d = Driver(extra_args=["--mode", mode], node_id=node_id,
                   policy_extra="[directories]\n" + dirs)
        self.drivers.append(d)
        return d

    def close(self):
        for d in self.drivers:
            d.stop()
            if os.environ.get("SEPCSI_E2E_SHOW_LOGS"):
                print(d.logs())
            d.cleanup()
        cleanup_tree(self.tmp)
        os.close(self.lock)


@pytest.fixture
def cl():
    c = None
    try:
        c = Cluster()
        yield c
    finally:
        if c:
            c.close()


def code_of(fn, *a, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*a, **kw)
    return e.value.code(), e.value.details()


def create(cl, name, mode=MNMW, base=None, size=64 * MiB, **kw):
    c = cl.ctl.client
    kw.setdefault("parameters", {"type": "directory", "baseDir": base or cl.base})
    return c.controller("CreateVolume", name=name, volume_capabilities=[mount_cap("", mode)],
                        capacity_range=c.pb.CapacityRange(required_bytes=size), **kw).volume


def stage(d, v, mode=MNMW, ctx=None):
    staging = os.path.join(d.root, "staging", v.volume_id)
    os.makedirs(staging, exist_ok=True)
    d.client.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
                  volume_capability=mount_cap("", mode),
                  volume_context=dict(v.volume_context) if ctx is None else ctx)
    return staging


def publish(d, v, pod, mode=MNMW, ctx=None, readonly=False):
    staging = stage(d, v, mode, ctx)
    parent = os.path.join(d.root, "pods", pod, "volumes", "kubernetes.io~csi", v.volume_id)
    os.makedirs(parent, exist_ok=True)
    target = os.path.join(parent, "mount")
    d.client.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
                  target_path=target, volume_capability=mount_cap("", mode), readonly=readonly,
                  volume_context=dict(v.volume_context) if ctx is None else ctx)
    return staging, target


def unpublish(d, v, staging, target):
    d.client.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=target)
    d.client.node("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)


_libc = ctypes.CDLL(None, use_errno=True)


def record_name(path):
    """The name of the record of the directory at path: "<inode, hex>-<birth time>"
    (statx(2), which Python does not wrap; "0" where the file system keeps none)."""
    buf = ctypes.create_string_buffer(256)
    if _libc.statx(-100, os.fsencode(path), 0x100, 0x900, buf) != 0:  # AT_SYMLINK_NOFOLLOW
        raise OSError(ctypes.get_errno(), "statx", path)
    mask, = struct.unpack_from("I", buf, 0)
    ino, = struct.unpack_from("Q", buf, 32)
    sec, nsec = struct.unpack_from("qI", buf, 80)
    return "%x-%s" % (ino, "%d.%09d" % (sec, nsec) if mask & 0x800 else "0")


def records(base, path):
    """The base's records of the directory at path: {"mark": id, "kept": id}, as present."""
    out, marks = {}, os.path.join(base, ".sepcsi-marks")
    for kind, suffix in (("mark", ""), ("kept", "-kept")):
        try:
            with open(os.path.join(marks, record_name(path) + suffix)) as f:
                out[kind] = f.read()
        except FileNotFoundError:
            pass
    return out


def test_one_volume_written_on_one_node_read_on_another(cl):
    v = create(cl, "rwx-1")
    ctx = dict(v.volume_context)
    assert not v.accessible_topology, "a shared base's volume is pinned to no node"
    assert ctx["shared"] == "true" and ctx["baseDir"] == cl.base
    assert ctx["capacity"] == "advisory"
    path = os.path.join(cl.base, "rwx-1")
    assert ctx["directory"] == path
    # The mark is the base's record, never an attribute a network file system lacks.
    assert not [x for x in os.listxattr(path) if x.startswith("trusted.")]
    # Named by inode number and birth time: a number used again is no longer marked.
    assert records(cl.base, path) == {"mark": v.volume_id}

    # Controller publications to any node (a cluster with attachRequired: true); a
    # single-node mode is refused for a second node.
    for node in ("node-a", "node-b"):
        cl.ctl.client.controller("ControllerPublishVolume", volume_id=v.volume_id, node_id=node,
                                 volume_capability=mount_cap("", MNMW), readonly=False)
    code, msg = code_of(cl.ctl.client.controller, "ControllerPublishVolume",
                        volume_id=v.volume_id, node_id="node-b",
                        volume_capability=mount_cap("", SNW), readonly=False)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "node-a" in msg, msg
    # A node whose plugin never started on the base does not exist (spec: NOT_FOUND).
    code, msg = code_of(cl.ctl.client.controller, "ControllerPublishVolume",
                        volume_id=v.volume_id, node_id="node-c",
                        volume_capability=mount_cap("", MNMW), readonly=False)
    assert code == grpc.StatusCode.NOT_FOUND, msg
    for node in ("node-a", "node-b"):
        cl.ctl.client.controller("ControllerUnpublishVolume", volume_id=v.volume_id,
                                 node_id=node)
    # Both nodes bind the one directory.
    sa, ta = publish(cl.a, v, "pod-a")
    sb, tb = publish(cl.b, v, "pod-b")
    with open(os.path.join(ta, "from-a"), "w") as f:
        f.write("written on node a\n")
    with open(os.path.join(tb, "from-a")) as f:
        assert f.read() == "written on node a\n"
    with open(os.path.join(tb, "from-b"), "w") as f:
        f.write("b")
    assert sorted(os.listdir(ta)) == ["from-a", "from-b"]
    assert cl.b.client.node("NodeGetVolumeStats", volume_id=v.volume_id,
                            volume_path=tb).usage

    # Expanded by the controller; the size is advisory, no node has anything to do.
    e = cl.ctl.client.controller("ControllerExpandVolume", volume_id=v.volume_id,
                                 capacity_range=cl.ctl.client.pb.CapacityRange(
                                     required_bytes=128 * MiB),
                                 volume_capability=mount_cap("", MNMW))
    assert e.capacity_bytes == 128 * MiB and not e.node_expansion_required

    # A snapshot, restored as a new volume that node b reads.
    s = cl.ctl.client.controller("CreateSnapshot", source_volume_id=v.volume_id,
                                 name="rwx-1-snap").snapshot
    src = cl.ctl.client.pb.VolumeContentSource(
        snapshot=cl.ctl.client.pb.VolumeContentSource.SnapshotSource(snapshot_id=s.snapshot_id))
    r = create(cl, "rwx-1-restored", size=128 * MiB, volume_content_source=src)
    sr, tr = publish(cl.b, r, "pod-r")
    with open(os.path.join(tr, "from-a")) as f:
        assert f.read() == "written on node a\n"

    # Not deleted while any node publishes it, on whichever node the delete runs.
    code, msg = code_of(cl.ctl.client.controller, "DeleteVolume", volume_id=v.volume_id)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "published on node" in msg, msg
    assert sorted(os.listdir(path)) == ["from-a", "from-b"]
    unpublish(cl.a, v, sa, ta)
    code, msg = code_of(cl.ctl.client.controller, "DeleteVolume", volume_id=v.volume_id)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "node node-b" in msg, msg
    unpublish(cl.b, v, sb, tb)
    # Each node forgot the volume it learnt from the context.
    for d in (cl.a, cl.b):
        code, _ = code_of(d.client.node, "NodeGetVolumeStats", volume_id=v.volume_id,
                          volume_path=ta)
        assert code == grpc.StatusCode.NOT_FOUND
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)
    assert not os.path.exists(path)
    unpublish(cl.b, r, sr, tr)
    cl.ctl.client.controller("DeleteVolume", volume_id=r.volume_id)
    cl.ctl.client.controller("DeleteSnapshot", snapshot_id=s.snapshot_id)
    # Nothing left: no directory, no record, no publication, nothing mounted.
    assert sorted(n for n in os.listdir(cl.base) if not n.startswith(".")) == []
    for area in (".sepcsi-marks", ".sepcsi-published", ".sepcsi-snapshots", ".sepcsi-trash",
                 ".sepcsi-work"):
        assert os.listdir(os.path.join(cl.base, area)) == [], area
    for d in cl.drivers:
        assert mounts_under(d.root) == []


@pytest.mark.parametrize("on_delete", ["delete", "retain", "archive"])
def test_on_delete_modes(cl, on_delete):
    v = create(cl, "od-" + on_delete,
               parameters={"type": "directory", "baseDir": cl.base, "onDelete": on_delete})
    path = os.path.join(cl.base, "od-" + on_delete)
    s, t = publish(cl.a, v, "pod")
    with open(os.path.join(t, "data"), "w") as f:
        f.write("kept?")
    unpublish(cl.a, v, s, t)
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)
    names = sorted(n for n in os.listdir(cl.base) if not n.startswith("."))
    kept = {"delete": [], "retain": ["od-retain"], "archive": ["archived-od-archive"]}
    assert names == kept[on_delete]
    for n in names:
        with open(os.path.join(cl.base, n, "data")) as f:
            assert f.read() == "kept?"
        # A kept directory keeps a mark, no longer the volume's: no volume is ever made or
        # found inside it, and no node adopts it again from the old volume_context.
        assert records(cl.base, os.path.join(cl.base, n)) == {"kept": v.volume_id}
        code, msg = code_of(publish, cl.b, v, "pod-again")
        assert code == grpc.StatusCode.NOT_FOUND, msg
    assert not os.path.exists(path) or on_delete == "retain"


def test_node_local_base_refuses_multi_node_modes(cl):
    for mode in (MNMW, MNRO, "MULTI_NODE_SINGLE_WRITER"):
        code, msg = code_of(create, cl, "local-" + mode.lower(), mode=mode, base=cl.local)
        assert code == grpc.StatusCode.INVALID_ARGUMENT and "node-local" in msg, msg
    # Every single-node mode, SINGLE_NODE_MULTI_WRITER too, on the node it was made on.
    v = create(cl, "local-snmw", mode="SINGLE_NODE_MULTI_WRITER", base=cl.local)
    assert [s.segments["topology.sepcsi.io/node"] for s in v.accessible_topology] == \
        ["ctl-node"]
    assert "shared" not in v.volume_context
    # Another node cannot take it over with a context claiming it shared.
    ctx = dict(v.volume_context, shared="true", baseDir=cl.local)
    code, msg = code_of(publish, cl.a, v, "pod", ctx=ctx)
    assert code == grpc.StatusCode.NOT_FOUND, msg
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)


def test_hostile_contexts_across_nodes(cl):
    """A tenant writes what it likes inside its own directory (through node a), and a
    client may send any volume_context to node b: nothing but the volume's own marked
    directory is ever bound, and nothing outside the volumes changes."""
    x, y = create(cl, "tenant-x"), create(cl, "tenant-y")
    xpath, ypath = os.path.join(cl.base, "tenant-x"), os.path.join(cl.base, "tenant-y")
    sx, tx = publish(cl.a, x, "pod-x")
    # The tenant of x: a directory, symlinks out and to y, renames, forged records.
    os.makedirs(os.path.join(tx, "sub", "deeper"))
    os.symlink("/", os.path.join(tx, "root-link"))
    os.symlink(ypath, os.path.join(tx, "y-link"))
    os.rename(os.path.join(tx, "sub", "deeper"), os.path.join(tx, "sub", "moved"))
    os.makedirs(os.path.join(tx, ".sepcsi-marks"))
    sub_ino = os.stat(os.path.join(tx, "sub")).st_ino
    for name, text in (("%x" % sub_ino, "%s:%d" % (y.volume_id, sub_ino)),
                       ("%x" % os.stat(tx).st_ino, "%s:%d" % (y.volume_id, sub_ino))):
        with open(os.path.join(tx, ".sepcsi-marks", name), "w") as f:
            f.write(text)
    os.setxattr(os.path.join(tx, "sub"), "user.sepcsi.owner",
                ("%s:%d" % (y.volume_id, sub_ino)).encode())
    before = snapshot_tree(cl.base)

    def ctx_of(directory, base=None):
        return dict(y.volume_context, directory=directory, baseDir=base or cl.base)

    hostile = {
        "another volume's directory": ctx_of(xpath),
        "a directory inside another volume": ctx_of(os.path.join(xpath, "sub")),
        "a directory the tenant renamed": ctx_of(os.path.join(xpath, "sub", "moved")),
        "a symlink to the root": ctx_of(os.path.join(xpath, "root-link")),
        "a symlink to the volume itself": ctx_of(os.path.join(xpath, "y-link")),
        "the base itself": ctx_of(cl.base + "/"),
        "a parent": ctx_of(cl.base + "/.."),
        "a records area": ctx_of(os.path.join(cl.base, ".sepcsi-marks")),
        "a base this node does not share": ctx_of(os.path.join(cl.local, "tenant-y"),
                                                  base=cl.local),
        "a path outside": ctx_of("/etc/tenant-y", base="/etc"),
    }
    for what, ctx in hostile.items():
        code, msg = code_of(publish, cl.b, y, "pod-evil", ctx=ctx)
        assert code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
                        grpc.StatusCode.FAILED_PRECONDITION), (what, code, msg)
        assert mounts_under(cl.b.root) == [], what
        # Nothing adopted: node b does not know y after a refusal.
        code, _ = code_of(cl.b.client.node, "NodeGetVolumeStats", volume_id=y.volume_id,
                          volume_path=cl.b.root)
        assert code == grpc.StatusCode.NOT_FOUND, what
    # Another base's volume id: x's id with y's (real) context is y's directory, not x's.
    code, msg = code_of(publish, cl.b, x, "pod-evil2", ctx=dict(y.volume_context))
    assert code == grpc.StatusCode.NOT_FOUND, msg
    assert mounts_under(cl.b.root) == []
    assert snapshot_tree(cl.base) == before
    # y itself, from its true context, is still published on node b as asked.
    sy, ty = publish(cl.b, y, "pod-y")
    assert os.listdir(ty) == []
    unpublish(cl.b, y, sy, ty)
    unpublish(cl.a, x, sx, tx)


def snapshot_tree(top):
    """Every path beneath top with its type, inode and size: what a refusal must not change."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[p] = (st.st_mode, st.st_ino, st.st_size)
    return out


def test_a_btrfs_base_is_never_shared():
    """Records name directories by inode number, which every btrfs subvolume's root
    shares: the helper refuses to start with a shared btrfs base."""
    def setup(d):
        btrfs_base(d, quota=None)
        with open(d.policy) as f:
            text = f.read().replace("base_dirs =", "shared_base_dirs =")
        with open(d.policy, "w") as f:
            f.write(text)

    d = Driver(setup=setup, wait=False)
    try:
        deadline = time.monotonic() + 120  # a bound for slow machines, not a figure
        while "a btrfs base cannot be shared" not in d.logs():
            assert time.monotonic() < deadline, "the helper did not refuse the base"
            time.sleep(0.05)
    finally:
        d.stop()
        d.cleanup()


def test_a_node_id_too_long_for_the_records_is_refused_at_start(cl):
    """A publication's record on a shared base is named <volume id>@<node id>@<hash>@1, one
    file name: a node id over 200 bytes could never publish there. The helper says so at
    start instead of failing every NodePublishVolume; one of 200 bytes publishes, in the
    single-node mode whose record's name is the longest."""
    long_id = Driver(extra_args=["--mode", "node"], node_id="n" * 201, wait=False,
                     policy_extra="[directories]\nshared_base_dirs = %s\n" % cl.base)
    cl.drivers.append(long_id)
    deadline = time.monotonic() + 120  # a bound for slow machines, not a figure
    while "a node id is at most 200 bytes on a shared base" not in long_id.logs():
        assert time.monotonic() < deadline, "the helper did not refuse the node id"
        time.sleep(0.05)
    assert not os.path.exists(os.path.join(cl.base, ".sepcsi-nodes", "n" * 201))
    fits = cl.start("node", "n" * 200, "shared_base_dirs = %s\n" % cl.base)
    v = create(cl, "long-node", mode=SNW)
    staging, target = publish(fits, v, "pod-long", mode=SNW)
    pubs = os.listdir(os.path.join(cl.base, ".sepcsi-published"))
    assert [len(p) for p in pubs] == [255] and pubs[0].endswith("@1"), pubs
    unpublish(fits, v, staging, target)
    assert os.listdir(os.path.join(cl.base, ".sepcsi-published")) == []
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)


def test_what_a_killed_worker_left_goes(cl):
    """A worker killed between making a volume's directory in the work area and its record
    leaves the directory and the record's temporary file (<inode>-<birth>.new). The
    controller's helper, at its next start, removes both: the directory because it is an
    id's and empty, the file because its name is that directory's alone."""
    v = create(cl, "first")  # the areas exist from here on
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)
    vid = "sv-" + "a" * 32
    left = os.path.join(cl.base, ".sepcsi-work", vid)
    os.mkdir(left)
    tmp = os.path.join(cl.base, ".sepcsi-marks", record_name(left) + ".new")
    with open(tmp, "w") as f:
        f.write(vid)
    os.kill(cl.ctl.children()["sepcsi-mounthel"], 9)
    deadline = time.monotonic() + 120  # a bound for slow machines, not a figure
    while os.path.exists(left) or os.path.exists(tmp):
        assert time.monotonic() < deadline, "the leftovers were not removed"
        time.sleep(0.05)


def pub_record_name(vid, node, target, one=False):
    """A publication's record in <base>/.sepcsi-published: <id>@<node>@<FNV-1a of the
    target, 16 hex digits>[@1]."""
    h = 14695981039346656037
    for b in os.fsencode(target):
        h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return "%s@%s@%016x%s" % (vid, node, h, "@1" if one else "")


def test_what_a_killed_publication_writer_left_stands_in_no_way(cl):
    """A worker killed while it wrote a publication's record leaves only the record's
    temporary file (.new-<name>), never a record holding no target: one such record
    once made every later publish of that target fail ("the publication's record is
    another's") and kept the volume from being deleted. The next publish of the target
    records it whole, its unpublish removes the record and the leftover, and the delete
    goes on."""
    v = create(cl, "killed-writer")
    parent = os.path.join(cl.a.root, "pods", "pod-k", "volumes", "kubernetes.io~csi",
                          v.volume_id)
    name = pub_record_name(v.volume_id, "node-a", os.path.join(parent, "mount"))
    pubs = os.path.join(cl.base, ".sepcsi-published")
    with open(os.path.join(pubs, ".n-" + name[3:]), "w") as f:
        f.write(parent[:10])  # cut short
    staging, target = publish(cl.a, v, "pod-k")
    with open(os.path.join(pubs, name)) as f:
        assert f.read() == target + "\n"
    code, msg = code_of(cl.ctl.client.controller, "DeleteVolume", volume_id=v.volume_id)
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "node-a" in msg, msg
    unpublish(cl.a, v, staging, target)
    assert os.listdir(pubs) == []
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)
