#!/usr/bin/env python3
"""Writes kiyot/sizing/data/aws-spot-advisor.json from a copy of EC2's Spot Instance Advisor data
(stdlib only).

    python3 kiyot/sizing/data/gen-spot-advisor.py --advisor spot-advisor-data.json \
        --date 2025-06-28 --catalog kiyot/sizing/data/aws-instance-catalog.json \
        > kiyot/sizing/data/aws-spot-advisor.json

The input's origin and date are in README.md next to this file. Deterministic: the same inputs
give the same bytes.

The advisor data holds, per region and operating system, per instance type, "r": the index of
its interruption-frequency range in "ranges" (<5%, 5-10%, 10-15%, 15-20%, >20% a month) and
"s": its spot price's savings over on-demand in whole percent, averaged over the last 30 days
and over the region's availability zones. The table written keeps, for every region of the
catalog and every Linux type the catalog lists (us-east-1's list: the derived regions list the
same types), [band, savings]; [band] alone where the savings are not a usable discount (outside
0 to 99%: the data has a few negative ones). A type the advisor does not list in a region is
left out there: its band is unknown.
"""
import argparse
import json
import re
import sys

# The advisor's ranges, in index order: the table's band is that index (catalog.h).
LABELS = ["<5%", "5-10%", "10-15%", "15-20%", ">20%"]


def catalog_regions(path):
    """The catalog's regions and the instance types it lists (every region lists the same)."""
    with open(path, encoding="utf-8") as f:
        cat = json.load(f)
    types = set()
    for v in cat.values():
        if isinstance(v, list):
            types.update(t["instanceType"] for t in v)
    return sorted(cat), types


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--advisor", required=True)
    ap.add_argument("--date", required=True, help="the date of the advisor copy, YYYY-MM-DD")
    ap.add_argument("--catalog", required=True)
    a = ap.parse_args()
    if not re.match(r"^\d{4}-\d{2}-\d{2}$", a.date):
        sys.exit("--date must be YYYY-MM-DD")

    with open(a.advisor, encoding="utf-8") as f:
        adv = json.load(f)
    labels = [r["label"] for r in sorted(adv["ranges"], key=lambda r: r["index"])]
    if labels != LABELS:
        sys.exit("the advisor's ranges are %s, not %s: the bands would mean something else"
                 % (labels, LABELS))
    regions, types = catalog_regions(a.catalog)

    out, missing, no_savings = {}, [], 0
    for region in regions:
        linux = adv["spot_advisor"].get(region, {}).get("Linux")
        if not linux:
            missing.append(region)
            continue
        rows = {}
        for name in sorted(types):
            e = linux.get(name)
            if e is None:
                continue
            band, saving = int(e["r"]), e.get("s")
            if not 0 <= band < len(LABELS):
                continue
            if isinstance(saving, int) and 0 <= saving <= 99:
                rows[name] = [band, saving]
            else:
                rows[name] = [band]
                no_savings += 1
        out[region] = rows
    doc = {"source": "EC2 Spot Instance Advisor", "date": a.date, "regions": out}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    # one region a line, so a diff shows which region changed
    text = text.replace(']},"', ']},\n"').replace('"regions":{"', '"regions":{\n"')
    sys.stdout.write(text + "\n")
    print("%d regions, %d type entries (%d without usable savings); not in the advisor data: %s"
          % (len(out), sum(len(v) for v in out.values()), no_savings,
             ", ".join(missing) or "none"), file=sys.stderr)


main()
