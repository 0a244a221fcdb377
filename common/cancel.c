/*
 * cancel.c: the thread's stack of cancel scopes (see cancel.h).
 */
#include "cancel.h"

#include <stddef.h>

static _Thread_local struct cancel_scope *innermost;

void cancel_scope_enter(struct cancel_scope *s, bool (*cancelled)(void *ctx), void *ctx)
{
	s->cancelled = cancelled;
	s->ctx = ctx;
	s->outer = innermost;
	innermost = s;
}

void cancel_scope_leave(struct cancel_scope *s)
{
	if (innermost == s)
		innermost = s->outer;
}

bool cancel_requested(void)
{
	for (struct cancel_scope *s = innermost; s; s = s->outer)
		if (s->cancelled(s->ctx))
			return true;
	return false;
}
