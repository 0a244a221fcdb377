"""Image pulls that must fail, clearly, without leaving anything behind or writing outside
the image root: missing image, registry down, digest mismatch, malformed manifests, layers
with entries that escape the root."""

import os
import unittest

import grpc

import cri
from harness import Footprint, KiyotTest, T_PULL


class PullErrorsTest(KiyotTest):
    def pull_error(self, image, cfg, timeout=T_PULL):
        """PullImage must fail; returns (code, details)."""
        try:
            r = self.c.image.PullImage(self.pb.PullImageRequest(
                image=self.pb.ImageSpec(image=image), sandbox_config=cfg), timeout=timeout)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                self.fail("PullImage of %s hung instead of failing" % image)
            return e.code(), cri.details_of(e)
        self.fail("PullImage of %s succeeded (image_ref %s)" % (image, r.image_ref))

    def assertMentions(self, details, words, what):
        low = details.lower()
        self.assertTrue(any(w in low for w in words),
                        "error for %s does not say %s: %r" % (what, " / ".join(words), details))

    def assertImageUnknown(self, image):
        r = self.c.image.ImageStatus(self.pb.ImageStatusRequest(
            image=self.pb.ImageSpec(image=image)), timeout=30)
        self.assertFalse(r.image.id, "a failed pull left an image: %s" % r.image)

    def test_missing_image_fails_not_found(self):
        pod, cfg = self.run_pod()
        image = self.env.ref("no-such-image:1")
        code, details = self.pull_error(image, cfg)
        self.assertIn(code, (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNKNOWN,
                             grpc.StatusCode.FAILED_PRECONDITION), details)
        self.assertIn("no-such-image", details)
        self.assertMentions(details, ["not found", "unknown", "404"], image)
        self.assertImageUnknown(image)
        # The pod is unharmed by a failed pull.
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)

    def test_missing_tag_of_existing_repository_fails(self):
        _, cfg = self.run_pod()
        code, details = self.pull_error(self.env.ref("hello:no-such-tag"), cfg)
        self.assertMentions(details, ["not found", "unknown", "404"], "a missing tag")

    def test_registry_down_fails_clearly_and_recovers(self):
        pod, cfg = self.run_pod()
        fp = Footprint(self.pod_ip(pod))
        image = self.env.ref("busybox:down")
        self.env.stop_registry()
        try:
            code, details = self.pull_error(image, cfg)
            self.assertMentions(details, ["unreachable", "connect", "refused"],
                                "a registry that is down")
            self.assertIn("10.78.0.1:5000", details)
            self.assertImageUnknown(image)
        finally:
            self.env.start_registry()
        # The failure is not remembered: the same pull works once the registry is back.
        self.pull(image, cfg)
        self.assertEqual(self.pod_status(pod).state, self.pb.SANDBOX_READY)
        self.stop_pod(pod)
        self.remove_pod(pod)
        self.assertNoLeftovers(fp)

    def test_layer_digest_mismatch_fails(self):
        _, cfg = self.run_pod()
        image = self.env.ref("bad/digest:1")
        _, details = self.pull_error(image, cfg)
        self.assertMentions(details, ["digest", "hash", "does not match", "mismatch"],
                            "a layer whose content does not match its digest")
        self.assertImageUnknown(image)

    def test_manifest_that_is_not_json_fails(self):
        # The registry itself cannot serve it (500): the error must still be clear.
        _, cfg = self.run_pod()
        _, details = self.pull_error(self.env.ref("bad/manifest:1"), cfg)
        self.assertIn("bad/manifest", details)

    def test_manifest_without_config_and_with_bad_digests_fails(self):
        _, cfg = self.run_pod()
        image = self.env.ref("bad/manifest:2")
        _, details = self.pull_error(image, cfg)
        self.assertMentions(details, ["manifest", "digest", "config"], "a malformed manifest")
        self.assertImageUnknown(image)

    def evil_leftovers(self, names):
        found = [p for p in self.env.catalog["info"]["evil_host_paths"] if os.path.lexists(p)]
        for root, dirs, files in os.walk(self.env.state_dir):
            found += [os.path.join(root, f) for f in files + dirs if f in names]
        return found

    def test_layer_with_dotdot_entries_fails_and_writes_nothing_outside(self):
        _, cfg = self.run_pod()
        _, details = self.pull_error(self.env.ref("bad/escape:1"), cfg)
        self.assertMentions(details, ["escape", "outside"], "a ../ entry")
        self.assertEqual(self.evil_leftovers({"evil"}), [])

    def test_layer_writing_through_a_symlink_to_root_stays_inside_the_root(self):
        # `x -> /` then `x/etc/evil2`: the link resolves inside the image root, as the
        # container will see it, so the entry lands in the image's /etc, never the host's.
        _, cfg = self.run_pod()
        try:
            self.pull(self.env.ref("bad/symlink:1"), cfg)
        except grpc.RpcError as e:
            self.assertMentions(cri.details_of(e), ["escape", "outside"],
                                "an entry through a symlink to /")
        self.assertFalse(os.path.lexists("/etc/evil2"), "a layer wrote /etc/evil2 on the host")

    def test_symlink_from_a_lower_layer_is_not_followed_out_of_the_root(self):
        # Either refused, or kept inside the root: what matters is the host's /etc.
        _, cfg = self.run_pod()
        try:
            self.pull(self.env.ref("bad/symlink2:1"), cfg)
        except grpc.RpcError:
            pass
        self.assertFalse(os.path.lexists("/etc/evil3"), "a layer wrote /etc/evil3 on the host")


if __name__ == "__main__":
    unittest.main()
