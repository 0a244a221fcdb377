/* test_feed: the cell feed (feed.h) end to end over loopback TCP and real TLS: messages in
 * order for many feeds on few threads, the end, cancel, the certificates each side takes, a
 * frame over the limit, a server that never answers, a server that stops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cellagent.pb-c.h"
#include "feed.h"
#include "pki.h"
#include "testcert.h"
#include "xalloc.h"

/* What a session does: send `events` events of `size` bytes of log each (offset = index),
 * then wait for the client to go when `hold`, else end. */
struct script {
	int events;
	size_t size;
	bool hold;
	int sessions;  /* sessions started */
	int gone_seen; /* sessions that saw their client go */
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

struct fix {
	char *ca, *ca_key;
	struct test_ident agent, kiyot, stranger;
	SSL_CTX *server_ctx, *client_ctx, *stranger_ctx;
	struct feed_server *srv;
	struct feed_loop *loop;
	char target[64];
	struct script sc;
};

static void session(void *arg, struct feed_conn *c, const ProtobufCMessage *req)
{
	struct script *sc = arg;
	const Kiyot__Cell__V1__WatchRequest *r = (const void *)req;
	uint8_t *data = xcalloc(1, sc->size + 1);
	struct err err = ERR_INIT;

	pthread_mutex_lock(&sc->lock);
	sc->sessions++;
	pthread_cond_broadcast(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
	for (int i = 0; i < sc->events; i++) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG;
		ev.unit_id = r->n_offsets ? r->offsets[0]->unit_id : (char *)"u";
		ev.offset = (uint64_t)i;
		ev.data.data = data;
		ev.data.len = sc->size;
		if (feed_send(c, &ev.base, &err) < 0)
			break;
	}
	free(data);
	while (sc->hold && !feed_gone(c))
		usleep(5000);
	pthread_mutex_lock(&sc->lock);
	sc->gone_seen += feed_gone(c);
	pthread_cond_broadcast(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
}

/* The agent's side, with pending connections per address and sessions capped as asked
 * (0 sessions: no cap). */
static void start_server(struct fix *f, int max_pending, int max_sessions)
{
	struct feed_server_config cfg = { 0 };
	struct err err = ERR_INIT;

	cfg.address = "127.0.0.1:0";
	cfg.ctx = f->server_ctx;
	cfg.req_desc = &kiyot__cell__v1__watch_request__descriptor;
	cfg.max_request = 4096;
	cfg.max_conns = 300;
	cfg.max_pending_per_peer = max_pending;
	cfg.max_sessions = max_sessions;
	cfg.session = session;
	cfg.arg = &f->sc;
	if (feed_server_start(&cfg, &f->srv, &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(f->target, sizeof(f->target), "127.0.0.1:%d", feed_server_port(f->srv));
}

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	if (pki_ca_new("kiyot-ca", 1, &f->ca, &f->ca_key, &err) < 0)
		fail_msg("%s", err.msg);
	test_ident_make(f->ca, f->ca_key, "cell-a", PKI_SERVER, &f->agent);
	test_ident_make(f->ca, f->ca_key, "kiyot", PKI_CLIENT, &f->kiyot);
	test_ident_make(f->ca, f->ca_key, "cell-b", PKI_CLIENT, &f->stranger);
	if (pki_tls_ctx(f->ca, f->agent.cert, f->agent.key, PKI_SERVER, "kiyot", &f->server_ctx,
			&err) < 0 ||
	    pki_tls_ctx(f->ca, f->kiyot.cert, f->kiyot.key, PKI_CLIENT, NULL, &f->client_ctx,
			&err) < 0 ||
	    pki_tls_ctx(f->ca, f->stranger.cert, f->stranger.key, PKI_CLIENT, NULL,
			&f->stranger_ctx, &err) < 0)
		fail_msg("%s", err.msg);
	pthread_mutex_init(&f->sc.lock, NULL);
	pthread_cond_init(&f->sc.cond, NULL);
	start_server(f, 300, 0);
	if (feed_loop_new(2, &f->loop, &err) < 0)
		fail_msg("%s", err.msg);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	struct test_ident *ids[] = { &f->agent, &f->kiyot, &f->stranger };

	feed_loop_free(f->loop);
	feed_server_stop(f->srv);
	SSL_CTX_free(f->server_ctx);
	SSL_CTX_free(f->client_ctx);
	SSL_CTX_free(f->stranger_ctx);
	for (size_t i = 0; i < 3; i++)
		test_ident_release(ids[i]);
	free(f->ca);
	free(f->ca_key);
	pthread_mutex_destroy(&f->sc.lock);
	pthread_cond_destroy(&f->sc.cond);
	free(f);
	return 0;
}

/* What one feed received. */
struct got {
	int n;
	bool in_order;
	size_t bytes;
	bool ended;
	int ret;
	char msg[512];
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void got_init(struct got *g)
{
	memset(g, 0, sizeof(*g));
	g->in_order = true;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

static void got_release(struct got *g)
{
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
}

static void on_msg(void *arg, const ProtobufCMessage *msg)
{
	struct got *g = arg;
	const Kiyot__Cell__V1__WatchEvent *ev = (const void *)msg;

	pthread_mutex_lock(&g->lock);
	if (ev->offset != (uint64_t)g->n)
		g->in_order = false;
	g->n++;
	g->bytes += ev->data.len;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

static void on_end(void *arg, int ret, const struct err *err)
{
	struct got *g = arg;

	pthread_mutex_lock(&g->lock);
	g->ended = true;
	g->ret = ret;
	snprintf(g->msg, sizeof(g->msg), "%s", ret < 0 ? err->msg : "");
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Waits for the feed's first message (or its end); how many came. */
static int wait_first(struct got *g)
{
	int n;

	pthread_mutex_lock(&g->lock);
	while (!g->n && !g->ended)
		pthread_cond_wait(&g->cond, &g->lock);
	n = g->n;
	pthread_mutex_unlock(&g->lock);
	return n;
}

static void wait_end(struct got *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->ended)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

/* Opens a feed to target as the peer named, with ctx; 0, or feed_open's error. */
static int open_feed(struct fix *f, SSL_CTX *ctx, const char *target, const char *peer,
		     size_t max_frame, int handshake_ms, struct got *g, struct feed_watch **w,
		     struct err *err)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct feed_open_args a = {
		.ctx = ctx,
		.target = target,
		.peer_name = peer,
		.request = &req.base,
		.msg_desc = &kiyot__cell__v1__watch_event__descriptor,
		.max_frame = max_frame,
		.handshake_ms = handshake_ms,
		.on_msg = on_msg,
		.on_end = on_end,
		.arg = g,
	};

	return feed_open(f->loop, &a, w, err);
}

/* 200 feeds of 50 events each on two threads: each gets its events in order, then a clean
 * end when the agent's session returns; one of 300 KB events crosses whole. */
static void test_feed__many_feeds_in_order(void **state)
{
	struct fix *f = *state;
	enum {
		N = 200
	};
	struct got *g = xcalloc(N, sizeof(*g));
	struct feed_watch *w;
	struct err err = ERR_INIT;

	f->sc.events = 50;
	f->sc.size = 100;
	for (int i = 0; i < N; i++) {
		got_init(&g[i]);
		assert_int_equal(open_feed(f, f->client_ctx, f->target, "cell-a", 1 << 20, 0, &g[i],
					   &w, &err),
				 0);
	}
	for (int i = 0; i < N; i++) {
		wait_end(&g[i]);
		if (g[i].ret != 0)
			fail_msg("feed %d: %s", i, g[i].msg);
		assert_int_equal(g[i].n, 50);
		assert_true(g[i].in_order);
		got_release(&g[i]);
	}
	free(g);

	g = xcalloc(1, sizeof(*g));
	got_init(g);
	f->sc.events = 3;
	f->sc.size = 300 * 1024;
	assert_int_equal(open_feed(f, f->client_ctx, f->target, "cell-a", 1 << 20, 0, g, &w, &err),
			 0);
	wait_end(g);
	assert_int_equal(g->ret, 0);
	assert_int_equal(g->n, 3);
	assert_int_equal(g->bytes, 3 * 300 * 1024);
	got_release(g);
	free(g);
}

/* Opens a feed to a session that sends one event of 10 bytes and then holds on until its
 * client goes; waits for that event. */
static void open_held_feed(struct fix *f, struct got *g, struct feed_watch **w)
{
	struct err err = ERR_INIT;

	f->sc.events = 1;
	f->sc.size = 10;
	f->sc.hold = true;
	got_init(g);
	if (open_feed(f, f->client_ctx, f->target, "cell-a", 1 << 20, 0, g, w, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(wait_first(g), 1);
}

/* A cancel ends the feed at once (-ECANCELED), and the agent's session sees its client go. */
static void test_feed__cancel(void **state)
{
	struct fix *f = *state;
	struct got g;
	struct feed_watch *w;

	open_held_feed(f, &g, &w);
	feed_cancel(w);
	wait_end(&g);
	assert_int_equal(g.ret, -ECANCELED);
	pthread_mutex_lock(&f->sc.lock);
	while (f->sc.gone_seen < 1)
		pthread_cond_wait(&f->sc.cond, &f->sc.lock);
	pthread_mutex_unlock(&f->sc.lock);
	got_release(&g);
}

/* kiyot takes only the cell it means; the agent only kiyot: neither session starts. */
static void test_feed__certificates(void **state)
{
	struct fix *f = *state;
	struct got g;
	struct feed_watch *w;
	struct err err = ERR_INIT;

	f->sc.events = 1;
	f->sc.size = 10;
	got_init(&g);
	assert_int_equal(open_feed(f, f->client_ctx, f->target, "cell-b", 1 << 20, 0, &g, &w, &err),
			 0);
	wait_end(&g);
	assert_int_equal(g.ret, -ECONNREFUSED);
	if (!strstr(g.msg, "certificate"))
		fail_msg("\"%s\" does not speak of the certificate", g.msg);
	assert_int_equal(g.n, 0);
	got_release(&g);

	got_init(&g);
	assert_int_equal(
		open_feed(f, f->stranger_ctx, f->target, "cell-a", 1 << 20, 0, &g, &w, &err), 0);
	wait_end(&g);
	assert_true(g.ret < 0);
	assert_int_equal(g.n, 0);
	got_release(&g);
	assert_int_equal(f->sc.sessions, 0);
}

/* A message over the client's limit ends the feed (-EMSGSIZE) before it is read whole. */
static void test_feed__frame_over_the_limit(void **state)
{
	struct fix *f = *state;
	struct got g;
	struct feed_watch *w;
	struct err err = ERR_INIT;

	f->sc.events = 2;
	f->sc.size = 70000;
	got_init(&g);
	assert_int_equal(open_feed(f, f->client_ctx, f->target, "cell-a", 65536, 0, &g, &w, &err),
			 0);
	wait_end(&g);
	assert_int_equal(g.ret, -EMSGSIZE);
	assert_non_null(strstr(g.msg, "65536"));
	assert_int_equal(g.n, 0);
	got_release(&g);
}

/* Nobody listening: refused; a listener that never speaks: timed out. */
static void test_feed__unreachable(void **state)
{
	struct fix *f = *state;
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	char target[64];
	struct got g;
	struct feed_watch *w;
	struct err err = ERR_INIT;
	int ret;

	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	snprintf(target, sizeof(target), "127.0.0.1:%d", ntohs(sin.sin_port));
	got_init(&g);
	/* bound, not listening: a refused connect, now or from the loop */
	ret = open_feed(f, f->client_ctx, target, "cell-a", 1 << 20, 0, &g, &w, &err);
	if (ret == 0) {
		wait_end(&g);
		ret = g.ret;
	}
	assert_int_equal(ret, -ECONNREFUSED);
	got_release(&g);

	assert_int_equal(listen(lfd, 4), 0);
	got_init(&g);
	assert_int_equal(open_feed(f, f->client_ctx, target, "cell-a", 1 << 20, 300, &g, &w, &err),
			 0);
	wait_end(&g);
	assert_int_equal(g.ret, -ETIMEDOUT);
	assert_non_null(strstr(g.msg, "300 ms"));
	got_release(&g);
	close(lfd);

	assert_int_equal(open_feed(f, f->client_ctx, "nowhere", "cell-a", 1 << 20, 0, &g, &w, &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "ip:port"));
}

/* A server that stops ends the sessions it serves, and its clients' feeds end. */
static void test_feed__server_stops(void **state)
{
	struct fix *f = *state;
	struct got g;
	struct feed_watch *w;

	open_held_feed(f, &g, &w); /* its session runs */
	feed_server_stop(f->srv);
	f->srv = NULL;
	wait_end(&g);
	assert_int_equal(f->sc.gone_seen, 1);
	assert_true(g.ret <= 0);
	got_release(&g);
}

/* A TCP connection from 127.0.0.2 to the server that sends nothing (a neighbour holding a
 * handshake open); its descriptor. */
static int idle_conn_from_neighbour(struct fix *f)
{
	struct sockaddr_in from = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	from.sin_addr.s_addr = htonl(0x7f000002);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons((uint16_t)feed_server_port(f->srv));
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	return fd;
}

/* Whether the server closed fd within 1 s. */
static bool closed_soon(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char b;

	return poll(&p, 1, 1000) == 1 && recv(fd, &b, 1, MSG_DONTWAIT) == 0;
}

/* A neighbour holding ten handshakes open gets four (the rest are closed at accept), and
 * kiyot's feed from another address still comes through. */
static void test_feed__a_neighbour_cannot_hold_the_door(void **state)
{
	struct fix *f = *state;
	int fds[10], closed = 0;
	struct got g;
	struct feed_watch *w;

	feed_server_stop(f->srv);
	start_server(f, 0, 0);
	for (int i = 0; i < 10; i++)
		fds[i] = idle_conn_from_neighbour(f);
	for (int i = 0; i < 10; i++)
		closed += closed_soon(fds[i]);
	assert_int_equal(closed, 10 - FEED_PENDING_PER_PEER);
	open_held_feed(f, &g, &w);
	feed_cancel(w);
	wait_end(&g);
	got_release(&g);
	for (int i = 0; i < 10; i++)
		close(fds[i]);
}

/* Past max_sessions a new session ends the oldest: a restarted kiyot's feed replaces the one
 * its predecessor left open. */
static void test_feed__a_new_session_ends_the_oldest(void **state)
{
	struct fix *f = *state;
	struct got g[3];
	struct feed_watch *w[3];

	feed_server_stop(f->srv);
	start_server(f, 0, 2);
	for (int i = 0; i < 3; i++)
		open_held_feed(f, &g[i], &w[i]);
	wait_end(&g[0]); /* ended by the server */
	assert_true(g[0].ret <= 0 && g[0].ret != -ECANCELED);
	usleep(200 * 1000);
	assert_false(g[1].ended);
	assert_false(g[2].ended);
	for (int i = 1; i < 3; i++) {
		feed_cancel(w[i]);
		wait_end(&g[i]);
		assert_int_equal(g[i].ret, -ECANCELED);
	}
	for (int i = 0; i < 3; i++)
		got_release(&g[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_feed__many_feeds_in_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed__cancel, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed__certificates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed__frame_over_the_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed__unreachable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed__server_stops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_feed__a_neighbour_cannot_hold_the_door, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_feed__a_new_session_ends_the_oldest, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
