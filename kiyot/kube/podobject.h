/*
 * podobject.h: a sandbox's Pod object, read from the API server at RunPodSandbox so the cell
 * is sized from the pod's containers exactly (the sandbox config carries only CPU shares and a
 * memory limit) and can pre-pull the pod's images as soon as it boots.
 *
 *	struct podspec *pod = NULL;
 *	if (podobject_get(r, "default", "web", sandbox_uid, &pod, err) < 0)
 *		log_warn("pod default/web: %s; sizing from the sandbox config", err->msg);
 *
 * The Pod object is used only when its metadata.uid is the sandbox's: a Pod deleted and made
 * again under the same name is another pod. Only what sizing and the pre-pull read is taken
 * from it (metadata name, namespace and uid; each container's and init container's name, image
 * and cpu, memory and nvidia.com/gpu requests and limits), so fields `kiyot run` refuses
 * (secret volumes, env valueFrom, extended resources) do not stop a real Pod from being read;
 * what is read is validated as podspec.h says, and errors name the field.
 *
 * Every read is bounded by the reader's timeout, waiting for a free connection included, so an
 * unreachable or slow API server delays a RunPodSandbox by at most that much.
 *
 * Thread safety: a reader may be used from any number of threads; it holds a few API clients
 * (PODOBJECT_CLIENTS) and gives each to one thread at a time.
 */
#ifndef KIYOT_PODOBJECT_H
#define KIYOT_PODOBJECT_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"
#include "podspec.h"

#define PODOBJECT_TIMEOUT_MS 3000 /* one read, waiting for a client included */
#define PODOBJECT_CLIENTS 4	  /* concurrent reads; more callers wait their turn */

/* Bounds of the pre-pull list a cell boots with (the agent checks the first two again; the
 * total keeps the bootstrap document well inside EC2's 16 KiB of user-data). */
#define PODOBJECT_MAX_PREPULL 64
#define PODOBJECT_MAX_IMAGE 512 /* bytes of one image reference */
#define PODOBJECT_MAX_PREPULL_BYTES 8192

struct podobject_reader;

/*
 * A reader for the API server kubeconfig names (empty: the in-cluster service account when
 * $KUBERNETES_SERVICE_HOST is set). Always returns a reader: when there is no API server or
 * its credentials are unusable, the reader is disabled and every podobject_get fails at once
 * with ENOENT, saying why (the reason is also logged here, once). timeout_ms 0: the default.
 */
struct podobject_reader *podobject_reader_new(const char *kubeconfig, long timeout_ms);
void podobject_reader_free(struct podobject_reader *r);
/* Whether r has an API server to ask (the reason it has none is in podobject_get's error). */
int podobject_reader_enabled(const struct podobject_reader *r);

/*
 * Reads Pod ns/name and checks it is the pod with uid. On success *out (podspec_free) is the
 * Pod as described above. Errors, for the caller to log and fall back on:
 *	ENOENT	no API server configured, or no such Pod (404)
 *	EIO	no answer from the API server within the timeout (or the connection was refused)
 *	ETIMEDOUT every client stayed busy for the whole timeout
 *	ESTALE	the Pod's metadata.uid is not uid
 *	EACCES	401 or 403: the message names the RBAC rule kiyot needs
 *	EINVAL	the Pod is malformed; the message names the field
 *	EPROTO	any other answer
 */
int podobject_get(struct podobject_reader *r, const char *ns, const char *name, const char *uid,
		  struct podspec **out, struct err *err);

/* The checks and reading of podobject_get on a Pod object already fetched (tests). */
int podobject_from_json(const json_t *pod, const char *uid, struct podspec **out, struct err *err);

/*
 * The images a cell should pre-pull for p: its init containers' then its containers' images,
 * in order, each once (references naming the same image count once), skipping those with
 * imagePullPolicy Never and those that are no valid reference, within the PODOBJECT_MAX_*
 * bounds. A new JSON array of strings; *n_dropped (may be NULL) counts the images left out.
 */
json_t *podobject_prepull(const struct podspec *p, size_t *n_dropped);

#endif
