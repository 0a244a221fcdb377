/*
 * regconf.h: registry host configuration, as clusters expect it (containerd's hosts.toml,
 * CRI-O's registries.conf): per registry host an ordered list of mirror endpoints tried first,
 * and which hosts may be spoken to over plain HTTP. It travels in the cell's bootstrap document
 * as JSON:
 *
 *	"registries": {
 *	  "registry.k8s.io": { "mirrors": ["http://10.77.0.1:5000"] },
 *	  "10.77.0.1:5000":  { "insecure": true }
 *	}
 *
 * A mirror is "scheme://host[:port][/prefix]"; http:// is allowed only for a mirror host that is
 * itself named insecure or written with http:// in a mirror list. Hosts not listed are reached
 * over HTTPS directly.
 */
#ifndef AGENT_REGCONF_H
#define AGENT_REGCONF_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

struct regconf;

/* An endpoint to try for a host, in order: mirrors first, then the host itself. */
struct reg_endpoint {
	char *base_url; /* "https://registry.example:443" or "http://10.77.0.1:5000" (no slash) */
	char *prefix;	/* path prefix before /v2, "" usually */
	int is_mirror;
};

/* j may be NULL (empty configuration). Rejects malformed entries naming the key at fault. */
int regconf_from_json(const json_t *j, struct regconf **out, struct err *err);
void regconf_free(struct regconf *rc);
/* Endpoints for a registry host ("docker.io" maps to registry-1.docker.io). */
int regconf_endpoints(const struct regconf *rc, const char *host, struct reg_endpoint **out,
		      size_t *n, struct err *err);
void reg_endpoints_free(struct reg_endpoint *e, size_t n);

#endif
