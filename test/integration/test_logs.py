"""Container logs on the node: CRI format, stdout and stderr, ReopenContainerLog."""

import os
import unittest

from harness import KiyotTest, log_texts, read_cri_log, wait_for

COUNTER = "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done"


def numbers(path):
    return [int(t.split()[1]) for t in log_texts(path) if t.startswith("line ")]


class LogsTest(KiyotTest):
    def test_stdout_and_stderr_lines_in_cri_format(self):
        pod, cfg = self.run_pod()
        cid, log = self.create(pod, cfg, self.env.ref("busybox:1"),
                               command=["sh", "-c", "echo to-out; echo to-err >&2; "
                                        "printf 'no newline at end'"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_EXITED")
        self.wait_log(log, lambda t: "to-err" in t and "to-out" in t, "both streams")
        entries = read_cri_log(log)
        by_text = {e[3]: e[1] for e in entries}
        self.assertEqual(by_text["to-out"], "stdout")
        self.assertEqual(by_text["to-err"], "stderr")
        self.assertIn("no newline at end", by_text,
                      "a last line without a newline is lost: %s" % entries)

    def test_last_line_without_newline_is_a_partial_record(self):
        # The kubelet's FallbackToLogsOnError message joins records and ends each F record
        # with a newline: output that never ended its line must stay P, as containerd
        # writes it, or "DONE" becomes "DONE\n".
        pod, cfg = self.run_pod()
        cid, log = self.create(pod, cfg, self.env.ref("busybox:1"),
                               command=["printf", "DONE"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_EXITED")
        self.wait_log(log, lambda t: "DONE" in t, "the output")
        with open(log, "rb") as f:
            records = f.read().decode().splitlines()
        self.assertTrue(records[-1].endswith(" stdout P DONE"),
                        "last record of printf DONE: %r" % records)

    def test_reopen_container_log_moves_new_lines_to_a_new_file(self):
        pod, cfg = self.run_pod()
        cid, log = self.create(pod, cfg, self.env.ref("busybox:1"),
                               command=["sh", "-c", COUNTER])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        wait_for(lambda: len(numbers(log)) >= 5, 60, "five lines in " + log)

        rotated = log + ".1"
        os.rename(log, rotated)
        at_rename = max(numbers(rotated))
        self.c.runtime.ReopenContainerLog(self.pb.ReopenContainerLogRequest(container_id=cid),
                                          timeout=30)
        wait_for(lambda: len(numbers(log)) >= 3, 60, "new lines in the reopened " + log)
        old, new = numbers(rotated), numbers(log)
        self.assertGreater(min(new), at_rename, "the new file repeats lines of the old one")
        self.assertFalse(set(old) & set(new), "lines written to both files")
        # Nothing lost across the switch: together the files count up without a gap.
        both = sorted(old + new)
        self.assertEqual(both, list(range(both[0], both[-1] + 1)), "lines lost in the reopen")
        read_cri_log(log)  # the new file is CRI format too

    def test_reopen_of_a_stopped_container_is_refused(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["true"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_EXITED")
        # CRI: reopen on a container that is not running returns an error.
        with self.assertRaises(Exception):
            self.c.runtime.ReopenContainerLog(
                self.pb.ReopenContainerLogRequest(container_id=cid), timeout=30)


if __name__ == "__main__":
    unittest.main()
