"""The warm pool with the EC2 provider, against the suite's local EC2 endpoint (test/ec2/ec2sim.py,
instances booted as local cells, 3 s of boot delay): standby instances are tagged as this
cluster's standby cells with no pod, a pod of their shape takes one and the instance's tags then
name the pod; a kiyot killed with standby instances adopts them (none leaked, none launched
twice: ec2sim's instance list); the garbage collector keeps recorded standby instances and ends
one the store does not know.

A second kiyot, configured with `cells.provider: ec2` and a pool, serves these tests on its own
socket; the suite's local-provider kiyot is stopped meanwhile."""

import json
import os
import signal
import sqlite3
import time

from ec2env import Ec2Kiyot, Ec2Sim, tags_of
from harness import KiyotTest, log, unique, wait_for

EC2_CIDR = "10.78.202.0/24"
STANDBY = "kiyot.elotl.co/standby"
CELL = "kiyot.elotl.co/cell-id"
T_POOL = 90


class PoolEc2Test(KiyotTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.env.kill_kiyot(signal.SIGTERM)
        cls.sim = Ec2Sim(cls.env.work, EC2_CIDR, ["--boot-delay", "3", "--terminated-ttl", "60"])
        cls.kiyot = None
        cls.pool = {}

    @classmethod
    def tearDownClass(cls):
        try:
            cls.stop_ec2_kiyot()
            cls.sim.stop()
        finally:
            cls.env.start_kiyot()
            super().tearDownClass()

    @classmethod
    def start_ec2_kiyot(cls):
        k = Ec2Kiyot(cls.sim, cls.env.work, "ec2pool",
                     cells={"gcIntervalSeconds": 1, "gcGraceSeconds": 3}, **cls.pool)
        cls.kiyot, cls.state, cls.sock, cls.log_path = k.proc, k.state, k.sock, k.log_path
        return k.client

    @classmethod
    def stop_ec2_kiyot(cls, sig=signal.SIGTERM):
        if cls.kiyot and cls.kiyot.poll() is None:
            cls.kiyot.send_signal(sig)
            cls.kiyot.wait(60)

    def configure(self, pool):
        """A new kiyot with pool: top-level sections of its config ({"pool": {...}})."""
        type(self).stop_ec2_kiyot()
        type(self).pool = pool
        self.c = type(self).start_ec2_kiyot()
        self.pb = self.c.pb

    def setUp(self):
        self.c = None

    def tearDown(self):
        if self.c is None:
            return
        for p in self.c.runtime.ListPodSandbox(self.pb.ListPodSandboxRequest(),
                                               timeout=30).items:
            try:
                self.stop_pod(p.id)
                self.remove_pod(p.id)
            except Exception as e:  # noqa: BLE001 - reported, the next test goes on
                log("cleanup of %s: %s" % (p.id, e))
        # no pool: the next kiyot ends the standby instances left
        self.configure({})
        wait_for(lambda: not self.live(lambda i: STANDBY in tags_of(i)), T_POOL,
                 "the standby instances to be terminated")
        self.c.close()

    def live(self, pred=lambda i: True):
        return [i for i in self.sim.instances()
                if i.get("state") in ("pending", "running") and pred(i)]

    def standby_instances(self):
        return self.live(lambda i: STANDBY in tags_of(i))

    def records(self):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.state, "kiyot.db"),
                             uri=True, timeout=10)
        try:
            rows = db.execute("SELECT key, value FROM meta WHERE key LIKE 'pool/%'").fetchall()
        finally:
            db.close()
        return {k[len("pool/"):]: json.loads(v) for k, v in rows}

    def wait_ready(self, n):
        def ready():
            r = sorted(i for i, v in self.records().items() if v["state"] == "ready")
            return r if len(r) == n else None
        return wait_for(ready, T_POOL, "%d ready standby cells" % n)

    def cluster_id(self):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.state, "kiyot.db"),
                             uri=True, timeout=10)
        try:
            return db.execute("SELECT value FROM meta WHERE key = 'cluster_id'").fetchone()[0]
        finally:
            db.close()

    def cell_of(self, pod):
        info = self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=30).info["info"]
        return json.loads(info)["cellId"]

    def test_a_claim_gives_the_pod_a_ready_instance_tagged_for_it(self):
        self.configure({"pool": {"shapes": [{"instanceType": "t3.small", "count": 1}]}})
        [standby] = self.wait_ready(1)
        [inst] = self.live(lambda i: tags_of(i).get(CELL) == standby)
        tags = tags_of(inst)
        self.assertEqual(tags.get(STANDBY), self.cluster_id())
        self.assertNotIn("kiyot.elotl.co/pod-uid", tags)
        self.assertEqual(tags.get("Name"), "kiyot-standby-" + standby)
        self.assertEqual(inst["instance_type"], "t3.small")

        cfg = self.sandbox_config(labels={"app": "warm"},
                                  annotations={"pod.elotl.co/instance-type": "t3.small"})
        t0 = time.monotonic()
        pod, _ = self.run_pod(cfg)
        took = time.monotonic() - t0
        self.assertEqual(self.cell_of(pod), standby, "the pod did not take the standby cell")
        log("RunPodSandbox on a standby instance: %.2f s (boots take 3 s)" % took)
        tags = tags_of(self.live(lambda i: i["instance_id"] == inst["instance_id"])[0])
        self.assertEqual(tags.get("kiyot.elotl.co/pod-uid"), cfg.metadata.uid)
        self.assertEqual(tags.get("kiyot.elotl.co/pod-name"), cfg.metadata.name)
        self.assertEqual(tags.get("kiyot.elotl.co/pod-namespace"), cfg.metadata.namespace)
        self.assertEqual(tags.get("app"), "warm")
        self.assertNotIn(STANDBY, tags, "the claimed instance is still tagged standby")
        cid, _ = self.create(pod, cfg, self.env.ref("hello:1"))
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(self.pod_ip(pod)))

        # refilled with another instance; the claimed one goes with its pod
        [refill] = self.wait_ready(1)
        self.assertNotEqual(refill, standby)
        self.stop_pod(pod)
        wait_for(lambda: not self.live(lambda i: i["instance_id"] == inst["instance_id"]),
                 60, "the pod's instance to be terminated")
        self.assertEqual([tags_of(i)[CELL] for i in self.standby_instances()], [refill])

    def test_kill_9_with_standby_instances_adopts_them_none_leaked_none_duplicated(self):
        self.configure({"pool": {"shapes": [{"instanceType": "t3.small", "count": 2},
                                            {"instanceType": "t3.micro", "count": 1}]}})
        # killed as the three launch (boots take 3 s): the next kiyot resumes them by cell id
        wait_for(lambda: len(self.records()) == 3 and self.standby_instances(), T_POOL,
                 "3 standby cells recorded and launching")
        before = set(self.records())
        log("killed with %s" % {k: v["state"] for k, v in self.records().items()})
        type(self).stop_ec2_kiyot(signal.SIGKILL)
        self.c = type(self).start_ec2_kiyot()
        ready = self.wait_ready(3)
        self.assertTrue(before <= set(ready), "recorded standby cells were not adopted: %s, "
                        "now %s" % (sorted(before), ready))
        time.sleep(5)  # gc passes (1 s) and refills
        cells = [tags_of(i)[CELL] for i in self.standby_instances()]
        self.assertEqual(sorted(cells), sorted(ready), "leaked or duplicated standby instances")
        every = [tags_of(i).get(CELL) for i in self.sim.instances()
                 if tags_of(i).get(CELL) in before]
        self.assertEqual(sorted(every), sorted(before),
                         "a standby cell's launch was made twice: %s" % every)

    def test_gc_keeps_recorded_standby_instances_and_ends_an_unrecorded_one(self):
        self.configure({"pool": {"shapes": [{"instanceType": "t3.micro", "count": 1}]}})
        [standby] = self.wait_ready(1)
        [kept] = self.live(lambda i: tags_of(i).get(CELL) == standby)
        cluster = self.cluster_id()
        stray = self.sim.admin("foreign", {"instance_type": "t3.micro", "tags": {
            "kiyot.elotl.co/cluster-id": cluster, CELL: "sb-" + unique("x")[-8:] + "0" * 9,
            STANDBY: cluster}})["instance_id"]
        # gcIntervalSeconds 1, gcGraceSeconds 3
        wait_for(lambda: not self.live(lambda i: i["instance_id"] == stray), 30,
                 "the unrecorded standby instance to be terminated")
        time.sleep(3)
        self.assertTrue(self.live(lambda i: i["instance_id"] == kept["instance_id"]),
                        "the garbage collector ended a recorded standby instance")
        self.assertEqual(self.wait_ready(1), [standby])
