"""A small, independent CSI client for sepcsi's end-to-end tests.

The Python protobuf module is generated from the repository's own
proto/csi.proto when this module is first imported (protoc into a temporary
directory private to this process, removed at exit), so the tests always speak
exactly the contract the C code is built from. The generated module is
exposed as `pb` (it is imported as `csi_pb2`).

Calls go through plain grpcio with explicit method paths
("/csi.v1.<Service>/<Method>"); failures surface as grpc.RpcError, so tests
can check `.code()` and `.details()`.

    c = CsiClient("unix:///run/sepcsi/csi.sock")
    c.node("NodeStageVolume", volume_id=vid, staging_target_path=path,
           volume_capability=mount_cap("xfs"))
"""

import atexit
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import grpc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.path.join(REPO, "proto")


def _generate_pb():
    """Run protoc on proto/csi.proto and import the result as csi_pb2."""
    if "csi_pb2" in sys.modules:
        return sys.modules["csi_pb2"]
    out = tempfile.mkdtemp(prefix="sepcsi-pb-")
    atexit.register(shutil.rmtree, out, True)
    cmd = ["protoc", "--python_out=" + out, "-I" + PROTO_DIR, "-I/usr/include", "csi.proto"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError("protoc failed on %s/csi.proto:\n%s" % (PROTO_DIR, res.stderr))
    sys.path.insert(0, out)
    try:
        return importlib.import_module("csi_pb2")
    finally:
        sys.path.remove(out)


pb = _generate_pb()


class CsiClient:
    """One gRPC channel to a CSI endpoint such as "unix:///path/csi.sock"."""

    pb = pb  # the generated messages, handy as client.pb.CapacityRange(...)

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.channel = grpc.insecure_channel(endpoint)

    def call(self, service, method, request, timeout=30):
        """Unary call /csi.v1.<service>/<method>; returns <method>Response."""
        rpc = self.channel.unary_unary(
            "/csi.v1.%s/%s" % (service, method),
            request_serializer=lambda msg: msg.SerializeToString(),
            response_deserializer=getattr(pb, method + "Response").FromString)
        return rpc(request, timeout=timeout)

    def stream_iter(self, service, method, request, timeout=30):
        """Server-streaming call (SnapshotMetadata): its responses as they come, from an
        iterator that can also be cancelled (.cancel())."""
        rpc = self.channel.unary_stream(
            "/csi.v1.%s/%s" % (service, method),
            request_serializer=lambda msg: msg.SerializeToString(),
            response_deserializer=getattr(pb, method + "Response").FromString)
        return rpc(request, timeout=timeout)

    def stream(self, service, method, request, timeout=30):
        """Server-streaming call (SnapshotMetadata); returns all responses."""
        return list(self.stream_iter(service, method, request, timeout))

    def raw(self, service, method, data, timeout=30):
        """Send arbitrary request bytes; return the raw response bytes."""
        rpc = self.channel.unary_unary("/csi.v1.%s/%s" % (service, method))
        return rpc(bytes(data), timeout=timeout)

    def _build_and_call(self, service, method, timeout, fields):
        request = getattr(pb, method + "Request")(**fields)
        return self.call(service, method, request, timeout=timeout)

    def identity(self, method, timeout=30, **fields):
        return self._build_and_call("Identity", method, timeout, fields)

    def controller(self, method, timeout=30, **fields):
        return self._build_and_call("Controller", method, timeout, fields)

    def node(self, method, timeout=30, **fields):
        return self._build_and_call("Node", method, timeout, fields)

    def group_controller(self, method, timeout=30, **fields):
        return self._build_and_call("GroupController", method, timeout, fields)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _access_mode(mode):
    """AccessMode from a mode name ("SINGLE_NODE_WRITER") or number."""
    modes = pb.VolumeCapability.AccessMode.Mode
    value = modes.Value(mode) if isinstance(mode, str) else int(mode)
    return pb.VolumeCapability.AccessMode(mode=value)


def mount_cap(fs_type="ext4", mode="SINGLE_NODE_WRITER", flags=()):
    """A filesystem VolumeCapability."""
    return pb.VolumeCapability(
        mount=pb.VolumeCapability.MountVolume(fs_type=fs_type, mount_flags=list(flags)),
        access_mode=_access_mode(mode))


def block_cap(mode="SINGLE_NODE_WRITER"):
    """A raw block VolumeCapability."""
    return pb.VolumeCapability(block=pb.VolumeCapability.BlockVolume(),
                               access_mode=_access_mode(mode))


def wait_ready(endpoint, timeout):
    """Retry GetPluginInfo until the plugin answers; return its response.

    A fresh channel per attempt avoids gRPC's growing reconnect backoff while
    the socket does not exist yet. Raises TimeoutError with the last error.
    """
    deadline = time.monotonic() + timeout
    last = None
    while True:
        with CsiClient(endpoint) as c:
            try:
                return c.identity("GetPluginInfo", timeout=1)
            except grpc.RpcError as e:
                last = e
        if time.monotonic() >= deadline:
            raise TimeoutError("%s not ready after %ss: %s" % (endpoint, timeout, last))
        time.sleep(0.1)
