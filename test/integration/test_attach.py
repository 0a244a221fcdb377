"""kubectl attach into a cell: the CRI's Attach answers a single-use URL on kiyot's streaming
server; the session joins the container's own stdio, which its shim holds for the container's
whole life (a terminal with tty, an open stdin pipe with stdin). Driven over SPDY/3.1 and
WebSocket by the suite's own clients (streamclient.py), and at the agent's Attach call."""

import json
import os
import time
import unittest

import grpc

import cri
import streamclient
import test_agent_streams
from harness import KiyotTest, T_CALL, wait_for


class AttachTest(KiyotTest):
    def container(self, command, **stdio):
        pod, cfg = self.run_pod()
        cid, log = self.create(pod, cfg, self.env.ref("busybox:1"), command=command,
                               stdio=stdio)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return pod, cid, log

    def url(self, cid, stdin=True, tty=False):
        r = self.c.runtime.Attach(self.pb.AttachRequest(container_id=cid, stdin=stdin, tty=tty,
                                                        stdout=True, stderr=not tty),
                                  timeout=T_CALL)
        self.assertTrue(r.url.startswith("http://127.0.0.1:"), r.url)
        self.assertIn("/attach/", r.url)
        return r.url

    def session(self, cid, kind="spdy", stdin=True, tty=False, **kw):
        s = streamclient.Session(self.url(cid, stdin=stdin, tty=tty), kind, stdin=stdin,
                                 tty=tty, **kw)
        self.addCleanup(s.close)
        return s

    def still_running(self, cid):
        time.sleep(1)
        self.assertEqual(self.cstatus(cid).state, self.pb.CONTAINER_RUNNING,
                         "detaching stopped the container")

    def test_spdy_attach_to_a_terminal_takes_input_and_follows_resizes(self):
        _, cid, log = self.container(["sh"], stdin=True, tty=True)
        s = self.session(cid, tty=True)
        s.write(b"echo hello-$((40+2))\n")
        s.read_until(b"hello-42")
        s.write(b"echo term=$TERM\n")
        s.read_until(b"term=xterm")
        s.resize(100, 30)
        s.write(b"stty size\n")
        s.read_until(b"30 100")
        s.resize(120, 40)
        s.write(b"stty size; tty\n")
        out = s.read_until(b"40 120")
        s.read_until(b"/dev/pts/")
        self.assertIn(b"\r\n", out, "a terminal's output")
        # the terminal's output still goes to the container's log
        wait_for(lambda: os.path.exists(log) and "hello-42" in open(log).read(), 20,
                 "the terminal's output in the CRI log")
        s.close()
        self.still_running(cid)
        # a later attach reaches the same shell
        s = self.session(cid, "ws", tty=True)
        s.write(b"echo again-$((1+1))\n")
        s.read_until(b"again-2")

    def test_websocket_attach_sends_stdin_to_cat_and_detaches(self):
        _, cid, _ = self.container(["cat"], stdin=True)
        s = self.session(cid, "ws", protocol="v5.channel.k8s.io")
        s.write(b"ping\n")
        self.assertEqual(s.read_until(b"ping\n"), b"ping\n")
        s.write(b"pong\n")
        self.assertEqual(s.read_until(b"pong\n"), b"ping\npong\n")
        s.close()
        self.still_running(cid)
        # over SPDY now; without stdin_once the end of this client's stdin lets it go
        s = self.session(cid, "spdy")
        s.write(b"third\n")
        self.assertEqual(s.read_until(b"third\n"), b"third\n")
        s.close_stdin()
        self.assertEqual(json.loads(s.wait_end())["status"], "Success")
        self.still_running(cid)
        s = self.session(cid, "ws")
        s.write(b"fourth\n")
        s.read_until(b"fourth\n")

    def test_stdin_once_closes_the_containers_stdin(self):
        _, cid, _ = self.container(["sh", "-c", "cat; echo stdin-closed; sleep 3600"],
                                   stdin=True, stdin_once=True)
        a = self.session(cid, "spdy")
        a.write(b"first\n")
        a.read_until(b"first\n")
        a.close_stdin()
        a.read_until(b"stdin-closed", 10)
        self.still_running(cid)
        # a second client attaches, but its input goes nowhere: the container's stdin is closed
        b = self.session(cid, "ws")
        b.write(b"ignored\n")
        self.assertEqual(b.quiet_for(2), b"")
        a.close()
        b.close()
        self.still_running(cid)

    def test_a_shell_that_exits_ends_the_attach_with_success(self):
        _, cid, _ = self.container(["sh"], stdin=True, stdin_once=True)
        s = self.session(cid, "spdy")
        s.write(b"echo bye; exit 3\n")
        s.read_until(b"bye\n")
        self.assertEqual(json.loads(s.wait_end())["status"], "Success")
        st = self.wait_state(cid, "CONTAINER_EXITED")
        self.assertEqual(st.exit_code, 3)

    def test_output_only_attach_follows_a_writer_on_both_protocols(self):
        _, cid, _ = self.container(["sh", "-c", "i=0; while true; do echo tick-$i; "
                                    "echo tock-$i >&2; i=$((i+1)); sleep 0.2; done"])
        spdy = self.session(cid, "spdy", stdin=False)
        ws = self.session(cid, "ws", stdin=False)
        first = spdy.read_until(b"\n").split(b"\n")[0]
        n = int(first.split(b"-")[1])
        # both see the same lines from now on, stdout and stderr apart
        nxt = b"tick-%d\n" % (n + 3)
        spdy.read_until(nxt)
        ws.read_until(nxt)
        spdy.read_until(b"tock-%d\n" % (n + 3), stream="stderr")
        ws.read_until(b"tock-%d\n" % (n + 3), stream="stderr")
        spdy.close()
        ws.close()
        self.still_running(cid)

    def test_attach_requests_are_checked(self):
        pb = self.pb
        _, cid, _ = self.container(["sleep", "3600"])
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.c.runtime.Attach,
                                  pb.AttachRequest(container_id=cid, stdin=True, stdout=True),
                                  timeout=T_CALL)
        self.assertIn("not created with stdin", details)
        self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.c.runtime.Attach,
                        pb.AttachRequest(container_id=cid, tty=True, stdout=True, stderr=True),
                        timeout=T_CALL)
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.c.runtime.Attach,
                        pb.AttachRequest(container_id="nope", stdout=True), timeout=T_CALL)
        self.c.runtime.StopContainer(pb.StopContainerRequest(container_id=cid, timeout=0),
                                     timeout=T_CALL)
        details = self.assertCode(grpc.StatusCode.FAILED_PRECONDITION, self.c.runtime.Attach,
                                  pb.AttachRequest(container_id=cid, stdout=True),
                                  timeout=T_CALL)
        self.assertIn("not running", details)


class AgentAttachTest(KiyotTest):
    """The agent's Attach call, driven as kiyot drives it (over TLS, as kiyot)."""

    agent = test_agent_streams.AgentStreamsTest.agent
    stream = test_agent_streams.AgentStreamsTest.stream

    def setUp(self):
        super().setUp()
        self.ap = cri.load_proto("cellagent")

    def attach(self, pod, first):
        call, q = self.stream(pod, "Attach", first)
        self.addCleanup(q.put, None)
        return call, q

    @staticmethod
    def stdout_until(call, text):
        """The call's stdout until it holds text (the call's deadline bounds the wait)."""
        out = b""
        for m in call:
            out += m.stdout
            if text in out:
                break
        return out

    def container(self, command, **stdio):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=command, stdio=stdio)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return pod, cid

    def test_stdin_once_later_callers_attach_without_input(self):
        ap = self.ap
        pod, cid = self.container(["sh", "-c", "cat; echo eof; sleep 3600"], stdin=True,
                                  stdin_once=True)
        call, q = self.attach(pod, ap.AttachInput(unit_id=cid, stdin=True))
        hello = next(call)
        self.assertTrue(hello.attached and hello.stdin and not hello.tty)
        q.put(ap.AttachInput(stdin_data=b"x\n", stdin_close=True))
        self.assertEqual(self.stdout_until(call, b"eof\n"), b"x\neof\n")
        call2, _ = self.attach(pod, ap.AttachInput(unit_id=cid, stdin=True))
        hello = next(call2)
        self.assertTrue(hello.attached)
        self.assertFalse(hello.stdin, "a second caller got stdin after stdin_once closed it")
        call.cancel()
        call2.cancel()

    def test_errors_name_the_unit_and_what_is_wrong(self):
        ap = self.ap
        pod, cid = self.container(["sleep", "3600"])
        cases = [(ap.AttachInput(unit_id="nope"), grpc.StatusCode.NOT_FOUND, "nope"),
                 (ap.AttachInput(unit_id=cid, stdin=True), grpc.StatusCode.INVALID_ARGUMENT,
                  "not created with stdin")]
        for first, code, text in cases:
            call, _ = self.attach(pod, first)
            with self.assertRaises(grpc.RpcError) as e:
                list(call)
            self.assertEqual(e.exception.code(), code)
            self.assertIn(text, e.exception.details())
        self.c.runtime.StopContainer(self.pb.StopContainerRequest(container_id=cid, timeout=0),
                                     timeout=T_CALL)
        self.wait_state(cid, "CONTAINER_EXITED")
        call, _ = self.attach(pod, ap.AttachInput(unit_id=cid))
        with self.assertRaises(grpc.RpcError) as e:
            list(call)
        self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("not running", e.exception.details())

    def test_a_caller_that_goes_away_leaves_the_unit_running_and_its_shim_clean(self):
        ap = self.ap
        pod, cid = self.container(["cat"], stdin=True)
        for _ in range(3):
            call, q = self.attach(pod, ap.AttachInput(unit_id=cid, stdin=True))
            self.assertTrue(next(call).attached)
            q.put(ap.AttachInput(stdin_data=b"hi\n"))
            self.assertEqual(next(call).stdout, b"hi\n")
            call.cancel()
        time.sleep(1)
        self.assertEqual(self.cstatus(cid).state, self.pb.CONTAINER_RUNNING)
        call, q = self.attach(pod, ap.AttachInput(unit_id=cid, stdin=True))
        self.assertTrue(next(call).stdin, "stdin without stdin_once stays open for the next")

    def test_a_caller_leaving_while_its_input_waits_is_let_go(self):
        ap = self.ap
        pod, cid = self.container(["sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.2; done; "
                                   "cat >/dev/null; echo eof; sleep 3600"],
                                  stdin=True, stdin_once=True)
        call, q = self.attach(pod, ap.AttachInput(unit_id=cid, stdin=True))
        self.assertTrue(next(call).stdin)
        for _ in range(64):  # 2 MiB nobody reads yet: the agent's side waits on the unit
            q.put(ap.AttachInput(stdin_data=b"x" * 32768))
        time.sleep(2)
        call.cancel()
        watch, _ = self.attach(pod, ap.AttachInput(unit_id=cid))
        self.assertTrue(next(watch).attached)
        self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid,
                                                        cmd=["touch", "/tmp/go"], timeout=10),
                                timeout=T_CALL)
        # the caller that left was let go, so stdin_once closed the container's stdin
        self.assertEqual(self.stdout_until(watch, b"eof\n"), b"eof\n")
        watch.cancel()


if __name__ == "__main__":
    unittest.main()
