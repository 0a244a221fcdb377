# Unit tests: one cmocka binary per file test/unit/test_<module>.c. The other files of
# test/unit (fakes and fixtures several tests share) make libtestutil.a, linked first.
UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(patsubst test/unit/%.c,$(BUILD)/test/%,$(UNIT_SRCS))
UNIT_UTIL_SRCS := $(filter-out $(UNIT_SRCS),$(wildcard test/unit/*.c))
TEST_LIBS := $(BUILD)/libtestutil.a $(BUILD)/libkiyot.a $(BUILD)/libagent.a $(BUILD)/libcommon.a \
	$(BUILD)/libproto.a

$(eval $(call static_lib,libtestutil.a,$(patsubst %.c,$(BUILD)/obj/%.o,$(UNIT_UTIL_SRCS))))

$(BUILD)/test/%: $(BUILD)/obj/test/unit/%.o $(TEST_LIBS)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< $(TEST_LIBS) $(LDLIBS_ALL) -lcmocka

# netdelay: the load mode's slow, lossy cell link where the kernel has no netem (test/netdelay)
NETDELAY := $(BUILD)/test-tools/netdelay
$(NETDELAY): $(BUILD)/obj/test/netdelay/netdelay.o
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -o $@ $< -lnetfilter_queue -lnfnetlink

unit: $(UNIT_BINS)
	@test/run-unit.sh $(UNIT_BINS)

unit-bins: $(UNIT_BINS)

# line coverage of the unit tests per directory and part (test/coverage.sh, gcovr): the tests
# built with --coverage in COVERAGE_BUILD (`make coverage COVERAGE_BUILD=DIR` for another than
# build/cov; SAN goes to both compiler and linker), counters zeroed, run once; a failing test
# still prints the figures and fails the target, as does a part below its floor
# (COVERAGE_FLOORS in test/coverage.sh). The sub-makes are marked '+' so that -j reaches them.
COVERAGE_BUILD := build/cov
COVERAGE_MAKE = $(MAKE) --no-print-directory BUILD=$(COVERAGE_BUILD) SAN=--coverage OPT="-O0 -g"

coverage:
	+@$(COVERAGE_MAKE) unit-bins
	@find $(COVERAGE_BUILD)/obj -name '*.gcda' -delete
	+@status=0; $(COVERAGE_MAKE) unit || status=$$?; \
		test/coverage.sh $(COVERAGE_BUILD) && exit $$status

# the integration suite's shards: test files run in that many processes at once, each with its
# own bridge, network, registry and kiyot (test/integration/harness.py)
ITEST_SHARDS ?= 3

# the test endpoints against real clients first (signatures vs botocore, ec2sim vs the AWS
# CLI, the Kubernetes API endpoint vs kubectl and python3-kubernetes),
# then the suite against the real daemons, whose summary line ends the run
integration: all $(NETDELAY)
	@BUILD=$(BUILD) test/ec2sign/run.sh
	@test/ec2/run.sh
	@test/kubeapi/run.sh
	@KIYOT_ITEST_SHARDS=$(ITEST_SHARDS) KIYOT_BUILD=$(abspath $(BUILD)) test/integration/run.sh
	@$(MAKE) --no-print-directory integration-load

# the pod lifecycle and crash tests, and the streaming tests' exec, terminal, port-forward
# (SPDY and WebSocket), one-use URL and stop-with-a-session-open cases, again on a busy node
# (KIYOT_ITEST_LOAD: CPU workers beyond the cores, a slow and lossy link to the cells): about
# 20 s of tests more. All of the streaming tests under load (LOAD_TESTS="Streaming", the large
# and stalled transfers among them) take about 5 minutes more
LOAD_TESTS ?= Lifecycle CrashStarts spdy_exec websocket_exec_v4 port_forward_several_connections \
	websocket_port_forward_several a_url_is_good_once kiyot_stops_promptly
integration-load: all $(NETDELAY)
	@echo "integration on a busy node: $(LOAD_TESTS)"
	@KIYOT_ITEST_LOAD=1 KIYOT_BUILD=$(abspath $(BUILD)) test/integration/run.sh $(LOAD_TESTS)

# the EC2 cell boot in a real VM (test/integration/test_ec2_vm.py): the cell image built by
# deploy/cell-image/build.sh (cached in $(BUILD)/cell-image by its inputs' hash), booted by QEMU
# under TCG for ec2sim's RunInstances, its bootstrap read from ec2sim's metadata service
# (about 4 minutes on 2 cores with the image built, 75 s with it cached); make test runs it in
# the integration suite's shard 0 once the image is built (KIYOT_ITEST_VM_READY)
.PHONY: test-vm
test-vm: all
	@KIYOT_ITEST_VM=1 KIYOT_BUILD=$(abspath $(BUILD)) test/integration/run.sh Ec2VmTest

# the whole suite, parts side by side where they can be (test/suite.sh says in which order),
# ending with a table of each part's wall time and result
test:
	@ITEST_SHARDS=$(ITEST_SHARDS) LOAD_TESTS="$(LOAD_TESTS)" test/suite.sh $(BUILD) $(JOBS)

ASAN_MAKE = $(MAKE) --no-print-directory BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" OPT="-O1 -g"

asan:
	@$(ASAN_MAKE) unit

# the integration suite against kiyot and cell-agent built with ASan + UBSan (slower; a
# memory error shows as a failed call or a crashed agent, its report in the agent's log)
asan-integration: deps
	@$(ASAN_MAKE) all
	@ASAN_OPTIONS=detect_leaks=0 KIYOT_BUILD=$(abspath build-asan) test/integration/run.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@test/demo.sh
