/*
 * cellnat.c: cells.masquerade, the node's forwarding and NAT for local cells, so a cell
 * reaches past the node (registries, the internet, other nodes' pods, the endpoints the
 * node's kube-proxy translates Service IPs to) with the node's address:
 *
 *	net.ipv4.ip_forward = 1
 *	-t nat POSTROUTING -s CIDR ! -o BRIDGE -j MASQUERADE
 *	FORWARD -i BRIDGE -j ACCEPT                     (first, ahead of a DROP policy's rules)
 *	FORWARD -o BRIDGE -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
 *
 * through the iptables command (nf_tables or legacy, whichever the node uses, as CNI plugins
 * do). Every rule carries the comment "kiyot cells CIDR" and is added only when `iptables -C`
 * does not find it, so restarts never duplicate them. The rules stay when kiyot stops: cells
 * outlive kiyot.
 *
 * hostPorts (a pod's port mappings with a host port), as CNI's portmap plugin makes them:
 *
 *	-t nat PREROUTING, OUTPUT -m addrtype --dst-type LOCAL -j KIYOT-HOSTPORTS
 *	-t nat POSTROUTING -j KIYOT-HOSTPORTS-SNAT
 *	KIYOT-HOSTPORTS -p P [-d HOST_IP] --dport HOST_PORT -j DNAT --to-destination CELL:PORT
 *	KIYOT-HOSTPORTS-SNAT -p P -s CIDR -d CELL --dport PORT -m conntrack --ctstate DNAT
 *	    -j MASQUERADE                                (hairpin: a cell calling a hostPort)
 *	KIYOT-HOSTPORTS-SNAT -s 127.0.0.0/8 -o BRIDGE -j MASQUERADE       (127.0.0.1:HOST_PORT)
 *	net.ipv4.conf.BRIDGE.route_localnet = 1
 *	INPUT -i BRIDGE -d 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
 *	net.ipv4.ip_forward = 1                          (a hairpin or another machine's call
 *	FORWARD -o BRIDGE -m conntrack --ctstate DNAT -j ACCEPT   is routed through the node)
 *	FORWARD -i BRIDGE -m conntrack --ctstate DNAT -j ACCEPT
 *
 * A cell's two rules per port carry the comment "kiyot-hostport CELL_ID NAMESPACE/NAME", which
 * is how they are found again: to refuse a port another pod holds, to remove them with the
 * cell, and at kiyot's start to drop those of cells that are gone.
 */
#include "cellnat.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cellnet.h"
#include "fsutil.h"
#include "log.h"
#include "xalloc.h"
#include "xtables.h"

#define MAX_ARGS XT_MAX_ARGS
#define ERR_MAX XT_MSG_SIZE

/* Turns IPv4 forwarding on unless it is; what names the setting that needs it. */
static int forwarding_on(const char *what, struct err *err)
{
	char cur[8] = "";
	char *text = NULL;
	size_t len = 0;
	int fd, e;

	if (fs_read_file("/proc/sys/net/ipv4/ip_forward", sizeof(cur), &text, &len, err) == 0) {
		snprintf(cur, sizeof(cur), "%s", text);
		free(text);
	}
	err_clear(err);
	if (cur[0] == '1')
		return 0;
	/* written in place: /proc/sys takes no temporary file and rename */
	fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
	e = fd < 0 ? errno : (write(fd, "1\n", 2) == 2 ? 0 : errno);
	if (fd >= 0)
		close(fd);
	if (e)
		return err_set(err, e, "%s: net.ipv4.ip_forward: %s", what, strerror(e));
	log_info("cells: net.ipv4.ip_forward set to 1 (%s)", what);
	return 0;
}

int cellnat_setup(const char *bridge, const char *cidr, struct err *err)
{
	_cleanup_free_ char *comment = xasprintf("kiyot cells %s", cidr);
	char *masq[] = { "-s", (char *)cidr, "!", "-o", (char *)bridge, "-j", "MASQUERADE", NULL };
	char *out[] = { "-i", (char *)bridge, "-j", "ACCEPT", NULL };
	char *back[] = { "-o",	      (char *)bridge, "-m",
			 "conntrack", "--ctstate",    "RELATED,ESTABLISHED",
			 "-j",	      "ACCEPT",	      NULL };

	if (forwarding_on("cells.masquerade", err) < 0)
		return -err->code;
	if (xt_ensure_rule("nat", "POSTROUTING", "-A", masq, comment, err) < 0 ||
	    xt_ensure_rule("filter", "FORWARD", "-I", out, comment, err) < 0 ||
	    xt_ensure_rule("filter", "FORWARD", "-I", back, comment, err) < 0) {
		if (err->code == ENOENT)
			return err_set(err, ENOENT,
				       "cells.masquerade needs the iptables command (apt install "
				       "iptables), or set it false and add the rules yourself "
				       "(deploy/README.md)");
		return err_wrap(err, "cells.masquerade");
	}
	return 0;
}

/* ---- hostPorts ---- */

#define HOSTPORT_CHAIN "KIYOT-HOSTPORTS"
#define HOSTPORT_SNAT "KIYOT-HOSTPORTS-SNAT"
#define HOSTPORT_TAG "kiyot-hostport "
#define MAX_WORDS 64
/* iptables keeps at most this many bytes of a comment */
#define COMMENT_MAX 255

/* Finding a port free and taking it must not interleave between two RunPodSandbox calls, or
 * both would find it free. */
static pthread_mutex_t hostports_lock = PTHREAD_MUTEX_INITIALIZER;

/* Runs iptables-save -t nat into *out (the caller frees). */
static int nat_rules(char **out, struct err *err)
{
	return xt_save("iptables", "nat", out, err);
}

/* Splits a rule line of iptables-save into words in place; a double-quoted word (a comment)
 * is one word, without its quotes. Returns the number of words (at most max). */
static size_t rule_words(char *p, char **w, size_t max)
{
	size_t n = 0;

	while (*p && n < max) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		if (*p == '"') {
			w[n++] = ++p;
			p = strchr(p, '"');
			if (!p)
				break;
			*p++ = '\0';
			continue;
		}
		w[n++] = p;
		p += strcspn(p, " ");
		if (*p)
			*p++ = '\0';
	}
	return n;
}

/* Runs one iptables command given as a rule line of iptables-save ("-A CHAIN ..."), with
 * op replacing -A; the quoted comment is kept whole. */
static int rule_op(const char *line, const char *op, struct err *err)
{
	_cleanup_free_ char *copy = xstrdup(line);
	char *args[MAX_ARGS + 1], msg[ERR_MAX];
	size_t n;
	int ret;

	args[0] = "-t";
	args[1] = "nat";
	n = 2 + rule_words(copy, args + 2, MAX_ARGS - 2);
	args[n] = NULL;
	if (n < 4)
		return err_set(err, EINVAL, "not a rule: %s", line);
	args[2] = (char *)op;
	ret = xt_iptables(args, msg, sizeof(msg));
	if (ret != 0)
		return err_set(err, EIO, "iptables %s: %s", op, msg[0] ? msg : "failed");
	return 0;
}

/* Copies an address word of a rule, without the "/32" iptables-save appends to a host or
 * the ":port" of a DNAT target. */
static void copy_addr(char *dst, size_t size, const char *word)
{
	snprintf(dst, size, "%.*s", (int)strcspn(word, "/:"), word);
}

int cellnat_rule_parse(const char *line, struct cellnat_rule *out)
{
	_cleanup_free_ char *copy = xstrdup(line);
	char *w[MAX_WORDS], *end;
	struct cellnat_rule r = { 0 };
	const char *comment = NULL, *to = NULL;
	size_t n = rule_words(copy, w, MAX_WORDS), id_len;

	if (n < 2 || strcmp(w[0], "-A") != 0 ||
	    (strcmp(w[1], HOSTPORT_CHAIN) != 0 && strcmp(w[1], HOSTPORT_SNAT) != 0))
		return -1;
	snprintf(r.chain, sizeof(r.chain), "%s", w[1]);
	for (size_t i = 2; i + 1 < n; i++) {
		const char *k = w[i], *v = w[i + 1];

		if (strcmp(k, "-p") == 0)
			snprintf(r.protocol, sizeof(r.protocol), "%s", v);
		else if (strcmp(k, "--dport") == 0)
			r.dport = (int)strtol(v, &end, 10);
		else if (strcmp(k, "-d") == 0)
			copy_addr(r.dst, sizeof(r.dst), v);
		else if (strcmp(k, "--comment") == 0)
			comment = v;
		else if (strcmp(k, "--to-destination") == 0)
			to = v;
		else
			continue;
		i++;
	}
	if (!comment || strncmp(comment, HOSTPORT_TAG, strlen(HOSTPORT_TAG)) != 0)
		return -1;
	comment += strlen(HOSTPORT_TAG);
	id_len = strcspn(comment, " ");
	if (id_len == 0 || id_len >= sizeof(r.cell_id))
		return -1;
	snprintf(r.cell_id, sizeof(r.cell_id), "%.*s", (int)id_len, comment);
	snprintf(r.owner, sizeof(r.owner), "%s", comment[id_len] ? comment + id_len + 1 : "");
	if (to) {
		copy_addr(r.to, sizeof(r.to), to);
		if (strchr(to, ':'))
			r.to_port = (int)strtol(strchr(to, ':') + 1, &end, 10);
	}
	*out = r;
	return 0;
}

/* Whether a hostPort's host address is every address of the node: none, "" or 0.0.0.0. */
static bool any_address(const char *a)
{
	return !a || !a[0] || strcmp(a, "0.0.0.0") == 0;
}

/* Whether two host addresses of hostPorts meet. */
static bool host_ips_meet(const char *a, const char *b)
{
	return any_address(a) || any_address(b) || strcmp(a, b) == 0;
}

/* Calls fn for every hostPort rule in text (iptables-save -t nat) until it returns non-zero,
 * which is returned. */
static int each_rule(const char *text,
		     int (*fn)(const char *line, const struct cellnat_rule *r, void *arg),
		     void *arg)
{
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		struct cellnat_rule r;
		int ret = 0;

		if (len > 3 && strncmp(l, "-A ", 3) == 0) {
			_cleanup_free_ char *line = xstrndup(l, len);

			if (cellnat_rule_parse(line, &r) == 0)
				ret = fn(line, &r, arg);
		}
		if (ret)
			return ret;
		l = nl ? nl + 1 : NULL;
	}
	return 0;
}

/* What a port check looks for, and what it found. */
struct port_query {
	const char *cell_id;
	const struct cellnat_port *port;
	struct cellnat_rule holder;
};

static int port_held(const char *line, const struct cellnat_rule *r, void *arg)
{
	struct port_query *q = arg;

	(void)line;
	if (strcmp(r->chain, HOSTPORT_CHAIN) != 0 || strcmp(r->cell_id, q->cell_id) == 0 ||
	    strcmp(r->protocol, q->port->protocol) != 0 || r->dport != q->port->host_port ||
	    !host_ips_meet(r->dst, q->port->host_ip))
		return 0;
	q->holder = *r;
	return 1;
}

/* Which rules a removal takes, and how it went. */
struct removal {
	const char *cell_id; /* this cell's rules; NULL: those of cells not in keep */
	const char *const *keep;
	size_t n_keep;
	const struct cellnet_cidr *cidr; /* with keep: only rules toward this network */
	struct err *err;
	int removed;
};

static int remove_rule(const char *line, const struct cellnat_rule *r, void *arg)
{
	struct removal *rm = arg;
	const char *cell_ip = strcmp(r->chain, HOSTPORT_SNAT) == 0 ? r->dst : r->to;
	struct err e = ERR_INIT;
	uint32_t ip;

	if (rm->cell_id) {
		if (strcmp(r->cell_id, rm->cell_id) != 0)
			return 0;
	} else {
		if (cellnet_parse_ip(cell_ip, &ip, &e) < 0 ||
		    (ip & cellnet_netmask(rm->cidr)) != rm->cidr->network)
			return 0; /* another kiyot's cells */
		for (size_t i = 0; i < rm->n_keep; i++)
			if (strcmp(rm->keep[i], r->cell_id) == 0)
				return 0;
	}
	if (rule_op(line, "-D", rm->err) < 0)
		return -1;
	if (!rm->cell_id)
		log_info("hostPorts: removed a rule of cell %s (pod %s), which is gone: %s",
			 r->cell_id, r->owner, line);
	rm->removed++;
	return 0;
}

/* Removes the rules rm selects; the number removed. */
static int remove_rules(struct removal *rm)
{
	_cleanup_free_ char *text = NULL;
	char msg[ERR_MAX];
	char *list[] = { "-t", "nat", "-S", HOSTPORT_CHAIN, NULL };

	/* no chain: no rules (and no need for iptables on nodes without hostPorts) */
	if (xt_iptables(list, msg, sizeof(msg)) != 0)
		return 0;
	if (nat_rules(&text, rm->err) < 0)
		return -rm->err->code;
	if (each_rule(text, remove_rule, rm) < 0)
		return -rm->err->code;
	return rm->removed;
}

int cellnat_hostports_clear(const char *cell_id, struct err *err)
{
	struct removal rm = { .cell_id = cell_id, .err = err };
	int ret;

	pthread_mutex_lock(&hostports_lock);
	ret = remove_rules(&rm);
	pthread_mutex_unlock(&hostports_lock);
	return ret < 0 ? ret : 0;
}

int cellnat_hostports_prune(const char *cidr, const char *const *keep, size_t n_keep,
			    struct err *err)
{
	struct cellnet_cidr net;
	struct removal rm = { .keep = keep, .n_keep = n_keep, .cidr = &net, .err = err };
	int ret;

	if (cellnet_parse_cidr(cidr, &net, err) < 0)
		return -err->code;
	pthread_mutex_lock(&hostports_lock);
	ret = remove_rules(&rm);
	pthread_mutex_unlock(&hostports_lock);
	return ret;
}

/* Creates a chain unless it exists, and the jump to it from `from`. */
static int ensure_chain(const char *chain, const char *from, char *const *match, struct err *err)
{
	char *create[] = { "-t", "nat", "-N", (char *)chain, NULL };
	char *jump[MAX_ARGS];
	char msg[ERR_MAX];
	size_t n = 0;

	xt_iptables(create, msg, sizeof(msg)); /* exists already: fine */
	for (size_t i = 0; match && match[i]; i++)
		jump[n++] = match[i];
	jump[n++] = "-j";
	jump[n++] = (char *)chain;
	jump[n] = NULL;
	return xt_ensure_rule("nat", from, "-I", jump, "kiyot hostports", err);
}

/* route_localnet on the bridge: 127.0.0.1 DNATed to a cell may leave through it. */
static void route_localnet(const char *bridge)
{
	_cleanup_free_ char *path = xasprintf("/proc/sys/net/ipv4/conf/%s/route_localnet", bridge);
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, "1", 1) != 1)
		log_warn("hostPort on 127.0.0.1 needs %s = 1: %s", path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/*
 * What every hostPort of the bridge's cells needs: the chains and the jumps to them, the
 * MASQUERADE of loopback sources, and route_localnet on the bridge. route_localnet also lets
 * packets from the bridge to 127.0.0.0/8 in, which would open the node's loopback services to
 * any cell that can write raw frames (CAP_NET_RAW, in the default set); the guard drops those
 * but for answers and DNATed connections, as kube-proxy does for its own route_localnet. It
 * goes in first.
 */
static int hostports_base(const char *bridge, struct err *err)
{
	char *local[] = { "-m", "addrtype", "--dst-type", "LOCAL", NULL };
	char *loopback[] = { "-s", "127.0.0.0/8", "-o", (char *)bridge, "-j", "MASQUERADE", NULL };
	char *guard[] = { "-i",		 (char *)bridge, "-d",
			  "127.0.0.0/8", "-m",		 "conntrack",
			  "!",		 "--ctstate",	 "RELATED,ESTABLISHED,DNAT",
			  "-j",		 "DROP",	 NULL };

	char *to_cell[] = { "-o",   (char *)bridge, "-m",     "conntrack", "--ctstate",
			    "DNAT", "-j",	    "ACCEPT", NULL };
	char *from_cell[] = { "-i",   (char *)bridge, "-m",	"conntrack", "--ctstate",
			      "DNAT", "-j",	      "ACCEPT", NULL };

	if (xt_ensure_rule("filter", "INPUT", "-I", guard, "kiyot hostports loopback guard", err) <
		    0 ||
	    forwarding_on("hostPort", err) < 0 ||
	    xt_ensure_rule("filter", "FORWARD", "-I", to_cell, "kiyot hostports", err) < 0 ||
	    xt_ensure_rule("filter", "FORWARD", "-I", from_cell, "kiyot hostports", err) < 0 ||
	    ensure_chain(HOSTPORT_CHAIN, "PREROUTING", local, err) < 0 ||
	    ensure_chain(HOSTPORT_CHAIN, "OUTPUT", local, err) < 0 ||
	    ensure_chain(HOSTPORT_SNAT, "POSTROUTING", NULL, err) < 0 ||
	    xt_ensure_rule("nat", HOSTPORT_SNAT, "-A", loopback, "kiyot hostports loopback", err) <
		    0)
		return -err->code;
	route_localnet(bridge);
	return 0;
}

/* "host port 8080/tcp" or "host port 10.0.0.5:8080/tcp"; the caller frees. */
static char *port_name(const struct cellnat_port *p)
{
	bool any = any_address(p->host_ip);

	return xasprintf("host port %s%s%d/%s", any ? "" : p->host_ip, any ? "" : ":", p->host_port,
			 p->protocol);
}

/* A port another cell's rules hold, or two ports of this pod that claim one host port with
 * different targets: -EADDRINUSE naming the port and its holder. */
static int ports_free(const char *text, const char *cell_id, const struct cellnat_port *ports,
		      size_t n, struct err *err)
{
	for (size_t i = 0; i < n; i++) {
		struct port_query q = { .cell_id = cell_id, .port = &ports[i] };
		_cleanup_free_ char *name = port_name(&ports[i]);

		for (size_t j = 0; j < i; j++)
			if (strcmp(ports[j].protocol, ports[i].protocol) == 0 &&
			    ports[j].host_port == ports[i].host_port &&
			    host_ips_meet(ports[j].host_ip, ports[i].host_ip) &&
			    ports[j].container_port != ports[i].container_port)
				return err_set(err, EADDRINUSE,
					       "%s is mapped twice, to container ports %d and %d",
					       name, ports[j].container_port,
					       ports[i].container_port);
		if (each_rule(text, port_held, &q))
			return err_set(err, EADDRINUSE,
				       "%s is already held by pod %s (cell %s); pick another "
				       "hostPort or remove that pod first",
				       name, q.holder.owner, q.holder.cell_id);
	}
	return 0;
}

/* The cell's DNAT and hairpin rules for one port (idempotent). */
static int port_rules(const char *cidr, const char *cell_ip, const char *comment,
		      const struct cellnat_port *p, struct err *err)
{
	_cleanup_free_ char *hp = xasprintf("%d", p->host_port);
	_cleanup_free_ char *to = xasprintf("%s:%d", cell_ip, p->container_port);
	_cleanup_free_ char *cp = xasprintf("%d", p->container_port);
	char *dnat[MAX_ARGS];
	/* a cell reaching a hostPort through the node (its own or another cell's) would get
	 * the answer straight from the target cell over the bridge, from an address it did
	 * not call: the node stands in as the source */
	char *hairpin[] = { "-p", (char *)p->protocol, "-s",	    (char *)cidr,
			    "-d", (char *)cell_ip,     "--dport",   cp,
			    "-m", "conntrack",	       "--ctstate", "DNAT",
			    "-j", "MASQUERADE",	       NULL };
	size_t k = 0;

	dnat[k++] = "-p";
	dnat[k++] = (char *)p->protocol;
	if (!any_address(p->host_ip)) {
		dnat[k++] = "-d";
		dnat[k++] = (char *)p->host_ip;
	}
	dnat[k++] = "--dport";
	dnat[k++] = hp;
	dnat[k++] = "-j";
	dnat[k++] = "DNAT";
	dnat[k++] = "--to-destination";
	dnat[k++] = to;
	dnat[k] = NULL;
	if (xt_ensure_rule("nat", HOSTPORT_CHAIN, "-A", dnat, comment, err) < 0 ||
	    xt_ensure_rule("nat", HOSTPORT_SNAT, "-A", hairpin, comment, err) < 0)
		return -err->code;
	return 0;
}

int cellnat_hostports_set(const char *bridge, const char *cidr, const char *cell_id,
			  const char *owner, const char *cell_ip, const struct cellnat_port *ports,
			  size_t n, struct err *err)
{
	_cleanup_free_ char *text = NULL;
	char comment[COMMENT_MAX + 1];
	int ret;

	if (n == 0)
		return cellnat_hostports_clear(cell_id, err);
	/* the owner is for people reading the rules: a long pod name is cut, never the id */
	snprintf(comment, sizeof(comment), HOSTPORT_TAG "%s %s", cell_id, owner);
	pthread_mutex_lock(&hostports_lock);
	ret = hostports_base(bridge, err);
	if (ret == 0)
		ret = nat_rules(&text, err);
	if (ret == 0)
		ret = ports_free(text, cell_id, ports, n, err);
	for (size_t i = 0; ret == 0 && i < n; i++)
		ret = port_rules(cidr, cell_ip, comment, &ports[i], err);
	pthread_mutex_unlock(&hostports_lock);
	return ret;
}
