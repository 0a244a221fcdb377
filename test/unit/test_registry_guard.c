/*
 * A hostile registry cannot turn a pull against the host that makes it. The registry, served
 * by a thread of this test on 127.0.0.1 (configured as such, so it may be reached there),
 * redirects manifests and blobs to another listener on 127.0.0.1 (a service of the node), to
 * 169.254.169.254 (the instance metadata service), to "localhost", and sends a token realm on
 * the node; a configured mirror does the same. The other listener must never see a connection,
 * and the error must name the refusal and carry nothing of what would have answered.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "fsutil.h"
#include "image.h"
#include "regconf.h"
#include "registry.h"
#include "xalloc.h"

/* What the node's service would answer, and the sha256 of it (which no error may carry). */
#define SECRET "{\"AccessKeyId\":\"ASIA-NODE-SECRET\"}"
#define SECRET_SHA "sha256:"
#define ASKED "sha256:1111111111111111111111111111111111111111111111111111111111111111"

/* A listener on 127.0.0.1 answering every request from a table of (path prefix, head) or
 * counting and answering SECRET (the node's service). */
struct server {
	int lfd;
	int port;
	pthread_t thread;
	volatile bool stop;
	pthread_mutex_t mu;
	int conns; /* connections accepted */
	const char *(*answer)(struct server *s, const char *path, char *buf, size_t size);
	int victim_port; /* where the hostile answers point */
};

struct fix {
	struct server reg;    /* the registry the pull names */
	struct server mirror; /* a mirror configured for it */
	struct server victim; /* a service of the node */
	struct regconf *rc;
	struct regconf *rc_mirror;
};

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void serve_one(struct server *s, int fd)
{
	char req[8192], path[1024], buf[2048];
	size_t got = 0;
	const char *ans;

	while (got < sizeof(req) - 1) {
		ssize_t n = read(fd, req + got, sizeof(req) - 1 - got);

		if (n <= 0)
			break;
		got += (size_t)n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[got] = '\0';
	if (sscanf(req, "%*s %1023s", path) != 1)
		return;
	ans = s->answer(s, path, buf, sizeof(buf));
	send_all(fd, ans, strlen(ans));
}

static void *server_main(void *arg)
{
	struct server *s = arg;

	while (!s->stop) {
		struct pollfd p = { .fd = s->lfd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		pthread_mutex_lock(&s->mu);
		s->conns++;
		pthread_mutex_unlock(&s->mu);
		serve_one(s, fd);
		close(fd);
	}
	return NULL;
}

static int conns_of(struct server *s)
{
	int n;

	pthread_mutex_lock(&s->mu);
	n = s->conns;
	pthread_mutex_unlock(&s->mu);
	return n;
}

/* The node's service: 200 with its secret to anything. */
static const char *victim_answer(struct server *s, const char *path, char *buf, size_t size)
{
	(void)s;
	(void)path;
	snprintf(buf, size,
		 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n%s",
		 strlen(SECRET), SECRET);
	return buf;
}

/* A head with a Location, then no body. */
static const char *redirect(char *buf, size_t size, const char *location)
{
	snprintf(buf, size,
		 "HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n"
		 "\r\n",
		 location);
	return buf;
}

/* The hostile registry (and mirror): where each path's answer sends the pull. */
static const char *hostile_answer(struct server *s, const char *path, char *buf, size_t size)
{
	char loc[256];
	const char *tail = strrchr(path, '/') + 1;

	if (!strcmp(tail, "to-node") || !strncmp(tail, "sha256:", 7))
		snprintf(loc, sizeof(loc), "http://127.0.0.1:%d/latest/meta-data/iam?x=1",
			 s->victim_port);
	else if (!strcmp(tail, "to-metadata"))
		snprintf(loc, sizeof(loc), "http://169.254.169.254/latest/meta-data/iam?x=1");
	else if (!strcmp(tail, "to-localhost"))
		snprintf(loc, sizeof(loc), "http://localhost:%d/x", s->victim_port);
	else if (!strcmp(tail, "to-itself"))
		snprintf(loc, sizeof(loc), "http://127.0.0.1:%d/v2/app/manifests/gone", s->port);
	else if (!strcmp(tail, "realm-on-node")) {
		snprintf(buf, size,
			 "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer "
			 "realm=\"http://127.0.0.1:%d/token\",service=\"x\"\r\nContent-Length: "
			 "0\r\nConnection: close\r\n\r\n",
			 s->victim_port);
		return buf;
	} else
		return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
	return redirect(buf, size, loc);
}

static void server_start(struct server *s,
			 const char *(*answer)(struct server *, const char *, char *, size_t))
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);

	pthread_mutex_init(&s->mu, NULL);
	s->answer = answer;
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 16), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &len), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_stop(struct server *s)
{
	s->stop = true;
	pthread_join(s->thread, NULL);
	close(s->lfd);
	pthread_mutex_destroy(&s->mu);
}

static struct regconf *conf(const char *text)
{
	struct err err = ERR_INIT;
	struct regconf *rc = NULL;
	json_t *j = json_loads(text, 0, NULL);

	assert_non_null(j);
	assert_int_equal(regconf_from_json(j, &rc, &err), 0);
	json_decref(j);
	return rc;
}

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	char text[512];

	server_start(&f->victim, victim_answer);
	f->reg.victim_port = f->mirror.victim_port = f->victim.port;
	server_start(&f->reg, hostile_answer);
	server_start(&f->mirror, hostile_answer);
	snprintf(text, sizeof(text), "{\"127.0.0.1:%d\": {\"insecure\": true}}", f->reg.port);
	f->rc = conf(text);
	snprintf(text, sizeof(text),
		 "{\"127.0.0.1:%d\": {\"insecure\": true, \"mirrors\": [\"http://127.0.0.1:%d\"]}}",
		 f->reg.port, f->mirror.port);
	f->rc_mirror = conf(text);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	server_stop(&f->reg);
	server_stop(&f->mirror);
	server_stop(&f->victim);
	regconf_free(f->rc);
	regconf_free(f->rc_mirror);
	free(f);
	return 0;
}

/* Fetches manifest reference from the hostile registry; returns its error. */
static int fetch(struct fix *f, const struct regconf *rc, const char *reference, struct err *err)
{
	_cleanup_free_ char *host = xasprintf("127.0.0.1:%d", f->reg.port);
	struct reg_client *c = NULL;
	struct reg_manifest m = { 0 };
	int ret;

	assert_int_equal(reg_client_new(rc, host, "app", NULL, &c, err), 0);
	ret = reg_fetch_manifest(c, reference, &m, err);
	reg_manifest_release(&m);
	reg_client_free(c);
	return ret;
}

/* The refusal is named, nothing of an answer is carried, nobody was reached. */
static void assert_refused(struct fix *f, const struct err *err, const char *what)
{
	assert_int_equal(err->code, EPERM);
	if (!strstr(err->msg, what))
		fail_msg("error does not name %s: %s", what, err->msg);
	assert_non_null(strstr(err->msg, "a registry may not send a pull to this host"));
	assert_null(strstr(err->msg, "ASIA-NODE-SECRET"));
	assert_null(strstr(err->msg, "Couldn't connect"));
	assert_int_equal(conns_of(&f->victim), 0);
}

static void test_registry_guard__redirect_to_loopback_port_is_refused(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *want = xasprintf("redirect to 127.0.0.1:%d refused", f->victim.port);

	assert_true(fetch(f, f->rc, "to-node", &err) < 0);
	assert_refused(f, &err, want);
	assert_non_null(strstr(err.msg, "loopback"));
}

static void test_registry_guard__redirect_by_digest_carries_no_digest_of_the_answer(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	const char *first;

	/* before, the node's answer was hashed and its digest echoed: "content hash sha256:..." */
	assert_true(fetch(f, f->rc, ASKED, &err) < 0);
	assert_refused(f, &err, "refused");
	first = strstr(err.msg, SECRET_SHA);
	assert_non_null(first); /* the digest asked for */
	assert_null(strstr(first + strlen(ASKED), SECRET_SHA));
}

static void test_registry_guard__redirect_to_metadata_service_is_refused(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;

	assert_true(fetch(f, f->rc, "to-metadata", &err) < 0);
	assert_refused(f, &err, "redirect to 169.254.169.254:80 refused");
	assert_non_null(strstr(err.msg, "link-local"));
}

static void test_registry_guard__redirect_to_a_name_of_loopback_is_refused(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *v4 = xasprintf("127.0.0.1:%d refused", f->victim.port);
	_cleanup_free_ char *v6 = xasprintf("[::1]:%d refused", f->victim.port);

	assert_true(fetch(f, f->rc, "to-localhost", &err) < 0);
	assert_refused(f, &err, "redirect to ");
	/* "localhost" is vetted as what it resolves to */
	assert_true(strstr(err.msg, v4) || strstr(err.msg, v6));
}

static void test_registry_guard__token_realm_on_the_node_is_refused(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *want =
		xasprintf("token realm at 127.0.0.1:%d refused", f->victim.port);

	assert_true(fetch(f, f->rc, "realm-on-node", &err) < 0);
	assert_refused(f, &err, want);
}

static void test_registry_guard__redirect_to_the_registry_itself_is_followed(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;

	/* the registry configured at 127.0.0.1:port may send the pull to itself */
	assert_int_equal(fetch(f, f->rc, "to-itself", &err), -ENOENT);
	assert_non_null(strstr(err.msg, "manifest unknown (404)"));
}

static void test_registry_guard__mirror_redirect_is_refused_and_host_tried(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	_cleanup_free_ char *want = xasprintf("redirect to 127.0.0.1:%d refused", f->victim.port);

	assert_true(fetch(f, f->rc_mirror, "to-node", &err) < 0);
	assert_non_null(strstr(err.msg, want));
	assert_int_equal(conns_of(&f->mirror), 1);
	assert_true(conns_of(&f->reg) >= 1); /* the host itself after the mirror */
	assert_int_equal(conns_of(&f->victim), 0);
}

static void test_registry_guard__pull_error_names_the_refusal(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct image_store *st = NULL;
	char root[] = "/tmp/test_registry_guard.XXXXXX";
	_cleanup_free_ char *ref = xasprintf("127.0.0.1:%d/app:to-node", f->reg.port);

	assert_non_null(mkdtemp(root));
	assert_int_equal(image_store_new(root, f->rc, &st, &err), 0);
	assert_true(image_pull(st, ref, NULL, &info, &err) < 0);
	assert_null(info);
	assert_refused(f, &err, "refused");
	assert_non_null(strstr(err.msg, ref));
	image_store_free(st);
	assert_int_equal(fs_remove_tree(root, &err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_registry_guard__redirect_to_loopback_port_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_registry_guard__redirect_by_digest_carries_no_digest_of_the_answer,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_registry_guard__redirect_to_metadata_service_is_refused, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_registry_guard__redirect_to_a_name_of_loopback_is_refused, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_registry_guard__token_realm_on_the_node_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_registry_guard__redirect_to_the_registry_itself_is_followed, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_registry_guard__mirror_redirect_is_refused_and_host_tried, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_registry_guard__pull_error_names_the_refusal,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
