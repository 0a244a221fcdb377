/*
 * seccomp_default.c: the agent's RuntimeDefault profile, as profile JSON for crun: a
 * default-deny allow-list of syscall groups, those a capability opens added when the unit has
 * it, and argument rules (socket families, personalities, clone without new namespaces
 * unless CAP_SYS_ADMIN). seccomp.c and seccomp_rule.c parse Localhost profiles.
 */
#include "seccomp.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "seccomp_internal.h"
#include "xalloc.h"

#define AF_VSOCK_FAMILY 40
/* CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID |
 * CLONE_NEWNET: clone may create none of these without CAP_SYS_ADMIN. */
#define CLONE_NEW_FLAGS 0x7E020000ULL

/*
 * RuntimeDefault, as data: groups of syscall names, each a string of names separated by
 * spaces. Every group's syscalls are allowed, in one rule; the groups of a capability only
 * when the unit holds it (the kernel checks that capability in those syscalls, so a unit
 * without it has no use for them, and a unit with it was meant to have them). Anything else
 * fails with EPERM, in particular: kexec_load, kexec_file_load, keyctl, add_key and
 * request_key (the keyring is not namespaced), userfaultfd, pivot_root, swapon, swapoff, the
 * io_uring_* calls (a frequent source of kernel exploits; programs fall back to other I/O),
 * and the obsolete uselib, ustat, sysfs, _sysctl, nfsservctl and vm86. Names of syscalls newer
 * than the libseccomp of Debian 12 (mseal, the *xattrat calls, lsm_*) are left out: crun
 * would warn about them at every start.
 */
static const struct group {
	const char *what; /* what the syscalls are for; in cap_groups, the capability */
	const char *names;
} base_groups[] = {
	{ "files, directories and their data",
	  "access cachestat chdir chmod chown chown32 close close_range copy_file_range creat "
	  "dup dup2 dup3 faccessat faccessat2 fadvise64 fadvise64_64 fallocate fchdir fchmod "
	  "fchmodat fchmodat2 fchown fchown32 fchownat fcntl fcntl64 fdatasync flock fstat "
	  "fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64 futimesat getcwd "
	  "getdents getdents64 ioctl lchown lchown32 link linkat _llseek lseek lstat lstat64 "
	  "mkdir mkdirat mknod mknodat newfstatat open openat openat2 pipe pipe2 pread64 preadv "
	  "preadv2 pwrite64 pwritev pwritev2 read readahead readlink readlinkat readv rename "
	  "renameat renameat2 rmdir sendfile sendfile64 splice stat stat64 statfs statfs64 statx "
	  "symlink symlinkat sync sync_file_range syncfs tee truncate truncate64 umask unlink "
	  "unlinkat utime utimensat utimensat_time64 utimes vmsplice write writev" },
	{ "extended attributes",
	  "fgetxattr flistxattr fremovexattr fsetxattr getxattr lgetxattr listxattr llistxattr "
	  "lremovexattr lsetxattr removexattr setxattr" },
	{ "waiting for events: poll, select, epoll, eventfd, inotify, signalfd, timerfd, AIO",
	  "epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2 "
	  "epoll_wait epoll_wait_old eventfd eventfd2 fanotify_mark inotify_add_watch "
	  "inotify_init inotify_init1 inotify_rm_watch io_cancel io_destroy io_getevents "
	  "io_pgetevents io_pgetevents_time64 io_setup io_submit ioprio_get ioprio_set _newselect "
	  "poll ppoll ppoll_time64 pselect6 pselect6_time64 select signalfd signalfd4 "
	  "timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64" },
	{ "the process's own memory",
	  "brk madvise map_shadow_stack membarrier memfd_create memfd_secret mincore mlock mlock2 "
	  "mlockall mmap mmap2 mprotect mremap msync munlock munlockall munmap pkey_alloc "
	  "pkey_free pkey_mprotect remap_file_pages" },
	{ "processes and threads, their limits and scheduling, restricting oneself",
	  "capget capset execve execveat exit exit_group fork futex futex_requeue futex_time64 "
	  "futex_wait futex_waitv futex_wake get_robust_list get_thread_area getcpu getpgid "
	  "getpgrp getpid getppid getpriority getrandom getrlimit getrusage getsid gettid "
	  "landlock_add_rule landlock_create_ruleset landlock_restrict_self pidfd_open "
	  "pidfd_send_signal prctl prlimit64 process_mrelease restart_syscall rseq "
	  "sched_get_priority_max sched_get_priority_min sched_getaffinity sched_getattr "
	  "sched_getparam sched_getscheduler sched_rr_get_interval sched_rr_get_interval_time64 "
	  "sched_setaffinity sched_setattr sched_setparam sched_setscheduler sched_yield seccomp "
	  "set_robust_list set_thread_area set_tid_address setpgid setpriority setrlimit setsid "
	  "sysinfo times ugetrlimit uname vfork wait4 waitid waitpid" },
	{ "signals",
	  "kill pause rt_sigaction rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn "
	  "rt_sigsuspend rt_sigtimedwait rt_sigtimedwait_time64 rt_tgsigqueueinfo sigaltstack "
	  "sigprocmask sigreturn tgkill tkill" },
	{ "user and group ids (the kernel checks CAP_SETUID and CAP_SETGID)",
	  "getegid getegid32 geteuid geteuid32 getgid getgid32 getgroups getgroups32 getresgid "
	  "getresgid32 getresuid getresuid32 getuid getuid32 setfsgid setfsgid32 setfsuid "
	  "setfsuid32 setgid setgid32 setgroups setgroups32 setregid setregid32 setresgid "
	  "setresgid32 setresuid setresuid32 setreuid setreuid32 setuid setuid32" },
	{ "clocks and timers (adjtimex sets the clock only with CAP_SYS_TIME)",
	  "adjtimex alarm clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 "
	  "clock_gettime clock_gettime64 clock_nanosleep clock_nanosleep_time64 getitimer "
	  "gettimeofday nanosleep setitimer time timer_create timer_delete timer_getoverrun "
	  "timer_gettime timer_gettime64 timer_settime timer_settime64" },
	{ "sockets, but for socket itself (a rule of its own keeps AF_VSOCK out)",
	  "accept accept4 bind connect getpeername getsockname getsockopt listen recv recvfrom "
	  "recvmmsg recvmmsg_time64 recvmsg send sendmmsg sendmsg sendto setsockopt shutdown "
	  "socketcall socketpair" },
	{ "System V and POSIX IPC, in the unit's IPC namespace",
	  "ipc mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64 "
	  "mq_timedsend mq_timedsend_time64 mq_unlink msgctl msgget msgrcv msgsnd semctl semget "
	  "semop semtimedop semtimedop_time64 shmat shmctl shmdt shmget" },
#if defined(__x86_64__)
	{ "the architecture's own", "arch_prctl modify_ldt" },
#elif defined(__aarch64__)
	{ "the architecture's own",
	  "arm_fadvise64_64 arm_sync_file_range breakpoint cacheflush set_tls sync_file_range2" },
#endif
};

/* The groups a capability brings. A syscall may be in several (bpf with CAP_SYS_ADMIN or
 * CAP_BPF). With CAP_SYS_ADMIN, clone and clone3 are allowed without conditions. */
static const struct group cap_groups[] = {
	{ "CAP_SYS_ADMIN",
	  "bpf clone clone3 fanotify_init fsconfig fsmount fsopen fspick lookup_dcookie mount "
	  "mount_setattr move_mount name_to_handle_at open_tree perf_event_open quotactl "
	  "quotactl_fd setdomainname sethostname setns syslog umount umount2 unshare" },
	{ "CAP_SYS_PTRACE",
	  "kcmp pidfd_getfd process_madvise process_vm_readv process_vm_writev ptrace" },
	{ "CAP_SYS_MODULE", "delete_module finit_module init_module" },
	{ "CAP_SYS_TIME", "clock_settime clock_settime64 settimeofday stime" },
	{ "CAP_SYS_BOOT", "reboot" },
	{ "CAP_SYS_NICE", "get_mempolicy mbind set_mempolicy set_mempolicy_home_node" },
	{ "CAP_SYS_PACCT", "acct" },
#if defined(__x86_64__)
	{ "CAP_SYS_RAWIO", "iopl ioperm" },
#endif
	{ "CAP_SYS_CHROOT", "chroot" },
	{ "CAP_SYS_TTY_CONFIG", "vhangup" },
	{ "CAP_SYSLOG", "syslog" },
	{ "CAP_DAC_READ_SEARCH", "open_by_handle_at" },
	{ "CAP_BPF", "bpf" },
	{ "CAP_PERFMON", "perf_event_open" },
};

/* The architectures of the build: x86_64 with its 32-bit ABIs, or aarch64 with arm; on other
 * machines the native one only. s390 takes clone's flags in the second argument. */
#if defined(__x86_64__)
static const char *const build_arches[] = { "SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
					    NULL };
#elif defined(__aarch64__)
static const char *const build_arches[] = { "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM", NULL };
#else
static const char *const build_arches[] = { NULL };
#endif
#if defined(__s390x__) || defined(__s390__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

/* The personas personality may set or query: Linux, Linux with 2.6-style uname, their 32-bit
 * variants, and 0xffffffff (which only reads the current one). */
static const uint64_t personas[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };

/* Appends the names of a group to names, skipping those in seen. */
static void add_group(json_t *names, json_t *seen, const char *group)
{
	for (const char *p = group; *p;) {
		size_t n = strcspn(p, " ");
		_cleanup_free_ char *name = xstrndup(p, n);

		p += n + strspn(p + n, " ");
		if (n == 0 || json_object_get(seen, name))
			continue;
		json_object_set_new(seen, name, json_true());
		json_array_append_new(names, json_string(name));
	}
}

/* A rule for one syscall with one comparison on one argument. */
static json_t *arg_rule(const char *name, const char *action, unsigned index, uint64_t value,
			const char *op)
{
	return json_pack("{s:[s],s:s,s:[{s:i,s:I,s:i,s:s}]}", "names", name, "action", action,
			 "args", "index", (int)index, "value", (json_int_t)value, "valueTwo", 0,
			 "op", op);
}

/* RuntimeDefault; see the header and the tables above. */
json_t *seccomp_runtime_default(const char *const *caps, size_t n_caps)
{
	bool sys_admin = seccomp_has_cap(caps, n_caps, "CAP_SYS_ADMIN");
	json_t *profile, *arches = json_array(), *rules = json_array();
	json_t *allow = json_array(), *seen = json_object();

	for (size_t i = 0; build_arches[i]; i++)
		json_array_append_new(arches, json_string(build_arches[i]));
	for (size_t i = 0; i < ARRAY_SIZE(base_groups); i++)
		add_group(allow, seen, base_groups[i].names);
	for (size_t i = 0; i < ARRAY_SIZE(cap_groups); i++)
		if (seccomp_has_cap(caps, n_caps, cap_groups[i].what))
			add_group(allow, seen, cap_groups[i].names);
	json_decref(seen);
	json_array_append_new(rules,
			      json_pack("{s:o,s:s}", "names", allow, "action", "SCMP_ACT_ALLOW"));
	json_array_append_new(rules, arg_rule("socket", "SCMP_ACT_ALLOW", 0, AF_VSOCK_FAMILY,
					      "SCMP_CMP_NE"));
	for (size_t i = 0; i < ARRAY_SIZE(personas); i++)
		json_array_append_new(rules, arg_rule("personality", "SCMP_ACT_ALLOW", 0,
						      personas[i], "SCMP_CMP_EQ"));
	if (!sys_admin) {
		/* MASKED_EQ: (flags & value) == valueTwo */
		json_array_append_new(rules, arg_rule("clone", "SCMP_ACT_ALLOW", CLONE_FLAGS_ARG,
						      CLONE_NEW_FLAGS, "SCMP_CMP_MASKED_EQ"));
		json_array_append_new(rules,
				      json_pack("{s:[s],s:s,s:i}", "names", "clone3", "action",
						"SCMP_ACT_ERRNO", "errnoRet", ENOSYS));
	}
	profile = json_pack("{s:s,s:i,s:o,s:o}", "defaultAction", "SCMP_ACT_ERRNO",
			    "defaultErrnoRet", EPERM, "architectures", arches, "syscalls", rules);
	if (json_array_size(arches) == 0)
		json_object_del(profile, "architectures");
	return profile;
}
