COMMON_SRCS := $(wildcard common/*.c common/oci/*.c)
COMMON_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(COMMON_SRCS))

$(eval $(call static_lib,libcommon.a,$(COMMON_OBJS)))
