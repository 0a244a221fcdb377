"""ListPodSandbox and ListContainers filters: id, state, label selector, pod_sandbox_id."""

import unittest

from harness import KiyotTest, unique


class ListsTest(KiyotTest):
    def test_list_filters(self):
        pb, rt = self.pb, self.c.runtime
        group = unique("grp")
        pod_a, cfg_a = self.run_pod(labels={"group": group, "which": "a"})
        pod_b, cfg_b = self.run_pod(labels={"group": group, "which": "b"})
        image = self.env.ref("busybox:1")
        run_a, _ = self.create(pod_a, cfg_a, image, command=["sleep", "3600"],
                               labels={"group": group, "role": "runner"})
        made_a, _ = self.create(pod_a, cfg_a, image, command=["sleep", "3600"],
                                labels={"group": group, "role": "idle"}, pull=False)
        run_b, _ = self.create(pod_b, cfg_b, image, command=["sleep", "3600"],
                               labels={"group": group, "role": "runner"})
        self.start(run_a)
        self.start(run_b)
        self.wait_state(run_a, "CONTAINER_RUNNING")
        self.wait_state(run_b, "CONTAINER_RUNNING")

        def pods(**f):
            r = rt.ListPodSandbox(pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(**f)),
                                  timeout=30)
            return sorted(p.id for p in r.items)

        def ctrs(**f):
            r = rt.ListContainers(pb.ListContainersRequest(filter=pb.ContainerFilter(**f)),
                                  timeout=30)
            return sorted(c.id for c in r.containers)

        self.assertEqual(pods(label_selector={"group": group}), sorted([pod_a, pod_b]))
        self.assertEqual(pods(label_selector={"group": group, "which": "b"}), [pod_b])
        self.assertEqual(pods(label_selector={"group": group, "which": "nope"}), [])
        self.assertEqual(pods(id=pod_a), [pod_a])
        self.assertEqual(pods(id=unique("none")), [])
        ready = pb.PodSandboxStateValue(state=pb.SANDBOX_READY)
        self.assertEqual(pods(state=ready, label_selector={"group": group}),
                         sorted([pod_a, pod_b]))
        items = rt.ListPodSandbox(pb.ListPodSandboxRequest(filter=pb.PodSandboxFilter(
            id=pod_b)), timeout=30).items
        self.assertEqual(items[0].metadata.name, cfg_b.metadata.name)
        self.assertEqual(items[0].labels["which"], "b")
        self.assertEqual(items[0].state, pb.SANDBOX_READY)

        self.assertEqual(ctrs(label_selector={"group": group}), sorted([run_a, made_a, run_b]))
        self.assertEqual(ctrs(pod_sandbox_id=pod_a), sorted([run_a, made_a]))
        self.assertEqual(ctrs(pod_sandbox_id=pod_a, label_selector={"role": "runner"}), [run_a])
        self.assertEqual(ctrs(id=run_b), [run_b])
        running = pb.ContainerStateValue(state=pb.CONTAINER_RUNNING)
        created = pb.ContainerStateValue(state=pb.CONTAINER_CREATED)
        self.assertEqual(ctrs(state=running, label_selector={"group": group}),
                         sorted([run_a, run_b]))
        self.assertEqual(ctrs(state=created, label_selector={"group": group}), [made_a])
        c = rt.ListContainers(pb.ListContainersRequest(filter=pb.ContainerFilter(id=run_a)),
                              timeout=30).containers[0]
        self.assertEqual(c.pod_sandbox_id, pod_a)
        self.assertEqual(c.labels["role"], "runner")
        self.assertEqual(c.image.image, image)
        self.assertTrue(c.image_ref)
        self.assertGreater(c.created_at, 0)

        # After a stop, the state filters follow.
        self.stop_pod(pod_b)
        notready = pb.PodSandboxStateValue(state=pb.SANDBOX_NOTREADY)
        self.assertEqual(pods(state=notready, label_selector={"group": group}), [pod_b])
        self.assertEqual(pods(state=ready, label_selector={"group": group}), [pod_a])
        self.wait_state(run_b, "CONTAINER_EXITED", timeout=90)
        exited = pb.ContainerStateValue(state=pb.CONTAINER_EXITED)
        self.assertEqual(ctrs(state=exited, label_selector={"group": group}), [run_b])


if __name__ == "__main__":
    unittest.main()
