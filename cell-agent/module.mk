# cell-agent: the in-cell agent. Everything but main.c goes into libagent.a.
AGENT_SRCS := $(filter-out cell-agent/main.c,$(wildcard cell-agent/*.c))
AGENT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(AGENT_SRCS))

$(BUILD)/libagent.a: $(AGENT_OBJS)
	ar rcs $@ $^

$(BUILD)/cell-agent: $(BUILD)/obj/cell-agent/main.o $(BUILD)/libagent.a $(BUILD)/libcommon.a $(BUILD)/libproto.a
	@echo "  LD $@"
	@$(CC) -o $@ $^ $(LDLIBS_ALL)
