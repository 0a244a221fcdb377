"""An independent CRI v1 client for the integration tests.

The message classes come from protoc's Python output for proto/cri_api.proto (generated on
demand into a cache directory); the stubs are built here from the service descriptors, one
callable per method, so every RuntimeService and ImageService method can be called:

    c = cri.Client("/run/kiyot.sock")
    c.runtime.Version(c.pb.VersionRequest())
    c.image.PullImage(c.pb.PullImageRequest(image=c.pb.ImageSpec(image="busybox")))
    for ev in c.runtime.GetContainerEvents(c.pb.GetEventsRequest(), timeout=5): ...
"""

import hashlib
import importlib
import os
import subprocess
import sys

import grpc

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CACHE = os.environ.get("KIYOT_ITEST_CACHE", "/var/tmp/kiyot-itest")

RUNTIME_METHODS = 29
IMAGE_METHODS = 5

_pbs = {}


def load_proto(name):
    """Generates (once per proto content) and imports the message classes of proto/<name>.proto,
    e.g. "cri_api" (runtime.v1) or "cellagent" (kiyot.cell.v1)."""
    if name in _pbs:
        return _pbs[name]
    proto = os.path.join(REPO, "proto", name + ".proto")
    with open(proto, "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:16]
    out = os.path.join(CACHE, "py-%s-%s" % (name, h))
    if not os.path.exists(os.path.join(out, name + "_pb2.py")):
        tmp = out + ".tmp%d" % os.getpid()
        os.makedirs(tmp, exist_ok=True)
        subprocess.run(["protoc", "--python_out=" + tmp, "-I" + os.path.dirname(proto), proto],
                       check=True)
        try:
            os.rename(tmp, out)
        except OSError:
            pass  # another run made it first
    if out not in sys.path:
        sys.path.insert(0, out)
    _pbs[name] = importlib.import_module(name + "_pb2")
    return _pbs[name]


def load_pb():
    """The runtime.v1 message classes."""
    return load_proto("cri_api")


class _Service:
    """Attributes named after the service's methods; each is a grpc multi-callable."""

    def __init__(self, channel, pb, name):
        svc = pb.DESCRIPTOR.services_by_name[name]
        self.methods = []
        for m in svc.methods:
            req = getattr(pb, m.input_type.name)
            resp = getattr(pb, m.output_type.name)
            path = "/%s/%s" % (svc.full_name, m.name)
            kind = channel.unary_stream if m.server_streaming else channel.unary_unary
            setattr(self, m.name, kind(path, request_serializer=req.SerializeToString,
                                       response_deserializer=resp.FromString))
            self.methods.append(m.name)


class Client:
    """A connection to a CRI server on a unix socket."""

    def __init__(self, socket_path):
        self.pb = load_pb()
        self.channel = grpc.insecure_channel("unix://" + socket_path)
        self.runtime = _Service(self.channel, self.pb, "RuntimeService")
        self.image = _Service(self.channel, self.pb, "ImageService")
        if (len(self.runtime.methods), len(self.image.methods)) != (RUNTIME_METHODS,
                                                                    IMAGE_METHODS):
            raise RuntimeError("cri_api.proto does not have the CRI v1 method set")

    def wait_ready(self, timeout):
        grpc.channel_ready_future(self.channel).result(timeout=timeout)

    def close(self):
        self.channel.close()


def code_of(exc):
    """The grpc status code of an RpcError (None for anything else)."""
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        return exc.code()
    return None


def details_of(exc):
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "details"):
        return exc.details() or ""
    return str(exc)
