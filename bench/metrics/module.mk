# The metrics benchmark: a scrape's time by the number of cells, and CRI calls with the
# metrics' observer on and off, in kiyot's CRI server in process.
#   make bench-metrics && build/bench/metrics
.PHONY: bench-metrics

bench-metrics: $(BUILD)/bench/metrics

$(BUILD)/bench/metrics: $(BUILD)/obj/bench/metrics/metrics.o $(BUILD)/libtestutil.a \
		$(BENCH_COST_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< $(BUILD)/libtestutil.a $(BENCH_COST_LIBS) $(LDLIBS_ALL)
