"""The privilege split, read from /proc/<pid>/status of the running children."""
import os


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
