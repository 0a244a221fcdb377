/*
 * arena.h: many small allocations freed at once. For building protobuf-c messages that are
 * packed and dropped (requests to agents, an RPC's response: rpc.h's call arena is one), so
 * nothing needs a per-field free and nothing points at a string literal protobuf-c would free.
 *
 *	struct arena a = ARENA_INIT;
 *	Foo *m = arena_alloc(&a, sizeof(*m));
 *	m->name = arena_strdup(&a, name);
 *	... pack m ...
 *	arena_release(&a);
 *
 * Out of memory aborts. Not thread safe: an arena belongs to one thread at a time.
 */
#ifndef KIYOT_ARENA_H
#define KIYOT_ARENA_H

#include <stddef.h>

struct arena {
	struct arena_chunk *head;
};

#define ARENA_INIT                                                                                 \
	{                                                                                          \
		NULL                                                                               \
	}

void *arena_alloc(struct arena *a, size_t n); /* zeroed, aligned for any type; never NULL */
/* A copy of s; "" for NULL. */
char *arena_strdup(struct arena *a, const char *s);
/* The n bytes at s (which need no NUL among them), NUL-terminated. */
char *arena_strndup(struct arena *a, const char *s, size_t n);
/* Frees everything allocated; a is empty again. */
void arena_release(struct arena *a);

#endif
