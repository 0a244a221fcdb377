# kiyot: the CRI shim, one directory per concern (kiyot/README.md). Everything but
# cli/main.c goes into libkiyot.a so unit tests link it.
KIYOT_SRCS := $(filter-out kiyot/cli/main.c,$(shell find kiyot -name '*.c'))
KIYOT_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(KIYOT_SRCS))

$(eval $(call static_lib,libkiyot.a,$(KIYOT_OBJS)))

$(BUILD)/kiyot: $(BUILD)/obj/kiyot/cli/main.o $(BUILD)/libkiyot.a $(BUILD)/libcommon.a $(BUILD)/libproto.a
	@echo "  LD $@"
	@$(CC) -o $@ $^ $(LDLIBS_ALL)

# .incbin is invisible to -MMD: rebuild the catalog object when the data changes
$(BUILD)/obj/kiyot/sizing/catalog_data.o: kiyot/sizing/data/aws-instance-catalog.json \
	kiyot/sizing/data/aws-spot-advisor.json
