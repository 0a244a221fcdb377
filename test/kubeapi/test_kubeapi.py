#!/usr/bin/env python3
"""The local API endpoint checked with real clients: kubectl (apply, create, replace, patch,
get with printer columns, delete) and python3-kubernetes (CustomObjectsApi, CoreV1Api), so the
suite's endpoint answers as the real API server does for what kiyot uses (Cell objects and Pod
objects) and for what deploy/ ships: every manifest there applies with kubectl's strict
validation, and fields a kind does not have are refused, warned about or dropped as a 1.26 API
server does. The shipped YAML is also read as YAML 1.1 and 1.2 readers read it."""
import glob
import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CRD = os.path.join(ROOT, "deploy", "crd-cells.yaml")
# deploy/crd-cells.yaml as it was shipped once: an unquoted comma in a flow mapping made
# "which is the pod IP." a field of the schema
UNQUOTED_COMMA = os.path.join(ROOT, "test", "fixtures", "kubeapi",
                              "crd-cells-unquoted-comma.yaml")
G, V, P = "kiyot.elotl.co", "v1", "cells"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Endpoint:
    """A kubeapi.py process with its certificates and kubeconfig in a temp dir."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kubeapi-")
        self.port = free_port()
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.state = os.path.join(self.dir, "state.json")
        subprocess.run([sys.executable, os.path.join(HERE, "kubeapi.py"), "setup", self.dir,
                        "--port", str(self.port)], check=True)
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "kubeapi.py"), "serve", self.dir, "--port",
             str(self.port), "--state", self.state],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.dir, "log"), "a"))
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("kubeapi did not listen on %d" % self.port)

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None

    def kubectl(self, *args, check=True):
        r = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig] + list(args),
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError("kubectl %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    @staticmethod
    def validate_flag():
        """kubectl's strictest validation: --validate=strict, which asks the server to refuse
        unknown fields (kubectl 1.25 and later); older kubectl (Debian's is 1.20) only
        validates on the client, against schemas this endpoint does not serve."""
        if not hasattr(Endpoint, "_validate"):
            r = subprocess.run(["kubectl", "apply", "--help"], capture_output=True, text=True,
                               timeout=60)
            Endpoint._validate = "--validate=strict" if "strict" in r.stdout \
                else "--validate=false"
        return Endpoint._validate

    def apply_crd(self):
        return self.kubectl("apply", self.validate_flag(), "-f", CRD)

    def request(self, method, path, body=None, ctype="application/json"):
        """One request as any client sends it: (status, Warning headers, decoded body)."""
        ctx = ssl.create_default_context(cafile=os.path.join(self.dir, "ca.crt"))
        with open(os.path.join(self.dir, "token")) as f:
            token = f.read().strip()
        c = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=30)
        try:
            c.request(method, path, None if body is None else json.dumps(body),
                      {"Authorization": "Bearer " + token, "Content-Type": ctype})
            r = c.getresponse()
            return r.status, r.headers.get_all("Warning") or [], json.loads(r.read() or b"null")
        finally:
            c.close()

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def cell(name, labels=None, phase="Running"):
    return {"apiVersion": "%s/%s" % (G, V), "kind": "Cell",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"podName": "web", "podNamespace": "default", "podUid": "u-1",
                     "node": "node-a", "launchType": "on-demand", "instanceType": "t3a.nano",
                     "instanceId": "local-" + name, "ip": "10.77.0.9"},
            "status": {"phase": phase, "pricePerHour": 0.0047, "sizingReason": "cheapest"}}


CRONJOB_YAML = """apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
  namespace: batch
spec:
  schedule: "*/15 * * * *"
  timeZone: Etc/UTC
  jobTemplate:
    spec:
      parallelism: 2
      completions: 4
      template:
        metadata:
          annotations:
            kubernetes.io/target-runtime: kiyot
        spec:
          restartPolicy: Never
          containers:
            - name: report
              image: busybox
              command: [sh, -c, "date"]
"""


def pod(name, labels=None, cpu="500m"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "web", "image": "10.78.0.1:5000/hello:1",
                                     "resources": {"requests": {"cpu": cpu,
                                                                "memory": "256Mi"}}}]}}


POD_YAML = """apiVersion: v1
kind: Pod
metadata:
  name: %s
  labels: {app: from-yaml}
spec:
  initContainers:
  - {name: init, image: busybox:1}
  containers:
  - name: web
    image: hello:1
    resources: {requests: {cpu: "2", memory: 3Gi}}
"""


class KubeApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ep = Endpoint()
        cls.ep.start()
        cls.ep.apply_crd()
        from kubernetes import client, config
        cls.client = client
        config.load_kube_config(cls.ep.kubeconfig)
        cls.api = client.CustomObjectsApi()
        cls.core = client.CoreV1Api()

    @classmethod
    def tearDownClass(cls):
        cls.ep.cleanup()

    def test_kubeapi__crd_is_served_after_apply(self):
        r = self.ep.kubectl("get", "crd", "cells.kiyot.elotl.co", "-o", "json")
        crd = json.loads(r.stdout)
        self.assertEqual(crd["spec"]["scope"], "Cluster")
        self.assertEqual(crd["spec"]["names"]["shortNames"], ["cl"])
        again = self.ep.apply_crd()  # a second apply patches the CRD in place
        self.assertIn("cells.kiyot.elotl.co", again.stdout)

    def test_kubeapi__kubectl_prints_cell_columns(self):
        self.api.create_cluster_custom_object(G, V, P, cell("printme"))
        try:
            out = self.ep.kubectl("get", "cells").stdout
            head = out.splitlines()[0].split()
            self.assertEqual(head[:3], ["NAME", "POD", "NAMESPACE"])
            for col in ("NODE", "LAUNCH", "INSTANCE", "ID", "IP", "PHASE", "PRICE", "AGE"):
                self.assertIn(col, head)
            row = [ln for ln in out.splitlines() if ln.startswith("printme ")][0].split()
            self.assertEqual(row[1:8], ["web", "default", "node-a", "on-demand", "t3a.nano",
                                        "local-printme", "10.77.0.9"])
            self.assertEqual(row[8:10], ["Running", "0.0047"])
            short = self.ep.kubectl("get", "cl", "printme").stdout
            self.assertIn("printme", short)
        finally:
            self.api.delete_cluster_custom_object(G, V, P, "printme")

    def test_kubeapi__create_twice_is_already_exists(self):
        self.api.create_cluster_custom_object(G, V, P, cell("twice"))
        try:
            with self.assertRaises(self.client.ApiException) as cm:
                self.api.create_cluster_custom_object(G, V, P, cell("twice"))
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(json.loads(cm.exception.body)["reason"], "AlreadyExists")
        finally:
            self.api.delete_cluster_custom_object(G, V, P, "twice")

    def test_kubeapi__get_missing_is_not_found_status(self):
        with self.assertRaises(self.client.ApiException) as cm:
            self.api.get_cluster_custom_object(G, V, P, "nosuch")
        self.assertEqual(cm.exception.status, 404)
        st = json.loads(cm.exception.body)
        self.assertEqual((st["kind"], st["reason"], st["code"]), ("Status", "NotFound", 404))
        r = self.ep.kubectl("get", "cell", "nosuch", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('"nosuch" not found', r.stderr)

    def test_kubeapi__stale_update_is_conflict(self):
        made = self.api.create_cluster_custom_object(G, V, P, cell("stale"))
        try:
            fresh = dict(made, status=dict(made["status"], phase="Pending"))
            upd = self.api.replace_cluster_custom_object(G, V, P, "stale", fresh)
            self.assertNotEqual(upd["metadata"]["resourceVersion"],
                                made["metadata"]["resourceVersion"])
            with self.assertRaises(self.client.ApiException) as cm:
                self.api.replace_cluster_custom_object(G, V, P, "stale", made)
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(json.loads(cm.exception.body)["reason"], "Conflict")
            self.assertEqual(self.api.get_cluster_custom_object(G, V, P, "stale")["status"]
                             ["phase"], "Pending")
        finally:
            self.api.delete_cluster_custom_object(G, V, P, "stale")

    def test_kubeapi__patch_merges(self):
        self.api.create_cluster_custom_object(G, V, P, cell("patched"))
        try:
            out = self.api.patch_cluster_custom_object(G, V, P, "patched",
                                                       {"status": {"phase": "Pending"}})
            self.assertEqual(out["status"]["phase"], "Pending")
            self.assertEqual(out["status"]["sizingReason"], "cheapest")
        finally:
            self.api.delete_cluster_custom_object(G, V, P, "patched")

    def test_kubeapi__list_filters_by_labels(self):
        self.api.create_cluster_custom_object(G, V, P, cell("la", {"kiyot.elotl.co/node": "a"}))
        self.api.create_cluster_custom_object(G, V, P, cell("lb", {"kiyot.elotl.co/node": "b"}))
        try:
            lst = self.api.list_cluster_custom_object(G, V, P,
                                                      label_selector="kiyot.elotl.co/node=a")
            self.assertEqual([i["metadata"]["name"] for i in lst["items"]], ["la"])
            self.assertTrue(lst["metadata"]["resourceVersion"])
            out = self.ep.kubectl("get", "cells", "-l", "kiyot.elotl.co/node!=a").stdout
            self.assertIn("lb", out)
            self.assertNotIn("la ", out)
        finally:
            for n in ("la", "lb"):
                self.api.delete_cluster_custom_object(G, V, P, n)
        with self.assertRaises(self.client.ApiException) as cm:
            self.api.delete_cluster_custom_object(G, V, P, "la")
        self.assertEqual(cm.exception.status, 404)

    def test_kubeapi__wrong_token_is_unauthorized(self):
        bad = os.path.join(self.ep.dir, "bad-kubeconfig")
        with open(self.ep.kubeconfig) as f, open(bad, "w") as g:
            g.write(f.read().replace("token: ", "token: x"))
        r = subprocess.run(["kubectl", "--kubeconfig", bad, "get", "cells"],
                           capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Unauthorized", r.stderr)


    # -- pods (core v1, namespaced) --
    def test_kubeapi__kubectl_creates_gets_and_deletes_a_pod(self):
        path = os.path.join(self.ep.dir, "pod.yaml")
        with open(path, "w") as f:
            f.write(POD_YAML % "yaml-pod")
        out = self.ep.kubectl("create", "--validate=false", "-f", path).stdout
        self.assertIn("pod/yaml-pod created", out)
        try:
            got = json.loads(self.ep.kubectl("get", "pod", "yaml-pod", "-o", "json").stdout)
            self.assertEqual(got["metadata"]["namespace"], "default")
            self.assertTrue(got["metadata"]["uid"])
            self.assertEqual(got["spec"]["containers"][0]["resources"]["requests"],
                             {"cpu": "2", "memory": "3Gi"})
            self.assertEqual(got["spec"]["initContainers"][0]["image"], "busybox:1")
            table = self.ep.kubectl("get", "pods").stdout.splitlines()
            self.assertEqual(table[0].split(), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"])
            self.assertEqual([ln.split()[:3] for ln in table[1:] if ln.startswith("yaml-pod ")],
                             [["yaml-pod", "0/1", "Pending"]])
            # the python client sees what kubectl made
            self.assertEqual(self.core.read_namespaced_pod("yaml-pod", "default").metadata.uid,
                             got["metadata"]["uid"])
            again = self.ep.kubectl("create", "--validate=false", "-f", path, check=False)
            self.assertNotEqual(again.returncode, 0)
            self.assertIn("AlreadyExists", again.stderr)
        finally:
            self.ep.kubectl("delete", "pod", "yaml-pod")
        r = self.ep.kubectl("get", "pod", "yaml-pod", check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('pods "yaml-pod" not found', r.stderr)

    def test_kubeapi__pods_list_by_label_and_namespace(self):
        self.core.create_namespaced_pod("default", pod("pa", {"tier": "a"}))
        self.core.create_namespaced_pod("default", pod("pb", {"tier": "b"}))
        self.core.create_namespaced_pod("other", pod("pa", {"tier": "a"}))
        try:
            lst = self.core.list_namespaced_pod("default", label_selector="tier=a")
            self.assertEqual([(p.metadata.namespace, p.metadata.name) for p in lst.items],
                             [("default", "pa")])
            self.assertTrue(lst.metadata.resource_version)
            every = self.core.list_pod_for_all_namespaces(label_selector="tier=a")
            self.assertEqual(sorted((p.metadata.namespace, p.metadata.name)
                                    for p in every.items), [("default", "pa"), ("other", "pa")])
            out = self.ep.kubectl("get", "pods", "-l", "tier!=a", "-o", "name").stdout
            self.assertEqual(out.split(), ["pod/pb"])
            out = self.ep.kubectl("get", "pods", "-n", "other", "-o", "name").stdout
            self.assertEqual(out.split(), ["pod/pa"])
            a = self.core.read_namespaced_pod("pa", "default")
            b = self.core.read_namespaced_pod("pa", "other")
            self.assertNotEqual(a.metadata.uid, b.metadata.uid)
        finally:
            self.core.delete_namespaced_pod("pa", "default")
            self.core.delete_namespaced_pod("pb", "default")
            self.core.delete_namespaced_pod("pa", "other")
        self.assertEqual(self.core.list_namespaced_pod("default", label_selector="tier").items,
                         [])

    # -- CronJobs (batch v1, namespaced): the warm pool lists them (kiyot/kube/cronjobs.c) --
    def test_kubeapi__cronjobs_are_served_to_kubectl_and_the_python_client(self):
        path = os.path.join(self.ep.dir, "cronjob.yaml")
        with open(path, "w") as f:
            f.write(CRONJOB_YAML)
        out = self.ep.kubectl("apply", self.ep.validate_flag(), "-f", path).stdout
        self.assertIn("cronjob.batch/report created", out)
        try:
            table = self.ep.kubectl("get", "cronjobs", "-n", "batch").stdout.splitlines()
            self.assertEqual(table[1].split()[0], "report")
            got = json.loads(self.ep.kubectl("get", "cj", "report", "-n", "batch", "-o",
                                             "json").stdout)
            self.assertEqual(got["spec"]["schedule"], "*/15 * * * *")
            self.assertEqual(got["spec"]["timeZone"], "Etc/UTC")  # a 1.26 field
            batch = self.client.BatchV1Api()
            every = batch.list_cron_job_for_all_namespaces()
            self.assertEqual([(c.metadata.namespace, c.metadata.name) for c in every.items],
                             [("batch", "report")])
            job = every.items[0].spec.job_template.spec
            self.assertEqual((job.parallelism, job.completions), (2, 4))
            self.assertEqual(job.template.metadata.annotations,
                             {"kubernetes.io/target-runtime": "kiyot"})
            # the list kiyot reads, as it reads it
            status, _, body = self.ep.request("GET", "/apis/batch/v1/cronjobs")
            self.assertEqual(status, 200)
            self.assertEqual(body["kind"], "CronJobList")
            self.assertEqual(body["items"][0]["spec"]["jobTemplate"]["spec"]["template"]
                             ["spec"]["containers"][0]["image"], "busybox")
            # a field a CronJob does not have is refused under strict validation
            if self.ep.validate_flag() == "--validate=strict":
                with open(path, "w") as f:
                    f.write(CRONJOB_YAML.replace("  schedule:", "  shedule: x\n  schedule:"))
                r = self.ep.kubectl("apply", "--validate=strict", "-f", path, check=False)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn('unknown field "spec.shedule"', r.stderr)
        finally:
            self.ep.kubectl("delete", "cronjob", "report", "-n", "batch")
        self.assertEqual(self.client.BatchV1Api().list_cron_job_for_all_namespaces().items, [])

    def test_kubeapi__pod_missing_is_not_found(self):
        with self.assertRaises(self.client.ApiException) as cm:
            self.core.read_namespaced_pod("nosuch", "default")
        self.assertEqual(cm.exception.status, 404)
        st = json.loads(cm.exception.body)
        self.assertEqual((st["kind"], st["reason"], st["message"]),
                         ("Status", "NotFound", 'pods "nosuch" not found'))
        with self.assertRaises(self.client.ApiException) as cm:
            self.core.delete_namespaced_pod("nosuch", "default")
        self.assertEqual(cm.exception.status, 404)

    def test_kubeapi__pod_stale_update_is_conflict(self):
        made = self.core.create_namespaced_pod("default", pod("stalepod"))
        try:
            made.metadata.labels = {"v": "2"}
            upd = self.core.replace_namespaced_pod("stalepod", "default", made)
            self.assertNotEqual(upd.metadata.resource_version, made.metadata.resource_version)
            self.assertEqual(upd.metadata.uid, made.metadata.uid)
            made.metadata.labels = {"v": "stale"}
            with self.assertRaises(self.client.ApiException) as cm:
                self.core.replace_namespaced_pod("stalepod", "default", made)
            self.assertEqual(cm.exception.status, 409)
            self.assertEqual(json.loads(cm.exception.body)["reason"], "Conflict")
            self.assertEqual(self.core.read_namespaced_pod("stalepod", "default")
                             .metadata.labels, {"v": "2"})
        finally:
            self.core.delete_namespaced_pod("stalepod", "default")

    def test_kubeapi__pod_without_containers_is_invalid(self):
        bad = pod("empty")
        bad["spec"]["containers"] = []
        with self.assertRaises(self.client.ApiException) as cm:
            self.core.create_namespaced_pod("default", bad)
        self.assertEqual(cm.exception.status, 422)
        self.assertIn("spec.containers", json.loads(cm.exception.body)["message"])

    def test_kubeapi__events_on_a_pod_are_listed_described_and_validated(self):
        made = self.core.create_namespaced_pod("default", pod("evpod"))
        uid = made.metadata.uid
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "evpod.17a", "namespace": "default"},
              "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": "default",
                                 "name": "evpod", "uid": uid},
              "reason": "CellLaunched", "message": "cell t3a.nano $0.0047/h", "type": "Normal",
              "count": 1, "source": {"component": "kiyot", "host": "node-1"},
              "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"}
        try:
            self.core.create_namespaced_event("default", ev)
            # repeats are a patch of the count, as the kubelet's recorder sends it
            self.core.patch_namespaced_event("evpod.17a", "default", {"count": 2})
            got = self.core.list_namespaced_event(
                "default", field_selector="involvedObject.name=evpod,involvedObject.uid=" + uid)
            self.assertEqual([(e.reason, e.count) for e in got.items], [("CellLaunched", 2)])
            self.assertEqual(self.core.list_namespaced_event(
                "default", field_selector="involvedObject.name=other").items, [])
            table = self.ep.kubectl("get", "events").stdout.splitlines()
            self.assertEqual(table[0].split(), ["LAST", "SEEN", "TYPE", "REASON", "OBJECT",
                                                "MESSAGE"])
            self.assertIn("pod/evpod", table[1])
            self.assertIn("CellLaunched", self.ep.kubectl("describe", "pod", "evpod").stdout)
            # an event in another namespace than its pod's is refused as the server does
            bad = dict(ev, metadata={"name": "evpod.17b", "namespace": "other"})
            with self.assertRaises(self.client.ApiException) as cm:
                self.core.create_namespaced_event("other", bad)
            self.assertEqual(cm.exception.status, 422)
            self.assertIn("does not match event.namespace", json.loads(cm.exception.body)[
                "message"])
            # and an unknown type
            bad = dict(ev, metadata={"name": "evpod.17c", "namespace": "default"}, type="Info")
            with self.assertRaises(self.client.ApiException) as cm:
                self.core.create_namespaced_event("default", bad)
            self.assertEqual(cm.exception.status, 422)
        finally:
            self.core.delete_namespaced_pod("evpod", "default")
            self.core.delete_namespaced_event("evpod.17a", "default")

    # -- strict field validation, as a 1.26 API server does it --
    def test_kubeapi__crd_with_the_unquoted_comma_is_refused_as_the_server_refuses_it(self):
        with open(UNQUOTED_COMMA) as f:
            doc = yaml.safe_load(f)
        ip = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"]["ip"]
        self.assertEqual(ip, {"type": "string", "description": "The cell's address",
                              "which is the pod IP.": None}, "the fixture no longer shows the bug")
        refused = ('CustomResourceDefinition in version "v1" cannot be handled as a '
                   'CustomResourceDefinition: strict decoding error: unknown field "spec.'
                   'versions[0].schema.openAPIV3Schema.properties.spec.properties.ip.which is '
                   'the pod IP."')
        # what kubectl create/replace/apply send with --validate=strict (kubectl 1.25 on)
        path = os.path.join(self.ep.dir, "unquoted-comma.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = self.ep.kubectl("create", "--raw", "/apis/apiextensions.k8s.io/v1/"
                            "customresourcedefinitions?fieldValidation=Strict", "-f", path,
                            check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Error from server (BadRequest): " + refused, r.stderr)
        try:
            if self.ep.validate_flag() == "--validate=strict":
                for verb in ("create", "replace"):
                    r = self.ep.kubectl(verb, "--validate=strict", "-f", UNQUOTED_COMMA,
                                        check=False)
                    self.assertNotEqual(r.returncode, 0, verb)
                    self.assertIn(refused, r.stderr, verb)
            # without fieldValidation the server warns and drops the field; a strategic merge
            # patch (kubectl apply's, when the server's schemas tell kubectl the CRD's patch
            # strategy) names the unknown field without map keys, as the server does
            r = self.ep.kubectl("patch", "crd", "cells.kiyot.elotl.co", "--type=strategic",
                                "-p", json.dumps({"spec": {"versions": doc["spec"]["versions"]}}))
            self.assertIn('Warning: unknown field "spec.versions[0].schema.openAPIV3Schema.'
                          'properties.properties.which is the pod IP."', r.stderr)
            got = json.loads(self.ep.kubectl("get", "crd", "cells.kiyot.elotl.co", "-o",
                                             "json").stdout)
            self.assertEqual(got["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
                "properties"]["spec"]["properties"]["ip"],
                {"type": "string", "description": "The cell's address"})
        finally:
            self.ep.apply_crd()
        got = json.loads(self.ep.kubectl("get", "crd", "cells.kiyot.elotl.co", "-o",
                                         "json").stdout)
        self.assertEqual(got["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                         ["spec"]["properties"]["ip"]["description"],
                         "The cell's address, which is the pod IP.")

    def test_kubeapi__crd_schema_must_be_structural(self):
        with open(CRD) as f:
            doc = yaml.safe_load(f)
        doc["metadata"]["name"] = "untyped.kiyot.elotl.co"
        doc["spec"]["names"] = {"plural": "untyped", "singular": "untyped", "kind": "Untyped"}
        del doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"]["ip"]["type"]
        path = os.path.join(self.ep.dir, "untyped.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = self.ep.kubectl("create", self.ep.validate_flag(), "-f", path, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('The CustomResourceDefinition "untyped.kiyot.elotl.co" is invalid: '
                      'spec.validation.openAPIV3Schema.properties[spec].properties[ip].type: '
                      'Required value: must not be empty for specified object fields', r.stderr)
        self.assertNotEqual(self.ep.kubectl("get", "crd", "untyped.kiyot.elotl.co",
                                            check=False).returncode, 0)

    def test_kubeapi__unknown_fields_are_refused_warned_about_or_dropped(self):
        bad = pod("unknowns")
        bad["metadata"]["foo"] = 1
        bad["spec"]["bogus"] = True
        bad["spec"]["containers"][0]["extra"] = 1
        said = ['unknown field "metadata.foo"', 'unknown field "spec.containers[0].extra"',
                'unknown field "spec.bogus"']  # in the order the body has them
        pods = "/api/v1/namespaces/default/pods"
        code, warned, st = self.ep.request("POST", pods + "?fieldValidation=Strict", bad)
        self.assertEqual((code, st["reason"]), (400, "BadRequest"))
        self.assertEqual(st["message"], 'Pod in version "v1" cannot be handled as a Pod: '
                         'strict decoding error: ' + ", ".join(said))
        code, _, st = self.ep.request("POST", pods + "?fieldValidation=strict", bad)
        self.assertEqual(code, 422)
        self.assertIn('fieldValidation: Unsupported value: "strict"', st["message"])
        # Warn, the default: made without the fields, and told in Warning headers
        code, warned, made = self.ep.request("POST", pods, bad)
        try:
            self.assertEqual(code, 201)
            self.assertEqual(warned, ['299 - "%s"' % w.replace('"', '\\"') for w in said])
            self.assertNotIn("foo", made["metadata"])
            self.assertEqual(made["spec"]["containers"][0], {"name": "web", "image":
                             "10.78.0.1:5000/hello:1", "resources": {"requests": {
                                 "cpu": "500m", "memory": "256Mi"}}})
            # fields 1.23 to 1.26 added are known; a patch's result is checked too (422)
            code, warned, _ = self.ep.request("PATCH", pods + "/unknowns?fieldValidation=Strict",
                                              {"spec": {"hostUsers": False, "os": {
                                                  "name": "linux"}}},
                                              "application/merge-patch+json")
            self.assertEqual((code, warned), (200, []))
            code, _, st = self.ep.request("PATCH", pods + "/unknowns?fieldValidation=Strict",
                                          {"spec": {"nodeName": "n", "hostname2": "x"}},
                                          "application/merge-patch+json")
            self.assertEqual((code, st["reason"]), (422, "Invalid"))
            self.assertEqual(st["details"]["causes"][0]["field"], "patch")
            self.assertIn('strict decoding error: unknown field "spec.hostname2"',
                          st["message"])
            self.assertIsNone(self.core.read_namespaced_pod("unknowns", "default")
                              .spec.node_name)
        finally:
            self.core.delete_namespaced_pod("unknowns", "default")
        # a custom resource: its CRD's schema says what is known; metadata comes first, the
        # rest sorted
        c = cell("strictcell")
        c["spec"]["extra"] = 1
        c["bar"] = 2
        code, _, st = self.ep.request("POST", "/apis/%s/%s/%s?fieldValidation=Strict"
                                      % (G, V, P), c)
        self.assertEqual(code, 400)
        self.assertEqual(st["message"], 'Cell in version "v1" cannot be handled as a Cell: '
                         'strict decoding error: unknown field "bar", unknown field '
                         '"spec.extra"')
        made = self.api.create_cluster_custom_object(G, V, P, c)
        try:
            self.assertNotIn("bar", made)
            self.assertNotIn("extra", made["spec"])
        finally:
            self.api.delete_cluster_custom_object(G, V, P, "strictcell")

    def test_kubeapi__kubectl_apply_strict_refuses_an_unknown_field(self):
        if self.ep.validate_flag() != "--validate=strict":
            self.skipTest("kubectl older than 1.25 cannot ask for strict validation")
        path = os.path.join(self.ep.dir, "strict-pod.yaml")
        with open(path, "w") as f:
            f.write(POD_YAML % "strictpod")
        self.ep.kubectl("apply", "--validate=strict", "-f", path)
        try:
            with open(path, "a") as f:
                f.write("    extra: 1\n")
            r = self.ep.kubectl("apply", "--validate=strict", "-f", path, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn('strict decoding error: unknown field "spec.containers[0].extra"',
                          r.stderr)
            self.assertNotIn("$setElementOrder", r.stderr)
        finally:
            self.ep.kubectl("delete", "pod", "strictpod")

    def test_kubeapi__every_shipped_manifest_applies_with_strict_validation(self):
        # every Kubernetes manifest under deploy/ (kiyot.yaml is kiyot's own config), applied
        # as an operator would, twice: created, then unchanged through apply's patch
        manifests = [p for p in shipped_yaml() if all(
            d.get("apiVersion") and d.get("kind") for d in load_all_11(p))]
        self.assertIn(CRD, manifests)
        self.assertGreaterEqual(len(manifests), 8, manifests)
        applied = []
        try:
            for path in manifests:
                for round_ in ("first", "again"):
                    r = self.ep.kubectl("apply", self.ep.validate_flag(), "-f", path,
                                        check=False)
                    self.assertEqual(r.returncode, 0, "%s (%s): %s" % (path, round_, r.stderr))
                    # unknown fields would be warned about where kubectl cannot be strict
                    self.assertNotIn("Warning", r.stderr, path)
                    if round_ == "again":
                        self.assertNotIn("created", r.stdout, path)
                if path != CRD:
                    applied.append(path)
            out = self.ep.kubectl("get", "deployment", "web", "-o", "json").stdout
            ctr = json.loads(out)["spec"]["template"]["spec"]["containers"][0]
            self.assertEqual(ctr["resources"]["limits"], {"kiyot.elotl.co/cells": "1"})
        finally:
            for path in reversed(applied):
                self.ep.kubectl("delete", "-f", path, check=False)

    def test_kubeapi__shipped_yaml_reads_the_same_in_yaml_1_1_and_1_2(self):
        # kubectl reads YAML as 1.1 does, a YAML 1.2 reader may not: the text must mean one
        # thing to both, state every value (no nulls: an unquoted comma in a flow mapping
        # makes its tail a key without one) and name no key twice
        from ruamel.yaml import YAML  # python3-ruamel.yaml: the YAML 1.2 spec
        y12 = YAML(typ="safe", pure=True)
        files = shipped_yaml()
        self.assertIn(os.path.join(ROOT, "deploy", "kiyot.yaml"), files)
        for path in files:
            with open(path) as f:
                docs12 = [d for d in y12.load_all(f) if d is not None]
            self.assertEqual(docs12, load_all_11(path), path)
            self.assertEqual(nulls(docs12), [], path)
        with open(UNQUOTED_COMMA) as f:
            old = [d for d in y12.load_all(f) if d is not None]
        self.assertEqual(nulls(old), ["[0].spec.versions[0].schema.openAPIV3Schema.properties."
                                      "spec.properties.ip.which is the pod IP."])


def shipped_yaml():
    return sorted(glob.glob(os.path.join(ROOT, "deploy", "**", "*.yaml"), recursive=True))


def load_all_11(path):
    """The documents of a YAML file as a YAML 1.1 reader (PyYAML, like kubectl's) sees them."""
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def nulls(v, path=""):
    """The paths of the null values in v."""
    if isinstance(v, dict):
        return [p for k, x in v.items() for p in nulls(x, "%s.%s" % (path, k) if path else k)]
    if isinstance(v, list):
        return [p for i, x in enumerate(v) for p in nulls(x, "%s[%d]" % (path, i))]
    return [path] if v is None else []

if __name__ == "__main__":
    unittest.main()
