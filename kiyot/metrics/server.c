/*
 * server.c: the scrape endpoint (server.h) on one event loop. A connection reads its head
 * (bounded in size and time), then renders and writes its answer, then closes its sending side
 * and reads until the client closes (so that bytes it sent after the head do not turn the
 * close into a reset that loses the answer), within the same timer.
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "evloop.h"
#include "log.h"
#include "netaddr.h"
#include "metrics.h"
#include "stream/http.h"
#include "xalloc.h"

/* An exposition larger than this is cut off with an error answer (1,000 cells take ~100 KB) */
#define MAX_ANSWER (64u << 20)
/* After the answer: how long the client has to close its side */
#define LINGER_MS 1000

struct metrics_server {
	struct evloop *loop;
	struct metrics_registry *reg;
	struct metrics_limits lim;
	int lfd, port;
	struct evloop_io *lio;
	struct mconn *conns;
	int n_conns;
	pthread_mutex_t mu; /* stopped: the loop let every connection go */
	pthread_cond_t cond;
	bool stopped;
};

struct mconn {
	struct metrics_server *s;
	struct mconn *prev, *next;
	int fd;
	struct evloop_io *io;
	struct evloop_timer *timer;
	struct buf in;	/* the head, up to lim.max_head */
	struct buf out; /* the answer */
	size_t sent;	/* of out */
	bool answered;	/* out is ready; sending it */
	bool lingering; /* sent and shut down for writing: waiting for the client's close */
};

static void conn_end(struct mconn *c)
{
	struct metrics_server *s = c->s;

	evloop_io_del(c->io);
	evloop_timer_del(c->timer);
	close(c->fd);
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->n_conns--;
	buf_release(&c->in);
	buf_release(&c->out);
	free(c);
}

static const char *reason_of(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 431:
		return "Request Header Fields Too Large";
	case 503:
		return "Service Unavailable";
	default:
		return "Internal Server Error";
	}
}

/* Status line, headers and body into out (replacing what it held). */
static void answer_into(struct buf *out, int status, const char *ctype, const char *extra,
			const char *body, size_t len)
{
	struct err err = ERR_INIT;

	buf_reset(out);
	buf_appendf(out, &err,
		    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
		    "Connection: close\r\n\r\n",
		    status, reason_of(status), ctype, len, extra ? extra : "");
	buf_append(out, body, len, &err);
}

static void answer_text(struct buf *out, int status, const char *extra, const char *text)
{
	_cleanup_free_ char *body = xasprintf("%s\n", text);

	answer_into(out, status, "text/plain; charset=utf-8", extra, body, strlen(body));
}

/* The answer to a whole head. */
static void answer_request(struct mconn *c, const struct http_req *req)
{
	size_t plen = strcspn(req->target, "?");
	struct buf body = BUF_INIT;
	struct err err = ERR_INIT;

	if (!(plen == strlen("/metrics") && strncmp(req->target, "/metrics", plen) == 0)) {
		answer_text(&c->out, 404, NULL, "not found: the metrics are at /metrics");
		return;
	}
	if (strcmp(req->method, "GET") != 0) {
		answer_text(&c->out, 405, "Allow: GET\r\n", "method not allowed: use GET");
		return;
	}
	buf_init(&body, MAX_ANSWER);
	if (metrics_render(c->s->reg, &body, &err) < 0) {
		log_warn("metrics: scrape: %s", err.msg);
		answer_text(&c->out, 500, NULL, "the metrics could not be rendered");
	} else {
		answer_into(&c->out, 200, METRICS_CONTENT_TYPE, NULL, buf_str(&body), body.len);
	}
	buf_release(&body);
}

/* The client did not close its side after the answer: it is closed anyway. */
static void linger_end(void *arg)
{
	struct mconn *c = arg;

	c->timer = NULL;
	conn_end(c);
}

static void conn_send(struct mconn *c)
{
	while (c->sent < c->out.len) {
		ssize_t n = send(c->fd, c->out.data + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			evloop_io_set(c->io, EPOLLOUT);
			return;
		}
		if (n < 0) {
			conn_end(c);
			return;
		}
		c->sent += (size_t)n;
	}
	shutdown(c->fd, SHUT_WR);
	c->lingering = true;
	evloop_io_set(c->io, EPOLLIN);
	evloop_timer_del(c->timer);
	c->timer = NULL;
	c->timer = evloop_timer_add(c->s->loop, LINGER_MS, linger_end, c);
}

static void conn_answer(struct mconn *c)
{
	c->answered = true;
	conn_send(c);
}

/* Reads what came; once the head is whole (or cannot be), answers. */
static void conn_read(struct mconn *c)
{
	char chunk[2048];
	struct http_req req;
	struct err err = ERR_INIT;
	ssize_t n, head;

	for (;;) {
		size_t room = c->s->lim.max_head - c->in.len;

		n = recv(c->fd, chunk, room < sizeof(chunk) ? room : sizeof(chunk), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			conn_end(c);
			return;
		}
		buf_append(&c->in, chunk, (size_t)n, &err);
		head = http_parse_head(c->in.data, c->in.len, &req, &err);
		if (head > 0) {
			answer_request(c, &req);
			http_req_release(&req);
			break;
		}
		if (head < 0) {
			answer_text(&c->out, 400, NULL, err.msg);
			break;
		}
		if (c->in.len >= c->s->lim.max_head) {
			_cleanup_free_ char *t =
				xasprintf("request head larger than %zu bytes: send a shorter one",
					  c->s->lim.max_head);

			answer_text(&c->out, 431, NULL, t);
			break;
		}
	}
	conn_answer(c);
}

static void on_conn(void *arg, uint32_t events)
{
	struct mconn *c = arg;
	char sink[512];

	if (c->lingering) {
		ssize_t n = recv(c->fd, sink, sizeof(sink), 0);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
		    (events & (EPOLLHUP | EPOLLERR)))
			conn_end(c);
		return;
	}
	if (c->answered) {
		if (events & (EPOLLHUP | EPOLLERR))
			conn_end(c);
		else
			conn_send(c);
		return;
	}
	conn_read(c);
}

/* The client did not send its head, or read its answer, in time. */
static void on_timeout(void *arg)
{
	struct mconn *c = arg;

	c->timer = NULL;
	if (!c->answered) {
		answer_text(&c->out, 408, NULL, "request head not received in time");
		(void)!send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	conn_end(c);
}

/* One over the bound: told so at once, best effort, and closed. */
static void refuse(struct metrics_server *s, int fd)
{
	struct buf out = BUF_INIT;
	_cleanup_free_ char *t = xasprintf("%d scrapes already under way, the most at once: retry",
					   s->lim.max_connections);

	answer_text(&out, 503, "Retry-After: 1\r\n", t);
	(void)!send(fd, out.data, out.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	buf_release(&out);
	close(fd);
}

static void on_accept(void *arg, uint32_t events)
{
	struct metrics_server *s = arg;

	(void)events;
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;
		struct mconn *c;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		if (s->n_conns >= s->lim.max_connections) {
			refuse(s, fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = xcalloc(1, sizeof(*c));
		c->s = s;
		c->fd = fd;
		buf_init(&c->in, s->lim.max_head + 1);
		c->next = s->conns;
		if (s->conns)
			s->conns->prev = c;
		s->conns = c;
		s->n_conns++;
		c->io = evloop_io_add(s->loop, fd, EPOLLIN, on_conn, c);
		c->timer = evloop_timer_add(s->loop, s->lim.head_timeout_ms, on_timeout, c);
	}
}

static void listen_start(void *arg)
{
	struct metrics_server *s = arg;

	s->lio = evloop_io_add(s->loop, s->lfd, EPOLLIN, on_accept, s);
}

static void stop_all(void *arg)
{
	struct metrics_server *s = arg;

	evloop_io_del(s->lio);
	s->lio = NULL;
	while (s->conns)
		conn_end(s->conns);
	pthread_mutex_lock(&s->mu);
	s->stopped = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

int metrics_server_start(const char *address, struct metrics_registry *r,
			 const struct metrics_limits *limits, struct metrics_server **out,
			 struct err *err)
{
	static const struct metrics_limits defaults = {
		.max_head = METRICS_MAX_HEAD,
		.head_timeout_ms = METRICS_HEAD_TIMEOUT_MS,
		.max_connections = METRICS_MAX_CONNECTIONS,
	};
	struct sockaddr_in sa = { 0 };
	struct metrics_server *s;
	int fd = netaddr_listen_ipv4(address, 64, &sa, err);

	if (fd == -EADDRINUSE)
		return err_set(err, EADDRINUSE,
			       "metrics server on %s: the address is in use (another process, or "
			       "kiyot's streaming server): pick another port",
			       address);
	if (fd < 0)
		return err_wrap(err, "metrics server");
	s = xcalloc(1, sizeof(*s));
	s->reg = r;
	s->lim = limits ? *limits : defaults;
	if (s->lim.max_head > HTTP_MAX_HEAD)
		s->lim.max_head = HTTP_MAX_HEAD;
	s->lfd = fd;
	s->port = ntohs(sa.sin_port);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (evloop_new("kiyot-metrics", &s->loop, err) < 0) {
		close(fd);
		free(s);
		return err_wrap(err, "metrics server");
	}
	evloop_post(s->loop, listen_start, s);
	log_info("metrics server on %s:%d (GET /metrics)", inet_ntoa(sa.sin_addr), s->port);
	*out = s;
	return 0;
}

int metrics_server_port(const struct metrics_server *s)
{
	return s->port;
}

void metrics_server_stop(struct metrics_server *s)
{
	if (!s)
		return;
	evloop_post(s->loop, stop_all, s);
	pthread_mutex_lock(&s->mu);
	while (!s->stopped)
		pthread_cond_wait(&s->cond, &s->mu);
	pthread_mutex_unlock(&s->mu);
	evloop_free(s->loop);
	close(s->lfd);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cond);
	free(s);
}
