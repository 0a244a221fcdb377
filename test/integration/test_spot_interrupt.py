"""Spot interruptions: a cell's agent watches the instance metadata service for the spot
interruption notice and the rebalance recommendation and tells kiyot, which stops the pod's
containers, reports the sandbox not ready and shows both on the Cell.

The cells here are local; their agent (through a wrapper) is pointed with KIYOT_IMDS_ENDPOINT
at a small IMDSv2 stub on the node's bridge address (a port the cells may reach), which
answers each cell, told apart by its address, what the test set for it."""

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from apiserver import ApiServerTest
from harness import BUILD, HOST_IP, T_CALL, wait_for

G, V, P = "kiyot.elotl.co", "v1", "cells"
NOTICE = "/latest/meta-data/spot/instance-action"
REBALANCE = "/latest/meta-data/events/recommendations/rebalance"
TOKEN = "kiyot-test-imds-token"
T_NEWS = 60  # the agent asks every 5 s; the stop takes the container's grace at most


class ImdsStub:
    """IMDSv2 as the agent uses it: PUT /latest/api/token, then GETs carrying the token
    (401 without it); the two interruption paths answer per client address, 404 when
    unset."""

    def __init__(self, host):
        self.lock = threading.Lock()
        self.answers = {}  # (client ip, path) -> JSON body
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body=b""):
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                if (self.path != "/latest/api/token" or
                        not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")):
                    return self.reply(400)
                self.reply(200, TOKEN.encode())

            def do_GET(self):
                if self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                    return self.reply(401)
                with stub.lock:
                    body = stub.answers.get((self.client_address[0], self.path))
                if body is None:
                    return self.reply(404)
                self.reply(200, json.dumps(body).encode())

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, ip, path, body):
        with self.lock:
            self.answers[(ip, path)] = body

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


class SpotInterruptTest(ApiServerTest):
    CRD = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        env = cls.env
        cls.imds = ImdsStub(HOST_IP)
        cls.wrapper = os.path.join(env.work, "agent-imds.sh")
        with open(cls.wrapper, "w") as f:
            f.write("#!/bin/sh\nKIYOT_IMDS_ENDPOINT=http://%s:%d\nexport KIYOT_IMDS_ENDPOINT\n"
                    "exec %s \"$@\"\n" % (HOST_IP, cls.imds.port,
                                         os.path.join(BUILD, "cell-agent")))
        os.chmod(cls.wrapper, 0o755)
        cls.real_agent, cls.real_ports = env.agent_bin, list(env.node_ports)
        env.agent_bin = cls.wrapper
        env.node_ports = cls.real_ports + ["%d/tcp" % cls.imds.port]
        env.restart_kiyot()
        cls.api = cls.kclient.CustomObjectsApi(api_client=cls.api_client)

    @classmethod
    def tearDownClass(cls):
        cls.env.agent_bin, cls.env.node_ports = cls.real_agent, cls.real_ports
        cls.imds.stop()
        super().tearDownClass()

    def cell_of(self, pod):
        for c in self.api.list_cluster_custom_object(G, V, P)["items"]:
            if pod.startswith(c["metadata"]["name"]):
                return c
        return None

    def running_pod(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return pod, cid, self.pod_ip(pod)

    def test_a_spot_interruption_notice_stops_the_pod_and_the_cell_says_so(self):
        pod, cid, ip = self.running_pod()
        when = time.time() + 120
        self.imds.set(ip, NOTICE, {"action": "terminate", "time": utc(when)})
        wait_for(lambda: self.pod_status(pod).state == self.pb.SANDBOX_NOTREADY, T_NEWS,
                 "the interrupted pod's sandbox to be not ready")
        st = self.c.runtime.ContainerStatus(
            self.pb.ContainerStatusRequest(container_id=cid), timeout=T_CALL).status
        self.assertEqual(st.state, self.pb.CONTAINER_EXITED)
        cell = wait_for(lambda: (lambda c: c if c and c.get("status", {}).get("phase") ==
                                 "Interrupted" else None)(self.cell_of(pod)),
                        T_NEWS, "the Cell to say Interrupted")
        self.assertEqual(cell["status"]["interruption"]["action"], "terminate")
        self.assertEqual(cell["status"]["interruption"]["time"], utc(when))

    def test_a_rebalance_recommendation_is_on_the_cell_and_the_pod_runs_on(self):
        pod, cid, ip = self.running_pod()
        when = time.time()
        self.imds.set(ip, REBALANCE, {"noticeTime": utc(when)})

        def recommended():
            c = self.cell_of(pod)
            got = c and c.get("status", {}).get("interruption", {})
            return got if got and got.get("rebalanceRecommendedAt") else None
        got = wait_for(recommended, T_NEWS, "the Cell to show the rebalance recommendation")
        self.assertEqual(got["rebalanceRecommendedAt"], utc(when))
        self.assertNotIn("action", got)
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
        st = self.c.runtime.ContainerStatus(
            self.pb.ContainerStatusRequest(container_id=cid), timeout=T_CALL).status
        self.assertEqual(st.state, self.pb.CONTAINER_RUNNING)
