/*
 * podspec_internal.h: what the parts of the Pod manifest reader share; not for other modules.
 * podspec.c reads the pod, its metadata and volumes, podspec_container.c its containers, and
 * podspec_field.c holds the typed field readers both use.
 *
 * Paths: every reader takes the JSON path of the object it reads ("spec.containers[0]", ""
 * at the root) and names the offending field in its error, e.g. "spec.containers[0].image:
 * required". Readers return 0 or a negative errno (EINVAL for a bad manifest, ENOTSUP for a
 * field kiyot does not support) with err set. What they store in a podspec being built is
 * freed with it (podspec_free), also when a later field fails.
 */
#ifndef KIYOT_PODSPEC_INTERNAL_H
#define KIYOT_PODSPEC_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "podspec.h"
#include "strvec.h"

/* podspec_field.c: field readers */

/* "a.b" from a path and a key; the key alone at the root. The caller frees. */
char *podspec_join(const char *path, const char *key);
/* "a[3]" from a path and an index. The caller frees. */
char *podspec_index(const char *path, size_t i);
/* "a mapping", "a list", "a string", ... for error messages. */
const char *podspec_type_name(const json_t *v);
/* The member key of obj, or NULL when it is missing or null (both mean "not given"). */
const json_t *podspec_member(const json_t *obj, const char *key);
/* Checks that v (at path) has type t (JSON_TRUE stands for any boolean). */
int podspec_expect(const json_t *v, json_type t, const char *path, struct err *err);
/* Copies the string member key of obj into *out (the caller frees); *out is left alone when
 * it is not given, which is an error when required (so is an empty string then). */
int podspec_string(const json_t *obj, const char *key, const char *path, bool required, char **out,
		   struct err *err);
/* Reads the integer member key of obj within [min, max] into *out; *given (may be NULL) says
 * whether it was there. */
int podspec_int(const json_t *obj, const char *key, const char *path, int64_t min, int64_t max,
		int64_t *out, bool *given, struct err *err);
/* Reads the boolean member key of obj into *out; *given says whether it was there. */
int podspec_bool(const json_t *obj, const char *key, const char *path, bool *out, bool *given,
		 struct err *err);
/* Refuses (EINVAL) a non-null member of the mapping obj at path whose key is not in known
 * (NULL-terminated); the error names the field and lists the known ones. */
int podspec_check_keys(const json_t *obj, const char *path, const char *const *known,
		       struct err *err);
/* Reads the list of strings key of obj into a NULL-terminated *out of *n strings. */
int podspec_string_list(const json_t *obj, const char *key, const char *path, char ***out,
			size_t *n, struct err *err);
/* Writes a quantity given as a string or a number into buf as text for the quantity parser. */
int podspec_quantity_text(const json_t *v, const char *path, char *buf, size_t size,
			  struct err *err);
/* True when s[0..len) is an RFC 1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends. */
bool podspec_is_label(const char *s, size_t len);
/* The same without the 63: a part of a DNS-1123 subdomain, which Kubernetes does not bound. */
bool podspec_is_label_chars(const char *s, size_t len);
/* Checks that s (the value at path) is an RFC 1123 label, in the API server's words. */
int podspec_check_label(const char *s, const char *path, struct err *err);

/* podspec_container.c: containers */

/* Reads spec.containers (init false: required, at least one) or spec.initContainers (init
 * true: optional) of spec into ps; volume mounts are checked against ps->volumes, container
 * names against the containers already read. */
int podspec_read_overhead(const json_t *spec, struct podspec *ps, struct err *err);
int podspec_read_containers(const json_t *spec, const char *key, struct podspec *ps, bool init,
			    struct err *err);
/* Frees an array of n containers and everything they own; NULL is fine. */
void podspec_containers_free(struct podspec_container *c, size_t n);

/* podspec_security.c: security contexts */

/* Reads the securityContext of the container c (at path) into ct->security. */
int podspec_read_security(const json_t *c, const char *path, struct podspec_container *ct,
			  struct err *err);
/* Reads spec.securityContext, hostNetwork, hostPID, hostIPC, shareProcessNamespace and
 * hostUsers of spec into ps. */
int podspec_read_pod_security(const json_t *spec, struct podspec *ps, struct err *err);
/* Refuses the seccomp and AppArmor annotations of ps that ask for a profile (ENOTSUP). */
int podspec_check_security_annotations(const struct podspec *ps, struct err *err);
/* Free what a security context owns; the structure itself is the caller's. */
void podspec_security_release(struct podspec_security *s);
void podspec_pod_security_release(struct podspec_pod_security *s);

/* podspec.c */

/* Frees an array of n name/value pairs; NULL is fine. */
void podspec_kv_free(struct podspec_kv *kv, size_t n);
/* Reads the mapping of strings key of obj (at path) into *out, *n pairs; labels: values must
 * be label values (else annotations, bounded in total). */
int podspec_kv_map(const json_t *obj, const char *key, const char *path, bool labels,
		   struct podspec_kv **out, size_t *n, struct err *err);

/* podspec_node.c: where the pod may run */

/* Reads spec.nodeSelector and the required terms of spec.affinity.nodeAffinity. */
int podspec_read_node(const json_t *spec, struct podspec *ps, struct err *err);
/* Frees what podspec_read_node stored. */
void podspec_node_release(struct podspec *ps);

#endif
