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
import fcntl
import os
import signal
import socket
import subprocess
import time

import pytest

import mh_wire
from conftest import BIN, cleanup_tree
from mh_wire import E, Msg, T, decode, encode
from test_core import (MiB, Core, expand, loops, mounts, publish, stage, stats, unpublish,
                       unstage)

VOL = "sv-" + "0" * 31 + "a"
VOL2 = "sv-" + "0" * 31 + "b"


class Pair(Core):
    """A core (its images root's, as the helper makes them) and a helper asking it."""

    def start(self):
        os.chown(self.images, 0, 0)
        core_end, helper_core = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        test_end, helper_peer = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pol = self.compiled()
        core_chan = core_end.fileno()

        def core_fds():
            chan, p = fcntl.fcntl(core_chan, fcntl.F_DUPFD, 10), fcntl.fcntl(
                pol, fcntl.F_DUPFD, 10)
            os.dup2(chan, 3)
            os.dup2(p, 5)
        self.log = open(self.path("core.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(BIN, "sepcsi-core"), "--data-dir", self.data, "--owner", "0",
             "--policy-fd", "5", "--log-level", "debug"],
            pass_fds=(3, 5), preexec_fn=core_fds, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        core_end.close()
        os.close(pol)
        peer, core = helper_peer.fileno(), helper_core.fileno()

        def helper_fds():
            p, c = fcntl.fcntl(peer, fcntl.F_DUPFD, 10), fcntl.fcntl(core, fcntl.F_DUPFD, 10)
            os.dup2(p, 3)
            os.dup2(c, 6)
        self.hlog = open(self.path("helper.log"), "w")
        self.helper = subprocess.Popen(
            [os.path.join(BIN, "sepcsi-mounthelper"), "--policy", self.policy, "--data-dir",
             self.data, "--core-fd", "6", "--log-level", "debug"],
            pass_fds=(3, 6), preexec_fn=helper_fds, stdout=self.hlog,
            stderr=subprocess.STDOUT, start_new_session=True)
        helper_peer.close()
        helper_core.close()
        self.sock = test_end
        self.alive()
        return self

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


def fs_type(path):
    return subprocess.run(["blkid", "-o", "value", "-s", "TYPE", path], capture_output=True,
                          text=True).stdout.strip()


def core_did(pair, op, vid):
    """The core's own audit line of op for vid, with its result."""
    lines = [ln for ln in pair.logs().splitlines()
             if "audit" in ln and "op=" + op in ln and vid in ln]
    assert lines, "the core did no %s of %s:\n%s" % (op, vid, pair.logs())
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
    assert st.bytes_total > 32 * MiB and "result=ok" in core_did(pair, "STATS", VOL)
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


def test_blank_read_only_and_foreign_signature_refused(pair):
    """The helper's own refusals come before the core is asked: a blank image staged
    read-only, and an image holding another file system's signature (never formatted)."""
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
    assert "op=STAGE" not in pair.logs()


def test_refused_stage_formats_nothing(pair):
    """What the core would refuse (a path outside the patterns, a file system or mount
    option outside the policy) is refused before the helper formats a blank image."""
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=320 * MiB))
    img = pair.path("data/images", VOL + ".img")
    for msg in (stage(VOL, "/etc/not-allowed", fs="xfs"),
                stage(VOL, pair.dir("staging/e"), fs="vfat"),
                stage(VOL, pair.dir("staging/e"), mount_flags="suid")):
        ans = pair.call(msg)
        assert ans.type == T.ANS_ERROR and ans.kind == E.REFUSED, (msg, ans)
        assert not open(img, "rb").read(1 << 16).strip(b"\0"), msg


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


def test_stop_finishes_what_the_core_does(pair):
    """SIGTERM while a worker waits for the core: the helper waits for the core's answer
    and gives it, rather than FAILED for work the core then does."""
    staging = pair.dir("staging/f")
    pair.ok(Msg(T.REQ_CREATE, volume_id=VOL, size_bytes=64 * MiB))
    pair.proc.send_signal(signal.SIGSTOP)
    try:
        m = stage(VOL, staging)
        m.id = 3000
        pair.sock.send(encode(m))
        img, deadline = pair.path("data/images", VOL + ".img"), time.monotonic() + 30
        while fs_type(img) != "ext4" and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # formatted, the question is with the core
        pair.helper.send_signal(signal.SIGTERM)
        time.sleep(0.5)
    finally:
        pair.proc.send_signal(signal.SIGCONT)
    pair.sock.settimeout(60)
    ans = decode(pair.sock.recv(mh_wire.MSG_MAX + 1))
    assert ans.id == 3000 and ans.type == T.ANS_STAGE, ans
    assert "result=ok" in core_did(pair, "STAGE", VOL)
    pair.helper.wait(30)
