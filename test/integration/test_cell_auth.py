"""A cell's agent takes calls from its own kiyot only: other cells share its network (the
bridge here, a VPC subnet on EC2). The bearer token every call carried in clear is gone: a new
cell enrolls once, over plaintext, proving with the one-time secret of its bootstrap document
that it booted from it, and gets a certificate of kiyot's CA for its own key; then it serves
over TLS only. Here an independent "kiyot" (python's hmac and cryptography) enrolls a cell
booted by hand, the way EC2 boots an instance from its user-data."""

import hashlib
import hmac
import json
import os
import signal
import sqlite3
import subprocess
import unittest

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

import cellcert
import cri
from harness import BRIDGE, CIDR, KiyotTest, T_CALL, unique, wait_for

SECRET = "5ec7e7" * 10 + "abcd"


class CellAuthTest(KiyotTest):
    def setUp(self):
        super().setUp()
        self.ap = cri.load_proto("cellagent")

    def enroll(self, ip, cert=""):
        """One Enroll call in clear: (status code, response or None)."""
        with grpc.insecure_channel("%s:7443" % ip) as ch:
            fn = ch.unary_unary("/kiyot.cell.v1.CellAgent/Enroll",
                                request_serializer=self.ap.EnrollRequest.SerializeToString,
                                response_deserializer=self.ap.EnrollResponse.FromString)
            try:
                return grpc.StatusCode.OK, fn(self.ap.EnrollRequest(certificate=cert),
                                              timeout=T_CALL)
            except grpc.RpcError as e:
                return e.code(), None

    def launch_cell(self, ca):
        """Boots a cell by hand from a bootstrap document with ca and SECRET (kiyot stopped,
        so the two never lease the same address); returns (cell id, ip)."""
        self.env.kill_kiyot(signal.SIGTERM)
        self.addCleanup(self.env.ensure)
        db = sqlite3.connect(os.path.join(self.env.state_dir, "kiyot.db"))
        cluster = db.execute("SELECT value FROM meta WHERE key = 'cluster_id'").fetchone()[0]
        db.close()
        cell = unique("enroll")
        cells = os.path.join(self.env.state_dir, "cells")
        boot = os.path.join(self.env.work, cell + ".json")
        with open(boot, "w") as f:
            json.dump({"version": 1, "cell_id": cell, "cluster_id": cluster,
                       "pod": {"uid": "u", "name": "by-hand", "namespace": "default"},
                       "ca": ca.decode(), "enroll_secret": SECRET,
                       "state_dir": os.path.join(cells, cell, "agent")}, f)
        out = subprocess.run(
            [self.env.kiyot_bin, "local-cell", "launch", "--state-dir", cells, "--id", cell,
             "--bootstrap", boot, "--bridge", BRIDGE, "--cidr", CIDR, "--cluster-id", cluster,
             "--agent", self.env.agent_bin],
            capture_output=True, text=True, check=True).stdout
        self.addCleanup(subprocess.run, [self.env.kiyot_bin, "local-cell", "terminate",
                                         "--state-dir", cells, "--id", cell, "--bridge",
                                         BRIDGE, "--cidr", CIDR], capture_output=True)
        return cell, json.loads(out)["ip"]

    def test_new_cell_enrolls_once_with_its_secret_then_serves_tls_only(self):
        ca, ca_key = cellcert.make_ca()
        cell, ip = self.launch_cell(ca)
        wait_for(lambda: self.enroll(ip)[0] == grpc.StatusCode.OK, 30,
                 "the new cell to serve Enroll")
        # its API is not served in clear, not even before it has a certificate
        with grpc.insecure_channel("%s:7443" % ip) as ch:
            with self.assertRaises(grpc.RpcError) as cm:
                ch.unary_unary("/kiyot.cell.v1.CellAgent/Hello")(b"", timeout=T_CALL)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        st, r = self.enroll(ip)
        self.assertEqual(r.cell_id, cell)
        csr = x509.load_pem_x509_csr(r.csr.encode())
        self.assertTrue(csr.is_signature_valid)
        self.assertEqual(csr.subject.rfc4514_string(), "CN=" + cell)
        spki = csr.public_key().public_bytes(serialization.Encoding.DER,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)
        msg = b"kiyot-enroll\0" + cell.encode() + b"\0" + \
            hashlib.sha256(spki).hexdigest().encode()
        self.assertEqual(r.proof, hmac.new(SECRET.encode(), msg, hashlib.sha256).hexdigest())
        # a certificate of another CA for the cell is refused; the cell stays new
        other_ca, other_key = cellcert.make_ca()
        _, bad = cellcert.issue(other_ca, other_key, cell, server=True)
        st, _ = self.enroll(ip, bad.decode())
        self.assertNotEqual(st, grpc.StatusCode.OK)
        self.assertEqual(self.enroll(ip)[0], grpc.StatusCode.OK)
        # a certificate of its CA, for its own key: taken
        cert = cellcert.sign_csr(ca, ca_key, r.csr.encode(), cell)
        st, done = self.enroll(ip, cert.decode())
        self.assertEqual(st, grpc.StatusCode.OK)
        self.assertTrue(done.enrolled)
        # from now on TLS only, to the CA's "kiyot"; the secret enrolls nothing
        key, kcert = cellcert.issue(ca, ca_key, "kiyot")

        def hello():
            with cellcert.tls_channel(ip, cell, ca, key, kcert) as ch:
                try:
                    ch.unary_unary("/kiyot.cell.v1.CellAgent/Hello")(b"", timeout=T_CALL)
                    return True
                except grpc.RpcError:
                    return False
        wait_for(hello, 10, "the enrolled cell to serve TLS")
        self.assertEqual(self.enroll(ip)[0], grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
