/*
 * provider_local.c: the local provider. A cell is a named network namespace with a veth to a
 * host bridge, cgroup v1 limits sized like its instance type, and a cell-agent started inside
 * them. What a cell owns is derived from its id (netns kiyot-<id>, veth kv<hash>, cgroups
 * <root>/<id>, <state_dir>/<id>), so teardown finds leftovers even without a record. A cell's
 * Ethernet address follows from its IP, and the bridge lets it send only as itself
 * (cellguard.h): the rules of every cell holding an address are written at start, when a cell
 * is built and when one goes. A cell's network is made by provider_local_net.c, and taken
 * down with the rest of it by provider_local_teardown.c.
 */
#include "provider_local_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cellguard.h"
#include "cellnat.h"
#include "cellnet.h"
#include "cellrecord.h"
#include "cellspawn.h"
#include "cgroup.h"
#include "clock.h"
#include "fsutil.h"
#include "log.h"
#include "netlink.h"
#include "netns.h"
#include "pidlock.h"
#include "proc.h"
#include "xalloc.h"

const char *const cell_controllers[NCTRL] = { "memory", "cpu", "pids" };

/* "<state_dir>/<id>[/<file>]", newly allocated. */
char *local_cell_path(const struct local_provider *p, const char *id, const char *file)
{
	if (file)
		return xasprintf("%s/%s/%s", p->state_dir, id, file);
	return xasprintf("%s/%s", p->state_dir, id);
}

/* The record of cell id in the state directory; -ENOENT when there is none. */
int local_record_load(const struct local_provider *p, const char *id, struct cell_record *out,
		      struct err *err)
{
	_cleanup_free_ char *dir = local_cell_path(p, id, NULL);

	return cell_record_load(dir, id, out, err);
}

/* Writes r into its cell's state directory. */
static int record_save(const struct local_provider *p, const struct cell_record *r, struct err *err)
{
	_cleanup_free_ char *dir = local_cell_path(p, r->cell_id, NULL);

	return cell_record_save(dir, r, err);
}

/* "/run/netns/kiyot-<id>", newly allocated. */
char *local_netns_path(const char *id)
{
	return xasprintf("%s/%s%s", CELLNET_NETNS_DIR, CELLNET_NETNS_PREFIX, id);
}

/* "<cgroup_root>/<id>", newly allocated. */
char *local_cgroup_rel(const struct local_provider *p, const char *id)
{
	return xasprintf("%s/%s", p->cgroup_root, id);
}

/* "<state_dir>/<id>/agent/agent.lock": the lock the cell's agent holds for its life. */
static char *agent_lock_path(const struct local_provider *p, const char *id)
{
	return local_cell_path(p, id, AGENT_DIR "/" PIDLOCK_AGENT_FILE);
}

/* The pid of the agent that holds cell id's lock, whether or not its record names it; -1 when
 * one holds it and has not written its pid yet (it is starting); 0 when none does. */
static long agent_holder(const struct local_provider *p, const char *id)
{
	_cleanup_free_ char *path = agent_lock_path(p, id);
	struct err e = ERR_INIT;
	long pid = 0;
	int held = pidlock_holder(path, &pid, &e);

	if (held < 0)
		log_warn("local provider: cell %s: %s", id, e.msg);
	if (held <= 0)
		return 0;
	return pid > 0 ? pid : -1;
}

/* Kills the agent holding cell id's lock, if one does. */
void local_agent_kill_holder(const struct local_provider *p, const char *id)
{
	long pid = agent_holder(p, id);

	if (pid > 0)
		kill((pid_t)pid, SIGKILL);
}

/* Whether the cell has a live agent: the one its record names, or whichever holds its lock
 * (a crash may come between starting an agent and recording it). */
static bool agent_live(const struct local_provider *p, const struct cell_record *r)
{
	return cell_record_agent_alive(r) || agent_holder(p, r->cell_id) != 0;
}

/* Whether the cell has a live agent, as agent_live; the record is made to name the one that
 * holds the cell's lock when it names another or none (and saved), so that nothing takes the
 * cell for agentless and starts a second agent beside it. */
static bool agent_adopt(const struct local_provider *p, struct cell_record *r)
{
	long pid = agent_holder(p, r->cell_id);
	struct err e = ERR_INIT;
	unsigned long long start;
	char state;

	if (pid == 0 || (pid == r->agent_pid && cell_record_agent_alive(r)))
		return cell_record_agent_alive(r); /* an agent older than the lock counts too */
	if (pid < 0 || proc_stat(pid, &state, &start) < 0)
		return true; /* starting, or gone this instant: the next look adopts or heals */
	log_info("local provider: cell %s: its agent is pid %ld (the record named %ld); keeping it",
		 r->cell_id, pid, r->agent_pid);
	r->agent_pid = pid;
	r->agent_start = start;
	if (record_save(p, r, &e) < 0)
		log_warn("local provider: cell %s: %s", r->cell_id, e.msg);
	return true;
}

/* Index of id in the busy list, or -1. Caller holds the lock. */
static ssize_t busy_find(const struct local_provider *p, const char *id)
{
	for (size_t i = 0; i < p->nbusy; i++)
		if (!strcmp(p->busy[i], id))
			return (ssize_t)i;
	return -1;
}

/* Marks id busy, waiting while another thread launches or terminates it, so the operations
 * of one cell never interleave while different cells proceed in parallel. */
static void busy_acquire(struct local_provider *p, const char *id)
{
	pthread_mutex_lock(&p->lock);
	while (busy_find(p, id) >= 0)
		pthread_cond_wait(&p->idle, &p->lock);
	xgrow((void **)&p->busy, &p->busy_cap, p->nbusy + 1, sizeof(*p->busy));
	p->busy[p->nbusy++] = xstrdup(id);
	pthread_mutex_unlock(&p->lock);
}

/* Clears id's busy mark and wakes waiters. */
static void busy_release(struct local_provider *p, const char *id)
{
	ssize_t i;

	pthread_mutex_lock(&p->lock);
	i = busy_find(p, id);
	if (i >= 0) {
		free(p->busy[i]);
		p->busy[i] = p->busy[--p->nbusy];
	}
	pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
}

/* Records that id holds ip. Caller holds the lock. */
static void lease_add_locked(struct local_provider *p, const char *id, uint32_t ip)
{
	xgrow((void **)&p->leases, &p->leases_cap, p->nleases + 1, sizeof(*p->leases));
	snprintf(p->leases[p->nleases].id, sizeof(p->leases[0].id), "%s", id);
	p->leases[p->nleases].guarded = false;
	p->leases[p->nleases++].ip = ip;
}

/* Drops id's address, if it holds one; whether its anti-spoofing chain was written. */
bool local_lease_drop(struct local_provider *p, const char *id)
{
	bool guarded = false;

	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->nleases; i++) {
		if (!strcmp(p->leases[i].id, id)) {
			guarded = p->leases[i].guarded;
			p->leases[i] = p->leases[--p->nleases];
			break;
		}
	}
	pthread_mutex_unlock(&p->lock);
	return guarded;
}

/* Picks a free address for id and holds it. */
static int lease_take(struct local_provider *p, const char *id, uint32_t *ip, struct err *err)
{
	_cleanup_free_ uint32_t *used = NULL;
	int ret;

	pthread_mutex_lock(&p->lock);
	used = xcalloc(p->nleases + 1, sizeof(*used));
	for (size_t i = 0; i < p->nleases; i++)
		used[i] = p->leases[i].ip;
	ret = cellnet_pick_ip(&p->cidr, used, p->nleases, p->hint, ip, err);
	if (ret == 0) {
		lease_add_locked(p, id, *ip);
		p->hint = *ip + 1;
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* Creates the cell's cgroups with the instance type's limits. A controller that is not
 * mounted is skipped with a warning; the rest must work. Fills joined[] with the cgroup.procs
 * paths the agent must join (NULL for skipped controllers). */
static int cell_cgroups_create(const struct local_provider *p, const struct cell_spec *spec,
			       char *joined[NCTRL], struct err *err)
{
	_cleanup_free_ char *rel = local_cgroup_rel(p, spec->cell_id);
	char value[32];

	for (size_t i = 0; i < NCTRL; i++) {
		const char *ctrl = cell_controllers[i];
		int ret = cgroup_create(ctrl, rel, err);

		if (ret == -ENOENT && !cgroup_controller_mounted(ctrl)) {
			log_warn("local provider: cell %s: %s; running without that limit",
				 spec->cell_id, err->msg);
			err_clear(err);
			continue;
		}
		if (ret < 0)
			return ret;
		if (!strcmp(ctrl, "memory") && spec->memory_bytes > 0) {
			snprintf(value, sizeof(value), "%lld", (long long)spec->memory_bytes);
			ret = cgroup_write(ctrl, rel, "memory.limit_in_bytes", value, err);
		} else if (!strcmp(ctrl, "cpu") && spec->cpus > 0) {
			long long quota = (long long)(spec->cpus * CPU_PERIOD_US + 0.5);

			snprintf(value, sizeof(value), "%d", CPU_PERIOD_US);
			ret = cgroup_write(ctrl, rel, "cpu.cfs_period_us", value, err);
			snprintf(value, sizeof(value), "%lld", quota < 1000 ? 1000 : quota);
			if (ret == 0)
				ret = cgroup_write(ctrl, rel, "cpu.cfs_quota_us", value, err);
		} else if (!strcmp(ctrl, "pids")) {
			ret = cgroup_write(ctrl, rel, "pids.max", PIDS_MAX, err);
		}
		if (ret < 0)
			return err_wrap(err, "cell %s limits", spec->cell_id);
		joined[i] = cgroup_path(ctrl, rel, "cgroup.procs");
	}
	return 0;
}

/* The bootstrap document as this cell's agent gets it: cells of one host share its disk, so
 * each agent keeps its state in its own cell directory unless the document says where. */
static char *bootstrap_for_cell(const struct local_provider *p, const struct cell_spec *spec)
{
	json_t *doc = json_loads(spec->bootstrap ? spec->bootstrap : "{}", 0, NULL);
	char *text;

	if (!json_is_object(doc)) {
		json_decref(doc);
		return xstrdup(spec->bootstrap ? spec->bootstrap : "{}"); /* the agent reports it */
	}
	if (!json_object_get(doc, "state_dir")) {
		_cleanup_free_ char *dir = local_cell_path(p, spec->cell_id, AGENT_DIR);

		json_object_set_new(doc, "state_dir", json_string(dir));
	}
	/* the cell's host is the node: host-network units join its namespace and images come
	 * from the node's store */
	json_object_set_new(doc, "host_netns", json_string(NODE_NETNS));
	if (p->node_images[0])
		json_object_set_new(doc, "node_images", json_string(p->node_images));
	text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(doc);
	if (!text)
		abort();
	return text;
}

/* Writes the bootstrap document and starts `<agent_path> --bootstrap <file>` in the cell,
 * with a minimal environment: kiyot's own may hold cloud credentials. */
static pid_t cell_agent_start(const struct local_provider *p, const struct cell_spec *spec,
			      int ns_fd, char *cgroup_procs[NCTRL], struct err *err)
{
	_cleanup_free_ char *boot = local_cell_path(p, spec->cell_id, "bootstrap.json");
	_cleanup_free_ char *logp = local_cell_path(p, spec->cell_id, "agent.log");
	_cleanup_free_ char *doc = bootstrap_for_cell(p, spec);
	char *argv[] = { p->agent_path, (char *)"--bootstrap", boot, NULL };
	char *envp[] = { (char *)AGENT_ENV_PATH, NULL };
	struct cellspawn cs = { argv, envp, cgroup_procs, NCTRL, ns_fd, logp };

	/* read by the agent at once; not flushed to disk (cell_record_save says why) */
	if (fs_replace_file(boot, doc, strlen(doc), 0600, err) < 0)
		return -err->code;
	return cellspawn_start(&cs, err);
}

/* The phase of a recorded cell as seen now. */
static enum cell_phase record_phase(const struct local_provider *p, const struct cell_record *r)
{
	return agent_live(p, r) ? CELL_RUNNING : CELL_FAILED;
}

/* Removes whatever a failed launch made. */
static void undo_launch(struct local_provider *p, const char *id)
{
	struct err undo = ERR_INIT;

	if (local_cell_teardown(p, id, &undo) < 0)
		log_warn("local provider: undoing failed launch: %s", undo.msg);
}

/* Builds a cell for spec whose id holds no record: reserve an address and record it first
 * (so a crash leaves something list and terminate find), then network, cgroups, agent. */
static int cell_build(struct local_provider *p, const struct cell_spec *spec, struct cell_info *out,
		      struct err *err)
{
	_cleanup_free_ char *dir = local_cell_path(p, spec->cell_id, NULL);
	char ipstr[CELLNET_IP_SIZE];
	char *procs[NCTRL] = { NULL };
	struct cell_record r = { 0 };
	int ns_fd = -1, ret;
	uint32_t ip;
	pid_t agent;

	ret = lease_take(p, spec->cell_id, &ip, err);
	if (ret < 0)
		return ret;
	cellnet_ip_str(ip, ipstr, sizeof(ipstr));
	r.cell_id = xstrdup(spec->cell_id);
	r.instance_id = xasprintf("local-%s", spec->cell_id);
	r.ip = xstrdup(ipstr);
	r.instance_type = xstrdup(spec->instance_type ? spec->instance_type : "");
	r.pod_uid = xstrdup(spec->pod_uid ? spec->pod_uid : "");
	r.cluster_id = xstrdup(spec->cluster_id ? spec->cluster_id : p->cluster_id);
	r.launched_ns = clock_now_ns();
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		ret = err_errno(err, "create %s", dir);
		goto fail;
	}
	ret = record_save(p, &r, err);
	if (ret < 0)
		goto fail;
	ns_fd = local_cell_net_create(p, spec->cell_id, ip, err);
	if (ns_fd < 0) {
		ret = err_wrap(err, "network");
		goto fail;
	}
	ret = cell_cgroups_create(p, spec, procs, err);
	if (ret < 0)
		goto fail;
	agent = cell_agent_start(p, spec, ns_fd, procs, err);
	if (agent < 0) {
		ret = agent;
		goto fail;
	}
	r.agent_pid = agent;
	if (proc_stat(agent, &(char){ 0 }, &r.agent_start) < 0)
		r.agent_start = 0;
	ret = record_save(p, &r, err);
	if (ret < 0)
		goto fail;
	cell_record_to_info(&r, CELL_RUNNING, out);
	goto done;
fail:
	undo_launch(p, spec->cell_id);
done:
	if (ns_fd >= 0)
		close(ns_fd);
	for (size_t i = 0; i < NCTRL; i++)
		free(procs[i]);
	cell_record_release(&r);
	return ret;
}

/* A cell with a record, launched again: a launch that a crash (kiyot's, or one in the middle
 * of the cell's making) cut short, or a cell launched before. The agent that lives in it is
 * kept, never a second one started beside it; what its network lacks is made in the netns it
 * has, so what runs there keeps running; an agent is started if none lives. A cell whose
 * network namespace is gone is torn down and built again: nothing in it can be reached. */
static int cell_resume(struct local_provider *p, const struct cell_spec *spec,
		       struct cell_record *r, struct cell_info *out, struct err *err)
{
	char *procs[NCTRL] = { NULL };
	bool live = agent_adopt(p, r);
	int ns_fd = local_cell_net_repair(p, r->cell_id, r->ip, err);
	pid_t agent;
	int ret = 0;

	if (ns_fd < 0) {
		log_warn("local provider: cell %s: %s; making it again", r->cell_id, err->msg);
		err_clear(err);
		if (local_cell_teardown(p, r->cell_id, err) < 0)
			return -err->code;
		return cell_build(p, spec, out, err);
	}
	if (!live) {
		ret = cell_cgroups_create(p, spec, procs, err);
		agent = ret < 0 ? ret : cell_agent_start(p, spec, ns_fd, procs, err);
		if (agent >= 0) {
			log_info("local provider: cell %s: its launch resumed, agent started (pid "
				 "%d)",
				 r->cell_id, (int)agent);
			r->agent_pid = agent;
			if (proc_stat(agent, &(char){ 0 }, &r->agent_start) < 0)
				r->agent_start = 0;
			ret = record_save(p, r, err);
		} else {
			ret = agent;
		}
	}
	close(ns_fd);
	for (size_t i = 0; i < NCTRL; i++)
		free(procs[i]);
	if (ret == 0)
		cell_record_to_info(r, CELL_RUNNING, out);
	return ret;
}

/* provider_ops.launch: resumes the recorded cell if there is one, else builds it. */
static int local_launch(void *self, const struct cell_spec *spec, struct cell_info *out,
			struct err *err)
{
	struct local_provider *p = self;
	struct cell_record r = { 0 };
	int ret;

	if (!cellnet_id_valid(spec->cell_id))
		return err_set(err, EINVAL, "cell id \"%s\": want 1-%d characters of [a-z0-9-]",
			       spec->cell_id ? spec->cell_id : "", CELLNET_ID_MAX);
	busy_acquire(p, spec->cell_id);
	ret = local_record_load(p, spec->cell_id, &r, err);
	if (ret == 0) {
		ret = cell_resume(p, spec, &r, out, err);
		cell_record_release(&r);
	} else if (ret == -ENOENT) {
		err_clear(err);
		ret = cell_build(p, spec, out, err);
	}
	busy_release(p, spec->cell_id);
	if (ret < 0)
		return err_wrap(err, "launch local cell %s", spec->cell_id);
	return 0;
}

/* provider_ops.terminate: tears down whatever of the cell exists. */
static int local_terminate(void *self, const char *cell_id, struct err *err)
{
	struct local_provider *p = self;
	int ret;

	if (!cellnet_id_valid(cell_id))
		return err_set(err, EINVAL, "cell id \"%s\": want 1-%d characters of [a-z0-9-]",
			       cell_id ? cell_id : "", CELLNET_ID_MAX);
	busy_acquire(p, cell_id);
	ret = local_cell_teardown(p, cell_id, err);
	busy_release(p, cell_id);
	return ret;
}

/* provider_ops.assign: the record of a standby cell names the pod that claimed it. */
static int local_assign(void *self, const struct cell_spec *spec, struct err *err)
{
	struct local_provider *p = self;
	struct cell_record r = { 0 };
	int ret;

	if (!cellnet_id_valid(spec->cell_id))
		return err_set(err, EINVAL, "cell id \"%s\" is not valid", spec->cell_id);
	busy_acquire(p, spec->cell_id);
	ret = local_record_load(p, spec->cell_id, &r, err);
	if (ret == 0) {
		free(r.pod_uid);
		r.pod_uid = xstrdup(spec->pod_uid ? spec->pod_uid : "");
		ret = record_save(p, &r, err);
	}
	busy_release(p, spec->cell_id);
	cell_record_release(&r);
	return ret < 0 ? err_wrap(err, "local cell %s", spec->cell_id) : 0;
}

/* provider_ops.state: a recorded cell is RUNNING while its agent process lives (PENDING while
 * a launch or heal works on it), FAILED once it is gone, saying where its log is. */
static int local_state(void *self, const char *cell_id, struct cell_info *out, struct err *err)
{
	struct local_provider *p = self;
	struct cell_record r = { 0 };
	enum cell_phase phase;
	int ret;

	if (!cellnet_id_valid(cell_id))
		return err_set(err, EINVAL, "cell id \"%s\" is not valid", cell_id);
	ret = local_record_load(p, cell_id, &r, err);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&p->lock);
	phase = busy_find(p, cell_id) >= 0 ? CELL_PENDING : record_phase(p, &r);
	pthread_mutex_unlock(&p->lock);
	cell_record_to_info(&r, phase, out);
	if (phase == CELL_FAILED) {
		_cleanup_free_ char *logp = local_cell_path(p, cell_id, "agent.log");

		out->reason = xasprintf("its agent (pid %ld) is not running; its log is %s",
					r.agent_pid, logp);
	}
	cell_record_release(&r);
	return 0;
}

/* provider_ops.dial: the pod's network is the cell's namespace; a host-network pod's is the
 * node's, which is kiyot's own. */
static int local_dial(void *self, const char *cell_id, uint16_t port, int host_network,
		      struct err *err)
{
	_cleanup_free_ char *ns = host_network ? NULL : local_netns_path(cell_id);
	int fd;

	(void)self;
	if (ns && !nl_netns_is_mounted(ns))
		return err_set(err, ENOENT, "cell %s has no network namespace (%s): is it running?",
			       cell_id, ns);
	fd = netns_connect_loopback(ns, port, err);
	return fd < 0 ? err_wrap(err, "cell %s", cell_id) : fd;
}

/* provider_ops.heal: starts the cell's agent again, from the bootstrap document it booted
 * with, when no agent lives in it (neither the one its record names nor one holding its lock:
 * that one is kept), its network made whole first (a cell's init would do this on a VM). */
static int local_heal(void *self, const char *cell_id, struct err *err)
{
	struct local_provider *p = self;
	_cleanup_free_ char *boot = local_cell_path(p, cell_id, "bootstrap.json");
	_cleanup_free_ char *logp = local_cell_path(p, cell_id, "agent.log");
	_cleanup_free_ char *rel = local_cgroup_rel(p, cell_id);
	char *argv[] = { p->agent_path, (char *)"--bootstrap", boot, NULL };
	char *envp[] = { (char *)AGENT_ENV_PATH, NULL };
	char *procs[NCTRL] = { NULL };
	struct cell_record r = { 0 };
	int ns_fd = -1, ret;
	pid_t agent;

	if (!cellnet_id_valid(cell_id))
		return err_set(err, EINVAL, "cell id \"%s\" is not valid", cell_id);
	busy_acquire(p, cell_id);
	ret = local_record_load(p, cell_id, &r, err);
	if (ret < 0 || agent_adopt(p, &r))
		goto out;
	ns_fd = local_cell_net_repair(p, cell_id, r.ip, err);
	if (ns_fd < 0) {
		ret = err_wrap(err, "cell %s", cell_id);
		goto out;
	}
	for (size_t i = 0; i < NCTRL; i++) {
		_cleanup_free_ char *dir = cgroup_path(cell_controllers[i], rel, NULL);

		if (fs_exists(dir))
			procs[i] = cgroup_path(cell_controllers[i], rel, "cgroup.procs");
	}
	{
		struct cellspawn cs = { argv, envp, procs, NCTRL, ns_fd, logp };

		agent = cellspawn_start(&cs, err);
	}
	if (agent < 0) {
		ret = agent;
		goto out;
	}
	log_info("local provider: cell %s: agent restarted (pid %d)", cell_id, (int)agent);
	r.agent_pid = agent;
	if (proc_stat(agent, &(char){ 0 }, &r.agent_start) < 0)
		r.agent_start = 0;
	ret = record_save(p, &r, err);
out:
	busy_release(p, cell_id);
	if (ns_fd >= 0)
		close(ns_fd);
	for (size_t i = 0; i < NCTRL; i++)
		free(procs[i]);
	cell_record_release(&r);
	return ret;
}

/* Appends one cell_info slot to *a and returns it. */
static struct cell_info *infos_add(struct cell_info **a, size_t *n, size_t *cap)
{
	xgrow((void **)a, cap, *n + 1, sizeof(**a));
	(*a)[*n] = (struct cell_info){ 0 };
	return &(*a)[(*n)++];
}

/* Adds the recorded cells of our cluster to *a; every recorded id goes to *ids. */
static void list_records(struct local_provider *p, struct cell_info **a, size_t *n, size_t *cap,
			 char ***ids, size_t *nids, size_t *ids_cap)
{
	DIR *d = opendir(p->state_dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct cell_record r = { 0 };
		struct err e = ERR_INIT;
		enum cell_phase phase;

		if (!cellnet_id_valid(de->d_name) || local_record_load(p, de->d_name, &r, &e) < 0)
			continue;
		xgrow((void **)ids, ids_cap, *nids + 1, sizeof(**ids));
		(*ids)[(*nids)++] = xstrdup(r.cell_id);
		if (!p->cluster_id[0] || !strcmp(r.cluster_id, p->cluster_id)) {
			pthread_mutex_lock(&p->lock);
			phase = busy_find(p, r.cell_id) >= 0 ? CELL_PENDING : record_phase(p, &r);
			pthread_mutex_unlock(&p->lock);
			cell_record_to_info(&r, phase, infos_add(a, n, cap));
		}
		cell_record_release(&r);
	}
	closedir(d);
}

/* provider_ops.list: recorded cells, plus kiyot-* netns without a record as FAILED so that
 * garbage collection removes them. */
static int local_list(void *self, struct cell_info **out, size_t *nout, struct err *err)
{
	struct local_provider *p = self;
	struct cell_info *a = NULL;
	size_t n = 0, cap = 0, nids = 0, ids_cap = 0;
	char **ids = NULL;

	(void)err;
	/* Only cells with a record of ours: a kiyot-* network namespace without one belongs to
	 * someone else (another kiyot on this host), and records are written before anything
	 * of a cell exists, so a crash leaves a record, never a bare namespace. */
	list_records(p, &a, &n, &cap, &ids, &nids, &ids_cap);
	for (size_t i = 0; i < nids; i++)
		free(ids[i]);
	free(ids);
	*out = a;
	*nout = n;
	return 0;
}

/* provider_ops.host_ports: DNAT rules on the node to the cell (cellnat.h). */
static int local_host_ports(void *self, const char *cell_id, const char *owner, const char *ip,
			    const struct cell_host_port *ports, size_t n, struct err *err)
{
	struct local_provider *p = self;
	_cleanup_free_ struct cellnat_port *np = xcalloc(n ? n : 1, sizeof(*np));

	for (size_t i = 0; i < n; i++) {
		np[i].protocol = ports[i].protocol;
		np[i].host_port = ports[i].host_port;
		np[i].container_port = ports[i].container_port;
		np[i].host_ip = ports[i].host_ip;
	}
	return cellnat_hostports_set(p->bridge, p->cidr_text, cell_id, owner, ip, np, n, err);
}

/* provider_ops.host_ports_prune: the rules toward this provider's network of cells not kept. */
static int local_host_ports_prune(void *self, const char *const *keep, size_t n_keep,
				  struct err *err)
{
	struct local_provider *p = self;

	return cellnat_hostports_prune(p->cidr_text, keep, n_keep, err);
}

/* provider_ops.destroy: frees the provider; cells keep running. */
static void local_destroy(void *self)
{
	struct local_provider *p = self;

	if (!p)
		return;
	for (size_t i = 0; i < p->nbusy; i++)
		free(p->busy[i]);
	free(p->busy);
	free(p->leases);
	free(p->state_dir);
	free(p->bridge);
	free(p->cidr_text);
	free(p->agent_path);
	free(p->cgroup_root);
	free(p->cluster_id);
	free(p->node_images);
	pthread_mutex_destroy(&p->guard_lock);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->idle);
	free(p);
}

static const struct provider_ops local_ops = {
	.name = "local",
	.standby_cells = 1,
	.boot_timeout_s = 30,
	.launch = local_launch,
	.state = local_state,
	.terminate = local_terminate,
	.list = local_list,
	.heal = local_heal,
	.dial = local_dial,
	.assign = local_assign,
	.host_ports = local_host_ports,
	.host_ports_prune = local_host_ports_prune,
	.destroy = local_destroy,
};

/* Rebuilds the address leases from the records under state_dir, so a restarted kiyot never
 * hands out an address a running cell holds. Records of other clusters count too: their cells
 * share the bridge. */
static void leases_rebuild(struct local_provider *p)
{
	DIR *d = opendir(p->state_dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct cell_record r = { 0 };
		struct err e = ERR_INIT;
		uint32_t ip;

		if (!cellnet_id_valid(de->d_name))
			continue;
		if (local_record_load(p, de->d_name, &r, &e) < 0) {
			if (e.code != ENOENT)
				log_warn("local provider: %s", e.msg);
			continue;
		}
		if (cellnet_parse_ip(r.ip, &ip, &e) == 0 && cellnet_is_cell_ip(&p->cidr, ip))
			lease_add_locked(p, r.cell_id, ip);
		cell_record_release(&r);
	}
	closedir(d);
}

/* A cell made before cells took the Ethernet address their IP gives them gets it now: its
 * anti-spoofing rules allow no other. */
static void mac_repair(const struct local_lease *l)
{
	_cleanup_free_ char *ns = local_netns_path(l->id);
	_cleanup_close_ int ns_fd = open(ns, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int nl = -1;
	char want_str[CELLNET_MAC_SIZE];
	uint8_t want[6], have[6];
	struct err e = ERR_INIT;
	int eth0 = -1;

	if (ns_fd < 0)
		return; /* no network left: nothing of it sends */
	nl = nl_open(ns_fd, &e);
	if (nl >= 0)
		eth0 = nl_link_index(nl, "eth0", &e);
	if (eth0 < 0 || nl_link_mac(nl, eth0, have, &e) < 0) {
		log_warn("local provider: cell %s: %s", l->id, e.msg);
		return;
	}
	cellnet_mac(l->ip, want);
	if (memcmp(want, have, sizeof(want)) == 0)
		return;
	cellnet_mac_str(l->ip, want_str, sizeof(want_str));
	if (nl_link_set_mac(nl, eth0, want, &e) < 0)
		log_warn("local provider: cell %s: eth0 cannot take %s, the address its "
			 "anti-spoofing rules allow: %s",
			 l->id, want_str, e.msg);
	else
		log_info("local provider: cell %s: eth0 now has %s, the address its "
			 "anti-spoofing rules allow",
			 l->id, want_str);
}

void provider_local_inotify_need(const struct cellnet_cidr *cidr, long *instances, long *watches)
{
	long hosts = (1L << (32 - cidr->prefix)) - 3; /* less network, gateway, broadcast */
	long cells = hosts < INOTIFY_CELLS_MAX ? hosts : INOTIFY_CELLS_MAX;

	*instances = cells + INOTIFY_NODE_INSTANCES;
	*watches = cells * INOTIFY_WATCHES_PER_CELL + INOTIFY_NODE_WATCHES;
}

/* Raises fs.inotify.<name> to want when it is lower, writing the /proc/sys file in place (it
 * takes no temporary file and rename), and says what it changed. */
static void inotify_raise(const char *name, long want, const char *why)
{
	_cleanup_free_ char *path = xasprintf("/proc/sys/fs/inotify/%s", name);
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -1;
	struct err err = ERR_INIT;
	char v[32];
	long cur;
	int n;

	if (fs_read_file(path, 64, &text, NULL, &err) < 0) {
		log_warn("local provider: %s; cells may fail past its limit", err.msg);
		return;
	}
	cur = strtol(text, NULL, 10);
	if (cur >= want)
		return;
	n = snprintf(v, sizeof(v), "%ld\n", want);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, v, (size_t)n) != n)
		log_warn("local provider: fs.inotify.%s is %ld, below the %ld %s, and cannot be "
			 "raised (%s): cells past the limit will fail",
			 name, cur, want, why, strerror(errno));
	else
		log_info("local provider: fs.inotify.%s raised from %ld to %ld (%s)", name, cur,
			 want, why);
}

/* Every cell's agent holds an inotify instance and a watch per unit, all as root on this host:
 * the kernel's default of 128 instances per user would stop the 129th cell's agent. */
static void inotify_room(const struct cellnet_cidr *cidr, const char *cidr_text)
{
	_cleanup_free_ char *why = NULL;
	long instances, watches;

	provider_local_inotify_need(cidr, &instances, &watches);
	why = xasprintf("that the cells of %s need", cidr_text);
	inotify_raise("max_user_instances", instances, why);
	inotify_raise("max_user_watches", watches, why);
}

/* Checks the settings, fills defaults, and loads the leases of existing cells. */
int provider_local_new(const struct local_provider_config *cfg, struct provider *out,
		       struct err *err)
{
	struct local_provider *p;
	struct cellnet_cidr cidr;
	const char *bridge = cfg->bridge && cfg->bridge[0] ? cfg->bridge : DEFAULT_BRIDGE;
	const char *root = cfg->cgroup_root && cfg->cgroup_root[0] ? cfg->cgroup_root
								   : DEFAULT_CGROUP_ROOT;
	const char *state = cfg->state_dir && cfg->state_dir[0] ? cfg->state_dir
								: DEFAULT_STATE_DIR;
	const char *cidr_text = cfg->cidr && cfg->cidr[0] ? cfg->cidr : DEFAULT_CIDR;

	if (cellnet_parse_cidr(cidr_text, &cidr, err) < 0)
		return err_wrap(err, "local provider");
	inotify_room(&cidr, cidr_text);
	if (strlen(bridge) >= CELLNET_IFNAME_SIZE || strchr(bridge, '/'))
		return err_set(err, EINVAL,
			       "local provider: bridge name \"%s\": want 1-15 characters, no '/'",
			       bridge);
	if (!cfg->agent_path || cfg->agent_path[0] != '/')
		return err_set(err, EINVAL,
			       "local provider: agent_path: want the absolute path of cell-agent");
	if (strstr(root, "..") || root[0] == '/')
		return err_set(err, EINVAL,
			       "local provider: cgroup_root \"%s\": want a relative path", root);
	if (fs_mkdir_p(state, 0700, err) < 0)
		return err_wrap(err, "local provider state directory");
	if (nl_netns_name_self(NODE_NETNS, err) < 0)
		return err_wrap(err, "local provider: naming the node's network namespace");
	p = xcalloc(1, sizeof(*p));
	p->state_dir = xstrdup(state);
	p->bridge = xstrdup(bridge);
	p->agent_path = xstrdup(cfg->agent_path);
	p->cgroup_root = xstrdup(root);
	p->cluster_id = xstrdup(cfg->cluster_id ? cfg->cluster_id : "");
	p->node_images = xstrdup(cfg->node_images ? cfg->node_images : "");
	p->cidr = cidr;
	p->cidr_text = xstrdup(cidr_text);
	pthread_mutex_init(&p->guard_lock, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->idle, NULL);
	leases_rebuild(p);
	for (size_t i = 0; cfg->restore_network && i < p->nleases; i++)
		mac_repair(&p->leases[i]);
	if (cfg->restore_network &&
	    (local_bridge_setup(p, err) < 0 || local_spoof_sync(p, err) < 0)) {
		local_destroy(p);
		return err_wrap(err, "local provider");
	}
	out->ops = &local_ops;
	out->self = p;
	return 0;
}
