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
