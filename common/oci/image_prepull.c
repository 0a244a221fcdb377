/*
 * image_prepull.c: the pod's images pulled in the background as soon as the agent serves, so
 * they are there (or on their way) when the kubelet's PullImage or CreateContainer asks for
 * them. A pull that asks meanwhile joins the one under way (image_pull does each reference
 * once); an image already in the store, as after an agent restart, is not fetched again.
 */
#include "image.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "xalloc.h"

struct image_prepull {
	struct image_store *store;
	char **refs;
	size_t n_refs;
	pthread_t thread;
	pthread_mutex_t lock;
	bool stop; /* guarded by lock */
	bool done; /* guarded by lock: every image was tried */
};

static bool prepull_stopping(struct image_prepull *p)
{
	bool stop;

	pthread_mutex_lock(&p->lock);
	stop = p->stop;
	pthread_mutex_unlock(&p->lock);
	return stop;
}

/* Pulls one image anonymously; a failure only logs: the kubelet's pull, with the pod's
 * credentials, comes later anyway. */
static void prepull_one(struct image_prepull *p, const char *ref)
{
	static const struct image_auth anonymous = { 0 };
	struct image_info *info = NULL;
	struct err err = ERR_INIT;
	int64_t t0 = clock_mono_ns();

	if (image_lookup(p->store, ref, &info, &err) == 0) {
		log_info("prepull: image %s is already present (%s)", ref, info->image_id);
		image_info_free(info);
		return;
	}
	err_clear(&err);
	if (image_pull(p->store, ref, &anonymous, &info, &err) < 0) {
		log_warn("prepull: %s; the pod's own pull will try again with its credentials",
			 err.msg);
		return;
	}
	log_info("prepull: image %s ready (%s) in %lld ms", ref, info->image_id,
		 (long long)((clock_mono_ns() - t0) / 1000000));
	image_info_free(info);
}

static void *prepull_main(void *arg)
{
	struct image_prepull *p = arg;

	for (size_t i = 0; i < p->n_refs && !prepull_stopping(p); i++)
		prepull_one(p, p->refs[i]);
	pthread_mutex_lock(&p->lock);
	p->done = true;
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct image_prepull *image_prepull_start(struct image_store *s, char *const *refs, size_t n)
{
	struct image_prepull *p;
	int rc;

	if (n == 0)
		return NULL;
	p = xcalloc(1, sizeof(*p));
	p->store = s;
	p->refs = xcalloc(n, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		p->refs[i] = xstrdup(refs[i]);
	p->n_refs = n;
	pthread_mutex_init(&p->lock, NULL);
	log_info("prepull: pulling %zu images of the pod in the background", n);
	if ((rc = pthread_create(&p->thread, NULL, prepull_main, p)) != 0) {
		log_warn("prepull: cannot start a thread (%s); images are pulled when asked for",
			 strerror(rc));
		for (size_t i = 0; i < n; i++)
			free(p->refs[i]);
		free(p->refs);
		pthread_mutex_destroy(&p->lock);
		free(p);
		return NULL;
	}
	return p;
}

bool image_prepull_done(struct image_prepull *p)
{
	bool done;

	pthread_mutex_lock(&p->lock);
	done = p->done;
	pthread_mutex_unlock(&p->lock);
	return done;
}

int image_prepull_stop(struct image_prepull *p, int wait_ms)
{
	struct timespec ts;

	if (!p)
		return 0;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_mutex_unlock(&p->lock);
	ts = clock_deadline(CLOCK_REALTIME, wait_ms);
	if (pthread_timedjoin_np(p->thread, NULL, &ts) != 0)
		return -EBUSY;
	for (size_t i = 0; i < p->n_refs; i++)
		free(p->refs[i]);
	free(p->refs);
	pthread_mutex_destroy(&p->lock);
	free(p);
	return 0;
}
