"""The admin API: JSON over HTTP under /_admin/, unauthenticated, for tests to inject faults
and read counters.

GET  /_admin/health                      {"ok": true, "region": ...}
GET  /_admin/stats                       calls, ok and errors per action, instances by state,
                                         throttler and fault state
POST /_admin/stats/reset                 zero the counters
GET  /_admin/instances                   every instance as JSON (tags, state, ip, cell id...)
POST /_admin/capacity                    {"instance_type": GLOB, "times": N?, "market": M?}
                                         RunInstances of that type answers
                                         InsufficientInstanceCapacity (N times or always)
POST /_admin/fault                       {"action": A or "*", "code": C, "instance_type"?,
                                         "market"?, "zone"?, "subnet"?, "times"?,
                                         "rate"?, "message"?, "status"?} (zone and subnet:
                                         of a RunInstances; rate: the fraction of matching
                                         calls that fail)
POST /_admin/subnets                     {"SUBNET": "ZONE", ...}: the zones of subnets
                                         (others are in the first zone)
POST /_admin/images                      {"AMI": "x86_64" | "arm64", ...}: register images;
                                         RunInstances of a registered image on a type of
                                         another architecture fails as EC2 fails it
                                         (InvalidParameterValue); others are not checked
POST /_admin/spot                        {"zones"?: {"ZONE": FACTOR}, "prices"?: {"TYPE":
                                         {"ZONE": PRICE}}}: per-zone spot prices (the
                                         catalog's times the zone's factor, default 1, unless
                                         a type's price is given for the zone), as
                                         DescribeSpotPriceHistory answers them
POST /_admin/consistency                 {"seconds": S}: for S seconds after RunInstances,
                                         DescribeInstances, CreateTags and
                                         TerminateInstances naming a new id answer
                                         InvalidInstanceID.NotFound and listings leave it out
                                         (as EC2's eventual consistency); 0 stops
POST /_admin/faults/clear                drop every fault rule (capacity ones too)
POST /_admin/throttle                    {"seconds": S} or {"count": N}: RequestLimitExceeded
                                         to every call for S seconds / the next N calls;
                                         {"seconds": 0} stops
POST /_admin/buckets                     {"mutating": {"capacity": C, "rate": R},
                                         "describe": {...}} (capacity 0: unlimited)
POST /_admin/foreign                     {"instance_type"?, "tags"?: {}, "state"?}: add an
                                         instance kiyot did not launch (no cell, no kiyot tags
                                         unless given); answers {"instance_id": ...}
POST /_admin/prices                      {"TYPE": PRICE or null, ...}: the on-demand price
                                         (USD an hour) the Price List's GetProducts gives a
                                         type (null: back to the catalog's x 1.1); answers
                                         every price set
POST /_admin/kill                        {"instance_id": ID, "keep_state"?: false}: kill the
                                         instance's cell; EC2 then reports it terminated
                                         (Server.InternalError), or still running with
                                         keep_state
"""

import json
import time

from .errors import status_for
from .faults import Rule
from .state import Instance, STATE_CODES, new_id

BODY_MAX = 1 << 16


class AdminError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def _json(body):
    if not body:
        return {}
    if len(body) > BODY_MAX:
        raise AdminError(413, "body too large")
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise AdminError(400, f"body is not JSON: {e}") from e
    if not isinstance(doc, dict):
        raise AdminError(400, "body must be a JSON object")
    return doc


def _times(doc):
    times = doc.get("times")
    if times is not None and (not isinstance(times, int) or times < 1):
        raise AdminError(400, "times must be a positive integer or absent (always)")
    return times


def _stats(sim, _doc):
    out = sim.stats.snapshot()
    out["instances"] = sim.store.counts()
    out["throttle"] = sim.throttler.describe()
    out["faults"] = sim.faults.describe()
    return out


def _reset(sim, _doc):
    sim.stats.reset()
    return {"ok": True}


def _instances(sim, _doc):
    with sim.store.lock:
        return {"instances": [i.to_json() for i in sim.store.instances.values()]}


def _capacity(sim, doc):
    itype = doc.get("instance_type")
    if not isinstance(itype, str) or not itype:
        raise AdminError(400, "instance_type (a type or glob) is required")
    sim.faults.add(Rule("RunInstances", "InsufficientInstanceCapacity", itype,
                        doc.get("market"), _times(doc)))
    return {"ok": True, "faults": sim.faults.describe()}


def _fault(sim, doc):
    action, code = doc.get("action"), doc.get("code")
    if not isinstance(action, str) or not isinstance(code, str) or not action or not code:
        raise AdminError(400, "action and code are required")
    status = doc.get("status")
    if status is not None and not isinstance(status, int):
        raise AdminError(400, "status must be an integer")
    for key in ("instance_type", "market", "zone", "subnet", "message"):
        if doc.get(key) is not None and not isinstance(doc[key], str):
            raise AdminError(400, f"{key} must be a string")
    rate = doc.get("rate")
    if rate is not None and (not isinstance(rate, (int, float)) or not 0 < rate <= 1):
        raise AdminError(400, "rate must be a number in (0, 1] or absent (every call)")
    sim.faults.add(Rule(action, code, doc.get("instance_type"), doc.get("market"),
                        _times(doc), doc.get("message"), status or status_for(code),
                        doc.get("zone"), doc.get("subnet"), rate))
    return {"ok": True, "faults": sim.faults.describe()}


def _subnets(sim, doc):
    for subnet, zone in doc.items():
        if not isinstance(zone, str) or zone not in sim.cfg.azs:
            raise AdminError(400, f"subnet {subnet}: zone must be one of "
                             f"{', '.join(sim.cfg.azs)}")
    with sim.store.lock:
        sim.store.subnet_zones.update(doc)
        return {"ok": True, "subnets": dict(sim.store.subnet_zones)}


def _images(sim, doc):
    for image, arch in doc.items():
        if arch not in ("x86_64", "arm64"):
            raise AdminError(400, f"image {image}: architecture must be x86_64 or arm64")
    with sim.store.lock:
        sim.store.images.update(doc)
        return {"ok": True, "images": dict(sim.store.images)}


def _spot(sim, doc):
    zones = doc.get("zones", {})
    prices = doc.get("prices", {})
    for zone, factor in zones.items():
        if zone not in sim.cfg.azs or not isinstance(factor, (int, float)) or factor <= 0:
            raise AdminError(400, f"zones.{zone}: a zone of {', '.join(sim.cfg.azs)} and a "
                             "factor > 0")
    for itype, by_zone in prices.items():
        if sim.catalog.get(itype) is None or not isinstance(by_zone, dict):
            raise AdminError(400, f"prices.{itype}: a type of the catalog, with a mapping")
        for zone, price in by_zone.items():
            if zone not in sim.cfg.azs or not isinstance(price, (int, float)) or price <= 0:
                raise AdminError(400, f"prices.{itype}.{zone}: a zone and a price > 0")
    with sim.store.lock:
        sim.store.spot_zone_factor.update(zones)
        for itype, by_zone in prices.items():
            for zone, price in by_zone.items():
                sim.store.spot_prices[(itype, zone)] = float(price)
        return {"ok": True}


def _consistency(sim, doc):
    seconds = doc.get("seconds")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds < 0:
        raise AdminError(400, "seconds must be a number >= 0")
    with sim.store.lock:
        sim.store.consistency_delay = float(seconds)
    return {"ok": True, "seconds": float(seconds)}


def _clear(sim, _doc):
    sim.faults.clear()
    return {"ok": True}


def _throttle(sim, doc):
    seconds, count = doc.get("seconds", 0), doc.get("count", 0)
    if not isinstance(seconds, (int, float)) or not isinstance(count, int):
        raise AdminError(400, "seconds must be a number and count an integer")
    sim.throttler.force(seconds=float(seconds), count=count)
    return {"ok": True, "throttle": sim.throttler.describe()}


def _buckets(sim, doc):
    for name in ("mutating", "describe"):
        if name in doc:
            b = doc[name]
            if not isinstance(b, dict) or not isinstance(b.get("capacity"), (int, float)) \
                    or not isinstance(b.get("rate", 0), (int, float)):
                raise AdminError(400, f"{name} must be {{\"capacity\": C, \"rate\": R}}")
            sim.throttler.set_bucket(name, b["capacity"], b.get("rate", 0))
    return {"ok": True, "throttle": sim.throttler.describe()}


def _foreign(sim, doc):
    itype = doc.get("instance_type", "t3.micro")
    if sim.catalog.get(itype) is None:
        raise AdminError(400, f"unknown instance type {itype}")
    state = doc.get("state", "running")
    if state not in STATE_CODES:
        raise AdminError(400, f"state must be one of {', '.join(STATE_CODES)}")
    tags = doc.get("tags", {})
    if not isinstance(tags, dict) or not all(isinstance(v, str) for v in tags.values()):
        raise AdminError(400, "tags must be an object of strings")
    inst = Instance(id=new_id("i"), reservation_id=new_id("r"), instance_type=itype,
                    az=sim.cfg.azs[0], subnet_id=sim.cfg.subnet_id, vpc_id=sim.cfg.vpc_id,
                    security_groups=[sim.cfg.security_group], tags=tags, foreign=True,
                    launch_time=time.time(), state=state,
                    architecture=sim.catalog.architecture(itype))
    inst.private_ip = sim.lifecycle.ip_pool.take()
    if state == "terminated":
        inst.set_state("terminated")
    sim.store.add(inst)
    return {"instance_id": inst.id}


def _prices(sim, doc):
    for name, price in doc.items():
        if sim.catalog.get(name) is None:
            raise AdminError(400, f"{name} is not an instance type of the catalog")
        if price is not None and (not isinstance(price, (int, float)) or price <= 0):
            raise AdminError(400, f"{name}: the price must be a positive number or null")
    return {"ok": True, "prices": sim.pricing.set_prices(doc)}


def _kill(sim, doc):
    iid = doc.get("instance_id")
    with sim.store.lock:
        inst = sim.store.instances.get(iid) if isinstance(iid, str) else None
    if inst is None:
        raise AdminError(404, f"no instance {iid!r}")
    sim.lifecycle.kill(inst, keep_state=bool(doc.get("keep_state")))
    return {"ok": True, "state": inst.state}


_ROUTES = {
    ("GET", "/_admin/health"): lambda sim, doc: {"ok": True, "region": sim.cfg.region},
    ("GET", "/_admin/stats"): _stats,
    ("POST", "/_admin/stats/reset"): _reset,
    ("GET", "/_admin/instances"): _instances,
    ("POST", "/_admin/capacity"): _capacity,
    ("POST", "/_admin/fault"): _fault,
    ("POST", "/_admin/faults/clear"): _clear,
    ("POST", "/_admin/subnets"): _subnets,
    ("POST", "/_admin/images"): _images,
    ("POST", "/_admin/spot"): _spot,
    ("POST", "/_admin/consistency"): _consistency,
    ("POST", "/_admin/throttle"): _throttle,
    ("POST", "/_admin/buckets"): _buckets,
    ("POST", "/_admin/foreign"): _foreign,
    ("POST", "/_admin/kill"): _kill,
    ("POST", "/_admin/prices"): _prices,
}


def handle(sim, method, path, body):
    """Serve one admin request: (HTTP status, JSON-able document)."""
    route = _ROUTES.get((method, path.rstrip("/")))
    if route is None:
        return 404, {"error": f"no admin route {method} {path}; routes: "
                     + ", ".join(f"{m} {p}" for m, p in _ROUTES)}
    try:
        return 200, route(sim, _json(body))
    except AdminError as e:
        return e.status, {"error": str(e)}
