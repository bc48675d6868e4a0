"""Review of the latest privileged changes to sepcsi-core (and the helper, which runs
the same handlers): attacks by a hostile orchestrator (the core's peer on fd 3),
together with a tenant whose FUSE daemon stops answering.

Each test asserts what must hold. The FUSE tests were weaknesses when found: a stalled
FUSE mount reached by a stat before the look at its file system's type, or hidden
beneath an overlay; the docstring of each says the code path it took. Every name in
kubelet's tree is now looked at through mh_at_look (mh_at.c): opened O_PATH, its mount's
type read without a call into it, and only then stat'ed; a stacked file system mounted
beneath the allowed root is refused. They held the helper's requests the same way.
"""
import errno
import os
import random
import select
import signal
import socket
import struct
import subprocess
import time

import pytest

import mh_wire
from conftest import BIN, with_fds  # noqa: F401  (the build the fixtures use)
from mh_wire import F_BLOCK, F_CREATE_DIR, E, Msg, T, encode
from stallfuse import StallFuse
from test_core import (CONFINED, OWNER, VOL, VOL2, MiB, attached, core, expand, refresh, freeze,  # noqa: F401
                       fresh, held, publish, stage, stats, unpublish, unstage, writer)

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


# ---- 1. a stalled FUSE mount never holds the single-threaded core ------------------------

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


def test_a_raw_bind_hidden_by_a_stalled_fuse_mount_holds_nothing_up(fresh):
    """A raw block volume staged (F_CREATE_DIR) at a path where a tenant's FUSE volume
    is mounted later, over the staging directory, its daemon then stalled: the bind of
    the loop device is hidden beneath it. Every look at every mount (UNSTAGE of any
    volume asks whether a loop device is still used; the start-up sweep) reaches that
    bind's mount point one checked component at a time (mh_open_local), never through
    the FUSE mount: before, the walk of its path string asked the daemon, and the core
    hung, and hung again at every start. A bind it cannot see is counted as a user."""
    fresh.image(VOL, fs=None)
    fresh.image(VOL2)
    core = fresh.start()
    path = os.path.join(core.dir("pods/p1/volumes/kubernetes.io~csi/fv"), "mount")
    core.ok(stage(VOL, path, fs="", flags=F_BLOCK | F_CREATE_DIR))
    fs = StallFuse(path)
    fs.stall(lookups=True)  # the walk to <path>/dev would ask it for "dev"
    try:
        st2 = core.dir("staging/v2")
        core.ok(stage(VOL2, st2))
        _answered(core, unstage(VOL2, st2))
        os.killpg(core.proc.pid, signal.SIGKILL)
        core.proc.wait(10)
        core.sock.close()
        core.log.close()
        core.start()  # its sweep looks at every mount before it is ready
        assert len(mh_wire_loops(core.img(VOL))) == 1  # hidden, still attached
    finally:
        fs.close()
    core.ok(unstage(VOL, path, flags=F_BLOCK))


def mh_wire_loops(img):
    out = subprocess.run(["losetup", "-n", "-O", "NAME", "-j", img], capture_output=True,
                         text=True, check=True).stdout
    return out.split()


def test_expand_of_a_frozen_volume_thaws_it_first(core):
    """EXPAND of a volume the core froze: the grow ioctl waits for the thaw, and the
    core's only thread is the one that would thaw it. The core thaws what it froze of
    the volume first, as UNSTAGE does, and the file system grows."""
    core.image(VOL, fs="xfs", size=320 * MiB)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st, fs="xfs"))
    core.ok(freeze(VOL, 60))
    os.truncate(core.img(VOL), 640 * MiB)
    ans = _answered(core, expand(VOL, st))
    assert ans.type == T.ANS_EXPAND, ans
    assert os.statvfs(st).f_blocks * os.statvfs(st).f_frsize > 400 * MiB
    w = writer(os.path.join(st, "f"))
    assert w.wait(30) == 0
    core.ok(unstage(VOL, st))


# ---- 3. a freeze past its deadline --------------------------------------------------------

def _stop_reading(sock):
    """The peer sends PINGs and never reads an answer, until the core no longer reads
    them: blocked sending an answer into the peer's full queue, or gone (a core that
    never blocks ends the channel instead). Returns how many were sent."""
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
        except OSError:  # the core has ended the channel
            return sent
        # Full for now: once the core stops reading, it stays full.
        _, w, _ = select.select([], [sock], [], 2)
        if not w:
            return sent
        assert sent < 100000


def test_a_peer_that_stops_reading_does_not_keep_a_volume_frozen(core):
    """FREEZE for 1 s, then a flood of PINGs whose answers the peer never reads: the
    freeze still ends at its deadline. The core's answers never wait (MSG_DONTWAIT):
    an answer the peer's full queue cannot take ends the channel, and the core thaws
    what it froze as it ends. (A blocking send held the loop, and the freeze, for as
    long as the peer liked.)"""
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
            while core.sock.recv(mh_wire.MSG_MAX + 1):
                pass
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
        with open(fresh.path("core.log"), "rb") as f:
            log = f.read()
        if rc is None and b"ready" in log:
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
    magic = b"SEPCSIPOL3\n"
    cases += [magic, magic + b"\xff" * 9, magic + b"\x00" * 9 + b"\x00" * 25,
              magic + b"\xff\xff\xff" + b"A" * 70000, whole * 2, b"\0" * 70000]
    fresh.proc = None
    # A mutated allowed root the core accepts is made by it (mkdir -p, mh_view.c):
    # new empty directories beside the tree, removed at the end.
    tops = ("/", "/tmp")
    before = {t: set(os.listdir(t)) for t in tops}
    try:
        for data in cases:
            p = fresh.path("fuzz.bin")  # a file, not a pipe: any size
            with open(p, "wb") as f:
                f.write(data)
            rc = _run_policy(fresh, os.open(p, os.O_RDONLY))
            assert rc in (0, 2), (rc, data[:80])
    finally:
        for t in tops:
            for n in set(os.listdir(t)) - before[t]:
                subprocess.run(["find", os.path.join(t, n), "-xdev", "-depth", "-type", "d",
                                "-empty", "-delete"], stderr=subprocess.DEVNULL, check=False)
    fresh.proc = None


def test_an_overlay_on_a_stalled_fuse_lower_does_not_hang(core):
    """A file system whose type is not on the list but whose answers still come from a
    FUSE daemon: an overlay with a tenant's FUSE mount as its lower layer (as a lazy-
    pulling snapshotter stacks a container's root). mh_mount_check_local reads the type
    "overlay", finds it local, and mh_at_check_dir's fstat() then asks overlayfs, which
    asks the lower FUSE file system (GETATTR): the type list is no proof that a mount
    answers for itself."""
    core.image(VOL)
    lower = core.path("outside/lower")
    os.makedirs(lower)
    other = core.path("outside/other")
    os.makedirs(other)
    fs = StallFuse(lower)  # answering while the overlay is mounted, stalled after
    ov = core.path("root/pods/p1/ov")
    os.makedirs(ov, mode=0o750)
    try:
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        "lowerdir=%s:%s" % (lower, other), ov],
                       check=True, timeout=HANG)
        fs.stall()
        _answered(core, stats(VOL, os.path.join(ov, "sub")))
    finally:
        fs.close()


def _overlay(c, where):
    """An overlay of local layers (made in outside/) mounted at where."""
    layers = [c.path("outside", n) for n in ("lower", "upper", "work")]
    for d in layers:
        os.makedirs(d, exist_ok=True)
    os.makedirs(where, mode=0o750, exist_ok=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    "lowerdir=%s,upperdir=%s,workdir=%s" % tuple(layers), where],
                   check=True, timeout=HANG)


def test_an_overlay_beneath_the_root_is_refused_even_when_it_answers(core):
    """A stacked file system mounted beneath the allowed root is never looked into,
    whatever its layers are now: they are not the mount's own type, and may be a
    tenant's. Refused with a reason that says so, nothing changed."""
    core.image(VOL)
    ov = core.path("root/pods/p1/ov")
    _overlay(core, ov)
    os.makedirs(os.path.join(ov, "sub"), mode=0o750)
    for msg in (stats(VOL, os.path.join(ov, "sub")),
                stage(VOL, os.path.join(ov, "sub"), flags=F_CREATE_DIR)):
        ans = core.harmless(msg, E.REFUSED)
        assert "overlay" in ans.reason, ans


def test_an_allowed_root_on_an_overlay_is_served(fresh):
    """A node whose kubelet directory lies on its container's overlay (the node's own,
    the mount that holds the allowed root): volumes are staged, published and
    unstaged there as anywhere."""
    _overlay(fresh, fresh.root)
    core = fresh.start()
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    tgt = core.dir("pods/p1/volumes/pv/mount")
    core.ok(publish(VOL, st, tgt))
    core.ok(stats(VOL, tgt))
    core.ok(unpublish(VOL, tgt))
    core.ok(unstage(VOL, st))


def _lists(blob):
    """A compiled policy split: its 9 lists and the fixed tail (compiled.c's format)."""
    p, out = len(b"SEPCSIPOL3\n"), []
    for _ in range(9):
        n, p = blob[p], p + 1
        items = []
        for _ in range(n):
            ln = struct.unpack_from(">H", blob, p)[0]
            items.append(blob[p + 2:p + 2 + ln])
            p += 2 + ln
        out.append(items)
    return out, blob[p:]


def _build(lists, tail):
    b = bytearray(b"SEPCSIPOL3\n")
    for items in lists:
        b.append(len(items))
        for it in items:
            b += struct.pack(">H", len(it)) + it
    return bytes(b + tail)


@pytest.mark.parametrize("what", ["fs type tmpfs", "mount option suid", "freeze_max 0",
                                  "staging pattern with ..", "base inside the root"])
def test_compiled_policy_the_compiler_would_refuse_is_no_start(fresh, what):
    """A record sepcsi-policy would never write (a file system type, a mount option, a
    pattern, a freeze limit or a base the policy file's parser refuses), changed after it
    was compiled, is no start: its hash covers the whole record (a freeze limit out of
    range is refused for itself too). What the compiler wrote is the policy; only root
    (the core's starter) hands the core its policy, so this is defence against a record
    damaged on the way, not a peer's attack."""
    good = fresh.compiled()
    whole = os.read(good, 1 << 16)
    os.close(good)
    lists, tail = _lists(whole)
    assert _build(lists, tail) == whole
    if what == "fs type tmpfs":
        lists[1] = lists[1] + [b"tmpfs"]
    elif what == "mount option suid":
        lists[2] = lists[2] + [b"suid"]
    elif what == "freeze_max 0":
        tail = tail[:20] + b"\0\0\0\0" + tail[24:]
    elif what == "staging pattern with ..":
        lists[4] = [b"../../**"]
    else:
        lists[3] = [(fresh.root + "/bases").encode()]
    p = fresh.path("bad.bin")
    with open(p, "wb") as f:
        f.write(_build(lists, tail))
    assert _run_policy(fresh, os.open(p, os.O_RDONLY)) == 2
    fresh.proc = None


# ---- the flusher: write-back out of the core's one thread -----------------------------

def _dirty(path, mib, name="data"):
    """mib MiB written at path/name and not synced; returns the first MiB."""
    chunk = os.urandom(MiB)
    with open(os.path.join(path, name), "wb") as f:
        for _ in range(mib):
            f.write(chunk)
    return chunk


def _flusher(c):
    """The core's flusher (sepcsi-reader --flusher, started beside it: Core.spawn)."""
    with open("/proc/%d/comm" % c.flusher.pid) as f:
        assert f.read().strip() == "sepcsi-flusher"
    return c.flusher.pid


def _flush_held(c):
    """With the core's flusher stopped (SIGSTOP: its write-back cannot end, however fast
    the disk), send FLUSH of VOL; the core answers a PING meanwhile and nothing for the
    FLUSH. Returns (the flusher's pid, still stopped; the FLUSH)."""
    pid = _flusher(c)
    os.kill(pid, signal.SIGSTOP)
    msg = Msg(T.REQ_FLUSH, volume_id=VOL)
    msg.id, c.next_id = c.next_id, c.next_id + 1
    c.sock.send(encode(msg))
    assert c.call(Msg(T.REQ_PING)).type == T.ANS_PING  # before the FLUSH's answer
    return pid, msg


def _resumed(c, pid, msg):
    """Let the flusher go on; msg's answer comes now."""
    os.kill(pid, signal.SIGCONT)
    c.sock.settimeout(60)
    ans = mh_wire.decode(c.sock.recv(1 << 16))
    assert ans.id == msg.id, (ans, msg)
    return ans


@pytest.mark.parametrize("what", ["UNSTAGE", "FREEZE"])
def test_a_write_back_holds_no_other_request(core, what):
    """FLUSH of a volume with data not yet written back, as the orchestrating side asks
    it before UNSTAGE or FREEZE: the write-back is its flusher's (the core's child), so
    while the flusher is held, the core answers other requests; FLUSH is answered once
    it is done, and the request after it does what it always did, the data kept."""
    core.image(VOL, size=256 * MiB)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    chunk = _dirty(st, 16)
    pid, fl = _flush_held(core)
    assert os.path.ismount(st)
    assert _resumed(core, pid, fl).type == T.ANS_FLUSH
    assert "reason=\"handed to the flusher\"" in core.logs()
    if what == "FREEZE":
        core.ok(freeze(VOL, 60))
        core.ok(Msg(T.REQ_THAW, volume_id=VOL))
    core.ok(unstage(VOL, st))
    core.ok(stage(VOL, st))
    with open(os.path.join(st, "data"), "rb") as f:
        assert f.read(MiB) == chunk
        assert os.fstat(f.fileno()).st_size == 16 * MiB
    core.ok(unstage(VOL, st))


def test_a_request_of_a_volume_being_written_back_runs_at_once(core):
    """While a FLUSH of a volume waits for its write-back, every other request runs in
    order, that volume's too: its STATS, PUBLISH and UNPUBLISH are answered at once (a
    peer that does not wait for its own FLUSH only loses the write-back's head start)."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    pid, fl = _flush_held(core)
    assert core.call(stats(VOL, st)).type == T.ANS_STATS
    tgt = core.dir("pods/p/mount")
    core.ok(publish(VOL, st, tgt))
    core.ok(unpublish(VOL, tgt))
    assert _resumed(core, pid, fl).type == T.ANS_FLUSH
    core.ok(unstage(VOL, st))
    assert not os.path.ismount(st)


def test_a_flush_hands_over_nothing_but_a_mounted_volume_of_its_own(core):
    """FLUSH of a volume not staged, of a raw block volume, of a frozen one, or of an id
    that is no volume's: answered at once, nothing handed to the flusher (a frozen file
    system's write-back would wait for its thaw, holding every FLUSH after it)."""
    core.image(VOL)
    core.image(VOL2, fs=None)
    notes = lambda: core.logs().count("nothing handed to the flusher")  # noqa: E731
    before = notes()
    core.ok(Msg(T.REQ_FLUSH, volume_id=VOL))  # not staged
    blk = core.dir("blk/v2")
    core.ok(stage(VOL2, blk, flags=F_BLOCK, fs=""))
    core.ok(Msg(T.REQ_FLUSH, volume_id=VOL2))  # raw block: no file system
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    core.ok(freeze(VOL, 60))
    core.ok(Msg(T.REQ_FLUSH, volume_id=VOL))  # frozen
    core.ok(Msg(T.REQ_THAW, volume_id=VOL))
    ans = core.call(Msg(T.REQ_FLUSH, volume_id="sv-" + "f" * 32))
    assert ans.type in (T.ANS_FLUSH, T.ANS_ERROR), ans
    assert notes() - before >= 3
    core.ok(unstage(VOL, st))
    core.ok(unstage(VOL2, blk, flags=F_BLOCK))


def test_the_flusher_holds_nothing_and_is_not_needed(core):
    """The flusher has no capability, its own filter, no_new_privs and no descriptor but
    its socket; killed, the core notices, answers FLUSH at once (the unmount after it
    writes back in the core's own thread) and serves on."""
    pid = _flusher(core)
    with open("/proc/%d/status" % pid) as f:
        status = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
    for k in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        assert int(status[k].strip(), 16) == 0, (k, status[k])
    assert status["Seccomp"].strip() == "2" and status["NoNewPrivs"].strip() == "1"
    assert os.listdir("/proc/%d/fd" % pid) == ["6"]
    os.kill(pid, signal.SIGKILL)
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    _dirty(st, 16)
    core.ok(Msg(T.REQ_FLUSH, volume_id=VOL))
    core.ok(unstage(VOL, st))
    core.alive()
    assert "flusher_lost" in core.logs()


def test_a_flusher_that_dies_mid_flush_leaves_its_flush_answered(core):
    """The flusher killed while it holds a FLUSH: the FLUSH is answered all the same (its
    write-back left to the request after it), and the core serves on."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    _dirty(st, 16)
    pid, fl = _flush_held(core)
    os.kill(pid, signal.SIGKILL)
    core.sock.settimeout(30)
    ans = mh_wire.decode(core.sock.recv(1 << 16))
    assert ans.id == fl.id and ans.type == T.ANS_FLUSH, ans
    # The core answers once the flusher's socket ends, which may come before the clone of
    # the file system it held is let go; once the flusher is reaped, nothing of it holds
    # the device (in the driver, the helper's wait after EALREADY covers that moment).
    core.flusher.wait(timeout=30)
    core.ok(unstage(VOL, st))
    core.alive()


def test_a_core_started_with_its_control_channel_keeps_its_own_descriptors(fresh):
    """Started as the supervisor starts it (fd 4 its control channel, READY sent there),
    the flusher's socket takes no descriptor of the core's: a volume with data to write
    back is staged, flushed through the flusher, unstaged and staged again."""
    fresh.spawn(fresh.compiled(), control=True)
    fresh.ctl.settimeout(20)
    assert fresh.ctl.recv(64)  # READY
    fresh.alive()
    fresh.image(VOL, size=256 * MiB)
    st = fresh.dir("staging/v1")
    fresh.ok(stage(VOL, st))
    _dirty(st, 32)
    fresh.ok(Msg(T.REQ_FLUSH, volume_id=VOL))
    fresh.ok(unstage(VOL, st))
    fresh.ok(stage(VOL, st))
    fresh.ok(unstage(VOL, st))
    fresh.ctl.close()
    assert "reason=\"handed to the flusher\"" in fresh.logs()


def test_no_freeze_while_a_flush_of_the_volume_is_held(core):
    """A FLUSH waiting for its write-back, then FREEZE of the same volume (a peer that did
    not wait): BUSY, nothing frozen. A write-back in flight holds the file system, so a
    freeze then would have its thaw at the deadline wait for it, and the core's one thread
    with it, for as long as the peer keeps the image's pages dirty (found by a review: a
    3 s freeze thawed after 5.35 s, PING unanswered meanwhile). Once FLUSH is answered the
    FREEZE is served; the volume then takes writes after its THAW."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    pid, fl = _flush_held(core)
    ans = core.call(freeze(VOL, 3))
    assert ans.type == T.ANS_ERROR and ans.kind == E.BUSY and "FLUSH" in ans.reason, ans
    assert "thawed" not in core.logs()
    core.ok(Msg(T.REQ_THAW, volume_id=VOL))  # nothing frozen: a THAW is harmless
    assert _resumed(core, pid, fl).type == T.ANS_FLUSH
    core.ok(freeze(VOL, 60))
    core.ok(Msg(T.REQ_THAW, volume_id=VOL))
    w = writer(os.path.join(st, "after"))
    assert w.wait(30) == 0
    core.ok(unstage(VOL, st))
    core.alive()


def test_flush_hands_its_peer_no_descriptor(core):
    """The write-back stays on the core's side: FLUSH's answer carries no descriptor. A
    review of a version that handed the peer a read-only detached mount of the volume's
    file system (to syncfs in its own worker) showed why: every mount of a live superblock
    sees what a pod unlocked, so the peer, which owns only the image (ciphertext for a
    pod's fscrypt directory), read that directory in plaintext; a kept descriptor also
    pinned the file system past its UNSTAGE."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    _dirty(st, 4)
    msg = Msg(T.REQ_FLUSH, volume_id=VOL)
    msg.id, core.next_id = core.next_id, core.next_id + 1
    core.sock.send(encode(msg))
    core.sock.settimeout(HANG)
    data, fds, _, _ = socket.recv_fds(core.sock, mh_wire.MSG_MAX + 1, 4)
    for fd in fds:
        os.close(fd)
    ans = mh_wire.decode(data)
    assert ans.id == msg.id and ans.type == T.ANS_FLUSH and fds == [], (ans, fds)
    core.ok(unstage(VOL, st))


def test_an_image_with_a_second_name_is_refused(core):
    """A hard link in images/ (the owner can make one) would give one loop device and
    file system two volume ids, and every check keyed by id two answers: refused."""
    core.image(VOL)
    os.link(core.img(VOL), core.img(VOL2))
    st = core.dir("staging/v1")
    ans = core.harmless(stage(VOL, st), E.REFUSED)
    assert "hard link" in ans.reason, ans
    os.unlink(core.img(VOL2))
    core.ok(stage(VOL, st))
    core.ok(unstage(VOL, st))


# ---- REFRESH: an image grown by its owner, its devices told ---------------------------

def _size(dev):
    return int(subprocess.run(["blockdev", "--getsize64", dev], capture_output=True,
                              text=True, check=True).stdout)


def test_refresh_grows_only_the_cores_own_devices_and_never_shrinks(core):
    """The orchestrator grew a raw block volume's image (a controller's expansion while
    it is staged): REFRESH gives the core's own loop device of it the new size. Root's
    own loop device of the same image (not named by a volume id) keeps its size; an
    image made smaller than its device is refused with nothing changed (a device is
    never shrunk under what uses it); a volume with no device is answered its size."""
    img = core.image(VOL, fs=None)
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    dev = os.path.join(st, "dev")
    roots = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                           check=True).stdout.strip()
    try:
        os.truncate(img, 128 * MiB)
        assert core.ok(refresh(VOL)).size_bytes == 128 * MiB
        assert _size(dev) == 128 * MiB and _size(roots) == 64 * MiB
        os.truncate(img, 96 * MiB)
        ans = core.harmless(refresh(VOL), E.PRECONDITION)
        assert "never shrunk" in ans.reason, ans
        assert _size(dev) == 128 * MiB and _size(roots) == 64 * MiB
    finally:
        subprocess.run(["losetup", "-d", roots], check=False)
    core.image(VOL2, fs=None, size=32 * MiB)
    assert core.ok(refresh(VOL2)).size_bytes == 32 * MiB
    core.harmless(Msg(T.REQ_REFRESH, volume_id="sv-../../x"), E.REFUSED)
    core.ok(unstage(VOL, st, flags=F_BLOCK))


def test_expand_never_shrinks_a_device_either(core):
    """EXPAND gives a volume's devices its image's size the way REFRESH does: an image
    its owner made smaller than the device is refused, nothing changed (before, EXPAND
    shrank the device under the pod, and then asked the file system to fit it)."""
    img = core.image(VOL, fs=None)
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    os.truncate(img, 32 * MiB)
    ans = core.harmless(expand(VOL, st, flags=F_BLOCK), E.PRECONDITION)
    assert "never shrunk" in ans.reason, ans
    assert _size(os.path.join(st, "dev")) == 64 * MiB
    os.truncate(img, 64 * MiB)
    core.ok(unstage(VOL, st, flags=F_BLOCK))


@pytest.mark.parametrize("block", [False, True], ids=["fs", "block"])
def test_a_device_held_open_at_unstage_keeps_its_image_counted_until_it_is_gone(core, block):
    """A process outside the core holds the volume's loop device open at UNSTAGE (for raw
    block, a pod's process may pass its device on and outlive the pod). The core never waits
    for the detach in its one thread: it answers BUSY with EALREADY (the device goes when
    its holder closes it; the orchestrating side's worker waits) and serves; the retry finds
    nothing staged (OK: LOOP_CLR_FD left the device to clear itself; a raw block device is
    pinned again while held, so BUSY until the holder is gone), but ATTACHED still
    counts the device, so the orchestrating side neither formats nor deletes the image
    while anyone can reach it; once the holder closes it, the device is gone."""
    core.image(VOL, fs=None if block else "ext4")
    st = core.dir("blk/v1" if block else "staging/v1")
    flags = F_BLOCK if block else 0
    core.ok(stage(VOL, st, fs="" if block else "ext4", flags=flags))
    devs = mh_wire_loops(core.img(VOL))
    assert len(devs) == 1, devs
    fd = os.open(devs[0], os.O_RDONLY)
    try:
        ans = core.call(unstage(VOL, st, flags=flags))
        assert ans.type == T.ANS_ERROR and ans.kind == E.BUSY, ans
        assert ans.sys_errno == errno.EALREADY and "held open elsewhere" in ans.reason, ans
        core.alive()
        if block:  # pinned again while held (mh_loop.c): BUSY until the holder is gone
            ans = core.call(unstage(VOL, st, flags=flags))
            assert ans.type == T.ANS_ERROR and ans.sys_errno == errno.EALREADY, ans
        else:
            core.ok(unstage(VOL, st, flags=flags))
        assert core.ok(attached(VOL)).devices == 1
        assert mh_wire_loops(core.img(VOL)) == devs
    finally:
        os.close(fd)
    if block:  # the holder gone: the next UNSTAGE detaches it, its pin first
        core.ok(unstage(VOL, st, flags=flags))
    deadline = time.monotonic() + 10
    while mh_wire_loops(core.img(VOL)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mh_wire_loops(core.img(VOL)) == []
    assert core.ok(attached(VOL)).devices == 0


def test_a_hostile_detach_clears_no_device_but_the_named_volumes(core):
    """The core clears a held loop device at once (LOOP_CLR_FD, which on a device still
    open only sets autoclear), checked and cleared on one descriptor. A compromised
    orchestrator naming one volume at another volume's staging, or at a device node's
    path, clears nothing it has not proved the named volume's own: root's device and the
    other volume's, each held open, keep their binding and their flags; the named
    volume's own held device is the only one set to clear itself."""
    core.image(VOL)
    core.image(VOL2, fs=None)
    st, blk = core.dir("staging/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st))
    core.ok(stage(VOL2, blk, fs="", flags=F_BLOCK))
    root_img = core.image(None, path=os.path.join(core.out, "root.img"), uid=0)
    root_dev = subprocess.run(["losetup", "--find", "--show", root_img], capture_output=True,
                              text=True, check=True).stdout.strip()
    [own], [other] = mh_wire_loops(core.img(VOL)), mh_wire_loops(core.img(VOL2))

    def flags():
        out = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,AUTOCLEAR,BACK-INO"],
                             capture_output=True, text=True, check=True).stdout
        return {f[0]: (f[1], f[2]) for f in (ln.split() for ln in out.splitlines())}

    fds = [os.open(d, os.O_RDONLY) for d in (own, other, root_dev)]
    try:
        before = flags()
        for msg in (unstage(VOL, blk, flags=F_BLOCK), unstage(VOL, blk),
                    unpublish(VOL, os.path.join(blk, "dev")), unpublish(VOL, blk),
                    unstage(VOL2, st), unstage(VOL2, st, flags=F_BLOCK)):
            ans = core.call(msg)  # refused, or nothing of the named volume there: OK
            assert ans.type != T.ANS_ERROR or ans.sys_errno != errno.EALREADY, (msg, ans)
        assert flags() == before
        ans = core.call(unstage(VOL, st))  # its own, held: left to clear itself
        assert ans.type == T.ANS_ERROR and ans.sys_errno == errno.EALREADY, ans
        after = flags()
        assert after[own][0] == "1" and after[other] == before[other], (before, after)
        assert after[root_dev] == before[root_dev], (before, after)
        assert mh_wire_loops(core.img(VOL2)) == [other] and os.path.exists(
            os.path.join(blk, "dev"))
    finally:
        for fd in fds:
            os.close(fd)
        subprocess.run(["losetup", "-d", root_dev], check=False)
    core.ok(unstage(VOL2, blk, flags=F_BLOCK))


# ---- Review of the thaw in the sweep and the core's descriptors from its starter ----


def _kill9(c):
    os.killpg(c.proc.pid, signal.SIGKILL)
    c.proc.wait(10)
    c.sock.close()
    c.log.close()
    if c.reader:
        c.reader.kill()
        c.reader.wait(10)
        c.reader = None
        c.rsock.close()
        c.rsock = None


def test_a_freeze_left_under_a_renamed_image_is_thawed_by_the_next_core(fresh):
    """The start-up thaw (mh_sweep.c) counts a device as ours only while
    images/<lo_file_name>.img is its backing file (mh_loop_ours). The owner (the
    compromised orchestrator) FREEZEs its volume, renames the image away and dies: the
    core dies with it (PDEATHSIG) without thawing, and the next core's sweep passes the
    device over. The owner puts the name back. Found by a review: the next EXPAND (or
    UNSTAGE) thawed only what *this* core froze, then blocked in the kernel on the frozen
    file system, the single-threaded core with it for every volume of the node. Now
    UNSTAGE and EXPAND thaw the file system on the volume's own loop device, whoever
    froze it (core_table.c): the UNSTAGE at the end answers, and the volume takes
    writes again."""
    fresh.image(VOL)
    c = fresh.start()
    st = c.dir("staging/v1")
    c.ok(stage(VOL, st))
    c.ok(freeze(VOL, 60))
    _kill9(c)
    img, hidden = c.img(VOL), os.path.join(c.images, "parked")
    os.rename(img, hidden)  # the owner may: images/ and its files are its own
    thawer = None
    try:
        c.start()
        os.rename(hidden, img)
        w = writer(os.path.join(st, "f"))
        assert held(w, 1.0)  # the next core's sweep passed it over: still frozen
        thawer = subprocess.Popen(["sh", "-c", "sleep %d; fsfreeze -u '%s'" % (HANG + 5, st)],
                                  stderr=subprocess.DEVNULL)
        # Answered, whatever the writer still holds open: never blocked on the freeze.
        ans = c.call(unstage(VOL, st), timeout=HANG)
        assert ans.type in (T.ANS_UNSTAGE, T.ANS_ERROR), ans
        # The write is no longer held; its fsync by path finds the file only if the
        # UNSTAGE (whose unmount races the writer's close) left the volume mounted.
        assert w.wait(30) == 0 or ans.type == T.ANS_UNSTAGE
        assert "frozen by another than this core" in c.logs()
    finally:
        # Never leave a frozen file system behind on a shared machine.
        if os.path.exists(hidden):
            os.rename(hidden, img)
        if thawer:  # not needed: the core thawed it (were it hung, the line below frees it)
            thawer.kill()
            thawer.wait(60)
        subprocess.run(["fsfreeze", "-u", st], capture_output=True)
    c.ok(unstage(VOL, st))


def test_expand_of_a_volume_frozen_by_someone_else_does_not_hang_the_core(fresh):
    """Same start as above, with EXPAND after the name is back (xfs: its grow ioctl needs
    only CAP_SYS_ADMIN; ext4's needs CAP_SYS_RESOURCE, which this host does not grant):
    the core thaws the volume's own file system first and answers, not blocking in
    XFS_IOC_FSGROWFSDATA (found by the same review)."""
    fresh.image(VOL, fs="xfs", size=512 * MiB)
    c = fresh.start()
    st = c.dir("staging/v1")
    c.ok(stage(VOL, st, fs="xfs"))
    c.ok(freeze(VOL, 60))
    _kill9(c)
    img, hidden = c.img(VOL), os.path.join(c.images, "parked")
    os.rename(img, hidden)
    thawer = None
    try:
        c.start()
        os.rename(hidden, img)
        os.truncate(img, 1024 * MiB)  # the owner grows its own image
        # Unblock the core after HANG + 5 s whatever happens, so nothing stays stuck.
        thawer = subprocess.Popen(["sh", "-c", "sleep %d; fsfreeze -u '%s'" % (HANG + 5, st)],
                                  stderr=subprocess.DEVNULL)
        t = time.monotonic()
        try:
            ans = c.call(expand(VOL, st), timeout=HANG)
        except AssertionError as e:
            raise AssertionError("EXPAND of a volume frozen by a dead core hung the core "
                                 "for %.0f s: %s" % (time.monotonic() - t, e))
        assert ans.type == T.ANS_EXPAND, ans
    finally:
        if os.path.exists(hidden):
            os.rename(hidden, img)
        if thawer:
            thawer.kill()
            thawer.wait(60)
        subprocess.run(["fsfreeze", "-u", st], capture_output=True)


def _spawn_with(c, data, more=()):
    """The core as test_core's spawn starts it, but with fds 7 and 8 of the test's choice
    (and more arguments)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.log = open(c.path("core.log"), "w")
    flush = c.spawn_flusher()
    pol = c.compiled()
    argv, keep = with_fds(
        CONFINED + [os.path.join(BIN, "sepcsi-core"), "--log-level", "debug", *more],
        {3: b.fileno(), 5: pol, 6: flush.fileno(), **data})
    c.proc = subprocess.Popen(argv, pass_fds=keep, stdout=c.log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    for fd in data.values():
        os.close(fd)
    os.close(pol)
    flush.close()
    b.close()
    c.sock = a


@pytest.mark.parametrize("direct", [True, False])
def test_a_core_attaches_with_direct_io_only_as_its_starter_forecasts(fresh, direct):
    """Whether the data directory takes direct I/O is its starter's forecast, made once at
    the helper's start (forecast_direct_io, mh_main.c) and passed as --direct-io: the
    core asks no file system itself. A volume's device is direct with it, buffered (and
    logged so) without; a value given to it, or any argument it does not take, is no
    start."""
    _spawn_with(fresh, fresh.data_fds(), ["--direct-io"] if direct else [])
    fresh.image(VOL)
    st = fresh.dir("staging/dio")
    fresh.ok(stage(VOL, st))
    try:
        [dev] = mh_wire_loops(fresh.img(VOL))
        with open("/sys/block/%s/loop/dio" % os.path.basename(dev)) as f:
            assert f.read().strip() == ("1" if direct else "0")
        assert ("loop_buffered" in fresh.logs()) == (not direct)
    finally:
        fresh.ok(unstage(VOL, st))
    for bad in (["--direct-io=1"], ["--direct-io", "1"], ["--log-level", "loud"],
                ["--owner", "1"], ["--policy-fd", "5"], ["x"]):
        r = subprocess.run([os.path.join(BIN, "sepcsi-core"), *bad], capture_output=True,
                           text=True)
        assert r.returncode == 1 and "usage" in r.stderr, (bad, r)


@pytest.mark.parametrize("what", ["images of another uid, world-writable",
                                  "audit.log read-only", "audit.log not append"])
def test_a_core_refuses_fds_7_and_8_that_are_not_what_its_starter_hands(fresh, what):
    """Found by a review: take_data (core_main.c) checked fd 7 only for being a
    directory and fd 8 for being a root-only regular file, so a starter's mistake (or
    a start by hand) could give it a directory of another uid that anyone may write, or
    an audit file it cannot append to (every audit record then silently lost). Now fd 7
    must be a directory of group root, not writable by others (its owner is then the
    images' owner); fd 8 open to append only, one link."""
    other = fresh.path("elsewhere")
    os.makedirs(other)
    os.chown(other, 12345, 12345)
    os.chmod(other, 0o777)
    audit = fresh.path("data/audit.log")
    fd = os.open(audit, os.O_WRONLY | os.O_CREAT, 0o600)
    os.close(fd)
    images = os.open(fresh.images, os.O_RDONLY | os.O_DIRECTORY)
    if what.startswith("images"):
        os.close(images)
        data = {7: os.open(other, os.O_RDONLY | os.O_DIRECTORY),
                8: os.open(audit, os.O_WRONLY | os.O_APPEND)}
    elif what == "audit.log read-only":
        data = {7: images, 8: os.open(audit, os.O_RDONLY)}
    else:
        data = {7: images, 8: os.open(audit, os.O_WRONLY)}
    _spawn_with(fresh, data)
    try:
        rc = fresh.proc.wait(5)
    except subprocess.TimeoutExpired:
        rc = None
    assert rc == 1, "the core started (and serves) with fds 7/8: %s" % what


def test_a_core_without_fds_7_and_8_refuses_to_start(fresh):
    """Started by hand without images/ and audit.log, nothing the core opens before
    take_data lands on 7 or 8: it refuses to start (its policy is on fd 5 always)."""
    _spawn_with(fresh, {})
    assert fresh.proc.wait(5) == 1
    assert "fd 7 is not the images directory" in fresh.logs()
