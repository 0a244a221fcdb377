/*
 * err.h: the error type every fallible function fills.
 *
 * A fallible function returns 0 (or a count) on success and a negative errno-style value on
 * failure, and takes `struct err *err` last. The message is built innermost first and each
 * caller prefixes its context with err_wrap(), so the final text reads outermost first:
 * "pod web: image busybox: registry 10.0.0.1:5000: connection refused".
 * An error is logged once, where it is handled.
 */
#ifndef KIYOT_ERR_H
#define KIYOT_ERR_H

#include <stddef.h>

struct err {
	int code;      /* positive errno value; 0 when no error is set */
	char msg[512]; /* human text, context outermost first */
};

#define ERR_INIT                                                                                   \
	{                                                                                          \
		0,                                                                                 \
		{                                                                                  \
			0                                                                          \
		}                                                                                  \
	}

/* Sets code and message; returns -code so callers can `return err_set(...)`. */
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes "<context>: " to the message; returns -code. */
int err_wrap(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets from errno with "<context>: strerror(errno)"; returns -errno. */
int err_errno(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void err_clear(struct err *e);

#endif
