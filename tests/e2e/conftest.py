"""Fixtures for the end-to-end tests: a real sepcsi-supervisor (with the real
rpcd and mounthelper) started as root inside the private mount namespace that
the test command creates with `unshare -m --propagation private`.

Every driver gets its own temporary tree:
    <tmp>/root      the only allowed root for staging and target paths
    <tmp>/state     rpcd's store
    <tmp>/data      the helper's images
    <tmp>/csi.sock  the CSI endpoint
Teardown stops the supervisor and then removes whatever a failed test left:
mounts under <tmp> (lazily, deepest first), loop devices backed by files in
<tmp>/data, and the tree itself.
"""
import fcntl
import glob
import hashlib
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import time

# gRPC's event engine registers fork handlers by default (its Python build turns fork
# support on); the tests fork for every subprocess while gRPC channels are open, and a
# fork then waited in those handlers for threads that never quiesced: a whole run hung
# (seen once, in test_install's subprocesses, after the gRPC tests). Every child here
# execs or uses no gRPC, so the handlers are not needed; set before any test imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# Nor does any test start a child with a preexec_fn: without one, Python starts children
# with vfork(2), which runs no fork handler at all; with one, it forks, and a fork of this
# multi-threaded process once aborted a whole run (SIGABRT in the parent's fork, in
# test_core's start of a core, after the gRPC tests). Descriptors a child needs at fixed
# numbers are placed by a shell between the exec and the child's own (with_fds).

import pytest

import csi_client

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SEPCSI_BUILD_DIR", os.path.join(REPO, "build"))
BIN = os.path.join(BUILD, "bin")


def with_fds(argv, fds):
    """argv run with each descriptor of fds ({its number in the child: the descriptor
    here}) at that number, and the descriptors to pass (Popen's pass_fds): bash, exec'd
    in between, moves them, closes the rest of them and execs argv."""
    srcs = list(fds.values())
    aside = {s: 200 + i for i, s in enumerate(srcs)}  # out of the way of every target first
    place = ["%d<&%d" % (aside[s], s) for s in srcs]
    place += ["%d<&%d" % (t, aside[s]) for t, s in fds.items()]
    place += ["%d<&-" % n for n in list(aside.values()) + [s for s in srcs if s not in fds]]
    return (["/bin/bash", "-c", "exec %s && exec \"$@\"" % " ".join(place), "bash"] +
            list(argv), tuple(srcs))


def mounts_under(prefix):
    """Mount points at or below prefix, from /proc/self/mountinfo, in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].encode().decode("unicode_escape")
            if mp == prefix or mp.startswith(prefix + "/"):
                out.append(mp)
    return out


def mounts_since(prefix, before):
    """Mount points at or below prefix that are not in before (an earlier mounts_under
    of it), in mount order: what happened since, whatever the host held then."""
    rest, out = list(before), []
    for mp in mounts_under(prefix):
        if mp in rest:
            rest.remove(mp)
        else:
            out.append(mp)
    return out


def kubelet_paths(kubelet, pv, driver_name="local.sepcsi.io"):
    """A staging directory and a target path for the PV named pv in kubelet's own layout
    beneath kubelet, with what kubelet makes itself (the staging directory, the
    target's parent) made, root's and 0750."""
    staging = os.path.join(kubelet, "plugins/kubernetes.io/csi", driver_name,
                           hashlib.sha256(pv.encode()).hexdigest()[:16], "globalmount")
    pvdir = os.path.join(kubelet, "pods/7d3c9a52-0c4e-4b8e-9f4a-2a1d5e6f7a8b/volumes",
                         "kubernetes.io~csi", pv)
    os.makedirs(staging, mode=0o750)
    os.makedirs(pvdir, mode=0o750)
    return staging, os.path.join(pvdir, "mount")


def loops_backed_by(prefix):
    """Loop devices whose backing file lies under prefix. Matched by the file's
    identity (device and inode) as well as by path: the kernel names a backing file
    by its path in the attaching process's view, so a device the helper attached in
    its own mount namespace shows another path (and, once that namespace is gone, a
    path relative to the mount it came from), which a path match would miss."""
    ids = set()
    try:
        top = os.lstat(prefix).st_dev
    except OSError:
        top = None
    for dirpath, dirnames, filenames in os.walk(prefix):
        for n in filenames:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                ids.add(("%d:%d" % (os.major(st.st_dev), os.minor(st.st_dev)), str(st.st_ino)))
        # Not into what is mounted here (a volume's own files are no backing files).
        dirnames[:] = [d for d in dirnames
                       if os.lstat(os.path.join(dirpath, d)).st_dev == top]
    res = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,BACK-MAJ:MIN,BACK-INO,BACK-FILE"],
                         capture_output=True, text=True, check=False)
    devs = []
    for line in res.stdout.splitlines():
        parts = line.split(None, 3)
        if len(parts) < 4:
            continue
        name, majmin, ino, path = parts
        if (majmin, ino) in ids or path.strip().startswith(prefix + "/"):
            devs.append(name)
    return devs


def copy_bin_dir():
    """A root-owned copy of the build's bin/ (the eight programs), in which a
    test may replace a child; the supervisor accepts it as its own directory."""
    d = tempfile.mkdtemp(prefix="sepcsi-bin-")
    os.chmod(d, 0o755)
    for name in ("sepcsi-supervisor", "sepcsi-rpcd", "sepcsi-mounthelper", "sepcsi-core",
                 "sepcsi-reader", "sepcsi-runner", "sepcsi-tree-runner", "sepcsi-privileges",
                 "sepcsi-metrics-check"):
        shutil.copy2(os.path.join(BIN, name), os.path.join(d, name))
    return d


# The trees the tests make for a driver or a core (held: see claim_tmp).
TREE_PREFIXES = ("sepcsi-e2e-", "sepcsi-core-")


def claim_tmp(prefix):
    """A new tree under /tmp, and a descriptor holding a lock on it for as long as this
    process keeps it (closed by cleanup_tree's caller, or by this process's end). A tree
    whose lock nobody holds was left by a run that was killed before it cleaned up:
    sweep_leftovers removes it, with what is still attached or mounted from it."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    os.chmod(tmp, 0o755)
    fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)  # not inherited by the driver
    fcntl.flock(fd, fcntl.LOCK_EX)
    return tmp, fd


def sweep_leftovers():
    """Before any test: every tree an earlier run left (its lock free, so its owner is
    gone), with the driver processes still running on it, its mounts and its loop
    devices. A run killed mid-test (CI's timeout, a signal) cleans up here at the latest."""
    for tmp in sorted(t for prefix in TREE_PREFIXES for t in glob.glob("/tmp/%s*" % prefix)):
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # held: a run in progress
        for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv = f.read()
            except OSError:
                continue
            if (tmp + "/").encode() in argv and pid != os.getpid():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        time.sleep(0.2)  # the killed processes' mounts and descriptors go with them
        cleanup_tree(tmp)
        os.close(fd)


def cleanup_tree(tmp):
    # A file system a failed test left frozen would keep its loop device for good once
    # detached: thaw every mount first (harmless where nothing is frozen).
    for mp in mounts_under(tmp):
        subprocess.run(["fsfreeze", "-u", mp], stderr=subprocess.DEVNULL, check=False)
    for mp in reversed(mounts_under(tmp)):
        subprocess.run(["umount", "-l", mp], check=False)
    for dev in loops_backed_by(tmp):
        detach_loop(dev)
        release_orphan(dev)
    subprocess.run(["rm", "-rf", "--one-file-system", tmp], check=False)


LOOP_GET_STATUS64 = 0x4C05
PIN_NAME = b"sepcsi-pin"


def pins_of(rdev):
    """The loop devices pinning the raw block device numbered rdev (mounthelper/mh_loop.c,
    "pins"): read-only, named sepcsi-pin, backed by a node of that number."""
    found = []
    for name in sorted(os.listdir("/sys/block")):
        try:
            with open("/sys/block/%s/ro" % name) as f:
                if not name.startswith("loop") or f.read().strip() != "1":
                    continue
            fd = os.open("/dev/" + name, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            info = fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(232))
        except OSError:
            continue
        finally:
            os.close(fd)
        if struct.unpack_from("Q", info, 16)[0] == rdev and \
                info[56:120].rstrip(b"\0") == PIN_NAME:
            found.append("/dev/" + name)
    return found


def detach_loop(dev):
    """losetup -d of dev, its pins first (else they would hold it bound for good)."""
    try:
        rdev = os.stat(dev).st_rdev
    except OSError:
        return
    for pin in pins_of(rdev):
        subprocess.run(["losetup", "-d", pin], check=False)
    subprocess.run(["losetup", "-d", dev], check=False)


def release_orphan(dev):
    """A loop device still bound after its detach, with no mount left to thaw through:
    a file system frozen when its last mount went (a process killed mid-freeze whose
    mounts a failed test lost) keeps its superblock, and so the device, for good.
    Mounted again in a namespace of its own, the same superblock is reached: thawed,
    unmounted, and the device goes."""
    if not os.path.exists("/sys/block/%s/loop" % os.path.basename(dev)):
        return
    subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                    'd=$(mktemp -d) && mount "$0" "$d" && fsfreeze -u "$d"; '
                    'umount "$d"; rmdir "$d"', dev],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60,
                   check=False)
    subprocess.run(["losetup", "-d", dev], stderr=subprocess.DEVNULL, check=False)


def proc_status(pid):
    """/proc/<pid>/status as {key: value}."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def descendants(pid):
    """Every process below pid (children, theirs, ...), from /proc, in one pass."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            with open("/proc/%d/task/%d/children" % (p, p)) as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            continue
        out.update(kids)
        todo.extend(kids)
    return out


class Driver:
    """A running sepcsi-supervisor and what it was given."""

    def __init__(self, extra_args=(), policy_extra="", bin_dir=None, prefix=(), wait=True,
                 env=None, kubelet=False, setup=None, node_id="e2e-node"):
        self.tmp, self.lock = claim_tmp("sepcsi-e2e-")
        self.root = os.path.join(self.tmp, "root")
        self.state = os.path.join(self.tmp, "state")
        self.data = os.path.join(self.tmp, "data")
        self.sock = os.path.join(self.tmp, "sock", "csi.sock")
        self.metrics = os.path.join(self.tmp, "metrics", "sepcsi.prom")
        self.endpoint = "unix://" + self.sock
        self.node_id = node_id
        os.makedirs(self.root)
        self.policy = os.path.join(self.tmp, "policy.ini")
        with open(self.policy, "w") as f:
            # Any layout beneath the root, or (kubelet) the default policy's
            # patterns: kubelet's own CSI directories only (test_security.py).
            f.write("[paths]\nallowed_roots = %s\n%s%s" % (
                self.root, "" if kubelet or "_paths" in policy_extra else
                "staging_paths = **\ntarget_paths = **\n", policy_extra))
        if setup:  # e.g. a file system of its own for the data directory
            setup(self)
        self.log_path = os.path.join(self.tmp, "driver.log")
        # bin_dir: where sepcsi-supervisor (and the children it finds beside
        # itself) live; a test may pass a root-owned copy with a stand-in child.
        self.args = [os.path.join(bin_dir or BIN, "sepcsi-supervisor"),
                     "--endpoint", self.endpoint, "--node-id", self.node_id,
                     "--state-dir", self.state, "--data-dir", self.data,
                     "--policy", self.policy, "--metrics-file", self.metrics,
                     "--log-level", "debug"] + list(extra_args)
        # prefix: a command that runs the supervisor as its only child, e.g.
        # ["unshare", "--pid", "--fork"] to make it PID 1 of a new namespace.
        self.prefix = list(prefix)
        self.env = dict(os.environ, **(env or {}))
        self.start(wait)

    def start(self, wait=True):
        """Start the supervisor (again, after stop(): same tree, log appended)."""
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.prefix + self.args, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     env=self.env)
        self.client = None
        if wait:  # for a driver that is expected to fail, not to serve
            csi_client.wait_ready(self.endpoint, 20)
            self.client = csi_client.CsiClient(self.endpoint)
            self.wait_helper_ready()

    def wait_helper_ready(self, timeout=20):
        """rpcd serves (Probe, GetPluginInfo) before the helper's start is done; a test
        that looks at the data directory wants the helper, and its core, ready too (the
        core makes audit.log as it starts). Returns quietly after timeout: a test of a
        helper that never gets ready says so itself."""
        deadline = time.monotonic() + timeout
        while not re.search(r'child_ready\W+role\W+mounthelper', self.logs()):
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    def logs(self):
        with open(self.log_path) as f:
            return f.read()

    # Test pause points (mounthelper/mh_pause.c; the driver must have been
    # started with env={"SEPCSI_TEST_PAUSE": "1"}): hold(point) makes the next
    # worker that reaches the point wait there; paused(point) waits until one
    # does and returns its pid; release(point) lets it (and later ones) go on.
    def _pauses(self, point, keyed):
        """The log's lines of workers paused at point (keyed: only those whose request
        has a key, an id: not a start-up reconciliation's LIST held at the same gate)."""
        return [ln for ln in self.logs().splitlines()
                if ("test_pause point=%s " % point) in ln and (not keyed or " key=" in ln)]

    def hold(self, point, keyed=False):
        gates = os.path.join(self.data, "test-pause")
        os.makedirs(gates, mode=0o700, exist_ok=True)
        open(os.path.join(gates, point), "w").close()
        self._seen = getattr(self, "_seen", {})
        self._seen.setdefault((point, keyed), len(self._pauses(point, keyed)))

    def paused(self, point, timeout=60, keyed=False):
        deadline = time.monotonic() + timeout
        want = self._seen[(point, keyed)] + 1
        while True:
            lines = self._pauses(point, keyed)
            if len(lines) >= want:
                self._seen[(point, keyed)] = want
                return int(lines[want - 1].split("pid=")[1].split()[0])
            assert time.monotonic() < deadline, "no worker paused at %s" % point
            time.sleep(0.005)

    def release(self, point):
        try:
            os.unlink(os.path.join(self.data, "test-pause", point))
        except FileNotFoundError:
            pass

    def sup_pid(self):
        """The supervisor's pid (as this process sees it)."""
        if not self.prefix:
            return self.proc.pid
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return int(f.read().split()[0])
        except (OSError, IndexError):  # the supervisor is gone; the prefix exits with it
            return self.proc.pid

    def children(self):
        """{comm: pid} of the supervisor's long-lived direct children: not a metrics check
        (one per rpcd report, for milliseconds), nor a child between fork and exec."""
        out = {}
        pid = self.sup_pid()
        path = "/proc/%d/task/%d/children" % (pid, pid)
        with open(path) as f:
            for pid in f.read().split():
                try:
                    with open("/proc/%s/comm" % pid) as c:
                        comm = c.read().strip()
                except (FileNotFoundError, ProcessLookupError):
                    continue  # exited (and reaped) between the two reads: not a child any more
                if comm not in ("sepcsi-metrics-", "sepcsi-supervis"):
                    out[comm] = int(pid)
        return out

    def stop(self, sig=signal.SIGTERM):
        if self.client:
            self.client.close()
            self.client = None
        if self.proc.poll() is None:
            os.kill(self.sup_pid(), sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def cleanup(self):
        cleanup_tree(self.tmp)
        os.close(self.lock)


def has_pause_points(binary):
    """Whether a binary was built with test pause points (-DSEPCSI_TESTS=ON): their log
    event's name is in it; a shipped build has none."""
    with open(binary, "rb") as f:
        return b"test_pause" in f.read()


@pytest.fixture(scope="session", autouse=True)
def private_mount_namespace():
    if os.geteuid() != 0:
        pytest.exit("the end-to-end tests need root", 2)
    if os.readlink("/proc/self/ns/mnt") == os.readlink("/proc/%d/ns/mnt" % os.getppid()):
        pytest.exit("run the end-to-end tests inside `unshare -m --propagation private`", 2)
    if not os.path.exists(os.path.join(BIN, "sepcsi-supervisor")):
        pytest.exit("no build in %s (set SEPCSI_BUILD_DIR)" % BUILD, 2)
    if not all(has_pause_points(os.path.join(BIN, b))
               for b in ("sepcsi-mounthelper", "sepcsi-core")):
        pytest.exit("%s is a shipped build, without the test pause points these tests hold: "
                    "build with -DSEPCSI_TESTS=ON (tools/build.sh DIR -DSEPCSI_TESTS=ON, as "
                    "tools/test.sh does)" % BUILD, 2)
    # A SIGTERM (CI's timeout, an operator) ends the run the way ^C does: each test's
    # finally blocks and each fixture's teardown still stop their drivers and detach
    # their loop devices; what a harder kill leaves, the next run sweeps first.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sweep_leftovers()
    # This namespace's mounts, private to it, are then shared among themselves
    # (as a host's are under systemd): the helper's own namespace reaches the
    # test roots through that propagation, as it reaches kubelet's directory.
    subprocess.run(["mount", "--make-rshared", "/"], check=True)


def running(d):
    """Yield d (a started driver) to the test, then stop it and clean up, whatever happened."""
    try:
        yield d
    finally:
        d.stop()
        if os.environ.get("SEPCSI_E2E_SHOW_LOGS"):
            print(d.logs())
        d.cleanup()


@pytest.fixture
def driver():
    yield from running(Driver())


@pytest.fixture
def pausable_driver():
    """A driver whose helper honours test pause points (Driver.hold/paused/release)."""
    yield from running(Driver(env={"SEPCSI_TEST_PAUSE": "1"}))


@pytest.fixture
def hostile_driver():
    """The real supervisor and helper with a hostile stand-in as rpcd (hostile.py)."""
    import hostile  # here, not at the top: hostile imports this module
    yield from running(hostile.HostileDriver())


@pytest.fixture
def paths(driver):
    """A staging dir (which the CO creates) and a target path (which the SP creates)."""
    staging = os.path.join(driver.root, "staging", "vol")
    os.makedirs(staging)
    target_parent = os.path.join(driver.root, "pods", "p1")
    os.makedirs(target_parent)
    return staging, os.path.join(target_parent, "mount")
