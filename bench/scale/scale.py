#!/usr/bin/python3
"""Kiyot at scale through the EC2 provider: figures and ratios, no assertions about speed.

N pods (KIYOT_SCALE_PODS, default 500) are started with RunPodSandbox from a pool of client
threads (KIYOT_SCALE_THREADS, default 50, like many kubelet workers) against a kiyot whose
cells.provider is ec2 and whose endpoint is the suite's EC2 endpoint (test/ec2/ec2sim.py) with
its default token buckets, so throttling is real. Each instance boots as a local cell
(`kiyot local-cell launch`), so a sandbox is READY only once its instance runs and its agent
answers. Steps grow from a baseline of KIYOT_SCALE_BASE pods (default 20) through
KIYOT_SCALE_STEPS (default 100,200) to N, and stop growing once a step needs more than
KIYOT_SCALE_STEP_LIMIT seconds (default 240) to get every pod READY. Each step then stops and removes every pod and checks that every
instance ends terminated and no cell, agent or network namespace is left.

    scale.py run            (bench/scale/run.sh takes the lock and calls this)
    scale.py cleanup DIR    tear down what a run killed hard left in DIR
"""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))
sys.path.insert(0, os.path.join(REPO, "bench"))

import cri  # noqa: E402
import harness  # noqa: E402
from ec2env import KEY, SECRET, Ec2Sim, tags_of  # noqa: E402
from report import ratio, table  # noqa: E402

# Inside the suite's 10.78.0.0/16, so the suite's cleanup recognises these cells; a /17 holds
# 32 765 cells (the suite's EC2 tests use a /24, too small for 500).
CELL_CIDR = "10.78.128.0/17"
CLUSTER_TAG = "kiyot.elotl.co/cluster-id"

PODS = int(os.environ.get("KIYOT_SCALE_PODS", "500"))
THREADS = int(os.environ.get("KIYOT_SCALE_THREADS", "50"))
STEPS = [int(x) for x in os.environ.get("KIYOT_SCALE_STEPS", "100,200").split(",") if x]
STEP_LIMIT = float(os.environ.get("KIYOT_SCALE_STEP_LIMIT", "240"))
BOOT_PARALLEL = int(os.environ.get("KIYOT_SCALE_BOOT_PARALLEL", "1"))
CONTAINERS = int(os.environ.get("KIYOT_SCALE_CONTAINERS", "10"))
BASE = int(os.environ.get("KIYOT_SCALE_BASE", "20"))
# the fraction of RunInstances that answer InsufficientInstanceCapacity (at random), so the
# launches' fallbacks to the next type run at scale
ICE_RATE = float(os.environ.get("KIYOT_SCALE_ICE_RATE", "0.1"))
# kiyot at rest again: gRPC closes an idle connection 5-10 s after its last call, and the
# periodic trim (every 10 s) must pass after that; 12 s caught some still open or untrimmed
# (runs of one build at 500 pods: 69.1 MiB at 12 s, 61.4 at 60 s, 61.7 at 30 s)
SETTLE_S = int(os.environ.get("KIYOT_SCALE_SETTLE_S", "30"))
KUBELET_TIMEOUT = 120.0  # the kubelet's default --runtime-request-timeout (2 min)

T_RUN = 900  # one RunPodSandbox, queueing in kiyot included
STEP_DEADLINE = max(300, 2 * STEP_LIMIT)  # a step's RunPodSandbox calls, retries included
# Every cell-agent holds an inotify instance; the default limit per user (128) caps local
# cells on one host at about that many. The run raises it to this (restored at the end).
INOTIFY_INSTANCES = max(1024, 2 * PODS + 256)
INOTIFY = "/proc/sys/fs/inotify/max_user_instances"
T_STOP = 300
T_GONE = 600  # every instance terminated, every cell gone
RUN_TRIES = STOP_TRIES = 10
RETRY_S = 1.0
SAMPLE_S = 0.2
HZ = os.sysconf("SC_CLK_TCK")


def log(msg):
    sys.stderr.write("[scale %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


# ---- statistics and tables ----

def pct(values, q):
    """Nearest-rank percentile (q in 0..100); None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(1, int(math.ceil(q / 100.0 * len(s))))
    return s[min(k, len(s)) - 1]


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


# ---- processes ----

def cpu_seconds(pid):
    """utime + stime of pid in seconds (threads included); None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / HZ


def proc_status(pid):
    """{"rss", "hwm"} in bytes and "threads" from /proc/PID/status, "fds" from /proc/PID/fd."""
    res = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == "VmRSS":
                    res["rss"] = int(v.split()[0]) * 1024
                elif k == "VmHWM":
                    res["hwm"] = int(v.split()[0]) * 1024
                elif k == "Threads":
                    res["threads"] = int(v)
        res["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except (OSError, ValueError):
        return None
    return res


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


class Sampler:
    """Samples a process every SAMPLE_S: peaks of RSS, threads and open files since mark(),
    and the machine's lowest MemAvailable."""

    def __init__(self, pid):
        self.pid = pid
        self.lock = threading.Lock()
        self.stop_ev = threading.Event()
        self.mark()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def mark(self):
        with self.lock:
            self.peak = {"rss": 0, "threads": 0, "fds": 0}
            self.min_avail = None

    def _loop(self):
        while not self.stop_ev.wait(SAMPLE_S):
            st = proc_status(self.pid)
            avail = mem_available()
            with self.lock:
                if st:
                    for k in self.peak:
                        self.peak[k] = max(self.peak[k], st.get(k, 0))
                if avail is not None and (self.min_avail is None or avail < self.min_avail):
                    self.min_avail = avail

    def peaks(self):
        with self.lock:
            return dict(self.peak, min_avail=self.min_avail)

    def close(self):
        self.stop_ev.set()
        self.thread.join(2)


# ---- ec2sim and the EC2 kiyot ----

def start_kiyot(work, sim):
    """kiyot serve with cells.provider ec2 against sim; returns (Popen, cri.Client)."""
    state = os.path.join(work, "ec2-state")
    sock = os.path.join(work, "kiyot-ec2.sock")
    cfg = os.path.join(work, "kiyot-ec2.yaml")
    with open(cfg, "w") as f:
        f.write("cells:\n  provider: ec2\n"
                "ec2:\n  endpoint: %s\n  imageId: ami-0kiyotcell\n  region: us-east-1\n"
                "  noInstanceMetadata: true\n  launchTimeoutSeconds: 600\n"
                "registries:\n  \"%s\": { insecure: true }\n" % (sim.endpoint, harness.REGISTRY))
    envv = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    logf = open(os.path.join(work, "kiyot-ec2.log"), "a")
    proc = subprocess.Popen(
        [os.path.join(harness.BUILD, "kiyot"), "serve", "--socket", sock, "--state-dir", state,
         "--config", cfg, "--log-level", "info"],
        stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, env=envv, start_new_session=True)
    logf.close()

    def ready():
        if proc.poll() is not None:
            raise RuntimeError("kiyot (ec2) exited; see %s/kiyot-ec2.log" % work)
        c = cri.Client(sock)
        try:
            c.runtime.Version(c.pb.VersionRequest(), timeout=2)
        except Exception:
            c.close()
            raise
        return c
    return proc, harness.wait_for(ready, 30, "the ec2 kiyot to answer")


def save_pids(work, **pids):
    path = os.path.join(work, "scale.json")
    try:
        with open(path) as f:
            d = json.load(f)
    except (OSError, ValueError):
        d = {}
    d.update(pids)
    with open(path, "w") as f:
        json.dump(d, f)


class Probe:
    """Calls CRI Version once a second on its own channel while a phase runs, as the kubelet
    keeps calling the runtime (status, relists) while pods start: how long other calls wait
    while kiyot's workers are busy with RunPodSandbox."""

    def __init__(self, socket_path):
        self.client = cri.Client(socket_path)
        self.times = []
        self.failures = 0
        self.stop_ev = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        pb = self.client.pb
        while not self.stop_ev.wait(1.0):
            t = time.monotonic()
            try:
                self.client.runtime.Version(pb.VersionRequest(version="v1"),
                                            timeout=KUBELET_TIMEOUT)
                self.times.append(time.monotonic() - t)
            except Exception:  # noqa: BLE001 - counted
                self.failures += 1

    def close(self):
        self.stop_ev.set()
        self.thread.join(KUBELET_TIMEOUT + 5)
        self.client.close()
        return {"samples": self.times, "failures": self.failures}


# ---- the host side of cells ----

def our_netns():
    """Network namespaces named kiyot-* that hold an address of CELL_CIDR."""
    import ipaddress
    net = ipaddress.ip_network(CELL_CIDR)
    res = []
    for ns in harness.netns_list():
        if ns.startswith(harness.NETNS_PREFIX):
            if any(ipaddress.ip_address(a) in net for a in harness.netns_addrs(ns)):
                res.append(ns)
    return res


def our_agents(work):
    """Pids of cell-agent processes started for this run's cells."""
    res = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        argv = harness.pid_cmdline(int(p))
        if argv and os.path.basename(argv[0]) == "cell-agent" and any(work in a for a in argv):
            res.append(int(p))
    return res


# ---- one step ----

def pool(items, fn, threads):
    """Runs fn(item) on `threads` threads; returns [(item, result or None, error or None)]."""
    out, lock, it = [], threading.Lock(), iter(list(items))

    def worker():
        while True:
            with lock:
                item = next(it, None)
            if item is None:
                return
            try:
                r, e = fn(item), None
            except Exception as ex:  # noqa: BLE001 - reported
                r, e = None, cri.details_of(ex) if cri.code_of(ex) else repr(ex)
            with lock:
                out.append((item, r, e))
    ths = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    return out


def stats_delta(sim):
    """ec2sim's counters since the last reset: {calls, ok, errors, total}."""
    return sim.admin("stats")


class Step:
    def __init__(self, run, n, label):
        self.run = run
        self.n = n
        self.label = label
        self.r = {"pods": n, "label": label}

    def launch(self):
        run, sim, c = self.run, self.run.sim, self.run.client
        pb = c.pb
        sim.admin("stats/reset", {})
        run.sampler.mark()
        cpu0, sim0 = cpu_seconds(run.kiyot.pid), cpu_seconds(sim.proc.pid)
        t0 = time.monotonic()

        retried = []

        def one(i):
            cfg = run.t.sandbox_config(name="scale-%s-%04d" % (self.label, i))
            s = time.monotonic()
            # the kubelet retries a failed RunPodSandbox with the same config (the same pod
            # UID: kiyot's launch is idempotent) on its next sync of the pod
            for attempt in range(RUN_TRIES):
                try:
                    left = t0 + STEP_DEADLINE - time.monotonic()
                    if left <= 1:
                        raise RuntimeError("step deadline (%d s) passed" % STEP_DEADLINE)
                    pid = c.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg),
                                                  timeout=min(T_RUN, left)).pod_sandbox_id
                    break
                except Exception as ex:  # noqa: BLE001 - counted, then retried
                    with run.lock:
                        retried.append(cri.details_of(ex) or repr(ex))
                    if attempt + 1 == RUN_TRIES:
                        raise
                    time.sleep(RETRY_S)
            e = time.monotonic()
            return {"pod": pid, "cfg": cfg, "latency": e - s, "done": e - t0,
                    "tries": attempt + 1}
        probe = Probe(os.path.join(run.env.work, "kiyot-ec2.sock"))
        res = pool(range(self.n), one, THREADS)
        wall = time.monotonic() - t0
        self.r["version_latency"] = probe.close()
        self.pods = [r for _, r, e in res if r]
        errors = [e for _, _, e in res if e]
        r = self.r
        r["launch_stats"] = stats_delta(sim)
        r["launch_cpu"] = cpu_seconds(run.kiyot.pid) - cpu0
        r["launch_sim_cpu"] = cpu_seconds(sim.proc.pid) - sim0
        r["launch_peak"] = run.sampler.peaks()
        r["at_end"] = proc_status(run.kiyot.pid)
        r["latency"] = [p["latency"] for p in self.pods]
        r["done"] = [p["done"] for p in self.pods]
        r["wall"] = wall
        r["errors"] = errors[:20]
        r["n_errors"] = len(errors)
        r["run_retried"] = len(retried)
        r["run_retry_errors"] = retried[:5]
        r["pods_retried"] = sum(1 for p in self.pods if p["tries"] > 1)
        log("%s: %d/%d RunPodSandbox answered in %.1f s (%d failed calls retried, %d pods "
            "gave up%s)" % (self.label, len(self.pods), self.n, wall, len(retried), len(errors),
            ": " + errors[0] if errors else ""))
        self.check_running()
        # what the pods cost once nothing happens: kiyot's connections to agents idle, the
        # periodic trim passed
        time.sleep(SETTLE_S)
        r["steady"] = proc_status(run.kiyot.pid)
        log("%s: RSS %.1f MiB with every pod up, %.1f MiB %d s later" % (
            self.label, r["at_end"]["rss"] / 1048576.0, r["steady"]["rss"] / 1048576.0,
            SETTLE_S))

    def check_running(self):
        """Every sandbox READY, one running instance of ours per pod, distinct addresses."""
        run, c = self.run, self.run.client
        ready = 0
        ips = {}
        for p in self.pods:
            st = c.runtime.PodSandboxStatus(c.pb.PodSandboxStatusRequest(
                pod_sandbox_id=p["pod"]), timeout=60).status
            if st.state == c.pb.SANDBOX_READY:
                ready += 1
            p["ip"] = st.network.ip
            ips.setdefault(st.network.ip, []).append(p["pod"])
        live = [i for i in run.sim.instances() if i.get("state") == "running" and
                tags_of(i).get(CLUSTER_TAG)]
        inst_ips = {}
        for i in live:
            ip = i.get("ip") or i.get("private_ip")
            inst_ips.setdefault(ip, []).append(i["instance_id"])
        self.r.update(
            ready=ready, running_instances=len(live),
            dup_pod_ips=sum(len(v) for k, v in ips.items() if len(v) > 1),
            dup_instance_ips=sum(len(v) for k, v in inst_ips.items() if len(v) > 1),
            netns=len(our_netns()), agents=len(our_agents(run.env.work)))
        log("%s: %d READY, %d running instances, %d netns, %d agents, %d pods sharing an IP, "
            "%d instances sharing an IP" % (self.label, ready, len(live), self.r["netns"],
                                            self.r["agents"], self.r["dup_pod_ips"],
                                            self.r["dup_instance_ips"]))

    def containers(self, k):
        """One container (hello:1, an HTTP server) in k of the pods: RUNNING and answering."""
        run = self.run
        t = run.t
        ok, errors = 0, []
        for p in self.pods[:k]:
            try:
                cid, _ = t.create(p["pod"], p["cfg"], run.env.ref("hello:1"), name="hello")
                t.start(cid)
                t.wait_state(cid, "CONTAINER_RUNNING", timeout=120)
                if "hello from kiyot" in t.wait_http(p["ip"], timeout=60):
                    ok += 1
            except Exception as e:  # noqa: BLE001 - reported
                errors.append("%s: %s" % (p["pod"][:12], cri.details_of(e) or repr(e)))
        self.r["containers"] = {"tried": min(k, len(self.pods)), "serving": ok,
                                "errors": errors[:5]}
        log("%s: %d of %d containers RUNNING and serving HTTP%s" % (
            self.label, ok, min(k, len(self.pods)), "; " + errors[0] if errors else ""))

    def teardown(self):
        run, sim, c = self.run, self.run.sim, self.run.client
        pb = c.pb
        sim.admin("stats/reset", {})
        run.sampler.mark()
        cpu0 = cpu_seconds(run.kiyot.pid)
        t0 = time.monotonic()

        retried = []

        def one(p):
            # the kubelet retries a failed StopPodSandbox on its next sync of the pod
            for attempt in range(STOP_TRIES):
                try:
                    c.runtime.StopPodSandbox(pb.StopPodSandboxRequest(
                        pod_sandbox_id=p["pod"]), timeout=T_STOP)
                    break
                except Exception as ex:  # noqa: BLE001 - counted, then retried
                    with self.run.lock:
                        retried.append(cri.details_of(ex) or repr(ex))
                    if attempt + 1 == STOP_TRIES:
                        raise
                    time.sleep(RETRY_S)
            c.runtime.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=p["pod"]),
                                       timeout=T_STOP)
            return time.monotonic() - t0
        res = pool(self.pods, one, THREADS)
        r = self.r
        r["stop_wall"] = time.monotonic() - t0
        r["stop_errors"] = [e for _, _, e in res if e][:20]
        r["stop_retried"] = len(retried)
        r["stop_retry_errors"] = retried[:5]
        r["stop_stats"] = stats_delta(sim)
        r["stop_cpu"] = cpu_seconds(run.kiyot.pid) - cpu0
        r["stop_peak"] = run.sampler.peaks()
        log("%s: %d pods stopped and removed in %.1f s (%d errors)" % (
            self.label, len(self.pods), r["stop_wall"], len(r["stop_errors"])))
        # the cloud: every instance of ours terminated
        deadline = time.monotonic() + (60 if r["stop_errors"] else T_GONE)
        while True:
            left = [i for i in sim.instances() if tags_of(i).get(CLUSTER_TAG) and
                    i.get("state") != "terminated"]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(1)
        r["terminated_wall"] = time.monotonic() - t0
        r["leaked"] = [(i["instance_id"], i.get("state")) for i in left]
        # the host: no cell, agent or netns left
        deadline = time.monotonic() + 60
        while True:
            ns, ag = our_netns(), our_agents(run.env.work)
            if (not ns and not ag) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        r["left_netns"], r["left_agents"] = len(ns), len(ag)
        time.sleep(1)
        r["after"] = proc_status(run.kiyot.pid)
        # kiyot hands freed memory back every 10 s (common/memtrim): what is left after that
        time.sleep(SETTLE_S)
        r["settled"] = proc_status(run.kiyot.pid)
        log("%s: all terminated after %.1f s; leaked instances %d, netns left %d, agents "
            "left %d" % (self.label, r["terminated_wall"], len(r["leaked"]), len(ns),
                         len(ag)))


# ---- the run ----

class Run:
    def __init__(self):
        self.env = harness.Env(work=tempfile.mkdtemp(prefix="kiyot-scale-"))
        self.sim = None
        self.kiyot = None
        self.client = None
        self.sampler = None
        self.steps = []
        self.notes = []
        self.lock = threading.Lock()

    def setup(self):
        log("work directory %s; kiyot from %s" % (self.env.work, harness.BUILD))
        with open(INOTIFY) as f:
            old = int(f.read())
        if old < INOTIFY_INSTANCES:
            save_pids(self.env.work, inotify_instances=old)
            with open(INOTIFY, "w") as f:
                f.write(str(INOTIFY_INSTANCES))
            log("fs.inotify.max_user_instances %d -> %d for the run (one per cell-agent)" %
                (old, INOTIFY_INSTANCES))
        self.env.setup(with_kiyot=False)
        self.sim = Ec2Sim(self.env.work, CELL_CIDR,
                          ["--boot-parallel", str(BOOT_PARALLEL), "--terminated-ttl", "3600"],
                          admin_timeout=60, stop_timeout=300)
        save_pids(self.env.work, sim_pid=self.sim.proc.pid)
        if ICE_RATE > 0:
            self.sim.admin("fault", {"action": "RunInstances",
                                     "code": "InsufficientInstanceCapacity", "rate": ICE_RATE})
        self.kiyot, self.client = start_kiyot(self.env.work, self.sim)
        save_pids(self.env.work, kiyot_pid=self.kiyot.pid)
        self.env.client = self.client
        self.t = harness.KiyotTest()
        self.t.env = self.env
        self.t.c = self.client
        self.t.pb = self.client.pb
        self.sampler = Sampler(self.kiyot.pid)
        self.idle = proc_status(self.kiyot.pid)
        self.idle_cpu = cpu_seconds(self.kiyot.pid)

    def plan(self):
        base = max(1, min(BASE, PODS))
        return [base] + sorted(set(s for s in STEPS if base < s < PODS)) + \
            ([PODS] if PODS > base else [])

    def go(self):
        plan = self.plan()
        log("plan: %s pods (baseline first), %d client threads, ec2sim --boot-parallel %d" %
            (plan, THREADS, BOOT_PARALLEL))
        for k, n in enumerate(plan):
            label = "base" if k == 0 else "n%d" % n
            st = Step(self, n, label)
            self.steps.append(st)
            st.launch()
            if n == plan[-1] and CONTAINERS:
                st.containers(CONTAINERS)
            st.teardown()
            if k + 1 < len(plan) and st.r["wall"] > STEP_LIMIT:
                self.notes.append("stopped growing after %d pods: the step took %.0f s "
                                  "(limit %.0f s)" % (n, st.r["wall"], STEP_LIMIT))
                break
            if k + 1 < len(plan) and st.r["n_errors"]:
                self.notes.append("stopped growing after %d pods: %d RunPodSandbox errors" %
                                  (n, st.r["n_errors"]))
                break

    def teardown(self):
        if self.sampler:
            self.sampler.close()
        if self.client:
            self.client.close()
            self.client = None
            self.env.client = None
        if self.kiyot and self.kiyot.poll() is None:
            self.kiyot.send_signal(signal.SIGTERM)
            try:
                self.kiyot.wait(60)
            except subprocess.TimeoutExpired:
                self.kiyot.kill()
                self.kiyot.wait()
        if self.sim:
            self.sim.stop()
        restore_inotify(self.env.work)
        harness.cleanup(self.env.work, self.env)

    # -- report --

    @staticmethod
    def marginal(steps):
        """What each pod added between the smallest and the largest step (fixed costs cancel)."""
        if len(steps) < 2:
            return []
        b, t = steps[0], steps[-1]
        n = t["pods"] - b["pods"]
        out = ["between the %d- and %d-pod steps, each pod added %.0f KB of RSS and %.2f "
               "threads" % (b["pods"], t["pods"],
                            (t["at_end"]["rss"] - b["at_end"]["rss"]) / 1024.0 / n,
                            (t["launch_peak"]["threads"] - b["launch_peak"]["threads"]) /
                            float(n))]
        if t.get("steady") and b.get("steady"):
            out.append("and %.0f KB of RSS %d s after all were up" % (
                (t["steady"]["rss"] - b["steady"]["rss"]) / 1024.0 / n, SETTLE_S))
        return out

    def report(self):
        steps = [s.r for s in self.steps if "ready" in s.r]
        if not steps:
            return
        empty = {"calls": {}, "ok": {}, "errors": {}, "total": 0}
        for s in steps:  # a step cut short by a failure or a signal has no stop figures
            s.setdefault("stop_stats", empty)
            s.setdefault("stop_cpu", None)
        base, top = steps[0], steps[-1]
        print("\nKiyot scale benchmark: pods through the EC2 provider against ec2sim "
              "(default token buckets: mutating 20:5, describe 50:20), %d client threads, "
              "ec2sim --boot-parallel %d; N asked %d, N reached %d" %
              (THREADS, BOOT_PARALLEL, PODS, top["pods"]))

        rows = []
        for s in steps:
            n = s["pods"]
            rows.append([s["label"], n, s["ready"], s["run_retried"], s["pods_retried"],
                         s["n_errors"], fmt(s["wall"]),
                         fmt(n / s["wall"] if s["wall"] else None, "%.2f"),
                         fmt(pct(s["latency"], 50)), fmt(pct(s["latency"], 95)),
                         fmt(max(s["latency"]) if s["latency"] else None),
                         fmt(pct(s["done"], 50)), fmt(pct(s["done"], 95)),
                         sum(1 for x in s["latency"] if x > KUBELET_TIMEOUT),
                         fmt(pct(s["version_latency"]["samples"], 50), "%.2f"),
                         fmt(max(s["version_latency"]["samples"] or [None]) if
                             s["version_latency"]["samples"] else None, "%.2f")])
        table("1. Time until READY (seconds; RunPodSandbox returns once the instance runs and "
              "its agent answers)",
              ["step", "pods", "READY", "failed", "pods", "gave up", "all READY", "pods/s",
               "call p50", "call p95",
               "call max", "READY p50", "READY p95", ">120 s", "Version p50",
               "Version max"], rows,
              ["call: one RunPodSandbox, queueing in kiyot included; READY: from the step's "
               "start until that pod's sandbox was READY",
               ">120 s: calls longer than the kubelet's default --runtime-request-timeout",
               "failed: RunPodSandbox calls that failed and were retried (up to %d tries, %.0f s "
               "apart, as the kubelet retries on its next sync), in that many pods; gave up: "
               "pods whose tries all failed; call and READY times run from the first try"
               % (RUN_TRIES, RETRY_S),
               "Version: a CRI Version call once a second during the step (another client "
               "channel), seconds until it answered"])

        actions = sorted(set(a for s in steps for ph in ("launch_stats", "stop_stats")
                             for a in s[ph]["calls"]))
        rows = []
        for ph, name in (("launch_stats", "start"), ("stop_stats", "stop")):
            for a in actions:
                vals = [s[ph]["calls"].get(a, 0) / s["pods"] for s in steps]
                if not any(vals):
                    continue
                rows.append(["%s %s" % (name, a)] + ["%.2f" % v for v in vals] +
                            [ratio(vals[-1], vals[0], 2)])
            tot = [s[ph]["total"] / s["pods"] for s in steps]
            rows.append(["%s all calls" % name] + ["%.2f" % v for v in tot] +
                        [ratio(tot[-1], tot[0], 2)])
        hdr = ["EC2 calls per pod"] + ["%s (%d)" % (s["label"], s["pods"]) for s in steps] + \
            ["top/base"]
        table("2. EC2 calls per pod, by action (ec2sim's counters; calls include throttled "
              "ones; %.0f%% of RunInstances answer InsufficientInstanceCapacity)"
              % (100 * ICE_RATE), hdr, rows)
        print("EC2 calls per pod to start: %s (%d pods)" % (
            ", ".join("%.2f" % (s["launch_stats"]["total"] / s["pods"]) for s in steps),
            top["pods"]))

        rows = []
        for ph, name in (("launch_stats", "start"), ("stop_stats", "stop")):
            codes = sorted(set(c for s in steps for per in s[ph]["errors"].values()
                               for c in per))
            for code in codes:
                vals = [sum(per.get(code, 0) for per in s[ph]["errors"].values())
                        for s in steps]
                rows.append(["%s %s" % (name, code)] + vals)
        if rows:
            table("2b. Error answers (counts)",
                  ["answer"] + ["%s (%d)" % (s["label"], s["pods"]) for s in steps], rows)
        else:
            print("\n2b. Error answers: none (no RequestLimitExceeded)")

        def mb(v):
            return fmt(v / 1048576.0 if v is not None else None)

        rows = []
        for s in steps:
            n = s["pods"]
            rows.append([s["label"], n, fmt(s["launch_cpu"], "%.2f"),
                         fmt(1000 * s["launch_cpu"] / n), fmt(s["stop_cpu"], "%.2f"),
                         fmt(None if s["stop_cpu"] is None else 1000 * s["stop_cpu"] / n),
                         fmt(s["launch_sim_cpu"], "%.1f"),
                         mb(s["launch_peak"]["rss"]), mb(s["at_end"]["rss"]),
                         fmt((s["at_end"]["rss"] - self.idle["rss"]) / 1024.0 / n, "%.0f"),
                         mb(s["steady"]["rss"] if s.get("steady") else None),
                         fmt((s["steady"]["rss"] - self.idle["rss"]) / 1024.0 / n
                             if s.get("steady") else None, "%.0f"),
                         mb(s["after"]["rss"] if s.get("after") else None),
                         mb(s["settled"]["rss"] if s.get("settled") else None),
                         s["launch_peak"]["threads"], s["launch_peak"]["fds"]])
        table("3. kiyot CPU and memory (kiyot idle: RSS %s MiB, %d threads, %d fds)" %
              (mb(self.idle["rss"]), self.idle["threads"], self.idle["fds"]),
              ["step", "pods", "CPU s start", "ms/pod", "CPU s stop", "ms/pod",
               "ec2sim CPU s", "RSS peak", "RSS all up", "KB/pod", "%d s later" % SETTLE_S,
               "KB/pod", "RSS after", "%d s later" % SETTLE_S, "threads pk", "fds pk"],
              rows,
              ["CPU: utime+stime from /proc/PID/stat over the phase; RSS in MiB (VmRSS "
               "sampled every %.1f s)" % SAMPLE_S,
               "KB/pod: (RSS all up - RSS idle) / pods; %d s later: every pod still up, "
               "kiyot's connections to agents idle (gRPC closes them 5-10 s after their last call) and its "
               "periodic trim passed" % SETTLE_S,
               "RSS after: once every pod of the step is removed; %d s later: after kiyot's "
               "periodic trim" % SETTLE_S] + self.marginal(steps))
        if len(steps) > 1:
            b, t = base, top

            rows = [
                ["EC2 calls per pod (start)", ratio(t["launch_stats"]["total"] / t["pods"],
                                                    b["launch_stats"]["total"] / b["pods"], 2)],
                ["seconds per pod until all READY", ratio(t["wall"] / t["pods"],
                                                          b["wall"] / b["pods"], 2)],
                ["RunPodSandbox p50", ratio(pct(t["latency"], 50), pct(b["latency"], 50), 2)],
                ["RunPodSandbox p95", ratio(pct(t["latency"], 95), pct(b["latency"], 95), 2)],
                ["kiyot CPU ms per pod (start)", ratio(t["launch_cpu"] / t["pods"],
                                                       b["launch_cpu"] / b["pods"], 2)],
                ["kiyot RSS growth per pod (all up - idle)",
                 ratio((t["at_end"]["rss"] - self.idle["rss"]) / t["pods"],
                       (b["at_end"]["rss"] - self.idle["rss"]) / b["pods"], 2)],
                ["kiyot RSS growth per pod, %d s later" % SETTLE_S,
                 ratio((t["steady"]["rss"] - self.idle["rss"]) / t["pods"],
                       (b["steady"]["rss"] - self.idle["rss"]) / b["pods"], 2)],
                ["kiyot threads per pod (peak - idle)",
                 ratio((t["launch_peak"]["threads"] - self.idle["threads"]) / t["pods"],
                       (b["launch_peak"]["threads"] - self.idle["threads"]) / b["pods"], 2)],
            ]
            table("4. Ratios, %d pods over the %d-pod baseline (1.00x = scales linearly per "
                  "pod)" % (t["pods"], b["pods"]), ["figure", "ratio"], rows)

        rows = []
        for s in steps:
            rows.append([s["label"], s["pods"], s["running_instances"], s["dup_instance_ips"],
                         s["dup_pod_ips"], fmt(s.get("stop_wall")),
                         fmt(s.get("terminated_wall")), len(s.get("leaked", [])),
                         s.get("left_netns", "-"), s.get("left_agents", "-"),
                         s.get("stop_retried", "-"), len(s.get("stop_errors", []))])
        table("5. Instances and cleanup", ["step", "pods", "running", "inst. sharing IP",
                                           "pods sharing IP", "stop+remove s",
                                           "all terminated s", "leaked", "netns left",
                                           "agents left", "Stop failed", "gave up"], rows,
              ["Stop failed: StopPodSandbox calls that failed and were retried (the kubelet "
               "retries on its next sync; up to %d tries, %.0f s apart); gave up: pods whose "
               "tries all failed" % (STOP_TRIES, RETRY_S)])
        c = top.get("containers")
        if c:
            print("\n6. Containers: hello:1 in %d of the %d pods: %d RUNNING and serving HTTP%s"
                  % (c["tried"], top["pods"], c["serving"],
                     "; errors: " + "; ".join(c["errors"]) if c["errors"] else ""))
        low = min((s["launch_peak"]["min_avail"] or 0) for s in steps)
        print("\nLowest MemAvailable seen: %.0f MiB" % (low / 1048576.0))
        for s in steps:
            for e in s.get("run_retry_errors", [])[:2]:
                print("  %s RunPodSandbox error (retried): %s" % (s["label"], e))
            for e in s["errors"][:3]:
                print("  %s RunPodSandbox error: %s" % (s["label"], e))
            for e in s.get("stop_retry_errors", [])[:2]:
                print("  %s StopPodSandbox error (retried): %s" % (s["label"], e))
            for e in s.get("stop_errors", [])[:3]:
                print("  %s stop error: %s" % (s["label"], e))
            if s.get("leaked"):
                print("  %s LEAKED: %s" % (s["label"], s["leaked"][:10]))
        for n in self.notes:
            print("NOTE: " + n)
        print("N reached: %d (asked %d)" % (top["pods"], PODS))
        sys.stdout.flush()

    def ok(self):
        if not self.steps:
            return False
        for s in self.steps:
            r = s.r
            if r.get("n_errors") or r.get("ready") != r["pods"] or r.get("leaked") or \
                    r.get("left_netns") or r.get("left_agents") or r.get("stop_errors"):
                return False
        return True

    def dump(self, path):
        out = []
        for s in self.steps:
            r = dict(s.r)
            out.append(r)
        with open(path, "w") as f:
            json.dump({"pods": PODS, "threads": THREADS, "boot_parallel": BOOT_PARALLEL,
                       "idle": self.idle, "steps": out}, f, indent=1, default=str)


def run():
    r = Run()

    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    ok = False
    try:
        r.setup()
        r.go()
        ok = r.ok()
    except KeyboardInterrupt:
        log("interrupted")
    except Exception:  # noqa: BLE001 - reported, then cleaned up
        traceback.print_exc()
        log("kiyot log: %s/kiyot-ec2.log, ec2sim log: %s/ec2sim.log" % (r.env.work, r.env.work))
        keep = "/tmp/kiyot-scale-logs"
        os.makedirs(keep, exist_ok=True)
        for n in ("kiyot-ec2.log", "ec2sim.log"):
            if os.path.exists(os.path.join(r.env.work, n)):
                shutil.copy(os.path.join(r.env.work, n), os.path.join(keep, n))
        log("logs copied to " + keep)
    finally:
        try:
            r.report()
        except Exception:  # noqa: BLE001 - the cleanup must still run
            traceback.print_exc()
        if os.environ.get("KIYOT_SCALE_JSON"):
            r.dump(os.environ["KIYOT_SCALE_JSON"])
        log("tearing down")
        r.teardown()
    return 0 if ok else 1


def restore_inotify(work):
    """Puts back fs.inotify.max_user_instances as it was before the run in work."""
    try:
        with open(os.path.join(work, "scale.json")) as f:
            old = json.load(f).get("inotify_instances")
        if old:
            with open(INOTIFY, "w") as f:
                f.write(str(old))
            log("fs.inotify.max_user_instances back to %d" % old)
    except (OSError, ValueError):
        pass


def cleanup(work):
    """Tears down a run killed hard: kiyot, then ec2sim (its SIGTERM terminates the cells),
    then whatever the suite's cleanup finds (cells, netns, cgroups, registry, bridge)."""
    try:
        with open(os.path.join(work, "scale.json")) as f:
            pids = json.load(f)
    except (OSError, ValueError):
        pids = {}
    for key in ("kiyot_pid", "sim_pid"):
        pid = pids.get(key)
        if pid and harness.pid_alive(pid) and any(work in a for a in harness.pid_cmdline(pid)):
            harness.kill_pid(pid, signal.SIGTERM)
            deadline = time.monotonic() + 120
            while harness.pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.2)
            harness.kill_pid(pid)
    restore_inotify(work)
    harness.cleanup(work)


def main(argv):
    if len(argv) == 2 and argv[1] == "run":
        return run()
    if len(argv) == 3 and argv[1] == "cleanup":
        cleanup(os.path.abspath(argv[2]))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
