"""sepcsi-mounthelper with a capable core (--core-fd): the helper keeps rpcd's protocol and
its own rows (images, probes, mkfs), and asks sepcsi-core for every mount, unmount, growth
and look at a staged volume, relayed by its main loop from its workers.

The two run side by side on one data directory, as the split of the helper will run them:
the test speaks to the helper on its fd 3, the helper to the core on a socketpair of its
own. What must hold: each relayed row is done by the core (its log and audit say so, the
helper's audit says the core did it), the helper formats a blank image before the core
mounts it and never one that holds a file system, and the answers are the core's, under
the id the test asked with, even when several workers ask at once.
"""
import errno
import os
import signal
import socket
import subprocess
import threading
import time

import pytest

import mh_wire
from conftest import BIN, cleanup_tree, with_fds
from mh_wire import F_BLOCK, F_CREATE_DIR, F_REMOVE_DIR, E, Msg, T, decode, encode
from test_core import (CONFINED, SECRETS, MiB, Core, expand, loops, loops_of, mounts, publish,
                       stage, stats, unpublish, unstage, xfs_groups)

VOL = "sv-" + "0" * 31 + "a"
VOL2 = "sv-" + "0" * 31 + "b"


class Pair(Core):
    """A core (its images root's, as the helper makes them) and a helper asking it."""

    def start(self):
        os.chown(self.images, 0, 0)
        core_end, helper_core = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pol = self.compiled()
        core_chan = core_end.fileno()

        self.log = open(self.path("core.log"), "w")
        data = self.data_fds()
        argv, keep = with_fds(
            CONFINED + [os.path.join(BIN, "sepcsi-core"), "--log-level", "debug"],
            {3: core_chan, 5: pol, **data})
        self.proc = subprocess.Popen(
            argv, pass_fds=keep, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        for fd in data.values():
            os.close(fd)
        core_end.close()
        os.close(pol)
        self.hlog = open(self.path("helper.log"), "w")
        helper_reader = self.spawn_reader(mine=False)
        self.start_helper(helper_core, helper_reader)
        helper_core.close()
        helper_reader.close()
        return self

    def start_helper(self, core_channel, reader_channel):
        """A helper asking whoever holds core_channel's other end (and reader_channel's:
        STATS, LIST); the test is its rpcd."""
        test_end, helper_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        peer, core = helper_peer.fileno(), core_channel.fileno()

        argv, keep = with_fds(
            [os.path.join(BIN, "sepcsi-mounthelper"), "--policy", self.policy, "--data-dir",
             self.data, "--core-fd", "6", "--reader-fd", "7", "--log-level", "debug"],
            {3: peer, 6: core, 7: reader_channel.fileno()})
        self.helper = subprocess.Popen(
            argv, pass_fds=keep, stdout=self.hlog,
            stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, SEPCSI_TEST_PAUSE="1"))  # points held only when asked
        helper_peer.close()
        self.sock = test_end
        self.alive()

    def helper_logs(self):
        with open(self.path("helper.log")) as f:
            return f.read()

    def stop(self):
        super().stop()  # the helper's channel closes: it exits, and the core's with it
        for p in (getattr(self, "helper", None), self.proc):
            if p and p.poll() is None:
                p.kill()
            if p:
                p.wait(10)
        if getattr(self, "hlog", None):
            self.hlog.close()


@pytest.fixture
def pair():
    p = Pair()
    try:
        yield p.start()
    finally:
        p.stop()
        if os.environ.get("SEPCSI_E2E_SHOW_LOGS") and p.proc:
            print(p.logs(), p.helper_logs())
        cleanup_tree(p.tmp)
        os.close(p.lock)


def fs_type(path):
    return subprocess.run(["blkid", "-o", "value", "-s", "TYPE", path], capture_output=True,
                          text=True).stdout.strip()


def core_did(pair, op, vid, log="core.log"):
    """The core's own audit line of op for vid (or its reader's), with its result."""
    with open(pair.path(log)) as f:
        logs = f.read()
    lines = [ln for ln in logs.splitlines() if "audit" in ln and "op=" + op in ln and vid in ln]
    assert lines, "%s did no %s of %s:\n%s" % (log, op, vid, logs)
    return lines[-1]


def test_lifecycle_through_the_core(pair):
    """CREATE in the helper; STAGE formats there and mounts in the core; the rest is the
    core's; DELETE in the helper once the core has let go of the device."""
    staging, target = pair.dir("staging/a"), pair.path("root", "pods/a/mount")
    pair.dir("pods/a")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    pair.ok(stage(VOL, staging))
    assert "result=ok" in core_did(pair, "STAGE", VOL)
    assert "done by the capable core" in pair.helper_logs()
    assert [m for m in mounts(pair.proc.pid, pair.root) if m[1] == staging]
    assert fs_type(pair.path("data/images", VOL + ".img")) == "ext4"  # by the helper's tool
    pair.ok(publish(VOL, staging, target))
    assert "result=ok" in core_did(pair, "PUBLISH", VOL)
    st = pair.ok(stats(VOL, target))
    assert st.bytes_total > 32 * MiB and "result=ok" in core_did(pair, "STATS", VOL, "reader.log")
    assert "op=STATS" not in pair.logs()  # the reader's, never the core's
    pair.ok(stage(VOL, staging))  # again: the core answers it is staged; nothing formatted
    pair.ok(unpublish(VOL, target))
    pair.ok(unstage(VOL, staging))
    assert "result=ok" in core_did(pair, "UNSTAGE", VOL)
    assert not [m for m in mounts(pair.proc.pid, pair.root) if m[1] in (staging, target)]
    pair.ok(Msg(T.REQ_DELETE, volume_id=VOL))
    assert not os.path.exists(pair.path("data/images", VOL + ".img"))


def test_existing_file_system_kept_and_grown(pair):
    """A file system already in the image is mounted as it is (never formatted again),
    and grown by the core's EXPAND when the image is larger than it (a bigger restore)."""
    staging = pair.dir("staging/b")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=512 * MiB))
    img = pair.path("data/images", VOL + ".img")
    subprocess.run(["mkfs.xfs", "-q", "-f", "-d", "size=%d" % (320 * MiB), img], check=True)
    pair.ok(stage(VOL, staging, fs="xfs"))
    assert "result=ok" in core_did(pair, "EXPAND", VOL)
    assert os.statvfs(staging).f_blocks * os.statvfs(staging).f_frsize > 400 * MiB
    pair.ok(unstage(VOL, staging))


def test_a_large_growth_is_asked_again_until_it_is_done(pair):
    """An xfs grown by more allocation groups than the core adds per EXPAND (1,024, so
    that its one thread is never held long): the core answers each step BUSY
    (EINPROGRESS), and the helper asks again until the file system fills its device, so
    that its own peer sees one EXPAND answered."""
    staging = pair.dir("staging/grow")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=512 * MiB))
    img = pair.path("data/images", VOL + ".img")
    subprocess.run(["mkfs.xfs", "-q", "-f", img], check=True)  # four groups of 128 MiB
    pair.ok(stage(VOL, staging, fs="xfs"))
    groups, group = xfs_groups(staging)
    with open(img, "r+b") as f:  # as its owner may leave it, sparse
        f.truncate(groups * group + 1100 * group)
    grown = pair.ok(expand(VOL, staging))
    assert grown.size_bytes == os.stat(img).st_size
    assert xfs_groups(staging)[0] == groups + 1100
    # In the core: the STAGE's own EXPAND (nothing to grow), then two steps (1,024 groups,
    # then the rest); one EXPAND in the helper's audit.
    steps = [ln for ln in pair.logs().splitlines() if "audit" in ln and "op=EXPAND" in ln]
    assert len(steps) == 3 and "result=ok" in steps[0], steps
    assert "kind=BUSY" in steps[1] and "errno=115" in steps[1] and "result=ok" in steps[2]
    mine = [ln for ln in pair.helper_logs().splitlines() if "audit" in ln and "op=EXPAND" in ln]
    assert len(mine) == 1 and "result=ok" in mine[0], mine
    pair.ok(unstage(VOL, staging))


def test_blank_read_only_and_foreign_signature_refused(pair):
    """The helper's own refusals come before the core is asked to stage: a blank image
    staged read-only, and an image holding another file system's signature (never
    formatted); only the core's reader checked the request (STAGE_CHECK), the core
    never heard of it."""
    staging = pair.dir("staging/c")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=320 * MiB))
    for how in (dict(readonly=1), dict(mount_flags="ro")):
        ans = pair.call(stage(VOL, staging, **how))
        assert ans.type == T.ANS_ERROR and ans.kind == E.PRECONDITION, (how, ans)
        assert not open(pair.path("data/images", VOL + ".img"), "rb").read(1 << 16).strip(b"\0")
    img = pair.path("data/images", VOL + ".img")
    subprocess.run(["mkfs.xfs", "-q", "-f", img], check=True)
    before = open(img, "rb").read(4096)
    ans = pair.call(stage(VOL, staging, fs="ext4"))
    assert ans.type == T.ANS_ERROR and ans.kind == E.EXISTS, ans
    assert open(img, "rb").read(4096) == before
    assert "op=STAGE " not in pair.logs() and "op=STAGE_CHECK" not in pair.logs()
    assert "result=ok" in core_did(pair, "STAGE_CHECK", VOL, "reader.log")


def test_refused_stage_formats_nothing(pair):
    """What the core would refuse (a path outside the patterns or through a directory
    others may write to, a file system or mount option outside the policy) is refused
    before the helper formats a blank image."""
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=320 * MiB))
    img = pair.path("data/images", VOL + ".img")
    pair.dir("gw", mode=0o770)
    for msg in (stage(VOL, "/etc/not-allowed", fs="xfs"), stage(VOL, pair.dir("gw/st")),
                stage(VOL, pair.dir("staging/e"), fs="vfat"),
                stage(VOL, pair.dir("staging/e"), mount_flags="suid")):
        ans = pair.call(msg)
        assert ans.type == T.ANS_ERROR and ans.kind == E.REFUSED, (msg, ans)
        assert not open(img, "rb").read(1 << 16).strip(b"\0"), msg


def test_helper_sees_no_kubelet_directory(pair):
    """With a core, the allowed roots are detached from the helper's view: nothing of
    kubelet's (nor any mount beneath) is in its sight, its /dev holds no loop-control, and
    a stage still works, the core checking the path."""
    seen = "/proc/%d/root%s" % (pair.helper.pid, pair.root)
    assert os.path.isdir(pair.path("root/pki")) and os.listdir(seen) == [], os.listdir(seen)
    assert os.listdir("/proc/%d/root/dev" % pair.helper.pid) == ["null"]
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    staging = pair.dir("staging/v")
    pair.ok(stage(VOL, staging))
    assert os.listdir(seen) == [] and os.path.ismount(staging)
    pair.ok(unstage(VOL, staging))


def test_an_answer_of_another_type_is_a_failure(pair):
    """A core that answers a question with an answer of another type (PING here) is
    never taken at its word: the request fails, and DELETE removes nothing (ATTACHED
    unanswered is not "no device")."""
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    pair.proc.kill()
    pair.proc.wait(10)
    pair.sock.close()  # the helper's channel ends: it exits
    pair.helper.wait(10)
    fake, helper_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    reader, helper_reader = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    def wrong(sock=fake):  # PING for everything: right only for the helper's first, PING
        q = decode(sock.recv(mh_wire.MSG_MAX + 1))
        sock.send(encode(Msg(T.ANS_PING, q.id)))
    # The helper is ready once its core answers, and its reader.
    ready = [threading.Thread(target=wrong, args=(s,)) for s in (fake, reader)]
    for t in ready:
        t.start()
    pair.start_helper(helper_end, helper_reader)  # a new helper, asking the fake core
    for t in ready:
        t.join(20)
    helper_end.close()
    helper_reader.close()
    # UNSTAGE of a file system asks FLUSH first: that wrong answer is only a write-back
    # not done; the UNSTAGE's own is the failure.
    for msg, questions in ((Msg(T.REQ_DELETE, volume_id=VOL), 1),
                           (unstage(VOL, pair.dir("staging/w")), 2)):
        msg.id, pair.next_id = pair.next_id, pair.next_id + 1
        pair.sock.send(encode(msg))
        for _ in range(questions):
            wrong()
        pair.sock.settimeout(20)
        ans = decode(pair.sock.recv(mh_wire.MSG_MAX + 1))
        assert ans.type == T.ANS_ERROR and ans.kind == E.FAILED and "answered" in ans.reason, \
            (msg, ans)
    assert os.path.exists(pair.path("data/images", VOL + ".img"))
    fake.close()
    reader.close()


def test_core_errors_and_concurrent_questions(pair):
    """A refusal of the core reaches the test as the core gave it, and questions from
    several workers at once each get their own answer, under the test's ids."""
    ans = pair.call(unstage(VOL, "/etc"))
    assert ans.type == T.ANS_ERROR and ans.kind == E.REFUSED, ans
    for v in (VOL, VOL2):
        pair.ok(Msg(T.REQ_CREATE, volume_id=v, size_bytes=64 * MiB))
    paths = {VOL: pair.dir("staging/d1"), VOL2: pair.dir("staging/d2")}
    socks = [pair.sock]
    msgs = []
    for i, (v, p) in enumerate(paths.items()):
        m = stage(v, p)
        m.id = 1000 + i
        msgs.append(m)
        pair.sock.send(encode(m))
    got = {}
    pair.sock.settimeout(60)
    for _ in msgs:
        a = decode(pair.sock.recv(mh_wire.MSG_MAX + 1))
        got[a.id] = a
    assert sorted(got) == [1000, 1001] and all(a.type == T.ANS_STAGE for a in got.values()), got
    for v, p in paths.items():
        pair.ok(unstage(v, p))
    assert socks and not [ln for ln in loops("BACK-FILE") if pair.tmp in ln]


def test_core_gone_ends_the_helper(pair):
    """Without its core the helper cannot mount: it exits rather than answer for it."""
    pair.proc.kill()
    pair.proc.wait(10)
    pair.helper.wait(20)
    assert pair.helper.returncode != 0
    assert "capable core" in pair.helper_logs()


def test_stalled_core_leaves_the_main_loop_serving(pair):
    """The core busy (stopped here) with questions filling its channel: the helper's main
    loop still answers at once (it never blocks sending to the core), and every question
    is answered once the core goes on, each under its own id."""
    pair.proc.send_signal(signal.SIGSTOP)
    try:
        long = "/" + "/".join(["x" * 250] * 16)  # about 4 KB each way
        sent = []
        for i in range(16):
            m = publish("sv-%032x" % (0x100 + i), long + "%02d" % i, long + "t%02d" % i)
            m.id = 2000 + i
            pair.sock.send(encode(m))
            sent.append(m.id)
        time.sleep(1)  # the main loop has relayed what the channel takes
        pair.alive()
    finally:
        pair.proc.send_signal(signal.SIGCONT)
    pair.sock.settimeout(60)
    got = [decode(pair.sock.recv(mh_wire.MSG_MAX + 1)) for _ in sent]
    assert sorted(a.id for a in got) == sent
    assert all(a.type == T.ANS_ERROR for a in got), got  # no such volumes


def queued(pid, fd):
    """Datagrams waiting, unread, on pid's socket fd (ss: its receive queue)."""
    out = subprocess.run(["ss", "-x", "-a", "-p", "-n", "-H"], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        if "pid=%d,fd=%d)" % (pid, fd) in line:
            return int(line.split()[2])
    return 0


def test_stop_finishes_what_the_core_does(pair):
    """SIGTERM while a worker waits for the core: the helper waits for the core's answer
    and gives it, rather than FAILED for work the core then does. Held at its pause point
    before the format (the core has answered STAGE_CHECK), the worker is let go only once
    the core is stopped, and SIGTERM comes once its STAGE waits unread at the core."""
    staging = pair.dir("staging/f")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    gates = pair.path("data", "test-pause")
    os.makedirs(gates, mode=0o700, exist_ok=True)
    gate = os.path.join(gates, "mkfs@" + VOL)
    open(gate, "w").close()
    m = stage(VOL, staging)
    m.id = 3000
    pair.sock.send(encode(m))
    deadline = time.monotonic() + 30
    while "test_pause point=mkfs" not in pair.helper_logs():
        assert time.monotonic() < deadline, "the worker never reached the format"
        time.sleep(0.01)
    pair.proc.send_signal(signal.SIGSTOP)
    try:
        os.unlink(gate)
        while queued(pair.proc.pid, 3) == 0:  # formatted, its STAGE asked
            assert time.monotonic() < deadline, "the STAGE never reached the core"
            time.sleep(0.01)
        assert fs_type(pair.path("data/images", VOL + ".img")) == "ext4"
        assert "op=STAGE " not in pair.logs()
        pair.helper.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # time to misbehave: it must not answer or exit meanwhile
    finally:
        pair.proc.send_signal(signal.SIGCONT)
    pair.sock.settimeout(60)
    ans = decode(pair.sock.recv(mh_wire.MSG_MAX + 1))
    assert ans.id == 3000 and ans.type == T.ANS_STAGE, ans
    assert "result=ok" in core_did(pair, "STAGE", VOL)
    pair.helper.wait(30)


def test_copies_freeze_through_the_core_and_resize_refreshes(pair):
    """A snapshot and a clone of a staged volume are cut while the core holds its file
    system frozen (its FREEZE and THAW), and hold what was written before; RESIZE of a
    raw block volume in use gives the core's device the new size (its REFRESH)."""
    snap = "ss-" + "5" * 32
    staging = pair.dir("staging/g")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    pair.ok(stage(VOL, staging))
    with open(os.path.join(staging, "data"), "w") as f:
        f.write("before the snapshot")
    pair.ok(Msg(T.REQ_SNAPSHOT, snapshot_id=snap, volume_id=VOL))
    assert "result=ok" in core_did(pair, "FREEZE", VOL)
    assert "result=ok" in core_did(pair, "THAW", VOL)
    pair.ok(Msg(T.REQ_CLONE, volume_id=VOL2, source_kind=mh_wire.SRC_VOLUME, source_id=VOL,
                size_bytes=64 * MiB))
    assert len([ln for ln in pair.logs().splitlines() if "op=FREEZE" in ln]) == 2
    with open(os.path.join(staging, "data"), "w") as f:
        f.write("after")  # the volume is not frozen any more
    clone = pair.dir("staging/h")
    pair.ok(stage(VOL2, clone))
    with open(os.path.join(clone, "data")) as f:
        assert f.read() == "before the snapshot"
    for v, p in ((VOL, staging), (VOL2, clone)):
        pair.ok(unstage(v, p))
    # A raw block volume in use grows under its pod.
    vol3 = "sv-" + "3" * 32
    pair.ok(Msg(T.REQ_CREATE, volume_id=vol3, size_bytes=64 * MiB))
    node = pair.dir("staging/blk")
    pair.ok(stage(vol3, node, fs="", flags=mh_wire.F_BLOCK))
    pair.ok(Msg(T.REQ_RESIZE, volume_id=vol3, size_bytes=128 * MiB))
    assert "result=ok" in core_did(pair, "REFRESH", vol3)
    dev = [ln.split()[0] for ln in loops("NAME,BACK-FILE") if vol3 in ln]
    assert dev and all(int(subprocess.run(["blockdev", "--getsize64", d], capture_output=True,
                                          text=True, check=True).stdout) == 128 * MiB
                       for d in dev)
    pair.ok(unstage(vol3, node, flags=mh_wire.F_BLOCK))


def test_helper_holds_no_sys_admin_and_lists(pair):
    """With a core, the helper holds no capability and opens no loop device: it still lists
    what it made and where the core mounted it (the core lists the mounts), deletes what
    nothing uses, and refuses to delete what a device backs (the core tells it so)."""
    with open("/proc/%d/status" % pair.helper.pid) as f:
        eff = [int(ln.split()[1], 16) for ln in f if ln.startswith("CapEff:")][0]
    assert eff == 0, hex(eff)
    staging = pair.dir("staging/l")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    pair.ok(stage(VOL, staging))
    images = pair.ok(Msg(T.REQ_LIST, what=mh_wire.LIST_IMAGES, after="")).text
    mounted = pair.ok(Msg(T.REQ_LIST, what=mh_wire.LIST_MOUNTS, after="")).text
    assert VOL in images and VOL in mounted and staging in mounted, (images, mounted)
    ans = pair.call(Msg(T.REQ_DELETE, volume_id=VOL))
    assert ans.type == T.ANS_ERROR and ans.kind == E.BUSY, ans
    pair.ok(unstage(VOL, staging))
    pair.ok(Msg(T.REQ_DELETE, volume_id=VOL))


def test_raw_bytes_never_formatted(pair):
    """A volume a pod wrote raw (bytes no probe recognises) is never formatted by the
    helper nor mounted by the core when staged as a file system later; neither is its
    clone, which carries the mark the helper reads without a capability."""
    blk = pair.dir("staging/raw")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    pair.ok(stage(VOL, blk, fs="", flags=mh_wire.F_BLOCK))
    with open(os.path.join(blk, "dev"), "r+b") as f:
        f.seek(1 << 20)
        f.write(b"a database's own pages" * 100)
        os.fsync(f.fileno())
    pair.ok(unstage(VOL, blk, flags=mh_wire.F_BLOCK))
    pair.ok(Msg(T.REQ_CLONE, volume_id=VOL2, source_kind=mh_wire.SRC_VOLUME, source_id=VOL,
                size_bytes=64 * MiB))
    for v in (VOL, VOL2):
        img = pair.path("data/images", v + ".img")
        assert os.getxattr(img, "user.sepcsi.raw") == b"1"
        before = open(img, "rb").read()
        ans = pair.call(stage(v, pair.dir("staging/fs-" + v[-1])))
        assert ans.type == T.ANS_ERROR and ans.kind == E.PRECONDITION, ans
        assert open(img, "rb").read() == before


class OwnCore(Pair):
    """The helper alone, as the supervisor starts it: it starts its own core."""

    def start(self, expect_ready=True):
        os.chown(self.images, 0, 0)
        test_end, helper_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        peer = helper_peer.fileno()

        self.log = open(self.path("core.log"), "w")  # the core logs with the helper here
        self.hlog = open(self.path("helper.log"), "w")
        argv, keep = with_fds(
            [os.path.join(BIN, "sepcsi-mounthelper"), "--policy", self.policy, "--data-dir",
             self.data, "--log-level", "debug"], {3: peer})
        self.helper = subprocess.Popen(
            argv, pass_fds=keep, stdout=self.hlog, stderr=subprocess.STDOUT,
            start_new_session=True, env={"SEPCSI_TEST_PAUSE": "1", "LD_DEBUG_OUTPUT": "/x"})
        helper_peer.close()
        self.sock = test_end
        if expect_ready:
            self.alive()
            with open("/proc/%d/task/%d/children" % (self.helper.pid, self.helper.pid)) as f:
                kids = [int(p) for p in f.read().split()]
            self.proc = None
            for pid in kids:
                with open("/proc/%d/comm" % pid) as f:
                    if f.read().strip() == "sepcsi-core":
                        self.core_pid = pid
        return self


def test_helper_starts_its_core_private_and_bare():
    """Started as the supervisor starts it, the helper starts its core: the core gets no
    environment of the helper's but the tests' pause switch, and the images stay root's
    alone (0700), whichever of the two set their mode last."""
    p = OwnCore()
    try:
        p.start()
        with open("/proc/%d/environ" % p.core_pid, "rb") as f:
            assert f.read().split(b"\0") == [b"SEPCSI_TEST_PAUSE=1", b""]
        for d in ("images", "snapshots"):
            st = os.stat(p.path("data", d))
            assert (st.st_uid, st.st_mode & 0o777) == (0, 0o700), (d, oct(st.st_mode))
        p.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
        staging = p.dir("staging/own")
        p.ok(stage(VOL, staging))
        assert "done by the capable core" in p.helper_logs()
        p.ok(unstage(VOL, staging))
    finally:
        p.stop()
        cleanup_tree(p.tmp)
        os.close(p.lock)


# What a process of uid 0 without any capability tries, inside another's mount namespace
# (a compromised helper or runner): each line prints "refused" or what it reached.
CAPLESS_PROBE = """
import os, sys
def attempt(what, fn):
    try:
        fn()
        print(what, "DONE")
    except OSError as e:
        print(what, "refused", e.errno)
flusher, helper, root, other = sys.argv[1:5]
attempt("kubelet key through the flusher's root",
        lambda: open("/proc/%s/root%s/pki/kubelet.key" % (flusher, root)).read())
attempt("the helper's memory", lambda: open("/proc/%s/mem" % helper, "r+b").close())
attempt("the helper's descriptors", lambda: os.readlink("/proc/%s/fd/3" % helper))
attempt("the helper's root", lambda: os.listdir("/proc/%s/root/" % helper))
attempt("rename /dev", lambda: os.rename("/dev", "/dev.h"))
attempt("mkdir in the root", lambda: os.mkdir("/x"))
if other != "-":
    attempt("another root process's root", lambda: os.listdir("/proc/%s/root/" % other))
"""


def test_no_capability_less_root_process_reaches_the_core_or_the_helper():
    """uid 0 without capabilities is all a compromised helper, its runner or a tool is: from
    their views, nothing of the core's (its view, through its flusher's /proc/<pid>/root),
    the helper's (memory, descriptors) or of the helper's root tmpfs (its /dev, which the
    core once shared) is reachable, and the core's root is a tmpfs of its own; nor, from
    the helper's, any other root process without capabilities (a root pod that dropped
    them all): its view has no /proc. (The tool runner keeps one: it reopens the images it
    is handed through /proc/self/fd.)"""
    p = OwnCore()
    other = subprocess.Popen(["setpriv", "--bounding-set=-all", "--inh-caps=-all",
                              "--ambient-caps=-all", "sleep", "60"])
    try:
        p.start()
        deadline, flusher = time.monotonic() + 20, None
        while not flusher:  # the core forks it once its start-up is done
            assert time.monotonic() < deadline, "the core started no flusher"
            with open("/proc/%d/task/%d/children" % (p.core_pid, p.core_pid)) as f:
                flusher = (f.read().split() or [None])[0]
            time.sleep(0.02)
        kids = [int(k) for k in open("/proc/%d/task/%d/children" % (p.helper.pid,
                                                                    p.helper.pid)).read().split()]
        runner = [k for k in kids if open("/proc/%d/comm" % k).read().strip() == "sepcsi-runner"]
        assert os.stat("/proc/%d/root/" % p.core_pid).st_dev != \
            os.stat("/proc/%d/root/" % p.helper.pid).st_dev
        for pid, victim in [(p.helper.pid, str(other.pid))] + [(r, "-") for r in runner]:
            out = subprocess.run(
                ["nsenter", "-t", str(pid), "-m", "--", "setpriv", "--bounding-set=-all",
                 "--inh-caps=-all", "--ambient-caps=-all", "/usr/bin/python3", "-c",
                 CAPLESS_PROBE, flusher, str(p.helper.pid), p.root, victim],
                capture_output=True, text=True, timeout=60)
            lines = out.stdout.splitlines()
            assert len(lines) == (7 if victim != "-" else 6), (pid, out)
            assert all(" refused " in ln for ln in lines), (pid, out)
        with open(p.path("root", "pki/kubelet.key"), "rb") as f:
            assert f.read() == SECRETS["pki/kubelet.key"]
    finally:
        other.kill()
        other.wait()
        p.stop()
        cleanup_tree(p.tmp)
        os.close(p.lock)


def test_a_data_directory_in_kubelets_tree_is_refused():
    """--data-dir inside an allowed root or a directory base (or one inside it), also
    through a symbolic link: the helper refuses to start, as for a broken policy (exit 2,
    saying why), before it makes anything there."""
    c = Core()
    try:
        # Through symbolic links too: into the root, and to a parent of it.
        os.symlink(c.root, os.path.join(c.tmp, "to-root"))
        os.symlink(c.tmp, os.path.join(c.tmp, "to-tmp"))
        for data in (c.path("root", "sepcsi"), os.path.dirname(c.root),
                     os.path.join(c.tmp, "to-root", "sepcsi", "data"),
                     os.path.join(c.tmp, "to-tmp")):
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            fd = b.fileno()
            argv, keep = with_fds([os.path.join(BIN, "sepcsi-mounthelper"), "--policy",
                                   c.policy, "--data-dir", data], {3: fd})
            res = subprocess.run(argv, pass_fds=keep, capture_output=True, text=True,
                                 timeout=60)
            a.close()
            b.close()
            assert res.returncode == 2 and "overlap" in res.stderr, res
        assert not os.path.exists(c.path("root", "sepcsi"))
        assert not os.path.exists(os.path.join(c.tmp, "to-root", "sepcsi"))
        # A directory base reached through a link to the data directory (or in it).
        os.symlink(c.data, os.path.join(c.tmp, "to-data"))
        with open(c.policy, "a") as f:
            f.write("[directories]\nbase_dirs = %s\n" % os.path.join(c.tmp, "to-data", "dirs"))
        res = subprocess.run(
            [os.path.join(BIN, "sepcsi-mounthelper"), "--policy", c.policy, "--data-dir",
             c.data], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and "base directory" in res.stderr, res
        assert not os.path.exists(c.path("data", "dirs"))
    finally:
        cleanup_tree(c.tmp)
        os.close(c.lock)


def test_an_old_mark_it_cannot_upgrade_keeps_the_image_raw():
    """An image an earlier release marked raw (trusted.* alone, which the helper cannot
    read once it is no longer root), whose attribute space an earlier helper (its owner)
    filled with user.* attributes of its own, so that the mark the helper reads does not
    fit: the helper starts all the same (one image must not stop the driver), logs it, and
    takes the image as raw: a STAGE as a file system never formats its bytes."""
    p = OwnCore()
    img = p.image(VOL, fs=None, uid=0)
    with open(img, "r+b") as f:
        f.write(b"a database's own pages" * 100)
    os.setxattr(img, "trusted.sepcsi.raw", b"1")
    pads = 0
    for size in (200, 16, 1):  # the space filled to its last bytes
        try:
            while pads < 10000:
                os.setxattr(img, "user.p%d" % pads, b"x" * size)
                pads += 1
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    assert 0 < pads < 10000  # the data directory's file system has room for few
    with pytest.raises(OSError):
        os.setxattr(img, "user.sepcsi.raw", b"1")  # as the upgrade will find it
    with open(img, "rb") as f:
        before = f.read()
    try:
        p.start()
        logs = p.helper_logs()
        assert "raw_mark_not_upgraded" in logs and VOL in logs, logs
        ans = p.call(stage(VOL, p.dir("staging/s")))
        assert ans.type == T.ANS_ERROR, ans
        with open(img, "rb") as f:
            assert f.read() == before
    finally:
        p.stop()
        cleanup_tree(p.tmp)
        os.close(p.lock)


def test_stats_holds_no_key(pair):
    """STATS, given to a worker when the core answers it, neither waits for nor blocks
    another request on its volume: it is never BUSY for one in flight, nor makes one BUSY
    (the main loop answered it at once before the core, holding nothing)."""
    staging = pair.dir("staging/s")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    pair.ok(stage(VOL, staging))
    for first, second in ((stats(VOL, staging), expand(VOL, staging)),
                          (expand(VOL, staging), stats(VOL, staging))):
        pair.proc.send_signal(signal.SIGSTOP)  # both wait at the core
        try:
            for i, m in enumerate((first, second)):
                m.id = 4000 + i
                pair.sock.send(encode(m))
            time.sleep(0.5)
        finally:
            pair.proc.send_signal(signal.SIGCONT)
        pair.sock.settimeout(60)
        got = {a.id: a for a in (decode(pair.sock.recv(mh_wire.MSG_MAX + 1)) for _ in "ab")}
        assert sorted(got) == [4000, 4001]
        assert not any(a.type == T.ANS_ERROR and a.kind == E.BUSY for a in got.values()), got
    pair.ok(unstage(VOL, staging))


def core_audits(pair, op):
    return [ln for ln in pair.logs().splitlines()
            if "audit" in ln and "op=%s " % op in ln and VOL in ln]


def held_until_the_core_answers(pair, op, dev, ask):
    """ask() with dev held open by the test until the core has answered op with EALREADY
    (it never waits for the device itself); then the core's first and last op."""
    fd = os.open(dev, os.O_RDONLY)

    def let_go():
        deadline = time.monotonic() + 60  # a bound for slow machines, not a figure
        while not [ln for ln in core_audits(pair, op) if "errno=%d" % errno.EALREADY in ln]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        os.close(fd)

    t = threading.Thread(target=let_go)
    t.start()
    try:
        ask()
    finally:
        t.join()
    return core_audits(pair, op)[-2:]


@pytest.mark.parametrize("block", [False, True], ids=["fs", "block"])
def test_a_held_device_is_waited_for_by_the_helper_not_the_core(pair, block):
    """UNSTAGE of a volume whose loop device another process holds open (udev's probe right
    after an unmount; a reader): the core never waits in its one thread. It answers BUSY
    with EALREADY at once, and the helper's worker waits for the device to go, then asks
    again: a holder that lets go within the helper's bound costs the CO nothing (OK, and
    the rest done: an ephemeral volume's directory removed). One that holds on past it
    gets BUSY, as before; the CO's retry is answered OK (a raw block device, pinned again
    while held, BUSY until the holder is gone), with the device still counted by the
    core's ATTACHED until its holder closes it: the image is not deleted meanwhile."""
    img = pair.path("data/images", VOL + ".img")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    if block:
        path, fs, up, down = pair.dir("blk/a"), "", F_BLOCK, F_BLOCK
    else:
        pair.dir("pods/e")
        path, fs = pair.path("root", "pods/e/mount"), "ext4"
        up, down = F_CREATE_DIR, F_REMOVE_DIR

    # Let go once the core has answered: the helper's wait, not the core's, sees it gone.
    pair.ok(stage(VOL, path, fs=fs, flags=up))
    [dev] = [ln.split()[0] for ln in loops_of(img)]
    first, last = held_until_the_core_answers(pair, "UNSTAGE", dev,
                                              lambda: pair.ok(unstage(VOL, path, flags=down)))
    assert "kind=BUSY" in first and "errno=%d" % errno.EALREADY in first, first
    assert "result=ok" in last, last
    assert loops_of(img) == [] and not os.path.lexists(os.path.join(path, "dev") if block
                                                       else path)

    # Held past the helper's bound: BUSY; the retry OK, the device counted until it goes.
    pair.ok(stage(VOL, path, fs=fs, flags=up))
    [dev] = [ln.split()[0] for ln in loops_of(img)]
    fd = os.open(dev, os.O_RDONLY)
    try:
        ans = pair.call(unstage(VOL, path, flags=down))
        assert ans.type == T.ANS_ERROR and ans.kind == E.BUSY, ans
        assert ans.sys_errno == errno.EALREADY and "held open elsewhere" in ans.reason, ans
        if block:  # pinned again while held (mh_loop.c): BUSY until the holder is gone
            ans = pair.call(unstage(VOL, path, flags=down))
            assert ans.type == T.ANS_ERROR and ans.sys_errno == errno.EALREADY, ans
        else:
            pair.ok(unstage(VOL, path, flags=down))
        assert len(loops_of(img)) == 1
        ans = pair.call(Msg(T.REQ_DELETE, volume_id=VOL))  # the core's ATTACHED counts it
        assert ans.type == T.ANS_ERROR and ans.kind == E.BUSY and os.path.exists(img), ans
    finally:
        os.close(fd)
    if block:  # the holder gone: the next UNSTAGE detaches it, its pin first
        pair.ok(unstage(VOL, path, flags=down))
    deadline = time.monotonic() + 10  # a bound for slow machines, not a figure
    while loops_of(img) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loops_of(img) == []
    pair.ok(Msg(T.REQ_DELETE, volume_id=VOL))


def test_a_held_read_only_publication_device_is_waited_for_at_unpublish(pair):
    """A read-only publication of a read-write raw block staging has a loop device of its
    own, beside the staging's, detached at UNPUBLISH. Held open there, the core answers
    BUSY with EALREADY at once; the helper waits until fewer devices back the image (the
    staging's stays), then asks again: OK, the target removed, the staging's device kept."""
    img = pair.path("data/images", VOL + ".img")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    st, pods = pair.dir("blk/s"), pair.dir("blk/p")
    target = os.path.join(pods, "pod1")
    pair.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    staging_dev = os.stat(os.path.join(st, "dev")).st_rdev
    pair.ok(Msg(T.REQ_PUBLISH, volume_id=VOL, staging_path=st, target_path=target,
                flags=F_BLOCK, readonly=1))
    ro_dev = os.stat(target).st_rdev
    assert ro_dev != staging_dev and len(loops_of(img)) == 2
    [ro_name] = [ln.split()[0] for ln in loops_of(img)
                 if os.stat(ln.split()[0]).st_rdev == ro_dev]
    first, last = held_until_the_core_answers(pair, "UNPUBLISH", ro_name,
                                              lambda: pair.ok(unpublish(VOL, target)))
    assert "errno=%d" % errno.EALREADY in first and "result=ok" in last, (first, last)
    assert not os.path.lexists(target)
    assert [os.stat(ln.split()[0]).st_rdev for ln in loops_of(img)] == [staging_dev]
    pair.ok(unstage(VOL, st, flags=F_BLOCK))
    assert loops_of(img) == []
