# Benchmarks (figures only): make bench
include bench/cost/module.mk
include bench/volumes/module.mk
include bench/records/module.mk
include bench/conns/module.mk
include bench/metrics/module.mk
include bench/pool/module.mk

bench: all bench-cost bench-volumes bench-records bench-conns bench-metrics bench-pool
	@KIYOT_BUILD=$(BUILD) bench/run.sh
