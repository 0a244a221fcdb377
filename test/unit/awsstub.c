/*
 * awsstub.c: a stub AWS endpoint for unit tests (awsstub.h).
 */
#include "awsstub.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fsutil.h"
#include "xalloc.h"

void awsstub_start(struct awsstub *a, const char *session_token)
{
	struct aws_creds cr = { "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
				(char *)session_token, 0, "static" };

	if (stub_start(&a->stub) < 0)
		fail_msg("the stub endpoint cannot listen on 127.0.0.1");
	snprintf(a->url, sizeof(a->url), "http://127.0.0.1:%d/", a->stub.port);
	a->creds = aws_creds_provider_new_static(&cr);
}

void awsstub_stop(struct awsstub *a)
{
	if (!a->stopped)
		stub_stop(&a->stub);
	a->stopped = true;
}

void awsstub_forget(struct awsstub *a)
{
	pthread_mutex_lock(&a->stub.lock);
	for (size_t i = 0; i < a->stub.n_reqs; i++) {
		free(a->stub.reqs[i].headers);
		free(a->stub.reqs[i].body);
	}
	a->stub.n_reqs = 0;
	pthread_mutex_unlock(&a->stub.lock);
}

void awsstub_release(struct awsstub *a)
{
	awsstub_stop(a);
	stub_release(&a->stub);
	aws_creds_provider_free(a->creds);
	a->creds = NULL;
}

void awsstub_sleep(void *ctx, int64_t ns)
{
	struct awsstub *a = ctx;
	int i = __atomic_fetch_add(&a->n_sleeps, 1, __ATOMIC_RELAXED); /* clients' threads */

	if (i < AWSSTUB_SLEEPS)
		a->sleeps_ns[i] = ns;
}

char *awsstub_fixture(const char *dir, const char *name)
{
	_cleanup_free_ char *path = xasprintf("%s%s", dir, name);
	struct err err = ERR_INIT;
	char *text = NULL;
	size_t n = 0;

	if (fs_read_file(path, 1 << 20, &text, &n, &err) < 0)
		fail_msg("%s", err.msg);
	return text;
}
