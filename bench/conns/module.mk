# The connections benchmark: kiyot's memory per idle cell feed against a gRPC TLS stream.
#   make bench-conns && build/bench/conns
.PHONY: bench-conns

bench-conns: $(BUILD)/bench/conns

$(BUILD)/bench/conns: $(BUILD)/obj/bench/conns/conns.o $(BENCH_COST_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< $(BENCH_COST_LIBS) $(LDLIBS_ALL)
