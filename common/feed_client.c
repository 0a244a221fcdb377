/*
 * feed_client.c: kiyot's side of the cell feed (see feed.h): feeds connected, handshaken and
 * read without blocking by a few threads, each with its own epoll set.
 *
 * A feed goes through four phases: the TCP connect, the TLS handshake, sending the request
 * frame, and reading frames until the end. Each step does what the socket allows and leaves
 * epoll waiting for what OpenSSL wants next (readable or writable). Only its thread touches a
 * feed's socket and session; another thread may only flag it cancelled, under the thread's
 * lock, and wake the thread with its eventfd.
 */
#include "feed.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "clock.h"
#include "feed_internal.h"
#include "frame.h"
#include "netaddr.h"
#include "xalloc.h"

enum phase {
	PH_CONNECT,
	PH_HANDSHAKE,
	PH_SEND,
	PH_READ
};

struct feed_thread {
	pthread_t th;
	int ep, evfd;
	pthread_mutex_t lock;
	struct feed_watch *list; /* its feeds */
	int pending;		 /* feeds not reading yet, which have a deadline */
	bool quit;
};

struct feed_loop {
	struct feed_thread *t;
	int n;
	atomic_uint next;
};

struct feed_watch {
	struct feed_thread *t;
	int fd;
	SSL *ssl;
	enum phase phase;
	uint32_t events; /* what epoll waits for */
	int64_t deadline_ns;
	int handshake_ms;
	uint8_t *out; /* the request frame, until sent */
	size_t out_len, out_off;
	struct frame_reader r;
	const ProtobufCMessageDescriptor *desc;
	feed_msg_fn *on_msg;
	feed_end_fn *on_end;
	void *arg;
	bool cancelled; /* under the thread's lock */
	char *target;
	struct feed_watch *next;
};

static void wake(struct feed_thread *t)
{
	uint64_t one = 1;

	if (write(t->evfd, &one, sizeof(one)) < 0) {
		/* the counter is already non-zero: the thread wakes anyway */
	}
}

static void want(struct feed_watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	if (w->events != events && epoll_ctl(w->t->ep, EPOLL_CTL_MOD, w->fd, &ev) == 0)
		w->events = events;
}

/* Ends a feed: the last the loop does with it. */
static void finish(struct feed_watch *w, int ret, const struct err *err)
{
	struct feed_thread *t = w->t;

	epoll_ctl(t->ep, EPOLL_CTL_DEL, w->fd, NULL);
	pthread_mutex_lock(&t->lock);
	for (struct feed_watch **pp = &t->list; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	if (w->phase != PH_READ)
		t->pending--;
	pthread_mutex_unlock(&t->lock);
	SSL_free(w->ssl);
	close(w->fd);
	free(w->out);
	frame_reader_release(&w->r);
	w->on_end(w->arg, ret, err);
	free(w->target);
	free(w);
}

static int reached(struct feed_watch *w, enum phase p)
{
	if (w->phase != PH_READ && p == PH_READ) {
		pthread_mutex_lock(&w->t->lock);
		w->t->pending--;
		w->deadline_ns = 0;
		pthread_mutex_unlock(&w->t->lock);
	}
	w->phase = p;
	return 0;
}

/* What to wait for after OpenSSL returned ret: 0 to wait, < 0 on an error (with what). */
static int ssl_wait(struct feed_watch *w, int ret, const char *what, struct err *err)
{
	int e = SSL_get_error(w->ssl, ret);

	if (e == SSL_ERROR_WANT_READ) {
		want(w, EPOLLIN);
		return 0;
	}
	if (e == SSL_ERROR_WANT_WRITE) {
		want(w, EPOLLOUT);
		return 0;
	}
	if (e == SSL_ERROR_SYSCALL && errno == ETIMEDOUT)
		return err_set(err, ETIMEDOUT, "%s %s: the peer stopped answering", what,
			       w->target);
	return feed_tls_error(err, w->phase == PH_READ ? ECONNRESET : ECONNREFUSED, what, w->ssl);
}

static int step_connect(struct feed_watch *w, struct err *err)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		e = errno;
	if (e)
		return err_set(err, e == ETIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
			       "cannot connect to the feed at %s: %s", w->target, strerror(e));
	return reached(w, PH_HANDSHAKE);
}

static int step_handshake(struct feed_watch *w, struct err *err)
{
	int ret;

	ERR_clear_error();
	errno = 0;
	ret = SSL_connect(w->ssl);
	if (ret != 1) {
		_cleanup_free_ char *what = xasprintf("TLS with the feed at %s", w->target);

		return ssl_wait(w, ret, what, err);
	}
	if (!feed_alpn_ok(w->ssl))
		return err_set(err, ECONNREFUSED, "%s does not speak the cell feed (ALPN %s)",
			       w->target, FEED_ALPN);
	return reached(w, PH_SEND);
}

static int step_send(struct feed_watch *w, struct err *err)
{
	while (w->out_off < w->out_len) {
		size_t n = 0;
		int ret;

		ERR_clear_error();
		errno = 0;
		ret = SSL_write_ex(w->ssl, w->out + w->out_off, w->out_len - w->out_off, &n);
		if (ret != 1) {
			_cleanup_free_ char *what =
				xasprintf("sending to the feed at %s", w->target);

			return ssl_wait(w, ret, what, err);
		}
		w->out_off += n;
	}
	free(w->out);
	w->out = NULL;
	want(w, EPOLLIN);
	return reached(w, PH_READ);
}

static bool is_cancelled(struct feed_watch *w)
{
	bool c;

	pthread_mutex_lock(&w->t->lock);
	c = w->cancelled;
	pthread_mutex_unlock(&w->t->lock);
	return c;
}

/* Hands over every whole frame read so far. */
static int deliver(struct feed_watch *w, struct err *err)
{
	const uint8_t *frame;
	size_t len;
	int ret;

	while ((ret = frame_reader_next(&w->r, &frame, &len, err)) == 1) {
		ProtobufCMessage *msg = NULL;

		if (is_cancelled(w))
			return err_set(err, ECANCELED, "feed from %s cancelled", w->target);
		if (frame_unpack(w->desc, frame, len, &msg, err) < 0)
			return err_wrap(err, "feed from %s", w->target);
		w->on_msg(w->arg, msg);
		protobuf_c_message_free_unpacked(msg, NULL);
	}
	return ret < 0 ? err_wrap(err, "feed from %s", w->target) : 0;
}

/* Whether a read would find anything: bytes OpenSSL holds, or bytes on the socket. Asking
 * SSL_read with neither makes OpenSSL allocate its 16 KB record buffer and keep it while it
 * waits (SSL_MODE_RELEASE_BUFFERS frees it only once a record is read), which is what an idle
 * feed would cost. */
static bool readable(struct feed_watch *w)
{
	int n = 0;

	return SSL_has_pending(w->ssl) || (ioctl(w->fd, FIONREAD, &n) == 0 && n > 0);
}

/* Reads until the socket is empty: 0 to wait, 1 at the end, < 0 on an error. */
static int step_read(struct feed_watch *w, bool woken, struct err *err)
{
	for (;; woken = false) {
		size_t room, n = 0;
		uint8_t *p;
		int ret;

		/* woken by epoll: read; else only when something is there */
		if (!woken && !readable(w)) {
			want(w, EPOLLIN);
			frame_reader_idle(&w->r);
			return 0;
		}
		p = frame_reader_room(&w->r, &room);
		ERR_clear_error();
		errno = 0;
		ret = SSL_read_ex(w->ssl, p, room, &n);
		if (ret == 1) {
			frame_reader_wrote(&w->r, n);
			if (deliver(w, err) < 0)
				return -err->code;
			continue;
		}
		if (SSL_get_error(w->ssl, ret) == SSL_ERROR_ZERO_RETURN) {
			if (frame_reader_pending(&w->r))
				return err_set(err, EPROTO, "the feed from %s ended inside a frame",
					       w->target);
			return 1;
		}
		frame_reader_idle(&w->r);
		return ssl_wait(w, ret, "reading the feed", err);
	}
}

static void step(struct feed_watch *w)
{
	struct err err = ERR_INIT;
	/* in the read phase every event calls for SSL_read: bytes, the end, or (EPOLLOUT,
	 * armed only when OpenSSL asked) the write a read of its left pending */
	bool woken = w->phase == PH_READ;
	int ret = 0;

	if (w->phase == PH_CONNECT)
		ret = step_connect(w, &err);
	if (ret == 0 && w->phase == PH_HANDSHAKE)
		ret = step_handshake(w, &err);
	if (ret == 0 && w->phase == PH_SEND)
		ret = step_send(w, &err);
	if (ret == 0 && w->phase == PH_READ)
		ret = step_read(w, woken, &err);
	if (ret == 1)
		finish(w, 0, &err);
	else if (ret < 0)
		finish(w, ret, &err);
}

/* The feed that must end now (cancelled, or past its deadline), or NULL; *code says why. */
static struct feed_watch *due(struct feed_thread *t, int64_t now, int *code)
{
	struct feed_watch *w;

	pthread_mutex_lock(&t->lock);
	for (w = t->list; w; w = w->next) {
		if (w->cancelled || (w->deadline_ns && now >= w->deadline_ns)) {
			*code = w->cancelled ? ECANCELED : ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return w;
}

/* Milliseconds until the first deadline, or -1 (none). */
static int next_timeout(struct feed_thread *t, int64_t now)
{
	int64_t first = 0;

	pthread_mutex_lock(&t->lock);
	if (t->pending)
		for (struct feed_watch *w = t->list; w; w = w->next)
			if (w->deadline_ns && (!first || w->deadline_ns < first))
				first = w->deadline_ns;
	pthread_mutex_unlock(&t->lock);
	if (!first)
		return -1;
	return first <= now ? 0 : (int)((first - now) / 1000000 + 1);
}

static void *thread_main(void *arg)
{
	struct feed_thread *t = arg;

	feed_block_sigpipe();
	for (;;) {
		struct epoll_event ev[64];
		struct feed_watch *w;
		int64_t now = clock_mono_ns();
		bool swept = false;
		int n, code = 0;

		n = epoll_wait(t->ep, ev, 64, next_timeout(t, now));
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr) {
				step(ev[i].data.ptr);
			} else {
				uint64_t v;

				if (read(t->evfd, &v, sizeof(v)) < 0) {
					/* already read: nothing to do */
				}
				swept = true;
			}
		}
		pthread_mutex_lock(&t->lock);
		if (t->quit && !t->list) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		swept = swept || t->pending;
		pthread_mutex_unlock(&t->lock);
		now = clock_mono_ns();
		while (swept && (w = due(t, now, &code))) {
			struct err err = ERR_INIT;

			if (code == ECANCELED)
				err_set(&err, ECANCELED, "feed from %s cancelled", w->target);
			else
				err_set(&err, ETIMEDOUT, "the feed at %s: no answer in %d ms",
					w->target, w->handshake_ms);
			finish(w, -code, &err);
		}
	}
}

static void thread_close(struct feed_thread *t)
{
	if (t->ep >= 0)
		close(t->ep);
	if (t->evfd >= 0)
		close(t->evfd);
	pthread_mutex_destroy(&t->lock);
}

static int thread_start(struct feed_thread *t, struct err *err)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	int rc;

	pthread_mutex_init(&t->lock, NULL);
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	t->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->ep < 0 || t->evfd < 0 || epoll_ctl(t->ep, EPOLL_CTL_ADD, t->evfd, &ev) < 0) {
		rc = errno;
		thread_close(t);
		return err_set(err, rc, "the feed loop: %s", strerror(rc));
	}
	rc = pthread_create(&t->th, NULL, thread_main, t);
	if (rc) {
		thread_close(t);
		return err_set(err, rc, "the feed loop's thread: %s", strerror(rc));
	}
	return 0;
}

static void thread_stop(struct feed_thread *t)
{
	pthread_mutex_lock(&t->lock);
	t->quit = true;
	pthread_mutex_unlock(&t->lock);
	wake(t);
	pthread_join(t->th, NULL);
	thread_close(t);
}

int feed_loop_new(int threads, struct feed_loop **out, struct err *err)
{
	struct feed_loop *l = xcalloc(1, sizeof(*l));

	l->t = xcalloc((size_t)(threads > 0 ? threads : 1), sizeof(*l->t));
	for (; l->n < (threads > 0 ? threads : 1); l->n++) {
		l->t[l->n].ep = l->t[l->n].evfd = -1;
		if (thread_start(&l->t[l->n], err) < 0) {
			feed_loop_free(l);
			return -err->code;
		}
	}
	*out = l;
	return 0;
}

void feed_loop_free(struct feed_loop *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->n; i++)
		thread_stop(&l->t[i]);
	free(l->t);
	free(l);
}

/* The socket, connecting, and the session over it. */
static int dial(struct feed_watch *w, const struct feed_open_args *a, struct err *err)
{
	struct sockaddr_storage ss;
	socklen_t len;

	if (netaddr_parse(a->target, &ss, &len, err) < 0)
		return -err->code;
	w->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (w->fd < 0)
		return err_set(err, errno, "feed to %s: socket: %s", a->target, strerror(errno));
	feed_tune_socket(w->fd);
	if (connect(w->fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
		return err_set(err, ECONNREFUSED, "cannot connect to the feed at %s: %s", a->target,
			       strerror(errno));
	w->ssl = SSL_new(a->ctx);
	if (!w->ssl || !SSL_set_fd(w->ssl, w->fd) || !SSL_set1_host(w->ssl, a->peer_name) ||
	    SSL_set_alpn_protos(w->ssl, (const unsigned char *)FEED_ALPN_WIRE,
				sizeof(FEED_ALPN_WIRE) - 1) != 0)
		return feed_tls_error(err, ENOMEM, "feed session", NULL);
	SSL_set_hostflags(w->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	SSL_set_options(w->ssl, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_set_connect_state(w->ssl);
	return 0;
}

int feed_open(struct feed_loop *l, const struct feed_open_args *a, struct feed_watch **out,
	      struct err *err)
{
	struct feed_watch *w = xcalloc(1, sizeof(*w));
	struct feed_thread *t = &l->t[atomic_fetch_add(&l->next, 1) % (unsigned int)l->n];
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = w };

	w->fd = -1;
	if (dial(w, a, err) < 0 ||
	    frame_pack(a->request, a->max_frame, &w->out, &w->out_len, err) < 0) {
		SSL_free(w->ssl);
		if (w->fd >= 0)
			close(w->fd);
		free(w);
		return -err->code;
	}
	w->t = t;
	w->phase = PH_CONNECT;
	w->events = EPOLLOUT;
	w->handshake_ms = a->handshake_ms > 0 ? a->handshake_ms : FEED_HANDSHAKE_MS;
	w->deadline_ns = clock_mono_ns() + (int64_t)w->handshake_ms * 1000000;
	frame_reader_init(&w->r, a->max_frame);
	w->desc = a->msg_desc;
	w->on_msg = a->on_msg;
	w->on_end = a->on_end;
	w->arg = a->arg;
	w->target = xstrdup(a->target);
	pthread_mutex_lock(&t->lock);
	w->next = t->list;
	t->list = w;
	t->pending++;
	/* under the lock: the thread's first step on it waits for the list to hold it */
	epoll_ctl(t->ep, EPOLL_CTL_ADD, w->fd, &ev);
	pthread_mutex_unlock(&t->lock);
	wake(t); /* its deadline */
	*out = w;
	return 0;
}

void feed_cancel(struct feed_watch *w)
{
	struct feed_thread *t = w->t;

	pthread_mutex_lock(&t->lock);
	w->cancelled = true;
	pthread_mutex_unlock(&t->lock);
	wake(t);
}
