"""Standby cells of the warm pool as Cell objects: `kubectl get cells` lists them (phase Standby,
instance type, price, no pod), and the Cell of a claimed one shows its pod from then on."""

from apiserver import ApiServerTest
from harness import wait_for

G, V, P = "kiyot.elotl.co", "v1", "cells"
T_SYNC = 90


class PoolCellsTest(ApiServerTest):
    CRD = True

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.api = cls.kclient.CustomObjectsApi(api_client=cls.api_client)
        cls.env.extra_config = ("kubeconfig: %s\npool:\n  shapes:\n"
                                "    - { instanceType: t3.small, count: 1 }\n"
                                % cls.ep.kubeconfig)
        cls.env.restart_kiyot()

    def standby_cells(self):
        return {c["metadata"]["name"]: c
                for c in self.api.list_cluster_custom_object(G, V, P)["items"]
                if c.get("status", {}).get("phase") == "Standby"}

    def test_standby_cells_are_listed_and_show_their_pod_once_claimed(self):
        self.c = self.env.client
        self.pb = self.c.pb
        cells = wait_for(lambda: self.standby_cells() or None, T_SYNC, "a Standby Cell")
        [(name, cell)] = cells.items()
        self.assertTrue(name.startswith("sb-"))
        spec, status = cell["spec"], cell["status"]
        self.assertEqual((spec["podName"], spec["podNamespace"]), ("", ""))
        self.assertEqual(spec["instanceType"], "t3.small")
        self.assertEqual(spec["launchType"], "on-demand")
        self.assertEqual(spec["instanceId"], "local-" + name)
        self.assertTrue(spec["ip"])
        self.assertGreater(status["pricePerHour"], 0)

        out = self.ep.kubectl("get", "cells").stdout
        row = [ln.split() for ln in out.splitlines() if ln.startswith(name + " ")]
        self.assertEqual(len(row), 1, out)
        self.assertIn("Standby", row[0])
        self.assertIn("t3.small", row[0])

        pod, cfg = self.run_pod(annotations={"pod.elotl.co/instance-type": "t3.small"})

        def claimed():
            c = self.api.get_cluster_custom_object(G, V, P, name)
            return c if c["status"].get("phase") == "Running" else None
        c = wait_for(claimed, T_SYNC, "the claimed Cell to show its pod")
        self.assertEqual((c["spec"]["podName"], c["spec"]["podUid"]),
                         (cfg.metadata.name, cfg.metadata.uid))
        # the pool refilled: another Standby Cell
        wait_for(lambda: [n for n in self.standby_cells() if n != name] or None, T_SYNC,
                 "a new Standby Cell")
