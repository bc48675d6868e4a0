#!/usr/bin/python3
"""Benchmark: new ext4 volumes staged by several clients at once (each stage probes the
image, formats it, probes it again and mounts it), against a real sepcsi started in a
temporary tree. Run as root inside a private mount namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/stage_concurrent.py [-n N] [-c C]

Creates N volumes of 64 MiB first, then stages them with C client threads; prints the
stage p50 and p99 in milliseconds and the wall time of all the stages; asserts nothing.
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from conftest import Driver  # noqa: E402
from csi_client import mount_cap  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=64, help="volumes (default 64)")
    ap.add_argument("-c", type=int, default=8, help="clients (default 8)")
    args = ap.parse_args()
    d = Driver()
    try:
        c = d.client
        vids = [c.controller("CreateVolume", name="sc%d" % i, volume_capabilities=[mount_cap()],
                             capacity_range=c.pb.CapacityRange(required_bytes=64 << 20)
                             ).volume.volume_id for i in range(args.n)]
        times, lock = [], threading.Lock()

        def stage(k):
            for i in range(k, args.n, args.c):
                staging = os.path.join(d.root, "staging", "v%d" % i)
                os.makedirs(staging)
                t = time.monotonic()
                c.node("NodeStageVolume", volume_id=vids[i], staging_target_path=staging,
                       volume_capability=mount_cap())
                with lock:
                    times.append(time.monotonic() - t)

        t0 = time.monotonic()
        threads = [threading.Thread(target=stage, args=(k,)) for k in range(args.c)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        print("%d ext4 stages, %d clients: p50 %.1f ms, p99 %.1f ms, wall %.2f s" %
              (len(times), args.c, pct(times, 50) * 1000, pct(times, 99) * 1000, wall))
        return 0 if len(times) == args.n else 1
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    sys.exit(main())
