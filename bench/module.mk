# Benchmarks (figures only): make bench
include bench/cost/module.mk
include bench/volumes/module.mk
include bench/records/module.mk

bench: all bench-cost bench-volumes bench-records
	@KIYOT_BUILD=$(BUILD) bench/run.sh
