/*
 * awscreds.h: AWS credentials and region, found the way the AWS SDKs find them.
 *
 * Sources, in order (the first that has credentials wins):
 *   1. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN;
 *   2. the shared files: AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials), section
 *      [<profile>], then AWS_CONFIG_FILE (default ~/.aws/config), section [profile <profile>]
 *      ([default] for the default profile). The profile is the configured one, else
 *      AWS_PROFILE, else "default". A profile named explicitly that neither file has is an
 *      error rather than a fall-through to the instance role;
 *   3. the instance role over IMDSv2: PUT /latest/api/token, then
 *      GET /latest/meta-data/iam/security-credentials/ and .../<role>, at
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT (default http://169.254.169.254).
 *
 *	struct aws_creds_provider *p;
 *	struct aws_creds c;
 *	if (aws_creds_provider_new(&(struct aws_creds_config){ 0 }, &p, err) < 0)
 *		return -1;
 *	if (aws_creds_provider_get(p, &c, err) < 0)	a copy, refreshed before it expires
 *		...
 *	aws_creds_release(&c);
 *	aws_creds_provider_free(p);
 *
 * Secrets are never logged and never appear in error messages.
 */
#ifndef KIYOT_AWSCREDS_H
#define KIYOT_AWSCREDS_H

#include <stdint.h>

#include "err.h"

/* Largest shared credentials or config file read. */
#define AWS_CREDS_MAX_FILE (1u << 20)
/* Largest IMDS answer read. */
#define AWS_CREDS_MAX_IMDS (64u << 10)
/* Temporary credentials are fetched again this long before they expire. */
#define AWS_CREDS_REFRESH_NS (5 * 60 * (int64_t)1000000000)

/* A key pair, with the session token of temporary credentials. Owned strings. */
struct aws_creds {
	char *access_key_id;
	char *secret_access_key;
	char *session_token; /* NULL for long-term keys */
	int64_t expires_ns;  /* wall clock, ns since the epoch; 0: does not expire */
	const char *source;  /* static text: "static", "env", "shared-file", "imds" */
};

void aws_creds_release(struct aws_creds *c);
/* Deep copy of src into *dst (which is overwritten, not released). */
void aws_creds_copy(struct aws_creds *dst, const struct aws_creds *src);

/* From the environment. ENOENT when AWS_ACCESS_KEY_ID or AWS_SECRET_ACCESS_KEY is unset. */
int aws_creds_from_env(struct aws_creds *out, struct err *err);

/*
 * From the shared files. credentials_path and config_path may be NULL (the defaults above;
 * a missing default file is no error); profile NULL means "default". ENOENT when no section
 * of that profile holds a key pair; EINVAL for a section with only half a pair.
 */
int aws_creds_from_shared_files(const char *credentials_path, const char *config_path,
				const char *profile, struct aws_creds *out, struct err *err);

/*
 * From the instance role over IMDSv2. endpoint NULL: AWS_EC2_METADATA_SERVICE_ENDPOINT or
 * http://169.254.169.254. ENOENT when no role is attached, EHOSTUNREACH/ETIMEDOUT-like codes
 * (EAGAIN) when the service does not answer, EACCES when it refuses the token.
 */
int aws_creds_from_imds(const char *endpoint, struct aws_creds *out, struct err *err);

/*
 * The region: configured (if non-empty), else AWS_REGION, else AWS_DEFAULT_REGION, else the
 * region of the profile in the shared config file. *out is the caller's. ENOENT when none.
 */
int aws_region_resolve(const char *configured, const char *config_path, const char *profile,
		       char **out, struct err *err);

/* Where a provider looks. All fields optional and borrowed during aws_creds_provider_new. */
struct aws_creds_config {
	const char *profile;	      /* NULL: AWS_PROFILE, else "default" */
	const char *credentials_file; /* NULL: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials */
	const char *config_file;      /* NULL: AWS_CONFIG_FILE or ~/.aws/config */
	const char *imds_endpoint; /* NULL: AWS_EC2_METADATA_SERVICE_ENDPOINT or the link-local */
	int no_imds;		   /* do not ask the instance metadata service */
};

/* Caches credentials from the chain above; thread-safe. */
struct aws_creds_provider;

int aws_creds_provider_new(const struct aws_creds_config *cfg, struct aws_creds_provider **out,
			   struct err *err);
/* A provider that always hands out a copy of c (for tests and explicit configuration). */
struct aws_creds_provider *aws_creds_provider_new_static(const struct aws_creds *c);
/*
 * A copy of the current credentials into *out (the caller releases it). The chain is walked at
 * the first call and again when the cached credentials are within AWS_CREDS_REFRESH_NS of
 * expiring; a failed refresh keeps credentials that have not expired yet.
 */
int aws_creds_provider_get(struct aws_creds_provider *p, struct aws_creds *out, struct err *err);
/* Forgets the cached credentials: the next get walks the chain again (after ExpiredToken). */
void aws_creds_provider_invalidate(struct aws_creds_provider *p);
void aws_creds_provider_free(struct aws_creds_provider *p);

#endif
