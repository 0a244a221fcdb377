"""Which architecture a pod's EC2 cell has, against the suite's local EC2 endpoint
(test/ec2/ec2sim.py) and API server: kiyot reads the Pod object's images at the suite's
registry, and a pod whose every image offers linux/arm64 (the multi-platform index
multiarch:1) lands on an arm64 type booted from ec2.imageIds' arm64 image, while one image
offering amd64 alone (hello:1, here as the init container) keeps the pod on x86_64 and its
x86_64 image. ec2sim refuses a registered image on a type of the other architecture, as EC2
does.

A kiyot configured with `cells.provider: ec2` and the API server's kubeconfig serves these
tests on its own socket; the suite's kiyot is stopped meanwhile."""

import json
import signal

from apiserver import ApiServerTest
from ec2env import Ec2Kiyot, Ec2Sim, tags_of
from harness import log, net_addr, unique

EC2_CIDR = net_addr("201.0/24")
AMI_X86, AMI_ARM = "ami-0000000000000a86a", "ami-0000000000000a64a"


class Ec2ArchTest(ApiServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.core = cls.kclient.CoreV1Api(api_client=cls.api_client)
        cls.env.kill_kiyot(signal.SIGTERM)
        cls.sim = Ec2Sim(cls.env.work, EC2_CIDR, ["--terminated-ttl", "60"])
        cls.sim.admin("images", {AMI_X86: "x86_64", AMI_ARM: "arm64"})
        cls.kiyot = None
        cls.start_ec2_kiyot()

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.kiyot and cls.kiyot.poll() is None:
                cls.kiyot.send_signal(signal.SIGTERM)
                cls.kiyot.wait(60)
            cls.sim.stop()
        finally:
            cls.env.start_kiyot()
            super().tearDownClass()

    @classmethod
    def start_ec2_kiyot(cls):
        k = Ec2Kiyot(cls.sim, cls.env.work, "ec2arch", kubeconfig=cls.ep.kubeconfig,
                     ec2={"imageId": None, "imageIds": {"x86_64": AMI_X86, "arm64": AMI_ARM}})
        cls.kiyot, cls.state, cls.sock, cls.log_path = k.proc, k.state, k.sock, k.log_path
        cls.c = k.client
        cls.pb = cls.c.pb

    def setUp(self):
        # not KiyotTest's: it would start the suite's kiyot again
        if self.ep.proc is None:
            self.ep.start()
        self.sim.admin("faults/clear", {})

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

    # -- helpers --
    def make_pod(self, name, images, init=()):
        """Pod default/name with a container per image (and init containers); its uid."""
        def c(i, image):
            return {"name": "c%d" % i, "image": image,
                    "resources": {"requests": {"cpu": "100m", "memory": "200Mi"}}}
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                             "annotations": {"kubernetes.io/target-runtime": "kiyot"}},
                "spec": {"containers": [c(i, x) for i, x in enumerate(images)],
                         "initContainers": [c(10 + i, x) for i, x in enumerate(init)]}}
        made = self.core.create_namespaced_pod("default", body)
        self.addCleanup(self.delete_pod, name)
        return made.metadata.uid

    def delete_pod(self, name):
        try:
            self.core.delete_namespaced_pod(name, "default")
        except Exception as e:  # noqa: BLE001
            log("cleanup of Pod %s: %s" % (name, e))

    def run_pod_of(self, name, uid):
        cfg = self.sandbox_config(name=name)
        cfg.metadata.uid = uid
        cfg.linux.ClearField("resources")
        pod = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        r = self.c.runtime.PodSandboxStatus(
            self.pb.PodSandboxStatusRequest(pod_sandbox_id=pod, verbose=True), timeout=60)
        self.assertEqual(r.status.state, self.pb.SANDBOX_READY)
        insts = [i for i in self.sim.instances()
                 if tags_of(i).get("kiyot.elotl.co/pod-uid") == uid]
        self.assertEqual(len(insts), 1, insts)
        return json.loads(r.info["info"]), insts[0]

    # -- tests --
    def test_multi_arch_pod_lands_on_arm64_with_the_arm64_image(self):
        name = unique("arm")
        uid = self.make_pod(name, [self.env.ref("multiarch:1")])
        info, inst = self.run_pod_of(name, uid)
        log("multi-arch pod: %s %s: %s" % (inst["instance_type"], inst["image_id"],
                                            info["sizingReason"]))
        self.assertEqual(inst["architecture"], "arm64")
        self.assertEqual(inst["image_id"], AMI_ARM)
        self.assertIn("on x86_64+arm64 (every image offers linux/arm64)", info["sizingReason"])
        self.assertIn("%s (arm64)" % inst["instance_type"], info["sizingReason"])

    def test_an_amd64_only_init_image_keeps_the_pod_on_x86_64(self):
        name = unique("x86")
        hello = self.env.ref("hello:1")
        uid = self.make_pod(name, [self.env.ref("multiarch:1")], init=[hello])
        info, inst = self.run_pod_of(name, uid)
        self.assertEqual(inst["architecture"], "x86_64")
        self.assertEqual(inst["image_id"], AMI_X86)
        self.assertIn("image %s offers x86_64 only" % hello, info["sizingReason"])
