/*
 * api.c: the CellAgent gRPC service. Apply hands the desired pod to the supervisor; Watch and
 * Stats are watch.c's, the streams api_stream.c's.
 */
#include "agent.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "cellagent.pb-c.h"
#include "enroll.h"
#include "image.h"
#include "log.h"
#include "regconf.h"
#include "registry.h"
#include "stats.h"
#include "rpc.h"
#include "supervisor.h"
#include "volume.h"
#include "xalloc.h"
#include "version.h"

static void on_status(void *ctx, const struct unit_status *st)
{
	struct agent *a = ctx;

	watch_hub_notify(a->hub, st->id, 0);
}

static void on_log(void *ctx, const char *unit_id, uint64_t offset, const char *data, size_t len)
{
	struct agent *a = ctx;

	(void)offset;
	(void)data;
	(void)len;
	watch_hub_notify(a->hub, unit_id, 1);
}

static Kiyot__Cell__V1__UnitState wire_state(enum unit_state s)
{
	switch (s) {
	case UNIT_STATE_CREATED:
		return KIYOT__CELL__V1__UNIT_STATE__UNIT_CREATED;
	case UNIT_STATE_RUNNING:
		return KIYOT__CELL__V1__UNIT_STATE__UNIT_RUNNING;
	case UNIT_STATE_EXITED:
		return KIYOT__CELL__V1__UNIT_STATE__UNIT_EXITED;
	default:
		return KIYOT__CELL__V1__UNIT_STATE__UNIT_UNKNOWN;
	}
}

/* A wire UnitStatus pointing into st (valid while st is). */
void agent_status_to_wire(const struct unit_status *st, Kiyot__Cell__V1__UnitStatus *w)
{
	kiyot__cell__v1__unit_status__init(w);
	w->id = st->id;
	w->state = wire_state(st->state);
	w->created_at_ns = st->created_at_ns;
	w->started_at_ns = st->started_at_ns;
	w->finished_at_ns = st->finished_at_ns;
	w->exit_code = st->exit_code;
	w->reason = st->reason ? st->reason : (char *)"";
	w->message = st->message ? st->message : (char *)"";
	w->restart_count = st->restart_count;
	w->image_ref = st->image_ref ? st->image_ref : (char *)"";
	w->image_id = st->image_id ? st->image_id : (char *)"";
	w->pid = st->pid;
	w->termination_message = st->termination_message ? st->termination_message : (char *)"";
	w->error_status = st->error_code ? rpc_status_from_errno(st->error_code) : 0;
}

/* Enroll (enroll.h): the request and its proof, or the certificate taken; refused once the
 * cell is enrolled, so the bootstrap's secret is of no use after its one enrollment. */
static int api_enroll(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		      ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__EnrollRequest *q = (const void *)req;
	Kiyot__Cell__V1__EnrollResponse *r = (void *)resp;
	const char *csr = NULL;
	char proof[65];

	r->cell_id = a->cfg.cell_id;
	if (!q->certificate[0]) {
		if (enroll_request(a->enroll, &csr, proof, err) < 0)
			return -err->code;
		r->csr = (char *)csr;
		r->proof = rpc_strdup(call, proof);
		return 0;
	}
	if (enroll_accept(a->enroll, q->certificate, err) < 0)
		return -err->code;
	log_info("cell %s enrolled: serving over TLS to kiyot's certificate only", a->cfg.cell_id);
	r->enrolled = 1;
	if (a->on_enrolled)
		a->on_enrolled(a);
	return 0;
}

static int api_hello(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	Kiyot__Cell__V1__HelloResponse *r = (void *)resp;

	(void)call;
	(void)req;
	(void)err;
	r->agent_version = KIYOT_VERSION;
	r->cell_id = a->cfg.cell_id;
	r->pod_uid = a->cfg.pod_uid;
	r->boot_time_ns = a->boot_ns;
	r->incarnation = a->incarnation;
	return 0;
}

static const char *nz(const char *s)
{
	return s && s[0] ? s : NULL;
}

static int api_pull_image(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			  ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__PullImageRequest *r = (const void *)req;
	Kiyot__Cell__V1__PullImageResponse *out = (void *)resp;
	struct image_auth auth = { 0 };
	struct image_info *info = NULL;

	if (!r->image[0])
		return err_set(err, EINVAL, "image: required");
	if (r->auth) {
		auth.username = nz(r->auth->username);
		auth.password = nz(r->auth->password);
		auth.auth = nz(r->auth->auth);
		auth.identity_token = nz(r->auth->identity_token);
		auth.registry_token = nz(r->auth->registry_token);
	}
	if (image_pull(a->images, r->image, &auth, &info, err) < 0)
		return -err->code;
	out->repo_digest = rpc_strdup(call, info->repo_digest);
	out->image_id = rpc_strdup(call, info->image_id);
	out->size = info->size;
	out->user = rpc_strdup(call, info->user);
	image_info_free(info);
	return 0;
}

static int api_apply(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__ApplyRequest *r = (const void *)req;
	Kiyot__Cell__V1__ApplyResponse *out = (void *)resp;
	struct unit_status *st = NULL;
	size_t n = 0;
	int64_t timeout = r->timeout_ms > 0 ? r->timeout_ms : 60000;

	if (!r->pod)
		return err_set(err, EINVAL, "pod: required");
	if (supervisor_apply(a->sup, r->pod, timeout, &st, &n, err) < 0)
		return -err->code;
	out->units = rpc_alloc(call, (n + 1) * sizeof(*out->units));
	for (size_t i = 0; i < n; i++) {
		Kiyot__Cell__V1__UnitStatus *w = rpc_alloc(call, sizeof(*w));

		agent_status_to_wire(&st[i], w);
		w->id = rpc_strdup(call, w->id);
		w->reason = rpc_strdup(call, w->reason);
		w->message = rpc_strdup(call, w->message);
		w->image_ref = rpc_strdup(call, w->image_ref);
		w->image_id = rpc_strdup(call, w->image_id);
		w->termination_message = rpc_strdup(call, w->termination_message);
		out->units[out->n_units++] = w;
	}
	unit_status_array_free(st, n);
	return 0;
}

static int api_exec_sync(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__ExecSyncRequest *r = (const void *)req;
	Kiyot__Cell__V1__ExecSyncResponse *out = (void *)resp;
	char **cmd = rpc_alloc(call, (r->n_cmd + 1) * sizeof(char *));
	char *o = NULL, *e = NULL;
	size_t ol = 0, el = 0;
	int code = 0;

	if (r->n_cmd == 0)
		return err_set(err, EINVAL, "cmd: required");
	for (size_t i = 0; i < r->n_cmd; i++)
		cmd[i] = r->cmd[i];
	if (supervisor_exec_sync(a->sup, r->unit_id, cmd, r->timeout_s, &o, &ol, &e, &el, &code,
				 err) < 0)
		return -err->code;
	out->stdout.data = (uint8_t *)rpc_strndup(call, o ? o : "", ol);
	out->stdout.len = ol;
	out->stderr.data = (uint8_t *)rpc_strndup(call, e ? e : "", el);
	out->stderr.len = el;
	out->exit_code = code;
	free(o);
	free(e);
	return 0;
}

static int api_write_volume(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			    ProtobufCMessage *resp, struct err *err)
{
	struct agent *a = svc;
	const Kiyot__Cell__V1__WriteVolumeRequest *r = (const void *)req;
	Kiyot__Cell__V1__WriteVolumeResponse *out = (void *)resp;
	_cleanup_free_ char *dir = xasprintf("%s/volumes", a->cfg.state_dir);
	unsigned written, removed;

	(void)call;
	if (volume_write(dir, r, &written, &removed, err) < 0)
		return -err->code;
	if (written || removed)
		log_info("volume %s: %u entries written, %u removed", r->volume, written, removed);
	out->written = written;
	out->removed = removed;
	return 0;
}

/*
 * The worker pools, by what their calls wait for, so that a cell's stalled pulls never delay
 * its exec probes, its stats, or starting a container whose image is there:
 *	fast   the agent's own state (Hello, Stats)
 *	exec   a command in a unit, up to its timeout (ExecSync)
 *	apply  the pod converging, volumes written (Apply, WriteVolume)
 *	pull   registries (PullImage); transfers are bounded further per cell and per registry
 *	       (registry.h), and a pull waiting for its turn holds one of these threads
 */
enum {
	POOL_FAST,
	POOL_EXEC,
	POOL_APPLY,
	POOL_PULL
};

static const struct rpc_pool pools[] = {
	[POOL_FAST] = { "fast", 4, 0 },
	[POOL_EXEC] = { "exec", 8, 0 },
	[POOL_APPLY] = { "apply", 4, 0 },
	[POOL_PULL] = { "pull", 16, 0 },
};

_Static_assert(sizeof(pools) / sizeof(pools[0]) <= RPC_MAX_POOLS, "too many worker pools");

#define METHOD(name, type, fn, flags, pool)                                                        \
	{                                                                                          \
		"/kiyot.cell.v1.CellAgent/" name, &kiyot__cell__v1__##type##_request__descriptor,  \
			&kiyot__cell__v1__##type##_response__descriptor, fn, flags, pool           \
	}

static const struct rpc_method methods[] = {
	METHOD("Hello", hello, api_hello, 0, POOL_FAST),
	METHOD("PullImage", pull_image, api_pull_image, 0, POOL_PULL),
	METHOD("Apply", apply, api_apply, 0, POOL_APPLY),
	{ "/kiyot.cell.v1.CellAgent/Watch", &kiyot__cell__v1__watch_request__descriptor,
	  &kiyot__cell__v1__watch_event__descriptor, api_watch, RPC_SERVER_STREAM, POOL_FAST },
	METHOD("ExecSync", exec_sync, api_exec_sync, 0, POOL_EXEC),
	METHOD("Stats", stats, api_stats, 0, POOL_FAST),
	{ "/kiyot.cell.v1.CellAgent/Exec", &kiyot__cell__v1__exec_input__descriptor,
	  &kiyot__cell__v1__exec_output__descriptor, api_exec, RPC_BIDI_STREAM, POOL_FAST },
	{ "/kiyot.cell.v1.CellAgent/PortForward", &kiyot__cell__v1__port_forward_input__descriptor,
	  &kiyot__cell__v1__port_forward_output__descriptor, api_port_forward, RPC_BIDI_STREAM,
	  POOL_FAST },
	{ "/kiyot.cell.v1.CellAgent/Attach", &kiyot__cell__v1__attach_input__descriptor,
	  &kiyot__cell__v1__attach_output__descriptor, api_attach, RPC_BIDI_STREAM, POOL_FAST },
	METHOD("WriteVolume", write_volume, api_write_volume, 0, POOL_APPLY),
	METHOD("Enroll", enroll, api_enroll, 0, POOL_FAST),
};

static const struct rpc_method enroll_methods[] = {
	METHOD("Enroll", enroll, api_enroll, 0, 0),
};

const struct rpc_method *agent_enroll_table(size_t *n)
{
	*n = 1;
	return enroll_methods;
}

const struct rpc_method *agent_method_table(size_t *n)
{
	*n = sizeof(methods) / sizeof(methods[0]);
	return methods;
}

const struct rpc_pool *agent_pool_table(size_t *n)
{
	*n = sizeof(pools) / sizeof(pools[0]);
	return pools;
}

/* The program of the units' shims: cell-shim next to the agent's binary (it loads two
 * libraries where the agent's loads some 90, ~1 ms of CPU an exec instead of ~20), else the
 * agent's binary itself, which runs the same code. The caller frees. */
static char *shim_program(const char *self)
{
	const char *slash = strrchr(self, '/');
	char *p = xasprintf("%.*scell-shim", slash ? (int)(slash - self + 1) : 0, self);

	if (access(p, X_OK) == 0)
		return p;
	free(p);
	return xstrdup(self);
}

int agent_open(struct agent *a, struct err *err)
{
	struct supervisor_config sc = { 0 };
	_cleanup_free_ char *images = xasprintf("%s/images", a->cfg.state_dir);
	_cleanup_free_ char *shim = shim_program(a->self_path);

	a->hub = watch_hub_new();
	reg_set_policy(&a->cfg.pulls);
	if (regconf_from_json(a->cfg.registries, &a->regconf, err) < 0)
		return err_wrap(err, "registries");
	if (image_store_new(images, a->regconf, &a->images, err) < 0)
		return -err->code;
	sc.state_dir = a->cfg.state_dir;
	sc.runtime = a->cfg.runtime;
	sc.shim = shim;
	sc.cgroup_parent = a->cgroup ? a->cgroup : "";
	sc.backoff_base_ms = a->cfg.restart_backoff_ms;
	sc.backoff_max_ms = 300000;
	sc.images = a->images;
	sc.cb.status = on_status;
	sc.cb.log = on_log;
	sc.cb.ctx = a;
	sc.pod_ip = a->ip;
	sc.host_netns = a->cfg.host_netns;
	sc.node_images = a->cfg.node_images;
	sc.host_mnt_ns = a->host_mnt_ns;
	if (supervisor_new(&sc, &a->sup, err) < 0)
		return -err->code;
	return 0;
}

void agent_close(struct agent *a)
{
	supervisor_free(a->sup);
	image_store_free(a->images);
	regconf_free(a->regconf);
	watch_hub_free(a->hub);
}
