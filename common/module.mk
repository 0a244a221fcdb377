COMMON_SRCS := $(wildcard common/*.c common/oci/*.c)
COMMON_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMMON_SRCS))

$(BUILD)/libcommon.a: $(COMMON_OBJS)
	rm -f $@ && ar rcs $@ $^
