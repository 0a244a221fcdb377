/*
 * Unit tests for cell-agent/imdsguard.c: a process in a cgroup with the guard cannot connect
 * to the instance metadata service's addresses (IPv4, IPv6, IPv4-mapped), can connect
 * anywhere else, and a process outside the cgroup is not touched. Real programs in the real
 * kernel: a cgroup v2 hierarchy is mounted for the test where the node has none.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "imdsguard.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

struct fixture {
	char mnt[64];  /* a cgroup v2 hierarchy mounted for the test, or "" */
	char dir[128]; /* the guarded cgroup */
	int listener;  /* a TCP listener on 127.0.0.1 */
	uint16_t port;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	struct statfs sf;
	const char *root = "/sys/fs/cgroup";

	if (statfs(root, &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC) {
		snprintf(f->mnt, sizeof(f->mnt), "/tmp/imdsguard-cg2-%d", (int)getpid());
		if (mkdir(f->mnt, 0700) < 0 || mount("none", f->mnt, "cgroup2", 0, NULL) < 0) {
			print_error("cannot mount a cgroup v2 hierarchy (%s): run as root\n",
				    strerror(errno));
			rmdir(f->mnt);
			free(f);
			return -1;
		}
		root = f->mnt;
	}
	snprintf(f->dir, sizeof(f->dir), "%s/imdsguard-test-%d", root, (int)getpid());
	assert_int_equal(mkdir(f->dir, 0755), 0);
	f->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->listener >= 0);
	assert_int_equal(bind(f->listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->listener, 8), 0);
	assert_int_equal(getsockname(f->listener, (struct sockaddr *)&sa, &len), 0);
	f->port = ntohs(sa.sin_port);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	close(f->listener);
	rmdir(f->dir);
	if (f->mnt[0]) {
		umount2(f->mnt, MNT_DETACH);
		rmdir(f->mnt);
	}
	free(f);
	return 0;
}

/* connect(2)'s errno for addr:port from a non-blocking socket (0: connected or under way) */
static int try_connect(int family, int type, const char *addr, uint16_t port)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int fd, ret;

	if (family == AF_INET) {
		struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
		sa->sin_family = AF_INET;
		sa->sin_port = htons(port);
		inet_pton(AF_INET, addr, &sa->sin_addr);
		len = sizeof(*sa);
	} else {
		struct sockaddr_in6 *sa = (struct sockaddr_in6 *)&ss;
		sa->sin6_family = AF_INET6;
		sa->sin6_port = htons(port);
		inet_pton(AF_INET6, addr, &sa->sin6_addr);
		len = sizeof(*sa);
	}
	fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno == EAFNOSUPPORT ? -1 : errno;
	ret = connect(fd, (struct sockaddr *)&ss, len) < 0 ? errno : 0;
	close(fd);
	return ret == EINPROGRESS ? 0 : ret;
}

/* What a process in dir sees: a bit per address that was refused with EPERM. */
static int refusals_in(const char *dir, uint16_t port)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		char path[192], me[32];
		int fd, bits = 0;

		if (dir) {
			snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
			snprintf(me, sizeof(me), "%d", (int)getpid());
			fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, me, strlen(me)) < 0)
				_exit(100);
			close(fd);
		}
		bits |= (try_connect(AF_INET, SOCK_STREAM, "169.254.169.254", 80) == EPERM) << 0;
		bits |= (try_connect(AF_INET, SOCK_DGRAM, "169.254.169.254", 80) == EPERM) << 1;
		bits |= (try_connect(AF_INET6, SOCK_STREAM, "fd00:ec2::254", 80) == EPERM) << 2;
		bits |= (try_connect(AF_INET6, SOCK_STREAM, "::ffff:169.254.169.254", 80) == EPERM)
			<< 3;
		/* neighbours: Amazon's DNS and time servers, the node, another ULA host */
		bits |= (try_connect(AF_INET, SOCK_DGRAM, "169.254.169.253", 53) == EPERM) << 4;
		bits |= (try_connect(AF_INET, SOCK_DGRAM, "169.254.169.123", 123) == EPERM) << 5;
		bits |= (try_connect(AF_INET, SOCK_STREAM, "127.0.0.1", port) != 0) << 6;
		bits |= (try_connect(AF_INET6, SOCK_STREAM, "fd00:ec2::253", 80) == EPERM) << 7;
		_exit(bits);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_not_equal(WEXITSTATUS(status), 100);
	return WEXITSTATUS(status);
}

static uint32_t programs_on(const char *dir, enum bpf_attach_type type)
{
	union bpf_attr a;
	uint32_t ids[8];
	int cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(cg >= 0);
	memset(&a, 0, sizeof(a));
	a.query.target_fd = (uint32_t)cg;
	a.query.attach_type = type;
	a.query.prog_ids = (uintptr_t)ids;
	a.query.prog_cnt = 8;
	assert_int_equal(syscall(SYS_bpf, BPF_PROG_QUERY, &a, sizeof(a)), 0);
	close(cg);
	return a.query.prog_cnt;
}

static void test_imdsguard__units_cannot_reach_the_metadata_service_and_reach_the_rest(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char child[192];

	/* before: nothing refused */
	assert_int_equal(refusals_in(f->dir, f->port), 0);
	assert_int_equal(imdsguard_attach(f->dir, &err), 0);
	/* the four ways to the service are refused, the neighbours are not */
	assert_int_equal(refusals_in(f->dir, f->port), 0x0f);
	/* a unit's own cgroup below it is guarded too */
	snprintf(child, sizeof(child), "%s/unit", f->dir);
	assert_int_equal(mkdir(child, 0755), 0);
	assert_int_equal(refusals_in(child, f->port), 0x0f);
	assert_int_equal(rmdir(child), 0);
	/* the agent itself, outside the cgroup, still reaches it */
	assert_int_equal(refusals_in(NULL, f->port), 0);
}

static void test_imdsguard__attaching_again_replaces_rather_than_adds(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;

	assert_int_equal(imdsguard_attach(f->dir, &err), 0);
	assert_int_equal(imdsguard_attach(f->dir, &err), 0);
	assert_int_equal(programs_on(f->dir, BPF_CGROUP_INET4_CONNECT), 1);
	assert_int_equal(programs_on(f->dir, BPF_CGROUP_INET6_CONNECT), 1);
	assert_int_equal(refusals_in(f->dir, f->port), 0x0f);
}

static void test_imdsguard__a_missing_cgroup_is_named(void **state)
{
	struct err err = ERR_INIT;
	(void)state;

	assert_int_equal(imdsguard_attach("/sys/fs/cgroup/no-such-cgroup-here", &err), -ENOENT);
	assert_non_null(strstr(err.msg, "/sys/fs/cgroup/no-such-cgroup-here"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_imdsguard__units_cannot_reach_the_metadata_service_and_reach_the_rest,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_imdsguard__attaching_again_replaces_rather_than_adds, setup, teardown),
		cmocka_unit_test(test_imdsguard__a_missing_cgroup_is_named),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
