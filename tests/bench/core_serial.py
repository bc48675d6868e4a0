#!/usr/bin/python3
"""Benchmark: what one request at a time costs in sepcsi-core, the capable core, which
serves its peer's requests in order on one thread. Run as root inside a private mount
namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/core_serial.py [--dirty-mib N] [--rounds R]

The core is started alone, as tests/e2e/test_core.py starts it (its peer is this
script). Two figures, each over R rounds:
  - a slow request in front of a quick one: a volume (ext4, 2 GiB image) holds N MiB
    written and not yet synced when its UNSTAGE is asked, as the orchestrating side asks
    it: FLUSH first (a PING sent right behind it), then, once FLUSH is answered, UNSTAGE
    (a PING right behind it too). Printed: FLUSH's time and its PING's, UNSTAGE's and its
    PING's, against a PING alone. The core hands the write-back to its flusher and
    answers the PING meanwhile; with --no-flusher (the flusher killed first), FLUSH is
    answered at once and UNSTAGE writes back in the core's own thread, so the PING
    behind it waits. The same with FREEZE (which writes back too) in place of UNSTAGE.
  - the same figures when the volume was synced first (syncfs through the staging path,
    by this script as root; a peer without capabilities cannot reach the mount).
  - the worst case of an UNSTAGE that is not a write-back: the volume's loop device held
    open by another process (a root process of the node's; no tenant can open a file-system
    volume's device). After the unmount the core waits for the device to detach, about
    2 s, in its one thread, then answers BUSY; the PING behind it waits as long. The
    UNSTAGE asked again (as a CO retries), the device still held, is answered at once:
    nothing is staged any more. The same for a raw block volume (its device is the pod's
    to open, and a pod's process may pass the descriptor on and outlive the pod): the
    core waits about 1 s for the detach, answers BUSY, and waits as long again at every
    retry while the device stays open.
  - a growth: an xfs made on 512 MiB (four allocation groups of 128 MiB) whose image its
    owner then truncates to --grow-tib TiB, grown by EXPAND asked again while it answers
    BUSY (EINPROGRESS), as the helper asks it, each with a PING behind it. Printed: the
    steps, their total time, the longest step and the longest wait of a PING behind one.
    The core adds 1,024 groups at most per EXPAND (mh_resize.c), so no one request holds
    its thread for the whole growth, and grows an xfs to 65,536 groups at most (8 TiB for
    these: a larger --grow-tib is refused).
Asserts no timing; exit status 0 when every request was answered as expected.
"""
import errno
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))

from mh_wire import Msg, T, decode, encode  # noqa: E402
from mh_wire import F_BLOCK  # noqa: E402
from test_core import VOL, VOL2, Core, expand, freeze, stage, unstage  # noqa: E402
from conftest import cleanup_tree  # noqa: E402

MiB = 1 << 20
VOL3 = "sv-" + "0" * 31 + "3"


def timed(core, msg, answer=None):
    """Send msg, then a PING at once; return (msg's answer time, PING's answer time), s,
    whichever comes first (the core answers the PING while a FLUSH waits). msg must be
    answered with its own answer type, or with one of the types `answer` if given."""
    msg.id, core.next_id = core.next_id, core.next_id + 2
    ping = Msg(T.REQ_PING, msg.id + 1)
    t0 = time.monotonic()
    core.sock.send(encode(msg))
    core.sock.send(encode(ping))
    core.sock.settimeout(600)
    got = {}
    for _ in range(2):
        a = decode(core.sock.recv(1 << 16))
        got[a.id] = (a, time.monotonic() - t0)
    a, b = got[msg.id][0], got[ping.id][0]
    assert a.type in (answer or (T(msg.type + 1),)), a
    assert b.type == T.ANS_PING, b
    return got[msg.id][1], got[ping.id][1]


def flushed_then(core, msg):
    """FLUSH of VOL, then msg, each with a PING behind it: the four times."""
    return timed(core, Msg(T.REQ_FLUSH, volume_id=VOL)) + timed(core, msg)


def grown_by_steps(core, tib):
    """An xfs on 512 MiB grown to tib TiB by EXPAND asked again while it says BUSY
    (EINPROGRESS): (steps, total s, longest step s, longest PING behind a step s)."""
    img = core.image(VOL3, fs="xfs", size=512 * MiB)
    st = core.dir("staging/grow")
    core.ok(stage(VOL3, st, fs="xfs"))
    with open(img, "r+b") as f:
        f.truncate(tib << 40)
    steps, longest, ping_longest, t0 = 0, 0.0, 0.0, time.monotonic()
    while True:
        msg = expand(VOL3, st)
        msg.id, core.next_id = core.next_id, core.next_id + 2
        t = time.monotonic()
        core.sock.send(encode(msg))
        core.sock.send(encode(Msg(T.REQ_PING, msg.id + 1)))
        got = {}
        for _ in range(2):
            a = decode(core.sock.recv(1 << 16))
            got[a.id] = (a, time.monotonic() - t)
        a = got[msg.id][0]
        steps += 1
        longest = max(longest, got[msg.id][1])
        ping_longest = max(ping_longest, got[msg.id + 1][1])
        if a.type == T.ANS_EXPAND:
            break
        assert a.type == T.ANS_ERROR and a.sys_errno == errno.EINPROGRESS, a
    total = time.monotonic() - t0
    core.ok(unstage(VOL3, st))
    os.unlink(img)
    return steps, total, longest, ping_longest


def loop_device(image):
    """/dev/loopN backed by image (losetup matches its device and inode), or None."""
    out = subprocess.run(["losetup", "-n", "-O", "NAME", "-j", image], capture_output=True,
                         text=True).stdout.split()
    return out[0] if len(out) == 1 else None


def held_unstage(core, st):
    """Stage VOL and hold its loop device open; FLUSH and UNSTAGE it with a PING behind
    each (UNSTAGE answered BUSY), then UNSTAGE again, the device still held (answered:
    nothing is staged now). Returns both rows' times: (FLUSH, its PING, UNSTAGE, its PING)."""
    core.ok(stage(VOL, st))
    dev = loop_device(core.img(VOL))
    assert dev, "not one loop device backs the staged image"
    fd = os.open(dev, os.O_RDONLY)
    try:
        first = timed(core, Msg(T.REQ_FLUSH, volume_id=VOL)) + \
            timed(core, unstage(VOL, st), answer=(T.ANS_ERROR,))
        again = timed(core, Msg(T.REQ_FLUSH, volume_id=VOL)) + timed(core, unstage(VOL, st))
    finally:
        os.close(fd)
    return first, again


def held_block_unstage(core, st):
    """Stage VOL2 raw block and hold its loop device open; UNSTAGE it (answered BUSY: the
    device is still attached), then again, with a PING behind each. Returns both rows'
    times (UNSTAGE, its PING); then the device closed and UNSTAGE asked once more."""
    core.ok(stage(VOL2, st, fs="", flags=F_BLOCK))
    dev = loop_device(core.img(VOL2))
    assert dev, "not one loop device backs the staged image"
    fd = os.open(dev, os.O_RDONLY)
    try:
        first = timed(core, unstage(VOL2, st, flags=F_BLOCK), answer=(T.ANS_ERROR,))
        again = timed(core, unstage(VOL2, st, flags=F_BLOCK),
                      answer=(T.ANS_ERROR, T.ANS_UNSTAGE))  # BUSY while it is held
    finally:
        os.close(fd)
    core.ok(unstage(VOL2, st, flags=F_BLOCK))
    return first, again


def dirty(path, mib):
    with open(os.path.join(path, "data"), "wb") as f:
        chunk = os.urandom(MiB)
        for _ in range(mib):
            f.write(chunk)


def syncfs(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.syncfs(fd) if hasattr(os, "syncfs") else subprocess.run(["sync", "-f", path],
                                                                     check=True)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirty-mib", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--grow-tib", type=int, default=4, help="the xfs growth's size (TiB)")
    ap.add_argument("--no-flusher", action="store_true",
                    help="kill the core's flusher first: every write-back in its one thread")
    args = ap.parse_args()
    core = Core()
    rows = {}
    try:
        core.start()
        if args.no_flusher:
            os.kill(core.flusher.pid, 9)  # started beside it (test_core.Core.spawn)
        core.image(VOL, size=2048 * MiB)
        st = core.dir("staging/v1")
        alone = []
        for _ in range(20):
            t = time.monotonic()
            core.ok(Msg(T.REQ_PING))
            alone.append(time.monotonic() - t)
        for synced in (False, True):
            for what in ("UNSTAGE", "FREEZE"):
                key = "%s, %s" % (what, "synced first" if synced else "dirty")
                rows[key] = []
                for _ in range(args.rounds):
                    core.ok(stage(VOL, st))
                    dirty(st, args.dirty_mib)
                    t_sync = time.monotonic()
                    if synced:
                        syncfs(st)
                    t_sync = time.monotonic() - t_sync
                    if what == "UNSTAGE":
                        rows[key].append(flushed_then(core, unstage(VOL, st)) + (t_sync,))
                    else:
                        rows[key].append(flushed_then(core, freeze(VOL, 60)) + (t_sync,))
                        core.ok(Msg(T.REQ_THAW, volume_id=VOL))
                        core.ok(unstage(VOL, st))
        held = [held_unstage(core, st) for _ in range(args.rounds)]
        rows["UNSTAGE, device held"] = [h[0] + (0.0,) for h in held]
        rows["UNSTAGE again, held"] = [h[1] + (0.0,) for h in held]
        core.image(VOL2, fs=None)
        blk = core.dir("blk/v2")
        held = [held_block_unstage(core, blk) for _ in range(args.rounds)]
        rows["block UNSTAGE, held"] = [(0.0, 0.0) + h[0] + (0.0,) for h in held]
        rows["block again, held"] = [(0.0, 0.0) + h[1] + (0.0,) for h in held]
        print("sepcsi-core, %s: %d MiB written, not synced, then a slow request and a PING "
              "behind it (%d rounds, medians)" % (
                  "every write-back in its one thread (flusher killed)" if args.no_flusher
                  else "write-back in its flusher", args.dirty_mib, args.rounds))
        print("  PING alone: %.2f ms" % (1000 * statistics.median(alone)))
        print("  %-24s %10s %10s %10s %10s %10s" % (
            "", "sync first", "FLUSH", "its PING", "request", "its PING"))
        for key, v in rows.items():
            print("  %-24s %7.0f ms %7.0f ms %7.0f ms %7.0f ms %7.0f ms" % (
                key, *(1000 * statistics.median(x[k] for x in v) for k in (4, 0, 1, 2, 3))))
        steps, total, longest, ping = grown_by_steps(core, args.grow_tib)
        print("  xfs 512 MiB -> %d TiB: %d EXPAND steps, %.1f s in all; the longest step "
              "%.0f ms, the longest PING behind one %.0f ms" % (
                  args.grow_tib, steps, total, 1000 * longest, 1000 * ping))
    except Exception:
        if os.path.exists(core.path("core.log")):
            print(core.logs(), file=sys.stderr)
        raise
    finally:
        core.stop()
        cleanup_tree(core.tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
