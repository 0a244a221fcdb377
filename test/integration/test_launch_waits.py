"""A launch waits for its cell only while the cell can still come up, and a stop during it
cancels it.

Local cells: the agent is a wrapper that stays in its boot (sleeps) or dies in it, with
cells.bootTimeoutSeconds far past the calls' deadlines, so only the new behaviour can end them
in time. EC2 cells: ec2sim keeps each instance pending for a few seconds (--boot-delay), long
enough to kill it (POST /_admin/kill) or stop its sandbox during its boot."""

import os
import signal
import threading

import grpc

import cri
from ec2env import Ec2Kiyot, Ec2Sim, tags_of
from harness import BUILD, KiyotTest, T_CALL, log, net_addr, pid_alive, wait_for

EC2_CIDR = net_addr("201.0/24")
BOOT_DELAY_S = 8


class LaunchCall:
    """RunPodSandbox in a thread of its own: its answer (the sandbox id) or its error."""

    def __init__(self, client, pb, cfg, timeout):
        self.pod = self.error = None
        self.thread = threading.Thread(target=self._run, args=(client, pb, cfg, timeout))
        self.thread.start()

    def _run(self, client, pb, cfg, timeout):
        try:
            self.pod = client.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg),
                                                    timeout=timeout).pod_sandbox_id
        except grpc.RpcError as e:
            self.error = e

    def wait(self, timeout):
        self.thread.join(timeout)
        return not self.thread.is_alive()


def sandbox_of(client, pb, uid):
    """The id of the sandbox listed for pod uid, or None."""
    for p in client.runtime.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=T_CALL).items:
        if p.metadata.uid == uid:
            return p.id
    return None


WRAPPER = """#!/bin/sh
# a cell's agent as the test wants it: stuck in its boot, dying in it, or the real one
case "$(cat %(mode)s 2>/dev/null)" in
stuck) echo $$ > %(pids)s/$$; exec /bin/sleep 3600 ;;
dies) echo $$ > %(pids)s/$$; /bin/sleep 1; exit 3 ;;
esac
exec %(agent)s "$@"
"""


class LocalLaunchWaitTest(KiyotTest):
    """The suite's kiyot with a wrapper for its agent and a boot timeout of 600 s."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        env = cls.env
        env.ensure()
        cls.mode = os.path.join(env.work, "agent-mode")
        cls.pids = os.path.join(env.work, "agent-pids")
        os.makedirs(cls.pids, exist_ok=True)
        cls.wrapper = os.path.join(env.work, "agent-wrapper.sh")
        with open(cls.wrapper, "w") as f:
            f.write(WRAPPER % {"mode": cls.mode, "pids": cls.pids,
                               "agent": os.path.join(BUILD, "cell-agent")})
        os.chmod(cls.wrapper, 0o755)
        cls.real_agent = env.agent_bin
        env.agent_bin = cls.wrapper
        env.cells_extra = "  bootTimeoutSeconds: 600\n"
        env.restart_kiyot()

    @classmethod
    def tearDownClass(cls):
        env = cls.env
        env.agent_bin = cls.real_agent
        env.cells_extra = ""
        env.restart_kiyot()
        super().tearDownClass()

    def set_mode(self, mode):
        with open(self.mode, "w") as f:
            f.write(mode)
        self.addCleanup(os.unlink, self.mode)

    def booting_agents(self):
        return [int(n) for n in os.listdir(self.pids)]

    def test_a_stop_while_the_agent_boots_cancels_the_launch(self):
        self.set_mode("stuck")
        before = set(self.booting_agents())
        cfg = self.sandbox_config()
        call = LaunchCall(self.c, self.pb, cfg, 90)
        pod = wait_for(lambda: sandbox_of(self.c, self.pb, cfg.metadata.uid), 30,
                       "the sandbox to be listed while it launches")
        agents = wait_for(lambda: set(self.booting_agents()) - before, 30,
                          "the cell's agent to start")
        self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pod),
                                      timeout=T_CALL)
        self.assertTrue(call.wait(60), "RunPodSandbox still waits after the stop")
        self.assertIsNotNone(call.error, "RunPodSandbox succeeded after its sandbox stopped")
        self.assertEqual(call.error.code(), grpc.StatusCode.CANCELLED, cri.details_of(call.error))
        self.assertIn("stopped while starting", cri.details_of(call.error))
        for pid in agents:
            wait_for(lambda: not pid_alive(pid), 30, "the booting agent %d to be gone" % pid)
        self.c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=pod),
                                        timeout=T_CALL)
        wait_for(lambda: sandbox_of(self.c, self.pb, cfg.metadata.uid) is None, 30,
                 "the sandbox to go")

    def test_an_agent_that_dies_in_its_boot_ends_the_launch_saying_so(self):
        self.set_mode("dies")
        cfg = self.sandbox_config()
        call = LaunchCall(self.c, self.pb, cfg, 90)
        self.assertTrue(call.wait(90), "RunPodSandbox did not end")
        self.assertIsNotNone(call.error, "RunPodSandbox succeeded with a dead agent")
        details = cri.details_of(call.error)
        log("RunPodSandbox: %s" % details)
        self.assertNotEqual(call.error.code(), grpc.StatusCode.DEADLINE_EXCEEDED, details)
        self.assertIn("failed during boot", details)
        self.assertIn("is not running", details)
        self.assertIn("agent.log", details)
        wait_for(lambda: sandbox_of(self.c, self.pb, cfg.metadata.uid) is None, 30,
                 "the failed sandbox to go")


class Ec2LaunchWaitTest(KiyotTest):
    """A kiyot with the EC2 provider against ec2sim, whose instances stay pending for
    BOOT_DELAY_S; the suite's kiyot is stopped meanwhile (they would share addresses)."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.env.kill_kiyot(signal.SIGTERM)
        cls.kiyot = None
        cls.sim = Ec2Sim(cls.env.work, EC2_CIDR,
                         ["--boot-delay", str(BOOT_DELAY_S), "--terminated-ttl", "300"])
        k = Ec2Kiyot(cls.sim, cls.env.work, "ec2-launch", cells={"bootTimeoutSeconds": 600},
                     ec2={"launchTimeoutSeconds": 600})
        cls.kiyot, cls.state, cls.sock, cls.client = k.proc, k.state, k.sock, k.client

    @classmethod
    def tearDownClass(cls):
        if cls.kiyot and cls.kiyot.poll() is None:
            cls.kiyot.send_signal(signal.SIGTERM)
            cls.kiyot.wait(60)
        cls.sim.stop()
        cls.env.start_kiyot()
        super().tearDownClass()

    def setUp(self):
        self.c = self.client
        self.pb = self.c.pb

    def tearDown(self):
        for p in self.c.runtime.ListPodSandbox(self.pb.ListPodSandboxRequest(),
                                               timeout=30).items:
            try:
                self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(
                    pod_sandbox_id=p.id), timeout=120)
                self.c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(
                    pod_sandbox_id=p.id), timeout=60)
            except Exception as e:  # noqa: BLE001 - reported, the next test goes on
                log("cleanup of %s: %s" % (p.id, e))

    def instance_of(self, uid, states=("pending",)):
        for i in self.sim.instances():
            if tags_of(i).get("kiyot.elotl.co/pod-uid") == uid and i.get("state") in states:
                return i
        return None

    def test_an_instance_killed_during_boot_ends_the_launch_with_its_reason(self):
        cfg = self.sandbox_config()
        call = LaunchCall(self.c, self.pb, cfg, 120)
        inst = wait_for(lambda: self.instance_of(cfg.metadata.uid), 30,
                        "the instance to be pending")
        self.sim.admin("kill", {"instance_id": inst["instance_id"], "keep_state": False})
        self.assertTrue(call.wait(120), "RunPodSandbox did not end")
        self.assertIsNotNone(call.error, "RunPodSandbox succeeded with its instance killed")
        details = cri.details_of(call.error)
        log("RunPodSandbox: %s" % details)
        self.assertNotEqual(call.error.code(), grpc.StatusCode.DEADLINE_EXCEEDED, details)
        self.assertIn(inst["instance_id"], details)
        self.assertIn("terminated", details)
        self.assertIn("Server.InternalError", details)
        wait_for(lambda: sandbox_of(self.c, self.pb, cfg.metadata.uid) is None, 30,
                 "the failed sandbox to go")

    def test_a_stop_during_boot_cancels_the_launch_and_terminates_the_instance(self):
        cfg = self.sandbox_config()
        call = LaunchCall(self.c, self.pb, cfg, 120)
        inst = wait_for(lambda: self.instance_of(cfg.metadata.uid), 30,
                        "the instance to be pending")
        pod = sandbox_of(self.c, self.pb, cfg.metadata.uid)
        self.assertIsNotNone(pod, "the launching sandbox is not listed")
        self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pod),
                                      timeout=T_CALL)
        self.c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=pod),
                                        timeout=T_CALL)
        self.assertTrue(call.wait(60), "RunPodSandbox still waits after the stop")
        self.assertIsNotNone(call.error, "RunPodSandbox succeeded after its sandbox stopped")
        self.assertEqual(call.error.code(), grpc.StatusCode.CANCELLED, cri.details_of(call.error))
        self.assertIn("stopped while starting", cri.details_of(call.error))
        wait_for(lambda: self.instance_of(cfg.metadata.uid, ("pending", "running")) is None,
                 60, "the instance %s to be terminated" % inst["instance_id"])
        wait_for(lambda: sandbox_of(self.c, self.pb, cfg.metadata.uid) is None, 30,
                 "the sandbox to go")
