/*
 * arena.h: many small allocations freed at once. For building protobuf-c messages that are
 * packed and dropped (requests to agents), so nothing needs a per-field free.
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

void *arena_alloc(struct arena *a, size_t n); /* zeroed; never NULL */
char *arena_strdup(struct arena *a, const char *s);
void arena_release(struct arena *a);

#endif
