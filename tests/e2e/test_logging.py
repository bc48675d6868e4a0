"""One log line per CSI call, text or JSON; secrets never reach the log; the
helper writes its own audit line for every privileged action."""
import json

import grpc
import pytest

from conftest import Driver
from csi_client import mount_cap

SECRET = "s3cr3t-value-that-must-not-appear"


@pytest.fixture
def json_driver():
    d = Driver(extra_args=["--log-format", "json"])
    try:
        yield d
    finally:
        d.stop()
        d.cleanup()


def test_json_lines_per_call(json_driver):
    c = json_driver.client
    v = c.controller("CreateVolume", name="pvc-log", volume_capabilities=[mount_cap()],
                     secrets={"password": SECRET})
    vid = v.volume.volume_id
    with pytest.raises(grpc.RpcError):
        c.controller("CreateVolume", name="", volume_capabilities=[mount_cap()],
                     secrets={"password": SECRET})
    c.controller("DeleteVolume", volume_id=vid, secrets={"password": SECRET})
    json_driver.stop()
    text = json_driver.logs()
    assert SECRET not in text
    lines = [json.loads(l) for l in text.splitlines() if l.startswith("{")]
    assert len(lines) == len([l for l in text.splitlines() if l.strip()]), "non-JSON line"
    calls = [l for l in lines if l.get("event") == "csi_call"]
    create = [l for l in calls if l["method"] == "CreateVolume"]
    assert create[0]["code"] == "OK" and create[0]["volume"] == "pvc-log"
    assert float(create[0]["duration_ms"]) >= 0
    assert create[1]["code"] == "INVALID_ARGUMENT" and "name" in create[1]["message"]
    delete = [l for l in calls if l["method"] == "DeleteVolume"]
    assert delete[0]["volume"] == vid and delete[0]["proc"] == "rpcd"
    audit = [l for l in lines if l.get("event") == "audit"]
    assert any(a["proc"] == "mounthelper" and a.get("volume_id") == vid for a in audit)


def test_text_lines_by_default(driver):
    driver.client.identity("GetPluginInfo")
    driver.stop()
    lines = [l for l in driver.logs().splitlines() if "csi_call" in l]
    assert any("method=GetPluginInfo" in l and "code=OK" in l for l in lines)
