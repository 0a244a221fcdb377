"""The Pod object: with an API server (test/kubeapi/kubeapi.py through a kubeconfig), kiyot reads
a sandbox's Pod at RunPodSandbox, sizes its cell from the Pod's containers and init containers
(which the sandbox config cannot say), and the Pod's images are pre-pulled as soon as the Pod is
known (by kiyot into the node's store, which local cells take their images from; by an EC2 cell
itself). A Pod of another uid is not used; an API server that is down or silent delays
RunPodSandbox by at most a few seconds, and the sandbox config is used instead."""

import collections
import json
import os
import re
import socket
import time

from apiserver import ApiServerTest
from harness import Footprint, log, unique, wait_for

GIB = 1 << 30
T_PREPULL = 180


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def cgroup_value(fp, ctrl, name):
    """A value of the cell's cgroup of controller ctrl (v1: /sys/fs/cgroup/<ctrls>/kiyot/<cell>)."""
    for d in fp.cgroups:
        if ctrl in d.split("/")[4].split(","):
            v = read(os.path.join(d, name)).strip()
            if v:
                return int(v)
    return None


class PodObjectTest(ApiServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.core = cls.kclient.CoreV1Api(api_client=cls.api_client)

    # -- helpers --
    def make_pod(self, name, containers, init=()):
        """Creates Pod default/name in the API server; returns its uid."""
        def c(n, image, cpu=None, memory=None):
            d = {"name": n, "image": image}
            if cpu:
                d["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
            return d
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default",
                             "annotations": {"kubernetes.io/target-runtime": "kiyot"}},
                "spec": {"containers": [c(*x) for x in containers],
                         "initContainers": [c(*x) for x in init]}}
        made = self.core.create_namespaced_pod("default", body)
        self.addCleanup(self.delete_pod, name)
        return made.metadata.uid

    def delete_pod(self, name):
        try:
            self.core.delete_namespaced_pod(name, "default")
        except Exception as e:  # noqa: BLE001 - the endpoint may be down after a test
            log("cleanup of Pod %s: %s" % (name, e))

    def bare_config(self, name, uid):
        """What a kubelet sends for the pod, minus what would give its size away: no
        pod.elotl.co annotations and no Linux resources."""
        cfg = self.sandbox_config(name=name)
        cfg.metadata.uid = uid
        cfg.linux.ClearField("resources")
        return cfg

    def info(self, pod_id):
        r = self.c.runtime.PodSandboxStatus(
            self.pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id, verbose=True), timeout=60)
        return json.loads(r.info["info"])

    def cell_size(self, pod_id):
        """The cell's caps as the host enforces them: (vCPUs, memory bytes)."""
        fp = Footprint(self.pod_ip(pod_id))
        self.assertTrue(fp.cgroups, "no cgroups found for the cell of " + pod_id)
        quota = cgroup_value(fp, "cpu", "cpu.cfs_quota_us")
        period = cgroup_value(fp, "cpu", "cpu.cfs_period_us")
        mem = cgroup_value(fp, "memory", "memory.limit_in_bytes")
        self.assertTrue(quota and period and mem, "cell caps unreadable in %s" % fp.cgroups)
        return quota / period, mem

    def cell_dir(self, pod_id):
        return os.path.join(self.env.state_dir, "cells", self.info(pod_id)["cellId"])

    def kiyot_log_after(self, mark):
        return read(self.env.kiyot_log)[mark:]

    def blob_gets(self, repo):
        """Blob GETs of repo in the registry's access log, by digest."""
        pat = re.compile(r'"GET /v2/%s/blobs/(sha256:[0-9a-f]{64}) ' % re.escape(repo))
        return collections.Counter(pat.findall(read(self.env.reg_log)))

    def timed_run(self, cfg):
        t0 = time.monotonic()
        pod_id, _ = self.run_pod(cfg)
        return pod_id, time.monotonic() - t0

    # -- tests --
    def test_pod_object__cell_fits_the_pods_containers_and_init_containers(self):
        name = unique("sized")
        # app containers: 2 CPU / 3 GiB in all; the init container asks for more memory
        uid = self.make_pod(name, [("web", self.env.ref("hello:1"), "1500m", "2Gi"),
                                   ("side", self.env.ref("busybox:1"), "500m", "1Gi")],
                            init=[("init", self.env.ref("busybox:1"), "1", "5Gi")])
        pod_id, secs = self.timed_run(self.bare_config(name, uid))
        log("RunPodSandbox with the Pod object: %.2f s" % secs)
        info = self.info(pod_id)
        self.assertTrue(info["sizingReason"].startswith("demand from the Pod object; "),
                        info["sizingReason"])
        cpus, mem = self.cell_size(pod_id)
        self.assertGreaterEqual(cpus, 2, "cell of %s: %s" % (info["instanceType"], cpus))
        self.assertGreaterEqual(mem, 5 * GIB, "cell of %s: %d bytes" % (info["instanceType"],
                                                                         mem))

    def test_pod_object__pod_of_another_uid_is_not_used(self):
        name = unique("otheruid")
        self.make_pod(name, [("web", self.env.ref("hello:1"), "2", "6Gi")])
        mark = len(read(self.env.kiyot_log))
        cfg = self.bare_config(name, "0badc0de-0000-4000-8000-000000000000")
        pod_id, _ = self.run_pod(cfg)
        info = self.info(pod_id)
        self.assertTrue(info["sizingReason"].startswith("no demand stated; "),
                        info["sizingReason"])
        _, mem = self.cell_size(pod_id)
        self.assertLess(mem, 6 * GIB)
        text = self.kiyot_log_after(mark)
        self.assertIn("pod default/%s: sizing from the sandbox config, not the Pod object" % name,
                      text)
        self.assertIn("another pod of the same name", text)

    def test_pod_object__missing_pod_falls_back_to_the_sandbox(self):
        name = unique("nopod")
        mark = len(read(self.env.kiyot_log))
        cfg = self.sandbox_config(name=name, memory=768 << 20)  # with Linux resources
        pod_id, _ = self.run_pod(cfg)
        info = self.info(pod_id)
        self.assertTrue(info["sizingReason"].startswith("demand from the sandbox's resources; "),
                        info["sizingReason"])
        self.assertIn("Pod default/%s is not in the API server (404)" % name,
                      self.kiyot_log_after(mark))

    def test_pod_object__api_server_down_or_silent_does_not_hold_the_sandbox(self):
        name = unique("apidown")
        uid = self.make_pod(name, [("web", self.env.ref("hello:1"), "2", "6Gi")])
        _, base = self.timed_run(self.bare_config(name, uid))
        self.ep.stop()
        self.addCleanup(lambda: self.ep.proc or self.ep.start())
        # the kubelet's next attempts of the same pod: refused, the fallback is immediate
        mark = len(read(self.env.kiyot_log))
        cfg = self.bare_config(name, uid)
        cfg.metadata.attempt = 1
        down_id, down = self.timed_run(cfg)
        self.assertIn("no demand stated", self.info(down_id)["sizingReason"])
        self.assertIn("pod default/%s: sizing from the sandbox config, not the Pod object: "
                      "no answer from the API server" % name, self.kiyot_log_after(mark))
        # silent: it takes the connection and never answers; kiyot gives up after 3 s
        silent = socket.socket()
        silent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        silent.bind(("127.0.0.1", self.ep.port))
        silent.listen(64)
        try:
            mark = len(read(self.env.kiyot_log))
            cfg = self.bare_config(name, uid)
            cfg.metadata.attempt = 2
            slow_id, slow = self.timed_run(cfg)
        finally:
            silent.close()
            self.ep.start()  # before the Pod's cleanup
        self.assertIn("no demand stated", self.info(slow_id)["sizingReason"])
        self.assertIn("no answer from the API server (kiyot waits 3000 ms at most)",
                      self.kiyot_log_after(mark))
        log("RunPodSandbox: API up %.2f s, refused %.2f s, silent %.2f s" % (base, down, slow))
        # the bound is 3 s for the Pod object; kube.c's own default would be 20 s
        self.assertLess(slow, 15, "RunPodSandbox waited %.1f s for a silent API server" % slow)

    def test_pod_object__node_prepulls_the_pods_images_once(self):
        # local cells take their images from the node's store: kiyot pre-pulls the Pod's
        # images into it as soon as it knows the Pod (an EC2 cell pre-pulls them itself)
        name = unique("prepull")
        hello, multi = self.env.ref("hello:1"), self.env.ref("multilayer:1")
        def removed(ref):
            # earlier tests' pods may still be pre-pulling it: remove it until it stays gone
            image_id = self.c.image.PullImage(self.pb.PullImageRequest(
                image=self.pb.ImageSpec(image=ref)), timeout=T_PREPULL).image_ref
            self.c.image.RemoveImage(self.pb.RemoveImageRequest(
                image=self.pb.ImageSpec(image=ref)), timeout=30)
            time.sleep(0.5)
            return not os.path.exists(os.path.join(self.env.state_dir, "images", "images",
                                                   image_id.split(":", 1)[1]))
        for ref in (hello, multi):
            wait_for(lambda: removed(ref), 30, "%s to leave the node's store" % ref)
        mark = len(read(self.env.kiyot_log))
        before = {r: self.blob_gets(r) for r in ("hello", "multilayer")}
        uid = self.make_pod(name, [("web", hello, "250m", "256Mi"),
                                   ("data", multi, "250m", "256Mi")])
        cfg = self.bare_config(name, uid)
        pod_id, _ = self.run_pod(cfg)
        # a pull of an image the node is pre-pulling (maybe still under way) joins it
        self.pull(multi, cfg)
        for ref in (hello, multi):
            wait_for(lambda: re.search(r"prepull: image %s (ready|is already present)"
                                       % re.escape(ref), self.kiyot_log_after(mark)),
                     T_PREPULL, "the node to pre-pull %s" % ref)
        self.assertRegex(self.kiyot_log_after(mark),
                         r"prepull: image %s ready" % re.escape(hello))
        log("the node's pre-pull:\n  " + "\n  ".join(
            ln for ln in self.kiyot_log_after(mark).splitlines()
            if "prepull" in ln or "pulling" in ln))
        # the kubelet's calls now find the image there, and the cell pulls nothing
        cid, _ = self.create(pod_id, cfg, hello)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.wait_http(self.pod_ip(pod_id))
        self.assertNotIn(": pulling", read(os.path.join(self.cell_dir(pod_id), "agent.log")))
        text = self.kiyot_log_after(mark)
        for ref in (hello, multi):
            self.assertEqual(text.count("image %s: pulling" % ref), 1,
                             "%s fetched more than once:\n%s" % (ref, text))
        for repo in ("hello", "multilayer"):
            got = self.blob_gets(repo) - before[repo]
            self.assertTrue(got, "the registry served no %s blob to the cell" % repo)
            twice = {d: n for d, n in got.items() if n > 1}
            self.assertFalse(twice, "%s blobs downloaded more than once: %s" % (repo, twice))
