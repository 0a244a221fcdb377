"""Tests whose kiyot talks to the suite's local Kubernetes API endpoint (test/kubeapi/kubeapi.py,
HTTPS with a bearer token, reached through a kubeconfig), with python3-kubernetes as a client."""

import os
import sys

from harness import REPO, KiyotTest

sys.path.insert(0, os.path.join(REPO, "test", "kubeapi"))
from test_kubeapi import Endpoint  # noqa: E402


class ApiServerTest(KiyotTest):
    """Starts the endpoint (with the Cell CRD when CRD is true) and restarts kiyot with its
    kubeconfig for the class; cls.api_client is a python3-kubernetes client for it."""
    CRD = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.ep = Endpoint()
        cls.ep.start()
        if cls.CRD:
            cls.ep.apply_crd()
        from kubernetes import client, config
        cls.kclient = client
        cls.api_client = config.new_client_from_config(config_file=cls.ep.kubeconfig)
        cls.env.extra_config = "kubeconfig: %s\n" % cls.ep.kubeconfig
        cls.env.restart_kiyot()

    @classmethod
    def tearDownClass(cls):
        cls.env.extra_config = ""
        try:
            cls.env.restart_kiyot()
        finally:
            cls.ep.cleanup()

    def setUp(self):
        super().setUp()
        if self.ep.proc is None:
            self.ep.start()
