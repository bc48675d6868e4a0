"""A compromised rpcd breaks the helper protocol: through the real supervisor
and helper, with the hostile stand-in rpcd (hostile.py) in rpcd's place.

rpcd is the suspect, never the helper: for every kind of malformed datagram
the helper logs protocol_violation, reports it to the supervisor and keeps
its pid; the supervisor kills rpcd and starts another, and the helper serves
the new one on a fresh channel. Five violations in a row spend rpcd's restart
limit, not the helper's: the helper is never restarted and never FAILED, and
the supervisor ends as docs/supervisor.md says it does when rpcd is FAILED.
The first test checks the harness itself against the real helper: every
request type mh_wire encodes is understood, every answer decodes strictly.
"""
import os
import re
import time

import pytest

import mh_wire
from hostile import RPCD, HostileDriver
from mh_wire import F_BLOCK, SRC_SNAPSHOT, SRC_VOLUME, E, Msg, T

MiB = 1 << 20
VOL = "sv-" + "0" * 31 + "1"
CLONE = "sv-" + "0" * 31 + "2"
SNAP = "ss-" + "0" * 31 + "1"

# What the helper logs for each kind (its protocol_violation line's what=).
WHAT = {
    "empty": "empty datagram",
    "oversized": "oversized datagram",
    "answer as request": "not a request this helper serves",
    "error answer as request": "not a request this helper serves",
    "the helper's own request": "not a request this helper serves",
}


def count(logs, event, role):
    return len(re.findall(r"\b%s role=%s\b" % (event, role), logs))


def assert_helper_untouched(hd, helper):
    """The helper still runs with the pid it started with, and was never restarted."""
    assert hd.helper_pid() == helper
    logs = hd.logs()
    assert count(logs, "child_spawned", "mounthelper") == 1
    assert count(logs, "child_exited", "mounthelper") == 0
    assert "give_up role=mounthelper" not in logs


def test_every_request_type_is_understood(hostile_driver):
    """As rpcd would: each request type, encoded by mh_wire, gets its own answer
    type (or ANS_ERROR where refused), and each answer decodes strictly: the
    harness and the helper agree on every field of every message."""
    hd = hostile_driver
    r = hd.rpcd
    helper = hd.helper_pid()
    root = hd.driver.root
    staging = os.path.join(root, "staging", "blk")
    target = os.path.join(root, "pods", "p1", "blk")
    os.makedirs(staging)
    os.makedirs(os.path.dirname(target))
    seen = set()

    def ok(msg, **want):
        ans = r.call(msg)
        seen.add(ans.type)
        assert ans.type == mh_wire.answer_type(msg.type), ans
        for k, v in want.items():
            assert getattr(ans, k) == v, ans
        return ans

    def refused(msg, kind):
        ans = r.call(msg)
        seen.add(ans.type)
        assert ans.type == T.ANS_ERROR and ans.kind == kind and ans.reason, ans
        return ans

    ok(Msg(T.REQ_PING))
    cap = ok(Msg(T.REQ_CAPACITY))
    assert 0 < cap.available_bytes <= cap.total_bytes
    refused(Msg(T.REQ_CREATE, volume_id="../etc", size_bytes=32 * MiB), E.REFUSED)
    ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=32 * MiB), size_bytes=32 * MiB)
    ok(Msg(T.REQ_RESIZE, volume_id=VOL, size_bytes=48 * MiB), size_bytes=48 * MiB)
    snap = ok(Msg(T.REQ_SNAPSHOT, snapshot_id=SNAP, volume_id=VOL), size_bytes=48 * MiB)
    assert snap.reflinked in (0, 1)
    ok(Msg(T.REQ_CLONE, volume_id=CLONE, source_kind=SRC_SNAPSHOT, source_id=SNAP,
           size_bytes=64 * MiB), size_bytes=64 * MiB)
    ok(Msg(T.REQ_DELETE, volume_id=CLONE))
    ok(Msg(T.REQ_CLONE, volume_id=CLONE, source_kind=SRC_VOLUME, source_id=VOL,
           size_bytes=48 * MiB), size_bytes=48 * MiB)
    ok(Msg(T.REQ_DELETE, volume_id=CLONE))
    ok(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=SNAP))
    ok(Msg(T.REQ_CREATE, volume_id=CLONE, size_bytes=32 * MiB), size_bytes=32 * MiB)
    group = ok(Msg(T.REQ_GROUP_SNAPSHOT, n=2, volume_id_0=VOL, snapshot_id_0=SNAP,
                   volume_id_1=CLONE, snapshot_id_1=SNAP[:-1] + "0"),
               size_bytes_0=48 * MiB, size_bytes_1=32 * MiB)
    assert group.reflinked in (0, 1)
    # Nothing written: no range, and the page is the last one.
    ok(Msg(T.REQ_BLOCKS, what=mh_wire.BLOCKS_ALLOCATED, snapshot_id=SNAP, offset=0),
       size_bytes=48 * MiB, next=48 * MiB, ranges=())
    ok(Msg(T.REQ_BLOCKS, what=mh_wire.BLOCKS_DELTA, snapshot_id=SNAP, base_id=SNAP, offset=0),
       size_bytes=48 * MiB, next=48 * MiB, ranges=())
    refused(Msg(T.REQ_BLOCKS, what=mh_wire.BLOCKS_ALLOCATED, snapshot_id=SNAP,
                offset=48 * MiB + 1), E.REFUSED)
    ok(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=SNAP))
    ok(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=SNAP[:-1] + "0"))
    ok(Msg(T.REQ_DELETE, volume_id=CLONE))

    # Raw block: no mkfs, every path and flag field on the wire.
    ok(Msg(T.REQ_STAGE, volume_id=VOL, staging_path=staging, flags=F_BLOCK))
    ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=staging, target_path=target,
           flags=F_BLOCK))
    stats = ok(Msg(T.REQ_STATS, volume_id=VOL, path=target, flags=F_BLOCK),
               bytes_total=48 * MiB, abnormal=0)
    assert stats.message == ""
    ok(Msg(T.REQ_RESIZE, volume_id=VOL, size_bytes=64 * MiB), size_bytes=64 * MiB)
    ok(Msg(T.REQ_EXPAND, volume_id=VOL, staging_path=staging, flags=F_BLOCK),
       size_bytes=64 * MiB)
    mounts = ok(Msg(T.REQ_LIST, what=mh_wire.LIST_MOUNTS, after=""), more=0)
    assert sorted(line.split(" ", 3)[1:] for line in mounts.text.splitlines()) == [
        ["b", VOL, target], ["b", VOL, os.path.join(staging, "dev")]]
    images = ok(Msg(T.REQ_LIST, what=mh_wire.LIST_IMAGES, after=""), more=0)
    assert images.text == "%s %d\n" % (VOL, 64 * MiB)
    refused(Msg(T.REQ_LIST, what=mh_wire.LIST_MOUNTS, after="x"), E.REFUSED)
    refused(Msg(T.REQ_UNSTAGE, volume_id=VOL, staging_path=staging, flags=F_BLOCK), E.BUSY)
    ok(Msg(T.REQ_UNPUBLISH, volume_id=VOL, target_path=target))
    ok(Msg(T.REQ_UNSTAGE, volume_id=VOL, staging_path=staging, flags=F_BLOCK))
    ok(Msg(T.REQ_DELETE, volume_id=VOL))

    # The directory-volume answers need a base directory: test_dir_helper.py.
    assert seen == {a for a in mh_wire.ANSWERS if not a.name.startswith("ANS_DIR_")}
    assert "protocol_violation" not in hd.logs()
    assert_helper_untouched(hd, helper)
    assert hd.children()[RPCD] == r.pid


@pytest.mark.parametrize("kind", sorted(mh_wire.VIOLATIONS))
def test_violation_restarts_rpcd_not_helper(hostile_driver, kind):
    """One malformed datagram from rpcd: the helper keeps its pid and reports;
    the supervisor kills rpcd (a death counted against rpcd) and starts
    another, which gets a fresh channel the helper answers on."""
    hd = hostile_driver
    r = hd.rpcd
    assert r.ping()
    helper, old = hd.helper_pid(), r.pid
    r.send_raw(mh_wire.VIOLATIONS[kind])
    new = hd.wait_new_rpcd(old)
    assert new.ping()
    assert new.status()["channel"] == 1  # its own fd 3, not a PEER_FD
    assert_helper_untouched(hd, helper)
    logs = hd.logs()
    what = re.findall(r"error mounthelper: protocol_violation what=\"([^\"]*)\"", logs)
    print("%s: the helper logged %s" % (kind, what))
    assert what == [WHAT.get(kind, "undecodable message")]
    assert "peer_violation role=rpcd pid=%d " % old in logs
    assert re.search(r"child_kill role=rpcd pid=%d reason=\"its peer reported" % old, logs)
    assert re.search(r"child_exited role=rpcd pid=%d how=\"signal SIGKILL\"" % old, logs)
    assert re.search(r"child_restart role=rpcd in_ms=-?\d+ deaths_in_window=1 ", logs)


def test_five_violations_spend_rpcds_limit_not_the_helpers():
    """Five violations in a row (each from a fresh rpcd): four times rpcd is
    restarted and the same helper serves the next one; the fifth death puts
    rpcd in FAILED, so the supervisor stops and exits 3 (docs/supervisor.md).
    The helper is never restarted, never FAILED, and stops cleanly with it."""
    hd = HostileDriver()
    kinds = ["empty", "undecodable", "oversized", "unknown type", "answer as request"]
    try:
        helper = hd.helper_pid()
        for i, kind in enumerate(kinds):
            r = hd.rpcd
            assert r.ping()
            old = r.pid
            r.send_raw(mh_wire.VIOLATIONS[kind])
            if i < len(kinds) - 1:
                hd.wait_new_rpcd(old)
                assert hd.helper_pid() == helper
        status = hd.driver.proc.wait(30)
    finally:
        hd.stop()
        logs = hd.logs()
        hd.cleanup()
    print("supervisor exit status %s after %d violations" % (status, len(kinds)))
    assert status == 3
    assert count(logs, "peer_violation", "rpcd") == 5
    assert count(logs, "child_spawned", "rpcd") == 5
    assert count(logs, "child_spawned", "mounthelper") == 1
    assert "give_up role=mounthelper" not in logs
    assert 'give_up role=rpcd reason="5 deaths in 60 s (limit 5)"' in logs
    # The helper's only exit is the orderly stop after rpcd was given up on.
    assert re.findall(r"child_exited role=mounthelper pid=(\d+) how=\"([^\"]*)\"", logs) == [
        (str(helper), "exit 0")]
    assert logs.index("child_stop role=mounthelper") < logs.index("child_exited role=mounthelper")
    assert 'supervisor_exit status=3 reason="rpcd failed" failed=rpcd' in logs


def test_peer_violation_from_rpcd_is_a_bad_control_message(hostile_driver):
    """PEER_VIOLATION is the helper's word only: rpcd sending it on its control
    channel gets rpcd killed (as for any other message but READY), and the
    helper is left alone."""
    hd = hostile_driver
    r = hd.rpcd
    helper, old = hd.helper_pid(), r.pid
    r.send_control(bytes([4]))  # SUP_CTL_PEER_VIOLATION
    new = hd.wait_new_rpcd(old)
    assert new.ping()
    assert_helper_untouched(hd, helper)
    logs = hd.logs()
    assert re.search(r"child_kill role=rpcd pid=%d reason=\"control message other than READY\""
                     % old, logs)
    assert "peer_violation" not in logs
    assert "protocol_violation" not in logs


def test_violation_with_a_worker_in_flight():
    """A clone held in its worker when rpcd breaks the protocol: the helper
    reports and takes the next rpcd's channel while the worker runs on; once
    released the clone completes (its answer goes to the dead rpcd's channel,
    none to the new one), and the new rpcd can delete both volumes."""
    hd = HostileDriver(env={"SEPCSI_TEST_PAUSE": "1"})
    try:
        r = hd.rpcd
        helper = hd.helper_pid()
        assert r.call(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=32 * MiB)).type == T.ANS_CREATE
        hd.driver.hold("copy@" + VOL)
        r.send(Msg(T.REQ_CLONE, volume_id=CLONE, source_kind=SRC_VOLUME, source_id=VOL,
                   size_bytes=32 * MiB))
        worker = hd.driver.paused("copy@" + VOL)
        old = r.pid
        r.send_raw(mh_wire.VIOLATIONS["empty"])
        new = hd.wait_new_rpcd(old)
        assert new.ping()
        assert os.path.exists("/proc/%d" % worker)  # still held, still running
        hd.driver.release("copy@" + VOL)
        # The clone is done when its id is free again: then a DELETE is not BUSY.
        while True:
            ans = new.call(Msg(T.REQ_DELETE, volume_id=CLONE))
            if ans.type == T.ANS_DELETE:
                break
            assert ans.type == T.ANS_ERROR and ans.kind == E.BUSY, ans
            time.sleep(0.01)
        assert "audit req=2 op=CLONE volume_id=%s" % CLONE in hd.logs()
        assert re.search(r"audit req=2 op=CLONE .* result=ok", hd.logs())
        assert new.call(Msg(T.REQ_DELETE, volume_id=VOL)).type == T.ANS_DELETE
        assert new.unclaimed == []  # no answer meant for the old rpcd came here
        assert_helper_untouched(hd, helper)
        assert "worker_died" not in hd.logs()
    finally:
        hd.stop()
        hd.cleanup()
