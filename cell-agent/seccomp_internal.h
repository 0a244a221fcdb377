/*
 * seccomp_internal.h: what the parts of the seccomp module share and nobody else sees.
 * seccomp_default.c holds RuntimeDefault; seccomp.c parses a Localhost profile's top level and
 * holds the checks of JSON members both parsers use; seccomp_rule.c parses its rules
 * (syscalls[i]). Reentrant.
 */
#ifndef AGENT_SECCOMP_INTERNAL_H
#define AGENT_SECCOMP_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define WHERE_MAX 128 /* "syscalls[12].args[3].valueTwo" and the like */

/* cap without a leading "CAP_" (any case): "CAP_SYS_ADMIN" and "sys_admin" give "SYS_ADMIN"
 * and "sys_admin", to compare in any case. Points into cap. */
const char *seccomp_cap_bare(const char *cap);

/* Whether caps[0..n_caps) holds cap, compared in any case with or without "CAP_"; NULL
 * entries are skipped, caps may be NULL when n_caps is 0. */
bool seccomp_has_cap(const char *const *caps, size_t n_caps, const char *cap);

/* An action crun knows (seccomp.c's table): its name and the filter return value libseccomp
 * gives it, to which an errno is added when it takes one. */
struct action {
	const char *name;
	uint32_t ret;
	bool takes_errno;
};

/* A machine by every spelling of it in use (uname's, Docker's) and libseccomp's. */
struct machine {
	const char *names[4];
	const char *scmp;
};

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

/*
 * The checks of a profile's JSON, in seccomp.c. where is the path of the object being checked
 * ("" at the top, else e.g. "syscalls[3]"); a message names where.key. Those returning int
 * give 0, or -EINVAL with err set saying where the profile is wrong and how.
 */

/* The index of s in the NULL-terminated list, or -1. */
ssize_t seccomp_lookup(const char *const *list, const char *s);

/* list (NULL-terminated) joined with ", " into buf of size bytes, cut short when it does not
 * fit; returns buf. */
const char *seccomp_joined(const char *const *list, char *buf, size_t size);

/* s made safe to quote in a message (at most 64 bytes, printable ASCII, no quotes, "..." when
 * cut) in buf; returns buf. */
const char *seccomp_shown(const char *s, char buf[72]);

/* Sets err to EINVAL with "<where>: <what>"; returns -EINVAL. */
int seccomp_bad(struct err *err, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* where.key, or key when where is "", into buf (WHERE_MAX bytes); returns buf. */
const char *seccomp_path(char *buf, const char *where, const char *key);

/* Refuses a key of obj that is not in known (NULL-terminated), naming the known ones. */
int seccomp_check_keys(const json_t *obj, const char *const *known, const char *where,
		       struct err *err);

/* *out = obj[key] (borrowed) when it has type t; NULL when absent or null, which is refused
 * when required. */
int seccomp_member(const json_t *obj, const char *key, json_type t, bool required,
		   const char *where, json_t **out, struct err *err);

/* obj[key] as an integer 0..max in *out; *have is false (and *out 0) when absent or null. */
int seccomp_uint_member(const json_t *obj, const char *key, json_int_t max, const char *where,
			bool *have, json_int_t *out, struct err *err);

/* obj[key] as an array (borrowed, NULL when absent or null) of strings each accepted by ok,
 * which returns NULL or what is wrong with a string ("is not ..."). */
int seccomp_string_array(const json_t *obj, const char *key, const char *where,
			 const char *(*ok)(const char *s), json_t **out, struct err *err);

/* The action named by obj[key] (required) with its errno at obj[errno_key] (only for actions
 * that take one; EPERM when absent) into *v. */
int seccomp_parse_verdict(const json_t *obj, const char *key, const char *errno_key,
			  const char *where, struct verdict *v, struct err *err);

/* Whether v is SCMP_ACT_NOTIFY. */
bool seccomp_is_notify(const struct verdict *v);

/* Parses a version "major.minor" or "major.minor.patch" into v (missing parts 0, parts at
 * most 65535). strict (minKernel): nothing or a "-" suffix may follow; lenient (uname's
 * release): anything may. False when s is not such a version. In seccomp_rule.c. */
bool seccomp_parse_version(const char *s, bool strict, unsigned long v[3]);

/* Checks syscalls[index], rule, whole, and when its includes and excludes keep it for ps's
 * unit and machine appends the rule as crun takes it to out; refuses a rule giving the same
 * comparisons of a syscall another action than an earlier one (ps->conditional), and notes
 * the first SCMP_ACT_NOTIFY rule in ps->notify_rule. Errors go to ps->err. In seccomp_rule.c. */
int seccomp_parse_rule(struct parse *ps, const json_t *rule, size_t index, json_t *out);

#endif
