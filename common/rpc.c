/*
 * rpc.c: the gRPC server over gRPC core (see rpc.h for the model).
 *
 * A few outstanding generic request_call "slots" each own a pluck completion queue that the
 * call will be bound to; the acceptor thread waits on the notification queue, hands the
 * arrived call to its method's pool (or a thread of its own when it streams) and re-arms the
 * slot with a fresh queue. A worker then drives the whole call by plucking its own queue, so no
 * other thread ever touches it. Pools share the server's lock but nothing else: a pool whose
 * threads all wait on a stalled registry delays nobody outside it. What a call does once its
 * thread has it is in rpc_call.c.
 */
#include "rpc.h"

#include <errno.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "rpc_server_internal.h"
#include "xalloc.h"

#define RPC_DEFAULT_THREADS 8
#define RPC_DEFAULT_MAX_QUEUE 4096

/* Tags on the notification queue: a slot pointer, or this sentinel for shutdown. */
static char shutdown_tag;

static struct rpc_call *slot_new(struct rpc_server *s)
{
	struct rpc_call *c = xcalloc(1, sizeof(*c));

	c->srv = s;
	c->cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_call_details_init(&c->details);
	grpc_metadata_array_init(&c->md);
	return c;
}

static int slot_arm(struct rpc_server *s, int i)
{
	struct rpc_call *c = slot_new(s);
	grpc_call_error e = grpc_server_request_call(s->server, &c->call, &c->details, &c->md,
						     c->cq, s->notify_cq, c);

	if (e != GRPC_CALL_OK) {
		log_error("rpc: request_call failed: %d", (int)e);
		rpc_call_free(c);
		s->slots[i] = NULL;
		return -1;
	}
	s->slots[i] = c;
	return 0;
}

static const struct rpc_method *method_find(struct rpc_server *s, grpc_slice path)
{
	size_t n = GRPC_SLICE_LENGTH(path);

	for (size_t i = 0; i < s->n_methods; i++) {
		const char *p = s->methods[i].path;

		if (strlen(p) == n && memcmp(p, GRPC_SLICE_START_PTR(path), n) == 0)
			return &s->methods[i];
	}
	return NULL;
}

static void *stream_thread(void *arg)
{
	struct rpc_call *c = arg;
	struct rpc_server *s = c->srv;

	rpc_call_run(c);
	rpc_call_free(c);
	pthread_mutex_lock(&s->lock);
	s->streams--;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* A worker of one pool: runs the pool's calls, oldest first, until the server stops and the
 * queue is empty. */
static void *worker_thread(void *arg)
{
	struct pool *p = arg;
	struct rpc_server *s = p->srv;

	for (;;) {
		struct rpc_call *c;

		pthread_mutex_lock(&s->lock);
		/* a stopping server's parked calls come back to be ended: wait for them too */
		while (!p->head && !(s->stopping && !s->parked))
			pthread_cond_wait(&p->cond, &s->lock);
		c = p->head;
		if (!c) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		p->head = c->next_job;
		if (!p->head)
			p->tail = NULL;
		p->queued--;
		pthread_mutex_unlock(&s->lock);
		if (rpc_call_run(c) == RPC_PARKED)
			rpc_call_parked(c);
		else
			rpc_call_free(c);
	}
}

/* Puts a parked call back at the head of its pool's queue (it was let in once already, so no
 * bound refuses it). Needs the server's lock. */
static void requeue(struct rpc_server *s, struct rpc_call *c)
{
	struct pool *p = &s->pools[c->method->pool];

	c->park = CALL_RUNNING;
	c->next_job = p->head;
	p->head = c;
	if (!p->tail)
		p->tail = c;
	p->queued++;
	pthread_cond_signal(&p->cond);
	if (--s->parked == 0 && s->stopping)
		for (size_t i = 0; i < s->n_pools; i++)
			pthread_cond_broadcast(&s->pools[i].cond);
}

void rpc_park(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;

	pthread_mutex_lock(&s->lock);
	c->park = CALL_PARKING;
	s->parked++;
	pthread_mutex_unlock(&s->lock);
}

void rpc_unpark(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;

	pthread_mutex_lock(&s->lock);
	if (c->park == CALL_PARKED)
		requeue(s, c);
	else if (c->park == CALL_PARKING) /* its worker has not let it go yet: it will queue it */
		c->park = CALL_UNPARKED;
	pthread_mutex_unlock(&s->lock);
}

void rpc_call_parked(struct rpc_call *c)
{
	struct rpc_server *s = c->srv;

	pthread_mutex_lock(&s->lock);
	if (c->park == CALL_UNPARKED)
		requeue(s, c);
	else
		c->park = CALL_PARKED;
	pthread_mutex_unlock(&s->lock);
}

void rpc_set_note(struct rpc_call *c, void *note)
{
	c->note = note;
}

void *rpc_note(struct rpc_call *c)
{
	return c->note;
}

/* Answers an arrived call here when its method is RPC_INLINE and that needs no wait; else
 * hands it to its method's pool (going on from where it stopped here), or to a thread of its
 * own if it streams. Unknown methods go to the first pool, which answers them UNIMPLEMENTED. */
static void dispatch(struct rpc_server *s, struct rpc_call *c)
{
	const struct rpc_method *m = method_find(s, c->details.method);
	struct pool *p;
	char msg[128];

	c->method = m;
	c->arrived_ns = clock_mono_ns();
	if (m && (m->flags & (RPC_SERVER_STREAM | RPC_BIDI_STREAM))) {
		pthread_t t;

		pthread_mutex_lock(&s->lock);
		s->streams++;
		pthread_mutex_unlock(&s->lock);
		if (pthread_create(&t, NULL, stream_thread, c) == 0) {
			pthread_detach(t);
			return;
		}
		pthread_mutex_lock(&s->lock);
		s->streams--;
		pthread_mutex_unlock(&s->lock);
		rpc_call_refuse(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "no thread for the stream");
		return;
	}
	if (m && (m->flags & RPC_INLINE)) {
		int ret = rpc_call_run_inline(c);

		if (ret == 0) {
			rpc_call_free(c);
			return;
		}
		if (ret == RPC_PARKED) {
			rpc_call_parked(c);
			return;
		}
	}
	p = &s->pools[m ? m->pool : 0];
	pthread_mutex_lock(&s->lock);
	/* an answered call (its answer not gone at once) only waits: no bound refuses it */
	if (s->stopping || (c->stage != STAGE_FINISHING && p->queued >= p->max_queue)) {
		int stopping = s->stopping;

		pthread_mutex_unlock(&s->lock);
		if (c->stage == STAGE_FINISHING) { /* the stopping server ends it soon */
			rpc_call_run(c);
			rpc_call_free(c);
			return;
		}
		snprintf(msg, sizeof(msg), "%d calls already wait for the %s workers; try later",
			 p->max_queue, p->name);
		rpc_call_refuse(c,
				stopping ? GRPC_STATUS_UNAVAILABLE : GRPC_STATUS_RESOURCE_EXHAUSTED,
				stopping ? "the server is stopping" : msg);
		return;
	}
	c->next_job = NULL;
	if (p->tail)
		p->tail->next_job = c;
	else
		p->head = c;
	p->tail = c;
	p->queued++;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&s->lock);
}

static void *acceptor_thread(void *arg)
{
	struct rpc_server *s = arg;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
			s->notify_cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return NULL;
		if (ev.type == GRPC_OP_COMPLETE && ev.tag == &shutdown_tag) {
			pthread_mutex_lock(&s->lock);
			s->shut_down = 1;
			pthread_cond_broadcast(&s->cond);
			pthread_mutex_unlock(&s->lock);
			continue;
		}
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		for (int i = 0; i < RPC_SLOTS; i++) {
			struct rpc_call *c = s->slots[i];

			if (c != ev.tag)
				continue;
			s->slots[i] = NULL;
			if (!ev.success || s->stopping) {
				rpc_call_free(c);
				break;
			}
			if (!s->stopping)
				slot_arm(s, i);
			dispatch(s, c);
			break;
		}
	}
}

static void grpc_log_to_ours(gpr_log_func_args *args)
{
	enum log_level l = args->severity == GPR_LOG_SEVERITY_ERROR ? LOG_WARN : LOG_DEBUG;

	log_msg(l, "grpc: %s:%d: %s", args->file, args->line, args->message);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void do_init(void)
{
	gpr_set_log_function(grpc_log_to_ours);
	grpc_init();
}

void rpc_global_init(void)
{
	pthread_once(&init_once, do_init);
}

/* Checks that every unary method names a pool the config has. */
static int pools_check(const struct rpc_server_config *cfg, struct err *err)
{
	size_t n = cfg->n_pools ? cfg->n_pools : 1;

	if (cfg->n_pools > RPC_MAX_POOLS)
		return err_set(err, EINVAL, "%zu worker pools; at most %d", cfg->n_pools,
			       RPC_MAX_POOLS);
	for (size_t i = 0; i < cfg->n_methods; i++)
		if (cfg->methods[i].pool >= n)
			return err_set(err, EINVAL, "method %s: pool %u, but the server has %zu",
				       cfg->methods[i].path, cfg->methods[i].pool, n);
	return 0;
}

/* Sets up the pools' queues (their threads start with the server). */
static void pools_init(struct rpc_server *s, const struct rpc_server_config *cfg)
{
	s->n_pools = cfg->n_pools ? cfg->n_pools : 1;
	for (size_t i = 0; i < s->n_pools; i++) {
		const struct rpc_pool *c = cfg->n_pools ? &cfg->pools[i] : NULL;
		struct pool *p = &s->pools[i];
		int threads = c ? c->threads : cfg->workers;

		p->srv = s;
		snprintf(p->name, sizeof(p->name), "%s", c && c->name ? c->name : "default");
		p->n_threads = threads > 0 ? threads : RPC_DEFAULT_THREADS;
		p->max_queue = c && c->max_queue > 0 ? c->max_queue : RPC_DEFAULT_MAX_QUEUE;
		p->threads = xcalloc((size_t)p->n_threads, sizeof(pthread_t));
		pthread_cond_init(&p->cond, NULL);
	}
}

static void pools_start(struct rpc_server *s)
{
	for (size_t i = 0; i < s->n_pools; i++)
		for (int j = 0; j < s->pools[i].n_threads; j++)
			if (pthread_create(&s->pools[i].threads[j], NULL, worker_thread,
					   &s->pools[i]) != 0)
				abort();
}

/* Wakes every worker of a stopping server and waits for them (they finish the queues). */
static void pools_stop(struct rpc_server *s)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < s->n_pools; i++)
		pthread_cond_broadcast(&s->pools[i].cond);
	pthread_mutex_unlock(&s->lock);
	for (size_t i = 0; i < s->n_pools; i++) {
		for (int j = 0; j < s->pools[i].n_threads; j++)
			pthread_join(s->pools[i].threads[j], NULL);
		pthread_cond_destroy(&s->pools[i].cond);
		free(s->pools[i].threads);
	}
}

int rpc_server_start(const struct rpc_server_config *cfg, struct rpc_server **out, struct err *err)
{
	struct rpc_server *s;
	grpc_arg args[3];
	grpc_channel_args cargs = { 3, args };
	grpc_server_credentials *creds;
	int port;

	if (pools_check(cfg, err) < 0)
		return -err->code;
	rpc_global_init();
	s = xcalloc(1, sizeof(*s));
	s->methods = cfg->methods;
	s->n_methods = cfg->n_methods;
	s->svc = cfg->svc;
	s->max_message = cfg->max_message ? cfg->max_message : 16u << 20;
	s->observe = cfg->observe;
	s->observe_arg = cfg->observe_arg;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	args[0].type = GRPC_ARG_INTEGER;
	args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	args[0].value.integer = (int)s->max_message;
	args[1].type = GRPC_ARG_INTEGER;
	args[1].key = (char *)GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	args[1].value.integer = (int)s->max_message;
	/* core sets SO_REUSEPORT on its listeners by default, so a second server on the same
	 * address and port binds as well and the kernel splits connections between the two (two
	 * agents of one cell each got calls meant for the other): here a second bind fails */
	args[2].type = GRPC_ARG_INTEGER;
	args[2].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
	args[2].value.integer = 0;
	s->server = grpc_server_create(&cargs, NULL);
	s->notify_cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(s->server, s->notify_cq, NULL);
	if (cfg->tls.ca_pem) {
		grpc_ssl_pem_key_cert_pair pair = { cfg->tls.key_pem, cfg->tls.cert_pem };

		s->peer_name = xstrdup(cfg->tls.peer_name ? cfg->tls.peer_name : "");
		creds = grpc_ssl_server_credentials_create_ex(
			cfg->tls.ca_pem, &pair, 1,
			GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY, NULL);
	} else {
		creds = grpc_insecure_server_credentials_create();
	}
	port = creds ? grpc_server_add_http2_port(s->server, cfg->address, creds) : 0;
	if (creds)
		grpc_server_credentials_release(creds);
	if (port == 0) {
		/* core aborts when destroying a server that was never started and shut down */
		grpc_server_start(s->server);
		grpc_server_shutdown_and_notify(s->server, s->notify_cq, &shutdown_tag);
		/* a queue made for next cannot be plucked (core calls a NULL function) */
		while (grpc_completion_queue_next(s->notify_cq, gpr_inf_future(GPR_CLOCK_REALTIME),
						  NULL)
			       .tag != &shutdown_tag)
			;
		grpc_server_destroy(s->server);
		grpc_completion_queue_shutdown(s->notify_cq);
		while (grpc_completion_queue_next(s->notify_cq, gpr_inf_future(GPR_CLOCK_REALTIME),
						  NULL)
			       .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->notify_cq);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cond);
		free(s->peer_name);
		free(s);
		if (!creds)
			return err_set(err, EINVAL, "cannot make TLS credentials for %s",
				       cfg->address);
		return err_set(err, EADDRINUSE, "cannot listen on %s", cfg->address);
	}
	grpc_server_start(s->server);
	for (int i = 0; i < RPC_SLOTS; i++)
		slot_arm(s, i);
	pools_init(s, cfg);
	pools_start(s);
	pthread_create(&s->acceptor, NULL, acceptor_thread, s);
	*out = s;
	return 0;
}

void rpc_server_stop(struct rpc_server *s)
{
	rpc_server_stop_within(s, 0);
}

void rpc_server_stop_within(struct rpc_server *s, int grace_ms)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	pthread_mutex_unlock(&s->lock);
	grpc_server_shutdown_and_notify(s->server, s->notify_cq, &shutdown_tag);
	if (grace_ms > 0) {
		struct timespec until;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += grace_ms / 1000;
		until.tv_nsec += (long)(grace_ms % 1000) * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&s->lock);
		while (!s->shut_down &&
		       pthread_cond_timedwait(&s->cond, &s->lock, &until) != ETIMEDOUT)
			;
		pthread_mutex_unlock(&s->lock);
	}
	grpc_server_cancel_all_calls(s->server);
	pools_stop(s);
	pthread_mutex_lock(&s->lock);
	while (s->streams > 0)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	grpc_completion_queue_shutdown(s->notify_cq);
	pthread_join(s->acceptor, NULL);
	for (int i = 0; i < RPC_SLOTS; i++)
		if (s->slots[i])
			rpc_call_free(s->slots[i]);
	grpc_server_destroy(s->server);
	grpc_completion_queue_destroy(s->notify_cq);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s->peer_name);
	free(s);
}
