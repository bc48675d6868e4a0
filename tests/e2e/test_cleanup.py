"""What a stopped run leaves is removed by the next (conftest.sweep_leftovers): a tree
whose lock nobody holds, with a loop device attached to a file in it and a process still
running on it, is taken apart; a tree a live test holds is not touched."""
import os
import subprocess
import sys
import tempfile
import time

from conftest import claim_tmp, cleanup_tree, loops_backed_by, sweep_leftovers


def attach_in(tmp):
    """A loop device backed by a small file in tmp, and a process whose arguments name tmp
    (as a driver's do)."""
    img = os.path.join(tmp, "data", "images", "sv-0.img")
    os.makedirs(os.path.dirname(img))
    with open(img, "wb") as f:
        f.truncate(16 << 20)
    dev = subprocess.run(["losetup", "-f", "--show", img], capture_output=True, text=True,
                         check=True).stdout.strip()
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)",
                             os.path.join(tmp, "state")])
    # Popen returns once the exec has closed its descriptors, but the kernel sets the new
    # program's arguments a moment later: until then /proc/PID/cmdline reads empty and the
    # sweep could not know the process. A dead run's processes are long past that point.
    deadline = time.monotonic() + 60
    while (tmp + "/").encode() not in read_cmdline(proc.pid):
        assert time.monotonic() < deadline, "the process never showed its arguments"
        time.sleep(0.01)
    return dev, proc


def read_cmdline(pid):
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        return f.read()


def test_a_dead_runs_tree_is_swept():
    tmp = tempfile.mkdtemp(prefix="sepcsi-e2e-")  # made, never locked: its run is gone
    dev, proc = attach_in(tmp)
    try:
        assert loops_backed_by(tmp) == [dev]
        sweep_leftovers()
        assert proc.wait(60) == -9  # its process killed
        assert not os.path.exists(tmp) and not os.path.exists("/sys/block/%s/loop" %
                                                              os.path.basename(dev))
    finally:
        proc.kill()
        proc.wait()
        cleanup_tree(tmp)


def test_a_held_tree_is_kept():
    tmp, lock = claim_tmp("sepcsi-e2e-")
    dev, proc = attach_in(tmp)
    try:
        sweep_leftovers()
        assert proc.poll() is None and loops_backed_by(tmp) == [dev]
    finally:
        proc.kill()
        proc.wait()
        cleanup_tree(tmp)
        os.close(lock)
    assert not loops_backed_by(tmp) and not os.path.exists(tmp)
