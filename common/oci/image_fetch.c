/*
 * image_fetch.c: a pull's layers downloaded a few at a time (IMAGE_FETCH_WORKERS threads, each
 * with a registry client of its own), in the order of the manifest, while the pulling thread
 * unpacks each as soon as it is there. The process's download slots (registry.c) still bound
 * what all pulls fetch at once, and every transfer keeps its own size and time bounds. The
 * first failure stops the others: their transfers end with ECANCELED, as do they all when the
 * pulling thread's caller goes away.
 */
#include "image_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cancel.h"
#include "clock.h"
#include "log.h"
#include "registry.h"
#include "xalloc.h"

#define IMAGE_FETCH_WORKERS 3
#define IMAGE_FETCH_POLL_MS 100 /* how often a waiting pull looks at its caller */

/* One layer's outcome. */
struct fetch_slot {
	bool done;
	int ret;
	struct err err;
};

struct img_fetcher {
	struct reg_client *c; /* the pull's: its learned tokens copied to each worker's */
	int (*fn)(void *ud, struct reg_client *c, size_t i, struct err *err);
	void *ud;
	size_t next, n;
	int busy;		  /* layers being fetched */
	struct fetch_slot *slots; /* indexed by layer; those before the first unused */
	atomic_bool stop;	  /* a failure, or the pulling thread's caller left */
	pthread_mutex_t mu;	  /* guards next and slots */
	pthread_cond_t cv;	  /* a slot done */
	pthread_t threads[IMAGE_FETCH_WORKERS];
	int n_threads;
};

static bool fetch_stopped(void *ctx)
{
	struct img_fetcher *f = ctx;

	return atomic_load(&f->stop);
}

/* Takes the next layer until none is left or the fetch stops. */
static void *fetch_main(void *arg)
{
	struct img_fetcher *f = arg;
	struct reg_client *c = NULL;
	struct cancel_scope sc;
	struct err derr = ERR_INIT;
	int dup;

	cancel_scope_enter(&sc, fetch_stopped, f);
	pthread_mutex_lock(&f->mu);
	dup = reg_client_dup(f->c, &c, &derr);
	for (;;) {
		size_t i = f->next;
		struct err e = ERR_INIT;
		int ret;

		if (i >= f->n || atomic_load(&f->stop))
			break;
		f->next++;
		f->busy++;
		pthread_mutex_unlock(&f->mu);
		ret = dup < 0 ? err_set(&e, derr.code, "%s", derr.msg) : f->fn(f->ud, c, i, &e);
		pthread_mutex_lock(&f->mu);
		f->busy--;
		f->slots[i].done = true;
		f->slots[i].ret = ret;
		if (ret < 0) {
			f->slots[i].err = e;
			atomic_store(&f->stop, true);
		}
		pthread_cond_broadcast(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	reg_client_free(c);
	cancel_scope_leave(&sc);
	return NULL;
}

int img_fetch_start(struct reg_client *c, size_t first, size_t n,
		    int (*fn)(void *ud, struct reg_client *c, size_t i, struct err *err), void *ud,
		    struct img_fetcher **out, struct err *err)
{
	struct img_fetcher *f = xcalloc(1, sizeof(*f));
	size_t want = n - first < IMAGE_FETCH_WORKERS ? n - first : IMAGE_FETCH_WORKERS;

	f->c = c;
	f->fn = fn;
	f->ud = ud;
	f->next = first;
	f->n = n;
	f->slots = xcalloc(n ? n : 1, sizeof(*f->slots));
	atomic_init(&f->stop, false);
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->cv, NULL);
	/* the workers copy c while this thread holds mu: c is not used meanwhile */
	pthread_mutex_lock(&f->mu);
	while ((size_t)f->n_threads < want &&
	       pthread_create(&f->threads[f->n_threads], NULL, fetch_main, f) == 0)
		f->n_threads++;
	pthread_mutex_unlock(&f->mu);
	if (want && !f->n_threads) {
		img_fetch_end(f);
		return err_set(err, EAGAIN, "no thread for downloading layers: %s",
			       strerror(EAGAIN));
	}
	*out = f;
	return 0;
}

/* The error of the fetch as a whole once layer i failed: the first layer's that is not a
 * cancellation the stop caused, else i's own. Called with mu held. */
static int fetch_error(struct img_fetcher *f, size_t i, struct err *err)
{
	for (size_t j = 0; j < f->n; j++) {
		if (f->slots[j].done && f->slots[j].ret < 0 && f->slots[j].ret != -ECANCELED) {
			*err = f->slots[j].err;
			return f->slots[j].ret;
		}
	}
	*err = f->slots[i].err;
	return f->slots[i].ret;
}

int img_fetch_wait(struct img_fetcher *f, size_t i, struct err *err)
{
	int ret = 0;

	pthread_mutex_lock(&f->mu);
	while (!f->slots[i].done && !atomic_load(&f->stop) && !cancel_requested()) {
		struct timespec ts = clock_deadline(CLOCK_REALTIME, IMAGE_FETCH_POLL_MS);

		pthread_cond_timedwait(&f->cv, &f->mu, &ts);
	}
	if (cancel_requested()) {
		atomic_store(&f->stop, true);
		ret = err_set(err, ECANCELED, "cancelled: the caller went away");
	} else if (atomic_load(&f->stop)) {
		/* a layer failed: the others stop; the one that failed first is the error */
		while (f->busy)
			pthread_cond_wait(&f->cv, &f->mu);
		ret = fetch_error(f, i, err);
		if (ret == 0)
			ret = err_set(err, ECANCELED, "cancelled");
	}
	pthread_mutex_unlock(&f->mu);
	return ret;
}

void img_fetch_end(struct img_fetcher *f)
{
	if (!f)
		return;
	atomic_store(&f->stop, true);
	for (int i = 0; i < f->n_threads; i++)
		pthread_join(f->threads[i], NULL);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f->slots);
	free(f);
}
