/*
 * feed_server.c: an agent's side of the cell feed (see feed.h): an accepting thread and a
 * thread for each connection, blocking I/O with time limits on the socket.
 */
#include "feed.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "feed_internal.h"
#include "frame.h"
#include "netaddr.h"
#include "log.h"
#include "xalloc.h"

/* A client that reads nothing for this long is gone. */
#define SEND_TIMEOUT_MS 30000

struct feed_server {
	struct feed_server_config cfg;
	char *address;
	int fd;
	pthread_t acceptor;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a connection ended */
	struct feed_conn *conns;
	int n_conns;
	uint64_t sessions_started;
	bool stopping;
};

struct feed_conn {
	struct feed_server *s;
	int fd;
	SSL *ssl;
	char peer[64];
	bool session;	  /* authenticated, its session running (under the server's lock) */
	uint64_t started; /* when it became one: the order sessions are ended in */
	struct feed_conn *next;
};

static void set_timeout(int fd, int opt, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv));
}

/* The server picks the feed's protocol, or ends the handshake. */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
		       const unsigned char *in, unsigned int inlen, void *arg)
{
	unsigned char *sel = NULL;

	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto(&sel, outlen, (const unsigned char *)FEED_ALPN_WIRE,
				  sizeof(FEED_ALPN_WIRE) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_ALERT_FATAL;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

/* The request, after the handshake: 0 with *req, else < 0 with err. */
static int read_request(struct feed_conn *c, ProtobufCMessage **req, struct err *err)
{
	struct frame_reader r;
	const uint8_t *frame;
	size_t len;
	int ret;

	frame_reader_init(&r, c->s->cfg.max_request);
	while ((ret = frame_reader_next(&r, &frame, &len, err)) == 0) {
		size_t room, n = 0;
		uint8_t *p = frame_reader_room(&r, &room);

		ERR_clear_error();
		errno = 0;
		if (SSL_read_ex(c->ssl, p, room, &n) != 1) {
			ret = feed_tls_error(err, EPROTO, "reading the request", c->ssl);
			break;
		}
		frame_reader_wrote(&r, n);
	}
	if (ret == 1)
		ret = frame_unpack(c->s->cfg.req_desc, frame, len, req, err);
	else if (ret == 0)
		ret = -err->code;
	frame_reader_release(&r);
	return ret < 0 ? ret : 0;
}

/* c is a session now: past max_sessions the oldest other one ends (its client is most likely
 * a kiyot that went away without its connection closing, and this one its successor). */
static void admit(struct feed_conn *c)
{
	struct feed_server *s = c->s;
	struct feed_conn *oldest = NULL;
	int n = 0;

	pthread_mutex_lock(&s->lock);
	for (struct feed_conn *o = s->conns; o; o = o->next) {
		if (!o->session)
			continue;
		n++;
		if (!oldest || o->started < oldest->started)
			oldest = o;
	}
	if (s->cfg.max_sessions > 0 && n >= s->cfg.max_sessions && oldest) {
		log_info("feed from %s ends: a newer one from %s took its place", oldest->peer,
			 c->peer);
		shutdown(oldest->fd, SHUT_RDWR); /* its sends fail, feed_gone turns true */
		oldest->session = false;
	}
	c->session = true;
	c->started = ++s->sessions_started;
	pthread_mutex_unlock(&s->lock);
}

/* Whether the peer closed the connection without sending a byte (waits for the first, within
 * the handshake's time limit). */
static bool closed_unused(int fd)
{
	char b;
	ssize_t n;

	while ((n = recv(fd, &b, 1, MSG_PEEK)) < 0 && errno == EINTR)
		;
	return n == 0;
}

static void serve(struct feed_conn *c)
{
	struct feed_server *s = c->s;
	ProtobufCMessage *req = NULL;
	struct err err = ERR_INIT;

	set_timeout(c->fd, SO_RCVTIMEO, FEED_HANDSHAKE_MS);
	set_timeout(c->fd, SO_SNDTIMEO, FEED_HANDSHAKE_MS);
	c->ssl = SSL_new(s->cfg.ctx);
	if (!c->ssl || !SSL_set_fd(c->ssl, c->fd)) {
		feed_tls_error(&err, ENOMEM, "feed session", NULL);
		log_warn("feed from %s: %s", c->peer, err.msg);
		return;
	}
	ERR_clear_error();
	errno = 0;
	if (closed_unused(c->fd)) {
		/* a probe of whether the port is open (kiyot's, while the agent comes up) */
		log_debug("feed from %s: closed before its handshake", c->peer);
		return;
	}
	if (SSL_accept(c->ssl) != 1) {
		feed_tls_error(&err, EPROTO, "TLS", c->ssl);
		log_info("feed from %s refused: %s", c->peer, err.msg);
		return;
	}
	if (!feed_alpn_ok(c->ssl)) {
		/* a client that offered no protocol: select_alpn never ran */
		log_info("feed from %s refused: it does not ask for %s (ALPN)", c->peer, FEED_ALPN);
		return;
	}
	if (read_request(c, &req, &err) < 0) {
		log_info("feed from %s: %s", c->peer, err.msg);
		return;
	}
	set_timeout(c->fd, SO_RCVTIMEO, 0);
	set_timeout(c->fd, SO_SNDTIMEO, SEND_TIMEOUT_MS);
	admit(c);
	s->cfg.session(s->cfg.arg, c, req);
	protobuf_c_message_free_unpacked(req, NULL);
	if (!feed_gone(c))
		SSL_shutdown(c->ssl); /* close_notify: the feed ended, no more is coming */
}

static void *conn_main(void *arg)
{
	struct feed_conn *c = arg;
	struct feed_server *s = c->s;

	feed_block_sigpipe();
	serve(c);
	SSL_free(c->ssl);
	/* the thread's own OpenSSL state (its random generators) goes now, not in a destructor
	 * after the server's stop already returned */
	OPENSSL_thread_stop();
	pthread_mutex_lock(&s->lock);
	for (struct feed_conn **pp = &s->conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	s->n_conns--;
	close(c->fd);
	free(c);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void peer_text(const struct sockaddr_storage *ss, char *out, size_t n)
{
	const void *a = ss->ss_family == AF_INET6
				? (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr
				: (const void *)&((const struct sockaddr_in *)ss)->sin_addr;

	if (!inet_ntop(ss->ss_family, a, out, (socklen_t)n))
		snprintf(out, n, "?");
}

/* Connections from peer not (yet) a session; needs the server's lock. */
static int pending_from(const struct feed_server *s, const char *peer)
{
	int n = 0;

	for (const struct feed_conn *o = s->conns; o; o = o->next)
		n += !o->session && strcmp(o->peer, peer) == 0;
	return n;
}

static void *accept_main(void *arg)
{
	struct feed_server *s = arg;

	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(s->fd, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
		struct feed_conn *c;
		pthread_attr_t attr;
		pthread_t th;

		pthread_mutex_lock(&s->lock);
		if (s->stopping) {
			pthread_mutex_unlock(&s->lock);
			if (fd >= 0)
				close(fd);
			return NULL;
		}
		if (fd < 0 || s->n_conns >= s->cfg.max_conns) {
			pthread_mutex_unlock(&s->lock);
			if (fd >= 0)
				close(fd);
			else if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				usleep(100 * 1000);
			continue;
		}
		c = xcalloc(1, sizeof(*c));
		c->s = s;
		c->fd = fd;
		peer_text(&ss, c->peer, sizeof(c->peer));
		if (pending_from(s, c->peer) >= (s->cfg.max_pending_per_peer > 0
							 ? s->cfg.max_pending_per_peer
							 : FEED_PENDING_PER_PEER)) {
			/* one address holding handshakes open must not starve kiyot's */
			pthread_mutex_unlock(&s->lock);
			close(fd);
			free(c);
			continue;
		}
		feed_tune_socket(fd);
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&th, &attr, conn_main, c) != 0) {
			close(fd);
			free(c);
		} else {
			c->next = s->conns;
			s->conns = c;
			s->n_conns++;
		}
		pthread_attr_destroy(&attr);
		pthread_mutex_unlock(&s->lock);
	}
}

int feed_server_start(const struct feed_server_config *cfg, struct feed_server **out,
		      struct err *err)
{
	struct feed_server *s;
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1, rc;

	if (netaddr_parse(cfg->address, &ss, &len, err) < 0)
		return -err->code;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(err, errno, "feed on %s: socket: %s", cfg->address, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 16) < 0) {
		rc = errno;
		close(fd);
		return err_set(err, rc, "feed on %s: %s", cfg->address, strerror(rc));
	}
	s = xcalloc(1, sizeof(*s));
	s->cfg = *cfg;
	s->address = xstrdup(cfg->address);
	s->cfg.address = s->address;
	s->fd = fd;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	SSL_CTX_set_alpn_select_cb(cfg->ctx, select_alpn, NULL);
	rc = pthread_create(&s->acceptor, NULL, accept_main, s);
	if (rc) {
		close(fd);
		free(s->address);
		free(s);
		return err_set(err, rc, "feed on %s: thread: %s", cfg->address, strerror(rc));
	}
	SSL_CTX_up_ref(cfg->ctx);
	*out = s;
	return 0;
}

int feed_server_port(const struct feed_server *s)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(s->fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
					      : ((struct sockaddr_in *)&ss)->sin_port);
}

void feed_server_stop(struct feed_server *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	for (struct feed_conn *c = s->conns; c; c = c->next)
		shutdown(c->fd, SHUT_RDWR); /* a blocked read or write returns */
	pthread_mutex_unlock(&s->lock);
	shutdown(s->fd, SHUT_RDWR); /* accept returns */
	pthread_join(s->acceptor, NULL);
	pthread_mutex_lock(&s->lock);
	while (s->n_conns)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	close(s->fd);
	SSL_CTX_free(s->cfg.ctx);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	free(s->address);
	free(s);
}

int feed_send(struct feed_conn *c, const ProtobufCMessage *msg, struct err *err)
{
	_cleanup_free_ uint8_t *p = NULL;
	size_t len = 0, off = 0;

	if (frame_pack(msg, UINT32_MAX, &p, &len, err) < 0)
		return -err->code;
	while (off < len) {
		size_t n = 0;

		ERR_clear_error();
		errno = 0;
		if (SSL_write_ex(c->ssl, p + off, len - off, &n) != 1) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return err_set(err, ETIMEDOUT, "feed to %s: nothing read for %d s",
					       c->peer, SEND_TIMEOUT_MS / 1000);
			return feed_tls_error(err, EPIPE, "feed", c->ssl);
		}
		off += n;
	}
	return 0;
}

bool feed_gone(struct feed_conn *c)
{
	char b;
	ssize_t n;
	bool stopping;

	pthread_mutex_lock(&c->s->lock);
	stopping = c->s->stopping;
	pthread_mutex_unlock(&c->s->lock);
	if (stopping)
		return true;
	n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}
