"""Image pulls that must fail, clearly, without leaving anything behind or writing outside
the image root: missing image, registry down, digest mismatch, malformed manifests, layers
with entries that escape the root; and a hostile registry that tries to send the node's pull
to the node itself."""

import http.server
import os
import re
import threading
import unittest

import grpc

import cri
from harness import HOST_IP, REGISTRY, Footprint, KiyotTest, T_PULL


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
            self.assertIn(REGISTRY, details)
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

    def test_create_container_of_missing_image_is_not_found(self):
        # the kubelet pulls first; crictl create without a pull, or an image deleted from
        # the registry since, makes the cell pull: the registry's 404 is NOT_FOUND
        pod, cfg = self.run_pod()
        image = self.env.ref("no-such-image:1")
        details = self.assertCode(grpc.StatusCode.NOT_FOUND, self.create, pod, cfg, image,
                                  pull=False)
        self.assertIn("no-such-image", details)
        self.assertMentions(details, ["manifest unknown", "not found"], image)

    def test_deeply_nested_manifest_is_invalid_argument(self):
        _, cfg = self.run_pod()
        image = self.env.ref("bad/deep:1")
        code, details = self.pull_error(image, cfg)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, details)
        self.assertIn("bad/deep", details)
        self.assertIn("nests deeper than", details)
        self.assertImageUnknown(image)

    def test_index_of_an_index_is_invalid_argument(self):
        pod, cfg = self.run_pod()
        image = self.env.ref("bad/nested-index:1")
        code, details = self.pull_error(image, cfg)
        self.assertEqual(code, grpc.StatusCode.INVALID_ARGUMENT, details)
        self.assertIn("is itself an index", details)
        self.assertIn(self.env.tag_info("bad/nested-index:1")["inner"], details)
        self.assertImageUnknown(image)
        # and when the cell pulls it for CreateContainer
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.create, pod, cfg,
                                  image, pull=False)
        self.assertIn("is itself an index", details)

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


class _NodeService(http.server.ThreadingHTTPServer):
    """A service of the node on 127.0.0.1 that answers anything with a secret, and counts
    the connections it got."""

    def __init__(self):
        self.conns = 0
        super().__init__(("127.0.0.1", 0), _SecretHandler)

    def verify_request(self, request, client_address):
        self.conns += 1
        return True


class _SecretHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"AccessKeyId": "ASIA-NODE-SECRET"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _HostileRegistry(http.server.BaseHTTPRequestHandler):
    """A registry whose every answer sends the pull somewhere on the node: the path's
    repository says where (the node's service on 127.0.0.1, "localhost", the instance
    metadata service, the suite's registry on another port of this host, a token realm)."""

    victim = 0  # the node service's port

    def do_GET(self):
        m = re.match(r"/v2/evil/([a-z-]+)/", self.path)
        where = m.group(1) if m else ""
        to = {"node": "http://127.0.0.1:%d/latest/meta-data/iam?x=1" % self.victim,
              "localhost": "http://localhost:%d/latest/meta-data/" % self.victim,
              "metadata": "http://169.254.169.254/latest/meta-data/iam?x=1",
              "registry": "http://%s:5000/v2/hello/manifests/1" % HOST_IP}.get(where)
        if where == "realm":
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="http://127.0.0.1:%d/token",'
                             'service="evil"' % self.victim)
        elif to:
            self.send_response(302)
            self.send_header("Location", to)
        else:
            self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


class HostileRegistryTest(KiyotTest):
    """kiyot pulls a local cell's images on the node, as root with the node's network: no
    answer of a registry may send that pull to the node's loopback, its own addresses or the
    instance metadata service, and the error tells nothing of what answered there."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.node = _NodeService()
        threading.Thread(target=cls.node.serve_forever, daemon=True).start()
        _HostileRegistry.victim = cls.node.server_address[1]
        cls.evil = http.server.ThreadingHTTPServer((HOST_IP, 0), _HostileRegistry)
        threading.Thread(target=cls.evil.serve_forever, daemon=True).start()
        cls.evil_host = "%s:%d" % (HOST_IP, cls.evil.server_address[1])
        # continues the registries: section the suite's config ends with (plain HTTP)
        cls.env.extra_config = '  "%s": { insecure: true }\n' % cls.evil_host
        cls.env.ensure()
        cls.env.restart_kiyot()

    @classmethod
    def tearDownClass(cls):
        cls.env.extra_config = ""
        cls.env.restart_kiyot()
        for srv in (cls.evil, cls.node):
            srv.shutdown()
            srv.server_close()
        super().tearDownClass()

    def refused(self, repo, ref="1"):
        """PullImage of evil/<repo> must fail PERMISSION_DENIED; returns the details."""
        _, cfg = self.run_pod()
        sep = "@" if ref.startswith("sha256:") else ":"
        image = "%s/evil/%s%s%s" % (self.evil_host, repo, sep, ref)
        try:
            r = self.c.image.PullImage(self.pb.PullImageRequest(
                image=self.pb.ImageSpec(image=image), sandbox_config=cfg), timeout=T_PULL)
            self.fail("PullImage of %s succeeded (image_ref %s)" % (image, r.image_ref))
        except grpc.RpcError as e:
            code, details = e.code(), cri.details_of(e)
        self.assertEqual(code, grpc.StatusCode.PERMISSION_DENIED, details)
        self.assertIn("refused", details)
        self.assertIn("a registry may not send a pull to this host", details)
        self.assertNotIn("ASIA-NODE-SECRET", details)
        self.assertNotIn("Couldn't connect", details)
        self.assertEqual(self.node.conns, 0, "the node's service was reached: " + details)
        return details

    def test_redirect_to_a_loopback_service_is_refused(self):
        details = self.refused("node")
        self.assertIn("redirect to 127.0.0.1:%d refused" % self.node.server_address[1],
                      details)
        self.assertIn("loopback", details)

    def test_redirect_by_digest_carries_no_digest_of_the_answer(self):
        asked = "sha256:" + "1" * 64
        details = self.refused("node", asked)
        # the digest asked for is the only one: nothing hashed of what would have answered
        self.assertEqual(set(re.findall(r"sha256:[0-9a-f]{64}", details)), {asked})

    def test_redirect_to_localhost_is_refused(self):
        details = self.refused("localhost")
        self.assertRegex(details, r"redirect to (127\.0\.0\.1|\[::1\]):%d refused"
                         % self.node.server_address[1])

    def test_redirect_to_the_metadata_service_is_refused(self):
        details = self.refused("metadata")
        self.assertIn("redirect to 169.254.169.254:80 refused", details)
        self.assertIn("link-local", details)

    def test_redirect_to_another_port_of_the_node_is_refused(self):
        # the suite's registry listens on this host's bridge address: another registry
        # configured there may not send its pulls to it
        details = self.refused("registry")
        self.assertIn("redirect to %s:5000 refused" % HOST_IP, details)
        self.assertIn("an address of this host", details)

    def test_token_realm_on_the_node_is_refused(self):
        details = self.refused("realm")
        self.assertIn("token realm at 127.0.0.1:%d refused" % self.node.server_address[1],
                      details)


if __name__ == "__main__":
    unittest.main()
