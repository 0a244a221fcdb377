"""hostPort for pods in local cells: a port mapping with a host port is reachable on the node's
addresses and on 127.0.0.1 (DNAT in kiyot's own nat chains), from the node and from cells (the
pod's own included), a second pod cannot take the same port, the rules go with the pod, and
after a kiyot crash they are there exactly once (missing ones made again, those of cells that
are gone removed). route_localnet, which 127.0.0.1 needs, must not open the node's loopback
services to cells."""

import os
import socket
import subprocess
import unittest
import urllib.request

import grpc

from harness import BRIDGE, CIDR, HOST_IP, KiyotTest, T_CALL, sh, wait_for

HOST_PORT = 18080

# Sends a TCP SYN to 127.0.0.1:PORT as a raw Ethernet frame to the gateway's MAC, as any
# container with CAP_NET_RAW (in the default set) can, and prints "answered" when the node's
# SYN-ACK comes back for it. Run in a cell's network namespace.
SYN_PROBE = r"""
import json, socket, struct, subprocess, sys, time
port, gw, src = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", (gw, 9))
time.sleep(0.3)
mac = json.loads(subprocess.run(["ip", "-j", "neigh", "show", gw], capture_output=True,
                                text=True).stdout)[0]["lladdr"]
gwmac = bytes.fromhex(mac.replace(":", ""))
# the cell's own (nsenter keeps the node's /sys: its eth0 is the node's)
mymac = bytes.fromhex(json.loads(subprocess.run(["ip", "-j", "link", "show", "eth0"],
                                                capture_output=True, text=True).stdout)[0][
    "address"].replace(":", ""))
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
s.bind(("eth0", 0))
sip, dip = socket.inet_aton(src), socket.inet_aton("127.0.0.1")
for attempt in range(3):
    sport = 20000 + (int(time.time() * 1000) + attempt) % 30000
    tcp = struct.pack("!HHIIBBHHH", sport, port, 1, 0, 5 << 4, 0x02, 65535, 0, 0)
    tcp = tcp[:16] + struct.pack("!H", csum(sip + dip + struct.pack("!BBH", 0, 6, 20) + tcp)) \
        + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 1, 0, 64, 6, 0, sip, dip)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    s.send(gwmac + mymac + b"\x08\x00" + ip + tcp)
    s.settimeout(0.2)
    end = time.time() + 1
    while time.time() < end:
        try:
            f = s.recv(2000)
        except socket.timeout:
            continue
        if f[23] == 6 and f[26:30] == dip and struct.unpack("!H", f[36:38])[0] == sport:
            print("answered")
            sys.exit(0)
print("silent")
"""


def nat_rules(cell):
    out = subprocess.run(["iptables-save", "-t", "nat"], check=True, capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if "kiyot-hostport " + cell + " " in line]


def node_address():
    """A non-loopback address of this node (the one its default route leaves by, else the
    cells' bridge)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.1", 9))
        return s.getsockname()[0]
    except OSError:
        return HOST_IP
    finally:
        s.close()


def get(host, port=HOST_PORT):
    with urllib.request.urlopen("http://%s:%d/" % (host, port), timeout=3) as r:
        return r.read().decode()


def try_get(host, port=HOST_PORT):
    try:
        return get(host, port)
    except OSError:
        return None


class HostPortTest(KiyotTest):
    def pod_with_port(self, host_port=HOST_PORT, name=None, host_ip=""):
        pb = self.pb
        cfg = self.sandbox_config(name=name)
        cfg.port_mappings.append(pb.PortMapping(protocol=pb.TCP, container_port=8080,
                                                host_port=host_port, host_ip=host_ip))
        return self.run_pod(cfg)

    def web_pod(self, with_shell=False):
        """A pod serving HTTP on 8080 with hostPort HOST_PORT; with_shell adds a busybox
        container to call out of the same cell. Returns (pod, cfg, shell container)."""
        pod, cfg = self.pod_with_port()
        web, _ = self.create(pod, cfg, self.env.ref("hello:1"))
        self.start(web)
        shell = None
        if with_shell:
            shell, _ = self.create(pod, cfg, self.env.ref("busybox:1"),
                                   command=["sleep", "3600"])
            self.start(shell)
            self.wait_state(shell, "CONTAINER_RUNNING")
        self.wait_state(web, "CONTAINER_RUNNING")
        return pod, cfg, shell

    def fetch_in(self, cid, host):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=["timeout", "3", "wget", "-q", "-O", "-",
                                   "http://%s:%d/" % (host, HOST_PORT)], timeout=10),
            timeout=T_CALL)
        return r.stdout.decode() if r.exit_code == 0 else None

    def test_host_port_from_the_node_and_from_cells_one_pod_per_port_gone_with_the_pod(self):
        pod, cfg, shell = self.web_pod(with_shell=True)
        for host in ("127.0.0.1", node_address()):
            self.assertIn("hello from kiyot",
                          wait_for(lambda: try_get(host), 15, "hostPort on " + host))
        # another cell, and the pod's own cell (hairpin), through the node's addresses
        other, other_cfg = self.run_pod()
        caller, _ = self.create(other, other_cfg, self.env.ref("busybox:1"),
                                command=["sleep", "3600"])
        self.start(caller)
        self.wait_state(caller, "CONTAINER_RUNNING")
        for cid, who in ((caller, "another cell"), (shell, "the pod's own cell")):
            for host in (HOST_IP, node_address()):
                self.assertIn("hello from kiyot",
                              wait_for(lambda: self.fetch_in(cid, host), 15,
                                       "hostPort on %s from %s" % (host, who)))
        cell = pod[:20]
        self.assertEqual(len(nat_rules(cell)), 2, nat_rules(cell))  # the DNAT and the hairpin
        # a second pod may not take the port, even on one address; the error names the holder
        for host_ip in ("", "127.0.0.1"):
            details = self.assertCode(grpc.StatusCode.FAILED_PRECONDITION, self.pod_with_port,
                                      host_ip=host_ip)
            self.assertIn("%d/tcp" % HOST_PORT, details)
            self.assertIn("default/" + cfg.metadata.name, details)
        self.assertIn("hello from kiyot", get("127.0.0.1"))
        self.stop_pod(pod)
        self.assertEqual(nat_rules(cell), [])
        self.remove_pod(pod)
        self.assertEqual(nat_rules(cell), [])
        # the port is free again
        again, _ = self.pod_with_port()
        self.assertEqual(len(nat_rules(again[:20])), 2)

    def test_host_port_rules_after_a_kiyot_crash_are_there_once_and_work(self):
        pod, cfg, _ = self.web_pod()
        cell = pod[:20]
        wait_for(lambda: try_get("127.0.0.1"), 15, "hostPort on 127.0.0.1")
        rules = nat_rules(cell)
        self.assertEqual(len(rules), 2, rules)
        self.env.kill_kiyot()
        # while kiyot is down: the kernel's rules keep serving; one of them goes astray, and a
        # cell that no longer exists (of this kiyot's network, and of another's) left rules
        self.assertIn("hello from kiyot", get("127.0.0.1"))
        dnat = [r for r in rules if r.startswith("-A KIYOT-HOSTPORTS ")][0]
        sh("sh", "-c", "iptables -w -t nat -D %s" % dnat[3:])
        ghost_ip = CIDR.split("/")[0].rsplit(".", 2)[0] + ".250.250"
        foreign = [("ghost0000000000000000", ghost_ip), ("foreign0000000000000", "10.254.0.9")]
        for gid, ip in foreign:
            sh("iptables", "-w", "-t", "nat", "-A", "KIYOT-HOSTPORTS", "-p", "tcp", "--dport",
               "18099", "-m", "comment", "--comment", "kiyot-hostport %s gone/pod" % gid,
               "-j", "DNAT", "--to-destination", ip + ":80")
        self.addCleanup(lambda: [sh("sh", "-c", "iptables -w -t nat -D %s" % r[3:],
                                    check=False) for r in nat_rules(foreign[1][0])])
        self.c = self.env.start_kiyot()
        self.assertEqual(sorted(nat_rules(cell)), sorted(rules))
        self.assertEqual(nat_rules(foreign[0][0]), [], "a gone cell's rule is still there")
        self.assertEqual(len(nat_rules(foreign[1][0])), 1, "another network's rule went")
        self.assertIn("hello from kiyot", get("127.0.0.1"))
        self.assertIn("hello from kiyot", get(node_address()))
        # a second start changes nothing
        self.c = self.env.restart_kiyot()
        self.assertEqual(sorted(nat_rules(cell)), sorted(rules))
        self.stop_pod(pod)
        self.remove_pod(pod)
        self.assertEqual(nat_rules(cell), [])

    def test_route_localnet_does_not_open_the_nodes_loopback_to_cells(self):
        pod, _, _ = self.web_pod()
        ip = self.pod_ip(pod)
        netns = "/run/netns/kiyot-" + pod[:20]
        self.assertTrue(os.path.exists(netns), netns)
        wait_for(lambda: try_get("127.0.0.1"), 15, "hostPort on 127.0.0.1")
        with open("/proc/sys/net/ipv4/conf/%s/route_localnet" % BRIDGE) as f:
            self.assertEqual(f.read().strip(), "1")
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self.addCleanup(listener.close)
        port = listener.getsockname()[1]

        def probe():
            return subprocess.run(["nsenter", "--net=" + netns, "python3", "-c", SYN_PROBE,
                                   str(port), HOST_IP, ip], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        self.assertEqual(probe(), "silent", "a cell reached a service on the node's 127.0.0.1")
        # the probe itself works: without kiyot's guards (this one, and the one that keeps
        # cells off every address of the node) the node answers it
        guards = [r for r in sh("iptables", "-w", "-S", "INPUT").splitlines()
                  if ("kiyot hostports loopback guard" in r or "kiyot cells node guard" in r)
                  and BRIDGE in r]
        self.assertEqual(len(guards), 2, guards)
        for guard in guards:
            sh("sh", "-c", "iptables -w -D %s" % guard[3:])
        try:
            self.assertEqual(probe(), "answered")
        finally:
            # kiyot's start puts the guard back for the pods with hostPorts
            self.c = self.env.restart_kiyot()
        self.assertEqual(probe(), "silent")
        self.stop_pod(pod)
        self.remove_pod(pod)


if __name__ == "__main__":
    unittest.main()
