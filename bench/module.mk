# Benchmarks (figures only): make bench
bench: all
	@KIYOT_BUILD=$(BUILD) bench/run.sh
