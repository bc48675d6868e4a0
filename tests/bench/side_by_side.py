#!/usr/bin/python3
"""Benchmark: sepcsi side by side with the CSI community's reference driver,
csi-driver-host-path's hostpathplugin, measured by the same client
(sepcsi-bench) with the same flags in the same run. Run as root inside a
private mount namespace:

    SEPCSI_BUILD_DIR=$PWD/build unshare -m --propagation private \\
        /usr/bin/python3 tests/bench/side_by_side.py [-n N] [-c C] [--probe-seconds S]

Both drivers are started for the run, each with a temporary tree of its own
(sepcsi: store, images and socket, with its embedded default policy;
hostpathplugin: its state directory and socket), and both serve kubelet's own
directory layout on a tmpfs mounted at /var/lib/kubelet in this namespace:
    filesystem: staging  plugins/kubernetes.io/csi/<driver>/<name>/globalmount
                target   pods/<pod uid>/volumes/kubernetes.io~csi/<name>/target
    block:      staging  plugins/kubernetes.io/csi/volumeDevices/staging/<name>
                target   plugins/kubernetes.io/csi/volumeDevices/publish/<name>/target
Three workloads, each run against sepcsi and then hostpathplugin before the
next begins: N filesystem lifecycles (fs type ext4), N raw block lifecycles,
and a Probe storm of S seconds, all with C clients and the drivers' long-lived
processes given to --pids. The table shows p50/p99 per call, lifecycles or
calls per second, and each driver's total PSS (its processes and every descendant they
have at a sample): the peak during a workload, and what remains after it.

Which PSS is compared: sepcsi-bench maps the same shared libraries as rpcd
(libgrpc, libprotobuf-c, libstdc++, ...), and PSS divides a page among the
processes that map it, so while the bench runs, the PSS it samples counts
only part of those pages to sepcsi: about 3.5 MiB less than sepcsi holds on a
node where nothing else maps them. hostpathplugin, one static Go binary,
shares nothing with the bench. So the peak rows (sampled by the bench, while
it runs) flatter sepcsi, and the rows "after" are sampled by this script once
the bench has exited: those are the figures to compare.

hostpathplugin is $HOSTPATHPLUGIN if that is set, else ../shared/peers/hostpathplugin
next to the repository; without it the script says the comparison was NOT run
and exits 2. Exit status 0 when every call succeeded and both drivers left
nothing mounted or attached behind them, 1 otherwise. Asserts no timing.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))

import conftest  # noqa: E402  (BIN from $SEPCSI_BUILD_DIR; mount and loop look-ups)
import csi_client  # noqa: E402

KUBELET = "/var/lib/kubelet"
CSI_DIR = os.path.join(KUBELET, "plugins", "kubernetes.io", "csi")
POD_UID = "0c5e8a1d-2f4b-4e6a-9d7c-3b1a5f8e2d40"
WORKLOADS = ("filesystem", "block", "probe")
HEADINGS = {
    "filesystem": "filesystem (sepcsi: ext4 on a loop device; hostpathplugin: a directory)",
    "block": "raw block (both: a loop device over an image file)",
    "probe": "Probe storm",
}
BENCH_TIMEOUT = 3600


def find_hostpathplugin():
    """$HOSTPATHPLUGIN when it is set (even to nothing), else the peers' copy."""
    cand = os.environ.get("HOSTPATHPLUGIN")
    if cand is None:
        cand = os.path.join(os.path.dirname(REPO), "shared", "peers", "hostpathplugin")
    return cand if cand and os.access(cand, os.X_OK) else None


def tree_pss_kib(pid):
    """The PSS of pid and its descendants, in KiB, as this script reads it."""
    total = 0
    for p in process_tree(pid):
        try:
            with open("/proc/%d/smaps_rollup" % p) as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def process_tree(pid):
    """pid and its descendants now (the children of every thread: Go forks from any)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        try:
            for tid in os.listdir("/proc/%d/task" % p):
                with open("/proc/%d/task/%s/children" % (p, tid)) as f:
                    todo += [int(c) for c in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass  # gone meanwhile: a short-lived child
    return out


def short_lived(pid):
    """A process of sepcsi's that comes and goes: a worker of its helper (the helper's
    fork, so its name, under a parent of it), a check of rpcd's metrics report, or a
    child of the supervisor not exec'd yet."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open("/proc/%d/comm" % pid) as f, open("/proc/%d/comm" % ppid) as g:
            comm, parent = f.read().strip(), g.read().strip()
        return (comm == parent and comm in ("sepcsi-mounthel", "sepcsi-supervis")) or \
            comm == "sepcsi-metrics-"
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return True  # gone already: not long-lived either


class Driver:
    """One of the two drivers, started in a directory of its own under tmp."""

    def __init__(self, label, argv, tmp, endpoint):
        self.label, self.endpoint = label, endpoint
        self.log_path = os.path.join(tmp, "driver.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        try:
            info = csi_client.wait_ready(endpoint, 30)
            self.wait_probe_ready()
        except BaseException:
            self.stop()
            raise
        self.name, self.version = info.name, info.vendor_version
        # The long-lived processes, taken while the driver is idle. Children that come and
        # go (the helper's workers, idle ones too: rpcd's first LIST of mounts runs in one,
        # and the tools they run; the supervisor's metrics checks) are counted in the PSS
        # total by sepcsi-bench, which adds every descendant of these at each sample.
        self.pids = [p for p in process_tree(self.proc.pid) if not short_lived(p)]
        self.reports = {}

    def wait_probe_ready(self, timeout=30):
        """Until Probe answers ready (sepcsi's pings the helper: its start-up is done)."""
        deadline = time.monotonic() + timeout
        with csi_client.CsiClient(self.endpoint) as c:
            while True:
                r = c.identity("Probe")
                if not r.HasField("ready") or r.ready.value:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError("%s: Probe not ready after %d s" % (self.label, timeout))
                time.sleep(0.05)

    def stop(self):
        """SIGTERM, then SIGKILL after 30 s; returns a problem or None."""
        if self.proc.poll() is not None:
            return "%s had exited (%s) before the end of the run" % (self.label,
                                                                    self.proc.returncode)
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            return "%s did not stop on SIGTERM" % self.label
        return None


def start_sepcsi(tmp):
    d = os.path.join(tmp, "sepcsi")
    os.makedirs(d)
    sock = os.path.join(d, "sock", "csi.sock")
    # No --policy: the embedded default, whose only root is kubelet's directory and whose
    # path patterns are kubelet's CSI staging and target layouts (docs/policy.md).
    argv = [os.path.join(conftest.BIN, "sepcsi-supervisor"), "--endpoint", "unix://" + sock,
            "--node-id", "bench-node", "--state-dir", os.path.join(d, "state"),
            "--data-dir", os.path.join(d, "data"), "--log-level", "warn"]
    return Driver("sepcsi", argv, d, "unix://" + sock)


def start_hostpath(tmp, binary):
    d = os.path.join(tmp, "hostpath")
    os.makedirs(d)
    sock = os.path.join(d, "csi.sock")
    argv = [binary, "--endpoint=unix://" + sock, "--nodeid=bench-node",
            "--statedir=" + os.path.join(d, "state")]
    return Driver("hostpathplugin", argv, d, "unix://" + sock)


def workload_args(workload, driver, opts):
    """sepcsi-bench's flags: the same for both drivers but for kubelet's per-driver staging dir."""
    if workload == "probe":
        return ["-c", str(opts.clients), "--probe-storm", str(opts.probe_seconds)]
    common = ["-n", str(opts.lifecycles), "-c", str(opts.clients), "--capacity", opts.capacity,
              "--attach", getattr(opts, "attach", "no"),
              "--name-prefix", "%s-%s" % (driver.label, workload)]
    if workload == "filesystem":
        return common + ["--access-type", "mount", "--fs-type", "ext4",
                         "--staging-root", os.path.join(CSI_DIR, driver.name),
                         "--staging-leaf", "globalmount",
                         "--target-root", os.path.join(KUBELET, "pods", POD_UID, "volumes",
                                                       "kubernetes.io~csi")]
    return common + ["--access-type", "block",
                     "--staging-root", os.path.join(CSI_DIR, "volumeDevices", "staging"),
                     "--target-root", os.path.join(CSI_DIR, "volumeDevices", "publish")]


def kubelet_tree():
    """kubelet's directory on a tmpfs of this namespace, shared as kubelet makes it, with the
    parents kubelet creates before it calls a driver."""
    os.makedirs(KUBELET, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0750", "sepcsi-side-by-side", KUBELET],
                   check=True)
    subprocess.run(["mount", "--make-shared", KUBELET], check=True)
    for d in (os.path.join(KUBELET, "pods", POD_UID, "volumes"),
              os.path.join(CSI_DIR, "volumeDevices")):
        os.makedirs(d, mode=0o750)


def run_bench(driver, workload, opts):
    args = [os.path.join(conftest.BIN, "sepcsi-bench"), "--endpoint", driver.endpoint,
            "--json", "--pids", ",".join(str(p) for p in driver.pids)]
    args += workload_args(workload, driver, opts)
    res = subprocess.run(args, capture_output=True, text=True, timeout=BENCH_TIMEOUT)
    try:
        report = json.loads(res.stdout)
    except ValueError:
        return {"failed_to_run": "sepcsi-bench exited %d: %s" % (res.returncode,
                                                                 res.stderr.strip())}
    if res.stderr.strip():  # e.g. a lifecycle whose directories could not be made
        report["bench_stderr"] = res.stderr.strip()
    report["pss_after_exit_kib"] = tree_pss_kib(driver.proc.pid)  # the bench has exited
    return report


# ---- the report ----

def mib(kib):
    return "%.1f MiB" % (kib / 1024.0)


def ms(v):
    return "%.2f" % v


def row(label, cells):
    """A label and, per driver, two cells (p50 and p99 columns)."""
    return "  %-26s" % label + "".join("%11s%11s" % pair for pair in cells)


def table(drivers, opts):
    lines = []
    lines.append("sepcsi-bench, the same flags for both drivers: %d lifecycles per workload, "
                 "%d clients,\n  %s volumes, --attach no; Probe storm of %s s" %
                 (opts.lifecycles, opts.clients, opts.capacity, opts.probe_seconds))
    for d in drivers:
        lines.append("  %-16s %-10s pids (%d): %s" % (
            d.label, d.version, len(d.pids), ", ".join(d.names)))
    lines.append("")
    lines.append("  %-26s" % "" + "".join("%22s" % d.label for d in drivers))
    lines.append(row("", [("p50 ms", "p99 ms")] * len(drivers)))
    for w in WORKLOADS:
        lines.append(HEADINGS[w])
        reps = [d.reports[w] for d in drivers]
        rpcs = []
        for r in reps:
            rpcs += [name for name in r.get("rpcs", {}) if name not in rpcs]
        for name in rpcs:
            cells = []
            for r in reps:
                x = r.get("rpcs", {}).get(name)
                cells.append((ms(x["p50_ms"]), ms(x["p99_ms"])) if x else ("-", "-"))
            lines.append(row(name, cells))
        if w == "probe":
            lines.append(row("calls/s", [("%.0f" % r["probe_storm"]["calls_per_second"]
                                          if "probe_storm" in r else "-", "") for r in reps]))
        else:
            lines.append(row("lifecycles/s", [("%.1f" % r["lifecycles"]["per_second"]
                                               if "lifecycles" in r else "-", "") for r in reps]))
        lines.append(row("peak PSS, bench running", [
            (mib(r["memory"]["total"]["pss_peak_kib"]) if "memory" in r else "-", "")
            for r in reps]))
        lines.append(row("PSS after, bench exited", [
            (mib(r["pss_after_exit_kib"]) if "pss_after_exit_kib" in r else "-", "")
            for r in reps]))
    lines.append("whole run")
    lines.append(row("peak PSS, bench running", [(mib(d.peak_pss), "") for d in drivers]))
    lines.append(row("PSS at the end", [(mib(d.final_pss), "") for d in drivers]))
    lines.append(row("VmHWM, sum of processes", [(mib(d.hwm_sum), "") for d in drivers]))
    return "\n".join(line.rstrip() for line in lines)


def summarise(driver):
    """Whole-run memory: the largest per-workload PSS peak, and the processes' VmHWM
    (a peak since start) as the last workload read them."""
    mems = [r["memory"] for r in driver.reports.values() if "memory" in r]
    driver.peak_pss = max([m["total"]["pss_peak_kib"] for m in mems] or [0])
    ends = [r["pss_after_exit_kib"] for r in driver.reports.values()
            if "pss_after_exit_kib" in r]
    driver.final_pss = ends[-1] if ends else 0
    driver.hwm_sum = sum(p["vm_hwm_kib"] for p in mems[-1]["pids"]) if mems else 0
    names = [p["name"] for p in mems[-1]["pids"]] if mems else []
    driver.names = ["%s x%d" % (n, names.count(n)) if names.count(n) > 1 else n
                    for n in sorted(set(names))]


def errors(drivers):
    """One line per failed call kind, or a failed bench run."""
    out = []
    for d in drivers:
        for w in WORKLOADS:
            r = d.reports[w]
            if "failed_to_run" in r:
                out.append("%s %s: %s" % (d.label, w, r["failed_to_run"]))
            life = r.get("lifecycles", {})
            if life.get("failed"):
                out.append("%s %s: %d of %d lifecycles failed%s" % (
                    d.label, w, life["failed"], life["requested"],
                    ("; sepcsi-bench said: " + r["bench_stderr"]) if "bench_stderr" in r
                    else ""))
            for name, x in r.get("rpcs", {}).items():
                if x["errors"]:
                    out.append("%s %s: %s %d of %d failed, %s, first: %s" % (
                        d.label, w, name, x["errors"], x["calls"],
                        " ".join("%s %d" % kv for kv in x["errors_by_code"].items()),
                        x.get("first_error", "")))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", "--lifecycles", type=int, default=200)
    ap.add_argument("-c", "--clients", type=int, default=8)
    ap.add_argument("--capacity", default="64Mi")
    ap.add_argument("--probe-seconds", type=float, default=10.0)
    ap.add_argument("--json", action="store_true", help="the bench's reports as one object")
    opts = ap.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # unwinds: both drivers stop
    hostpath = find_hostpathplugin()
    if not hostpath:
        print("hostpathplugin not found ($HOSTPATHPLUGIN or ../shared/peers/hostpathplugin): "
              "the side-by-side comparison was NOT run. It is built from "
              "github.com/kubernetes-csi/csi-driver-host-path, cmd/hostpathplugin "
              "(docs/benchmarks.md).")
        return 2
    if os.geteuid() != 0:
        sys.exit("the side-by-side benchmark needs root")
    if os.readlink("/proc/self/ns/mnt") == os.readlink("/proc/%d/ns/mnt" % os.getppid()):
        sys.exit("run inside `unshare -m --propagation private`")
    kubelet_tree()
    tmp = tempfile.mkdtemp(prefix="sepcsi-side-by-side-")
    os.chmod(tmp, 0o755)  # rpcd (uid 65532) must reach its store and socket
    drivers, problems = [], []
    try:
        drivers.append(start_sepcsi(tmp))
        drivers.append(start_hostpath(tmp, hostpath))
        for w in WORKLOADS:  # both drivers per workload, so a change of load hits both
            for d in drivers:
                d.reports[w] = run_bench(d, w, opts)
    finally:
        for d in drivers:
            problem = d.stop()
            if problem:
                problems.append(problem)
        if drivers and drivers[0].proc.returncode != 0:
            problems.append("the supervisor exited %s" % drivers[0].proc.returncode)
        left = [m for m in conftest.mounts_under(KUBELET) if m != KUBELET]
        if left:
            problems.append("mounts left beneath %s: %s" % (KUBELET, left))
        loops = conftest.loops_backed_by(tmp)
        if loops:
            problems.append("loop devices left: %s" % loops)
        if problems or len(drivers) < 2:
            for d in drivers:
                with open(d.log_path) as f:
                    print("---- %s log (tail) ----\n%s" % (d.label, f.read()[-4000:]),
                          file=sys.stderr)
        conftest.cleanup_tree(tmp)
    for d in drivers:
        summarise(d)
    failed = errors(drivers)
    if opts.json:
        print(json.dumps({"drivers": {d.label: dict(d.reports, version=d.version)
                                      for d in drivers},
                          "errors": failed, "problems": problems}, indent=1))
    else:
        print(table(drivers, opts))
        print("errors: %s" % ("none" if not failed else "\n  " + "\n  ".join(failed)))
        for p in problems:
            print("PROBLEM: %s" % p)
    return 1 if failed or problems else 0


if __name__ == "__main__":
    sys.exit(main())
