"""Slow dependencies must not freeze the node's CRI or starve a pod.

A registry stand-in serves manifests and configs at once, then drips every layer (2 KB/s, or
64 B/s for the repository "drip/stall"), and notes when each layer connection opens and closes.
It listens in a network namespace of its own on the cells' bridge, as a registry elsewhere on
the network would (cells may not reach the node's own ports). Against it:
- many concurrent PullImage calls (more than the 64 workers kiyot once answered every method
  with) leave Version, Status and ListPodSandbox answering promptly;
- a PullImage whose client gives up (its deadline) stops its transfer: the stand-in sees the
  connection closed soon after;
- a pull that moves too little over pulls.windowSeconds fails naming the registry and the blob;
- in one cell, stalled pulls do not delay ExecSync, stats, starting a container whose image is
  present, nor pulling a good image from another registry.
Liveness bounds are generous (2 s): they tell answering from hanging, they are not benchmarks.
The figures measured are logged ([itest] lines).
"""

import ctypes
import hashlib
import http.server
import json
import os
import socket
import socketserver
import subprocess
import threading
import time
import unittest

import grpc

import cellcert
import cri
from harness import BRIDGE, KiyotTest, T_CALL, log, net_addr, sh, unique, wait_for

DRIP_NS = "kiyott-drip"
DRIP_IF, DRIP_NS_IF = "kiyott-d0", "kiyott-d1"
DRIP_IP = net_addr("255.250")  # on the cells' network, far from the addresses kiyot hands out
LIVELY = 2.0  # seconds a fast call may take while pulls stall
LAYER_SIZE = 8 << 20  # what a dripped layer claims to be; it never completes
WINDOW_S = 4  # pulls.windowSeconds of this test's kiyot
MIN_BYTES = 4096  # pulls.minBytes: 2 KB/s passes, 64 B/s does not
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def sha256(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def drip_netns_down():
    subprocess.run(["ip", "netns", "del", DRIP_NS], stderr=subprocess.DEVNULL)
    subprocess.run(["ip", "link", "del", DRIP_IF], stderr=subprocess.DEVNULL)


def drip_netns_up():
    """A namespace on the bridge holding DRIP_IP, like another machine of the network."""
    drip_netns_down()
    sh("ip", "netns", "add", DRIP_NS)
    sh("ip", "link", "add", DRIP_IF, "type", "veth", "peer", "name", DRIP_NS_IF)
    sh("ip", "link", "set", DRIP_NS_IF, "netns", DRIP_NS)
    sh("ip", "link", "set", DRIP_IF, "master", BRIDGE, "up")
    sh("ip", "-n", DRIP_NS, "addr", "add", DRIP_IP + "/16", "dev", DRIP_NS_IF)
    sh("ip", "-n", DRIP_NS, "link", "set", DRIP_NS_IF, "up")
    sh("ip", "-n", DRIP_NS, "link", "set", "lo", "up")


def listen_in_netns(ns, addr):
    """A listening TCP socket made in network namespace ns (a thread enters it just for that;
    the socket stays there whichever thread serves it)."""
    out = {}

    def make():
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open("/run/netns/" + ns, os.O_RDONLY)
        try:
            if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                raise OSError(ctypes.get_errno(), "setns " + ns)
        finally:
            os.close(fd)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(addr)
        s.listen(128)
        out["sock"] = s

    def run():
        try:
            make()
        except Exception as e:  # noqa: BLE001 - raised in the caller's thread
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["sock"]


class DripRegistry(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A Registry API v2 stand-in: /v2/drip/<slow|stall>/manifests/<tag> names one config and
    one layer of its own per tag; configs come at once, layers drip and never end."""

    daemon_threads = True
    allow_reuse_address = True
    RATES = {"slow": 2048, "stall": 64}  # bytes per second of a layer

    def __init__(self, sock):
        super().__init__(sock.getsockname(), DripHandler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.lock = threading.Lock()
        self.layers = []  # {"digest", "opened", "closed", "sent"} per layer request
        self.generation = 0  # bumped by hang_up(): older drips stop
        self.refusing = False  # set by hang_up(): layers answer 503 until a test begins
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def addr(self):
        return "%s:%d" % self.server_address

    def image(self, kind, tag):
        """(manifest bytes, config bytes, layer digest) of drip/<kind>:<tag>."""
        cfg = json.dumps({"architecture": "amd64", "os": "linux",
                          "config": {"Cmd": ["/x"]}, "rootfs": {"type": "layers",
                          "diff_ids": [sha256(tag.encode())]}}, sort_keys=True).encode()
        layer = sha256(("%s/%s" % (kind, tag)).encode())
        man = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                          "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                     "digest": sha256(cfg), "size": len(cfg)},
                          "layers": [{"mediaType":
                                      "application/vnd.oci.image.layer.v1.tar+gzip",
                                      "digest": layer, "size": LAYER_SIZE}]},
                         sort_keys=True).encode()
        return man, cfg, layer

    def ref(self, kind, tag):
        return "%s/drip/%s:%s" % (self.addr, kind, tag)

    def open_layers(self, peer=None):
        """The layer transfers under way (those to peer only, when given)."""
        with self.lock:
            return [x for x in self.layers if x["closed"] is None and
                    (peer is None or x["peer"] == peer)]

    def seen(self, digest):
        with self.lock:
            return [x for x in self.layers if x["digest"] == digest]

    def hang_up(self):
        """Ends every drip under way and refuses new ones until begin() (a test's cleanup:
        nothing stays stalled for the next test)."""
        with self.lock:
            self.generation += 1
            self.refusing = True
        wait_for(lambda: not self.open_layers(), 10, "the drip registry to hang up")

    def begin(self):
        with self.lock:
            self.refusing = False

    def stop(self):
        self.hang_up()
        self.shutdown()
        self.server_close()
        drip_netns_down()


class DripHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body=b"", ctype="application/json", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        reg = self.server
        parts = self.path.split("/")  # "", "v2", "drip", kind, "manifests"|"blobs", ref
        if self.path == "/v2/":
            return self.reply(200, b"{}")
        if len(parts) != 6 or parts[2] != "drip" or parts[3] not in reg.RATES:
            return self.reply(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')
        kind, what, ref = parts[3], parts[4], parts[5]
        if what == "manifests":
            man, _, _ = reg.image(kind, ref)
            return self.reply(200, man, OCI_MANIFEST, {"Docker-Content-Digest": sha256(man)})
        for tag in reg.tags.get(kind, ()):
            _, cfg, layer = reg.image(kind, tag)
            if ref == sha256(cfg):
                return self.reply(200, cfg)
            if ref == layer and reg.refusing:
                return self.reply(503, b'{"errors":[{"code":"UNAVAILABLE"}]}')
            if ref == layer:
                return self.drip(kind, layer)
        return self.reply(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')

    def drip(self, kind, digest):
        reg = self.server
        rec = {"digest": digest, "peer": self.client_address[0], "opened": time.monotonic(),
               "closed": None, "sent": 0}
        with reg.lock:
            reg.layers.append(rec)
            gen = reg.generation
        step = 0.25
        chunk = b"\0" * max(1, int(reg.RATES[kind] * step))
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(LAYER_SIZE))
            self.end_headers()
            while reg.generation == gen and rec["sent"] + len(chunk) < LAYER_SIZE:
                self.wfile.write(chunk)
                self.wfile.flush()
                rec["sent"] += len(chunk)
                time.sleep(step)
        except OSError:
            pass  # the client closed the connection: what the tests look for
        finally:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            with reg.lock:
                rec["closed"] = time.monotonic()


class SlowDepsTest(KiyotTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        drip_netns_up()
        try:
            cls.drip = DripRegistry(listen_in_netns(DRIP_NS, (DRIP_IP, 0)))
        except Exception:
            drip_netns_down()
            raise
        cls.drip.tags = {"slow": [], "stall": []}
        cls.ap = cri.load_proto("cellagent")
        # the stand-in speaks plain HTTP: the line lands in the registries: mapping, which
        # write_config writes last before extra_config
        cls.env.extra_config = ('  "%s": { insecure: true }\n'
                                "pulls:\n  windowSeconds: %d\n  minBytes: %d\n"
                                % (cls.drip.addr, WINDOW_S, MIN_BYTES))
        try:
            cls.env.restart_kiyot()
        except Exception:
            cls.env.extra_config = ""
            cls.drip.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.env.extra_config = ""
        cls.env.restart_kiyot()
        cls.drip.stop()

    def setUp(self):
        super().setUp()
        self.drip.begin()

    def pod(self):
        """A pod whose cleanup first ends the drips, so that nothing waits on them."""
        pod, cfg = self.run_pod()
        self.addCleanup(self.drip.hang_up)
        return pod, cfg

    def cancel_at_cleanup(self, futs):
        self.addCleanup(lambda: [f.cancel() for f in futs])
        return futs

    def tag(self, kind, n=1):
        """n new tags of drip/<kind>, each with a layer of its own."""
        tags = [unique(self._testMethodName[5:20].replace("_", "-")) for _ in range(n)]
        self.drip.tags[kind].extend(tags)
        return tags

    # -- calls --
    def timed(self, fn, *a, **kw):
        t0 = time.monotonic()
        r = fn(*a, **kw)
        return r, time.monotonic() - t0

    def cri_pull_async(self, image, cfg, timeout):
        return self.c.image.PullImage.future(self.pb.PullImageRequest(
            image=self.pb.ImageSpec(image=image), sandbox_config=cfg), timeout=timeout)

    def agent(self, pod):
        """A channel to the pod's cell agent and the metadata kiyot's calls carry."""
        ch = cellcert.kiyot_channel(self.env.state_dir, self.pod_ip(pod),
                                    cellcert.cell_id_of(self.env.state_dir, pod))
        self.addCleanup(ch.close)
        return ch, []

    def agent_pull_async(self, ch, md, image, timeout):
        ap = self.ap
        fn = ch.unary_unary("/kiyot.cell.v1.CellAgent/PullImage",
                            request_serializer=ap.PullImageRequest.SerializeToString,
                            response_deserializer=ap.PullImageResponse.FromString)
        return fn.future(ap.PullImageRequest(image=image), timeout=timeout, metadata=md)

    def wait_dripping(self, n, what, peer=None):
        wait_for(lambda: len(self.drip.open_layers(peer)) >= n, 60, what)

    def fast_calls(self, pod_id, seconds):
        """Version, Status and ListPodSandbox, one after another for `seconds`; each must
        answer within LIVELY. Returns the slowest answer of each."""
        pb = self.pb
        calls = {"Version": lambda: self.c.runtime.Version(pb.VersionRequest(), timeout=LIVELY),
                 "Status": lambda: self.c.runtime.Status(pb.StatusRequest(), timeout=LIVELY),
                 "ListPodSandbox": lambda: self.c.runtime.ListPodSandbox(
                     pb.ListPodSandboxRequest(), timeout=LIVELY)}
        worst = dict.fromkeys(calls, 0.0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for name, fn in calls.items():
                try:
                    _, dt = self.timed(fn)
                except grpc.RpcError as e:
                    self.fail("%s did not answer within %.0f s while pulls stall (%s)"
                              % (name, LIVELY, e.code()))
                worst[name] = max(worst[name], dt)
            time.sleep(0.1)
        return worst

    # -- the tests --
    def test_fast_calls_answer_while_70_pulls_stall(self):
        pod, cfg = self.pod()
        n, deadline = 70, 20
        self.cancel_at_cleanup([self.cri_pull_async(self.drip.ref("slow", t), cfg, deadline)
                                for t in self.tag("slow", n)])
        self.wait_dripping(1, "a layer to drip")
        worst = self.fast_calls(pod, 6)
        log("slow deps: with %d pulls stalled, slowest Version %.1f ms, Status %.1f ms, "
            "ListPodSandbox %.1f ms" % (n, worst["Version"] * 1e3, worst["Status"] * 1e3,
                                        worst["ListPodSandbox"] * 1e3))

    def test_cancelled_pulls_stop_their_transfers(self):
        _, cfg = self.pod()
        deadline = 4
        tags = self.tag("slow", 6)
        futs = self.cancel_at_cleanup([self.cri_pull_async(self.drip.ref("slow", t), cfg,
                                                           deadline) for t in tags])
        self.wait_dripping(1, "a layer to drip")
        for f in futs:
            with self.assertRaises(grpc.RpcError) as cm:
                f.result(timeout=deadline + T_CALL)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)
        gave_up = time.monotonic()
        # every transfer ends soon after its caller gave up, and none starts later
        wait_for(lambda: not self.drip.open_layers(), 10,
                 "the transfers of the cancelled pulls to stop (open: %d)"
                 % len(self.drip.open_layers()))
        closed = max(x["closed"] for t in tags for x in self.drip.seen(
            self.drip.image("slow", t)[2]))
        log("slow deps: the last transfer of a cancelled pull closed %.1f s after its caller "
            "gave up" % (closed - gave_up))
        time.sleep(2)
        self.assertEqual(self.drip.open_layers(), [], "a transfer started after its caller "
                         "had given up")

    def assertStallFails(self, fut, layer, where):
        t0 = time.monotonic()
        with self.assertRaises(grpc.RpcError) as cm:
            fut.result()
        took = time.monotonic() - t0
        details = cri.details_of(cm.exception)
        self.assertLess(took, 59, "the stalled pull %s hung until its caller gave up" % where)
        self.assertIn(self.drip.addr, details)
        self.assertIn(layer, details)
        self.assertLess(took, WINDOW_S * 3 + 10, "a stalled pull %s took %.0f s to fail"
                        % (where, took))
        log("slow deps: a stalled pull %s failed after %.1f s: %s" % (where, took, details))

    def test_pull_without_progress_fails_naming_registry_and_blob(self):
        pod, cfg = self.pod()
        tags = self.tag("stall", 2)
        # through the CRI (in kiyot or in the cell, wherever kiyot pulls for this pod)
        self.assertStallFails(self.cancel_at_cleanup([self.cri_pull_async(
            self.drip.ref("stall", tags[0]), cfg, 60)])[0], self.drip.image("stall", tags[0])[2],
            "through the CRI")
        # by the cell's agent, which has kiyot's pulls settings from its bootstrap
        ch, md = self.agent(pod)
        self.assertStallFails(self.cancel_at_cleanup([self.agent_pull_async(
            ch, md, self.drip.ref("stall", tags[1]), 60)])[0],
            self.drip.image("stall", tags[1])[2], "in the cell")

    def test_stalled_pulls_in_a_cell_do_not_delay_its_other_calls(self):
        pb = self.pb
        pod, cfg = self.pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        ch, md = self.agent(pod)
        stalled = self.cancel_at_cleanup([self.agent_pull_async(ch, md, self.drip.ref("slow", t),
                                                                120)
                                          for t in self.tag("slow", 6)])
        self.wait_dripping(4, "four layers to drip into the cell", peer=self.pod_ip(pod))

        _, dt_exec = self.timed(self.c.runtime.ExecSync, pb.ExecSyncRequest(
            container_id=cid, cmd=["true"], timeout=5), timeout=LIVELY)
        _, dt_stats = self.timed(self.c.runtime.ContainerStats, pb.ContainerStatsRequest(
            container_id=cid), timeout=LIVELY)
        # the kubelet's flow for an image the pod has: no pull, create and start
        t0 = time.monotonic()
        cid2, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"],
                              pull=False)
        self.start(cid2)
        self.wait_state(cid2, "CONTAINER_RUNNING", timeout=30)
        dt_start = time.monotonic() - t0
        # a good image from another registry, pulled in the same cell
        good, dt_good = self.timed(lambda: self.agent_pull_async(
            ch, md, self.env.ref("hello:1"), 30).result())
        self.assertTrue(good.image_id.startswith("sha256:"))
        log("slow deps: with %d pulls stalled in the cell, ExecSync %.1f ms, ContainerStats "
            "%.1f ms, create+start %.2f s, a good image pulled in %.2f s"
            % (len(stalled), dt_exec * 1e3, dt_stats * 1e3, dt_start, dt_good))
        self.assertLess(dt_start, 10)
        self.assertLess(dt_good, 10)
        # the pulls still stall: nothing above waited for them to end
        self.assertFalse(any(f.done() for f in stalled), "a stalled pull ended early")
        for f in stalled:
            f.cancel()
        wait_for(lambda: not self.drip.open_layers(), 10,
                 "the cell's transfers to stop once their callers gave up")


if __name__ == "__main__":
    unittest.main()
