#!/usr/bin/python3
"""Benchmark: how long the driver is out of service when a child dies, over N
runs. Run as root inside `unshare -m --propagation private`:

    unshare -m --propagation private /usr/bin/python3 tests/bench/restart.py [N]

Each run starts a fresh supervisor with its default flags (so every death is
the first in its restart window, which the supervisor restarts at once),
creates and stages a volume, then measures:

  helper: kill -9 of the mount helper -> the next NodePublishVolume that
          succeeds (retried at once whenever it fails, as a CO would);
  rpcd:   kill -9 of rpcd -> the next Probe that answers ready=true (a fresh
          gRPC channel per try, 2 ms apart, so gRPC's reconnect backoff is not
          what is measured).

Prints each run's figures and p50, p90 and max; asserts nothing.
"""
import math
import os
import re
import signal
import sys
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402  (the e2e Driver: a real supervisor in a temp tree)
import csi_client  # noqa: E402

MiB = 1 << 20
HELPER = "sepcsi-mounthel"
RPCD = "sepcsi-rpcd"


def pct(values, p):
    """Nearest-rank percentile."""
    s = sorted(values)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def until_new_pid(d, comm, old):
    while True:
        pid = d.children().get(comm)
        if pid not in (None, old):
            return pid
        time.sleep(0.001)


def one_run(d):
    c = d.client
    cap = csi_client.mount_cap("ext4")
    staging = os.path.join(d.root, "staging")
    os.makedirs(staging)
    target = os.path.join(d.root, "target")
    vid = c.controller("CreateVolume", name="pvc-bench", volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=cap)

    # Helper: kill -9, then publish until it works.
    old = d.children()[HELPER]
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    failures = 0
    while True:
        try:
            c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
                   target_path=target, volume_capability=cap, readonly=False)
            break
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            failures += 1
    helper_ms = (time.monotonic() - t0) * 1000

    # rpcd: kill -9, then Probe until ready.
    old = d.children()[RPCD]
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    while True:
        with csi_client.CsiClient(d.endpoint) as p:
            try:
                if p.identity("Probe", timeout=1).ready.value:
                    break
            except grpc.RpcError:
                pass
        time.sleep(0.002)
    rpcd_ms = (time.monotonic() - t0) * 1000

    # Leave nothing behind (through the new rpcd, on a new channel).
    c.close()
    d.client = c = csi_client.CsiClient(d.endpoint)
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=vid)
    return helper_ms, rpcd_ms, failures


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    helper, rpcd, startup = [], [], {"mounthelper": [], "rpcd": []}
    for _ in range(runs):
        d = conftest.Driver()
        try:
            h, r, failures = one_run(d)
            helper.append(h)
            rpcd.append(r)
            # The children's own start-up after the restart, as the supervisor logged it.
            for role, ms in re.findall(r"child_ready role=(\w+) pid=\d+ startup_ms=(\d+)",
                                       d.logs()):
                startup[role].append(int(ms))
        finally:
            d.stop()
            d.cleanup()
    for name, xs in (("kill -9 helper -> NodePublishVolume OK", helper),
                     ("kill -9 rpcd -> Probe ready", rpcd)):
        print("%s, ms: %s" % (name, " ".join("%.1f" % x for x in xs)))
        print("  p50 %.1f ms, p90 %.1f ms, max %.1f ms over %d runs" %
              (pct(xs, 50), pct(xs, 90), max(xs), len(xs)))
    for role, xs in startup.items():
        print("%s start-up to READY (all starts, supervisor log): p50 %d ms, max %d ms" %
              (role, pct(xs, 50), max(xs)))


if __name__ == "__main__":
    main()
