/*
 * chunkq.c: bytes on their way from a client to the far side (see chunkq.h).
 */
#include "chunkq.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static struct chunk *chunk_new(size_t len)
{
	struct chunk *k = xcalloc(1, sizeof(*k) + len);

	k->len = len;
	return k;
}

void chunkq_put(struct chunkq *q, const void *data, size_t len, bool end)
{
	struct chunk *k = chunk_new(len);

	if (len)
		memcpy(k->data, data, len);
	k->end = end;
	if (q->tail)
		q->tail->next = k;
	else
		q->head = k;
	q->tail = k;
	q->bytes += len;
}

/* Unlinks the first chunk. */
static struct chunk *pop(struct chunkq *q)
{
	struct chunk *k = q->head;

	q->head = k->next;
	if (!q->head)
		q->tail = NULL;
	k->next = NULL;
	q->bytes -= k->len - k->off;
	return k;
}

struct chunk *chunkq_take(struct chunkq *q, size_t max)
{
	struct chunk *first, *m;
	size_t total;

	if (!q->head)
		return NULL;
	first = pop(q);
	if (first->end || !q->head || first->len - first->off + q->head->len > max)
		return first;
	total = first->len - first->off;
	for (struct chunk *k = q->head; k && total + k->len <= max; k = k->next) {
		total += k->len;
		if (k->end)
			break;
	}
	m = chunk_new(total);
	memcpy(m->data, first->data + first->off, first->len - first->off);
	total = first->len - first->off;
	free(first);
	while (q->head && !m->end && total + q->head->len <= m->len) {
		struct chunk *k = pop(q);

		memcpy(m->data + total, k->data, k->len);
		total += k->len;
		m->end = k->end;
		free(k);
	}
	return m;
}

struct chunk *chunkq_head(const struct chunkq *q)
{
	return q->head;
}

bool chunkq_advance(struct chunkq *q, size_t n)
{
	struct chunk *k = q->head;
	bool end;

	if (!k)
		return false;
	k->off += n;
	q->bytes -= n;
	if (k->off < k->len)
		return false;
	end = k->end;
	free(pop(q));
	return end;
}

void chunkq_drop(struct chunkq *q)
{
	while (q->head)
		free(pop(q));
	q->tail = NULL;
}
