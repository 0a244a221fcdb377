# Fuzz targets, built with Debian's clang and libFuzzer (ASan + UBSan):
#   make fuzz                         every target, FUZZ_SECONDS (60) each over its corpus
#   make fuzz FUZZ_TARGETS=seccomp FUZZ_SECONDS=600
#   make fuzz-check                   what `make test` runs: every target replays its corpus (the
#                                     seeds, and inputs earlier runs kept); a crash, a leak or
#                                     an input slower than 60 s fails it, naming the reproducer.
#                                     FUZZ_CHECK_SECONDS=20 adds that much fuzzing per target
#   make fuzz-build                   the binaries only, in $(BUILD)/fuzz/
# A target is test/fuzz/fuzz_<name>.c (LLVMFuzzerTestOneInput) with its seed corpus in
# test/fuzz/corpus/<name>/ and, if there is one, a dictionary test/fuzz/<name>.dict. The module
# it exercises, <name>.c and <name>_*.c anywhere under cell-agent/, common/ or kiyot/, is
# compiled with clang so that coverage guides the fuzzer there, as are common/err.c,
# common/xalloc.c and the sources test/fuzz/<name>.srcs lists (optional, one a line); whatever
# else it calls comes from the gcc-built libraries, uninstrumented. test/fuzz/seeds.py and
# stream_seeds.py write the seed corpora; targets whose module writes files give it a sandbox
# with a decoy beside it (test/fuzz/sandbox.c, in their .srcs).

FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 0
FUZZ_NAMES := $(patsubst test/fuzz/fuzz_%.c,%,$(wildcard test/fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_SAN := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-fno-omit-frame-pointer
# gcc's warnings are the build's; clang also flags va_list wrappers without a format attribute,
# and common/yaml.h's #include_next of libyaml's <yaml.h>, which finds it all the same
FUZZ_CFLAGS := $(BASE_CFLAGS) -O1 $(WARN) -Wno-format-nonliteral -Wno-include-next-absolute-path \
	$(FUZZ_SAN)
FUZZ_LIBS := $(BUILD)/libkiyot.a $(BUILD)/libagent.a $(BUILD)/libcommon.a $(BUILD)/libproto.a
FUZZ_ALWAYS := common/err.c common/xalloc.c

.PHONY: fuzz fuzz-build fuzz-check

# the sources a target is built from, as objects under $(BUILD)/fuzz/obj
fuzz_objs = $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,test/fuzz/fuzz_$(1).c $(sort \
	$(shell find cell-agent common kiyot -name '$(1).c' -o -name '$(1)_*.c') \
	$(if $(wildcard test/fuzz/$(1).srcs),$(shell cat test/fuzz/$(1).srcs)) $(FUZZ_ALWAYS)))

define FUZZ_TARGET
$(BUILD)/fuzz/fuzz_$(1): $(call fuzz_objs,$(1)) $(FUZZ_LIBS)
	@echo "  LD $$@"
	@$(FUZZ_CC) $(FUZZ_SAN) -o $$@ $(call fuzz_objs,$(1)) $(FUZZ_LIBS) $(LDLIBS_ALL)
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call FUZZ_TARGET,$(n))))

$(BUILD)/fuzz/obj/%.o: %.c | $(GEN_HEADERS)
	@command -v $(FUZZ_CC) >/dev/null || \
		{ echo "fuzz: $(FUZZ_CC) not found (apt-get install clang)"; exit 1; }
	@mkdir -p $(dir $@)
	@echo "  CLANG $<"
	@$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

fuzz-build: $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_TARGETS))

fuzz: fuzz-build
	@test/fuzz/run.sh $(BUILD)/fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-check: fuzz-build
	@FUZZ_FLAGS="-timeout=60 $(FUZZ_FLAGS)" test/fuzz/run.sh $(BUILD)/fuzz \
		$(FUZZ_CHECK_SECONDS) $(FUZZ_TARGETS)

-include $(shell find $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)
