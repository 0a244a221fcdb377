/*
 * test_cellnat.c: the node's NAT for local cells' hostPorts. Parsing kiyot's rules out of
 * iptables-save runs anywhere; the rest needs root and the iptables command and runs in a
 * network namespace of its own (unshared at start), with a bridge of its own, so it never
 * touches the node's rules or a running kiyot.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testutil.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/local/cellnat.h"
#include "providers/local/netlink.h"
#include "fsutil.h"
#include "xalloc.h"

#define T_BRIDGE "kvtestnat0"
#define T_CIDR "10.197.0.0/16"
#define T_OTHER_CIDR "10.196.0.0/16"

/* set when the namespace, its bridge and iptables are there for the root tests */
static int netns_ready;

/* ---- parsing (pure) ---- */

static void test_cellnat__parse_reads_a_dnat_rule_as_iptables_save_prints_it(void **state)
{
	struct cellnat_rule r;

	(void)state;
	assert_int_equal(
		cellnat_rule_parse("-A KIYOT-HOSTPORTS -d 192.0.2.2/32 -p tcp -m tcp --dport 18080 "
				   "-m comment --comment \"kiyot-hostport 0123456789abcdef0123 "
				   "default/web\" -j DNAT --to-destination 10.77.0.5:8080",
				   &r),
		0);
	assert_string_equal(r.chain, "KIYOT-HOSTPORTS");
	assert_string_equal(r.cell_id, "0123456789abcdef0123");
	assert_string_equal(r.owner, "default/web");
	assert_string_equal(r.protocol, "tcp");
	assert_int_equal(r.dport, 18080);
	assert_string_equal(r.dst, "192.0.2.2");
	assert_string_equal(r.to, "10.77.0.5");
	assert_int_equal(r.to_port, 8080);
}

static void test_cellnat__parse_reads_a_hairpin_rule_and_every_address(void **state)
{
	struct cellnat_rule r;

	(void)state;
	assert_int_equal(
		cellnat_rule_parse(
			"-A KIYOT-HOSTPORTS-SNAT -s 10.77.0.0/16 -d 10.77.0.5/32 -p udp -m "
			"udp --dport 53 -m conntrack --ctstate DNAT -m comment --comment "
			"\"kiyot-hostport c1 kube-system/dns\" -j MASQUERADE",
			&r),
		0);
	assert_string_equal(r.chain, "KIYOT-HOSTPORTS-SNAT");
	assert_string_equal(r.cell_id, "c1");
	assert_string_equal(r.protocol, "udp");
	assert_int_equal(r.dport, 53);
	assert_string_equal(r.dst, "10.77.0.5");
	assert_string_equal(r.to, "");
	assert_int_equal(cellnat_rule_parse("-A KIYOT-HOSTPORTS -p sctp -m sctp --dport 9 -m "
					    "comment --comment \"kiyot-hostport c2 ns/p\" -j DNAT "
					    "--to-destination 10.77.0.6:9",
					    &r),
			 0);
	assert_string_equal(r.dst, ""); /* no -d: every address of the node */
}

static void test_cellnat__parse_leaves_other_rules_alone(void **state)
{
	static const char *const others[] = {
		/* the shared rules of kiyot's chains, not a cell's */
		"-A KIYOT-HOSTPORTS-SNAT -s 127.0.0.0/8 -o kiyot0 -m comment --comment \"kiyot "
		"hostports loopback\" -j MASQUERADE",
		"-A PREROUTING -m addrtype --dst-type LOCAL -m comment --comment \"kiyot "
		"hostports\" -j KIYOT-HOSTPORTS",
		/* someone else's chain with our words in it */
		"-A CNI-DN-1 -p tcp -m tcp --dport 80 -m comment --comment \"kiyot-hostport c1 "
		"a/b\" -j DNAT --to-destination 10.88.0.2:80",
		"-A KIYOT-HOSTPORTS -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.1.1.1:80",
		"-A KIYOT-HOSTPORTS -m comment --comment \"kiyot-hostport \" -j RETURN",
		":KIYOT-HOSTPORTS - [0:0]",
		"COMMIT",
		"",
	};
	struct cellnat_rule r;

	(void)state;
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		assert_int_equal(cellnat_rule_parse(others[i], &r), -1);
}

/* ---- against iptables, in a network namespace of the test's own ---- */

/* Runs a shell command line; its exit status. */
static int run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* What `iptables-save -t TABLE` prints now (caller frees). */
static char *saved(const char *table)
{
	_cleanup_free_ char *cmd = xasprintf("iptables-save -t %s", table);
	FILE *f = popen(cmd, "r");
	char *text = NULL;
	size_t cap = 0;
	ssize_t n;

	assert_non_null(f);
	n = getdelim(&text, &cap, '\0', f);
	pclose(f);
	if (n < 0) {
		free(text);
		return xstrdup("");
	}
	return text;
}

/* How many lines of `iptables-save -t TABLE` contain every one of the words (NULL-ended). */
static int count_lines(const char *table, const char *const *words)
{
	_cleanup_free_ char *text = saved(table);
	char *save = NULL;
	int n = 0;

	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int all = 1;

		for (size_t i = 0; words[i]; i++)
			all = all && strstr(l, words[i]);
		n += all;
	}
	return n;
}

static int rules_of(const char *cell_id)
{
	_cleanup_free_ char *tag = xasprintf("\"kiyot-hostport %s ", cell_id);
	const char *words[] = { "-A ", tag, NULL };

	return count_lines("nat", words);
}

/* Each test starts from empty tables. */
static int flush(void **state)
{
	(void)state;
	if (netns_ready)
		run("iptables-restore </dev/null && iptables -t nat -F && iptables -t nat -X");
	return 0;
}

/* Skips the calling test unless the namespace is there (root and iptables). */
#define NEED_NETNS()                                                                               \
	do {                                                                                       \
		if (!netns_ready)                                                                  \
			skip();                                                                    \
	} while (0)

static const struct cellnat_port web = { "tcp", 18080, 8080, "" };

static void test_cellnat__hostports_set_is_idempotent_and_guards_loopback(void **state)
{
	const char *guard[] = { "-A INPUT", "-i " T_BRIDGE, "127.0.0.0/8", "-j DROP", NULL };
	const char *jump[] = { "-A OUTPUT", "--dst-type LOCAL", "-j KIYOT-HOSTPORTS", NULL };
	const char *to_cell[] = { "-A FORWARD", "-o " T_BRIDGE, "--ctstate DNAT", "-j ACCEPT",
				  NULL };
	const char *from_cell[] = { "-A FORWARD", "-i " T_BRIDGE, "--ctstate DNAT", "-j ACCEPT",
				    NULL };
	_cleanup_free_ char *localnet = NULL, *forward = NULL;
	struct err err = ERR_INIT;

	(void)state;
	NEED_NETNS();
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cella", "default/web", "10.197.0.5",
					&web, 1, &err));
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cella", "default/web", "10.197.0.5",
					&web, 1, &err));
	assert_int_equal(rules_of("cella"), 2); /* the DNAT and the hairpin, once */
	assert_int_equal(count_lines("filter", guard), 1);
	assert_int_equal(count_lines("nat", jump), 1);
	assert_ok(fs_read_file("/proc/sys/net/ipv4/conf/" T_BRIDGE "/route_localnet", 16, &localnet,
			       NULL, &err));
	assert_int_equal(localnet[0], '1');
	/* a hairpin and other machines' calls are routed through the node */
	assert_int_equal(count_lines("filter", to_cell), 1);
	assert_int_equal(count_lines("filter", from_cell), 1);
	assert_ok(fs_read_file("/proc/sys/net/ipv4/ip_forward", 16, &forward, NULL, &err));
	assert_int_equal(forward[0], '1');
}

static void test_cellnat__hostports_second_pod_on_a_held_port_is_refused_naming_it(void **state)
{
	struct cellnat_port same_ip = { "tcp", 18080, 80, "10.1.2.3" };
	struct cellnat_port udp = { "udp", 18080, 80, "" };
	struct err err = ERR_INIT;

	(void)state;
	NEED_NETNS();
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cella", "default/web", "10.197.0.5",
					&web, 1, &err));
	assert_int_equal(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cellb", "team/other",
					       "10.197.0.6", &web, 1, &err),
			 -EADDRINUSE);
	assert_non_null(strstr(err.msg, "host port 18080/tcp"));
	assert_non_null(strstr(err.msg, "pod default/web"));
	/* every address of the node includes 10.1.2.3 */
	err.code = 0;
	assert_int_equal(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cellb", "team/other",
					       "10.197.0.6", &same_ip, 1, &err),
			 -EADDRINUSE);
	assert_non_null(strstr(err.msg, "host port 10.1.2.3:18080/tcp"));
	assert_int_equal(rules_of("cellb"), 0);
	/* another protocol is another port */
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cellb", "team/other", "10.197.0.6", &udp,
					1, &err));
	assert_int_equal(rules_of("cellb"), 2);
}

static void test_cellnat__hostports_on_different_host_addresses_do_not_meet(void **state)
{
	struct cellnat_port one = { "tcp", 9000, 80, "10.1.2.3" };
	struct cellnat_port two = { "tcp", 9000, 80, "10.1.2.4" };
	const char *dnat[] = { "-d 10.1.2.4/32", "--dport 9000", "10.197.0.8:80", NULL };
	struct err err = ERR_INIT;

	(void)state;
	NEED_NETNS();
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cellc", "a/one", "10.197.0.7", &one, 1,
					&err));
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "celld", "a/two", "10.197.0.8", &two, 1,
					&err));
	assert_int_equal(count_lines("nat", dnat), 1);
}

static void test_cellnat__hostports_one_port_mapped_twice_in_a_pod_is_refused(void **state)
{
	struct cellnat_port twice[] = { { "tcp", 9001, 80, "" }, { "tcp", 9001, 81, "" } };
	struct cellnat_port again[] = { { "tcp", 9002, 80, "" }, { "tcp", 9002, 80, "" } };
	struct err err = ERR_INIT;

	(void)state;
	NEED_NETNS();
	assert_int_equal(cellnat_hostports_set(T_BRIDGE, T_CIDR, "celle", "a/b", "10.197.0.9",
					       twice, 2, &err),
			 -EADDRINUSE);
	assert_non_null(strstr(err.msg, "mapped twice"));
	/* the same mapping twice is one mapping */
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "celle", "a/b", "10.197.0.9", again, 2,
					&err));
	assert_int_equal(rules_of("celle"), 2);
}

static void test_cellnat__hostports_clear_removes_only_that_cell(void **state)
{
	struct cellnat_port other = { "tcp", 18081, 8080, "" };
	struct err err = ERR_INIT;

	(void)state;
	NEED_NETNS();
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cella", "default/web", "10.197.0.5",
					&web, 1, &err));
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cellb", "default/web2", "10.197.0.6",
					&other, 1, &err));
	assert_ok(cellnat_hostports_clear("cella", &err));
	assert_int_equal(rules_of("cella"), 0);
	assert_int_equal(rules_of("cellb"), 2);
	assert_ok(cellnat_hostports_clear("cella", &err)); /* none left: fine */
	/* the port is free again */
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "cellc", "default/web3", "10.197.0.7",
					&web, 1, &err));
}

static void test_cellnat__hostports_prune_drops_gone_cells_of_its_network_only(void **state)
{
	struct cellnat_port p1 = { "tcp", 9101, 80, "" }, p2 = { "tcp", 9102, 80, "" };
	struct cellnat_port p3 = { "tcp", 9103, 80, "" };
	const char *const keep[] = { "live" };
	struct err err = ERR_INIT;

	(void)state;
	NEED_NETNS();
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "live", "a/live", "10.197.0.5", &p1, 1,
					&err));
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_CIDR, "gone", "a/gone", "10.197.0.6", &p2, 1,
					&err));
	/* a cell of another kiyot on the same node: its network, its business */
	assert_ok(cellnat_hostports_set(T_BRIDGE, T_OTHER_CIDR, "theirs", "b/theirs", "10.196.0.5",
					&p3, 1, &err));
	assert_int_equal(cellnat_hostports_prune(T_CIDR, keep, 1, &err), 2);
	assert_int_equal(rules_of("gone"), 0);
	assert_int_equal(rules_of("live"), 2);
	assert_int_equal(rules_of("theirs"), 2);
	assert_int_equal(cellnat_hostports_prune(T_CIDR, keep, 1, &err), 0);
}

/* Moves the test into a network namespace of its own with a bridge, if it can. */
static int setup_netns(void **state)
{
	struct err err = ERR_INIT;
	int nl;

	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_cellnat: iptables tests need root; skipped\n");
		return 0;
	}
	if (run("command -v iptables >/dev/null && command -v iptables-save >/dev/null") != 0) {
		fprintf(stderr, "test_cellnat: iptables tests need iptables; skipped\n");
		return 0;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "test_cellnat: unshare(CLONE_NEWNET): %s; skipped\n",
			strerror(errno));
		return 0;
	}
	nl = nl_open(-1, &err);
	if (nl < 0 || nl_bridge_create(nl, T_BRIDGE, &err) < 0) {
		fprintf(stderr, "test_cellnat: bridge: %s\n", err.msg);
		return -1;
	}
	close(nl);
	netns_ready = 1;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cellnat__parse_reads_a_dnat_rule_as_iptables_save_prints_it),
		cmocka_unit_test(test_cellnat__parse_reads_a_hairpin_rule_and_every_address),
		cmocka_unit_test(test_cellnat__parse_leaves_other_rules_alone),
		cmocka_unit_test_setup(
			test_cellnat__hostports_set_is_idempotent_and_guards_loopback, flush),
		cmocka_unit_test_setup(
			test_cellnat__hostports_second_pod_on_a_held_port_is_refused_naming_it,
			flush),
		cmocka_unit_test_setup(
			test_cellnat__hostports_on_different_host_addresses_do_not_meet, flush),
		cmocka_unit_test_setup(
			test_cellnat__hostports_one_port_mapped_twice_in_a_pod_is_refused, flush),
		cmocka_unit_test_setup(test_cellnat__hostports_clear_removes_only_that_cell, flush),
		cmocka_unit_test_setup(
			test_cellnat__hostports_prune_drops_gone_cells_of_its_network_only, flush),
	};

	return cmocka_run_group_tests(tests, setup_netns, NULL);
}
