#!/bin/sh
# Line coverage of the unit tests, per directory and per part: run by `make coverage` after the
# test binaries (built with --coverage under BUILD) have run. gcovr reads the .gcda counters
# under BUILD/obj; the per-file table goes to BUILD/coverage.txt, the per-directory one to
# standard output, then each part (cell-agent/, common/, kiyot/) with the three files that leave
# the most lines untested. A part below its floor fails the script, named with what to do.
# Usage: test/coverage.sh BUILD
# COVERAGE_FLOORS: each part's least line coverage in percent, "part=N ..." (the default below;
# "" checks none).
set -e
build=${1:?usage: test/coverage.sh BUILD}
floors=${COVERAGE_FLOORS-"cell-agent=80 common=85 kiyot=85"}
cd "$(dirname "$0")/.."
command -v gcovr >/dev/null 2>&1 || {
	echo "coverage: gcovr not found (deploy/install-deps.sh installs it)" >&2
	exit 1
}
# only the project's sources: not the generated protobuf code, not the tests themselves
gcovr --root . --object-directory "$build/obj" -j 2 \
	--filter 'common/' --filter 'kiyot/' --filter 'cell-agent/' \
	--txt "$build/coverage.txt" --json-summary "$build/coverage.json" "$build/obj"
status=0
python3 - "$build/coverage.json" "$floors" <<'EOF' || status=$?
import json, os, sys

files = json.load(open(sys.argv[1]))["files"]
floors = dict(f.split("=", 1) for f in sys.argv[2].split())
dirs, parts = {}, {}
for f in files:
    name = f["filename"]
    counts = (f["line_covered"], f["line_total"])
    for table, key in ((dirs, os.path.dirname(name) + "/"), (parts, name.split("/")[0] + "/")):
        covered, total = table.get(key, (0, 0))
        table[key] = (covered + counts[0], total + counts[1])


def percent(covered, total):
    return 100.0 * covered / total if total else 100.0


def row(name, covered, total, more=""):
    print(f"{name:28} {covered:7} {total:7} {percent(covered, total):6.1f}%{more}")


print(f"{'directory':28} {'covered':>7} {'lines':>7} {'cover':>7}")
for d in sorted(dirs):
    row(d, *dirs[d])
print(f"{'part':28} {'covered':>7} {'lines':>7} {'cover':>7}  most lines untested")
low = []
for p in sorted(parts):
    untested = sorted((f for f in files if f["filename"].startswith(p)),
                      key=lambda f: f["line_covered"] - f["line_total"])[:3]
    row(p + " (all)", *parts[p], "  " + ", ".join(
        f"{os.path.basename(f['filename'])} {f['line_total'] - f['line_covered']}"
        for f in untested))
    floor = float(floors.get(p.rstrip("/"), 0))
    if percent(*parts[p]) < floor:
        low.append(f"{p} is at {percent(*parts[p]):.1f}%, below its floor of {floor:g}%")
for m in low:
    print(f"coverage: {m}: test the files that leave the most lines untested (per file in "
          f"{os.path.dirname(sys.argv[1])}/coverage.txt), or lower its floor in "
          f"test/coverage.sh with the reason", file=sys.stderr)
sys.exit(1 if low else 0)
EOF
echo "per file: $build/coverage.txt"
exit $status
