/*
 * Images: reference parsing, and pulls against a tiny registry served by a thread of this test
 * on 127.0.0.1 (canned manifests and blobs, a token service that wants credentials).
 */
#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "image.h"
#include "regconf.h"
#include "fsutil.h"
#include "xalloc.h"

#define TOKEN "tok-123"
#define BASIC_ALICE "Basic YWxpY2U6czNjcmV0" /* alice:s3cret */
#define MAX_ROUTES 32

/* ---- the fake registry ---- */

struct route {
	char *path;
	int status;
	char *ctype;
	char *body;
	size_t len;
	bool need_auth;
	int hits;
};

struct server {
	int lfd;
	int port;
	pthread_t thread;
	volatile bool stop;
	pthread_mutex_t mu;
	struct route routes[MAX_ROUTES];
	size_t n;
	int token_hits;
	int active;	   /* connections being served, each by a thread of its own */
	pthread_cond_t cv; /* with mu: a request came, a connection ended */
	char *hold;	   /* a path whose answer waits for a request of release (up to 5 s) */
	char *release;
	bool hold_timed_out; /* release never came while hold waited */
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

static void respond(int fd, int status, const char *extra, const char *ctype, const char *body,
		    size_t len)
{
	char head[1024];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n%s%s%s%s"
			 "\r\n",
			 status, len, ctype ? "Content-Type: " : "", ctype ? ctype : "",
			 ctype ? "\r\n" : "", extra ? extra : "");

	send_all(fd, head, (size_t)n);
	send_all(fd, body, len);
}

/* The value of header name in req, copied into out ("" if absent). */
static void header(const char *req, const char *name, char *out, size_t size)
{
	const char *p = strcasestr(req, name);
	size_t n;

	out[0] = '\0';
	if (!p)
		return;
	p += strlen(name);
	n = strcspn(p, "\r\n");
	if (n >= size)
		n = size - 1;
	memcpy(out, p, n);
	out[n] = '\0';
}

/* How many requests path had; caller holds mu. */
static int route_hits_locked(struct server *s, const char *path)
{
	int hits = 0;

	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->routes[i].path, path))
			hits += s->routes[i].hits;
	return hits;
}

static void serve_one(struct server *s, int fd)
{
	char req[16384], path[1024], authz[512], extra[512];
	size_t got = 0;
	struct route *r = NULL;

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
	header(req, "\nAuthorization: ", authz, sizeof(authz));
	if (!strncmp(path, "/token", 6)) {
		pthread_mutex_lock(&s->mu);
		s->token_hits++;
		pthread_mutex_unlock(&s->mu);
		if (strcmp(authz, BASIC_ALICE))
			respond(fd, 401, NULL, "application/json", "{}", 2);
		else
			respond(fd, 200, NULL, "application/json", "{\"token\":\"" TOKEN "\"}",
				strlen("{\"token\":\"" TOKEN "\"}"));
		return;
	}
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->routes[i].path, path))
			r = &s->routes[i];
	if (r)
		r->hits++;
	pthread_cond_broadcast(&s->cv);
	if (r && s->hold && !strcmp(path, s->hold)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 5;
		while (!route_hits_locked(s, s->release) &&
		       pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
			;
		s->hold_timed_out = !route_hits_locked(s, s->release);
	}
	pthread_mutex_unlock(&s->mu);
	if (!r) {
		respond(fd, 404, NULL, "application/json", "{\"errors\":[]}", 13);
		return;
	}
	if (r->need_auth && strcmp(authz, "Bearer " TOKEN)) {
		snprintf(extra, sizeof(extra),
			 "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:%d/token\","
			 "service=\"test\",scope=\"repository:test/app:pull\"\r\n",
			 s->port);
		respond(fd, 401, extra, "application/json", "{}", 2);
		return;
	}
	respond(fd, r->status, NULL, r->ctype, r->body, r->len);
}

struct conn {
	struct server *s;
	int fd;
};

static void *conn_main(void *arg)
{
	struct conn *c = arg;

	serve_one(c->s, c->fd);
	close(c->fd);
	pthread_mutex_lock(&c->s->mu);
	c->s->active--;
	pthread_cond_broadcast(&c->s->cv);
	pthread_mutex_unlock(&c->s->mu);
	free(c);
	return NULL;
}

/* Serves each connection in a thread of its own, so that a client's concurrent requests are
 * answered at once; waits for them all once stopped. */
static void *server_main(void *arg)
{
	struct server *s = arg;
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	while (!s->stop) {
		struct pollfd p = { .fd = s->lfd, .events = POLLIN };
		struct conn *c;
		pthread_t t;
		int fd;

		if (poll(&p, 1, 50) <= 0)
			continue;
		fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			continue;
		c = xcalloc(1, sizeof(*c));
		*c = (struct conn){ s, fd };
		pthread_mutex_lock(&s->mu);
		s->active++;
		pthread_mutex_unlock(&s->mu);
		if (pthread_create(&t, &attr, conn_main, c) != 0)
			conn_main(c);
	}
	pthread_mutex_lock(&s->mu);
	while (s->active)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	pthread_attr_destroy(&attr);
	return NULL;
}

/* A listening socket on 127.0.0.1 with a free port. */
static int listen_any(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A port on 127.0.0.1 where nothing listens. */
static int closed_port(void)
{
	int port;
	int fd = listen_any(&port);

	close(fd);
	return port;
}

static void route_add(struct server *s, const char *path, int status, const char *ctype,
		      const void *body, size_t len, bool need_auth)
{
	struct route *r;

	pthread_mutex_lock(&s->mu);
	assert_true(s->n < MAX_ROUTES);
	r = &s->routes[s->n++];
	r->path = xstrdup(path);
	r->status = status;
	r->ctype = ctype ? xstrdup(ctype) : NULL;
	r->body = xmalloc(len + 1);
	memcpy(r->body, body, len);
	r->len = len;
	r->need_auth = need_auth;
	pthread_mutex_unlock(&s->mu);
}

/* Whether the server has a route for path. */
static bool route_known(struct server *s, const char *path)
{
	bool known = false;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n; i++)
		known |= !strcmp(s->routes[i].path, path);
	pthread_mutex_unlock(&s->mu);
	return known;
}

static int route_hits(struct server *s, const char *path)
{
	int hits;

	pthread_mutex_lock(&s->mu);
	hits = route_hits_locked(s, path);
	pthread_mutex_unlock(&s->mu);
	return hits;
}

/* ---- images built by the test ---- */

static char *sha256_of(const void *p, size_t n)
{
	unsigned char md[32];
	unsigned int len = 0;
	char *out = xmalloc(7 + 64 + 1);

	EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
	memcpy(out, "sha256:", 7);
	for (unsigned int i = 0; i < len; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
	return out;
}

/* A gzip tar layer holding the given (path, content) files; content NULL makes a directory. */
static void *make_layer(const char *const *files, size_t n, size_t *len)
{
	size_t cap = 1 << 20, used = 0;
	char *buf = xmalloc(cap);
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();

	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
	for (size_t i = 0; i < n; i += 2) {
		const char *data = files[i + 1];

		archive_entry_clear(e);
		archive_entry_set_pathname(e, files[i]);
		archive_entry_set_filetype(e, data ? AE_IFREG : AE_IFDIR);
		archive_entry_set_perm(e, data ? 0644 : 0755);
		archive_entry_set_size(e, data ? (int64_t)strlen(data) : 0);
		assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
		if (data && *data)
			archive_write_data(a, data, strlen(data));
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(e);
	*len = used;
	return buf;
}

/* What a published test image is made of. */
struct pub {
	size_t layer_size;
	char *layer_digest;
	char *config_digest;
	char *manifest_digest;
	char *manifest;
};

static void pub_release(struct pub *p)
{
	free(p->layer_digest);
	free(p->config_digest);
	free(p->manifest_digest);
	free(p->manifest);
}

/* Publishes test/app:<tag> with one layer holding files, as an OCI or Docker manifest. */
static void publish(struct server *s, const char *tag, bool docker, const char *const *files,
		    size_t n, bool need_auth, struct pub *p)
{
	size_t llen = 0;
	_cleanup_free_ void *layer = make_layer(files, n, &llen);
	const char *config = "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{"
			     "\"Entrypoint\":[\"/bin/app\"],\"Cmd\":[\"--serve\"],"
			     "\"Env\":[\"PATH=/bin\",\"MODE=test\"],\"User\":\"1000:1000\","
			     "\"WorkingDir\":\"/srv\"},\"rootfs\":{\"type\":\"layers\"}}";
	char path[256];

	p->layer_size = llen;
	p->layer_digest = sha256_of(layer, llen);
	p->config_digest = sha256_of(config, strlen(config));
	p->manifest = xasprintf(
		"{\"schemaVersion\":2,\"mediaType\":\"%s\",\"config\":{\"mediaType\":\"%s\","
		"\"digest\":\"%s\",\"size\":%zu},\"layers\":[{\"mediaType\":\"%s\",\"digest\":\"%"
		"s\","
		"\"size\":%zu}]}",
		docker ? "application/vnd.docker.distribution.manifest.v2+json"
		       : "application/vnd.oci.image.manifest.v1+json",
		docker ? "application/vnd.docker.container.image.v1+json"
		       : "application/vnd.oci.image.config.v1+json",
		p->config_digest, strlen(config),
		docker ? "application/vnd.docker.image.rootfs.diff.tar.gzip"
		       : "application/vnd.oci.image.layer.v1.tar+gzip",
		p->layer_digest, llen);
	p->manifest_digest = sha256_of(p->manifest, strlen(p->manifest));
	snprintf(path, sizeof(path), "/v2/test/app/blobs/%s", p->layer_digest);
	route_add(s, path, 200, "application/octet-stream", layer, llen, need_auth);
	snprintf(path, sizeof(path), "/v2/test/app/blobs/%s", p->config_digest);
	route_add(s, path, 200, "application/octet-stream", config, strlen(config), need_auth);
	snprintf(path, sizeof(path), "/v2/test/app/manifests/%s", tag);
	route_add(s, path, 200,
		  docker ? "application/vnd.docker.distribution.manifest.v2+json"
			 : "application/vnd.oci.image.manifest.v1+json",
		  p->manifest, strlen(p->manifest), need_auth);
	snprintf(path, sizeof(path), "/v2/test/app/manifests/%s", p->manifest_digest);
	route_add(s, path, 200, "application/vnd.oci.image.manifest.v1+json", p->manifest,
		  strlen(p->manifest), need_auth);
}

/* One layer of an image publish_layers makes: a make_layer file list. */
struct layer_spec {
	const char *const *files;
	size_t n;
};

/* Publishes test/app:<tag> made of the n layers (each served once, whatever tags share it;
 * their digests into digests[], which the caller frees) and a config naming the tag, so that
 * every tag is an image of its own. Returns the image id, which the caller frees. */
static char *publish_layers(struct server *s, const char *tag, const struct layer_spec *layers,
			    size_t n, char **digests)
{
	_cleanup_free_ char *config = xasprintf("{\"architecture\":\"amd64\",\"os\":\"linux\","
						"\"config\":{\"Labels\":{\"tag\":\"%s\"}},"
						"\"rootfs\":{\"type\":\"layers\"}}",
						tag);
	char *config_digest = sha256_of(config, strlen(config));
	struct buf m = BUF_INIT;
	struct err err = ERR_INIT;
	char path[256];

	buf_init(&m, 1 << 16);
	buf_appendf(&m, &err,
		    "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+"
		    "json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\","
		    "\"digest\":\"%s\",\"size\":%zu},\"layers\":[",
		    config_digest, strlen(config));
	for (size_t i = 0; i < n; i++) {
		size_t len = 0;
		_cleanup_free_ void *layer = make_layer(layers[i].files, layers[i].n, &len);

		digests[i] = sha256_of(layer, len);
		snprintf(path, sizeof(path), "/v2/test/app/blobs/%s", digests[i]);
		if (route_hits(s, path) == 0 && !route_known(s, path))
			route_add(s, path, 200, "application/octet-stream", layer, len, false);
		buf_appendf(&m, &err,
			    "%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
			    "\"digest\":\"%s\",\"size\":%zu}",
			    i ? "," : "", digests[i], len);
	}
	buf_appendf(&m, &err, "]}");
	snprintf(path, sizeof(path), "/v2/test/app/blobs/%s", config_digest);
	route_add(s, path, 200, "application/octet-stream", config, strlen(config), false);
	snprintf(path, sizeof(path), "/v2/test/app/manifests/%s", tag);
	route_add(s, path, 200, "application/vnd.oci.image.manifest.v1+json", buf_str(&m), m.len,
		  false);
	buf_release(&m);
	return config_digest;
}

/* ---- fixture: server + store ---- */

struct fix {
	struct server srv;
	char root[64];
	struct regconf *rc;
	struct image_store *store;
};

static void fix_open_store(struct fix *f)
{
	struct err err = ERR_INIT;

	assert_int_equal(image_store_new(f->root, f->rc, &f->store, &err), 0);
}

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;
	char conf[256];
	json_t *j;

	pthread_mutex_init(&f->srv.mu, NULL);
	pthread_cond_init(&f->srv.cv, NULL);
	f->srv.lfd = listen_any(&f->srv.port);
	assert_int_equal(pthread_create(&f->srv.thread, NULL, server_main, &f->srv), 0);
	snprintf(f->root, sizeof(f->root), "/tmp/test_image.XXXXXX");
	assert_non_null(mkdtemp(f->root));
	snprintf(conf, sizeof(conf), "{\"127.0.0.1:%d\": {\"insecure\": true}}", f->srv.port);
	j = json_loads(conf, 0, NULL);
	assert_int_equal(regconf_from_json(j, &f->rc, &err), 0);
	json_decref(j);
	fix_open_store(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;

	f->srv.stop = true;
	pthread_join(f->srv.thread, NULL);
	close(f->srv.lfd);
	for (size_t i = 0; i < f->srv.n; i++) {
		free(f->srv.routes[i].path);
		free(f->srv.routes[i].ctype);
		free(f->srv.routes[i].body);
	}
	free(f->srv.hold);
	free(f->srv.release);
	image_store_free(f->store);
	regconf_free(f->rc);
	fs_remove_tree(f->root, &err);
	free(f);
	return 0;
}

static char *ref_of(struct fix *f, const char *tail)
{
	return xasprintf("127.0.0.1:%d/test/app%s", f->srv.port, tail);
}

static const char *const app_files[] = { "bin/", NULL, "bin/app", "app-binary", "srv/", NULL };

/* The file at rootfs/rel, read into a static buffer. */
static const char *rootfs_file(const struct image_info *info, const char *rel)
{
	static char data[256];
	_cleanup_free_ char *path = xasprintf("%s/%s", info->rootfs, rel);
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;

	data[0] = '\0';
	if (fs_read_file(path, sizeof(data) - 1, &text, NULL, &err) == 0)
		snprintf(data, sizeof(data), "%s", text);
	return data;
}

/* How many entries (besides . and ..) directory path holds. */
static int dir_entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* Flips the last byte of every route serving path_part: same size, different content. */
static void corrupt_routes(struct server *s, const char *path_part)
{
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n; i++)
		if (strstr(s->routes[i].path, path_part))
			s->routes[i].body[s->routes[i].len - 1] ^= 0x55;
	pthread_mutex_unlock(&s->mu);
}

/* ---- tests ---- */

static void test_image__ref_parse_table(void **state)
{
	static const char d[] =
		"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	static const struct {
		const char *in, *host, *repo, *tag;
		bool digest;
	} ok[] = {
		{ "busybox", "docker.io", "library/busybox", "latest", false },
		{ "busybox:1.36", "docker.io", "library/busybox", "1.36", false },
		{ "user/app", "docker.io", "user/app", "latest", false },
		{ "docker.io/library/busybox:latest", "docker.io", "library/busybox", "latest",
		  false },
		{ "index.docker.io/busybox", "docker.io", "library/busybox", "latest", false },
		{ "10.77.0.1:5000/hello:1", "10.77.0.1:5000", "hello", "1", false },
		{ "localhost/a/b", "localhost", "a/b", "latest", false },
		{ "localhost:5000/a", "localhost:5000", "a", "latest", false },
		{ "registry.k8s.io/pause:3.9", "registry.k8s.io", "pause", "3.9", false },
		{ "ghcr.io/o/r/deep_er-x.y:v1.2-rc_3", "ghcr.io", "o/r/deep_er-x.y", "v1.2-rc_3",
		  false },
	};
	static const char *const bad[] = {
		"",   "Busybox",      "a/b:",	    "a//b",	      "a:b:c",
		"-a", "a@sha256:xyz", "a@md5:0123", "host:99999999/x"
	};
	char buf[200];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		struct image_ref r = { 0 };
		struct err err = ERR_INIT;

		if (image_ref_parse(ok[i].in, &r, &err) < 0)
			fail_msg("%s: %s", ok[i].in, err.msg);
		assert_string_equal(r.host, ok[i].host);
		assert_string_equal(r.repository, ok[i].repo);
		assert_string_equal(r.tag, ok[i].tag);
		assert_null(r.digest);
		image_ref_release(&r);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct image_ref r = { 0 };
		struct err err = ERR_INIT;

		if (image_ref_parse(bad[i], &r, &err) == 0)
			fail_msg("\"%s\" was accepted", bad[i]);
		assert_int_equal(err.code, EINVAL);
	}
	{
		struct image_ref r = { 0 };
		struct err err = ERR_INIT;
		char *s;

		snprintf(buf, sizeof(buf), "x/y@%s", d);
		assert_int_equal(image_ref_parse(buf, &r, &err), 0);
		assert_string_equal(r.repository, "x/y");
		assert_null(r.tag);
		assert_string_equal(r.digest, d);
		s = image_ref_string(&r);
		snprintf(buf, sizeof(buf), "docker.io/x/y@%s", d);
		assert_string_equal(s, buf);
		free(s);
		image_ref_release(&r);
		snprintf(buf, sizeof(buf), "quay.io/a/b:v1@%s", d);
		assert_int_equal(image_ref_parse(buf, &r, &err), 0);
		assert_string_equal(r.tag, "v1");
		assert_string_equal(r.digest, d);
		image_ref_release(&r);
	}
}

static void check_app(struct fix *f, const struct image_info *info, const struct pub *p,
		      const char *ref)
{
	_cleanup_free_ char *blob = xasprintf("%s/blobs/sha256/%s", f->root, p->layer_digest + 7);
	_cleanup_free_ char *rd =
		xasprintf("127.0.0.1:%d/test/app@%s", f->srv.port, p->manifest_digest);

	assert_string_equal(info->ref, ref);
	assert_string_equal(info->image_id, p->config_digest);
	assert_string_equal(info->repo_digest, rd);
	assert_string_equal(rootfs_file(info, "bin/app"), "app-binary");
	assert_string_equal(info->entrypoint[0], "/bin/app");
	assert_null(info->entrypoint[1]);
	assert_string_equal(info->cmd[0], "--serve");
	assert_string_equal(info->env[1], "MODE=test");
	assert_null(info->env[2]);
	assert_string_equal(info->user, "1000:1000");
	assert_string_equal(info->working_dir, "/srv");
	assert_true(info->size > 0);
	assert_true(fs_exists(blob));
}

static void test_image__pull_oci_manifest_and_lookup_after_restart(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":1");
	_cleanup_free_ char *norm = ref_of(f, ":1");

	publish(&f->srv, "1", false, app_files, ARRAY_SIZE(app_files), false, &p);
	if (image_pull(f->store, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	check_app(f, info, &p, norm);
	image_info_free(info);

	/* a second pull is served from the cache */
	assert_int_equal(image_pull(f->store, ref, NULL, &info, &err), 0);
	image_info_free(info);
	assert_int_equal(route_hits(&f->srv, "/v2/test/app/manifests/1"), 1);

	/* after a restart the image is still known, by reference and by id */
	image_store_free(f->store);
	fix_open_store(f);
	assert_int_equal(image_lookup(f->store, ref, &info, &err), 0);
	check_app(f, info, &p, norm);
	image_info_free(info);
	assert_int_equal(image_lookup(f->store, p.config_digest, &info, &err), 0);
	assert_string_equal(info->image_id, p.config_digest);
	image_info_free(info);
	assert_int_equal(image_lookup(f->store, "busybox", &info, &err), -ENOENT);
	pub_release(&p);
}

/* A cell sharing the node's disk reads the node's store without opening it; removing an
 * image takes its root file system, record and unshared blob, and the store forgets it. */
static void test_image__read_by_id_then_remove(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL, *read = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":1");
	_cleanup_free_ char *blob = NULL;
	_cleanup_free_ char *rootfs = NULL;
	_cleanup_free_ char *images = xasprintf("%s/images", f->root);
	char **ids;

	publish(&f->srv, "1", false, app_files, ARRAY_SIZE(app_files), false, &p);
	if (image_pull(f->store, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	if (image_read(f->root, p.config_digest, &read, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(read->rootfs, info->rootfs);
	assert_string_equal(read->image_id, p.config_digest);
	assert_string_equal(read->entrypoint[0], "/bin/app");
	assert_string_equal(read->user, "1000:1000");
	assert_string_equal(rootfs_file(read, "bin/app"), "app-binary");
	image_info_free(read);
	rootfs = xstrdup(info->rootfs);
	image_info_free(info);

	assert_int_equal(image_read(f->root, "sha256:nothex", &read, &err), -EINVAL);
	assert_int_equal(image_read(f->root,
				    "sha256:"
				    "0000000000000000000000000000000000000000"
				    "000000000000000000000000",
				    &read, &err),
			 -ENOENT);
	assert_non_null(strstr(err.msg, "not in the store"));

	ids = image_store_ids(f->store);
	assert_string_equal(ids[0], p.config_digest);
	assert_null(ids[1]);
	free(ids[0]);
	free(ids);

	blob = xasprintf("%s/blobs/sha256/%s", f->root, p.layer_digest + 7);
	assert_true(fs_exists(blob));
	if (image_remove(f->store, p.config_digest, &err) < 0)
		fail_msg("%s", err.msg);
	assert_false(fs_exists(blob));
	assert_false(fs_exists(rootfs));
	assert_int_equal(image_lookup(f->store, ref, &info, &err), -ENOENT);
	assert_int_equal(image_read(f->root, p.config_digest, &read, &err), -ENOENT);
	image_store_drain(f->store);
	assert_int_equal(dir_entries(images), 0);
	/* absent: not an error */
	assert_int_equal(image_remove(f->store, p.config_digest, &err), 0);

	/* a pull after the removal fetches it again, and the record now lists its layers so a
	 * restart keeps the blob it uses */
	if (image_pull(f->store, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	image_info_free(info);
	image_store_free(f->store);
	fix_open_store(f);
	assert_true(fs_exists(blob));
	pub_release(&p);
}

static void test_image__pull_docker_manifest_by_digest(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = NULL;

	publish(&f->srv, "d", true, app_files, ARRAY_SIZE(app_files), false, &p);
	ref = xasprintf("127.0.0.1:%d/test/app@%s", f->srv.port, p.manifest_digest);
	if (image_pull(f->store, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	check_app(f, info, &p, ref);
	image_info_free(info);
	pub_release(&p);
}

static void test_image__index_picks_linux_amd64(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":multi");
	_cleanup_free_ char *index = NULL;
	_cleanup_free_ char *index_digest = NULL;
	_cleanup_free_ char *rd = NULL;

	publish(&f->srv, "amd64-only", false, app_files, ARRAY_SIZE(app_files), false, &p);
	index = xasprintf(
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		"\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"sha256:%064d\",\"size\":10,\"platform\":{\"architecture\":\"arm64\","
		"\"os\":\"linux\"}},{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"architecture\":\"amd64\","
		"\"os\":\"linux\"}}]}",
		0, p.manifest_digest, strlen(p.manifest));
	index_digest = sha256_of(index, strlen(index));
	route_add(&f->srv, "/v2/test/app/manifests/multi", 200,
		  "application/vnd.oci.image.index.v1+json", index, strlen(index), false);
	if (image_pull(f->store, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	rd = xasprintf("127.0.0.1:%d/test/app@%s", f->srv.port, index_digest);
	assert_string_equal(info->image_id, p.config_digest);
	assert_string_equal(info->repo_digest, rd); /* the digest the tag points at */
	assert_string_equal(rootfs_file(info, "bin/app"), "app-binary");
	image_info_free(info);
	pub_release(&p);
}

static void test_image__index_without_amd64_names_what_it_has(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	_cleanup_free_ char *ref = ref_of(f, ":arm");
	const char *index =
		"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha256:"
		"0000000000000000000000000000000000000000000000000000000000000000\",\"size\":1,"
		"\"platform\":{\"architecture\":\"arm64\",\"os\":\"linux\"}}]}";

	route_add(&f->srv, "/v2/test/app/manifests/arm", 200,
		  "application/vnd.oci.image.index.v1+json", index, strlen(index), false);
	assert_true(image_pull(f->store, ref, NULL, &info, &err) < 0);
	assert_non_null(strstr(err.msg, "no linux/amd64 image in the index (it has: linux/arm64)"));
}

static void test_image__bearer_token_auth(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":private");
	struct image_auth wrong = { .username = "alice", .password = "nope" };
	struct image_auth right = { .auth = "YWxpY2U6czNjcmV0" };

	publish(&f->srv, "private", false, app_files, ARRAY_SIZE(app_files), true, &p);
	assert_true(image_pull(f->store, ref, NULL, &info, &err) < 0);
	assert_int_equal(err.code, EACCES);
	assert_non_null(strstr(err.msg, "unauthorized"));
	err_clear(&err);
	assert_true(image_pull(f->store, ref, &wrong, &info, &err) < 0);
	assert_non_null(strstr(err.msg, "unauthorized"));
	assert_null(strstr(err.msg, "nope")); /* no secret in the message */
	err_clear(&err);
	if (image_pull(f->store, ref, &right, &info, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(info->image_id, p.config_digest);
	image_info_free(info);
	pub_release(&p);
}

static void test_image__blob_digest_mismatch_is_refused(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":bad");
	_cleanup_free_ char *want = NULL;
	_cleanup_free_ char *blob = NULL;
	_cleanup_free_ char *dir = NULL;

	publish(&f->srv, "bad", false, app_files, ARRAY_SIZE(app_files), false, &p);
	corrupt_routes(&f->srv, p.layer_digest);
	assert_true(image_pull(f->store, ref, NULL, &info, &err) < 0);
	assert_int_equal(err.code, EBADMSG);
	want = xasprintf("blob %s: the content does not match its digest", p.layer_digest);
	assert_non_null(strstr(err.msg, want));
	/* nothing of what answered: the digest asked for is the only one named */
	assert_null(strstr(strstr(err.msg, "sha256:") + 7, "sha256:"));
	blob = xasprintf("%s/blobs/sha256/%s", f->root, p.layer_digest + 7);
	dir = xasprintf("%s/images/%s", f->root, p.config_digest + 7);
	assert_false(fs_exists(blob));
	assert_false(fs_exists(dir));
	pub_release(&p);
}

static void test_image__unknown_manifest_is_404(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	_cleanup_free_ char *ref = ref_of(f, ":nope");

	assert_int_equal(image_pull(f->store, ref, NULL, &info, &err), -ENOENT);
	assert_non_null(strstr(err.msg, ref));
	assert_non_null(strstr(err.msg, "manifest unknown (404)"));
}

static void test_image__connection_refused_names_the_endpoint(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	int port = closed_port();
	_cleanup_free_ char *ref = xasprintf("127.0.0.1:%d/test/app:1", port);
	_cleanup_free_ char *where = xasprintf("127.0.0.1:%d", port);
	char conf[128];
	struct regconf *rc = NULL;
	struct image_store *st = NULL;
	json_t *j;

	snprintf(conf, sizeof(conf), "{\"127.0.0.1:%d\": {\"insecure\": true}}", port);
	j = json_loads(conf, 0, NULL);
	assert_int_equal(regconf_from_json(j, &rc, &err), 0);
	json_decref(j);
	assert_int_equal(image_store_new(f->root, rc, &st, &err), 0);
	assert_int_equal(image_pull(st, ref, NULL, &info, &err), -ECONNREFUSED);
	assert_non_null(strstr(err.msg, "unreachable"));
	assert_non_null(strstr(err.msg, where));
	image_store_free(st);
	regconf_free(rc);
}

static void test_image__malformed_manifests_are_refused(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	_cleanup_free_ char *r1 = ref_of(f, ":junk");
	_cleanup_free_ char *r2 = ref_of(f, ":nolayers");
	_cleanup_free_ char *r3 = ref_of(f, ":v1");
	const char *nolayers = "{\"schemaVersion\":2,\"mediaType\":"
			       "\"application/vnd.oci.image.manifest.v1+json\",\"config\":{}}";
	const char *v1 = "{\"schemaVersion\":1,\"mediaType\":"
			 "\"application/vnd.docker.distribution.manifest.v1+prettyjws\"}";

	route_add(&f->srv, "/v2/test/app/manifests/junk", 200, "application/json", "{not json", 9,
		  false);
	route_add(&f->srv, "/v2/test/app/manifests/nolayers", 200, NULL, nolayers, strlen(nolayers),
		  false);
	route_add(&f->srv, "/v2/test/app/manifests/v1", 200, NULL, v1, strlen(v1), false);
	assert_true(image_pull(f->store, r1, NULL, &info, &err) < 0);
	assert_non_null(strstr(err.msg, "malformed manifest junk: invalid JSON"));
	err_clear(&err);
	assert_true(image_pull(f->store, r2, NULL, &info, &err) < 0);
	assert_non_null(strstr(err.msg, "malformed manifest: config: missing digest"));
	err_clear(&err);
	assert_true(image_pull(f->store, r3, NULL, &info, &err) < 0);
	assert_non_null(strstr(err.msg, "unsupported media type"));
}

/* A manifest that nests deeper than the JSON reader goes is not an image: INVALID_ARGUMENT
 * (EINVAL), saying how deep it may nest, not an unknown error. */
static void test_image__deeply_nested_manifest_is_invalid(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	_cleanup_free_ char *ref = ref_of(f, ":deep");
	struct buf b = BUF_INIT;

	buf_init(&b, 1 << 20);
	buf_appendf(&b, &err, "{\"schemaVersion\":2,\"x\":");
	for (int i = 0; i < 3000; i++)
		buf_append(&b, "[", 1, &err);
	for (int i = 0; i < 3000; i++)
		buf_append(&b, "]", 1, &err);
	buf_append(&b, "}", 1, &err);
	route_add(&f->srv, "/v2/test/app/manifests/deep", 200,
		  "application/vnd.oci.image.manifest.v1+json", buf_str(&b), b.len, false);
	buf_release(&b);
	assert_true(image_pull(f->store, ref, NULL, &info, &err) < 0);
	assert_int_equal(err.code, EINVAL);
	if (!strstr(err.msg, "nests deeper than"))
		fail_msg("%s", err.msg);
	assert_non_null(strstr(err.msg, ref));
}

/* An index whose linux/amd64 entry is another index: INVALID_ARGUMENT, saying so. */
static void test_image__index_of_an_index_is_invalid(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":nested");
	_cleanup_free_ char *inner = NULL, *inner_digest = NULL, *outer = NULL, *path = NULL;

	publish(&f->srv, "leaf", false, app_files, ARRAY_SIZE(app_files), false, &p);
	inner = xasprintf(
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		"\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		"\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"architecture\":\"amd64\","
		"\"os\":\"linux\"}}]}",
		p.manifest_digest, strlen(p.manifest));
	inner_digest = sha256_of(inner, strlen(inner));
	path = xasprintf("/v2/test/app/manifests/%s", inner_digest);
	route_add(&f->srv, path, 200, "application/vnd.oci.image.index.v1+json", inner,
		  strlen(inner), false);
	outer = xasprintf(
		"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		"\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.index.v1+json\","
		"\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"architecture\":\"amd64\","
		"\"os\":\"linux\"}}]}",
		inner_digest, strlen(inner));
	route_add(&f->srv, "/v2/test/app/manifests/nested", 200,
		  "application/vnd.oci.image.index.v1+json", outer, strlen(outer), false);
	assert_true(image_pull(f->store, ref, NULL, &info, &err) < 0);
	assert_int_equal(err.code, EINVAL);
	if (!strstr(err.msg, "is itself an index"))
		fail_msg("%s", err.msg);
	assert_non_null(strstr(err.msg, inner_digest));
	pub_release(&p);
}

static void test_image__mirror_failures_fall_through_to_the_host(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	int dead = closed_port();
	char conf[256];
	struct regconf *rc = NULL;
	struct image_store *st = NULL;
	_cleanup_free_ char *ref = ref_of(f, ":m");
	_cleanup_free_ char *missing = ref_of(f, ":missing");
	_cleanup_free_ char *dead_url = xasprintf("http://127.0.0.1:%d", dead);
	json_t *j;

	publish(&f->srv, "m", false, app_files, ARRAY_SIZE(app_files), false, &p);
	/* a dead mirror, a mirror path where nothing is (404), then the host */
	snprintf(conf, sizeof(conf),
		 "{\"127.0.0.1:%d\": {\"insecure\": true, \"mirrors\": [\"http://127.0.0.1:%d\","
		 " \"http://127.0.0.1:%d/elsewhere\"]}}",
		 f->srv.port, dead, f->srv.port);
	j = json_loads(conf, 0, NULL);
	assert_int_equal(regconf_from_json(j, &rc, &err), 0);
	json_decref(j);
	assert_int_equal(image_store_new(f->root, rc, &st, &err), 0);
	if (image_pull(st, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(info->image_id, p.config_digest);
	image_info_free(info);
	/* when every endpoint fails, the error names each of them */
	assert_true(image_pull(st, missing, NULL, &info, &err) < 0);
	assert_non_null(strstr(err.msg, dead_url));
	assert_non_null(strstr(err.msg, "/elsewhere: manifest unknown (404)"));
	assert_non_null(strstr(err.msg, "unreachable"));
	image_store_free(st);
	regconf_free(rc);
	pub_release(&p);
}

static void test_image__escaping_layer_leaves_no_image(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":evil");
	_cleanup_free_ char *dir = NULL;
	_cleanup_free_ char *tmp = NULL;
	static const char *const evil[] = { "ok", "fine", "../../escaped", "x" };

	publish(&f->srv, "evil", false, evil, ARRAY_SIZE(evil), false, &p);
	assert_true(image_pull(f->store, ref, NULL, &info, &err) < 0);
	assert_non_null(strstr(err.msg, "entry ../../escaped escapes the root"));
	dir = xasprintf("%s/images/%s", f->root, p.config_digest + 7);
	tmp = xasprintf("%s.tmp", dir);
	assert_false(fs_exists(dir));
	assert_false(fs_exists(tmp));
	assert_int_equal(image_lookup(f->store, ref, &info, &err), -ENOENT);
	pub_release(&p);
}

static void test_image__inspect_reads_config_and_fetches_no_layer(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":insp");
	_cleanup_free_ char *rd = NULL;
	_cleanup_free_ char *layer_path = NULL;
	_cleanup_free_ char *blobs = xasprintf("%s/blobs/sha256", f->root);
	_cleanup_free_ char *images = xasprintf("%s/images", f->root);

	publish(&f->srv, "insp", true, app_files, ARRAY_SIZE(app_files), false, &p);
	if (image_inspect(f->rc, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	rd = xasprintf("127.0.0.1:%d/test/app@%s", f->srv.port, p.manifest_digest);
	assert_string_equal(info->ref, ref);
	assert_string_equal(info->repo_digest, rd);
	assert_string_equal(info->image_id, p.config_digest);
	assert_int_equal(info->size, p.layer_size);
	assert_string_equal(info->rootfs, "");
	assert_string_equal(info->entrypoint[0], "/bin/app");
	assert_null(info->entrypoint[1]);
	assert_string_equal(info->cmd[0], "--serve");
	assert_null(info->cmd[1]);
	assert_string_equal(info->env[0], "PATH=/bin");
	assert_string_equal(info->env[1], "MODE=test");
	assert_null(info->env[2]);
	assert_string_equal(info->user, "1000:1000");
	assert_string_equal(info->working_dir, "/srv");
	image_info_free(info);

	/* the layer was never asked for and nothing was stored */
	layer_path = xasprintf("/v2/test/app/blobs/%s", p.layer_digest);
	assert_int_equal(route_hits(&f->srv, layer_path), 0);
	assert_int_equal(route_hits(&f->srv, "/v2/test/app/manifests/insp"), 1);
	assert_int_equal(dir_entries(blobs), 0);
	assert_int_equal(dir_entries(images), 0);

	/* the repo digest it reports is what a later pull by digest fetches */
	if (image_pull(f->store, rd, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(info->image_id, p.config_digest);
	assert_string_equal(info->repo_digest, rd);
	image_info_free(info);
	pub_release(&p);
}

static void test_image__inspect_unknown_manifest_is_404(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	_cleanup_free_ char *ref = ref_of(f, ":absent");
	int port = closed_port();
	_cleanup_free_ char *dead = xasprintf("127.0.0.1:%d/test/app:1", port);
	_cleanup_free_ char *where = xasprintf("127.0.0.1:%d", port);

	assert_int_equal(image_inspect(f->rc, ref, NULL, &info, &err), -ENOENT);
	assert_null(info);
	assert_non_null(strstr(err.msg, ref));
	assert_non_null(strstr(err.msg, "manifest unknown (404)"));

	/* an unreachable registry is named (no registry configuration: HTTPS, refused) */
	err_clear(&err);
	assert_true(image_inspect(NULL, dead, NULL, &info, &err) < 0);
	assert_non_null(strstr(err.msg, "unreachable"));
	assert_non_null(strstr(err.msg, where));
}

static void test_image__inspect_refuses_config_with_wrong_digest(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":badcfg");
	_cleanup_free_ char *want = NULL;

	publish(&f->srv, "badcfg", false, app_files, ARRAY_SIZE(app_files), false, &p);
	corrupt_routes(&f->srv, p.config_digest);
	assert_true(image_inspect(f->rc, ref, NULL, &info, &err) < 0);
	assert_null(info);
	assert_int_equal(err.code, EBADMSG);
	want = xasprintf("blob %s: the content does not match its digest", p.config_digest);
	assert_non_null(strstr(err.msg, want));
	assert_non_null(strstr(err.msg, ref));
	pub_release(&p);
}

struct puller {
	struct fix *f;
	const char *ref;
	int ret;
	struct err err;
	struct image_info *info;
};

static void *pull_thread(void *arg)
{
	struct puller *p = arg;

	p->ret = image_pull(p->f->store, p->ref, NULL, &p->info, &p->err);
	return NULL;
}

static void test_image__concurrent_pulls_download_once(void **state)
{
	struct fix *f = *state;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":c");
	_cleanup_free_ char *blob = NULL;
	struct puller ps[4];
	pthread_t th[4];

	publish(&f->srv, "c", false, app_files, ARRAY_SIZE(app_files), false, &p);
	for (int i = 0; i < 4; i++) {
		ps[i] = (struct puller){ .f = f, .ref = ref };
		assert_int_equal(pthread_create(&th[i], NULL, pull_thread, &ps[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		if (ps[i].ret < 0)
			fail_msg("%s", ps[i].err.msg);
		assert_string_equal(ps[i].info->image_id, p.config_digest);
		image_info_free(ps[i].info);
	}
	blob = xasprintf("/v2/test/app/blobs/%s", p.layer_digest);
	assert_int_equal(route_hits(&f->srv, blob), 1);
	assert_int_equal(route_hits(&f->srv, "/v2/test/app/manifests/c"), 1);
	pub_release(&p);
}

/* How many entries of directory path have part in their name. */
static int dir_entries_with(const char *path, const char *part)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		n += strstr(de->d_name, part) != NULL;
	closedir(d);
	return n;
}

/* A removal does not wait for its tree to be deleted: the image is gone when image_remove
 * returns, its tree renamed out of the way; the same image pulled and removed again while the
 * first tree is still there gets a name of its own; the store's thread deletes both, and a
 * store opened over a removal a crash cut short deletes what it left. */
static void test_image__a_removal_returns_before_its_tree_is_deleted(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	struct pub p = { 0 };
	_cleanup_free_ char *ref = ref_of(f, ":1");
	_cleanup_free_ char *images = xasprintf("%s/images", f->root);
	_cleanup_free_ char *rootfs = NULL;
	_cleanup_free_ char *left = NULL;

	publish(&f->srv, "1", false, app_files, ARRAY_SIZE(app_files), false, &p);
	image_store_hold_removals(f->store, true);
	for (int round = 1; round <= 2; round++) {
		if (image_pull(f->store, ref, NULL, &info, &err) < 0)
			fail_msg("round %d: %s", round, err.msg);
		assert_string_equal(rootfs_file(info, "bin/app"), "app-binary");
		free(rootfs);
		rootfs = xstrdup(info->rootfs);
		image_info_free(info);
		if (image_remove(f->store, p.config_digest, &err) < 0)
			fail_msg("round %d: %s", round, err.msg);
		assert_false(fs_exists(rootfs));
		assert_int_equal(image_lookup(f->store, ref, &info, &err), -ENOENT);
		assert_int_equal(dir_entries_with(images, ".tmp-removed"), round);
	}
	image_store_hold_removals(f->store, false);
	image_store_drain(f->store);
	assert_int_equal(dir_entries(images), 0);

	/* a removal's leftover after a crash: the next store deletes it */
	left = xasprintf("%s/%s.tmp-removed-7", images, p.config_digest + 7);
	assert_int_equal(fs_mkdir_p(left, 0755, &err), 0);
	image_store_free(f->store);
	fix_open_store(f);
	assert_int_equal(dir_entries(images), 0);
	pub_release(&p);
}

/* The status of rootfs/rel (which must exist). */
static struct stat rootfs_stat(const struct image_info *info, const char *rel)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", info->rootfs, rel);
	struct stat st;

	if (lstat(path, &st) < 0)
		fail_msg("%s: %s", path, strerror(errno));
	return st;
}

static const char *const base_files[] = { "bin/", NULL, "bin/app",  "app-binary",
					  "etc/", NULL, "etc/old",  "old",
					  "lib/", NULL, "lib/libc", "libc" };
static const char *const top_files[] = { "bin/", NULL,		"bin/app", "new-binary", "etc/",
					 NULL,	 "etc/.wh.old", "",	   "etc/new",	 "new" };

/* An image whose first layer is an image of the store starts from that image's files: hard
 * links, its layer not fetched again; what its own layers change (a file replaced, one
 * whited out) changes it alone; either image removed leaves the other whole. */
static void test_image__a_pull_starts_from_an_image_with_its_first_layers(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *base = NULL, *derived = NULL, *again = NULL;
	const struct layer_spec layers[] = { { base_files, ARRAY_SIZE(base_files) },
					     { top_files, ARRAY_SIZE(top_files) } };
	char *digests[2] = { 0 }, *d2[1] = { 0 };
	_cleanup_free_ char *base_id = publish_layers(&f->srv, "base", layers, 1, d2);
	_cleanup_free_ char *derived_id = publish_layers(&f->srv, "derived", layers, 2, digests);
	_cleanup_free_ char *base_ref = ref_of(f, ":base");
	_cleanup_free_ char *derived_ref = ref_of(f, ":derived");
	_cleanup_free_ char *l0 = xasprintf("/v2/test/app/blobs/%s", digests[0]);
	struct stat a, b;

	assert_string_equal(d2[0], digests[0]);
	if (image_pull(f->store, base_ref, NULL, &base, &err) < 0)
		fail_msg("%s", err.msg);
	if (image_pull(f->store, derived_ref, NULL, &derived, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(derived->image_id, derived_id);
	assert_int_equal(route_hits(&f->srv, l0), 1);
	a = rootfs_stat(base, "lib/libc");
	b = rootfs_stat(derived, "lib/libc");
	assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
	assert_int_equal(a.st_nlink, 2);
	assert_string_equal(rootfs_file(derived, "bin/app"), "new-binary");
	assert_string_equal(rootfs_file(derived, "etc/new"), "new");
	assert_int_equal(rootfs_stat(derived, "etc").st_mode & 07777, 0755);
	assert_string_equal(rootfs_file(base, "bin/app"), "app-binary");
	assert_string_equal(rootfs_file(base, "etc/old"), "old");
	_cleanup_free_ char *gone = xasprintf("%s/etc/old", derived->rootfs);
	assert_false(fs_exists(gone));

	/* the base removed: the derived image keeps its files */
	if (image_remove(f->store, base_id, &err) < 0)
		fail_msg("%s", err.msg);
	image_store_drain(f->store);
	assert_string_equal(rootfs_file(derived, "lib/libc"), "libc");
	assert_int_equal(rootfs_stat(derived, "lib/libc").st_nlink, 1);

	/* and the base pulled again is unpacked from the blob the derived image kept */
	if (image_pull(f->store, base_ref, NULL, &again, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(rootfs_file(again, "lib/libc"), "libc");
	assert_int_equal(route_hits(&f->srv, l0), 1);
	image_info_free(base);
	image_info_free(derived);
	image_info_free(again);
	free(digests[0]);
	free(digests[1]);
	free(d2[0]);
}

/* A base image whose tree cannot be linked (here: gone behind the store's back) is no reason
 * to fail: every layer is fetched and unpacked. */
static void test_image__a_base_that_cannot_be_linked_means_unpacking_all(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *base = NULL, *derived = NULL;
	const struct layer_spec layers[] = { { base_files, ARRAY_SIZE(base_files) },
					     { top_files, ARRAY_SIZE(top_files) } };
	char *digests[2] = { 0 }, *d2[1] = { 0 };
	_cleanup_free_ char *base_id = publish_layers(&f->srv, "base", layers, 1, d2);
	_cleanup_free_ char *derived_id = publish_layers(&f->srv, "derived", layers, 2, digests);
	_cleanup_free_ char *base_ref = ref_of(f, ":base");
	_cleanup_free_ char *derived_ref = ref_of(f, ":derived");

	if (image_pull(f->store, base_ref, NULL, &base, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(fs_remove_tree(base->rootfs, &err), 0);
	if (image_pull(f->store, derived_ref, NULL, &derived, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(rootfs_file(derived, "lib/libc"), "libc");
	assert_string_equal(rootfs_file(derived, "bin/app"), "new-binary");
	assert_int_equal(rootfs_stat(derived, "lib/libc").st_nlink, 1);
	image_info_free(base);
	image_info_free(derived);
	free(digests[0]);
	free(digests[1]);
	free(d2[0]);
}

static const char *const l1_files[] = { "one", "1" };
static const char *const l2_files[] = { "two", "2" };
static const char *const l3_files[] = { "three", "3" };

/* A pull's layers download at once: the first layer's answer waits until the second is asked
 * for (a pull fetching one after the other would wait 5 s for nothing and then go on). */
static void test_image__layers_download_at_once(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	const struct layer_spec layers[] = { { base_files, ARRAY_SIZE(base_files) },
					     { l1_files, 2 },
					     { l2_files, 2 } };
	char *digests[3] = { 0 };
	_cleanup_free_ char *id = publish_layers(&f->srv, "three", layers, 3, digests);
	_cleanup_free_ char *ref = ref_of(f, ":three");

	f->srv.hold = xasprintf("/v2/test/app/blobs/%s", digests[0]);
	f->srv.release = xasprintf("/v2/test/app/blobs/%s", digests[1]);
	if (image_pull(f->store, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	assert_false(f->srv.hold_timed_out);
	assert_string_equal(info->image_id, id);
	assert_string_equal(rootfs_file(info, "two"), "2");
	assert_string_equal(rootfs_file(info, "lib/libc"), "libc");
	image_info_free(info);
	for (size_t i = 0; i < 3; i++)
		free(digests[i]);
}

/* One layer that does not match its digest fails the pull with that layer's error (not the
 * cancellation of the others); nothing is recorded and no partial file is left. */
static void test_image__a_bad_layer_among_several_fails_the_pull_cleanly(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;
	struct image_info *info = NULL;
	const struct layer_spec layers[] = { { base_files, ARRAY_SIZE(base_files) },
					     { l1_files, 2 },
					     { l2_files, 2 },
					     { l3_files, 2 } };
	char *digests[4] = { 0 };
	_cleanup_free_ char *id = publish_layers(&f->srv, "bad", layers, 4, digests);
	_cleanup_free_ char *ref = ref_of(f, ":bad");
	_cleanup_free_ char *bad = xasprintf("/v2/test/app/blobs/%s", digests[2]);
	_cleanup_free_ char *images = xasprintf("%s/images", f->root);
	_cleanup_free_ char *blobs = xasprintf("%s/blobs/sha256", f->root);
	_cleanup_free_ char *path = xasprintf("%s/%s", blobs, digests[2] + 7);

	corrupt_routes(&f->srv, bad);
	/* the first layer's answer waits for the bad one's request: both are under way */
	f->srv.hold = xasprintf("/v2/test/app/blobs/%s", digests[0]);
	f->srv.release = xstrdup(bad);
	assert_int_equal(image_pull(f->store, ref, NULL, &info, &err), -EBADMSG);
	assert_non_null(strstr(err.msg, digests[2]));
	assert_non_null(strstr(err.msg, "does not match its digest"));
	assert_int_equal(image_lookup(f->store, ref, &info, &err), -ENOENT);
	assert_int_equal(dir_entries(images), 0);
	assert_int_equal(dir_entries_with(blobs, ".part"), 0);
	assert_false(fs_exists(path));

	/* the registry mended, the same pull succeeds */
	free(f->srv.hold);
	f->srv.hold = NULL;
	corrupt_routes(&f->srv, bad);
	if (image_pull(f->store, ref, NULL, &info, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(info->image_id, id);
	assert_string_equal(rootfs_file(info, "three"), "3");
	image_info_free(info);
	for (size_t i = 0; i < 4; i++)
		free(digests[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image__ref_parse_table),
		cmocka_unit_test_setup_teardown(
			test_image__pull_oci_manifest_and_lookup_after_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__read_by_id_then_remove, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_image__a_removal_returns_before_its_tree_is_deleted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__pull_docker_manifest_by_digest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_image__index_picks_linux_amd64, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_image__index_without_amd64_names_what_it_has,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__bearer_token_auth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__blob_digest_mismatch_is_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_image__unknown_manifest_is_404, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_image__connection_refused_names_the_endpoint,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__deeply_nested_manifest_is_invalid,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__index_of_an_index_is_invalid, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_image__malformed_manifests_are_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_image__mirror_failures_fall_through_to_the_host, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__escaping_layer_leaves_no_image, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_image__concurrent_pulls_download_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_image__a_pull_starts_from_an_image_with_its_first_layers, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_image__a_base_that_cannot_be_linked_means_unpacking_all, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_image__layers_download_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_image__a_bad_layer_among_several_fails_the_pull_cleanly, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_image__inspect_reads_config_and_fetches_no_layer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_image__inspect_unknown_manifest_is_404, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_image__inspect_refuses_config_with_wrong_digest, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
