#!/usr/bin/env python3
"""Writes bench/cost/spot-zones.json: the latest Linux/UNIX spot price of each instance type in
each availability zone of us-east-1, from one month file of the public dataset
https://github.com/ericpauley/aws-spot-price-history (prices/2022/05.tsv.zst, the only month
its repository history keeps; later months moved to Zenodo, DOI 10.5281/zenodo.14198917).

    zstd -dc 05.tsv.zst > 2022-05.tsv
    bench/cost/gen-spot-zones.py 2022-05.tsv > bench/cost/spot-zones.json

Lines are "<zone id>\\t<type>\\t<product>\\t<price>\\t<timestamp>", zones by their global id
(use1-az1...). The file holds the prices set between 2022-05-31 18:47 and 23:55 UTC: a type
whose price did not change then in a zone has no entry for that zone. Only types seen in two
zones or more are kept (one zone says nothing of the spread)."""

import collections
import json
import sys


def main(path):
    latest = {}
    stamps = []
    with open(path) as f:
        for line in f:
            zone, itype, product, price, stamp = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
            if not zone.startswith("use1-") or product != "Linux/UNIX":
                continue
            stamps.append(stamp)
            if (itype, zone) not in latest or stamp > latest[(itype, zone)][1]:
                latest[(itype, zone)] = (float(price), stamp)
    by_type = collections.defaultdict(dict)
    for (itype, zone), (price, _) in latest.items():
        by_type[itype][zone] = price
    out = {
        "source": "github.com/ericpauley/aws-spot-price-history prices/2022/05.tsv.zst, "
                  "Linux/UNIX, us-east-1, the latest price per type and zone",
        "from": min(stamps), "to": max(stamps),
        "types": {t: dict(sorted(z.items())) for t, z in sorted(by_type.items())
                  if len(z) >= 2},
    }
    json.dump(out, sys.stdout, indent=0, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
