#include "cellguard.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "xalloc.h"
#include "xtables.h"

#define NODE_CHAIN "KIYOT-NODE-"
#define NETWORK_CHAIN "KIYOT-CELLS-"
#define CELL_CHAIN "KIYOT-CELL-"
#define NODE_JUMP_COMMENT "kiyot cells node guard"
/* ebtables chain names hold 31 characters, iptables ones 28: both fit these with room */
#define CHAIN_SIZE 40

/* ---- the node's services ---- */

char *cellguard_node_rules(const char *bridge, const struct cellnet_port *ports, size_t n)
{
	struct buf b = BUF_INIT;
	struct err e = ERR_INIT;

	buf_appendf(&b, &e,
		    "*filter\n:" NODE_CHAIN "%s - [0:0]\n"
		    "-A " NODE_CHAIN
		    "%s -m conntrack --ctstate RELATED,ESTABLISHED,DNAT -m comment "
		    "--comment \"kiyot cells: answers, hostPorts, Services\" -j RETURN\n",
		    bridge, bridge);
	for (size_t i = 0; i < n; i++)
		buf_appendf(&b, &e,
			    "-A " NODE_CHAIN
			    "%s ! -d 127.0.0.0/8 -p %s -m %s --dport %d -m comment "
			    "--comment \"kiyot cells.nodePorts\" -j RETURN\n",
			    bridge, ports[i].protocol, ports[i].protocol, ports[i].port);
	buf_appendf(&b, &e,
		    "-A " NODE_CHAIN "%s -m comment --comment \"kiyot cells: nothing else of the "
		    "node\" -j DROP\nCOMMIT\n",
		    bridge);
	return buf_detach(&b, NULL);
}

int cellguard_node_setup(const char *bridge, const struct cellnet_port *ports, size_t n,
			 struct err *err)
{
	_cleanup_free_ char *rules = cellguard_node_rules(bridge, ports, n);
	char chain[CHAIN_SIZE];
	char *jump[] = { "-i", (char *)bridge, "-j", chain, NULL };

	snprintf(chain, sizeof(chain), NODE_CHAIN "%s", bridge);
	if (xt_restore("iptables", rules, err) < 0 ||
	    xt_ensure_rule("filter", "INPUT", "-I", jump, NODE_JUMP_COMMENT, err) < 0)
		return err_wrap(err, "guarding the node's services from the cells of %s", bridge);
	return 0;
}

/* ---- spoofing ---- */

/* What the node's bridge rules hold of interest, from ebtables-save -t nat. */
struct saved {
	char **cells;  /* KIYOT-CELL-* chains */
	bool *foreign; /* cells[i] is jumped to from another network's chain */
	size_t ncells, cap, fcap;
	bool network; /* this network's chain exists */
	size_t jumps; /* PREROUTING's jumps to it */
};

/* "-A CHAIN ... -j TARGET": CHAIN and TARGET into their buffers; false for other lines. */
static bool rule_of(const char *line, char *chain, char *target)
{
	const char *j = strstr(line, " -j ");
	size_t len;

	if (strncmp(line, "-A ", 3) != 0 || !j)
		return false;
	len = strcspn(line + 3, " ");
	if (len >= CHAIN_SIZE)
		return false;
	snprintf(chain, CHAIN_SIZE, "%.*s", (int)len, line + 3);
	len = strcspn(j + 4, " ");
	if (len >= CHAIN_SIZE)
		return false;
	snprintf(target, CHAIN_SIZE, "%.*s", (int)len, j + 4);
	return true;
}

/* Index of a cell chain in s, or -1. */
static ssize_t saved_find(const struct saved *s, const char *name)
{
	for (size_t i = 0; i < s->ncells; i++)
		if (strcmp(s->cells[i], name) == 0)
			return (ssize_t)i;
	return -1;
}

/* Reads saved (ebtables-save -t nat) line by line for network's chain and the cells' ones. */
static void saved_read(const char *text, const char *network, const char *jump, struct saved *s)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		_cleanup_free_ char *line = xstrndup(l, len);
		char chain[CHAIN_SIZE], target[CHAIN_SIZE];

		l = nl ? nl + 1 : NULL;
		if (line[0] == ':') {
			size_t n = strcspn(line + 1, " ");

			if (n == strlen(network) && strncmp(line + 1, network, n) == 0)
				s->network = true;
			if (strncmp(line + 1, CELL_CHAIN, strlen(CELL_CHAIN)) == 0 &&
			    n < CHAIN_SIZE) {
				xgrow((void **)&s->cells, &s->cap, s->ncells + 1,
				      sizeof(*s->cells));
				xgrow((void **)&s->foreign, &s->fcap, s->ncells + 1,
				      sizeof(*s->foreign));
				s->foreign[s->ncells] = false;
				s->cells[s->ncells++] = xstrndup(line + 1, n);
			}
			continue;
		}
		if (strcmp(line, jump) == 0)
			s->jumps++;
		if (rule_of(line, chain, target) && strcmp(chain, network) != 0 &&
		    strncmp(target, CELL_CHAIN, strlen(CELL_CHAIN)) == 0) {
			ssize_t i = saved_find(s, target);

			if (i >= 0)
				s->foreign[i] = true;
		}
	}
}

static void saved_release(struct saved *s)
{
	for (size_t i = 0; i < s->ncells; i++)
		free(s->cells[i]);
	free(s->cells);
	free(s->foreign);
}

/* "KIYOT-CELLS-10.77.0.0-16": the chain of one network's cells. */
static void network_chain(const struct cellnet_cidr *cidr, char *out, size_t size)
{
	char net[CELLNET_IP_SIZE];

	cellnet_ip_str(cidr->network, net, sizeof(net));
	snprintf(out, size, NETWORK_CHAIN "%s-%u", net, cidr->prefix);
}

/* Whether veth is one of cells[]. */
static bool is_cell(const struct cellguard_cell *cells, size_t n, const char *veth)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(cells[i].veth, veth) == 0)
			return true;
	return false;
}

/* One cell's chain: its IPv4 and its ARP pass, nothing else. */
static void cell_rules(struct buf *b, const struct cellguard_cell *c)
{
	char ip[CELLNET_IP_SIZE], mac[CELLNET_MAC_SIZE];
	struct err e = ERR_INIT;

	cellnet_ip_str(c->ip, ip, sizeof(ip));
	cellnet_mac_str(c->ip, mac, sizeof(mac));
	buf_appendf(b, &e, "-A " CELL_CHAIN "%s -p IPv4 -s %s --ip-src %s -j RETURN\n", c->veth,
		    mac, ip);
	buf_appendf(b, &e,
		    "-A " CELL_CHAIN "%s -p ARP -s %s --arp-mac-src %s --arp-ip-src %s -j RETURN\n",
		    c->veth, mac, mac, ip);
	buf_appendf(b, &e, "-A " CELL_CHAIN "%s -j DROP\n", c->veth);
}

char *cellguard_spoof_rules(const struct cellnet_cidr *cidr, const struct cellguard_cell *cells,
			    size_t n, const char *saved)
{
	char network[CHAIN_SIZE];
	_cleanup_free_ char *jump = NULL;
	struct saved s = { 0 };
	struct buf b = BUF_INIT;
	struct err e = ERR_INIT;
	size_t before;

	network_chain(cidr, network, sizeof(network));
	jump = xasprintf("-A PREROUTING -i " CELLNET_VETH_PREFIX "+ -j %s", network);
	saved_read(saved ? saved : "", network, jump, &s);
	buf_appendf(&b, &e, "*nat\n");
	before = b.len;
	if (n) {
		/* RETURN: a frame of a cell this network does not know (another network's, on the
		 * same kv+ interfaces) goes on to the next chain PREROUTING jumps to; ACCEPT would
		 * end PREROUTING for it, past the guard of the network it belongs to */
		buf_appendf(&b, &e, ":%s RETURN\n", network);
		for (size_t i = 0; i < n; i++)
			buf_appendf(&b, &e, ":" CELL_CHAIN "%s ACCEPT\n", cells[i].veth);
		for (size_t i = 0; i < n; i++)
			buf_appendf(&b, &e, "-A %s -i %s -j " CELL_CHAIN "%s\n", network,
				    cells[i].veth, cells[i].veth);
		for (size_t i = 0; i < n; i++)
			cell_rules(&b, &cells[i]);
		if (s.jumps == 0)
			buf_appendf(&b, &e, "-I PREROUTING -i " CELLNET_VETH_PREFIX "+ -j %s\n",
				    network);
	} else if (s.network) {
		buf_appendf(&b, &e, "-F %s\n", network);
	}
	/* one jump stays while there are cells (two kiyots racing at start may make two) */
	for (size_t i = n ? 1 : 0; i < s.jumps; i++)
		buf_appendf(&b, &e, "-D PREROUTING -i " CELLNET_VETH_PREFIX "+ -j %s\n", network);
	if (!n && s.network)
		buf_appendf(&b, &e, "-X %s\n", network);
	for (size_t i = 0; i < s.ncells; i++)
		if (!s.foreign[i] && !is_cell(cells, n, s.cells[i] + strlen(CELL_CHAIN)))
			buf_appendf(&b, &e, "-F %s\n-X %s\n", s.cells[i], s.cells[i]);
	saved_release(&s);
	if (b.len == before) {
		buf_release(&b);
		return NULL;
	}
	buf_appendf(&b, &e, "COMMIT\n");
	return buf_detach(&b, NULL);
}

int cellguard_spoof_sync(const struct cellnet_cidr *cidr, const struct cellguard_cell *cells,
			 size_t n, struct err *err)
{
	_cleanup_free_ char *saved = NULL;
	_cleanup_free_ char *rules = NULL;

	if (xt_save("ebtables", "nat", &saved, err) < 0)
		return err_wrap(err, "anti-spoofing rules of the cells");
	rules = cellguard_spoof_rules(cidr, cells, n, saved);
	if (rules && xt_restore("ebtables", rules, err) < 0)
		return err_wrap(err, "anti-spoofing rules of the cells");
	return 0;
}

char *cellguard_spoof_update_rules(const struct cellnet_cidr *cidr,
				   const struct cellguard_cell *cells, size_t n,
				   const struct cellguard_cell *add, const char *gone)
{
	char network[CHAIN_SIZE];
	struct buf b = BUF_INIT;
	struct err e = ERR_INIT;

	network_chain(cidr, network, sizeof(network));
	buf_appendf(&b, &e, "*nat\n:%s RETURN\n", network); /* as cellguard_spoof_rules */
	if (add)
		buf_appendf(&b, &e, ":" CELL_CHAIN "%s ACCEPT\n", add->veth);
	/* the jump, made first again: this fails the whole write when it is missing */
	buf_appendf(&b, &e,
		    "-D PREROUTING -i " CELLNET_VETH_PREFIX "+ -j %s\n"
		    "-I PREROUTING -i " CELLNET_VETH_PREFIX "+ -j %s\n",
		    network, network);
	for (size_t i = 0; i < n; i++)
		if ((!add || strcmp(cells[i].veth, add->veth) != 0) &&
		    (!gone || strcmp(cells[i].veth, gone) != 0))
			buf_appendf(&b, &e, "-A %s -i %s -j " CELL_CHAIN "%s\n", network,
				    cells[i].veth, cells[i].veth);
	if (add) {
		buf_appendf(&b, &e, "-A %s -i %s -j " CELL_CHAIN "%s\n", network, add->veth,
			    add->veth);
		cell_rules(&b, add);
	}
	if (gone)
		buf_appendf(&b, &e, "-F " CELL_CHAIN "%s\n-X " CELL_CHAIN "%s\n", gone, gone);
	buf_appendf(&b, &e, "COMMIT\n");
	return buf_detach(&b, NULL);
}

int cellguard_spoof_update(const struct cellnet_cidr *cidr, const struct cellguard_cell *cells,
			   size_t n, const struct cellguard_cell *add, const char *gone,
			   struct err *err)
{
	_cleanup_free_ char *rules = cellguard_spoof_update_rules(cidr, cells, n, add, gone);

	if (xt_restore("ebtables", rules, err) < 0)
		return err_wrap(err, "anti-spoofing rules of the cells");
	return 0;
}
