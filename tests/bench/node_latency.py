#!/usr/bin/python3
"""Benchmark: latency of NodeStageVolume (first stage, which formats), of a
repeated NodeStageVolume (already staged), NodePublishVolume,
NodeGetVolumeStats (of the published volume) and NodeUnpublishVolume, per
file system and size, against a real sepcsi started
in a temporary tree. Run as root inside a private mount namespace:

    unshare -m --propagation private /usr/bin/python3 tests/bench/node_latency.py [N]

Prints p50/p99 in milliseconds; asserts nothing. xfs cannot be smaller than
300 MiB (mkfs.xfs refuses), so its small size is 320 MiB.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402
from csi_client import mount_cap  # noqa: E402

MiB = 1 << 20
CONFIGS = [("ext4", 64 * MiB), ("ext4", 1024 * MiB), ("xfs", 320 * MiB), ("xfs", 1024 * MiB)]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def timed(fn, *a, **kw):
    t0 = time.monotonic()
    fn(*a, **kw)
    return (time.monotonic() - t0) * 1000


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    d = conftest.Driver(extra_args=["--log-level", "warn"])
    c = d.client
    print("%-6s %6s  %-22s %9s %9s" % ("fs", "size", "call", "p50 ms", "p99 ms"))
    try:
        for fs, size in CONFIGS:
            res = {"NodeStageVolume (formats)": [], "NodeStageVolume (again)": [],
                   "NodePublishVolume": [], "NodeGetVolumeStats": [],
                   "NodeUnpublishVolume": []}
            for i in range(n):
                name = "b-%s-%d-%d" % (fs, size // MiB, i)
                cap = mount_cap(fs)
                vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                                   capacity_range=c.pb.CapacityRange(required_bytes=size)
                                   ).volume.volume_id
                staging = os.path.join(d.root, "s", name)
                os.makedirs(staging)
                pod = os.path.join(d.root, "p", name)
                os.makedirs(pod)
                target = os.path.join(pod, "mnt")
                stage = dict(volume_id=vid, staging_target_path=staging, volume_capability=cap)
                res["NodeStageVolume (formats)"].append(timed(c.node, "NodeStageVolume", **stage))
                res["NodeStageVolume (again)"].append(timed(c.node, "NodeStageVolume", **stage))
                res["NodePublishVolume"].append(timed(
                    c.node, "NodePublishVolume", volume_id=vid, staging_target_path=staging,
                    target_path=target, volume_capability=cap))
                res["NodeGetVolumeStats"].append(timed(
                    c.node, "NodeGetVolumeStats", volume_id=vid, volume_path=target))
                res["NodeUnpublishVolume"].append(timed(
                    c.node, "NodeUnpublishVolume", volume_id=vid, target_path=target))
                c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
                c.controller("DeleteVolume", volume_id=vid)
            for call, xs in res.items():
                print("%-6s %5dM  %-26s %9.1f %9.1f" % (fs, size // MiB, call, pct(xs, 50),
                                                       pct(xs, 99)))
    finally:
        d.stop()
        d.cleanup()
    print("%d volumes per configuration" % n)


if __name__ == "__main__":
    main()
