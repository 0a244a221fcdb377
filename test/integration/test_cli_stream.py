"""kiyot exec, attach and port-forward: the CLI makes the CRI calls a kubelet makes (Exec,
Attach, PortForward on kiyot's socket) and opens the URLs they answer with SPDY/3.1, as kubectl
does. Pods are made through CRI here and named on the command line by their sandbox name."""

import fcntl
import hashlib
import os
import select
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
import unittest

from harness import KiyotTest, T_START, wait_for

T_CLI = 60


class CliStreamTest(KiyotTest):
    def kiyot(self, *args, stdin=None, timeout=T_CLI):
        """Runs build/kiyot against the suite's socket; returns the CompletedProcess (bytes)."""
        env = dict(os.environ, KIYOT_SOCKET=self.env.socket)
        return subprocess.run([self.env.kiyot_bin] + list(args), input=stdin,
                              capture_output=True, env=env, timeout=timeout)

    def pod(self, command, stdio=None):
        """A running busybox pod with one container "main"; returns the pod's name."""
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), name="main", command=command,
                             stdio=stdio)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return cfg.metadata.name

    def sleeper(self):
        return self.pod(["sleep", "3600"])

    # -- exec --
    def test_exec_exits_with_the_commands_code_and_keeps_stdout_and_stderr_apart(self):
        name = self.sleeper()
        p = self.kiyot("exec", name, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (7, b"out\n", b"err\n"))
        p = self.kiyot("exec", name, "-c", "main", "--", "true")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (0, b"", b""))
        # what follows "--" is the command's, -n included (not kiyot's namespace flag)
        p = self.kiyot("exec", name, "--", "echo", "-n", "no newline")
        self.assertEqual((p.returncode, p.stdout), (0, b"no newline"), p.stderr)

    # the runtime's "not found" is 127, as other runtimes report it; the CLI passes on the
    # Status's code
    def test_exec_reports_a_missing_command_as_the_runtimes_do(self):
        name = self.sleeper()
        p = self.kiyot("exec", name, "--", "/no/such/command")
        self.assertIn(p.returncode, (126, 127), p.stderr)

    def test_exec_stdin_is_piped_through_and_closed(self):
        name = self.sleeper()
        data = hashlib.shake_256(b"cli stdin").hexdigest(1 << 19).encode()  # 1 MiB of text
        p = self.kiyot("exec", "-i", name, "--", "sh", "-c", "wc -c; echo done", stdin=data)
        self.assertEqual((p.returncode, p.stdout.split()), (0, [b"%d" % len(data), b"done"]),
                         p.stderr)
        p = self.kiyot("exec", "-i", name, "--", "cat", stdin=data)
        self.assertEqual(hashlib.sha256(p.stdout).hexdigest(), hashlib.sha256(data).hexdigest())
        # without -i the command gets no stdin: it reads its end at once
        p = self.kiyot("exec", name, "--", "sh", "-c", "cat; echo eof", stdin=b"ignored\n")
        self.assertEqual((p.returncode, p.stdout), (0, b"eof\n"))

    def test_exec_with_a_terminal_runs_raw_and_follows_its_size(self):
        name = self.sleeper()
        # the first size reaches the terminal just after the command starts (kiyot's server
        # sends it after the command's first message): wait for it as test_streaming does
        pid, master = self.in_pty(["exec", "-it", name, "--", "sh", "-c",
                                   "sleep 1; stty size; tty; read x; echo got:$x; stty size; "
                                   "exit 3"])
        out = self.read_until(master, b"/dev/pts/")
        self.assertIn(b"30 100", out)
        # the new size reaches the command (SIGWINCH), then a line typed raw
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        time.sleep(1)
        os.write(master, b"hello\r")
        out = self.read_until(master, b"40 120")
        self.assertIn(b"got:hello", out)
        # raw: the remote terminal echoes the line, the local one does not echo it again
        self.assertEqual(out.count(b"hello"), 2, out)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 3)

    def in_pty(self, args, rows=30, cols=100):
        """Runs kiyot with args on a new terminal of that size (its controlling terminal);
        returns (pid, the terminal's master side)."""
        master, slave = os.openpty()
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(slave, fd)
                os.environ["KIYOT_SOCKET"] = self.env.socket
                os.execv(self.env.kiyot_bin, [self.env.kiyot_bin] + args)
            finally:
                os._exit(127)
        os.close(slave)
        self.addCleanup(os.close, master)
        self.addCleanup(self.reap, pid)
        return pid, master

    def reap(self, pid):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass

    def read_until(self, fd, want, timeout=30):
        out = b""
        deadline = time.monotonic() + timeout
        while want not in out:
            left = deadline - time.monotonic()
            self.assertGreater(left, 0, "%r never came; got %r" % (want, out))
            if select.select([fd], [], [], left)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
        return out

    # -- attach --
    def container(self, command, **stdio):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), name="main", command=command,
                             stdio=stdio)
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return cfg.metadata.name, cid

    def test_attach_joins_the_containers_stdin_and_detaching_leaves_it_running(self):
        name, cid = self.container(["cat"], stdin=True)
        env = dict(os.environ, KIYOT_SOCKET=self.env.socket)
        for word in (b"ping\n", b"pong\n"):  # the second attach reaches the same cat
            proc = subprocess.Popen([self.env.kiyot_bin, "attach", "-i", name],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=env)
            self.addCleanup(lambda p=proc: p.poll() is None and (p.kill(), p.wait()))
            proc.stdin.write(word)
            proc.stdin.flush()
            self.assertEqual(self.read_until(proc.stdout.fileno(), word), word)
            proc.stdin.close()  # the end of this client's stdin lets it go
            self.assertEqual(proc.wait(T_CLI), 0, proc.stderr.read())
        self.assertEqual(self.cstatus(cid).state, self.pb.CONTAINER_RUNNING,
                         "detaching stopped the container")

    def test_attach_to_a_terminal_until_its_shell_exits(self):
        name, cid = self.container(["sh"], stdin=True, tty=True)
        pid, master = self.in_pty(["attach", "-it", name], rows=40, cols=120)
        os.write(master, b"echo hello-$((40+2)); stty size\r")
        out = self.read_until(master, b"40 120")
        self.assertIn(b"hello-42", out)
        os.write(master, b"exit 3\r")
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, "the attach ended well")
        self.assertEqual(self.wait_state(cid, "CONTAINER_EXITED").exit_code, 3)

    def test_errors_name_what_is_wrong(self):
        p = self.kiyot("exec", "no-such-pod", "--", "true")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b'"no-such-pod" not found', p.stderr)
        name = self.sleeper()
        p = self.kiyot("exec", name, "-c", "nope", "--", "true")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"no container named nope", p.stderr)
        for args in (["exec", name], ["exec"], ["port-forward", name],
                     ["port-forward", name, "0"], ["port-forward", name, "x:80"],
                     ["attach"]):
            p = self.kiyot(*args)
            self.assertEqual(p.returncode, 2, "kiyot %s: %s" % (" ".join(args), p.stderr))
            self.assertIn(b"usage", p.stderr)

    # -- port-forward --
    def forward(self, name, *specs):
        """Starts kiyot port-forward; returns (process, [local ports]) once it forwards."""
        env = dict(os.environ, KIYOT_SOCKET=self.env.socket)
        proc = subprocess.Popen([self.env.kiyot_bin, "port-forward", name] + list(specs),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        ports = []
        for _ in specs:
            line = proc.stdout.readline().decode()
            self.assertTrue(line.startswith("Forwarding from 127.0.0.1:"),
                            "kiyot port-forward said %r; stderr %r" %
                            (line, proc.stderr.read() if proc.poll() is not None else ""))
            ports.append(int(line.split(":")[1].split()[0]))
        return proc, ports

    def exchange(self, port, payload):
        """Sends payload on a new connection, then its end; returns all that came back."""
        with socket.create_connection(("127.0.0.1", port), timeout=T_CLI) as s:
            got = []
            reader = threading.Thread(target=lambda: got.append(self.recv_all(s)))
            reader.start()
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            reader.join(T_CLI)
            return got[0] if got else None

    def recv_all(self, s):
        out = []
        while True:
            chunk = s.recv(1 << 16)
            if not chunk:
                return b"".join(out)
            out.append(chunk)

    def test_port_forward_byte_for_byte_several_connections_and_a_refused_port(self):
        name = self.pod(["sh", "-c", "nc -ll -p 9000 -e cat & nc -ll -p 9002 -e echo hi & "
                         "wait"])
        proc, (echo, greet, closed) = self.forward(name, ":9000", "0:9002", ":9001")
        self.assertEqual(len({echo, greet, closed}), 3, "each port has its own local port")
        wait_for(lambda: self.exchange(echo, b"x") == b"x", T_START, "the echo server")
        big = hashlib.shake_256(b"cli pf").digest(8 << 20)
        results = {}
        threads = [threading.Thread(target=lambda k=k, p=p, d=d: results.update(
            {k: self.exchange(p, d)})) for k, p, d in (
                ("big", echo, big), ("small", echo, b"second\n"), ("greet", greet, b""))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(T_CLI)
        self.assertEqual(hashlib.sha256(results["big"] or b"").hexdigest(),
                         hashlib.sha256(big).hexdigest())
        self.assertEqual(results["small"], b"second\n")
        self.assertEqual(results["greet"], b"hi\n")
        # a refused port: the connection ends, the reason goes to stderr
        self.assertEqual(self.exchange(closed, b""), b"")
        proc.send_signal(signal.SIGINT)
        self.assertEqual(proc.wait(T_CLI), 0)
        err = proc.stderr.read()
        self.assertIn(b"-> 9001", err)
        self.assertIn(b"an error occurred forwarding 9001", err)

    def test_port_forward_says_when_the_connection_is_lost(self):
        pod, cfg = self.run_pod()
        proc, (local,) = self.forward(cfg.metadata.name, "47311")
        self.assertEqual(local, 47311, "LOCAL defaults to REMOTE")
        self.env.kill_kiyot(signal.SIGTERM)  # its streaming server closes every session
        try:
            self.assertEqual(proc.wait(T_CLI), 1)
            self.assertIn(b"lost connection to pod", proc.stderr.read())
        finally:
            self.env.start_kiyot()
            self.c = self.env.client


if __name__ == "__main__":
    unittest.main()
