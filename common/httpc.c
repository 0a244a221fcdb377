/*
 * httpc.c: the shared shape of a libcurl exchange (see httpc.h).
 */
#include "httpc.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>

#include "cancel.h"
#include "clock.h"

/* How often a watched exchange asks whether its caller went away. */
#define HTTPC_CANCEL_POLL_NS (100 * 1000000LL)

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void httpc_global_init(void)
{
	pthread_once(&global_once, global_init);
}

/* Keeps a body in the bounded buffer: past the bound the transfer is cut, unless the body only
 * serves messages (another status than the sink's), which is then cut short silently. */
static size_t keep_body(struct httpc_answer *a, const char *p, size_t n)
{
	struct err e = ERR_INIT;

	if (buf_append(&a->body, p, n, &e) == 0)
		return n;
	if (a->sink) {
		size_t room = a->body.max > a->body.len ? a->body.max - a->body.len : 0;

		buf_append(&a->body, p, room, &e);
		return n;
	}
	a->overflow = true;
	return 0;
}

/* Receives body bytes: the sink's status to the sink, the rest into the answer. */
static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct httpc_answer *a = ud;
	long status = 0;
	int ret;

	n *= size;
	if (!a->sink)
		return keep_body(a, p, n);
	curl_easy_getinfo(a->h, CURLINFO_RESPONSE_CODE, &status);
	if (status != a->sink->status)
		return keep_body(a, p, n);
	ret = a->sink->write(a->sink->ud, p, n);
	if (ret < 0) {
		a->sink_err = -ret;
		return 0;
	}
	return n;
}

/* Stops the exchange for why; returns libcurl's "abort". */
static int watch_stop(struct httpc_watch *w, enum httpc_stop why, uint64_t got)
{
	w->stop = why;
	w->got = got;
	return 1;
}

/* libcurl's progress callback: the caller gone, the deadline passed, or too little over the
 * window stop the exchange. */
static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct httpc_watch *w = ud;
	int64_t now = clock_mono_ns();
	uint64_t got = dlnow > 0 ? (uint64_t)dlnow : 0;

	(void)dltotal;
	(void)ultotal;
	(void)ulnow;
	if (now >= w->next_cancel_ns) {
		w->next_cancel_ns = now + HTTPC_CANCEL_POLL_NS;
		if (cancel_requested())
			return watch_stop(w, HTTPC_CANCELLED, got);
	}
	if (w->deadline_ns && now > w->deadline_ns)
		return watch_stop(w, HTTPC_LATE, got);
	if (w->step_ns && now >= w->next_mark_ns) {
		uint64_t *oldest = &w->marks[w->n_marks % HTTPC_WATCH_STEPS];

		/* the mark HTTPC_WATCH_STEPS steps back was taken one window ago */
		if (w->n_marks >= HTTPC_WATCH_STEPS && got - *oldest < w->min_bytes) {
			w->window_got = got - *oldest;
			return watch_stop(w, HTTPC_STALLED, got);
		}
		*oldest = got;
		w->n_marks++;
		w->next_mark_ns += w->step_ns;
		if (w->next_mark_ns <= now)
			w->next_mark_ns = now + w->step_ns;
	}
	return 0;
}

/* Arms w from now and lets it watch the exchange h is set up for. */
static void watch_attach(CURL *h, struct httpc_watch *w)
{
	int64_t now = clock_mono_ns();

	w->stop = HTTPC_GOING;
	w->got = w->window_got = 0;
	w->next_cancel_ns = now;
	w->step_ns = 0;
	w->n_marks = 0;
	memset(w->marks, 0, sizeof(w->marks));
	if (w->window_s > 0) {
		w->step_ns = (int64_t)w->window_s * 1000000000LL / HTTPC_WATCH_STEPS;
		w->next_mark_ns = now + w->step_ns;
		w->n_marks = 1; /* nothing received at the start */
	}
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
}

/* libcurl's socket opener: the guard sees the address first, and a refused one gets no
 * socket (libcurl then tries the name's next address, or fails CURLE_COULDNT_CONNECT). */
static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *sa)
{
	struct httpc_answer *a = ud;
	int fd;

	if (purpose != CURLSOCKTYPE_IPCXN ||
	    a->guard->check(a->guard->ud, a->h, &sa->addr, (socklen_t)sa->addrlen) < 0) {
		a->refused = true;
		return CURL_SOCKET_BAD;
	}
	fd = socket(sa->family, sa->socktype | SOCK_CLOEXEC, sa->protocol);
	return fd < 0 ? CURL_SOCKET_BAD : fd;
}

/* The options of req that are not always there. */
static void prepare_options(CURL *h, const struct httpc_req *req, struct httpc_answer *a)
{
	if (req->max_redirects > 0) {
		curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
		curl_easy_setopt(h, CURLOPT_MAXREDIRS, req->max_redirects);
	}
	if (req->user_agent)
		curl_easy_setopt(h, CURLOPT_USERAGENT, req->user_agent);
	if (req->user) {
		curl_easy_setopt(h, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
		curl_easy_setopt(h, CURLOPT_USERNAME, req->user);
		curl_easy_setopt(h, CURLOPT_PASSWORD, req->password ? req->password : "");
	}
	if (req->watch)
		watch_attach(h, req->watch);
	if (req->guard) {
		curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
		curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, a);
	}
}

void httpc_prepare(CURL *h, const struct httpc_req *req, struct httpc_answer *a)
{
	httpc_global_init();
	a->status = 0;
	a->overflow = false;
	a->sink_err = 0;
	a->refused = false;
	a->rc = CURLE_OK;
	a->error[0] = '\0';
	a->h = h;
	a->sink = req->sink;
	a->watch = req->watch;
	a->guard = req->guard;
	buf_init(&a->body, req->max_answer);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (req->method && strcmp(req->method, "GET") != 0)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
	if (req->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)req->body_len);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
	}
	if (req->headers)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, req->headers);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->error);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, req->connect_timeout_ms);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	prepare_options(h, req, a);
}

CURLcode httpc_exchange(CURL *h, struct httpc_answer *a)
{
	a->rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &a->status);
	/* the handle may outlive the answer (a client's kept connection): it must not write there */
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	return a->rc;
}

/* Words why a's watch stopped the exchange. */
static int watch_error(const struct httpc_watch *w, const char *what, struct err *err)
{
	if (w->stop == HTTPC_CANCELLED)
		return err_set(err, ECANCELED, "%s: cancelled: the caller went away", what);
	if (w->stop == HTTPC_LATE)
		return err_set(err, ETIMEDOUT, "%s: not done by its deadline; %llu bytes came",
			       what, (unsigned long long)w->got);
	return err_set(err, ETIMEDOUT,
		       "%s: stalled: %llu bytes in the last %d s, under the %llu "
		       "required",
		       what, (unsigned long long)w->window_got, w->window_s,
		       (unsigned long long)w->min_bytes);
}

int httpc_perform(CURL *h, struct httpc_answer *a, const char *what, struct err *err)
{
	CURLcode rc = httpc_exchange(h, a);

	if (a->watch && a->watch->stop != HTTPC_GOING)
		return watch_error(a->watch, what, err);
	if (a->overflow)
		return err_set(err, EFBIG, "%s: the answer exceeds %zu bytes", what, a->body.max);
	if (a->sink_err)
		return err_set(err, a->sink_err, "%s: %s", what, strerror(a->sink_err));
	if (rc != CURLE_OK && a->refused)
		return err_set(err, EPERM, "%s: the guard refused a connection", what);
	if (rc != CURLE_OK)
		return err_set(err, EIO, "%s: %s", what, curl_easy_strerror(rc));
	return 0;
}

void httpc_answer_release(struct httpc_answer *a)
{
	buf_release(&a->body);
}

const char *httpc_header(CURL *h, const char *name)
{
	struct curl_header *hd = NULL;

	if (curl_easy_header(h, name, 0, CURLH_HEADER, -1, &hd) != CURLHE_OK)
		return NULL;
	return hd->value;
}

const char *httpc_reason(const struct httpc_answer *a)
{
	return a->error[0] ? a->error : curl_easy_strerror(a->rc);
}

int httpc_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_TOO_MANY_REDIRECTS:
		return ELOOP;
	case CURLE_COULDNT_CONNECT:
		return ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return EHOSTUNREACH;
	default:
		return ENETUNREACH;
	}
}
