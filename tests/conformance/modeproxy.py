"""A CSI endpoint in front of another that asks for one access mode instead of another.

csi-sanity v5.3.1 has no flag for the access mode of its test volumes: every capability it
sends is SINGLE_NODE_WRITER. To run its suite with a multi-node mode (directory volumes on
a shared base), sanity.py puts this in front of each driver endpoint: every unary call is
passed on unchanged but for each VolumeCapability's access mode, rewritten from one mode
to another (requests only; answers and status codes come back as the driver gave them).
"""
import os
import sys
import threading
from concurrent import futures

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

from csi_client import pb  # noqa: E402


def rewrite(msg, old, new):
    """Every VolumeCapability in msg (at any depth) asking for mode old asks for new."""
    if msg.DESCRIPTOR.full_name == "csi.v1.VolumeCapability":
        if msg.HasField("access_mode") and msg.access_mode.mode == old:
            msg.access_mode.mode = new
        return
    for field, value in msg.ListFields():
        if field.message_type is None or (field.message_type.GetOptions().map_entry):
            continue
        for m in (value if field.label == field.LABEL_REPEATED else [value]):
            rewrite(m, old, new)


class Proxy(grpc.GenericRpcHandler):
    """Listens on unix:// listen, forwards every unary call to backend."""

    def __init__(self, listen, backend, old, new):
        self.channel = grpc.insecure_channel(backend)
        self.old, self.new = old, new
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers([self])
        self.server.add_insecure_port(listen)
        self.lock = threading.Lock()

    def service(self, handler_call_details):
        method = handler_call_details.method  # "/csi.v1.Node/NodePublishVolume"
        name = method.rsplit("/", 1)[-1]
        req_type = getattr(pb, name + "Request", None)
        if req_type is None:
            return None

        def forward(raw, context):
            req = req_type.FromString(raw)
            rewrite(req, self.old, self.new)
            call = self.channel.unary_unary(method, request_serializer=None,
                                            response_deserializer=None)
            try:
                return call(req.SerializeToString(), timeout=300)
            except grpc.RpcError as e:
                context.abort(e.code(), e.details())

        return grpc.unary_unary_rpc_method_handler(forward, request_deserializer=None,
                                                   response_serializer=None)

    def start(self):
        self.server.start()
        return self

    def stop(self):
        self.server.stop(2).wait()
        self.channel.close()
