"""GROUP_SNAPSHOT where the helper freezes by itself (directory volumes configured, no
capable core), and its audit: every member of a raw block device in use is refused as
with a core; the main loop bounds a group's freeze until its last member is thawed,
whatever the worker does between two thaws; and the audit file names every member.
The requests come from a hostile stand-in for rpcd (hostile.py). Run as root inside a
private mount namespace, like every e2e test."""
import os
import subprocess

import pytest

import mh_wire
from conftest import running
from hostile import HostileDriver
from mh_wire import E, Msg, T
from test_dir_helper import xfs_base
from test_security import Kubelet, group_msg

MiB = 1 << 20


@pytest.fixture
def nocore():
    """Directory volumes configured: the helper freezes itself, bounded to 2 s."""
    hd = HostileDriver(setup=xfs_base, kubelet=True, env={"SEPCSI_TEST_PAUSE": "1"},
                       policy_extra="[volumes]\nfreeze_max_seconds = 2\n")
    hd.driver.kubelet = Kubelet(hd.driver.root)
    yield from running(hd)


def staged_pair(d, r, k, kinds):
    """Volumes created and staged as kinds ("fs" or "block"): [(id, staging path, flags)]."""
    out = []
    for i, kind in enumerate(kinds):
        vid = "sv-%d" % i + "d" * 31
        assert r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=64 * MiB)).type == \
            T.ANS_CREATE
        if kind == "block":
            st, flags, fs = d.kubelet.block_staging("g-%d" % i), mh_wire.F_BLOCK, ""
        else:
            st, flags, fs = d.kubelet.staging("g-%d" % i), 0, "ext4"
        assert r.call(Msg(T.REQ_STAGE, volume_id=vid, staging_path=st, fs_type=fs,
                          flags=flags)).type == T.ANS_STAGE
        out.append((vid, st, flags))
    return out


def undo(r, vols, sids):
    for s in sids:
        r.call(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=s))
    for vid, st, flags in vols:
        assert r.call(Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=st,
                          flags=flags)).type == T.ANS_UNSTAGE
        assert r.call(Msg(T.REQ_DELETE, volume_id=vid)).type == T.ANS_DELETE


def test_raw_block_member_refused_without_core(nocore):
    """Without a core the helper itself sees that a raw block member in use cannot be
    frozen: PRECONDITION, no snapshot left."""
    d, r = nocore.driver, nocore.rpcd
    assert "core_started" not in d.logs()
    vols = staged_pair(d, r, d.kubelet, ["fs", "block"])
    sids = ["ss-%d" % i + "d" * 31 for i in range(2)]
    a = r.call(group_msg([(v[0], s) for v, s in zip(vols, sids)]), timeout=60)
    assert a.type == T.ANS_ERROR and a.kind == E.PRECONDITION and "raw block" in a.reason, a
    assert os.listdir(os.path.join(d.data, "snapshots")) == []
    undo(r, vols, sids)


@pytest.mark.parametrize("slow_thaw", [1, 2])
def test_group_freeze_bounded_until_last_thaw(nocore, slow_thaw):
    """A worker held for 6 s (strace) before its first or its second FITHAW, longer
    than the policy's bound of 2 s: the main loop still enforces the bound (the worker
    killed, every member thawed, the group refused), since the bound ends only when
    every member is thawed."""
    d, r = nocore.driver, nocore.rpcd
    vols = staged_pair(d, r, d.kubelet, ["fs", "fs"])
    sids = ["ss-%d" % i + "d" * 31 for i in range(2)]
    first, second = vols[0][0], vols[1][1]
    d.hold("copy@" + first)
    r.send(group_msg([(v[0], s) for v, s in zip(vols, sids)]))
    worker = d.paused("copy@" + first)  # every member frozen, none copied
    tracer = subprocess.Popen(["strace", "-p", str(worker), "-o", "/dev/null", "-e",
                               "trace=ioctl", "-e",
                               "inject=ioctl:delay_enter=6000000:when=%d" % slow_thaw],
                              stderr=subprocess.PIPE)
    tracer.stderr.readline()  # attached
    writer = subprocess.Popen(["sh", "-c", "echo x > '%s/w' && sync -f '%s/w'"
                               % (second, second)])
    d.release("copy@" + first)
    try:
        writer.wait(60)  # thawed, at the latest once the delayed thaw is done
        a = r.recv(timeout=60)
    finally:
        tracer.terminate()
        tracer.wait()
    # Had the first thaw ended the bound, the worker would have lived to publish the group.
    assert "freeze_overdue" in d.logs(), "the bound was not enforced"
    assert a.type == T.ANS_ERROR and "freeze_max_seconds" in a.reason, a
    for s in sids:
        assert not os.path.exists(os.path.join(d.data, "snapshots", s + ".img"))
    undo(r, vols, sids)


def test_audit_names_every_member(nocore):
    """The audit file (the helper's own, which rpcd can neither forge nor suppress)
    names every member of a group, not only the first."""
    d, r = nocore.driver, nocore.rpcd
    vids = ["sv-%d" % i + "e" * 31 for i in range(3)]
    sids = ["ss-%d" % i + "e" * 31 for i in range(3)]
    for v in vids:
        assert r.call(Msg(T.REQ_CREATE, volume_id=v, size_bytes=32 * MiB)).type == \
            T.ANS_CREATE
    assert r.call(group_msg(list(zip(vids, sids))), timeout=60).type == T.ANS_GROUP_SNAPSHOT
    with open(os.path.join(d.data, "audit.log")) as f:
        lines = [ln for ln in f if "GROUP_SNAPSHOT" in ln]
    for v, s in zip(vids, sids):
        assert any(v in ln and s in ln for ln in lines), (v, lines)
    for s in sids:
        r.call(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=s))
    for v in vids:
        assert r.call(Msg(T.REQ_DELETE, volume_id=v)).type == T.ANS_DELETE
