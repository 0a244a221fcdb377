/*
 * shim_attach.c: the attach socket of a unit's shim, both its sides (see shim_attach.h).
 */
#include "shim_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "clock.h"
#include "xalloc.h"

/* One packet queued for a caller. */
struct pkt {
	struct pkt *next;
	size_t len;
	uint8_t data[];
};

struct caller {
	int fd;	      /* -1: a free slot */
	bool opened;  /* its OPEN came and its HELLO is queued */
	bool stdin;   /* its input reaches the unit */
	bool closing; /* let go: flush its queue, then close */
	bool in_wait; /* its next packet is input the queue has no room for yet */
	struct pkt *head, *tail;
	size_t queued;	    /* bytes in its queue */
	int64_t full_since; /* when its queue filled up; 0 while it has room */
};

struct shim_attach {
	struct shim_attach_config cfg;
	int lfd, dirfd;
	int term_fd;	 /* the terminal's master (resizes); borrowed */
	int stdin_fd;	 /* the unit's stdin; -1 none or closed */
	bool stdin_open; /* callers' input is still taken */
	bool stdin_eof;	 /* close stdin_fd once the queued input is written */
	uint8_t *in;	 /* input waiting for the unit: in[in_off, in_len) */
	size_t in_off, in_len;
	struct caller callers[SHIM_ATTACH_MAX_CALLERS];
	/* which caller each pollfd after the first is (shim_attach_poll), -1 for stdin */
	int polled[SHIM_ATTACH_NPOLL];
};

/* ---- the shim's side ---- */

/* The socket's path through the directory's fd, whatever the directory's length. */
static void sock_path(int dirfd, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	snprintf(sa->sun_path, sizeof(sa->sun_path), "/proc/self/fd/%d/%s", dirfd,
		 SHIM_ATTACH_SOCK);
}

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl >= 0)
		fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int shim_attach_new(int dirfd, const struct shim_attach_config *cfg, int stdin_fd,
		    struct shim_attach **out, struct err *err)
{
	struct sockaddr_un sa;
	struct shim_attach *a;
	int fd, dfd;

	sock_path(dirfd, &sa);
	dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0)
		return err_errno(err, "dup the unit directory");
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		close(dfd);
		return err_errno(err, "socket");
	}
	unlinkat(dirfd, SHIM_ATTACH_SOCK, 0);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, SHIM_ATTACH_MAX_CALLERS) < 0) {
		close(fd);
		close(dfd);
		return err_errno(err, "listen for attaches");
	}
	a = xcalloc(1, sizeof(*a));
	a->cfg = *cfg;
	a->lfd = fd;
	a->dirfd = dfd;
	a->term_fd = -1;
	a->stdin_fd = cfg->stdin && !cfg->tty ? stdin_fd : -1;
	if (a->stdin_fd >= 0)
		set_nonblock(a->stdin_fd);
	else if (stdin_fd >= 0)
		close(stdin_fd);
	a->stdin_open = cfg->stdin;
	a->in = xmalloc(SHIM_ATTACH_STDIN_MAX);
	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++)
		a->callers[i].fd = -1;
	*out = a;
	return 0;
}

void shim_attach_set_terminal(struct shim_attach *a, int master)
{
	set_nonblock(master);
	a->term_fd = master;
	if (a->cfg.stdin && a->stdin_open && a->stdin_fd < 0)
		a->stdin_fd = fcntl(master, F_DUPFD_CLOEXEC, 3);
}

/* Queues one packet for caller c. */
static void enqueue(struct caller *c, int type, const void *data, size_t len)
{
	struct pkt *p = xmalloc(sizeof(*p) + 1 + len);

	p->next = NULL;
	p->len = 1 + len;
	p->data[0] = (uint8_t)type;
	if (len)
		memcpy(p->data + 1, data, len);
	if (c->tail)
		c->tail->next = p;
	else
		c->head = p;
	c->tail = p;
	c->queued += p->len;
}

static void caller_drop(struct shim_attach *a, struct caller *c);

/* Queues input for the unit; what does not fit is dropped (input that finds the queue without
 * room for a whole packet waits in its caller's socket, so nothing is lost in practice). */
static void stdin_queue(struct shim_attach *a, const uint8_t *data, size_t len)
{
	if (a->in_off && a->in_off == a->in_len)
		a->in_off = a->in_len = 0;
	if (a->in_off && a->in_len + len > SHIM_ATTACH_STDIN_MAX) {
		memmove(a->in, a->in + a->in_off, a->in_len - a->in_off);
		a->in_len -= a->in_off;
		a->in_off = 0;
	}
	if (len > SHIM_ATTACH_STDIN_MAX - a->in_len)
		len = SHIM_ATTACH_STDIN_MAX - a->in_len;
	memcpy(a->in + a->in_len, data, len);
	a->in_len += len;
}

/* The end of the unit's input (stdin_once): nobody's input is taken any more; a terminal gets
 * its EOF character, a pipe is closed once what is queued is written. */
static void stdin_end(struct shim_attach *a)
{
	if (!a->stdin_open)
		return;
	a->stdin_open = false;
	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++)
		a->callers[i].stdin = false;
	if (a->cfg.tty && a->stdin_fd >= 0)
		stdin_queue(a, (const uint8_t *)"\x04", 1);
	a->stdin_eof = true;
}

/* A caller's input ended (closed, or the caller left). */
static void caller_stdin_ended(struct shim_attach *a, struct caller *c)
{
	if (!c->stdin)
		return;
	c->stdin = false;
	if (a->cfg.stdin_once)
		stdin_end(a);
}

static void caller_drop(struct shim_attach *a, struct caller *c)
{
	caller_stdin_ended(a, c);
	while (c->head) {
		struct pkt *p = c->head;

		c->head = p->next;
		free(p);
	}
	close(c->fd);
	*c = (struct caller){ .fd = -1 };
}

/* Sends what c has queued until the socket is full; false when c is gone. */
static bool caller_flush(struct caller *c)
{
	while (c->head) {
		struct pkt *p = c->head;
		ssize_t n = send(c->fd, p->data, p->len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n < 0)
			return false;
		c->head = p->next;
		if (!c->head)
			c->tail = NULL;
		c->queued -= p->len;
		free(p);
	}
	return true;
}

/* The unit's stdin is gone (closed for good, or the unit closed its end): no input is taken
 * any more. */
static void stdin_gone(struct shim_attach *a)
{
	a->stdin_open = false;
	a->in_off = a->in_len = 0;
	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++)
		a->callers[i].stdin = false;
	if (a->stdin_fd >= 0)
		close(a->stdin_fd);
	a->stdin_fd = -1;
}

/* Writes queued input as the unit takes it; closes its stdin after the last byte when asked.
 * Input waits while there is no stdin yet (a terminal not handed over). */
static void stdin_flush(struct shim_attach *a)
{
	while (a->stdin_fd >= 0 && a->in_off < a->in_len) {
		ssize_t n = write(a->stdin_fd, a->in + a->in_off, a->in_len - a->in_off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			stdin_gone(a);
			return;
		}
		a->in_off += (size_t)n;
	}
	if (a->stdin_fd < 0)
		return;
	a->in_off = a->in_len = 0;
	if (a->stdin_eof)
		stdin_gone(a);
}

/* One packet from caller c. */
static void caller_packet(struct shim_attach *a, struct caller *c, const uint8_t *p, size_t n)
{
	if (n == 0 || c->closing)
		return;
	switch (p[0]) {
	case ATTACH_PKT_OPEN: {
		uint8_t flags = 0;

		if (c->opened)
			return;
		c->opened = true;
		c->stdin = n > 1 && p[1] && a->stdin_open;
		flags = (a->cfg.tty ? ATTACH_F_TTY : 0) | (a->cfg.stdin ? ATTACH_F_STDIN : 0) |
			(c->stdin ? ATTACH_F_STDIN_OPEN : 0);
		enqueue(c, ATTACH_PKT_HELLO, &flags, 1);
		return;
	}
	case ATTACH_PKT_STDIN:
		if (c->stdin && a->stdin_open)
			stdin_queue(a, p + 1, n - 1);
		return;
	case ATTACH_PKT_STDIN_CLOSE:
		if (!c->stdin)
			return;
		if (a->cfg.stdin_once)
			caller_stdin_ended(a, c);
		else
			c->closing = true; /* its attach ends with its input */
		c->stdin = false;
		return;
	case ATTACH_PKT_RESIZE: {
		uint16_t wh[2];
		struct winsize ws = { 0 };

		if (n < 1 + sizeof(wh) || a->term_fd < 0)
			return;
		memcpy(wh, p + 1, sizeof(wh));
		ws.ws_col = wh[0];
		ws.ws_row = wh[1];
		ioctl(a->term_fd, TIOCSWINSZ, &ws);
		return;
	}
	default:
		return;
	}
}

/* True while the input queue has room for a whole packet more. */
static bool stdin_room(const struct shim_attach *a)
{
	return SHIM_ATTACH_STDIN_MAX - (a->in_len - a->in_off) >= SHIM_ATTACH_CHUNK + 16;
}

/* Reads what caller c sent; false when it is gone. Input that finds the queue full stays in
 * the caller's socket (its sender then waits) and the caller is not read until there is
 * room; its other packets wait behind it, other callers are read on. */
static bool caller_read(struct shim_attach *a, struct caller *c)
{
	uint8_t buf[SHIM_ATTACH_CHUNK + 16];

	for (int i = 0; i < 16; i++) {
		ssize_t n = recv(c->fd, buf, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return false;
		c->in_wait = buf[0] == ATTACH_PKT_STDIN && c->stdin && !stdin_room(a);
		if (c->in_wait)
			return true;
		n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n <= 0)
			return n < 0 && (errno == EAGAIN || errno == EINTR);
		caller_packet(a, c, buf, (size_t)n);
	}
	return true;
}

static void accept_callers(struct shim_attach *a)
{
	for (;;) {
		int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		size_t i;

		if (fd < 0)
			return;
		for (i = 0; i < SHIM_ATTACH_MAX_CALLERS && a->callers[i].fd >= 0; i++)
			;
		if (i == SHIM_ATTACH_MAX_CALLERS) {
			close(fd); /* the caller sees the end before any HELLO */
			continue;
		}
		a->callers[i] = (struct caller){ .fd = fd };
	}
}

size_t shim_attach_poll(struct shim_attach *a, struct pollfd *p)
{
	bool room = stdin_room(a);
	size_t n = 0;

	p[n++] = (struct pollfd){ a->lfd, POLLIN, 0 };
	if (a->stdin_fd >= 0 && (a->in_len > a->in_off || a->stdin_eof)) {
		a->polled[n] = -1;
		p[n++] = (struct pollfd){ a->stdin_fd, POLLOUT, 0 };
	}
	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS && n < SHIM_ATTACH_NPOLL; i++) {
		struct caller *c = &a->callers[i];
		short ev = 0;

		if (c->fd < 0)
			continue;
		if (!c->closing && (room || !c->in_wait))
			ev |= POLLIN;
		if (c->head)
			ev |= POLLOUT;
		a->polled[n] = (int)i;
		p[n++] = (struct pollfd){ c->fd, ev, 0 };
	}
	return n;
}

void shim_attach_handle(struct shim_attach *a, const struct pollfd *p, size_t n)
{
	if (n && p[0].revents)
		accept_callers(a);
	for (size_t k = 1; k < n; k++) {
		struct caller *c;
		bool ok = true;

		if (a->polled[k] < 0) {
			if (p[k].revents)
				stdin_flush(a);
			continue;
		}
		c = &a->callers[a->polled[k]];
		if (c->fd != p[k].fd || !p[k].revents)
			continue;
		if (p[k].revents & (POLLIN | POLLHUP | POLLERR))
			ok = caller_read(a, c);
		/* a caller that left with input waiting: what it sent goes with it */
		if (ok && c->in_wait && (p[k].revents & (POLLHUP | POLLERR)))
			ok = false;
		if (ok)
			ok = caller_flush(c);
		if (!ok || (c->closing && !c->head))
			caller_drop(a, c);
	}
	/* input queued by callers goes out at once where the unit takes it */
	stdin_flush(a);
}

bool shim_attach_output_room(struct shim_attach *a, int64_t now_ns)
{
	bool room = true;

	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++) {
		struct caller *c = &a->callers[i];

		if (c->fd < 0)
			continue;
		if (c->queued < SHIM_ATTACH_QUEUE_MAX) {
			c->full_since = 0;
			continue;
		}
		if (!c->full_since)
			c->full_since = now_ns;
		if (now_ns - c->full_since > (int64_t)SHIM_ATTACH_STALL_MS * 1000000) {
			caller_drop(a, c); /* stalled: it may not hold the unit any longer */
			continue;
		}
		room = false;
	}
	return room;
}

void shim_attach_output(struct shim_attach *a, int type, const void *data, size_t len)
{
	const uint8_t *d = data;

	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++) {
		struct caller *c = &a->callers[i];

		if (c->fd < 0 || !c->opened || c->closing)
			continue;
		for (size_t off = 0; off < len; off += SHIM_ATTACH_CHUNK)
			enqueue(c, type, d + off,
				len - off > SHIM_ATTACH_CHUNK ? SHIM_ATTACH_CHUNK : len - off);
		if (!caller_flush(c))
			caller_drop(a, c);
	}
}

void shim_attach_finish(struct shim_attach *a, int exit_code, int timeout_ms)
{
	int64_t until = clock_mono_ns() + (int64_t)timeout_ms * 1000000;
	int32_t code = exit_code;

	accept_callers(a);
	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++) {
		struct caller *c = &a->callers[i];

		if (c->fd < 0)
			continue;
		if (c->opened && !c->closing)
			enqueue(c, ATTACH_PKT_EXIT, &code, sizeof(code));
		c->closing = true;
	}
	while (shim_attach_callers(a) && clock_mono_ns() < until) {
		struct pollfd p[SHIM_ATTACH_NPOLL];
		size_t n = shim_attach_poll(a, p);

		p[0].events = 0; /* no new callers */
		if (poll(p, n, 100) < 0 && errno != EINTR)
			break;
		shim_attach_handle(a, p, n);
		for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++)
			if (a->callers[i].fd >= 0 && !a->callers[i].head)
				caller_drop(a, &a->callers[i]);
	}
	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++)
		if (a->callers[i].fd >= 0)
			caller_drop(a, &a->callers[i]);
	unlinkat(a->dirfd, SHIM_ATTACH_SOCK, 0);
}

size_t shim_attach_callers(const struct shim_attach *a)
{
	size_t n = 0;

	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++)
		n += a->callers[i].fd >= 0;
	return n;
}

void shim_attach_free(struct shim_attach *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < SHIM_ATTACH_MAX_CALLERS; i++)
		if (a->callers[i].fd >= 0)
			caller_drop(a, &a->callers[i]);
	close(a->lfd);
	close(a->dirfd);
	if (a->stdin_fd >= 0)
		close(a->stdin_fd);
	free(a->in);
	free(a);
}

/* ---- the caller's side ---- */

/* Sends one packet, blocking; 0 or -EPIPE. */
static int conn_send(struct attach_conn *c, int type, const void *data, size_t len)
{
	uint8_t buf[SHIM_ATTACH_CHUNK + 1];

	buf[0] = (uint8_t)type;
	if (len)
		memcpy(buf + 1, data, len);
	for (;;) {
		ssize_t n = send(c->fd, buf, len + 1, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		return n == (ssize_t)(len + 1) ? 0 : -EPIPE;
	}
}

int attach_conn_open(const char *unit_dir, bool want_stdin, int timeout_ms, struct attach_conn *c,
		     struct err *err)
{
	struct sockaddr_un sa;
	uint8_t want = want_stdin, pkt[16];
	struct pollfd p;
	int dirfd, ret;
	ssize_t n;

	*c = (struct attach_conn){ .fd = -1 };
	dirfd = open(unit_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return err_errno(err, "open %s", unit_dir);
	sock_path(dirfd, &sa);
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	ret = c->fd < 0 ? -errno : 0;
	if (ret == 0 && connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		ret = -errno;
	close(dirfd);
	if (ret == -ENOENT || ret == -ECONNREFUSED)
		ret = err_set(err, ECONNREFUSED, "its shim takes no attaches (it is not running)");
	else if (ret < 0)
		ret = err_set(err, -ret, "connect to its shim: %s", strerror(-ret));
	else if (conn_send(c, ATTACH_PKT_OPEN, &want, 1) < 0)
		ret = err_set(err, ECONNREFUSED, "its shim went away");
	if (ret < 0)
		goto fail;
	p = (struct pollfd){ c->fd, POLLIN, 0 };
	if (poll(&p, 1, timeout_ms) <= 0) {
		ret = err_set(err, ETIMEDOUT, "its shim did not answer within %d ms", timeout_ms);
		goto fail;
	}
	n = recv(c->fd, pkt, sizeof(pkt), 0);
	if (n < 2 || pkt[0] != ATTACH_PKT_HELLO) {
		ret = err_set(err, n == 0 ? EAGAIN : EIO,
			      n == 0 ? "its shim closed the connection (the unit ended, or %d "
				       "callers are attached already)"
				     : "its shim answered something else than HELLO",
			      SHIM_ATTACH_MAX_CALLERS);
		goto fail;
	}
	c->tty = pkt[1] & ATTACH_F_TTY;
	c->has_stdin = pkt[1] & ATTACH_F_STDIN;
	c->stdin_open = pkt[1] & ATTACH_F_STDIN_OPEN;
	if (want_stdin && !c->has_stdin) {
		ret = err_set(err, EINVAL,
			      "it was not created with stdin: attach without stdin, or create the "
			      "container with stdin: true");
		goto fail;
	}
	return 0;
fail:
	attach_conn_close(c);
	return ret;
}

int attach_conn_stdin(struct attach_conn *c, const uint8_t *data, size_t len)
{
	for (size_t off = 0; off < len; off += SHIM_ATTACH_CHUNK) {
		size_t n = len - off > SHIM_ATTACH_CHUNK ? SHIM_ATTACH_CHUNK : len - off;

		if (conn_send(c, ATTACH_PKT_STDIN, data + off, n) < 0)
			return -EPIPE;
	}
	return 0;
}

int attach_conn_stdin_close(struct attach_conn *c)
{
	return conn_send(c, ATTACH_PKT_STDIN_CLOSE, NULL, 0);
}

int attach_conn_resize(struct attach_conn *c, unsigned width, unsigned height)
{
	uint16_t wh[2] = { (uint16_t)(width > 0xffff ? 0xffff : width),
			   (uint16_t)(height > 0xffff ? 0xffff : height) };

	return conn_send(c, ATTACH_PKT_RESIZE, wh, sizeof(wh));
}

ssize_t attach_conn_recv(struct attach_conn *c, uint8_t *type, uint8_t *buf, size_t cap)
{
	struct iovec iov[2] = { { type, 1 }, { buf, cap } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t n;

	*type = 0;
	do
		n = recvmsg(c->fd, &msg, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0) {
		*type = 0;
		return 0;
	}
	return n - 1;
}

void attach_conn_shutdown(struct attach_conn *c)
{
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_RDWR);
}

void attach_conn_close(struct attach_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}
