"""A cell's agent takes calls from its own kiyot only: other cells share its network (the
bridge here, a VPC subnet on EC2), so every call must carry the cell's token, which kiyot
derives from a secret of its own and hands the cell in its bootstrap document."""

import json
import os

import grpc

from harness import KiyotTest, T_CALL

AGENT_PORT = 7443


class CellAuthTest(KiyotTest):
    def call(self, ip, method, token=None):
        """A raw unary call with an empty request; returns the status code."""
        with grpc.insecure_channel("%s:%d" % (ip, AGENT_PORT)) as ch:
            fn = ch.unary_unary("/kiyot.cell.v1.CellAgent/" + method)
            md = [("authorization", "Bearer " + token)] if token else None
            try:
                fn(b"", timeout=T_CALL, metadata=md)
                return grpc.StatusCode.OK
            except grpc.RpcError as e:
                return e.code()

    def test_agent_refuses_calls_without_the_cells_token(self):
        pod, cfg = self.run_pod()
        cid, _ = self.create(pod, cfg, self.env.ref("busybox:1"), command=["sleep", "3600"])
        self.start(cid)
        self.wait_state(cid, "CONTAINER_RUNNING")
        ip = self.pod_ip(pod)
        # a neighbour on the network: no token, or another cell's
        for method in ("Hello", "Stats", "Apply", "ExecSync"):
            self.assertEqual(self.call(ip, method), grpc.StatusCode.UNAUTHENTICATED, method)
        self.assertEqual(self.call(ip, "Hello", "0" * 64), grpc.StatusCode.UNAUTHENTICATED)
        # the token in the cell's bootstrap document is the one
        with open(os.path.join(self.env.state_dir, "cells", pod[:20], "bootstrap.json")) as f:
            token = json.load(f)["token"]
        self.assertEqual(len(token), 64)
        self.assertEqual(self.call(ip, "Hello", token), grpc.StatusCode.OK)
        # and kiyot, which holds it, still drives the cell
        r = self.c.runtime.ExecSync(self.pb.ExecSyncRequest(container_id=cid, cmd=["true"],
                                                            timeout=10), timeout=T_CALL)
        self.assertEqual(r.exit_code, 0)
