"""Injected errors: rules that make matching calls fail with a chosen EC2 error code."""

import fnmatch
import random
import threading

from .errors import Ec2Error, status_for


class Rule:
    """Fail calls of action (optionally for an instance type glob, a market, an availability
    zone and a subnet) with code, `times` more times (None: always)."""

    def __init__(self, action, code, instance_type=None, market=None, times=None,
                 message=None, status=None, zone=None, subnet=None, rate=None):
        self.action = action
        self.rate = rate      # fail only this fraction of the matching calls (None: all)
        self.zone = zone
        self.subnet = subnet
        self.code = code
        self.instance_type = instance_type
        self.market = market
        self.times = times
        self.message = message
        self.status = status

    def matches(self, action, instance_type, market, az=None, subnet=None):
        if self.action not in ("*", action):
            return False
        if self.zone is not None and self.zone != az:
            return False
        if self.subnet is not None and self.subnet != subnet:
            return False
        if self.instance_type is not None and (
                instance_type is None or not fnmatch.fnmatchcase(instance_type,
                                                                 self.instance_type)):
            return False
        if self.market is not None and self.market != market:
            return False
        return True

    def error(self, instance_type, az):
        message = self.message
        if message is None:
            if self.code == "InsufficientInstanceCapacity":
                message = (f"There is not enough {instance_type} capacity in {az} right now. "
                           "Try another instance type or Availability Zone, or retry later.")
            elif self.code == "Unsupported":
                message = (f"Your requested instance type ({instance_type}) is not supported "
                           f"in your requested Availability Zone ({az}). Please retry your "
                           "request by not specifying an Availability Zone or choosing "
                           "another one.")
            elif self.code == "InstanceLimitExceeded":
                message = ("You have requested more instances than your current instance "
                           f"limit allows for the specified instance type ({instance_type}). "
                           "Please visit http://aws.amazon.com/contact-us/ec2-request to "
                           "request an adjustment to this limit.")
            elif self.code == "VcpuLimitExceeded":
                message = ("You have requested more vCPU capacity than your current vCPU "
                           "limit allows for the instance bucket that the specified instance "
                           f"type ({instance_type}) belongs to. Please visit "
                           "http://aws.amazon.com/contact-us/ec2-request to request an "
                           "adjustment to this limit.")
            elif self.code == "MaxSpotInstanceCountExceeded":
                message = "Max spot instance count exceeded"
            else:
                message = f"Injected {self.code} error."
        return Ec2Error(self.code, message, self.status or status_for(self.code))

    def describe(self):
        return {"action": self.action, "code": self.code, "instance_type": self.instance_type,
                "market": self.market, "zone": self.zone, "subnet": self.subnet,
                "rate": self.rate,
                "times": self.times, "message": self.message, "status": self.status}


class Faults:
    def __init__(self):
        self._lock = threading.Lock()
        self.rules = []

    def add(self, rule):
        with self._lock:
            self.rules.append(rule)

    def clear(self):
        with self._lock:
            self.rules = []

    def check(self, action, instance_type=None, market=None, az="", subnet=None):
        """Raise the error of the first matching rule, consuming one of its times."""
        with self._lock:
            for rule in self.rules:
                if rule.matches(action, instance_type, market, az, subnet):
                    if rule.rate is not None and random.random() >= rule.rate:
                        continue
                    if rule.times is not None:
                        rule.times -= 1
                        if rule.times <= 0:
                            self.rules.remove(rule)
                    raise rule.error(instance_type, az)

    def describe(self):
        with self._lock:
            return [r.describe() for r in self.rules]
