#!/usr/bin/env python3
"""Pod start through the EC2 provider with and without a warm pool, against the suite's local
EC2 endpoint (test/ec2/ec2sim.py) whose instances take --boot-delay (30 s) before they boot as
local cells. Prints RunPodSandbox's p50 and p95 for the same arrivals (a pod every
KIYOT_EC2WARM_EVERY seconds, KIYOT_EC2WARM_PODS pods) with no pool and with the adaptive pool,
and their ratio. Asserts nothing; exit 1 when the setup failed or a pod did not start.

    bench/pool/ec2warm.sh                   (takes the integration suite's lock; root)

Each pod is stopped and removed 20 s after its sandbox is ready (its instance terminated), as
short jobs come and go. The adaptive pool is kiyot's own: per shape, ceil(arrivals over the
window / window x measured time to ready) standby cells; this run sets windowSeconds 120 (the
arrivals' span), everything else default."""

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))
sys.path.insert(0, os.path.join(REPO, "bench"))

import cri  # noqa: E402
import harness  # noqa: E402
from ec2env import KEY, SECRET, Ec2Sim  # noqa: E402

BOOT_DELAY = float(os.environ.get("KIYOT_EC2WARM_BOOT", "30"))
PODS = int(os.environ.get("KIYOT_EC2WARM_PODS", "30"))
EVERY = float(os.environ.get("KIYOT_EC2WARM_EVERY", "5"))
HOLD = 20
CELL_CIDR = "10.78.160.0/20"
POOL = ("pool:\n  adaptive:\n    enabled: true\n    windowSeconds: 120\n")


def log(msg):
    print("[ec2warm] %s" % msg, file=sys.stderr, flush=True)


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100.0 * (len(v) - 1))))]


def start_kiyot(work, sim, name, extra):
    state = os.path.join(work, "state-" + name)
    sock = os.path.join(work, "kiyot-%s.sock" % name)
    cfg = os.path.join(work, "kiyot-%s.yaml" % name)
    with open(cfg, "w") as f:
        f.write("cells:\n  provider: ec2\n"
                "ec2:\n  endpoint: %s\n  imageId: ami-0kiyotcell\n  region: us-east-1\n"
                "  noInstanceMetadata: true\n  launchTimeoutSeconds: 600\n"
                "registries:\n  \"%s\": { insecure: true }\n%s"
                % (sim.endpoint, harness.REGISTRY, extra))
    envv = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
    logf = open(os.path.join(work, "kiyot-%s.log" % name), "a")
    proc = subprocess.Popen(
        [os.path.join(harness.BUILD, "kiyot"), "serve", "--socket", sock, "--state-dir", state,
         "--config", cfg, "--log-level", "info"],
        stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, env=envv, start_new_session=True)
    logf.close()

    def ready():
        if proc.poll() is not None:
            raise RuntimeError("kiyot exited; see %s/kiyot-%s.log" % (work, name))
        c = cri.Client(sock)
        c.runtime.Version(c.pb.VersionRequest(), timeout=2)
        return c
    return proc, harness.wait_for(ready, 30, "kiyot to answer")


def run_arrivals(env, client, name):
    """PODS pods, one every EVERY s, each on a thread: RunPodSandbox's seconds, and how many
    took a standby cell."""
    t = harness.KiyotTest()
    t.env, t.c, t.pb = env, client, client.pb
    times, warm, errors, lock = [], [0], [], threading.Lock()

    def one(i):
        cfg = t.sandbox_config(name="%s-%d" % (name, i))
        t0 = time.monotonic()
        try:
            pod = client.runtime.RunPodSandbox(client.pb.RunPodSandboxRequest(config=cfg),
                                               timeout=300).pod_sandbox_id
        except Exception as e:  # noqa: BLE001 - counted and printed
            with lock:
                errors.append(str(e)[:200])
            return
        took = time.monotonic() - t0
        st = client.runtime.PodSandboxStatus(client.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=30)
        with lock:
            times.append(took)
            warm[0] += '"cellId":"sb-' in st.info["info"].replace(" ", "")
        time.sleep(HOLD)
        client.runtime.StopPodSandbox(client.pb.StopPodSandboxRequest(pod_sandbox_id=pod),
                                      timeout=120)
        client.runtime.RemovePodSandbox(client.pb.RemovePodSandboxRequest(pod_sandbox_id=pod),
                                        timeout=60)

    threads = []
    start = time.monotonic()
    for i in range(PODS):
        delay = start + i * EVERY - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        th = threading.Thread(target=one, args=(i,), daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join(600)
    return times, warm[0], errors


def main():
    env = harness.Env(work=tempfile.mkdtemp(prefix="kiyot-ec2warm-"))
    rc = 0
    sim = None
    try:
        env.setup(with_kiyot=False)
        sim = Ec2Sim(env.work, CELL_CIDR, ["--boot-delay", str(BOOT_DELAY), "--boot-parallel",
                                           "32", "--terminated-ttl", "600"],
                     admin_timeout=60, stop_timeout=300)
        results = {}
        for name, extra in (("nopool", ""), ("pool", POOL)):
            proc, client = start_kiyot(env.work, sim, name, extra)
            try:
                log("%s: %d pods, one every %.0f s, boots %.0f s" % (name, PODS, EVERY,
                                                                    BOOT_DELAY))
                results[name] = run_arrivals(env, client, name)
            finally:
                # no pool section: the pool's standby cells are ended before it stops
                client.close()
                proc.send_signal(signal.SIGTERM)
                proc.wait(120)
        print("EC2 provider against ec2sim, %.0f s boots: %d pods, one every %.0f s "
              "(RunPodSandbox)" % (BOOT_DELAY, PODS, EVERY))
        print("%-34s %8s %8s %8s %6s" % ("", "p50 s", "p95 s", "max s", "warm"))
        for name, label in (("nopool", "no pool"),
                            ("pool", "adaptive pool (windowSeconds 120)")):
            times, warm, errors = results[name]
            if errors or not times:
                rc = 1
                print("%s: %d pods failed: %s" % (label, len(errors), errors[:3]))
            if times:
                print("%-34s %8.2f %8.2f %8.2f %3d/%d" % (label, pct(times, 50),
                                                       pct(times, 95), max(times), warm,
                                                       len(times)))
        if results["nopool"][0] and results["pool"][0]:
            print("pool / no pool: p50 %.3fx, p95 %.3fx" % (
                pct(results["pool"][0], 50) / pct(results["nopool"][0], 50),
                pct(results["pool"][0], 95) / pct(results["nopool"][0], 95)))
        # the pool's standby cells: a kiyot without the pool section ends them
        p2, c2 = start_kiyot(env.work, sim, "pool", "")
        try:
            harness.wait_for(lambda: not [i for i in sim.instances()
                                          if i.get("state") in ("pending", "running")],
                             300, "the standby instances to be terminated")
        finally:
            c2.close()
            p2.send_signal(signal.SIGTERM)
            p2.wait(120)
    except Exception as e:  # noqa: BLE001 - the benchmark reports and exits 1
        log("setup or run failed: %s" % e)
        rc = 1
    finally:
        if sim:
            sim.stop()
        env.teardown()
    return rc


if __name__ == "__main__":
    sys.exit(main())
