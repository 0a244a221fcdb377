/*
 * reader_fixture.c: Pods and kiyot's config from text for unit tests (reader_fixture.h).
 */
#include "reader_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "yaml.h"

int rfix_pod_read(const char *text, struct podspec **p, struct err *err)
{
	json_t *j = NULL;
	int ret = yaml_to_json(text, strlen(text), &j, err);

	if (ret < 0)
		return ret;
	ret = podspec_from_json(j, p, err);
	json_decref(j);
	return ret;
}

struct podspec *rfix_pod(const char *text)
{
	struct err err = ERR_INIT;
	struct podspec *p = NULL;

	if (rfix_pod_read(text, &p, &err) < 0)
		fail_msg("%s: %s", text, err.msg);
	return p;
}

int rfix_config(struct kiyot_config *c, const char *text, struct err *err)
{
	kiyot_config_defaults(c);
	return kiyot_config_load_text(c, text, strlen(text), "k.yaml", err);
}
