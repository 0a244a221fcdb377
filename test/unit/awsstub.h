/*
 * awsstub.h: a stub AWS endpoint for the unit tests of kiyot's AWS clients (EC2, the Price
 * List): the HTTP stub of test/fixtures/ec2/httpstub.h on 127.0.0.1, its URL to point a client
 * at, static test credentials, a sleep that records what the client asked for instead of
 * sleeping, and the text of an answer kept as a fixture file.
 *
 *	struct awsstub a = { .stub = { .replies = script, .n_replies = 2 } };
 *	awsstub_start(&a, "session-token-1");
 *	cfg.endpoint = a.url; cfg.creds = a.creds; cfg.sleep = awsstub_sleep; cfg.sleep_ctx = &a;
 *	... a.stub.reqs[i]: what the client sent; a.n_sleeps, a.sleeps_ns[i]: its back-offs ...
 *	awsstub_release(&a);                  (awsstub_stop first: nothing listens there any more)
 *
 * Everything it makes fails the running cmocka test when it cannot be made.
 */
#ifndef KIYOT_TEST_AWSSTUB_H
#define KIYOT_TEST_AWSSTUB_H

#include <stdbool.h>
#include <stdint.h>

#include "../fixtures/ec2/httpstub.h"
#include "providers/ec2/awscreds.h"

#define AWSSTUB_SLEEPS 64

struct awsstub {
	struct stub stub; /* set its replies or handler (and ctx) before awsstub_start */
	char url[64];	  /* "http://127.0.0.1:PORT/" */
	struct aws_creds_provider *creds;
	bool stopped;
	int n_sleeps;			   /* how many sleeps were asked for */
	int64_t sleeps_ns[AWSSTUB_SLEEPS]; /* the first AWSSTUB_SLEEPS of them */
};

/* Starts the stub and makes the credentials (AKIDEXAMPLE, with session_token; NULL: none). */
void awsstub_start(struct awsstub *a, const char *session_token);
/* Stops the stub: its port is closed, its requests stay readable. Once or more. */
void awsstub_stop(struct awsstub *a);
/* Forgets the requests recorded so far (the stub may be serving). */
void awsstub_forget(struct awsstub *a);
/* Stops the stub if it runs, frees its requests and the credentials. */
void awsstub_release(struct awsstub *a);
/* A client's sleep (ctx: the struct awsstub): records ns, returns at once. */
void awsstub_sleep(void *ctx, int64_t ns);
/* The text of the fixture file dir/name (at most 1 MiB); the caller frees it. */
char *awsstub_fixture(const char *dir, const char *name);

#endif
