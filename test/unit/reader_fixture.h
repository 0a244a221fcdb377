/*
 * reader_fixture.h: what the unit tests of kiyot's readers and of their users share: a Pod
 * from its manifest's text and kiyot's config from its text, so that a test states the input
 * and what it expects, not how to parse it.
 *
 *	struct podspec *ps = rfix_pod("{apiVersion: v1, kind: Pod, metadata: {name: p}, ...}");
 *	...
 *	podspec_free(ps);
 *
 * Texts are YAML or JSON (JSON is YAML). The rfix_*_ok forms fail the running cmocka test
 * with the text and the reader's message when the text is refused.
 */
#ifndef KIYOT_TEST_READER_FIXTURE_H
#define KIYOT_TEST_READER_FIXTURE_H

#include "daemon/kiyot.h"
#include "kube/podspec.h"

/* The Pod text holds, or the test fails. The caller frees it (podspec_free). */
struct podspec *rfix_pod(const char *text);
/* Reads text as a Pod: podspec_from_json's return; *p is set only on success. */
int rfix_pod_read(const char *text, struct podspec **p, struct err *err);

/* kiyot's defaults, then text as the config file "k.yaml": kiyot_config_load_text's return.
 * c needs kiyot_config_release whatever the return. */
int rfix_config(struct kiyot_config *c, const char *text, struct err *err);

#endif
