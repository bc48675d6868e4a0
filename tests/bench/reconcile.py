#!/usr/bin/python3
"""Benchmark: how long rpcd's reconciliation takes with many volumes on the node.
Run as root inside a private mount namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/reconcile.py [--held 600,1500] [--runs 3]

For each count H, a fresh sepcsi gets H raw block volumes created, staged and
published (as held.py places them), then rpcd is killed with SIGKILL, --runs
times, each kill the first in the supervisor's restart window (so rpcd is
restarted at once): the time from the kill to the new rpcd's `reconciled` log
line is printed. Reconciliation asks the helper for every image, snapshot and
mount it made (LIST, page by page) and compares them with the store.
Prints figures; asserts no timing. Exit status 0 when every run reconciled.
"""
import argparse
import os
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import held  # noqa: E402
import side_by_side as sbs  # noqa: E402
from side_by_side import conftest  # noqa: E402

WAIT_SECONDS = 120


def start(tmp):
    """sepcsi as side_by_side starts it, at log level info (the `reconciled` line) and with
    a restart window short enough that each kill is the first in it."""
    d = os.path.join(tmp, "sepcsi")
    os.makedirs(d)
    sock = os.path.join(d, "sock", "csi.sock")
    argv = [os.path.join(conftest.BIN, "sepcsi-supervisor"), "--endpoint", "unix://" + sock,
            "--node-id", "bench-node", "--state-dir", os.path.join(d, "state"),
            "--data-dir", os.path.join(d, "data"), "--log-level", "info",
            "--restart-window", "1"]
    return sbs.Driver("sepcsi", argv, d, "unix://" + sock)


def rpcd_pid(d):
    for p in sbs.process_tree(d.proc.pid):
        with open("/proc/%d/comm" % p) as f:
            if f.read().strip() == "sepcsi-rpcd":
                return p
    return None


def one_kill(d):
    """Seconds from kill -9 of rpcd to its successor's `reconciled` line, or None."""
    size = os.path.getsize(d.log_path)
    t0 = time.monotonic()
    os.kill(rpcd_pid(d), signal.SIGKILL)
    while time.monotonic() - t0 < WAIT_SECONDS:
        with open(d.log_path) as f:
            f.seek(size)
            if "reconciled" in f.read():
                return time.monotonic() - t0
        time.sleep(0.002)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--held", default="600,1500")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-c", "--clients", type=int, default=8)
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    tmp = tempfile.mkdtemp(prefix="sepcsi-reconcile-")
    os.chmod(tmp, 0o755)  # rpcd (uid 65532) must reach its store and socket
    sbs.kubelet_tree()
    failed = False
    for count in (int(x) for x in opts.held.split(",")):
        work = tempfile.mkdtemp(dir=tmp)
        os.chmod(work, 0o755)
        d = start(work)
        try:
            _, placed = held.place_all(d.endpoint, count, opts.clients)
            times = []
            for _ in range(opts.runs):
                time.sleep(1.5)  # past the restart window: the next kill is the first
                times.append(one_kill(d))
            failed = failed or None in times
            print("held %5d: placed in %5.1f s; kill -9 of rpcd to reconciled: %s" % (
                count, placed, ", ".join("%.3f s" % t if t is not None else "NOT reconciled"
                                         for t in times)), flush=True)
        finally:
            d.stop()
            held.teardown(forget=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
