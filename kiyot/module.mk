# kiyot: the CRI shim. Everything but main.c goes into libkiyot.a so unit tests link it.
KIYOT_SRCS := $(filter-out kiyot/main.c,$(wildcard kiyot/*.c)) $(wildcard kiyot/stream/*.c)
KIYOT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(KIYOT_SRCS))

$(BUILD)/libkiyot.a: $(KIYOT_OBJS)
	ar rcs $@ $^

$(BUILD)/kiyot: $(BUILD)/obj/kiyot/main.o $(BUILD)/libkiyot.a $(BUILD)/libcommon.a $(BUILD)/libproto.a
	@echo "  LD $@"
	@$(CC) -o $@ $^ $(LDLIBS_ALL)

# .incbin is invisible to -MMD: rebuild the catalog object when the data changes
$(BUILD)/obj/kiyot/catalog_data.o: kiyot/data/aws-instance-catalog.json
