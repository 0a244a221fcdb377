# The shipped-volume benchmark: reading, packing and writing configMap-like volumes against
# cp -a of the same directory.   make bench-volumes && build/bench/volumes
.PHONY: bench-volumes

bench-volumes: $(BUILD)/bench/volumes

$(BUILD)/bench/volumes: $(BUILD)/obj/bench/volumes/volumes.o $(BENCH_COST_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< $(BENCH_COST_LIBS) $(LDLIBS_ALL)
