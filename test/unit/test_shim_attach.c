/*
 * Unit tests for cell-agent/shim_attach: a shim's attach socket served by a loop thread as
 * the shim serves it (the unit's output comes from a pipe the test writes, its stdin is a
 * pipe the test reads), driven by the agent's side (attach_conn_*).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../cell-agent/shim_attach.h"
#include "fsutil.h"
#include "xalloc.h"

#define WAIT_MS 5000

/* A shim's attach socket with a thread serving it. */
struct fixture {
	char dir[64];
	int dirfd;
	struct shim_attach *a;
	int out[2];  /* the unit's output: the test writes [1] */
	int in[2];   /* the unit's stdin: the test reads [0] */
	int stop[2]; /* the loop ends (after shim_attach_finish) when written */
	int exit_code;
	pthread_t loop;
};

/* The shim's loop: output from the pipe to every caller, callers' input to stdin. */
static void *loop_thread(void *arg)
{
	struct fixture *f = arg;

	for (;;) {
		struct pollfd p[2 + SHIM_ATTACH_NPOLL];
		size_t n = shim_attach_poll(f->a, p + 2);

		p[0] = (struct pollfd){ f->out[0], POLLIN, 0 };
		p[1] = (struct pollfd){ f->stop[0], POLLIN, 0 };
		if (poll(p, n + 2, 100) < 0)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents) {
			char buf[4096];
			ssize_t r = read(f->out[0], buf, sizeof(buf));

			if (r > 0)
				shim_attach_output(f->a, ATTACH_PKT_STDOUT, buf, (size_t)r);
		}
		shim_attach_handle(f->a, p + 2, n);
	}
	shim_attach_finish(f->a, f->exit_code, 2000);
	return NULL;
}

static struct fixture *start(bool stdin, bool stdin_once)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	struct shim_attach_config cfg = { .tty = false, .stdin = stdin, .stdin_once = stdin_once };
	struct err err = ERR_INIT;

	snprintf(f->dir, sizeof(f->dir), "/tmp/shim-attach-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->dirfd = open(f->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(f->dirfd >= 0);
	assert_int_equal(pipe2(f->out, O_CLOEXEC), 0);
	assert_int_equal(pipe2(f->in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(f->stop, O_CLOEXEC), 0);
	if (shim_attach_new(f->dirfd, &cfg, stdin ? f->in[1] : -1, &f->a, &err) < 0)
		fail_msg("shim_attach_new: %s", err.msg);
	if (!stdin)
		close(f->in[1]);
	f->in[1] = -1; /* the shim holds it now */
	assert_int_equal(pthread_create(&f->loop, NULL, loop_thread, f), 0);
	return f;
}

/* Ends the loop (callers get EXIT code) and frees everything. */
static void stop(struct fixture *f, int code)
{
	struct err err = ERR_INIT;

	f->exit_code = code;
	assert_int_equal(write(f->stop[1], "x", 1), 1);
	pthread_join(f->loop, NULL);
	shim_attach_free(f->a);
	close(f->out[0]);
	close(f->out[1]);
	close(f->in[0]);
	close(f->stop[0]);
	close(f->stop[1]);
	close(f->dirfd);
	fs_remove_tree(f->dir, &err);
	free(f);
}

static void attach(struct fixture *f, bool want_stdin, struct attach_conn *c)
{
	struct err err = ERR_INIT;

	if (attach_conn_open(f->dir, want_stdin, WAIT_MS, c, &err) < 0)
		fail_msg("attach: %s", err.msg);
}

/* The next packet of c within WAIT_MS: its type (0 at the end) and payload in buf. */
static uint8_t next(struct attach_conn *c, char *buf, size_t cap, size_t *len)
{
	struct pollfd p = { c->fd, POLLIN, 0 };
	uint8_t type = 0;
	ssize_t n;

	if (poll(&p, 1, WAIT_MS) != 1)
		fail_msg("no packet from the shim within %d ms", WAIT_MS);
	n = attach_conn_recv(c, &type, (uint8_t *)buf, cap - 1);
	assert_true(n >= 0);
	buf[n] = '\0';
	if (len)
		*len = (size_t)n;
	return type;
}

/* Reads the unit's stdin until want bytes came or it ended; returns what came. */
static char *unit_stdin(struct fixture *f, size_t want, bool *eof)
{
	char *buf = xcalloc(1, want + 1);
	size_t got = 0;

	*eof = false;
	while (got < want) {
		struct pollfd p = { f->in[0], POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, WAIT_MS) != 1)
			fail_msg("the unit's stdin got %zu of %zu bytes", got, want);
		n = read(f->in[0], buf + got, want - got);
		if (n <= 0) {
			*eof = true;
			break;
		}
		got += (size_t)n;
	}
	return buf;
}

/* True when the unit's stdin reaches EOF within ms. */
static bool stdin_ends_within(struct fixture *f, int ms)
{
	struct pollfd p = { f->in[0], POLLIN, 0 };
	char c;

	return poll(&p, 1, ms) == 1 && read(f->in[0], &c, 1) == 0;
}

/* Every caller gets the same output, and EXIT with the code at the end. */
static void test_shim_attach__every_caller_gets_the_output_and_the_exit(void **state)
{
	struct fixture *f = start(false, false);
	struct attach_conn a, b;
	char buf[128];
	int32_t code = 0;
	size_t len = 0;

	(void)state;
	attach(f, false, &a);
	attach(f, false, &b);
	assert_false(a.tty);
	assert_false(a.has_stdin);
	assert_false(a.stdin_open);
	assert_int_equal(write(f->out[1], "hello\n", 6), 6);
	assert_int_equal(next(&a, buf, sizeof(buf), NULL), ATTACH_PKT_STDOUT);
	assert_string_equal(buf, "hello\n");
	assert_int_equal(next(&b, buf, sizeof(buf), NULL), ATTACH_PKT_STDOUT);
	assert_string_equal(buf, "hello\n");
	stop(f, 3);
	assert_int_equal(next(&a, buf, sizeof(buf), &len), ATTACH_PKT_EXIT);
	assert_int_equal(len, sizeof(code));
	memcpy(&code, buf, sizeof(code));
	assert_int_equal(code, 3);
	assert_int_equal(next(&a, buf, sizeof(buf), NULL), 0);
	assert_int_equal(next(&b, buf, sizeof(buf), NULL), ATTACH_PKT_EXIT);
	attach_conn_close(&a);
	attach_conn_close(&b);
}

/* Asking for input from a unit created without stdin is refused, saying so. */
static void test_shim_attach__stdin_of_a_unit_without_it_is_refused(void **state)
{
	struct fixture *f = start(false, false);
	struct attach_conn c;
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(attach_conn_open(f->dir, true, WAIT_MS, &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not created with stdin"));
	assert_int_equal(c.fd, -1);
	stop(f, 0);
	/* no shim: the unit is not running */
	err_clear(&err);
	mkdir("/tmp/shim-attach-none", 0700);
	assert_int_equal(attach_conn_open("/tmp/shim-attach-none", false, WAIT_MS, &c, &err),
			 -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "not running"));
	rmdir("/tmp/shim-attach-none");
}

/* stdin_once: the first caller's end of input closes the unit's stdin for good; it still gets
 * the output, and later callers attach without input. */
static void test_shim_attach__stdin_once_closes_the_units_stdin(void **state)
{
	struct fixture *f = start(true, true);
	struct attach_conn a, b;
	_cleanup_free_ char *got = NULL;
	char buf[128];
	bool eof;

	(void)state;
	attach(f, true, &a);
	assert_true(a.has_stdin);
	assert_true(a.stdin_open);
	assert_int_equal(attach_conn_stdin(&a, (const uint8_t *)"abc\n", 4), 0);
	got = unit_stdin(f, 4, &eof);
	assert_string_equal(got, "abc\n");
	assert_int_equal(attach_conn_stdin_close(&a), 0);
	assert_true(stdin_ends_within(f, WAIT_MS));
	assert_int_equal(write(f->out[1], "still\n", 6), 6);
	assert_int_equal(next(&a, buf, sizeof(buf), NULL), ATTACH_PKT_STDOUT);
	assert_string_equal(buf, "still\n");
	attach(f, true, &b);
	assert_true(b.has_stdin);
	assert_false(b.stdin_open);
	attach_conn_close(&a);
	attach_conn_close(&b);
	stop(f, 0);
}

/* stdin_once: a caller with input that goes away closes the unit's stdin too. */
static void test_shim_attach__stdin_once_caller_leaving_closes_stdin(void **state)
{
	struct fixture *f = start(true, true);
	struct attach_conn a, watcher;

	(void)state;
	attach(f, false, &watcher);
	assert_false(stdin_ends_within(f, 200)); /* a caller without input changes nothing */
	attach_conn_close(&watcher);
	attach(f, true, &a);
	attach_conn_close(&a);
	assert_true(stdin_ends_within(f, WAIT_MS));
	stop(f, 0);
}

/* Without stdin_once, the end of a caller's input lets that caller go (the unit's stdin stays
 * open for the next one), and a caller leaving changes nothing. */
static void test_shim_attach__input_end_without_stdin_once_detaches(void **state)
{
	struct fixture *f = start(true, false);
	struct attach_conn a, b;
	_cleanup_free_ char *got = NULL;
	char buf[128];
	bool eof;

	(void)state;
	attach(f, true, &a);
	assert_int_equal(attach_conn_stdin(&a, (const uint8_t *)"one\n", 4), 0);
	assert_int_equal(attach_conn_stdin_close(&a), 0);
	assert_int_equal(next(&a, buf, sizeof(buf), NULL), 0);
	attach_conn_close(&a);
	got = unit_stdin(f, 4, &eof);
	assert_string_equal(got, "one\n");
	assert_false(stdin_ends_within(f, 200));
	attach(f, true, &b);
	assert_true(b.stdin_open);
	attach_conn_close(&b);
	assert_false(stdin_ends_within(f, 200));
	stop(f, 0);
}

struct flood {
	struct attach_conn *c;
	size_t len;
	int ret;
};

static void *flood_thread(void *arg)
{
	struct flood *fl = arg;
	uint8_t *data = xmalloc(fl->len);

	memset(data, 'y', fl->len);
	fl->ret = attach_conn_stdin(fl->c, data, fl->len);
	free(data);
	return NULL;
}

/* Input the unit does not read waits in its caller's socket, bounded; a new caller still
 * attaches meanwhile, and all of the input arrives once the unit reads. */
static void test_shim_attach__a_unit_not_reading_stdin_holds_only_its_sender(void **state)
{
	struct fixture *f = start(true, false);
	struct flood fl = { NULL, 2 << 20, -1 };
	struct attach_conn a, b;
	pthread_t t;
	size_t got = 0;
	char buf[65536];

	(void)state;
	attach(f, true, &a);
	fl.c = &a;
	assert_int_equal(pthread_create(&t, NULL, flood_thread, &fl), 0);
	usleep(300000); /* the pipe, the shim's queue and the socket fill up */
	attach(f, true, &b);
	assert_true(b.stdin_open);
	attach_conn_close(&b);
	while (got < fl.len) {
		struct pollfd p = { f->in[0], POLLIN, 0 };
		ssize_t n;

		if (poll(&p, 1, WAIT_MS) != 1)
			fail_msg("the unit's stdin got %zu of %zu bytes", got, fl.len);
		n = read(f->in[0], buf, sizeof(buf));
		assert_true(n > 0);
		got += (size_t)n;
	}
	pthread_join(t, NULL);
	assert_int_equal(fl.ret, 0);
	assert_int_equal(got, fl.len);
	attach_conn_close(&a);
	stop(f, 0);
}

/* A caller that reads nothing holds the unit's output once its queue is full, and is let go
 * after SHIM_ATTACH_STALL_MS; one that reads frees the output again. */
static void test_shim_attach__a_full_caller_holds_output_then_is_let_go(void **state)
{
	char dir[] = "/tmp/shim-attach-XXXXXX";
	struct shim_attach_config cfg = { 0 };
	struct shim_attach *a = NULL;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct err err = ERR_INIT;
	char chunk[SHIM_ATTACH_CHUNK], buf[64];
	struct pollfd p[SHIM_ATTACH_NPOLL];
	int dirfd, c;
	int64_t t0 = 1000000000;
	size_t n;

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	assert_non_null(mkdtemp(dir));
	dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(shim_attach_new(dirfd, &cfg, -1, &a, &err), 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, SHIM_ATTACH_SOCK);
	c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(c, "\x01\x00", 2, 0), 2);
	/* accept, then read its OPEN */
	for (int i = 0; i < 2; i++) {
		n = shim_attach_poll(a, p);
		assert_true(poll(p, n, 1000) > 0);
		shim_attach_handle(a, p, n);
	}
	assert_int_equal(shim_attach_callers(a), 1);
	assert_true(shim_attach_output_room(a, t0));
	for (int i = 0; i < 2 * SHIM_ATTACH_QUEUE_MAX / SHIM_ATTACH_CHUNK; i++)
		shim_attach_output(a, ATTACH_PKT_STDOUT, chunk, sizeof(chunk));
	assert_false(shim_attach_output_room(a, t0));
	assert_false(shim_attach_output_room(a, t0 + (SHIM_ATTACH_STALL_MS - 1) * 1000000LL));
	assert_int_equal(shim_attach_callers(a), 1);
	assert_true(shim_attach_output_room(a, t0 + (SHIM_ATTACH_STALL_MS + 1) * 1000000LL));
	assert_int_equal(shim_attach_callers(a), 0);
	/* the caller sees its HELLO, what fitted in its socket, then the end */
	assert_true(recv(c, buf, sizeof(buf), 0) == 2 && buf[0] == ATTACH_PKT_HELLO);
	for (;;) {
		ssize_t r = recv(c, chunk, sizeof(chunk), 0);

		if (r <= 0)
			break;
	}
	close(c);
	shim_attach_free(a);
	close(dirfd);
	fs_remove_tree(dir, &err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shim_attach__every_caller_gets_the_output_and_the_exit),
		cmocka_unit_test(test_shim_attach__stdin_of_a_unit_without_it_is_refused),
		cmocka_unit_test(test_shim_attach__stdin_once_closes_the_units_stdin),
		cmocka_unit_test(test_shim_attach__stdin_once_caller_leaving_closes_stdin),
		cmocka_unit_test(test_shim_attach__input_end_without_stdin_once_detaches),
		cmocka_unit_test(test_shim_attach__a_unit_not_reading_stdin_holds_only_its_sender),
		cmocka_unit_test(test_shim_attach__a_full_caller_holds_output_then_is_let_go),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
