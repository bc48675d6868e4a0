"""Acting as a compromised rpcd would, through the real supervisor and helper.

HostileDriver starts the real sepcsi-supervisor and sepcsi-mounthelper with
hostile_rpcd.py in rpcd's place (installed as sepcsi-rpcd in a root-owned
copy of the bin directory, so the supervisor spawns it exactly as it spawns
rpcd: uid 65532, no capabilities, fd 3 to the helper, fd 4 to itself).
HostileRpcd is a test's end of the stand-in's relay: whatever it sends goes
byte for byte to the helper's fd 3, and what the helper answers comes back.

    hd = HostileDriver()                  # or the hostile_driver fixture
    r = hd.rpcd                           # connected to the stand-in now running
    r.call(Msg(T.REQ_PING))               # -> Msg(ANS_PING, ...), strictly decoded
    r.send_raw(mh_wire.VIOLATIONS["empty"])
    r = hd.wait_new_rpcd(old_pid)         # the supervisor's next stand-in
    hd.children()                         # {"sepcsi-mounthel": pid, "sepcsi-rpcd": pid}

Everything waits with a deadline and fails with AssertionError or
TimeoutError, never hangs.
"""
import collections
import json
import os
import select
import socket
import stat
import time

import mh_wire
from conftest import Driver, copy_bin_dir
from hostile_rpcd import relay_name

HELPER = "sepcsi-mounthel"  # /proc/<pid>/comm keeps 15 characters
RPCD = "sepcsi-rpcd"
STAND_IN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_rpcd.py")


class RelayClosed(Exception):
    """The stand-in is gone (killed, or exited)."""


class ChannelClosed(Exception):
    """The helper closed the stand-in's channel (end of file on its fd 3)."""


class HostileRpcd:
    """A connection to the relay of one hostile stand-in rpcd."""

    def __init__(self, state_dir, timeout=20, not_pid=None):
        """Connect to the stand-in started with state_dir; with not_pid, wait
        until that is not the one answering (an old one that is being killed)."""
        deadline = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
            try:
                self.sock.connect(relay_name(state_dir))
                kind, body = self._read(max(0.1, deadline - time.monotonic()))
                assert kind == b"H", "the relay did not say hello: %r" % kind
                hello = json.loads(body)
                if hello["pid"] != not_pid:
                    break
            except (OSError, RelayClosed, TimeoutError):
                pass
            self.sock.close()
            if time.monotonic() >= deadline:
                raise TimeoutError("no hostile rpcd (other than %s) to connect to" % not_pid)
            time.sleep(0.01)
        self.pid = hello["pid"]
        self.hello = hello
        self.inbox = collections.deque()  # (kind, body) that arrived while waiting for "A"
        self.events = []  # control messages the stand-in saw, as dicts
        self.unclaimed = []  # answers call() read that were not the one it waited for
        self.next_id = 1

    def close(self):
        self.sock.close()

    def _read(self, timeout):
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            raise TimeoutError("nothing from the hostile rpcd in %ss" % timeout)
        try:
            data = self.sock.recv(1 << 17)
        except OSError:
            data = b""
        if not data:
            raise RelayClosed("the hostile rpcd is gone")
        return data[:1], data[1:]

    def _command(self, cmd, timeout=30):
        self.sock.send(cmd)
        deadline = time.monotonic() + timeout
        while True:
            kind, body = self._read(max(0, deadline - time.monotonic()))
            if kind == b"A":
                return json.loads(body)
            self._keep(kind, body)

    def _keep(self, kind, body):
        if kind == b"C":
            self.events.append(json.loads(body))
        else:
            self.inbox.append((kind, body))

    def _send_on(self, tag, what, data):
        try:
            res = self._command(tag + bytes(data))
        except RelayClosed:
            return None
        if res.get("error"):
            raise OSError("send on %s: %s" % (what, res["error"]))
        return res["sent"]

    def send_raw(self, data):
        """Send data on fd 3 exactly as given (empty, oversized, garbage...).
        Returns how many bytes the kernel took, or None if the stand-in was
        killed before it could say (as it is for a violation the helper
        reports at once); OSError names a failed send."""
        return self._send_on(b"D", "fd 3", data)

    def send_control(self, data):
        """Send data on fd 4, to the supervisor, exactly as given; returns as send_raw."""
        return self._send_on(b"K", "fd 4", data)

    def status(self):
        """{pid, channel, helper_failed, peer_eof} as the stand-in sees them."""
        return self._command(b"Q")

    def send(self, msg):
        """Encode and send msg; an id of 0 is replaced by the next free one. Returns the id."""
        if msg.id == 0:
            msg.id = self.next_id
            self.next_id += 1
        self.send_raw(mh_wire.encode(msg))
        return msg.id

    def recv_raw(self, timeout=30):
        """The next datagram from the helper; ChannelClosed at end of file."""
        deadline = time.monotonic() + timeout
        while True:
            if self.inbox:
                kind, body = self.inbox.popleft()
            else:
                kind, body = self._read(max(0, deadline - time.monotonic()))
                if kind == b"C":
                    self._keep(kind, body)
                    continue
            if kind == b"E":
                raise ChannelClosed("the helper closed the channel")
            assert kind == b"D", "unexpected relay message %r" % kind
            return body

    def recv(self, timeout=30):
        """The next message from the helper, strictly decoded (mh_wire.WireError if not)."""
        return mh_wire.decode(self.recv_raw(timeout))

    def call(self, msg, timeout=60):
        """Send msg, return the answer with its id. Answers to other ids that
        arrive meanwhile are kept in self.unclaimed."""
        id_ = self.send(msg)
        deadline = time.monotonic() + timeout
        while True:
            ans = self.recv(max(0, deadline - time.monotonic()))
            if ans.id == id_:
                return ans
            self.unclaimed.append(ans)

    def ping(self, timeout=30):
        """True if the helper answers a PING on this channel."""
        return self.call(mh_wire.Msg(mh_wire.T.REQ_PING), timeout).type == mh_wire.T.ANS_PING


def install_stand_in(bin_dir, name="sepcsi-rpcd"):
    """Put hostile_rpcd.py into bin_dir as name (root-owned, 0755)."""
    path = os.path.join(bin_dir, name)
    with open(STAND_IN) as src, open(path, "w") as dst:
        dst.write(src.read())
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


class HostileDriver:
    """The real supervisor and helper, with a hostile stand-in as rpcd."""

    def __init__(self, extra_args=(), **driver_kwargs):
        self.bin_dir = copy_bin_dir()
        install_stand_in(self.bin_dir)
        self.driver = Driver(extra_args=extra_args, bin_dir=self.bin_dir, wait=False,
                             **driver_kwargs)
        self.rpcd = None
        self.rpcd = self.connect()

    def connect(self, not_pid=None, timeout=20):
        """Connect (again) to the stand-in the supervisor runs now; it becomes self.rpcd."""
        if self.rpcd is not None:
            self.rpcd.close()
        self.rpcd = HostileRpcd(self.driver.state, timeout, not_pid)
        return self.rpcd

    def wait_new_rpcd(self, old_pid, timeout=30):
        """Wait until the supervisor runs a stand-in other than old_pid, and connect to it."""
        deadline = time.monotonic() + timeout
        while self.children().get(RPCD) in (None, old_pid):
            if time.monotonic() >= deadline:
                raise TimeoutError("no new rpcd after %s within %ss" % (old_pid, timeout))
            time.sleep(0.005)
        r = self.connect(not_pid=old_pid, timeout=max(1, deadline - time.monotonic()))
        assert r.pid == self.children().get(RPCD), "connected to a stand-in that is not the child"
        return r

    def children(self):
        return self.driver.children()

    def helper_pid(self):
        return self.children().get(HELPER)

    def logs(self):
        return self.driver.logs()

    def stop(self):
        if self.rpcd is not None:
            self.rpcd.close()
        return self.driver.stop()

    def cleanup(self):
        self.driver.cleanup()
        for name in os.listdir(self.bin_dir):
            os.unlink(os.path.join(self.bin_dir, name))
        os.rmdir(self.bin_dir)
