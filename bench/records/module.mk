# The records benchmark: CRI list and status latency while containers log, in a whole kiyot
# with the unit tests' fakes.   make bench-records && build/bench/records
.PHONY: bench-records

bench-records: $(BUILD)/bench/records

$(BUILD)/bench/records: $(BUILD)/obj/bench/records/records.o $(BUILD)/libtestutil.a \
		$(BENCH_COST_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< $(BUILD)/libtestutil.a $(BENCH_COST_LIBS) $(LDLIBS_ALL)
