"""The channel between kiyot and its cells' agents is TLS both ways. An agent takes calls only
from a client certificate of kiyot's CA named "kiyot" (other cells, and their pods, share its
network); kiyot takes only an agent whose certificate of its CA names the cell it means. A cell
gets its certificate by enrolling once with the one-time secret of its bootstrap document,
which kiyot then forgets, so the document (on EC2, user-data a pod can read from the instance
metadata service) holds nothing that still works."""

import os
import signal
import sqlite3
import ssl
import unittest

import grpc

import cellcert
import cri
from harness import Footprint, KiyotTest, T_CALL, find_agent_pid, kill_pid, pid_alive, wait_for

METHODS = ("Hello", "Stats", "ExecSync", "Apply")


class CellTlsTest(KiyotTest):
    def setUp(self):
        super().setUp()
        self.ap = cri.load_proto("cellagent")

    def running_pod(self):
        """A pod with a running container: (pod id, container id, pod ip, cell id)."""
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return pod, cid, self.pod_ip(pod), cellcert.cell_id_of(self.env.state_dir, pod)

    @staticmethod
    def call(ch, method, req=b""):
        """A unary call with a raw request on ch; its status code."""
        fn = ch.unary_unary("/kiyot.cell.v1.CellAgent/" + method)
        try:
            fn(req, timeout=T_CALL)
            return grpc.StatusCode.OK
        except grpc.RpcError as e:
            return e.code()
        finally:
            ch.close()

    def exec_true(self, cid):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid, cmd=["true"],
                                                            timeout=10), timeout=T_CALL)
        self.assertEqual(r.exit_code, 0)

    def cell_dir(self, pod):
        return os.path.join(self.env.state_dir, "cells", pod[:20])

    def test_agent_takes_calls_from_kiyots_certificate_only(self):
        _, cid, ip, cell = self.running_pod()
        sd = self.env.state_dir
        ca, ca_key = cellcert.kiyot_ca(sd)
        other_ca, other_key = cellcert.make_ca()
        for method in METHODS:
            # a neighbour in clear, as kiyot's channel was before
            self.assertEqual(self.call(grpc.insecure_channel("%s:7443" % ip), method),
                             grpc.StatusCode.UNAVAILABLE, method)
            # a certificate named "kiyot", of another CA
            key, cert = cellcert.issue(other_ca, other_key, "kiyot")
            self.assertEqual(self.call(cellcert.tls_channel(ip, cell, ca, key, cert), method),
                             grpc.StatusCode.UNAVAILABLE, method)
            # kiyot's CA, but another name (another cell's, or anything but kiyot)
            for name in (cell, "kiyot2", "kiyot.evil"):
                ch = cellcert.kiyot_channel(sd, ip, cell, name=name)
                self.assertEqual(self.call(ch, method), grpc.StatusCode.UNAUTHENTICATED,
                                 "%s as %s" % (method, name))
            # no client certificate at all
            self.assertEqual(self.call(cellcert.tls_channel(ip, cell, ca), method),
                             grpc.StatusCode.UNAVAILABLE, method)
        # kiyot's certificate is taken
        self.assertEqual(self.call(cellcert.kiyot_channel(sd, ip, cell), "Hello"),
                         grpc.StatusCode.OK)
        # a client of kiyot's checks the agent: a certificate of another CA, or for another
        # cell than the one meant (kiyot pointed at the wrong cell's address), is refused
        key, cert = cellcert.issue(ca, ca_key, "kiyot")
        self.assertEqual(self.call(cellcert.tls_channel(ip, cell, other_ca, key, cert),
                                   "Hello"), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.call(cellcert.tls_channel(ip, "another-cell", ca, key, cert),
                                   "Hello"), grpc.StatusCode.UNAVAILABLE)
        # and kiyot still drives the cell
        self.exec_true(cid)

    def feed_refused(self, ip, cell, roots, key=None, cert=None, alpn=(cellcert.FEED_ALPN,)):
        """Whether the agent's feed gives this client nothing: the handshake fails, or (TLS
        1.3 checks the client's certificate after the client's side is done) the first read
        ends or fails before any event."""
        try:
            conn = cellcert.feed_open(ip, cell, roots, key, cert, alpn)
        except (ssl.SSLError, OSError):
            return True
        try:
            cellcert.feed_send(conn, self.ap.WatchRequest())
            return cellcert.feed_read(conn, self.ap.WatchEvent) is None
        except (ssl.SSLError, OSError):
            return True
        finally:
            conn.close()

    def test_cell_feed_serves_kiyots_certificate_only(self):
        """The cell feed (the port after the agent's gRPC one) speaks TLS with the channel's
        certificates: a client of Python's own TLS with kiyot's certificate gets the cell's
        unit statuses, SYNCED and its usage in length-prefixed frames; nobody else gets a
        byte, and the client takes only the cell it means."""
        _, cid, ip, cell = self.running_pod()
        sd = self.env.state_dir
        ca, ca_key = cellcert.kiyot_ca(sd)
        other_ca, other_key = cellcert.make_ca()
        key, cert = cellcert.issue(ca, ca_key, "kiyot")
        conn = cellcert.feed_open(ip, cell, ca, key, cert)
        self.assertEqual(conn.selected_alpn_protocol(), cellcert.FEED_ALPN)
        cellcert.feed_send(conn, self.ap.WatchRequest(stats_interval_ms=200))
        kinds, running, usage = [], False, None
        while usage is None:
            ev = cellcert.feed_read(conn, self.ap.WatchEvent)
            self.assertIsNotNone(ev, "the feed ended after %s" % kinds)
            kinds.append(ev.kind)
            if ev.kind == self.ap.WatchEvent.STATUS and ev.status.id == cid:
                running = ev.status.state == self.ap.UNIT_RUNNING
            if ev.kind == self.ap.WatchEvent.STATS:
                usage = ev.stats
        conn.close()
        self.assertTrue(running, "no RUNNING status of %s before %s" % (cid, kinds))
        self.assertLess(kinds.index(self.ap.WatchEvent.SYNCED),
                        kinds.index(self.ap.WatchEvent.STATS))
        self.assertIn(cid, [u.unit_id for u in usage.units])
        self.assertGreater(usage.cell.memory_working_set_bytes, 0)

        # nobody else: another CA's "kiyot", kiyot's CA but another name, no certificate
        okey, ocert = cellcert.issue(other_ca, other_key, "kiyot")
        self.assertTrue(self.feed_refused(ip, cell, ca, okey, ocert))
        for name in (cell, "kiyot2"):
            nkey, ncert = cellcert.issue(ca, ca_key, name)
            self.assertTrue(self.feed_refused(ip, cell, ca, nkey, ncert), name)
        self.assertTrue(self.feed_refused(ip, cell, ca))
        # another protocol (a gRPC client offers h2), or none
        self.assertTrue(self.feed_refused(ip, cell, ca, key, cert, alpn=("h2",)))
        self.assertTrue(self.feed_refused(ip, cell, ca, key, cert, alpn=()))
        # the client's side: another cell's name, another CA
        with self.assertRaises(ssl.SSLCertVerificationError):
            cellcert.feed_open(ip, "another-cell", ca, key, cert)
        with self.assertRaises(ssl.SSLCertVerificationError):
            cellcert.feed_open(ip, cell, other_ca, key, cert)
        # kiyot's own feed of the cell still works: its logs and stats come on it
        self.exec_true(cid)
        r = self.c.runtime.ContainerStats(self.pb.ContainerStatsRequest(container_id=cid),
                                          timeout=T_CALL)
        self.assertEqual(r.stats.attributes.id, cid)

    def test_new_cells_enroll_without_a_failed_handshake(self):
        # a TLS Hello to an agent still serving plaintext (before it enrolled, or in the
        # moment it switches) fails its handshake, which gRPC logs as a warning: kiyot
        # enrolls first and waits for the agent's TLS side before its Hello
        with open(self.env.kiyot_log, "rb") as f:
            f.seek(0, os.SEEK_END)
            start = f.tell()
        for _ in range(3):
            pod, _ = self.run_pod()
            self.assertTrue(cellcert.cell_id_of(self.env.state_dir, pod))
        with open(self.env.kiyot_log, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        self.assertNotIn("Handshake failed", text)
        self.assertNotIn("wrong version number", text)

    def test_bootstrap_secret_is_refused_after_enrollment(self):
        pod, cid, ip, cell = self.running_pod()
        # what a pod could read of its cell's bootstrap (EC2 user-data): the CA; the agent
        # took the one-time secret out of the file once it enrolled
        boot = cellcert.bootstrap_of(self.env.state_dir, pod)
        self.assertNotIn("token", boot)
        self.assertIn("BEGIN CERTIFICATE", boot["ca"])
        self.assertNotIn("enroll_secret", boot)
        self.assertEqual(boot["cell_id"], cell)
        # kiyot forgot the secret once the cell enrolled
        db = sqlite3.connect(os.path.join(self.env.state_dir, "kiyot.db"))
        row = db.execute("SELECT value FROM meta WHERE key = ?",
                         ("enroll_secret/" + cell,)).fetchone()
        db.close()
        self.assertIn(row, (None, ("",)))
        # the agent enrolls no more: not in clear, not even over kiyot's channel
        req = self.ap.EnrollRequest().SerializeToString()
        self.assertEqual(self.call(grpc.insecure_channel("%s:7443" % ip), "Enroll", req),
                         grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(self.call(cellcert.kiyot_channel(self.env.state_dir, ip, cell),
                                   "Enroll", req), grpc.StatusCode.FAILED_PRECONDITION)
        # a certificate for the cell that a holder of the secret made under another CA
        other_ca, other_key = cellcert.make_ca()
        _, cert = cellcert.issue(other_ca, other_key, cell, server=True)
        req = self.ap.EnrollRequest(certificate=cert.decode()).SerializeToString()
        self.assertEqual(self.call(cellcert.kiyot_channel(self.env.state_dir, ip, cell),
                                   "Enroll", req), grpc.StatusCode.FAILED_PRECONDITION)
        self.exec_true(cid)

    def test_agent_killed_serves_tls_again_with_its_certificate(self):
        pod, cid, ip, cell = self.running_pod()
        tls_dir = os.path.join(self.cell_dir(pod), "agent", "tls")
        with open(os.path.join(tls_dir, "cert.pem")) as f:
            cert = f.read()
        for name in ("key.pem", "cert.pem"):
            self.assertEqual(os.stat(os.path.join(tls_dir, name)).st_mode & 0o777, 0o600, name)
        netns = Footprint(ip).netns
        agent = find_agent_pid(netns)
        self.assertIsNotNone(agent, "no cell-agent in " + str(netns))
        kill_pid(agent, signal.SIGKILL)
        wait_for(lambda: not pid_alive(agent), 10, "the agent to die")
        wait_for(lambda: find_agent_pid(netns) not in (None, agent), 60,
                 "kiyot to start the cell's agent again")

        def serves_tls():
            return self.call(cellcert.kiyot_channel(self.env.state_dir, ip, cell),
                             "Hello") == grpc.StatusCode.OK
        wait_for(serves_tls, 30, "the restarted agent to serve TLS")
        # with the certificate it had: it did not enroll again
        with open(os.path.join(tls_dir, "cert.pem")) as f:
            self.assertEqual(f.read(), cert)
        self.assertEqual(self.call(grpc.insecure_channel("%s:7443" % ip), "Hello"),
                         grpc.StatusCode.UNAVAILABLE)
        wait_for(lambda: self.exec_ok(cid), 30, "kiyot to drive the cell again")

    def exec_ok(self, cid):
        try:
            self.exec_true(cid)
            return True
        except grpc.RpcError:
            return False

    def test_kiyot_restarted_reconnects_over_tls(self):
        pod, cid, ip, cell = self.running_pod()
        self.c = self.env.restart_kiyot()
        # a new client certificate at each start, of the same CA: the cell takes it
        self.exec_true(cid)
        self.assertEqual(self.call(grpc.insecure_channel("%s:7443" % ip), "Hello"),
                         grpc.StatusCode.UNAVAILABLE)
        # a new cell after the restart enrolls with the CA kept in kiyot.db
        _, cid2, _, _ = self.running_pod()
        self.exec_true(cid2)


if __name__ == "__main__":
    unittest.main()
