/*
 * xtables.h: the node's netfilter commands as kiyot runs them (cellnat.c, cellguard.c):
 * iptables, iptables-save and iptables-restore, ebtables-save and ebtables-restore, found in
 * PATH, so whichever backend the node uses (nf_tables or legacy) is the one changed, as CNI
 * plugins do.
 *
 *	char msg[XT_MSG_SIZE];
 *	int st = xt_iptables((char *[]){ "-t", "nat", "-N", "KIYOT-X", NULL }, msg, sizeof(msg));
 *
 * Nothing here keeps state; callable from any thread.
 */
#ifndef KIYOT_XTABLES_H
#define KIYOT_XTABLES_H

#include <stddef.h>

#include "err.h"

/* The most a -save prints that is read (a node with kube-proxy's rules stays far below). */
#define XT_OUT_MAX (8 * 1024 * 1024)
/* Room for the first line of what a command said on stderr. */
#define XT_MSG_SIZE 512
/* Words of one command line at most. */
#define XT_MAX_ARGS 48

/*
 * Runs argv (argv[0] looked up in PATH, at most XT_MAX_ARGS words) with input on its stdin
 * (NULL: nothing), its stdout into *out when out is not NULL (NUL-terminated, at most
 * XT_OUT_MAX bytes, the caller frees; discarded otherwise), and the first line of its stderr
 * in msg. Returns its exit status (128 when a signal ended it), or -errno when it could not
 * run: -ENOENT when there is no such command, -EFBIG when it printed more than XT_OUT_MAX.
 */
int xt_run(char *const *argv, const char *input, char **out, char *msg, size_t msg_size);

/* `iptables -w ARGS...` (args NULL-terminated): exit status or -errno as xt_run. */
int xt_iptables(char *const *args, char *msg, size_t msg_size);

/*
 * Adds `iptables -t TABLE WHERE CHAIN RULE... -m comment --comment COMMENT` (where: "-A" or
 * "-I") unless `iptables -C` finds that rule, so calling it again changes nothing. Logs what
 * it added. -ENOENT saying to install iptables when the command is missing.
 */
int xt_ensure_rule(const char *table, const char *chain, const char *where, char *const *rule,
		   const char *comment, struct err *err);

/* `CMD-save -t TABLE` (cmd: "iptables" or "ebtables") into *out, the caller frees. */
int xt_save(const char *cmd, const char *table, char **out, struct err *err);

/* `CMD-restore --noflush` of text: every line of it in one transaction, all or nothing. Chains
 * the text declares (":NAME ...") are emptied and filled with its rules; others are left as
 * they are. */
int xt_restore(const char *cmd, const char *text, struct err *err);

#endif
