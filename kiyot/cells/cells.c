/*
 * cells.c: a cell's life (see cells.h): kiyot's CA and certificates, launch, enrollment and
 * the wait for its agent, its Watch and the restarter that opens it again, resume and
 * teardown. The calls made of a running cell's agent are cells_calls.c's.
 */
#include "cells.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "cancel.h"
#include "cells_internal.h"
#include "metrics/metrics.h"
#include "clock.h"
#include "codec.h"
#include "feed.h"
#include "daemon/kiyot.h"
#include "log.h"
#include "pki.h"
#include "state/store.h"
#include "usage_history.h"
#include "version.h"
#include "xalloc.h"

static void *restarter_main(void *arg);

static void wipe_free(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

/* The CA cells' and kiyot's certificates are of, made once and kept in kiyot.db (0600, like
 * the whole state directory). */
static int load_ca(struct cellmgr *m, struct err *err)
{
	struct store *st = m->k->store;

	if (store_get_meta(st, "cell_ca_cert", &m->ca, err) < 0 ||
	    store_get_meta(st, "cell_ca_key", &m->ca_key, err) < 0)
		return -err->code;
	if (m->ca && m->ca_key)
		return 0;
	free(m->ca);
	wipe_free(m->ca_key);
	m->ca = m->ca_key = NULL;
	if (pki_ca_new("kiyot-cells", CERT_DAYS, &m->ca, &m->ca_key, err) < 0)
		return err_wrap(err, "the cells' CA");
	/* the key first: a CA certificate stored without its key would never be replaced */
	if (store_put_meta(st, "cell_ca_key", m->ca_key, err) < 0 ||
	    store_put_meta(st, "cell_ca_cert", m->ca, err) < 0)
		return err_wrap(err, "the cells' CA");
	return 0;
}

/* kiyot's client certificate, named "kiyot": what every agent takes calls from. */
static int make_client_cert(struct cellmgr *m, struct err *err)
{
	_cleanup_free_ char *csr = NULL;

	if (pki_key_new(&m->key, err) < 0 || pki_csr_new(m->key, "kiyot", &csr, err) < 0 ||
	    pki_sign(m->ca, m->ca_key, csr, "kiyot", PKI_CLIENT, CERT_DAYS, &m->cert, err) < 0)
		return err_wrap(err, "kiyot's client certificate");
	return 0;
}

int cells_new(struct kiyot *k, const struct cells_hooks *hooks, struct cellmgr **out,
	      struct err *err)
{
	struct cellmgr *m = xcalloc(1, sizeof(*m));

	pthread_condattr_t ca;
	int rc;

	m->k = k;
	if (hooks)
		m->hooks = *hooks;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (k->agent) {
		m->agent = *k->agent;
	} else if (agent_grpc_new(WATCH_THREADS, &m->agent, err) == 0) {
		m->own_agent = true;
	} else {
		cells_free(m);
		return -err->code;
	}
	if (load_ca(m, err) < 0 || make_client_cert(m, err) < 0) {
		cells_free(m);
		return -err->code;
	}
	if ((rc = pthread_create(&m->restarter, NULL, restarter_main, m)) != 0) {
		cells_free(m);
		return err_set(err, rc, "the cells' watch restarter: %s", strerror(rc));
	}
	m->restarting = true;
	*out = m;
	return 0;
}

/* A TLS connection to the agent of cell id at target: its certificate must name the cell. */
static int cell_connect(struct cellmgr *m, const char *id, const char *target,
			struct agent_conn **conn, struct err *err)
{
	struct agent_tls tls = { m->ca, m->cert, m->key };

	return m->agent.ops->connect(m->agent.self, &tls, id, target, conn, err);
}

/* Ends the cell's Watch for good: none is opened again, and no callback of one uses the
 * entry or the manager any more when this returns. */
static void entry_stop_watch(struct cellmgr *m, struct cell_entry *e)
{
	pthread_mutex_lock(&m->lock);
	e->stop = true;
	e->due_ns = 0;
	if (e->watch)
		m->agent.ops->watch_cancel(m->agent.self, e->watch);
	while (e->opening || e->runs)
		pthread_cond_wait(&m->cond, &m->lock);
	pthread_mutex_unlock(&m->lock);
}

static void entry_free(struct cellmgr *m, struct cell_entry *e)
{
	if (e->conn)
		m->agent.ops->disconnect(m->agent.self, e->conn);
	pthread_mutex_destroy(&e->apply_lock);
	free(e->stats);
	free(e->agent_version);
	free(e->id);
	free(e->target);
	free(e);
}

void cells_free(struct cellmgr *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	m->quit = true; /* no new interruption thread, no Watch opened again */
	pthread_cond_broadcast(&m->cond);
	while (m->interrupt_threads) /* they use the cells and kiyot */
		pthread_cond_wait(&m->cond, &m->lock);
	pthread_mutex_unlock(&m->lock);
	while (m->cells) {
		struct cell_entry *e = m->cells;

		m->cells = e->next;
		entry_stop_watch(m, e);
		cell_entry_put(m, e);
	}
	if (m->restarting) {
		pthread_mutex_lock(&m->lock);
		m->quit = true;
		pthread_cond_broadcast(&m->cond);
		pthread_mutex_unlock(&m->lock);
		pthread_join(m->restarter, NULL);
	}
	while (m->launches) { /* none is left once the CRI server stopped */
		struct cell_launch *l = m->launches;

		m->launches = l->next;
		free(l->cell_id);
		free(l);
	}
	if (m->own_agent)
		agent_grpc_free(&m->agent);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m->ca);
	wipe_free(m->ca_key);
	free(m->cert);
	wipe_free(m->key);
	free(m);
}

static struct cell_entry *entry_find(struct cellmgr *m, const char *id)
{
	for (struct cell_entry *e = m->cells; e; e = e->next)
		if (strcmp(e->id, id) == 0)
			return e;
	return NULL;
}

/* Keeps st as the cell's latest usage. */
void cell_stats_keep(struct cellmgr *m, struct cell_entry *e,
		     const Kiyot__Cell__V1__StatsResponse *st)
{
	size_t n = protobuf_c_message_get_packed_size(&st->base);
	uint8_t *p = xmalloc(n ? n : 1);

	protobuf_c_message_pack(&st->base, p);
	pthread_mutex_lock(&m->lock);
	free(e->stats);
	e->stats = p;
	e->stats_len = n;
	e->stats_ns = clock_mono_ns();
	e->stats_current = true;
	pthread_mutex_unlock(&m->lock);
	usage_history_observe(m->k->store, e->id, st); /* the burst rule's peaks */
}

const struct cells_hooks *cells_hooks(const struct cellmgr *m)
{
	return &m->hooks;
}

/* An interruption hook call on a thread of its own. */
struct interrupt_run {
	struct cellmgr *m;
	char *cell_id;
	struct cell_interruption in;
};

static void *interrupt_main(void *arg)
{
	struct interrupt_run *r = arg;
	struct cellmgr *m = r->m;

	if (m->hooks.interruption)
		m->hooks.interruption(m->hooks.ctx, r->cell_id, &r->in);
	free(r->cell_id);
	free(r);
	pthread_mutex_lock(&m->lock);
	m->interrupt_threads--;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* Keeps what the agent said of its instance's interruption; news (a kind not seen before, or
 * another time) goes to the interruption hook on a thread of its own: it stops containers and
 * waits for the cell, which a Watch callback must not. */
static void interruption_event(struct cellmgr *m, struct cell_entry *e,
			       const Kiyot__Cell__V1__Interruption *w)
{
	struct interrupt_run *r = NULL;
	struct cell_interruption *in = &e->interruption;
	bool news = false;
	pthread_attr_t attr;

	pthread_mutex_lock(&m->lock);
	if (w->kind == KIYOT__CELL__V1__INTERRUPTION__KIND__NOTICE &&
	    (!in->notice || in->notice_time_ns != w->time_unix_ns)) {
		in->notice = news = true;
		in->notice_time_ns = w->time_unix_ns;
		snprintf(in->action, sizeof(in->action), "%.15s", w->action ? w->action : "");
	} else if (w->kind == KIYOT__CELL__V1__INTERRUPTION__KIND__REBALANCE &&
		   (!in->rebalance || in->rebalance_time_ns != w->time_unix_ns)) {
		in->rebalance = news = true;
		in->rebalance_time_ns = w->time_unix_ns;
	}
	if (news && !m->quit) {
		r = xcalloc(1, sizeof(*r));
		*r = (struct interrupt_run){ m, xstrdup(e->id), *in };
		m->interrupt_threads++;
	}
	pthread_mutex_unlock(&m->lock);
	if (!r)
		return;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&(pthread_t){ 0 }, &attr, interrupt_main, r) != 0) {
		log_error("cell %s: no thread to act on its interruption; running it here",
			  r->cell_id);
		interrupt_main(r);
	}
	pthread_attr_destroy(&attr);
}

int cells_interruption(struct cellmgr *m, const char *cell_id, struct cell_interruption *out)
{
	struct cell_entry *e;

	pthread_mutex_lock(&m->lock);
	e = entry_find(m, cell_id);
	if (e)
		*out = e->interruption;
	pthread_mutex_unlock(&m->lock);
	return e ? 0 : -ENOENT;
}

static void handle_event(struct cellmgr *m, struct cell_entry *e,
			 const Kiyot__Cell__V1__WatchEvent *ev)
{
	switch (ev->kind) {
	case KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS:
		if (ev->status) {
			pthread_mutex_lock(&m->lock);
			e->stats_current = false; /* a unit came or went: ask until the next */
			pthread_mutex_unlock(&m->lock);
			if (m->hooks.unit_status)
				m->hooks.unit_status(m->hooks.ctx, e->id, ev->status);
		}
		break;
	case KIYOT__CELL__V1__WATCH_EVENT__KIND__STATS:
		if (ev->stats)
			cell_stats_keep(m, e, ev->stats);
		break;
	case KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG:
		if (m->hooks.unit_log)
			m->hooks.unit_log(m->hooks.ctx, ev->unit_id, ev->offset, ev->data.data,
					  ev->data.len);
		break;
	case KIYOT__CELL__V1__WATCH_EVENT__KIND__INTERRUPTION:
		if (ev->interruption)
			interruption_event(m, e, ev->interruption);
		break;
	default:
		break;
	}
}

/* One Watch of a cell, the argument of its callbacks (counted in the entry's runs). */
struct watch_run {
	struct cellmgr *m;
	struct cell_entry *e;
	bool got_event;
};

static void watch_event(void *arg, const Kiyot__Cell__V1__WatchEvent *ev)
{
	struct watch_run *run = arg;

	handle_event(run->m, run->e, ev);
	run->got_event = true;
}

/* Under the manager's lock: a Watch of e ended with ret (after events, if got_event); the
 * next one is due after the back-off, which doubles while Watches end without an event. An
 * agent refusing three times in a row may be gone: the provider heals the cell first. */
static void watch_ended(struct cellmgr *m, struct cell_entry *e, bool got_event, int ret,
			const struct err *err)
{
	if (got_event) {
		e->backoff_ms = WATCH_BACKOFF_MIN_MS;
		e->refused = 0;
	}
	if (ret < 0 && err->code == ECONNREFUSED && ++e->refused >= 3) {
		e->refused = 0;
		e->heal = true;
	}
	if (!e->stop) {
		log_debug("cell %s: watch ended (%s); reconnecting", e->id,
			  ret < 0 ? err->msg : "closed");
		e->due_ns = clock_mono_ns() + (int64_t)e->backoff_ms * 1000000;
		e->backoff_ms = e->backoff_ms < WATCH_BACKOFF_MAX_MS / 2 ? e->backoff_ms * 2
									 : WATCH_BACKOFF_MAX_MS;
	}
	pthread_cond_broadcast(&m->cond);
}

static void watch_end(void *arg, int ret, const struct err *err)
{
	struct watch_run *run = arg;
	struct cellmgr *m = run->m;
	struct cell_entry *e = run->e;
	bool got_event = run->got_event;

	free(run);
	pthread_mutex_lock(&m->lock);
	e->stats_current = false; /* no Watch brings it any more */
	free(e->agent_version);	  /* the next Watch may be another agent's */
	e->agent_version = NULL;
	if (e->opening)
		e->ended_early = true; /* the restarter has not seen its handle yet */
	else
		e->watch = NULL;
	watch_ended(m, e, got_event, ret, err);
	e->runs--; /* the last use of e and m: a stop waiting for it may free them */
	pthread_mutex_unlock(&m->lock);
}

/* Under the manager's lock: the cell whose Watch is due first, or NULL. */
static struct cell_entry *watch_next_due(struct cellmgr *m)
{
	struct cell_entry *next = NULL;

	for (struct cell_entry *e = m->cells; e; e = e->next)
		if (e->due_ns && !e->stop && (!next || e->due_ns < next->due_ns))
			next = e;
	return next;
}

/* Opens e's next Watch, resuming from the log offsets kiyot has stored so no log line is
 * lost; called without the manager's lock, with e referenced, marked opening and its runs
 * counting this Watch. */
static void watch_open(struct cellmgr *m, struct cell_entry *e, bool heal)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	struct watch_run *run = xmalloc(sizeof(*run));
	struct agent_watch *w = NULL;
	struct err err = ERR_INIT;
	int ret;

	if (heal && m->k->provider.ops->heal &&
	    m->k->provider.ops->heal(m->k->provider.self, e->id, &err) < 0) {
		log_warn("cell %s: %s", e->id, err.msg);
		err_clear(&err);
	}
	*run = (struct watch_run){ m, e, false };
	if (m->hooks.log_offsets)
		m->hooks.log_offsets(m->hooks.ctx, e->id, &req.offsets, &req.n_offsets);
	req.stats_interval_ms = STATS_PUSH_MS;
	ret = e->conn ? m->agent.ops->watch(m->agent.self, e->conn, &req, watch_event, watch_end,
					    run, &w, &err)
		      : err_set(&err, ENOTCONN, "no connection to the agent");
	if (m->hooks.log_offsets_free)
		m->hooks.log_offsets_free(req.offsets, req.n_offsets);
	pthread_mutex_lock(&m->lock);
	e->opening = false;
	if (ret < 0) { /* no callback comes */
		e->runs--;
		watch_ended(m, e, false, ret, &err);
		free(run);
	} else if (!e->ended_early) {
		e->watch = w;
		if (e->stop)
			m->agent.ops->watch_cancel(m->agent.self, w);
	}
	e->ended_early = false;
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
}

/* Opens each cell's Watch when it is due, one cell at a time, until the manager quits. */
static void *restarter_main(void *arg)
{
	struct cellmgr *m = arg;

	pthread_mutex_lock(&m->lock);
	while (!m->quit) {
		struct cell_entry *e = watch_next_due(m);
		int64_t now = clock_mono_ns();
		bool heal;

		if (!e) {
			pthread_cond_wait(&m->cond, &m->lock);
			continue;
		}
		if (e->due_ns > now) {
			struct timespec ts = { e->due_ns / 1000000000, e->due_ns % 1000000000 };

			pthread_cond_timedwait(&m->cond, &m->lock, &ts);
			continue;
		}
		e->due_ns = 0;
		e->opening = true;
		e->ended_early = false;
		heal = e->heal;
		e->heal = false;
		e->refs++;
		e->runs++;
		pthread_mutex_unlock(&m->lock);
		watch_open(m, e, heal);
		cell_entry_put(m, e);
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

/* A cell's entry, with conn as its connection (taken) when given, else a new one. */
static struct cell_entry *entry_add(struct cellmgr *m, const char *id, const char *ip,
				    struct agent_conn *conn, const char *agent_version)
{
	struct cell_entry *e = xcalloc(1, sizeof(*e));
	struct err err = ERR_INIT;

	e->id = xstrdup(id);
	e->agent_version = agent_version ? xstrdup(agent_version) : NULL;
	e->applied = !conn; /* a cell adopted at start is no launch: its next Apply is no step */
	e->target = xasprintf("%s:%d", ip, m->k->cfg.agent_port);
	pthread_mutex_init(&e->apply_lock, NULL);
	e->refs = 1; /* the list's */
	e->backoff_ms = WATCH_BACKOFF_MIN_MS;
	e->conn = conn;
	if (!conn && cell_connect(m, id, e->target, &e->conn, &err) < 0)
		log_error("cell %s: %s", id, err.msg);
	pthread_mutex_lock(&m->lock);
	e->next = m->cells;
	m->cells = e;
	e->due_ns = clock_mono_ns(); /* the first Watch at once */
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return e;
}

/* The entry of a cell with a reference the caller drops with cell_entry_put; NULL (ENOENT) when
 * the cell is not running. */
struct cell_entry *cell_entry_get(struct cellmgr *m, const char *id, struct err *err)
{
	struct cell_entry *e;

	pthread_mutex_lock(&m->lock);
	e = entry_find(m, id);
	if (e)
		e->refs++;
	pthread_mutex_unlock(&m->lock);
	if (!e)
		err_set(err, ENOENT, "cell %s is not running", id);
	return e;
}

void cell_entry_put(struct cellmgr *m, struct cell_entry *e)
{
	int last;

	pthread_mutex_lock(&m->lock);
	last = --e->refs == 0;
	pthread_mutex_unlock(&m->lock);
	if (last)
		entry_free(m, e);
}

/* Asks the agent at target for Hello over TLS on a connection of its own: a gRPC channel
 * whose connection was refused waits out gRPC's reconnect back-off before it tries again, so
 * each attempt of the boot gets a fresh one. The connection that answered becomes the cell's
 * (*out): the pod's first CreateContainer comes right after, and a new one would cost it a TCP
 * and TLS handshake with the agent. */
static int hello(struct cellmgr *m, const char *id, const char *target, struct agent_conn **out,
		 char **version, struct err *err)
{
	Kiyot__Cell__V1__HelloResponse *resp = NULL;
	struct agent_conn *conn = NULL;
	int ret;

	if (cell_connect(m, id, target, &conn, err) < 0)
		return -err->code;
	ret = m->agent.ops->hello(m->agent.self, conn, 2000, &resp, err);
	if (ret == 0) {
		*version = xstrdup(resp->agent_version ? resp->agent_version : "");
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		*out = conn;
		return 0;
	}
	m->agent.ops->disconnect(m->agent.self, conn);
	return ret;
}

/* 0 when kiyot works with an agent of release version; -EPROTONOSUPPORT naming both releases
 * and what to do when the agent is older than the oldest it works with (or says no release). */
static int agent_release_ok(const char *id, const char *version, struct err *err)
{
	if (version_at_least(version, KIYOT_AGENT_OLDEST))
		return 0;
	return err_set(err, EPROTONOSUPPORT,
		       "cell %s: its agent is release \"%s\"; this kiyot (%s) works with agents "
		       "from %s on: launch cells from a cell image of a release from %s on "
		       "(deploy/cell-image)",
		       id, version, KIYOT_VERSION, KIYOT_AGENT_OLDEST, KIYOT_AGENT_OLDEST);
}

/* One Enroll call over plaintext: the request's answer, or the certificate's. */
static int enroll_call(struct cellmgr *m, const char *target, const char *cert,
		       Kiyot__Cell__V1__EnrollResponse **resp, struct err *err)
{
	Kiyot__Cell__V1__EnrollRequest req = KIYOT__CELL__V1__ENROLL_REQUEST__INIT;

	req.certificate = (char *)(cert ? cert : "");
	return m->agent.ops->enroll(m->agent.self, target, &req, 2000, resp, err);
}

/* Enrolls a new cell (see cell-agent/enroll.h): takes its request and proof, checks the proof
 * with the cell's one-time secret, and sends the certificate the CA issues for the request's
 * key in the cell's name. The secret is forgotten once the cell took its certificate. 0 when
 * the cell took it; the caller confirms with Hello over TLS. */
static int enroll_at(struct cellmgr *m, const char *id, const char *target, const char *secret,
		     struct err *err)
{
	Kiyot__Cell__V1__EnrollResponse *r = NULL;
	_cleanup_free_ char *cert = NULL;
	int ret;

	if (enroll_call(m, target, NULL, &r, err) < 0)
		return -err->code;
	if (strcmp(r->cell_id, id) != 0)
		ret = err_set(err, EKEYREJECTED, "%s answers as cell \"%.64s\", not %s", target,
			      r->cell_id, id);
	else if ((ret = pki_enroll_check(secret, id, r->csr, r->proof, err)) == 0)
		ret = pki_sign(m->ca, m->ca_key, r->csr, id, PKI_SERVER, CERT_DAYS, &cert, err);
	protobuf_c_message_free_unpacked(&r->base, NULL);
	r = NULL;
	if (ret < 0)
		return err_wrap(err, "enroll cell %s at %s", id, target);
	ret = enroll_call(m, target, cert, &r, err);
	if (ret == 0 && !r->enrolled)
		ret = err_set(err, EPROTO, "cell %s did not take its certificate", id);
	if (r)
		protobuf_c_message_free_unpacked(&r->base, NULL);
	return ret;
}

/* The meta key of a cell's enrollment secret in kiyot.db. */
static char *secret_key(const char *cell_id)
{
	return xasprintf("enroll_secret/%s", cell_id);
}

/* The cell's one-time enrollment secret: the one stored for it while it has not enrolled (a
 * launch retried after kiyot restarted finds the cell booted with it), else a new one, stored
 * before it goes out. Removed once the cell enrolled or is terminated. */
static int enroll_secret(struct cellmgr *m, const char *cell_id, char **out, struct err *err)
{
	_cleanup_free_ char *key = secret_key(cell_id);
	unsigned char raw[ENROLL_SECRET_BYTES];
	char *hex = NULL;

	if (store_get_meta(m->k->store, key, &hex, err) < 0)
		return -err->code;
	if (hex && hex[0]) {
		*out = hex;
		return 0;
	}
	free(hex);
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return err_set(err, errno, "enrollment secret: getrandom: %s", strerror(errno));
	hex = xmalloc(2 * sizeof(raw) + 1);
	hex_encode(raw, sizeof(raw), hex);
	explicit_bzero(raw, sizeof(raw));
	if (store_put_meta(m->k->store, key, hex, err) < 0) {
		wipe_free(hex);
		return -err->code;
	}
	*out = hex;
	return 0;
}

/* Forgets a cell's secret: the bootstrap document then holds nothing that still works. */
static void enroll_forget(struct cellmgr *m, const char *cell_id)
{
	_cleanup_free_ char *key = secret_key(cell_id);
	struct err err = ERR_INIT;

	if (store_del_meta(m->k->store, key, &err) < 0)
		log_warn("cell %s: forgetting its enrollment secret: %s", cell_id, err.msg);
}

/* How long a freshly enrolled agent may take to switch to TLS before Hello is tried anyway. */
#define SWITCH_WAIT_NS 2000000000LL

/* What a phase the provider reports a cell in says of its instance, in an error. */
static const char *phase_words(enum cell_phase phase)
{
	switch (phase) {
	case CELL_TERMINATING:
		return "began shutting down";
	case CELL_TERMINATED:
		return "was terminated";
	case CELL_FAILED:
		return "failed";
	default:
		return "is still starting";
	}
}

/* Asks the provider whether the cell can still come up: 0 while it may (or the provider does
 * not know, or could not say: the wait goes on), EIO saying what became of it and why once it
 * cannot. */
static int check_instance(struct cellmgr *m, const char *id, struct err *err)
{
	const struct provider *p = &m->k->provider;
	struct cell_info st = { 0 };
	struct err serr = ERR_INIT;
	int ret;

	if (!p->ops->state)
		return 0;
	ret = p->ops->state(p->self, id, &st, &serr);
	if (ret < 0) {
		log_debug("cell %s: asking the provider for its state: %s", id, serr.msg);
		return 0; /* a new instance EC2 does not list yet, a throttled call: ask again */
	}
	if (st.phase == CELL_PENDING || st.phase == CELL_RUNNING) {
		cell_info_release(&st);
		return 0;
	}
	ret = err_set(err, EIO, "the instance %s %s during boot%s%s",
		      st.instance_id && st.instance_id[0] ? st.instance_id : id,
		      phase_words(st.phase), st.reason && st.reason[0] ? ": " : "",
		      st.reason ? st.reason : "");
	cell_info_release(&st);
	return ret;
}

/* Waits until the agent at ip answers Hello over TLS (the connection it answered on in
 * *conn), enrolling it first when it is new; ends early when the provider says the cell's
 * instance cannot come up (asked every LAUNCH_STATE_EVERY_MS) or the launch is cancelled
 * (cancel_requested), else after the boot timeout. A TLS Hello to an agent that still serves
 * plaintext fails its handshake, which gRPC logs as a warning, so Enroll comes first (a launch
 * is most often of a new cell; an agent that enrolled before, as on a launch retried after
 * kiyot restarted, refuses the plaintext call at once), and once it enrolled, Hello waits for
 * the agent's feed port: the agent opens it after its TLS server, having stopped the plaintext
 * one. */
static int wait_agent(struct cellmgr *m, const char *id, const char *ip, const char *secret,
		      int timeout_s, struct agent_conn **conn, char **version, int64_t *enrolled_ns,
		      struct err *err)
{
	_cleanup_free_ char *target = xasprintf("%s:%d", ip, m->k->cfg.agent_port);
	_cleanup_free_ char *feed = xasprintf("%s:%d", ip, FEED_PORT(m->k->cfg.agent_port));
	int64_t start = clock_mono_ns();
	int64_t deadline = start + (int64_t)timeout_s * 1000000000LL;
	int64_t next_check = start + (int64_t)LAUNCH_STATE_EVERY_MS * 1000000;
	int64_t enrolled_at = 0;
	int delay_ms = 5;

	/* 5 ms steps for the first second, then 100 ms until the deadline */

	for (;;) {
		struct err eerr = ERR_INIT;

		/* a gRPC channel (dozens of KB of allocations) only for an agent that listens */
		if (!m->agent.ops->listening(m->agent.self, target, 200)) {
			err_set(err, ECONNREFUSED, "%s: nothing listens yet", target);
		} else if (!enrolled_at && enroll_at(m, id, target, secret, &eerr) == 0) {
			/* a new cell, now enrolled: it serves TLS from now on */
			log_info("cell %s enrolled", id);
			enroll_forget(m, id);
			enrolled_at = clock_mono_ns();
			*enrolled_ns = enrolled_at;
			continue;
		} else if (enrolled_at && clock_mono_ns() < enrolled_at + SWITCH_WAIT_NS &&
			   !m->agent.ops->listening(m->agent.self, feed, 200)) {
			/* (an agent older than the feed has none: Hello after SWITCH_WAIT_NS) */
			err_set(err, EAGAIN, "%s: the agent is not serving TLS yet", target);
		} else if (hello(m, id, target, conn, version, err) == 0) {
			enroll_forget(m, id);
			if (agent_release_ok(id, *version, err) == 0)
				return 0;
			m->agent.ops->disconnect(m->agent.self, *conn);
			*conn = NULL;
			free(*version);
			*version = NULL;
			return -err->code;
		}
		if (eerr.code == EKEYREJECTED)
			log_warn("%s", eerr.msg);
		if (cancel_requested())
			return err_set(err, ECANCELED, "cell %s: its launch was cancelled", id);
		if (clock_mono_ns() >= next_check) {
			if (check_instance(m, id, err) < 0)
				return err_wrap(err, "cell %s", id);
			next_check = clock_mono_ns() + (int64_t)LAUNCH_STATE_EVERY_MS * 1000000;
		}
		if (clock_mono_ns() > deadline) {
			if (eerr.code != ECONNREFUSED && eerr.code)
				log_warn("cell %s: %s", id, eerr.msg);
			return err_wrap(err, "cell %s: agent did not come up within %d s", id,
					timeout_s);
		}
		/* a local cell's agent is up within tens of ms; poll often, briefly */
		usleep((useconds_t)delay_ms * 1000);
		delay_ms = clock_mono_ns() < start + 1000000000LL ? 5 : 100;
	}
}

char *cells_bootstrap(struct kiyot *k, const struct cell_spec *spec, const char *secret)
{
	json_t *doc = json_pack("{s:i, s:s, s:s, s:{s:s, s:s, s:s}, s:s, s:i, s:s, s:I}", "version",
				1, "cell_id", spec->cell_id, "cluster_id", k->cluster_id, "pod",
				"uid", spec->pod_uid, "name", spec->pod_name, "namespace",
				spec->pod_namespace, "instance_type", spec->instance_type,
				"agent_port", k->cfg.agent_port, "log_level", k->cfg.log_level,
				"restart_backoff_ms", (json_int_t)k->cfg.restart_backoff_ms);
	char *text;

	if (k->cfg.registries)
		json_object_set(doc, "registries", k->cfg.registries);
	json_object_set_new(doc, "pulls",
			    json_pack("{s:I, s:i, s:i, s:I, s:i, s:i}", "min_bytes",
				      (json_int_t)k->cfg.pulls.min_bytes, "window_s",
				      k->cfg.pulls.window_s, "deadline_base_s",
				      k->cfg.pulls.deadline_base_s, "deadline_rate",
				      (json_int_t)k->cfg.pulls.deadline_rate, "max_transfers",
				      k->cfg.pulls.max_transfers, "max_per_registry",
				      k->cfg.pulls.max_per_registry));
	/* the CA the agent's certificate and kiyot's are of (public), and the one-time secret
	 * the cell proves it booted from this document with */
	json_object_set_new(doc, "ca", json_string(k->cells->ca));
	json_object_set_new(doc, "enroll_secret", json_string(secret));
	if (spec->n_prepull) {
		json_t *prepull = json_array();

		for (size_t i = 0; i < spec->n_prepull; i++)
			json_array_append_new(prepull, json_string(spec->prepull[i]));
		json_object_set_new(doc, "prepull", prepull);
	}
	text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(doc);
	if (!text)
		abort();
	return text;
}

/* cells_resume with the connection to use (taken), or NULL for a new one. */
static void resume(struct cellmgr *m, const char *cell_id, const char *ip, struct agent_conn *conn,
		   const char *agent_version)
{
	pthread_mutex_lock(&m->lock);
	if (entry_find(m, cell_id)) {
		pthread_mutex_unlock(&m->lock);
		if (conn)
			m->agent.ops->disconnect(m->agent.self, conn);
		return;
	}
	pthread_mutex_unlock(&m->lock);
	entry_add(m, cell_id, ip, conn, agent_version);
}

/* The launch of cell_id, or NULL. Needs the manager's lock. */
static struct cell_launch *launch_find(struct cellmgr *m, const char *cell_id)
{
	for (struct cell_launch *l = m->launches; l; l = l->next)
		if (strcmp(l->cell_id, cell_id) == 0)
			return l;
	return NULL;
}

/* The launch of cell_id, made when there is none, with one more hold. Needs the lock. */
static struct cell_launch *launch_hold(struct cellmgr *m, const char *cell_id)
{
	struct cell_launch *l = launch_find(m, cell_id);

	if (!l) {
		l = xcalloc(1, sizeof(*l));
		l->cell_id = xstrdup(cell_id);
		l->next = m->launches;
		m->launches = l;
	}
	l->holds++;
	return l;
}

/* Drops a hold of l; the last one unlists and frees it. Needs the lock. */
static void launch_release(struct cellmgr *m, struct cell_launch *l)
{
	if (--l->holds > 0)
		return;
	for (struct cell_launch **pp = &m->launches; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	free(l->cell_id);
	free(l);
}

void cells_launch_begin(struct cellmgr *m, const char *cell_id)
{
	pthread_mutex_lock(&m->lock);
	launch_hold(m, cell_id);
	pthread_mutex_unlock(&m->lock);
}

void cells_launch_end(struct cellmgr *m, const char *cell_id)
{
	struct cell_launch *l;

	pthread_mutex_lock(&m->lock);
	l = launch_find(m, cell_id);
	if (l)
		launch_release(m, l);
	pthread_mutex_unlock(&m->lock);
}

enum cells_launch_state cells_launch_cancel(struct cellmgr *m, const char *cell_id)
{
	enum cells_launch_state st = CELLS_LAUNCH_NONE;
	struct cell_launch *l;

	pthread_mutex_lock(&m->lock);
	l = launch_find(m, cell_id);
	if (l && l->done) {
		st = CELLS_LAUNCH_DONE;
	} else if (l) {
		__atomic_store_n(&l->cancelled, true, __ATOMIC_RELEASE);
		st = CELLS_LAUNCH_CANCELLED;
	}
	pthread_mutex_unlock(&m->lock);
	return st;
}

/* The cancel scope of a launch: cancelled once a stop asked. */
static bool launch_cancelled(void *ctx)
{
	struct cell_launch *l = ctx;

	return __atomic_load_n(&l->cancelled, __ATOMIC_ACQUIRE);
}

/* A cell's boot timeout: cells.bootTimeoutSeconds, else the provider's. */
static int boot_timeout(const struct kiyot *k)
{
	if (k->cfg.boot_timeout_s > 0)
		return k->cfg.boot_timeout_s;
	return k->provider.ops->boot_timeout_s > 0 ? k->provider.ops->boot_timeout_s
						   : BOOT_TIMEOUT_DEFAULT_S;
}

/* cells_launch's work, in the launch's cancel scope. */
void cell_launched_release(struct cell_launched *l)
{
	free(l->instance_type);
	free(l->note);
	l->instance_type = l->note = NULL;
}

static double seconds_since(int64_t t0)
{
	return (double)(clock_mono_ns() - t0) / 1e9;
}

static int launch_run(struct cellmgr *m, const struct cell_spec *req, char **ip,
		      struct cell_launched *launched, struct err *err)
{
	struct kiyot *k = m->k;
	struct cell_spec spec = *req;
	struct cell_info info = { 0 };
	char *secret = NULL;
	_cleanup_free_ char *boot = NULL;
	struct agent_conn *conn = NULL;
	_cleanup_free_ char *version = NULL;
	int64_t t0, enrolled_ns = 0;
	int ret;

	if (cancel_requested())
		return err_set(err, ECANCELED, "launch cell %s: cancelled before it began",
			       req->cell_id);
	if (enroll_secret(m, req->cell_id, &secret, err) < 0)
		return err_wrap(err, "launch cell %s", req->cell_id);
	boot = cells_bootstrap(k, req, secret);

	/* what every cell of this kiyot carries */
	spec.cluster_id = k->cluster_id;
	spec.bootstrap = boot;
	t0 = clock_mono_ns();
	ret = k->provider.ops->launch(k->provider.self, &spec, &info, err);
	metrics_launch_step("provider", seconds_since(t0));
	if (ret < 0) {
		wipe_free(secret);
		metrics_launch_failure(err->code == ENOSPC ? "capacity" : "provider");
		return err_wrap(err, "launch cell %s (%s)", req->cell_id, req->instance_type);
	}
	if (info.phase == CELL_FAILED && k->provider.ops->heal &&
	    k->provider.ops->heal(k->provider.self, req->cell_id, err) < 0) {
		cell_info_release(&info);
		wipe_free(secret);
		return err_wrap(err, "launch cell %s: its agent cannot be restarted", req->cell_id);
	}
	/* the cell's channel and watch start once the agent serves, so their first connection
	 * is not refused (and they never wait out a reconnect back-off) */
	t0 = clock_mono_ns();
	ret = wait_agent(m, req->cell_id, info.ip, secret, boot_timeout(k), &conn, &version,
			 &enrolled_ns, err);
	wipe_free(secret);
	if (ret == 0 && enrolled_ns) {
		/* boot: until the agent took its certificate; enrollment: until it answered over
		 * TLS with it (an agent enrolled before, as on a resumed launch, has boot alone) */
		metrics_launch_step("boot", (double)(enrolled_ns - t0) / 1e9);
		metrics_launch_step("enrollment", seconds_since(enrolled_ns));
	} else if (ret == 0) {
		metrics_launch_step("boot", seconds_since(t0));
	} else {
		metrics_launch_failure(ret == -ECANCELED	 ? "cancelled"
				       : ret == -EPROTONOSUPPORT ? "agent_release"
								 : "boot");
	}
	if (ret == 0)
		resume(m, req->cell_id, info.ip, conn, version);
	if (ret < 0) {
		struct err terr = ERR_INIT;

		/* cancelled: by a stop of its sandbox (cells_launch terminates the cell) or because
		 * its caller went away (kiyot stopping, the kubelet's deadline): then the cell is
		 * kept for the RunPodSandbox that resumes the launch */
		if (ret != -ECANCELED && cells_terminate(m, req->cell_id, &terr) < 0)
			log_error("cell %s: %s", req->cell_id, terr.msg);
		cell_info_release(&info);
		return ret;
	}
	*ip = xstrdup(info.ip);
	if (launched) {
		launched->instance_type =
			xstrdup(info.instance_type ? info.instance_type : req->instance_type);
		launched->note = info.launch_note ? xstrdup(info.launch_note) : NULL;
	}
	cell_info_release(&info);
	return 0;
}

int cells_launch(struct cellmgr *m, const struct cell_spec *req, char **ip,
		 struct cell_launched *launched, struct err *err)
{
	struct cancel_scope scope;
	struct cell_launch *l;
	bool cancelled;
	int ret;

	pthread_mutex_lock(&m->lock);
	l = launch_hold(m, req->cell_id);
	pthread_mutex_unlock(&m->lock);
	cancel_scope_enter(&scope, launch_cancelled, l);
	ret = launch_run(m, req, ip, launched, err);
	cancel_scope_leave(&scope);
	/* a stop that came as the cell came up finds it done (and stops it as a running one),
	 * or cancelled it first: then the cell goes here */
	pthread_mutex_lock(&m->lock);
	cancelled = l->cancelled;
	if (ret == 0 && !cancelled)
		l->done = true;
	launch_release(m, l);
	pthread_mutex_unlock(&m->lock);
	if (!cancelled && ret == -ECANCELED) {
		if (launched)
			launched->kept = true;
		log_info("cell %s: the launch's caller went away; the cell is kept for the "
			 "RunPodSandbox that resumes it",
			 req->cell_id);
		return ret;
	}
	if (!cancelled)
		return ret;
	if (ret == 0) {
		free(*ip);
		*ip = NULL;
		if (launched)
			cell_launched_release(launched);
	}
	{
		struct err terr = ERR_INIT;

		if (cells_terminate(m, req->cell_id, &terr) < 0)
			log_error("cell %s: %s", req->cell_id, terr.msg);
	}
	err_clear(err);
	return err_set(err, ECANCELED,
		       "cell %s: its sandbox was stopped while starting; the cell is terminated",
		       req->cell_id);
}

int cells_launch_claimed(struct cellmgr *m, const char *cell_id, struct err *err)
{
	struct cell_launch *l;
	bool cancelled;

	pthread_mutex_lock(&m->lock);
	l = launch_find(m, cell_id);
	cancelled = l && l->cancelled;
	if (l && !cancelled)
		l->done = true;
	pthread_mutex_unlock(&m->lock);
	if (cancelled)
		return err_set(err, ECANCELED,
			       "cell %s: its sandbox was stopped while starting; the cell is "
			       "terminated",
			       cell_id);
	return 0;
}

int cells_hello(struct cellmgr *m, const char *cell_id, struct err *err)
{
	Kiyot__Cell__V1__HelloResponse *resp = NULL;
	struct cell_entry *e = cell_entry_get(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	ret = e->conn ? m->agent.ops->hello(m->agent.self, e->conn, CELLS_HELLO_TIMEOUT_MS, &resp,
					    err)
		      : err_set(err, ENOTCONN, "no connection to the agent");
	if (resp) {
		pthread_mutex_lock(&m->lock);
		free(e->agent_version);
		e->agent_version = xstrdup(resp->agent_version ? resp->agent_version : "");
		pthread_mutex_unlock(&m->lock);
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	}
	cell_entry_put(m, e);
	return ret < 0 ? err_wrap(err, "cell %s", cell_id) : 0;
}

/* What agents can do from which release on: kiyot sends a feature only to agents that have
 * it (an older one would ignore the fields it does not know). */
static const struct {
	const char *what, *since;
} agent_features[] = {
	[AGENT_UNIFIED] = { "linux.resources.unified (cgroup v2 settings)", "0.2.0" },
};

char *cells_agent_version_known(struct cellmgr *m, const char *cell_id)
{
	char *v = NULL;
	struct cell_entry *e;

	pthread_mutex_lock(&m->lock);
	e = entry_find(m, cell_id);
	if (e && e->agent_version)
		v = xstrdup(e->agent_version);
	pthread_mutex_unlock(&m->lock);
	return v;
}

char *cells_agent_version(struct cellmgr *m, const char *cell_id, struct err *err)
{
	char *v = NULL;
	struct cell_entry *e;

	pthread_mutex_lock(&m->lock);
	e = entry_find(m, cell_id);
	if (e && e->agent_version)
		v = xstrdup(e->agent_version);
	pthread_mutex_unlock(&m->lock);
	if (!e) {
		err_set(err, ENOENT, "cell %s is not running", cell_id);
		return NULL;
	}
	if (v)
		return v;
	if (cells_hello(m, cell_id, err) < 0) /* a cell adopted at start, or its agent restarted */
		return NULL;
	pthread_mutex_lock(&m->lock);
	e = entry_find(m, cell_id);
	v = e && e->agent_version ? xstrdup(e->agent_version) : NULL;
	pthread_mutex_unlock(&m->lock);
	if (!v)
		err_set(err, ENOENT, "cell %s is not running", cell_id);
	return v;
}

int cells_agent_can(struct cellmgr *m, const char *cell_id, enum agent_feature f, struct err *err)
{
	_cleanup_free_ char *v = cells_agent_version(m, cell_id, err);

	if (!v)
		return err_wrap(err, "cannot tell what the agent of cell %s can do", cell_id);
	if (version_at_least(v, agent_features[f].since))
		return 0;
	return err_set(err, EPROTONOSUPPORT,
		       "the agent of cell %s is release %s, which cannot apply %s; agents from %s "
		       "on can (this kiyot is %s): leave the setting out, or recreate the pod on a "
		       "new cell (EC2 cells: from a cell image of %s or later)",
		       cell_id, v[0] ? v : "(none said)", agent_features[f].what,
		       agent_features[f].since, KIYOT_VERSION, agent_features[f].since);
}

void cells_resume(struct cellmgr *m, const char *cell_id, const char *ip)
{
	resume(m, cell_id, ip, NULL, NULL);
}

int cells_terminate(struct cellmgr *m, const char *cell_id, struct err *err)
{
	struct cell_entry *e, **pp;

	pthread_mutex_lock(&m->lock);
	for (pp = &m->cells; (e = *pp); pp = &e->next)
		if (strcmp(e->id, cell_id) == 0) {
			*pp = e->next;
			break;
		}
	pthread_mutex_unlock(&m->lock);
	if (e) {
		entry_stop_watch(m, e);
		cell_entry_put(m, e); /* calls in flight hold their own references */
	}
	enroll_forget(m, cell_id); /* a cell that never enrolled */
	return m->k->provider.ops->terminate(m->k->provider.self, cell_id, err);
}
