#!/usr/bin/python3
"""Benchmark: what a pod's I/O gets inside a sepcsi volume, against the same jobs on the
file system that holds the data directory, in one run. Run as root inside a private
mount namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/datapath.py [--runtime S] [--size MIB]

A real sepcsi is started in a temporary tree under /tmp (so the data directory is on
/tmp's file system); volumes are created, staged and published through CSI. fio (psync,
one job, --runtime seconds each, every job on every target in turn, --rounds times,
in a new order each round, medians printed) runs three jobs on a file of --size MiB, written whole first:
  - 4 KiB random writes, each followed by fsync (IOPS);
  - 4 KiB random reads, O_DIRECT (IOPS);
  - 1 MiB sequential writes, O_DIRECT (MiB/s);
on the host's file system, inside an ext4 volume, an xfs volume, an ext4 volume mounted
nodiscard, an ext4 volume made with fast_commit, a raw block volume (the jobs on
the device), and a bare loop device set up by hand (losetup, direct I/O) over a file on
the host's file system: the kernel's loop driver alone, without sepcsi, the floor any
volume on a loop device meets. Printed: each figure and its
ratio to the host's, and the median of each round's ratio to the host's figure of the
same round (and, for IOPS, the time each I/O took longer than on the host);
the write and flush requests the host's disk received per fsync inside (its
/sys/block/.../stat counts over fio's fsyncs) and per fsync on the host; the pages
of the image left in the host's page cache after 256 MiB of O_DIRECT reads inside the
ext4 volume (fincore), against what was read; whether the loop devices use direct I/O;
and what deleting 1 GiB costs with online discard and without, and how much of the image
it gives back; and how large the requests are that the loop driver passes on for
1 MiB writes. Asserts nothing about speed.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402
from csi_client import block_cap, mount_cap  # noqa: E402

MiB = 1 << 20
JOBS = [  # name, fio arguments, figure; on a file whose every block was written first
    ("1 MiB sequential write, O_DIRECT", ["--rw=write", "--bs=1M", "--direct=1"], "mibs"),
    ("4 KiB random read, O_DIRECT", ["--rw=randread", "--bs=4k", "--direct=1"], "iops"),
    ("4 KiB random write + fsync", ["--rw=randwrite", "--bs=4k", "--fsync=1"], "iops"),
]


def disk_stat(path):
    """The whole disk under path's file system: its /sys/block stat fields, as ints."""
    st = os.stat(path)
    sysdir = os.path.realpath("/sys/dev/block/%d:%d" % (os.major(st.st_dev),
                                                         os.minor(st.st_dev)))
    if os.path.exists(os.path.join(sysdir, "partition")):
        sysdir = os.path.dirname(sysdir)
    with open(os.path.join(sysdir, "stat")) as f:
        return [int(x) for x in f.read().split()]


WRITES, WRITE_SECTORS, FLUSHES = 4, 6, 15  # requests, 512-byte sectors (block/stat.rst)


def fio(filename, args, runtime, size):
    out = subprocess.run(
        ["fio", "--name=job", "--filename=" + filename, "--ioengine=psync",
         "--size=%dM" % (size // MiB), "--runtime=%d" % runtime, "--time_based",
         "--output-format=json"] + args,
        capture_output=True, text=True, check=True).stdout
    job = json.loads(out)["jobs"][0]
    side = job["read"] if job["read"]["io_bytes"] else job["write"]
    return {"iops": side["iops"], "mibs": side["bw_bytes"] / MiB,
            "fsyncs": job.get("sync", {}).get("total_ios", 0)}


def lay_out(filename, size):
    """filename written whole (a read of a block never written, or of one the file
    system only reserved, costs no I/O at all)."""
    subprocess.run(["dd", "if=/dev/urandom", "of=" + filename, "bs=1M",
                    "count=%d" % (size // MiB), "conv=fsync", "status=none"], check=True)


def run_job(job, filename, host_disk, runtime, size):
    """One job on filename: its figure, and the host disk's write and flush requests
    per fsync (None without fsyncs)."""
    _, args, fig = job
    before = disk_stat(host_disk)
    r = fio(filename, args, runtime, size)
    after = disk_stat(host_disk)
    n = r["fsyncs"]
    return (r[fig], (after[WRITES] - before[WRITES]) / n if n else None,
            (after[FLUSHES] - before[FLUSHES]) / n if n else None)


def bare_loop(path, size):
    """A loop device over path (size bytes, written whole), as losetup makes it by hand."""
    lay_out(path, size)
    return subprocess.run(["losetup", "--find", "--show", "--direct-io=on", path],
                          capture_output=True, text=True, check=True).stdout.strip()


def request_kib(dev, runtime, size):
    """KiB per write request the device received over 1 MiB O_DIRECT writes on it."""
    stat = "/sys/block/%s/stat" % os.path.basename(dev)
    with open(stat) as f:
        before = [int(x) for x in f.read().split()]
    fio(dev, JOBS[0][1], runtime, size)
    with open(stat) as f:
        after = [int(x) for x in f.read().split()]
    return ((after[WRITE_SECTORS] - before[WRITE_SECTORS]) / 2 /
            max(1, after[WRITES] - before[WRITES]))


def median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def cached(path):
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def allocated(path):
    return os.stat(path).st_blocks * 512


class Vol:
    def __init__(self, d, name, cap, size, params):
        c = d.client
        self.c, self.cap = c, cap
        self.id = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                               parameters=params,
                               capacity_range=c.pb.CapacityRange(required_bytes=size)
                               ).volume.volume_id
        self.staging = os.path.join(d.root, "s", name)
        os.makedirs(self.staging)
        os.makedirs(os.path.join(d.root, "p", name))
        self.target = os.path.join(d.root, "p", name, "t")
        c.node("NodeStageVolume", volume_id=self.id, staging_target_path=self.staging,
               volume_capability=cap)
        c.node("NodePublishVolume", volume_id=self.id, staging_target_path=self.staging,
               target_path=self.target, volume_capability=cap)
        self.image = os.path.join(d.data, "images", self.id + ".img")

    def loop_dio(self):
        st = os.stat(self.image)
        out = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,BACK-INO,DIO"],
                             capture_output=True, text=True, check=True).stdout
        return [line.split()[2] == "1" for line in out.splitlines()
                if line.split()[1] == str(st.st_ino)]

    def close(self):
        self.c.node("NodeUnpublishVolume", volume_id=self.id, target_path=self.target)
        self.c.node("NodeUnstageVolume", volume_id=self.id, staging_target_path=self.staging)
        self.c.controller("DeleteVolume", volume_id=self.id)


def page_cache_after_direct_reads(v):
    """MiB read with O_DIRECT inside the volume, and MiB of its image in the host's cache."""
    data = os.path.join(v.target, "cache.dat")
    subprocess.run(["dd", "if=/dev/urandom", "of=" + data, "bs=1M", "count=256",
                    "conv=fsync", "status=none"], check=True)
    fd = os.open(v.image, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    before = cached(v.image)
    subprocess.run(["dd", "if=" + data, "of=/dev/null", "bs=1M", "iflag=direct",
                    "status=none"], check=True)
    os.unlink(data)
    return 256, (cached(v.image) - before) / MiB


def delete_cost(v):
    """Seconds to delete 1 GiB and sync; MiB of the image given back, and when (at most
    60 s after the sync)."""
    data = os.path.join(v.target, "del.dat")
    subprocess.run(["dd", "if=/dev/zero", "of=" + data, "bs=1M", "count=1024",
                    "conv=fsync", "status=none"], check=True)
    full = allocated(v.image)
    t0 = time.monotonic()
    os.unlink(data)
    subprocess.run(["sync", "-f", v.target], check=True)
    took = time.monotonic() - t0
    while full - allocated(v.image) < 1000 * MiB and time.monotonic() - t0 < 60:
        time.sleep(0.1)
    return took, (full - allocated(v.image)) / MiB, time.monotonic() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", type=int, default=5, help="seconds per job")
    ap.add_argument("--rounds", type=int, default=3,
                    help="each job on every target, in turn, this many times (medians)")
    ap.add_argument("--size", type=int, default=1024, help="MiB per job file")
    a = ap.parse_args()
    size = a.size * MiB
    d = conftest.Driver(extra_args=["--log-level", "warn"],
                        policy_extra="[filesystems]\nmkfs_options_ext4 = -Ofast_commit\n")
    vols, loop = [], None
    try:
        host_dir = os.path.join(d.tmp, "host")
        os.makedirs(host_dir)
        targets = [("host file system", os.path.join(host_dir, "f"))]
        specs = [("ext4 volume", "ext4", mount_cap("ext4"), {}),
                 ("xfs volume", "xfs", mount_cap("xfs"), {}),
                 ("ext4 volume, nodiscard", "ext4n", mount_cap("ext4", flags=["nodiscard"]),
                  {}),
                 ("ext4 volume, fast_commit", "ext4fc", mount_cap("ext4"),
                  {"mkfsOptions": "-Ofast_commit"}),
                 ("raw block volume", "block", block_cap(), {})]
        for label, name, cap, params in specs:
            v = Vol(d, "dp-" + name, cap, size + 1024 * MiB, params)
            vols.append((label, v))
            targets.append((label, v.target if name == "block" else
                            os.path.join(v.target, "f")))
        loop = bare_loop(os.path.join(host_dir, "bare.img"), size)
        targets.append(("bare loop device (losetup), no sepcsi", loop))
        # In turns, in a new order each round, so that the disk's moods (a shared
        # machine's) and a place in the round fall on every target alike.
        runs = {(job[0], label): [] for job in JOBS for label, _ in targets}
        for label, f in targets:
            if f != loop:
                lay_out(f, size)
        order = random.Random(1)
        for _ in range(a.rounds):
            for job in JOBS:
                for label, f in order.sample(targets, len(targets)):
                    runs[(job[0], label)].append(run_job(job, f, host_dir, a.runtime, size))
        for label, f in targets[1:]:
            if not f.startswith("/dev") and os.path.isfile(f):
                os.unlink(f)
        print("| job | where | figure | ratio to the host | rounds' ratios (median) | "
              "added per I/O | host writes per fsync | host flushes per fsync |")
        print("|---|---|---|---|---|---|---|---|")
        for name, _, fig in JOBS:
            hosts = runs[(name, targets[0][0])]
            host = median([x[0] for x in hosts])
            for label, _ in targets:
                val = median([x[0] for x in runs[(name, label)]])
                # Each round's figure against the host's of the same round: less of the
                # disk's swings between rounds than the ratio of the medians.
                paired = median([x[0] / h[0] for x, h in zip(runs[(name, label)], hosts)])
                wr = median([x[1] for x in runs[(name, label)]])
                fl = median([x[2] for x in runs[(name, label)]])
                unit = "IOPS" if fig == "iops" else "MiB/s"
                added = ("%+.0f µs" % (1e6 / val - 1e6 / host) if fig == "iops" else "")
                print("| %s | %s | %.0f %s | %.2f | %.2f | %s | %s | %s |" % (
                    name, label, val, unit, val / host, paired, added,
                    "%.2f" % wr if wr is not None else "",
                    "%.2f" % fl if fl is not None else ""))
        ext4 = vols[0][1]
        read, left = page_cache_after_direct_reads(ext4)
        print()
        print("image pages in the host's page cache after %d MiB of O_DIRECT reads inside "
              "the ext4 volume: %.1f MiB (%.1f %%)" % (read, left, 100.0 * left / read))
        for label, v in vols:
            print("%s: loop device direct I/O %s" % (label, v.loop_dio()))
        print("1 MiB O_DIRECT writes reach the bare loop device as requests of %.0f KiB"
              % request_kib(loop, a.runtime, size))
        for label, v in vols[:4]:
            took, back, when = delete_cost(v)
            print("%s: delete 1 GiB + sync %.2f s; image given back %.0f MiB after %.1f s" % (
                label, took, back, when))
    finally:
        for _, v in vols:
            try:
                v.close()
            except Exception as e:  # noqa: BLE001 - the cleanup below still runs
                print("cleanup:", e)
        if loop:
            subprocess.run(["losetup", "-d", loop])
        d.stop()
        d.cleanup()


if __name__ == "__main__":
    main()
