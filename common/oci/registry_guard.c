/*
 * registry_guard.c: where a registry client's exchanges may connect (struct reg_guard in
 * registry_internal.h). A pull runs with the node's network and privileges (kiyot) or the
 * cell's (its agent), so a registry must not be able to point it, by a redirect, a token realm
 * or a mirror's answer, at the machine itself: its loopback services, the instance metadata
 * service, its own addresses and ports. Every address is vetted as libcurl is about to connect
 * to it (httpc's guard), after name resolution, so a name that resolves to 127.0.0.1 is caught
 * as well as the number. The endpoints the operator or the user named are exempt, on their own
 * address and port only: a registry configured at 127.0.0.1:5000 may redirect to itself, not
 * to 127.0.0.1:22.
 */
#include "registry_internal.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "regconf.h"
#include "xalloc.h"

/* The most addresses the endpoints of one client resolve to that are kept. */
#define REG_GUARD_MAX_HOME 64

/* Adds the addresses an endpoint's "scheme://host[:port]" resolves to (the scheme's port when
 * it names none), as libcurl reads the URL. */
static void guard_resolve_one(struct reg_guard *g, const char *base_url)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai = NULL;
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	size_t n;

	if (!u)
		abort();
	if (curl_url_set(u, CURLUPART_URL, base_url, CURLU_DEFAULT_SCHEME) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
		goto out;
	n = strlen(host);
	if (n > 2 && host[0] == '[' && host[n - 1] == ']') { /* an IPv6 literal */
		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
	}
	if (getaddrinfo(host, port, &hints, &ai) != 0)
		goto out;
	for (const struct addrinfo *i = ai; i && g->n_home < REG_GUARD_MAX_HOME; i = i->ai_next) {
		if (i->ai_addrlen > sizeof(struct sockaddr_storage))
			continue;
		memset(&g->home[g->n_home], 0, sizeof(g->home[0]));
		memcpy(&g->home[g->n_home++], i->ai_addr, i->ai_addrlen);
	}
	freeaddrinfo(ai);
out:
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
}

/* Whether sa is the address and port of one of the client's endpoints. They are resolved in
 * their order (mirrors first), each once, and only as far as needed: a mirror on the cells'
 * bridge matches by its number, with no lookup of the registry's name behind it. */
static bool guard_is_home(struct reg_guard *g, const struct sockaddr *sa)
{
	size_t i = 0;

	if (!g->home)
		g->home = xcalloc(REG_GUARD_MAX_HOME, sizeof(*g->home));
	for (;;) {
		for (; i < g->n_home; i++)
			if (netguard_same((const struct sockaddr *)&g->home[i], sa))
				return true;
		if (g->n_resolved == g->n_eps)
			return false;
		guard_resolve_one(g, g->eps[g->n_resolved++].base_url);
	}
}

/* httpc's guard: refuses what netguard calls the host's own, unless it is an endpoint's. */
static int guard_check(void *ud, CURL *h, const struct sockaddr *sa, socklen_t len)
{
	struct reg_guard *g = ud;
	enum netguard_kind kind;
	long redirects = 0;

	(void)len;
	kind = netguard_kind_of(sa);
	if (kind == NETGUARD_OUTSIDE || guard_is_home(g, sa))
		return 0;
	curl_easy_getinfo(h, CURLINFO_REDIRECT_COUNT, &redirects);
	netguard_format(sa, g->refused, sizeof(g->refused));
	g->kind = kind;
	g->redirect = redirects > 0;
	return -EPERM;
}

void reg_guard_init(struct reg_guard *g, const struct reg_endpoint *eps, size_t n_eps)
{
	memset(g, 0, sizeof(*g));
	g->eps = eps;
	g->n_eps = n_eps;
	g->hg.check = guard_check;
	g->hg.ud = g;
}

void reg_guard_release(struct reg_guard *g)
{
	free(g->home);
	g->home = NULL;
	g->n_home = 0;
	g->n_resolved = 0;
}

int reg_guard_error(const struct reg_guard *g, bool token, struct err *err)
{
	const char *hop = g->redirect ? "redirect to" : token ? "token realm at" : "connection to";

	return err_set(err, EPERM,
		       "%s %s refused: it is %s; a registry may not send a pull to this host "
		       "itself, nor to loopback, link-local, metadata or multicast addresses "
		       "(only the registry or mirror configured may be at one, and then only "
		       "its own address and port)",
		       hop, g->refused[0] ? g->refused : "(unknown)", netguard_kind_name(g->kind));
}
