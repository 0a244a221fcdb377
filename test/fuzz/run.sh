#!/bin/sh
# Runs fuzz targets, each for a bounded time over its seed corpus, and prints one line of
# figures per target.
#   test/fuzz/run.sh FUZZ_DIR SECONDS NAME...
# SECONDS 0 replays each corpus (the seeds and what earlier runs kept) without new inputs: what
# `make test` runs, in seconds; fuzzing for new inputs is `make fuzz`'s.
# FUZZ_DIR holds the binaries (fuzz_<name>); inputs found are kept in FUZZ_DIR/corpus/<name>,
# inputs that crash in FUZZ_DIR/artifacts/, each run's output in FUZZ_DIR/<name>.log.
# FUZZ_FLAGS adds libFuzzer options. Exits non-zero when a target finds a crash, and then
# prints the input that did it and the command that runs it again.
cd "$(dirname "$0")/../.." || exit 2
dir=$1
seconds=$2
shift 2
status=0
passed=0
failed=0
for name in "$@"; do
	bin=$dir/fuzz_$name
	log=$dir/$name.log
	mkdir -p "$dir/corpus/$name" "$dir/artifacts"
	if [ "$seconds" = 0 ]; then
		set -- -runs=0
		what="its corpus"
	else
		set -- -max_total_time="$seconds"
		what="$seconds s"
	fi
	set -- "$@" -print_final_stats=1 -artifact_prefix="$dir/artifacts/$name-"
	[ -f "test/fuzz/$name.dict" ] && set -- "$@" -dict="test/fuzz/$name.dict"
	echo "  FUZZ $name over $what (log: $log)"
	# shellcheck disable=SC2086 # FUZZ_FLAGS is a list of options
	if "$bin" "$@" $FUZZ_FLAGS "$dir/corpus/$name" "test/fuzz/corpus/$name" >"$log" 2>&1; then
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
		last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
		cov=$(echo "$last" | sed -n 's/.*cov: \([0-9]*\).*/\1/p')
		ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
		corp=$(echo "$last" | sed -n 's/.* corp: \([0-9]*\).*/\1/p')
		echo "  fuzz $name: $execs runs ($speed/s), coverage $cov edges, $ft features," \
			"corpus $corp inputs, no crash"
		passed=$((passed + 1))
	else
		status=1
		failed=$((failed + 1))
		echo "  fuzz $name: FAILED; the end of $log:"
		tail -n 40 "$log"
		unit=$(sed -n 's/.*Test unit written to //p' "$log" | tail -n 1)
		if [ -n "$unit" ]; then
			echo "  fuzz $name: the input is $unit; run it again with: $bin $unit"
		else
			echo "  fuzz $name: no input was written (see $log)"
		fi
	fi
done
echo "fuzz: $passed passed, $failed failed"
exit $status
