"""Crash consistency under a CO's retries: the chaos run of tests/chaos/chaos.py
(lifecycles from 10 clients, ext4, raw block and directory volumes, while the helper,
its workers and runners and rpcd are killed at random; and again without directory
volumes, where the helper's capable core mounts and is killed too) against a real driver; nothing may be stuck, lost or
left over. SEPCSI_CHAOS_SEED replays a run's kill schedule; SEPCSI_CHAOS_SECONDS
and SEPCSI_CHAOS_CLIENTS change its size (docs/testing.md)."""
import os
import re
import sys

import pytest

from conftest import running
from csi_client import block_cap, mount_cap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "chaos"))
import chaos  # noqa: E402


@pytest.fixture
def chaos_driver():
    yield from running(chaos.start_driver())


@pytest.fixture(params=["xfs", "btrfs-simple", "shared", None],
                ids=["directories", "btrfs", "shared", "core"])
def any_chaos_driver(request):
    """With a directory base (the helper mounts, its tree runner walks; on btrfs volumes are
    subvolumes; a shared base marks with records in the base), and without (the helper's
    capable core mounts, and is among those killed)."""
    yield from running(chaos.start_driver(directories=request.param is not None,
                                          base=request.param or "xfs"))


@pytest.mark.timeout(chaos.TIMEOUT)
def test_kills_during_lifecycles(any_chaos_driver):
    chaos_driver = any_chaos_driver
    result = chaos.run(chaos_driver, chaos.Settings.from_env())
    print(result.details())
    if result.problems():
        # What the driver said, for a run that CI cannot replay: its warnings and
        # errors, then its last lines (pytest shows this output for a failed test).
        lines = chaos_driver.logs().splitlines()
        loud = [ln for ln in lines if re.search(r'Z (error|warn) |"level":"(error|warn)"', ln)]
        print("driver log, warnings and errors (%d, last 300):" % len(loud))
        print("\n".join(loud[-300:]))
        print("driver log, last 300 lines of %d:" % len(lines))
        print("\n".join(lines[-300:]))
    assert result.problems() == [], result.summary()


def test_leak_checks_see_leaks(chaos_driver):
    """The run's end checks look where leaks would be: an ext4 and a raw block volume
    left published, a directory volume left behind, a temporary file beside the images
    and one in the base's trash, are seen as every kind."""
    d, k = chaos_driver, chaos_driver.kubelet
    c = d.client
    before = chaos.tree(d.root)
    for name, cap, staging, target in (
            ("left-fs", mount_cap("ext4"), k.staging("left-fs"), k.target("left-fs")),
            ("left-block", block_cap(), k.block_staging("left-block"),
             k.block_target("left-block"))):
        vid = c.controller("CreateVolume", name=name, volume_capabilities=[cap],
                           capacity_range=c.pb.CapacityRange(
                               required_bytes=chaos.VOLUME_BYTES)).volume.volume_id
        c.node("NodeStageVolume", volume_id=vid, staging_target_path=staging,
               volume_capability=cap)
        c.node("NodePublishVolume", volume_id=vid, staging_target_path=staging,
               target_path=target, volume_capability=cap, readonly=False)
    open(os.path.join(d.data, "images", "sv-left.img.tmp"), "w").close()
    c.controller("CreateVolume", name="left-dir", volume_capabilities=[mount_cap("")],
                 parameters={"type": "directory", "baseDir": d.base},
                 capacity_range=c.pb.CapacityRange(required_bytes=chaos.VOLUME_BYTES))
    os.makedirs(os.path.join(d.base, ".sepcsi-trash", "sv-" + "0" * 32))
    leaks = chaos.driver_leaks(d, before)
    assert sorted(leaks["dirs"]) == [os.path.join(d.base, ".sepcsi-trash", "sv-" + "0" * 32),
                                     os.path.join(d.base, "left-dir")], leaks["dirs"]
    assert len(leaks["loops"]) == 2
    # Staging and target of each, in the test's namespace and in the helper's view.
    assert len(leaks["mounts"]) == 8, leaks["mounts"]
    assert len(leaks["images"]) == 2
    assert leaks["tmp"] == [os.path.join(d.data, "images", "sv-left.img.tmp")]
    assert len(leaks["paths"]) == 4  # each staging and target, as the CO and driver made them
    assert len(c.controller("ListVolumes").entries) == 3
    assert d.stop() == 0
    integrity, rows = chaos.store_check(os.path.join(d.state, chaos.STORE_FILE))
    assert integrity == "ok"
    assert {t: rows[t] for t in ("volumes", "stagings", "publications")} == \
        {"volumes": 3, "stagings": 2, "publications": 2}
