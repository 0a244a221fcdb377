"""The warm pool with local cells: standby cells (launched, enrolled, no pod) that a pod of their
shape starts in, refilled in the background, within the caps, adopted by a restarted kiyot.

What kiyot records of its standby cells is read from its store (meta "pool/<cell id>"); what
exists of them from their network namespaces and agents."""

import json
import os
import sqlite3
import subprocess
import time

from harness import (KiyotTest, NETNS_PREFIX, T_CALL, cell_netns_list, find_agent_pid, log,
                     pid_alive, unique, wait_for)

T_POOL = 60


def shapes(*entries, adaptive=None):
    """A pool section: entries are (instanceType, count); adaptive a dict of its settings."""
    text = "pool:\n  shapes:\n" if entries else "pool:\n"
    for t, n in entries:
        text += "    - { instanceType: %s, count: %d }\n" % (t, n)
    if adaptive:
        text += "  adaptive:\n" + "".join("    %s: %s\n" % kv for kv in adaptive.items())
    return text


class PoolTest(KiyotTest):
    @classmethod
    def tearDownClass(cls):
        # without the pool section, the standby cells left are terminated at the next start
        cls.env.extra_config = ""
        cls.env.restart_kiyot()
        wait_for(lambda: not cls.standby_of(cls.env), T_POOL, "the standby cells to be gone")
        wait_for(lambda: not [ns for ns in cell_netns_list()
                              if ns.startswith(NETNS_PREFIX + "sb-")],
                 T_POOL, "the standby cells' namespaces to be gone")
        super().tearDownClass()

    def configure(self, text):
        self.env.extra_config = text
        self.c = self.env.restart_kiyot()
        self.pb = self.c.pb

    @staticmethod
    def standby_of(env):
        """What kiyot records: {cell id: record} of its standby cells."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(env.state_dir, "kiyot.db"),
                             uri=True, timeout=10)
        try:
            rows = db.execute("SELECT key, value FROM meta WHERE key LIKE 'pool/%'").fetchall()
        finally:
            db.close()
        return {k[len("pool/"):]: json.loads(v) for k, v in rows}

    def ready(self, instance_type=None):
        return sorted(i for i, r in self.standby_of(self.env).items()
                      if r["state"] == "ready" and
                      (instance_type is None or r["instanceType"] == instance_type))

    def wait_ready(self, n, instance_type=None):
        return wait_for(lambda: (lambda r: r if len(r) == n else None)(self.ready(instance_type)),
                        T_POOL, "%d ready standby cells" % n)

    def standby_netns(self):
        return sorted(ns for ns in cell_netns_list() if ns.startswith(NETNS_PREFIX + "sb-"))

    def cell_of(self, pod):
        info = self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=T_CALL).info["info"]
        return json.loads(info)["cellId"]

    def pod_of_type(self, instance_type):
        return self.run_pod(annotations={"pod.elotl.co/instance-type": instance_type})

    def kiyot_log(self):
        with open(self.env.kiyot_log, errors="replace") as f:
            return f.read()

    def settle(self):
        """A few of the refiller's passes (one a second) without anything asked of kiyot."""
        time.sleep(3)

    def test_a_pod_starts_in_a_standby_cell_of_its_shape_and_it_never_returns(self):
        self.configure(shapes(("t3.small", 1)))
        [standby] = self.wait_ready(1)
        self.assertEqual(self.standby_netns(), [NETNS_PREFIX + standby])

        pod, cfg = self.pod_of_type("t3.small")
        self.assertEqual(self.cell_of(pod), standby, "the pod did not take the standby cell")
        cid, _ = self.create(pod, cfg, self.env.ref("hello:1"))
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(self.pod_ip(pod)))
        self.assertIn("pool: claim: standby cell %s" % standby, self.kiyot_log())

        # refilled with a new cell; the claimed one is the pod's alone
        [refill] = self.wait_ready(1)
        self.assertNotEqual(refill, standby)
        self.assertNotIn(standby, self.standby_of(self.env))

        # a pod of another shape launches its own cell
        other, _ = self.pod_of_type("t3.micro")
        self.assertFalse(self.cell_of(other).startswith("sb-"))
        self.assertEqual(self.ready(), [refill])

        # the cell that served a pod goes with it and never comes back
        self.stop_pod(pod)
        self.remove_pod(pod)
        wait_for(lambda: NETNS_PREFIX + standby not in cell_netns_list(), T_POOL,
                 "the claimed cell's namespace to be gone")
        self.settle()
        self.assertNotIn(standby, self.standby_of(self.env))
        self.assertEqual(self.ready(), [refill])

    def get_cells(self):
        """`kiyot get cells` as rows of dicts keyed by its header."""
        env = dict(os.environ, KIYOT_SOCKET=self.env.socket, KIYOT_STATE_DIR=self.env.state_dir)
        p = subprocess.run([self.env.kiyot_bin, "get", "cells"], capture_output=True,
                           text=True, env=env, timeout=T_CALL)
        self.assertEqual(p.returncode, 0, "kiyot get cells: %s" % p.stderr)
        lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
        head = lines[0].split()
        return [dict(zip(head, ln.split())) for ln in lines[1:]]

    def test_kiyot_get_cells_lists_standby_cells_with_phase_type_price_and_age(self):
        self.configure(shapes(("t3.small", 1), ("t3.micro", 1)))
        # exactly one of each: cells an earlier test left beyond these counts end at the
        # restart, and their records read ready until they are gone
        ready = wait_for(lambda: (lambda r: r if len(r) == 2 and len(self.ready("t3.small")) == 1
                                  else None)(self.ready()), T_POOL,
                         "one ready standby cell of each shape")
        rows = {r["CELL"]: r for r in self.get_cells()}
        for cell in ready:
            self.assertIn(cell, rows, "kiyot get cells does not list standby cell %s" % cell)
            row = rows[cell]
            self.assertEqual(row["PHASE"], "Standby")
            self.assertEqual(row["POD"], "<none>")
            self.assertEqual(row["NAMESPACE"], "<none>")
            self.assertRegex(row["AGE"], r"^\d+[smhd]$")
        small = [rows[c] for c in ready if rows[c]["INSTANCE-TYPE"] == "t3.small"]
        micro = [rows[c] for c in ready if rows[c]["INSTANCE-TYPE"] == "t3.micro"]
        self.assertEqual((len(small), len(micro)), (1, 1))
        # the catalog's on-demand prices, t3.small twice t3.micro's
        self.assertGreater(float(small[0]["$/H"]), 0)
        self.assertAlmostEqual(float(small[0]["$/H"]), 2 * float(micro[0]["$/H"]), places=3)

        # a pod claims the t3.small one: its row is the pod's, Running; a new standby follows
        pod, cfg = self.pod_of_type("t3.small")
        cell = self.cell_of(pod)
        row = {r["CELL"]: r for r in self.get_cells()}[cell]
        self.assertEqual((row["PHASE"], row["POD"], row["NAMESPACE"]),
                         ("Running", cfg.metadata.name, cfg.metadata.namespace))
        self.assertEqual(row["$/H"], small[0]["$/H"])
        self.wait_ready(2)
        standby = [r for r in self.get_cells() if r["PHASE"] in ("Standby", "Pending")]
        self.assertEqual(len(standby), 2, "kiyot get cells: %s" % standby)
        self.assertNotIn(cell, [r["CELL"] for r in standby])

    def test_caps_hold_count_and_spend(self):
        # 5 asked, at most 2 cells
        self.configure(shapes(("t3.small", 5), adaptive={"maxCells": 2}))
        self.wait_ready(2)
        self.settle()
        self.assertEqual(len(self.standby_of(self.env)), 2)
        self.assertEqual(len(self.standby_netns()), 2)
        # t3.small lists at $0.0208/h: $0.05 holds 2 (lowering the cap ends what is over)
        self.configure(shapes(("t3.small", 5), adaptive={"maxDollarsPerHour": 0.05}))
        self.wait_ready(2)
        self.settle()
        self.assertEqual(len(self.standby_of(self.env)), 2)
        self.configure(shapes(("t3.small", 5), adaptive={"maxDollarsPerHour": 0.03}))
        wait_for(lambda: len(self.standby_netns()) == 1, T_POOL, "one standby cell within $0.03")
        self.settle()
        self.assertEqual(len(self.standby_of(self.env)), 1)
        self.assertEqual(len(self.standby_netns()), 1)

    def test_a_standby_cell_past_its_idle_lifetime_is_replaced(self):
        self.configure(shapes(("t3.small", 1), adaptive={"idleLifetimeSeconds": 3}))
        [first] = self.wait_ready(1)
        wait_for(lambda: (lambda r: len(r) == 1 and r[0] != first)(self.ready()), T_POOL,
                 "a new standby cell in place of the expired one")
        self.assertNotIn(NETNS_PREFIX + first, cell_netns_list())
        self.assertIn("standby cell %s: expiry" % first, self.kiyot_log())

    def test_kill_9_with_standby_cells_adopts_them_none_leaked_none_duplicated(self):
        self.configure(shapes(("t3.small", 2)))
        before = self.wait_ready(2)
        agents = {i: find_agent_pid(NETNS_PREFIX + i) for i in before}
        self.assertTrue(all(agents.values()), "a standby cell has no agent: %s" % agents)

        self.c = self.env.restart_kiyot()  # SIGKILL, then the same config
        self.pb = self.c.pb
        self.settle()
        self.assertEqual(self.ready(), before)
        self.assertEqual(self.standby_netns(), sorted(NETNS_PREFIX + i for i in before))
        for i, pid in agents.items():
            self.assertTrue(pid_alive(pid), "cell %s's agent was replaced" % i)
            self.assertEqual(find_agent_pid(NETNS_PREFIX + i), pid)
        self.assertIn("pool: adopted 2 standby cells", self.kiyot_log())

        # and a pod takes one of them
        pod, _ = self.pod_of_type("t3.small")
        self.assertIn(self.cell_of(pod), before)

    def test_adaptive_pool_follows_arrivals_and_shrinks_to_zero(self):
        self.configure(shapes(adaptive={"enabled": "true", "windowSeconds": 4,
                                        "idleLifetimeSeconds": 4, "maxCells": 3}))
        # what an earlier setting left is above every target: it expires within its lifetime
        wait_for(lambda: not self.standby_of(self.env), T_POOL, "earlier standby cells to go")
        self.settle()
        self.assertEqual(self.standby_of(self.env), {}, "no arrival yet, no standby cell")
        pod, _ = self.pod_of_type("t3.medium")
        self.assertFalse(self.cell_of(pod).startswith("sb-"))
        [standby] = self.wait_ready(1, "t3.medium")
        log("adaptive: standby cell %s after one t3.medium pod" % standby)
        # no more pods: the target drops after the window, the cell expires after its lifetime
        wait_for(lambda: not self.standby_of(self.env), T_POOL, "the pool to shrink to zero")
        self.assertEqual(self.standby_netns(), [])
        self.assertIn("standby cell %s: expiry" % standby, self.kiyot_log())
