/*
 * cells.c: cell lifecycle and the calls to cells' agents (see cells.h), which go through the
 * agent client (agent_client.h): gRPC, or a test's fake.
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
#include "clock.h"
#include "codec.h"
#include "state/kiyot.h"
#include "log.h"
#include "pki.h"
#include "state/store.h"
#include "xalloc.h"

#define AGENT_CALL_TIMEOUT_MS 10000
#define PULL_TIMEOUT_MS (15 * 60 * 1000)
#define WRITE_VOLUME_TIMEOUT_MS 60000
/* The agent ends an ExecSync without a timeout, or with a longer one, after a day. */
#define EXEC_TIMEOUT_MAX_S (24LL * 3600)

struct cell_entry {
	char *id;
	char *target;		 /* "ip:port" of the agent */
	struct agent_conn *conn; /* NULL when it could not be made */
	pthread_mutex_t apply_lock;
	/* The cell's Watch, guarded by the manager's lock: the live one (NULL between two),
	 * whether the restarter is opening one (and whether that one already ended), when the
	 * next one is due (0: none is), the pause before the one after, how many ended refused
	 * in a row, whether the provider should heal the cell first, and whether the cell is
	 * being stopped (no Watch is opened any more). */
	struct agent_watch *watch;
	int runs; /* Watches whose callbacks have not all returned */
	bool opening, ended_early, heal, stop;
	int64_t due_ns;
	int backoff_ms, refused;
	/* References, guarded by the manager's lock: one for the list while the cell is in it,
	 * one for each call in flight. The last one frees the entry. A Watch holds none: the
	 * list's is dropped only once entry_stop_watch saw its callbacks done (runs 0). */
	int refs;
	/* The cell's resource usage its Watch pushed last (packed StatsResponse), when it came,
	 * and whether no unit changed since; guarded by the manager's lock. */
	uint8_t *stats;
	size_t stats_len;
	int64_t stats_ns;
	bool stats_current;
	struct cell_entry *next;
};

/* Certificates: the CA's for ten years, the cells' and kiyot's own as long. kiyot's is made
 * anew at each start and never stored. */
#define CERT_DAYS 3650
/* Bytes of a cell's one-time enrollment secret (hex in its bootstrap document). */
#define ENROLL_SECRET_BYTES 32

/* Watches run on the agent client's threads (two for gRPC), and one restarter thread opens
 * them again when they end: the threads do not grow with the number of cells. */
#define WATCH_THREADS 2
#define WATCH_BACKOFF_MIN_MS 100
#define WATCH_BACKOFF_MAX_MS 2000
/* A cell's Watch brings its resource usage at this pace, and cells_stats answers from the
 * latest while it is younger than the max age and no unit changed since; else it asks the
 * agent. The kubelet asks every 10-15 s: usage a few seconds old is what cadvisor gives it
 * too, and its rates come from the samples' own timestamps. */
#define STATS_PUSH_MS 10000
#define STATS_MAX_AGE_MS 25000

struct cellmgr {
	struct kiyot *k;
	struct agent_client agent;
	bool own_agent; /* made here (gRPC), freed here */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a Watch due, ended or opened; quit */
	pthread_t restarter;
	bool restarting, quit;
	struct cell_entry *cells;
	/* kiyot's CA (its key never leaves kiyot.db) and kiyot's client certificate */
	char *ca, *ca_key;
	char *cert, *key;
};

static void entry_put(struct cellmgr *m, struct cell_entry *e);
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

int cells_new(struct kiyot *k, struct cellmgr **out, struct err *err)
{
	struct cellmgr *m = xcalloc(1, sizeof(*m));

	pthread_condattr_t ca;
	int rc;

	m->k = k;
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
	free(e->id);
	free(e->target);
	free(e);
}

void cells_free(struct cellmgr *m)
{
	if (!m)
		return;
	while (m->cells) {
		struct cell_entry *e = m->cells;

		m->cells = e->next;
		entry_stop_watch(m, e);
		entry_put(m, e);
	}
	if (m->restarting) {
		pthread_mutex_lock(&m->lock);
		m->quit = true;
		pthread_cond_broadcast(&m->cond);
		pthread_mutex_unlock(&m->lock);
		pthread_join(m->restarter, NULL);
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
static void stats_keep(struct cellmgr *m, struct cell_entry *e,
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
			kiyot_on_unit_status(m->k, e->id, ev->status);
		}
		break;
	case KIYOT__CELL__V1__WATCH_EVENT__KIND__STATS:
		if (ev->stats)
			stats_keep(m, e, ev->stats);
		break;
	case KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG:
		kiyot_on_unit_log(m->k, ev->unit_id, ev->offset, ev->data.data, ev->data.len);
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
	kiyot_log_offsets(m->k, e->id, &req.offsets, &req.n_offsets);
	req.stats_interval_ms = STATS_PUSH_MS;
	ret = e->conn ? m->agent.ops->watch(m->agent.self, e->conn, &req, watch_event, watch_end,
					    run, &w, &err)
		      : err_set(&err, ENOTCONN, "no connection to the agent");
	kiyot_log_offsets_free(req.offsets, req.n_offsets);
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
		entry_put(m, e);
		pthread_mutex_lock(&m->lock);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

static struct cell_entry *entry_add(struct cellmgr *m, const char *id, const char *ip)
{
	struct cell_entry *e = xcalloc(1, sizeof(*e));
	struct err err = ERR_INIT;

	e->id = xstrdup(id);
	e->target = xasprintf("%s:%d", ip, m->k->cfg.agent_port);
	pthread_mutex_init(&e->apply_lock, NULL);
	e->refs = 1; /* the list's */
	e->backoff_ms = WATCH_BACKOFF_MIN_MS;
	if (cell_connect(m, id, e->target, &e->conn, &err) < 0)
		log_error("cell %s: %s", id, err.msg);
	pthread_mutex_lock(&m->lock);
	e->next = m->cells;
	m->cells = e;
	e->due_ns = clock_mono_ns(); /* the first Watch at once */
	pthread_cond_broadcast(&m->cond);
	pthread_mutex_unlock(&m->lock);
	return e;
}

/* The entry of a cell with a reference the caller drops with entry_put; NULL (ENOENT) when
 * the cell is not running. */
static struct cell_entry *entry_get(struct cellmgr *m, const char *id, struct err *err)
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

static void entry_put(struct cellmgr *m, struct cell_entry *e)
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
 * each attempt of the boot gets a fresh one. */
static int hello(struct cellmgr *m, const char *id, const char *target, struct err *err)
{
	Kiyot__Cell__V1__HelloResponse *resp = NULL;
	struct agent_conn *conn = NULL;
	int ret;

	if (cell_connect(m, id, target, &conn, err) < 0)
		return -err->code;
	ret = m->agent.ops->hello(m->agent.self, conn, 2000, &resp, err);
	if (ret == 0)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	m->agent.ops->disconnect(m->agent.self, conn);
	return ret;
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

/* Waits until the agent at ip answers Hello over TLS, enrolling it first when it is new, or
 * the boot timeout passes. */
static int wait_agent(struct cellmgr *m, const char *id, const char *ip, const char *secret,
		      int timeout_s, struct err *err)
{
	_cleanup_free_ char *target = xasprintf("%s:%d", ip, m->k->cfg.agent_port);
	int64_t start = clock_mono_ns();
	int64_t deadline = start + (int64_t)timeout_s * 1000000000LL;
	int delay_ms = 5;

	/* 5 ms steps for the first second, then 100 ms until the deadline */

	for (;;) {
		struct err eerr = ERR_INIT;

		/* a gRPC channel (dozens of KB of allocations) only for an agent that listens */
		if (!m->agent.ops->listening(m->agent.self, target, 200)) {
			err_set(err, ECONNREFUSED, "%s: nothing listens yet", target);
		} else if (hello(m, id, target, err) == 0) {
			enroll_forget(m, id);
			return 0;
		} else if (enroll_at(m, id, target, secret, &eerr) == 0) {
			/* it did not serve TLS: a new cell, now enrolled */
			log_info("cell %s enrolled", id);
			enroll_forget(m, id);
			continue;
		}
		if (eerr.code == EKEYREJECTED)
			log_warn("%s", eerr.msg);
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

int cells_launch(struct cellmgr *m, const struct cell_spec *req, char **ip, struct err *err)
{
	struct kiyot *k = m->k;
	struct cell_spec spec = *req;
	struct cell_info info = { 0 };
	char *secret = NULL;
	_cleanup_free_ char *boot = NULL;
	int ret;

	if (enroll_secret(m, req->cell_id, &secret, err) < 0)
		return err_wrap(err, "launch cell %s", req->cell_id);
	boot = cells_bootstrap(k, req, secret);

	/* what every cell of this kiyot carries */
	spec.cluster_id = k->cluster_id;
	spec.bootstrap = boot;
	ret = k->provider.ops->launch(k->provider.self, &spec, &info, err);
	if (ret < 0) {
		wipe_free(secret);
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
	ret = wait_agent(m, req->cell_id, info.ip, secret,
			 k->provider.ops->boot_timeout_s > 0 ? k->provider.ops->boot_timeout_s : 30,
			 err);
	wipe_free(secret);
	if (ret == 0)
		cells_resume(m, req->cell_id, info.ip);
	if (ret < 0) {
		struct err terr = ERR_INIT;

		if (cells_terminate(m, req->cell_id, &terr) < 0)
			log_error("cell %s: %s", req->cell_id, terr.msg);
		cell_info_release(&info);
		return ret;
	}
	*ip = xstrdup(info.ip);
	cell_info_release(&info);
	return 0;
}

void cells_resume(struct cellmgr *m, const char *cell_id, const char *ip)
{
	pthread_mutex_lock(&m->lock);
	if (entry_find(m, cell_id)) {
		pthread_mutex_unlock(&m->lock);
		return;
	}
	pthread_mutex_unlock(&m->lock);
	entry_add(m, cell_id, ip);
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
		entry_put(m, e); /* calls in flight hold their own references */
	}
	enroll_forget(m, cell_id); /* a cell that never enrolled */
	return m->k->provider.ops->terminate(m->k->provider.self, cell_id, err);
}

int cells_dial(struct cellmgr *m, const char *cell_id, uint16_t port, int host_network,
	       struct err *err)
{
	const struct provider *pv = &m->k->provider;

	if (!pv->ops->dial)
		return err_set(err, ENOTSUP, "%s cells are reached through their agent",
			       pv->ops->name);
	return pv->ops->dial(pv->self, cell_id, port, host_network, err);
}

struct cell_entry *cells_apply_lock(struct cellmgr *m, const char *cell_id)
{
	struct err err = ERR_INIT;
	struct cell_entry *e = entry_get(m, cell_id, &err);

	if (e)
		pthread_mutex_lock(&e->apply_lock);
	return e;
}

void cells_apply_unlock(struct cellmgr *m, struct cell_entry *e)
{
	if (!e)
		return;
	pthread_mutex_unlock(&e->apply_lock);
	entry_put(m, e);
}

/* A running cell's entry for one call to its agent, held until call_end; NULL (ENOENT) when
 * the cell is not running, or ENOTCONN when it has no connection. */
static struct cell_entry *call_begin(struct cellmgr *m, const char *cell_id, struct err *err)
{
	struct cell_entry *e = entry_get(m, cell_id, err);

	if (e && !e->conn) {
		entry_put(m, e);
		err_set(err, ENOTCONN, "cell %s: no connection to its agent", cell_id);
		return NULL;
	}
	return e;
}

/* Ends a call begun with call_begin that returned ret. */
static int call_end(struct cellmgr *m, struct cell_entry *e, const char *cell_id, int ret,
		    struct err *err)
{
	entry_put(m, e);
	if (ret < 0 && err->code == ECONNREFUSED)
		return err_wrap(err, "cell %s: agent unreachable", cell_id);
	return ret;
}

struct cell_stream {
	struct cellmgr *m;
	struct cell_entry *e;
	struct agent_stream *as;
};

int cells_stream_open(struct cellmgr *m, const char *cell_id, const char *method,
		      const ProtobufCMessage *first, const ProtobufCMessageDescriptor *out_desc,
		      const struct agent_stream_cbs *cbs, void *arg, struct cell_stream **out,
		      struct err *err)
{
	struct cell_entry *e = call_begin(m, cell_id, err);
	struct cell_stream *s;

	if (!e)
		return -err->code;
	s = xcalloc(1, sizeof(*s));
	s->m = m;
	s->e = e;
	if (m->agent.ops->open_stream(m->agent.self, e->conn, method, first, out_desc, cbs, arg,
				      &s->as, err) < 0) {
		entry_put(m, e);
		free(s);
		return err_wrap(err, "cell %s", cell_id);
	}
	*out = s;
	return 0;
}

void cells_stream_read(struct cell_stream *s)
{
	s->m->agent.ops->stream_read(s->m->agent.self, s->as);
}

int cells_stream_send(struct cell_stream *s, const ProtobufCMessage *msg, struct err *err)
{
	return s->m->agent.ops->stream_send(s->m->agent.self, s->as, msg, err);
}

void cells_stream_close_send(struct cell_stream *s)
{
	s->m->agent.ops->stream_close_send(s->m->agent.self, s->as);
}

void cells_stream_cancel(struct cell_stream *s)
{
	s->m->agent.ops->stream_cancel(s->m->agent.self, s->as);
}

void cells_stream_free(struct cell_stream *s)
{
	if (!s)
		return;
	s->m->agent.ops->stream_free(s->m->agent.self, s->as);
	entry_put(s->m, s->e);
	free(s);
}

/* The agent's own deadline for the pod is timeout_ms; the call's is 10 s later. */
int cells_apply(struct cellmgr *m, const char *cell_id, const Kiyot__Cell__V1__Pod *pod,
		int64_t timeout_ms, Kiyot__Cell__V1__ApplyResponse **resp, struct err *err)
{
	Kiyot__Cell__V1__ApplyRequest req = KIYOT__CELL__V1__APPLY_REQUEST__INIT;
	struct cell_entry *e = call_begin(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	req.pod = (Kiyot__Cell__V1__Pod *)pod;
	req.timeout_ms = timeout_ms;
	ret = m->agent.ops->apply(m->agent.self, e->conn, &req, timeout_ms + 10000, resp, err);
	return call_end(m, e, cell_id, ret, err);
}

int cells_pull_image(struct cellmgr *m, const char *cell_id,
		     const Kiyot__Cell__V1__PullImageRequest *req,
		     Kiyot__Cell__V1__PullImageResponse **resp, struct err *err)
{
	struct cell_entry *e = call_begin(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	ret = m->agent.ops->pull_image(m->agent.self, e->conn, req, PULL_TIMEOUT_MS, resp, err);
	return call_end(m, e, cell_id, ret, err);
}

int cells_exec_sync(struct cellmgr *m, const char *cell_id,
		    const Kiyot__Cell__V1__ExecSyncRequest *req,
		    Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err)
{
	int64_t s = req->timeout_s > 0 && req->timeout_s < EXEC_TIMEOUT_MAX_S ? req->timeout_s
									      : EXEC_TIMEOUT_MAX_S;
	struct cell_entry *e = call_begin(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	/* the call outlasts the command's own timeout, which the agent enforces */
	ret = m->agent.ops->exec_sync(m->agent.self, e->conn, req, s * 1000 + AGENT_CALL_TIMEOUT_MS,
				      resp, err);
	return call_end(m, e, cell_id, ret, err);
}

int cells_stats(struct cellmgr *m, const char *cell_id, Kiyot__Cell__V1__StatsResponse **resp,
		struct err *err)
{
	struct cell_entry *e = call_begin(m, cell_id, err);
	_cleanup_free_ uint8_t *kept = NULL;
	size_t len = 0;
	int ret;

	if (!e)
		return -err->code;
	pthread_mutex_lock(&m->lock);
	if (e->stats && e->stats_current &&
	    clock_mono_ns() - e->stats_ns < (int64_t)STATS_MAX_AGE_MS * 1000000) {
		len = e->stats_len;
		kept = xmalloc(len ? len : 1);
		memcpy(kept, e->stats, len);
	}
	pthread_mutex_unlock(&m->lock);
	if (kept && (*resp = kiyot__cell__v1__stats_response__unpack(NULL, len, kept)))
		return call_end(m, e, cell_id, 0, err);
	ret = m->agent.ops->stats(m->agent.self, e->conn, AGENT_CALL_TIMEOUT_MS, resp, err);
	if (ret == 0)
		stats_keep(m, e, *resp);
	return call_end(m, e, cell_id, ret, err);
}

int cells_write_volume(struct cellmgr *m, const char *cell_id,
		       const Kiyot__Cell__V1__WriteVolumeRequest *req, struct err *err)
{
	Kiyot__Cell__V1__WriteVolumeResponse *resp = NULL;
	struct cell_entry *e = call_begin(m, cell_id, err);
	int ret;

	if (!e)
		return -err->code;
	ret = m->agent.ops->write_volume(m->agent.self, e->conn, req, WRITE_VOLUME_TIMEOUT_MS,
					 &resp, err);
	if (ret == 0)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return call_end(m, e, cell_id, ret, err);
}
