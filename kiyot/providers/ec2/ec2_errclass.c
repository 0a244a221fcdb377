/*
 * ec2_errclass.c: EC2 failures by what a caller does about them (see ec2.h).
 */
#include "ec2.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "xalloc.h"

const char *ec2_errclass_name(enum ec2_errclass c)
{
	static const char *const names[] = { "ok",	  "retry", "capacity",
					     "not-found", "auth",  "invalid" };

	return (unsigned)c < ARRAY_SIZE(names) ? names[c] : "invalid";
}

int ec2_errclass_errno(enum ec2_errclass c)
{
	switch (c) {
	case EC2_OK:
		return 0;
	case EC2_RETRY:
		return EAGAIN;
	case EC2_CAPACITY:
		return ENOSPC;
	case EC2_NOT_FOUND:
		return ENOENT;
	case EC2_AUTH:
		return EACCES;
	case EC2_INVALID:
		break;
	}
	return EINVAL;
}

enum ec2_errclass ec2_errclass_of(int err_code)
{
	if (err_code < 0)
		err_code = -err_code;
	switch (err_code) {
	case 0:
		return EC2_OK;
	case EAGAIN:
		return EC2_RETRY;
	case ENOSPC:
		return EC2_CAPACITY;
	case ENOENT:
		return EC2_NOT_FOUND;
	case EACCES:
		return EC2_AUTH;
	}
	return EC2_INVALID;
}

/* True when s ends with suffix. */
static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);

	return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* True when s is one of the NULL-terminated list. */
static bool one_of(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

/*
 * EC2's error codes by what the caller can do about them. Codes not listed: 5xx retry, 401 and
 * 403 auth, other 4xx invalid.
 */
enum ec2_errclass ec2_classify(int http_status, const char *code, const char *message)
{
	static const char *const retry[] = { "RequestLimitExceeded", "Throttling",
					     "ThrottlingException",  "RequestThrottled",
					     "InternalError",	     "InternalFailure",
					     "ServiceUnavailable",   "Unavailable",
					     "RequestTimeout",	     NULL };
	static const char *const capacity[] = {
		"InsufficientInstanceCapacity", "InsufficientHostCapacity",
		"InsufficientReservedInstanceCapacity", "InsufficientCapacity", "Unsupported",
		"SpotMaxPriceTooLow", "MaxSpotInstanceCountExceeded",
		/* limits of the account, per type family
						 * or in all: another type may fit */
		"InstanceLimitExceeded", "VcpuLimitExceeded",
		/* the subnet: another subnet may do */
		"InsufficientFreeAddressesInSubnet", NULL
	};
	static const char *const auth[] = { "AuthFailure",
					    "UnauthorizedOperation",
					    "InvalidClientTokenId",
					    "SignatureDoesNotMatch",
					    "OptInRequired",
					    "Blocked",
					    "PendingVerification",
					    "ExpiredToken",
					    "RequestExpired",
					    "IncompleteSignature",
					    "MissingAuthenticationToken",
					    "InvalidAccessKeyId",
					    "AccessDenied",
					    NULL };

	if (code && *code) {
		if (one_of(code, retry))
			return EC2_RETRY;
		if (one_of(code, capacity))
			return EC2_CAPACITY;
		/* the same code also covers unrelated parameter clashes: only type support */
		if (strcmp(code, "InvalidParameterCombination") == 0)
			return message && strcasestr(message, "type") &&
					       strcasestr(message, "support")
				       ? EC2_CAPACITY
				       : EC2_INVALID;
		if (ends_with(code, ".NotFound"))
			return EC2_NOT_FOUND;
		if (one_of(code, auth))
			return EC2_AUTH;
	}
	if (http_status >= 500 || http_status == 429 || http_status == 0)
		return EC2_RETRY;
	if (http_status == 401 || http_status == 403)
		return EC2_AUTH;
	if (http_status >= 200 && http_status < 300)
		return EC2_OK;
	return EC2_INVALID;
}

/* True for the characters of an instance id after "i-". */
static bool id_char(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
}

size_t ec2_not_found_ids(const char *message, const char *const *ids, size_t n, enum ec2_term *out)
{
	size_t marked = 0;

	if (!message)
		return 0;
	for (const char *p = message; (p = strstr(p, "i-"));) {
		const char *start = p;
		size_t len = 2;

		while (len < 32 && id_char(p[len]))
			len++;
		p += len;
		if (len == 2 || (start > message && (isalnum((unsigned char)start[-1]) ||
						     start[-1] == '-' || start[-1] == '_')))
			continue; /* not an id of its own */
		for (size_t i = 0; i < n; i++)
			if (out[i] == EC2_TERM_LEFT && strlen(ids[i]) == len &&
			    strncmp(ids[i], start, len) == 0) {
				out[i] = EC2_TERM_GONE;
				marked++;
			}
	}
	return marked;
}
