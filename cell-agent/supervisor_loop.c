/*
 * supervisor_loop.c: the supervisor's watcher thread. It waits on inotify (log growth,
 * exit.json) and a tick, and on each pass converges every unit to its desired state: starts
 * units when their turn comes (init units in order first), records exits, restarts with
 * back-off as the pod's restart policy asks, stops (TERM, grace, KILL) and removes units, then
 * delivers the status events and new log lines to the callbacks outside the lock.
 */
#include "supervisor_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bundle.h"
#include "hostmount.h"
#include "clock.h"
#include "fsutil.h"
#include "log.h"
#include "xalloc.h"

#define LOG_CHUNK (64 * 1024)
#define RESET_AFTER_NS (600 * 1000000000LL)
#define SHIM_START_GRACE_NS (10 * 1000000000LL)
#define TICK_MS 100
#define TERMINATION_MESSAGE_MAX 4096 /* what the kubelet reads of it */

/* The unit's grace period in ns. */
static int64_t grace_ns(const struct unit *u)
{
	int64_t sec = u->spec && u->spec->stop_timeout_s > 0 ? u->spec->stop_timeout_s : 30;

	return sec * 1000000000LL;
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
		if (now >= u->next_kill && unit_runtime_kill(s, u, "TERM") < 0)
			u->next_kill = now + 200000000LL;
		else if (now >= u->next_kill)
			u->next_kill = u->stop_deadline;
		return;
	}
	if (now >= u->next_kill || u->kill_stage == 1) {
		unit_runtime_kill(s, u, "KILL");
		u->kill_stage = 2;
		u->next_kill = now + 1000000000LL;
	}
}

/* Attaches the host mounts the unit shares with propagation, unless they still are (after an
 * agent restart they are not: the mounts lived in the previous agent's namespace). */
static int stage_host_mounts(struct supervisor *s, struct unit *u, struct err *err)
{
	for (size_t i = 0; u->spec && i < u->spec->n_mounts; i++) {
		const Kiyot__Cell__V1__Mount *m = u->spec->mounts[i];
		_cleanup_free_ char *target = NULL;

		if (!bundle_propagates_from_host(m))
			continue;
		target = xasprintf("%s/" UNIT_PROPAGATED_DIR "/%zu", u->dir, i);
		if (hostmount_stage(s->host_mnt_ns, m->host_path, target, err) < 0)
			return err_wrap(err, "mount %s", m->container_path);
	}
	return 0;
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
	/* never into namespaces of a holder that is gone: its pid may be another process's */
	if (u->podns.pid && !podns_alive(&u->podns))
		ret = err_set(
			&err, ESRCH,
			"the pod's shared PID/IPC namespaces are gone (their holder, pid %ld, "
			"exited); the container must be created again",
			u->podns.pid);
	else
		ret = bundle_mount_rootfs(u->image_rootfs, u->dir, &err);
	if (ret == 0)
		ret = stage_host_mounts(s, u, &err);
	if (ret == 0) {
		struct shim_stdio io = { u->spec && u->spec->tty, u->spec && u->spec->stdin,
					 u->spec && u->spec->stdin_once };

		ret = shim_spawn(s->shim, u->dir, s->runtime, s->runtime_root, u->id, cgroup, &io,
				 &err);
	}
	if (restart)
		u->st.restart_count++;
	u->restart_at = 0;
	u->kill_stage = 0;
	u->exit_pending = false;
	u->spawn_mono = clock_mono_ns();
	u->st.pid = 0;
	u->st.exit_code = 0;
	u->st.finished_at_ns = 0;
	unit_set_str(&u->st.termination_message, "");
	u->st.started_at_ns = clock_now_ns();
	if (ret < 0) {
		u->st.state = UNIT_STATE_EXITED;
		u->st.exit_code = 128;
		u->st.finished_at_ns = u->st.started_at_ns;
		unit_set_str(&u->st.reason, "StartError");
		unit_set_str(&u->st.message, err.msg);
	} else {
		/* running once the runtime has made the container (its pid file): reporting it
		 * earlier would let a caller talk to a process that does not exist yet */
		u->st.state = UNIT_STATE_CREATED;
		u->starting = true;
		unit_set_str(&u->st.reason, "");
		unit_set_str(&u->st.message, "");
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
	if (u->spec->system)
		return true;
	if (u->spec->init)
		return u->st.exit_code != 0 && policy != KIYOT__CELL__V1__RESTART_POLICY__NEVER;
	if (policy == KIYOT__CELL__V1__RESTART_POLICY__ALWAYS)
		return true;
	return policy == KIYOT__CELL__V1__RESTART_POLICY__ON_FAILURE && u->st.exit_code != 0;
}

/* Schedules a restart with exponential back-off if the policy asks for one. */
void unit_schedule_restart(struct supervisor *s, struct unit *u)
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

/* The last TERMINATION_MESSAGE_MAX bytes of the file the unit mounts at its termination
 * message path, as the kubelet reads it; "" when there is none. */
static char *termination_message(struct supervisor *s, const struct unit *u)
{
	const Kiyot__Cell__V1__Unit *spec = u->spec;
	char buf[TERMINATION_MESSAGE_MAX + 1];
	_cleanup_free_ char *src = NULL;
	struct stat st;
	ssize_t n = 0;
	int fd;

	if (!spec || !spec->termination_message_path || !spec->termination_message_path[0])
		return xstrdup("");
	for (size_t i = 0; i < spec->n_mounts && !src; i++) {
		const Kiyot__Cell__V1__Mount *m = spec->mounts[i];

		if (strcmp(m->container_path, spec->termination_message_path) != 0)
			continue;
		if (m->volume && m->volume[0] && !strchr(m->volume, '/') && m->volume[0] != '.')
			src = xasprintf("%s/%s", s->volumes_dir, m->volume);
		else if (m->host_path && m->host_path[0] == '/')
			src = xstrdup(m->host_path);
	}
	if (!src)
		return xstrdup("");
	fd = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		n = pread(fd, buf, TERMINATION_MESSAGE_MAX,
			  st.st_size > TERMINATION_MESSAGE_MAX
				  ? st.st_size - TERMINATION_MESSAGE_MAX
				  : 0);
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return xstrdup(buf);
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
		unit_set_str(&u->st.reason, json_string_value(json_object_get(j, "reason")));
		unit_set_str(&u->st.message, json_string_value(json_object_get(j, "message")));
		json_decref(j);
	} else {
		u->st.exit_code = 255;
		u->st.finished_at_ns = clock_now_ns();
		unit_set_str(&u->st.reason, "Error");
		unit_set_str(&u->st.message,
			     "the unit's shim ended without recording an exit status");
	}
	u->st.state = UNIT_STATE_EXITED;
	u->st.pid = 0;
	free(u->st.termination_message);
	u->st.termination_message = termination_message(s, u);
	unit_schedule_restart(s, u);
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
			if (u->starting) {
				u->starting = false;
				u->st.state = UNIT_STATE_RUNNING;
			}
			unit_changed(s, u);
		}
	}
	if (fs_exists(exitp)) {
		if (u->starting) {
			/* ended before it was seen running (or never started) */
			u->starting = false;
			u->st.state = UNIT_STATE_RUNNING;
		}
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
bool unit_init_failed(struct supervisor *s, struct unit *u)
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

/* Reports a stopped unit as gone and moves it to s->gone, whose files remove_gone deletes
 * once mu is released: the unmounts read the mount table, and the tree may be large, which
 * under mu held up every Apply of the cell (RemoveContainer's own, 20 to 60 ms). */
static void unit_remove(struct supervisor *s, struct unit *u)
{
	struct unit **pp;

	if (u->wd >= 0)
		inotify_rm_watch(s->ino, u->wd);
	u->wd = -1;
	u->st.state = UNIT_STATE_UNKNOWN;
	xgrow((void **)&s->ev, &s->cap_ev, s->nev + 1, sizeof(*s->ev));
	unit_status_copy(&s->ev[s->nev++], &u->st);
	for (pp = &s->units; *pp != u; pp = &(*pp)->next)
		;
	*pp = u->next;
	u->next = s->gone;
	s->gone = u;
}

/* Unmounts and deletes the files of the units unit_remove took off the list, without mu;
 * an Apply that adds a unit of the same id waits for it (unit_add). */
static void remove_gone(struct supervisor *s)
{
	struct unit *u, *next;

	pthread_mutex_lock(&s->mu);
	u = s->deleting = steal_ptr(s->gone);
	pthread_mutex_unlock(&s->mu);
	for (; u; u = u->next) {
		_cleanup_free_ char *propagated = xasprintf("%s/" UNIT_PROPAGATED_DIR, u->dir);
		struct err err = ERR_INIT;

		/* the host's own files are mounted under propagated/: never removed through it */
		if (hostmount_release(propagated, &err) < 0 ||
		    bundle_umount_rootfs(u->dir, &err) < 0 || fs_remove_tree(u->dir, &err) < 0)
			log_warn("unit %s: %s", u->id, err.msg);
	}
	pthread_mutex_lock(&s->mu);
	u = steal_ptr(s->deleting);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->mu);
	for (; u; u = next) {
		next = u->next;
		unit_free(u);
	}
}

/* One pass over all units: exits, starts, restarts, stops, removals. Called with mu held. */
static void reconcile(struct supervisor *s)
{
	int64_t now = clock_mono_ns();
	struct unit *u, *next;

	for (u = s->units; u; u = next) {
		int desired = u->spec ? (int)u->spec->desired
				      : KIYOT__CELL__V1__UNIT_DESIRED__STOPPED;

		next = u->next;
		if ((u->st.state == UNIT_STATE_RUNNING || u->starting) && !u->exit_pending)
			unit_check_running(s, u, now);
		if (u->exit_pending && (u->st.state == UNIT_STATE_RUNNING || u->starting)) {
			u->starting = false;
			unit_exited(s, u);
		}
		if (u->removing) {
			if (u->st.state == UNIT_STATE_RUNNING || u->starting)
				unit_stop_step(s, u, now);
			else
				unit_remove(s, u);
			continue;
		}
		if (!u->prepared)
			continue;
		if (desired == KIYOT__CELL__V1__UNIT_DESIRED__STOPPED) {
			if (u->st.state == UNIT_STATE_RUNNING || u->starting)
				unit_stop_step(s, u, now);
			u->restart_at = 0;
			continue;
		}
		if (desired != KIYOT__CELL__V1__UNIT_DESIRED__RUNNING)
			continue;
		if (u->st.state == UNIT_STATE_EXITED && u->restart_at && now >= u->restart_at)
			unit_start(s, u, true);
		else if (u->st.state == UNIT_STATE_CREATED && !u->starting && init_done(s, u))
			unit_start(s, u, false);
	}
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

		unit_log_trim(u);
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

		while ((n = unit_log_read_lines(jobs[i].path, jobs[i].from, buf, LOG_CHUNK)) > 0) {
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
					if (u->wd == e->wd &&
					    (u->st.state == UNIT_STATE_RUNNING || u->starting))
						u->exit_pending = true;
				}
				pthread_mutex_unlock(&s->mu);
			}
			p += sizeof(*e) + e->len;
		}
	}
}

/* The watcher thread: waits for inotify events or the next tick, then reconciles. */
void *supervisor_watch_thread(void *arg)
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
		remove_gone(s);
		deliver(s);
	}
	return NULL;
}
