"""Burst sizing from use: a pod annotated pod.elotl.co/burst-sizing: observed, whose Pod object
(from the suite's API endpoint) names its controller in ownerReferences, gets a cell sized to
its limits while its owner has no history; its cell's usage reports go into kiyot.db; after a
restart of kiyot, the next pod of the same owner gets a cell sized to that peak plus
sizing.burstHeadroomPercent (50 here), never below its requests, and the sizing reason gives
the figures."""

import json
import os
import re
import sqlite3

from apiserver import ApiServerTest
from harness import Footprint, log, unique, wait_for

GIB = 1 << 30
MIB = 1 << 20
T_USAGE = 60


class BurstTest(ApiServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.core = cls.kclient.CoreV1Api(api_client=cls.api_client)
        cls.env.extra_config += "sizing:\n  burstHeadroomPercent: 50\n"
        cls.env.restart_kiyot()

    def setUp(self):
        super().setUp()
        self.c = self.env.client
        self.pb = self.c.pb

    # -- helpers --
    def make_pod(self, name, owner):
        """Pod default/name of ReplicaSet owner: requests 100m / 64 MiB, limits 2 / 2 GiB."""
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                             "annotations": {"kubernetes.io/target-runtime": "kiyot",
                                             "pod.elotl.co/burst-sizing": "observed"},
                             "ownerReferences": [{"apiVersion": "apps/v1",
                                                  "kind": "ReplicaSet", "name": owner,
                                                  "uid": "6b1d8c52-0000-4000-8000-00000000000b",
                                                  "controller": True}]},
                "spec": {"containers": [{"name": "web", "image": self.env.ref("hello:1"),
                                         "resources": {
                                             "requests": {"cpu": "100m", "memory": "64Mi"},
                                             "limits": {"cpu": "2", "memory": "2Gi"}}}]}}
        made = self.core.create_namespaced_pod("default", body)
        self.addCleanup(self.delete_pod, name)
        return made.metadata.uid

    def delete_pod(self, name):
        try:
            self.core.delete_namespaced_pod(name, "default")
        except Exception as e:  # noqa: BLE001 - the endpoint may be down after a test
            log("cleanup of Pod %s: %s" % (name, e))

    def config(self, name, uid):
        """The kubelet's sandbox config: the Pod's annotations, no Linux resources."""
        cfg = self.sandbox_config(name=name,
                                  annotations={"pod.elotl.co/burst-sizing": "observed"})
        cfg.metadata.uid = uid
        cfg.linux.ClearField("resources")
        return cfg

    def reason(self, pod_id):
        r = self.c.runtime.PodSandboxStatus(
            self.pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id, verbose=True), timeout=60)
        return json.loads(r.info["info"])["sizingReason"]

    def cell_memory(self, pod_id):
        """The cell's memory cap as the host enforces it (its memory cgroup)."""
        fp = Footprint(self.pod_ip(pod_id))
        for d in fp.cgroups:
            if "memory" in d.split("/")[4].split(","):
                try:
                    with open(os.path.join(d, "memory.limit_in_bytes")) as f:
                        return int(f.read().strip())
                except OSError:
                    pass
        self.fail("cell memory cap unreadable in %s" % fp.cgroups)

    def history(self, owner):
        """kiyot.db's rows of the owner that reported usage: [(cpu_milli, memory_bytes)]."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.env.state_dir, "kiyot.db"),
                             uri=True)
        try:
            return db.execute("SELECT cpu_milli, memory_bytes FROM burst_pods WHERE owner = ? "
                              "AND reported = 1", ("default/ReplicaSet/" + owner,)).fetchall()
        finally:
            db.close()

    def usage_seen(self, pod_id, owner):
        # a stats call reads the cell's usage (its Watch also pushes it every 10 s)
        self.c.runtime.PodSandboxStats(
            self.pb.PodSandboxStatsRequest(pod_sandbox_id=pod_id), timeout=30)
        return self.history(owner)

    # -- tests --
    def test_burst__sized_from_the_owners_peak_after_a_restart(self):
        owner = unique("web-burst")
        a = unique("burst-a")
        pod_a, _ = self.run_pod(self.config(a, self.make_pod(a, owner)))
        why = self.reason(pod_a)
        self.assertIn("burst sizing: no usage of an earlier pod of ReplicaSet %s seen yet; "
                      "sized to the limits" % owner, why)
        self.assertGreaterEqual(self.cell_memory(pod_a), 2 * GIB, why)

        rows = wait_for(lambda: self.usage_seen(pod_a, owner), T_USAGE,
                        "pod A's cell usage in kiyot.db")
        log("pod A's cell peaks: %s" % rows)
        self.c = self.env.restart_kiyot()  # SIGKILL, then the same config
        self.pb = self.c.pb

        b = unique("burst-b")
        pod_b, _ = self.run_pod(self.config(b, self.make_pod(b, owner)))
        why = self.reason(pod_b)
        log("pod B: %s" % why)
        m = re.search(r"burst sized from observed peak \S+ vCPU / \S+ \S+ of 1 earlier pod of "
                      r"ReplicaSet %s \+ 50%%: (\S+) vCPU / (\S+) (MiB|GiB) \(requests 0\.1 "
                      r"vCPU / 64 MiB, limits 2 vCPU / 2 GiB\)" % re.escape(owner), why)
        self.assertTrue(m, why)
        cpu = float(m.group(1))
        mem = float(m.group(2)) * (MIB if m.group(3) == "MiB" else GIB)
        self.assertGreaterEqual(cpu, 0.1)  # never below the requests
        self.assertLessEqual(cpu, 2)  # nor above the limits
        self.assertGreaterEqual(mem, 64 * MIB - 1)
        self.assertLessEqual(mem, 2 * GIB)
        peak_mem = max(r[1] for r in rows)
        if peak_mem * 1.5 < 2 * GIB - 64 * MIB:
            # the cell is smaller than pod A's, sized to its limits
            self.assertLess(self.cell_memory(pod_b), 2 * GIB, why)
