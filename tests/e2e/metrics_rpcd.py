#!/usr/bin/python3 -I
"""A stand-in for sepcsi-rpcd that only sends metrics reports: a compromised
rpcd, as far as the supervisor's metrics file can tell.

The supervisor runs it like rpcd (uid 65532, no capabilities, a cleared
environment, fd 3 = the channel to the helper, left alone here, fd 4 = the
control channel). It sends READY on fd 4, then each report of the JSON list
beside it (<this program>.json, strings whose characters are the bytes to
send) exactly as rpcd sends one (rpcd/rpcd_metrics.c): in a memfd sealed
against write, grow, shrink and further seals, passed with SUP_CTL_METRICS.
The reports go 0.7 s apart, since the supervisor reads at most two a second.
It then logs "all reports sent" and waits until the supervisor closes fd 4.
This file is installed as sepcsi-rpcd in a root-owned copy of the bin
directory (test_metrics.py); it imports nothing from the tests.
"""
import fcntl
import json
import os
import socket
import sys
import time

FD_CONTROL = 4
CTL_READY, CTL_METRICS = 1, 5
SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL


def log(msg):
    sys.stderr.write("metrics-rpcd[%d]: %s\n" % (os.getpid(), msg))
    sys.stderr.flush()


def send_report(ctl, data):
    fd = os.memfd_create("sepcsi-metrics", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
        socket.send_fds(ctl, [bytes([CTL_METRICS])], [fd])
    finally:
        os.close(fd)


def main():
    with open(os.path.abspath(sys.argv[0]) + ".json") as f:
        reports = [r.encode("latin-1") for r in json.load(f)]
    ctl = socket.socket(fileno=os.dup(FD_CONTROL))
    os.close(FD_CONTROL)
    ctl.send(bytes([CTL_READY]))
    for i, data in enumerate(reports):
        time.sleep(0.7)
        send_report(ctl, data)
        log("report %d sent (%d bytes)" % (i, len(data)))
    log("all reports sent")
    while True:
        data, fds, _, _ = socket.recv_fds(ctl, 16, 4)
        for fd in fds:
            os.close(fd)
        if not data:
            log("the supervisor closed the control channel; exiting")
            return


if __name__ == "__main__":
    main()
