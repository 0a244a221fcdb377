/*
 * arena.c: an arena as a list of zeroed blocks, one per allocation (see arena.h).
 */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

struct arena_chunk {
	struct arena_chunk *next;
	max_align_t data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c = xcalloc(1, sizeof(*c) + n);

	c->next = a->head;
	a->head = c;
	return c->data;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return arena_strndup(a, s, s ? strlen(s) : 0);
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *d = arena_alloc(a, n + 1);

	if (n)
		memcpy(d, s, n);
	return d;
}

void arena_release(struct arena *a)
{
	while (a->head) {
		struct arena_chunk *c = a->head;

		a->head = c->next;
		free(c);
	}
}
