/*
 * Unit tests for cell-agent/imds: the IMDSv2 client against a metadata service on 127.0.0.1
 * that enforces IMDSv2 (a token only from PUT with its TTL header, 401 without a valid one,
 * 404 for paths it has nothing at) and can forget its tokens, answer slowly, too much, or with
 * server errors; the retry's backoff (the client's clock and sleep are the test's, so nothing
 * here depends on timing); the cell's bootstrap from the user-data and its cache file.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "imds.h"
#include "../fixtures/ec2/httpstub.h"
#include "fsutil.h"
#include "xalloc.h"
#include "testutil.h"

#define BOOT_DOC                                                                                   \
	"{\"version\":1,\"cell_id\":\"c-1\",\"pod\":{\"uid\":\"u\",\"name\":\"web\","              \
	"\"namespace\":\"default\"},\"enroll_secret\":\"s3cr3t\"}"

/* The fake service's state: its current token, what it serves, what it saw. */
struct svc {
	int token_gen;	   /* tokens are "tok-<gen>"; a bump forgets the older ones */
	int puts;	   /* tokens handed out */
	int refused;	   /* requests answered 401 */
	int fail_gets;	   /* the next this many GETs answer 503 */
	int always_401;	   /* every GET answers 401 */
	int slow_ms;	   /* every GET waits this long first */
	char last_ttl[32]; /* the TTL header of the last PUT */
	const char *user_data;
	char token[32];
};

static char big[(IMDS_USER_DATA_MAX) + 100];

static void handler(struct stub *s, const struct stub_request *rq, struct stub_reply *out)
{
	struct svc *m = s->ctx;
	char v[128];

	out->status = 404;
	out->body = "";
	snprintf(m->token, sizeof(m->token), "tok-%d", m->token_gen);
	if (strcmp(rq->path, "/latest/api/token") == 0) {
		if (strcmp(rq->method, "PUT") != 0) {
			out->status = 405;
		} else if (!stub_header(rq->headers, "X-aws-ec2-metadata-token-ttl-seconds",
					m->last_ttl, sizeof(m->last_ttl))) {
			out->status = 400;
		} else {
			m->puts++;
			out->status = 200;
			out->body = m->token;
		}
		return;
	}
	if (strcmp(rq->method, "GET") != 0) {
		out->status = 405;
		return;
	}
	if (m->always_401 || !stub_header(rq->headers, "X-aws-ec2-metadata-token", v, sizeof(v)) ||
	    strcmp(v, m->token) != 0) {
		m->refused++;
		out->status = 401;
		return;
	}
	if (m->slow_ms)
		usleep((useconds_t)m->slow_ms * 1000);
	if (m->fail_gets > 0) {
		m->fail_gets--;
		out->status = 503;
		return;
	}
	if (strcmp(rq->path, "/latest/user-data") == 0 && m->user_data) {
		out->status = 200;
		out->body = m->user_data;
	} else if (strcmp(rq->path, "/latest/meta-data/instance-id") == 0) {
		out->status = 200;
		out->body = "i-0123456789abcdef0";
	}
}

/* The test's clock and sleep: the sleeps are recorded, and advance the clock. */
struct fake_time {
	int64_t now_ns;
	int64_t slept[64];
	int n_slept;
};

static int64_t fake_now(void *ud)
{
	return ((struct fake_time *)ud)->now_ns;
}

static void fake_sleep(void *ud, int64_t ms)
{
	struct fake_time *t = ud;

	if (t->n_slept < 64)
		t->slept[t->n_slept++] = ms;
	t->now_ns += ms * 1000000;
}

struct fx {
	struct svc m;
	struct stub s;
	struct fake_time t;
	char ep[64];
	struct imds_config cfg;
	struct imds_client *c;
	char dir[64];
};

static int fx_setup(void **state)
{
	struct fx *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	f->m.user_data = BOOT_DOC;
	f->s.handler = handler;
	f->s.ctx = &f->m;
	assert_int_equal(stub_start(&f->s), 0);
	snprintf(f->ep, sizeof(f->ep), "http://127.0.0.1:%d/", f->s.port);
	f->cfg = (struct imds_config){ .endpoint = f->ep,
				       .timeout_ms = 300,
				       .token_ttl_s = 600,
				       .now_ns = fake_now,
				       .sleep_ms = fake_sleep,
				       .ud = &f->t };
	f->t.now_ns = 1000000000;
	assert_ok(imds_client_new(&f->cfg, &f->c, &err));
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_imds.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;

	imds_client_free(f->c);
	stub_stop(&f->s);
	stub_release(&f->s);
	fs_remove_tree(f->dir, &err);
	free(f);
	return 0;
}

/* The user-data comes with a token from a PUT that asked for the configured lifetime. */
static void test_imds__user_data_with_a_session_token(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	char *body = NULL;
	size_t len = 0;
	char where[64];

	assert_ok(imds_get(f->c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, &body, &len, &err));
	assert_string_equal(body, BOOT_DOC);
	assert_int_equal(len, strlen(BOOT_DOC));
	free(body);
	assert_int_equal(stub_count(&f->s), 2);
	assert_string_equal(f->s.reqs[0].method, "PUT");
	assert_string_equal(f->s.reqs[0].path, "/latest/api/token");
	assert_string_equal(f->m.last_ttl, "600");
	assert_string_equal(f->s.reqs[1].method, "GET");
	assert_string_equal(f->s.reqs[1].path, "/latest/user-data");
	assert_int_equal(f->m.refused, 0);
	snprintf(where, sizeof(where), "127.0.0.1:%d", f->s.port);
	assert_string_equal(imds_client_where(f->c), where);
}

/* 404 is "nothing there" (no interruption notice), told apart from every failure. */
static void test_imds__missing_path_is_enoent(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	char *body = NULL;
	size_t len = 0;

	assert_int_equal(imds_get(f->c, "/latest/meta-data/spot/instance-action", 4096, &body, &len,
				  &err),
			 -ENOENT);
	assert_null(body);
	assert_non_null(strstr(err.msg, "nothing at /latest/meta-data/spot/instance-action"));
	/* and imds_get_retry does not retry it */
	assert_int_equal(imds_get_retry(f->c, "/latest/meta-data/events/recommendations/rebalance",
					4096, NULL, &body, &len, &err),
			 -ENOENT);
	assert_int_equal(f->t.n_slept, 0);
}

/* One token serves many requests; it is renewed before its lifetime ends. */
static void test_imds__token_reused_then_renewed_before_expiry(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	char *body = NULL;
	size_t len = 0;

	for (int i = 0; i < 3; i++) {
		assert_ok(imds_get(f->c, "/latest/meta-data/instance-id", 64, &body, &len, &err));
		free(body);
	}
	assert_int_equal(f->m.puts, 1);
	/* 9/10 of the 600 s asked for: a new token before the service would drop the old */
	f->t.now_ns += 540LL * 1000000000;
	f->m.token_gen++;
	assert_ok(imds_get(f->c, "/latest/meta-data/instance-id", 64, &body, &len, &err));
	free(body);
	assert_int_equal(f->m.puts, 2);
	assert_int_equal(f->m.refused, 0);
}

/* A service that forgot the token (401) gets one new token request, then the GET again. */
static void test_imds__unauthorized_fetches_a_new_token_once(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	char *body = NULL;
	size_t len = 0;

	assert_ok(imds_get(f->c, "/latest/meta-data/instance-id", 64, &body, &len, &err));
	free(body);
	f->m.token_gen++; /* the service restarted */
	assert_ok(imds_get(f->c, "/latest/meta-data/instance-id", 64, &body, &len, &err));
	assert_string_equal(body, "i-0123456789abcdef0");
	free(body);
	assert_int_equal(f->m.refused, 1);
	assert_int_equal(f->m.puts, 2);

	/* a service that refuses every token: -EACCES after one new token, not a loop */
	f->m.always_401 = 1;
	assert_int_equal(imds_get_retry(f->c, "/latest/meta-data/instance-id", 64, NULL, &body,
					&len, &err),
			 -EACCES);
	assert_int_equal(f->m.puts, 3);
	assert_int_equal(f->t.n_slept, 0);
}

/* An answer longer than the bound fails at once with -EFBIG; it is not retried. */
static void test_imds__oversized_answer_refused(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	char *body = NULL;
	size_t len = 0;

	memset(big, 'a', sizeof(big) - 1);
	f->m.user_data = big;
	assert_int_equal(imds_get_retry(f->c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, NULL, &body, &len,
					&err),
			 -EFBIG);
	assert_null(body);
	assert_non_null(strstr(err.msg, "more than 65536 bytes"));
	assert_int_equal(f->t.n_slept, 0);
	/* exactly the bound passes */
	big[IMDS_USER_DATA_MAX] = '\0';
	assert_ok(imds_get(f->c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, &body, &len, &err));
	assert_int_equal(len, IMDS_USER_DATA_MAX);
	free(body);
}

/* A service slower than the exchange's timeout is "no answer", which the caller may retry. */
static void test_imds__slow_answer_times_out(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	char *body = NULL;
	size_t len = 0;

	f->m.slow_ms = 1500; /* the client waits 300 ms */
	assert_int_equal(imds_get(f->c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, &body, &len, &err),
			 -EAGAIN);
	assert_non_null(strstr(err.msg, "no answer from the instance metadata service"));
	assert_non_null(strstr(err.msg, "nothing within 300 ms"));
	assert_null(body);
}

/* Server errors are retried with a doubling wait, capped, until the service answers. */
static void test_imds__retries_with_capped_backoff(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	struct imds_retry r = { .first_ms = 200, .max_ms = 5000 };
	const int64_t want[] = { 200, 400, 800, 1600, 3200, 5000, 5000 };
	char *body = NULL;
	size_t len = 0;

	f->m.fail_gets = 7;
	assert_ok(imds_get_retry(f->c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, &r, &body, &len, &err));
	assert_string_equal(body, BOOT_DOC);
	free(body);
	assert_int_equal(f->t.n_slept, 7);
	for (int i = 0; i < 7; i++)
		assert_int_equal(f->t.slept[i], want[i]);
}

/* With a total, retrying ends once it has passed, saying how long it tried and why. */
static void test_imds__gives_up_after_the_total(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	struct imds_retry r = { .first_ms = 200, .max_ms = 1000, .total_ms = 3000 };
	struct imds_config cfg = f->cfg;
	struct imds_client *c = NULL;
	char *body = NULL;
	size_t len = 0;

	/* nothing listens there */
	cfg.endpoint = "http://127.0.0.1:1";
	assert_ok(imds_client_new(&cfg, &c, &err));
	assert_int_equal(imds_get_retry(c, IMDS_USER_DATA, 4096, &r, &body, &len, &err), -EAGAIN);
	imds_client_free(c);
	assert_non_null(strstr(err.msg, "(connection refused)"));
	assert_non_null(strstr(err.msg, "gave up after 5 tries over 2400 ms"));
	/* 200 + 400 + 800 + 1000 = 2400; another 1000 would pass 3000 */
	assert_int_equal(f->t.n_slept, 4);
	assert_null(body);
}

/* The endpoint: the configured one, else $KIYOT_IMDS_ENDPOINT; only http:// URLs. */
static void test_imds__endpoint_from_the_environment(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	struct imds_config cfg = f->cfg;
	struct imds_client *c = NULL;
	char *body = NULL;
	size_t len = 0;

	cfg.endpoint = NULL;
	setenv(IMDS_ENDPOINT_ENV, f->ep, 1);
	assert_ok(imds_client_new(&cfg, &c, &err));
	unsetenv(IMDS_ENDPOINT_ENV);
	assert_ok(imds_get(c, IMDS_USER_DATA, IMDS_USER_DATA_MAX, &body, &len, &err));
	assert_string_equal(body, BOOT_DOC);
	free(body);
	imds_client_free(c);

	assert_ok(imds_client_new(&cfg, &c, &err));
	assert_string_equal(imds_client_where(c), "169.254.169.254");
	imds_client_free(c);
	cfg.endpoint = "https://169.254.169.254";
	assert_int_equal(imds_client_new(&cfg, &c, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "must be an http:// URL"));
}

/* The bootstrap: fetched once into a 0600 cache; a restarted agent reads the cache. */
static void test_imds__bootstrap_fetched_once_into_the_cache(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *cache = xasprintf("%s/run/cell-agent/bootstrap.json", f->dir);
	char *text = NULL;
	size_t len = 0;
	struct stat st;

	assert_ok(imds_bootstrap(&f->cfg, NULL, cache, 1 << 20, &text, &len, &err));
	assert_string_equal(text, BOOT_DOC);
	free(text);
	assert_int_equal(stat(cache, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_size, strlen(BOOT_DOC));
	assert_int_equal(stub_count(&f->s), 2);

	/* what the agent's secret-dropping rewrite leaves is what the next start reads */
	assert_ok(fs_write_file(cache, "{\"rewritten\":1}", 15, 0600, &err));
	assert_ok(imds_bootstrap(&f->cfg, NULL, cache, 1 << 20, &text, &len, &err));
	assert_string_equal(text, "{\"rewritten\":1}");
	free(text);
	assert_int_equal(stub_count(&f->s), 2);
}

/* User-data that is not a bootstrap document, or none, is an error and nothing is cached. */
static void test_imds__bootstrap_refuses_other_user_data(void **state)
{
	struct fx *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *cache = xasprintf("%s/bootstrap.json", f->dir);
	char *text = NULL;
	size_t len = 0;

	f->m.user_data = "#!/bin/sh\necho hello\n";
	assert_int_equal(imds_bootstrap(&f->cfg, NULL, cache, 1 << 20, &text, &len, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not a cell's bootstrap document"));
	assert_false(fs_exists(cache));

	f->m.user_data = NULL;
	assert_int_equal(imds_bootstrap(&f->cfg, NULL, cache, 1 << 20, &text, &len, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "the instance has no user-data"));
	assert_false(fs_exists(cache));
	assert_null(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_teardown)
		T(test_imds__user_data_with_a_session_token),
		T(test_imds__missing_path_is_enoent),
		T(test_imds__token_reused_then_renewed_before_expiry),
		T(test_imds__unauthorized_fetches_a_new_token_once),
		T(test_imds__oversized_answer_refused),
		T(test_imds__slow_answer_times_out),
		T(test_imds__retries_with_capped_backoff),
		T(test_imds__gives_up_after_the_total),
		T(test_imds__endpoint_from_the_environment),
		T(test_imds__bootstrap_fetched_once_into_the_cache),
		T(test_imds__bootstrap_refuses_other_user_data),
#undef T
	};

	signal(SIGPIPE, SIG_IGN); /* the stub answers clients that gave up */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
