"""The suite's local EC2 endpoint (test/ec2/ec2sim.py) with instances booted as local cells by
`kiyot local-cell`, and a kiyot serving with the EC2 provider against it, for the EC2 tests and
the scale benchmark."""

import json
import os
import signal
import subprocess
import urllib.request

import cri
from harness import BRIDGE, BUILD, REGISTRY, REPO, wait_for

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


def merged(base, more):
    """base with more's keys: mappings merged key by key, None removing a key."""
    out = dict(base)
    for k, v in more.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merged(out[k], v)
        else:
            out[k] = v
    return out


class Ec2Kiyot:
    """A kiyot serving with `cells.provider: ec2` against sim, started at once and answering
    CRI when made (self.client). Its files are in work, named for name: state NAME-state, socket
    kiyot-NAME.sock, config kiyot-NAME.yaml, log kiyot-NAME.log (state and log_path override).

    The config is written from keyword arguments, each a top-level section merged into the
    defaults key by key (None removes a key): ec2 is sim's endpoint, imageId ami-0kiyotcell,
    us-east-1, no instance metadata, launches of at most 120 s; the suite's registry insecure.
    price_list: False (the default) keeps the shipped prices and asks nothing of the AWS Price
    List's public endpoint, True asks sim's Price List, or a URL. The credentials are ec2sim's
    (KEY, SECRET), from the environment only."""

    def __init__(self, sim, work, name, price_list=False, state=None, log_path=None, **config):
        self.state = state or os.path.join(work, "%s-state" % name)
        self.sock = os.path.join(work, "kiyot-%s.sock" % name)
        self.config_path = os.path.join(work, "kiyot-%s.yaml" % name)
        self.log_path = log_path or os.path.join(work, "kiyot-%s.log" % name)
        if price_list is True:
            price_list = sim.endpoint
        cfg = merged({"cells": {"provider": "ec2"},
                      "ec2": {"endpoint": sim.endpoint, "imageId": "ami-0kiyotcell",
                              "region": "us-east-1", "noInstanceMetadata": True,
                              "launchTimeoutSeconds": 120, "priceList": price_list},
                      "registries": {REGISTRY: {"insecure": True}}}, config)
        with open(self.config_path, "w") as f:
            json.dump(cfg, f, indent=1)  # JSON is YAML
        envv = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                    AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_CONFIG_FILE="/nonexistent")
        with open(self.log_path, "a") as logf:
            self.proc = subprocess.Popen(
                [os.path.join(BUILD, "kiyot"), "serve", "--socket", self.sock, "--state-dir",
                 self.state, "--config", self.config_path, "--log-level", "debug"],
                stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, env=envv,
                start_new_session=True)

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("kiyot (ec2) exited; see %s" % self.log_path)
            c = cri.Client(self.sock)
            c.runtime.Version(c.pb.VersionRequest(), timeout=2)
            return c
        self.client = wait_for(ready, 30, "the ec2 kiyot to answer")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """sig (SIGTERM: a clean stop), then waits for the exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout)


def tags_of(inst):
    """An instance's tags as a dict, whichever shape the admin API gave them in."""
    t = inst.get("tags", {})
    if isinstance(t, list):
        return {x.get("key", x.get("Key")): x.get("value", x.get("Value")) for x in t}
    return t
