/*
 * httpc.h: one HTTP exchange on a libcurl handle, made the way every client of the daemons
 * needs it (EC2's Query API, the API server, the instance metadata service, registries):
 * protocols limited to http and https, no signals, connect and total timeouts, an answer
 * bounded in size, and libcurl's global state set up once for the process. What is a client's
 * own (TLS material, SigV4 signing, a connection share) it sets on the handle between
 * httpc_prepare and httpc_perform.
 *
 *	struct httpc_answer a;
 *	httpc_prepare(h, &req, &a);               resets h (its connections stay) and sets req
 *	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, ...);
 *	ret = httpc_perform(h, &a, "ec2 https://...", err);
 *	... a.status, buf_str(&a.body) ...
 *	httpc_answer_release(&a);
 *
 * A large body (a registry blob) goes to a sink as it arrives instead of into the answer, a
 * watch stops an exchange that moves too little, passes its deadline or whose caller went
 * away (cancel.h), and a guard vets every address the exchange connects to, redirects
 * included, before a packet leaves (a registry must not send a pull to the node itself). Retrying is the caller's: what changes between attempts (credentials, a
 * token, the next endpoint, a backoff) is its protocol's.
 */
#ifndef KIYOT_HTTPC_H
#define KIYOT_HTTPC_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "err.h"

/* How many marks a watch keeps over its window: progress is judged every window / steps. */
#define HTTPC_WATCH_STEPS 10

/* Why a watch stopped an exchange. */
enum httpc_stop {
	HTTPC_GOING = 0,
	HTTPC_CANCELLED, /* the caller went away (cancel_requested) */
	HTTPC_LATE,	 /* deadline_ns passed */
	HTTPC_STALLED,	 /* fewer than min_bytes over the last window_s seconds */
};

/* Watches one exchange from libcurl's progress callback (at least once a second). The caller
 * sets the first three fields; httpc_prepare arms it and the exchange fills the rest. */
struct httpc_watch {
	int64_t deadline_ns; /* clock_mono_ns by which the exchange must end; 0: none */
	uint64_t min_bytes;  /* the least that must arrive over any window_s seconds */
	int window_s;	     /* 0: no progress check */
	enum httpc_stop stop;
	uint64_t got;	     /* body bytes received when it stopped */
	uint64_t window_got; /* HTTPC_STALLED: what arrived over the last window */
	/* private */
	int64_t next_cancel_ns;
	int64_t step_ns;
	int64_t next_mark_ns;
	uint64_t marks[HTTPC_WATCH_STEPS];
	size_t n_marks;
};

/* Takes the body of an answer with the given status as it arrives, in place of the answer's
 * buffer. write returns 0, or a negative errno that stops the exchange (the answer keeps it in
 * sink_err). Bodies of answers with another status go to the answer's buffer as usual, up to
 * max_answer, the rest dropped without failing (they only serve messages). */
struct httpc_sink {
	long status;
	int (*write)(void *ud, const void *p, size_t n);
	void *ud;
};

/* Vets each address an exchange is about to connect to, on every hop (the first and each
 * redirect's), before any packet is sent there: check returns 0 to connect, or a negative errno
 * to refuse, and the exchange then fails with CURLE_COULDNT_CONNECT and answer.refused set (the
 * guard keeps what it refused and why, for the caller's error). h is the exchange's handle
 * (CURLINFO_REDIRECT_COUNT tells a redirect's hop from the first). Runs on the caller's
 * thread. A connection kept from an earlier exchange of the handle was vetted when made. */
struct httpc_guard {
	int (*check)(void *ud, CURL *h, const struct sockaddr *sa, socklen_t len);
	void *ud;
};

struct httpc_req {
	const char *method; /* NULL or "GET"; else sent as the request method */
	const char *url;
	struct curl_slist *headers; /* borrowed until httpc_perform returns; may be NULL */
	const char *body;	    /* NULL: none; "" with a method: an empty body; a body
				     * without a method is POSTed */
	size_t body_len;
	size_t max_answer; /* the largest answer body accepted, in bytes (required) */
	long connect_timeout_ms;
	long timeout_ms; /* the whole exchange; 0: none (a watch may bound it instead) */
	/* optional */
	long max_redirects;	/* redirects followed, http and https only (more fails
				     * with CURLE_TOO_MANY_REDIRECTS); 0: none */
	const char *user_agent; /* NULL: no User-Agent */
	const char *user;	/* with password: HTTP Basic credentials; NULL: none */
	const char *password;
	const struct httpc_sink *sink;	 /* borrowed until httpc_perform returns */
	struct httpc_watch *watch;	 /* armed by httpc_prepare; stays the caller's */
	const struct httpc_guard *guard; /* borrowed until httpc_perform returns */
};

struct httpc_answer {
	long status; /* the HTTP status, 0 when none came */
	struct buf body;
	bool overflow; /* the body outgrew max_answer (the transfer was cut) */
	int sink_err;  /* what the sink's write returned to stop the exchange; 0: none */
	bool refused;  /* the guard refused a connection (the exchange failed or went elsewhere) */
	CURLcode rc;   /* what libcurl said of the exchange */
	char error[CURL_ERROR_SIZE]; /* libcurl's detailed reason of a failure; "" if none */
	/* private */
	CURL *h;
	const struct httpc_sink *sink;
	const struct httpc_watch *watch;
	const struct httpc_guard *guard;
};

/* libcurl's global state, once per process; httpc_prepare calls it too. Thread safe. */
void httpc_global_init(void);
/* Resets h to req (the handle's connection cache and TLS sessions stay) with a as its sink; a
 * must stay in place until the exchange ends. Arms req->watch from now. */
void httpc_prepare(CURL *h, const struct httpc_req *req, struct httpc_answer *a);
/* Runs the exchange: a->rc, a->status and the rest are set; returns a->rc. For callers that
 * word their own errors (httpc_perform words them generically). */
CURLcode httpc_exchange(CURL *h, struct httpc_answer *a);
/* Runs the exchange. 0 when an HTTP answer came, whatever its status; -EPERM ("<what>: the
 * guard refused a connection"; the guard's own record says where) when the guard refused
 * one; -EFBIG ("<what>: the
 * answer exceeds N bytes") when the body outgrew max_answer, the sink's errno ("<what>: <its
 * strerror>") when the sink stopped it, -ECANCELED or -ETIMEDOUT when the watch did, -EIO
 * ("<what>: <curl's reason>") when the exchange failed (no connection, timeout, TLS). The
 * body is kept on failure too. */
int httpc_perform(CURL *h, struct httpc_answer *a, const char *what, struct err *err);
void httpc_answer_release(struct httpc_answer *a);

/* The value (trimmed) of the first header `name` (case-insensitive) of the last answer of the
 * exchange on h, after its redirects; NULL when it had none. Valid until h's next exchange. */
const char *httpc_header(CURL *h, const char *name);
/* libcurl's reason for a's failure: its detailed message, else the code's. */
const char *httpc_reason(const struct httpc_answer *a);
/* The errno that stands for a failed exchange: ELOOP for too many redirects (the server's
 * doing, not the network's), ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH (a name that does not
 * resolve), else ENETUNREACH. */
int httpc_errno(CURLcode rc);

#endif
