#!/usr/bin/python3
"""Benchmark: CreateVolume latency (p50/p99) with 0, 1,000 and 10,000 volumes
already in the driver, against a real sepcsi started in a temporary tree.
Run as root inside a private mount namespace:

    unshare -m --propagation private /usr/bin/python3 tests/bench/create_latency.py [M] [LEVELS]

M (default 200) volumes are created one after the other at each level and
timed; LEVELS (default 0,1000,10000) are the numbers of volumes that exist
before each measurement. The existing volumes are made through the API by 16
client threads (real images and store rows, like any other volume); that
filling time is printed too. Volumes are 16 MiB sparse images. Asserts nothing.
"""
import concurrent.futures
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402
from csi_client import mount_cap  # noqa: E402

MiB = 1 << 20


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def create(c, name):
    c.controller("CreateVolume", name=name, volume_capabilities=[mount_cap("ext4")],
                 capacity_range=c.pb.CapacityRange(required_bytes=16 * MiB))


def main():
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    levels = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "0,1000,10000").split(",")]
    d = conftest.Driver(extra_args=["--log-level", "warn"])
    c = d.client
    existing = 0
    print("%9s %7s %9s %9s %9s   %s" % ("existing", "calls", "p50 ms", "p99 ms", "max ms",
                                       "filled in"))
    try:
        for level in levels:
            t0 = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: create(c, "fill-%06d" % i), range(existing, level)))
            fill = time.monotonic() - t0
            filled = level - existing
            existing = max(existing, level)
            times = []
            for i in range(m):
                t = time.monotonic()
                create(c, "timed-%06d-%04d" % (level, i))
                times.append((time.monotonic() - t) * 1000)
            n = len(c.controller("ListVolumes").entries)
            print("%9d %7d %9.2f %9.2f %9.2f   %d volumes in %.1f s (%.0f/s)" % (
                existing, m, pct(times, 50), pct(times, 99), max(times), filled, fill,
                filled / fill if fill > 0 and filled else 0))
            existing = n
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
