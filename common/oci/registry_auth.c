/*
 * registry_auth.c: a registry client (registry.h) and how it authenticates to each endpoint.
 * The pull's credentials (a user name and password, or CRI's base64 auth) decoded when the
 * client is made; a 401's WWW-Authenticate challenge parsed and answered, Bearer with a token
 * fetched from its realm (with the credentials or an identity token, for the registry itself
 * only) and kept per endpoint, or Basic with the credentials. The requests that meet the
 * challenges are in registry.c.
 */
#include "registry_internal.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "buf.h"
#include "codec.h"
#include "httpc.h"
#include "regconf.h"
#include "xalloc.h"

#define REG_MAX_TOKEN_BODY (1u << 20)

/* Decodes base64 "user:pass" (CRI's auth field). */
static int reg_decode_auth(const char *b64, char **user, char **pass)
{
	_cleanup_free_ char *out = NULL;
	struct err e = ERR_INIT;
	size_t len;
	char *colon;

	if (strlen(b64) > 8192 || b64_decode(b64, &out, &len, &e) < 0)
		return -EINVAL;
	colon = strchr(out, ':');
	if (!colon)
		return -EINVAL;
	*user = xstrndup(out, (size_t)(colon - out));
	*pass = xstrdup(colon + 1);
	return 0;
}

int reg_client_new(const struct regconf *rc, const char *host, const char *repository,
		   const struct image_auth *auth, struct reg_client **out, struct err *err)
{
	struct reg_client *c = xcalloc(1, sizeof(*c));
	int ret;

	ret = regconf_endpoints(rc, host, &c->eps, &c->n_eps, err);
	if (ret < 0) {
		free(c);
		return ret;
	}
	c->rc = rc;
	c->host = xstrdup(host);
	c->repo = xstrdup(repository);
	c->auth = auth;
	c->st = xcalloc(c->n_eps, sizeof(*c->st));
	reg_guard_init(&c->guard, c->eps, c->n_eps);
	if (auth && auth->username && *auth->username) {
		c->user = xstrdup(auth->username);
		c->pass = xstrdup(auth->password ? auth->password : "");
	} else if (auth && auth->auth && *auth->auth &&
		   reg_decode_auth(auth->auth, &c->user, &c->pass) < 0) {
		reg_client_free(c);
		return err_set(
			err, EINVAL,
			"registry %s: the auth credential is not base64 of \"user:password\"",
			host);
	}
	c->curl = curl_easy_init();
	if (!c->curl)
		abort();
	*out = c;
	return 0;
}

int reg_client_dup(const struct reg_client *c, struct reg_client **out, struct err *err)
{
	struct reg_client *d;
	int ret = reg_client_new(c->rc, c->host, c->repo, c->auth, &d, err);

	if (ret < 0)
		return ret;
	for (size_t i = 0; i < c->n_eps && i < d->n_eps; i++) {
		d->st[i].basic = c->st[i].basic;
		d->st[i].token = c->st[i].token ? xstrdup(c->st[i].token) : NULL;
	}
	*out = d;
	return 0;
}

void reg_client_free(struct reg_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_eps; i++)
		free(c->st[i].token);
	free(c->st);
	reg_guard_release(&c->guard);
	reg_endpoints_free(c->eps, c->n_eps);
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->host);
	free(c->repo);
	free(c->user);
	free(c->pass);
	free(c);
}

void reg_parse_challenge(const char *h, char **scheme, char **realm, char **service, char **scope)
{
	const char *p = h;
	size_t n = strcspn(p, " ");

	*scheme = xstrndup(p, n);
	p += n;
	while (*p) {
		const char *key;
		size_t klen;
		struct buf v = BUF_INIT;
		struct err e = ERR_INIT;
		char **dst = NULL;

		while (*p == ' ' || *p == ',')
			p++;
		key = p;
		klen = strcspn(p, "=, ");
		p += klen;
		if (*p != '=')
			continue;
		p++;
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1])
					p++;
				buf_append(&v, p, 1, &e);
			}
			if (*p == '"')
				p++;
		} else {
			size_t vlen = strcspn(p, ",");

			buf_append(&v, p, vlen, &e);
			p += vlen;
		}
		if (klen == 5 && !strncasecmp(key, "realm", 5))
			dst = realm;
		else if (klen == 7 && !strncasecmp(key, "service", 7))
			dst = service;
		else if (klen == 5 && !strncasecmp(key, "scope", 5))
			dst = scope;
		if (dst && !*dst)
			*dst = buf_detach(&v, NULL);
		buf_release(&v);
	}
}

/* The token request for endpoint i: the realm's URL with service and scope, or a form POSTed
 * there when the pull has an identity token for the registry itself (*form then). */
static char *reg_token_url(struct reg_client *c, size_t i, const char *realm, const char *service,
			   const char *scope, char **form)
{
	const struct image_auth *a = c->auth;
	_cleanup_free_ char *esc_service = pct_encode(service ? service : "");
	_cleanup_free_ char *esc_scope = pct_encode(scope);

	*form = NULL;
	if (!c->eps[i].is_mirror && a && a->identity_token && *a->identity_token) {
		_cleanup_free_ char *esc_tok = pct_encode(a->identity_token);

		*form = xasprintf("grant_type=refresh_token&client_id=kiyot&service=%s&scope=%s&"
				  "refresh_token=%s",
				  esc_service, esc_scope, esc_tok);
		return xstrdup(realm);
	}
	return xasprintf("%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
			 esc_service, esc_scope);
}

/* Takes the token out of a token service's 200 answer for endpoint i. */
static int reg_take_token(struct reg_client *c, size_t i, const char *realm, const struct buf *body,
			  struct err *err)
{
	json_t *j = json_loadb(buf_str(body), body->len, 0, NULL);
	json_t *tok = json_object_get(j, "token");

	if (!json_is_string(tok) || !*json_string_value(tok))
		tok = json_object_get(j, "access_token");
	if (!json_is_string(tok) || !*json_string_value(tok)) {
		json_decref(j);
		return err_set(err, EPROTO, "token service %.200s: answer has no token", realm);
	}
	free(c->st[i].token);
	c->st[i].token = xstrdup(json_string_value(tok));
	json_decref(j);
	return 0;
}

/* Gets a bearer token for endpoint i from the challenge's realm, with the pull's credentials
 * when the endpoint is the registry itself. */
static int reg_fetch_token(struct reg_client *c, size_t i, const char *realm, const char *service,
			   const char *scope, struct err *err)
{
	_cleanup_free_ char *form = NULL;
	_cleanup_free_ char *url = NULL;
	struct curl_slist *hdrs = NULL;
	struct httpc_answer ans = { 0 };
	struct httpc_watch watch;
	struct httpc_req req;
	int64_t limit_s;
	CURL *curl;
	int ret = 0;

	if (strncmp(realm, "https://", 8) &&
	    !(strncmp(realm, "http://", 7) == 0 && strncmp(c->eps[i].base_url, "http://", 7) == 0))
		return err_set(err, EPROTO, "token realm \"%.200s\" is not an https URL", realm);
	curl = curl_easy_init();
	if (!curl)
		abort();
	url = reg_token_url(c, i, realm, service, scope, &form);
	reg_watch_init(&watch, reg_deadline(REG_MAX_TOKEN_BODY, &limit_s));
	req = reg_req(c, url, REG_MAX_TOKEN_BODY, &watch);
	if (form) {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/x-www-form-urlencoded");
		req.headers = hdrs;
		req.body = form;
		req.body_len = strlen(form);
	} else if (!c->eps[i].is_mirror && c->user) {
		req.user = c->user;
		req.password = c->pass;
	}
	httpc_prepare(curl, &req, &ans);
	if (httpc_exchange(curl, &ans) != CURLE_OK) {
		if (ans.refused)
			reg_guard_error(&c->guard, true, err);
		else if (watch.stop != HTTPC_GOING)
			reg_watch_error(&watch, limit_s, err);
		else
			err_set(err, httpc_errno(ans.rc), "%s", httpc_reason(&ans));
		ret = err_wrap(err, "token service %.200s", realm);
	} else if (ans.status == 401 || ans.status == 403) {
		ret = err_set(
			err, EACCES,
			"unauthorized: token service %.200s refused the credentials (HTTP %ld); "
			"check the image pull secret",
			realm, ans.status);
	} else if (ans.status != 200) {
		ret = err_set(err, EPROTO, "token service %.200s: HTTP %ld", realm, ans.status);
	} else {
		ret = reg_take_token(c, i, realm, &ans.body, err);
	}
	httpc_answer_release(&ans);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(curl);
	return ret;
}

/* Reacts to a 401: fetches a token (Bearer) or switches to basic credentials (Basic).
 * Returns 1 to retry, or a negative error. */
int reg_answer_challenge(struct reg_client *c, size_t i, const char *challenge, struct err *err)
{
	_cleanup_free_ char *scheme = NULL;
	_cleanup_free_ char *realm = NULL;
	_cleanup_free_ char *service = NULL;
	_cleanup_free_ char *scope = NULL;
	_cleanup_free_ char *def_scope = NULL;
	int ret;

	if (!challenge || !*challenge)
		return err_set(err, EACCES, "unauthorized (401) and no WWW-Authenticate challenge");
	reg_parse_challenge(challenge, &scheme, &realm, &service, &scope);
	if (!strcasecmp(scheme, "bearer")) {
		if (!realm)
			return err_set(err, EPROTO, "Bearer challenge without a realm");
		def_scope = xasprintf("repository:%s:pull", c->repo);
		ret = reg_fetch_token(c, i, realm, service, scope ? scope : def_scope, err);
		return ret < 0 ? ret : 1;
	}
	if (!strcasecmp(scheme, "basic")) {
		if (!c->user || c->eps[i].is_mirror || c->st[i].basic)
			return err_set(err, EACCES,
				       "unauthorized (401): the registry wants a user name and "
				       "password; check the image pull secret");
		c->st[i].basic = true;
		return 1;
	}
	return err_set(err, EACCES, "unauthorized (401): unsupported authentication scheme %.40s",
		       scheme);
}
