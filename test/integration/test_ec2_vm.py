"""The EC2 cell boot in a real VM: a kiyot whose provider is ec2 launches, for RunInstances
against the suite's EC2 endpoint (test/ec2/ec2sim.py), a QEMU VM of the cell image built by
deploy/cell-image/build.sh (TCG, OVMF; test/ec2/qemu_cell.py). The VM takes its address by
DHCP from a dnsmasq on a bridge of this test's own, reads its bootstrap (the user-data) from
ec2sim's metadata service at 169.254.169.254 on that bridge (IMDSv2), and its agent enrolls.

Slow under TCG, so it runs only when asked: `make test-vm` (KIYOT_ITEST_VM=1;
KIYOT_ITEST_VM_IMAGE=FILE boots that image instead of building one, KIYOT_ITEST_VM_ACCEL=kvm
uses KVM where there is one). Prints the
image build time and the boot-to-enrolled time; asserts neither. Nothing leaves the machine:
169.254.169.254 lives only on the test's bridge."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
import unittest

import cri
import streamclient
from ec2env import Ec2Kiyot, Ec2Sim, tags_of
from harness import BUILD, REPO, KiyotTest, http_get, log, sh, wait_for

VM_BRIDGE = "kiyotvm0"
VM_NET = "10.76.0.0/24"
VM_HOST_IP = "10.76.0.1"
IMDS_IP = "169.254.169.254"
ENABLED = os.environ.get("KIYOT_ITEST_VM", "") not in ("", "0")
BOOT_TIMEOUT = int(os.environ.get("KIYOT_ITEST_VM_BOOT_TIMEOUT", "900"))
ACCEL = os.environ.get("KIYOT_ITEST_VM_ACCEL", "tcg")
IMAGE_DIR = os.path.join(REPO, "deploy", "cell-image")
QEMU_CELL = os.path.join(REPO, "test", "ec2", "qemu_cell.py")
NEEDS = {"qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils",
         "dnsmasq": "dnsmasq-base"}


def _digest(paths, h=None):
    h = h or hashlib.sha256()
    for p in paths:
        h.update(os.path.relpath(p, REPO).encode() + b"\0")
        with open(p, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h


def root_inputs():
    """What the image's root tree is made of: build.sh, customize.sh and the files of rootfs/
    (not the kit's other tools nor its README)."""
    paths = [os.path.join(IMAGE_DIR, f) for f in ("build.sh", "customize.sh")]
    for root, _, files in os.walk(os.path.join(IMAGE_DIR, "rootfs")):
        paths += [os.path.join(root, f) for f in files]
    return sorted(p for p in paths if os.path.isfile(p))


def _prune(top, keep, old):
    """Removes what old(name) says is an earlier build's, in top, but keep."""
    for name in os.listdir(top):
        path = os.path.join(top, name)
        if not old(name) or name.startswith(keep):
            continue
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)


def _build(args, logf, what):
    """Runs build.sh with args, its output to logf; raises naming the log's end on failure."""
    with open(logf, "w") as f:
        res = subprocess.run([os.path.join(IMAGE_DIR, "build.sh"), "--arch", "amd64"] + args,
                             stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        with open(logf, errors="replace") as f:
            tail = f.read()[-3000:]
        raise RuntimeError("deploy/cell-image/build.sh (%s) failed (exit %d); %s ends:\n%s"
                           % (what, res.returncode, logf, tail))


def build_root():
    """The image's root tree (build.sh --root-only: the long step, which needs no agent) into
    BUILD/cell-image/root-<hash of the kit>, once; an older kit's tree is removed. (path,
    seconds the build took or None when cached)."""
    top = os.path.join(BUILD, "cell-image")
    name = "root-" + _digest(root_inputs()).hexdigest()[:16]
    root = os.path.join(top, name)
    if os.path.isdir(os.path.join(root, "root")):
        return root, None
    os.makedirs(top, exist_ok=True)
    t0 = time.monotonic()
    _build(["--root-only", root], root + ".log", "the root tree")
    _prune(top, name, lambda n: n.startswith("root-"))
    return root, time.monotonic() - t0


def build_image():
    """The cell image into BUILD/cell-image/<hash of the kit and the agent>/, once: the root
    tree (build_root) with this build's agent and shim put in. (path, seconds the build took,
    the root tree's included, or None when cached)."""
    binaries = [os.path.join(BUILD, b) for b in ("cell-agent", "cell-shim")]
    given = os.environ.get("KIYOT_ITEST_VM_IMAGE")
    if given:    # an image built before (e.g. by hand with build.sh)
        if not os.path.isfile(given):
            raise RuntimeError("KIYOT_ITEST_VM_IMAGE=%s: no such file" % given)
        return given, None
    h = _digest(root_inputs() + binaries)
    out_dir = os.path.join(BUILD, "cell-image", h.hexdigest()[:16])
    image = os.path.join(out_dir, "cell.raw")
    if os.path.exists(image):
        return image, None
    t0 = time.monotonic()
    root, _ = build_root()
    os.makedirs(out_dir, exist_ok=True)
    _build(["--root", root, "--agent", binaries[0], "--shim", binaries[1],
            "--out", image + ".tmp"], os.path.join(out_dir, "build.log"), "the image")
    if not os.path.exists(image + ".tmp"):
        raise RuntimeError("deploy/cell-image/build.sh made no %s.tmp" % image)
    os.replace(image + ".tmp", image)
    _prune(os.path.dirname(out_dir), os.path.basename(out_dir),
           lambda n: len(n) == 16 and all(c in "0123456789abcdef" for c in n))
    return image, time.monotonic() - t0


def host_boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


@unittest.skipUnless(ENABLED, "the VM boot runs with make test-vm (KIYOT_ITEST_VM=1)")
class Ec2VmTest(KiyotTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        missing = [pkg for tool, pkg in NEEDS.items() if shutil.which(tool) is None]
        if not os.path.exists("/usr/share/OVMF/OVMF_CODE_4M.fd"):
            missing.append("ovmf")
        if missing:
            raise RuntimeError("the VM test needs: apt-get install -y " + " ".join(missing)
                               + " (deploy/install-deps.sh)")
        cls.vm_dir = os.path.join(cls.env.work, "vm")
        os.makedirs(cls.vm_dir, exist_ok=True)
        cls.image, cls.build_seconds = build_image()
        log("cell image %s: %s" % (cls.image, "built in %.0f s" % cls.build_seconds
                                   if cls.build_seconds is not None else "cached"))
        cls.dnsmasq = cls.sim = cls.kiyot = None
        cls.made_bridge = False
        try:
            cls._network()
            cls._start_sim()
            cls.env.kill_kiyot(signal.SIGTERM)  # the VM wants the CPUs; back in tearDownClass
            cls.start_ec2_kiyot()
        except BaseException:
            cls._teardown()
            raise

    @classmethod
    def _network(cls):
        """The test's bridge: the VMs' gateway, DHCP, and the metadata address; the suite's
        registry (on the suite's bridge) is reached through the host."""
        links = json.loads(sh("ip", "-j", "link", "show", check=False, quiet=True) or "[]")
        if VM_BRIDGE not in [x.get("ifname") for x in links]:
            sh("ip", "link", "add", VM_BRIDGE, "type", "bridge")
        cls.made_bridge = True
        addrs = sh("ip", "-4", "-o", "addr", "show", check=False, quiet=True)
        for line in addrs.splitlines():
            if " %s/" % IMDS_IP in line and line.split()[1] != VM_BRIDGE:
                raise RuntimeError("%s is already on %s: the test keeps it on its own bridge"
                                   % (IMDS_IP, line.split()[1]))
        for addr in (VM_HOST_IP + "/24", IMDS_IP + "/32"):
            if " %s " % addr not in sh("ip", "-4", "-o", "addr", "show", "dev", VM_BRIDGE):
                sh("ip", "addr", "add", addr, "dev", VM_BRIDGE)
        sh("ip", "link", "set", VM_BRIDGE, "up")
        cls.hosts = os.path.join(cls.vm_dir, "dhcp-hosts")
        open(cls.hosts, "w").close()
        cls.dnsmasq_pid = os.path.join(cls.vm_dir, "dnsmasq.pid")
        cls.dnsmasq_log = os.path.join(cls.vm_dir, "dnsmasq.log")
        # DHCP only (no DNS), only for the MACs qemu_cell.py writes into the hosts file
        cls.dnsmasq = subprocess.Popen(
            ["dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--port=0",
             "--user=root",  # it rereads the hosts file in the work directory (0700)
             "--interface=" + VM_BRIDGE, "--bind-interfaces", "--except-interface=lo",
             "--dhcp-range=%s,static,255.255.255.0,1h" % VM_NET.split("/")[0],
             "--dhcp-hostsfile=" + cls.hosts, "--dhcp-leasefile=" +
             os.path.join(cls.vm_dir, "leases"), "--dhcp-option=option:router," + VM_HOST_IP,
             "--dhcp-authoritative", "--pid-file=" + cls.dnsmasq_pid, "--log-dhcp",
             "--log-facility=" + cls.dnsmasq_log],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        wait_for(lambda: os.path.exists(cls.dnsmasq_pid) or cls.dnsmasq.poll() is not None,
                 10, "dnsmasq to start")
        if cls.dnsmasq.poll() is not None:
            raise RuntimeError("dnsmasq exited %s; see %s" % (cls.dnsmasq.returncode,
                                                               cls.dnsmasq_log))

    @classmethod
    def _start_sim(cls):
        state = os.path.join(cls.vm_dir, "qemu")
        common = "--state-dir %s --dhcp-hosts %s --dnsmasq-pid %s" % (state, cls.hosts,
                                                                      cls.dnsmasq_pid)
        boot = ("/usr/bin/python3 %s launch %s --id {id} --bootstrap {bootstrap} --cpus {cpus} "
                "--memory {memory} --image %s --bridge %s --cidr %s --accel %s"
                % (QEMU_CELL, common, cls.image, VM_BRIDGE, VM_NET, ACCEL))
        term = "/usr/bin/python3 %s terminate %s --id {id}" % (QEMU_CELL, common)
        cls.qemu_state = state
        # the later --boot-cmd and --terminate-cmd replace Ec2Sim's local-cell ones
        cls.sim = Ec2Sim(cls.vm_dir, VM_NET, ["--boot-cmd", boot, "--terminate-cmd", term,
                                              "--imds-listen", IMDS_IP + ":80",
                                              "--terminated-ttl", "600", "-v"],
                         stop_timeout=120)

    @classmethod
    def start_ec2_kiyot(cls):
        k = Ec2Kiyot(cls.sim, cls.vm_dir, "vm", ec2={"imageId": "ami-0kiyotcellvm",
                                                     "launchTimeoutSeconds": BOOT_TIMEOUT})
        cls.kiyot, cls.state, cls.sock, cls.kiyot_log = k.proc, k.state, k.sock, k.log_path
        cls.client = k.client

    @classmethod
    def _teardown(cls):
        if cls.kiyot and cls.kiyot.poll() is None:
            cls.kiyot.send_signal(signal.SIGTERM)
            try:
                cls.kiyot.wait(60)
            except subprocess.TimeoutExpired:
                cls.kiyot.kill()
                cls.kiyot.wait()
        if cls.sim:
            cls.sim.stop()      # terminates the VMs still up
        if cls.dnsmasq and cls.dnsmasq.poll() is None:
            cls.dnsmasq.terminate()
            cls.dnsmasq.wait(10)
        if cls.made_bridge:
            sh("ip", "link", "del", VM_BRIDGE, check=False, quiet=True)

    @classmethod
    def tearDownClass(cls):
        cls._teardown()
        cls.env.start_kiyot()
        super().tearDownClass()

    def setUp(self):
        self.c = self.client
        self.pb = self.c.pb

    def vm_record(self, instance_id):
        path = os.path.join(self.qemu_state, instance_id + ".json")
        with open(path) as f:
            return json.load(f)

    def qemu_alive(self, rec):
        try:
            with open(rec["pidfile"]) as f:
                pid = int(f.read())
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                return rec["overlay"].encode() in f.read()
        except (OSError, ValueError):
            return False

    def test_a_pod_runs_in_a_vm_booted_from_the_cell_image(self):
        pb = self.pb
        cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi"})
        t0 = time.time()
        try:
            pod = self.c.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg),
                                               timeout=BOOT_TIMEOUT + 60).pod_sandbox_id
        except Exception:
            for name in sorted(os.listdir(self.qemu_state)):
                if name.endswith(".console"):
                    with open(os.path.join(self.qemu_state, name), errors="replace") as f:
                        log("---- %s ends:\n%s" % (name, f.read()[-4000:]))
            raise
        enrolled = time.time()
        self.pods = [pod]
        self.addCleanup(self._drop)
        mine = [i for i in self.sim.instances()
                if tags_of(i).get("kiyot.elotl.co/pod-uid") == cfg.metadata.uid]
        self.assertEqual(len(mine), 1, "one instance for the pod: %s" % mine)
        iid = mine[0]["instance_id"]
        rec = self.vm_record(iid)
        self.assertTrue(self.qemu_alive(rec), "the pod's instance has no qemu running")
        print("\nvm: image build %s; boot to enrolled %.0f s (RunInstances to RunPodSandbox's "
              "answer %.0f s), accel %s"
              % ("%.0f s" % self.build_seconds if self.build_seconds is not None
                 else "cached", enrolled - mine[0]["launch_time"], enrolled - t0, ACCEL),
              flush=True)
        # the bootstrap reached the VM through the metadata service, not its disk
        with open(self.sim.log_path, errors="replace") as f:
            self.assertIn("%s: metadata: user-data" % iid, f.read())
        ip = self.pod_status(pod).network.ip
        self.assertEqual(ip, rec["ip"], "the pod's IP is not its VM's")

        # the pod's output, in its log through the CRI: written by the VM's kernel
        busy = self.env.ref("busybox:1")
        cid, logp = self.create(pod, cfg, busy, command=[
            "sh", "-c", "echo boot-id=$(cat /proc/sys/kernel/random/boot_id); "
            "echo out-$((6*7)); exec nc -ll -p 9000 -e cat"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        text = "\n".join(self.wait_log(logp, lambda t: "out-42" in "\n".join(t),
                                        "the pod's output"))
        boot_id = [w for w in text.split() if w.startswith("boot-id=")][0][len("boot-id="):]
        self.assertNotEqual(boot_id, host_boot_id(), "the container runs on this machine's "
                            "kernel, not in the VM")

        # its IP answers: a server in the pod on the VM's address
        web, _ = self.create(pod, cfg, self.env.ref("hello:1"), name="web")
        self.start(web)
        self.wait_state(web, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(ip))

        # exec, synchronous and streamed
        r = self.c.runtime.ExecSync(pb.ExecSyncRequest(
            container_id=cid, cmd=["sh", "-c", "echo exec-$((5*5)); exit 3"], timeout=60),
            timeout=90)
        self.assertEqual((r.stdout, r.exit_code), (b"exec-25\n", 3))
        url = self.c.runtime.Exec(pb.ExecRequest(
            container_id=cid, cmd=["sh", "-c", "read x; echo got:$x"], stdin=True,
            stdout=True, stderr=True), timeout=30).url
        self.assertEqual(streamclient.spdy_exec(url, stdin=b"vm\n")["stdout"], b"got:vm\n")

        # the agent read its bootstrap from the metadata service (above); the pod's
        # containers, on the same network, cannot reach it (the instance's credentials)
        r = self.c.runtime.ExecSync(pb.ExecSyncRequest(
            container_id=cid, cmd=["sh", "-c", "nc -w 5 169.254.169.254 80 </dev/null 2>&1"],
            timeout=60), timeout=90)
        self.assertNotEqual(r.exit_code, 0, r.stdout)
        self.assertIn(b"Operation not permitted", r.stdout)

        # its usage, measured in the VM's cgroup v2 tree: the containers' CPU and memory
        # and the pod's network traffic (the HTTP answers above went through it)
        def measured():
            st = self.c.runtime.PodSandboxStats(pb.PodSandboxStatsRequest(
                pod_sandbox_id=pod), timeout=30).stats.linux
            ctrs = {c.attributes.id: c for c in st.containers}
            return (cid in ctrs and ctrs[cid].cpu.usage_core_nano_seconds.value > 0 and
                    ctrs[cid].memory.working_set_bytes.value > 0 and
                    st.memory.working_set_bytes.value > 0 and
                    st.network.default_interface.rx_bytes.value > 0) and st
        wait_for(measured, 60, "the pod's usage measured in the VM")

        # port-forward to the echo server in the VM
        data = hashlib.shake_256(b"vm-pf").digest(256 << 10)
        pf = lambda: self.c.runtime.PortForward(pb.PortForwardRequest(
            pod_sandbox_id=pod, port=[9000]), timeout=30).url
        wait_for(lambda: streamclient.spdy_port_forward(pf(), [(9000, b"x")])[0][0] == b"x",
                 60, "the echo server in the VM")
        got = streamclient.spdy_port_forward(pf(), [(9000, data)])
        self.assertEqual(hashlib.sha256(got[0][0]).hexdigest(),
                         hashlib.sha256(data).hexdigest())

        # removing the pod terminates the instance: its qemu is gone, and its tap
        self.c.runtime.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod), timeout=120)
        self.c.runtime.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod),
                                        timeout=120)
        self.pods = []
        wait_for(lambda: [i for i in self.sim.instances() if i["instance_id"] == iid and
                          i["state"] == "terminated"], 120, "the pod's instance terminated")
        wait_for(lambda: not self.qemu_alive(rec), 60, "the VM's qemu to exit")
        self.assertNotIn(rec["tap"], sh("ip", "-o", "link", "show", check=False, quiet=True))
        with self.assertRaises(OSError, msg="the pod's IP still answers"):
            http_get(ip, 8080, timeout=3)

    def _drop(self):
        for pod in self.pods:
            self._drop_one(pod)

    def _drop_one(self, pod):
        try:
            self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pod),
                                          timeout=120)
            self.c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(
                pod_sandbox_id=pod), timeout=120)
        except Exception as e:  # noqa: BLE001 - best effort after a failure
            log("cleanup of pod %s: %s" % (pod, cri.details_of(e)))


if __name__ == "__main__":
    unittest.main()
