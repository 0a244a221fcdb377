/*
 * cri_validate_internal.h: what the two files of the CRI boundary checks share:
 * cri_validate_fields.c (names, labels, annotations, ids, paths: Kubernetes' own rules, and
 * the bounds every field has) and cri_validate.c (configs and requests). Not for other modules.
 */
#ifndef KIYOT_CRI_VALIDATE_INTERNAL_H
#define KIYOT_CRI_VALIDATE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "cri_api.pb-c.h"
#include "cri_validate.h"

#define MAX_MAP_ENTRIES 4096	   /* labels, annotations, sysctls, unified */
#define MAX_LABEL_VALUE 63	   /* a label value; also the name part of a key */
#define MAX_SUBDOMAIN 253	   /* a DNS-1123 subdomain */
#define MAX_HOSTNAME 64		   /* HOST_NAME_MAX */
#define MAX_PATH 4095		   /* PATH_MAX, its NUL aside */
#define MAX_ID 128		   /* kiyot's ids have 64, containerd's too */
#define MAX_IMAGE_REF 520	   /* a 255-character name, ':' a 128 tag, '@' a sha512 digest */
#define MAX_AUTH_FIELD (16 * 1024) /* a JWT or a service account key is a few KiB */
#define MAX_DNS_SERVERS 3	   /* what the kubelet passes, and glibc reads (MAXNS) */
#define MAX_DNS_SEARCHES 32	   /* Kubernetes' MaxDNSSearchPaths */
#define MAX_DNS_SEARCH_CHARS 2048  /* Kubernetes' MaxDNSSearchListChars */
#define MAX_DNS_OPTIONS 32
#define MAX_SYSCTL_VALUE 4095 /* a /proc/sys write is one page */
#define MAX_PORT_MAPPINGS 1024
#define MAX_PORTS 65535 /* PortForward's list: there are no more ports */
#define MAX_MOUNTS 1024
#define MAX_ID_MAPPINGS 340 /* the kernel's limit of lines in a uid_map */
#define MAX_DEVICES 1024
#define MAX_GROUPS 65536 /* NGROUPS_MAX */
#define MAX_CAPABILITIES 64
#define MAX_MASKED_PATHS 1024
#define MAX_HUGEPAGE_LIMITS 16
#define MAX_CGROUP_VALUE 4095
#define MAX_SHORT 1024 /* short free-form strings: runtime handler, cpusets, profile names */
#define SHOW 64	       /* bytes of a bad value shown in a message */

#define CPU_PERIOD_MIN 1000LL		/* us: the kernel's min_cfs_quota_period */
#define CPU_PERIOD_MAX 1000000LL	/* us: max_cfs_quota_period */
#define CPU_QUOTA_MAX ((1LL << 44) - 1) /* us: max_cfs_runtime */
#define CPU_SHARES_MIN 2LL
#define CPU_SHARES_MAX 262144LL

/* A map entry of any CRI map (labels, annotations, sysctls): they share this layout. */
struct kv {
	ProtobufCMessage base;
	char *key;
	char *value;
};

/* Fails when a string is longer than max; the rest names the field, printf-style. */
int cv_check_len(const char *s, size_t max, struct err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Fails when a list or map has more than max entries; the rest names the field. */
int cv_check_count(size_t n, size_t max, struct err *err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Writes s quoted into buf, at most SHOW bytes of it, bytes that are not printable ASCII as
 * \xNN, "..." when cut; returns buf. */
const char *cv_show(char buf[static SHOW * 4 + 8], const char *s);
/* A container's name as runtimes take it: the kubelet sends DNS-1123 labels, the CRI
 * validation suite also dots and underscores (names built from file names), which containerd
 * takes; never a '/' or anything that is not printable ASCII. */
bool cv_is_container_name(const char *s, size_t len, size_t max);
/* A container or sandbox id: required, short, of the characters ids are made of. */
int cv_check_id(const char *field, const char *id, struct err *err);
/* A path kiyot joins or opens: bounded, with no ".." component; absolute when asked. */
int cv_check_path(const char *field, const char *p, bool absolute, struct err *err);
/* The metadata of a pod: name, namespace and uid, each when set (the handler requires them). */
int cv_check_pod_metadata(const char *path, const Runtime__V1__PodSandboxMetadata *md,
			  struct err *err);
/* Labels: Kubernetes' label keys and values; the kubelet's pod name label holds a pod name. */
int cv_check_labels(const char *path, struct kv **m, size_t n, struct err *err);
/* Annotations: keys as label keys in any case; keys and values together bounded. */
int cv_check_annotations(const char *path, struct kv **m, size_t n, struct err *err);
/* A string list of a process (command, args, environment), added to *total. */
int cv_check_strings(const char *field, char **v, size_t n, size_t *total, struct err *err);
int cv_check_process_total(const char *field, size_t total, struct err *err);

#endif
