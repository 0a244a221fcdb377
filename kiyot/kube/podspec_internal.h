/*
 * podspec_internal.h: what the parts of the Pod manifest reader share; not for other modules.
 * The reader is one tree of common/jfields.h tables: podspec.c holds the pod, its metadata,
 * the spec and its volumes, and takes the others' tables into spec's: podspec_container.c's
 * containers and resources, podspec_security.c's security contexts and host namespaces,
 * podspec_node.c's affinity. podspec_field.c holds the name and quantity rules they share.
 *
 * Paths: a table's reader, a check and a custom reader take the JSON path of what they read
 * ("spec.containers[0]") and name the offending field in their error, e.g.
 * "spec.containers[0].image: required". They return 0 or a negative errno (EINVAL for a bad
 * manifest, ENOTSUP for a field kiyot does not support) with err set. What a table stores in a
 * podspec being built is freed with it (podspec_free), also when a later field fails.
 */
#ifndef KIYOT_PODSPEC_INTERNAL_H
#define KIYOT_PODSPEC_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "jfields.h"
#include "podspec.h"

/* A string field of the manifest: at most the manifest's size (not jfields' 64 KiB). */
#define PODSPEC_STR(k, T, m) JF_STR(k, T, m), .max = PODSPEC_MAX_FILE
/* A list of strings (command, args, capabilities, values): jfields' 4096 entries, each at most
 * the manifest's size. */
#define PODSPEC_STRV(k, T, m, n) JF_STRV(k, T, m, n, 0), .len_max = PODSPEC_MAX_FILE

/* podspec_field.c: rules shared by the parts */

/* Writes a quantity given as a string or a number into buf as text for the quantity parser. */
int podspec_quantity_text(const json_t *v, const char *path, char *buf, size_t size,
			  struct err *err);
/* True when s[0..len) is an RFC 1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends. */
bool podspec_is_label(const char *s, size_t len);
/* The same without the 63: a part of a DNS-1123 subdomain, which Kubernetes does not bound. */
bool podspec_is_label_chars(const char *s, size_t len);
/* A field check (jfields.h): the string v (at path) is an RFC 1123 label, in the API
 * server's words. */
int podspec_check_label(void *obj, const json_t *v, const char *path, struct err *err);

/* podspec_container.c: spec.initContainers and spec.containers, spec.overhead */

/* One container (a list entry: struct podspec_container; release included). */
extern const struct jf_table podspec_container_table;
/* A mapping of resource quantities into struct podspec_resources (requests, limits,
 * spec.overhead): cpu, memory, nvidia.com/gpu, ephemeral-storage; others are ENOTSUP. */
extern const struct jf_table podspec_quantities_table;
/* Checks of spec.initContainers and spec.containers (obj: the podspec), once the list is read:
 * names unique among all the pod's containers, volume mounts naming spec.volumes, a sidecar
 * (restartPolicy: Always) only among init containers, at least one app container. */
int podspec_check_init_containers(void *obj, const json_t *v, const char *path, struct err *err);
int podspec_check_containers(void *obj, const json_t *v, const char *path, struct err *err);
/* Frees an array of n containers and everything they own; NULL is fine. */
void podspec_containers_free(struct podspec_container *c, size_t n);

/* podspec_security.c: security contexts */

/* A container's securityContext into struct podspec_security; spec.securityContext into
 * struct podspec_pod_security. Strict: an unknown field is an error, and so is one asking for
 * what a cell cannot do (ENOTSUP). */
extern const struct jf_table podspec_security_table;
extern const struct jf_table podspec_pod_security_table;
/* spec.hostUsers (custom reader, dst unused): false is ENOTSUP. */
int podspec_read_host_users(const json_t *v, void *dst, const char *path, struct err *err);
/* spec.shareProcessNamespace's check (obj: the podspec): not together with hostPID. */
int podspec_check_share_pid(void *obj, const json_t *v, const char *path, struct err *err);
/* Refuses the seccomp and AppArmor annotations of ps that ask for a profile (ENOTSUP). */
int podspec_check_security_annotations(const struct podspec *ps, struct err *err);
/* Free what a security context owns; the structure itself is the caller's. */
void podspec_security_release(struct podspec_security *s);
void podspec_pod_security_release(struct podspec_pod_security *s);

/* podspec.c */

/* Frees an array of n name/value pairs; NULL is fine. */
void podspec_kv_free(struct podspec_kv *kv, size_t n);
/* Frees what one name/value pair owns (a list entry's release). */
void podspec_kv_release(void *kv);

/* podspec_node.c: where the pod may run */

/* spec.affinity into struct podspec: the required terms of nodeAffinity. */
extern const struct jf_table podspec_affinity_table;
/* Frees what spec.nodeSelector and spec.affinity stored. */
void podspec_node_release(struct podspec *ps);

#endif
