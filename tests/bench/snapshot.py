#!/usr/bin/python3
"""Benchmark: time to CreateSnapshot of a 1 GiB volume holding 512 MiB of data,
with the driver's data directory on a reflink-capable file system (xfs made
with reflink=1) and on plain ext4, plus the time to restore that snapshot into
a new volume (CreateVolume from the snapshot) and the space each snapshot
takes. Run as root inside a private mount namespace:

    unshare -m --propagation private /usr/bin/python3 tests/bench/snapshot.py [N]

Each data directory is a loop-mounted image (8 GiB, sparse) in a temporary
directory on the host's file system, so both runs sit on the same disk. The
volume is staged, 512 MiB of random data written and fsync'd, and unstaged;
then N times (default 5): sync, drop the page cache, time CreateSnapshot,
time a restore, delete both. Prints the median and range; asserts nothing.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402
from csi_client import mount_cap  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
DATA_DIRS = [("xfs, reflink=1", ["mkfs.xfs", "-q", "-m", "reflink=1"]),
             ("ext4", ["mkfs.ext4", "-q", "-F"])]


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def driver_on(mkfs, scratch, size=8 * GiB):
    """A Driver whose data directory is a fresh file system made by mkfs, size bytes."""
    img = os.path.join(scratch, "datadir-%d.img" % len(os.listdir(scratch)))
    with open(img, "wb") as f:
        f.truncate(size)
    run(*mkfs, img)
    real = os.makedirs

    def makedirs(path, *a, **kw):
        real(path, *a, **kw)
        parent = os.path.dirname(path)
        if os.path.basename(path) == "root" and \
                os.path.basename(parent).startswith("sepcsi-e2e-"):
            data = os.path.join(parent, "data")
            real(data, mode=0o700)
            run("mount", "-o", "loop", img, data)
            os.chmod(data, 0o700)
    os.makedirs = makedirs
    try:
        return conftest.Driver(extra_args=["--log-level", "warn"])
    finally:
        os.makedirs = real


def used(path):
    s = os.statvfs(path)
    return (s.f_blocks - s.f_bfree) * s.f_frsize


def fill(d, c, vid, cap):
    staging = os.path.join(d.root, "staging")
    os.makedirs(staging)
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=cap)
    block = os.urandom(MiB)
    with open(os.path.join(staging, "data"), "wb") as f:
        for i in range(512):
            f.write(block[i:] + block[:i])
        os.fsync(f.fileno())
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)


def bench(label, mkfs, scratch, n):
    d = driver_on(mkfs, scratch)
    c = d.client
    cap = mount_cap("ext4")
    snaps, restores, space = [], [], []
    try:
        vid = c.controller("CreateVolume", name="src", volume_capabilities=[cap],
                           capacity_range=c.pb.CapacityRange(required_bytes=GiB)).volume.volume_id
        fill(d, c, vid, cap)
        for i in range(n):
            os.sync()
            run("sh", "-c", "echo 3 > /proc/sys/vm/drop_caches")
            before = used(d.data)
            t0 = time.monotonic()
            sid = c.controller("CreateSnapshot", name="s%d" % i,
                               source_volume_id=vid).snapshot.snapshot_id
            snaps.append(time.monotonic() - t0)
            space.append(used(d.data) - before)
            t0 = time.monotonic()
            rid = c.controller("CreateVolume", name="r%d" % i, volume_capabilities=[cap],
                               volume_content_source=c.pb.VolumeContentSource(
                                   snapshot=c.pb.VolumeContentSource.SnapshotSource(
                                       snapshot_id=sid))).volume.volume_id
            restores.append(time.monotonic() - t0)
            c.controller("DeleteVolume", volume_id=rid)
            c.controller("DeleteSnapshot", snapshot_id=sid)
    finally:
        d.stop()
        d.cleanup()
    for what, xs in (("CreateSnapshot", snaps), ("restore (CreateVolume)", restores)):
        print("%-15s %-23s %9.1f %9.1f %9.1f" % (label, what, statistics.median(xs) * 1000,
                                                 min(xs) * 1000, max(xs) * 1000))
    print("%-15s %-23s %9.1f MiB of data directory per snapshot" % (
        label, "space", statistics.median(space) / MiB))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    scratch = tempfile.mkdtemp(prefix="sepcsi-bench-snap-")
    print("1 GiB ext4 volume holding 512 MiB of data; %d runs each, page cache dropped "
          "before each" % n)
    print("%-15s %-23s %9s %9s %9s" % ("data dir", "call", "median ms", "min ms", "max ms"))
    try:
        for label, mkfs in DATA_DIRS:
            bench(label, mkfs, scratch, n)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", scratch], check=False)


if __name__ == "__main__":
    main()
