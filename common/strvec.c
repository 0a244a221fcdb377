/*
 * strvec.c: NULL-terminated vectors of owned strings (see strvec.h).
 */
#include "strvec.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

char *strvec_empty[] = { NULL };

void strvec_init(struct strvec *sv)
{
	*sv = (struct strvec)STRVEC_INIT;
}

/* Appends s, which the vector takes over. */
static const char *strvec_take(struct strvec *sv, char *s)
{
	if (sv->alloc == 0)
		sv->v = NULL; /* off the shared empty vector */
	xgrow((void **)&sv->v, &sv->alloc, sv->nr + 2, sizeof(*sv->v));
	sv->v[sv->nr++] = s;
	sv->v[sv->nr] = NULL;
	return s;
}

const char *strvec_push(struct strvec *sv, const char *s)
{
	return strvec_take(sv, xstrdup(s));
}

const char *strvec_pushf(struct strvec *sv, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	return strvec_take(sv, s);
}

void strvec_pushv(struct strvec *sv, char *const *v)
{
	for (size_t i = 0; v && v[i]; i++)
		strvec_push(sv, v[i]);
}

void strvec_pushn(struct strvec *sv, char *const *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		strvec_push(sv, l[i]);
}

void strvec_pop(struct strvec *sv)
{
	if (!sv->nr)
		return;
	free(sv->v[--sv->nr]);
	sv->v[sv->nr] = NULL;
}

void strvec_clear(struct strvec *sv)
{
	if (sv->alloc)
		strv_free(sv->v);
	strvec_init(sv);
}

char **strvec_detach(struct strvec *sv)
{
	char **v = sv->alloc ? sv->v : xcalloc(1, sizeof(*v));

	strvec_init(sv);
	return v;
}

void strvec_attach(struct strvec *sv, char **v)
{
	strvec_clear(sv);
	if (!v)
		return;
	sv->v = v;
	sv->nr = strv_len(v);
	sv->alloc = sv->nr + 1;
}

size_t strv_len(char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	return n;
}

void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

char **strv_dup(char *const *v)
{
	struct strvec sv = STRVEC_INIT;

	strvec_pushv(&sv, v);
	return strvec_detach(&sv);
}

bool strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}
