#!/usr/bin/python3
"""Benchmark: GetMetadataDelta (and GetMetadataAllocated) of a 10 GiB volume
with 1 % of it changed between two snapshots, with the driver's data
directory on a reflink-capable file system (xfs made with reflink=1: the
snapshots share the unchanged extents) and on plain ext4 (each snapshot a
full copy: the delta compares the two images' data). Run as root inside a
private mount namespace:

    unshare -m --propagation private /usr/bin/python3 tests/bench/snapshot_metadata.py [N]

Each data directory is a loop-mounted image (48 GiB, sparse) in a temporary
directory on the host's file system. A raw block volume of 10 GiB is staged
and filled with data (every 4 KiB block distinct), snapshotted, then 1 % of
it (1,638 runs of 64 KiB spread evenly) rewritten, and snapshotted again.
Then N times (default 3): sync, drop the page cache, time each call's whole
stream. While a call runs, the resident memory of every driver process is
sampled every 5 ms; the largest seen per program is printed (the tools
runner's figure includes the child that reads each page). Prints the median
and range of the times; asserts nothing but that the delta found the change.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402
from csi_client import block_cap  # noqa: E402
from snapshot import driver_on, run  # noqa: E402  (tests/bench/snapshot.py)

MiB = 1 << 20
GiB = 1 << 30
SIZE = 10 * GiB
RUN = 64 * 1024
DATA_DIRS = [("xfs, reflink=1", ["mkfs.xfs", "-q", "-m", "reflink=1"]),
             ("ext4 (copies)", ["mkfs.ext4", "-q", "-F"])]


class Peak:
    """The largest VmRSS of each program below the supervisor, sampled while running."""

    def __init__(self, sup_pid):
        self.sup, self.peak, self.stop = sup_pid, {}, threading.Event()
        self.t = threading.Thread(target=self.sample, daemon=True)
        self.t.start()

    def sample(self):
        while not self.stop.wait(0.005):
            for pid in conftest.descendants(self.sup):
                try:
                    with open("/proc/%d/status" % pid) as f:
                        st = dict(line.split(":", 1) for line in f if ":" in line)
                except OSError:
                    continue
                name = st.get("Name", "?").strip()
                rss = int(st.get("VmRSS", "0 kB").split()[0]) if "VmRSS" in st else 0
                self.peak[name] = max(self.peak.get(name, 0), rss)

    def done(self):
        self.stop.set()
        self.t.join()
        return self.peak


def fill(dev):
    """Every 4 KiB block distinct: its number in its first 8 bytes."""
    pattern = bytearray(os.urandom(MiB))
    with open(dev, "r+b", buffering=0) as f:
        for mib in range(SIZE // MiB):
            for b in range(0, MiB, 4096):
                pattern[b:b + 8] = ((mib * MiB + b) // 4096).to_bytes(8, "little")
            f.write(pattern)
        os.fsync(f.fileno())


def change(dev):
    """1 % of the volume: runs of RUN bytes, evenly spread. Returns the bytes changed."""
    n = SIZE // 100 // RUN
    step = SIZE // n // 4096 * 4096
    with open(dev, "r+b", buffering=0) as f:
        for i in range(n):
            f.seek(i * step)
            f.write(os.urandom(RUN))
        os.fsync(f.fileno())
    return n * RUN


def timed_stream(d, method, req):
    peak = Peak(d.sup_pid())
    t0 = time.monotonic()
    msgs = d.client.stream("SnapshotMetadata", method, req, timeout=3600)
    took = time.monotonic() - t0
    mem = peak.done()
    return took, msgs, mem


def bench(label, mkfs, scratch, n):
    d = driver_on(mkfs, scratch, 48 * GiB)
    c = d.client
    out = []
    try:
        vid = c.controller("CreateVolume", name="src", volume_capabilities=[block_cap()],
                           capacity_range=c.pb.CapacityRange(required_bytes=SIZE)
                           ).volume.volume_id
        staging = os.path.join(d.root, "staging")
        os.makedirs(staging)
        c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
               volume_capability=block_cap())
        dev = os.path.join(staging, "dev")
        fill(dev)
        s1 = c.controller("CreateSnapshot", name="s1", source_volume_id=vid,
                          timeout=3600).snapshot.snapshot_id
        changed = change(dev)
        s2 = c.controller("CreateSnapshot", name="s2", source_volume_id=vid,
                          timeout=3600).snapshot.snapshot_id
        c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
        calls = [("GetMetadataDelta", c.pb.GetMetadataDeltaRequest(
                     base_snapshot_id=s1, target_snapshot_id=s2)),
                 ("GetMetadataAllocated", c.pb.GetMetadataAllocatedRequest(snapshot_id=s2))]
        for method, req in calls:
            times, mems = [], {}
            for _ in range(n):
                os.sync()
                run("sh", "-c", "echo 3 > /proc/sys/vm/drop_caches")
                took, msgs, mem = timed_stream(d, method, req)
                times.append(took)
                for k, v in mem.items():
                    mems[k] = max(mems.get(k, 0), v)
                found = sum(b.size_bytes for m in msgs for b in m.block_metadata)
            if method == "GetMetadataDelta":
                assert found == changed, (found, changed)
            out.append((method, times, mems, found, len(msgs)))
    finally:
        d.stop()
        d.cleanup()
    for method, times, mems, found, nmsgs in out:
        print("%-15s %-21s %8.2f %8.2f %8.2f  %6.1f MiB in %d messages" % (
            label, method, statistics.median(times), min(times), max(times), found / MiB,
            nmsgs))
        print("%-15s %-21s peak RSS (MiB): %s" % (
            "", "", ", ".join("%s %.1f" % (k, v / 1024) for k, v in sorted(mems.items()))))


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    scratch = tempfile.mkdtemp(prefix="sepcsi-bench-md-")
    print("10 GiB raw block volume, every block written, 1 %% rewritten between two "
          "snapshots; %d runs each, page cache dropped before each" % n)
    print("%-15s %-21s %8s %8s %8s  %s" % ("data dir", "call", "median s", "min s", "max s",
                                          "ranges"))
    try:
        for label, mkfs in DATA_DIRS:
            bench(label, mkfs, scratch, n)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", scratch], check=False)


if __name__ == "__main__":
    main()
