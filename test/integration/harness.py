#!/usr/bin/python3
"""The integration suite's environment: the real parts around kiyot, started once per run.

    bridge kiyott0 (10.78.0.1/16)  made by the suite before anything else
    docker-registry                Debian's distribution server on 10.78.0.1:5000 (cells reach
                                   it), filesystem storage in the run's work directory
    images                         built by test/images/build.py (cached by input hash under
                                   $KIYOT_ITEST_CACHE) and pushed once per run
    kiyot                          build/kiyot serve --socket --state-dir --config, restartable

Everything a run creates lives under one work directory (/tmp/kiyot-itest-*), described by
its env.json, so `harness.py cleanup DIR` can tear down what a crashed run left: kiyot, its
cell agents and units (their OCI runtime state lives in the cells' directories), the cells'
network namespaces, cgroups and mounts, the registry and the bridge. Only things that can be
traced to this run are touched.

    harness.py run [SUBSTRING...]   set up, run the test_*.py tests (filtered), tear down;
                                    prints "integration: N passed, N failed"

KIYOT_ITEST_SHARDS=N runs the tests in N shards at once, each a process with an environment of
its own (KIYOT_ITEST_SHARD=i: bridge kiyott<i>, cells 10.78.0.0/16 for shard 0 and
10.<79+i>.0.0/16 after it, a registry on that network's gateway, its own kiyot and work
directory). The shards take test files from one queue, longest first; the files that use
something of the node only one run may hold (a fixed host port, a fixed namespace name, the
routing tests' containerd, the VM's bridge) run in shard 0, and those that would compare what every
run writes to run alone after the shards (SOLO, none now); the others take their
addresses from their shard's network (net_addr). With KIYOT_ITEST_VM_READY=FILE, shard 0 runs
the VM boot once FILE says the cell image is built (make test builds it beside the suite). A
shard's output goes to its log, copied to the terminal when it failed; each prints a line per
file.

KIYOT_ITEST_LOAD=1 runs the tests on a busy node: stress-ng keeps LOAD_CPU_PER_CORE CPU
workers per core busy, and the link between node and cells is slowed, from before kiyot
starts to the run's end: with tc netem where the kernel has it (the bridge's traffic toward
the cells held LINK_DELAY_MS, LINK_LOSS_PERMILLE of it lost), else with test/netdelay holding
and losing what arrives from the cells (an NFQUEUE rule on the bridge's way in: held on its
way out, a packet would still count against its sender's socket, and TCP's small-queue limit
would throttle the node's sends to a few packets a round trip, which no real link does).
    harness.py cleanup DIR          tear down what the run in DIR left
    harness.py check                set up the parts that do not need kiyot, verify them,
                                    tear down (for working on the suite itself)
"""

import http.client
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "test", "images"))

import build as images  # noqa: E402
import containerd  # noqa: E402
import cri  # noqa: E402

SHARD = int(os.environ.get("KIYOT_ITEST_SHARD", "0") or 0)
_NET = 78 if SHARD == 0 else 79 + SHARD  # 10.79 is the routing tests' containerd's
BRIDGE = "kiyott%d" % SHARD
CIDR = "10.%d.0.0/16" % _NET
HOST_IP = "10.%d.0.1" % _NET
REGISTRY = HOST_IP + ":5000"


def net_addr(rest):
    """An address in this shard's network: net_addr("200.0") is 10.78.200.0 in shard 0."""
    return "10.%d.%s" % (_NET, rest)


NETNS_PREFIX = "kiyot-"
CGROUP_ROOT = "kiyot"
CACHE = os.environ.get("KIYOT_ITEST_CACHE", "/var/tmp/kiyot-itest")
LOAD = os.environ.get("KIYOT_ITEST_LOAD", "") not in ("", "0")
LOAD_CPU_PER_CORE = 3
LINK_DELAY_MS = 100
LINK_LOSS_PERMILLE = 10
LINK_QUEUE = 7411 + SHARD  # the NFQUEUE number netdelay serves
BUILD = os.path.abspath(os.environ.get("KIYOT_BUILD", os.path.join(REPO, "build")))

# Bounded waits (seconds). Generous: a cell boots and pulls before a container can start.
T_CALL = 60
T_PULL = 180
T_START = 120
T_STOP = 60


def log(msg):
    sys.stderr.write("[itest] %s\n" % msg)
    sys.stderr.flush()


def sh(*args, check=True, quiet=False):
    """Runs a command, returns stdout; raises with its stderr when check and it fails."""
    p = subprocess.run(list(args), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    if not quiet and p.returncode != 0:
        log("%s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


def wait_for(fn, timeout, what, interval=0.2):
    """Polls fn until it returns something truthy; returns it. Exceptions from fn count as
    'not yet' until the deadline, when the last one is reported."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - reported below
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %ss waiting for %s%s" %
                                 (timeout, what, ": last error: %r" % last if last else ""))
        time.sleep(interval)


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def pid_alive(pid, starttime=None):
    """True when pid exists (and, with starttime, is the same process as when recorded)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    if fields[0] == "Z":
        return False
    return starttime is None or int(fields[19]) == starttime


def pid_starttime(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except OSError:
        return None


def pid_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def kill_pid(pid, sig=signal.SIGKILL):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# ---- network namespaces, cgroups, mounts ----

def netns_list():
    out = sh("ip", "netns", "list", check=False, quiet=True)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def netns_addrs(name):
    """IPv4 addresses inside a named netns."""
    out = sh("ip", "-n", name, "-j", "-4", "addr", "show", check=False, quiet=True)
    try:
        return [a["local"] for link in json.loads(out or "[]")
                for a in link.get("addr_info", []) if "local" in a]
    except ValueError:
        return []


def in_cidr(ip):
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(CIDR)
    except ValueError:
        return False


def is_host_netns(name):
    """True for a named netns that is this process's own (the node's): never a cell's."""
    try:
        return os.stat("/run/netns/" + name).st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


def cell_netns_list():
    """The named network namespaces that may be cells': kiyot's prefix, not the node's own."""
    return [ns for ns in netns_list() if ns.startswith(NETNS_PREFIX) and not is_host_netns(ns)]


def netns_for_ip(ip):
    for ns in cell_netns_list():
        if ip in netns_addrs(ns):
            return ns
    return None


def netns_pids(name):
    out = sh("ip", "netns", "pids", name, check=False, quiet=True)
    return [int(x) for x in out.split() if x.isdigit()]


def cgroup_paths(pid):
    """controller -> cgroup path of pid (cgroup v1 lines only)."""
    res = {}
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(","):
                    if c:
                        res[c] = path
    except OSError:
        pass
    return res


def cell_cgroup_dirs(pid):
    """The cell-level cgroup directories (/sys/fs/cgroup/<ctrl>/kiyot/<cell>) holding pid."""
    dirs = set()
    for ctrl, path in cgroup_paths(pid).items():
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 2 and parts[0] == CGROUP_ROOT:
            base = "/sys/fs/cgroup/" + ctrl
            if not os.path.isdir(base):
                base = "/sys/fs/cgroup/" + ctrl.replace("name=", "")
            dirs.add(os.path.join(base, parts[0], parts[1]))
    return sorted(dirs)


def mounts_under(prefix):
    res = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].replace("\\040", " ")
                if mp == prefix or mp.startswith(prefix.rstrip("/") + "/"):
                    res.append(mp)
    except OSError:
        pass
    return res


def rm_cgroup_tree(d):
    """Kills what is left in a cgroup directory tree (ours) and removes it bottom-up."""
    if not os.path.isdir(d):
        return
    for root, _, _ in os.walk(d):
        try:
            with open(os.path.join(root, "cgroup.procs")) as f:
                for p in f.read().split():
                    kill_pid(int(p))
        except OSError:
            pass
    for root, dirs, _ in sorted(os.walk(d), key=lambda t: -len(t[0])):
        try:
            os.rmdir(root)
        except OSError:
            pass


# ---- the pod footprint: what a cell holds on the host, to check nothing is left ----

class Footprint:
    """Host resources of one running pod, found from its IP (no knowledge of kiyot's
    internals beyond: a cell is a netns named kiyot-* holding the pod IP)."""

    def __init__(self, ip):
        self.ip = ip
        self.netns = netns_for_ip(ip)
        self.pids = {}
        self.cgroups = set()
        self.agent_pid = None
        if self.netns:
            for pid in netns_pids(self.netns):
                st = pid_starttime(pid)
                if st is None:
                    continue
                self.pids[pid] = st
                self.cgroups.update(cell_cgroup_dirs(pid))
            self.agent_pid = find_agent_pid(self.netns)

    @property
    def cell_key(self):
        return self.netns[len(NETNS_PREFIX):] if self.netns else None

    def leftovers(self, state_dir=None):
        """What of this footprint still exists (empty list when nothing)."""
        left = []
        if self.netns and self.netns in netns_list():
            left.append("netns " + self.netns)
        for pid, st in self.pids.items():
            if pid_alive(pid, st):
                left.append("process %d %s" % (pid, " ".join(pid_cmdline(pid))[:120]))
        for d in self.cgroups:
            if os.path.isdir(d):
                left.append("cgroup " + d)
        if state_dir and self.cell_key:
            for mp in mounts_under(state_dir):
                if self.cell_key in mp:
                    left.append("mount " + mp)
        return left


def find_agent_pid(netns):
    """The cell-agent process of a cell: a `cell-agent` process in the cell's netns that is
    not a unit shim (`cell-agent shim ...`)."""
    for pid in netns_pids(netns):
        argv = pid_cmdline(pid)
        if argv and os.path.basename(argv[0]) == "cell-agent" and \
                (len(argv) < 2 or argv[1] != "shim"):
            return pid
    return None


# ---- the environment ----

class Env:
    """One run's environment. All state that cleanup needs is in <work>/env.json."""

    def __init__(self, work=None):
        self.work = work or tempfile.mkdtemp(prefix="kiyot-itest-")
        self.state_dir = os.path.join(self.work, "state")
        self.socket = os.path.join(self.work, "kiyot.sock")
        self.config = os.path.join(self.work, "kiyot.yaml")
        self.logs = os.path.join(self.work, "pods")
        self.reg_storage = os.path.join(self.work, "registry")
        self.reg_config = os.path.join(self.work, "registry.yml")
        self.kiyot_log = os.path.join(self.work, "kiyot.log")
        self.reg_log = os.path.join(self.work, "registry.log")
        self.kiyot_bin = os.path.join(BUILD, "kiyot")
        self.agent_bin = os.path.join(BUILD, "cell-agent")
        self.kiyot = None
        self.registry = None
        self.client = None
        self.catalog = None
        self.made_bridge = False
        self.netns_before = []
        self.kiyot_restarts = 0
        self.extra_config = ""  # appended to kiyot.yaml (top-level settings a test needs)
        self.cells_extra = ""  # appended to its cells: section (indented two spaces)
        # cells.nodePorts: the suite's registry listens on the bridge's address, and cells
        # reach it there (EC2 cells pull themselves); nothing else of the node answers them
        self.node_ports = [REGISTRY.rsplit(":", 1)[1] + "/tcp"]
        self.kiyot_args = []  # extra `kiyot serve` flags a test class sets (and resets)
        self.load_pids = []  # stress-ng and netdelay (process group leaders) in load mode
        self.link_slowed = ""  # "netem" or "nfqueue" once the bridge's link is slowed

    # -- persistence for cleanup --
    def _save(self):
        d = {"shard": SHARD, "kiyot_pid": self.kiyot.pid if self.kiyot else None,
             "registry_pid": self.registry.pid if self.registry else None,
             "netns_before": self.netns_before, "made_bridge": self.made_bridge,
             "load_pids": self.load_pids, "link_slowed": self.link_slowed}
        with open(os.path.join(self.work, "env.json"), "w") as f:
            json.dump(d, f)

    # -- parts --
    def setup_bridge(self):
        links = sh("ip", "-j", "link", "show", check=False, quiet=True)
        if BRIDGE not in [x.get("ifname") for x in json.loads(links or "[]")]:
            sh("ip", "link", "add", BRIDGE, "type", "bridge")
            self.made_bridge = True
        if HOST_IP not in sh("ip", "-4", "addr", "show", "dev", BRIDGE):
            sh("ip", "addr", "add", HOST_IP + "/16", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        self.made_bridge = True
        self._save()

    def start_registry(self):
        os.makedirs(self.reg_storage, exist_ok=True)
        with open(self.reg_config, "w") as f:
            f.write("version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\n"
                    "storage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n"
                    "    enabled: true\n  cache:\n    blobdescriptor: \"\"\n"
                    "http:\n  addr: %s\n" % (self.reg_storage, REGISTRY))
        logf = open(self.reg_log, "a")
        self.registry = subprocess.Popen(["docker-registry", "serve", self.reg_config],
                                         stdout=logf, stderr=logf, start_new_session=True)
        logf.close()
        self._save()

        def up():
            if self.registry.poll() is not None:
                raise AssertionError("docker-registry exited %s; see %s" %
                                     (self.registry.returncode, self.reg_log))
            c = http.client.HTTPConnection(REGISTRY, timeout=2)
            try:
                c.request("GET", "/v2/")
                return c.getresponse().status == 200
            finally:
                c.close()
        wait_for(up, 30, "docker-registry on " + REGISTRY)

    def stop_registry(self):
        if self.registry and self.registry.poll() is None:
            self.registry.terminate()
            try:
                self.registry.wait(10)
            except subprocess.TimeoutExpired:
                self.registry.kill()
                self.registry.wait()
        self.registry = None
        self._save()

    def registry_running(self):
        return self.registry is not None and self.registry.poll() is None

    def push_images(self):
        out = os.path.join(CACHE, "images")
        os.makedirs(CACHE, exist_ok=True)
        images.build(out)
        self.catalog = images.push(out, REGISTRY, self.reg_storage)

    def write_config(self):
        with open(self.config, "w") as f:
            f.write("cells:\n  cidr: %s\n  bridge: %s\n  agent: %s\n  nodePorts: %s\n"
                    % (CIDR, BRIDGE, self.agent_bin, json.dumps(self.node_ports)))
            f.write(self.cells_extra)
            f.write("registries:\n  \"%s\": { insecure: true }\n"
                    "  \"registry.k8s.io\": { mirrors: [\"http://%s\"] }\n"
                    % (REGISTRY, REGISTRY))
            f.write(self.extra_config)

    def start_kiyot(self):
        for b in (self.kiyot_bin, self.agent_bin):
            if not os.access(b, os.X_OK):
                raise RuntimeError("%s is missing: build it first (make)" % b)
        os.makedirs(self.state_dir, exist_ok=True)
        self.write_config()
        logf = open(self.kiyot_log, "a")
        logf.write("==== start %s\n" % time.strftime("%H:%M:%S"))
        logf.flush()
        self.kiyot = subprocess.Popen(
            [self.kiyot_bin, "serve", "--socket", self.socket, "--state-dir", self.state_dir,
             "--config", self.config, "--log-level", "debug"] + self.kiyot_args,
            stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        self._save()

        def ready():
            if self.kiyot.poll() is not None:
                raise RuntimeError("kiyot exited with %s; see %s" % (self.kiyot.returncode,
                                                                     self.kiyot_log))
            if not os.path.exists(self.socket):
                return False
            c = cri.Client(self.socket)
            try:
                c.runtime.Version(c.pb.VersionRequest(version="v1"), timeout=2)
            except Exception:
                c.close()
                raise
            return c
        try:
            self.client = wait_for(ready, 30, "kiyot to answer Version on " + self.socket)
        except AssertionError:
            if self.kiyot.poll() is not None:
                raise RuntimeError("kiyot exited with %s; see %s" % (self.kiyot.returncode,
                                                                     self.kiyot_log))
            raise
        return self.client

    def kill_kiyot(self, sig=signal.SIGKILL):
        """Signals kiyot only (not its process group: cells must survive a kiyot crash)."""
        if self.client:
            self.client.close()
            self.client = None
        if self.kiyot and self.kiyot.poll() is None:
            self.kiyot.send_signal(sig)
            try:
                self.kiyot.wait(T_STOP)
            except subprocess.TimeoutExpired:
                self.kiyot.kill()
                self.kiyot.wait()
        self._save()

    def restart_kiyot(self):
        self.kill_kiyot(signal.SIGKILL)
        self.kiyot_restarts += 1
        return self.start_kiyot()

    def kiyot_running(self):
        return self.kiyot is not None and self.kiyot.poll() is None

    def ensure(self):
        """Brings back a registry or kiyot that a failed test left stopped."""
        if not self.registry_running():
            log("registry was down; restarting it")
            self.start_registry()
        if not self.kiyot_running() or self.client is None:
            log("kiyot was down; restarting it")
            self.kill_kiyot()
            self.start_kiyot()

    def start_load(self):
        """The busy node of load mode: CPU workers beyond the cores, a slow and lossy link to
        the cells."""
        cpus = LOAD_CPU_PER_CORE * (os.cpu_count() or 1)
        p = subprocess.Popen(["stress-ng", "--cpu", str(cpus), "--timeout", "6h", "--quiet"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        self.load_pids.append(p.pid)
        netem = ["tc", "qdisc", "add", "dev", BRIDGE, "root", "netem", "delay",
                 "%dms" % LINK_DELAY_MS, "loss", "%.1f%%" % (LINK_LOSS_PERMILLE / 10)]
        if subprocess.run(netem, capture_output=True).returncode == 0:
            self.link_slowed = "netem"
        else:
            tool = os.path.join(BUILD, "test-tools", "netdelay")
            if not os.access(tool, os.X_OK):
                raise RuntimeError("%s is missing: make %s" % (tool, tool))
            p = subprocess.Popen([tool, str(LINK_QUEUE), str(LINK_DELAY_MS),
                                  str(LINK_LOSS_PERMILLE)], stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(self.work, "netdelay.log"), "w"),
                                 start_new_session=True)
            self.load_pids.append(p.pid)
            time.sleep(0.2)  # its queue bound before packets are sent to it
            sh("iptables", "-w", "-t", "mangle", "-A", "PREROUTING", *_link_rule())
            self.link_slowed = "nfqueue"
        self._save()
        log("load: stress-ng --cpu %d; the link between node and cells delays %d ms and loses "
            "%.1f%% (%s)" % (cpus, LINK_DELAY_MS, LINK_LOSS_PERMILLE / 10, self.link_slowed))

    def setup(self, with_kiyot=True):
        if os.geteuid() != 0:
            raise RuntimeError("the integration tests need root (network namespaces, cgroups)")
        self.netns_before = netns_list()
        self._save()
        self.setup_bridge()
        self.start_registry()
        self.push_images()
        if LOAD:
            self.start_load()
        if with_kiyot:
            self.start_kiyot()

    def teardown(self):
        cleanup(self.work, self)

    # -- references --
    def ref(self, name):
        """Image reference as pulled from the test registry, e.g. ref("hello:1")."""
        return "%s/%s" % (REGISTRY, name)

    def tag_info(self, name):
        return self.catalog["tags"][name]


def _link_rule():
    """The mangle rule sending what arrives from the cells on the bridge to netdelay."""
    return ["-i", BRIDGE, "-j", "NFQUEUE", "--queue-num", str(LINK_QUEUE), "--queue-bypass"]


def cleanup(work, env=None):
    """Tears down everything the run in `work` created, best effort, never raising."""
    steps = []

    def step(name, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - keep going, report
            steps.append("%s: %s" % (name, e))

    try:
        with open(os.path.join(work, "env.json")) as f:
            saved = json.load(f)
    except (OSError, ValueError):
        saved = {}
    before = set(saved.get("netns_before", []))

    def stop_kiyot():
        if env and env.client:
            env.client.close()
            env.client = None
        pid = saved.get("kiyot_pid")
        if env and env.kiyot:
            pid = env.kiyot.pid
        if pid and pid_alive(pid) and any(work in a for a in pid_cmdline(pid)):
            kill_pid(pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            while pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            kill_pid(pid)
        if env and env.kiyot:
            try:
                env.kiyot.wait(5)
            except subprocess.TimeoutExpired:
                pass
    step("kiyot", stop_kiyot)
    # the routing tests' containerd, its pods, netns and bridge (nothing if it never ran)
    step("containerd", lambda: containerd.cleanup(work))

    # Our cells: netns named kiyot-* that did not exist before the run and hold an address
    # of the suite's cell network.
    ours = []

    def find_ns():
        for ns in cell_netns_list():
            if ns not in before and any(in_cidr(a) for a in netns_addrs(ns)):
                ours.append(ns)
    step("find netns", find_ns)

    cgroups = set()

    def kill_cells():
        victims = set()
        for ns in ours:
            for pid in netns_pids(ns):
                victims.add(pid)
                cgroups.update(cell_cgroup_dirs(pid))
        for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
            if pid != os.getpid() and any(work in a for a in pid_cmdline(pid)):
                victims.add(pid)
                cgroups.update(cell_cgroup_dirs(pid))
        for pid in victims:
            kill_pid(pid)
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in victims) and time.monotonic() < deadline:
            time.sleep(0.1)
    step("cell processes", kill_cells)


    def cgroup_dirs():
        keys = set(ns[len(NETNS_PREFIX):] for ns in ours)
        for ctrl in os.listdir("/sys/fs/cgroup"):
            base = os.path.join("/sys/fs/cgroup", ctrl, CGROUP_ROOT)
            if os.path.isdir(base) and not os.path.islink(os.path.join("/sys/fs/cgroup", ctrl)):
                for name in os.listdir(base):
                    if name in keys:
                        cgroups.add(os.path.join(base, name))
        for d in cgroups:
            rm_cgroup_tree(d)
    step("cgroups", cgroup_dirs)

    def mounts():
        for mp in sorted(mounts_under(work), key=len, reverse=True):
            subprocess.run(["umount", "-l", mp], capture_output=True)
    step("mounts", mounts)

    def netns():
        for ns in ours:
            sh("ip", "netns", "del", ns, check=False)
    step("netns", netns)

    def registry():
        if env and env.registry:
            env.stop_registry()
            return
        pid = saved.get("registry_pid")
        if pid and pid_alive(pid) and any(work in a for a in pid_cmdline(pid)):
            kill_pid(pid, signal.SIGTERM)
    step("registry", registry)

    def load():
        slowed = (env and env.link_slowed) or saved.get("link_slowed")
        if slowed == "netem":
            sh("tc", "qdisc", "del", "dev", BRIDGE, "root", check=False, quiet=True)
        elif slowed == "nfqueue":
            sh("iptables", "-w", "-t", "mangle", "-D", "PREROUTING", *_link_rule(),
               check=False, quiet=True)
        for pid in (env.load_pids if env else []) or saved.get("load_pids", []):
            try:
                os.killpg(pid, signal.SIGTERM)
            except OSError:
                pass
    step("load", load)

    def bridge():
        if saved.get("made_bridge") or (env and env.made_bridge):
            sh("ip", "link", "del", BRIDGE, check=False, quiet=True)
    step("bridge", bridge)

    def masquerade():
        # what test_masquerade made, should a killed run have left it (it runs in shard 0)
        if SHARD == 0:
            sh("ip", "netns", "del", "kiyott-out", check=False, quiet=True)
        comment = "kiyot cells " + CIDR
        for table in ("nat", "filter"):
            listed = sh("iptables", "-w", "-t", table, "-S", check=False, quiet=True)
            for rule in listed.splitlines():
                if comment in rule and rule.startswith("-A "):
                    sh("sh", "-c", "iptables -w -t %s -D %s" % (table, rule[3:]),
                       check=False, quiet=True)
    step("masquerade", masquerade)

    def hostports():
        # what test_hostport's pods left, should a killed run have left it: the rules toward
        # the suite's cells and those of its bridge. The chains and the jumps to them go only
        # once empty: another kiyot on this machine may have pods with hostPorts.
        net = ipaddress.ip_network(CIDR)

        def ours(rule):
            if '"kiyot-hostport ' in rule:
                addrs = re.findall(r"(?:--to-destination|-d) (\d+\.\d+\.\d+\.\d+)", rule)
                return any(ipaddress.ip_address(a) in net for a in addrs)
            return '"kiyot hostports loopback' in rule and \
                (" -o %s " % BRIDGE in rule or " -i %s " % BRIDGE in rule)
        for table in ("nat", "filter"):
            listed = sh("iptables", "-w", "-t", table, "-S", check=False, quiet=True)
            for rule in listed.splitlines():
                if rule.startswith("-A ") and ours(rule):
                    sh("sh", "-c", "iptables -w -t %s -D %s" % (table, rule[3:]),
                       check=False, quiet=True)
        listed = sh("iptables", "-w", "-t", "nat", "-S", check=False, quiet=True)
        if SHARD != 0 or any(r.startswith("-A KIYOT-HOSTPORTS") for r in listed.splitlines()):
            return  # the hostPort tests run in shard 0: another shard leaves the chains alone
        for rule in listed.splitlines():
            if rule.startswith("-A ") and '"kiyot hostports"' in rule:
                sh("sh", "-c", "iptables -w -t nat -D %s" % rule[3:], check=False, quiet=True)
        for chain in ("KIYOT-HOSTPORTS", "KIYOT-HOSTPORTS-SNAT"):
            sh("iptables", "-w", "-t", "nat", "-X", chain, check=False, quiet=True)
    step("hostports", hostports)

    def cell_guards():
        # kiyot's guard of the node on the suite's bridge, and the anti-spoofing chains of the
        # suite's networks (cells torn down without kiyot leave theirs)
        chain = "KIYOT-NODE-" + BRIDGE
        for rule in sh("iptables", "-w", "-S", "INPUT", check=False, quiet=True).splitlines():
            if rule.startswith("-A ") and rule.endswith("-j " + chain):
                sh("sh", "-c", "iptables -w -D %s" % rule[3:], check=False, quiet=True)
        sh("iptables", "-w", "-F", chain, check=False, quiet=True)
        sh("iptables", "-w", "-X", chain, check=False, quiet=True)
        saved = sh("ebtables-save", "-t", "nat", check=False, quiet=True)
        nets = {m.group(1) for m in re.finditer(r"^:(KIYOT-CELLS-([\d.]+)-(\d+)) ", saved, re.M)
                if ipaddress.ip_network("%s/%s" % m.group(2, 3)).subnet_of(
                    ipaddress.ip_network(CIDR))}
        unhook, cells = [], set()
        for rule in saved.splitlines():
            m = re.match(r"-A (\S+) .*-j (\S+)$", rule)
            if m and m.group(1) in nets and m.group(2).startswith("KIYOT-CELL-"):
                cells.add(m.group(2))
            if m and m.group(1) == "PREROUTING" and m.group(2) in nets:
                unhook.append("-D" + rule[2:])
        chains = sorted(nets | cells)
        if chains:
            text = "\n".join(["*nat"] + unhook + ["-F " + c for c in chains] +
                             ["-X " + c for c in chains] + ["COMMIT", ""])
            subprocess.run(["ebtables-restore", "--noflush"], input=text, text=True,
                           capture_output=True)
    step("cell guards", cell_guards)

    def files():
        if os.environ.get("KIYOT_ITEST_KEEP"):
            log("keeping " + work)
            if os.path.exists(os.path.join(work, "env.json")):
                os.rename(os.path.join(work, "env.json"), os.path.join(work, "env.json.done"))
            return
        keep = os.environ.get("KIYOT_ITEST_LOGS")
        if keep:
            os.makedirs(keep, exist_ok=True)
            for n in ("kiyot.log", "registry.log"):
                p = os.path.join(work, n)
                if os.path.exists(p):
                    shutil.copy(p, os.path.join(keep, n))
        shutil.rmtree(work, ignore_errors=True)
    step("files", files)
    for s in steps:
        log("cleanup: " + s)


_ENV = None


def env():
    """The run's environment (set up on first use when a test file runs on its own)."""
    global _ENV
    if _ENV is None:
        import atexit
        e = Env()
        atexit.register(e.teardown)
        _ENV = e
        e.setup()
    return _ENV


# ---- reading node-side logs ----

CRI_LOG_LINE = re.compile(r"^(\S+) (stdout|stderr) (F|P) (.*)$")
RFC3339NANO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")


def read_cri_log(path):
    """Parses a CRI log file: [(timestamp, stream, tag, text)]; raises on a malformed line.
    Partial ("P") lines are joined with what follows into whole messages."""
    with open(path, "rb") as f:
        data = f.read().decode(errors="replace")
    out, pending = [], ""
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        m = CRI_LOG_LINE.match(line)
        if not m or not RFC3339NANO.match(m.group(1)):
            raise AssertionError("%s: not a CRI log line: %r" % (path, line[:200]))
        if m.group(3) == "P":
            pending += m.group(4)
            continue
        out.append((m.group(1), m.group(2), "F", pending + m.group(4)))
        pending = ""
    if pending:
        out.append((m.group(1), m.group(2), "P", pending))
    return out


def log_texts(path):
    try:
        return [e[3] for e in read_cri_log(path)]
    except FileNotFoundError:
        return []


def http_get(ip, port=8080, path="/", timeout=3):
    c = http.client.HTTPConnection(ip, port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        c.close()


# ---- the test base class ----

class KiyotTest(unittest.TestCase):
    """CRI calls made the way the kubelet makes them: it creates log directories, passes the
    sandbox config to PullImage and CreateContainer, and cleans up what a test made."""

    @classmethod
    def setUpClass(cls):
        cls.env = env()

    def setUp(self):
        self.env.ensure()
        self.c = self.env.client
        self.pb = self.c.pb

    # -- pods --
    def sandbox_config(self, name=None, labels=None, annotations=None, memory=256 << 20,
                       security=None, sysctls=None):
        """security: a LinuxSandboxSecurityContext; sysctls: {name: value}."""
        pb = self.pb
        name = name or unique(self._testMethodName.replace("_", "-")[:30])
        uid = str(uuid.uuid4())
        logdir = os.path.join(self.env.logs, "default_%s_%s" % (name, uid))
        os.makedirs(logdir, exist_ok=True)
        res = pb.LinuxContainerResources(cpu_period=100000, cpu_quota=50000, cpu_shares=512,
                                         memory_limit_in_bytes=memory, oom_score_adj=-998)
        return pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(name=name, uid=uid, namespace="default", attempt=0),
            hostname=name[:63],
            log_directory=logdir,
            labels=dict({"app": name, "suite": "itest"}, **(labels or {})),
            annotations=dict({"kubernetes.io/target-runtime": "kiyot"}, **(annotations or {})),
            linux=pb.LinuxPodSandboxConfig(cgroup_parent="/kubepods/besteffort/pod" + uid,
                                           resources=res, security_context=security,
                                           sysctls=sysctls or {}))

    def run_pod(self, cfg=None, **kw):
        cfg = cfg or self.sandbox_config(**kw)
        r = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                         timeout=T_START)
        self.assertTrue(r.pod_sandbox_id, "RunPodSandbox returned an empty id")
        self.addCleanup(self._drop_pod, r.pod_sandbox_id)
        return r.pod_sandbox_id, cfg

    def _drop_pod(self, pid):
        try:
            c = self.env.client
            if c is None:
                return
            c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pid),
                                     timeout=T_STOP)
            c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=pid),
                                       timeout=T_STOP)
        except Exception as e:  # noqa: BLE001 - best effort after a failure
            log("cleanup of pod %s: %s" % (pid, cri.details_of(e)))

    def pod_status(self, pod_id):
        return self.c.runtime.PodSandboxStatus(
            self.pb.PodSandboxStatusRequest(pod_sandbox_id=pod_id), timeout=T_CALL).status

    def pod_ip(self, pod_id):
        ip = self.pod_status(pod_id).network.ip
        self.assertTrue(ip, "PodSandboxStatus has no network.ip")
        return ip

    # -- images --
    def pull(self, image, cfg, timeout=T_PULL):
        r = self.c.image.PullImage(self.pb.PullImageRequest(
            image=self.pb.ImageSpec(image=image), sandbox_config=cfg), timeout=timeout)
        self.assertTrue(r.image_ref, "PullImage returned an empty image_ref")
        return r.image_ref

    # -- containers --
    def create(self, pod_id, cfg, image, name=None, command=(), args=(), envs=None,
               labels=None, pull=True, mounts=(), annotations=None, security=None, stdio=None):
        """mounts: (container_path, host_path, readonly[, propagation]) as the kubelet passes
        volumes; security: a LinuxContainerSecurityContext; stdio: ContainerConfig's stdin,
        stdin_once and tty, e.g. {"stdin": True, "tty": True}."""
        pb = self.pb
        name = name or unique("c")
        if pull:
            self.pull(image, cfg)
        log_path = "%s/0.log" % name
        os.makedirs(os.path.join(cfg.log_directory, name), exist_ok=True)
        cc = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name=name, attempt=0),
            image=pb.ImageSpec(image=image),
            command=list(command), args=list(args),
            envs=[pb.KeyValue(key=k, value=v) for k, v in (envs or {}).items()],
            labels=dict({"container": name}, **(labels or {})),
            annotations=dict({"io.kubernetes.container.restartCount": "0"},
                             **(annotations or {})),
            log_path=log_path,
            mounts=[pb.Mount(container_path=m[0], host_path=m[1], readonly=m[2],
                             propagation=m[3] if len(m) > 3 else 0)
                    for m in mounts],
            linux=pb.LinuxContainerConfig(resources=pb.LinuxContainerResources(
                memory_limit_in_bytes=128 << 20, oom_score_adj=1000),
                security_context=security), **(stdio or {}))
        r = self.c.runtime.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=pod_id, config=cc, sandbox_config=cfg), timeout=T_START)
        self.assertTrue(r.container_id, "CreateContainer returned an empty id")
        return r.container_id, os.path.join(cfg.log_directory, log_path)

    def start(self, cid):
        self.c.runtime.StartContainer(self.pb.StartContainerRequest(container_id=cid),
                                      timeout=T_START)

    def cstatus(self, cid):
        return self.c.runtime.ContainerStatus(
            self.pb.ContainerStatusRequest(container_id=cid), timeout=T_CALL).status

    def wait_state(self, cid, state, timeout=T_START):
        want = self.pb.ContainerState.Value(state)
        return wait_for(lambda: (lambda s: s if s.state == want else None)(self.cstatus(cid)),
                        timeout, "container %s to be %s" % (cid, state))

    def stop(self, cid, timeout=10):
        self.c.runtime.StopContainer(self.pb.StopContainerRequest(container_id=cid,
                                                                  timeout=timeout),
                                     timeout=timeout + T_STOP)

    def remove(self, cid):
        self.c.runtime.RemoveContainer(self.pb.RemoveContainerRequest(container_id=cid),
                                       timeout=T_STOP)

    def stop_pod(self, pod_id):
        self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pod_id),
                                      timeout=T_STOP * 2)

    def remove_pod(self, pod_id):
        self.c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id),
                                        timeout=T_STOP * 2)

    def assertCode(self, code, fn, *a, **kw):
        """fn must fail with grpc status `code` (a grpc.StatusCode); returns the details."""
        try:
            fn(*a, **kw)
        except Exception as e:  # noqa: BLE001 - inspected
            got = cri.code_of(e)
            if got is None:
                raise
            self.assertEqual(got, code, "expected %s, got %s: %s" % (code, got,
                                                                     cri.details_of(e)))
            return cri.details_of(e)
        self.fail("expected %s, the call succeeded" % code)

    def wait_http(self, ip, port=8080, timeout=T_START):
        def get():
            st, body = http_get(ip, port)
            return body if st == 200 else None
        return wait_for(get, timeout, "HTTP on %s:%d" % (ip, port), interval=0.5)

    def wait_log(self, path, pred, what, timeout=T_START):
        return wait_for(lambda: (lambda t: t if pred(t) else None)(log_texts(path)), timeout,
                        "%s in %s" % (what, path), interval=0.3)

    def assertNoLeftovers(self, fp):
        wait_for(lambda: not fp.leftovers(self.env.state_dir), T_STOP,
                 "the removed pod's cell to leave nothing behind")


# ---- the runner ----

class _Result(unittest.TextTestResult):
    pass


# Test files that must run in shard 0 when the suite runs in shards: they use what only one run
# on the node may hold (a fixed host port, the namespace kiyott-out and ip_forward, the routing
# tests' containerd with its registry address and network, the VM's bridge). The others take
# their addresses from their shard's network (net_addr, REGISTRY).
SHARD0_ONLY = ("test_hostport", "test_masquerade", "test_routing", "test_ec2_vm")
# Test files that must have the node to themselves (none now: test_cell_network compares only
# its own network's rules of the ebtables nat table, which every shard writes to). They run
# after the shards, in shard 0.
SOLO = ()
# The VM boot (test_ec2_vm) needs the cell image, which make test builds beside the suite:
# with KIYOT_ITEST_VM_READY=FILE, shard 0 runs it once FILE exists (it holds the image build's
# exit status: not 0, the test counts as failed unrun), between two files or after its last,
# waiting at most VM_READY_WAIT seconds.
VM_MODULE = "test_ec2_vm"
VM_READY = os.environ.get("KIYOT_ITEST_VM_READY", "")
VM_READY_WAIT = 1800
# The shards' queue takes the files longest first (seconds, from a run on 2 cores with 2 shards;
# a file not listed counts 10 s).
FILE_SECONDS = {"test_pool_cron": 90, "test_ec2": 64, "test_cli": 44, "test_pool_ec2": 37,
                "test_streaming": 37, "test_pool": 34,
                "test_slow_deps": 25, "test_hostport": 26, "test_attach": 18,
                "test_crash_starts": 17, "test_validation": 17, "test_cell_network": 14,
                "test_security": 14, "test_spot_interrupt": 14, "test_routing": 13,
                "test_cells_crd": 12, "test_launch_waits": 11, "test_lifecycle": 10,
                "test_cli_stream": 10, "test_pod_object": 10, "test_recovery": 9,
                "test_metrics": 9, "test_pull_errors": 8, "test_ec2_arch": 8, "test_cell_tls": 8,
                "test_masquerade": 7, "test_containers": 6, "test_events": 5,
                "test_pool_cells": 5, "test_agent_streams": 5, "test_logs": 4, "test_volumes": 2,
                "test_images": 2, "test_kube_proxy": 1, "test_cell_auth": 1, "test_lists": 1,
                "test_resize": 1, "test_ec2_vm": 0, "test_runtime": 0,
                # last in its shard: it waits for the previous release's build (suite.sh)
                "test_upgrade": -1}


def _collect(filters):
    loader = unittest.TestLoader()
    suite = loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)

    def flatten(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                yield from flatten(t)
            else:
                yield t
    tests = [t for t in flatten(suite) if not filters or any(f in t.id() for f in filters)]
    broken = [t for t in tests if isinstance(t, unittest.loader._FailedTest)]
    return tests, broken


def _run_tests(tests, stream):
    """Runs tests; returns (passed, failed, skipped)."""
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Result, stream=stream)
    res = runner.run(unittest.TestSuite(tests))
    failed = len(res.failures) + len(res.errors) + len(res.unexpectedSuccesses)
    skipped = len(res.skipped)
    return res.testsRun - failed - skipped - len(res.expectedFailures), failed, skipped


def _module(t):
    return t.id().split(".", 1)[0]


def run(filters):
    shards = int(os.environ.get("KIYOT_ITEST_SHARDS", "1") or 1)
    if shards > 1:
        return run_sharded(filters, shards)
    tests, broken = _collect(filters)
    global _ENV
    e = Env()
    _ENV = e
    log("work directory " + e.work)

    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    passed = failed = skipped = 0
    try:
        try:
            e.setup()
        except Exception:
            traceback.print_exc()
            log("setup failed; kiyot log: %s" % e.kiyot_log)
            _tail(e.kiyot_log)
            print("integration: 0 passed, %d failed" % max(1, len(tests)))
            return 1
        passed, failed, skipped = _run_tests(tests, sys.stderr)
        if failed:
            _tail(e.kiyot_log)
    except KeyboardInterrupt:
        log("interrupted")
        failed += 1
    finally:
        e.teardown()
    if broken:
        log("%d test files failed to import" % len(broken))
    line = "integration: %d passed, %d failed" % (passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print(line)
    return 1 if failed or not tests else 0


def _take(queue_path):
    """The next test file of the shards' shared queue (a JSON list), or None."""
    import fcntl
    with open(queue_path, "r+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        queue = json.load(f)
        if not queue:
            return None
        mod = queue.pop(0)
        f.seek(0)
        f.truncate()
        json.dump(queue, f)
        return mod


def run_shard(queue_path, result_path, filters):
    """One shard: its environment, then test files from the queue (shard 0 first its own) until
    the queue is empty. Writes {passed, failed, skipped, files: {file: seconds}} to
    result_path; verbose output to stderr, a line per file to stdout."""
    tests, _ = _collect(filters)
    by_mod = {}
    for t in tests:
        by_mod.setdefault(_module(t), []).append(t)
    own = [m for m in SHARD0_ONLY if m in by_mod] \
        if SHARD == 0 and not os.environ.get("KIYOT_ITEST_SOLO") else []
    vm = VM_MODULE in own and VM_READY
    if vm:
        own.remove(VM_MODULE)
    global _ENV
    e = Env()
    _ENV = e
    log("shard %d: work directory %s" % (SHARD, e.work))

    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    res = {"passed": 0, "failed": 0, "skipped": 0, "files": {}}
    try:
        try:
            e.setup()
        except Exception:
            traceback.print_exc()
            _tail(e.kiyot_log)
            res["failed"] = 1
            print("[shard %d] setup failed" % SHARD, flush=True)
            return 1
        while True:
            if vm and os.path.exists(VM_READY):
                mod, vm = VM_MODULE, False
            else:
                mod = own.pop(0) if own else _take(queue_path)
            if mod is None and vm:
                mod, vm = VM_MODULE, False
            if mod is None:
                break
            t0 = time.monotonic()
            if mod == VM_MODULE and VM_READY:
                p, f, sk = _run_vm(by_mod[mod])
            else:
                p, f, sk = _run_tests(by_mod.get(mod, []), sys.stderr)
            took = time.monotonic() - t0
            res["passed"] += p
            res["failed"] += f
            res["skipped"] += sk
            res["files"][mod] = round(took, 1)
            print("[shard %d] %-22s %3d passed, %d failed in %5.1f s"
                  % (SHARD, mod, p, f, took), flush=True)
            if f:
                _tail(e.kiyot_log)
    except KeyboardInterrupt:
        log("interrupted")
        res["failed"] += 1
    finally:
        e.teardown()
        with open(result_path, "w") as f:
            json.dump(res, f)
    return 1 if res["failed"] else 0


def _run_vm(tests):
    """The VM boot once the cell image is built (VM_READY): (passed, failed, skipped)."""
    deadline = time.monotonic() + VM_READY_WAIT
    while not os.path.exists(VM_READY) and time.monotonic() < deadline:
        time.sleep(2)
    try:
        with open(VM_READY) as f:
            status = f.read().strip()
    except OSError:
        status = "none in %d s" % VM_READY_WAIT
    if status != "0":
        print("[shard %d] %s not run: the cell image's build ended with status %s (%s)"
              % (SHARD, VM_MODULE, status, VM_READY), flush=True)
        return 0, len(tests), 0
    return _run_tests(tests, sys.stderr)


def _leftover_daemons():
    """kiyot daemons of this suite's runs still alive once every shard ended (each shard's
    cleanup stops its own): named in the log and stopped, so that the solo pass, which compares
    node-wide tables, meets no other writer of them. Returns their command lines."""
    found = []
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        argv = pid_cmdline(pid)
        if (len(argv) > 1 and os.path.basename(argv[0]) == "kiyot" and argv[1] == "serve" and
                any("kiyot-itest-" in a or "kiyot-node-b-" in a for a in argv)):
            found.append(" ".join(argv))
            log("a kiyot of an ended shard still runs (pid %d): %s; stopping it" %
                (pid, " ".join(argv)))
            kill_pid(pid)
    return found


def run_sharded(filters, shards):
    """Runs the tests in shards processes at once (run_shard), then prints their total."""
    tests, broken = _collect(filters)
    mods = sorted({_module(t) for t in tests
                   if _module(t) not in SHARD0_ONLY and _module(t) not in SOLO},
                  key=lambda m: (-FILE_SECONDS.get(m, 10), m))
    work = tempfile.mkdtemp(prefix="kiyot-itest-shards-")
    queue_path = os.path.join(work, "queue.json")
    with open(queue_path, "w") as f:
        json.dump(mods, f)
    # the images once, before the shards push them each to its registry
    os.makedirs(CACHE, exist_ok=True)
    images.build(os.path.join(CACHE, "images"))
    log("%d tests in %d shards; their logs: %s/shard-N.log" % (len(tests), shards, work))
    procs = []

    def start(i, queue, solo=False):
        envv = dict(os.environ, KIYOT_ITEST_SHARD=str(i), KIYOT_ITEST_SHARDS="1")
        if solo:
            envv["KIYOT_ITEST_SOLO"] = "1"
        logf = open(os.path.join(work, "shard-%d.log" % len(procs)), "w")
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "harness.py"), "shard", queue,
             os.path.join(work, "result-%d.json" % len(procs))] + list(filters),
            env=envv, stdout=None, stderr=logf, stdin=subprocess.DEVNULL))
        logf.close()
    for i in range(shards):
        start(i, queue_path)

    def on_signal(signum, frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def wait_all():
        for p in procs:
            while True:
                try:
                    p.wait()
                    break
                except KeyboardInterrupt:
                    on_signal(signal.SIGINT, None)
    wait_all()
    solo = sorted({_module(t) for t in tests if _module(t) in SOLO})
    leaked = _leftover_daemons()
    if solo:
        solo_path = os.path.join(work, "solo.json")
        with open(solo_path, "w") as f:
            json.dump(solo, f)
        start(0, solo_path, solo=True)
        wait_all()
    passed = failed = skipped = 0
    files = {}
    for i, p in enumerate(procs):
        try:
            with open(os.path.join(work, "result-%d.json" % i)) as f:
                r = json.load(f)
        except (OSError, ValueError):
            r = {"passed": 0, "failed": 1, "skipped": 0, "files": {}}
        passed += r["passed"]
        failed += r["failed"]
        skipped += r["skipped"]
        files.update(r["files"])
        if r["failed"] or p.returncode != 0:
            failed += 0 if r["failed"] else 1
            sys.stderr.write("---- shard run %d failed; its log (%s):\n" % (i, "shard-%d.log" % i))
            with open(os.path.join(work, "shard-%d.log" % i), errors="replace") as f:
                sys.stderr.write(f.read())
            sys.stderr.write("---- end of shard run %d's log\n" % i)
    with open(queue_path) as f:
        left = json.load(f)
    if left:
        log("not run (the shards stopped early): " + " ".join(left))
        failed += len(left)
    log("slowest files: " + ", ".join("%s %.0f s" % kv for kv in
                                      sorted(files.items(), key=lambda kv: -kv[1])[:8]))
    if broken:
        log("%d test files failed to import" % len(broken))
    if leaked:
        log("%d kiyot daemons of ended shards were still running before the solo pass "
            "(named above): a test's cleanup leaves its kiyot" % len(leaked))
    if not os.environ.get("KIYOT_ITEST_KEEP"):
        shutil.rmtree(work, ignore_errors=True)
    line = "integration: %d passed, %d failed" % (passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print(line)
    return 1 if failed or not tests else 0


def _tail(path, n=60):
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()[-n:]
        sys.stderr.write("---- last lines of %s\n%s----\n" % (path, "".join(lines)))
    except OSError:
        pass


def probe_cell_network():
    """Checks what a cell needs from the host: from a network namespace on the bridge (as a
    cell is), the registry answers on the bridge address."""
    ns, veth = "kiyotitest-probe", "kitprobe0"
    sh("ip", "netns", "del", ns, check=False, quiet=True)
    try:
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "c")
        sh("ip", "link", "set", veth, "master", BRIDGE, "up")
        sh("ip", "link", "set", veth + "c", "netns", ns)
        sh("ip", "-n", ns, "addr", "add", "10.%d.255.254/16" % _NET, "dev", veth + "c")
        sh("ip", "-n", ns, "link", "set", veth + "c", "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        out = wait_for(lambda: sh("ip", "netns", "exec", ns, "curl", "-sf", "-m", "3", "-H",
                                  "Accept: " + images.ACCEPT,
                                  "http://%s/v2/hello/manifests/1" % REGISTRY),
                       15, "the registry from a namespace on the bridge")
        log("from a cell-like netns the registry serves hello:1 (%d bytes)" % len(out))
    finally:
        sh("ip", "link", "del", veth, check=False, quiet=True)
        sh("ip", "netns", "del", ns, check=False, quiet=True)


def check():
    """Verifies the parts that do not need kiyot: bridge, registry, images, CRI stubs."""
    e = Env()
    try:
        e.setup(with_kiyot=False)
        reg = images.Registry(REGISTRY)
        for name, t in sorted(e.catalog["tags"].items()):
            repo, tag = name.rsplit(":", 1)
            st, hdr, _ = reg.get_manifest(repo, tag)
            log("%-22s %d %s" % (name, st, hdr.get("docker-content-digest", "")))
        probe_cell_network()
        c = cri.Client(e.socket)
        log("CRI stubs: %d runtime, %d image methods" % (len(c.runtime.methods),
                                                         len(c.image.methods)))
        c.close()
    finally:
        e.teardown()
    return 0


def main(argv):
    if len(argv) >= 2 and argv[1] == "run":
        return run(argv[2:])
    if len(argv) >= 4 and argv[1] == "shard":
        return run_shard(argv[2], argv[3], argv[4:])
    if len(argv) == 3 and argv[1] == "cleanup":
        cleanup(os.path.abspath(argv[2]))
        return 0
    if len(argv) == 2 and argv[1] == "check":
        return check()
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    # Run as the module "harness", the one the test files import, so they share _ENV.
    import harness
    sys.exit(harness.main(sys.argv))
