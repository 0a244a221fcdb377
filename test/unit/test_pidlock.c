/* test_pidlock: one holder at a time, a second one told who holds it, and a check that never
 * takes the lock from its holder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pidlock.h"

struct fixture {
	char dir[64];
	char path[96];
};

static int setup(void **state)
{
	static struct fixture f;

	snprintf(f.dir, sizeof(f.dir), "/tmp/kiyot-test-pidlock-XXXXXX");
	if (!mkdtemp(f.dir))
		return -1;
	snprintf(f.path, sizeof(f.path), "%s/%s", f.dir, PIDLOCK_AGENT_FILE);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	unlink(f->path);
	rmdir(f->dir);
	return 0;
}

/* A child that takes the lock, says so on the pipe and waits to be killed. */
static pid_t child_holding(const char *path)
{
	int p[2];
	char ok = 0;
	pid_t pid;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct err err = ERR_INIT;

		close(p[0]);
		if (pidlock_take(path, &err) < 0)
			_exit(1);
		if (write(p[1], "y", 1) != 1)
			_exit(2);
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &ok, 1), 1);
	close(p[0]);
	return pid;
}

static void test_pidlock__a_second_holder_is_refused_naming_the_first(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char want[64];
	int fd = pidlock_take(f->path, &err);

	assert_true(fd >= 0);
	assert_int_equal(pidlock_take(f->path, &err), -EBUSY);
	snprintf(want, sizeof(want), "held by pid %ld", (long)getpid());
	assert_non_null(strstr(err.msg, want));
	assert_non_null(strstr(err.msg, f->path));
	close(fd);
}

static void test_pidlock__another_process_is_refused_until_the_holder_dies(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	pid_t child = child_holding(f->path);
	char want[64];
	int fd;

	assert_int_equal(pidlock_take(f->path, &err), -EBUSY);
	snprintf(want, sizeof(want), "held by pid %ld", (long)child);
	assert_non_null(strstr(err.msg, want));
	/* killed, not exited: the kernel lets go of the lock all the same */
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, NULL, 0), child);
	fd = pidlock_take(f->path, &err);
	assert_true(fd >= 0);
	close(fd);
}

static void test_pidlock__holder_names_a_live_holder_and_leaves_it_the_lock(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	pid_t child = child_holding(f->path);
	long pid = -1;

	for (int i = 0; i < 3; i++) {
		assert_int_equal(pidlock_holder(f->path, &pid, &err), 1);
		assert_int_equal(pid, child);
	}
	/* the checks took nothing from the holder */
	assert_int_equal(pidlock_take(f->path, &err), -EBUSY);
	kill(child, SIGKILL);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(pidlock_holder(f->path, &pid, &err), 0);
	assert_int_equal(pid, 0);
}

static void test_pidlock__no_file_means_no_holder(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	long pid = -1;

	unlink(f->path);
	assert_int_equal(pidlock_holder(f->path, &pid, &err), 0);
	assert_int_equal(pid, 0);
}

static void test_pidlock__programs_the_holder_runs_do_not_inherit_it(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	int fd = pidlock_take(f->path, &err);

	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

static void test_pidlock__a_missing_directory_is_an_error_naming_the_path(void **state)
{
	struct fixture *f = *state;
	struct err err = ERR_INIT;
	char missing[128];

	snprintf(missing, sizeof(missing), "%s/no/such/dir/lock", f->dir);
	assert_int_equal(pidlock_take(missing, &err), -ENOENT);
	assert_non_null(strstr(err.msg, missing));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pidlock__a_second_holder_is_refused_naming_the_first),
		cmocka_unit_test(test_pidlock__another_process_is_refused_until_the_holder_dies),
		cmocka_unit_test(test_pidlock__holder_names_a_live_holder_and_leaves_it_the_lock),
		cmocka_unit_test(test_pidlock__no_file_means_no_holder),
		cmocka_unit_test(test_pidlock__programs_the_holder_runs_do_not_inherit_it),
		cmocka_unit_test(test_pidlock__a_missing_directory_is_an_error_naming_the_path),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
