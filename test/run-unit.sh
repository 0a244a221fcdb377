#!/bin/sh
# Runs the cmocka unit-test binaries given, UNIT_JOBS at a time (default: one a CPU; twice
# that halves the time again, but several tests that bound a wait or count what ran beside
# them then fail now and then on a busy machine), the slowest known first so that the last
# to finish is not a long one started late, and prints the slowest few and one total line. A
# binary's output is shown only when it fails; a passing one's is dropped.
jobs=${UNIT_JOBS:-$(nproc)}
out=$(mktemp -d /tmp/kiyot-unit.XXXXXX) || exit 2
trap 'rm -rf "$out"' EXIT
# the binaries that took over 5 s, four at a time on 2 cores, slowest first (for the order only)
slow="test_provider_local test_shipvol test_cri_sandbox test_ec2 test_cells test_supervisor
test_feed test_pull_limits test_cri_container test_stream test_provider_ec2 test_cri_stats"
for t in "$@"; do
	n=$(basename "$t")
	i=0
	rank=99
	for m in $slow; do
		i=$((i + 1))
		[ "$m" = "$n" ] && rank=$i
	done
	echo "$rank $t"
done | sort -s -n -k1,1 | cut -d' ' -f2- >"$out/order"
# each binary writes its output to out/NAME.log and, once done, its status to out/NAME.rc
# and its wall time in ms to out/NAME.ms
xargs -P "$jobs" -I{} sh -c 'n=$(basename "$1"); s=$(date +%s%N); "$1" >"$2/$n.log" 2>&1
	echo $? >"$2/$n.rc"; echo $((($(date +%s%N) - s) / 1000000)) >"$2/$n.ms"' \
	sh {} "$out" <"$out/order"
pass=0
fail=0
for t in "$@"; do
	n=$(basename "$t")
	echo "$(cat "$out/$n.ms" 2>/dev/null || echo 0) $n" >>"$out/times"
	if [ "$(cat "$out/$n.rc" 2>/dev/null)" = 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		cat "$out/$n.log"
		echo "FAILED: $t (status $(cat "$out/$n.rc" 2>/dev/null || echo none))"
	fi
done
echo "slowest: $(sort -rn "$out/times" | head -6 | awk '{ printf "%s%s %.1f s", (NR > 1 ? ", " : ""), $2, $1 / 1000 }')"
echo "unit test binaries: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
