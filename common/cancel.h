/*
 * cancel.h: whether the caller a thread works for has given up.
 *
 * Work done for a caller that can go away (an RPC handler: rpc_call.c opens a scope around
 * every handler) runs inside a cancel scope. Code deep below that blocks for long (a registry
 * transfer, a wait for another thread's download, a wait for a free slot) polls
 * cancel_requested() and stops early with -ECANCELED, so an abandoned call frees its thread,
 * its connections and its share of the bandwidth at once. Outside any scope nothing is ever
 * cancelled, so code that runs in threads of its own (a pre-pull) is unaffected.
 *
 *	struct cancel_scope sc;
 *
 *	cancel_scope_enter(&sc, caller_left, call);
 *	... work that polls cancel_requested() ...
 *	cancel_scope_leave(&sc);
 *
 * Thread safety: a scope belongs to the thread that entered it, and its check runs on that
 * thread only. Scopes nest: the work is cancelled when any enclosing scope's caller left.
 */
#ifndef KIYOT_CANCEL_H
#define KIYOT_CANCEL_H

#include <stdbool.h>

struct cancel_scope {
	bool (*cancelled)(void *ctx); /* cheap; called on the scope's thread */
	void *ctx;
	struct cancel_scope *outer;
};

/* Opens a scope on this thread; s (usually on the caller's stack) must stay until
 * cancel_scope_leave. */
void cancel_scope_enter(struct cancel_scope *s, bool (*cancelled)(void *ctx), void *ctx);
/* Closes the innermost scope, which must be s. */
void cancel_scope_leave(struct cancel_scope *s);
/* True when the caller of any scope open on this thread has given up; false outside scopes. */
bool cancel_requested(void);

#endif
