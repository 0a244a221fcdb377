#!/usr/bin/env python3
"""Writes bench/pool/trace.tsv: a day of pod arrivals by shape, with bursts, for the warm pool's
simulation (bench/pool/poolsim.c). Fixed seed: the same file every run.

Per shape, arrivals are a Poisson process whose rate follows the day (a night low, a working-day
high), plus bursts (a deployment scaled up, a cron fan-out): a number of pods within a minute or
two. Each pod runs for a while: most are short (jobs, 2-10 min), the rest long (30 min - 4 h).

    bench/pool/gen-trace.py > bench/pool/trace.tsv

Half of each shape's bursts (the second half it draws, rounded down) are cron fan-outs: in
their place the shape has CronJobs making as many runs, the same jobs recurring through the
day on the hour or the half hour (every 2, 3, 4, 6 or 12 hours, hourly or every other hour in
working hours, or once a day), each run starting the job's
parallelism in pods within 1-10 s of its time (the Job controller, then scheduling). They come
from a random stream of their own (seed + 1): the steady arrivals and the other bursts are the
very lines the trace had before cron fan-outs were marked.

Lines: "# shape <type> <spot 0|1> <$/h> <seconds to ready>" and
"# cronjob <name> <type> <spot> <pods a run> <schedule: 5 fields>" first, then
"<arrival s> <type> <spot> <run s> <burst> [<cronjob>]" sorted by time, burst 0 for a pod of
the steady arrivals and the burst's number (1, 2, ...) for a pod of a burst (the simulator
splits its hit rate by it; no pool reads it), a cron fan-out's pods naming their CronJob (a
pool that foresees CronJobs knows its schedule and pods, as kiyot knows a CronJob's)."""

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


# CronJob schedules (minute, hour; every day): on the hour or the half hour, recurring
CRON_SCHEDULES = [
    ("0", "*/2"), ("30", "*/3"), ("0", "*/4"), ("30", "*/6"), ("0", "9-17"), ("30", "8-20/2"),
    ("0", "*/12"), ("30", "2"),
]


def runs_of(minute, hour):
    """The seconds of the day a schedule of those fields (a number, "*" or a range, with a
    step) runs at."""
    m = int(minute)
    if "/" in hour:
        span, step = hour.split("/")
        step = int(step)
    else:
        span, step = hour, 1
    lo, hi = (0, 23) if span == "*" else (list(map(int, span.split("-"))) * 2)[:2]
    return [h * 3600 + m * 60 for h in range(lo, hi + 1, step)]


def cronjobs(crng, typ, spot, n_bursts, lo, hi, pods, cron_burst):
    """CronJobs of the shape in place of n_bursts bursts: jobs drawn until their runs of the
    day make as many fan-outs; their lines and pods (burst numbers from cron_burst on).
    Returns the next burst number."""
    runs = 0
    k = 0
    while runs < n_bursts:
        k += 1
        # a schedule whose runs do not make more fan-outs than the bursts they stand for
        fit = [c for c in CRON_SCHEDULES if len(runs_of(*c)) <= n_bursts - runs]
        minute, hour = crng.choice(fit)
        if hour == "2":  # a daily job: at an hour of its own
            minute, hour = crng.choice(("0", "30")), str(crng.randint(0, 23))
        size = crng.randint(lo, hi)
        name = "%s-job%d" % (typ.replace(".", "-"), k)
        print("# cronjob %s %s %d %d %s %s * * *" % (name, typ, spot, size, minute, hour))
        for at in runs_of(minute, hour):
            cron_burst += 1
            runs += 1
            for _ in range(size):
                pods.append((int(at + crng.uniform(1, 10)), typ, spot, run_time(crng),
                             cron_burst, name))
    return cron_burst


def main():
    rng = random.Random(SEED)
    crng = random.Random(SEED + 1)  # the cron fan-outs': the other lines stay as they were
    pods = []
    burst = 0
    cron_burst = sum(b for *_, b, _ in SHAPES)  # numbers after the drawn bursts'
    for typ, spot, price, ready, peak, bursts, (lo, hi) in SHAPES:
        print("# shape %s %d %.4f %d" % (typ, spot, price, ready))
        # thinning: candidate arrivals at the peak rate, kept with rate(t)/peak
        t, top = 0.0, peak / 60.0
        while True:
            t += rng.expovariate(top)
            if t >= DAY:
                break
            if rng.random() < rate_at(t, peak) / top:
                pods.append((int(t), typ, spot, run_time(rng), 0, ""))
        kept = bursts - bursts // 2
        for i in range(bursts):
            burst += 1
            start = rng.uniform(6 * 3600, 22 * 3600)
            spread = rng.uniform(10, 120)
            for _ in range(rng.randint(lo, hi)):
                p = (int(start + rng.uniform(0, spread)), typ, spot, run_time(rng), burst, "")
                if i < kept:  # (a cron fan-out's draws are made all the same)
                    pods.append(p)
        cron_burst = cronjobs(crng, typ, spot, bursts // 2, lo, hi, pods, cron_burst)
    pods.sort(key=lambda p: p[:5])
    for p in pods:
        print(("%d %s %d %d %d" % p[:5]) + (" " + p[5] if p[5] else ""))


if __name__ == "__main__":
    main()
