/*
 * api_stream.c: the agent's streaming calls: Exec (a command's stdio both ways) and
 * PortForward (a TCP connection to the pod). Each call pumps in two threads: the handler's
 * reads the call's input (rpc_recv) into the process or socket, a second one sends what
 * comes out. gRPC's flow control is the backpressure both ways: a slow reader stalls the
 * sender, never a buffer. When the caller goes away the command is killed or the connection
 * closed, and nothing stays behind.
 */
#include "agent.h"

#include "cellagent.pb-c.h"
#include "rpc.h"
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "xalloc.h"

/* Streams open at once in one cell (exec and port-forward together). */
#define AGENT_MAX_STREAMS 64
/* Output is sent in chunks of at most this. */
#define STREAM_CHUNK (32 * 1024)
/* How long a caller has to close its side after the end was sent. */
#define CLOSE_WAIT_S 10

/* Takes a stream slot; -EFBIG (RESOURCE_EXHAUSTED) when the cell has too many open. */
static int stream_enter(struct agent *a, struct err *err)
{
	if (atomic_fetch_add(&a->streams, 1) >= AGENT_MAX_STREAMS) {
		atomic_fetch_sub(&a->streams, 1);
		return err_set(err, EFBIG,
			       "this cell has %d exec and port-forward streams open; close some",
			       AGENT_MAX_STREAMS);
	}
	return 0;
}

static void stream_leave(struct agent *a)
{
	atomic_fetch_sub(&a->streams, 1);
}

/* Writes all of buf; false when the other end is gone. */
static bool write_all(int fd, const uint8_t *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		buf += w;
		n -= (size_t)w;
	}
	return true;
}

/* The end of an input thread, waited for with a bound. */
struct input_done {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
};

static void input_finished(struct input_done *d)
{
	pthread_mutex_lock(&d->mu);
	d->done = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->mu);
}

/* Waits until the input thread t finished, ending the call first when the caller has not
 * closed its side within CLOSE_WAIT_S (or at once with cut). */
static void input_join(struct rpc_call *call, pthread_t t, struct input_done *d, bool cut)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += cut ? 0 : CLOSE_WAIT_S;
	pthread_mutex_lock(&d->mu);
	while (!d->done)
		if (pthread_cond_timedwait(&d->cond, &d->mu, &ts) == ETIMEDOUT)
			break;
	if (!d->done)
		rpc_call_cancel(call);
	pthread_mutex_unlock(&d->mu);
	pthread_join(t, NULL);
}

/* ---- Exec ---- */

struct exec_pump {
	struct rpc_call *call;
	struct exec_session *x;
	bool gone; /* the caller went away (set by the input side) */
	struct input_done end;
};

/* Applies one input message; false once stdin is closed for good or the caller left. */
static void exec_input(struct exec_pump *p, const Kiyot__Cell__V1__ExecInput *in)
{
	if (in->stdin_data.len && p->x->stdin_fd >= 0 &&
	    !write_all(p->x->stdin_fd, in->stdin_data.data, in->stdin_data.len)) {
		close(p->x->stdin_fd);
		p->x->stdin_fd = -1;
	}
	if (in->resize && p->x->tty)
		exec_session_resize(p->x, in->resize->width, in->resize->height);
	if (in->stdin_close && p->x->stdin_fd >= 0) {
		/* a terminal ends input with its EOF character; a pipe by closing */
		if (p->x->tty)
			write_all(p->x->stdin_fd, (const uint8_t *)"\x04", 1);
		close(p->x->stdin_fd);
		p->x->stdin_fd = -1;
	}
}

/* The input side: stdin and resizes until the caller closes its side or goes away. */
static void *exec_input_thread(void *arg)
{
	struct exec_pump *p = arg;
	struct err err = ERR_INIT;

	for (;;) {
		ProtobufCMessage *m = NULL;
		int ret = rpc_recv(p->call, &kiyot__cell__v1__exec_input__descriptor, &m, &err);

		if (ret <= 0) {
			if (ret < 0) {
				p->gone = true;
				exec_session_kill(p->x);
			}
			input_finished(&p->end);
			return NULL;
		}
		exec_input(p, (const Kiyot__Cell__V1__ExecInput *)m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
}

/* Sends the command's output until both streams end; -ECANCELED when the caller left. */
static int exec_output(struct exec_pump *p, struct err *err)
{
	int fds[2] = { p->x->stdout_fd, p->x->stderr_fd };
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
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) { /* EOF, or EIO from a terminal whose processes all left */
				fds[i] = -1;
				continue;
			}
			if (i == 0)
				out.stdout = (ProtobufCBinaryData){ (size_t)n, buf };
			else
				out.stderr = (ProtobufCBinaryData){ (size_t)n, buf };
			ret = rpc_send(p->call, &out.base, err);
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
	struct exec_session x;
	struct exec_pump p = {
		call, &x, false, { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false }
	};
	pthread_t t;
	int ret, code;

	for (size_t i = 0; i < in->n_cmd; i++)
		cmd[i] = in->cmd[i];
	ret = supervisor_exec_start(a->sup, in->unit_id, cmd, in->tty, in->stdin, &x, err);
	if (ret < 0)
		return ret;
	exec_input(&p, in); /* the first message may carry input and a size too */
	if (pthread_create(&t, NULL, exec_input_thread, &p) != 0) {
		exec_session_kill(&x);
		exec_session_wait(&x);
		exec_session_close(&x);
		return err_set(err, EAGAIN, "no thread for the exec's input");
	}
	ret = exec_output(&p, err);
	if (ret < 0)
		exec_session_kill(&x);
	code = exec_session_wait(&x);
	if (ret == 0) {
		done.exited = 1;
		done.exit_code = code;
		ret = rpc_send(call, &done.base, err);
	}
	/* the caller closes its side once it has the exit code; one that does not is cut off */
	input_join(call, t, &p.end, ret < 0);
	exec_session_close(&x);
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

/* ---- PortForward ---- */

struct pf_pump {
	struct rpc_call *call;
	int sock;
	bool gone;
	struct input_done end;
};

/* The caller's bytes into the connection, until it closes its side or goes away. */
static void *pf_input_thread(void *arg)
{
	struct pf_pump *p = arg;
	struct err err = ERR_INIT;
	bool open = true;

	for (;;) {
		ProtobufCMessage *m = NULL;
		int ret = rpc_recv(p->call, &kiyot__cell__v1__port_forward_input__descriptor, &m,
				   &err);
		const Kiyot__Cell__V1__PortForwardInput *in = (const void *)m;

		if (ret <= 0) {
			p->gone = ret < 0;
			shutdown(p->sock, ret < 0 ? SHUT_RDWR : SHUT_WR);
			input_finished(&p->end);
			return NULL;
		}
		if (open && in->data.len && !write_all(p->sock, in->data.data, in->data.len))
			open = false;
		if (open && in->close) {
			shutdown(p->sock, SHUT_WR);
			open = false;
		}
		protobuf_c_message_free_unpacked(m, NULL);
	}
}

/* The connection's bytes to the caller until the pod's side ends it. */
static int pf_output(struct pf_pump *p, struct err *err)
{
	uint8_t *buf = xmalloc(STREAM_CHUNK);
	int ret = 0;

	for (;;) {
		Kiyot__Cell__V1__PortForwardOutput out = KIYOT__CELL__V1__PORT_FORWARD_OUTPUT__INIT;
		ssize_t n = read(p->sock, buf, STREAM_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out.data = (ProtobufCBinaryData){ (size_t)n, buf };
		ret = rpc_send(p->call, &out.base, err);
		if (ret < 0)
			break;
	}
	free(buf);
	return ret;
}

struct netns_socket {
	const char *netns;
	int fd, err;
};

/* In a thread of its own (setns changes only the calling thread): a socket made in netns,
 * which it keeps whatever thread uses it. */
static void *socket_in_netns(void *arg)
{
	struct netns_socket *ns = arg;
	int nfd = open(ns->netns, O_RDONLY | O_CLOEXEC);

	if (nfd < 0 || setns(nfd, CLONE_NEWNET) < 0)
		ns->err = errno;
	else if ((ns->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		ns->err = errno;
	if (nfd >= 0)
		close(nfd);
	return NULL;
}

/* A TCP socket in the pod's network: the cell's, or the host's for a host-network pod. */
static int pod_socket(struct agent *a, bool host_network)
{
	_cleanup_free_ char *netns = host_network ? supervisor_host_netns(a->sup) : NULL;
	struct netns_socket ns = { netns, -1, 0 };
	pthread_t t;

	if (!netns)
		return socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pthread_create(&t, NULL, socket_in_netns, &ns) != 0)
		return -1;
	pthread_join(t, NULL);
	errno = ns.err;
	return ns.fd;
}

/* Connects to 127.0.0.1:port in the pod's network. */
static int pf_connect(struct agent *a, uint32_t port, bool host_network, struct err *err)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = pod_socket(a, host_network);

	if (fd < 0)
		return err_errno(err, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return err_errno(err, "connect to port %u in the pod", port);
	}
	return fd;
}

int api_port_forward(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__PortForwardInput *in = (const void *)req;
	struct pf_pump p = {
		call, -1, false, { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false }
	};
	pthread_t t;
	int ret;

	(void)resp;
	if (in->port == 0 || in->port > 65535)
		return err_set(err, EINVAL, "port: %u is not a TCP port", in->port);
	ret = stream_enter(a, err);
	if (ret < 0)
		return ret;
	p.sock = pf_connect(a, in->port, in->host_network, err);
	if (p.sock < 0) {
		stream_leave(a);
		return p.sock;
	}
	if ((in->data.len && !write_all(p.sock, in->data.data, in->data.len)) || in->close)
		shutdown(p.sock, SHUT_WR);
	if (pthread_create(&t, NULL, pf_input_thread, &p) != 0) {
		close(p.sock);
		stream_leave(a);
		return err_set(err, EAGAIN, "no thread for the connection's input");
	}
	ret = pf_output(&p, err);
	input_join(call, t, &p.end, ret < 0);
	close(p.sock);
	stream_leave(a);
	if (p.gone && ret == 0)
		ret = err_set(err, ECANCELED, "the caller went away");
	return ret;
}
