#include "xalloc.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void *check(void *p)
{
	if (!p) {
		fputs("fatal: out of memory\n", stderr);
		abort();
	}
	return p;
}

void *xmalloc(size_t n)
{
	return check(malloc(n ? n : 1));
}

void *xcalloc(size_t nmemb, size_t size)
{
	return check(calloc(nmemb ? nmemb : 1, size ? size : 1));
}

void *xrealloc(void *p, size_t n)
{
	return check(realloc(p, n ? n : 1));
}

char *xstrdup(const char *s)
{
	return check(strdup(s ? s : ""));
}

char *xstrndup(const char *s, size_t n)
{
	return check(strndup(s, n));
}

char *xvasprintf(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		check(NULL);
	return s;
}

char *xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	return s;
}

void xgrow(void **arr, size_t *cap, size_t need, size_t sz)
{
	size_t n = *cap ? *cap : 8;

	if (need <= *cap)
		return;
	while (n < need)
		n *= 2;
	*arr = xrealloc(*arr, n * sz);
	*cap = n;
}

void closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

void fclosep(void *fp)
{
	FILE *f = *(FILE **)fp;

	if (f)
		fclose(f);
}
