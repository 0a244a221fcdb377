#!/usr/bin/python3
"""ec2sim's boot and terminate commands for cells that are real VMs: the cell image booted by
QEMU (TCG unless --accel says otherwise) with OVMF, on a tap of a bridge where a dnsmasq gives
each VM's MAC its address and ec2sim answers as the instance metadata service.

    qemu_cell.py launch --id ID --bootstrap FILE --cpus N --memory BYTES --image IMAGE
                        --bridge BR --state-dir D --cidr CIDR --dhcp-hosts FILE
                        [--dnsmasq-pid FILE] [--accel tcg|kvm] [--ovmf-code F --ovmf-vars F]
    qemu_cell.py terminate --id ID --state-dir D [--dhcp-hosts FILE --dnsmasq-pid FILE]

launch makes a copy-on-write overlay of IMAGE (a raw disk) in D, a tap on BR, a MAC derived
from ID and an address of CIDR (not the first host, which is the bridge's, nor one another VM
of D holds); it writes "MAC,IP" into the dnsmasq hosts file and sends dnsmasq SIGHUP (it
rereads the file), starts qemu daemonised (serial console in D/ID.console, monitor socket
D/ID.monitor) and prints {"ip": ..., "instance_id": ID}. The bootstrap file is not given to the
VM: its agent fetches the same document (the user-data) from the metadata service.

terminate quits the VM (the monitor's quit, then SIGTERM, then SIGKILL) and removes its tap,
overlay, firmware variables and hosts-file line. Terminating an unknown or gone VM succeeds.
"""

import argparse
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

OVMF_CODE = "/usr/share/OVMF/OVMF_CODE_4M.fd"
OVMF_VARS = "/usr/share/OVMF/OVMF_VARS_4M.fd"
MEMORY_MAX = 1024 << 20
CPUS_MAX = 2
QUIT_WAIT = 10.0


class Failure(Exception):
    pass


def run(*argv):
    res = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL, check=False)
    if res.returncode != 0:
        raise Failure(f"{' '.join(argv)}: exit {res.returncode}: "
                      f"{res.stderr.decode(errors='replace').strip()[-1000:]}")
    return res.stdout.decode(errors="replace")


def names(vm_id):
    digest = hashlib.sha256(vm_id.encode()).hexdigest()
    mac = "52:54:00:" + ":".join(digest[i:i + 2] for i in (0, 2, 4))
    return "kq" + digest[:10], mac          # tap names hold 15 characters


class Locked:
    """The state directory's lock (address choice and the hosts file)."""

    def __init__(self, state_dir):
        os.makedirs(state_dir, exist_ok=True)
        self.f = open(os.path.join(state_dir, "lock"), "a+", encoding="utf-8")

    def __enter__(self):
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


def records(state_dir):
    out = {}
    for name in os.listdir(state_dir):
        if name.endswith(".json"):
            try:
                with open(os.path.join(state_dir, name), encoding="utf-8") as f:
                    doc = json.load(f)
                out[doc["id"]] = doc
            except (OSError, ValueError, KeyError):
                continue
    return out


def pick_ip(cidr, taken):
    net = ipaddress.ip_network(cidr)
    hosts = net.hosts()
    next(hosts, None)   # the bridge's address
    for host in hosts:
        if str(host) not in taken:
            return str(host)
    raise Failure(f"no free address left in {cidr}: {len(taken)} VMs hold one")


def hosts_file_set(path, mac, ip, vm_id):
    """Rewrite the dnsmasq hosts file with (mac, ip) added (ip None: removed)."""
    lines = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            lines = [ln for ln in f.read().splitlines()
                     if ln.strip() and not ln.lower().startswith(mac.lower() + ",")]
    if ip is not None:
        lines.append(f"{mac},{ip},{vm_id[:63].replace(',', '-').replace('_', '-')}")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(ln + "\n" for ln in lines))
    os.replace(tmp, path)


def hup_dnsmasq(pid_file):
    if not pid_file:
        return
    try:
        with open(pid_file, encoding="utf-8") as f:
            pid = int(f.read().strip())
    except (OSError, ValueError) as e:
        raise Failure(f"dnsmasq's pid file {pid_file}: {e}") from e
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError as e:
        raise Failure(f"dnsmasq (pid {pid} from {pid_file}) is not running") from e


def qemu_pid(rec):
    """The VM's qemu pid if it still runs (checked against its command line), else None."""
    try:
        with open(rec["pidfile"], encoding="utf-8") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (OSError, ValueError):
        return None
    return pid if rec["overlay"].encode() in cmdline else None


def launch(args):
    for need in ("qemu-system-x86_64", "qemu-img", "ip"):
        if shutil.which(need) is None:
            raise Failure(f"{need} is missing: apt-get install qemu-system-x86 qemu-utils "
                          "iproute2")
    for path in (args.image, args.ovmf_code, args.ovmf_vars):
        if not os.path.isfile(path):
            raise Failure(f"{path} does not exist")
    d = os.path.abspath(args.state_dir)
    tap, mac = names(args.id)
    overlay = os.path.join(d, args.id + ".qcow2")
    rec = {"id": args.id, "tap": tap, "mac": mac, "overlay": overlay,
           "vars": os.path.join(d, args.id + ".vars"),
           "pidfile": os.path.join(d, args.id + ".pid"),
           "monitor": os.path.join(d, args.id + ".monitor"),
           "console": os.path.join(d, args.id + ".console"),
           "dhcp_hosts": os.path.abspath(args.dhcp_hosts),
           "dnsmasq_pid": args.dnsmasq_pid and os.path.abspath(args.dnsmasq_pid)}
    with Locked(d):
        held = records(d)
        if args.id in held and qemu_pid(held[args.id]):
            raise Failure(f"VM {args.id} is already running")
        rec["ip"] = pick_ip(args.cidr, {r.get("ip") for i, r in held.items() if i != args.id})
        with open(os.path.join(d, args.id + ".json"), "w", encoding="utf-8") as f:
            json.dump(rec, f)
        hosts_file_set(rec["dhcp_hosts"], mac, rec["ip"], args.id)
    hup_dnsmasq(rec["dnsmasq_pid"])
    run("qemu-img", "create", "-q", "-f", "qcow2", "-b", os.path.abspath(args.image),
        "-F", "raw", overlay)
    shutil.copyfile(args.ovmf_vars, rec["vars"])
    subprocess.run(["ip", "link", "del", tap], capture_output=True, check=False)
    run("ip", "tuntap", "add", "dev", tap, "mode", "tap")
    run("ip", "link", "set", tap, "master", args.bridge)
    run("ip", "link", "set", tap, "up")
    cpus = max(1, min(args.cpus, CPUS_MAX))
    mib = max(256, min(args.memory, MEMORY_MAX) >> 20)
    for stale in (rec["pidfile"], rec["monitor"]):
        if os.path.exists(stale):
            os.unlink(stale)
    argv = ["qemu-system-x86_64", "-name", args.id, "-machine", "q35", "-accel", args.accel,
            "-smp", str(cpus), "-m", f"{mib}M", "-nodefaults", "-display", "none",
            "-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={args.ovmf_code}",
            "-drive", f"if=pflash,format=raw,unit=1,file={rec['vars']}",
            "-drive", f"if=virtio,format=qcow2,file={overlay},cache=unsafe",
            "-netdev", f"tap,id=n0,ifname={tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={mac}",
            "-device", "virtio-rng-pci",
            "-serial", f"file:{rec['console']}",
            "-monitor", f"unix:{rec['monitor']},server,nowait",
            "-pidfile", rec["pidfile"], "-daemonize"]
    if args.accel == "tcg":
        argv[argv.index("-accel") + 1] = "tcg,thread=multi"
    run(*argv)
    print(json.dumps({"ip": rec["ip"], "instance_id": args.id}), flush=True)
    return 0


def _monitor_quit(path):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(path)
            s.sendall(b"quit\n")
            s.recv(4096)
    except OSError:
        pass


def _wait_gone(rec, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if qemu_pid(rec) is None:
            return True
        time.sleep(0.1)
    return qemu_pid(rec) is None


def terminate(args):
    d = os.path.abspath(args.state_dir)
    path = os.path.join(d, args.id + ".json")
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8") as f:
        rec = json.load(f)
    if qemu_pid(rec) is not None:
        _monitor_quit(rec["monitor"])
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if _wait_gone(rec, QUIT_WAIT):
                break
            pid = qemu_pid(rec)
            if pid is not None:
                os.kill(pid, sig)
        if not _wait_gone(rec, QUIT_WAIT):
            raise Failure(f"qemu of {args.id} is still running after SIGKILL")
    subprocess.run(["ip", "link", "del", rec["tap"]], capture_output=True, check=False)
    for key in ("overlay", "vars", "pidfile", "monitor"):
        try:
            os.unlink(rec[key])
        except FileNotFoundError:
            pass
    hosts = args.dhcp_hosts or rec.get("dhcp_hosts")
    with Locked(d):
        if hosts and os.path.exists(hosts):
            hosts_file_set(hosts, rec["mac"], None, args.id)
        os.replace(path, path + ".terminated")
    try:
        hup_dnsmasq(args.dnsmasq_pid or rec.get("dnsmasq_pid"))
    except Failure:
        pass    # dnsmasq gone: nothing to forget
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="qemu_cell", description=__doc__.split("\n\n")[0])
    p.add_argument("verb", choices=["launch", "terminate"])
    p.add_argument("--id", required=True)
    p.add_argument("--state-dir", required=True)
    p.add_argument("--bootstrap", help="accepted for ec2sim's command line; not used: the VM "
                   "reads its bootstrap from the metadata service")
    p.add_argument("--cpus", type=int, default=1)
    p.add_argument("--memory", type=int, default=MEMORY_MAX, help="bytes")
    p.add_argument("--image", help="the cell image (raw)")
    p.add_argument("--bridge")
    p.add_argument("--cidr", help="the bridge's network; VMs take addresses after its first")
    p.add_argument("--dhcp-hosts", help="dnsmasq's --dhcp-hostsfile")
    p.add_argument("--dnsmasq-pid", help="dnsmasq's pid file (SIGHUP after a change)")
    p.add_argument("--accel", default="tcg", choices=["tcg", "kvm"])
    p.add_argument("--ovmf-code", default=OVMF_CODE)
    p.add_argument("--ovmf-vars", default=OVMF_VARS)
    p.add_argument("--instance-type")
    p.add_argument("--cluster-id")
    args = p.parse_args(argv)
    if args.verb == "launch":
        missing = [f"--{n.replace('_', '-')}" for n in ("image", "bridge", "cidr", "dhcp_hosts")
                   if not getattr(args, n)]
        if missing:
            p.error("launch needs " + " ".join(missing))
    try:
        return launch(args) if args.verb == "launch" else terminate(args)
    except Failure as e:
        print(f"qemu_cell: {args.verb} {args.id}: {e}", file=sys.stderr)
        if args.verb == "launch":
            try:
                terminate(args)
            except (Failure, OSError):
                pass
        return 1


if __name__ == "__main__":
    sys.exit(main())
