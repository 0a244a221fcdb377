/*
 * Unit tests for cell-agent/stats.c: a cgroup's usage as the agent reports it, read from a
 * cgroup v1 pair (cpuacct, memory) the test makes, with a child that burns CPU in it. The CPU
 * rate is known from a cgroup's second reading on, and the memory left under a limit is
 * reported (these two need root and cgroup v1, the machines kiyot runs on, and are skipped
 * otherwise). The pod's network figures are those of the interface with the default route.
 * On cgroup v2 (an EC2 cell) the same figures come from v2's files, read from a tree the test
 * writes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "clock.h"
#include "fsutil.h"
#include "stats.h"
#include "xalloc.h"

#define LIMIT (256LL << 20)

struct fix {
	char cg[64]; /* "/kiyot-stats-test-PID" */
};

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return -1;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	char path[160];

	snprintf(f->cg, sizeof(f->cg), "/kiyot-stats-test-%d", (int)getpid());
	*state = f;
	if (geteuid() != 0 || !fs_exists("/sys/fs/cgroup/cpuacct/cpuacct.usage"))
		return 0;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/cpuacct%s", f->cg);
	if (mkdir(path, 0755) < 0)
		return -1;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s", f->cg);
	if (mkdir(path, 0755) < 0)
		return -1;
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", f->cg);
	return write_text(path, "268435456");
}

static int teardown(void **state)
{
	struct fix *f = *state;
	char path[160];

	snprintf(path, sizeof(path), "/sys/fs/cgroup/cpuacct%s", f->cg);
	rmdir(path);
	snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s", f->cg);
	rmdir(path);
	free(f);
	return 0;
}

/* A child that joins the cgroups and spins for ms of CPU time. */
static void burn(const struct fix *f, int ms)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		char path[160], me[32];
		struct timespec t0, t;

		snprintf(me, sizeof(me), "%d", (int)getpid());
		snprintf(path, sizeof(path), "/sys/fs/cgroup/cpuacct%s/cgroup.procs", f->cg);
		if (write_text(path, me) < 0)
			_exit(2);
		snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/cgroup.procs", f->cg);
		if (write_text(path, me) < 0)
			_exit(3);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
		do
			clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
		while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_agent_stats__cpu_rate_from_the_second_reading(void **state)
{
	struct fix *f = *state;
	struct resource_usage first = { 0 }, second = { 0 }, again = { 0 };
	double wall;

	if (geteuid() != 0 || !fs_exists("/sys/fs/cgroup/cpuacct/cpuacct.usage"))
		skip();
	stats_read_cgroup(f->cg, &first);
	assert_false(first.cpu_rate_known); /* nothing to measure from */
	burn(f, 150);
	usleep(100 * 1000);
	stats_read_cgroup(f->cg, &second);
	assert_true(second.cpu_rate_known);
	assert_true(second.cpu_usage_ns >= first.cpu_usage_ns + 150 * 1000000ULL);
	/* the rate is the CPU used over the time between the readings, whatever that was */
	wall = (double)(second.timestamp_ns - first.timestamp_ns);
	assert_true(second.cpu_usage_nano_cores > 0);
	assert_true((double)second.cpu_usage_nano_cores * wall / 1e9 <=
		    (double)(second.cpu_usage_ns - first.cpu_usage_ns) + 1e6);
	assert_true((double)second.cpu_usage_nano_cores * wall / 1e9 >=
		    (double)(second.cpu_usage_ns - first.cpu_usage_ns) - 1e6);
	/* read again at once: the rate stands (too short a time to measure a new one) */
	stats_read_cgroup(f->cg, &again);
	assert_true(again.cpu_rate_known);
	assert_int_equal(again.cpu_usage_nano_cores, second.cpu_usage_nano_cores);
}

static void test_agent_stats__memory_left_under_the_limit(void **state)
{
	struct fix *f = *state;
	struct resource_usage u = { 0 };

	if (geteuid() != 0 || !fs_exists("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
		skip();
	stats_read_cgroup(f->cg, &u);
	assert_int_equal(u.memory_available_bytes, (uint64_t)LIMIT - u.memory_working_set_bytes);
	memset(&u, 0, sizeof(u));
	stats_read_cgroup("", &u); /* the root has no limit: nothing said */
	assert_int_equal(u.memory_available_bytes, 0);
}

#define DEV_HEAD                                                                                   \
	"Inter-|   Receive                                                |  Transmit\n"           \
	" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs " \
	"drop fifo colls carrier compressed\n"
#define DEV_LO                                                                                     \
	"    lo:  9000     90    0    0    0     0          0         0  9000     90    0 0 0 0 "  \
	"0 0\n"
#define DEV_ETH0                                                                                   \
	"  eth0: 123456 1000  2    0    0     0          0         0  654321 900   3 0 0 0 0 0\n"
#define DEV_ETH1 "  eth1: 777 7  0    0    0     0          0         0  888 8   0 0 0 0 0 0\n"
#define ROUTE_HEAD                                                                                 \
	"Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

/* Writes route and dev texts to files of a temporary directory; reads the network usage. */
static int read_net(const char *route, const char *dev, struct net_usage *n)
{
	char dir[] = "/tmp/kiyot-net-XXXXXX";
	char rp[64], dp[64];
	int ret;

	assert_non_null(mkdtemp(dir));
	snprintf(rp, sizeof(rp), "%s/route", dir);
	snprintf(dp, sizeof(dp), "%s/dev", dir);
	if (route)
		assert_int_equal(write_text(rp, route), 0);
	if (dev)
		assert_int_equal(write_text(dp, dev), 0);
	ret = stats_read_network(rp, dp, n);
	unlink(rp);
	unlink(dp);
	rmdir(dir);
	return ret;
}

/* The pod's traffic is that of the interface with the default route, not the first listed;
 * without a default route the first interface but lo; lines that do not parse are passed over;
 * no counters at all: -1. */
static void test_agent_stats__network_of_the_default_route(void **state)
{
	struct net_usage n;

	(void)state;
	assert_int_equal(read_net(ROUTE_HEAD
				  "eth1\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
				  "eth0\t00000000\t0100000A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n",
				  DEV_HEAD DEV_LO DEV_ETH1 DEV_ETH0, &n),
			 0);
	assert_string_equal(n.interface, "eth0");
	assert_int_equal(n.rx_bytes, 123456);
	assert_int_equal(n.rx_errors, 2);
	assert_int_equal(n.tx_bytes, 654321);
	assert_int_equal(n.tx_errors, 3);
	assert_true(n.timestamp_ns > 0);
	assert_int_equal(read_net(ROUTE_HEAD, DEV_HEAD DEV_LO " bad: 1 2\n" DEV_ETH1 DEV_ETH0, &n),
			 0);
	assert_string_equal(n.interface, "eth1");
	assert_int_equal(n.rx_bytes, 777);
	assert_int_equal(read_net(NULL, DEV_HEAD DEV_LO DEV_ETH0, &n), 0);
	assert_string_equal(n.interface, "eth0");
	assert_int_equal(read_net(ROUTE_HEAD, DEV_HEAD DEV_LO, &n), -1);
	assert_int_equal(read_net(ROUTE_HEAD, NULL, &n), -1);
}

/* On cgroup v2 (an EC2 cell's Debian): CPU from cpu.stat's usage_usec, memory from
 * memory.current and memory.stat's subtree figures, the limit from memory.max ("max": none). */
static void test_agent_stats__cgroup_v2_files(void **state)
{
	char dir[] = "/tmp/kiyot-cg2-XXXXXX";
	char path[128];
	struct resource_usage u = { 0 };

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/kiyot", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/kiyot/u1", dir);
	assert_int_equal(mkdir(path, 0755), 0);
#define PUT(file, text)                                                                            \
	do {                                                                                       \
		snprintf(path, sizeof(path), "%s/kiyot/u1/%s", dir, file);                         \
		assert_int_equal(write_text(path, text), 0);                                       \
	} while (0)
	PUT("cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
	PUT("memory.current", "10485760\n");
	PUT("memory.stat", "anon 4194304\nfile 6291456\ninactive_file 2097152\n"
			   "pgfault 1234\npgmajfault 5\n");
	PUT("memory.max", "67108864\n");
	cgroup_set_root(dir, true);
	assert_true(cgroup_exists("/kiyot/u1"));
	assert_false(cgroup_exists("/kiyot/u2"));
	stats_read_cgroup("/kiyot/u1", &u);
	assert_int_equal(u.cpu_usage_ns, 2500000000ULL);
	assert_int_equal(u.memory_usage_bytes, 10485760);
	assert_int_equal(u.memory_working_set_bytes, 10485760 - 2097152);
	assert_int_equal(u.memory_rss_bytes, 4194304);
	assert_int_equal(u.memory_page_faults, 1234);
	assert_int_equal(u.memory_major_page_faults, 5);
	assert_int_equal(u.memory_available_bytes, 67108864 - (10485760 - 2097152));
	PUT("memory.max", "max\n");
	memset(&u, 0, sizeof(u));
	stats_read_cgroup("/kiyot/u1", &u);
	assert_int_equal(u.memory_available_bytes, 0);
#undef PUT
	cgroup_set_root(NULL, false);
	for (const char *f = "cpu.stat"; f; f = strcmp(f, "cpu.stat") == 0 ? "memory.current"
						: strcmp(f, "memory.current") == 0 ? "memory.stat"
						: strcmp(f, "memory.stat") == 0	   ? "memory.max"
										   : NULL) {
		snprintf(path, sizeof(path), "%s/kiyot/u1/%s", dir, f);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/kiyot/u1", dir);
	rmdir(path);
	snprintf(path, sizeof(path), "%s/kiyot", dir);
	rmdir(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_agent_stats__cpu_rate_from_the_second_reading,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_stats__memory_left_under_the_limit,
						setup, teardown),
		cmocka_unit_test(test_agent_stats__network_of_the_default_route),
		cmocka_unit_test(test_agent_stats__cgroup_v2_files),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
