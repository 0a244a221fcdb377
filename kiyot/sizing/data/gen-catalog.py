#!/usr/bin/env python3
"""Writes kiyot/sizing/data/aws-instance-catalog.json from public facts (stdlib only).

    python3 kiyot/sizing/data/gen-catalog.py --types instance-types.md \
        --prices zz_generated.pricing_aws.go --spot generated_instances_data.txt \
        --base-2020 catalog-2020.json > kiyot/sizing/data/aws-instance-catalog.json

The inputs, their origin and what is estimated from them are in README.md next to this file.
Deterministic: the same inputs give the same bytes.

Each entry: instanceType, cpu (vCPUs), memory (GiB), price (on-demand Linux USD/h), spotPrice,
arch (["x86_64"] or ["arm64"]), and only where they differ from the loader's defaults: gpu (0),
burstable (false), baseline (= cpu), generation ("current").
"""
import argparse
import json
import re
import statistics
import sys

# Burstable baseline per vCPU, by size, from EC2's table of burstable instances' baselines
# (t3, t3a and t4g share one table; t2 has its own). A type not listed is not burstable.
BASELINE_T3 = {"nano": 0.05, "micro": 0.10, "small": 0.20, "medium": 0.20, "large": 0.30,
               "xlarge": 0.40, "2xlarge": 0.40}
BASELINE_T2 = {"nano": 0.05, "micro": 0.10, "small": 0.20, "medium": 0.20, "large": 0.30,
               "xlarge": 0.225, "2xlarge": 0.16875}
BURSTABLE = {"t2": BASELINE_T2, "t3": BASELINE_T3, "t3a": BASELINE_T3, "t4g": BASELINE_T3}
# Flex types (m7i-flex, c7i-flex, ...) sustain 40% of their vCPUs and burst above it without
# credits sizing could price: they are listed as burstable at that baseline, so sizing puts
# on them only what they sustain.
FLEX_BASELINE = 0.40
# Families EC2 lists as previous generation: left out, as the 2020 file had none (t1.micro's
# spot price would draw spot pods onto a type without ENA or NVMe).
PREVIOUS = {"t1", "m1", "m2", "m3", "c1", "c3", "cr1", "r3", "i2", "g2", "hs1", "cc2"}
# Accelerators that are not nvidia.com/gpu devices: left out (sizing has no resource for them).
NOT_CELLS = re.compile(r"^(inf|trn|dl|vt|f\d|u-|u7i|mac)")


def parse_types(path):
    """instance-types.md (karpenter's generated reference): name -> labels."""
    types, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^### `([a-z0-9.-]+)`", line)
            if m:
                cur = types.setdefault(m.group(1), {})
                continue
            if line.startswith("#### Resources"):
                cur = None
                continue
            m = re.match(r"^\s*\|([a-z0-9./-]+)\|([^|]*)\|", line)
            if m and cur is not None:
                cur[m.group(1)] = m.group(2)
    return types


def parse_prices(path):
    """zz_generated.pricing_aws.go: region -> {type: on-demand USD/h}."""
    prices, region = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r'^\s*"([a-z]+-[a-z]+-\d+)": \{', line)
            if m:
                region = prices.setdefault(m.group(1), {})
                continue
            if region is None:
                continue
            for name, price in re.findall(r'"([a-z0-9.-]+)": ([0-9.]+)', line):
                region[name] = float(price)
    return prices


def parse_spot(path):
    """generated_instances_data.txt: type -> (on-demand, spot) in us-east-1 on its date."""
    spot = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            name = re.search(r"Instance type: ([a-z0-9.-]+),", line)
            od = re.search(r"Linux OD cost in us-east-1: ([0-9.]+)", line)
            sp = re.search(r"Linux Spot cost in us-east-1: ([0-9.]+)", line)
            if name and od and sp and float(od.group(1)) > 0 and float(sp.group(1)) > 0:
                spot[name.group(1)] = (float(od.group(1)), float(sp.group(1)))
    return spot


def region_factors(base):
    """Per region of the 2020 catalog: the median of its on-demand price over us-east-1's."""
    us = {t["instanceType"]: t["price"] for t in base["us-east-1"]}
    out = {}
    for region, types in base.items():
        r = [t["price"] / us[t["instanceType"]] for t in types
             if us.get(t["instanceType"], 0) > 0 and t["price"] > 0]
        out[region] = statistics.median(r) if r else 1.0
    return out


def spot_ratios(spot):
    """Spot over on-demand, per type, where the snapshot has spot below on-demand; the
    family's median, then every type's median, for the rest."""
    per_type = {n: s / o for n, (o, s) in spot.items() if s < o}
    fam = {}
    for n, r in per_type.items():
        fam.setdefault(n.split(".")[0], []).append(r)
    fam = {f: statistics.median(v) for f, v in fam.items()}
    return per_type, fam, statistics.median(per_type.values())


def entry(name, labels, price, spot):
    fam, size = name.split(".", 1)
    cpu = int(labels["karpenter.k8s.aws/instance-cpu"])
    mem_mib = int(labels["karpenter.k8s.aws/instance-memory"])
    arch = labels.get("kubernetes.io/arch", "amd64")
    e = {"instanceType": name, "cpu": cpu, "memory": round(mem_mib / 1024.0, 3),
         "price": round(price, 6), "spotPrice": round(spot, 6),
         "arch": ["arm64" if arch == "arm64" else "x86_64"]}
    gpus = int(labels.get("karpenter.k8s.aws/instance-gpu-count", "0"))
    if gpus:
        e["gpu"] = gpus
    base = None
    if fam in BURSTABLE and size in BURSTABLE[fam]:
        base = BURSTABLE[fam][size] * cpu
    elif labels.get("karpenter.k8s.aws/instance-capability-flex") == "true":
        base = FLEX_BASELINE * cpu
    if base is not None:
        e["burstable"] = True
        e["baseline"] = round(base, 4)
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", required=True)
    ap.add_argument("--prices", required=True)
    ap.add_argument("--spot", required=True)
    ap.add_argument("--base-2020", required=True)
    a = ap.parse_args()

    types = parse_types(a.types)
    us_prices = parse_prices(a.prices)["us-east-1"]
    per_type, per_fam, overall = spot_ratios(parse_spot(a.spot))
    with open(a.base_2020, encoding="utf-8") as f:
        factors = region_factors(json.load(f))

    rows, skipped = [], 0
    for name in sorted(types):
        price = us_prices.get(name)
        if not price or NOT_CELLS.match(name) or name.split(".")[0] in PREVIOUS:
            skipped += 1
            continue
        ratio = per_type.get(name, per_fam.get(name.split(".")[0], overall))
        rows.append(entry(name, types[name], price, price * ratio))
    out = {"us-east-1": rows}
    # the other regions: us-east-1's types at its prices times the region's 2020 factor
    for region in sorted(factors):
        if region != "us-east-1":
            out[region] = {"from": "us-east-1", "priceFactor": round(factors[region], 4)}
    text = json.dumps(out, sort_keys=True, separators=(",", ":"))
    # one type or region a line, so a diff shows what changed
    text = text.replace('},{"', '},\n{"').replace(':[{"', ':[\n{"').replace('},"', '},\n"')
    text = text.replace('}],"', '}],\n"')
    sys.stdout.write(text + "\n")
    print("%d types in us-east-1, %d regions derived from it; %d listed types left out (no "
          "us-east-1 price, not a cell type, or previous generation)" % (len(rows), len(out) - 1, skipped),
          file=sys.stderr)

main()
