"""Section 12 of the benchmark: kill -9 of kiyot during 50 starts, repeated 10 times.

Each round (test/integration/crashstarts.py, what test_crash_starts asserts for 20 pods):
50 RunPodSandbox calls at once; kiyot killed with SIGKILL once a share of the cells have
their agent (10% in the first round, 8 points more each round, so the rounds catch launches
at every step: address taken, network half made, agent started and not recorded, enrolling,
serving); kiyot started again; each call retried with its config, all at once, as a kubelet's
pod workers would; in each pod a busybox container created and started and ExecSync of
`echo alive` in it; every sandbox stopped and removed. Counted per round:

  failed retries    retries that did not answer the pod's sandbox
  duplicate agents  agents beyond one in a cell (by the agents' bootstrap documents and by
                    the cells' network namespaces), after the retries and after the execs
  orphans           cells of the round that no sandbox owns once the retries answered, plus
                    what the cells left on the node (cell directories, network namespaces,
                    veths on the bridge, agents and shims, cgroups) 60 s after the removals
  failed execs      pods whose container did not answer ExecSync
  time              the round, from the first RunPodSandbox to the last leftover gone

bench(b) runs the rounds and stores them in b.results["crash_starts"]; report() prints them.
"""

import time

from crashstarts import CrashRound  # noqa: E402 - test/integration is on sys.path (bench.py)
from report import table  # noqa: E402

ROUNDS = 10
PODS = 50
KILL_FIRST = 0.10
KILL_STEP = 0.08


def one_round(b, i):
    """One round; its counts."""
    t0 = time.monotonic()
    r = CrashRound(b.t, PODS, prefix="bcrash%d" % i)
    kill_at = min(0.9, KILL_FIRST + KILL_STEP * i)
    rec = {"kill_at": kill_at}
    try:
        r.start_and_kill(kill_at)
        rec["killed_with"] = r.killed_with
        rec["first_answered"] = sum(v[0] == "ok" for v in r.first.values())
        t1 = time.monotonic()
        rec["failed"] = r.retry()
        rec["retry_s"] = time.monotonic() - t1
        rec["dup_after_retry"] = sum(len(p) - 1 for p in r.duplicates().values())
        rec["orphan_cells"] = r.orphans()
        rec["exec_failed"] = r.exec_each(b.env.ref("busybox:1"))
        rec["dup_after_exec"] = sum(len(p) - 1 for p in r.duplicates().values())
    finally:
        rec["remove_errors"] = r.remove_all()
        rec["left"] = r.wait_clean()
        rec["round_s"] = time.monotonic() - t0
    return rec


def bench(b):
    rounds = b.results["crash_starts"] = []
    for i in range(ROUNDS):
        rec = one_round(b, i)
        rounds.append(rec)
        print("  round %d: kill at %d%%, %d failed retries, %d duplicate agents, %d orphans, "
              "%.1f s" % (i + 1, rec["kill_at"] * 100, len(rec["failed"]),
                          max(rec["dup_after_retry"], rec["dup_after_exec"]),
                          len(rec["orphan_cells"]) + len(rec["left"]), rec["round_s"]),
              flush=True)


def report(results):
    rounds = results.get("crash_starts")
    if not rounds:
        return
    rows, total = [], {"failed": 0, "dup": 0, "orphans": 0, "left": 0, "exec": 0, "s": 0.0}
    for i, x in enumerate(rounds):
        dup = max(x.get("dup_after_retry", 0), x.get("dup_after_exec", 0))
        killed = x.get("killed_with") or (0, 0)
        row = [i + 1, "%d/%d" % killed, len(x.get("failed", {})), dup,
               len(x.get("orphan_cells", [])), len(x.get("left", [])),
               len(x.get("exec_failed", {})), "%.1f" % x["round_s"]]
        rows.append(row)
        total["failed"] += row[2]
        total["dup"] += row[3]
        total["orphans"] += row[4]
        total["left"] += row[5]
        total["exec"] += row[6]
        total["s"] += x["round_s"]
    rows.append(["all", "", total["failed"], total["dup"], total["orphans"], total["left"],
                 total["exec"], "%.1f" % total["s"]])
    notes = ["killed at: cells with a started agent / cells begun when kiyot was killed",
             "duplicate agents: agents beyond one per cell; orphan cells: cells no sandbox "
             "owns after the retries; left: what remained on the node after the removals",
             "goal (issue 10): 0 duplicate agents, 0 orphans, 0 failed retries"]
    for i, x in enumerate(rounds):
        for what, items in (("failed retry", x.get("failed", {})),
                            ("failed exec", x.get("exec_failed", {}))):
            for name, why in sorted(items.items())[:3]:
                notes.append("round %d %s %s: %s" % (i + 1, what, name, why[:160]))
        for item in (x.get("left") or [])[:3] + (x.get("remove_errors") or [])[:3]:
            notes.append("round %d: %s" % (i + 1, item[:160]))
    table("12. kill -9 of kiyot during %d starts, %d rounds" % (PODS, len(rounds)),
          ["round", "killed at", "failed retries", "dup. agents", "orphan cells", "left",
           "failed execs", "s"], rows, notes)

