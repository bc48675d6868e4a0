"""Attacks on BLOCKS (the helper's snapshot-metadata request) and on the CSI
SnapshotMetadata service built on it, as the three attackers of docs/security.md
would try them:

 - a compromised rpcd speaking the helper protocol (hostile.py): ids that are paths
   or name a volume, a base without DELTA, offsets past the end, objects planted in
   the snapshots directory, floods of concurrent requests, requests racing
   DELETE_SNAPSHOT and a re-created snapshot;
 - a tenant whose bytes are the snapshot images' content: many tiny extents,
   unwritten (zeroed) extents beside data, blocks rewritten with the same bytes;
 - a CSI client: hostile offsets, max_results and ids, streams cancelled midway,
   many streams at once, a snapshot deleted mid-stream, a stop with streams open.

Every test asserts the safe behaviour: a failure is a finding."""
import ctypes
import os
import random
import resource
import stat
import threading
import time

import grpc
import pytest

import mh_wire
from conftest import Driver, running
from csi_client import block_cap
from mh_wire import E, Msg, T
from test_controller_snapshots import Staged, create, snap
from test_snapshot_metadata import (BLOCK, allocated, blocks_of, data_blocks, delta,
                                    differing_blocks, ext4_data_dir, loop_data_dir,
                                    ranges_of, xfs_reflink_data_dir)

MiB = 1 << 20
HELPER = "sepcsi-mounthel"
RPCD = "sepcsi-rpcd"
VOL = "sv-" + "a" * 32
VOL2 = "sv-" + "b" * 32
S1 = "ss-" + "1" * 32
S2 = "ss-" + "2" * 32
S3 = "ss-" + "3" * 32

_libc = ctypes.CDLL(None, use_errno=True)
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 0x01, 0x02, 0x10


def fallocate(fd, mode, off, length):
    _libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                                ctypes.c_longlong]
    if _libc.fallocate(fd, mode, off, length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# ---- a compromised rpcd --------------------------------------------------------------


@pytest.fixture(params=["reflink", "copy"])
def hostile_blocks(request):
    """A hostile stand-in rpcd over the real helper, on an xfs that reflinks or an ext4."""
    import hostile
    setup = xfs_reflink_data_dir if request.param == "reflink" else ext4_data_dir
    hd = hostile.HostileDriver(setup=setup)
    hd.kind = request.param
    yield from running(hd)


def blocks(r, what, sid, base="", offset=0, timeout=60):
    return r.call(Msg(T.REQ_BLOCKS, what=what, snapshot_id=sid, base_id=base, offset=offset),
                  timeout)


def page_well_formed(a, size, offset):
    """What rpcd relies on: ranges ascending, disjoint, non-empty, within the image, of
    whole blocks but the last, the first ending after offset, next moving on."""
    assert a.type == T.ANS_BLOCKS, a
    assert a.size_bytes == size
    assert len(a.ranges) <= mh_wire.BLOCKS_MAX
    end = None
    for i, (s, n) in enumerate(a.ranges):
        assert n > 0 and s + n <= size, (s, n)
        assert s % BLOCK == 0 and (n % BLOCK == 0 or s + n == size), (s, n)
        if i == 0:
            assert s + n > offset and s >= offset - offset % BLOCK, (s, n, offset)
        else:
            assert s >= end, "ranges overlap or go back: %r" % (a.ranges[i - 1:i + 1],)
        end = s + n
    assert a.next == size or (a.next > offset and (end is None or a.next >= end)), a.next


def walk(r, what, sid, size, base="", offset=0):
    """Every page from offset on, as rpcd pages; each checked; bounded in number."""
    out, pages = [], 0
    while True:
        a = blocks(r, what, sid, base, offset)
        page_well_formed(a, size, offset)
        for s, n in a.ranges:
            if out:
                assert out[-1][0] + out[-1][1] <= s, "pages overlap"
            out.append((s, n))
        pages += 1
        assert pages <= size // BLOCK + 2, "paging does not end"
        if a.next == size:
            return out, pages
        offset = a.next


def image_path(d, sid):
    return os.path.join(d.data, "snapshots", sid + ".img")


def vol_path(d, vid):
    return os.path.join(d.data, "images", vid + ".img")


def make_vol(r, vid, size):
    a = r.call(Msg(T.REQ_CREATE, volume_id=vid, size_bytes=size))
    assert a.type == T.ANS_CREATE, a


def make_snap(r, sid, vid):
    a = r.call(Msg(T.REQ_SNAPSHOT, volume_id=vid, snapshot_id=sid), 120)
    assert a.type == T.ANS_SNAPSHOT, a
    return a


def tenant_writes(path, blocks_, rnd, data=None):
    """What a tenant's writes leave in its image: blocks of random (or given) bytes."""
    with open(path, "r+b", buffering=0) as f:
        for b in sorted(blocks_):
            f.seek(b * BLOCK)
            f.write(data if data is not None else rnd.randbytes(BLOCK))
        os.fsync(f.fileno())


def helper_and_rpcd(hd):
    ch = hd.children()
    return ch.get(HELPER), ch.get(RPCD)


def test_ids_offsets_and_kinds_are_refused(hostile_blocks):
    """Ids that are paths or a volume's, a base without DELTA, DELTA without a base,
    offsets past the end: refused or not found, no violation, nothing read."""
    hd, r = hostile_blocks, hostile_blocks.rpcd
    size = 8 * MiB
    make_vol(r, VOL, size)
    tenant_writes(vol_path(hd.driver, VOL), {0, 7, 100}, random.Random(1))
    make_snap(r, S1, VOL)
    before = helper_and_rpcd(hd)
    A, D = mh_wire.BLOCKS_ALLOCATED, mh_wire.BLOCKS_DELTA
    cases = [
        ((A, VOL), E.REFUSED),                                   # a volume id as the snapshot
        ((D, S1, VOL), E.REFUSED),                               # a volume id as the base
        ((A, "ss-../../images/" + VOL), E.REFUSED),
        ((A, "../images/" + VOL), E.REFUSED),
        ((A, "ss-" + "1" * 31 + "/"), E.REFUSED),
        ((A, "SS-" + "1" * 32), E.REFUSED),
        ((A, ""), E.REFUSED),
        ((A, S1, S1), E.REFUSED),                                # a base without DELTA
        ((D, S1, ""), E.REFUSED),                                # DELTA without a base
        ((D, S1, "ss-../" + S1[3:]), E.REFUSED),
        ((A, "ss-" + "9" * 32), E.NOTFOUND),
        ((D, S1, "ss-" + "9" * 32), E.NOTFOUND),
        ((A, S1, "", size + 1), E.REFUSED),
        ((A, S1, "", (1 << 64) - 1), E.REFUSED),
        ((D, S1, S1, 1 << 63), E.REFUSED),
    ]
    for args, kind in cases:
        a = blocks(r, *args)
        assert a.type == T.ANS_ERROR and a.kind == kind, (args, a)
    # The right ones still work, and say exactly the blocks written.
    got, _ = walk(r, A, S1, size)
    assert blocks_of(got) == {0, 7, 100}
    got, _ = walk(r, D, S1, size, base=S1)
    assert got == []
    assert helper_and_rpcd(hd) == before, "a violation or a crash"
    assert r.ping()


def test_every_offset_gives_a_well_formed_page(hostile_blocks):
    """Offsets at, inside and around ranges and blocks: every page well formed, and the
    pages from any offset on are the tail of the pages from 0."""
    hd, r, rnd = hostile_blocks, hostile_blocks.rpcd, random.Random(2)
    size = 4 * MiB + 3 * BLOCK  # not a multiple of the window nor of a MiB
    make_vol(r, VOL, size)
    path = vol_path(hd.driver, VOL)
    first = set(range(0, 1024, 2)) | {1025, 1026, size // BLOCK - 1}
    tenant_writes(path, first, rnd)
    make_snap(r, S1, VOL)
    tenant_writes(path, set(range(0, 300, 6)) | {1020}, rnd)
    make_snap(r, S2, VOL)
    i1, i2 = image_path(hd.driver, S1), image_path(hd.driver, S2)
    A, D = mh_wire.BLOCKS_ALLOCATED, mh_wire.BLOCKS_DELTA
    full_a, pages = walk(r, A, S1, size)
    assert pages >= 2 and blocks_of(full_a) == data_blocks(i1)
    full_d, _ = walk(r, D, S2, size, base=S1)
    assert blocks_of(full_d) == differing_blocks(i1, i2)
    for off in (1, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 1025 * BLOCK + 5, size - BLOCK,
                size - 1, size):
        for what, base, full in ((A, "", full_a), (D, S1, full_d)):
            tail, _ = walk(r, what, S2 if what == D else S1, size, base=base, offset=off)
            want = [x for x in full if x[0] + x[1] > off]
            # the first may start at its block rather than at the range's start
            if tail and want:
                assert tail[0][0] + tail[0][1] == want[0][0] + want[0][1]
                assert tail[0][0] <= off < tail[0][0] + tail[0][1] or tail[0] == want[0]
                assert tail[1:] == want[1:], (what, off)
            else:
                assert tail == want, (what, off)
    assert r.ping()


def test_planted_objects_are_not_read(hostile_blocks):
    """What only root could plant in snapshots/ (a symlink to a volume's image or to
    /etc/passwd, a FIFO, a directory, a hard link to a file not the helper's) is refused,
    at once (a FIFO must not hold a worker), and nothing is changed."""
    hd, r = hostile_blocks, hostile_blocks.rpcd
    d = hd.driver
    make_vol(r, VOL, 8 * MiB)
    tenant_writes(vol_path(d, VOL), {3}, random.Random(3))
    make_snap(r, S1, VOL)
    snaps = os.path.join(d.data, "snapshots")
    outside = os.path.join(d.tmp, "outside")
    with open(outside, "wb") as f:
        f.write(b"x" * 3 * BLOCK)
    ids = ["ss-" + c * 32 for c in "abcdef"]
    os.symlink(vol_path(d, VOL), os.path.join(snaps, ids[0] + ".img"))
    os.symlink("/etc/passwd", os.path.join(snaps, ids[1] + ".img"))
    os.mkfifo(os.path.join(snaps, ids[2] + ".img"))
    os.mkdir(os.path.join(snaps, ids[3] + ".img"))
    try:
        os.link(outside, os.path.join(snaps, ids[4] + ".img"))  # root's, not the helper's
    except OSError:  # another file system: the same file, copied, root's
        with open(os.path.join(snaps, ids[4] + ".img"), "wb") as f:
            f.write(b"x" * 3 * BLOCK)
    before = {p: os.lstat(os.path.join(snaps, p)) for p in os.listdir(snaps)}
    mtime = os.stat(vol_path(d, VOL)).st_mtime_ns
    for sid in ids[:5]:
        for what, base in ((mh_wire.BLOCKS_ALLOCATED, ""), (mh_wire.BLOCKS_DELTA, S1)):
            a = blocks(r, what, sid, base, timeout=60)  # answered: no worker is held
            assert a.type == T.ANS_ERROR and a.kind in (E.FAILED, E.REFUSED, E.NOTFOUND), \
                (sid, a)
        # and as the base
        a = blocks(r, mh_wire.BLOCKS_DELTA, S1, sid, timeout=20)
        assert a.type == T.ANS_ERROR, (sid, a)
    after = {p: os.lstat(os.path.join(snaps, p)) for p in os.listdir(snaps)}
    assert {p: (s.st_ino, s.st_mode, s.st_size) for p, s in before.items()} == \
        {p: (s.st_ino, s.st_mode, s.st_size) for p, s in after.items()}
    assert os.stat(vol_path(d, VOL)).st_mtime_ns == mtime
    assert r.ping()


def test_a_flood_of_pages_neither_hangs_nor_crashes(hostile_blocks):
    """64 DELTA pages (each reading the images) and 64 ALLOCATED at once: each gets exactly
    one answer, BLOCKS or BUSY; PING is answered meanwhile; no worker or job is left."""
    hd, r, rnd = hostile_blocks, hostile_blocks.rpcd, random.Random(4)
    size = 96 * MiB
    make_vol(r, VOL, size)
    path = vol_path(hd.driver, VOL)
    with open(path, "r+b") as f:  # a copied pair reads all of this
        f.write(rnd.randbytes(48 * MiB))
        os.fsync(f.fileno())
    make_snap(r, S1, VOL)
    tenant_writes(path, set(range(0, 12000, 3)), rnd)
    make_snap(r, S2, VOL)
    helper, rpcd = helper_and_rpcd(hd)
    ids = []
    for i in range(128):
        what = mh_wire.BLOCKS_DELTA if i % 2 else mh_wire.BLOCKS_ALLOCATED
        ids.append(r.send(Msg(T.REQ_BLOCKS, what=what, snapshot_id=S2,
                              base_id=S1 if i % 2 else "", offset=(i * BLOCK) % size)))
    ping_id = r.send(Msg(T.REQ_PING))
    answers, pinged = {}, False
    deadline = time.monotonic() + 240
    while len(answers) < len(ids) or not pinged:
        a = r.recv(max(1, deadline - time.monotonic()))
        if a.id == ping_id:
            pinged = True  # the main loop answers PING itself, whatever the workers do
            continue
        assert a.id not in answers, "two answers to request %d" % a.id
        answers[a.id] = a
    kinds = {}
    for i, id_ in enumerate(ids):
        a = answers[id_]
        if a.type == T.ANS_ERROR:
            assert a.kind == E.BUSY, a
            kinds["busy"] = kinds.get("busy", 0) + 1
        else:
            page_well_formed(a, size, (i * BLOCK) % size)
            kinds["ok"] = kinds.get("ok", 0) + 1
    assert kinds.get("ok", 0) >= 4  # at most 4 read at once; the rest are BUSY
    assert helper_and_rpcd(hd) == (helper, rpcd)
    # Nothing left behind: the runner's job children are gone, the workers idle down.
    time.sleep(7)
    runner = [p for p in _descendants(helper) if _comm(p) == "sepcsi-runner"]
    assert len(runner) <= 2, "runner processes left: %r" % runner
    assert r.ping()


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def _descendants(pid):
    from conftest import descendants
    return descendants(pid)


def test_at_most_four_reads_at_once():
    """Pages held in the helper (a test pause point): a fifth BLOCKS is BUSY at once
    (EAGAIN), and the volumes' own requests still find a worker."""
    import hostile
    for hd in running(hostile.HostileDriver(env={"SEPCSI_TEST_PAUSE": "1"})):
        r, d = hd.rpcd, hd.driver
        make_vol(r, VOL, 8 * MiB)
        make_snap(r, S1, VOL)
        d.hold("blocks@" + S1)
        ids = [r.send(Msg(T.REQ_BLOCKS, what=mh_wire.BLOCKS_ALLOCATED, snapshot_id=S1))
               for _ in range(4)]
        for _ in range(4):
            d.paused("blocks@" + S1)
        a = r.call(Msg(T.REQ_BLOCKS, what=mh_wire.BLOCKS_ALLOCATED, snapshot_id=S1))
        assert a.type == T.ANS_ERROR and a.kind == E.BUSY and a.sys_errno == 11, a
        assert "too many reads of snapshots" in a.reason
        assert r.call(Msg(T.REQ_CREATE, volume_id=VOL2, size_bytes=8 * MiB)).type == \
            T.ANS_CREATE
        d.release("blocks@" + S1)
        got = {}
        while len(got) < 4:
            m = r.recv(60)
            got[m.id] = m
        assert sorted(got) == sorted(ids)
        assert all(m.type == T.ANS_BLOCKS and m.ranges == () for m in got.values())


def test_race_with_delete_and_recreate(hostile_blocks):
    """Pages racing DELETE_SNAPSHOT of their target and base, and a snapshot re-created
    under the same id from another volume: every answer is either well formed for the
    image it opened or NOTFOUND; the delete is not held up; nothing is left open."""
    hd, r, rnd = hostile_blocks, hostile_blocks.rpcd, random.Random(5)
    size = 64 * MiB
    make_vol(r, VOL, size)
    make_vol(r, VOL2, 32 * MiB)
    path = vol_path(hd.driver, VOL)
    with open(path, "r+b") as f:
        f.write(rnd.randbytes(40 * MiB))
        os.fsync(f.fileno())
    tenant_writes(vol_path(hd.driver, VOL2), {5, 6, 7}, rnd)
    for rnd_i in range(3):
        make_snap(r, S1, VOL)
        tenant_writes(path, set(range(0, 9000, 5)), rnd)
        make_snap(r, S2, VOL)
        sent = [r.send(Msg(T.REQ_BLOCKS, what=mh_wire.BLOCKS_DELTA, snapshot_id=S2,
                           base_id=S1, offset=0)) for _ in range(6)]
        sent += [r.send(Msg(T.REQ_BLOCKS, what=mh_wire.BLOCKS_ALLOCATED, snapshot_id=S2,
                            offset=0)) for _ in range(4)]
        d1 = r.send(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=S2))
        d2 = r.send(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=S1))
        got = {}
        deadline = time.monotonic() + 120
        while len(got) < len(sent) + 2:
            a = r.recv(max(1, deadline - time.monotonic()))
            got[a.id] = a
        assert got[d1].type == T.ANS_DELETE_SNAPSHOT and got[d2].type == T.ANS_DELETE_SNAPSHOT
        for id_ in sent:
            a = got[id_]
            if a.type == T.ANS_ERROR:
                assert a.kind in (E.NOTFOUND, E.BUSY), a
            else:
                page_well_formed(a, size, 0)
        # Re-created from the other, smaller volume under the same id: what a page says
        # is about the image it opened, the new one, and within it.
        make_snap(r, S2, VOL2)
        a = blocks(r, mh_wire.BLOCKS_ALLOCATED, S2)
        page_well_formed(a, 32 * MiB, 0)
        assert blocks_of(a.ranges) == {5, 6, 7}
        r.call(Msg(T.REQ_DELETE_SNAPSHOT, snapshot_id=S2))
    assert not os.listdir(os.path.join(hd.driver.data, "snapshots"))
    assert r.ping()


# ---- a tenant ------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["reflink", "copy"])
def tdriver(request):
    setup = xfs_reflink_data_dir if request.param == "reflink" else ext4_data_dir
    for d in running(Driver(setup=setup, extra_args=["--snapshot-metadata", "on"])):
        d.kind = request.param
        yield d


def test_tenant_tiny_extents_unwritten_and_same_bytes(tdriver):
    """A tenant's raw device crafted for the runner: thousands of 4 KiB extents, runs of
    zeroed (unwritten) extents over data and over holes, blocks rewritten with their own
    bytes, explicit zeros over holes. Both calls agree exactly with the images, end, and
    take bounded time."""
    d, c, rnd = tdriver, tdriver.client, random.Random(6)
    size = 64 * MiB
    name = "tenant-x-" + d.kind
    v = create(c, name, block_cap(), size)
    st = Staged(d, v.volume_id, name, block_cap())
    dev = st.file("dev")
    try:
        nb = size // BLOCK
        frag = set(range(0, 8192, 2))                 # 4096 one-block extents: 8 pages
        with open(dev, "r+b", buffering=0) as f:
            for b in sorted(frag | set(range(9000, 9600))):
                f.seek(b * BLOCK)
                f.write(rnd.randbytes(BLOCK))
            os.fsync(f.fileno())
        s1 = snap(c, name + "-1", v.volume_id)
        fd = os.open(dev, os.O_RDWR)
        try:
            # Zero-out (unwritten extents on the backing file) over data and over holes,
            # every other block, and explicit zeros over holes.
            import fcntl
            BLKZEROOUT = 0x127f
            for b in list(range(9000, 9600, 2)) + list(range(12000, 12400, 2)):
                fcntl.ioctl(fd, BLKZEROOUT, (ctypes.c_uint64 * 2)(b * BLOCK, BLOCK))
            for b in range(13000, 13100, 2):
                os.pwrite(fd, bytes(BLOCK), b * BLOCK)
            # The same bytes again: a new extent, equal content.
            for b in range(0, 400, 2):
                os.pwrite(fd, os.pread(fd, BLOCK, b * BLOCK), b * BLOCK)
            for b in (1, 3, nb - 1):
                os.pwrite(fd, rnd.randbytes(BLOCK), b * BLOCK)
            os.fsync(fd)
        finally:
            os.close(fd)
        s2 = snap(c, name + "-2", v.volume_id)
        i1 = os.path.join(d.data, "snapshots", s1.snapshot_id + ".img")
        i2 = os.path.join(d.data, "snapshots", s2.snapshot_id + ".img")
        a1 = ranges_of(allocated(c, s1.snapshot_id), size)
        a2 = ranges_of(allocated(c, s2.snapshot_id, max_results=3), size, 3)
        dl = ranges_of(delta(c, s1.snapshot_id, s2.snapshot_id), size)
        assert blocks_of(a1) == data_blocks(i1)
        assert blocks_of(a2) == data_blocks(i2)
        truth = differing_blocks(i1, i2)
        assert blocks_of(dl) == truth, (sorted(blocks_of(dl) - truth)[:10],
                                        sorted(truth - blocks_of(dl))[:10])
        assert {1, 3, nb - 1} <= truth and not truth & set(range(0, 400, 2))
    finally:
        st.unstage()


# ---- a CSI client --------------------------------------------------------------------


@pytest.fixture(scope="module")
def cdriver():
    # Under AddressSanitizer, freed memory is held in quarantine (256 MiB): not here, so
    # that rpcd's resident size tells what it keeps.
    asan = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=0",
                                  "thread_local_quarantine_size_kb=0"]))
    for d in running(Driver(setup=xfs_reflink_data_dir, extra_args=["--snapshot-metadata", "on"],
                            env={"ASAN_OPTIONS": asan})):
        d.kind = "reflink"
        c = d.client
        size = 32 * MiB
        v = create(c, "cli-src", block_cap(), size)
        st = Staged(d, v.volume_id, "cli-src", block_cap())
        with open(st.file("dev"), "r+b", buffering=0) as f:
            rnd = random.Random(8)
            for b in range(0, 6000, 2):  # 3000 ranges: 6 pages, 3000 messages of one
                f.seek(b * BLOCK)
                f.write(rnd.randbytes(BLOCK))
            os.fsync(f.fileno())
        d.s1 = snap(c, "cli-s1", v.volume_id).snapshot_id
        with open(st.file("dev"), "r+b", buffering=0) as f:
            f.seek(100 * BLOCK)
            f.write(b"y" * BLOCK)
            os.fsync(f.fileno())
        d.s2 = snap(c, "cli-s2", v.volume_id).snapshot_id
        st.unstage()
        d.size, d.vid = size, v.volume_id
        yield d


def rpcd_pid(d):
    return d.children()[RPCD]


def proc_figures(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("Threads", "VmRSS"):
                out[k] = int(v.split()[0])
    out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    return out


def probe(c):
    """Probe is answered (a deadline for liveness, not a speed figure)."""
    return c.identity("Probe", timeout=30).ready.value


def test_hostile_arguments(cdriver):
    d, c = cdriver, cdriver.client
    S = grpc.StatusCode

    def code(fn, *a, **kw):
        with pytest.raises(grpc.RpcError) as e:
            fn(*a, **kw)
        return e.value.code()

    assert code(allocated, c, "x" * (1 << 20)) == S.NOT_FOUND
    assert code(delta, c, "ss-" + "f" * 32, "x" * 100000) == S.NOT_FOUND
    assert code(allocated, c, d.vid) == S.NOT_FOUND                 # a volume's id
    assert code(allocated, c, d.s1, offset=(1 << 63) - 1) == S.OUT_OF_RANGE
    assert code(allocated, c, d.s1, offset=-(1 << 63)) == S.OUT_OF_RANGE
    assert code(delta, c, d.s1, d.s2, max_results=-(1 << 31)) == S.INVALID_ARGUMENT
    # Extreme but valid: every range once, ascending, disjoint, within the capacity.
    full = ranges_of(allocated(c, d.s1, max_results=(1 << 31) - 1), d.size)
    assert len(full) == 3000
    for off in (d.size - 1, d.size - BLOCK, 6000 * BLOCK - 1, 5998 * BLOCK + 1):
        tail = ranges_of(allocated(c, d.s1, offset=off), d.size)
        assert all(o + n > off for o, n in tail)
        assert [x for x in full if x[0] + x[1] > off] == tail
    # The base being the target, and the order of two of a kind.
    assert ranges_of(delta(c, d.s2, d.s2), d.size) == []
    assert blocks_of(ranges_of(delta(c, d.s1, d.s2, max_results=1), d.size, 1)) == {100}


def test_cancelled_and_abandoned_streams_leak_nothing(cdriver):
    """Hundreds of streams cancelled after a message or two, or whose channel just goes:
    rpcd's threads, descriptors and memory stay put, and it still answers at once."""
    d = cdriver
    pid = rpcd_pid(d)
    import csi_client

    def churn(n):
        for i in range(n):
            cl = csi_client.CsiClient(d.endpoint)
            req = (cl.pb.GetMetadataDeltaRequest(base_snapshot_id=d.s1,
                                                 target_snapshot_id=d.s2, max_results=1)
                   if i % 2 else
                   cl.pb.GetMetadataAllocatedRequest(snapshot_id=d.s1, max_results=1))
            it = cl.stream_iter("SnapshotMetadata", "GetMetadataDelta" if i % 2 else
                                "GetMetadataAllocated", req, timeout=60)
            try:
                next(it)
                if i % 3 == 0:
                    next(it)
            except (StopIteration, grpc.RpcError):
                pass
            if i % 2 == 0:
                it.cancel()
            cl.close()  # the other half: the channel simply goes

    churn(30)  # warm up gRPC's own pools
    time.sleep(2)
    before = proc_figures(pid)
    churn(300)
    time.sleep(3)
    after = proc_figures(pid)
    assert rpcd_pid(d) == pid, "rpcd was restarted"
    assert after["Threads"] <= before["Threads"] + 2, (before, after)
    assert after["fds"] <= before["fds"] + 4, (before, after)
    assert after["VmRSS"] <= before["VmRSS"] + 16 * 1024, (before, after)
    assert probe(d.client)
    assert blocks_of(ranges_of(delta(d.client, d.s1, d.s2), d.size)) == {100}


def test_many_streams_at_once_do_not_starve_other_calls(cdriver):
    """64 streams open at once, read slowly or not at all: other CSI calls are answered
    promptly, and every stream that is read to its end is whole."""
    d = cdriver
    import csi_client
    clients, its = [], []
    for i in range(64):
        cl = csi_client.CsiClient(d.endpoint)
        its.append(cl.stream_iter("SnapshotMetadata", "GetMetadataAllocated", cl.pb.GetMetadataAllocatedRequest(snapshot_id=d.s1, max_results=1),
                       timeout=120))
        clients.append(cl)
    try:
        time.sleep(1)
        assert all(probe(d.client) for _ in range(5))
        got = d.client.controller("ListSnapshots", timeout=10)
        assert {s.snapshot.snapshot_id for s in got.entries} >= {d.s1, d.s2}
        # Read a few to the end, concurrently: whole and right.
        results = [None] * 4

        def read(k):
            results[k] = ranges_of(list(its[k]), d.size, 1)

        ts = [threading.Thread(target=read, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        for res in results:
            assert res is not None and len(res) == 3000
    finally:
        for it in its:
            it.cancel()
        for cl in clients:
            cl.close()
    time.sleep(1)
    assert probe(d.client)


def test_snapshot_deleted_mid_stream_ends_it(cdriver):
    """A target deleted while its stream runs: the stream ends NOT_FOUND, never OK with
    part of the ranges (a client would take a truncated list as complete)."""
    d, c = cdriver, cdriver.client
    sid = snap(c, "cli-doomed", d.vid).snapshot_id
    it = c.stream_iter("SnapshotMetadata", "GetMetadataAllocated", c.pb.GetMetadataAllocatedRequest(snapshot_id=sid, max_results=1), timeout=120)
    first = next(it)
    assert len(first.block_metadata) == 1
    c.controller("DeleteSnapshot", snapshot_id=sid)
    n = 1
    with pytest.raises(grpc.RpcError) as e:
        for _ in it:
            n += 1
    assert e.value.code() == grpc.StatusCode.NOT_FOUND, (e.value.code(), n)
    assert n < 3000


def test_stop_with_streams_open_is_prompt():
    """A driver stopped while clients hold streams open (read or not): rpcd and the
    supervisor stop in bounded time, without being killed."""
    for d in running(Driver(setup=xfs_reflink_data_dir, extra_args=["--snapshot-metadata", "on"])):
        c = d.client
        v = create(c, "stop-src", block_cap(), 64 * MiB)
        st = Staged(d, v.volume_id, "stop-src", block_cap())
        with open(st.file("dev"), "r+b", buffering=0) as f:
            for b in range(0, 16000, 2):  # 8000 ranges: 8000 messages of one, ~270 KB
                f.seek(b * BLOCK)
                f.write(b"z" * BLOCK)
            os.fsync(f.fileno())
        sid = snap(c, "stop-s", v.volume_id).snapshot_id
        st.unstage()
        import csi_client
        clients, its = [], []
        for i in range(16):
            cl = csi_client.CsiClient(d.endpoint)
            it = cl.stream_iter("SnapshotMetadata", "GetMetadataAllocated", cl.pb.GetMetadataAllocatedRequest(snapshot_id=sid, max_results=1),
                     timeout=300)
            if i % 2:
                next(it)
            its.append(it)
            clients.append(cl)
        time.sleep(1)
        t0 = time.monotonic()
        d.client.close()
        d.client = None
        os.kill(d.sup_pid(), 15)
        try:
            d.proc.wait(60)
        except Exception:
            pass
        took = time.monotonic() - t0
        for cl in clients:
            cl.close()
        logs = d.logs()
        print("stop took %.1f s" % took)
        assert "stop_timeout" not in logs, "a child had to be killed at stop"
        assert d.proc.returncode == 0, "the supervisor did not stop cleanly"


def big_ext4_data_dir(d):
    """The data directory on an ext4 of 8 GiB (sparse): every snapshot a copy."""
    loop_data_dir(d, ["mkfs.ext4", "-q"], 8192 * MiB)


def test_streams_waiting_for_pages_hold_no_worker():
    """Streams whose pages the helper is slow to read (held here at a test pause point:
    as a copied pair of unchanged data is, page after page) wait in rpcd's own
    streamer threads, never in its gRPC workers: 8 such streams (rpcd has 8 workers)
    leave Probe and the volumes' calls answered, and cancelled, they end and leave rpcd
    free. With every worker held, as before the streamers, Probe would not be answered
    until the reads were let go."""
    for d in running(Driver(setup=xfs_reflink_data_dir, env={"SEPCSI_TEST_PAUSE": "1"},
                            extra_args=["--snapshot-metadata", "on"])):
        c = d.client
        v = create(c, "idle-src", block_cap(), 8 * MiB)
        s1 = snap(c, "idle-s1", v.volume_id).snapshot_id
        s2 = snap(c, "idle-s2", v.volume_id).snapshot_id
        import csi_client
        d.hold("blocks@" + s2)
        clients, its, codes = [], [], {}
        for i in range(8):
            cl = csi_client.CsiClient(d.endpoint)
            its.append(cl.stream_iter("SnapshotMetadata", "GetMetadataDelta", cl.pb.GetMetadataDeltaRequest(base_snapshot_id=s1,
                                                         target_snapshot_id=s2),
                           timeout=300))
            clients.append(cl)

        def drain(k):
            try:
                list(its[k])
                codes[k] = grpc.StatusCode.OK
            except grpc.RpcError as e:
                codes[k] = e.code()

        ts = [threading.Thread(target=drain, args=(k,)) for k in range(8)]
        for t in ts:
            t.start()
        for _ in range(4):
            d.paused("blocks@" + s2)  # four page reads held in the helper
        # Every other call is still answered: Probe, and a volume's own work.
        assert all(probe(c) for _ in range(5))
        w = create(c, "idle-other", block_cap(), 8 * MiB)
        c.controller("DeleteVolume", volume_id=w.volume_id)
        # The four streams beyond the helper's readers wait their turn in rpcd: none
        # fails for want of a reader (a refused page is asked again only for ~3 s).
        time.sleep(4)
        assert codes == {}, codes
        for it in its:
            it.cancel()
        d.release("blocks@" + s2)
        for t in ts:
            t.join(60)
        assert set(codes.values()) <= {grpc.StatusCode.CANCELLED, grpc.StatusCode.OK}, codes
        for cl in clients:
            cl.close()
        assert probe(c)
        assert ranges_of(delta(c, s1, s2), 8 * MiB) == []


def test_delta_pages_split_by_the_read_bound_are_exact():
    """A copied pair (ext4) with more than a page's read bound (256 MiB) of data, and
    changed blocks on both sides of where the bound cuts the page, in runs that straddle
    it: the pages join up exactly, nothing lost, nothing twice."""
    import hostile
    hd = hostile.HostileDriver(setup=big_ext4_data_dir)
    for hd in running(hd):
        r, rnd = hd.rpcd, random.Random(10)
        size = 600 * MiB
        make_vol(r, VOL, size)
        path = vol_path(hd.driver, VOL)
        with open(path, "r+b") as f:
            chunk = rnd.randbytes(8 * MiB)
            for i in range(560 // 8):
                f.write(chunk[i:] + chunk[:i])
            os.fsync(f.fileno())
        make_snap(r, S1, VOL)
        cut = (256 * MiB) // BLOCK
        changed = set(range(cut - 40, cut + 40)) | {cut - 1000, cut + 1000, 1,
                                                     2 * cut - 3, 2 * cut, 2 * cut + 2} | \
            set(range(140000, 143000, 2)) | {size // BLOCK - 1}
        tenant_writes(path, changed, rnd)
        make_snap(r, S2, VOL)
        got, pages = walk(r, mh_wire.BLOCKS_DELTA, S2, size, base=S1)
        assert pages >= 3
        assert blocks_of(got) == changed
        # and from an offset just before and at the cut
        for off in ((cut - 1) * BLOCK + 7, cut * BLOCK):
            tail, _ = walk(r, mh_wire.BLOCKS_DELTA, S2, size, base=S1, offset=off)
            assert blocks_of(tail) == {b for b in changed if b >= off // BLOCK}
