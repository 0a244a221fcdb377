"""What a local cell may do on the node's network. A container reaches no service of the node
(a port the test opens on the bridge's address and on the node's own, a stand-in kubelet on
10250 when it is free, kiyot's streaming server) but what cells.nodePorts lists (the suite's
registry) and answers to the node's own calls; it still reaches another cell's pod IP. A
container with CAP_NET_RAW (the default set) that writes frames with a neighbour's IP or
Ethernet address, or ARP answers claiming a neighbour's IP, is not heard and not believed,
checked where they were sent. kiyot restores the rules at start, a cell's go with it, and a
default unit has exactly containerd's capabilities.

The containers that write raw frames run the node's python3 (its /usr mounted read-only into a
busybox image), so the frames come from the container's own process and capabilities."""

import ipaddress
import re
import socket
import threading
import time
import unittest

import test_hostport  # its node_address (not its tests: the module, not its names)
from harness import (BRIDGE, CIDR, HOST_IP, REGISTRY, KiyotTest, T_CALL, log, log_texts, sh,
                     wait_for)

NETWORK_CHAIN = "KIYOT-CELLS-%s-%s" % tuple(CIDR.split("/"))
NODE_CHAIN = "KIYOT-NODE-" + BRIDGE

# containerd's default capability set (containerd 1.6, oci/spec.go defaultUnixCaps) and their
# numbers in linux/capability.h
CONTAINERD_CAPS = {"CHOWN": 0, "DAC_OVERRIDE": 1, "FSETID": 4, "FOWNER": 3, "MKNOD": 27,
                   "NET_RAW": 13, "SETGID": 6, "SETUID": 7, "SETFCAP": 31, "SETPCAP": 8,
                   "NET_BIND_SERVICE": 10, "SYS_CHROOT": 18, "KILL": 5, "AUDIT_WRITE": 29}

# The node's python3 in a busybox container: its /usr, and the loader where /lib64 points.
HOST_PYTHON_MOUNTS = (("/usr", "/usr", True), ("/lib", "/usr/lib", True),
                      ("/lib64", "/usr/lib64", True))

# Prints each UDP datagram it gets as "SOURCE PAYLOAD", at once.
RECEIVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("listening", flush=True)
while True:
    data, (ip, _) = s.recvfrom(2048)
    print("%s %s" % (ip, data.decode(errors="replace")), flush=True)
"""

# Writes Ethernet frames on eth0 (CAP_NET_RAW): a UDP datagram from the cell's own addresses
# (the control), one from a neighbour's IP, one from the neighbour's Ethernet address, one from
# both, and with --arp, ARP answers telling the victim and the gateway that the neighbour's IP
# is at this cell. Each payload ends with the tag. Addresses come from the cell's ARP cache.
SPOOFER = r"""
import socket, struct, sys, time
victim, neighbour, gw, port, tag = sys.argv[1:6]
port = int(port)
arp = "--arp" in sys.argv
def kick(ip):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.connect((ip, 9))
    u.send(b"kick")
    return u.getsockname()[0]
myip = kick(victim); kick(neighbour); kick(gw)
time.sleep(0.5)
macs = {}
for line in open("/proc/net/arp").read().splitlines()[1:]:
    f = line.split()
    macs[f[0]] = bytes.fromhex(f[3].replace(":", ""))
mine = bytes.fromhex(open("/sys/class/net/eth0/address").read().strip().replace(":", ""))
vmac, nmac, gmac = macs[victim], macs[neighbour], macs[gw]
def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
def udp(dmac, smac, sip, dip, payload):
    u = struct.pack("!HHHH", 40000, port, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(u), 1, 0, 64, 17, 0,
                     socket.inet_aton(sip), socket.inet_aton(dip))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dmac + smac + b"\x08\x00" + ip + u
def arp_reply(dmac, smac, sender_mac, sender_ip, target_mac, target_ip):
    a = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 2, sender_mac,
                    socket.inet_aton(sender_ip), target_mac, socket.inet_aton(target_ip))
    return dmac + smac + b"\x08\x06" + a
frames = [udp(vmac, mine, myip, victim, b"own-" + tag.encode()),
          udp(vmac, mine, neighbour, victim, b"spoofed-ip-" + tag.encode()),
          udp(vmac, nmac, myip, victim, b"spoofed-mac-" + tag.encode()),
          udp(vmac, nmac, neighbour, victim, b"spoofed-both-" + tag.encode())]
if arp:
    frames += [arp_reply(vmac, mine, mine, neighbour, vmac, victim),
               arp_reply(gmac, mine, mine, neighbour, gmac, gw)]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for _ in range(3):
    for f in frames:
        s.send(f)
    time.sleep(0.1)
print("sent %d frames from %s" % (len(frames) * 3, myip))
"""

# Connects to each HOST:PORT (TCP) and sends a datagram to each HOST:PORT/udp; prints
# "TARGET open" or "TARGET closed" per TCP target.
PROBE = r"""
import socket, sys, threading
out = {}
def tcp(t):
    h, p = t.rsplit(":", 1)
    try:
        socket.create_connection((h, int(p)), timeout=2).close()
        out[t] = "open"
    except OSError as e:
        out[t] = "closed"
ts = []
for t in sys.argv[1:]:
    if t.endswith("/udp"):
        h, p = t[:-4].rsplit(":", 1)
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"cell", (h, int(p)))
        continue
    ts.append(threading.Thread(target=tcp, args=(t,)))
    ts[-1].start()
for t in ts:
    t.join()
for t in sorted(out):
    print(t, out[t])
"""


def free_port():
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Listener:
    """A TCP and a UDP socket on 0.0.0.0:port of the node, recording who reached them."""

    def __init__(self, port=0):
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("0.0.0.0", port))
        self.port = self.tcp.getsockname()[1]
        self.tcp.listen(64)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", self.port))
        self.peers = []
        self.closed = False
        for fn in (self._accept, self._recv):
            threading.Thread(target=fn, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, peer = self.tcp.accept()
            except OSError:
                return
            self.peers.append(("tcp", peer[0]))
            c.close()

    def _recv(self):
        while not self.closed:
            try:
                _, peer = self.udp.recvfrom(2048)
            except OSError:
                return
            self.peers.append(("udp", peer[0]))

    def close(self):
        self.closed = True
        self.tcp.close()
        self.udp.close()

    def from_cells(self):
        net = ipaddress.ip_network(CIDR)
        return [p for p in self.peers if ipaddress.ip_address(p[1]) in net and
                p[1] != HOST_IP]


def veth_of(cell_id):
    """The host end of a cell's veth, as kiyot names it (cellnet_veth_name)."""
    h = 0xcbf29ce484222325
    for b in cell_id.encode():
        h ^= b
        h = (h * 0x100000001b3) & 0xffffffffffffffff
    return "kv%012x" % (h & 0xffffffffffff)


def mac_of(ip):
    return "02:6b:" + ":".join("%02x" % int(x) for x in ip.split("."))


def ebtables_nat():
    """This kiyot's bridge nat rules, sorted, without ebtables-save's dated comments: its
    network's chain and the jump to it, and every cell chain no other network's chain jumps to
    (one left behind included). Another network's cells (the unit tests', another program's
    chains) are not this kiyot's to keep."""
    lines = [line for line in sh("ebtables-save", "-t", "nat").splitlines()
             if not line.startswith("#")]
    foreign = {m.group(2) for line in lines
               for m in [re.match(r"-A (KIYOT-CELLS-\S+) .* -j (KIYOT-CELL-\S+)$", line)]
               if m and m.group(1) != NETWORK_CHAIN}

    def ours(line):
        chain = line.split()[1] if line.startswith("-A ") else line.split()[0][1:]
        if chain == "PREROUTING" and line.startswith("-A "):
            return line.endswith("-j " + NETWORK_CHAIN)
        return chain in (NETWORK_CHAIN, "PREROUTING", "OUTPUT", "POSTROUTING") or \
            chain.startswith("KIYOT-CELL-") and chain not in foreign
    return "\n".join(sorted(line for line in lines if ours(line)))


def neigh_mac(text):
    m = re.search(r"lladdr ([0-9a-f:]{17})", text)
    return m.group(1) if m else None


class CellNetworkTest(KiyotTest):
    maxDiff = None  # the whole rule sets when they differ

    def exec(self, cid, cmd, timeout=20):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid, cmd=cmd,
                                                            timeout=timeout),
                                    timeout=T_CALL)
        return r.exit_code, r.stdout.decode(), r.stderr.decode()

    def pod_with(self, command, python=False, image="busybox:1"):
        """A pod with one container running command (with the node's python3 when python):
        (pod, container, log path, pod IP)."""
        pod, cfg = self.run_pod()
        cid, logp = self.create(pod, cfg, self.env.ref(image), command=command,
                                mounts=HOST_PYTHON_MOUNTS if python else ())
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        return pod, cid, logp, self.pod_ip(pod)

    def python_pod(self):
        return self.pod_with(["sleep", "3600"], python=True)

    def probe(self, cid, targets):
        code, out, err = self.exec(cid, ["/usr/bin/python3", "-c", PROBE] + targets)
        self.assertEqual(code, 0, err)
        return dict(line.split() for line in out.splitlines())

    def restart_with(self, node_ports=None, streaming=None):
        """Restarts kiyot with other cells.nodePorts or streamingAddress; the suite's settings
        come back when the test ends."""
        def restore():
            self.env.node_ports = saved_ports
            self.env.extra_config = saved_extra
            self.env.restart_kiyot()
        saved_ports, saved_extra = self.env.node_ports, self.env.extra_config
        self.addCleanup(restore)
        if node_ports is not None:
            self.env.node_ports = node_ports
        if streaming:
            self.env.extra_config += "streamingAddress: \"%s\"\n" % streaming
        self.c = self.env.restart_kiyot()

    def test_node_services_answer_cells_only_on_the_listed_ports(self):
        blocked, listed = Listener(), Listener()
        self.addCleanup(blocked.close)
        self.addCleanup(listed.close)
        kubelet = None
        try:
            kubelet = Listener(10250)
            self.addCleanup(kubelet.close)
        except OSError:
            log("10250 is taken on this node: no stand-in kubelet")
        streaming = free_port()
        self.restart_with(node_ports=self.env.node_ports + ["%d/tcp" % listed.port],
                          streaming="0.0.0.0:%d" % streaming)
        _, cid, _, _ = self.python_pod()
        _, _, _, web_ip = self.pod_with([], image="hello:1")
        self.wait_http(web_ip)
        node = test_hostport.node_address()
        hosts = sorted({HOST_IP, node})
        closed = ["%s:%d" % (h, p) for h in hosts for p in [blocked.port, streaming] +
                  ([10250] if kubelet else [])]
        opened = ["%s:%d" % (h, listed.port) for h in hosts] + [REGISTRY, web_ip + ":8080"]
        # the node itself reaches all of them: they are really there
        for t in closed + opened:
            socket.create_connection((t.rsplit(":", 1)[0], int(t.rsplit(":", 1)[1])),
                                     timeout=3).close()
        got = self.probe(cid, closed + opened + ["%s:%d/udp" % (h, blocked.port)
                                                 for h in hosts])
        for t in closed:
            self.assertEqual(got.get(t), "closed", "a cell reached %s on the node" % t)
        for t in opened:
            self.assertEqual(got.get(t), "open", "a cell could not reach %s" % t)
        time.sleep(0.5)
        self.assertEqual(blocked.from_cells(), [], "the node's service heard a cell")
        if kubelet:
            self.assertEqual(kubelet.from_cells(), [])
        self.assertEqual(len([p for p in listed.from_cells() if p[0] == "tcp"]), len(hosts))
        # the registry serves the cell (pulls of cells that pull themselves work)
        code, out, err = self.exec(cid, ["wget", "-q", "-O", "-",
                                         "http://%s/v2/" % REGISTRY])
        self.assertEqual(code, 0, err)
        rules = sh("iptables", "-w", "-S", NODE_CHAIN)
        self.assertIn("--dport %d" % listed.port, rules)

    def send_spoofed(self, cid, victim, neighbour, port, tag, arp=False):
        code, out, err = self.exec(cid, ["/usr/bin/python3", "-c", SPOOFER, victim,
                                         neighbour, HOST_IP, str(port), tag] +
                                   (["--arp"] if arp else []))
        self.assertEqual(code, 0, out + err)
        log(out.strip())

    def heard(self, logp, tag):
        """What the receiver printed of tag's frames once the last control datagram came (the
        spoofer sends each round's control first: anything of the rounds before is in)."""
        def lines():
            got = [t for t in log_texts(logp) if t.endswith("-" + tag)]
            return got if len([t for t in got if " own-" in t]) >= 3 else None
        return wait_for(lines, 10, "the control datagrams " + tag)

    def three_cells(self):
        port = 9999
        attacker = self.python_pod()
        victim = self.pod_with(["/usr/bin/python3", "-c", RECEIVER, str(port)], python=True)
        neighbour = self.pod_with(["sleep", "3600"])
        self.wait_log(victim[2], lambda t: "listening" in t, "the receiver")
        return attacker, victim, neighbour, port

    def test_a_cell_cannot_send_as_its_neighbour(self):
        (_, a, _, a_ip), (_, v, vlog, v_ip), (npod, n, _, n_ip), port = self.three_cells()
        self.assertEqual(self.exec(a, ["cat", "/sys/class/net/eth0/address"])[1].strip(),
                         mac_of(a_ip))
        # the victim and the node know the neighbour; past the kernel's lock time an ARP
        # answer would replace what they know
        self.assertEqual(self.exec(v, ["ping", "-c", "1", "-W", "2", n_ip])[0], 0)
        sh("busybox", "ping", "-c", "1", "-W", "2", n_ip)
        time.sleep(1.5)
        self.send_spoofed(a, v_ip, n_ip, port, "guarded", arp=True)
        got = self.heard(vlog, "guarded")
        self.assertEqual(got, ["%s own-guarded" % a_ip] * 3, got)
        # the ARP answers were not believed, by the neighbour's peer nor by the node
        _, out, _ = self.exec(v, ["ip", "neigh", "show", n_ip])
        self.assertEqual(neigh_mac(out), mac_of(n_ip), out)
        out = sh("ip", "neigh", "show", n_ip, "dev", BRIDGE)
        self.assertEqual(neigh_mac(out), mac_of(n_ip), out)
        # the neighbour itself still talks to the victim
        self.assertEqual(self.exec(n, ["ping", "-c", "1", "-W", "2", v_ip])[0], 0)

    def test_kiyot_restores_the_rules_at_start_and_a_cell_takes_its_own(self):
        (apod, a, _, a_ip), (vpod, v, vlog, v_ip), (npod, _, _, n_ip), port = \
            self.three_cells()
        blocked = Listener()
        self.addCleanup(blocked.close)
        target = "%s:%d" % (HOST_IP, blocked.port)
        cells = [p[:20] for p in (apod, vpod, npod)]
        # only these three cells' rules: an earlier test's cell still going away (its
        # termination in flight on a busy node) would come back with the restart below
        mine = {veth_of(c) for c in cells}
        wait_for(lambda: set(re.findall(r"KIYOT-CELL-(\S+)", ebtables_nat())) == mine, 60,
                 "the rules of other tests' cells to go")
        saved = ebtables_nat()
        for cell in cells:
            self.assertIn("-A %s -i %s -j KIYOT-CELL-%s" % (NETWORK_CHAIN, veth_of(cell),
                                                           veth_of(cell)), saved)
        self.assertEqual(self.probe(a, [target])[target], "closed")
        # the rules go (a node's firewall reloaded): spoofing is heard and the node answers,
        # which shows that the rules are what stopped both
        sh("ebtables", "-t", "nat", "-F", NETWORK_CHAIN)
        jumps = [r for r in sh("iptables", "-w", "-S", "INPUT").splitlines()
                 if "-j " + NODE_CHAIN in r]
        self.assertEqual(len(jumps), 1, jumps)
        sh("sh", "-c", "iptables -w -D %s" % jumps[0][3:])
        self.send_spoofed(a, v_ip, n_ip, port, "open")
        self.assertIn("%s spoofed-ip-open" % n_ip, self.heard(vlog, "open"))
        self.assertEqual(self.probe(a, [target])[target], "open")
        self.c = self.env.restart_kiyot()
        self.assertEqual(ebtables_nat(), saved)
        self.send_spoofed(a, v_ip, n_ip, port, "restored")
        self.assertEqual(self.heard(vlog, "restored"), ["%s own-restored" % a_ip] * 3)
        self.assertEqual(self.probe(a, [target])[target], "closed")
        self.assertEqual(len([r for r in sh("iptables", "-w", "-S", "INPUT").splitlines()
                              if "-j " + NODE_CHAIN in r]), 1)
        # a cell's rules go with it, the others' stay
        self.stop_pod(npod)
        self.remove_pod(npod)
        after = ebtables_nat()
        self.assertNotIn(veth_of(cells[2]), after)
        for cell in cells[:2]:
            self.assertIn("KIYOT-CELL-" + veth_of(cell), after)

    def test_a_default_unit_has_exactly_containerds_capabilities(self):
        _, cid, _, _ = self.pod_with(["sleep", "3600"])
        _, out, _ = self.exec(cid, ["cat", "/proc/self/status"])
        status = dict(re.findall(r"^(Cap\w+):\s*([0-9a-f]+)$", out, re.M))
        want = sum(1 << n for n in CONTAINERD_CAPS.values())
        log("CapEff of a default unit: %s (containerd's set: %016x)" % (status.get("CapEff"),
                                                                       want))
        self.assertEqual(want, 0xa80425fb)
        for field in ("CapEff", "CapPrm", "CapBnd"):
            self.assertEqual(int(status[field], 16), want, "%s: %s" % (field, out))
        for field in ("CapInh", "CapAmb"):
            self.assertEqual(int(status[field], 16), 0, "%s: %s" % (field, out))


if __name__ == "__main__":
    unittest.main()
