/*
 * test_cellguard.c: what a local cell may not do on the node's network. The rule texts, a
 * cell's Ethernet address and cells.nodePorts' ports are pure and run anywhere; the rest needs
 * root and the iptables package's iptables and ebtables, and runs in a network namespace of its
 * own (unshared at start), so it never touches the node's rules or a running kiyot.
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

#include "providers/local/cellguard.h"
#include "providers/local/cellnet.h"
#include "xalloc.h"
#include "providers/local/xtables.h"

#define T_BRIDGE "kvtestgd0"
#define T_CIDR "10.198.0.0/16"
#define T_NETWORK "KIYOT-CELLS-10.198.0.0-16"
#define T_OTHER "KIYOT-CELLS-10.196.0.0-24"

/* set when the namespace and the commands are there for the root tests */
static int netns_ready;

/* How many lines of text contain every one of the words (NULL-ended). */
static int count_in(const char *text, const char *const *words)
{
	_cleanup_free_ char *copy = xstrdup(text ? text : "");
	char *save = NULL;
	int n = 0;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		int all = 1;

		for (size_t i = 0; words[i]; i++)
			all = all && strstr(l, words[i]);
		n += all;
	}
	return n;
}

static struct cellnet_cidr cidr(const char *s)
{
	struct cellnet_cidr c;
	struct err err = ERR_INIT;

	assert_ok(cellnet_parse_cidr(s, &c, &err));
	return c;
}

static uint32_t ip(const char *s)
{
	struct err err = ERR_INIT;
	uint32_t v = 0;

	assert_ok(cellnet_parse_ip(s, &v, &err));
	return v;
}

/* ---- pure ---- */

static void test_cellguard__cell_mac_follows_its_address(void **state)
{
	uint8_t mac[6];
	char s[CELLNET_MAC_SIZE];

	(void)state;
	cellnet_mac(ip("10.77.0.5"), mac);
	assert_int_equal(mac[0] & 1, 0); /* unicast */
	assert_int_equal(mac[0] & 2, 2); /* locally administered */
	cellnet_mac_str(ip("10.77.0.5"), s, sizeof(s));
	assert_string_equal(s, "02:6b:0a:4d:00:05");
	cellnet_mac_str(ip("10.78.255.254"), s, sizeof(s));
	assert_string_equal(s, "02:6b:0a:4e:ff:fe");
}

static void test_cellguard__node_ports_parse_and_refuse_with_the_forms(void **state)
{
	struct cellnet_port p;
	struct err err = ERR_INIT;
	static const char *const bad[] = { "",		"0",	      "65536",	 "-1",
					   "5000/sctp", "53/",	      "53/udpx", "tcp",
					   "5000 ",	"5000/tcp/x", "0x10",	 NULL };

	(void)state;
	assert_ok(cellnet_parse_port("5000", &p, &err));
	assert_int_equal(p.port, 5000);
	assert_string_equal(p.protocol, "tcp");
	assert_ok(cellnet_parse_port("53/UDP", &p, &err));
	assert_int_equal(p.port, 53);
	assert_string_equal(p.protocol, "udp");
	assert_ok(cellnet_parse_port("65535/tcp", &p, &err));
	for (size_t i = 0; bad[i]; i++) {
		err.code = 0;
		assert_int_equal(cellnet_parse_port(bad[i], &p, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "PORT/udp"));
	}
}

static void test_cellguard__node_rules_answers_listed_ports_then_drop(void **state)
{
	const struct cellnet_port ports[] = { { 5000, "tcp" }, { 53, "udp" } };
	_cleanup_free_ char *text = cellguard_node_rules("kiyot0", ports, 2);
	const char *decl[] = { ":KIYOT-NODE-kiyot0 - [0:0]", NULL };
	const char *answers[] = { "-A KIYOT-NODE-kiyot0 -m conntrack",
				  "--ctstate RELATED,ESTABLISHED,DNAT", "-j RETURN", NULL };
	const char *registry[] = { "! -d 127.0.0.0/8 -p tcp -m tcp --dport 5000", "-j RETURN",
				   NULL };
	const char *dns[] = { "! -d 127.0.0.0/8 -p udp -m udp --dport 53", "-j RETURN", NULL };
	const char *drop[] = { "-A KIYOT-NODE-kiyot0", "-j DROP", NULL };
	const char *last;

	(void)state;
	assert_int_equal(count_in(text, decl), 1);
	assert_int_equal(count_in(text, answers), 1);
	assert_int_equal(count_in(text, registry), 1);
	assert_int_equal(count_in(text, dns), 1);
	assert_int_equal(count_in(text, drop), 1);
	/* the drop is the chain's last rule */
	last = strstr(text, "-j DROP");
	assert_non_null(last);
	assert_null(strstr(last, "-A "));
	assert_non_null(strstr(text, "*filter\n"));
	assert_non_null(strstr(text, "COMMIT\n"));
}

static void test_cellguard__spoof_rules_bind_each_port_to_its_cell(void **state)
{
	struct cellnet_cidr net = cidr("10.77.0.0/16");
	const struct cellguard_cell cells[] = { { "kv000000000001", 0 }, { "kv000000000002", 0 } };
	struct cellguard_cell c[2];
	_cleanup_free_ char *text = NULL;
	const char *dispatch[] = { "-A KIYOT-CELLS-10.77.0.0-16 -i kv000000000001 -j "
				   "KIYOT-CELL-kv000000000001",
				   NULL };
	const char *ipv4[] = { "-A KIYOT-CELL-kv000000000001 -p IPv4 -s 02:6b:0a:4d:00:05 "
			       "--ip-src 10.77.0.5 -j RETURN",
			       NULL };
	const char *arp[] = { "-A KIYOT-CELL-kv000000000002 -p ARP -s 02:6b:0a:4d:00:06 "
			      "--arp-mac-src 02:6b:0a:4d:00:06 --arp-ip-src 10.77.0.6 -j RETURN",
			      NULL };
	const char *drops[] = { "-A KIYOT-CELL-kv", "-j DROP", NULL };
	const char *hook[] = { "-I PREROUTING -i kv+ -j KIYOT-CELLS-10.77.0.0-16", NULL };
	const char *decls[] = { ":KIYOT-CELL-kv", " ACCEPT", NULL };
	/* a frame of another network's cells goes on to that network's chain: this one returns
	 * what it does not know, where ACCEPT would end the bridge's PREROUTING for it */
	const char *network[] = { ":KIYOT-CELLS-10.77.0.0-16 RETURN", NULL };

	(void)state;
	memcpy(c, cells, sizeof(c));
	c[0].ip = ip("10.77.0.5");
	c[1].ip = ip("10.77.0.6");
	text = cellguard_spoof_rules(&net, c, 2, "");
	assert_non_null(text);
	assert_int_equal(count_in(text, dispatch), 1);
	assert_int_equal(count_in(text, ipv4), 1);
	assert_int_equal(count_in(text, arp), 1);
	assert_int_equal(count_in(text, drops), 2);
	assert_int_equal(count_in(text, hook), 1);
	assert_int_equal(count_in(text, decls), 2); /* each cell's chain */
	assert_int_equal(count_in(text, network), 1);
	/* chains are declared before any rule jumps to them (ebtables-restore needs it) */
	assert_true(strstr(text, ":KIYOT-CELL-kv000000000002") < strstr(text, "-A "));
}

/* What ebtables-save printed on a node with one of our cells gone, one still there, and a
 * cell of another network. */
static const char saved_text[] =
	"*nat\n"
	":PREROUTING ACCEPT\n"
	":OUTPUT ACCEPT\n"
	":POSTROUTING ACCEPT\n"
	":KIYOT-CELL-kv00000000000a ACCEPT\n"
	":KIYOT-CELL-kv00000000000b ACCEPT\n"
	":KIYOT-CELL-kv0000000000ff ACCEPT\n"
	":KIYOT-CELLS-10.77.0.0-16 ACCEPT\n"
	":KIYOT-CELLS-10.196.0.0-24 ACCEPT\n"
	"-A PREROUTING -i kv+ -j KIYOT-CELLS-10.77.0.0-16\n"
	"-A PREROUTING -i kv+ -j KIYOT-CELLS-10.196.0.0-24\n"
	"-A KIYOT-CELL-kv00000000000a -j DROP\n"
	"-A KIYOT-CELL-kv00000000000b -j DROP\n"
	"-A KIYOT-CELL-kv0000000000ff -j DROP\n"
	"-A KIYOT-CELLS-10.77.0.0-16 -i kv00000000000a -j KIYOT-CELL-kv00000000000a\n"
	"-A KIYOT-CELLS-10.77.0.0-16 -i kv00000000000b -j KIYOT-CELL-kv00000000000b\n"
	"-A KIYOT-CELLS-10.196.0.0-24 -i kv0000000000ff -j KIYOT-CELL-kv0000000000ff\n";

static void test_cellguard__spoof_rules_drop_gone_cells_and_leave_other_networks(void **state)
{
	struct cellnet_cidr net = cidr("10.77.0.0/16");
	struct cellguard_cell live = { "kv00000000000b", 0 };
	_cleanup_free_ char *text = NULL;
	const char *gone[] = { "-X KIYOT-CELL-kv00000000000a", NULL };
	const char *flushed[] = { "-F KIYOT-CELL-kv00000000000a", NULL };
	const char *kept[] = { "KIYOT-CELL-kv00000000000b", NULL };
	const char *theirs[] = { "kv0000000000ff", NULL };
	const char *hook[] = { "PREROUTING", NULL };

	(void)state;
	live.ip = ip("10.77.0.9");
	text = cellguard_spoof_rules(&net, &live, 1, saved_text);
	assert_non_null(text);
	assert_int_equal(count_in(text, gone), 1);
	assert_int_equal(count_in(text, flushed), 1);
	/* the live cell's chain is declared, jumped to and filled (3 rules) */
	assert_int_equal(count_in(text, kept), 5);
	/* another network's cell and its jump are not ours */
	assert_int_equal(count_in(text, theirs), 0);
	/* the jump from PREROUTING is there already */
	assert_int_equal(count_in(text, hook), 0);
}

static void test_cellguard__spoof_rules_without_cells_remove_the_network(void **state)
{
	struct cellnet_cidr net = cidr("10.77.0.0/16");
	struct cellnet_cidr other = cidr("10.196.0.0/24");
	struct cellnet_cidr unknown = cidr("10.195.0.0/16");
	_cleanup_free_ char *text = cellguard_spoof_rules(&net, NULL, 0, saved_text);
	_cleanup_free_ char *none = cellguard_spoof_rules(&unknown, NULL, 0, "*nat\n");
	_cleanup_free_ char *again = NULL;
	const char *unhook[] = { "-D PREROUTING -i kv+ -j KIYOT-CELLS-10.77.0.0-16", NULL };
	const char *drop_net[] = { "-X KIYOT-CELLS-10.77.0.0-16", NULL };
	const char *drop_cells[] = { "-X KIYOT-CELL-kv00000000000", NULL };
	const char *theirs[] = { "10.196", NULL };
	const char *decl[] = { ":", NULL };

	(void)state;
	assert_non_null(text);
	assert_int_equal(count_in(text, unhook), 1);
	assert_int_equal(count_in(text, drop_net), 1);
	assert_int_equal(count_in(text, drop_cells), 2);
	assert_int_equal(count_in(text, theirs), 0);
	assert_int_equal(count_in(text, decl), 0); /* nothing made */
	/* the network's chain is emptied before it goes, and unhooked */
	assert_true(strstr(text, "-F KIYOT-CELLS-10.77.0.0-16") <
		    strstr(text, "-X KIYOT-CELLS-10.77.0.0-16"));
	/* nothing of a network that has no rules: nothing to do */
	assert_null(none);
	/* the other network's cell is its own, even without cells of ours */
	again = cellguard_spoof_rules(&other, NULL, 0, saved_text);
	assert_non_null(strstr(again, "-X KIYOT-CELL-kv0000000000ff"));
	assert_null(strstr(again, "kv00000000000a"));
}

static void test_cellguard__spoof_rules_keep_one_jump_from_prerouting(void **state)
{
	struct cellnet_cidr net = cidr("10.77.0.0/16");
	struct cellguard_cell one = { "kv00000000000b", 0 };
	_cleanup_free_ char *saved =
		xasprintf("%s%s", saved_text,
			  "-A PREROUTING -i kv+ -j KIYOT-CELLS-10.77.0.0-16\n"
			  "-A PREROUTING -i kv+ -j KIYOT-CELLS-10.77.0.0-16\n");
	_cleanup_free_ char *text = NULL;
	const char *unhook[] = { "-D PREROUTING -i kv+ -j KIYOT-CELLS-10.77.0.0-16", NULL };

	(void)state;
	one.ip = ip("10.77.0.9");
	text = cellguard_spoof_rules(&net, &one, 1, saved);
	assert_int_equal(count_in(text, unhook), 2); /* three there, one stays */
}

/* ---- against iptables and ebtables, in a network namespace of the test's own ---- */

/* What `CMD -t TABLE` prints now (caller frees). */
static char *saved(const char *cmd, const char *table)
{
	_cleanup_free_ char *line = xasprintf("%s -t %s", cmd, table);
	FILE *f = popen(line, "r");
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

static int run(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Each test starts from empty tables. */
static int flush(void **state)
{
	(void)state;
	if (netns_ready)
		run("iptables -w -F && iptables -w -X && printf '*nat\\nCOMMIT\\n' | "
		    "ebtables-restore");
	return 0;
}

#define NEED_NETNS()                                                                               \
	do {                                                                                       \
		if (!netns_ready)                                                                  \
			skip();                                                                    \
	} while (0)

static void test_cellguard__node_setup_is_idempotent_and_follows_the_ports(void **state)
{
	const struct cellnet_port two[] = { { 5000, "tcp" }, { 53, "udp" } };
	const struct cellnet_port one[] = { { 8443, "tcp" } };
	const char *jump[] = { "-A INPUT -i " T_BRIDGE " ", "-j KIYOT-NODE-" T_BRIDGE, NULL };
	const char *rules[] = { "-A KIYOT-NODE-" T_BRIDGE " ", NULL };
	const char *old[] = { "--dport 5000", NULL };
	const char *now[] = { "--dport 8443", "-j RETURN", NULL };
	struct err err = ERR_INIT;
	_cleanup_free_ char *first = NULL, *second = NULL, *third = NULL;

	(void)state;
	NEED_NETNS();
	assert_ok(cellguard_node_setup(T_BRIDGE, two, 2, &err));
	assert_ok(cellguard_node_setup(T_BRIDGE, two, 2, &err));
	first = saved("iptables-save", "filter");
	assert_int_equal(count_in(first, jump), 1);
	assert_int_equal(count_in(first, rules), 4); /* answers, two ports, drop */
	/* INPUT's first rule: ahead of anything that accepts */
	assert_non_null(strstr(first, "-A INPUT -i " T_BRIDGE " -m comment"));
	assert_true(strstr(first, "-A INPUT") == strstr(first, "-A INPUT -i " T_BRIDGE));
	/* a restart with other ports replaces them */
	assert_ok(cellguard_node_setup(T_BRIDGE, one, 1, &err));
	second = saved("iptables-save", "filter");
	assert_int_equal(count_in(second, old), 0);
	assert_int_equal(count_in(second, now), 1);
	assert_int_equal(count_in(second, rules), 3);
	assert_int_equal(count_in(second, jump), 1);
	/* none listed: answers and the drop */
	assert_ok(cellguard_node_setup(T_BRIDGE, NULL, 0, &err));
	third = saved("iptables-save", "filter");
	assert_int_equal(count_in(third, rules), 2);
}

static void test_cellguard__spoof_sync_writes_once_and_removes_what_went(void **state)
{
	struct cellnet_cidr net = cidr(T_CIDR);
	struct cellguard_cell cells[2] = { { "kv0000000000a1", 0 }, { "kv0000000000a2", 0 } };
	struct cellguard_cell theirs = { "kv0000000000b1", 0 };
	struct cellnet_cidr other = cidr("10.196.0.0/24");
	const char *all[] = { "KIYOT-CELL", NULL };
	const char *a1[] = { "kv0000000000a1", NULL };
	const char *a2[] = { "-A KIYOT-CELL-kv0000000000a2 -p IPv4 -s 02:6b:0a:c6:00:06 --ip-src "
			     "10.198.0.6 -j RETURN",
			     NULL };
	const char *hook[] = { "-A PREROUTING -i kv+ -j " T_NETWORK, NULL };
	const char *their_hook[] = { "-A PREROUTING -i kv+ -j " T_OTHER, NULL };
	const char *b1[] = { "kv0000000000b1", NULL };
	struct err err = ERR_INIT;
	_cleanup_free_ char *once = NULL, *twice = NULL, *fewer = NULL, *none = NULL;

	(void)state;
	NEED_NETNS();
	cells[0].ip = ip("10.198.0.5");
	cells[1].ip = ip("10.198.0.6");
	theirs.ip = ip("10.196.0.5");
	assert_ok(cellguard_spoof_sync(&other, &theirs, 1, &err));
	assert_ok(cellguard_spoof_sync(&net, cells, 2, &err));
	once = saved("ebtables-save", "nat");
	assert_ok(cellguard_spoof_sync(&net, cells, 2, &err));
	twice = saved("ebtables-save", "nat");
	/* written whole again: the same rules, once */
	assert_int_equal(count_in(once, a2), 1);
	assert_int_equal(count_in(once, hook), 1);
	assert_int_equal(count_in(once, all), count_in(twice, all));
	assert_int_equal(count_in(twice, hook), 1);
	/* a cell that went takes its chain with it */
	assert_ok(cellguard_spoof_sync(&net, &cells[1], 1, &err));
	fewer = saved("ebtables-save", "nat");
	assert_int_equal(count_in(fewer, a1), 0);
	assert_int_equal(count_in(fewer, a2), 1);
	/* the last one takes the network's chain and its jump; another network's stay */
	assert_ok(cellguard_spoof_sync(&net, NULL, 0, &err));
	none = saved("ebtables-save", "nat");
	assert_null(strstr(none, T_NETWORK));
	assert_int_equal(count_in(none, b1), 5); /* declared, jumped to, its 3 rules */
	assert_int_equal(count_in(none, their_hook), 1);
	/* and nothing left of ours: nothing more to do */
	assert_ok(cellguard_spoof_sync(&net, NULL, 0, &err));
}

static void test_cellguard__a_refused_restore_changes_nothing_and_says_why(void **state)
{
	struct err err = ERR_INIT;
	_cleanup_free_ char *after = NULL;

	(void)state;
	NEED_NETNS();
	/* the second line fails: the first is not made either */
	assert_int_equal(
		xt_restore("ebtables",
			   "*nat\n:KIYOT-CELL-kvfail ACCEPT\n-X KIYOT-CELL-kvnone\nCOMMIT\n", &err),
		-EIO);
	assert_non_null(strstr(err.msg, "ebtables-restore"));
	assert_non_null(strstr(err.msg, "line 3"));
	assert_null(strchr(err.msg, '\n'));
	after = saved("ebtables-save", "nat");
	assert_null(strstr(after, "kvfail"));
}

/* Sorted lines of what ebtables-save -t nat prints, its dated comments left out (caller
 * frees). */
static char *nat_rules(void)
{
	FILE *f = popen("ebtables-save -t nat | grep -v '^#' | sort", "r");
	char *text = NULL;
	size_t cap = 0;

	assert_non_null(f);
	if (getdelim(&text, &cap, '\0', f) < 0) {
		free(text);
		text = xstrdup("");
	}
	pclose(f);
	return text;
}

/* A cell come or gone is written in one restore that reads nothing, and leaves exactly what
 * writing every cell whole leaves; a table not as written (the network's jump gone) fails it
 * whole, changing nothing. */
static void test_cellguard__spoof_update_adds_and_removes_one_cell_as_a_sync_would(void **state)
{
	struct cellnet_cidr net = cidr(T_CIDR);
	struct cellnet_cidr other = cidr("10.196.0.0/24");
	struct cellguard_cell cells[3] = { { "kv0000000000a1", 0 },
					   { "kv0000000000a2", 0 },
					   { "kv0000000000a3", 0 } };
	struct cellguard_cell theirs = { "kv0000000000b1", 0 };
	const char *a3[] = { "kv0000000000a3", NULL };
	const char *b1[] = { "kv0000000000b1", NULL };
	struct err err = ERR_INIT;
	_cleanup_free_ char *added = NULL, *whole3 = NULL, *removed = NULL, *whole2 = NULL;
	_cleanup_free_ char *text = NULL, *before = NULL, *after = NULL;

	(void)state;
	NEED_NETNS();
	cells[0].ip = ip("10.198.0.5");
	cells[1].ip = ip("10.198.0.6");
	cells[2].ip = ip("10.198.0.7");
	theirs.ip = ip("10.196.0.5");
	assert_ok(cellguard_spoof_sync(&other, &theirs, 1, &err));
	assert_ok(cellguard_spoof_sync(&net, cells, 2, &err));
	/* the text names no chain but the network's and the cell's */
	text = cellguard_spoof_update_rules(&net, cells, 2, &cells[2], NULL);
	assert_int_equal(count_in(text, (const char *[]){ ":KIYOT-CELL", NULL }), 2);
	assert_int_equal(count_in(text, b1), 0);
	/* a cell added: what a sync of the three writes */
	assert_ok(cellguard_spoof_update(&net, cells, 2, &cells[2], NULL, &err));
	added = nat_rules();
	assert_int_equal(count_in(added, a3), 5); /* declared, jumped to, its 3 rules */
	assert_ok(cellguard_spoof_sync(&net, cells, 3, &err));
	whole3 = nat_rules();
	assert_string_equal(added, whole3);
	/* written again: the same (the network's chain is written whole, one jump each) */
	assert_ok(cellguard_spoof_update(&net, cells, 3, &cells[2], NULL, &err));
	free(added);
	added = nat_rules();
	assert_string_equal(added, whole3);
	/* one gone: what a sync of the two left writes; another network's cell stays */
	assert_ok(cellguard_spoof_update(&net, cells, 2, NULL, "kv0000000000a3", &err));
	removed = nat_rules();
	assert_int_equal(count_in(removed, a3), 0);
	assert_int_equal(count_in(removed, b1), 5);
	assert_ok(cellguard_spoof_sync(&net, cells, 2, &err));
	whole2 = nat_rules();
	assert_string_equal(removed, whole2);
	/* the network's jump from PREROUTING gone (a firewall reload): the update fails whole */
	assert_int_equal(run("ebtables -t nat -D PREROUTING -i kv+ -j " T_NETWORK), 0);
	before = nat_rules();
	assert_int_equal(cellguard_spoof_update(&net, cells, 2, &cells[2], NULL, &err), -EIO);
	assert_non_null(strstr(err.msg, "ebtables-restore"));
	after = nat_rules();
	assert_string_equal(before, after);
	/* as it does when a cell it names has no chain */
	err_clear(&err);
	assert_ok(cellguard_spoof_sync(&net, cells, 2, &err));
	assert_int_equal(cellguard_spoof_update(&net, cells, 3, NULL, NULL, &err), -EIO);
}

/* Moves the test into a network namespace of its own, if it can. */
static int setup_netns(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_cellguard: iptables and ebtables tests need root; skipped\n");
		return 0;
	}
	if (run("command -v iptables-restore >/dev/null && command -v ebtables-restore "
		">/dev/null && command -v ebtables-save >/dev/null") != 0) {
		fprintf(stderr, "test_cellguard: the tests need iptables and ebtables (apt install "
				"iptables); skipped\n");
		return 0;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "test_cellguard: unshare(CLONE_NEWNET): %s; skipped\n",
			strerror(errno));
		return 0;
	}
	netns_ready = 1;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cellguard__cell_mac_follows_its_address),
		cmocka_unit_test(test_cellguard__node_ports_parse_and_refuse_with_the_forms),
		cmocka_unit_test(test_cellguard__node_rules_answers_listed_ports_then_drop),
		cmocka_unit_test(test_cellguard__spoof_rules_bind_each_port_to_its_cell),
		cmocka_unit_test(
			test_cellguard__spoof_rules_drop_gone_cells_and_leave_other_networks),
		cmocka_unit_test(test_cellguard__spoof_rules_without_cells_remove_the_network),
		cmocka_unit_test(test_cellguard__spoof_rules_keep_one_jump_from_prerouting),
		cmocka_unit_test_setup(
			test_cellguard__node_setup_is_idempotent_and_follows_the_ports, flush),
		cmocka_unit_test_setup(test_cellguard__spoof_sync_writes_once_and_removes_what_went,
				       flush),
		cmocka_unit_test_setup(
			test_cellguard__a_refused_restore_changes_nothing_and_says_why, flush),
		cmocka_unit_test_setup(
			test_cellguard__spoof_update_adds_and_removes_one_cell_as_a_sync_would,
			flush),
	};

	return cmocka_run_group_tests(tests, setup_netns, NULL);
}
