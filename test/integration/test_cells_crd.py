"""Cell objects: kiyot keeps one Cell (cells.kiyot.elotl.co) per live cell in a Kubernetes API
endpoint (test/kubeapi/kubeapi.py, HTTPS with a bearer token, reached through a kubeconfig),
seen with kubectl and python3-kubernetes as a user would."""

import socket
import time

from apiserver import ApiServerTest
from harness import wait_for

G, V, P = "kiyot.elotl.co", "v1", "cells"
CLUSTER = "kiyot.elotl.co/cluster-id"
NODE = "kiyot.elotl.co/node"
T_SYNC = 90  # the sync's retry back-off is short; a resync runs at least every minute


class CellsCrdTest(ApiServerTest):
    CRD = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.api = cls.kclient.CustomObjectsApi(api_client=cls.api_client)

    # -- helpers --
    def cells(self):
        return {c["metadata"]["name"]: c
                for c in self.api.list_cluster_custom_object(G, V, P)["items"]}

    def ours(self, cells, labels):
        return {n: c for n, c in cells.items()
                if all(c["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())}

    def wait_cell(self, pod_id, phase="Running"):
        def ready():
            for n, c in self.cells().items():
                if pod_id.startswith(n) and c.get("status", {}).get("phase") == phase:
                    return c
            return None
        return wait_for(ready, T_SYNC, "a %s Cell for pod %s" % (phase, pod_id[:12]))

    def wait_gone(self, name):
        wait_for(lambda: name not in self.cells(), T_SYNC, "Cell %s to be deleted" % name)

    def stop_remove(self, pod_id):
        rt = self.c.runtime
        rt.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pod_id), timeout=60)
        rt.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id), timeout=60)

    # -- tests --
    def test_cells_crd__pod_gets_its_cell_and_loses_it_when_stopped(self):
        pod, cfg = self.run_pod()
        ip = self.pod_ip(pod)
        cell = self.wait_cell(pod)
        name = cell["metadata"]["name"]
        spec, status = cell["spec"], cell["status"]
        self.assertEqual((spec["podName"], spec["podNamespace"], spec["podUid"]),
                         (cfg.metadata.name, "default", cfg.metadata.uid))
        self.assertEqual(spec["node"], socket.gethostname().lower())
        self.assertEqual(spec["launchType"], "on-demand")
        self.assertTrue(spec["instanceType"])
        self.assertEqual(spec["instanceId"], "local-" + name)
        self.assertEqual(spec["ip"], ip)
        self.assertTrue(status["sizingReason"])
        self.assertGreater(status["pricePerHour"], 0)
        labels = cell["metadata"]["labels"]
        self.assertEqual(labels[NODE], spec["node"])
        self.assertTrue(labels[CLUSTER])

        out = self.ep.kubectl("get", "cells").stdout
        row = [ln.split() for ln in out.splitlines() if ln.startswith(name + " ")]
        self.assertEqual(len(row), 1, out)
        self.assertEqual(row[0][1:3], [cfg.metadata.name, "default"])
        self.assertIn(ip, row[0])
        self.assertIn("Running", row[0])
        got = self.api.get_cluster_custom_object(G, V, P, name)
        self.assertEqual(got["spec"]["podUid"], cfg.metadata.uid)

        self.stop_remove(pod)
        self.wait_gone(name)
        self.assertNotIn(name, self.ep.kubectl("get", "cells").stdout)

    def test_cells_crd__restart_leaves_exactly_the_live_cells(self):
        pod_a, _ = self.run_pod()
        pod_b, _ = self.run_pod()
        a = self.wait_cell(pod_a)
        b = self.wait_cell(pod_b)
        labels = {CLUSTER: a["metadata"]["labels"][CLUSTER], NODE: a["metadata"]["labels"][NODE]}
        self.env.kill_kiyot()
        # behind kiyot's back: A's Cell deleted, B's made stale, a ghost of ours planted, and a
        # Cell of another cluster that is none of our business
        self.api.delete_cluster_custom_object(G, V, P, a["metadata"]["name"])
        self.api.patch_cluster_custom_object(G, V, P, b["metadata"]["name"],
                                             {"status": {"phase": "Pending"},
                                              "spec": {"ip": "10.0.0.1"}})
        ghost = dict(b, metadata={"name": "ghost-cell-1", "labels": labels})
        self.api.create_cluster_custom_object(G, V, P, ghost)
        foreign = dict(b, metadata={"name": "foreign-cell-1",
                                    "labels": {CLUSTER: "another", NODE: labels[NODE]}})
        self.api.create_cluster_custom_object(G, V, P, foreign)
        self.addCleanup(self.api.delete_cluster_custom_object, G, V, P, "foreign-cell-1")
        self.env.start_kiyot()
        self.c = self.env.client

        live = {a["metadata"]["name"], b["metadata"]["name"]}

        def synced():
            ours = self.ours(self.cells(), labels)
            return set(ours) == live and all(
                c["status"]["phase"] == "Running" and c["spec"]["ip"] != "10.0.0.1"
                for c in ours.values())
        wait_for(synced, T_SYNC, "the Cells of kiyot to be exactly %s" % sorted(live))
        self.assertIn("foreign-cell-1", self.cells())
        self.assertEqual(self.cells()[b["metadata"]["name"]]["spec"], b["spec"])

    def test_cells_crd__cell_appears_after_an_api_outage(self):
        self.ep.stop()
        try:
            pod, _ = self.run_pod()  # the CRI call does not wait for the API server
            time.sleep(3)  # kiyot's sync fails and retries meanwhile
        finally:
            self.ep.start()
        cell = self.wait_cell(pod)
        self.assertEqual(cell["spec"]["ip"], self.pod_ip(pod))
        self.stop_remove(pod)
        self.wait_gone(cell["metadata"]["name"])
