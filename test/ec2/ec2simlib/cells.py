"""The external commands that give instances real cells: boot from user-data, terminate.

Command lines are templates split like a shell would (no shell runs them); in each word these
placeholders are replaced: {id} (the instance id), {cpus}, {memory} (bytes), {memory_mib},
{instance_type}, {bootstrap} (a file holding the decoded user-data), {cluster_id} (the value of
the cluster tag, or ""), {az}, {market} (spot or on-demand). The boot command prints a JSON
object with "ip" (and optionally "instance_id", the cell's own id) on stdout.
"""

import json
import os
import shlex
import subprocess


class CellError(Exception):
    pass


def expand(template, values):
    """The argv of a command template with its placeholders replaced."""
    argv = []
    for word in shlex.split(template):
        for key, value in values.items():
            word = word.replace("{" + key + "}", str(value))
        argv.append(word)
    return argv


class CellCommands:
    def __init__(self, boot_cmd, terminate_cmd, work_dir, timeout, log):
        self.boot_cmd = boot_cmd
        self.terminate_cmd = terminate_cmd
        self.work_dir = work_dir
        self.timeout = timeout
        self.log = log
        os.makedirs(work_dir, exist_ok=True)

    def _values(self, inst, vcpus, memory_mib, cluster_tag):
        return {"id": inst.id, "cpus": vcpus, "memory": memory_mib * 1024 * 1024,
                "memory_mib": memory_mib, "instance_type": inst.instance_type,
                "bootstrap": os.path.join(self.work_dir, inst.id + ".bootstrap"),
                "cluster_id": inst.tags.get(cluster_tag, ""), "az": inst.az,
                "market": inst.market or "on-demand"}

    def _run(self, argv):
        try:
            return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CellError(f"{argv[0]}: {e}") from e

    def launch(self, inst, vcpus, memory_mib, cluster_tag):
        """Boot the cell of inst; return (ip, cell id)."""
        values = self._values(inst, vcpus, memory_mib, cluster_tag)
        path = values["bootstrap"]
        with open(path, "wb") as f:
            f.write(inst.user_data)
        os.chmod(path, 0o600)
        argv = expand(self.boot_cmd, values)
        res = self._run(argv)
        stderr = res.stderr.decode("utf-8", "replace").strip()
        if res.returncode != 0:
            raise CellError(f"boot command exited with {res.returncode}: {stderr[-2000:]}")
        for line in reversed(res.stdout.decode("utf-8", "replace").splitlines()):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and isinstance(doc.get("ip"), str):
                return doc["ip"], str(doc.get("instance_id") or inst.id)
        raise CellError("boot command printed no JSON object with an \"ip\" member; "
                        f"stdout: {res.stdout[-500:]!r}")

    def terminate(self, inst, vcpus, memory_mib, cluster_tag):
        """Tear the cell of inst down; CellError when the command fails."""
        if not self.terminate_cmd:
            return
        argv = expand(self.terminate_cmd, self._values(inst, vcpus, memory_mib, cluster_tag))
        res = self._run(argv)
        if res.returncode != 0:
            raise CellError(f"terminate command exited with {res.returncode}: "
                            + res.stderr.decode("utf-8", "replace").strip()[-2000:])
        try:
            os.unlink(os.path.join(self.work_dir, inst.id + ".bootstrap"))
        except FileNotFoundError:
            pass
