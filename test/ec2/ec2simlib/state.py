"""The simulated account: instances, reservations, client tokens, and describe filters."""

import re
import secrets
import threading
import time

from .errors import Ec2Error

STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48,
               "stopping": 64, "stopped": 80}
INSTANCE_ID_RE = re.compile(r"^i-([0-9a-f]{8}|[0-9a-f]{17})$")
OWNER_ID = "123456789012"


def new_id(prefix):
    return f"{prefix}-{secrets.token_hex(9)[:17]}"


class Instance:
    """One simulated instance; fields mirror what DescribeInstances reports."""

    def __init__(self, **kw):
        self.id = kw["id"]
        self.reservation_id = kw["reservation_id"]
        self.instance_type = kw["instance_type"]
        self.image_id = kw.get("image_id", "ami-00000000000000000")
        self.state = kw.get("state", "pending")
        self.state_reason = None                 # (code, message)
        self.transition_reason = ""
        self.launch_time = kw.get("launch_time", time.time())
        self.launch_index = kw.get("launch_index", 0)
        self.private_ip = kw.get("private_ip")
        self.subnet_id = kw.get("subnet_id")
        self.vpc_id = kw.get("vpc_id")
        self.az = kw["az"]
        self.security_groups = list(kw.get("security_groups", []))
        self.key_name = kw.get("key_name")
        self.iam_profile = kw.get("iam_profile")
        self.client_token = kw.get("client_token", "")
        self.tags = dict(kw.get("tags", {}))
        self.user_data = kw.get("user_data", b"")
        self.market = kw.get("market")          # "spot" or None
        self.spot_request_id = kw.get("spot_request_id")
        self.architecture = kw.get("architecture", "x86_64")
        self.foreign = kw.get("foreign", False)
        self.cell_id = None                      # set when a cell booted
        self.cell_booted = False
        self.booting = False
        self.terminated_at = None
        # launched by RunInstances: subject to the store's consistency delay
        self.eventual = kw.get("eventual", False)

    def set_state(self, state, reason=None):
        self.state = state
        if reason is not None:
            self.state_reason = reason
        if state == "terminated" and self.terminated_at is None:
            self.terminated_at = time.time()

    def state_xml(self):
        return {"code": STATE_CODES[self.state], "name": self.state}

    def to_json(self):
        return {"instance_id": self.id, "reservation_id": self.reservation_id,
                "instance_type": self.instance_type, "state": self.state,
                "state_reason": list(self.state_reason) if self.state_reason else None,
                "private_ip": self.private_ip, "az": self.az, "tags": self.tags,
                "client_token": self.client_token, "market": self.market or "on-demand",
                "cell_id": self.cell_id, "foreign": self.foreign,
                "user_data_bytes": len(self.user_data), "launch_time": self.launch_time,
                "image_id": self.image_id, "architecture": self.architecture,
                "subnet_id": self.subnet_id}


def _glob_re(pattern):
    """EC2 filter values: '*' any run, '?' one character, backslash escapes."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "*" else "." if c == "?" else re.escape(c))
        i += 1
    return re.compile("^" + "".join(out) + "$", re.S)


def match_values(candidates, patterns):
    """True when any candidate value matches any filter pattern."""
    regs = [_glob_re(p) for p in patterns]
    return any(r.match(c) for r in regs for c in candidates if c is not None)


def _instance_fields(inst, name):
    """The values an instance exposes to a DescribeInstances filter name, or None if unknown."""
    if name.startswith("tag:"):
        key = name[4:]
        return [inst.tags[key]] if key in inst.tags else []
    simple = {
        "instance-id": [inst.id],
        "instance-type": [inst.instance_type],
        "instance-state-name": [inst.state],
        "instance-state-code": [str(STATE_CODES[inst.state])],
        "tag-key": list(inst.tags),
        "tag-value": list(inst.tags.values()),
        "private-ip-address": [inst.private_ip],
        "client-token": [inst.client_token],
        "availability-zone": [inst.az],
        "placement.availability-zone": [inst.az],
        "instance-lifecycle": [inst.market] if inst.market else [],
        "vpc-id": [inst.vpc_id],
        "subnet-id": [inst.subnet_id],
        "image-id": [inst.image_id],
        "reservation-id": [inst.reservation_id],
        "instance.group-id": list(inst.security_groups),
        "key-name": [inst.key_name],
        "architecture": [inst.architecture],
        "owner-id": [OWNER_ID],
    }
    return simple.get(name)


class Store:
    """All instances, guarded by one lock (take it with `with store.lock`)."""

    def __init__(self, terminated_ttl):
        self.lock = threading.RLock()
        self.instances = {}          # id -> Instance, in launch order
        self.tokens = {}             # client token -> (fingerprint, reservation id, [ids])
        self.terminated_ttl = terminated_ttl
        # seconds after RunInstances during which the new ids are not known yet to
        # DescribeInstances, CreateTags and TerminateInstances (EC2's eventual consistency)
        self.consistency_delay = 0.0
        self.subnet_zones = {}       # subnet id -> availability zone (others: the first)
        self.images = {}             # image id -> architecture, as POST /_admin/images made them
        self.spot_zone_factor = {}   # zone -> factor on the catalog's spot prices (default 1)
        self.spot_prices = {}        # (type, zone) -> spot price, over the factor

    def add(self, inst):
        with self.lock:
            self.instances[inst.id] = inst

    def _expired(self, inst, now):
        return inst.state == "terminated" and inst.terminated_at is not None and \
            now - inst.terminated_at > self.terminated_ttl

    def _unknown_yet(self, inst, now):
        """Within the consistency delay after its RunInstances: calls naming the id answer
        NotFound and listings leave it out."""
        return inst.eventual and now < inst.launch_time + self.consistency_delay

    def visible(self):
        """Instances DescribeInstances can see (terminated ones only for terminated_ttl, new
        ones only once the consistency delay passed)."""
        now = time.time()
        with self.lock:
            return [i for i in self.instances.values()
                    if not self._expired(i, now) and not self._unknown_yet(i, now)]

    def lookup(self, ids):
        """Instances by id, all or nothing: Malformed or NotFound errors like EC2's (an id
        launched within the consistency delay is not found yet)."""
        for iid in ids:
            if not INSTANCE_ID_RE.match(iid):
                raise Ec2Error("InvalidInstanceID.Malformed", f'Invalid id: "{iid}"')
        now = time.time()
        with self.lock:
            missing = [i for i in ids if i not in self.instances or
                       self._expired(self.instances[i], now) or
                       self._unknown_yet(self.instances[i], now)]
            if missing:
                if len(missing) == 1:
                    raise Ec2Error("InvalidInstanceID.NotFound",
                                   f"The instance ID '{missing[0]}' does not exist")
                raise Ec2Error("InvalidInstanceID.NotFound",
                               f"The instance IDs '{', '.join(missing)}' do not exist")
            return [self.instances[i] for i in ids]

    @staticmethod
    def filter(instances, filters):
        """Instances matching every filter (values within one filter are alternatives)."""
        for name, _ in filters:
            if _instance_fields(_PROBE, name) is None:
                raise Ec2Error("InvalidParameterValue", f"The filter '{name}' is invalid")
        return [i for i in instances
                if all(match_values(_instance_fields(i, n), v) for n, v in filters)]

    def counts(self):
        with self.lock:
            out = {}
            for inst in self.visible():
                out[inst.state] = out.get(inst.state, 0) + 1
            return out


_PROBE = Instance(id="i-00000000", reservation_id="r-0", instance_type="t3.nano", az="x")
