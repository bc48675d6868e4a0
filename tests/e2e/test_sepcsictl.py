"""sepcsictl, the CSI command-line client: every subcommand against the running
driver (success and an error exit, with the exit code and the message), the
exact request each subcommand sends (checked by a recording CSI server), the
text and JSON printers, the exit code of every gRPC status, the streamed
answers of the SnapshotMetadata service (printed as they arrive, in bounded
memory, cancelled when they cannot be written), and the read-only store and
audit views."""
import datetime
import json
import os
import re
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time
from concurrent import futures

import grpc
import pytest
from google.protobuf import json_format, timestamp_pb2, wrappers_pb2

import conftest
from csi_client import pb

CTL = os.path.join(conftest.BIN, "sepcsictl")

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_ABSENT, EXIT_GRPC = 0, 1, 2, 3, 10
CODES = {c.value[0]: c for c in grpc.StatusCode}
GiB = 1 << 30


def ctl(*args, endpoint=None, timeout=60, check_rc=None):
    cmd = [CTL] + (["--endpoint", endpoint] if endpoint else []) + list(args)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check_rc is not None:
        assert res.returncode == check_rc, (cmd, res.returncode, res.stdout, res.stderr)
    return res


def ctl_json(*args, endpoint=None):
    res = ctl("--output", "json", *args, endpoint=endpoint, check_rc=EXIT_OK)
    return json.loads(res.stdout)


def assert_grpc_error(res, method, code):
    """Exit 10 + code and "sepcsictl: <Method>: <CODE>: <message>" on stderr."""
    status = code if isinstance(code, grpc.StatusCode) else CODES[code]
    assert res.returncode == EXIT_GRPC + status.value[0], (res.returncode, res.stderr)
    m = re.match(r"sepcsictl: (\w+): ([A-Z_]+): (.+)", res.stderr)
    assert m, res.stderr
    assert m.group(1) == method and m.group(2) == status.name
    return m.group(3)


def answered(res, method):
    """An RPC colleagues may not have landed yet: success (a JSON answer) or a
    well-reported gRPC error; either way sepcsictl reported the driver's answer."""
    if res.returncode == EXIT_OK:
        return json.loads(res.stdout)
    m = re.match(r"sepcsictl: (\w+): ([A-Z_]+): ", res.stderr)
    assert m and m.group(1) == method, res.stderr
    assert res.returncode == EXIT_GRPC + grpc.StatusCode[m.group(2)].value[0], res
    return None


# ---- a recording CSI server: what exactly does sepcsictl send? ----

def server_streaming(path):
    """Whether the CSI method at path ("/csi.v1.SnapshotMetadata/GetMetadataDelta") streams."""
    service, method = path.rsplit("/", 1)
    svc = pb.DESCRIPTOR.services_by_name.get(service.rsplit(".", 1)[1])
    return bool(svc and method in svc.methods_by_name and
                svc.methods_by_name[method].server_streaming)


class FakeCsi(grpc.GenericRpcHandler):
    """A CSI server that records every request and answers what it is told:
    responses[method] (default: an empty answer), or an error. A streaming
    method streams the messages of responses[method] (a list, or a callable
    that returns an iterable; default: none), then ends with the error, if one
    is set, or OK."""

    def __init__(self, path):
        self.path = path
        self.endpoint = "unix://" + path
        self.calls = []
        self.responses = {}
        self.error = None  # (grpc.StatusCode, message) for every call
        self.errors = {}  # method name -> (grpc.StatusCode, message)
        self.delay = 0
        self.lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((self,))
        self.server.add_insecure_port("unix:" + path)
        self.server.start()

    def service(self, details):
        method = details.method.rsplit("/", 1)[1]
        req_cls = getattr(pb, method + "Request", None)
        resp_cls = getattr(pb, method + "Response", None)
        if req_cls is None:
            return None

        def handle(request, context):
            with self.lock:
                self.calls.append((details.method, request))
            if self.delay:
                time.sleep(self.delay)
            if self.error or method in self.errors:
                context.abort(*(self.error or self.errors[method]))
            answer = self.responses.get(method)
            return answer(request) if callable(answer) else (answer or resp_cls())

        def handle_stream(request, context):
            with self.lock:
                self.calls.append((details.method, request))
            if self.delay:
                time.sleep(self.delay)
            answer = self.responses.get(method)
            yield from (answer(request) if callable(answer) else (answer or []))
            if self.error or method in self.errors:
                context.abort(*(self.error or self.errors[method]))

        if server_streaming(details.method):
            return grpc.unary_stream_rpc_method_handler(
                handle_stream, request_deserializer=req_cls.FromString,
                response_serializer=lambda m: m.SerializeToString())
        return grpc.unary_unary_rpc_method_handler(
            handle, request_deserializer=req_cls.FromString,
            response_serializer=lambda m: m.SerializeToString())

    def methods(self):
        with self.lock:
            return [m.rsplit("/", 1)[1] for m, _ in self.calls]

    def stop(self):
        self.server.stop(0)


@pytest.fixture
def fake():
    tmp = tempfile.mkdtemp(prefix="sepcsi-fake-")
    f = FakeCsi(os.path.join(tmp, "csi.sock"))
    try:
        yield f
    finally:
        f.stop()
        subprocess.run(["rm", "-rf", tmp], check=False)


def cap(access="mount", mode="SINGLE_NODE_WRITER", **mount):
    c = {"access_mode": {"mode": mode}}
    c[access] = mount if access == "mount" else {}
    return c


# (service, rpc, flags, gRPC method, the request as json_format.MessageToDict sees it)
REQUESTS = [
    ("identity", "get-plugin-info", [], "GetPluginInfo", {}),
    ("identity", "get-plugin-capabilities", [], "GetPluginCapabilities", {}),
    ("identity", "probe", [], "Probe", {}),
    ("controller", "create-volume",
     ["--name", "v1", "--capacity", "1Gi", "--limit", "2G", "--param", "a=b", "--param", "c=d",
      "--secret", "s=t", "--snapshot-id", "snap-1", "--requisite", "zone=a,rack=1",
      "--requisite", "zone=b", "--preferred", "zone=a", "--mutable-param", "iops=5",
      "--fs-type", "xfs", "--mount-flag", "noatime", "--mount-flag", "discard",
      "--mount-group", "1000", "--access-mode", "single-node-writer",
      "--access-mode", "SINGLE_NODE_MULTI_WRITER"],
     "CreateVolume",
     {"name": "v1", "capacity_range": {"required_bytes": str(GiB), "limit_bytes": "2000000000"},
      "volume_capabilities": [
          cap(fs_type="xfs", mount_flags=["noatime", "discard"], volume_mount_group="1000"),
          cap(mode="SINGLE_NODE_MULTI_WRITER", fs_type="xfs", mount_flags=["noatime", "discard"],
              volume_mount_group="1000")],
      "parameters": {"a": "b", "c": "d"}, "secrets": {"s": "t"},
      "volume_content_source": {"snapshot": {"snapshot_id": "snap-1"}},
      "accessibility_requirements": {
          "requisite": [{"segments": {"zone": "a", "rack": "1"}}, {"segments": {"zone": "b"}}],
          "preferred": [{"segments": {"zone": "a"}}]},
      "mutable_parameters": {"iops": "5"}}),
    ("controller", "create-volume",
     ["--name", "v2", "--source-volume-id", "sv-1", "--access-type", "block", "--capacity", "1.5Ki"],
     "CreateVolume",
     {"name": "v2", "capacity_range": {"required_bytes": "1536"},
      "volume_capabilities": [cap("block")],
      "volume_content_source": {"volume": {"volume_id": "sv-1"}}}),
    ("controller", "create-volume", ["--name", "v3", "--access-type", "none"], "CreateVolume",
     {"name": "v3"}),
    ("controller", "delete-volume", ["--volume-id", "sv-1", "--secret", "k=v"], "DeleteVolume",
     {"volume_id": "sv-1", "secrets": {"k": "v"}}),
    ("controller", "publish-volume",
     ["--volume-id", "sv-1", "--node-id", "n1", "--readonly", "--context", "a=b",
      "--secret", "k=v", "--access-mode", "multi-node-reader-only"],
     "ControllerPublishVolume",
     {"volume_id": "sv-1", "node_id": "n1", "readonly": True, "volume_context": {"a": "b"},
      "secrets": {"k": "v"}, "volume_capability": cap(mode="MULTI_NODE_READER_ONLY")}),
    ("controller", "unpublish-volume", ["--volume-id", "sv-1", "--node-id", "n1"],
     "ControllerUnpublishVolume", {"volume_id": "sv-1", "node_id": "n1"}),
    ("controller", "validate-volume-capabilities",
     ["--volume-id", "sv-1", "--context", "a=b", "--param", "p=q", "--mutable-param", "m=n",
      "--access-type", "block"],
     "ValidateVolumeCapabilities",
     {"volume_id": "sv-1", "volume_context": {"a": "b"}, "parameters": {"p": "q"},
      "mutable_parameters": {"m": "n"}, "volume_capabilities": [cap("block")]}),
    ("controller", "list-volumes", ["--max-entries", "5", "--starting-token", "t"],
     "ListVolumes", {"max_entries": 5, "starting_token": "t"}),
    ("controller", "get-capacity", ["--param", "a=b", "--topology", "zone=a", "--fs-type", "ext4"],
     "GetCapacity",
     {"parameters": {"a": "b"}, "accessible_topology": {"segments": {"zone": "a"}},
      "volume_capabilities": [cap(fs_type="ext4")]}),
    ("controller", "get-capacity", [], "GetCapacity", {}),
    ("controller", "get-capabilities", [], "ControllerGetCapabilities", {}),
    ("controller", "create-snapshot",
     ["--source-volume-id", "sv-1", "--name", "s1", "--param", "a=b", "--secret", "k=v"],
     "CreateSnapshot",
     {"source_volume_id": "sv-1", "name": "s1", "parameters": {"a": "b"},
      "secrets": {"k": "v"}}),
    ("controller", "delete-snapshot", ["--snapshot-id", "ss-1"], "DeleteSnapshot",
     {"snapshot_id": "ss-1"}),
    ("controller", "list-snapshots",
     ["--max-entries", "2", "--starting-token", "x", "--source-volume-id", "sv-1",
      "--snapshot-id", "ss-1"],
     "ListSnapshots",
     {"max_entries": 2, "starting_token": "x", "source_volume_id": "sv-1",
      "snapshot_id": "ss-1"}),
    ("controller", "get-snapshot", ["--snapshot-id", "ss-1"], "GetSnapshot",
     {"snapshot_id": "ss-1"}),
    ("controller", "expand-volume",
     ["--volume-id", "sv-1", "--capacity", "2Gi", "--access-type", "block"],
     "ControllerExpandVolume",
     {"volume_id": "sv-1", "capacity_range": {"required_bytes": str(2 * GiB)},
      "volume_capability": cap("block")}),
    ("controller", "expand-volume", ["--volume-id", "sv-1", "--limit", "2Gi"],
     "ControllerExpandVolume",
     {"volume_id": "sv-1", "capacity_range": {"limit_bytes": str(2 * GiB)}}),
    ("controller", "get-volume", ["--volume-id", "sv-1"], "ControllerGetVolume",
     {"volume_id": "sv-1"}),
    ("controller", "modify-volume", ["--volume-id", "sv-1", "--mutable-param", "iops=10"],
     "ControllerModifyVolume", {"volume_id": "sv-1", "mutable_parameters": {"iops": "10"}}),
    ("group-controller", "get-capabilities", [], "GroupControllerGetCapabilities", {}),
    ("group-controller", "create-volume-group-snapshot",
     ["--name", "g", "--source-volume-id", "a", "--source-volume-id", "b", "--param", "k=v"],
     "CreateVolumeGroupSnapshot",
     {"name": "g", "source_volume_ids": ["a", "b"], "parameters": {"k": "v"}}),
    ("group-controller", "delete-volume-group-snapshot",
     ["--group-snapshot-id", "g1", "--snapshot-id", "s1", "--snapshot-id", "s2"],
     "DeleteVolumeGroupSnapshot", {"group_snapshot_id": "g1", "snapshot_ids": ["s1", "s2"]}),
    ("group-controller", "get-volume-group-snapshot",
     ["--group-snapshot-id", "g1", "--snapshot-id", "s1"],
     "GetVolumeGroupSnapshot", {"group_snapshot_id": "g1", "snapshot_ids": ["s1"]}),
    ("node", "stage-volume",
     ["--volume-id", "sv-1", "--staging-path", "/s", "--fs-type", "ext4",
      "--access-mode", "single-node-writer", "--publish-context", "p=q", "--context", "a=b",
      "--secret", "k=v", "--mount-flag", "noatime"],
     "NodeStageVolume",
     {"volume_id": "sv-1", "staging_target_path": "/s",
      "volume_capability": cap(fs_type="ext4", mount_flags=["noatime"]),
      "publish_context": {"p": "q"}, "volume_context": {"a": "b"}, "secrets": {"k": "v"}}),
    ("node", "unstage-volume", ["--volume-id", "sv-1", "--staging-path", "/s"],
     "NodeUnstageVolume", {"volume_id": "sv-1", "staging_target_path": "/s"}),
    ("node", "publish-volume",
     ["--volume-id", "sv-1", "--staging-path", "/s", "--target-path", "/t", "--readonly=true",
      "--access-type", "block", "--publish-context", "p=q"],
     "NodePublishVolume",
     {"volume_id": "sv-1", "staging_target_path": "/s", "target_path": "/t", "readonly": True,
      "volume_capability": cap("block"), "publish_context": {"p": "q"}}),
    ("node", "publish-volume",
     ["--volume-id", "sv-1", "--target-path", "/t", "--readonly=false"],
     "NodePublishVolume",
     {"volume_id": "sv-1", "target_path": "/t", "volume_capability": cap()}),
    ("node", "unpublish-volume", ["--volume-id", "sv-1", "--target-path", "/t"],
     "NodeUnpublishVolume", {"volume_id": "sv-1", "target_path": "/t"}),
    ("node", "get-volume-stats",
     ["--volume-id", "sv-1", "--volume-path", "/t", "--staging-path", "/s"],
     "NodeGetVolumeStats", {"volume_id": "sv-1", "volume_path": "/t", "staging_target_path": "/s"}),
    ("node", "expand-volume",
     ["--volume-id", "sv-1", "--volume-path", "/t", "--capacity", "3Gi", "--limit", "4Gi",
      "--staging-path", "/s", "--fs-type", "ext4", "--secret", "k=v"],
     "NodeExpandVolume",
     {"volume_id": "sv-1", "volume_path": "/t",
      "capacity_range": {"required_bytes": str(3 * GiB), "limit_bytes": str(4 * GiB)},
      "staging_target_path": "/s", "volume_capability": cap(fs_type="ext4"),
      "secrets": {"k": "v"}}),
    ("node", "get-capabilities", [], "NodeGetCapabilities", {}),
    ("node", "get-info", [], "NodeGetInfo", {}),
    ("snapshot-metadata", "get-metadata-allocated",
     ["--snapshot-id", "ss-1", "--starting-offset", "1Mi", "--max-results", "3",
      "--secret", "k=v"],
     "GetMetadataAllocated",
     {"snapshot_id": "ss-1", "starting_offset": str(1 << 20), "max_results": 3,
      "secrets": {"k": "v"}}),
    ("snapshot-metadata", "get-metadata-allocated", ["--snapshot-id", "ss-1"],
     "GetMetadataAllocated", {"snapshot_id": "ss-1"}),
    ("snapshot-metadata", "get-metadata-delta",
     ["--base-snapshot-id", "ss-1", "--target-snapshot-id", "ss-2", "--starting-offset", "4096",
      "--max-results", "100"],
     "GetMetadataDelta",
     {"base_snapshot_id": "ss-1", "target_snapshot_id": "ss-2", "starting_offset": "4096",
      "max_results": 100}),
    # A required flag left out is sent as it is (empty): the driver checks it (below).
    ("snapshot-metadata", "get-metadata-delta", ["--target-snapshot-id", "ss-2"],
     "GetMetadataDelta", {"target_snapshot_id": "ss-2"}),
]

SERVICES = {"identity": "Identity", "controller": "Controller",
            "group-controller": "GroupController", "node": "Node",
            "snapshot-metadata": "SnapshotMetadata"}


def rpcs_of(service):
    """The subcommands `sepcsictl <service> --help` lists."""
    out = ctl(service, "--help", check_rc=EXIT_OK).stdout
    return re.findall(r"^  ([a-z-]+)\s{2,}", out.split("rpcs:")[1], re.M)


def test_every_rpc_has_a_request_case():
    listed = {(s, r) for s in SERVICES for r in rpcs_of(s)}
    assert len(listed) == 32
    assert listed == {(s, r) for s, r, *_ in REQUESTS}


@pytest.mark.parametrize("service,rpc,flags,method,expected", REQUESTS,
                         ids=["%s-%s-%d" % (c[0], c[1], i) for i, c in enumerate(REQUESTS)])
def test_request_fields(fake, service, rpc, flags, method, expected):
    ctl(service, rpc, *flags, endpoint=fake.endpoint, check_rc=EXIT_OK)
    assert len(fake.calls) == 1
    path, request = fake.calls[0]
    assert path == "/csi.v1.%s/%s" % (SERVICES[service], method)
    assert json_format.MessageToDict(request, preserving_proto_field_name=True) == expected


def test_method_name_accepted_as_rpc(fake):
    ctl("Node", "NodeGetInfo", endpoint=fake.endpoint, check_rc=EXIT_OK)
    ctl("controller", "ControllerGetCapabilities", endpoint=fake.endpoint, check_rc=EXIT_OK)
    assert fake.methods() == ["NodeGetInfo", "ControllerGetCapabilities"]


# ---- the printers ----

def ts(seconds, nanos):
    return timestamp_pb2.Timestamp(seconds=seconds, nanos=nanos)


def expected_json(msg):
    """sepcsictl's JSON rules, written independently: every field by its proto
    name, defaults included, unset messages null, only the set member of a
    oneof, int64 as numbers, enums by name, Timestamps RFC 3339, wrappers by value."""
    d = msg.DESCRIPTOR
    if d.full_name == "google.protobuf.Timestamp":
        t = datetime.datetime.fromtimestamp(msg.seconds, datetime.timezone.utc)
        return t.strftime("%Y-%m-%dT%H:%M:%S") + (".%09d" % msg.nanos if msg.nanos else "") + "Z"
    if d.full_name.startswith("google.protobuf.") and d.name.endswith("Value"):
        return msg.value
    out = {}
    for f in d.fields:
        if f.containing_oneof is not None and msg.WhichOneof(f.containing_oneof.name) != f.name:
            continue
        if f.name == "secrets":
            continue
        v = getattr(msg, f.name)
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            out[f.name] = {k: v[k] for k in v}
        elif f.label == f.LABEL_REPEATED:
            out[f.name] = [expected_json(x) if f.message_type else x for x in v]
        elif f.message_type is not None:
            out[f.name] = expected_json(v) if msg.HasField(f.name) else None
        elif f.enum_type is not None:
            out[f.name] = f.enum_type.values_by_number[v].name
        else:
            out[f.name] = v
    return out


def volume(vid="sv-1", gib=1):
    return pb.Volume(capacity_bytes=gib * GiB, volume_id=vid, volume_context={"k": "v w"},
                     accessible_topology=[pb.Topology(segments={"topology.x/node": "n1"})])


def snapshot(sid="ss-1"):
    return pb.Snapshot(size_bytes=3 * GiB // 2, snapshot_id=sid, source_volume_id="sv-1",
                       creation_time=ts(1795000000, 123), ready_to_use=True)


ANSWERS = {
    "GetPluginInfo": pb.GetPluginInfoResponse(name="fake.csi", vendor_version="9",
                                              manifest={"a": "1"}),
    "GetPluginCapabilities": pb.GetPluginCapabilitiesResponse(capabilities=[
        pb.PluginCapability(service=pb.PluginCapability.Service(type=1)),
        pb.PluginCapability(volume_expansion=pb.PluginCapability.VolumeExpansion(type=2))]),
    "Probe": pb.ProbeResponse(ready=wrappers_pb2.BoolValue(value=False)),
    "CreateVolume": pb.CreateVolumeResponse(volume=volume()),
    "ControllerPublishVolume": pb.ControllerPublishVolumeResponse(publish_context={"dev": "x"}),
    "ValidateVolumeCapabilities": pb.ValidateVolumeCapabilitiesResponse(message="no"),
    "ListVolumes": pb.ListVolumesResponse(
        entries=[pb.ListVolumesResponse.Entry(
            volume=volume("sv-%d" % i),
            status=pb.ListVolumesResponse.VolumeStatus(published_node_ids=["n1"]))
            for i in range(2)], next_token="2"),
    "GetCapacity": pb.GetCapacityResponse(available_capacity=10 * GiB,
                                          maximum_volume_size=wrappers_pb2.Int64Value(value=5 * GiB)),
    "ControllerGetCapabilities": pb.ControllerGetCapabilitiesResponse(capabilities=[
        pb.ControllerServiceCapability(rpc=pb.ControllerServiceCapability.RPC(type=t))
        for t in (1, 5, 9)]),
    "CreateSnapshot": pb.CreateSnapshotResponse(snapshot=snapshot()),
    "ListSnapshots": pb.ListSnapshotsResponse(
        entries=[pb.ListSnapshotsResponse.Entry(snapshot=snapshot("ss-%d" % i))
                 for i in range(3)]),
    "GetSnapshot": pb.GetSnapshotResponse(snapshot=snapshot()),
    "ControllerExpandVolume": pb.ControllerExpandVolumeResponse(
        capacity_bytes=2 * GiB, node_expansion_required=True),
    "ControllerGetVolume": pb.ControllerGetVolumeResponse(
        volume=volume(), status=pb.ControllerGetVolumeResponse.VolumeStatus(
            volume_condition=pb.VolumeCondition(abnormal=True, message="disk\nsad"))),
    "CreateVolumeGroupSnapshot": pb.CreateVolumeGroupSnapshotResponse(
        group_snapshot=pb.VolumeGroupSnapshot(group_snapshot_id="g1",
                                              snapshots=[snapshot()],
                                              creation_time=ts(1795000001, 0),
                                              ready_to_use=True)),
    "NodeGetVolumeStats": pb.NodeGetVolumeStatsResponse(
        usage=[pb.VolumeUsage(available=1, total=2, used=1, unit=1),
               pb.VolumeUsage(total=100, unit=2)],
        volume_condition=pb.VolumeCondition(abnormal=False, message="ok")),
    "NodeGetCapabilities": pb.NodeGetCapabilitiesResponse(capabilities=[
        pb.NodeServiceCapability(rpc=pb.NodeServiceCapability.RPC(type=1))]),
    "NodeGetInfo": pb.NodeGetInfoResponse(node_id="n1", max_volumes_per_node=7,
                                          accessible_topology=pb.Topology(segments={"z": "a"})),
    # Streams: a list of messages each.
    "GetMetadataAllocated": [
        pb.GetMetadataAllocatedResponse(
            block_metadata_type=2, volume_capacity_bytes=GiB,
            block_metadata=[pb.BlockMetadata(byte_offset=0, size_bytes=4096),
                            pb.BlockMetadata(byte_offset=1 << 20, size_bytes=3 << 20)]),
        pb.GetMetadataAllocatedResponse(block_metadata_type=2, volume_capacity_bytes=GiB),
        pb.GetMetadataAllocatedResponse(
            block_metadata_type=2, volume_capacity_bytes=GiB,
            block_metadata=[pb.BlockMetadata(byte_offset=GiB - 512, size_bytes=512)])],
    "GetMetadataDelta": [
        pb.GetMetadataDeltaResponse(
            block_metadata_type=1, volume_capacity_bytes=64 << 20,
            block_metadata=[pb.BlockMetadata(byte_offset=i * 8192, size_bytes=4096)
                            for i in range(3)])],
}


def stream_lines(out):
    """A stream's JSON output: one object per line."""
    return [json.loads(l) for l in out.splitlines()]


@pytest.mark.parametrize("case", range(len(REQUESTS)),
                         ids=["%s-%s-%d" % (c[0], c[1], i) for i, c in enumerate(REQUESTS)])
def test_json_output(fake, case):
    service, rpc, flags, method, _ = REQUESTS[case]
    answer = ANSWERS.get(method, getattr(pb, method + "Response")())
    fake.responses[method] = answer
    if isinstance(answer, list):  # a stream: one object per message, one per line
        res = ctl("--output", "json", service, rpc, *flags, endpoint=fake.endpoint,
                  check_rc=EXIT_OK)
        assert stream_lines(res.stdout) == [expected_json(m) for m in answer]
        return
    got = ctl_json(service, rpc, *flags, endpoint=fake.endpoint)
    assert got == expected_json(answer)


def test_text_output(fake):
    for method, answer in ANSWERS.items():
        fake.responses[method] = answer
    out = ctl("controller", "create-volume", "--name", "v", endpoint=fake.endpoint,
              check_rc=EXIT_OK).stdout
    assert out == ("volume:\n"
                   "  capacity_bytes: 1073741824 (1 GiB)\n"
                   "  volume_id: sv-1\n"
                   "  volume_context:\n"
                   "    k: v w\n"
                   "  accessible_topology:\n"
                   "    - segments:\n"
                   "        topology.x/node: n1\n")
    out = ctl("controller", "list-snapshots", endpoint=fake.endpoint, check_rc=EXIT_OK).stdout
    assert "  - snapshot:\n      size_bytes: 1610612736 (1.5 GiB)\n" in out
    assert "      creation_time: 2026-11-18T11:06:40.000000123Z\n" in out
    assert out.count("  - snapshot:\n") == 3
    out = ctl("controller", "get-capacity", endpoint=fake.endpoint, check_rc=EXIT_OK).stdout
    assert out == ("available_capacity: 10737418240 (10 GiB)\n"
                   "maximum_volume_size: 5368709120 (5 GiB)\n")
    out = ctl("controller", "get-volume", "--volume-id", "sv-1", endpoint=fake.endpoint,
              check_rc=EXIT_OK).stdout
    assert "    message: disk\\x0asad\n" in out  # one value stays on one line
    out = ctl("identity", "get-plugin-capabilities", endpoint=fake.endpoint,
              check_rc=EXIT_OK).stdout
    assert out == ("capabilities:\n  - service:\n      type: CONTROLLER_SERVICE\n"
                   "  - volume_expansion:\n      type: OFFLINE\n")
    out = ctl("node", "get-volume-stats", "--volume-id", "v", "--volume-path", "/p",
              endpoint=fake.endpoint, check_rc=EXIT_OK).stdout
    assert "  - available: 1\n    total: 2\n    used: 1\n    unit: BYTES\n" in out
    # An empty answer prints nothing.
    assert ctl("controller", "delete-volume", "--volume-id", "x", endpoint=fake.endpoint,
               check_rc=EXIT_OK).stdout == ""


# ---- errors: the exit code of every status, deadlines, usage ----

@pytest.mark.parametrize("code", range(1, 17))
def test_exit_code_per_status(fake, code):
    status = CODES[code]
    fake.error = (status, "told to fail with %s" % status.name)
    res = ctl("controller", "delete-volume", "--volume-id", "sv-1", endpoint=fake.endpoint)
    msg = assert_grpc_error(res, "DeleteVolume", status)
    assert msg == "told to fail with %s" % status.name
    assert res.stdout == ""


def test_timeout_deadline_exceeded(fake):
    # The fake answers OK after 2 s: DEADLINE_EXCEEDED can only come from the
    # client's own 300 ms deadline.
    fake.delay = 2
    res = ctl("--timeout", "300ms", "identity", "probe", endpoint=fake.endpoint)
    assert_grpc_error(res, "Probe", grpc.StatusCode.DEADLINE_EXCEEDED)


def test_no_server_unavailable(tmp_path):
    res = ctl("identity", "probe", endpoint="unix://%s/none.sock" % tmp_path)
    assert_grpc_error(res, "Probe", grpc.StatusCode.UNAVAILABLE)


def test_endpoint_from_environment(fake):
    env = dict(os.environ, CSI_ENDPOINT=fake.endpoint)
    res = subprocess.run([CTL, "identity", "get-plugin-info"], capture_output=True, text=True,
                         env=env, timeout=30)
    assert res.returncode == 0
    assert fake.methods() == ["GetPluginInfo"]


@pytest.mark.parametrize("args,needle", [
    ([], "usage:"),
    (["nosuch"], "unknown service"),
    (["controller"], "rpcs:"),
    (["controller", "nosuch"], "has no rpc"),
    (["controller", "create-volume", "--nosuch", "x"], "unknown flag --nosuch"),
    (["controller", "create-volume", "--name"], "--name: needs a value"),
    (["controller", "create-volume", "stray"], "unexpected argument"),
    (["controller", "create-volume", "--capacity", "1Gx"], "--capacity"),
    (["controller", "create-volume", "--capacity", "99999999999Ei"], "--capacity"),
    (["controller", "list-volumes", "--max-entries", "9999999999"], "--max-entries"),
    (["controller", "list-volumes", "--max-entries", "ten"], "--max-entries"),
    (["controller", "create-volume", "--param", "novalue"], "--param: expected KEY=VALUE"),
    (["controller", "create-volume", "--param", "a=1", "--param", "a=2"], "given twice"),
    (["controller", "create-volume", "--requisite", "zone"], "--requisite"),
    (["controller", "create-volume", "--snapshot-id", "s", "--source-volume-id", "v"],
     "conflicts"),
    (["controller", "create-volume", "--access-type", "tape"], "--access-type"),
    (["controller", "create-volume", "--access-type", "block", "--fs-type", "ext4"],
     "block excludes"),
    (["controller", "create-volume", "--access-type", "none", "--access-mode", "rwo"],
     "--access-mode"),
    (["controller", "create-volume", "--access-mode", "rwx"], "unknown access mode"),
    (["node", "stage-volume", "--access-mode", "single-node-writer",
      "--access-mode", "multi-node-multi-writer"], "one capability"),
    (["node", "publish-volume", "--readonly=maybe"], "--readonly"),
    (["--output", "yaml", "identity", "probe"], "--output"),
    (["--timeout", "soon", "identity", "probe"], "--timeout"),
    (["store"], "usage:"),
    (["store", "tables"], "unknown view"),
    (["audit", "--nosuch"], "unknown flag --nosuch"),
    (["audit", "stray"], "unexpected argument"),
    (["identity", "probe", "--output"], "--output: needs a value"),
    # Long flags are spelled out: getopt_long's prefixes are refused at every level.
    (["--out", "json", "identity", "probe"], "unknown flag --out (flags are not abbreviated)"),
    (["controller", "create-volume", "--nam", "v"], "unknown flag --nam (flags are not"),
    (["node", "publish-volume", "--read"], "unknown flag --read (flags are not"),
    (["store", "volumes", "--state=/x"], "unknown flag --state (flags are not"),
    (["audit", "--foll"], "unknown flag --foll (flags are not"),
    (["snapshot-metadata"], "rpcs:"),
    (["snapshot-metadata", "nosuch"], "has no rpc"),
    (["snapshot-metadata", "get-metadata-allocated", "--snapshot-id"],
     "--snapshot-id: needs a value"),
    (["snapshot-metadata", "get-metadata-allocated", "--starting-offset", "-4096"],
     "--starting-offset"),
    (["snapshot-metadata", "get-metadata-allocated", "--starting-offset", "1Qi"],
     "--starting-offset"),
    (["snapshot-metadata", "get-metadata-allocated", "--max-results", "9999999999"],
     "--max-results"),
    (["snapshot-metadata", "get-metadata-delta", "--snapshot-id", "s"],
     "unknown flag --snapshot-id"),
    (["snapshot-metadata", "get-metadata-delta", "--base-snapshot", "s"],
     "unknown flag --base-snapshot (flags are not"),
    (["snapshot-metadata", "get-metadata-delta", "stray"], "unexpected argument"),
])
def test_usage_errors(fake, args, needle):
    res = ctl(*args, endpoint=fake.endpoint)
    assert res.returncode == EXIT_USAGE, (args, res.stderr)
    assert needle in res.stderr
    assert fake.calls == []


def test_global_flags_anywhere(fake):
    """The global flags before the service, between it and the rpc, among the
    rpc's flags and last; --flag=value, --flag value, -o json and -ojson."""
    fake.responses["NodeGetInfo"] = ANSWERS["NodeGetInfo"]
    ep = fake.endpoint
    env = dict(os.environ, CSI_ENDPOINT="unix:///nonexistent.sock")  # the flag must win
    for args in (["-o", "json", "--endpoint", ep, "node", "get-info"],
                 ["node", "--output=json", "get-info", "--timeout", "30s", "--endpoint=" + ep],
                 ["node", "--endpoint", ep, "get-info", "-ojson"],
                 ["--timeout=30s", "node", "get-info", "--endpoint=" + ep, "--output", "json"]):
        res = subprocess.run([CTL] + args, capture_output=True, text=True, env=env, timeout=60)
        assert res.returncode == EXIT_OK, (args, res.stderr)
        assert json.loads(res.stdout) == expected_json(ANSWERS["NodeGetInfo"]), args
    assert fake.methods() == ["NodeGetInfo"] * 4


def test_secret_values_never_printed(fake):
    for args in (["--secret", "token=hunter2", "--secret", "token=hunter2"],
                 ["--secret", "hunter2"]):
        res = ctl("controller", "delete-volume", "--volume-id", "v", *args,
                  endpoint=fake.endpoint)
        assert res.returncode == EXIT_USAGE
        assert "hunter2" not in res.stdout + res.stderr
    # A call that fails prints the server's message, never the request.
    fake.error = (grpc.StatusCode.PERMISSION_DENIED, "bad credentials")
    res = ctl("controller", "delete-volume", "--volume-id", "v", "--secret", "token=hunter2",
              endpoint=fake.endpoint)
    assert_grpc_error(res, "DeleteVolume", grpc.StatusCode.PERMISSION_DENIED)
    assert "hunter2" not in res.stdout + res.stderr
    assert dict(fake.calls[0][1].secrets) == {"token": "hunter2"}


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"]] +
                         [[s, "--help"] for s in SERVICES] + [["store", "--help"],
                                                              ["audit", "--help"]])
def test_help(args):
    res = ctl(*args, check_rc=EXIT_OK)
    assert res.stdout.startswith("usage: sepcsictl")


def test_help_of_every_rpc():
    for s in SERVICES:
        for r in rpcs_of(s):
            out = ctl(s, r, "--help", check_rc=EXIT_OK).stdout
            assert out.startswith("usage: sepcsictl [global flags] %s %s" % (s, r))
            assert "/csi.v1.%s/" % SERVICES[s] in out
    out = ctl("node", "stage-volume", "--help").stdout
    for flag in ("--volume-id", "--staging-path", "--fs-type", "--access-mode", "--mount-flag",
                 "--secret", "--context", "--publish-context"):
        assert flag in out
    assert ctl("--version", check_rc=EXIT_OK).stdout.startswith("sepcsictl ")


# ---- streams: the SnapshotMetadata service ----

ALLOC, DELTA = "GetMetadataAllocated", "GetMetadataDelta"
ALLOC_ARGS = ["snapshot-metadata", "get-metadata-allocated", "--snapshot-id", "ss-1"]


def test_stream_verbs_help_and_required_flags(fake):
    """Both verbs are listed, with their flags and what streams in --help. A
    required flag left out is no usage error: as for every verb, the request goes
    out without it and the driver's refusal is the exit (INVALID_ARGUMENT, 13)."""
    assert rpcs_of("snapshot-metadata") == ["get-metadata-allocated", "get-metadata-delta"]
    for rpc, required in (("get-metadata-allocated", ["--snapshot-id"]),
                          ("get-metadata-delta", ["--base-snapshot-id", "--target-snapshot-id"])):
        out = ctl("snapshot-metadata", rpc, "--help", check_rc=EXIT_OK).stdout
        assert out.startswith("usage: sepcsictl [global flags] snapshot-metadata %s [flags]\n"
                              % rpc)
        for flag in required:
            assert re.search(r"^  %s VALUE .*\(required\)$" % flag, out, re.M), out
        for flag in ("--starting-offset SIZE", "--max-results N", "--secret KEY=VALUE"):
            line = re.search(r"^  %s .*$" % re.escape(flag), out, re.M)
            assert line and "(required)" not in line.group(0), out
        assert "each message prints as it arrives" in out
        assert "--timeout bounds the whole stream" in out
    fake.errors[ALLOC] = (grpc.StatusCode.INVALID_ARGUMENT, "snapshot_id is required")
    res = ctl("snapshot-metadata", "get-metadata-allocated", endpoint=fake.endpoint)
    msg = assert_grpc_error(res, ALLOC, grpc.StatusCode.INVALID_ARGUMENT)
    assert res.returncode == 13 and msg == "snapshot_id is required" and res.stdout == ""
    assert json_format.MessageToDict(fake.calls[0][1]) == {}


def test_stream_text_output(fake):
    """Text: the type and the capacity once, then every range of every message as one
    list, a byte count with its human size; again the header should a message change it."""
    fake.responses[ALLOC] = ANSWERS[ALLOC]
    out = ctl(*ALLOC_ARGS, endpoint=fake.endpoint, check_rc=EXIT_OK).stdout
    assert out == ("block_metadata_type: VARIABLE_LENGTH\n"
                   "volume_capacity_bytes: 1073741824 (1 GiB)\n"
                   "block_metadata:\n"
                   "  - byte_offset: 0\n"
                   "    size_bytes: 4096 (4 KiB)\n"
                   "  - byte_offset: 1048576\n"
                   "    size_bytes: 3145728 (3 MiB)\n"
                   "  - byte_offset: 1073741312\n"
                   "    size_bytes: 512\n")
    fake.responses[DELTA] = ANSWERS[DELTA] + [
        pb.GetMetadataDeltaResponse(block_metadata_type=1, volume_capacity_bytes=128 << 20),
        pb.GetMetadataDeltaResponse(block_metadata_type=1, volume_capacity_bytes=128 << 20,
                                    block_metadata=[pb.BlockMetadata(byte_offset=96 << 20,
                                                                     size_bytes=4096)])]
    out = ctl("snapshot-metadata", "get-metadata-delta", "--base-snapshot-id", "a",
              "--target-snapshot-id", "b", endpoint=fake.endpoint, check_rc=EXIT_OK).stdout
    assert out == ("block_metadata_type: FIXED_LENGTH\n"
                   "volume_capacity_bytes: 67108864 (64 MiB)\n"
                   "block_metadata:\n"
                   "  - byte_offset: 0\n    size_bytes: 4096 (4 KiB)\n"
                   "  - byte_offset: 8192\n    size_bytes: 4096 (4 KiB)\n"
                   "  - byte_offset: 16384\n    size_bytes: 4096 (4 KiB)\n"
                   "block_metadata_type: FIXED_LENGTH\n"
                   "volume_capacity_bytes: 134217728 (128 MiB)\n"
                   "block_metadata:\n"
                   "  - byte_offset: 100663296\n    size_bytes: 4096 (4 KiB)\n")
    # A message without ranges shows its header; an empty stream prints nothing.
    fake.responses[ALLOC] = ANSWERS[ALLOC][1:2]
    out = ctl(*ALLOC_ARGS, endpoint=fake.endpoint, check_rc=EXIT_OK).stdout
    assert out == ("block_metadata_type: VARIABLE_LENGTH\n"
                   "volume_capacity_bytes: 1073741824 (1 GiB)\n")
    fake.responses[ALLOC] = []
    assert ctl(*ALLOC_ARGS, endpoint=fake.endpoint, check_rc=EXIT_OK).stdout == ""
    res = ctl("--output", "json", *ALLOC_ARGS, endpoint=fake.endpoint, check_rc=EXIT_OK)
    assert res.stdout == ""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_stream_prints_each_message_as_it_arrives(fake, fmt):
    """The first message is on stdout (a pipe) while the server still holds the rest."""
    go = threading.Event()

    def answer(request):
        yield ANSWERS[ALLOC][0]
        if go.wait(30):
            yield ANSWERS[ALLOC][2]
    fake.responses[ALLOC] = answer
    p = subprocess.Popen([CTL, "--endpoint", fake.endpoint, "--output", fmt] + ALLOC_ARGS,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = [p.stdout.readline() for _ in range(1 if fmt == "json" else 7)]
        assert p.poll() is None, "the first message printed only at the end"
        if fmt == "json":
            assert json.loads(first[0]) == expected_json(ANSWERS[ALLOC][0])
        else:
            assert first[-1] == "    size_bytes: 3145728 (3 MiB)\n"
        go.set()
        rest, err = p.communicate(timeout=30)
    finally:
        go.set()
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == EXIT_OK, err
    if fmt == "json":
        assert json.loads(rest) == expected_json(ANSWERS[ALLOC][2])
    else:
        assert rest == "  - byte_offset: 1073741312\n    size_bytes: 512\n"


@pytest.mark.parametrize("code", range(1, 17))
def test_stream_exit_code_per_status(fake, code):
    """A stream that ends in an error: what came before it is printed, then the
    status on stderr and exit 10 + its code, as for a unary call."""
    status = CODES[code]
    fake.responses[ALLOC] = ANSWERS[ALLOC][:2]
    fake.errors[ALLOC] = (status, "told to fail with %s" % status.name)
    res = ctl("--output", "json", *ALLOC_ARGS, endpoint=fake.endpoint)
    assert assert_grpc_error(res, ALLOC, status) == "told to fail with %s" % status.name
    assert stream_lines(res.stdout) == [expected_json(m) for m in ANSWERS[ALLOC][:2]]


def test_stream_deadline_and_no_server(fake, tmp_path):
    """--timeout bounds the whole stream: a message, then a server that stalls."""
    def answer(request):
        yield ANSWERS[ALLOC][0]
        time.sleep(3)
        yield ANSWERS[ALLOC][2]
    fake.responses[ALLOC] = answer
    res = ctl("--timeout", "1s", "--output", "json", *ALLOC_ARGS, endpoint=fake.endpoint)
    assert_grpc_error(res, ALLOC, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert stream_lines(res.stdout) == [expected_json(ANSWERS[ALLOC][0])]
    res = ctl(*ALLOC_ARGS, endpoint="unix://%s/none.sock" % tmp_path)
    assert_grpc_error(res, ALLOC, grpc.StatusCode.UNAVAILABLE)
    assert res.stdout == ""


def test_stream_write_failure_cancels_the_call(fake):
    """An answer that cannot be written (a full disk) is a local failure, exit 1; the
    call is cancelled there, and the server stops streaming."""
    sent = []

    def answer(request):
        for i in range(1000):
            sent.append(i)
            yield ANSWERS[ALLOC][0]
            time.sleep(0.01)
    fake.responses[ALLOC] = answer
    start = time.monotonic()
    with open("/dev/full", "w") as full:
        res = subprocess.run([CTL, "--endpoint", fake.endpoint] + ALLOC_ARGS, stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=60)
    assert res.returncode == EXIT_FAILURE, res.stderr
    assert res.stderr == ("sepcsictl: GetMetadataAllocated: cannot write the answer: "
                          "No space left on device\n")
    assert time.monotonic() - start < 5
    time.sleep(1)
    n = len(sent)
    time.sleep(1)
    assert len(sent) == n < 1000, "the server was not told to stop"


def test_stream_answer_that_does_not_decode(fake):
    """A message that is no GetMetadataAllocatedResponse (its field 3 a number, not
    a range) ends the stream there: INTERNAL, saying which message, after the ones
    before it were printed."""
    fake.responses[ALLOC] = [ANSWERS[ALLOC][0], pb.GetMetadataDeltaRequest(starting_offset=5),
                             ANSWERS[ALLOC][2]]
    res = ctl("--output", "json", *ALLOC_ARGS, endpoint=fake.endpoint)
    msg = assert_grpc_error(res, ALLOC, grpc.StatusCode.INTERNAL)
    assert msg == "answer 2 could not be decoded as csi.v1.GetMetadataAllocatedResponse"
    assert stream_lines(res.stdout) == [expected_json(ANSWERS[ALLOC][0])]


def test_stream_memory_is_one_message(fake):
    """Each message is freed before the next is received: 400 times the stream costs
    sepcsictl no more memory. Held whole, its 2 million ranges would take over 100 MiB."""
    msg = pb.GetMetadataAllocatedResponse(
        block_metadata_type=2, volume_capacity_bytes=1 << 40,
        block_metadata=[pb.BlockMetadata(byte_offset=i * 8192, size_bytes=4096)
                        for i in range(5000)])

    # Under AddressSanitizer, freed memory is held in quarantine (256 MiB): not here.
    asan = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "quarantine_size_mb=0",
                                  "thread_local_quarantine_size_kb=0"]))
    env = dict(os.environ, ASAN_OPTIONS=asan)

    def peak_kib(n):
        fake.responses[ALLOC] = [msg] * n
        p = subprocess.Popen([CTL, "--endpoint", fake.endpoint] + ALLOC_ARGS, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        assert p.returncode == EXIT_OK
        return usage.ru_maxrss
    one, many = peak_kib(1), peak_kib(400)
    assert many - one < 16 * 1024, (one, many)


# ---- against the running driver ----

def test_identity(driver):
    ep = driver.endpoint
    info = ctl_json("identity", "get-plugin-info", endpoint=ep)
    assert info["name"] == "local.sepcsi.io" and info["vendor_version"]
    assert set(info) == {"name", "vendor_version", "manifest"}
    out = ctl("identity", "get-plugin-info", endpoint=ep, check_rc=EXIT_OK).stdout
    assert "name: local.sepcsi.io\n" in out
    caps = ctl_json("identity", "get-plugin-capabilities", endpoint=ep)["capabilities"]
    assert {"service": {"type": "CONTROLLER_SERVICE"}} in caps
    assert ctl_json("identity", "probe", endpoint=ep) == {"ready": True}
    assert ctl("identity", "probe", endpoint=ep, check_rc=EXIT_OK).stdout == "ready: true\n"
    # The error exit of the identity service: nobody at the endpoint.
    for rpc, method in (("get-plugin-info", "GetPluginInfo"),
                        ("get-plugin-capabilities", "GetPluginCapabilities"),
                        ("probe", "Probe")):
        res = ctl("identity", rpc, endpoint=ep + ".gone")
        assert_grpc_error(res, method, grpc.StatusCode.UNAVAILABLE)


def test_volume_lifecycle(driver, paths):
    """Every lifecycle subcommand, strictly: success, then its error exit."""
    ep = driver.endpoint
    staging, target = paths

    res = ctl("controller", "create-volume", "--capacity", "64Mi", "--fs-type", "ext4",
              endpoint=ep)
    assert "name" in assert_grpc_error(res, "CreateVolume", grpc.StatusCode.INVALID_ARGUMENT)
    vol = ctl_json("controller", "create-volume", "--name", "cli-v1", "--capacity", "64Mi",
                   "--fs-type", "ext4", endpoint=ep)["volume"]
    assert set(vol) == {"capacity_bytes", "volume_id", "volume_context", "content_source",
                        "accessible_topology"}
    assert vol["capacity_bytes"] >= 64 << 20
    vid = vol["volume_id"]
    assert re.fullmatch(r"sv-[0-9a-f]{32}", vid)
    again = ctl_json("controller", "create-volume", "--name", "cli-v1", "--capacity", "64Mi",
                     "--fs-type", "ext4", endpoint=ep)["volume"]
    assert again["volume_id"] == vid  # idempotent by name
    res = ctl("controller", "create-volume", "--name", "cli-v1", "--capacity", "1Gi",
              "--fs-type", "ext4", endpoint=ep)
    assert_grpc_error(res, "CreateVolume", grpc.StatusCode.ALREADY_EXISTS)

    res = ctl("node", "stage-volume", "--volume-id", "sv-" + "7" * 32, "--staging-path", staging,
              "--fs-type", "ext4", endpoint=ep)
    assert_grpc_error(res, "NodeStageVolume", grpc.StatusCode.NOT_FOUND)
    res = ctl("node", "stage-volume", "--volume-id", vid, "--fs-type", "ext4", endpoint=ep)
    assert "staging_target_path" in assert_grpc_error(res, "NodeStageVolume",
                                                      grpc.StatusCode.INVALID_ARGUMENT)
    ctl("node", "stage-volume", "--volume-id", vid, "--staging-path", staging, "--fs-type", "ext4",
        "--access-mode", "single-node-writer", endpoint=ep, check_rc=EXIT_OK)
    assert staging in conftest.mounts_under(driver.tmp)

    res = ctl("node", "publish-volume", "--volume-id", vid, "--staging-path", staging,
              "--fs-type", "ext4", endpoint=ep)
    assert "target_path" in assert_grpc_error(res, "NodePublishVolume",
                                              grpc.StatusCode.INVALID_ARGUMENT)
    ctl("node", "publish-volume", "--volume-id", vid, "--staging-path", staging,
        "--target-path", target, "--fs-type", "ext4", endpoint=ep, check_rc=EXIT_OK)
    assert target in conftest.mounts_under(driver.tmp)

    res = ctl("controller", "delete-volume", "--volume-id", vid, endpoint=ep)
    assert_grpc_error(res, "DeleteVolume", grpc.StatusCode.FAILED_PRECONDITION)

    res = ctl("node", "unpublish-volume", "--volume-id", "sv-" + "7" * 32, "--target-path",
              target, endpoint=ep)
    assert_grpc_error(res, "NodeUnpublishVolume", grpc.StatusCode.NOT_FOUND)
    ctl("node", "unpublish-volume", "--volume-id", vid, "--target-path", target, endpoint=ep,
        check_rc=EXIT_OK)
    assert target not in conftest.mounts_under(driver.tmp)

    res = ctl("node", "unstage-volume", "--volume-id", vid, endpoint=ep)
    assert "staging_target_path" in assert_grpc_error(res, "NodeUnstageVolume",
                                                      grpc.StatusCode.INVALID_ARGUMENT)
    ctl("node", "unstage-volume", "--volume-id", vid, "--staging-path", staging, endpoint=ep,
        check_rc=EXIT_OK)
    assert conftest.mounts_under(driver.tmp) == []

    res = ctl("controller", "delete-volume", endpoint=ep)
    assert "volume_id" in assert_grpc_error(res, "DeleteVolume", grpc.StatusCode.INVALID_ARGUMENT)
    ctl("controller", "delete-volume", "--volume-id", vid, endpoint=ep, check_rc=EXIT_OK)
    ctl("controller", "delete-volume", "--volume-id", vid, endpoint=ep, check_rc=EXIT_OK)
    assert conftest.loops_backed_by(driver.data) == []


def test_capabilities_and_info(driver):
    ep = driver.endpoint
    caps = ctl_json("controller", "get-capabilities", endpoint=ep)["capabilities"]
    assert {"rpc": {"type": "CREATE_DELETE_VOLUME"}} in caps
    caps = ctl_json("node", "get-capabilities", endpoint=ep)["capabilities"]
    assert {"rpc": {"type": "STAGE_UNSTAGE_VOLUME"}} in caps
    info = ctl_json("node", "get-info", endpoint=ep)
    assert info["node_id"] == driver.node_id
    assert info["accessible_topology"] == {"segments": {"topology.sepcsi.io/node": "e2e-node"}}
    out = ctl("node", "get-info", endpoint=ep, check_rc=EXIT_OK).stdout
    assert "node_id: e2e-node\n" in out


@pytest.mark.parametrize("mode,served,unserved", [
    ("node", "node", [(["controller", "get-capabilities"], "ControllerGetCapabilities"),
                      (["controller", "create-volume", "--name", "x"], "CreateVolume"),
                      (["controller", "delete-volume", "--volume-id", "x"], "DeleteVolume")]),
    ("controller", "controller", [(["node", "get-capabilities"], "NodeGetCapabilities"),
                                  (["node", "get-info"], "NodeGetInfo")]),
])
def test_service_not_served_exits_unimplemented(mode, served, unserved):
    """The error exit of the capability and info subcommands: a service this
    --mode does not serve."""
    d = conftest.Driver(extra_args=["--mode", mode])
    try:
        ctl(served, "get-capabilities", endpoint=d.endpoint, check_rc=EXIT_OK)
        for args, method in unserved:
            res = ctl(*args, endpoint=d.endpoint)
            assert "--mode" in assert_grpc_error(res, method, grpc.StatusCode.UNIMPLEMENTED)
    finally:
        d.stop()
        d.cleanup()


def test_rpcs_in_progress_report_the_drivers_answer(driver, paths):
    """Snapshots, capacity, expansion, stats, group snapshots, attach, listing:
    colleagues are landing these. sepcsictl must send the request (checked
    field by field against the recording server above) and report whatever the
    driver answers: a JSON answer, or the status with its exit code."""
    ep = driver.endpoint
    staging, target = paths
    vid = ctl_json("controller", "create-volume", "--name", "cli-prog", "--capacity", "64Mi",
                   endpoint=ep)["volume"]["volume_id"]
    ctl("node", "stage-volume", "--volume-id", vid, "--staging-path", staging, endpoint=ep,
        check_rc=EXIT_OK)
    ctl("node", "publish-volume", "--volume-id", vid, "--staging-path", staging, "--target-path",
        target, endpoint=ep, check_rc=EXIT_OK)
    calls = [
        (["controller", "validate-volume-capabilities", "--volume-id", vid],
         "ValidateVolumeCapabilities"),
        (["controller", "list-volumes", "--max-entries", "10"], "ListVolumes"),
        (["controller", "get-capacity", "--fs-type", "ext4"], "GetCapacity"),
        (["controller", "get-volume", "--volume-id", vid], "ControllerGetVolume"),
        (["controller", "publish-volume", "--volume-id", vid, "--node-id", driver.node_id],
         "ControllerPublishVolume"),
        (["controller", "unpublish-volume", "--volume-id", vid, "--node-id", driver.node_id],
         "ControllerUnpublishVolume"),
        (["controller", "modify-volume", "--volume-id", vid, "--mutable-param", "x=y"],
         "ControllerModifyVolume"),
        (["node", "get-volume-stats", "--volume-id", vid, "--volume-path", target],
         "NodeGetVolumeStats"),
        (["controller", "expand-volume", "--volume-id", vid, "--capacity", "128Mi"],
         "ControllerExpandVolume"),
        (["node", "expand-volume", "--volume-id", vid, "--volume-path", target,
          "--staging-path", staging, "--capacity", "128Mi"], "NodeExpandVolume"),
        (["group-controller", "get-capabilities"], "GroupControllerGetCapabilities"),
    ]
    for args, method in calls:
        answered(ctl("--output", "json", *args, endpoint=ep), method)
    snap = answered(ctl("--output", "json", "controller", "create-snapshot", "--name", "cli-s1",
                        "--source-volume-id", vid, endpoint=ep), "CreateSnapshot")
    sid = snap["snapshot"]["snapshot_id"] if snap else "ss-" + "0" * 32
    for args, method in [
        (["controller", "list-snapshots", "--source-volume-id", vid], "ListSnapshots"),
        (["controller", "get-snapshot", "--snapshot-id", sid], "GetSnapshot"),
        (["controller", "delete-snapshot", "--snapshot-id", sid], "DeleteSnapshot"),
    ]:
        answered(ctl("--output", "json", *args, endpoint=ep), method)
    group = answered(ctl("--output", "json", "group-controller", "create-volume-group-snapshot",
                         "--name", "cli-g1", "--source-volume-id", vid, endpoint=ep),
                     "CreateVolumeGroupSnapshot")
    gid, members = "gs-x", ["ss-x"]
    if group:
        gid = group["group_snapshot"]["group_snapshot_id"]
        members = [s["snapshot_id"] for s in group["group_snapshot"]["snapshots"]]
    member_flags = [x for m in members for x in ("--snapshot-id", m)]
    for rpc, method in (("get-volume-group-snapshot", "GetVolumeGroupSnapshot"),
                        ("delete-volume-group-snapshot", "DeleteVolumeGroupSnapshot")):
        answered(ctl("--output", "json", "group-controller", rpc, "--group-snapshot-id", gid,
                     *member_flags, endpoint=ep), method)
    # The error exit: an unknown volume or snapshot, or a token never handed
    # out, is never OK for these (NOT_FOUND, ABORTED, or UNIMPLEMENTED until they land).
    gone, gone_snap = "sv-" + "9" * 32, "ss-" + "9" * 32
    for args, method in [
        (["controller", "validate-volume-capabilities", "--volume-id", gone],
         "ValidateVolumeCapabilities"),
        (["controller", "list-volumes", "--starting-token", "no-such-token"], "ListVolumes"),
        (["controller", "get-volume", "--volume-id", gone], "ControllerGetVolume"),
        (["controller", "publish-volume", "--volume-id", gone, "--node-id", driver.node_id],
         "ControllerPublishVolume"),
        (["controller", "modify-volume", "--volume-id", gone, "--mutable-param", "x=y"],
         "ControllerModifyVolume"),
        (["controller", "expand-volume", "--volume-id", gone, "--capacity", "1Gi"],
         "ControllerExpandVolume"),
        (["controller", "create-snapshot", "--name", "cli-s2", "--source-volume-id", gone],
         "CreateSnapshot"),
        (["controller", "get-snapshot", "--snapshot-id", gone_snap], "GetSnapshot"),
        (["controller", "list-snapshots", "--starting-token", "no-such-token"], "ListSnapshots"),
        (["node", "get-volume-stats", "--volume-id", gone, "--volume-path", target],
         "NodeGetVolumeStats"),
        (["node", "expand-volume", "--volume-id", gone, "--volume-path", target],
         "NodeExpandVolume"),
        (["group-controller", "get-volume-group-snapshot", "--group-snapshot-id", "gs-none",
          "--snapshot-id", gone_snap], "GetVolumeGroupSnapshot"),
    ]:
        res = ctl(*args, endpoint=ep)
        assert res.returncode > EXIT_GRPC, (args, res.stdout)
        answered(res, method)

    ctl("node", "unpublish-volume", "--volume-id", vid, "--target-path", target, endpoint=ep,
        check_rc=EXIT_OK)
    ctl("node", "unstage-volume", "--volume-id", vid, "--staging-path", staging, endpoint=ep,
        check_rc=EXIT_OK)
    ctl("controller", "delete-volume", "--volume-id", vid, endpoint=ep, check_rc=EXIT_OK)


def test_block_volume_request(driver, paths):
    """Block access is being landed: create-volume --access-type block sends a
    block capability (see test_request_fields) and reports the answer."""
    ep = driver.endpoint
    res = ctl("--output", "json", "controller", "create-volume", "--name", "cli-blk",
              "--capacity", "16Mi", "--access-type", "block", endpoint=ep)
    vol = answered(res, "CreateVolume")
    if vol:
        ctl("controller", "delete-volume", "--volume-id", vol["volume"]["volume_id"],
            endpoint=ep, check_rc=EXIT_OK)


def stream_ranges(msgs, capacity, max_results=0):
    """The ranges of a whole stream (its JSON messages), checked as the spec says a
    stream must be: at least one message, one type and the volume's capacity in
    each, ranges within the capacity, ascending and disjoint."""
    assert msgs, "a stream sends at least one message"
    out = []
    for m in msgs:
        assert set(m) == {"block_metadata_type", "volume_capacity_bytes", "block_metadata"}
        assert m["block_metadata_type"] in ("FIXED_LENGTH", "VARIABLE_LENGTH")
        assert m["block_metadata_type"] == msgs[0]["block_metadata_type"]
        assert m["volume_capacity_bytes"] == capacity
        if max_results:
            assert len(m["block_metadata"]) <= max_results
        for b in m["block_metadata"]:
            off, n = b["byte_offset"], b["size_bytes"]
            assert off >= 0 and n > 0 and off + n <= capacity, b
            if out:
                assert out[-1][0] + out[-1][1] <= off, "ascending, disjoint"
            out.append((off, n))
    return out


def text_ranges(out, capacity):
    """The ranges of a stream's text output: one header, then the list, nothing else."""
    m = re.match(r"block_metadata_type: (FIXED|VARIABLE)_LENGTH\n"
                 r"volume_capacity_bytes: %d( \([0-9.]+ [KMGTPE]?i?B\))?\n" % capacity, out)
    assert m, out[:200]
    ranges = [(int(o), int(n)) for o, n in re.findall(
        r"^  - byte_offset: (\d+)\n    size_bytes: (\d+)(?: \([0-9.]+ [KMGTPE]?i?B\))?$", out,
        re.M)]
    assert out.count("\n") == 2 + (1 + 2 * len(ranges) if ranges else 0), out[:400]
    return ranges


def merged(ranges):
    """Ranges with the adjacent ones joined: the bytes they cover, however split."""
    out = []
    for off, n in ranges:
        if out and out[-1][0] + out[-1][1] == off:
            out[-1][1] += n
        else:
            out.append([off, n])
    return [tuple(r) for r in out]


@pytest.fixture
def md_driver():
    """A driver serving the SnapshotMetadata service (off by default)."""
    yield from conftest.running(conftest.Driver(extra_args=["--snapshot-metadata", "on"]))


def test_snapshot_metadata(md_driver):
    """Both streaming verbs against the driver, on a staged ext4 volume written to and
    snapshotted twice: the allocated ranges of a snapshot (text and JSON agree; a
    starting offset and max results are honoured), the delta of a snapshot against
    itself (nothing) and against the next one (at least what was written between),
    every range within the capacity. An unknown snapshot is NOT_FOUND, a missing id
    INVALID_ARGUMENT, an offset past the end OUT_OF_RANGE: each its exit code, stdout empty."""
    driver = md_driver
    ep = driver.endpoint
    staging = os.path.join(driver.root, "staging", "vol")
    os.makedirs(staging)
    sm = "snapshot-metadata"
    vol = ctl_json("controller", "create-volume", "--name", "cli-sm", "--capacity", "64Mi",
                   "--fs-type", "ext4", endpoint=ep)["volume"]
    vid, cap = vol["volume_id"], vol["capacity_bytes"]
    ctl("node", "stage-volume", "--volume-id", vid, "--staging-path", staging, "--fs-type", "ext4",
        endpoint=ep, check_rc=EXIT_OK)

    def write_and_snapshot(name, mib):
        with open(os.path.join(staging, name), "wb") as f:
            f.write(os.urandom(mib << 20))
            os.fsync(f.fileno())
        os.sync()
        return ctl_json("controller", "create-snapshot", "--name", "cli-sm-" + name,
                        "--source-volume-id", vid, endpoint=ep)["snapshot"]["snapshot_id"]
    s1 = write_and_snapshot("a", 1)
    s2 = write_and_snapshot("b", 2)

    def stream(*args, max_results=0):
        res = ctl("--output", "json", sm, *args, endpoint=ep, check_rc=EXIT_OK)
        return stream_ranges(stream_lines(res.stdout), cap, max_results)

    alloc = stream("get-metadata-allocated", "--snapshot-id", s1)
    assert sum(n for _, n in alloc) >= 1 << 20, alloc  # mkfs's blocks and the file's
    text = ctl(sm, "get-metadata-allocated", "--snapshot-id", s1, endpoint=ep,
               check_rc=EXIT_OK).stdout
    assert merged(text_ranges(text, cap)) == merged(alloc)
    start = alloc[0][0] + alloc[0][1]
    part = stream("get-metadata-allocated", "--snapshot-id", s1, "--starting-offset", str(start),
                  "--max-results", "1", max_results=1)
    assert merged(part) == merged(alloc[1:])

    assert stream("get-metadata-delta", "--base-snapshot-id", s1, "--target-snapshot-id", s1) == []
    text = ctl(sm, "get-metadata-delta", "--base-snapshot-id", s2, "--target-snapshot-id", s2,
               endpoint=ep, check_rc=EXIT_OK).stdout
    assert text_ranges(text, cap) == []
    delta = stream("get-metadata-delta", "--base-snapshot-id", s1, "--target-snapshot-id", s2)
    assert sum(n for _, n in delta) >= 2 << 20, delta  # file b, at least
    text = ctl(sm, "get-metadata-delta", "--base-snapshot-id", s1, "--target-snapshot-id", s2,
               "--max-results", "2", endpoint=ep, check_rc=EXIT_OK).stdout
    assert merged(text_ranges(text, cap)) == merged(delta)

    gone = "ss-" + "9" * 32
    for args, method, code, needle in [
        (["get-metadata-allocated", "--snapshot-id", gone], ALLOC, grpc.StatusCode.NOT_FOUND,
         gone),
        (["get-metadata-delta", "--base-snapshot-id", gone, "--target-snapshot-id", s1], DELTA,
         grpc.StatusCode.NOT_FOUND, gone),
        (["get-metadata-delta", "--base-snapshot-id", s1, "--target-snapshot-id", gone], DELTA,
         grpc.StatusCode.NOT_FOUND, gone),
        (["get-metadata-allocated"], ALLOC, grpc.StatusCode.INVALID_ARGUMENT, "snapshot_id"),
        (["get-metadata-delta", "--base-snapshot-id", s1], DELTA,
         grpc.StatusCode.INVALID_ARGUMENT, "target_snapshot_id"),
        (["get-metadata-allocated", "--snapshot-id", s1, "--starting-offset", "1Gi"], ALLOC,
         grpc.StatusCode.OUT_OF_RANGE, "starting_offset"),
    ]:
        for fmt in ("text", "json"):
            res = ctl("--output", fmt, sm, *args, endpoint=ep)
            assert needle in assert_grpc_error(res, method, code), (args, res.stderr)
            assert res.stdout == "", args

    for sid in (s1, s2):
        ctl("controller", "delete-snapshot", "--snapshot-id", sid, endpoint=ep, check_rc=EXIT_OK)
    res = ctl(sm, "get-metadata-allocated", "--snapshot-id", s1, endpoint=ep)
    assert_grpc_error(res, ALLOC, grpc.StatusCode.NOT_FOUND)
    ctl("node", "unstage-volume", "--volume-id", vid, "--staging-path", staging, endpoint=ep,
        check_rc=EXIT_OK)
    ctl("controller", "delete-volume", "--volume-id", vid, endpoint=ep, check_rc=EXIT_OK)


# ---- the store views ----

def test_store_views(driver, paths):
    ep = driver.endpoint
    staging, target = paths
    vid = ctl_json("controller", "create-volume", "--name", "cli-store", "--capacity", "64Mi",
                   "--fs-type", "ext4", endpoint=ep)["volume"]["volume_id"]
    ctl("node", "stage-volume", "--volume-id", vid, "--staging-path", staging, "--fs-type", "ext4",
        endpoint=ep, check_rc=EXIT_OK)
    ctl("node", "publish-volume", "--volume-id", vid, "--staging-path", staging, "--target-path",
        target, "--fs-type", "ext4", "--readonly", endpoint=ep, check_rc=EXIT_OK)
    sd = ["--state-dir", driver.state]

    rows = ctl_json("store", "volumes", *sd)["volumes"]
    assert [(r["id"], r["name"], r["fs_type"]) for r in rows] == [(vid, "cli-store", "ext4")]
    assert rows[0]["capacity_bytes"] >= 64 << 20
    text = ctl("store", "volumes", *sd, check_rc=EXIT_OK).stdout.splitlines()
    assert text[0].split()[:3] == ["id", "name", "capacity_bytes"]
    assert text[1].split()[:4] == [vid, "cli-store", "64", "MiB"]

    rows = ctl_json("store", "stagings", *sd)["stagings"]
    assert [(r["volume_id"], r["staging_path"]) for r in rows] == [(vid, staging)]
    text = ctl("store", "stagings", *sd, check_rc=EXIT_OK).stdout
    assert staging in text and "mount" in text and "single-node-writer" in text

    rows = ctl_json("store", "publications", *sd)["publications"]
    assert [(r["volume_id"], r["target_path"], r["readonly"]) for r in rows] == \
        [(vid, target, 1)]

    for view in ("snapshots", "group-snapshots", "attachments", "intents"):
        table = view.replace("-", "_")
        res = ctl("--output", "json", "store", view, *sd, check_rc=EXIT_OK)
        assert json.loads(res.stdout) == {table: []}
        if res.stderr:
            assert "has no %s table" % table in res.stderr
    info = ctl_json("store", "info", *sd)
    assert info["sepcsi_store"] is True and info["schema_version"] >= 1
    assert info["tables"]["volumes"] == 1 and info["tables"]["publications"] == 1

    # Read-only: no file is added to the state dir, and every file keeps the
    # owner of the database (rpcd's uid), so rpcd can still open its WAL.
    def files():
        return {f: os.stat(os.path.join(driver.state, f)).st_uid
                for f in os.listdir(driver.state)}
    before = files()
    ctl("store", "volumes", *sd, check_rc=EXIT_OK)
    assert files() == before
    owner = os.stat(os.path.join(driver.state, "sepcsi.db")).st_uid
    assert set(before.values()) == {owner}

    ctl("node", "unpublish-volume", "--volume-id", vid, "--target-path", target, endpoint=ep,
        check_rc=EXIT_OK)
    ctl("node", "unstage-volume", "--volume-id", vid, "--staging-path", staging, endpoint=ep,
        check_rc=EXIT_OK)
    ctl("controller", "delete-volume", "--volume-id", vid, endpoint=ep, check_rc=EXIT_OK)
    assert ctl_json("store", "volumes", *sd) == {"volumes": []}
    assert "(no volumes)" in ctl("store", "volumes", *sd, check_rc=EXIT_OK).stdout

    # The check, next to the running driver: ok, and no file added either.
    assert ctl("store", "check", *sd, check_rc=EXIT_OK).stdout == "ok\n"
    assert ctl_json("store", "check", *sd) == {
        "path": os.path.join(driver.state, "sepcsi.db"), "ok": True, "result": "ok"}
    assert files() == before

    # With the driver stopped (its WAL checkpointed away) the store still reads,
    # and still nothing is created beside it.
    driver.stop()
    before = files()
    assert ctl_json("store", "stagings", *sd) == {"stagings": []}
    assert ctl("store", "check", *sd, check_rc=EXIT_OK).stdout == "ok\n"
    assert files() == before


def test_store_check_damaged(tmp_path):
    """`store check` says what is wrong with a damaged store (exit 1), and that
    there is none (exit 3); it changes nothing in the file."""
    sd = ["--state-dir", str(tmp_path)]
    res = ctl("store", "check", *sd, check_rc=EXIT_ABSENT)
    assert "no store at %s/sepcsi.db" % tmp_path in res.stderr
    path = tmp_path / "sepcsi.db"
    db = sqlite3.connect(str(path))
    db.executescript("""
        PRAGMA application_id = 1936027747; PRAGMA user_version = 3;
        CREATE TABLE volumes (id TEXT PRIMARY KEY, name TEXT UNIQUE);
    """)
    db.executemany("INSERT INTO volumes VALUES (?, ?)",
                   [("sv-%04d" % i, "pvc-%04d" % i) for i in range(2000)])
    db.commit()
    db.close()
    assert ctl("store", "check", *sd, check_rc=EXIT_OK).stdout == "ok\n"
    data = bytearray(path.read_bytes())
    middle = len(data) // 4096 // 2 * 4096
    data[middle:middle + 4096] = bytes((i * 131 + 17) % 256 for i in range(4096))
    path.write_bytes(bytes(data))
    res = ctl("store", "check", *sd, check_rc=EXIT_FAILURE)
    assert res.stdout == ""
    assert res.stderr.startswith("sepcsictl: store check %s: damaged" % path), res.stderr
    out = json.loads(ctl("--output", "json", "store", "check", *sd,
                         check_rc=EXIT_FAILURE).stdout)
    assert out["ok"] is False and out["result"].startswith("store check %s: damaged" % path)
    assert path.read_bytes() == bytes(data)
    assert sorted(os.listdir(tmp_path)) == ["sepcsi.db"]
    path.write_bytes(b"not a database, just text\n" * 200)
    res = ctl("store", "check", *sd, check_rc=EXIT_FAILURE)
    assert "not a sqlite database" in res.stderr


def test_store_absent_or_foreign(tmp_path):
    res = ctl("store", "volumes", "--state-dir", str(tmp_path))
    assert res.returncode == EXIT_ABSENT
    assert "no store at %s/sepcsi.db" % tmp_path in res.stderr
    db = sqlite3.connect(str(tmp_path / "sepcsi.db"))
    db.execute("CREATE TABLE volumes (id TEXT)")
    db.commit()
    db.close()
    res = ctl("store", "volumes", "--state-dir", str(tmp_path))
    assert res.returncode == EXIT_FAILURE and "not a sepcsi store" in res.stderr


def test_store_later_schema(tmp_path):
    """Tables and columns a later schema adds show without a change to sepcsictl."""
    db = sqlite3.connect(str(tmp_path / "sepcsi.db"))
    db.executescript("""
        PRAGMA application_id = 1936027747; PRAGMA user_version = 2;
        CREATE TABLE volumes (id TEXT PRIMARY KEY, name TEXT, capacity_bytes INTEGER,
                              parameters TEXT, created_unix_ns INTEGER);
        CREATE TABLE snapshots (id TEXT PRIMARY KEY, source_volume_id TEXT,
                                size_bytes INTEGER, ready_to_use INTEGER, extra BLOB);
        INSERT INTO volumes VALUES ('sv-1', 'n', 1073741824, 'a=b
c=d
', 1795000000000000000);
        INSERT INTO snapshots VALUES ('ss-1', 'sv-1', 512, 1, x'00ff');
    """)
    db.commit()
    db.close()
    sd = ["--state-dir", str(tmp_path)]
    assert ctl_json("store", "snapshots", *sd) == {"snapshots": [
        {"id": "ss-1", "source_volume_id": "sv-1", "size_bytes": 512, "ready_to_use": 1,
         "extra": "00ff"}]}
    out = ctl("store", "volumes", *sd, check_rc=EXIT_OK).stdout.splitlines()
    assert out[1].split() == ["sv-1", "n", "1", "GiB", "a=b,c=d", "2026-11-18T11:06:40Z"]
    out = ctl("store", "snapshots", *sd, check_rc=EXIT_OK).stdout.splitlines()
    assert out[1].split() == ["ss-1", "sv-1", "512", "B", "true", "00ff"]
    res = ctl("store", "attachments", *sd, check_rc=EXIT_OK)
    assert "schema version 2) has no attachments table" in res.stderr
    assert res.stdout == ""
    res = ctl("--output", "json", "store", "group_snapshots", *sd, check_rc=EXIT_OK)
    assert json.loads(res.stdout) == {"group_snapshots": []}
    info = ctl_json("store", "info", *sd)
    assert info["schema_version"] == 2
    assert info["tables"] == {"volumes": 1, "snapshots": 1, "group_snapshots": None,
                              "stagings": None, "publications": None, "attachments": None,
                              "intents": None}


# ---- the audit view ----

AUDIT_LINES = [
    {"time": "2026-11-22T10:00:00Z", "req": "1", "op": "STAGE", "volume_id": "sv-a",
     "path": "/k/s", "result": "ok"},
    {"time": "2026-11-22T10:00:01Z", "req": "2", "op": "PUBLISH", "volume_id": "sv-b",
     "path": "/k/t one", "result": "refused", "kind": "EXISTS", "errno": 17,
     "reason": "already \"there\""},
    {"time": "2026-11-22T10:00:02Z", "req": "3", "op": "CAPACITY", "result": "ok",
     "nested": {"a": [1, 2]}},
]


def write_audit(path, lines, extra=""):
    with open(path, "w") as f:
        for l in lines:
            f.write(json.dumps(l) + "\n")
        f.write(extra)


def test_audit_view(tmp_path):
    log = tmp_path / "audit.log"
    write_audit(log, AUDIT_LINES)
    dd = ["--data-dir", str(tmp_path)]
    out = ctl("audit", *dd, check_rc=EXIT_OK).stdout.splitlines()
    assert out[0] == "2026-11-22T10:00:00Z req=1 op=STAGE volume_id=sv-a path=/k/s result=ok"
    assert out[1] == ('2026-11-22T10:00:01Z req=2 op=PUBLISH volume_id=sv-b path="/k/t one" '
                      'result=refused kind=EXISTS errno=17 reason="already \\"there\\""')
    # A value that is not a string shows as compact JSON (json-c's), not as written.
    assert out[2] == '2026-11-22T10:00:02Z req=3 op=CAPACITY result=ok nested={"a":[1,2]}'
    res = ctl("--output", "json", "audit", *dd, check_rc=EXIT_OK)
    assert [json.loads(l) for l in res.stdout.splitlines()] == AUDIT_LINES
    res = ctl("--output", "json", "audit", *dd, "--volume", "sv-b", check_rc=EXIT_OK)
    assert [json.loads(l) for l in res.stdout.splitlines()] == [AUDIT_LINES[1]]

    # A key without its colon after a good line: nothing of the good line is freed twice.
    write_audit(log, AUDIT_LINES[:1],
                extra="not json\n{\"op\" \"STAGE\"}\n{\"volume_id\": \"sv-a\", \"half\": ")
    res = ctl("audit", *dd, check_rc=EXIT_OK)
    assert res.stdout.splitlines()[1:3] == ["not json", '{"op" "STAGE"}']
    assert "3 line(s)" in res.stderr


def test_audit_ambiguous_lines(tmp_path):
    """A line with a key given twice, a NUL or an escaped surrogate in a key or
    a value, or a single-quoted string is not read as an entry: it is shown as
    written and counted, and never matches --volume."""
    bad = ['{"volume_id": "sv-a", "volume_id": "sv-b"}', '{"volume_id\\u0000x": "sv-a"}',
           '{"volume_id": "sv-a\\u0000b"}', "{'volume_id': 'sv-a'}",
           '{"volume_id": "sv-a", "reason": "\\ud836\\ude00"}']
    (tmp_path / "audit.log").write_text("".join(l + "\n" for l in bad))
    res = ctl("audit", "--data-dir", str(tmp_path), check_rc=EXIT_OK)
    assert res.stdout.splitlines() == bad
    assert "5 line(s)" in res.stderr
    res = ctl("audit", "--data-dir", str(tmp_path), "--volume", "sv-a", check_rc=EXIT_OK)
    assert res.stdout == ""


def test_audit_follow(tmp_path):
    log = tmp_path / "audit.log"
    write_audit(log, AUDIT_LINES[:1])
    p = subprocess.Popen([CTL, "audit", "--data-dir", str(tmp_path), "--follow",
                          "--volume", "sv-b"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        with open(log, "a") as f:
            f.write(json.dumps(AUDIT_LINES[0]) + "\n")
            f.write(json.dumps(AUDIT_LINES[1])[:20])  # half a line: not shown yet
            f.flush()
            time.sleep(0.5)
            f.write(json.dumps(AUDIT_LINES[1])[20:] + "\n")
        line = p.stdout.readline()
        assert line.startswith("2026-11-22T10:00:01Z req=2 op=PUBLISH volume_id=sv-b ")
        # Rotation: the file is replaced; following starts over on the new one.
        os.rename(log, str(log) + ".1")
        write_audit(log, [dict(AUDIT_LINES[1], req="9")])
        line = p.stdout.readline()
        assert "req=9" in line
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


def test_audit_reads_a_line_at_a_time_and_cuts_one_too_long(tmp_path):
    """Only the line being read is held: one of 8 MiB without a newline (a full disk, a
    hostile writer) is shown cut at 64 KiB, as a line that does not parse, and the lines
    after it as written, in order with the other file's."""
    def rec(ts, req):
        return json.dumps({"ts": "2026-11-29T10:00:0%dZ" % ts, "event": "audit",
                           "req": str(req), "op": "STAGE", "result": "ok"}) + "\n"
    with open(tmp_path / "helper-audit.log", "w") as f:
        f.write(rec(1, 1) + '{"ts":"2026-11-29T10:00:02Z","reason":"' + "x" * (8 << 20) +
                '"}\n' + rec(4, 4))
    with open(tmp_path / "audit.log", "w") as f:
        f.write(rec(3, 3) + rec(5, 5))
    res = ctl("audit", "--data-dir", str(tmp_path), check_rc=EXIT_OK)
    lines = res.stdout.splitlines()
    assert len(lines) == 5, [l[:80] for l in lines]
    assert [l.split("req=")[1][0] for l in lines if "req=" in l] == ["1", "3", "4", "5"]
    cut = lines[1]
    assert cut.startswith('helper-audit.log: {"ts":"2026-11-29T10:00:02Z"')
    assert len(cut) == len("helper-audit.log: ") + 64 * 1024, len(cut)
    assert "1 line(s)" in res.stderr


def test_audit_core_and_helper_files_in_time_order(tmp_path):
    """audit.log (the core's) and helper-audit.log (the helper's under its own uid) are
    shown as one, oldest first, --volume across both; either alone is enough; --follow
    takes up helper-audit.log when it appears."""
    def rec(ts, req, vid):
        return {"ts": "2026-11-29T10:00:0%dZ" % ts, "event": "audit", "req": str(req),
                "op": "STAGE", "volume_id": vid, "result": "ok"}
    core, helper = tmp_path / "audit.log", tmp_path / "helper-audit.log"
    write_audit(helper, [rec(2, 2, "sv-b"), rec(4, 4, "sv-a")])
    dd = ["--data-dir", str(tmp_path)]
    res = ctl("--output", "json", "audit", *dd, check_rc=EXIT_OK)
    assert [json.loads(l)["req"] for l in res.stdout.splitlines()] == ["2", "4"]
    write_audit(core, [rec(1, 1, "sv-a"), rec(3, 3, "sv-b"), rec(5, 5, "sv-a")])
    res = ctl("--output", "json", "audit", *dd, check_rc=EXIT_OK)
    assert [json.loads(l)["req"] for l in res.stdout.splitlines()] == list("12345")
    res = ctl("--output", "json", "audit", *dd, "--volume", "sv-a", check_rc=EXIT_OK)
    got = [json.loads(l) for l in res.stdout.splitlines()]
    assert [r["req"] for r in got] == ["1", "4", "5"]
    # No line of the helper's passes for one of the core's: each says where it came from.
    assert [r.get("source") for r in got] == [None, "helper-audit.log", None]
    text = ctl("audit", *dd, check_rc=EXIT_OK).stdout.splitlines()
    assert [t.startswith("helper-audit.log: ") for t in text] == [False, True, False, True,
                                                                  False]
    # What a compromised helper may write fools nobody: a source of its own, escapes, C1
    # and bidirectional controls, a key that draws a line of its own, JSON whitespace
    # the output would break on, a line that is no JSON at all.
    forged = [dict(rec(3, 7, "sv-b"), source="audit.log"),
              dict(rec(3, 8, "sv-b"), ts="2026-11-29T10:00:03Z\x1b[1A\x1b[2K\r\u009b\u202e"),
              {"ts": "2026-11-29T10:00:03Z", "req": "9",
               " " * 80 + "2026-11-29T10:00:03Z op=DELETE result": "ok"}]
    with open(helper, "w") as f:
        for r in forged:
            f.write(json.dumps(r) + "\n")
        f.write('{"ts":"2026-11-29T10:00:03Z",\t"req":"10"}\nnot json\n')
    for fmt in ("text", "json"):
        res = ctl("--output", fmt, "audit", *dd, check_rc=EXIT_OK)
        assert all(0x20 <= ord(c) < 0x7f for c in res.stdout.replace("\n", "")), res.stdout
        assert "2 line(s)" in res.stderr
        lines = res.stdout.splitlines()
        if fmt == "json":
            got = [json.loads(l) for l in lines]  # every line one object, whatever was written
            assert [r.get("req") for r in got if "source" not in r] == ["1", "3", "5"]
            assert all(r["source"] == "helper-audit.log" for r in got if "source" in r)
            assert {r.get("req") for r in got if "source" in r} == {None, "8", "9", "10"}
        else:
            core = [l for l in lines if not l.startswith("helper-audit.log: ")]
            assert [l.split()[2] for l in core] == ["req=1", "req=3", "req=5"], lines
            assert len(lines) == 3 + 5
    os.unlink(helper)
    p = subprocess.Popen([CTL, "--output", "json", "audit", *dd, "--follow"],
                         stdout=subprocess.PIPE, text=True)
    try:
        assert [json.loads(p.stdout.readline())["req"] for _ in range(3)] == ["1", "3", "5"]
        write_audit(helper, [rec(6, 6, "sv-b")])
        assert json.loads(p.stdout.readline())["req"] == "6"
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)


def test_audit_absent_or_driver_log(driver, paths):
    res = ctl("audit", "--data-dir", driver.tmp)
    assert res.returncode == EXIT_ABSENT
    assert "no audit log at %s/audit.log" % driver.tmp in res.stderr
    # The core's log, and the helper's own, once there is a volume.
    staging, _ = paths
    vid = ctl_json("controller", "create-volume", "--name", "cli-audit", "--capacity", "64Mi",
                   endpoint=driver.endpoint)["volume"]["volume_id"]
    ctl("node", "stage-volume", "--volume-id", vid, "--staging-path", staging,
        endpoint=driver.endpoint, check_rc=EXIT_OK)
    res = ctl("--output", "json", "audit", "--data-dir", driver.data, "--volume", vid)
    if res.returncode == EXIT_ABSENT:
        assert "no audit log at %s/audit.log" % driver.data in res.stderr
    else:
        assert res.returncode == EXIT_OK, res.stderr
        lines = [json.loads(l) for l in res.stdout.splitlines()]
        assert lines and all(l.get("volume_id") == vid for l in lines)
    ctl("node", "unstage-volume", "--volume-id", vid, "--staging-path", staging,
        endpoint=driver.endpoint, check_rc=EXIT_OK)
    ctl("controller", "delete-volume", "--volume-id", vid, endpoint=driver.endpoint,
        check_rc=EXIT_OK)
