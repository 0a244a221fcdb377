/*
 * registry.c: the requests of the registry client (registry.h) and the process's bounds on them.
 * The policy, the download slots and the watch that stops a transfer too slow or too late;
 * GETs of manifests and blobs walked over the host's endpoints, their bodies hashed and bounded
 * into memory or a file, and checked against the digests asked for. How a client authenticates
 * (its credentials, 401 challenges, tokens) is in registry_auth.c.
 */
#include "registry.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cancel.h"
#include "clock.h"
#include "codec.h"
#include "httpc.h"
#include "log.h"
#include "regconf.h"
#include "registry_internal.h"
#include "xalloc.h"

#define REG_ACCEPT                                                                                 \
	"Accept: application/vnd.oci.image.manifest.v1+json, "                                     \
	"application/vnd.oci.image.index.v1+json, "                                                \
	"application/vnd.docker.distribution.manifest.v2+json, "                                   \
	"application/vnd.docker.distribution.manifest.list.v2+json"
#define REG_MAX_ERRBODY (64u << 10)
#define REG_CONNECT_TIMEOUT_MS 10000L
#define REG_USER_AGENT "kiyot-cell-agent/1"
#define REG_MAX_REDIRECTS 5 /* more is a loop */
/* How often a pull waiting for a download slot looks again (it is also woken at once). */
#define REG_SLOT_POLL_MS 200
/* Bounds of the policy's fields. */
#define REG_MAX_TRANSFERS 256
#define REG_MAX_WINDOW_S 3600

/* One transfer: where the 200 answer's body goes (hashed, bounded), the headers kept of it,
 * and what stopped it. */
struct reg_xfer {
	struct buf body; /* memory mode */
	int fd;		 /* file mode when >= 0 */
	EVP_MD_CTX *md;
	uint64_t got;
	uint64_t max;
	bool too_big; /* the body outgrew max */
	char *content_type;
	char *docker_digest;
	int64_t deadline_ns; /* of the whole fetch, every endpoint and retry; 0: none */
	int64_t limit_s;     /* what the deadline allows, for messages */
	struct httpc_watch watch;
	struct httpc_answer answer; /* the status, other answers' bodies, libcurl's reason */
};

/* The process's policy, and the hosts of the layer downloads under way (one entry each). */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reg_slot_cv = PTHREAD_COND_INITIALIZER;
static struct reg_policy reg_pol = { 10240, 30, 60, 32768, 8, 4 };
static char *reg_active[REG_MAX_TRANSFERS];

void reg_policy_default(struct reg_policy *p)
{
	*p = (struct reg_policy){ 10240, 30, 60, 32768, 8, 4 };
}

int reg_policy_check(const struct reg_policy *p, struct err *err)
{
	if (p->window_s < 0 || p->window_s > REG_MAX_WINDOW_S)
		return err_set(err, EINVAL, "window_s: %d is not within 0 to %d seconds",
			       p->window_s, REG_MAX_WINDOW_S);
	if (p->deadline_base_s < 1 || p->deadline_base_s > 86400)
		return err_set(err, EINVAL, "deadline_base_s: %d is not within 1 to 86400 seconds",
			       p->deadline_base_s);
	if (p->deadline_rate < 1)
		return err_set(err, EINVAL, "deadline_rate: must be at least 1 byte per second");
	if (p->max_transfers < 1 || p->max_transfers > REG_MAX_TRANSFERS)
		return err_set(err, EINVAL, "max_transfers: %d is not within 1 to %d",
			       p->max_transfers, REG_MAX_TRANSFERS);
	if (p->max_per_registry < 1 || p->max_per_registry > p->max_transfers)
		return err_set(err, EINVAL,
			       "max_per_registry: %d is not within 1 to max_transfers (%d)",
			       p->max_per_registry, p->max_transfers);
	return 0;
}

void reg_set_policy(const struct reg_policy *p)
{
	pthread_mutex_lock(&reg_mu);
	reg_pol = *p;
	pthread_cond_broadcast(&reg_slot_cv);
	pthread_mutex_unlock(&reg_mu);
}

static struct reg_policy reg_policy_now(void)
{
	struct reg_policy p;

	pthread_mutex_lock(&reg_mu);
	p = reg_pol;
	pthread_mutex_unlock(&reg_mu);
	return p;
}

/* The deadline of a fetch of up to size bytes, from now; *limit_s gets its length. */
int64_t reg_deadline(uint64_t size, int64_t *limit_s)
{
	struct reg_policy p = reg_policy_now();

	*limit_s = p.deadline_base_s + (int64_t)(size / p.deadline_rate);
	return clock_mono_ns() + *limit_s * 1000000000LL;
}

/* Takes a download slot for a blob of host, waiting while the process has max_transfers
 * downloads under way or host has max_per_registry; returns its index. -ECANCELED when the
 * caller goes away meanwhile. */
static int reg_slot_take(const char *host, struct err *err)
{
	pthread_mutex_lock(&reg_mu);
	for (;;) {
		int total = 0, same = 0, free_i = -1;
		struct timespec ts;

		for (int i = 0; i < REG_MAX_TRANSFERS; i++) {
			if (!reg_active[i]) {
				if (free_i < 0)
					free_i = i;
				continue;
			}
			total++;
			same += strcmp(reg_active[i], host) == 0;
		}
		if (free_i >= 0 && total < reg_pol.max_transfers &&
		    same < reg_pol.max_per_registry) {
			reg_active[free_i] = xstrdup(host);
			pthread_mutex_unlock(&reg_mu);
			return free_i;
		}
		if (cancel_requested()) {
			struct reg_policy p = reg_pol;

			pthread_mutex_unlock(&reg_mu);
			return err_set(
				err, ECANCELED,
				"cancelled while waiting for a download slot (%d at once, %d "
				"per registry; %d from %s under way)",
				p.max_transfers, p.max_per_registry, same, host);
		}
		ts = clock_deadline(CLOCK_REALTIME, REG_SLOT_POLL_MS);
		pthread_cond_timedwait(&reg_slot_cv, &reg_mu, &ts);
	}
}

static void reg_slot_give(int i)
{
	pthread_mutex_lock(&reg_mu);
	free(reg_active[i]);
	reg_active[i] = NULL;
	pthread_cond_broadcast(&reg_slot_cv);
	pthread_mutex_unlock(&reg_mu);
}

/* A watch for one exchange that must end by deadline_ns (0: no deadline) and move the
 * policy's minimum over its window. */
void reg_watch_init(struct httpc_watch *w, int64_t deadline_ns)
{
	struct reg_policy p = reg_policy_now();

	memset(w, 0, sizeof(*w));
	w->deadline_ns = deadline_ns;
	w->min_bytes = p.min_bytes;
	w->window_s = p.window_s;
}

/* Why the watch stopped a transfer that had limit_s seconds, in the words of the pulls
 * policy. */
int reg_watch_error(const struct httpc_watch *w, int64_t limit_s, struct err *err)
{
	if (w->stop == HTTPC_CANCELLED)
		return err_set(err, ECANCELED, "cancelled: the caller went away");
	if (w->stop == HTTPC_LATE)
		return err_set(err, ETIMEDOUT,
			       "did not arrive within %lld s (pulls.deadlineBaseSeconds plus its "
			       "size at pulls.deadlineBytesPerSecond); %llu bytes came",
			       (long long)limit_s, (unsigned long long)w->got);
	return err_set(err, ETIMEDOUT,
		       "stalled: %llu bytes in the last %d s, under the %llu required "
		       "(pulls.minBytes over pulls.windowSeconds); the registry is too slow or "
		       "not answering",
		       (unsigned long long)w->window_got, w->window_s,
		       (unsigned long long)w->min_bytes);
}

void reg_manifest_release(struct reg_manifest *m)
{
	free(m->body);
	free(m->media_type);
	free(m->digest);
	memset(m, 0, sizeof(*m));
}

/* The 200 answer's body: hashed, bounded, into memory or the file. */
static int reg_on_body(void *ud, const void *p, size_t n)
{
	struct reg_xfer *x = ud;
	struct err e = ERR_INIT;

	if (x->got + n > x->max) {
		x->too_big = true;
		return -EFBIG;
	}
	x->got += n;
	EVP_DigestUpdate(x->md, p, n);
	if (x->fd < 0) {
		buf_append(&x->body, p, n, &e);
		return 0;
	}
	for (size_t off = 0; off < n;) {
		ssize_t w = write(x->fd, (const char *)p + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (size_t)w;
	}
	return 0;
}

/* Empties the transfer for a new attempt. */
static int reg_xfer_reset(struct reg_xfer *x, struct err *err)
{
	buf_reset(&x->body);
	x->got = 0;
	x->too_big = false;
	if (!EVP_DigestInit_ex(x->md, EVP_sha256(), NULL))
		return err_set(err, EIO, "sha256 unavailable");
	if (x->fd >= 0 && (ftruncate(x->fd, 0) < 0 || lseek(x->fd, 0, SEEK_SET) < 0))
		return err_errno(err, "truncate download");
	return 0;
}

/* A transfer of at most max bytes, which must end within the policy's deadline for max bytes
 * from now, whatever endpoints and retries it takes. */
static void reg_xfer_init(struct reg_xfer *x, int fd, uint64_t max)
{
	memset(x, 0, sizeof(*x));
	x->fd = fd;
	x->max = max;
	x->deadline_ns = reg_deadline(max, &x->limit_s);
	x->md = EVP_MD_CTX_new();
	if (!x->md)
		abort();
}

static void reg_xfer_release(struct reg_xfer *x)
{
	buf_release(&x->body);
	httpc_answer_release(&x->answer);
	EVP_MD_CTX_free(x->md);
	free(x->content_type);
	free(x->docker_digest);
}

/* Keeps the headers of the 200 answer that the fetch checks. */
static void reg_xfer_keep_headers(struct reg_xfer *x, CURL *curl)
{
	const char *ct = httpc_header(curl, "Content-Type");
	const char *dd = httpc_header(curl, "Docker-Content-Digest");

	free(x->content_type);
	free(x->docker_digest);
	x->content_type = ct ? xstrdup(ct) : NULL;
	x->docker_digest = dd ? xstrdup(dd) : NULL;
}

/* "sha256:<hex>" of what the transfer hashed. */
static char *reg_xfer_digest(struct reg_xfer *x)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];

	EVP_DigestFinal_ex(x->md, md, &n);
	hex_encode(md, n, hex);
	return xasprintf("sha256:%s", hex);
}

/* What every registry exchange asks for: redirects bounded, the connect timeout, our
 * User-Agent, watched by w (no overall timeout: the watch's deadline scales with the size),
 * every address vetted by the client's guard. */
struct httpc_req reg_req(struct reg_client *c, const char *url, size_t max_answer,
			 struct httpc_watch *w)
{
	return (struct httpc_req){ .url = url,
				   .max_answer = max_answer,
				   .connect_timeout_ms = REG_CONNECT_TIMEOUT_MS,
				   .max_redirects = REG_MAX_REDIRECTS,
				   .user_agent = REG_USER_AGENT,
				   .watch = w,
				   .guard = &c->guard.hg };
}

/* Whether a failed transfer is worth trying the next endpoint for: a mirror that cannot be
 * reached, redirects in a loop or to where the guard refuses (EPERM) is passed over. */
static bool reg_is_network_errno(int code)
{
	return code == ECONNREFUSED || code == ETIMEDOUT || code == EHOSTUNREACH ||
	       code == ENETUNREACH || code == ELOOP || code == EPERM;
}

/* What stopped a transfer, for the user. A connection the guard refused is said as such,
 * whatever libcurl made of it, and nothing else of the exchange is told. */
static int reg_xfer_error(struct reg_client *c, struct reg_xfer *x, CURLcode rc, struct err *err)
{
	if (x->answer.refused)
		return reg_guard_error(&c->guard, false, err);
	if (x->watch.stop != HTTPC_GOING)
		return reg_watch_error(&x->watch, x->limit_s, err);
	if (x->too_big)
		return err_set(err, EFBIG, "larger than %llu bytes; refusing",
			       (unsigned long long)x->max);
	if (x->answer.sink_err) {
		errno = x->answer.sink_err;
		return err_errno(err, "write download");
	}
	if (rc == CURLE_TOO_MANY_REDIRECTS)
		return err_set(err, ELOOP,
			       "redirect loop: more than %d redirects; the registry must answer "
			       "within fewer",
			       REG_MAX_REDIRECTS);
	return err_set(err, httpc_errno(rc), "unreachable: %s", httpc_reason(&x->answer));
}

/* One GET on endpoint i, answering at most two 401 challenges. On success *code holds the
 * final HTTP status; transport failures return a negative error. */
static int reg_perform(struct reg_client *c, size_t i, const char *url, bool manifest,
		       struct reg_xfer *x, long *code, struct err *err)
{
	const struct reg_endpoint *ep = &c->eps[i];
	const struct image_auth *a = c->auth;
	bool fixed_token = !ep->is_mirror && a && a->registry_token && *a->registry_token;
	const struct httpc_sink sink = { .status = 200, .write = reg_on_body, .ud = x };

	for (int attempt = 0;; attempt++) {
		struct httpc_req req = reg_req(c, url, REG_MAX_ERRBODY, &x->watch);
		struct curl_slist *hdrs = NULL;
		_cleanup_free_ char *authz = NULL;
		CURLcode rc;
		int ret;

		ret = reg_xfer_reset(x, err);
		if (ret < 0)
			return ret;
		reg_watch_init(&x->watch, x->deadline_ns);
		req.sink = &sink;
		if (manifest)
			hdrs = curl_slist_append(hdrs, REG_ACCEPT);
		if (fixed_token)
			authz = xasprintf("Authorization: Bearer %s", a->registry_token);
		else if (c->st[i].token)
			authz = xasprintf("Authorization: Bearer %s", c->st[i].token);
		else if (c->st[i].basic) {
			req.user = c->user;
			req.password = c->pass;
		}
		if (authz)
			hdrs = curl_slist_append(hdrs, authz);
		req.headers = hdrs;
		httpc_answer_release(&x->answer);
		httpc_prepare(c->curl, &req, &x->answer);
		rc = httpc_exchange(c->curl, &x->answer);
		curl_slist_free_all(hdrs);
		if (authz)
			explicit_bzero(authz, strlen(authz));
		if (rc != CURLE_OK)
			return reg_xfer_error(c, x, rc, err);
		*code = x->answer.status;
		if (*code == 200)
			reg_xfer_keep_headers(x, c->curl);
		if (*code != 401 || fixed_token || attempt >= 2)
			return 0;
		ret = reg_answer_challenge(c, i, httpc_header(c->curl, "WWW-Authenticate"), err);
		if (ret < 0)
			return ret;
	}
}

/* What a failed status means to the user, and whether the next endpoint should be tried. */
static int reg_status_error(long code, bool manifest, bool *next, struct err *err)
{
	*next = false;
	if (code == 404) {
		*next = true;
		return err_set(err, ENOENT, "%s unknown (404)", manifest ? "manifest" : "blob");
	}
	if (code == 429 || code >= 500) {
		*next = true;
		return err_set(err, EAGAIN, "HTTP %ld", code);
	}
	if (code == 401)
		return err_set(err, EACCES,
			       "unauthorized (401): check the image pull secret for this registry");
	if (code == 403)
		return err_set(err, EACCES, "access denied (403)");
	return err_set(err, EPROTO, "unexpected HTTP status %ld", code);
}

/* GET <endpoint>/v2/<repo>/<suffix> on each endpoint in turn until one answers 200. */
static int reg_get(struct reg_client *c, const char *what, const char *suffix, bool manifest,
		   struct reg_xfer *x, struct err *err)
{
	struct buf tried = BUF_INIT;
	struct err dummy = ERR_INIT;
	int last = ENOENT;

	buf_init(&tried, 400);
	for (size_t i = 0; i < c->n_eps; i++) {
		const struct reg_endpoint *ep = &c->eps[i];
		_cleanup_free_ char *url =
			xasprintf("%s%s/v2/%s/%s", ep->base_url, ep->prefix, c->repo, suffix);
		struct err e = ERR_INIT;
		long code = 0;
		bool next = false;
		int ret;

		ret = reg_perform(c, i, url, manifest, x, &code, &e);
		if (ret == 0 && code == 200) {
			buf_release(&tried);
			return 0;
		}
		if (ret == 0)
			reg_status_error(code, manifest, &next, &e);
		else
			next = reg_is_network_errno(e.code);
		if (!next || i + 1 == c->n_eps) {
			if (tried.len == 0) {
				err_set(err, e.code, "%s", e.msg);
				buf_release(&tried);
				return err_wrap(err, "%s: %s%s", what, ep->base_url, ep->prefix);
			}
			buf_appendf(&tried, &dummy, "; %s%s: %s", ep->base_url, ep->prefix, e.msg);
			err_set(err, e.code, "%s: %s", what, buf_str(&tried));
			buf_release(&tried);
			return -err->code;
		}
		log_info("registry: %s: %s%s: %s; trying the next endpoint", what, ep->base_url,
			 ep->prefix, e.msg);
		buf_appendf(&tried, &dummy, "%s%s%s: %s", tried.len ? "; " : "", ep->base_url,
			    ep->prefix, e.msg);
		last = e.code;
	}
	buf_release(&tried);
	return err_set(err, last, "%s: no endpoint", what);
}

/* Strips parameters ("; charset=...") from a Content-Type. */
static char *reg_media_type(const char *ct)
{
	if (!ct)
		return xstrdup("");
	return xstrndup(ct, strcspn(ct, "; "));
}

int reg_fetch_manifest(struct reg_client *c, const char *reference, struct reg_manifest *out,
		       struct err *err)
{
	_cleanup_free_ char *suffix = xasprintf("manifests/%s", reference);
	_cleanup_free_ char *what = xasprintf("manifest %s", reference);
	_cleanup_free_ char *digest = NULL;
	struct reg_xfer x;
	int ret;

	reg_xfer_init(&x, -1, REG_MAX_MANIFEST);
	ret = reg_get(c, what, suffix, true, &x, err);
	if (ret < 0)
		goto out;
	digest = reg_xfer_digest(&x);
	if (x.docker_digest && !strncmp(x.docker_digest, "sha256:", 7) &&
	    strcmp(x.docker_digest, digest)) {
		ret = err_set(err, EBADMSG,
			      "manifest %s: the content does not match the registry's own "
			      "Docker-Content-Digest; it was altered on the way or the registry "
			      "is corrupt",
			      reference);
		goto out;
	}
	if (!strncmp(reference, "sha256:", 7) && strcmp(reference, digest)) {
		ret = err_set(err, EBADMSG,
			      "manifest %s: the content does not match the digest asked for; it "
			      "was altered on the way or the registry is corrupt",
			      reference);
		goto out;
	}
	out->len = x.body.len;
	out->body = buf_detach(&x.body, NULL);
	out->media_type = reg_media_type(x.content_type);
	out->digest = steal_ptr(digest);
out:
	reg_xfer_release(&x);
	return ret;
}

/* Checks what a blob transfer hashed against the digest asked for. The error tells nothing of
 * what came but that it is not the blob (no hash, no size of an answer that is unverified). */
static int reg_check_blob(struct reg_xfer *x, const char *digest, int64_t size, struct err *err)
{
	_cleanup_free_ char *got = reg_xfer_digest(x);

	if (size >= 0 && x->got != (uint64_t)size)
		return err_set(err, EBADMSG,
			       "blob %s: the registry sent %s than the manifest's %lld bytes",
			       digest, x->got < (uint64_t)size ? "fewer" : "more", (long long)size);
	if (strcmp(got, digest))
		return err_set(err, EBADMSG,
			       "blob %s: the content does not match its digest; it was altered "
			       "on the way or the registry is corrupt",
			       digest);
	return 0;
}

int reg_fetch_blob_mem(struct reg_client *c, const char *digest, size_t max, char **out,
		       size_t *len, struct err *err)
{
	_cleanup_free_ char *suffix = xasprintf("blobs/%s", digest);
	_cleanup_free_ char *what = xasprintf("blob %s", digest);
	struct reg_xfer x;
	int ret;

	reg_xfer_init(&x, -1, max);
	ret = reg_get(c, what, suffix, false, &x, err);
	if (ret == 0)
		ret = reg_check_blob(&x, digest, -1, err);
	if (ret == 0) {
		*len = x.body.len;
		*out = buf_detach(&x.body, NULL);
	}
	reg_xfer_release(&x);
	return ret;
}

int reg_fetch_blob_file(struct reg_client *c, const char *digest, int64_t size, uint64_t max,
			const char *dest, struct err *err)
{
	static atomic_uint seq;
	_cleanup_free_ char *suffix = xasprintf("blobs/%s", digest);
	_cleanup_free_ char *what = xasprintf("blob %s", digest);
	_cleanup_free_ char *tmp =
		xasprintf("%s.part-%d-%u", dest, (int)getpid(), atomic_fetch_add(&seq, 1));
	struct reg_xfer x;
	int fd, ret, slot;

	if (size >= 0 && (uint64_t)size > max)
		return err_set(err, EFBIG, "blob %s: %lld bytes is over the limit of %llu", digest,
			       (long long)size, (unsigned long long)max);
	slot = reg_slot_take(c->host, err);
	if (slot < 0)
		return err_wrap(err, "blob %s", digest);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		reg_slot_give(slot);
		return err_errno(err, "blob %s: create %s", digest, tmp);
	}
	reg_xfer_init(&x, fd, size >= 0 ? (uint64_t)size : max);
	ret = reg_get(c, what, suffix, false, &x, err);
	if (ret == 0)
		ret = reg_check_blob(&x, digest, size, err);
	close(fd);
	if (ret == 0 && rename(tmp, dest) < 0)
		ret = err_errno(err, "blob %s: rename into %s", digest, dest);
	if (ret < 0)
		unlink(tmp);
	reg_xfer_release(&x);
	reg_slot_give(slot);
	return ret;
}
