"""Directory volumes through CSI, as external-provisioner and kubelet drive
them: names from the PVC metadata (the default and a pathPattern), two pods
writing to one volume, expansion, stats, every on-delete mode, snapshot and
restore with the content compared, and the requests the spec says to refuse.
The base is a real xfs (with project quotas where the kernel has them)."""
import errno
import os
import subprocess
import threading

import grpc
import pytest

from conftest import Driver, mounts_under, running
from csi_client import block_cap, mount_cap
from test_dir_helper import BASES, SHARED_AREAS, tree, write

MiB = 1 << 20


@pytest.fixture(params=list(BASES))
def dd(request):
    yield from running(Driver(setup=BASES[request.param],
                              extra_args=["--snapshot-metadata", "on"]))


def dir_cap(mode="SINGLE_NODE_WRITER"):
    return mount_cap("", mode)


def params(d, **extra):
    p = {"type": "directory", "baseDir": d.base}
    p.update(extra)
    return p


def meta(ns, pvc, pv):
    return {"csi.storage.k8s.io/pvc/namespace": ns, "csi.storage.k8s.io/pvc/name": pvc,
            "csi.storage.k8s.io/pv/name": pv}


def create(d, name, size=64 * MiB, **kw):
    c = d.client
    kw.setdefault("parameters", params(d))
    kw.setdefault("volume_capabilities", [dir_cap()])
    return c.controller("CreateVolume", name=name,
                        capacity_range=c.pb.CapacityRange(required_bytes=size), **kw).volume


def code_of(fn, *a, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*a, **kw)
    return e.value.code(), e.value.details()


def pod_target(d, pod, pv):
    parent = os.path.join(d.root, "pods", pod, "volumes", "kubernetes.io~csi", pv)
    os.makedirs(parent, exist_ok=True)
    return os.path.join(parent, "mount")


def test_names_publish_expand_delete(dd):
    c = dd.client
    cap = dir_cap()
    # The default name: <namespace>-<pvc name>-<pv name>, each value sanitised.
    v1 = create(dd, "pvc-1", parameters=dict(params(dd), **meta("team-a", "data", "pvc-1")))
    assert os.path.isdir(os.path.join(dd.base, "team-a-data-pvc-1"))
    assert create(dd, "pvc-1", parameters=dict(params(dd), **meta("team-a", "data", "pvc-1"))) \
        .volume_id == v1.volume_id
    # A pattern: one directory per namespace; a hostile value cannot add a component.
    v2 = create(dd, "pvc-2", parameters=dict(params(dd, pathPattern="${.PVC.namespace}/${.PVC.name}"),
                                             **meta("team-a", "../../etc", "pvc-2")))
    assert os.listdir(os.path.join(dd.base, "team-a")) == ["_.-..-etc"]
    # No metadata (a plain CSI client): the request name.
    v3 = create(dd, "plain.name_3")
    assert os.path.isdir(os.path.join(dd.base, "plain.name_3"))
    # Two claims, one directory: never.
    code, msg = code_of(create, dd, "pvc-4",
                        parameters=dict(params(dd, pathPattern="${.PVC.namespace}/${.PVC.name}"),
                                        **meta("team-a", "../../etc", "pvc-4")))
    assert code == grpc.StatusCode.ALREADY_EXISTS, msg

    # Stage records only; two pods publish and write; one reads only.
    vid = v1.volume_id
    staging = os.path.join(dd.root, "staging", "v1")
    os.makedirs(staging)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=cap,
           volume_context=dict(v1.volume_context))
    t1, t2, t3 = (pod_target(dd, p, "pvc-1") for p in ("pod1", "pod2", "pod3"))
    for t, ro in ((t1, False), (t2, False), (t3, True)):
        for _ in range(2):
            c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
                   target_path=t, volume_capability=cap, readonly=ro,
                   volume_context=dict(v1.volume_context))
    open(os.path.join(t1, "a"), "w").write("from pod1")
    open(os.path.join(t2, "b"), "w").write("from pod2")
    assert sorted(os.listdir(t3)) == ["a", "b"]
    with pytest.raises(OSError) as e:
        open(os.path.join(t3, "c"), "w")
    assert e.value.errno == errno.EROFS
    stats = c.node("NodeGetVolumeStats", volume_id=vid, volume_path=t1)
    assert stats.usage and stats.usage[0].total > 0

    # Expansion: the controller alone (no node step); the quota, where there is one.
    exp = c.controller("ControllerExpandVolume", volume_id=vid,
                       capacity_range=c.pb.CapacityRange(required_bytes=128 * MiB))
    assert exp.capacity_bytes == 128 * MiB and not exp.node_expansion_required
    if dd.quota:
        assert write(os.path.join(t1, "big"), 100 * MiB) == 0
        assert write(os.path.join(t1, "big2"), 100 * MiB) == errno.EDQUOT

    for t in (t1, t2, t3):
        c.node("NodeUnpublishVolume", volume_id=vid, target_path=t)
        assert not os.path.exists(t)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    assert mounts_under(dd.root) == []
    for v in (v1, v2, v3):
        c.controller("DeleteVolume", volume_id=v.volume_id)
        c.controller("DeleteVolume", volume_id=v.volume_id)
    assert sorted(n for n in os.listdir(dd.base) if n not in SHARED_AREAS) == \
        [".sepcsi-trash", ".sepcsi-work", "team-a"]
    assert os.listdir(os.path.join(dd.base, "team-a")) == []


@pytest.mark.parametrize("extra,left", [
    ({"onDelete": "retain"}, ["kept"]),
    ({"onDelete": "archive"}, ["archived-kept"]),
    ({"archiveOnDelete": "true"}, ["archived-kept"]),
    ({"archiveOnDelete": "false"}, []),
    ({"onDelete": "delete"}, []),
])
def test_on_delete(dd, extra, left):
    v = create(dd, "kept", parameters=params(dd, **extra))
    open(os.path.join(dd.base, "kept", "data"), "w").write("x")
    dd.client.controller("DeleteVolume", volume_id=v.volume_id)
    assert sorted(n for n in os.listdir(dd.base) if not n.startswith(".")) == left
    for n in left:
        assert open(os.path.join(dd.base, n, "data")).read() == "x"


def test_snapshot_and_restore(dd):
    c = dd.client
    v = create(dd, "src", 128 * MiB)
    src = os.path.join(dd.base, "src")
    os.makedirs(os.path.join(src, "d", "e"))
    open(os.path.join(src, "d", "e", "f"), "w").write("inner")
    os.link(os.path.join(src, "d", "e", "f"), os.path.join(src, "d", "hard"))
    os.symlink("/etc/passwd", os.path.join(src, "d", "to-etc"))
    os.chown(os.path.join(src, "d", "e", "f"), 1000, 1000)
    with open(os.path.join(src, "sparse"), "wb") as f:
        f.seek(30 * MiB)
        f.write(b"end")
    os.setxattr(os.path.join(src, "sparse"), "user.k", b"v")
    before = tree(src)
    snap = c.controller("CreateSnapshot", source_volume_id=v.volume_id, name="snap-1").snapshot
    assert snap.ready_to_use and snap.size_bytes == 128 * MiB
    # A tree has no blocks: the SnapshotMetadata service says so, and reads nothing.
    req = c.pb.GetMetadataAllocatedRequest(snapshot_id=snap.snapshot_id)
    with pytest.raises(grpc.RpcError) as e:
        c.stream("SnapshotMetadata", "GetMetadataAllocated", req)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "directory volume" in e.value.details()
    open(os.path.join(src, "later"), "w").write("not in the snapshot")
    r = create(dd, "restored", 128 * MiB,
               volume_content_source=c.pb.VolumeContentSource(
                   snapshot=c.pb.VolumeContentSource.SnapshotSource(snapshot_id=snap.snapshot_id)))
    assert tree(os.path.join(dd.base, "restored")) == before
    k = create(dd, "cloned", 128 * MiB,
               volume_content_source=c.pb.VolumeContentSource(
                   volume=c.pb.VolumeContentSource.VolumeSource(volume_id=v.volume_id)))
    assert "later" in os.listdir(os.path.join(dd.base, "cloned"))
    for vid in (r.volume_id, k.volume_id, v.volume_id):
        c.controller("DeleteVolume", volume_id=vid)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    assert os.listdir(os.path.join(dd.base, ".sepcsi-snapshots")) == []
    assert open("/etc/passwd").read()  # the symlink's target, untouched


def test_refused(dd):
    c = dd.client
    bad = [
        (dict(volume_capabilities=[block_cap()]), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(volume_capabilities=[mount_cap("xfs")]), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(parameters={"type": "directory"}), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(parameters=params(dd, onDelete="archive", archiveOnDelete="false")),
         grpc.StatusCode.INVALID_ARGUMENT),
        (dict(parameters=params(dd, onDelete="shred")), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(parameters=params(dd, pathPattern="${.PVC.labels.x}")),
         grpc.StatusCode.INVALID_ARGUMENT),
        (dict(parameters=params(dd, pathPattern="${.PVC.name}")),
         grpc.StatusCode.INVALID_ARGUMENT),  # no --extra-create-metadata
        (dict(parameters=params(dd, pathPattern="../x")), grpc.StatusCode.INVALID_ARGUMENT),
        (dict(parameters={"type": "directory", "baseDir": "/etc"}),
         grpc.StatusCode.INVALID_ARGUMENT),
        (dict(parameters={"baseDir": dd.base}), grpc.StatusCode.INVALID_ARGUMENT),
    ]
    if not getattr(dd, "shared", False):  # a shared base serves multi-node modes
        bad.append((dict(volume_capabilities=[dir_cap("MULTI_NODE_MULTI_WRITER")]),
                    grpc.StatusCode.INVALID_ARGUMENT))
    for kw, want in bad:
        code, msg = code_of(create, dd, "bad", **kw)
        assert code == want, (kw, code, msg)
        assert msg
    assert sorted(n for n in os.listdir(dd.base) if not n.startswith(".")) == []
    cap = c.controller("GetCapacity", parameters=params(dd), volume_capabilities=[dir_cap()])
    assert cap.available_capacity > 0


def test_tree_runner_confined(dd):
    """With directory volumes the helper walks no pod's tree itself: the tree runner
    (sepcsi-tree-runner, the helper's child) empties and copies trees, with exactly four
    file capabilities (kept across its exec as ambient ones, no CAP_SYS_ADMIN), no_new_privs,
    a seccomp filter of its own, and a view without kubelet's directory, the base, the data
    directory or /proc, so that it reaches a volume only through the descriptors the helper
    passes, and no image and no other process at all. The kernel's report
    matches --print-privileges; and the walk it does still works (a snapshot and a delete)."""
    from test_privileges import helper_children, printed_privileges, status
    vid = create(dd, "tree-runner").volume_id
    printed = printed_privileges(dd)
    helper = dd.children()["sepcsi-mounthel"]
    kids = {}
    for pid in helper_children(helper):
        with open("/proc/%d/cmdline" % pid) as f:
            argv = f.read().split("\0")
        kind = {"sepcsi-runner": "tools", "sepcsi-tree-runner": "tree"}.get(
            os.path.basename(argv[0]))
        if kind:
            kids[kind] = pid
    assert set(kids) == {"tree", "tools"}, kids
    p, s = printed["sepcsi-tree-runner"], status(kids["tree"])
    file_caps = (1 << 0) | (1 << 1) | (1 << 3) | (1 << 4)  # CHOWN, DAC_OVERRIDE, FOWNER, FSETID
    for k, want in (("CapEff", "cap_effective"), ("CapPrm", "cap_permitted"),
                    ("CapBnd", "cap_bounding"), ("CapInh", "cap_ambient"),
                    ("CapAmb", "cap_ambient")):
        assert s[k] == p[want], (k, s[k], p[want])
        assert int(s[k], 16) == file_caps, (k, s[k])
    assert s["NoNewPrivs"] == "1" and s["Seccomp"] == "2"
    assert int(status(kids["tools"])["CapEff"], 16) == 0
    root = "/proc/%d/root" % kids["tree"]
    # None is in its view (at most an empty mount point), as --print-privileges says.
    for gone in (dd.base, dd.root, dd.data, "/proc", "/sys"):
        assert not os.path.exists(root + gone) or os.listdir(root + gone) == [], gone
        assert gone not in p["view"], (gone, p["view"])
    assert os.listdir(dd.base) and os.listdir(dd.data)  # which the helper's view holds
    assert os.listdir("/proc/%d/root/proc" % kids["tools"])  # the tool runner keeps /proc
    snap = dd.client.controller("CreateSnapshot", source_volume_id=vid, name="tree-snap")
    dd.client.controller("DeleteSnapshot", snapshot_id=snap.snapshot.snapshot_id)
    dd.client.controller("DeleteVolume", volume_id=vid)
    assert sorted(n for n in os.listdir(dd.base) if not n.startswith(".")) == []


def test_volume_root_taken_over_by_a_pod(dd):
    """A pod running as root chowns its volume's directory away and makes it and what it
    holds unreadable, sticky and set-group-ID: snapshot, restore and delete still work,
    the restore keeps every owner and mode, and the helper did it without CAP_FOWNER or
    CAP_FSETID (the tree runner walked the contents; the helper only opened, marked and
    moved directories)."""
    c = dd.client
    v = create(dd, "taken", 64 * MiB)
    root = os.path.join(dd.base, "taken")
    os.makedirs(os.path.join(root, "sticky"))
    with open(os.path.join(root, "sticky", "f"), "w") as f:
        f.write("pod data")
    for p, uid, mode in ((os.path.join(root, "sticky", "f"), 1001, 0o2600),
                         (os.path.join(root, "sticky"), 1001, 0o1700),
                         (root, 1000, 0o2700)):
        os.chown(p, uid, 2000)
        os.chmod(p, mode)
    before = tree(root)
    snap = c.controller("CreateSnapshot", source_volume_id=v.volume_id, name="taken-s").snapshot
    r = create(dd, "taken-restored", 64 * MiB,
               volume_content_source=c.pb.VolumeContentSource(
                   snapshot=c.pb.VolumeContentSource.SnapshotSource(snapshot_id=snap.snapshot_id)))
    restored = os.path.join(dd.base, "taken-restored")
    assert tree(restored) == before
    st = os.stat(restored)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (1000, 2000, 0o2700)
    for vid in (r.volume_id, v.volume_id):
        c.controller("DeleteVolume", volume_id=vid)
    c.controller("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    assert sorted(n for n in os.listdir(dd.base) if not n.startswith(".")) == []
    for area in (".sepcsi-snapshots", ".sepcsi-trash", ".sepcsi-work"):
        assert os.listdir(os.path.join(dd.base, area)) == [], area


def test_nothing_is_published_beneath_a_directory_volume(dd):
    """A directory volume's tenant owns its root: nothing of another volume is published
    beneath the mount point where it is published (it could hide it from every look), even
    with its root made root's and writable by nobody else, as the walk asks; the mount
    point where volumes are published is never walked through (test_security.py)."""
    c, cap = dd.client, dir_cap()
    v, w = create(dd, "outer"), create(dd, "inner")
    staging, wstaging = (os.path.join(dd.root, "staging", n) for n in ("outer", "inner"))
    t = pod_target(dd, "pod1", "outer")
    for vol, st in ((v, staging), (w, wstaging)):
        os.makedirs(st)
        c.node("NodeStageVolume", volume_id=vol.volume_id, staging_target_path=st,
               volume_capability=cap, volume_context=dict(vol.volume_context))
    c.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
           target_path=t, volume_capability=cap, volume_context=dict(v.volume_context))
    os.chown(t, 0, 0)  # its tenant, root in its pod
    os.chmod(t, 0o755)
    os.mkdir(os.path.join(t, "in"), 0o755)
    before = sorted(mounts_under(dd.root))
    for inner in (os.path.join(t, "mount"), os.path.join(t, "in", "mount")):
        code, msg = code_of(c.node, "NodePublishVolume", volume_id=w.volume_id,
                            staging_target_path=wstaging, target_path=inner,
                            volume_capability=cap, volume_context=dict(w.volume_context))
        assert code == grpc.StatusCode.INVALID_ARGUMENT, msg
    assert sorted(mounts_under(dd.root)) == before
    assert sorted(os.listdir(t)) == ["in"] and os.listdir(os.path.join(t, "in")) == []
    os.rmdir(os.path.join(t, "in"))
    c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=t)
    for vol, st in ((v, staging), (w, wstaging)):
        c.node("NodeUnstageVolume", volume_id=vol.volume_id, staging_target_path=st)
        c.controller("DeleteVolume", volume_id=vol.volume_id)
    assert mounts_under(dd.root) == []


@pytest.fixture
def pausable_dd():
    yield from running(Driver(setup=BASES["xfs"], env={"SEPCSI_TEST_PAUSE": "1"}))


def test_a_publication_never_covers_what_another_made_meanwhile(pausable_dd):
    """A directory volume's publication finds its target empty; before its bind lands,
    another volume's raw block publication is made inside (its walk passed a directory
    that was no mount point yet). The bind would cover it for good: the covered directory
    is looked at again after the bind, and the bind undone."""
    d, c, cap = pausable_dd, pausable_dd.client, dir_cap()
    v = create(d, "outer")
    raw = c.controller("CreateVolume", name="raw", volume_capabilities=[block_cap()],
                       capacity_range=c.pb.CapacityRange(required_bytes=64 * MiB)).volume
    staging, bst = (os.path.join(d.root, "staging", n) for n in ("outer", "raw"))
    for vol, st, vcap in ((v, staging, cap), (raw, bst, block_cap())):
        os.makedirs(st)
        c.node("NodeStageVolume", volume_id=vol.volume_id, staging_target_path=st,
               volume_capability=vcap, volume_context=dict(vol.volume_context))
    t = pod_target(d, "pod1", "outer")
    inner = os.path.join(t, "dev")
    d.hold("mount")
    result = {}

    def publish_outer():
        try:
            c.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
                   target_path=t, volume_capability=cap, volume_context=dict(v.volume_context))
            result["code"] = grpc.StatusCode.OK
        except grpc.RpcError as e:
            result["code"] = e.code()

    th = threading.Thread(target=publish_outer)
    th.start()
    try:
        d.paused("mount")
        c.node("NodePublishVolume", volume_id=raw.volume_id, staging_target_path=bst,
               target_path=inner, volume_capability=block_cap())
    finally:
        d.release("mount")
        th.join(60)
    assert result.get("code") == grpc.StatusCode.INTERNAL
    assert "made in the mount point meanwhile" in d.logs()
    assert t not in mounts_under(d.root) and inner in mounts_under(d.root)
    c.node("NodeUnpublishVolume", volume_id=raw.volume_id, target_path=inner)
    c.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
           target_path=t, volume_capability=cap, volume_context=dict(v.volume_context))
    c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=t)
    for vol, st in ((v, staging), (raw, bst)):
        c.node("NodeUnstageVolume", volume_id=vol.volume_id, staging_target_path=st)
        c.controller("DeleteVolume", volume_id=vol.volume_id)
    assert mounts_under(d.root) == []


def overlay_base(d):
    """The base on an overlay of local layers (a kind or k3d node keeps its /srv in its
    container's overlay): the administrator's file system, which binds of its
    directories show as their type."""
    d.base = os.path.join(d.tmp, "base")
    layers = [os.path.join(d.tmp, n) for n in ("lower", "upper", "work")]
    for p in layers + [d.base]:
        os.makedirs(p)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    "lowerdir=%s,upperdir=%s,workdir=%s" % tuple(layers), d.base], check=True)
    os.chmod(d.base, 0o755)
    with open(d.policy, "a") as f:
        f.write("[directories]\nbase_dirs = %s\n" % d.base)


@pytest.fixture
def od():
    yield from running(Driver(setup=overlay_base))


def test_a_base_on_an_overlay_is_published_and_unpublished(od):
    """A bind of a directory volume on an overlay base is an overlay mount beneath the
    allowed root, which the helper refuses to look into when it is anyone else's; the
    base's own superblock is the administrator's (trusted at start), so a retried
    publish, stats and unpublish of it are served, and nothing is left mounted."""
    d, cap = od, dir_cap()
    c = d.client
    v = create(d, "ov", parameters=params(d))
    staging = os.path.join(d.root, "staging", "ov")
    os.makedirs(staging)
    c.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
           volume_capability=cap, volume_context=dict(v.volume_context))
    t = pod_target(d, "pod1", "ov")
    for _ in range(2):
        c.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
               target_path=t, volume_capability=cap, readonly=False,
               volume_context=dict(v.volume_context))
    open(os.path.join(t, "a"), "w").write("x")
    assert c.node("NodeGetVolumeStats", volume_id=v.volume_id, volume_path=t).usage
    for _ in range(2):
        c.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=t)
    assert not os.path.exists(t)
    c.node("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=v.volume_id)
    assert mounts_under(d.root) == []
