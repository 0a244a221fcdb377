/*
 * cri_sandbox.c: the pod sandbox half of CRI's RuntimeService. One sandbox is one cell.
 */
#include "cri.h"

#include "cri_security.h"
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cells/cells.h"
#include "metrics/metrics.h"
#include "cells/cellsync.h"
#include "events.h"
#include "clock.h"
#include "cri_security.h"
#include "cri_validate.h"
#include "log.h"
#include "state/ctrlog.h"
#include "kube/events.h"
#include "kube/podobject.h"
#include "cells/provision.h"
#include "cells/usage_history.h"
#include "pool/pool.h"
#include "stream/server.h"
#include "xalloc.h"

#define CELL_ID_LEN 20

void **cri_map_dup(struct rpc_call *c, const ProtobufCMessageDescriptor *desc, void **src, size_t n)
{
	struct kv {
		ProtobufCMessage base;
		char *key;
		char *value;
	};
	void **out = rpc_alloc(c, (n + 1) * sizeof(void *));

	for (size_t i = 0; i < n; i++) {
		struct kv *e = rpc_msg_new(c, desc);
		const struct kv *s = src[i];

		e->key = rpc_strdup(c, s->key);
		e->value = rpc_strdup(c, s->value);
		out[i] = e;
	}
	return out;
}

int cri_labels_match(void **labels, size_t n_labels, void **selector, size_t n_selector)
{
	for (size_t i = 0; i < n_selector; i++) {
		const Runtime__V1__PodSandboxConfig__LabelsEntry *want = selector[i];
		const char *have = cri_map_get(labels, n_labels, want->key);

		if (!have || strcmp(have, want->value) != 0)
			return 0;
	}
	return 1;
}

/* The port mappings with a host port must name ports and an IPv4 host address, if any;
 * errors name the field. */
static int validate_port_mappings(const Runtime__V1__PodSandboxConfig *cfg, struct err *err)
{
	struct in_addr addr;

	for (size_t i = 0; i < cfg->n_port_mappings; i++) {
		const Runtime__V1__PortMapping *pm = cfg->port_mappings[i];

		if (pm->host_port == 0)
			continue; /* a container port only: nothing for the runtime to do */
		if (pm->host_port < 0 || pm->host_port > 65535)
			return err_set(err, EINVAL,
				       "port_mappings[%zu].host_port: %d is not a port (1-65535)",
				       i, pm->host_port);
		if (pm->container_port <= 0 || pm->container_port > 65535)
			return err_set(
				err, EINVAL,
				"port_mappings[%zu].container_port: %d is not a port (1-65535)", i,
				pm->container_port);
		if (pm->host_ip[0] && inet_pton(AF_INET, pm->host_ip, &addr) != 1)
			return err_set(err, EINVAL,
				       "port_mappings[%zu].host_ip: \"%s\" is not an IPv4 address "
				       "(cells have IPv4 addresses only)",
				       i, pm->host_ip);
	}
	return 0;
}

int cri_sandbox_host_ports(struct kiyot *k, const struct sandbox *sb, const char *cell_id,
			   const char *ip, struct err *err)
{
	const Runtime__V1__PodSandboxConfig *cfg = sb->config;
	const Runtime__V1__LinuxPodSandboxConfig *lx = cfg->linux;
	_cleanup_free_ struct cell_host_port *ports = NULL;
	_cleanup_free_ char *owner = NULL;
	size_t n = 0;

	if (!k->provider.ops->host_ports || !cfg->n_port_mappings ||
	    (lx && lx->security_context && lx->security_context->namespace_options &&
	     lx->security_context->namespace_options->network == RUNTIME__V1__NAMESPACE_MODE__NODE))
		return 0;
	ports = xcalloc(cfg->n_port_mappings, sizeof(*ports));
	for (size_t i = 0; i < cfg->n_port_mappings; i++) {
		const Runtime__V1__PortMapping *pm = cfg->port_mappings[i];

		if (pm->host_port <= 0)
			continue;
		ports[n].protocol = pm->protocol == RUNTIME__V1__PROTOCOL__UDP	  ? "udp"
				    : pm->protocol == RUNTIME__V1__PROTOCOL__SCTP ? "sctp"
										  : "tcp";
		ports[n].host_port = pm->host_port;
		ports[n].container_port = pm->container_port;
		ports[n].host_ip = pm->host_ip;
		n++;
	}
	if (n == 0)
		return 0;
	owner = xasprintf("%s/%s", cfg->metadata->namespace_, cfg->metadata->name);
	return k->provider.ops->host_ports(k->provider.self, cell_id, owner, ip, ports, n, err);
}

/* Checks what a sandbox must carry; errors name the field. */
static int validate_config(const Runtime__V1__PodSandboxConfig *cfg, struct err *err)
{
	if (!cfg)
		return err_set(err, EINVAL, "config: required");
	if (!cfg->metadata)
		return err_set(err, EINVAL, "config.metadata: required");
	if (!cfg->metadata->name[0])
		return err_set(err, EINVAL, "config.metadata.name: required");
	if (!cfg->metadata->namespace_[0])
		return err_set(err, EINVAL, "config.metadata.namespace: required");
	if (!cfg->metadata->uid[0])
		return err_set(err, EINVAL, "config.metadata.uid: required");
	if (validate_port_mappings(cfg, err) < 0)
		return -err->code;
	return cri_security_check_sandbox(cfg, err);
}

/* The sandbox of a pod's attempt, or NULL. Needs the records' lock. */
static struct sandbox *find_by_metadata(struct kiyot *k, const Runtime__V1__PodSandboxMetadata *m)
{
	struct sandbox **v, *hit = NULL;
	size_t n = records_sandboxes(k->records, &v);

	for (size_t i = 0; i < n && !hit; i++) {
		const Runtime__V1__PodSandboxMetadata *o = v[i]->config->metadata;

		if (strcmp(o->uid, m->uid) == 0 && strcmp(o->name, m->name) == 0 &&
		    strcmp(o->namespace_, m->namespace_) == 0 && o->attempt == m->attempt)
			hit = v[i];
	}
	sandboxes_put(v, n);
	return hit;
}

static void set_field(char **dst, const char *v)
{
	free(*dst);
	*dst = xstrdup(v);
}

/* Undoes a RunPodSandbox that failed after its record was made: the cell and the record go.
 * The caller's reference on sb stays the caller's. */
static void run_undo(struct kiyot *k, struct sandbox *sb)
{
	struct err err = ERR_INIT;

	if (cells_terminate(k->cells, sb->cell_id, &err) < 0)
		log_error("sandbox %s: %s", sb->id, err.msg);
	records_lock(k->records);
	sandbox_end(k->records, sb);
	if (records_remove_sandbox(k->records, sb, &err) < 0)
		log_error("sandbox %s: %s", sb->id, err.msg);
	records_unlock(k->records);
	cellsync_kick(k->cellsync);
}

/* A standby cell now runs the sandbox's pod: the provider marks it the pod's (EC2: its tags).
 * Only the marks fail here, which the pod does not need: logged. */
static void assign_pod(struct kiyot *k, const struct sandbox *sb, const struct cell_spec *spec)
{
	struct err err = ERR_INIT;

	if (k->provider.ops->assign && k->provider.ops->assign(k->provider.self, spec, &err) < 0)
		log_warn("sandbox %s: marking standby cell %s as its pod's: %s", sb->id,
			 sb->cell_id, err.msg);
}

/* The Pod object reader, made at the first RunPodSandbox (outside the lock: it reads the
 * kubeconfig); a racing second one is dropped. */
static struct podobject_reader *pod_reader(struct kiyot *k)
{
	struct podobject_reader *r, *made = NULL;

	records_lock(k->records);
	r = k->pod_reader;
	records_unlock(k->records);
	if (r)
		return r;
	made = podobject_reader_new(k->cfg.kubeconfig, 0);
	records_lock(k->records);
	if (!k->pod_reader) {
		k->pod_reader = made;
		made = NULL;
	}
	r = k->pod_reader;
	records_unlock(k->records);
	podobject_reader_free(made);
	return r;
}

/* The sandbox's Pod object from the API server, or NULL when there is none to use: the
 * sandbox config is the fallback, with a warning saying why (no API server: silently). */
static struct podspec *pod_object(struct kiyot *k, const Runtime__V1__PodSandboxMetadata *md)
{
	struct podobject_reader *r = pod_reader(k);
	struct podspec *pod = NULL;
	struct err err = ERR_INIT;
	int64_t t0 = clock_mono_ns();

	if (!podobject_reader_enabled(r))
		return NULL;
	if (podobject_get(r, md->namespace_, md->name, md->uid, &pod, &err) < 0) {
		log_warn("pod %s/%s: sizing from the sandbox config, not the Pod object: %s",
			 md->namespace_, md->name, err.msg);
		return NULL;
	}
	log_debug("pod %s/%s: Pod object read in %lld ms", md->namespace_, md->name,
		  (long long)((clock_mono_ns() - t0) / 1000000));
	return pod;
}

/* The images to pre-pull as soon as the cell serves, from the Pod object (a JSON array of
 * strings), or NULL when there are none: the cell pre-pulls them, or the node into its store
 * when it keeps the images (once the cell is up: a local registry mirror may be on the cells'
 * bridge, which the first cell makes). */
static json_t *pod_prepull(const struct podspec *pod, const Runtime__V1__PodSandboxMetadata *md)
{
	size_t dropped = 0;
	json_t *list = pod ? podobject_prepull(pod, &dropped) : NULL;

	if (dropped)
		log_info("pod %s/%s: %zu images are not pre-pulled (over %d images or %d bytes, "
			 "or not a reference); the kubelet's pulls fetch them",
			 md->namespace_, md->name, dropped, PODOBJECT_MAX_PREPULL,
			 PODOBJECT_MAX_PREPULL_BYTES);
	if (json_array_size(list) == 0) {
		json_decref(list);
		return NULL;
	}
	return list;
}

/* An Event on the pod of md and, with cell_id, on its Cell object: what kubectl describe pod
 * and kubectl get events show of its cell (kube/events.h; nothing without an API server). */
static void __attribute__((format(printf, 6, 7)))
pod_event(struct kiyot *k, const Runtime__V1__PodSandboxMetadata *md, const char *cell_id,
	  enum kube_event_type type, const char *reason, const char *fmt, ...)
{
	const struct kube_ref pod = { "Pod", "v1", md->namespace_, md->name, md->uid };
	const struct kube_ref cell = { "Cell", "kiyot.elotl.co/v1", "", cell_id, NULL };
	va_list ap;

	if (!k->kube_events)
		return;
	va_start(ap, fmt);
	kube_veventf(k->kube_events, &pod, type, reason, fmt, ap);
	va_end(ap);
	if (!cell_id || !cell_id[0])
		return;
	va_start(ap, fmt);
	kube_veventf(k->kube_events, &cell, type, reason, fmt, ap);
	va_end(ap);
}

/* What a RunPodSandbox carries from one step to the next (run_*). */
struct pod_run {
	struct kiyot *k;
	const Runtime__V1__PodSandboxConfig *config;
	const char *runtime_handler;
	struct sandbox *sb; /* referenced; NULL until found (resumed) or made */
	struct size_choice choice;
	struct cell_launched launched;
	json_t *prepull; /* the Pod object's images, or NULL */
	char *ip;	 /* the cell's address once claimed or launched */
	bool claimed;	 /* the cell is a standby cell of the pool */
};

static void run_release(struct pod_run *run)
{
	if (run->sb)
		sandbox_put(run->sb);
	size_choice_release(&run->choice);
	cell_launched_release(&run->launched);
	json_decref(run->prepull);
	free(run->ip);
}

/*
 * A retried RunPodSandbox is answered with the sandbox already made: 1, its id in out (ready)
 * or an error saying why not (still starting, stopped). A launch a crash cut short is resumed
 * with its record and cell id, so the provider's idempotent launch finds the cell (or
 * instance) already made: run->sb, launching. 0 to go on.
 */
static int run_find(struct pod_run *run, struct rpc_call *call,
		    Runtime__V1__RunPodSandboxResponse *out, struct err *err)
{
	struct kiyot *k = run->k;
	const Runtime__V1__PodSandboxMetadata *md = run->config->metadata;
	struct sandbox *dup;
	bool launching;
	int ret = 0;

	records_lock(k->records);
	dup = find_by_metadata(k, md);
	launching = dup && dup->phase == SANDBOX_LAUNCHING;
	if (dup && (dup->state == SANDBOX_READY || launching || !dup->cell_id[0])) {
		out->pod_sandbox_id = rpc_strdup(call, dup->id);
		ret = dup->state == SANDBOX_READY
			      ? 1
			      : err_set(err, launching ? EAGAIN : EEXIST,
					"pod %s/%s attempt %u already has sandbox %s, which is %s",
					md->namespace_, md->name, md->attempt, dup->id,
					launching ? "still starting; retry"
						  : "stopped; remove it first");
		records_unlock(k->records);
		return ret;
	}
	/* not while the gc ends it; the handler holds a reference on its sandbox until it
	 * answers */
	if (dup && sandbox_begin(k->records, dup, SANDBOX_LAUNCHING, err) < 0) {
		records_unlock(k->records);
		return -err->code;
	}
	run->sb = dup ? sandbox_get(dup) : NULL;
	records_unlock(k->records);
	if (run->sb) /* (a stop that finds it launching before this waits for it) */
		cells_launch_begin(k->cells, run->sb->cell_id);
	return 0;
}

/* Sizes the pod from its Pod object and annotations (run->choice, run->prepull). A failure
 * ends a resumed launch, which stays to be resumed again. */
static int run_size(struct pod_run *run, struct err *err)
{
	struct kiyot *k = run->k;
	struct podspec *pod = pod_object(k, run->config->metadata);
	int64_t t0 = clock_mono_ns();
	int ret;

	run->prepull = pod_prepull(pod, run->config->metadata);
	ret = provision_size_pod(k, run->config, pod, &run->choice, err);
	metrics_launch_step("sizing", (double)(clock_mono_ns() - t0) / 1e9);
	podspec_free(pod);
	if (ret == 0)
		return 0;
	metrics_launch_failure("sizing");
	pod_event(k, run->config->metadata, NULL, KUBE_EVENT_WARNING, "CellSizingFailed", "%s",
		  err->msg);
	if (run->sb) {
		records_lock(k->records);
		sandbox_end(k->records, run->sb);
		records_unlock(k->records);
		cells_launch_end(k->cells, run->sb->cell_id);
	}
	return -err->code;
}

/*
 * The new sandbox's record, stored before anything is launched so that a crash leaves a
 * record that owns the cell. It takes a standby cell of exactly sizing's choice when the pool
 * has one (run->claimed, run->ip): the pool records the claim before the record names the
 * cell. On error run->sb is listed and launching, for run_fail to undo.
 */
static int run_record(struct pod_run *run, struct err *err)
{
	struct kiyot *k = run->k;
	const struct size_choice *choice = &run->choice;
	struct err cerr = ERR_INIT;
	struct sandbox *sb = xcalloc(1, sizeof(*sb));
	int ret;

	sb->id = kiyot_new_id();
	sb->config = cri_msg_copy(&run->config->base);
	sb->runtime_handler = xstrdup(run->runtime_handler);
	sb->created_ns = clock_now_ns();
	sb->ip = xstrdup("");
	sb->instance_type = xstrdup(choice->instance_type);
	sb->sizing_reason = xstrdup(choice->reason);
	sandbox_launching(sb);
	run->sb = sb;
	pool_arrival(k->pool, choice->instance_type, choice->spot);
	run->claimed = k->pool && pool_claim(k->pool, choice->instance_type, choice->spot, sb->id,
					     &sb->cell_id, &run->ip, &cerr) == 0;
	if (!run->claimed)
		sb->cell_id = xstrndup(sb->id, CELL_ID_LEN);
	/* a stop that finds the record launching finds its launch to cancel */
	cells_launch_begin(k->cells, sb->cell_id);
	records_lock(k->records);
	records_add_sandbox(k->records, sandbox_get(sb));
	ret = records_save_sandbox(k->records, sb, err);
	records_unlock(k->records);
	if (ret < 0 && run->claimed)
		pool_claim_abort(k->pool, sb->cell_id);
	else if (run->claimed)
		pool_claim_commit(k->pool, sb->cell_id, sb->id);
	return ret;
}

/* Launches the sandbox's cell and waits for its agent, or readies the standby cell it
 * claimed: run->ip, run->launched. */
static int run_launch(struct pod_run *run, struct err *err)
{
	struct kiyot *k = run->k;
	struct sandbox *sb = run->sb;
	const struct size_choice *choice = &run->choice;
	struct cell_spec creq = { 0 };
	_cleanup_free_ const char **prepull_refs = NULL;
	_cleanup_free_ const char **label_keys = NULL;
	_cleanup_free_ const char **label_values = NULL;
	int64_t t0;
	int ret;

	if (choice->burst_owner) { /* its usage counts for its owner's next pods */
		struct err herr = ERR_INIT;

		if (usage_history_attach(k->store, sb->cell_id, choice->burst_owner, &herr) < 0)
			log_warn("sandbox %s: burst sizing will not learn from it: %s", sb->id,
				 herr.msg);
	}
	creq.cell_id = sb->cell_id;
	creq.pod_uid = sb->config->metadata->uid;
	creq.pod_name = sb->config->metadata->name;
	creq.pod_namespace = sb->config->metadata->namespace_;
	creq.instance_type = choice->instance_type;
	creq.cpus = choice->cpus;
	creq.memory_bytes = choice->memory_bytes;
	creq.spot = choice->spot;
	creq.arch = choice->arch;
	creq.fallback_types = (const char *const *)choice->alternatives;
	creq.n_fallback_types = choice->n_alternatives;
	creq.zone_prices = choice->zone_prices;
	creq.n_zone_prices = choice->n_zone_prices;
	creq.n_prepull = k->node_images ? 0 : json_array_size(run->prepull);
	prepull_refs = xcalloc(creq.n_prepull + 1, sizeof(*prepull_refs));
	for (size_t i = 0; i < creq.n_prepull; i++)
		prepull_refs[i] = json_string_value(json_array_get(run->prepull, i));
	creq.prepull = prepull_refs;
	/* what the pool's standby cells of this shape pre-pull */
	pool_images(k->pool, choice->instance_type, choice->spot, prepull_refs, creq.n_prepull);
	label_keys = xcalloc(sb->config->n_labels + 1, sizeof(*label_keys));
	label_values = xcalloc(sb->config->n_labels + 1, sizeof(*label_values));
	for (size_t i = 0; i < sb->config->n_labels; i++) {
		label_keys[i] = sb->config->labels[i]->key;
		label_values[i] = sb->config->labels[i]->value;
	}
	creq.label_keys = label_keys;
	creq.label_values = label_values;
	creq.n_labels = sb->config->n_labels;
	cellsync_kick(k->cellsync);
	if (run->claimed) {
		ret = cells_launch_claimed(k->cells, sb->cell_id, err);
	} else {
		t0 = clock_mono_ns();
		ret = cells_launch(k->cells, &creq, &run->ip, &run->launched, err);
		if (ret == 0)
			pool_launch_time(k->pool, choice->instance_type, choice->spot,
					 (double)(clock_mono_ns() - t0) / 1e9);
	}
	if (ret == 0 && pool_is_standby_id(sb->cell_id))
		assign_pod(k, sb, &creq); /* claimed now, or before a crash */
	return ret;
}

/* The cell serves: the record notes a capacity fallback (another type than sizing's choice,
 * and why), the hostPorts are made, and the sandbox becomes ready (stored before its launch
 * ends). */
static int run_ready(struct pod_run *run, struct err *err)
{
	struct kiyot *k = run->k;
	struct sandbox *sb = run->sb;
	const struct cell_launched *launched = &run->launched;
	int ret;

	records_lock(k->records);
	if (launched->instance_type && strcmp(launched->instance_type, sb->instance_type) != 0)
		set_field(&sb->instance_type, launched->instance_type);
	if (launched->note && !strstr(sb->sizing_reason, launched->note)) {
		char *reason = xasprintf("%s; %s", sb->sizing_reason, launched->note);

		free(sb->sizing_reason);
		sb->sizing_reason = reason;
		pod_event(k, sb->config->metadata, sb->cell_id, KUBE_EVENT_WARNING,
			  "CapacityFallback", "cell %s: %s", sb->cell_id, launched->note);
	}
	records_unlock(k->records);
	ret = cri_sandbox_host_ports(k, sb, sb->cell_id, run->ip, err); /* fixed while launching */
	if (ret < 0)
		return ret;
	/* the launch ends once the ready record is stored: when that fails the sandbox is still
	 * launching, and the undo ends it (run_undo), not a stop that came meanwhile */
	records_lock(k->records);
	ret = sandbox_launched(k->records, sb, run->ip, err);
	records_unlock(k->records);
	cellsync_kick(k->cellsync);
	if (ret < 0)
		return ret;
	cells_launch_end(k->cells, sb->cell_id);
	log_info("sandbox %s: pod %s/%s in cell %s (%s, %s%s)", sb->id,
		 sb->config->metadata->namespace_, sb->config->metadata->name, sb->cell_id,
		 run->choice.instance_type, sb->ip, run->claimed ? ", a standby cell" : "");
	pod_event(k, sb->config->metadata, sb->cell_id, KUBE_EVENT_NORMAL, "CellLaunched",
		  "cell %s launched: %s, %s, IP %s (%s)", sb->cell_id, sb->instance_type,
		  run->choice.spot ? "spot" : "on-demand", sb->ip, sb->sizing_reason);
	if (k->node_images && run->prepull)
		kiyot_node_prepull(k, run->prepull);
	return 0;
}

/*
 * A RunPodSandbox failed after its record was made. When its caller went away the record and
 * its cell stay as a crash leaves them, for the next RunPodSandbox of the pod (or the next
 * kiyot) to resume; otherwise the cell and the record go (run_undo).
 */
static int run_fail(struct pod_run *run, struct err *err)
{
	struct kiyot *k = run->k;
	struct sandbox *sb = run->sb;

	err_wrap(err, "pod %s/%s", run->config->metadata->namespace_, run->config->metadata->name);
	if (run->launched.kept) {
		log_info("RunPodSandbox abandoned by its caller: %s; sandbox %s stays to be "
			 "resumed",
			 err->msg, sb->id);
		records_lock(k->records);
		sandbox_end(k->records, sb);
		records_unlock(k->records);
		cells_launch_end(k->cells, sb->cell_id);
		return -err->code;
	}
	log_warn("RunPodSandbox failed: %s", err->msg); /* the kubelet only retries */
	if (err->code != ECANCELED)			/* not when the pod was stopped meanwhile */
		pod_event(k, sb->config->metadata, NULL, KUBE_EVENT_WARNING, "CellLaunchFailed",
			  "%s", err->msg);
	run_undo(k, sb);
	cells_launch_end(k->cells, sb->cell_id);
	return -err->code;
}

/*
 * RunPodSandbox: validated, answered from the sandbox already made when it is a retry, sized,
 * recorded (or a launch a crash cut short resumed), launched (or a standby cell claimed), and
 * made ready; kiyot/README.md tells the flow.
 */
int cri_run_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__RunPodSandboxRequest *r = (const void *)req;
	Runtime__V1__RunPodSandboxResponse *out = (void *)resp;
	struct pod_run run = { .k = svc,
			       .config = r->config,
			       .runtime_handler = r->runtime_handler };
	int ret;

	if (cri_validate(req, err) < 0)
		return -err->code;
	if (validate_config(r->config, err) < 0)
		return -err->code;
	if (r->runtime_handler[0] && strcmp(r->runtime_handler, "kiyot") != 0)
		return err_set(err, EINVAL,
			       "runtime_handler \"%s\" is not known; kiyot has only the default "
			       "handler (\"\" or \"kiyot\")",
			       r->runtime_handler);
	ret = run_find(&run, call, out, err);
	if (ret != 0)
		return ret < 0 ? ret : 0;
	if (run_size(&run, err) < 0) {
		run_release(&run);
		return -err->code;
	}
	if (run.sb)
		log_info("sandbox %s: resuming an interrupted launch of cell %s", run.sb->id,
			 run.sb->cell_id);
	else if (run_record(&run, err) < 0)
		goto fail;
	if (run_launch(&run, err) < 0 || run_ready(&run, err) < 0)
		goto fail;
	out->pod_sandbox_id = rpc_strdup(call, run.sb->id);
	run_release(&run);
	return 0;
fail:
	ret = run_fail(&run, err);
	run_release(&run);
	return ret;
}

void kiyot_sandbox_lost(struct kiyot *k, struct sandbox *sb, const char *reason)
{
	int64_t now = clock_now_ns();
	struct err err = ERR_INIT;
	struct container **cs;
	size_t n = records_containers(k->records, sb->id, &cs);

	if (strcmp(reason, "CellLost") == 0)
		pod_event(k, sb->config->metadata, sb->cell_id, KUBE_EVENT_WARNING, "CellLost",
			  "cell %s is gone: its containers are exited and the sandbox not ready "
			  "(the kubelet makes the pod a new one)",
			  sb->cell_id);
	sandbox_not_ready(sb);
	for (size_t i = 0; i < n; i++) {
		struct container *c = cs[i];

		if (c->state == CTR_EXITED)
			continue;
		if (c->state == CTR_RUNNING) {
			c->exit_code = 137;
			c->finished_ns = now;
		} else {
			c->exit_code = 0;
		}
		c->state = CTR_EXITED;
		free(c->reason);
		c->reason = xstrdup(reason);
		c->desired = DESIRED_STOPPED;
		if (records_save_container(k->records, c, &err) < 0)
			log_error("container %s: %s", c->id, err.msg);
		if (c->log)
			ctrlog_idle(c->log);
		events_publish_container(k, c);
	}
	containers_put(cs, n);
	if (records_save_sandbox(k->records, sb, &err) < 0)
		log_error("sandbox %s: %s", sb->id, err.msg);
}

/* Removes a stopped sandbox's records and its containers'. Needs the records' lock. */
static int sandbox_remove_locked(struct kiyot *k, struct sandbox *sb, struct err *err)
{
	struct container **cs;
	size_t n = records_containers(k->records, sb->id, &cs);

	for (size_t i = 0; i < n; i++) {
		events_publish_deleted(k, cs[i]);
		if (records_remove_container(k->records, cs[i], err) < 0)
			log_error("container %s: %s", cs[i]->id, err->msg);
	}
	containers_put(cs, n);
	return records_remove_sandbox(k->records, sb, err);
}

/* How long a stop that finds a sandbox launching, with a launch it cannot cancel (one that
 * is beginning, or whose cell just came up), waits before it looks again. */
#define STOP_LAUNCHING_POLL_US 10000

/*
 * A stop of a sandbox whose launch it cancelled (cells_launch_cancel): the cell is terminated
 * now, and the waiting RunPodSandbox ends CANCELLED and removes the record (its undo).
 */
static int stop_launching(struct kiyot *k, const char *cell_id, const char *id, struct err *err)
{
	if (cells_terminate(k->cells, cell_id, err) < 0)
		return err_wrap(err, "stop pod sandbox %s while it starts", id);
	log_info("sandbox %s: stopped while starting: its launch is cancelled and cell %s "
		 "terminated",
		 id, cell_id);
	return 0;
}

/*
 * Stops the pod sb (the caller holds a reference; id is the one its request named): its cell
 * is terminated, which ends every unit in it. With remove, the records go too, before any
 * other handler may begin with it; one removed meanwhile is then no error. A sandbox still
 * launching has its launch cancelled and its cell terminated; a launch that ends as the stop
 * comes (its cell came up) is waited for, and its cell then stopped as a running one.
 */
static int sandbox_stop(struct kiyot *k, struct sandbox *sb, const char *id, bool remove,
			struct err *err)
{
	char *cell_id;
	int ret;

	records_lock(k->records);
	/* not while RunPodSandbox still works on this record (and its cell) */
	while ((ret = sandbox_begin(k->records, sb, SANDBOX_STOPPING, err)) == -EAGAIN &&
	       sb->phase == SANDBOX_LAUNCHING) {
		cell_id = xstrdup(sb->cell_id);
		records_unlock(k->records);
		err_clear(err);
		if (cells_launch_cancel(k->cells, cell_id) == CELLS_LAUNCH_CANCELLED) {
			ret = stop_launching(k, cell_id, id, err);
			free(cell_id);
			return ret;
		}
		free(cell_id);
		usleep(STOP_LAUNCHING_POLL_US);
		records_lock(k->records);
	}
	cell_id = ret == 0 ? xstrdup(sb->cell_id) : NULL;
	records_unlock(k->records);
	if (ret < 0) {
		if (ret != -ENOENT || !remove)
			return ret;
		err_clear(err); /* removed meanwhile: removal is idempotent */
		return 0;
	}
	if (cell_id[0] && cells_terminate(k->cells, cell_id, err) < 0)
		ret = err_wrap(err, "stop pod sandbox %s", id);
	free(cell_id);
	records_lock(k->records);
	if (ret == 0 && sandbox_listed(sb)) {
		kiyot_sandbox_lost(k, sb, "PodSandboxStopped");
		sb->cell_id[0] = '\0';
		ret = records_save_sandbox(k->records, sb, err);
		if (ret == 0 && remove)
			ret = sandbox_remove_locked(k, sb, err);
	}
	sandbox_end(k->records, sb);
	records_unlock(k->records);
	cellsync_kick(k->cellsync);
	return ret;
}

/* The sandbox id names, with a reference, or NULL. */
static struct sandbox *sandbox_lookup(struct kiyot *k, const char *id)
{
	struct sandbox *sb;

	records_lock(k->records);
	sb = records_sandbox(k->records, id);
	if (sb)
		sandbox_get(sb);
	records_unlock(k->records);
	return sb;
}

int cri_stop_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__StopPodSandboxRequest *r = (const void *)req;
	struct sandbox *sb = sandbox_lookup(svc, r->pod_sandbox_id);
	int ret;

	(void)call;
	(void)resp;
	if (!sb)
		return err_set(err, ENOENT, "pod sandbox %s not found", r->pod_sandbox_id);
	ret = sandbox_stop(svc, sb, r->pod_sandbox_id, false, err);
	sandbox_put(sb);
	return ret;
}

int cri_remove_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__RemovePodSandboxRequest *r = (const void *)req;
	struct sandbox *sb = sandbox_lookup(svc, r->pod_sandbox_id);
	int ret;

	(void)call;
	(void)resp;
	if (!sb)
		return 0; /* already removed: removal is idempotent */
	ret = sandbox_stop(svc, sb, r->pod_sandbox_id, true, err);
	sandbox_put(sb);
	return ret;
}

/* The sandbox as the list and status answers show it. */
static Runtime__V1__PodSandboxMetadata *metadata_dup(struct rpc_call *call,
						     const Runtime__V1__PodSandboxMetadata *m)
{
	Runtime__V1__PodSandboxMetadata *o =
		rpc_msg_new(call, &runtime__v1__pod_sandbox_metadata__descriptor);

	o->name = rpc_strdup(call, m->name);
	o->uid = rpc_strdup(call, m->uid);
	o->namespace_ = rpc_strdup(call, m->namespace_);
	o->attempt = m->attempt;
	return o;
}

int cri_pod_sandbox_status(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			   ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__PodSandboxStatusRequest *r = (const void *)req;
	Runtime__V1__PodSandboxStatusResponse *out = (void *)resp;
	struct kiyot *k = svc;
	Runtime__V1__PodSandboxStatus *st;
	_cleanup_free_ char *cell = NULL;
	struct sandbox *sb;
	json_t *j = NULL;

	if (!cri_records_lock(k, call))
		return RPC_NEEDS_WORKER;
	sb = records_sandbox(k->records, r->pod_sandbox_id);
	if (!sb) {
		records_unlock(k->records);
		return err_set(err, ENOENT, "pod sandbox %s not found", r->pod_sandbox_id);
	}
	st = rpc_msg_new(call, &runtime__v1__pod_sandbox_status__descriptor);
	st->id = rpc_strdup(call, sb->id);
	st->metadata = metadata_dup(call, sb->config->metadata);
	st->state = sb->state == SANDBOX_READY ? RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
					       : RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
	st->created_at = sb->created_ns;
	st->network = rpc_msg_new(call, &runtime__v1__pod_sandbox_network_status__descriptor);
	st->network->ip = rpc_strdup(call, sb->state == SANDBOX_READY ? sb->ip : "");
	st->linux = rpc_msg_new(call, &runtime__v1__linux_pod_sandbox_status__descriptor);
	st->linux->namespaces = rpc_msg_new(call, &runtime__v1__namespace__descriptor);
	st->linux->namespaces->options =
		rpc_msg_new(call, &runtime__v1__namespace_option__descriptor);
	if (sb->config->linux && sb->config->linux->security_context &&
	    sb->config->linux->security_context->namespace_options) {
		const Runtime__V1__NamespaceOption *no =
			sb->config->linux->security_context->namespace_options;

		st->linux->namespaces->options->network = no->network;
		st->linux->namespaces->options->pid = no->pid;
		st->linux->namespaces->options->ipc = no->ipc;
	}
	st->n_labels = sb->config->n_labels;
	st->labels = (void *)cri_map_dup(call,
					 &runtime__v1__pod_sandbox_status__labels_entry__descriptor,
					 (void **)sb->config->labels, sb->config->n_labels);
	st->n_annotations = sb->config->n_annotations;
	st->annotations = (void *)cri_map_dup(
		call, &runtime__v1__pod_sandbox_status__annotations_entry__descriptor,
		(void **)sb->config->annotations, sb->config->n_annotations);
	st->runtime_handler = rpc_strdup(call, sb->runtime_handler);
	out->status = st;
	if (r->verbose) {
		j = json_pack("{s:s, s:s, s:s, s:s}", "cellId", sb->cell_id, "instanceType",
			      sb->instance_type, "ip", sb->ip, "sizingReason", sb->sizing_reason);
		if (sb->state == SANDBOX_READY && sb->cell_id[0])
			cell = xstrdup(sb->cell_id);
	}
	records_unlock(k->records);
	if (r->verbose) {
		Runtime__V1__PodSandboxStatusResponse__InfoEntry *e = rpc_msg_new(
			call, &runtime__v1__pod_sandbox_status_response__info_entry__descriptor);
		struct err verr = ERR_INIT;
		/* the release of the cell's agent (asked of it when not known: outside the lock,
		 * and never on the thread that took the call) */
		_cleanup_free_ char *agent = !cell ? NULL
					     : rpc_inline(call)
						     ? cells_agent_version_known(k->cells, cell)
						     : cells_agent_version(k->cells, cell, &verr);
		char *info;

		if (cell && !agent && rpc_inline(call)) {
			json_decref(j);
			return RPC_NEEDS_WORKER;
		}

		if (j && agent)
			json_object_set_new(j, "agentVersion", json_string(agent));
		info = j ? json_dumps(j, JSON_COMPACT) : NULL;
		json_decref(j);
		e->key = rpc_strdup(call, "info");
		e->value = rpc_strdup(call, info ? info : "{}");
		free(info);
		out->info = rpc_alloc(call, sizeof(*out->info));
		out->info[0] = e;
		out->n_info = 1;
	}
	return 0;
}

static int sandbox_matches(const struct sandbox *sb, const Runtime__V1__PodSandboxFilter *f)
{
	if (!f)
		return 1;
	if (f->id[0] && strncmp(sb->id, f->id, strlen(f->id)) != 0)
		return 0;
	if (f->state && (int)f->state->state != (int)sb->state)
		return 0;
	return cri_labels_match((void **)sb->config->labels, sb->config->n_labels,
				(void **)f->label_selector, f->n_label_selector);
}

int cri_list_pod_sandbox(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ListPodSandboxRequest *r = (const void *)req;
	Runtime__V1__ListPodSandboxResponse *out = (void *)resp;
	struct kiyot *k = svc;
	struct sandbox **sbs;
	size_t n;

	(void)err;
	if (!cri_records_lock(k, call))
		return RPC_NEEDS_WORKER;
	n = records_sandboxes(k->records, &sbs);
	out->items = rpc_alloc(call, (n + 1) * sizeof(*out->items));
	for (size_t i = 0; i < n; i++) {
		const struct sandbox *sb = sbs[i];
		Runtime__V1__PodSandbox *p;

		if (!sandbox_matches(sb, r->filter))
			continue;
		p = rpc_msg_new(call, &runtime__v1__pod_sandbox__descriptor);
		p->id = rpc_strdup(call, sb->id);
		p->metadata = metadata_dup(call, sb->config->metadata);
		p->state = sb->state == SANDBOX_READY
				   ? RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY
				   : RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_NOTREADY;
		p->created_at = sb->created_ns;
		p->n_labels = sb->config->n_labels;
		p->labels = (void *)cri_map_dup(call,
						&runtime__v1__pod_sandbox__labels_entry__descriptor,
						(void **)sb->config->labels, sb->config->n_labels);
		p->n_annotations = sb->config->n_annotations;
		p->annotations = (void *)cri_map_dup(
			call, &runtime__v1__pod_sandbox__annotations_entry__descriptor,
			(void **)sb->config->annotations, sb->config->n_annotations);
		p->runtime_handler = rpc_strdup(call, sb->runtime_handler);
		out->items[out->n_items++] = p;
	}
	records_unlock(k->records);
	sandboxes_put(sbs, n);
	return 0;
}

/* A URL on the streaming server for connections to the pod's ports (kubectl port-forward). */
int cri_port_forward(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		     ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__PortForwardRequest *r = (const void *)req;
	Runtime__V1__PortForwardResponse *out = (void *)resp;
	struct stream_request sr = { .kind = STREAM_PORTFORWARD };
	struct kiyot *k = svc;
	struct sandbox *sb;
	_cleanup_free_ char *cell_id = NULL, *url = NULL;
	bool ready;

	if (cri_validate(req, err) < 0)
		return -err->code;
	for (size_t i = 0; i < r->n_port; i++)
		if (r->port[i] < 1 || r->port[i] > 65535)
			return err_set(err, EINVAL, "port: %d is not a TCP port", r->port[i]);
	records_lock(k->records);
	sb = records_sandbox(k->records, r->pod_sandbox_id);
	ready = sb && sb->state == SANDBOX_READY;
	if (ready) {
		const Runtime__V1__LinuxPodSandboxConfig *lx = sb->config->linux;

		cell_id = xstrdup(sb->cell_id);
		sr.host_network = lx && lx->security_context &&
				  lx->security_context->namespace_options &&
				  lx->security_context->namespace_options->network ==
					  RUNTIME__V1__NAMESPACE_MODE__NODE;
	}
	records_unlock(k->records);
	if (!sb)
		return err_set(err, ENOENT, "pod sandbox %s not found", r->pod_sandbox_id);
	if (!ready)
		return err_set(err, EBUSY, "pod sandbox %s is not ready", r->pod_sandbox_id);
	sr.cell_id = cell_id;
	sr.ports = r->port;
	sr.n_ports = r->n_port;
	url = stream_server_url(k->stream, &sr);
	out->url = rpc_strdup(call, url);
	return 0;
}

/* A spot interruption's containers end this long before EC2 acts: their stop's own answer,
 * and the kubelet's StopPodSandbox, come in that time. */
#define INTERRUPT_MARGIN_S 15
/* The grace of a pod whose Pod object cannot be read (Kubernetes' default). */
#define INTERRUPT_DEFAULT_GRACE_S 30

/* Whether the sandbox's pod asked for spot (its launch-type annotation). */
static bool sandbox_launch_spot(const struct sandbox *sb)
{
	const char *lt = cri_map_get((void **)sb->config->annotations, sb->config->n_annotations,
				     ANN_LAUNCH_TYPE);

	return lt && strcmp(lt, "spot") == 0;
}

/* The sandbox whose cell is cell_id and still runs it, with a reference, or NULL. Needs
 * the records' lock. */
static struct sandbox *sandbox_of_cell(struct kiyot *k, const char *cell_id)
{
	struct sandbox **v, *hit = NULL;
	size_t n = records_sandboxes(k->records, &v);

	for (size_t i = 0; i < n && !hit; i++)
		if (strcmp(v[i]->cell_id, cell_id) == 0)
			hit = sandbox_get(v[i]);
	sandboxes_put(v, n);
	return hit;
}

/* How long the pod's containers may take to stop for an interruption at deadline_ns (Unix
 * time): the pod's terminationGracePeriodSeconds, but no later than INTERRUPT_MARGIN_S before
 * the deadline. */
static int64_t interruption_grace(struct kiyot *k, const struct sandbox *sb, int64_t deadline_ns)
{
	struct podspec *pod = pod_object(k, sb->config->metadata);
	int64_t grace = pod ? pod->termination_grace_period_seconds : INTERRUPT_DEFAULT_GRACE_S;
	int64_t left = (deadline_ns - clock_now_ns()) / 1000000000LL - INTERRUPT_MARGIN_S;

	podspec_free(pod);
	if (grace > left)
		grace = left;
	return grace > 0 ? grace : 0;
}

void kiyot_on_interruption(struct kiyot *k, const char *cell_id, const struct cell_interruption *in)
{
	struct err err = ERR_INIT;
	struct container **cs;
	struct sandbox *sb;
	int64_t grace;
	size_t n;

	records_lock(k->records);
	sb = sandbox_of_cell(k, cell_id);
	records_unlock(k->records);
	if (!sb)
		return;
	cellsync_kick(k->cellsync); /* the Cell shows it */
	/* the pod's next sandbox, in a new cell of the same shape, may start warm (once per
	 * cell, with pool.rebalanceReplacement) */
	pool_rebalance(k->pool, cell_id, sb->instance_type,
		       sandbox_launch_spot(sb) ? CELL_SPOT : 0);
	if (!in->notice) {
		log_warn("sandbox %s: cell %s has a rebalance recommendation: its instance is at "
			 "an elevated risk of interruption",
			 sb->id, cell_id);
		pod_event(k, sb->config->metadata, cell_id, KUBE_EVENT_WARNING,
			  "RebalanceRecommendation",
			  "cell %s: EC2 says its spot instance is at an elevated risk of "
			  "interruption",
			  cell_id);
		sandbox_put(sb);
		return;
	}
	grace = interruption_grace(k, sb, in->notice_time_ns);
	pod_event(k, sb->config->metadata, cell_id, KUBE_EVENT_WARNING, "SpotInterrupted",
		  "cell %s: spot interruption notice (%s in %lld s): its containers are stopped "
		  "within %lld s and the pod gets a new sandbox",
		  cell_id, in->action,
		  (long long)((in->notice_time_ns - clock_now_ns()) / 1000000000LL),
		  (long long)grace);
	log_warn("sandbox %s: cell %s has a spot interruption notice (%s in %lld s): stopping "
		 "its containers within %lld s; the pod gets a new sandbox",
		 sb->id, cell_id, in->action,
		 (long long)((in->notice_time_ns - clock_now_ns()) / 1000000000LL),
		 (long long)grace);
	records_lock(k->records);
	n = records_containers(k->records, sb->id, &cs);
	for (size_t i = 0; i < n; i++) {
		if (cs[i]->desired == DESIRED_STOPPED || cs[i]->desired == DESIRED_REMOVED)
			continue;
		cs[i]->desired = DESIRED_STOPPED;
		cs[i]->stop_timeout_s = grace;
		if (records_save_container(k->records, cs[i], &err) < 0)
			log_error("container %s: %s", cs[i]->id, err.msg);
	}
	containers_put(cs, n);
	records_unlock(k->records);
	if (cri_apply_pod(k, sb->id, (grace + INTERRUPT_MARGIN_S) * 1000, &err) < 0)
		log_warn("sandbox %s: stopping its containers for the interruption: %s", sb->id,
			 err.msg);
	records_lock(k->records);
	if (sandbox_listed(sb) && sb->state == SANDBOX_READY && !strcmp(sb->cell_id, cell_id))
		kiyot_sandbox_lost(k, sb, "SpotInterrupted");
	records_unlock(k->records);
	cellsync_kick(k->cellsync);
	sandbox_put(sb);
}
