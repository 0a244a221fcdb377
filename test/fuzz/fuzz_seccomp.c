/*
 * fuzz_seccomp: Localhost seccomp profiles from untrusted text. Each input is parsed for a unit
 * without capabilities and for one with all of RuntimeDefault's; besides what the sanitizers
 * catch, it checks the parser's promises: a refusal is -EINVAL with a message, and what it
 * accepts it accepts again, unchanged, as a profile of its own.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seccomp.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const many_caps[] = {
	"CAP_SYS_ADMIN", "CAP_SYS_PTRACE", "CAP_SYS_MODULE", "CAP_SYS_TIME", "CAP_SYS_BOOT",
	"CAP_SYS_NICE",	 "CAP_BPF",	   "CAP_PERFMON",    "CAP_SYSLOG",   "CAP_CHOWN",
};

static void check(const char *text, size_t size, const char *const *caps, size_t n_caps)
{
	struct err err = ERR_INIT;
	json_t *out = NULL, *again = NULL;
	char *dumped;
	int ret = seccomp_profile_parse(text, size, caps, n_caps, &out, &err);

	if (ret < 0) {
		if (ret != -EINVAL || err.code != EINVAL || !err.msg[0] || out)
			abort();
		return;
	}
	if (!json_is_object(out) || !json_is_string(json_object_get(out, "defaultAction")))
		abort();
	dumped = json_dumps(out, JSON_COMPACT);
	if (!dumped)
		abort();
	if (seccomp_profile_parse(dumped, strlen(dumped), caps, n_caps, &again, &err) != 0) {
		fprintf(stderr, "output refused: %s\n%s\n", err.msg, dumped);
		abort();
	}
	if (!json_equal(out, again)) {
		fprintf(stderr, "output changed when parsed again:\n%s\n", dumped);
		abort();
	}
	free(dumped);
	json_decref(out);
	json_decref(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check((const char *)data, size, NULL, 0);
	check((const char *)data, size, many_caps, ARRAY_SIZE(many_caps));
	return 0;
}
