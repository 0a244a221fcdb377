#!/bin/sh
# Kiyot's scale benchmark: N pods (default 500) through the EC2 provider against the suite's
# rate-limited local EC2 endpoint (test/ec2/ec2sim.py, instances booted as local cells).
# Prints EC2 calls per pod, time until all sandboxes are READY, kiyot's CPU and memory, each
# next to a baseline of N/10 pods measured in the same run. Needs root and what the
# integration suite needs (deploy/install-deps.sh, python3-botocore); uses kiyot and
# cell-agent from $KIYOT_BUILD (default build/).
#
#   bench/scale/run.sh                       or: KIYOT_SCALE_PODS=200 bench/scale/run.sh
#   KIYOT_SCALE_JSON=FILE bench/scale/run.sh also writes the raw figures as JSON
#
# Takes the integration suite's lock, so it never runs beside test/integration/run.sh or
# bench/run.sh. Exit status: 0 when every step was measured and nothing leaked.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3

if [ "$(id -u)" != 0 ]; then
	echo "scale: needs root (network namespaces, cgroups, a bridge)" >&2
	exit 1
fi
for m in grpc google.protobuf botocore; do
	if ! "$py" -c "import $m" 2>/dev/null; then
		echo "scale: $py cannot import $m: run deploy/install-deps.sh" >&2
		exit 1
	fi
done
for c in crun ip docker-registry flock; do
	if ! command -v "$c" >/dev/null 2>&1; then
		echo "scale: $c is missing: run deploy/install-deps.sh" >&2
		exit 1
	fi
done

exec 9>/run/lock/kiyot-itest.lock
if ! flock -w "${KIYOT_SCALE_LOCK_WAIT:-1800}" 9; then
	echo "scale: another run holds /run/lock/kiyot-itest.lock" >&2
	exit 1
fi

# A run killed hard leaves its work directory: tear down what it left first.
for d in /tmp/kiyot-scale-*; do
	[ -f "$d/env.json" ] && "$py" "$here/scale.py" cleanup "$d"
done

exec "$py" "$here/scale.py" run
