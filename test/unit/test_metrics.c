/* test_metrics: kiyot/metrics: the registry's exposition text, the scrape server's bounds,
 * the CRI server's observer, the metrics config section and the cells' figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cri_api.pb-c.h"
#include "kiyot_fixture.h"
#include "metrics/metrics.h"
#include "metrics/server.h"
#include "reader_fixture.h"
#include "rpc.h"
#include "daemon/kiyot.h"
#include "testutil.h"
#include "xalloc.h"

static char *render(struct metrics_registry *r)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	assert_ok(metrics_render(r, &b, &err));
	return buf_detach(&b, NULL);
}

/* Counters and gauges: HELP and TYPE lines, one line per label set in the order made, label
 * values and help escaped, a family without labels at 0 before any update. */
static void test_metrics__counters_and_gauges_render_in_the_text_format(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *c, *g, *plain;
	_cleanup_free_ char *text = NULL;
	(void)state;

	c = metrics_counter(r, "kiyot_things_total", "Things, by \\kind\\\nand more.",
			    (const char *const[]){ "kind", "code", NULL });
	g = metrics_gauge(r, "kiyot_level_bytes", "A level.", (const char *const[]){ "ns", NULL });
	plain = metrics_counter(r, "kiyot_plain_total", "No labels.", NULL);
	metrics_add(c, (const char *const[]){ "a", "OK" }, 1);
	metrics_add(c, (const char *const[]){ "quote\"back\\slash\nline", "OK" }, 2.5);
	metrics_add(c, (const char *const[]){ "a", "OK" }, 2);
	metrics_add(c, (const char *const[]){ "a", "OK" }, -5); /* a counter never goes down */
	metrics_set(g, (const char *const[]){ "default" }, 1e-3);
	metrics_set(g, (const char *const[]){ "big" }, 123456789012.0);
	(void)plain;
	text = render(r);
	assert_string_equal(text, "# HELP kiyot_things_total Things, by \\\\kind\\\\\\nand more.\n"
				  "# TYPE kiyot_things_total counter\n"
				  "kiyot_things_total{kind=\"a\",code=\"OK\"} 3\n"
				  "kiyot_things_total{kind=\"quote\\\"back\\\\slash\\nline\","
				  "code=\"OK\"} 2.5\n"
				  "# HELP kiyot_level_bytes A level.\n"
				  "# TYPE kiyot_level_bytes gauge\n"
				  "kiyot_level_bytes{ns=\"default\"} 0.001\n"
				  "kiyot_level_bytes{ns=\"big\"} 123456789012\n"
				  "# HELP kiyot_plain_total No labels.\n"
				  "# TYPE kiyot_plain_total counter\n"
				  "kiyot_plain_total 0\n");
	metrics_registry_free(r);
}

/* A histogram: cumulative buckets with le, +Inf, then _sum and _count. */
static void test_metrics__histograms_have_cumulative_buckets_sum_and_count(void **state)
{
	static const double b[] = { 0.001, 0.5, 60 };
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *h;
	_cleanup_free_ char *text = NULL;
	(void)state;

	h = metrics_histogram(r, "kiyot_wait_seconds", "Waits.",
			      (const char *const[]){ "method", NULL }, b, 3);
	metrics_observe(h, (const char *const[]){ "Version" }, 0.001); /* on a bound: in it */
	metrics_observe(h, (const char *const[]){ "Version" }, 0.25);
	metrics_observe(h, (const char *const[]){ "Version" }, 100);
	text = render(r);
	assert_string_equal(text, "# HELP kiyot_wait_seconds Waits.\n"
				  "# TYPE kiyot_wait_seconds histogram\n"
				  "kiyot_wait_seconds_bucket{method=\"Version\",le=\"0.001\"} 1\n"
				  "kiyot_wait_seconds_bucket{method=\"Version\",le=\"0.5\"} 2\n"
				  "kiyot_wait_seconds_bucket{method=\"Version\",le=\"60\"} 2\n"
				  "kiyot_wait_seconds_bucket{method=\"Version\",le=\"+Inf\"} 3\n"
				  "kiyot_wait_seconds_sum{method=\"Version\"} 100.251\n"
				  "kiyot_wait_seconds_count{method=\"Version\"} 3\n");
	metrics_registry_free(r);
}

static void collect(void *ctx, struct metrics_writer *w)
{
	static const char *const labels[] = { "phase" };

	metrics_write_family(w, "kiyot_cells", "Cells.", METRICS_GAUGE);
	metrics_write_sample(w, "kiyot_cells", labels, (const char *const[]){ ctx }, 1, 2);
}

/* Collectors write after the registry's own families, until removed. */
static void test_metrics__collectors_write_their_families_at_each_render(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_collector *c;
	char *text;
	(void)state;

	c = metrics_collector_add(r, collect, "Run\"ning");
	text = render(r);
	assert_string_equal(text, "# HELP kiyot_cells Cells.\n# TYPE kiyot_cells gauge\n"
				  "kiyot_cells{phase=\"Run\\\"ning\"} 2\n");
	free(text);
	metrics_collector_remove(r, c);
	text = render(r);
	assert_string_equal(text, "");
	free(text);
	metrics_registry_free(r);
}

/* A family keeps at most METRICS_MAX_SERIES label sets: input cannot grow it without end. */
static void test_metrics__a_family_stops_growing_at_its_bound(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	struct metrics_family *c =
		metrics_counter(r, "kiyot_x_total", "X.", (const char *const[]){ "v", NULL });
	_cleanup_free_ char *text = NULL;
	size_t lines = 0;
	(void)state;

	for (int i = 0; i < METRICS_MAX_SERIES + 10; i++) {
		char v[16];

		snprintf(v, sizeof(v), "%d", i);
		metrics_add(c, (const char *const[]){ v }, 1);
	}
	text = render(r);
	for (const char *p = text; (p = strchr(p, '\n')); p++)
		lines++;
	assert_int_equal(lines, 2 + METRICS_MAX_SERIES);
	metrics_registry_free(r);
}

/* ---- the server ---- */

struct srv {
	struct metrics_registry *r;
	struct metrics_server *s;
};

static int srv_setup(void **state)
{
	static struct srv f;
	struct metrics_limits lim = { .max_head = 1024,
				      .head_timeout_ms = 300,
				      .max_connections = 2 };
	struct err err = ERR_INIT;

	f.r = metrics_registry_new();
	metrics_add(metrics_counter(f.r, "kiyot_a_total", "A.", NULL), NULL, 7);
	if (metrics_server_start("127.0.0.1:0", f.r, &lim, &f.s, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	*state = &f;
	return 0;
}

static int srv_teardown(void **state)
{
	struct srv *f = *state;

	metrics_server_stop(f->s);
	metrics_registry_free(f->r);
	return 0;
}

static int connect_to(struct srv *f)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timeval tv = { .tv_sec = 10 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_port = htons((uint16_t)metrics_server_port(f->s));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Everything the server sends until it closes (NULL when it did not close within 10 s). */
static char *read_all(int fd)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;
	char chunk[4096];
	ssize_t n;

	while ((n = recv(fd, chunk, sizeof(chunk), 0)) > 0)
		buf_append(&b, chunk, (size_t)n, &err);
	if (n < 0 && errno != ECONNRESET) {
		buf_release(&b);
		return NULL;
	}
	return buf_detach(&b, NULL);
}

static char *exchange(struct srv *f, const char *request)
{
	int fd = connect_to(f);
	char *answer;

	assert_int_equal(send(fd, request, strlen(request), 0), (ssize_t)strlen(request));
	answer = read_all(fd);
	close(fd);
	assert_non_null(answer);
	return answer;
}

static void test_metrics__get_metrics_answers_the_exposition_and_closes(void **state)
{
	_cleanup_free_ char *a =
		exchange(*state, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n");

	assert_non_null(strstr(a, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(
		strstr(a, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr(a, "\r\nConnection: close\r\n"));
	assert_non_null(strstr(a, "\r\n\r\n# HELP kiyot_a_total A.\n# TYPE kiyot_a_total counter\n"
				  "kiyot_a_total 7\n"));
}

static void test_metrics__other_paths_are_404_and_other_methods_405(void **state)
{
	_cleanup_free_ char *a = exchange(*state, "GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n");
	_cleanup_free_ char *b = exchange(*state, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	_cleanup_free_ char *c = exchange(*state, "GET /metrics?x=1 HTTP/1.0\r\n\r\n");
	_cleanup_free_ char *d = exchange(*state, "GET /metrics\r\n\r\n");

	assert_true(strncmp(a, "HTTP/1.1 404 ", 13) == 0);
	assert_true(strncmp(b, "HTTP/1.1 405 ", 13) == 0);
	assert_non_null(strstr(b, "\r\nAllow: GET\r\n"));
	assert_true(strncmp(c, "HTTP/1.1 200 ", 13) == 0);
	assert_true(strncmp(d, "HTTP/1.1 400 ", 13) == 0);
}

/* A head past the bound (1 KiB here) is answered 431, whatever else comes. */
static void test_metrics__an_oversized_head_is_431(void **state)
{
	char req[4096];
	int n = snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\nX-Big: ");
	_cleanup_free_ char *a = NULL;

	memset(req + n, 'a', sizeof(req) - (size_t)n - 1);
	req[sizeof(req) - 1] = '\0';
	a = exchange(*state, req);
	assert_true(strncmp(a, "HTTP/1.1 431 ", 13) == 0);
}

/* A client that sends part of its head and then nothing is closed (after a 408). */
static void test_metrics__a_slow_head_is_closed(void **state)
{
	_cleanup_free_ char *a = exchange(*state, "GET /metrics HTTP/1.1\r\nHost: x\r\n");

	assert_true(strncmp(a, "HTTP/1.1 408 ", 13) == 0);
}

/* Past max_connections (2 here) open at once, one more is answered 503 and closed. */
static void test_metrics__connections_past_the_bound_are_refused(void **state)
{
	struct srv *f = *state;
	int a = connect_to(f), b = connect_to(f), c;
	_cleanup_free_ char *third = NULL;
	_cleanup_free_ char *after = NULL;

	/* the server accepts in the order connected: a and b before c */
	assert_int_equal(send(a, "GET", 3, 0), 3);
	assert_int_equal(send(b, "GET", 3, 0), 3);
	c = connect_to(f);
	third = read_all(c);
	assert_non_null(third);
	assert_true(strncmp(third, "HTTP/1.1 503 ", 13) == 0);
	close(c);
	close(a);
	close(b);
	/* once they are gone, scrapes are served again */
	for (int i = 0; i < 100; i++) {
		free(after);
		after = exchange(f, "GET /metrics HTTP/1.1\r\n\r\n");
		if (strncmp(after, "HTTP/1.1 200 ", 13) == 0)
			break;
		usleep(20 * 1000);
	}
	assert_true(strncmp(after, "HTTP/1.1 200 ", 13) == 0);
}

/* ---- the CRI server's observer ---- */

/* What the observer saw. It runs on the server's thread after the reply is sent, so the
 * client may have its answer first: the test waits for it (seen_wait), bounded. */
struct seen {
	pthread_mutex_t lock;
	pthread_cond_t changed;
	char method[128];
	int status;
	double seconds;
	int calls;
};

static void observe(void *arg, const char *method, int status, double seconds)
{
	struct seen *s = arg;

	/* late on purpose, as on a busy machine: the test must wait for the observer */
	usleep(20 * 1000);
	pthread_mutex_lock(&s->lock);
	snprintf(s->method, sizeof(s->method), "%s", method ? method : "(null)");
	s->status = status;
	s->seconds = seconds;
	s->calls++;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
}

/* Waits at most 10 s for the observer's calls-th report; returns the count then, under the
 * lock (the caller reads the rest and unlocks). */
static int seen_wait(struct seen *s, int calls)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&s->lock);
	while (s->calls < calls &&
	       pthread_cond_timedwait(&s->changed, &s->lock, &until) != ETIMEDOUT)
		;
	return s->calls;
}

static int version(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		   ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)call;
	(void)req;
	(void)resp;
	return err_set(err, ENOENT, "no such thing");
}

/* Every answered call reaches the observer with its method, status and duration; a method
 * the table lacks comes as NULL. */
static void test_metrics__the_rpc_server_reports_each_call_to_its_observer(void **state)
{
	static const struct rpc_method methods[] = {
		{ "/runtime.v1.RuntimeService/Version", &runtime__v1__version_request__descriptor,
		  &runtime__v1__version_response__descriptor, version, 0, 0 },
	};
	Runtime__V1__VersionRequest req = RUNTIME__V1__VERSION_REQUEST__INIT;
	struct rpc_server_config cfg = { 0 };
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;
	struct rpc_server *srv;
	struct rpc_channel *ch;
	struct seen seen = { .lock = PTHREAD_MUTEX_INITIALIZER,
			     .changed = PTHREAD_COND_INITIALIZER };
	char path[96], addr[128];
	(void)state;

	snprintf(path, sizeof(path), "/tmp/kiyot-test-metrics-%d.sock", (int)getpid());
	snprintf(addr, sizeof(addr), "unix://%s", path);
	cfg.address = addr;
	cfg.methods = methods;
	cfg.n_methods = 1;
	cfg.observe = observe;
	cfg.observe_arg = &seen;
	assert_ok(rpc_server_start(&cfg, &srv, &err));
	assert_ok(rpc_channel_new(addr, &ch, &err));
	assert_int_equal(rpc_unary(ch, "/runtime.v1.RuntimeService/Version", &req.base,
				   &runtime__v1__version_response__descriptor, 5000, &resp, &err),
			 -ENOENT);
	assert_int_equal(seen_wait(&seen, 1), 1);
	assert_string_equal(seen.method, "/runtime.v1.RuntimeService/Version");
	assert_string_equal(metrics_grpc_code_name(seen.status), "NOT_FOUND");
	assert_true(seen.seconds >= 0 && seen.seconds < 60);
	pthread_mutex_unlock(&seen.lock);
	assert_int_equal(rpc_unary(ch, "/runtime.v1.RuntimeService/Nope", &req.base,
				   &runtime__v1__version_response__descriptor, 5000, &resp, &err),
			 -ENOSYS);
	assert_int_equal(seen_wait(&seen, 2), 2);
	assert_string_equal(seen.method, "(null)");
	assert_string_equal(metrics_grpc_code_name(seen.status), "UNIMPLEMENTED");
	pthread_mutex_unlock(&seen.lock);
	rpc_channel_free(ch);
	rpc_server_stop(srv);
	unlink(path);
}

/* kiyot's observer counts by the method's name and the status's name. */
static void test_metrics__cri_calls_are_counted_by_method_and_code(void **state)
{
	_cleanup_free_ char *text = NULL;
	(void)state;

	metrics_cri_observe(NULL, "/runtime.v1.RuntimeService/RunPodSandbox", 0, 0.2);
	metrics_cri_observe(NULL, "/runtime.v1.RuntimeService/RunPodSandbox", 0, 0.3);
	metrics_cri_observe(NULL, "/runtime.v1.RuntimeService/RunPodSandbox", 5, 0.001);
	metrics_cri_observe(NULL, NULL, 12, 0.001);
	text = render(metrics_default());
	assert_non_null(
		strstr(text, "kiyot_cri_requests_total{method=\"RunPodSandbox\",code=\"OK\"} 2\n"));
	assert_non_null(strstr(
		text, "kiyot_cri_requests_total{method=\"RunPodSandbox\",code=\"NOT_FOUND\"} 1\n"));
	assert_non_null(strstr(
		text, "kiyot_cri_requests_total{method=\"unknown\",code=\"UNIMPLEMENTED\"} 1\n"));
	assert_non_null(strstr(text, "kiyot_cri_request_duration_seconds_bucket{method="
				     "\"RunPodSandbox\",le=\"0.25\"} 2\n"));
	assert_non_null(strstr(text, "# TYPE process_open_fds gauge\n"));
}

/* ---- config ---- */

static void test_metrics__config_listen_takes_an_address_or_a_port(void **state)
{
	struct kiyot_config c;
	struct err err = ERR_INIT;
	(void)state;

	kiyot_config_defaults(&c);
	assert_string_equal(c.metrics_listen, ""); /* off by default */
	kiyot_config_release(&c);
	assert_ok(rfix_config(&c, "metrics: {listen: \"0.0.0.0:9464\"}\n", &err));
	assert_string_equal(c.metrics_listen, "0.0.0.0:9464");
	kiyot_config_release(&c);
	assert_ok(rfix_config(&c, "metrics: {listen: 9464}\n", &err));
	assert_string_equal(c.metrics_listen, "127.0.0.1:9464");
	kiyot_config_release(&c);
	assert_ok(rfix_config(&c, "metrics: {listen: \"9465\"}\n", &err));
	assert_string_equal(c.metrics_listen, "127.0.0.1:9465");
	kiyot_config_release(&c);
	assert_int_equal(rfix_config(&c, "metrics: {listen: \"localhost:x\"}\n", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "metrics.listen"));
	kiyot_config_release(&c);
	assert_int_equal(rfix_config(&c, "metrics: {port: 1}\n", &err), -EINVAL);
	kiyot_config_release(&c);
}

/* The streaming server's port is refused, whichever setting comes first. */
static void test_metrics__config_refuses_the_streaming_servers_port(void **state)
{
	struct kiyot_config c;
	struct err err = ERR_INIT;
	(void)state;

	assert_int_equal(
		rfix_config(&c, "metrics: {listen: 10010}\nstreamingAddress: \"0.0.0.0:10010\"\n",
			    &err),
		-EINVAL);
	assert_non_null(strstr(err.msg, "metrics.listen: port 10010 is the streaming server's"));
	kiyot_config_release(&c);
}

/* ---- the cells' figures ---- */

/* The value of the series named (its name and labels) in an exposition, 0 when absent. */
static double series_count(const char *text, const char *series)
{
	const char *p = text;
	size_t n = strlen(series);

	while ((p = strstr(p, series))) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	return 0;
}

static void test_metrics__cells_are_counted_from_the_records_at_each_scrape(void **state)
{
	struct kfix *f = *state;
	struct metrics_cells *mc = metrics_cells_add(&f->k);
	struct err err = ERR_INIT;
	_cleanup_free_ char *before = render(metrics_default());
	_cleanup_free_ char *after = NULL;
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *ctr = NULL;
	char want[256];

	assert_non_null(strstr(before, "# TYPE kiyot_cells gauge\n"));
	assert_null(strstr(before, "kiyot_cells{"));
	assert_ok(kfix_run_pod(f, "web", "uid-web", 0, &id, &err));
	after = render(metrics_default());
	records_lock(f->k.records);
	snprintf(want, sizeof(want),
		 "kiyot_cells{phase=\"Running\",provider=\"%s\",instance_type=\"%s\","
		 "market=\"on-demand\"} 1\n",
		 f->k.provider.ops->name, records_sandbox(f->k.records, id)->instance_type);
	records_unlock(f->k.records);
	assert_non_null(strstr(after, want));
	assert_non_null(
		strstr(after, "kiyot_cells_price_dollars_per_hour{namespace=\"default\"} 0."));
	assert_non_null(strstr(after, "# TYPE kiyot_spend_dollars_total counter\n"));
	/* the launch's steps, timed */
	assert_non_null(
		strstr(after, "kiyot_cell_launch_duration_seconds_count{step=\"sizing\"} "));
	assert_non_null(
		strstr(after, "kiyot_cell_launch_duration_seconds_count{step=\"provider\"} "));
	assert_non_null(strstr(after, "kiyot_cell_launch_duration_seconds_count{step=\"boot\"} "));
	assert_non_null(
		strstr(after, "kiyot_cell_launch_duration_seconds_count{step=\"enrollment\"} "));
	/* the first Apply of the pod is the last step (the figures are process-wide: another
	 * test's launch may have counted one before, so compare with before) */
	free(after);
	assert_ok(kfix_create(f, id, "app", "registry.test/app:1", &ctr, &err));
	after = render(metrics_default());
	assert_true(
		series_count(after, "kiyot_cell_launch_duration_seconds_count{step=\"apply\"}") ==
		series_count(before, "kiyot_cell_launch_duration_seconds_count{step=\"apply\"}") +
			1);
	free(after);
	after = NULL;
	free(ctr);
	assert_ok(kfix_create(f, id, "second", "registry.test/app:1", &ctr, &err));
	after = render(metrics_default());
	assert_true(
		series_count(after, "kiyot_cell_launch_duration_seconds_count{step=\"apply\"}") ==
		series_count(before, "kiyot_cell_launch_duration_seconds_count{step=\"apply\"}") +
			1);
	metrics_cells_remove(mc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics__counters_and_gauges_render_in_the_text_format),
		cmocka_unit_test(test_metrics__histograms_have_cumulative_buckets_sum_and_count),
		cmocka_unit_test(test_metrics__collectors_write_their_families_at_each_render),
		cmocka_unit_test(test_metrics__a_family_stops_growing_at_its_bound),
		cmocka_unit_test_setup_teardown(
			test_metrics__get_metrics_answers_the_exposition_and_closes, srv_setup,
			srv_teardown),
		cmocka_unit_test_setup_teardown(
			test_metrics__other_paths_are_404_and_other_methods_405, srv_setup,
			srv_teardown),
		cmocka_unit_test_setup_teardown(test_metrics__an_oversized_head_is_431, srv_setup,
						srv_teardown),
		cmocka_unit_test_setup_teardown(test_metrics__a_slow_head_is_closed, srv_setup,
						srv_teardown),
		cmocka_unit_test_setup_teardown(test_metrics__connections_past_the_bound_are_refused,
						srv_setup, srv_teardown),
		cmocka_unit_test(test_metrics__the_rpc_server_reports_each_call_to_its_observer),
		cmocka_unit_test(test_metrics__cri_calls_are_counted_by_method_and_code),
		cmocka_unit_test(test_metrics__config_listen_takes_an_address_or_a_port),
		cmocka_unit_test(test_metrics__config_refuses_the_streaming_servers_port),
		cmocka_unit_test_setup_teardown(
			test_metrics__cells_are_counted_from_the_records_at_each_scrape, kfix_setup,
			kfix_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
