"""Attacks on directory volumes over a shared base ([directories] shared_base_dirs).

Each test asserts the SAFE outcome: a test that fails means the attack worked.

The cluster is test_shared_base.Cluster (one controller-mode and two node-mode drivers
over one base). Some attacks need a node that is really "another machine": its own
kubelet tree at the same path as node a's (every node's kubelet lives at
/var/lib/kubelet). OtherNode starts such a driver in a mount namespace of its own, where
node a's root path is a bind of an empty directory of its own: node a's target paths are
valid paths there, and nothing of node a's is reachable, as on a real second node. It is
either a real driver (threat: anyone who can reach that node's CSI socket) or the real
supervisor and helper with a hostile stand-in as rpcd (threat: a compromised rpcd).
"""
import os
import re
import subprocess
import time

import grpc
import pytest

from conftest import Driver, mounts_under
from csi_client import mount_cap
from hostile import HostileDriver
from mh_wire import DIR_DELETE, F_ONE_NODE, Msg, T
from test_shared_base import (MNMW, SNW, Cluster, code_of, create, publish,  # noqa: F401
                              record_name, records, unpublish)


@pytest.fixture
def cl():
    """test_shared_base's cluster; hostile nodes' bin directories removed after."""
    c = None
    try:
        c = Cluster()
        c.hostiles = []
        yield c
    finally:
        if c:
            c.close()
            for h in c.hostiles:
                for name in os.listdir(h.bin_dir):
                    os.unlink(os.path.join(h.bin_dir, name))
                os.rmdir(h.bin_dir)

MiB = 1 << 20


# ---- a second machine's node --------------------------------------------------------------

def other_node(cl, name, hostile=False, node_id="node-evil"):
    """A node-mode driver whose kubelet tree is node a's path, in a namespace of its own
    where that path is the empty directory <cl.tmp>/<name>-view (its own tree)."""
    view = os.path.join(cl.tmp, name + "-view")
    os.makedirs(view, mode=0o755)
    a_root = cl.a.root

    def setup(d):
        with open(d.policy) as f:
            text = f.read().replace("allowed_roots = %s" % d.root, "allowed_roots = %s" % a_root)
        with open(d.policy, "w") as f:
            f.write(text)

    prefix = ["unshare", "-m", "--propagation", "private", "sh", "-c",
              'mount --bind "$1" "$2" && shift 2 && exec "$@"', "sh", view, a_root]
    kw = dict(node_id=node_id, setup=setup, prefix=prefix,
              policy_extra="[directories]\nshared_base_dirs = %s\n" % cl.base)
    if hostile:
        h = HostileDriver(extra_args=["--mode", "node"], **kw)
        h.driver.prefix = []  # sh and unshare exec: the process started is the supervisor
        h.view = view
        h.root_as = a_root
        cl.drivers.append(h.driver)
        cl.hostiles.append(h)
        return h
    d = Driver(extra_args=["--mode", "node"], **kw)
    d.prefix = []
    d.view = view
    d.root_as = a_root
    cl.drivers.append(d)
    return d


def in_view(d, path):
    """Where the test sees a path of the other node's kubelet tree (cl.a.root-based)."""
    return d.view + path[len(d.root_as):]


def other_publish(cl, d, v, pod, mode=MNMW, ctx=None):
    """NodeStage and NodePublish on the other node, at paths of its own tree."""
    ctx = dict(v.volume_context) if ctx is None else ctx
    staging = os.path.join(cl.a.root, "staging", v.volume_id)
    target = os.path.join(cl.a.root, "pods", pod, "volumes", "kubernetes.io~csi",
                          v.volume_id, "mount")
    os.makedirs(in_view(d, staging), exist_ok=True)
    os.makedirs(os.path.dirname(in_view(d, target)), exist_ok=True)
    d.client.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
                  volume_capability=mount_cap("", mode), volume_context=ctx)
    d.client.node("NodePublishVolume", volume_id=v.volume_id, staging_target_path=staging,
                  target_path=target, volume_capability=mount_cap("", mode),
                  volume_context=ctx)
    return staging, target


def safe_unpublish(cl, d, v, staging, target):
    """unpublish(), and whatever an attack that worked left mounted, unmounted."""
    try:
        unpublish(d, v, staging, target)
    except grpc.RpcError:
        pass
    for m in reversed(mounts_under(cl.tmp) + mounts_under(d.root)):
        subprocess.run(["umount", "-l", m], check=False)


def dir_req(t, v, cl, **kw):
    ctx = dict(v.volume_context)
    return Msg(t, volume_id=v.volume_id, base=cl.base,
               name=ctx["directory"][len(cl.base) + 1:], **kw)


def fill(target, text="tenant data\n"):
    with open(os.path.join(target, "precious"), "w") as f:
        f.write(text)


def still_there(target, text="tenant data\n"):
    try:
        with open(os.path.join(target, "precious")) as f:
            return f.read() == text
    except OSError:
        return False


# ---- (3) a compromised rpcd on another node -----------------------------------------------

def test_hostile_rpcd_erases_other_nodes_publication_then_deletes(cl):
    """Node a publishes v (its pod writes). A compromised rpcd on another node asks its
    helper to DIR_DELETE v: refused, but the refusal names node a's target. It then asks
    DIR_UNPUBLISH of v at that target: on its own machine the path does not exist, which
    the helper answers OK, removing the base's record of node a's publication. DIR_DELETE
    again. SAFE: the volume node a still publishes is never deleted."""
    v = create(cl, "victim")
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta)
    h = other_node(cl, "evil", hostile=True)
    r = h.rpcd
    ans = r.call(dir_req(T.REQ_DIR_DELETE, v, cl, mode=DIR_DELETE))
    # The refusal names the node, never its target (a pod's uid is no other node's business).
    assert ans.type == T.ANS_ERROR and "node node-a" in ans.reason and ta not in ans.reason, \
        ans
    # The attack proper: unpublish node a's target "here", then delete.
    r.call(dir_req(T.REQ_DIR_UNPUBLISH, v, cl, path=ta))
    ans = r.call(dir_req(T.REQ_DIR_DELETE, v, cl, mode=DIR_DELETE))
    try:
        assert ans.type == T.ANS_ERROR, "deleted while node a publishes it: %r" % (ans,)
        assert still_there(ta), "node a's pod lost its data"
    finally:
        safe_unpublish(cl, cl.a, v, sa, ta)


def test_hostile_rpcd_forged_publication_other_volume(cl):
    """A compromised rpcd publishes its own bind with another volume's id at a target
    string equal to node a's: the record exists already (EEXIST), so its own DIR_UNPUBLISH
    of that target then removes node a's record. SAFE: delete still refused."""
    v = create(cl, "victim2")
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta)
    h = other_node(cl, "evil2", hostile=True)
    r = h.rpcd
    os.makedirs(os.path.dirname(h.view + ta[len(cl.a.root):]), exist_ok=True)
    pub = r.call(dir_req(T.REQ_DIR_PUBLISH, v, cl, path=ta, mode=0))
    assert pub.type == T.ANS_DIR_PUBLISH, pub
    unp = r.call(dir_req(T.REQ_DIR_UNPUBLISH, v, cl, path=ta))
    assert unp.type == T.ANS_DIR_UNPUBLISH, unp
    try:
        code, msg = code_of(cl.ctl.client.controller, "DeleteVolume", volume_id=v.volume_id)
        assert code == grpc.StatusCode.FAILED_PRECONDITION, msg
        assert still_there(ta)
    finally:
        safe_unpublish(cl, cl.a, v, sa, ta)


def test_hostile_rpcd_failed_publish_keeps_the_other_modes_record(cl):
    """A compromised rpcd on another node publishes a volume at its target in a multi-node
    mode (its node's record made), then again at that target in a single-node mode,
    read-only: refused (already published read-write). The failed publish's undo once
    removed the records of both modes, so the target stayed bound with none, and a
    delete on the controller went on under the pod. SAFE: only the record the failed
    publish made goes; the delete is refused while the bind stands."""
    v = create(cl, "victim-undo")
    vdir = dict(v.volume_context)["directory"]
    with open(os.path.join(vdir, "precious"), "w") as f:
        f.write("tenant data\n")
    h = other_node(cl, "evil-undo", hostile=True)
    r = h.rpcd
    target = os.path.join(cl.a.root, "pods", "pod-e", "volumes", "kubernetes.io~csi",
                          v.volume_id, "mount")
    os.makedirs(os.path.dirname(in_view(h, target)), exist_ok=True)
    pub = r.call(dir_req(T.REQ_DIR_PUBLISH, v, cl, path=target, mode=0))
    assert pub.type == T.ANS_DIR_PUBLISH, pub
    try:
        bad = r.call(dir_req(T.REQ_DIR_PUBLISH, v, cl, path=target, mode=1,
                             flags=F_ONE_NODE))
        assert bad.type == T.ANS_ERROR, bad
        code, msg = code_of(cl.ctl.client.controller, "DeleteVolume", volume_id=v.volume_id)
        assert code == grpc.StatusCode.FAILED_PRECONDITION and "node-evil" in msg, msg
        assert still_there(vdir)
    finally:
        r.call(dir_req(T.REQ_DIR_UNPUBLISH, v, cl, path=target))
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)


def test_hostile_rpcd_cannot_bind_foreign_or_unmarked(cl):
    """A compromised rpcd asks its helper for what no volume id proves: the base itself,
    the helper's areas, a name climbing out, another volume's directory under this id, a
    tenant's subdirectory. SAFE: all refused, nothing mounted in its tree."""
    x, y = create(cl, "hx"), create(cl, "hy")
    sx, tx = publish(cl.a, x, "pod-x")
    os.makedirs(os.path.join(tx, "sub"))
    h = other_node(cl, "evil3", hostile=True)
    r = h.rpcd
    target = os.path.join(cl.a.root, "pods", "p-evil", "volumes", "kubernetes.io~csi",
                          "pv", "mount")
    os.makedirs(os.path.dirname(h.view + target[len(cl.a.root):]))
    names = ["hx", "hx/sub", ".sepcsi-marks", ".sepcsi-published", "..", "hx/..",
             "archived-hx", "hy/../hx"]
    try:
        for name in names:
            ans = r.call(Msg(T.REQ_DIR_PUBLISH, volume_id=y.volume_id, base=cl.base,
                             name=name, path=target, mode=0))
            assert ans.type == T.ANS_ERROR, (name, ans)
        assert not os.path.ismount(h.view + target[len(cl.a.root):])
        # a publication record of y is not left behind by the refusals (delete would block)
        pubs = os.listdir(os.path.join(cl.base, ".sepcsi-published"))
        assert not [p for p in pubs if p.startswith(y.volume_id + ".")], pubs
    finally:
        unpublish(cl.a, x, sx, tx)


def test_crash_between_trash_and_move_back_destroys_published_volume(cl):
    """DIR_DELETE on a shared base: renamed into the trash, then the publications are
    read, then (published) moved back. A worker killed (kill -9, node crash) between the
    rename and the move back leaves the published volume in .sepcsi-trash/<id> (emulated
    here by that rename, the state such a kill leaves). The next DeleteVolume's DIR_DELETE
    first purges what 'a killed create or delete of this id left' there, without looking
    at publications. SAFE: node a's pod keeps its data."""
    v = create(cl, "crashy")
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta)
    path = os.path.join(cl.base, "crashy")
    trash = os.path.join(cl.base, ".sepcsi-trash")
    os.makedirs(trash, mode=0o700, exist_ok=True)
    os.rename(path, os.path.join(trash, v.volume_id))  # the killed worker's first step
    try:
        try:
            cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)
        except grpc.RpcError:
            pass
        assert still_there(ta), "the volume node a publishes was emptied by the retried delete"
    finally:
        safe_unpublish(cl, cl.a, v, sa, ta)


# ---- (2) anyone who can reach a node's CSI socket ------------------------------------------

def test_csi_client_on_other_node_clears_record_then_controller_deletes(cl):
    """Through a real node's CSI socket only: NodeStageVolume of v with its (public)
    volume_context adopts it; NodeUnpublishVolume of v at node a's target path (a path
    that does not exist on this node) is answered OK and removes node a's publication
    record; NodeUnstageVolume. Then the controller's DeleteVolume (the CO's, or a client
    of the controller's socket). SAFE: refused while node a publishes."""
    v = create(cl, "victim3")
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta)
    d = other_node(cl, "evil4")
    staging = os.path.join(cl.a.root, "staging", "x-" + v.volume_id)
    os.makedirs(in_view(d, staging))
    d.client.node("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
                  volume_capability=mount_cap("", MNMW), volume_context=dict(v.volume_context))
    d.client.node("NodeUnpublishVolume", volume_id=v.volume_id, target_path=ta)
    d.client.node("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)
    try:
        code, msg = code_of(cl.ctl.client.controller, "DeleteVolume", volume_id=v.volume_id)
        assert code == grpc.StatusCode.FAILED_PRECONDITION, msg
    finally:
        assert still_there(ta), "deleted while node a publishes it"
        safe_unpublish(cl, cl.a, v, sa, ta)


def test_retained_volume_not_republished_after_delete(cl):
    """onDelete=retain: DeleteVolume keeps the directory (for the administrator); the
    controller forgets the volume. The old volume_context (the PV spec, not secret) sent
    to any node adopts it again. SAFE: a deleted volume is not published again."""
    v = create(cl, "kept", parameters={"type": "directory", "baseDir": cl.base,
                                       "onDelete": "retain"})
    sa, ta = publish(cl.a, v, "pod-old")
    fill(ta, "secret of the old claim\n")
    unpublish(cl.a, v, sa, ta)
    cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)
    try:
        code, msg = code_of(publish, cl.b, v, "pod-new")
        assert code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION), msg
    finally:
        for t in mounts_under(cl.b.root):
            subprocess.run(["umount", t], check=False)


def test_adopt_single_node_volume_as_multi_writer(cl):
    """A volume made SINGLE_NODE_WRITER, published on node a. Another node adopts it from
    its context and publishes it MULTI_NODE_MULTI_WRITER. SAFE: refused (the volume's
    access mode is one node's)."""
    v = create(cl, "single", mode=SNW)
    sa, ta = publish(cl.a, v, "pod-a", mode=SNW)
    try:
        code, msg = code_of(publish, cl.b, v, "pod-b", mode=MNMW)
        assert code in (grpc.StatusCode.INVALID_ARGUMENT,
                        grpc.StatusCode.FAILED_PRECONDITION), msg
    finally:
        for t in mounts_under(cl.b.root):
            subprocess.run(["umount", t], check=False)
        safe_unpublish(cl, cl.a, v, sa, ta)


def test_adopt_then_delete_overrides_on_delete(cl):
    """An adopted volume carries the onDelete the context claims. A node driver in
    --mode all (node and controller) that adopted it would delete with that mode. Here:
    the context says onDelete=delete for a volume made with retain; node b (node mode)
    does not serve DeleteVolume. SAFE: node b's socket cannot delete it."""
    v = create(cl, "keep2", parameters={"type": "directory", "baseDir": cl.base,
                                        "onDelete": "retain"})
    ctx = dict(v.volume_context, onDelete="delete")
    sb, tb = publish(cl.b, v, "pod-b", ctx=ctx)
    fill(tb)
    unpublish(cl.b, v, sb, tb)
    code, _ = code_of(cl.b.client.controller, "DeleteVolume", volume_id=v.volume_id)
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert os.path.exists(os.path.join(cl.base, "keep2", "precious"))


# ---- (1) a hostile tenant ------------------------------------------------------------------

def test_stale_record_blocks_new_volumes(cl):
    """A record outlives its directory (an administrator removes a kept one by hand, or a
    purge is killed between its rmdir and the record's removal), and the number is used
    again by a directory the helper makes above a new volume. Written here directly (a
    file system reuses numbers when it likes): the stale record names that directory's
    inode with another birth time. SAFE: it is no mark: volumes are still made beneath
    that directory, and no request for the stale id binds or removes it."""
    z = create(cl, "zz2", parameters={"type": "directory", "baseDir": cl.base,
                                      "onDelete": "retain"})
    zpath = os.path.join(cl.base, "zz2")
    cl.ctl.client.controller("DeleteVolume", volume_id=z.volume_id)
    assert records(cl.base, zpath) == {"kept": z.volume_id}
    c = cl.ctl.client

    def make(name, group):
        return c.controller("CreateVolume", name=name, volume_capabilities=[mount_cap("", MNMW)],
                            capacity_range=c.pb.CapacityRange(required_bytes=64 * MiB),
                            parameters={"type": "directory", "baseDir": cl.base,
                                        "pathPattern": group + "/${.PV.name}",
                                        "csi.storage.k8s.io/pv/name": name}).volume

    make("g0-vol", "g0")
    g0 = os.path.join(cl.base, "g0")
    gino = os.stat(g0).st_ino
    with open(os.path.join(cl.base, ".sepcsi-marks", "%x-1.000000000" % gino), "w") as f:
        f.write(z.volume_id)  # of a directory born long before g0
    make("g0-vol2", "g0")  # a stale record is no mark: g0 is no volume's
    assert sorted(os.listdir(g0)) == ["g0-vol", "g0-vol2"]
    ctx = dict(z.volume_context, directory=g0)
    code, msg = code_of(publish, cl.b, z, "pod-z", ctx=ctx)
    assert code == grpc.StatusCode.NOT_FOUND, msg
    assert mounts_under(cl.b.root) == []


def test_tenant_dir_with_stale_record_is_not_reachable(cl):
    """The state the stale record plus inode reuse would give (written here directly:
    a record "<z>:<ino>" naming a directory the tenant of x made in its own volume).
    A client asks node b to publish z at that directory, and a compromised rpcd asks
    for it by name. SAFE: refused: the walk never passes a marked directory."""
    z = create(cl, "zz3", parameters={"type": "directory", "baseDir": cl.base,
                                      "onDelete": "retain"})
    cl.ctl.client.controller("DeleteVolume", volume_id=z.volume_id)
    x = create(cl, "tenanty")
    sx, tx = publish(cl.a, x, "pod-x")
    try:
        os.mkdir(os.path.join(tx, "evil"))
        # Even a record naming this very directory (its inode and birth time).
        name = record_name(os.path.join(tx, "evil"))
        with open(os.path.join(cl.base, ".sepcsi-marks", name), "w") as f:
            f.write(z.volume_id)
        ctx = dict(z.volume_context, directory=os.path.join(cl.base, "tenanty", "evil"))
        code, msg = code_of(publish, cl.b, z, "pod-z", ctx=ctx)
        assert code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
                        grpc.StatusCode.FAILED_PRECONDITION), msg
        assert mounts_under(cl.b.root) == []
        h = other_node(cl, "evil5", hostile=True)
        target = os.path.join(cl.a.root, "pods", "pz", "volumes", "kubernetes.io~csi",
                              "pv", "mount")
        os.makedirs(os.path.dirname(h.view + target[len(cl.a.root):]))
        ans = h.rpcd.call(Msg(T.REQ_DIR_PUBLISH, volume_id=z.volume_id, base=cl.base,
                              name="tenanty/evil", path=target, mode=0))
        assert ans.type == T.ANS_ERROR, ans
        ans = h.rpcd.call(Msg(T.REQ_DIR_DELETE, volume_id=z.volume_id, base=cl.base,
                              name="tenanty/evil", mode=DIR_DELETE))
        assert os.path.isdir(os.path.join(tx, "evil"))
    finally:
        safe_unpublish(cl, cl.a, x, sx, tx)


def test_node_restart_purges_other_nodes_trash(cl):
    """The state a DIR_DELETE of a published volume has between its move into the trash
    and its move back (emulated by that rename) meets restarts: a node plugin's helper
    leaves the shared areas alone, the controller's purges what it finds there
    (mh_dir_leftovers). SAFE: the data survive."""
    v = create(cl, "inflight")
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta)
    trash = os.path.join(cl.base, ".sepcsi-trash")
    os.makedirs(trash, mode=0o700, exist_ok=True)
    os.rename(os.path.join(cl.base, "inflight"), os.path.join(trash, v.volume_id))
    try:
        # A node plugin's helper leaves the shared areas alone; the controller's purges
        # them at its start: its PURGE of that id (in its audit) must find it published.
        for d in (cl.b, cl.ctl):
            d.stop()
            d.start()
        deadline = time.monotonic() + 120  # a bound for slow machines, not a figure
        while not re.search(r"op=PURGE .*%s" % v.volume_id, cl.ctl.logs()):
            assert time.monotonic() < deadline, "the controller's helper did not purge"
            time.sleep(0.05)
        assert still_there(ta), "a restart emptied the volume node a publishes"
        # (the controller's retry would move it back: it is not in the trash for ever)
        os.rename(os.path.join(trash, v.volume_id), os.path.join(cl.base, "inflight"))
    finally:
        safe_unpublish(cl, cl.a, v, sa, ta)


def test_tenant_hardlinks_symlinks_and_renames_do_not_leak(cl):
    """The tenant of x, root in its pod, on node a: a hard link to a file it has, a
    symlink to y, a FIFO, a long name, a rename of a directory over and over; then the
    volume is deleted (after unpublish). SAFE: y untouched, nothing outside the base."""
    x, y = create(cl, "lx"), create(cl, "ly")
    sy, ty = publish(cl.b, y, "pod-y")
    fill(ty, "y's\n")
    sx, tx = publish(cl.a, x, "pod-x")
    os.symlink(os.path.join(cl.base, "ly"), os.path.join(tx, "to-y"))
    os.symlink("/etc", os.path.join(tx, "etc"))
    os.mkfifo(os.path.join(tx, "fifo"))
    with open(os.path.join(tx, "f"), "w") as f:
        f.write("x")
    os.link(os.path.join(tx, "f"), os.path.join(tx, "f2"))
    os.mkdir(os.path.join(tx, "n" * 255))
    unpublish(cl.a, x, sx, tx)
    cl.ctl.client.controller("DeleteVolume", volume_id=x.volume_id)
    assert not os.path.exists(os.path.join(cl.base, "lx"))
    assert still_there(ty, "y's\n")
    assert os.path.exists("/etc/passwd")
    unpublish(cl.b, y, sy, ty)
