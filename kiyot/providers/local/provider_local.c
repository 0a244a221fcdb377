/*
 * provider_local.c: the local provider. A cell is a named network namespace with a veth to a
 * host bridge, cgroup v1 limits sized like its instance type, and a cell-agent started inside
 * them. What a cell owns is derived from its id (netns kiyot-<id>, veth kv<hash>, cgroups
 * <root>/<id>, <state_dir>/<id>), so teardown finds leftovers even without a record. A cell's
 * Ethernet address follows from its IP, and the bridge lets it send only as itself
 * (cellguard.h): the rules of every cell holding an address are written at start, when a cell
 * is built and when one goes.
 */
#include "providers/provider.h"

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

#define DEFAULT_STATE_DIR "/run/kiyot/cells"
#define DEFAULT_BRIDGE "kiyot0"
#define DEFAULT_CIDR "10.77.0.0/16"
#define DEFAULT_CGROUP_ROOT "kiyot"
#define MOUNTINFO_MAX (8 * 1024 * 1024)
#define PIDS_MAX "4096"
#define CPU_PERIOD_US 100000
/* How long teardown keeps killing a cell's processes before giving up on a controller. */
#define KILL_TIMEOUT_MS 5000
/* Writes of the anti-spoofing rules before giving up, and the pause before the nth retry. */
#define SPOOF_ATTEMPTS 4
#define SPOOF_RETRY_MS 20
/* Retries while a veth name of a just-deleted cell is still held by the kernel. */
#define VETH_RETRIES 50
/* inotify for the cells' agents (provider_local_inotify_need): cells counted at most, the
 * watches of one cell (one per unit), and what the node's other root processes keep (the
 * kernel's default instances, its smallest default watches) */
#define INOTIFY_CELLS_MAX 65536L
#define INOTIFY_WATCHES_PER_CELL 32L
#define INOTIFY_NODE_INSTANCES 128L
#define INOTIFY_NODE_WATCHES 8192L
#define AGENT_ENV_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* The agent's state directory in its cell's (where it holds its lock, PIDLOCK_AGENT_FILE) */
#define AGENT_DIR "agent"

/* The OCI runtime makes each unit a cgroup in every v1 hierarchy (devices, freezer, cpuset,
 * ...), under the cell's path: remove the cell's subtree from all of them, not only from the
 * controllers the cell was given. Symlinked hierarchies (cpu,cpuacct) are the same tree. */
static void remove_all_hierarchies(const char *rel, const char *id, struct err *first);

/* The controllers a cell gets, in the order they are joined. */
static const char *const cell_controllers[] = { "memory", "cpu", "pids" };
#define NCTRL ARRAY_SIZE(cell_controllers)

/* A cell's address, held while the cell exists so no other cell gets it. */
struct local_lease {
	char id[CELLNET_ID_MAX + 1];
	uint32_t ip;
};

struct local_provider {
	char *state_dir;
	char *bridge;
	char *agent_path;
	char *cgroup_root;
	char *cluster_id;
	char *node_images; /* "" when the agents pull every image themselves */
	struct cellnet_cidr cidr;

	pthread_mutex_t guard_lock; /* one writer of the anti-spoofing rules at a time */
	pthread_mutex_t lock;	    /* guards everything below */
	pthread_cond_t idle;	    /* signalled when an id leaves busy */
	struct local_lease *leases;
	size_t nleases, leases_cap;
	char **busy; /* ids being launched or terminated */
	size_t nbusy, busy_cap;
	uint32_t hint;	  /* where the next address search starts */
	int bridge_index; /* the bridge as last set up, 0 until then */
};

/* The node's network namespace by name, for host-network units of local cells. Not under the
 * cells' prefix: tools that clean up cells by their netns must never take it for one. */
#define NODE_NETNS CELLNET_NETNS_DIR "/kiyotnode"

/* "<state_dir>/<id>[/<file>]", newly allocated. */
static char *cell_path(const struct local_provider *p, const char *id, const char *file)
{
	if (file)
		return xasprintf("%s/%s/%s", p->state_dir, id, file);
	return xasprintf("%s/%s", p->state_dir, id);
}

/* The record of cell id in the state directory; -ENOENT when there is none. */
static int record_load(const struct local_provider *p, const char *id, struct cell_record *out,
		       struct err *err)
{
	_cleanup_free_ char *dir = cell_path(p, id, NULL);

	return cell_record_load(dir, id, out, err);
}

/* Writes r into its cell's state directory. */
static int record_save(const struct local_provider *p, const struct cell_record *r, struct err *err)
{
	_cleanup_free_ char *dir = cell_path(p, r->cell_id, NULL);

	return cell_record_save(dir, r, err);
}

/* "/run/netns/kiyot-<id>", newly allocated. */
static char *netns_path(const char *id)
{
	return xasprintf("%s/%s%s", CELLNET_NETNS_DIR, CELLNET_NETNS_PREFIX, id);
}

/* "<cgroup_root>/<id>", newly allocated. */
static char *cgroup_rel(const struct local_provider *p, const char *id)
{
	return xasprintf("%s/%s", p->cgroup_root, id);
}

/* "<state_dir>/<id>/agent/agent.lock": the lock the cell's agent holds for its life. */
static char *agent_lock_path(const struct local_provider *p, const char *id)
{
	return cell_path(p, id, AGENT_DIR "/" PIDLOCK_AGENT_FILE);
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
static void agent_kill_holder(const struct local_provider *p, const char *id)
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
	p->leases[p->nleases++].ip = ip;
}

/* Drops id's address, if it holds one. */
static void lease_drop(struct local_provider *p, const char *id)
{
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < p->nleases; i++) {
		if (!strcmp(p->leases[i].id, id)) {
			p->leases[i] = p->leases[--p->nleases];
			break;
		}
	}
	pthread_mutex_unlock(&p->lock);
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

/* The anti-spoofing rules of every cell holding an address, written whole. One writer at a
 * time, each taking the leases as they are when its turn comes, so the last rules written
 * hold the newest leases. ebtables-restore takes no lock: another process writing the nat
 * table at the same moment makes it fail (a rule it read is gone when it deletes it), so a
 * failed write is tried again from a fresh read. */
static int spoof_sync(struct local_provider *p, struct err *err)
{
	_cleanup_free_ struct cellguard_cell *cells = NULL;
	size_t n;
	int ret;

	pthread_mutex_lock(&p->guard_lock);
	pthread_mutex_lock(&p->lock);
	n = p->nleases;
	cells = xcalloc(n + 1, sizeof(*cells));
	for (size_t i = 0; i < n; i++) {
		cellnet_veth_name(p->leases[i].id, cells[i].veth, sizeof(cells[i].veth));
		cells[i].ip = p->leases[i].ip;
	}
	pthread_mutex_unlock(&p->lock);
	for (int attempt = 1;; attempt++) {
		struct timespec pause = { 0, attempt * SPOOF_RETRY_MS * 1000000L };

		ret = cellguard_spoof_sync(&p->cidr, cells, n, err);
		if (ret == 0 || attempt == SPOOF_ATTEMPTS)
			break;
		log_warn("local provider: %s; writing them again", err->msg);
		err_clear(err);
		nanosleep(&pause, NULL);
	}
	pthread_mutex_unlock(&p->guard_lock);
	return ret;
}

/* Decodes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_octal(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Longer paths first, so nested mounts go before their parents. */
static int cmp_len_desc(const void *a, const void *b)
{
	size_t x = strlen(*(char *const *)a), y = strlen(*(char *const *)b);

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Detaches every mount at or below dir (the agent's overlay mounts of its units), deepest
 * first. */
static int unmount_below(const char *dir, struct err *err)
{
	_cleanup_free_ char *data = NULL;
	char **points = NULL;
	size_t n = 0, cap = 0, dlen = strlen(dir);
	char *line, *next;
	int ret = 0;

	if (fs_read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &data, NULL, err) < 0)
		return -err->code;
	for (line = data; line && *line; line = next) {
		char *f = line, *end;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		for (int i = 0; i < 4 && f; i++) {
			f = strchr(f, ' ');
			if (f)
				f++;
		}
		if (!f)
			continue;
		end = strchr(f, ' ');
		if (end)
			*end = '\0';
		unescape_octal(f);
		if (strncmp(f, dir, dlen) || (f[dlen] != '/' && f[dlen] != '\0'))
			continue;
		xgrow((void **)&points, &cap, n + 1, sizeof(*points));
		points[n++] = f;
	}
	if (n > 1)
		qsort(points, n, sizeof(*points), cmp_len_desc);
	for (size_t i = 0; i < n; i++) {
		if (umount2(points[i], MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT &&
		    ret == 0)
			ret = err_errno(err, "unmount %s", points[i]);
	}
	free(points);
	return ret;
}

/* Keeps the first error of a best-effort sequence in *first and logs the later ones. */
static void keep_first(struct err *first, struct err *e, const char *cell_id)
{
	if (!e->code)
		return;
	if (!first->code)
		*first = *e;
	else
		log_warn("local provider: cell %s teardown: %s", cell_id, e->msg);
	err_clear(e);
}

static void remove_all_hierarchies(const char *rel, const char *id, struct err *first)
{
	DIR *d = opendir("/sys/fs/cgroup");
	struct dirent *de;
	struct err e = ERR_INIT;

	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    strcmp(de->d_name, "unified") == 0)
			continue;
		if (cgroup_remove_tree(de->d_name, rel, &e) < 0)
			keep_first(first, &e, id);
	}
	closedir(d);
}

/* Removes everything a cell may own, whether or not launch finished: processes, mounts,
 * cgroups, veth, netns, state directory. Every step runs even if an earlier one failed;
 * returns the first failure. */
static int cell_teardown(struct local_provider *p, const char *id, struct err *err)
{
	_cleanup_free_ char *dir = cell_path(p, id, NULL);
	_cleanup_free_ char *ns = netns_path(id);
	_cleanup_free_ char *rel = cgroup_rel(p, id);
	struct err first = ERR_INIT, e = ERR_INIT;
	char veth[CELLNET_IFNAME_SIZE];
	struct cell_record r = { 0 };
	int nl, had_ns;

	if (record_load(p, id, &r, &e) == 0 && cell_record_agent_alive(&r))
		kill((pid_t)r.agent_pid, SIGKILL);
	cell_record_release(&r);
	err_clear(&e);
	agent_kill_holder(p, id); /* an agent the record does not name (a crash before it did) */
	for (size_t i = 0; i < NCTRL; i++) {
		if (cgroup_kill_tree(cell_controllers[i], rel, KILL_TIMEOUT_MS, &e) < 0)
			keep_first(&first, &e, id);
	}
	if (unmount_below(dir, &e) < 0)
		keep_first(&first, &e, id);
	if (cellnat_hostports_clear(id, &e) < 0)
		keep_first(&first, &e, id);
	remove_all_hierarchies(rel, id, &first);
	/* Releasing the netns makes the kernel destroy the veth pair in the background, which
	 * costs the caller ~1 ms where RTM_DELLINK waits 10-50 ms for an RCU grace period. The
	 * host name may linger for a moment; launch deletes such a stale link. Only a veth whose
	 * netns is already gone is deleted here. */
	had_ns = fs_exists(ns);
	if (nl_netns_delete(ns, &e) < 0)
		keep_first(&first, &e, id);
	if (!had_ns) {
		cellnet_veth_name(id, veth, sizeof(veth));
		nl = nl_open(-1, &e);
		if (nl >= 0) {
			nl_link_delete(nl, veth, &e);
			close(nl);
		}
		keep_first(&first, &e, id);
	}
	if (fs_remove_tree(dir, &e) < 0)
		keep_first(&first, &e, id);
	lease_drop(p, id);
	if (spoof_sync(p, &e) < 0)
		keep_first(&first, &e, id);
	if (first.code) {
		*err = first;
		return err_wrap(err, "cell %s: teardown incomplete, retry terminate", id);
	}
	return 0;
}

/* Makes sure the bridge exists with the gateway address and is up. Skips the work when the
 * bridge found is the one set up last time. */
static int bridge_ensure(struct local_provider *p, int nl, struct err *err)
{
	int index = nl_link_index(nl, p->bridge, err);

	if (index == -ENODEV) {
		err_clear(err);
		if (nl_bridge_create(nl, p->bridge, err) < 0 && err->code != EEXIST)
			return -err->code;
		err_clear(err);
		index = nl_link_index(nl, p->bridge, err);
	}
	if (index < 0)
		return err_wrap(err, "bridge %s", p->bridge);
	pthread_mutex_lock(&p->lock);
	if (p->bridge_index == index) {
		pthread_mutex_unlock(&p->lock);
		return index;
	}
	pthread_mutex_unlock(&p->lock);
	if (nl_addr_add(nl, index, cellnet_gateway(&p->cidr), p->cidr.prefix, err) < 0) {
		if (err->code != EEXIST)
			return err_wrap(err, "bridge %s", p->bridge);
		err_clear(err);
	}
	if (nl_link_up(nl, index, err) < 0)
		return err_wrap(err, "bridge %s", p->bridge);
	pthread_mutex_lock(&p->lock);
	p->bridge_index = index;
	pthread_mutex_unlock(&p->lock);
	return index;
}

/* Creates the veth with its peer as eth0 in the cell's netns. A host name still held by a
 * stale link (a cell whose netns the kernel is still freeing) is deleted and retried. */
static int veth_create(int nl, const char *veth, int bridge, int ns_fd, struct err *err)
{
	struct timespec pause = { 0, 10 * 1000000 };

	for (int attempt = 0;; attempt++) {
		int ret = nl_veth_create(nl, veth, bridge, "eth0", ns_fd, err);

		if (ret != -EEXIST || attempt >= VETH_RETRIES)
			return ret;
		err_clear(err);
		if (nl_link_delete(nl, veth, err) < 0)
			return -err->code;
		if (attempt)
			nanosleep(&pause, NULL);
	}
}

/* A step of cell_net_configure that finds its work done already is not an error. */
static int done_or_exists(int ret, struct err *err)
{
	if (ret == -EEXIST) {
		err_clear(err);
		return 0;
	}
	return ret;
}

/* Inside the cell: lo up, eth0 with the cell's Ethernet and IP addresses, default route via
 * the bridge. Each step may have been done already (a cell whose making a crash cut short). */
static int cell_net_configure(const struct local_provider *p, int ns_fd, uint32_t ip,
			      struct err *err)
{
	_cleanup_close_ int nl = nl_open(ns_fd, err);
	uint8_t mac[6];
	int lo, eth0;

	if (nl < 0)
		return nl;
	lo = nl_link_index(nl, "lo", err);
	if (lo < 0 || nl_link_up(nl, lo, err) < 0)
		return -err->code;
	eth0 = nl_link_index(nl, "eth0", err);
	if (eth0 < 0)
		return eth0;
	cellnet_mac(ip, mac);
	if (nl_link_set_mac(nl, eth0, mac, err) < 0 ||
	    done_or_exists(nl_addr_add(nl, eth0, ip, p->cidr.prefix, err), err) < 0 ||
	    nl_link_up(nl, eth0, err) < 0)
		return -err->code;
	return done_or_exists(nl_route_add_default(nl, eth0, cellnet_gateway(&p->cidr), err), err);
}

/* Hairpin mode on the cell's bridge port. With bridge netfilter (br_netfilter, on most
 * Kubernetes nodes) a cell calling its own hostPort or Service through the node is DNATed
 * while being bridged, and the bridge must send the frame back out the port it came in by. */
static void hairpin_on(const char *veth)
{
	_cleanup_free_ char *path = xasprintf("/sys/class/net/%s/brport/hairpin_mode", veth);
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0 || write(fd, "1", 1) != 1)
		log_warn("local provider: %s: %s; a cell cannot reach itself through the node",
			 path, strerror(errno));
	if (fd >= 0)
		close(fd);
}

/* Whether the cell's veth is whole: its host end on the bridge and eth0 in the cell's netns. */
static bool veth_whole(const struct local_provider *p, int nl, const char *veth, int ns_fd)
{
	_cleanup_free_ char *master = xasprintf("/sys/class/net/%s/master", veth);
	_cleanup_close_ int cell_nl = -1;
	struct err e = ERR_INIT;
	char target[PATH_MAX];
	ssize_t n = readlink(master, target, sizeof(target) - 1);
	const char *base;

	if (n <= 0 || nl_link_index(nl, veth, &e) < 0)
		return false;
	target[n] = '\0';
	base = strrchr(target, '/');
	if (strcmp(base ? base + 1 : target, p->bridge) != 0)
		return false;
	cell_nl = nl_open(ns_fd, &e);
	return cell_nl >= 0 && nl_link_index(cell_nl, "eth0", &e) >= 0;
}

/* Everything of the cell's network but the netns itself, in the netns ns_fd: the veth on the
 * bridge (made again when either end is missing or the host end is not on the bridge), the
 * cell side configured, the bridge's rules letting it send only as itself (before anything
 * runs in it), hairpin mode. Whatever of it exists already stays as it is. */
static int cell_net_setup(struct local_provider *p, const char *id, uint32_t ip, int ns_fd,
			  struct err *err)
{
	_cleanup_close_ int nl = nl_open(-1, err);
	char veth[CELLNET_IFNAME_SIZE];
	int bridge, host;

	if (nl < 0)
		return nl;
	bridge = bridge_ensure(p, nl, err);
	if (bridge < 0)
		return bridge;
	cellnet_veth_name(id, veth, sizeof(veth));
	if (!veth_whole(p, nl, veth, ns_fd) && veth_create(nl, veth, bridge, ns_fd, err) < 0)
		return -err->code;
	host = nl_link_index(nl, veth, err);
	if (host < 0 || nl_link_up(nl, host, err) < 0 ||
	    cell_net_configure(p, ns_fd, ip, err) < 0 || spoof_sync(p, err) < 0)
		return -err->code;
	hairpin_on(veth);
	return 0;
}

/* The cell's network: a fresh netns (replacing a stale one) and cell_net_setup. Returns an fd
 * of the netns for the agent to join. */
static int cell_net_create(struct local_provider *p, const char *id, uint32_t ip, struct err *err)
{
	_cleanup_free_ char *ns = netns_path(id);
	int ns_fd;

	if (fs_exists(ns) && nl_netns_delete(ns, err) < 0)
		return -err->code;
	ns_fd = nl_netns_create(ns, err);
	if (ns_fd < 0)
		return ns_fd;
	if (cell_net_setup(p, id, ip, ns_fd, err) < 0) {
		close(ns_fd);
		return -err->code;
	}
	return ns_fd;
}

/* The network of a cell that exists, made whole where a crash (or anyone) left it short: the
 * same result as cell_net_create, in the netns the cell has, so what runs in it keeps its
 * namespace. Returns an fd of the netns; -ENOENT when there is none (the cell must be made
 * again). */
static int cell_net_repair(struct local_provider *p, const char *id, const char *ipstr,
			   struct err *err)
{
	_cleanup_free_ char *ns = netns_path(id);
	uint32_t ip;
	int ns_fd;

	if (cellnet_parse_ip(ipstr, &ip, err) < 0)
		return -err->code;
	if (!nl_netns_is_mounted(ns))
		return err_set(err, ENOENT, "it has no network namespace %s", ns);
	ns_fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (ns_fd < 0)
		return err_errno(err, "open %s", ns);
	if (cell_net_setup(p, id, ip, ns_fd, err) < 0) {
		close(ns_fd);
		return err_wrap(err, "repairing its network");
	}
	return ns_fd;
}

/* Creates the cell's cgroups with the instance type's limits. A controller that is not
 * mounted is skipped with a warning; the rest must work. Fills joined[] with the cgroup.procs
 * paths the agent must join (NULL for skipped controllers). */
static int cell_cgroups_create(const struct local_provider *p, const struct cell_spec *spec,
			       char *joined[NCTRL], struct err *err)
{
	_cleanup_free_ char *rel = cgroup_rel(p, spec->cell_id);
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
		_cleanup_free_ char *dir = cell_path(p, spec->cell_id, AGENT_DIR);

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
	_cleanup_free_ char *boot = cell_path(p, spec->cell_id, "bootstrap.json");
	_cleanup_free_ char *logp = cell_path(p, spec->cell_id, "agent.log");
	_cleanup_free_ char *doc = bootstrap_for_cell(p, spec);
	char *argv[] = { p->agent_path, (char *)"--bootstrap", boot, NULL };
	char *envp[] = { (char *)AGENT_ENV_PATH, NULL };
	struct cellspawn cs = { argv, envp, cgroup_procs, NCTRL, ns_fd, logp };

	if (fs_write_file(boot, doc, strlen(doc), 0600, err) < 0)
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

	if (cell_teardown(p, id, &undo) < 0)
		log_warn("local provider: undoing failed launch: %s", undo.msg);
}

/* Builds a cell for spec whose id holds no record: reserve an address and record it first
 * (so a crash leaves something list and terminate find), then network, cgroups, agent. */
static int cell_build(struct local_provider *p, const struct cell_spec *spec, struct cell_info *out,
		      struct err *err)
{
	_cleanup_free_ char *dir = cell_path(p, spec->cell_id, NULL);
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
	ns_fd = cell_net_create(p, spec->cell_id, ip, err);
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
	int ns_fd = cell_net_repair(p, r->cell_id, r->ip, err);
	pid_t agent;
	int ret = 0;

	if (ns_fd < 0) {
		log_warn("local provider: cell %s: %s; making it again", r->cell_id, err->msg);
		err_clear(err);
		if (cell_teardown(p, r->cell_id, err) < 0)
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
	ret = record_load(p, spec->cell_id, &r, err);
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
	ret = cell_teardown(p, cell_id, err);
	busy_release(p, cell_id);
	return ret;
}

/* provider_ops.dial: the pod's network is the cell's namespace; a host-network pod's is the
 * node's, which is kiyot's own. */
static int local_dial(void *self, const char *cell_id, uint16_t port, int host_network,
		      struct err *err)
{
	_cleanup_free_ char *ns = host_network ? NULL : netns_path(cell_id);
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
	_cleanup_free_ char *boot = cell_path(p, cell_id, "bootstrap.json");
	_cleanup_free_ char *logp = cell_path(p, cell_id, "agent.log");
	_cleanup_free_ char *rel = cgroup_rel(p, cell_id);
	char *argv[] = { p->agent_path, (char *)"--bootstrap", boot, NULL };
	char *envp[] = { (char *)AGENT_ENV_PATH, NULL };
	char *procs[NCTRL] = { NULL };
	struct cell_record r = { 0 };
	int ns_fd = -1, ret;
	pid_t agent;

	if (!cellnet_id_valid(cell_id))
		return err_set(err, EINVAL, "cell id \"%s\" is not valid", cell_id);
	busy_acquire(p, cell_id);
	ret = record_load(p, cell_id, &r, err);
	if (ret < 0 || agent_adopt(p, &r))
		goto out;
	ns_fd = cell_net_repair(p, cell_id, r.ip, err);
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

		if (!cellnet_id_valid(de->d_name) || record_load(p, de->d_name, &r, &e) < 0)
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
	.boot_timeout_s = 30,
	.launch = local_launch,
	.terminate = local_terminate,
	.list = local_list,
	.heal = local_heal,
	.dial = local_dial,
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
		if (record_load(p, de->d_name, &r, &e) < 0) {
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
	_cleanup_free_ char *ns = netns_path(l->id);
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
	pthread_mutex_init(&p->guard_lock, NULL);
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->idle, NULL);
	leases_rebuild(p);
	for (size_t i = 0; cfg->restore_network && i < p->nleases; i++)
		mac_repair(&p->leases[i]);
	if (cfg->restore_network && spoof_sync(p, err) < 0) {
		local_destroy(p);
		return err_wrap(err, "local provider");
	}
	out->ops = &local_ops;
	out->self = p;
	return 0;
}
