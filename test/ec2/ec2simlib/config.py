"""Command-line settings of the simulator."""

import argparse
import os
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CATALOG = os.path.normpath(os.path.join(HERE, "..", "..", "..", "kiyot", "sizing", "data",
                                                "aws-instance-catalog.json"))
DEFAULT_KEY = "AKIAKIYOTSIMEXAMPLE0:kiyot-sim-secret-key"


def _bucket(text):
    """CAPACITY:RATE (tokens, tokens per second); "off" or 0:0 disables the bucket."""
    if text == "off":
        return (0.0, 0.0)
    cap, _, rate = text.partition(":")
    try:
        return (float(cap), float(rate or cap))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"'{text}' is not CAPACITY:RATE") from e


def _key(text):
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise argparse.ArgumentTypeError(f"'{text}' is not ACCESS_KEY:SECRET[:SESSION_TOKEN]")
    return parts[0], (parts[1], parts[2] if len(parts) == 3 else None)


def parser():
    p = argparse.ArgumentParser(
        prog="ec2sim", description="A local EC2 Query API endpoint (API 2016-11-15) whose "
        "instances boot as local cells. Prints one JSON line with its endpoint when ready.")
    a = p.add_argument
    a("--listen", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    a("--port", type=int, default=0, help="port (default 0: any free port)")
    a("--port-file", help="write the bound port to this file once listening")
    a("--region", default="us-east-1", help="the region served (default us-east-1)")
    a("--azs", help="comma-separated Availability Zones (default REGIONa,REGIONb,REGIONc)")
    a("--catalog", default=DEFAULT_CATALOG, help="instance catalog JSON")
    a("--key", type=_key, action="append", dest="keys", metavar="AK:SK[:TOKEN]",
      help=f"an accepted key pair, repeatable (default {DEFAULT_KEY})")
    a("--max-skew", type=float, default=900.0,
      help="largest accepted X-Amz-Date clock skew in seconds; 0 disables (default 900)")
    a("--subnet-id", default="subnet-0a1b2c3d4e5f60001")
    a("--vpc-id", default="vpc-0a1b2c3d4e5f60001")
    a("--security-group", default="sg-0a1b2c3d4e5f60001",
      help="group given to instances launched without SecurityGroupId")
    a("--cluster-tag", default="kiyot.elotl.co/cluster-id",
      help="tag whose value fills {cluster_id} in the boot command")
    a("--boot-cmd", help="command that boots an instance's cell and prints "
      "{\"ip\": ..., \"instance_id\": ...}; placeholders {id} {cpus} {memory} {memory_mib} "
      "{instance_type} {bootstrap} {cluster_id} {az} {market}. Without it instances get an "
      "address from --ip-cidr and boot nothing.")
    a("--terminate-cmd", help="command that tears an instance's cell down (same placeholders)")
    a("--work-dir", help="where user-data files for the boot command go (default: a new "
      "temporary directory)")
    a("--boot-delay", type=float, default=0.0, help="seconds before a boot starts (default 0)")
    a("--boot-timeout", type=float, default=300.0, help="boot/terminate command time limit")
    a("--boot-parallel", type=int, default=4, help="boot commands run at once (default 4)")
    a("--terminate-delay", type=float, default=0.0,
      help="seconds an instance stays shutting-down (default 0)")
    a("--terminated-ttl", type=float, default=600.0,
      help="seconds terminated instances stay visible (default 600)")
    a("--ip-cidr", default="10.99.0.0/16", help="addresses for instances without a boot "
      "command (default 10.99.0.0/16)")
    a("--bucket-mutating", type=_bucket, default=(20.0, 5.0), metavar="CAP:RATE",
      help="token bucket of RunInstances/TerminateInstances/CreateTags (default 20:5; off)")
    a("--bucket-describe", type=_bucket, default=(50.0, 20.0), metavar="CAP:RATE",
      help="token bucket of the other actions (default 50:20; off)")
    a("--ice", action="append", default=[], metavar="TYPE[:N]",
      help="RunInstances of TYPE (a glob) answers InsufficientInstanceCapacity, N times or "
      "always; repeatable")
    a("--fault", action="append", default=[], metavar="ACTION:CODE[:N]",
      help="calls of ACTION (or *) answer error CODE, N times or always; repeatable")
    a("--throttle-for", type=float, default=0.0,
      help="answer RequestLimitExceeded to everything for this many seconds after start")
    a("--consistency-delay", type=float, default=0.0, help="seconds a new instance id stays "
      "unknown to DescribeInstances/CreateTags/TerminateInstances after RunInstances")
    a("--imds-listen", metavar="ADDR:PORT", help="also serve the instance metadata service "
      "(IMDSv2) there, e.g. 169.254.169.254:80, answering for the instance whose private IP "
      "is the request's source address")
    a("--keep-cells-on-exit", action="store_true",
      help="do not run the terminate command for live cells on exit")
    a("--pricing-page-size", type=int, default=20, metavar="N",
      help="most products a Price List GetProducts page holds (default 20)")
    a("--verbose", "-v", action="store_true", help="log every call on stderr")
    return p


def parse(argv):
    cfg = parser().parse_args(argv)
    cfg.keys = dict(cfg.keys or [_key(DEFAULT_KEY)])
    cfg.azs = cfg.azs.split(",") if cfg.azs else [cfg.region + z for z in "abc"]
    if cfg.work_dir is None:
        cfg.work_dir = tempfile.mkdtemp(prefix="ec2sim-")
    if cfg.terminate_cmd and not cfg.boot_cmd:
        parser().error("--terminate-cmd needs --boot-cmd")
    return cfg
