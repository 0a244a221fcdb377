/*
 * cri_container.c: the container half of CRI's RuntimeService. One container is one unit of
 * the sandbox's cell; every change is a new desired pod sent to the cell's agent.
 */
#include "cri.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sizing/catalog.h"
#include "cells/cells.h"
#include "clock.h"
#include "cri_security.h"
#include "cri_validate.h"
#include "events.h"
#include "log.h"
#include "state/ctrlog.h"
#include "stream/server.h"
#include "xalloc.h"

#define CREATE_TIMEOUT_MS (10 * 60 * 1000) /* may include an image pull */
#define START_TIMEOUT_MS (60 * 1000)

/* Opens a container's log file (anew: after a rename), creating it, so readers find it before
 * any output. Needs the records' lock. */
static void log_open(struct container *c, bool anew)
{
	struct err err = ERR_INIT;

	if (c->log && (anew ? ctrlog_reopen(c->log, &err) : ctrlog_open(c->log, &err)) < 0)
		log_warn("container %s: log: %s", c->id, err.msg);
}

/* The container of the sandbox with the metadata's name and attempt, or NULL. Needs
 * the records' lock. */
static struct container *find_by_metadata(struct kiyot *k, const char *sandbox_id,
					  const Runtime__V1__ContainerMetadata *m)
{
	struct container **v, *hit = NULL;
	size_t n = records_containers(k->records, sandbox_id, &v);

	for (size_t i = 0; i < n && !hit; i++)
		if (strcmp(v[i]->config->metadata->name, m->name) == 0 &&
		    v[i]->config->metadata->attempt == m->attempt)
			hit = v[i];
	containers_put(v, n);
	return hit;
}

static int validate_config(const Runtime__V1__ContainerConfig *cfg, struct err *err)
{
	if (!cfg)
		return err_set(err, EINVAL, "config: required");
	if (!cfg->metadata || !cfg->metadata->name[0])
		return err_set(err, EINVAL, "config.metadata.name: required");
	if (!cfg->image || !cfg->image->image[0])
		return err_set(err, EINVAL, "config.image.image: required");
	return 0;
}

/* 0 when the agent of sandbox_id's cell can apply res (an agent older than a setting needs is
 * refused the container rather than sent what it would ignore); a sandbox without a cell is
 * left to the caller's own checks. */
static int agent_can_apply(struct kiyot *k, const char *sandbox_id,
			   const Runtime__V1__LinuxContainerResources *res, struct err *err)
{
	_cleanup_free_ char *cell = NULL;

	if (!res || !res->n_unified)
		return 0;
	{
		_cleanup_records_unlock_ struct records *held = records_locked(k->records);
		struct sandbox *sb = records_sandbox(held, sandbox_id);

		if (sb && sb->cell_id && sb->cell_id[0])
			cell = xstrdup(sb->cell_id);
	}
	return cell ? cells_agent_can(k->cells, cell, AGENT_UNIFIED, err) : 0;
}

int cri_create_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__CreateContainerRequest *r = (const void *)req;
	Runtime__V1__CreateContainerResponse *out = (void *)resp;
	struct kiyot *k = svc;
	const struct image_rec *img;
	struct container *c;
	struct sandbox *sb;
	char *id, *profile = NULL;
	int ret;

	if (cri_validate(req, err) < 0)
		return -err->code;
	if (validate_config(r->config, err) < 0 ||
	    agent_can_apply(k, r->pod_sandbox_id,
			    r->config->linux ? r->config->linux->resources : NULL, err) < 0 ||
	    cri_security_check_container(r->config, &profile, err) < 0) {
		free(profile);
		return err_wrap(err, "create container %s",
				r->config && r->config->metadata ? r->config->metadata->name : "");
	}
	records_lock(k->records);
	sb = records_sandbox(k->records, r->pod_sandbox_id);
	if (!sb || sb->state != SANDBOX_READY) {
		records_unlock(k->records);
		free(profile);
		if (!sb)
			return err_set(err, ENOENT, "pod sandbox %s not found", r->pod_sandbox_id);
		return err_set(err, EBUSY, "pod sandbox %s is not ready", sb->id);
	}
	if ((c = find_by_metadata(k, sb->id, r->config->metadata))) {
		ret = err_set(err, EEXIST,
			      "container %s attempt %u already exists in sandbox %s as %s",
			      r->config->metadata->name, r->config->metadata->attempt, sb->id,
			      c->id);
		records_unlock(k->records);
		free(profile);
		return ret;
	}
	c = xcalloc(1, sizeof(*c));
	c->id = kiyot_new_id();
	c->sandbox_id = xstrdup(sb->id);
	c->config = cri_msg_copy(&r->config->base);
	c->state = CTR_CREATED;
	c->created_ns = clock_now_ns();
	c->reason = xstrdup("");
	c->message = xstrdup("");
	img = kiyot_find_image(k, r->config->image->image);
	/* what the node pulled it as; the cell says what it runs once it made the unit */
	c->image_ref = img ? xstrndup(img->repo_digests, strcspn(img->repo_digests, "\n"))
			   : xstrdup("");
	c->image_id = xstrdup(img ? img->id : "");
	c->seccomp_profile = profile;
	c->desired = DESIRED_CREATED;
	records_add_container(k->records, c);
	kiyot_log_attach(k, c);
	id = xstrdup(c->id);
	records_unlock(k->records);

	ret = cri_apply_pod(k, r->pod_sandbox_id, CREATE_TIMEOUT_MS, err);

	records_lock(k->records);
	c = records_container(k->records, id);
	if (ret == 0 && c && c->state == CTR_CREATED &&
	    strcmp(c->reason, "CreateContainerError") == 0)
		/* e.g. the image could not be pulled: NOT_FOUND for one its registry lacks */
		ret = err_set(err, c->error_status ? rpc_errno_from_status(c->error_status) : EIO,
			      "%s", c->message);
	if (ret == 0 && c)
		ret = records_save_container(k->records, c, err);
	if (ret < 0 && c) {
		struct err rerr = ERR_INIT;

		if (records_remove_container(k->records, c, &rerr) < 0)
			log_error("container %s: %s", id, rerr.msg);
	} else if (c) {
		log_open(c, false);
		events_publish_container(k, c);
	}
	records_unlock(k->records);
	if (ret < 0) {
		struct err aerr = ERR_INIT;

		/* the failed unit is no longer in the desired pod; let the cell drop it */
		if (cri_apply_pod(k, r->pod_sandbox_id, START_TIMEOUT_MS, &aerr) < 0)
			log_debug("sandbox %s: %s", r->pod_sandbox_id, aerr.msg);
		free(id);
		return err_wrap(err, "create container %s", r->config->metadata->name);
	}
	out->container_id = rpc_strdup(call, id);
	free(id);
	return 0;
}

/* Looks a container up and copies its id and sandbox id; NOT_FOUND if unknown. */
static int lookup(struct kiyot *k, const char *id, char **cid, char **sid, struct err *err)
{
	struct container *c;

	records_lock(k->records);
	c = records_container(k->records, id);
	if (!c) {
		records_unlock(k->records);
		return err_set(err, ENOENT, "container %s not found", id);
	}
	*cid = xstrdup(c->id);
	*sid = xstrdup(c->sandbox_id);
	records_unlock(k->records);
	return 0;
}

/* Asks the cell for d (with a stop's grace) from now on, and saves it. Needs the records' lock. */
static void set_desired(struct kiyot *k, struct container *c, enum desired d,
			int64_t stop_timeout_s)
{
	struct err err = ERR_INIT;

	c->desired = d;
	c->stop_timeout_s = stop_timeout_s;
	if (records_save_container(k->records, c, &err) < 0)
		log_error("container %s: %s", c->id, err.msg);
}

int cri_start_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__StartContainerRequest *r = (const void *)req;
	struct kiyot *k = svc;
	_cleanup_free_ char *cid = NULL;
	_cleanup_free_ char *sid = NULL;
	struct container *c;
	int ret;

	(void)call;
	(void)resp;
	if (lookup(k, r->container_id, &cid, &sid, err) < 0)
		return -err->code;
	records_lock(k->records);
	c = records_container(k->records, cid);
	if (c && c->state != CTR_CREATED) {
		records_unlock(k->records);
		return err_set(err, EBUSY, "container %s is not in the created state", cid);
	}
	if (c)
		set_desired(k, c, DESIRED_RUNNING, 0);
	records_unlock(k->records);
	ret = cri_apply_pod(k, sid, START_TIMEOUT_MS, err);
	if (ret < 0)
		return err_wrap(err, "start container %s", cid);
	records_lock(k->records);
	c = records_container(k->records, cid);
	if (c && c->state == CTR_CREATED)
		ret = err_set(err, EIO, "start container %s: the cell did not start it%s%s", cid,
			      c->message[0] ? ": " : "", c->message);
	else if (c && c->state == CTR_EXITED && !strcmp(c->reason, "StartError"))
		ret = err_set(err, EIO, "start container %s: %s", cid, c->message);
	records_unlock(k->records);
	return ret;
}

int cri_stop_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		       ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__StopContainerRequest *r = (const void *)req;
	struct kiyot *k = svc;
	_cleanup_free_ char *cid = NULL;
	_cleanup_free_ char *sid = NULL;
	struct container *c;
	int64_t grace = r->timeout > 0 ? r->timeout : 0;
	int skip = 0;

	(void)call;
	(void)resp;
	if (lookup(k, r->container_id, &cid, &sid, err) < 0)
		return -err->code;
	records_lock(k->records);
	c = records_container(k->records, cid);
	if (c) {
		skip = c->state == CTR_EXITED && c->desired == DESIRED_STOPPED;
		if (c->state == CTR_CREATED) {
			/* never started: it simply becomes exited, and stays so after a restart */
			c->state = CTR_EXITED;
			skip = 0;
			events_publish_container(k, c);
		}
		set_desired(k, c, DESIRED_STOPPED, grace);
	}
	records_unlock(k->records);
	if (skip)
		return 0; /* already stopped: stop is idempotent */
	if (cri_apply_pod(k, sid, (grace + 30) * 1000, err) < 0) {
		if (err->code == EBUSY)
			return 0; /* the cell is gone, and the container with it */
		return err_wrap(err, "stop container %s", cid);
	}
	return 0;
}

int cri_remove_container(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			 ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__RemoveContainerRequest *r = (const void *)req;
	struct kiyot *k = svc;
	char *cid = NULL, *sid = NULL;
	struct container *c;
	int ret;

	(void)call;
	(void)resp;
	if (lookup(k, r->container_id, &cid, &sid, err) < 0) {
		err_clear(err);
		return 0; /* already removed: removal is idempotent */
	}
	records_lock(k->records);
	c = records_container(k->records, cid);
	if (c)
		set_desired(k, c, DESIRED_REMOVED, 0);
	records_unlock(k->records);
	ret = cri_apply_pod(k, sid, START_TIMEOUT_MS, err);
	if (ret < 0 && err->code != EBUSY) {
		free(cid);
		free(sid);
		return err_wrap(err, "remove container %s", r->container_id);
	}
	err_clear(err);
	records_lock(k->records);
	c = records_container(k->records, cid);
	if (c) {
		events_publish_deleted(k, c);
		ret = records_remove_container(k->records, c, err);
	} else {
		ret = 0;
	}
	records_unlock(k->records);
	free(cid);
	free(sid);
	return ret;
}

int cri_reopen_container_log(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
			     ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ReopenContainerLogRequest *r = (const void *)req;
	struct kiyot *k = svc;
	struct container *c;
	int ret = 0;

	(void)call;
	(void)resp;
	records_lock(k->records);
	c = records_container(k->records, r->container_id);
	if (!c)
		ret = err_set(err, ENOENT, "container %s not found", r->container_id);
	else if (c->state != CTR_RUNNING)
		ret = err_set(err, EBUSY, "container %s is not running", c->id);
	else /* after the kubelet's rotation renamed the file, the next chunk lands in a new
	      * one, which exists from now on */
		log_open(c, true);
	records_unlock(k->records);
	return ret;
}

int cri_exec_sync(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
		  ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__ExecSyncRequest *r = (const void *)req;
	Runtime__V1__ExecSyncResponse *out = (void *)resp;
	Kiyot__Cell__V1__ExecSyncRequest areq = KIYOT__CELL__V1__EXEC_SYNC_REQUEST__INIT;
	Kiyot__Cell__V1__ExecSyncResponse *ares = NULL;
	struct kiyot *k = svc;
	struct container *c;
	struct sandbox *sb;
	char *cell_id;
	int ret;

	if (cri_validate(req, err) < 0)
		return -err->code;
	if (r->n_cmd == 0)
		return err_set(err, EINVAL, "cmd: required");
	records_lock(k->records);
	c = records_container(k->records, r->container_id);
	sb = c ? records_sandbox(k->records, c->sandbox_id) : NULL;
	if (!c || !sb || c->state != CTR_RUNNING) {
		records_unlock(k->records);
		cells_exec_forgo(k->cells); /* a turn it waited for, parked, it has no use for */
		if (!c || !sb)
			return err_set(err, ENOENT, "container %s not found", r->container_id);
		return err_set(err, EBUSY, "container %s is not running", r->container_id);
	}
	areq.unit_id = xstrdup(c->id);
	cell_id = xstrdup(sb->cell_id);
	records_unlock(k->records);
	areq.n_cmd = r->n_cmd;
	areq.cmd = r->cmd;
	areq.timeout_s = r->timeout;
	ret = cells_exec_sync(k->cells, cell_id, &areq, &ares, err);
	free(areq.unit_id);
	free(cell_id);
	if (ret == RPC_PARKED) /* waits for its turn in the cell: this runs again then */
		return ret;
	if (ret < 0)
		return err_wrap(err, "exec in container %s", r->container_id);
	/* an empty output comes unpacked without data (NULL), which memcpy may not take */
	out->stdout.data = rpc_alloc(call, ares->stdout.len + 1);
	if (ares->stdout.len)
		memcpy(out->stdout.data, ares->stdout.data, ares->stdout.len);
	out->stdout.len = ares->stdout.len;
	out->stderr.data = rpc_alloc(call, ares->stderr.len + 1);
	if (ares->stderr.len)
		memcpy(out->stderr.data, ares->stderr.data, ares->stderr.len);
	out->stderr.len = ares->stderr.len;
	out->exit_code = ares->exit_code;
	protobuf_c_message_free_unpacked(&ares->base, NULL);
	return 0;
}

/*
 * A stream of a running container's (exec, attach): checks the streams the client asks for
 * as the kubelet's streaming server does, and fills sr's cell, unit and streams (cell_id and
 * unit_id are copies the caller frees). *has_stdin: the container was created with stdin.
 */
static int stream_target(struct kiyot *k, const char *container_id, bool in, bool out, bool errs,
			 bool tty, struct stream_request *sr, bool *has_stdin, struct err *err)
{
	struct container *c;
	struct sandbox *sb;

	if (!in && !out && !errs)
		return err_set(err, EINVAL, "one of stdin, stdout and stderr must be set");
	if (tty && errs)
		return err_set(err, EINVAL,
			       "tty and stderr cannot both be set (a terminal "
			       "carries both outputs)");
	records_lock(k->records);
	c = records_container(k->records, container_id);
	sb = c ? records_sandbox(k->records, c->sandbox_id) : NULL;
	if (c && sb && c->state == CTR_RUNNING) {
		sr->cell_id = xstrdup(sb->cell_id);
		sr->unit_id = xstrdup(c->id);
		*has_stdin = c->config->stdin;
	}
	records_unlock(k->records);
	if (!c || !sb)
		return err_set(err, ENOENT, "container %s not found", container_id);
	if (!sr->unit_id)
		return err_set(err, EBUSY, "container %s is not running", container_id);
	sr->tty = tty;
	sr->in = in;
	sr->out = out;
	sr->err = errs;
	return 0;
}

static void stream_request_release(struct stream_request *sr)
{
	free((char *)sr->cell_id);
	free((char *)sr->unit_id);
}

/* A URL on the streaming server for a command with its stdio streamed (kubectl exec). */
int cri_exec(void *svc, struct rpc_call *call, const ProtobufCMessage *req, ProtobufCMessage *resp,
	     struct err *err)
{
	const Runtime__V1__ExecRequest *r = (const void *)req;
	Runtime__V1__ExecResponse *out = (void *)resp;
	struct stream_request sr = { .kind = STREAM_EXEC };
	struct kiyot *k = svc;
	_cleanup_free_ char *url = NULL;
	bool has_stdin = false;
	int ret;

	if (cri_validate(req, err) < 0)
		return -err->code;
	if (r->n_cmd == 0)
		return err_set(err, EINVAL, "cmd: required");
	ret = stream_target(k, r->container_id, r->stdin, r->stdout, r->stderr, r->tty, &sr,
			    &has_stdin, err);
	if (ret == 0) {
		sr.cmd = r->cmd;
		sr.n_cmd = r->n_cmd;
		url = stream_server_url(k->stream, &sr);
		out->url = rpc_strdup(call, url);
	}
	stream_request_release(&sr);
	return ret;
}

/* A URL on the streaming server for a running container's own stdio (kubectl attach): its
 * output from then on, and its stdin when it was created with one. */
int cri_attach(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
	       ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__AttachRequest *r = (const void *)req;
	Runtime__V1__AttachResponse *out = (void *)resp;
	struct stream_request sr = { .kind = STREAM_ATTACH };
	struct kiyot *k = svc;
	_cleanup_free_ char *url = NULL;
	bool has_stdin = false;
	int ret;

	if (cri_validate(req, err) < 0)
		return -err->code;
	ret = stream_target(k, r->container_id, r->stdin, r->stdout, r->stderr, r->tty, &sr,
			    &has_stdin, err);
	if (ret == 0 && r->stdin && !has_stdin)
		ret = err_set(err, EINVAL,
			      "container %s was not created with stdin: attach without stdin, or "
			      "create the container with stdin: true",
			      r->container_id);
	if (ret == 0) {
		url = stream_server_url(k->stream, &sr);
		out->url = rpc_strdup(call, url);
	}
	stream_request_release(&sr);
	return ret;
}

/* Whether limits of cpu_milli and memory fit the cell's instance type; 0 or an error. */
static int fits_cell(struct kiyot *k, const struct sandbox *sb, int64_t cpu_milli, int64_t memory,
		     struct err *err)
{
	struct catalog *cat = catalog_acquire(k->catalog);
	const struct catalog_type *t = catalog_find(cat, sb->instance_type);
	int ret = 0;

	if (t && (cpu_milli > t->cpu_milli || memory > t->memory_bytes))
		ret = err_set(err, EINVAL,
			      "the limits (%lldm CPU, %lld MiB) do not fit the pod's cell, a %s "
			      "(%lldm CPU, %lld MiB); a larger pod needs a new cell: recreate the "
			      "pod",
			      (long long)cpu_milli, (long long)(memory >> 20), t->name,
			      (long long)t->cpu_milli, (long long)(t->memory_bytes >> 20));
	catalog_release(cat);
	return ret;
}

/* The resources an update leaves a container: those it names (its non-zero numbers, non-empty
 * sets and unified keys) over what the container had, as containerd updates a runtime spec,
 * so that crictl update --memory keeps the CPU quota. The OOM score stays the one the
 * container was created with. A heap message. */
static Runtime__V1__LinuxContainerResources *
resources_merge(const Runtime__V1__LinuxContainerResources *old,
		const Runtime__V1__LinuxContainerResources *up)
{
	Runtime__V1__LinuxContainerResources m = RUNTIME__V1__LINUX_CONTAINER_RESOURCES__INIT;
	size_t n_old = old ? old->n_unified : 0;
	_cleanup_free_ Runtime__V1__LinuxContainerResources__UnifiedEntry **unified =
		xcalloc(n_old + up->n_unified + 1, sizeof(*unified));

	if (old)
		m = *old; /* borrowed: the result is a deep copy */
	m.cpu_period = up->cpu_period ? up->cpu_period : m.cpu_period;
	m.cpu_quota = up->cpu_quota ? up->cpu_quota : m.cpu_quota;
	m.cpu_shares = up->cpu_shares ? up->cpu_shares : m.cpu_shares;
	m.memory_limit_in_bytes = up->memory_limit_in_bytes ? up->memory_limit_in_bytes
							    : m.memory_limit_in_bytes;
	m.memory_swap_limit_in_bytes = up->memory_swap_limit_in_bytes
					       ? up->memory_swap_limit_in_bytes
					       : m.memory_swap_limit_in_bytes;
	m.cpuset_cpus = up->cpuset_cpus[0] ? up->cpuset_cpus : m.cpuset_cpus;
	m.cpuset_mems = up->cpuset_mems[0] ? up->cpuset_mems : m.cpuset_mems;
	if (up->n_hugepage_limits) {
		m.n_hugepage_limits = up->n_hugepage_limits;
		m.hugepage_limits = up->hugepage_limits;
	}
	m.n_unified = 0;
	for (size_t i = 0; i < n_old; i++)
		if (!cri_map_get((void **)up->unified, up->n_unified, old->unified[i]->key))
			unified[m.n_unified++] = old->unified[i];
	for (size_t i = 0; i < up->n_unified; i++)
		unified[m.n_unified++] = up->unified[i];
	m.unified = unified;
	return cri_msg_copy(&m.base);
}

/* New CPU and memory limits for a container: kept in its record, applied to the running unit
 * in place (the OCI runtime's update) and to every later start of it. */
int cri_update_container_resources(void *svc, struct rpc_call *call, const ProtobufCMessage *req,
				   ProtobufCMessage *resp, struct err *err)
{
	const Runtime__V1__UpdateContainerResourcesRequest *r = (const void *)req;
	const Runtime__V1__LinuxContainerResources *res = r->linux;
	struct kiyot *k = svc;
	Runtime__V1__LinuxContainerResources *merged;
	struct container *c;
	struct sandbox *sb;
	_cleanup_free_ char *sid = NULL;
	int64_t cpu = 0;
	int ret;

	(void)call;
	(void)resp;
	if (cri_validate(req, err) < 0)
		return -err->code;
	if (!res)
		return err_set(err, EINVAL, "linux: required (kiyot runs Linux units)");
	records_lock(k->records);
	c = records_container(k->records, r->container_id);
	sid = c ? xstrdup(c->sandbox_id) : NULL;
	records_unlock(k->records);
	if (sid && agent_can_apply(k, sid, res, err) < 0)
		return err_wrap(err, "update container %s", r->container_id);
	free(sid);
	sid = NULL;
	records_lock(k->records);
	c = records_container(k->records, r->container_id);
	sb = c ? records_sandbox(k->records, c->sandbox_id) : NULL;
	if (!c || !sb) {
		records_unlock(k->records);
		return err_set(err, ENOENT, "container %s not found", r->container_id);
	}
	merged = resources_merge(c->config->linux ? c->config->linux->resources : NULL, res);
	if (merged->cpu_quota > 0 && merged->cpu_period > 0)
		cpu = merged->cpu_quota * 1000 / merged->cpu_period;
	ret = fits_cell(k, sb, cpu, merged->memory_limit_in_bytes, err);
	if (ret == 0) {
		if (!c->config->linux) {
			c->config->linux = xcalloc(1, sizeof(*c->config->linux));
			runtime__v1__linux_container_config__init(c->config->linux);
		}
		if (c->config->linux->resources)
			protobuf_c_message_free_unpacked(&c->config->linux->resources->base, NULL);
		c->config->linux->resources = steal_ptr(merged);
		ret = records_save_container(k->records, c, err);
		sid = xstrdup(c->sandbox_id);
	}
	records_unlock(k->records);
	if (merged)
		protobuf_c_message_free_unpacked(&merged->base, NULL);
	if (ret < 0)
		return err_wrap(err, "update container %s", r->container_id);
	ret = cri_apply_pod(k, sid, START_TIMEOUT_MS, err);
	if (ret < 0)
		return err_wrap(err, "update container %s", r->container_id);
	return 0;
}
