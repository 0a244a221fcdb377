"""The instance metadata service (IMDS) of the simulated instances, as EC2 serves it at
169.254.169.254: an optional second listener (--imds-listen) answering each request for the
instance whose private IP is the request's source address.

IMDSv2 as AWS documents it:
- PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds (1-21600; else 400) answers
  a session token (text/plain, the TTL echoed in the same header). The answer's IP packets
  leave with TTL = the instance's HttpPutResponseHopLimit (default 1), so a token never
  reaches a client more hops away (a container behind a NAT, a proxy).
- GET with X-aws-ec2-metadata-token: a token of this instance, unexpired, or 401. Without a
  token (IMDSv1): 401 when the instance's HttpTokens is "required" (the default here),
  served when "optional".
- A request carrying X-Forwarded-For is refused (403), as AWS refuses the token PUT of a
  reverse proxy; here every method is refused with it.
- Paths: /latest/user-data (404 without user-data), /latest/meta-data/instance-id,
  instance-type, local-ipv4, ami-id, hostname, local-hostname, mac,
  placement/availability-zone, placement/region, spot/instance-action and
  spot/termination-time (404 until an interruption is injected),
  events/recommendations/rebalance (404 until one is injected); a directory path lists its
  entries as IMDS does.

Admin (on the API port, JSON, no signature):
- POST /_admin/interrupt {"instance_id", "action": "terminate"|"stop"|"hibernate",
  "in_seconds": 120}: spot/instance-action answers {"action": A, "time": "...Z"}; with
  "terminate" the instance is also terminated at that time (state reason
  Server.SpotInstanceTermination).
- POST /_admin/rebalance {"instance_id"}: events/recommendations/rebalance answers
  {"noticeTime": "...Z"}.
"""

import http.server
import json
import secrets
import socket
import threading
import time

from .errors import Ec2Error

TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
TTL_MAX = 21600
TOKENS_MAX = 100000      # live tokens kept; past that the oldest expire first
BODY_MAX = 4096          # a PUT's body is read (and ignored) up to this
HOP_LIMIT_DEFAULT = 1
IP_TTL_DEFAULT = 64
ADMIN_PATHS = ("/_admin/interrupt", "/_admin/rebalance")
INTERRUPT_ACTIONS = ("terminate", "stop", "hibernate")
SPOT_REASON = ("Server.SpotInstanceTermination",
               "Server.SpotInstanceTermination: Spot instance termination")


def iso_z(t):
    """2026-05-01T12:00:00Z, as IMDS writes times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def launch_options(params):
    """The MetadataOptions of a RunInstances request as a dict (defaults: tokens required,
    hop limit 1, endpoint enabled); Ec2Error on a bad value, as EC2 answers."""
    tokens = params.get("MetadataOptions.HttpTokens", "required")
    if tokens not in ("required", "optional"):
        raise Ec2Error("InvalidParameterValue",
                       f"Invalid value '{tokens}' for MetadataOptions.HttpTokens: "
                       "use required or optional.")
    hop = params.get("MetadataOptions.HttpPutResponseHopLimit", str(HOP_LIMIT_DEFAULT))
    if not hop.isdigit() or not 1 <= int(hop) <= 64:
        raise Ec2Error("InvalidParameterValue",
                       f"Invalid value '{hop}' for MetadataOptions.HttpPutResponseHopLimit: "
                       "use an integer from 1 to 64.")
    endpoint = params.get("MetadataOptions.HttpEndpoint", "enabled")
    if endpoint not in ("enabled", "disabled"):
        raise Ec2Error("InvalidParameterValue",
                       f"Invalid value '{endpoint}' for MetadataOptions.HttpEndpoint: "
                       "use enabled or disabled.")
    return {"http_tokens": tokens, "hop_limit": int(hop), "http_endpoint": endpoint}


def options_of(inst):
    return getattr(inst, "metadata_options", None) or {
        "http_tokens": "required", "hop_limit": HOP_LIMIT_DEFAULT, "http_endpoint": "enabled"}


def options_xml(inst):
    """The metadataOptions element of an instance in DescribeInstances."""
    o = options_of(inst)
    return {"state": "applied", "httpTokens": o["http_tokens"],
            "httpPutResponseHopLimit": o["hop_limit"], "httpEndpoint": o["http_endpoint"]}


class Metadata:
    """Tokens, injected notices, and the admin routes; one per simulator."""

    def __init__(self, sim):
        self.sim = sim
        self._lock = threading.Lock()
        self._tokens = {}        # token -> (instance id, expiry)
        self._actions = {}       # instance id -> {"action", "time"}
        self._rebalance = {}     # instance id -> {"noticeTime"}

    # -- instances and tokens --
    def instance_at(self, ip):
        """The live instance whose private IP is ip (the latest launched), or None."""
        store = self.sim.store
        with store.lock:
            found = [i for i in store.instances.values()
                     if i.private_ip == ip and i.state not in ("terminated",)]
        return found[-1] if found else None

    def new_token(self, inst, ttl):
        now = time.monotonic()
        token = secrets.token_urlsafe(42)
        with self._lock:
            if len(self._tokens) >= TOKENS_MAX:
                for t in [t for t, (_, exp) in self._tokens.items() if exp <= now]:
                    del self._tokens[t]
                while len(self._tokens) >= TOKENS_MAX:
                    del self._tokens[next(iter(self._tokens))]
            self._tokens[token] = (inst.id, now + ttl)
        return token

    def token_ok(self, inst, token):
        with self._lock:
            got = self._tokens.get(token)
            if got is None:
                return False
            if got[1] <= time.monotonic():
                del self._tokens[token]
                return False
            return got[0] == inst.id

    def notice(self, inst, kind):
        with self._lock:
            table = self._actions if kind == "action" else self._rebalance
            return table.get(inst.id)

    # -- admin --
    def admin(self, path, body):
        """POST /_admin/interrupt or /_admin/rebalance: (HTTP status, JSON document)."""
        try:
            doc = json.loads(body or b"{}")
        except ValueError as e:
            return 400, {"error": f"body is not JSON: {e}"}
        if not isinstance(doc, dict):
            return 400, {"error": "body must be a JSON object"}
        iid = doc.get("instance_id")
        with self.sim.store.lock:
            inst = self.sim.store.instances.get(iid) if isinstance(iid, str) else None
        if inst is None:
            return 404, {"error": f"no instance {iid!r}"}
        if path.rstrip("/") == "/_admin/rebalance":
            notice = {"noticeTime": iso_z(time.time())}
            with self._lock:
                self._rebalance[inst.id] = notice
            return 200, {"ok": True, "rebalance": notice}
        action = doc.get("action", "terminate")
        if action not in INTERRUPT_ACTIONS:
            return 400, {"error": "action must be one of " + ", ".join(INTERRUPT_ACTIONS)}
        delay = doc.get("in_seconds", 120)
        if not isinstance(delay, (int, float)) or isinstance(delay, bool) or \
                not 0 <= delay <= 3600:
            return 400, {"error": "in_seconds must be a number from 0 to 3600"}
        at = time.time() + delay
        notice = {"action": action, "time": iso_z(at)}
        with self._lock:
            self._actions[inst.id] = notice
        if action == "terminate":
            timer = threading.Timer(delay, self._reclaim, (inst,))
            timer.daemon = True
            timer.start()
        return 200, {"ok": True, "instance_action": notice}

    def _reclaim(self, inst):
        """The spot interruption's time came: EC2 terminates the instance."""
        store, lifecycle = self.sim.store, self.sim.lifecycle
        with store.lock:
            if inst.state not in ("pending", "running", "stopping", "stopped"):
                return
            inst.set_state("shutting-down", SPOT_REASON)
            inst.transition_reason = "Service initiated"
        lifecycle.kill(inst, keep_state=True)
        with store.lock:
            inst.set_state("terminated", SPOT_REASON)
        self.sim.log(f"{inst.id}: terminated by a spot interruption")


_LATEST = ["dynamic", "meta-data", "user-data"]


def _meta_tree(inst, md):
    """The meta-data paths of an instance: leaves are str, directories dict."""
    ip = inst.private_ip or ""
    host = f"ip-{ip.replace('.', '-')}.ec2.internal" if ip else ""
    tree = {
        "ami-id": inst.image_id,
        "ami-launch-index": str(inst.launch_index),
        "hostname": host,
        "instance-id": inst.id,
        "instance-life-cycle": "spot" if inst.market == "spot" else "on-demand",
        "instance-type": inst.instance_type,
        "local-hostname": host,
        "local-ipv4": ip,
        "mac": _mac(inst),
        "placement": {"availability-zone": inst.az,
                      "region": md.sim.cfg.region},
        "reservation-id": inst.reservation_id,
        "security-groups": "\n".join(inst.security_groups),
    }
    action = md.notice(inst, "action")
    if action is not None:
        spot = {"instance-action": json.dumps(action)}
        if action["action"] == "terminate":
            spot["termination-time"] = action["time"].replace("Z", ".000Z")
        tree["spot"] = spot
    rebalance = md.notice(inst, "rebalance")
    if rebalance is not None:
        tree["events"] = {"recommendations": {"rebalance": json.dumps(rebalance)}}
    return tree


def _mac(inst):
    digest = inst.id[2:].ljust(10, "0")
    return "0e:" + ":".join(digest[i:i + 2] for i in range(0, 10, 2))


def _listing(tree):
    return "\n".join(k + "/" if isinstance(v, dict) else k for k, v in tree.items())


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "EC2ws"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def version_string(self):
        return self.server_version

    def _send(self, status, body="", content_type="text/plain", headers=()):
        if isinstance(body, str):
            body = body.encode()
        if status >= 400 and not body:
            reason = self.responses.get(status, ("",))[0]
            body = (f'<?xml version="1.0" encoding="iso-8859-1"?>\n<html><head>'
                    f"<title>{status} - {reason}</title></head><body><h1>{status} - "
                    f"{reason}</h1></body></html>\n").encode()
            content_type = "text/html"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _drain(self):
        length = self.headers.get("Content-Length", "0")
        if not length.isdigit() or int(length) > BODY_MAX:
            self.close_connection = True
            return False
        if int(length):
            self.rfile.read(int(length))
        return True

    def _begin(self):
        """Common checks: (instance) or None when an answer was already sent."""
        if not self._drain():
            self._send(400)
            return None
        if self.headers.get("X-Forwarded-For") is not None:
            self._send(403)
            return None
        md = self.server.metadata
        inst = md.instance_at(self.client_address[0])
        if inst is None:
            # not a case EC2 has: every address that reaches IMDS is an instance's
            self._send(403, f"ec2sim: no live instance has the private address "
                       f"{self.client_address[0]}\n")
            return None
        if options_of(inst)["http_endpoint"] == "disabled":
            self._send(403)
            return None
        return inst

    def do_PUT(self):  # noqa: N802 (the base class's name)
        inst = self._begin()
        if inst is None:
            return
        if self.path.split("?", 1)[0] != "/latest/api/token":
            self._send(405 if self._known_get(self.path) else 404)
            return
        ttl = self.headers.get(TTL_HEADER, "")
        if not ttl.isdigit() or not 1 <= int(ttl) <= TTL_MAX:
            self._send(400)
            return
        token = self.server.metadata.new_token(inst, int(ttl))
        sock = self.connection
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, options_of(inst)["hop_limit"])
        try:
            self._send(200, token, headers=[(TTL_HEADER, ttl)])
            self.wfile.flush()
        finally:
            try:
                sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, IP_TTL_DEFAULT)
            except OSError:
                pass

    @staticmethod
    def _known_get(path):
        return path.split("?", 1)[0].startswith("/latest/")

    def do_GET(self):  # noqa: N802
        inst = self._begin()
        if inst is None:
            return
        md = self.server.metadata
        token = self.headers.get(TOKEN_HEADER)
        if token is not None:
            if not md.token_ok(inst, token):
                self._send(401)
                return
        elif options_of(inst)["http_tokens"] == "required":
            self._send(401)
            return
        path = self.path.split("?", 1)[0]
        if path == "/latest/api/token":
            self._send(405, headers=[("Allow", "PUT")])
            return
        if path in ("/latest", "/latest/"):
            self._send(200, "\n".join(_LATEST))
            return
        if path == "/latest/user-data":
            if not inst.user_data:
                self._send(404)
                return
            self._send(200, inst.user_data, "application/octet-stream")
            md.sim.log(f"{inst.id}: metadata: user-data ({len(inst.user_data)} bytes) "
                       f"served to {self.client_address[0]}")
            return
        if path.startswith("/latest/meta-data"):
            node = _meta_tree(inst, md)
            for part in [p for p in path[len("/latest/meta-data"):].split("/") if p]:
                node = node.get(part) if isinstance(node, dict) else None
                if node is None:
                    self._send(404)
                    return
            if isinstance(node, dict):
                self._send(200, _listing(node))
            else:
                self._send(200, node)
            return
        self._send(404)

    def _refuse(self):
        if self._drain() and self.headers.get("X-Forwarded-For") is not None:
            self._send(403)
            return
        self._send(405, headers=[("Allow", "GET, PUT")])

    do_POST = do_DELETE = do_PATCH = _refuse  # noqa: N815


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, metadata):
        super().__init__(address, Handler)
        self.metadata = metadata


def parse_listen(text):
    """ADDR:PORT -> (addr, port); ValueError with the reason."""
    addr, sep, port = text.rpartition(":")
    if not sep or not addr or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"'{text}' is not ADDR:PORT (e.g. 169.254.169.254:80)")
    return addr, int(port)


def serve(metadata, listen):
    """Start the IMDS listener on a thread; returns the server (its address bound)."""
    server = Server(parse_listen(listen), metadata)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                     daemon=True).start()
    return server
