/*
 * volsync.c: shipped volumes kept in sync (see volsync.h). One thread waits on an inotify
 * descriptor for changes in the node's volume directories and on an eventfd for new volumes
 * and stop; ships happen on that thread and on the CRI workers that apply units.
 */
#include "volsync.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "cells.h"
#include "clock.h"
#include "daemon/kiyot.h"
#include "log.h"
#include "shipvol.h"
#include "xalloc.h"

#define WATCH_MASK                                                                                 \
	(IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_MODIFY |        \
	 IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW)
#define MS 1000000LL

/* One volume of one cell. */
struct vol {
	char *cell_id, *name, *host_path;
	int wd;		    /* inotify watch, or -1 */
	bool shipped;	    /* the cell has the content of digest */
	uint8_t digest[32]; /* of what the cell has */
	int64_t due_ns;	    /* when to check it again; 0: not due */
	char *last_error;   /* logged once until it changes */
	bool gone;	    /* forgotten; freed with the last reference */
	int refs;
	pthread_mutex_t ship_lock;
	struct vol *next;
};

struct volsync {
	struct kiyot *k;
	pthread_mutex_t lock;
	struct vol *vols;
	int ifd, efd;
	bool stop;
	pthread_t thread;
	bool started;
};

static void vol_put(struct volsync *vs, struct vol *v)
{
	bool last;

	pthread_mutex_lock(&vs->lock);
	last = --v->refs == 0;
	pthread_mutex_unlock(&vs->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&v->ship_lock);
	free(v->cell_id);
	free(v->name);
	free(v->host_path);
	free(v->last_error);
	free(v);
}

/* Unlinks v and drops its watch. Needs vs->lock. */
static void vol_forget_locked(struct volsync *vs, struct vol *v)
{
	bool shared = false;

	for (struct vol **pp = &vs->vols; *pp; pp = &(*pp)->next)
		if (*pp == v) {
			*pp = v->next;
			break;
		}
	for (struct vol *o = vs->vols; o; o = o->next)
		if (o->wd == v->wd)
			shared = true;
	if (v->wd >= 0 && !shared)
		inotify_rm_watch(vs->ifd, v->wd);
	v->gone = true;
	v->refs--; /* the list's reference; the caller holds its own */
}

/* The volume (taking a reference), made when missing. Needs vs->lock. */
static struct vol *vol_get_locked(struct volsync *vs, const char *cell_id, const char *name,
				  const char *host_path)
{
	struct vol *v;

	for (v = vs->vols; v; v = v->next)
		if (strcmp(v->cell_id, cell_id) == 0 && strcmp(v->name, name) == 0) {
			v->refs++;
			return v;
		}
	v = xcalloc(1, sizeof(*v));
	v->cell_id = xstrdup(cell_id);
	v->name = xstrdup(name);
	v->host_path = xstrdup(host_path);
	v->wd = -1;
	v->refs = 2; /* the list's and the caller's */
	pthread_mutex_init(&v->ship_lock, NULL);
	v->next = vs->vols;
	vs->vols = v;
	return v;
}

static void wake(struct volsync *vs)
{
	uint64_t one = 1;

	if (write(vs->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_debug("volsync: wake: %s", strerror(errno));
}

/* Watches v's node copy if it is not watched. Needs vs->lock. */
static void watch_locked(struct volsync *vs, struct vol *v)
{
	if (v->wd >= 0 || v->gone)
		return;
	v->wd = inotify_add_watch(vs->ifd, v->host_path, WATCH_MASK);
	if (v->wd < 0)
		log_warn("volume %s of cell %s: cannot watch %s (%s); changes are found by the "
			 "rescan every %d s",
			 v->name, v->cell_id, v->host_path, strerror(errno), VOLSYNC_RESCAN_S);
}

/* Sends v to its cell if the node's copy differs from what the cell has. */
static int ship(struct volsync *vs, struct vol *v, struct err *err)
{
	struct shipvol_snapshot snap;
	int ret;

	pthread_mutex_lock(&v->ship_lock);
	/* watched before it is read, so a change made while it is read is not missed */
	pthread_mutex_lock(&vs->lock);
	watch_locked(vs, v);
	pthread_mutex_unlock(&vs->lock);
	ret = shipvol_snapshot(v->host_path, v->name, &snap, err);
	if (ret < 0) {
		pthread_mutex_unlock(&v->ship_lock);
		return ret;
	}
	if (v->shipped && memcmp(v->digest, snap.digest, sizeof(v->digest)) == 0) {
		shipvol_snapshot_release(&snap);
		pthread_mutex_unlock(&v->ship_lock);
		return 0;
	}
	ret = cells_write_volume(vs->k->cells, v->cell_id, &snap.req, err);
	if (ret == 0) {
		log_debug("volume %s of cell %s: shipped %zu entries, %llu bytes from %s", v->name,
			  v->cell_id, snap.req.n_entries, (unsigned long long)snap.bytes,
			  v->host_path);
		memcpy(v->digest, snap.digest, sizeof(v->digest));
		v->shipped = true;
	}
	shipvol_snapshot_release(&snap);
	pthread_mutex_unlock(&v->ship_lock);
	return ret;
}

int volsync_ship(struct volsync *vs, const char *cell_id, const char *name, const char *host_path,
		 struct err *err)
{
	struct vol *v;
	int ret;

	pthread_mutex_lock(&vs->lock);
	v = vol_get_locked(vs, cell_id, name, host_path);
	pthread_mutex_unlock(&vs->lock);
	ret = ship(vs, v, err);
	vol_put(vs, v);
	if (ret < 0)
		return err_wrap(err, "volume %s", host_path);
	return 0;
}

/* Marks the volumes an inotify event is about as due after the debounce. */
static void drain_events(struct volsync *vs, int64_t now)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(vs->ifd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const void *)p;

			pthread_mutex_lock(&vs->lock);
			for (struct vol *v = vs->vols; v; v = v->next) {
				if (v->wd != ev->wd)
					continue;
				if (ev->mask & IN_IGNORED)
					v->wd = -1; /* replaced or removed: watched again on ship */
				if (!v->due_ns || v->due_ns > now + VOLSYNC_DEBOUNCE_MS * MS)
					v->due_ns = now + VOLSYNC_DEBOUNCE_MS * MS;
			}
			pthread_mutex_unlock(&vs->lock);
			p += sizeof(*ev) + ev->len;
		}
	}
}

/* Ships every due volume; forgets those whose cell or node copy is gone. */
static void ship_due(struct volsync *vs, int64_t now)
{
	struct vol **due = NULL;
	size_t n = 0, cap = 0;

	pthread_mutex_lock(&vs->lock);
	for (struct vol *v = vs->vols; v; v = v->next)
		if (v->due_ns && v->due_ns <= now) {
			v->due_ns = 0;
			v->refs++;
			xgrow((void **)&due, &cap, n + 1, sizeof(*due));
			due[n++] = v;
		}
	pthread_mutex_unlock(&vs->lock);
	for (size_t i = 0; i < n; i++) {
		struct vol *v = due[i];
		struct err err = ERR_INIT;

		if (ship(vs, v, &err) == 0) {
			free(v->last_error);
			v->last_error = NULL;
		} else if (err.code == ENOENT) {
			/* the cell was terminated, or the kubelet removed the volume */
			log_debug("volume %s of cell %s: forgotten: %s", v->name, v->cell_id,
				  err.msg);
			pthread_mutex_lock(&vs->lock);
			if (!v->gone)
				vol_forget_locked(vs, v);
			pthread_mutex_unlock(&vs->lock);
		} else if (!v->last_error || strcmp(v->last_error, err.msg) != 0) {
			log_error("volume %s of cell %s: %s (retried every %d s)", v->name,
				  v->cell_id, err.msg, VOLSYNC_RESCAN_S);
			free(v->last_error);
			v->last_error = xstrdup(err.msg);
		}
		vol_put(vs, v);
	}
	free(due);
}

/* Milliseconds until the earliest due volume or the next rescan. */
static int next_timeout_ms(struct volsync *vs, int64_t now, int64_t rescan_at)
{
	int64_t next = rescan_at;

	pthread_mutex_lock(&vs->lock);
	for (struct vol *v = vs->vols; v; v = v->next)
		if (v->due_ns && v->due_ns < next)
			next = v->due_ns;
	pthread_mutex_unlock(&vs->lock);
	return next <= now ? 0 : (int)((next - now + MS - 1) / MS);
}

static void *run(void *arg)
{
	struct volsync *vs = arg;
	int64_t rescan_at = clock_now_ns() + VOLSYNC_RESCAN_S * 1000 * MS;

	for (;;) {
		struct pollfd p[2] = { { vs->ifd, POLLIN, 0 }, { vs->efd, POLLIN, 0 } };
		int64_t now = clock_now_ns();
		uint64_t count;
		bool stop;

		if (poll(p, 2, next_timeout_ms(vs, now, rescan_at)) < 0 && errno != EINTR)
			log_error("volsync: poll: %s", strerror(errno));
		if (p[1].revents & POLLIN && read(vs->efd, &count, sizeof(count)) < 0)
			log_debug("volsync: eventfd: %s", strerror(errno));
		pthread_mutex_lock(&vs->lock);
		stop = vs->stop;
		pthread_mutex_unlock(&vs->lock);
		if (stop)
			return NULL;
		now = clock_now_ns();
		if (p[0].revents & POLLIN)
			drain_events(vs, now);
		if (now >= rescan_at) {
			pthread_mutex_lock(&vs->lock);
			for (struct vol *v = vs->vols; v; v = v->next)
				if (!v->due_ns)
					v->due_ns = now;
			pthread_mutex_unlock(&vs->lock);
			rescan_at = now + VOLSYNC_RESCAN_S * 1000 * MS;
		}
		ship_due(vs, now);
	}
}

/* The shipped volumes of the pods that run now, kept in sync from here on (after a restart,
 * a change missed while kiyot was down is shipped by the first check). */
static void track_running(struct volsync *vs)
{
	struct kiyot *k = vs->k;
	struct container **cs;
	size_t n;

	records_lock(k->records);
	n = records_containers(k->records, NULL, &cs);
	for (size_t j = 0; j < n; j++) {
		const struct container *c = cs[j];
		const struct sandbox *sb = records_sandbox(k->records, c->sandbox_id);

		if (!sb || sb->state != SANDBOX_READY || !sb->cell_id[0] ||
		    c->desired == DESIRED_REMOVED)
			continue;
		for (size_t i = 0; i < c->config->n_mounts; i++) {
			const char *host = c->config->mounts[i]->host_path;
			char name[SHIPVOL_NAME_MAX];
			enum shipvol_kind kind;
			struct err err = ERR_INIT;
			struct vol *v;

			if (shipvol_classify(sb->config->metadata->uid, host, &kind, name, &err) <
				    0 ||
			    kind != SHIPVOL_SHIPPED)
				continue;
			pthread_mutex_lock(&vs->lock);
			v = vol_get_locked(vs, sb->cell_id, name, host);
			v->due_ns = clock_now_ns();
			v->refs--; /* the list holds it */
			pthread_mutex_unlock(&vs->lock);
		}
	}
	records_unlock(k->records);
	containers_put(cs, n);
}

struct volsync *volsync_start(struct kiyot *k)
{
	struct volsync *vs = xcalloc(1, sizeof(*vs));

	vs->k = k;
	pthread_mutex_init(&vs->lock, NULL);
	vs->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	vs->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (vs->ifd < 0 || vs->efd < 0) {
		log_error("volsync: %s; shipped volumes are checked every %d s only",
			  strerror(errno), VOLSYNC_RESCAN_S);
		if (vs->ifd < 0)
			vs->ifd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* never readable */
	}
	track_running(vs);
	if (pthread_create(&vs->thread, NULL, run, vs) != 0)
		log_error("volsync: cannot start its thread; shipped volumes are not updated");
	else
		vs->started = true;
	return vs;
}

void volsync_stop(struct volsync *vs)
{
	if (!vs)
		return;
	pthread_mutex_lock(&vs->lock);
	vs->stop = true;
	pthread_mutex_unlock(&vs->lock);
	wake(vs);
	if (vs->started)
		pthread_join(vs->thread, NULL);
	while (vs->vols) {
		struct vol *v = vs->vols;

		v->refs++;
		vol_forget_locked(vs, v);
		vol_put(vs, v);
	}
	close(vs->ifd);
	if (vs->efd >= 0)
		close(vs->efd);
	pthread_mutex_destroy(&vs->lock);
	free(vs);
}
