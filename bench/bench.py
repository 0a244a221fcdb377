#!/usr/bin/python3
"""Kiyot benchmarks: figures and ratios, no assertions about speed.

Runs in the integration suite's environment (test/integration/harness.py: bridge kiyott0,
docker-registry on 10.78.0.1:5000, the suite's images, kiyot from $KIYOT_BUILD) and measures:

  1. pod start latency (RunPodSandbox -> container RUNNING), 20 pods one at a time and 20 pods
     10 at once, with a per-call breakdown; baselines: `crun run -d` of the same image on the
     host, and a netns + veth made with `ip`
  2. image pull and unpack through PullImage in a fresh cell; baseline: curl + tar
  3. cell-agent and unit shim memory
  4. kiyot memory with 0 and 20 pods
  5. CRI Version call latency over the unix socket
  7. the container lifecycle (Create/Start/Stop/Remove) next to the suite's private
     containerd, same client, same requests, in the same run; and critest's benchmark cases
     (bench/critest.py), quiet and under stress-ng; 7d pod + container start with the warm
     pool, without it and on containerd (bench/warm.py)
  8. streaming next to that containerd: exec round trips through the Exec URL (SPDY), and
     port-forward throughput through one connection (kiyot port-forward as the client of both)
  9. kiyot's memory under mutated CRI requests, 10. 1000 CRI calls at once next to that
     containerd, 11. Version while 100 pulls stall (bench/load.py)
 12. kill -9 of kiyot during 50 starts, repeated 10 times: duplicate agents, orphans, failed
     retries (bench/crash.py)
     (6 is bench/volumes, a program of its own)

bench/run.sh is the entry point (root, one run at a time). Exit status: 0 when every figure
was measured, 1 when the setup failed or a section could not be measured (printed).
Set KIYOT_BENCH_JSON=FILE to also get the raw figures as JSON, KIYOT_BENCH_ONLY=8 (or 1,7)
to run only those sections (1 includes 4; section 1's baselines come with it).
"""

import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))
sys.path.insert(0, HERE)

import cellq  # noqa: E402
import containerd  # noqa: E402
import crash  # noqa: E402
import critest  # noqa: E402
import harness  # noqa: E402
import load  # noqa: E402
import streamclient  # noqa: E402
import warm  # noqa: E402
from report import ratio, table  # noqa: E402
from harness import images  # noqa: E402

HELLO = "hello:1"
MULTILAYER = "multilayer:1"
BIG = "bench/big:1"
BIG_LAYERS = 8
BIG_LAYER_BYTES = 8 << 20
BIG_VERSION = "bench-big-v1"

N_PODS = 20
WIDE = 10
PULL_REPS = 3
CRUN_REPS = 20
NETNS_REPS = 20
VERSION_CALLS = 2000
IDLE_CPU_S = 2

# 7. lifecycle next to containerd
BUSYBOX = "busybox:1"
LIFE_N = 20
LIFE_STOP_S = 2
# Exits at once on SIGTERM: sh waits in the `wait` builtin, which a trapped signal interrupts
# (a foreground `sleep` would hold the trap up to its end). It says "ready" once the trap is
# set, and StopContainer is sent only then: an sh that is PID 1 of its namespace ignores a
# SIGTERM that comes before the trap, which would cost the whole stop timeout.
LIFE_CMD = ["sh", "-c", "trap 'kill $p; exit 0' TERM; sleep 3600 & p=$!; echo ready; wait"]
WARM_CALLS = ("CreateContainer", "StartContainer", "StopContainer", "RemoveContainer")
T_READY = 30

# 8. streaming next to containerd
EXEC_N = 200
EXEC_WARMUP = 5
HELD_N = 60  # 8c: exec sessions open at once (a cell takes 64 streams)
PF_BYTES = 256 << 20
PF_REPS = 3
PF_DOWN, PF_UP, PF_READY = 9000, 9001, 9002
# The pod sends PF_BYTES on PF_DOWN, counts PF_BYTES it takes on PF_UP and answers the count
# (so the client need not end its side: containerd ends the whole connection on that), and
# says "ready" on PF_READY.
STREAM_CMD = ["sh", "-c", "nc -ll -p %d -e head -c %d /dev/zero & "
              "nc -ll -p %d -e sh -c 'head -c %d | wc -c' & nc -ll -p %d -e echo ready & "
              "exec sleep 3600" % (PF_DOWN, PF_BYTES, PF_UP, PF_BYTES, PF_READY)]
T_PF = 300

# Bounded waits (seconds).
T_RUNNING = 60
T_HTTP = 30
T_POLL = 0.002


def log(msg):
    sys.stderr.write("[bench] %s\n" % msg)
    sys.stderr.flush()


# ---- statistics and tables ----

def pct(values, q):
    """Nearest-rank percentile (q in 0..100) of a list; None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(1, int(math.ceil(q / 100.0 * len(s))))
    return s[min(k, len(s)) - 1]


def med(values):
    return pct(values, 50)


def ms(v):
    return "-" if v is None else ("%.1f" % (v * 1000.0))


def mib(v):
    return "-" if v is None else ("%.1f" % (v / 1048576.0))


def mbs(v):
    return "-" if v is None else "%.0f" % v


def mbs_range(values):
    return "%.0f-%.0f" % (min(values), max(values)) if values else "-"


# ---- memory ----

def cpu_ms(pid):
    """CPU time (user + system) a process has used, in ms; None when it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def smaps_rollup(pid):
    """{"rss", "pss", "private"} in bytes from /proc/PID/smaps_rollup (private = the sum of
    the Private_* lines); None when the process is gone."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            text = f.read()
    except OSError:
        return None
    res = {"rss": 0, "pss": 0, "private": 0, "dirty": 0}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or parts[2] != "kB":
            continue
        key, kb = parts[0].rstrip(":"), int(parts[1]) * 1024
        if key == "Rss":
            res["rss"] = kb
        elif key == "Pss":
            res["pss"] = kb
        elif key.startswith("Private_"):
            res["private"] += kb
            if key == "Private_Dirty":
                res["dirty"] = kb
    return res


def mem_cols(m):
    return [mib(m["rss"]), mib(m["private"]), mib(m["dirty"]), mib(m["pss"])]


# ---- CRI calls timed one by one ----

class _TimedService:
    """A cri._Service whose calls store the duration of the RPC alone in last[method]."""

    def __init__(self, svc, last):
        self._svc = svc
        self._last = last

    def __getattr__(self, name):
        fn = getattr(self._svc, name)

        def call(*args, **kw):
            t0 = time.perf_counter()
            r = fn(*args, **kw)
            self._last[name] = time.perf_counter() - t0
            return r
        return call


class TimedClient:
    """A cri.Client seen through _TimedService: the harness's request builders
    (KiyotTest.create, .start, ...) make the requests and only the RPC is timed."""

    def __init__(self, client):
        self.pb = client.pb
        self.last = {}
        self.runtime = _TimedService(client.runtime, self.last)
        self.image = _TimedService(client.image, self.last)


class LifecycleSide:
    """One runtime of section 7: its timed client, the harness's request builders bound to
    it, and how its pod configs differ (kiyot's carry the target-runtime annotation; the
    routing tests' containerd pods do not, and live under containerd.CGROUP_PARENT)."""

    def __init__(self, name, client, env, kiyot, pods, pods_lock):
        self.name = name
        self.cl = TimedClient(client)
        self.t = harness.KiyotTest()
        self.t.env = env
        self.t.c = self.cl
        self.t.pb = client.pb
        self.kiyot = kiyot
        self.pods = pods
        self.pods_lock = pods_lock
        self.ref = env.ref(BUSYBOX)

    def config(self, name):
        cfg = self.t.sandbox_config(name=name)
        if not self.kiyot:
            del cfg.annotations["kubernetes.io/target-runtime"]
            cfg.linux.cgroup_parent = "/%s/pod%s" % (containerd.CGROUP_PARENT,
                                                      cfg.metadata.uid)
        return cfg

    def run_pod(self, name):
        """RunPodSandbox; returns (pod id, sandbox config, seconds of the call)."""
        cfg = self.config(name)
        r = self.cl.runtime.RunPodSandbox(self.t.pb.RunPodSandboxRequest(config=cfg),
                                          timeout=harness.T_START)
        with self.pods_lock:
            self.pods.append(r.pod_sandbox_id)
        return r.pod_sandbox_id, cfg, self.cl.last["RunPodSandbox"]

    def drop_pod(self, pod, rec=None):
        """StopPodSandbox + RemovePodSandbox, their times into rec when given."""
        self.t.stop_pod(pod)
        if rec is not None:
            rec["StopPodSandbox"] = self.cl.last["StopPodSandbox"]
        self.t.remove_pod(pod)
        if rec is not None:
            rec["RemovePodSandbox"] = self.cl.last["RemovePodSandbox"]
        with self.pods_lock:
            if pod in self.pods:
                self.pods.remove(pod)

    def pull(self, cfg):
        self.t.pull(self.ref, cfg)
        return self.cl.last["PullImage"]

    def container(self, pod, cfg, name, rec):
        """CreateContainer, StartContainer, then, once the
        command says it is ready, StopContainer and RemoveContainer; each call's seconds
        into rec."""
        last = self.cl.last
        cid, path = self.t.create(pod, cfg, self.ref, name=name, command=LIFE_CMD, pull=False)
        rec["CreateContainer"] = last["CreateContainer"]
        self.t.start(cid)
        rec["StartContainer"] = last["StartContainer"]
        deadline = time.monotonic() + T_READY
        while "ready" not in harness.log_texts(path):
            if time.monotonic() > deadline:
                raise RuntimeError("%s: container %s did not log \"ready\" in %d s (%s)" %
                                   (self.name, cid, T_READY, path))
            time.sleep(0.005)
        self.t.stop(cid, timeout=LIFE_STOP_S)
        rec["StopContainer"] = last["StopContainer"]
        self.t.remove(cid)
        rec["RemoveContainer"] = last["RemoveContainer"]


# ---- the run ----

class Bench:
    def __init__(self):
        self.env = harness.Env(work=tempfile.mkdtemp(prefix="kiyot-bench-"))
        self.t = None
        self.pods = []
        self.pods_lock = threading.Lock()
        self.results = {}
        self.failed = []
        self.tag = uuid.uuid4().hex[:6]
        self.crun_ids = []
        self.netns = []
        self.ctrd = None
        self.ctrd_pods = []

    # -- setup --
    def setup(self):
        log("work directory " + self.env.work)
        t0 = time.monotonic()
        self.env.setup()
        self.push_big()
        self.t = harness.KiyotTest()
        self.t.env = self.env
        self.t.c = self.env.client
        self.t.pb = self.env.client.pb
        log("environment up in %.1f s" % (time.monotonic() - t0))

    def push_big(self):
        """Builds (cached by BIG_VERSION) and pushes bench/big:1: BIG_LAYERS layers of
        BIG_LAYER_BYTES of incompressible data each, gzipped."""
        out = os.path.join(harness.CACHE, "bench-images")
        cat = os.path.join(out, "catalog.json")
        fresh = True
        if os.path.exists(cat):
            with open(cat) as f:
                fresh = json.load(f).get("input_hash") != BIG_VERSION
        if fresh:
            t0 = time.monotonic()
            shutil.rmtree(out, ignore_errors=True)
            b = images.Builder(out)
            layers = []
            for i in range(BIG_LAYERS):
                data = hashlib.shake_256(b"kiyot bench layer %d" % i).digest(BIG_LAYER_BYTES)
                layers.append(images.Layer().dir("data")
                              .file("data/layer%d.bin" % i, data).finish(level=1))
            d, mt, _, cfgd = b.image(layers, {"Env": [images.PATH_ENV], "Cmd": ["/bin/true"]})
            b.tag(BIG, d, mt, config=cfgd)
            b.save(BIG_VERSION)
            log("built %s in %.1f s" % (BIG, time.monotonic() - t0))
        pushed = images.push(out, harness.REGISTRY)
        self.env.catalog["tags"].update(pushed["tags"])
        self.big_dir = out

    # -- pods --
    def run_pod(self, name):
        """RunPodSandbox like the kubelet; returns (pod id, sandbox config, seconds)."""
        cfg = self.t.sandbox_config(name=name)
        pb = self.t.pb
        t0 = time.monotonic()
        r = self.env.client.runtime.RunPodSandbox(pb.RunPodSandboxRequest(config=cfg),
                                                  timeout=harness.T_START)
        dt = time.monotonic() - t0
        with self.pods_lock:
            self.pods.append(r.pod_sandbox_id)
        return r.pod_sandbox_id, cfg, dt

    def drop_pod(self, pod):
        """StopPodSandbox + RemovePodSandbox; returns (stop s, remove s)."""
        t0 = time.monotonic()
        self.t.stop_pod(pod)
        t1 = time.monotonic()
        self.t.remove_pod(pod)
        t2 = time.monotonic()
        with self.pods_lock:
            if pod in self.pods:
                self.pods.remove(pod)
        return t1 - t0, t2 - t1

    def pod_ip(self, pod):
        return self.t.pod_status(pod).network.ip

    def start_hello(self, idx, prefix):
        """One pod the kubelet's way: RunPodSandbox, PullImage with the sandbox config,
        CreateContainer, StartContainer, then ContainerStatus until RUNNING and the pod IP
        until HTTP answers. Returns the timings (seconds) and ids."""
        pb = self.t.pb
        ref = self.env.ref(HELLO)
        rec = {"idx": idx}
        t0 = time.monotonic()
        pod, cfg, rec["run"] = self.run_pod("%s-%s-%02d" % (prefix, self.tag, idx))
        rec["pod"] = pod
        t1 = time.monotonic()
        self.t.pull(ref, cfg)
        t2 = time.monotonic()
        cid, _ = self.t.create(pod, cfg, ref, name="hello", pull=False)
        t3 = time.monotonic()
        self.t.start(cid)
        t4 = time.monotonic()
        want = pb.CONTAINER_RUNNING
        deadline = t4 + T_RUNNING
        polls = 0
        while True:
            st = self.t.cstatus(cid).state
            if st == want:
                break
            if st == pb.CONTAINER_EXITED:
                raise RuntimeError("container of pod %s exited instead of running" % pod)
            if time.monotonic() > deadline:
                raise RuntimeError("container of pod %s not RUNNING after %d s" %
                                   (pod, T_RUNNING))
            polls += 1
            time.sleep(T_POLL)
        t5 = time.monotonic()
        ip = self.pod_ip(pod)
        deadline = t5 + T_HTTP
        while True:
            try:
                if harness.http_get(ip, 8080, timeout=1)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("pod %s (%s) does not answer HTTP after %d s" %
                                   (pod, ip, T_HTTP))
            time.sleep(T_POLL)
        t6 = time.monotonic()
        rec.update(pull=t2 - t1, create=t3 - t2, start=t4 - t3, running=t5 - t0,
                   after_start=t5 - t4, polls=polls, http=t6 - t0, http_after_running=t6 - t5,
                   cid=cid, ip=ip)
        return rec

    # -- 1. pod start --
    def pod_start_sequential(self):
        recs = []
        for i in range(N_PODS):
            recs.append(self.start_hello(i, "seq"))
        return recs

    def pod_start_concurrent(self):
        recs, errors = [], []
        next_idx = [0]
        lock = threading.Lock()

        def worker():
            while True:
                with lock:
                    if next_idx[0] >= N_PODS:
                        return
                    i = next_idx[0]
                    next_idx[0] += 1
                try:
                    r = self.start_hello(i, "par")
                    with lock:
                        recs.append(r)
                except Exception as e:  # noqa: BLE001 - reported
                    with lock:
                        errors.append("pod %d: %s" % (i, harness.cri.details_of(e)))
        t0 = time.monotonic()
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(WIDE)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(T_RUNNING * 3)
        wall = time.monotonic() - t0
        if any(th.is_alive() for th in threads):
            errors.append("workers still running after %d s" % (T_RUNNING * 3))
        return recs, errors, wall

    def drop_all(self, pods):
        stops, removes = [], []
        for p in pods:
            s, r = self.drop_pod(p)
            stops.append(s)
            removes.append(r)
        return stops, removes

    def section_pod_start(self):
        kiyot_pid = self.env.kiyot.pid
        self.results["kiyot_mem_0"] = smaps_rollup(kiyot_pid)

        log("1. %d pods one at a time" % N_PODS)
        t0 = time.monotonic()
        seq = self.pod_start_sequential()
        seq_wall = time.monotonic() - t0
        time.sleep(0.5)
        self.results["kiyot_mem_20"] = smaps_rollup(kiyot_pid)
        self.results["agent_mem_all"] = self.agents_mem([r["ip"] for r in seq])
        log("removing %d pods" % len(seq))
        stops, removes = self.drop_all([r["pod"] for r in seq])
        time.sleep(0.5)
        self.results["kiyot_mem_after"] = smaps_rollup(kiyot_pid)

        log("1. %d pods %d at once" % (N_PODS, WIDE))
        par, errors, par_wall = self.pod_start_concurrent()
        self.drop_all([r["pod"] for r in par])
        self.results["pod_start"] = {"sequential": seq, "concurrent": par,
                                     "concurrent_errors": errors, "seq_wall": seq_wall,
                                     "par_wall": par_wall, "stop": stops, "remove": removes}
        if errors:
            raise RuntimeError("%d concurrent pod starts failed: %s" %
                               (len(errors), "; ".join(errors[:3])))

    def agents_mem(self, ips):
        """Sum and median of the agents' and shims' memory over running pods."""
        agents, shims = [], []
        for ip in ips:
            fp = harness.Footprint(ip)
            if fp.agent_pid:
                agents.append(smaps_rollup(fp.agent_pid))
            for pid in fp.pids:
                argv = harness.pid_cmdline(pid)
                if len(argv) > 1 and os.path.basename(argv[0]) == "cell-agent" and \
                        argv[1] == "shim":
                    shims.append(smaps_rollup(pid))
        return {"agents": [a for a in agents if a], "shims": [s for s in shims if s]}

    # -- 1. baselines --
    def hello_bundle(self):
        """An OCI bundle of the hello image: layers unpacked with tar, config from
        `crun spec`, in the host's network namespace so the server answers on loopback."""
        bundle = os.path.join(self.env.work, "bundle")
        rootfs = os.path.join(bundle, "rootfs")
        os.makedirs(rootfs)
        out = os.path.join(harness.CACHE, "images")
        man = json.loads(_read(os.path.join(out, "blobs", self.env.tag_info(HELLO)
                                             ["digest"].split(":", 1)[1])))
        for layer in man["layers"]:
            harness.sh("tar", "-xzf", os.path.join(out, "blobs", layer["digest"].split(":")[1]),
                       "-C", rootfs)
        harness.sh("crun", "spec", "-b", bundle)
        path = os.path.join(bundle, "config.json")
        with open(path) as f:
            spec = json.load(f)
        spec["process"]["terminal"] = False
        spec["process"]["args"] = ["/hello"]
        spec["process"]["env"] = [images.PATH_ENV, "PORT=%d" % self.crun_port]
        spec["root"]["readonly"] = False
        spec["linux"]["namespaces"] = [n for n in spec["linux"]["namespaces"]
                                       if n["type"] != "network"]
        with open(path, "w") as f:
            json.dump(spec, f)
        return bundle

    def crun(self, *args, check=True):
        """Runs crun in a private mount namespace without the cgroup2 mount (the only way
        Debian's crun runs on this cgroup v1 hybrid host)."""
        cmd = "umount /sys/fs/cgroup/unified && exec crun " + " ".join(args)
        errf = os.path.join(self.env.work, "crun.err")
        # Not a pipe: a detached container would hold it open.
        with open(errf, "w") as err:
            p = subprocess.run(["unshare", "-m", "sh", "-c", cmd], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=err, timeout=60)
        if check and p.returncode != 0:
            raise RuntimeError("crun %s: exit %d: %s" % (" ".join(args), p.returncode,
                                                         _read(errf).decode(errors="replace")
                                                         .strip()[:500]))

    def section_crun_baseline(self):
        log("1. baseline: crun run -d of the hello image, %d times" % CRUN_REPS)
        self.crun_port = 18080
        bundle = self.hello_bundle()
        runs, https = [], []
        for i in range(CRUN_REPS):
            cid = "kiyot-bench-%s-%d" % (self.tag, i)
            self.crun_ids.append(cid)
            self.save_leftovers()
            t0 = time.monotonic()
            self.crun("run", "-d", "--bundle", bundle, cid)
            t1 = time.monotonic()
            deadline = t1 + T_HTTP
            while True:
                try:
                    if harness.http_get("127.0.0.1", self.crun_port, timeout=1)[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("crun container %s does not answer HTTP" % cid)
                time.sleep(T_POLL)
            t2 = time.monotonic()
            runs.append(t1 - t0)
            https.append(t2 - t0)
            self.crun("delete", "-f", cid)
            self.crun_ids.remove(cid)
        self.results["crun"] = {"run": runs, "http": https}

    def section_netns_baseline(self):
        log("1. baseline: netns + veth with ip, %d times" % NETNS_REPS)
        times = []
        for i in range(NETNS_REPS):
            ns = "kbench-%s-%d" % (self.tag, i)
            veth = "kb%s%d" % (self.tag, i)
            self.netns.append((ns, veth))
            self.save_leftovers()
            ip = "10.78.250.%d/16" % (i + 1)
            cmds = [["ip", "netns", "add", ns],
                    ["ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "c"],
                    ["ip", "link", "set", veth, "master", harness.BRIDGE, "up"],
                    ["ip", "link", "set", veth + "c", "netns", ns],
                    ["ip", "-n", ns, "addr", "add", ip, "dev", veth + "c"],
                    ["ip", "-n", ns, "link", "set", veth + "c", "up"],
                    ["ip", "-n", ns, "link", "set", "lo", "up"],
                    ["ip", "-n", ns, "route", "add", "default", "via", harness.HOST_IP]]
            t0 = time.monotonic()
            for c in cmds:
                harness.sh(*c)
            times.append(time.monotonic() - t0)
        self.drop_netns()
        self.results["netns"] = times

    def save_leftovers(self):
        """Records what is outside kiyot's and the harness's reach (crun containers, netns),
        so `bench.py cleanup DIR` can remove it after a hard kill."""
        with open(os.path.join(self.env.work, "bench-leftovers.json"), "w") as f:
            json.dump({"crun": self.crun_ids, "netns": self.netns}, f)

    def drop_netns(self):
        for ns, veth in self.netns:
            harness.sh("ip", "link", "del", veth, check=False, quiet=True)
            harness.sh("ip", "netns", "del", ns, check=False, quiet=True)
        self.netns = []

    # -- 2. image pull --
    def blobs_of(self, name):
        """(manifest digest, [config digest] + layer digests, blob directory) of a tag."""
        d = self.env.tag_info(name)["digest"]
        for out in (os.path.join(harness.CACHE, "images"), self.big_dir):
            p = os.path.join(out, "blobs", d.split(":", 1)[1])
            if os.path.exists(p):
                man = json.loads(_read(p))
                return d, [man["config"]["digest"]] + [x["digest"] for x in man["layers"]], out
        raise RuntimeError("no manifest blob for " + name)

    def pull_baseline(self, name):
        """curl of the manifest and every blob to /dev/null, then tar -xzf of each layer from
        a local copy; also curl | tar -xz streamed. Seconds for each."""
        man, blobs, out = self.blobs_of(name)
        repo = name.rsplit(":", 1)[0]
        base = "http://%s/v2/%s" % (harness.REGISTRY, repo)
        curl = ["curl", "-sSf", "-o", "/dev/null"]
        t0 = time.monotonic()
        harness.sh(*curl, "-H", "Accept: " + images.ACCEPT, base + "/manifests/" + man)
        for b in blobs:
            harness.sh(*curl, base + "/blobs/" + b)
        t1 = time.monotonic()
        dest = tempfile.mkdtemp(prefix="untar-", dir=self.env.work)
        t2 = time.monotonic()
        for b in blobs[1:]:
            harness.sh("tar", "-xzf", os.path.join(out, "blobs", b.split(":", 1)[1]), "-C", dest)
        t3 = time.monotonic()
        shutil.rmtree(dest)
        dest = tempfile.mkdtemp(prefix="untar-", dir=self.env.work)
        t4 = time.monotonic()
        for b in blobs[1:]:
            harness.sh("sh", "-c", "curl -sSf '%s/blobs/%s' | tar -xz -C '%s'" % (base, b, dest))
        t5 = time.monotonic()
        shutil.rmtree(dest)
        size = sum(os.path.getsize(os.path.join(out, "blobs", b.split(":", 1)[1]))
                   for b in blobs)
        return {"fetch": t1 - t0, "untar": t3 - t2, "stream": t5 - t4, "bytes": size,
                "layers": len(blobs) - 1}

    def section_pull(self):
        res = {}
        for name in (MULTILAYER, BIG):
            log("2. PullImage of %s in a fresh cell, %d times" % (name, PULL_REPS))
            ref = self.env.ref(name)
            fresh, again, base = [], [], []
            for i in range(PULL_REPS):
                pod, cfg, _ = self.run_pod("pull-%s-%d" % (self.tag, i))
                t0 = time.monotonic()
                self.t.pull(ref, cfg)
                t1 = time.monotonic()
                self.t.pull(ref, cfg)
                t2 = time.monotonic()
                fresh.append(t1 - t0)
                again.append(t2 - t1)
                self.drop_pod(pod)
                base.append(self.pull_baseline(name))
            res[name] = {"fresh": fresh, "again": again, "baseline": base}
        self.results["pull"] = res

    # -- 3. cell-agent memory --
    def section_agent_mem(self):
        log("3. cell-agent memory, idle and with one unit")
        pod, cfg, _ = self.run_pod("mem-%s" % self.tag)
        ip = self.pod_ip(pod)
        time.sleep(0.5)
        fp = harness.Footprint(ip)
        idle = smaps_rollup(fp.agent_pid) if fp.agent_pid else None
        ref = self.env.ref(HELLO)
        self.t.pull(ref, cfg)
        cid, _ = self.t.create(pod, cfg, ref, name="hello", pull=False)
        self.t.start(cid)
        self.t.wait_state(cid, "CONTAINER_RUNNING", timeout=T_RUNNING)
        self.t.wait_http(ip, timeout=T_HTTP)
        time.sleep(0.5)
        fp = harness.Footprint(ip)
        rows = {"agent_idle": (fp.agent_pid, idle), "agent_unit": (fp.agent_pid,
                                                                   smaps_rollup(fp.agent_pid))}
        for pid in sorted(fp.pids):
            argv = harness.pid_cmdline(pid)
            name = os.path.basename(argv[0]) if argv else ""
            if name == "cell-agent" and len(argv) > 1 and argv[1] == "shim":
                rows["shim"] = (pid, smaps_rollup(pid))
            elif name == "crun":
                rows["crun"] = (pid, smaps_rollup(pid))
            elif name == "hello":
                rows["hello"] = (pid, smaps_rollup(pid))
        self.results["agent_mem"] = rows
        # an idle cell should cost no CPU: a busy loop shows here first
        idle_cpu = {}
        for key in ("agent_unit", "shim"):
            pid = rows.get(key, (None, None))[0]
            before = cpu_ms(pid) if pid else None
            idle_cpu[key] = (pid, before)
        time.sleep(IDLE_CPU_S)
        self.results["idle_cpu"] = {
            k: (cpu_ms(pid) - b) / IDLE_CPU_S for k, (pid, b) in idle_cpu.items()
            if pid and b is not None and cpu_ms(pid) is not None}
        self.drop_pod(pod)

    # -- 5. CRI Version --
    def section_version(self):
        log("5. CRI Version, %d calls with 1 and 8 threads" % VERSION_CALLS)
        c = self.env.client
        req = c.pb.VersionRequest(version="v1")
        res = {}
        for threads in (1, 8):
            lat = []
            lock = threading.Lock()
            per = VERSION_CALLS // threads

            def worker():
                mine = []
                for _ in range(per):
                    t0 = time.perf_counter()
                    c.runtime.Version(req, timeout=10)
                    mine.append(time.perf_counter() - t0)
                with lock:
                    lat.extend(mine)
            for _ in range(20):
                c.runtime.Version(req, timeout=10)
            t0 = time.perf_counter()
            ths = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
            for th in ths:
                th.start()
            for th in ths:
                th.join(120)
            wall = time.perf_counter() - t0
            if len(lat) != per * threads:
                raise RuntimeError("only %d of %d Version calls finished" %
                                   (len(lat), per * threads))
            res[threads] = {"lat": lat, "wall": wall}
        self.results["version"] = res

    # -- 7. lifecycle next to containerd --
    def start_containerd(self):
        if not shutil.which("containerd") or not shutil.which("runc"):
            raise RuntimeError("containerd or runc is not installed (deploy/install-deps.sh)")
        self.ctrd = containerd.Containerd(self.env.work)
        self.ctrd.start()
        v = self.ctrd.client.runtime.Version(self.ctrd.client.pb.VersionRequest(version="v1"),
                                             timeout=10)
        return "%s %s" % (v.runtime_name, v.runtime_version)

    def stop_containerd(self):
        """Removes containerd's pods through its CRI, then containerd and all it left."""
        if self.ctrd is None:
            return
        try:
            if self.ctrd.running() and self.ctrd.client:
                self.ctrd.remove_all_pods()
        except Exception as e:  # noqa: BLE001 - containerd.cleanup below still runs
            log("removing containerd's pods: %s" % harness.cri.details_of(e))
        self.ctrd.kill()
        containerd.cleanup(self.env.work)
        self.ctrd = None
        self.ctrd_pods = []

    def vs_containerd(self, fn):
        """Starts the private containerd, runs fn(sides, version) with a side for each
        runtime, kiyot first, then removes containerd with all it ran."""
        version = self.start_containerd()
        try:
            fn([LifecycleSide("kiyot", self.env.client, self.env, True, self.pods,
                              self.pods_lock),
                LifecycleSide("containerd", self.ctrd.client, self.env, False, self.ctrd_pods,
                              self.pods_lock)], version)
        finally:
            self.stop_containerd()

    def section_vs_containerd(self):
        log("7. lifecycle next to containerd: starting containerd")
        self.vs_containerd(self.lifecycle)

    def section_critest(self):
        log("7b. critest's benchmark cases next to containerd: starting containerd")
        critest.section(self, log, turns)

    def lifecycle(self, sides, version):
        res = {"containerd_version": version, "n": LIFE_N, "stop_timeout": LIFE_STOP_S,
               "command": LIFE_CMD, "image": BUSYBOX}
        for s in sides:
            res[s.name] = {"warm_setup": {}, "warm": []}
        self.results["lifecycle"] = res

        log("7a. warm pod: %d containers, each runtime in turn" % LIFE_N)
        warm = {}
        for s in sides:
            pod, cfg, run = s.run_pod("life-%s-%s" % (s.name[:5], self.tag))
            res[s.name]["warm_setup"] = {"RunPodSandbox": run, "PullImage": s.pull(cfg)}
            warm[s.name] = (pod, cfg)
        for i in range(LIFE_N):
            for s in turns(sides, i):
                rec = {"idx": i}
                s.container(warm[s.name][0], warm[s.name][1], "c%02d" % i, rec)
                res[s.name]["warm"].append(rec)
        for s in sides:
            s.drop_pod(warm[s.name][0])


    # -- 8. streaming next to containerd --
    def section_streaming(self):
        log("8. streaming next to containerd: starting containerd")
        self.vs_containerd(self.streaming)

    def streaming(self, sides, version):
        socks = {"kiyot": self.env.socket, "containerd": self.ctrd.socket}
        res = {"containerd_version": version, "execs": EXEC_N, "bytes": PF_BYTES,
               "reps": PF_REPS, "command": STREAM_CMD}
        self.results["streaming"] = res
        pods, procs = {}, {}
        for s in sides:
            name = "stream-%s-%s" % (s.name[:5], self.tag)
            pod, cfg, _ = s.run_pod(name)
            s.pull(cfg)
            cid, _ = s.t.create(pod, cfg, s.ref, name="srv", command=STREAM_CMD, pull=False)
            s.t.start(cid)
            s.t.wait_state(cid, "CONTAINER_RUNNING", timeout=T_RUNNING)
            pods[s.name] = (pod, name, cid)
            res[s.name] = {"exec": [], "down": [], "down_end": [], "up": [], "up_end": []}
        try:
            log("8a. %d execs of true each, the runtimes in turn" % EXEC_N)
            for s in sides:
                for _ in range(EXEC_WARMUP):
                    timed_exec(s, pods[s.name][2])
            for i in range(EXEC_N):
                for s in turns(sides, i):
                    res[s.name]["exec"].append(timed_exec(s, pods[s.name][2]))
            log("8b. port-forward of %d MiB, %d times each way and runtime" %
                (PF_BYTES >> 20, PF_REPS))
            for s in sides:
                procs[s.name] = self.port_forward(socks[s.name], pods[s.name][1])
                harness.wait_for(lambda p=procs[s.name][1][2]: pf_read(p) == b"ready\n",
                                 T_READY, "%s: the pod's servers behind kiyot port-forward" %
                                 s.name)
            for i in range(PF_REPS):
                for s in turns(sides, i):
                    data, end = pf_down(procs[s.name][1][0], PF_BYTES)
                    res[s.name]["down"].append(data)
                    res[s.name]["down_end"].append(end)
                for s in turns(sides, i):
                    got, data, end = pf_up(procs[s.name][1][1], PF_BYTES)
                    if got != PF_BYTES:
                        raise RuntimeError("%s: the pod counted %d bytes of %d" %
                                           (s.name, got, PF_BYTES))
                    res[s.name]["up"].append(data)
                    res[s.name]["up_end"].append(end)
            log("8c. %d exec sessions of cat held open at once, each runtime in turn" %
                HELD_N)
            pids = {"kiyot": self.env.kiyot.pid, "containerd": self.ctrd.proc.pid}
            for s in sides:
                res[s.name]["held"] = held_sessions(s, pods[s.name][2], pids[s.name])
        finally:
            for proc, _ in procs.values():
                proc.kill()
                proc.wait()
            for s in sides:
                s.drop_pod(pods[s.name][0])

    def port_forward(self, sock, name):
        """`kiyot port-forward` against a runtime's CRI socket, from free local ports to
        PF_DOWN, PF_UP and PF_READY; returns (process, [local ports])."""
        errf = open(os.path.join(self.env.work, "port-forward-%s.err" % name), "w")
        proc = subprocess.Popen([self.env.kiyot_bin, "--socket", sock, "port-forward", name,
                                 ":%d" % PF_DOWN, ":%d" % PF_UP, ":%d" % PF_READY],
                                stdout=subprocess.PIPE, stderr=errf, stdin=subprocess.DEVNULL)
        errf.close()
        ports = []
        for _ in range(3):
            line = proc.stdout.readline().decode()
            if not line.startswith("Forwarding from 127.0.0.1:"):
                proc.kill()
                proc.wait()
                raise RuntimeError("kiyot port-forward to %s said %r; see %s" %
                                   (name, line, errf.name))
            ports.append(int(line.split(":")[1].split()[0]))
        return proc, ports

    # -- reporting --
    def report(self):
        r = self.results
        ps = r.get("pod_start")
        crun = r.get("crun")
        netns = r.get("netns")
        if ps:
            rows = []
            for label, recs in (("one at a time", ps["sequential"]),
                                ("%d at once" % WIDE, ps["concurrent"])):
                for what, key in (("RunPodSandbox -> RUNNING", "running"),
                                  ("RunPodSandbox -> HTTP 200", "http")):
                    v = [x[key] for x in recs]
                    rows.append(["%s, %s" % (label, what), len(v), ms(med(v)),
                                 ms(pct(v, 95)), ms(max(v) if v else None)])
            if crun:
                rows.append(["baseline: crun run -d (returns)", len(crun["run"]),
                             ms(med(crun["run"])), ms(pct(crun["run"], 95)),
                             ms(max(crun["run"]))])
                rows.append(["baseline: crun run -d -> HTTP 200", len(crun["http"]),
                             ms(med(crun["http"])), ms(pct(crun["http"], 95)),
                             ms(max(crun["http"]))])
            if netns:
                rows.append(["baseline: ip netns add + veth (8 ip cmds)", len(netns),
                             ms(med(netns)), ms(pct(netns, 95)), ms(max(netns))])
            table("1. Pod start latency (ms), hello image, pull with sandbox_config",
                  ["", "n", "p50", "p95", "max"], rows,
                  "wall time: %d pods one at a time %.1f s, %d at once (%d threads) %.1f s" %
                  (len(ps["sequential"]), ps["seq_wall"], len(ps["concurrent"]), WIDE,
                   ps["par_wall"]))
            rows = []
            for label, recs in (("one at a time", ps["sequential"]),
                                ("%d at once" % WIDE, ps["concurrent"])):
                rows.append([label] + [ms(med([x[k] for x in recs])) for k in
                                       ("run", "pull", "create", "start", "after_start",
                                        "http_after_running")])
            table("1b. Pod start breakdown, medians (ms)",
                  ["", "RunPodSandbox", "PullImage", "CreateContainer", "StartContainer",
                   "->RUNNING", "RUNNING->HTTP"], rows,
                  ["->RUNNING: StartContainer returned until ContainerStatus said RUNNING "
                   "(polled every %d ms)" % (T_POLL * 1000),
                   "RUNNING->HTTP: until the pod IP answered HTTP (polled every %d ms)" %
                   (T_POLL * 1000),
                   "StopPodSandbox median %s ms, RemovePodSandbox median %s ms (%d pods)" %
                   (ms(med(ps["stop"])), ms(med(ps["remove"])), len(ps["stop"]))])
            seq_run = med([x["running"] for x in ps["sequential"]])
            seq_http = med([x["http"] for x in ps["sequential"]])
            seq_sb = med([x["run"] for x in ps["sequential"]])
            rows = []
            if crun:
                rows.append(["pod start -> RUNNING / crun run -d", ratio(seq_run,
                                                                          med(crun["run"]))])
                rows.append(["pod start -> HTTP / crun run -d -> HTTP",
                             ratio(seq_http, med(crun["http"]))])
            if netns:
                rows.append(["RunPodSandbox / ip netns + veth", ratio(seq_sb, med(netns))])
                if crun:
                    rows.append(["pod start -> RUNNING / (netns+veth + crun run -d)",
                                 ratio(seq_run, med(netns) + med(crun["run"]))])
            table("1c. Ratios kiyot / baseline (medians, pods one at a time)",
                  ["", "ratio"], rows)
        pull = r.get("pull")
        if pull:
            rows = []
            for name, p in pull.items():
                b = p["baseline"]
                fetch = med([x["fetch"] for x in b])
                untar = med([x["untar"] for x in b])
                stream = med([x["stream"] for x in b])
                fresh = med(p["fresh"])
                size = b[0]["bytes"] if b else 0
                rows.append([name, b[0]["layers"] if b else "-", mib(size), ms(fresh),
                             ms(max(p["fresh"])), ms(med(p["again"])), ms(fetch), ms(untar),
                             ms(stream), ratio(fresh, fetch + untar), ratio(fresh, stream),
                             "%.0f" % (size / 1048576.0 / fresh) if fresh else "-"])
            table("2. Image pull + unpack through PullImage in a fresh cell (ms, medians of %d)"
                  % PULL_REPS,
                  ["image", "layers", "MiB", "PullImage", "max", "again", "curl", "tar -x",
                   "curl|tar", "/(curl+tar)", "/(curl|tar)", "MiB/s"], rows,
                  ["again: a second PullImage of the same image in the same cell",
                   "curl: manifest + config + layers to /dev/null; tar -x: each layer from a "
                   "local file; curl|tar: streamed"])
        am = r.get("agent_mem")
        rows = []
        if am:
            labels = [("agent_idle", "cell-agent, idle cell (RunPodSandbox only)"),
                      ("agent_unit", "cell-agent, one running unit"),
                      ("shim", "unit shim (cell-agent shim)"),
                      ("crun", "crun run (parent of the container)"),
                      ("hello", "the container (hello)")]
            for key, label in labels:
                pid, m = am.get(key, (None, None))
                rows.append([label] + (mem_cols(m) + [str(pid)] if m else
                                       ["-", "-", "-", "-", "not found"]))
            cell = [am[k][1] for k in ("agent_unit", "shim", "crun", "hello")
                    if k in am and am[k][1]]
            rows.append(["sum of the above with one unit (no PSS)",
                         mib(sum(m["rss"] for m in cell)), mib(sum(m["private"] for m in cell)),
                         mib(sum(m["dirty"] for m in cell)), "-", ""])
        allm = r.get("agent_mem_all")
        if allm:
            for key, label in (("agents", "cell-agent"), ("shims", "unit shim")):
                v = allm[key]
                if v:
                    rows.append(["%s, median over %d running pods" % (label, len(v))] +
                                [mib(med([x[k] for x in v]))
                                 for k in ("rss", "private", "dirty", "pss")] + [""])
        idle = r.get("idle_cpu") or {}
        if rows:
            table("3. Cell memory (MiB)", ["", "RSS", "private", "priv.dirty", "PSS", "pid"],
                  rows, ["private = sum of Private_* in /proc/PID/smaps_rollup; priv.dirty = "
                         "Private_Dirty alone (memory this process alone costs)",
                         "private counts clean file pages only while no other process maps "
                         "them: it drops when the shim (same binary) starts",
                         "CPU while the unit idles (%d s): cell-agent %s ms/s, shim %s ms/s" % (
                             IDLE_CPU_S,
                             "%.1f" % idle["agent_unit"] if "agent_unit" in idle else "-",
                             "%.1f" % idle["shim"] if "shim" in idle else "-")])
        rows = []
        for key, label in (("kiyot_mem_0", "kiyot, 0 pods"),
                           ("kiyot_mem_20", "kiyot, %d pods running" % N_PODS),
                           ("kiyot_mem_after", "kiyot, after removing them")):
            m = r.get(key)
            if m:
                rows.append([label] + mem_cols(m))
        if rows:
            table("4. kiyot memory (MiB)", ["", "RSS", "private", "priv.dirty", "PSS"], rows,
                  "private moves with the cell agents that map the same libraries; priv.dirty "
                  "is kiyot's own memory")
        v = r.get("version")
        if v:
            rows = []
            for threads, x in sorted(v.items()):
                rows.append([threads, len(x["lat"]), ms(med(x["lat"])), ms(pct(x["lat"], 99)),
                             ms(max(x["lat"])), "%.0f" % (len(x["lat"]) / x["wall"])])
            table("5. CRI Version over the unix socket (ms; Python grpcio client)",
                  ["threads", "calls", "p50", "p99", "max", "calls/s"], rows)
        lc = r.get("lifecycle")
        if lc:
            self.report_lifecycle(lc)
        critest.report(r)
        warm.report(r)
        st = r.get("streaming")
        if st and st["kiyot"]["exec"]:
            self.report_streaming(st)
        load.report(r)
        crash.report(r)
        cellq.report(r)
        if self.failed:
            print()
            for f in self.failed:
                print("NOT MEASURED: " + f)
        sys.stdout.flush()

    def report_lifecycle(self, lc):
        k, c = lc["kiyot"], lc["containerd"]
        for flow, calls, title, notes in (
                ("warm", WARM_CALLS,
                 "7a. Containers in a warm pod, kiyot vs containerd (ms, %d containers each)",
                 ["one pod per runtime, %s pulled into it first; then Create, Start, Stop "
                  "(timeout %d s) and Remove of one container after another" %
                  (lc["image"], lc["stop_timeout"])]),):
            ks, cs = k[flow], c[flow]
            if not ks and not cs:
                continue
            rows = []
            for call in calls + ("all calls",):
                kv, cv = call_times(ks, call, calls), call_times(cs, call, calls)
                rows.append([call, ms(med(kv)), ms(pct(kv, 95)), ms(med(cv)), ms(pct(cv, 95)),
                             ratio(med(kv), med(cv), 2), ratio(pct(kv, 95), pct(cv, 95), 2)])
            table(title % lc["n"],
                  ["", "kiyot p50", "p95", "containerd p50", "p95", "ratio p50", "ratio p95"],
                  rows, notes + [
                      "ratio = kiyot / containerd: below 1.00x kiyot is faster; same client, "
                      "same requests, the runtimes in turn; %s (runc, overlayfs)" %
                      lc["containerd_version"],
                      "samples: kiyot %d, containerd %d; p95 is the nearest rank (the %dth "
                      "of %d)" % (len(ks), len(cs), math.ceil(0.95 * len(ks)), len(ks))])

    def report_streaming(self, st):
        k, c = st["kiyot"], st["containerd"]
        rows = []
        for key, label in (("Exec", "Exec call (answers the URL)"),
                           ("upgrade", "connect + upgrade to SPDY"),
                           ("status", "streams until the exit status"),
                           ("total", "Exec call -> exit status"),
                           ("closed", "Exec call -> the server closes")):
            kv, cv = [x[key] for x in k["exec"]], [x[key] for x in c["exec"]]
            rows.append([label, ms(med(kv)), ms(pct(kv, 95)), ms(med(cv)), ms(pct(cv, 95)),
                         ratio(med(kv), med(cv), 2), ratio(pct(kv, 95), pct(cv, 95), 2)])
        table("8a. exec of `true` through the Exec URL (SPDY/3.1), kiyot vs containerd (ms, %d "
              "each)" % st["execs"],
              ["", "kiyot p50", "p95", "containerd p50", "p95", "ratio p50", "ratio p95"], rows,
              ["client: the suite's SPDY client (Python), the runtimes in turn after %d "
               "unmeasured execs each; %s" % (EXEC_WARMUP, st["containerd_version"])])
        rows = []
        figures = {}
        for key, label in (("down", "pod -> client"), ("up", "client -> pod")):
            kv = [st["bytes"] / t / 1e6 for t in k[key]]
            cv = [st["bytes"] / t / 1e6 for t in c[key]]
            figures[key] = ratio(med(kv), med(cv), 2)
            rows.append([label, mbs(med(kv)), mbs_range(kv), mbs(med(cv)), mbs_range(cv),
                         figures[key]])
        for key, label in (("down_end", "pod -> client: last byte -> end (ms)"),
                           ("up_end", "client -> pod: answer -> end (ms)")):
            kv, cv = k[key], c[key]
            rows.append([label, ms(med(kv)), "%s-%s" % (ms(min(kv)), ms(max(kv))),
                         ms(med(cv)), "%s-%s" % (ms(min(cv)), ms(max(cv))),
                         ratio(med(kv), med(cv), 1)])
        table("8b. port-forward throughput, kiyot vs containerd (MB/s, medians)",
              ["", "kiyot", "min-max", "containerd", "min-max", "ratio"], rows,
              ["MB = 10^6 bytes; one TCP connection through `kiyot port-forward` (SPDY/3.1, "
               "portforward.k8s.io) as the client of both runtimes, byte counts checked; "
               "%d MiB each time, %d times each way" % (st["bytes"] >> 20, st["reps"]),
               "throughput: connect to the last byte (pod -> client) or to the pod's count "
               "(client -> pod); the end rows: until the connection's end reaches the client "
               "after the pod closed"])
        if k.get("held") and c.get("held"):
            rows = []
            for name, h in (("kiyot", k["held"]), ("containerd", c["held"])):
                b, o, a = h["before"], h["held"], h["after"]
                rows.append([name, b["threads"], o["threads"], a["threads"],
                             "%.2f" % ((o["threads"] - b["threads"]) / h["n"]),
                             mib(b["mem"]["rss"]), mib(o["mem"]["rss"]), mib(a["mem"]["rss"]),
                             "%.1f" % ((o["mem"]["rss"] - b["mem"]["rss"]) / h["n"] / 1024)])
            table("8c. %d exec sessions of `cat` open at once: the runtime's process" %
                  k["held"]["n"],
                  ["", "threads before", "open", "after", "per session", "RSS MiB before",
                   "open", "after", "KB per session"], rows,
                  ["each session: Exec (stdin, stdout, stderr), SPDY/3.1 as kubectl, a line "
                   "echoed before the next opens; after: stdin closed, every end waited for",
                   "containerd's sessions are served by its shim (containerd-shim-runc-v2), a "
                   "process of its own, which this does not count; kiyot's by kiyot itself"])
        lat = ratio(med([x["total"] for x in k["exec"]]),
                    med([x["total"] for x in c["exec"]]), 2)
        print("  goals: exec p50 ratio <= 1.50x (%s); throughput ratio >= 0.80x (pod -> client "
              "%s, client -> pod %s)" % (lat, figures["down"], figures["up"]))

    def dump_json(self):
        path = os.environ.get("KIYOT_BENCH_JSON")
        if not path:
            return
        with open(path, "w") as f:
            json.dump(self.results, f, indent=1, sort_keys=True, default=str)

    # -- teardown --
    def cleanup(self):
        self.stop_containerd()
        for cid in list(self.crun_ids):
            try:
                self.crun("delete", "-f", cid, check=False)
            except Exception as e:  # noqa: BLE001 - best effort
                log("cleanup of crun container %s: %s" % (cid, e))
        self.drop_netns()
        for pod in list(self.pods):
            try:
                self.drop_pod(pod)
            except Exception as e:  # noqa: BLE001 - best effort; teardown kills the cells
                log("cleanup of pod %s: %s" % (pod, harness.cri.details_of(e)))
        self.env.teardown()

    def section(self, name, fn):
        """Runs one measurement; a failure is reported and the next one still runs."""
        t0 = time.monotonic()
        try:
            fn()
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - reported
            traceback.print_exc()
            self.failed.append("%s: %s" % (name, harness.cri.details_of(e)))
        log("%s took %.1f s" % (name, time.monotonic() - t0))


def call_times(recs, call, calls):
    """The seconds of one call over samples; for "all calls", each sample's sum of calls."""
    if call == "all calls":
        return [sum(x[n] for n in calls) for x in recs if all(n in x for n in calls)]
    return [x[call] for x in recs if call in x]


def turns(sides, i):
    """The runtimes in turn, first one then the other, so that load from elsewhere on the
    machine falls on both alike."""
    return sides if i % 2 == 0 else sides[::-1]


def proc_threads(pid):
    """The number of threads of process pid."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return None


def held_sessions(side, cid, pid):
    """HELD_N exec sessions of `cat` with stdin, open at once (SPDY/3.1 as kubectl's), each
    answering a line before the next opens: the runtime process's threads and memory before,
    with all of them open, and after they ended (stdin closed, each waited for)."""
    pb = side.t.pb
    before = {"threads": proc_threads(pid), "mem": smaps_rollup(pid)}
    sessions = []
    try:
        for i in range(HELD_N):
            url = side.cl.runtime.Exec(pb.ExecRequest(container_id=cid, cmd=["cat"], stdin=True,
                                                      stdout=True, stderr=True),
                                       timeout=harness.T_CALL).url
            sess = streamclient.Session(url)
            sessions.append(sess)
            line = b"held %d\n" % i
            sess.write(line)
            sess.read_until(line)
        time.sleep(0.5)
        held = {"threads": proc_threads(pid), "mem": smaps_rollup(pid)}
        for sess in sessions:
            sess.close_stdin()
        for sess in sessions:
            sess.wait_end()
    finally:
        for sess in sessions:
            sess.close()
    time.sleep(0.5)
    after = {"threads": proc_threads(pid), "mem": smaps_rollup(pid)}
    return {"n": HELD_N, "before": before, "held": held, "after": after}


def timed_exec(side, cid):
    """One exec of `true` as the kubelet's client makes it: Exec, then its URL upgraded to
    SPDY/3.1 (remotecommand v4: error, stdout and stderr streams) until the exit status comes
    on the error stream, then until the server ends the connection (kubectl returns once the
    output streams end). Seconds of the Exec call, of connect + upgrade, of the streams until
    the status, Exec to the status in all, and Exec to the end of the connection."""
    pb = side.t.pb
    t0 = time.perf_counter()
    url = side.cl.runtime.Exec(pb.ExecRequest(container_id=cid, cmd=["true"], stdout=True,
                                              stderr=True), timeout=harness.T_CALL).url
    t1 = time.perf_counter()
    s = streamclient.Spdy(url)
    try:
        t2 = time.perf_counter()
        if s.status != 101:
            raise RuntimeError("%s: exec upgrade answered %d" % (side.name, s.status))
        err = s.open({"streamtype": "error"})
        s.open({"streamtype": "stdout"})
        s.open({"streamtype": "stderr"})
        while not s.data[err] and err not in s.fin and not s.goaway and s.read_frame():
            pass
        t3 = time.perf_counter()
        status = s.data[err]
        while s.read_frame():
            pass
        t4 = time.perf_counter()
    finally:
        s.close()
    if json.loads(status or b"{}").get("status") != "Success":
        raise RuntimeError("%s: exec of true ended with %r" % (side.name, status))
    return {"Exec": t1 - t0, "upgrade": t2 - t1, "status": t3 - t2, "total": t3 - t0,
            "closed": t4 - t0}


def pf_read(port):
    """All that 127.0.0.1:port sends until it ends the connection."""
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=T_PF) as s:
        while True:
            k = s.recv(4096)
            if not k:
                return out
            out += k


def pf_down(port, want):
    """Reads the `want` bytes the pod sends on a new connection to 127.0.0.1:port, then its
    end. Returns (seconds from connecting to the last byte, seconds from the last byte to the
    end of the connection); the byte count is checked."""
    buf = bytearray(1 << 20)
    n = 0
    with socket.create_connection(("127.0.0.1", port), timeout=T_PF) as s:
        t0 = time.perf_counter()
        while n < want:
            k = s.recv_into(buf)
            if not k:
                break
            n += k
        t1 = time.perf_counter()
        extra = s.recv(1)
        t2 = time.perf_counter()
    if n != want or extra:
        raise RuntimeError("port-forward delivered %d bytes, not %d" % (n + len(extra), want))
    return t1 - t0, t2 - t1


def pf_up(port, size):
    """Sends size zero bytes on a new connection to 127.0.0.1:port; the pod answers the count
    once it has them all, then ends the connection. Returns (the count, seconds from connecting
    to the answer, seconds from the answer to the end)."""
    chunk = memoryview(bytes(1 << 20))
    answer = b""
    with socket.create_connection(("127.0.0.1", port), timeout=T_PF) as s:
        t0 = time.perf_counter()
        left = size
        while left:
            s.sendall(chunk[:min(left, len(chunk))])
            left -= min(left, len(chunk))
        while not answer.endswith(b"\n"):
            k = s.recv(4096)
            if not k:
                break
            answer += k
        t1 = time.perf_counter()
        while s.recv(4096):
            pass
        t2 = time.perf_counter()
    try:
        return int(answer.strip()), t1 - t0, t2 - t1
    except ValueError:
        raise RuntimeError("the pod answered %r, not a count" % answer[:80]) from None


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def cleanup_leftovers(work):
    """Removes the crun containers and network namespaces a killed run in `work` left."""
    try:
        with open(os.path.join(work, "bench-leftovers.json")) as f:
            left = json.load(f)
    except (OSError, ValueError):
        return
    for cid in left.get("crun", []):
        if cid.startswith("kiyot-bench-"):
            subprocess.run(["unshare", "-m", "sh", "-c", "umount /sys/fs/cgroup/unified && "
                            "exec crun delete -f " + cid], capture_output=True, timeout=60)
    for ns, veth in left.get("netns", []):
        if ns.startswith("kbench-"):
            harness.sh("ip", "link", "del", veth, check=False, quiet=True)
            harness.sh("ip", "netns", "del", ns, check=False, quiet=True)
    os.unlink(os.path.join(work, "bench-leftovers.json"))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "cleanup":
        cleanup_leftovers(os.path.abspath(sys.argv[2]))
        return 0
    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    b = Bench()
    t0 = time.monotonic()
    try:
        try:
            b.setup()
        except Exception:
            traceback.print_exc()
            log("setup failed; kiyot log: %s" % b.env.kiyot_log)
            return 1
        only = set(x.strip() for x in os.environ.get("KIYOT_BENCH_ONLY", "").split(",")
                   if x.strip())
        for nums, name, fn in ((("1", "4"), "pod start", b.section_pod_start),
                               (("1",), "crun baseline", b.section_crun_baseline),
                               (("1",), "netns baseline", b.section_netns_baseline),
                               (("2",), "image pull", b.section_pull),
                               (("3",), "cell-agent memory", b.section_agent_mem),
                               (("5",), "CRI Version", b.section_version),
                               (("7", "7a"), "containerd baseline", b.section_vs_containerd),
                               (("7", "7b"), "critest's benchmark cases", b.section_critest),
                               (("7", "7d"), "warm pool",
                                lambda: warm.section(b, log, turns)),
                               (("8",), "streaming", b.section_streaming),
                               (("9",), "memory under mutated requests",
                                lambda: load.section_fuzz_memory(b)),
                               (("10",), "1000 calls at once", lambda: load.section_burst(b)),
                               (("11",), "Version while pulls stall",
                                lambda: load.section_stalled_pulls(b)),
                               (("12",), "kill -9 during starts", lambda: crash.bench(b)),
                               (("15",), "calls into one cell", lambda: cellq.section(b))):
            if not only or only & set(nums):
                b.section(name, fn)
        b.report()
        b.dump_json()
    except KeyboardInterrupt:
        log("interrupted")
        b.failed.append("interrupted")
    finally:
        b.cleanup()
        log("total %.1f s" % (time.monotonic() - t0))
    return 1 if b.failed else 0


if __name__ == "__main__":
    sys.exit(main())
