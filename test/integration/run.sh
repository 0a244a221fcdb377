#!/bin/sh
# Kiyot's integration tests: real kiyot and cell-agent (from $KIYOT_BUILD, default build/),
# Debian's docker-registry and crun, images built by test/images/build.py, driven through
# CRI v1 by an independent Python client. Needs root.
#
#   test/integration/run.sh                 every test
#   test/integration/run.sh lifecycle Logs  only tests whose id contains one of the words
#
# KIYOT_ITEST_KEEP=1 keeps the run's work directory (/tmp/kiyot-itest-*) for inspection;
# KIYOT_ITEST_LOGS=DIR copies kiyot's and the registry's logs there.
# KIYOT_ITEST_SHARDS=N runs the tests in N shards at once, each with its own bridge, network,
# registry and kiyot (harness.py); the lock below is held for all of them.
# Prints "integration: N passed, N failed" last; exits non-zero when anything failed.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3

if [ "$(id -u)" != 0 ]; then
	echo "integration: needs root (network namespaces, cgroups, a bridge)" >&2
	echo "integration: 0 passed, 1 failed"
	exit 1
fi
for m in grpc google.protobuf; do
	if ! "$py" -c "import $m" 2>/dev/null; then
		echo "integration: $py cannot import $m: run deploy/install-deps.sh" >&2
		echo "integration: 0 passed, 1 failed"
		exit 1
	fi
done

# One run at a time on a machine: the bridge and the registry address are fixed. make test's
# suite takes the lock once for all its runs and hands it down on fd 9 (KIYOT_ITEST_LOCKED=1),
# so that no other run comes between them.
if [ "${KIYOT_ITEST_LOCKED:-}" = 1 ] && flock -n 9 2>/dev/null; then
	: # held by the suite that started this run
else
	exec 9>/run/lock/kiyot-itest.lock
	if ! flock -w 600 9; then
		echo "integration: another run holds /run/lock/kiyot-itest.lock" >&2
		echo "integration: 0 passed, 1 failed"
		exit 1
	fi
fi

# A run killed hard leaves its work directory; clean those up first (kiyot, cells, registry),
# each with the network of the shard that made it.
for d in /tmp/kiyot-itest-*; do
	[ -f "$d/env.json" ] || continue
	shard=$("$py" -c 'import json, sys; print(json.load(open(sys.argv[1])).get("shard", 0))' \
		"$d/env.json" 2>/dev/null || echo 0)
	KIYOT_ITEST_SHARD=$shard "$py" "$here/harness.py" cleanup "$d"
done

"$py" "$here/harness.py" run "$@"
rc=$?
exit $rc
