/*
 * server.c: the streaming server's listener, its single-use URLs and its connections (see
 * server.h). All of it but the URLs runs on one event loop: a connection reads one HTTP
 * request head (within HEAD_TIMEOUT_MS), takes its token and becomes the session of the
 * token's kind (stream_internal.h).
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "codec.h"
#include "evloop.h"
#include "http.h"
#include "log.h"
#include "stream_internal.h"
#include "xalloc.h"

/* How long a client has to send its request head. */
#define HEAD_TIMEOUT_MS 10000

struct token {
	char id[33];
	int64_t expires_ns;
	size_t bytes;		    /* what its request holds, for the server's bound */
	struct stream_request *req; /* owned copies, handed to the session that uses it */
	struct token *next;
};

struct stream_server {
	struct cellmgr *cells;
	struct evloop *loop;
	int lfd;
	struct evloop_io *lio;
	int port;
	pthread_mutex_t mu;
	pthread_cond_t idle;
	struct token *tokens; /* newest first */
	size_t ntokens, token_bytes;
	size_t forgotten;	  /* URLs forgotten for room since the last warning */
	int64_t forgotten_log_ns; /* when that warning was written */
	int work;		  /* connections and sessions not yet ended (under mu) */
	int conns;		  /* connections (the loop's) */
	struct conn *conn_list;	  /* the loop's */
	bool stopping;
};

/* A connection reading its request head. */
struct head {
	struct conn *c;
	struct buf b;
	struct evloop_timer *timer;
};

void stream_request_free(struct stream_request *r)
{
	if (!r)
		return;
	free((char *)r->cell_id);
	free((char *)r->unit_id);
	for (size_t i = 0; i < r->n_cmd; i++)
		free(r->cmd[i]);
	free((char **)r->cmd);
	free((int32_t *)r->ports);
	free(r);
}

/* The URL path's first element, and the name in messages, of each kind. */
static const char *const kind_paths[] = {
	[STREAM_EXEC] = "exec", [STREAM_PORTFORWARD] = "portforward", [STREAM_ATTACH] = "attach"
};
static const char *const kind_names[] = {
	[STREAM_EXEC] = "exec", [STREAM_PORTFORWARD] = "port-forward", [STREAM_ATTACH] = "attach"
};

static void token_free(struct token *t)
{
	stream_request_free(t->req);
	free(t);
}

/* Unlinks *pp, a token of the table, and frees it. */
static void token_drop(struct stream_server *s, struct token **pp)
{
	struct token *t = *pp;

	*pp = t->next;
	s->ntokens--;
	s->token_bytes -= t->bytes;
	token_free(t);
}

/* Makes room for a token of bytes: the expired ones go, then the oldest while the table is
 * past its bounds. Called with s->mu held. */
static void tokens_make_room(struct stream_server *s, size_t bytes)
{
	int64_t now = clock_mono_ns();
	size_t dropped = 0;

	for (struct token **pp = &s->tokens; *pp;) {
		if ((*pp)->expires_ns < now)
			token_drop(s, pp);
		else
			pp = &(*pp)->next;
	}
	while (s->tokens && (s->ntokens >= STREAM_MAX_TOKENS ||
			     s->token_bytes + bytes > STREAM_MAX_TOKEN_BYTES)) {
		struct token **oldest = &s->tokens;

		while ((*oldest)->next)
			oldest = &(*oldest)->next;
		token_drop(s, oldest);
		dropped++;
	}
	/* one warning every 10 s at most: a flood of requests must not flood the log too */
	s->forgotten += dropped;
	if (s->forgotten && (!s->forgotten_log_ns || now - s->forgotten_log_ns >= 10000000000LL)) {
		log_warn("streaming server: %zu unused URL(s) forgotten to keep within %d URLs and "
			 "%u MiB; their clients must ask again",
			 s->forgotten, STREAM_MAX_TOKENS, STREAM_MAX_TOKEN_BYTES >> 20);
		s->forgotten = 0;
		s->forgotten_log_ns = now;
	}
}

char *stream_server_url(struct stream_server *s, const struct stream_request *req)
{
	struct token *t = xcalloc(1, sizeof(*t));
	unsigned char rnd[16];
	char **cmd = xcalloc(req->n_cmd + 1, sizeof(*cmd));

	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		abort(); /* no randomness: no unguessable URL */
	hex_encode(rnd, sizeof(rnd), t->id);
	t->req = xmalloc(sizeof(*t->req));
	*t->req = *req;
	t->req->cell_id = xstrdup(req->cell_id ? req->cell_id : "");
	t->req->unit_id = xstrdup(req->unit_id ? req->unit_id : "");
	t->bytes = sizeof(*t) + sizeof(*t->req) + req->n_ports * sizeof(int32_t);
	for (size_t i = 0; i < req->n_cmd; i++) {
		cmd[i] = xstrdup(req->cmd[i]);
		t->bytes += sizeof(char *) + strlen(cmd[i]) + 1;
	}
	t->req->cmd = cmd;
	t->req->ports = NULL;
	if (req->n_ports) {
		int32_t *ports = xcalloc(req->n_ports, sizeof(*ports));

		memcpy(ports, req->ports, req->n_ports * sizeof(*ports));
		t->req->ports = ports;
	}
	t->expires_ns = clock_mono_ns() + (int64_t)STREAM_TOKEN_TTL_S * 1000000000LL;
	pthread_mutex_lock(&s->mu);
	tokens_make_room(s, t->bytes);
	t->next = s->tokens;
	s->tokens = t;
	s->ntokens++;
	s->token_bytes += t->bytes;
	pthread_mutex_unlock(&s->mu);
	return xasprintf("http://127.0.0.1:%d/%s/%s", s->port, kind_paths[req->kind], t->id);
}

/* Takes the token id out of the table: it is good once. NULL if unknown or expired. */
static struct token *token_take(struct stream_server *s, const char *id, size_t len)
{
	struct token *found = NULL;

	pthread_mutex_lock(&s->mu);
	for (struct token **pp = &s->tokens; *pp; pp = &(*pp)->next) {
		if (strlen((*pp)->id) == len && memcmp((*pp)->id, id, len) == 0) {
			found = *pp;
			*pp = found->next;
			s->ntokens--;
			s->token_bytes -= found->bytes;
			break;
		}
	}
	pthread_mutex_unlock(&s->mu);
	if (found && found->expires_ns < clock_mono_ns()) {
		token_free(found);
		return NULL;
	}
	return found;
}

void stream_hold(struct stream_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->work++;
	pthread_mutex_unlock(&s->mu);
}

void stream_release(struct stream_server *s)
{
	pthread_mutex_lock(&s->mu);
	if (--s->work == 0)
		pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->mu);
}

struct evloop *stream_loop(const struct stream_server *s)
{
	return s->loop;
}

struct cellmgr *stream_cells(const struct stream_server *s)
{
	return s->cells;
}

void stream_conn_track(struct stream_server *s, struct conn *c, bool live)
{
	if (live) {
		c->next = s->conn_list;
		if (c->next)
			c->next->prev = c;
		s->conn_list = c;
		s->conns++;
		return;
	}
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conn_list = c->next;
	if (c->next)
		c->next->prev = c->prev;
	s->conns--;
}

static void head_free(struct head *h)
{
	evloop_timer_del(h->timer);
	buf_release(&h->b);
	free(h);
}

/* The request head is in: its token's session takes the connection. */
static void head_done(struct head *h, const struct http_req *req, size_t used)
{
	struct stream_server *s = h->c->srv;
	struct conn *c = h->c;
	const char *target = req->target;
	const char *id = strrchr(target, '/');
	size_t idlen = id ? strcspn(id + 1, "?") : 0;
	struct token *t = NULL;
	struct stream_request *r;

	if (id && (strncmp(target, "/exec/", 6) == 0 || strncmp(target, "/attach/", 8) == 0 ||
		   strncmp(target, "/portforward/", 13) == 0))
		t = token_take(s, id + 1, idlen);
	if (!t) {
		conn_fail(c, 404, "unknown or expired stream URL: ask the runtime for a new one");
		return;
	}
	log_debug("stream %s for cell %s", kind_names[t->req->kind], t->req->cell_id);
	r = t->req; /* the session's now */
	t->req = NULL;
	token_free(t);
	stream_session_start(c, req, r, (const uint8_t *)h->b.data + used, h->b.len - used);
}

static void head_input(void *arg, const uint8_t *data, size_t len)
{
	struct head *h = arg;
	struct http_req req = { 0 };
	struct err err = ERR_INIT;
	ssize_t n;

	buf_append(&h->b, data, len, NULL);
	n = http_parse_head(h->b.data, h->b.len, &req, &err);
	if (n == 0 && h->b.len > HTTP_MAX_HEAD)
		n = err_set(&err, EFBIG, "request head over %d bytes", HTTP_MAX_HEAD);
	if (n < 0) {
		log_debug("stream: %s", err.msg);
		conn_fail(h->c, 400, err.msg);
	} else if (n > 0) {
		head_done(h, &req, (size_t)n);
	}
	http_req_release(&req);
	if (n != 0)
		head_free(h);
}

static void head_gone(void *arg)
{
	struct head *h = arg;

	conn_end(h->c, 0);
	head_free(h);
}

static void head_timeout(void *arg)
{
	struct head *h = arg;
	struct err err = ERR_INIT;

	h->timer = NULL;
	err_set(&err, ETIMEDOUT, "no request head within %d ms", HEAD_TIMEOUT_MS);
	log_debug("stream: %s", err.msg);
	conn_fail(h->c, 400, err.msg);
	head_free(h);
}

static const struct conn_ops head_ops = { .input = head_input, .gone = head_gone };

/* Answers a connection the server cannot take, without waiting for it. */
static void refuse(int fd, const char *text)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	if (http_answer_error(&b, 500, NULL, text, &err) == 0 &&
	    send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client learns it from the close */
	}
	buf_release(&b);
	close(fd);
}

static void on_accept(void *arg, uint32_t events)
{
	struct stream_server *s = arg;

	(void)events;
	for (;;) {
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), one = 1;
		struct head *h;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN: all taken; else the next turn tries again */
		}
		/* small frames (a reply, an exit status) go out at once: with Nagle's algorithm
		 * they waited for the client's delayed ACK, 40 ms */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (s->stopping || s->conns >= STREAM_MAX_CONNECTIONS) {
			refuse(fd, "too many streams at once; try again");
			continue;
		}
		h = xcalloc(1, sizeof(*h));
		h->c = conn_new(s, fd);
		conn_attach(h->c, &head_ops, h);
		h->timer = evloop_timer_add(s->loop, HEAD_TIMEOUT_MS, head_timeout, h);
	}
}

static void listen_start(void *arg)
{
	struct stream_server *s = arg;

	s->lio = evloop_io_add(s->loop, s->lfd, EPOLLIN, on_accept, s);
}

/* The stop, on the loop: no more connections; every one left is told its client is gone,
 * so its session ends it and cancels what it has open. */
static void stop_all(void *arg)
{
	struct stream_server *s = arg;

	s->stopping = true;
	evloop_io_del(s->lio);
	s->lio = NULL;
	while (s->conn_list) {
		struct conn *c = s->conn_list;

		shutdown(c->fd, SHUT_RDWR);
		if (c->ops && c->ops->gone) {
			const struct conn_ops *ops = c->ops;

			c->ops = NULL;
			ops->gone(c->sess); /* ends c */
		} else {
			conn_end(c, 0);
		}
	}
}

/* Parses "HOST:PORT" (IPv4). */
static int parse_address(const char *address, struct sockaddr_in *sa, struct err *err)
{
	const char *colon = strrchr(address, ':');
	char host[64];
	char *end;
	long port;

	if (!colon || (size_t)(colon - address) >= sizeof(host))
		return err_set(err, EINVAL, "streaming address \"%s\": want HOST:PORT", address);
	memcpy(host, address, (size_t)(colon - address));
	host[colon - address] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (*end || port < 0 || port > 65535 || inet_pton(AF_INET, host, &sa->sin_addr) != 1)
		return err_set(err, EINVAL, "streaming address \"%s\": want IPv4:PORT", address);
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return 0;
}

int stream_server_start(const char *address, struct cellmgr *cells, struct stream_server **out,
			struct err *err)
{
	struct sockaddr_in sa = { 0 };
	socklen_t len = sizeof(sa);
	struct stream_server *s;
	int fd, one = 1;

	if (parse_address(address, &sa, err) < 0)
		return -err->code;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_errno(err, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		close(fd);
		return err_errno(err, "streaming server on %s", address);
	}
	s = xcalloc(1, sizeof(*s));
	s->cells = cells;
	s->lfd = fd;
	s->port = ntohs(sa.sin_port);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->idle, NULL);
	if (evloop_new("kiyot-stream", &s->loop, err) < 0) {
		close(fd);
		free(s);
		return err_wrap(err, "streaming server");
	}
	evloop_post(s->loop, listen_start, s);
	log_info("streaming server on 127.0.0.1:%d (exec, attach, port-forward)", s->port);
	*out = s;
	return 0;
}

void stream_server_stop(struct stream_server *s)
{
	if (!s)
		return;
	evloop_post(s->loop, stop_all, s);
	/* sessions end once their agent streams did, which cancel makes quick */
	pthread_mutex_lock(&s->mu);
	while (s->work > 0)
		pthread_cond_wait(&s->idle, &s->mu);
	pthread_mutex_unlock(&s->mu);
	evloop_free(s->loop);
	close(s->lfd);
	while (s->tokens) {
		struct token *t = s->tokens;

		s->tokens = t->next;
		token_free(t);
	}
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->idle);
	free(s);
}
