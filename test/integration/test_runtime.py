"""Runtime-level CRI calls: version, readiness, NOT_FOUND for unknown ids, read-only calls."""

import unittest

import grpc

from harness import KiyotTest, unique


class RuntimeTest(KiyotTest):
    def test_version_reports_cri_v1(self):
        r = self.c.runtime.Version(self.pb.VersionRequest(version="v1"), timeout=10)
        self.assertEqual(r.runtime_api_version, "v1")
        self.assertTrue(r.runtime_name, "Version has no runtime_name")
        self.assertTrue(r.runtime_version, "Version has no runtime_version")

    def test_status_reports_runtime_and_network_ready(self):
        r = self.c.runtime.Status(self.pb.StatusRequest(), timeout=10)
        conds = {c.type: c for c in r.status.conditions}
        for t in ("RuntimeReady", "NetworkReady"):
            self.assertIn(t, conds, "Status lacks the %s condition" % t)
            self.assertTrue(conds[t].status, "%s is false: %s %s" % (t, conds[t].reason,
                                                                     conds[t].message))

    def test_unknown_ids_answer_not_found(self):
        pb, rt = self.pb, self.c.runtime
        nf = grpc.StatusCode.NOT_FOUND
        sid, cid = unique("nosuchpod"), unique("nosuchctr")
        self.assertCode(nf, rt.PodSandboxStatus, pb.PodSandboxStatusRequest(pod_sandbox_id=sid),
                        timeout=10)
        self.assertCode(nf, rt.ContainerStatus, pb.ContainerStatusRequest(container_id=cid),
                        timeout=10)
        self.assertCode(nf, rt.StartContainer, pb.StartContainerRequest(container_id=cid),
                        timeout=10)
        self.assertCode(nf, rt.ReopenContainerLog,
                        pb.ReopenContainerLogRequest(container_id=cid), timeout=10)
        self.assertCode(nf, rt.ContainerStats, pb.ContainerStatsRequest(container_id=cid),
                        timeout=10)

    def test_stop_and_remove_of_unknown_ids_do_not_fail_oddly(self):
        # CRI: stop and remove succeed when there is nothing left to reclaim; containerd
        # answers NOT_FOUND for some of them, which the kubelet also accepts.
        pb, rt = self.pb, self.c.runtime
        ok = (None, grpc.StatusCode.NOT_FOUND)
        for fn, req in [(rt.StopPodSandbox, pb.StopPodSandboxRequest(pod_sandbox_id="nope")),
                        (rt.RemovePodSandbox, pb.RemovePodSandboxRequest(pod_sandbox_id="nope")),
                        (rt.StopContainer, pb.StopContainerRequest(container_id="nope")),
                        (rt.RemoveContainer, pb.RemoveContainerRequest(container_id="nope"))]:
            code = None
            try:
                fn(req, timeout=10)
            except grpc.RpcError as e:
                code = e.code()
            self.assertIn(code, ok, "%s on an unknown id answered %s" % (fn, code))

    def test_read_only_calls_answer(self):
        pb, rt, im = self.pb, self.c.runtime, self.c.image
        rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=10)
        rt.ListContainers(pb.ListContainersRequest(), timeout=10)
        rt.ListContainerStats(pb.ListContainerStatsRequest(), timeout=10)
        rt.ListPodSandboxStats(pb.ListPodSandboxStatsRequest(), timeout=10)
        im.ListImages(pb.ListImagesRequest(), timeout=10)
        im.ImageFsInfo(pb.ImageFsInfoRequest(), timeout=10)
        rt.UpdateRuntimeConfig(pb.UpdateRuntimeConfigRequest(runtime_config=pb.RuntimeConfig(
            network_config=pb.NetworkConfig(pod_cidr="10.244.0.0/24"))), timeout=10)

    def test_image_status_of_unknown_image_is_empty_not_error(self):
        r = self.c.image.ImageStatus(self.pb.ImageStatusRequest(
            image=self.pb.ImageSpec(image=self.env.ref("never-pulled:1"))), timeout=10)
        self.assertFalse(r.image.id, "ImageStatus invented an image: %s" % r.image)


if __name__ == "__main__":
    unittest.main()
