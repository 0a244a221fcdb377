#!/usr/bin/env python3
"""Writes bench/cost/mix.json: the reference mix of pods the cost benchmark prices.

Deterministic (a fixed seed); the output is committed, so rerun this only to change the mix:
    python3 bench/cost/gen-mix.py > bench/cost/mix.json
Each pod carries the label bench.kiyot.elotl.co/class naming its class.
"""
import json
import random

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


def main():
    items = []
    for cls, make, n in (("web", web, 90), ("memory", memory_heavy, 35), ("cpu", cpu_heavy, 35),
                         ("init", init_heavy, 30), ("spot", spot, 35), ("gpu", gpu, 15)):
        items += [make(i) for i in range(n)]
    doc = {"apiVersion": "v1", "kind": "List", "items": items}
    print(json.dumps(doc, indent=None, separators=(",", ":")).replace('},{"apiVersion"',
                                                                      '},\n{"apiVersion"'))


main()
