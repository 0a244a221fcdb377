"""kubectl exec into a cell: the CRI's Exec answers a single-use URL on kiyot's streaming
server, which speaks SPDY/3.1 and WebSocket with Kubernetes' remotecommand channels; driven
here by the suite's own clients (streamclient.py)."""

import hashlib
import json
import signal
import socket
import threading
import time
import unittest
import urllib.error
import urllib.request

import grpc

import streamclient
from harness import KiyotTest, T_CALL, wait_for


def upload_reaches_a_half_closing_pod(test, c, pb, pod, cid):
    """Sends 8 MiB through port-forward to the sink on 9100 of container cid (nc reading into
    sha256sum, which ends its own output at once) and checks the sink got every byte."""
    run = lambda cmd: c.runtime.ExecSync(pb.ExecSyncRequest(
        container_id=cid, cmd=cmd, timeout=10), timeout=T_CALL).stdout
    wait_for(lambda: b":9100 " in run(["netstat", "-ltn"]), 10, "the sink to listen")
    big = hashlib.shake_256(b"half-close").digest(8 << 20)
    url = c.runtime.PortForward(pb.PortForwardRequest(pod_sandbox_id=pod, port=[9100]),
                                timeout=T_CALL).url
    got = streamclient.spdy_port_forward(url, [(9100, big)])
    test.assertEqual(got, [(b"", "")])
    wait_for(lambda: run(["cat", "/tmp/up.sha"]), 10, "the sink's digest")
    test.assertEqual(run(["cat", "/tmp/up.sha"]).split()[0].decode(),
                     hashlib.sha256(big).hexdigest())


class StreamingTest(KiyotTest):
    def running(self, security=None):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"],
                             security=security)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return cid

    def url(self, cid, cmd, tty=False, stdin=False, stderr=True):
        r = self.c.runtime.Exec(self.pb.ExecRequest(container_id=cid, cmd=cmd, tty=tty,
                                                    stdin=stdin, stdout=True,
                                                    stderr=stderr and not tty),
                                timeout=T_CALL)
        self.assertTrue(r.url.startswith("http://127.0.0.1:"), r.url)
        return r.url

    def status(self, out):
        return json.loads(out["error"].decode())

    def test_spdy_exec_streams_stdio_and_reports_success(self):
        pb = self.pb
        cid = self.running(pb.LinuxContainerSecurityContext(
            run_as_user=pb.Int64Value(value=1000)))
        url = self.url(cid, ["sh", "-c", "read x; echo out:$x; id -u; echo err >&2"],
                       stdin=True)
        out = streamclient.spdy_exec(url, stdin=b"hi\n")
        self.assertEqual(out["stdout"].decode().split(), ["out:hi", "1000"])
        self.assertEqual(out["stderr"], b"err\n")
        self.assertEqual(self.status(out)["status"], "Success")

    def test_spdy_exec_exit_code_is_a_non_zero_exit_code_status(self):
        cid = self.running()
        out = streamclient.spdy_exec(self.url(cid, ["sh", "-c", "exit 3"]))
        st = self.status(out)
        self.assertEqual(st["status"], "Failure")
        self.assertEqual(st["reason"], "NonZeroExitCode")
        self.assertEqual(st["details"]["causes"], [{"reason": "ExitCode", "message": "3"}])

    def test_spdy_exec_with_a_terminal_and_its_size(self):
        cid = self.running()
        out = streamclient.spdy_exec(self.url(cid, ["sh", "-c",
                                                    "sleep 1; stty size; tty; echo term=$TERM"],
                                              tty=True, stdin=True),
                                     stdin=b"", tty=True, resize=(100, 30))
        text = out["stdout"].decode().replace("\r", "")
        self.assertIn("30 100\n", text)
        self.assertIn("/dev/pts/", text)
        self.assertIn("term=xterm\n", text, "a terminal's TERM, as containerd sets it")

    def test_a_url_is_good_once(self):
        cid = self.running()
        url = self.url(cid, ["true"])
        streamclient.spdy_exec(url)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url, timeout=10)
        self.assertEqual(e.exception.code, 404)
        with self.assertRaises(ConnectionError):
            streamclient.spdy_exec(url)

    def test_websocket_exec_v4_and_v5(self):
        cid = self.running()
        out = streamclient.ws_exec(self.url(cid, ["sh", "-c", "echo out; echo err >&2; exit 2"]))
        self.assertEqual(out["stdout"], b"out\n")
        self.assertEqual(out["stderr"], b"err\n")
        self.assertEqual(self.status(out)["details"]["causes"][0]["message"], "2")
        # v5 closes stdin with a message on channel 255
        out = streamclient.ws_exec(self.url(cid, ["sh", "-c", "cat; echo done"], stdin=True),
                                   stdin=b"piped\n", protocol="v5.channel.k8s.io",
                                   close_stdin=True)
        self.assertEqual(out["stdout"], b"piped\ndone\n")

    def test_exec_sync_of_a_missing_or_unrunnable_command_is_127_or_126(self):
        cid = self.running()
        codes = [self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=cmd, timeout=10), timeout=T_CALL).exit_code
            for cmd in (["/no/such"], ["nosuchcmd"], ["/etc/passwd"], ["sh", "-c", "exit 255"])]
        self.assertEqual(codes, [127, 127, 126, 255])

    def test_large_stdin_to_a_quiet_command_over_both_protocols(self):
        # what kubectl cp and `kubectl exec -i ... < file` do: more input than the session
        # queues, to a command that says nothing until its input ends
        cid = self.running()
        big = hashlib.shake_256(b"quiet").digest(8 << 20)
        want = hashlib.sha256(big).hexdigest()
        for kind, proto in (("spdy", "v4.channel.k8s.io"), ("ws", "v5.channel.k8s.io")):
            s = streamclient.Session(self.url(cid, ["sha256sum"], stdin=True), kind,
                                     protocol=proto)
            try:
                for off in range(0, len(big), 65536):
                    s.write(big[off:off + 65536])
                s.close_stdin()
                s.wait_end(timeout=30)
            finally:
                s.close()
            self.assertEqual(s.out["stdout"].decode().split()[:1], [want], kind)

    def test_a_client_leaving_with_input_queued_ends_its_command(self):
        cid = self.running()
        s = streamclient.Session(self.url(cid, ["sh", "-c", "exec sleep 599"], stdin=True),
                                 "spdy")
        s.s.sock.settimeout(3)
        try:
            for _ in range(256):  # 16 MiB: the session stops reading once its queue is full
                s.write(bytes(65536))
        except (socket.timeout, OSError):
            pass
        s.close()

        def gone():
            r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
                container_id=cid, cmd=["ps", "-o", "args"], timeout=10), timeout=T_CALL)
            return "sleep 599" not in r.stdout.decode()
        wait_for(gone, 10, "the command of a client that left to be killed")

    def test_port_forward_several_connections_byte_for_byte(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"),
                             command=["nc", "-ll", "-p", "9000", "-e", "cat"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        big = hashlib.shake_256(b"pf").digest(1 << 20)
        url = lambda: self.c.runtime.PortForward(self.pb.PortForwardRequest(
            pod_sandbox_id=pod, port=[9000]), timeout=T_CALL).url
        wait_for(lambda: streamclient.spdy_port_forward(url(), [(9000, b"x")])[0][0] == b"x",
                 10, "the echo server")
        got = streamclient.spdy_port_forward(url(), [(9000, big), (9000, b"second\n"),
                                                     (9001, b"nobody")])
        self.assertEqual(hashlib.sha256(got[0][0]).hexdigest(),
                         hashlib.sha256(big).hexdigest())
        self.assertEqual(got[1], (b"second\n", ""))
        self.assertIn("9001", got[2][1], "a refused connection is told on its error stream")
        self.assertNotIn("stream :", got[2][1], "an error without its call's name")

    def test_port_forward_to_a_pod_that_half_closes_takes_the_whole_upload(self):
        # nc with no stdin ends its output as soon as it connects (a TCP half-close) and reads
        # on: the client's 8 MiB must all arrive, though the pod's side ended first
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=[
            "sh", "-c", "nc -l -p 9100 | sha256sum > /tmp/up.sha; sleep 3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        upload_reaches_a_half_closing_pod(self, self.c, self.pb, pod, cid)

    def servers_pod(self):
        """A pod with an echo server on 9000 and a greeter on 9002 that says hi and hangs up;
        nothing listens on 9001. Returns the pod id once the echo server answers."""
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=[
            "sh", "-c", "nc -ll -p 9000 -e cat & nc -ll -p 9002 -e echo hi & wait"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        wait_for(lambda: streamclient.ws_port_forward(
            self.pf_url(pod, [9000]), [b"x"],
            until=lambda r: r[0]["data"] == b"x")[0]["data"] == b"x", 10, "the echo server")
        return pod

    def pf_url(self, pod, ports):
        return self.c.runtime.PortForward(self.pb.PortForwardRequest(
            pod_sandbox_id=pod, port=ports), timeout=T_CALL).url

    def test_websocket_port_forward_several_ports_byte_for_byte(self):
        pod = self.servers_pod()
        big = hashlib.shake_256(b"ws pf").digest(1 << 20)
        # the URL's ports stand over the CRI request's, as the kubelet reads them
        url = self.pf_url(pod, [80]) + "?port=9000&port=9002,9001"
        got = streamclient.ws_port_forward(
            url, [big, b"", b""],
            until=lambda r: len(r[0]["data"]) >= len(big) and r[1]["data"] == b"hi\n" and
            "9001" in r[2]["error"])
        self.assertEqual([g["port"] for g in got], [(9000, 9000), (9002, 9002), (9001, 9001)],
                         "each channel starts with its port, little-endian")
        self.assertEqual(hashlib.sha256(got[0]["data"]).hexdigest(),
                         hashlib.sha256(big).hexdigest())
        self.assertEqual(got[0]["error"], "")
        self.assertEqual((got[1]["data"], got[1]["error"]), (b"hi\n", ""))
        self.assertEqual(got[2]["data"], b"", "a refused port carries no data")
        self.assertIn("an error occurred forwarding 9001", got[2]["error"])

    def test_websocket_port_forward_base64_ports_of_the_cri_request_and_the_end(self):
        pod = self.servers_pod()
        # no query: the CRI request's ports; once every connection ended the server closes
        got = streamclient.ws_port_forward(self.pf_url(pod, [9002, 9001]), [b"", b""],
                                           protocol="v4.base64.channel.k8s.io")
        self.assertEqual([g["port"] for g in got], [(9002, 9002), (9001, 9001)])
        self.assertEqual(got[0]["data"], b"hi\n")
        self.assertIn("9001", got[1]["error"])
        # no subprotocol at all is binary, as the kubelet takes it
        got = streamclient.ws_port_forward(self.pf_url(pod, [9002]), [b""], protocol=None)
        self.assertEqual(got[0]["data"], b"hi\n")

    def test_websocket_port_forward_refusals(self):
        pod = self.servers_pod()
        for suffix, protocol, code, text in (
                ("", "channel.k8s.io", 403, "requested protocol(s) are not supported"),
                ("?port=0", "v4.channel.k8s.io", 400, 'port "0" must be > 0'),
                ("?port=9000,x", None, 400, 'unable to parse "9000,x" as a port')):
            status, body = streamclient.ws_upgrade_answer(self.pf_url(pod, [9000]) + suffix,
                                                          protocol)
            self.assertEqual((status, text in body), (code, True), body)
        # without ports in the URL or the CRI request there is nothing to forward
        status, body = streamclient.ws_upgrade_answer(self.pf_url(pod, []))
        self.assertEqual(status, 400)
        self.assertIn('query parameter "port" is required', body)

    def test_port_forward_in_a_host_network_pod_reaches_the_node(self):
        pb = self.pb
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        self.addCleanup(srv.close)
        port = srv.getsockname()[1]
        threading.Thread(target=lambda: srv.accept()[0].sendall(b"from the node"),
                         daemon=True).start()
        host = pb.NamespaceOption(network=pb.NODE)
        pod, _ = self.run_pod(security=pb.LinuxSandboxSecurityContext(namespace_options=host))
        url = self.c.runtime.PortForward(pb.PortForwardRequest(pod_sandbox_id=pod, port=[port]),
                                         timeout=T_CALL).url
        self.assertEqual(streamclient.spdy_port_forward(url, [(port, b"")])[0],
                         (b"from the node", ""))

    def test_kiyot_stops_promptly_with_a_session_open(self):
        cid = self.running()
        url = self.url(cid, ["sleep", "1000"], stdin=True)
        t = threading.Thread(target=lambda: self.swallow(streamclient.spdy_exec, url,
                                                         stdin=None), daemon=True)
        s = streamclient.Spdy(url)  # a session that stays open
        self.addCleanup(s.close)
        s.open({"streamtype": "error"})
        s.open({"streamtype": "stdout"})
        s.open({"streamtype": "stderr"})
        s.open({"streamtype": "stdin"})
        time.sleep(1)
        t0 = time.monotonic()
        self.env.kill_kiyot(signal.SIGTERM)
        self.assertLess(time.monotonic() - t0, 20, "kiyot waited on an open exec session")
        self.env.start_kiyot()
        self.c = self.env.client

    def test_sessions_held_open_take_no_thread_each(self):
        """60 exec sessions of cat open at once, each echoing its line: kiyot serves them all
        from its streaming loop and the agent client's completion queue, so its threads do not
        grow with them (a thread per connection and two per session used to add 180); the
        pod's bound (64 sessions, the cell's own) refuses the 65th before its upgrade, 429
        saying so, while another pod's exec runs; they all end cleanly."""
        cid = self.running()
        other = self.running()
        threads = lambda: int(open("/proc/%d/status" % self.env.kiyot.pid).read()
                              .split("Threads:")[1].split()[0])
        before = threads()
        sessions = []
        try:
            for i in range(64):
                s = streamclient.Session(self.url(cid, ["cat"], stdin=True))
                sessions.append(s)
                s.write(b"line %d\n" % i)
                s.read_until(b"line %d\n" % i)
                if i == 59:
                    self.assertLess(threads(), before + 8,
                                    "kiyot's threads grew with the sessions")
            with self.assertRaises(ConnectionError) as e:
                sessions.append(streamclient.Session(self.url(cid, ["cat"], stdin=True)))
            self.assertIn("upgrade refused: 429", str(e.exception))
            self.assertIn("has 64 exec, attach and port-forward sessions open, the most for "
                          "one pod", str(e.exception))
            out = streamclient.spdy_exec(self.url(other, ["echo", "another pod"]))
            self.assertEqual(out["stdout"], b"another pod\n")
            for s in sessions[:64]:
                s.close_stdin()
            for s in sessions[:64]:
                s.wait_end()
                self.assertEqual(self.status(s.out)["status"], "Success")
        finally:
            for s in sessions:
                s.close()

    def test_a_token_works_only_on_its_own_path(self):
        """An exec's URL under /portforward/ or /attach/ is refused 404 saying whose token it
        is, and runs the command afterwards on its own path (it ran the exec before)."""
        cid = self.running()
        url = self.url(cid, ["echo", "on its path"])
        for kind, name in (("portforward", "port-forward"), ("attach", "attach")):
            wrong = url.replace("/exec/", "/%s/" % kind)
            with self.assertRaises(ConnectionError) as e:
                streamclient.spdy_exec(wrong)
            self.assertIn("upgrade refused: 404", str(e.exception))
            self.assertIn("token is for exec, not %s" % name, str(e.exception))
        out = streamclient.spdy_exec(url)
        self.assertEqual(out["stdout"], b"on its path\n")
        self.assertEqual(self.status(out)["status"], "Success")

    def test_start_up_log_names_the_address_listened_on(self):
        """Bound to 0.0.0.0, kiyot's log says so (it said 127.0.0.1) and names the address its
        URLs carry, which an exec then uses."""
        def restore():
            self.env.extra_config = saved
            self.c = self.env.restart_kiyot()
        saved = self.env.extra_config
        self.addCleanup(restore)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        with open(self.env.kiyot_log) as f:
            f.seek(0, 2)
            start = f.tell()
        self.env.extra_config += "streamingAddress: \"0.0.0.0:%d\"\n" % port
        self.c = self.env.restart_kiyot()
        with open(self.env.kiyot_log) as f:
            f.seek(start)
            text = f.read()
        self.assertIn("streaming server on 0.0.0.0:%d, every address of the node (exec, "
                      "attach, port-forward); its URLs name 127.0.0.1:%d;" % (port, port), text)
        cid = self.running()
        url = self.url(cid, ["echo", "any"])
        self.assertTrue(url.startswith("http://127.0.0.1:%d/exec/" % port), url)
        self.assertEqual(streamclient.spdy_exec(url)["stdout"], b"any\n")

    def test_a_client_that_reads_nothing_holds_the_command_not_kiyots_memory(self):
        """More to cat than every socket on the way may hold while the client reads none of
        its output: every queue on the way is bounded, so the client's writes stall and
        kiyot's memory grows by a few MiB, not by what was sent; once the client reads, every
        byte comes back in order. (The kernel alone may buffer a TCP receive window of up to
        tcp_rmem's maximum, 32 MiB here, on each of the three connections the bytes cross;
        kiyot grew by 20 MiB once while 144 MiB went through, well under what was sent.)"""
        cid = self.running()
        s = streamclient.Spdy(self.url(cid, ["cat"], stdin=True))
        self.addCleanup(s.close)
        s.open({"streamtype": "error"})
        sin = s.open({"streamtype": "stdin"})
        out = s.open({"streamtype": "stdout"})
        s.open({"streamtype": "stderr"})
        rss = lambda: int(open("/proc/%d/status" % self.env.kiyot.pid).read()
                          .split("VmRSS:")[1].split()[0])
        with open("/proc/sys/net/ipv4/tcp_rmem") as f:
            window = int(f.read().split()[2])
        big = hashlib.shake_256(b"reads nothing").digest(max(32 << 20, 4 * window + (16 << 20)))
        sent = [0]

        def writer():
            try:
                for off in range(0, len(big), 1 << 16):
                    s.send(sin, big[off:off + (1 << 16)])
                    sent[0] = off + (1 << 16)
                s.send(sin, b"", fin=True)
            except OSError:
                pass

        before = rss()
        t = threading.Thread(target=writer, daemon=True)
        t.start()
        last, still, deadline = -1, 0, time.monotonic() + 30
        while still < 10 and time.monotonic() < deadline:
            time.sleep(0.1)
            still, last = (still + 1 if sent[0] == last else 0), sent[0]
        grown = rss() - before
        self.assertLess(sent[0], len(big), "nothing held the client back")
        # a few MiB of queues and the allocator's churn of moving this much, never what was
        # sent (the kernel holds the rest)
        self.assertLess(grown, 32 * 1024, "kiyot grew by %d KiB for a client reading nothing "
                        "(%d MiB sent)" % (grown, sent[0] >> 20))
        digest, got = hashlib.sha256(), 0
        s.sock.settimeout(30)
        while got < len(big) and s.read_frame():
            chunk, s.data[out] = s.data.get(out, b""), b""
            digest.update(chunk)
            got += len(chunk)
        t.join(30)
        self.assertEqual(got, len(big))
        self.assertEqual(digest.hexdigest(), hashlib.sha256(big).hexdigest())

    def swallow(self, fn, *a, **kw):
        try:
            fn(*a, **kw)
        except Exception:  # noqa: BLE001 - only the server's side matters here
            pass

    def test_exec_requests_are_checked(self):
        cid = self.running()
        pb = self.pb
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.c.runtime.Exec,
                                  pb.ExecRequest(container_id=cid, cmd=["sh"], tty=True,
                                                 stdout=True, stderr=True), timeout=T_CALL)
        self.assertIn("tty and stderr", details)
        self.assertCode(grpc.StatusCode.NOT_FOUND, self.c.runtime.Exec,
                        pb.ExecRequest(container_id="nope", cmd=["sh"], stdout=True),
                        timeout=T_CALL)


if __name__ == "__main__":
    unittest.main()
