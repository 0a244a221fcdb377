"""Debian's containerd 1.6 as the fallback runtime of the routing tests.

Everything it keeps lives under <work>/containerd: root and state directories, its socket, the
runc root, the CNI config and the host-local address store. Its pods get addresses from
CIDR on the bridge BRIDGE (neither collides with the cells' 10.78.0.0/16, 10.77 or 10.88), and
it pulls the suite's images from the test registry over plain HTTP.

    c = containerd.Containerd(work)
    c.start()            # waits until its CRI answers
    c.kill()             # SIGKILL to containerd only: shims and pods stay (a crash)
    containerd.cleanup(work)   # everything, best effort, also after a crash of the suite
"""

import ipaddress
import json
import os
import signal
import subprocess
import time

import cri

CIDR = "10.79.0.0/16"
BRIDGE = "kiyotc0"
NETWORK = "kiyot-itest-fallback"
CNI_BIN = "/usr/lib/cni"
CGROUP_PARENT = "kiyot-itest-fallback"  # pods of containerd live under this cgroup
REGISTRY = "10.78.0.1:5000"
NAMESPACE = "k8s.io"


def _log(msg):
    print("[containerd] " + msg, flush=True)


def _sh(*args, check=True):
    r = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr.strip()))
    return r.stdout


class Containerd:
    def __init__(self, work):
        self.dir = os.path.join(work, "containerd")
        self.root = os.path.join(self.dir, "root")
        self.state = os.path.join(self.dir, "state")
        self.socket = os.path.join(self.dir, "containerd.sock")
        self.endpoint = "unix://" + self.socket
        self.config = os.path.join(self.dir, "config.toml")
        self.cni_dir = os.path.join(self.dir, "cni")
        self.log_path = os.path.join(self.dir, "containerd.log")
        self.proc = None
        self.client = None

    def write_config(self):
        os.makedirs(self.cni_dir, exist_ok=True)
        cri_plugin = 'plugins."io.containerd.grpc.v1.cri"'
        with open(self.config, "w") as f:
            f.write("""version = 2
root = "{root}"
state = "{state}"
oom_score = 0

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "{dir}/opt"

[{cri}]
  sandbox_image = "{reg}/pause:3.9"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = "{dir}/runc"

[{cri}.cni]
  bin_dir = "{cnibin}"
  conf_dir = "{cni}"
  max_conf_num = 1

[{cri}.registry.mirrors."{reg}"]
  endpoint = ["http://{reg}"]
""".format(root=self.root, state=self.state, sock=self.socket, dir=self.dir, cri=cri_plugin,
                reg=REGISTRY, cnibin=CNI_BIN, cni=self.cni_dir))
        net = {
            "cniVersion": "0.4.0",
            "name": NETWORK,
            "plugins": [{
                "type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": CIDR}]],
                         "routes": [{"dst": "0.0.0.0/0"}],
                         "dataDir": os.path.join(self.dir, "ipam")},
            }],
        }
        with open(os.path.join(self.cni_dir, "10-kiyot-itest.conflist"), "w") as f:
            json.dump(net, f, indent=1)

    def _save(self):
        with open(os.path.join(self.dir, "pid.json"), "w") as f:
            json.dump({"pid": self.proc.pid if self.proc else None}, f)

    def start(self, timeout=60):
        """Starts containerd (same root and state as before, if it ran) and waits for CRI."""
        os.makedirs(self.dir, exist_ok=True)
        self.write_config()
        logf = open(self.log_path, "a")
        logf.write("==== start %s\n" % time.strftime("%H:%M:%S"))
        logf.flush()
        self.proc = subprocess.Popen(["containerd", "--config", self.config], stdout=logf,
                                     stderr=logf, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        logf.close()
        self._save()
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("containerd exited with %s; see %s" %
                                   (self.proc.returncode, self.log_path))
            if os.path.exists(self.socket):
                c = cri.Client(self.socket)
                try:
                    st = c.runtime.Status(c.pb.StatusRequest(), timeout=3).status
                    ready = {x.type: x.status for x in st.conditions}
                    if ready.get("RuntimeReady") and ready.get("NetworkReady"):
                        self.client = c
                        return c
                    last = "not ready: %s" % ready
                except Exception as e:  # noqa: BLE001 - retried until the deadline
                    last = cri.details_of(e)
                c.close()
            time.sleep(0.2)
        self.kill()
        hint = ""
        try:
            with open(self.log_path, errors="replace") as f:
                if "fsnotify watcher: too many open files" in f.read():
                    hint = ("; its CRI plugin found no free inotify instance: raise "
                            "fs.inotify.max_user_instances or end what holds them")
        except OSError:
            pass
        raise RuntimeError("containerd did not serve a ready CRI on %s in %ds (%s)%s; see %s" %
                           (self.socket, timeout, last, hint, self.log_path))

    def kill(self):
        """SIGKILL to containerd alone, as in a crash: its shims and pods keep running."""
        if self.client:
            self.client.close()
            self.client = None
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def remove_all_pods(self):
        """Stops and removes every pod containerd has, through its own CRI."""
        c = self.client
        for p in c.runtime.ListPodSandbox(c.pb.ListPodSandboxRequest(), timeout=30).items:
            c.runtime.StopPodSandbox(c.pb.StopPodSandboxRequest(pod_sandbox_id=p.id),
                                     timeout=60)
            c.runtime.RemovePodSandbox(c.pb.RemovePodSandboxRequest(pod_sandbox_id=p.id),
                                       timeout=60)


def _pids_mentioning(text, names):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if args and os.path.basename(args[0]) in names and any(text in a for a in args):
            out.append(int(d))
    return out


def _kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _wait_gone(pids, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        time.sleep(0.1)


def _netns_in_cidr():
    """Network namespaces holding an address of CIDR: containerd's pods of this run."""
    net = ipaddress.ip_network(CIDR)
    out = []
    for line in _sh("ip", "netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        if not name:
            continue
        js = _sh("ip", "-n", name, "-j", "addr", "show", check=False) or "[]"
        try:
            links = json.loads(js)
        except ValueError:
            continue
        for link in links:
            for a in link.get("addr_info", []):
                try:
                    if ipaddress.ip_address(a.get("local", "")) in net:
                        out.append(name)
                except ValueError:
                    pass
    return sorted(set(out))


def _rm_cgroups():
    base = "/sys/fs/cgroup"
    for ctrl in os.listdir(base) if os.path.isdir(base) else []:
        top = os.path.join(base, ctrl, CGROUP_PARENT)
        if not os.path.isdir(top):
            continue
        for dirpath, _, _ in sorted(os.walk(top), key=lambda x: -len(x[0])):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def cleanup(work):
    """Removes everything containerd of the run in `work` left: pods (runc containers and
    their shims), containerd itself, mounts under its directory, its pods' network namespaces,
    the CNI bridge and cgroups. Best effort; returns a list of what failed."""
    d = os.path.join(work, "containerd")
    if not os.path.isdir(d):
        return []
    problems = []

    def step(name, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - keep going, report
            problems.append("%s: %s" % (name, e))

    def containers():
        root = os.path.join(d, "runc", NAMESPACE)
        if not os.path.isdir(root):
            return
        for cid in _sh("runc", "--root", root, "list", "-q", check=False).split():
            _sh("runc", "--root", root, "kill", "--all", cid, "KILL", check=False)
            _sh("runc", "--root", root, "delete", "--force", cid, check=False)
    step("containers", containers)

    def processes():
        try:
            with open(os.path.join(d, "pid.json")) as f:
                pid = json.load(f).get("pid")
        except (OSError, ValueError):
            pid = None
        pids = _pids_mentioning(d, ("containerd-shim-runc-v2",))
        if pid and pid in _pids_mentioning(d, ("containerd",)):
            pids.append(pid)
        for p in pids:
            _kill(p)
        _wait_gone(pids)
    step("processes", processes)

    def mounts():
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4] for line in f]
        for m in sorted((p for p in points if p.startswith(d + "/")), key=len, reverse=True):
            _sh("umount", "-l", m, check=False)
    step("mounts", mounts)

    def netns():
        for name in _netns_in_cidr():
            _sh("ip", "netns", "del", name, check=False)
    step("netns", netns)

    def bridge():
        if BRIDGE in _sh("ip", "-o", "link", "show", check=False):
            _sh("ip", "link", "del", BRIDGE, check=False)
    step("bridge", bridge)
    step("cgroups", _rm_cgroups)
    for p in problems:
        _log("cleanup: " + p)
    return problems
