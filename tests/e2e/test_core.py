"""sepcsi-core against a compromised orchestrator: the core started alone, as
its supervisor would start it, with the test as its peer on fd 3, speaking the
helper protocol (mh_wire.py) the way a hostile orchestrator could.

The orchestrator owns images/ and snapshots/ and every file in them: it can
create, rename, replace, chmod, link and fill them as it likes, and send any
sequence of well-formed or malformed requests. What must hold is that this
gives it nothing beyond the images it already owns:
  - a loop device is attached only to a regular file the owner uid owns,
    opened by the core in its own images directory (never a symlink, a hard
    link to someone else's file, a FIFO, a directory or a device node);
  - a mount is made only on a root-only directory beneath the allowed root,
    reached without a symlink or "..";
  - nothing is unmounted, detached, unlinked or removed unless the core made
    it for the volume named: not a mount someone else made, not another
    volume's, not a file or directory of kubelet's;
  - no request hangs the single-threaded core (it answers PING after each), not
    even one naming a path through a tenant's FUSE mount whose daemon stalls;
  - a malformed datagram or a request outside its table ends it with exit 3,
    the end of the channel with exit 0, and neither undoes anything.
Every test compares, before and after, the mounts beneath its tree (in its
own namespace and in the core's), the loop devices backed by its files (or by
/etc/passwd), and the files of its tree; a baseline lifecycle shows the same
core doing its job.
"""
import errno
import os
import select
import signal
import socket
import stat
import subprocess
import tempfile
import time

import pytest

import mh_wire
from conftest import BIN, claim_tmp, cleanup_tree, with_fds
from mh_wire import F_BLOCK, F_CREATE_DIR, F_REMOVE_DIR, E, Msg, T, decode, encode
from stallfuse import fuse_subpath

MiB = 1 << 20
OWNER = 65533
VOL = "sv-" + "0" * 31 + "1"
VOL2 = "sv-" + "0" * 31 + "2"
SECRETS = {"config.yaml": b"kubelet config\n", "pki/kubelet.key": b"PRIVATE KEY\n"}


def loops(cols="NAME,BACK-MAJ:MIN,BACK-INO"):
    """Every loop device of the machine and what backs it (device, inode), one space
    between columns (losetup pads them to the longest name of the moment, which another
    test's devices change)."""
    out = subprocess.run(["losetup", "-l", "-n", "-O", cols],
                         capture_output=True, text=True, check=True).stdout
    return sorted(" ".join(ln.split()) for ln in out.split("\n") if ln.strip())


def mounts(pid, prefix):
    """(mount id, mount point) of the mounts at or below prefix in pid's namespace."""
    with open("/proc/%s/mountinfo" % pid) as f:
        rows = [ln.split() for ln in f]
    return sorted((r[0], r[4]) for r in rows
                  if r[4] == prefix or r[4].startswith(prefix + "/"))


def mount_opts(path):
    with open("/proc/self/mountinfo") as f:
        rows = [ln.split() for ln in f if ln.split()[4] == path]
    return rows[-1][5].split(",") if rows else None


# The core's capabilities, as its starter sets them before the exec (pol_caps_confine_core).
CORE_CAPS = "-all,+chown,+sys_admin,+mknod"
CONFINED = ["setpriv", "--bounding-set=" + CORE_CAPS, "--inh-caps=" + CORE_CAPS,
            "--ambient-caps=" + CORE_CAPS, "--no-new-privs", "--securebits=+noroot,"
            "+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,+keep_caps_locked"]


# Its reader's: uid 0 without any capability, as pol_caps_confine_tools leaves it.
READER_CONFINED = ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all",
                   "--no-new-privs", "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,"
                   "+no_setuid_fixup_locked,+keep_caps_locked"]
# What the core no longer serves: its reader (sepcsi-reader) answers them.
READS = (T.REQ_STATS, T.REQ_LIST, T.REQ_STAGE_CHECK)


class Core:
    """A sepcsi-core on a fresh tree, the test being its orchestrator:
        <tmp>/root      the allowed root (kubelet's files in it)
        <tmp>/data      the core's data directory (images/ is the owner's)
        <tmp>/outside   files that are nobody's business of the core's"""

    def __init__(self):
        self.tmp, self.lock = claim_tmp("sepcsi-core-")
        self.root, self.data = self.path("root"), self.path("data")
        self.out, self.images = self.path("outside"), self.path("data/images")
        for d in (self.root, self.out, self.data):
            os.makedirs(d, mode=0o755)
        os.makedirs(self.images)
        os.chown(self.images, OWNER, 0)
        os.chmod(self.images, 0o2750)  # as the helper hands it to its owner (mh_identity.c)
        for rel, data in SECRETS.items():
            os.makedirs(os.path.dirname(self.path("root", rel)), mode=0o750, exist_ok=True)
            with open(self.path("root", rel), "wb") as f:
                f.write(data)
        self.policy = self.path("policy.ini")
        with open(self.policy, "w") as f:
            f.write("[paths]\nallowed_roots = %s\nstaging_paths = **\ntarget_paths = **\n"
                    % self.root)
        self.proc, self.sock, self.next_id = None, None, 1
        self.reader, self.rsock, self.flusher = None, None, None

    def path(self, *rel):
        return os.path.join(self.tmp, *rel)

    def compiled(self):
        """The policy as the core reads it: compiled by sepcsi-policy, on fd 5 (a file of
        its own each time: the core, its reader and its flusher each read theirs)."""
        fd, path = tempfile.mkstemp(prefix="policy-", suffix=".bin", dir=self.tmp)
        with os.fdopen(fd, "wb") as f:
            subprocess.run([os.path.join(BIN, "sepcsi-policy"), "compile", self.policy],
                           stdout=f, check=True)
        fd = os.open(path, os.O_RDONLY)
        os.unlink(path)
        return fd

    def data_fds(self):
        """images/ and audit.log as the core's starter opens them (mh_relay.c), on the
        core's fds 7 and 8."""
        return {7: os.open(self.images, os.O_RDONLY | os.O_DIRECTORY),
                8: os.open(self.path("data/audit.log"),
                           os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)}

    def spawn(self, policy_fd, control=False, starter=None):
        """With control, fd 4 is a supervisor's control channel (self.ctl: READY on it),
        as the supervisor starts its children. Confined as its starter confines it
        (mh_relay.c): its capabilities set and carried across the exec, no_new_privs,
        the securebits locked; the core only checks them (starter: another command
        before the core's, which it must refuse to start under)."""
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c, d = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if control else \
            (None, None)
        self.log = open(self.path("core.log"), "w")
        flush = self.spawn_flusher()

        data = self.data_fds()
        argv, keep = with_fds(
            (CONFINED if starter is None else starter) +
            [os.path.join(BIN, "sepcsi-core"), "--log-level", "debug"],
            {3: b.fileno(), 5: policy_fd, 6: flush.fileno(), **data,
             **({4: d.fileno()} if d else {})})
        self.proc = subprocess.Popen(argv, pass_fds=keep, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        for fd in data.values():
            os.close(fd)
        flush.close()
        b.close()
        if d:
            d.close()
        self.ctl = c
        os.close(policy_fd)
        self.sock = a

    def spawn_flusher(self):
        """The core's flusher, as the core's starter starts it (sepcsi-reader --flusher,
        confined as the reader): its socket on fd 6, the compiled policy on fd 5. Returns
        the core's end (its fd 6)."""
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pol = self.compiled()
        self.flog = open(self.path("flusher.log"), "w")
        argv, fds = with_fds(READER_CONFINED + [os.path.join(BIN, "sepcsi-reader"), "--flusher"],
                             {5: pol, 6: b.fileno()})
        self.flusher = subprocess.Popen(argv, pass_fds=fds, stdout=self.flog,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        os.close(pol)
        b.close()
        return a

    def spawn_reader(self, starter=None, mine=True):
        """The core's reader, as the core's starter forks it: uid 0 without any capability,
        its channel on fd 3 (self.rsock), the images directory on fd 4 (its owner the
        images'), the compiled policy on fd 5; the test asks it STATS and LIST (call() sends them there)."""
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        images, pol = os.open(self.images, os.O_RDONLY | os.O_DIRECTORY), self.compiled()
        self.rlog = open(self.path("reader.log"), "w")
        argv, fds = with_fds(
            (READER_CONFINED if starter is None else starter) +
            [os.path.join(BIN, "sepcsi-reader"), "--log-level", "debug"],
            {3: b.fileno(), 4: images, 5: pol})
        self.reader = subprocess.Popen(argv, pass_fds=fds, stdout=self.rlog,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        for fd in (images, pol):
            os.close(fd)
        b.close()
        if not mine:
            return a  # its channel is someone else's (a helper's)
        self.rsock = a

    def start(self):
        self.spawn(self.compiled())
        self.spawn_reader()
        self.alive()
        return self

    def call(self, msg, timeout=20, to=None):
        """msg's answer from the core, or from its reader for READS (to: a
        socket of the test's choosing)."""
        sock = to or (self.rsock if msg.type in READS and self.rsock else self.sock)
        msg.id, self.next_id = self.next_id, self.next_id + 1
        sock.send(encode(msg))
        sock.settimeout(timeout)
        try:
            ans = decode(sock.recv(mh_wire.MSG_MAX + 1))
        except socket.timeout:
            raise AssertionError("no answer to %r in %ds: the core hangs" % (msg, timeout))
        assert ans.id == msg.id
        return ans

    def ok(self, msg):
        ans = self.call(msg)
        assert ans.type == T(msg.type + 1), ans
        return ans

    def alive(self):
        """The core answers PING at once (and its reader, if started): not hung on anything."""
        for sock in [self.sock] + ([self.rsock] if self.rsock else []):
            t = time.monotonic()
            assert self.call(Msg(T.REQ_PING), timeout=5, to=sock).type == T.ANS_PING
            assert time.monotonic() - t < 5

    def logs(self):
        with open(self.path("core.log")) as f:
            return f.read()

    def state(self):
        """What no refused request may change: mounts (here and in the core's view),
        loop devices, and every file of the tree but the core's own records."""
        files = {}
        top = os.lstat(self.tmp).st_dev
        for dirpath, dirnames, filenames in os.walk(self.tmp):
            for n in dirnames + filenames:
                p = os.path.join(dirpath, n)
                st = os.lstat(p)
                files[p] = (st.st_mode, st.st_uid, st.st_size, st.st_ino, st.st_nlink,
                            st.st_mtime_ns if stat.S_ISREG(st.st_mode) else 0)
            dirnames[:] = [d for d in dirnames
                           if os.lstat(os.path.join(dirpath, d)).st_dev == top]
        for p in list(files):
            if p.startswith(self.path("data/loops")) or p in (
                    self.path("data/audit.log"), self.path("core.log"),
                    self.path("reader.log"), self.path("flusher.log")):
                del files[p]
        core = mounts(self.proc.pid, self.root) if self.proc.poll() is None else None
        # Loop devices of this tree's files (the machine may run other tests).
        ids = {"%d:%d %d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
               for st in [os.stat("/etc/passwd")] + [os.lstat(p) for p in files
                                                     if stat.S_ISREG(files[p][0])]}
        ours = [ln for ln in loops() if " ".join(ln.split()[1:]) in ids]
        return mounts("self", self.tmp), core, ours, files

    def harmless(self, msg, *kinds):
        """msg changes nothing and the core still serves after it; with kinds, it is
        answered ANS_ERROR of one of them."""
        before = self.state()
        ans = self.call(msg)
        for what, b, a in zip(("mounts", "the core's mounts", "loop devices", "files"),
                              before, self.state()):
            assert a == b, "%s changed by %r, answered %r" % (what, msg, ans)
        assert not kinds or (ans.type == T.ANS_ERROR and ans.kind in kinds), ans
        self.alive()
        return ans

    unchanged = harmless

    def secrets_intact(self):
        for rel, data in SECRETS.items():
            with open(self.path("root", rel), "rb") as f:
                assert f.read() == data

    # What the orchestrator (or the test, as root) puts in place.
    def img(self, vid):
        return os.path.join(self.images, vid + ".img")

    def image(self, vid, fs="ext4", size=64 * MiB, uid=OWNER, path=None):
        p = path or self.img(vid)
        with open(p, "wb") as f:
            f.truncate(size)
        if fs:
            subprocess.run(["mkfs." + fs, "-q", "-F" if fs == "ext4" else "-f", p], check=True)
        os.chown(p, uid, 0)
        os.chmod(p, 0o660)
        return p

    def dir(self, rel, uid=0, mode=0o750):
        p = self.path("root", rel)
        os.makedirs(p, mode=mode, exist_ok=True)
        os.chown(p, uid, 0)
        os.chmod(p, mode)
        return p

    def stop(self):
        if self.rsock:
            self.rsock.close()  # its channel ends: it exits
        if self.reader and self.reader.poll() is None:
            try:
                self.reader.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.reader.pid, signal.SIGKILL)
                self.reader.wait(10)
        if self.reader:
            self.rlog.close()
        self.reader, self.rsock = None, None
        if self.sock:
            self.sock.close()
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self.proc:
            self.log.close()
        if self.flusher:  # its socket ended with the core: it exits
            try:
                self.flusher.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.flusher.pid, signal.SIGKILL)
                self.flusher.wait(10)
            self.flog.close()
            self.flusher = None


@pytest.fixture
def fresh():
    """A tree for a core not started yet; whatever happens, all of it goes away."""
    c = Core()
    try:
        yield c
    finally:
        c.stop()
        if os.environ.get("SEPCSI_E2E_SHOW_LOGS") and c.proc:
            print(c.logs())
        cleanup_tree(c.tmp)
        os.close(c.lock)
        # A dead core's namespace lets go of its devices a moment later: wait, so
        # that the next test's loop devices are its own.
        deadline = time.monotonic() + 10
        while any(c.tmp in ln for ln in loops("BACK-FILE")) and time.monotonic() < deadline:
            time.sleep(0.05)


@pytest.fixture
def core(fresh):
    yield fresh.start()


def stage(vid, path, fs="ext4", flags=0, readonly=0, mount_flags=""):
    return Msg(T.REQ_STAGE, volume_id=vid, staging_path=path, fs_type=fs, flags=flags,
               readonly=readonly, mount_flags=mount_flags)


def stage_check(vid, path, **kw):
    """STAGE's checks alone, as the orchestrator asks them before it formats an image."""
    msg = stage(vid, path, **kw)
    msg.type = T.REQ_STAGE_CHECK
    return msg


def unstage(vid, path, flags=0):
    return Msg(T.REQ_UNSTAGE, volume_id=vid, staging_path=path, flags=flags)


def publish(vid, staging, target, flags=0):
    return Msg(T.REQ_PUBLISH, volume_id=vid, staging_path=staging, target_path=target,
               flags=flags)


def unpublish(vid, target):
    return Msg(T.REQ_UNPUBLISH, volume_id=vid, target_path=target)


def expand(vid, path, flags=0):
    return Msg(T.REQ_EXPAND, volume_id=vid, staging_path=path, flags=flags)


def refresh(vid):
    return Msg(T.REQ_REFRESH, volume_id=vid)


def stats(vid, path, flags=0):
    return Msg(T.REQ_STATS, volume_id=vid, path=path, flags=flags)


def attached(vid):
    return Msg(T.REQ_ATTACHED, volume_id=vid)


def list_mounts(after=""):
    return Msg(T.REQ_LIST, what=mh_wire.LIST_MOUNTS, after=after)


def loops_of(path):
    st = os.stat(path)
    key = "%d:%d %d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    return [ln for ln in loops() if " ".join(ln.split()[1:]) == key]


# ---- 1. the baseline: the same core does its job --------------------------------------

def test_filesystem_lifecycle(core):
    core.image(VOL)
    st, pods = core.dir("staging/v1"), core.dir("pods/p1")
    target = os.path.join(pods, "mount")
    core.ok(stage(VOL, st))
    core.ok(stage(VOL, st))  # idempotent
    assert {"nosuid", "nodev"} <= set(mount_opts(st))
    assert len(loops_of(core.img(VOL))) == 1
    core.ok(publish(VOL, st, target))
    assert {"nosuid", "nodev"} <= set(mount_opts(target))
    s = core.ok(stats(VOL, target))
    assert s.bytes_total > 0 and not s.abnormal
    core.ok(unpublish(VOL, target))
    assert not os.path.exists(target)  # the core made it, the core removed it
    core.ok(unstage(VOL, st))
    assert os.path.isdir(st) and core.state()[0] == [] and loops_of(core.img(VOL)) == []
    # Ephemeral: staged on a target directory the core makes, and removes.
    eph = os.path.join(pods, "eph")
    core.ok(stage(VOL, eph, flags=F_CREATE_DIR))
    assert mount_opts(eph)
    core.ok(unstage(VOL, eph, flags=F_REMOVE_DIR))
    assert not os.path.exists(eph) and core.state()[0] == []
    core.secrets_intact()
    with open(core.path("data/audit.log")) as f:  # the core's own record, root's
        assert f.read().count('"op":"STAGE"') == 3


def test_raw_block_lifecycle(core):
    core.image(VOL, fs=None)
    st, pods = core.dir("blk/staging/v1"), core.dir("blk/publish/v1")
    target = os.path.join(pods, "pod1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    dev = os.path.join(st, "dev")
    assert stat.S_ISBLK(os.stat(dev).st_mode) and len(loops_of(core.img(VOL))) == 1
    core.ok(publish(VOL, st, target, flags=F_BLOCK))
    assert os.stat(target).st_rdev == os.stat(dev).st_rdev
    assert core.ok(stats(VOL, target, flags=F_BLOCK)).bytes_total == 64 * MiB
    core.ok(unpublish(VOL, target))
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    assert not os.path.exists(target) and os.listdir(st) == []
    assert core.state()[0] == [] and loops_of(core.img(VOL)) == []
    # Exposed raw once, never mounted as a file system afterwards.
    core.unchanged(stage(VOL, st), E.PRECONDITION)


# ---- 2. what lies under an image's name ---------------------------------------------

def _hostile_image(c, name):
    img = c.img(VOL)

    def root_img():
        return c.image(None, path=os.path.join(c.out, "root.img"), uid=0)
    if name == "symlink to a root file":
        os.symlink(root_img(), img)
    elif name == "symlink to an owned file":  # never through a symlink, even so
        os.symlink(c.image(None, path=os.path.join(c.out, "owned.img")), img)
    elif name == "symlink to /etc/passwd":
        os.symlink("/etc/passwd", img)
    elif name == "hard link to a root file":
        os.link(root_img(), img)
    elif name.startswith("owned by"):
        c.image(VOL, uid=0 if name == "owned by root" else 1000)
    else:
        {"fifo": lambda: os.mkfifo(img, 0o660),
         "directory": lambda: os.mkdir(img, 0o770),
         "loop0 block node": lambda: os.mknod(img, stat.S_IFBLK | 0o660, os.makedev(7, 0)),
         "null char node": lambda: os.mknod(img, stat.S_IFCHR | 0o660, os.makedev(1, 3)),
         }[name]()
        os.chown(img, OWNER, 0)


HOSTILE_IMAGES = {  # and what the core answers: REFUSED (a symlink, not the owner's) or
    # FAILED (not a regular file)
    "symlink to a root file": E.REFUSED, "symlink to an owned file": E.REFUSED,
    "symlink to /etc/passwd": E.REFUSED, "hard link to a root file": E.REFUSED,
    "fifo": E.FAILED, "directory": E.FAILED, "owned by another uid": E.REFUSED,
    "owned by root": E.REFUSED, "loop0 block node": E.FAILED, "null char node": E.FAILED,
}


@pytest.mark.parametrize("name", sorted(HOSTILE_IMAGES))
def test_hostile_image_is_never_attached(core, name):
    kind = HOSTILE_IMAGES[name]
    _hostile_image(core, name)
    st, pods = core.dir("staging/v1"), core.dir("pods/p1")
    core.unchanged(stage(VOL, st), kind)
    core.unchanged(stage(VOL, st, readonly=1, mount_flags="ro"), kind)
    core.unchanged(stage(VOL, st, fs="", flags=F_BLOCK), kind)
    core.unchanged(stage(VOL, st, fs="", flags=F_BLOCK, readonly=1), kind)
    core.unchanged(publish(VOL, st, os.path.join(pods, "t"), flags=F_BLOCK), kind)
    core.unchanged(expand(VOL, st), kind)
    core.unchanged(stats(VOL, st), kind)
    core.unchanged(refresh(VOL), kind)
    core.unchanged(attached(VOL), kind)
    assert loops_of("/etc/passwd") == []


# ---- 3. where it mounts --------------------------------------------------------------

def _paths(c):
    os.makedirs(c.path("outside/st"))
    c.dir("staging")
    os.symlink(c.path("outside"), c.path("root/staging/link"))
    os.symlink(c.path("outside/st"), c.path("root/staging/lastlink"))
    c.dir("user/st", uid=1000)
    c.dir("user", uid=1000)
    c.dir("gw", mode=0o770)
    c.dir("gw/st")
    os.mkfifo(c.path("root/staging/fifo"))
    return {
        "outside the root": c.path("outside/st"),
        "the data directory": c.path("data/images"),
        "dot-dot": c.path("root/staging/../../outside/st"),
        "dot": c.path("root/staging/./st"),
        "double slash": c.path("root//staging"),
        "trailing slash": c.path("root/staging/"),
        "the root itself": c.root,
        "relative": "root/staging",
        "symlink on the way": c.path("root/staging/link/st"),
        "symlink last": c.path("root/staging/lastlink"),
        "owned by a user on the way": c.path("root/user/st"),
        "group-writable on the way": c.path("root/gw/st"),
        "a fifo": c.path("root/staging/fifo"),
        "a kubelet file": c.path("root/config.yaml"),
        "a long component": c.path("root/staging", "x" * 300),
        "a long path": c.path("root/staging", *(["y" * 200] * 20))[:mh_wire.PATH_MAX],
    }


def test_hostile_paths_are_refused(core):
    """Nothing is mounted or made on a path the policy or the walk refuses; what only
    looks (UNSTAGE, UNPUBLISH, STATS of what is no mount) may answer, but changes nothing."""
    core.image(VOL)
    good = core.dir("staging/good")
    paths = _paths(core)
    for name, p in paths.items():
        for msg in (stage(VOL, p), stage(VOL, p, flags=F_CREATE_DIR),
                    stage(VOL, p, fs="", flags=F_BLOCK)):
            core.unchanged(msg, E.REFUSED, E.FAILED, E.EXISTS, E.NOTFOUND)
        # Its checks stop at the parent (what lies at the path is STAGE's to refuse).
        for msg in (stage_check(VOL, p), stage_check(VOL, p, flags=F_CREATE_DIR)):
            core.harmless(msg)
        for msg in (unstage(VOL, p), unstage(VOL, p, flags=F_REMOVE_DIR),
                    unstage(VOL, p, flags=F_BLOCK), unpublish(VOL, p), stats(VOL, p)):
            core.harmless(msg)
    # STAGE_CHECK passes what STAGE would take, and makes nothing.
    for msg in (stage_check(VOL, good), stage_check(VOL, good + "/new", flags=F_CREATE_DIR)):
        assert core.harmless(msg).type == T.ANS_STAGE_CHECK
    assert not os.path.exists(good + "/new")
    core.unchanged(stage_check(VOL, good, fs="vfat"), E.REFUSED)
    core.unchanged(stage_check(VOL, good, mount_flags="suid"), E.REFUSED)
    # Staged for real: a hostile target is still refused, and the staging stays.
    core.ok(stage(VOL, good))
    for name, p in paths.items():
        for flags in (0, F_BLOCK):
            core.unchanged(publish(VOL, good, p, flags=flags), E.REFUSED, E.FAILED, E.EXISTS,
                           E.NOTFOUND, E.PRECONDITION)
    core.unchanged(publish(VOL, good, good + "/sub"), E.REFUSED)  # nested in the staging
    # Even where the volume's root is root's and writable by nobody else, as the walk asks
    # (its tenant, root in its pod, may leave it so): a mount point where volumes are
    # mounted is never walked through, so nothing of another volume lies beneath one
    # (test_security.py).
    os.chown(good, 0, 0)
    os.chmod(good, 0o755)
    os.mkdir(good + "/sub", 0o755)
    core.image(VOL2)
    raw = core.dir("staging/raw")
    core.ok(stage(VOL2, raw, fs="", flags=F_BLOCK))
    for target in (good + "/x", good + "/sub/x"):
        core.unchanged(publish(VOL2, raw, target, flags=F_BLOCK), E.REFUSED)
        core.unchanged(publish(VOL, good, target), E.REFUSED)
        core.unchanged(stage(VOL2, target, fs="", flags=F_BLOCK | F_CREATE_DIR), E.REFUSED)
    assert os.listdir(good + "/sub") == []
    core.ok(unstage(VOL2, raw, flags=F_BLOCK))
    core.ok(unstage(VOL, good))
    core.secrets_intact()


# ---- 4. never destroy what is not its own --------------------------------------------

NOIMG = "sv-" + "0" * 31 + "9"  # a volume id with no image at all


def _foreign_mount(c, kind, p):
    if kind == "tmpfs":
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", p], check=True)
        with open(os.path.join(p, "data"), "w") as f:
            f.write("someone's\n")
    elif kind == "root image":
        img = c.image(None, path=os.path.join(c.out, "root.img"), uid=0)
        subprocess.run(["mount", "-o", "loop", img, p], check=True)
    else:  # another volume, staged by the core itself
        c.image(VOL2)
        c.ok(stage(VOL2, p))


@pytest.mark.parametrize("vid", [VOL, NOIMG])
@pytest.mark.parametrize("kind", ["tmpfs", "root image", "other volume"])
def test_foreign_mount_is_never_unmounted(core, kind, vid):
    core.image(VOL)
    p, pods = core.dir("staging/x"), core.dir("pods/p1")
    _foreign_mount(core, kind, p)
    core.unchanged(unstage(vid, p), E.REFUSED)
    core.unchanged(unstage(vid, p, flags=F_REMOVE_DIR), E.REFUSED)
    core.unchanged(unpublish(vid, p), E.REFUSED)
    core.unchanged(expand(vid, p), E.PRECONDITION, E.NOTFOUND)
    core.unchanged(publish(vid, p, os.path.join(pods, "t")), E.PRECONDITION)
    core.harmless(stats(vid, p))  # NOTFOUND, or "abnormal" for another loop device
    core.harmless(unstage(vid, p, flags=F_BLOCK))  # no <p>/dev: nothing to do
    if vid == VOL:
        core.unchanged(stage(VOL, p), E.EXISTS)


def test_attached_and_list_tell_what_is_its_own_and_change_nothing(core):
    """ATTACHED says whether any loop device backs an image (the orchestrator formats or
    deletes one only while none does); LIST names only mounts of the
    core's own devices and binds of their nodes, after a cursor; the core lists no files
    (the orchestrator's own), and neither request changes anything."""
    core.image(VOL)
    core.image(VOL2, fs=None)
    assert core.harmless(attached(VOL)).devices == 0
    st, blk = core.dir("staging/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st))
    core.ok(stage(VOL2, blk, fs="", flags=F_BLOCK))
    _foreign_mount(core, "root image", core.dir("staging/foreign"))
    _foreign_mount(core, "tmpfs", core.dir("staging/tmp"))
    assert core.harmless(attached(VOL)).devices == 1
    assert core.harmless(attached(VOL2)).devices == 1
    rows = [ln.split() for ln in core.harmless(list_mounts()).text.splitlines()]
    assert sorted((k, v, p) for _, k, v, p in rows) == [
        ("b", VOL2, os.path.join(blk, "dev")), ("f", VOL, st)], rows
    first = min(rows, key=lambda r: int(r[0]))
    rest = [ln.split() for ln in core.harmless(list_mounts(first[0])).text.splitlines()]
    assert rest == [r for r in rows if r is not first], (rows, rest)
    for msg, kind in ((Msg(T.REQ_LIST, what=mh_wire.LIST_IMAGES, after=""), E.REFUSED),
                      (Msg(T.REQ_LIST, what=mh_wire.LIST_SNAPSHOTS, after=""), E.REFUSED),
                      (list_mounts("12x"), E.REFUSED), (attached(NOIMG), E.NOTFOUND),
                      (attached("sv-../../etc"), E.REFUSED)):
        core.unchanged(msg, kind)
    core.ok(unstage(VOL, st))
    core.ok(unstage(VOL2, blk, flags=F_BLOCK))
    assert core.harmless(attached(VOL)).devices == 0
    assert core.harmless(attached(VOL2)).devices == 0


def test_targets_it_did_not_make_survive(core):
    core.image(VOL)
    core.image(VOL2)
    st, pods = core.dir("staging/v1"), core.dir("pods/p1")
    os.mkdir(os.path.join(pods, "empty"))
    with open(os.path.join(pods, "beside"), "w") as f:
        f.write("kubelet's\n")
    os.makedirs(os.path.join(pods, "full/sub"))
    open(os.path.join(pods, "file"), "w").close()
    os.mkfifo(os.path.join(pods, "fifo"))
    # Harmless leftovers: answered, left in place.
    for name in ("empty", "file"):
        core.harmless(unpublish(VOL, os.path.join(pods, name)))
        core.harmless(unstage(VOL, os.path.join(pods, name), flags=F_REMOVE_DIR))
    # Anything else: refused, left in place, and no hang on the FIFO.
    for name in ("full", "fifo", "beside"):
        core.unchanged(unpublish(VOL, os.path.join(pods, name)), E.REFUSED)
        core.harmless(unstage(VOL, os.path.join(pods, name), flags=F_REMOVE_DIR))
    # Another volume's target, made and marked by the core for that volume.
    core.ok(stage(VOL2, st))
    core.ok(publish(VOL2, st, os.path.join(pods, "t2")))
    core.unchanged(unpublish(VOL, os.path.join(pods, "t2")), E.REFUSED)
    core.unchanged(unstage(VOL, os.path.join(pods, "t2"), flags=F_REMOVE_DIR), E.REFUSED)
    core.ok(unpublish(VOL2, os.path.join(pods, "t2")))
    core.ok(unstage(VOL2, st))
    # A copy of a directory the core made (trusted mark and all, as cp -a makes
    # it as root) is not the one it made: its mark names another inode.
    eph = os.path.join(pods, "eph")
    core.ok(stage(VOL, eph, flags=F_CREATE_DIR))
    core.ok(unstage(VOL, eph))
    subprocess.run(["cp", "-a", eph, eph + "-copy"], check=True)
    core.harmless(unstage(VOL, eph + "-copy", flags=F_REMOVE_DIR))
    core.harmless(unpublish(VOL, eph + "-copy"))
    core.ok(unstage(VOL, eph, flags=F_REMOVE_DIR))
    assert not os.path.exists(eph) and os.path.isdir(eph + "-copy")
    # Raw block: a <staging>/dev it did not make is left; someone else's bind on it
    # (of /dev/null here) is refused.
    b1, b2 = core.dir("blk/v1"), core.dir("blk/v2")
    with open(os.path.join(b1, "dev"), "w") as f:
        f.write("not a device\n")
    core.harmless(unstage(VOL, b1, flags=F_BLOCK))
    open(os.path.join(b2, "dev"), "w").close()
    subprocess.run(["mount", "--bind", "/dev/null", os.path.join(b2, "dev")], check=True)
    core.unchanged(unstage(VOL, b2, flags=F_BLOCK), E.REFUSED)
    core.unchanged(stage(VOL, b2, fs="", flags=F_BLOCK), E.EXISTS)
    core.secrets_intact()


# ---- 5. the image swapped under a staged volume --------------------------------------

@pytest.mark.parametrize("block", [False, True], ids=["fs", "block"])
def test_image_swapped_after_stage(core, block):
    """The staged mount belongs to the inode the core attached, not to the name:
    whatever the orchestrator puts under the name (another image, a symlink, nothing,
    a root file), the core refuses to touch the mount; it is not lost silently (every
    refusal says so), and with the real image back under its name it unstages."""
    fs, flags = (None, F_BLOCK) if block else ("ext4", 0)
    img = core.image(VOL, fs=fs)
    st, pods = core.dir("staging/v1"), core.dir("pods/p1")
    core.ok(stage(VOL, st, fs=fs or "", flags=flags))
    moved = os.path.join(core.images, "moved")
    os.rename(img, moved)
    core.image(VOL, fs=fs)  # another image of the owner's under the name
    core.unchanged(unstage(VOL, st, flags=flags), E.REFUSED)
    core.unchanged(expand(VOL, st, flags=flags), E.PRECONDITION)
    core.unchanged(publish(VOL, st, os.path.join(pods, "t"), flags=flags), E.PRECONDITION)
    ans = core.harmless(stats(VOL, st, flags=flags))  # "abnormal": not this image's
    assert ans.abnormal == 1 and ans.bytes_total == 0, ans
    if not block:
        core.unchanged(stage(VOL, st), E.EXISTS)
    os.unlink(img)
    os.symlink(moved, img)  # a symlink to the real one
    for msg in (unstage(VOL, st, flags=flags), expand(VOL, st, flags=flags),
                stats(VOL, st, flags=flags), publish(VOL, st, pods + "/t", flags=flags)):
        core.unchanged(msg, E.REFUSED, E.PRECONDITION)
    os.unlink(img)  # no image at all: refused, never guessed
    core.unchanged(unstage(VOL, st, flags=flags), E.REFUSED)
    os.link(core.image(None, path=os.path.join(core.out, "root.img"), uid=0), img)
    core.unchanged(unstage(VOL, st, flags=flags), E.REFUSED)
    os.unlink(img)
    os.rename(moved, img)  # the real image back under its name: served again
    core.ok(unstage(VOL, st, flags=flags))
    assert core.state()[0] == [] and loops_of(img) == []


# ---- 6. a staging the core did not make ---------------------------------------------

def _losetup(img):
    return subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.parametrize("how", ["fs, image before start", "fs, image after start", "block"])
def test_staging_it_did_not_make_is_not_the_volumes(fresh, how):
    """A staging someone else made by hand (root: a mount, or for raw block a bind on
    <staging>/dev, of a loop device root attached itself to the owner's image) is not
    this volume's: the core did not attach that device for this volume, so it must not
    unmount, detach, grow, bind or report it.
    A device is the volume's only if the core named it by the volume id when it
    attached it (mh_loop.c); before that rule, root's device was matched by the
    (st_dev, st_ino) behind it alone, whenever no loop record hid it (an image made
    after start) or a device-node bind was asked about: UNSTAGE unmounted root's mount
    and detached root's device, EXPAND grew it, STATS reported it, PUBLISH bound it."""
    block = how == "block"
    if how == "fs, image before start":
        fresh.image(VOL)
    core = fresh.start()
    if how != "fs, image before start":
        core.image(VOL, fs=None if block else "ext4")
    st, pods = core.dir("staging/v1"), core.dir("pods/p1")
    flags, where = (F_BLOCK, os.path.join(st, "dev")) if block else (0, st)
    if block:
        open(where, "w").close()
    subprocess.run(["mount"] + (["--bind"] if block else []) +
                   [_losetup(core.img(VOL)), where], check=True)
    core.unchanged(unstage(VOL, st, flags=flags), E.REFUSED)
    core.unchanged(expand(VOL, st, flags=flags), E.PRECONDITION)
    core.unchanged(publish(VOL, st, os.path.join(pods, "t"), flags=flags), E.PRECONDITION)
    ans = core.harmless(stats(VOL, st, flags=flags))  # NOTFOUND, or "abnormal", no figures
    assert (ans.type == T.ANS_ERROR and ans.kind == E.NOTFOUND) or \
        (ans.abnormal == 1 and ans.bytes_total == 0), ans


# ---- 7. the protocol -----------------------------------------------------------------

SNAP = "ss-" + "0" * 32
W = mh_wire.Writer
PROTOCOL = dict(mh_wire.VIOLATIONS, **{  # and the rows the core does not serve
    t.name: encode(Msg(t, 99, **kw)) for t, kw in (
        (T.REQ_CREATE, dict(volume_id=VOL, size_bytes=MiB)), (T.REQ_DELETE, dict(volume_id=VOL)),
        (T.REQ_RESIZE, dict(volume_id=VOL, size_bytes=128 * MiB)),
        (T.REQ_SNAPSHOT, dict(snapshot_id=SNAP, volume_id=VOL)),
        (T.REQ_DELETE_SNAPSHOT, dict(snapshot_id=SNAP)),
        (T.REQ_CLONE, dict(volume_id=VOL2, source_kind=mh_wire.SRC_VOLUME, source_id=VOL)),
        (T.REQ_CAPACITY, {}),
        (T.REQ_DIR_CREATE, dict(volume_id=VOL, base="/b", name="d")),
        (T.REQ_DIR_DELETE, dict(volume_id=VOL, base="/b", name="d")),
        (T.REQ_DIR_PUBLISH, dict(volume_id=VOL, base="/b", name="d", path="/t")),
        # its reader's rows: the core links neither their handlers nor their codecs
        (T.REQ_STATS, dict(volume_id=VOL, path="/t", flags=0)),
        (T.REQ_LIST, dict(what=mh_wire.LIST_MOUNTS, after="")),
        (T.REQ_STAGE_CHECK, dict(volume_id=VOL, staging_path="/t", fs_type="ext4",
                                 mount_flags="", mkfs_options="", readonly=0, flags=0, gid=0)),
        (T.ANS_STAGE, {}))},
    **{"NUL in path": mh_wire.raw(T.REQ_UNSTAGE, 98, W().str(VOL).str(b"/tmp/\0x").u8(0)
                                  .bytes()),
       "over-long path": mh_wire.raw(T.REQ_UNSTAGE, 98, W().str(VOL).str(
           b"/" + b"p" * mh_wire.PATH_MAX).u8(0).bytes()),
       "path longer than sent": mh_wire.raw(T.REQ_UNSTAGE, 98, W().str(VOL).str(
           b"/tmp", 4000).u8(0).bytes())})
ENDS = {"close": 0, "shutdown": 0, "SIGTERM": 0}


@pytest.mark.parametrize("name", sorted(PROTOCOL) + sorted(ENDS))
def test_violation_or_end_ends_the_core_and_undoes_nothing(core, name):
    """Exit 3 for a violation (logged), 0 for the end of the channel or SIGTERM; a
    staged volume stays staged (and its image in place: DELETE is no row of the core)."""
    core.image(VOL)
    core.ok(stage(VOL, core.dir("staging/v1")))
    before = core.state()
    if name == "close":
        core.sock.close()
    elif name == "shutdown":
        core.sock.shutdown(socket.SHUT_WR)
    elif name == "SIGTERM":
        core.proc.send_signal(signal.SIGTERM)
    else:
        core.sock.send(PROTOCOL[name])
    assert core.proc.wait(10) == ENDS.get(name, 3)
    assert ("protocol_violation" in core.logs()) == (name not in ENDS)
    after = core.state()
    assert (after[0], after[2], after[3]) == (before[0], before[2], before[3])


def test_many_requests_in_flight_are_answered_in_order(core):
    """Requests sent without waiting (as a flood would) are answered one by one, in
    order, and none is lost."""
    core.image(VOL)
    st = core.dir("staging/v1")
    msgs = [Msg(T.REQ_ATTACHED, volume_id=VOL), Msg(T.REQ_PING), unstage(VOL, st)] * 30
    for i, m in enumerate(msgs):
        m.id = 1000 + i
        core.sock.send(encode(m))
    core.sock.settimeout(20)
    for i in range(len(msgs)):
        assert decode(core.sock.recv(mh_wire.MSG_MAX + 1)).id == 1000 + i
    core.alive()


# ---- 8. what else a STAGE could be made to do ---------------------------------------

def test_stage_mounts_only_what_it_may(core):
    """Options, types, ids and flags outside the policy and the row are refused; a
    blank image, or a file system of another type than asked, fails at its mount
    (the core never formats), leaving no device, no directory, the image blank."""
    core.image(VOL)
    core.image(VOL2, fs=None)
    st, pods = core.dir("staging/v1"), core.dir("pods/p1")
    for opts in ("suid", "dev", "exec", "bind", "remount", "loop", "user", "nosuid,suid",
                 "rw,dev", "errors=panic", "x-mount.mkdir"):
        core.unchanged(stage(VOL, st, mount_flags=opts), E.REFUSED)
    for fs in ("tmpfs", "proc", "nfs", "ext2", "../ext4", "EXT4"):
        core.unchanged(stage(VOL, st, fs=fs), E.REFUSED)
    for vid in ("sv-" + "0" * 31, "sv-" + "A" * 32, "sv-../../../../etc/passwd", "",
                "ss-" + "0" * 32, VOL + "/"):
        core.unchanged(stage(vid, st), E.REFUSED)
    core.unchanged(stage(VOL, st, flags=F_REMOVE_DIR), E.REFUSED)
    core.unchanged(stage(VOL, st, fs="", flags=F_BLOCK, mount_flags="ro"), E.REFUSED)
    core.unchanged(unstage(VOL, st, flags=F_CREATE_DIR), E.REFUSED)
    core.unchanged(stage(VOL2, st), E.FAILED)
    core.unchanged(stage(VOL2, os.path.join(pods, "eph"), flags=F_CREATE_DIR), E.FAILED)
    core.unchanged(stage(VOL, st, fs="xfs"), E.FAILED)
    with open(core.img(VOL2), "rb") as f:
        assert f.read(1 << 16) == bytes(1 << 16)  # still blank


def test_image_the_core_cannot_read_is_refused_without_harm(core):
    """The owner can take its own images away from the core (chmod): the core then
    fails, and a staged volume stays staged until the owner gives access back."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    os.chmod(img, 0o600)
    core.unchanged(unstage(VOL, st), E.FAILED)
    os.chmod(core.images, 0o700)
    core.unchanged(stage(VOL, st), E.FAILED)
    os.chmod(core.images, 0o750)
    os.chmod(img, 0o660)
    core.ok(unstage(VOL, st))


def test_a_tenants_stalled_fuse_daemon_never_holds_the_core(core):
    """A pod's FUSE volume in kubelet's tree, its daemon (the tenant's) no longer
    answering: the single-threaded core must not wait for it, or nothing else is served.
    A path is looked into only once its file system is known to answer for itself
    (mh_mount_check_local: the mount's type, asked without a call into it); before
    that, a request naming a path on or beneath that mount (STATS, UNSTAGE, UNPUBLISH,
    EXPAND, STAGE, PUBLISH alike) waited for the daemon forever (fstat/openat2 of the
    FUSE root, whose owner and mode the daemon itself reports, root's 0755 here)."""
    core.image(VOL, fs=None)
    st = core.dir("blk/v1")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    fs, sub = fuse_subpath(core.root, "pod-fuse")
    mnt = core.path("root/pods/pod-fuse/volumes/kubernetes.io~csi/fusepv/mount")
    fs.stall()
    try:
        core.ok(unstage(VOL, st, flags=F_BLOCK))  # looks at every bind on the node
        for msg in (stats(VOL, mnt), unstage(VOL, mnt + "/sub"), unpublish(VOL, sub)):
            core.call(msg, timeout=10)
            core.alive()
    finally:
        fs.close()


def freeze(vid, seconds):
    return Msg(T.REQ_FREEZE, volume_id=vid, seconds=seconds)


def writer(path):
    """A write and fsync of path, started now; frozen if it has not finished soon."""
    return subprocess.Popen(["sh", "-c", "echo x > '%s' && sync '%s'" % (path, path)])


def held(w, seconds=0.5):
    """w is still waiting after seconds (its file system is frozen)."""
    time.sleep(seconds)
    return w.poll() is None


def xfs_groups(path):
    """(allocation groups, bytes a group) of the xfs mounted at path."""
    out = subprocess.run(["xfs_info", path], capture_output=True, text=True, check=True).stdout
    return (int(out.split("agcount=")[1].split(",")[0]),
            int(out.split("agsize=")[1].split()[0]) * int(out.split("bsize=")[1].split()[0]))


def agcount(path):
    return xfs_groups(path)[0]


def test_an_xfs_grows_by_bounded_steps_so_the_core_is_never_held_long(core):
    """Found by a hostile review: the image's size is its owner's to choose, and the
    kernel sets up each new xfs allocation group in the grow ioctl's thread (a 512 MiB
    xfs grown to 15 TiB held the core's one thread for 100 s, every other volume's
    request and freeze deadline with it). An EXPAND adds 1,024 groups at most and answers
    BUSY (EINPROGRESS) while more are left; the orchestrator asks again, each step its
    own request, until the file system fills its device."""
    img = core.image(VOL, fs="xfs", size=512 * MiB)
    st = core.dir("staging/big")
    core.ok(stage(VOL, st, fs="xfs"))
    groups, group = xfs_groups(st)
    with open(img, "r+b") as f:
        f.truncate(groups * group + 1100 * group)  # 1,100 groups more
    a = core.call(expand(VOL, st))
    assert a.type == T.ANS_ERROR and a.kind == E.BUSY and a.sys_errno == errno.EINPROGRESS, a
    assert agcount(st) == groups + 1024
    core.ok(Msg(T.REQ_PING))  # every other request is served between the steps
    grown = core.ok(expand(VOL, st))
    assert agcount(st) == groups + 1100 and grown.size_bytes == os.stat(img).st_size
    core.ok(expand(VOL, st))  # it fills its device: nothing left to do
    # Never past 65,536 groups in all (a step's time grows with the groups there are):
    # refused before anything grows.
    with open(img, "r+b") as f:
        f.truncate(65536 * group)
    a = core.call(expand(VOL, st))
    assert a.type == T.ANS_ERROR and a.kind == E.REFUSED and a.sys_errno == errno.EFBIG, a
    assert agcount(st) == groups + 1100
    core.ok(unstage(VOL, st))


def test_a_freeze_never_outlives_its_deadline(core):
    """FREEZE holds only the volume's own file system, and the core thaws it itself:
    at the deadline asked (never past the policy's freeze_max_seconds), with no THAW
    ever sent and no request to wake it; THAW thaws only what it froze."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    core.ok(freeze(VOL, 10))  # long enough to be seen held on any machine
    assert core.call(freeze(VOL, 2)).kind == E.BUSY  # frozen already
    w = writer(os.path.join(st, "f"))
    assert held(w)
    assert w.wait(30) == 0  # let go by the core alone, at the deadline
    assert "its deadline passed" in core.logs()
    core.ok(freeze(VOL, 3600))  # the default policy's limit is 60 s
    w = writer(os.path.join(st, "g"))
    assert held(w)
    core.ok(Msg(T.REQ_THAW, volume_id=VOL))
    assert w.wait(30) == 0
    core.ok(Msg(T.REQ_THAW, volume_id=VOL))  # nothing frozen: nothing to do
    for bad in (freeze(VOL, 0), freeze(VOL, 3601)):
        core.harmless(bad, E.REFUSED)
    core.ok(unstage(VOL, st))
    core.harmless(freeze(VOL, 5), E.PRECONDITION)  # no file system mounted


def mmp_in_use(img):
    """Make img an ext4 whose multi-mount protection says another node is using it:
    the kernel's mount then sleeps twice, each time twice its check interval and a
    second (22 s in all at the shortest), in the mounting thread before it mounts: the
    core's request thread. (No checksum to keep: made without metadata_csum.)"""
    subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "mmp,^metadata_csum", img], check=True)
    out = subprocess.run(["dumpe2fs", "-h", img], capture_output=True, text=True,
                         check=True).stdout
    block = int(out.split("MMP block number:")[1].split()[0])
    size = int(out.split("Block size:")[1].split()[0])
    with open(img, "r+b") as f:
        f.seek(block * size + 4)  # mmp_seq: neither clean nor fsck's, so another node's
        f.write((1).to_bytes(4, "little"))


def test_a_freeze_is_let_go_at_its_deadline_while_a_slow_mount_holds_the_core(core):
    """Found by a hostile review: an image's content is its owner's, and a mount can be
    made as slow as its owner likes (an ext4 whose MMP block says another node uses it
    sleeps in the mounting thread; a crafted journal keeps the kernel busy for minutes,
    past any signal). With the deadlines kept by the core's one thread between requests,
    another volume's freeze outlived its deadline for as long as that STAGE ran. A
    freeze's deadline is kept apart from the requests: the file system is thawed while
    the STAGE still runs."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    slow = core.image(VOL2, fs=None)
    mmp_in_use(slow)
    st2 = core.dir("staging/v2")
    core.ok(freeze(VOL, 1))
    w = writer(os.path.join(st, "f"))
    msg = stage(VOL2, st2)
    msg.id, core.next_id = core.next_id, core.next_id + 1
    core.sock.send(encode(msg))
    assert w.wait(15) == 0  # thawed at its deadline, the STAGE still asleep
    assert select.select([core.sock], [], [], 0)[0] == []  # no answer to it yet
    # The thread logs just after its FITHAW, which the writer may outrun: looked for
    # until it is there (the STAGE sleeps 22 s whatever the machine's speed).
    deadline = time.monotonic() + 10
    while "its deadline passed" not in core.logs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "its deadline passed" in core.logs()
    core.sock.settimeout(120)
    ans = decode(core.sock.recv(mh_wire.MSG_MAX + 1))
    assert ans.id == msg.id and ans.type == T.ANS_STAGE, ans
    core.ok(unstage(VOL2, st2))
    core.ok(unstage(VOL, st))


def test_freeze_touches_no_other_file_system(core):
    """A file system mounted at the volume's staging path by someone else (root's own
    loop device of the owner's image), or a volume that is not staged: refused, and
    nothing is frozen."""
    img = core.image(VOL)
    st = core.dir("staging/v1")
    dev = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                         check=True).stdout.strip()
    try:
        subprocess.run(["mount", dev, st], check=True)
        core.harmless(freeze(VOL, 5), E.PRECONDITION)
        assert writer(os.path.join(st, "f")).wait(30) == 0
    finally:
        subprocess.run(["umount", st], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)


def test_a_core_killed_while_frozen_is_thawed_by_the_next(fresh):
    """kill -9 of the core with a volume frozen: the freeze outlives the process, and
    the next core thaws it before it serves (mh_sweep.c)."""
    fresh.image(VOL)
    core = fresh.start()
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    core.ok(freeze(VOL, 60))
    os.killpg(core.proc.pid, signal.SIGKILL)
    core.proc.wait(10)
    core.sock.close()
    core.log.close()
    w = writer(os.path.join(st, "f"))
    assert held(w)  # the freeze outlived its core
    core.start()
    assert w.wait(30) == 0
    assert "thawed" in core.logs()
    core.ok(unstage(VOL, st))


def owner_changes(d, how):
    """What the owner of directory d (the orchestrating side) may make of it, as that uid:
    its group and mode, so that uid 0 without capabilities cannot search it."""
    mode, gid = {"mode 0700": (0o700, 0), "group its own": (0o2750, OWNER),
                 "mode 0": (0, 0)}[how]
    for cmd in (["chgrp", str(gid)], ["chmod", "%o" % mode]):
        subprocess.run(["setpriv", "--reuid", str(OWNER), "--regid", str(OWNER),
                        "--clear-groups"] + cmd + [d], check=True)


def test_the_core_makes_nothing_in_its_data_directory(fresh):
    """images/ and audit.log are its starter's, opened in the core's view before the exec
    (mh_relay.c) once the helper made the data directory and handed images/ to its owner
    (test_helper_identity.py: and gives them back their mode at every start): the core
    makes, hands and repairs nothing there. Its audit file must be a root-only regular
    file, or it does not start."""
    before = os.listdir(fresh.data)
    fresh.start()
    fresh.ok(Msg(T.REQ_PING))
    fresh.stop()
    made = set(os.listdir(fresh.data)) - set(before)
    assert made <= {"audit.log", "test-pause"}, made  # the starter's, the tests' pause points
    st = os.stat(fresh.images)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (OWNER, 0, 0o2750)
    os.chmod(fresh.path("data/audit.log"), 0o640)
    fresh.spawn(fresh.compiled())
    assert fresh.proc.wait(10) == 1
    assert "is not audit.log" in fresh.logs()


@pytest.mark.parametrize("how", ["mode 0700", "group its own", "mode 0"])
def test_the_reader_starts_before_the_core_repairs_its_images_directory(fresh, how):
    """The reader's Landlock rule for the images directory is the descriptor it is handed,
    not a name looked up in it: the owner may have taken the search permission away from
    uid 0 without capabilities (the helper gives it back at its start: a reader started
    before that still works), and the reader still starts and answers."""
    fresh.start().stop()
    owner_changes(fresh.images, how)
    fresh.spawn_reader()
    assert fresh.call(Msg(T.REQ_PING), timeout=5, to=fresh.rsock).type == T.ANS_PING
    assert fresh.reader.poll() is None


def confined_but(**change):
    """The starter's command with some of its settings changed (None: left out)."""
    opts = dict(a.split("=", 1) if "=" in a else (a, None) for a in CONFINED[1:])
    opts.update(change)
    return ["setpriv"] + [k if v is None else k + "=" + v for k, v in opts.items()
                          if k not in change or change[k] is not None]


@pytest.mark.parametrize("starter", ["unconfined", "one more", "without no_new_privs",
                                     "securebits unlocked", "one less"])
def test_a_core_its_starter_did_not_confine_is_no_start(fresh, starter):
    """Its capabilities are set by its starter before the exec: a core that finds any
    set other than its policy's (root's full sets, one capability more or less),
    no_new_privs off or the securebits not locked ends with exit 1 before it serves
    anything, and says why."""
    more = CORE_CAPS + ",+dac_override"
    less = "-all,+chown,+sys_admin"
    prefix = {"unconfined": [],
              "one more": confined_but(**{"--bounding-set": more, "--inh-caps": more,
                                          "--ambient-caps": more}),
              "without no_new_privs": confined_but(**{"--no-new-privs": None}),
              "securebits unlocked": confined_but(**{"--securebits": "+noroot"}),
              "one less": confined_but(**{"--bounding-set": less, "--inh-caps": less,
                                          "--ambient-caps": less})}[starter]
    fresh.spawn(fresh.compiled(), starter=prefix)
    assert fresh.proc.wait(20) == 1
    fresh.sock.close()
    fresh.log.close()
    assert "did not confine it" in fresh.logs()
    fresh.proc = None


def test_a_policy_it_cannot_read_whole_is_no_start(fresh):
    """The core reads its policy compiled (it links no parser of the file): one cut
    short, or not compiled at all, ends it with exit 2 before it serves anything."""
    good = fresh.compiled()
    whole = os.read(good, 1 << 16)
    os.close(good)
    for bad in (whole[:-1], whole + b"x", b"[paths]\nallowed_roots = /\n"):
        r, w = os.pipe()
        os.write(w, bad)
        os.close(w)
        fresh.spawn(r)
        assert fresh.proc.wait(20) == 2
        fresh.sock.close()
        fresh.log.close()
        assert "compiled policy" in fresh.logs()
    fresh.proc = None


def test_a_raw_device_left_unused_is_detached_by_the_next_core(fresh):
    """A core killed with a raw block volume's loop device attached and nothing using it
    any more (here root took the bind away, as a crash between the attach and the bind
    leaves it): the next core detaches it at start, and only that one, never a device
    still bound."""
    fresh.image(VOL, fs=None)
    fresh.image(VOL2, fs=None)
    core = fresh.start()
    st, st2 = core.dir("blk/v1"), core.dir("blk/v2")
    core.ok(stage(VOL, st, fs="", flags=F_BLOCK))
    core.ok(stage(VOL2, st2, fs="", flags=F_BLOCK))
    os.killpg(core.proc.pid, signal.SIGKILL)
    core.proc.wait(10)
    core.sock.close()
    core.log.close()
    subprocess.run(["umount", os.path.join(st, "dev")], check=True)
    assert len(loops_of(core.img(VOL))) == 1
    core.start()
    assert loops_of(core.img(VOL)) == []
    assert len(loops_of(core.img(VOL2))) == 1  # still bound: kept
    core.ok(unstage(VOL, st, flags=F_BLOCK))
    core.ok(unstage(VOL2, st2, flags=F_BLOCK))
    assert loops_of(core.img(VOL2)) == []


def test_unstage_thaws_what_the_core_froze(core):
    """UNSTAGE of a volume the core froze thaws it first: otherwise the frozen
    superblock would keep the loop device attached until the freeze's deadline."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    core.ok(freeze(VOL, 60))
    core.ok(unstage(VOL, st))
    deadline = time.monotonic() + 10
    while loops_of(core.img(VOL)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loops_of(core.img(VOL)) == []
    assert "the volume is being unstaged" in core.logs()


def test_a_violation_leaves_nothing_frozen(core):
    """A peer that freezes a volume and then breaks the protocol ends the core (exit 3),
    and the core thaws what it froze before it goes."""
    core.image(VOL)
    st = core.dir("staging/v1")
    core.ok(stage(VOL, st))
    core.ok(freeze(VOL, 60))
    w = writer(os.path.join(st, "f"))
    assert held(w)
    core.sock.send(mh_wire.VIOLATIONS["empty"])
    assert core.proc.wait(20) == 3
    assert w.wait(30) == 0
