#!/bin/sh
# Pod start through the EC2 provider with and without the adaptive warm pool, against the
# suite's local EC2 endpoint with 30 s boots (bench/pool/ec2warm.py). Needs root and what the
# integration suite needs; uses kiyot and cell-agent from $KIYOT_BUILD (default build/). Takes
# the integration suite's lock, so it never runs beside test/integration/run.sh.
set -u
here=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" != 0 ]; then
	echo "ec2warm: needs root (network namespaces, cgroups, a bridge)" >&2
	exit 1
fi
exec 9>/run/lock/kiyot-itest.lock
if ! flock -w "${KIYOT_EC2WARM_LOCK_WAIT:-1800}" 9; then
	echo "ec2warm: another run holds /run/lock/kiyot-itest.lock" >&2
	exit 1
fi
exec /usr/bin/python3 "$here/ec2warm.py"
