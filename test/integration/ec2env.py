"""The suite's local EC2 endpoint (test/ec2/ec2sim.py) with instances booted as local cells by
`kiyot local-cell`, for the EC2 tests and the scale benchmark."""

import json
import os
import signal
import subprocess
import urllib.request

from harness import BRIDGE, BUILD, REPO, wait_for

KEY, SECRET = "AKIAKIYOTTESTEXAMPLE", "kiyot-ec2-test-secret"


class Ec2Sim:
    """ec2sim.py serving on a free loopback port; its cells take addresses from cidr on the
    suite's bridge. extra: more ec2sim flags."""

    def __init__(self, work, cidr, extra=(), admin_timeout=10, stop_timeout=60):
        self.work = work
        self.admin_timeout = admin_timeout
        self.stop_timeout = stop_timeout
        self.cells = os.path.join(work, "ec2-cells")
        os.makedirs(self.cells, exist_ok=True)
        kiyot = os.path.join(BUILD, "kiyot")
        common = "--state-dir %s --bridge %s --cidr %s" % (self.cells, BRIDGE, cidr)
        boot = ("%s local-cell launch %s --agent %s --id {id} --cpus {cpus} --memory {memory} "
                "--instance-type {instance_type} --cluster-id {cluster_id} "
                "--bootstrap {bootstrap}" % (kiyot, common, os.path.join(BUILD, "cell-agent")))
        term = "%s local-cell terminate %s --id {id}" % (kiyot, common)
        port_file = os.path.join(work, "ec2.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log_path = os.path.join(work, "ec2sim.log")
        logf = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", os.path.join(REPO, "test", "ec2", "ec2sim.py"), "--port", "0",
             "--port-file", port_file, "--key", "%s:%s" % (KEY, SECRET), "--region",
             "us-east-1", "--boot-cmd", boot, "--terminate-cmd", term] + list(extra),
            stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, start_new_session=True)
        logf.close()
        wait_for(lambda: os.path.exists(port_file) and open(port_file).read().strip(), 30,
                 "ec2sim to listen")
        self.endpoint = "http://127.0.0.1:%s/" % open(port_file).read().strip()

    def admin(self, path, body=None):
        req = urllib.request.Request(self.endpoint + "_admin/" + path,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=self.admin_timeout) as r:
            return json.loads(r.read() or b"null")

    def instances(self):
        got = self.admin("instances")
        return got["instances"] if isinstance(got, dict) else got

    def stop(self):
        """SIGTERM: ec2sim terminates the cells still up."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def tags_of(inst):
    """An instance's tags as a dict, whichever shape the admin API gave them in."""
    t = inst.get("tags", {})
    if isinstance(t, list):
        return {x.get("key", x.get("Key")): x.get("value", x.get("Value")) for x in t}
    return t
