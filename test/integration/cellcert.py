"""Certificates for driving a cell's agent as kiyot does: kiyot's CA lives in kiyot.db, and
the agent takes calls over TLS from a client certificate of that CA named "kiyot" only. Made
here with python3-cryptography, independently of kiyot's own code (common/pki.c)."""

import datetime
import json
import os
import socket
import sqlite3
import ssl
import struct
import tempfile

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

AGENT_PORT = 7443
FEED_PORT = AGENT_PORT + 1
FEED_ALPN = "kiyot-feed/1"


def kiyot_ca(state_dir):
    """kiyot's CA (certificate, key) as PEM bytes, read from kiyot.db."""
    db = sqlite3.connect(os.path.join(state_dir, "kiyot.db"))
    try:
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN "
                               "('cell_ca_cert', 'cell_ca_key')").fetchall())
    finally:
        db.close()
    return rows["cell_ca_cert"].encode(), rows["cell_ca_key"].encode()


def make_ca(name="kiyot-cells"):
    """A CA of its own (certificate, key) as PEM bytes: one no cell trusts."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


def _certify(ca_pem, ca_key_pem, public_key, name, server):
    """The certificate the CA issues public_key for name (server or client use), as PEM."""
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, None)
    now = datetime.datetime.now(datetime.timezone.utc)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def issue(ca_pem, ca_key_pem, name, server=False):
    """A new key and the certificate the CA issues it for name: (key, cert) as PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()),
            _certify(ca_pem, ca_key_pem, key.public_key(), name, server))


def sign_csr(ca_pem, ca_key_pem, csr_pem, name):
    """The server certificate the CA issues for a cell's request, as kiyot does."""
    return _certify(ca_pem, ca_key_pem, x509.load_pem_x509_csr(csr_pem).public_key(), name,
                    True)


def cell_id_of(state_dir, pod):
    """The cell id of a local pod's cell, from its bootstrap document."""
    return bootstrap_of(state_dir, pod)["cell_id"]


def tls_channel(ip, cell_id, roots, key=None, cert=None, port=AGENT_PORT):
    """A TLS channel to the agent at ip that takes only a certificate of roots naming cell_id,
    presenting key/cert when given."""
    creds = grpc.ssl_channel_credentials(root_certificates=roots, private_key=key,
                                         certificate_chain=cert)
    return grpc.secure_channel("%s:%d" % (ip, port), creds,
                               options=[("grpc.ssl_target_name_override", cell_id)])


def kiyot_channel(state_dir, ip, cell_id, name="kiyot"):
    """A channel to a cell's agent with a client certificate of kiyot's CA named name (as
    kiyot's own, for "kiyot")."""
    ca, ca_key = kiyot_ca(state_dir)
    key, cert = issue(ca, ca_key, name)
    return tls_channel(ip, cell_id, ca, key, cert)


def bootstrap_of(state_dir, pod):
    """A local pod's cell's bootstrap document (what user-data holds on EC2)."""
    with open(os.path.join(state_dir, "cells", pod[:20], "bootstrap.json")) as f:
        return json.load(f)



def _pem_file(d, name, data):
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def feed_open(ip, cell_id, roots, key=None, cert=None, alpn=(FEED_ALPN,), timeout=10):
    """A TLS connection to the agent's cell feed with Python's ssl module (OpenSSL underneath,
    none of kiyot's code): it takes only a server certificate of roots naming cell_id and
    presents key/cert when given. Raises what the handshake raises."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(cadata=roots.decode())
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    if key:
        with tempfile.TemporaryDirectory() as d:
            ctx.load_cert_chain(_pem_file(d, "cert.pem", cert), _pem_file(d, "key.pem", key))
    raw = socket.create_connection((ip, FEED_PORT), timeout=timeout)
    try:
        return ctx.wrap_socket(raw, server_hostname=cell_id)
    except Exception:
        raw.close()
        raise


def feed_send(conn, msg):
    """One frame: the message's length as 4 bytes big-endian, then the message."""
    data = msg.SerializeToString()
    conn.sendall(struct.pack(">I", len(data)) + data)


def feed_read(conn, cls, limit=1 << 20):
    """The next frame's message of class cls; None at the end of the feed."""
    head = _read_exactly(conn, 4)
    if head is None:
        return None
    n = struct.unpack(">I", head)[0]
    if n > limit:
        raise ValueError("a frame of %d bytes" % n)
    body = _read_exactly(conn, n)
    if body is None:
        raise ValueError("the feed ended inside a frame")
    m = cls()
    m.ParseFromString(body)
    return m


def _read_exactly(conn, n):
    out = b""
    while len(out) < n:
        got = conn.recv(n - len(out))
        if not got:
            return None if not out else out
        out += got
    return out
