"""Review of the latest privileged changes to sepcsi-core (and the helper, which runs
the same handlers): attacks by a hostile orchestrator (the core's peer on fd 3),
together with a tenant whose FUSE daemon stops answering.

Each test asserts what must hold; a failing test is a weakness found (see the
docstring of each for the reproduction and the code path).
"""
import errno
import os
import random
import select
import signal
import socket
import subprocess
import time

import pytest

import mh_wire
from conftest import BIN  # noqa: F401  (the build the fixtures use)
from mh_wire import F_BLOCK, F_CREATE_DIR, E, Msg, T, encode
from stallfuse import StallFuse
from test_core import (VOL, core, freeze, fresh, held, loops_of, publish, stage,  # noqa: F401
                       stats, unstage, writer)

HANG = 10  # seconds the core is given to answer before it is called hung


def _stalled_fuse(c, rel):
    """A tenant's FUSE file system mounted (by root, for the tenant, as kubelet mounts a
    pod's volume) at <root>/rel, a root-owned directory, its daemon no longer answering
    GETATTR."""
    mp = c.path("root", rel)
    os.makedirs(mp, mode=0o750, exist_ok=True)
    fs = StallFuse(mp)
    fs.stall()
    return fs


def _answered(c, msg):
    """The core answers msg within HANG seconds and still serves afterwards."""
    ans = c.call(msg, timeout=HANG)
    c.alive()
    return ans


# ---- 1. a stalled FUSE mount still holds the single-threaded core ----------------------

def test_block_unstage_with_a_fuse_mount_at_dev_does_not_hang(core):
    """UNSTAGE F_BLOCK of a staging whose "dev" is a FUSE mount of a tenant's.
    look() (mh_block.c) refuses "dev" through mh_at_child's check, but its answer is
    thrown away as "a file that is not ours" (m.mounted is false: the memset m was
    never filled), and mh_at_remove_ours (mh_at.c) then opens "dev" O_PATH and
    fstat()s it with no mh_mount_check_local: a GETATTR to the FUSE daemon, which
    never answers. The core hangs, every other request waits."""
    core.image(VOL, fs=None)
    st = core.dir("blk/v1")
    fs = _stalled_fuse(core, "blk/v1/dev")
    try:
        _answered(core, unstage(VOL, st, flags=F_BLOCK))
    finally:
        fs.close()


def test_block_stats_on_a_fuse_mount_does_not_hang(core):
    """STATS F_BLOCK of a path that is a FUSE mount: mh_answer_stats (mh_stats.c) first
    fstatat()s the path's last component (is it a block staging directory?) with no
    mh_mount_check_local: the lookup crosses into the FUSE root and asks the daemon
    for its attributes (GETATTR). The same request without F_BLOCK is answered (the
    existing test covers only that one)."""
    core.image(VOL, fs=None)
    fs = _stalled_fuse(core, "pods/p1/volumes/fusepv/mount")
    try:
        _answered(core, stats(VOL, core.path("root/pods/p1/volumes/fusepv/mount"),
                              flags=F_BLOCK))
    finally:
        fs.close()


def test_publish_onto_a_fuse_mount_does_not_hang(core):
    """PUBLISH (file system) whose target path is a FUSE mount: mh_mount_point
    (mh_ops.c) calls mh_at_make, whose first step is fstatat(parent, name) with no
    mh_mount_check_local, before mh_at_child would have refused the FUSE mount."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    fs = _stalled_fuse(core, "pods/p1/volumes/fusepv/mount")
    try:
        _answered(core, publish(VOL, st, core.path("root/pods/p1/volumes/fusepv/mount")))
    finally:
        fs.close()
    core.ok(unstage(VOL, st))


@pytest.mark.parametrize("block", [False, True], ids=["fs", "block"])
def test_ephemeral_stage_onto_a_fuse_mount_does_not_hang(core, block):
    """STAGE with F_CREATE_DIR (an ephemeral volume, staged at a target path the core
    makes) where the path is a FUSE mount: mh_at_make's fstatat, unchecked, again
    (mh_mount_point for a file system, mh_block_stage for raw block)."""
    core.image(VOL, fs=None if block else "ext4")
    fs = _stalled_fuse(core, "pods/p1/volumes/fusepv/mount")
    path = core.path("root/pods/p1/volumes/fusepv/mount")
    try:
        _answered(core, stage(VOL, path, fs="" if block else "ext4",
                              flags=F_CREATE_DIR | (F_BLOCK if block else 0)))
    finally:
        fs.close()


# ---- 3. a freeze past its deadline --------------------------------------------------------

def _stop_reading(sock):
    """The peer sends PINGs and never reads an answer, until the core no longer reads
    either (it is blocked sending an answer into the peer's full queue). Returns how
    many were sent."""
    sock.setblocking(False)
    sent = 0
    ping = encode(Msg(T.REQ_PING, 1))
    while True:
        try:
            sock.send(ping)
            sent += 1
            continue
        except BlockingIOError:
            pass
        # Full for now: once the core stops reading, it stays full.
        _, w, _ = select.select([], [sock], [], 2)
        if not w:
            return sent
        assert sent < 100000


def test_a_peer_that_stops_reading_does_not_keep_a_volume_frozen(core):
    """FREEZE for 1 s, then a flood of PINGs whose answers the peer never reads: the
    core blocks in send() (fd 3 is a blocking socket; MSG_NOSIGNAL but not
    MSG_DONTWAIT) once the peer's receive queue is full, and its loop never reaches
    core_freeze_expire: the volume stays frozen as long as the peer likes (and
    SIGTERM, blocked outside ppoll, cannot end it either). The deadline the core
    promises to keep "without trusting the orchestrator to ever come back" is kept
    only while the orchestrator reads."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    core.ok(freeze(VOL, 1))
    w = None
    try:
        _stop_reading(core.sock)
        w = writer(os.path.join(st, "f"))
        try:
            rc = w.wait(15)  # deadline 1 s: thawed by the core long before this
        except subprocess.TimeoutExpired:
            rc = None
        assert rc == 0, "the volume stayed frozen past its 1 s deadline: the core is " \
                        "blocked sending to a peer that does not read"
    finally:
        # Let the core go: read what it sent, then end the channel (it thaws at exit).
        core.sock.setblocking(False)
        try:
            while True:
                core.sock.recv(mh_wire.MSG_MAX + 1)
        except (BlockingIOError, OSError):
            pass
        core.sock.close()
        core.sock = None
        try:
            core.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(core.proc.pid, signal.SIGKILL)
            core.proc.wait(10)
        subprocess.run(["fsfreeze", "-u", st], stderr=subprocess.DEVNULL, check=False)
        if w is not None:
            try:
                w.wait(20)
            except subprocess.TimeoutExpired:
                w.kill()


def test_freeze_seconds_edges(core):
    """FREEZE's seconds at and beyond their bounds (u32): 0 and more than the row's
    limit are refused and freeze nothing; 64 freezes of volumes that are not staged
    take no slot."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    for s in (0, 3601, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF):
        assert core.call(freeze(VOL, s)).kind == E.REFUSED
        assert writer(os.path.join(st, "f%d" % s)).wait(30) == 0
    for i in range(70):
        vid = "sv-%032x" % (0x100 + i)
        ans = core.call(freeze(vid, 60))
        assert ans.type == T.ANS_ERROR and ans.kind in (E.NOTFOUND, E.PRECONDITION), ans
    core.ok(freeze(VOL, 1))  # a slot is still free
    core.ok(Msg(T.REQ_THAW, volume_id=VOL))
    core.ok(unstage(VOL, st))


# ---- 5. the compiled policy --------------------------------------------------------------

def _run_policy(fresh, fd):
    """The core started on the policy at fd: its exit status, 0 once it served (it
    answered PING and then saw the channel end)."""
    fresh.spawn(fd)
    deadline = time.monotonic() + 20
    rc = None
    while rc is None and time.monotonic() < deadline:
        rc = fresh.proc.poll()
        if rc is None and "ready" in fresh.logs():
            fresh.alive()
            break
        time.sleep(0.02)
    fresh.sock.close()
    try:
        rc = fresh.proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(fresh.proc.pid, signal.SIGKILL)
        fresh.proc.wait(10)
        raise AssertionError("the core neither started nor ended")
    finally:
        fresh.log.close()
    return rc


def test_compiled_policy_fuzz_never_crashes(fresh):
    """Truncations, bit flips, byte changes and splices of a compiled policy: the core
    exits 2 (or starts cleanly, serves, and exits 0 at the end of the channel), never
    by a signal, and never another status."""
    good = fresh.compiled()
    whole = os.read(good, 1 << 16)
    os.close(good)
    rnd = random.Random(1234)
    cases = [whole[:i] for i in range(0, len(whole), max(1, len(whole) // 40))]
    for _ in range(60):
        b = bytearray(whole)
        for _ in range(rnd.randint(1, 4)):
            i = rnd.randrange(len(b))
            b[i] = rnd.choice([0, 0xFF, 0x7F, 0x80, b[i] ^ (1 << rnd.randrange(8)),
                               rnd.randrange(256)])
        cases.append(bytes(b))
    magic = b"SEPCSIPOL1\n"
    cases += [magic, magic + b"\xff" * 9, magic + b"\x00" * 9 + b"\x00" * 25,
              magic + b"\xff\xff\xff" + b"A" * 70000, whole * 2, b"\0" * 70000]
    fresh.proc = None
    for data in cases:
        p = fresh.path("fuzz.bin")  # a file, not a pipe: any size
        with open(p, "wb") as f:
            f.write(data)
        rc = _run_policy(fresh, os.open(p, os.O_RDONLY))
        assert rc in (0, 2), (rc, data[:80])
    fresh.proc = None
