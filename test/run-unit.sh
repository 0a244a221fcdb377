#!/bin/sh
# Runs each cmocka unit-test binary and prints one total line.
pass=0
fail=0
for t in "$@"; do
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
echo "unit test binaries: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
