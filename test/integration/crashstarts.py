"""kill -9 of kiyot while RunPodSandbox calls are in flight, then what a kubelet does next.

One round, as test_crash_starts asserts it and the benchmark (bench/bench.py, section 9)
counts it:

    r = CrashRound(test, n=20)       test: a harness.KiyotTest set up with the env
    r.start_and_kill()               n RunPodSandbox at once; kiyot killed with SIGKILL once
                                     some cells have their agent and others are still being
                                     made; kiyot started again
    r.retry()                        each RunPodSandbox again with the same config, all at
                                     once as a kubelet's pod workers would: r.failed
    r.kubelet_next()                 or what a kubelet's next sync does: the pod's sandbox that
                                     is not ready stopped, the next attempt run
    r.agents()                       {cell id: agent pids}, every cell of the state directory
    r.orphans()                      the round's cells that no sandbox owns
    r.exec_each()                    a container created and started in each pod answers
                                     ExecSync: r.exec_failed
    r.remove_all()                   every sandbox of the round stopped and removed
    r.leftovers()                    what of the round's cells is still on the node

Cells are told apart by what the node shows, not by kiyot's records: an agent is a
`cell-agent --bootstrap <state>/cells/<id>/bootstrap.json` process, or any `cell-agent
--bootstrap` process in the network namespace kiyot-<id>; a cell's veth is its host end on the
bridge.
"""

import json
import os
import signal
import threading
import time

import grpc

import cri
from harness import (BRIDGE, NETNS_PREFIX, T_CALL, T_START, T_STOP, cell_netns_list, log,
                     pid_alive, pid_cmdline, sh, unique, wait_for)

# The share of the round's cells whose agent is started when kiyot is killed: the rest are
# still being made (address, network, cgroups), or not begun.
KILL_AT = 0.3
T_KILL = 60
CELL_CONTROLLERS = ("memory", "cpu", "pids")


def _netns_inode(path):
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _proc_netns(pid):
    try:
        return os.stat("/proc/%d/ns/net" % pid).st_ino
    except OSError:
        return None


def _tail(path, n):
    """The last n lines of a file, without their newlines."""
    try:
        with open(path, errors="replace") as f:
            return [line.rstrip("\n") for line in f.readlines()[-n:]]
    except OSError:
        return []


def bridge_veths():
    """The host ends of the veths on the suite's bridge."""
    out = sh("ip", "-j", "link", "show", "master", BRIDGE, check=False, quiet=True)
    try:
        return sorted(x["ifname"] for x in json.loads(out or "[]"))
    except ValueError:
        return []


class CrashRound:
    def __init__(self, test, n, prefix="crash"):
        self.t = test
        self.env = test.env
        self.pb = test.pb
        self.n = n
        self.tag = unique(prefix)
        self.cells_dir = os.path.join(self.env.state_dir, "cells")
        self.configs = [test.sandbox_config(name="%s-%02d" % (self.tag, i),
                                            labels={"crash-round": self.tag})
                        for i in range(n)]
        self.before = self.snapshot()
        self.first = {}  # name -> what the call cut by the crash answered, if anything
        self.pods = {}  # name -> pod id of the retry
        self.failed = {}  # name -> why the retry failed
        self.exec_failed = {}  # name -> why the pod's container did not answer ExecSync
        self.killed_with = None  # (cells with an agent, cells recorded) when kiyot was killed
        self.seen = set()  # the cells made in this round, as listed at some point

    # -- what the node shows --
    def cell_ids(self):
        """The cell directories of the state directory (a cell's is made first, removed
        last)."""
        try:
            return sorted(d for d in os.listdir(self.cells_dir)
                          if os.path.isdir(os.path.join(self.cells_dir, d)) and
                          not d.startswith("."))
        except OSError:
            return []

    def snapshot(self):
        return {"cells": set(self.cell_ids()), "netns": set(cell_netns_list()),
                "veths": set(bridge_veths())}

    def agents(self):
        """{cell id: sorted agent pids} for every cell directory and every agent found: agents
        by their bootstrap document and by their network namespace, counted once each."""
        found = {c: set() for c in self.cell_ids()}
        self.seen |= set(found) - self.before["cells"]
        prefix = self.cells_dir + "/"
        netns = {}
        for c in list(found):
            ino = _netns_inode("/run/netns/" + NETNS_PREFIX + c)
            if ino:
                netns[ino] = c
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            pid = int(p)
            argv = pid_cmdline(pid)
            # an agent, not a unit's shim or the pod's namespace holder (the same binary)
            if len(argv) < 3 or os.path.basename(argv[0]) != "cell-agent" or \
                    argv[1] != "--bootstrap" or not pid_alive(pid):
                continue
            cell = None
            if argv[2].startswith(prefix):
                cell = argv[2][len(prefix):].split("/", 1)[0]
            in_ns = netns.get(_proc_netns(pid))
            for c in {cell, in_ns} - {None}:
                found.setdefault(c, set()).add(pid)
        return {c: sorted(p) for c, p in found.items()}

    def duplicates(self):
        """{cell id: pids} of the cells with more than one agent."""
        return {c: p for c, p in self.agents().items() if len(p) > 1}

    def agents_started(self):
        """How many of the cells made since the round began record a started agent."""
        n = 0
        made = set(self.cell_ids()) - self.before["cells"]
        self.seen |= made
        for c in made:
            try:
                with open(os.path.join(self.cells_dir, c, "cell.json")) as f:
                    n += bool(json.load(f).get("agent_pid"))
            except (OSError, ValueError):
                pass
        return n

    # -- the round --
    def _run(self, cfg, client, out):
        try:
            r = client.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                             timeout=T_START)
            out[cfg.metadata.name] = ("ok", r.pod_sandbox_id)
        except Exception as e:  # noqa: BLE001 - reported
            out[cfg.metadata.name] = (str(cri.code_of(e)), cri.details_of(e))

    def start_and_kill(self, kill_at=KILL_AT):
        """All n RunPodSandbox at once; SIGKILL to kiyot (not its group: cells outlive it) once
        kill_at of the cells have an agent; then kiyot again. The calls the crash cut are
        kept in self.first."""
        client = self.env.client
        threads = [threading.Thread(target=self._run, args=(cfg, client, self.first),
                                    daemon=True) for cfg in self.configs]
        for th in threads:
            th.start()
        want = max(1, int(self.n * kill_at))
        wait_for(lambda: self.agents_started() >= want, T_KILL,
                 "%d of %d cells to start their agent" % (want, self.n), interval=0.01)
        self.killed_with = (self.agents_started(),
                            len(set(self.cell_ids()) - self.before["cells"]))
        os.kill(self.env.kiyot.pid, signal.SIGKILL)
        self.env.kiyot.wait(T_STOP)
        self.env.kill_kiyot()  # closes the client: the calls in flight end
        for th in threads:
            th.join(T_CALL)
        try:
            self.t.c = self.env.start_kiyot()
        except Exception as e:
            raise RuntimeError("kiyot did not start again after the kill: %s; its log ends: %s"
                               % (e, " | ".join(_tail(self.env.kiyot_log, 8)))) from None
        log("crash round %s: kiyot killed with %d of %d cells recorded with an agent; "
            "%d calls had answered" % (self.tag, self.killed_with[0], self.killed_with[1],
                                       sum(v[0] == "ok" for v in self.first.values())))

    def _all_at_once(self, fn):
        """fn(cfg, out) for every pod, each in a thread of its own; then out's answers as the
        pods' sandboxes (self.pods) or failures (self.failed)."""
        out = {}
        threads = [threading.Thread(target=fn, args=(cfg, out), daemon=True)
                   for cfg in self.configs]
        for th in threads:
            th.start()
        for th in threads:
            th.join(T_START + T_CALL)
        for cfg in self.configs:
            name = cfg.metadata.name
            kind, what = out.get(name, ("no answer", "the call did not return"))
            if kind == "ok":
                self.pods[name] = what
            else:
                self.failed[name] = "%s: %s" % (kind, what)
        return self.failed

    def retry(self):
        """Every RunPodSandbox again, the same config, all at once: each must answer the
        sandbox the first call made, when that one answered."""
        client = self.env.client
        self._all_at_once(lambda cfg, out: self._run(cfg, client, out))
        for name, pod in list(self.pods.items()):
            first = self.first.get(name)
            if first and first[0] == "ok" and first[1] != pod:
                self.failed[name] = "the retry answered sandbox %s, the first call %s" % (
                    pod, first[1])
        return self.failed

    def kubelet_next(self):
        """What a kubelet does next (its PodSandboxChanged): a pod whose newest sandbox kiyot
        lists ready keeps it; otherwise that sandbox is stopped and a new one is made with the
        next attempt (a pod kiyot lists nothing for starts at attempt 0). All pods at once."""
        pb = self.pb
        client = self.env.client
        newest = {}
        for pod, name, attempt, state in self.sandboxes():
            if name not in newest or attempt > newest[name][1]:
                newest[name] = (pod, attempt, state)

        def one(cfg, out):
            have = newest.get(cfg.metadata.name)
            if have and have[2] == pb.SANDBOX_READY:
                out[cfg.metadata.name] = ("ok", have[0])
                return
            nxt = pb.PodSandboxConfig()
            nxt.CopyFrom(cfg)
            if have:
                try:
                    client.runtime.StopPodSandbox(pb.StopPodSandboxRequest(
                        pod_sandbox_id=have[0]), timeout=T_STOP * 2)
                except Exception as e:  # noqa: BLE001 - reported
                    out[cfg.metadata.name] = ("StopPodSandbox %s" % cri.code_of(e),
                                              cri.details_of(e))
                    return
                nxt.metadata.attempt = have[1] + 1
            self._run(nxt, client, out)
        return self._all_at_once(one)

    def sandboxes(self):
        """The round's sandboxes kiyot lists: [(id, name, attempt, state)]."""
        pb = self.pb
        items = self.env.client.runtime.ListPodSandbox(pb.ListPodSandboxRequest(
            filter=pb.PodSandboxFilter(label_selector={"crash-round": self.tag})),
            timeout=T_CALL).items
        return [(p.id, p.metadata.name, p.metadata.attempt, p.state) for p in items]

    def cell_of(self, pod):
        """The cell of a sandbox, as PodSandboxStatus's verbose info names it."""
        info = self.env.client.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=T_CALL).info["info"]
        return json.loads(info)["cellId"]

    def orphans(self):
        """The cells made in this round that no sandbox of the retries owns, though something
        of them is on the node (its directory, an agent)."""
        agents = self.agents()
        owned = {self.cell_of(pod) for pod in self.pods.values()}
        return sorted(c for c in self.seen if c in agents and c not in owned)

    def exec_each(self, image, threads=4):
        """In each pod the retry answered: a container `sleep 3600` created, started, and
        ExecSync of `echo alive` in it, which must answer alive."""
        pb = self.pb
        cfgs = {c.metadata.name: c for c in self.configs}
        names = sorted(self.pods)
        lock = threading.Lock()

        def one(name):
            pod, cfg = self.pods[name], cfgs[name]
            try:
                cid, _ = self.t.create(pod, cfg, image, name="sleeper",
                                       command=["sleep", "3600"])
                self.t.start(cid)
                self.t.wait_state(cid, "CONTAINER_RUNNING", timeout=T_CALL)
                r = self.env.client.runtime.ExecSync(pb.ExecSyncRequest(
                    container_id=cid, cmd=["echo", "alive"], timeout=10), timeout=T_CALL)
                if r.exit_code != 0 or r.stdout != b"alive\n":
                    raise AssertionError("exit %d, stdout %r, stderr %r" % (
                        r.exit_code, r.stdout, r.stderr))
            except Exception as e:  # noqa: BLE001 - reported
                with lock:
                    self.exec_failed[name] = cri.details_of(e)

        def worker():
            while True:
                with lock:
                    if not names:
                        return
                    name = names.pop()
                one(name)
        ths = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        return self.exec_failed

    def remove_all(self):
        """Stops and removes every sandbox of the round kiyot lists (whatever the retries
        answered); returns the failures."""
        pb = self.pb
        errors = []
        self.env.ensure()  # kiyot again, should the round have failed with it down
        for pod, name, _, _ in self.sandboxes():
            try:
                self.env.client.runtime.StopPodSandbox(
                    pb.StopPodSandboxRequest(pod_sandbox_id=pod), timeout=T_STOP * 2)
                self.env.client.runtime.RemovePodSandbox(
                    pb.RemovePodSandboxRequest(pod_sandbox_id=pod), timeout=T_STOP * 2)
            except Exception as e:  # noqa: BLE001 - reported
                errors.append("%s (%s): %s" % (name, pod, cri.details_of(e)))
        return errors

    def leftovers(self):
        """What of the cells made in this round the node still has: cell directories, network
        namespaces, veths on the bridge, cell-agent processes (agents and shims), cgroups."""
        cells = self.cell_ids()
        self.seen |= set(cells) - self.before["cells"]
        left = ["cell directory " + c for c in cells if c in self.seen]
        left += ["netns " + n for n in sorted(set(cell_netns_list()) - self.before["netns"])]
        left += ["veth " + v for v in sorted(set(bridge_veths()) - self.before["veths"])]
        marks = ["%s/%s/" % (self.cells_dir, c) for c in self.seen]
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            argv = pid_cmdline(int(p))
            cmd = " ".join(argv)
            if argv and os.path.basename(argv[0]) == "cell-agent" and \
                    any(m in cmd for m in marks) and pid_alive(int(p)):
                left.append("process %s %s" % (p, cmd[:160]))
        for ctrl in CELL_CONTROLLERS:
            for c in sorted(self.seen):
                d = "/sys/fs/cgroup/%s/kiyot/%s" % (ctrl, c)
                if os.path.isdir(d):
                    left.append("cgroup " + d)
        return left

    def wait_clean(self, timeout=T_STOP):
        """Waits for the round's cells to leave nothing; returns what is left then."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.leftovers()
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.5)
