/*
 * kube.c: the Kubernetes API client: kubeconfig and service-account credentials, and JSON
 * requests over libcurl with bounded responses and timeouts.
 */
#include "kube.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fsutil.h"
#include "httpc.h"
#include "xalloc.h"
#include "yaml.h"

#define KUBE_CONNECT_TIMEOUT_S 5
#define KUBE_TIMEOUT_S 20

struct kube_client {
	struct kube_auth auth;
	long connect_timeout_ms, timeout_ms; /* 0: the defaults above */
	/* kept between requests (reset each time), so its connection to the API server and TLS
	 * session are reused */
	CURL *h;
};

void kube_auth_release(struct kube_auth *a)
{
	free(a->server);
	free(a->ca_file);
	free(a->cert_file);
	free(a->key_file);
	free(a->ca_data);
	free(a->cert_data);
	free(a->key_data);
	free(a->token);
	memset(a, 0, sizeof(*a));
}

/* The entry named name in a kubeconfig list (clusters, contexts, users), its inner object. */
static json_t *named(json_t *root, const char *list, const char *inner, const char *name)
{
	json_t *arr = json_object_get(root, list), *e;
	size_t i;

	if (!json_is_array(arr))
		return NULL;
	json_array_foreach (arr, i, e) {
		json_t *n = json_object_get(e, "name");

		if (json_is_string(n) && strcmp(json_string_value(n), name) == 0) {
			json_t *o = json_object_get(e, inner);

			return json_is_object(o) ? o : NULL;
		}
	}
	return NULL;
}

static const char *str_of(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	return json_is_string(v) && json_string_value(v)[0] ? json_string_value(v) : NULL;
}

/* A file name from a kubeconfig, relative to the kubeconfig's directory. */
static char *rel_path(const char *dir, const char *p)
{
	return p[0] == '/' ? xstrdup(p) : xasprintf("%s/%s", dir, p);
}

/* Takes <key> (a file) or <key>-data (base64 PEM) from obj. */
static int take_pem(json_t *obj, const char *key, const char *dir, char **file, char **data,
		    size_t *len, struct err *err)
{
	_cleanup_free_ char *dkey = xasprintf("%s-data", key);
	const char *v;

	if ((v = str_of(obj, dkey))) {
		if (b64_decode(v, data, len, err) < 0)
			return err_wrap(err, "%s", dkey);
	} else if ((v = str_of(obj, key))) {
		*file = rel_path(dir, v);
	}
	return 0;
}

/* Fills a from the cluster and user entries of a kubeconfig; a tokenFile's path goes to
 * *token_file, unread. */
static int auth_from_entries(json_t *cluster, json_t *user, const char *dir, struct kube_auth *a,
			     char **token_file, struct err *err)
{
	const char *v;
	size_t n;

	if (!(v = str_of(cluster, "server")))
		return err_set(err, EINVAL, "its cluster has no server");
	a->server = xstrdup(v);
	n = strlen(a->server);
	while (n > 0 && a->server[n - 1] == '/')
		a->server[--n] = '\0';
	if (!n)
		return err_set(err, EINVAL, "its cluster's server \"%s\" names no host", v);
	a->insecure = json_is_true(json_object_get(cluster, "insecure-skip-tls-verify"));
	if (take_pem(cluster, "certificate-authority", dir, &a->ca_file, &a->ca_data, &a->ca_len,
		     err) < 0)
		return -err->code;
	if (!user)
		return 0;
	if (take_pem(user, "client-certificate", dir, &a->cert_file, &a->cert_data, &a->cert_len,
		     err) < 0 ||
	    take_pem(user, "client-key", dir, &a->key_file, &a->key_data, &a->key_len, err) < 0)
		return -err->code;
	if ((v = str_of(user, "token")))
		a->token = xstrdup(v);
	else if ((v = str_of(user, "tokenFile")))
		*token_file = rel_path(dir, v);
	return 0;
}

int kube_kubeconfig_parse(const char *text, size_t len, const char *path, struct kube_auth *out,
			  char **token_file, struct err *err)
{
	struct kube_auth a = { 0 };
	_cleanup_free_ char *dir = xstrdup(path);
	_cleanup_free_ char *tf = NULL;
	json_t *root, *ctx, *cluster, *user = NULL;
	const char *cur, *v;
	int ret = 0;

	if (strrchr(dir, '/')) {
		*strrchr(dir, '/') = '\0';
	} else {
		free(dir);
		dir = xstrdup(".");
	}
	if (len > KUBE_MAX_CONFIG)
		return err_set(err, EFBIG, "kubeconfig: %s: larger than %u bytes", path,
			       KUBE_MAX_CONFIG);
	if (yaml_to_json(text, len, &root, err) < 0)
		return err_wrap(err, "kubeconfig: %s", path);
	if (!(cur = str_of(root, "current-context"))) {
		ret = err_set(err, EINVAL,
			      "kubeconfig %s: no current-context; set one with kubectl "
			      "config use-context",
			      path);
		goto out;
	}
	if (!(ctx = named(root, "contexts", "context", cur))) {
		ret = err_set(err, EINVAL, "kubeconfig %s: context \"%s\" is not defined", path,
			      cur);
		goto out;
	}
	if (!(v = str_of(ctx, "cluster")) || !(cluster = named(root, "clusters", "cluster", v))) {
		ret = err_set(err, EINVAL, "kubeconfig %s: context \"%s\" names no defined cluster",
			      path, cur);
		goto out;
	}
	if ((v = str_of(ctx, "user")) && !(user = named(root, "users", "user", v))) {
		ret = err_set(err, EINVAL, "kubeconfig %s: user \"%s\" is not defined", path, v);
		goto out;
	}
	if (auth_from_entries(cluster, user, dir, &a, &tf, err) < 0) {
		ret = err_wrap(err, "kubeconfig %s: context \"%s\"", path, cur);
		goto out;
	}
	*out = a;
	memset(&a, 0, sizeof(a));
	*token_file = steal_ptr(tf);
out:
	kube_auth_release(&a);
	json_decref(root);
	return ret;
}

int kube_auth_from_kubeconfig(const char *path, struct kube_auth *out, struct err *err)
{
	struct kube_auth a = { 0 };
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ char *tf = NULL;
	size_t len = 0;
	char *t;

	if (fs_read_file(path, KUBE_MAX_CONFIG, &text, &len, err) < 0)
		return err_wrap(err, "kubeconfig");
	if (kube_kubeconfig_parse(text, len, path, &a, &tf, err) < 0)
		return -err->code;
	if (tf) {
		if (fs_read_file(tf, KUBE_MAX_CONFIG, &t, &len, err) < 0) {
			kube_auth_release(&a);
			return err_wrap(err, "kubeconfig %s: tokenFile", path);
		}
		while (len > 0 && isspace((unsigned char)t[len - 1]))
			t[--len] = '\0';
		a.token = t;
	}
	*out = a;
	return 0;
}

int kube_auth_from_service_account(const char *dir, const char *host, const char *port,
				   struct kube_auth *out, struct err *err)
{
	struct kube_auth a = { 0 };
	_cleanup_free_ char *tpath = xasprintf("%s/token", dir);
	char *t;
	size_t len;

	if (!host || !host[0])
		return err_set(err, ENOENT, "KUBERNETES_SERVICE_HOST is not set");
	if (fs_read_file(tpath, KUBE_MAX_CONFIG, &t, &len, err) < 0)
		return err_wrap(err, "service account token");
	while (len > 0 && isspace((unsigned char)t[len - 1]))
		t[--len] = '\0';
	a.token = t;
	a.ca_file = xasprintf("%s/ca.crt", dir);
	if (!fs_exists(a.ca_file)) {
		kube_auth_release(&a);
		return err_set(err, ENOENT, "service account CA %s/ca.crt is missing", dir);
	}
	a.server = strchr(host, ':')
			   ? xasprintf("https://[%s]:%s", host, port && port[0] ? port : "443")
			   : xasprintf("https://%s:%s", host, port && port[0] ? port : "443");
	*out = a;
	return 0;
}

struct kube_client *kube_client_from_auth(struct kube_auth *auth)
{
	struct kube_client *c = xcalloc(1, sizeof(*c));

	c->auth = *auth;
	memset(auth, 0, sizeof(*auth));
	return c;
}

int kube_client_new(const char *kubeconfig, struct kube_client **out, struct err *err)
{
	struct kube_auth a = { 0 };
	const char *host = getenv("KUBERNETES_SERVICE_HOST");

	if (kubeconfig && kubeconfig[0]) {
		if (kube_auth_from_kubeconfig(kubeconfig, &a, err) < 0)
			return -err->code;
	} else if (host && host[0]) {
		if (kube_auth_from_service_account(KUBE_SA_DIR, host,
						   getenv("KUBERNETES_SERVICE_PORT"), &a, err) < 0)
			return err_wrap(err, "in-cluster service account");
	} else {
		return err_set(err, ENOENT,
			       "no kubeconfig set and not running in a cluster "
			       "(KUBERNETES_SERVICE_HOST is not set)");
	}
	*out = kube_client_from_auth(&a);
	return 0;
}

void kube_client_free(struct kube_client *c)
{
	if (!c)
		return;
	kube_auth_release(&c->auth);
	if (c->h)
		curl_easy_cleanup(c->h);
	free(c);
}

void kube_client_set_timeouts(struct kube_client *c, long connect_ms, long total_ms)
{
	c->connect_timeout_ms = connect_ms;
	c->timeout_ms = total_ms;
}

const char *kube_client_server(const struct kube_client *c)
{
	return c->auth.server;
}

/* Sets the TLS material of a on the handle. */
static void set_tls(CURL *h, const struct kube_auth *a)
{
	struct curl_blob blob;

	if (a->insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (a->ca_data) {
		blob = (struct curl_blob){ a->ca_data, a->ca_len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
	} else if (a->ca_file) {
		curl_easy_setopt(h, CURLOPT_CAINFO, a->ca_file);
	}
	if (a->cert_data) {
		blob = (struct curl_blob){ a->cert_data, a->cert_len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &blob);
		curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (a->cert_file) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, a->cert_file);
	}
	if (a->key_data) {
		blob = (struct curl_blob){ a->key_data, a->key_len, CURL_BLOB_COPY };
		curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &blob);
		curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (a->key_file) {
		curl_easy_setopt(h, CURLOPT_SSLKEY, a->key_file);
	}
}

int kube_request(struct kube_client *c, const char *method, const char *path,
		 const char *content_type, json_t *body, long *status, json_t **resp,
		 struct err *err)
{
	_cleanup_free_ char *url = xasprintf("%s%s", c->auth.server, path);
	_cleanup_free_ char *what = xasprintf("%s %s", method, url);
	_cleanup_free_ char *auth = NULL, *ctype = NULL, *sent = NULL;
	struct curl_slist *hdrs = NULL;
	struct httpc_answer a = { 0 };
	struct httpc_req req = {
		.method = method,
		.url = url,
		.max_answer = KUBE_MAX_RESPONSE,
		.connect_timeout_ms = c->connect_timeout_ms > 0 ? c->connect_timeout_ms
								: KUBE_CONNECT_TIMEOUT_S * 1000L,
		.timeout_ms = c->timeout_ms > 0 ? c->timeout_ms : KUBE_TIMEOUT_S * 1000L,
	};
	int ret;

	if (!c->h && !(c->h = curl_easy_init()))
		return err_set(err, ENOMEM, "curl_easy_init failed");
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	if (c->auth.token) {
		auth = xasprintf("Authorization: Bearer %s", c->auth.token);
		hdrs = curl_slist_append(hdrs, auth);
	}
	if (body) {
		ctype = xasprintf("Content-Type: %s",
				  content_type ? content_type : "application/json");
		hdrs = curl_slist_append(hdrs, ctype);
		sent = json_dumps(body, JSON_COMPACT);
		req.body = sent;
		req.body_len = strlen(sent);
	}
	req.headers = hdrs;
	httpc_prepare(c->h, &req, &a); /* options go, the connection stays */
	set_tls(c->h, &c->auth);
	ret = httpc_perform(c->h, &a, what, err);
	if (ret == 0) {
		*status = a.status;
		*resp = a.body.len ? json_loadb(a.body.data, a.body.len, 0, NULL) : NULL;
	}
	httpc_answer_release(&a);
	curl_slist_free_all(hdrs);
	return ret;
}

const char *kube_status_message(json_t *resp, const char *fallback)
{
	json_t *m = json_object_get(resp, "message");

	return json_is_string(m) ? json_string_value(m) : fallback;
}
