#!/bin/sh
# Line coverage of the unit tests, per directory and per part: run by `make coverage` after the
# test binaries (built with --coverage under BUILD) have run. gcovr reads the .gcda counters
# under BUILD/obj; the per-file table goes to BUILD/coverage.txt, the per-directory one to
# standard output. Usage: test/coverage.sh BUILD
set -e
build=${1:?usage: test/coverage.sh BUILD}
cd "$(dirname "$0")/.."
command -v gcovr >/dev/null 2>&1 || {
	echo "coverage: gcovr not found (deploy/install-deps.sh installs it)" >&2
	exit 1
}
# only the project's sources: not the generated protobuf code, not the tests themselves
gcovr --root . --object-directory "$build/obj" -j 2 \
	--filter 'common/' --filter 'kiyot/' --filter 'cell-agent/' \
	--txt "$build/coverage.txt" --json-summary "$build/coverage.json" "$build/obj"
python3 - "$build/coverage.json" <<'EOF'
import json, os, sys

files = json.load(open(sys.argv[1]))["files"]
dirs, parts = {}, {}
for f in files:
    name = f["filename"]
    counts = (f["line_covered"], f["line_total"])
    for table, key in ((dirs, os.path.dirname(name) + "/"), (parts, name.split("/")[0] + "/")):
        covered, total = table.get(key, (0, 0))
        table[key] = (covered + counts[0], total + counts[1])


def row(name, covered, total):
    percent = 100.0 * covered / total if total else 100.0
    print(f"{name:28} {covered:7} {total:7} {percent:6.1f}%")


print(f"{'directory':28} {'covered':>7} {'lines':>7} {'cover':>7}")
for d in sorted(dirs):
    row(d, *dirs[d])
print(f"{'part':28} {'covered':>7} {'lines':>7} {'cover':>7}")
for p in sorted(parts):
    row(p + " (all)", *parts[p])
EOF
echo "per file: $build/coverage.txt"
