#include "netlink.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "log.h"
#include "xalloc.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

#define NL_MSG_SIZE 4096
#define NL_RECV_SIZE 32768
/* Replies read while waiting for one ack; the kernel sends one or two. */
#define NL_MAX_REPLIES 64
#define NL_MAX_NEST 4

/* One request under construction: a fixed buffer, since every request here is small. */
struct nl_msg {
	union {
		struct nlmsghdr h;
		char buf[NL_MSG_SIZE];
	} u;
	size_t nest[NL_MAX_NEST];
	int depth;
	int overflow;
};

static unsigned nl_seq;

/* Starts a request of type with flags (NLM_F_REQUEST | NLM_F_ACK are always added). */
static void msg_init(struct nl_msg *m, int type, int flags)
{
	memset(m, 0, sizeof(*m));
	m->u.h.nlmsg_len = NLMSG_LENGTH(0);
	m->u.h.nlmsg_type = (unsigned short)type;
	m->u.h.nlmsg_flags = (unsigned short)(flags | NLM_F_REQUEST | NLM_F_ACK);
	m->u.h.nlmsg_seq = __atomic_add_fetch(&nl_seq, 1, __ATOMIC_RELAXED);
}

/* Appends len bytes (padded to 4) to the message; marks overflow instead of writing past. */
static void *msg_put(struct nl_msg *m, const void *data, size_t len)
{
	size_t at = NLMSG_ALIGN(m->u.h.nlmsg_len);
	void *p;

	if (at + NLMSG_ALIGN(len) > sizeof(m->u.buf)) {
		m->overflow = 1;
		return NULL;
	}
	p = m->u.buf + at;
	memset(p, 0, NLMSG_ALIGN(len));
	if (data)
		memcpy(p, data, len);
	m->u.h.nlmsg_len = (unsigned)(at + NLMSG_ALIGN(len));
	return p;
}

/* Appends one attribute. */
static void attr_put(struct nl_msg *m, int type, const void *data, size_t len)
{
	struct rtattr a = { .rta_len = (unsigned short)RTA_LENGTH(len),
			    .rta_type = (unsigned short)type };

	if (!msg_put(m, &a, sizeof(a)))
		return;
	msg_put(m, data, len);
	/* the payload was padded by msg_put; rta_len stays exact, as the kernel expects */
}

static void attr_put_u32(struct nl_msg *m, int type, uint32_t v)
{
	attr_put(m, type, &v, sizeof(v));
}

static void attr_put_str(struct nl_msg *m, int type, const char *s)
{
	attr_put(m, type, s, strlen(s) + 1);
}

/* Opens a nested attribute; close it with attr_nest_end. */
static void attr_nest_start(struct nl_msg *m, int type)
{
	size_t at = NLMSG_ALIGN(m->u.h.nlmsg_len);

	if (m->depth >= NL_MAX_NEST) {
		m->overflow = 1;
		return;
	}
	m->nest[m->depth++] = at;
	attr_put(m, type, NULL, 0);
}

/* Closes the innermost nest: its length now covers everything appended since. */
static void attr_nest_end(struct nl_msg *m)
{
	struct rtattr *a;

	if (m->depth <= 0 || m->overflow)
		return;
	a = (struct rtattr *)(m->u.buf + m->nest[--m->depth]);
	a->rta_len = (unsigned short)(m->u.h.nlmsg_len - m->nest[m->depth]);
}

/* Copies the kernel's extended-ack text (if any) from an error message into msg. */
static void ext_ack_text(const struct nlmsghdr *h, char *msg, size_t size)
{
	const struct nlmsgerr *e = NLMSG_DATA(h);
	size_t off = sizeof(*e);
	size_t len = h->nlmsg_len - NLMSG_HDRLEN;

	msg[0] = '\0';
	if (!(h->nlmsg_flags & NLM_F_ACK_TLVS))
		return;
	if (!(h->nlmsg_flags & NLM_F_CAPPED))
		off += e->msg.nlmsg_len - sizeof(e->msg);
	for (const char *p = (const char *)e + off; off + sizeof(struct rtattr) <= len;) {
		const struct rtattr *a = (const struct rtattr *)p;

		if (a->rta_len < sizeof(*a) || off + a->rta_len > len)
			return;
		if (a->rta_type == NLMSGERR_ATTR_MSG) {
			size_t n = a->rta_len - sizeof(*a);

			if (n >= size)
				n = size - 1;
			memcpy(msg, RTA_DATA(a), n);
			msg[n] = '\0';
			return;
		}
		off += RTA_ALIGN(a->rta_len);
		p += RTA_ALIGN(a->rta_len);
	}
}

/* Sends m and reads until its ack. A data reply (RTM_NEWLINK to a GETLINK) is passed to
 * on_reply. Returns 0 or the kernel's negative errno, with what in the message. */
static int nl_talk(int nl, struct nl_msg *m, void (*on_reply)(const struct nlmsghdr *, void *),
		   void *arg, const char *what, struct err *err)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	_cleanup_free_ char *rbuf = NULL;

	if (m->overflow || m->depth)
		return err_set(err, EMSGSIZE, "%s: netlink request too large", what);
	if (sendto(nl, m->u.buf, m->u.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) <
	    0)
		return err_errno(err, "%s: netlink send", what);
	rbuf = xmalloc(NL_RECV_SIZE);
	for (int round = 0; round < NL_MAX_REPLIES; round++) {
		ssize_t n = recv(nl, rbuf, NL_RECV_SIZE, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(err, "%s: netlink receive", what);
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, (unsigned)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != m->u.h.nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				char text[200];

				if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
					return err_set(err, EPROTO, "%s: short netlink error",
						       what);
				if (!e->error)
					return 0;
				ext_ack_text(h, text, sizeof(text));
				errno = -e->error;
				if (text[0])
					return err_set(err, -e->error, "%s: %s (%s)", what,
						       strerror(-e->error), text);
				return err_errno(err, "%s", what);
			}
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (on_reply)
				on_reply(h, arg);
		}
	}
	return err_set(err, EPROTO, "%s: no netlink ack", what);
}

/* Switches the calling thread into ns_fd's netns; *saved gets an fd of the old one. */
static int netns_enter(int ns_fd, int *saved, struct err *err)
{
	*saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*saved < 0)
		return err_errno(err, "open /proc/thread-self/ns/net");
	if (setns(ns_fd, CLONE_NEWNET) < 0) {
		err_errno(err, "setns");
		close(*saved);
		return -err->code;
	}
	return 0;
}

/* Returns the thread to the netns it was in. Failing here would leave the thread in a cell's
 * network for the rest of its life, so it aborts rather than carry on in the wrong place. */
static void netns_leave(int saved)
{
	if (setns(saved, CLONE_NEWNET) < 0) {
		log_error("netlink: cannot return to the original network namespace: %s",
			  strerror(errno));
		abort();
	}
	close(saved);
}

/* Opens a NETLINK_ROUTE socket with extended acks, in ns_fd's netns or the current one. */
int nl_open(int ns_fd, struct err *err)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int saved = -1, fd, one = 1, ret;

	if (ns_fd >= 0) {
		ret = netns_enter(ns_fd, &saved, err);
		if (ret < 0)
			return err_wrap(err, "netlink socket in a cell netns");
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		err_errno(err, "netlink socket");
	if (saved >= 0)
		netns_leave(saved);
	if (fd < 0)
		return -err->code;
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err_errno(err, "netlink bind");
		close(fd);
		return -err->code;
	}
	return fd;
}

/* Picks ifi_index out of an RTM_NEWLINK reply. */
static void on_link(const struct nlmsghdr *h, void *arg)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(h);

	if (h->nlmsg_type == RTM_NEWLINK && h->nlmsg_len >= NLMSG_LENGTH(sizeof(*ifi)))
		*(int *)arg = ifi->ifi_index;
}

/* RTM_GETLINK by name. */
int nl_link_index(int nl, const char *name, struct err *err)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct nl_msg m;
	int index = 0, ret;

	msg_init(&m, RTM_GETLINK, 0);
	msg_put(&m, &ifi, sizeof(ifi));
	attr_put_str(&m, IFLA_IFNAME, name);
	ret = nl_talk(nl, &m, on_link, &index, name, err);
	if (ret < 0)
		return ret;
	if (index <= 0)
		return err_set(err, ENODEV, "%s: no such link", name);
	return index;
}

/* RTM_NEWLINK kind "bridge", created up. */
int nl_bridge_create(int nl, const char *name, struct err *err)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC,
				 .ifi_flags = IFF_UP,
				 .ifi_change = IFF_UP };
	struct nl_msg m;

	msg_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	msg_put(&m, &ifi, sizeof(ifi));
	attr_put_str(&m, IFLA_IFNAME, name);
	attr_nest_start(&m, IFLA_LINKINFO);
	attr_put_str(&m, IFLA_INFO_KIND, "bridge");
	attr_nest_end(&m);
	return nl_talk(nl, &m, NULL, NULL, name, err) < 0 ? err_wrap(err, "create bridge") : 0;
}

/* RTM_NEWLINK kind "veth" with the peer's ifinfomsg, name and netns in VETH_INFO_PEER. The
 * host end is created up; the peer must be set up afterwards. */
int nl_veth_create(int nl, const char *name, int master_index, const char *peer, int peer_ns_fd,
		   struct err *err)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC,
				 .ifi_flags = IFF_UP,
				 .ifi_change = IFF_UP };
	struct nl_msg m;

	msg_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	msg_put(&m, &ifi, sizeof(ifi));
	attr_put_str(&m, IFLA_IFNAME, name);
	if (master_index > 0)
		attr_put_u32(&m, IFLA_MASTER, (uint32_t)master_index);
	attr_nest_start(&m, IFLA_LINKINFO);
	attr_put_str(&m, IFLA_INFO_KIND, "veth");
	attr_nest_start(&m, IFLA_INFO_DATA);
	attr_nest_start(&m, VETH_INFO_PEER);
	/* the peer cannot be created up: it has no partner yet when the kernel configures it */
	ifi.ifi_flags = 0;
	ifi.ifi_change = 0;
	msg_put(&m, &ifi, sizeof(ifi));
	attr_put_str(&m, IFLA_IFNAME, peer);
	if (peer_ns_fd >= 0)
		attr_put_u32(&m, IFLA_NET_NS_FD, (uint32_t)peer_ns_fd);
	attr_nest_end(&m);
	attr_nest_end(&m);
	attr_nest_end(&m);
	return nl_talk(nl, &m, NULL, NULL, name, err) < 0 ? err_wrap(err, "create veth") : 0;
}

/* Starts an RTM_NEWLINK that changes the existing link index. */
static void msg_link_change(struct nl_msg *m, int index, unsigned flags, unsigned change)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC,
				 .ifi_index = index,
				 .ifi_flags = flags,
				 .ifi_change = change };

	msg_init(m, RTM_NEWLINK, 0);
	msg_put(m, &ifi, sizeof(ifi));
}

/* Sets IFF_UP on a link. */
int nl_link_up(int nl, int index, struct err *err)
{
	struct nl_msg m;

	msg_link_change(&m, index, IFF_UP, IFF_UP);
	return nl_talk(nl, &m, NULL, NULL, "set link up", err);
}

/* IFLA_ADDRESS on an existing link. */
int nl_link_set_mac(int nl, int index, const uint8_t mac[6], struct err *err)
{
	struct nl_msg m;

	msg_link_change(&m, index, 0, 0);
	attr_put(&m, IFLA_ADDRESS, mac, 6);
	return nl_talk(nl, &m, NULL, NULL, "set link address", err);
}

/* Where on_link_mac puts what it found. */
struct link_mac {
	uint8_t mac[6];
	int found;
};

/* Picks a 6-byte IFLA_ADDRESS out of an RTM_NEWLINK reply. */
static void on_link_mac(const struct nlmsghdr *h, void *arg)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	struct link_mac *out = arg;
	const struct rtattr *a;
	unsigned int len;

	if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)))
		return;
	len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*ifi));
	for (a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == IFLA_ADDRESS && RTA_PAYLOAD(a) == 6) {
			memcpy(out->mac, RTA_DATA(a), 6);
			out->found = 1;
		}
	}
}

/* RTM_GETLINK by index. */
int nl_link_mac(int nl, int index, uint8_t mac[6], struct err *err)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = index };
	struct link_mac got = { .found = 0 };
	struct nl_msg m;
	int ret;

	msg_init(&m, RTM_GETLINK, 0);
	msg_put(&m, &ifi, sizeof(ifi));
	ret = nl_talk(nl, &m, on_link_mac, &got, "get link address", err);
	if (ret < 0)
		return ret;
	if (!got.found)
		return err_set(err, ENODATA, "link %d has no Ethernet address", index);
	memcpy(mac, got.mac, 6);
	return 0;
}

/* IFLA_NET_NS_FD (and IFLA_IFNAME to rename on the way) on an existing link. */
int nl_link_set_netns(int nl, int index, int ns_fd, const char *new_name, struct err *err)
{
	struct nl_msg m;

	msg_link_change(&m, index, 0, 0);
	attr_put_u32(&m, IFLA_NET_NS_FD, (uint32_t)ns_fd);
	if (new_name)
		attr_put_str(&m, IFLA_IFNAME, new_name);
	return nl_talk(nl, &m, NULL, NULL, "move link to netns", err);
}

/* RTM_DELLINK by name; ENODEV means it is already gone. */
int nl_link_delete(int nl, const char *name, struct err *err)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct nl_msg m;
	int ret;

	msg_init(&m, RTM_DELLINK, 0);
	msg_put(&m, &ifi, sizeof(ifi));
	attr_put_str(&m, IFLA_IFNAME, name);
	ret = nl_talk(nl, &m, NULL, NULL, name, err);
	if (ret == -ENODEV) {
		err_clear(err);
		return 0;
	}
	return ret < 0 ? err_wrap(err, "delete link") : 0;
}

/* RTM_NEWADDR with local, address and broadcast, like `ip addr add a/p brd +`. */
int nl_addr_add(int nl, int index, uint32_t ip, unsigned prefix, struct err *err)
{
	struct ifaddrmsg ifa = { .ifa_family = AF_INET,
				 .ifa_prefixlen = (unsigned char)prefix,
				 .ifa_index = (unsigned)index };
	uint32_t mask = prefix ? ~(uint32_t)0 << (32 - prefix) : 0;
	uint32_t addr = htonl(ip), brd = htonl(ip | ~mask);
	struct nl_msg m;

	msg_init(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
	msg_put(&m, &ifa, sizeof(ifa));
	attr_put(&m, IFA_LOCAL, &addr, sizeof(addr));
	attr_put(&m, IFA_ADDRESS, &addr, sizeof(addr));
	if (prefix < 31)
		attr_put(&m, IFA_BROADCAST, &brd, sizeof(brd));
	return nl_talk(nl, &m, NULL, NULL, "add address", err);
}

/* RTM_NEWROUTE 0.0.0.0/0 via gw dev index in the main table. */
int nl_route_add_default(int nl, int index, uint32_t gw, struct err *err)
{
	struct rtmsg rt = { .rtm_family = AF_INET,
			    .rtm_table = RT_TABLE_MAIN,
			    .rtm_protocol = RTPROT_BOOT,
			    .rtm_scope = RT_SCOPE_UNIVERSE,
			    .rtm_type = RTN_UNICAST };
	uint32_t addr = htonl(gw);
	struct nl_msg m;

	msg_init(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	msg_put(&m, &rt, sizeof(rt));
	attr_put(&m, RTA_GATEWAY, &addr, sizeof(addr));
	attr_put_u32(&m, RTA_OIF, (uint32_t)index);
	return nl_talk(nl, &m, NULL, NULL, "add default route", err);
}

/* Makes dir a shared mount (binding it on itself first if it is not a mount point), so that
 * netns mounts made under it show in every mount namespace, as `ip netns` arranges. */
static int make_shared_dir(const char *dir, struct err *err)
{
	if (mount("", dir, "none", MS_SHARED | MS_REC, NULL) == 0)
		return 0;
	if (errno != EINVAL)
		return err_errno(err, "make %s a shared mount", dir);
	if (mount(dir, dir, "none", MS_BIND | MS_REC, NULL) < 0)
		return err_errno(err, "bind mount %s on itself", dir);
	if (mount("", dir, "none", MS_SHARED | MS_REC, NULL) < 0)
		return err_errno(err, "make %s a shared mount", dir);
	return 0;
}

/* Unshares a new netns on this thread, bind-mounts it on path, opens it, and returns the thread
 * to its old netns. */
int nl_netns_create(const char *path, struct err *err)
{
	_cleanup_free_ char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	int fd, saved, ns_fd = -1;

	if (!slash || slash == dir)
		return err_set(err, EINVAL, "netns path %s: want /dir/name", path);
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return err_errno(err, "mkdir %s", dir);
	if (make_shared_dir(dir, err) < 0)
		return -err->code;
	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(err, "create %s", path);
	close(fd);
	saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (saved < 0) {
		err_errno(err, "open /proc/thread-self/ns/net");
		goto fail_file;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		err_errno(err, "unshare a network namespace");
		close(saved);
		goto fail_file;
	}
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0)
		err_errno(err, "bind mount netns on %s", path);
	else if ((ns_fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		err_errno(err, "open %s", path);
	netns_leave(saved);
	if (ns_fd >= 0)
		return ns_fd;
	umount2(path, MNT_DETACH);
fail_file:
	unlink(path);
	return -err->code;
}

/* See the header. */
int nl_netns_name_self(const char *path, struct err *err)
{
	struct stat self, cur;
	int fd;

	if (stat("/proc/thread-self/ns/net", &self) < 0)
		return err_errno(err, "stat /proc/thread-self/ns/net");
	if (nl_netns_is_mounted(path) && stat(path, &cur) == 0 && cur.st_ino == self.st_ino &&
	    cur.st_dev == self.st_dev)
		return 0;
	if (nl_netns_delete(path, err) < 0)
		return -err->code;
	{
		_cleanup_free_ char *dir = xstrdup(path);
		char *slash = strrchr(dir, '/');

		if (!slash || slash == dir)
			return err_set(err, EINVAL, "netns path %s: want /dir/name", path);
		*slash = '\0';
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			return err_errno(err, "mkdir %s", dir);
		if (make_shared_dir(dir, err) < 0)
			return -err->code;
	}
	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(err, "create %s", path);
	close(fd);
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0) {
		err_errno(err, "bind mount this netns on %s", path);
		unlink(path);
		return -err->code;
	}
	return 0;
}

/* umount + unlink, each tolerating "not there". */
int nl_netns_delete(const char *path, struct err *err)
{
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return err_errno(err, "unmount %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return err_errno(err, "remove %s", path);
	return 0;
}

/* statfs: a mounted netns lives on nsfs. */
int nl_netns_is_mounted(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && sf.f_type == NSFS_MAGIC;
}
