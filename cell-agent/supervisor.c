/*
 * supervisor.c: the supervisor object and its public API. Keeps the unit records, takes the
 * desired pod (apply: validation, bundles prepared by the caller's thread, waiting until units
 * settle), lists statuses and reads logs. The watcher thread that converges units is in
 * supervisor_loop.c, persistence and adoption in supervisor_state.c, runtime commands in
 * supervisor_exec.c.
 */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bundle.h"
#include "cgroup.h"
#include "clock.h"
#include "fsutil.h"
#include "image.h"
#include "log.h"
#include "supervisor_internal.h"
#include "xalloc.h"

/* Frees the strings of a status. */
void unit_status_release(struct unit_status *st)
{
	free(st->id);
	free(st->reason);
	free(st->message);
	free(st->image_ref);
	free(st->image_id);
	free(st->termination_message);
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
void unit_status_copy(struct unit_status *dst, const struct unit_status *src)
{
	*dst = *src;
	dst->id = xstrdup(src->id ? src->id : "");
	dst->reason = xstrdup(src->reason ? src->reason : "");
	dst->message = xstrdup(src->message ? src->message : "");
	dst->image_ref = xstrdup(src->image_ref ? src->image_ref : "");
	dst->image_id = xstrdup(src->image_id ? src->image_id : "");
	dst->termination_message =
		xstrdup(src->termination_message ? src->termination_message : "");
}

/* Replaces a heap string. */
void unit_set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v ? v : "");
}

/* True for ids safe as directory names. */
bool unit_id_valid(const char *id)
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
Kiyot__Cell__V1__Unit *unit_spec_copy(const Kiyot__Cell__V1__Unit *u)
{
	size_t n = kiyot__cell__v1__unit__get_packed_size(u);
	_cleanup_free_ uint8_t *b = xmalloc(n ? n : 1);

	kiyot__cell__v1__unit__pack(u, b);
	return kiyot__cell__v1__unit__unpack(NULL, n, b);
}

/* Queues a status event for the watcher thread to deliver. Called with mu held. */
void unit_changed(struct supervisor *s, struct unit *u)
{
	unit_persist(u);
	xgrow((void **)&s->ev, &s->cap_ev, s->nev + 1, sizeof(*s->ev));
	unit_status_copy(&s->ev[s->nev++], &u->st);
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
struct unit *unit_find(struct supervisor *s, const char *id)
{
	for (struct unit *u = s->units; u; u = u->next) {
		if (strcmp(u->id, id) == 0)
			return u;
	}
	return NULL;
}

/* Whether a removed unit of that id still has files to delete. Called with mu. */
static bool unit_going(struct supervisor *s, const char *id)
{
	struct unit *lists[] = { s->gone, s->deleting };

	for (size_t i = 0; i < 2; i++)
		for (struct unit *l = lists[i]; l; l = l->next)
			if (strcmp(l->id, id) == 0)
				return true;
	return false;
}

/* Creates the record and directory of a unit and appends it to the list, once the files of a
 * removed unit of the same id are gone. Called with mu. */
struct unit *unit_add(struct supervisor *s, const char *id, struct err *err)
{
	struct unit *u, **tail;

	while (unit_going(s, id))
		pthread_cond_wait(&s->cond, &s->mu);
	u = xcalloc(1, sizeof(*u));

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
void unit_free(struct unit *u)
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

/* Creates the supervisor; see the header. */
int supervisor_new(const struct supervisor_config *cfg, struct supervisor **out, struct err *err)
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
	s->host_netns = xstrdup(cfg->host_netns ? cfg->host_netns : "");
	s->node_images = xstrdup(cfg->node_images ? cfg->node_images : "");
	s->host_mnt_ns = cfg->host_mnt_ns;
	s->etc_dir = xasprintf("%s/etc", cfg->state_dir);
	s->runtime_root = xasprintf("%s/runtime", cfg->state_dir);
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
		ret = fs_mkdir_p(s->runtime_root, 0700, err);
	if (ret == 0)
		ret = supervisor_adopt(s, err);
	if (ret < 0)
		goto fail;
	if (pthread_create(&s->thread, NULL, supervisor_watch_thread, s) != 0) {
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
	while (s->gone) { /* the thread deletes their files before it looks at quit */
		struct unit *u = s->gone;

		s->gone = u->next;
		unit_free(u);
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
	free(s->runtime_root);
	free(s->shim);
	free(s->cgroup_parent);
	free(s->pod_ip);
	free(s->host_netns);
	free(s->node_images);
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
	if (s->node_images[0] && spec->image_id && spec->image_id[0]) {
		struct err e = ERR_INIT;

		if (image_read(s->node_images, spec->image_id, out, &e) == 0)
			return 0;
		if (e.code != ENOENT)
			log_warn("unit %s: %s; pulling it", spec->id, e.msg);
	}
	if (spec->auth) {
		auth.username = spec->auth->username;
		auth.password = spec->auth->password;
		auth.auth = spec->auth->auth;
		auth.identity_token = spec->auth->identity_token;
		auth.registry_token = spec->auth->registry_token;
	}
	return image_pull(s->cfg.images, spec->image, &auth, out, err);
}

/* CRI's image_ref of a unit: the repository digest its image resolved to, else the
 * reference it was asked by. */
static const char *image_ref_of(const struct image_info *info, const Kiyot__Cell__V1__Unit *spec)
{
	if (info->repo_digest && info->repo_digest[0])
		return info->repo_digest;
	return info->ref && info->ref[0] ? info->ref : spec->image;
}

/* True when the unit joins a namespace the pod's units share (PID or IPC in mode POD). */
static bool unit_needs_podns(const Kiyot__Cell__V1__Pod *pod, const Kiyot__Cell__V1__Unit *u)
{
	return u->pid_namespace == KIYOT__CELL__V1__NAMESPACE_MODE__POD ||
	       (pod && pod->ipc_namespace == KIYOT__CELL__V1__NAMESPACE_MODE__POD);
}

/* Pulls the image and writes the bundle of one unit (without the lock), then records the
 * outcome. */
static void prepare_unit(struct supervisor *s, const char *id)
{
	Kiyot__Cell__V1__Unit *spec = NULL;
	Kiyot__Cell__V1__Pod *pod = NULL;
	struct image_info *info = NULL;
	_cleanup_free_ char *dir = NULL, *rootfs = NULL, *bundle = NULL;
	_cleanup_free_ char *pid_ns = NULL, *ipc_ns = NULL, *propagated = NULL;
	struct podns podns = { 0 };
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
	propagated = xasprintf("%s/" UNIT_PROPAGATED_DIR, dir);
	ret = resolve_image(s, spec, &info, &err);
	if (ret == 0 && unit_needs_podns(pod, spec)) {
		ret = podns_ensure(s->state_dir, s->shim, &s->podns, &err);
		if (ret == 0) {
			podns = s->podns;
			pid_ns = podns_path(&podns, "pid");
			ipc_ns = podns_path(&podns, "ipc");
		}
	}
	if (ret == 0) {
		struct bundle_spec bs = { .pod = pod,
					  .unit = spec,
					  .image = info,
					  .rootfs = rootfs,
					  .volumes_dir = s->volumes_dir,
					  .etc_dir = s->etc_dir,
					  .cgroup_parent = s->cgroup_parent,
					  .pod_pid_ns = pid_ns,
					  .pod_ipc_ns = ipc_ns,
					  .host_netns = s->host_netns,
					  .propagated_dir = propagated };

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
			u->podns = podns;
			unit_set_str(&u->image_rootfs, info->rootfs);
			unit_set_str(&u->st.image_id, info->image_id);
			unit_set_str(&u->st.image_ref, image_ref_of(info, spec));
			unit_set_str(&u->st.reason, "");
			unit_set_str(&u->st.message, "");
			u->st.error_code = 0;
		} else {
			unit_set_str(&u->st.reason, "CreateContainerError");
			unit_set_str(&u->st.message, err.msg);
			u->st.error_code = err.code;
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

/* Whether two specs of a unit set the same cgroup v2 settings, in the same order. */
static bool unified_same(const Kiyot__Cell__V1__Unit *a, const Kiyot__Cell__V1__Unit *b)
{
	if (a->n_unified != b->n_unified)
		return false;
	for (size_t i = 0; i < a->n_unified; i++)
		if (strcmp(a->unified[i]->key, b->unified[i]->key) ||
		    strcmp(a->unified[i]->value, b->unified[i]->value))
			return false;
	return true;
}

/* Writes a running unit's cgroup v2 settings (its spec's unified) into its cgroup, as the
 * runtime did when it made the container (bundle.c checked the keys). */
static int write_unified(struct supervisor *s, const char *id, Kiyot__Cell__V1__KeyValue **kv,
			 size_t n, struct err *err)
{
	_cleanup_free_ char *cg = NULL;

	if (!n)
		return 0;
	if (cgroup_unified_ok(err) < 0)
		return -err->code;
	if (!s->cgroup_parent[0])
		return err_set(err, EINVAL,
			       "linux.resources.unified: this cell's units have no cgroup of "
			       "their own to set them in");
	cg = xasprintf("%s/%s", strcmp(s->cgroup_parent, "/") ? s->cgroup_parent : "", id);
	for (size_t i = 0; i < n; i++) {
		if (strchr(kv[i]->key, '/') || kv[i]->key[0] == '.')
			return err_set(err, EINVAL,
				       "linux.resources.unified: \"%.64s\" is not a "
				       "cgroup file",
				       kv[i]->key);
		if (cgroup_write(cg, kv[i]->key, kv[i]->value, err) < 0)
			return err_wrap(err, "linux.resources.unified");
	}
	return 0;
}

/* Gives a running unit's container the CPU and memory limits and cgroup v2 settings of its
 * spec, when they changed (the runtime's update, 0 or -1 lifting a limit; the settings
 * written to its cgroup). */
static int resize_unit(struct supervisor *s, const char *id, struct err *err)
{
	char mem[32], quota[32], period[32];
	int64_t cpu = 0, bytes = 0;
	Kiyot__Cell__V1__Unit *spec = NULL;
	bool todo = false;
	struct unit *u;
	int ret;

	pthread_mutex_lock(&s->mu);
	u = unit_find(s, id);
	if (u && u->resize && u->spec) {
		todo = true;
		u->resize = false;
		cpu = u->spec->cpu_millis;
		bytes = u->spec->memory_bytes;
		if (u->spec->n_unified)
			spec = unit_spec_copy(u->spec);
	}
	pthread_mutex_unlock(&s->mu);
	if (!todo)
		return 0;
	snprintf(mem, sizeof(mem), "--memory=%lld", bytes > 0 ? (long long)bytes : -1LL);
	snprintf(quota, sizeof(quota), "--cpu-quota=%lld",
		 cpu > 0 ? (long long)(cpu * BUNDLE_CPU_PERIOD_US / 1000) : -1LL);
	snprintf(period, sizeof(period), "--cpu-period=%d", BUNDLE_CPU_PERIOD_US);
	ret = unit_runtime_update(s, id, mem, quota, period, err);
	if (ret == 0 && spec)
		ret = write_unified(s, id, spec->unified, spec->n_unified, err);
	if (spec)
		kiyot__cell__v1__unit__free_unpacked(spec, NULL);
	if (ret < 0)
		return err_wrap(err, "unit %s: new limits", id);
	log_info("unit %s: limits now %lldm CPU, %lld bytes of memory", id, (long long)cpu,
		 (long long)bytes);
	return 0;
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
		return u->st.state != UNIT_STATE_RUNNING && !u->starting;
	default:
		return u->st.state != UNIT_STATE_CREATED || unit_init_failed(s, u);
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
			unit_set_str(&u->st.image_ref, spec->image);
			unit_changed(s, u);
		}
		u->removing = false;
		if (u->spec &&
		    (u->spec->cpu_millis != spec->cpu_millis ||
		     u->spec->memory_bytes != spec->memory_bytes || !unified_same(u->spec, spec))) {
			/* new limits: config.json again for later starts, and the running
			 * container updated in place (resize_unit) */
			u->prepared = false;
			u->resize = u->st.state == UNIT_STATE_RUNNING || u->starting;
		}
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

		if (!unit_id_valid(u->id))
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
static void collect(struct supervisor *s, const Kiyot__Cell__V1__Pod *pod, struct unit_status **out,
		    size_t *n)
{
	struct unit_status *a = xcalloc(pod->n_units ? pod->n_units : 1, sizeof(*a));
	size_t k = 0;

	for (size_t i = 0; i < pod->n_units; i++) {
		struct unit *u = unit_find(s, pod->units[i]->id);

		if (u)
			unit_status_copy(&a[k++], &u->st);
	}
	*out = a;
	*n = k;
}

/* See the header. */
char *supervisor_host_netns(struct supervisor *s)
{
	return s->host_netns[0] ? xstrdup(s->host_netns) : NULL;
}

/* Replaces the desired pod and waits; see the header. */
int supervisor_apply(struct supervisor *s, const Kiyot__Cell__V1__Pod *pod, int64_t timeout_ms,
		     struct unit_status **out, size_t *n, struct err *err)
{
	size_t len = kiyot__cell__v1__pod__get_packed_size(pod);
	_cleanup_free_ uint8_t *packed = xmalloc(len ? len : 1);
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
	ret = supervisor_save_pod(s, packed, len, err);
	if (ret == 0)
		ret = bundle_write_etc(copy, s->etc_dir, s->pod_ip, err);
	if (ret == 0)
		ret = bundle_apply_net_sysctls(copy, err);
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
	for (size_t i = 0; i < pod->n_units && ret == 0; i++)
		ret = resize_unit(s, pod->units[i]->id, err);
	pthread_mutex_unlock(&s->apply_mu);
	if (ret < 0)
		return err_wrap(err, "apply pod %s", pod->name ? pod->name : "");
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
		unit_status_copy(&a[k++], &u->st);
	}
	pthread_mutex_unlock(&s->mu);
	*out = a ? a : xcalloc(1, sizeof(*a));
	*n = k;
	return 0;
}

/* The directory of a known unit, or -ENOENT. */
int unit_dir_of(struct supervisor *s, const char *id, char **dir, bool *running, struct err *err)
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

/* Reads new whole lines of a unit's log from offset; returns bytes put in buf. */
size_t unit_log_read_lines(const char *path, uint64_t offset, char *buf, size_t cap)
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

/* Set once the file system of the state directory refused to free part of a file. */
static bool punch_unsupported;

void unit_log_trim(struct unit *u)
{
	_cleanup_free_ char *path = xasprintf("%s/log", u->dir);
	_cleanup_close_ int fd = -1;
	char buf[4096];
	struct stat st;
	uint64_t cut;
	ssize_t n;
	char *nl;

	/* stat first: opening the log for writing at every pass would wake the supervisor's
	 * inotify watch of the unit's directory on each close, and so on forever */
	if (punch_unsupported || stat(path, &st) < 0 || (uint64_t)st.st_size <= u->log_start ||
	    (uint64_t)st.st_size - u->log_start <= UNIT_LOG_KEEP + UNIT_LOG_SLACK)
		return;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return;
	/* keep whole lines: cut after the first newline past size - KEEP */
	cut = (uint64_t)st.st_size - UNIT_LOG_KEEP;
	n = pread(fd, buf, sizeof(buf), (off_t)cut);
	nl = n > 0 ? memchr(buf, '\n', (size_t)n) : NULL;
	if (!nl)
		return; /* a line longer than the window: try again when more is written */
	cut += (uint64_t)(nl - buf) + 1;
	/* offsets stay what they were (the size does not change); the blocks are freed */
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)u->log_start,
		      (off_t)(cut - u->log_start)) < 0) {
		if (!punch_unsupported)
			log_warn("unit %s: cannot free the old part of its log (%s); logs in this "
				 "cell keep growing",
				 u->id, strerror(errno));
		punch_unsupported = true; /* the state directory's file system: all units */
		return;
	}
	log_info("unit %s: log trimmed to its last %llu MiB (%llu bytes before offset %llu freed)",
		 u->id, (unsigned long long)(UNIT_LOG_KEEP >> 20),
		 (unsigned long long)(cut - u->log_start), (unsigned long long)cut);
	u->log_start = cut;
	if (u->log_sent < cut)
		u->log_sent = cut;
	unit_persist(u);
}

/* Reads whole log lines from offset; see the header. */
int supervisor_log_read(struct supervisor *s, const char *unit_id, uint64_t *offset, char *buf,
			size_t cap, size_t *got, struct err *err)
{
	_cleanup_free_ char *path = NULL;
	struct unit *u;
	size_t n;

	pthread_mutex_lock(&s->mu);
	u = unit_id ? unit_find(s, unit_id) : NULL;
	if (u) {
		path = xasprintf("%s/log", u->dir);
		if (*offset < u->log_start)
			*offset = u->log_start;
	}
	pthread_mutex_unlock(&s->mu);
	if (!u)
		return err_set(err, ENOENT, "unit %s not found in this cell",
			       unit_id ? unit_id : "(null)");
	n = unit_log_read_lines(path, *offset, buf, cap);
	if (n == cap && cap && buf[cap - 1] != '\n')
		return err_set(err, ENOBUFS, "unit %s: a log line is longer than %zu bytes",
			       unit_id, cap);
	*got = n;
	return 0;
}
