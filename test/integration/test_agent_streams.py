"""The agent's streaming calls, driven as kiyot drives them (over TLS, as kiyot): Exec runs a
command as the container's own process with stdin, a terminal and resizes, and ends with its
exit code; PortForward carries a TCP connection to the pod byte for byte; a caller that goes
away leaves no process behind."""

import hashlib
import queue
import threading
import time
import unittest

import grpc

import cellcert
import cri
from harness import KiyotTest, T_CALL, wait_for



class AgentStreamsTest(KiyotTest):
    def setUp(self):
        super().setUp()
        self.ap = cri.load_proto("cellagent")

    def agent(self, pod):
        ch = cellcert.kiyot_channel(self.env.state_dir, self.pod_ip(pod),
                                    cellcert.cell_id_of(self.env.state_dir, pod))
        self.addCleanup(ch.close)
        return ch, []

    def stream(self, pod, method, first, later=(), timeout=30):
        """Opens a bidirectional call; returns (responses iterator, input queue, call)."""
        ch, md = self.agent(pod)
        inp, out = getattr(self.ap, method + "Input"), getattr(self.ap, method + "Output")
        fn = ch.stream_stream("/kiyot.cell.v1.CellAgent/" + method,
                              request_serializer=inp.SerializeToString,
                              response_deserializer=out.FromString)
        q = queue.Queue()
        q.put(first)
        for m in later:
            q.put(m)

        def requests():
            while True:
                m = q.get()
                if m is None:
                    return
                yield m
        call = fn(requests(), metadata=md, timeout=timeout)
        return call, q

    def exec(self, pod, cid, cmd, stdin=None, tty=False, resize=None):
        """Runs cmd; returns (stdout, stderr, exit_code)."""
        ap = self.ap
        first = ap.ExecInput(unit_id=cid, cmd=cmd, tty=tty, stdin=stdin is not None)
        if resize:
            first.resize.width, first.resize.height = resize
        later = []
        if stdin is not None:
            later = [ap.ExecInput(stdin_data=stdin), ap.ExecInput(stdin_close=True)]
        call, q = self.stream(pod, "Exec", first, later)
        out, err, code = b"", b"", None
        for m in call:
            out += m.stdout
            err += m.stderr
            if m.exited:
                code = m.exit_code
                q.put(None)  # close our side: the call then ends
        return out, err, code

    def running(self, image="busybox:1", command=("sleep", "3600"), security=None):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref(image), command=list(command),
                             security=security)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return pod, cid

    def test_exec_streams_stdin_stdout_stderr_and_the_exit_code(self):
        pb = self.pb
        pod, cid = self.running(security=pb.LinuxContainerSecurityContext(
            run_as_user=pb.Int64Value(value=1000)))
        out, err, code = self.exec(pod, cid, ["sh", "-c", "read x; echo got:$x; id -u; "
                                              "echo oops >&2; exit 3"], stdin=b"hello\n")
        self.assertEqual(out.decode().split(), ["got:hello", "1000"])
        self.assertEqual(err, b"oops\n")
        self.assertEqual(code, 3)

    def test_exec_with_a_terminal_and_a_size(self):
        pod, cid = self.running()
        out, _, code = self.exec(pod, cid, ["sh", "-c", "stty size; tty; echo err >&2"],
                                 tty=True, resize=(100, 30))
        text = out.decode().replace("\r", "")
        self.assertIn("30 100\n", text)
        self.assertIn("/dev/pts/", text)
        self.assertIn("err\n", text, "a terminal carries stderr as stdout")
        self.assertEqual(code, 0)

    def test_exec_of_a_missing_command_fails_with_its_code(self):
        pod, cid = self.running()
        _, err, code = self.exec(pod, cid, ["/no/such/command"])
        self.assertEqual(code, 127, "not found, as other runtimes report it")
        self.assertTrue(err, "no message for a missing command")
        _, err, code = self.exec(pod, cid, ["/etc/passwd"])
        self.assertEqual(code, 126, "not executable")
        _, _, code = self.exec(pod, cid, ["sh", "-c", "exit 255"])
        self.assertEqual(code, 255, "a command's own 255 stays")

    def test_a_caller_that_goes_away_leaves_no_process(self):
        pod, cid = self.running()
        ap = self.ap
        call, q = self.stream(pod, "Exec", ap.ExecInput(unit_id=cid, cmd=["sleep", "4242"],
                                                        stdin=True))
        wait_for(lambda: "sleep 4242" in self.ps(cid), 10, "the exec'd sleep to run")
        call.cancel()
        q.put(None)
        wait_for(lambda: "sleep 4242" not in self.ps(cid), 10,
                 "the exec'd command to be killed when its caller left")

    def ps(self, cid):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid,
                                                            cmd=["ps", "-o", "args"],
                                                            timeout=10), timeout=T_CALL)
        return r.stdout.decode()

    def test_port_forward_carries_a_connection_byte_for_byte(self):
        ap = self.ap
        pod, _ = self.running(command=["nc", "-ll", "-p", "9000", "-e", "cat"])
        payload = hashlib.shake_256(b"port-forward").digest(4 << 20)
        chunks = [payload[i:i + 65536] for i in range(0, len(payload), 65536)]
        wait_for(lambda: self.echo_ready(pod), 10, "the echo server in the pod")
        call, q = self.stream(pod, "PortForward", ap.PortForwardInput(port=9000))

        def feed():
            for c in chunks:
                q.put(ap.PortForwardInput(data=c))
            q.put(ap.PortForwardInput(close=True))
        threading.Thread(target=feed, daemon=True).start()
        got = bytearray()
        t0 = time.monotonic()
        for m in call:
            got += m.data
            if len(got) >= len(payload):
                q.put(None)
        self.assertEqual(len(got), len(payload))
        self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(payload).hexdigest())
        self.assertLess(time.monotonic() - t0, 60)

    def echo_ready(self, pod):
        ap = self.ap
        call, q = self.stream(pod, "PortForward", ap.PortForwardInput(port=9000, data=b"x"))
        try:
            for m in call:
                if m.data:
                    q.put(None)
                    return True
        except grpc.RpcError:
            return False
        finally:
            q.put(None)
        return False

    def test_port_forward_to_a_closed_port_says_so(self):
        ap = self.ap
        pod, _ = self.running()
        call, q = self.stream(pod, "PortForward", ap.PortForwardInput(port=9))
        try:
            list(call)
            self.fail("a connection to a closed port succeeded")
        except grpc.RpcError as e:
            self.assertIn("port 9", e.details())
        finally:
            q.put(None)


if __name__ == "__main__":
    unittest.main()
