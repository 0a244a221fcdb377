/*
 * imageref.c: image reference parsing ("busybox", "host:5000/a/b:tag", "a/b@sha256:...") with
 * Docker's normalisation (docker.io, library/ for one-component names, "latest").
 */
#include "image.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "xalloc.h"

#define REF_MAX_LEN 1024
#define REF_MAX_TAG 128

static bool ref_is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* "sha256:" followed by 64 lowercase hex digits. */
bool image_digest_valid(const char *d)
{
	if (!d || strncmp(d, "sha256:", 7) != 0 || strlen(d) != 7 + 64)
		return false;
	for (const char *p = d + 7; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* One path component of a repository: lowercase alphanumerics joined by '.', '_', "__" or
 * runs of '-'. */
static bool ref_component_valid(const char *s, size_t n)
{
	if (n == 0 || !ref_is_lower_alnum(s[0]) || !ref_is_lower_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (ref_is_lower_alnum(s[i]))
			continue;
		if (s[i] == '.' || s[i] == '-')
			continue;
		if (s[i] == '_')
			continue;
		return false;
	}
	for (size_t i = 1; i < n; i++) {
		/* '.' and '_' may not repeat (except "__"), and may not touch another separator */
		if (s[i] == '.' && !ref_is_lower_alnum(s[i - 1]))
			return false;
		if (s[i - 1] == '.' && !ref_is_lower_alnum(s[i]))
			return false;
		if (i >= 2 && s[i] == '_' && s[i - 1] == '_' && s[i - 2] == '_')
			return false;
	}
	return true;
}

/* A registry host: DNS name or IPv4 or [IPv6], optional :port. */
static bool ref_host_valid(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0)
		return false;
	if (s[0] == '[') {
		while (i < n && s[i] != ']') {
			if (!strchr("[0123456789abcdefABCDEF:.", s[i]))
				return false;
			i++;
		}
		if (i++ == n)
			return false;
	} else {
		for (; i < n && s[i] != ':'; i++) {
			char c = s[i];

			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '.' || c == '-'))
				return false;
		}
		if (i == 0 || s[0] == '-' || s[0] == '.')
			return false;
	}
	if (i == n)
		return true;
	if (s[i] != ':' || i + 1 == n || n - i - 1 > 5)
		return false;
	for (i++; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

static bool ref_tag_valid(const char *t)
{
	size_t n = strlen(t);

	if (n == 0 || n > REF_MAX_TAG || t[0] == '.' || t[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

/* Checks every '/'-separated component of the repository path. */
static int ref_check_repository(const char *in, const char *repo, struct err *err)
{
	const char *p = repo;

	if (strlen(repo) > 255)
		return err_set(err, EINVAL,
			       "image reference \"%.200s\": repository name longer than "
			       "255 characters",
			       in);
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);

		for (size_t i = 0; i < n; i++)
			if (p[i] >= 'A' && p[i] <= 'Z')
				return err_set(
					err, EINVAL,
					"image reference \"%.200s\": repository name must be "
					"lowercase",
					in);
		if (!ref_component_valid(p, n))
			return err_set(err, EINVAL,
				       "image reference \"%.200s\": invalid repository name "
				       "component \"%.*s\"",
				       in, (int)(n > 100 ? 100 : n), p);
		if (!slash)
			return 0;
		p = slash + 1;
	}
}

int image_ref_parse(const char *s, struct image_ref *out, struct err *err)
{
	_cleanup_free_ char *name = NULL;
	_cleanup_free_ char *digest = NULL;
	_cleanup_free_ char *tag = NULL;
	_cleanup_free_ char *host = NULL;
	_cleanup_free_ char *repo = NULL;
	char *at, *slash, *colon;
	const char *path;
	int ret;

	if (!s || !*s)
		return err_set(err, EINVAL, "image reference is empty");
	if (strlen(s) > REF_MAX_LEN)
		return err_set(err, EINVAL, "image reference longer than %d characters",
			       REF_MAX_LEN);
	name = xstrdup(s);
	at = strchr(name, '@');
	if (at) {
		*at = '\0';
		if (!image_digest_valid(at + 1))
			return err_set(
				err, EINVAL,
				"image reference \"%.200s\": digest must be sha256: followed "
				"by 64 lowercase hex digits",
				s);
		digest = xstrdup(at + 1);
	}
	slash = strrchr(name, '/');
	colon = strrchr(slash ? slash : name, ':');
	if (colon) {
		*colon = '\0';
		if (!ref_tag_valid(colon + 1))
			return err_set(
				err, EINVAL,
				"image reference \"%.200s\": invalid tag \"%.128s\" (letters, "
				"digits, '_', '.', '-'; at most 128)",
				s, colon + 1);
		tag = xstrdup(colon + 1);
	}
	slash = strchr(name, '/');
	if (slash && (memchr(name, '.', (size_t)(slash - name)) ||
		      memchr(name, ':', (size_t)(slash - name)) ||
		      (slash - name == 9 && strncmp(name, "localhost", 9) == 0))) {
		if (!ref_host_valid(name, (size_t)(slash - name)))
			return err_set(err, EINVAL,
				       "image reference \"%.200s\": invalid registry host", s);
		host = xstrndup(name, (size_t)(slash - name));
		path = slash + 1;
	} else {
		host = xstrdup("docker.io");
		path = name;
	}
	if (strcmp(host, "index.docker.io") == 0 || strcmp(host, "registry-1.docker.io") == 0) {
		free(host);
		host = xstrdup("docker.io");
	}
	if (strcmp(host, "docker.io") == 0 && !strchr(path, '/'))
		repo = xasprintf("library/%s", path);
	else
		repo = xstrdup(path);
	ret = ref_check_repository(s, repo, err);
	if (ret < 0)
		return ret;
	if (!tag && !digest)
		tag = xstrdup("latest");
	out->host = steal_ptr(host);
	out->repository = steal_ptr(repo);
	out->tag = steal_ptr(tag);
	out->digest = steal_ptr(digest);
	return 0;
}

void image_ref_release(struct image_ref *r)
{
	if (!r)
		return;
	free(r->host);
	free(r->repository);
	free(r->tag);
	free(r->digest);
	memset(r, 0, sizeof(*r));
}

char *image_ref_string(const struct image_ref *r)
{
	return xasprintf("%s/%s%s%s%s%s", r->host, r->repository, r->tag ? ":" : "",
			 r->tag ? r->tag : "", r->digest ? "@" : "", r->digest ? r->digest : "");
}
