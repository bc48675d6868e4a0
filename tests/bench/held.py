#!/usr/bin/python3
"""Benchmark: does a call cost more when the node already holds many volumes?
Run as root inside a private mount namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/held.py [--held 0,200,600] [-n N] [-c C]
            [--attach auto|no] [--tmpfs]

For each count H, a fresh driver (sepcsi, then hostpathplugin if it is found,
as in side_by_side.py) first gets H raw block volumes created, staged and
published, which it holds while sepcsi-bench runs N raw block lifecycles with
C clients; the rate is printed beside the time it took to place the H volumes.
Then, for sepcsi only, a reboot: every process of the driver killed, every
mount and loop device of its volumes torn down, the driver started again, and
the H volumes staged and published again as kubelet does after a reboot; the
time until all H are back is printed (it should grow about linearly with H).

--attach auto adds ControllerPublishVolume and ControllerUnpublishVolume where
the driver has them: 8 calls per sepcsi lifecycle (hostpathplugin has no
ControllerPublishVolume and keeps 6); the default is the 6 calls both serve.
--tmpfs puts each driver's whole state (store, images, socket) on a tmpfs of its
own, where fsync and fdatasync cost nothing: an experiment that shows what the
durability syncs cost on this machine's disk, never a way to deploy (a tmpfs
store forgets everything at a reboot).
Prints figures; asserts no timing. Exit status 0 when every call succeeded.
"""
import argparse
import concurrent.futures
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import side_by_side as sbs  # noqa: E402
from side_by_side import CSI_DIR, KUBELET, conftest, csi_client  # noqa: E402

MiB = 1 << 20


def held_paths(i):
    name = "held-%04d" % i
    staging = os.path.join(CSI_DIR, "volumeDevices", "staging", name)
    target_parent = os.path.join(CSI_DIR, "volumeDevices", "publish", name)
    return name, staging, os.path.join(target_parent, "target")


RETRY_SECONDS = 60


def retried(call, *a, **kw):
    """As a CO does: ABORTED (another operation on the volume) and UNAVAILABLE retried,
    for at most RETRY_SECONDS (a driver that has stopped fails the run, not hangs it)."""
    give_up = time.monotonic() + RETRY_SECONDS
    while True:
        try:
            return call(*a, **kw)
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE) or \
                    time.monotonic() > give_up:
                raise
            time.sleep(0.01)


def place(endpoint, i, vid=None, create=True):
    """Create (unless vid is given), stage and publish held volume i; returns its id."""
    name, staging, target = held_paths(i)
    cap = csi_client.block_cap()
    with csi_client.CsiClient(endpoint) as c:
        if create:
            vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                               capacity_range=c.pb.CapacityRange(required_bytes=16 * MiB),
                               timeout=120).volume.volume_id
        # What kubelet makes: a block volume's staging directory, its target's parent.
        os.makedirs(os.path.dirname(target), mode=0o750, exist_ok=True)
        os.makedirs(staging, mode=0o750, exist_ok=True)
        caps = c.node("NodeGetCapabilities").capabilities
        if any(x.rpc.type == c.pb.NodeServiceCapability.RPC.STAGE_UNSTAGE_VOLUME for x in caps):
            retried(c.node, "NodeStageVolume", volume_id=vid, staging_target_path=staging,
                    volume_capability=cap, timeout=120)
        retried(c.node, "NodePublishVolume", volume_id=vid, staging_target_path=staging,
                target_path=target, volume_capability=cap, readonly=False, timeout=120)
    return vid


def place_all(endpoint, held, clients, ids=None):
    """Place held volumes with clients threads; (ids, seconds)."""
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(clients) as ex:
        futs = [ex.submit(place, endpoint, i, ids[i] if ids else None, ids is None)
                for i in range(held)]
        out = [f.result() for f in futs]
    return out, time.monotonic() - t0


def teardown(forget=False):
    """Everything beneath kubelet's directory unmounted, every loop device detached;
    with forget, the held volumes' directories removed too (a new run)."""
    for mp in reversed(conftest.mounts_under(KUBELET)):
        if mp != KUBELET:  # kubelet's own tmpfs stays, for the next driver
            subprocess.run(["umount", "-l", mp], check=False)
    subprocess.run(["losetup", "-D"], check=False)
    if forget:
        for sub in ("staging", "publish"):
            d = os.path.join(CSI_DIR, "volumeDevices", sub)
            for n in os.listdir(d) if os.path.isdir(d) else []:
                shutil.rmtree(os.path.join(d, n), ignore_errors=True)


def run_one(label, start, tmp, held, opts, reboot):
    work = tempfile.mkdtemp(dir=tmp)
    if opts.tmpfs:
        subprocess.run(["mount", "-t", "tmpfs", "sepcsi-held", work], check=True)
    os.chmod(work, 0o755)  # rpcd (uid 65532) must reach its store and socket
    d = start(work)
    row = {"driver": label, "held": held}
    try:
        ids, row["place_s"] = place_all(d.endpoint, held, opts.clients)
        d.pids = sbs.process_tree(d.proc.pid)
        rep = sbs.run_bench(d, "block", opts)
        life = rep.get("lifecycles", {})
        row["rate"] = life.get("per_second")
        row["errors"] = rep.get("failed_to_run") or (
            "%d of %d lifecycles failed" % (life["failed"], life["requested"])
            if life.get("failed") else "")
        if reboot and held:
            os.killpg(d.proc.pid, signal.SIGKILL)
            d.proc.wait()
            teardown()
            d = restart(d)
            _, row["reboot_s"] = place_all(d.endpoint, held, opts.clients, ids)
    finally:
        d.stop()
        teardown(forget=True)
        if opts.tmpfs:
            subprocess.run(["umount", "-l", work], check=False)
        shutil.rmtree(work, ignore_errors=True)
    return row


def restart(d):
    """The same driver started again with the same arguments (its store and images kept)."""
    argv = d.proc.args
    log = open(d.log_path, "a")
    d.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    csi_client.wait_ready(d.endpoint, 60)
    d.wait_probe_ready(60)
    return d


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--held", default="0,200,600")
    ap.add_argument("-n", "--lifecycles", type=int, default=200)
    ap.add_argument("-c", "--clients", type=int, default=8)
    ap.add_argument("--capacity", default="64Mi")
    ap.add_argument("--attach", choices=("auto", "no"), default="no")
    ap.add_argument("--tmpfs", action="store_true",
                    help="each driver's state on a tmpfs: syncs cost nothing (an experiment)")
    opts = ap.parse_args()
    opts.probe_seconds = 0
    counts = [int(x) for x in opts.held.split(",")]
    if os.geteuid() != 0:
        sys.exit("needs root")
    tmp = tempfile.mkdtemp(prefix="sepcsi-held-")
    os.chmod(tmp, 0o755)
    sbs.kubelet_tree()
    hostpath = sbs.find_hostpathplugin()
    drivers = [("sepcsi", sbs.start_sepcsi, True)]
    if hostpath:
        drivers.append(("hostpathplugin", lambda w: sbs.start_hostpath(w, hostpath), False))
    else:
        print("hostpathplugin not found: sepcsi alone")
    rows = []
    for held in counts:
        for label, start, reboot in drivers:
            rows.append(run_one(label, start, tmp, held, opts, reboot))
            r = rows[-1]
            print("%-15s held %4d: placed in %6.1f s, %s lifecycles/s%s%s" % (
                label, held, r["place_s"], "%.1f" % r["rate"] if r["rate"] else "-",
                ", reboot: all %d back in %.2f s" % (held, r["reboot_s"])
                if "reboot_s" in r else "", ("  ERRORS: %s" % r["errors"]) if r["errors"]
                else ""), flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if any(r["errors"] or not r["rate"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
