/*
 * The cell-agent's streaming calls (cell-agent/api_stream.c) as kiyot makes them: Exec (with
 * pipes or a terminal), Attach to a unit's own stdio, PortForward to a port of the pod, over
 * bidirectional gRPC calls to the agent in process (agent_fixture.h). Each test asserts what
 * the caller sees: the output, the exit code, the end of the call and its status. Needs root;
 * this binary is also the shim and the fake runtime.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_fixture.h"
#include "fsutil.h"
#include "rpc.h"
#include "testutil.h"
#include "xalloc.h"

#define RUNNING KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING

/* What the agent sent on an Exec or Attach until its last message. */
struct seen {
	char out[4096], err[4096];
	size_t out_len, err_len;
	bool exited, detached, attached, tty, stdin;
	int code;
};

static void add(char *buf, size_t *len, const ProtobufCBinaryData *d)
{
	size_t n = d->len < 4095 - *len ? d->len : 4095 - *len;

	if (n)
		memcpy(buf + *len, d->data, n);
	*len += n;
	buf[*len] = '\0';
}

/* Reads Exec output until its exit message (or the end); true when out holds want (if any). */
static bool read_exec(struct afix_bidi *b, struct seen *s, const char *want)
{
	ProtobufCMessage *m;

	while ((!want || !strstr(s->out, want)) && !s->exited && (m = afix_bidi_next(b))) {
		Kiyot__Cell__V1__ExecOutput *o = (void *)m;

		add(s->out, &s->out_len, &o->stdout);
		add(s->err, &s->err_len, &o->stderr);
		s->exited = o->exited;
		s->code = o->exit_code;
		protobuf_c_message_free_unpacked(m, NULL);
	}
	return !want || strstr(s->out, want);
}

/* The same for Attach. */
static bool read_attach(struct afix_bidi *b, struct seen *s, const char *want)
{
	ProtobufCMessage *m;

	while ((!want || !strstr(s->out, want)) && !s->exited && !s->detached &&
	       (m = afix_bidi_next(b))) {
		Kiyot__Cell__V1__AttachOutput *o = (void *)m;

		add(s->out, &s->out_len, &o->stdout);
		add(s->err, &s->err_len, &o->stderr);
		s->exited = o->exited;
		s->detached = o->detached;
		s->code = o->exit_code;
		if (o->attached) {
			s->attached = true;
			s->tty = o->tty;
			s->stdin = o->stdin;
		}
		protobuf_c_message_free_unpacked(m, NULL);
	}
	return !want || strstr(s->out, want);
}

/* A pod of one unit "c1" running script, its spec changed by edit (if any), applied and
 * running. */
static Kiyot__Cell__V1__Pod *run_unit(struct afix *f, const char *script,
				      void (*edit)(Kiyot__Cell__V1__Unit *u))
{
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__Unit *u = afix_pod_unit(pod, "c1", script);
	Kiyot__Cell__V1__ApplyResponse *r = NULL;
	Kiyot__Cell__V1__WatchEvent *ev;
	struct err err = ERR_INIT;

	if (edit)
		edit(u);
	assert_ok(afix_apply(f, pod, &r, &err));
	protobuf_c_message_free_unpacked(&r->base, NULL);
	ev = afix_wait_state(f, "c1", RUNNING, -1);
	assert_non_null(ev);
	afix_event_free(ev);
	return pod;
}

/* Exec with pipes: the caller's input reaches the command until it closes it, stdout and
 * stderr come apart, then the exit code; the call ends OK once the caller closed its side. */
static void test_agent_api_stream__exec_pipes_input_output_and_exit_code(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = run_unit(f, "exec sleep 1000", NULL);
	Kiyot__Cell__V1__ExecInput in = KIYOT__CELL__V1__EXEC_INPUT__INIT;
	Kiyot__Cell__V1__ExecInput more = KIYOT__CELL__V1__EXEC_INPUT__INIT;
	char *cmd[] = { "sh", "-c", "cat; echo bye >&2; exit 5" };
	struct afix_bidi *b = NULL;
	struct seen s = { 0 };
	struct err err = ERR_INIT;

	in.unit_id = "c1";
	in.cmd = cmd;
	in.n_cmd = 3;
	in.stdin = 1;
	in.stdin_data = (ProtobufCBinaryData){ 5, (uint8_t *)"ping\n" };
	assert_ok(afix_bidi_open(f, "Exec", &in.base, &b, &err));
	assert_true(read_exec(b, &s, "ping\n"));
	more.stdin_data = (ProtobufCBinaryData){ 5, (uint8_t *)"pong\n" };
	more.stdin_close = 1;
	assert_ok(afix_bidi_send(b, &more.base, &err));
	read_exec(b, &s, NULL);
	assert_true(s.exited);
	assert_int_equal(s.code, 5);
	assert_string_equal(s.out, "ping\npong\n");
	assert_string_equal(s.err, "bye\n");
	afix_bidi_close_send(b);
	assert_ok(afix_bidi_end(b, &err));
	afix_pod_free(pod);
}

/* Exec with a terminal: the command has one, of the size the caller gave, and its output
 * comes as stdout. */
static void test_agent_api_stream__exec_with_a_terminal_of_the_callers_size(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = run_unit(f, "exec sleep 1000", NULL);
	Kiyot__Cell__V1__ExecInput in = KIYOT__CELL__V1__EXEC_INPUT__INIT;
	Kiyot__Cell__V1__ExecInput more = KIYOT__CELL__V1__EXEC_INPUT__INIT;
	Kiyot__Cell__V1__TerminalSize size = KIYOT__CELL__V1__TERMINAL_SIZE__INIT;
	char *cmd[] = { "sh", "-c", "read line; test -t 1 && echo is-a-tty; stty size; exit 2" };
	struct afix_bidi *b = NULL;
	struct seen s = { 0 };
	struct err err = ERR_INIT;

	in.unit_id = "c1";
	in.cmd = cmd;
	in.n_cmd = 3;
	in.tty = 1;
	in.stdin = 1;
	size.width = 100;
	size.height = 40;
	in.resize = &size;
	assert_ok(afix_bidi_open(f, "Exec", &in.base, &b, &err));
	more.stdin_data = (ProtobufCBinaryData){ 3, (uint8_t *)"go\n" };
	more.stdin_close = 1;
	assert_ok(afix_bidi_send(b, &more.base, &err));
	read_exec(b, &s, NULL);
	assert_true(s.exited);
	assert_int_equal(s.code, 2);
	assert_non_null(strstr(s.out, "is-a-tty"));
	assert_non_null(strstr(s.out, "40 100"));
	assert_int_equal(s.err_len, 0);
	afix_bidi_close_send(b);
	assert_ok(afix_bidi_end(b, &err));
	afix_pod_free(pod);
}

/* Exec's refusals, each with its code: no unit, no command, an unknown unit, a unit that does
 * not run. */
static void test_agent_api_stream__exec_refusals_have_their_codes(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
	Kiyot__Cell__V1__ExecInput in = KIYOT__CELL__V1__EXEC_INPUT__INIT;
	Kiyot__Cell__V1__ApplyResponse *r = NULL;
	Kiyot__Cell__V1__WatchEvent *ev;
	char *cmd[] = { "true" };
	struct afix_bidi *b = NULL;
	struct err err = ERR_INIT;

	afix_pod_unit(pod, "done", "true");
	assert_ok(afix_apply(f, pod, &r, &err));
	protobuf_c_message_free_unpacked(&r->base, NULL);
	ev = afix_wait_state(f, "done", KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED, 0);
	assert_non_null(ev);
	afix_event_free(ev);

	in.cmd = cmd;
	in.n_cmd = 1;
	assert_ok(afix_bidi_open(f, "Exec", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unit_id: required"));
	in.unit_id = "done";
	in.n_cmd = 0;
	assert_ok(afix_bidi_open(f, "Exec", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "cmd: required"));
	in.n_cmd = 1;
	in.unit_id = "nobody";
	assert_ok(afix_bidi_open(f, "Exec", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "nobody"));
	in.unit_id = "done";
	assert_ok(afix_bidi_open(f, "Exec", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -EBUSY);
	assert_non_null(strstr(err.msg, "not running"));
	afix_pod_free(pod);
}

/* A caller that goes away has its command killed: nothing of it stays in the cell. */
static void test_agent_api_stream__exec_caller_leaving_kills_the_command(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = run_unit(f, "exec sleep 1000", NULL);
	Kiyot__Cell__V1__ExecInput in = KIYOT__CELL__V1__EXEC_INPUT__INIT;
	_cleanup_free_ char *pidfile = xasprintf("%s/exec.pid", f->dir);
	_cleanup_free_ char *script =
		xasprintf("echo $$ > %s; echo started; exec sleep 1000", pidfile);
	_cleanup_free_ char *text = NULL;
	char *cmd[] = { "sh", "-c", script };
	struct afix_bidi *b = NULL;
	struct seen s = { 0 };
	struct err err = ERR_INIT;
	long pid;
	int tries = 0;

	in.unit_id = "c1";
	in.cmd = cmd;
	in.n_cmd = 3;
	assert_ok(afix_bidi_open(f, "Exec", &in.base, &b, &err));
	assert_true(read_exec(b, &s, "started\n"));
	assert_int_equal(fs_read_file(pidfile, 64, &text, NULL, &err), 0);
	pid = strtol(text, NULL, 10);
	assert_true(pid > 1);
	assert_int_equal(kill((pid_t)pid, 0), 0);
	afix_bidi_cancel(b);
	assert_int_equal(afix_bidi_end(b, &err), -ECANCELED);
	while (kill((pid_t)pid, 0) == 0 && tries++ < 2000)
		usleep(10000);
	assert_int_equal(kill((pid_t)pid, 0), -1);
	afix_pod_free(pod);
}

static void with_stdin(Kiyot__Cell__V1__Unit *u)
{
	u->stdin = 1;
}

static void with_stdin_once(Kiyot__Cell__V1__Unit *u)
{
	u->stdin = 1;
	u->stdin_once = 1;
}

/* Attach to a unit created with stdin (once): the answer says so, the caller's input reaches
 * the unit, its output comes back, and the end of the input ends the unit, whose exit ends
 * the call with its exit code. */
static void test_agent_api_stream__attach_reaches_the_units_own_stdio(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = run_unit(f, "echo ready; cat; exit 7", with_stdin_once);
	Kiyot__Cell__V1__AttachInput in = KIYOT__CELL__V1__ATTACH_INPUT__INIT;
	Kiyot__Cell__V1__AttachInput more = KIYOT__CELL__V1__ATTACH_INPUT__INIT;
	struct afix_bidi *b = NULL;
	struct seen s = { 0 };
	struct err err = ERR_INIT;

	in.unit_id = "c1";
	in.stdin = 1;
	in.stdin_data = (ProtobufCBinaryData){ 6, (uint8_t *)"hello\n" };
	assert_ok(afix_bidi_open(f, "Attach", &in.base, &b, &err));
	assert_true(read_attach(b, &s, "hello\n"));
	assert_true(s.attached);
	assert_true(s.stdin);
	assert_false(s.tty);
	more.stdin_close = 1;
	assert_ok(afix_bidi_send(b, &more.base, &err));
	read_attach(b, &s, NULL);
	assert_true(s.exited);
	assert_int_equal(s.code, 7);
	afix_bidi_close_send(b);
	assert_ok(afix_bidi_end(b, &err));
	afix_pod_free(pod);
}

/* A caller that ends its input to a unit whose stdin outlives one attach is let go
 * ("detached"); the unit runs on and takes the next caller's input. */
static void test_agent_api_stream__attach_ending_input_detaches_the_unit_runs_on(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = run_unit(f, "cat", with_stdin);
	Kiyot__Cell__V1__AttachInput in = KIYOT__CELL__V1__ATTACH_INPUT__INIT;
	Kiyot__Cell__V1__AttachInput end = KIYOT__CELL__V1__ATTACH_INPUT__INIT;
	struct afix_bidi *b = NULL;
	struct err err = ERR_INIT;

	in.unit_id = "c1";
	in.stdin = 1;
	end.stdin_close = 1;
	for (int i = 0; i < 2; i++) {
		struct seen s = { 0 };
		char line[32];

		snprintf(line, sizeof(line), "caller %d\n", i);
		in.stdin_data = (ProtobufCBinaryData){ strlen(line), (uint8_t *)line };
		assert_ok(afix_bidi_open(f, "Attach", &in.base, &b, &err));
		assert_true(read_attach(b, &s, line));
		assert_ok(afix_bidi_send(b, &end.base, &err));
		read_attach(b, &s, NULL);
		assert_true(s.detached);
		assert_false(s.exited);
		afix_bidi_close_send(b);
		assert_ok(afix_bidi_end(b, &err));
	}
	afix_pod_free(pod);
}

/* Attach's refusals: no unit, an unknown unit, input to a unit made without stdin. */
static void test_agent_api_stream__attach_refusals_have_their_codes(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__Pod *pod = run_unit(f, "exec sleep 1000", NULL);
	Kiyot__Cell__V1__AttachInput in = KIYOT__CELL__V1__ATTACH_INPUT__INIT;
	struct afix_bidi *b = NULL;
	struct err err = ERR_INIT;

	assert_ok(afix_bidi_open(f, "Attach", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unit_id: required"));
	in.unit_id = "nobody";
	assert_ok(afix_bidi_open(f, "Attach", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -ENOENT);
	in.unit_id = "c1";
	in.stdin = 1;
	assert_ok(afix_bidi_open(f, "Attach", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "stdin"));
	afix_pod_free(pod);
}

/* A TCP server of the test on 127.0.0.1 that answers one connection with what it read,
 * upper-cased, until its end, then closes. */
struct echo {
	int lfd, port;
	pthread_t thread;
};

static void *echo_main(void *arg)
{
	struct echo *e = arg;
	int fd = accept(e->lfd, NULL, NULL);
	char buf[256];
	ssize_t n;

	while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			buf[i] = (char)(buf[i] >= 'a' && buf[i] <= 'z' ? buf[i] - 32 : buf[i]);
		if (write(fd, buf, (size_t)n) != n)
			break;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void echo_start(struct echo *e)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	e->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(e->lfd >= 0);
	assert_int_equal(bind(e->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(e->lfd, 4), 0);
	assert_int_equal(getsockname(e->lfd, (struct sockaddr *)&sa, &len), 0);
	e->port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&e->thread, NULL, echo_main, e), 0);
}

/* PortForward: bytes both ways with a port of the pod; the caller's close reaches the pod, and
 * the pod's close ends the stream with "closed". */
static void test_agent_api_stream__port_forward_carries_bytes_both_ways(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__PortForwardInput in = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	Kiyot__Cell__V1__PortForwardInput more = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	struct afix_bidi *b = NULL;
	struct echo e;
	struct err err = ERR_INIT;
	char got[64] = "";
	size_t len = 0;
	bool closed = false;
	ProtobufCMessage *m;

	echo_start(&e);
	in.port = (uint32_t)e.port;
	in.data = (ProtobufCBinaryData){ 6, (uint8_t *)"hello " };
	assert_ok(afix_bidi_open(f, "PortForward", &in.base, &b, &err));
	more.data = (ProtobufCBinaryData){ 3, (uint8_t *)"pod" };
	assert_ok(afix_bidi_send(b, &more.base, &err));
	more.data = (ProtobufCBinaryData){ 0, NULL };
	more.close = 1;
	assert_ok(afix_bidi_send(b, &more.base, &err));
	while (!closed && (m = afix_bidi_next(b))) {
		Kiyot__Cell__V1__PortForwardOutput *o = (void *)m;
		size_t n = o->data.len < sizeof(got) - 1 - len ? o->data.len : 0;

		if (n)
			memcpy(got + len, o->data.data, n);
		len += n;
		closed = o->closed;
		protobuf_c_message_free_unpacked(m, NULL);
	}
	assert_true(closed);
	assert_string_equal(got, "HELLO POD");
	afix_bidi_close_send(b);
	assert_ok(afix_bidi_end(b, &err));
	pthread_join(e.thread, NULL);
	close(e.lfd);
}

/* PortForward's refusals: a port that is none, and one nobody listens on (UNAVAILABLE, so
 * the caller may try again). */
static void test_agent_api_stream__port_forward_refusals_have_their_codes(void **state)
{
	struct afix *f = *state;
	Kiyot__Cell__V1__PortForwardInput in = KIYOT__CELL__V1__PORT_FORWARD_INPUT__INIT;
	struct afix_bidi *b = NULL;
	struct err err = ERR_INIT;
	struct echo e;

	in.port = 0;
	assert_ok(afix_bidi_open(f, "PortForward", &in.base, &b, &err));
	assert_int_equal(afix_bidi_end(b, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not a TCP port"));
	/* a port just freed: nothing listens there */
	echo_start(&e);
	pthread_cancel(e.thread);
	pthread_join(e.thread, NULL);
	close(e.lfd);
	in.port = (uint32_t)e.port;
	assert_ok(afix_bidi_open(f, "PortForward", &in.base, &b, &err));
	assert_int_equal(rpc_status_from_errno(-afix_bidi_end(b, &err)),
			 rpc_status_from_errno(ECONNREFUSED));
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, afix_setup, afix_teardown)
		T(test_agent_api_stream__exec_pipes_input_output_and_exit_code),
		T(test_agent_api_stream__exec_with_a_terminal_of_the_callers_size),
		T(test_agent_api_stream__exec_refusals_have_their_codes),
		T(test_agent_api_stream__exec_caller_leaving_kills_the_command),
		T(test_agent_api_stream__attach_reaches_the_units_own_stdio),
		T(test_agent_api_stream__attach_ending_input_detaches_the_unit_runs_on),
		T(test_agent_api_stream__attach_refusals_have_their_codes),
		T(test_agent_api_stream__port_forward_carries_bytes_both_ways),
		T(test_agent_api_stream__port_forward_refusals_have_their_codes),
#undef T
	};
	int ret = afix_main(argc, argv);

	if (ret >= 0)
		return ret;
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
