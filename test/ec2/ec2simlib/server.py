"""The HTTP side: one handler serving the EC2 Query API on "/" and the admin API on
/_admin/, and the Sim object tying state, checks and counters together."""

import datetime
import http.server
import json
import sys
import threading
import urllib.parse
import uuid

from . import API_VERSION, actions, admin, imds, pricing, xmlout
from .catalog import Catalog
from .cells import CellCommands
from .errors import Ec2Error
from .faults import Faults, Rule
from .lifecycle import IpPool, Lifecycle
from .params import Model, decode
from .sigv4 import Verifier
from .state import Store
from .throttle import Throttler

BODY_MAX = 1 << 20


class Stats:
    """Calls per action and outcomes, for GET /_admin/stats."""

    def __init__(self):
        self._lock = threading.Lock()
        self.calls, self.ok, self.errors = {}, {}, {}

    def reset(self):
        with self._lock:
            self.calls = {}
            self.ok = {}
            self.errors = {}

    def record(self, action, code):
        with self._lock:
            self.calls[action] = self.calls.get(action, 0) + 1
            if code is None:
                self.ok[action] = self.ok.get(action, 0) + 1
            else:
                per = self.errors.setdefault(action, {})
                per[code] = per.get(code, 0) + 1

    def snapshot(self):
        with self._lock:
            return {"calls": dict(self.calls), "ok": dict(self.ok),
                    "errors": {a: dict(c) for a, c in self.errors.items()},
                    "total": sum(self.calls.values())}


class Sim:
    """Everything one simulated EC2 region holds."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.catalog = Catalog(cfg.catalog, cfg.region)
        self.model = Model()
        self.verifier = Verifier(cfg.keys, cfg.region, cfg.max_skew)
        self.store = Store(cfg.terminated_ttl)
        self.store.consistency_delay = cfg.consistency_delay
        self.throttler = Throttler(cfg.bucket_mutating, cfg.bucket_describe)
        self.faults = Faults()
        self.stats = Stats()
        self.imds = imds.Metadata(self)
        self.pricing = pricing.PriceList(self)
        cells = None
        if cfg.boot_cmd:
            cells = CellCommands(cfg.boot_cmd, cfg.terminate_cmd, cfg.work_dir,
                                 cfg.boot_timeout, self.log)
        self.lifecycle = Lifecycle(self.store, self.catalog, cells, IpPool(cfg.ip_cidr), cfg,
                                   self.log)
        self._startup_faults(cfg)

    def _startup_faults(self, cfg):
        """Fault rules from --ice and --fault."""
        known = self.model.operation_names() | {"GetProducts"}  # and the Price List's
        for spec in cfg.ice + cfg.fault:
            count = spec.rsplit(":", 1)[-1] if spec.count(":") >= (2 if spec in cfg.fault
                                                                  else 1) else ""
            if count and not count.isdigit():
                raise SystemExit(f"ec2sim: '{spec}': the count after the last ':' must be a "
                                 "positive integer")
        for spec in cfg.ice:
            itype, _, n = spec.partition(":")
            self.faults.add(Rule("RunInstances", "InsufficientInstanceCapacity", itype,
                                 times=int(n) if n else None))
        for spec in cfg.fault:
            action, _, rest = spec.partition(":")
            code, _, n = rest.partition(":")
            if action != "*" and action not in known:
                raise SystemExit(f"ec2sim: --fault: {action} is not an EC2 action")
            self.faults.add(Rule(action, code, times=int(n) if n else None))
        if cfg.throttle_for > 0:
            self.throttler.force(seconds=cfg.throttle_for)

    def log(self, message):
        print(f"ec2sim: {message}", file=sys.stderr, flush=True)

    def call(self, method, host_url, path, headers, body, query):
        """Serve one API request: (HTTP status, XML body)."""
        request_id = str(uuid.uuid4())
        action = "?"
        try:
            params = decode(body if method == "POST" else b"", query)
            action = params.get("Action", "?")
            self.verifier.verify(method, host_url, path, headers, body,
                                 datetime.datetime.utcnow())
            if action == "?" or not action:
                raise Ec2Error("MissingAction", "The request must contain the parameter Action")
            if action not in actions.ACTIONS:
                raise Ec2Error("InvalidAction",
                               f"The action {action} is not valid for this web service "
                               "(ec2sim serves " + ", ".join(sorted(actions.ACTIONS)) + ").")
            version = params.get("Version")
            if not version:
                raise Ec2Error("MissingParameter",
                               "The request must contain the parameter Version")
            if version != API_VERSION:
                raise Ec2Error("NoSuchVersion",
                               f"The requested version ({version}) of service AmazonEC2 is "
                               f"not served here; use {API_VERSION}.")
            if not self.throttler.admit(action):
                raise Ec2Error("RequestLimitExceeded", "Request limit exceeded.")
            self.model.check(action, params)
            if action != "RunInstances":
                self.faults.check(action)
            body_out = actions.ACTIONS[action](self, params)
            self.stats.record(action, None)
            if self.cfg.verbose:
                self.log(f"{action} ok")
            return 200, xmlout.response(action, body_out, request_id), request_id
        except Ec2Error as e:
            self.stats.record(action, e.code)
            if self.cfg.verbose:
                self.log(f"{action} {e.status} {e.code}: {e.message}")
            return e.status, xmlout.error(e.code, e.message, request_id), request_id


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AmazonEC2"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass

    def _send(self, status, body, content_type, request_id=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if request_id:
            self.send_header("x-amzn-RequestId", request_id)
        self.end_headers()
        self.wfile.write(body)

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            n = -1
        if n < 0 or n > BODY_MAX:
            raise ValueError(f"Content-Length {length} is not within 0..{BODY_MAX}")
        return self.rfile.read(n)

    def _serve(self, method):
        sim = self.server.sim
        try:
            body = self._read_body()
        except ValueError as e:
            self.close_connection = True
            status, out = 400, xmlout.error("InvalidParameterValue", str(e), "0")
            self._send(status, out, "text/xml;charset=UTF-8")
            return
        split = urllib.parse.urlsplit(self.path)
        if split.path.startswith("/_admin/"):
            if method == "POST" and split.path.rstrip("/") in imds.ADMIN_PATHS:
                status, doc = sim.imds.admin(split.path, body)
            else:
                status, doc = admin.handle(sim, method, split.path, body)
            self._send(status, (json.dumps(doc, indent=1) + "\n").encode(), "application/json")
            return
        host = self.headers.get("Host", "")
        if method == "POST" and self.headers.get("X-Amz-Target", "").startswith(
                pricing.TARGET_PREFIX):
            status, out, request_id = sim.pricing.call("http://" + host, self.path,
                                                       list(self.headers.items()), body)
            self._send(status, out, pricing.CONTENT_TYPE, request_id)
            return
        status, out, request_id = sim.call(method, "http://" + host, self.path,
                                           list(self.headers.items()), body, split.query)
        self._send(status, out, "text/xml;charset=UTF-8", request_id)

    def do_POST(self):  # noqa: N802 (the base class's name)
        self._serve("POST")

    def do_GET(self):  # noqa: N802
        self._serve("GET")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, sim):
        super().__init__(address, Handler)
        self.sim = sim
