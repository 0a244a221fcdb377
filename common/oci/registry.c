#include "registry.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdarg.h>
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
#include "log.h"
#include "regconf.h"
#include "xalloc.h"

#define REG_ACCEPT                                                                                 \
	"Accept: application/vnd.oci.image.manifest.v1+json, "                                     \
	"application/vnd.oci.image.index.v1+json, "                                                \
	"application/vnd.docker.distribution.manifest.v2+json, "                                   \
	"application/vnd.docker.distribution.manifest.list.v2+json"
#define REG_MAX_ERRBODY (64u << 10)
#define REG_MAX_TOKEN_BODY (1u << 20)
#define REG_CONNECT_TIMEOUT 10L
#define REG_USER_AGENT "kiyot-cell-agent/1"
#define REG_MAX_REDIRECTS 5 /* more is a loop */
/* The progress window is checked at this many steps of it. */
#define REG_PROGRESS_STEPS 10
/* How often a transfer asks whether its caller went away. */
#define REG_CANCEL_POLL_NS (100 * 1000000LL)
/* How often a pull waiting for a download slot looks again (it is also woken at once). */
#define REG_SLOT_POLL_MS 200
/* Bounds of the policy's fields. */
#define REG_MAX_TRANSFERS 256
#define REG_MAX_WINDOW_S 3600

/* Watches one transfer from curl's progress callback: too little progress over the window, a
 * deadline passed, or a caller that went away stop it, and say why. */
struct reg_watch {
	int64_t deadline_ns; /* 0: none */
	int64_t next_cancel_ns;
	int64_t step_ns; /* window / REG_PROGRESS_STEPS; 0: no progress check */
	int64_t next_mark_ns;
	uint64_t marks[REG_PROGRESS_STEPS]; /* bytes received at the last marks, a ring */
	size_t n_marks;
	int64_t limit_s; /* the deadline, for the message */
	int code;	 /* why the transfer was stopped; 0: it was not */
	char msg[200];
};

/* What an endpoint has taught us about authenticating to it. */
struct reg_ep_state {
	char *token; /* bearer token from its realm */
	bool basic;  /* it asked for Basic credentials */
};

struct reg_client {
	char *host;
	char *repo;
	const struct image_auth *auth;
	struct reg_endpoint *eps;
	size_t n_eps;
	struct reg_ep_state *st;
	CURL *curl;
	char *user; /* basic credentials, from username/password or auth */
	char *pass;
};

/* One transfer's sink and the response headers we care about. */
struct reg_xfer {
	CURL *curl;
	struct buf body;    /* memory mode */
	struct buf errbody; /* bodies of non-200 answers, truncated */
	int fd;		    /* file mode when >= 0 */
	EVP_MD_CTX *md;
	uint64_t got;
	uint64_t max;
	bool too_big;
	int io_errno;
	char *content_type;
	char *docker_digest;
	char *www_auth;
	int64_t deadline_ns; /* of the whole fetch, every endpoint and retry; 0: none */
	int64_t limit_s;     /* what the deadline allows, for messages */
	struct reg_watch watch;
};

static pthread_once_t reg_curl_once = PTHREAD_ONCE_INIT;

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
static int64_t reg_deadline(uint64_t size, int64_t *limit_s)
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
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += REG_SLOT_POLL_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
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

/* Arms a watch for one curl transfer that must end by deadline_ns (0: no deadline). */
static void reg_watch_start(struct reg_watch *w, int64_t deadline_ns, int64_t limit_s)
{
	struct reg_policy p = reg_policy_now();
	int64_t now = clock_mono_ns();

	memset(w, 0, sizeof(*w));
	w->deadline_ns = deadline_ns;
	w->limit_s = limit_s;
	w->next_cancel_ns = now;
	if (p.window_s > 0) {
		w->step_ns = (int64_t)p.window_s * 1000000000LL / REG_PROGRESS_STEPS;
		w->next_mark_ns = now + w->step_ns;
		w->n_marks = 1; /* nothing received at the start */
	}
}

/* Stops the transfer with code and a message; returns curl's "abort". */
static int reg_watch_stop(struct reg_watch *w, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int reg_watch_stop(struct reg_watch *w, int code, const char *fmt, ...)
{
	va_list ap;

	w->code = code;
	va_start(ap, fmt);
	vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
	va_end(ap);
	return 1;
}

/* curl's progress callback (at least once a second, even when nothing arrives). */
static int reg_on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
			   curl_off_t ulnow)
{
	struct reg_watch *w = ud;
	int64_t now = clock_mono_ns();
	uint64_t got = dlnow > 0 ? (uint64_t)dlnow : 0;

	(void)dltotal;
	(void)ultotal;
	(void)ulnow;
	if (now >= w->next_cancel_ns) {
		w->next_cancel_ns = now + REG_CANCEL_POLL_NS;
		if (cancel_requested())
			return reg_watch_stop(w, ECANCELED, "cancelled: the caller went away");
	}
	if (w->deadline_ns && now > w->deadline_ns)
		return reg_watch_stop(
			w, ETIMEDOUT,
			"did not arrive within %lld s (pulls.deadlineBaseSeconds plus "
			"its size at pulls.deadlineBytesPerSecond); %llu bytes came",
			(long long)w->limit_s, (unsigned long long)got);
	if (w->step_ns && now >= w->next_mark_ns) {
		struct reg_policy p = reg_policy_now();
		uint64_t *oldest = &w->marks[w->n_marks % REG_PROGRESS_STEPS];

		/* the mark REG_PROGRESS_STEPS steps back was taken one window ago */
		if (w->n_marks >= REG_PROGRESS_STEPS && got - *oldest < p.min_bytes)
			return reg_watch_stop(
				w, ETIMEDOUT,
				"stalled: %llu bytes in the last %d s, under the %llu required "
				"(pulls.minBytes over pulls.windowSeconds); the registry is too "
				"slow "
				"or not answering",
				(unsigned long long)(got - *oldest), p.window_s,
				(unsigned long long)p.min_bytes);
		*oldest = got;
		w->n_marks++;
		w->next_mark_ns += w->step_ns;
		if (w->next_mark_ns <= now)
			w->next_mark_ns = now + w->step_ns;
	}
	return 0;
}

/* Lets w watch the transfer curl is set up for (after reg_curl_setup, which resets it). */
static void reg_watch_attach(CURL *curl, struct reg_watch *w)
{
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, reg_on_progress);
	curl_easy_setopt(curl, CURLOPT_XFERINFODATA, w);
}

static void reg_curl_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Decodes base64 "user:pass" (CRI's auth field). */
static int reg_decode_auth(const char *b64, char **user, char **pass)
{
	size_t n = strlen(b64);
	_cleanup_free_ unsigned char *out = NULL;
	char *colon;
	int len;

	if (n == 0 || n > 8192 || n % 4)
		return -EINVAL;
	out = xmalloc(n / 4 * 3 + 1);
	len = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)n);
	if (len < 0)
		return -EINVAL;
	if (n >= 1 && b64[n - 1] == '=')
		len--;
	if (n >= 2 && b64[n - 2] == '=')
		len--;
	out[len] = '\0';
	colon = strchr((char *)out, ':');
	if (!colon)
		return -EINVAL;
	*user = xstrndup((char *)out, (size_t)(colon - (char *)out));
	*pass = xstrdup(colon + 1);
	return 0;
}

int reg_client_new(const struct regconf *rc, const char *host, const char *repository,
		   const struct image_auth *auth, struct reg_client **out, struct err *err)
{
	struct reg_client *c = xcalloc(1, sizeof(*c));
	int ret;

	pthread_once(&reg_curl_once, reg_curl_init);
	ret = regconf_endpoints(rc, host, &c->eps, &c->n_eps, err);
	if (ret < 0) {
		free(c);
		return ret;
	}
	c->host = xstrdup(host);
	c->repo = xstrdup(repository);
	c->auth = auth;
	c->st = xcalloc(c->n_eps, sizeof(*c->st));
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

void reg_client_free(struct reg_client *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_eps; i++)
		free(c->st[i].token);
	free(c->st);
	reg_endpoints_free(c->eps, c->n_eps);
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->host);
	free(c->repo);
	free(c->user);
	free(c->pass);
	free(c);
}

void reg_manifest_release(struct reg_manifest *m)
{
	free(m->body);
	free(m->media_type);
	free(m->digest);
	memset(m, 0, sizeof(*m));
}

/* Receives body bytes: the 200 answer into the sink (hashed, bounded), others aside. */
static size_t reg_on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct reg_xfer *x = ud;
	size_t n = size * nmemb;
	long code = 0;
	struct err e = ERR_INIT;

	curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		if (x->errbody.len + n <= REG_MAX_ERRBODY)
			buf_append(&x->errbody, p, n, &e);
		return n;
	}
	if (x->got + n > x->max) {
		x->too_big = true;
		return 0;
	}
	x->got += n;
	EVP_DigestUpdate(x->md, p, n);
	if (x->fd < 0) {
		buf_append(&x->body, p, n, &e);
		return n;
	}
	for (size_t off = 0; off < n;) {
		ssize_t w = write(x->fd, p + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			x->io_errno = w < 0 ? errno : EIO;
			return 0;
		}
		off += (size_t)w;
	}
	return n;
}

/* Keeps a copy of a header value, trimmed. */
static char *reg_header_value(const char *line, size_t n, size_t name_len)
{
	const char *v = line + name_len;
	const char *end = line + n;

	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	return xstrndup(v, (size_t)(end - v));
}

/* Captures Content-Type, Docker-Content-Digest and WWW-Authenticate of the last response. */
static size_t reg_on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct reg_xfer *x = ud;
	size_t n = size * nmemb;

	if (n >= 5 && !strncmp(p, "HTTP/", 5)) {
		free(x->content_type);
		free(x->docker_digest);
		free(x->www_auth);
		x->content_type = x->docker_digest = x->www_auth = NULL;
	} else if (n > 13 && !strncasecmp(p, "content-type:", 13) && !x->content_type) {
		x->content_type = reg_header_value(p, n, 13);
	} else if (n > 22 && !strncasecmp(p, "docker-content-digest:", 22) && !x->docker_digest) {
		x->docker_digest = reg_header_value(p, n, 22);
	} else if (n > 17 && !strncasecmp(p, "www-authenticate:", 17) && !x->www_auth) {
		x->www_auth = reg_header_value(p, n, 17);
	}
	return n;
}

/* Empties the transfer for a new attempt. */
static int reg_xfer_reset(struct reg_xfer *x, struct err *err)
{
	buf_reset(&x->body);
	buf_reset(&x->errbody);
	x->got = 0;
	x->too_big = false;
	x->io_errno = 0;
	if (!EVP_DigestInit_ex(x->md, EVP_sha256(), NULL))
		return err_set(err, EIO, "sha256 unavailable");
	if (x->fd >= 0 && (ftruncate(x->fd, 0) < 0 || lseek(x->fd, 0, SEEK_SET) < 0))
		return err_errno(err, "truncate download");
	return 0;
}

/* A transfer of at most max bytes, which must end within the policy's deadline for max bytes
 * from now, whatever endpoints and retries it takes. */
static void reg_xfer_init(struct reg_xfer *x, CURL *curl, int fd, uint64_t max)
{
	memset(x, 0, sizeof(*x));
	x->curl = curl;
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
	buf_release(&x->errbody);
	EVP_MD_CTX_free(x->md);
	free(x->content_type);
	free(x->docker_digest);
	free(x->www_auth);
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

/* Parses `Bearer realm="...",service="...",scope="..."` (or Basic ...). Values are bounded by
 * the header, which curl bounds. */
static void reg_parse_challenge(const char *h, char **scheme, char **realm, char **service,
				char **scope)
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

/* Common options of every request: protocols, redirects, timeouts, sinks. */
static void reg_curl_setup(CURL *curl, const char *url, char *errbuf)
{
	curl_easy_reset(curl);
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(curl, CURLOPT_MAXREDIRS, (long)REG_MAX_REDIRECTS);
	curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, REG_CONNECT_TIMEOUT);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, REG_USER_AGENT);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	errbuf[0] = '\0';
}

/* The errno that stands for a failed transfer: a transport failure, or a redirect loop (ELOOP,
 * which is the registry's doing, not the network's). */
static int reg_curl_errno(CURLcode rc)
{
	switch (rc) {
	case CURLE_TOO_MANY_REDIRECTS:
		return ELOOP;
	case CURLE_COULDNT_CONNECT:
		return ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return ETIMEDOUT;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return EHOSTUNREACH;
	default:
		return ENETUNREACH;
	}
}

/* Whether a failed transfer is worth trying the next endpoint for: a mirror that cannot be
 * reached or redirects in a loop is passed over. */
static bool reg_is_network_errno(int code)
{
	return code == ECONNREFUSED || code == ETIMEDOUT || code == EHOSTUNREACH ||
	       code == ENETUNREACH || code == ELOOP;
}

/* Token answers go to a bounded buffer; past the bound the transfer is aborted. */
static size_t reg_on_token_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct err e = ERR_INIT;

	return buf_append(ud, p, size * nmemb, &e) < 0 ? 0 : size * nmemb;
}

/* Gets a bearer token for endpoint i from the challenge's realm, with the pull's credentials
 * when the endpoint is the registry itself. */
static int reg_fetch_token(struct reg_client *c, size_t i, const char *realm, const char *service,
			   const char *scope, struct err *err)
{
	const struct reg_endpoint *ep = &c->eps[i];
	const struct image_auth *a = c->auth;
	_cleanup_free_ char *url = NULL;
	_cleanup_free_ char *form = NULL;
	char errbuf[CURL_ERROR_SIZE];
	struct buf body = BUF_INIT;
	struct curl_slist *hdrs = NULL;
	bool secret = !ep->is_mirror;
	CURL *curl = curl_easy_init();
	struct reg_watch watch;
	int64_t deadline, limit_s;
	char *esc_service, *esc_scope;
	json_t *j = NULL, *tok;
	long code = 0;
	CURLcode rc;
	int ret = 0;

	if (!curl)
		abort();
	if (strncmp(realm, "https://", 8) &&
	    !(strncmp(realm, "http://", 7) == 0 && strncmp(ep->base_url, "http://", 7) == 0)) {
		curl_easy_cleanup(curl);
		return err_set(err, EPROTO, "token realm \"%.200s\" is not an https URL", realm);
	}
	esc_service = curl_easy_escape(curl, service ? service : "", 0);
	esc_scope = curl_easy_escape(curl, scope, 0);
	buf_init(&body, REG_MAX_TOKEN_BODY);
	if (secret && a && a->identity_token && *a->identity_token) {
		char *esc_tok = curl_easy_escape(curl, a->identity_token, 0);

		url = xstrdup(realm);
		form = xasprintf("grant_type=refresh_token&client_id=kiyot&service=%s&scope=%s&"
				 "refresh_token=%s",
				 esc_service, esc_scope, esc_tok);
		curl_free(esc_tok);
	} else {
		url = xasprintf("%s%sservice=%s&scope=%s", realm, strchr(realm, '?') ? "&" : "?",
				esc_service, esc_scope);
	}
	curl_free(esc_service);
	curl_free(esc_scope);
	reg_curl_setup(curl, url, errbuf);
	deadline = reg_deadline(REG_MAX_TOKEN_BODY, &limit_s);
	reg_watch_start(&watch, deadline, limit_s);
	reg_watch_attach(curl, &watch);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, reg_on_token_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
	if (form) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, form);
		hdrs = curl_slist_append(hdrs, "Content-Type: application/x-www-form-urlencoded");
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	} else if (secret && c->user) {
		curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
		curl_easy_setopt(curl, CURLOPT_USERNAME, c->user);
		curl_easy_setopt(curl, CURLOPT_PASSWORD, c->pass);
	}
	rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
	if (rc != CURLE_OK) {
		ret = watch.code ? err_set(err, watch.code, "token service %.200s: %s", realm,
					   watch.msg)
				 : err_set(err, reg_curl_errno(rc), "token service %.200s: %s",
					   realm, errbuf[0] ? errbuf : curl_easy_strerror(rc));
		goto out;
	}
	if (code == 401 || code == 403) {
		ret = err_set(
			err, EACCES,
			"unauthorized: token service %.200s refused the credentials (HTTP %ld); "
			"check the image pull secret",
			realm, code);
		goto out;
	}
	if (code != 200) {
		ret = err_set(err, EPROTO, "token service %.200s: HTTP %ld", realm, code);
		goto out;
	}
	j = json_loadb(buf_str(&body), body.len, 0, NULL);
	tok = json_object_get(j, "token");
	if (!json_is_string(tok) || !*json_string_value(tok))
		tok = json_object_get(j, "access_token");
	if (!json_is_string(tok) || !*json_string_value(tok)) {
		ret = err_set(err, EPROTO, "token service %.200s: answer has no token", realm);
		goto out;
	}
	free(c->st[i].token);
	c->st[i].token = xstrdup(json_string_value(tok));
out:
	json_decref(j);
	curl_slist_free_all(hdrs);
	buf_release(&body);
	curl_easy_cleanup(curl);
	return ret;
}

/* Reacts to a 401: fetches a token (Bearer) or switches to basic credentials (Basic).
 * Returns 1 to retry, or a negative error. */
static int reg_answer_challenge(struct reg_client *c, size_t i, const char *challenge,
				struct err *err)
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

/* One GET on endpoint i, answering at most two 401 challenges. On success *code holds the
 * final HTTP status; transport failures return a negative error. */
static int reg_perform(struct reg_client *c, size_t i, const char *url, bool manifest,
		       struct reg_xfer *x, long *code, struct err *err)
{
	const struct reg_endpoint *ep = &c->eps[i];
	const struct image_auth *a = c->auth;
	bool fixed_token = !ep->is_mirror && a && a->registry_token && *a->registry_token;
	char errbuf[CURL_ERROR_SIZE];

	for (int attempt = 0;; attempt++) {
		struct curl_slist *hdrs = NULL;
		_cleanup_free_ char *authz = NULL;
		CURLcode rc;
		int ret;

		ret = reg_xfer_reset(x, err);
		if (ret < 0)
			return ret;
		reg_curl_setup(c->curl, url, errbuf);
		reg_watch_start(&x->watch, x->deadline_ns, x->limit_s);
		reg_watch_attach(c->curl, &x->watch);
		curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, reg_on_body);
		curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, x);
		curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, reg_on_header);
		curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, x);
		if (manifest)
			hdrs = curl_slist_append(hdrs, REG_ACCEPT);
		if (fixed_token)
			authz = xasprintf("Authorization: Bearer %s", a->registry_token);
		else if (c->st[i].token)
			authz = xasprintf("Authorization: Bearer %s", c->st[i].token);
		else if (c->st[i].basic) {
			curl_easy_setopt(c->curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
			curl_easy_setopt(c->curl, CURLOPT_USERNAME, c->user);
			curl_easy_setopt(c->curl, CURLOPT_PASSWORD, c->pass);
		}
		if (authz)
			hdrs = curl_slist_append(hdrs, authz);
		curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdrs);
		rc = curl_easy_perform(c->curl);
		curl_slist_free_all(hdrs);
		if (authz)
			explicit_bzero(authz, strlen(authz));
		if (rc != CURLE_OK) {
			if (x->watch.code)
				return err_set(err, x->watch.code, "%s", x->watch.msg);
			if (x->too_big)
				return err_set(err, EFBIG, "larger than %llu bytes; refusing",
					       (unsigned long long)x->max);
			if (x->io_errno) {
				errno = x->io_errno;
				return err_errno(err, "write download");
			}
			if (rc == CURLE_TOO_MANY_REDIRECTS)
				return err_set(
					err, ELOOP,
					"redirect loop: more than %d redirects; the registry "
					"must answer within fewer",
					REG_MAX_REDIRECTS);
			return err_set(err, reg_curl_errno(rc), "unreachable: %s",
				       errbuf[0] ? errbuf : curl_easy_strerror(rc));
		}
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, code);
		if (*code != 401 || fixed_token || attempt >= 2)
			return 0;
		ret = reg_answer_challenge(c, i, x->www_auth, err);
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

	reg_xfer_init(&x, c->curl, -1, REG_MAX_MANIFEST);
	ret = reg_get(c, what, suffix, true, &x, err);
	if (ret < 0)
		goto out;
	digest = reg_xfer_digest(&x);
	if (x.docker_digest && !strncmp(x.docker_digest, "sha256:", 7) &&
	    strcmp(x.docker_digest, digest)) {
		ret = err_set(err, EBADMSG,
			      "manifest %s: content hash %s does not match the registry's "
			      "Docker-Content-Digest %.80s",
			      reference, digest, x.docker_digest);
		goto out;
	}
	if (!strncmp(reference, "sha256:", 7) && strcmp(reference, digest)) {
		ret = err_set(err, EBADMSG, "manifest %s: content hash %s does not match",
			      reference, digest);
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

/* Checks what a blob transfer hashed against the digest asked for. */
static int reg_check_blob(struct reg_xfer *x, const char *digest, int64_t size, struct err *err)
{
	_cleanup_free_ char *got = reg_xfer_digest(x);

	if (size >= 0 && x->got != (uint64_t)size)
		return err_set(err, EBADMSG, "blob %s: received %llu bytes, the manifest says %lld",
			       digest, (unsigned long long)x->got, (long long)size);
	if (strcmp(got, digest))
		return err_set(err, EBADMSG, "blob %s: content hash %s does not match", digest,
			       got);
	return 0;
}

int reg_fetch_blob_mem(struct reg_client *c, const char *digest, size_t max, char **out,
		       size_t *len, struct err *err)
{
	_cleanup_free_ char *suffix = xasprintf("blobs/%s", digest);
	_cleanup_free_ char *what = xasprintf("blob %s", digest);
	struct reg_xfer x;
	int ret;

	reg_xfer_init(&x, c->curl, -1, max);
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
	reg_xfer_init(&x, c->curl, fd, size >= 0 ? (uint64_t)size : max);
	ret = reg_get(c, what, suffix, false, &x, err);
	if (ret == 0)
		ret = reg_check_blob(&x, digest, size, err);
	if (ret == 0 && fdatasync(fd) < 0)
		ret = err_errno(err, "blob %s: sync", digest);
	close(fd);
	if (ret == 0 && rename(tmp, dest) < 0)
		ret = err_errno(err, "blob %s: rename into %s", digest, dest);
	if (ret < 0)
		unlink(tmp);
	reg_xfer_release(&x);
	reg_slot_give(slot);
	return ret;
}
