#!/usr/bin/python3
"""Tests of ec2sim driven by real EC2 clients: the AWS CLI and botocore.

Each test class starts its own ec2sim with the stand-in cell command (no root, no cells), on a
free port, and stops it afterwards. Answers are also checked element by element against the
output shapes of botocore's EC2 model, since the clients silently skip unknown elements.
"""

import datetime
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from unittest import mock

import botocore.session
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"
AWS = "/usr/bin/aws"
KEY, SECRET, REGION = "AKIATESTEC2SIM000001", "test-secret-for-ec2sim", "us-east-1"
CLUSTER_TAG = "kiyot.elotl.co/cluster-id"
NS = "{http://ec2.amazonaws.com/doc/2016-11-15/}"
WAIT = 30.0  # seconds a background state change may take before a test gives up


class Sim:
    """An ec2sim process with the stand-in cell commands."""

    def __init__(self, *extra, boot=True):
        self.dir = tempfile.mkdtemp(prefix="ec2sim-test-")
        self.cells = os.path.join(self.dir, "cells")
        standin = os.path.join(HERE, "standin_cell.py")
        port_file = os.path.join(self.dir, "port")
        argv = [PYTHON, os.path.join(HERE, "ec2sim.py"), "--port", "0", "--port-file",
                port_file, "--region", REGION, "--key", f"{KEY}:{SECRET}",
                "--work-dir", os.path.join(self.dir, "work"),
                "--boot-cmd", f"{PYTHON} {standin} launch --state-dir {self.cells} --id {{id}} "
                "--bootstrap {bootstrap} --cpus {cpus} --memory {memory} "
                "--instance-type {instance_type} --cluster-id {cluster_id}",
                "--terminate-cmd", f"{PYTHON} {standin} terminate --state-dir {self.cells} "
                "--id {id}", *extra]
        if not boot:
            argv = [a for a in argv[:argv.index("--boot-cmd")]] + list(extra)
        self.log = open(os.path.join(self.dir, "log"), "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + WAIT
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ec2sim did not start: " + self.read_log())
            time.sleep(0.05)
        self.port = int(open(port_file, encoding="utf-8").read())
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def read_log(self):
        self.log.flush()
        with open(os.path.join(self.dir, "log"), encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=WAIT)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def admin(self, path, doc=None):
        data = json.dumps(doc).encode() if doc is not None else None
        req = urllib.request.Request(self.endpoint + path, data=data,
                                     method="POST" if data is not None else "GET")
        with urllib.request.urlopen(req, timeout=WAIT) as resp:
            return json.loads(resp.read())

    def client(self, retries=1, secret=SECRET, key=KEY):
        session = botocore.session.get_session()
        return session.create_client(
            "ec2", region_name=REGION, endpoint_url=self.endpoint, aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(retries={"total_max_attempts": retries, "mode": "standard"}))

    def cell_record(self, instance_id, terminated=False):
        path = os.path.join(self.cells, instance_id + ".json"
                            + (".terminated" if terminated else ""))
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            return json.load(f)


def wait_for(predicate, what):
    """Poll predicate until it returns a true value (or fail after WAIT seconds)."""
    deadline = time.monotonic() + WAIT
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def state_of(ec2, instance_id):
    res = ec2.describe_instances(InstanceIds=[instance_id])
    return res["Reservations"][0]["Instances"][0]


def run(ec2, **kw):
    args = {"ImageId": "ami-0123456789abcdef0", "InstanceType": "t3.nano", "MinCount": 1,
            "MaxCount": 1}
    args.update(kw)
    return ec2.run_instances(**args)


def cluster_tags(cluster, **extra):
    tags = [{"Key": CLUSTER_TAG, "Value": cluster}]
    tags += [{"Key": k, "Value": v} for k, v in extra.items()]
    return [{"ResourceType": "instance", "Tags": tags}]


def signed_request(sim, params, method="POST", key=KEY, secret=SECRET, region=REGION,
                   tamper=None):
    """Send a request signed by botocore's signer; return (status, body bytes)."""
    query = urllib.parse.urlencode(params)
    if method == "POST":
        req = AWSRequest(method="POST", url=sim.endpoint + "/", data=query.encode(),
                         headers={"Content-Type":
                                  "application/x-www-form-urlencoded; charset=utf-8"})
    else:
        req = AWSRequest(method="GET", url=sim.endpoint + "/?" + query)
    SigV4Auth(Credentials(key, secret), "ec2", region).add_auth(req)
    body = req.body if method == "POST" else None
    if tamper is not None:
        body = tamper(body)
    out = urllib.request.Request(req.url, data=body, method=method,
                                 headers=dict(req.headers.items()))
    try:
        with urllib.request.urlopen(out, timeout=WAIT) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def error_code(body):
    root = ET.fromstring(body)
    return root.findtext("Errors/Error/Code")


class ShapeChecker:
    """Checks an XML answer against the output shape botocore's EC2 model gives the action."""

    def __init__(self):
        self.model = botocore.session.get_session().get_service_model("ec2")

    def check(self, action, body):
        root = ET.fromstring(body)
        assert root.tag == f"{NS}{action}Response", root.tag
        shape = self.model.operation_model(action).output_shape
        kids = list(root)
        assert kids and kids[0].tag == f"{NS}requestId", "requestId must come first"
        if shape is None:   # CreateTags: EC2 answers only <return>true</return>
            assert [k.tag for k in kids[1:]] == [f"{NS}return"], action
            return
        self._structure(shape, kids[1:], action)

    def _names(self, shape):
        out = {}
        for name, member in shape.members.items():
            out[member.serialization.get("name", name)] = member
        return out

    def _structure(self, shape, children, path):
        names = self._names(shape)
        for child in children:
            tag = child.tag.replace(NS, "")
            assert tag in names, f"{path}/{tag} is not in the model's {shape.name}"
            self._value(names[tag], child, f"{path}/{tag}")

    def _value(self, shape, elem, path):
        kind = shape.type_name
        if kind == "structure":
            self._structure(shape, list(elem), path)
        elif kind == "list":
            for item in elem:
                assert item.tag == f"{NS}item", f"{path} holds {item.tag}, not item"
                self._value(shape.member, item, path + "/item")
        else:
            assert len(elem) == 0, f"{path} is a {kind} but has children"
            text = elem.text or ""
            if kind in ("integer", "long"):
                int(text)
            elif kind == "boolean":
                assert text in ("true", "false"), f"{path}: {text!r} is not a boolean"
            elif kind == "double":
                float(text)
            elif kind == "timestamp":
                datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


class CliTests(unittest.TestCase):
    """The AWS CLI (Debian's awscli) against ec2sim."""

    @classmethod
    def setUpClass(cls):
        cls.sim = Sim()

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()

    def aws(self, *args, secret=SECRET, check=True):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=secret,
                   AWS_DEFAULT_REGION=REGION, AWS_PAGER="", AWS_CONFIG_FILE="/dev/null",
                   AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_MAX_ATTEMPTS="1")
        env.pop("AWS_PROFILE", None)
        res = subprocess.run([AWS, "--endpoint-url", self.sim.endpoint, "--region", REGION,
                              "--output", "json", "ec2", *args], env=env, capture_output=True,
                             text=True, timeout=120, check=False)
        if check:
            self.assertEqual(res.returncode, 0, res.stderr)
            return json.loads(res.stdout) if res.stdout.strip() else None
        return res

    def test_cli_run_describe_tag_terminate(self):
        out = self.aws("run-instances", "--image-id", "ami-0123456789abcdef0",
                       "--instance-type", "t3.small", "--count", "1",
                       "--user-data", json.dumps({"agent": "cli"}),
                       "--client-token", "cli-token-1", "--security-group-ids", "sg-11111111",
                       "--tag-specifications",
                       f"ResourceType=instance,Tags=[{{Key={CLUSTER_TAG},Value=cli}}]")
        inst = out["Instances"][0]
        iid = inst["InstanceId"]
        self.assertEqual(inst["State"]["Name"], "pending")
        self.assertEqual(inst["InstanceType"], "t3.small")
        self.assertEqual(inst["SecurityGroups"][0]["GroupId"], "sg-11111111")

        def running():
            res = self.aws("describe-instances", "--filters",
                           f"Name=tag:{CLUSTER_TAG},Values=cli")
            found = [i for r in res["Reservations"] for i in r["Instances"]]
            self.assertEqual([i["InstanceId"] for i in found], [iid])
            return found[0] if found[0]["State"]["Name"] == "running" else None

        desc = wait_for(running, "the instance to run")
        record = self.sim.cell_record(iid)
        self.assertEqual(desc["PrivateIpAddress"], record["ip"])
        self.assertEqual(record["bootstrap"], {"agent": "cli"})

        self.aws("create-tags", "--resources", iid, "--tags", "Key=pod,Value=web-1")
        res = self.aws("describe-instances", "--filters", "Name=tag:pod,Values=web-*")
        tags = {t["Key"]: t["Value"] for t in res["Reservations"][0]["Instances"][0]["Tags"]}
        self.assertEqual(tags, {CLUSTER_TAG: "cli", "pod": "web-1"})

        out = self.aws("terminate-instances", "--instance-ids", iid)
        change = out["TerminatingInstances"][0]
        self.assertEqual(change["PreviousState"]["Name"], "running")
        self.assertEqual(change["CurrentState"]["Name"], "shutting-down")
        wait_for(lambda: self.aws("describe-instances", "--instance-ids", iid)
                 ["Reservations"][0]["Instances"][0]["State"]["Name"] == "terminated",
                 "the instance to terminate")
        self.assertIsNotNone(self.sim.cell_record(iid, terminated=True))

    def test_cli_paginates_describe_instances(self):
        out = self.aws("run-instances", "--image-id", "ami-0123456789abcdef0",
                       "--instance-type", "t3.nano", "--count", "7", "--tag-specifications",
                       f"ResourceType=instance,Tags=[{{Key={CLUSTER_TAG},Value=pages}}]")
        launched = sorted(i["InstanceId"] for i in out["Instances"])
        before = self.sim.admin("/_admin/stats")["calls"].get("DescribeInstances", 0)
        res = self.aws("describe-instances", "--page-size", "5", "--filters",
                       f"Name=tag:{CLUSTER_TAG},Values=pages")
        seen = sorted(i["InstanceId"] for r in res["Reservations"] for i in r["Instances"])
        self.assertEqual(seen, launched)
        after = self.sim.admin("/_admin/stats")["calls"]["DescribeInstances"]
        self.assertEqual(after - before, 2, "7 instances at 5 per page take two calls")

    def test_cli_wrong_secret_is_auth_failure(self):
        res = self.aws("describe-instances", secret="not-the-secret", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("AuthFailure", res.stderr)

    def test_cli_unknown_instance_is_not_found(self):
        res = self.aws("terminate-instances", "--instance-ids", "i-0123456789abcdef0",
                       check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("InvalidInstanceID.NotFound", res.stderr)

    def test_cli_instance_types_and_spot_prices(self):
        res = self.aws("describe-instance-types", "--instance-types", "t3.nano", "c5.large")
        by_name = {t["InstanceType"]: t for t in res["InstanceTypes"]}
        self.assertEqual(by_name["t3.nano"]["MemoryInfo"]["SizeInMiB"], 512)
        self.assertTrue(by_name["t3.nano"]["BurstablePerformanceSupported"])
        self.assertEqual(by_name["c5.large"]["VCpuInfo"]["DefaultVCpus"], 2)
        res = self.aws("describe-spot-price-history", "--instance-types", "t3.nano",
                       "--product-descriptions", "Linux/UNIX")
        zones = sorted(p["AvailabilityZone"] for p in res["SpotPriceHistory"])
        self.assertEqual(zones, ["us-east-1a", "us-east-1b", "us-east-1c"])
        self.assertGreater(float(res["SpotPriceHistory"][0]["SpotPrice"]), 0)


    def test_cli_subnets_with_zones_and_spot_prices_by_zone(self):
        self.sim.admin("/_admin/subnets", {"subnet-0000000000000000b": "us-east-1b",
                                           "subnet-0000000000000000c": "us-east-1c"})
        res = self.aws("describe-subnets", "--subnet-ids", "subnet-0000000000000000c",
                       "subnet-0000000000000000b")
        zones = {s["SubnetId"]: s["AvailabilityZone"] for s in res["Subnets"]}
        self.assertEqual(zones, {"subnet-0000000000000000b": "us-east-1b",
                                 "subnet-0000000000000000c": "us-east-1c"})
        self.assertEqual(res["Subnets"][0]["State"], "available")
        res = self.aws("describe-subnets", "--filters", "Name=availability-zone,Values=us-east-1c")
        self.assertEqual([s["SubnetId"] for s in res["Subnets"]], ["subnet-0000000000000000c"])
        res = self.aws("describe-subnets", "--subnet-ids", "subnet-0000000000000dead",
                       check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("InvalidSubnetID.NotFound", res.stderr)
        self.sim.admin("/_admin/spot", {"zones": {"us-east-1a": 1.5},
                                        "prices": {"t3.nano": {"us-east-1c": 0.0011}}})
        res = self.aws("describe-spot-price-history", "--instance-types", "t3.nano",
                       "c5.large", "--product-descriptions", "Linux/UNIX")
        price = {(p["InstanceType"], p["AvailabilityZone"]): float(p["SpotPrice"])
                 for p in res["SpotPriceHistory"]}
        self.assertEqual(price[("t3.nano", "us-east-1c")], 0.0011)
        self.assertAlmostEqual(price[("t3.nano", "us-east-1a")],
                               price[("t3.nano", "us-east-1b")] * 1.5, places=6)
        self.assertAlmostEqual(price[("c5.large", "us-east-1a")],
                               price[("c5.large", "us-east-1c")] * 1.5, places=6)
        self.sim.admin("/_admin/spot", {"zones": {"us-east-1a": 1}})


class BotocoreTests(unittest.TestCase):
    """botocore's EC2 client against ec2sim."""

    @classmethod
    def setUpClass(cls):
        cls.sim = Sim("--terminated-ttl", "0")
        cls.ec2 = cls.sim.client()
        cls.shapes = ShapeChecker()
        cls.raw = {}

        def keep(http_response, model, **_kw):
            cls.raw[model.name] = http_response.content

        cls.ec2.meta.events.register("after-call.ec2", keep)

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()

    def setUp(self):
        self.sim.admin("/_admin/faults/clear", {})
        self.sim.admin("/_admin/throttle", {"seconds": 0, "count": 0})

    def test_run_boots_cell_sized_by_instance_type_from_user_data(self):
        doc = {"agent": {"port": 7443}, "cluster": "boot"}
        res = run(self.ec2, InstanceType="m5.large", UserData=json.dumps(doc),
                  TagSpecifications=cluster_tags("boot"))
        iid = res["Instances"][0]["InstanceId"]
        inst = wait_for(lambda: (lambda i: i if i["State"]["Name"] == "running" else None)(
            state_of(self.ec2, iid)), "boot")
        record = self.sim.cell_record(iid)
        self.assertEqual(record["bootstrap"], doc)
        self.assertEqual(record["cpus"], 2)
        self.assertEqual(record["memory"], 8 * 1024 ** 3)
        self.assertEqual(record["instance_type"], "m5.large")
        self.assertEqual(record["cluster_id"], "boot")
        self.assertEqual(inst["PrivateIpAddress"], record["ip"])

    def test_describe_filters_and_paginates(self):
        ids = [i["InstanceId"] for i in run(self.ec2, MinCount=12, MaxCount=12,
                                            TagSpecifications=cluster_tags("pg"))["Instances"]]
        run(self.ec2, TagSpecifications=cluster_tags("other-cluster"))
        seen, token, calls = [], None, 0
        while True:
            kw = {"Filters": [{"Name": f"tag:{CLUSTER_TAG}", "Values": ["pg"]}],
                  "MaxResults": 5}
            if token:
                kw["NextToken"] = token
            res = self.ec2.describe_instances(**kw)
            calls += 1
            seen += [i["InstanceId"] for r in res["Reservations"] for i in r["Instances"]]
            token = res.get("NextToken")
            if not token:
                break
        self.assertEqual(sorted(seen), sorted(ids))
        self.assertEqual(calls, 3)
        res = self.ec2.describe_instances(Filters=[
            {"Name": "instance-id", "Values": [ids[0], ids[1]]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        self.assertEqual(sorted(i["InstanceId"] for r in res["Reservations"]
                                for i in r["Instances"]), sorted(ids[:2]))

    def test_describe_rejects_small_max_results_and_unknown_filter(self):
        with self.assertRaises(ClientError) as cm:
            self.ec2.describe_instances(MaxResults=2)
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidParameterValue")
        with self.assertRaises(ClientError) as cm:
            self.ec2.describe_instances(Filters=[{"Name": "no-such-filter", "Values": ["x"]}])
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidParameterValue")

    def test_same_client_token_returns_same_instance(self):
        first = run(self.ec2, ClientToken="pod-uid-1234", TagSpecifications=cluster_tags("t"))
        second = run(self.ec2, ClientToken="pod-uid-1234", TagSpecifications=cluster_tags("t"))
        self.assertEqual(first["Instances"][0]["InstanceId"],
                         second["Instances"][0]["InstanceId"])
        self.assertEqual(first["ReservationId"], second["ReservationId"])
        mine = [i for i in self.sim.admin("/_admin/instances")["instances"]
                if i["client_token"] == "pod-uid-1234"]
        self.assertEqual(len(mine), 1)
        with self.assertRaises(ClientError) as cm:
            run(self.ec2, ClientToken="pod-uid-1234", InstanceType="t3.micro")
        self.assertEqual(cm.exception.response["Error"]["Code"], "IdempotentParameterMismatch")

    def test_tag_and_terminate(self):
        iid = run(self.ec2)["Instances"][0]["InstanceId"]
        self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "pod", "Value": "a"}])
        tags = state_of(self.ec2, iid)["Tags"]
        self.assertEqual(tags, [{"Key": "pod", "Value": "a"}])
        with self.assertRaises(ClientError) as cm:
            self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "aws:x", "Value": "a"}])
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidParameterValue")
        # DeleteTags: a key alone goes whatever its value, a key with a value only on a match
        self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "sb", "Value": "x"},
                                                    {"Key": "keep", "Value": "1"}])
        self.ec2.delete_tags(Resources=[iid], Tags=[{"Key": "sb"}, {"Key": "absent"},
                                                    {"Key": "keep", "Value": "2"}])
        self.shapes.check("DeleteTags", self.raw["DeleteTags"])
        tags = {t["Key"]: t["Value"] for t in state_of(self.ec2, iid)["Tags"]}
        self.assertEqual(tags, {"pod": "a", "keep": "1"})
        res = self.ec2.terminate_instances(InstanceIds=[iid])
        self.assertEqual(res["TerminatingInstances"][0]["InstanceId"], iid)

        def gone():
            try:
                self.ec2.describe_instances(InstanceIds=[iid])
            except ClientError as e:
                return e.response["Error"]["Code"] == "InvalidInstanceID.NotFound"
            return False

        wait_for(gone, "the terminated instance to leave DescribeInstances (ttl 0)")

    def test_wrong_secret_is_auth_failure(self):
        bad = self.sim.client(secret="wrong")
        with self.assertRaises(ClientError) as cm:
            bad.describe_instances()
        self.assertEqual(cm.exception.response["Error"]["Code"], "AuthFailure")
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 401)
        unknown = self.sim.client(key="AKIAUNKNOWNKEY000000")
        with self.assertRaises(ClientError) as cm:
            unknown.describe_instances()
        self.assertEqual(cm.exception.response["Error"]["Code"], "AuthFailure")

    def test_signature_covers_body_region_and_date(self):
        params = {"Action": "DescribeInstances", "Version": "2016-11-15"}
        status, body = signed_request(self.sim, params)
        self.assertEqual(status, 200, body)
        status, body = signed_request(self.sim, params, method="GET")
        self.assertEqual(status, 200, body)
        status, body = signed_request(
            self.sim, params, tamper=lambda b: b.replace(b"DescribeInstances",
                                                         b"DescribeRegions"))
        self.assertEqual((status, error_code(body)), (401, "AuthFailure"))
        status, body = signed_request(self.sim, params, region="eu-west-1")
        self.assertEqual((status, error_code(body)), (401, "AuthFailure"))
        with mock.patch("botocore.auth.datetime") as dt:
            dt.datetime.utcnow.return_value = datetime.datetime(2020, 1, 1, 12, 0, 0)
            status, body = signed_request(self.sim, params)
        self.assertEqual((status, error_code(body)), (400, "RequestExpired"))

    def test_curl_sigv4_requests_are_accepted(self):
        # libcurl's CURLOPT_AWS_SIGV4 is how kiyot signs; the curl tool uses the same code.
        form = ("Action=RunInstances&Version=2016-11-15&ImageId=ami-12345678&MinCount=1"
                "&MaxCount=1&InstanceType=t3.nano&TagSpecification.1.ResourceType=instance"
                "&TagSpecification.1.Tag.1.Key=curl&TagSpecification.1.Tag.1.Value=a%20b%2Bc")

        def curl(*args, secret=SECRET):
            res = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", "--aws-sigv4",
                                  f"aws:amz:{REGION}:ec2", "--user", f"{KEY}:{secret}",
                                  *args], capture_output=True, text=True, timeout=WAIT,
                                 check=True)
            body, _, code = res.stdout.rpartition("\n")
            return int(code), body.encode()

        code, body = curl("-d", form, self.sim.endpoint + "/")
        self.assertEqual(code, 200, body)
        self.shapes.check("RunInstances", body)
        iid = ET.fromstring(body).findtext(f".//{NS}instanceId")
        self.assertEqual(state_of(self.ec2, iid)["Tags"], [{"Key": "curl", "Value": "a b+c"}])
        # A GET whose query is already in canonical (sorted) order.
        code, body = curl(self.sim.endpoint + "/?Action=DescribeInstances&Filter.1.Name="
                          "tag%3Acurl&Filter.1.Value.1=a%20b%2Bc&Version=2016-11-15")
        self.assertEqual(code, 200, body)
        self.assertIn(iid.encode(), body)
        code, body = curl("-d", "Action=DescribeInstances&Version=2016-11-15",
                          self.sim.endpoint + "/", secret="wrong")
        self.assertEqual((code, error_code(body)), (401, "AuthFailure"))

    def test_unknown_parameter_and_action_are_refused(self):
        status, body = signed_request(self.sim, {"Action": "DescribeInstances",
                                                 "Version": "2016-11-15", "InstanceIds.1": "x"})
        self.assertEqual((status, error_code(body)), (400, "UnknownParameter"))
        status, body = signed_request(self.sim, {"Action": "RunInstances",
                                                 "Version": "2016-11-15",
                                                 "ImageId": "ami-12345678", "MinCount": "1"})
        self.assertEqual((status, error_code(body)), (400, "MissingParameter"))
        status, body = signed_request(self.sim, {"Action": "DeleteVpc",
                                                 "Version": "2016-11-15"})
        self.assertEqual((status, error_code(body)), (400, "InvalidAction"))

    def test_malformed_and_missing_ids(self):
        with self.assertRaises(ClientError) as cm:
            self.ec2.describe_instances(InstanceIds=["i-nothex"])
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidInstanceID.Malformed")
        with self.assertRaises(ClientError) as cm:
            self.ec2.terminate_instances(InstanceIds=["i-0000000000000dead"])
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidInstanceID.NotFound")
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 400)

    def test_terminate_with_an_unknown_id_terminates_none(self):
        # EC2 fails the whole call for one unknown or malformed id, naming the unknown ones
        iid = run(self.ec2)["Instances"][0]["InstanceId"]
        gone = ["i-0000000000000dead", "i-0000000000000beef"]
        with self.assertRaises(ClientError) as cm:
            self.ec2.terminate_instances(InstanceIds=[iid] + gone)
        err = cm.exception.response["Error"]
        self.assertEqual(err["Code"], "InvalidInstanceID.NotFound")
        self.assertEqual(err["Message"], "The instance IDs '%s' do not exist" % ", ".join(gone))
        with self.assertRaises(ClientError) as cm:
            self.ec2.terminate_instances(InstanceIds=[iid, "i-nothex"])
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidInstanceID.Malformed")
        self.assertIn(state_of(self.ec2, iid)["State"]["Name"], ("pending", "running"))
        res = self.ec2.terminate_instances(InstanceIds=[iid])
        self.assertEqual([i["InstanceId"] for i in res["TerminatingInstances"]], [iid])

    def test_new_ids_are_unknown_for_the_consistency_delay(self):
        self.sim.admin("/_admin/consistency", {"seconds": 600})
        try:
            iid = run(self.ec2)["Instances"][0]["InstanceId"]
            for call in (lambda: self.ec2.describe_instances(InstanceIds=[iid]),
                         lambda: self.ec2.create_tags(Resources=[iid],
                                                      Tags=[{"Key": "a", "Value": "1"}]),
                         lambda: self.ec2.terminate_instances(InstanceIds=[iid])):
                with self.assertRaises(ClientError) as cm:
                    call()
                self.assertEqual(cm.exception.response["Error"]["Code"],
                                 "InvalidInstanceID.NotFound")
            listed = [i["InstanceId"] for r in self.ec2.describe_instances()["Reservations"]
                      for i in r["Instances"]]
            self.assertNotIn(iid, listed)
            self.sim.admin("/_admin/consistency", {"seconds": 1})
            wait_for(lambda: self._describable(iid), "the new id to be known")
            self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "a", "Value": "1"}])
            self.ec2.terminate_instances(InstanceIds=[iid])
        finally:
            self.sim.admin("/_admin/consistency", {"seconds": 0})

    def _describable(self, iid):
        try:
            return state_of(self.ec2, iid)
        except ClientError:
            return None

    def test_capacity_and_limit_errors_by_zone_and_subnet(self):
        self.sim.admin("/_admin/subnets", {"subnet-0000000000000000b": "us-east-1b"})
        self.sim.admin("/_admin/fault", {"action": "RunInstances", "code": "Unsupported",
                                         "instance_type": "t3.micro", "zone": "us-east-1a"})
        self.sim.admin("/_admin/fault", {"action": "RunInstances",
                                         "code": "InstanceLimitExceeded",
                                         "instance_type": "c5.large",
                                         "subnet": "subnet-0000000000000000b"})
        self.sim.admin("/_admin/fault", {"action": "RunInstances", "code": "VcpuLimitExceeded",
                                         "instance_type": "m5.large"})
        self.sim.admin("/_admin/fault", {"action": "RunInstances",
                                         "code": "MaxSpotInstanceCountExceeded",
                                         "instance_type": "t3.small", "market": "spot"})
        try:
            for kw, code in (({"InstanceType": "t3.micro"}, "Unsupported"),
                             ({"InstanceType": "c5.large",
                               "SubnetId": "subnet-0000000000000000b"},
                              "InstanceLimitExceeded"),
                             ({"InstanceType": "m5.large"}, "VcpuLimitExceeded"),
                             ({"InstanceType": "t3.small",
                               "InstanceMarketOptions": {"MarketType": "spot"}},
                              "MaxSpotInstanceCountExceeded")):
                with self.assertRaises(ClientError) as cm:
                    run(self.ec2, **kw)
                self.assertEqual(cm.exception.response["Error"]["Code"], code, kw)
                self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"],
                                 400)
            # the same type in another zone, the same subnet for another type: launched
            res = run(self.ec2, InstanceType="t3.micro", SubnetId="subnet-0000000000000000b")
            self.assertEqual(res["Instances"][0]["Placement"]["AvailabilityZone"],
                             "us-east-1b")
            run(self.ec2, InstanceType="c5.large")
            run(self.ec2, InstanceType="t3.small")
        finally:
            self.sim.admin("/_admin/faults/clear", {})

    def test_registered_image_must_match_the_types_architecture(self):
        self.sim.admin("/_admin/images", {"ami-0000000000000a64a": "arm64",
                                          "ami-0000000000000a86a": "x86_64"})
        for image, itype, want in (("ami-0000000000000a64a", "t3.nano", "arm64"),
                                   ("ami-0000000000000a86a", "m7g.large", "x86_64")):
            with self.assertRaises(ClientError) as cm:
                run(self.ec2, ImageId=image, InstanceType=itype)
            err = cm.exception.response["Error"]
            self.assertEqual(err["Code"], "InvalidParameterValue")
            self.assertIn("does not match the architecture '%s' of the specified AMI" % want,
                          err["Message"])
        res = run(self.ec2, ImageId="ami-0000000000000a64a", InstanceType="t4g.nano")
        self.assertEqual(res["Instances"][0]["Architecture"], "arm64")
        res = run(self.ec2, ImageId="ami-0000000000000a86a", InstanceType="t3.nano")
        self.assertEqual(res["Instances"][0]["Architecture"], "x86_64")

    def test_fault_rate_fails_a_fraction_of_the_calls(self):
        self.sim.admin("/_admin/fault", {"action": "DescribeAvailabilityZones",
                                         "code": "InternalError", "rate": 0.5})
        try:
            outcomes = set()
            for _ in range(40):
                try:
                    self.ec2.describe_availability_zones()
                    outcomes.add("ok")
                except ClientError as e:
                    outcomes.add(e.response["Error"]["Code"])
            self.assertEqual(outcomes, {"ok", "InternalError"})
        finally:
            self.sim.admin("/_admin/faults/clear", {})

    def test_throttling_is_retried_by_botocore(self):
        self.sim.admin("/_admin/stats/reset", {})
        self.sim.admin("/_admin/throttle", {"count": 2})
        patient = self.sim.client(retries=5)
        patient.describe_availability_zones()
        stats = self.sim.admin("/_admin/stats")
        self.assertEqual(stats["errors"]["DescribeAvailabilityZones"],
                         {"RequestLimitExceeded": 2})
        self.assertEqual(stats["ok"]["DescribeAvailabilityZones"], 1)
        self.sim.admin("/_admin/throttle", {"count": 1})
        with self.assertRaises(ClientError) as cm:
            self.ec2.describe_availability_zones()
        self.assertEqual(cm.exception.response["Error"]["Code"], "RequestLimitExceeded")
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 503)

    def test_token_bucket_refuses_bursts_beyond_capacity(self):
        self.sim.admin("/_admin/buckets", {"mutating": {"capacity": 3, "rate": 0.001}})
        try:
            iid = run(self.ec2)["Instances"][0]["InstanceId"]
            self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "a", "Value": "1"}])
            self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "b", "Value": "2"}])
            with self.assertRaises(ClientError) as cm:
                self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "c", "Value": "3"}])
            self.assertEqual(cm.exception.response["Error"]["Code"], "RequestLimitExceeded")
            self.ec2.describe_instances(InstanceIds=[iid])  # the other family is untouched
        finally:
            self.sim.admin("/_admin/buckets", {"mutating": {"capacity": 0, "rate": 0}})

    def test_capacity_injection(self):
        self.sim.admin("/_admin/capacity", {"instance_type": "c5.*", "times": 1})
        with self.assertRaises(ClientError) as cm:
            run(self.ec2, InstanceType="c5.large", ClientToken="ice-1")
        err = cm.exception.response
        self.assertEqual(err["Error"]["Code"], "InsufficientInstanceCapacity")
        self.assertEqual(err["ResponseMetadata"]["HTTPStatusCode"], 500)
        run(self.ec2, InstanceType="t3.nano")            # other types are unaffected
        res = run(self.ec2, InstanceType="c5.large", ClientToken="ice-1")  # once only
        self.assertEqual(res["Instances"][0]["InstanceType"], "c5.large")

    def test_unsupported_fault_on_spot_only(self):
        self.sim.admin("/_admin/fault", {"action": "RunInstances", "code": "Unsupported",
                                         "instance_type": "t3.micro", "market": "spot"})
        spot = {"MarketType": "spot"}
        with self.assertRaises(ClientError) as cm:
            run(self.ec2, InstanceType="t3.micro", InstanceMarketOptions=spot)
        self.assertEqual(cm.exception.response["Error"]["Code"], "Unsupported")
        res = run(self.ec2, InstanceType="t3.micro")
        self.assertNotIn("InstanceLifecycle", res["Instances"][0])
        res = run(self.ec2, InstanceType="t3.small", InstanceMarketOptions=spot)
        self.assertEqual(res["Instances"][0]["InstanceLifecycle"], "spot")
        with self.assertRaises(ClientError) as cm:
            run(self.ec2, InstanceType="t3.small", InstanceMarketOptions={
                "MarketType": "spot", "SpotOptions": {"MaxPrice": "0.000001"}})
        self.assertEqual(cm.exception.response["Error"]["Code"], "SpotMaxPriceTooLow")

    def test_bad_user_data_fails_the_boot(self):
        iid = run(self.ec2, UserData="not a bootstrap document")["Instances"][0]["InstanceId"]

        def failed():
            for inst in self.sim.admin("/_admin/instances")["instances"]:
                if inst["instance_id"] == iid and inst["state"] == "terminated":
                    return inst
            return None

        inst = wait_for(failed, "the failed boot")
        self.assertEqual(inst["state_reason"][0], "Server.InternalError")
        self.assertIsNone(inst["private_ip"])

    def test_user_data_over_16k_is_refused(self):
        with self.assertRaises(ClientError) as cm:
            run(self.ec2, UserData="x" * 16385)
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidParameterValue")

    def test_foreign_instance_has_no_cluster_tag(self):
        fid = self.sim.admin("/_admin/foreign", {"tags": {"Name": "someone-else"}})[
            "instance_id"]
        res = self.ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": [CLUSTER_TAG]}])
        ours = [i["InstanceId"] for r in res["Reservations"] for i in r["Instances"]]
        self.assertNotIn(fid, ours)
        inst = state_of(self.ec2, fid)
        self.assertEqual(inst["State"]["Name"], "running")
        self.assertEqual(inst["Tags"], [{"Key": "Name", "Value": "someone-else"}])

    def test_kill_takes_the_cell_and_the_instance_down(self):
        iid = run(self.ec2)["Instances"][0]["InstanceId"]
        wait_for(lambda: state_of(self.ec2, iid)["State"]["Name"] == "running", "boot")
        self.sim.admin("/_admin/kill", {"instance_id": iid})
        self.assertIsNotNone(self.sim.cell_record(iid, terminated=True))
        # terminated-ttl is 0 here: the instance may already be gone from describe
        mine = [i for i in self.sim.admin("/_admin/instances")["instances"]
                if i["instance_id"] == iid][0]
        self.assertEqual(mine["state"], "terminated")
        self.assertEqual(mine["state_reason"][0], "Server.InternalError")

    def test_answers_match_the_ec2_model(self):
        iid = run(self.ec2, TagSpecifications=cluster_tags("shape"), ClientToken="shape-1",
                  InstanceMarketOptions={"MarketType": "spot"})["Instances"][0]["InstanceId"]
        self.shapes.check("RunInstances", self.raw["RunInstances"])
        wait_for(lambda: state_of(self.ec2, iid)["State"]["Name"] == "running", "boot")
        self.shapes.check("DescribeInstances", self.raw["DescribeInstances"])
        self.ec2.create_tags(Resources=[iid], Tags=[{"Key": "k", "Value": "v"}])
        self.shapes.check("CreateTags", self.raw["CreateTags"])
        self.ec2.describe_instance_types(MaxResults=100)
        self.shapes.check("DescribeInstanceTypes", self.raw["DescribeInstanceTypes"])
        self.ec2.describe_instance_types(InstanceTypes=["g5.xlarge", "g4dn.xlarge", "m5.metal",
                                                  "m7g.large"])
        self.shapes.check("DescribeInstanceTypes", self.raw["DescribeInstanceTypes"])
        self.ec2.describe_spot_price_history(InstanceTypes=["t3.nano"])
        self.shapes.check("DescribeSpotPriceHistory", self.raw["DescribeSpotPriceHistory"])
        self.ec2.describe_regions()
        self.shapes.check("DescribeRegions", self.raw["DescribeRegions"])
        self.ec2.describe_subnets()
        self.shapes.check("DescribeSubnets", self.raw["DescribeSubnets"])
        self.ec2.describe_availability_zones()
        self.shapes.check("DescribeAvailabilityZones", self.raw["DescribeAvailabilityZones"])
        self.ec2.terminate_instances(InstanceIds=[iid])
        self.shapes.check("TerminateInstances", self.raw["TerminateInstances"])
        status, body = signed_request(self.sim, {"Action": "DescribeInstances",
                                                 "Version": "2016-11-15",
                                                 "InstanceId.1": "i-0000000000000beef"})
        root = ET.fromstring(body)
        self.assertEqual(root.tag, "Response")
        self.assertEqual([c.tag for c in root], ["Errors", "RequestID"])
        self.assertEqual(root.findtext("Errors/Error/Code"), "InvalidInstanceID.NotFound")
        self.assertTrue(root.findtext("Errors/Error/Message"))

    def test_instance_types_cover_the_catalog_with_pagination(self):
        paginator = self.ec2.get_paginator("describe_instance_types")
        names = [t["InstanceType"] for page in paginator.paginate()
                 for t in page["InstanceTypes"]]
        with open(os.path.join(HERE, "..", "..", "kiyot", "sizing", "data",
                               "aws-instance-catalog.json"), encoding="utf-8") as f:
            catalog = json.load(f)[REGION]
        self.assertEqual(sorted(names), sorted(e["instanceType"] for e in catalog))
        gpu = self.ec2.describe_instance_types(InstanceTypes=["g4dn.xlarge"])["InstanceTypes"][0]
        self.assertEqual(gpu["GpuInfo"]["Gpus"][0]["Count"], 1)
        # the catalog's architecture: a Graviton type is arm64, the rest x86_64
        archs = {t["InstanceType"]: t["ProcessorInfo"]["SupportedArchitectures"]
                 for t in self.ec2.describe_instance_types(
                     InstanceTypes=["m7g.large", "m7i.large"])["InstanceTypes"]}
        self.assertEqual(archs, {"m7g.large": ["arm64"], "m7i.large": ["x86_64"]})
        res = self.ec2.describe_instance_types(Filters=[
            {"Name": "burstable-performance-supported", "Values": ["true"]},
            {"Name": "instance-type", "Values": ["t3.*"]}])
        self.assertIn("t3.nano", [t["InstanceType"] for t in res["InstanceTypes"]])
        self.assertTrue(all(t["InstanceType"].startswith("t3.") for t in res["InstanceTypes"]))


class PricingTests(unittest.TestCase):
    """The Price List's GetProducts (JSON 1.1, service pricing) with botocore's pricing client
    and the AWS CLI's `aws pricing get-products`."""

    FILTERS = [{"Type": "TERM_MATCH", "Field": f, "Value": v}
               for f, v in (("regionCode", REGION), ("operatingSystem", "Linux"),
                            ("tenancy", "Shared"), ("preInstalledSw", "NA"),
                            ("capacitystatus", "Used"))]

    @classmethod
    def setUpClass(cls):
        cls.sim = Sim("--pricing-page-size", "7", "--bucket-describe", "off", boot=False)
        catalog = os.path.join(HERE, "..", "..", "kiyot", "sizing", "data",
                               "aws-instance-catalog.json")
        with open(catalog, encoding="utf-8") as f:
            cls.catalog = {e["instanceType"]: e for e in json.load(f)[REGION]}

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()

    def setUp(self):
        self.sim.admin("/_admin/faults/clear", {})
        self.sim.admin("/_admin/throttle", {"seconds": 0, "count": 0})

    def client(self, retries=1, secret=SECRET, region="us-east-1"):
        return botocore.session.get_session().create_client(
            "pricing", region_name=region, endpoint_url=self.sim.endpoint,
            aws_access_key_id=KEY, aws_secret_access_key=secret,
            config=Config(retries={"total_max_attempts": retries, "mode": "standard"}))

    @staticmethod
    def price_of(doc):
        doc = json.loads(doc) if isinstance(doc, str) else doc
        term = next(iter(doc["terms"]["OnDemand"].values()))
        dim = next(iter(term["priceDimensions"].values()))
        return doc["product"]["attributes"]["instanceType"], dim["unit"], \
            float(dim["pricePerUnit"]["USD"])

    def test_paginated_products_cover_the_catalog_at_known_prices(self):
        pricing = self.client()
        pages = list(pricing.get_paginator("get_products").paginate(
            ServiceCode="AmazonEC2", Filters=self.FILTERS, FormatVersion="aws_v1"))
        self.assertEqual(len(pages), -(-len(self.catalog) // 7))
        self.assertTrue(all(len(p["PriceList"]) <= 7 for p in pages))
        self.assertTrue(all("NextToken" in p for p in pages[:-1]))
        self.assertNotIn("NextToken", pages[-1])
        self.assertEqual(pages[0]["FormatVersion"], "aws_v1")
        prices = {}
        for page in pages:
            for doc in page["PriceList"]:
                self.assertIsInstance(doc, str)  # a JSON document in a string, as AWS's
                name, unit, usd = self.price_of(doc)
                self.assertEqual(unit, "Hrs")
                prices[name] = usd
        self.assertEqual(set(prices), set(self.catalog))
        self.assertAlmostEqual(prices["m5.large"],
                               round(self.catalog["m5.large"]["price"] * 1.1, 6), places=9)
        # another region's products, or another OS: none
        other = pricing.get_products(ServiceCode="AmazonEC2", Filters=[
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "eu-west-1"}])
        self.assertEqual(other["PriceList"], [])
        windows = pricing.get_products(ServiceCode="AmazonEC2", Filters=[
            {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Windows"}])
        self.assertEqual(windows["PriceList"], [])

    def test_one_type_and_a_price_set_by_the_admin_api(self):
        pricing = self.client()
        one = self.FILTERS + [{"Type": "TERM_MATCH", "Field": "instanceType",
                               "Value": "t3.nano"}]
        self.sim.admin("/_admin/prices", {"t3.nano": 0.0123})
        try:
            res = pricing.get_products(ServiceCode="AmazonEC2", Filters=one)
            self.assertEqual(len(res["PriceList"]), 1)
            self.assertEqual(self.price_of(res["PriceList"][0]), ("t3.nano", "Hrs", 0.0123))
        finally:
            self.sim.admin("/_admin/prices", {"t3.nano": None})
        res = pricing.get_products(ServiceCode="AmazonEC2", Filters=one)
        self.assertAlmostEqual(self.price_of(res["PriceList"][0])[2],
                               round(self.catalog["t3.nano"]["price"] * 1.1, 6), places=9)

    def test_throttling_and_injected_errors(self):
        self.sim.admin("/_admin/stats/reset", {})
        self.sim.admin("/_admin/throttle", {"count": 2})
        self.client(retries=5).get_products(ServiceCode="AmazonEC2", MaxResults=1)
        stats = self.sim.admin("/_admin/stats")
        self.assertEqual(stats["errors"]["GetProducts"], {"ThrottlingException": 2})
        self.assertEqual(stats["ok"]["GetProducts"], 1)
        self.sim.admin("/_admin/fault", {"action": "GetProducts",
                                         "code": "AccessDeniedException", "times": 1,
                                         "message": "not authorized to perform: "
                                         "pricing:GetProducts"})
        with self.assertRaises(ClientError) as cm:
            self.client().get_products(ServiceCode="AmazonEC2")
        self.assertEqual(cm.exception.response["Error"]["Code"], "AccessDeniedException")
        self.assertIn("pricing:GetProducts", cm.exception.response["Error"]["Message"])
        self.sim.admin("/_admin/fault", {"action": "GetProducts",
                                         "code": "InternalErrorException", "times": 1})
        with self.assertRaises(ClientError) as cm:
            self.client().get_products(ServiceCode="AmazonEC2")
        self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 500)

    def test_signature_and_parameters_checked(self):
        for client, code in ((self.client(secret="wrong"), "InvalidSignatureException"),
                             (self.client(region="eu-west-1"), "InvalidSignatureException")):
            with self.assertRaises(ClientError) as cm:
                client.get_products(ServiceCode="AmazonEC2")
            self.assertEqual(cm.exception.response["Error"]["Code"], code)
        pricing = self.client()
        for kw, code in (({"ServiceCode": "AmazonS3"}, "NotFoundException"),
                         ({"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v2"},
                          "InvalidParameterException"),
                         ({"ServiceCode": "AmazonEC2", "NextToken": "garbage"},
                          "InvalidNextTokenException")):
            with self.assertRaises(ClientError) as cm:
                pricing.get_products(**kw)
            self.assertEqual(cm.exception.response["Error"]["Code"], code, kw)

    def test_cli_get_products_paginates(self):
        env = dict(os.environ, AWS_ACCESS_KEY_ID=KEY, AWS_SECRET_ACCESS_KEY=SECRET,
                   AWS_DEFAULT_REGION=REGION, AWS_PAGER="", AWS_CONFIG_FILE="/dev/null",
                   AWS_SHARED_CREDENTIALS_FILE="/dev/null", AWS_MAX_ATTEMPTS="1")
        env.pop("AWS_PROFILE", None)
        filters = ["Type=TERM_MATCH,Field=%s,Value=%s" % (f["Field"], f["Value"])
                   for f in self.FILTERS]
        res = subprocess.run([AWS, "--endpoint-url", self.sim.endpoint, "--region", REGION,
                              "--output", "json", "pricing", "get-products",
                              "--service-code", "AmazonEC2", "--format-version", "aws_v1",
                              "--filters", *filters], env=env, capture_output=True, text=True,
                             timeout=300, check=False)
        self.assertEqual(res.returncode, 0, res.stderr)
        docs = json.loads(res.stdout)["PriceList"]
        self.assertEqual({self.price_of(d)[0] for d in docs}, set(self.catalog))


class StartupFlagTests(unittest.TestCase):
    """Faults given on the command line."""

    def test_ice_flag_fails_the_first_launches(self):
        sim = Sim("--ice", "t3.nano:2", "--fault", "DescribeRegions:InternalError")
        try:
            ec2 = sim.client()
            for _ in range(2):
                with self.assertRaises(ClientError) as cm:
                    run(ec2)
                self.assertEqual(cm.exception.response["Error"]["Code"],
                                 "InsufficientInstanceCapacity")
            run(ec2)
            with self.assertRaises(ClientError) as cm:
                ec2.describe_regions()
            self.assertEqual(cm.exception.response["ResponseMetadata"]["HTTPStatusCode"], 500)
        finally:
            sim.stop()


IMDS_HOST = "127.0.0.1"
IMDS_CIDR = "127.77.0.0/24"  # instances' private addresses: loopback, so a client can bind one


def imds_request(sim, source, method, path, headers=None, timeout=WAIT):
    """One IMDS request from source (an instance's private IP): (status, headers, body)."""
    conn = http.client.HTTPConnection(IMDS_HOST, sim.imds_port, timeout=timeout,
                                      source_address=(source, 0))
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def imds_token(sim, source, ttl="21600"):
    status, headers, body = imds_request(
        sim, source, "PUT", "/latest/api/token",
        {"X-aws-ec2-metadata-token-ttl-seconds": ttl})
    if status != 200:
        raise AssertionError(f"token PUT answered {status}: {body!r}")
    return body.decode(), headers


def start_imds_sim(*extra):
    """An ec2sim without cells whose instances take loopback addresses, serving IMDS on a
    free loopback port."""
    sim = Sim("--imds-listen", f"{IMDS_HOST}:0", "--ip-cidr", IMDS_CIDR, *extra, boot=False)
    line = wait_for(lambda: next((ln for ln in sim.read_log().splitlines()
                                  if ln.startswith("{") and '"imds"' in ln), None),
                    "ec2sim's JSON line")
    sim.imds_port = int(json.loads(line)["imds"].rsplit(":", 1)[1])
    return sim


class ImdsTests(unittest.TestCase):
    """The instance metadata service (--imds-listen), IMDSv2 as AWS documents it."""

    @classmethod
    def setUpClass(cls):
        cls.sim = start_imds_sim()
        cls.ec2 = cls.sim.client()

    @classmethod
    def tearDownClass(cls):
        cls.sim.stop()

    def launch(self, **kw):
        """A running instance: (id, private ip)."""
        iid = run(self.ec2, **kw)["Instances"][0]["InstanceId"]
        inst = wait_for(lambda: (lambda i: i if i["State"]["Name"] == "running" else None)(
            state_of(self.ec2, iid)), f"{iid} running")
        return iid, inst["PrivateIpAddress"]

    def test_token_then_metadata_and_user_data(self):
        iid, ip = self.launch(InstanceType="t3.small", UserData='{"cell": "bootstrap"}')
        self.assertTrue(ip.startswith("127.77.0."), ip)
        token, headers = imds_token(self.sim, ip, "300")
        self.assertEqual(headers.get("X-aws-ec2-metadata-token-ttl-seconds"), "300")
        self.assertGreaterEqual(len(token), 40)
        auth = {"X-aws-ec2-metadata-token": token}
        want = {"/latest/meta-data/instance-id": iid,
                "/latest/meta-data/instance-type": "t3.small",
                "/latest/meta-data/local-ipv4": ip,
                "/latest/meta-data/placement/availability-zone": REGION + "a",
                "/latest/user-data": '{"cell": "bootstrap"}'}
        for path, value in want.items():
            status, _, body = imds_request(self.sim, ip, "GET", path, auth)
            self.assertEqual((status, body.decode()), (200, value), path)
        status, _, body = imds_request(self.sim, ip, "GET", "/latest/meta-data/", auth)
        self.assertEqual(status, 200)
        self.assertIn("placement/", body.decode().splitlines())
        self.assertIn("instance-id", body.decode().splitlines())
        # the describe answer says what IMDS enforces
        opts = state_of(self.ec2, iid)["MetadataOptions"]
        self.assertEqual((opts["HttpTokens"], opts["HttpPutResponseHopLimit"]), ("required", 1))

    def test_token_rules(self):
        _, ip = self.launch()
        _, ip2 = self.launch()
        for ttl in ("0", "21601", "x", None):
            hdr = {} if ttl is None else {"X-aws-ec2-metadata-token-ttl-seconds": ttl}
            status, _, _ = imds_request(self.sim, ip, "PUT", "/latest/api/token", hdr)
            self.assertEqual(status, 400, f"ttl {ttl!r}")
        path = "/latest/meta-data/instance-id"
        # IMDSv1 (no token) is refused: HttpTokens is required by default
        self.assertEqual(imds_request(self.sim, ip, "GET", path)[0], 401)
        self.assertEqual(imds_request(self.sim, ip, "GET", path,
                                      {"X-aws-ec2-metadata-token": "forged"})[0], 401)
        # a token is its instance's: another instance cannot use it
        token, _ = imds_token(self.sim, ip)
        self.assertEqual(imds_request(self.sim, ip2, "GET", path,
                                      {"X-aws-ec2-metadata-token": token})[0], 401)
        # it expires with its TTL
        short, _ = imds_token(self.sim, ip, "1")
        self.assertEqual(imds_request(self.sim, ip, "GET", path,
                                      {"X-aws-ec2-metadata-token": short})[0], 200)
        time.sleep(1.2)
        self.assertEqual(imds_request(self.sim, ip, "GET", path,
                                      {"X-aws-ec2-metadata-token": short})[0], 401)
        # X-Forwarded-For: refused, for the token and for metadata
        status, _, _ = imds_request(self.sim, ip, "PUT", "/latest/api/token",
                                    {"X-aws-ec2-metadata-token-ttl-seconds": "60",
                                     "X-Forwarded-For": "203.0.113.9"})
        self.assertEqual(status, 403)
        self.assertEqual(imds_request(self.sim, ip, "GET", path,
                                      {"X-aws-ec2-metadata-token": token,
                                       "X-Forwarded-For": "203.0.113.9"})[0], 403)
        # no user-data: 404; unknown path: 404
        auth = {"X-aws-ec2-metadata-token": token}
        self.assertEqual(imds_request(self.sim, ip, "GET", "/latest/user-data", auth)[0], 404)
        self.assertEqual(imds_request(self.sim, ip, "GET", "/latest/meta-data/nope",
                                      auth)[0], 404)

    def test_imdsv1_served_when_tokens_optional(self):
        iid, ip = self.launch(MetadataOptions={"HttpTokens": "optional",
                                               "HttpPutResponseHopLimit": 3})
        status, _, body = imds_request(self.sim, ip, "GET", "/latest/meta-data/instance-id")
        self.assertEqual((status, body.decode()), (200, iid))
        opts = state_of(self.ec2, iid)["MetadataOptions"]
        self.assertEqual((opts["HttpTokens"], opts["HttpPutResponseHopLimit"]), ("optional", 3))
        with self.assertRaises(ClientError) as cm:
            run(self.ec2, MetadataOptions={"HttpPutResponseHopLimit": 65})
        self.assertEqual(cm.exception.response["Error"]["Code"], "InvalidParameterValue")

    def test_spot_interruption_notice_then_termination(self):
        iid, ip = self.launch(InstanceMarketOptions={"MarketType": "spot"})
        token, _ = imds_token(self.sim, ip)
        auth = {"X-aws-ec2-metadata-token": token}
        action = "/latest/meta-data/spot/instance-action"
        rebalance = "/latest/meta-data/events/recommendations/rebalance"
        self.assertEqual(imds_request(self.sim, ip, "GET", action, auth)[0], 404)
        self.assertEqual(imds_request(self.sim, ip, "GET", rebalance, auth)[0], 404)
        self.sim.admin("/_admin/rebalance", {"instance_id": iid})
        status, _, body = imds_request(self.sim, ip, "GET", rebalance, auth)
        self.assertEqual(status, 200)
        notice = json.loads(body)
        self.assertEqual(list(notice), ["noticeTime"])
        datetime.datetime.strptime(notice["noticeTime"], "%Y-%m-%dT%H:%M:%SZ")
        before = time.time()
        self.sim.admin("/_admin/interrupt", {"instance_id": iid, "action": "terminate",
                                             "in_seconds": 2})
        status, _, body = imds_request(self.sim, ip, "GET", action, auth)
        self.assertEqual(status, 200)
        notice = json.loads(body)
        self.assertEqual(sorted(notice), ["action", "time"])
        self.assertEqual(notice["action"], "terminate")
        at = datetime.datetime.strptime(notice["time"], "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        self.assertLessEqual(abs(at - (before + 2)), 2)
        self.assertEqual(state_of(self.ec2, iid)["State"]["Name"], "running")
        inst = wait_for(lambda: (lambda i: i if i["State"]["Name"] == "terminated" else None)(
            state_of(self.ec2, iid)), "the interrupted instance terminated")
        self.assertEqual(inst["StateReason"]["Code"], "Server.SpotInstanceTermination")
        # a stop notice is only a notice
        iid2, ip2 = self.launch(InstanceMarketOptions={"MarketType": "spot"})
        self.sim.admin("/_admin/interrupt", {"instance_id": iid2, "action": "stop",
                                             "in_seconds": 0})
        token2, _ = imds_token(self.sim, ip2)
        status, _, body = imds_request(self.sim, ip2, "GET", action,
                                       {"X-aws-ec2-metadata-token": token2})
        self.assertEqual((status, json.loads(body)["action"]), (200, "stop"))
        time.sleep(0.5)
        self.assertEqual(state_of(self.ec2, iid2)["State"]["Name"], "running")
        with self.assertRaises(urllib.error.HTTPError) as cm:
            self.sim.admin("/_admin/interrupt", {"instance_id": iid2, "action": "reboot"})
        self.assertEqual(cm.exception.code, 400)

    def test_token_answer_leaves_with_the_hop_limit_as_ttl(self):
        """The token answer's IP packets carry TTL = HttpPutResponseHopLimit, the other
        answers the usual 64: read off the loopback device in a network namespace of its
        own (needs unshare; skipped without it)."""
        if not shutil.which("unshare") or subprocess.run(
                ["unshare", "-rn", "true"], capture_output=True).returncode != 0:
            self.skipTest("unshare -rn is not available here")
        res = subprocess.run(["unshare", "-rn", PYTHON, os.path.abspath(__file__),
                              "--ttl-probe"], capture_output=True, timeout=WAIT * 2,
                             check=False)
        out = res.stdout.decode(errors="replace")
        self.assertEqual(res.returncode, 0, out + res.stderr.decode(errors="replace"))
        got = json.loads(out.strip().splitlines()[-1])
        self.assertEqual(got, {"token_ttls": [[1], [3]], "metadata_ttl": [64]})


def ttl_probe():
    """Run inside a new network namespace: for instances of hop limit 1 and 3, the IP TTLs
    of the packets carrying the token answer (and of one metadata answer), read from an
    AF_PACKET socket on lo. Prints one JSON line."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    sim = start_imds_sim()
    try:
        ec2 = sim.client()
        cap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
        cap.bind(("lo", 0))
        cap.settimeout(0.2)

        def ttls_of(marker):
            seen = set()
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                try:
                    frame, addr = cap.recvfrom(65536)
                except socket.timeout:
                    break
                if addr[2] == socket.PACKET_OUTGOING:
                    continue
                ip_hdr = frame[14:]
                ihl = (ip_hdr[0] & 15) * 4
                sport = struct.unpack("!H", ip_hdr[ihl:ihl + 2])[0]
                if sport == sim.imds_port and marker in ip_hdr:
                    seen.add(ip_hdr[8])
            return sorted(seen)

        out = {"token_ttls": []}
        for hop in (1, 3):
            iid = run(ec2, MetadataOptions={"HttpPutResponseHopLimit": hop})[
                "Instances"][0]["InstanceId"]
            ip = wait_for(lambda: state_of(ec2, iid).get("PrivateIpAddress"), "an address")
            while True:   # drain what came before
                try:
                    cap.recvfrom(65536)
                except socket.timeout:
                    break
            token, _ = imds_token(sim, ip)
            out["token_ttls"].append(ttls_of(token.encode()))
        imds_request(sim, ip, "GET", "/latest/meta-data/instance-id",
                     {"X-aws-ec2-metadata-token": token})
        out["metadata_ttl"] = ttls_of(iid.encode())
        print(json.dumps(out))
    finally:
        sim.stop()


def main():
    if sys.argv[1:] == ["--ttl-probe"]:
        ttl_probe()
        return 0
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    if len(sys.argv) > 1:
        def flat(s):
            for t in s:
                yield from flat(t) if isinstance(t, unittest.TestSuite) else [t]
        suite = unittest.TestSuite(t for t in flat(suite)
                                   if any(name in t.id() for name in sys.argv[1:]))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    failed = len(result.failures) + len(result.errors)
    passed = result.testsRun - failed - len(result.skipped)
    print(f"ec2sim: {passed} passed, {failed} failed")
    return 1 if failed or result.testsRun == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
