# Benchmarks (figures only): make bench
include bench/cost/module.mk
include bench/volumes/module.mk

bench: all bench-cost bench-volumes
	@KIYOT_BUILD=$(BUILD) bench/run.sh
