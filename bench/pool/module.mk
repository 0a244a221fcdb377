# The warm pool's simulation: the pool's planning over a day of arrivals (bench/pool/trace.tsv).
#   make bench-pool && build/bench/poolsim bench/pool/trace.tsv
.PHONY: bench-pool
BENCH_POOL_LIBS := $(BUILD)/libkiyot.a $(BUILD)/libcommon.a

bench-pool: $(BUILD)/bench/poolsim

$(BUILD)/bench/poolsim: $(BUILD)/obj/bench/pool/poolsim.o $(BENCH_POOL_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< $(BENCH_POOL_LIBS) $(LDLIBS_ALL) -lm
