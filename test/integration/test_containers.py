"""Container behaviour: exit codes and reasons, command/args/env, image formats (Docker
schema 2, OCI index, whiteouts over many layers, the pause image through a mirror)."""

import unittest

from harness import KiyotTest


class ContainersTest(KiyotTest):
    def run_to_exit(self, image, command, args=(), envs=None, timeout=120):
        pod, cfg = self.run_pod()
        cid, log = self.create(pod, cfg, image, command=command, args=args, envs=envs)
        self.start(cid)
        cs = self.wait_state(cid, "CONTAINER_EXITED", timeout=timeout)
        return cs, log

    def test_exit_code_3_is_exited_with_reason_error(self):
        cs, log = self.run_to_exit(self.env.ref("busybox:1"), ["sh", "-c", "echo bye; exit 3"])
        self.assertEqual(cs.exit_code, 3)
        self.assertEqual(cs.reason, "Error")
        self.assertGreater(cs.finished_at, 0)
        self.assertGreaterEqual(cs.finished_at, cs.started_at)
        self.assertIn("bye", self.wait_log(log, lambda t: "bye" in t, "bye"))

    def test_exit_0_is_completed(self):
        cs, _ = self.run_to_exit(self.env.ref("busybox:1"), ["true"])
        self.assertEqual(cs.exit_code, 0)
        self.assertEqual(cs.reason, "Completed")

    def test_command_args_and_env_reach_the_process(self):
        cs, log = self.run_to_exit(self.env.ref("busybox:1"), ["/bin/sh", "-c"],
                                   args=['echo "foo=$FOO"; echo "args:$0:$1" ', "one", "two"],
                                   envs={"FOO": "bar baz"})
        self.assertEqual(cs.exit_code, 0)
        texts = self.wait_log(log, lambda t: "args:one:two" in t, "the args line")
        self.assertIn("foo=bar baz", texts)

    def test_image_entrypoint_and_cmd_apply_when_command_is_empty(self):
        # busybox's config has Cmd ["sh"] and no entrypoint: args replace Cmd.
        cs, log = self.run_to_exit(self.env.ref("busybox:1"), [], args=["echo", "from-args"])
        self.assertEqual(cs.exit_code, 0)
        self.wait_log(log, lambda t: "from-args" in t, "from-args")

    def test_docker_schema2_image_runs(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("hello:docker"))
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(self.pod_ip(pod)))

    def test_oci_index_picks_linux_amd64(self):
        cs, log = self.run_to_exit(self.env.ref("multiarch:1"), ["cat", "/arch"])
        self.assertEqual(cs.exit_code, 0)
        self.assertEqual(self.wait_log(log, lambda t: t, "output"), ["amd64"])

    def test_pull_by_digest(self):
        t = self.env.tag_info("hello:1")
        ref = "%s@%s" % (self.env.ref("hello"), t["digest"])
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, ref)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertIn("hello from kiyot", self.wait_http(self.pod_ip(pod)))

    def test_whiteouts_and_opaque_directories_across_layers(self):
        info = self.env.catalog["info"]
        script = "cd /data; for f in %s %s; do if [ -e $f ]; then echo present $f; " \
                 "else echo absent $f; fi; done; cat b.txt" % (
                     " ".join(info["multilayer_present"]), " ".join(info["multilayer_absent"]))
        cs, log = self.run_to_exit(self.env.ref("multilayer:1"), ["sh", "-c", script])
        self.assertEqual(cs.exit_code, 0)
        texts = self.wait_log(log, lambda t: "b2" in t, "the upper b.txt")
        for f in info["multilayer_present"]:
            self.assertIn("present " + f, texts)
        for f in info["multilayer_absent"]:
            self.assertIn("absent " + f, texts, "a whiteout was not honoured")

    def test_pause_image_resolves_through_registry_mirror(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, "registry.k8s.io/pause:3.9")
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.stop(cid, timeout=10)
        cs = self.wait_state(cid, "CONTAINER_EXITED", timeout=60)
        self.assertEqual(cs.exit_code, 0)


if __name__ == "__main__":
    unittest.main()
