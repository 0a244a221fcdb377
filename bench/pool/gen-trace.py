#!/usr/bin/env python3
"""Writes bench/pool/trace.tsv: a day of pod arrivals by shape, with bursts, for the warm pool's
simulation (bench/pool/poolsim.c). Fixed seed: the same file every run.

Per shape, arrivals are a Poisson process whose rate follows the day (a night low, a working-day
high), plus bursts (a deployment scaled up, a cron fan-out): a number of pods within a minute or
two. Each pod runs for a while: most are short (jobs, 2-10 min), the rest long (30 min - 4 h).

    bench/pool/gen-trace.py > bench/pool/trace.tsv

Lines: "# shape <type> <spot 0|1> <$/h> <seconds to ready>" first, then
"<arrival s> <type> <spot> <run s> <burst>" sorted by time, burst 0 for a pod of the steady
arrivals and the burst's number (1, 2, ...) for a pod of a burst (the simulator splits its hit
rate by it; no pool reads it)."""

import math
import random

SEED = 20261129
DAY = 86400
# type, spot, $/h (the catalog's us-east-1 price; spot: a typical spot price), ready s (EC2 boot
# and enrollment), pods per minute at the day's peak, bursts per day, pods per burst (lo, hi)
SHAPES = [
    ("t3.small", 0, 0.0208, 45, 1.5, 16, (5, 30)),
    ("t3.medium", 0, 0.0416, 45, 0.8, 10, (5, 20)),
    ("m5.large", 0, 0.096, 50, 0.4, 6, (10, 40)),
    ("c5.xlarge", 0, 0.17, 50, 0.15, 4, (5, 15)),
    ("m6g.large", 1, 0.0350, 55, 0.3, 8, (5, 25)),
]


def rate_at(t, peak):
    """Pods per second at time t: 10% of the peak at night, the peak around 14:00."""
    h = (t % DAY) / 3600.0
    day = max(0.0, math.sin(math.pi * (h - 6) / 14)) if 6 <= h <= 20 else 0.0
    return peak / 60.0 * (0.1 + 0.9 * day)


def run_time(rng):
    if rng.random() < 0.6:
        return int(rng.uniform(120, 600))
    return int(math.exp(rng.uniform(math.log(1800), math.log(14400))))


def main():
    rng = random.Random(SEED)
    pods = []
    burst = 0
    for typ, spot, price, ready, peak, bursts, (lo, hi) in SHAPES:
        print("# shape %s %d %.4f %d" % (typ, spot, price, ready))
        # thinning: candidate arrivals at the peak rate, kept with rate(t)/peak
        t, top = 0.0, peak / 60.0
        while True:
            t += rng.expovariate(top)
            if t >= DAY:
                break
            if rng.random() < rate_at(t, peak) / top:
                pods.append((int(t), typ, spot, run_time(rng), 0))
        for _ in range(bursts):
            burst += 1
            start = rng.uniform(6 * 3600, 22 * 3600)
            spread = rng.uniform(10, 120)
            for _ in range(rng.randint(lo, hi)):
                pods.append(
                    (int(start + rng.uniform(0, spread)), typ, spot, run_time(rng), burst))
    pods.sort()
    for p in pods:
        print("%d %s %d %d %d" % p)


if __name__ == "__main__":
    main()
