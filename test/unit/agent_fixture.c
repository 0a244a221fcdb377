/*
 * agent_fixture.c: a whole cell-agent in the test process (see agent_fixture.h).
 */
#include "agent_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "clock.h"
#include "enroll.h"
#include "fake_runtime.h"
#include "fsutil.h"
#include "log.h"
#include "pki.h"
#include "podns.h"
#include "proc.h"
#include "rpc.h"
#include "rpc_loop.h"
#include "supervisor.h"
#include "xalloc.h"

#define CALL_TIMEOUT_MS 30000
#define WATCH_TIMEOUT_MS 30000
#define WAIT_NS (20 * 1000000000LL)
#define SERVICE "/kiyot.cell.v1.CellAgent/"

int afix_main(int argc, char **argv)
{
	if (argc > 0 && fake_runtime_called(argv[0]))
		return fake_runtime_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "shim") == 0)
		return shim_main(argc - 1, argv + 1);
	if (argc == 2 && strcmp(argv[1], PODNS_HOLDER_ARG) == 0)
		podns_holder_main();
	return -1;
}

/* The test binary's path. */
static char *self_exe(void)
{
	char buf[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

	if (n <= 0)
		abort();
	buf[n] = '\0';
	return xstrdup(buf);
}

/* Puts AFIX_IMAGE in the image store at root: its record and an empty root file system. */
static void seed_image(const char *root)
{
	_cleanup_free_ char *dir = xasprintf("%s/images/%s", root, AFIX_IMAGE_ID + 7);
	_cleanup_free_ char *rootfs = xasprintf("%s/rootfs", dir);
	_cleanup_free_ char *rec = xasprintf("%s/image.json", dir);
	static const char json[] =
		"{\"id\":\"" AFIX_IMAGE_ID "\",\"refs\":[\"" AFIX_IMAGE "\"],"
		"\"repo_digests\":[\"" AFIX_IMAGE_DIGEST "\"],\"size\":4096,\"entrypoint\":[],"
		"\"cmd\":[\"sh\"],\"env\":[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:"
		"/usr/bin:/sbin:/bin\"],\"user\":\"\",\"working_dir\":\"\"}";
	struct err err = ERR_INIT;

	if (fs_mkdir_p(rootfs, 0755, &err) < 0 ||
	    fs_write_file(rec, json, strlen(json), 0644, &err) < 0) {
		fprintf(stderr, "agent fixture: %s\n", err.msg);
		abort();
	}
}

struct afix *afix_new(void)
{
	struct afix *f = xcalloc(1, sizeof(*f));
	_cleanup_free_ char *self = self_exe(), *images = NULL;
	struct err err = ERR_INIT;

	snprintf(f->dir, sizeof(f->dir), "/tmp/agent-unit.XXXXXX");
	if (!mkdtemp(f->dir))
		abort();
	f->state = xasprintf("%s/state", f->dir);
	f->runtime = xasprintf("%s/" FAKE_RUNTIME_NAME, f->dir);
	f->runtime_root = xasprintf("%s/runtime", f->state);
	f->sock = xasprintf("%s/agent.sock", f->dir);
	images = xasprintf("%s/images", f->state);
	seed_image(images);
	if (symlink(self, f->runtime) < 0 ||
	    pki_ca_new("kiyot-cells", 1, &f->ca, &f->ca_key, &err) < 0) {
		fprintf(stderr, "agent fixture: %s %s\n", strerror(errno), err.msg);
		abort();
	}
	return f;
}

static void on_enrolled(struct agent *a)
{
	struct afix *f = (struct afix *)((char *)a - offsetof(struct afix, a));

	f->enrolled++;
}

/* The bootstrap document of the fixture's cell. */
static char *bootstrap(struct afix *f)
{
	json_t *doc = json_pack("{s:i, s:s, s:{s:s, s:s, s:s}, s:s, s:s, s:s, s:i, s:s, s:s}",
				"version", 1, "cell_id", AFIX_CELL_ID, "pod", "uid", AFIX_POD_UID,
				"name", "web", "namespace", "default", "state_dir", f->state,
				"runtime", f->runtime, "log_level", "error", "restart_backoff_ms",
				50, "ca", f->ca, "enroll_secret", AFIX_SECRET);
	char *text = json_dumps(doc, JSON_COMPACT);

	json_decref(doc);
	if (f->bootstrap_extra) {
		char *more = xasprintf("%.*s%s}", (int)strlen(text) - 1, text, f->bootstrap_extra);

		free(text);
		text = more;
	}
	return text;
}

int afix_open(struct afix *f, struct err *err)
{
	struct rpc_server_config rc = { 0 };
	_cleanup_free_ char *addr = xasprintf("unix://%s", f->sock);
	_cleanup_free_ char *doc = bootstrap(f);
	_cleanup_free_ char *tls = xasprintf("%s/tls", f->state);
	const struct rpc_pool *pools;
	struct agent *a = &f->a;

	log_set_level(LOG_ERROR);
	memset(a, 0, sizeof(*a));
	if (agent_config_parse(doc, strlen(doc), &a->cfg, err) < 0)
		return err_wrap(err, "bootstrap");
	f->open = true;
	a->bootstrap = NULL;
	a->self_path = self_exe();
	a->ip = xstrdup("127.0.0.1");
	a->host_mnt_ns = -1;
	a->incarnation = 3;
	a->boot_ns = clock_now_ns();
	a->on_enrolled = on_enrolled;
	if (fs_mkdir_p(f->state, 0700, err) < 0 ||
	    enroll_open(tls, a->cfg.cell_id, a->cfg.ca, a->cfg.enroll_secret, &a->enroll, err) < 0)
		return -err->code;
	if (agent_open(a, err) < 0)
		return -err->code;
	rc.address = addr;
	rc.methods = agent_method_table(&rc.n_methods);
	rc.svc = a;
	pools = agent_pool_table(&rc.n_pools);
	memcpy(rc.pools, pools, rc.n_pools * sizeof(*pools));
	rc.max_message = 64u << 20;
	if (rpc_server_start(&rc, &f->srv, err) < 0)
		return -err->code;
	return rpc_channel_new(addr, &f->ch, err);
}

void afix_close(struct afix *f)
{
	struct err err = ERR_INIT;

	if (!f->open)
		return;
	if (f->ch && f->a.sup) {
		Kiyot__Cell__V1__Pod *empty = afix_pod_new(KIYOT__CELL__V1__RESTART_POLICY__NEVER);
		Kiyot__Cell__V1__ApplyResponse *r = NULL;

		if (afix_apply(f, empty, &r, &err) == 0)
			protobuf_c_message_free_unpacked(&r->base, NULL);
		afix_pod_free(empty);
	}
	rpc_loop_free(f->loop);
	f->loop = NULL;
	rpc_channel_free(f->ch);
	f->ch = NULL;
	rpc_server_stop(f->srv);
	f->srv = NULL;
	if (f->a.sup)
		agent_close(&f->a);
	enroll_free(f->a.enroll);
	agent_config_release(&f->a.cfg);
	free(f->a.self_path);
	free(f->a.ip);
	memset(&f->a, 0, sizeof(f->a));
	f->open = false;
}

/* Kills what the runtime still runs under root (a test that failed half way). */
static void kill_leftovers(const char *root)
{
	DIR *d = opendir(root);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		_cleanup_free_ char *path = xasprintf("%s/%s/state", root, e->d_name);
		_cleanup_free_ char *text = NULL;
		struct err err = ERR_INIT;
		unsigned long long start;
		long pid;

		if (e->d_name[0] == '.' || fs_read_file(path, 128, &text, NULL, &err) < 0 ||
		    sscanf(text, "%ld %llu", &pid, &start) != 2 || !proc_alive(pid, start))
			continue;
		kill((pid_t)-pid, SIGKILL);
		kill((pid_t)pid, SIGKILL);
	}
	if (d)
		closedir(d);
}

/* The number of processes whose command line names dir (shims and runtime commands of the
 * fixture's units: the shim's last "delete" outlives its unit), each sent sig when non-zero. */
static int procs_naming(const char *dir, int sig)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		_cleanup_free_ char *path = xasprintf("/proc/%s/cmdline", e->d_name);
		_cleanup_free_ char *cmd = NULL;
		struct err err = ERR_INIT;
		size_t len = 0;
		long pid = strtol(e->d_name, NULL, 10);

		if (pid <= 0 || pid == getpid() ||
		    fs_read_file(path, 64 << 10, &cmd, &len, &err) < 0 ||
		    !memmem(cmd, len, dir, strlen(dir)))
			continue;
		n++;
		if (sig)
			kill((pid_t)pid, sig);
	}
	if (d)
		closedir(d);
	return n;
}

/* Waits up to 5 s for the fixture's processes to end, then kills what is left. */
static void wait_procs(const char *dir)
{
	for (int i = 0; i < 500 && procs_naming(dir, 0) > 0; i++)
		usleep(10000);
	procs_naming(dir, SIGKILL);
}

/* Kills the holder of the pod's namespaces the agent recorded in its state directory. */
static void kill_podns(const char *state)
{
	_cleanup_free_ char *path = xasprintf("%s/podns", state), *text = NULL;
	struct err err = ERR_INIT;
	unsigned long long start;
	long pid;

	if (fs_read_file(path, 64, &text, NULL, &err) == 0 &&
	    sscanf(text, "%ld %llu", &pid, &start) == 2 && proc_alive(pid, start))
		kill((pid_t)pid, SIGKILL);
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

void afix_free(struct afix *f)
{
	struct err err = ERR_INIT;

	if (!f)
		return;
	afix_close(f);
	kill_leftovers(f->runtime_root);
	kill_podns(f->state);
	wait_procs(f->dir);
	umount_below(f->dir);
	fs_remove_tree(f->dir, &err);
	free(f->state);
	free(f->runtime);
	free(f->runtime_root);
	free(f->sock);
	free(f->ca);
	free(f->ca_key);
	free(f);
}

int afix_setup(void **state)
{
	struct afix *f = afix_new();
	struct err err = ERR_INIT;

	if (afix_open(f, &err) < 0) {
		fprintf(stderr, "agent fixture: %s\n", err.msg);
		afix_free(f);
		return -1;
	}
	*state = f;
	return 0;
}

int afix_teardown(void **state)
{
	afix_free(*state);
	return 0;
}

int afix_call(struct afix *f, const char *method, const ProtobufCMessage *req, void *resp,
	      struct err *err)
{
	const ProtobufCServiceDescriptor *svc = &kiyot__cell__v1__cell_agent__descriptor;
	_cleanup_free_ char *path = xasprintf(SERVICE "%s", method);

	err_clear(err);
	for (unsigned i = 0; i < svc->n_methods; i++)
		if (strcmp(svc->methods[i].name, method) == 0)
			return rpc_unary(f->ch, path, req, svc->methods[i].output, CALL_TIMEOUT_MS,
					 resp, err);
	abort();
}

Kiyot__Cell__V1__Pod *afix_pod_new(Kiyot__Cell__V1__RestartPolicy policy)
{
	Kiyot__Cell__V1__Pod *p = xmalloc(sizeof(*p));

	kiyot__cell__v1__pod__init(p);
	p->uid = xstrdup(AFIX_POD_UID);
	p->name = xstrdup("web");
	p->namespace_ = xstrdup("default");
	p->hostname = xstrdup("web");
	p->restart_policy = policy;
	return p;
}

Kiyot__Cell__V1__Unit *afix_pod_unit(Kiyot__Cell__V1__Pod *p, const char *id, const char *script)
{
	Kiyot__Cell__V1__Unit *u = xmalloc(sizeof(*u));

	kiyot__cell__v1__unit__init(u);
	u->id = xstrdup(id);
	u->name = xstrdup(id);
	u->image = xstrdup(AFIX_IMAGE);
	u->n_command = 3;
	u->command = xcalloc(3, sizeof(char *));
	u->command[0] = xstrdup("sh");
	u->command[1] = xstrdup("-c");
	u->command[2] = xstrdup(script);
	u->desired = KIYOT__CELL__V1__UNIT_DESIRED__RUNNING;
	u->stop_timeout_s = 5;
	p->units = xrealloc(p->units, (p->n_units + 1) * sizeof(*p->units));
	p->units[p->n_units++] = u;
	return u;
}

void afix_pod_drop(Kiyot__Cell__V1__Pod *p, const char *id)
{
	for (size_t i = 0; i < p->n_units; i++)
		if (strcmp(p->units[i]->id, id) == 0) {
			kiyot__cell__v1__unit__free_unpacked(p->units[i], NULL);
			memmove(&p->units[i], &p->units[i + 1],
				(p->n_units - i - 1) * sizeof(*p->units));
			p->n_units--;
			return;
		}
}

void afix_pod_free(Kiyot__Cell__V1__Pod *p)
{
	if (p)
		kiyot__cell__v1__pod__free_unpacked(p, NULL);
}

int afix_apply(struct afix *f, const Kiyot__Cell__V1__Pod *pod,
	       Kiyot__Cell__V1__ApplyResponse **resp, struct err *err)
{
	Kiyot__Cell__V1__ApplyRequest req = KIYOT__CELL__V1__APPLY_REQUEST__INIT;

	req.pod = (Kiyot__Cell__V1__Pod *)pod;
	req.timeout_ms = 20000;
	return afix_call(f, "Apply", &req.base, resp, err);
}

const Kiyot__Cell__V1__UnitStatus *afix_status_of(const Kiyot__Cell__V1__ApplyResponse *r,
						  const char *id)
{
	for (size_t i = 0; r && i < r->n_units; i++)
		if (strcmp(r->units[i]->id, id) == 0)
			return r->units[i];
	return NULL;
}

int afix_watch_open(struct afix *f, const Kiyot__Cell__V1__WatchRequest *req,
		    struct rpc_stream **out, struct err *err)
{
	return rpc_stream_open(f->ch, SERVICE "Watch", &req->base,
			       &kiyot__cell__v1__watch_event__descriptor, WATCH_TIMEOUT_MS, out,
			       err);
}

Kiyot__Cell__V1__WatchEvent *afix_watch_next(struct rpc_stream *w, struct err *err)
{
	ProtobufCMessage *m = NULL;

	if (rpc_stream_next(w, &m, err) <= 0)
		return NULL;
	return (Kiyot__Cell__V1__WatchEvent *)m;
}

void afix_event_free(Kiyot__Cell__V1__WatchEvent *ev)
{
	if (ev)
		protobuf_c_message_free_unpacked(&ev->base, NULL);
}

Kiyot__Cell__V1__WatchEvent *afix_wait_state(struct afix *f, const char *id,
					     Kiyot__Cell__V1__UnitState state, int want_code)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__WatchEvent *ev = NULL;
	struct rpc_stream *w = NULL;
	struct err err = ERR_INIT;
	int64_t until = clock_mono_ns() + WAIT_NS;

	if (afix_watch_open(f, &req, &w, &err) < 0)
		return NULL;
	while (clock_mono_ns() < until && (ev = afix_watch_next(w, &err))) {
		const Kiyot__Cell__V1__UnitStatus *st = ev->status;

		if (ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS && st &&
		    strcmp(st->id, id) == 0 && st->state == state &&
		    (state != KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED || want_code < 0 ||
		     st->exit_code == want_code))
			break;
		afix_event_free(ev);
		ev = NULL;
	}
	rpc_stream_cancel(w);
	rpc_stream_free(w);
	return ev;
}

char *afix_log(struct afix *f, const char *id)
{
	Kiyot__Cell__V1__WatchRequest req = KIYOT__CELL__V1__WATCH_REQUEST__INIT;
	Kiyot__Cell__V1__WatchEvent *ev;
	struct rpc_stream *w = NULL;
	struct err err = ERR_INIT;
	char *log = xstrdup("");

	if (afix_watch_open(f, &req, &w, &err) < 0)
		return log;
	while ((ev = afix_watch_next(w, &err)) &&
	       ev->kind != KIYOT__CELL__V1__WATCH_EVENT__KIND__SYNCED) {
		if (ev->kind == KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG &&
		    strcmp(ev->unit_id, id) == 0) {
			char *more = xasprintf("%s%.*s", log, (int)ev->data.len,
					       (const char *)ev->data.data);

			free(log);
			log = more;
		}
		afix_event_free(ev);
	}
	afix_event_free(ev);
	rpc_stream_cancel(w);
	rpc_stream_free(w);
	return log;
}

char *afix_runtime_calls(struct afix *f)
{
	return fake_runtime_calls(f->runtime_root);
}

struct afix_bidi {
	struct rpc_bidi *b;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool sending, reading, ended;
	ProtobufCMessage *msg;
	int ret;
	struct err err;
};

static void bidi_on_msg(void *arg, ProtobufCMessage *msg)
{
	struct afix_bidi *b = arg;

	pthread_mutex_lock(&b->mu);
	b->msg = msg;
	b->reading = false;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

static void bidi_on_sent(void *arg, int ret)
{
	struct afix_bidi *b = arg;

	(void)ret;
	pthread_mutex_lock(&b->mu);
	b->sending = false;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

static void bidi_on_end(void *arg, int ret, const struct err *err)
{
	struct afix_bidi *b = arg;

	pthread_mutex_lock(&b->mu);
	b->ended = true;
	b->ret = ret;
	if (err)
		b->err = *err;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

/* Waits on b's condition until *flag is false or the call ended, at most 20 s. Needs mu. */
static void bidi_wait(struct afix_bidi *b, bool *flag)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	while (*flag && !b->ended)
		if (pthread_cond_timedwait(&b->cond, &b->mu, &ts) == ETIMEDOUT)
			break;
}

int afix_bidi_open(struct afix *f, const char *method, const ProtobufCMessage *first,
		   struct afix_bidi **out, struct err *err)
{
	const ProtobufCServiceDescriptor *svc = &kiyot__cell__v1__cell_agent__descriptor;
	const struct rpc_bidi_cbs cbs = { bidi_on_msg, bidi_on_sent, bidi_on_end };
	_cleanup_free_ char *path = xasprintf(SERVICE "%s", method);
	const ProtobufCMessageDescriptor *desc = NULL;
	struct afix_bidi *b;

	for (unsigned i = 0; i < svc->n_methods; i++)
		if (strcmp(svc->methods[i].name, method) == 0)
			desc = svc->methods[i].output;
	if (!desc)
		abort();
	if (!f->loop && rpc_loop_new(1, &f->loop, err) < 0)
		return -err->code;
	b = xcalloc(1, sizeof(*b));
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cond, NULL);
	b->sending = true;
	if (rpc_bidi_open(f->loop, f->ch, path, first, desc, &cbs, b, &b->b, err) < 0) {
		free(b);
		return -err->code;
	}
	*out = b;
	return 0;
}

int afix_bidi_send(struct afix_bidi *b, const ProtobufCMessage *msg, struct err *err)
{
	int ret;

	pthread_mutex_lock(&b->mu);
	bidi_wait(b, &b->sending);
	b->sending = true;
	pthread_mutex_unlock(&b->mu);
	ret = rpc_bidi_send(b->b, msg, err);
	pthread_mutex_lock(&b->mu);
	if (ret < 0)
		b->sending = false;
	else
		bidi_wait(b, &b->sending);
	pthread_mutex_unlock(&b->mu);
	return ret;
}

void afix_bidi_close_send(struct afix_bidi *b)
{
	pthread_mutex_lock(&b->mu);
	bidi_wait(b, &b->sending);
	pthread_mutex_unlock(&b->mu);
	rpc_bidi_close_send(b->b);
}

ProtobufCMessage *afix_bidi_next(struct afix_bidi *b)
{
	ProtobufCMessage *m;

	pthread_mutex_lock(&b->mu);
	if (b->ended) {
		pthread_mutex_unlock(&b->mu);
		return NULL;
	}
	b->reading = true;
	pthread_mutex_unlock(&b->mu);
	rpc_bidi_read(b->b);
	pthread_mutex_lock(&b->mu);
	bidi_wait(b, &b->reading);
	m = steal_ptr(b->msg);
	pthread_mutex_unlock(&b->mu);
	return m;
}

void afix_bidi_cancel(struct afix_bidi *b)
{
	rpc_bidi_cancel(b->b);
}

int afix_bidi_end(struct afix_bidi *b, struct err *err)
{
	ProtobufCMessage *m;
	int ret;

	/* the end is learnt by reading: drain what is left */
	while ((m = afix_bidi_next(b)))
		protobuf_c_message_free_unpacked(m, NULL);
	pthread_mutex_lock(&b->mu);
	if (!b->ended) {
		pthread_mutex_unlock(&b->mu);
		rpc_bidi_cancel(b->b);
		pthread_mutex_lock(&b->mu);
		while (!b->ended)
			pthread_cond_wait(&b->cond, &b->mu);
		b->ret = err_set(&b->err, ETIMEDOUT, "the call did not end within 20 s");
	}
	ret = b->ret;
	if (ret < 0)
		*err = b->err;
	pthread_mutex_unlock(&b->mu);
	rpc_bidi_free(b->b);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cond);
	free(b);
	return ret;
}
