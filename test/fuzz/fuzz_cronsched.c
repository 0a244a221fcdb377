/*
 * fuzz_cronsched: a CronJob's .spec.schedule as kiyot reads it from the API server
 * (cronsched.h), then its next runs. Besides what the sanitizers catch, it checks the parser's
 * promises: a refusal is EINVAL with a message naming the schedule and leaves its output
 * untouched; an accepted schedule has a bit in every field, within the field's range; each
 * next run is a whole minute strictly after the time asked, on a day and at a time the
 * schedule names (its day of month and day of week read as cronsched.h says), or -1.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/cronsched.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *text)
{
	fprintf(stderr, "%s\n%s\n", what, text);
	abort();
}

/* Whether s runs at t (Unix seconds), by its own fields. */
static int runs_at(const struct cronsched *s, int64_t t)
{
	int64_t day = t >= 0 ? t / 86400 : -((-t + 86399) / 86400), y;
	int64_t sec = t - day * 86400;
	unsigned m, d, wd = (unsigned)(((day % 7) + 11) % 7);
	int dom, dow;

	cronsched_civil(day, &y, &m, &d);
	dom = !!(s->dom & (1u << d));
	dow = !!(s->dow & (1u << wd));
	return (s->minute & (1ull << (sec % 3600 / 60))) && (s->hour & (1u << (sec / 3600))) &&
	       (s->month & (1u << m)) && (s->dom_any || s->dow_any ? dom && dow : dom || dow);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct cronsched none = { .minute = 1 };
	char text[CRONSCHED_MAX_TEXT + 8];
	struct cronsched s = none;
	struct err err = ERR_INIT;
	int64_t t = 1795963390; /* 2026-11-29 14:43:10 UTC */
	int ret;

	if (size >= sizeof(text))
		size = sizeof(text) - 1;
	memcpy(text, data, size);
	text[size] = '\0';
	ret = cronsched_parse(&s, text, &err);
	if (ret < 0) {
		if (ret != -EINVAL || err.code != EINVAL || !strstr(err.msg, "schedule") ||
		    memcmp(&s, &none, sizeof(s)))
			fail("refused without EINVAL and a message, or with an output", text);
		return 0;
	}
	if (!(s.minute & ((1ull << 60) - 1)) || s.minute >> 60 || !(s.hour & 0xffffff) ||
	    s.hour >> 24 || !(s.dom & 0xfffffffe) || !(s.month & 0x1ffe) || s.month >> 13 ||
	    !(s.dow & 0x7f) || s.dow >> 7)
		fail("a field without a value, or a value out of its range", text);
	for (int i = 0; i < 3; i++) {
		int64_t n = cronsched_next(&s, t);

		if (n == -1)
			break;
		if (n <= t || n % 60 || !runs_at(&s, n))
			fail("a next run that is not after the time asked or not the schedule's",
			     text);
		t = n + (i ? 0 : 29);
	}
	return 0;
}
