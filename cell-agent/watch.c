/*
 * watch.c: what the agent tells kiyot without being asked: unit status changes, log bytes and
 * the cell's resource usage, as WatchEvents, over the gRPC Watch or the cell feed (feed.h),
 * which kiyot keeps open for every live cell. Log events from the supervisor only wake the
 * watches: each reads the unit's log file from where it stands, so a watch that resumes at an
 * offset, or falls behind, never loses or repeats a byte. Stats asked for the same way answer
 * a unary call. What the instance metadata service says of the instance's coming end
 * (interrupt.h) is kept here and sent to every watch, at its start and when it changes.
 */
#include "agent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arena.h"
#include "cellagent.pb-c.h"
#include "clock.h"
#include "feed.h"
#include "interrupt.h"
#include "log.h"
#include "rpc.h"
#include "stats.h"
#include "supervisor.h"
#include "xalloc.h"

#define WATCH_QUEUE_MAX 4096
#define LOG_CHUNK (256 * 1024)
#define STATS_INTERVAL_MIN_MS 100

/* A wake-up for one watch: a unit whose status or log changed, or (unit_id NULL) news of
 * the instance's interruption. */
struct note {
	char *unit_id;
	int is_log;
};

struct watcher {
	struct note q[WATCH_QUEUE_MAX];
	size_t head, len;
	int overflow;
	struct watcher *next;
};

struct watch_hub {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct watcher *list;
	/* the latest interruption news of each kind, if any (interrupt.h) */
	struct interruption interruptions[INTERRUPTION_KINDS];
	bool have_interruption[INTERRUPTION_KINDS];
};

struct watch_hub *watch_hub_new(void)
{
	struct watch_hub *h = xcalloc(1, sizeof(*h));
	pthread_condattr_t ca;

	pthread_mutex_init(&h->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&h->cond, &ca);
	pthread_condattr_destroy(&ca);
	return h;
}

/* Queues a note for every watch and wakes them. Needs the hub's lock. */
static void notify_locked(struct watch_hub *h, const char *unit_id, int is_log)
{
	for (struct watcher *w = h->list; w; w = w->next) {
		struct note *n;

		if (w->len == WATCH_QUEUE_MAX) {
			w->overflow = 1; /* the watch ends; kiyot resumes from its offsets */
			continue;
		}
		n = &w->q[(w->head + w->len) % WATCH_QUEUE_MAX];
		n->unit_id = unit_id ? xstrdup(unit_id) : NULL;
		n->is_log = is_log;
		w->len++;
	}
	pthread_cond_broadcast(&h->cond);
}

void watch_hub_notify(struct watch_hub *h, const char *unit_id, int is_log)
{
	pthread_mutex_lock(&h->lock);
	notify_locked(h, unit_id, is_log);
	pthread_mutex_unlock(&h->lock);
}

void watch_hub_interruption(struct watch_hub *h, const struct interruption *in)
{
	pthread_mutex_lock(&h->lock);
	h->interruptions[in->kind] = *in;
	h->have_interruption[in->kind] = true;
	notify_locked(h, NULL, 0);
	pthread_mutex_unlock(&h->lock);
}

static void watcher_remove(struct watch_hub *h, struct watcher *w)
{
	pthread_mutex_lock(&h->lock);
	for (struct watcher **pp = &h->list; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	pthread_mutex_unlock(&h->lock);
	for (size_t i = 0; i < w->len; i++)
		free(w->q[(w->head + i) % WATCH_QUEUE_MAX].unit_id);
	free(w);
}

void watch_hub_free(struct watch_hub *h)
{
	if (!h)
		return;
	while (h->list)
		watcher_remove(h, h->list);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->cond);
	free(h);
}

static Kiyot__Cell__V1__ResourceUsage *usage_to_wire(struct arena *ar, const char *unit,
						     const struct resource_usage *u)
{
	Kiyot__Cell__V1__ResourceUsage *w = arena_alloc(ar, sizeof(*w));

	kiyot__cell__v1__resource_usage__init(w);
	w->unit_id = arena_strdup(ar, unit);
	w->timestamp_ns = u->timestamp_ns;
	w->cpu_usage_ns = u->cpu_usage_ns;
	w->memory_working_set_bytes = u->memory_working_set_bytes;
	w->memory_usage_bytes = u->memory_usage_bytes;
	w->memory_rss_bytes = u->memory_rss_bytes;
	w->memory_page_faults = u->memory_page_faults;
	w->memory_major_page_faults = u->memory_major_page_faults;
	w->writable_layer_bytes = u->writable_layer_bytes;
	w->writable_layer_inodes = u->writable_layer_inodes;
	w->cpu_usage_nano_cores = u->cpu_usage_nano_cores;
	w->cpu_rate_known = u->cpu_rate_known;
	w->memory_available_bytes = u->memory_available_bytes;
	return w;
}

int agent_stats_fill(struct agent *a, struct arena *ar, Kiyot__Cell__V1__StatsResponse *out,
		     struct err *err)
{
	static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;
	struct unit_status *st = NULL;
	struct resource_usage u = { 0 };
	struct net_usage net;
	size_t n = 0;

	if (supervisor_list(a->sup, &st, &n, err) < 0)
		return -err->code;
	stats_read_cgroup(a->cgroup ? a->cgroup : "", &u);
	out->cell = usage_to_wire(ar, "", &u);
	out->units = arena_alloc(ar, (n + 1) * sizeof(*out->units));
	pthread_mutex_lock(&walk_lock);
	for (size_t i = 0; i < n; i++) {
		if (st[i].state != UNIT_STATE_RUNNING ||
		    !stats_unit(a->cgroup ? a->cgroup : "", a->cfg.state_dir, st[i].id, &u))
			continue;
		out->units[out->n_units++] = usage_to_wire(ar, st[i].id, &u);
	}
	pthread_mutex_unlock(&walk_lock);
	unit_status_array_free(st, n);
	if (stats_read_network("/proc/net/route", "/proc/net/dev", &net) == 0) {
		Kiyot__Cell__V1__NetworkUsage *w = arena_alloc(ar, sizeof(*w));

		kiyot__cell__v1__network_usage__init(w);
		w->timestamp_ns = net.timestamp_ns;
		w->interface = arena_strdup(ar, net.interface);
		w->rx_bytes = net.rx_bytes;
		w->rx_errors = net.rx_errors;
		w->tx_bytes = net.tx_bytes;
		w->tx_errors = net.tx_errors;
		out->network = w;
	}
	return 0;
}

int api_stats(void *svc, struct rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,
	      struct err *err)
{
	(void)req;
	return agent_stats_fill(svc, rpc_arena(call), (void *)resp, err);
}

/* Where a watch's events go, and whether their reader is still there: a gRPC stream or a
 * feed. */
struct watch_sink {
	int (*send)(void *to, const Kiyot__Cell__V1__WatchEvent *ev, struct err *err);
	bool (*gone)(void *to);
	void *to;
};

/* Where one watch stands in each unit's log. */
struct stream_pos {
	char *unit_id;
	uint64_t next;
};

struct stream {
	struct stream_pos *pos;
	size_t n, cap;
};

static uint64_t *pos_of(struct stream *s, const char *unit_id)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->pos[i].unit_id, unit_id) == 0)
			return &s->pos[i].next;
	xgrow((void **)&s->pos, &s->cap, s->n + 1, sizeof(*s->pos));
	s->pos[s->n].unit_id = xstrdup(unit_id);
	s->pos[s->n].next = 0;
	return &s->pos[s->n++].next;
}

/* Sends whatever the unit's log holds past the watch's position. */
static int send_log(struct agent *a, const struct watch_sink *k, struct stream *s, const char *unit,
		    char *buf, struct err *err)
{
	uint64_t *next = pos_of(s, unit);

	for (;;) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
		size_t got = 0;
		struct err rerr = ERR_INIT;

		if (supervisor_log_read(a->sup, unit, next, buf, LOG_CHUNK, &got, &rerr) < 0 ||
		    got == 0)
			return 0; /* gone or nothing new */
		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG;
		ev.unit_id = (char *)unit;
		ev.offset = *next;
		ev.data.data = (uint8_t *)buf;
		ev.data.len = got;
		if (k->send(k->to, &ev, err) < 0)
			return -err->code;
		*next += got;
	}
}

static int send_status(struct agent *a, const struct watch_sink *k, const char *unit,
		       struct err *err)
{
	struct unit_status *st = NULL;
	size_t n = 0;
	int ret = 0;

	if (supervisor_list(a->sup, &st, &n, err) < 0)
		return -err->code;
	for (size_t i = 0; i < n && ret == 0; i++) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
		Kiyot__Cell__V1__UnitStatus w;

		if (unit && strcmp(st[i].id, unit) != 0)
			continue;
		agent_status_to_wire(&st[i], &w);
		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS;
		ev.status = &w;
		ev.unit_id = st[i].id;
		ret = k->send(k->to, &ev, err);
	}
	unit_status_array_free(st, n);
	return ret;
}

static int send_stats(struct agent *a, const struct watch_sink *k, struct err *err)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
	Kiyot__Cell__V1__StatsResponse stats = KIYOT__CELL__V1__STATS_RESPONSE__INIT;
	struct arena ar = ARENA_INIT;
	int ret = agent_stats_fill(a, &ar, &stats, err);

	if (ret == 0) {
		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__STATS;
		ev.stats = &stats;
		ret = k->send(k->to, &ev, err);
	}
	arena_release(&ar);
	return ret;
}

/* Sends what the hub knows of the instance's interruption, each kind it holds. */
static int send_interruptions(struct agent *a, const struct watch_sink *k, struct err *err)
{
	struct interruption in[INTERRUPTION_KINDS];
	bool have[INTERRUPTION_KINDS];
	int ret = 0;

	pthread_mutex_lock(&a->hub->lock);
	memcpy(in, a->hub->interruptions, sizeof(in));
	memcpy(have, a->hub->have_interruption, sizeof(have));
	pthread_mutex_unlock(&a->hub->lock);
	for (int i = 0; i < INTERRUPTION_KINDS && ret == 0; i++) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
		Kiyot__Cell__V1__Interruption w = KIYOT__CELL__V1__INTERRUPTION__INIT;

		if (!have[i])
			continue;
		w.kind = in[i].kind == INTERRUPTION_NOTICE
				 ? KIYOT__CELL__V1__INTERRUPTION__KIND__NOTICE
				 : KIYOT__CELL__V1__INTERRUPTION__KIND__REBALANCE;
		w.action = in[i].action;
		w.time_unix_ns = in[i].time_unix_ns;
		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__INTERRUPTION;
		ev.interruption = &w;
		ret = k->send(k->to, &ev, err);
	}
	return ret;
}

/* Takes the next note, waiting up to wait_ms; 1 with *out, 0 on timeout, -1 on overflow. */
static int next_note(struct watch_hub *h, struct watcher *w, int64_t wait_ms, struct note *out)
{
	struct timespec ts = clock_deadline(CLOCK_MONOTONIC, wait_ms);
	int ret = 0;

	pthread_mutex_lock(&h->lock);
	if (w->len == 0 && !w->overflow)
		pthread_cond_timedwait(&h->cond, &h->lock, &ts);
	if (w->overflow) {
		ret = -1;
	} else if (w->len) {
		*out = w->q[w->head];
		w->head = (w->head + 1) % WATCH_QUEUE_MAX;
		w->len--;
		ret = 1;
	}
	pthread_mutex_unlock(&h->lock);
	return ret;
}

/* The backlog (every unit's status, the logs past r's offsets, SYNCED), then what happens,
 * with the cell's usage every stats interval, until the reader goes or a send fails. */
static int watch_serve(struct agent *a, const Kiyot__Cell__V1__WatchRequest *r,
		       const struct watch_sink *k, struct err *err)
{
	struct watcher *w = xcalloc(1, sizeof(*w));
	struct stream s = { 0 };
	char *buf = xmalloc(LOG_CHUNK);
	struct unit_status *st = NULL;
	int64_t every_ms = r->stats_interval_ms;
	int64_t stats_due = 0;
	size_t n = 0;
	int ret;

	if (every_ms && every_ms < STATS_INTERVAL_MIN_MS)
		every_ms = STATS_INTERVAL_MIN_MS;
	for (size_t i = 0; i < r->n_offsets; i++)
		*pos_of(&s, r->offsets[i]->unit_id) = r->offsets[i]->offset;
	/* subscribe first, so nothing that happens during the backlog is missed */
	pthread_mutex_lock(&a->hub->lock);
	w->next = a->hub->list;
	a->hub->list = w;
	pthread_mutex_unlock(&a->hub->lock);

	ret = send_status(a, k, NULL, err);
	if (ret == 0 && supervisor_list(a->sup, &st, &n, err) == 0) {
		for (size_t i = 0; i < n && ret == 0; i++)
			ret = send_log(a, k, &s, st[i].id, buf, err);
		unit_status_array_free(st, n);
	}
	if (ret == 0)
		ret = send_interruptions(a, k, err);
	if (ret == 0) {
		Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

		ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__SYNCED;
		ret = k->send(k->to, &ev, err);
	}
	while (ret == 0 && !k->gone(k->to)) {
		int64_t now = clock_mono_ns(), wait_ms = 1000;
		struct note note;
		int got;

		if (every_ms && now >= stats_due) {
			ret = send_stats(a, k, err);
			stats_due = now + every_ms * 1000000;
			continue;
		}
		if (every_ms && (stats_due - now) / 1000000 < wait_ms)
			wait_ms = (stats_due - now) / 1000000 + 1;
		got = next_note(a->hub, w, wait_ms, &note);
		if (got < 0) {
			ret = err_set(err, EAGAIN, "watcher fell behind; resume from your offsets");
			break;
		}
		if (got == 0)
			continue;
		ret = !note.unit_id ? send_interruptions(a, k, err)
		      : note.is_log ? send_log(a, k, &s, note.unit_id, buf, err)
				    : send_status(a, k, note.unit_id, err);
		free(note.unit_id);
	}
	watcher_remove(a->hub, w);
	for (size_t i = 0; i < s.n; i++)
		free(s.pos[i].unit_id);
	free(s.pos);
	free(buf);
	return ret;
}

static int rpc_sink_send(void *to, const Kiyot__Cell__V1__WatchEvent *ev, struct err *err)
{
	return rpc_send(to, &ev->base, err);
}

static bool rpc_sink_gone(void *to)
{
	return rpc_cancelled(to);
}

int api_watch(void *svc, struct rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,
	      struct err *err)
{
	struct watch_sink k = { rpc_sink_send, rpc_sink_gone, call };
	int ret;

	(void)resp;
	ret = watch_serve(svc, (const Kiyot__Cell__V1__WatchRequest *)req, &k, err);
	return ret < 0 ? ret : err_set(err, ECANCELED, "watch ended");
}

static int feed_sink_send(void *to, const Kiyot__Cell__V1__WatchEvent *ev, struct err *err)
{
	return feed_send(to, &ev->base, err);
}

static bool feed_sink_gone(void *to)
{
	return feed_gone(to);
}

void agent_feed_session(void *arg, struct feed_conn *c, const ProtobufCMessage *req)
{
	struct watch_sink k = { feed_sink_send, feed_sink_gone, c };
	struct err err = ERR_INIT;

	if (watch_serve(arg, (const Kiyot__Cell__V1__WatchRequest *)req, &k, &err) < 0)
		log_debug("feed ended: %s", err.msg);
}
