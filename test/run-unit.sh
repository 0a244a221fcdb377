#!/bin/sh
# Runs the cmocka unit-test binaries given, UNIT_JOBS at a time (default: one a CPU; twice
# that halves the time again, but several tests that bound a wait or count what ran beside
# them then fail now and then on a busy machine), and prints one total line. A binary's output
# is shown only when it fails; a passing one's is dropped.
jobs=${UNIT_JOBS:-$(nproc)}
out=$(mktemp -d /tmp/kiyot-unit.XXXXXX) || exit 2
trap 'rm -rf "$out"' EXIT
# each binary writes its output to out/NAME.log and, once done, its status to out/NAME.rc
for t in "$@"; do echo "$t"; done |
	xargs -P "$jobs" -I{} sh -c 'n=$(basename "$1"); "$1" >"$2/$n.log" 2>&1; echo $? >"$2/$n.rc"' \
		sh {} "$out"
pass=0
fail=0
for t in "$@"; do
	n=$(basename "$t")
	if [ "$(cat "$out/$n.rc" 2>/dev/null)" = 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		cat "$out/$n.log"
		echo "FAILED: $t (status $(cat "$out/$n.rc" 2>/dev/null || echo none))"
	fi
done
echo "unit test binaries: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
