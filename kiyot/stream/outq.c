#include "outq.h"

#include <string.h>

void outq_init(struct outq *q)
{
	buf_init(&q->b, 0);
	q->off = 0;
}

void outq_release(struct outq *q)
{
	buf_release(&q->b);
	q->off = 0;
}

void outq_put(struct outq *q, const void *p, size_t n)
{
	struct err err = ERR_INIT;

	/* an uncapped buf fails only by aborting on out-of-memory */
	(void)buf_append(&q->b, p, n, &err);
}

const uint8_t *outq_peek(const struct outq *q, size_t *len)
{
	*len = q->b.len - q->off;
	return *len ? (const uint8_t *)q->b.data + q->off : NULL;
}

/* Consumed bytes are dropped once nothing is pending, or moved out when they are most of it. */
void outq_consume(struct outq *q, size_t n)
{
	size_t left = q->b.len - q->off;

	q->off += n < left ? n : left;
	if (q->off == q->b.len) {
		buf_reset(&q->b);
		q->off = 0;
	} else if (q->off > q->b.len / 2) {
		memmove(q->b.data, q->b.data + q->off, q->b.len - q->off);
		q->b.len -= q->off;
		q->b.data[q->b.len] = '\0';
		q->off = 0;
	}
}

size_t outq_len(const struct outq *q)
{
	return q->b.len - q->off;
}
