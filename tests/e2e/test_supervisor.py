"""Process tests of sepcsi-supervisor: children killed with SIGKILL at rest and
in the middle of a call, a helper or rpcd killed until the supervisor gives up
on it, a helper that cannot start, one that never reports READY, one killed by
SIGSYS, an rpcd that cannot start, a stop during a call, the supervisor as
PID 1, and the descriptors everyone holds after restarts.

Giving up on either child (FAILED) ends the supervisor: it stops the other
child and exits 3 by itself, leaving no process behind, so that kubelet or
systemd restarts the whole driver.

Every restart is watched by a sampler that reads the supervisor's children
from /proc as fast as it can: at no sample may two processes of one role (or
more than two children at all, which catches a forked child before its exec)
exist. After each restart the driver must answer Probe with ready=true and
carry a new volume through its whole life, and no mount or loop device may be
left behind.
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

import grpc
import pytest

import csi_client
from conftest import Driver, copy_bin_dir, descendants, loops_backed_by, mounts_under
from csi_client import mount_cap

MiB = 1 << 20
HELPER = "sepcsi-mounthel"  # /proc/<pid>/comm keeps 15 characters
RPCD = "sepcsi-rpcd"
RESTART_LIMIT = 5  # the supervisor's default --restart-limit


def children_of(pid):
    """[(pid, comm)] of pid's direct children, zombies included, in one snapshot."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            pids = [int(p) for p in f.read().split()]
    except OSError:
        return []
    out = []
    for p in pids:
        try:
            with open("/proc/%d/comm" % p) as f:
                out.append((p, f.read().strip()))
        except OSError:  # ENOENT or ESRCH: reaped since the snapshot
            pass
    return out


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(0.002)


# Runs in a process of its own, so that this test's threads and gRPC cannot
# slow it down: one snapshot of the supervisor's children per loop, until its
# stdin closes; then one line of JSON.
SAMPLER = r"""
import collections, json, os, select, sys
sup = int(sys.argv[1])
samples, max_total, per_role, pids = 0, 0, collections.Counter(), collections.defaultdict(set)
while not select.select([0], [], [], 0)[0]:
    try:
        with open("/proc/%d/task/%d/children" % (sup, sup)) as f:
            kids = [int(p) for p in f.read().split()]
    except OSError:
        break
    comms = []
    for p in kids:
        try:
            with open("/proc/%d/comm" % p) as f:
                comms.append((p, f.read().strip()))
        except OSError:  # ENOENT or ESRCH: reaped since the snapshot
            pass
    samples += 1
    max_total = max(max_total, len(kids))
    for comm, n in collections.Counter(c for _, c in comms).items():
        per_role[comm] = max(per_role[comm], n)
    for p, comm in comms:
        pids[comm].add(p)
    if samples == 1:
        print("ready", flush=True)  # the caller waits for this before acting
print(json.dumps({"samples": samples, "max_total": max_total, "per_role": per_role,
                  "pids": {k: sorted(v) for k, v in pids.items()}}))
"""


class ChildSampler:
    """Samples the supervisor's children from another process until stopped."""

    def __init__(self, sup_pid):
        self.proc = subprocess.Popen([sys.executable, "-c", SAMPLER, str(sup_pid)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        # Wait until it has taken its first sample: starting Python can take
        # longer than the restart being watched.
        assert self.proc.stdout.readline().strip() == "ready", "sampler did not start"

    def stop_and_check(self, role=None, old_pid=None):
        """No overlap at any sample; with role, both old_pid and a new pid were seen."""
        out, err = self.proc.communicate("x", timeout=10)
        assert self.proc.returncode == 0 and out, "sampler failed: %s" % err
        r = json.loads(out.strip().splitlines()[-1])
        print("sampler: %(samples)d samples, at most %(max_total)d children, "
              "per role %(per_role)s, pids %(pids)s" % r)
        assert r["max_total"] <= 2, "more than two children at once"
        assert all(n == 1 for n in r["per_role"].values()), "two children of one role"
        if role:
            seen = r["pids"].get(role, [])
            assert old_pid in seen and len(seen) >= 2, "the sampler did not see the restart"
        assert r["samples"] >= 20


def probe_ready(endpoint, timeout=20):
    """Probe with a fresh channel each try until ready=true; return the client."""
    deadline = time.monotonic() + timeout
    while True:
        c = csi_client.CsiClient(endpoint)
        try:
            if c.identity("Probe", timeout=2).ready.value:
                return c
        except grpc.RpcError:
            pass
        c.close()
        assert time.monotonic() < deadline, "Probe not ready after %ss" % timeout
        time.sleep(0.01)


def new_client(driver):
    """Replace the driver's client (whose channel may be backing off after an rpcd death)."""
    c = probe_ready(driver.endpoint)
    driver.client.close()
    driver.client = c
    return c


def volume_paths(driver, name):
    staging = os.path.join(driver.root, "staging", name)
    os.makedirs(staging)
    parent = os.path.join(driver.root, "pods", name)
    os.makedirs(parent)
    return staging, os.path.join(parent, "mount")


def lifecycle(driver, name):
    """Create, stage, publish, write, unpublish, unstage, delete one volume."""
    c = driver.client
    cap = mount_cap("ext4")
    staging, target = volume_paths(driver, name)
    vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=cap)
    c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging, target_path=target,
           volume_capability=cap, readonly=False)
    with open(os.path.join(target, "data"), "w") as f:
        f.write(name)
    with open(os.path.join(staging, "data")) as f:
        assert f.read() == name
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=vid)
    assert not os.path.exists(os.path.join(driver.data, "images", vid + ".img"))


def assert_clean(driver):
    assert mounts_under(driver.tmp) == []
    assert loops_backed_by(driver.data) == []


def count(logs, event, role):
    return len(re.findall(r"\b%s role=%s\b" % (event, role), logs))


class Call(threading.Thread):
    """One CSI call in a thread of its own; .code is its status code when done."""

    def __init__(self, endpoint, service, method, **fields):
        super().__init__(daemon=True)
        self.endpoint, self.service, self.method, self.fields = endpoint, service, method, fields
        self.code = None
        self.details = None
        self.start()

    def run(self):
        with csi_client.CsiClient(self.endpoint) as c:
            try:
                getattr(c, self.service)(self.method, timeout=120, **self.fields)
                self.code = grpc.StatusCode.OK
            except grpc.RpcError as e:
                self.code, self.details = e.code(), e.details()


@pytest.fixture
def bin_copy():
    """A root-owned copy of the build's bin/ in which a test may replace a child."""
    d = copy_bin_dir()
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def install_helper(bin_dir, script, name="sepcsi-mounthelper"):
    """Replace one child in bin_dir by a stand-in script."""
    path = os.path.join(bin_dir, name)
    with open(path, "w") as f:
        f.write(script)
    os.chmod(path, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


def test_stopped_and_continued(driver):
    """SIGSTOP and SIGCONT of rpcd, the helper and its tool runner, each stopped in a sleep
    (gRPC's timed waits, ppoll): the kernel resumes the sleep with restart_syscall, which
    every seccomp table allows, so nothing dies or is restarted and a lifecycle still works."""
    lifecycle(driver, "pvc-before")
    kids = driver.children()
    helper = kids[HELPER]
    with open("/proc/%d/task/%d/children" % (helper, helper)) as f:
        runner = int(f.read().split()[0])
    for pid in (kids[RPCD], helper, runner):
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.3)  # stopped for a moment: any length does
        os.kill(pid, signal.SIGCONT)
    # A process killed at SIGCONT would be restarted before the lifecycle could finish,
    # and the supervisor logs its exit when it reaps it, first.
    assert driver.children() == kids
    assert os.path.exists("/proc/%d" % runner)
    lifecycle(driver, "pvc-after")
    assert "child_exited" not in driver.logs()
    assert_clean(driver)


def test_helper_killed_idle(driver):
    """kill -9 the idle helper: a new one at once, rpcd keeps running and is re-plumbed."""
    lifecycle(driver, "pvc-before")
    kids = driver.children()
    old, rpcd = kids[HELPER], kids[RPCD]
    sampler = ChildSampler(driver.proc.pid)
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: driver.children().get(HELPER) not in (None, old), 10, "a new helper")
    new = driver.children()[HELPER]
    probe_ready(driver.endpoint).close()
    print("helper %d -> %d, Probe ready after %.0f ms" % (old, new, (time.monotonic() - t0) * 1e3))
    sampler.stop_and_check(HELPER, old)
    assert driver.children()[RPCD] == rpcd  # not restarted
    logs = driver.logs()
    restarts = [l for l in logs.splitlines() if "child_restart role=mounthelper" in l]
    # The first restart is immediate: due now, or a millisecond ago by the time it is logged.
    assert restarts and int(re.search(r"in_ms=(-?\d+) ", restarts[0]).group(1)) <= 0, restarts
    assert "peer_channel_sent role=rpcd pid=%d" % rpcd in logs
    lifecycle(driver, "pvc-after")
    assert_clean(driver)


def test_helper_killed_during_stage(pausable_driver):
    """kill -9 the helper in the middle of NodeStageVolume (held at its mkfs step, the
    loop device attached): that call fails UNAVAILABLE, nothing leaks, and the retried
    stage and a new lifecycle work."""
    driver = pausable_driver
    c = driver.client
    cap = mount_cap("ext4")
    staging, _ = volume_paths(driver, "pvc-mid")
    vid = c.controller("CreateVolume", name="pvc-mid", volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=16 << 30)).volume.volume_id
    old = driver.children()[HELPER]
    rpcd = driver.children()[RPCD]
    sampler = ChildSampler(driver.proc.pid)
    driver.hold("mkfs@" + vid)
    call = Call(driver.endpoint, "node", "NodeStageVolume", volume_id=vid,
                staging_target_path=staging, volume_capability=cap)
    try:
        driver.paused("mkfs@" + vid)
        os.kill(old, signal.SIGKILL)
    finally:
        driver.release("mkfs@" + vid)
    call.join(60)
    print("the interrupted NodeStageVolume: %s %s" % (call.code, call.details))
    assert call.code == grpc.StatusCode.UNAVAILABLE
    wait_for(lambda: driver.children().get(HELPER) not in (None, old), 10, "a new helper")
    probe_ready(driver.endpoint).close()
    sampler.stop_and_check(HELPER, old)
    assert driver.children()[RPCD] == rpcd
    # Killed with the device open and nothing mounted: autoclear freed the loop.
    assert mounts_under(staging) == []
    wait_for(lambda: loops_backed_by(driver.data) == [], 10, "the loop device to go")

    # The CO retries: the stage completes (mkfs again) and the volume goes away cleanly.
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=cap)
    assert mounts_under(staging) == [staging]
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=vid)
    lifecycle(driver, "pvc-after")
    assert_clean(driver)


def test_request_to_a_worker_that_died_idle(pausable_driver):
    """Idle workers killed after the helper picked one of them for a request and before it
    sent the request (the main loop held at the "dispatch" pause point, which it reaches
    only with an idle worker picked): the request never reached it, so the helper buries
    it and hands the request to another worker, and the call succeeds (it used to fail:
    "worker killed by signal 9"). The worker a CreateVolume leaves stays idle for seconds;
    should the pool have retired it before the next call came (a very slow machine), that
    call takes a new worker and never pauses, and the test tries again."""
    driver = pausable_driver
    c = driver.client
    cap = mount_cap("ext4")
    helper = driver.children()[HELPER]
    for attempt in range(5):
        name = "pvc-idle-%d" % attempt
        staging, _ = volume_paths(driver, name)
        vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                           capacity_range=c.pb.CapacityRange(required_bytes=64 << 20)
                           ).volume.volume_id
        point = "dispatch@" + vid
        driver.hold(point)
        seen = driver.logs().count("test_pause point=%s " % point)
        call = Call(driver.endpoint, "node", "NodeStageVolume", volume_id=vid,
                    staging_target_path=staging, volume_capability=cap)
        try:
            while call.is_alive() and \
                    driver.logs().count("test_pause point=%s " % point) == seen:
                time.sleep(0.005)
            # Held there, the call cannot end; ended, it never paused.
            paused = driver.logs().count("test_pause point=%s " % point) > seen
            if paused:
                # The main loop waits: every worker is idle, and the picked one among them.
                workers = [p for p, comm in children_of(helper) if comm == HELPER]
                assert workers
                for w in workers:
                    os.kill(w, signal.SIGKILL)
                for w in workers:  # zombies: the helper cannot reap them while it waits
                    wait_for(lambda: open("/proc/%d/stat" % w).read().rsplit(")", 1)[1]
                             .split()[0] == "Z", 10, "the workers to die")
        finally:
            driver.release(point)
        call.join(60)
        assert call.code == grpc.StatusCode.OK, (call.code, call.details)
        c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
        c.controller("DeleteVolume", volume_id=vid)
        if paused:
            break
    else:
        pytest.fail("the pool retired its idle worker before every call")
    assert driver.children()[HELPER] == helper
    assert "died while idle" in driver.logs()
    assert_clean(driver)


def test_rpcd_killed(driver):
    """kill -9 rpcd: a new rpcd serves the same endpoint; the helper keeps its pid
    and the mounts stay; the new rpcd finishes the old volume's life."""
    c = driver.client
    cap = mount_cap("ext4")
    staging, target = volume_paths(driver, "pvc-kept")
    vid = c.controller("CreateVolume", name="pvc-kept", volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)).volume.volume_id
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=cap)
    c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging, target_path=target,
           volume_capability=cap, readonly=False)
    with open(os.path.join(target, "kept"), "w") as f:
        f.write("still here")
    mounts = mounts_under(driver.root)
    loops = loops_backed_by(driver.data)
    kids = driver.children()
    helper, old = kids[HELPER], kids[RPCD]

    sampler = ChildSampler(driver.proc.pid)
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    wait_for(lambda: driver.children().get(RPCD) not in (None, old), 10, "a new rpcd")
    new = driver.children()[RPCD]
    c = new_client(driver)
    print("rpcd %d -> %d, Probe ready after %.0f ms" % (old, new, (time.monotonic() - t0) * 1e3))
    sampler.stop_and_check(RPCD, old)

    assert driver.children()[HELPER] == helper  # the helper was not restarted
    assert mounts_under(driver.root) == mounts
    assert loops_backed_by(driver.data) == loops
    with open(os.path.join(target, "kept")) as f:
        assert f.read() == "still here"
    logs = driver.logs()
    assert count(logs, "child_spawned", "mounthelper") == 1
    assert "peer_channel_sent role=mounthelper pid=%d" % helper in logs

    lifecycle(driver, "pvc-after")
    c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=vid)
    assert_clean(driver)


def spawned_pids(logs):
    """Every child the supervisor logged spawning."""
    return {int(p) for p in re.findall(r"child_spawned role=\S+ pid=(\d+) ", logs)}


def assert_gave_up(d, role, reason, seen=(), timeout=30):
    """The supervisor gives up on role: it exits 3 by itself within timeout
    seconds, having logged one give_up line (at error, its reason starting
    with reason) and stopped the other child; no process it ever started, nor
    any process seen below it, is left. Returns the give_up line."""
    t0 = time.monotonic()
    status = d.proc.wait(timeout)
    logs = d.logs()
    print("supervisor exit status %s (waited %.0f ms for its exit)" %
          (status, (time.monotonic() - t0) * 1e3))
    lines = [ln for ln in logs.splitlines() if " give_up " in ln]
    print("\n".join(lines))
    assert len(lines) == 1
    assert 'error supervisor: give_up role=%s reason="%s' % (role, reason) in lines[0]
    other = "rpcd" if role == "mounthelper" else "mounthelper"
    if "then=\"stop %s," % other in lines[0]:
        assert logs.index(" give_up ") < logs.index("child_stop role=%s" % other)
        assert logs.index("child_stop role=%s" % other) < logs.rindex(
            "child_exited role=%s" % other)
    assert 'supervisor_exit status=3 reason="%s failed" failed=%s' % (role, role) in logs
    assert status == 3
    # The supervisor reaped its own children before exiting.
    direct = spawned_pids(logs)
    assert direct and not [p for p in direct if alive(p)]
    # What they started (the helper's tool runner, its workers) dies with them.
    rest = set(seen) - direct
    wait_for(lambda: not [p for p in rest if alive(p)], 10, "no process left of %s" % rest)
    return lines[0]


def ready_child(d, comm, role, old):
    """The pid of a child of role other than old that has reported READY;
    "exited" once the supervisor is gone; else None."""
    if d.proc.poll() is not None:
        return "exited"
    try:
        pid = d.children().get(comm)
    except OSError:
        return None
    if pid in (None, old) or ("child_ready role=%s pid=%d " % (role, pid)) not in d.logs():
        return None
    return pid


def kill_until_given_up(d, comm, role):
    """kill -9 the child of role as soon as each new one has reported READY (its
    pid seen changing in the supervisor's /proc children), up to six times or
    until the supervisor exits. Returns (kills, every pid seen below it)."""
    kills, old, seen = 0, None, set()
    t0 = time.monotonic()
    while kills < RESTART_LIMIT + 1:
        pid = wait_for(lambda: ready_child(d, comm, role, old), 30,
                       "a new ready %s or the supervisor's exit" % role)
        if pid == "exited":
            break
        seen |= descendants(d.proc.pid)
        os.kill(pid, signal.SIGKILL)
        kills += 1
        old = pid
        print("kill %d: %s %d at %.0f ms" % (kills, role, pid, (time.monotonic() - t0) * 1e3))
    return kills, seen


def test_helper_killed_until_given_up(driver):
    """With the default limits, kill -9 the helper again each time it is back:
    the fifth death within the window makes the supervisor give up, stop rpcd
    and exit 3 well within 30 s, and no process of the driver is left."""
    kills, seen = kill_until_given_up(driver, HELPER, "mounthelper")
    line = assert_gave_up(driver, "mounthelper", '5 deaths in 60 s (limit 5)"', seen)
    assert kills == RESTART_LIMIT
    assert 'last_death="signal SIGKILL"' in line and 'then="stop rpcd, exit 3"' in line
    logs = driver.logs()
    # Restarted at once, then after 250, 500 and 1000 ms: the backoff table.
    delays = [int(m) for m in re.findall(r"child_restart role=mounthelper in_ms=(-?\d+) ", logs)]
    print("restart delays (ms):", delays)
    assert len(delays) == RESTART_LIMIT - 1 and delays[0] <= 0 and max(delays) <= 1000
    assert count(logs, "child_spawned", "rpcd") == 1
    assert_clean(driver)


def test_rpcd_killed_until_given_up(driver):
    """The same for rpcd: its fifth death within the window stops the helper
    and the supervisor exits 3, leaving nothing running."""
    kills, seen = kill_until_given_up(driver, RPCD, "rpcd")
    line = assert_gave_up(driver, "rpcd", '5 deaths in 60 s (limit 5)"', seen)
    assert kills == RESTART_LIMIT
    assert 'last_death="signal SIGKILL"' in line and 'then="stop mounthelper, exit 3"' in line
    logs = driver.logs()
    assert count(logs, "child_spawned", "mounthelper") == 1
    # The helper's only death is the orderly stop.
    assert re.findall(r"child_exited role=mounthelper pid=\d+ how=\"([^\"]*)\"", logs) == [
        "exit 0"]
    assert_clean(driver)


def test_helper_crash_loop_gives_up():
    """A helper that cannot start (broken policy: exit 2) is spawned a bounded
    number of times; then the supervisor gives up, stops rpcd and exits 3."""
    d = Driver(policy_extra="this line is not ini\n", wait=False)
    try:
        line = assert_gave_up(d, "mounthelper", '6 deaths in 60 s (limit 5)"')
        logs = d.logs()
        spawns = count(logs, "child_spawned", "mounthelper")
        print("helper spawns: %d (restart limit %d)" % (spawns, RESTART_LIMIT))
        assert spawns == 3  # each death before READY counts twice: 2 + 2 + 2 >= 5
        assert 'last_death="exit 2 before READY"' in line
        assert count(logs, "child_spawned", "rpcd") == 1  # rpcd never restarted
    finally:
        d.stop()
        d.cleanup()


def test_helper_never_ready_is_killed(bin_copy):
    """A helper that never reports READY is killed at --ready-timeout; that is a
    death before READY, so the supervisor gives up after three spawns."""
    install_helper(bin_copy, "#!/bin/sh\nexec sleep 600\n")
    d = Driver(extra_args=["--ready-timeout", "1"], bin_dir=bin_copy, wait=False)
    try:
        line = assert_gave_up(d, "mounthelper", '6 deaths in 60 s (limit 5)"')
        logs = d.logs()
        kills = logs.count('child_kill role=mounthelper')
        print("helper spawns: %d, killed for no READY: %d" %
              (count(logs, "child_spawned", "mounthelper"), kills))
        assert kills == 3
        assert logs.count('reason="no READY within the ready timeout"') == 3
        assert count(logs, "child_spawned", "mounthelper") == 3
        assert ('last_death="signal SIGKILL before READY, killed: no READY within the '
                'ready timeout"') in line
    finally:
        d.stop()
        d.cleanup()


SIGSYS_HELPER = """#!/usr/bin/python3
# Stand-in helper: reports READY, then dies the way a seccomp kill looks.
import os, resource, signal, socket, time
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
socket.socket(fileno=4).send(bytes([1]))
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGSYS)
"""


def test_helper_sigsys_fails_at_once(bin_copy):
    """A helper killed by SIGSYS is never restarted: given up on at its first death."""
    install_helper(bin_copy, SIGSYS_HELPER)
    d = Driver(bin_dir=bin_copy, wait=False)
    try:
        line = assert_gave_up(d, "mounthelper", "killed by SIGSYS")
        assert 'last_death="signal SIGSYS' in line
        assert count(d.logs(), "child_spawned", "mounthelper") == 1
    finally:
        d.stop()
        d.cleanup()


def test_sigterm_during_stage():
    """SIGTERM while NodeStageVolume is at its mkfs step (held there): the call
    completes OK, rpcd exits, then the helper, and the supervisor exits 0."""
    d = Driver(env={"SEPCSI_TEST_PAUSE": "1"})
    try:
        c = d.client
        cap = mount_cap("ext4")
        staging, _ = volume_paths(d, "pvc-term")
        vid = c.controller("CreateVolume", name="pvc-term", volume_capabilities=[cap],
                           capacity_range=c.pb.CapacityRange(required_bytes=16 << 30)
                           ).volume.volume_id
        kids = d.children()
        d.hold("mkfs@" + vid)
        call = Call(d.endpoint, "node", "NodeStageVolume", volume_id=vid,
                    staging_target_path=staging, volume_capability=cap)
        try:
            d.paused("mkfs@" + vid)
            os.kill(d.proc.pid, signal.SIGTERM)
            wait_for(lambda: "child_stop role=rpcd" in d.logs(), 10, "rpcd to be stopped")
        finally:
            d.release("mkfs@" + vid)
        call.join(60)
        status = d.stop()
        print("SIGTERM sent at mkfs: the call: %s %s; exit status %s" %
              (call.code, call.details, status))
        assert call.code == grpc.StatusCode.OK
        assert status == 0
        assert not alive(kids[HELPER]) and not alive(kids[RPCD])
        assert mounts_under(staging) == [staging]  # the staged volume outlives the driver
        logs = d.logs()
        assert logs.index("child_stop role=rpcd") < logs.index("child_exited role=rpcd")
        assert logs.index("child_exited role=rpcd") < logs.index("child_stop role=mounthelper")
        assert "supervisor_exit status=0" in logs
    finally:
        d.stop()
        d.cleanup()


def test_rpcd_crash_loop_stops_supervisor(bin_copy):
    """An rpcd that cannot start: given up on after a bounded number of spawns;
    the supervisor stops the helper and exits 3 by itself."""
    install_helper(bin_copy, "#!/bin/sh\nexit 1\n", name="sepcsi-rpcd")
    d = Driver(bin_dir=bin_copy, wait=False)
    try:
        line = assert_gave_up(d, "rpcd", '6 deaths in 60 s (limit 5)"')
        logs = d.logs()
        print("rpcd spawns: %d" % count(logs, "child_spawned", "rpcd"))
        assert count(logs, "child_spawned", "rpcd") == 3
        assert 'last_death="exit 1 before READY"' in line
        assert 'stopping reason="rpcd failed"' in logs
    finally:
        d.stop()
        d.cleanup()


def test_supervisor_as_pid1():
    """As PID 1 of a PID namespace: it serves, reaps an orphan it inherits, and a
    SIGINT (no handler is installed) still stops it with status 0."""
    d = Driver(prefix=["unshare", "--pid", "--fork", "--kill-child"])
    try:
        sup = d.sup_pid()
        with open("/proc/%d/status" % sup) as f:
            nspid = [l.split()[1:] for l in f if l.startswith("NSpid:")][0]
        assert nspid[-1] == "1"
        lifecycle(d, "pvc-pid1")
        # An orphan in its namespace: sh starts sleep and exits; sleep is re-parented to PID 1.
        ns = "/proc/%d/ns/pid" % sup
        os.system("nsenter --pid=%s -- sh -c 'sleep 0.3 & exit 0'" % ns)
        wait_for(lambda: "reaped_orphan" in d.logs(), 10, "the orphan reaped")
        assert all(comm in (HELPER, RPCD) for _, comm in children_of(sup))
        status = d.stop(signal.SIGINT)
        assert status == 0
        assert 'stopping reason=SIGINT' in d.logs()
        assert_clean(d)
    finally:
        d.stop()
        d.cleanup()


def test_ready_timeout_warning():
    """A --ready-timeout too long for the restart window is warned about at start."""
    d = Driver(extra_args=["--ready-timeout", "40"])
    try:
        assert re.search(r"warn supervisor: config_warning problem=\"--ready-timeout is too long",
                         d.logs())
    finally:
        assert d.stop() == 0
        d.cleanup()
    d = Driver()
    try:
        assert "config_warning" not in d.logs()
    finally:
        d.stop()
        d.cleanup()


def fds(pid):
    """{fd: what it refers to} of a process."""
    out = {}
    for f in os.listdir("/proc/%d/fd" % pid):
        try:
            out[int(f)] = os.readlink("/proc/%d/fd/%s" % (pid, f))
        except OSError:
            pass
    return out


def unix_sockets():
    """[(type, inode, peer inode, [(pid, fd)...])] of unix sockets, from ss."""
    res = subprocess.run(["ss", "-xapnH"], capture_output=True, text=True, check=True)
    out = []
    for line in res.stdout.splitlines():
        m = re.match(r"(\S+)\s+\S+\s+\d+\s+\d+\s+\S+\s+(\d+)\s+\S+\s+(\d+)\s+users:\((.*)\)",
                     line)
        if m:
            users = [(int(p), int(f)) for p, f in re.findall(r"pid=(\d+),fd=(\d+)", m.group(4))]
            out.append((m.group(1), int(m.group(2)), int(m.group(3)), users))
    return out


def ppid(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^PPid:\t(\d+)$", f.read(), re.M).group(1))


def test_fds_after_restarts(driver):
    """After helper, rpcd and helper restarts: each child has exactly its
    documented fds from the supervisor (0 /dev/null, 3 the channel, 4 control,
    no signalfd), the supervisor holds only its signalfd and the two control
    sockets (no channel end leaked), rpcd holds one channel only, and the
    channel and control sockets connect whom they should."""
    sup = driver.proc.pid
    for comm in (HELPER, RPCD, HELPER):
        old = driver.children()[comm]
        os.kill(old, signal.SIGKILL)
        wait_for(lambda: driver.children().get(comm) not in (None, old), 10, "a new " + comm)
        probe_ready(driver.endpoint).close()
    new_client(driver)
    kids = driver.children()
    helper, rpcd = kids[HELPER], kids[RPCD]

    # The supervisor writes its metrics file now and then (a temporary file, renamed
    # over it): look again while that one is open, so that only an fd kept open fails
    # (for up to 5 s, however slow the machine).
    for _ in range(500):
        sup_fds = {fd: t for fd, t in fds(sup).items() if fd > 2}
        if not any(t.startswith(driver.tmp) for t in sup_fds.values()):
            break
        time.sleep(0.01)
    print("supervisor fds:", sup_fds)
    assert sorted(t.split(":")[0] for t in sup_fds.values()) == [
        "anon_inode", "socket", "socket"]
    assert "anon_inode:[signalfd]" in sup_fds.values()
    for pid in (helper, rpcd):
        f = fds(pid)
        assert f[0] == "/dev/null"
        assert f[4].startswith("socket:")
        assert not any("signalfd" in t for t in f.values())
    hf = fds(helper)
    print("helper fds:", hf)
    assert hf[3].startswith("socket:")
    # Its channels: rpcd (3), the supervisor (4), its own tool runner and its core, and
    # the idle workers rpcd's first LIST of mounts (asked of the core) left (children).
    socket_fds = [fd for fd, t in hf.items() if t.startswith("socket:")]
    assert socket_fds[:2] == [3, 4]

    socks = unix_sockets()
    holder = {ino: users[0][0] for _, ino, _, users in socks if users}
    peer = {(pid, fd): p for _, _, p, users in socks for pid, fd in users}
    # The helper's channel leads to rpcd, whatever fd rpcd keeps it on.
    assert holder[peer[(helper, 3)]] == rpcd
    # Both control sockets lead to the supervisor; the others to the tool runner, the core,
    # the audit writer and the core's reader (the core's child).
    assert holder[peer[(helper, 4)]] == sup
    kids = []
    for fd in socket_fds[2:]:
        kid = holder[peer[(helper, fd)]]
        with open("/proc/%d/comm" % kid) as f:
            kids.append(f.read().strip())
        # The helper's child, or (the reader) the child of its child, the core.
        up = [ppid(kid)] + ([ppid(ppid(kid))] if kids[-1] == "sepcsi-reader" else [])
        assert up[-1] == helper, (kids[-1], up)
    assert sorted(k for k in kids if k != HELPER) == ["sepcsi-audit", "sepcsi-core",
                                                      "sepcsi-reader", "sepcsi-runner"], kids
    assert holder[peer[(rpcd, 4)]] == sup
    # rpcd keeps no channel to a dead helper: it holds exactly two seqpacket
    # sockets, one to the helper and one to the supervisor.
    seq = [holder.get(p) for t, _, p, users in socks if t == "u_seq"
           for pid, _ in users if pid == rpcd]
    print("rpcd's seqpacket sockets lead to:", seq)
    assert sorted(map(str, seq)) == sorted(map(str, [helper, sup]))
    lifecycle(driver, "pvc-fds")
    assert_clean(driver)
