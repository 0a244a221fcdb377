"""kiyot's Prometheus metrics, scraped by a real Prometheus (Debian's prometheus package) and
checked with its promtool."""

import json
import os
import shutil
import signal
import socket
import subprocess
import urllib.parse
import urllib.request
import unittest

from harness import KiyotTest, log, wait_for

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


@unittest.skipUnless(PROMETHEUS and PROMTOOL,
                     "prometheus and promtool are missing: run deploy/install-deps.sh")
class MetricsTest(KiyotTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.port = free_port()
        cls.url = "http://127.0.0.1:%d/metrics" % cls.port
        cls.saved_extra = cls.env.extra_config
        cls.env.extra_config += "metrics:\n  listen: \"127.0.0.1:%d\"\n" % cls.port
        cls.env.restart_kiyot()
        cls.prom = None
        cls.prom_dir = os.path.join(cls.env.work, "prometheus")
        os.makedirs(cls.prom_dir, exist_ok=True)
        cls.prom_port = free_port()
        conf = os.path.join(cls.prom_dir, "prometheus.yml")
        with open(conf, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: kiyot\n"
                    "    static_configs:\n      - targets: [\"127.0.0.1:%d\"]\n" % cls.port)
        cls.prom_log = open(os.path.join(cls.prom_dir, "prometheus.log"), "w")
        cls.prom = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + conf,
             "--storage.tsdb.path=" + os.path.join(cls.prom_dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % cls.prom_port],
            stdout=cls.prom_log, stderr=cls.prom_log, stdin=subprocess.DEVNULL,
            start_new_session=True)

    @classmethod
    def tearDownClass(cls):
        if cls.prom and cls.prom.poll() is None:
            cls.prom.send_signal(signal.SIGTERM)
            try:
                cls.prom.wait(30)
            except subprocess.TimeoutExpired:
                cls.prom.kill()
                cls.prom.wait()
        cls.prom_log.close()
        cls.env.extra_config = cls.saved_extra
        cls.env.restart_kiyot()

    def query(self, promql):
        """The result vector of an instant query, as {labels as a sorted tuple: value}."""
        url = "http://127.0.0.1:%d/api/v1/query?%s" % (
            self.prom_port, urllib.parse.urlencode({"query": promql}))
        _, _, body = http(url)
        d = json.loads(body)
        self.assertEqual(d["status"], "success", body)
        return {tuple(sorted(r["metric"].items())): float(r["value"][1])
                for r in d["data"]["result"]}

    def wait_query(self, promql, want, what):
        """Waits until Prometheus answers promql with want (it scrapes every second)."""
        got = {}

        def ok():
            if self.prom.poll() is not None:
                raise RuntimeError("prometheus exited; see %s" % self.prom_log.name)
            got.clear()
            got.update(self.query(promql))
            return got == want
        try:
            wait_for(ok, 60, what)
        except AssertionError:
            self.fail("%s: PromQL %s gave %s, not %s" % (what, promql, got, want))

    def scraped_value(self, text, line_start):
        for line in text.splitlines():
            if line.startswith(line_start + " "):
                return float(line.split()[-1])
        return 0.0

    def test_prometheus_counts_the_pods_run_and_the_cells_by_type(self):
        name = 'kiyot_cri_requests_total{method="RunPodSandbox",code="OK"}'
        _, _, before = http(self.url)
        base = self.scraped_value(before, name)
        types = ["t3.micro", "t3.micro", "t3.small"]
        for t in types:
            self.run_pod(annotations={"pod.elotl.co/instance-type": t})
        self.wait_query('kiyot_cri_requests_total{method="RunPodSandbox",code="OK"}',
                        {(("__name__", "kiyot_cri_requests_total"), ("code", "OK"),
                          ("instance", "127.0.0.1:%d" % self.port), ("job", "kiyot"),
                          ("method", "RunPodSandbox")): base + len(types)},
                        "the RunPodSandbox calls the test made")
        self.wait_query('sum by (instance_type) '
                        '(kiyot_cells{phase="Running",instance_type=~"t3.micro|t3.small"})',
                        {(("instance_type", "t3.micro"),): 2.0,
                         (("instance_type", "t3.small"),): 1.0},
                        "the cells by instance type")
        price = self.query('sum(kiyot_cells_price_dollars_per_hour)')
        self.assertTrue(price and list(price.values())[0] > 0,
                        "no price for the live cells: %s" % price)
        lat = self.query('kiyot_cri_request_duration_seconds_count{method="RunPodSandbox"}')
        self.assertEqual(list(lat.values()), [base + len(types)])
        # every cell's feed is connected
        self.wait_query('kiyot_cell_feeds_connected >= bool %d' % len(types),
                        {(("instance", "127.0.0.1:%d" % self.port), ("job", "kiyot")): 1.0},
                        "the cells' feeds connected")

    def test_image_pulls_are_counted(self):
        _, _, before = http(self.url)
        base = self.scraped_value(before, 'kiyot_image_pulls_total{outcome="ok"}')
        _, cfg = self.run_pod()
        self.pull(self.env.ref("hello:1"), cfg)
        self.wait_query('kiyot_image_pulls_total{outcome="ok"}',
                        {(("__name__", "kiyot_image_pulls_total"),
                          ("instance", "127.0.0.1:%d" % self.port), ("job", "kiyot"),
                          ("outcome", "ok")): base + 1},
                        "the image pull the test made")

    def test_promtool_finds_no_problem_in_the_exposition(self):
        self.run_pod()  # so that the cells' families have series
        status, ctype, text = http(self.url)
        self.assertEqual(status, 200)
        self.assertEqual(ctype, "text/plain; version=0.0.4; charset=utf-8")
        for family in ("kiyot_cri_requests_total", "kiyot_cells", "process_open_fds",
                       "process_resident_memory_bytes", "kiyot_cell_launch_duration_seconds"):
            self.assertIn("# TYPE %s " % family, text)
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=60)
        out = (p.stdout + p.stderr).decode()
        if p.returncode != 0 or out.strip():
            log("exposition promtool refused:\n" + text)
        self.assertEqual(p.returncode, 0, "promtool check metrics: " + out)
        self.assertEqual(out.strip(), "", "promtool check metrics: " + out)

    def test_other_paths_answer_404(self):
        with self.assertRaises(urllib.error.HTTPError) as e:
            http("http://127.0.0.1:%d/" % self.port)
        self.assertEqual(e.exception.code, 404)


if __name__ == "__main__":
    unittest.main()
