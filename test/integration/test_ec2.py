"""Pods through the EC2 provider, against the suite's local EC2 endpoint (test/ec2/ec2sim.py,
signatures checked with botocore), whose instances boot as local cells from their user-data.

A second kiyot, configured with `cells.provider: ec2`, serves these tests on its own socket;
the suite's local-provider kiyot is stopped meanwhile so the two never share addresses."""

import hashlib
import json
import os
import re
import signal
import sqlite3
import threading
import time
import unittest

import grpc

import cri
import streamclient
from ec2env import Ec2Kiyot, Ec2Sim, tags_of
from harness import KiyotTest, REPO, log, net_addr, unique, wait_for
from test_streaming import upload_reaches_a_half_closing_pod
from volumes import KubeletVolumes, VolumeChecks, atomic_write

EC2_CIDR = net_addr("200.0/24")
# ec2.subnetIds of the suite's kiyot, in two zones of the endpoint
SUBNET_A, SUBNET_B = "subnet-0000000000000000a", "subnet-0000000000000000b"
NODE = "ec2-node-a"  # the nodeName of the suite's EC2 kiyot: its instances carry it


class Ec2Test(KiyotTest, VolumeChecks):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.env.kill_kiyot(signal.SIGTERM)
        # boots take 2 s, so a test can catch a launch while it waits
        cls.sim = Ec2Sim(cls.env.work, EC2_CIDR,
                         ["--boot-delay", "2", "--terminated-ttl", "60"])
        cls.sim.admin("subnets", {SUBNET_A: "us-east-1a", SUBNET_B: "us-east-1b"})
        cls.kiyot = None

    @classmethod
    def tearDownClass(cls):
        cls.stop_ec2_kiyot()
        cls.sim.stop()
        cls.env.start_kiyot()
        super().tearDownClass()

    @classmethod
    def start_ec2_kiyot(cls):
        k = Ec2Kiyot(cls.sim, cls.env.work, "ec2", nodeName=NODE,
                     cells={"gcIntervalSeconds": 1, "gcGraceSeconds": 3},
                     ec2={"subnetIds": [SUBNET_A, SUBNET_B]})
        cls.kiyot, cls.state, cls.sock, cls.log_path = k.proc, k.state, k.sock, k.log_path
        return k.client

    @classmethod
    def stop_ec2_kiyot(cls, sig=signal.SIGTERM):
        if cls.kiyot and cls.kiyot.poll() is None:
            cls.kiyot.send_signal(sig)
            cls.kiyot.wait(60)

    def setUp(self):
        if not self.kiyot or self.kiyot.poll() is not None:
            type(self).start_ec2_kiyot()
        self.c = cri.Client(self.sock)
        self.pb = self.c.pb
        self.sim.admin("faults/clear", {})
        self.sim.admin("throttle", {"seconds": 0})
        self.sim.admin("consistency", {"seconds": 0})

    def tearDown(self):
        # every pod of the test goes, and with it its instance
        for p in self.c.runtime.ListPodSandbox(self.pb.ListPodSandboxRequest(),
                                               timeout=30).items:
            try:
                self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(
                    pod_sandbox_id=p.id), timeout=120)
                self.c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(
                    pod_sandbox_id=p.id), timeout=60)
            except Exception as e:  # noqa: BLE001 - reported, the next test goes on
                log("cleanup of %s: %s" % (p.id, e))
        self.c.close()

    def live(self, pred=lambda i: True):
        return [i for i in self.sim.instances()
                if i.get("state") in ("pending", "running") and pred(i)]

    def test_the_price_list_is_asked_of_no_public_endpoint(self):
        """The suite's EC2 kiyot keeps the shipped prices and never tries AWS's public Price
        List, which a test machine may not reach (ec2env's starter turns it off)."""
        def text():
            with open(self.log_path, errors="replace") as f:
                return f.read()
        wait_for(lambda: "the AWS Price List is off" in text(), 60, "the catalog's prices line")
        self.assertNotIn("AWS Price List GetProducts", text())

    def test_pod_runs_in_an_instance_tagged_for_it_and_terminated_with_it(self):
        cfg = self.sandbox_config(labels={"app": "web", "kubernetes.io/ignored": "x"},
                                  annotations={"pod.elotl.co/memory": "400Mi"})
        pod = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        mine = self.live(lambda i: tags_of(i).get("kiyot.elotl.co/pod-uid") ==
                         cfg.metadata.uid)
        self.assertEqual(len(mine), 1, "one instance per pod")
        tags = tags_of(mine[0])
        self.assertEqual(tags.get("kiyot.elotl.co/pod-name"), cfg.metadata.name)
        self.assertEqual(tags.get("kiyot.elotl.co/pod-namespace"), cfg.metadata.namespace)
        self.assertTrue(tags.get("kiyot.elotl.co/cluster-id"))
        self.assertEqual(tags.get("kiyot.elotl.co/node"), NODE)
        self.assertEqual(tags.get("app"), "web")
        self.assertNotIn("kubernetes.io/ignored", tags)
        st = self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=30)
        self.assertEqual(mine[0]["instance_type"], json.loads(st.info["info"])["instanceType"],
                         "the instance is not of the type sizing chose")
        ip = self.pod_ip(pod)
        self.assertEqual(ip, mine[0].get("ip") or mine[0].get("private_ip"))
        cid, _ = self.create(pod, cfg, self.env.ref("hello:1"))
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(ip))
        self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pod),
                                      timeout=120)
        wait_for(lambda: not self.live(lambda i: i["instance_id"] ==
                                       mine[0]["instance_id"]), 60,
                 "the pod's instance to be terminated")

    def test_security_context_holds_in_an_ec2_cell(self):
        pb = self.pb
        cfg = self.sandbox_config(sysctls={"net.ipv4.ip_unprivileged_port_start": "81",
                                           "kernel.shm_rmid_forced": "1"})
        pod = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        # a Localhost seccomp profile on the node: read at CreateContainer, shipped with the
        # unit (the cell cannot read the node's files)
        profile = os.path.join(self.env.work, unique("seccomp") + ".json")
        with open(profile, "w") as f:
            f.write('{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": '
                    '["chmod", "fchmodat", "fchmodat2"], "action": "SCMP_ACT_ERRNO"}]}')
        sc = pb.LinuxContainerSecurityContext(
            run_as_user=pb.Int64Value(value=1000), run_as_group=pb.Int64Value(value=3000),
            supplemental_groups=[4000], readonly_rootfs=True, no_new_privs=True,
            readonly_paths=["/tmp"], seccomp=pb.SecurityProfile(
                profile_type=pb.SecurityProfile.Localhost, localhost_ref=profile))
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"),
                             command=["sh", "-c", "while :; do sleep 1; done"], security=sc)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        r = self.c.runtime.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=[
            "sh", "-c", "id -u; id -G; grep NoNewPrivs /proc/self/status; "
            "cat /proc/sys/net/ipv4/ip_unprivileged_port_start "
            "/proc/sys/kernel/shm_rmid_forced; touch /x /tmp/x"], timeout=20), timeout=40)
        out = r.stdout.decode().split("\n")
        self.assertEqual(out[0], "1000")
        self.assertEqual(out[1].split(), ["3000", "4000"])
        self.assertEqual(out[2].split(), ["NoNewPrivs:", "1"])
        self.assertEqual(out[3:5], ["81", "1"])
        self.assertNotEqual(r.exit_code, 0)
        self.assertEqual(r.stderr.decode().count("Read-only file system"), 2)
        r = self.c.runtime.ExecSync(pb.ExecSyncRequest(container_id=cid, cmd=[
            "sh", "-c", "grep Seccomp: /proc/self/status; chmod 700 /proc"], timeout=20),
            timeout=40)
        self.assertEqual(r.stdout.decode().split(), ["Seccomp:", "2"])
        self.assertIn("not permitted", r.stderr.decode())

    def test_exec_attach_and_port_forward_reach_an_ec2_cell(self):
        # the streaming server joins the client to the agent in the instance, as for local
        # cells: exec with its exit code, attach to a terminal, port-forward byte for byte
        pb = self.pb
        cfg = self.sandbox_config()
        pod = self.c.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"),
                             command=["sh", "-c", "nc -ll -p 9000 -e cat & exec sh"],
                             stdio={"stdin": True, "tty": True})
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        url = self.c.runtime.Exec(pb.ExecRequest(
            container_id=cid, cmd=["sh", "-c", "read x; echo got:$x; exit 5"], stdin=True,
            stdout=True, stderr=True), timeout=30).url
        out = streamclient.spdy_exec(url, stdin=b"ec2\n")
        self.assertEqual(out["stdout"], b"got:ec2\n")
        st = json.loads(out["error"].decode())
        self.assertEqual(st["details"]["causes"], [{"reason": "ExitCode", "message": "5"}])
        s = streamclient.Session(self.c.runtime.Attach(pb.AttachRequest(
            container_id=cid, stdin=True, tty=True, stdout=True), timeout=30).url,
            "ws", stdin=True, tty=True)
        try:
            s.write(b"echo in-$((6*7))\n")
            s.read_until(b"in-42")
        finally:
            s.close()
        big = hashlib.shake_256(b"ec2-pf").digest(1 << 20)
        pf = lambda: self.c.runtime.PortForward(pb.PortForwardRequest(
            pod_sandbox_id=pod, port=[9000]), timeout=30).url
        wait_for(lambda: streamclient.spdy_port_forward(pf(), [(9000, b"x")])[0][0] == b"x",
                 20, "the echo server in the instance")
        got = streamclient.spdy_port_forward(pf(), [(9000, big)])
        self.assertEqual(hashlib.sha256(got[0][0]).hexdigest(),
                         hashlib.sha256(big).hexdigest())
        self.assertEqual(self.cstatus(cid).state, pb.CONTAINER_RUNNING)
        # a pod that ends its output first still takes the whole upload (through the agent)
        sink, _ = self.create(pod, cfg, self.env.ref("busybox:1"), name="sink", command=[
            "sh", "-c", "nc -l -p 9100 | sha256sum > /tmp/up.sha; sleep 3600"])
        self.start(sink)
        self.wait_state(sink, "CONTAINER_RUNNING")
        upload_reaches_a_half_closing_pod(self, self.c, pb, pod, sink)

    def test_volumes_are_shipped_into_the_cell_and_kept_in_sync(self):
        cfg = self.volume_sandbox(self.sandbox_config())
        vols = KubeletVolumes(os.path.join(self.env.work, "kubelet-ec2"), cfg.metadata.uid)
        pod = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        image = self.env.ref("busybox:1")
        _, reader = self.start_volume_pod(pod, cfg, vols, image)
        self.check_volumes(reader, vols)

        # the units mount the cell's own copies, not the kubelet's directories on the node
        roots = {f[4]: f[3] for f in (line.split() for line in
                                      self.cat(reader, "/proc/self/mountinfo").splitlines())}
        self.assertIn("/volumes/sv-", roots["/etc/config"])
        self.assertNotIn("kubernetes.io~", roots["/etc/config"])
        self.assertIn("/volumes/sv-", roots["/etc/hosts"])
        self.assertIn("/volumes/ed-scratch", roots["/scratch"])
        self.assertFalse(os.path.exists(os.path.join(vols.scratch, "note")),
                         "the cell's emptyDir wrote into the node's directory")

        # a termination message written in the cell reaches the file the kubelet reads
        term = os.path.join(vols.pod, "containers", "bye", "5f1d7c2b")
        os.makedirs(os.path.dirname(term))
        open(term, "w").close()
        bye, _ = self.create(pod, cfg, image, name="bye", command=["sh", "-c"],
                             args=["echo goodbye > /dev/termination-log; exit 3"],
                             mounts=[("/dev/termination-log", term, False)], pull=False,
                             annotations={"io.kubernetes.container.terminationMessagePath":
                                          "/dev/termination-log"})
        self.start(bye)
        self.assertEqual(self.wait_state(bye, "CONTAINER_EXITED").exit_code, 3)
        with open(term) as f:
            self.assertEqual(f.read(), "goodbye\n")

        # a restarted kiyot keeps the volumes in sync
        self.stop_ec2_kiyot(signal.SIGKILL)
        self.c = type(self).start_ec2_kiyot()
        atomic_write(vols.creds, {"password": "rotated"}, mode=0o400)
        wait_for(lambda: self.exec_in(reader, "cat", "/etc/creds/password")[1] == "rotated",
                 30, "the rotated secret in the unit after kiyot's restart")

        # a hostPath volume cannot reach a cell on another machine
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.create, pod, cfg, image,
                                  mounts=[("/host-logs", "/var/log", True)], pull=False)
        self.assertIn("hostPath", details)

    def test_no_capacity_moves_to_the_next_candidate(self):
        self.sim.admin("capacity", {"instance_type": "t3a.nano"})
        self.sim.admin("capacity", {"instance_type": "t3.nano"})
        cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi"})
        self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg), timeout=180)
        mine = self.live(lambda i: tags_of(i).get("kiyot.elotl.co/pod-uid") ==
                         cfg.metadata.uid)
        self.assertEqual(len(mine), 1)
        self.assertNotIn(mine[0]["instance_type"], ("t3a.nano", "t3.nano"))
        stats = self.sim.admin("stats")
        self.assertIn("InsufficientInstanceCapacity", json.dumps(stats))

    def test_throttling_is_survived(self):
        self.sim.admin("throttle", {"count": 3})
        cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi"})
        pod = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
        self.assertIn("RequestLimitExceeded", json.dumps(self.sim.admin("stats")))

    def test_gc_removes_our_orphans_and_never_touches_foreign_instances(self):
        db = sqlite3.connect(os.path.join(self.state, "kiyot.db"))
        cluster = db.execute("SELECT value FROM meta WHERE key = 'cluster_id'").fetchone()[0]
        db.close()
        foreign = self.sim.admin("foreign", {"instance_type": "t3.micro"})["instance_id"]
        stranger = self.sim.admin("foreign", {"instance_type": "t3.micro", "tags": {
            "kiyot.elotl.co/cluster-id": "someone-else", "kiyot.elotl.co/cell-id": "x"}})
        orphan = self.sim.admin("foreign", {"instance_type": "t3.micro", "tags": {
            "kiyot.elotl.co/cluster-id": cluster,
            "kiyot.elotl.co/cell-id": unique("orphan")}})["instance_id"]
        # the same cluster's cell of another node (its kiyot keeps or collects it), and one of
        # this node's unknown to it
        neighbour = self.sim.admin("foreign", {"instance_type": "t3.micro", "tags": {
            "kiyot.elotl.co/cluster-id": cluster, "kiyot.elotl.co/node": "another-node",
            "kiyot.elotl.co/cell-id": unique("theirs")}})["instance_id"]
        mine = self.sim.admin("foreign", {"instance_type": "t3.micro", "tags": {
            "kiyot.elotl.co/cluster-id": cluster, "kiyot.elotl.co/node": NODE,
            "kiyot.elotl.co/cell-id": unique("orphan")}})["instance_id"]
        # gcIntervalSeconds 1, gcGraceSeconds 3: gone within seconds
        wait_for(lambda: not self.live(lambda i: i["instance_id"] in (orphan, mine)), 30,
                 "our orphan instances to be terminated")
        time.sleep(2)
        self.assertEqual(len(self.live(lambda i: i["instance_id"] == neighbour)), 1,
                         "another node's instance of the same cluster was touched")
        self.assertEqual(len(self.live(lambda i: i["instance_id"] == foreign)), 1,
                         "an instance without our cluster id was touched")
        self.assertEqual(len(self.live(lambda i: i["instance_id"] ==
                                       stranger["instance_id"])), 1,
                         "another cluster's instance was touched")

    def test_kiyot_killed_mid_launch_neither_leaks_nor_launches_twice(self):
        cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi"})
        uid = cfg.metadata.uid
        # boots are slow (--boot-delay): the launch is still waiting when kiyot dies
        def run():
            try:
                self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                             timeout=60)
            except Exception:  # noqa: BLE001 - the crash ends this call
                pass
        t = threading.Thread(target=run)
        t.start()
        wait_for(lambda: self.live(lambda i: tags_of(i).get("kiyot.elotl.co/pod-uid") == uid),
                 30, "the instance to be requested")
        type(self).stop_ec2_kiyot(signal.SIGKILL)
        t.join(60)
        type(self).start_ec2_kiyot()
        self.c = cri.Client(self.sock)
        # the kubelet retries the same sandbox
        pod = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
        mine = [i for i in self.sim.instances()
                if tags_of(i).get("kiyot.elotl.co/pod-uid") == uid]
        self.assertEqual(len(mine), 1, "a second instance was launched: %s" % mine)


    # ---- EC2's failures ----

    def run_pod(self, cfg, timeout=180):
        return self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                            timeout=timeout).pod_sandbox_id

    def mine(self, cfg):
        return [i for i in self.sim.instances()
                if tags_of(i).get("kiyot.elotl.co/pod-uid") == cfg.metadata.uid]

    def cluster_id(self):
        db = sqlite3.connect(os.path.join(self.state, "kiyot.db"))
        try:
            return db.execute("SELECT value FROM meta WHERE key = 'cluster_id'").fetchone()[0]
        finally:
            db.close()

    def test_a_refused_terminate_leaves_the_instance_for_the_next_attempt(self):
        # EC2 answers a *.NotFound code that is not about the instance: kiyot must not take it
        # for "terminated", and the kubelet's retry of StopPodSandbox terminates it
        cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi"})
        pod = self.run_pod(cfg)
        inst = self.mine(cfg)[0]["instance_id"]
        self.sim.admin("fault", {"action": "TerminateInstances",
                                 "code": "InvalidAttachment.NotFound", "times": 1,
                                 "message": "The attachment ID 'eni-attach-0' does not exist"})
        stop = self.pb.StopPodSandboxRequest(pod_sandbox_id=pod)
        try:
            self.c.runtime.StopPodSandbox(stop, timeout=120)
            stopped_first = True
        except grpc.RpcError as e:
            stopped_first = False
            self.assertIn("left for the next attempt", e.details())
        self.assertFalse(stopped_first and self.live(lambda i: i["instance_id"] == inst),
                         "StopPodSandbox succeeded while the instance still runs")
        self.c.runtime.StopPodSandbox(stop, timeout=120)  # the kubelet's retry
        wait_for(lambda: not self.live(lambda i: i["instance_id"] == inst), 60,
                 "the pod's instance to be terminated")

    def test_gc_terminates_many_orphans_in_a_few_calls(self):
        cluster = self.cluster_id()
        n = 300
        orphans = set()
        for i in range(n):
            orphans.add(self.sim.admin("foreign", {"instance_type": "t3.micro", "tags": {
                "kiyot.elotl.co/cluster-id": cluster,
                "kiyot.elotl.co/cell-id": "orphan-%03d-%s" % (i, unique("o"))}})["instance_id"])
        self.sim.admin("stats/reset", {})
        # gcIntervalSeconds 1, gcGraceSeconds 3
        wait_for(lambda: not self.live(lambda i: i["instance_id"] in orphans), 120,
                 "the %d orphans to be terminated" % n)
        stats = self.sim.admin("stats")
        calls = stats["calls"]
        log("gc of %d orphans: %s" % (n, calls))
        # batched: a TerminateInstances per batch of up to 1000 ids (one per orphan before)
        self.assertLess(calls.get("TerminateInstances", 0), n // 10)
        self.assertLess(calls.get("DescribeInstances", 0), n // 2)

    def test_no_capacity_in_a_zone_moves_to_the_next_subnet(self):
        self.sim.admin("fault", {"action": "RunInstances", "code": "InsufficientInstanceCapacity",
                                 "zone": "us-east-1a"})
        cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi"})
        pod = self.run_pod(cfg)
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
        inst = self.mine(cfg)
        self.assertEqual(len(inst), 1)
        self.assertEqual(inst[0]["az"], "us-east-1b")
        with open(os.path.join(self.env.work, "kiyot-ec2.log")) as f:
            text = f.read()
        self.assertIn("in %s: InsufficientInstanceCapacity" % SUBNET_A, text)
        self.assertIn("launched %s in %s" % (inst[0]["instance_type"], SUBNET_B), text)

    def test_spot_pod_launches_in_the_cheaper_zones_subnet(self):
        # us-east-1b (SUBNET_B, second in ec2.subnetIds) has spot at 60% of us-east-1a's; the
        # catalog refresh at start reads both zones' prices
        self.sim.admin("spot", {"zones": {"us-east-1a": 1.0, "us-east-1b": 0.6}})
        try:
            type(self).stop_ec2_kiyot()
            log_path = os.path.join(self.env.work, "kiyot-ec2.log")
            mark = os.path.getsize(log_path)
            type(self).start_ec2_kiyot()
            self.c = cri.Client(self.sock)

            def refreshed():
                with open(log_path) as f:
                    f.seek(mark)
                    return "spot prices updated" in f.read()
            wait_for(refreshed, 60, "the catalog refresh")
            cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi",
                                                   "pod.elotl.co/launch-type": "spot"})
            pod = self.run_pod(cfg)
            self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
            inst = self.mine(cfg)
            self.assertEqual(len(inst), 1)
            self.assertEqual(inst[0]["market"], "spot")
            self.assertEqual(inst[0]["az"], "us-east-1b")
            self.assertEqual(inst[0]["subnet_id"], SUBNET_B)
            with open(log_path) as f:
                f.seek(mark)
                self.assertIn("%s (us-east-1b) first: %s's spot price there is"
                              % (SUBNET_B, inst[0]["instance_type"]), f.read())
            # the sizing reason names the chosen type's interruption band, from the shipped
            # Spot Instance Advisor table
            st = self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
                pod_sandbox_id=pod, verbose=True), timeout=30)
            reason = json.loads(st.info["info"])["sizingReason"]
            m = re.search(r": (\S+) \$[0-9.]+/h spot \(", reason)
            self.assertTrue(m, reason)
            with open(os.path.join(REPO, "kiyot/sizing/data/aws-spot-advisor.json")) as f:
                advice = json.load(f)["regions"]["us-east-1"].get(m.group(1))
            words = ["<5%", "5-10%", "10-15%", "15-20%", ">20%"]
            self.assertIn(", interruption %s" % (words[advice[0]] if advice else "band unknown"),
                          reason)
        finally:
            self.sim.admin("spot", {"zones": {"us-east-1b": 1.0}})

    def test_spot_runs_on_demand_only_when_the_pod_allows_it(self):
        self.sim.admin("fault", {"action": "RunInstances", "code": "InsufficientInstanceCapacity",
                                 "market": "spot"})
        strict = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi",
                                                  "pod.elotl.co/launch-type": "spot"})
        with self.assertRaises(grpc.RpcError) as cm:
            self.run_pod(strict, timeout=120)
        self.assertIn("pod.elotl.co/spot-fallback: on-demand", cm.exception.details())
        self.assertEqual(self.live(lambda i: tags_of(i).get("kiyot.elotl.co/pod-uid") ==
                                   strict.metadata.uid), [])
        with open(os.path.join(self.env.work, "kiyot-ec2.log")) as f:
            warned = [l for l in f if " warn " in l and "RunPodSandbox failed" in l and
                      strict.metadata.name in l]
        self.assertTrue(warned, "the failed RunPodSandbox was not logged at warning")
        self.assertIn("InsufficientInstanceCapacity", warned[-1])
        flexible = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi",
                                                    "pod.elotl.co/launch-type": "spot",
                                                    "pod.elotl.co/spot-fallback": "on-demand"})
        pod = self.run_pod(flexible)
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
        inst = self.mine(flexible)
        self.assertEqual(len(inst), 1)
        self.assertEqual(inst[0]["market"], "on-demand")

    def test_sigterm_mid_launch_stops_at_once_and_the_next_kiyot_resumes_it(self):
        cfg = self.sandbox_config(annotations={"pod.elotl.co/memory": "400Mi"})
        uid = cfg.metadata.uid

        def run():
            try:
                self.run_pod(cfg, timeout=300)
            except Exception:  # noqa: BLE001 - the stop ends this call
                pass
        t = threading.Thread(target=run)
        t.start()
        first = wait_for(lambda: self.live(
            lambda i: tags_of(i).get("kiyot.elotl.co/pod-uid") == uid),
            30, "the instance to be requested")[0]["instance_id"]
        # EC2 throttles everything now: the launch's wait would go on for minutes
        self.sim.admin("throttle", {"seconds": 600})
        kiyot = type(self).kiyot
        kiyot.send_signal(signal.SIGTERM)
        try:
            kiyot.wait(30)  # a hang detector, not a timing: before, minutes of retries
        finally:
            self.sim.admin("throttle", {"seconds": 0})
        t.join(60)
        type(self).start_ec2_kiyot()
        self.c = cri.Client(self.sock)
        # the kubelet's retry resumes the launch the stop left (its record and instance kept,
        # the same ClientToken): the pod gets the first instance, and no second one
        pod = self.run_pod(cfg)
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
        live = wait_for(lambda: self.live(
            lambda i: tags_of(i).get("kiyot.elotl.co/pod-uid") == uid), 60,
            "a live instance for the pod")
        self.assertEqual([i["instance_id"] for i in live], [first])


if __name__ == "__main__":
    unittest.main()
