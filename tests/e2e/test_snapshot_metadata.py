"""The SnapshotMetadata service: GetMetadataAllocated and GetMetadataDelta.

Volumes in use (staged) are written with known blocks, snapshotted, written
again (some blocks over old ones, some new, some discarded) and snapshotted
again; both calls' answers are checked against the truth: for raw block
volumes the blocks the test wrote, for file systems the snapshot images
themselves, read and compared here block by block (an oracle independent of
the driver's). Each is run on a data directory that reflinks (a loop-mounted
xfs) and on a plain one (ext4: every snapshot a sparse copy), and with
results over several pages (the helper's pages hold 512 ranges) and small
max_results. Bad input gets the spec's codes."""
import os
import random
import subprocess
import threading
import time

import grpc
import pytest

from csi_client import block_cap, mount_cap
from conftest import Driver, running
from test_controller_snapshots import Staged, create, snap
from test_datapath import mount_data_dir

MiB = 1 << 20
BLOCK = 4096
VARIABLE_LENGTH = 2


def loop_data_dir(d, mkfs, size=1024 * MiB):
    """The data directory on a file system of its own, made by mkfs on a sparse image
    of size bytes in the test's tree, through a loop device of the test's."""
    img = os.path.join(d.tmp, "data.img")
    with open(img, "wb") as f:
        f.truncate(size)
    subprocess.run(mkfs + [img], check=True)
    dev = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                         check=True).stdout.strip()
    mount_data_dir(d, dev)


def xfs_reflink_data_dir(d):
    """The data directory on an xfs with reflink: snapshots share the volume's extents."""
    loop_data_dir(d, ["mkfs.xfs", "-q", "-m", "reflink=1"])


def ext4_data_dir(d):
    """The data directory on an ext4 of its own: no reflink, every snapshot a copy."""
    loop_data_dir(d, ["mkfs.ext4", "-q"])


@pytest.fixture(scope="module", params=["reflink", "copy"])
def mdriver(request):
    setup = xfs_reflink_data_dir if request.param == "reflink" else ext4_data_dir
    for d in running(Driver(setup=setup, extra_args=["--snapshot-metadata", "on"])):
        d.kind = request.param
        yield d


def allocated(c, sid, offset=0, max_results=0):
    req = c.pb.GetMetadataAllocatedRequest(snapshot_id=sid, starting_offset=offset,
                                           max_results=max_results)
    return c.stream("SnapshotMetadata", "GetMetadataAllocated", req, timeout=120)


def delta(c, base, target, offset=0, max_results=0):
    req = c.pb.GetMetadataDeltaRequest(base_snapshot_id=base, target_snapshot_id=target,
                                       starting_offset=offset, max_results=max_results)
    return c.stream("SnapshotMetadata", "GetMetadataDelta", req, timeout=120)


def ranges_of(msgs, capacity, max_results=0):
    """The ranges of a whole stream, checked as the spec says a stream must be."""
    out = []
    assert msgs, "a stream sends at least one message"
    for m in msgs:
        assert m.block_metadata_type == VARIABLE_LENGTH
        assert m.volume_capacity_bytes == capacity
        if max_results:
            assert len(m.block_metadata) <= max_results
        for b in m.block_metadata:
            assert b.size_bytes > 0 and b.byte_offset >= 0
            assert b.byte_offset + b.size_bytes <= capacity
            if out:
                assert out[-1][0] + out[-1][1] <= b.byte_offset, "ascending, disjoint"
            out.append((b.byte_offset, b.size_bytes))
    return out


def blocks_of(ranges):
    """The 4 KiB block numbers that ranges cover."""
    s = set()
    for off, n in ranges:
        assert off % BLOCK == 0
        s.update(range(off // BLOCK, (off + n + BLOCK - 1) // BLOCK))
    return s


def image(d, sid):
    return os.path.join(d.data, "snapshots", sid + ".img")


def data_blocks(path):
    """The blocks of a file that hold data, by SEEK_DATA/SEEK_HOLE."""
    out, size = set(), os.path.getsize(path)
    with open(path, "rb") as f:
        fd, pos = f.fileno(), 0
        while pos < size:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError:
                break
            hole = os.lseek(fd, data, os.SEEK_HOLE)
            out.update(range(data // BLOCK, (hole + BLOCK - 1) // BLOCK))
            pos = hole
    return out


def differing_blocks(a, b):
    """The blocks whose bytes differ between two files (the shorter reads as zeros)."""
    out, k = set(), 0
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(MiB), fb.read(MiB)
            if not x and not y:
                return out
            n = max(len(x), len(y))
            x, y = x.ljust(n, b"\0"), y.ljust(n, b"\0")
            for i in range(0, n, BLOCK):
                if x[i:i + BLOCK] != y[i:i + BLOCK]:
                    out.add(k + i // BLOCK)
            k += n // BLOCK


def write_blocks(dev, blocks, rnd):
    with open(dev, "r+b", buffering=0) as f:
        for b in sorted(blocks):
            f.seek(b * BLOCK)
            f.write(rnd.randbytes(BLOCK))
        os.fsync(f.fileno())


def discard(dev, blocks):
    for b in sorted(blocks):
        subprocess.run(["blkdiscard", "-o", str(b * BLOCK), "-l", str(BLOCK), dev], check=True)


def test_identity_announces_the_service(mdriver):
    caps = mdriver.client.identity("GetPluginCapabilities").capabilities
    types = {c.service.type for c in caps if c.HasField("service")}
    assert mdriver.client.pb.PluginCapability.Service.SNAPSHOT_METADATA_SERVICE in types


def test_raw_block_allocated_and_delta(mdriver):
    """Known blocks of a raw block volume in use: both calls say exactly which."""
    d, c, rnd = mdriver, mdriver.client, random.Random(7)
    size = 32 * MiB
    v = create(c, "md-blk-" + d.kind, block_cap(), size)
    st = Staged(d, v.volume_id, "md-blk-" + d.kind, block_cap())
    dev = st.file("dev")
    try:
        nblocks = size // BLOCK
        # 1300 blocks every other one (1300 ranges: three of the helper's pages), and runs.
        first = set(range(100, 2700, 2)) | set(range(4000, 4100)) | {nblocks - 1}
        write_blocks(dev, first, rnd)
        s1 = snap(c, "md-blk-s1-" + d.kind, v.volume_id)
        assert s1.size_bytes == size
        over = set(range(100, 900, 4)) | set(range(4000, 4010))   # rewritten
        new = set(range(6000, 6300)) | {5001, 5003}                # never written before
        gone = set(range(4050, 4100)) | {2500, 2502}               # discarded
        write_blocks(dev, over | new, rnd)
        discard(dev, gone)
        s2 = snap(c, "md-blk-s2-" + d.kind, v.volume_id)

        a1 = ranges_of(allocated(c, s1.snapshot_id), size)
        assert blocks_of(a1) == first
        a2 = ranges_of(allocated(c, s2.snapshot_id), size)
        assert blocks_of(a2) == (first - gone) | new | over
        dl = ranges_of(delta(c, s1.snapshot_id, s2.snapshot_id), size)
        assert blocks_of(dl) == over | new | gone
        # Nothing changed between a snapshot and itself.
        assert ranges_of(delta(c, s2.snapshot_id, s2.snapshot_id), size) == []

        # Small messages, and a resumed stream, give the same ranges.
        assert ranges_of(allocated(c, s1.snapshot_id, max_results=7), size, 7) == a1
        assert ranges_of(delta(c, s1.snapshot_id, s2.snapshot_id, max_results=1), size, 1) == dl
        mid = a1[len(a1) // 2]
        resumed = ranges_of(allocated(c, s1.snapshot_id, offset=mid[0] + mid[1]), size)
        assert resumed == a1[len(a1) // 2 + 1:]
        # An offset inside a range: that range (from its block) comes first.
        inside = ranges_of(delta(c, s1.snapshot_id, s2.snapshot_id,
                                 offset=dl[3][0] + 1), size)
        assert inside[0][0] <= dl[3][0] + 1 < inside[0][0] + inside[0][1]
        assert inside[1:] == dl[4:]
        # At the very end: one message, no range, the capacity.
        end = allocated(c, s1.snapshot_id, offset=size)
        assert len(end) == 1 and not end[0].block_metadata
        assert end[0].volume_capacity_bytes == size
    finally:
        st.unstage()


def test_file_system_allocated_and_delta(mdriver):
    """An ext4 volume in use: the calls agree with the snapshot images themselves."""
    d, c, rnd = mdriver, mdriver.client, random.Random(11)
    size = 64 * MiB
    name = "md-fs-" + d.kind
    v = create(c, name, mount_cap("ext4"), size)
    st = Staged(d, v.volume_id, name, mount_cap("ext4"))
    try:
        with open(st.file("a"), "wb") as f:
            f.write(rnd.randbytes(4 * MiB))
            os.fsync(f.fileno())
        with open(st.file("b"), "wb") as f:
            f.write(rnd.randbytes(2 * MiB))
            os.fsync(f.fileno())
        s1 = snap(c, name + "-s1", v.volume_id)
        with open(st.file("a"), "r+b") as f:  # over old blocks, in place
            for off in (0, 512 * 1024, 3 * MiB):
                f.seek(off)
                f.write(rnd.randbytes(64 * 1024))
            os.fsync(f.fileno())
        with open(st.file("c"), "wb") as f:  # new blocks
            f.write(rnd.randbytes(3 * MiB))
            os.fsync(f.fileno())
        os.unlink(st.file("b"))  # discarded: fstrim punches its blocks out of the image
        os.sync()
        subprocess.run(["fstrim", st.path], check=True)
        s2 = snap(c, name + "-s2", v.volume_id)
        i1, i2 = image(d, s1.snapshot_id), image(d, s2.snapshot_id)

        a2 = ranges_of(allocated(c, s2.snapshot_id, max_results=5), size, 5)
        assert blocks_of(a2) == data_blocks(i2)
        truth = differing_blocks(i1, i2)
        dl = ranges_of(delta(c, s1.snapshot_id, s2.snapshot_id), size)
        assert blocks_of(dl) == truth
        assert len(truth) * BLOCK >= 4 * MiB  # the writes (3 MiB new, 192 KiB over, the trim)
        assert ranges_of(allocated(c, s1.snapshot_id), size) and \
            blocks_of(ranges_of(allocated(c, s1.snapshot_id), size)) == data_blocks(i1)
    finally:
        st.unstage()


def test_bad_input(mdriver):
    d, c = mdriver, mdriver.client
    v = create(c, "md-bad-a-" + d.kind, block_cap(), 8 * MiB)
    w = create(c, "md-bad-b-" + d.kind, block_cap(), 8 * MiB)
    sa1 = snap(c, "md-bad-a1-" + d.kind, v.volume_id)
    sa2 = snap(c, "md-bad-a2-" + d.kind, v.volume_id)
    sb = snap(c, "md-bad-b1-" + d.kind, w.volume_id)

    def code(fn, *a, **kw):
        with pytest.raises(grpc.RpcError) as e:
            fn(*a, **kw)
        return e.value.code(), e.value.details()

    S = grpc.StatusCode
    unknown = "ss-" + "0" * 32
    assert code(allocated, c, unknown)[0] == S.NOT_FOUND
    assert code(allocated, c, "../../etc/passwd")[0] == S.NOT_FOUND
    assert code(allocated, c, "")[0] == S.INVALID_ARGUMENT
    assert code(delta, c, unknown, sa2.snapshot_id)[0] == S.NOT_FOUND
    assert code(delta, c, sa1.snapshot_id, unknown)[0] == S.NOT_FOUND
    assert code(delta, c, "", sa2.snapshot_id)[0] == S.INVALID_ARGUMENT
    assert code(delta, c, sa1.snapshot_id, "")[0] == S.INVALID_ARGUMENT
    got = code(delta, c, sa1.snapshot_id, sb.snapshot_id)
    assert got[0] == S.INVALID_ARGUMENT and "volume" in got[1]
    got = code(delta, c, sa2.snapshot_id, sa1.snapshot_id)
    assert got[0] == S.INVALID_ARGUMENT and "after" in got[1]
    assert code(allocated, c, sa1.snapshot_id, offset=8 * MiB + 1)[0] == S.OUT_OF_RANGE
    assert code(allocated, c, sa1.snapshot_id, offset=-1)[0] == S.OUT_OF_RANGE
    assert code(delta, c, sa1.snapshot_id, sa2.snapshot_id, offset=1 << 62)[0] == \
        S.OUT_OF_RANGE
    assert code(allocated, c, sa1.snapshot_id, max_results=-1)[0] == S.INVALID_ARGUMENT
    # A snapshot deleted: NOT_FOUND, and the driver still serves.
    c.controller("DeleteSnapshot", snapshot_id=sb.snapshot_id)
    assert code(allocated, c, sb.snapshot_id)[0] == S.NOT_FOUND
    assert ranges_of(delta(c, sa1.snapshot_id, sa2.snapshot_id), 8 * MiB) == []


@pytest.mark.parametrize("args", [[], ["--snapshot-metadata", "off"],
                                  ["--snapshot-metadata", "on", "--mode", "node"]],
                         ids=["default", "off", "node-mode"])
def test_not_served_unless_asked(args):
    """Off by default (a CO or conformance suite that knows no such capability sees
    nothing new), and never in the node mode: neither the calls nor the capability."""
    for d in running(Driver(extra_args=args)):
        req = d.client.pb.GetMetadataAllocatedRequest(snapshot_id="ss-" + "0" * 32)
        with pytest.raises(grpc.RpcError) as e:
            d.client.stream("SnapshotMetadata", "GetMetadataAllocated", req)
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        caps = d.client.identity("GetPluginCapabilities").capabilities
        assert d.client.pb.PluginCapability.Service.SNAPSHOT_METADATA_SERVICE not in \
            {x.service.type for x in caps if x.HasField("service")}


def test_reads_leave_workers_to_volumes():
    """The helper reads at most 4 pages at once, and rpcd makes streams' messages in 4
    threads of its own: a fifth stream waits its turn (it does not fail), and the
    volumes' own operations still find a worker meanwhile. Let go, every one reads."""
    for d in running(Driver(extra_args=["--snapshot-metadata", "on"],
                            env={"SEPCSI_TEST_PAUSE": "1"})):
        c = d.client
        v = create(c, "md-busy", block_cap(), 8 * MiB)
        s = snap(c, "md-busy-s", v.volume_id)
        results = {}

        def read(i):
            try:
                results[i] = ranges_of(allocated(c, s.snapshot_id), 8 * MiB)
            except grpc.RpcError as e:
                results[i] = e.code()

        d.hold("blocks@" + s.snapshot_id)
        threads = [threading.Thread(target=read, args=(i,)) for i in range(5)]
        for t in threads[:4]:
            t.start()
        for _ in range(4):
            d.paused("blocks@" + s.snapshot_id)
        threads[4].start()
        # A volume's own operation is not held up by the reads.
        w = create(c, "md-busy-other", block_cap(), 8 * MiB)
        c.controller("DeleteVolume", volume_id=w.volume_id)
        time.sleep(4)  # longer than a refused page is asked again: the fifth still waits
        assert results == {}, results
        d.release("blocks@" + s.snapshot_id)
        for t in threads:
            t.join(60)
        assert all(results[i] == [] for i in range(5)), results


def test_delta_across_an_expansion(mdriver):
    """The volume grew between the two snapshots: the capacity is the target's, the
    base reads as zeros past its end, so only what was written there is changed."""
    d, c, rnd = mdriver, mdriver.client, random.Random(5)
    name = "md-grow-" + d.kind
    v = create(c, name, block_cap(), 8 * MiB)
    st = Staged(d, v.volume_id, name, block_cap())
    try:
        write_blocks(st.file("dev"), {0, 100}, rnd)
        s1 = snap(c, name + "-s1", v.volume_id)
    finally:
        st.unstage()
    c.controller("ControllerExpandVolume", volume_id=v.volume_id,
                 capacity_range=c.pb.CapacityRange(required_bytes=16 * MiB))
    st = Staged(d, v.volume_id, name, block_cap())
    try:
        write_blocks(st.file("dev"), {2048 + 7, 4095}, rnd)  # past the old end
        s2 = snap(c, name + "-s2", v.volume_id)
    finally:
        st.unstage()
    assert s2.size_bytes == 16 * MiB
    dl = ranges_of(delta(c, s1.snapshot_id, s2.snapshot_id), 16 * MiB)
    assert blocks_of(dl) == {2048 + 7, 4095}
    assert blocks_of(ranges_of(allocated(c, s2.snapshot_id), 16 * MiB)) == {0, 100, 2055, 4095}
