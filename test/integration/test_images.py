"""The image service as the kubelet and crictl use it: pulls into the node's image store
(local cells share the node's disk and take their images from it, as containerd keeps one
store per node), image ids handed to CreateContainer, status, list, remove and the layers'
lifetime."""

import json
import os
import unittest

import grpc

import cri
from harness import KiyotTest, T_PULL, wait_for


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


class ImagesTest(KiyotTest):
    def node_image_dir(self, image_id):
        return os.path.join(self.env.state_dir, "images", "images", image_id.split(":", 1)[1])

    def agent_log(self, pod_id):
        info = json.loads(self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod_id, verbose=True), timeout=30).info["info"])
        return read(os.path.join(self.env.state_dir, "cells", info["cellId"], "agent.log"))

    def remove_image(self, image):
        self.c.image.RemoveImage(self.pb.RemoveImageRequest(
            image=self.pb.ImageSpec(image=image)), timeout=30)

    def pull_no_pod(self, image):
        return self.c.image.PullImage(self.pb.PullImageRequest(
            image=self.pb.ImageSpec(image=image)), timeout=T_PULL).image_ref

    def status(self, image):
        return self.c.image.ImageStatus(self.pb.ImageStatusRequest(
            image=self.pb.ImageSpec(image=image)), timeout=30).image

    def test_pull_without_a_pod_is_known_by_tag_id_and_digest(self):
        ref = self.env.ref("hello:1")
        image_id = self.pull_no_pod(ref)
        self.assertTrue(image_id.startswith("sha256:"), image_id)
        st = self.status(ref)
        self.assertEqual(st.id, image_id)
        self.assertIn(ref, st.repo_tags)
        self.assertTrue(any("@sha256:" in d for d in st.repo_digests), st.repo_digests)
        self.assertGreater(st.size, 0)
        self.assertEqual(self.status(image_id).id, image_id)
        self.assertEqual(self.status(st.repo_digests[0]).id, image_id)
        listed = self.c.image.ListImages(self.pb.ListImagesRequest(), timeout=30).images
        self.assertIn(image_id, [i.id for i in listed])
        # the node keeps the layers for its local cells, and counts them
        self.assertTrue(os.path.isdir(os.path.join(self.node_image_dir(image_id), "rootfs")))
        fs = self.c.image.ImageFsInfo(self.pb.ImageFsInfoRequest(), timeout=30)
        self.assertGreaterEqual(fs.image_filesystems[0].used_bytes.value, st.size)

    def test_container_created_from_an_image_id_runs_in_a_new_cell(self):
        # the kubelet's flow when the image is already present: no PullImage for this pod,
        # CreateContainer names the image by id; the cell takes it from the node's store
        image_id = self.pull_no_pod(self.env.ref("hello:1"))
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, image_id, pull=False)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(self.pod_ip(pod)))
        self.assertNotIn(": pulling", self.agent_log(pod),
                         "the cell pulled an image the node's store holds")

    def test_container_created_by_tag_takes_the_nodes_image_too(self):
        ref = self.env.ref("hello:1")
        self.pull_no_pod(ref)
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, ref, pull=False)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertNotIn(": pulling", self.agent_log(pod))

    def test_an_image_removed_while_a_container_uses_it_keeps_its_layers_until_it_goes(self):
        ref = self.env.ref("busybox:latest")
        image_id = self.pull_no_pod(ref)
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, image_id, pull=False, command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.remove_image(image_id)
        self.assertFalse(self.status(image_id).id, "a removed image is still listed")
        self.assertTrue(os.path.isdir(self.node_image_dir(image_id)),
                        "the layers of a running container's image were removed")
        # the container keeps running on them
        out = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=["cat", "/bin/busybox"], timeout=20), timeout=30)
        self.assertEqual(out.exit_code, 0)
        self.stop_pod(pod)
        self.remove_pod(pod)
        # the next sweep (every garbage collection pass, and at start) takes them
        self.c = self.env.restart_kiyot()
        wait_for(lambda: not os.path.exists(self.node_image_dir(image_id)), 30,
                 "the unused layers of a removed image to go")

    def test_remove_image_forgets_it_and_is_idempotent(self):
        ref = self.env.ref("busybox:latest")
        image_id = self.pull_no_pod(ref)
        self.assertTrue(os.path.isdir(self.node_image_dir(image_id)))
        self.remove_image(image_id)
        self.assertFalse(self.status(ref).id)
        self.assertFalse(os.path.exists(self.node_image_dir(image_id)),
                         "an unused removed image's layers stayed on the node")
        self.remove_image(image_id)

    def test_pull_without_a_pod_of_a_missing_image_names_it(self):
        ref = self.env.ref("no/such-image:1")
        with self.assertRaises(grpc.RpcError) as ctx:
            self.pull_no_pod(ref)
        self.assertEqual(cri.code_of(ctx.exception), grpc.StatusCode.NOT_FOUND)
        self.assertIn("no/such-image", cri.details_of(ctx.exception))


if __name__ == "__main__":
    unittest.main()
