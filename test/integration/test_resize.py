"""UpdateContainerResources: new CPU and memory limits reach the running unit in place (its
cgroup, read on the node), within what the pod's cell holds; limits past the cell are refused
with a message."""

import grpc

from harness import KiyotTest, T_CALL

MIB = 1 << 20


class ResizeTest(KiyotTest):
    def cgroup_file(self, cid, controller, name):
        """A file of the unit's cgroup, found from inside the unit and read on the node."""
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=["cat", "/proc/self/cgroup"], timeout=10), timeout=T_CALL)
        self.assertEqual(r.exit_code, 0, r.stderr)
        for line in r.stdout.decode().splitlines():
            _, ctrls, path = line.split(":", 2)
            if controller in ctrls.split(","):
                with open("/sys/fs/cgroup/%s%s/%s" % (ctrls, path, name)) as f:
                    return f.read().strip()
        self.fail("no %s cgroup in %s" % (controller, r.stdout))

    def update(self, cid, **res):
        self.c.runtime.UpdateContainerResources(self.pb.UpdateContainerResourcesRequest(
            container_id=cid, linux=self.pb.LinuxContainerResources(**res)), timeout=T_CALL)

    def test_limits_change_in_place(self):
        pod, cfg = self.run_pod(memory=512 * MIB)
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        started = self.wait_state(cid, "CONTAINER_RUNNING").started_at
        self.assertEqual(int(self.cgroup_file(cid, "memory", "memory.limit_in_bytes")),
                         128 * MIB)

        self.update(cid, memory_limit_in_bytes=192 * MIB, cpu_period=100000,
                    cpu_quota=25000, cpu_shares=256)
        self.assertEqual(int(self.cgroup_file(cid, "memory", "memory.limit_in_bytes")),
                         192 * MIB)
        self.assertEqual(int(self.cgroup_file(cid, "cpu", "cpu.cfs_quota_us")), 25000)
        st = self.cstatus(cid)
        self.assertEqual(st.state, self.pb.ContainerState.Value("CONTAINER_RUNNING"))
        self.assertEqual(st.started_at, started, "the unit was restarted, not updated")

        # past what the cell has: refused, nothing changed
        details = self.assertCode(grpc.StatusCode.INVALID_ARGUMENT, self.update, cid,
                                  memory_limit_in_bytes=1 << 40)
        self.assertIn("do not fit the pod's cell", details)
        self.assertEqual(int(self.cgroup_file(cid, "memory", "memory.limit_in_bytes")),
                         192 * MIB)
