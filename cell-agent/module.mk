# cell-agent: the in-cell agent, and cell-shim, the program of its units' shims. Everything but
# the two mains goes into libagent.a.
AGENT_SRCS := $(filter-out cell-agent/main.c cell-agent/shim_main.c,$(wildcard cell-agent/*.c))
AGENT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(AGENT_SRCS))

$(eval $(call static_lib,libagent.a,$(AGENT_OBJS)))

$(BUILD)/cell-agent: $(BUILD)/obj/cell-agent/main.o $(BUILD)/libagent.a $(BUILD)/libcommon.a $(BUILD)/libproto.a
	@echo "  LD $@"
	@$(CC) -o $@ $^ $(LDLIBS_ALL)

# The linker takes from the archives only what the shim uses, and (Debian's default
# --as-needed) only the libraries that needs: libc and jansson.
all: $(BUILD)/cell-shim
$(BUILD)/cell-shim: $(BUILD)/obj/cell-agent/shim_main.o $(BUILD)/libagent.a $(BUILD)/libcommon.a
	@echo "  LD $@"
	@$(CC) -o $@ $^ -Wl,--as-needed $(LDLIBS_ALL)
