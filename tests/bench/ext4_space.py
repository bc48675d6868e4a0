#!/usr/bin/python3
"""Benchmark: what the first NodeStageVolume of a new ext4 volume costs, in time and
in disk taken by its image. Run as root inside a private mount namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/ext4_space.py [--sizes 64Mi,1Gi,16Gi,64Gi] [-n N]

For each size, N volumes (default 5) are created, staged as ext4 (the first stage
formats the blank image) and unstaged, one after the other, against a real sepcsi
started in a temporary tree. Prints the median NodeStageVolume time and the disk the
image holds (st_blocks) after the unstage, beside the volume's size. The data
directory must have room for the largest size, as the helper never promises more
than its file system holds. Asserts nothing.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402
from csi_client import mount_cap  # noqa: E402

UNITS = {"Mi": 1 << 20, "Gi": 1 << 30}


def size_of(text):
    return int(text[:-2]) * UNITS[text[-2:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64Mi,1Gi,16Gi,64Gi")
    ap.add_argument("-n", type=int, default=5)
    args = ap.parse_args()
    d = conftest.Driver(extra_args=["--log-level", "warn"])
    c = d.client
    cap = mount_cap("ext4")
    print("%8s %18s %22s" % ("size", "stage p50 ms", "image on disk (KiB)"))
    try:
        for text in args.sizes.split(","):
            took, disk = [], []
            for i in range(args.n):
                name = "ext4-%s-%d" % (text, i)
                vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                                   capacity_range=c.pb.CapacityRange(
                                       required_bytes=size_of(text))).volume.volume_id
                staging = os.path.join(d.root, "staging", name)
                os.makedirs(staging)
                t = time.monotonic()
                c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
                       volume_capability=cap)
                took.append((time.monotonic() - t) * 1000)
                c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
                image = os.path.join(d.data, "images", vid + ".img")
                disk.append(os.stat(image).st_blocks * 512 // 1024)
                c.controller("DeleteVolume", volume_id=vid)
            print("%8s %18.1f %22d" % (text, statistics.median(took), statistics.median(disk)))
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
