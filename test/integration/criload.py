"""Load for a CRI server: mutated requests of every method, and bursts of concurrent calls.

Mutator makes request bodies (bytes) for any CRI v1 method, in the ways a hostile or broken
client would send them:
  - valid: a message of the method's request type with random fields set (strings short,
    empty, unicode, or the ids of things the server knows; numbers at their limits; enums out
    of range; repeated fields and maps of up to thousands of entries; nested messages);
  - mutated: such a message packed, then bytes flipped, cut short, inserted or repeated;
  - garbage: random bytes (rarely a few MiB of them);
  - huge: a valid message with strings of up to HUGE bytes (within the server's 16 MiB limit).

    m = Mutator(pb, random.Random(1), ids=[pod_id, cid], images=[ref])
    body = m.request("ContainerStatus")      # bytes, for a raw unary_unary callable

Fuzz sends them with a bounded number in flight for a given time; burst() sends calls at once
from this process and times each from its own send to its answer; burst_procs() does the same
from several processes at one moment, so that the client's interpreter is not what paces the
calls. Run as a program, this file is one such process:

    criload.py burst SOCKET CONNS CALLS KIND START CONTAINER IMAGE
        CALLS calls of KIND ("mix" or "version") over CONNS connections of their own, sent at
        the wall-clock time START; prints the latencies (seconds) and errors as JSON
"""

import json
import os
import random
import subprocess
import sys
import threading
import time

import grpc
from google.protobuf.descriptor import FieldDescriptor as F

import cri

HUGE = 6 << 20  # the largest string a huge request carries
HUGE_BUDGET = 12 << 20  # per request, under the server's 16 MiB receive limit
MAX_DEPTH = 6

# Methods whose effects would pile up (cells, containers) or undo the setup (the known pod,
# container and image): they get random ids only, never the known ones nor a string of hex
# digits alone (which could be a unique prefix of one).
NO_KNOWN_IDS = {"RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "CreateContainer",
                "StartContainer", "StopContainer", "RemoveContainer", "RemoveImage"}

INT_EDGES = {
    F.TYPE_INT32: (0, 1, -1, 2**31 - 1, -2**31), F.TYPE_SINT32: (0, -1, 2**31 - 1, -2**31),
    F.TYPE_SFIXED32: (0, -1, 2**31 - 1, -2**31), F.TYPE_INT64: (0, 1, -1, 2**63 - 1, -2**63),
    F.TYPE_SINT64: (0, -1, 2**63 - 1, -2**63), F.TYPE_SFIXED64: (0, -1, 2**63 - 1, -2**63),
    F.TYPE_UINT32: (0, 1, 2**32 - 1), F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 1, 2**64 - 1), F.TYPE_FIXED64: (0, 2**64 - 1),
}
INT_RANGE = {t: (min(v), max(v)) for t, v in INT_EDGES.items()}


def methods(pb):
    """[(path, method name, request class, server streaming)] of RuntimeService and
    ImageService."""
    out = []
    for svc in ("RuntimeService", "ImageService"):
        s = pb.DESCRIPTOR.services_by_name[svc]
        for m in s.methods:
            out.append(("/%s/%s" % (s.full_name, m.name), m.name,
                        getattr(pb, m.input_type.name), m.server_streaming))
    return out


class Mutator:
    def __init__(self, pb, rng, ids=(), images=()):
        self.pb = pb
        self.rng = rng
        self.ids = list(ids)
        self.images = list(images)
        self.known = True  # whether strings may be the known ids
        self.huge = False  # whether strings may be huge (one request at a time)
        self.budget = 0

    # -- values --
    def string(self):
        s = self._string()
        if not self.known and s and all(c in "0123456789abcdef" for c in s):
            s += "x"  # servers take a unique prefix of an id for the id (crictl's short ids)
        return s

    def _string(self):
        r = self.rng
        k = r.random()
        if self.huge and self.budget > 0 and k < 0.3:
            n = min(self.budget, r.randint(64 << 10, HUGE))
            self.budget -= n
            return r.choice("ax/.-") * n
        if k < 0.15:
            return ""
        if k < 0.35 and self.known and self.ids:
            return r.choice(self.ids)
        if k < 0.45 and self.images:
            return r.choice(self.images) + r.choice(("", "", "x", ":latest", "@sha256:00"))
        if k < 0.55:
            return "".join(chr(r.randint(0x20, 0x2fff)) for _ in range(r.randint(1, 40)))
        if k < 0.6:
            return "../" * r.randint(1, 64) + "etc/passwd"
        return "".join(r.choice("abcdefghijklmnopqrstuvwxyz0123456789-._/:=")
                       for _ in range(r.randint(1, 80)))

    def scalar(self, f):
        r = self.rng
        t = f.type
        if t == F.TYPE_STRING:
            return self.string()
        if t == F.TYPE_BYTES:
            return r.randbytes(r.choice((0, 1, 16, 1024)))
        if t == F.TYPE_BOOL:
            return r.random() < 0.5
        if t in INT_EDGES:
            if r.random() < 0.5:
                return r.choice(INT_EDGES[t])
            lo, hi = INT_RANGE[t]
            return r.randint(max(lo, -1000), min(hi, 1 << 40))
        if t in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
            return r.choice((0.0, -1.0, 1e300 if t == F.TYPE_DOUBLE else 1e30, float("inf"),
                             float("nan"), r.random() * 1000))
        if t == F.TYPE_ENUM:
            vals = [v.number for v in f.enum_type.values]
            return r.choice(vals) if r.random() < 0.8 else r.randint(-5, 1000)
        raise ValueError("field %s: type %d" % (f.full_name, t))

    def count(self):
        r = self.rng.random()
        if r < 0.6:
            return self.rng.randint(0, 3)
        if r < 0.95:
            return self.rng.randint(4, 64)
        return self.rng.randint(1000, 5000)

    def fill(self, msg, depth):
        r = self.rng
        for f in msg.DESCRIPTOR.fields:
            if r.random() < 0.35:
                continue
            if f.label == F.LABEL_REPEATED and f.message_type and \
                    f.message_type.GetOptions().map_entry:
                self.fill_map(getattr(msg, f.name), f.message_type, depth)
            elif f.label == F.LABEL_REPEATED:
                rep = getattr(msg, f.name)
                for _ in range(self.count() if depth < MAX_DEPTH else 0):
                    if f.type == F.TYPE_MESSAGE:
                        self.fill(rep.add(), depth + 1)
                    else:
                        rep.append(self.scalar(f))
            elif f.type == F.TYPE_MESSAGE:
                if depth < MAX_DEPTH:
                    sub = getattr(msg, f.name)
                    sub.SetInParent()
                    self.fill(sub, depth + 1)
            else:
                setattr(msg, f.name, self.scalar(f))
        return msg

    def fill_map(self, m, entry, depth):
        kf, vf = entry.fields_by_name["key"], entry.fields_by_name["value"]
        for _ in range(self.count()):
            k = self.scalar(kf)
            if vf.type == F.TYPE_MESSAGE:
                if depth < MAX_DEPTH:
                    self.fill(m[k], depth + 1)
            else:
                m[k] = self.scalar(vf)

    # -- bytes --
    def mutate(self, b):
        r = self.rng
        b = bytearray(b)
        for _ in range(r.randint(1, 4)):
            k = r.random()
            if not b or k < 0.35:
                for _ in range(r.randint(1, 8)):
                    if b:
                        b[r.randrange(len(b))] = r.randrange(256)
                    else:
                        b.append(r.randrange(256))
            elif k < 0.55:
                del b[r.randrange(len(b)):]
            elif k < 0.75:
                i = r.randrange(len(b) + 1)
                b[i:i] = r.randbytes(r.randint(1, 32))
            else:
                i = r.randrange(len(b))
                j = min(len(b), i + r.randint(1, 256))
                b[i:i] = b[i:j] * r.randint(1, 16)
        return bytes(b)

    def request(self, name, cls):
        """A request body for method `name` (request class cls)."""
        r = self.rng
        self.known = name not in NO_KNOWN_IDS
        self.huge = False
        k = r.random()
        if k < 0.10:
            n = r.randint(0, 4096) if r.random() < 0.95 else r.randint(1 << 20, 4 << 20)
            return r.randbytes(n)
        if k < 0.13:
            self.huge, self.budget = True, HUGE_BUDGET
        body = self.fill(cls(), 0).SerializeToString()
        return body if k < 0.55 else self.mutate(body)


class Fuzz:
    """Sends Mutator's requests of every method to a CRI server for `seconds`, at most
    `inflight` at once, each with a deadline of `deadline` s (GetContainerEvents is read until
    its deadline in a thread of its own, at most 4 at once). Counts the answers by status."""

    def __init__(self, socket_path, pb, mutator, inflight=32, deadline=5.0):
        self.channel = grpc.insecure_channel("unix://" + socket_path, options=[
            ("grpc.max_send_message_length", 32 << 20),
            ("grpc.max_receive_message_length", 32 << 20)])
        self.pb = pb
        self.m = mutator
        self.inflight = inflight
        self.deadline = deadline
        self.lock = threading.Lock()
        self.codes = {}
        self.sent = 0
        self.bytes = 0
        self.calls = []
        for path, name, cls, streaming in methods(pb):
            kind = self.channel.unary_stream if streaming else self.channel.unary_unary
            self.calls.append((name, cls, streaming, kind(path)))

    def note(self, code):
        with self.lock:
            self.codes[code] = self.codes.get(code, 0) + 1

    def done(self, fut, sem):
        try:
            fut.result()
            self.note("OK")
        except grpc.RpcError as e:
            self.note(e.code().name)
        except Exception as e:  # noqa: BLE001 - counted as what it was
            self.note(type(e).__name__)
        sem.release()

    def stream(self, call, body, timeout, sem, streams):
        try:
            for _ in call(body, timeout=timeout):
                pass
            self.note("OK")
        except grpc.RpcError as e:
            self.note(e.code().name)
        finally:
            streams.release()
            sem.release()

    def run(self, seconds, on_tick=None):
        """Sends until `seconds` passed, then waits for the answers still due; on_tick() is
        called about every 0.5 s (a memory sampler)."""
        sem = threading.Semaphore(self.inflight)
        streams = threading.Semaphore(4)
        end = time.monotonic() + seconds
        tick = time.monotonic()
        while time.monotonic() < end:
            name, cls, streaming, call = self.m.rng.choice(self.calls)
            body = self.m.request(name, cls)
            if streaming and not streams.acquire(blocking=False):
                continue
            sem.acquire()
            self.sent += 1
            self.bytes += len(body)
            if streaming:
                threading.Thread(target=self.stream, args=(
                    call, body, self.m.rng.uniform(0.1, 1.0), sem, streams), daemon=True).start()
            else:
                fut = call.future(body, timeout=self.deadline)
                fut.add_done_callback(lambda f: self.done(f, sem))
            if on_tick and time.monotonic() >= tick:
                on_tick()
                tick = time.monotonic() + 0.5
        for _ in range(self.inflight):
            sem.acquire(timeout=self.deadline + 5)
        self.channel.close()


class Connection:
    """A cri.Client-like object (pb, runtime, image) on a connection of its own: gRPC shares
    one connection among channels to the same target unless told otherwise."""

    def __init__(self, socket_path, pb):
        self.pb = pb
        self.channel = grpc.insecure_channel("unix://" + socket_path, options=[
            ("grpc.use_local_subchannel_pool", 1)])
        self.runtime = cri._Service(self.channel, pb, "RuntimeService")
        self.image = cri._Service(self.channel, pb, "ImageService")

    def close(self):
        self.channel.close()


# what a burst of kind "mix" sends, in turn
MIX = ("Version", "Status", "ListPodSandbox", "ListContainers", "ContainerStatus",
       "ImageStatus")


def burst_calls(conns, n, kind, cid, image, timeout):
    """n callables, each starting one call (a grpc future), spread over conns in turn: Version
    for kind "version", the MIX in turn for "mix" (ContainerStatus of cid, ImageStatus of
    image)."""
    pb = conns[0].pb
    req = {"Version": pb.VersionRequest(version="v1"), "Status": pb.StatusRequest(),
           "ListPodSandbox": pb.ListPodSandboxRequest(),
           "ListContainers": pb.ListContainersRequest(),
           "ContainerStatus": pb.ContainerStatusRequest(container_id=cid),
           "ImageStatus": pb.ImageStatusRequest(image=pb.ImageSpec(image=image))}
    out = []
    for i in range(n):
        name = "Version" if kind == "version" else MIX[i % len(MIX)]
        c = conns[i % len(conns)]
        svc = c.image if name == "ImageStatus" else c.runtime
        out.append(lambda fn=getattr(svc, name).future, r=req[name]: fn(r, timeout=timeout))
    return out


def burst_procs(socket_path, procs, conns, calls, kind, cid, image, timeout=120):
    """burst() of `calls` calls over `conns` connections in each of `procs` processes, all
    starting at one moment. Returns (latencies, errors, seconds from the start to the last
    answer)."""
    start = time.time() + 3.0
    ps = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "burst", socket_path,
                            str(conns), str(calls), kind, "%.6f" % start, cid, image],
                           stdout=subprocess.PIPE) for _ in range(procs)]
    lat, errors, wall = [], [], 0.0
    for p in ps:
        out, _ = p.communicate(timeout=timeout + 30)
        if p.returncode != 0:
            raise RuntimeError("a burst process exited %d" % p.returncode)
        r = json.loads(out)
        lat += r["lat"]
        errors += r["errors"]
        wall = max(wall, r["end"] - start)
    return lat, errors, wall


def _burst_main(argv):
    socket_path, nconns, ncalls, kind, start, cid, image = argv
    pb = cri.load_pb()
    conns = [Connection(socket_path, pb) for _ in range(int(nconns))]
    for c in conns:
        c.runtime.Version(pb.VersionRequest(), timeout=30)
    fns = burst_calls(conns, int(ncalls), kind, cid, image, 120)
    time.sleep(max(0.0, float(start) - time.time()))
    lat, errors, _ = burst(fns, 120)
    json.dump({"lat": lat, "errors": errors[:5], "end": time.time()}, sys.stdout)
    for c in conns:
        c.close()


def burst(fns, timeout=60):
    """Starts every call of fns (callables returning a grpc future) at once and waits for all.
    Returns ([seconds of each call from its own start to its answer], [errors as strings],
    seconds from the first start to the last answer)."""
    lat = [None] * len(fns)
    errors = []
    lock = threading.Lock()
    left = [len(fns)]
    all_done = threading.Event()

    def on_done(i, t0, fut):
        dt = time.perf_counter() - t0
        with lock:
            lat[i] = dt
            if fut.exception() is not None:
                e = fut.exception()
                errors.append("%s: %s" % (e.code().name, e.details())
                              if isinstance(e, grpc.RpcError) else str(e))
            left[0] -= 1
            if not left[0]:
                all_done.set()
    t_first = time.perf_counter()
    for i, fn in enumerate(fns):
        t0 = time.perf_counter()
        fn().add_done_callback(lambda f, i=i, t0=t0: on_done(i, t0, f))
    if not all_done.wait(timeout):
        raise RuntimeError("%d of %d calls unanswered after %d s" % (left[0], len(fns), timeout))
    return lat, errors, time.perf_counter() - t_first


if __name__ == "__main__":
    if len(sys.argv) == 9 and sys.argv[1] == "burst":
        _burst_main(sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
