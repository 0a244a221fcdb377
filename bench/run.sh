#!/bin/sh
# Kiyot's benchmarks: pod start latency, image pull, memory of kiyot and cell-agent, CRI call
# latency, each next to a baseline measured in the same run. Prints tables of figures and
# ratios; asserts nothing about speed. Needs root and what the integration suite needs
# (deploy/install-deps.sh); uses kiyot and cell-agent from $KIYOT_BUILD (default build/).
#
#   bench/run.sh                        or: make bench (builds first)
#   KIYOT_BENCH_JSON=FILE bench/run.sh  also writes the raw figures as JSON
#   KIYOT_BENCH_ONLY=8 bench/run.sh     only section 8 (a comma-separated list: 1,...,13, cost)
#
# Shares the bridge, the registry address and the lock with test/integration/run.sh: the two
# never run at the same time. Exit status: 0 when every figure was measured.
set -u
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3

if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (network namespaces, cgroups, a bridge)" >&2
	exit 1
fi
for m in grpc google.protobuf; do
	if ! "$py" -c "import $m" 2>/dev/null; then
		echo "bench: $py cannot import $m: run deploy/install-deps.sh" >&2
		exit 1
	fi
done
for c in crun curl tar ip unshare docker-registry; do
	if ! command -v "$c" >/dev/null 2>&1; then
		echo "bench: $c is missing: run deploy/install-deps.sh" >&2
		exit 1
	fi
done

# 500 pods through the EC2 provider (about 6 minutes): opt in with KIYOT_BENCH_SCALE=1
[ "${KIYOT_BENCH_SCALE:-0}" = 1 ] && "$here/scale/run.sh"
exec 9>/run/lock/kiyot-itest.lock
if ! flock -w 600 9; then
	echo "bench: another run holds /run/lock/kiyot-itest.lock" >&2
	exit 1
fi

# A benchmark killed hard leaves its work directory: tear down what it left first.
for d in /tmp/kiyot-bench-*; do
	[ -f "$d/bench-leftovers.json" ] && "$py" "$here/bench.py" cleanup "$d"
	[ -f "$d/env.json" ] && "$py" "$here/../test/integration/harness.py" cleanup "$d"
done

# KIYOT_BENCH_ONLY=8 (or 1,7,cost,6): only those sections; cost, 6, 13, conns, 16 and poolsim
# are programs of their own
only=",${KIYOT_BENCH_ONLY:-cost,6,13,conns,16,poolsim},"
case $only in *,cost,*)
	"${KIYOT_BUILD:-build}/bench/cost" "$here/cost/mix.json" || echo "bench: cost benchmark failed" >&2
esac
case $only in *,6,*)
	"${KIYOT_BUILD:-build}/bench/volumes" || echo "bench: volume benchmark failed" >&2
esac
case $only in *,13,*)
	"${KIYOT_BUILD:-build}/bench/records" || echo "bench: records benchmark failed" >&2
esac
case $only in *,16,*)
	"${KIYOT_BUILD:-build}/bench/metrics" || echo "bench: metrics benchmark failed" >&2
esac
case $only in *,poolsim,*)
	"${KIYOT_BUILD:-build}/bench/poolsim" "$here/pool/trace.tsv" || echo "bench: pool simulation failed" >&2
esac
case $only in *,conns,*)
	"${KIYOT_BUILD:-build}/bench/conns" || echo "bench: connections benchmark failed" >&2
esac
exec "$py" "$here/bench.py"
