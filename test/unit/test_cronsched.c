/*
 * Unit tests for kiyot/kube/cronsched: CronJob schedules as Kubernetes reads them and their
 * next run in UTC, against known dates and against a minute-by-minute search with gmtime_r.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kube/cronsched.h"

/* Unix seconds of a UTC date and time. */
static int64_t utc(int y, unsigned mo, unsigned d, unsigned h, unsigned mi, unsigned s)
{
	return cronsched_day(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
}

/* The next run of text after after_s; the test fails when text is refused. */
static int64_t next(const char *text, int64_t after_s)
{
	struct cronsched s;
	struct err err = ERR_INIT;

	if (cronsched_parse(&s, text, &err) < 0)
		fail_msg("%s: %s", text, err.msg);
	return cronsched_next(&s, after_s);
}

struct ncase {
	const char *text;
	int64_t after, want;
};

/* Known schedules: every 15 minutes, office hours on weekdays, Feb 29, the descriptors,
 * names, a run exactly at "after" (the next one is later), a year's turn. */
static void test_cronsched__known_schedules(void **state)
{
	const struct ncase cases[] = {
		{ "*/15 * * * *", utc(2026, 11, 29, 14, 43, 10), utc(2026, 11, 29, 14, 45, 0) },
		{ "*/15 * * * *", utc(2026, 11, 29, 14, 45, 0), utc(2026, 11, 29, 15, 0, 0) },
		{ "0,30 * * * *", utc(2026, 11, 29, 14, 0, 0), utc(2026, 11, 29, 14, 30, 0) },
		/* Friday 17:00 runs; after it, Monday 09:00 */
		{ "0 9-17 * * 1-5", utc(2026, 11, 27, 16, 59, 59), utc(2026, 11, 27, 17, 0, 0) },
		{ "0 9-17 * * 1-5", utc(2026, 11, 27, 17, 0, 0), utc(2026, 11, 30, 9, 0, 0) },
		{ "0 9-17 * * MON-FRI", utc(2026, 11, 28, 3, 0, 0), utc(2026, 11, 30, 9, 0, 0) },
		/* the next Feb 29 after 2025 is 2028's; after 2024-02-28 noon, the next day */
		{ "0 0 29 2 *", utc(2025, 3, 1, 0, 0, 0), utc(2028, 2, 29, 0, 0, 0) },
		{ "0 0 29 2 *", utc(2024, 2, 28, 12, 0, 0), utc(2024, 2, 29, 0, 0, 0) },
		/* 2100 is no leap year */
		{ "0 0 29 FEB *", utc(2099, 3, 1, 0, 0, 0), utc(2104, 2, 29, 0, 0, 0) },
		{ "0 0 1 1 *", utc(2026, 12, 31, 23, 59, 30), utc(2027, 1, 1, 0, 0, 0) },
		{ "@yearly", utc(2026, 12, 31, 23, 59, 30), utc(2027, 1, 1, 0, 0, 0) },
		{ "@annually", utc(2026, 6, 1, 0, 0, 0), utc(2027, 1, 1, 0, 0, 0) },
		{ "@monthly", utc(2026, 11, 29, 14, 0, 0), utc(2026, 12, 1, 0, 0, 0) },
		/* 2026-11-29 is a Sunday: @weekly ran at its midnight, next the 6th of December */
		{ "@weekly", utc(2026, 11, 29, 0, 0, 0), utc(2026, 12, 6, 0, 0, 0) },
		{ "@daily", utc(2026, 11, 29, 14, 0, 0), utc(2026, 11, 30, 0, 0, 0) },
		{ "@midnight", utc(2026, 11, 29, 14, 0, 0), utc(2026, 11, 30, 0, 0, 0) },
		{ "@hourly", utc(2026, 11, 29, 14, 0, 0), utc(2026, 11, 29, 15, 0, 0) },
		{ "  @HOURLY  ", utc(2026, 11, 29, 14, 0, 0), utc(2026, 11, 29, 15, 0, 0) },
		{ "30 2 * jan-mar sun", utc(2026, 11, 29, 14, 0, 0), utc(2027, 1, 3, 2, 30, 0) },
		{ "5/20 * * * *", utc(2026, 11, 29, 14, 50, 0), utc(2026, 11, 29, 15, 5, 0) },
		{ "0-10/5 8 * * *", utc(2026, 11, 29, 8, 5, 0), utc(2026, 11, 29, 8, 10, 0) },
		{ "0 0 ? * 0", utc(2026, 11, 29, 14, 0, 0), utc(2026, 12, 6, 0, 0, 0) },
		/* UTC has no daylight-saving time: the last Sunday of March has 24 hours */
		{ "30 2 * * *", utc(2027, 3, 28, 1, 0, 0), utc(2027, 3, 28, 2, 30, 0) },
		/* before 1970 */
		{ "0 0 * * *", utc(1969, 12, 31, 12, 0, 0), utc(1970, 1, 1, 0, 0, 0) },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (next(cases[i].text, cases[i].after) != cases[i].want)
			fail_msg("\"%s\" after %lld: %lld, want %lld", cases[i].text,
				 (long long)cases[i].after,
				 (long long)next(cases[i].text, cases[i].after),
				 (long long)cases[i].want);
}

/* Day of month and day of week both restricted: a day matching either runs (as Kubernetes'
 * robfig/cron and Vixie cron do); with either one "*" or "?", a day must match both. */
static void test_cronsched__day_of_month_or_day_of_week(void **state)
{
	(void)state;
	/* the 13th or any Friday: Friday the 6th of November 2026 comes first */
	assert_true(next("0 0 13 * 5", utc(2026, 11, 1, 0, 0, 0)) == utc(2026, 11, 6, 0, 0, 0));
	/* after the 6th: Friday the 13th, then Friday the 20th */
	assert_true(next("0 0 13 * 5", utc(2026, 11, 6, 0, 0, 0)) == utc(2026, 11, 13, 0, 0, 0));
	assert_true(next("0 0 13 * 5", utc(2026, 11, 13, 0, 0, 0)) == utc(2026, 11, 20, 0, 0, 0));
	/* the 1st or a Monday: the 1st of December 2026 is a Tuesday, November 30 a Monday */
	assert_true(next("0 0 1 * MON", utc(2026, 11, 29, 0, 0, 0)) == utc(2026, 11, 30, 0, 0, 0));
	assert_true(next("0 0 1 * MON", utc(2026, 11, 30, 0, 0, 0)) == utc(2026, 12, 1, 0, 0, 0));
	/* "*" in the day of month: Mondays only */
	assert_true(next("0 0 * * 1", utc(2026, 11, 29, 0, 0, 0)) == utc(2026, 11, 30, 0, 0, 0));
	assert_true(next("0 0 * * 1", utc(2026, 11, 30, 0, 0, 0)) == utc(2026, 12, 7, 0, 0, 0));
	/* "*" in the day of week: the 13th only */
	assert_true(next("0 0 13 * *", utc(2026, 11, 1, 0, 0, 0)) == utc(2026, 11, 13, 0, 0, 0));
	/* "*" with a step above 1 restricts: odd days or Mondays (the 30th, a Monday, runs
	 * although it is even) */
	assert_true(next("0 0 */2 * 1", utc(2026, 11, 29, 0, 0, 0)) == utc(2026, 11, 30, 0, 0, 0));
	/* "*" with step 1 is "*": Mondays only, the 7th of December */
	assert_true(next("0 0 */1 * 1", utc(2026, 11, 30, 0, 0, 0)) == utc(2026, 12, 7, 0, 0, 0));
}

/* A schedule that names no real day never runs: -1, after the horizon's search. */
static void test_cronsched__impossible_date_never_runs(void **state)
{
	(void)state;
	assert_true(next("0 0 30 2 *", utc(2026, 1, 1, 0, 0, 0)) == -1);
	assert_true(next("0 0 31 4,6,9,11 *", utc(2026, 1, 1, 0, 0, 0)) == -1);
	/* the 31st of every month runs in months that have one */
	assert_true(next("0 0 31 * *", utc(2026, 11, 1, 0, 0, 0)) == utc(2026, 12, 31, 0, 0, 0));
}

struct ecase {
	const char *text, *says;
};

/* What Kubernetes refuses is refused, the message naming the field and why. */
static void test_cronsched__errors_name_the_field(void **state)
{
	static const struct ecase cases[] = {
		{ "60 * * * *", "minute: \"60\" is out of range 0-59" },
		{ "* 24 * * *", "hour: \"24\" is out of range 0-23" },
		{ "* * 0 * *", "day of month: \"0\" is out of range 1-31" },
		{ "* * * 13 *", "month: \"13\" is out of range 1-12" },
		{ "* * * * 7", "day of week: \"7\" is out of range 0-6" },
		{ "* * * *", "4 fields; give 5" },
		{ "", "0 fields; give 5" },
		{ "0 * * * * *", "more than 5 fields" },
		{ "5-1 * * * *", "the range \"5-1\" ends before it starts" },
		{ "*/0 * * * *", "a step of 0" },
		{ "*/5/2 * * * *", "two steps" },
		{ "1,,2 * * * *", "an empty item" },
		{ "1, * * * *", "an empty item" },
		{ "x * * * *", "minute: \"x\" is no number" },
		{ "* * * FOO *", "month: \"FOO\" is no number or name" },
		{ "-5 * * * *", "a number is missing" },
		{ "*-5 * * * *", "minute: \"*\" is no number" },
		{ "99999999999 * * * *", "out of range" },
		{ "@every 1h", "unknown descriptor" },
		{ "@daily 0", "unknown descriptor" },
		{ "TZ=Europe/Paris 0 * * * *", "set .spec.timeZone instead" },
		{ "CRON_TZ=UTC 0 * * * *", "set .spec.timeZone instead" },
	};
	struct cronsched s = { .minute = 42 };

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err err = ERR_INIT;

		if (cronsched_parse(&s, cases[i].text, &err) != -EINVAL ||
		    !strstr(err.msg, cases[i].says) || !strstr(err.msg, "schedule"))
			fail_msg("\"%s\": %s, want \"%s\"", cases[i].text, err.msg, cases[i].says);
		assert_true(s.minute == 42); /* untouched */
	}
}

/* A schedule longer than the bound is refused before it is read. */
static void test_cronsched__long_text_is_refused(void **state)
{
	char text[CRONSCHED_MAX_TEXT + 2];
	struct cronsched s;
	struct err err = ERR_INIT;

	(void)state;
	memset(text, ' ', sizeof(text) - 1);
	text[sizeof(text) - 1] = '\0';
	memcpy(text, "0 * * * *", 9);
	assert_int_equal(cronsched_parse(&s, text, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "longer than"));
	text[CRONSCHED_MAX_TEXT] = '\0';
	assert_int_equal(cronsched_parse(&s, text, &err), 0);
}

/* Whether s runs at the minute of t, by gmtime_r: the reference the search is checked by. */
static bool runs_at(const struct cronsched *s, time_t t)
{
	struct tm tm;
	bool dom, dow;

	gmtime_r(&t, &tm);
	dom = s->dom & (1u << tm.tm_mday);
	dow = s->dow & (1u << tm.tm_wday);
	return (s->minute & (1ull << tm.tm_min)) && (s->hour & (1u << tm.tm_hour)) &&
	       (s->month & (1u << (tm.tm_mon + 1))) &&
	       (s->dom_any || s->dow_any ? dom && dow : dom || dow);
}

/* The next run agrees with a minute-by-minute search over gmtime_r, for schedules of every
 * kind from many starting points (leap years and month ends among them). */
static void test_cronsched__next_agrees_with_gmtime(void **state)
{
	static const char *const texts[] = {
		"*/7 * * * *",	    "0 */5 * * *",	 "15 3 29 2 *",	    "0 0 31 * *",
		"0 12 * * 6,0",	    "0 0 1-7 * 1",	 "45 23 28-31 * *", "0 0 13 * 5",
		"10 4 * JAN,JUL *", "*/30 9-17 * * 1-5", "0 6 1 */3 *",	    "0 0 */10 * 2",
		"59 23 31 12 *",    "@weekly",		 "5/20 1/6 * * *",  "0 0 ? * TUE",
	};
	int64_t start = utc(2023, 12, 25, 0, 0, 0);
	unsigned seed = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct cronsched s;
		struct err err = ERR_INIT;

		assert_int_equal(cronsched_parse(&s, texts[i], &err), 0);
		for (int k = 0; k < 12; k++) {
			int64_t after, got, t;

			seed = seed * 1103515245u + 12345u;
			after = start + (int64_t)(seed % (3u * 366 * 86400));
			got = cronsched_next(&s, after);
			/* every minute between after and got does not run; got does */
			for (t = after - after % 60 + 60; t < got; t += 60)
				if (runs_at(&s, (time_t)t))
					fail_msg("%s after %lld: %lld runs before %lld", texts[i],
						 (long long)after, (long long)t, (long long)got);
			if (got <= after || got % 60 || !runs_at(&s, (time_t)got))
				fail_msg("%s after %lld: %lld does not run", texts[i],
					 (long long)after, (long long)got);
		}
	}
}

/* The civil date functions round-trip over four centuries. */
static void test_cronsched__civil_dates_round_trip(void **state)
{
	(void)state;
	assert_true(cronsched_day(1970, 1, 1) == 0);
	assert_true(cronsched_day(2000, 3, 1) == 11017);
	for (int64_t day = -146097; day < 2 * 146097; day += 13) {
		int64_t y;
		unsigned m, d;

		cronsched_civil(day, &y, &m, &d);
		assert_true(cronsched_day(y, m, d) == day);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cronsched__known_schedules),
		cmocka_unit_test(test_cronsched__day_of_month_or_day_of_week),
		cmocka_unit_test(test_cronsched__impossible_date_never_runs),
		cmocka_unit_test(test_cronsched__errors_name_the_field),
		cmocka_unit_test(test_cronsched__long_text_is_refused),
		cmocka_unit_test(test_cronsched__next_agrees_with_gmtime),
		cmocka_unit_test(test_cronsched__civil_dates_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
