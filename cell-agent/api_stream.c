/*
 * api_stream.c: the agent's streaming calls: Exec (a command's stdio both ways), Attach (a
 * unit's own stdio, through its shim) and PortForward (a TCP connection to the pod). Each call
 * pumps in two threads: a second thread reads the call's input (rpc_recv) into the process or
 * socket, the handler's sends what comes out. gRPC's flow control is the backpressure both
 * ways: a slow reader stalls the sender, never a buffer. When the caller goes away the command
 * is killed, the attach let go (the unit runs on) or the connection closed, and nothing stays
 * behind.
 */
#include "agent.h"

#include "cellagent.pb-c.h"
#include "rpc.h"
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "netns.h"
#include "shim_attach.h"
#include "xalloc.h"

/* Streams open at once in one cell (exec, attach and port-forward together). */
#define AGENT_MAX_STREAMS 64
/* Output is sent in chunks of at most this; a connection's bytes (port-forward) in larger
 * ones, each message costing a round through gRPC. */
#define STREAM_CHUNK (32 * 1024)
#define PF_CHUNK (128 * 1024)
/* How long a caller has to close its side after the end was sent. */
#define CLOSE_WAIT_S 10
/* How often a quiet attach looks whether its caller is still there. */
#define CANCEL_CHECK_MS 1000

/* Takes a stream slot; -EFBIG (RESOURCE_EXHAUSTED) when the cell has too many open. */
static int stream_enter(struct agent *a, struct err *err)
{
	if (atomic_fetch_add(&a->streams, 1) >= AGENT_MAX_STREAMS) {
		atomic_fetch_sub(&a->streams, 1);
		return err_set(err, EFBIG,
			       "this cell has %d exec, attach and port-forward streams open; close "
			       "some",
			       AGENT_MAX_STREAMS);
	}
	return 0;
}

static void stream_leave(struct agent *a)
{
	atomic_fetch_sub(&a->streams, 1);
}

/* Writes all of buf to a command's non-blocking stdin or a connection (sock), waiting while
 * it takes nothing; false when its reader is gone or the caller went away meanwhile: a reader
 * that reads nothing must not hold the input thread, which is what sees the caller leave. */
static bool write_all(int fd, bool sock, const uint8_t *buf, size_t n, struct rpc_call *call)
{
	while (n) {
		ssize_t w = sock ? send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL)
				 : write(fd, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd p = { fd, POLLOUT, 0 };

			if (rpc_cancelled(call))
				return false;
			poll(&p, 1, CANCEL_CHECK_MS);
			continue;
		}
		if (w <= 0)
			return false;
		buf += w;
		n -= (size_t)w;
	}
	return true;
}

/*
 * The input side of a streaming call, in a thread of its own: every message the caller sends
 * goes to apply, until the caller closes its side (end with gone false) or goes away (end
 * with gone true, set before end runs). The handler waits for it with input_join.
 */
struct input_pump {
	struct rpc_call *call;
	const ProtobufCMessageDescriptor *desc;
	void (*apply)(void *ctx, const ProtobufCMessage *m);
	void (*end)(void *ctx, bool gone);
	void *ctx;
	bool gone;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
};

static void *input_thread(void *arg)
{
	struct input_pump *p = arg;
	struct err err = ERR_INIT;

	for (;;) {
		ProtobufCMessage *m = NULL;
		int ret = rpc_recv(p->call, p->desc, &m, &err);

		if (ret <= 0) {
			p->gone = ret < 0;
			p->end(p->ctx, p->gone);
			pthread_mutex_lock(&p->mu);
			p->done = true;
			pthread_cond_signal(&p->cond);
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		p->apply(p->ctx, m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
}

/* Starts the input thread of a pump whose fields up to ctx are set. */
static int input_start(struct input_pump *p, struct err *err)
{
	p->gone = p->done = false;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cond, NULL);
	if (pthread_create(&p->thread, NULL, input_thread, p) != 0)
		return err_set(err, EAGAIN, "no thread for the call's input");
	return 0;
}

/* Waits until the input thread finished, ending the call first when the caller has not
 * closed its side within CLOSE_WAIT_S (or at once with cut). */
static void input_join(struct input_pump *p, bool cut)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += cut ? 0 : CLOSE_WAIT_S;
	pthread_mutex_lock(&p->mu);
	while (!p->done)
		if (pthread_cond_timedwait(&p->cond, &p->mu, &ts) == ETIMEDOUT)
			break;
	if (!p->done)
		rpc_call_cancel(p->call);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cond);
}

/* ---- Exec ---- */

/* A command being run for a call. */
struct exec_call {
	struct exec_session x;
	struct rpc_call *call;
};

/* Applies one input message: stdin, its end, a terminal size. */
static void exec_input(void *ctx, const ProtobufCMessage *m)
{
	struct exec_call *c = ctx;
	struct exec_session *x = &c->x;
	const Kiyot__Cell__V1__ExecInput *in = (const void *)m;

	if (in->stdin_data.len && x->stdin_fd >= 0 &&
	    !write_all(x->stdin_fd, false, in->stdin_data.data, in->stdin_data.len, c->call)) {
		close(x->stdin_fd);
		x->stdin_fd = -1;
	}
	if (in->resize && x->tty)
		exec_session_resize(x, in->resize->width, in->resize->height);
	if (in->stdin_close && x->stdin_fd >= 0) {
		/* a terminal ends input with its EOF character; a pipe by closing */
		if (x->tty)
			write_all(x->stdin_fd, false, (const uint8_t *)"\x04", 1, c->call);
		close(x->stdin_fd);
		x->stdin_fd = -1;
	}
}

/* A caller that went away has its command killed. */
static void exec_input_end(void *ctx, bool gone)
{
	struct exec_call *c = ctx;

	if (gone)
		exec_session_kill(&c->x);
}

/* Sends the command's output until both streams end; -ECANCELED when the caller left. */
static int exec_output(struct rpc_call *call, struct exec_session *x, struct err *err)
{
	int fds[2] = { x->stdout_fd, x->stderr_fd };
	uint8_t *buf = xmalloc(STREAM_CHUNK);
	int ret = 0;

	while (ret == 0 && (fds[0] >= 0 || fds[1] >= 0)) {
		struct pollfd pf[2] = { { fds[0], POLLIN, 0 }, { fds[1], POLLIN, 0 } };

		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2 && ret == 0; i++) {
			Kiyot__Cell__V1__ExecOutput out = KIYOT__CELL__V1__EXEC_OUTPUT__INIT;
			ssize_t n;

			if (fds[i] < 0 || !pf[i].revents)
				continue;
			n = read(fds[i], buf, STREAM_CHUNK);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				continue; /* EAGAIN: a terminal's master, non-blocking for stdin */
			if (n <= 0) {	  /* EOF, or EIO from a terminal whose processes all left */
				fds[i] = -1;
				continue;
			}
			if (i == 0)
				out.stdout = (ProtobufCBinaryData){ (size_t)n, buf };
			else
				out.stderr = (ProtobufCBinaryData){ (size_t)n, buf };
			ret = rpc_send(call, &out.base, err);
		}
	}
	free(buf);
	return ret;
}

static int exec_run(struct agent *a, struct rpc_call *call, const Kiyot__Cell__V1__ExecInput *in,
		    struct err *err)
{
	Kiyot__Cell__V1__ExecOutput done = KIYOT__CELL__V1__EXEC_OUTPUT__INIT;
	char **cmd = rpc_alloc(call, (in->n_cmd + 1) * sizeof(char *));
	struct exec_call c = { .call = call };
	struct exec_session *x = &c.x;
	struct input_pump p = { .call = call,
				.desc = &kiyot__cell__v1__exec_input__descriptor,
				.apply = exec_input,
				.end = exec_input_end,
				.ctx = &c };
	int ret, code;

	for (size_t i = 0; i < in->n_cmd; i++)
		cmd[i] = in->cmd[i];
	ret = supervisor_exec_start(a->sup, in->unit_id, cmd, in->tty, in->stdin,
				    in->resize ? in->resize->width : 0,
				    in->resize ? in->resize->height : 0, x, err);
	if (ret < 0)
		return ret;
	if (x->stdin_fd >= 0)
		fcntl(x->stdin_fd, F_SETFL, fcntl(x->stdin_fd, F_GETFL) | O_NONBLOCK);
	exec_input(&c, &in->base); /* the first message may carry input and a size too */
	if (input_start(&p, err) < 0) {
		exec_session_kill(x);
		exec_session_wait(x);
		exec_session_close(x);
		return -err->code;
	}
	ret = exec_output(call, x, err);
	if (ret < 0)
		exec_session_kill(x);
	code = exec_session_wait(x);
	if (ret == 0) {
		done.exited = 1;
		done.exit_code = code;
		ret = rpc_send(call, &done.base, err);
	}
	/* the caller closes its side once it has the exit code; one that does not is cut off */
	input_join(&p, ret < 0);
	exec_session_close(x);
	if (p.gone && ret == 0)
		ret = err_set(err, ECANCELED, "the caller went away");
	return ret;
}

int api_exec(void *svc, struct rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,
	     struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__ExecInput *in = (const void *)req;
	int ret;

	(void)resp;
	if (!in->unit_id || !in->unit_id[0])
		return err_set(err, EINVAL, "unit_id: required in the first message");
	if (in->n_cmd == 0)
		return err_set(err, EINVAL, "cmd: required in the first message");
	ret = stream_enter(a, err);
	if (ret < 0)
		return ret;
	ret = exec_run(a, call, in, err);
	stream_leave(a);
	return ret;
}

/* ---- Attach ---- */

/* Applies one input message: input (when this caller's reaches the unit), its end, a size. */
static void attach_input(void *ctx, const ProtobufCMessage *m)
{
	struct attach_conn *c = ctx;
	const Kiyot__Cell__V1__AttachInput *in = (const void *)m;

	if (in->stdin_data.len && c->stdin_open)
		attach_conn_stdin(c, in->stdin_data.data, in->stdin_data.len);
	if (in->resize)
		attach_conn_resize(c, in->resize->width, in->resize->height);
	if (in->stdin_close && c->stdin_open) {
		attach_conn_stdin_close(c);
		c->stdin_open = false;
	}
}

/* A caller that closed its side still gets the output; one that went away is let go. */
static void attach_input_end(void *ctx, bool gone)
{
	if (gone)
		attach_conn_shutdown(ctx);
}

/* Sends the unit's output until its run ends (exited), the shim lets this caller go
 * (detached) or the caller leaves (-ECANCELED from rpc_send). */
static int attach_output(struct input_pump *p, struct attach_conn *c, struct err *err)
{
	uint8_t *buf = xmalloc(SHIM_ATTACH_CHUNK);
	int ret = 0;

	for (;;) {
		Kiyot__Cell__V1__AttachOutput out = KIYOT__CELL__V1__ATTACH_OUTPUT__INIT;
		struct pollfd pf = { c->fd, POLLIN, 0 };
		uint8_t type = 0;
		int32_t code = 0;
		ssize_t n;

		/* a quiet unit: notice a caller that left (its input side may be blocked on a
		 * unit that reads no stdin, and would not see it) */
		if (poll(&pf, 1, CANCEL_CHECK_MS) == 0) {
			if (!rpc_cancelled(p->call))
				continue;
			ret = err_set(err, ECANCELED, "the caller went away");
			break;
		}
		n = attach_conn_recv(c, &type, buf, SHIM_ATTACH_CHUNK);
		if (n < 0 || type == 0 || type == ATTACH_PKT_EXIT) {
			if (type == ATTACH_PKT_EXIT && (size_t)n >= sizeof(code))
				memcpy(&code, buf, sizeof(code));
			out.exited = type == ATTACH_PKT_EXIT;
			out.exit_code = code;
			out.detached = !out.exited;
			if (!p->gone)
				ret = rpc_send(p->call, &out.base, err);
			break;
		}
		if (type == ATTACH_PKT_STDOUT)
			out.stdout = (ProtobufCBinaryData){ (size_t)n, buf };
		else if (type == ATTACH_PKT_STDERR)
			out.stderr = (ProtobufCBinaryData){ (size_t)n, buf };
		else
			continue;
		ret = rpc_send(p->call, &out.base, err);
		if (ret < 0)
			break;
	}
	free(buf);
	return ret;
}

static int attach_run(struct agent *a, struct rpc_call *call,
		      const Kiyot__Cell__V1__AttachInput *in, struct err *err)
{
	Kiyot__Cell__V1__AttachOutput hello = KIYOT__CELL__V1__ATTACH_OUTPUT__INIT;
	struct attach_conn c;
	struct input_pump p = { .call = call,
				.desc = &kiyot__cell__v1__attach_input__descriptor,
				.apply = attach_input,
				.end = attach_input_end,
				.ctx = &c };
	int ret = supervisor_attach(a->sup, in->unit_id, in->stdin, &c, err);

	if (ret < 0)
		return ret;
	hello.attached = 1;
	hello.tty = c.tty;
	hello.stdin = c.stdin_open;
	ret = rpc_send(call, &hello.base, err);
	if (ret == 0) {
		attach_input(&c, &in->base); /* the first message may carry input and a size */
		ret = input_start(&p, err);
	}
	if (ret < 0) {
		attach_conn_close(&c);
		return ret;
	}
	ret = attach_output(&p, &c, err);
	if (ret < 0) /* the caller left: an input side blocked on the unit's full stdin returns */
		attach_conn_shutdown(&c);
	/* the caller closes its side once it has the end; one that does not is cut off */
	input_join(&p, ret < 0);
	attach_conn_close(&c);
	if (p.gone && ret == 0)
		ret = err_set(err, ECANCELED, "the caller went away");
	return ret;
}

int api_attach(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
	       ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__AttachInput *in = (const void *)req;
	int ret;

	(void)resp;
	if (!in->unit_id || !in->unit_id[0])
		return err_set(err, EINVAL, "unit_id: required in the first message");
	ret = stream_enter(a, err);
	if (ret < 0)
		return ret;
	ret = attach_run(a, call, in, err);
	stream_leave(a);
	return ret;
}

/* ---- PortForward ---- */

struct pf_conn {
	int sock;
	bool open; /* the caller may still write to the connection */
	struct rpc_call *call;
};

/* The caller's bytes into the connection, and the end of them. */
static void pf_input(void *ctx, const ProtobufCMessage *m)
{
	struct pf_conn *c = ctx;
	const Kiyot__Cell__V1__PortForwardInput *in = (const void *)m;

	if (c->open && in->data.len &&
	    !write_all(c->sock, true, in->data.data, in->data.len, c->call))
		c->open = false;
	if (c->open && in->close) {
		shutdown(c->sock, SHUT_WR);
		c->open = false;
	}
}

/* The caller closed its side (the connection's write side is shut) or went away (all of it). */
static void pf_input_end(void *ctx, bool gone)
{
	struct pf_conn *c = ctx;

	shutdown(c->sock, gone ? SHUT_RDWR : SHUT_WR);
}

/* The connection's bytes to the caller until the pod's side ends it. */
static int pf_output(struct rpc_call *call, int sock, struct err *err)
{
	Kiyot__Cell__V1__PortForwardOutput end = KIYOT__CELL__V1__PORT_FORWARD_OUTPUT__INIT;
	uint8_t *buf = xmalloc(PF_CHUNK);
	ssize_t n;
	int ret = 0;

	for (;;) {
		Kiyot__Cell__V1__PortForwardOutput out = KIYOT__CELL__V1__PORT_FORWARD_OUTPUT__INIT;

		n = read(sock, buf, PF_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out.data = (ProtobufCBinaryData){ (size_t)n, buf };
		ret = rpc_send(call, &out.base, err);
		if (ret < 0)
			break;
	}
	free(buf);
	/* the pod closed its side: the caller learns it now, not when the call ends */
	end.closed = 1;
	if (ret == 0 && n == 0)
		ret = rpc_send(call, &end.base, err);
	return ret;
}

/* Connects to 127.0.0.1:port in the pod's network: the cell's, or the host's for a
 * host-network pod. */
static int pf_connect(struct agent *a, uint32_t port, bool host_network, struct err *err)
{
	_cleanup_free_ char *netns = host_network ? supervisor_host_netns(a->sup) : NULL;

	return netns_connect_loopback(netns, (uint16_t)port, err);
}

int api_port_forward(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__PortForwardInput *in = (const void *)req;
	struct pf_conn c = { -1, true, call };
	struct input_pump p = { .call = call,
				.desc = &kiyot__cell__v1__port_forward_input__descriptor,
				.apply = pf_input,
				.end = pf_input_end,
				.ctx = &c };
	int ret;

	(void)resp;
	if (in->port == 0 || in->port > 65535)
		return err_set(err, EINVAL, "port: %u is not a TCP port", in->port);
	ret = stream_enter(a, err);
	if (ret < 0)
		return ret;
	c.sock = pf_connect(a, in->port, in->host_network, err);
	if (c.sock < 0) {
		stream_leave(a);
		return c.sock;
	}
	pf_input(&c, &in->base); /* data may come with the first message */
	if (input_start(&p, err) < 0) {
		close(c.sock);
		stream_leave(a);
		return -err->code;
	}
	ret = pf_output(call, c.sock, err);
	input_join(&p, ret < 0);
	close(c.sock);
	stream_leave(a);
	if (p.gone && ret == 0)
		ret = err_set(err, ECANCELED, "the caller went away");
	return ret;
}
