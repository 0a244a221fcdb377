"""The EC2 actions: each takes the simulator and the request parameters and returns the body
of its XML answer (a dict for xmlout), or raises Ec2Error."""

import base64
import binascii
import hashlib
import json
import time

from . import imds
from . import params as P
from .errors import Ec2Error
from .state import OWNER_ID, Instance, match_values, new_id
from .xmlout import timestamp

USER_DATA_MAX = 16384
TAGS_MAX = 50
TAG_RESOURCE_TYPES = {"instance", "volume", "network-interface", "spot-instances-request"}


def _check_tags(pairs):
    """EC2's tag rules: keys 1-128 characters, values up to 256, no 'aws:' prefix."""
    for key, value in pairs:
        if not key or len(key) > 128:
            raise Ec2Error("InvalidParameterValue",
                           f"Tag key '{key[:140]}' must be 1 to 128 characters long.")
        if len(value) > 256:
            raise Ec2Error("InvalidParameterValue",
                           f"The value of tag '{key}' is longer than 256 characters.")
        if key.lower().startswith("aws:"):
            raise Ec2Error("InvalidParameterValue",
                           "Tag keys starting with 'aws:' are reserved for internal use.")


def _tag_set(tags):
    return [{"key": k, "value": v} for k, v in tags.items()]


def instance_xml(sim, inst):
    """The <item> of an instance in RunInstances and DescribeInstances answers."""
    ip = inst.private_ip
    dns = f"ip-{ip.replace('.', '-')}.ec2.internal" if ip else ""
    running = inst.state in ("pending", "running")
    item = {
        "instanceId": inst.id,
        "imageId": inst.image_id,
        "instanceState": inst.state_xml(),
        "privateDnsName": dns,
        "dnsName": "",
        "reason": inst.transition_reason,
        "keyName": inst.key_name,
        "amiLaunchIndex": inst.launch_index,
        "productCodes": [],
        "instanceType": inst.instance_type,
        "launchTime": timestamp(inst.launch_time),
        "placement": {"availabilityZone": inst.az, "groupName": "", "tenancy": "default"},
        "monitoring": {"state": "disabled"},
        "subnetId": inst.subnet_id if running else None,
        "vpcId": inst.vpc_id if running else None,
        "privateIpAddress": ip if running else None,
        "sourceDestCheck": True,
        "groupSet": [{"groupId": g, "groupName": g} for g in inst.security_groups],
        "stateReason": ({"code": inst.state_reason[0], "message": inst.state_reason[1]}
                        if inst.state_reason else None),
        "architecture": inst.architecture,
        "rootDeviceType": "ebs",
        "rootDeviceName": "/dev/xvda",
        "blockDeviceMapping": [],
        "instanceLifecycle": inst.market,
        "spotInstanceRequestId": inst.spot_request_id,
        "virtualizationType": "hvm",
        "clientToken": inst.client_token,
        "tagSet": _tag_set(inst.tags) if inst.tags else None,
        "hypervisor": "xen",
        "networkInterfaceSet": [],
        "iamInstanceProfile": ({"arn": inst.iam_profile, "id": "AIPA" + inst.id[2:].upper()}
                               if inst.iam_profile else None),
        "ebsOptimized": False,
        "enaSupport": True,
        "cpuOptions": {"coreCount": max(1, sim.catalog.vcpus(inst.instance_type) // 2)
                       if sim.catalog.get(inst.instance_type) else 1,
                       "threadsPerCore": 2 if inst.architecture == "x86_64" else 1},
        "capacityReservationSpecification": {"capacityReservationPreference": "open"},
        "hibernationOptions": {"configured": False},
        "metadataOptions": imds.options_xml(inst),
        "enclaveOptions": {"enabled": False},
        "platformDetails": "Linux/UNIX",
        "usageOperation": "RunInstances",
    }
    return item


def _reservations(sim, instances):
    """Group instances into reservations, in order of first appearance."""
    order, by_res = [], {}
    for inst in instances:
        if inst.reservation_id not in by_res:
            by_res[inst.reservation_id] = []
            order.append(inst.reservation_id)
        by_res[inst.reservation_id].append(instance_xml(sim, inst))
    return [{"reservationId": rid, "ownerId": OWNER_ID, "groupSet": [],
             "instancesSet": by_res[rid]} for rid in order]


def _page(items, params, default, low, high):
    """Slice items by MaxResults / NextToken; return (page, next token or None)."""
    limit = P.integer(params, "MaxResults", default, low, high)
    start = 0
    if params.get("NextToken"):
        try:
            start = int(json.loads(base64.b64decode(params["NextToken"], validate=True))["o"])
        except (ValueError, KeyError, TypeError, binascii.Error) as e:
            raise Ec2Error("InvalidPaginationToken",
                           "The pagination token is not valid: pass the NextToken of the "
                           "previous answer unchanged.") from e
        if start < 0 or start > len(items):
            raise Ec2Error("InvalidPaginationToken", "The pagination token has expired.")
    if limit is None:
        return items[start:], None
    end = start + limit
    token = None
    if end < len(items):
        token = base64.b64encode(json.dumps({"o": end}).encode()).decode()
    return items[start:end], token


def _fingerprint(params):
    kept = sorted((k, v) for k, v in params.items()
                  if k not in ("ClientToken", "Action", "Version"))
    return hashlib.sha256(json.dumps(kept).encode()).hexdigest()


def _subnet_zone(sim, subnet):
    """The zone of a subnet: as POST /_admin/subnets set it; any other subnet is in the
    first zone."""
    with sim.store.lock:
        return sim.store.subnet_zones.get(subnet, sim.cfg.azs[0])


def run_instances(sim, params):
    min_count = P.integer(params, "MinCount", None, 1, 1000)
    max_count = P.integer(params, "MaxCount", None, 1, 1000)
    if min_count > max_count:
        raise Ec2Error("InvalidParameterValue",
                       f"MinCount ({min_count}) must not be greater than MaxCount "
                       f"({max_count}).")
    if "ImageId" not in params and not any(k.startswith("LaunchTemplate.") for k in params):
        raise Ec2Error("MissingParameter", "The request must contain the parameter ImageId")
    itype = params.get("InstanceType", "m1.small")
    entry = sim.catalog.get(itype)
    if entry is None:
        raise Ec2Error("InvalidParameterValue", f"Invalid value '{itype}' for InstanceType.")
    with sim.store.lock:
        image_arch = sim.store.images.get(params.get("ImageId"))
    if image_arch and image_arch != sim.catalog.architecture(itype):
        raise Ec2Error("InvalidParameterValue",
                       f"The architecture '{sim.catalog.architecture(itype)}' of the specified "
                       f"instance type does not match the architecture '{image_arch}' of the "
                       "specified AMI. Specify an instance type and an AMI that have matching "
                       "architectures, and try again. You can use 'describe-instance-types' or "
                       "'describe-images' to discover the architecture of the instance type or "
                       "AMI.")
    token = params.get("ClientToken", "")
    if len(token) > 64 or any(ord(c) > 127 for c in token):
        raise Ec2Error("InvalidParameterValue",
                       "ClientToken must be at most 64 ASCII characters.")
    user_data = b""
    if "UserData" in params:
        try:
            user_data = base64.b64decode(params["UserData"], validate=True)
        except (binascii.Error, ValueError) as e:
            raise Ec2Error("InvalidParameterValue",
                           "Invalid BASE64 encoding of user data.") from e
        if len(user_data) > USER_DATA_MAX:
            raise Ec2Error("InvalidParameterValue",
                           f"User data is limited to {USER_DATA_MAX} bytes; this one has "
                           f"{len(user_data)}.")
    tags = {}
    for spec in P.groups(params, "TagSpecification"):
        rtype = spec.get("ResourceType")
        if rtype not in TAG_RESOURCE_TYPES:
            raise Ec2Error("InvalidParameterValue",
                           f"'{rtype}' is not a valid taggable resource type for this "
                           "operation.")
        pairs = P.tags(spec)
        _check_tags(pairs)
        if len(pairs) > TAGS_MAX:
            raise Ec2Error("TagLimitExceeded",
                           f"The maximum number of tags per resource is {TAGS_MAX}.")
        if rtype == "instance":
            tags.update(pairs)
    market = None
    mtype = params.get("InstanceMarketOptions.MarketType")
    if mtype is not None:
        if mtype != "spot":
            raise Ec2Error("InvalidParameterValue",
                           f"Invalid value '{mtype}' for InstanceMarketOptions.MarketType.")
        market = "spot"
        max_price = params.get("InstanceMarketOptions.SpotOptions.MaxPrice")
        spot = sim.catalog.spot_price(itype)
        if spot is None:
            raise Ec2Error("Unsupported", f"Spot is not offered for {itype}.")
        if max_price is not None:
            try:
                low = float(max_price) < spot
            except ValueError as e:
                raise Ec2Error("InvalidParameterValue",
                               f"Invalid spot max price '{max_price}'.") from e
            if low:
                raise Ec2Error("SpotMaxPriceTooLow",
                               f"Your Spot request price of {max_price} is lower than the "
                               f"minimum required Spot request fulfillment price of {spot}.")
    subnet = params.get("SubnetId", sim.cfg.subnet_id)
    az = params.get("Placement.AvailabilityZone") or _subnet_zone(sim, subnet)
    if az not in sim.cfg.azs:
        raise Ec2Error("InvalidParameterValue",
                       f"Invalid availability zone: [{az}]")
    metadata_options = imds.launch_options(params)
    fingerprint = _fingerprint(params)
    with sim.store.lock:
        if token and token in sim.store.tokens:
            fp, rid, ids = sim.store.tokens[token]
            if fp != fingerprint:
                raise Ec2Error("IdempotentParameterMismatch",
                               f"The client token '{token}' was used before with other "
                               "parameters.")
            insts = [sim.store.instances[i] for i in ids]
            return _run_answer(sim, rid, insts)
    if P.boolean(params, "DryRun"):
        raise Ec2Error("DryRunOperation",
                       "Request would have succeeded, but DryRun flag is set.")
    sim.faults.check("RunInstances", itype, market or "on-demand", az, subnet)

    rid = new_id("r")
    groups = P.indexed(params, "SecurityGroupId") or [sim.cfg.security_group]
    profile = params.get("IamInstanceProfile.Arn") or (
        f"arn:aws:iam::{OWNER_ID}:instance-profile/{params['IamInstanceProfile.Name']}"
        if params.get("IamInstanceProfile.Name") else None)
    insts = []
    with sim.store.lock:
        if token and token in sim.store.tokens:   # a concurrent twin won the race
            fp, rid2, ids = sim.store.tokens[token]
            return _run_answer(sim, rid2, [sim.store.instances[i] for i in ids])
        now = time.time()
        for index in range(max_count):
            inst = Instance(id=new_id("i"), reservation_id=rid, instance_type=itype,
                            image_id=params.get("ImageId", "ami-00000000000000000"),
                            launch_time=now, launch_index=index,
                            subnet_id=subnet,
                            vpc_id=sim.cfg.vpc_id, az=az, security_groups=groups,
                            key_name=params.get("KeyName"), iam_profile=profile,
                            client_token=token, tags=tags, user_data=user_data,
                            market=market,
                            spot_request_id=new_id("sir") if market else None,
                            architecture=sim.catalog.architecture(itype),
                            eventual=True)
            inst.metadata_options = metadata_options
            sim.store.add(inst)
            insts.append(inst)
        if token:
            sim.store.tokens[token] = (fingerprint, rid, [i.id for i in insts])
        answer = _run_answer(sim, rid, insts)
    for inst in insts:
        sim.lifecycle.start(inst)
    return answer


def _run_answer(sim, rid, insts):
    return {"reservationId": rid, "ownerId": OWNER_ID, "groupSet": [],
            "instancesSet": [instance_xml(sim, i) for i in insts]}


def describe_instances(sim, params):
    ids = P.indexed(params, "InstanceId")
    if ids and "MaxResults" in params:
        raise Ec2Error("InvalidParameterCombination",
                       "The parameter instancesSet cannot be used with the parameter "
                       "maxResults")
    flt = P.filters(params)
    with sim.store.lock:
        insts = sim.store.lookup(ids) if ids else sim.store.visible()
        insts = sim.store.filter(insts, flt)
        page, token = _page(insts, params, None, 5, 1000)
        return {"reservationSet": _reservations(sim, page), "nextToken": token}


def terminate_instances(sim, params):
    ids = P.indexed(params, "InstanceId")
    if not ids:
        raise Ec2Error("MissingParameter", "The request must contain the parameter InstanceId")
    with sim.store.lock:
        insts = sim.store.lookup(ids)
        if P.boolean(params, "DryRun"):
            raise Ec2Error("DryRunOperation",
                           "Request would have succeeded, but DryRun flag is set.")
        out = []
        for inst in insts:
            previous = sim.lifecycle.terminate(inst)
            out.append({"instanceId": inst.id, "currentState": inst.state_xml(),
                        "previousState": previous})
        return {"instancesSet": out}


def create_tags(sim, params):
    ids = P.indexed(params, "ResourceId")
    pairs = P.tags(params)
    if not ids:
        raise Ec2Error("MissingParameter", "The request must contain the parameter ResourceId")
    for rid in ids:
        if not rid.startswith("i-"):
            raise Ec2Error("InvalidID", f"The ID '{rid}' is not valid for this endpoint "
                           "(only instances can be tagged here)")
    _check_tags(pairs)
    with sim.store.lock:
        insts = sim.store.lookup(ids)
        for inst in insts:
            merged = dict(inst.tags)
            merged.update(pairs)
            if len(merged) > TAGS_MAX:
                raise Ec2Error("TagLimitExceeded",
                               f"The maximum number of tags per resource is {TAGS_MAX}; "
                               f"{inst.id} would have {len(merged)}.")
        if P.boolean(params, "DryRun"):
            raise Ec2Error("DryRunOperation",
                           "Request would have succeeded, but DryRun flag is set.")
        for inst in insts:
            inst.tags.update(pairs)
    return {"return": True}


def delete_tags(sim, params):
    """DeleteTags as EC2 does it: Tag.N.Key with no Value removes the key whatever its value,
    with a Value only when it matches; a key an instance lacks is no error."""
    ids = P.indexed(params, "ResourceId")
    if not ids:
        raise Ec2Error("MissingParameter", "The request must contain the parameter ResourceId")
    for rid in ids:
        if not rid.startswith("i-"):
            raise Ec2Error("InvalidID", f"The ID '{rid}' is not valid for this endpoint "
                           "(only instances can be tagged here)")
    wanted = []
    for group in P.groups(params, "Tag"):
        if "Key" not in group:
            raise Ec2Error("InvalidParameterValue", "A Tag entry is missing its Key.")
        wanted.append((group["Key"], group.get("Value")))
    with sim.store.lock:
        insts = sim.store.lookup(ids)
        if P.boolean(params, "DryRun"):
            raise Ec2Error("DryRunOperation",
                           "Request would have succeeded, but DryRun flag is set.")
        for inst in insts:
            if not wanted:  # no Tag: EC2 removes every tag but aws: ones
                inst.tags.clear()
            for key, value in wanted:
                if key in inst.tags and (value is None or inst.tags[key] == value):
                    del inst.tags[key]
    return {"return": True}


_TYPE_FILTERS = {
    "instance-type": lambda i: [i["instanceType"]],
    "current-generation": lambda i: [str(i["currentGeneration"]).lower()],
    "burstable-performance-supported":
        lambda i: [str(i["burstablePerformanceSupported"]).lower()],
    "bare-metal": lambda i: [str(i["bareMetal"]).lower()],
    "vcpu-info.default-vcpus": lambda i: [str(i["vCpuInfo"]["defaultVCpus"])],
    "memory-info.size-in-mib": lambda i: [str(i["memoryInfo"]["sizeInMiB"])],
    "processor-info.supported-architecture":
        lambda i: i["processorInfo"]["supportedArchitectures"],
    "supported-usage-class": lambda i: i["supportedUsageClasses"],
}


def describe_instance_types(sim, params):
    names = P.indexed(params, "InstanceType")
    unknown = [n for n in names if sim.catalog.get(n) is None]
    if unknown:
        raise Ec2Error("InvalidInstanceType",
                       "The following supplied instance types do not exist: ["
                       + ", ".join(unknown) + "]")
    flt = P.filters(params)
    for name, _ in flt:
        if name not in _TYPE_FILTERS:
            raise Ec2Error("InvalidParameterValue", f"The filter '{name}' is invalid")
    items = [sim.catalog.info(n) for n in (names or sim.catalog.names())]
    items = [i for i in items
             if all(match_values(_TYPE_FILTERS[n](i), v) for n, v in flt)]
    page, token = _page(items, params, 100, 5, 100)
    return {"instanceTypeSet": page, "nextToken": token}


def describe_spot_price_history(sim, params):
    names = P.indexed(params, "InstanceType") or sim.catalog.names()
    products = P.indexed(params, "ProductDescription") or ["Linux/UNIX"]
    zone = params.get("AvailabilityZone")
    flt = P.filters(params)
    known = {"instance-type", "product-description", "availability-zone", "spot-price",
             "timestamp"}
    for name, _ in flt:
        if name not in known:
            raise Ec2Error("InvalidParameterValue", f"The filter '{name}' is invalid")
    stamp = timestamp(time.time())
    items = []
    for name in names:
        price = sim.catalog.spot_price(name) if sim.catalog.get(name) else None
        if price is None:
            continue
        for az in sim.cfg.azs:
            if zone and az != zone:
                continue
            with sim.store.lock:
                here = sim.store.spot_prices.get(
                    (name, az), price * sim.store.spot_zone_factor.get(az, 1.0))
            for product in products:
                if product not in ("Linux/UNIX", "Linux/UNIX (Amazon VPC)"):
                    continue
                item = {"instanceType": name, "productDescription": product,
                        "spotPrice": f"{here:.6f}", "timestamp": stamp,
                        "availabilityZone": az}
                fields = {"instance-type": [name], "product-description": [product],
                          "availability-zone": [az], "spot-price": [item["spotPrice"]],
                          "timestamp": [stamp]}
                if all(match_values(fields[n], v) for n, v in flt):
                    items.append(item)
    page, token = _page(items, params, 1000, 5, 1000)
    return {"spotPriceHistorySet": page, "nextToken": token}


_SUBNET_FILTERS = {
    "subnet-id": lambda s: [s["subnetId"]],
    "availability-zone": lambda s: [s["availabilityZone"]],
    "vpc-id": lambda s: [s["vpcId"]],
    "state": lambda s: [s["state"]],
}


def _subnet_item(sim, subnet, zone, n):
    return {"subnetId": subnet,
            "subnetArn": f"arn:aws:ec2:{sim.cfg.region}:{OWNER_ID}:subnet/{subnet}",
            "state": "available", "ownerId": OWNER_ID, "vpcId": sim.cfg.vpc_id,
            "cidrBlock": f"10.0.{n}.0/24", "availableIpAddressCount": 251,
            "availabilityZone": zone,
            "availabilityZoneId": f"{sim.cfg.region}-az{sim.cfg.azs.index(zone) + 1}",
            "defaultForAz": "false", "mapPublicIpOnLaunch": "false",
            "assignIpv6AddressOnCreation": "false", "ipv6CidrBlockAssociationSet": [],
            "tagSet": []}


def describe_subnets(sim, params):
    """The default subnet (--subnet-id, in the first zone) and those POST /_admin/subnets
    placed, each in its zone."""
    with sim.store.lock:
        known = dict(sim.store.subnet_zones)
    known.setdefault(sim.cfg.subnet_id, sim.cfg.azs[0])
    names = P.indexed(params, "SubnetId")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise Ec2Error("InvalidSubnetID.NotFound",
                       f"The subnet ID '{', '.join(unknown)}' does not exist")
    flt = P.filters(params)
    for name, _ in flt:
        if name not in _SUBNET_FILTERS:
            raise Ec2Error("InvalidParameterValue", f"The filter '{name}' is invalid")
    order = sorted(known)
    items = [_subnet_item(sim, s, known[s], order.index(s) + 1) for s in (names or order)]
    items = [i for i in items
             if all(match_values(_SUBNET_FILTERS[n](i), v) for n, v in flt)]
    page, token = _page(items, params, 1000, 5, 1000)
    return {"subnetSet": page, "nextToken": token}


def describe_regions(sim, params):
    names = P.indexed(params, "RegionName") or sim.catalog.regions
    return {"regionInfo": [{"regionName": r, "regionEndpoint": f"ec2.{r}.amazonaws.com",
                            "optInStatus": "opt-in-not-required"} for r in names]}


def describe_availability_zones(sim, params):
    names = P.indexed(params, "ZoneName")
    zones = []
    for n, az in enumerate(sim.cfg.azs, 1):
        if names and az not in names:
            continue
        zones.append({"zoneState": "available", "optInStatus": "opt-in-not-required",
                      "messageSet": [], "regionName": sim.cfg.region, "zoneName": az,
                      "zoneId": f"{sim.cfg.region}-az{n}", "groupName": sim.cfg.region,
                      "networkBorderGroup": sim.cfg.region, "zoneType": "availability-zone"})
    return {"availabilityZoneInfo": zones}


ACTIONS = {
    "RunInstances": run_instances,
    "DescribeInstances": describe_instances,
    "TerminateInstances": terminate_instances,
    "CreateTags": create_tags,
    "DeleteTags": delete_tags,
    "DescribeInstanceTypes": describe_instance_types,
    "DescribeSpotPriceHistory": describe_spot_price_history,
    "DescribeRegions": describe_regions,
    "DescribeAvailabilityZones": describe_availability_zones,
    "DescribeSubnets": describe_subnets,
}
