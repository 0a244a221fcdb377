/*
 * fuzz_registry: the WWW-Authenticate header of a registry's 401, as the registry client reads
 * it to log in (reg_parse_challenge, registry_internal.h). The first byte picks the mode: even,
 * the rest is the header as the registry sent it; odd, the rest is a value the test quotes
 * (escaping '"' and '\') into `Bearer realm="...",service=s,scope="..."`. Besides what the
 * sanitizers catch, it checks the parser's promises: the scheme is what precedes the first
 * space, no value is longer than the header, and a quoted value reads back exactly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry_internal.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *header)
{
	fprintf(stderr, "%s\nheader: %s\n", what, header);
	abort();
}

/* value quoted as a header's quoted-string: '"' and '\' escaped. */
static char *quote(const char *value)
{
	size_t n = strlen(value);
	char *q = xmalloc(2 * n + 3), *o = q;

	*o++ = '"';
	for (const char *p = value; *p; p++) {
		if (*p == '"' || *p == '\\')
			*o++ = '\\';
		*o++ = *p;
	}
	*o++ = '"';
	*o = '\0';
	return q;
}

static void check(const char *h, const char *want_realm)
{
	char *scheme = NULL, *realm = NULL, *service = NULL, *scope = NULL;
	size_t hlen = strlen(h);

	reg_parse_challenge(h, &scheme, &realm, &service, &scope);
	if (!scheme || strlen(scheme) != strcspn(h, " ") || strncmp(scheme, h, strlen(scheme)))
		fail("the scheme is not what precedes the first space", h);
	if ((realm && strlen(realm) > hlen) || (service && strlen(service) > hlen) ||
	    (scope && strlen(scope) > hlen))
		fail("a value longer than the header", h);
	if (want_realm) {
		if (!realm || strcmp(realm, want_realm) != 0)
			fail("the quoted realm did not read back", h);
		if (!service || strcmp(service, "s") != 0)
			fail("the service after a quoted realm did not read back", h);
		if (!scope || strcmp(scope, want_realm) != 0)
			fail("the quoted scope did not read back", h);
	}
	free(scheme);
	free(realm);
	free(service);
	free(scope);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;

	if (size < 1 || size > 64 * 1024)
		return 0;
	/* a header is a C string by the time the client reads it: up to the first NUL */
	text = xstrndup((const char *)data + 1, size - 1);
	if (data[0] & 1) {
		char *q = quote(text);
		char *h = xasprintf("Bearer realm=%s,service=s,scope=%s", q, q);

		check(h, text);
		free(h);
		free(q);
	} else {
		check(text, NULL);
	}
	free(text);
	return 0;
}
