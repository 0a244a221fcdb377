"""On-demand prices from the AWS Price List, against the suite's local EC2 endpoint (ec2sim,
which also answers the Price List's GetProducts, signatures checked with botocore): a pod's
sizing reason (PodSandboxStatus' verbose info, the Cell's sizingReason) quotes the price the
List gave and says so; when the List refuses, the shipped snapshot's price, saying that, and
kiyot's log names the missing IAM action once.

A kiyot configured with `cells.provider: ec2` and `ec2.priceList` pointed at ec2sim serves these
tests on its own socket; the suite's local-provider kiyot is stopped meanwhile."""

import json
import os
import signal

from ec2env import Ec2Kiyot, Ec2Sim
from harness import KiyotTest, net_addr, wait_for

EC2_CIDR = net_addr("204.0/24")
TYPE = "m5.large"
LISTED = 0.1234  # what ec2sim's Price List answers for TYPE in these tests
SHIPPED = 0.096  # TYPE's on-demand price in the shipped catalog (us-east-1)


class Ec2PriceListTest(KiyotTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.env.kill_kiyot(signal.SIGTERM)
        cls.sim = Ec2Sim(cls.env.work, EC2_CIDR, ["--terminated-ttl", "30",
                                                  "--bucket-describe", "off"])
        cls.kiyot = None
        cls.runs = 0

    @classmethod
    def tearDownClass(cls):
        try:
            cls.stop_ec2_kiyot()
            cls.sim.stop()
        finally:
            cls.env.start_kiyot()
            super().tearDownClass()

    def setUp(self):
        # not KiyotTest's: it would start the suite's kiyot again
        self.sim.admin("faults/clear", {})

    @classmethod
    def start_ec2_kiyot(cls):
        """A new kiyot (its own state and log) asking ec2sim's Price List."""
        cls.runs += 1
        k = Ec2Kiyot(cls.sim, cls.env.work, "ec2price", price_list=True,
                     state=os.path.join(cls.env.work, "ec2price-state-%d" % cls.runs),
                     log_path=os.path.join(cls.env.work, "kiyot-ec2price-%d.log" % cls.runs))
        cls.kiyot, cls.state, cls.sock, cls.log_path = k.proc, k.state, k.sock, k.log_path
        cls.c = k.client
        cls.pb = cls.c.pb

    @classmethod
    def stop_ec2_kiyot(cls):
        if cls.kiyot and cls.kiyot.poll() is None:
            cls.c.close()
            cls.kiyot.send_signal(signal.SIGTERM)
            cls.kiyot.wait(60)

    def price_lines(self):
        """kiyot's log lines about on-demand prices ("catalog prices: ...")."""
        with open(self.log_path, errors="replace") as f:
            return [line for line in f if "catalog prices:" in line]

    def reason_of_a_pod(self):
        """The sizing reason of a pod pinned to TYPE, from PodSandboxStatus' verbose info."""
        cfg = self.sandbox_config(annotations={"pod.elotl.co/instance-type": TYPE})
        pod = self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                           timeout=180).pod_sandbox_id
        try:
            st = self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
                pod_sandbox_id=pod, verbose=True), timeout=30)
            info = json.loads(st.info["info"])
            self.assertEqual(info["instanceType"], TYPE)
            return info["sizingReason"]
        finally:
            self.c.runtime.StopPodSandbox(self.pb.StopPodSandboxRequest(pod_sandbox_id=pod),
                                          timeout=120)
            self.c.runtime.RemovePodSandbox(self.pb.RemovePodSandboxRequest(
                pod_sandbox_id=pod), timeout=60)

    def test_a_pods_reason_quotes_the_price_list(self):
        self.sim.admin("faults/clear", {})
        self.sim.admin("prices", {TYPE: LISTED})
        self.sim.admin("stats/reset", {})
        self.start_ec2_kiyot()
        try:
            lines = wait_for(lambda: [l for l in self.price_lines()
                                      if "from the AWS Price List" in l], 120,
                             "the Price List's prices in kiyot's log")
            self.assertIn("catalog prices: us-east-1: ", lines[0])
            # paged: every page of ec2sim's catalog, 20 products each
            stats = self.sim.admin("stats")
            self.assertGreater(stats["ok"].get("GetProducts", 0), 10)
            reason = self.reason_of_a_pod()
            self.assertRegex(reason, r"%s \$%.4f/h \(AWS Price List 20\d\d-\d\d-\d\d "
                             r"\d\d:\d\d UTC\)" % (TYPE.replace(".", r"\."), LISTED))
        finally:
            self.stop_ec2_kiyot()
            self.sim.admin("prices", {TYPE: None})

    def test_a_refused_price_list_falls_back_to_the_snapshot(self):
        self.sim.admin("faults/clear", {})
        self.sim.admin("prices", {TYPE: LISTED})
        self.sim.admin("fault", {"action": "GetProducts", "code": "AccessDeniedException",
                                 "message": "User: arn:aws:sts::123456789012:assumed-role/"
                                 "node/i-0 is not authorized to perform: "
                                 "pricing:GetProducts"})
        self.start_ec2_kiyot()
        try:
            lines = wait_for(self.price_lines, 120, "the Price List's failure in kiyot's log")
            self.assertEqual(len(lines), 1, lines)
            self.assertIn("AccessDeniedException", lines[0])
            self.assertIn("need the IAM action pricing:GetProducts", lines[0])
            self.assertIn("stay those of the shipped snapshot of 20", lines[0])
            reason = self.reason_of_a_pod()
            self.assertRegex(reason, r"%s \$%.4f/h \(shipped snapshot of 20\d\d-\d\d-\d\d\)"
                             % (TYPE.replace(".", r"\."), SHIPPED))
            self.assertNotIn("AWS Price List", reason)
            self.assertEqual(len(self.price_lines()), 1, "one warning, not one a pod")
        finally:
            self.stop_ec2_kiyot()
            self.sim.admin("faults/clear", {})
            self.sim.admin("prices", {TYPE: None})
