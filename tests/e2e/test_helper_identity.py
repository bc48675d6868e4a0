"""The helper's own identity beside its capable core (--helper-user, mounthelper/mh_identity.c):
it starts as root, starts the core, then becomes that uid, which owns the images; what
root owns in the data directory (the core's audit.log, the directory itself) is out of its reach. Tested with real processes: the running helper's
credentials, what its uid can and cannot do there (as a compromised helper would try),
images an earlier release left root's handed over at start, and links planted among the
images handed over to nobody."""
import ctypes
import json
import os
import signal
import struct
import subprocess
import time

from csi_client import mount_cap
from conftest import BIN, Driver, descendants, proc_status, running

MiB = 1 << 20
HELPER = (65531, 65531)  # the supervisor's default --helper-user
RPCD = (65532, 65532)


def ids(pid):
    """(uid, gid, effective capabilities) of a process, and its whole status."""
    st = proc_status(pid)
    return int(st["Uid"].split()[0]), int(st["Gid"].split()[0]), int(st["CapEff"], 16), st


def comms(pids):
    """{comm: pid} of the processes still there."""
    out = {}
    for p in pids:
        try:
            with open("/proc/%d/comm" % p) as f:
                out[f.read().strip()] = p
        except OSError:
            pass
    return out


def as_helper(code, uid=HELPER, fds=()):
    """Run Python code as the helper's uid and gid, no group, no capability, with the
    descriptors fds open (a helper holds its directories open from its start as root)."""
    return subprocess.run(
        ["setpriv", "--reuid=%d" % uid[0], "--regid=%d" % uid[1], "--clear-groups",
         "--inh-caps=-all", "--bounding-set=-all", "/usr/bin/python3", "-c", code],
        capture_output=True, text=True, timeout=60, pass_fds=fds)


def acl(uid):
    """A POSIX access ACL xattr granting uid read and write (owner rw, group r, mask rw)."""
    entry = lambda tag, perm, ident=0xFFFFFFFF: struct.pack("<HHI", tag, perm, ident)
    return struct.pack("<I", 2) + entry(0x01, 6) + entry(0x02, 6, uid) + entry(0x04, 4) + \
        entry(0x10, 6) + entry(0x20, 0)


def make_volume(d, name, staging):
    c = d.client
    cap = mount_cap("ext4")
    vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                       capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)
                       ).volume.volume_id
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
           volume_capability=cap)
    return vid


def unstage(d, vid, staging):
    d.client.node("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)


def test_the_helper_and_its_runner_run_as_their_own_uid_and_own_the_images():
    for d in running(Driver()):
        helper = d.children()["sepcsi-mounthel"]
        uid, gid, eff, st = ids(helper)
        assert (uid, gid, eff) == (HELPER[0], HELPER[1], 0), st
        assert st["Groups"] == "", st
        kinds = comms(descendants(helper))
        assert "sepcsi-core" in kinds and "sepcsi-runner" in kinds, kinds
        assert ids(kinds["sepcsi-core"])[:2] == (0, 0)
        assert ids(kinds["sepcsi-runner"])[:3] == (HELPER[0], HELPER[1], 0)
        staging = os.path.join(d.root, "st")
        os.makedirs(staging)
        vid = make_volume(d, "pvc-own", staging)
        for sub in ("images", "snapshots"):
            s = os.stat(os.path.join(d.data, sub))
            assert (s.st_uid, s.st_gid, s.st_mode & 0o7777) == (HELPER[0], 0, 0o2750), sub
        s = os.stat(os.path.join(d.data, "images", vid + ".img"))
        assert (s.st_uid, s.st_gid, s.st_mode & 0o777) == (HELPER[0], 0, 0o660)
        for root_own in ("audit.log", "helper-audit.log", "."):
            assert os.stat(os.path.join(d.data, root_own)).st_uid == 0, root_own
        # The core's records in audit.log, the helper's in its own file.
        with open(os.path.join(d.data, "audit.log")) as f:
            core = [json.loads(ln) for ln in f]
        with open(os.path.join(d.data, "helper-audit.log")) as f:
            helper_ops = [json.loads(ln) for ln in f]
        assert any(r["op"] == "STAGE" and r.get("volume_id") == vid for r in core)
        assert any(r["op"] == "CREATE" and r.get("volume_id") == vid for r in helper_ops)
        assert not any(r["op"] == "CREATE" for r in core)
        unstage(d, vid, staging)


def test_a_compromised_helper_reaches_its_images_and_nothing_of_roots():
    """What the helper's uid can do in the data directory, tried as a compromised helper
    would: its images yes; the core's audit log, the directory itself (where the
    helper that mounts by itself keeps its loop records)
    and the helper's own audit file (root's, written through a descriptor opened before)
    no. rpcd's uid reaches none of it."""
    for d in running(Driver()):
        staging = os.path.join(d.root, "st")
        os.makedirs(staging)
        vid = make_volume(d, "pvc-hostile", staging)
        data, img = d.data, os.path.join(d.data, "images", vid + ".img")
        with open(os.path.join(data, "audit.log"), "rb") as f:
            audit_before = f.read()
        flags = os.O_RDONLY | os.O_DIRECTORY
        dfd, ifd = os.open(data, flags), os.open(os.path.join(data, "images"), flags)
        code = r"""
import os
dfd, ifd, name = %d, %d, %r
def denied(fn, *a, **kw):
    try:
        fn(*a, **kw)
    except PermissionError:
        return True
    return False
W = os.O_WRONLY | os.O_CREAT
out = {
  "image_rw": os.open(name, os.O_RDWR, dir_fd=ifd) >= 0,
  "image_new": os.open("sv-new.img.tmp", W, 0o660, dir_fd=ifd) >= 0,
  "audit_append": denied(os.open, "audit.log", os.O_WRONLY | os.O_APPEND, dir_fd=dfd),
  "helper_audit": denied(os.open, "helper-audit.log", os.O_WRONLY, dir_fd=dfd),
  "records": denied(os.mkdir, "loops", 0o700, dir_fd=dfd),
  "data_dir_file": denied(os.open, "planted", W, 0o600, dir_fd=dfd),
  "rename_images": denied(os.rename, "images", "moved", src_dir_fd=dfd, dst_dir_fd=dfd),
  "by_path": denied(os.open, %r, os.O_RDONLY),
}
os.unlink("sv-new.img.tmp", dir_fd=ifd)
print(out)
""" % (dfd, ifd, vid + ".img", os.path.join(data, "audit.log"))
        res = as_helper(code, fds=(dfd, ifd))
        os.close(dfd)
        os.close(ifd)
        assert res.returncode == 0, res.stderr
        seen = eval(res.stdout)  # noqa: S307 (the dict printed above)
        assert seen == {k: True for k in seen}, seen
        # rpcd's uid reaches no image at all.
        res = as_helper("import os; os.open(%r, os.O_RDONLY)" % img, uid=RPCD)
        assert res.returncode != 0 and "PermissionError" in res.stderr, res
        with open(os.path.join(data, "audit.log"), "rb") as f:
            assert f.read().startswith(audit_before)
        assert not os.path.exists(os.path.join(data, "planted"))
        unstage(d, vid, staging)


def fd_targets(pid):
    """{fd number: what it names} of a process."""
    out = {}
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            pass
    return out


def peer_inode(inode):
    """The inode of the other end of the Unix socket with this inode (from ss)."""
    res = subprocess.run(["ss", "-xaH"], capture_output=True, text=True, check=True)
    for row in res.stdout.splitlines():
        f = row.split()
        if len(f) >= 8 and f[5] == str(inode):
            return int(f[7])
    raise AssertionError("no socket with inode %d:\n%s" % (inode, res.stdout))


def writer_of(helper):
    """The helper's audit writer, its child (forked early in the helper's start)."""
    deadline = time.monotonic() + 20
    while "sepcsi-audit" not in comms(descendants(helper)):
        assert time.monotonic() < deadline, comms(descendants(helper))
        time.sleep(0.05)
    return comms(descendants(helper))["sepcsi-audit"]


def pidfd_getfd(pid, fd):
    """A copy of process pid's descriptor fd (pidfd_open and pidfd_getfd, as root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(434, pid, 0)
    assert pidfd >= 0, os.strerror(ctypes.get_errno())
    try:
        got = libc.syscall(438, pidfd, fd, 0)
        assert got >= 0, os.strerror(ctypes.get_errno())
        return got
    finally:
        os.close(pidfd)


def test_the_helpers_audit_file_is_written_by_a_root_writer_it_cannot_rewind():
    """No process of the helper's uid holds its audit file: a root writer without any
    capability does, and the helper's uid holds one end of a socket to it. Through that
    end, a compromised helper adds lines (each ending its own line) but cannot clear
    O_APPEND and write over, truncate or map what was recorded before."""
    for d in running(Driver()):
        helper = d.children()["sepcsi-mounthel"]
        path = os.path.join(d.data, "helper-audit.log")
        writer = writer_of(helper)
        uid, gid, eff, st = ids(writer)
        assert (uid, gid, eff) == (0, 0, 0), st
        # It writes as the helper's uid: never in the blocks a file system keeps for root.
        assert st["Uid"].split() == ["0", "0", "0", str(HELPER[0])], st
        assert st["Gid"].split() == ["0", "0", "0", str(HELPER[1])], st
        assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2", st
        held = fd_targets(writer)
        assert sorted(held) == [3, 4] and held[4] == path, held
        for p in [helper] + sorted(descendants(helper)):
            if p != writer and os.path.exists("/proc/%d" % p):
                assert path not in fd_targets(p).values(), (p, comms([p]))
        staging = os.path.join(d.root, "st")
        os.makedirs(staging)
        vid = make_volume(d, "pvc-audit", staging)
        with open(path, "rb") as f:
            before = f.read()
        assert b'"op":"CREATE"' in before and before.endswith(b"\n")
        # The helper's end: the socket whose peer is the writer's descriptor 3.
        inode = int(held[3].split("[")[1].rstrip("]"))
        mine = "socket:[%d]" % peer_inode(inode)
        num = [n for n, t in fd_targets(helper).items() if t == mine]
        assert len(num) == 1, (mine, fd_targets(helper))
        fd = pidfd_getfd(helper, num[0])
        code = r"""
import fcntl, mmap, os
fd = %d
out = {}
def refused(name, fn, *a):
    try:
        fn(*a)
        out[name] = False
    except (OSError, ValueError):
        out[name] = True
fcntl.fcntl(fd, fcntl.F_SETFL, 0)  # O_APPEND cleared: a file would take pwrite at 0 now
refused("pwrite", os.pwrite, fd, b"X" * 16, 0)
refused("truncate", os.ftruncate, fd, 0)
refused("seek", os.lseek, fd, 0, os.SEEK_SET)
refused("map", mmap.mmap, fd, 4096, mmap.MAP_SHARED, mmap.PROT_WRITE)
os.write(fd, b'{"forged":true}')
print(out)
""" % fd
        res = as_helper(code, fds=(fd,))
        os.close(fd)
        assert res.returncode == 0, res.stderr
        seen = eval(res.stdout)  # noqa: S307 (the dict printed above)
        assert seen == {k: True for k in seen}, seen
        unstage(d, vid, staging)
        d.client.controller("DeleteVolume", volume_id=vid)
        deadline = time.monotonic() + 20
        while True:
            with open(path, "rb") as f:
                after = f.read()
            if b'"op":"DELETE"' in after:
                break
            assert time.monotonic() < deadline, after[len(before):]
            time.sleep(0.1)
        assert after.startswith(before)
        added = after[len(before):].split(b"\n")
        assert b'{"forged":true}' in added, added  # its own line, the next record whole
        assert any(json.loads(ln).get("op") == "DELETE" for ln in added if ln.startswith(b'{"ts'))


def test_the_helper_ends_when_its_audit_writer_is_gone():
    """Nothing the helper does goes unrecorded: with its audit writer killed, it ends,
    and the supervisor starts a new helper with a new writer, which records again."""
    for d in running(Driver()):
        helper = d.children()["sepcsi-mounthel"]
        os.kill(writer_of(helper), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while d.children().get("sepcsi-mounthel") in (None, helper):
            assert time.monotonic() < deadline, d.logs()[-2000:]
            time.sleep(0.1)
        assert "the audit writer is gone" in d.logs()
        d.client.identity("Probe")
        writer_of(d.children()["sepcsi-mounthel"])
        c = d.client
        vid = c.controller("CreateVolume", name="pvc-after", volume_capabilities=[
            mount_cap("ext4")], capacity_range=c.pb.CapacityRange(required_bytes=32 * MiB)
        ).volume.volume_id
        # The writer writes what it is sent after the answer may have gone: looked for
        # until it is there (under load it was not yet, the once it was read at once).
        deadline = time.monotonic() + 20
        while True:
            with open(os.path.join(d.data, "helper-audit.log")) as f:
                if any(json.loads(ln).get("volume_id") == vid for ln in f if ln.endswith("\n")):
                    break
            assert time.monotonic() < deadline, "no record of %s" % vid
            time.sleep(0.1)


def test_records_sent_before_the_helper_ends_are_written():
    """A helper that ends shuts its writer's socket and waits for the writer to write what
    was sent before: a writer that is behind (stopped here) when the driver stops loses
    none of the helper's records to the supervisor, which kills what a helper leaves."""
    d = Driver()
    try:
        writer = writer_of(d.children()["sepcsi-mounthel"])
        os.kill(writer, signal.SIGSTOP)  # behind: what the helper sends waits in the socket
        c, vids = d.client, []
        for i in range(3):
            vids.append(c.controller("CreateVolume", name="pvc-late-%d" % i,
                                     volume_capabilities=[mount_cap("ext4")],
                                     capacity_range=c.pb.CapacityRange(required_bytes=MiB)
                                     ).volume.volume_id)
        c.close()
        d.client = None
        os.kill(d.sup_pid(), signal.SIGTERM)
        time.sleep(1)  # the helper has ended its requests and waits for its writer
        os.kill(writer, signal.SIGCONT)
        assert d.stop() == 0
        with open(os.path.join(d.data, "helper-audit.log")) as f:
            written = {json.loads(ln).get("volume_id") for ln in f}
        assert set(vids) <= written, (vids, written)
    finally:
        d.stop()
        d.cleanup()


def as_owner(dirs, mode, gid):
    """What the owner of each directory may make of it, as that uid (through descriptors
    root opened: the data directory is root's alone): its mode and group."""
    fds = [os.open(p, os.O_RDONLY | os.O_DIRECTORY) for p in dirs]
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(HELPER[1])
            os.setuid(HELPER[0])
            for fd in fds:
                os.fchown(fd, -1, gid)
                os.fchmod(fd, mode)
            code = 0
        finally:
            os._exit(code)
    for fd in fds:
        os.close(fd)
    assert os.waitpid(pid, 0)[1] == 0


def test_images_an_earlier_release_left_roots_are_handed_over_and_links_are_not():
    """Images and snapshots made by a helper that ran as root (0600, root's, in a 0700
    images/) become the helper's at its next start, and the volume stages with its data.
    A hard link and a symbolic link planted among the images (a compromised helper of an
    earlier run owns images/) are left alone: the file they name elsewhere keeps its
    owner and mode."""
    d = Driver()
    outside = os.path.join(d.tmp, "outside")
    with open(outside, "w") as f:
        f.write("root's own")
    os.chmod(outside, 0o600)
    try:
        staging = os.path.join(d.root, "st")
        os.makedirs(staging)
        vid = make_volume(d, "pvc-old", staging)
        with open(os.path.join(staging, "kept"), "w") as f:
            f.write("before the upgrade")
        unstage(d, vid, staging)
        assert d.stop() == 0
        # What the images were last handed to whole. A release whose helper ran as root
        # (none before this one, or this one rolled back to one) leaves the record as it
        # was: the directories no longer the owner's tell that the files must be walked.
        handed = os.path.join(d.data, "handed")
        with open(handed) as f:
            assert f.read() == "%d\n" % HELPER[0]
        images = os.path.join(d.data, "images")
        img = os.path.join(images, vid + ".img")
        for p, mode in ((images, 0o700), (os.path.join(d.data, "snapshots"), 0o700),
                        (img, 0o600)):
            os.chown(p, 0, 0)
            os.chmod(p, mode)
        # An access list an earlier owner left, naming rpcd's uid: removed at the hand-over.
        for p in (images, img):
            os.setxattr(p, "system.posix_acl_access", acl(RPCD[0]))
        os.link(outside, os.path.join(images, "sv-" + "9" * 32 + ".img"))
        os.symlink(outside, os.path.join(images, "sv-" + "8" * 32 + ".img"))
        d.start()
        s = os.stat(img)
        assert (s.st_uid, s.st_gid, s.st_mode & 0o777) == (HELPER[0], 0, 0o660)
        s = os.stat(outside)
        assert (s.st_uid, s.st_gid, s.st_mode & 0o7777) == (0, 0, 0o600)
        for p in (images, img):
            assert "system.posix_acl_access" not in os.listxattr(p), p
        with open(handed) as f:
            assert f.read() == "%d\n" % HELPER[0]
        # Handed whole once: the next start walks no file (one the owner changed since,
        # its own business, is left as it is), and only the directories are taken back.
        os.chmod(img, 0o640)
        os.chmod(images, 0o755)
        d.stop()
        d.start()
        assert os.stat(img).st_mode & 0o777 == 0o640
        assert os.stat(images).st_mode & 0o7777 == 0o2750
        # What the owner itself may make of its directories, even so that the core (uid 0
        # without CAP_DAC_OVERRIDE) could not search them: given back at the next start,
        # by the helper, before it starts its core (which makes and repairs nothing).
        snaps = os.path.join(d.data, "snapshots")
        for mode, gid in ((0o700, 0), (0o2750, HELPER[1]), (0, 0)):
            as_owner((images, snaps), mode, gid)
            d.stop()
            d.start()
            for p in (images, snaps):
                s = os.stat(p)
                assert (s.st_uid, s.st_gid, s.st_mode & 0o7777) == (HELPER[0], 0, 0o2750), p
        os.chmod(img, 0o660)
        os.unlink(os.path.join(images, "sv-" + "9" * 32 + ".img"))
        os.unlink(os.path.join(images, "sv-" + "8" * 32 + ".img"))
        cap = mount_cap("ext4")
        d.client.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
                      volume_capability=cap)
        with open(os.path.join(staging, "kept")) as f:
            assert f.read() == "before the upgrade"
        unstage(d, vid, staging)
    finally:
        d.stop()
        d.cleanup()


def test_helper_user_is_neither_root_nor_rpcds():
    """The helper's and the metrics check's ids are neither root's nor rpcd's nor each
    other's, in uid or in gid."""
    differ = "--rpcd-user, --helper-user and --metrics-user must differ in uid and gid"
    for flag, user, why in (("--helper-user", "%d:%d" % RPCD, differ),
                            ("--helper-user", "%d:1" % RPCD[0], differ),
                            ("--helper-user", "0:0", "uid 0"),
                            ("--metrics-user", "%d:%d" % RPCD, differ),
                            ("--metrics-user", "7:%d" % RPCD[1], differ),
                            ("--metrics-user", "65531:7", differ),
                            ("--metrics-user", "0:7", "uid 0")):
        res = subprocess.run([os.path.join(BIN, "sepcsi-supervisor"), flag, user,
                              "--node-id", "n", "--print-privileges"],
                             capture_output=True, text=True, timeout=30)
        assert res.returncode != 0 and why in res.stderr, (flag, user, res)


def test_the_helper_dies_with_the_supervisor_after_its_uid_change():
    """The uid change clears the parent-death signal; the helper sets it again. Stopped
    (so that it cannot notice its control channel closing), it is still killed when the
    supervisor is: no helper of its uid outlives the driver that started it."""
    d = Driver()
    helper = d.children()["sepcsi-mounthel"]
    try:
        os.kill(helper, signal.SIGSTOP)
        os.kill(d.sup_pid(), signal.SIGKILL)
        deadline = time.monotonic() + 20
        while os.path.exists("/proc/%d" % helper) and \
                proc_status(helper).get("State", "").split()[0] != "Z":
            assert time.monotonic() < deadline, "the helper outlived its supervisor"
            time.sleep(0.05)
    finally:
        try:
            os.kill(helper, signal.SIGKILL)  # failed: it must not linger either
        except ProcessLookupError:
            pass
        d.stop()
        d.cleanup()
