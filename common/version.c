/*
 * version.c: release numbers (see version.h).
 */
#include "version.h"

#include <stdlib.h>
#include <string.h>

/* One part: digits, at most 65535; *s moves past it. */
static bool part(const char **s, unsigned *out)
{
	unsigned long n = 0;
	const char *p = *s;

	if (*p < '0' || *p > '9')
		return false;
	while (*p >= '0' && *p <= '9') {
		n = n * 10 + (unsigned long)(*p - '0');
		if (n > 65535)
			return false;
		p++;
	}
	*out = (unsigned)n;
	*s = p;
	return true;
}

bool version_parse(const char *s, struct version *v)
{
	struct version r;

	if (!s || !part(&s, &r.major) || *s++ != '.' || !part(&s, &r.minor) || *s++ != '.' ||
	    !part(&s, &r.patch) || (*s && *s != '-' && *s != '+'))
		return false;
	*v = r;
	return true;
}

int version_cmp(const struct version *a, const struct version *b)
{
	if (a->major != b->major)
		return a->major < b->major ? -1 : 1;
	if (a->minor != b->minor)
		return a->minor < b->minor ? -1 : 1;
	if (a->patch != b->patch)
		return a->patch < b->patch ? -1 : 1;
	return 0;
}

bool version_at_least(const char *s, const char *min)
{
	struct version a, b;

	return version_parse(s, &a) && version_parse(min, &b) && version_cmp(&a, &b) >= 0;
}
