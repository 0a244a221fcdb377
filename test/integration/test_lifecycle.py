"""The kubelet's main path, start to finish, with the hello HTTP server image."""

import ipaddress
import threading
import time
import unittest

import grpc

import cri
from harness import CIDR, Footprint, KiyotTest, http_get, read_cri_log, unique

NS_2020 = 1577836800 * 10**9  # any CRI timestamp in nanoseconds is later than 2020


class LifecycleTest(KiyotTest):
    def test_pod_with_http_server_from_run_to_remove(self):
        pb = self.pb
        name = unique("web")
        cfg = self.sandbox_config(name=name, labels={"tier": "front"},
                                  annotations={"example.com/note": "integration"})
        before = time.time_ns()
        pod, _ = self.run_pod(cfg)

        # PodSandboxStatus: READY, metadata/labels/annotations echoed, an IP in the cell network.
        st = self.pod_status(pod)
        self.assertEqual(st.id, pod)
        self.assertEqual(st.state, pb.SANDBOX_READY)
        self.assertEqual(st.metadata.name, name)
        self.assertEqual(st.metadata.uid, cfg.metadata.uid)
        self.assertEqual(st.metadata.namespace, "default")
        self.assertEqual(st.labels["tier"], "front")
        self.assertEqual(st.annotations["example.com/note"], "integration")
        self.assertGreater(st.created_at, NS_2020, "created_at is not in nanoseconds")
        self.assertGreaterEqual(st.created_at, before - 10**9)
        ip = st.network.ip
        self.assertTrue(ip, "PodSandboxStatus.network.ip is empty")
        self.assertIn(ipaddress.ip_address(ip), ipaddress.ip_network(CIDR))

        # PullImage with the sandbox config; the image is then known to ImageStatus/ListImages.
        ref = self.env.ref("hello:1")
        tag = self.env.tag_info("hello:1")
        image_ref = self.pull(ref, cfg)
        self.assertTrue(image_ref == tag["config"] or tag["digest"] in image_ref,
                        "PullImage image_ref %r is neither the image id %s nor a repo digest "
                        "with %s" % (image_ref, tag["config"], tag["digest"]))
        ist = self.c.image.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=ref)),
                                       timeout=30).image
        self.assertTrue(ist.id, "ImageStatus does not know the pulled image")
        self.assertGreater(ist.size, 0)
        self.assertTrue(ref in ist.repo_tags or any(tag["digest"] in d for d in ist.repo_digests),
                        "ImageStatus names neither the tag nor the digest: %s" % ist)
        imgs = self.c.image.ListImages(pb.ListImagesRequest(), timeout=30).images
        self.assertIn(ist.id, [i.id for i in imgs], "ListImages lacks the pulled image")

        # CreateContainer with command, args and env; CREATED until started.
        cname = unique("hello")
        cid, log_file = self.create(pod, cfg, ref, name=cname, command=["/hello"],
                                    envs={"PORT": "8080", "GREETING": "hi"}, pull=False)
        cs = self.cstatus(cid)
        self.assertEqual(cs.state, pb.CONTAINER_CREATED)
        self.assertEqual(cs.metadata.name, cname)
        self.assertGreater(cs.created_at, NS_2020)
        self.assertEqual(cs.started_at, 0)

        self.start(cid)
        cs = self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertGreater(cs.started_at, NS_2020, "RUNNING without started_at in nanoseconds")
        self.assertGreaterEqual(cs.started_at, cs.created_at)

        # The pod IP answers from the host.
        body = self.wait_http(ip)
        self.assertIn("hello from kiyot", body)
        self.assertIn("hostname: ", body)

        # The server's output reaches log_directory/log_path in the CRI format.
        texts = self.wait_log(log_file, lambda t: any("request: GET / HTTP/1.1" in x for x in t),
                              "the request line")
        self.assertTrue(any("listening on port 8080" in x for x in texts), texts)
        streams = set(e[1] for e in read_cri_log(log_file))
        self.assertEqual(streams, {"stdout"})

        fp = Footprint(ip)
        self.assertTrue(fp.netns, "no network namespace kiyot-* holds the pod IP %s" % ip)

        # StopContainer: SIGTERM makes hello exit 0 -> EXITED, Completed, finished_at.
        self.stop(cid, timeout=10)
        cs = self.wait_state(cid, "CONTAINER_EXITED", timeout=30)
        self.assertEqual(cs.exit_code, 0)
        self.assertEqual(cs.reason, "Completed")
        self.assertGreaterEqual(cs.finished_at, cs.started_at)
        self.assertTrue(any("stopping on SIGTERM" in x for x in
                            self.wait_log(log_file, lambda t: any("SIGTERM" in x for x in t),
                                          "the shutdown line")))
        self.stop(cid, timeout=10)  # idempotent

        self.remove(cid)
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.c.runtime.ContainerStatus,
                        pb.ContainerStatusRequest(container_id=cid), timeout=10)
        self.remove(cid)  # idempotent

        self.stop_pod(pod)
        self.assertEqual(self.pod_status(pod).state, pb.SANDBOX_NOTREADY)
        self.stop_pod(pod)  # idempotent
        self.remove_pod(pod)
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.c.runtime.PodSandboxStatus,
                        pb.PodSandboxStatusRequest(pod_sandbox_id=pod), timeout=10)
        self.remove_pod(pod)  # idempotent
        self.assertNotIn(pod, [p.id for p in self.c.runtime.ListPodSandbox(
            pb.ListPodSandboxRequest(), timeout=10).items])
        self.assertNoLeftovers(fp)
        with self.assertRaises(OSError, msg="the removed pod still answers HTTP"):
            http_get(ip, timeout=2)

    def test_stop_pod_sandbox_stops_its_running_containers(self):
        pod, cfg = self.run_pod()
        ref = self.env.ref("busybox:1")
        cid, _ = self.create(pod, cfg, ref, command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        fp = Footprint(self.pod_ip(pod))
        self.stop_pod(pod)
        # busybox sleep as PID 1 ignores SIGTERM: the stop must escalate to SIGKILL.
        cs = self.wait_state(cid, "CONTAINER_EXITED", timeout=90)
        self.assertGreater(cs.finished_at, 0)
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_NOTREADY)
        self.remove_pod(pod)
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.c.runtime.ContainerStatus,
                        self.pb.ContainerStatusRequest(container_id=cid), timeout=10)
        self.assertNoLeftovers(fp)


    def test_twelve_pods_of_three_containers_started_at_once_all_run(self):
        """What a node does when a deployment scales: every call succeeds, however slow the
        handshakes to the new cells are (on a busy node they took over 20 ms, and half the
        CreateContainer calls failed 'timed out before receiving SETTINGS frame')."""
        ref = self.env.ref("busybox:1")
        self.pull(ref, self.sandbox_config())
        failures, cids = [], []
        lock = threading.Lock()

        def one(i):
            try:
                pod, cfg = self.run_pod(name=unique("burst%d" % i))
                mine = []
                for j in range(3):
                    cid, _ = self.create(pod, cfg, ref, name=unique("c%d" % j),
                                         command=["sleep", "3600"], pull=False)
                    self.start(cid)
                    mine.append(cid)
                with lock:
                    cids.extend(mine)
            except Exception as e:  # noqa: BLE001 - every failure is reported below
                with lock:
                    failures.append("pod %d: %s" % (i, cri.details_of(e)))
        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(failures, [], "of 12 pods started at once, %d failed" % len(failures))
        self.assertEqual(len(cids), 36)
        for cid in cids:
            self.wait_state(cid, "CONTAINER_RUNNING")


if __name__ == "__main__":
    unittest.main()
