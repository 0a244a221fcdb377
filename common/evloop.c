/*
 * evloop.c: one thread serving many descriptors, timers and posted functions (see evloop.h).
 *
 * A turn of the loop runs the timers that are due, then the events of one epoll_wait, then the
 * functions posted until then. Only the post queue and the stop flag are shared with other
 * threads (under the lock); an eventfd in the epoll set wakes the thread for them. Everything
 * else belongs to the loop's thread.
 *
 * An io deleted during a batch of events may still have an event further down the batch, which
 * points at it: it is marked dead, skipped, and freed once the batch is through.
 */
#include "evloop.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "xalloc.h"

#define BATCH 64		     /* events taken by one epoll_wait */
#define MAX_MS (INT64_MAX / 4000000) /* a later timer is as good as never, and cannot overflow */

struct post {
	evloop_fn *fn;
	void *arg;
	struct post *next;
};

struct evloop_io {
	struct evloop *l;
	int fd;
	uint32_t events; /* what the caller asked for, without EPOLLHUP and EPOLLERR */
	bool dead;	 /* deleted during a batch: no more calls, freed after it */
	evloop_io_fn *fn;
	void *arg;
	struct evloop_io *prev, *next; /* the loop's live ios, or (next) its dead ones */
};

struct evloop_timer {
	struct evloop *l;
	int64_t deadline_ns; /* CLOCK_MONOTONIC */
	uint64_t seq;	     /* order of adding: a turn runs only timers older than itself */
	evloop_fn *fn;
	void *arg;
	struct evloop_timer *prev, *next; /* by deadline, then by seq */
};

struct evloop {
	pthread_t th;
	int ep, evfd;

	pthread_mutex_t lock; /* the posts and stop */
	struct post *posts, **posts_tail;
	bool stop;

	/* the loop's thread only */
	struct evloop_timer *timers, *timers_last;
	struct evloop_timer *firing; /* whose callback runs now */
	uint64_t timer_seq;
	struct evloop_io *ios;	/* live */
	struct evloop_io *dead; /* deleted during the batch being dispatched */
	bool in_batch;
};

/* A caller's bug or a broken epoll set: nothing sensible is left to do. */
static void fatal(const char *what, int fd)
{
	fprintf(stderr, "fatal: evloop: %s (fd %d): %s\n", what, fd, strerror(errno));
	abort();
}

static void wake(struct evloop *l)
{
	uint64_t one = 1;

	if (write(l->evfd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is full, so the thread wakes anyway */
	}
}

/* Takes every queued post (FIFO order); NULL when l stops or nothing is queued. */
static struct post *take_posts(struct evloop *l, bool *stop)
{
	struct post *p;

	pthread_mutex_lock(&l->lock);
	*stop = l->stop;
	p = l->posts;
	if (!*stop) {
		l->posts = NULL;
		l->posts_tail = &l->posts;
	}
	pthread_mutex_unlock(&l->lock);
	return *stop ? NULL : p;
}

static void run_posts(struct post *p)
{
	while (p) {
		struct post *next = p->next;

		p->fn(p->arg);
		free(p);
		p = next;
	}
}

static void timer_unlink(struct evloop_timer *t)
{
	struct evloop *l = t->l;

	if (t->prev)
		t->prev->next = t->next;
	else
		l->timers = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		l->timers_last = t->prev;
}

/* Runs the timers due now that were added before this call: one added by a callback here, even
 * with 0 ms, waits for the next turn. */
static void run_timers(struct evloop *l)
{
	int64_t now = clock_mono_ns();
	uint64_t mark = l->timer_seq;
	struct evloop_timer *t;

	while ((t = l->timers) && t->deadline_ns <= now && t->seq < mark) {
		timer_unlink(t);
		l->firing = t;
		t->fn(t->arg);
		l->firing = NULL;
		free(t);
	}
}

/* epoll_wait's timeout: until the first timer, rounded up to a whole ms; -1 without timers. */
static int wait_ms(struct evloop *l)
{
	int64_t left;

	if (!l->timers)
		return -1;
	left = l->timers->deadline_ns - clock_mono_ns();
	if (left <= 0)
		return 0;
	left = (left + 999999) / 1000000;
	return left > INT_MAX ? INT_MAX : (int)left;
}

static void io_free_dead(struct evloop *l)
{
	while (l->dead) {
		struct evloop_io *io = l->dead;

		l->dead = io->next;
		free(io);
	}
}

/* Waits for one batch of events and calls their ios. */
static void run_io(struct evloop *l)
{
	struct epoll_event ev[BATCH];
	int n = epoll_wait(l->ep, ev, BATCH, wait_ms(l));

	if (n < 0) {
		if (errno == EINTR)
			return;
		fatal("epoll_wait", l->ep);
	}
	l->in_batch = true;
	for (int i = 0; i < n; i++) {
		struct evloop_io *io = ev[i].data.ptr;
		uint32_t got;

		if (!io) {
			uint64_t v;

			if (read(l->evfd, &v, sizeof(v)) < 0) {
				/* EAGAIN: another batch read it first */
			}
			continue;
		}
		/* an earlier callback of the batch may have deleted io or narrowed its events */
		got = ev[i].events & (io->events | EPOLLHUP | EPOLLERR);
		if (!io->dead && got)
			io->fn(io->arg, got);
	}
	l->in_batch = false;
	io_free_dead(l);
}

static void *loop_main(void *arg)
{
	struct evloop *l = arg;

	for (;;) {
		struct post *p;
		bool stop;

		run_timers(l);
		run_io(l);
		p = take_posts(l, &stop);
		if (stop)
			return NULL;
		run_posts(p);
	}
}

static void loop_close(struct evloop *l)
{
	if (l->ep >= 0)
		close(l->ep);
	if (l->evfd >= 0)
		close(l->evfd);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* Starts l's thread with every signal blocked, so that SIGPIPE, SIGCHLD and the daemon's
 * SIGTERM go to threads that expect them. l->th is set under the lock: the thread's first
 * callback is a post, taken under the same lock, so evloop_on_loop sees it there. */
static int loop_start(struct evloop *l, const char *name)
{
	sigset_t all, old;
	char short_name[16];
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_mutex_lock(&l->lock);
	rc = pthread_create(&l->th, NULL, loop_main, l);
	pthread_mutex_unlock(&l->lock);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return rc;
	snprintf(short_name, sizeof(short_name), "%s", name);
	pthread_setname_np(l->th, short_name);
	return 0;
}

int evloop_new(const char *name, struct evloop **out, struct err *err)
{
	struct evloop *l = xcalloc(1, sizeof(*l));
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int rc;

	pthread_mutex_init(&l->lock, NULL);
	l->posts_tail = &l->posts;
	l->ep = epoll_create1(EPOLL_CLOEXEC);
	l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->ep < 0 || l->evfd < 0 || epoll_ctl(l->ep, EPOLL_CTL_ADD, l->evfd, &ev) < 0) {
		rc = errno;
		loop_close(l);
		return err_set(err, rc, "event loop %s: %s", name, strerror(rc));
	}
	rc = loop_start(l, name);
	if (rc) {
		loop_close(l);
		return err_set(err, rc, "event loop %s: cannot start its thread: %s", name,
			       strerror(rc));
	}
	*out = l;
	return 0;
}

void evloop_free(struct evloop *l)
{
	struct post *p;

	if (!l)
		return;
	if (evloop_on_loop(l)) {
		fputs("fatal: evloop_free called on the loop's own thread\n", stderr);
		abort();
	}
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_mutex_unlock(&l->lock);
	wake(l);
	pthread_join(l->th, NULL);

	/* what is still queued runs here; a post it makes is run too */
	for (;;) {
		pthread_mutex_lock(&l->lock);
		p = l->posts;
		l->posts = NULL;
		l->posts_tail = &l->posts;
		pthread_mutex_unlock(&l->lock);
		if (!p)
			break;
		run_posts(p);
	}
	while (l->timers) {
		struct evloop_timer *t = l->timers;

		l->timers = t->next;
		free(t);
	}
	while (l->ios) {
		struct evloop_io *io = l->ios;

		l->ios = io->next;
		free(io);
	}
	io_free_dead(l);
	loop_close(l);
}

void evloop_post(struct evloop *l, evloop_fn *fn, void *arg)
{
	struct post *p = xmalloc(sizeof(*p));
	bool was_empty;

	p->fn = fn;
	p->arg = arg;
	p->next = NULL;
	pthread_mutex_lock(&l->lock);
	was_empty = !l->posts;
	*l->posts_tail = p;
	l->posts_tail = &p->next;
	/* a queue that was not empty has woken the thread already, or is yet to be taken. The
	 * wake is made under the lock: once it is released the post may have run, and what it
	 * ended may have let another thread free the loop (a server's stop waits for its last
	 * session's end, which comes as a post) */
	if (was_empty)
		wake(l);
	pthread_mutex_unlock(&l->lock);
}

bool evloop_on_loop(const struct evloop *l)
{
	return pthread_equal(pthread_self(), l->th) != 0;
}

struct evloop_io *evloop_io_add(struct evloop *l, int fd, uint32_t events, evloop_io_fn *fn,
				void *arg)
{
	struct evloop_io *io = xcalloc(1, sizeof(*io));
	struct epoll_event ev = { .events = events, .data.ptr = io };

	if (epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) < 0)
		fatal("cannot watch a descriptor", fd);
	io->l = l;
	io->fd = fd;
	io->events = events;
	io->fn = fn;
	io->arg = arg;
	io->next = l->ios;
	if (l->ios)
		l->ios->prev = io;
	l->ios = io;
	return io;
}

void evloop_io_set(struct evloop_io *io, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = io };

	if (io->dead || io->events == events)
		return;
	if (epoll_ctl(io->l->ep, EPOLL_CTL_MOD, io->fd, &ev) < 0)
		fatal("cannot change what a descriptor is watched for", io->fd);
	io->events = events;
}

uint32_t evloop_io_events(const struct evloop_io *io)
{
	return io->events;
}

void evloop_io_del(struct evloop_io *io)
{
	struct evloop *l;

	if (!io || io->dead)
		return;
	l = io->l;
	/* fails only when the caller closed fd already, which removed it from the set */
	epoll_ctl(l->ep, EPOLL_CTL_DEL, io->fd, NULL);
	if (io->prev)
		io->prev->next = io->next;
	else
		l->ios = io->next;
	if (io->next)
		io->next->prev = io->prev;
	if (!l->in_batch) {
		free(io);
		return;
	}
	io->dead = true;
	io->next = l->dead;
	l->dead = io;
}

struct evloop_timer *evloop_timer_add(struct evloop *l, int64_t ms, evloop_fn *fn, void *arg)
{
	struct evloop_timer *t = xcalloc(1, sizeof(*t));
	struct evloop_timer *after;

	if (ms < 0)
		ms = 0;
	if (ms > MAX_MS)
		ms = MAX_MS;
	t->l = l;
	t->deadline_ns = clock_mono_ns() + ms * 1000000;
	t->seq = l->timer_seq++;
	t->fn = fn;
	t->arg = arg;
	/* from the end: most timers are the same timeout started later, so they go last */
	after = l->timers_last;
	while (after && after->deadline_ns > t->deadline_ns)
		after = after->prev;
	t->prev = after;
	t->next = after ? after->next : l->timers;
	if (t->next)
		t->next->prev = t;
	else
		l->timers_last = t;
	if (after)
		after->next = t;
	else
		l->timers = t;
	return t;
}

void evloop_timer_del(struct evloop_timer *t)
{
	if (!t || t == t->l->firing)
		return;
	timer_unlink(t);
	free(t);
}
