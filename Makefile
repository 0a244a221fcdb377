# Kiyot: one non-recursive build. Each part adds itself in <part>/module.mk.
#   make            build/kiyot, build/cell-agent and build/cell-shim (its units' shims)
#   make test       install what the tests need, build in parallel, then at once the unit tests
#                   (several binaries at once), the fuzz targets each replaying its corpus (make
#                   fuzz-check; make fuzz is what looks for new inputs), the test endpoints and
#                   the integration suite in shards; then the load pass and the VM boot, whose
#                   image was built meanwhile; ends with each part's wall time (test/suite.sh)
#   make demo       install, build and run the main job (a pod in a local cell)
#   make bench      benchmarks (figures only)
#   make asan       unit tests under AddressSanitizer + UBSan
#   make asan-integration   the integration suite against ASan + UBSan builds
#   make coverage   line coverage of the unit tests per directory (built in build/cov)
#   make lint       clang-format check, banned functions, include directions (and a test
#                   of those rules: test/lint_test.sh)

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CC ?= gcc
PKGS := grpc libprotobuf-c libcurl jansson openssl sqlite3 libarchive yaml-0.1 libxml-2.0 zlib

WARN := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes
OPT ?= -O2 -g
SAN ?=
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# Include paths per part: common/ (with common/oci, what both daemons share: image references,
# registries, the image store) sees only itself, each daemon common/ and itself, tests and
# tools everything. test/lint.sh refuses an include across parts that these would not allow.
INC_COMMON := -iquote common -iquote common/oci -iquote $(BUILD)/gen
INC = $(INC_COMMON) -iquote kiyot -iquote cell-agent
$(BUILD)/obj/common/%.o: INC = $(INC_COMMON)
$(BUILD)/obj/kiyot/%.o: INC = $(INC_COMMON) -iquote kiyot
$(BUILD)/obj/cell-agent/%.o: INC = $(INC_COMMON) -iquote cell-agent
BASE_CFLAGS = -std=c11 -D_GNU_SOURCE $(OPT) $(SAN) -pthread -MMD -MP $(INC) $(PKG_CFLAGS)
CFLAGS_ALL = $(BASE_CFLAGS) $(WARN) $(CFLAGS)
LDLIBS_ALL := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lwslay -lgpr -lm -pthread $(SAN)

.PHONY: all clean test unit unit-bins bench-bins coverage integration integration-load demo bench asan asan-integration lint deps
# keep generated sources and objects that make would otherwise treat as intermediate
.SECONDARY:
all: $(BUILD)/kiyot $(BUILD)/cell-agent

# $(call static_lib,NAME,OBJS): the rule making $(BUILD)/NAME from OBJS, made afresh each time
# (ar alone would keep the members of removed sources). $(BUILD)/NAME.members lists OBJS and
# changes only when the set does, so a source removed or moved also rebuilds the library.
.PHONY: FORCE
FORCE:
define static_lib
$(BUILD)/$(1).members: FORCE
	@mkdir -p $$(dir $$@)
	@printf '%s\n' $(2) | cmp -s - $$@ || printf '%s\n' $(2) > $$@
$(BUILD)/$(1): $(2) $(BUILD)/$(1).members
	@rm -f $$@
	@ar rcs $$@ $(2)
endef

include proto/module.mk
include common/module.mk
include kiyot/module.mk
include cell-agent/module.mk
include test/module.mk
include test/fuzz/module.mk
include bench/module.mk

$(BUILD)/obj/%.o: %.c | $(GEN_HEADERS)
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS_ALL) -c $< -o $@

deps:
	@deploy/install-deps.sh

clean:
	rm -rf $(BUILD)

lint:
	@test/lint.sh
	@test/lint_test.sh

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
