"""The image service as the kubelet and crictl use it: pulls without a pod (resolved at the
registry, no layers on the node), image ids handed to CreateContainer, status, list, remove."""

import unittest

import grpc

import cri
from harness import KiyotTest, T_PULL


class ImagesTest(KiyotTest):
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
        # the node keeps no layers: nothing of the image appears in kiyot's state
        fs = self.c.image.ImageFsInfo(self.pb.ImageFsInfoRequest(), timeout=30)
        self.assertEqual(fs.image_filesystems[0].used_bytes.value, 0)

    def test_container_created_from_an_image_id_runs_in_a_new_cell(self):
        # the kubelet's flow when the image is already present: no PullImage for this pod,
        # CreateContainer names the image by id; the cell pulls it by digest
        image_id = self.pull_no_pod(self.env.ref("hello:1"))
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, image_id, pull=False)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(self.pod_ip(pod)))

    def test_remove_image_forgets_it_and_is_idempotent(self):
        ref = self.env.ref("busybox:latest")
        image_id = self.pull_no_pod(ref)
        self.c.image.RemoveImage(self.pb.RemoveImageRequest(
            image=self.pb.ImageSpec(image=image_id)), timeout=30)
        self.assertFalse(self.status(ref).id)
        self.c.image.RemoveImage(self.pb.RemoveImageRequest(
            image=self.pb.ImageSpec(image=image_id)), timeout=30)

    def test_pull_without_a_pod_of_a_missing_image_names_it(self):
        ref = self.env.ref("no/such-image:1")
        with self.assertRaises(grpc.RpcError) as ctx:
            self.pull_no_pod(ref)
        self.assertEqual(cri.code_of(ctx.exception), grpc.StatusCode.NOT_FOUND)
        self.assertIn("no/such-image", cri.details_of(ctx.exception))


if __name__ == "__main__":
    unittest.main()
