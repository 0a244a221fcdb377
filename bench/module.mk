# Benchmarks (figures only): make bench
include bench/cost/module.mk
include bench/volumes/module.mk
include bench/records/module.mk
include bench/conns/module.mk
include bench/metrics/module.mk
include bench/pool/module.mk

# the benchmarks' programs alone: make test builds them (with the unit binaries), so that a
# change of the code they drive cannot leave them unbuildable until the next make bench
bench-bins: bench-cost bench-volumes bench-records bench-conns bench-metrics bench-pool

bench: all bench-bins
	@KIYOT_BUILD=$(BUILD) bench/run.sh
