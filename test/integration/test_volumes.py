"""Volumes and pod environment in local cells: the kubelet's volume directories (configMap,
secret, downwardAPI, projected token, emptyDir, etc-hosts) bind mounted into units with their
modes and read-only flags, an emptyDir shared by two units, the sandbox's DNS config and
hostname, and a live configMap update. The EC2 variant, with content shipped into the cell,
is in test_ec2.py."""

import os

from harness import KiyotTest
from volumes import KubeletVolumes, VolumeChecks


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
