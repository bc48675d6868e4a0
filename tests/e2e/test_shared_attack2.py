"""Second hostile review of directory volumes over a shared base.

Each test asserts the SAFE outcome: a test that fails means the attack worked.
Reuses test_shared_attack's cluster (fixture cl: a controller-mode driver and two
node-mode drivers over one base) and its other_node() (a second machine's node, real or
with a hostile rpcd).
"""
import os

import grpc

from conftest import Driver
from csi_client import mount_cap
from mh_wire import T
from test_shared_attack import (cl, dir_req, fill, other_node,  # noqa: F401
                                safe_unpublish)
from test_shared_base import MNMW, code_of, create, publish, record_name, records, unpublish

DIR_RETAIN = 1  # MH_DIR_RETAIN (mh_proto.h)


def record_of(cl, path):
    return records(cl.base, path)


# ---- retain skips the publication check ---------------------------------------------------

def test_retain_while_other_node_publishes_wedges_its_unpublish(cl):
    """onDelete=retain. Node a publishes v. The controller's DeleteVolume (its store knows
    nothing of node a's publication) sends DIR_DELETE mode RETAIN, which skips the
    shared-base publication check (mh_dir.c: `q->mode != MH_DIR_RETAIN && ...`) and turns
    v's record into a kept one while node a still binds it. Node a's NodeUnpublishVolume
    then finds no directory carrying v's mark, refuses to touch the bind, and never
    succeeds: the pod's bind and the publication record stay for good.
    SAFE: the delete is refused (docs: DIR_DELETE is PRECONDITION while any node
    publishes it), or at least node a can still unpublish."""
    v = create(cl, "ret-pub", parameters={"type": "directory", "baseDir": cl.base,
                                          "onDelete": "retain"})
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta)
    try:
        code = None
        try:
            cl.ctl.client.controller("DeleteVolume", volume_id=v.volume_id)
        except grpc.RpcError as e:
            code = e.code()
        unpub_err = None
        try:
            unpublish(cl.a, v, sa, ta)
        except grpc.RpcError as e:
            unpub_err = e.details()
        assert unpub_err is None and not os.path.ismount(ta), \
            "delete(retain) answered %s; node a can no longer unpublish: %s" % (code, unpub_err)
        assert code == grpc.StatusCode.FAILED_PRECONDITION, \
            "retained while node a published it"
    finally:
        safe_unpublish(cl, cl.a, v, sa, ta)


def test_hostile_rpcd_retain_takes_other_tenants_volume_away(cl):
    """A compromised rpcd on another machine sends its helper DIR_DELETE mode RETAIN of a
    volume node a publishes (the id and name are in the PV's volume_context). No
    publication check for RETAIN: the volume's record becomes a kept one. Node a cannot
    unpublish it, no node can publish it again, and the controller's later delete leaves
    it alone for ever. SAFE: refused while node a publishes, record unchanged."""
    v = create(cl, "ret-evil")
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta)
    path = os.path.join(cl.base, "ret-evil")
    before = record_of(cl, path)
    h = other_node(cl, "evil-ret", hostile=True)
    try:
        ans = h.rpcd.call(dir_req(T.REQ_DIR_DELETE, v, cl, mode=DIR_RETAIN))
        assert record_of(cl, path) == before, "record now %r (answer %r)" % (
            record_of(cl, path), ans)
        assert ans.type == T.ANS_ERROR, ans
    finally:
        safe_unpublish(cl, cl.a, v, sa, ta)


# ---- a node in --mode all adopts, then deletes ----------------------------------------------

def test_mode_all_node_adopts_then_deletes_with_chosen_on_delete(cl):
    """A node plugin in --mode all (node and controller in one driver, a supported mode
    that gets --node-id and the shared base). Anyone who reaches its CSI socket sends
    NodePublishVolume of a volume another controller made (onDelete=retain), with its
    public volume_context but onDelete=delete, and no NodeStageVolume first: ctl_dir_adopt
    records the volume (adopted, on_delete taken from the context) before the call fails
    FAILED_PRECONDITION (not staged), and nothing forgets it. Then DeleteVolume on the same
    socket: nothing staged or published in this node's store, so DIR_DELETE mode delete.
    SAFE: a volume this driver did not make is not removed through it, and never with an
    onDelete other than its own (the data survive)."""
    v = create(cl, "keep-me", parameters={"type": "directory", "baseDir": cl.base,
                                          "onDelete": "retain"})
    sa, ta = publish(cl.a, v, "pod-a")
    fill(ta, "retain me\n")
    unpublish(cl.a, v, sa, ta)  # the claim's pods are gone
    d = Driver(extra_args=["--mode", "all"], node_id="node-all",
               policy_extra="[directories]\nshared_base_dirs = %s\n" % cl.base)
    cl.drivers.append(d)
    ctx = dict(v.volume_context, onDelete="delete")
    target = os.path.join(d.root, "pods", "p", "volumes", "kubernetes.io~csi", "pv", "mount")
    os.makedirs(os.path.dirname(target))
    code, _ = code_of(d.client.node, "NodePublishVolume", volume_id=v.volume_id,
                      staging_target_path=os.path.join(d.root, "nostaging"),
                      target_path=target, volume_capability=mount_cap("", MNMW),
                      volume_context=ctx)
    assert code == grpc.StatusCode.FAILED_PRECONDITION  # not staged, but adopted by then
    try:
        d.client.controller("DeleteVolume", volume_id=v.volume_id)
    except grpc.RpcError:
        pass
    path = os.path.join(cl.base, "keep-me")
    assert os.path.isfile(os.path.join(path, "precious")), \
        "another node's controller deleted a retain volume it never made"


# ---- a kill inside write_record: the kept record is replaced non-atomically -------------------

def test_kill_during_keep_leaves_retained_dir_unmarked(cl):
    """mh_dir_keep on a shared base makes the kept record, then removes the volume's. A
    worker killed (kill -9, node crash) between the two leaves both; one killed before
    the first leaves the volume's alone (the retried delete keeps it then). Emulated here
    by the state the first kill leaves: the volume's record put back beside the kept one.
    SAFE: the directory is kept: no new volume is made inside it, and no node publishes
    it again from its old context."""
    x = create(cl, "ret-x", parameters={"type": "directory", "baseDir": cl.base,
                                        "onDelete": "retain"})
    sx, tx = publish(cl.a, x, "pod-x")
    fill(tx, "old tenant\n")
    unpublish(cl.a, x, sx, tx)
    cl.ctl.client.controller("DeleteVolume", volume_id=x.volume_id)
    xpath = os.path.join(cl.base, "ret-x")
    assert records(cl.base, xpath) == {"kept": x.volume_id}
    with open(os.path.join(cl.base, ".sepcsi-marks", record_name(xpath)), "w") as f:
        f.write(x.volume_id)  # killed after the kept record, before the volume's went
    c = cl.ctl.client
    try:
        c.controller("CreateVolume", name="inner", volume_capabilities=[mount_cap("", MNMW)],
                     capacity_range=c.pb.CapacityRange(required_bytes=64 << 20),
                     parameters={"type": "directory", "baseDir": cl.base,
                                 "pathPattern": "ret-x/${.PV.name}",
                                 "csi.storage.k8s.io/pv/name": "inner"})
    except grpc.RpcError:
        pass
    assert not os.path.exists(os.path.join(xpath, "inner")), \
        "a new volume was made inside the retained volume's directory"
    code, msg = code_of(publish, cl.b, x, "pod-again")
    assert code == grpc.StatusCode.NOT_FOUND, msg
