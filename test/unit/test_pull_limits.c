/*
 * test_pull_limits: how registry transfers are bounded (registry.h) and what cancellation does
 * to pulls (cancel.h, image.h), against registries served by threads of this test on 127.0.0.1
 * whose layers drip at a set pace and which count the layer connections they hold open.
 */
#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "image.h"
#include "regconf.h"
#include "registry.h"
#include "cancel.h"
#include "clock.h"
#include "codec.h"
#include "fsutil.h"
#include "xalloc.h"

#define CONFIG_JSON "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{}}"

/* ---- a registry whose layer drips ---- */

struct drip {
	int lfd, port;
	pthread_t acceptor;
	atomic_bool stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* the one image: test/app:1 */
	char *manifest, *layer, *layer_digest, *config_digest;
	size_t layer_len;
	size_t chunk; /* bytes of layer sent ... */
	int tick_ms;  /* ... every tick */
	/* layer connections, guarded by mu */
	int open, max_open, served, closed_early, handlers;
};

static void send_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		c += w;
		n -= (size_t)w;
	}
}

static void reply(int fd, const char *ctype, const char *body, size_t len)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 ctype, len);

	send_all(fd, head, (size_t)n);
	send_all(fd, body, len);
}

/* Sends the layer chunk by chunk; counts the connection while it is open. */
static void drip_layer(struct drip *d, int fd)
{
	char head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 d->layer_len);
	size_t off = 0;
	bool early = false, last = false;

	pthread_mutex_lock(&d->mu);
	d->open++;
	if (d->open > d->max_open)
		d->max_open = d->open;
	pthread_mutex_unlock(&d->mu);
	send_all(fd, head, (size_t)n);
	while (off < d->layer_len && !d->stop) {
		size_t k = d->layer_len - off < d->chunk ? d->layer_len - off : d->chunk;

		/* counted as closed before the last chunk goes out: the client may finish and
		 * connect again before this thread runs after its send (a busy machine) */
		if (off + k == d->layer_len && !last) {
			pthread_mutex_lock(&d->mu);
			d->open--;
			last = true;
			pthread_mutex_unlock(&d->mu);
		}
		if (send(fd, d->layer + off, k, MSG_NOSIGNAL) != (ssize_t)k) {
			early = true; /* the client closed the connection */
			break;
		}
		off += k;
		if (off < d->layer_len)
			usleep((useconds_t)d->tick_ms * 1000);
	}
	pthread_mutex_lock(&d->mu);
	if (!last)
		d->open--;
	d->served++;
	d->closed_early += early;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

struct conn {
	struct drip *d;
	int fd;
};

static void *handler_main(void *arg)
{
	struct conn *c = arg;
	struct drip *d = c->d;
	char req[4096], path[512];
	size_t got = 0;

	while (got < sizeof(req) - 1) {
		ssize_t n = read(c->fd, req + got, sizeof(req) - 1 - got);

		if (n <= 0)
			break;
		got += (size_t)n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[got] = '\0';
	if (sscanf(req, "%*s %511s", path) == 1) {
		char want[600];

		if (!strcmp(path, "/v2/test/app/manifests/1")) {
			reply(c->fd, "application/vnd.oci.image.manifest.v1+json", d->manifest,
			      strlen(d->manifest));
		} else if (snprintf(want, sizeof(want), "/v2/test/app/blobs/%s", d->config_digest),
			   !strcmp(path, want)) {
			reply(c->fd, "application/octet-stream", CONFIG_JSON, strlen(CONFIG_JSON));
		} else if (snprintf(want, sizeof(want), "/v2/test/app/blobs/%s", d->layer_digest),
			   !strcmp(path, want)) {
			drip_layer(d, c->fd);
		} else {
			reply(c->fd, "application/json", "{}", 2);
		}
	}
	close(c->fd);
	pthread_mutex_lock(&d->mu);
	d->handlers--;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	free(c);
	return NULL;
}

static void *acceptor_main(void *arg)
{
	struct drip *d = arg;

	while (!d->stop) {
		struct pollfd p = { .fd = d->lfd, .events = POLLIN };
		struct conn *c;
		pthread_t t;
		int fd;

		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept(d->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		c = xcalloc(1, sizeof(*c));
		c->d = d;
		c->fd = fd;
		pthread_mutex_lock(&d->mu);
		d->handlers++;
		pthread_mutex_unlock(&d->mu);
		assert_int_equal(pthread_create(&t, NULL, handler_main, c), 0);
		pthread_detach(t);
	}
	return NULL;
}

static char *sha256_of(const void *p, size_t n)
{
	unsigned char md[32];
	char hex[65];

	EVP_Digest(p, n, md, NULL, EVP_sha256(), NULL);
	hex_encode(md, sizeof(md), hex);
	return xasprintf("sha256:%s", hex);
}

/* A gzip tar layer of one file of n bytes (incompressible, so its size is about n). */
static char *make_layer(size_t n, size_t *len)
{
	size_t cap = n + (64 << 10), used = 0;
	char *buf = xmalloc(cap);
	char *data = xmalloc(n);
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();

	for (size_t i = 0; i < n; i++)
		data[i] = (char)(rand() & 0xff);
	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	archive_entry_set_pathname(e, "data");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (int64_t)n);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	archive_write_data(a, data, n);
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(e);
	free(data);
	*len = used;
	return buf;
}

/* Serves test/app:1 with a layer of about size bytes sent chunk bytes every tick_ms. */
static struct drip *drip_start(size_t size, size_t chunk, int tick_ms)
{
	struct drip *d = xcalloc(1, sizeof(*d));
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);

	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->layer = make_layer(size, &d->layer_len);
	d->layer_digest = sha256_of(d->layer, d->layer_len);
	d->config_digest = sha256_of(CONFIG_JSON, strlen(CONFIG_JSON));
	d->manifest = xasprintf(
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
		"\"digest\":\"%s\",\"size\":%zu},\"layers\":[{\"mediaType\":"
		"\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"%s\",\"size\":%zu}]}",
		d->config_digest, strlen(CONFIG_JSON), d->layer_digest, d->layer_len);
	d->chunk = chunk;
	d->tick_ms = tick_ms;
	d->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(d->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(d->lfd, 64), 0);
	assert_int_equal(getsockname(d->lfd, (struct sockaddr *)&a, &alen), 0);
	d->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&d->acceptor, NULL, acceptor_main, d), 0);
	return d;
}

static void drip_stop(struct drip *d)
{
	d->stop = true;
	pthread_join(d->acceptor, NULL);
	pthread_mutex_lock(&d->mu);
	while (d->handlers)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	close(d->lfd);
	free(d->manifest);
	free(d->layer);
	free(d->layer_digest);
	free(d->config_digest);
	free(d);
}

/* Waits up to 10 s until the registry holds n layer connections at once (a loaded machine
 * may take a while to start a puller); returns how many it holds. */
static int drip_wait_open(struct drip *d, int n)
{
	int64_t end = clock_mono_ns() + 10000000000LL;
	int open;

	pthread_mutex_lock(&d->mu);
	while ((open = d->open) < n && clock_mono_ns() < end) {
		pthread_mutex_unlock(&d->mu);
		usleep(10 * 1000);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return open;
}

/* Waits up to 5 s until the registry holds no layer connection; returns how many it holds. */
static int drip_wait_closed(struct drip *d)
{
	int64_t end = clock_mono_ns() + 5000000000LL;
	int open;

	pthread_mutex_lock(&d->mu);
	while ((open = d->open) && clock_mono_ns() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec++;
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return open;
}

/* Waits (5 s at most) until the registry counted n downloads served: its thread counts one
 * after the last send, which on a busy machine may come after the client has it all. Returns
 * the count. */
static int drip_wait_served(struct drip *d, int n)
{
	int64_t end = clock_mono_ns() + 5000000000LL;
	int served;

	pthread_mutex_lock(&d->mu);
	while ((served = d->served) < n && clock_mono_ns() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec++;
		pthread_cond_timedwait(&d->cv, &d->mu, &ts);
	}
	pthread_mutex_unlock(&d->mu);
	return served;
}

static char *drip_host(const struct drip *d)
{
	return xasprintf("127.0.0.1:%d", d->port);
}

/* ---- pulls in threads, each in a cancel scope of its own ---- */

struct puller {
	struct drip *d;
	struct regconf *rc;
	struct image_store *store; /* image_pull when set, else reg_fetch_blob_file */
	char dest[128];
	atomic_bool cancel; /* what the thread's scope reports */
	pthread_t t;
	int ret;
	struct err err;
	int64_t ended_ns;
};

static bool puller_cancelled(void *ctx)
{
	return atomic_load((atomic_bool *)ctx);
}

static void *puller_main(void *arg)
{
	struct puller *p = arg;
	struct cancel_scope scope;
	_cleanup_free_ char *host = drip_host(p->d);

	cancel_scope_enter(&scope, puller_cancelled, &p->cancel);
	if (p->store) {
		_cleanup_free_ char *ref = xasprintf("%s/test/app:1", host);
		struct image_info *info = NULL;

		p->ret = image_pull(p->store, ref, NULL, &info, &p->err);
		image_info_free(info);
	} else {
		struct reg_client *c = NULL;

		p->ret = reg_client_new(p->rc, host, "test/app", NULL, &c, &p->err);
		if (p->ret == 0)
			p->ret = reg_fetch_blob_file(c, p->d->layer_digest,
						     (int64_t)p->d->layer_len, 1u << 30, p->dest,
						     &p->err);
		reg_client_free(c);
	}
	cancel_scope_leave(&scope);
	p->ended_ns = clock_mono_ns();
	return NULL;
}

static void puller_start(struct puller *p, struct drip *d, struct regconf *rc,
			 struct image_store *store, const char *dir, int i)
{
	memset(p, 0, sizeof(*p));
	p->d = d;
	p->rc = rc;
	p->store = store;
	snprintf(p->dest, sizeof(p->dest), "%s/blob-%d", dir, i);
	assert_int_equal(pthread_create(&p->t, NULL, puller_main, p), 0);
}

/* ---- fixture: a scratch directory and a registries config trusting 127.0.0.1 ---- */

struct fix {
	char dir[64];
	struct regconf *rc;
};

static struct regconf *rc_for(struct drip *a, struct drip *b)
{
	struct regconf *rc = NULL;
	struct err err = ERR_INIT;
	char conf[256];
	json_t *j;

	snprintf(conf, sizeof(conf),
		 "{\"127.0.0.1:%d\": {\"insecure\": true}, \"127.0.0.1:%d\": {\"insecure\": true}}",
		 a->port, b ? b->port : a->port);
	j = json_loads(conf, 0, NULL);
	assert_int_equal(regconf_from_json(j, &rc, &err), 0);
	json_decref(j);
	return rc;
}

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/test_pull_limits.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct reg_policy p;

	reg_policy_default(&p);
	reg_set_policy(&p);
	regconf_free(f->rc);
	fs_remove_tree(f->dir, &err);
	free(f);
	return 0;
}

static void policy(uint64_t min_bytes, int window_s, int base_s, uint64_t rate, int max,
		   int per_registry)
{
	struct reg_policy p = { min_bytes, window_s, base_s, rate, max, per_registry };
	struct err err = ERR_INIT;

	assert_int_equal(reg_policy_check(&p, &err), 0);
	reg_set_policy(&p);
}

static int64_t ms_since(int64_t t0)
{
	return (clock_mono_ns() - t0) / 1000000;
}

/* ---- tests ---- */

/* A layer that moves 640 bytes a second, under the 4096 a 1-second window wants, fails within
 * a few windows, naming the registry and the blob, and leaves no file. */
static void test_pull_limits__a_stalled_blob_fails_naming_registry_and_blob(void **state)
{
	struct fix *f = *state;
	struct drip *d = drip_start(256 << 10, 64, 100);
	_cleanup_free_ char *host = drip_host(d);
	struct puller p;
	int64_t t0 = clock_mono_ns();

	policy(4096, 1, 60, 32768, 8, 4);
	f->rc = rc_for(d, NULL);
	puller_start(&p, d, f->rc, NULL, f->dir, 0);
	pthread_join(p.t, NULL);
	assert_int_equal(p.ret, -ETIMEDOUT);
	assert_non_null(strstr(p.err.msg, host));
	assert_non_null(strstr(p.err.msg, d->layer_digest));
	assert_non_null(strstr(p.err.msg, "stalled"));
	assert_true(ms_since(t0) < 5000);
	assert_false(fs_exists(p.dest));
	assert_int_equal(drip_wait_closed(d), 0);
	drip_stop(d);
}

/* A blob that moves steadily but too slowly for its size misses its deadline (1 s here plus
 * nothing for its size) and says so, though it never stalls. */
static void test_pull_limits__a_slow_blob_misses_its_deadline(void **state)
{
	struct fix *f = *state;
	struct drip *d = drip_start(1 << 20, 8192, 100);
	struct puller p;
	int64_t t0 = clock_mono_ns();

	policy(1024, 1, 1, UINT64_MAX / 2, 8, 4);
	f->rc = rc_for(d, NULL);
	puller_start(&p, d, f->rc, NULL, f->dir, 0);
	pthread_join(p.t, NULL);
	assert_int_equal(p.ret, -ETIMEDOUT);
	assert_non_null(strstr(p.err.msg, "did not arrive within 1 s"));
	assert_non_null(strstr(p.err.msg, d->layer_digest));
	assert_true(ms_since(t0) < 4000);
	drip_stop(d);
}

/* A transfer whose caller goes away stops within a fraction of a second, and the registry sees
 * its connection closed. */
static void test_pull_limits__a_cancelled_caller_stops_the_transfer(void **state)
{
	struct fix *f = *state;
	struct drip *d = drip_start(1 << 20, 1024, 100);
	struct puller p;
	int64_t t0;

	policy(1024, 30, 600, 1024, 8, 4);
	f->rc = rc_for(d, NULL);
	puller_start(&p, d, f->rc, NULL, f->dir, 0);
	assert_int_equal(drip_wait_open(d, 1), 1);
	t0 = clock_mono_ns();
	atomic_store(&p.cancel, true);
	pthread_join(p.t, NULL);
	assert_int_equal(p.ret, -ECANCELED);
	assert_true(ms_since(t0) < 1000);
	assert_int_equal(drip_wait_closed(d), 0);
	assert_int_equal(d->closed_early, 1);
	assert_false(fs_exists(p.dest));
	drip_stop(d);
}

/* With one download per registry, two blobs of registry A go one after the other while a blob
 * of registry B goes at once beside them. */
static void test_pull_limits__downloads_are_bounded_per_registry(void **state)
{
	struct fix *f = *state;
	struct drip *a = drip_start(64 << 10, 8192, 100); /* about 0.8 s each */
	struct drip *b = drip_start(16 << 10, 8192, 100); /* about 0.2 s */
	struct puller pa[2], pb;

	policy(1024, 30, 60, 32768, 3, 1);
	f->rc = rc_for(a, b);
	puller_start(&pa[0], a, f->rc, NULL, f->dir, 0);
	puller_start(&pa[1], a, f->rc, NULL, f->dir, 1);
	usleep(200 * 1000);
	puller_start(&pb, b, f->rc, NULL, f->dir, 2);
	for (int i = 0; i < 2; i++) {
		pthread_join(pa[i].t, NULL);
		assert_int_equal(pa[i].ret, 0);
	}
	pthread_join(pb.t, NULL);
	assert_int_equal(pb.ret, 0);
	assert_int_equal(drip_wait_served(a, 2), 2);
	assert_int_equal(a->max_open, 1);
	/* B did not wait for A's two */
	assert_true(pb.ended_ns < pa[0].ended_ns || pb.ended_ns < pa[1].ended_ns);
	drip_stop(a);
	drip_stop(b);
}

/* A pull waiting for a download slot gives up as soon as its caller goes away. */
static void test_pull_limits__waiting_for_a_slot_ends_with_the_caller(void **state)
{
	struct fix *f = *state;
	struct drip *d = drip_start(1 << 20, 1024, 100);
	struct puller busy, waiting;
	int64_t t0;

	policy(1024, 30, 600, 1024, 1, 1);
	f->rc = rc_for(d, NULL);
	puller_start(&busy, d, f->rc, NULL, f->dir, 0);
	assert_int_equal(drip_wait_open(d, 1), 1);
	puller_start(&waiting, d, f->rc, NULL, f->dir, 1);
	usleep(300 * 1000);
	assert_int_equal(d->served + d->open, 1); /* the second never connected */
	t0 = clock_mono_ns();
	atomic_store(&waiting.cancel, true);
	pthread_join(waiting.t, NULL);
	assert_int_equal(waiting.ret, -ECANCELED);
	assert_non_null(strstr(waiting.err.msg, "download slot"));
	assert_true(ms_since(t0) < 1000);
	atomic_store(&busy.cancel, true);
	pthread_join(busy.t, NULL);
	assert_int_equal(drip_wait_closed(d), 0);
	drip_stop(d);
}

/* Two pulls of one image: the first one's caller goes away while the second waits for it. The
 * second still gets the image; only the caller who left sees CANCELLED. */
static void test_pull_limits__a_cancelled_pull_does_not_fail_those_waiting_for_it(void **state)
{
	struct fix *f = *state;
	struct drip *d = drip_start(96 << 10, 16384, 100); /* about 0.6 s */
	_cleanup_free_ char *root = xasprintf("%s/store", f->dir);
	struct image_store *store = NULL;
	struct err err = ERR_INIT;
	struct puller first, second;

	policy(1024, 30, 60, 32768, 8, 4);
	f->rc = rc_for(d, NULL);
	assert_int_equal(image_store_new(root, f->rc, &store, &err), 0);
	puller_start(&first, d, f->rc, store, f->dir, 0);
	assert_int_equal(drip_wait_open(d, 1), 1);
	puller_start(&second, d, f->rc, store, f->dir, 1);
	usleep(100 * 1000);
	atomic_store(&first.cancel, true);
	pthread_join(first.t, NULL);
	assert_int_equal(first.ret, -ECANCELED);
	pthread_join(second.t, NULL);
	assert_int_equal(second.ret, 0);
	assert_int_equal(drip_wait_served(d, 2), 2); /* the first transfer stopped, one more */
	assert_int_equal(d->closed_early, 1);
	image_store_free(store);
	drip_stop(d);
}

/* When every caller waiting for a pull goes away, the transfer stops. */
static void test_pull_limits__a_pull_everyone_left_stops(void **state)
{
	struct fix *f = *state;
	struct drip *d = drip_start(1 << 20, 1024, 100);
	_cleanup_free_ char *root = xasprintf("%s/store", f->dir);
	struct image_store *store = NULL;
	struct err err = ERR_INIT;
	struct puller p[2];

	policy(1024, 30, 600, 1024, 8, 4);
	f->rc = rc_for(d, NULL);
	assert_int_equal(image_store_new(root, f->rc, &store, &err), 0);
	puller_start(&p[0], d, f->rc, store, f->dir, 0);
	assert_int_equal(drip_wait_open(d, 1), 1);
	puller_start(&p[1], d, f->rc, store, f->dir, 1);
	usleep(100 * 1000);
	atomic_store(&p[1].cancel, true);
	atomic_store(&p[0].cancel, true);
	for (int i = 0; i < 2; i++) {
		pthread_join(p[i].t, NULL);
		assert_int_equal(p[i].ret, -ECANCELED);
	}
	assert_int_equal(drip_wait_closed(d), 0);
	assert_int_equal(drip_wait_served(d, 1), 1);
	image_store_free(store);
	drip_stop(d);
}

/* The policy's bounds are checked, naming the field. */
static void test_pull_limits__policy_out_of_range_is_refused(void **state)
{
	struct reg_policy p;
	struct err err = ERR_INIT;

	(void)state;
	reg_policy_default(&p);
	assert_int_equal(reg_policy_check(&p, &err), 0);
	p.max_per_registry = p.max_transfers + 1;
	assert_int_equal(reg_policy_check(&p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "max_per_registry"));
	reg_policy_default(&p);
	p.deadline_rate = 0;
	assert_int_equal(reg_policy_check(&p, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "deadline_rate"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_pull_limits__a_stalled_blob_fails_naming_registry_and_blob, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_pull_limits__a_slow_blob_misses_its_deadline,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_pull_limits__a_cancelled_caller_stops_the_transfer, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_pull_limits__downloads_are_bounded_per_registry, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_pull_limits__waiting_for_a_slot_ends_with_the_caller, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_pull_limits__a_cancelled_pull_does_not_fail_those_waiting_for_it,
			setup, teardown),
		cmocka_unit_test_setup_teardown(test_pull_limits__a_pull_everyone_left_stops, setup,
						teardown),
		cmocka_unit_test(test_pull_limits__policy_out_of_range_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
