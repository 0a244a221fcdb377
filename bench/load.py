"""Sections 9, 10 and 11 of the benchmark: kiyot under load.

  9. kiyot's memory under mutated CRI requests (test/integration/criload.py's Mutator: every
     method, valid messages with random fields, mutated and truncated ones, garbage, huge
     fields), KIYOT_BENCH_FUZZ_S seconds (default 60; the issue's figure is for 600): VmRSS
     idle before, its peak, right after and FUZZ_SETTLE_S after the load stops
 10. 1000 CRI calls at once (a mix of Version, Status, ListPodSandbox, ListContainers,
     ContainerStatus and ImageStatus; then Version alone), kiyot next to the suite's private
     containerd in the same run, over one connection (the kubelet's) and over 100 from 4
     processes: p50, p95, p99 of each call from its own send to its answer
 11. Version one call after another while 100 PullImage calls stall on a registry that drips
     its layers (test_slow_deps.py's stand-in), next to the same calls with no pull under way

Each function takes the Bench (bench.py) and stores its figures in bench.results; report()
prints them.
"""

import os
import random
import sys
import time

import criload  # noqa: E402 - test/integration is on sys.path (bench.py)
import harness  # noqa: E402
from report import ratio, table  # noqa: E402

FUZZ_S = int(os.environ.get("KIYOT_BENCH_FUZZ_S", "60"))
FUZZ_SETTLE_S = 30
FUZZ_INFLIGHT = 32
FUZZ_SEED = 10

BURST = 1000
BURST_ROUNDS = 3
# (processes, connections in each): the kubelet's one connection; many clients of the node,
# sent from several processes so that one interpreter does not pace the calls
BURST_CLIENTS = ((1, 1), (4, 25))
T_BURST = 120

STALLED = 100
STALL_VERSION_S = 5
T_STALL = 300

BUSYBOX = "busybox:1"
SLEEP = ["sleep", "3600"]


def log(msg):
    sys.stderr.write("[bench] %s\n" % msg)
    sys.stderr.flush()


def vmrss(pid):
    """VmRSS of pid in bytes (None when it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def threads_of(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return None


# ---- 9. memory under mutated requests ----

def section_fuzz_memory(b):
    env = b.env
    pid = env.kiyot.pid
    ref = env.ref(BUSYBOX)
    log("9. kiyot memory under mutated CRI requests, %d s" % FUZZ_S)
    pod, cfg, _ = b.run_pod("fuzz-%s" % b.tag)
    b.t.pull(ref, cfg)
    cid, _ = b.t.create(pod, cfg, ref, name="c", command=SLEEP, pull=False)
    b.t.start(cid)
    pb = b.t.pb
    known = {p.id for p in env.client.runtime.ListPodSandbox(
        pb.ListPodSandboxRequest(), timeout=harness.T_CALL).items}
    time.sleep(2)
    res = {"seconds": FUZZ_S, "inflight": FUZZ_INFLIGHT, "idle": vmrss(pid),
           "idle_threads": threads_of(pid), "samples": []}
    b.results["fuzz_memory"] = res
    m = criload.Mutator(pb, random.Random(FUZZ_SEED), ids=[pod, cid], images=[ref])
    fz = criload.Fuzz(env.socket, pb, m, inflight=FUZZ_INFLIGHT)
    t0 = time.monotonic()
    fz.run(FUZZ_S, on_tick=lambda: res["samples"].append((time.monotonic() - t0, vmrss(pid))))
    res.update(sent=fz.sent, bytes=fz.bytes, codes=fz.codes, wall=time.monotonic() - t0,
               end=vmrss(pid), peak_threads=threads_of(pid))
    if env.kiyot.poll() is not None:
        raise RuntimeError("kiyot exited (%s) under the mutated requests; see %s" %
                           (env.kiyot.returncode, env.kiyot_log))
    # pods a valid RunPodSandbox made: gone before the settled figure
    made = [p.id for p in env.client.runtime.ListPodSandbox(
        pb.ListPodSandboxRequest(), timeout=harness.T_CALL).items if p.id not in known]
    for p in made:
        b.drop_pod(p)
    res["pods_made"] = len(made)
    t1 = time.monotonic()
    while time.monotonic() - t1 < FUZZ_SETTLE_S:
        res["samples"].append((time.monotonic() - t0, vmrss(pid)))
        time.sleep(1)
    res["settled"] = vmrss(pid)
    res["peak"] = max(x[1] for x in res["samples"] if x[1])
    b.drop_pod(pod)


def report_fuzz(res):
    mib = lambda v: "-" if v is None else "%.1f" % (v / 1048576.0)  # noqa: E731
    rows = [["idle, before", mib(res["idle"]), "", res["idle_threads"]],
            ["peak under load", mib(res["peak"]), ratio(res["peak"], res["idle"], 1), ""],
            ["when the load stopped", mib(res["end"]), ratio(res["end"], res["idle"], 1),
             res["peak_threads"]],
            ["%d s after it stopped" % FUZZ_SETTLE_S, mib(res["settled"]),
             ratio(res["settled"], res["idle"], 2), ""]]
    codes = ", ".join("%s %d" % kv for kv in sorted(res["codes"].items(), key=lambda x: -x[1]))
    table("9. kiyot memory under %d s of mutated CRI requests (VmRSS, MiB)" % res["seconds"],
          ["", "RSS", "x idle", "threads"], rows,
          ["%d requests (%.0f MiB), %d in flight, every method: valid messages with random "
           "fields, mutated, truncated, garbage, huge fields" %
           (res["sent"], res["bytes"] / 1048576.0, res["inflight"]),
           "answers: " + codes,
           "pods a valid RunPodSandbox made, removed before the settled figure: %d" %
           res["pods_made"],
           "goal: %d s after the load, within 2x of idle (%s)" %
           (FUZZ_SETTLE_S, ratio(res["settled"], res["idle"], 2))])


# ---- 10. 1000 calls at once, next to containerd ----

def section_burst(b):
    log("10. %d CRI calls at once, next to containerd: starting containerd" % BURST)
    b.vs_containerd(lambda sides, version: burst(b, sides, version))


def burst(b, sides, version):
    res = {"containerd_version": version, "n": BURST, "rounds": BURST_ROUNDS}
    b.results["burst"] = res
    setups = {}
    for s in sides:
        pod, cfg, _ = s.run_pod("burst-%s-%s" % (s.name[:5], b.tag))
        s.pull(cfg)
        cid, _ = s.t.create(pod, cfg, s.ref, name="c", command=SLEEP, pull=False)
        s.t.start(cid)
        sock = b.env.socket if s.name == "kiyot" else b.ctrd.socket
        conn = criload.Connection(sock, b.t.pb)
        conn.runtime.Version(conn.pb.VersionRequest(), timeout=harness.T_CALL)
        setups[s.name] = (pod, cid, conn, sock)
        res[s.name] = {"errors": []}
    try:
        for i in range(BURST_ROUNDS):
            for s in (sides if i % 2 == 0 else sides[::-1]):
                _, cid, conn, sock = setups[s.name]
                for procs, conns in BURST_CLIENTS:
                    for kind in ("mix", "version"):
                        if procs == 1:
                            lat, errors, wall = criload.burst(criload.burst_calls(
                                [conn], BURST, kind, cid, s.ref, T_BURST), T_BURST)
                        else:
                            lat, errors, wall = criload.burst_procs(
                                sock, procs, conns, BURST // procs, kind, cid, s.ref, T_BURST)
                        res[s.name].setdefault("%s/%d" % (kind, procs * conns), []).append(
                            {"lat": lat, "wall": wall})
                        res[s.name]["errors"].extend(errors[:5])
                        log("10. %s %s over %d connections, round %d: p50 %.0f ms p99 %.0f "
                            "ms, %d errors" % (s.name, kind, procs * conns, i,
                                               pct(lat, 50) * 1e3, pct(lat, 99) * 1e3,
                                               len(errors)))
    finally:
        for s in sides:
            pod, _, conn, _ = setups.get(s.name, (None, None, None, None))
            if conn:
                conn.close()
            if pod:
                s.drop_pod(pod)
    res["done"] = True
    bad = [(n, e) for n in ("kiyot", "containerd") for e in res[n]["errors"]]
    if bad:
        raise RuntimeError("calls failed in the bursts: %s" % "; ".join(
            "%s: %s" % x for x in bad[:4]))


def pct(values, q):
    s = sorted(values)
    return s[min(len(s), max(1, -(-q * len(s) // 100))) - 1]


def report_burst(res):
    rows = []
    worst = 0
    for procs, conns in BURST_CLIENTS:
        n = procs * conns
        for kind, label in (("mix", "mix"), ("version", "Version")):
            key = "%s/%d" % (kind, n)
            k = [x for r in res["kiyot"][key] for x in r["lat"]]
            c = [x for r in res["containerd"][key] for x in r["lat"]]
            kw = max(r["wall"] for r in res["kiyot"][key])
            cw = max(r["wall"] for r in res["containerd"][key])
            worst = max(worst, pct(k, 99))
            rows.append(["%s, %d conn." % (label, n)] + [
                "%.0f" % (pct(v, q) * 1e3) for v in (k, c) for q in (50, 95, 99)] +
                [ratio(pct(k, 50), pct(c, 50), 2), ratio(pct(k, 99), pct(c, 99), 2),
                 "%.0f / %.0f" % (kw * 1e3, cw * 1e3)])
    table("10. %d CRI calls at once, kiyot vs containerd (ms)" % res["n"],
          ["", "kiyot p50", "p95", "p99", "containerd p50", "p95", "p99", "ratio p50",
           "ratio p99", "slowest burst"], rows,
          ["%d bursts per runtime, kind and number of connections, the runtimes in turn; the "
           "calls spread over the connections in turn (Python grpcio futures; %s); each call "
           "from its own send to its answer" % (res["rounds"], ", ".join(
               "%d conn.: %d process%s" % (p * c, p, "es" if p > 1 else "")
               for p, c in BURST_CLIENTS)),
           "mix: %s in turn; containerd: %s" % (", ".join(criload.MIX),
                                                res["containerd_version"]),
           "goal: p99 < 1 s (worst p99 of kiyot's rows: %.0f ms)" % (worst * 1e3)])


# ---- 11. Version while pulls stall ----

def section_stalled_pulls(b):
    import test_slow_deps as sd  # its dripping registry stand-in
    env = b.env
    log("11. Version while %d pulls stall on a dripping registry" % STALLED)
    sd.drip_netns_up()
    drip = None
    futs = []
    try:
        drip = sd.DripRegistry(sd.listen_in_netns(sd.DRIP_NS, (sd.DRIP_IP, 0)))
        drip.tags = {"slow": ["b%s%03d" % (b.tag, i) for i in range(STALLED)], "stall": []}
        env.extra_config = '  "%s": { insecure: true }\n' % drip.addr
        restart(b)
        res = {"n": STALLED}
        b.results["stalled_pulls"] = res
        pb = b.t.pb
        pod, cfg, _ = b.run_pod("stall-%s" % b.tag)
        res["idle"] = version_loop(env.client, STALL_VERSION_S)
        futs = [env.client.image.PullImage.future(pb.PullImageRequest(
            image=pb.ImageSpec(image=drip.ref("slow", t)), sandbox_config=cfg),
            timeout=T_STALL) for t in drip.tags["slow"]]
        harness.wait_for(lambda: drip.open_layers(), 60, "a layer to drip")
        time.sleep(1)
        res["stalled"] = version_loop(env.client, STALL_VERSION_S)
        res["dripping"] = len(drip.open_layers())
        res["pending"] = sum(1 for f in futs if not f.done())
        for f in futs:
            f.cancel()
        drip.hang_up()
        b.drop_pod(pod)
    finally:
        for f in futs:
            f.cancel()
        if drip:
            drip.stop()
        else:
            sd.drip_netns_down()
        if env.extra_config:
            env.extra_config = ""
            restart(b)


def restart(b):
    b.env.restart_kiyot()
    b.t.c = b.env.client
    b.t.pb = b.env.client.pb


def version_loop(client, seconds):
    """Version one call after another for `seconds`: the latency of each."""
    req = client.pb.VersionRequest(version="v1")
    lat = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.perf_counter()
        client.runtime.Version(req, timeout=30)
        lat.append(time.perf_counter() - t0)
    return lat


def report_stalled(res):
    rows = []
    for key, label in (("idle", "no pull under way"),
                       ("stalled", "%d pulls stalled" % res["n"])):
        v = res[key]
        rows.append([label, len(v), "%.2f" % (pct(v, 50) * 1e3), "%.2f" % (pct(v, 99) * 1e3),
                     "%.2f" % (max(v) * 1e3)])
    table("11. CRI Version while PullImage calls stall on a dripping registry (ms)",
          ["", "calls", "p50", "p99", "max"], rows,
          ["one call after another for %d s each (Python grpcio); the pulls, with one pod's "
           "sandbox config, each a layer of its own dripped at 2 KB/s: %d still pending, %d "
           "layers dripping when measured" % (STALL_VERSION_S, res["pending"], res["dripping"]),
           "goal: p99 < 50 ms (%.2f ms; ratio to no pull %s)" % (
               pct(res["stalled"], 99) * 1e3,
               ratio(pct(res["stalled"], 99), pct(res["idle"], 99), 2))])


def report(results):
    """Prints the tables of the sections that measured all they need."""
    for key, need, fn in (("fuzz_memory", "settled", report_fuzz),
                          ("burst", "done", report_burst),
                          ("stalled_pulls", "stalled", report_stalled)):
        r = results.get(key)
        if r and need in r:
            fn(r)
