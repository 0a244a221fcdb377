#!/bin/bash
# What `make test` runs once deps are installed: every part of the suite, those that can at
# the same time, then a table of each part's wall time and result. Any part failing fails the
# run (exit 1); all parts run anyway, so one failure does not hide another.
#
#   test/suite.sh BUILD JOBS
#
# The order on the clock:
#   deps         deploy/install-deps.sh
#   build-agent  cell-agent and cell-shim first, then
#   cell-image   the EC2 cell image, built in the background from here on (it needs the agent
#                and the shim; cached in BUILD/cell-image by its inputs' hash)
#   build        kiyot, the unit binaries, the fuzz targets, netdelay
#   then at once unit (binaries two at a time), fuzz-check (every target replays its corpus),
#                endpoints (ec2sign, ec2sim, kubeapi against real clients) and the integration
#                suite in ITEST_SHARDS shards (test/integration/harness.py)
#   load         the lifecycle and crash tests again on a busy node (one shard: it loads the
#                CPUs itself)
#   test-vm      once the image is built: its boot in a VM (QEMU TCG)
# A part that runs beside others writes to BUILD/test-logs/PART.log, shown when it failed.
set -u
build=${1:-build}
jobs=${2:-2}
shards=${ITEST_SHARDS:-2}
load_tests=${LOAD_TESTS:-Lifecycle CrashStarts}
logs=$build/test-logs
mkdir -p "$logs"
abs_build=$(cd "$build" && pwd)
m="make --no-print-directory BUILD=$build"
t_start=$(date +%s%N)
summary=()
failed=0

now_ms() { echo $((($(date +%s%N) - t_start) / 1000000)); }

# record NAME START_MS RC [END_MS]: one row of the table at the end
record() {
	local secs
	secs=$(awk -v a="$2" -v b="${4:-$(now_ms)}" 'BEGIN { printf "%.0f", (b - a) / 1000 }')
	if [ "$3" -eq 0 ]; then
		summary+=("$(printf '%-12s %5s s  ok' "$1" "$secs")")
	else
		summary+=("$(printf '%-12s %5s s  FAILED (exit %d)' "$1" "$secs" "$3")")
		failed=1
	fi
}

# part NAME CMD...: runs CMD in the foreground, its output on the terminal
part() {
	local name=$1 s rc
	shift
	echo "==== $name"
	s=$(now_ms)
	"$@"
	rc=$?
	record "$name" "$s" "$rc"
	return "$rc"
}

# bg NAME CMD...: runs CMD in the background, its output to logs/NAME.log; finish NAME waits
declare -A bg_pid bg_start
bg() {
	local name=$1
	shift
	echo "==== $name (in the background: $logs/$name.log)"
	bg_start[$name]=$(now_ms)
	# its own end time: finish may be called long after it ended
	(
		"$@"
		rc=$?
		now_ms >"$logs/$name.end"
		exit $rc
	) >"$logs/$name.log" 2>&1 &
	bg_pid[$name]=$!
}
finish() {
	local name=$1 rc
	wait "${bg_pid[$name]}"
	rc=$?
	record "$name" "${bg_start[$name]}" "$rc" "$(cat "$logs/$name.end" 2>/dev/null || now_ms)"
	if [ "$rc" -ne 0 ]; then
		echo "==== $name FAILED (exit $rc); its output:"
		cat "$logs/$name.log"
	else
		echo "==== $name: $(grep -E 'passed|failed|replayed|cell image' "$logs/$name.log" | tail -3 |
			tr '\n' ' ')"
	fi
	return "$rc"
}

endpoints() {
	local rc=0
	BUILD=$build test/ec2sign/run.sh || rc=1
	test/ec2/run.sh || rc=1
	test/kubeapi/run.sh || rc=1
	return $rc
}

cell_image() {
	cd test/integration &&
		KIYOT_BUILD=$abs_build /usr/bin/python3 -c 'import test_ec2_vm as v
image, took = v.build_image()
print("cell image %s: %s" % (image, "built in %.0f s" % took if took is not None else "cached"))'
}

part deps deploy/install-deps.sh
if part build-agent $m -j"$jobs" "$build/cell-agent" "$build/cell-shim"; then
	bg cell-image cell_image
	image=1
else
	image=0
fi
if part build $m -j"$jobs" all unit-bins fuzz-build "$build/test-tools/netdelay"; then
	bg unit $m unit
	bg fuzz-check $m fuzz-check
	bg endpoints endpoints
	part integration env KIYOT_ITEST_SHARDS="$shards" KIYOT_BUILD="$abs_build" \
		test/integration/run.sh
	finish unit
	finish fuzz-check
	finish endpoints
	echo "integration on a busy node: $load_tests"
	# shellcheck disable=SC2086 # the words are test filters
	part load env KIYOT_ITEST_LOAD=1 KIYOT_BUILD="$abs_build" test/integration/run.sh $load_tests
	if [ "$image" = 1 ] && finish cell-image; then
		part test-vm env KIYOT_ITEST_VM=1 KIYOT_BUILD="$abs_build" \
			test/integration/run.sh Ec2VmTest
	fi
elif [ "$image" = 1 ]; then
	finish cell-image
fi

echo "==== make test: wall time per part"
printf '%s\n' "${summary[@]}"
printf '%-12s %5s s  %s\n' total "$(($(now_ms) / 1000))" "$([ $failed = 0 ] && echo ok || echo FAILED)"
exit $failed
