"""The warm pool ahead of CronJob runs (pool.cronJobs), local cells, with the suite's API
endpoint (test/kubeapi/kubeapi.py): a CronJob whose pods kiyot runs gets standby cells of its
pods' shape, as many as a run starts, before the run's time; a pod of that shape takes one.
A CronJob in a time zone other than UTC is not foreseen, and the log says why."""

import calendar
import json
import time

import test_pool
from apiserver import ApiServerTest
from harness import NETNS_PREFIX, cell_netns_list, log, wait_for

T_LIST = 30 + 30  # kiyot lists CronJobs every 30 s; the rest is slack on a busy machine


def cronjob(name, schedule, parallelism, instance_type, time_zone=None):
    spec = {"schedule": schedule,
            "jobTemplate": {"spec": {
                "parallelism": parallelism, "completions": parallelism + 2,
                "template": {
                    "metadata": {"annotations": {
                        "kubernetes.io/target-runtime": "kiyot",
                        "pod.elotl.co/instance-type": instance_type}},
                    "spec": {"restartPolicy": "Never",
                             "containers": [{"name": "job", "image": "busybox"}]}}}}}
    if time_zone:
        spec["timeZone"] = time_zone
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": "batch"}, "spec": spec}


class PoolCronTest(ApiServerTest):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.batch = cls.kclient.BatchV1Api(api_client=cls.api_client)
        cls.env.extra_config = "kubeconfig: %s\npool:\n  cronJobs: true\n" % cls.ep.kubeconfig
        cls.env.restart_kiyot()

    @classmethod
    def tearDownClass(cls):
        # without the pool section, the standby cells left are terminated at the next start
        try:
            super().tearDownClass()
        finally:
            wait_for(lambda: not test_pool.PoolTest.standby_of(cls.env), test_pool.T_POOL,
                     "the standby cells to be gone")
            wait_for(lambda: not [ns for ns in cell_netns_list()
                                  if ns.startswith(NETNS_PREFIX + "sb-")],
                     test_pool.T_POOL, "the standby cells' namespaces to be gone")

    def ready(self, instance_type):
        return sorted(i for i, r in test_pool.PoolTest.standby_of(self.env).items()
                      if r["state"] == "ready" and r["instanceType"] == instance_type)

    def make(self, body):
        self.batch.create_namespaced_cron_job("batch", body)
        self.addCleanup(self.delete, body["metadata"]["name"])

    def delete(self, name):
        try:
            self.batch.delete_namespaced_cron_job(name, "batch")
        except Exception as e:  # noqa: BLE001 - the endpoint may be down after a test
            log("cleanup of CronJob %s: %s" % (name, e))

    def kiyot_log(self):
        with open(self.env.kiyot_log, errors="replace") as f:
            return f.read()

    def test_a_cronjob_run_gets_standby_cells_before_its_time_and_a_pod_takes_one(self):
        # the first whole minute at least T_LIST from now: kiyot has listed it by then
        run_at = (int(time.time()) + T_LIST + 59) // 60 * 60
        hhmm = time.gmtime(run_at)
        schedule = "%d %d * * *" % (hhmm.tm_min, hhmm.tm_hour)
        self.assertEqual(calendar.timegm(hhmm), run_at)
        self.make(cronjob("report", schedule, 2, "t3.small"))
        self.make(cronjob("paris", schedule, 3, "t3.micro", time_zone="Europe/Paris"))
        # none before its lead: the run is more than a local cell's time to ready away
        self.assertEqual(self.ready("t3.small"), [])
        cells = wait_for(lambda: (lambda r: r if len(r) == 2 else None)(self.ready("t3.small")),
                         run_at - time.time() + 30, "2 standby t3.small cells for the run")
        self.assertLess(time.time(), run_at, "the cells came after the run's time")
        self.assertIn("pool: pre-warming 2 t3.small for CronJob batch/report at %02d:%02d:00 "
                      "UTC" % (hhmm.tm_hour, hhmm.tm_min), self.kiyot_log())
        self.assertIn("CronJob batch/paris: .spec.timeZone \"Europe/Paris\": kiyot foresees "
                      "schedules in UTC only", self.kiyot_log())
        self.assertEqual(self.ready("t3.micro"), [])
        # a pod of the shape starts in one of them
        pod, _ = self.run_pod(annotations={"pod.elotl.co/instance-type": "t3.small"})
        info = self.c.runtime.PodSandboxStatus(self.pb.PodSandboxStatusRequest(
            pod_sandbox_id=pod, verbose=True), timeout=60).info["info"]
        self.assertIn(json.loads(info)["cellId"], cells, "the pool's log:\n" + "\n".join(
            line for line in self.kiyot_log().splitlines() if "pool:" in line))
