"""Section 7b and 7c of the benchmark: critest's benchmark cases, kiyot next to containerd.

critest -benchmark (cri-tools v1.26.1, pkg/benchmark/{container,pod,image}.go, serial, 20
samples) done here with the suite's client (test/integration/cri.py): the same calls, in the
same order, with the same requests (critest's minimal configs, not the kubelet's), timed as
critest times them; kiyot and the suite's private containerd take turns sample by sample.

  Container  a pod made for the sample (not timed), then
             CreateContainer  ImageStatus of the image, PullImage when it is absent, then
                              CreateContainer (critest's CreateDefaultContainer: the three
                              are one figure; the pull happens in the first sample at most)
             StartContainer, ContainerStatus (verbose), StopContainer (timeout 60 s),
             RemoveContainer; then the pod stopped and removed (not timed)
  Pod        RunPodSandbox, PodSandboxStatus (verbose), StopPodSandbox, RemovePodSandbox
  Image      PullImage (no sandbox config), ImageStatus, RemoveImage
  ListImages ListImages with no filter

7b runs them on a quiet machine, 7c with `stress-ng --cpu 4` running (when stress-ng is
installed), both runtimes alike. Only two fields differ between the runtimes, as in 7a:
kiyot's pods carry the target-runtime annotation, containerd's live under its cgroup parent.
"""

import os
import shutil
import signal
import subprocess
import time
import uuid

import containerd  # noqa: E402 - test/integration is on sys.path (bench.py)
import harness  # noqa: E402
from report import ratio, table  # noqa: E402

N = 20  # containersNumber, podsNumber, imagesNumber of benchmark-params-serial.yaml
STOP_TIMEOUT_S = 60  # framework.DefaultStopContainerTimeout
ATTEMPT = 2  # framework.DefaultAttempt
CONTAINER_IMAGE = "busybox:1"  # critest's DefaultTestContainerImage is a busybox too
CONTAINER_CMD = ["top"]  # framework.DefaultLinuxContainerCommand
PULL_IMAGE = "multilayer:1"  # critest pulls busybox:1.35.0-glibc, one not used elsewhere
STRESS_CPU = 4
T_CALL = 120

CASES = (
    ("Container", ("CreateContainer", "StartContainer", "ContainerStatus", "StopContainer",
                   "RemoveContainer")),
    ("Pod", ("RunPodSandbox", "PodSandboxStatus", "StopPodSandbox", "RemovePodSandbox")),
    ("Image", ("PullImage", "ImageStatus", "RemoveImage")),
    ("ListImages", ("ListImages",)),
)


def _uuid():
    return str(uuid.uuid4())


class Side:
    """One runtime: its client, and its pods recorded for the cleanup paths."""

    def __init__(self, name, client, env, kiyot, pods, pods_lock):
        self.name = name
        self.c = client
        self.pb = client.pb
        self.kiyot = kiyot
        self.pods = pods
        self.pods_lock = pods_lock
        self.container_image = env.ref(CONTAINER_IMAGE)
        self.pull_image = env.ref(PULL_IMAGE)

    def pod_config(self, prefix):
        """critest's sandbox config: metadata, an empty linux part, no labels."""
        pb = self.pb
        uid = "cri-test-uid" + _uuid()
        cfg = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=prefix + _uuid(), uid=uid,
                                           namespace="cri-test-namespace" + _uuid(),
                                           attempt=ATTEMPT),
            linux=pb.LinuxPodSandboxConfig())
        if self.kiyot:
            cfg.annotations["kubernetes.io/target-runtime"] = "kiyot"
        else:
            cfg.linux.cgroup_parent = "/%s/pod%s" % (containerd.CGROUP_PARENT, uid)
        return cfg

    def run_pod(self, cfg):
        r = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                         timeout=harness.T_START)
        with self.pods_lock:
            self.pods.append(r.pod_sandbox_id)
        return r.pod_sandbox_id

    def drop_pod(self, pod):
        pb = self.pb
        self.c.runtime.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=pod),
                                      timeout=T_CALL)
        self.c.runtime.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=pod),
                                        timeout=T_CALL)
        with self.pods_lock:
            if pod in self.pods:
                self.pods.remove(pod)

    def container_sample(self):
        """pkg/benchmark/container.go, one sample: seconds of each call."""
        pb, rt, img = self.pb, self.c.runtime, self.c.image
        cfg = self.pod_config("create-PodSandbox-for-container-")
        pod = self.run_pod(cfg)
        rec = {}
        try:
            t0 = time.perf_counter()
            spec = pb.ImageSpec(image=self.container_image)
            if not img.ImageStatus(pb.ImageStatusRequest(image=spec), timeout=T_CALL).image.id:
                img.PullImage(pb.PullImageRequest(image=spec, sandbox_config=cfg),
                              timeout=harness.T_PULL)
            cc = pb.ContainerConfig(
                metadata=pb.ContainerMetadata(name="Benchmark-container-" + _uuid(),
                                              attempt=ATTEMPT),
                image=spec, command=CONTAINER_CMD, linux=pb.LinuxContainerConfig())
            cid = rt.CreateContainer(pb.CreateContainerRequest(
                pod_sandbox_id=pod, config=cc, sandbox_config=cfg),
                timeout=T_CALL).container_id
            rec["CreateContainer"] = time.perf_counter() - t0
            for name, call, req in (
                    ("StartContainer", rt.StartContainer,
                     pb.StartContainerRequest(container_id=cid)),
                    ("ContainerStatus", rt.ContainerStatus,
                     pb.ContainerStatusRequest(container_id=cid, verbose=True)),
                    ("StopContainer", rt.StopContainer,
                     pb.StopContainerRequest(container_id=cid, timeout=STOP_TIMEOUT_S)),
                    ("RemoveContainer", rt.RemoveContainer,
                     pb.RemoveContainerRequest(container_id=cid))):
                t0 = time.perf_counter()
                call(req, timeout=T_CALL + STOP_TIMEOUT_S)
                rec[name] = time.perf_counter() - t0
        finally:
            self.drop_pod(pod)
        return rec

    def pod_sample(self):
        """pkg/benchmark/pod.go, one sample."""
        pb, rt = self.pb, self.c.runtime
        cfg = self.pod_config("PodSandbox-for-creating-performance-test-")
        rec = {}
        t0 = time.perf_counter()
        pod = self.run_pod(cfg)
        rec["RunPodSandbox"] = time.perf_counter() - t0
        try:
            for name, call, req in (
                    ("PodSandboxStatus", rt.PodSandboxStatus,
                     pb.PodSandboxStatusRequest(pod_sandbox_id=pod, verbose=True)),
                    ("StopPodSandbox", rt.StopPodSandbox,
                     pb.StopPodSandboxRequest(pod_sandbox_id=pod)),
                    ("RemovePodSandbox", rt.RemovePodSandbox,
                     pb.RemovePodSandboxRequest(pod_sandbox_id=pod))):
                t0 = time.perf_counter()
                call(req, timeout=T_CALL)
                rec[name] = time.perf_counter() - t0
        finally:
            if "RemovePodSandbox" not in rec:
                self.drop_pod(pod)
            with self.pods_lock:
                if pod in self.pods:
                    self.pods.remove(pod)
        return rec

    def image_sample(self):
        """pkg/benchmark/image.go's lifecycle, one sample."""
        pb, img = self.pb, self.c.image
        spec = pb.ImageSpec(image=self.pull_image)
        rec = {}
        for name, call, req, timeout in (
                ("PullImage", img.PullImage, pb.PullImageRequest(image=spec), harness.T_PULL),
                ("ImageStatus", img.ImageStatus, pb.ImageStatusRequest(image=spec), T_CALL),
                ("RemoveImage", img.RemoveImage, pb.RemoveImageRequest(image=spec), T_CALL)):
            t0 = time.perf_counter()
            call(req, timeout=timeout)
            rec[name] = time.perf_counter() - t0
        return rec

    def list_sample(self):
        """pkg/benchmark/image.go's listing, one sample."""
        t0 = time.perf_counter()
        self.c.image.ListImages(self.pb.ListImagesRequest(), timeout=T_CALL)
        return {"ListImages": time.perf_counter() - t0}


def run_cases(sides, turns):
    """Every case, N samples each, the runtimes in turn; {case: {runtime: [records]}}."""
    out = {}
    for case, _ in CASES:
        out[case] = {s.name: [] for s in sides}
        for i in range(N):
            for s in turns(sides, i):
                fn = {"Container": s.container_sample, "Pod": s.pod_sample,
                      "Image": s.image_sample, "ListImages": s.list_sample}[case]
                out[case][s.name].append(fn())
    return out


class Stress:
    """stress-ng --cpu STRESS_CPU for the length of a with-block."""

    def __enter__(self):
        self.p = subprocess.Popen(["stress-ng", "--cpu", str(STRESS_CPU), "--quiet"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)
        time.sleep(1)
        if self.p.poll() is not None:
            raise RuntimeError("stress-ng exited at once (status %d)" % self.p.returncode)
        return self

    def __exit__(self, *exc):
        try:
            os.killpg(self.p.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def section(b, log, turns):
    """7b (quiet) and 7c (under stress-ng) through b.vs_containerd."""
    def fn(lsides, version):
        clients = {"kiyot": b.env.client, "containerd": b.ctrd.client}
        sides = [Side(s.name, clients[s.name], b.env, s.kiyot, s.pods, s.pods_lock)
                 for s in lsides]
        res = {"containerd_version": version, "n": N}
        b.results["critest"] = res
        log("7b. critest's benchmark cases, %d samples each, quiet" % N)
        res["quiet"] = run_cases(sides, turns)
        if not shutil.which("stress-ng"):
            b.failed.append("7c: stress-ng is not installed (apt-get install stress-ng)")
            return
        log("7c. critest's benchmark cases under stress-ng --cpu %d" % STRESS_CPU)
        with Stress():
            res["load"] = run_cases(sides, turns)
    b.vs_containerd(fn)


def _pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, -(-q * len(v) // 100) - 1))]


def _ms(v):
    return "-" if v is None else "%.1f" % (v * 1000)


def report(results):
    res = results.get("critest")
    if not res:
        return
    for key, title in (("quiet", "7b. critest's benchmark cases, kiyot vs containerd (ms, %d "
                        "samples each, quiet)"),
                       ("load", "7c. critest's benchmark cases under stress-ng --cpu %d" %
                        STRESS_CPU + " (ms, %d samples each)")):
        cases = res.get(key)
        if not cases:
            continue
        rows = []
        for case, calls in CASES:
            k, c = cases[case]["kiyot"], cases[case]["containerd"]
            for call in calls:
                kv = [x[call] for x in k if call in x]
                cv = [x[call] for x in c if call in x]
                rows.append(["%s: %s" % (case, call), _ms(_pct(kv, 50)), _ms(_pct(kv, 95)),
                             _ms(_pct(cv, 50)), _ms(_pct(cv, 95)),
                             ratio(_pct(kv, 50), _pct(cv, 50), 2),
                             ratio(_pct(kv, 95), _pct(cv, 95), 2)])
        table(title % res["n"],
              ["", "kiyot p50", "p95", "containerd p50", "p95", "ratio p50", "ratio p95"],
              rows, ["critest -benchmark's calls and requests (cri-tools v1.26.1, serial); "
                     "CreateContainer is ImageStatus + CreateContainer, as critest times it",
                     "ratio = kiyot / containerd: below 1.00x kiyot is faster; the runtimes "
                     "in turn; %s (runc, overlayfs)" % res["containerd_version"]])
