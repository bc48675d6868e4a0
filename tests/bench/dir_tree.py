#!/usr/bin/python3
"""Benchmark: what a directory volume's tree costs to snapshot, restore and delete,
by how many files it holds. Run as root inside a private mount namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/dir_tree.py [--files 100,2000] [-n 5] \
        [--base xfs|btrfs|btrfs-simple]

A real driver with an xfs base directory (a loop-mounted image in the test's
temporary directory, as in tests/e2e/test_dir_helper.py), or with --base btrfs
a btrfs one with quota groups (4 GiB; btrfs-simple: simple quotas), where a volume is a subvolume and a
snapshot, a restore and a delete are each one kernel call. For each size F, a
directory volume is created, published, and filled with F files of 4 KiB in
subdirectories of 100, a symlink per subdirectory and a hard link per 100 files;
then n times: CreateSnapshot, a restore (CreateVolume from the snapshot),
DeleteVolume of the restore and DeleteSnapshot, each timed. These are the calls
whose trees the helper's tree runner copies and removes on other bases
(docs/helper.md, "The tree runner"). Prints medians and ranges in milliseconds;
asserts nothing.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402
from csi_client import mount_cap  # noqa: E402
from test_dir_helper import btrfs_base, xfs_base  # noqa: E402

MiB = 1 << 20
CALLS = ("CreateSnapshot", "restore (CreateVolume)", "DeleteVolume (restore)",
         "DeleteSnapshot")


def fill(target, files):
    block = os.urandom(4096)
    for i in range(files):
        sub = os.path.join(target, "d%03d" % (i // 100))
        if i % 100 == 0:
            os.mkdir(sub)
            os.symlink("f0", os.path.join(sub, "link"))
        name = os.path.join(sub, "f%d" % (i % 100))
        with open(name, "wb") as f:
            f.write(block)
        if i % 100 == 0:
            os.link(name, os.path.join(sub, "hard"))
    os.sync()


def bench(d, files, n):
    c = d.client
    cap = mount_cap("")
    params = {"type": "directory", "baseDir": d.base}
    name = "tree-%d" % files
    vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap], parameters=params,
                       capacity_range=c.pb.CapacityRange(required_bytes=d.volume_bytes)
                       ).volume.volume_id
    fill(os.path.join(d.base, name), files)
    times = {k: [] for k in CALLS}
    for i in range(n):
        t0 = time.monotonic()
        sid = c.controller("CreateSnapshot", name="%s-s%d" % (name, i),
                           source_volume_id=vid).snapshot.snapshot_id
        t1 = time.monotonic()
        rid = c.controller("CreateVolume", name="%s-r%d" % (name, i), volume_capabilities=[cap],
                           parameters=params,
                           volume_content_source=c.pb.VolumeContentSource(
                               snapshot=c.pb.VolumeContentSource.SnapshotSource(
                                   snapshot_id=sid))).volume.volume_id
        t2 = time.monotonic()
        c.controller("DeleteVolume", volume_id=rid)
        t3 = time.monotonic()
        c.controller("DeleteSnapshot", snapshot_id=sid)
        t4 = time.monotonic()
        for k, dt in zip(CALLS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            times[k].append(dt * 1000)
    c.controller("DeleteVolume", volume_id=vid)
    for k in CALLS:
        xs = times[k]
        print("%7d %-24s %9.1f %9.1f %9.1f" % (files, k, statistics.median(xs), min(xs),
                                                max(xs)), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="100,2000")
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--base", choices=("xfs", "btrfs", "btrfs-simple"), default="xfs")
    opts = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    quota = "simple" if opts.base == "btrfs-simple" else "full"
    setup = xfs_base if opts.base == "xfs" else lambda d: btrfs_base(d, quota, 4096 * MiB)
    d = conftest.Driver(setup=setup, extra_args=["--log-level", "warn"])
    d.volume_bytes = 256 * MiB if opts.base == "xfs" else 1024 * MiB
    try:
        print("directory volume trees on an %s base; %d runs each" % (opts.base, opts.n))
        print("%7s %-24s %9s %9s %9s" % ("files", "call", "median ms", "min ms", "max ms"))
        for files in (int(x) for x in opts.files.split(",")):
            bench(d, files, opts.n)
    finally:
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
