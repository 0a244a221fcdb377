/*
 * seccomp.c: seccomp_profile_parse, a Localhost profile's top level (defaultAction,
 * architectures or archMap, flags, listener) and the checks of JSON members that
 * seccomp_rule.c, which parses the rules (syscalls[i]), uses too: known keys, types, ranges,
 * actions, and messages that say where the profile is wrong. Also the capability names all
 * parts compare. RuntimeDefault is in seccomp_default.c.
 */
#include "seccomp.h"

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
#define LISTENER_PATH_MAX 107 /* sun_path less its NUL */

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
static const struct action actions[] = {
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

/* The machines includes.arches and excludes.arches can name, each by every spelling in use:
 * the kernel's (uname), Docker's, and libseccomp's. */
static const struct machine machines[] = {
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
static const char *const archmap_keys[] = { "architecture", "subArchitectures", NULL };

ssize_t seccomp_lookup(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return (ssize_t)i;
	return -1;
}

/* list joined with ", " into buf (cut short when it does not fit). */
const char *seccomp_joined(const char *const *list, char *buf, size_t size)
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
const char *seccomp_shown(const char *s, char buf[72])
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
int seccomp_bad(struct err *err, const char *where, const char *fmt, ...)
{
	char what[448];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(err, EINVAL, "%s: %s", where, what);
}

/* where.key, or key at the top, into buf (WHERE_MAX bytes). */
const char *seccomp_path(char *buf, const char *where, const char *key)
{
	char w[WHERE_MAX];

	snprintf(w, sizeof(w), "%s", where);
	snprintf(buf, WHERE_MAX, "%.80s%s%.24s", w, w[0] ? "." : "", key);
	return buf;
}

/* Refuses keys of obj that are not in known. */
int seccomp_check_keys(const json_t *obj, const char *const *known, const char *where,
		       struct err *err)
{
	const char *key;
	json_t *v;
	char q[72], list[256];

	json_object_foreach ((json_t *)obj, key, v) {
		if (seccomp_lookup(known, key) < 0)
			return seccomp_bad(err, where[0] ? where : "top level",
					   "unknown key \"%s\" (known here: %s)",
					   seccomp_shown(key, q),
					   seccomp_joined(known, list, sizeof(list)));
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
int seccomp_member(const json_t *obj, const char *key, json_type t, bool required,
		   const char *where, json_t **out, struct err *err)
{
	json_t *v = json_object_get(obj, key);
	char p[WHERE_MAX];

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (required)
			return seccomp_bad(err, seccomp_path(p, where, key), "missing");
		return 0;
	}
	if (json_typeof(v) != t)
		return seccomp_bad(err, seccomp_path(p, where, key), "must be %s", type_name(t));
	*out = v;
	return 0;
}

/* A non-negative integer member of at most max; *have false when absent or null. */
int seccomp_uint_member(const json_t *obj, const char *key, json_int_t max, const char *where,
			bool *have, json_int_t *out, struct err *err)
{
	json_t *v;
	char p[WHERE_MAX];
	int ret = seccomp_member(obj, key, JSON_INTEGER, false, where, &v, err);

	*have = v != NULL;
	*out = 0;
	if (ret < 0 || !v)
		return ret;
	*out = json_integer_value(v);
	if (*out < 0 || *out > max)
		return seccomp_bad(err, seccomp_path(p, where, key), "%lld is out of range 0-%lld",
				   (long long)*out, (long long)max);
	return 0;
}

/* Parses an action at obj[key] with its errno at obj[errno_key]. */
int seccomp_parse_verdict(const json_t *obj, const char *key, const char *errno_key,
			  const char *where, struct verdict *v, struct err *err)
{
	json_t *name;
	bool have_errno;
	json_int_t e;
	char q[72], p[WHERE_MAX], list[256];
	size_t i;
	int ret = seccomp_member(obj, key, JSON_STRING, true, where, &name, err);

	if (ret < 0)
		return ret;
	for (i = 0; i < ARRAY_SIZE(actions); i++)
		if (strcmp(actions[i].name, json_string_value(name)) == 0)
			break;
	if (i == ARRAY_SIZE(actions)) {
		const char *names[ARRAY_SIZE(actions) + 1] = { NULL };

		for (size_t j = 0; j < ARRAY_SIZE(actions); j++)
			names[j] = actions[j].name;
		return seccomp_bad(err, seccomp_path(p, where, key),
				   "unknown action \"%s\" (known: %s)",
				   seccomp_shown(json_string_value(name), q),
				   seccomp_joined(names, list, sizeof(list)));
	}
	ret = seccomp_uint_member(obj, errno_key, ERRNO_MAX, where, &have_errno, &e, err);
	if (ret < 0)
		return ret;
	if (have_errno && !actions[i].takes_errno)
		return seccomp_bad(err, seccomp_path(p, where, errno_key),
				   "only SCMP_ACT_ERRNO and SCMP_ACT_TRACE take an errno, not %s",
				   actions[i].name);
	v->action = &actions[i];
	v->errno_ret = have_errno ? e : -1;
	v->ret = actions[i].ret | (actions[i].takes_errno ? (uint32_t)(have_errno ? e : EPERM) : 0);
	return 0;
}

bool seccomp_is_notify(const struct verdict *v)
{
	return strcmp(v->action->name, "SCMP_ACT_NOTIFY") == 0;
}

/* An array member whose elements are strings accepted by ok (which says what is wrong). */
int seccomp_string_array(const json_t *obj, const char *key, const char *where,
			 const char *(*ok)(const char *s), json_t **out, struct err *err)
{
	json_t *v;
	size_t i;
	char p[WHERE_MAX], q[72];
	int ret = seccomp_member(obj, key, JSON_ARRAY, false, where, out, err);

	if (ret < 0 || !*out)
		return ret;
	json_array_foreach (*out, i, v) {
		const char *why;

		snprintf(p, sizeof(p), "%.80s%s%.24s[%zu]", where, where[0] ? "." : "", key, i);
		if (!json_is_string(v))
			return seccomp_bad(err, p, "must be a string");
		why = ok(json_string_value(v));
		if (why)
			return seccomp_bad(err, p, "\"%s\" %s",
					   seccomp_shown(json_string_value(v), q), why);
	}
	return 0;
}

static const char *arch_ok(const char *s)
{
	return seccomp_lookup(scmp_arches, s) < 0 ? "is not an architecture libseccomp knows (e.g. "
						    "SCMP_ARCH_X86_64, SCMP_ARCH_AARCH64)"
						  : NULL;
}

static const char *flag_ok(const char *s)
{
	return seccomp_lookup(filter_flags, s) < 0
		       ? "is not a flag crun knows (SECCOMP_FILTER_FLAG_TSYNC, "
			 "_LOG, _SPEC_ALLOW, _WAIT_KILLABLE_RECV)"
		       : NULL;
}

/* architectures, or archMap's entry for this machine: that architecture and its
 * subArchitectures. Sets out's "architectures" when there are any. */
static int parse_arches(const struct parse *ps, const json_t *root, json_t *out)
{
	json_t *list, *map, *e, *arch, *subs;
	_cleanup_(json_decrefp) json_t *res = json_array();
	size_t i;
	char p[WHERE_MAX], q[72];
	int ret = seccomp_string_array(root, "architectures", "", arch_ok, &list, ps->err);

	if (ret == 0)
		ret = seccomp_member(root, "archMap", JSON_ARRAY, false, "", &map, ps->err);
	if (ret < 0)
		return ret;
	if (json_array_size(list) > 0 && json_array_size(map) > 0)
		return seccomp_bad(
			ps->err, "archMap",
			"a profile has architectures or archMap, not both; keep archMap");
	if (list)
		json_array_extend(res, list);
	json_array_foreach (map, i, e) {
		snprintf(p, sizeof(p), "archMap[%zu]", i);
		if (!json_is_object(e))
			return seccomp_bad(
				ps->err, p,
				"must be an object ({\"architecture\", \"subArchitectures\"})");
		ret = seccomp_check_keys(e, archmap_keys, p, ps->err);
		if (ret == 0)
			ret = seccomp_member(e, "architecture", JSON_STRING, true, p, &arch,
					     ps->err);
		if (ret == 0 && arch_ok(json_string_value(arch)))
			ret = seccomp_bad(ps->err, p, "architecture \"%s\" %s",
					  seccomp_shown(json_string_value(arch), q),
					  arch_ok(json_string_value(arch)));
		if (ret == 0)
			ret = seccomp_string_array(e, "subArchitectures", p, arch_ok, &subs,
						   ps->err);
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
	int ret = seccomp_check_keys(root, profile_keys, "", ps->err);

	if (ret == 0)
		ret = seccomp_parse_verdict(root, "defaultAction", "defaultErrnoRet", "", &v,
					    ps->err);
	if (ret == 0 && seccomp_is_notify(&v))
		ret = seccomp_bad(ps->err, "defaultAction",
				  "SCMP_ACT_NOTIFY cannot be the default action");
	if (ret == 0)
		ret = seccomp_string_array(root, "flags", "", flag_ok, &flags, ps->err);
	if (ret == 0)
		ret = seccomp_member(root, "listenerPath", JSON_STRING, false, "", &listener,
				     ps->err);
	if (ret == 0 && listener &&
	    (json_string_value(listener)[0] != '/' ||
	     json_string_length(listener) > LISTENER_PATH_MAX))
		ret = seccomp_bad(ps->err, "listenerPath",
				  "must be an absolute path of a unix socket (at most %d bytes)",
				  LISTENER_PATH_MAX);
	if (ret == 0)
		ret = seccomp_member(root, "listenerMetadata", JSON_STRING, false, "", &meta,
				     ps->err);
	if (ret == 0)
		ret = seccomp_member(root, "comment", JSON_STRING, false, "", &comment, ps->err);
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
		ret = seccomp_member(root, "syscalls", JSON_ARRAY, false, "", &syscalls, ps->err);
	if (ret < 0)
		return ret;
	json_array_foreach (syscalls, i, r) {
		ret = seccomp_parse_rule(ps, r, i, rules);
		if (ret < 0)
			return ret;
	}
	if (ps->notify_rule >= 0 && !json_object_get(out, "listenerPath")) {
		char where[WHERE_MAX];

		snprintf(where, sizeof(where), "syscalls[%ld].action", ps->notify_rule);
		return seccomp_bad(
			ps->err, where,
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
		seccomp_parse_version(u.release, false, ps.kernel);
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