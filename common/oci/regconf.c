#include "regconf.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "xalloc.h"

#define REGCONF_MAX_HOSTS 256
#define REGCONF_MAX_MIRRORS 16
#define REGCONF_MAX_STR 512

struct reg_mirror {
	char *base_url;
	char *prefix;
};

struct reg_host {
	char *host;
	bool insecure;
	struct reg_mirror *mirrors;
	size_t n_mirrors;
};

struct regconf {
	struct reg_host *hosts;
	size_t n_hosts;
};

/* The configuration entry for host, or NULL. */
static const struct reg_host *regconf_find(const struct regconf *rc, const char *host)
{
	if (!rc)
		return NULL;
	for (size_t i = 0; i < rc->n_hosts; i++)
		if (strcmp(rc->hosts[i].host, host) == 0)
			return &rc->hosts[i];
	return NULL;
}

/* A host[:port] as registries are named: letters, digits, '.', '-', '_', one optional port,
 * or a bracketed IPv6 address. Rejects anything that could smuggle a path or credentials. */
static bool regconf_host_valid(const char *h, size_t n)
{
	size_t i = 0;

	if (n == 0 || n > 255)
		return false;
	if (h[0] == '[') {
		while (i < n && h[i] != ']') {
			if (!strchr("[0123456789abcdefABCDEF:.", h[i]))
				return false;
			i++;
		}
		if (i == n)
			return false;
		i++;
	} else {
		while (i < n && h[i] != ':') {
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
				    ".-_",
				    h[i]))
				return false;
			i++;
		}
		if (i == 0)
			return false;
	}
	if (i == n)
		return true;
	if (h[i] != ':' || i + 1 == n || n - i - 1 > 5)
		return false;
	for (i++; i < n; i++)
		if (h[i] < '0' || h[i] > '9')
			return false;
	return true;
}

/* Parses one mirror "scheme://host[:port][/prefix]" (scheme optional: https, or http when the
 * mirror host is itself named insecure). */
static int regconf_parse_mirror(const struct regconf *rc, const char *key, const char *s,
				struct reg_mirror *m, struct err *err)
{
	const char *scheme = NULL, *p = s, *slash;
	size_t hlen;
	_cleanup_free_ char *host = NULL;

	if (strncmp(s, "https://", 8) == 0) {
		scheme = "https";
		p = s + 8;
	} else if (strncmp(s, "http://", 7) == 0) {
		scheme = "http";
		p = s + 7;
	} else if (strstr(s, "://")) {
		return err_set(
			err, EINVAL,
			"registries: %s: mirror \"%s\": only http:// and https:// are supported",
			key, s);
	}
	slash = strchr(p, '/');
	hlen = slash ? (size_t)(slash - p) : strlen(p);
	if (!regconf_host_valid(p, hlen))
		return err_set(
			err, EINVAL,
			"registries: %s: mirror \"%s\": expected scheme://host[:port][/path]", key,
			s);
	host = xstrndup(p, hlen);
	if (!scheme) {
		const struct reg_host *h = regconf_find(rc, host);

		scheme = h && h->insecure ? "http" : "https";
	}
	m->base_url = xasprintf("%s://%s", scheme, host);
	if (slash) {
		size_t plen = strlen(slash);

		while (plen > 0 && slash[plen - 1] == '/')
			plen--;
		if (memmem(slash, plen, "..", 2) || memchr(slash, '?', plen) ||
		    memchr(slash, '#', plen))
			return err_set(err, EINVAL, "registries: %s: mirror \"%s\": bad path", key,
				       s);
		m->prefix = xstrndup(slash, plen);
	} else {
		m->prefix = xstrdup("");
	}
	return 0;
}

/* Reads the "insecure" flag of every host, so mirrors without a scheme can consult it. */
static int regconf_read_hosts(const json_t *j, struct regconf *rc, struct err *err)
{
	const char *key;
	json_t *v;

	json_object_foreach ((json_t *)j, key, v) {
		struct reg_host *h;
		json_t *ins;
		const char *k2;
		json_t *v2;

		if (rc->n_hosts >= REGCONF_MAX_HOSTS)
			return err_set(err, E2BIG, "registries: more than %d hosts",
				       REGCONF_MAX_HOSTS);
		if (!regconf_host_valid(key, strlen(key)))
			return err_set(err, EINVAL,
				       "registries: \"%.200s\": not a registry host[:port]", key);
		if (!json_is_object(v))
			return err_set(err, EINVAL,
				       "registries: %s: expected an object with \"mirrors\" and/or "
				       "\"insecure\"",
				       key);
		json_object_foreach (v, k2, v2) {
			if (strcmp(k2, "mirrors") && strcmp(k2, "insecure"))
				return err_set(err, EINVAL,
					       "registries: %s: unknown field \"%.100s\" (known: "
					       "mirrors, insecure)",
					       key, k2);
		}
		ins = json_object_get(v, "insecure");
		if (ins && !json_is_boolean(ins))
			return err_set(err, EINVAL,
				       "registries: %s: insecure: expected true or false", key);
		h = &rc->hosts[rc->n_hosts++];
		h->host = xstrdup(key);
		h->insecure = ins && json_is_true(ins);
	}
	return 0;
}

/* Reads each host's mirror list. */
static int regconf_read_mirrors(const json_t *j, struct regconf *rc, struct err *err)
{
	for (size_t i = 0; i < rc->n_hosts; i++) {
		struct reg_host *h = &rc->hosts[i];
		json_t *mirrors = json_object_get(json_object_get(j, h->host), "mirrors");
		size_t idx;
		json_t *m;

		if (!mirrors)
			continue;
		if (!json_is_array(mirrors))
			return err_set(err, EINVAL,
				       "registries: %s: mirrors: expected a list of URLs", h->host);
		if (json_array_size(mirrors) > REGCONF_MAX_MIRRORS)
			return err_set(err, E2BIG, "registries: %s: mirrors: more than %d entries",
				       h->host, REGCONF_MAX_MIRRORS);
		h->mirrors = xcalloc(json_array_size(mirrors) + 1, sizeof(*h->mirrors));
		json_array_foreach (mirrors, idx, m) {
			const char *s = json_string_value(m);
			int ret;

			if (!s || !*s || strlen(s) > REGCONF_MAX_STR)
				return err_set(
					err, EINVAL,
					"registries: %s: mirrors[%zu]: expected a URL string",
					h->host, idx);
			ret = regconf_parse_mirror(rc, h->host, s, &h->mirrors[h->n_mirrors], err);
			if (ret < 0)
				return ret;
			h->n_mirrors++;
		}
	}
	return 0;
}

int regconf_from_json(const json_t *j, struct regconf **out, struct err *err)
{
	struct regconf *rc = xcalloc(1, sizeof(*rc));
	int ret;

	if (j && !json_is_null(j)) {
		if (!json_is_object(j)) {
			regconf_free(rc);
			return err_set(err, EINVAL,
				       "registries: expected an object keyed by registry host");
		}
		rc->hosts = xcalloc(json_object_size(j) + 1, sizeof(*rc->hosts));
		ret = regconf_read_hosts(j, rc, err);
		if (ret == 0)
			ret = regconf_read_mirrors(j, rc, err);
		if (ret < 0) {
			regconf_free(rc);
			return ret;
		}
	}
	*out = rc;
	return 0;
}

void regconf_free(struct regconf *rc)
{
	if (!rc)
		return;
	for (size_t i = 0; i < rc->n_hosts; i++) {
		struct reg_host *h = &rc->hosts[i];

		for (size_t k = 0; k < h->n_mirrors; k++) {
			free(h->mirrors[k].base_url);
			free(h->mirrors[k].prefix);
		}
		free(h->mirrors);
		free(h->host);
	}
	free(rc->hosts);
	free(rc);
}

int regconf_endpoints(const struct regconf *rc, const char *host, struct reg_endpoint **out,
		      size_t *n, struct err *err)
{
	const struct reg_host *h;
	struct reg_endpoint *e;
	const char *real = host;
	size_t k = 0;

	if (!host || !regconf_host_valid(host, strlen(host)))
		return err_set(err, EINVAL, "registry host \"%.200s\" is not a host[:port]",
			       host ? host : "");
	h = regconf_find(rc, host);
	if (!h && strcmp(host, "registry-1.docker.io") == 0)
		h = regconf_find(rc, "docker.io");
	if (strcmp(host, "docker.io") == 0 || strcmp(host, "index.docker.io") == 0)
		real = "registry-1.docker.io";
	e = xcalloc((h ? h->n_mirrors : 0) + 1, sizeof(*e));
	for (size_t i = 0; h && i < h->n_mirrors; i++, k++) {
		e[k].base_url = xstrdup(h->mirrors[i].base_url);
		e[k].prefix = xstrdup(h->mirrors[i].prefix);
		e[k].is_mirror = 1;
	}
	e[k].base_url = xasprintf("%s://%s", h && h->insecure ? "http" : "https", real);
	e[k].prefix = xstrdup("");
	e[k].is_mirror = 0;
	*out = e;
	*n = k + 1;
	return 0;
}

void reg_endpoints_free(struct reg_endpoint *e, size_t n)
{
	if (!e)
		return;
	for (size_t i = 0; i < n; i++) {
		free(e[i].base_url);
		free(e[i].prefix);
	}
	free(e);
}
