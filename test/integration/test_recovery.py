"""Crashes: kiyot killed with SIGKILL and restarted, a cell's agent killed."""

import json
import os
import signal
import sqlite3
import subprocess
import unittest

from harness import (BRIDGE, CIDR, Footprint, KiyotTest, find_agent_pid, kill_pid, log_texts,
                     netns_list, pid_alive, unique, wait_for)

COUNTER = "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"


def ticks(path):
    return [int(t.split()[1]) for t in log_texts(path) if t.startswith("tick ")]


class RecoveryTest(KiyotTest):
    def start_pod(self):
        """A pod with the HTTP server and a ticking logger, both RUNNING."""
        pod, cfg = self.run_pod()
        web, web_log = self.create(pod, cfg, self.env.ref("hello:1"))
        tick, tick_log = self.create(pod, cfg, self.env.ref("busybox:1"),
                                     command=["sh", "-c", COUNTER])
        self.start(web)
        self.start(tick)
        self.wait_state(web, "CONTAINER_RUNNING")
        self.wait_state(tick, "CONTAINER_RUNNING")
        ip = self.pod_ip(pod)
        self.assertIn("hello from kiyot", self.wait_http(ip))
        wait_for(lambda: len(ticks(tick_log)) >= 3, 60, "ticks in " + tick_log)
        return pod, ip, web, tick, tick_log

    def assertTicksComplete(self, path):
        n = ticks(path)
        self.assertEqual(n, list(range(n[0], n[0] + len(n))),
                         "the log has duplicated or missing lines around the crash")

    def remove_all(self, pod, fp, *cids):
        for cid in cids:
            self.stop(cid, timeout=5)
            self.wait_state(cid, "CONTAINER_EXITED", timeout=60)
            self.remove(cid)
        self.stop_pod(pod)
        self.remove_pod(pod)
        self.assertNoLeftovers(fp)

    def test_kiyot_sigkill_and_restart_keeps_pods_running(self):
        pb = self.pb
        pod, ip, web, tick, tick_log = self.start_pod()
        fp = Footprint(ip)
        self.assertTrue(fp.netns, "no netns holds the pod IP")
        before = len(ticks(tick_log))

        self.env.kill_kiyot(signal.SIGKILL)
        # The cell does not depend on kiyot being up.
        self.assertIn("hello from kiyot", self.wait_http(ip))
        self.c = self.env.start_kiyot()

        pods = self.c.runtime.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=30).items
        self.assertIn(pod, [p.id for p in pods], "the restarted kiyot forgot the pod")
        self.assertEqual(self.pod_status(pod).state, pb.SANDBOX_READY)
        self.assertEqual(self.pod_status(pod).network.ip, ip)
        ctrs = self.c.runtime.ListContainers(pb.ListContainersRequest(
            filter=pb.ContainerFilter(pod_sandbox_id=pod)), timeout=30).containers
        self.assertEqual(sorted(c.id for c in ctrs), sorted([web, tick]))
        for cid in (web, tick):
            self.assertEqual(self.cstatus(cid).state, pb.CONTAINER_RUNNING)
        self.assertIn("hello from kiyot", self.wait_http(ip))

        # Logs continue into the same file, nothing repeated or lost.
        wait_for(lambda: len(ticks(tick_log)) >= before + 10, 60, "ticks after the restart")
        self.assertTicksComplete(tick_log)

        self.remove_all(pod, fp, web, tick)

    def test_cell_agent_killed_pod_recovers_or_reports_and_cleans_up(self):
        pb = self.pb
        pod, ip, web, tick, tick_log = self.start_pod()
        fp = Footprint(ip)
        self.assertTrue(fp.netns, "no netns holds the pod IP")
        agent = find_agent_pid(fp.netns)
        self.assertIsNotNone(agent, "no cell-agent process in " + fp.netns)
        kill_pid(agent, signal.SIGKILL)
        wait_for(lambda: not pid_alive(agent), 10, "the agent to die")

        def settled():
            """'recovered' with a new agent and RUNNING units, or 'reported' with a clear
            state; None while neither."""
            sandbox = self.pod_status(pod)
            states = [self.cstatus(c) for c in (web, tick)]
            new_agent = find_agent_pid(fp.netns) if fp.netns else None
            if new_agent and new_agent != agent and \
                    all(s.state == pb.CONTAINER_RUNNING for s in states):
                return "recovered"
            if sandbox.state == pb.SANDBOX_NOTREADY:
                return "reported"
            if any(s.state in (pb.CONTAINER_EXITED, pb.CONTAINER_UNKNOWN) and
                   (s.reason or s.message) for s in states):
                return "reported"
            return None
        outcome = wait_for(settled, 90, "the pod to recover or report the dead agent")
        if outcome == "recovered":
            self.assertIn("hello from kiyot", self.wait_http(ip))
            n = len(ticks(tick_log))
            wait_for(lambda: len(ticks(tick_log)) >= n + 5, 60, "ticks after the agent restart")
            self.assertTicksComplete(tick_log)
        # Either way, stop and remove leave nothing: no netns, processes, cgroups, mounts.
        now = Footprint(ip)
        for cid in (web, tick):
            self.stop(cid, timeout=5)
        self.stop_pod(pod)
        self.remove_pod(pod)
        self.assertNoLeftovers(fp)
        if now.netns:
            self.assertNoLeftovers(now)

    def test_a_unit_whose_shim_and_process_are_killed_is_reported_exited(self):
        # the shim records a unit's exit; with it killed first, the agent must still see the
        # unit end, and say why, not report it running forever
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        info = json.loads(self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=30).info["info"])
        unit = os.path.join(self.env.state_dir, "cells", info["cellId"], "agent", "units", cid)
        with open(os.path.join(unit, "container.pid")) as f:
            process = int(f.read().strip())
        def cmdline(pid):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    return f.read()
            except OSError:
                return b""
        shims = [int(p) for p in os.listdir("/proc")
                 if p.isdigit() and b"shim\0--unit-dir\0" + unit.encode() in cmdline(p)]
        self.assertTrue(shims, "no shim process for " + unit)
        for pid in shims + [process]:
            kill_pid(pid, signal.SIGKILL)
        st = self.wait_state(cid, "CONTAINER_EXITED", timeout=20)
        self.assertNotEqual(st.exit_code, 0)
        self.assertIn("shim", st.message)

    def test_cells_no_sandbox_owns_are_removed_at_start(self):
        # A cell of this installation (our cluster id) that no sandbox owns, as a crash between
        # launching a cell and recording it could leave: the next start removes it.
        self.env.kill_kiyot(signal.SIGTERM)
        db = sqlite3.connect(os.path.join(self.env.state_dir, "kiyot.db"))
        cluster = db.execute("SELECT value FROM meta WHERE key = 'cluster_id'").fetchone()[0]
        db.close()
        cell = unique("orphan")
        boot = os.path.join(self.env.work, cell + ".json")
        with open(boot, "w") as f:
            json.dump({"version": 1, "cell_id": cell, "cluster_id": cluster,
                       "pod": {"uid": "u", "name": "gone", "namespace": "default"},
                       "state_dir": os.path.join(self.env.state_dir, "cells", cell, "agent")},
                      f)
        out = subprocess.run(
            [self.env.kiyot_bin, "local-cell", "launch", "--state-dir",
             os.path.join(self.env.state_dir, "cells"), "--id", cell, "--bootstrap", boot,
             "--bridge", BRIDGE, "--cidr", CIDR, "--cluster-id", cluster, "--agent",
             os.path.join(os.path.dirname(self.env.kiyot_bin), "cell-agent")],
            capture_output=True, text=True, check=True).stdout
        ip = json.loads(out)["ip"]
        fp = Footprint(ip)
        self.assertEqual(fp.netns, "kiyot-" + cell)
        self.c = self.env.start_kiyot()
        self.assertNoLeftovers(fp)
        self.assertNotIn("kiyot-" + cell, netns_list())


if __name__ == "__main__":
    unittest.main()
