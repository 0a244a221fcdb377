#!/usr/bin/env python3
"""The local API endpoint checked with real clients: kubectl (apply, create, get with printer
columns, delete) and python3-kubernetes (CustomObjectsApi, CoreV1Api), so the suite's endpoint
answers as the real API server does for what kiyot uses: Cell objects and Pod objects."""
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CRD = os.path.join(ROOT, "deploy", "crd-cells.yaml")
G, V, P = "kiyot.elotl.co", "v1", "cells"
sys.path.insert(0, HERE)
import kubeapi  # noqa: E402 - the endpoint's own checks, from its directory


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

    def apply_crd(self):
        # the endpoint serves no OpenAPI document, so kubectl's client-side schema check is off
        return self.kubectl("apply", "--validate=false", "-f", CRD)

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

    def test_kubeapi__crd_with_an_unknown_schema_field_is_refused(self):
        # an unquoted comma inside a YAML flow mapping made the rest of a description a field
        # of the schema: real API servers refuse it, and so does this one
        bad = os.path.join(ROOT, "test", "fixtures", "kubeapi", "crd-cells-unquoted-comma.yaml")
        with open(bad) as f:
            doc = yaml.safe_load(f)
        self.assertIn("which is the pod IP.",
                      doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
                      ["spec"]["properties"]["ip"], "the fixture no longer shows the bug")
        doc["metadata"]["name"] = "bads.kiyot.elotl.co"
        doc["spec"]["names"].update(plural="bads", singular="bad", kind="Bad", shortNames=[])
        path = os.path.join(self.ep.dir, "bad-crd.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = self.ep.kubectl("apply", "--validate=false", "-f", path, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('unknown field "spec.versions[0].schema.openAPIV3Schema.properties.spec.'
                      'properties.ip.which is the pod IP."', r.stderr)

    def test_kubeapi__every_shipped_manifest_is_valid(self):
        # every YAML under deploy/ parses, names only known fields in its CRD schemas, and the
        # CRD and RBAC objects apply
        for path in sorted(glob.glob(os.path.join(ROOT, "deploy", "**", "*.yaml"),
                                     recursive=True)):
            with open(path) as f:
                docs = [d for d in yaml.safe_load_all(f) if d]
            self.assertTrue(docs, path)
            for d in docs:
                if d.get("kind") == "CustomResourceDefinition":
                    kubeapi.validate_crd(d)
        self.ep.kubectl("apply", "--validate=false", "-f",
                        os.path.join(ROOT, "deploy", "crd-cells.yaml"))


if __name__ == "__main__":
    unittest.main()
