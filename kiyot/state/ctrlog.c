/*
 * ctrlog.c: containers' log files and their marks (see ctrlog.h). A writer whose mark
 * changed puts itself once on the committer's list; the committer takes the list, and writes
 * each mark under the writer's lock, so the store never gets an older mark after a newer.
 */
#include "ctrlog.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fsutil.h"
#include "log.h"
#include "store.h"
#include "xalloc.h"

struct ctrlogs {
	struct store *store;
	pthread_mutex_t mu; /* guards what follows */
	pthread_cond_t cond;
	struct ctrlog **dirty; /* writers with a mark to commit, a reference each */
	size_t n_dirty, cap_dirty;
	bool kick, stop;
	pthread_t thread;
	bool started;
};

struct ctrlog {
	struct ctrlogs *l;
	char *id;
	char *path;	      /* NULL: no file */
	int refs;	      /* atomic */
	pthread_mutex_t mu;   /* guards what follows */
	int fd;		      /* -1: not open */
	struct log_mark mark; /* what is written; mark.offset is also read atomically */
	unsigned pending;     /* chunks since the mark was last committed */
	bool dirty;	      /* the mark changed since */
	bool listed;	      /* on the committer's list */
	bool idle;	      /* close the file at the next commit */
	bool closed;	      /* the container is gone */
};

/* Puts w on the committer's list unless it is; kick: commit now. Needs w->mu. */
static void list_locked(struct ctrlog *w, bool kick)
{
	struct ctrlogs *l = w->l;

	if (w->listed && !kick)
		return;
	pthread_mutex_lock(&l->mu);
	if (!w->listed) {
		xgrow((void **)&l->dirty, &l->cap_dirty, l->n_dirty + 1, sizeof(*l->dirty));
		l->dirty[l->n_dirty++] = ctrlog_get(w);
		w->listed = true;
	}
	if (kick) {
		l->kick = true;
		pthread_cond_signal(&l->cond);
	}
	pthread_mutex_unlock(&l->mu);
}

/* Writes w's mark to the store. Needs w->mu. */
static void commit_locked(struct ctrlog *w)
{
	struct err err = ERR_INIT;

	if (w->dirty && !w->closed && store_put_log_mark(w->l->store, w->id, &w->mark, &err) < 0)
		log_warn("container %s: log position: %s", w->id, err.msg);
	w->dirty = false;
	w->pending = 0;
}

static void commit_one(struct ctrlog *w)
{
	pthread_mutex_lock(&w->mu);
	w->listed = false;
	commit_locked(w);
	if (w->idle && w->fd >= 0) {
		close(w->fd);
		w->fd = -1;
	}
	w->idle = false;
	pthread_mutex_unlock(&w->mu);
}

void ctrlogs_commit(struct ctrlogs *l)
{
	struct ctrlog **v;
	size_t n;

	pthread_mutex_lock(&l->mu);
	v = l->dirty;
	n = l->n_dirty;
	l->dirty = NULL;
	l->n_dirty = l->cap_dirty = 0;
	pthread_mutex_unlock(&l->mu);
	for (size_t i = 0; i < n; i++) {
		commit_one(v[i]);
		ctrlog_put(v[i]);
	}
	free(v);
}

static void *committer(void *arg)
{
	struct ctrlogs *l = arg;

	pthread_mutex_lock(&l->mu);
	while (!l->stop) {
		if (!l->kick) {
			struct timespec ts = clock_deadline(CLOCK_MONOTONIC, CTRLOG_COMMIT_MS);

			pthread_cond_timedwait(&l->cond, &l->mu, &ts);
		}
		l->kick = false;
		pthread_mutex_unlock(&l->mu);
		ctrlogs_commit(l);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

struct ctrlogs *ctrlogs_new(struct store *st)
{
	struct ctrlogs *l = xcalloc(1, sizeof(*l));
	pthread_condattr_t ca;

	l->store = st;
	pthread_mutex_init(&l->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&l->thread, NULL, committer, l) == 0)
		l->started = true;
	else /* marks then go at exits, reopens and shutdown only */
		log_error("container logs: no thread to commit their positions: %s",
			  strerror(errno));
	return l;
}

void ctrlogs_free(struct ctrlogs *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->cond);
	pthread_mutex_unlock(&l->mu);
	if (l->started)
		pthread_join(l->thread, NULL);
	ctrlogs_commit(l);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cond);
	free(l);
}

/* Opens w's file, and its directory first when it is missing. */
static int open_file(const char *path, struct err *err)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);

	if (fd < 0 && errno == ENOENT) {
		_cleanup_free_ char *dir = xstrdup(path);
		char *slash = strrchr(dir, '/');

		if (slash && slash != dir) {
			*slash = '\0';
			if (fs_mkdir_p(dir, 0755, err) < 0)
				return -err->code;
		}
		fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	}
	if (fd < 0)
		return err_errno(err, "open %s", path);
	return fd;
}

/* Opens w's file unless it is open; a file other than the mark's becomes the mark's, at once
 * in the store too. Needs w->mu. */
static int open_locked(struct ctrlog *w, struct err *err)
{
	struct stat st;
	int fd;

	if (w->fd >= 0 || !w->path)
		return 0;
	if (w->closed)
		return err_set(err, ENOENT, "container %s is removed", w->id);
	fd = open_file(w->path, err);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		err_errno(err, "stat %s", w->path);
		close(fd);
		return -err->code;
	}
	w->fd = fd;
	if ((uint64_t)st.st_dev != w->mark.dev || (uint64_t)st.st_ino != w->mark.ino) {
		w->mark.dev = (uint64_t)st.st_dev;
		w->mark.ino = (uint64_t)st.st_ino;
		w->mark.pos = (uint64_t)st.st_size;
		w->dirty = true;
		commit_locked(w);
	} else {
		w->mark.pos = (uint64_t)st.st_size;
	}
	return 0;
}

/* What the file of the mark holds past its pos was written after the mark was committed: it
 * counts as written. */
static void catch_up(struct ctrlog *w)
{
	struct stat st;

	if (!w->path || !w->mark.ino || stat(w->path, &st) < 0 ||
	    (uint64_t)st.st_dev != w->mark.dev || (uint64_t)st.st_ino != w->mark.ino ||
	    (uint64_t)st.st_size < w->mark.pos)
		return;
	if ((uint64_t)st.st_size > w->mark.pos) {
		log_info("container %s: %llu bytes of its log were written after their position "
			 "was committed; resuming after them",
			 w->id, (unsigned long long)((uint64_t)st.st_size - w->mark.pos));
		w->mark.offset += (uint64_t)st.st_size - w->mark.pos;
		w->mark.pos = (uint64_t)st.st_size;
		w->dirty = true;
	}
}

struct ctrlog *ctrlog_new(struct ctrlogs *l, const char *id, const char *path,
			  const struct log_mark *stored)
{
	struct ctrlog *w = xcalloc(1, sizeof(*w));

	w->l = l;
	w->id = xstrdup(id);
	w->path = path ? xstrdup(path) : NULL;
	w->refs = 1;
	w->fd = -1;
	w->mark = *stored;
	pthread_mutex_init(&w->mu, NULL);
	catch_up(w);
	if (w->dirty) {
		pthread_mutex_lock(&w->mu);
		list_locked(w, false);
		pthread_mutex_unlock(&w->mu);
	}
	return w;
}

struct ctrlog *ctrlog_get(struct ctrlog *w)
{
	__atomic_add_fetch(&w->refs, 1, __ATOMIC_RELAXED);
	return w;
}

void ctrlog_put(struct ctrlog *w)
{
	if (!w || __atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (w->fd >= 0)
		close(w->fd);
	pthread_mutex_destroy(&w->mu);
	free(w->id);
	free(w->path);
	free(w);
}

void ctrlog_close(struct ctrlog *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->closed = true;
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	pthread_mutex_unlock(&w->mu);
}

/* Appends all of data to fd; bytes written, with err set when not all were. */
static size_t append(int fd, const char *path, const uint8_t *data, size_t len, struct err *err)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(fd, data + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err_errno(err, "write %s", path);
			break;
		}
		done += (size_t)n;
	}
	return done;
}

void ctrlog_write(struct ctrlog *w, uint64_t offset, const uint8_t *data, size_t len)
{
	struct err err = ERR_INIT;
	bool kick;

	pthread_mutex_lock(&w->mu);
	if (w->closed || offset + len <= w->mark.offset) {
		pthread_mutex_unlock(&w->mu);
		return; /* gone, or bytes already written */
	}
	if (offset < w->mark.offset) {
		size_t skip = (size_t)(w->mark.offset - offset);

		data += skip;
		len -= skip;
		offset = w->mark.offset;
	}
	if (open_locked(w, &err) == 0 && w->fd >= 0)
		w->mark.pos += append(w->fd, w->path, data, len, &err);
	if (err.code)
		log_warn("container %s: log: %s", w->id, err.msg);
	__atomic_store_n(&w->mark.offset, offset + len, __ATOMIC_RELAXED);
	w->dirty = true;
	kick = ++w->pending == CTRLOG_COMMIT_CHUNKS;
	list_locked(w, kick);
	pthread_mutex_unlock(&w->mu);
}

uint64_t ctrlog_offset(struct ctrlog *w)
{
	return __atomic_load_n(&w->mark.offset, __ATOMIC_RELAXED);
}

int ctrlog_open(struct ctrlog *w, struct err *err)
{
	int ret;

	pthread_mutex_lock(&w->mu);
	ret = open_locked(w, err);
	pthread_mutex_unlock(&w->mu);
	return ret < 0 ? ret : 0;
}

int ctrlog_reopen(struct ctrlog *w, struct err *err)
{
	int ret;

	pthread_mutex_lock(&w->mu);
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	ret = open_locked(w, err);
	pthread_mutex_unlock(&w->mu);
	return ret < 0 ? ret : 0;
}

void ctrlog_idle(struct ctrlog *w)
{
	pthread_mutex_lock(&w->mu);
	w->idle = true;
	list_locked(w, true);
	pthread_mutex_unlock(&w->mu);
}
