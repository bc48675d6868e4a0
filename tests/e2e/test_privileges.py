"""The privilege split, read from /proc/<pid>/status of the running children."""
import json
import os
import re
import subprocess


def status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def test_rpcd_unprivileged(driver):
    driver.client.identity("Probe")  # serving
    s = status(driver.children()["sepcsi-rpcd"])
    uids = [int(x) for x in s["Uid"].split()]
    gids = [int(x) for x in s["Gid"].split()]
    assert all(u != 0 for u in uids), s["Uid"]
    assert all(g != 0 for g in gids), s["Gid"]
    assert s["Groups"] == ""
    for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(s[k], 16) == 0, (k, s[k])
    assert s["NoNewPrivs"] == "1"
    assert s["Seccomp"] == "2"


def test_helper_confined(driver):
    driver.client.identity("Probe")
    s = status(driver.children()["sepcsi-mounthel"])
    CAP_CHOWN = 1 << 0
    CAP_SYS_ADMIN = 1 << 21
    CAP_SYS_RESOURCE = 1 << 24
    CAP_MKNOD = 1 << 27
    # Required: SYS_ADMIN (mounts, freeze, xfs/btrfs grow), CHOWN (volume mount group) and
    # MKNOD (loop nodes in the helper's own /dev). Optional: SYS_RESOURCE (ext4 online
    # expand), kept only if the supervisor's bounding set passes it on (policy/caps.c).
    sup = status(driver.sup_pid())
    want = CAP_SYS_ADMIN | CAP_CHOWN | CAP_MKNOD | (int(sup["CapBnd"], 16) & CAP_SYS_RESOURCE)
    assert int(s["CapEff"], 16) == want, s["CapEff"]
    assert int(s["CapPrm"], 16) == want, s["CapPrm"]
    assert int(s["CapBnd"], 16) == want, s["CapBnd"]
    assert int(s["CapInh"], 16) == 0
    assert int(s["CapAmb"], 16) == 0
    assert s["NoNewPrivs"] == "1"
    assert s["Seccomp"] == "2"


def test_rpcd_has_no_route_to_privilege(driver):
    """rpcd holds only its sockets, its store and ordinary files: no device nodes."""
    pid = driver.children()["sepcsi-rpcd"]
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except FileNotFoundError:
            continue  # closed since the listing (gRPC opens and closes sockets)
        assert not target.startswith("/dev/loop"), target


def printed_privileges(driver):
    """`sepcsi-supervisor --print-privileges` for this driver's options, as JSON."""
    res = subprocess.run(driver.args + ["--print-privileges", "--log-format", "json"],
                         capture_output=True, text=True, check=True, timeout=30)
    return {p["name"]: p for p in json.loads(res.stdout)["processes"]}


def helper_children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def test_running_processes_match_print_privileges(driver):
    """What --print-privileges says (from the tables the code installs) is what the
    kernel reports for the three running processes and the helper's tool runner:
    ids, capability sets, no_new_privs, seccomp mode, and the file-system view."""
    driver.client.identity("Probe")
    printed = printed_privileges(driver)
    helper = driver.children()["sepcsi-mounthel"]
    runner = helper_children(helper)  # idle: the tool runner is its only child
    assert len(runner) == 1, runner
    pids = {"sepcsi-supervisor": driver.sup_pid(), "sepcsi-rpcd": driver.children()["sepcsi-rpcd"],
            "sepcsi-mounthelper": helper, "sepcsi-runner": runner[0]}
    assert set(pids) == set(printed)
    host_root = os.stat("/")
    for name, pid in pids.items():
        p, s = printed[name], status(pid)
        assert [int(x) for x in s["Uid"].split()] == [p["uid"]] * 4, (name, s["Uid"])
        assert [int(x) for x in s["Gid"].split()] == [p["gid"]] * 4, (name, s["Gid"])
        # An optional capability (CAP_SYS_RESOURCE) is counted only where this machine has it.
        assert s["CapEff"] == p["cap_effective"], (name, s["CapEff"])
        assert s["CapPrm"] == p["cap_permitted"], (name, s["CapPrm"])
        assert s["CapBnd"] == p["cap_bounding"], (name, s["CapBnd"])
        assert s["CapInh"] == s["CapAmb"] == p["cap_ambient"], (name, s["CapAmb"])
        assert s["NoNewPrivs"] == str(p["no_new_privs"]), name
        assert s["Seccomp"] == str(p["seccomp"]), name
        root = "/proc/%d/root" % pid
        if p["view"] == "host":
            st = os.stat(root + "/")
            assert (st.st_dev, st.st_ino) == (host_root.st_dev, host_root.st_ino), name
            continue
        # Its own view: the printed paths (and the directories leading to them).
        view = p["view"]
        tops = {v.strip("/").split("/")[0] for v in view if v != "/"}
        if name == "sepcsi-mounthelper":
            assert set(os.listdir(root)) == tops, (name, sorted(os.listdir(root)), sorted(tops))
        etc = {v.split("/")[2] for v in view if v.startswith("/etc/")}
        assert set(os.listdir(root + "/etc")) == etc, name
        devs = {v.split("/")[2] for v in view if v.startswith("/dev/")}
        dev = set(os.listdir(root + "/dev"))
        assert devs <= dev and all(d in devs or (name == "sepcsi-mounthelper" and
                                                re.fullmatch(r"loop\d+", d)) for d in dev), dev
        for secret in ("/etc/shadow", "/etc/passwd", "/root", "/home", "/var/lib/sepcsi/state",
                       driver.state):
            assert not os.path.exists(root + secret), (name, secret)
        # The data directory: the helper's; the tool runner has its mount point only, empty,
        # and reaches an image only through the descriptor a job carries.
        assert bool(os.listdir(root + driver.data)) == (name == "sepcsi-mounthelper"), name
        roots = [v for v in view if v == driver.root]
        assert bool(roots) == (name == "sepcsi-mounthelper")
        # Its mounts: the view's, and (the helper's) whatever lies beneath the allowed roots.
        with open("/proc/%d/mountinfo" % pid) as f:
            points = [ln.split()[4] for ln in f]
        for mp in points:  # the tool runner's /dev is a tmpfs of its own, with null only
            assert mp in view or any(mp.startswith(r + "/") for r in roots) or (
                mp == "/dev" and name == "sepcsi-runner"), (name, mp)
        assert set(view) - {"/dev/null", "/dev/loop-control"} - \
            {v for v in view if v.startswith("/etc/") or v in ("/bin", "/sbin", "/lib",
                                                             "/lib32", "/lib64", "/libx32")} \
            <= set(points), (name, sorted(points))
