/* test_rpc_loop: server-streaming and bidirectional calls on a loop of two threads
 * (rpc_loop.h), against the gRPC server of common/rpc over a unix socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cellagent.pb-c.h"
#include "rpc.h"
#include "rpc_loop.h"

#define WATCHES 100
#define EVENTS 50
#define CALLS 50
#define CALL_MESSAGES 20

/* Watch: as many LOG events (offsets 0, 1, ...) as the first offset of the request says,
 * then, by the first offset's unit_id: "fail" ends with NOT_FOUND, "hold" waits until the
 * client goes away, anything else ends cleanly. */
static int watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		 ProtobufCMessage *resp, struct err *err)
{
	const Kiyot__Cell__V1__WatchRequest *r = (const Kiyot__Cell__V1__WatchRequest *)req;
	uint64_t n = r->n_offsets ? r->offsets[0]->offset : 0;
	const char *then = r->n_offsets ? r->offsets[0]->unit_id : "";

	(void)svc;
	(void)resp;
	for (uint64_t i = 0; i < n; i++) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG;
		ev.offset = i;
		if (rpc_send(call, &ev.base, err) < 0)
			return -err->code;
	}
	if (strcmp(then, "fail") == 0)
		return err_set(err, ENOENT, "no such cell");
	while (strcmp(then, "hold") == 0 && !rpc_cancelled(call))
		usleep(10 * 1000);
	return 0;
}

/* Answers a message the client cannot read as a WatchEvent: field 1 is a string here and an
 * enum there. */
static int garbage(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		   ProtobufCMessage *resp, struct err *err)
{
	Kiyot__Cell__V1__KeyValue kv = KIYOT__CELL__V1__KEY_VALUE__INIT;

	(void)svc;
	(void)req;
	(void)resp;
	kv.key = "not an enum";
	kv.value = "";
	return rpc_send(call, &kv.base, err);
}

/* Bidi: echoes every message of the client back with its value reversed, from the first on,
 * then "end" once the client closed its side. A first message keyed "fail" is echoed, then the
 * call ends with NOT_FOUND. */
static int echo(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		ProtobufCMessage *resp, struct err *err)
{
	bool fail = strcmp(((const Kiyot__Cell__V1__KeyValue *)req)->key, "fail") == 0;
	const ProtobufCMessage *m = req;
	ProtobufCMessage *next = NULL;
	int ret = 1;

	(void)svc;
	(void)resp;
	while (ret > 0) {
		const Kiyot__Cell__V1__KeyValue *in = (const Kiyot__Cell__V1__KeyValue *)m;
		Kiyot__Cell__V1__KeyValue out = KIYOT__CELL__V1__KEY_VALUE__INIT;
		size_t n = strlen(in->value);
		char *rev = rpc_alloc(call, n + 1);

		for (size_t i = 0; i < n; i++)
			rev[i] = in->value[n - 1 - i];
		out.key = in->key;
		out.value = rev;
		ret = rpc_send(call, &out.base, err);
		if (next)
			protobuf_c_message_free_unpacked(next, NULL);
		next = NULL;
		if (ret == 0 && fail)
			return err_set(err, ENOENT, "no such session");
		if (ret == 0)
			ret = rpc_recv(call, &kiyot__cell__v1__key_value__descriptor, &next, err);
		m = next;
	}
	if (ret < 0)
		return ret;
	{
		Kiyot__Cell__V1__KeyValue end = KIYOT__CELL__V1__KEY_VALUE__INIT;

		end.key = "end";
		end.value = "";
		return rpc_send(call, &end.base, err);
	}
}

static const struct rpc_method methods[] = {
	{ "/kiyot.test.Echo/Bidi", &kiyot__cell__v1__key_value__descriptor,
	  &kiyot__cell__v1__key_value__descriptor, echo, RPC_BIDI_STREAM, 0 },
	{ "/kiyot.cell.v1.CellAgent/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__watch_event__descriptor, watch, RPC_SERVER_STREAM, 0 },
	{ "/kiyot.test.Garbage/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__key_value__descriptor, garbage, RPC_SERVER_STREAM, 0 },
};

/* What one watch saw, filled by its callbacks. */
struct seen {
	uint64_t events;
	int in_order;
	int ended, ret, code;
	char msg[512];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

static void on_msg(void *arg, const ProtobufCMessage *msg)
{
	struct seen *s = arg;
	const Kiyot__Cell__V1__WatchEvent *ev = (const Kiyot__Cell__V1__WatchEvent *)msg;

	pthread_mutex_lock(&lock);
	if (ev->offset != s->events || s->ended)
		s->in_order = 0;
	s->events++;
	pthread_mutex_unlock(&lock);
}

static void on_end(void *arg, int ret, const struct err *err)
{
	struct seen *s = arg;

	pthread_mutex_lock(&lock);
	s->ended++;
	s->ret = ret;
	s->code = err->code;
	snprintf(s->msg, sizeof(s->msg), "%s", err->msg);
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Waits up to 10 s for n watches to end; how many did. */
static int wait_ended(struct seen *s, int n)
{
	struct timespec until;
	int done = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&lock);
	for (;;) {
		done = 0;
		for (int i = 0; i < n; i++)
			done += s[i].ended > 0;
		if (done == n || pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&lock);
	return done;
}

struct fixture {
	char path[128];
	char addr[160];
	struct rpc_server *srv;
	struct rpc_channel *ch;
	struct rpc_loop *loop;
};

static int setup(void **state)
{
	static struct fixture f;
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;

	snprintf(f.path, sizeof(f.path), "/tmp/kiyot-test-rpc-loop-%d.sock", (int)getpid());
	snprintf(f.addr, sizeof(f.addr), "unix://%s", f.path);
	cfg.address = f.addr;
	cfg.methods = methods;
	cfg.n_methods = sizeof(methods) / sizeof(methods[0]);
	if (rpc_server_start(&cfg, &f.srv, &err) < 0 || rpc_channel_new(f.addr, &f.ch, &err) < 0 ||
	    rpc_loop_new(2, &f.loop, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	rpc_loop_free(f->loop);
	rpc_channel_free(f->ch);
	rpc_server_stop(f->srv);
	unlink(f->path);
	return 0;
}

/* Opens a Watch asking for n events, then `then` (see watch above). */
static int open_watch(struct fixture *f, const char *method, uint64_t n, const char *then,
		      struct seen *s, struct rpc_watch **w, struct err *err)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__LogOffset off = KIYOT__CELL__V1__LOG_OFFSET__INIT;
	Kiyot__Cell__V1__LogOffset *offs[1] = { &off };

	off.unit_id = (char *)then;
	off.offset = n;
	req.offsets = offs;
	req.n_offsets = 1;
	s->in_order = 1;
	return rpc_watch_open(f->loop, f->ch, method, &req.base,
			      &kiyot__cell__v1__watch_event__descriptor, on_msg, on_end, s, w, err);
}

static void test_rpc_loop__many_watches_each_in_order_on_two_threads(void **state)
{
	struct fixture *f = *state;
	static struct seen s[WATCHES];
	struct err err = ERR_INIT;

	memset(s, 0, sizeof(s));
	for (int i = 0; i < WATCHES; i++) {
		struct rpc_watch *w = NULL;

		assert_int_equal(open_watch(f, "/kiyot.cell.v1.CellAgent/Watch", EVENTS, "", &s[i],
					    &w, &err),
				 0);
	}
	assert_int_equal(wait_ended(s, WATCHES), WATCHES);
	for (int i = 0; i < WATCHES; i++) {
		assert_int_equal(s[i].events, EVENTS);
		assert_true(s[i].in_order);
		assert_int_equal(s[i].ended, 1);
		assert_int_equal(s[i].ret, 0);
	}
}

static void test_rpc_loop__a_status_ends_the_watch_with_its_error(void **state)
{
	struct fixture *f = *state;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(open_watch(f, "/kiyot.cell.v1.CellAgent/Watch", 2, "fail", &s, &w, &err),
			 0);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.events, 2);
	assert_int_equal(s.ret, -ENOENT);
	assert_non_null(strstr(s.msg, "no such cell"));
}

static void test_rpc_loop__cancel_ends_a_held_watch(void **state)
{
	struct fixture *f = *state;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(open_watch(f, "/kiyot.cell.v1.CellAgent/Watch", 1, "hold", &s, &w, &err),
			 0);
	for (int i = 0; i < 500; i++) { /* the event came: the server holds the stream */
		pthread_mutex_lock(&lock);
		i = s.events ? 500 : i;
		pthread_mutex_unlock(&lock);
		usleep(10 * 1000);
	}
	pthread_mutex_lock(&lock);
	assert_int_equal(s.events, 1);
	assert_int_equal(s.ended, 0);
	rpc_watch_cancel(w);
	pthread_mutex_unlock(&lock);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.ret, -ECANCELED);
}

static void test_rpc_loop__a_message_that_does_not_parse_ends_the_watch(void **state)
{
	struct fixture *f = *state;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(open_watch(f, "/kiyot.test.Garbage/Watch", 0, "", &s, &w, &err), 0);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.events, 0);
	assert_int_equal(s.ret, -EINVAL);
	assert_non_null(strstr(s.msg, "/kiyot.test.Garbage/Watch"));
}

static void test_rpc_loop__an_absent_server_ends_the_watch_refused(void **state)
{
	struct fixture *f = *state;
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct rpc_channel *ch = NULL;
	struct seen s = { 0 };
	struct rpc_watch *w = NULL;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_channel_new("unix:///tmp/kiyot-test-no-such.sock", &ch, &err), 0);
	assert_int_equal(rpc_watch_open(f->loop, ch, "/kiyot.cell.v1.CellAgent/Watch", &req.base,
					&kiyot__cell__v1__watch_event__descriptor, on_msg, on_end,
					&s, &w, &err),
			 0);
	assert_int_equal(wait_ended(&s, 1), 1);
	assert_int_equal(s.ret, -ECONNREFUSED);
	assert_non_null(strstr(s.msg, "kiyot-test-no-such.sock"));
	rpc_channel_free(ch);
}

/* ---- bidirectional calls ---- */

/* What one bidirectional call to Echo saw, and what its callbacks do next; under lock. */
struct bidi_seen {
	struct rpc_bidi *b;	/* set by rpc_bidi_open, which the callbacks rely on */
	int to_send;		/* messages to send, the first one included: "hello-0", ... */
	bool close_after;	/* close the client's side once all left */
	bool read_on;		/* ask for the next message in on_msg */
	bool free_in_end;	/* rpc_bidi_free in on_end */
	int sent, send_failed;	/* on_sent with 0, with an error */
	int got;		/* echoes, each checked against what was sent */
	int asked;		/* reads on_msg asked for (and gRPC has by now) */
	bool in_order, got_end; /* got_end: the server's "end", after the client closed */
	int running;		/* callbacks running now */
	int late;		/* on_msg or on_sent after on_end, or on_end while one ran */
	int ended, ret;
	char msg[512];
};

/* "hello-i" reversed: what Echo answers to the i-th message. */
static void echo_of(int i, char *out, size_t size)
{
	char sent[32];
	size_t n = (size_t)snprintf(sent, sizeof(sent), "hello-%d", i);

	for (size_t j = 0; j < n && j + 1 < size; j++)
		out[j] = sent[n - 1 - j];
	out[n < size ? n : size - 1] = '\0';
}

static int bidi_send_hello(struct rpc_bidi *b, int i, struct err *err)
{
	Kiyot__Cell__V1__KeyValue kv = KIYOT__CELL__V1__KEY_VALUE__INIT;
	char val[32];

	snprintf(val, sizeof(val), "hello-%d", i);
	kv.key = "k";
	kv.value = val;
	return rpc_bidi_send(b, &kv.base, err);
}

/* The callbacks count under the lock, then call rpc_bidi_* without it and say they finished
 * under it again: an on_end that came while one of them ran would see it running. */
static void bidi_on_msg(void *arg, ProtobufCMessage *msg)
{
	struct bidi_seen *s = arg;
	Kiyot__Cell__V1__KeyValue *kv = (Kiyot__Cell__V1__KeyValue *)msg;
	struct rpc_bidi *b;
	char want[32];
	bool more;

	pthread_mutex_lock(&lock);
	s->running++;
	s->late += s->ended > 0;
	if (strcmp(kv->key, "end") == 0) {
		s->got_end = true;
	} else {
		echo_of(s->got, want, sizeof(want));
		s->in_order = s->in_order && !s->got_end && strcmp(kv->value, want) == 0;
		s->got++;
	}
	b = s->b;
	more = s->read_on;
	pthread_mutex_unlock(&lock);
	protobuf_c_message_free_unpacked(msg, NULL);
	if (more)
		rpc_bidi_read(b);
	pthread_mutex_lock(&lock);
	s->asked += more;
	s->running--;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

/* Flow control: the next message goes only once the one before left. */
static void bidi_on_sent(void *arg, int ret)
{
	struct bidi_seen *s = arg;
	struct err err = ERR_INIT;
	bool next, close;
	struct rpc_bidi *b;
	int i;

	pthread_mutex_lock(&lock);
	s->running++;
	s->late += s->ended > 0;
	if (ret < 0)
		s->send_failed++;
	else
		s->sent++;
	i = s->sent;
	next = ret == 0 && s->sent < s->to_send;
	close = ret == 0 && s->sent == s->to_send && s->close_after;
	b = s->b;
	pthread_mutex_unlock(&lock);
	if (next && bidi_send_hello(b, i, &err) < 0)
		ret = -err.code;
	if (close)
		rpc_bidi_close_send(b);
	pthread_mutex_lock(&lock);
	s->send_failed += next && ret < 0;
	s->running--;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void bidi_on_end(void *arg, int ret, const struct err *err)
{
	struct bidi_seen *s = arg;

	pthread_mutex_lock(&lock);
	s->late += s->running > 0 || s->ended > 0;
	s->ended++;
	s->ret = ret;
	snprintf(s->msg, sizeof(s->msg), "%s", err->msg);
	if (s->free_in_end) {
		rpc_bidi_free(s->b);
		s->b = NULL;
	}
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static const struct rpc_bidi_cbs bidi_cbs = { bidi_on_msg, bidi_on_sent, bidi_on_end };

/* Opens Echo on ch and loop with "hello-0" keyed key ("fail": see echo), whose answers are of
 * desc; s says what the callbacks do. Under lock, so the callbacks see s as the caller left it
 * once it unlocks. */
static int bidi_open_locked(struct rpc_loop *loop, struct rpc_channel *ch, const char *key,
			    const ProtobufCMessageDescriptor *desc, struct bidi_seen *s,
			    struct err *err)
{
	Kiyot__Cell__V1__KeyValue kv = KIYOT__CELL__V1__KEY_VALUE__INIT;

	kv.key = (char *)key;
	kv.value = "hello-0";
	s->in_order = true;
	return rpc_bidi_open(loop, ch, "/kiyot.test.Echo/Bidi", &kv.base, desc, &bidi_cbs, s, &s->b,
			     err);
}

static int bidi_open(struct rpc_loop *loop, struct rpc_channel *ch, const char *key,
		     const ProtobufCMessageDescriptor *desc, struct bidi_seen *s, struct err *err)
{
	int ret;

	pthread_mutex_lock(&lock);
	ret = bidi_open_locked(loop, ch, key, desc, s, err);
	pthread_mutex_unlock(&lock);
	return ret;
}

/* Waits up to 10 s until field of each of the n calls of s is at least min; whether it was. */
#define bidi_wait(s, n, field, min) bidi_wait_at((s), (n), offsetof(struct bidi_seen, field), (min))
static bool bidi_wait_at(struct bidi_seen *s, int n, size_t field, int min)
{
	struct timespec until;
	bool all = false;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&lock);
	for (;;) {
		all = true;
		for (int i = 0; i < n; i++)
			all = all && *(int *)(void *)((char *)&s[i] + field) >= min;
		if (all || pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&lock);
	return all;
}

/* What n calls of s saw, copied under the lock: asserts run unlocked, so a failing one (which
 * leaves the test by longjmp) does not leave the lock held for the tests after it. */
static void bidi_copy(struct bidi_seen *to, const struct bidi_seen *s, int n)
{
	pthread_mutex_lock(&lock);
	memcpy(to, s, (size_t)n * sizeof(*s));
	pthread_mutex_unlock(&lock);
}

static void test_rpc_loop__bidi_echoes_each_message_in_order_then_ends_clean(void **state)
{
	struct fixture *f = *state;
	struct bidi_seen s = { .to_send = 200, .close_after = true, .read_on = true }, saw;
	struct err err = ERR_INIT;

	assert_int_equal(bidi_open(f->loop, f->ch, "k", &kiyot__cell__v1__key_value__descriptor, &s,
				   &err),
			 0);
	rpc_bidi_read(s.b);
	assert_true(bidi_wait(&s, 1, ended, 1));
	bidi_copy(&saw, &s, 1);
	assert_int_equal(saw.sent, 200);
	assert_int_equal(saw.send_failed, 0);
	assert_int_equal(saw.got, 200);
	assert_true(saw.in_order);
	assert_true(saw.got_end); /* the server saw the client's side close */
	assert_int_equal(saw.ret, 0);
	assert_int_equal(saw.late, 0);
	rpc_bidi_free(s.b);
}

/* A close asked right after the open, usually while the first message is still in flight,
 * closes once it left: the server sees one message, then the end. */
static void test_rpc_loop__bidi_close_send_ends_the_servers_reading(void **state)
{
	struct fixture *f = *state;
	struct bidi_seen s = { .to_send = 1, .read_on = true }, saw;
	struct err err = ERR_INIT;
	int opened, sent_after = 0;

	pthread_mutex_lock(&lock);
	opened = bidi_open_locked(f->loop, f->ch, "k", &kiyot__cell__v1__key_value__descriptor, &s,
				  &err);
	if (opened == 0) {
		rpc_bidi_close_send(s.b);
		sent_after = bidi_send_hello(s.b, 1, &err);
		rpc_bidi_read(s.b);
	}
	pthread_mutex_unlock(&lock);
	assert_int_equal(opened, 0);
	assert_int_equal(sent_after, -ECANCELED);
	assert_true(bidi_wait(&s, 1, ended, 1));
	bidi_copy(&saw, &s, 1);
	assert_int_equal(saw.sent, 1);
	assert_int_equal(saw.got, 1);
	assert_true(saw.in_order);
	assert_true(saw.got_end);
	assert_int_equal(saw.ret, 0);
	assert_int_equal(saw.late, 0);
	rpc_bidi_free(s.b);
}

static void test_rpc_loop__many_bidi_calls_at_once_on_two_threads(void **state)
{
	struct fixture *f = *state;
	static struct bidi_seen s[CALLS], saw[CALLS];
	struct err err = ERR_INIT;

	memset(s, 0, sizeof(s));
	for (int i = 0; i < CALLS; i++) {
		s[i].to_send = CALL_MESSAGES;
		s[i].close_after = true;
		s[i].read_on = true;
		assert_int_equal(bidi_open(f->loop, f->ch, "k",
					   &kiyot__cell__v1__key_value__descriptor, &s[i], &err),
				 0);
		rpc_bidi_read(s[i].b);
	}
	assert_true(bidi_wait(s, CALLS, ended, 1));
	bidi_copy(saw, s, CALLS);
	for (int i = 0; i < CALLS; i++) {
		assert_int_equal(saw[i].sent, CALL_MESSAGES);
		assert_int_equal(saw[i].got, CALL_MESSAGES);
		assert_true(saw[i].in_order);
		assert_true(saw[i].got_end);
		assert_int_equal(saw[i].ret, 0);
		assert_int_equal(saw[i].ended, 1);
		assert_int_equal(saw[i].late, 0);
	}
	for (int i = 0; i < CALLS; i++)
		rpc_bidi_free(s[i].b);
}

static void test_rpc_loop__bidi_servers_error_ends_the_call_with_its_errno(void **state)
{
	struct fixture *f = *state;
	struct bidi_seen s = { .to_send = 1, .read_on = true }, saw;
	struct err err = ERR_INIT;

	assert_int_equal(bidi_open(f->loop, f->ch, "fail", &kiyot__cell__v1__key_value__descriptor,
				   &s, &err),
			 0);
	rpc_bidi_read(s.b);
	assert_true(bidi_wait(&s, 1, ended, 1));
	bidi_copy(&saw, &s, 1);
	assert_int_equal(saw.got, 1); /* what came before the status */
	assert_int_equal(saw.ret, -ENOENT);
	assert_non_null(strstr(saw.msg, "no such session"));
	assert_int_equal(saw.late, 0);
	rpc_bidi_free(s.b);
}

/* The server waits for a message the client never sends while a read is outstanding. On a
 * loop of the test's own, whose end joins its threads: the counts are final then, and a second
 * on_end would show. */
static void test_rpc_loop__bidi_cancel_ends_a_call_whose_read_waits(void **state)
{
	struct fixture *f = *state;
	struct bidi_seen s = { .to_send = 1, .read_on = true, .free_in_end = true };
	struct rpc_loop *loop = NULL;
	struct err err = ERR_INIT;
	int ended;

	assert_int_equal(rpc_loop_new(2, &loop, &err), 0);
	assert_int_equal(
		bidi_open(loop, f->ch, "k", &kiyot__cell__v1__key_value__descriptor, &s, &err), 0);
	rpc_bidi_read(s.b);
	/* on_msg asked for the next message, which the server never sends */
	assert_true(bidi_wait(&s, 1, asked, 1));
	pthread_mutex_lock(&lock);
	ended = s.ended;
	rpc_bidi_cancel(s.b);
	pthread_mutex_unlock(&lock);
	assert_int_equal(ended, 0);
	assert_true(bidi_wait(&s, 1, ended, 1));
	rpc_loop_free(loop);
	assert_int_equal(s.ended, 1);
	assert_int_equal(s.ret, -ECANCELED);
	assert_int_equal(s.got, 1);
	assert_int_equal(s.late, 0);
	assert_null(s.b); /* freed in on_end */
}

/* Nobody reads: the cancel alone brings on_end, after the first message's on_sent. On a loop
 * of the test's own, as above. */
static void test_rpc_loop__bidi_cancel_ends_a_call_with_no_read(void **state)
{
	struct fixture *f = *state;
	struct bidi_seen s = { .to_send = 1, .free_in_end = true };
	struct bidi_seen at_once = { .to_send = 1, .free_in_end = true };
	struct rpc_loop *loop = NULL;
	struct err err = ERR_INIT;
	int opened;

	assert_int_equal(rpc_loop_new(2, &loop, &err), 0);
	assert_int_equal(
		bidi_open(loop, f->ch, "k", &kiyot__cell__v1__key_value__descriptor, &s, &err), 0);
	assert_true(bidi_wait(&s, 1, sent, 1));
	pthread_mutex_lock(&lock);
	rpc_bidi_cancel(s.b);
	pthread_mutex_unlock(&lock);
	/* and one cancelled while its first message may still be in flight */
	pthread_mutex_lock(&lock);
	opened = bidi_open_locked(loop, f->ch, "k", &kiyot__cell__v1__key_value__descriptor,
				  &at_once, &err);
	if (opened == 0)
		rpc_bidi_cancel(at_once.b);
	pthread_mutex_unlock(&lock);
	assert_int_equal(opened, 0);
	assert_true(bidi_wait(&s, 1, ended, 1));
	assert_true(bidi_wait(&at_once, 1, ended, 1));
	rpc_loop_free(loop);
	assert_int_equal(s.ended, 1);
	assert_int_equal(s.ret, -ECANCELED);
	assert_int_equal(s.late, 0);
	assert_int_equal(at_once.ended, 1);
	assert_int_equal(at_once.ret, -ECANCELED);
	assert_int_equal(at_once.sent + at_once.send_failed, 1);
	assert_int_equal(at_once.got, 0);
	assert_int_equal(at_once.late, 0);
}

static void test_rpc_loop__bidi_message_that_does_not_parse_ends_the_call(void **state)
{
	struct fixture *f = *state;
	struct bidi_seen s = { .to_send = 1, .read_on = true }, saw;
	struct err err = ERR_INIT;

	/* Echo answers KeyValues, whose field 1 (a string) is WatchEvent's enum */
	assert_int_equal(bidi_open(f->loop, f->ch, "k", &kiyot__cell__v1__watch_event__descriptor,
				   &s, &err),
			 0);
	rpc_bidi_read(s.b);
	assert_true(bidi_wait(&s, 1, ended, 1));
	bidi_copy(&saw, &s, 1);
	assert_int_equal(saw.got, 0);
	assert_int_equal(saw.ret, -EINVAL);
	assert_non_null(strstr(saw.msg, "/kiyot.test.Echo/Bidi"));
	assert_int_equal(saw.late, 0);
	rpc_bidi_free(s.b);
}

static void test_rpc_loop__bidi_to_an_absent_server_ends_refused(void **state)
{
	struct fixture *f = *state;
	struct rpc_channel *ch = NULL;
	struct bidi_seen s = { .to_send = 1, .read_on = true }, saw;
	struct err err = ERR_INIT;

	assert_int_equal(rpc_channel_new("unix:///tmp/kiyot-test-no-such.sock", &ch, &err), 0);
	assert_int_equal(
		bidi_open(f->loop, ch, "k", &kiyot__cell__v1__key_value__descriptor, &s, &err), 0);
	rpc_bidi_read(s.b);
	assert_true(bidi_wait(&s, 1, ended, 1));
	bidi_copy(&saw, &s, 1);
	assert_int_equal(saw.ret, -ECONNREFUSED);
	assert_non_null(strstr(saw.msg, "kiyot-test-no-such.sock"));
	assert_int_equal(saw.got, 0);
	assert_int_equal(saw.late, 0);
	rpc_bidi_free(s.b);
	rpc_channel_free(ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rpc_loop__many_watches_each_in_order_on_two_threads),
		cmocka_unit_test(test_rpc_loop__a_status_ends_the_watch_with_its_error),
		cmocka_unit_test(test_rpc_loop__cancel_ends_a_held_watch),
		cmocka_unit_test(test_rpc_loop__a_message_that_does_not_parse_ends_the_watch),
		cmocka_unit_test(test_rpc_loop__an_absent_server_ends_the_watch_refused),
		cmocka_unit_test(test_rpc_loop__bidi_echoes_each_message_in_order_then_ends_clean),
		cmocka_unit_test(test_rpc_loop__bidi_close_send_ends_the_servers_reading),
		cmocka_unit_test(test_rpc_loop__many_bidi_calls_at_once_on_two_threads),
		cmocka_unit_test(test_rpc_loop__bidi_servers_error_ends_the_call_with_its_errno),
		cmocka_unit_test(test_rpc_loop__bidi_cancel_ends_a_call_whose_read_waits),
		cmocka_unit_test(test_rpc_loop__bidi_cancel_ends_a_call_with_no_read),
		cmocka_unit_test(test_rpc_loop__bidi_message_that_does_not_parse_ends_the_call),
		cmocka_unit_test(test_rpc_loop__bidi_to_an_absent_server_ends_refused),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
