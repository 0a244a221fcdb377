#include "buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "xalloc.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

void buf_release(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

int buf_append(struct buf *b, const void *p, size_t n, struct err *err)
{
	if (b->max && b->len + n > b->max)
		return err_set(err, EFBIG, "more than %zu bytes", b->max);
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (cap < b->len + n + 1)
			cap *= 2;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_appendf(struct buf *b, struct err *err, const char *fmt, ...)
{
	va_list ap;
	char *s;
	int ret;

	va_start(ap, fmt);
	s = xvasprintf(fmt, ap);
	va_end(ap);
	ret = buf_append(b, s, strlen(s), err);
	free(s);
	return ret;
}

char *buf_detach(struct buf *b, size_t *len)
{
	char *d = b->data ? b->data : xstrdup("");

	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}

const char *buf_str(const struct buf *b)
{
	return b->data ? b->data : "";
}
