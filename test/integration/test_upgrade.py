"""Upgrades: this kiyot replaces the previous release's (test/release/previous) on a node whose
cells run, and works with that release's agents, refusing them only what they cannot do.

The previous release is built from the repository's history by test/release/build.sh (once per
build directory; make test starts it in the background)."""

import os
import signal
import subprocess
import unittest

import grpc

from harness import (BUILD, REPO, Footprint, KiyotTest, find_agent_pid, log, log_texts,
                     wait_for)

COUNTER = "i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"


def previous_release():
    """The directory holding the previous release's kiyot, cell-agent and cell-shim."""
    out = subprocess.run([os.path.join(REPO, "test", "release", "build.sh"), BUILD],
                         capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        raise RuntimeError("building the previous release failed: " + out.stderr.strip())
    return out.stdout.strip().splitlines()[-1]


def ticks(path):
    return [int(t.split()[1]) for t in log_texts(path) if t.startswith("tick ")]


def cgroup_v2():
    """Whether the node's /sys/fs/cgroup is the unified hierarchy (where local cells' units
    get cgroup v2 settings)."""
    return subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True,
                          text=True).stdout.strip() == "cgroup2fs"


def release_of(binary):
    """What `BINARY --version` says, e.g. "cell-agent 0.1.0"."""
    return subprocess.run([binary, "--version"], capture_output=True, text=True,
                          timeout=30).stdout.split()[1]


def agent_exe(pod_ip):
    """The binary the agent of the cell at pod_ip runs."""
    fp = Footprint(pod_ip)
    pid = find_agent_pid(fp.netns)
    if not pid:
        raise AssertionError("no agent in the cell of " + pod_ip)
    return os.path.realpath("/proc/%d/exe" % pid)


class UpgradeTest(KiyotTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.release = previous_release()
        cls.old_kiyot = os.path.join(cls.release, "kiyot")
        cls.old_agent = os.path.join(cls.release, "cell-agent")
        cls.old = release_of(cls.old_agent)
        cls.new = release_of(os.path.join(BUILD, "cell-agent"))
        log("previous release %s in %s; this build %s" % (cls.old, cls.release, cls.new))

    def setUp(self):
        super().setUp()
        self.addCleanup(self.switch, os.path.join(BUILD, "kiyot"),
                        os.path.join(BUILD, "cell-agent"))

    def switch(self, kiyot_bin, agent_bin):
        """Replaces the running kiyot as systemd's restart does (SIGTERM, then the new binary
        on the same state), its new cells to run agent_bin."""
        self.env.kill_kiyot(signal.SIGTERM)
        self.env.kiyot_bin = kiyot_bin
        self.env.agent_bin = agent_bin
        self.c = self.env.start_kiyot()

    def ticking_pod(self):
        pod, cfg = self.run_pod()
        tick, tick_log = self.create(pod, cfg, self.env.ref("busybox:1"),
                                     command=["sh", "-c", COUNTER])
        self.start(tick)
        self.wait_state(tick, "CONTAINER_RUNNING")
        wait_for(lambda: len(ticks(tick_log)) >= 3, 60, "ticks in " + tick_log)
        return pod, cfg, tick, tick_log

    def exec_echo(self, cid, word):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid,
                                                            cmd=["echo", word], timeout=30),
                                    timeout=60)
        self.assertEqual((r.exit_code, r.stdout), (0, word.encode() + b"\n"))

    def create_unified(self, pod, cfg, key, value):
        """CreateContainer of a busybox with one cgroup v2 setting."""
        pb = self.pb
        name = "tuned-%s" % key.replace(".", "-")
        os.makedirs(os.path.join(cfg.log_directory, name), exist_ok=True)
        cc = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0),
            image=pb.ImageSpec(image=self.env.ref("busybox:1")),
            command=["sleep", "3600"], log_path="%s/0.log" % name,
            linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources(
                memory_limit_in_bytes=128 << 20, unified={key: value})))
        return self.c.runtime.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod, config=cc, sandbox_config=cfg), timeout=120).container_id

    def assertRefusedForRelease(self, pod, cfg):
        """The old agent's cell: cgroup v2 settings refused, naming both releases."""
        msg = self.assertCode(grpc.StatusCode.FAILED_PRECONDITION, self.create_unified, pod,
                              cfg, "pids.max", "64")
        self.assertIn("is release %s, which cannot apply linux.resources.unified" % self.old,
                      msg)
        self.assertIn("agents from 0.2.0 on can (this kiyot is %s)" % self.new, msg)

    def test_the_new_kiyot_adopts_the_previous_releases_cells_without_a_restart(self):
        pb = self.pb
        self.assertNotEqual(self.old, self.new, "test/release/previous names this release")
        self.switch(self.old_kiyot, self.old_agent)
        self.assertEqual(self.c.runtime.Version(pb.VersionRequest(version="v1"),
                                                timeout=30).runtime_version, self.old)
        pod, cfg, tick, tick_log = self.ticking_pod()
        ip = self.pod_ip(pod)
        self.assertEqual(agent_exe(ip), os.path.realpath(self.old_agent))
        started = self.cstatus(tick).started_at

        self.switch(os.path.join(BUILD, "kiyot"), os.path.join(BUILD, "cell-agent"))
        self.assertEqual(self.c.runtime.Version(pb.VersionRequest(version="v1"),
                                                timeout=30).runtime_version, self.new)
        # the pod, its cell and its container as they were: adopted, not restarted
        self.assertEqual(self.pod_status(pod).state, pb.SANDBOX_READY)
        self.assertEqual(self.pod_ip(pod), ip)
        st = self.cstatus(tick)
        self.assertEqual((st.state, st.started_at), (pb.CONTAINER_RUNNING, started))
        self.assertEqual(agent_exe(ip), os.path.realpath(self.old_agent))
        # its log goes on in the same file, no line lost or repeated across the switch
        before = len(ticks(tick_log))
        wait_for(lambda: len(ticks(tick_log)) >= before + 10, 60, "ticks after the upgrade")
        n = ticks(tick_log)
        self.assertEqual(n, list(range(n[0], n[0] + len(n))))
        # the old agent does what it can: exec, a new container in its cell
        self.exec_echo(tick, "upgraded")
        more, more_log = self.create(pod, cfg, self.env.ref("busybox:1"),
                                     command=["sh", "-c", "echo second; sleep 3600"])
        self.start(more)
        self.wait_state(more, "CONTAINER_RUNNING")
        self.wait_log(more_log, lambda t: "second" in t, "the second container's line")
        # and is refused what it cannot
        self.assertRefusedForRelease(pod, cfg)

        # a new pod gets this release's agent, which takes the settings to its cell (refused
        # here only by the node's cgroup v1, saying so, where a v2 node applies them)
        pod2, cfg2 = self.run_pod()
        self.assertEqual(agent_exe(self.pod_ip(pod2)),
                         os.path.realpath(os.path.join(BUILD, "cell-agent")))
        self.pull(self.env.ref("busybox:1"), cfg2)
        if cgroup_v2():
            self.assertTrue(self.create_unified(pod2, cfg2, "pids.max", "64"))
        else:
            msg = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.create_unified, pod2,
                                  cfg2, "pids.max", "64")
            self.assertIn("need the cgroup v2 hierarchy", msg)
        for cid in (tick, more):
            self.stop(cid, timeout=5)
        fp = Footprint(ip)
        self.stop_pod(pod)
        self.remove_pod(pod)
        self.assertNoLeftovers(fp)

    def test_new_pods_on_the_previous_releases_agent(self):
        """As with an EC2 cell image that was not rebuilt: this kiyot runs new pods on the
        previous release's agent."""
        self.switch(os.path.join(BUILD, "kiyot"), self.old_agent)
        pod, cfg, tick, tick_log = self.ticking_pod()
        self.assertEqual(agent_exe(self.pod_ip(pod)), os.path.realpath(self.old_agent))
        self.exec_echo(tick, "old-agent")
        self.assertRefusedForRelease(pod, cfg)
        self.stop(tick, timeout=5)
        self.wait_state(tick, "CONTAINER_EXITED", timeout=60)


if __name__ == "__main__":
    unittest.main()
