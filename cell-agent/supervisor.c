/*
 * supervisor.c: converges the units of a cell to the desired pod. Callers (apply) prepare
 * bundles; one thread watches the unit directories (inotify: log growth, exit.json), starts
 * units when their turn comes, restarts them with back-off, stops them (TERM, grace, KILL),
 * removes them, and delivers the callbacks.
 */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "bundle.h"
#include "clock.h"
#include "fsutil.h"
#include "image.h"
#include "log.h"
#include "xalloc.h"

#define POD_FILE_MAX (16 * 1024 * 1024)
#define STATUS_FILE_MAX (256 * 1024)
#define EXEC_OUTPUT_MAX (16 * 1024 * 1024)
#define LOG_CHUNK (64 * 1024)
#define RESET_AFTER_NS (600 * 1000000000LL)
#define SHIM_START_GRACE_NS (10 * 1000000000LL)
#define RUNTIME_CMD_TIMEOUT_MS 10000
#define TICK_MS 100

/* One unit and everything the supervisor knows of it. Guarded by supervisor.mu. */
struct unit {
	struct unit *next;
	char *id, *dir;
	Kiyot__Cell__V1__Unit *spec; /* deep copy; NULL when adopted without a pod */
	struct unit_status st;
	char *image_rootfs;          /* overlay lower directory */
	char *prep_error;            /* why the bundle could not be made */
	bool prepared, removing, exit_pending;
	int wd;
	int kill_stage;              /* 0 none, 1 TERM sent, 2 KILL sent */
	int64_t stop_deadline, next_kill, restart_at, spawn_mono;
	uint32_t backoff_n;
	uint64_t log_sent;
};

struct supervisor {
	struct supervisor_config cfg;
	char *state_dir, *runtime, *shim, *cgroup_parent, *pod_ip, *etc_dir, *volumes_dir;
	pthread_mutex_t mu, apply_mu;
	pthread_cond_t cond;
	struct unit *units;
	Kiyot__Cell__V1__Pod *pod;
	struct unit_status *ev; /* status events waiting for delivery */
	size_t nev, cap_ev;
	pthread_t thread;
	int ino, wake[2];
	bool quit;
};

/* Frees the strings of a status. */
void unit_status_release(struct unit_status *st)
{
	free(st->id);
	free(st->reason);
	free(st->message);
	free(st->image_ref);
	free(st->image_id);
	memset(st, 0, sizeof(*st));
}

/* Frees an array of statuses. */
void unit_status_array_free(struct unit_status *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++)
		unit_status_release(&a[i]);
	free(a);
}

/* Deep copy of a status. */
static void status_copy(struct unit_status *dst, const struct unit_status *src)
{
	*dst = *src;
	dst->id = xstrdup(src->id ? src->id : "");
	dst->reason = xstrdup(src->reason ? src->reason : "");
	dst->message = xstrdup(src->message ? src->message : "");
	dst->image_ref = xstrdup(src->image_ref ? src->image_ref : "");
	dst->image_id = xstrdup(src->image_id ? src->image_id : "");
}

/* Replaces a heap string. */
static void set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v ? v : "");
}

/* True for ids safe as directory names. */
static bool id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > 128 || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

/* Deep copy of a unit through its wire form. */
static Kiyot__Cell__V1__Unit *unit_spec_copy(const Kiyot__Cell__V1__Unit *u)
{
	size_t n = kiyot__cell__v1__unit__get_packed_size(u);
	_cleanup_free_ uint8_t *b = xmalloc(n ? n : 1);

	kiyot__cell__v1__unit__pack(u, b);
	return kiyot__cell__v1__unit__unpack(NULL, n, b);
}

/* Writes a unit's status.json (atomically). Called with mu held. */
static void unit_persist(struct unit *u)
{
	_cleanup_free_ char *path = xasprintf("%s/status.json", u->dir);
	struct err err = ERR_INIT;
	json_t *j;
	char *text;

	j = json_pack("{s:s,s:i,s:I,s:I,s:I,s:i,s:s,s:s,s:i,s:s,s:s,s:i,s:b,s:s,s:i}", "id",
		      u->id, "state", (int)u->st.state, "created_at_ns",
		      (json_int_t)u->st.created_at_ns, "started_at_ns",
		      (json_int_t)u->st.started_at_ns, "finished_at_ns",
		      (json_int_t)u->st.finished_at_ns, "exit_code", u->st.exit_code, "reason",
		      u->st.reason, "message", u->st.message, "restart_count",
		      (int)u->st.restart_count, "image_ref", u->st.image_ref, "image_id",
		      u->st.image_id, "pid", u->st.pid, "prepared", u->prepared, "image_rootfs",
		      u->image_rootfs ? u->image_rootfs : "", "backoff_n", (int)u->backoff_n);
	if (!j)
		return;
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (fs_write_file(path, text, strlen(text), 0644, &err) < 0)
		log_warn("unit %s: %s", u->id, err.msg);
	free(text);
}

/* Queues a status event for the watcher thread to deliver. Called with mu held. */
static void unit_changed(struct supervisor *s, struct unit *u)
{
	unit_persist(u);
	xgrow((void **)&s->ev, &s->cap_ev, s->nev + 1, sizeof(*s->ev));
	status_copy(&s->ev[s->nev++], &u->st);
	pthread_cond_broadcast(&s->cond);
}

/* Wakes the watcher thread. */
static void wake(struct supervisor *s)
{
	char c = 1;

	if (write(s->wake[1], &c, 1) < 0 && errno != EAGAIN)
		log_warn("supervisor: wake: %s", strerror(errno));
}

/* Finds a unit by id. Called with mu held. */
static struct unit *unit_find(struct supervisor *s, const char *id)
{
	for (struct unit *u = s->units; u; u = u->next) {
		if (strcmp(u->id, id) == 0)
			return u;
	}
	return NULL;
}

/* Creates the record and directory of a unit and appends it to the list. Called with mu. */
static struct unit *unit_add(struct supervisor *s, const char *id, struct err *err)
{
	struct unit *u = xcalloc(1, sizeof(*u)), **tail;

	u->id = xstrdup(id);
	u->dir = xasprintf("%s/units/%s", s->state_dir, id);
	if (fs_mkdir_p(u->dir, 0700, err) < 0) {
		free(u->id);
		free(u->dir);
		free(u);
		return NULL;
	}
	u->st.id = xstrdup(id);
	u->st.state = UNIT_STATE_CREATED;
	u->st.reason = xstrdup("");
	u->st.message = xstrdup("");
	u->st.image_ref = xstrdup("");
	u->st.image_id = xstrdup("");
	u->wd = inotify_add_watch(s->ino, u->dir, IN_MODIFY | IN_MOVED_TO | IN_CLOSE_WRITE);
	for (tail = &s->units; *tail; tail = &(*tail)->next)
		;
	*tail = u;
	return u;
}

/* Frees a unit record (not its directory). */
static void unit_free(struct unit *u)
{
	if (u->spec)
		kiyot__cell__v1__unit__free_unpacked(u->spec, NULL);
	unit_status_release(&u->st);
	free(u->image_rootfs);
	free(u->prep_error);
	free(u->id);
	free(u->dir);
	free(u);
}

/* The unit's grace period in ns. */
static int64_t grace_ns(const struct unit *u)
{
	int64_t sec = u->spec && u->spec->stop_timeout_s > 0 ? u->spec->stop_timeout_s : 30;

	return sec * 1000000000LL;
}

/* Runs "<runtime> kill <id> <sig>"; 0 when the runtime accepted it. */
static int runtime_kill(struct supervisor *s, struct unit *u, const char *sig)
{
	char *argv[] = { s->runtime, "kill", u->id, (char *)sig, NULL };
	struct err err = ERR_INIT;
	int status = 0;

	if (shim_run_capture(argv, RUNTIME_CMD_TIMEOUT_MS, 4096, NULL, NULL, NULL, NULL, &status,
			     &err) < 0)
		return -1;
	return status == 0 ? 0 : -1;
}

/* Advances the stop of a running unit: TERM, then KILL after the grace period and every
 * second after that. Called with mu held. */
static void unit_stop_step(struct supervisor *s, struct unit *u, int64_t now)
{
	u->restart_at = 0;
	if (u->kill_stage == 0) {
		u->stop_deadline = now + grace_ns(u);
		u->kill_stage = 1;
		u->next_kill = 0;
	}
	if (u->kill_stage == 1 && now < u->stop_deadline) {
		/* Retried until accepted: the container may not exist yet. */
		if (now >= u->next_kill && runtime_kill(s, u, "TERM") < 0)
			u->next_kill = now + 200000000LL;
		else if (now >= u->next_kill)
			u->next_kill = u->stop_deadline;
		return;
	}
	if (now >= u->next_kill || u->kill_stage == 1) {
		runtime_kill(s, u, "KILL");
		u->kill_stage = 2;
		u->next_kill = now + 1000000000LL;
	}
}

/* Starts (or restarts) a unit under a new shim. Called with mu held. */
static void unit_start(struct supervisor *s, struct unit *u, bool restart)
{
	static const char *const stale[] = { "exit.json", "pid", "container.pid" };
	_cleanup_free_ char *cgroup = NULL;
	struct err err = ERR_INIT;
	int ret;

	for (size_t i = 0; i < ARRAY_SIZE(stale); i++) {
		_cleanup_free_ char *p = xasprintf("%s/%s", u->dir, stale[i]);

		unlink(p);
	}
	if (s->cgroup_parent[0])
		cgroup = xasprintf("%s/%s", strcmp(s->cgroup_parent, "/") ? s->cgroup_parent : "",
				   u->id);
	ret = bundle_mount_rootfs(u->image_rootfs, u->dir, &err);
	if (ret == 0)
		ret = shim_spawn(s->shim, u->dir, s->runtime, u->id, cgroup, &err);
	if (restart)
		u->st.restart_count++;
	u->restart_at = 0;
	u->kill_stage = 0;
	u->exit_pending = false;
	u->spawn_mono = clock_mono_ns();
	u->st.pid = 0;
	u->st.exit_code = 0;
	u->st.finished_at_ns = 0;
	u->st.started_at_ns = clock_now_ns();
	if (ret < 0) {
		u->st.state = UNIT_STATE_EXITED;
		u->st.exit_code = 128;
		u->st.finished_at_ns = u->st.started_at_ns;
		set_str(&u->st.reason, "StartError");
		set_str(&u->st.message, err.msg);
	} else {
		u->st.state = UNIT_STATE_RUNNING;
		set_str(&u->st.reason, "");
		set_str(&u->st.message, "");
	}
	unit_changed(s, u);
}

/* Whether the pod's restart policy restarts this exit. */
static bool wants_restart(struct supervisor *s, struct unit *u)
{
	int policy = s->pod ? (int)s->pod->restart_policy : KIYOT__CELL__V1__RESTART_POLICY__NEVER;

	if (!u->spec || u->removing || u->spec->desired != KIYOT__CELL__V1__UNIT_DESIRED__RUNNING ||
	    u->kill_stage)
		return false;
	if (u->spec->init)
		return u->st.exit_code != 0 && policy != KIYOT__CELL__V1__RESTART_POLICY__NEVER;
	if (policy == KIYOT__CELL__V1__RESTART_POLICY__ALWAYS)
		return true;
	return policy == KIYOT__CELL__V1__RESTART_POLICY__ON_FAILURE && u->st.exit_code != 0;
}

/* Schedules a restart with exponential back-off if the policy asks for one. */
static void schedule_restart(struct supervisor *s, struct unit *u)
{
	int64_t delay;

	if (!wants_restart(s, u))
		return;
	if (u->st.finished_at_ns - u->st.started_at_ns >= RESET_AFTER_NS)
		u->backoff_n = 0;
	delay = s->cfg.backoff_base_ms;
	for (uint32_t i = 0; i < u->backoff_n && delay < s->cfg.backoff_max_ms; i++)
		delay *= 2;
	if (delay > s->cfg.backoff_max_ms)
		delay = s->cfg.backoff_max_ms;
	u->backoff_n++;
	u->restart_at = clock_mono_ns() + delay * 1000000LL;
}

/* Records an exit read from exit.json (or a vanished shim) and decides on a restart. */
static void unit_exited(struct supervisor *s, struct unit *u)
{
	_cleanup_free_ char *path = xasprintf("%s/exit.json", u->dir), *text = NULL;
	struct err err = ERR_INIT;
	json_t *j = NULL;

	u->exit_pending = false;
	if (fs_read_file(path, STATUS_FILE_MAX, &text, NULL, &err) == 0)
		j = json_loads(text, 0, NULL);
	if (j) {
		u->st.exit_code = (int32_t)json_integer_value(json_object_get(j, "exit_code"));
		u->st.started_at_ns = json_integer_value(json_object_get(j, "started_ns"));
		u->st.finished_at_ns = json_integer_value(json_object_get(j, "finished_ns"));
		set_str(&u->st.reason, json_string_value(json_object_get(j, "reason")));
		set_str(&u->st.message, json_string_value(json_object_get(j, "message")));
		json_decref(j);
	} else {
		u->st.exit_code = 255;
		u->st.finished_at_ns = clock_now_ns();
		set_str(&u->st.reason, "Error");
		set_str(&u->st.message, "the unit's shim ended without recording an exit status");
	}
	u->st.state = UNIT_STATE_EXITED;
	u->st.pid = 0;
	schedule_restart(s, u);
	u->kill_stage = 0;
	unit_changed(s, u);
}

/* Notices a running unit's container pid, or a shim that died without exit.json. */
static void unit_check_running(struct supervisor *s, struct unit *u, int64_t now)
{
	_cleanup_free_ char *exitp = xasprintf("%s/exit.json", u->dir);
	int alive;

	if (u->st.pid == 0) {
		_cleanup_free_ char *p = xasprintf("%s/container.pid", u->dir), *t = NULL;
		struct err err = ERR_INIT;

		if (fs_read_file(p, 64, &t, NULL, &err) == 0 && strtol(t, NULL, 10) > 0) {
			u->st.pid = (int32_t)strtol(t, NULL, 10);
			unit_changed(s, u);
		}
	}
	if (fs_exists(exitp)) {
		u->exit_pending = true;
		return;
	}
	alive = shim_alive(u->dir);
	if (alive == 1 || (alive < 0 && now - u->spawn_mono < SHIM_START_GRACE_NS))
		return;
	if (!fs_exists(exitp))
		unit_exited(s, u);
}

/* True when every init unit before u (all of them for app units) completed with 0. */
static bool init_done(struct supervisor *s, struct unit *u)
{
	for (struct unit *o = s->units; o && o != u; o = o->next) {
		if (!o->spec || !o->spec->init || o->removing)
			continue;
		if (o->st.state != UNIT_STATE_EXITED || o->st.exit_code != 0)
			return false;
	}
	if (u->spec && u->spec->init)
		return true;
	for (struct unit *o = u->next; o; o = o->next) {
		if (o->spec && o->spec->init && !o->removing &&
		    (o->st.state != UNIT_STATE_EXITED || o->st.exit_code != 0))
			return false;
	}
	return true;
}

/* True when an init unit ahead of u failed for good (no restart coming). */
static bool init_failed(struct supervisor *s, struct unit *u)
{
	for (struct unit *o = s->units; o; o = o->next) {
		if (o == u && u->spec && u->spec->init)
			return false;
		if (o->spec && o->spec->init && !o->removing && o->st.state == UNIT_STATE_EXITED &&
		    o->st.exit_code != 0 && o->restart_at == 0)
			return true;
	}
	return false;
}

/* Unmounts and deletes a stopped unit, reporting it as gone. Returns the next unit. */
static void unit_remove(struct supervisor *s, struct unit *u)
{
	struct err err = ERR_INIT;
	struct unit **pp;

	if (bundle_umount_rootfs(u->dir, &err) < 0 || fs_remove_tree(u->dir, &err) < 0)
		log_warn("unit %s: %s", u->id, err.msg);
	if (u->wd >= 0)
		inotify_rm_watch(s->ino, u->wd);
	u->st.state = UNIT_STATE_UNKNOWN;
	xgrow((void **)&s->ev, &s->cap_ev, s->nev + 1, sizeof(*s->ev));
	status_copy(&s->ev[s->nev++], &u->st);
	for (pp = &s->units; *pp != u; pp = &(*pp)->next)
		;
	*pp = u->next;
	unit_free(u);
}

/* One pass over all units: exits, starts, restarts, stops, removals. Called with mu held. */
static void reconcile(struct supervisor *s)
{
	int64_t now = clock_mono_ns();
	struct unit *u, *next;

	for (u = s->units; u; u = next) {
		int desired = u->spec ? (int)u->spec->desired : KIYOT__CELL__V1__UNIT_DESIRED__STOPPED;

		next = u->next;
		if (u->st.state == UNIT_STATE_RUNNING && !u->exit_pending)
			unit_check_running(s, u, now);
		if (u->exit_pending && u->st.state == UNIT_STATE_RUNNING)
			unit_exited(s, u);
		if (u->removing) {
			if (u->st.state == UNIT_STATE_RUNNING)
				unit_stop_step(s, u, now);
			else
				unit_remove(s, u);
			continue;
		}
		if (!u->prepared)
			continue;
		if (desired == KIYOT__CELL__V1__UNIT_DESIRED__STOPPED) {
			if (u->st.state == UNIT_STATE_RUNNING)
				unit_stop_step(s, u, now);
			u->restart_at = 0;
			continue;
		}
		if (desired != KIYOT__CELL__V1__UNIT_DESIRED__RUNNING)
			continue;
		if (u->st.state == UNIT_STATE_EXITED && u->restart_at && now >= u->restart_at)
			unit_start(s, u, true);
		else if (u->st.state == UNIT_STATE_CREATED && init_done(s, u))
			unit_start(s, u, false);
	}
}

/* Reads new whole lines of a unit's log from offset; returns bytes put in buf. */
static size_t read_lines(const char *path, uint64_t offset, char *buf, size_t cap)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	char *nl;

	if (fd < 0)
		return 0;
	n = pread(fd, buf, cap, (off_t)offset);
	if (n <= 0)
		return 0;
	nl = memrchr(buf, '\n', (size_t)n);
	if (!nl)
		return (size_t)n == cap ? cap : 0;
	return (size_t)(nl - buf + 1);
}

/* One unit's log to deliver. */
struct log_job {
	char *id, *path;
	uint64_t from;
};

/* Delivers queued status events and new log lines outside the lock. */
static void deliver(struct supervisor *s)
{
	struct unit_status *ev;
	struct log_job *jobs = NULL;
	size_t nev, njobs = 0, cap = 0;
	_cleanup_free_ char *buf = xmalloc(LOG_CHUNK);

	pthread_mutex_lock(&s->mu);
	ev = steal_ptr(s->ev);
	nev = s->nev;
	s->nev = s->cap_ev = 0;
	for (struct unit *u = s->units; u; u = u->next) {
		_cleanup_free_ char *path = xasprintf("%s/log", u->dir);
		struct stat st;

		if (stat(path, &st) < 0 || (uint64_t)st.st_size <= u->log_sent)
			continue;
		xgrow((void **)&jobs, &cap, njobs + 1, sizeof(*jobs));
		jobs[njobs++] = (struct log_job){ xstrdup(u->id), steal_ptr(path), u->log_sent };
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; i < nev; i++) {
		if (s->cfg.cb.status)
			s->cfg.cb.status(s->cfg.cb.ctx, &ev[i]);
	}
	unit_status_array_free(ev, nev);
	for (size_t i = 0; i < njobs; i++) {
		size_t n;

		while ((n = read_lines(jobs[i].path, jobs[i].from, buf, LOG_CHUNK)) > 0) {
			if (s->cfg.cb.log)
				s->cfg.cb.log(s->cfg.cb.ctx, jobs[i].id, jobs[i].from, buf, n);
			jobs[i].from += n;
		}
		pthread_mutex_lock(&s->mu);
		{
			struct unit *u = unit_find(s, jobs[i].id);

			if (u)
				u->log_sent = jobs[i].from;
		}
		pthread_mutex_unlock(&s->mu);
		free(jobs[i].id);
		free(jobs[i].path);
	}
	free(jobs);
}

/* Marks units whose exit.json appeared, from the inotify events. */
static void read_inotify(struct supervisor *s)
{
	char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(s->ino, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *e = (struct inotify_event *)p;

			if (e->len && strcmp(e->name, "exit.json") == 0) {
				pthread_mutex_lock(&s->mu);
				for (struct unit *u = s->units; u; u = u->next) {
					if (u->wd == e->wd && u->st.state == UNIT_STATE_RUNNING)
						u->exit_pending = true;
				}
				pthread_mutex_unlock(&s->mu);
			}
			p += sizeof(*e) + e->len;
		}
	}
}

/* The watcher thread: waits for inotify events or the next tick, then reconciles. */
static void *watch_thread(void *arg)
{
	struct supervisor *s = arg;

	for (;;) {
		struct pollfd p[2] = { { s->ino, POLLIN, 0 }, { s->wake[0], POLLIN, 0 } };
		char drainbuf[64];

		poll(p, 2, TICK_MS);
		while (read(s->wake[0], drainbuf, sizeof(drainbuf)) > 0)
			;
		read_inotify(s);
		pthread_mutex_lock(&s->mu);
		if (s->quit) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		reconcile(s);
		pthread_cond_broadcast(&s->cond);
		pthread_mutex_unlock(&s->mu);
		deliver(s);
	}
	return NULL;
}

/* Restores a unit's status from status.json. Called with mu held. */
static void unit_load(struct supervisor *s, struct unit *u)
{
	_cleanup_free_ char *path = xasprintf("%s/status.json", u->dir), *text = NULL;
	_cleanup_free_ char *logp = xasprintf("%s/log", u->dir);
	struct err err = ERR_INIT;
	struct stat lst;
	json_t *j;

	if (fs_read_file(path, STATUS_FILE_MAX, &text, NULL, &err) < 0)
		return;
	j = json_loads(text, 0, NULL);
	if (!j)
		return;
	u->st.state = (enum unit_state)json_integer_value(json_object_get(j, "state"));
	u->st.created_at_ns = json_integer_value(json_object_get(j, "created_at_ns"));
	u->st.started_at_ns = json_integer_value(json_object_get(j, "started_at_ns"));
	u->st.finished_at_ns = json_integer_value(json_object_get(j, "finished_at_ns"));
	u->st.exit_code = (int32_t)json_integer_value(json_object_get(j, "exit_code"));
	u->st.restart_count = (uint32_t)json_integer_value(json_object_get(j, "restart_count"));
	u->st.pid = (int32_t)json_integer_value(json_object_get(j, "pid"));
	set_str(&u->st.reason, json_string_value(json_object_get(j, "reason")));
	set_str(&u->st.message, json_string_value(json_object_get(j, "message")));
	set_str(&u->st.image_ref, json_string_value(json_object_get(j, "image_ref")));
	set_str(&u->st.image_id, json_string_value(json_object_get(j, "image_id")));
	set_str(&u->image_rootfs, json_string_value(json_object_get(j, "image_rootfs")));
	u->prepared = json_is_true(json_object_get(j, "prepared"));
	u->backoff_n = (uint32_t)json_integer_value(json_object_get(j, "backoff_n"));
	json_decref(j);
	if (u->st.state > UNIT_STATE_UNKNOWN)
		u->st.state = UNIT_STATE_UNKNOWN;
	/* Only output written from now on is pushed; earlier output is read with log_read. */
	if (stat(logp, &lst) == 0)
		u->log_sent = (uint64_t)lst.st_size;
	/* An exit seen by nobody yet is read on the first pass; a unit that exited while no
	 * agent ran gets its restart decision then. */
	if (u->st.state == UNIT_STATE_EXITED) {
		schedule_restart(s, u);
	}
}

/* Loads the persisted pod and adopts the unit directories in state_dir/units. */
static int adopt(struct supervisor *s, struct err *err)
{
	_cleanup_free_ char *podp = xasprintf("%s/pod.pb", s->state_dir);
	_cleanup_free_ char *units = xasprintf("%s/units", s->state_dir);
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	DIR *d;
	struct dirent *e;

	if (fs_exists(podp)) {
		if (fs_read_file(podp, POD_FILE_MAX, &data, &len, err) < 0)
			return err_wrap(err, "saved pod");
		s->pod = kiyot__cell__v1__pod__unpack(NULL, len, (const uint8_t *)data);
		if (!s->pod)
			log_warn("supervisor: %s does not decode; starting without a pod", podp);
	}
	d = opendir(units);
	if (!d)
		return err_errno(err, "open %s", units);
	while ((e = readdir(d))) {
		struct unit *u;

		if (e->d_name[0] == '.' || !id_valid(e->d_name))
			continue;
		u = unit_add(s, e->d_name, err);
		if (!u) {
			closedir(d);
			return -err->code;
		}
		for (size_t i = 0; s->pod && i < s->pod->n_units; i++) {
			if (strcmp(s->pod->units[i]->id, u->id) == 0)
				u->spec = unit_spec_copy(s->pod->units[i]);
		}
		if (!u->spec)
			u->removing = true;
		unit_load(s, u);
	}
	closedir(d);
	return 0;
}

/* Creates the supervisor; see the header. */
int supervisor_new(const struct supervisor_config *cfg, struct supervisor **out,
		   struct err *err)
{
	struct supervisor *s = xcalloc(1, sizeof(*s));
	_cleanup_free_ char *units = NULL;
	int ret;

	s->cfg = *cfg;
	s->state_dir = xstrdup(cfg->state_dir);
	s->runtime = xstrdup(cfg->runtime && cfg->runtime[0] ? cfg->runtime : "crun");
	s->shim = xstrdup(cfg->shim && cfg->shim[0] ? cfg->shim : "/proc/self/exe");
	s->cgroup_parent = xstrdup(cfg->cgroup_parent ? cfg->cgroup_parent : "");
	s->pod_ip = xstrdup(cfg->pod_ip ? cfg->pod_ip : "");
	s->etc_dir = xasprintf("%s/etc", cfg->state_dir);
	s->volumes_dir = xasprintf("%s/volumes", cfg->state_dir);
	if (s->cfg.backoff_base_ms <= 0)
		s->cfg.backoff_base_ms = 10000;
	if (s->cfg.backoff_max_ms <= 0)
		s->cfg.backoff_max_ms = 300000;
	if (s->cfg.backoff_max_ms < s->cfg.backoff_base_ms)
		s->cfg.backoff_max_ms = s->cfg.backoff_base_ms;
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->apply_mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->wake[0] = s->wake[1] = -1;
	s->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (s->ino < 0 || pipe2(s->wake, O_NONBLOCK | O_CLOEXEC) < 0) {
		ret = err_errno(err, "supervisor: inotify or pipe");
		goto fail;
	}
	units = xasprintf("%s/units", s->state_dir);
	ret = fs_mkdir_p(units, 0700, err);
	if (ret == 0)
		ret = adopt(s, err);
	if (ret < 0)
		goto fail;
	if (pthread_create(&s->thread, NULL, watch_thread, s) != 0) {
		ret = err_set(err, EAGAIN, "supervisor: cannot start its thread");
		goto fail;
	}
	*out = s;
	return 0;
fail:
	s->quit = true;
	supervisor_free(s);
	return err_wrap(err, "state directory %s", cfg->state_dir);
}

/* Stops the thread and frees everything; the units keep running. */
void supervisor_free(struct supervisor *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	bool started = !s->quit;

	s->quit = true;
	pthread_mutex_unlock(&s->mu);
	if (started) {
		wake(s);
		pthread_join(s->thread, NULL);
	}
	while (s->units) {
		struct unit *u = s->units;

		s->units = u->next;
		unit_free(u);
	}
	if (s->pod)
		kiyot__cell__v1__pod__free_unpacked(s->pod, NULL);
	unit_status_array_free(s->ev, s->nev);
	if (s->ino >= 0)
		close(s->ino);
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->apply_mu);
	pthread_cond_destroy(&s->cond);
	free(s->state_dir);
	free(s->runtime);
	free(s->shim);
	free(s->cgroup_parent);
	free(s->pod_ip);
	free(s->etc_dir);
	free(s->volumes_dir);
	free(s);
}

/* Resolves the unit's image: the configured resolver or a pull with the unit's credentials. */
static int resolve_image(struct supervisor *s, const Kiyot__Cell__V1__Unit *spec,
			 struct image_info **out, struct err *err)
{
	struct image_auth auth = { 0 };

	if (s->cfg.resolve_image)
		return s->cfg.resolve_image(s->cfg.resolve_ctx, spec->image, out, err);
	if (spec->auth) {
		auth.username = spec->auth->username;
		auth.password = spec->auth->password;
		auth.auth = spec->auth->auth;
		auth.identity_token = spec->auth->identity_token;
		auth.registry_token = spec->auth->registry_token;
	}
	return image_pull(s->cfg.images, spec->image, &auth, out, err);
}

/* Pulls the image and writes the bundle of one unit (without the lock), then records the
 * outcome. */
static void prepare_unit(struct supervisor *s, const char *id)
{
	Kiyot__Cell__V1__Unit *spec = NULL;
	Kiyot__Cell__V1__Pod *pod = NULL;
	struct image_info *info = NULL;
	_cleanup_free_ char *dir = NULL, *rootfs = NULL, *bundle = NULL;
	struct err err = ERR_INIT;
	struct unit *u;
	int ret;

	pthread_mutex_lock(&s->mu);
	u = unit_find(s, id);
	if (u && u->spec && !u->prepared) {
		spec = unit_spec_copy(u->spec);
		dir = xstrdup(u->dir);
	}
	pod = s->pod; /* only replaced under apply_mu, which the caller holds */
	pthread_mutex_unlock(&s->mu);
	if (!spec)
		return;
	rootfs = xasprintf("%s/rootfs", dir);
	bundle = xasprintf("%s/bundle", dir);
	ret = resolve_image(s, spec, &info, &err);
	if (ret == 0) {
		struct bundle_spec bs = { .pod = pod, .unit = spec, .image = info,
					  .rootfs = rootfs, .volumes_dir = s->volumes_dir,
					  .etc_dir = s->etc_dir, .cgroup_parent = s->cgroup_parent };

		ret = bundle_write(&bs, bundle, &err);
	} else {
		err_wrap(&err, "unit %s: image %s", spec->name && spec->name[0] ? spec->name : id,
			 spec->image);
	}
	pthread_mutex_lock(&s->mu);
	u = unit_find(s, id);
	if (u) {
		if (ret == 0) {
			u->prepared = true;
			set_str(&u->image_rootfs, info->rootfs);
			set_str(&u->st.image_id, info->image_id);
			set_str(&u->st.image_ref, info->ref && info->ref[0] ? info->ref : spec->image);
			set_str(&u->st.reason, "");
			set_str(&u->st.message, "");
		} else {
			set_str(&u->st.reason, "CreateContainerError");
			set_str(&u->st.message, err.msg);
		}
		free(u->prep_error);
		u->prep_error = ret < 0 ? xstrdup(err.msg) : NULL;
		unit_changed(s, u);
	}
	pthread_mutex_unlock(&s->mu);
	if (info)
		image_info_free(info);
	kiyot__cell__v1__unit__free_unpacked(spec, NULL);
}

/* Whether a unit reached what its desired state asks, or cannot. Called with mu held. */
static bool unit_settled(struct supervisor *s, struct unit *u)
{
	if (u->prep_error)
		return true;
	if (!u->prepared)
		return false;
	switch (u->spec->desired) {
	case KIYOT__CELL__V1__UNIT_DESIRED__CREATED:
		return true;
	case KIYOT__CELL__V1__UNIT_DESIRED__STOPPED:
		return u->st.state != UNIT_STATE_RUNNING;
	default:
		return u->st.state != UNIT_STATE_CREATED || init_failed(s, u);
	}
}

/* Takes the new pod under the lock: new units, changed desired states, removals. */
static int apply_pod(struct supervisor *s, Kiyot__Cell__V1__Pod *copy, struct err *err)
{
	for (struct unit *u = s->units; u; u = u->next) {
		bool keep = false;

		for (size_t i = 0; i < copy->n_units; i++)
			keep = keep || strcmp(copy->units[i]->id, u->id) == 0;
		if (!keep)
			u->removing = true;
	}
	for (size_t i = 0; i < copy->n_units; i++) {
		const Kiyot__Cell__V1__Unit *spec = copy->units[i];
		struct unit *u = unit_find(s, spec->id);

		if (u && u->removing && u->st.state != UNIT_STATE_RUNNING)
			continue; /* being removed; a new apply after removal recreates it */
		if (!u) {
			u = unit_add(s, spec->id, err);
			if (!u)
				return -err->code;
			u->st.created_at_ns = clock_now_ns();
			set_str(&u->st.image_ref, spec->image);
			unit_changed(s, u);
		}
		u->removing = false;
		if (u->spec)
			kiyot__cell__v1__unit__free_unpacked(u->spec, NULL);
		u->spec = unit_spec_copy(spec);
		if (u->prep_error) {
			free(u->prep_error);
			u->prep_error = NULL; /* try again */
		}
	}
	if (s->pod)
		kiyot__cell__v1__pod__free_unpacked(s->pod, NULL);
	s->pod = copy;
	return 0;
}

/* Checks the pod before anything changes: ids and images. */
static int pod_validate(const Kiyot__Cell__V1__Pod *pod, struct err *err)
{
	for (size_t i = 0; i < pod->n_units; i++) {
		const Kiyot__Cell__V1__Unit *u = pod->units[i];

		if (!id_valid(u->id))
			return err_set(err, EINVAL,
				       "unit id \"%s\": use 1-128 letters, digits, '-', '_' or '.'",
				       u->id);
		if (!u->image || !u->image[0])
			return err_set(err, EINVAL, "unit %s: no image", u->id);
		for (size_t k = 0; k < i; k++) {
			if (strcmp(pod->units[k]->id, u->id) == 0)
				return err_set(err, EINVAL, "unit id %s appears twice", u->id);
		}
	}
	return 0;
}

/* Fills statuses of the pod's units, in pod order. Called with mu held. */
static void collect(struct supervisor *s, const Kiyot__Cell__V1__Pod *pod,
		    struct unit_status **out, size_t *n)
{
	struct unit_status *a = xcalloc(pod->n_units ? pod->n_units : 1, sizeof(*a));
	size_t k = 0;

	for (size_t i = 0; i < pod->n_units; i++) {
		struct unit *u = unit_find(s, pod->units[i]->id);

		if (u)
			status_copy(&a[k++], &u->st);
	}
	*out = a;
	*n = k;
}

/* Replaces the desired pod and waits; see the header. */
int supervisor_apply(struct supervisor *s, const Kiyot__Cell__V1__Pod *pod, int64_t timeout_ms,
		     struct unit_status **out, size_t *n, struct err *err)
{
	size_t len = kiyot__cell__v1__pod__get_packed_size(pod);
	_cleanup_free_ uint8_t *packed = xmalloc(len ? len : 1);
	_cleanup_free_ char *podp = xasprintf("%s/pod.pb", s->state_dir);
	Kiyot__Cell__V1__Pod *copy;
	int64_t deadline = clock_mono_ns() + (timeout_ms > 0 ? timeout_ms : 0) * 1000000LL;
	struct timespec ts;
	int ret;

	ret = pod_validate(pod, err);
	if (ret < 0)
		return ret;
	kiyot__cell__v1__pod__pack(pod, packed);
	copy = kiyot__cell__v1__pod__unpack(NULL, len, packed);
	pthread_mutex_lock(&s->apply_mu);
	ret = fs_write_file(podp, packed, len, 0600, err);
	if (ret == 0)
		ret = bundle_write_etc(copy, s->etc_dir, s->pod_ip, err);
	if (ret == 0) {
		pthread_mutex_lock(&s->mu);
		ret = apply_pod(s, copy, err);
		pthread_mutex_unlock(&s->mu);
	}
	if (ret < 0) {
		pthread_mutex_unlock(&s->apply_mu);
		kiyot__cell__v1__pod__free_unpacked(copy, NULL);
		return err_wrap(err, "apply pod %s", pod->name ? pod->name : "");
	}
	for (size_t i = 0; i < pod->n_units; i++)
		prepare_unit(s, pod->units[i]->id);
	pthread_mutex_unlock(&s->apply_mu);
	wake(s);

	pthread_mutex_lock(&s->mu);
	for (;;) {
		bool all = true;

		for (size_t i = 0; i < pod->n_units && all; i++) {
			struct unit *u = unit_find(s, pod->units[i]->id);

			all = u && u->spec && unit_settled(s, u);
		}
		if (all || clock_mono_ns() >= deadline)
			break;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->cond, &s->mu, &ts);
	}
	collect(s, pod, out, n);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

/* Current statuses of all units; see the header. */
int supervisor_list(struct supervisor *s, struct unit_status **out, size_t *n, struct err *err)
{
	struct unit_status *a = NULL;
	size_t k = 0, cap = 0;

	(void)err;
	pthread_mutex_lock(&s->mu);
	for (struct unit *u = s->units; u; u = u->next) {
		xgrow((void **)&a, &cap, k + 1, sizeof(*a));
		status_copy(&a[k++], &u->st);
	}
	pthread_mutex_unlock(&s->mu);
	*out = a ? a : xcalloc(1, sizeof(*a));
	*n = k;
	return 0;
}

/* The directory of a known unit, or -ENOENT. */
static int unit_dir_of(struct supervisor *s, const char *id, char **dir, bool *running,
		       struct err *err)
{
	struct unit *u;

	pthread_mutex_lock(&s->mu);
	u = id ? unit_find(s, id) : NULL;
	if (u) {
		*dir = xstrdup(u->dir);
		*running = u->st.state == UNIT_STATE_RUNNING;
	}
	pthread_mutex_unlock(&s->mu);
	if (!u)
		return err_set(err, ENOENT, "unit %s not found in this cell", id ? id : "(null)");
	return 0;
}

/* Reads whole log lines from offset; see the header. */
int supervisor_log_read(struct supervisor *s, const char *unit_id, uint64_t offset, char *buf,
			size_t cap, size_t *got, struct err *err)
{
	_cleanup_free_ char *dir = NULL, *path = NULL;
	bool running;
	int ret = unit_dir_of(s, unit_id, &dir, &running, err);
	size_t n;

	if (ret < 0)
		return ret;
	path = xasprintf("%s/log", dir);
	n = read_lines(path, offset, buf, cap);
	if (n == cap && cap && buf[cap - 1] != '\n')
		return err_set(err, ENOBUFS, "unit %s: a log line is longer than %zu bytes",
			       unit_id, cap);
	*got = n;
	return 0;
}

/* Runs a command in a running unit; see the header. */
int supervisor_exec_sync(struct supervisor *s, const char *unit_id, char *const *cmd,
			 int64_t timeout_s, char **out, size_t *out_len, char **errout,
			 size_t *err_len, int *exit_code, struct err *err)
{
	_cleanup_free_ char *dir = NULL;
	char **argv;
	size_t n = 0;
	bool running = false;
	int ret = unit_dir_of(s, unit_id, &dir, &running, err);

	if (ret < 0)
		return ret;
	if (!running)
		return err_set(err, EINVAL, "unit %s is not running", unit_id);
	while (cmd && cmd[n])
		n++;
	if (n == 0)
		return err_set(err, EINVAL, "exec in unit %s: empty command", unit_id);
	argv = xcalloc(n + 4, sizeof(*argv));
	argv[0] = s->runtime;
	argv[1] = "exec";
	argv[2] = (char *)unit_id;
	for (size_t i = 0; i < n; i++)
		argv[3 + i] = cmd[i];
	ret = shim_run_capture(argv, (timeout_s > 0 ? timeout_s : 3600) * 1000, EXEC_OUTPUT_MAX,
			       out, out_len, errout, err_len, exit_code, err);
	free(argv);
	if (ret < 0)
		return err_wrap(err, "exec in unit %s", unit_id);
	return 0;
}
