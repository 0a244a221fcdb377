/*
 * imdsguard.c: two cgroup/connect programs, written as BPF instructions (a dozen each: no
 * compiler, no loader library), attached to the units' parent cgroup.
 */
#include "imdsguard.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "xalloc.h"

/* The addresses, as a BPF program reads them: each 32-bit word of struct bpf_sock_addr's
 * user_ip4 / user_ip6 holds the address's bytes in network order, loaded little-endian. */
#define IMDS4 0xfea9fea9u     /* 169.254.169.254 */
#define IMDS6_W0 0xc20e00fdu  /* fd00:0ec2: */
#define IMDS6_W3 0x54020000u  /* ...:0254 */
#define MAPPED_W2 0xffff0000u /* ::ffff:a.b.c.d */

/* Instruction builders (the kernel's own helpers live in a header it does not export). */
#define LDX_W(dst, src, field)                                                                     \
	((struct bpf_insn){ .code = BPF_LDX | BPF_MEM | BPF_W,                                     \
			    .dst_reg = (dst),                                                      \
			    .src_reg = (src),                                                      \
			    .off = offsetof(struct bpf_sock_addr, field) })
/* if (u32)reg != imm goto pc + 1 + off */
#define JNE32(reg, k, o)                                                                           \
	((struct bpf_insn){ .code = BPF_JMP32 | BPF_JNE | BPF_K,                                   \
			    .dst_reg = (reg),                                                      \
			    .off = (o),                                                            \
			    .imm = (int32_t)(k) })
#define JEQ32(reg, k, o)                                                                           \
	((struct bpf_insn){ .code = BPF_JMP32 | BPF_JEQ | BPF_K,                                   \
			    .dst_reg = (reg),                                                      \
			    .off = (o),                                                            \
			    .imm = (int32_t)(k) })
#define JA(o) ((struct bpf_insn){ .code = BPF_JMP | BPF_JA, .off = (o) })
#define MOV0(k) ((struct bpf_insn){ .code = BPF_ALU64 | BPF_MOV | BPF_K, .imm = (k) })
#define EXIT ((struct bpf_insn){ .code = BPF_JMP | BPF_EXIT })

/* connect(2) returns EPERM when the program returns 0, goes ahead when it returns 1 */
static const struct bpf_insn connect4[] = {
	LDX_W(2, 1, user_ip4), JEQ32(2, IMDS4, 2), MOV0(1), EXIT, MOV0(0), EXIT,
};

static const struct bpf_insn connect6[] = {
	LDX_W(2, 1, user_ip6[0]),
	LDX_W(3, 1, user_ip6[1]),
	LDX_W(4, 1, user_ip6[2]),
	LDX_W(5, 1, user_ip6[3]),
	/* 4: fd00:ec2::254 */
	JNE32(2, IMDS6_W0, 4), /* -> 9 */
	JNE32(3, 0, 9),	       /* -> allow */
	JNE32(4, 0, 8),
	JNE32(5, IMDS6_W3, 7),
	JA(4), /* -> deny */
	/* 9: ::ffff:169.254.169.254 */
	JNE32(2, 0, 5),
	JNE32(3, 0, 4),
	JNE32(4, MAPPED_W2, 3),
	JNE32(5, IMDS4, 2),
	/* 13: deny */
	MOV0(0),
	EXIT,
	/* 15: allow */
	MOV0(1),
	EXIT,
};

static int load(const struct bpf_insn *insns, size_t n, enum bpf_attach_type type, struct err *err)
{
	static const char license[] = "GPL";
	char log[4096] = "";
	union bpf_attr a;
	int fd, e;

	memset(&a, 0, sizeof(a));
	a.prog_type = BPF_PROG_TYPE_CGROUP_SOCK_ADDR;
	a.expected_attach_type = type;
	a.insns = (uintptr_t)insns;
	a.insn_cnt = (uint32_t)n;
	a.license = (uintptr_t)license;
	fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
	if (fd >= 0)
		return fd;
	e = errno;
	if (e == EACCES || e == EINVAL) {
		/* again with the verifier's account of what it refused */
		a.log_buf = (uintptr_t)log;
		a.log_size = sizeof(log);
		a.log_level = 1;
		fd = (int)syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof(a));
		if (fd >= 0)
			return fd;
	}
	return err_set(err, e, "loading the metadata service guard (%s): %s%s%s",
		       type == BPF_CGROUP_INET4_CONNECT ? "IPv4" : "IPv6", strerror(e),
		       log[0] ? ": " : "", log);
}

static int attach(int cg, int prog, enum bpf_attach_type type, const char *dir, struct err *err)
{
	union bpf_attr a;

	memset(&a, 0, sizeof(a));
	a.target_fd = (uint32_t)cg;
	a.attach_bpf_fd = (uint32_t)prog;
	a.attach_type = type;
	/* no flag: the one program of its type for the subtree, which no descendant may
	 * override, and attaching again replaces it */
	a.attach_flags = 0;
	if (syscall(SYS_bpf, BPF_PROG_ATTACH, &a, sizeof(a)) < 0)
		return err_set(err, errno, "attaching the metadata service guard to %s: %s", dir,
			       strerror(errno));
	return 0;
}

int imdsguard_attach(const char *dir, struct err *err)
{
	static const struct {
		const struct bpf_insn *insns;
		size_t n;
		enum bpf_attach_type type;
	} progs[] = {
		{ connect4, sizeof(connect4) / sizeof(connect4[0]), BPF_CGROUP_INET4_CONNECT },
		{ connect6, sizeof(connect6) / sizeof(connect6[0]), BPF_CGROUP_INET6_CONNECT },
	};
	_cleanup_close_ int cg = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (cg < 0)
		return err_set(err, errno, "the units' cgroup %s: %s", dir, strerror(errno));
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		_cleanup_close_ int prog = load(progs[i].insns, progs[i].n, progs[i].type, err);

		if (prog < 0 || attach(cg, prog, progs[i].type, dir, err) < 0)
			return -err->code;
	}
	return 0;
}
