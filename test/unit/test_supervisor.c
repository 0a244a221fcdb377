/*
 * End-to-end tests of the unit supervisor with the real OCI runtime (crun) on a root file
 * system made of Debian's busybox-static. Needs root. This binary is also the shim: run as
 * "test_supervisor shim ..." it enters shim_main.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "image.h"
#include "../../cell-agent/agent.h"
#include "../../cell-agent/interrupt.h"
#include "../../cell-agent/supervisor.h"
#include "../../cell-agent/supervisor_internal.h"
#include "clock.h"
#include "crilog.h"
#include "feed.h"
#include "fsutil.h"
#include "testcert.h"
#include "xalloc.h"

#define BUSYBOX "/bin/busybox"
#define WAIT_NS (60 * 1000000000LL)

/* Everything one test owns, cleaned up even when an assertion fails. */
struct fixture {
	char dir[64];
	char *state, *rootfs, *cgroup_parent;
	char shim[PATH_MAX];
	struct supervisor *sup;
	pthread_mutex_t mu;
	struct buf_log {
		char *data;
		size_t len;
	} logs;
	unsigned statuses;
	const char *ids[8];
	size_t nids;
};

/* A fixed image whose root is the busybox root of the fixture. */
static int fake_image(void *ctx, const char *ref, struct image_info **out, struct err *err)
{
	struct fixture *f = ctx;
	struct image_info *info;

	if (strstr(ref, "missing"))
		return err_set(err, ENOENT, "image %s: manifest unknown (404)", ref);
	info = xcalloc(1, sizeof(*info));
	info->ref = xstrdup(ref);
	info->repo_digest = xstrdup("registry.test/busybox@sha256:fedcba9876543210");
	info->image_id = xstrdup("sha256:0123456789abcdef");
	info->rootfs = xstrdup(f->rootfs);
	info->entrypoint = xcalloc(1, sizeof(char *));
	info->cmd = xcalloc(2, sizeof(char *));
	info->cmd[0] = xstrdup("sh");
	info->env = xcalloc(2, sizeof(char *));
	info->env[0] = xstrdup("PATH=/bin");
	info->user = xstrdup("");
	info->working_dir = xstrdup("");
	*out = info;
	return 0;
}

/* Status callback: counts changes. */
static void on_status(void *ctx, const struct unit_status *st)
{
	struct fixture *f = ctx;

	(void)st;
	pthread_mutex_lock(&f->mu);
	f->statuses++;
	pthread_mutex_unlock(&f->mu);
}

/* Log callback: keeps everything delivered. */
static void on_log(void *ctx, const char *id, uint64_t offset, const char *data, size_t len)
{
	struct fixture *f = ctx;

	(void)id;
	(void)offset;
	pthread_mutex_lock(&f->mu);
	f->logs.data = xrealloc(f->logs.data, f->logs.len + len + 1);
	memcpy(f->logs.data + f->logs.len, data, len);
	f->logs.len += len;
	f->logs.data[f->logs.len] = '\0';
	pthread_mutex_unlock(&f->mu);
}

/* Creates the supervisor of the fixture. */
static void sup_start(struct fixture *f)
{
	struct supervisor_config cfg = { 0 };
	struct err err = ERR_INIT;

	cfg.state_dir = f->state;
	cfg.runtime = "crun";
	cfg.shim = f->shim;
	cfg.cgroup_parent = f->cgroup_parent;
	cfg.backoff_base_ms = 50;
	cfg.backoff_max_ms = 200;
	cfg.cb.status = on_status;
	cfg.cb.log = on_log;
	cfg.cb.ctx = f;
	cfg.resolve_image = fake_image;
	cfg.resolve_ctx = f;
	if (supervisor_new(&cfg, &f->sup, &err) < 0)
		fail_msg("supervisor_new: %s", err.msg);
}

/* Makes a busybox root file system. */
static void make_rootfs(const char *root)
{
	static const char *const tools[] = { "sh", "echo", "sleep", "cat", "true", "false", "ls" };
	_cleanup_free_ char *bin = xasprintf("%s/bin", root), *bb = xasprintf("%s/busybox", bin);
	_cleanup_free_ char *data = NULL;
	struct err err = ERR_INIT;
	size_t len;

	assert_int_equal(fs_mkdir_p(bin, 0755, &err), 0);
	assert_int_equal(fs_read_file(BUSYBOX, 64 << 20, &data, &len, &err), 0);
	assert_int_equal(fs_write_file(bb, data, len, 0755, &err), 0);
	for (size_t i = 0; i < ARRAY_SIZE(tools); i++) {
		_cleanup_free_ char *l = xasprintf("%s/%s", bin, tools[i]);

		assert_int_equal(symlink("busybox", l), 0);
	}
}

/* Per-test setup: state dir, root file system, supervisor. */
static int setup(void **state)
{
	struct fixture *f = xcalloc(1, sizeof(*f));
	ssize_t n;

	if (!fs_exists(BUSYBOX)) {
		fprintf(stderr, "install busybox-static for this test\n");
		free(f);
		return -1;
	}
	pthread_mutex_init(&f->mu, NULL);
	snprintf(f->dir, sizeof(f->dir), "/tmp/sup-test-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->state = xasprintf("%s/state", f->dir);
	f->rootfs = xasprintf("%s/image-rootfs", f->dir);
	f->cgroup_parent = xasprintf("/kiyot-test-%d", (int)getpid());
	n = readlink("/proc/self/exe", f->shim, sizeof(f->shim) - 1);
	if (n <= 0)
		return -1;
	f->shim[n] = '\0';
	make_rootfs(f->rootfs);
	sup_start(f);
	*state = f;
	return 0;
}

/* Unmounts everything below dir (lazily), from /proc/self/mountinfo. */
static void umount_below(const char *dir)
{
	_cleanup_free_ char *info = NULL;
	struct err err = ERR_INIT;
	char *save = NULL;

	if (fs_read_file("/proc/self/mountinfo", 4 << 20, &info, NULL, &err) < 0)
		return;
	for (char *line = strtok_r(info, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char mp[PATH_MAX];

		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 &&
		    strncmp(mp, dir, strlen(dir)) == 0)
			umount2(mp, MNT_DETACH);
	}
}

/* Per-test teardown: containers deleted, mounts and cgroups removed, even after failures. */
static int teardown(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	DIR *d;
	struct dirent *e;

	supervisor_free(f->sup);
	for (size_t i = 0; i < f->nids; i++) {
		_cleanup_free_ char *root = xasprintf("%s/runtime", f->state);
		char *argv[] = { "crun", "--root", root, "delete", "-f", (char *)f->ids[i], NULL };
		int st;

		shim_run_capture(argv, 10000, 4096, NULL, NULL, NULL, NULL, &st, &err);
	}
	umount_below(f->dir);
	d = opendir("/sys/fs/cgroup");
	while (d && (e = readdir(d))) {
		_cleanup_free_ char *cg =
			xasprintf("/sys/fs/cgroup/%s%s", e->d_name, f->cgroup_parent);

		if (e->d_name[0] == '.')
			continue;
		for (size_t k = 0; k < f->nids; k++) {
			_cleanup_free_ char *sub = xasprintf("%s/%s", cg, f->ids[k]);

			rmdir(sub);
		}
		rmdir(cg);
	}
	if (d)
		closedir(d);
	fs_remove_tree(f->dir, &err);
	free(f->state);
	free(f->rootfs);
	free(f->cgroup_parent);
	free(f->logs.data);
	free(f);
	return 0;
}

/* A unit running sh -c script. Strings must outlive the pod. */
struct unit_def {
	Kiyot__Cell__V1__Unit u;
	char *cmd[3];
	Kiyot__Cell__V1__Mount m;
	Kiyot__Cell__V1__Mount *mounts[1];
};

/* Fills a unit def; the unit mounts emptyDir "shared" at /shared. */
static void unit_def(struct fixture *f, struct unit_def *d, const char *id, const char *script)
{
	Kiyot__Cell__V1__Unit u = KIYOT__CELL__V1__UNIT__INIT;
	Kiyot__Cell__V1__Mount m = KIYOT__CELL__V1__MOUNT__INIT;

	d->u = u;
	d->m = m;
	d->cmd[0] = "sh";
	d->cmd[1] = "-c";
	d->cmd[2] = (char *)script;
	d->u.id = (char *)id;
	d->u.name = (char *)id;
	d->u.image = "busybox-test";
	d->u.command = d->cmd;
	d->u.n_command = 3;
	d->u.desired = KIYOT__CELL__V1__UNIT_DESIRED__RUNNING;
	d->m.container_path = "/shared";
	d->m.volume = "shared";
	d->mounts[0] = &d->m;
	d->u.mounts = d->mounts;
	d->u.n_mounts = 1;
	if (f->nids < ARRAY_SIZE(f->ids))
		f->ids[f->nids++] = id;
}

/* A pod of units with an emptyDir "shared". */
struct pod_def {
	Kiyot__Cell__V1__Pod pod;
	Kiyot__Cell__V1__Volume vol;
	Kiyot__Cell__V1__Volume *vols[1];
	Kiyot__Cell__V1__Unit *units[4];
};

/* Fills a pod def from unit defs. */
static void pod_def(struct pod_def *p, Kiyot__Cell__V1__RestartPolicy policy,
		    struct unit_def **units, size_t n)
{
	Kiyot__Cell__V1__Pod pod = KIYOT__CELL__V1__POD__INIT;
	Kiyot__Cell__V1__Volume vol = KIYOT__CELL__V1__VOLUME__INIT;

	p->pod = pod;
	p->vol = vol;
	p->vol.name = "shared";
	p->vols[0] = &p->vol;
	p->pod.name = "web";
	p->pod.hostname = "web-0";
	p->pod.restart_policy = policy;
	p->pod.volumes = p->vols;
	p->pod.n_volumes = 1;
	for (size_t i = 0; i < n; i++)
		p->units[i] = &units[i]->u;
	p->pod.units = p->units;
	p->pod.n_units = n;
}

/* Applies a pod; fails the test on errors. */
static void apply(struct fixture *f, struct pod_def *p)
{
	struct unit_status *st = NULL;
	size_t n = 0;
	struct err err = ERR_INIT;

	if (supervisor_apply(f->sup, &p->pod, 20000, &st, &n, &err) < 0)
		fail_msg("apply: %s", err.msg);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(st[i].reason, "CreateContainerError") == 0)
			fail_msg("unit %s: %s", st[i].id, st[i].message);
	}
	unit_status_array_free(st, n);
}

/* Waits until the unit's status satisfies pred; returns a copy of it. */
static struct unit_status wait_unit(struct fixture *f, const char *id,
				    int (*pred)(const struct unit_status *, void *), void *arg)
{
	int64_t deadline = clock_mono_ns() + WAIT_NS;

	for (;;) {
		struct unit_status *a = NULL, out = { 0 };
		size_t n = 0;
		struct err err = ERR_INIT;
		int found = 0;

		assert_int_equal(supervisor_list(f->sup, &a, &n, &err), 0);
		for (size_t i = 0; i < n; i++) {
			if (strcmp(a[i].id, id) == 0 && pred(&a[i], arg)) {
				out = a[i];
				memset(&a[i], 0, sizeof(a[i]));
				found = 1;
			}
		}
		unit_status_array_free(a, n);
		if (found)
			return out;
		if (clock_mono_ns() > deadline)
			fail_msg("unit %s did not reach the expected state", id);
		usleep(20000);
	}
}

/* Predicates for wait_unit. */
static int is_exited(const struct unit_status *st, void *arg)
{
	(void)arg;
	return st->state == UNIT_STATE_EXITED;
}

static int is_running_with_pid(const struct unit_status *st, void *arg)
{
	(void)arg;
	return st->state == UNIT_STATE_RUNNING && st->pid > 0;
}

static int restarted_at_least(const struct unit_status *st, void *arg)
{
	return st->restart_count >= *(uint32_t *)arg;
}

/* The unit's whole log through log_read. */
static char *read_log(struct fixture *f, const char *id)
{
	char *buf = xcalloc(1, 65536);
	size_t got = 0;
	uint64_t from = 0;
	struct err err = ERR_INIT;

	assert_int_equal(supervisor_log_read(f->sup, id, &from, buf, 65535, &got, &err), 0);
	buf[got] = '\0';
	return buf;
}

/* A unit that echoes reaches EXITED 0 "Completed" and its output is a CRI log line. */
static void test_supervisor__echo_unit_completes_with_cri_log(void **state)
{
	struct fixture *f = *state;
	struct unit_def u;
	struct unit_def *us[] = { &u };
	struct pod_def p;
	struct unit_status st;
	_cleanup_free_ char *log = NULL;
	struct crilog_record r;
	struct err err = ERR_INIT;
	int64_t deadline = clock_mono_ns() + WAIT_NS;

	unit_def(f, &u, "t-echo", "echo hello-from-unit; echo oops >&2");
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__NEVER, us, 1);
	apply(f, &p);
	st = wait_unit(f, "t-echo", is_exited, NULL);
	if (st.exit_code != 0)
		fail_msg("exit %d %s: %s", st.exit_code, st.reason, st.message);
	assert_string_equal(st.reason, "Completed");
	assert_string_equal(st.image_id, "sha256:0123456789abcdef");
	/* CRI's image_ref: the digest the image resolved to, not the tag it was asked by */
	assert_string_equal(st.image_ref, "registry.test/busybox@sha256:fedcba9876543210");
	assert_true(st.finished_at_ns >= st.started_at_ns);
	unit_status_release(&st);
	log = read_log(f, "t-echo");
	assert_non_null(strstr(log, " stdout F hello-from-unit\n"));
	assert_non_null(strstr(log, " stderr F oops\n"));
	assert_int_equal(crilog_parse(log, strcspn(log, "\n") + 1, &r, &err), 0);
	/* The log callback delivers the same lines. */
	for (;;) {
		int have;

		pthread_mutex_lock(&f->mu);
		have = f->logs.data && strstr(f->logs.data, "hello-from-unit") != NULL;
		pthread_mutex_unlock(&f->mu);
		if (have)
			break;
		if (clock_mono_ns() > deadline)
			fail_msg("log callback never delivered the unit's output");
		usleep(20000);
	}
	assert_true(f->statuses >= 2);
	/* Unknown units are -ENOENT with a message. */
	{
		char buf[64];
		size_t got;
		uint64_t from = 0;

		assert_int_equal(supervisor_log_read(f->sup, "nope", &from, buf, sizeof(buf), &got,
						     &err),
				 -ENOENT);
		assert_non_null(strstr(err.msg, "nope"));
	}
}

/* What one Watch over the cell feed brought, until its first STATS event. */
struct watch_seen {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char kinds[64]; /* 'T'atus, 'L'og, 'S'ynced, 'U'sage, 'I'nterruption, in order */
	size_t n;
	bool exited, usage_of_cell, ended;
	char log[4096];
	char action[16]; /* an interruption's */
};

static void seen_msg(void *arg, const ProtobufCMessage *msg)
{
	struct watch_seen *w = arg;
	const Kiyot__Cell__V1__WatchEvent *ev = (const void *)msg;
	static const char kind[] = "TLSUI";

	pthread_mutex_lock(&w->lock);
	if (w->n + 1 < sizeof(w->kinds) && ev->kind < 5)
		w->kinds[w->n++] = kind[ev->kind];
	if (ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__INTERRUPTION && ev->interruption)
		snprintf(w->action, sizeof(w->action), "%s", ev->interruption->action);
	if (ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS && ev->status &&
	    strcmp(ev->status->id, "t-watch") == 0)
		w->exited = ev->status->state == KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED;
	if (ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG)
		snprintf(w->log + strlen(w->log), sizeof(w->log) - strlen(w->log), "%.*s",
			 (int)ev->data.len, (const char *)ev->data.data);
	if (ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__STATS && ev->stats)
		w->usage_of_cell = ev->stats->cell && ev->stats->cell->timestamp_ns > 0;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void seen_end(void *arg, int ret, const struct err *err)
{
	struct watch_seen *w = arg;

	(void)ret;
	(void)err;
	pthread_mutex_lock(&w->lock);
	w->ended = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* One Watch of the agent's over a real feed from offset (of t-watch's log), until its first
 * usage event. */
static void watch_over_feed(struct feed_loop *loop, SSL_CTX *ctx, const char *target,
			    uint64_t offset, struct watch_seen *w)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__LogOffset o = KIYOT__CELL__V1__LOG_OFFSET__INIT, *os[1] = { &o };
	struct feed_open_args a = { .ctx = ctx,
				    .target = target,
				    .peer_name = "cell-a",
				    .request = &req.base,
				    .msg_desc = &kiyot__cell__v1__watch_event__descriptor,
				    .max_frame = 1u << 20,
				    .on_msg = seen_msg,
				    .on_end = seen_end,
				    .arg = w };
	struct feed_watch *fw = NULL;
	struct err err = ERR_INIT;

	o.unit_id = (char *)"t-watch";
	o.offset = offset;
	req.offsets = os;
	req.n_offsets = offset ? 1 : 0;
	req.stats_interval_ms = 100;
	if (feed_open(loop, &a, &fw, &err) < 0)
		fail_msg("%s", err.msg);
	pthread_mutex_lock(&w->lock);
	while (!strchr(w->kinds, 'U') && !w->ended)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
	feed_cancel(fw);
	pthread_mutex_lock(&w->lock);
	while (!w->ended)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/* The agent's Watch (cell-agent/watch.c) served over a real cell feed: a client gets the
 * unit's status, its log lines, SYNCED and then the cell's usage; one that resumes at the
 * end of the log gets no log again, and, once a spot interruption notice came, gets it before
 * SYNCED. */
static void test_supervisor__watch_over_the_cell_feed(void **state)
{
	struct fixture *f = *state;
	struct unit_def u;
	struct unit_def *us[] = { &u };
	struct pod_def p;
	struct unit_status st;
	struct agent a;
	struct feed_server_config fc = { 0 };
	struct feed_server *srv = NULL;
	struct feed_loop *loop = NULL;
	struct test_ident agent_id, kiyot_id;
	struct watch_seen w1 = { .lock = PTHREAD_MUTEX_INITIALIZER,
				 .cond = PTHREAD_COND_INITIALIZER };
	struct watch_seen w2 = { .lock = PTHREAD_MUTEX_INITIALIZER,
				 .cond = PTHREAD_COND_INITIALIZER };
	_cleanup_free_ char *log = NULL;
	char *ca = NULL, *ca_key = NULL, target[64];
	SSL_CTX *client = NULL;
	struct err err = ERR_INIT;

	unit_def(f, &u, "t-watch", "echo line-one; echo line-two");
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__NEVER, us, 1);
	apply(f, &p);
	st = wait_unit(f, "t-watch", is_exited, NULL);
	unit_status_release(&st);
	log = read_log(f, "t-watch");

	memset(&a, 0, sizeof(a));
	a.sup = f->sup;
	a.hub = watch_hub_new();
	a.cfg.state_dir = f->state;
	if (pki_ca_new("ca", 1, &ca, &ca_key, &err) < 0)
		fail_msg("%s", err.msg);
	test_ident_make(ca, ca_key, "cell-a", PKI_SERVER, &agent_id);
	test_ident_make(ca, ca_key, "kiyot", PKI_CLIENT, &kiyot_id);
	if (pki_tls_ctx(ca, agent_id.cert, agent_id.key, PKI_SERVER, "kiyot", &fc.ctx, &err) < 0 ||
	    pki_tls_ctx(ca, kiyot_id.cert, kiyot_id.key, PKI_CLIENT, NULL, &client, &err) < 0)
		fail_msg("%s", err.msg);
	fc.address = "127.0.0.1:0";
	fc.req_desc = &kiyot__cell__v1__watch_request__descriptor;
	fc.max_request = 4096;
	fc.max_conns = 8;
	fc.session = agent_feed_session;
	fc.arg = &a;
	if (feed_server_start(&fc, &srv, &err) < 0 || feed_loop_new(1, &loop, &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(target, sizeof(target), "127.0.0.1:%d", feed_server_port(srv));

	watch_over_feed(loop, client, target, 0, &w1);
	if (!strstr(w1.kinds, "TLSU") && !strstr(w1.kinds, "TLLSU"))
		fail_msg("events %s: want the status, the log, SYNCED, then the usage", w1.kinds);
	assert_true(w1.exited);
	assert_true(w1.usage_of_cell);
	assert_string_equal(w1.log, log);
	assert_non_null(strstr(w1.log, " stdout F line-two\n"));

	assert_null(strchr(w1.kinds, 'I'));
	watch_hub_interruption(a.hub, &(struct interruption){ INTERRUPTION_NOTICE, "terminate",
							      1795940520LL * 1000000000LL });
	watch_over_feed(loop, client, target, strlen(log), &w2);
	assert_null(strchr(w2.kinds, 'L'));
	assert_non_null(strstr(w2.kinds, "TISU"));
	assert_string_equal(w2.action, "terminate");

	feed_loop_free(loop);
	feed_server_stop(srv);
	SSL_CTX_free(fc.ctx);
	SSL_CTX_free(client);
	watch_hub_free(a.hub);
	test_ident_release(&agent_id);
	test_ident_release(&kiyot_id);
	free(ca);
	free(ca_key);
}

/* A unit exiting 3 reports 3 and "Error"; a missing executable reports StartError. */
static void test_supervisor__failing_units_report_exit(void **state)
{
	struct fixture *f = *state;
	struct unit_def a, b;
	struct unit_def *us[] = { &a, &b };
	struct pod_def p;
	struct unit_status st;
	char *nope[] = { "/bin/no-such-program" };

	unit_def(f, &a, "t-exit3", "exit 3");
	unit_def(f, &b, "t-noexec", "");
	b.u.command = nope;
	b.u.n_command = 1;
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__NEVER, us, 2);
	apply(f, &p);
	st = wait_unit(f, "t-exit3", is_exited, NULL);
	assert_int_equal(st.exit_code, 3);
	assert_string_equal(st.reason, "Error");
	unit_status_release(&st);
	st = wait_unit(f, "t-noexec", is_exited, NULL);
	assert_string_equal(st.reason, "StartError");
	assert_non_null(strstr(st.message, "no-such-program"));
	unit_status_release(&st);
}

/* A unit whose image cannot be had says why with the failure's code (kiyot answers
 * CreateContainer with it: NOT_FOUND for an image its registry does not have). */
static void test_supervisor__image_failure_carries_its_code(void **state)
{
	struct fixture *f = *state;
	struct unit_def a;
	struct unit_def *us[] = { &a };
	struct pod_def p;
	struct unit_status *st = NULL;
	size_t n = 0;
	struct err err = ERR_INIT;

	unit_def(f, &a, "t-missing", "true");
	a.u.image = "registry.test/missing:1";
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__NEVER, us, 1);
	if (supervisor_apply(f->sup, &p.pod, 20000, &st, &n, &err) < 0)
		fail_msg("apply: %s", err.msg);
	assert_int_equal(n, 1);
	assert_string_equal(st[0].reason, "CreateContainerError");
	assert_non_null(strstr(st[0].message, "manifest unknown (404)"));
	assert_int_equal(st[0].error_code, ENOENT);
	unit_status_array_free(st, n);
}

/* OnFailure restarts a failing unit and counts the restarts. */
static void test_supervisor__on_failure_restarts_with_count(void **state)
{
	struct fixture *f = *state;
	struct unit_def u;
	struct unit_def *us[] = { &u };
	struct pod_def p;
	struct unit_status st;
	uint32_t want = 2;
	_cleanup_free_ char *log = NULL;

	unit_def(f, &u, "t-restart", "echo run; exit 1");
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__ON_FAILURE, us, 1);
	apply(f, &p);
	st = wait_unit(f, "t-restart", restarted_at_least, &want);
	unit_status_release(&st);
	/* Each run appended its output to the same log. */
	st = wait_unit(f, "t-restart", is_exited, NULL);
	assert_int_equal(st.exit_code, 1);
	unit_status_release(&st);
	log = read_log(f, "t-restart");
	assert_non_null(strstr(strstr(log, " stdout F run\n") + 1, " stdout F run\n"));
	/* Stopped: no more restarts. */
	u.u.desired = KIYOT__CELL__V1__UNIT_DESIRED__STOPPED;
	apply(f, &p);
}

/* Stopping a unit that ignores SIGTERM kills it after the grace period. */
static void test_supervisor__stop_kills_after_grace(void **state)
{
	struct fixture *f = *state;
	struct unit_def u;
	struct unit_def *us[] = { &u };
	struct pod_def p;
	struct unit_status st, *a = NULL;
	size_t n = 0;
	struct err err = ERR_INIT;
	char *sleepcmd[] = { "sleep", "1000" };

	unit_def(f, &u, "t-stop", "");
	/* sleep as PID 1 of its namespace has no TERM handler: TERM is ignored. */
	u.u.command = sleepcmd;
	u.u.n_command = 2;
	u.u.stop_timeout_s = 1;
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__ALWAYS, us, 1);
	apply(f, &p);
	st = wait_unit(f, "t-stop", is_running_with_pid, NULL);
	unit_status_release(&st);
	u.u.desired = KIYOT__CELL__V1__UNIT_DESIRED__STOPPED;
	assert_int_equal(supervisor_apply(f->sup, &p.pod, 30000, &a, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(a[0].state, UNIT_STATE_EXITED);
	assert_int_equal(a[0].exit_code, 128 + 9);
	assert_int_equal(a[0].restart_count, 0);
	unit_status_array_free(a, n);
}

/* Init units run to completion first; app units see their work in a shared emptyDir. */
static void test_supervisor__init_unit_runs_before_app(void **state)
{
	struct fixture *f = *state;
	struct unit_def init, app;
	struct unit_def *us[] = { &app, &init };
	struct pod_def p;
	struct unit_status si, sa;
	_cleanup_free_ char *log = NULL;

	unit_def(f, &init, "t-init", "sleep 1; echo from-init > /shared/marker");
	init.u.init = 1;
	unit_def(f, &app, "t-app", "cat /shared/marker");
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__NEVER, us, 2);
	apply(f, &p);
	sa = wait_unit(f, "t-app", is_exited, NULL);
	si = wait_unit(f, "t-init", is_exited, NULL);
	assert_int_equal(si.exit_code, 0);
	assert_int_equal(sa.exit_code, 0);
	assert_true(sa.started_at_ns >= si.finished_at_ns);
	log = read_log(f, "t-app");
	assert_non_null(strstr(log, " stdout F from-init\n"));
	unit_status_release(&si);
	unit_status_release(&sa);
}

/* A new supervisor adopts a unit that kept running, execs in it and sees its exit. */
static void test_supervisor__new_supervisor_adopts_running_unit(void **state)
{
	struct fixture *f = *state;
	struct unit_def u;
	struct unit_def *us[] = { &u };
	struct pod_def p;
	struct unit_status st;
	_cleanup_free_ char *go = NULL, *out = NULL, *errout = NULL;
	char *cmd[] = { "echo", "exec-ok", NULL };
	size_t olen = 0, elen = 0;
	int code = -1;
	struct err err = ERR_INIT;

	unit_def(f, &u, "t-adopt", "while [ ! -e /shared/go ]; do sleep 0.1; done; exit 7");
	pod_def(&p, KIYOT__CELL__V1__RESTART_POLICY__NEVER, us, 1);
	apply(f, &p);
	st = wait_unit(f, "t-adopt", is_running_with_pid, NULL);
	unit_status_release(&st);
	supervisor_free(f->sup);
	f->sup = NULL;
	sup_start(f);
	st = wait_unit(f, "t-adopt", is_running_with_pid, NULL);
	unit_status_release(&st);
	assert_int_equal(supervisor_exec_sync(f->sup, "t-adopt", cmd, 10, &out, &olen, &errout,
					      &elen, &code, &err),
			 0);
	assert_int_equal(code, 0);
	assert_string_equal(out, "exec-ok\n");
	assert_int_equal(supervisor_exec_sync(f->sup, "nope", cmd, 10, &out, &olen, &errout, &elen,
					      &code, &err),
			 -ENOENT);
	go = xasprintf("%s/volumes/shared/go", f->state);
	assert_int_equal(fs_write_file(go, "", 0, 0644, &err), 0);
	st = wait_unit(f, "t-adopt", is_exited, NULL);
	assert_int_equal(st.exit_code, 7);
	assert_string_equal(st.reason, "Error");
	unit_status_release(&st);
}

/* A unit's log beyond UNIT_LOG_KEEP + UNIT_LOG_SLACK loses its oldest whole lines: their
 * blocks are freed, offsets stay, and the kept part starts at a line. */
static void test_supervisor__log_trim_keeps_the_newest_lines(void **state)
{
	char dir[] = "/tmp/kiyot-logtrim-XXXXXX";
	_cleanup_free_ char *path = NULL;
	struct unit u = { 0 };
	struct err err = ERR_INIT;
	struct stat before, after;
	char line[100], *chunk;
	size_t per_chunk = (1 << 20) / sizeof(line) * sizeof(line);
	uint64_t size = UNIT_LOG_KEEP + UNIT_LOG_SLACK + (1 << 20);
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	path = xasprintf("%s/log", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	/* 100-byte lines: line k starts at offset 100 k */
	memset(line, 'x', sizeof(line));
	line[sizeof(line) - 1] = '\n';
	chunk = xmalloc(per_chunk);
	for (size_t i = 0; i < per_chunk / sizeof(line); i++)
		memcpy(chunk + i * sizeof(line), line, sizeof(line));
	for (uint64_t w = 0; w < size; w += per_chunk)
		assert_int_equal(fwrite(chunk, 1, per_chunk, f), per_chunk);
	free(chunk);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(stat(path, &before), 0);

	u.id = "u1";
	u.dir = dir;
	unit_log_trim(&u);
	assert_int_equal(stat(path, &after), 0);
	assert_int_equal(after.st_size, before.st_size);
	/* cut on a line boundary: the newest KEEP bytes, less at most one line */
	assert_int_equal(u.log_start % sizeof(line), 0);
	assert_true((uint64_t)after.st_size - u.log_start <= UNIT_LOG_KEEP);
	assert_true((uint64_t)after.st_size - u.log_start > UNIT_LOG_KEEP - sizeof(line));
	assert_true(u.log_sent >= u.log_start);
	/* the blocks before it are freed where the file system can (tmpfs, ext4, xfs) */
	if (after.st_blocks >= before.st_blocks)
		print_message("note: this file system kept the blocks\n");
	else
		assert_true((uint64_t)after.st_blocks * 512 + UNIT_LOG_SLACK <
			    (uint64_t)before.st_blocks * 512);
	/* a second call with nothing new changes nothing */
	{
		uint64_t start = u.log_start;

		unit_log_trim(&u);
		assert_int_equal(u.log_start, start);
	}
	assert_int_equal(fs_remove_tree(dir, &err), 0);
}

/* An exec's process: a terminal sized from its start when a size is given (the runtime sizes
 * it before the command runs), none without a terminal or a size. */
static void test_supervisor__an_exec_with_a_terminal_starts_at_its_size(void **state)
{
	char dir[] = "/tmp/kiyot-test-execproc-XXXXXX";
	char *cmd[] = { "stty", "size", NULL };
	_cleanup_free_ char *bundle = NULL, *cfg = NULL, *out = NULL;
	struct err err = ERR_INIT;
	json_t *p;

	(void)state;
	assert_non_null(mkdtemp(dir));
	bundle = xasprintf("%s/bundle", dir);
	cfg = xasprintf("%s/config.json", bundle);
	out = xasprintf("%s/exec.json", dir);
	assert_int_equal(fs_mkdir_p(bundle, 0700, &err), 0);
	assert_int_equal(fs_write_file(cfg,
				       "{\"process\":{\"args\":[\"sleep\"],\"env\":[\"TERM=dumb\"],"
				       "\"consoleSize\":{\"height\":1,\"width\":1}}}",
				       87, 0600, &err),
			 0);
	assert_int_equal(exec_process_file(dir, cmd, true, 100, 30, out, &err), 0);
	p = json_load_file(out, 0, NULL);
	assert_non_null(p);
	assert_true(json_is_true(json_object_get(p, "terminal")));
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(p, "consoleSize"), "width")),
		100);
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(p, "consoleSize"), "height")),
		30);
	json_decref(p);
	/* no size, or no terminal: no consoleSize (the unit's own is not the exec's) */
	assert_int_equal(exec_process_file(dir, cmd, true, 0, 0, out, &err), 0);
	p = json_load_file(out, 0, NULL);
	assert_null(json_object_get(p, "consoleSize"));
	json_decref(p);
	assert_int_equal(exec_process_file(dir, cmd, false, 100, 30, out, &err), 0);
	p = json_load_file(out, 0, NULL);
	assert_null(json_object_get(p, "consoleSize"));
	assert_false(json_is_true(json_object_get(p, "terminal")));
	json_decref(p);
	fs_remove_tree(dir, &err);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_supervisor__echo_unit_completes_with_cri_log,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_supervisor__failing_units_report_exit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_supervisor__image_failure_carries_its_code,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_supervisor__on_failure_restarts_with_count,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_supervisor__watch_over_the_cell_feed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_supervisor__stop_kills_after_grace, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_supervisor__init_unit_runs_before_app, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_supervisor__new_supervisor_adopts_running_unit,
						setup, teardown),
		cmocka_unit_test(test_supervisor__log_trim_keeps_the_newest_lines),
		cmocka_unit_test(test_supervisor__an_exec_with_a_terminal_starts_at_its_size),
	};

	if (argc > 1 && strcmp(argv[1], "shim") == 0)
		return shim_main(argc - 1, argv + 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
