"""Hostile and broken requests through the real CRI socket: what is past Kubernetes' limits is
INVALID_ARGUMENT at once, naming the field, and kiyot keeps answering; errors of registries,
images and resources carry a precise code; ExecSync takes any timeout and caps its output;
kiyot's state is its owner's alone; the inotify limits fit the cells."""

import http.server
import os
import stat
import threading
import time

import grpc

import cri
from harness import HOST_IP, KiyotTest, T_CALL, T_PULL, T_START

MIB = 1 << 20
INOTIFY = "/proc/sys/fs/inotify/"


class ValidationTest(KiyotTest):
    def assertInvalidAtOnce(self, field, fn, *a, **kw):
        """fn must fail INVALID_ARGUMENT within 5 s with details naming field; Version must
        answer at once afterwards. Returns the details."""
        t0 = time.monotonic()
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, fn, *a, **kw)
        took = time.monotonic() - t0
        self.assertLess(took, 5, "refused only after %.1f s: %s" % (took, details))
        self.assertIn(field, details)
        self.assertLess(len(details), 1024, "the message carries the hostile value")
        t0 = time.monotonic()
        self.c.runtime.Version(self.pb.VersionRequest(), timeout=2)
        self.assertLess(time.monotonic() - t0, 1, "Version was slow after a hostile request")
        return details

    def run_sandbox(self, cfg):
        return self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                            timeout=T_START)

    def test_1mib_pod_name_is_refused_at_once(self):
        cfg = self.sandbox_config()
        cfg.metadata.name = "a" * MIB
        details = self.assertInvalidAtOnce("config.metadata.name", self.run_sandbox, cfg)
        self.assertIn("1048576 bytes", details)
        pods = self.c.runtime.ListPodSandbox(self.pb.ListPodSandboxRequest(), timeout=T_CALL)
        self.assertFalse([p for p in pods.items if len(p.metadata.name) > 253])

    def test_bad_label_key_is_refused(self):
        cfg = self.sandbox_config(labels={"bad key!": "x"})
        details = self.assertInvalidAtOnce("config.labels", self.run_sandbox, cfg)
        self.assertIn("bad key!", details)

    def test_300kib_of_annotations_are_refused(self):
        cfg = self.sandbox_config(annotations={"example.com/blob": "x" * (300 * 1024)})
        self.assertInvalidAtOnce("config.annotations", self.run_sandbox, cfg)

    def test_bad_ports_are_refused(self):
        cfg = self.sandbox_config()
        cfg.port_mappings.add(container_port=70000)
        self.assertInvalidAtOnce("config.port_mappings[0].container_port", self.run_sandbox,
                                 cfg)
        cfg = self.sandbox_config()
        cfg.port_mappings.add(container_port=80, host_port=8080, protocol=7)
        self.assertInvalidAtOnce("config.port_mappings[0].protocol", self.run_sandbox, cfg)

    def test_bad_ids_image_references_and_commands_are_refused(self):
        huge = "f" * MIB
        pb, rt = self.pb, self.c.runtime
        self.assertInvalidAtOnce("container_id", rt.ExecSync,
                                 pb.ExecSyncRequest(container_id=huge, cmd=["true"]),
                                 timeout=T_CALL)
        self.assertInvalidAtOnce("container_id", rt.Exec,
                                 pb.ExecRequest(container_id="../x", cmd=["sh"], stdout=True),
                                 timeout=T_CALL)
        self.assertInvalidAtOnce("pod_sandbox_id", rt.PortForward,
                                 pb.PortForwardRequest(pod_sandbox_id=huge, port=[80]),
                                 timeout=T_CALL)
        _, cfg = self.run_pod()
        self.assertInvalidAtOnce("image.image", self.c.image.PullImage,
                                 pb.PullImageRequest(image=pb.ImageSpec(image="a" * 1024),
                                                     sandbox_config=cfg), timeout=T_CALL)

    def test_bad_container_configs_are_refused(self):
        pod, cfg = self.run_pod()
        pb = self.pb

        def create(name="web", log_path="web/0.log", **kw):
            cc = pb.ContainerConfig(metadata=pb.ContainerMetadata(name=name),
                                    image=pb.ImageSpec(image=self.env.ref("busybox:1")),
                                    log_path=log_path, **kw)
            self.c.runtime.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=pod, config=cc, sandbox_config=cfg), timeout=T_START)

        self.assertInvalidAtOnce("config.metadata.name", create, name="web/1")
        self.assertInvalidAtOnce("config.envs[0].key", create,
                                 envs=[pb.KeyValue(key="A=B", value="c")])
        self.assertInvalidAtOnce("config.log_path", create, log_path="../../../etc/x.log")
        self.assertInvalidAtOnce(
            "config.linux.resources.memory_limit_in_bytes", create,
            linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources(
                memory_limit_in_bytes=MIB)))

    def test_bad_resource_updates_are_invalid_argument(self):
        pod, cfg = self.run_pod(memory=512 * MIB)
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")

        def update(**res):
            self.c.runtime.UpdateContainerResources(self.pb.UpdateContainerResourcesRequest(
                container_id=cid, linux=self.pb.LinuxContainerResources(**res)),
                timeout=T_CALL)

        self.assertInvalidAtOnce("linux.cpu_shares", update, cpu_shares=-5)
        self.assertInvalidAtOnce("linux.cpu_quota", update, cpu_period=100000,
                                 cpu_quota=2 ** 62)
        self.assertInvalidAtOnce("linux.cpu_period", update, cpu_period=5, cpu_quota=1000)
        self.assertInvalidAtOnce("linux.memory_limit_in_bytes", update,
                                 memory_limit_in_bytes=MIB)
        self.assertInvalidAtOnce("linux.memory_limit_in_bytes", update,
                                 memory_limit_in_bytes=-1)
        # the unit is untouched and a sane update still works
        update(memory_limit_in_bytes=192 * MIB, cpu_period=100000, cpu_quota=25000)
        self.assertEqual(self.cstatus(cid).state, self.pb.ContainerState.Value(
            "CONTAINER_RUNNING"))


class ExecSyncTest(KiyotTest):
    def running(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return cid

    def test_timeout_of_2_63_minus_1_does_not_expire(self):
        # the command outlives what an overflowing deadline left (about 9 s)
        cid = self.running()
        t0 = time.monotonic()
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=["sh", "-c", "sleep 11; echo done"], timeout=2 ** 63 - 1),
            timeout=T_CALL)
        self.assertEqual((r.exit_code, r.stdout), (0, b"done\n"), r.stderr)
        self.assertGreaterEqual(time.monotonic() - t0, 11)

    def test_100mb_of_output_is_capped_with_a_note(self):
        cid = self.running()
        # the kubelet's client takes messages of 16 MiB
        ch = grpc.insecure_channel("unix://" + self.env.socket,
                                   options=[("grpc.max_receive_message_length", 16 * MIB)])
        self.addCleanup(ch.close)
        exec_sync = ch.unary_unary("/runtime.v1.RuntimeService/ExecSync",
                                   request_serializer=self.pb.ExecSyncRequest.SerializeToString,
                                   response_deserializer=self.pb.ExecSyncResponse.FromString)
        r = exec_sync(self.pb.ExecSyncRequest(container_id=cid, cmd=[
            "sh", "-c", "head -c 104857600 /dev/zero; echo to-stderr >&2; exit 3"], timeout=60),
            timeout=T_CALL)
        self.assertEqual(r.exit_code, 3)
        self.assertLessEqual(len(r.stdout) + len(r.stderr), 16 * MIB)
        self.assertGreater(len(r.stdout), 15 * MIB)
        self.assertEqual(r.stdout.count(b"\0"), len(r.stdout))
        self.assertIn(b"to-stderr", r.stderr)
        self.assertIn(b"truncated", r.stderr)
        # and a small answer is whole, with no note
        r = exec_sync(self.pb.ExecSyncRequest(container_id=cid, cmd=["echo", "hi"]),
                      timeout=T_CALL)
        self.assertEqual((r.stdout, r.stderr), (b"hi\n", b""))


class _RedirectLoop(http.server.BaseHTTPRequestHandler):
    """A registry that sends every request back to itself."""

    def do_GET(self):
        self.send_response(302)
        self.send_header("Location", self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_HEAD = do_GET

    def log_message(self, *args):
        pass


class StatusCodesTest(KiyotTest):
    """Registry and image errors reach the kubelet with a code that says what happened."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.loop = http.server.ThreadingHTTPServer((HOST_IP, 0), _RedirectLoop)
        threading.Thread(target=cls.loop.serve_forever, daemon=True).start()
        cls.loop_host = "%s:%d" % (HOST_IP, cls.loop.server_address[1])
        # continues the registries: section the suite's config ends with (plain HTTP)
        cls.env.extra_config = '  "%s": { insecure: true }\n' % cls.loop_host
        cls.env.ensure()
        cls.env.restart_kiyot()

    @classmethod
    def tearDownClass(cls):
        cls.env.extra_config = ""
        cls.env.restart_kiyot()
        cls.loop.shutdown()
        cls.loop.server_close()
        super().tearDownClass()

    def pull_error(self, image, cfg):
        try:
            r = self.c.image.PullImage(self.pb.PullImageRequest(
                image=self.pb.ImageSpec(image=image), sandbox_config=cfg), timeout=T_PULL)
        except grpc.RpcError as e:
            return e.code(), cri.details_of(e)
        self.fail("PullImage of %s succeeded (image_ref %s)" % (image, r.image_ref))

    def test_redirect_loop_is_failed_precondition_not_an_unreachable_agent(self):
        _, cfg = self.run_pod()
        code, details = self.pull_error("%s/loop/image:1" % self.loop_host, cfg)
        self.assertEqual(code, grpc.StatusCode.FAILED_PRECONDITION, details)
        self.assertIn("redirect", details)
        self.assertNotIn("agent unreachable", details)
        self.assertIn(self.loop_host, details)

    def test_layer_digest_mismatch_is_data_loss_naming_the_digest(self):
        _, cfg = self.run_pod()
        code, details = self.pull_error(self.env.ref("bad/digest:1"), cfg)
        self.assertEqual(code, grpc.StatusCode.DATA_LOSS, details)
        self.assertIn("sha256:", details)
        self.assertIn("does not match", details)

    def test_layer_escaping_the_root_is_failed_precondition_naming_the_layer(self):
        _, cfg = self.run_pod()
        code, details = self.pull_error(self.env.ref("bad/escape:1"), cfg)
        self.assertEqual(code, grpc.StatusCode.FAILED_PRECONDITION, details)
        self.assertIn("escapes the root", details)
        self.assertRegex(details, r"layer sha256:[0-9a-f]{64}")


class NodeStateTest(KiyotTest):
    """kiyot.db holds the key of the cells' CA; the inotify limits must fit
    every cell's agent. Both are settled when kiyot starts."""

    def mode(self, path):
        return stat.S_IMODE(os.stat(path).st_mode)

    def log_since_restart(self):
        with open(self.env.kiyot_log, errors="replace") as f:
            return f.read().rsplit("==== start", 1)[-1]

    def test_state_directory_and_database_are_owner_only(self):
        db = os.path.join(self.env.state_dir, "kiyot.db")
        self.run_pod()  # something written: the WAL files exist
        self.assertEqual(self.mode(self.env.state_dir) & 0o077, 0)
        for p in (db, db + "-wal", db + "-shm"):
            self.assertEqual(self.mode(p), 0o600, p)
        # an installation that left them open to everyone is tightened at the next start
        os.chmod(self.env.state_dir, 0o755)
        for p in (db, db + "-wal", db + "-shm"):
            os.chmod(p, 0o644)
        self.env.restart_kiyot()
        self.c = self.env.client
        self.assertEqual(self.mode(self.env.state_dir), 0o700)
        for p in (db, db + "-wal", db + "-shm"):
            self.assertEqual(self.mode(p), 0o600, p)
        self.assertIn("state directory %s was 0755" % self.env.state_dir,
                      self.log_since_restart())

    def test_inotify_limits_are_raised_for_every_cell(self):
        with open(INOTIFY + "max_user_instances") as f:
            before = int(f.read())
        try:
            # the kernel's default, which stops the 129th cell's agent
            with open(INOTIFY + "max_user_instances", "w") as f:
                f.write("128\n")
            self.env.restart_kiyot()
            self.c = self.env.client
            with open(INOTIFY + "max_user_instances") as f:
                now = int(f.read())
            with open(INOTIFY + "max_user_watches") as f:
                watches = int(f.read())
            # the suite's cells are a /16: 65533 cells beside the node's own 128
            self.assertGreaterEqual(now, 65533 + 128)
            self.assertGreaterEqual(watches, 65533 * 32)
            self.assertIn("fs.inotify.max_user_instances raised from 128 to %d" % now,
                          self.log_since_restart())
            # and a pod still runs
            pod, _ = self.run_pod()
            self.assertTrue(self.pod_ip(pod))
        finally:
            with open(INOTIFY + "max_user_instances") as f:
                if int(f.read()) < before:
                    with open(INOTIFY + "max_user_instances", "w") as w:
                        w.write("%d\n" % before)
