"""A pod's security context in its cell, as the CRI defines it: users and groups, a read-only
root, no_new_privs, masked and read-only paths, every exec running as the container's own
process, exec timeouts, sysctls, PID/IPC/network namespaces, mount propagation, and the log
reopened after rotation."""

import json
import os
import socket
import subprocess
import time
import unittest

import grpc

from harness import KiyotTest, unique, wait_for

SLEEPER = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]


class SecurityTest(KiyotTest):
    def sc(self, **kw):
        pb = self.pb
        for k in ("run_as_user", "run_as_group"):
            if k in kw:
                kw[k] = pb.Int64Value(value=kw[k])
        return pb.LinuxContainerSecurityContext(**kw)

    def running(self, image="busybox:1", command=SLEEPER, security=None, pod=None, **kw):
        if pod is None:
            pod = self.run_pod(**kw)
        cid, log = self.create(pod[0], pod[1], self.env.ref(image), command=command,
                               security=security)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return pod, cid, log

    def exec(self, cid, script, timeout=20):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=["sh", "-c", script], timeout=timeout), timeout=timeout + 10)
        return r.exit_code, r.stdout.decode(), r.stderr.decode()

    def status_field(self, cid, field):
        _, out, _ = self.exec(cid, "grep '^%s:' /proc/self/status" % field)
        return out.split(":", 1)[1].split()

    def test_user_readonly_root_and_no_new_privs_hold_for_the_process_and_every_exec(self):
        sc = self.sc(run_as_user=1000, run_as_group=3000, readonly_rootfs=True,
                     no_new_privs=True)
        _, cid, log = self.running(
            command=["sh", "-c", "id -u; id -g; grep NoNewPrivs /proc/self/status; "
                     "touch /x || echo root-is-readonly; " + SLEEPER[2]], security=sc)
        texts = self.wait_log(log, lambda t: "root-is-readonly" in t, "the first output")
        self.assertEqual(texts[:2], ["1000", "3000"])
        self.assertEqual(texts[2].split(), ["NoNewPrivs:", "1"])
        # an exec (what exec probes run) is the same process: not root, no new privileges
        code, out, err = self.exec(cid, "id -u; id -g; grep NoNewPrivs /proc/self/status; "
                                   "touch /y")
        self.assertNotEqual(code, 0)
        self.assertEqual(out.split("\n")[:2], ["1000", "3000"])
        self.assertIn("NoNewPrivs:\t1", out)
        self.assertIn("Read-only file system", err)
        self.assertEqual(self.status_field(cid, "CapEff"), ["0000000000000000"])

    def test_groups_of_the_image_and_supplemental_groups_are_added(self):
        sc = self.sc(run_as_user=1000, supplemental_groups=[1234, 5678])
        _, cid, log = self.running("users:1", command=["sh", "-c", "id -G; " + SLEEPER[2]],
                                   security=sc)
        first = self.wait_log(log, lambda t: t, "id -G")[0].split()
        _, out, _ = self.exec(cid, "id -G")
        for groups in (first, out.split()):
            self.assertEqual(groups[0], "1000")
            self.assertEqual(sorted(groups[1:]), ["1234", "50000", "5678"])

    def test_root_gets_the_groups_the_image_lists_it_in(self):
        # busybox's /etc/group lists root in wheel (10): root is in 0 and 10 with no user
        # given, as containerd and runc make it, in the process and in every exec; the
        # CRI's supplemental groups come on top
        _, cid, log = self.running(command=["sh", "-c", "id -G; " + SLEEPER[2]])
        self.assertEqual(self.wait_log(log, lambda t: t, "id -G")[0].split(), ["0", "10"])
        self.assertEqual(self.exec(cid, "id -G")[1].split(), ["0", "10"])
        _, cid, _ = self.running(security=self.sc(supplemental_groups=[1234]))
        self.assertEqual(sorted(self.exec(cid, "id -G")[1].split()), ["0", "10", "1234"])

    def test_image_user_and_username(self):
        # the image's USER "app" (uid 1000); then a name the image's /etc/passwd resolves
        _, cid, _ = self.running("users:1")
        self.assertEqual(self.exec(cid, "id -un; id -u")[1].split(), ["app", "1000"])
        _, cid, _ = self.running("users:1", security=self.sc(run_as_username="www-data"))
        self.assertEqual(self.exec(cid, "id -un; id -u")[1].split(), ["www-data", "33"])

    def test_image_status_splits_user_and_group(self):
        pod, cfg = self.run_pod()
        for tag, uid, name in (("users:1", None, "app"), ("users:named", None, "www-data")):
            self.pull(self.env.ref(tag), cfg)
            st = self.c.image.ImageStatus(self.pb.ImageStatusRequest(
                image=self.pb.ImageSpec(image=self.env.ref(tag))), timeout=10).image
            self.assertEqual(st.username, name, tag)
            self.assertFalse(st.HasField("uid"), tag)

    def test_run_as_group_without_user_is_invalid(self):
        pod, cfg = self.run_pod()
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.create, pod, cfg,
                                  self.env.ref("busybox:1"), command=SLEEPER,
                                  security=self.sc(run_as_group=5))
        self.assertIn("run_as_group", details)

    def test_masked_and_readonly_paths_are_exactly_those_given(self):
        sc = self.sc(masked_paths=["/etc/shadow-not-there", "/etc/passwd"],
                     readonly_paths=["/tmp"])
        _, cid, _ = self.running(security=sc)
        code, _, err = self.exec(cid, "touch /tmp/x")
        self.assertNotEqual(code, 0)
        self.assertIn("Read-only file system", err)
        self.assertEqual(self.exec(cid, "wc -c < /etc/passwd")[1].strip(), "0")
        # none listed: none applied (the kubelet sends its defaults itself)
        _, cid, _ = self.running(security=self.sc())
        self.assertEqual(self.exec(cid, "touch /tmp/x && echo ok")[1].strip(), "ok")

    def test_exec_sync_timeout_kills_the_command_at_the_deadline(self):
        _, cid, _ = self.running(command=["tail", "-f", "/dev/null"])
        t0 = time.monotonic()
        details = self.assertCode(
            grpc.StatusCode.DEADLINE_EXCEEDED, lambda: self.c.runtime.ExecSync(
                self.pb.ExecSyncRequest(container_id=cid, cmd=["sleep", "37"], timeout=1),
                timeout=30))
        self.assertLess(time.monotonic() - t0, 8, "the timeout was not honoured")
        self.assertIn("timed out", details)
        code, out, _ = self.exec(cid, "ps -o args | grep -c '^sleep 37' || true")
        self.assertEqual(out.strip(), "0", "the timed-out command still runs")

    def test_reopen_container_log_makes_a_new_file(self):
        _, cid, log = self.running(command=["sh", "-c", "while :; do echo tick; sleep 0.3; "
                                            "done"])
        self.wait_log(log, lambda t: "tick" in t, "tick")
        os.rename(log, log + ".1")
        self.c.runtime.ReopenContainerLog(self.pb.ReopenContainerLogRequest(container_id=cid),
                                          timeout=10)
        self.assertTrue(os.path.exists(log), "no new log file after ReopenContainerLog")
        self.wait_log(log, lambda t: "tick" in t, "output in the new file")

    def test_namespaced_sysctls_apply_and_others_are_refused(self):
        sysctls = {"net.ipv4.ip_unprivileged_port_start": "80", "kernel.shm_rmid_forced": "1"}
        _, cid, _ = self.running(sysctls=sysctls)
        _, out, _ = self.exec(cid, "cat /proc/sys/net/ipv4/ip_unprivileged_port_start "
                              "/proc/sys/kernel/shm_rmid_forced")
        self.assertEqual(out.split(), ["80", "1"])
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.run_pod,
                                  sysctls={"kernel.panic": "5"})
        self.assertIn("kernel.panic", details)

    def ns_of(self, cid, kind):
        return self.exec(cid, "readlink /proc/self/ns/" + kind)[1].strip()

    def test_pid_and_ipc_namespaces_pod_container_and_node(self):
        pb = self.pb
        # POD (the CRI's default): the pod's containers share PID and IPC namespaces, whose
        # pid 1 is none of them
        pod = self.run_pod()
        _, a, _ = self.running(pod=pod)
        _, b, _ = self.running(pod=pod)
        self.assertEqual(self.ns_of(a, "pid"), self.ns_of(b, "pid"))
        self.assertEqual(self.ns_of(a, "ipc"), self.ns_of(b, "ipc"))
        self.assertNotIn("while", self.exec(a, "cat /proc/1/cmdline")[1])
        # CONTAINER: the container's own, its process is pid 1
        sc = self.sc(namespace_options=pb.NamespaceOption(pid=pb.CONTAINER))
        _, c, _ = self.running(pod=pod, security=sc)
        self.assertNotEqual(self.ns_of(c, "pid"), self.ns_of(a, "pid"))
        self.assertIn("while", self.exec(c, "cat /proc/1/cmdline")[1])
        # NODE: the cell's host (this node) for PID and IPC
        host = pb.NamespaceOption(pid=pb.NODE, ipc=pb.NODE)
        pod = self.run_pod(security=pb.LinuxSandboxSecurityContext(namespace_options=host))
        _, d, _ = self.running(pod=pod, security=self.sc(namespace_options=host))
        self.assertEqual(self.ns_of(d, "pid"), os.readlink("/proc/self/ns/pid"))
        self.assertEqual(self.ns_of(d, "ipc"), os.readlink("/proc/self/ns/ipc"))
        self.assertEqual(self.exec(d, "test -d /proc/%d && echo seen" % os.getpid())[1].strip(),
                         "seen")

    def test_the_pods_namespace_holder_runs_before_its_first_container(self):
        # made when the agent starts, not in the first CreateContainer (whose Apply it cost
        # tens of ms): one holder in the cell once RunPodSandbox answered
        pod, _ = self.run_pod()
        holders = lambda: [p for p in os.listdir("/proc") if p.isdigit() and
                           _comm(p) == "kiyot-pod-ns" and _cell_of(p) == pod[:20]]
        self.assertEqual(len(holders()), 1, "the pod's namespace holder after RunPodSandbox")

    def test_a_units_shim_runs_the_lean_shim_program(self):
        # cell-shim (libc and jansson) rather than the agent's binary, whose ~90 libraries
        # took ~20 ms of CPU to load in every StartContainer
        pod, _, _ = self.running()
        shims = [p for p in os.listdir("/proc") if p.isdigit() and
                 _cell_of(p) == pod[0][:20] and " shim --unit-dir " in _cmdline(p)]
        self.assertTrue(shims, "the unit's shim in the cell")
        for p in shims:
            self.assertEqual(os.path.basename(os.readlink("/proc/%s/exe" % p)), "cell-shim")

    def test_host_network_pod_sees_the_nodes_listeners(self):
        pb = self.pb
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        self.addCleanup(srv.close)
        port = srv.getsockname()[1]
        opts = pb.NamespaceOption(network=pb.NODE)
        pod = self.run_pod(security=pb.LinuxSandboxSecurityContext(namespace_options=opts))
        _, cid, _ = self.running(pod=pod, security=self.sc(namespace_options=opts))
        self.assertEqual(self.ns_of(cid, "net"), os.readlink("/proc/self/ns/net"))
        self.assertIn(":%d " % port, self.exec(cid, "netstat -lnt")[1])

    def shared_host_dir(self):
        """A directory bind-mounted on itself and made rshared, as a kubelet volume that
        propagates is; unmounted (with whatever was mounted under it) at the end."""
        d = os.path.join(self.env.work, unique("prop"))
        os.makedirs(os.path.join(d, "from-host"))
        os.makedirs(os.path.join(d, "from-container"))
        subprocess.run(["mount", "--bind", d, d], check=True)
        subprocess.run(["mount", "--make-rshared", d], check=True)
        self.addCleanup(subprocess.run, ["umount", "-R", "-l", d], check=False)
        return d

    def test_mount_propagation_host_to_container_and_bidirectional(self):
        pb = self.pb
        pod = self.run_pod()
        # made after the cell started, as the kubelet's volumes may be
        d = self.shared_host_dir()
        cid, _ = self.create(pod[0], pod[1], self.env.ref("busybox:1"), command=SLEEPER,
                             mounts=[("/m", d, False, pb.PROPAGATION_HOST_TO_CONTAINER)])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertEqual(self.cstatus(cid).mounts[0].propagation,
                         pb.PROPAGATION_HOST_TO_CONTAINER)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "host-tmpfs",
                        os.path.join(d, "from-host")], check=True)
        with open(os.path.join(d, "from-host", "flag"), "w") as f:
            f.write("host\n")
        wait_for(lambda: self.exec(cid, "cat /m/from-host/flag")[1].strip() == "host", 10,
                 "the host's new mount inside the container")
        # rslave: the container's mounts stay its own (it may not even make them)
        # rshared, for a privileged container: its mounts appear on the host
        cid2, _ = self.create(pod[0], pod[1], self.env.ref("busybox:1"), command=SLEEPER,
                              mounts=[("/m", d, False, pb.PROPAGATION_BIDIRECTIONAL)],
                              security=self.sc(privileged=True))
        self.start(cid2)
        self.wait_state(cid2, "CONTAINER_RUNNING")
        code, _, err = self.exec(cid2, "mount -t tmpfs -o size=1m ctr-tmpfs /m/from-container "
                                 "&& echo ctr > /m/from-container/flag")
        self.assertEqual(code, 0, err)
        wait_for(lambda: os.path.exists(os.path.join(d, "from-container", "flag")), 10,
                 "the container's mount on the host")
        self.assertIn("ctr-tmpfs", open("/proc/self/mountinfo").read())

    def seccomp_profile(self, blocked):
        path = os.path.join(self.env.work, unique("seccomp") + ".json")
        with open(path, "w") as f:
            f.write('{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": %s, '
                    '"action": "SCMP_ACT_ERRNO"}]}' % json.dumps(blocked))
        return path

    def test_seccomp_runtime_default_localhost_and_unconfined(self):
        pb = self.pb
        admin = pb.Capability(add_capabilities=["SYS_ADMIN"])
        # RuntimeDefault: filtered; sethostname needs CAP_SYS_ADMIN, unshare is refused
        rd = pb.SecurityProfile(profile_type=pb.SecurityProfile.RuntimeDefault)
        _, cid, _ = self.running(security=self.sc(seccomp=rd))
        self.assertEqual(self.status_field(cid, "Seccomp"), ["2"])
        code, _, err = self.exec(cid, "hostname foo")
        self.assertNotEqual(code, 0)
        self.assertIn("not permitted", err)
        _, cid, _ = self.running(security=self.sc(seccomp=rd, capabilities=admin))
        self.assertEqual(self.exec(cid, "hostname foo && hostname")[1].strip(), "foo")
        # the legacy name, and an exec gets the container's filter too
        _, cid, _ = self.running(security=self.sc(seccomp_profile_path="docker/default"))
        self.assertEqual(self.status_field(cid, "Seccomp"), ["2"])
        # Localhost: the node's file, read when the container is created
        path = self.seccomp_profile(["chmod", "fchmodat", "fchmodat2"])
        lh = pb.SecurityProfile(profile_type=pb.SecurityProfile.Localhost, localhost_ref=path)
        _, cid, _ = self.running(security=self.sc(seccomp=lh))
        os.unlink(path)
        code, _, err = self.exec(cid, "chmod 700 /tmp")
        self.assertNotEqual(code, 0)
        self.assertIn("not permitted", err)
        # Unconfined (and no profile at all): no filter
        un = pb.SecurityProfile(profile_type=pb.SecurityProfile.Unconfined)
        _, cid, _ = self.running(security=self.sc(seccomp=un))
        self.assertEqual(self.status_field(cid, "Seccomp"), ["0"])
        # a path without localhost/ and a profile that is not one are refused at once
        pod, cfg = self.run_pod()
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.create, pod, cfg,
                                  self.env.ref("busybox:1"), command=SLEEPER,
                                  security=self.sc(seccomp_profile_path="/etc/x.json"))
        self.assertIn("localhost/", details)
        bad = os.path.join(self.env.work, unique("bad") + ".json")
        with open(bad, "w") as f:
            f.write('{"defaultAction": "SCMP_ACT_NOPE"}')
        lh = pb.SecurityProfile(profile_type=pb.SecurityProfile.Localhost, localhost_ref=bad)
        # a profile that is no profile is the caller's to fix: INVALID_ARGUMENT, as the
        # cell's agent reports the unit's failure with its code
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.create, pod, cfg,
                                  self.env.ref("busybox:1"), command=SLEEPER,
                                  security=self.sc(seccomp=lh))
        self.assertIn("SCMP_ACT_NOPE", details)

    def test_pod_removal_kills_a_frozen_container_and_the_namespace_holder(self):
        # an OCI runtime killed while it froze a container leaves it FROZEN, where SIGKILL
        # waits; the cell's teardown thaws before killing, or processes (and the pod's PID
        # namespace holder, waiting on them) would outlive the cell
        pod, cid, _ = self.running()
        fz = [os.path.join(root, "freezer.state")
              for root, _, files in os.walk("/sys/fs/cgroup/freezer")
              if os.path.basename(root) == cid and "freezer.state" in files]
        self.assertEqual(len(fz), 1, "the container's freezer cgroup")
        procs = open(os.path.join(os.path.dirname(fz[0]), "cgroup.procs")).read().split()
        self.assertTrue(procs)
        holders = [p for p in os.listdir("/proc") if p.isdigit() and
                   _comm(p) == "kiyot-pod-ns" and _cell_of(p) == os.path.dirname(
                       os.path.dirname(fz[0])).rsplit("/", 1)[1]]
        self.assertEqual(len(holders), 1, "the pod's namespace holder in the cell's cgroup")
        with open(fz[0], "w") as f:
            f.write("FROZEN")
        self.stop_pod(pod[0])
        self.remove_pod(pod[0])
        for p in procs + holders:
            wait_for(lambda: _gone(p), 30, "process %s of the removed pod to be gone" % p)


def _comm(pid):
    try:
        with open("/proc/%s/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def _cmdline(pid):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _cell_of(pid):
    """The cell a process belongs to, from its memory cgroup (/kiyot/<cell>/...)."""
    try:
        with open("/proc/%s/cgroup" % pid) as f:
            for line in f:
                parts = line.strip().split(":", 2)
                if parts[1] == "memory" and parts[2].startswith("/kiyot/"):
                    return parts[2].split("/")[2]
    except OSError:
        pass
    return None


def _gone(pid):
    """True once pid has exited (a zombie left for init to reap counts as gone)."""
    try:
        with open("/proc/%s/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


if __name__ == "__main__":
    unittest.main()
