/*
 * kube.h: a small Kubernetes API client: where the API server is and how to authenticate
 * (a kubeconfig file or the in-cluster service account), and JSON requests over libcurl.
 *
 *	struct kube_client *kc;
 *	if (kube_client_new(cfg->kubeconfig, &kc, err) < 0)
 *		return err_wrap(err, "kubernetes");
 *	long status;
 *	json_t *obj;
 *	if (kube_request(kc, "GET", "/apis/kiyot.elotl.co/v1/cells", NULL, NULL, &status, &obj,
 *			 err) < 0)
 *		...     (no HTTP answer: the API server is unreachable)
 *
 * Thread safety: a client may be used by one thread at a time.
 */
#ifndef KIYOT_KUBE_H
#define KIYOT_KUBE_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

#define KUBE_MAX_RESPONSE (16u << 20) /* bytes of one response body */
#define KUBE_MAX_CONFIG (1u << 20)    /* bytes of a kubeconfig or a service-account file */
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Where the API server is and the credentials to use. Owned strings; "data" members hold the
 * decoded PEM bytes of the *-data kubeconfig fields. */
struct kube_auth {
	char *server; /* https://host:port, no trailing slash */
	char *ca_file, *cert_file, *key_file;
	char *ca_data, *cert_data, *key_data;
	size_t ca_len, cert_len, key_len;
	char *token;
	int insecure; /* insecure-skip-tls-verify */
};

void kube_auth_release(struct kube_auth *a);

/* Reads a kubeconfig (YAML): its current context's cluster and user. Relative file names are
 * taken from the kubeconfig's directory, as kubectl does. Errors name the file and what is
 * missing. */
int kube_auth_from_kubeconfig(const char *path, struct kube_auth *out, struct err *err);

/* Its parsing half, on the text (len bytes, no NUL needed, at most KUBE_MAX_CONFIG) of the
 * kubeconfig at path, which names it in errors and whose directory relative file names are
 * taken from. Reads no file: a user's tokenFile is left to the caller, *token_file getting its
 * path (NULL when there is none; the caller frees it) and out->token staying NULL. On failure
 * out and *token_file are untouched. Errors: EINVAL naming what is missing, the codes of yaml.h
 * for text that is not YAML, and of b64_decode for *-data fields that are not base64. */
int kube_kubeconfig_parse(const char *text, size_t len, const char *path, struct kube_auth *out,
			  char **token_file, struct err *err);

/* The in-cluster service account: token and CA from dir (normally KUBE_SA_DIR), the server
 * from host and port (normally $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT). */
int kube_auth_from_service_account(const char *dir, const char *host, const char *port,
				   struct kube_auth *out, struct err *err);

struct kube_client;

/* A client for a kubeconfig when kubeconfig is non-empty, else for the in-cluster service
 * account when $KUBERNETES_SERVICE_HOST is set; -ENOENT (with a message) when neither. */
int kube_client_new(const char *kubeconfig, struct kube_client **out, struct err *err);
/* A client for given credentials (takes ownership of *auth, which is cleared). */
struct kube_client *kube_client_from_auth(struct kube_auth *auth);
void kube_client_free(struct kube_client *c);
const char *kube_client_server(const struct kube_client *c);
/* Bounds the requests made with c from now on: connect_ms to connect (TLS included) and
 * total_ms for the whole request; 0 restores a default (5 s and 20 s). A request that runs
 * out of time fails with EIO naming the timeout, as an unreachable server does. */
void kube_client_set_timeouts(struct kube_client *c, long connect_ms, long total_ms);

/*
 * One request to path (starting with "/", query included). body, when not NULL, is sent as
 * JSON with content_type (NULL: application/json). On an HTTP answer returns 0 with *status
 * and *resp (the parsed JSON body, or NULL when it is not JSON; caller decrefs); errors only
 * when no answer came (connection refused, TLS, timeout) or the body exceeds
 * KUBE_MAX_RESPONSE.
 */
int kube_request(struct kube_client *c, const char *method, const char *path,
		 const char *content_type, json_t *body, long *status, json_t **resp,
		 struct err *err);

/* The message of an API Status object, or fallback when resp is none. */
const char *kube_status_message(json_t *resp, const char *fallback);

#endif
