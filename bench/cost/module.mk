# The cost benchmark: prices bench/cost/mix.json under Kiyot's sizing and four other rules.
#   make bench-cost && build/bench/cost
.PHONY: bench-cost
BENCH_COST_LIBS := $(BUILD)/libkiyot.a $(BUILD)/libagent.a $(BUILD)/libcommon.a $(BUILD)/libproto.a

bench-cost: $(BUILD)/bench/cost

$(BUILD)/bench/cost: $(BUILD)/obj/bench/cost/cost.o $(BENCH_COST_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< $(BENCH_COST_LIBS) $(LDLIBS_ALL) -lm
