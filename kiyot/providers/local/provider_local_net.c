/*
 * provider_local_net.c: a local cell's network: the host bridge, the cell's veth into its
 * namespace, its address, routes and Ethernet address, the anti-spoofing rules of every cell
 * holding an address, and the repair of what a crash left half made (see
 * provider_local_internal.h).
 */
#include "provider_local_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cellguard.h"
#include "cgroup.h"
#include "clock.h"
#include "fsutil.h"
#include "log.h"
#include "netlink.h"
#include "proc.h"
#include "xalloc.h"

/* The lock every kiyot process of the node (two kiyots, `kiyot local-cell`, the tests) holds
 * while it writes the nat table, so that they never make each other's writes fail; -1 when it
 * cannot be had (the write goes on, and is tried again if it fails). */
static int spoof_lock(void)
{
	int fd = open(SPOOF_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd >= 0 && flock(fd, LOCK_EX) < 0) {
		close(fd);
		fd = -1;
	}
	if (fd < 0)
		log_debug("local provider: %s: %s; writing the rules without it", SPOOF_LOCK,
			  strerror(errno));
	return fd;
}

/* The lease of id, or NULL. Needs p->lock. */
static struct local_lease *lease_find(struct local_provider *p, const char *id)
{
	for (size_t i = 0; i < p->nleases; i++)
		if (strcmp(p->leases[i].id, id) == 0)
			return &p->leases[i];
	return NULL;
}

/* local_spoof_sync with the guard lock held: on success every lease written is marked
 * guarded, and the network's chain and jump are there while there are cells. */
static int spoof_sync_guarded(struct local_provider *p, struct err *err)
{
	_cleanup_free_ struct cellguard_cell *cells = NULL;
	_cleanup_free_ struct local_lease *written = NULL;
	size_t n;
	int ret, lock;

	pthread_mutex_lock(&p->lock);
	n = p->nleases;
	cells = xcalloc(n + 1, sizeof(*cells));
	written = xcalloc(n + 1, sizeof(*written));
	for (size_t i = 0; i < n; i++) {
		cellnet_veth_name(p->leases[i].id, cells[i].veth, sizeof(cells[i].veth));
		cells[i].ip = p->leases[i].ip;
		written[i] = p->leases[i];
	}
	pthread_mutex_unlock(&p->lock);
	lock = spoof_lock();
	for (int attempt = 1;; attempt++) {
		struct timespec pause = { 0, attempt * SPOOF_RETRY_MS * 1000000L };

		ret = cellguard_spoof_sync(&p->cidr, cells, n, err);
		if (ret == 0 || attempt == SPOOF_ATTEMPTS)
			break;
		log_warn("local provider: %s; writing them again", err->msg);
		err_clear(err);
		nanosleep(&pause, NULL);
	}
	if (lock >= 0)
		close(lock);
	if (ret < 0)
		return ret;
	pthread_mutex_lock(&p->lock);
	for (size_t i = 0; i < n; i++) {
		struct local_lease *l = lease_find(p, written[i].id);

		if (l)
			l->guarded = true;
	}
	p->guard_written = n > 0;
	pthread_mutex_unlock(&p->lock);
	return 0;
}

/* The anti-spoofing rules of every cell holding an address, written whole. One writer at a
 * time, each taking the leases as they are when its turn comes, so the last rules written
 * hold the newest leases. ebtables-restore takes no lock: another process writing the nat
 * table at the same moment makes it fail (a rule it read is gone when it deletes it): the node's
 * kiyot processes take turns (spoof_lock), and a write another program spoiled is tried again
 * from a fresh read. */
int local_spoof_sync(struct local_provider *p, struct err *err)
{
	int ret;

	pthread_mutex_lock(&p->guard_lock);
	ret = spoof_sync_guarded(p, err);
	pthread_mutex_unlock(&p->guard_lock);
	return ret;
}

/* One cell come (add: its id, holding an address) or gone (gone: its id): one restore of its
 * chain and the network's, whose jumps are those of the guarded leases; everything written
 * whole when nothing was yet (the first cell), or when that restore fails (the node's rules
 * are not as written: a firewall reload, another program's write). */
static int spoof_update(struct local_provider *p, const char *add, const char *gone,
			struct err *err)
{
	_cleanup_free_ struct cellguard_cell *cells = NULL;
	struct cellguard_cell one = { 0 };
	char gone_veth[CELLNET_IFNAME_SIZE];
	struct local_lease *l;
	bool ready;
	size_t n = 0;
	int ret = -1, lock;

	pthread_mutex_lock(&p->guard_lock);
	pthread_mutex_lock(&p->lock);
	ready = p->guard_written;
	cells = xcalloc(p->nleases + 1, sizeof(*cells));
	for (size_t i = 0; i < p->nleases; i++) {
		l = &p->leases[i];
		if (add && strcmp(l->id, add) == 0) {
			cellnet_veth_name(l->id, one.veth, sizeof(one.veth));
			one.ip = l->ip;
		} else if (l->guarded) {
			cellnet_veth_name(l->id, cells[n].veth, sizeof(cells[n].veth));
			cells[n++].ip = l->ip;
		}
	}
	pthread_mutex_unlock(&p->lock);
	if (gone)
		cellnet_veth_name(gone, gone_veth, sizeof(gone_veth));
	if (ready && (!add || one.veth[0])) {
		lock = spoof_lock();
		ret = cellguard_spoof_update(&p->cidr, cells, n, add ? &one : NULL,
					     gone ? gone_veth : NULL, err);
		if (lock >= 0)
			close(lock);
		if (ret < 0) {
			log_info("local provider: %s; writing every cell's again", err->msg);
			err_clear(err);
		}
	}
	if (ret < 0) {
		ret = spoof_sync_guarded(p, err);
	} else if (add) {
		pthread_mutex_lock(&p->lock);
		l = lease_find(p, add);
		if (l)
			l->guarded = true;
		pthread_mutex_unlock(&p->lock);
	}
	pthread_mutex_unlock(&p->guard_lock);
	return ret;
}

int local_spoof_add(struct local_provider *p, const char *id, struct err *err)
{
	return spoof_update(p, id, NULL, err);
}

int local_spoof_remove(struct local_provider *p, const char *id, struct err *err)
{
	return spoof_update(p, NULL, id, err);
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

int local_bridge_setup(struct local_provider *p, struct err *err)
{
	_cleanup_close_ int nl = nl_open(-1, err);

	if (nl < 0)
		return nl;
	return bridge_ensure(p, nl, err) < 0 ? -err->code : 0;
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
	    cell_net_configure(p, ns_fd, ip, err) < 0 || local_spoof_add(p, id, err) < 0)
		return -err->code;
	hairpin_on(veth);
	return 0;
}

/* The cell's network: a fresh netns (replacing a stale one) and cell_net_setup. Returns an fd
 * of the netns for the agent to join. */
int local_cell_net_create(struct local_provider *p, const char *id, uint32_t ip, struct err *err)
{
	_cleanup_free_ char *ns = local_netns_path(id);
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
int local_cell_net_repair(struct local_provider *p, const char *id, const char *ipstr,
			  struct err *err)
{
	_cleanup_free_ char *ns = local_netns_path(id);
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
