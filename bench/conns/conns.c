/*
 * The connections benchmark: what a live cell's push channel costs kiyot while nothing
 * happens. kiyot holds one to every cell's agent: once a gRPC server stream over TLS (the
 * baseline, measured here too), now the cell feed (common/feed.h). N connections of each
 * kind are opened from this process to servers in a child process, each gets one message,
 * then all sit idle; printed: heap in use (mallinfo2) and RSS per connection, and the feed's
 * figures over gRPC's. Both use the same certificates (TLS 1.3, EC P-256); the feed runs over
 * loopback TCP, gRPC over a unix socket.
 *
 *	make bench-conns && build/bench/conns          (KIYOT_BENCH_CONNS=N, default 200)
 */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cellagent.pb-c.h"
#include "feed.h"
#include "pki.h"
#include "rpc.h"
#include "clock.h"
#include "xalloc.h"

/* The throughput run: log chunks of the agent's size, this many MiB over one connection. */
#define CHUNK (256 * 1024)
#define BULK_MIB 256

struct certs {
	char *ca, *ca_key;
	char *agent_key, *agent_cert;
	char *kiyot_key, *kiyot_cert;
};

static void die(const char *what, const struct err *err)
{
	fprintf(stderr, "conns: %s: %s\n", what, err->msg);
	exit(1);
}

static void ident(struct certs *c, const char *name, enum pki_usage u, char **key, char **cert)
{
	struct err err = ERR_INIT;
	char *csr = NULL;

	if (pki_key_new(key, &err) < 0 || pki_csr_new(*key, name, &csr, &err) < 0 ||
	    pki_sign(c->ca, c->ca_key, csr, name, u, 1, cert, &err) < 0)
		die(name, &err);
	free(csr);
}

static Kiyot__Cell__V1__WatchEvent synced(void)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

	ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__SYNCED;
	return ev;
}

/* How many log chunks of CHUNK bytes a request asks for in one go ("bulk" offset), or 0. */
static uint64_t bulk_of(const ProtobufCMessage *req)
{
	const Kiyot__Cell__V1__WatchRequest *r = (const void *)req;

	return r->n_offsets && strcmp(r->offsets[0]->unit_id, "bulk") == 0 ? r->offsets[0]->offset
									   : 0;
}

/* The agent's side of both: a bulk request's chunks then the end, else one event and nothing
 * until the client goes. */
static int agent_watch(const ProtobufCMessage *req,
		       int (*send)(void *, const ProtobufCMessage *, struct err *),
		       bool (*gone)(void *), void *to, struct err *err)
{
	Kiyot__Cell__V1__WatchEvent ev = synced();
	uint64_t bulk = bulk_of(req);
	int ret = 0;

	if (bulk) {
		uint8_t *chunk = xcalloc(1, CHUNK);

		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG;
		ev.unit_id = (char *)"bulk";
		ev.data.data = chunk;
		ev.data.len = CHUNK;
		for (uint64_t i = 0; i < bulk && ret == 0; i++, ev.offset += CHUNK)
			ret = send(to, &ev.base, err);
		free(chunk);
		return ret;
	}
	if ((ret = send(to, &ev.base, err)) < 0)
		return ret;
	while (!gone(to))
		usleep(100 * 1000);
	return 0;
}

static int feed_sink(void *to, const ProtobufCMessage *m, struct err *err)
{
	return feed_send(to, m, err);
}

static bool feed_sink_gone(void *to)
{
	return feed_gone(to);
}

static void feed_session(void *arg, struct feed_conn *c, const ProtobufCMessage *req)
{
	struct err err = ERR_INIT;

	(void)arg;
	agent_watch(req, feed_sink, feed_sink_gone, c, &err);
}

static int grpc_sink(void *to, const ProtobufCMessage *m, struct err *err)
{
	return rpc_send(to, m, err);
}

static bool grpc_sink_gone(void *to)
{
	return rpc_cancelled(to);
}

static int grpc_watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	(void)svc;
	(void)resp;
	if (agent_watch(req, grpc_sink, grpc_sink_gone, call, err) < 0)
		return -err->code;
	return bulk_of(req) ? 0 : err_set(err, ECANCELED, "watch ended");
}

static const struct rpc_method methods[] = {
	{ "/kiyot.cell.v1.CellAgent/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__watch_event__descriptor, grpc_watch, RPC_SERVER_STREAM, 0 },
};

/* The child: both servers, until the parent closes the pipe. */
static void serve(const struct certs *c, int n, const char *grpc_addr, int wfd, int rfd)
{
	struct feed_server_config fc = { 0 };
	struct rpc_server_config rc = { 0 };
	struct feed_server *fs = NULL;
	struct rpc_server *rs = NULL;
	struct err err = ERR_INIT;
	char b;
	int port;

	if (pki_tls_ctx(c->ca, c->agent_cert, c->agent_key, PKI_SERVER, "kiyot", &fc.ctx, &err) < 0)
		die("server TLS", &err);
	fc.address = "127.0.0.1:0";
	fc.req_desc = &kiyot__cell__v1__watch_request__descriptor;
	fc.max_request = 4096;
	fc.max_conns = n + 8;
	fc.max_pending_per_peer = n + 8; /* all of them come from this process at once */
	fc.session = feed_session;
	rc.address = grpc_addr;
	rc.methods = methods;
	rc.n_methods = 1;
	rc.workers = n + 8;
	rc.tls = (struct rpc_tls){ c->ca, c->agent_cert, c->agent_key, "kiyot" };
	if (feed_server_start(&fc, &fs, &err) < 0 || rpc_server_start(&rc, &rs, &err) < 0)
		die("servers", &err);
	port = feed_server_port(fs);
	if (write(wfd, &port, sizeof(port)) != sizeof(port))
		exit(1);
	while (read(rfd, &b, 1) > 0)
		;
	_exit(0);
}

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = 0;

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			v = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

struct mark {
	size_t heap;
	long rss;
};

static struct mark mark(void)
{
	malloc_trim(0);
	return (struct mark){ mallinfo2().uordblks, rss_kb() };
}

/* Feeds: each counts its message; all end by cancel. */
struct feeds {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int got, ended;
};

static void on_msg(void *arg, const ProtobufCMessage *msg)
{
	struct feeds *f = arg;

	(void)msg;
	pthread_mutex_lock(&f->lock);
	f->got++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void on_end(void *arg, int ret, const struct err *err)
{
	struct feeds *f = arg;

	if (ret < 0 && ret != -ECANCELED) {
		/* the figures would be of fewer connections than said: none at all */
		fprintf(stderr, "conns: a feed ended: %s\n", err->msg);
		exit(1);
	}
	pthread_mutex_lock(&f->lock);
	f->ended++;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
}

static void wait_count(struct feeds *f, int *what, int n)
{
	pthread_mutex_lock(&f->lock);
	while (*what < n)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

/* A Watch of the test's agent over a feed; dies on failure. */
static struct feed_watch *open_feed(struct feed_loop *loop, SSL_CTX *ctx, const char *target,
				    const Kiyot__Cell__V1__WatchRequest *req, struct feeds *f)
{
	struct feed_open_args a = { .ctx = ctx,
				    .target = target,
				    .peer_name = "cell-a",
				    .request = &req->base,
				    .msg_desc = &kiyot__cell__v1__watch_event__descriptor,
				    .max_frame = 1u << 20,
				    .on_msg = on_msg,
				    .on_end = on_end,
				    .arg = f };
	struct feed_watch *w = NULL;
	struct err err = ERR_INIT;

	if (feed_open(loop, &a, &w, &err) < 0)
		die("feed", &err);
	return w;
}

/* n idle feeds: what they cost (heap and RSS, after over before). */
static struct mark feeds_cost(const struct certs *c, int n, const char *target)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct feed_watch **w = xcalloc((size_t)n, sizeof(*w));
	struct feeds f = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct feed_loop *loop = NULL;
	struct err err = ERR_INIT;
	struct mark m0, m1;
	SSL_CTX *ctx = NULL;

	if (feed_loop_new(2, &loop, &err) < 0 ||
	    pki_tls_ctx(c->ca, c->kiyot_cert, c->kiyot_key, PKI_CLIENT, NULL, &ctx, &err) < 0)
		die("feed client", &err);
	m0 = mark();
	for (int i = 0; i < n; i++) {
		w[i] = open_feed(loop, ctx, target, &req, &f);
	}
	wait_count(&f, &f.got, n);
	usleep(200 * 1000);
	m1 = mark();
	for (int i = 0; i < n; i++)
		feed_cancel(w[i]);
	wait_count(&f, &f.ended, n);
	feed_loop_free(loop);
	SSL_CTX_free(ctx);
	free(w);
	return (struct mark){ m1.heap - m0.heap, m1.rss - m0.rss };
}

/* n idle gRPC server streams, each on a channel of its own as kiyot had one per cell. */
static struct mark grpc_cost(const struct certs *c, int n, const char *target)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct rpc_tls tls = { c->ca, c->kiyot_cert, c->kiyot_key, "cell-a" };
	struct rpc_channel **ch = xcalloc((size_t)n, sizeof(*ch));
	struct rpc_stream **s = xcalloc((size_t)n, sizeof(*s));
	struct err err = ERR_INIT;
	struct mark m0, m1;

	m0 = mark();
	for (int i = 0; i < n; i++) {
		ProtobufCMessage *msg = NULL;

		if (rpc_channel_new_tls(target, &tls, &ch[i], &err) < 0 ||
		    rpc_stream_open(ch[i], "/kiyot.cell.v1.CellAgent/Watch", &req.base,
				    &kiyot__cell__v1__watch_event__descriptor, 0, &s[i],
				    &err) < 0 ||
		    rpc_stream_next(s[i], &msg, &err) != 1)
			die("gRPC stream", &err);
		protobuf_c_message_free_unpacked(msg, NULL);
	}
	usleep(200 * 1000);
	m1 = mark();
	for (int i = 0; i < n; i++) {
		rpc_stream_cancel(s[i]);
		rpc_stream_free(s[i]);
		rpc_channel_free(ch[i]);
	}
	free(s);
	free(ch);
	return (struct mark){ m1.heap - m0.heap, m1.rss - m0.rss };
}

/* A bulk request: BULK_MIB of chunks. */
static void bulk_request(Kiyot__Cell__V1__WatchRequest *req, Kiyot__Cell__V1__LogOffset *o,
			 Kiyot__Cell__V1__LogOffset **list)
{
	kiyot__cell__v1__log_offset__init(o);
	o->unit_id = (char *)"bulk";
	o->offset = (uint64_t)BULK_MIB * 1024 * 1024 / CHUNK;
	list[0] = o;
	req->offsets = list;
	req->n_offsets = 1;
}

/* Seconds to read BULK_MIB over one feed. */
static double feed_bulk(const struct certs *c, const char *target)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__LogOffset o, *list[1];
	struct feeds f = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct feed_loop *loop = NULL;
	struct err err = ERR_INIT;
	SSL_CTX *ctx = NULL;
	int64_t t0;

	bulk_request(&req, &o, list);
	if (feed_loop_new(2, &loop, &err) < 0 ||
	    pki_tls_ctx(c->ca, c->kiyot_cert, c->kiyot_key, PKI_CLIENT, NULL, &ctx, &err) < 0)
		die("feed client", &err);
	t0 = clock_mono_ns();
	open_feed(loop, ctx, target, &req, &f); /* it ends once the agent sent all */
	wait_count(&f, &f.ended, 1);
	t0 = clock_mono_ns() - t0;
	if ((uint64_t)f.got != o.offset) {
		fprintf(stderr, "conns: the feed brought %d chunks of %llu\n", f.got,
			(unsigned long long)o.offset);
		exit(1);
	}
	feed_loop_free(loop);
	SSL_CTX_free(ctx);
	return (double)t0 / 1e9;
}

/* Seconds to read BULK_MIB over one gRPC server stream. */
static double grpc_bulk(const struct certs *c, const char *target)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__LogOffset o, *list[1];
	struct rpc_tls tls = { c->ca, c->kiyot_cert, c->kiyot_key, "cell-a" };
	struct rpc_channel *ch = NULL;
	struct rpc_stream *s = NULL;
	ProtobufCMessage *msg = NULL;
	struct err err = ERR_INIT;
	uint64_t got = 0;
	int64_t t0;
	int ret;

	bulk_request(&req, &o, list);
	t0 = clock_mono_ns();
	if (rpc_channel_new_tls(target, &tls, &ch, &err) < 0 ||
	    rpc_stream_open(ch, "/kiyot.cell.v1.CellAgent/Watch", &req.base,
			    &kiyot__cell__v1__watch_event__descriptor, 0, &s, &err) < 0)
		die("gRPC stream", &err);
	while ((ret = rpc_stream_next(s, &msg, &err)) == 1) {
		got++;
		protobuf_c_message_free_unpacked(msg, NULL);
	}
	t0 = clock_mono_ns() - t0;
	if (ret < 0 || got != o.offset) {
		fprintf(stderr, "conns: the gRPC stream brought %llu chunks of %llu: %s\n",
			(unsigned long long)got, (unsigned long long)o.offset, err.msg);
		exit(1);
	}
	rpc_stream_free(s);
	rpc_channel_free(ch);
	return (double)t0 / 1e9;
}

int main(void)
{
	const char *env = getenv("KIYOT_BENCH_CONNS");
	char *end = NULL;
	long nl = env ? strtol(env, &end, 10) : 200;
	int n;
	struct certs c = { 0 };
	struct err err = ERR_INIT;
	char grpc_addr[128], sock[96], target[64];
	int up[2], down[2], port = 0;
	struct rlimit rl;
	struct mark feed, grpc;
	double feed_s, grpc_s;
	pid_t child;

	if ((env && (end == env || *end)) || nl < 1 || nl > 5000) {
		fprintf(stderr, "conns: KIYOT_BENCH_CONNS must be 1-5000\n");
		return 2;
	}
	n = (int)nl;
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	signal(SIGPIPE, SIG_IGN);
	if (pki_ca_new("bench-ca", 1, &c.ca, &c.ca_key, &err) < 0)
		die("CA", &err);
	ident(&c, "cell-a", PKI_SERVER, &c.agent_key, &c.agent_cert);
	ident(&c, "kiyot", PKI_CLIENT, &c.kiyot_key, &c.kiyot_cert);
	snprintf(sock, sizeof(sock), "/tmp/kiyot-bench-conns-%d.sock", (int)getpid());
	snprintf(grpc_addr, sizeof(grpc_addr), "unix://%s", sock);
	if (pipe(up) < 0 || pipe(down) < 0)
		return 1;
	child = fork();
	if (child == 0) {
		close(up[0]);
		close(down[1]);
		serve(&c, n, grpc_addr, up[1], down[0]);
	}
	close(up[1]);
	close(down[0]);
	if (read(up[0], &port, sizeof(port)) != sizeof(port)) {
		fprintf(stderr, "conns: the servers did not start\n");
		return 1;
	}
	snprintf(target, sizeof(target), "127.0.0.1:%d", port);
	rpc_global_init();
	feed = feeds_cost(&c, n, target);
	grpc = grpc_cost(&c, n, grpc_addr);
	feed_s = feed_bulk(&c, target);
	grpc_s = grpc_bulk(&c, grpc_addr);
	close(down[1]);
	waitpid(child, NULL, 0);
	unlink(sock);

	printf("\n14. Connections: what kiyot holds per live cell to hear from its agent, %d idle "
	       "connections of each kind (TLS 1.3, EC P-256; the feed over loopback TCP, gRPC over "
	       "a unix socket)\n",
	       n);
	printf("%-34s %14s %14s\n", "kind", "heap KB/conn", "RSS KB/conn");
	printf("%-34s %14.1f %14.1f\n", "gRPC server stream (baseline)",
	       (double)grpc.heap / 1024.0 / n, (double)grpc.rss / n);
	printf("%-34s %14.1f %14.1f\n", "cell feed", (double)feed.heap / 1024.0 / n,
	       (double)feed.rss / n);
	printf("%-34s %13.2fx %13.2fx\n", "cell feed / gRPC", (double)feed.heap / (double)grpc.heap,
	       (double)feed.rss / (double)grpc.rss);
	printf("  heap: glibc's bytes in use (mallinfo2) after opening them, over before; RSS the "
	       "same in VmRSS, after malloc_trim\n");
	printf("\n14b. One connection's throughput: %d MiB of 256 KiB log chunks, as a cell's "
	       "Watch sends a busy unit's log\n",
	       BULK_MIB);
	printf("%-34s %14s %14s\n", "kind", "seconds", "MiB/s");
	printf("%-34s %14.2f %14.0f\n", "gRPC server stream (baseline)", grpc_s, BULK_MIB / grpc_s);
	printf("%-34s %14.2f %14.0f\n", "cell feed", feed_s, BULK_MIB / feed_s);
	printf("%-34s %14s %13.2fx\n", "cell feed / gRPC", "", grpc_s / feed_s);
	return 0;
}
