"""The store at start-up: rpcd refuses a store it cannot trust (not a sqlite
database, or damaged), exits with a message that names the file and what is
wrong (in the driver's log), and leaves the file as it found it; the driver is
never ready meanwhile. What the supervisor then does about an rpcd that keeps
failing is test_supervisor.py's concern, not this file's."""
import os
import time

import grpc
import pytest

import conftest
import csi_client
from csi_client import pb

RPCD_UID = 65532  # the supervisor's default --rpcd-user


def plant(content):
    """A Driver setup that puts content in place as rpcd's store, owned by rpcd."""
    def setup(d):
        os.makedirs(d.state, mode=0o700)
        path = os.path.join(d.state, "sepcsi.db")
        with open(path, "wb") as f:
            f.write(content)
        os.chown(d.state, RPCD_UID, RPCD_UID)
        os.chown(path, RPCD_UID, RPCD_UID)
        os.chmod(path, 0o600)
    return setup


def damaged_store():
    """A real store (written by rpcd, with volumes in it) with a page of junk in the middle."""
    d = conftest.Driver()
    try:
        for i in range(3):
            d.client.controller("CreateVolume", name="pvc-damaged-%d" % i,
                                capacity_range=pb.CapacityRange(required_bytes=16 << 20),
                                volume_capabilities=[csi_client.mount_cap()])
        d.stop()  # rpcd closes the store: everything is in the main file
        with open(os.path.join(d.state, "sepcsi.db"), "rb") as f:
            data = bytearray(f.read())
    finally:
        d.stop()
        d.cleanup()
    pages = len(data) // 4096
    assert pages >= 4
    middle = pages // 2 * 4096
    data[middle:middle + 4096] = bytes((i * 131 + 17) % 256 for i in range(4096))
    return bytes(data)


def garbage():
    return bytes((i * 7 + i // 251) % 256 for i in range(65536))


@pytest.mark.parametrize("make, problem", [
    (garbage, "not a sqlite database"),
    (damaged_store, "damaged"),
], ids=["garbage", "damaged-page"])
def test_rpcd_refuses_untrustworthy_store(make, problem):
    content = make()
    d = conftest.Driver(setup=plant(content), wait=False)
    try:
        path = os.path.join(d.state, "sepcsi.db")
        line = "cannot open store %s: store open %s: %s" % (path, path, problem)
        deadline = time.monotonic() + 30
        while line not in d.logs():
            assert time.monotonic() < deadline, "no refusal in the log:\n" + d.logs()
            time.sleep(0.05)
        print([l for l in d.logs().splitlines() if "cannot open store" in l][0])
        with csi_client.CsiClient(d.endpoint) as c:
            try:
                ready = c.identity("Probe", timeout=2).ready.value
            except grpc.RpcError:
                ready = False
        assert not ready
        # Refused as found: the same bytes, and nothing written beside it.
        with open(path, "rb") as f:
            assert f.read() == content
        assert os.listdir(d.state) == ["sepcsi.db"]
    finally:
        d.stop()
        d.cleanup()
