/* test_evloop: one loop thread (evloop.h): posts, descriptors, timers, and what evloop_free does
 * with what is left. The test thread waits on a condition variable for what the loop records;
 * "nothing was called" is checked after two round trips of posts, which by the loop's turns
 * (timers, one epoll_wait, posts) let a whole epoll_wait run after the fact being checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "evloop.h"
#include "testutil.h"

#define WAIT_S 5

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

/* What callbacks record, in the order they ran (under lock). */
struct record {
	int n;
	int v[128];
	bool on_loop[128];
};

static void record_add(struct record *r, int v, bool on_loop)
{
	pthread_mutex_lock(&lock);
	if (r->n < (int)(sizeof(r->v) / sizeof(r->v[0]))) {
		r->v[r->n] = v;
		r->on_loop[r->n] = on_loop;
	}
	r->n++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Waits up to WAIT_S for *count to reach n; returns the count then. */
static int wait_count(const int *count, int n)
{
	struct timespec until = clock_deadline(CLOCK_REALTIME, WAIT_S * 1000);
	int got;

	pthread_mutex_lock(&lock);
	while (*count < n && pthread_cond_timedwait(&cond, &lock, &until) != ETIMEDOUT)
		;
	got = *count;
	pthread_mutex_unlock(&lock);
	return got;
}

static int count_now(const int *count)
{
	int got;

	pthread_mutex_lock(&lock);
	got = *count;
	pthread_mutex_unlock(&lock);
	return got;
}

static void bump(int *count)
{
	pthread_mutex_lock(&lock);
	(*count)++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* fn(arg) run on the loop, the caller waiting for it: how the test thread adds ios and timers,
 * which only the loop may. */
struct call {
	evloop_fn *fn;
	void *arg;
	int done;
};

static void call_run(void *arg)
{
	struct call *c = arg;

	c->fn(c->arg);
	bump(&c->done);
}

static void run_on_loop(struct evloop *l, evloop_fn *fn, void *arg)
{
	struct call c = { fn, arg, 0 };

	evloop_post(l, call_run, &c);
	assert_int_equal(wait_count(&c.done, 1), 1);
}

static void nothing(void *arg)
{
	(void)arg;
}

/* Returns once the loop has run a whole turn (its epoll_wait included) that began after the
 * call: the first post may be taken by a turn whose epoll_wait returned before it, the second
 * is taken by a later turn. */
static void settle(struct evloop *l)
{
	run_on_loop(l, nothing, NULL);
	run_on_loop(l, nothing, NULL);
}

static int setup(void **state)
{
	struct evloop *l;
	struct err err = ERR_INIT;

	if (evloop_new("evloop-test", &l, &err) < 0) {
		print_error("setup: %s\n", err.msg);
		return -1;
	}
	*state = l;
	return 0;
}

static int teardown(void **state)
{
	evloop_free(*state);
	return 0;
}

/* posts */

struct posted {
	struct evloop *l;
	struct record *r;
	int v;
};

static void post_record(void *arg)
{
	struct posted *p = arg;

	record_add(p->r, p->v, evloop_on_loop(p->l));
}

static void test_evloop__posts_run_in_order_on_the_loop(void **state)
{
	struct evloop *l = *state;
	struct record r = { 0 };
	struct posted p[100];

	assert_false(evloop_on_loop(l));
	for (int i = 0; i < 100; i++) {
		p[i] = (struct posted){ l, &r, i };
		evloop_post(l, post_record, &p[i]);
	}
	assert_int_equal(wait_count(&r.n, 100), 100);
	for (int i = 0; i < 100; i++) {
		assert_int_equal(r.v[i], i);
		assert_true(r.on_loop[i]);
	}
}

static void post_outer(void *arg)
{
	struct posted *p = arg;

	evloop_post(p->l, post_record, &p[1]);
	/* a post from the loop must not run inside evloop_post, nor before this returns */
	record_add(p->r, p->v, evloop_on_loop(p->l));
}

static void test_evloop__a_post_from_the_loop_runs_after_its_callback(void **state)
{
	struct evloop *l = *state;
	struct record r = { 0 };
	struct posted p[2] = { { .l = l, .r = &r, .v = 1 }, { .l = l, .r = &r, .v = 2 } };

	evloop_post(l, post_outer, p);
	assert_int_equal(wait_count(&r.n, 2), 2);
	assert_int_equal(r.v[0], 1);
	assert_int_equal(r.v[1], 2);
	assert_true(r.on_loop[1]);
}

struct thread_seen {
	char name[32];
	bool pipe_blocked, chld_blocked;
};

static void look_at_thread(void *arg)
{
	struct thread_seen *s = arg;
	sigset_t cur;

	pthread_getname_np(pthread_self(), s->name, sizeof(s->name));
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	s->pipe_blocked = sigismember(&cur, SIGPIPE) == 1;
	s->chld_blocked = sigismember(&cur, SIGCHLD) == 1;
}

static void test_evloop__its_thread_is_named_and_blocks_signals(void **state)
{
	struct evloop *l;
	struct err err = ERR_INIT;
	struct thread_seen s = { 0 };
	sigset_t cur;

	(void)state;
	assert_ok(evloop_new("a-loop-with-a-long-name", &l, &err));
	run_on_loop(l, look_at_thread, &s);
	evloop_free(l);
	assert_string_equal(s.name, "a-loop-with-a-l"); /* the 15 characters the kernel keeps */
	assert_true(s.pipe_blocked);
	assert_true(s.chld_blocked);
	/* the creator's own mask is as it was */
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	assert_int_equal(sigismember(&cur, SIGPIPE), 0);
}

/* descriptors */

struct reader {
	struct evloop *l;
	int fd;
	struct evloop_io *io;
	uint32_t events;  /* of the last call */
	uint32_t want;	  /* for reader_add and reader_set */
	uint32_t watched; /* evloop_io_events after them */
	char got[16];
	int calls;
	bool del_self;	     /* deletes its io in its first call, reading nothing */
	struct reader *peer; /* whichever of two peers runs first deletes both */
	bool mute;	     /* (with peer) sets both to nothing instead, reading nothing */
};

/* Reads one byte per call (so a second byte calls it again), or deletes io as told. */
static void on_readable(void *arg, uint32_t events)
{
	struct reader *r = arg;
	char c;

	if (r->mute) {
		evloop_io_set(r->peer->io, 0);
		evloop_io_set(r->io, 0);
	} else if (r->del_self || r->peer) {
		if (r->peer) {
			evloop_io_del(r->peer->io);
			r->peer->io = NULL;
		}
		evloop_io_del(r->io);
		r->io = NULL;
	} else if (read(r->fd, &c, 1) == 1) {
		pthread_mutex_lock(&lock);
		r->got[strlen(r->got)] = c;
		pthread_mutex_unlock(&lock);
	}
	pthread_mutex_lock(&lock);
	r->events = events;
	pthread_mutex_unlock(&lock);
	bump(&r->calls);
}

static void reader_add(void *arg)
{
	struct reader *r = arg;

	r->io = evloop_io_add(r->l, r->fd, r->want, on_readable, r);
	r->watched = evloop_io_events(r->io);
}

static void reader_set(void *arg)
{
	struct reader *r = arg;

	evloop_io_set(r->io, r->want);
	r->watched = evloop_io_events(r->io);
}

static void reader_del(void *arg)
{
	struct reader *r = arg;

	evloop_io_del(r->io);
	r->io = NULL;
}

static void open_pipe(int fds[2])
{
	assert_int_equal(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
}

static void test_evloop__a_readable_pipe_calls_back_until_set_to_nothing(void **state)
{
	struct evloop *l = *state;
	struct reader r = { .l = l, .want = EPOLLIN };
	int fds[2];

	open_pipe(fds);
	r.fd = fds[0];
	run_on_loop(l, reader_add, &r);
	assert_int_equal(r.watched, EPOLLIN);
	/* level-triggered: the byte the first call leaves calls it again */
	assert_int_equal(write(fds[1], "ab", 2), 2);
	assert_int_equal(wait_count(&r.calls, 2), 2);
	assert_string_equal(r.got, "ab");
	assert_int_equal(r.events, EPOLLIN);

	r.want = 0;
	run_on_loop(l, reader_set, &r);
	assert_int_equal(r.watched, 0);
	assert_int_equal(write(fds[1], "c", 1), 1);
	settle(l);
	assert_int_equal(count_now(&r.calls), 2);

	r.want = EPOLLIN;
	run_on_loop(l, reader_set, &r);
	assert_int_equal(r.watched, EPOLLIN);
	assert_int_equal(wait_count(&r.calls, 3), 3);
	assert_string_equal(r.got, "abc");

	run_on_loop(l, reader_del, &r);
	close(fds[0]);
	close(fds[1]);
}

static void test_evloop__io_del_in_its_own_callback_ends_the_calls(void **state)
{
	struct evloop *l = *state;
	struct reader r = { .l = l, .want = EPOLLIN, .del_self = true };
	int fds[2];

	open_pipe(fds);
	r.fd = fds[0];
	run_on_loop(l, reader_add, &r);
	assert_int_equal(write(fds[1], "a", 1), 1);
	assert_int_equal(wait_count(&r.calls, 1), 1);
	/* the byte is still there: a registered io would be called again */
	settle(l);
	assert_int_equal(count_now(&r.calls), 1);
	assert_null(r.io);
	close(fds[0]);
	close(fds[1]);
}

static void add_both(void *arg)
{
	struct reader *r = arg;

	reader_add(&r[0]);
	reader_add(&r[1]);
}

/* Two readers of pipes a and b, each the other's peer, both readable before either is
 * watched, so that the first epoll_wait reports both; then watched and a turn run. */
static void readable_pair(struct evloop *l, struct reader r[2], int a[2], int b[2], bool mute)
{
	for (int i = 0; i < 2; i++)
		r[i] = (struct reader){ .l = l, .want = EPOLLIN, .mute = mute };
	open_pipe(a);
	open_pipe(b);
	r[0].fd = a[0];
	r[1].fd = b[0];
	r[0].peer = &r[1];
	r[1].peer = &r[0];
	assert_int_equal(write(a[1], "a", 1), 1);
	assert_int_equal(write(b[1], "b", 1), 1);
	run_on_loop(l, add_both, r);
	settle(l);
}

static void test_evloop__io_del_of_an_io_later_in_the_batch_skips_it(void **state)
{
	struct evloop *l = *state;
	struct reader r[2];
	int a[2], b[2];

	readable_pair(l, r, a, b, false);
	assert_int_equal(count_now(&r[0].calls) + count_now(&r[1].calls), 1);
	assert_null(r[0].io);
	assert_null(r[1].io);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

static void test_evloop__io_set_to_nothing_applies_within_the_batch(void **state)
{
	struct evloop *l = *state;
	struct reader r[2];
	int a[2], b[2];

	readable_pair(l, r, a, b, true);
	/* the second's EPOLLIN of the batch is not for what it is watched for now */
	assert_int_equal(count_now(&r[0].calls) + count_now(&r[1].calls), 1);
	run_on_loop(l, reader_del, &r[0]);
	run_on_loop(l, reader_del, &r[1]);
	close(a[0]);
	close(a[1]);
	close(b[0]);
	close(b[1]);
}

static void test_evloop__a_closed_peer_reports_hangup(void **state)
{
	struct evloop *l = *state;
	struct reader r = { .l = l, .want = EPOLLIN | EPOLLRDHUP, .del_self = true };
	struct reader quiet = { .l = l, .want = 0, .del_self = true };
	int sp[2], sq[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sq), 0);
	r.fd = sp[0];
	quiet.fd = sq[0];
	run_on_loop(l, reader_add, &r);
	run_on_loop(l, reader_add, &quiet);
	assert_int_equal(quiet.watched, 0);
	close(sp[1]);
	close(sq[1]);
	assert_int_equal(wait_count(&r.calls, 1), 1);
	assert_int_equal(wait_count(&quiet.calls, 1), 1);
	assert_true(r.events & EPOLLRDHUP);
	assert_true(r.events & EPOLLHUP);
	assert_true(r.events & EPOLLIN);
	/* watched for nothing, it still hears the hangup, and only that */
	assert_int_equal(quiet.events, EPOLLHUP);
	close(sp[0]);
	close(sq[0]);
}

/* timers */

struct tick {
	struct evloop *l;
	struct record *r;
	int64_t ms, added_ns, fired_ns;
	struct evloop_timer *t;
	struct tick *del, *add; /* a timer its callback deletes, one it adds */
};

static void on_tick(void *arg)
{
	struct tick *k = arg;

	k->t = NULL;
	k->fired_ns = clock_mono_ns();
	if (k->del) {
		evloop_timer_del(k->del->t);
		k->del->t = NULL;
	}
	if (k->add) {
		k->add->added_ns = clock_mono_ns();
		k->add->t = evloop_timer_add(k->l, k->add->ms, on_tick, k->add);
	}
	record_add(k->r, (int)k->ms, evloop_on_loop(k->l));
}

static void tick_add(void *arg)
{
	struct tick *k = arg;

	k->added_ns = clock_mono_ns();
	k->t = evloop_timer_add(k->l, k->ms, on_tick, k);
}

static void add_ticks(void *arg)
{
	struct tick *k = arg;

	for (int i = 0; i < 3; i++)
		tick_add(&k[i]);
}

static void test_evloop__timers_fire_in_deadline_order(void **state)
{
	struct evloop *l = *state;
	struct record r = { 0 };
	struct tick k[3] = { { .l = l, .r = &r, .ms = 30 },
			     { .l = l, .r = &r, .ms = 10 },
			     { .l = l, .r = &r, .ms = 20 } };

	run_on_loop(l, add_ticks, k);
	assert_int_equal(wait_count(&r.n, 3), 3);
	assert_int_equal(r.v[0], 10);
	assert_int_equal(r.v[1], 20);
	assert_int_equal(r.v[2], 30);
	for (int i = 0; i < 3; i++) {
		assert_true(r.on_loop[i]);
		assert_true(k[i].fired_ns - k[i].added_ns >= k[i].ms * 1000000);
		assert_null(k[i].t);
	}
}

static void tick_del(void *arg)
{
	struct tick *k = arg;

	evloop_timer_del(k->t);
	k->t = NULL;
}

/* Adds k[0] and k[1], then deletes k[0]: in one callback, so that k[0] cannot be due before. */
static void add_two_del_first(void *arg)
{
	struct tick *k = arg;

	tick_add(&k[0]);
	tick_add(&k[1]);
	tick_del(&k[0]);
}

static void test_evloop__a_deleted_timer_is_not_called(void **state)
{
	struct evloop *l = *state;
	struct record r = { 0 };
	struct tick k[2] = { { .l = l, .r = &r, .ms = 10 }, { .l = l, .r = &r, .ms = 30 } };

	run_on_loop(l, add_two_del_first, k);
	/* the deleted one was due first: had it fired, it would be first */
	assert_int_equal(wait_count(&r.n, 1), 1);
	settle(l);
	assert_int_equal(count_now(&r.n), 1);
	assert_int_equal(r.v[0], 30);
}

static void add_two(void *arg)
{
	struct tick *k = arg;

	tick_add(&k[0]);
	tick_add(&k[1]);
}

static void test_evloop__a_timer_callback_adds_and_deletes_timers(void **state)
{
	struct evloop *l = *state;
	struct record r = { 0 };
	struct tick added = { .l = l, .r = &r, .ms = 15 };
	struct tick k[2] = { { .l = l, .r = &r, .ms = 20 },
			     { .l = l, .r = &r, .ms = 10, .del = &k[0], .add = &added } };

	run_on_loop(l, add_two, k);
	/* k[1] deletes k[0] (due at 20 ms) and adds one due at 10 + 15 ms: had k[0] stayed, it
	 * would come second */
	assert_int_equal(wait_count(&r.n, 2), 2);
	settle(l);
	assert_int_equal(count_now(&r.n), 2);
	assert_int_equal(r.v[0], 10);
	assert_int_equal(r.v[1], 15);
	assert_null(k[0].t);
	assert_true(added.fired_ns - added.added_ns >= 15 * 1000000);
}

/* evloop_free */

struct blocker {
	int started;
};

static void block_a_while(void *arg)
{
	struct blocker *b = arg;

	bump(&b->started);
	usleep(50 * 1000); /* the loop is busy while the test posts and frees */
}

struct leftover {
	pthread_t ran_on;
	bool on_loop;
	struct evloop *l;
	int ran;
};

/* Owns arg->box (freed here: a leak under ASan if it never ran). */
struct owned {
	struct leftover *seen;
	char *box;
};

static void run_leftover(void *arg)
{
	struct owned *o = arg;

	o->seen->ran_on = pthread_self();
	o->seen->on_loop = evloop_on_loop(o->seen->l);
	o->seen->ran++;
	free(o->box);
	free(o);
}

/* An io and a timer that nothing makes ready before evloop_free. */
struct idle {
	struct reader rd;
	struct tick k;
};

static void add_idle(void *arg)
{
	struct idle *i = arg;

	reader_add(&i->rd);
	tick_add(&i->k);
}

static void test_evloop__free_runs_what_is_still_posted_and_drops_the_rest(void **state)
{
	struct evloop *l;
	struct err err = ERR_INIT;
	struct blocker b = { 0 };
	struct leftover seen = { 0 };
	struct owned *o = calloc(1, sizeof(*o));
	struct record r = { 0 };
	struct idle idle = { 0 };
	int fds[2];

	(void)state;
	assert_non_null(o);
	assert_ok(evloop_new("evloop-free", &l, &err));
	open_pipe(fds);
	idle.rd = (struct reader){ .l = l, .fd = fds[0], .want = EPOLLIN };
	idle.k = (struct tick){ .l = l, .r = &r, .ms = 60000 };
	run_on_loop(l, add_idle, &idle);

	seen.l = l;
	o->seen = &seen;
	o->box = strdup("owned by the post");
	evloop_post(l, block_a_while, &b);
	assert_int_equal(wait_count(&b.started, 1), 1);
	evloop_post(l, run_leftover, o);
	evloop_free(l);
	assert_int_equal(seen.ran, 1);
	assert_true(pthread_equal(seen.ran_on, pthread_self()));
	assert_false(seen.on_loop);
	/* the io and the timer were dropped without a call (and freed: ASan sees no leak) */
	assert_int_equal(idle.rd.calls, 0);
	assert_int_equal(r.n, 0);
	close(fds[0]);
	close(fds[1]);
}

/* a test given a fresh loop as its state */
#define WITH_LOOP(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		WITH_LOOP(test_evloop__posts_run_in_order_on_the_loop),
		WITH_LOOP(test_evloop__a_post_from_the_loop_runs_after_its_callback),
		cmocka_unit_test(test_evloop__its_thread_is_named_and_blocks_signals),
		WITH_LOOP(test_evloop__a_readable_pipe_calls_back_until_set_to_nothing),
		WITH_LOOP(test_evloop__io_del_in_its_own_callback_ends_the_calls),
		WITH_LOOP(test_evloop__io_del_of_an_io_later_in_the_batch_skips_it),
		WITH_LOOP(test_evloop__io_set_to_nothing_applies_within_the_batch),
		WITH_LOOP(test_evloop__a_closed_peer_reports_hangup),
		WITH_LOOP(test_evloop__timers_fire_in_deadline_order),
		WITH_LOOP(test_evloop__a_deleted_timer_is_not_called),
		WITH_LOOP(test_evloop__a_timer_callback_adds_and_deletes_timers),
		cmocka_unit_test(test_evloop__free_runs_what_is_still_posted_and_drops_the_rest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
