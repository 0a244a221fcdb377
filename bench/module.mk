# Benchmarks (figures only): make bench
include bench/cost/module.mk

bench: all bench-cost
	@KIYOT_BUILD=$(BUILD) bench/run.sh
