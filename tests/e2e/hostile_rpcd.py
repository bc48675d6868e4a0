#!/usr/bin/python3 -I
"""A stand-in for sepcsi-rpcd that does whatever a test tells it: a compromised
rpcd, as far as the helper and the supervisor can tell.

The supervisor runs it like rpcd (uid 65532, no capabilities, a cleared
environment, the flags it gives rpcd), with fd 3 = the channel to the helper
and fd 4 = the control channel. It serves no CSI. It sends READY on fd 4, then
relays between fd 3 and one test at a time, connected to an abstract unix
socket (SOCK_SEQPACKET) whose name derives from --state-dir (relay_name()),
so that the stand-in the supervisor starts after a restart is found the same
way. It takes a new fd 3 whenever the supervisor sends PEER_FD (the helper
was restarted) and notes HELPER_FAILED.

The relay speaks in datagrams that start with one tag byte:

  test -> stand-in                      stand-in -> test
  D<bytes>  send <bytes> on fd 3,       H<json>   on connect: the status (below)
            exactly (may be empty)      A<json>   answer to D, K or Q: {sent, error}
  K<bytes>  send <bytes> on fd 4 (to              or the status {pid, channel,
            the supervisor), exactly              helper_failed, peer_eof}
  Q         ask for the status          D<bytes>  a datagram the helper sent on fd 3
                                        E         end of file on fd 3
                                        C<json>   a control message: {event: peer_fd,
                                                  helper_failed, or bad with its bytes}

Datagrams from the helper that arrive while no test is connected are kept
and delivered to the next one. This file is installed as sepcsi-rpcd in a
root-owned copy of the bin directory; it imports nothing from the tests.
"""
import array
import errno
import hashlib
import json
import os
import select
import socket
import sys

FD_PEER, FD_CONTROL = 3, 4
CTL_READY, CTL_PEER_FD, CTL_HELPER_FAILED = 1, 2, 3
MAX_DATAGRAM = 1 << 17  # far more than the protocol's maximum: oversized ones pass whole


def relay_name(state_dir):
    """The abstract socket name of the stand-in started with --state-dir state_dir."""
    return b"\0sepcsi-hostile-rpcd-" + hashlib.sha256(state_dir.encode()).hexdigest()[:32].encode()


def recv_or_end(sock):
    """One datagram; b"" at end of file or when the socket broke."""
    try:
        return sock.recv(MAX_DATAGRAM)
    except OSError:
        return b""


def log(msg):
    sys.stderr.write("hostile-rpcd[%d]: %s\n" % (os.getpid(), msg))
    sys.stderr.flush()


class Relay:
    def __init__(self, state_dir):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.listener.bind(relay_name(state_dir))
        self.listener.listen(4)
        self.peer = socket.socket(fileno=os.dup(FD_PEER))
        os.close(FD_PEER)
        self.ctl = socket.socket(fileno=os.dup(FD_CONTROL))
        os.close(FD_CONTROL)
        self.test = None
        self.pending = []  # for the next test, while none is connected
        self.channel = 1  # the channels this stand-in has had: fd 3, then each PEER_FD
        self.helper_failed = False
        self.peer_eof = False

    def status(self):
        return {"pid": os.getpid(), "channel": self.channel, "helper_failed": self.helper_failed,
                "peer_eof": self.peer_eof}

    def to_test(self, data):
        if self.test is None:
            self.pending.append(data)
            return
        try:
            self.test.send(data)
        except OSError:
            self.drop_test()
            self.pending.append(data)

    def drop_test(self):
        if self.test is not None:
            self.test.close()
            self.test = None

    def accept(self):
        conn, _ = self.listener.accept()
        self.drop_test()  # one test at a time: the newest wins
        self.test = conn
        conn.send(b"H" + json.dumps(self.status()).encode())
        pending, self.pending = self.pending, []
        for data in pending:
            self.to_test(data)

    def from_test(self):
        data = recv_or_end(self.test)
        if not data:
            self.drop_test()
            return
        if data[:1] == b"Q":
            self.test.send(b"A" + json.dumps(self.status()).encode())
        elif data[:1] in (b"D", b"K"):
            res = {"sent": None}
            try:
                res["sent"] = (self.peer if data[:1] == b"D" else self.ctl).send(data[1:])
            except OSError as e:
                res["error"] = errno.errorcode.get(e.errno, str(e.errno))
            self.test.send(b"A" + json.dumps(res).encode())
        else:
            log("unknown relay command %r" % data[:1])
            self.drop_test()

    def from_helper(self):
        data = recv_or_end(self.peer)
        # SOCK_SEQPACKET: 0 bytes is an empty datagram or end of file; the helper
        # never sends an empty one, so here it is the end.
        if not data:
            self.peer_eof = True
            log("end of file on the helper channel %d" % self.channel)
            self.to_test(b"E")
            return
        self.to_test(b"D" + data)

    def from_supervisor(self):
        fds = array.array("i")
        try:
            data, anc, _, _ = self.ctl.recvmsg(16, socket.CMSG_SPACE(4 * fds.itemsize))
        except OSError as e:
            log("control channel: %s; exiting" % e)
            sys.exit(1)
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        if not data:
            log("the supervisor closed the control channel; exiting")
            sys.exit(0)
        if data == bytes([CTL_PEER_FD]) and len(fds) == 1:
            self.peer.close()
            self.peer = socket.socket(fileno=fds[0])
            self.channel += 1
            self.peer_eof = False
            log("new helper channel %d" % self.channel)
            self.to_test(b"C" + json.dumps({"event": "peer_fd", "channel": self.channel})
                         .encode())
            return
        for fd in fds:
            os.close(fd)
        if data == bytes([CTL_HELPER_FAILED]) and not fds:
            self.helper_failed = True
            self.to_test(b"C" + json.dumps({"event": "helper_failed"}).encode())
        else:
            self.to_test(b"C" + json.dumps({"event": "bad", "data": data.hex()}).encode())

    def run(self):
        self.ctl.send(bytes([CTL_READY]))
        log("ready, relaying on %r" % self.listener.getsockname())
        while True:
            rd = [self.listener, self.ctl]
            if not self.peer_eof:
                rd.append(self.peer)
            if self.test is not None:
                rd.append(self.test)
            ready, _, _ = select.select(rd, [], [])
            # The control channel first: a new helper channel replaces the old at once.
            if self.ctl in ready:
                self.from_supervisor()
                continue
            if self.listener in ready:
                self.accept()
            if self.test is not None and self.test in ready:
                self.from_test()
            if self.peer in ready:
                self.from_helper()


def state_dir_arg(argv):
    for i, a in enumerate(argv):
        if a == "--state-dir" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--state-dir="):
            return a.split("=", 1)[1]
    log("no --state-dir in %r" % argv)
    sys.exit(2)


if __name__ == "__main__":
    Relay(state_dir_arg(sys.argv[1:])).run()
