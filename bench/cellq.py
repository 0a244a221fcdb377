"""Section 15 of the benchmark: calls into one cell at once.

Two pods of busybox:1 running `sleep`, each in its cell. Every call is a grpcio future sent
over one connection (the kubelet's), all started at once, each timed from its own send to its
answer (test/integration/criload.py's burst):

  alone    CALLS ContainerStats of the first pod's container, nothing else under way
  flood    CALLS ExecSync of the command into the first pod's container and CALLS
           ContainerStats of it, sent in turn; beside them OTHER ExecSync and OTHER
           ContainerStatus into the second pod (another cell, which the flood must not hold up)

The flood runs once with `true` and once with `sleep 0.5`. section(b) stores the figures in
b.results["cellq"]; report() prints p50, p99 and max of each kind of call.
"""

import sys

import criload  # noqa: E402 - test/integration is on sys.path (bench.py)
import harness  # noqa: E402
from report import table  # noqa: E402

CALLS = 200
OTHER = 20
EXEC_TIMEOUT_S = 60
T_BURST = 300
COMMANDS = (("true", ["true"]), ("sleep 0.5", ["sleep", "0.5"]))
SLEEP = ["sleep", "3600"]
BUSYBOX = "busybox:1"


def log(msg):
    sys.stderr.write("[bench] %s\n" % msg)
    sys.stderr.flush()


def pct(values, q):
    s = sorted(values)
    return s[min(len(s), max(1, -(-q * len(s) // 100))) - 1]


def section(b):
    pb = b.t.pb
    res = {"calls": CALLS, "other": OTHER, "rounds": []}
    b.results["cellq"] = res
    ref = b.env.ref(BUSYBOX)
    pods, cids = [], []
    conn = None
    try:
        for name in ("cellq-a", "cellq-b"):
            pod, cfg, _ = b.run_pod("%s-%s" % (name, b.tag))
            pods.append(pod)
            b.t.pull(ref, cfg)
            cid, _ = b.t.create(pod, cfg, ref, name="c", command=SLEEP, pull=False)
            b.t.start(cid)
            cids.append(cid)
        conn = criload.Connection(b.env.socket, pb)
        rt = conn.runtime
        rt.Version(pb.VersionRequest(), timeout=harness.T_CALL)
        stats = pb.ContainerStatsRequest(container_id=cids[0])
        status = pb.ContainerStatusRequest(container_id=cids[1])
        # warm: the agents' channels made, the feeds carrying usage
        rt.ExecSync(pb.ExecSyncRequest(container_id=cids[0], cmd=["true"], timeout=10),
                    timeout=30)
        rt.ExecSync(pb.ExecSyncRequest(container_id=cids[1], cmd=["true"], timeout=10),
                    timeout=30)
        rt.ContainerStats(stats, timeout=harness.T_CALL)

        log("15. %d ContainerStats at once, alone" % CALLS)
        fns = [lambda: rt.ContainerStats.future(stats, timeout=T_BURST)
               for _ in range(CALLS)]
        lat, errors, wall = criload.burst(fns, T_BURST)
        res["alone"] = {"stats": lat, "errors": errors[:5], "wall": wall}

        for label, cmd in COMMANDS:
            log("15. %d ExecSync of %s and %d ContainerStats into one cell at once, %d "
                "ExecSync and ContainerStatus into another" % (CALLS, label, CALLS, OTHER))
            ex = pb.ExecSyncRequest(container_id=cids[0], cmd=cmd, timeout=EXEC_TIMEOUT_S)
            ex_b = pb.ExecSyncRequest(container_id=cids[1], cmd=["true"],
                                      timeout=EXEC_TIMEOUT_S)
            kinds, fns = [], []
            for i in range(CALLS):
                kinds.append("exec")
                fns.append(lambda: rt.ExecSync.future(ex, timeout=T_BURST))
                kinds.append("stats")
                fns.append(lambda: rt.ContainerStats.future(stats, timeout=T_BURST))
                # the other cell's calls spread over the flood
                if i % (CALLS // OTHER) == 0:
                    kinds.append("other_exec")
                    fns.append(lambda: rt.ExecSync.future(ex_b, timeout=T_BURST))
                    kinds.append("other_status")
                    fns.append(lambda: rt.ContainerStatus.future(status, timeout=T_BURST))
            lat, errors, wall = criload.burst(fns, T_BURST)
            rnd = {"command": label, "errors": errors[:5], "n_errors": len(errors),
                   "wall": wall}
            for k, v in zip(kinds, lat):
                rnd.setdefault(k, []).append(v)
            res["rounds"].append(rnd)
            log("15. %s: ExecSync p50 %.0f ms p99 %.0f ms, ContainerStats p50 %.1f ms p99 "
                "%.1f ms, %d errors" % (label, pct(rnd["exec"], 50) * 1e3,
                                        pct(rnd["exec"], 99) * 1e3,
                                        pct(rnd["stats"], 50) * 1e3,
                                        pct(rnd["stats"], 99) * 1e3, len(errors)))
    finally:
        if conn:
            conn.close()
        for pod in pods:
            b.drop_pod(pod)
    res["done"] = True
    bad = res["alone"]["errors"] + [e for r in res["rounds"] for e in r["errors"]]
    if bad:
        raise RuntimeError("calls failed: %s" % "; ".join(bad[:4]))


def report(results):
    res = results.get("cellq")
    if not res or "done" not in res:
        return
    ms = lambda v: "%.1f" % (v * 1e3)  # noqa: E731
    rows = []

    def row(label, v):
        rows.append([label, len(v), ms(pct(v, 50)), ms(pct(v, 99)), ms(max(v))])
    row("ContainerStats alone", res["alone"]["stats"])
    for r in res["rounds"]:
        row("flood of %s: ExecSync" % r["command"], r["exec"])
        row("flood of %s: ContainerStats" % r["command"], r["stats"])
        row("  other cell: ExecSync true", r["other_exec"])
        row("  other cell: ContainerStatus", r["other_status"])
    table("15. Calls into one cell at once (ms)", ["", "calls", "p50", "p99", "max"], rows,
          ["one connection (Python grpcio futures), every call started at once and timed "
           "from its own send to its answer; the flood: %d ExecSync and %d ContainerStats "
           "of one container in turn, %d ExecSync and ContainerStatus into a second pod's "
           "cell among them" % (res["calls"], res["calls"], res["other"]),
           "goal: ContainerStats p99 < 100 ms during the flood (%s)" % ", ".join(
               "%s: %s ms" % (r["command"], ms(pct(r["stats"], 99))) for r in res["rounds"])])
