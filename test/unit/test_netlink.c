/*
 * test_netlink.c: rtnetlink calls against the real kernel (needs root): named netns, bridge,
 * veth into a netns, addresses and routes. Uses names of its own (kvtestnl*, 10.198.0.0/24)
 * so it never touches a running kiyot's bridge.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "testutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "providers/local/netlink.h"

#define T_BRIDGE "kvtestnl0"
#define T_VETH "kvtestnl1"
#define T_PEER "kvtestnl2"
#define T_NETNS "/run/netns/kvtestnl-cell"
#define T_GW 0x0ac60001u   /* 10.198.0.1 */
#define T_CELL 0x0ac60007u /* 10.198.0.7 */

/* Removes whatever a test may have left, whether it passed or not. */
static int cleanup(void **state)
{
	struct err err = ERR_INIT;
	int nl = nl_open(-1, &err);

	(void)state;
	if (nl >= 0) {
		nl_link_delete(nl, T_VETH, &err);
		nl_link_delete(nl, T_BRIDGE, &err);
		close(nl);
	}
	nl_netns_delete(T_NETNS, &err);
	return 0;
}

/* In a child that joined the netns at ns_path, binds a UDP socket to ip: the kernel accepts
 * that only for an address assigned inside that netns. Returns the child's exit code. */
static int bind_in_netns(const char *ns_path, uint32_t ip)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(ip) };
		int ns = open(ns_path, O_RDONLY);
		int fd;

		if (ns < 0 || setns(ns, CLONE_NEWNET) < 0)
			_exit(2);
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		_exit(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 3;
}

/* A named netns is a mounted nsfs file under /run/netns, like `ip netns add` makes. */
static void test_netlink__netns_create_mounts_and_delete_removes(void **state)
{
	struct err err = ERR_INIT;
	int fd;

	(void)state;
	fd = nl_netns_create(T_NETNS, &err);
	assert_true(fd >= 0);
	close(fd);
	assert_true(nl_netns_is_mounted(T_NETNS));
	assert_int_equal(nl_netns_create(T_NETNS, &err), -EEXIST);
	assert_ok(nl_netns_delete(T_NETNS, &err));
	assert_false(nl_netns_is_mounted(T_NETNS));
	assert_int_equal(access(T_NETNS, F_OK), -1);
	/* deleting again is fine */
	assert_ok(nl_netns_delete(T_NETNS, &err));
}

/* The thread that created a netns is back in its own netns afterwards. */
static void test_netlink__netns_create_leaves_caller_in_its_netns(void **state)
{
	struct stat before, after;
	struct err err = ERR_INIT;
	int fd;

	(void)state;
	assert_int_equal(stat("/proc/thread-self/ns/net", &before), 0);
	fd = nl_netns_create(T_NETNS, &err);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(stat("/proc/thread-self/ns/net", &after), 0);
	assert_int_equal(before.st_ino, after.st_ino);
}

/* A missing link is reported as ENODEV on lookup, and deleting it is not an error. */
static void test_netlink__missing_link_lookup_enodev_delete_ok(void **state)
{
	struct err err = ERR_INIT;
	int nl = nl_open(-1, &err);

	(void)state;
	assert_true(nl >= 0);
	assert_int_equal(nl_link_index(nl, "kvtestnl-none", &err), -ENODEV);
	assert_ok(nl_link_delete(nl, "kvtestnl-none", &err));
	close(nl);
}

/* Bridge, veth with its peer as eth0 inside the netns, address and default route: the cell
 * side holds its address and the host side is enslaved to the bridge. */
static void test_netlink__veth_peer_lands_in_netns_configured(void **state)
{
	struct err err = ERR_INIT;
	int nl, ns, nlns, br, eth0, lo, veth;
	char path[128];
	char master[32] = "";
	ssize_t n;

	(void)state;
	nl = nl_open(-1, &err);
	assert_true(nl >= 0);
	assert_ok(nl_bridge_create(nl, T_BRIDGE, &err));
	assert_int_equal(nl_bridge_create(nl, T_BRIDGE, &err), -EEXIST);
	br = nl_link_index(nl, T_BRIDGE, &err);
	assert_true(br > 0);
	assert_ok(nl_addr_add(nl, br, T_GW, 24, &err));
	assert_int_equal(nl_addr_add(nl, br, T_GW, 24, &err), -EEXIST);
	ns = nl_netns_create(T_NETNS, &err);
	assert_true(ns >= 0);
	assert_ok(nl_veth_create(nl, T_VETH, br, "eth0", ns, &err));
	veth = nl_link_index(nl, T_VETH, &err);
	assert_true(veth > 0);
	/* the host end is a port of the bridge */
	snprintf(path, sizeof(path), "/sys/class/net/%s/master", T_VETH);
	n = readlink(path, master, sizeof(master) - 1);
	assert_true(n > 0);
	master[n] = '\0';
	assert_non_null(strstr(master, T_BRIDGE));
	/* eth0 is not in the host netns but in the cell's */
	nlns = nl_open(ns, &err);
	assert_true(nlns >= 0);
	eth0 = nl_link_index(nlns, "eth0", &err);
	assert_true(eth0 > 0);
	lo = nl_link_index(nlns, "lo", &err);
	assert_ok(nl_link_up(nlns, lo, &err));
	assert_ok(nl_addr_add(nlns, eth0, T_CELL, 24, &err));
	assert_ok(nl_link_up(nlns, eth0, &err));
	assert_ok(nl_route_add_default(nlns, eth0, T_GW, &err));
	assert_int_equal(bind_in_netns(T_NETNS, T_CELL), 0);
	assert_int_not_equal(bind_in_netns(T_NETNS, T_CELL + 1), 0);
	close(nlns);
	close(ns);
	/* deleting the host end takes the pair away */
	assert_ok(nl_link_delete(nl, T_VETH, &err));
	assert_int_equal(nl_link_index(nl, T_VETH, &err), -ENODEV);
	close(nl);
}

/* A link can be moved into a netns and renamed on the way. */
static void test_netlink__link_moves_into_netns_renamed(void **state)
{
	struct err err = ERR_INIT;
	int nl, ns, nlns, idx;

	(void)state;
	nl = nl_open(-1, &err);
	assert_true(nl >= 0);
	assert_ok(nl_veth_create(nl, T_VETH, 0, T_PEER, -1, &err));
	idx = nl_link_index(nl, T_PEER, &err);
	assert_true(idx > 0);
	ns = nl_netns_create(T_NETNS, &err);
	assert_true(ns >= 0);
	assert_ok(nl_link_set_netns(nl, idx, ns, "moved0", &err));
	assert_int_equal(nl_link_index(nl, T_PEER, &err), -ENODEV);
	nlns = nl_open(ns, &err);
	assert_true(nl_link_index(nlns, "moved0", &err) > 0);
	close(nlns);
	close(ns);
	close(nl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_netlink__netns_create_mounts_and_delete_removes,
					  cleanup),
		cmocka_unit_test_teardown(test_netlink__netns_create_leaves_caller_in_its_netns,
					  cleanup),
		cmocka_unit_test_teardown(test_netlink__missing_link_lookup_enodev_delete_ok,
					  cleanup),
		cmocka_unit_test_teardown(test_netlink__veth_peer_lands_in_netns_configured,
					  cleanup),
		cmocka_unit_test_teardown(test_netlink__link_moves_into_netns_renamed, cleanup),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "test_netlink: needs root (network namespaces); skipped\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, cleanup, cleanup);
}
