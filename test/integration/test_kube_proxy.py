"""cells.kubeProxy: every cell runs a kube-proxy unit of its own, privileged, in the pod's
network namespace, with the kubeconfig the node gives it; it is the cell's unit, not a
container of the pod. A stand-in (busybox) plays kube-proxy here, since no kube-proxy image
or API server is at hand: it makes a Service IP answer inside the cell, which needs
CAP_NET_ADMIN in the pod's network namespace, and serves the kubeconfig it was given, so the
pod's own container reaching that IP shows all three."""

import json
import os

from harness import KiyotTest, T_CALL, wait_for

SERVICE_IP = "10.96.0.1"


class KubeProxyTest(KiyotTest):
    def restore(self):
        self.env.cells_extra = ""
        self.env.restart_kiyot()

    def test_cell_runs_kube_proxy_in_the_pods_network(self):
        kubeconfig = os.path.join(self.env.work, "kube-proxy.kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\n# kube-proxy of the kiyot cells\n")
        script = ("ip addr add %s/32 dev lo && mkdir -p /www && "
                  "cp /var/lib/kube-proxy/kubeconfig /www/index.html && "
                  "exec httpd -f -p %s:80 -h /www" % (SERVICE_IP, SERVICE_IP))
        self.env.cells_extra = ("  kubeProxy:\n    image: \"%s\"\n    kubeconfig: %s\n"
                                "    command: [\"sh\", \"-c\", %s]\n"
                                % (self.env.ref("busybox:1"), kubeconfig, json.dumps(script)))
        self.addCleanup(self.restore)
        self.env.restart_kiyot()
        self.c = self.env.client

        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")

        def fetch():
            r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
                container_id=cid, cmd=["wget", "-q", "-O", "-", "http://%s/" % SERVICE_IP], timeout=10),
                timeout=T_CALL)
            return r.stdout.decode() if r.exit_code == 0 else None
        body = wait_for(fetch, 60, "the Service IP to answer inside the pod")
        self.assertIn("# kube-proxy of the kiyot cells", body)

        # the pod's containers are what the kubelet created, no more
        listed = self.c.runtime.ListContainers(self.pb.ListContainersRequest(
            filter=self.pb.ContainerFilter(pod_sandbox_id=pod)), timeout=T_CALL).containers
        self.assertEqual([c.id for c in listed], [cid])
