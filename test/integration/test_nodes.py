"""Several Kiyot nodes in one cluster: two kiyots (the suite's and a second one on a bridge of its
own, named node-b by its nodeName setting) against one API server (test/kubeapi/kubeapi.py).
Each keeps only its own Cell objects, labelled with its node: a restarted kiyot reconciles its
Cells without touching the other node's, `kubectl get cells` shows both nodes, and each node's
Events say which node recorded them. (Each kiyot also owns only the instances its own cluster id
tags, so one node's garbage collector never ends another's cells; test_ec2's foreign-instance
test covers that part.)"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import cri
import harness
from apiserver import ApiServerTest
from harness import sh, wait_for

G, V, P = "kiyot.elotl.co", "v1", "cells"
NODE = "kiyot.elotl.co/node"
T_SYNC = 90
# the second node's cells: a bridge and network no shard of the suite uses
B_BRIDGE = "kiyotnb%d" % harness.SHARD
B_CIDR = "10.%d.0.0/16" % (120 + harness.SHARD)


class TwoNodesTest(ApiServerTest):
    CRD = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.api = cls.kclient.CustomObjectsApi(api_client=cls.api_client)
        cls.core = cls.kclient.CoreV1Api(api_client=cls.api_client)
        cls.b_dir = tempfile.mkdtemp(prefix="kiyot-node-b-")
        cls.b_sock = os.path.join(cls.b_dir, "kiyot.sock")
        cls.b_log = os.path.join(cls.b_dir, "kiyot.log")
        with open(os.path.join(cls.b_dir, "kiyot.yaml"), "w") as f:
            f.write("cells:\n  cidr: %s\n  bridge: %s\n  agent: %s\n"
                    "kubeconfig: %s\nnodeName: node-b\n"
                    % (B_CIDR, B_BRIDGE, cls.env.agent_bin, cls.ep.kubeconfig))
        cls.b = subprocess.Popen(
            [cls.env.kiyot_bin, "serve", "--socket", cls.b_sock, "--state-dir",
             os.path.join(cls.b_dir, "state"), "--config", os.path.join(cls.b_dir, "kiyot.yaml"),
             "--log-level", "debug"], stdout=open(cls.b_log, "a"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)

        def up():
            if cls.b.poll() is not None:
                raise RuntimeError("the second kiyot exited %s; see %s" % (cls.b.returncode,
                                                                          cls.b_log))
            if not os.path.exists(cls.b_sock):
                return None
            c = cri.Client(cls.b_sock)
            c.runtime.Version(c.pb.VersionRequest(version="v1"), timeout=2)
            return c
        cls.bc = wait_for(up, 30, "the second kiyot on " + cls.b_sock)

    @classmethod
    def tearDownClass(cls):
        try:
            for p in cls.bc.runtime.ListPodSandbox(cls.bc.pb.ListPodSandboxRequest(),
                                                   timeout=30).items:
                cls.bc.runtime.StopPodSandbox(cls.bc.pb.StopPodSandboxRequest(
                    pod_sandbox_id=p.id), timeout=60)
                cls.bc.runtime.RemovePodSandbox(cls.bc.pb.RemovePodSandboxRequest(
                    pod_sandbox_id=p.id), timeout=60)
            cls.bc.close()
        finally:
            cls.b.send_signal(signal.SIGTERM)
            try:
                cls.b.wait(60)
            except subprocess.TimeoutExpired:
                cls.b.kill()
                cls.b.wait()
            sh("ip", "link", "del", B_BRIDGE, check=False, quiet=True)
            shutil.rmtree(cls.b_dir, ignore_errors=True)
            super().tearDownClass()

    def cells_of(self, node):
        return {c["metadata"]["name"]: c for c in self.api.list_cluster_custom_object(
            G, V, P, label_selector="%s=%s" % (NODE, node))["items"]}

    def b_run_pod(self, name):
        cfg = self.sandbox_config(name=name)
        r = self.bc.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                          timeout=harness.T_START)
        return r.pod_sandbox_id, cfg

    def test_each_node_keeps_its_own_cells_and_says_which_node_it_is(self):
        a_node = socket.gethostname().lower()   # node A has no nodeName: the host's
        a_pod, _ = self.run_pod()
        b_pod, b_cfg = self.b_run_pod(harness.unique("node-b-pod"))
        a_cell = wait_for(lambda: [n for n in self.cells_of(a_node) if a_pod.startswith(n)],
                          T_SYNC, "node A's Cell")[0]
        b_cell = wait_for(lambda: [n for n in self.cells_of("node-b") if b_pod.startswith(n)],
                          T_SYNC, "node B's Cell")[0]
        self.assertNotIn(b_cell, self.cells_of(a_node))
        # what a user sees: both nodes' cells, each with its node
        rows = {ln.split()[0]: ln.split() for ln in self.ep.kubectl(
            "get", "cells").stdout.splitlines()[1:]}
        self.assertIn("node-b", rows[b_cell])
        self.assertIn(a_node, rows[a_cell])
        # a restarted node A reconciles its Cells (its own back, the other node's untouched)
        self.env.restart_kiyot()
        self.c = self.env.client
        time.sleep(2)
        wait_for(lambda: a_cell in self.cells_of(a_node), T_SYNC, "node A's Cell after restart")
        self.assertIn(b_cell, self.cells_of("node-b"))
        # node B's events say node B recorded them
        evs = wait_for(lambda: [e for e in self.core.list_namespaced_event(
            "default", field_selector="involvedObject.name=" + b_cfg.metadata.name).items
            if e.reason == "CellLaunched"], 30, "node B's CellLaunched event")
        self.assertEqual(evs[0].source.host, "node-b")
        # node B's pod gone: its Cell goes, node A's stays
        self.bc.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=b_pod),
                                       timeout=60)
        self.bc.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(
            pod_sandbox_id=b_pod), timeout=60)
        wait_for(lambda: b_cell not in self.cells_of("node-b"), T_SYNC, "node B's Cell gone")
        self.assertIn(a_cell, self.cells_of(a_node))
