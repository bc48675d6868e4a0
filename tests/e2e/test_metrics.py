"""The metrics file (--metrics-file): Prometheus text written by the supervisor
from its own figures and rpcd's sealed report, read back with an independent
parser (prometheus_client), after a real volume lifecycle, a refusal by the
helper and a kill -9 of the helper; reports a compromised rpcd could send
(metrics_rpcd.py in its place); and `sepcsictl metrics`."""
import fcntl
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import BIN, Driver, copy_bin_dir, proc_status, running, with_fds
from csi_client import mount_cap

MiB = 1 << 20
CTL = os.path.join(BIN, "sepcsictl")
METRICS_STAND_IN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics_rpcd.py")


@pytest.fixture
def fast_driver():
    """A driver reporting every second."""
    yield from running(Driver(extra_args=["--metrics-interval", "1"]))


def read_metrics(path):
    """{(name, frozenset(labels)): value} of every sample in the file, parsed strictly."""
    with open(path) as f:
        text = f.read()
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return text, samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())), 0)


def wait_for(path, pred, timeout=20):
    """The parsed file once pred(samples) holds (the file is remade every second)."""
    deadline = time.monotonic() + timeout
    while True:
        if os.path.exists(path):
            text, samples = read_metrics(path)
            if pred(samples):
                return text, samples
        assert time.monotonic() < deadline, "metrics never showed it:\n" + (
            open(path).read() if os.path.exists(path) else "(no file)")
        time.sleep(0.2)


def test_lifecycle_moves_the_counters(fast_driver):
    d = fast_driver
    c = d.client
    staging = os.path.join(d.root, "staging", "vol")
    os.makedirs(staging)
    os.makedirs(os.path.join(d.root, "pods", "p1"))
    target = os.path.join(d.root, "pods", "p1", "mount")
    cap = mount_cap("xfs")

    # The two children start side by side; either may report ready first.
    wait_for(d.metrics, lambda s: value(s, "sepcsi_child_up", child="rpcd") == 1 and
             value(s, "sepcsi_child_up", child="mounthelper") == 1)
    vol = c.controller("CreateVolume", name="pvc-metrics", volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=300 * MiB))
    vid = vol.volume.volume_id
    # A staging path that is a file: the helper itself refuses, and that is counted.
    bad_staging = os.path.join(d.root, "staging", "file")
    open(bad_staging, "w").close()
    with pytest.raises(grpc.RpcError) as e:
        c.node("NodeStageVolume", volume_id=vid, staging_target_path=bad_staging,
               volume_capability=cap)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
           volume_capability=cap)
    c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
           target_path=target, volume_capability=cap, readonly=False)

    # While it is published: the store's gauges say so, with the bytes promised.
    _, mid = wait_for(d.metrics, lambda s: value(
        s, "sepcsi_volumes", state="published", kind="xfs") == 1)
    assert value(mid, "sepcsi_volume_bytes", state="published", kind="xfs") == \
        vol.volume.capacity_bytes
    assert value(mid, "sepcsi_bytes_promised") == vol.volume.capacity_bytes
    assert value(mid, "sepcsi_bytes_available") > 0
    assert value(mid, "sepcsi_data_dir_bytes") >= value(mid, "sepcsi_bytes_available")
    assert value(mid, "sepcsi_helper_reachable") == 1
    # The store's commits (create, stage, publish: an intent and a result each) were synced.
    assert value(mid, "sepcsi_store_commits_total") >= 6
    assert 1 <= value(mid, "sepcsi_store_syncs_total") <= value(mid, "sepcsi_store_commits_total")

    c.node("NodeUnpublishVolume", volume_id=vid, target_path=target)
    # Unpublishing only unmounts, which a power loss undoes too: its intent is committed
    # without a sync of its own, and the sync of its result covers both (ctl_intent.c).
    _, unpub = wait_for(d.metrics, lambda s: value(
        s, "sepcsi_csi_calls_total", method="NodeUnpublishVolume", code="OK") == 1)
    assert value(unpub, "sepcsi_store_commits_total") == \
        value(mid, "sepcsi_store_commits_total") + 2
    assert value(unpub, "sepcsi_store_syncs_total") == value(mid, "sepcsi_store_syncs_total") + 1
    c.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    c.controller("DeleteVolume", volume_id=vid)
    with pytest.raises(grpc.RpcError) as e:
        c.controller("CreateVolume", name="", volume_capabilities=[cap])
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    text, after = wait_for(d.metrics, lambda s: value(
        s, "sepcsi_csi_calls_total", method="DeleteVolume", code="OK") == 1)
    for m in ("CreateVolume", "NodeStageVolume", "NodePublishVolume", "NodeUnpublishVolume",
              "NodeUnstageVolume", "DeleteVolume"):
        assert value(after, "sepcsi_csi_calls_total", method=m, code="OK") == 1, m
        assert value(after, "sepcsi_csi_call_duration_seconds_count", method=m) >= 1, m
        assert value(after, "sepcsi_csi_call_duration_seconds_bucket", method=m,
                     le="+Inf") == value(after, "sepcsi_csi_call_duration_seconds_count",
                                         method=m)
        assert value(after, "sepcsi_csi_call_duration_seconds_sum", method=m) > 0, m
    assert value(after, "sepcsi_csi_calls_total", method="CreateVolume",
                 code="INVALID_ARGUMENT") == 1
    stage_errors = [v for (n, labels), v in after.items()
                    if n == "sepcsi_csi_calls_total" and
                    dict(labels)["method"] == "NodeStageVolume" and dict(labels)["code"] != "OK"]
    assert sum(stage_errors) == 1
    assert value(after, "sepcsi_helper_errors_total", operation="STAGE", kind="refused") == 1
    # Nothing left in the store; the gauges came back down.
    assert value(after, "sepcsi_volumes", state="published", kind="xfs") == 0
    assert value(after, "sepcsi_bytes_promised") == 0
    # The histogram's buckets never decrease.
    buckets = sorted(((float(dict(labels)["le"]), v) for (n, labels), v in after.items()
                      if n == "sepcsi_csi_call_duration_seconds_bucket" and
                      dict(labels)["method"] == "CreateVolume"))
    assert [v for _, v in buckets] == sorted(v for _, v in buckets)

    # sepcsictl shows the same file, as text and as JSON lines.
    res = subprocess.run([CTL, "metrics", "--file", d.metrics], capture_output=True, text=True)
    assert res.returncode == 0 and "sepcsi_csi_calls_total{" in res.stdout
    res = subprocess.run([CTL, "-o", "json", "metrics", "--file", d.metrics],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    rows = [json.loads(ln) for ln in res.stdout.splitlines()]
    assert {"name": "sepcsi_child_up", "labels": {"child": "rpcd"}, "value": 1} in rows
    res = subprocess.run([CTL, "metrics", "--file", d.metrics + ".absent"],
                         capture_output=True, text=True)
    assert res.returncode == 3 and "--metrics-file" in res.stderr


def test_ctl_json_reads_escaped_label_values(tmp_path):
    """A label value may hold a brace, a comma, an escaped quote or an escaped
    backslash or newline: sepcsictl's JSON gives it back as it was meant."""
    f = tmp_path / "m.prom"
    f.write_text('# HELP sepcsi_a a\n'
                 'sepcsi_a{k="a}b,c=\\"d\\"",z="\\\\n\\n"} 3\n'
                 'sepcsi_b 4.5\n')
    res = subprocess.run([CTL, "-o", "json", "metrics", "--file", str(f)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert [json.loads(ln) for ln in res.stdout.splitlines()] == [
        {"name": "sepcsi_a", "labels": {"k": 'a}b,c="d"', "z": "\\n\n"}, "value": 3},
        {"name": "sepcsi_b", "labels": {}, "value": 4.5}]
    f.write_text('sepcsi_a{k="open} 1\n')
    res = subprocess.run([CTL, "-o", "json", "metrics", "--file", str(f)],
                         capture_output=True, text=True)
    assert res.returncode == 1 and "not a sample" in res.stderr


def test_helper_kill_is_counted_with_its_reason(fast_driver):
    d = fast_driver
    wait_for(d.metrics, lambda s: value(s, "sepcsi_child_up", child="mounthelper") == 1)
    os.kill(d.children()["sepcsi-mounthel"], signal.SIGKILL)
    _, s = wait_for(d.metrics, lambda s: value(
        s, "sepcsi_child_restarts_total", child="mounthelper", reason="signal") == 1)
    assert value(s, "sepcsi_child_restarts_total", child="rpcd", reason="signal") == 0
    # Back up again, and rpcd's report follows the new helper.
    wait_for(d.metrics, lambda s: value(s, "sepcsi_child_up", child="mounthelper") == 1 and
             value(s, "sepcsi_helper_reachable") == 1)


def test_no_metrics_file_with_none():
    d = Driver(extra_args=["--metrics-file", "none", "--metrics-interval", "1"])
    try:
        d.client.identity("Probe")
        time.sleep(1.5)
        assert not os.path.exists(d.metrics)
        assert not os.path.exists(os.path.dirname(d.metrics))
    finally:
        d.stop()
        d.cleanup()


def test_metrics_file_not_in_rpcd_directories(tmp_path):
    """The supervisor refuses a metrics file where rpcd could plant a symlink."""
    sup = os.path.join(BIN, "sepcsi-supervisor")
    state = str(tmp_path / "state")
    for path, flag in ((os.path.join(state, "m.prom"), "--state-dir"),
                       (str(tmp_path / "sock" / "m.prom"), "--endpoint")):
        res = subprocess.run([sup, "--state-dir", state, "--data-dir", str(tmp_path / "data"),
                              "--endpoint", "unix://%s/sock/csi.sock" % tmp_path,
                              "--metrics-file", path], capture_output=True, text=True)
        assert res.returncode == 2, res.stderr
        assert "--metrics-file" in res.stderr and flag in res.stderr


def test_wiped_store_keeps_images():
    """A store that lost its rows (here: a fresh --state-dir beside the old data) must not
    make reconciliation delete the volumes it no longer knows: they are kept, logged and
    counted."""
    first = Driver()
    try:
        vol = first.client.controller("CreateVolume", name="pvc-kept",
                                      volume_capabilities=[mount_cap("ext4")],
                                      capacity_range=first.client.pb.CapacityRange(
                                          required_bytes=16 * MiB))
        vid = vol.volume.volume_id
        snap = first.client.controller("CreateSnapshot", name="snap-kept",
                                       source_volume_id=vid)
        sid = snap.snapshot.snapshot_id
        first.stop()

        def move_data(d):
            os.rename(first.data, d.data)
        second = Driver(extra_args=["--metrics-interval", "1"], setup=move_data)
        try:
            _, s = wait_for(second.metrics, lambda s: value(
                s, "sepcsi_unrecorded_files", what="image") == 1)
            assert value(s, "sepcsi_unrecorded_files", what="snapshot") == 1
            assert os.path.exists(os.path.join(second.data, "images", vid + ".img"))
            assert os.path.exists(os.path.join(second.data, "snapshots", sid + ".img"))
            logs = second.logs()
            assert "reconcile_unrecorded what=image id=%s" % vid in logs
            assert "reconcile_unrecorded what=snapshot id=%s" % sid in logs
        finally:
            second.stop()
            second.cleanup()
    finally:
        first.stop()
        first.cleanup()


# A report in the shape of rpcd's (rpcd/rpcd_metrics.c), then reports that a
# compromised rpcd could send, each with what the supervisor's refusal says.
# A check of printable sepcsi_ lines alone lets the first six through; all but
# the duplicate series then make a parser (node-exporter's, prometheus_client)
# refuse the whole file, and the supervisor's series with it.
GOOD_REPORT = (
    "# HELP sepcsi_csi_calls_total CSI calls answered, by method and gRPC status code.\n"
    "# TYPE sepcsi_csi_calls_total counter\n"
    'sepcsi_csi_calls_total{method="CreateVolume",code="OK"} 3\n'
    "# HELP sepcsi_csi_call_duration_seconds Time from a CSI call's arrival to its answer.\n"
    "# TYPE sepcsi_csi_call_duration_seconds histogram\n"
    'sepcsi_csi_call_duration_seconds_bucket{method="CreateVolume",le="0.5"} 2\n'
    'sepcsi_csi_call_duration_seconds_bucket{method="CreateVolume",le="+Inf"} 3\n'
    'sepcsi_csi_call_duration_seconds_sum{method="CreateVolume"} 0.75\n'
    'sepcsi_csi_call_duration_seconds_count{method="CreateVolume"} 3\n'
    "# TYPE sepcsi_helper_reachable gauge\n"
    "sepcsi_helper_reachable NaN\n")
HOSTILE_REPORTS = [
    (GOOD_REPORT + "# TYPE sepcsi_x gauge\nsepcsi_x abc\n", "not a float"),
    ("sepcsi_x 1 2 3\n", "after the value"),
    ('sepcsi_x{a="b} 1\n', "closing quote"),
    ("sepcsi_x 1 1700000000000\n", "timestamp"),  # node-exporter drops such a file
    ('sepcsi_x{a="1",b="2"} 1\nsepcsi_x{b="2",a="1"} 1\n', "series written twice"),
    ("# TYPE sepcsi_x gauge\n# TYPE sepcsi_x counter\nsepcsi_x 1\n", "second TYPE"),
    ("# TYPE sepcsi_child counter\nsepcsi_child_total 1\n", "supervisor writes itself"),
    ("sepcsi_child_up{child=\"rpcd\"} 0\n", "supervisor writes itself"),
]


def test_hostile_reports_leave_the_supervisor_series():
    """rpcd's stand-in sends a good report, then malformed and forging ones: each is
    dropped whole and logged, the file keeps parsing with the supervisor's series and
    the good report, and rpcd is not killed for it."""
    bin_dir = copy_bin_dir()
    stand_in = os.path.join(bin_dir, "sepcsi-rpcd")
    shutil.copyfile(METRICS_STAND_IN, stand_in)
    os.chmod(stand_in, 0o755)
    with open(stand_in + ".json", "w") as f:
        json.dump([GOOD_REPORT] + [r for r, _ in HOSTILE_REPORTS], f)
    os.chmod(stand_in + ".json", 0o644)
    d = Driver(bin_dir=bin_dir, wait=False)
    try:
        deadline = time.monotonic() + 30

        def rejected():
            return [ln for ln in d.logs().splitlines()
                    if "metrics_rejected" in ln and "role=rpcd" in ln]
        while "all reports sent" not in d.logs() or len(rejected()) < len(HOSTILE_REPORTS):
            assert time.monotonic() < deadline, "the reports were not all refused:\n" + d.logs()
            time.sleep(0.2)
        rpcd = d.children()["sepcsi-rpcd"]
        time.sleep(1)  # nothing else follows: no further refusal, no kill
        assert len(rejected()) == len(HOSTILE_REPORTS)
        for (_, why), line in zip(HOSTILE_REPORTS, rejected()):
            assert why in line, (why, line)
        assert "child_kill" not in d.logs()
        assert d.children()["sepcsi-rpcd"] == rpcd

        text, samples = read_metrics(d.metrics)  # raises if it does not parse
        for child in ("mounthelper", "rpcd"):
            assert samples[("sepcsi_child_up", frozenset({"child": child}.items()))] == 1
            assert samples[("sepcsi_child_failed", frozenset({"child": child}.items()))] == 0
            for reason in ("exit", "signal", "seccomp", "killed"):
                assert samples[("sepcsi_child_restarts_total",
                                frozenset({"child": child, "reason": reason}.items()))] == 0
        assert ("sepcsi_rpcd_report_age_seconds", frozenset()) in samples
        # The good report stayed, whole; nothing of the others came in.
        assert text.endswith(GOOD_REPORT)
        assert value(samples, "sepcsi_csi_calls_total", method="CreateVolume", code="OK") == 3
        assert value(samples, "sepcsi_csi_call_duration_seconds_bucket", method="CreateVolume",
                     le="+Inf") == 3
        assert math.isnan(samples[("sepcsi_helper_reachable", frozenset())])
        assert "sepcsi_x" not in text and "sepcsi_child_total" not in text
        assert text.count("sepcsi_child_up{") == 2
    finally:
        d.stop()
        d.cleanup()
        shutil.rmtree(bin_dir)


CHECK_WRAPPER = """#!/usr/bin/python3
import os
seen = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        seen[fd] = os.readlink("/proc/self/fd/" + fd)
    except FileNotFoundError:
        pass  # the listing's own descriptor, closed since
with open("/proc/self/status") as f:
    status = f.read()
with open("%(out)s/seen-%%d" %% os.getpid(), "w") as f:
    f.write(status)
    for fd, target in sorted(seen.items()):
        f.write("fd %%s %%s\\n" %% (fd, target))
first = not any(n.startswith("ready-") for n in os.listdir("%(out)s"))
open("%(out)s/ready-%%d" %% os.getpid(), "w").close()
import time
deadline = time.monotonic() + 1.5  # within the supervisor's 2 s for a check
while first and not os.path.exists("%(out)s/tried") and time.monotonic() < deadline:
    time.sleep(0.005)  # the first waits while the test tries its /proc/PID/mem as rpcd
os.execv("%(real)s", ["sepcsi-metrics-check"])
"""


def open_as(uid, gid, path):
    """Whether a process of uid and gid (and no capability) can open path for writing."""
    return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
                           "sh", "-c", 'exec 3<>"$0"', path], stderr=subprocess.DEVNULL,
                          check=False).returncode == 0


def test_reports_are_checked_by_a_process_without_privilege():
    """The supervisor parses none of rpcd's report: sepcsi-metrics-check does, started
    for it as --print-privileges says (ids of its own, neither rpcd's nor the helper's,
    every capability set empty, no_new_privs), holding only the sealed report and its
    answer pipe, out of reach of rpcd's ids (no /proc/PID/mem of it); the real check,
    run after a look at its own /proc (a wrapper in its place), accepts rpcd's report."""
    bin_dir = copy_bin_dir()
    out = pathlib.Path(tempfile.mkdtemp(prefix="sepcsi-check-"))  # reachable by rpcd's uid
    os.chmod(out, 0o1777)
    check = os.path.join(bin_dir, "sepcsi-metrics-check")
    os.rename(check, check + ".real")
    with open(check, "w") as f:
        f.write(CHECK_WRAPPER % {"out": out, "real": check + ".real"})
    os.chmod(check, 0o755)
    d = Driver(bin_dir=bin_dir, extra_args=["--metrics-interval", "1"])  # started
    try:
        res = subprocess.run(d.args + ["--print-privileges", "--log-format", "json"],
                             capture_output=True, text=True, check=True, timeout=30)
        rows = {p["name"]: p for p in json.loads(res.stdout)["processes"]}
        row, rpcd = rows["sepcsi-metrics-check"], rows["sepcsi-rpcd"]
        assert (row["uid"], row["gid"]) == (65533, 65533)
        assert row["uid"] not in (rpcd["uid"], rows["sepcsi-mounthelper"]["uid"])
        assert row["gid"] not in (rpcd["gid"], rows["sepcsi-mounthelper"]["gid"])
        deadline = time.monotonic() + 20
        while not any(p.name.startswith("ready-") for p in out.iterdir()):
            assert time.monotonic() < deadline, "no check started:\n" + d.logs()
            time.sleep(0.02)
        pid = int(next(p.name for p in out.iterdir() if p.name.startswith("ready-"))[6:])
        assert not open_as(rpcd["uid"], rpcd["gid"], "/proc/%d/mem" % pid)
        (out / "tried").touch()
        wait_for(d.metrics, lambda s: ("sepcsi_rpcd_report_age_seconds", frozenset()) in s)
        seen = sorted(p for p in out.iterdir() if p.name.startswith("seen-"))
        assert seen, "no check ran"
        for path in seen:
            status = dict(ln.split(":", 1) for ln in path.read_text().splitlines()
                          if ":" in ln and not ln.startswith("fd "))
            status = {k: v.strip() for k, v in status.items()}
            assert status["Uid"].split() == [str(row["uid"])] * 4, status["Uid"]
            assert status["Gid"].split() == [str(row["gid"])] * 4, status["Gid"]
            assert status["Groups"] == ""
            for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
                assert status[k] == "0" * 16, (k, status[k])
            assert row["cap_effective"] == row["cap_bounding"] == "0" * 16
            assert status["NoNewPrivs"] == "1" and row["no_new_privs"] == 1
            assert row["seccomp"] == 2 and row["view"] == "host"
            fds = dict(ln.split(" ", 2)[1:] for ln in path.read_text().splitlines()
                       if ln.startswith("fd "))
            assert set(fds) == {"0", "1", "2", "3", "4"}, fds
            assert fds["3"].startswith("/memfd:") and fds["4"].startswith("pipe:"), fds
        assert "metrics_rejected" not in d.logs()
    finally:
        d.stop()
        d.cleanup()
        shutil.rmtree(bin_dir)
        shutil.rmtree(out)


def test_the_check_confines_itself_before_it_reads():
    """The real sepcsi-metrics-check, run as the supervisor runs it (its ids, no
    capability), on a report it refuses, with its answer pipe full: it blocks in the
    write of its answer, after it read and checked, and there it is under its filter
    (Seccomp 2) and not dumpable (its /proc/PID/mem is root's, not its uid's). Drained,
    it ends refusing, with its reason."""
    fd = os.memfd_create("report", os.MFD_ALLOW_SEALING)
    os.write(fd, b"sepcsi_x abc\n")
    fcntl.fcntl(fd, 1033, 15)  # F_ADD_SEALS: seal, shrink, grow, write
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        while True:
            os.write(w, b"x" * 4096)
    except BlockingIOError:
        pass
    os.set_blocking(w, True)

    # Its ids alone, and so no capability, as the supervisor starts it.
    argv, keep = with_fds(["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups",
                           os.path.join(BIN, "sepcsi-metrics-check")], {3: fd, 4: w})
    p = subprocess.Popen(argv, pass_fds=keep, stdin=subprocess.DEVNULL)
    os.close(w)
    os.close(fd)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert p.poll() is None and time.monotonic() < deadline, p.returncode
            st = proc_status(p.pid)
            with open("/proc/%d/syscall" % p.pid) as f:
                call = f.read().split()
            if st["Uid"].split()[0] == "65533" and call[:2] == ["1", "0x4"]:
                break  # exec'd, checked, and blocked in write(4, ...): its answer
            time.sleep(0.01)
        st = proc_status(p.pid)  # read again: it stays blocked now
        assert st["Seccomp"] == "2", st["Seccomp"]
        assert os.stat("/proc/%d/mem" % p.pid).st_uid == 0  # not dumpable
    finally:
        answer = b""
        while True:  # drained: the check's write goes through, and it ends
            chunk = os.read(r, 65536)
            answer += chunk
            if not chunk:
                break
        os.close(r)
        p.wait()
    assert p.returncode == 1 and answer.endswith(b"a value that is not a float "
                                                 b"(decimal, NaN, +Inf, -Inf)"), answer[-80:]
