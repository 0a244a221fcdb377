/* Tests of the seccomp module: RuntimeDefault's structure and capability groups, Localhost
 * profiles in OCI and Docker form (includes, excludes, archMap, every refusal), and crun
 * loading both kinds into a busybox container when it can run here. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../cell-agent/seccomp.h"
#include "fsutil.h"
#include "xalloc.h"

#define DOCKER_STYLE "test/fixtures/seccomp/docker-style.json"

/* containerd's default capability set: what an ordinary unit holds. */
static const char *const plain_caps[] = {
	"CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",	   "CAP_FOWNER",
	"CAP_MKNOD",   "CAP_NET_RAW",	   "CAP_SETGID",	   "CAP_SETUID",
	"CAP_SETFCAP", "CAP_SETPCAP",	   "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
	"CAP_KILL",    "CAP_AUDIT_WRITE",
};

/* The same plus CAP_SYS_ADMIN. */
static const char *const admin_caps[] = {
	"CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",	   "CAP_FOWNER",
	"CAP_MKNOD",   "CAP_NET_RAW",	   "CAP_SETGID",	   "CAP_SETUID",
	"CAP_SETFCAP", "CAP_SETPCAP",	   "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
	"CAP_KILL",    "CAP_AUDIT_WRITE",  "CAP_SYS_ADMIN",
};

/* Every capability with a group of its own in RuntimeDefault, and one syscall it brings. */
static const struct {
	const char *cap, *syscall;
} gated[] = {
	{ "CAP_SYS_ADMIN", "mount" },
	{ "CAP_SYS_ADMIN", "umount2" },
	{ "CAP_SYS_ADMIN", "sethostname" },
	{ "CAP_SYS_ADMIN", "setdomainname" },
	{ "CAP_SYS_ADMIN", "unshare" },
	{ "CAP_SYS_ADMIN", "setns" },
	{ "CAP_SYS_PTRACE", "ptrace" },
	{ "CAP_SYS_PTRACE", "process_vm_readv" },
	{ "CAP_SYS_PTRACE", "process_vm_writev" },
	{ "CAP_SYS_MODULE", "init_module" },
	{ "CAP_SYS_MODULE", "finit_module" },
	{ "CAP_SYS_MODULE", "delete_module" },
	{ "CAP_SYS_TIME", "settimeofday" },
	{ "CAP_SYS_TIME", "clock_settime" },
	{ "CAP_SYS_BOOT", "reboot" },
	{ "CAP_SYS_NICE", "mbind" },
	{ "CAP_SYS_PACCT", "acct" },
#if defined(__x86_64__)
	{ "CAP_SYS_RAWIO", "iopl" },
#endif
	{ "CAP_SYS_TTY_CONFIG", "vhangup" },
	{ "CAP_SYSLOG", "syslog" },
	{ "CAP_DAC_READ_SEARCH", "open_by_handle_at" },
	{ "CAP_BPF", "bpf" },
	{ "CAP_PERFMON", "perf_event_open" },
};

/* No capability brings these. */
static const char *const never[] = {
	"kexec_load",  "kexec_file_load", "keyctl",	    "add_key",	      "request_key",
	"userfaultfd", "pivot_root",	  "io_uring_setup", "io_uring_enter", "io_uring_register",
	"swapon",      "swapoff",	  "uselib",	    "nfsservctl",
};

/* Every capability of the groups at once. */
static const char *const all_gated_caps[] = {
	"CAP_SYS_ADMIN", "CAP_SYS_PTRACE",     "CAP_SYS_MODULE",      "CAP_SYS_TIME",
	"CAP_SYS_BOOT",	 "CAP_SYS_NICE",       "CAP_SYS_PACCT",	      "CAP_SYS_RAWIO",
	"CAP_SYSLOG",	 "CAP_SYS_TTY_CONFIG", "CAP_DAC_READ_SEARCH", "CAP_BPF",
	"CAP_PERFMON",	 "CAP_SYS_CHROOT",
};

static const char *const actions[] = {
	"SCMP_ACT_ALLOW",	"SCMP_ACT_ERRNO",	 "SCMP_ACT_KILL",
	"SCMP_ACT_KILL_THREAD", "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_TRAP",
	"SCMP_ACT_TRACE",	"SCMP_ACT_LOG",		 "SCMP_ACT_NOTIFY",
};

static bool known_action(const char *a)
{
	for (size_t i = 0; a && i < ARRAY_SIZE(actions); i++)
		if (strcmp(actions[i], a) == 0)
			return true;
	return false;
}

static bool has_name(const json_t *rule, const char *name)
{
	json_t *n;
	size_t i;

	json_array_foreach (json_object_get(rule, "names"), i, n)
		if (strcmp(json_string_value(n), name) == 0)
			return true;
	return false;
}

/* How the profile treats a syscall: 'A' allowed without conditions, 'c' allowed under
 * conditions on its arguments only, 'E' another action without conditions, '-' not named. */
static char treatment(const json_t *profile, const char *name)
{
	json_t *r;
	size_t i;
	char t = '-';

	json_array_foreach (json_object_get(profile, "syscalls"), i, r) {
		bool allow = strcmp(json_string_value(json_object_get(r, "action")),
				    "SCMP_ACT_ALLOW") == 0;
		bool cond = json_array_size(json_object_get(r, "args")) > 0;

		if (!has_name(r, name))
			continue;
		if (!cond)
			return allow ? 'A' : 'E';
		if (allow)
			t = 'c';
	}
	return t;
}

/* The rules naming a syscall. */
static size_t rules_for(const json_t *profile, const char *name, json_t **first)
{
	json_t *r;
	size_t i, n = 0;

	json_array_foreach (json_object_get(profile, "syscalls"), i, r) {
		if (has_name(r, name) && n++ == 0 && first)
			*first = r;
	}
	return n;
}

static bool valid_name(const char *s)
{
	if (!s || !s[0])
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

/* What crun needs of any profile, and what RuntimeDefault promises besides: every action
 * known, every name a syscall name, no syscall both allowed and refused without conditions,
 * no name twice in the allow-list; and the Localhost parser takes it back unchanged. */
static void check_structure(const json_t *profile, const char *const *caps, size_t n_caps)
{
	json_t *r, *n, *seen = json_object(), *back = NULL;
	size_t i, j;
	struct err err = ERR_INIT;
	char *text;

	assert_true(known_action(json_string_value(json_object_get(profile, "defaultAction"))));
	json_array_foreach (json_object_get(profile, "syscalls"), i, r) {
		const char *action = json_string_value(json_object_get(r, "action"));
		bool cond = json_array_size(json_object_get(r, "args")) > 0;

		assert_true(known_action(action));
		assert_true(json_array_size(json_object_get(r, "names")) > 0);
		json_array_foreach (json_object_get(r, "names"), j, n) {
			const char *name = json_string_value(n);
			char key[128];

			assert_true(valid_name(name));
			if (cond)
				continue;
			snprintf(key, sizeof(key), "%s", name);
			if (json_object_get(seen, key))
				fail_msg("%s is named by two rules without conditions", name);
			json_object_set_new(seen, key, json_string(action));
		}
	}
	json_decref(seen);
	text = json_dumps(profile, JSON_COMPACT);
	assert_int_equal(seccomp_profile_parse(text, strlen(text), caps, n_caps, &back, &err), 0);
	assert_true(json_equal(back, (json_t *)profile));
	json_decref(back);
	free(text);
}

/* Default-deny with EPERM, on the build's architectures. */
static void test_seccomp__default_denies_with_eperm(void **state)
{
	json_t *p = seccomp_runtime_default(plain_caps, ARRAY_SIZE(plain_caps));
	json_t *arches = json_object_get(p, "architectures");

	(void)state;
	assert_string_equal(json_string_value(json_object_get(p, "defaultAction")),
			    "SCMP_ACT_ERRNO");
	assert_int_equal(json_integer_value(json_object_get(p, "defaultErrnoRet")), EPERM);
#if defined(__x86_64__)
	assert_int_equal(json_array_size(arches), 3);
	assert_string_equal(json_string_value(json_array_get(arches, 0)), "SCMP_ARCH_X86_64");
	assert_string_equal(json_string_value(json_array_get(arches, 1)), "SCMP_ARCH_X86");
	assert_string_equal(json_string_value(json_array_get(arches, 2)), "SCMP_ARCH_X32");
#elif defined(__aarch64__)
	assert_int_equal(json_array_size(arches), 2);
	assert_string_equal(json_string_value(json_array_get(arches, 0)), "SCMP_ARCH_AARCH64");
	assert_string_equal(json_string_value(json_array_get(arches, 1)), "SCMP_ARCH_ARM");
#endif
	json_decref(p);
}

/* Whatever the capabilities, the profile is well formed and parses back to itself. */
static void test_seccomp__default_is_well_formed_for_every_capability(void **state)
{
	json_t *p;

	(void)state;
	p = seccomp_runtime_default(NULL, 0);
	check_structure(p, NULL, 0);
	json_decref(p);
	p = seccomp_runtime_default(plain_caps, ARRAY_SIZE(plain_caps));
	check_structure(p, plain_caps, ARRAY_SIZE(plain_caps));
	json_decref(p);
	p = seccomp_runtime_default(all_gated_caps, ARRAY_SIZE(all_gated_caps));
	check_structure(p, all_gated_caps, ARRAY_SIZE(all_gated_caps));
	json_decref(p);
	for (size_t i = 0; i < ARRAY_SIZE(gated); i++) {
		p = seccomp_runtime_default(&gated[i].cap, 1);
		check_structure(p, &gated[i].cap, 1);
		json_decref(p);
	}
}

/* The ordinary syscalls of a program are allowed; a few hundred in all. */
static void test_seccomp__default_allows_ordinary_syscalls(void **state)
{
	static const char *const ordinary[] = {
		"read",	     "write",	"openat",     "close",	      "execve",	       "mmap",
		"munmap",    "brk",	"futex",      "exit_group",   "clock_gettime", "epoll_wait",
		"getrandom", "rseq",	"accept4",    "connect",      "sendmsg",       "wait4",
		"fork",	     "setuid",	"chown",      "mknod",	      "statx",	       "fchmodat2",
		"prctl",     "seccomp", "getdents64", "rt_sigaction", "shmget",	       "chroot",
		"pipe2",
	};
	json_t *p = seccomp_runtime_default(plain_caps, ARRAY_SIZE(plain_caps));

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ordinary); i++)
		if (treatment(p, ordinary[i]) != 'A')
			fail_msg("%s is not allowed", ordinary[i]);
	assert_int_equal(treatment(p, "socket"), 'c');
	assert_true(json_array_size(json_object_get(
			    json_array_get(json_object_get(p, "syscalls"), 0), "names")) > 300);
	json_decref(p);
}

/* Each group's syscalls come with its capability and only with it. */
static void test_seccomp__default_capability_groups(void **state)
{
	json_t *plain = seccomp_runtime_default(plain_caps, ARRAY_SIZE(plain_caps));

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(gated); i++) {
		json_t *with = seccomp_runtime_default(&gated[i].cap, 1);

		if (treatment(plain, gated[i].syscall) != '-')
			fail_msg("%s is allowed without %s", gated[i].syscall, gated[i].cap);
		if (treatment(with, gated[i].syscall) != 'A')
			fail_msg("%s is not allowed with %s", gated[i].syscall, gated[i].cap);
		json_decref(with);
	}
	json_decref(plain);
}

/* Some syscalls no capability brings. */
static void test_seccomp__default_never_allows(void **state)
{
	json_t *p = seccomp_runtime_default(all_gated_caps, ARRAY_SIZE(all_gated_caps));

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(never); i++)
		if (treatment(p, never[i]) != '-')
			fail_msg("%s is allowed", never[i]);
	json_decref(p);
}

/* Without CAP_SYS_ADMIN clone may not create namespaces and clone3 says ENOSYS (libc then
 * uses clone); with it both are plain. personality takes five values only. */
static void test_seccomp__default_clone_and_personality(void **state)
{
	static const json_int_t personas[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };
	json_t *p = seccomp_runtime_default(plain_caps, ARRAY_SIZE(plain_caps));
	json_t *r = NULL, *a, *rules = json_object_get(p, "syscalls"), *rule;
	size_t i, k = 0;

	(void)state;
	assert_int_equal(rules_for(p, "clone", &r), 1);
	assert_string_equal(json_string_value(json_object_get(r, "action")), "SCMP_ACT_ALLOW");
	assert_int_equal(json_array_size(json_object_get(r, "args")), 1);
	a = json_array_get(json_object_get(r, "args"), 0);
	assert_int_equal(json_integer_value(json_object_get(a, "index")), 0);
	assert_int_equal(json_integer_value(json_object_get(a, "value")), 0x7E020000);
	assert_int_equal(json_integer_value(json_object_get(a, "valueTwo")), 0);
	assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_MASKED_EQ");
	assert_int_equal(rules_for(p, "clone3", &r), 1);
	assert_string_equal(json_string_value(json_object_get(r, "action")), "SCMP_ACT_ERRNO");
	assert_int_equal(json_integer_value(json_object_get(r, "errnoRet")), ENOSYS);
	assert_int_equal(treatment(p, "personality"), 'c');
	json_array_foreach (rules, i, rule) {
		if (!has_name(rule, "personality"))
			continue;
		a = json_array_get(json_object_get(rule, "args"), 0);
		assert_int_equal(json_array_size(json_object_get(rule, "args")), 1);
		assert_string_equal(json_string_value(json_object_get(a, "op")), "SCMP_CMP_EQ");
		assert_true(k < ARRAY_SIZE(personas));
		assert_int_equal(json_integer_value(json_object_get(a, "value")), personas[k++]);
	}
	assert_int_equal(k, ARRAY_SIZE(personas));
	json_decref(p);

	p = seccomp_runtime_default(admin_caps, ARRAY_SIZE(admin_caps));
	assert_int_equal(treatment(p, "clone"), 'A');
	assert_int_equal(rules_for(p, "clone", NULL), 1);
	assert_int_equal(treatment(p, "clone3"), 'A');
	assert_int_equal(rules_for(p, "clone3", NULL), 1);
	json_decref(p);
}

/* Capabilities count in any spelling; a longer name is another capability. */
static void test_seccomp__default_capability_spellings(void **state)
{
	static const char *const yes[] = { "CAP_SYS_ADMIN", "cap_sys_admin", "SYS_ADMIN",
					   "sys_admin" };
	static const char *const no[] = { "CAP_SYS_ADMINX", "ADMIN", "", NULL };

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
		json_t *p = seccomp_runtime_default(&yes[i], 1);

		assert_int_equal(treatment(p, "mount"), 'A');
		json_decref(p);
	}
	for (size_t i = 0; i < ARRAY_SIZE(no); i++) {
		json_t *p = seccomp_runtime_default(&no[i], 1);

		assert_int_equal(treatment(p, "mount"), '-');
		json_decref(p);
	}
}

static int parse(const char *text, const char *const *caps, size_t n, json_t **out, struct err *err)
{
	return seccomp_profile_parse(text, strlen(text), caps, n, out, err);
}

/* An OCI object comes back as it was. */
static void test_seccomp__parse_oci_profile(void **state)
{
	static const char text[] =
		"{\"defaultAction\":\"SCMP_ACT_KILL_PROCESS\","
		"\"architectures\":[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_AARCH64\"],"
		"\"flags\":[\"SECCOMP_FILTER_FLAG_LOG\"],"
		"\"syscalls\":[{\"names\":[\"read\",\"write\"],\"action\":\"SCMP_ACT_ALLOW\"},"
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":0},"
		"{\"names\":[\"socket\"],\"action\":\"SCMP_ACT_LOG\",\"args\":["
		"{\"index\":0,\"value\":2,\"valueTwo\":0,\"op\":\"SCMP_CMP_EQ\"},"
		"{\"index\":1,\"value\":1,\"valueTwo\":0,\"op\":\"SCMP_CMP_GE\"}]}]}";
	json_t *out = NULL, *want = json_loads(text, 0, NULL);
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(parse(text, NULL, 0, &out, &err), 0);
	assert_true(json_equal(out, want));
	json_decref(out);
	json_decref(want);
}

/* A Docker profile is decided for this machine and this unit: archMap gives the machine's
 * architectures, name becomes names, rules follow includes and excludes, comments go. */
static void test_seccomp__parse_docker_profile(void **state)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct err err = ERR_INIT;
	json_t *plain = NULL, *admin = NULL, *arches, *r = NULL;
	struct utsname u;

	(void)state;
	assert_int_equal(fs_read_file(DOCKER_STYLE, 1 << 20, &text, &len, &err), 0);
	assert_int_equal(seccomp_profile_parse(text, len, plain_caps, ARRAY_SIZE(plain_caps),
					       &plain, &err),
			 0);
	assert_int_equal(seccomp_profile_parse(text, len, admin_caps, ARRAY_SIZE(admin_caps),
					       &admin, &err),
			 0);
	assert_null(json_object_get(plain, "comment"));
	assert_null(json_object_get(plain, "archMap"));
	arches = json_object_get(plain, "architectures");
	assert_int_equal(uname(&u), 0);
	if (strcmp(u.machine, "x86_64") == 0) {
		assert_int_equal(json_array_size(arches), 3);
		assert_string_equal(json_string_value(json_array_get(arches, 0)),
				    "SCMP_ARCH_X86_64");
		assert_string_equal(json_string_value(json_array_get(arches, 2)), "SCMP_ARCH_X32");
		assert_int_equal(treatment(plain, "arch_prctl"), 'A');
		assert_int_equal(treatment(plain, "set_tls"), '-');
	} else if (strcmp(u.machine, "aarch64") == 0) {
		assert_int_equal(json_array_size(arches), 2);
		assert_string_equal(json_string_value(json_array_get(arches, 0)),
				    "SCMP_ARCH_AARCH64");
		assert_int_equal(treatment(plain, "arch_prctl"), '-');
		assert_int_equal(treatment(plain, "set_tls"), 'A');
	}
	/* "name" and errnoRet */
	assert_int_equal(rules_for(plain, "mkdir", &r), 1);
	assert_int_equal(json_integer_value(json_object_get(r, "errnoRet")), EACCES);
	assert_null(json_object_get(r, "comment"));
	/* empty args, includes and excludes are no conditions */
	assert_int_equal(treatment(plain, "read"), 'A');
	/* capabilities */
	assert_int_equal(treatment(plain, "sethostname"), '-');
	assert_int_equal(treatment(admin, "sethostname"), 'A');
	assert_int_equal(treatment(plain, "clone"), 'c');
	assert_int_equal(treatment(admin, "clone"), 'A');
	assert_int_equal(rules_for(admin, "clone", NULL), 1);
	/* kernel versions: included from 4.3 and 999.0, excluded from 3.0 and 999.0.1 */
	assert_int_equal(treatment(plain, "membarrier"), 'A');
	assert_int_equal(treatment(plain, "futex_waitv"), '-');
	assert_int_equal(treatment(plain, "uselib"), '-');
	assert_int_equal(treatment(plain, "syslog"), 'A');
	json_decref(plain);
	json_decref(admin);
}

/* Refused profiles: the message says where and what. */
static const struct {
	const char *text, *want;
} refusals[] = {
	{ "", "the profile is empty" },
	{ "{\"defaultAction\":", "not valid JSON: line 1" },
	{ "[]", "must be a JSON object" },
	{ "{}", "defaultAction: missing" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"defaultAction\":\"SCMP_ACT_LOG\"}",
	  "duplicate object key" },
	{ "{\"defaultAction\":\"SCMP_ACT_DENY\"}",
	  "defaultAction: unknown action \"SCMP_ACT_DENY\"" },
	{ "{\"defaultAction\":1}", "defaultAction: must be a string" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscall\":[]}",
	  "top level: unknown key \"syscall\"" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"defaultErrnoRet\":1}",
	  "defaultErrnoRet: only SCMP_ACT_ERRNO and SCMP_ACT_TRACE take an errno" },
	{ "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":4096}",
	  "defaultErrnoRet: 4096 is out of range 0-4095" },
	{ "{\"defaultAction\":\"SCMP_ACT_NOTIFY\",\"listenerPath\":\"/run/x.sock\"}",
	  "defaultAction: SCMP_ACT_NOTIFY cannot be the default action" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[\"x86_64\"]}",
	  "architectures[0]: \"x86_64\" is not an architecture" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[\"SCMP_ARCH_X86\"],"
	  "\"archMap\":[{\"architecture\":\"SCMP_ARCH_X86_64\"}]}",
	  "archMap: a profile has architectures or archMap, not both" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"archMap\":[{\"architecture\":\"SCMP_ARCH_Z\"}]}",
	  "archMap[0]: architecture \"SCMP_ARCH_Z\" is not an architecture" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"archMap\":[{\"arch\":\"SCMP_ARCH_X86\"}]}",
	  "archMap[0]: unknown key \"arch\"" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"flags\":[\"SECCOMP_FILTER_FLAG_FAST\"]}",
	  "flags[0]: \"SECCOMP_FILTER_FLAG_FAST\" is not a flag" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"listenerPath\":\"x.sock\"}",
	  "listenerPath: must be an absolute path" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":{}}", "syscalls: must be an array" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[\"read\"]}",
	  "syscalls[0]: must be an object" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_ERRNO\"},{\"names\":[\"write\"],\"action\":\"SCMP_ACT_FOO\"}]}",
	  "syscalls[1].action: unknown action \"SCMP_ACT_FOO\" (known: SCMP_ACT_ALLOW" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"]}]}",
	  "syscalls[0].action: missing" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"action\":\"SCMP_ACT_KILL\"}]}",
	  "syscalls[0]: names the syscalls it is for" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[],"
	  "\"action\":\"SCMP_ACT_KILL\"}]}",
	  "syscalls[0]: names the syscalls it is for" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"name\":\"write\",\"action\":\"SCMP_ACT_KILL\"}]}",
	  "syscalls[0]: has both names and name" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\",\"\"],"
	  "\"action\":\"SCMP_ACT_KILL\"}]}",
	  "syscalls[0].names[1]: \"\" is not a syscall name" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"Read\"],"
	  "\"action\":\"SCMP_ACT_KILL\"}]}",
	  "syscalls[0].names[0]: \"Read\" is not a syscall name" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"name\":\"a b\","
	  "\"action\":\"SCMP_ACT_KILL\"}]}",
	  "syscalls[0].name: \"a b\" is not a syscall name" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"errnoRet\":1}]}",
	  "syscalls[0].errnoRet: only SCMP_ACT_ERRNO and SCMP_ACT_TRACE" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":-1}]}",
	  "syscalls[0].errnoRet: -1 is out of range" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"actions\":1}]}",
	  "syscalls[0]: unknown key \"actions\"" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":6,\"op\":\"SCMP_CMP_EQ\"}]}]}",
	  "syscalls[0].args[0].index: 6 is out of range 0-5" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":1.5,\"op\":\"SCMP_CMP_EQ\"}]}]}",
	  "syscalls[0].args[0].index: must be an integer" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"op\":\"SCMP_CMP_EQ\"}]}]}",
	  "syscalls[0].args[0]: index (0-5) missing" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":0,\"value\":-2,"
	  "\"op\":\"SCMP_CMP_EQ\"}]}]}",
	  "syscalls[0].args[0].value: -2 is out of range" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":0,\"op\":\"SCMP_CMP_IN\"}]}]}",
	  "syscalls[0].args[0].op: unknown operator \"SCMP_CMP_IN\"" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":0,\"op\":\"SCMP_CMP_EQ\","
	  "\"values\":1}]}]}",
	  "syscalls[0].args[0]: unknown key \"values\"" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"args\":[{\"index\":0,\"op\":\"SCMP_CMP_EQ\"},"
	  "{\"index\":1,\"op\":\"SCMP_CMP_EQ\"},{\"index\":2,\"op\":\"SCMP_CMP_EQ\"},"
	  "{\"index\":3,\"op\":\"SCMP_CMP_EQ\"},{\"index\":4,\"op\":\"SCMP_CMP_EQ\"},"
	  "{\"index\":5,\"op\":\"SCMP_CMP_EQ\"},{\"index\":0,\"op\":\"SCMP_CMP_NE\"}]}]}",
	  "syscalls[0].args: 7 comparisons; at most 6" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"includes\":{\"caps\":[\"CAP_SYS_ADMN\"]}}]}",
	  "syscalls[0].includes.caps[0]: \"CAP_SYS_ADMN\" is not a capability" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"excludes\":{\"minKernel\":\"5\"}}]}",
	  "syscalls[0].excludes.minKernel: \"5\" is not a kernel version" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_KILL\",\"includes\":{\"arch\":[\"amd64\"]}}]}",
	  "syscalls[0].includes: unknown key \"arch\"" },
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"read\"],"
	  "\"action\":\"SCMP_ACT_NOTIFY\"}]}",
	  "syscalls[0].action: SCMP_ACT_NOTIFY needs listenerPath" },
	/* same syscall, same comparisons (in another order), other action */
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
	  "{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_KILL\",\"args\":["
	  "{\"index\":1,\"value\":9,\"op\":\"SCMP_CMP_EQ\"},"
	  "{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\"}]},"
	  "{\"names\":[\"read\",\"kill\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":["
	  "{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\",\"valueTwo\":7},"
	  "{\"index\":1,\"value\":9,\"op\":\"SCMP_CMP_EQ\"}]}]}",
	  "syscalls[1]: compares the arguments of kill as syscalls[0] does, with another action" },
	/* an argument compared twice becomes one rule per comparison */
	{ "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
	  "{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_KILL\",\"args\":["
	  "{\"index\":0,\"value\":1,\"op\":\"SCMP_CMP_EQ\"},"
	  "{\"index\":0,\"value\":2,\"op\":\"SCMP_CMP_EQ\"}]},"
	  "{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":["
	  "{\"index\":0,\"value\":2,\"op\":\"SCMP_CMP_EQ\"}]}]}",
	  "syscalls[1]: compares the arguments of kill as syscalls[0] does" },
	/* a string that must not reach a log as it is */
	{ "{\"defaultAction\":\"SCMP_ACT_\\n\\u001b[31m\"}", "unknown action \"SCMP_ACT_??[31m\"" },
};

static void test_seccomp__parse_refusals(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(refusals); i++) {
		struct err err = ERR_INIT;
		json_t *out = (json_t *)&err; /* untouched on failure */

		if (parse(refusals[i].text, plain_caps, ARRAY_SIZE(plain_caps), &out, &err) !=
		    -EINVAL)
			fail_msg("accepted: %s", refusals[i].text);
		assert_ptr_equal(out, (json_t *)&err);
		if (!strstr(err.msg, refusals[i].want))
			fail_msg("for %s\n  got:  %s\n  want: %s", refusals[i].text, err.msg,
				 refusals[i].want);
	}
}

/* What the refusals above must not catch: conflicts crun accepts. */
static void test_seccomp__parse_accepts_what_crun_loads(void **state)
{
	static const char *const ok[] = {
		/* without conditions, two actions for one syscall load (the first wins) */
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
		"{\"names\":[\"read\"],\"action\":\"SCMP_ACT_KILL\"},"
		"{\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\"}]}",
		/* the same comparisons with the same action, or with the default action */
		"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":["
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_KILL_THREAD\",\"args\":"
		"[{\"index\":0,\"op\":\"SCMP_CMP_EQ\"}]},"
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_KILL\",\"args\":"
		"[{\"index\":0,\"op\":\"SCMP_CMP_EQ\"}]},"
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":1,\"args\":"
		"[{\"index\":0,\"op\":\"SCMP_CMP_EQ\"}]}]}",
		/* MASKED_EQ's second value tells comparisons apart */
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_KILL\",\"args\":"
		"[{\"index\":0,\"value\":3,\"valueTwo\":1,\"op\":\"SCMP_CMP_MASKED_EQ\"}]},"
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_LOG\",\"args\":"
		"[{\"index\":0,\"value\":3,\"valueTwo\":2,\"op\":\"SCMP_CMP_MASKED_EQ\"}]}]}",
		/* a rule dropped here does not conflict */
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_KILL\",\"args\":"
		"[{\"index\":0,\"op\":\"SCMP_CMP_EQ\"}]},"
		"{\"names\":[\"kill\"],\"action\":\"SCMP_ACT_LOG\",\"args\":"
		"[{\"index\":0,\"op\":\"SCMP_CMP_EQ\"}],\"includes\":{\"caps\":[\"BPF\"]}}]}",
		/* notify with its listener; nulls for absent keys */
		"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"listenerPath\":\"/run/l.sock\","
		"\"listenerMetadata\":null,\"flags\":null,\"architectures\":null,\"syscalls\":["
		"{\"names\":[\"mount\"],\"action\":\"SCMP_ACT_NOTIFY\",\"args\":null,"
		"\"errnoRet\":null,\"includes\":null}]}",
		/* no syscalls at all */
		"{\"defaultAction\":\"SCMP_ACT_LOG\"}",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
		struct err err = ERR_INIT;
		json_t *out = NULL;

		if (parse(ok[i], plain_caps, ARRAY_SIZE(plain_caps), &out, &err) != 0)
			fail_msg("refused: %s\n  %s", ok[i], err.msg);
		json_decref(out);
	}
}

/* Size and nesting are bounded; text need not end with NUL. */
static void test_seccomp__parse_limits(void **state)
{
	size_t big = SECCOMP_PROFILE_MAX + 1, deep = 100000;
	char *text = xmalloc(big);
	struct err err = ERR_INIT;
	json_t *out = NULL;
	static const char unterminated[] = "{\"defaultAction\":\"SCMP_ACT_LOG\"}garbage";

	(void)state;
	memset(text, ' ', big);
	assert_int_equal(seccomp_profile_parse(text, big, NULL, 0, &out, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "at most 1048576"));
	for (size_t i = 0; i < deep; i++)
		text[i] = '[';
	assert_int_equal(seccomp_profile_parse(text, deep, NULL, 0, &out, &err), -EINVAL);
	assert_null(out);
	/* the parser's own message quotes the input: no control bytes get through */
	assert_int_equal(parse("{\"defaultAction\"\x1b[2J:1}", NULL, 0, &out, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not valid JSON"));
	for (const char *c = err.msg; *c; c++)
		assert_true(*c >= 0x20 && *c < 0x7f);
	assert_int_equal(seccomp_profile_parse(unterminated, strlen(unterminated) - 7, NULL, 0,
					       &out, &err),
			 0);
	json_decref(out);
	free(text);
}

/*
 * crun: the profiles load and act. Needs root, crun and a static busybox; crun runs in a
 * private mount namespace without the cgroup2 mount of a hybrid layout, which it refuses.
 */

struct box {
	char dir[64];
	int runs;
};

/* Why the crun tests cannot run here, or NULL. */
static const char *crun_missing(void)
{
	if (geteuid() != 0)
		return "not root";
	if (access("/usr/bin/crun", X_OK) != 0 && access("/usr/local/bin/crun", X_OK) != 0)
		return "no crun";
	if (access("/bin/busybox", X_OK) != 0)
		return "no /bin/busybox (Debian's busybox-static)";
	if (access("/usr/bin/unshare", X_OK) != 0)
		return "no unshare";
	return NULL;
}

static int box_setup(void **state)
{
	struct box *b = xcalloc(1, sizeof(*b));
	_cleanup_free_ char *bin = NULL, *data = NULL, *path = NULL;
	size_t len = 0;
	struct err err = ERR_INIT;

	*state = b;
	if (crun_missing())
		return 0;
	snprintf(b->dir, sizeof(b->dir), "/tmp/kiyot-seccomp-XXXXXX");
	if (!mkdtemp(b->dir))
		return -1;
	bin = xasprintf("%s/rootfs/bin", b->dir);
	path = xasprintf("%s/busybox", bin);
	if (fs_mkdir_p(bin, 0755, &err) < 0 ||
	    fs_read_file("/bin/busybox", 64 << 20, &data, &len, &err) < 0 ||
	    fs_write_file(path, data, len, 0755, &err) < 0) {
		fprintf(stderr, "test_seccomp: %s\n", err.msg);
		return -1;
	}
	free(bin);
	bin = xasprintf("%s/rootfs/dev", b->dir);
	fs_mkdir_p(bin, 0755, &err);
	free(bin);
	bin = xasprintf("%s/rootfs/proc", b->dir);
	return fs_mkdir_p(bin, 0755, &err) < 0 ? -1 : 0;
}

static int box_teardown(void **state)
{
	struct box *b = *state;
	struct err err = ERR_INIT;

	if (b->dir[0])
		fs_remove_tree(b->dir, &err);
	free(b);
	return 0;
}

/* Runs busybox argv in a container with capabilities caps and the seccomp object; returns
 * its exit status, with what it printed in out. */
static int box_run(struct box *b, const json_t *seccomp, const char *const *caps, size_t n_caps,
		   const char *const *argv, char *out, size_t out_size)
{
	json_t *capset = json_array(), *args = json_array(), *cfg, *nss = json_array();
	_cleanup_free_ char *bundle = xasprintf("%s/bundle", b->dir);
	_cleanup_free_ char *cfg_path = xasprintf("%s/config.json", bundle);
	_cleanup_free_ char *rootfs = xasprintf("%s/rootfs", b->dir);
	_cleanup_free_ char *state_dir = xasprintf("%s/state", b->dir);
	_cleanup_free_ char *log = xasprintf("%s/out", b->dir);
	_cleanup_free_ char *text = NULL;
	char id[64];
	struct err err = ERR_INIT;
	size_t len = 0;
	int status = -1;
	pid_t pid;

	for (size_t i = 0; i < n_caps; i++)
		json_array_append_new(capset, json_string(caps[i]));
	json_array_append_new(args, json_string("/bin/busybox"));
	for (size_t i = 0; argv[i]; i++)
		json_array_append_new(args, json_string(argv[i]));
	for (size_t i = 0; i < 5; i++)
		json_array_append_new(nss, json_pack("{s:s}", "type",
						     (const char *[]){ "pid", "ipc", "uts", "mount",
								       "network" }[i]));
	cfg = json_pack(
		"{s:s,s:{s:b,s:{s:i,s:i},s:o,s:[s],s:s,s:{s:O,s:O,s:O},s:b},s:{s:s,s:b},s:s,"
		"s:[{s:s,s:s,s:s},{s:s,s:s,s:s,s:[s,s]}],s:{s:o,s:O}}",
		"ociVersion", "1.0.2", "process", "terminal", 0, "user", "uid", 0, "gid", 0, "args",
		args, "env", "PATH=/bin", "cwd", "/", "capabilities", "bounding", capset,
		"effective", capset, "permitted", capset, "noNewPrivileges", 1, "root", "path",
		rootfs, "readonly", 1, "hostname", "box", "mounts", "destination", "/proc", "type",
		"proc", "source", "proc", "destination", "/dev", "type", "tmpfs", "source", "tmpfs",
		"options", "nosuid", "size=1m", "linux", "namespaces", nss, "seccomp", seccomp);
	json_decref(capset);
	assert_non_null(cfg);
	assert_int_equal(fs_mkdir_p(bundle, 0755, &err), 0);
	assert_int_equal(json_dump_file(cfg, cfg_path, 0), 0);
	json_decref(cfg);
	snprintf(id, sizeof(id), "kiyot-seccomp-%d-%d", (int)getpid(), b->runs++);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execlp("unshare", "unshare", "-m", "sh", "-c",
		       "mount --make-rprivate / && { umount /sys/fs/cgroup/unified 2>/dev/null; "
		       "exec crun --debug --root \"$1\" run -b \"$2\" \"$3\"; }",
		       "sh", state_dir, bundle, id, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	out[0] = '\0';
	if (fs_read_file(log, 1 << 20, &text, &len, &err) == 0)
		snprintf(out, out_size, "%s", text);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool box_skipped(void)
{
	const char *why = crun_missing();

	if (why)
		fprintf(stderr, "[  SKIPPED ] crun check: %s\n", why);
	return why != NULL;
}

/* Runs busybox argv under the profile in a container that holds CAP_SYS_ADMIN (so that only
 * seccomp can refuse what needs it) and checks how it ends: 0 for success, else failure,
 * with want among what it printed (when not NULL). */
static void expect(struct box *b, const json_t *profile, const char *const *argv, int ok,
		   const char *want)
{
	char out[4096];
	int status =
		box_run(b, profile, admin_caps, ARRAY_SIZE(admin_caps), argv, out, sizeof(out));

	if ((status == 0) != (ok == 0))
		fail_msg("busybox %s %s: exit status %d, expected %s; it printed: %s", argv[0],
			 argv[1] ? argv[1] : "", status, ok == 0 ? "0" : "non-zero", out);
	if (want && !strstr(out, want))
		fail_msg("busybox %s %s printed \"%s\", not \"%s\"", argv[0],
			 argv[1] ? argv[1] : "", out, want);
	if (strstr(out, "unknown seccomp syscall"))
		fail_msg("crun does not know a syscall of the profile: %s", out);
}

static const char *const run_true[] = { "true", NULL };
static const char *const run_hostname[] = { "hostname", "foo", NULL };
static const char *const run_unshare[] = { "unshare", "-n", "true", NULL };
static const char *const run_shell[] = { "sh", "-c",
					 "echo piped | cat && (sleep 0; date) >/dev/null & wait",
					 NULL };
static const char *const run_mkdir[] = { "mkdir", "/made", NULL };

/* RuntimeDefault loads without warnings (crun --debug reports syscalls libseccomp does not
 * know) and runs a shell's pipes and children; without CAP_SYS_ADMIN in the profile,
 * sethostname and unshare fail with EPERM although the container holds the capability; with
 * it they work. */
static void test_seccomp__crun_runs_runtime_default(void **state)
{
	json_t *plain, *admin;

	if (box_skipped())
		skip();
	plain = seccomp_runtime_default(plain_caps, ARRAY_SIZE(plain_caps));
	admin = seccomp_runtime_default(admin_caps, ARRAY_SIZE(admin_caps));
	expect(*state, plain, run_true, 0, NULL);
	expect(*state, plain, run_shell, 0, "piped");
	expect(*state, plain, run_hostname, 1, "Operation not permitted");
	expect(*state, plain, run_unshare, 1, "Operation not permitted");
	expect(*state, admin, run_hostname, 0, NULL);
	expect(*state, admin, run_unshare, 0, NULL);
	json_decref(plain);
	json_decref(admin);
}

/* A Docker-style Localhost profile loads and acts: its errnoRet and its capability rule. */
static void test_seccomp__crun_runs_localhost_profile(void **state)
{
	_cleanup_free_ char *text = NULL;
	struct err err = ERR_INIT;
	json_t *plain = NULL, *admin = NULL;
	size_t len = 0;

	if (box_skipped())
		skip();
	assert_int_equal(fs_read_file(DOCKER_STYLE, 1 << 20, &text, &len, &err), 0);
	assert_int_equal(seccomp_profile_parse(text, len, plain_caps, ARRAY_SIZE(plain_caps),
					       &plain, &err),
			 0);
	assert_int_equal(seccomp_profile_parse(text, len, admin_caps, ARRAY_SIZE(admin_caps),
					       &admin, &err),
			 0);
	expect(*state, plain, run_true, 0, NULL);
	expect(*state, plain, run_mkdir, 1, "Permission denied"); /* EACCES, not EROFS */
	expect(*state, plain, run_hostname, 1, "Operation not permitted");
	expect(*state, admin, run_hostname, 0, NULL);
	json_decref(plain);
	json_decref(admin);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seccomp__default_denies_with_eperm),
		cmocka_unit_test(test_seccomp__default_is_well_formed_for_every_capability),
		cmocka_unit_test(test_seccomp__default_allows_ordinary_syscalls),
		cmocka_unit_test(test_seccomp__default_capability_groups),
		cmocka_unit_test(test_seccomp__default_never_allows),
		cmocka_unit_test(test_seccomp__default_clone_and_personality),
		cmocka_unit_test(test_seccomp__default_capability_spellings),
		cmocka_unit_test(test_seccomp__parse_oci_profile),
		cmocka_unit_test(test_seccomp__parse_docker_profile),
		cmocka_unit_test(test_seccomp__parse_refusals),
		cmocka_unit_test(test_seccomp__parse_accepts_what_crun_loads),
		cmocka_unit_test(test_seccomp__parse_limits),
		cmocka_unit_test_setup_teardown(test_seccomp__crun_runs_runtime_default, box_setup,
						box_teardown),
		cmocka_unit_test_setup_teardown(test_seccomp__crun_runs_localhost_profile,
						box_setup, box_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
