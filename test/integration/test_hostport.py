"""hostPort for pods in local cells: a port mapping with a host port is reachable on the node's
addresses and on 127.0.0.1 (DNAT in kiyot's own nat chains), a second pod cannot take the same
port, and the rules go with the pod and outlive a kiyot crash unchanged."""

import socket
import subprocess
import unittest
import urllib.request

import grpc

from harness import KiyotTest, wait_for

HOST_PORT = 18080


def nat_rules(cell):
    out = subprocess.run(["iptables-save", "-t", "nat"], check=True, capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if "kiyot-hostport " + cell in line]


def node_address():
    """A non-loopback address of this node (the one its default route leaves by)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("10.255.255.1", 9))
        return s.getsockname()[0]
    finally:
        s.close()


class HostPortTest(KiyotTest):
    def pod_with_port(self, host_port=HOST_PORT, name=None):
        pb = self.pb
        cfg = self.sandbox_config(name=name)
        cfg.port_mappings.append(pb.PortMapping(protocol=pb.TCP, container_port=8080,
                                                host_port=host_port))
        return self.run_pod(cfg)

    def get(self, host, port=HOST_PORT):
        with urllib.request.urlopen("http://%s:%d/" % (host, port), timeout=3) as r:
            return r.read().decode()

    def test_host_port_on_loopback_and_the_node_address_then_gone(self):
        pod, cfg = self.pod_with_port()
        cid, _ = self.create(pod, cfg, self.env.ref("hello:1"))
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        for host in ("127.0.0.1", node_address()):
            self.assertIn("hello from kiyot",
                          wait_for(lambda: self.try_get(host), 15, "hostPort on " + host))
        cell = pod[:20]
        self.assertEqual(len(nat_rules(cell)), 2)  # the DNAT and the hairpin
        # a second pod may not take the port; the error names the holder
        details = self.assertCode(grpc.StatusCode.UNKNOWN, self.pod_with_port)
        self.assertIn("%d/tcp" % HOST_PORT, details)
        self.assertIn(cfg.metadata.name, details)
        # a crash of kiyot changes nothing: the rules are there once and still work
        self.env.restart_kiyot()
        self.c = self.env.client
        self.assertEqual(len(nat_rules(cell)), 2)
        self.assertIn("hello from kiyot", self.get("127.0.0.1"))
        self.stop_pod(pod)
        self.remove_pod(pod)
        self.assertEqual(nat_rules(cell), [])

    def try_get(self, host):
        try:
            return self.get(host)
        except OSError:
            return None


if __name__ == "__main__":
    unittest.main()
