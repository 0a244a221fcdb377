/*
 * cli_portforward.c: kiyot port-forward (see cli_stream.h). It listens on 127.0.0.1 for each
 * port, asks the CRI's PortForward for a URL and keeps one SPDY session on it
 * (portforward.k8s.io), as kubectl does: every accepted connection gets an error stream and a
 * data stream with a requestID of their own. One poll loop moves the bytes; a connection is
 * read only while the session's output is below a bound, and the session only while no
 * connection has too much of the pod's bytes queued. It runs until interrupted (exit 0) or
 * the session is lost (exit 1).
 */
#include "cli_stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cri_api.pb-c.h"
#include "stream/outq.h"
#include "xalloc.h"

/* Bytes of the pod's queued for one local connection before the session is no longer read. */
#define CONN_OUT_MAX (1024 * 1024)
/* Local connections forwarded at once, and ports. */
#define PF_MAX_CONNS 128
#define PF_MAX_PORTS 32

/* One local connection, carried by a pair of streams. */
struct pf_conn {
	int fd;
	uint16_t local, remote;
	uint32_t data_sid, error_sid;
	struct outq out;  /* the pod's bytes for the local side */
	bool local_eof;	  /* the local side sent its end; so did the data stream */
	bool remote_done; /* the pod's side ended: close once out is written */
	char error[1024];
	size_t nerror;
};

struct pfc {
	struct cli_sconn sc;
	int lfd[PF_MAX_PORTS];
	uint16_t local[PF_MAX_PORTS], remote[PF_MAX_PORTS];
	size_t nports;
	struct pf_conn *conns[PF_MAX_CONNS];
	size_t nconns;
	unsigned next_request;
	bool lost;
};

static struct pf_conn *conn_of_stream(struct pfc *f, uint32_t sid)
{
	for (size_t i = 0; i < f->nconns; i++)
		if (f->conns[i]->data_sid == sid || f->conns[i]->error_sid == sid)
			return f->conns[i];
	return NULL;
}

/* Ends a local connection: its streams reset if they are still open, its socket closed. */
static void conn_drop(struct pfc *f, size_t i)
{
	struct pf_conn *k = f->conns[i];
	struct err err = ERR_INIT;
	char buf[4096];

	if (k->nerror)
		fprintf(stderr, "kiyot: forwarding 127.0.0.1:%u -> %u: %.*s\n", k->local, k->remote,
			(int)k->nerror, k->error);
	if (spdy_stream_exists(f->sc.sp, k->data_sid))
		spdy_reset(f->sc.sp, k->data_sid, SPDY_CANCEL, &err);
	if (spdy_stream_exists(f->sc.sp, k->error_sid))
		spdy_reset(f->sc.sp, k->error_sid, SPDY_CANCEL, &err);
	/* the local side's end first, and what it sent but nobody will read taken away: a
	 * socket closed with unread bytes is reset instead of ended */
	shutdown(k->fd, SHUT_WR);
	while (read(k->fd, buf, sizeof(buf)) > 0)
		;
	close(k->fd);
	outq_release(&k->out);
	free(k);
	f->conns[i] = f->conns[--f->nconns];
}

static void pf_event(void *arg, const struct spdy_event *ev)
{
	struct pfc *f = arg;
	struct pf_conn *k = conn_of_stream(f, ev->stream_id);

	if (ev->type == SPDY_EV_GOAWAY)
		f->lost = true;
	if (!k)
		return;
	if (ev->type == SPDY_EV_DATA && ev->stream_id == k->data_sid) {
		outq_put(&k->out, ev->data, ev->len);
	} else if (ev->type == SPDY_EV_DATA) {
		size_t n = sizeof(k->error) - k->nerror < ev->len ? sizeof(k->error) - k->nerror
								  : ev->len;

		memcpy(k->error + k->nerror, ev->data, n);
		k->nerror += n;
	} else if (ev->type == SPDY_EV_RESET || (ev->type == SPDY_EV_END && k->nerror) ||
		   (ev->type == SPDY_EV_END && ev->stream_id == k->data_sid)) {
		k->remote_done = true;
	}
}

/* A local connection accepted on listener i: its error stream (closed on this side at once,
 * as kubectl does) and its data stream, with a requestID of their own. */
static void pf_accept(struct pfc *f, size_t i)
{
	int fd = accept4(f->lfd[i], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	struct pf_conn *k;
	struct err err = ERR_INIT;
	char port[8], rid[16];
	struct spdy_header h[3] = { { "streamtype", "error", 0 },
				    { "port", port, 0 },
				    { "requestid", rid, 0 } };

	if (fd < 0)
		return;
	if (f->nconns == PF_MAX_CONNS) {
		fprintf(stderr, "kiyot: %d connections forwarded at once: refusing another\n",
			PF_MAX_CONNS);
		close(fd);
		return;
	}
	k = xcalloc(1, sizeof(*k));
	k->fd = fd;
	k->local = f->local[i];
	k->remote = f->remote[i];
	outq_init(&k->out);
	snprintf(port, sizeof(port), "%u", k->remote);
	snprintf(rid, sizeof(rid), "%u", f->next_request++);
	f->conns[f->nconns++] = k;
	if (spdy_open(f->sc.sp, h, 3, true, &k->error_sid, &err) < 0 ||
	    (h[0].value = "data", spdy_open(f->sc.sp, h, 3, false, &k->data_sid, &err)) < 0) {
		snprintf(k->error, sizeof(k->error), "%s", err.msg);
		k->nerror = strlen(k->error);
		k->remote_done = true;
	}
}

/* Moves bytes between a local connection and its data stream; false once it is over. */
static bool pf_conn_io(struct pfc *f, struct pf_conn *k, short revents)
{
	struct err err = ERR_INIT;
	const uint8_t *o;
	size_t n;

	if ((revents & (POLLIN | POLLHUP | POLLERR)) && !k->local_eof && !k->remote_done) {
		uint8_t buf[CLI_IO_CHUNK];
		ssize_t r = read(k->fd, buf, sizeof(buf));

		if (r > 0)
			spdy_send(f->sc.sp, k->data_sid, buf, (size_t)r, false, &err);
		else if (r == 0)
			k->local_eof = spdy_send(f->sc.sp, k->data_sid, NULL, 0, true, &err) >= 0;
		else if (errno != EAGAIN && errno != EINTR)
			return false;
	}
	while ((o = outq_peek(&k->out, &n))) {
		ssize_t w = send(k->fd, o, n, MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			return true;
		if (w <= 0)
			return false;
		outq_consume(&k->out, (size_t)w);
	}
	return !k->remote_done; /* kubectl too closes the local side when the pod's ends */
}

/* The loop: local connections and the streams, until a signal or the connection is lost. */
static int pf_loop(struct pfc *f, struct err *err)
{
	struct pollfd p[1 + 1 + PF_MAX_PORTS + PF_MAX_CONNS];

	for (;;) {
		size_t np = 0, queued = 0, pending = cli_sconn_pending(&f->sc);
		int ret;

		for (size_t i = 0; i < f->nconns; i++)
			queued = outq_len(&f->conns[i]->out) > queued ? outq_len(&f->conns[i]->out)
								      : queued;
		p[np++] = (struct pollfd){ cli_signal_fd(), POLLIN, 0 };
		p[np++] = (struct pollfd){
			f->sc.fd,
			(short)((queued < CONN_OUT_MAX ? POLLIN : 0) | (pending ? POLLOUT : 0)), 0
		};
		for (size_t i = 0; i < f->nports; i++)
			p[np++] = (struct pollfd){ f->nconns < PF_MAX_CONNS ? f->lfd[i] : -1,
						   POLLIN, 0 };
		for (size_t i = 0; i < f->nconns; i++) {
			struct pf_conn *k = f->conns[i];
			bool rd = !k->local_eof && !k->remote_done && pending < CLI_SEND_MAX;

			p[np++] = (struct pollfd){
				k->fd,
				(short)((rd ? POLLIN : 0) | (outq_len(&k->out) ? POLLOUT : 0)), 0
			};
		}
		if (poll(p, np, -1) < 0 && errno != EINTR)
			return err_errno(err, "poll");
		if (p[0].revents && cli_next_signal())
			return 0; /* interrupted: the end the user asked for */
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ret = cli_sconn_read(&f->sc, pf_event, f, err);
			if (ret < 0)
				return -err->code;
			if (ret == 0 || f->lost)
				return err_set(err, ECONNRESET, "lost connection to pod");
		}
		/* connections by their poll slots, before any is dropped or added */
		for (size_t i = f->nconns; i-- > 0;)
			if (!pf_conn_io(f, f->conns[i], p[2 + f->nports + i].revents))
				conn_drop(f, i);
		for (size_t i = 0; i < f->nports; i++)
			if (p[2 + i].revents)
				pf_accept(f, i);
		if (cli_sconn_flush(&f->sc) < 0)
			return err_set(err, ECONNRESET, "lost connection to pod");
	}
}

/* "[LOCAL:]REMOTE" (":REMOTE": any free local port) into *local and *remote. */
static int parse_port_spec(const char *spec, uint16_t *local, uint16_t *remote, struct err *err)
{
	const char *colon = strchr(spec, ':');
	char *end;
	long l = 0, r;

	r = strtol(colon ? colon + 1 : spec, &end, 10);
	if (*end || end == (colon ? colon + 1 : spec) || r < 1 || r > 65535)
		return err_set(err, EINVAL, "\"%s\": the pod's port must be 1-65535", spec);
	if (colon && colon != spec) {
		l = strtol(spec, &end, 10);
		if (end != colon || l < 0 || l > 65535)
			return err_set(err, EINVAL, "\"%s\": the local port must be 0-65535", spec);
	} else if (!colon) {
		l = r;
	}
	*local = (uint16_t)l;
	*remote = (uint16_t)r;
	return 0;
}

/* Listens on 127.0.0.1:*port (0: any; the port taken is stored back). */
static int listen_local(uint16_t *port, struct err *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(*port) };
	socklen_t len = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return err_errno(err, "socket");
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		err_errno(err, "listen on 127.0.0.1:%u", *port);
		close(fd);
		return -err->code;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

#define PF_USAGE "usage: kiyot port-forward POD [LOCAL:]REMOTE..."

/* The local listeners, the CRI's PortForward and its URL upgraded; then the loop. */
static int pf_start(struct cli *c, struct pfc *f, const char *pod, struct err *err)
{
	Runtime__V1__PortForwardRequest req = RUNTIME__V1__PORT_FORWARD_REQUEST__INIT;
	Runtime__V1__PortForwardResponse *resp = NULL;
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, 0 };
	_cleanup_free_ char *sid = NULL, *url = NULL;
	int32_t ports[PF_MAX_PORTS];

	for (size_t i = 0; i < f->nports; i++) {
		f->lfd[i] = listen_local(&f->local[i], err);
		if (f->lfd[i] < 0)
			return f->lfd[i];
		ports[i] = f->remote[i];
	}
	if (cli_resolve_pod(c, pod, &sid, err) < 0)
		return -err->code;
	req.pod_sandbox_id = sid;
	req.port = ports;
	req.n_port = f->nports;
	if (cli_call(c, CLI_RT "PortForward", &req.base,
		     &runtime__v1__port_forward_response__descriptor, &resp, err) < 0)
		return err_wrap(err, "port-forward to pod %s", pod);
	url = xstrdup(resp->url);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	if (cli_catch_signals(sigs, err) < 0 ||
	    cli_sconn_open(&f->sc, url, "portforward.k8s.io", 2 * PF_MAX_CONNS, err) < 0)
		return -err->code;
	for (size_t i = 0; i < f->nports; i++)
		printf("Forwarding from 127.0.0.1:%u -> %u\n", f->local[i], f->remote[i]);
	fflush(stdout);
	return pf_loop(f, err);
}

int cli_port_forward(struct cli *c, int argc, char **argv)
{
	struct pfc *f;
	struct err err = ERR_INIT;
	int ret = 0;

	if (argc < 3 || argv[1][0] == '-')
		return cli_fail("%s", PF_USAGE) + 1;
	if (argc - 2 > PF_MAX_PORTS)
		return cli_fail("at most %d ports at once", PF_MAX_PORTS) + 1;
	signal(SIGPIPE, SIG_IGN);
	f = xcalloc(1, sizeof(*f));
	f->sc.fd = -1;
	for (int i = 2; i < argc && ret == 0; i++) {
		f->lfd[f->nports] = -1;
		ret = parse_port_spec(argv[i], &f->local[f->nports], &f->remote[f->nports], &err);
		f->nports++;
	}
	if (ret < 0)
		ret = cli_fail("%s; %s", err.msg, PF_USAGE) + 1;
	else if (pf_start(c, f, argv[1], &err) < 0)
		ret = cli_fail("%s", err.msg);
	while (f->nconns)
		conn_drop(f, f->nconns - 1);
	for (size_t i = 0; i < f->nports; i++)
		if (f->lfd[i] >= 0)
			close(f->lfd[i]);
	cli_sconn_close(&f->sc);
	free(f);
	return ret;
}
