#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int err_set(struct err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (code <= 0)
		code = EIO;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return -code;
}

int err_wrap(struct err *e, const char *fmt, ...)
{
	char ctx[256];
	char old[sizeof(e->msg)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	/* truncation keeps the outermost context, which is what matters most */
	if (snprintf(e->msg, sizeof(e->msg), "%s: %s", ctx, old) < 0)
		e->msg[0] = '\0';
	if (e->code <= 0)
		e->code = EIO;
	return -e->code;
}

int err_errno(struct err *e, const char *fmt, ...)
{
	int code = errno ? errno : EIO;
	char ctx[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	e->code = code;
	if (snprintf(e->msg, sizeof(e->msg), "%s: %s", ctx, strerror(code)) < 0)
		e->msg[0] = '\0';
	return -code;
}

void err_clear(struct err *e)
{
	e->code = 0;
	e->msg[0] = '\0';
}
