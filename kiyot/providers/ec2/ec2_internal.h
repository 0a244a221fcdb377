/*
 * ec2_internal.h: what the EC2 client's files share (ec2.c the transport: client, signing
 * through libcurl, retries, pagination; ec2_form.c building request forms and tags;
 * ec2_actions.c the actions; ec2_errclass.c classifying failures). Not for other modules.
 */
#ifndef KIYOT_EC2_INTERNAL_H
#define KIYOT_EC2_INTERNAL_H

#include "buf.h"
#include "ec2.h"

/* Parses one page of a paginated answer into the caller's accumulator. */
struct pager {
	const char *action;
	int (*page)(const char *body, size_t len, void *acc, char **next, struct err *err);
	void *acc;
};

/* The EC2 error of the last answer of a failed call (owned strings, NULL when none came). */
struct ec2_fault {
	char *code;
	char *message;
};

void ec2_fault_release(struct ec2_fault *f);
/* ec2_call, also giving the EC2 error code and message of a failure in *fault (initialised by
 * the caller to NULLs, released by the caller whatever the outcome). */
int ec2_call_fault(struct ec2_client *c, const char *action, const char *params, char **body,
		   size_t *len, enum ec2_errclass *cls, struct ec2_fault *fault, struct err *err);

/* Calls action with params, then again with each NextToken, until a page has none. */
int ec2_paginate(struct ec2_client *c, const struct pager *pg, const char *params,
		 enum ec2_errclass *cls, struct err *err);
/* Reports a failed call: the class in *cls and err, with code and errno. */
int ec2_fail(enum ec2_errclass k, enum ec2_errclass *cls, struct err *err);

/* Appends "key=value" to a form, percent-encoding both (RFC 3986 unreserved kept). */
void ec2_form_add(struct buf *f, const char *key, const char *value);
/* ec2_form_add with a printf-built key. */
void ec2_form_addf(struct buf *f, const char *value, const char *keyfmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Adds prefix.N.Key / prefix.N.Value for each tag. */
void ec2_form_tags(struct buf *f, const char *prefix, const struct ec2_tags *t);
/* Adds prefix.N for each id; -1 when there are none or more than one call takes. */
int ec2_form_ids(struct buf *f, const char *prefix, const char *const *ids, size_t n);

#endif
