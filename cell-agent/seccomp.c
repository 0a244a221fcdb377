#include "seccomp.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>
#include <sys/utsname.h>

#include "seccomp_internal.h"
#include "xalloc.h"

#define ERRNO_MAX 4095	      /* the kernel's MAX_ERRNO: larger values are not errors */
#define SYSCALL_NAME_MAX 64   /* longer than any syscall name, short enough to quote */
#define ARGS_MAX 6	      /* a syscall has six arguments; crun ignores comparisons past 6 */
#define LISTENER_PATH_MAX 107 /* sun_path less its NUL */
#define WHERE_MAX 128	      /* "syscalls[12].args[3].valueTwo" and the like */

/* A capability's name without "CAP_"; see seccomp_internal.h. */
const char *seccomp_cap_bare(const char *cap)
{
	return strncasecmp(cap, "CAP_", 4) == 0 ? cap + 4 : cap;
}

/* Whether the unit holds cap; see seccomp_internal.h. */
bool seccomp_has_cap(const char *const *caps, size_t n_caps, const char *cap)
{
	for (size_t i = 0; caps && i < n_caps; i++)
		if (caps[i] && strcasecmp(seccomp_cap_bare(caps[i]), seccomp_cap_bare(cap)) == 0)
			return true;
	return false;
}

/* The actions crun 1.8 knows, with the filter return value libseccomp gives each (the kernel's
 * SECCOMP_RET_*; those taking an errno add it, EPERM by default). crun compares actions by
 * that value: KILL and KILL_THREAD are the same action. */
static const struct action {
	const char *name;
	uint32_t ret;
	bool takes_errno;
} actions[] = {
	{ "SCMP_ACT_ALLOW", 0x7fff0000U, false },
	{ "SCMP_ACT_ERRNO", 0x00050000U, true },
	{ "SCMP_ACT_KILL", 0x00000000U, false },
	{ "SCMP_ACT_KILL_THREAD", 0x00000000U, false },
	{ "SCMP_ACT_KILL_PROCESS", 0x80000000U, false },
	{ "SCMP_ACT_TRAP", 0x00030000U, false },
	{ "SCMP_ACT_TRACE", 0x7ff00000U, true },
	{ "SCMP_ACT_LOG", 0x7ffc0000U, false },
	{ "SCMP_ACT_NOTIFY", 0x7fc00000U, false },
};

static const char *const operators[] = { "SCMP_CMP_NE",	       "SCMP_CMP_LT", "SCMP_CMP_LE",
					 "SCMP_CMP_EQ",	       "SCMP_CMP_GE", "SCMP_CMP_GT",
					 "SCMP_CMP_MASKED_EQ", NULL };

/* The architectures of libseccomp 2.5, as the OCI spec spells them. */
static const char *const scmp_arches[] = {
	"SCMP_ARCH_X86",     "SCMP_ARCH_X86_64",   "SCMP_ARCH_X32",	    "SCMP_ARCH_ARM",
	"SCMP_ARCH_AARCH64", "SCMP_ARCH_MIPS",	   "SCMP_ARCH_MIPS64",	    "SCMP_ARCH_MIPS64N32",
	"SCMP_ARCH_MIPSEL",  "SCMP_ARCH_MIPSEL64", "SCMP_ARCH_MIPSEL64N32", "SCMP_ARCH_PPC",
	"SCMP_ARCH_PPC64",   "SCMP_ARCH_PPC64LE",  "SCMP_ARCH_S390",	    "SCMP_ARCH_S390X",
	"SCMP_ARCH_PARISC",  "SCMP_ARCH_PARISC64", "SCMP_ARCH_RISCV64",	    NULL
};

static const char *const filter_flags[] = { "SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG",
					    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
					    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", NULL };

/* Capabilities as linux/capability.h names them, without "CAP_". */
static const char cap_names[] =
	"CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP "
	"LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER "
	"SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE "
	"SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP "
	"MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF "
	"CHECKPOINT_RESTORE";

/* The machines includes.arches and excludes.arches can name, each by every spelling in use:
 * the kernel's (uname), Docker's, and libseccomp's. */
static const struct machine {
	const char *names[4];
	const char *scmp;
} machines[] = {
	{ { "x86_64", "amd64" }, "SCMP_ARCH_X86_64" },
	{ { "aarch64", "arm64" }, "SCMP_ARCH_AARCH64" },
	{ { "i386", "i686", "x86", "386" }, "SCMP_ARCH_X86" },
	{ { "armv7l", "armv6l", "arm" }, "SCMP_ARCH_ARM" },
	{ { "ppc64le" }, "SCMP_ARCH_PPC64LE" },
	{ { "ppc64" }, "SCMP_ARCH_PPC64" },
	{ { "s390x" }, "SCMP_ARCH_S390X" },
	{ { "riscv64" }, "SCMP_ARCH_RISCV64" },
};

/* The keys each object may have. */
static const char *const profile_keys[] = {
	"defaultAction", "defaultErrnoRet",  "architectures", "archMap", "flags",
	"listenerPath",	 "listenerMetadata", "syscalls",      "comment", NULL
};
static const char *const rule_keys[] = { "names",   "name",	"action",   "errnoRet", "args",
					 "comment", "includes", "excludes", NULL };
static const char *const arg_keys[] = { "index", "value", "valueTwo", "op", NULL };
static const char *const filter_keys[] = { "arches", "caps", "minKernel", NULL };
static const char *const archmap_keys[] = { "architecture", "subArchitectures", NULL };

/* What a profile is checked against, and what the checks found so far. */
struct parse {
	const char *const *caps;
	size_t n_caps;
	const char *machine;	     /* uname's */
	const struct machine *known; /* the machines entry of it, or NULL */
	unsigned long kernel[3];     /* the running kernel's version */
	uint32_t default_ret;	     /* the default action's value */
	json_t *conditional;	     /* per syscall and comparisons: [value, rule index] */
	long notify_rule;	     /* the first kept rule with SCMP_ACT_NOTIFY, or -1 */
	struct err *err;
};

/* An action as parsed: what it is and its value for crun. */
struct verdict {
	const struct action *action;
	json_int_t errno_ret; /* -1: none given */
	uint32_t ret;
};

/* A parsed includes or excludes. */
struct filter {
	json_t *arches, *caps; /* borrowed from the profile; NULL when absent */
	bool has_kernel;
	unsigned long kernel[3];
};

static ssize_t lookup(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return (ssize_t)i;
	return -1;
}

/* Whether s is one of the space-separated words, in any case. */
static bool word_in(const char *words, const char *s)
{
	size_t n = strlen(s);

	for (const char *p = words; n && *p; p += strspn(p, " ")) {
		size_t w = strcspn(p, " ");

		if (w == n && strncasecmp(p, s, n) == 0)
			return true;
		p += w;
	}
	return false;
}

/* list joined with ", " into buf (cut short when it does not fit). */
static const char *joined(const char *const *list, char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; list[i] && used < size; i++) {
		int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", list[i]);

		if (n < 0)
			break;
		used += (size_t)n;
	}
	return buf;
}

/* s made safe to quote in a message: at most 64 bytes, printable ASCII, no quotes. */
static const char *shown(const char *s, char buf[72])
{
	size_t n = 0;

	for (; s[n] && n < 64; n++)
		buf[n] = (s[n] >= 0x20 && s[n] < 0x7f && s[n] != '"' && s[n] != '\\') ? s[n] : '?';
	buf[n] = '\0';
	if (s[n])
		memcpy(buf + n, "...", 4);
	return buf;
}

/* Sets EINVAL with "<where>: <what>". */
static int bad(struct err *err, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad(struct err *err, const char *where, const char *fmt, ...)
{
	char what[448];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(err, EINVAL, "%s: %s", where, what);
}

/* where.key, or key at the top, into buf (WHERE_MAX bytes). */
static const char *path(char *buf, const char *where, const char *key)
{
	char w[WHERE_MAX];

	snprintf(w, sizeof(w), "%s", where);
	snprintf(buf, WHERE_MAX, "%.80s%s%.24s", w, w[0] ? "." : "", key);
	return buf;
}

/* Refuses keys of obj that are not in known. */
static int check_keys(const json_t *obj, const char *const *known, const char *where,
		      struct err *err)
{
	const char *key;
	json_t *v;
	char q[72], list[256];

	json_object_foreach ((json_t *)obj, key, v) {
		if (lookup(known, key) < 0)
			return bad(err, where[0] ? where : "top level",
				   "unknown key \"%s\" (known here: %s)", shown(key, q),
				   joined(known, list, sizeof(list)));
	}
	return 0;
}

static const char *type_name(json_type t)
{
	switch (t) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	default:
		return "a value of another type";
	}
}

/* *out = obj[key] when it has type t; NULL when absent or null (an error when required). */
static int member(const json_t *obj, const char *key, json_type t, bool required, const char *where,
		  json_t **out, struct err *err)
{
	json_t *v = json_object_get(obj, key);
	char p[WHERE_MAX];

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return bad(err, path(p, where, key), "missing");
		return 0;
	}
	if (json_typeof(v) != t)
		return bad(err, path(p, where, key), "must be %s", type_name(t));
	*out = v;
	return 0;
}

/* A non-negative integer member of at most max; *have false when absent or null. */
static int uint_member(const json_t *obj, const char *key, json_int_t max, const char *where,
		       bool *have, json_int_t *out, struct err *err)
{
	json_t *v;
	char p[WHERE_MAX];
	int ret = member(obj, key, JSON_INTEGER, false, where, &v, err);

	*have = v != NULL;
	*out = 0;
	if (ret < 0 || !v)
		return ret;
	*out = json_integer_value(v);
	if (*out < 0 || *out > max)
		return bad(err, path(p, where, key), "%lld is out of range 0-%lld", (long long)*out,
			   (long long)max);
	return 0;
}

/* Parses "major.minor" or "major.minor.patch" (then, when lenient, anything; when strict,
 * nothing or a "-" suffix). */
static bool parse_version(const char *s, bool strict, unsigned long v[3])
{
	int i;

	v[0] = v[1] = v[2] = 0;
	for (i = 0; i < 3; i++) {
		char *end;

		if (!isdigit((unsigned char)*s))
			return !strict && i > 0;
		v[i] = strtoul(s, &end, 10);
		if (v[i] > 65535)
			return false;
		s = end;
		if (*s != '.')
			break;
		s++;
	}
	if (!strict)
		return true;
	return i >= 1 && i < 3 && (*s == '\0' || *s == '-');
}

static int version_cmp(const unsigned long a[3], const unsigned long b[3])
{
	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* Parses an action at obj[key] with its errno at obj[errno_key]. */
static int parse_verdict(const json_t *obj, const char *key, const char *errno_key,
			 const char *where, struct verdict *v, struct err *err)
{
	json_t *name;
	bool have_errno;
	json_int_t e;
	char q[72], p[WHERE_MAX], list[256];
	size_t i;
	int ret = member(obj, key, JSON_STRING, true, where, &name, err);

	if (ret < 0)
		return ret;
	for (i = 0; i < ARRAY_SIZE(actions); i++)
		if (strcmp(actions[i].name, json_string_value(name)) == 0)
			break;
	if (i == ARRAY_SIZE(actions)) {
		const char *names[ARRAY_SIZE(actions) + 1] = { NULL };

		for (size_t j = 0; j < ARRAY_SIZE(actions); j++)
			names[j] = actions[j].name;
		return bad(err, path(p, where, key), "unknown action \"%s\" (known: %s)",
			   shown(json_string_value(name), q), joined(names, list, sizeof(list)));
	}
	ret = uint_member(obj, errno_key, ERRNO_MAX, where, &have_errno, &e, err);
	if (ret < 0)
		return ret;
	if (have_errno && !actions[i].takes_errno)
		return bad(err, path(p, where, errno_key),
			   "only SCMP_ACT_ERRNO and SCMP_ACT_TRACE take an errno, not %s",
			   actions[i].name);
	v->action = &actions[i];
	v->errno_ret = have_errno ? e : -1;
	v->ret = actions[i].ret | (actions[i].takes_errno ? (uint32_t)(have_errno ? e : EPERM) : 0);
	return 0;
}

static bool is_notify(const struct verdict *v)
{
	return strcmp(v->action->name, "SCMP_ACT_NOTIFY") == 0;
}

/* An array member whose elements are strings accepted by ok (which says what is wrong). */
static int string_array(const json_t *obj, const char *key, const char *where,
			const char *(*ok)(const char *s), json_t **out, struct err *err)
{
	json_t *v;
	size_t i;
	char p[WHERE_MAX], q[72];
	int ret = member(obj, key, JSON_ARRAY, false, where, out, err);

	if (ret < 0 || !*out)
		return ret;
	json_array_foreach (*out, i, v) {
		const char *why;

		snprintf(p, sizeof(p), "%.80s%s%.24s[%zu]", where, where[0] ? "." : "", key, i);
		if (!json_is_string(v))
			return bad(err, p, "must be a string");
		why = ok(json_string_value(v));
		if (why)
			return bad(err, p, "\"%s\" %s", shown(json_string_value(v), q), why);
	}
	return 0;
}

static const char *arch_ok(const char *s)
{
	return lookup(scmp_arches, s) < 0 ? "is not an architecture libseccomp knows (e.g. "
					    "SCMP_ARCH_X86_64, SCMP_ARCH_AARCH64)"
					  : NULL;
}

static const char *flag_ok(const char *s)
{
	return lookup(filter_flags, s) < 0 ? "is not a flag crun knows (SECCOMP_FILTER_FLAG_TSYNC, "
					     "_LOG, _SPEC_ALLOW, _WAIT_KILLABLE_RECV)"
					   : NULL;
}

static const char *cap_ok(const char *s)
{
	return word_in(cap_names, seccomp_cap_bare(s)) ? NULL
						       : "is not a capability (e.g. CAP_SYS_ADMIN)";
}

static const char *nonempty_ok(const char *s)
{
	return s[0] && strlen(s) <= SYSCALL_NAME_MAX ? NULL : "is not an architecture name";
}

static const char *syscall_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SYSCALL_NAME_MAX)
		return "is not a syscall name (1 to 64 characters)";
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '_'))
			return "is not a syscall name (lower-case letters, digits and '_')";
	return NULL;
}

/* includes or excludes of a rule. */
static int parse_filter(const json_t *rule, const char *key, const char *where, struct filter *f,
			struct err *err)
{
	json_t *obj, *kernel;
	char p[WHERE_MAX], q[72];
	int ret = member(rule, key, JSON_OBJECT, false, where, &obj, err);

	memset(f, 0, sizeof(*f));
	if (ret < 0 || !obj)
		return ret;
	path(p, where, key);
	ret = check_keys(obj, filter_keys, p, err);
	if (ret == 0)
		ret = string_array(obj, "arches", p, nonempty_ok, &f->arches, err);
	if (ret == 0)
		ret = string_array(obj, "caps", p, cap_ok, &f->caps, err);
	if (ret == 0)
		ret = member(obj, "minKernel", JSON_STRING, false, p, &kernel, err);
	if (ret < 0)
		return ret;
	if (kernel) {
		f->has_kernel = true;
		if (!parse_version(json_string_value(kernel), true, f->kernel))
			return bad(err, path(p, p, "minKernel"),
				   "\"%s\" is not a kernel version such as \"5.8\"",
				   shown(json_string_value(kernel), q));
	}
	return 0;
}

/* True when arches names the running machine. */
static bool names_machine(const struct parse *ps, const json_t *arches)
{
	json_t *v;
	size_t i;

	json_array_foreach (arches, i, v) {
		const char *a = json_string_value(v);

		if (strcasecmp(a, ps->machine) == 0)
			return true;
		for (size_t j = 0; ps->known && j < ARRAY_SIZE(ps->known->names); j++)
			if (ps->known->names[j] && strcasecmp(a, ps->known->names[j]) == 0)
				return true;
		if (ps->known && strcmp(a, ps->known->scmp) == 0)
			return true;
	}
	return false;
}

/* How many of caps the unit holds. */
static size_t caps_held(const struct parse *ps, const json_t *caps)
{
	json_t *v;
	size_t i, n = 0;

	json_array_foreach (caps, i, v)
		n += seccomp_has_cap(ps->caps, ps->n_caps, json_string_value(v));
	return n;
}

/* Whether a rule with these includes and excludes applies to the unit on this machine. */
static bool applies(const struct parse *ps, const struct filter *inc, const struct filter *exc)
{
	if (exc->arches && names_machine(ps, exc->arches))
		return false;
	if (exc->caps && caps_held(ps, exc->caps) > 0)
		return false;
	if (exc->has_kernel && version_cmp(ps->kernel, exc->kernel) >= 0)
		return false;
	if (inc->arches && json_array_size(inc->arches) > 0 && !names_machine(ps, inc->arches))
		return false;
	if (inc->caps && caps_held(ps, inc->caps) < json_array_size(inc->caps))
		return false;
	if (inc->has_kernel && version_cmp(ps->kernel, inc->kernel) < 0)
		return false;
	return true;
}

/* The args of a rule, rebuilt with every field (NULL when there are none). */
static int parse_args(const json_t *rule, const char *where, json_t **out, struct err *err)
{
	json_t *args, *a, *op;
	size_t i;
	char p[WHERE_MAX], q[72], list[256];
	int ret = member(rule, "args", JSON_ARRAY, false, where, &args, err);

	*out = NULL;
	if (ret < 0 || !args || json_array_size(args) == 0)
		return ret;
	if (json_array_size(args) > ARGS_MAX)
		return bad(err, path(p, where, "args"), "%zu comparisons; at most %d are applied",
			   json_array_size(args), ARGS_MAX);
	*out = json_array();
	json_array_foreach (args, i, a) {
		json_int_t index, value, value2;
		bool have;

		snprintf(p, sizeof(p), "%.80s.args[%zu]", where, i);
		if (!json_is_object(a))
			ret = bad(err, p, "must be an object ({\"index\", \"value\", \"op\"})");
		if (ret == 0)
			ret = check_keys(a, arg_keys, p, err);
		if (ret == 0)
			ret = uint_member(a, "index", ARGS_MAX - 1, p, &have, &index, err);
		if (ret == 0 && !have)
			ret = bad(err, p, "index (0-5) missing");
		if (ret == 0)
			ret = uint_member(a, "value", INT64_MAX, p, &have, &value, err);
		if (ret == 0)
			ret = uint_member(a, "valueTwo", INT64_MAX, p, &have, &value2, err);
		if (ret == 0)
			ret = member(a, "op", JSON_STRING, true, p, &op, err);
		if (ret == 0 && lookup(operators, json_string_value(op)) < 0)
			ret = bad(err, path(p, p, "op"), "unknown operator \"%s\" (known: %s)",
				  shown(json_string_value(op), q),
				  joined(operators, list, sizeof(list)));
		if (ret < 0) {
			json_decref(steal_ptr(*out));
			return ret;
		}
		json_array_append_new(*out, json_pack("{s:I,s:I,s:I,s:O}", "index", index, "value",
						      value, "valueTwo", value2, "op", op));
	}
	return 0;
}

/* The names of a rule: names, or the older single name. */
static int parse_names(const json_t *rule, const char *where, json_t **out, struct err *err)
{
	json_t *names, *name;
	char p[WHERE_MAX], q[72];
	int ret = string_array(rule, "names", where, syscall_ok, &names, err);

	if (ret == 0)
		ret = member(rule, "name", JSON_STRING, false, where, &name, err);
	if (ret < 0)
		return ret;
	if (names && name)
		return bad(err, where, "has both names and name; use names");
	if (name && syscall_ok(json_string_value(name)))
		return bad(err, path(p, where, "name"), "\"%s\" %s",
			   shown(json_string_value(name), q), syscall_ok(json_string_value(name)));
	if (name) {
		*out = json_pack("[O]", name);
		return 0;
	}
	if (!names || json_array_size(names) == 0)
		return bad(err, where, "names the syscalls it is for in \"names\": [...]");
	*out = json_incref(names);
	return 0;
}

/* One comparison as text, the second value only where the operator uses it. */
static char *comparison_text(const json_t *c)
{
	const char *op = json_string_value(json_object_get(c, "op"));

	return xasprintf("%lld %s %lld %lld",
			 (long long)json_integer_value(json_object_get(c, "index")), op,
			 (long long)json_integer_value(json_object_get(c, "value")),
			 strcmp(op, "SCMP_CMP_MASKED_EQ") == 0
				 ? (long long)json_integer_value(json_object_get(c, "valueTwo"))
				 : 0LL);
}

/* The rules crun gives libseccomp for args, as text to compare: one rule with the
 * comparisons sorted by argument, or, when an argument is compared twice, one rule per
 * comparison. */
static void conditional_keys(const json_t *args, json_t *keys)
{
	const json_t *by_index[ARGS_MAX] = { NULL };
	_cleanup_free_ char *all = xstrdup("");
	bool split = false;
	json_t *a;
	size_t i;

	json_array_foreach ((json_t *)args, i, a) {
		json_int_t idx = json_integer_value(json_object_get(a, "index"));

		split = split || by_index[idx];
		by_index[idx] = a;
	}
	if (split) {
		json_array_foreach ((json_t *)args, i, a) {
			_cleanup_free_ char *one = comparison_text(a);

			json_array_append_new(keys, json_string(one));
		}
		return;
	}
	for (i = 0; i < ARGS_MAX; i++) {
		_cleanup_free_ char *one = NULL;
		char *more;

		if (!by_index[i])
			continue;
		one = comparison_text(by_index[i]);
		more = xasprintf("%s%s%s", all, all[0] ? ", " : "", one);
		free(all);
		all = more;
	}
	json_array_append_new(keys, json_string(all));
}

/* Refuses a rule whose comparisons, for one of its syscalls, are those of an earlier rule
 * with another action: libseccomp refuses to load that filter. */
static int check_conditional(struct parse *ps, size_t index, const json_t *names,
			     const json_t *args, uint32_t ret)
{
	_cleanup_(json_decrefp) json_t *keys = json_array();
	json_t *name, *k;
	size_t i, j;

	conditional_keys(args, keys);
	json_array_foreach ((json_t *)names, i, name) {
		json_array_foreach (keys, j, k) {
			_cleanup_free_ char *key =
				xasprintf("%s: %s", json_string_value(name), json_string_value(k));
			json_t *seen = json_object_get(ps->conditional, key);
			char where[WHERE_MAX];

			if (!seen) {
				json_object_set_new(ps->conditional, key,
						    json_pack("[I,I]", (json_int_t)ret,
							      (json_int_t)index));
				continue;
			}
			if ((uint32_t)json_integer_value(json_array_get(seen, 0)) == ret)
				continue;
			snprintf(where, sizeof(where), "syscalls[%zu]", index);
			return bad(ps->err, where,
				   "compares the arguments of %s as syscalls[%lld] does, with "
				   "another action; crun cannot load both",
				   json_string_value(name),
				   (long long)json_integer_value(json_array_get(seen, 1)));
		}
	}
	return 0;
}

/* syscalls[index]: checked whole, then appended to out when it applies here. */
static int parse_rule(struct parse *ps, const json_t *rule, size_t index, json_t *out)
{
	_cleanup_(json_decrefp) json_t *names = NULL;
	_cleanup_(json_decrefp) json_t *args = NULL;
	struct filter inc, exc;
	struct verdict v;
	json_t *comment, *r;
	char where[WHERE_MAX];
	int ret;

	snprintf(where, sizeof(where), "syscalls[%zu]", index);
	if (!json_is_object(rule))
		return bad(ps->err, where,
			   "must be an object ({\"names\": [...], \"action\": ...})");
	ret = check_keys(rule, rule_keys, where, ps->err);
	if (ret == 0)
		ret = parse_names(rule, where, &names, ps->err);
	if (ret == 0)
		ret = parse_verdict(rule, "action", "errnoRet", where, &v, ps->err);
	if (ret == 0)
		ret = parse_args(rule, where, &args, ps->err);
	if (ret == 0)
		ret = member(rule, "comment", JSON_STRING, false, where, &comment, ps->err);
	if (ret == 0)
		ret = parse_filter(rule, "includes", where, &inc, ps->err);
	if (ret == 0)
		ret = parse_filter(rule, "excludes", where, &exc, ps->err);
	if (ret < 0 || !applies(ps, &inc, &exc))
		return ret;
	if (args && v.ret != ps->default_ret)
		ret = check_conditional(ps, index, names, args, v.ret);
	if (ret < 0)
		return ret;
	if (is_notify(&v) && ps->notify_rule < 0)
		ps->notify_rule = (long)index;
	r = json_pack("{s:O,s:s}", "names", names, "action", v.action->name);
	if (v.errno_ret >= 0)
		json_object_set_new(r, "errnoRet", json_integer(v.errno_ret));
	if (args)
		json_object_set(r, "args", args);
	json_array_append_new(out, r);
	return 0;
}

/* architectures, or archMap's entry for this machine: that architecture and its
 * subArchitectures. Sets out's "architectures" when there are any. */
static int parse_arches(const struct parse *ps, const json_t *root, json_t *out)
{
	json_t *list, *map, *e, *arch, *subs;
	_cleanup_(json_decrefp) json_t *res = json_array();
	size_t i;
	char p[WHERE_MAX], q[72];
	int ret = string_array(root, "architectures", "", arch_ok, &list, ps->err);

	if (ret == 0)
		ret = member(root, "archMap", JSON_ARRAY, false, "", &map, ps->err);
	if (ret < 0)
		return ret;
	if (json_array_size(list) > 0 && json_array_size(map) > 0)
		return bad(ps->err, "archMap",
			   "a profile has architectures or archMap, not both; keep archMap");
	if (list)
		json_array_extend(res, list);
	json_array_foreach (map, i, e) {
		snprintf(p, sizeof(p), "archMap[%zu]", i);
		if (!json_is_object(e))
			return bad(ps->err, p,
				   "must be an object ({\"architecture\", \"subArchitectures\"})");
		ret = check_keys(e, archmap_keys, p, ps->err);
		if (ret == 0)
			ret = member(e, "architecture", JSON_STRING, true, p, &arch, ps->err);
		if (ret == 0 && arch_ok(json_string_value(arch)))
			ret = bad(ps->err, p, "architecture \"%s\" %s",
				  shown(json_string_value(arch), q),
				  arch_ok(json_string_value(arch)));
		if (ret == 0)
			ret = string_array(e, "subArchitectures", p, arch_ok, &subs, ps->err);
		if (ret < 0)
			return ret;
		if (!ps->known || strcmp(json_string_value(arch), ps->known->scmp) != 0 ||
		    json_array_size(res) > 0)
			continue;
		json_array_append(res, arch);
		if (subs)
			json_array_extend(res, subs);
	}
	if (json_array_size(res) > 0)
		json_object_set(out, "architectures", res);
	return 0;
}

/* The top level: everything but syscalls and architectures. */
static int parse_top(struct parse *ps, const json_t *root, json_t *out)
{
	struct verdict v;
	json_t *flags, *listener, *meta, *comment;
	int ret = check_keys(root, profile_keys, "", ps->err);

	if (ret == 0)
		ret = parse_verdict(root, "defaultAction", "defaultErrnoRet", "", &v, ps->err);
	if (ret == 0 && is_notify(&v))
		ret = bad(ps->err, "defaultAction", "SCMP_ACT_NOTIFY cannot be the default action");
	if (ret == 0)
		ret = string_array(root, "flags", "", flag_ok, &flags, ps->err);
	if (ret == 0)
		ret = member(root, "listenerPath", JSON_STRING, false, "", &listener, ps->err);
	if (ret == 0 && listener &&
	    (json_string_value(listener)[0] != '/' ||
	     json_string_length(listener) > LISTENER_PATH_MAX))
		ret = bad(ps->err, "listenerPath",
			  "must be an absolute path of a unix socket (at most %d bytes)",
			  LISTENER_PATH_MAX);
	if (ret == 0)
		ret = member(root, "listenerMetadata", JSON_STRING, false, "", &meta, ps->err);
	if (ret == 0)
		ret = member(root, "comment", JSON_STRING, false, "", &comment, ps->err);
	if (ret < 0)
		return ret;
	ps->default_ret = v.ret;
	json_object_set_new(out, "defaultAction", json_string(v.action->name));
	if (v.errno_ret >= 0)
		json_object_set_new(out, "defaultErrnoRet", json_integer(v.errno_ret));
	if (flags)
		json_object_set(out, "flags", flags);
	if (listener)
		json_object_set(out, "listenerPath", listener);
	if (meta)
		json_object_set(out, "listenerMetadata", meta);
	return 0;
}

/* Builds the OCI object from a parsed profile. */
static int build(struct parse *ps, const json_t *root, json_t *out)
{
	_cleanup_(json_decrefp) json_t *rules = json_array();
	json_t *syscalls, *r;
	size_t i;
	int ret = parse_top(ps, root, out);

	if (ret == 0)
		ret = parse_arches(ps, root, out);
	if (ret == 0)
		ret = member(root, "syscalls", JSON_ARRAY, false, "", &syscalls, ps->err);
	if (ret < 0)
		return ret;
	json_array_foreach (syscalls, i, r) {
		ret = parse_rule(ps, r, i, rules);
		if (ret < 0)
			return ret;
	}
	if (ps->notify_rule >= 0 && !json_object_get(out, "listenerPath")) {
		char where[WHERE_MAX];

		snprintf(where, sizeof(where), "syscalls[%ld].action", ps->notify_rule);
		return bad(ps->err, where,
			   "SCMP_ACT_NOTIFY needs listenerPath, the socket of the agent that "
			   "decides");
	}
	json_object_set(out, "syscalls", rules);
	return 0;
}

/* Parses a Localhost profile; see the header. */
int seccomp_profile_parse(const char *text, size_t len, const char *const *caps, size_t n_caps,
			  json_t **out, struct err *err)
{
	_cleanup_(json_decrefp) json_t *root = NULL;
	_cleanup_(json_decrefp) json_t *res = NULL;
	_cleanup_(json_decrefp) json_t *conditional = json_object();
	struct parse ps = { .caps = caps,
			    .n_caps = n_caps,
			    .machine = "",
			    .notify_rule = -1,
			    .conditional = conditional,
			    .err = err };
	struct utsname u;
	json_error_t jerr;

	if (len > SECCOMP_PROFILE_MAX)
		return err_set(err, EINVAL, "the profile has %zu bytes; at most %d are accepted",
			       len, SECCOMP_PROFILE_MAX);
	if (!text || len == 0)
		return err_set(err, EINVAL,
			       "the profile is empty; write a JSON object such as "
			       "{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"syscalls\": [...]}");
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		/* the parser quotes the text near the error: keep control bytes out of logs */
		for (char *c = jerr.text; *c; c++)
			*c = (*c >= 0x20 && *c < 0x7f) ? *c : '?';
		return err_set(err, EINVAL, "not valid JSON: line %d, column %d: %s", jerr.line,
			       jerr.column, jerr.text);
	}
	if (!json_is_object(root))
		return err_set(err, EINVAL,
			       "must be a JSON object, with defaultAction and syscalls");
	if (uname(&u) == 0) {
		ps.machine = u.machine;
		parse_version(u.release, false, ps.kernel);
		for (size_t i = 0; i < ARRAY_SIZE(machines); i++)
			for (size_t j = 0; j < ARRAY_SIZE(machines[i].names); j++)
				if (machines[i].names[j] &&
				    strcmp(machines[i].names[j], u.machine) == 0)
					ps.known = &machines[i];
	}
	res = json_object();
	if (build(&ps, root, res) < 0)
		return -err->code;
	*out = steal_ptr(res);
	return 0;
}
