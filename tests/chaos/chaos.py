#!/usr/bin/python3
"""Chaos run: CSI lifecycles from many clients while the driver's processes are
killed at random, then a count of everything that was lost, stuck or left over.

A real sepcsi (supervisor, rpcd, helper; `--restart-limit 100 --restart-window 1`, so
that the give-up policy is not what is measured) serves kubelet's directory layout
beneath a test root, with a base directory for directory volumes (an xfs). Client
threads (10 by default) loop whole lifecycles, each on volumes of its own, a third each
ext4 mounts, raw block and directory volumes:

    CreateVolume -> NodeStageVolume -> NodePublishVolume -> write a pattern
    -> NodeUnpublishVolume -> NodeUnstageVolume
    -> NodeStageVolume -> NodePublishVolume -> read the pattern back
    [directory volumes: -> CreateSnapshot -> DeleteSnapshot, a copy and a removal of
     the tree, which the helper's tree runner makes]
    [raw block volumes: -> CreateSnapshot -> GetMetadataAllocated (exactly the three
     blocks written) -> GetMetadataDelta against itself (nothing) -> DeleteSnapshot:
     streams, whose pages the helper's tool runner reads]
    -> NodeUnpublishVolume -> NodeUnstageVolume -> DeleteVolume

Every call is retried as a CO retries (kubelet and the external sidecars retry any
error, with backoff): the same arguments, after 10, 20, 40, then 50 ms, until it
succeeds; a call still failing after SEPCSI_CHAOS_STUCK seconds (60) is "stuck" and
its client stops. Meanwhile a killer sends SIGKILL, every 0.1-0.5 s, to one of: the
helper (or, every other time, its audit writer, sepcsi-audit, without which it exits), a
helper worker (a child of the helper under its filter), the helper's
tool runner or its tree runner (children of the helper running sepcsi-runner or sepcsi-tree-runner: without
either the helper exits and is restarted), its core, or rpcd. The schedule of kills (intervals and kinds) comes from a
seeded generator: SEPCSI_CHAOS_SEED replays it; the seed is always printed.

New lifecycles start for SEPCSI_CHAOS_SECONDS (60), and on past that until at least
300 calls have succeeded and 20 kills were made (but never past 3 times that). Then
the killer stops, the lifecycles in flight finish, and the run checks: every volume
deleted (ListVolumes), the driver ready (Probe), every pattern read back, no loop
device backed by the data directory, no mount under the test root nor of such a loop
device (here or in the helper's view), no file in images/ or snapshots/, no temporary
file anywhere in the data directory, nothing in the base directory but the helper's
empty work, trash and snapshot areas, nothing new in kubelet's tree (and kubelet's own
files untouched); then the driver is stopped and its store must pass sqlite's
integrity and foreign-key checks with no row left in any table. No sanitizer report
and no seccomp kill in the log. One summary line says calls, kills, retries and leaks.

Run by tests/e2e/test_chaos.py in CI. By hand (root):
    tests/chaos/chaos.py [--build DIR] [--seconds N] [--seed N] [--clients N]
It enters a private mount namespace of its own, and exits 1 when anything was found.
"""
import argparse
import collections
import errno
import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
E2E = os.path.join(os.path.dirname(HERE), "e2e")
if E2E not in sys.path:
    sys.path.insert(0, E2E)
# No fork handlers of gRPC's: it forks for subprocesses with channels open (conftest.py).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc  # noqa: E402

import conftest  # noqa: E402
import csi_client  # noqa: E402
from csi_client import block_cap, mount_cap  # noqa: E402
from test_dir_helper import BASES  # noqa: E402
from test_security import POD, Kubelet  # noqa: E402

MiB = 1 << 20
VOLUME_BYTES = 32 * MiB
MIN_CALLS = 300
MIN_KILLS = 20
KILL_INTERVAL = (0.1, 0.5)  # seconds between two kills, uniform
CALL_TIMEOUT = 15  # gRPC deadline of one attempt (the external sidecars' default is 10 s)
BACKOFF = (0.01, 0.05)  # first retry delay, doubling up to the second
RECONNECT_AFTER = 2  # seconds of UNAVAILABLE after which a client dials again
KINDS = ("helper", "worker", "runner", "tree", "core", "rpcd")
WORKER_WAIT = 0.5  # how long a turn that drew "worker" first looks for one
HELPER, RPCD = "sepcsi-mounthel", "sepcsi-rpcd"  # /proc/<pid>/comm keeps 15 characters
STORE_FILE = "sepcsi.db"
BASE_AREAS = (".sepcsi-work", ".sepcsi-trash", ".sepcsi-snapshots",
              ".sepcsi-published")  # the last: a shared base's publications
NODE_RECORDS = ".sepcsi-nodes"  # a shared base's node plugins: this driver's own stays
# A shared base's marks: a worker killed between a directory's removal and its record's
# leaves the record, which marks nothing that exists (it names the directory's inode
# and birth time: docs/helper.md, known gaps). Such records are not leaks here;
# a record naming a directory that exists in the base is one.
MARKS = ".sepcsi-marks"
BLOCK_OFFSETS = (0, 5 * MiB + 4096, VOLUME_BYTES - 4096)  # where block clients write
CHECK_WAIT = 20  # seconds the final Probe and ListVolumes are retried
# The pytest timeout of a run with the default settings: chaos for at most 3 times
# SEPCSI_CHAOS_SECONDS, a drain that may wait out one stuck call, start and checks.
TIMEOUT = 420


class Settings:
    def __init__(self, seconds=60.0, seed=None, clients=10, stuck=60.0):
        self.seconds = float(seconds)
        self.seed = int(seed) if seed is not None else random.SystemRandom().randrange(1 << 32)
        self.clients = int(clients)
        self.stuck = float(stuck)

    @classmethod
    def from_env(cls):
        env = os.environ.get
        return cls(env("SEPCSI_CHAOS_SECONDS", 60), env("SEPCSI_CHAOS_SEED"),
                   env("SEPCSI_CHAOS_CLIENTS", 10), env("SEPCSI_CHAOS_STUCK", 60))


class Stuck(Exception):
    """A call that kept failing for Settings.stuck seconds."""


class Tally:
    """What the clients and the killer did, shared among their threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = collections.Counter()  # method -> successful calls
        self.retries = collections.Counter()  # status code name -> failed attempts
        self.redials = collections.Counter()  # method -> new channels after UNAVAILABLE
        self.errors = collections.Counter()  # (method, code, details) -> failed attempts
        self.kills = collections.Counter()  # kind -> SIGKILLs sent
        self.kill_log = []  # "HH:MM:SS.mmm kind pid", in UTC as the driver logs
        self.no_victim = 0  # killer turns that found nothing to kill
        self.lifecycles = 0  # finished (deleted) lifecycles
        self.stuck = []  # "name method code: details"
        self.data = []  # patterns not read back, volumes not empty when new
        self.crashed = []  # threads that ended on an exception of the harness
        self.volume_ids = set()  # every id CreateVolume answered

    def add(self, counter, key, n=1):
        with self.lock:
            getattr(self, counter)[key] += n

    def note(self, what, line):
        with self.lock:
            getattr(self, what).append(line)


class ChaosClient(csi_client.CsiClient):
    """A CsiClient whose channel reconnects within 50-250 ms: with gRPC's
    default (1 s, growing to 2 min) every kill of rpcd would leave the channel
    failing for longer and longer after rpcd is back, which measures gRPC. Its
    connections are its own (a local subchannel pool), and after RECONNECT_AFTER
    seconds of UNAVAILABLE it dials again on a new channel, as kubelet does (it
    dials a new connection for every node call): under a sanitizer build, whose
    rpcd is killed again before it answers, a channel was seen failing with the
    error of its last attempt for a minute while the others were served."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.channel = self.dial()

    def dial(self):
        return grpc.insecure_channel(self.endpoint, options=[
            ("grpc.initial_reconnect_backoff_ms", 50),
            ("grpc.min_reconnect_backoff_ms", 50),
            ("grpc.max_reconnect_backoff_ms", 250),
            ("grpc.use_local_subchannel_pool", 1)])

    def redial(self):
        old, self.channel = self.channel, self.dial()
        old.close()


def retried(tally, stuck_after, label, client, service, method, /, **fields):
    """One CSI call as a CO makes it: the same request until it succeeds. A
    SnapshotMetadata stream is asked again whole (its messages, as a list)."""
    start = time.monotonic()
    unavailable = None  # since when every attempt was UNAVAILABLE
    delay = BACKOFF[0]
    while True:
        try:
            if service == "SnapshotMetadata":
                resp = client.stream(service, method,
                                     getattr(client.pb, method + "Request")(**fields),
                                     timeout=CALL_TIMEOUT)
            else:
                resp = getattr(client, service)(method, timeout=CALL_TIMEOUT, **fields)
            tally.add("calls", method)
            return resp
        except grpc.RpcError as e:
            code = e.code().name if e.code() else "?"
            tally.add("retries", code)
            tally.add("errors", (method, code, (e.details() or "")[:160]))
            now = time.monotonic()
            if now - start >= stuck_after:
                raise Stuck("%s %s %s: %s" % (label, method, code, e.details())) from None
            unavailable = (unavailable or now) if code == "UNAVAILABLE" else None
            if unavailable and now - unavailable >= RECONNECT_AFTER:
                client.redial()
                tally.add("redials", method)
                unavailable = None
        time.sleep(delay)
        delay = min(delay * 2, BACKOFF[1])


def pattern(name, offset):
    """4 KiB that only this volume, at this offset, should hold."""
    return hashlib.sha256(("%s@%d" % (name, offset)).encode()).digest() * 128


def write_fs(target, name):
    """A new ext4 holds nothing but lost+found; write the pattern file."""
    extra = sorted(set(os.listdir(target)) - {"lost+found"})
    with open(os.path.join(target, "chaos.dat"), "wb") as f:
        f.write(pattern(name, 0))
        os.fsync(f.fileno())
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    os.fsync(fd)
    os.close(fd)
    return "new volume holds %s" % extra if extra else None


def check_fs(target, name):
    try:
        with open(os.path.join(target, "chaos.dat"), "rb") as f:
            return None if f.read() == pattern(name, 0) else "chaos.dat differs"
    except OSError as e:
        return "chaos.dat: %s" % e


def write_block(target, name):
    """A new raw volume reads as zeros where the pattern goes; write it there."""
    fd = os.open(target, os.O_RDWR)
    try:
        dirty = [o for o in BLOCK_OFFSETS if os.pread(fd, 4096, o) != bytes(4096)]
        for o in BLOCK_OFFSETS:
            os.pwrite(fd, pattern(name, o), o)
        os.fsync(fd)
    finally:
        os.close(fd)
    return "new volume not zero at %s" % dirty if dirty else None


def write_dir(target, name):
    """A new directory volume is empty; write the pattern into a file, a file in a
    subdirectory, and a symlink to the first."""
    extra = sorted(os.listdir(target))
    os.mkdir(os.path.join(target, "sub"))
    for rel in ("chaos.dat", "sub/inner.dat"):
        with open(os.path.join(target, rel), "wb") as f:
            f.write(pattern(name, 0))
            os.fsync(f.fileno())
    os.symlink("chaos.dat", os.path.join(target, "link"))
    return "new volume holds %s" % extra if extra else None


def check_dir(target, name):
    try:
        bad = [rel for rel in ("chaos.dat", "sub/inner.dat", "link")
               if open(os.path.join(target, rel), "rb").read() != pattern(name, 0)]
        return "differs: %s" % bad if bad else None
    except OSError as e:
        return "%s" % e


def check_block(target, name):
    fd = os.open(target, os.O_RDONLY)
    try:
        bad = [o for o in BLOCK_OFFSETS if os.pread(fd, 4096, o) != pattern(name, o)]
    finally:
        os.close(fd)
    return "pattern differs at %s" % bad if bad else None


class Lifecycles(threading.Thread):
    """One client: whole lifecycles on volumes of its own, until told to stop."""

    def __init__(self, run, index):
        super().__init__(name="client-%d" % index, daemon=True)
        self.chaos = run
        self.index = index
        kinds = ("ext4", "block", "directory") if getattr(run.driver, "base", None) else \
            ("ext4", "block")  # without a base, the core mounts: image volumes only
        self.kind = kinds[index % len(kinds)]
        self.block = self.kind == "block"

    def run(self):
        r = self.chaos
        client = ChaosClient(r.driver.endpoint)
        try:
            n = 0
            while r.keep_starting():
                n += 1
                self.lifecycle(client, "chaos-%02d-%04d" % (self.index, n))
        except Stuck as e:
            r.tally.note("stuck", str(e))
        except Exception as e:  # the harness's own failure
            r.tally.note("crashed", "%s: %r" % (self.name, e))
            raise
        finally:
            client.close()

    def snapshot_metadata(self, call, name, vid):
        """A snapshot of the volume in use, and what the SnapshotMetadata service says of
        it: exactly the blocks written, and nothing changed against itself."""
        r = self.chaos
        snap = call("controller", "CreateSnapshot", name=name + "-snap",
                    source_volume_id=vid).snapshot
        sid = snap.snapshot_id
        got = blocks_in(call("SnapshotMetadata", "GetMetadataAllocated", snapshot_id=sid))
        want = {o // 4096 for o in BLOCK_OFFSETS}
        if got != want:
            r.tally.note("data", "%s %s: allocated blocks %s, not %s" % (
                name, sid, sorted(got)[:8], sorted(want)))
        same = blocks_in(call("SnapshotMetadata", "GetMetadataDelta", base_snapshot_id=sid,
                              target_snapshot_id=sid))
        if same:
            r.tally.note("data", "%s %s: changed against itself: %s" % (
                name, sid, sorted(same)[:8]))
        call("controller", "DeleteSnapshot", snapshot_id=sid)

    def lifecycle(self, client, name):
        r, k = self.chaos, self.chaos.kubelet

        def call(service, method, **fields):
            return retried(r.tally, r.settings.stuck, name, client, service, method, **fields)

        cap = {"ext4": mount_cap("ext4"), "block": block_cap(), "directory": mount_cap("")}[
            self.kind]
        params = ({"type": "directory", "baseDir": r.driver.base}
                  if self.kind == "directory" else {})
        vol = call("controller", "CreateVolume", name=name, volume_capabilities=[cap],
                   parameters=params,
                   capacity_range=client.pb.CapacityRange(required_bytes=VOLUME_BYTES,
                                                          limit_bytes=VOLUME_BYTES)).volume
        vid = vol.volume_id
        with r.tally.lock:
            r.tally.volume_ids.add(vid)
        # The directories kubelet makes: the staging directory, the target's parent.
        if self.block:
            staging, target = k.block_staging(name), k.block_target(name)
            write, check = write_block, check_block
        else:
            staging, target = k.staging(name), k.target(name)
            write, check = ((write_dir, check_dir) if self.kind == "directory"
                            else (write_fs, check_fs))
        stage = dict(volume_id=vid, staging_target_path=staging, volume_capability=cap)
        publish = dict(stage, target_path=target, readonly=False)
        unpublish = dict(volume_id=vid, target_path=target)
        unstage = dict(volume_id=vid, staging_target_path=staging)
        for first in (True, False):
            call("node", "NodeStageVolume", **stage)
            call("node", "NodePublishVolume", **publish)
            try:
                problem = write(target, name) if first else check(target, name)
            except OSError as e:
                problem = "%s: %s" % (target, e)
            if problem:
                r.tally.note("data", "%s %s: %s" % (name, vid, problem))
            if self.kind == "directory" and not first:
                snap = call("controller", "CreateSnapshot", name=name + "-snap",
                            source_volume_id=vid).snapshot
                call("controller", "DeleteSnapshot", snapshot_id=snap.snapshot_id)
            if self.block and not first:
                self.snapshot_metadata(call, name, vid)
            call("node", "NodeUnpublishVolume", **unpublish)
            call("node", "NodeUnstageVolume", **unstage)
        call("controller", "DeleteVolume", volume_id=vid)
        # What kubelet removes after unstaging; what stays is counted at the end.
        made = [staging] if self.block else [staging, os.path.dirname(staging)]
        for d in made + [os.path.dirname(target)]:
            try:
                os.rmdir(d)
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EBUSY, errno.ENOENT):
                    raise
        with r.tally.lock:
            r.tally.lifecycles += 1


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def status_field(pid, key):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def runner_kind(pid):
    """"runner" or "tree" for a child of the helper running sepcsi-runner or
    sepcsi-tree-runner, else None."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return None
    return {b"sepcsi-runner": "runner", b"sepcsi-tree-runner": "tree",
            b"sepcsi-core": "core"}.get(os.path.basename(argv[0]))


def processes(driver):
    """{kind: [pid, ...]} of the driver right now: the helper, its workers and runners,
    rpcd."""
    kids = {}
    try:
        kids = driver.children()
    except OSError:
        pass
    found = {kind: [] for kind in KINDS + ("audit",)}
    if RPCD in kids:
        found["rpcd"].append(kids[RPCD])
    if HELPER in kids:
        helper = kids[HELPER]
        found["helper"].append(helper)
        # The tool runner and the tree runner (sepcsi-runner, sepcsi-tree-runner)
        # are started before the helper is ready; a worker is forked for a request, under
        # the helper's filter (beside a core it holds no capability: the filter tells a
        # worker from a child still on its way to an exec at the helper's start).
        for p in children(helper):
            kind = runner_kind(p)
            if kind:
                found[kind].append(p)
            elif status_field(p, "Name") == "sepcsi-audit":
                found["audit"].append(p)  # a turn that draws "helper" may take it instead
            elif status_field(p, "Seccomp") == "2":
                found["worker"].append(p)
    return found


def kill(pid, parent):
    """SIGKILL pid if it is still parent's child; through a pidfd, so never another."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if status_field(pid, "PPid") != str(parent):
            return False
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def utc_now():
    t = time.time()
    return time.strftime("%H:%M:%S", time.gmtime(t)) + ".%03d" % (t % 1 * 1000)


class Killer(threading.Thread):
    """SIGKILLs one of the driver's processes at random moments until told to stop.

    Every turn draws the same numbers from the seeded generator whatever it finds
    (an interval, an order of kinds, which worker), so a seed replays the schedule."""

    def __init__(self, run):
        super().__init__(name="killer", daemon=True)
        self.chaos = run
        self.stop = threading.Event()

    def run(self):
        try:
            self.kill_until_stopped()
        except Exception as e:  # the harness's own failure
            self.chaos.tally.note("crashed", "%s: %r" % (self.name, e))
            raise

    def kill_until_stopped(self):
        r = self.chaos
        rng = random.Random(r.settings.seed)
        while not self.stop.wait(rng.uniform(*KILL_INTERVAL)):
            order = rng.sample(KINDS, len(KINDS))
            pick, writer = rng.random(), rng.random() < 0.5
            found = processes(r.driver)
            # A worker lives only while an operation runs: wait a little for one.
            deadline = time.monotonic() + WORKER_WAIT
            while order[0] == "worker" and not found["worker"] and time.monotonic() < deadline:
                time.sleep(0.0005)
                found = processes(r.driver)
            sup = r.driver.sup_pid()
            for kind in order:
                pids = found[kind]
                if not pids:
                    continue
                pid = pids[int(pick * len(pids))]
                parent = found["helper"][0] if kind in ("worker", "runner", "tree", "core") \
                    else sup
                if kind == "helper" and writer and found["audit"]:
                    # Its audit writer, which it does not outlive: the same kind of kill.
                    kind, pid, parent = "audit", found["audit"][0], found["helper"][0]
                if kill(pid, parent):
                    r.tally.add("kills", kind)
                    r.tally.note("kill_log", "%s %s %d" % (utc_now(), kind, pid))
                    break
            else:
                with r.tally.lock:
                    r.tally.no_victim += 1


# ---- what is left at the end ---------------------------------------------------------


def tree(root):
    """Every path beneath root, not looking into what is mounted there."""
    out = set()
    dev = os.lstat(root).st_dev
    for dirpath, dirnames, filenames in os.walk(root):
        out.update(os.path.join(dirpath, n) for n in dirnames + filenames)
        dirnames[:] = [n for n in dirnames if os.lstat(os.path.join(dirpath, n)).st_dev == dev]
    return out


def loop_numbers(devs):
    """{"major:minor"} of loop devices such as /dev/loop3."""
    out = set()
    for dev in devs:
        try:
            with open("/sys/block/%s/dev" % os.path.basename(dev)) as f:
                out.add(f.read().strip())
        except OSError:
            pass
    return out


def mounts_in(mountinfo, prefix, numbers):
    """Mount points of a mountinfo file beneath prefix (the helper's view has prefix
    itself as a mount), or of a device in numbers."""
    out = []
    try:
        with open(mountinfo) as f:
            for line in f:
                fields = line.split()
                mp = fields[4].encode().decode("unicode_escape")
                if mp.startswith(prefix + "/") or fields[2] in numbers:
                    out.append(mp)
    except OSError:
        pass
    return out


def driver_leaks(driver, kubelet_before):
    """{kind: [what]} left behind with the driver still running and nothing in flight."""
    leaks = {}
    loops = conftest.loops_backed_by(driver.data)
    leaks["loops"] = ["%s" % d for d in loops]
    numbers = loop_numbers(loops)
    mounts = set(mounts_in("/proc/self/mountinfo", driver.root, numbers))
    helper = processes(driver)["helper"]
    if helper:  # the helper's own view (the root at the same path): its mounts propagate here
        mounts.update("in the helper's view: " + m for m in mounts_in(
            "/proc/%d/mountinfo" % helper[0], driver.root, numbers))
    leaks["mounts"] = sorted(mounts)
    files = sorted(tree(driver.data))
    leaks["images"] = [p for p in files if os.path.dirname(p) in (
        os.path.join(driver.data, "images"), os.path.join(driver.data, "snapshots"))
        and p.endswith(".img")]
    leaks["tmp"] = [p for p in files if ".tmp" in os.path.basename(p)
                    or (p not in leaks["images"] and os.path.dirname(p) in (
                        os.path.join(driver.data, "images"),
                        os.path.join(driver.data, "snapshots")))]
    # The base, if the driver has one: nothing but the helper's own areas, empty.
    leaks["dirs"] = []
    base = getattr(driver, "base", None)
    for n in sorted(os.listdir(base)) if base else []:
        p = os.path.join(base, n)
        if n in BASE_AREAS and os.path.isdir(p):
            leaks["dirs"] += [os.path.join(p, m) for m in sorted(os.listdir(p))]
        elif n == NODE_RECORDS and os.path.isdir(p):
            leaks["dirs"] += [os.path.join(p, m) for m in sorted(os.listdir(p))
                              if m != driver.node_id]
        elif n == MARKS and os.path.isdir(p):
            live = set()
            for top, dirs, _ in os.walk(base):
                if os.path.realpath(top) == os.path.realpath(p):
                    continue
                for d in dirs:
                    try:
                        live.add("%x-" % os.lstat(os.path.join(top, d)).st_ino)
                    except OSError:
                        pass
            leaks["dirs"] += [os.path.join(p, m) for m in sorted(os.listdir(p))
                              if m.split("-")[0] + "-" in live]
        else:
            leaks["dirs"].append(p)
    new = tree(driver.root) - kubelet_before
    # The deepest new paths only: a leftover staging directory is one leak, not three.
    leaks["paths"] = sorted(p for p in new if not any(q.startswith(p + "/") for q in new))
    return leaks


def store_check(path):
    """(integrity, {table: rows}) of the store, opened read-only."""
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        result = [row[0] for row in db.execute("PRAGMA integrity_check")]
        fk = db.execute("PRAGMA foreign_key_check").fetchall()
        integrity = "ok" if result == ["ok"] and not fk else "; ".join(
            result + ["foreign key: %s" % (row,) for row in fk])
        tables = [row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        rows = {t: db.execute('SELECT count(*) FROM "%s"' % t).fetchone()[0] for t in tables}
    finally:
        db.close()
    return integrity, rows


def retry_until(fn, seconds):
    """fn() until it returns without a gRPC error; None after seconds of errors."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except grpc.RpcError:
            if time.monotonic() >= deadline:
                return None
        time.sleep(0.05)


# ---- the run -------------------------------------------------------------------------


def kubelet_layout(driver):
    """kubelet's tree beneath the driver's root, with the directories every volume
    shares made up front (kubelet keeps them), so that anything new at the end is a
    leak."""
    k = Kubelet(driver.root)
    for rel in ("plugins/kubernetes.io/csi/local.sepcsi.io",
                "plugins/kubernetes.io/csi/volumeDevices/staging",
                "plugins/kubernetes.io/csi/volumeDevices/publish",
                "pods/%s/volumes/kubernetes.io~csi" % POD):
        os.makedirs(k.path(rel), mode=0o750, exist_ok=True)
    return k


def blocks_in(msgs):
    """The 4 KiB blocks a SnapshotMetadata stream's ranges cover."""
    return {o // 4096 for m in msgs for b in m.block_metadata
            for o in range(b.byte_offset, b.byte_offset + b.size_bytes, 4096)}


def start_driver(bin_dir=None, directories=True, base="xfs"):
    """A driver that restarts its children up to 100 times a second, in kubelet's layout;
    with directories, a base for directory volumes (the helper mounts; base: one of
    test_dir_helper's BASES, xfs, btrfs or btrfs-simple), else none (the helper's capable
    core mounts)."""
    d = conftest.Driver(kubelet=True, bin_dir=bin_dir,
                        setup=BASES[base] if directories else None,
                        extra_args=["--restart-limit", "100", "--restart-window", "1",
                                    "--snapshot-metadata", "on"])
    d.kubelet = kubelet_layout(d)
    return d


class Run:
    def __init__(self, driver, settings):
        self.driver = driver
        self.kubelet = driver.kubelet
        self.settings = settings
        self.tally = Tally()
        self.started = time.monotonic()
        self.starting = True

    def keep_starting(self):
        """Whether a client may start another lifecycle."""
        if not self.starting:
            return False
        elapsed = time.monotonic() - self.started
        t = self.tally
        with t.lock:
            short = sum(t.calls.values()) < MIN_CALLS or sum(t.kills.values()) < MIN_KILLS
        if elapsed >= self.settings.seconds * 3 or (elapsed >= self.settings.seconds
                                                    and not short):
            self.starting = False
        return self.starting


def run(driver, settings, log=print):
    """The chaos run against a started driver (start_driver()); stops the driver
    to check its store. Returns a Result."""
    log("chaos: seed=%d (SEPCSI_CHAOS_SEED replays the kills) clients=%d seconds=%g" %
        (settings.seed, settings.clients, settings.seconds))
    kubelet_before = tree(driver.root)
    r = Run(driver, settings)
    killer = Killer(r)
    clients = [Lifecycles(r, i) for i in range(settings.clients)]
    killer.start()
    try:
        for c in clients:
            c.start()
        while r.keep_starting():
            time.sleep(0.1)
    finally:  # whatever happened here, no kill after the chaos
        r.starting = False
        killer.stop.set()
        killer.join()
    chaos_seconds = time.monotonic() - r.started
    for c in clients:
        c.join()
    res = Result(settings, r.tally, chaos_seconds, time.monotonic() - r.started)

    c = ChaosClient(driver.endpoint)
    # Ready within CHECK_WAIT: a kill just before the end leaves a child restarting, and
    # Probe answers "not ready" (an answer, not an error) until it is back.
    deadline = time.monotonic() + CHECK_WAIT
    while True:
        probe = retry_until(lambda: c.identity("Probe", timeout=5),
                            max(0.0, deadline - time.monotonic()))
        if probe is None or probe.ready.value or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    res.ready = bool(probe is not None and probe.ready.value)
    listed = retry_until(lambda: c.controller("ListVolumes", timeout=5), CHECK_WAIT)
    res.leaks["volumes"] = (["ListVolumes never answered"] if listed is None else
                            [e.volume.volume_id for e in listed.entries])
    c.close()
    res.leaks.update(driver_leaks(driver, kubelet_before))
    try:
        driver.kubelet.untouched()
    except AssertionError as e:
        res.other.append("kubelet's own files changed: %s" % e)

    res.exit_status = driver.stop()
    res.integrity, rows = store_check(os.path.join(driver.state, STORE_FILE))
    res.leaks["rows"] = ["%s=%d" % (t, n) for t, n in sorted(rows.items()) if n]
    logs = driver.logs()
    for mark in ("AddressSanitizer", "runtime error:", "SIGSYS"):
        if mark in logs:
            res.other.append("%r in the driver's log" % mark)
    lines = logs.splitlines()
    res.restarts = collections.Counter(
        "%s %s" % (ln.split("role=")[1].split()[0], ln.split('how="')[1].split('"')[0])
        for ln in lines if " child_exited " in ln and 'how="' in ln)
    # rpcd and the helper disagreeing about their channel (either one calling the
    # other's message a violation) is never a consequence of a kill done right.
    res.violations = [ln for ln in lines if "helper protocol violation:" in ln
                      or " protocol_violation " in ln]
    return res


class Result:
    def __init__(self, settings, tally, chaos_seconds, seconds):
        self.settings = settings
        self.tally = tally
        self.chaos_seconds = chaos_seconds
        self.seconds = seconds
        self.ready = False
        self.leaks = {}
        self.integrity = "?"
        self.exit_status = None
        self.restarts = collections.Counter()
        self.violations = []
        self.other = []

    def summary(self):
        t = self.tally
        count = lambda c: " ".join("%s=%d" % kv for kv in sorted(c.items())) or "-"
        kinds = ("volumes", "loops", "mounts", "images", "tmp", "dirs", "paths", "rows")
        return ("chaos: seed=%d calls=%d lifecycles=%d kills=%d (%s) retries=%d (%s) "
                "stuck=%d data_errors=%d violations=%d leaks=%d (%s) integrity=%s ready=%s "
                "seconds=%.0f+%.0f" % (
                    self.settings.seed, sum(t.calls.values()), t.lifecycles,
                    sum(t.kills.values()), count(t.kills), sum(t.retries.values()),
                    count(t.retries), len(t.stuck), len(t.data), len(self.violations),
                    sum(len(self.leaks.get(k, ())) for k in kinds),
                    " ".join("%s=%d" % (k, len(self.leaks.get(k, ()))) for k in kinds),
                    self.integrity, "yes" if self.ready else "NO", self.chaos_seconds,
                    self.seconds - self.chaos_seconds))

    def details(self):
        """The summary, then what each count is made of."""
        t = self.tally
        out = [self.summary(),
               "  calls by method: %s" % dict(sorted(t.calls.items())),
               "  new channels after %d s of UNAVAILABLE, by method: %s" % (
                   RECONNECT_AFTER, dict(sorted(t.redials.items())) or "none"),
               "  children exited (supervisor's log): %s; no victim found %d times; "
               "supervisor exit status %s" % (dict(self.restarts), t.no_victim,
                                              self.exit_status)]
        for line in t.stuck:
            out.append("  stuck: %s" % line)
        for line in t.data:
            out.append("  data: %s" % line)
        for kind, items in sorted(self.leaks.items()):
            for item in items:
                out.append("  leak %s: %s%s" % (kind, item, self.origin(kind, item)))
        for line in self.violations[:20]:
            out.append("  violation: %s" % line)
        for line in self.other:
            out.append("  problem: %s" % line)
        out.append("  errors seen (attempts, method, code, details):")
        # Every error other than UNAVAILABLE, and the most frequent UNAVAILABLE ones.
        unavailable = 0
        for (method, code, details), n in t.errors.most_common():
            if code == "UNAVAILABLE":
                unavailable += 1
                if unavailable > 10:
                    continue
            out.append("    %6d %s %s %s" % (n, method, code, details))
        return "\n".join(out)

    def origin(self, kind, path):
        """For a leaked image or temporary file: whether a client ever saw its id."""
        if kind not in ("images", "tmp") or "/images/" not in path:
            return ""
        vid = os.path.basename(path).split(".")[0]
        return (" (a volume CreateVolume answered, deleted since)" if vid in
                self.tally.volume_ids else " (an id no CreateVolume answered)")

    def problems(self):
        """Each unmet acceptance point, in words; empty when the run passed."""
        t = self.tally
        out = []
        calls, kills = sum(t.calls.values()), sum(t.kills.values())
        if calls < MIN_CALLS:
            out.append("only %d successful calls (at least %d)" % (calls, MIN_CALLS))
        if kills < MIN_KILLS:
            out.append("only %d kills (at least %d)" % (kills, MIN_KILLS))
        if t.stuck:
            out.append("%d calls stuck" % len(t.stuck))
        if t.data:
            out.append("%d data errors" % len(t.data))
        if t.crashed:
            out.append("harness threads crashed: %s" % t.crashed)
        for kind, items in sorted(self.leaks.items()):
            if items:
                out.append("%d leaked %s" % (len(items), kind))
        if self.violations:
            out.append("%d protocol violations between rpcd and the helper" %
                       len(self.violations))
        if self.integrity != "ok":
            out.append("store integrity: %s" % self.integrity)
        if not self.ready:
            out.append("driver not ready at the end")
        if self.exit_status != 0:
            out.append("supervisor exit status %s after SIGTERM" % self.exit_status)
        return out + self.other


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", help="build directory (default: $SEPCSI_BUILD_DIR or build/)")
    p.add_argument("--seconds", type=float, help="chaos time (SEPCSI_CHAOS_SECONDS, 60)")
    p.add_argument("--seed", type=int, help="kill schedule seed (SEPCSI_CHAOS_SEED)")
    p.add_argument("--clients", type=int, help="client threads (SEPCSI_CHAOS_CLIENTS, 10)")
    p.add_argument("--dir-base", choices=sorted(BASES), default="xfs",
                   help="the base directory's file system for directory volumes (xfs)")
    p.add_argument("--keep", action="store_true",
                   help="leave the driver's tree (log, store, images) and the times of "
                   "the kills (kills.txt) for a look")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("chaos.py: needs root")
    if os.environ.get("SEPCSI_CHAOS_NS") != "1":
        env = dict(os.environ, SEPCSI_CHAOS_NS="1")
        os.execvpe("unshare", ["unshare", "-m", "--propagation", "private", sys.executable]
                   + sys.argv, env)
    subprocess.run(["mount", "--make-rshared", "/"], check=True)
    s = Settings.from_env()
    s.seconds = a.seconds if a.seconds is not None else s.seconds
    s.seed = a.seed if a.seed is not None else s.seed
    s.clients = a.clients if a.clients is not None else s.clients
    d = start_driver(os.path.abspath(os.path.join(a.build, "bin")) if a.build else None,
                     base=a.dir_base)
    res = None
    try:
        res = run(d, s)
    finally:
        d.stop()
        if a.keep:
            with open(os.path.join(d.tmp, "kills.txt"), "w") as f:
                f.write("".join(line + "\n" for line in res.tally.kill_log) if res else "")
            for dev in conftest.loops_backed_by(d.tmp):  # devices outlive the namespace
                subprocess.run(["losetup", "-d", dev], check=False)
            print("kept: %s (driver.log, kills.txt, state/, data/, root/)" % d.tmp)
        else:
            d.cleanup()
    print(res.details())
    problems = res.problems()
    for line in problems:
        print("FAIL: %s" % line)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
