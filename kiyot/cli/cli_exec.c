/*
 * cli_exec.c: kiyot exec and attach (see cli_stream.h). The CRI's Exec or Attach answers a
 * URL; its SPDY session carries Kubernetes' remotecommand v4 streams (error, stdin, stdout,
 * stderr, resize), joined here to this process's stdio from one poll loop: stdin is read
 * only while what it gave is below a bound, the command's output is written out in full
 * before more is read (the server then waits, as TCP holds it), and with -t the terminal is
 * raw and its size follows SIGWINCH. The exit status is the command's, from the Status on the
 * error stream.
 */
#include "cli_stream.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cri_api.pb-c.h"
#include "xalloc.h"

/* The error stream's text (a Status) is kept up to this. */
#define STATUS_MAX 65536

enum rc_chan {
	RC_STDIN,
	RC_STDOUT,
	RC_STDERR,
	RC_ERROR,
	RC_RESIZE,
	RC_NCHAN
};

static const char *const rc_names[RC_NCHAN] = { "stdin", "stdout", "stderr", "error", "resize" };

struct rc {
	struct cli_sconn sc;
	uint32_t sid[RC_NCHAN]; /* 0: not asked for */
	bool in, tty;
	bool stdin_done, over;
	char status[STATUS_MAX + 1];
	size_t status_len;
	bool out_failed; /* our stdout or stderr went away */
};

static void rc_event(void *arg, const struct spdy_event *ev)
{
	struct rc *r = arg;

	if (ev->type == SPDY_EV_GOAWAY) {
		r->over = true;
	} else if (ev->type == SPDY_EV_DATA && ev->stream_id == r->sid[RC_ERROR]) {
		size_t n = STATUS_MAX - r->status_len < ev->len ? STATUS_MAX - r->status_len
								: ev->len;

		memcpy(r->status + r->status_len, ev->data, n);
		r->status_len += n;
		r->status[r->status_len] = '\0';
	} else if (ev->type == SPDY_EV_DATA) {
		int fd = ev->stream_id == r->sid[RC_STDOUT]   ? STDOUT_FILENO
			 : ev->stream_id == r->sid[RC_STDERR] ? STDERR_FILENO
							      : -1;

		/* the terminal is written in full before more is read: the server waits */
		if (fd >= 0 && !r->out_failed && cli_write_full(fd, ev->data, ev->len) < 0)
			r->out_failed = true;
	}
}

/* The terminal in raw mode while a -t session runs, as kubectl sets it; restored after. */
static struct termios saved_tio;
static bool raw_on;

static void terminal_raw(void)
{
	struct termios t;

	if (tcgetattr(STDIN_FILENO, &saved_tio) < 0)
		return;
	t = saved_tio;
	cfmakeraw(&t);
	if (tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0)
		raw_on = true;
}

static void terminal_restore(void)
{
	if (raw_on)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
	raw_on = false;
}

/* The terminal's size on the resize stream, as {"Width":w,"Height":h}. */
static void send_size(struct rc *r)
{
	struct winsize ws = { 0 };
	struct err err = ERR_INIT;
	char json[64];
	int n;

	if ((ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_col) &&
	    ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) < 0)
		return;
	if (!ws.ws_col && !ws.ws_row)
		return; /* no size known: the remote terminal keeps its own, as with kubectl */
	n = snprintf(json, sizeof(json), "{\"Width\":%u,\"Height\":%u}", ws.ws_col, ws.ws_row);
	spdy_send(r->sc.sp, r->sid[RC_RESIZE], json, (size_t)n, false, &err);
}

/* Sends what stdin has (its end closes the stdin stream). */
static void rc_stdin(struct rc *r)
{
	uint8_t buf[CLI_IO_CHUNK];
	struct err err = ERR_INIT;
	ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));

	if (n > 0) {
		spdy_send(r->sc.sp, r->sid[RC_STDIN], buf, (size_t)n, false, &err);
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		spdy_send(r->sc.sp, r->sid[RC_STDIN], NULL, 0, true, &err);
		r->stdin_done = true;
	}
}

/* The session's loop, until the server ends it. Returns 0, or 128 + a signal that ended it,
 * or an error. */
static int rc_run(struct rc *r, struct err *err)
{
	while (!r->over) {
		bool more_in = r->in && !r->stdin_done && cli_sconn_pending(&r->sc) < CLI_SEND_MAX;
		struct pollfd p[3] = {
			{ r->sc.fd, (short)(POLLIN | (cli_sconn_pending(&r->sc) ? POLLOUT : 0)),
			  0 },
			{ more_in ? STDIN_FILENO : -1, POLLIN, 0 },
			{ cli_signal_fd(), POLLIN, 0 },
		};
		int sig, ret;

		if (poll(p, 3, -1) < 0 && errno != EINTR)
			return err_errno(err, "poll");
		while ((sig = cli_next_signal()))
			if (sig == SIGWINCH && r->tty)
				send_size(r);
			else if (sig != SIGWINCH)
				return 128 + sig;
		if (p[1].revents)
			rc_stdin(r);
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			ret = cli_sconn_read(&r->sc, rc_event, r, err);
			if (ret <= 0)
				return ret < 0 ? -err->code : 0;
		}
		if (cli_sconn_flush(&r->sc) < 0)
			return 0; /* the server is gone: its status tells the rest */
	}
	return 0;
}

/* The exit code the error stream's Status gives (remotecommand v4); 1, said on stderr, when
 * the command failed otherwise or no status came. */
static int rc_exit_code(const struct rc *r)
{
	json_t *st = r->status_len ? json_loadb(r->status, r->status_len, 0, NULL) : NULL;
	const char *status = json_string_value(json_object_get(st, "status"));
	const char *reason = json_string_value(json_object_get(st, "reason"));
	const char *msg = json_string_value(json_object_get(st, "message"));
	json_t *causes = json_object_get(json_object_get(st, "details"), "causes");
	int code = -1;
	size_t i;
	json_t *cause;

	if (status && strcmp(status, "Success") == 0)
		code = 0;
	else if (reason && strcmp(reason, "NonZeroExitCode") == 0)
		json_array_foreach (causes, i, cause) {
			const char *cr = json_string_value(json_object_get(cause, "reason"));
			const char *cm = json_string_value(json_object_get(cause, "message"));
			char *end = NULL;
			long v = cm ? strtol(cm, &end, 10) : -1;

			if (cr && strcmp(cr, "ExitCode") == 0 && end && !*end && v >= 0 && v <= 255)
				code = (int)v;
		}
	if (code < 0 && !r->status_len)
		cli_fail("the stream ended without the command's exit status");
	else if (code < 0)
		cli_fail("%s", msg ? msg : r->status);
	json_decref(st);
	return code < 0 ? 1 : code;
}

/* A remotecommand session on url: the streams the request asked for, stdin and the terminal
 * joined to them, until the server ends it. Returns the exit status. */
static int remotecommand(const char *url, bool in, bool tty)
{
	struct rc *r = xcalloc(1, sizeof(*r));
	struct err err = ERR_INIT;
	static const int sigs[] = { SIGWINCH, SIGINT, SIGTERM, SIGHUP, 0 };
	bool want[RC_NCHAN] = { in, true, !tty, true, tty };
	int ret;

	r->in = in;
	r->tty = tty;
	r->sc.fd = -1;
	ret = cli_catch_signals(sigs, &err);
	if (ret == 0)
		ret = cli_sconn_open(&r->sc, url, "v4.channel.k8s.io", 0, &err);
	/* the error stream first, as kubectl opens them */
	for (int i = 0; ret == 0 && i < RC_NCHAN; i++) {
		enum rc_chan ch = i == 0	  ? RC_ERROR
				  : i <= RC_ERROR ? (enum rc_chan)(i - 1)
						  : RC_RESIZE;
		const struct spdy_header h = { "streamtype", rc_names[ch], 0 };

		if (want[ch])
			ret = spdy_open(r->sc.sp, &h, 1, false, &r->sid[ch], &err);
	}
	if (ret == 0 && tty) {
		terminal_raw();
		send_size(r);
	}
	if (ret == 0)
		ret = rc_run(r, &err);
	terminal_restore();
	if (ret < 0)
		ret = cli_fail("%s", err.msg);
	else if (ret == 0)
		ret = rc_exit_code(r);
	cli_sconn_close(&r->sc);
	free(r);
	return ret;
}

/* The stream options of exec and attach; the first operand is in argv[optind]. */
struct rc_opts {
	bool in, tty;
	const char *container;
};

static int rc_options(int argc, char **argv, struct rc_opts *o, const char *usage)
{
	static const struct option opts[] = {
		{ "stdin", no_argument, NULL, 'i' },
		{ "tty", no_argument, NULL, 't' },
		{ "container", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	optind = 0;
	while ((opt = getopt_long(argc, argv, "itc:", opts, NULL)) != -1) {
		if (opt == 'i')
			o->in = true;
		else if (opt == 't')
			o->tty = true;
		else if (opt == 'c')
			o->container = optarg;
		else
			return cli_fail("%s", usage) + 1;
	}
	if (optind >= argc)
		return cli_fail("%s", usage) + 1;
	/* as kubectl: a terminal needs stdin, and stdin that is a terminal */
	if (o->tty && !o->in)
		o->tty = false;
	if (o->tty && !isatty(STDIN_FILENO)) {
		fputs("Unable to use a TTY - input is not a terminal or the right kind of file\n",
		      stderr);
		o->tty = false;
	}
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

#define EXEC_USAGE "usage: kiyot exec [-i] [-t] POD [-c CONTAINER] -- COMMAND [ARG...]"
#define ATTACH_USAGE "usage: kiyot attach [-i] [-t] POD [-c CONTAINER]"

/* The CRI's Exec (cmd given) or Attach (cmd NULL) for the container; *url is the caller's. */
static int ask_url(struct cli *c, const char *cid, const struct rc_opts *o, char **cmd,
		   size_t n_cmd, char **url, struct err *err)
{
	Runtime__V1__ExecRequest ereq = RUNTIME__V1__EXEC_REQUEST__INIT;
	Runtime__V1__AttachRequest areq = RUNTIME__V1__ATTACH_REQUEST__INIT;
	Runtime__V1__ExecResponse *eresp = NULL;
	Runtime__V1__AttachResponse *aresp = NULL;
	int ret;

	ereq.container_id = areq.container_id = (char *)cid;
	ereq.stdin = areq.stdin = o->in;
	ereq.tty = areq.tty = o->tty;
	ereq.stdout = areq.stdout = true;
	ereq.stderr = areq.stderr = !o->tty;
	ereq.cmd = cmd;
	ereq.n_cmd = n_cmd;
	ret = cmd ? cli_call(c, CLI_RT "Exec", &ereq.base, &runtime__v1__exec_response__descriptor,
			     &eresp, err)
		  : cli_call(c, CLI_RT "Attach", &areq.base,
			     &runtime__v1__attach_response__descriptor, &aresp, err);
	if (ret < 0)
		return ret;
	*url = xstrdup(cmd ? eresp->url : aresp->url);
	protobuf_c_message_free_unpacked(cmd ? &eresp->base : &aresp->base, NULL);
	return 0;
}

/* exec (with a command after POD) and attach (without). */
static int exec_or_attach(struct cli *c, int argc, char **argv, bool exec)
{
	const char *usage = exec ? EXEC_USAGE : ATTACH_USAGE;
	struct rc_opts o = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *cid = NULL, *url = NULL;
	int ret = rc_options(argc, argv, &o, usage);

	if (ret)
		return ret;
	if (exec ? optind + 1 >= argc : optind + 1 != argc)
		return cli_fail("%s", usage) + 1;
	if (cli_pick_container(c, argv[optind], o.container, &cid, &err) < 0)
		return cli_fail("%s", err.msg);
	if (ask_url(c, cid, &o, exec ? argv + optind + 1 : NULL, (size_t)(argc - optind - 1), &url,
		    &err) < 0)
		return cli_fail("%s pod %s: %s", exec ? "exec in" : "attach to", argv[optind],
				err.msg);
	return remotecommand(url, o.in, o.tty);
}

int cli_exec(struct cli *c, int argc, char **argv)
{
	return exec_or_attach(c, argc, argv, true);
}

int cli_attach(struct cli *c, int argc, char **argv)
{
	return exec_or_attach(c, argc, argv, false);
}
