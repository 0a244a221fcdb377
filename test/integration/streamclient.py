"""Clients of the CRI streaming protocols, written here: SPDY/3.1 (what kubectl and the kubelet
speak, with Kubernetes' remotecommand channels as streams named by a streamType header) and
WebSocket (python3-websocket, channels as the first byte of each message).

    out = spdy_exec(url, stdin=b"hi\\n", tty=False)   -> {"stdout": b.., "stderr": b.., "error": b..}
    out = ws_exec(url, stdin=b"hi\\n")                 -> the same
    s = Session(url, "spdy", tty=True); s.write(b"ls\\n"); s.read_until(b"bin")   (interactive)
"""

import os
import socket
import struct
import time
import urllib.parse
import zlib

import websocket

HERE = os.path.dirname(os.path.abspath(__file__))
DICTIONARY = os.path.join(HERE, "..", "fixtures", "spdy", "dictionary.bin")
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY = 1, 2, 3, 4, 6, 7
FLAG_FIN = 0x01


class Spdy:
    """A client SPDY/3.1 session over an upgraded HTTP connection."""

    def __init__(self, url, protocol="v4.channel.k8s.io", timeout=30):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        path = u.path + ("?" + u.query if u.query else "")
        self.sock.sendall(("POST %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\n"
                           "Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: %s\r\n\r\n"
                           % (path, u.netloc, protocol)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed before the upgrade answer: %r" % head)
            head += chunk
        head, self.rest = head.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])
        self.head = head.decode()
        with open(DICTIONARY, "rb") as f:
            d = f.read()
        self.deflate = zlib.compressobj(zdict=d)
        self.inflate = zlib.decompressobj(zdict=d)
        self.next_id = 1
        self.data = {}
        self.fin = set()
        self.reset = set()
        self.goaway = False

    def headers_block(self, headers):
        raw = struct.pack(">I", len(headers))
        for k, v in headers.items():
            raw += struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        return self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)

    def control(self, kind, flags, payload):
        self.sock.sendall(struct.pack(">HHI", 0x8003, kind, (flags << 24) | len(payload)) +
                          payload)

    def open(self, headers):
        sid = self.next_id
        self.next_id += 2
        self.control(SYN_STREAM, 0, struct.pack(">II", sid, 0) + b"\0\0" +
                     self.headers_block(headers))
        self.data[sid] = b""
        return sid

    def send(self, sid, data, fin=False):
        self.sock.sendall(struct.pack(">II", sid, ((FLAG_FIN if fin else 0) << 24) |
                                      len(data)) + data)

    def read_frame(self):
        """Reads one frame; False at the end of the connection."""
        while len(self.rest) < 8:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.rest += chunk
        first, second = struct.unpack(">II", self.rest[:8])
        length = second & 0xffffff
        while len(self.rest) < 8 + length:
            chunk = self.sock.recv(65536)
            if not chunk:
                return False
            self.rest += chunk
        payload, self.rest = self.rest[8:8 + length], self.rest[8 + length:]
        flags = second >> 24
        if first & 0x80000000:
            kind = first & 0xffff
            if kind in (SYN_REPLY, SYN_STREAM):
                sid = struct.unpack(">I", payload[:4])[0] & 0x7fffffff
                block = payload[4:] if kind == SYN_REPLY else payload[10:]
                self.inflate.decompress(block)
                if flags & FLAG_FIN:
                    self.fin.add(sid)
            elif kind == RST_STREAM:
                self.reset.add(struct.unpack(">I", payload[:4])[0] & 0x7fffffff)
            elif kind == GOAWAY:
                self.goaway = True
        else:
            sid = first & 0x7fffffff
            self.data[sid] = self.data.get(sid, b"") + payload
            if flags & FLAG_FIN:
                self.fin.add(sid)
        return True

    def close(self):
        self.sock.close()


def spdy_exec(url, stdin=None, tty=False, resize=None, protocol="v4.channel.k8s.io"):
    s = Spdy(url, protocol)
    if s.status != 101:
        body = s.rest.decode(errors="replace")
        s.close()
        raise ConnectionError("upgrade refused: %d %s" % (s.status, body))
    ids = {"error": s.open({"streamtype": "error"})}
    if stdin is not None:
        ids["stdin"] = s.open({"streamtype": "stdin"})
    ids["stdout"] = s.open({"streamtype": "stdout"})
    if not tty:
        ids["stderr"] = s.open({"streamtype": "stderr"})
    else:
        ids["resize"] = s.open({"streamtype": "resize"})
        if resize:
            s.send(ids["resize"], b'{"Width":%d,"Height":%d}' % resize)
    if stdin is not None:
        s.send(ids["stdin"], stdin, fin=True)
    while not s.goaway and ids["error"] not in s.fin and s.read_frame():
        pass
    while s.read_frame():
        pass
    s.close()
    return {k: s.data.get(v, b"") for k, v in ids.items()}


def ws_exec(url, stdin=None, protocol="v4.channel.k8s.io", close_stdin=False):
    ws = websocket.create_connection(url.replace("http://", "ws://"), subprotocols=[protocol],
                                     timeout=30)
    out = {"stdout": b"", "stderr": b"", "error": b""}
    if stdin is not None:
        ws.send_binary(b"\0" + stdin)
        if close_stdin:
            ws.send_binary(b"\xff\0")
    names = {1: "stdout", 2: "stderr", 3: "error"}
    while True:
        try:
            op, data = ws.recv_data()
        except websocket.WebSocketConnectionClosedException:
            break
        if op == websocket.ABNF.OPCODE_CLOSE:
            break
        if data and data[0] in names:
            out[names[data[0]]] += data[1:]
    ws.close()
    return out


def spdy_port_forward(url, requests):
    """requests: [(port, payload)], all on one connection at once, as kubectl does for
    several local connections (each error stream half-closed at once, as kubectl does: it
    never writes on it). Returns [(data received, error text)] in the same order."""
    s = Spdy(url, "portforward.k8s.io")
    if s.status != 101:
        s.close()
        raise ConnectionError("upgrade refused: %d" % s.status)
    pairs = []
    for i, (port, _) in enumerate(requests):
        h = {"port": str(port), "requestid": str(i)}
        err = s.open(dict(h, streamtype="error"))
        s.send(err, b"", fin=True)
        data = s.open(dict(h, streamtype="data"))
        pairs.append((err, data))
    for (err, data), (_, payload) in zip(pairs, requests):
        for off in range(0, len(payload), 65536):
            s.send(data, payload[off:off + 65536])
        s.send(data, b"", fin=True)
    # as kubectl: a connection is over once its data stream and its error stream both ended
    # (the pod may end its output and still be reading what the client sends)
    while not all(x in s.fin or x in s.reset for pair in pairs for x in pair) and s.read_frame():
        pass
    s.close()
    return [(s.data.get(d, b""), s.data.get(e, b"").decode()) for e, d in pairs]


def ws_port_forward(url, sends, protocol="v4.channel.k8s.io", until=None, timeout=30):
    """A port-forward over WebSocket (the kubelet's v4 channels): port i of the URL (or of
    the CRI request) has channel 2i for data and 2i+1 for errors, each starting with the port
    as 2 little-endian bytes. sends[i] goes to port i in 64 KiB messages. Reads until the
    server closes, or until until(result) holds. Returns one dict per port: "port" (what its
    channels started with, data's and error's), "data" (bytes after the prefix), "error"
    (text after the prefix). protocol None sends no subprotocol (binary)."""
    import base64
    ws = websocket.create_connection(url.replace("http://", "ws://"), timeout=timeout,
                                     subprotocols=[protocol] if protocol else None)
    b64 = protocol and "base64" in protocol
    raw = {}

    def result():
        out = []
        for i in range(len(sends)):
            d, e = raw.get(2 * i, b""), raw.get(2 * i + 1, b"")
            out.append({"port": (struct.unpack("<H", d[:2])[0] if len(d) >= 2 else None,
                                 struct.unpack("<H", e[:2])[0] if len(e) >= 2 else None),
                        "data": d[2:], "error": e[2:].decode(errors="replace")})
        return out

    try:
        for i, payload in enumerate(sends):
            for off in range(0, len(payload), 65536):
                chunk = payload[off:off + 65536]
                if b64:
                    ws.send(chr(ord("0") + 2 * i) + base64.b64encode(chunk).decode())
                else:
                    ws.send_binary(bytes([2 * i]) + chunk)
        while not (until and until(result())):
            try:
                op, data = ws.recv_data()
            except websocket.WebSocketConnectionClosedException:
                break
            if op == websocket.ABNF.OPCODE_CLOSE:
                break
            if not data:
                continue
            if b64:
                ch, data = data[0] - ord("0"), base64.b64decode(data[1:])
            else:
                ch, data = data[0], data[1:]
            raw[ch] = raw.get(ch, b"") + data
    finally:
        ws.close()
    return result()


def ws_upgrade_answer(url, protocol=None, timeout=30):
    """Asks for a WebSocket upgrade by hand and returns (status, body) of the answer: for
    checking what a refusal says (python3-websocket keeps only the status)."""
    u = urllib.parse.urlparse(url)
    with socket.create_connection((u.hostname, u.port), timeout=timeout) as sock:
        sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\n"
                      "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n%s\r\n"
                      % (u.path + ("?" + u.query if u.query else ""), u.netloc,
                         "Sec-WebSocket-Protocol: %s\r\n" % protocol if protocol else ""))
                     .encode())
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
            if answer.startswith(b"HTTP/1.1 101"):
                break
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body.decode(errors="replace")


class Session:
    """An interactive remotecommand session (kubectl attach or exec -i): its channels stay
    open while the caller writes stdin, resizes and reads output, until it ends or is closed.
    Over SPDY/3.1 (kind="spdy", channels opened as kubectl opens them) or WebSocket
    (kind="ws", channels as the first byte of each message; "v5" closes stdin)."""

    def __init__(self, url, kind="spdy", stdin=True, tty=False, stderr=True,
                 protocol="v4.channel.k8s.io"):
        self.kind, self.out, self.ended = kind, {"stdout": b"", "stderr": b"", "error": b""}, False
        if kind == "spdy":
            self.s = Spdy(url, protocol)
            if self.s.status != 101:
                self.s.close()
                raise ConnectionError("upgrade refused: %d %s" % (self.s.status, self.s.rest))
            self.ids = {"error": self.s.open({"streamtype": "error"})}
            if stdin:
                self.ids["stdin"] = self.s.open({"streamtype": "stdin"})
            self.ids["stdout"] = self.s.open({"streamtype": "stdout"})
            if tty:
                self.ids["resize"] = self.s.open({"streamtype": "resize"})
            elif stderr:
                self.ids["stderr"] = self.s.open({"streamtype": "stderr"})
        else:
            self.ws = websocket.create_connection(url.replace("http://", "ws://"),
                                                  subprotocols=[protocol], timeout=30)

    def write(self, data):
        if self.kind == "spdy":
            self.s.send(self.ids["stdin"], data)
        else:
            self.ws.send_binary(b"\0" + data)

    def close_stdin(self):
        if self.kind == "spdy":
            self.s.send(self.ids["stdin"], b"", fin=True)
        else:
            self.ws.send_binary(b"\xff\0")

    def resize(self, width, height):
        size = b'{"Width":%d,"Height":%d}' % (width, height)
        if self.kind == "spdy":
            self.s.send(self.ids["resize"], size)
        else:
            self.ws.send_binary(b"\x04" + size)

    def _read(self, timeout):
        """Reads what comes within timeout; False once the session ended."""
        if self.kind == "spdy":
            self.s.sock.settimeout(timeout)
            try:
                if not self.s.read_frame():
                    return False
            except socket.timeout:
                return True
            for name, sid in self.ids.items():
                if name in self.out:
                    self.out[name] = self.s.data.get(sid, b"")
            return not (self.s.goaway or self.ids["error"] in self.s.fin)
        self.ws.settimeout(timeout)
        try:
            op, data = self.ws.recv_data()
        except websocket.WebSocketTimeoutException:
            return True
        except websocket.WebSocketConnectionClosedException:
            return False
        if op == websocket.ABNF.OPCODE_CLOSE:
            return False
        names = {1: "stdout", 2: "stderr", 3: "error"}
        if data and data[0] in names:
            self.out[names[data[0]]] += data[1:]
        return True

    def read_until(self, what, timeout=30, stream="stdout"):
        """Reads until `what` (bytes) is in the stream's output; returns that output."""
        deadline = time.monotonic() + timeout
        while what not in self.out[stream]:
            left = deadline - time.monotonic()
            if left <= 0 or self.ended:
                raise AssertionError("%r not in %s within %ds: %r" % (
                    what, stream, timeout, self.out[stream][-500:]))
            self.ended = not self._read(min(left, 1.0))
        return self.out[stream]

    def quiet_for(self, seconds):
        """Reads for `seconds`; returns what arrived on stdout meanwhile."""
        before = len(self.out["stdout"])
        deadline = time.monotonic() + seconds
        while not self.ended and time.monotonic() < deadline:
            self.ended = not self._read(max(0.05, min(deadline - time.monotonic(), 0.5)))
        return self.out["stdout"][before:]

    def wait_end(self, timeout=30):
        """Reads until the session ends; returns the error channel's text."""
        deadline = time.monotonic() + timeout
        while not self.ended:
            if time.monotonic() > deadline:
                raise AssertionError("the session did not end within %ds" % timeout)
            self.ended = not self._read(1.0)
        return self.out["error"].decode()

    def close(self):
        if self.kind == "spdy":
            self.s.close()
        else:
            self.ws.close()
