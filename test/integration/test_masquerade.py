"""cells.masquerade: kiyot turns on forwarding and adds the MASQUERADE and FORWARD rules for
local cells, so a cell reaches a network past the node. The network past the node is a
namespace of its own on a documentation range the machine does not use, behind a veth, with
no route back to the cells: only traffic the node masquerades gets an answer."""

import ipaddress
import json
import os
import subprocess

from harness import BRIDGE, CIDR, KiyotTest, T_CALL, log, sh, wait_for

OUT_NS = "kiyott-out"
HOST_IF, NS_IF = "kiyott-o0", "kiyott-o1"
CANDIDATES = ["198.51.100.0/24", "203.0.113.0/24", "192.0.2.0/24"]


def free_range():
    """A /24 no route of the machine overlaps."""
    used = []
    for r in json.loads(sh("ip", "-j", "route", "show", "table", "all")):
        dst = r.get("dst", "")
        if dst and dst != "default" and ":" not in dst:
            try:
                used.append(ipaddress.ip_network(dst if "/" in dst else dst + "/32",
                                                 strict=False))
            except ValueError:
                pass
    for c in CANDIDATES:
        net = ipaddress.ip_network(c)
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free documentation range for the outside network")
COMMENT = "kiyot cells %s" % CIDR
RULES = [("nat", "POSTROUTING", ["-s", CIDR, "!", "-o", BRIDGE, "-j", "MASQUERADE"]),
         ("filter", "FORWARD", ["-i", BRIDGE, "-j", "ACCEPT"]),
         ("filter", "FORWARD", ["-o", BRIDGE, "-m", "conntrack", "--ctstate",
                                "RELATED,ESTABLISHED", "-j", "ACCEPT"])]


def drop_rules():
    """Removes kiyot's rules for the suite's cells (as often as they are there)."""
    for table, chain, rule in RULES:
        args = ["iptables", "-w", "-t", table, "-D", chain] + rule + \
            ["-m", "comment", "--comment", COMMENT]
        while subprocess.run(args, stderr=subprocess.DEVNULL).returncode == 0:
            pass


class MasqueradeTest(KiyotTest):
    def setUp(self):
        super().setUp()
        drop_rules()
        subprocess.run(["ip", "netns", "del", OUT_NS], stderr=subprocess.DEVNULL)
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            self.forward = f.read().strip()
        net = free_range()
        host_ip, self.out_ip = str(net.network_address + 1), str(net.network_address + 2)
        sh("ip", "netns", "add", OUT_NS)
        self.addCleanup(self.teardown_outside)
        sh("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF)
        sh("ip", "link", "set", NS_IF, "netns", OUT_NS)
        sh("ip", "addr", "add", host_ip + "/24", "dev", HOST_IF)
        sh("ip", "link", "set", HOST_IF, "up")
        sh("ip", "-n", OUT_NS, "addr", "add", self.out_ip + "/24", "dev", NS_IF)
        sh("ip", "-n", OUT_NS, "link", "set", NS_IF, "up")
        sh("ip", "-n", OUT_NS, "link", "set", "lo", "up")
        www = os.path.join(self.env.work, "outside-www")
        os.makedirs(www, exist_ok=True)
        with open(os.path.join(www, "index.html"), "w") as f:
            f.write("past the node\n")
        self.httpd = subprocess.Popen(["ip", "netns", "exec", OUT_NS, "busybox", "httpd", "-f",
                                       "-p", self.out_ip + ":8081", "-h", www])

    def teardown_outside(self):
        self.httpd.kill()
        self.httpd.wait()
        subprocess.run(["ip", "netns", "del", OUT_NS], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "link", "del", HOST_IF], stderr=subprocess.DEVNULL)
        drop_rules()
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write(self.forward + "\n")

    def restore(self):
        self.env.cells_extra = ""
        self.env.restart_kiyot()

    def fetch(self, cid):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=["timeout", "3", "wget", "-q", "-O", "-",
                                   "http://%s:8081/" % self.out_ip], timeout=10),
            timeout=T_CALL)
        return r.stdout.decode() if r.exit_code == 0 else None

    def test_cells_reach_past_the_node(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        nat = subprocess.run(["iptables", "-w", "-t", "nat", "-S", "POSTROUTING"],
                             capture_output=True, text=True).stdout
        if "MASQUERADE" not in nat:
            # the node masquerades nothing yet: the outside cannot answer the cell
            self.assertIsNone(self.fetch(cid), "the outside answered without NAT")
        else:
            log("the node already masquerades; the check without kiyot's rules is skipped")

        self.env.cells_extra = "  masquerade: true\n"
        self.addCleanup(self.restore)
        self.env.restart_kiyot()
        self.c = self.env.client
        body = wait_for(lambda: self.fetch(cid), 30, "the cell to reach %s" % self.out_ip)
        self.assertEqual(body, "past the node\n")
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            self.assertEqual(f.read().strip(), "1")
        for table, chain, _ in RULES:
            listed = subprocess.run(["iptables", "-w", "-t", table, "-S", chain],
                                    capture_output=True, text=True).stdout
            self.assertIn(COMMENT, listed, "%s %s has no rule of kiyot's" % (table, chain))
        # a second start adds nothing twice
        self.env.restart_kiyot()
        nat = subprocess.run(["iptables", "-w", "-t", "nat", "-S", "POSTROUTING"],
                             capture_output=True, text=True).stdout
        self.assertEqual(nat.count(COMMENT), 1, nat)
