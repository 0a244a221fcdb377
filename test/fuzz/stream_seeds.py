#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_spdy, fuzz_ws and fuzz_http (test/fuzz/corpus/<name>/):
conversations a kubectl-like client has with a streaming server, and broken ones. The SPDY
header blocks are compressed here with zlib and the SPDY/3 dictionary of
test/fixtures/spdy/dictionary.bin, as a real client compresses them. Run from the top of the
tree; it rewrites the files it owns and leaves others alone."""
import os
import struct
import zlib

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
DICT = open("test/fixtures/spdy/dictionary.bin", "rb").read()


def write(name, seed, data):
    os.makedirs(os.path.join(ROOT, name), exist_ok=True)
    with open(os.path.join(ROOT, name, seed), "wb") as f:
        f.write(data)


class SpdyClient:
    """Builds client frames; one compression context per connection, as SPDY/3 asks."""

    def __init__(self):
        self.z = zlib.compressobj(9, zlib.DEFLATED, 15, 9, zlib.Z_DEFAULT_STRATEGY, DICT)

    def block(self, headers):
        raw = struct.pack(">I", len(headers))
        for k, v in headers:
            raw += struct.pack(">I", len(k)) + k + struct.pack(">I", len(v)) + v
        return self.z.compress(raw) + self.z.flush(zlib.Z_SYNC_FLUSH)

    @staticmethod
    def control(ftype, flags, payload, version=3):
        return struct.pack(">HHI", 0x8000 | version, ftype, flags << 24 | len(payload)) + payload

    def syn_stream(self, sid, headers, flags=0, version=3):
        payload = struct.pack(">IIH", sid, 0, 0) + self.block(headers)
        return self.control(1, flags, payload, version)

    @staticmethod
    def data(sid, payload, flags=0):
        return struct.pack(">II", sid, flags << 24 | len(payload)) + payload

    @classmethod
    def words(cls, ftype, *w):
        return cls.control(ftype, 0, struct.pack(">%dI" % len(w), *w))


def spdy_seeds():
    c = SpdyClient()
    exec_conv = (
        c.words(4, 1, 4, 100)
        + c.syn_stream(1, [(b"streamtype", b"error")])
        + c.syn_stream(3, [(b"streamtype", b"stdin")])
        + c.syn_stream(5, [(b"streamtype", b"stdout")], flags=1)
        + c.syn_stream(7, [(b"streamtype", b"resize")])
        + c.data(3, b"ls -l\n")
        + c.data(7, b'{"Width":80,"Height":24}')
        + c.words(6, 1)
        + c.words(9, 5, 4096)
        + c.words(9, 0, 4096)
        + c.data(3, b"exit\n", flags=1)
        + c.words(3, 7, 5)
        + c.words(7, 0, 0)
    )
    for opt, name in ((0x18, "exec"), (0x00, "exec_bytewise"), (0x09, "exec_strict_by7"),
                      (0x1c, "exec_two_streams")):
        write("spdy", name, bytes([opt]) + exec_conv)
    c = SpdyClient()
    pf = (c.syn_stream(1, [(b"streamtype", b"error"), (b"port", b"8080"), (b"requestid", b"0")])
          + c.syn_stream(3, [(b"streamtype", b"data"), (b"port", b"8080"), (b"requestid", b"0")])
          + c.data(3, b"GET / HTTP/1.0\r\n\r\n" * 4) + c.data(3, b"", flags=1))
    write("spdy", "portforward", b"\x10" + pf)
    c = SpdyClient()
    write("spdy", "reply_and_headers", b"\x18" + c.control(
        2, 0, struct.pack(">I", 2) + c.block([(b"x", b"y")]))
        + c.syn_stream(1, [(b"streamtype", b"stdin")])
        + c.control(8, 0, struct.pack(">I", 1) + c.block([(b"more", b"1")]))
        + c.data(2, b"x") + c.words(6, 2) + c.words(3, 2, 5))
    c = SpdyClient()
    write("spdy", "client_side", b"\x12" + c.words(4, 0) + c.control(
        2, 0, struct.pack(">I", 1) + c.block([(b"x", b"y")]))
        + c.syn_stream(2, [(b"a", b"b")], flags=2) + c.words(6, 1))
    c = SpdyClient()
    write("spdy", "bad_header_bomb", b"\x18" + c.syn_stream(1, [(b"x", b"a" * 200000)]))
    c = SpdyClient()
    write("spdy", "bad_version", b"\x18" + c.syn_stream(1, [(b"a", b"b")], version=2))
    write("spdy", "bad_ping_length", b"\x18" + SpdyClient.words(6, 1, 2))
    write("spdy", "bad_zlib", b"\x18" + SpdyClient.control(1, 0, struct.pack(">IIH", 1, 0, 0)
                                                          + b"\xff\xfe\xfd\xfc"))
    c = SpdyClient()
    write("spdy", "bad_duplicate_id", b"\x18" + c.syn_stream(1, [(b"a", b"b")])
          + c.syn_stream(1, [(b"a", b"b")]))
    c = SpdyClient()
    write("spdy", "bad_names", b"\x18" + c.syn_stream(1, [(b"A", b"b")])
          + c.syn_stream(3, [(b"a", b"b"), (b"a", b"c")]) + c.syn_stream(5, [(b"a", b"b")]))


def ws_frame(op, payload, fin=True, mask=True):
    head = bytes([(0x80 if fin else 0) | op])
    n = len(payload)
    m = 0x80 if mask else 0
    if n <= 125:
        head += bytes([m | n])
    elif n <= 0xffff:
        head += bytes([m | 126]) + struct.pack(">H", n)
    else:
        head += bytes([m | 127]) + struct.pack(">Q", n)
    if not mask:
        return head + payload
    key = b"\x37\xfa\x21\x3d"
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def ws_seeds():
    binary = (ws_frame(2, b"\x00ls -l\n") + ws_frame(2, b'\x04{"Width":80}')
              + ws_frame(2, b"\x00hel", fin=False) + ws_frame(9, b"ping")
              + ws_frame(0, b"lo", fin=False) + ws_frame(0, b"\n") + ws_frame(2, b"")
              + ws_frame(8, b"\x03\xe8bye"))
    write("ws", "binary", b"\x0c" + binary)
    write("ws", "binary_bytewise", b"\x00" + binary)
    write("ws", "base64", b"\x0d" + ws_frame(1, b"0Zm9vCg==") + ws_frame(1, b"4")
          + ws_frame(1, b"0") + ws_frame(8, b"\x03\xe8"))
    write("ws", "v5", b"\x0e" + ws_frame(2, b"\x00data") + ws_frame(2, b"\xff\x00")
          + ws_frame(10, b"pong") + ws_frame(8, b""))
    write("ws", "bad_unmasked", b"\x0c" + ws_frame(2, b"\x01x", mask=False))
    write("ws", "bad_too_big", b"\x0c\x82\xff" + struct.pack(">Q", (16 << 20) + 1) + b"abcdxyz")
    write("ws", "bad_base64", b"\x0d" + ws_frame(1, b"0Zm9vC") + ws_frame(1, b"x"))
    write("ws", "bad_v5_close", b"\x0e" + ws_frame(2, b"\xff\x00\x01"))
    write("ws", "bad_utf8", b"\x0d" + ws_frame(1, b"0\xc3\x28"))
    write("ws", "bad_control_fragment", b"\x0c" + ws_frame(9, b"x", fin=False))


def http_seeds():
    write("http", "spdy_exec", b"POST /exec/3f2a?command=sh&input=1&tty=1 HTTP/1.1\r\n"
          b"Host: 127.0.0.1:10010\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
          b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
          b"X-Stream-Protocol-Version: v3.channel.k8s.io, channel.k8s.io\r\n\r\n\x80\x03")
    write("http", "ws_attach", b"GET /attach/3f2a HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n"
          b"Connection: keep-alive, Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
          b"Sec-WebSocket-Protocol: v5.channel.k8s.io, base64.channel.k8s.io\r\n"
          b"Sec-WebSocket-Version: 13\r\n\r\n")
    write("http", "plain_get", b"GET /portforward/3f2a HTTP/1.0\r\nA: \t b \t\r\nB:\r\n\r\n")
    write("http", "bad_folding", b"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n")
    write("http", "bad_bare_cr", b"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n")
    write("http", "bad_version", b"GET / HTTP/2.0\r\n\r\n")
    write("http", "bad_space_before_colon", b"GET / HTTP/1.1\r\nA : b\r\n\r\n")
    write("http", "incomplete", b"GET / HTTP/1.1\r\nHost: a\r\n")


if __name__ == "__main__":
    spdy_seeds()
    ws_seeds()
    http_seeds()
