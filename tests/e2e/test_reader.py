"""sepcsi-reader, the core's looks without a capability (STATS, LIST of mounts), against a
compromised helper: the reader started as the core's starter starts it, beside a core on a
fresh tree (test_core.Core), with the test as its peer.

What must hold: it serves PING, STATS and LIST and nothing else (any other request, or a
malformed datagram, ends it with exit 3, and neither changes anything); it starts only
without a capability; it answers only about sepcsi's own mounts of the volume named (the
STATS and LIST tests of test_core.py run against it, through Core.call). What it may do to
files at all is its Landlock ruleset's: tests/unit/test_reader_landlock.c.
"""
import os
import signal
import subprocess

import pytest

import mh_wire
from mh_wire import E, Msg, T, decode, encode
from test_core import (CONFINED, OWNER, READER_CONFINED, VOL, VOL2, list_mounts, publish,
                       stage, stats, unstage)
from test_core import fresh  # noqa: F401  (a fixture)
from test_core_relay import pair  # noqa: F401  (a fixture: a helper, its core and reader)


@pytest.fixture
def core(fresh):  # noqa: F811
    yield fresh.start()


NOT_ITS_OWN = {
    "STAGE": lambda c: stage(VOL, c.dir("staging/r1")),
    "UNSTAGE": lambda c: unstage(VOL, c.dir("staging/r1")),
    "PUBLISH": lambda c: publish(VOL, c.dir("staging/r1"), c.path("root/pods/t")),
    "FREEZE": lambda c: Msg(T.REQ_FREEZE, volume_id=VOL, seconds=5),
    "THAW": lambda c: Msg(T.REQ_THAW, volume_id=VOL),
    "ATTACHED": lambda c: Msg(T.REQ_ATTACHED, volume_id=VOL),
    "FLUSH": lambda c: Msg(T.REQ_FLUSH, volume_id=VOL),
    "DELETE": lambda c: Msg(T.REQ_DELETE, volume_id=VOL),
    "CREATE": lambda c: Msg(T.REQ_CREATE, volume_id=VOL2, size_bytes=1 << 20),
    "an answer": lambda c: Msg(T.ANS_STATS),
}


@pytest.mark.parametrize("name", sorted(NOT_ITS_OWN) + sorted(mh_wire.VIOLATIONS))
def test_the_reader_serves_its_rows_and_ends_at_anything_else(core, name):
    """Exit 3 (logged) for a request outside its table or a malformed datagram; a staged
    volume stays staged, its image in place, every mount and file as it was; the core
    serves on."""
    core.image(VOL)
    staging = core.dir("staging/v1")
    core.ok(stage(VOL, staging))
    assert core.ok(stats(VOL, staging)).bytes_total > 32 << 20
    sent = encode(NOT_ITS_OWN[name](core)) if name in NOT_ITS_OWN else mh_wire.VIOLATIONS[name]
    before = core.state()
    core.rsock.send(sent)
    assert core.reader.wait(10) == 3
    with open(core.path("reader.log")) as f:
        assert "protocol_violation" in f.read()
    assert core.state() == before
    core.rsock.close()
    core.rsock = None
    core.alive()  # the core, alone now
    assert os.path.ismount(staging)


def test_the_reader_lists_only_sepcsis_mounts_and_states_only_the_volumes(core):
    """LIST names the volume's staging and nothing mounted by anyone else; STATS of a
    path outside the policy, of another volume's mount, of root's mount of the image
    through a device it attached itself, are refused with nothing learned."""
    core.image(VOL)
    core.image(VOL2)
    s1, s2 = core.dir("staging/v1"), core.dir("staging/v2")
    core.ok(stage(VOL, s1))
    other = core.dir("staging/other")
    os.system("mount -t tmpfs none %s" % other)
    try:
        text = core.ok(list_mounts()).text
        assert [ln.split()[2:] for ln in text.splitlines()] == [[VOL, s1]], text
        for msg, kinds in ((stats(VOL, core.path("outside")), (E.REFUSED,)),
                           (stats(VOL, "/etc"), (E.REFUSED,)),
                           (stats(VOL2, s1), (E.NOTFOUND,)),
                           (stats(VOL, other), (E.NOTFOUND,)),
                           (stats(VOL, s2), (E.NOTFOUND,))):
            ans = core.call(msg)
            # Refused, or (another volume's mount) "abnormal" with no figure of it.
            assert (ans.type == T.ANS_ERROR and ans.kind in kinds) or (
                kinds == (E.NOTFOUND,) and ans.abnormal == 1 and ans.bytes_total == 0 and
                ans.bytes_used == 0 and ans.inodes_total == 0), (msg, ans)
        # Only mounts: the images are the helper's to list, never the reader's.
        ans = core.call(Msg(T.REQ_LIST, what=mh_wire.LIST_IMAGES, after=""))
        assert ans.type == T.ANS_ERROR and ans.kind == E.REFUSED, ans
    finally:
        os.system("umount %s" % other)


def test_the_reader_starts_only_without_a_capability(fresh):  # noqa: F811
    """Started holding the core's capabilities (its starter forgot to take them), it
    refuses to serve: exit 1 before its first request."""
    fresh.spawn(fresh.compiled())
    fresh.spawn_reader(starter=CONFINED)
    assert fresh.reader.wait(10) == 1
    with open(fresh.path("reader.log")) as f:
        assert "did not take every capability away" in f.read()


def test_the_reader_reads_images_only_of_their_owner(core):
    """An image that is not the owner's (root's, here) is no volume to the reader either:
    STATS of its staging is refused, as the core refuses to attach it."""
    core.image(VOL)
    staging = core.dir("staging/v1")
    core.ok(stage(VOL, staging))
    os.chown(core.img(VOL), 0, 0)
    ans = core.call(stats(VOL, staging))
    assert ans.type == T.ANS_ERROR and ans.kind == E.REFUSED, ans
    os.chown(core.img(VOL), OWNER, 0)
    assert core.ok(stats(VOL, staging)).bytes_total > 0
    core.ok(unstage(VOL, staging))


def test_a_loop_device_the_core_never_saw_is_none_of_the_readers(fresh):  # noqa: F811
    """In the core's own /dev only the nodes the core made exist; the reader may make none
    (its filter has no mknodat). A device someone else attached after (snapd, another
    driver) has no node there: STATS, which looks at every loop device, answers as before
    and the reader lives on (a node it tried to make would kill it, and the driver)."""
    core = fresh.start()
    core.image(VOL)
    core.image(VOL2)  # never staged: a look for its devices goes through every one
    staging = core.dir("staging/v1")
    core.ok(stage(VOL, staging))
    mine = subprocess.run(["losetup", "-n", "-O", "NAME", "-j", core.img(VOL)],
                          capture_output=True, text=True, check=True).stdout.split()
    foreign = core.path("outside", "foreign.img")
    with open(foreign, "wb") as f:
        f.truncate(8 << 20)
    dev = subprocess.run(["losetup", "-f", "--show", foreign], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        # A /dev like the core's: null, and the node of the volume's own device only.
        nodes = " && ".join("mknod %s b 7 %s" % (d, d[len("/dev/loop"):]) for d in mine)
        private_dev = ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
                       "mount -t tmpfs -o mode=0755 none /dev && mknod -m 666 /dev/null c 1 3"
                       " && %s && exec \"$@\"" % nodes, "sh"]
        core.rsock.close()
        core.reader.wait(10)
        core.spawn_reader(starter=private_dev + READER_CONFINED)
        ans = core.call(stats(VOL2, staging))
        assert ans.type in (T.ANS_STATS, T.ANS_ERROR) and not getattr(ans, "bytes_total", 0)
        st = core.ok(stats(VOL, staging))
        assert st.bytes_total > 32 << 20 and not st.abnormal, st
        core.alive()
    finally:
        subprocess.run(["losetup", "-d", dev])


def test_a_stalled_reader_holds_eight_workers_not_all(pair):  # noqa: F811
    """The reader stopped (SIGSTOP: a stall, or a reader taken over that stays silent):
    eight STATS wait for it, the ninth is answered BUSY at once, and the helper serves on;
    once it goes on, the eight are answered."""
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 << 20))
    staging = pair.dir("staging/s")
    pair.ok(stage(VOL, staging))
    os.kill(pair.reader.pid, signal.SIGSTOP)
    try:
        for i in range(9):
            msg = stats(VOL, staging)
            msg.id = 1000 + i
            pair.sock.send(encode(msg))
        pair.sock.settimeout(20)
        busy = decode(pair.sock.recv(mh_wire.MSG_MAX + 1))
        assert busy.type == T.ANS_ERROR and busy.kind == E.BUSY and \
            "looks in flight" in busy.reason, busy
        assert pair.call(Msg(T.REQ_PING)).type == T.ANS_PING
    finally:
        os.kill(pair.reader.pid, signal.SIGCONT)
    answers = [decode(pair.sock.recv(mh_wire.MSG_MAX + 1)) for _ in range(8)]
    assert sorted(a.id for a in answers) == sorted(set(range(1000, 1009)) - {busy.id})
    assert all(a.type == T.ANS_STATS and a.bytes_total > 32 << 20 for a in answers), answers
    pair.ok(unstage(VOL, staging))
