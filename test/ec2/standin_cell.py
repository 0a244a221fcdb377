#!/usr/bin/python3
"""A stand-in for `kiyot local-cell` in ec2sim's own tests: it boots nothing, but checks the
bootstrap document is JSON, gives the "cell" an address, records what it was given in the state
directory, and prints {"ip": ..., "instance_id": ...} like the real command.

	standin_cell.py launch --state-dir D --id ID --bootstrap FILE [--cpus N] [--memory BYTES]
	                       [--instance-type T] [--cluster-id X]
	standin_cell.py terminate --state-dir D --id ID
"""

import argparse
import fcntl
import json
import os
import sys


def _launch(args):
    with open(args.bootstrap, "rb") as f:
        raw = f.read(1 << 20)
    try:
        doc = json.loads(raw) if raw else None
    except ValueError as e:
        print(f"standin_cell: the bootstrap document is not JSON: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.state_dir, exist_ok=True)
    with open(os.path.join(args.state_dir, "lock"), "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        counter = os.path.join(args.state_dir, "next-host")
        n = int(open(counter, encoding="utf-8").read()) if os.path.exists(counter) else 2
        with open(counter, "w", encoding="utf-8") as f:
            f.write(str(n + 1))
    ip = f"10.98.{n // 250}.{n % 250 + 2}"
    record = {"id": args.id, "ip": ip, "cpus": args.cpus, "memory": args.memory,
              "instance_type": args.instance_type, "cluster_id": args.cluster_id,
              "bootstrap": doc}
    with open(os.path.join(args.state_dir, args.id + ".json"), "w", encoding="utf-8") as f:
        json.dump(record, f)
    print(json.dumps({"ip": ip, "instance_id": "cell-" + args.id}))
    return 0


def _terminate(args):
    path = os.path.join(args.state_dir, args.id + ".json")
    if os.path.exists(path):
        os.replace(path, path + ".terminated")
    return 0


def main():
    p = argparse.ArgumentParser(prog="standin_cell")
    p.add_argument("verb", choices=["launch", "terminate"])
    p.add_argument("--state-dir", required=True)
    p.add_argument("--id", required=True)
    p.add_argument("--bootstrap")
    p.add_argument("--cpus", type=int)
    p.add_argument("--memory", type=int)
    p.add_argument("--instance-type")
    p.add_argument("--cluster-id")
    args = p.parse_args()
    if args.verb == "launch":
        if not args.bootstrap:
            p.error("launch needs --bootstrap")
        return _launch(args)
    return _terminate(args)


if __name__ == "__main__":
    sys.exit(main())
