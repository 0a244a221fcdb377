"""Events: with an API server (test/kubeapi/kubeapi.py through a kubeconfig), kiyot records
Kubernetes Events on a pod and its Cell the way the kubelet's recorder does, so `kubectl
describe pod` and `kubectl get events` say what happened to the pod's cell: launched (type,
market, IP and why that type), a launch that failed and why (a repeat counted on one event,
not a new one each time the kubelet retries)."""

import grpc

from apiserver import ApiServerTest
from harness import wait_for


class EventsTest(ApiServerTest):
    CRD = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.core = cls.kclient.CoreV1Api(api_client=cls.api_client)

    def events_of(self, kind, name, namespace="default"):
        got = self.core.list_namespaced_event(
            namespace, field_selector="involvedObject.kind=%s,involvedObject.name=%s" % (
                kind, name))
        return got.items

    def test_a_launched_cell_is_an_event_on_its_pod_and_its_cell(self):
        pod, cfg = self.run_pod()
        name, uid = cfg.metadata.name, cfg.metadata.uid
        cell = self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=30)
        ip = cell.status.network.ip

        def launched():
            return [e for e in self.events_of("Pod", name) if e.reason == "CellLaunched"]
        ev = wait_for(launched, 30, "a CellLaunched event on pod " + name)[0]
        self.assertEqual((ev.type, ev.count, ev.involved_object.uid), ("Normal", 1, uid))
        self.assertEqual((ev.source.component, ev.reporting_component), ("kiyot", "kiyot"))
        self.assertIn("IP %s" % ip, ev.message)
        self.assertIn("on-demand", ev.message)
        self.assertIn("cheapest fitting", ev.message)   # why that type
        cell_id = ev.message.split()[1]
        # the same on the Cell (cluster-scoped: its events are in "default")
        on_cell = wait_for(lambda: self.events_of("Cell", cell_id), 30,
                           "the event on Cell " + cell_id)
        self.assertEqual(on_cell[0].reason, "CellLaunched")
        self.assertEqual(on_cell[0].involved_object.api_version, "kiyot.elotl.co/v1")
        # what a user sees, through the real client
        out = self.ep.kubectl("get", "events", "--field-selector",
                              "involvedObject.name=" + name).stdout
        self.assertIn("CellLaunched", out)
        self.assertIn("pod/" + name, out)

    def test_a_failed_launch_is_a_warning_counted_across_the_kubelets_retries(self):
        cfg = self.sandbox_config(annotations={"pod.elotl.co/instance-type": "zz9.nosuch"})
        for _ in range(3):   # the kubelet retries RunPodSandbox with the same config
            with self.assertRaises(grpc.RpcError) as cm:
                self.c.runtime.RunPodSandbox(self.pb.RunPodSandboxRequest(config=cfg),
                                             timeout=60)
            self.assertIn("zz9.nosuch", cm.exception.details())

        def counted():
            evs = [e for e in self.events_of("Pod", cfg.metadata.name)
                   if e.reason == "CellSizingFailed"]
            return evs if evs and evs[0].count == 3 else None
        evs = wait_for(counted, 30, "one CellSizingFailed event counted 3 times")
        self.assertEqual(len(evs), 1)
        self.assertEqual(evs[0].type, "Warning")
        self.assertIn("zz9.nosuch", evs[0].message)
        self.assertIn("CellSizingFailed", self.ep.kubectl(
            "get", "events", "--field-selector", "type=Warning").stdout)
