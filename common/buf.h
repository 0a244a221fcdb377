/*
 * buf.h: a growable byte buffer, always NUL-terminated, with an optional cap.
 *
 *	struct buf b = BUF_INIT;          empty, unbounded (max 0 = no cap)
 *	buf_append(&b, data, n, err);     fails with EFBIG past b.max
 *	buf_release(&b);
 */
#ifndef KIYOT_BUF_H
#define KIYOT_BUF_H

#include <stddef.h>

#include "err.h"

struct buf {
	char *data; /* NUL-terminated; NULL until the first append */
	size_t len;
	size_t cap;
	size_t max; /* 0: no limit */
};

#define BUF_INIT                                                                                   \
	{                                                                                          \
		NULL, 0, 0, 0                                                                      \
	}

void buf_init(struct buf *b, size_t max);
void buf_release(struct buf *b);
void buf_reset(struct buf *b);
int buf_append(struct buf *b, const void *p, size_t n, struct err *err);
int buf_appendf(struct buf *b, struct err *err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Returns the data and leaves the buffer empty; the caller frees it. Never NULL. */
char *buf_detach(struct buf *b, size_t *len);
/* The contents as a C string; "" when empty. */
const char *buf_str(const struct buf *b);

#endif
