/*
 * fake_agent.c: cell agents in memory for kiyot's unit tests (see fake_agent.h): cells and
 * units, failures, and the unary calls of agent_ops.
 */
#include "fake_agent_internal.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "codec.h"
#include "cri/cri.h"
#include "feed.h"
#include "version.h"
#include "pki.h"
#include "xalloc.h"

static const char *const op_names[FAKE_AGENT_N_OPS] = {
	"connect",  "Enroll", "Hello",	     "Apply", "PullImage",
	"ExecSync", "Stats",  "WriteVolume", "Watch", "stream",
};

/* ---- cells and units (callers hold fa->lock) ---- */

struct fake_cell *fa_cell_find(struct fake_agent *fa, const char *id)
{
	for (struct fake_cell *c = fa->cells; c; c = c->next)
		if (strcmp(c->id, id) == 0)
			return c;
	return NULL;
}

static struct fake_cell *cell_at_target(struct fake_agent *fa, const char *target)
{
	for (struct fake_cell *c = fa->cells; c; c = c->next)
		if (strcmp(c->target, target) == 0)
			return c;
	return NULL;
}

struct fake_unit *fa_unit_find(struct fake_cell *c, const char *id)
{
	for (size_t i = 0; i < c->n_units; i++)
		if (strcmp(c->units[i]->id, id) == 0)
			return c->units[i];
	return NULL;
}

static void unit_free(struct fake_unit *u)
{
	free(u->id);
	free(u->image);
	free(u->reason);
	free(u->message);
	free(u->termination_message);
	free(u->log);
	free(u);
}

void fa_cell_free(struct fake_cell *c)
{
	for (size_t i = 0; i < c->n_units; i++)
		unit_free(c->units[i]);
	free(c->units);
	for (size_t i = 0; i < c->n_volumes; i++)
		free(c->volumes[i].name);
	free(c->volumes);
	if (c->last_watch)
		protobuf_c_message_free_unpacked(&c->last_watch->base, NULL);
	if (c->last_pod)
		protobuf_c_message_free_unpacked(&c->last_pod->base, NULL);
	free(c->id);
	free(c->target);
	free(c->bootstrap);
	free(c->ca);
	free(c->secret);
	free(c->key);
	free(c->csr);
	free(c);
}

void fa_set_str(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v);
}

/* The unit as a wire status, borrowing its strings. */
void fa_unit_wire(const struct fake_unit *u, Kiyot__Cell__V1__UnitStatus *w)
{
	kiyot__cell__v1__unit_status__init(w);
	w->id = u->id;
	w->state = u->state;
	w->created_at_ns = u->created_ns;
	w->started_at_ns = u->started_ns;
	w->finished_at_ns = u->finished_ns;
	w->exit_code = u->exit_code;
	w->reason = u->reason;
	w->message = u->message;
	w->image_ref = u->image;
	w->pid = u->state == KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING ? u->pid : 0;
	w->termination_message = u->termination_message ? u->termination_message : "";
}

/* ---- streams ---- */

/* Queues a message (taking it) for the stream's reader. */
void fa_stream_push(struct fake_agent *fa, struct agent_stream *s, void *msg)
{
	if (s->head + s->n == s->cap && s->head) {
		memmove(s->q, s->q + s->head, s->n * sizeof(*s->q));
		s->head = 0;
	}
	xgrow((void **)&s->q, &s->cap, s->head + s->n + 1, sizeof(*s->q));
	s->q[s->head + s->n++] = msg;
	pthread_cond_broadcast(&fa->cond);
}

/* Queues a copy of ev on every open Watch of the cell. */
void fa_notify(struct fake_agent *fa, const struct fake_cell *c,
	       const Kiyot__Cell__V1__WatchEvent *ev)
{
	for (struct agent_stream *s = fa->streams; s; s = s->next)
		if (s->kind == STREAM_WATCH && !s->end && strcmp(s->cell_id, c->id) == 0)
			fa_stream_push(fa, s, cri_msg_copy(&ev->base));
}

void fa_notify_status(struct fake_agent *fa, const struct fake_cell *c, const struct fake_unit *u)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;
	Kiyot__Cell__V1__UnitStatus w;

	fa_unit_wire(u, &w);
	ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__STATUS;
	ev.status = &w;
	ev.unit_id = u->id;
	fa_notify(fa, c, &ev);
}

/* A log event of the unit's bytes from offset on. */
Kiyot__Cell__V1__WatchEvent *fa_log_event(const struct fake_unit *u, size_t offset)
{
	Kiyot__Cell__V1__WatchEvent ev = KIYOT__CELL__V1__WATCH_EVENT__INIT;

	ev.kind = KIYOT__CELL__V1__WATCH_EVENT__KIND__LOG;
	ev.unit_id = u->id;
	ev.offset = offset;
	ev.data.data = (uint8_t *)u->log + offset;
	ev.data.len = u->log_len - offset;
	return cri_msg_copy(&ev.base);
}

/* Ends the cell's open streams with code (its agent went away). */
void fa_streams_end(struct fake_agent *fa, const char *cell_id, int code)
{
	for (struct agent_stream *s = fa->streams; s; s = s->next)
		if (strcmp(s->cell_id, cell_id) == 0 && !s->end)
			s->end = -code;
	pthread_cond_broadcast(&fa->cond);
}

/* ---- failures, delays, counts ---- */

/* Counts a call of op and answers what the test told op to do: 0, or the error to fail
 * with (after the delay, if any). */
int fa_op_enter(struct fake_agent *fa, enum fake_agent_op op, int64_t timeout_ms, struct err *err)
{
	int code = 0, delay;

	pthread_mutex_lock(&fa->lock);
	fa->ops[op].calls++;
	fa->ops[op].last_timeout = timeout_ms;
	delay = fa->ops[op].delay_ms;
	if (fa->ops[op].times) {
		code = fa->ops[op].code;
		if (fa->ops[op].times > 0)
			fa->ops[op].times--;
	}
	pthread_mutex_unlock(&fa->lock);
	if (delay)
		usleep((useconds_t)delay * 1000);
	if (code)
		return err_set(err, code, "fake agent: %s fails (as the test asked)", op_names[op]);
	return 0;
}

/* The cell a connection reaches, as the real agent's TLS allows: its agent serves, enrolled,
 * with a certificate naming the connection's cell. Needs fa->lock. */
struct fake_cell *fa_conn_cell(struct fake_agent *fa, const struct agent_conn *conn,
			       struct err *err)
{
	struct fake_cell *c = cell_at_target(fa, conn->target);

	if (!c || !c->serving) {
		err_set(err, ECONNREFUSED, "%s: connection refused", conn->target);
		return NULL;
	}
	if (!c->enrolled) {
		err_set(err, ECONNREFUSED, "%s: TLS handshake failed: the agent serves only Enroll",
			conn->target);
		return NULL;
	}
	if (strcmp(c->id, conn->cell_id) != 0) {
		err_set(err, ECONNREFUSED, "%s: the certificate names %s, not %s", conn->target,
			c->id, conn->cell_id);
		return NULL;
	}
	return c;
}

/* ---- agent_ops ---- */

static int fa_connect(void *self, const struct agent_tls *tls, const char *cell_id,
		      const char *target, struct agent_conn **out, struct err *err)
{
	struct agent_conn *c;

	if (!tls->ca || !tls->cert || !tls->key)
		return err_set(err, EINVAL, "connect %s: kiyot's TLS credentials are missing",
			       target);
	if (fa_op_enter(self, FAKE_AGENT_CONNECT, 0, err) < 0)
		return -err->code;
	c = xmalloc(sizeof(*c));
	c->cell_id = xstrdup(cell_id);
	c->target = xstrdup(target);
	*out = c;
	return 0;
}

static void fa_disconnect(void *self, struct agent_conn *c)
{
	(void)self;
	if (!c)
		return;
	free(c->cell_id);
	free(c->target);
	free(c);
}

/* Enroll's first half: the cell's request for its own key and the proof of its secret. */
static int enroll_request(struct fake_cell *c, Kiyot__Cell__V1__EnrollResponse *r, char *proof,
			  struct err *err)
{
	if (!c->key &&
	    (pki_key_new(&c->key, err) < 0 || pki_csr_new(c->key, c->id, &c->csr, err) < 0))
		return -err->code;
	if (pki_enroll_proof(c->secret, c->id, c->csr, proof, err) < 0)
		return -err->code;
	r->cell_id = c->id;
	r->csr = c->csr;
	r->proof = proof;
	return 0;
}

/* A cell's agent listens from its boot while it serves. */
/* Whether target is a cell's gRPC port that serves, or the feed port after it, which an
 * agent opens once it serves TLS (enrolled). */
static bool fa_listening(void *self, const char *target, int timeout_ms)
{
	struct fake_agent *fa = self;
	struct fake_cell *c;
	bool up;

	(void)timeout_ms;
	pthread_mutex_lock(&fa->lock);
	c = cell_at_target(fa, target);
	up = c && c->serving;
	for (c = fa->cells; c && !up; c = c->next) {
		_cleanup_free_ char *feed = NULL;
		struct err err = ERR_INIT;

		if (c->serving && c->enrolled && feed_address(c->target, &feed, &err) == 0)
			up = strcmp(feed, target) == 0;
	}
	pthread_mutex_unlock(&fa->lock);
	return up;
}

static int fa_enroll(void *self, const char *target, const Kiyot__Cell__V1__EnrollRequest *req,
		     int64_t timeout_ms, Kiyot__Cell__V1__EnrollResponse **resp, struct err *err)
{
	struct fake_agent *fa = self;
	Kiyot__Cell__V1__EnrollResponse r = KIYOT__CELL__V1__ENROLL_RESPONSE__INIT;
	char proof[65];
	struct fake_cell *c;
	int ret = 0;

	if (fa_op_enter(fa, FAKE_AGENT_ENROLL, timeout_ms, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fa->lock);
	c = cell_at_target(fa, target);
	if (!c || !c->serving)
		ret = err_set(err, ECONNREFUSED, "%s: connection refused", target);
	else if (c->enrolled)
		ret = err_set(err, ECONNREFUSED, "%s: the agent serves TLS only", target);
	else if (!req->certificate[0])
		ret = enroll_request(c, &r, proof, err);
	else if (!c->key)
		ret = err_set(err, EPROTO, "%s: a certificate before any request", target);
	else if (pki_verify(c->ca, req->certificate, c->id, PKI_SERVER, c->key, err) < 0)
		ret = -err->code;
	else
		c->enrolled = true;
	r.enrolled = ret == 0 && c->enrolled;
	if (ret == 0)
		*resp = cri_msg_copy(&r.base);
	pthread_mutex_unlock(&fa->lock);
	return ret;
}

static int fa_hello(void *self, struct agent_conn *conn, int64_t timeout_ms,
		    Kiyot__Cell__V1__HelloResponse **resp, struct err *err)
{
	struct fake_agent *fa = self;
	Kiyot__Cell__V1__HelloResponse r = KIYOT__CELL__V1__HELLO_RESPONSE__INIT;
	struct fake_cell *c;

	if (fa_op_enter(fa, FAKE_AGENT_HELLO, timeout_ms, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fa->lock);
	c = fa_conn_cell(fa, conn, err);
	if (c) {
		r.agent_version = fa->version ? fa->version : (char *)KIYOT_VERSION;
		r.cell_id = c->id;
		r.incarnation = 1;
		*resp = cri_msg_copy(&r.base);
	}
	pthread_mutex_unlock(&fa->lock);
	return c ? 0 : -err->code;
}

static const struct refused *refused_find(struct fake_agent *fa, const char *image)
{
	for (size_t i = 0; i < fa->n_refused; i++)
		if (strcmp(fa->refused[i].image, image) == 0)
			return &fa->refused[i];
	return NULL;
}

static struct fake_unit *unit_new(struct fake_agent *fa, struct fake_cell *c,
				  const Kiyot__Cell__V1__Unit *w)
{
	struct fake_unit *u = xcalloc(1, sizeof(*u));
	const struct refused *r = refused_find(fa, w->image);

	u->id = xstrdup(w->id);
	u->image = xstrdup(w->image);
	u->state = KIYOT__CELL__V1__UNIT_STATE__UNIT_CREATED;
	u->created_ns = clock_now_ns();
	u->reason = xstrdup(r ? "CreateContainerError" : "");
	u->message = xstrdup(r ? r->message : "");
	xgrow((void **)&c->units, &c->cap_units, c->n_units + 1, sizeof(*c->units));
	c->units[c->n_units++] = u;
	return u;
}

/* Brings the unit to its desired state at once; non-zero if its state changed. */
static int unit_reach(struct fake_unit *u)
{
	if (strcmp(u->reason, "CreateContainerError") == 0)
		return 0;
	if (u->desired == KIYOT__CELL__V1__UNIT_DESIRED__RUNNING &&
	    u->state == KIYOT__CELL__V1__UNIT_STATE__UNIT_CREATED) {
		static int32_t next_pid = 1000; /* fa->lock holds it */

		u->state = KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING;
		u->started_ns = clock_now_ns();
		u->pid = next_pid++;
		return 1;
	}
	if (u->desired == KIYOT__CELL__V1__UNIT_DESIRED__STOPPED &&
	    u->state == KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING) {
		u->state = KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED;
		u->finished_ns = clock_now_ns();
		u->exit_code = 0;
		fa_set_str(&u->reason, "Completed");
		return 1;
	}
	return 0;
}

static bool pod_has(const Kiyot__Cell__V1__Pod *p, const char *unit_id)
{
	for (size_t i = 0; i < p->n_units; i++)
		if (strcmp(p->units[i]->id, unit_id) == 0)
			return true;
	return false;
}

/* Makes the cell's units those of the desired pod, each in the state it asks. */
static void apply_pod(struct fake_agent *fa, struct fake_cell *c, const Kiyot__Cell__V1__Pod *p)
{
	size_t w = 0;

	for (size_t i = 0; i < p->n_units; i++) {
		struct fake_unit *u = fa_unit_find(c, p->units[i]->id);

		if (!u)
			u = unit_new(fa, c, p->units[i]);
		u->desired = p->units[i]->desired;
		if (unit_reach(u))
			fa_notify_status(fa, c, u);
	}
	for (size_t i = 0; i < c->n_units; i++) {
		if (pod_has(p, c->units[i]->id))
			c->units[w++] = c->units[i];
		else
			unit_free(c->units[i]);
	}
	c->n_units = w;
}

static int fa_apply(void *self, struct agent_conn *conn, const Kiyot__Cell__V1__ApplyRequest *req,
		    int64_t timeout_ms, Kiyot__Cell__V1__ApplyResponse **resp, struct err *err)
{
	struct fake_agent *fa = self;
	Kiyot__Cell__V1__ApplyResponse r = KIYOT__CELL__V1__APPLY_RESPONSE__INIT;
	Kiyot__Cell__V1__UnitStatus *st, **stp;
	struct fake_cell *c;

	if (fa_op_enter(fa, FAKE_AGENT_APPLY, timeout_ms, err) < 0)
		return -err->code;
	if (!req->pod)
		return err_set(err, EINVAL, "pod: required");
	pthread_mutex_lock(&fa->lock);
	c = fa_conn_cell(fa, conn, err);
	if (!c) {
		pthread_mutex_unlock(&fa->lock);
		return -err->code;
	}
	apply_pod(fa, c, req->pod);
	if (c->last_pod)
		protobuf_c_message_free_unpacked(&c->last_pod->base, NULL);
	c->last_pod = cri_msg_copy(&req->pod->base);
	st = xcalloc(c->n_units + 1, sizeof(*st));
	stp = xcalloc(c->n_units + 1, sizeof(*stp));
	for (size_t i = 0; i < c->n_units; i++) {
		fa_unit_wire(c->units[i], &st[i]);
		stp[i] = &st[i];
	}
	r.units = stp;
	r.n_units = c->n_units;
	*resp = cri_msg_copy(&r.base);
	pthread_mutex_unlock(&fa->lock);
	free(st);
	free(stp);
	return 0;
}

/* "sha256:" and the hex SHA-256 of what, prefixed with kind (distinct digests per kind). */
static char *digest_of(const char *kind, const char *what)
{
	unsigned char md[32];
	char hex[65];
	_cleanup_free_ char *text = xasprintf("%s:%s", kind, what);

	EVP_Digest(text, strlen(text), md, NULL, EVP_sha256(), NULL);
	hex_encode(md, sizeof(md), hex);
	return xasprintf("sha256:%s", hex);
}

static int fa_pull_image(void *self, struct agent_conn *conn,
			 const Kiyot__Cell__V1__PullImageRequest *req, int64_t timeout_ms,
			 Kiyot__Cell__V1__PullImageResponse **resp, struct err *err)
{
	struct fake_agent *fa = self;
	Kiyot__Cell__V1__PullImageResponse r = KIYOT__CELL__V1__PULL_IMAGE_RESPONSE__INIT;
	_cleanup_free_ char *name = xstrndup(req->image, strcspn(req->image, "@"));
	_cleanup_free_ char *manifest = digest_of("manifest", req->image);
	_cleanup_free_ char *config = digest_of("config", req->image);
	_cleanup_free_ char *repo_digest = NULL;
	const struct refused *bad;
	char *colon = strrchr(name, ':');
	int ret = 0;

	if (fa_op_enter(fa, FAKE_AGENT_PULL, timeout_ms, err) < 0)
		return -err->code;
	if (colon && !strchr(colon, '/'))
		*colon = '\0'; /* the tag */
	repo_digest = xasprintf("%s@%s", name, manifest);
	pthread_mutex_lock(&fa->lock);
	bad = refused_find(fa, req->image);
	if (!fa_conn_cell(fa, conn, err)) {
		ret = -err->code;
	} else if (bad) {
		ret = err_set(err, EIO, "%s", bad->message);
	} else {
		r.repo_digest = repo_digest;
		r.image_id = config;
		r.size = 1000 + strlen(req->image);
		r.user = (char *)(req->auth && req->auth->username[0] ? req->auth->username : "");
		*resp = cri_msg_copy(&r.base);
	}
	pthread_mutex_unlock(&fa->lock);
	return ret;
}

/* v's n words joined by spaces, and a newline. */
static char *join_words(char *const *v, size_t n)
{
	size_t len = 2;
	char *s, *p;

	for (size_t i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	s = p = xmalloc(len);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i]);

		if (i)
			*p++ = ' ';
		memcpy(p, v[i], l);
		p += l;
	}
	*p++ = '\n';
	*p = '\0';
	return s;
}

/* The tiny shell of ExecSync and Exec: "echo ARGS", "exit N"; anything else is not found
 * (127, as the real agent answers). Fills *out and *errs (the caller frees them). */
int32_t fa_run_command(char *const *cmd, size_t n, char **out, char **errs)
{
	*out = xstrdup("");
	*errs = xstrdup("");
	if (strcmp(cmd[0], "echo") == 0) {
		free(*out);
		*out = join_words(cmd + 1, n - 1);
		return 0;
	}
	if (strcmp(cmd[0], "exit") == 0 && n == 2)
		return (int32_t)strtol(cmd[1], NULL, 10);
	free(*errs);
	*errs = xasprintf("%s: command not found\n", cmd[0]);
	return 127;
}

static int fa_exec_sync(void *self, struct agent_conn *conn,
			const Kiyot__Cell__V1__ExecSyncRequest *req, int64_t timeout_ms,
			Kiyot__Cell__V1__ExecSyncResponse **resp, struct err *err)
{
	struct fake_agent *fa = self;
	Kiyot__Cell__V1__ExecSyncResponse r = KIYOT__CELL__V1__EXEC_SYNC_RESPONSE__INIT;
	_cleanup_free_ char *out = NULL;
	_cleanup_free_ char *errs = NULL;
	struct fake_cell *c;
	struct fake_unit *u = NULL;
	int ret = 0;

	if (fa_op_enter(fa, FAKE_AGENT_EXEC, timeout_ms, err) < 0)
		return -err->code;
	if (req->n_cmd == 0)
		return err_set(err, EINVAL, "cmd: required");
	pthread_mutex_lock(&fa->lock);
	c = fa_conn_cell(fa, conn, err);
	if (c)
		u = fa_unit_find(c, req->unit_id);
	if (!c)
		ret = -err->code;
	else if (!u)
		ret = err_set(err, ENOENT, "unit %s not found", req->unit_id);
	else if (u->state != KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING)
		ret = err_set(err, EBUSY, "unit %s is not running", req->unit_id);
	pthread_mutex_unlock(&fa->lock);
	if (ret < 0)
		return ret;
	r.exit_code = fa_run_command(req->cmd, req->n_cmd, &out, &errs);
	r.stdout.data = (uint8_t *)out;
	r.stdout.len = strlen(out);
	r.stderr.data = (uint8_t *)errs;
	r.stderr.len = strlen(errs);
	*resp = cri_msg_copy(&r.base);
	return 0;
}

/* Fixed figures: the cell 1 s of CPU and 64 MiB; unit i (from 1) i ms of CPU, i MiB and
 * i * 4 KiB written to its root file system. A heap message; needs fa->lock. */
Kiyot__Cell__V1__StatsResponse *fa_stats_msg(const struct fake_cell *c)
{
	Kiyot__Cell__V1__StatsResponse r = KIYOT__CELL__V1__STATS_RESPONSE__INIT;
	Kiyot__Cell__V1__ResourceUsage cell = KIYOT__CELL__V1__RESOURCE_USAGE__INIT;
	Kiyot__Cell__V1__NetworkUsage net = KIYOT__CELL__V1__NETWORK_USAGE__INIT;
	Kiyot__Cell__V1__ResourceUsage *u, **up;
	Kiyot__Cell__V1__StatsResponse *out;
	int64_t now = clock_now_ns();

	cell.timestamp_ns = now;
	cell.cpu_usage_ns = 1000000000;
	cell.memory_working_set_bytes = 64 << 20;
	cell.memory_usage_bytes = 80 << 20;
	cell.cpu_usage_nano_cores = 250000000;
	cell.cpu_rate_known = true;
	cell.memory_available_bytes = 448 << 20;
	r.cell = &cell;
	net.timestamp_ns = now;
	net.interface = "eth0";
	net.rx_bytes = 5000;
	net.tx_bytes = 7000;
	r.network = &net;
	u = xcalloc(c->n_units + 1, sizeof(*u));
	up = xcalloc(c->n_units + 1, sizeof(*up));
	for (size_t i = 0; i < c->n_units; i++) {
		kiyot__cell__v1__resource_usage__init(&u[i]);
		u[i].unit_id = c->units[i]->id;
		u[i].timestamp_ns = now;
		u[i].cpu_usage_ns = (i + 1) * 1000000;
		u[i].memory_working_set_bytes = (i + 1) << 20;
		u[i].memory_usage_bytes = (i + 1) << 20;
		u[i].writable_layer_bytes = (i + 1) * 4096;
		u[i].writable_layer_inodes = i + 1;
		up[i] = &u[i];
	}
	r.units = up;
	r.n_units = c->n_units;
	out = cri_msg_copy(&r.base);
	free(u);
	free(up);
	return out;
}

static int fa_stats(void *self, struct agent_conn *conn, int64_t timeout_ms,
		    Kiyot__Cell__V1__StatsResponse **resp, struct err *err)
{
	struct fake_agent *fa = self;
	struct fake_cell *c;

	if (fa_op_enter(fa, FAKE_AGENT_STATS, timeout_ms, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fa->lock);
	c = fa_conn_cell(fa, conn, err);
	if (c)
		*resp = fa_stats_msg(c);
	pthread_mutex_unlock(&fa->lock);
	return c ? 0 : -err->code;
}

static int fa_write_volume(void *self, struct agent_conn *conn,
			   const Kiyot__Cell__V1__WriteVolumeRequest *req, int64_t timeout_ms,
			   Kiyot__Cell__V1__WriteVolumeResponse **resp, struct err *err)
{
	struct fake_agent *fa = self;
	Kiyot__Cell__V1__WriteVolumeResponse r = KIYOT__CELL__V1__WRITE_VOLUME_RESPONSE__INIT;
	struct fake_volume *v = NULL;
	struct fake_cell *c;

	if (fa_op_enter(fa, FAKE_AGENT_WRITE_VOLUME, timeout_ms, err) < 0)
		return -err->code;
	pthread_mutex_lock(&fa->lock);
	c = fa_conn_cell(fa, conn, err);
	if (!c) {
		pthread_mutex_unlock(&fa->lock);
		return -err->code;
	}
	for (size_t i = 0; i < c->n_volumes; i++)
		if (strcmp(c->volumes[i].name, req->volume) == 0)
			v = &c->volumes[i];
	if (!v) {
		xgrow((void **)&c->volumes, &c->cap_volumes, c->n_volumes + 1, sizeof(*c->volumes));
		v = &c->volumes[c->n_volumes++];
		v->name = xstrdup(req->volume);
	}
	v->entries = (int)req->n_entries;
	r.written = (uint32_t)req->n_entries;
	*resp = cri_msg_copy(&r.base);
	pthread_mutex_unlock(&fa->lock);
	return 0;
}

static const struct agent_ops fake_agent_ops = {
	.name = "fake",
	.connect = fa_connect,
	.disconnect = fa_disconnect,
	.enroll = fa_enroll,
	.hello = fa_hello,
	.apply = fa_apply,
	.pull_image = fa_pull_image,
	.exec_sync = fa_exec_sync,
	.stats = fa_stats,
	.write_volume = fa_write_volume,
	.listening = fa_listening,
	.watch = fa_watch,
	.watch_cancel = fa_watch_cancel,
	.open_stream = fa_open_stream,
	.stream_read = fa_stream_read,
	.stream_send = fa_stream_send,
	.stream_close_send = fa_stream_close_send,
	.stream_cancel = fa_cancel,
	.stream_free = fa_stream_free,
};

/* ---- making one ---- */

struct fake_agent *fake_agent_new(void)
{
	struct fake_agent *fa = xcalloc(1, sizeof(*fa));

	fa->client.ops = &fake_agent_ops;
	fa->client.self = fa;
	pthread_mutex_init(&fa->lock, NULL);
	pthread_cond_init(&fa->cond, NULL);
	return fa;
}

void fake_agent_free(struct fake_agent *fa)
{
	if (!fa)
		return;
	pthread_mutex_lock(&fa->lock); /* the streams' threads are done with fa */
	while (fa->watch_threads)
		pthread_cond_wait(&fa->cond, &fa->lock);
	pthread_mutex_unlock(&fa->lock);
	free(fa->version);
	while (fa->cells) {
		struct fake_cell *c = fa->cells;

		fa->cells = c->next;
		fa_cell_free(c);
	}
	while (fa->streams) {
		struct agent_stream *s = fa->streams;

		fa->streams = s->next;
		fa_stream_release(s);
	}
	for (size_t i = 0; i < fa->n_refused; i++) {
		free(fa->refused[i].image);
		free(fa->refused[i].message);
	}
	free(fa->refused);
	pthread_mutex_destroy(&fa->lock);
	pthread_cond_destroy(&fa->cond);
	free(fa);
}

const struct agent_client *fake_agent_client(struct fake_agent *fa)
{
	return &fa->client;
}
