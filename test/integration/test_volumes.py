"""Volumes and pod environment in local cells: the kubelet's volume directories (configMap,
secret, downwardAPI, projected token, emptyDir, etc-hosts) bind mounted into units with their
modes and read-only flags, an emptyDir shared by two units, the sandbox's DNS config and
hostname, and a live configMap update. The EC2 variant, with content shipped into the cell,
is in test_ec2.py."""

import os
import subprocess

from harness import KiyotTest, unique, wait_for
from volumes import KubeletVolumes, VolumeChecks

SLEEPER = ["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]


class VolumesTest(KiyotTest, VolumeChecks):
    def test_volumes_reach_units_and_follow_updates(self):
        cfg = self.volume_sandbox(self.sandbox_config())
        vols = KubeletVolumes(os.path.join(self.env.work, "kubelet"), cfg.metadata.uid)
        pod, cfg = self.run_pod(cfg)
        _, reader = self.start_volume_pod(pod, cfg, vols, self.env.ref("busybox:1"))
        self.check_volumes(reader, vols)
        # a local cell shares the node's files: the note is in the kubelet's directory
        with open(os.path.join(vols.scratch, "note")) as f:
            self.assertEqual(f.read(), "shared-by-writer\n")

    def exec(self, cid, script, timeout=20):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(
            container_id=cid, cmd=["sh", "-c", script], timeout=timeout), timeout=timeout + 10)
        return r.exit_code, r.stdout.decode(), r.stderr.decode()

    def kubelet_root(self):
        """A directory bind-mounted on itself and made rshared before any pod, as the kubelet
        makes its root directory; unmounted, with what was mounted under it, at the end."""
        root = os.path.join(self.env.work, unique("kubelet-root"))
        os.makedirs(root)
        subprocess.run(["mount", "--bind", root, root], check=True)
        self.addCleanup(subprocess.run, ["umount", "-R", "-l", root], check=False)
        subprocess.run(["mount", "--make-rshared", root], check=True)
        return root

    def test_node_mounts_made_after_the_cell_started_reach_its_containers(self):
        # The kubelet mounts a volume's subPath (a bind of the file or directory onto a
        # mount point under its root directory) when it starts the container, long after the
        # cell: the cell must see it, as a runtime on the node does, or the container gets
        # the empty mount point and what it writes never reaches the node.
        root = self.kubelet_root()
        vol = os.path.join(root, "pods", "volumes", "data")
        os.makedirs(os.path.join(vol, "late"))
        with open(os.path.join(vol, "config"), "w") as f:
            f.write("from-node\n")
        pod, cfg = self.run_pod()
        # after the cell started: a file system under the volume, and a subPath bind
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "late-tmpfs",
                        os.path.join(vol, "late")], check=True)
        with open(os.path.join(vol, "late", "flag"), "w") as f:
            f.write("late\n")
        sub = os.path.join(root, "pods", "volume-subpaths", "data", "c", "0")
        os.makedirs(os.path.dirname(sub))
        open(sub, "w").close()
        subprocess.run(["mount", "--bind", os.path.join(vol, "config"), sub], check=True)

        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=SLEEPER,
                             mounts=[("/vol", vol, False), ("/etc/app.conf", sub, False)])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        self.assertEqual(self.exec(cid, "cat /vol/late/flag")[1], "late\n",
                         "a mount the node made after the cell started is not in the container")
        self.assertEqual(self.exec(cid, "cat /etc/app.conf")[1], "from-node\n",
                         "the subPath bind is not what the container sees")
        code, _, err = self.exec(cid, "echo from-container > /etc/app.conf")
        self.assertEqual(code, 0, err)
        with open(os.path.join(vol, "config")) as f:
            self.assertEqual(f.read(), "from-container\n",
                             "a write through the subPath did not reach the node")
        # a later mount, once the container runs, stays out of a private mount (CRI's
        # PROPAGATION_PRIVATE) but the cell keeps receiving: a new container sees it
        os.makedirs(os.path.join(vol, "later"))
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "later-tmpfs",
                        os.path.join(vol, "later")], check=True)
        with open(os.path.join(vol, "later", "flag"), "w") as f:
            f.write("later\n")
        self.assertEqual(self.exec(cid, "cat /vol/later/flag 2>/dev/null")[1], "")
        cid2, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=SLEEPER,
                              mounts=[("/vol", vol, True)])
        self.start(cid2)
        self.wait_state(cid2, "CONTAINER_RUNNING")
        wait_for(lambda: self.exec(cid2, "cat /vol/later/flag")[1] == "later\n", 10,
                 "the node's later mount in a new container")
