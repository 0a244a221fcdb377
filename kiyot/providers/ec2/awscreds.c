#include "awscreds.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "buf.h"
#include "clock.h"
#include "fsutil.h"
#include "httpc.h"
#include "xalloc.h"

#define IMDS_DEFAULT "http://169.254.169.254"
#define IMDS_TOKEN_TTL "21600"
#define INI_MAX_LINE 4096

void aws_creds_release(struct aws_creds *c)
{
	free(c->access_key_id);
	if (c->secret_access_key) {
		explicit_bzero(c->secret_access_key, strlen(c->secret_access_key));
		free(c->secret_access_key);
	}
	free(c->session_token);
	c->access_key_id = c->secret_access_key = c->session_token = NULL;
	c->expires_ns = 0;
}

void aws_creds_copy(struct aws_creds *dst, const struct aws_creds *src)
{
	dst->access_key_id = src->access_key_id ? xstrdup(src->access_key_id) : NULL;
	dst->secret_access_key = src->secret_access_key ? xstrdup(src->secret_access_key) : NULL;
	dst->session_token = src->session_token ? xstrdup(src->session_token) : NULL;
	dst->expires_ns = src->expires_ns;
	dst->source = src->source;
}

/* An environment variable, or NULL when unset or empty. */
static const char *env_nonempty(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

int aws_creds_from_env(struct aws_creds *out, struct err *err)
{
	const char *id = env_nonempty("AWS_ACCESS_KEY_ID");
	const char *secret = env_nonempty("AWS_SECRET_ACCESS_KEY");
	const char *token = env_nonempty("AWS_SESSION_TOKEN");

	if (!id || !secret)
		return err_set(err, ENOENT,
			       "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set");
	out->access_key_id = xstrdup(id);
	out->secret_access_key = xstrdup(secret);
	out->session_token = token ? xstrdup(token) : NULL;
	out->expires_ns = 0;
	out->source = "env";
	return 0;
}

/* A path under $HOME, or NULL without HOME. */
static char *home_path(const char *rel)
{
	const char *home = env_nonempty("HOME");

	return home ? xasprintf("%s/%s", home, rel) : NULL;
}

/* Strips leading and trailing blanks in place; returns the start. */
static char *trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

/*
 * The value of key in [section] of INI text, or NULL. Keys compare case-insensitively;
 * indented lines (sub-sections such as "s3 =" blocks) and comments are skipped. The text is
 * bounded by the caller (AWS_CREDS_MAX_FILE) and lines by INI_MAX_LINE.
 */
static char *ini_lookup(const char *text, const char *section, const char *key)
{
	const char *p = text;
	bool in_section = false;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char line[INI_MAX_LINE];
		char *l, *eq;

		if (n < sizeof(line) && !(*p == ' ' || *p == '\t')) {
			memcpy(line, p, n);
			line[n] = '\0';
			l = trim(line);
			if (*l == '[') {
				char *close = strchr(l, ']');

				if (close) {
					*close = '\0';
					in_section = strcmp(trim(l + 1), section) == 0;
				} else {
					in_section = false;
				}
			} else if (in_section && *l != '#' && *l != ';' && (eq = strchr(l, '='))) {
				*eq = '\0';
				if (strcasecmp(trim(l), key) == 0) {
					char *v = trim(eq + 1);

					return *v ? xstrdup(v) : NULL;
				}
			}
		}
		p = nl ? nl + 1 : p + n;
	}
	return NULL;
}

/*
 * Reads one shared file (bounded). *text is NULL when the file is missing and missing_ok;
 * otherwise a missing file is ENOENT naming it.
 */
static int read_shared_file(const char *path, bool missing_ok, char **text, struct err *err)
{
	size_t len;

	*text = NULL;
	if (!path)
		return 0;
	if (fs_read_file(path, AWS_CREDS_MAX_FILE, text, &len, err) < 0) {
		if (err->code == ENOENT && missing_ok) {
			err_clear(err);
			return 0;
		}
		if (err->code == ENOENT)
			err->code = EINVAL; /* a file named explicitly must exist */
		return err_wrap(err, "AWS shared file %s", path);
	}
	return 0;
}

/* Looks for a key pair in one section of one file's text; 1 when found, 0 when absent. */
static int creds_from_section(const char *text, const char *section, const char *path,
			      struct aws_creds *out, struct err *err)
{
	_cleanup_free_ char *id = NULL;
	_cleanup_free_ char *secret = NULL;

	if (!text)
		return 0;
	id = ini_lookup(text, section, "aws_access_key_id");
	secret = ini_lookup(text, section, "aws_secret_access_key");
	if (!id && !secret)
		return 0;
	if (!id || !secret)
		return err_set(err, EINVAL,
			       "AWS shared file %s: [%s] has only one of aws_access_key_id and "
			       "aws_secret_access_key; set both",
			       path, section);
	out->access_key_id = steal_ptr(id);
	out->secret_access_key = steal_ptr(secret);
	out->session_token = ini_lookup(text, section, "aws_session_token");
	out->expires_ns = 0;
	out->source = "shared-file";
	return 1;
}

/* The section of the config file that holds a profile: "default" or "profile <name>". */
static char *config_section(const char *profile)
{
	return strcmp(profile, "default") == 0 ? xstrdup("default")
					       : xasprintf("profile %s", profile);
}

int aws_creds_from_shared_files(const char *credentials_path, const char *config_path,
				const char *profile, struct aws_creds *out, struct err *err)
{
	_cleanup_free_ char *def_creds = NULL;
	_cleanup_free_ char *def_config = NULL;
	_cleanup_free_ char *creds_text = NULL;
	_cleanup_free_ char *config_text = NULL;
	_cleanup_free_ char *section = NULL;
	const char *cpath = credentials_path, *fpath = config_path;
	int ret;

	if (!profile || !*profile)
		profile = "default";
	if (!cpath)
		cpath = env_nonempty("AWS_SHARED_CREDENTIALS_FILE");
	if (!cpath)
		cpath = def_creds = home_path(".aws/credentials");
	if (!fpath)
		fpath = env_nonempty("AWS_CONFIG_FILE");
	if (!fpath)
		fpath = def_config = home_path(".aws/config");
	if (read_shared_file(cpath, !credentials_path, &creds_text, err) < 0 ||
	    read_shared_file(fpath, !config_path, &config_text, err) < 0)
		return -err->code;
	ret = creds_from_section(creds_text, profile, cpath, out, err);
	if (ret != 0)
		return ret < 0 ? ret : 0;
	section = config_section(profile);
	ret = creds_from_section(config_text, section, fpath, out, err);
	if (ret != 0)
		return ret < 0 ? ret : 0;
	return err_set(err, ENOENT, "AWS profile \"%s\" has no aws_access_key_id in %s or %s",
		       profile, cpath ? cpath : "(no HOME)", fpath ? fpath : "(no HOME)");
}

int aws_region_resolve(const char *configured, const char *config_path, const char *profile,
		       char **out, struct err *err)
{
	_cleanup_free_ char *def_config = NULL;
	_cleanup_free_ char *text = NULL;
	_cleanup_free_ char *section = NULL;
	const char *v = configured && *configured ? configured : NULL;
	char *region;

	if (!v)
		v = env_nonempty("AWS_REGION");
	if (!v)
		v = env_nonempty("AWS_DEFAULT_REGION");
	if (v) {
		*out = xstrdup(v);
		return 0;
	}
	if (!profile || !*profile)
		profile = env_nonempty("AWS_PROFILE");
	if (!profile)
		profile = "default";
	if (!config_path)
		config_path = env_nonempty("AWS_CONFIG_FILE");
	if (!config_path)
		config_path = def_config = home_path(".aws/config");
	if (read_shared_file(config_path, true, &text, err) < 0)
		return -err->code;
	section = config_section(profile);
	region = text ? ini_lookup(text, section, "region") : NULL;
	if (!region)
		return err_set(err, ENOENT,
			       "no AWS region: set the region in the kiyot config, AWS_REGION, or "
			       "region in [%s] of %s",
			       section, config_path ? config_path : "~/.aws/config");
	*out = region;
	return 0;
}

/*
 * One request to the metadata service: method "PUT" or "GET", an optional extra header.
 * Fills body (bounded) and *status. Network failures are EAGAIN.
 */
static int imds_request(const char *url, const char *method, const char *header, struct buf *body,
			long *status, struct err *err)
{
	_cleanup_free_ char *what = xasprintf("instance metadata %s %s", method, url);
	struct curl_slist *hdrs = NULL;
	struct httpc_answer a = { 0 };
	struct httpc_req req = { .method = method,
				 .url = url,
				 .body = strcmp(method, "PUT") == 0 ? "" : NULL,
				 .max_answer = AWS_CREDS_MAX_IMDS,
				 .connect_timeout_ms = 1000,
				 .timeout_ms = 3000 };
	CURL *h = curl_easy_init();
	int ret;

	if (!h)
		return err_set(err, ENOMEM, "curl_easy_init failed");
	if (header)
		hdrs = curl_slist_append(hdrs, header);
	req.headers = hdrs;
	httpc_prepare(h, &req, &a);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	ret = httpc_perform(h, &a, what, err);
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	if (ret < 0) {
		httpc_answer_release(&a);
		err->code = EAGAIN; /* the service may answer next time */
		return -EAGAIN;
	}
	*status = a.status;
	*body = a.body;
	return 0;
}

/* Parses "2024-01-01T12:00:00Z" (fraction allowed) into ns since the epoch; -1 if malformed. */
static int64_t parse_iso8601(const char *s)
{
	struct tm tm = { 0 };
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);

	if (!rest)
		return -1;
	if (*rest == '.')
		while (isdigit((unsigned char)*++rest))
			;
	if (*rest != 'Z' && strcmp(rest, "+00:00") != 0)
		return -1;
	return (int64_t)timegm(&tm) * 1000000000;
}

/* A string member of a JSON object, or NULL. */
static const char *json_str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* Fills *out from the role document the metadata service returns. */
static int imds_parse_role(const char *text, size_t len, struct aws_creds *out, struct err *err)
{
	json_error_t jerr;
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	const char *code, *id, *secret, *token, *exp;
	int ret = 0;

	if (!doc)
		return err_set(err, EPROTO, "instance metadata: role credentials are not JSON: %s",
			       jerr.text);
	code = json_str(doc, "Code");
	id = json_str(doc, "AccessKeyId");
	secret = json_str(doc, "SecretAccessKey");
	token = json_str(doc, "Token");
	exp = json_str(doc, "Expiration");
	if (code && strcmp(code, "Success") != 0) {
		ret = err_set(err, EACCES, "instance metadata: role credentials: Code %s", code);
	} else if (!id || !secret || !*id || !*secret) {
		ret = err_set(err, EPROTO, "instance metadata: role credentials lack a key pair");
	} else {
		out->access_key_id = xstrdup(id);
		out->secret_access_key = xstrdup(secret);
		out->session_token = token && *token ? xstrdup(token) : NULL;
		out->expires_ns = exp ? parse_iso8601(exp) : 0;
		if (out->expires_ns < 0)
			out->expires_ns = 0;
		out->source = "imds";
	}
	json_decref(doc);
	return ret;
}

/* Asks for an IMDSv2 session token; fills *token (the caller frees it). */
static int imds_token(const char *base, char **token, struct err *err)
{
	_cleanup_free_ char *url = xasprintf("%s/latest/api/token", base);
	struct buf body;
	long status = 0;

	if (imds_request(url, "PUT", "X-aws-ec2-metadata-token-ttl-seconds: " IMDS_TOKEN_TTL, &body,
			 &status, err) < 0)
		return -err->code;
	if (status != 200 || body.len == 0) {
		buf_release(&body);
		return err_set(err, status == 403 ? EACCES : EAGAIN,
			       "instance metadata: token request answered HTTP %ld", status);
	}
	*token = buf_detach(&body, NULL);
	return 0;
}

/* Removes trailing slashes so paths can be appended. */
static char *base_url(const char *endpoint)
{
	char *b = xstrdup(endpoint);
	size_t n = strlen(b);

	while (n > 0 && b[n - 1] == '/')
		b[--n] = '\0';
	return b;
}

int aws_creds_from_imds(const char *endpoint, struct aws_creds *out, struct err *err)
{
	_cleanup_free_ char *base = NULL;
	_cleanup_free_ char *token = NULL;
	_cleanup_free_ char *hdr = NULL;
	_cleanup_free_ char *url = NULL;
	_cleanup_free_ char *role = NULL;
	struct buf body;
	long status = 0;
	char *nl;
	int ret;

	if (!endpoint)
		endpoint = env_nonempty("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	base = base_url(endpoint ? endpoint : IMDS_DEFAULT);
	if (imds_token(base, &token, err) < 0)
		return -err->code;
	hdr = xasprintf("X-aws-ec2-metadata-token: %s", trim(token));
	url = xasprintf("%s/latest/meta-data/iam/security-credentials/", base);
	if (imds_request(url, "GET", hdr, &body, &status, err) < 0)
		return -err->code;
	role = buf_detach(&body, NULL);
	if (status == 404 || (status == 200 && !*trim(role)))
		return err_set(err, ENOENT,
			       "instance metadata: no IAM role is attached to this "
			       "instance; attach an instance profile or set AWS keys");
	if (status != 200)
		return err_set(err, status == 401 || status == 403 ? EACCES : EAGAIN,
			       "instance metadata: role list answered HTTP %ld", status);
	nl = strchr(role, '\n');
	if (nl)
		*nl = '\0';
	free(url);
	url = xasprintf("%s/latest/meta-data/iam/security-credentials/%s", base, trim(role));
	if (imds_request(url, "GET", hdr, &body, &status, err) < 0)
		return -err->code;
	if (status != 200) {
		buf_release(&body);
		return err_set(err, status == 401 || status == 403 ? EACCES : EAGAIN,
			       "instance metadata: role %s answered HTTP %ld", trim(role), status);
	}
	ret = imds_parse_role(buf_str(&body), body.len, out, err);
	buf_release(&body);
	return ret;
}

struct aws_creds_provider {
	pthread_mutex_t lock;
	bool is_static;
	bool have;
	struct aws_creds cur;
	char *profile;
	bool profile_explicit;
	char *credentials_file;
	char *config_file;
	char *imds_endpoint;
	bool no_imds;
};

/* Copies an optional string. */
static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

int aws_creds_provider_new(const struct aws_creds_config *cfg, struct aws_creds_provider **out,
			   struct err *err)
{
	struct aws_creds_provider *p = xcalloc(1, sizeof(*p));
	const char *profile = cfg->profile && *cfg->profile ? cfg->profile : NULL;

	(void)err;
	if (!profile)
		profile = env_nonempty("AWS_PROFILE");
	pthread_mutex_init(&p->lock, NULL);
	p->profile = xstrdup(profile ? profile : "default");
	p->profile_explicit = profile != NULL;
	p->credentials_file = dup_or_null(cfg->credentials_file);
	p->config_file = dup_or_null(cfg->config_file);
	p->imds_endpoint = dup_or_null(cfg->imds_endpoint);
	p->no_imds = cfg->no_imds;
	*out = p;
	return 0;
}

struct aws_creds_provider *aws_creds_provider_new_static(const struct aws_creds *c)
{
	struct aws_creds_provider *p = xcalloc(1, sizeof(*p));

	pthread_mutex_init(&p->lock, NULL);
	p->is_static = true;
	p->have = true;
	aws_creds_copy(&p->cur, c);
	p->cur.source = "static";
	return p;
}

/* Walks the chain once; fills *out. */
static int provider_resolve(struct aws_creds_provider *p, struct aws_creds *out, struct err *err)
{
	int ret = aws_creds_from_env(out, err);

	if (ret != -ENOENT)
		return ret;
	err_clear(err);
	ret = aws_creds_from_shared_files(p->credentials_file, p->config_file, p->profile, out,
					  err);
	if (ret != -ENOENT || p->profile_explicit)
		return ret;
	if (p->no_imds)
		return err_set(
			err, ENOENT,
			"no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
			"or write ~/.aws/credentials");
	err_clear(err);
	ret = aws_creds_from_imds(p->imds_endpoint, out, err);
	if (ret < 0)
		return err_wrap(err, "no AWS credentials in the environment or shared files, and "
				     "none from the instance role");
	return 0;
}

/* True when cached credentials must be fetched again. */
static bool provider_stale(const struct aws_creds_provider *p, int64_t now)
{
	if (!p->have)
		return true;
	return p->cur.expires_ns && now + AWS_CREDS_REFRESH_NS >= p->cur.expires_ns;
}

int aws_creds_provider_get(struct aws_creds_provider *p, struct aws_creds *out, struct err *err)
{
	int64_t now = clock_now_ns();
	int ret = 0;

	pthread_mutex_lock(&p->lock);
	if (!p->is_static && provider_stale(p, now)) {
		struct aws_creds fresh = { 0 };

		ret = provider_resolve(p, &fresh, err);
		if (ret == 0) {
			aws_creds_release(&p->cur);
			p->cur = fresh;
			p->have = true;
		} else if (p->have && p->cur.expires_ns > now) {
			ret = 0; /* keep what still works; try again at the next call */
			err_clear(err);
		}
	}
	if (ret == 0)
		aws_creds_copy(out, &p->cur);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

void aws_creds_provider_invalidate(struct aws_creds_provider *p)
{
	pthread_mutex_lock(&p->lock);
	if (!p->is_static) {
		aws_creds_release(&p->cur);
		p->have = false;
	}
	pthread_mutex_unlock(&p->lock);
}

void aws_creds_provider_free(struct aws_creds_provider *p)
{
	if (!p)
		return;
	aws_creds_release(&p->cur);
	free(p->profile);
	free(p->credentials_file);
	free(p->config_file);
	free(p->imds_endpoint);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
