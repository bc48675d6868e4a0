"""The data path: a volume's loop device reads and writes its image with direct I/O
where the data directory's file system allows it, so that what a pod reads is cached
once (in its own file system), not a second time as the image's pages in the host's
page cache; and where it does not, the device is buffered, the volume works, and the
log says why. Real loop devices, mkfs, mounts and page-cache counts (fincore); no
timing (tests/bench/datapath.py measures speed). And space: what a pod deletes inside a
volume goes back to the data directory (online discard, by default), and a raw block
volume's BLKDISCARD punches its image."""
import os
import subprocess
import time

from csi_client import block_cap, mount_cap
from conftest import Driver, loops_backed_by, running
from test_metrics import value, wait_for
from test_node import Vol, mount_entry

import pytest

MiB = 1 << 20
READ = 64 * MiB


def dio_of(dev):
    with open("/sys/block/%s/loop/dio" % os.path.basename(dev)) as f:
        return f.read().strip() == "1"


def image_of(driver, vid):
    return os.path.join(driver.data, "images", vid + ".img")


def cached_bytes(path):
    """Bytes of path in the host's page cache now (fincore: mincore(2) of a mapping)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", path],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def drop_cached(path):
    """The image's clean pages out of the host's page cache, so that a count after a
    read counts only what that read put there."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def dd(*args):
    subprocess.run(["dd", "status=none"] + list(args), check=True)


def direct_io_metric(d, want):
    wait_for(d.metrics, lambda s: value(s, "sepcsi_helper_reachable") == 1 and
             value(s, "sepcsi_data_dir_direct_io") == want)


@pytest.fixture
def driver():
    """A driver reporting its metrics every second."""
    yield from running(Driver(extra_args=["--metrics-interval", "1"]))


def test_a_file_system_volume_is_read_directly_and_leaves_its_image_uncached(driver):
    v = Vol(driver, "dio-fs", mount_cap("ext4"), size=256 * MiB)
    try:
        devs = loops_backed_by(driver.data)
        assert len(devs) == 1 and dio_of(devs[0]), devs
        direct_io_metric(driver, 1)
        data = os.path.join(v.target, "data")
        dd("if=/dev/urandom", "of=" + data, "bs=1M", "count=%d" % (READ // MiB),
           "conv=fsync")
        img = image_of(driver, v.id)
        drop_cached(img)
        before = cached_bytes(img)
        dd("if=" + data, "of=/dev/null", "bs=1M", "iflag=direct")
        # Buffered, every block read would now be in the host's cache as well.
        assert cached_bytes(img) - before <= READ // 20
        assert "loop_buffered" not in driver.logs()
    finally:
        v.teardown()


def test_a_raw_block_volume_is_read_directly_and_leaves_its_image_uncached(driver):
    v = Vol(driver, "dio-blk", block_cap(), size=128 * MiB, target="dev")
    try:
        devs = loops_backed_by(driver.data)
        assert len(devs) == 1 and dio_of(devs[0]), devs
        dd("if=/dev/urandom", "of=" + v.target, "bs=1M", "count=%d" % (READ // MiB),
           "oflag=direct")
        img = image_of(driver, v.id)
        drop_cached(img)
        before = cached_bytes(img)
        dd("if=" + v.target, "of=/dev/null", "bs=1M", "count=%d" % (READ // MiB),
           "iflag=direct")
        assert cached_bytes(img) - before <= READ // 20
    finally:
        v.teardown()


def sector_4k_data_dir(d):
    """The data directory on an ext4 whose device has 4 KiB sectors: its files take
    direct I/O only at 4 KiB, which a device of the images' 512-byte blocks cannot
    give. The loop device under it is the test's (buffered), detached at cleanup."""
    img = os.path.join(d.tmp, "data.img")
    with open(img, "wb") as f:
        f.truncate(512 * MiB)
    dev = subprocess.run(["losetup", "-f", "--show", "--sector-size", "4096", img],
                         capture_output=True, text=True, check=True).stdout.strip()
    subprocess.run(["mkfs.ext4", "-q", dev], check=True)
    mount_data_dir(d, dev)


def btrfs_data_dir(d):
    """The data directory on a btrfs (it checksums data: no direct I/O onto it)."""
    img = os.path.join(d.tmp, "data.img")
    with open(img, "wb") as f:
        f.truncate(512 * MiB)
    subprocess.run(["mkfs.btrfs", "-q", img], check=True, stdout=subprocess.DEVNULL)
    dev = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                         check=True).stdout.strip()
    mount_data_dir(d, dev)


def mount_data_dir(d, dev):
    os.makedirs(d.data, mode=0o700)
    subprocess.run(["mount", dev, d.data], check=True)
    os.chmod(d.data, 0o700)
    d.data_dev = dev


@pytest.fixture(params=[(sector_4k_data_dir, "aligned beyond 512 bytes"),
                        (btrfs_data_dir, "btrfs checksums")], ids=["4k-sectors", "btrfs"])
def buffered_driver(request):
    setup, why = request.param
    for d in running(Driver(setup=setup, extra_args=["--metrics-interval", "1"])):
        d.why = why
        yield d


def test_where_the_data_directory_takes_no_direct_io_the_device_is_buffered_and_says_so(
        buffered_driver):
    d = buffered_driver
    v = Vol(d, "dio-off", mount_cap("ext4"), size=64 * MiB)
    try:
        devs = [x for x in loops_backed_by(d.data) if x != d.data_dev]
        assert len(devs) == 1 and not dio_of(devs[0]), devs
        with open("/sys/block/%s/queue/logical_block_size" % os.path.basename(devs[0])) as f:
            assert f.read().strip() == "512"
        with open(os.path.join(v.target, "f"), "w") as f:
            f.write("still a volume")
        log = d.logs()
        assert "loop_buffered" in log and d.why in log
        assert "loop_devices_buffered" in log
        direct_io_metric(d, 0)
    finally:
        v.teardown()


def allocated(path):
    return os.stat(path).st_blocks * 512


def returns_to(img, bound, timeout=60):
    """Wait until img holds at most bound bytes of disk (discards are issued at the file
    system's journal commit, which the test's sync brings; the loop device then punches
    holes, on its own worker): the allocation it got to."""
    deadline = time.monotonic() + timeout
    while allocated(img) > bound and time.monotonic() < deadline:
        time.sleep(0.1)
    return allocated(img)


@pytest.mark.parametrize("fs", ["ext4", "xfs"])
def test_space_freed_inside_a_volume_returns_to_the_data_directory(driver, fs):
    v = Vol(driver, "trim-" + fs, mount_cap(fs), size=512 * MiB)
    try:
        assert "discard" in mount_entry(v.staging)["super"]
        img = image_of(driver, v.id)
        base = allocated(img)
        data = os.path.join(v.target, "big")
        dd("if=/dev/urandom", "of=" + data, "bs=1M", "count=256", "conv=fsync")
        assert allocated(img) - base >= 250 * MiB
        os.unlink(data)
        subprocess.run(["sync", "-f", v.target], check=True)
        assert returns_to(img, base + 16 * MiB) <= base + 16 * MiB
        # The capacity promised is the volume's, whatever the image holds now.
        assert os.stat(img).st_size >= 512 * MiB
    finally:
        v.teardown()


def test_a_volume_mounted_nodiscard_keeps_its_blocks(driver):
    v = Vol(driver, "notrim", mount_cap("ext4", flags=["nodiscard"]), size=128 * MiB)
    try:
        assert "discard" not in mount_entry(v.staging)["super"]
    finally:
        v.teardown()


def test_a_pods_blkdiscard_on_a_raw_block_volume_punches_its_image(driver):
    v = Vol(driver, "trim-blk", block_cap(), size=128 * MiB, target="dev")
    try:
        img = image_of(driver, v.id)
        dd("if=/dev/urandom", "of=" + v.target, "bs=1M", "count=64", "oflag=direct")
        assert allocated(img) >= 64 * MiB
        subprocess.run(["blkdiscard", v.target], check=True)
        assert returns_to(img, 1 * MiB) <= 1 * MiB
    finally:
        v.teardown()
