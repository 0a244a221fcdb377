"""The pod volumes a kubelet prepares, written the way the kubelet writes them, and the checks
that a pod's units see them: used with local cells (test_volumes.py, node directories bind
mounted) and EC2 cells (test_ec2.py, content shipped to the cell and kept in sync).

The kubelet hands a runtime every volume as a host path under <root-dir>/pods/<uid>/:
volumes/kubernetes.io~<plugin>/<name> directories, plus files such as etc-hosts. configMap,
secret, projected and downwardAPI volumes are written by its atomic writer: the files go into a
new ..<timestamp> directory, a ..data symlink is swapped to it by rename, every key is a
top-level symlink through ..data, and the previous timestamp directory is removed."""

import os
import random
import shutil
import time

from harness import T_CALL, log, wait_for

DNS = {"servers": ["10.96.0.10"], "searches": ["default.svc.cluster.local", "svc.cluster.local"],
       "options": ["ndots:5"]}


def atomic_write(vol_dir, files, mode=0o644):
    """Makes vol_dir hold exactly files ({key: text}) as the kubelet's atomic writer does."""
    os.makedirs(vol_dir, exist_ok=True)
    os.chmod(vol_dir, 0o777)
    data = os.path.join(vol_dir, "..data")
    old = os.readlink(data) if os.path.islink(data) else None
    old_keys = set(os.listdir(os.path.join(vol_dir, old))) if old else set()
    stamp = "..%s.%d" % (time.strftime("%Y_%m_%d_%H_%M_%S"), random.randrange(1 << 30))
    os.mkdir(os.path.join(vol_dir, stamp), 0o755)
    for k, v in files.items():
        p = os.path.join(vol_dir, stamp, k)
        with open(p, "w") as f:
            f.write(v)
        os.chmod(p, mode)
    tmp = os.path.join(vol_dir, "..data_tmp")
    os.symlink(stamp, tmp)
    os.rename(tmp, data)
    for k in files:
        if not os.path.lexists(os.path.join(vol_dir, k)):
            os.symlink(os.path.join("..data", k), os.path.join(vol_dir, k))
    for k in old_keys - set(files):
        os.unlink(os.path.join(vol_dir, k))
    if old:
        shutil.rmtree(os.path.join(vol_dir, old))


class KubeletVolumes:
    """A pod directory under root with the volumes of the test pod."""

    def __init__(self, root, uid):
        self.pod = os.path.join(root, "pods", uid)
        v = os.path.join(self.pod, "volumes")
        self.config = os.path.join(v, "kubernetes.io~configmap", "config")
        self.creds = os.path.join(v, "kubernetes.io~secret", "creds")
        self.podinfo = os.path.join(v, "kubernetes.io~downward-api", "podinfo")
        self.token = os.path.join(v, "kubernetes.io~projected", "kube-api-access-7xk2p")
        self.scratch = os.path.join(v, "kubernetes.io~empty-dir", "scratch")
        self.hosts = os.path.join(self.pod, "etc-hosts")
        atomic_write(self.config, {"app.conf": "mode=one\n"})
        atomic_write(self.creds, {"password": "s3cret"}, mode=0o400)
        atomic_write(self.podinfo, {"labels": 'app="web"\n'})
        atomic_write(self.token, {"token": "eyJhbGciOi.test.token", "namespace": "default"})
        os.makedirs(self.scratch, mode=0o777)
        with open(self.hosts, "w") as f:
            f.write("127.0.0.1\tlocalhost\n10.96.0.1\tkubernetes.default\n")

    def writer_mounts(self):
        return [("/scratch", self.scratch, False), ("/etc/config", self.config, True),
                ("/etc/hosts", self.hosts, False)]

    def reader_mounts(self):
        return [("/scratch", self.scratch, False), ("/etc/config", self.config, True),
                ("/etc/creds", self.creds, True), ("/etc/podinfo", self.podinfo, True),
                ("/var/run/secrets/kubernetes.io/serviceaccount", self.token, True),
                ("/etc/hosts", self.hosts, False)]


class VolumeChecks:
    """Mixed into a KiyotTest-like class: self.c (a CRI client), self.pb, create/start."""

    def exec_in(self, cid, *cmd):
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid, cmd=list(cmd),
                                                            timeout=20), timeout=T_CALL)
        return r.exit_code, r.stdout.decode(), r.stderr.decode()

    def cat(self, cid, path):
        code, out, err = self.exec_in(cid, "cat", path)
        self.assertEqual(code, 0, "cat %s: %s" % (path, err))
        return out

    def volume_sandbox(self, cfg):
        """The sandbox config with the kubelet's DNS config and a hostname of its own."""
        cfg.hostname = "vol-web"
        cfg.dns_config.CopyFrom(self.pb.DNSConfig(**DNS))
        return cfg

    def start_volume_pod(self, pod, cfg, vols, image):
        """Two units sharing an emptyDir: the writer leaves a note there, the reader sees
        every volume. Returns (writer id, reader id)."""
        w, _ = self.create(pod, cfg, image, name="writer", command=["sh", "-c"],
                           args=["echo shared-by-writer > /scratch/note; exec sleep 3600"],
                           mounts=vols.writer_mounts())
        r, _ = self.create(pod, cfg, image, name="reader", command=["sleep", "3600"],
                           mounts=vols.reader_mounts(), pull=False)
        for cid in (w, r):
            self.start(cid)
            self.wait_state(cid, "CONTAINER_RUNNING")
        return w, r

    def check_volumes(self, reader, vols):
        """What every unit must see, then a live configMap update reaching it."""
        self.assertEqual(self.cat(reader, "/etc/config/app.conf"), "mode=one\n")
        self.assertEqual(self.cat(reader, "/etc/creds/password"), "s3cret")
        code, out, _ = self.exec_in(reader, "stat", "-L", "-c", "%a", "/etc/creds/password")
        self.assertEqual((code, out.strip()), (0, "400"), "the secret's mode")
        self.assertEqual(self.cat(reader, "/etc/podinfo/labels"), 'app="web"\n')
        self.assertEqual(
            self.cat(reader, "/var/run/secrets/kubernetes.io/serviceaccount/token"),
            "eyJhbGciOi.test.token")
        code, _, err = self.exec_in(reader, "touch", "/etc/config/new")
        self.assertNotEqual(code, 0, "a read-only configMap mount accepted a write")
        self.assertIn("Read-only", err)
        # the emptyDir is the same directory for both units
        wait_for(lambda: self.exec_in(reader, "cat", "/scratch/note")[1] == "shared-by-writer\n",
                 30, "the writer's note in the shared emptyDir")
        self.assertIn("10.96.0.1\tkubernetes.default", self.cat(reader, "/etc/hosts"))
        resolv = self.cat(reader, "/etc/resolv.conf")
        self.assertIn("nameserver 10.96.0.10", resolv)
        self.assertIn("search default.svc.cluster.local svc.cluster.local", resolv)
        self.assertIn("options ndots:5", resolv)
        self.assertEqual(self.exec_in(reader, "hostname")[1].strip(), "vol-web")

        # the kubelet rewrites the configMap: a changed key, a new one, atomically
        t0 = time.monotonic()
        atomic_write(vols.config, {"app.conf": "mode=two\n", "extra.conf": "x=1\n"})
        wait_for(lambda: self.exec_in(reader, "cat", "/etc/config/app.conf")[1] == "mode=two\n",
                 30, "the updated configMap in the unit")
        log("configMap update seen by the unit after %.2f s" % (time.monotonic() - t0))
        self.assertEqual(self.cat(reader, "/etc/config/extra.conf"), "x=1\n")
        # and a key removed
        atomic_write(vols.config, {"app.conf": "mode=three\n"})
        wait_for(lambda: self.exec_in(reader, "cat", "/etc/config/app.conf")[1] ==
                 "mode=three\n", 30, "the second configMap update in the unit")
        code, _, _ = self.exec_in(reader, "cat", "/etc/config/extra.conf")
        self.assertNotEqual(code, 0, "a key removed from the configMap is still there")
