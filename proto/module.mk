# protoc-c output goes to build/gen; compiled into build/libproto.a.
PROTOS := proto/cri_api.proto proto/cellagent.proto
GEN_SRCS := $(patsubst proto/%.proto,$(BUILD)/gen/%.pb-c.c,$(PROTOS))
GEN_HEADERS := $(GEN_SRCS:.c=.h)
GEN_OBJS := $(GEN_SRCS:.c=.o)

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --c_out=$(BUILD)/gen -Iproto $<

$(BUILD)/gen/%.pb-c.o: $(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h
	$(CC) $(BASE_CFLAGS) -c $< -o $@

$(BUILD)/libproto.a: $(GEN_OBJS)
	rm -f $@ && ar rcs $@ $^
