/*
 * evloop.h: one thread serving many file descriptors: epoll readiness, one-shot timers, and
 * functions other threads post to it. What a server keeps per connection is then its state,
 * not a thread and its stack.
 *
 *	evloop_new("stream", &l, &err);		   its thread starts
 *	evloop_post(l, start, conn);		   from any thread: start(conn) runs on the loop
 *	...in start, on the loop:
 *	c->io = evloop_io_add(l, fd, EPOLLIN, on_io, c);
 *	c->timer = evloop_timer_add(l, 10000, on_timeout, c);
 *	evloop_io_set(c->io, EPOLLIN | EPOLLOUT);   while output waits
 *	evloop_io_del(c->io); close(fd);	   done
 *	...
 *	evloop_free(l);				   from another thread
 *
 * Readiness is level-triggered: a callback that leaves bytes unread is called again. Every
 * callback runs on the loop's thread, one at a time, and must not block; only evloop_post,
 * evloop_on_loop and evloop_free may be called from other threads, the rest only on the loop
 * (from a callback). A turn of the loop runs the timers that are due, then the callbacks of
 * one epoll_wait (up to 64 descriptors), then the functions posted until then, in the order
 * they were posted; a function posted while these run waits for the next turn. A post thus
 * waits at most for one turn's timers and I/O.
 */
#ifndef KIYOT_EVLOOP_H
#define KIYOT_EVLOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

struct evloop;
struct evloop_io;
struct evloop_timer;

/* events: what epoll_wait said of the descriptor (EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLHUP,
 * EPOLLERR). */
typedef void evloop_io_fn(void *arg, uint32_t events);
typedef void evloop_fn(void *arg);

/* A loop and its thread, named name (at most 15 characters show in /proc). */
int evloop_new(const char *name, struct evloop **out, struct err *err);
/* Stops the loop's thread and frees the loop. Not from the loop (aborts). Functions posted and
 * not yet run are run once the thread has ended, on the caller's thread (so what they own is
 * freed; evloop_on_loop is false in them); descriptors and timers still registered, theirs
 * included, are then dropped without a call (their owners must have ended first). The loop may
 * finish the turn it is in before it stops. NULL is ignored. */
void evloop_free(struct evloop *l);

/* Runs fn(arg) on the loop; from any thread, the loop's too (then after the callback that
 * posted it). Never fails (aborts on out-of-memory, as xmalloc). */
void evloop_post(struct evloop *l, evloop_fn *fn, void *arg);
/* Whether the caller runs on l's thread. */
bool evloop_on_loop(const struct evloop *l);

/* Watches fd for events (EPOLLIN, EPOLLOUT, EPOLLRDHUP; EPOLLHUP and EPOLLERR always); fn
 * gets what is ready of what io is watched for at the time of the call (an evloop_io_set by an
 * earlier callback of the same turn counts). Aborts when epoll refuses fd (a bad descriptor, or
 * one already watched by the loop, is the caller's bug). */
struct evloop_io *evloop_io_add(struct evloop *l, int fd, uint32_t events, evloop_io_fn *fn,
				void *arg);
/* What fd is watched for from now on (0: nothing but EPOLLHUP and EPOLLERR; fd stays in the
 * epoll set). Aborts when epoll refuses (fd closed while watched is the caller's bug). */
void evloop_io_set(struct evloop_io *io, uint32_t events);
/* What it is watched for now. */
uint32_t evloop_io_events(const struct evloop_io *io);
/* Stops watching and frees io (the descriptor stays open, the caller's to close after). Safe
 * in any callback, io's own included: no call for io comes after. NULL is ignored. */
void evloop_io_del(struct evloop_io *io);

/* Calls fn(arg) once, ms milliseconds from now on CLOCK_MONOTONIC (0 or less: on the next
 * turn; timers due at the same time fire in the order they were added). The timer frees itself
 * after the call: its handle is good until then (a holder clears it in fn). */
struct evloop_timer *evloop_timer_add(struct evloop *l, int64_t ms, evloop_fn *fn, void *arg);
/* Cancels a timer that has not fired, and frees it. NULL is ignored, and so is the timer whose
 * callback runs now (it is freed after the call anyway). */
void evloop_timer_del(struct evloop_timer *t);

#endif
