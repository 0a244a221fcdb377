/*
 * interrupt.c: the poller of the instance metadata service's interruption notice and
 * rebalance recommendation (see interrupt.h).
 */
#include "interrupt.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "imds.h"
#include "log.h"
#include "xalloc.h"

struct interrupt_watch {
	struct watch_hub *hub;
	struct imds_client *imds;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	/* what was handed on last of each kind, so each answer goes once */
	struct interruption last[INTERRUPTION_KINDS];
	bool have[INTERRUPTION_KINDS];
	bool failing; /* the last poll failed: the next failure is logged at debug only */
};

/* "2026-11-29T08:22:00Z" (seconds may carry a fraction) as Unix time in ns; -1 if not one. */
static int64_t parse_time(const char *s)
{
	struct tm tm = { 0 };
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
	time_t t;

	if (!end)
		return -1;
	if (*end == '.')
		for (end++; *end >= '0' && *end <= '9'; end++)
			;
	if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
		return -1;
	t = timegm(&tm);
	return t < 0 ? -1 : (int64_t)t * 1000000000LL;
}

int interruption_parse(enum interruption_kind kind, const char *body, size_t len,
		       struct interruption *out, struct err *err)
{
	const char *what = kind == INTERRUPTION_NOTICE ? "spot/instance-action"
						       : "events/recommendations/rebalance";
	json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	const char *action = json_string_value(json_object_get(doc, "action"));
	const char *when = json_string_value(
		json_object_get(doc, kind == INTERRUPTION_NOTICE ? "time" : "noticeTime"));
	struct interruption in = { .kind = kind };
	int ret = 0;

	if (!json_is_object(doc))
		ret = err_set(err, EINVAL, "%s: not a JSON object", what);
	else if ((in.time_unix_ns = parse_time(when)) < 0)
		ret = err_set(err, EINVAL, "%s: \"%s\" is not a UTC time (2026-11-29T08:22:00Z)",
			      what, kind == INTERRUPTION_NOTICE ? "time" : "noticeTime");
	else if (kind == INTERRUPTION_NOTICE &&
		 (!action || (strcmp(action, "terminate") && strcmp(action, "stop") &&
			      strcmp(action, "hibernate"))))
		ret = err_set(err, EINVAL, "%s: \"action\" is not terminate, stop or hibernate",
			      what);
	else if (action && kind == INTERRUPTION_NOTICE)
		snprintf(in.action, sizeof(in.action), "%s", action);
	json_decref(doc);
	if (ret == 0)
		*out = in;
	return ret;
}

/* Asks the service for kind's path once; hands a new answer on. */
static void poll_one(struct interrupt_watch *w, enum interruption_kind kind)
{
	const char *path = kind == INTERRUPTION_NOTICE ? INTERRUPT_PATH_NOTICE
						       : INTERRUPT_PATH_REBALANCE;
	struct interruption in;
	struct err err = ERR_INIT;
	char *body = NULL;
	size_t len = 0;
	int ret = imds_get(w->imds, path, INTERRUPT_BODY_MAX, &body, &len, &err);

	if (ret == -ENOENT)
		return; /* nothing to say */
	if (ret == 0)
		ret = interruption_parse(kind, body, len, &in, &err);
	free(body);
	if (ret < 0) {
		if (w->failing)
			log_debug("instance metadata %s: %s", path, err.msg);
		else
			log_warn("instance metadata %s: %s (asking again every %d s)", path,
				 err.msg, INTERRUPT_POLL_MS / 1000);
		w->failing = true;
		return;
	}
	w->failing = false;
	if (w->have[kind] && memcmp(&w->last[kind], &in, sizeof(in)) == 0)
		return;
	w->last[kind] = in;
	w->have[kind] = true;
	if (kind == INTERRUPTION_NOTICE)
		log_warn("spot interruption notice: EC2 will %s this instance in %lld s", in.action,
			 (long long)((in.time_unix_ns - clock_now_ns()) / 1000000000LL));
	else
		log_warn("rebalance recommendation: this instance is at an elevated risk of "
			 "interruption");
	watch_hub_interruption(w->hub, &in);
}

static void *poller(void *arg)
{
	struct interrupt_watch *w = arg;

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&w->lock);
		poll_one(w, INTERRUPTION_NOTICE);
		poll_one(w, INTERRUPTION_REBALANCE);
		pthread_mutex_lock(&w->lock);
		ts = clock_deadline(CLOCK_MONOTONIC, INTERRUPT_POLL_MS);
		while (!w->stop && pthread_cond_timedwait(&w->cond, &w->lock, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

struct interrupt_watch *interrupt_watch_start(struct watch_hub *hub, const char *endpoint)
{
	struct interrupt_watch *w = xcalloc(1, sizeof(*w));
	struct imds_config cfg = { .endpoint = endpoint };
	struct err err = ERR_INIT;
	pthread_condattr_t ca;

	w->hub = hub;
	if (imds_client_new(&cfg, &w->imds, &err) < 0) {
		log_warn("spot interruptions are not watched: %s", err.msg);
		free(w);
		return NULL;
	}
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->thread, NULL, poller, w) != 0) {
		log_warn("spot interruptions are not watched: no thread");
		imds_client_free(w->imds);
		pthread_mutex_destroy(&w->lock);
		pthread_cond_destroy(&w->cond);
		free(w);
		return NULL;
	}
	log_info("watching the instance metadata service at %s for spot interruptions",
		 imds_client_where(w->imds));
	return w;
}

void interrupt_watch_stop(struct interrupt_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	imds_client_free(w->imds);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	free(w);
}
