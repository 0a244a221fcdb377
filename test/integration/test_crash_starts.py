"""kiyot killed with SIGKILL while 20 RunPodSandbox calls are in flight, started again, and each
call retried with the same config: every retry resumes its pod's cell, each cell has exactly
one agent, its containers answer ExecSync, and once the sandboxes are removed nothing of the
cells is left on the node. The same when the kubelet's next sync stops the interrupted sandbox
and runs the next attempt instead, as kubelets do when the runtime lists it not ready."""

import os
import subprocess
import unittest

from crashstarts import CrashRound
from harness import KiyotTest, T_CALL, log, pid_alive

N_PODS = 20


class CrashStartsTest(KiyotTest):
    maxDiff = None

    def setUp(self):
        super().setUp()
        self.round = None
        self.addCleanup(self._drop_round)

    def _drop_round(self):
        if self.round is None:
            return
        self.env.ensure()
        for e in self.round.remove_all():
            log("cleanup: " + e)

    def test_kill_during_concurrent_starts_then_retries_resume_each_cell_once(self):
        image = self.env.ref("busybox:1")
        r = self.round = CrashRound(self, N_PODS)
        r.start_and_kill()

        failed = r.retry()
        self.assertEqual(failed, {}, "retries of RunPodSandbox failed (%d of %d)" % (
            len(failed), N_PODS))
        # one sandbox per pod and attempt, the one the retry answered, ready
        listed = r.sandboxes()
        names = sorted(name for _, name, _, _ in listed)
        self.assertEqual(names, sorted(r.pods), "kiyot lists other sandboxes than one per pod")
        for pod, name, _, state in listed:
            self.assertEqual(pod, r.pods[name])
            self.assertEqual(state, self.pb.SANDBOX_READY, "sandbox of %s is not ready" % name)

        # exactly one agent in each cell, and no cell without a sandbox
        agents = r.agents()
        cells = {r.cell_of(pod) for pod in r.pods.values()}
        self.assertEqual({c: agents.get(c, []) for c in cells if len(agents.get(c, [])) != 1},
                         {}, "cells with other than one cell-agent process")
        self.assertEqual(r.orphans(), [], "cells of this round that no sandbox owns")

        exec_failed = r.exec_each(image)
        self.assertEqual(exec_failed, {}, "containers that did not answer ExecSync")
        self.assertEqual(r.duplicates(), {}, "cells with two agents after the execs")

        self.assertEqual(r.remove_all(), [])
        self.assertEqual(r.wait_clean(), [], "what the removed sandboxes' cells left")

    def test_kill_during_concurrent_starts_then_the_kubelets_next_attempt_starts_each_pod(self):
        # a kubelet whose RunPodSandbox failed lists the pod's sandboxes at its next sync:
        # kiyot lists the interrupted ones not ready, so the kubelet stops each and runs the
        # next attempt; the stopped ones' cells must go, the new ones have one agent each
        image = self.env.ref("busybox:1")
        r = self.round = CrashRound(self, N_PODS)
        r.start_and_kill()

        failed = r.kubelet_next()
        self.assertEqual(failed, {}, "the kubelet's next attempts failed (%d of %d)" % (
            len(failed), N_PODS))
        ready = sorted(name for _, name, _, state in r.sandboxes()
                       if state == self.pb.SANDBOX_READY)
        self.assertEqual(ready, sorted(r.pods), "pods with other than one ready sandbox")
        agents = r.agents()
        cells = {r.cell_of(pod) for pod in r.pods.values()}
        self.assertEqual({c: agents.get(c, []) for c in cells if len(agents.get(c, [])) != 1},
                         {}, "cells with other than one cell-agent process")
        self.assertEqual(r.orphans(), [], "cells of this round that no ready sandbox owns")
        self.assertEqual(r.exec_each(image), {}, "containers that did not answer ExecSync")
        self.assertEqual(r.remove_all(), [])
        self.assertEqual(r.wait_clean(), [], "what the removed sandboxes' cells left")

    def test_a_second_agent_beside_a_live_one_exits_at_once_naming_it(self):
        # what kiyot's restart must never do, done by hand: the cell's own agent keeps its cell
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        r = CrashRound(self, 0)
        cell = r.cell_of(pod)
        cell_dir = os.path.join(self.env.state_dir, "cells", cell)
        agent = r.agents()[cell]
        self.assertEqual(len(agent), 1)
        p = subprocess.Popen(["nsenter", "--net=/run/netns/kiyot-" + cell, self.env.agent_bin,
                              "--bootstrap", os.path.join(cell_dir, "bootstrap.json")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = p.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail("a second agent ran beside the first for 5 s")
        self.assertNotEqual(p.returncode, 0, "a second agent ran beside the first")
        self.assertIn("already has an agent", stderr)
        self.assertIn("held by pid %d" % agent[0], stderr)
        self.assertEqual(r.agents()[cell], agent)
        self.assertTrue(pid_alive(agent[0]))
        ex = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid,
                                                             cmd=["echo", "alive"], timeout=10),
                                     timeout=T_CALL)
        self.assertEqual((ex.exit_code, ex.stdout), (0, b"alive\n"))


if __name__ == "__main__":
    unittest.main()
