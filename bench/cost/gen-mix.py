#!/usr/bin/env python3
"""Writes bench/cost/mix.json: the reference mix of pods the cost benchmark prices.

Deterministic (a fixed seed); the output is committed, so rerun this only to change the mix:
    python3 bench/cost/gen-mix.py > bench/cost/mix.json
    python3 bench/cost/gen-mix.py usage > bench/cost/usage.json
Each pod carries the label bench.kiyot.elotl.co/class naming its class. The last class, burst,
is pods of ten owners (ReplicaSets, StatefulSets, a Job) whose limits exceed their requests,
annotated pod.elotl.co/burst-sizing: observed; usage.json is what kiyot's store would hold of
eight of those owners' earlier pods for the burst rule (two owners are new: no history). The
peaks are drawn, not measured: CPU between 0.5x and 1.6x of the requests, memory between 0.6x
and 1.4x (pods mostly use about what they request, and a limit leaves room for spikes).
"""
import json
import random
import sys

rng = random.Random(20201201)


def mi(n):
    return "%dMi" % n


def gi(n):
    return ("%gGi" % n) if n != int(n) else "%dGi" % n


def milli(m):
    return "%dm" % m if m % 1000 else "%d" % (m // 1000)


def container(name, image, cpu, mem, cpu_lim=None, mem_lim=None, gpus=0):
    res = {"requests": {"cpu": cpu, "memory": mem}}
    lim = {}
    if cpu_lim:
        lim["cpu"] = cpu_lim
    if mem_lim:
        lim["memory"] = mem_lim
    if gpus:
        lim["nvidia.com/gpu"] = str(gpus)
    if lim:
        res["limits"] = lim
    return {"name": name, "image": image, "resources": res}


def pod(cls, i, containers, init=None, spot=False):
    meta = {"name": "%s-%03d" % (cls, i), "namespace": "bench",
            "labels": {"bench.kiyot.elotl.co/class": cls}}
    if spot:
        meta["annotations"] = {"pod.elotl.co/launch-type": "spot"}
    spec = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def web(i):
    cpu = rng.choice([50, 100, 100, 150, 200, 250])
    mem = rng.choice([64, 128, 128, 192, 256, 384, 512])
    mem_lim = mi(mem * 2) if rng.random() < 0.3 else None
    cs = [container("web", "nginx", milli(cpu), mi(mem), mem_lim=mem_lim)]
    if rng.random() < 0.4:
        cs.append(container("proxy", "envoy", milli(rng.choice([50, 100])),
                            mi(rng.choice([64, 128]))))
    return pod("web", i, cs)


def memory_heavy(i):
    cpu = rng.choice([250, 500, 1000, 1000, 2000])
    mem = rng.choice([2, 4, 6, 8, 12, 16, 24, 30, 48, 60])
    return pod("memory", i, [container("cache", "redis", milli(cpu), gi(mem))])


def cpu_heavy(i):
    cpu = rng.choice([1000, 1500, 2000, 3000, 4000, 6000, 8000, 12000, 16000])
    per = rng.choice([0.5, 1, 1, 2])
    mem = max(1, cpu // 1000 * per)
    cpu_lim = milli(cpu * 2) if rng.random() < 0.2 else None
    return pod("cpu", i, [container("encode", "ffmpeg", milli(cpu), gi(mem), cpu_lim=cpu_lim)])


def init_heavy(i):
    icpu = rng.choice([1000, 2000, 2000, 4000])
    imem = rng.choice([2, 3, 4, 8])
    init = [container("wait-db", "busybox", "10m", "16Mi"),
            container("migrate", "migrate", milli(icpu), gi(imem))]
    app = [container("app", "app", milli(rng.choice([100, 200, 250, 500])),
                     mi(rng.choice([256, 512, 768, 1024])))]
    return pod("init", i, app, init=init)


def spot(i):
    cpu = rng.choice([500, 1000, 2000, 2000, 4000, 8000])
    mem = rng.choice([1, 2, 4, 8, 16])
    init = None
    if rng.random() < 0.25:
        init = [container("fetch", "fetcher", milli(rng.choice([1000, 2000])),
                          gi(rng.choice([2, 4])))]
    return pod("spot", i, [container("worker", "worker", milli(cpu), gi(mem))], init=init,
               spot=True)


def gpu(i):
    gpus = rng.choice([1, 1, 1, 2, 4])
    cpu = rng.choice([2000, 4000, 8000]) * gpus // 2 or 2000
    mem = rng.choice([8, 16, 32]) * gpus
    return pod("gpu", i, [container("train", "cuda", milli(cpu), gi(mem), gpus=gpus)],
               spot=rng.random() < 0.3)


def burst_class(start):
    """The burst class's pods and the usage history of their owners."""
    kinds = ["ReplicaSet"] * 7 + ["StatefulSet"] * 2 + ["Job"]
    items, usage, i = [], {}, start
    for o, kind in enumerate(kinds):
        name = "%s-%d%s" % (rng.choice(["api", "shop", "auth", "search", "feed"]), o,
                            "".join(rng.choice("bcdf5678") for _ in range(3)))
        image = rng.choice(["nginx", "app", "redis", "worker"])
        cpu = rng.choice([100, 250, 500, 1000])
        mem = rng.choice([128, 256, 512, 1024])
        cpu_lim, mem_lim = cpu * rng.choice([2, 4]), mem * rng.choice([2, 4])
        for _ in range(rng.randint(3, 6)):
            p = pod("burst", i - start, [container("main", image, milli(cpu), mi(mem),
                                                   cpu_lim=milli(cpu_lim),
                                                   mem_lim=mi(mem_lim))])
            p["metadata"]["annotations"] = {"pod.elotl.co/burst-sizing": "observed"}
            p["metadata"]["ownerReferences"] = [{
                "apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
                "name": name, "uid": "00000000-0000-0000-0000-%012d" % o,
                "controller": True}]
            items.append(p)
            i += 1
        if o < 8:
            usage["bench/%s/%s" % (kind, name)] = {
                "pods": rng.randint(3, 30),
                "cpu": milli(max(1, int(cpu * rng.uniform(0.5, 1.6)))),
                "memory": mi(max(1, int(mem * rng.uniform(0.6, 1.4))))}
    return items, usage


def main():
    items = []
    for cls, make, n in (("web", web, 90), ("memory", memory_heavy, 35), ("cpu", cpu_heavy, 35),
                         ("init", init_heavy, 30), ("spot", spot, 35), ("gpu", gpu, 15)):
        items += [make(i) for i in range(n)]
    burst, usage = burst_class(len(items))
    items += burst
    if sys.argv[1:] == ["usage"]:
        print(json.dumps({"owners": usage}, indent=1, sort_keys=True))
        return
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    print(json.dumps(doc, indent=None, separators=(",", ":")).replace('},{"apiVersion"',
                                                                      '},\n{"apiVersion"'))


main()
