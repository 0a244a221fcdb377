"""Request rate limiting the way EC2 does it: token buckets per family of actions.

EC2 meters API calls per account and region with token buckets: each call takes a token, a
bucket refills at a fixed rate up to its capacity, and a call finding the bucket empty is
answered RequestLimitExceeded. Mutating actions and describe (non-mutating) actions draw from
separate buckets.
"""

import threading
import time

MUTATING = {"RunInstances", "TerminateInstances", "CreateTags", "DeleteTags"}


def family(action):
    return "mutating" if action in MUTATING else "describe"


class Bucket:
    """A token bucket; capacity 0 means unlimited."""

    def __init__(self, capacity, rate):
        self.capacity = float(capacity)
        self.rate = float(rate)
        self.tokens = float(capacity)
        self.last = time.monotonic()

    def take(self):
        if self.capacity <= 0:
            return True
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.last) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False

    def describe(self):
        return {"capacity": self.capacity, "rate": self.rate, "tokens": round(self.tokens, 3)}


class Throttler:
    """The buckets plus forced throttling (for a while, or for the next N calls)."""

    def __init__(self, mutating, describe):
        self._lock = threading.Lock()
        self.buckets = {"mutating": Bucket(*mutating), "describe": Bucket(*describe)}
        self._forced_until = 0.0
        self._forced_count = 0

    def set_bucket(self, name, capacity, rate):
        with self._lock:
            self.buckets[name] = Bucket(capacity, rate)

    def force(self, seconds=0.0, count=0):
        """Answer RequestLimitExceeded to every call for seconds, or to the next count calls."""
        with self._lock:
            self._forced_until = time.monotonic() + seconds if seconds > 0 else 0.0
            self._forced_count = max(0, int(count))

    def admit(self, action):
        """True when the call may proceed, False when it is throttled."""
        with self._lock:
            if self._forced_count > 0:
                self._forced_count -= 1
                return False
            if time.monotonic() < self._forced_until:
                return False
            return self.buckets[family(action)].take()

    def describe(self):
        with self._lock:
            left = max(0.0, self._forced_until - time.monotonic())
            return {"buckets": {k: b.describe() for k, b in self.buckets.items()},
                    "forced_seconds_left": round(left, 3),
                    "forced_calls_left": self._forced_count}
