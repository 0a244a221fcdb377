bench: all
	@bench/run.sh
