"""Section 7d of the benchmark: pod + container start with the warm pool, without it, and on
containerd, in one run.

One sample is critest's pod and container calls, timed as one figure: RunPodSandbox, then
ImageStatus of the image (already pulled), CreateContainer and StartContainer; the pod is then
stopped and removed (not timed). critest's minimal sandbox config (bench/critest.py's Side), so
every kiyot pod sizes to the same shape. Three sides, N samples each, kiyot and containerd in
turn sample by sample:

  cold   kiyot without a pool: each pod's cell is launched by its RunPodSandbox
  warm   kiyot restarted with `pool: {shapes: [{instanceType: <that shape>, count: 2}]}`: each
         pod takes a standby cell (the pool refills while the previous pod is removed); the
         samples whose pod took one are counted
  containerd  the suite's private containerd, beside each kiyot side
"""

import json
import time

import harness  # noqa: E402 - test/integration is on sys.path (bench.py)
from critest import CONTAINER_CMD, T_CALL, Side, _pct, _uuid  # noqa: E402
from report import ratio, table  # noqa: E402

N = 20
POOL_COUNT = 2
T_REFILL = 60


def start_sample(side):
    """One pod + container start: (seconds, the pod's cell id or None)."""
    pb, rt, img = side.pb, side.c.runtime, side.c.image
    cfg = side.pod_config("warm-bench-")
    spec = pb.ImageSpec(image=side.container_image)
    t0 = time.perf_counter()
    pod = side.run_pod(cfg)
    try:
        if not img.ImageStatus(pb.ImageStatusRequest(image=spec), timeout=T_CALL).image.id:
            img.PullImage(pb.PullImageRequest(image=spec, sandbox_config=cfg),
                          timeout=harness.T_PULL)
        cc = pb.ContainerConfig(metadata=pb.ContainerMetadata(name="warm-" + _uuid(), attempt=1),
                                image=spec, command=CONTAINER_CMD,
                                linux=pb.LinuxContainerConfig())
        cid = rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=pod, config=cc,
                                                           sandbox_config=cfg),
                                 timeout=T_CALL).container_id
        rt.StartContainer(pb.StartContainerRequest(container_id=cid), timeout=T_CALL)
        secs = time.perf_counter() - t0
        cell = None
        if side.kiyot:
            info = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=pod,
                                                                  verbose=True),
                                       timeout=T_CALL).info["info"]
            cell = json.loads(info)
        return secs, cell
    finally:
        side.drop_pod(pod)


def standby_ready(env):
    """The ready standby cells kiyot records."""
    import sqlite3
    db = sqlite3.connect("file:%s/kiyot.db?mode=ro" % env.state_dir, uri=True, timeout=10)
    try:
        rows = db.execute("SELECT value FROM meta WHERE key LIKE 'pool/%'").fetchall()
    finally:
        db.close()
    return [r for r in rows if json.loads(r[0])["state"] == "ready"]


def section(b, log, turns):
    """7d through b.vs_containerd: kiyot cold, kiyot warm, containerd beside each."""
    saved = b.env.extra_config

    def fn(lsides, version):
        res = {"containerd_version": version, "n": N, "pool_count": POOL_COUNT}
        b.results["warm"] = res

        def sides():
            clients = {"kiyot": b.env.client, "containerd": b.ctrd.client}
            return [Side(s.name, clients[s.name], b.env, s.kiyot, s.pods, s.pods_lock)
                    for s in lsides]

        def run(label):
            out = {"kiyot": [], "containerd": [], "claimed": 0}
            for i in range(N):
                for s in turns(sides(), i):
                    if s.kiyot and label == "warm":
                        harness.wait_for(lambda: len(standby_ready(b.env)) >= 1, T_REFILL,
                                         "a ready standby cell")
                    secs, cell = start_sample(s)
                    out[s.name].append(secs)
                    if cell and cell.get("cellId", "").startswith("sb-"):
                        out["claimed"] += 1
                    if cell:
                        res["shape"] = cell["instanceType"]
            return out

        log("7d. pod + container start, kiyot without a pool, %d samples" % N)
        res["cold"] = run("cold")
        shape = res["shape"]
        b.env.extra_config = saved + "pool:\n  shapes:\n    - { instanceType: %s, count: %d }\n" % (
            shape, POOL_COUNT)
        b.env.restart_kiyot()
        harness.wait_for(lambda: len(standby_ready(b.env)) >= POOL_COUNT, T_REFILL,
                         "%d ready standby cells of %s" % (POOL_COUNT, shape))
        log("7d. pod + container start, kiyot with %d standby %s cells, %d samples" %
            (POOL_COUNT, shape, N))
        res["warm"] = run("warm")

    try:
        b.vs_containerd(fn)
    finally:
        b.env.extra_config = saved
        b.env.restart_kiyot()


def _ms(v):
    return "-" if v is None else "%.1f" % (v * 1000)


def report(results):
    res = results.get("warm")
    if not res or "warm" not in res:
        return
    cold, warm = res["cold"], res["warm"]
    rows = []
    for name, k, c in (("kiyot without a pool", cold["kiyot"], cold["containerd"]),
                       ("kiyot with a warm pool", warm["kiyot"], warm["containerd"])):
        rows.append([name, _ms(_pct(k, 50)), _ms(_pct(k, 95)), _ms(_pct(c, 50)),
                     _ms(_pct(c, 95)), ratio(_pct(k, 50), _pct(c, 50), 2),
                     ratio(_pct(k, 95), _pct(c, 95), 2)])
    table("7d. pod + container start (RunPodSandbox, ImageStatus, CreateContainer, "
          "StartContainer), ms, %d samples each" % res["n"],
          ["", "kiyot p50", "p95", "containerd p50", "p95", "ratio p50", "ratio p95"], rows,
          ["warm: %d of %d pods took a standby cell (pool of %d %s cells); warm / cold p50: %s"
           % (warm["claimed"], len(warm["kiyot"]), res["pool_count"], res.get("shape", "?"),
              ratio(_pct(warm["kiyot"], 50), _pct(cold["kiyot"], 50), 2)),
           "ratio = kiyot / containerd, the runtimes in turn; %s (runc, overlayfs)"
           % res["containerd_version"]])
