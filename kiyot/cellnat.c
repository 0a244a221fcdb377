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
 */
#include "cellnat.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsutil.h"
#include "log.h"
#include "xalloc.h"

#define MAX_ARGS 24
#define ERR_MAX 512

extern char **environ;

/* Runs iptables with args; its exit status, or -errno when it could not run. The first
 * line of what it printed on stderr goes to msg. */
static int iptables(char *const *args, char *msg, size_t size)
{
	char *argv[MAX_ARGS + 2] = { "iptables", "-w" };
	posix_spawn_file_actions_t fa;
	int pipefd[2], status = 0, ret;
	size_t n = 2, got = 0;
	pid_t pid;

	for (size_t i = 0; args[i] && n < MAX_ARGS + 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	msg[0] = '\0';
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
	ret = posix_spawnp(&pid, "iptables", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (ret != 0) {
		close(pipefd[0]);
		return -ret;
	}
	for (ssize_t r; got + 1 < size && (r = read(pipefd[0], msg + got, size - 1 - got)) > 0;)
		got += (size_t)r;
	msg[got] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	close(pipefd[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* Adds a rule (table, chain, where: "-A" or "-I") unless `iptables -C` finds it. */
static int ensure_rule(const char *table, const char *chain, const char *where, char *const *rule,
		       const char *comment, struct err *err)
{
	char *args[MAX_ARGS];
	char msg[ERR_MAX];
	size_t n = 0;
	int ret;

	args[n++] = "-t";
	args[n++] = (char *)table;
	args[n++] = "-C";
	args[n++] = (char *)chain;
	for (size_t i = 0; rule[i]; i++)
		args[n++] = rule[i];
	args[n++] = "-m";
	args[n++] = "comment";
	args[n++] = "--comment";
	args[n++] = (char *)comment;
	args[n] = NULL;
	ret = iptables(args, msg, sizeof(msg));
	if (ret == -ENOENT)
		return err_set(
			err, ENOENT,
			"cells.masquerade needs the iptables command (apt install iptables), "
			"or set it false and add the rules yourself (deploy/README.md)");
	if (ret < 0)
		return err_set(err, -ret, "iptables: %s", strerror(-ret));
	if (ret == 0)
		return 0; /* there already */
	args[2] = (char *)where;
	ret = iptables(args, msg, sizeof(msg));
	if (ret != 0)
		return err_set(err, EIO, "iptables -t %s %s %s: %s", table, where, chain,
			       msg[0] ? msg : "failed");
	log_info("cells: added the %s %s rule \"%s\"", table, chain, comment);
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
	char cur[8] = "";
	char *text = NULL;
	size_t len = 0;

	if (fs_read_file("/proc/sys/net/ipv4/ip_forward", sizeof(cur), &text, &len, err) == 0) {
		snprintf(cur, sizeof(cur), "%s", text);
		free(text);
	}
	if (cur[0] != '1') {
		/* written in place: /proc/sys takes no temporary file and rename */
		int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
		int e = fd < 0 ? errno : (write(fd, "1\n", 2) == 2 ? 0 : errno);

		if (fd >= 0)
			close(fd);
		if (e)
			return err_set(err, e, "cells.masquerade: net.ipv4.ip_forward: %s",
				       strerror(e));
		log_info("cells: net.ipv4.ip_forward set to 1");
	}
	if (ensure_rule("nat", "POSTROUTING", "-A", masq, comment, err) < 0 ||
	    ensure_rule("filter", "FORWARD", "-I", out, comment, err) < 0 ||
	    ensure_rule("filter", "FORWARD", "-I", back, comment, err) < 0)
		return err_wrap(err, "cells.masquerade");
	return 0;
}

/* ---- hostPorts ---- */

#define HOSTPORT_CHAIN "KIYOT-HOSTPORTS"
#define HOSTPORT_SNAT "KIYOT-HOSTPORTS-SNAT"
#define HOSTPORT_TAG "kiyot-hostport "
#define SAVE_MAX (8 * 1024 * 1024)

/* Runs iptables-save -t nat into *out (the caller frees). */
static int nat_rules(char **out, struct err *err)
{
	char path[] = "/tmp/kiyot-nat-XXXXXX";
	int fd = mkstemp(path), status = 0, ret;
	posix_spawn_file_actions_t fa;
	char *argv[] = { "iptables-save", "-t", "nat", NULL };
	pid_t pid;

	if (fd < 0)
		return err_errno(err, "mkstemp");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, STDOUT_FILENO);
	ret = posix_spawnp(&pid, "iptables-save", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fd);
	if (ret == 0 && waitpid(pid, &status, 0) < 0)
		ret = errno;
	if (ret == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
		ret = EIO;
	if (ret == 0)
		ret = -fs_read_file(path, SAVE_MAX, out, NULL, err);
	else
		err_set(err, ret, "iptables-save -t nat failed");
	unlink(path);
	return ret ? -ret : 0;
}

/* Runs one iptables command given as a rule line of iptables-save ("-A CHAIN ..."), with
 * op replacing -A; the quoted comment is kept whole. */
static int rule_op(const char *line, const char *op, struct err *err)
{
	char *copy = xstrdup(line), *args[MAX_ARGS + 3], *p = copy, msg[ERR_MAX];
	size_t n = 0;
	int ret;

	args[n++] = "-t";
	args[n++] = "nat";
	while (*p && n < MAX_ARGS) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		if (*p == '"') {
			args[n++] = ++p;
			p = strchr(p, '"');
			if (!p)
				break;
			*p++ = '\0';
			continue;
		}
		args[n++] = p;
		p += strcspn(p, " ");
		if (*p)
			*p++ = '\0';
	}
	args[n] = NULL;
	if (n > 2)
		args[2] = (char *)op;
	ret = iptables(args, msg, sizeof(msg));
	free(copy);
	if (ret != 0)
		return err_set(err, EIO, "iptables %s: %s", op, msg[0] ? msg : "failed");
	return 0;
}

/* Deletes the hostPort rules of cell_id (those whose comment names it). */
static int clear_rules(const char *cell_id, struct err *err)
{
	_cleanup_free_ char *text = NULL, *tag = xasprintf("\"%s%s ", HOSTPORT_TAG, cell_id);
	char *save = NULL;
	int ret = nat_rules(&text, err);

	if (ret < 0)
		return ret;
	for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
		if (strncmp(l, "-A ", 3) == 0 && strstr(l, tag) && rule_op(l, "-D", err) < 0)
			return -err->code;
	return 0;
}

int cellnat_hostports_clear(const char *cell_id, struct err *err)
{
	char msg[ERR_MAX];
	char *list[] = { "-t", "nat", "-S", HOSTPORT_CHAIN, NULL };

	/* no chain: no rules (and no need for iptables on nodes without hostPorts) */
	if (iptables(list, msg, sizeof(msg)) != 0)
		return 0;
	return clear_rules(cell_id, err);
}

/* The owner of a rule another cell has for proto/port/host_ip, or NULL. */
static char *port_owner(const char *text, const char *cell_id, const struct cellnat_port *p)
{
	_cleanup_free_ char *copy = xstrdup(text);
	_cleanup_free_ char *dport = xasprintf("--dport %d ", p->host_port);
	_cleanup_free_ char *proto = xasprintf("-p %s ", p->protocol);
	_cleanup_free_ char *mine = xasprintf("\"%s%s ", HOSTPORT_TAG, cell_id);
	char *save = NULL;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *tag = strstr(l, "\"" HOSTPORT_TAG);

		if (strncmp(l, "-A " HOSTPORT_CHAIN " ", strlen(HOSTPORT_CHAIN) + 4) != 0 || !tag ||
		    strstr(l, mine) || !strstr(l, dport) || !strstr(l, proto))
			continue;
		tag += strlen(HOSTPORT_TAG) + 1;
		return xstrndup(tag, strcspn(tag, "\""));
	}
	return NULL;
}

/* Creates a chain unless it exists, and the jump to it from `from`. */
static int ensure_chain(const char *chain, const char *from, char *const *match, struct err *err)
{
	char *create[] = { "-t", "nat", "-N", (char *)chain, NULL };
	char *jump[MAX_ARGS];
	char msg[ERR_MAX];
	size_t n = 0;

	iptables(create, msg, sizeof(msg)); /* exists already: fine */
	for (size_t i = 0; match && match[i]; i++)
		jump[n++] = match[i];
	jump[n++] = "-j";
	jump[n++] = (char *)chain;
	jump[n] = NULL;
	return ensure_rule("nat", from, "-I", jump, "kiyot hostports", err);
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

int cellnat_hostports_set(const char *bridge, const char *cell_id, const char *owner,
			  const char *cell_ip, const struct cellnat_port *ports, size_t n,
			  struct err *err)
{
	char *local[] = { "-m", "addrtype", "--dst-type", "LOCAL", NULL };
	char *loopback[] = { "-s", "127.0.0.0/8", "-o", (char *)bridge, "-j", "MASQUERADE", NULL };
	_cleanup_free_ char *text = NULL;
	int ret;

	if (n == 0)
		return cellnat_hostports_clear(cell_id, err);
	if (ensure_chain(HOSTPORT_CHAIN, "PREROUTING", local, err) < 0 ||
	    ensure_chain(HOSTPORT_CHAIN, "OUTPUT", local, err) < 0 ||
	    ensure_chain(HOSTPORT_SNAT, "POSTROUTING", NULL, err) < 0 ||
	    ensure_rule("nat", HOSTPORT_SNAT, "-A", loopback, "kiyot hostports loopback", err) < 0)
		return -err->code;
	route_localnet(bridge);
	ret = nat_rules(&text, err);
	for (size_t i = 0; ret == 0 && i < n; i++) {
		_cleanup_free_ char *holder = port_owner(text, cell_id, &ports[i]);

		if (holder)
			ret = err_set(err, EADDRINUSE,
				      "host port %d/%s is already held by pod %s (cell %.*s)",
				      ports[i].host_port, ports[i].protocol,
				      strchr(holder, ' ') ? strchr(holder, ' ') + 1 : holder,
				      (int)strcspn(holder, " "), holder);
	}
	if (ret == 0)
		ret = clear_rules(cell_id, err);
	for (size_t i = 0; ret == 0 && i < n; i++) {
		const struct cellnat_port *p = &ports[i];
		_cleanup_free_ char *comment = xasprintf(HOSTPORT_TAG "%s %s", cell_id, owner);
		_cleanup_free_ char *hp = xasprintf("%d", p->host_port);
		_cleanup_free_ char *to = xasprintf("%s:%d", cell_ip, p->container_port);
		_cleanup_free_ char *cp = xasprintf("%d", p->container_port);
		char *dnat[MAX_ARGS],
			*hairpin[] = { "-p", (char *)p->protocol, "-s",	     (char *)cell_ip,
				       "-d", (char *)cell_ip,	  "--dport", cp,
				       "-j", "MASQUERADE",	  NULL };
		size_t k = 0;

		dnat[k++] = "-p";
		dnat[k++] = (char *)p->protocol;
		if (p->host_ip && p->host_ip[0]) {
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
		if (ensure_rule("nat", HOSTPORT_CHAIN, "-A", dnat, comment, err) < 0 ||
		    ensure_rule("nat", HOSTPORT_SNAT, "-A", hairpin, comment, err) < 0)
			ret = -err->code;
	}
	return ret;
}
