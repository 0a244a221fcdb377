/*
 * conn.c: a client connection of the streaming server (see stream_internal.h): a
 * non-blocking socket on the server's loop, its output (an HTTP answer, then the protocol's
 * frames) written as the client takes it, its input handed to the session.
 *
 * Back-pressure, both ways: a session that has too much for its client (conn_pending over
 * CONN_OUT_HIGH) stops taking more from its agent or pods until `writable`; one whose agent
 * is slow to take input pauses the connection, and TCP then holds the client.
 *
 * A write that fails shuts the socket both ways: the next turn of the loop sees the hang-up
 * and tells the session the client is gone, so no callback runs inside the session's own
 * call of conn_flush.
 */
#include "stream_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "evloop.h"
#include "spdy.h"
#include "ws.h"
#include "xalloc.h"

/* The most read from the client at once. */
#define CONN_READ_MAX (64 * 1024)

static void conn_free(struct conn *c)
{
	evloop_io_del(c->io);
	evloop_timer_del(c->timer);
	evloop_timer_del(c->wake);
	close(c->fd);
	outq_release(&c->raw);
	spdy_session_free(c->sp);
	ws_session_free(c->ws);
	stream_conn_track(c->srv, c, false);
	stream_release(c->srv);
	free(c);
}

/* Marks c for freeing: now, or when the callback running for it returns. */
static void conn_kill(struct conn *c)
{
	c->dead = true;
	c->ops = NULL;
	if (!c->depth)
		conn_free(c);
}

static void conn_update(struct conn *c)
{
	uint32_t ev = EPOLLRDHUP;

	if (!c->paused || c->ending)
		ev |= EPOLLIN;
	if (conn_pending(c))
		ev |= EPOLLOUT;
	if (evloop_io_events(c->io) != ev)
		evloop_io_set(c->io, ev);
}

size_t conn_pending(const struct conn *c)
{
	size_t n = outq_len(&c->raw), p = 0;

	if (c->sp)
		spdy_output(c->sp, &p);
	else if (c->ws)
		ws_output(c->ws, &p);
	return n + p;
}

/* The next bytes to write: the raw queue's, then the protocol's. */
static const uint8_t *conn_next(struct conn *c, size_t *n)
{
	const uint8_t *p = outq_peek(&c->raw, n);

	if (p)
		return p;
	if (c->sp)
		return spdy_output(c->sp, n);
	if (c->ws)
		return ws_output(c->ws, n);
	*n = 0;
	return NULL;
}

static void conn_consume(struct conn *c, size_t n)
{
	if (outq_len(&c->raw))
		outq_consume(&c->raw, n);
	else if (c->sp)
		spdy_output_consume(c->sp, n);
	else if (c->ws)
		ws_output_consume(c->ws, n);
}

static void conn_linger_expired(void *arg)
{
	struct conn *c = arg;

	c->timer = NULL;
	conn_kill(c);
}

static void conn_wake(void *arg)
{
	struct conn *c = arg;

	c->wake = NULL;
	if (c->ops && c->ops->writable)
		c->ops->writable(c->sess);
}

/* Writes what the socket takes; true if any byte went. */
static bool conn_write(struct conn *c)
{
	bool moved = false;
	const uint8_t *p;
	size_t n;

	while ((p = conn_next(c, &n)) && n) {
		ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			/* the client is gone: what waits for it is dropped, and the hang-up shows
			 * on the next turn */
			shutdown(c->fd, SHUT_RDWR);
			while ((p = conn_next(c, &n)) && n)
				conn_consume(c, n);
			break;
		}
		conn_consume(c, (size_t)w);
		moved = true;
	}
	return moved;
}

void conn_flush(struct conn *c)
{
	bool moved;
	size_t left;

	if (c->dead)
		return;
	moved = conn_write(c);
	left = conn_pending(c);
	if (left > CONN_OUT_HIGH) {
		c->high = true;
	} else if (c->high && left < CONN_OUT_LOW) {
		c->high = false;
		if (!c->wake && c->ops) /* told on a turn of its own, not inside the caller */
			c->wake = evloop_timer_add(c->loop, 0, conn_wake, c);
	}
	if (c->ending && !left) {
		shutdown(c->fd, SHUT_WR);
	} else if (c->ending && moved && c->timer) {
		/* a slow client still reading its last output keeps the connection */
		evloop_timer_del(c->timer);
		c->timer = evloop_timer_add(c->loop, CONN_LINGER_MS, conn_linger_expired, c);
	}
	conn_update(c);
}

static void conn_gone(struct conn *c)
{
	const struct conn_ops *ops = c->ops;

	if (c->ending) {
		conn_kill(c);
		return;
	}
	c->ops = NULL; /* said once */
	if (ops && ops->gone)
		ops->gone(c->sess);
	else
		conn_kill(c); /* nobody to tell */
}

static void conn_read(struct conn *c, uint32_t events)
{
	uint8_t buf[CONN_READ_MAX];
	ssize_t n;

	if (c->paused && !c->ending) {
		/* not reading, but a client that hangs up must not hold its session */
		if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			conn_gone(c);
		return;
	}
	n = read(c->fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) {
		conn_gone(c);
		return;
	}
	if (!c->ending && c->ops && c->ops->input)
		c->ops->input(c->sess, buf, (size_t)n);
}

static void conn_io(void *arg, uint32_t events)
{
	struct conn *c = arg;

	c->depth++;
	if (events & EPOLLOUT)
		conn_flush(c);
	if (!c->dead && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		conn_read(c, events);
	c->depth--;
	if (c->dead && !c->depth)
		conn_free(c);
}

struct conn *conn_new(struct stream_server *srv, int fd, uint32_t peer)
{
	struct conn *c = xcalloc(1, sizeof(*c));

	c->srv = srv;
	c->peer = peer;
	c->loop = stream_loop(srv);
	c->cells = stream_cells(srv);
	c->fd = fd;
	outq_init(&c->raw);
	c->io = evloop_io_add(c->loop, fd, EPOLLIN | EPOLLRDHUP, conn_io, c);
	stream_hold(srv);
	stream_conn_track(srv, c, true);
	return c;
}

void conn_attach(struct conn *c, const struct conn_ops *ops, void *sess)
{
	c->ops = ops;
	c->sess = sess;
}

void conn_put(struct conn *c, const void *data, size_t len)
{
	outq_put(&c->raw, data, len);
}

void conn_pause(struct conn *c, bool paused)
{
	if (c->paused == paused || c->dead)
		return;
	c->paused = paused;
	conn_update(c);
}

void conn_end(struct conn *c, int linger_ms)
{
	c->ops = NULL;
	c->sess = NULL;
	evloop_timer_del(c->wake);
	c->wake = NULL;
	if (linger_ms <= 0 || c->dead) {
		conn_kill(c);
		return;
	}
	c->ending = true;
	c->timer = evloop_timer_add(c->loop, linger_ms, conn_linger_expired, c);
	conn_flush(c);
}

void conn_fail(struct conn *c, int status, const char *text)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	if (http_answer_error(&b, status, NULL, text, &err) == 0)
		conn_put(c, b.data, b.len);
	buf_release(&b);
	conn_end(c, CONN_LINGER_MS);
}
