#!/usr/bin/python3
"""Benchmark: what the store's integrity check costs as the store grows. For
each size, a store that rpcd created is filled (with Python's sqlite3, in the
store's own tables) with N volumes, each staged and published, and then:
sqlite's quick_check and integrity_check (the one rpcd runs at every start),
`sepcsictl store check`, and rpcd's start-up as the supervisor logs it
(child_ready startup_ms, the store's open and check included). Run as root
inside `unshare -m --propagation private`:

    unshare -m --propagation private /usr/bin/python3 tests/bench/store_check.py [RUNS]

Prints medians over RUNS (default 5); asserts nothing.
"""
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import conftest  # noqa: E402  (the e2e Driver: a real supervisor in a temp tree)

SIZES = (0, 1000, 10000)


def fill(path, n):
    db = sqlite3.connect(path)
    with db:
        for i in range(n):
            vid = "sv-%032x" % (i * 2654435761)
            name = "pvc-%08d-1111-2222-3333-444444444444" % i
            staging = "/var/lib/kubelet/plugins/kubernetes.io/csi/sepcsi/%s/globalmount" % vid
            target = "/var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/%s/mount" % (name, vid)
            db.execute("INSERT INTO volumes (id, name, capacity_bytes, fs_type, parameters,"
                       " content_source, created_unix_ns) VALUES (?, ?, ?, 'ext4', ?, '', ?)",
                       (vid, name, 1 << 30, "csi.storage.k8s.io/pvc/name=%s\n" % name,
                        time.time_ns()))
            db.execute("INSERT INTO stagings VALUES (?, ?, 'ext4', '', 2, 1)", (vid, staging))
            db.execute("INSERT INTO publications VALUES (?, ?, ?, 0, 2, 1, '')",
                       (vid, target, staging))
    db.close()


def pragma_ms(path, pragma):
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    t0 = time.monotonic()
    assert db.execute(pragma).fetchall() == [("ok",)]
    ms = (time.monotonic() - t0) * 1000
    db.close()
    return ms


def ctl_ms(state):
    t0 = time.monotonic()
    subprocess.run([os.path.join(conftest.BIN, "sepcsictl"), "store", "check", "--state-dir",
                    state], check=True, capture_output=True)
    return (time.monotonic() - t0) * 1000


def rpcd_startup_ms(store):
    """rpcd's start-up (spawn to ready, as the supervisor logs it) on a copy of store."""
    def setup(d):
        os.makedirs(d.state, mode=0o700)
        shutil.copy2(store, os.path.join(d.state, "sepcsi.db"))
        st = os.stat(store)
        os.chown(os.path.join(d.state, "sepcsi.db"), st.st_uid, st.st_gid)
    d = conftest.Driver(setup=setup)
    try:
        m = re.search(r"child_ready role=rpcd pid=\d+ startup_ms=(\d+)", d.logs())
        return int(m.group(1))
    finally:
        d.stop()
        d.cleanup()


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    d = conftest.Driver()  # rpcd creates the store with its schema
    d.stop()
    store = os.path.join(d.tmp, "empty.db")
    shutil.copy2(os.path.join(d.state, "sepcsi.db"), store)
    try:
        for n in SIZES:
            work = os.path.join(d.tmp, "n%d" % n)
            os.makedirs(work)
            path = os.path.join(work, "sepcsi.db")
            shutil.copy2(store, path)
            fill(path, n)
            st = os.stat(os.path.join(d.state, "sepcsi.db"))
            os.chown(path, st.st_uid, st.st_gid)
            med = {
                "quick_check": statistics.median(
                    pragma_ms(path, "PRAGMA quick_check") for _ in range(runs)),
                "integrity_check": statistics.median(
                    pragma_ms(path, "PRAGMA integrity_check") for _ in range(runs)),
                "sepcsictl store check": statistics.median(ctl_ms(work) for _ in range(runs)),
                "rpcd startup": statistics.median(rpcd_startup_ms(path) for _ in range(runs)),
            }
            print("%6d volumes (%5.1f MiB): " % (n, os.path.getsize(path) / 2**20) +
                  ", ".join("%s %.0f ms" % kv for kv in med.items()))
    finally:
        d.cleanup()


if __name__ == "__main__":
    main()
