/*
 * test_provider_local.c: the local provider. Pure parts (CIDR parsing, address picking, names)
 * run anywhere; the cell tests need root and really create cells, on a bridge, network and
 * cgroup subtree of their own (kvtest0, 10.199.0.0/24, kiyot-test), in a network namespace of
 * their own (unshared at start): their bridge and guard rules never meet a running kiyot's, nor
 * the integration suite's that runs beside the unit tests. A fixture agent (a shell script that
 * sleeps) stands in for cell-agent.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/local/cellnet.h"
#include "providers/local/cellrecord.h"
#include "providers/local/cgroup.h"
#include "providers/local/netlink.h"
#include "providers/provider.h"
#include "fsutil.h"
#include "netns.h"
#include "pidlock.h"
#include "xalloc.h"

#define T_BRIDGE "kvtest0"
#define T_CIDR "10.199.0.0/24"
#define T_GW "10.199.0.1"
#define T_CGROUP_ROOT "kiyot-test"
#define T_CLUSTER "test-cluster"
#define CELL_TESTS_LOCK "/run/lock/kiyot-test-provider-local.lock"

/* ---- pure functions ---- */

static void test_provider_local__cidr_parses_network_and_prefix(void **state)
{
	struct cellnet_cidr c;
	struct err err = ERR_INIT;
	char s[CELLNET_IP_SIZE];

	(void)state;
	assert_ok(cellnet_parse_cidr("10.77.0.0/16", &c, &err));
	assert_int_equal(c.prefix, 16);
	cellnet_ip_str(cellnet_gateway(&c), s, sizeof(s));
	assert_string_equal(s, "10.77.0.1");
	cellnet_ip_str(cellnet_broadcast(&c), s, sizeof(s));
	assert_string_equal(s, "10.77.255.255");
}

static void test_provider_local__cidr_rejects_what_cannot_hold_cells(void **state)
{
	static const char *const bad[] = { "10.77.0.0",	    "10.77.0.0/",
					   "10.77.0.0/31",  "10.77.0.0/7",
					   "10.77.0.0/x",   "10.77.0/16",
					   "10.77.0.0/16x", "",
					   "10.77.0.0/-1" };
	struct cellnet_cidr c;
	struct err err = ERR_INIT;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		assert_int_equal(cellnet_parse_cidr(bad[i], &c, &err), -EINVAL);
	/* host bits set: the message proposes the network the user probably meant */
	assert_int_equal(cellnet_parse_cidr("10.77.3.4/16", &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "10.77.0.0/16"));
}

/* Every cell's agent holds an inotify instance and a watch per unit, all as root: the limits
 * kiyot raises to fit every cell of the CIDR beside the node's own (a /16: 65533 cells, where
 * the kernel's default of 128 instances stops the 129th). */
static void test_provider_local__inotify_limits_fit_every_cell(void **state)
{
	static const struct {
		const char *cidr;
		long instances, watches;
	} cases[] = {
		{ "10.77.0.0/16", 65533 + 128, 65533 * 32 + 8192 },
		{ "10.77.0.0/24", 253 + 128, 253 * 32 + 8192 },
		{ "10.77.0.0/30", 1 + 128, 32 + 8192 },
		/* a /8 holds more cells than a machine runs: counted as 65536 */
		{ "10.0.0.0/8", 65536 + 128, 65536L * 32 + 8192 },
	};
	struct err err = ERR_INIT;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cellnet_cidr c;
		long instances = 0, watches = 0;

		assert_ok(cellnet_parse_cidr(cases[i].cidr, &c, &err));
		provider_local_inotify_need(&c, &instances, &watches);
		assert_int_equal(instances, cases[i].instances);
		assert_int_equal(watches, cases[i].watches);
	}
}

static void test_provider_local__ip_pick_skips_network_gateway_broadcast(void **state)
{
	struct cellnet_cidr c;
	struct err err = ERR_INIT;
	uint32_t ip, used[4];
	uint32_t got[4];

	(void)state;
	assert_ok(cellnet_parse_cidr("192.168.5.0/29", &c, &err));
	/* .0 network, .1 gateway, .7 broadcast: cells get .2 to .6 */
	assert_ok(cellnet_pick_ip(&c, NULL, 0, 0, &ip, &err));
	assert_int_equal(ip, 0xc0a80502u);
	for (int i = 0; i < 4; i++) {
		assert_ok(cellnet_pick_ip(&c, got, (size_t)i, 0, &got[i], &err));
		assert_true(cellnet_is_cell_ip(&c, got[i]));
	}
	for (int i = 0; i < 4; i++)
		for (int j = i + 1; j < 4; j++)
			assert_int_not_equal(got[i], got[j]);
	assert_false(cellnet_is_cell_ip(&c, 0xc0a80500u));
	assert_false(cellnet_is_cell_ip(&c, 0xc0a80501u));
	assert_false(cellnet_is_cell_ip(&c, 0xc0a80507u));
	assert_false(cellnet_is_cell_ip(&c, 0xc0a80508u));
	memcpy(used, got, sizeof(used));
	assert_ok(cellnet_pick_ip(&c, used, 4, 0, &ip, &err));
	assert_int_equal(ip, 0xc0a80506u);
}

static void test_provider_local__ip_pick_full_network_is_enospc(void **state)
{
	struct cellnet_cidr c;
	struct err err = ERR_INIT;
	uint32_t used[] = { 0xc0a80502u, 0xc0a80503u, 0xc0a80504u, 0xc0a80505u, 0xc0a80506u };
	uint32_t ip;

	(void)state;
	assert_ok(cellnet_parse_cidr("192.168.5.0/29", &c, &err));
	assert_int_equal(cellnet_pick_ip(&c, used, 5, 0, &ip, &err), -ENOSPC);
	assert_non_null(strstr(err.msg, "full"));
}

static void test_provider_local__ip_pick_starts_at_hint_and_wraps(void **state)
{
	struct cellnet_cidr c;
	struct err err = ERR_INIT;
	uint32_t used[] = { 0xc0a80506u };
	uint32_t ip;

	(void)state;
	assert_ok(cellnet_parse_cidr("192.168.5.0/29", &c, &err));
	assert_ok(cellnet_pick_ip(&c, NULL, 0, 0xc0a80504u, &ip, &err));
	assert_int_equal(ip, 0xc0a80504u);
	assert_ok(cellnet_pick_ip(&c, used, 1, 0xc0a80506u, &ip, &err));
	assert_int_equal(ip, 0xc0a80502u);
	/* a hint outside the cell range (the broadcast) starts at the first cell address */
	assert_ok(cellnet_pick_ip(&c, NULL, 0, 0xc0a80507u, &ip, &err));
	assert_int_equal(ip, 0xc0a80502u);
}

static void test_provider_local__veth_name_fits_ifnamsiz_and_is_stable(void **state)
{
	char a[CELLNET_IFNAME_SIZE], b[CELLNET_IFNAME_SIZE], c[CELLNET_IFNAME_SIZE];

	(void)state;
	cellnet_veth_name("0123456789012345678901234567890123456789", a, sizeof(a));
	assert_true(strlen(a) <= 15);
	assert_memory_equal(a, "kv", 2);
	cellnet_veth_name("cell-a", a, sizeof(a));
	cellnet_veth_name("cell-a", b, sizeof(b));
	cellnet_veth_name("cell-b", c, sizeof(c));
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
}

static void test_provider_local__cell_id_charset_and_length(void **state)
{
	(void)state;
	assert_true(cellnet_id_valid("abc-123"));
	assert_true(cellnet_id_valid("0123456789012345678901234567890123456789"));
	assert_false(cellnet_id_valid("01234567890123456789012345678901234567890"));
	assert_false(cellnet_id_valid(""));
	assert_false(cellnet_id_valid(NULL));
	assert_false(cellnet_id_valid("../etc"));
	assert_false(cellnet_id_valid("Cell"));
	assert_false(cellnet_id_valid("a b"));
}

/* ---- real cells (root) ---- */

/* What every cell test shares: a temp dir with the fixture agent and the state dir. */
struct fixture {
	char dir[64];
	char *state_dir;
	char *agent;
	struct provider prov;
	int have_prov;
};

/* Ids the cell tests use; teardown removes them whatever happened. */
static const char *const test_ids[] = { "kvt-one", "kvt-two", "kvt-orphan", "kvt-bad" };
#define MANY 20

/* A provider on the test bridge, network and cgroup root, with state in the fixture dir. */
static int fixture_provider(struct fixture *f, const char *agent, struct err *err)
{
	struct local_provider_config cfg = {
		.state_dir = f->state_dir,
		.bridge = T_BRIDGE,
		.cidr = T_CIDR,
		.agent_path = agent,
		.cgroup_root = T_CGROUP_ROOT,
		.cluster_id = T_CLUSTER,
	};
	int ret = provider_local_new(&cfg, &f->prov, err);

	f->have_prov = ret == 0;
	return ret;
}

/* The configuration of a provider that serves (kiyot serve's: it restores the network). */
static struct local_provider_config serving_config(const struct fixture *f)
{
	return (struct local_provider_config){
		.state_dir = f->state_dir,
		.bridge = T_BRIDGE,
		.cidr = T_CIDR,
		.agent_path = f->agent,
		.cgroup_root = T_CGROUP_ROOT,
		.cluster_id = T_CLUSTER,
		.restore_network = 1,
	};
}

/* Temp dir, fixture agent (prints its arguments, then sleeps), provider. */
static int cell_setup(void **state)
{
	static const char script[] = "#!/bin/sh\necho \"agent args: $*\"\nexec sleep 600\n";
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	snprintf(f->dir, sizeof(f->dir), "/tmp/kvtest-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->state_dir = xasprintf("%s/cells", f->dir);
	f->agent = xasprintf("%s/agent.sh", f->dir);
	if (fs_write_file(f->agent, script, strlen(script), 0755, &err) < 0 ||
	    fixture_provider(f, f->agent, &err) < 0) {
		print_error("setup: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

/* Terminates every id a test may have made, drops the bridge and the cgroup root. */
static int cell_teardown(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char id[32];
	int nl;

	if (!f)
		return 0;
	if (!f->have_prov)
		fixture_provider(f, f->agent, &err);
	if (f->have_prov) {
		for (size_t i = 0; i < ARRAY_SIZE(test_ids); i++)
			f->prov.ops->terminate(f->prov.self, test_ids[i], &err);
		for (int i = 0; i < MANY; i++) {
			snprintf(id, sizeof(id), "kvt-many-%d", i);
			f->prov.ops->terminate(f->prov.self, id, &err);
		}
		f->prov.ops->destroy(f->prov.self);
	}
	nl = nl_open(-1, &err);
	if (nl >= 0) {
		nl_link_delete(nl, T_BRIDGE, &err);
		close(nl);
	}
	cgroup_remove_tree("memory", T_CGROUP_ROOT, &err);
	cgroup_remove_tree("cpu", T_CGROUP_ROOT, &err);
	cgroup_remove_tree("pids", T_CGROUP_ROOT, &err);
	fs_remove_tree(f->dir, &err);
	free(f->state_dir);
	free(f->agent);
	free(f);
	return 0;
}

/* A spec for a 2-vCPU, 512 MiB cell. */
static struct cell_spec spec_for(const char *id)
{
	struct cell_spec s = {
		.cell_id = id,
		.cluster_id = T_CLUSTER,
		.pod_uid = "uid-1",
		.pod_name = "web",
		.pod_namespace = "default",
		.instance_type = "t3.nano",
		.cpus = 2,
		.memory_bytes = 512LL << 20,
		.bootstrap = "{\"cell\":\"x\"}",
	};
	return s;
}

/* In a child inside the netns at ns_path: sends one ICMP echo to gw and waits 2 s for the
 * reply. Returns 0 when the gateway answered. */
static int ping_from_netns(const char *ns_path, const char *gw)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct sockaddr_in to = { .sin_family = AF_INET };
		struct icmphdr req = { .type = ICMP_ECHO };
		unsigned char buf[1500];
		int ns = open(ns_path, O_RDONLY);
		int fd;

		req.un.echo.id = htons((unsigned short)getpid());
		req.un.echo.sequence = htons(1);
		{
			/* checksum of an 8-byte header without payload */
			const unsigned short *w = (const unsigned short *)&req;
			unsigned sum = 0;

			for (int i = 0; i < 4; i++)
				sum += w[i];
			sum = (sum >> 16) + (sum & 0xffff);
			sum += sum >> 16;
			req.checksum = (unsigned short)~sum;
		}
		inet_pton(AF_INET, gw, &to.sin_addr);
		if (ns < 0 || setns(ns, CLONE_NEWNET) < 0)
			_exit(2);
		fd = socket(AF_INET, SOCK_RAW, IPPROTO_ICMP);
		if (fd < 0 ||
		    sendto(fd, &req, sizeof(req), 0, (struct sockaddr *)&to, sizeof(to)) < 0)
			_exit(3);
		for (;;) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			const struct iphdr *ip = (const struct iphdr *)buf;
			const struct icmphdr *rep;
			ssize_t n;

			if (poll(&p, 1, 2000) <= 0)
				_exit(1);
			n = recv(fd, buf, sizeof(buf), 0);
			if (n < (ssize_t)sizeof(*ip) || n < ip->ihl * 4 + (ssize_t)sizeof(*rep))
				continue;
			rep = (const struct icmphdr *)(buf + ip->ihl * 4);
			if (rep->type == ICMP_ECHOREPLY && rep->un.echo.id == req.un.echo.id &&
			    ip->saddr == to.sin_addr.s_addr)
				_exit(0);
		}
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}

/* In a child inside the netns: whether ip is a local address there (bind succeeds) and a
 * default route exists (a UDP connect off the cell network succeeds). 0 when both hold. */
static int addr_and_route_in_netns(const char *ns_path, const char *ip)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		struct sockaddr_in off = { .sin_family = AF_INET, .sin_port = htons(9) };
		int ns = open(ns_path, O_RDONLY);
		int fd;

		inet_pton(AF_INET, ip, &sa.sin_addr);
		inet_pton(AF_INET, "192.0.2.1", &off.sin_addr);
		if (ns < 0 || setns(ns, CLONE_NEWNET) < 0)
			_exit(2);
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(1);
		if (connect(fd, (struct sockaddr *)&off, sizeof(off)) < 0)
			_exit(5);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 4;
}

/* The contents of a cgroup control file without its newline. */
static char *cg_value(const char *ctrl, const char *id, const char *file)
{
	_cleanup_free_ char *rel = xasprintf("%s/%s", T_CGROUP_ROOT, id);
	struct err err = ERR_INIT;
	char *v = NULL;

	if (cgroup_read(ctrl, rel, file, &v, &err) < 0)
		return xstrdup("");
	v[strcspn(v, "\n")] = '\0';
	return v;
}

/* Whether pid is listed in the cell's memory cgroup. */
static int pid_in_cgroup(const char *id, long pid)
{
	_cleanup_free_ char *rel = xasprintf("%s/%s", T_CGROUP_ROOT, id);
	_cleanup_free_ char *all = NULL;
	struct err err = ERR_INIT;
	char *p, *end;

	if (cgroup_read("memory", rel, "cgroup.procs", &all, &err) < 0)
		return 0;
	for (p = all; *p; p = end) {
		long v = strtol(p, &end, 10);

		if (end == p)
			break;
		if (v == pid)
			return 1;
	}
	return 0;
}

/* The agent pid the provider recorded, read back from cell.json. */
static long recorded_agent_pid(const struct fixture *f, const char *id)
{
	_cleanup_free_ char *path = xasprintf("%s/%s/cell.json", f->state_dir, id);
	_cleanup_free_ char *data = NULL;
	struct err err = ERR_INIT;
	char *p;

	if (fs_read_file(path, 65536, &data, NULL, &err) < 0)
		return -1;
	p = strstr(data, "\"agent_pid\":");
	return p ? strtol(p + strlen("\"agent_pid\":"), NULL, 10) : -1;
}

/* Whether a process is gone (or a zombie nobody reaped yet). */
static int process_gone(long pid)
{
	_cleanup_free_ char *path = xasprintf("/proc/%ld/stat", pid);
	_cleanup_free_ char *data = NULL;
	struct err err = ERR_INIT;
	char *p;

	if (fs_read_file(path, 4096, &data, NULL, &err) < 0)
		return 1;
	p = strrchr(data, ')');
	return p && p[1] && (p[2] == 'Z' || p[2] == 'X');
}

/* The parent pid of a process from /proc/<pid>/stat. */
static long parent_of(long pid)
{
	_cleanup_free_ char *path = xasprintf("/proc/%ld/stat", pid);
	_cleanup_free_ char *data = NULL;
	struct err err = ERR_INIT;
	char *p;

	if (fs_read_file(path, 4096, &data, NULL, &err) < 0)
		return -1;
	p = strrchr(data, ')');
	return p ? strtol(p + 4, NULL, 10) : -1;
}

/* Whether a file's contents contain needle, waiting up to 5 s for a process to write it. */
static int file_gets(const char *path, const char *needle)
{
	for (int i = 0; i < 500; i++) {
		_cleanup_free_ char *data = NULL;
		struct err err = ERR_INIT;

		if (fs_read_file(path, 65536, &data, NULL, &err) == 0 && strstr(data, needle))
			return 1;
		usleep(10000);
	}
	return 0;
}

static int unit_status;

/* Waits for the pid *arg, keeping its status in unit_status. */
static void *reap(void *arg)
{
	pid_t pid = *(pid_t *)arg;

	while (waitpid(pid, &unit_status, 0) < 0 && errno == EINTR)
		;
	return NULL;
}

/* Starts `sleep 600` in a sub-cgroup of the cell (memory and pids), as the agent does for
 * its units, and returns its pid. */
static pid_t unit_in_subcgroup(const char *id)
{
	_cleanup_free_ char *rel = xasprintf("%s/%s/unit-1", T_CGROUP_ROOT, id);
	struct err err = ERR_INIT;
	pid_t pid;

	if (cgroup_create("memory", rel, &err) < 0 || cgroup_create("pids", rel, &err) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (cgroup_write("memory", rel, "cgroup.procs", "0", &err) < 0 ||
		    cgroup_write("pids", rel, "cgroup.procs", "0", &err) < 0)
			_exit(1);
		execl("/bin/sleep", "sleep", "600", (char *)NULL);
		_exit(1);
	}
	/* in both cgroups before the caller goes on, or a teardown could miss it */
	for (int i = 0; pid > 0 && i < 200; i++) {
		_cleanup_free_ char *procs = NULL, *want = xasprintf("%d", (int)pid);

		if (cgroup_read("pids", rel, "cgroup.procs", &procs, &err) == 0 &&
		    strstr(procs, want))
			return pid;
		usleep(10000);
	}
	return -1;
}

/* Asserts that everything of cell id is gone: netns, veth, cgroups, state directory. */
static void assert_cell_gone(const struct fixture *f, const char *id)
{
	_cleanup_free_ char *ns = xasprintf("/run/netns/kiyot-%s", id);
	_cleanup_free_ char *dir = xasprintf("%s/%s", f->state_dir, id);
	_cleanup_free_ char *rel = xasprintf("%s/%s", T_CGROUP_ROOT, id);
	_cleanup_free_ char *mem = cgroup_path("memory", rel, NULL);
	_cleanup_free_ char *cpu = cgroup_path("cpu", rel, NULL);
	_cleanup_free_ char *pids = cgroup_path("pids", rel, NULL);
	char veth[CELLNET_IFNAME_SIZE];
	_cleanup_free_ char *sys = NULL;

	cellnet_veth_name(id, veth, sizeof(veth));
	sys = xasprintf("/sys/class/net/%s", veth);
	assert_false(fs_exists(ns));
	/* the kernel destroys the veth pair in the background once the netns is released */
	for (int i = 0; i < 500 && fs_exists(sys); i++)
		usleep(10000);
	assert_false(fs_exists(sys));
	assert_false(fs_exists(mem));
	assert_false(fs_exists(cpu));
	assert_false(fs_exists(pids));
	assert_false(fs_exists(dir));
}

/* A launched cell is a netns with eth0 holding the cell's address and a default route, the
 * bridge answers ping from inside, the cgroups carry the instance type's limits, and the
 * agent runs inside all of that, detached from kiyot. Terminate removes all of it. */
static void test_provider_local__launch_builds_cell_terminate_removes_it(void **state)
{
	struct fixture *f = *state;
	struct cell_spec spec = spec_for("kvt-one");
	struct cell_info info = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *ns = xasprintf("/run/netns/kiyot-kvt-one");
	_cleanup_free_ char *boot = xasprintf("%s/kvt-one/bootstrap.json", f->state_dir);
	_cleanup_free_ char *logp = xasprintf("%s/kvt-one/agent.log", f->state_dir);
	_cleanup_free_ char *want_args = xasprintf("agent args: --bootstrap %s", boot);
	_cleanup_free_ char *agent_ns = NULL;
	_cleanup_free_ char *v = NULL;
	_cleanup_free_ char *data = NULL;
	char veth[CELLNET_IFNAME_SIZE], link[64], master[64];
	_cleanup_free_ char *mnt = xasprintf("%s/kvt-one/agent/rootfs", f->state_dir);
	struct stat st_ns, st_agent, st_boot;
	pid_t unit;
	pthread_t reaper;
	ssize_t n;
	long pid;
	int status;

	assert_ok(f->prov.ops->launch(f->prov.self, &spec, &info, &err));
	assert_int_equal(info.phase, CELL_RUNNING);
	assert_string_equal(info.cell_id, "kvt-one");
	assert_string_equal(info.instance_id, "local-kvt-one");
	assert_string_equal(info.instance_type, "t3.nano");
	assert_string_equal(info.pod_uid, "uid-1");
	assert_string_equal(info.ip, "10.199.0.2");
	assert_true(info.launched_ns > 0);

	assert_true(nl_netns_is_mounted(ns));
	assert_int_equal(addr_and_route_in_netns(ns, info.ip), 0);
	assert_int_equal(ping_from_netns(ns, T_GW), 0);
	cellnet_veth_name("kvt-one", veth, sizeof(veth));
	snprintf(link, sizeof(link), "/sys/class/net/%s/master", veth);
	n = readlink(link, master, sizeof(master) - 1);
	assert_true(n > 0);
	master[n] = '\0';
	assert_non_null(strstr(master, T_BRIDGE));

	v = cg_value("memory", "kvt-one", "memory.limit_in_bytes");
	assert_string_equal(v, "536870912");
	free(v);
	v = cg_value("cpu", "kvt-one", "cpu.cfs_period_us");
	assert_string_equal(v, "100000");
	free(v);
	v = cg_value("cpu", "kvt-one", "cpu.cfs_quota_us");
	assert_string_equal(v, "200000");
	free(v);
	v = cg_value("pids", "kvt-one", "pids.max");
	assert_string_equal(v, "4096");
	free(v);
	v = NULL;

	pid = recorded_agent_pid(f, "kvt-one");
	assert_true(pid > 1);
	assert_false(process_gone(pid));
	assert_true(pid_in_cgroup("kvt-one", pid));
	assert_int_not_equal(parent_of(pid), getpid());
	agent_ns = xasprintf("/proc/%ld/ns/net", pid);
	assert_int_equal(stat(ns, &st_ns), 0);
	assert_int_equal(stat(agent_ns, &st_agent), 0);
	assert_int_equal(st_ns.st_ino, st_agent.st_ino);
	assert_int_equal(stat(boot, &st_boot), 0);
	assert_int_equal(st_boot.st_mode & 0777, 0600);
	assert_ok(fs_read_file(boot, 65536, &data, NULL, &err));
	/* the document as given, plus where this cell's agent keeps its state and the node's netns */
	{
		_cleanup_free_ char *want =
			xasprintf("{\"cell\":\"x\",\"host_netns\":\"/run/netns/"
				  "kiyotnode\",\"state_dir\":\"%s/kvt-one/agent\"}",
				  f->state_dir);

		assert_string_equal(data, want);
	}
	free(data);
	data = NULL;
	assert_true(file_gets(logp, want_args));
	cell_info_release(&info);

	/* what the agent leaves: unit cgroups with processes, mounts under the state dir */
	unit = unit_in_subcgroup("kvt-one");
	assert_true(unit > 0);
	assert_ok(fs_mkdir_p(mnt, 0755, &err));
	assert_int_equal(mount("tmpfs", mnt, "tmpfs", 0, NULL), 0);
	/* reaped as it dies, as its parent in a cell would: a zombie holds its cgroup */
	assert_int_equal(pthread_create(&reaper, NULL, reap, &unit), 0);
	assert_ok(f->prov.ops->terminate(f->prov.self, "kvt-one", &err));
	assert_int_equal(pthread_join(reaper, NULL), 0);
	status = unit_status;
	assert_true(WIFSIGNALED(status));
	assert_cell_gone(f, "kvt-one");
	assert_true(process_gone(pid));
	/* terminate is idempotent */
	assert_ok(f->prov.ops->terminate(f->prov.self, "kvt-one", &err));
}

/* Launching an id twice returns the same cell; another id gets another address; a stale link
 * holding the cell's veth name does not stop a launch. */
static void test_provider_local__launch_idempotent_addresses_unique(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one"), two = spec_for("kvt-two");
	struct cell_info a = { 0 }, b = { 0 }, c = { 0 };
	struct err err = ERR_INIT;
	char veth[CELLNET_IFNAME_SIZE];
	long pid;
	int nl;

	cellnet_veth_name("kvt-two", veth, sizeof(veth));
	nl = nl_open(-1, &err);
	assert_true(nl >= 0);
	assert_ok(nl_veth_create(nl, veth, 0, "kvtest-stale", -1, &err));
	close(nl);

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	pid = recorded_agent_pid(f, "kvt-one");
	assert_ok(f->prov.ops->launch(f->prov.self, &one, &b, &err));
	assert_string_equal(a.ip, b.ip);
	assert_int_equal(a.launched_ns, b.launched_ns);
	assert_int_equal(b.phase, CELL_RUNNING);
	assert_int_equal(recorded_agent_pid(f, "kvt-one"), pid);
	assert_ok(f->prov.ops->launch(f->prov.self, &two, &c, &err));
	assert_string_not_equal(a.ip, c.ip);
	assert_int_equal(c.phase, CELL_RUNNING);
	cell_info_release(&a);
	cell_info_release(&b);
	cell_info_release(&c);
}

/* A listening socket on 127.0.0.1 (any port) in netns (NULL: this one); fills *port. */
static int listen_loopback(const char *netns, uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	struct err err = ERR_INIT;
	int fd = netns_tcp_socket(netns, &err);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* dial reaches 127.0.0.1:port in the cell's network namespace (a listener there, not the
 * node's); a host-network dial reaches the node's; a closed port is ECONNREFUSED naming it,
 * and a cell that does not exist is ENOENT. */
static void test_provider_local__dial_reaches_the_cells_loopback(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one");
	struct cell_info a = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *ns = NULL;
	uint16_t port, node_port;
	int lfd, nfd, c, s;
	char got[8] = { 0 };

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	ns = xasprintf("%s/%skvt-one", CELLNET_NETNS_DIR, CELLNET_NETNS_PREFIX);
	lfd = listen_loopback(ns, &port);
	c = f->prov.ops->dial(f->prov.self, "kvt-one", port, 0, &err);
	assert_true(c >= 0);
	s = accept(lfd, NULL, NULL);
	assert_true(s >= 0);
	assert_int_equal(write(c, "cell", 4), 4);
	assert_int_equal(read(s, got, sizeof(got)), 4);
	assert_string_equal(got, "cell");
	close(s);
	close(c);

	/* the node's loopback is another network: the cell's port is not there ... */
	nfd = listen_loopback(NULL, &node_port);
	close(lfd);
	err_clear(&err);
	assert_int_equal(f->prov.ops->dial(f->prov.self, "kvt-one", port, 0, &err), -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "kvt-one"));
	assert_non_null(strstr(err.msg, "connect to port"));
	/* ... and a host-network pod's connection lands there */
	c = f->prov.ops->dial(f->prov.self, "kvt-one", node_port, 1, &err);
	assert_true(c >= 0);
	s = accept(nfd, NULL, NULL);
	assert_true(s >= 0);
	close(s);
	close(c);
	close(nfd);

	err_clear(&err);
	assert_int_equal(f->prov.ops->dial(f->prov.self, "kvt-none", port, 0, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "kvt-none"));
	cell_info_release(&a);
}

/* Finds id in a list answer. */
static const struct cell_info *find_cell(const struct cell_info *a, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(a[i].cell_id, id))
			return &a[i];
	return NULL;
}

/* A restarted provider knows the running cells from their records: it lists them and never
 * hands their addresses out again. */
static void test_provider_local__restart_keeps_cells_and_addresses(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one"), two = spec_for("kvt-two");
	struct cell_info a = { 0 }, b = { 0 }, *list = NULL;
	const struct cell_info *got;
	struct err err = ERR_INIT;
	size_t n = 0;

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	f->prov.ops->destroy(f->prov.self);
	f->have_prov = 0;
	assert_ok(fixture_provider(f, f->agent, &err));
	assert_ok(f->prov.ops->list(f->prov.self, &list, &n, &err));
	got = find_cell(list, n, "kvt-one");
	assert_non_null(got);
	assert_int_equal(got->phase, CELL_RUNNING);
	assert_string_equal(got->ip, a.ip);
	assert_string_equal(got->instance_type, "t3.nano");
	cell_info_array_free(list, n);
	assert_ok(f->prov.ops->launch(f->prov.self, &two, &b, &err));
	assert_string_not_equal(a.ip, b.ip);
	cell_info_release(&a);
	cell_info_release(&b);
}

/* A cell whose agent died is FAILED; a kiyot-* netns without a record is someone else's (another
 * kiyot on the host) and is not listed, so garbage collection never touches it; terminate by
 * id still cleans it. */
static void test_provider_local__list_reports_dead_agent_and_ignores_foreign_netns(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one");
	struct cell_info a = { 0 }, *list = NULL;
	const struct cell_info *got;
	struct err err = ERR_INIT;
	size_t n = 0;
	long pid;
	int fd;

	fd = nl_netns_create("/run/netns/kiyot-kvt-orphan", &err);
	assert_true(fd >= 0);
	close(fd);
	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	pid = recorded_agent_pid(f, "kvt-one");
	assert_int_equal(kill((pid_t)pid, SIGKILL), 0);
	for (int i = 0; i < 500 && !process_gone(pid); i++)
		usleep(10000);
	assert_ok(f->prov.ops->list(f->prov.self, &list, &n, &err));
	got = find_cell(list, n, "kvt-one");
	assert_non_null(got);
	assert_int_equal(got->phase, CELL_FAILED);
	assert_null(find_cell(list, n, "kvt-orphan"));
	cell_info_array_free(list, n);
	cell_info_release(&a);
	assert_ok(f->prov.ops->terminate(f->prov.self, "kvt-orphan", &err));
	assert_cell_gone(f, "kvt-orphan");
}

/* An agent that cannot start fails the launch with the reason and leaves nothing behind. */
static void test_provider_local__launch_failure_leaves_nothing(void **state)
{
	struct fixture *f = *state;
	struct cell_spec bad = spec_for("kvt-bad");
	struct cell_info a = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *missing = xasprintf("%s/no-such-agent", f->dir);

	f->prov.ops->destroy(f->prov.self);
	f->have_prov = 0;
	assert_ok(fixture_provider(f, missing, &err));
	assert_int_equal(f->prov.ops->launch(f->prov.self, &bad, &a, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "exec"));
	assert_null(a.cell_id);
	assert_cell_gone(f, "kvt-bad");
}

/* Twenty cells get twenty addresses, all run, and all go away. */
static void test_provider_local__many_cells_distinct_and_all_removed(void **state)
{
	struct fixture *f = *state;
	struct cell_info infos[MANY] = { { 0 } }, *list = NULL;
	struct err err = ERR_INIT;
	char ids[MANY][32];
	size_t n = 0;

	for (int i = 0; i < MANY; i++) {
		struct cell_spec s;

		snprintf(ids[i], sizeof(ids[i]), "kvt-many-%d", i);
		s = spec_for(ids[i]);
		assert_ok(f->prov.ops->launch(f->prov.self, &s, &infos[i], &err));
		assert_int_equal(infos[i].phase, CELL_RUNNING);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(infos[i].ip, infos[j].ip);
	}
	assert_ok(f->prov.ops->list(f->prov.self, &list, &n, &err));
	for (int i = 0; i < MANY; i++)
		assert_non_null(find_cell(list, n, ids[i]));
	cell_info_array_free(list, n);
	for (int i = 0; i < MANY; i++) {
		assert_ok(f->prov.ops->terminate(f->prov.self, ids[i], &err));
		assert_cell_gone(f, ids[i]);
		cell_info_release(&infos[i]);
	}
	assert_ok(f->prov.ops->list(f->prov.self, &list, &n, &err));
	for (int i = 0; i < MANY; i++)
		assert_null(find_cell(list, n, ids[i]));
	cell_info_array_free(list, n);
}

/* Whether the cell's veth has its host end on the test bridge. */
static int veth_on_bridge(const char *id)
{
	char veth[CELLNET_IFNAME_SIZE], link[64], master[64];
	ssize_t n;

	cellnet_veth_name(id, veth, sizeof(veth));
	snprintf(link, sizeof(link), "/sys/class/net/%s/master", veth);
	n = readlink(link, master, sizeof(master) - 1);
	if (n <= 0)
		return 0;
	master[n] = '\0';
	return strstr(master, T_BRIDGE) != NULL;
}

/* How many agents the cell's agent.log says were started (the fixture agent prints its
 * arguments once). */
static int agents_started(const struct fixture *f, const char *id)
{
	_cleanup_free_ char *path = xasprintf("%s/%s/agent.log", f->state_dir, id);
	_cleanup_free_ char *data = NULL;
	struct err err = ERR_INIT;
	int n = 0;

	if (fs_read_file(path, 65536, &data, NULL, &err) < 0)
		return 0;
	for (const char *p = data; (p = strstr(p, "agent args:")); p++)
		n++;
	return n;
}

/* Kills the recorded agent and waits for it to go. */
static void kill_agent(const struct fixture *f, const char *id)
{
	long pid = recorded_agent_pid(f, id);

	assert_true(pid > 1);
	assert_int_equal(kill((pid_t)pid, SIGKILL), 0);
	for (int i = 0; i < 500 && !process_gone(pid); i++)
		usleep(10000);
	assert_true(process_gone(pid));
}

/* A crash between a cell's veth and its addresses, or anyone deleting its link: launching the
 * cell again (a retried RunPodSandbox after kiyot restarted) makes the network whole in the
 * netns the cell has, with the same address, and keeps the agent that lives there. */
static void test_provider_local__relaunch_repairs_the_network_and_keeps_the_agent(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one");
	struct cell_info a = { 0 }, b = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *ns = xasprintf("/run/netns/kiyot-kvt-one");
	char veth[CELLNET_IFNAME_SIZE];
	long pid;
	int nl;

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	pid = recorded_agent_pid(f, "kvt-one");
	cellnet_veth_name("kvt-one", veth, sizeof(veth));
	nl = nl_open(-1, &err);
	assert_true(nl >= 0);
	assert_ok(nl_link_delete(nl, veth, &err));
	close(nl);
	assert_false(veth_on_bridge("kvt-one"));
	assert_int_not_equal(ping_from_netns(ns, T_GW), 0);

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &b, &err));
	assert_int_equal(b.phase, CELL_RUNNING);
	assert_string_equal(b.ip, a.ip);
	assert_true(veth_on_bridge("kvt-one"));
	assert_int_equal(addr_and_route_in_netns(ns, a.ip), 0);
	assert_int_equal(ping_from_netns(ns, T_GW), 0);
	assert_int_equal(recorded_agent_pid(f, "kvt-one"), pid);
	assert_false(process_gone(pid));
	assert_int_equal(agents_started(f, "kvt-one"), 1);
	cell_info_release(&a);
	cell_info_release(&b);
}

/* A crash between starting a cell's agent and recording it: the agent holds the cell's lock,
 * and launching again, listing and healing all take it for the cell's agent and start no
 * second one; terminate kills it though no record named it. */
static void test_provider_local__an_agent_holding_the_lock_is_kept_not_doubled(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one");
	struct cell_info a = { 0 }, b = { 0 }, *list = NULL;
	const struct cell_info *got;
	struct cell_record r = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *dir = xasprintf("%s/kvt-one", f->state_dir);
	_cleanup_free_ char *agent_dir = xasprintf("%s/agent", dir);
	_cleanup_free_ char *lock = xasprintf("%s/%s", agent_dir, PIDLOCK_AGENT_FILE);
	int p[2];
	char ok;
	size_t n = 0;
	pid_t holder;

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	/* the agent logs its start on its own time: let it, so the count below is of starts */
	for (int i = 0; i < 1000 && agents_started(f, "kvt-one") == 0; i++)
		usleep(10000);
	assert_int_equal(agents_started(f, "kvt-one"), 1);
	kill_agent(f, "kvt-one");
	assert_ok(cell_record_load(dir, "kvt-one", &r, &err));
	r.agent_pid = 0;
	r.agent_start = 0;
	assert_ok(cell_record_save(dir, &r, &err));
	cell_record_release(&r);
	/* the agent the crashed kiyot started, holding the cell's lock in its state directory */
	assert_ok(fs_mkdir_p(agent_dir, 0700, &err));
	assert_int_equal(pipe(p), 0);
	holder = fork();
	if (holder == 0) {
		close(p[0]);
		if (pidlock_take(lock, &err) < 0 || write(p[1], "y", 1) != 1)
			_exit(1);
		alarm(60); /* gone by itself should the test fail before it kills it */
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &ok, 1), 1);
	close(p[0]);

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &b, &err));
	assert_int_equal(b.phase, CELL_RUNNING);
	assert_int_equal(recorded_agent_pid(f, "kvt-one"), holder);
	assert_ok(f->prov.ops->list(f->prov.self, &list, &n, &err));
	got = find_cell(list, n, "kvt-one");
	assert_non_null(got);
	assert_int_equal(got->phase, CELL_RUNNING);
	cell_info_array_free(list, n);
	assert_ok(f->prov.ops->heal(f->prov.self, "kvt-one", &err));
	assert_int_equal(agents_started(f, "kvt-one"), 1);

	assert_ok(f->prov.ops->terminate(f->prov.self, "kvt-one", &err));
	assert_int_equal(waitpid(holder, NULL, 0), holder);
	assert_cell_gone(f, "kvt-one");
	cell_info_release(&a);
	cell_info_release(&b);
}

/* A cell whose network namespace is gone (a crash before it was made, or a wiped /run) has
 * nothing left to resume: launching it again builds it anew, with an agent. */
static void test_provider_local__relaunch_without_a_netns_builds_the_cell_again(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one");
	struct cell_info a = { 0 }, b = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *ns = xasprintf("/run/netns/kiyot-kvt-one");
	long pid;

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	kill_agent(f, "kvt-one");
	assert_ok(nl_netns_delete(ns, &err));

	assert_ok(f->prov.ops->launch(f->prov.self, &one, &b, &err));
	assert_int_equal(b.phase, CELL_RUNNING);
	assert_true(nl_netns_is_mounted(ns));
	assert_int_equal(addr_and_route_in_netns(ns, b.ip), 0);
	assert_true(veth_on_bridge("kvt-one"));
	pid = recorded_agent_pid(f, "kvt-one");
	assert_true(pid > 1);
	assert_false(process_gone(pid));
	cell_info_release(&a);
	cell_info_release(&b);
}

/* Another process writing the bridge's nat table (its own chains, as a second kiyot or a test
 * would): an ebtables-restore every 20 ms or so until killed. */
static pid_t ebtables_noise(void)
{
	static const char script[] =
		"while :; do { echo '*nat'; for c in 1 2 3 4 5 6 7 8; do echo \":KVTNOISE$c "
		"ACCEPT\"; done; for c in 1 2 3 4 5 6 7 8; do echo \"-A KVTNOISE$c -p IPv4 "
		"--ip-src 10.198.0.$c -j RETURN\"; echo \"-A KVTNOISE$c -j DROP\"; done; echo "
		"COMMIT; } | ebtables-restore --noflush >/dev/null 2>&1; sleep 0.02; done";
	pid_t pid = fork();

	if (pid == 0) {
		setpgid(0, 0);
		execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Stops the noise and removes its chains. */
static void ebtables_noise_stop(pid_t pid)
{
	static const char drop[] = "{ echo '*nat'; for c in 1 2 3 4 5 6 7 8; do echo \"-F "
				   "KVTNOISE$c\"; echo \"-X KVTNOISE$c\"; done; echo COMMIT; } | "
				   "ebtables-restore --noflush >/dev/null 2>&1";
	pid_t p;

	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	p = fork();
	if (p == 0) {
		execl("/bin/sh", "sh", "-c", drop, (char *)NULL);
		_exit(127);
	}
	waitpid(p, NULL, 0);
}

/* Cells are launched and terminated, their anti-spoofing rules written each time, while another
 * process writes the nat table (ebtables-restore has no lock, and a write that meets another
 * fails): every launch and terminate still succeeds. */
static void
test_provider_local__cells_come_and_go_while_another_process_writes_ebtables(void **state)
{
	struct fixture *f = *state;
	struct cell_info infos[MANY] = { { 0 } };
	struct err err = ERR_INIT;
	char ids[MANY][32];
	pid_t noise = ebtables_noise();
	int failed = 0;

	assert_true(noise > 0);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < MANY / 2; i++) {
			struct cell_spec s;

			snprintf(ids[i], sizeof(ids[i]), "kvt-many-%d", i);
			s = spec_for(ids[i]);
			if (f->prov.ops->launch(f->prov.self, &s, &infos[i], &err) < 0) {
				print_error("launch %s: %s\n", ids[i], err.msg);
				failed++;
			}
		}
		for (int i = 0; i < MANY / 2; i++) {
			if (f->prov.ops->terminate(f->prov.self, ids[i], &err) < 0) {
				print_error("terminate %s: %s\n", ids[i], err.msg);
				failed++;
			}
			cell_info_release(&infos[i]);
		}
	}
	ebtables_noise_stop(noise);
	assert_int_equal(failed, 0);
}

/* How many lines the file at path has; 0 when there is none. */
static int lines_of(const char *path)
{
	FILE *fp = fopen(path, "r");
	int n = 0, c;

	if (!fp)
		return 0;
	while ((c = fgetc(fp)) != EOF)
		n += c == '\n';
	fclose(fp);
	return n;
}

/* The bridge's nat rules of the test network and of cells kvt-one and kvt-two, sorted. */
static char *our_nat_rules(void)
{
	char one[CELLNET_IFNAME_SIZE], two[CELLNET_IFNAME_SIZE];
	_cleanup_free_ char *cmd = NULL;
	char *text = NULL;
	size_t cap = 0;
	FILE *p;

	cellnet_veth_name("kvt-one", one, sizeof(one));
	cellnet_veth_name("kvt-two", two, sizeof(two));
	cmd = xasprintf("ebtables-save -t nat | grep -e 'KIYOT-CELLS-10.199.0.0-24' -e '%s' -e "
			"'%s' | sort",
			one, two);
	p = popen(cmd, "r");
	assert_non_null(p);
	if (getdelim(&text, &cap, '\0', p) < 0) {
		free(text);
		text = xstrdup("");
	}
	pclose(p);
	return text;
}

/* Once the first cell's rules are written, a launch and a termination write only their own
 * cell's (one ebtables-restore, no ebtables-save reading the node's rules: a process fewer on
 * every pod's start and stop), and leave what a provider starting afresh writes whole. */
static void test_provider_local__a_cell_writes_its_rules_without_reading_the_node(void **state)
{
	struct fixture *f = *state;
	struct cell_spec one = spec_for("kvt-one"), two = spec_for("kvt-two");
	struct cell_info a = { 0 }, b = { 0 }, c = { 0 };
	_cleanup_free_ char *bin = xasprintf("%s/bin", f->dir);
	_cleanup_free_ char *saves = xasprintf("%s/saves", f->dir);
	_cleanup_free_ char *wrapper = xasprintf("%s/ebtables-save", bin);
	_cleanup_free_ char *script = NULL, *path = NULL, *old_path = NULL, *before = NULL;
	_cleanup_free_ char *after = NULL;
	char real[256] = "";
	struct local_provider_config cfg = serving_config(f);
	struct err err = ERR_INIT;
	FILE *p = popen("command -v ebtables-save", "r");
	int first;

	assert_non_null(p);
	assert_non_null(fgets(real, sizeof(real), p));
	pclose(p);
	real[strcspn(real, "\n")] = '\0';
	/* ebtables-save as found in PATH, counting its runs */
	assert_int_equal(mkdir(bin, 0700), 0);
	script = xasprintf("#!/bin/sh\necho run >> %s\nexec %s \"$@\"\n", saves, real);
	assert_ok(fs_write_file(wrapper, script, strlen(script), 0755, &err));
	old_path = xstrdup(getenv("PATH") ? getenv("PATH") : "/usr/sbin:/usr/bin:/sbin:/bin");
	path = xasprintf("%s:%s", bin, old_path);
	setenv("PATH", path, 1);
	assert_ok(f->prov.ops->launch(f->prov.self, &one, &a, &err));
	first = lines_of(saves); /* the first cell: everything written whole, read first */
	assert_ok(f->prov.ops->launch(f->prov.self, &two, &b, &err));
	assert_ok(f->prov.ops->terminate(f->prov.self, "kvt-two", &err));
	assert_ok(f->prov.ops->launch(f->prov.self, &two, &c, &err));
	assert_int_equal(lines_of(saves), first);
	setenv("PATH", old_path, 1);
	/* the rules are those written whole at start */
	before = our_nat_rules();
	assert_non_null(strstr(before, "KIYOT-CELLS-10.199.0.0-24 -i "));
	f->prov.ops->destroy(f->prov.self);
	f->have_prov = 0;
	assert_ok(provider_local_new(&cfg, &f->prov, &err));
	f->have_prov = 1;
	after = our_nat_rules();
	assert_string_equal(before, after);
	cell_info_release(&a);
	cell_info_release(&b);
	cell_info_release(&c);
}

/* Ids that could escape the state directory or break interface names are refused. */
static void test_provider_local__bad_cell_id_refused(void **state)
{
	struct fixture *f = *state;
	struct cell_spec s = spec_for("../x");
	struct cell_info a = { 0 };
	struct err err = ERR_INIT;

	assert_int_equal(f->prov.ops->launch(f->prov.self, &s, &a, &err), -EINVAL);
	assert_int_equal(f->prov.ops->terminate(f->prov.self, "A/b", &err), -EINVAL);
}

/* The addresses of the test bridge as `ip -o -4 addr` prints them, "" when it has none or
 * does not exist. */
static void bridge_addrs(char *out, size_t size)
{
	FILE *f = popen("ip -o -4 addr show dev " T_BRIDGE " 2>/dev/null", "r");
	size_t n = f ? fread(out, 1, size - 1, f) : 0;

	out[n] = '\0';
	if (f)
		pclose(f);
}

/* kiyot's provider (restore_network, as `kiyot serve` makes it) has the bridge up with the
 * gateway address from its start: a pull through a mirror on that address, before the first
 * cell, leaves the node by the bridge and not by the default route. */
static void test_provider_local__a_serving_provider_makes_the_bridge_before_any_cell(void **state)
{
	struct fixture *f = *state;
	struct local_provider_config cfg = serving_config(f);
	struct err err = ERR_INIT;
	char addrs[512];
	int nl;

	f->prov.ops->destroy(f->prov.self);
	f->have_prov = 0;
	nl = nl_open(-1, &err);
	assert_true(nl >= 0);
	nl_link_delete(nl, T_BRIDGE, &err);
	close(nl);
	bridge_addrs(addrs, sizeof(addrs));
	assert_string_equal(addrs, "");
	if (provider_local_new(&cfg, &f->prov, &err) < 0)
		fail_msg("%s", err.msg);
	f->have_prov = 1;
	bridge_addrs(addrs, sizeof(addrs));
	assert_non_null(strstr(addrs, "inet 10.199.0.1/24"));
}

/* Moves the test into a network namespace of its own, and a mount namespace whose
 * /sys/class/net and /sys/devices/virtual/net show that network's devices (a sysfs shows the
 * network of whoever mounted it; the rest of /sys, the cgroups among it, stays the node's) and
 * whose /run/netns is a tmpfs of its own: the names the provider gives namespaces there (the
 * node's "kiyotnode" among them) are the node's otherwise, and a name made again here would
 * take the node's mount away from every kiyot on it. */
static int own_network(void)
{
	char dir[] = "/tmp/kvtest-sys-XXXXXX";
	static const char *const parts[] = { "class/net", "devices/virtual/net" };
	int ret = 0;

	if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    (mkdir(CELLNET_NETNS_DIR, 0755) < 0 && errno != EEXIST) ||
	    mount("tmpfs", CELLNET_NETNS_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755") < 0 ||
	    !mkdtemp(dir)) {
		fprintf(stderr, "test_provider_local: a network of its own: %s\n", strerror(errno));
		return -1;
	}
	if (mount("sysfs", dir, "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		ret = -1;
	for (size_t i = 0; ret == 0 && i < ARRAY_SIZE(parts); i++) {
		_cleanup_free_ char *from = xasprintf("%s/%s", dir, parts[i]);
		_cleanup_free_ char *to = xasprintf("/sys/%s", parts[i]);

		if (mount(from, to, NULL, MS_BIND, NULL) < 0)
			ret = -1;
	}
	if (ret < 0)
		fprintf(stderr, "test_provider_local: this network's sysfs: %s\n", strerror(errno));
	umount2(dir, MNT_DETACH);
	rmdir(dir);
	if (ret == 0) {
		struct err err = ERR_INIT;
		int nl = nl_open(-1, &err);

		if (nl < 0 || nl_link_up(nl, 1, &err) < 0) {
			fprintf(stderr, "test_provider_local: lo up: %s\n", err.msg);
			ret = -1;
		}
		if (nl >= 0)
			close(nl);
	}
	return ret;
}

int main(void)
{
	const struct CMUnitTest pure[] = {
		cmocka_unit_test(test_provider_local__cidr_parses_network_and_prefix),
		cmocka_unit_test(test_provider_local__cidr_rejects_what_cannot_hold_cells),
		cmocka_unit_test(test_provider_local__inotify_limits_fit_every_cell),
		cmocka_unit_test(test_provider_local__ip_pick_skips_network_gateway_broadcast),
		cmocka_unit_test(test_provider_local__ip_pick_full_network_is_enospc),
		cmocka_unit_test(test_provider_local__ip_pick_starts_at_hint_and_wraps),
		cmocka_unit_test(test_provider_local__veth_name_fits_ifnamsiz_and_is_stable),
		cmocka_unit_test(test_provider_local__cell_id_charset_and_length),
	};
#define CELL_TEST(t) cmocka_unit_test_setup_teardown(t, cell_setup, cell_teardown)
	const struct CMUnitTest cells[] = {
		CELL_TEST(test_provider_local__launch_builds_cell_terminate_removes_it),
		CELL_TEST(test_provider_local__launch_idempotent_addresses_unique),
		CELL_TEST(test_provider_local__restart_keeps_cells_and_addresses),
		CELL_TEST(test_provider_local__list_reports_dead_agent_and_ignores_foreign_netns),
		CELL_TEST(test_provider_local__launch_failure_leaves_nothing),
		CELL_TEST(test_provider_local__many_cells_distinct_and_all_removed),
		CELL_TEST(test_provider_local__bad_cell_id_refused),
		CELL_TEST(test_provider_local__dial_reaches_the_cells_loopback),
		CELL_TEST(test_provider_local__relaunch_repairs_the_network_and_keeps_the_agent),
		CELL_TEST(test_provider_local__an_agent_holding_the_lock_is_kept_not_doubled),
		CELL_TEST(test_provider_local__relaunch_without_a_netns_builds_the_cell_again),
		CELL_TEST(
			test_provider_local__cells_come_and_go_while_another_process_writes_ebtables),
		CELL_TEST(test_provider_local__a_cell_writes_its_rules_without_reading_the_node),
		CELL_TEST(test_provider_local__a_serving_provider_makes_the_bridge_before_any_cell),
	};
	int fails = cmocka_run_group_tests_name("pure", pure, NULL, NULL);
	int lock;

	if (geteuid() != 0) {
		fprintf(stderr, "test_provider_local: cell tests need root; skipped\n");
		return fails;
	}
	/* one run at a time on a machine: every run uses the same bridge, network and ids */
	lock = open(CELL_TESTS_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		fprintf(stderr, "test_provider_local: lock %s: %s\n", CELL_TESTS_LOCK,
			strerror(errno));
		return fails + 1;
	}
	if (own_network() < 0)
		return fails + 1;
	return fails + cmocka_run_group_tests_name("cells", cells, NULL, NULL);
}
