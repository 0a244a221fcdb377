#!/bin/bash
# What `make test` runs once deps are installed: every part of the suite, those that can at
# the same time, then a table of each part's wall time and result. Any part failing fails the
# run (exit 1); all parts run anyway, so one failure does not hide another.
#
#   LOAD_TESTS="..." test/suite.sh BUILD JOBS     (make test names the load pass's tests)
#
# The order on the clock:
#   deps         deploy/install-deps.sh
#   build-agent  cell-agent and cell-shim first, then
#   cell-image   the EC2 cell image, built in the background from here on: its root tree (the
#                packages: the long step) and the agent and the shim put in (both cached in
#                BUILD/cell-image by their inputs' hash; started at once, beside the build, the
#                tree slowed the compiles more than it gained)
#   build        what the integration suite runs: kiyot, cell-agent, netdelay
#   release      the previous release's kiyot and agent for the upgrade tests, built in the
#                background from the repository's history (test/release/build.sh; kept in
#                BUILD/release), which test_upgrade waits for
#   then at once unit (the unit binaries and the benchmarks' programs built at a lower
#                priority, then the unit binaries run two at a time),
#                fuzz-check (the fuzz targets built likewise, then each replays its corpus),
#                endpoints (ec2sign, ec2sim, kubeapi against real clients) and the integration
#                suite in ITEST_SHARDS shards (test/integration/harness.py), whose shard 0 also
#                boots the cell image in a VM (QEMU TCG) once it is built
#   load         the lifecycle and crash tests again on a busy node (one shard: it loads the
#                CPUs itself), as soon as the integration suite ended, beside the parts above
#                still running
# The integration runs take the machine's integration lock once, for both (itest-lock: the
# time waited for it, when another run held it).
# A part that runs beside others writes to BUILD/test-logs/PART.log, shown when it failed.
set -u
build=${1:-build}
jobs=${2:-2}
shards=${ITEST_SHARDS:-3}
load_tests=${LOAD_TESTS:?make test names them (test/module.mk)}
mkdir -p "$build/test-logs"
abs_build=$(cd "$build" && pwd)
logs=$abs_build/test-logs # absolute: a part may run in another directory
rm -f "$logs"/*.end "$logs"/*.rc # an earlier run's
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
	# its own end time (finish may be called long after it ended) and status, for finish and
	# for whoever waits for it (the VM boot waits for cell-image.rc)
	(
		"$@"
		rc=$?
		now_ms >"$logs/$name.end"
		echo $rc >"$logs/$name.rc.tmp" && mv "$logs/$name.rc.tmp" "$logs/$name.rc"
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
root, took = v.build_root()
print("root tree %s: %s" % (root, "built in %.0f s" % took if took is not None else "cached"))
image, took = v.build_image()
print("cell image %s: %s" % (image, "built in %.0f s" % took if took is not None else "cached"))'
}

# itest_lock: takes the integration suite's lock for the runs below (run.sh takes it itself when
# this fails: another run held it 20 minutes)
itest_lock() {
	exec 9>/run/lock/kiyot-itest.lock
	if flock -w 1200 9; then
		export KIYOT_ITEST_LOCKED=1
	else
		echo "another run held /run/lock/kiyot-itest.lock 20 minutes: each run takes it itself"
	fi
}

# the unit binaries and the fuzz targets are built at a lower priority than the integration
# suite and the cell image that run meanwhile (those are the longest path)
unit() { nice -n 10 $m -j"$jobs" unit-bins bench-bins && $m unit; }
fuzz_check() { nice -n 10 $m -j"$jobs" fuzz-build && $m fuzz-check; }

part deps deploy/install-deps.sh
if part build-agent $m -j"$jobs" "$build/cell-agent" "$build/cell-shim"; then
	bg cell-image cell_image
else
	echo 1 >"$logs/cell-image.rc" # no image: the VM boot does not wait for one
fi
if part build $m -j"$jobs" all "$build/test-tools/netdelay"; then
	bg release nice -n 10 test/release/build.sh "$build"
	bg unit unit
	bg fuzz-check fuzz_check
	bg endpoints endpoints
	part itest-lock itest_lock
	part integration env KIYOT_ITEST_SHARDS="$shards" KIYOT_BUILD="$abs_build" \
		KIYOT_ITEST_VM=1 KIYOT_ITEST_VM_READY="$logs/cell-image.rc" test/integration/run.sh
	# the busy node's pass right after, beside whatever of the others still runs (a busy node
	# is what it is about)
	echo "integration on a busy node: $load_tests"
	# shellcheck disable=SC2086 # the words are test filters
	part load env KIYOT_ITEST_LOAD=1 KIYOT_BUILD="$abs_build" test/integration/run.sh $load_tests
	finish release
	finish unit
	finish fuzz-check
	finish endpoints
fi
[ -n "${bg_pid[cell-image]:-}" ] && finish cell-image

echo "==== make test: wall time per part"
printf '%s\n' "${summary[@]}"
printf '%-12s %5s s  %s\n' total "$(($(now_ms) / 1000))" "$([ $failed = 0 ] && echo ok || echo FAILED)"
exit $failed
