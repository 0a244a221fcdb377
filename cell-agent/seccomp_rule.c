/*
 * seccomp_rule.c: the rules of a Localhost profile (syscalls[i]): their names, action and
 * argument comparisons checked, their includes and excludes decided for the unit on the
 * running machine (architecture, capabilities, kernel version), and rules refused that give
 * one syscall's same comparisons another action than an earlier rule (libseccomp would not
 * load them). seccomp.c parses the rest of the profile and calls seccomp_parse_rule.
 */
#include "seccomp.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "seccomp_internal.h"
#include "xalloc.h"

#define SYSCALL_NAME_MAX 64 /* longer than any syscall name, short enough to quote */
#define ARGS_MAX 6	    /* a syscall has six arguments; crun ignores comparisons past 6 */

static const char *const operators[] = { "SCMP_CMP_NE",	       "SCMP_CMP_LT", "SCMP_CMP_LE",
					 "SCMP_CMP_EQ",	       "SCMP_CMP_GE", "SCMP_CMP_GT",
					 "SCMP_CMP_MASKED_EQ", NULL };

/* Capabilities as linux/capability.h names them, without "CAP_". */
static const char cap_names[] =
	"CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP "
	"LINUX_IMMUTABLE NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER "
	"SYS_MODULE SYS_RAWIO SYS_CHROOT SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE "
	"SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE AUDIT_WRITE AUDIT_CONTROL SETFCAP "
	"MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ PERFMON BPF "
	"CHECKPOINT_RESTORE";

/* The keys each object may have. */
static const char *const rule_keys[] = { "names",   "name",	"action",   "errnoRet", "args",
					 "comment", "includes", "excludes", NULL };
static const char *const arg_keys[] = { "index", "value", "valueTwo", "op", NULL };
static const char *const filter_keys[] = { "arches", "caps", "minKernel", NULL };

/* A parsed includes or excludes. */
struct filter {
	json_t *arches, *caps; /* borrowed from the profile; NULL when absent */
	bool has_kernel;
	unsigned long kernel[3];
};

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

/* Parses "major.minor" or "major.minor.patch" (then, when lenient, anything; when strict,
 * nothing or a "-" suffix). */
bool seccomp_parse_version(const char *s, bool strict, unsigned long v[3])
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
	int ret = seccomp_member(rule, key, JSON_OBJECT, false, where, &obj, err);

	memset(f, 0, sizeof(*f));
	if (ret < 0 || !obj)
		return ret;
	seccomp_path(p, where, key);
	ret = seccomp_check_keys(obj, filter_keys, p, err);
	if (ret == 0)
		ret = seccomp_string_array(obj, "arches", p, nonempty_ok, &f->arches, err);
	if (ret == 0)
		ret = seccomp_string_array(obj, "caps", p, cap_ok, &f->caps, err);
	if (ret == 0)
		ret = seccomp_member(obj, "minKernel", JSON_STRING, false, p, &kernel, err);
	if (ret < 0)
		return ret;
	if (kernel) {
		f->has_kernel = true;
		if (!seccomp_parse_version(json_string_value(kernel), true, f->kernel))
			return seccomp_bad(err, seccomp_path(p, p, "minKernel"),
					   "\"%s\" is not a kernel version such as \"5.8\"",
					   seccomp_shown(json_string_value(kernel), q));
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
	int ret = seccomp_member(rule, "args", JSON_ARRAY, false, where, &args, err);

	*out = NULL;
	if (ret < 0 || !args || json_array_size(args) == 0)
		return ret;
	if (json_array_size(args) > ARGS_MAX)
		return seccomp_bad(err, seccomp_path(p, where, "args"),
				   "%zu comparisons; at most %d are applied", json_array_size(args),
				   ARGS_MAX);
	*out = json_array();
	json_array_foreach (args, i, a) {
		json_int_t index, value, value2;
		bool have;

		snprintf(p, sizeof(p), "%.80s.args[%zu]", where, i);
		if (!json_is_object(a))
			ret = seccomp_bad(err, p,
					  "must be an object ({\"index\", \"value\", \"op\"})");
		if (ret == 0)
			ret = seccomp_check_keys(a, arg_keys, p, err);
		if (ret == 0)
			ret = seccomp_uint_member(a, "index", ARGS_MAX - 1, p, &have, &index, err);
		if (ret == 0 && !have)
			ret = seccomp_bad(err, p, "index (0-5) missing");
		if (ret == 0)
			ret = seccomp_uint_member(a, "value", INT64_MAX, p, &have, &value, err);
		if (ret == 0)
			ret = seccomp_uint_member(a, "valueTwo", INT64_MAX, p, &have, &value2, err);
		if (ret == 0)
			ret = seccomp_member(a, "op", JSON_STRING, true, p, &op, err);
		if (ret == 0 && seccomp_lookup(operators, json_string_value(op)) < 0)
			ret = seccomp_bad(err, seccomp_path(p, p, "op"),
					  "unknown operator \"%s\" (known: %s)",
					  seccomp_shown(json_string_value(op), q),
					  seccomp_joined(operators, list, sizeof(list)));
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
	int ret = seccomp_string_array(rule, "names", where, syscall_ok, &names, err);

	if (ret == 0)
		ret = seccomp_member(rule, "name", JSON_STRING, false, where, &name, err);
	if (ret < 0)
		return ret;
	if (names && name)
		return seccomp_bad(err, where, "has both names and name; use names");
	if (name && syscall_ok(json_string_value(name)))
		return seccomp_bad(err, seccomp_path(p, where, "name"), "\"%s\" %s",
				   seccomp_shown(json_string_value(name), q),
				   syscall_ok(json_string_value(name)));
	if (name) {
		*out = json_pack("[O]", name);
		return 0;
	}
	if (!names || json_array_size(names) == 0)
		return seccomp_bad(err, where, "names the syscalls it is for in \"names\": [...]");
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
			return seccomp_bad(
				ps->err, where,
				"compares the arguments of %s as syscalls[%lld] does, with "
				"another action; crun cannot load both",
				json_string_value(name),
				(long long)json_integer_value(json_array_get(seen, 1)));
		}
	}
	return 0;
}

/* syscalls[index]: checked whole, then appended to out when it applies here. */
int seccomp_parse_rule(struct parse *ps, const json_t *rule, size_t index, json_t *out)
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
		return seccomp_bad(ps->err, where,
				   "must be an object ({\"names\": [...], \"action\": ...})");
	ret = seccomp_check_keys(rule, rule_keys, where, ps->err);
	if (ret == 0)
		ret = parse_names(rule, where, &names, ps->err);
	if (ret == 0)
		ret = seccomp_parse_verdict(rule, "action", "errnoRet", where, &v, ps->err);
	if (ret == 0)
		ret = parse_args(rule, where, &args, ps->err);
	if (ret == 0)
		ret = seccomp_member(rule, "comment", JSON_STRING, false, where, &comment, ps->err);
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
	if (seccomp_is_notify(&v) && ps->notify_rule < 0)
		ps->notify_rule = (long)index;
	r = json_pack("{s:O,s:s}", "names", names, "action", v.action->name);
	if (v.errno_ret >= 0)
		json_object_set_new(r, "errnoRet", json_integer(v.errno_ret));
	if (args)
		json_object_set(r, "args", args);
	json_array_append_new(out, r);
	return 0;
}
