/*
 * cronsched.c: CronJob schedules and their next run (cronsched.h), after robfig/cron's
 * standard parser, which Kubernetes' CronJob controller uses.
 */
#include "cronsched.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

/* One field: its name for errors, its range, and the names its values may have. */
struct field {
	const char *what;
	unsigned min, max;
	const char *const *names; /* names[i] is the value min + i; NULL: none */
};

static const char *const month_names[] = { "jan", "feb", "mar", "apr", "may", "jun", "jul",
					   "aug", "sep", "oct", "nov", "dec", NULL };
static const char *const dow_names[] = { "sun", "mon", "tue", "wed", "thu", "fri", "sat", NULL };

static const struct field fields[5] = {
	{ "minute", 0, 59, NULL },	    { "hour", 0, 23, NULL },
	{ "day of month", 1, 31, NULL },    { "month", 1, 12, month_names },
	{ "day of week", 0, 6, dow_names },
};

/* The descriptors robfig/cron knows, as the five fields they stand for. */
static const struct {
	const char *name, *fields;
} descriptors[] = {
	{ "@yearly", "0 0 1 1 *" }, { "@annually", "0 0 1 1 *" }, { "@monthly", "0 0 1 * *" },
	{ "@weekly", "0 0 * * 0" }, { "@daily", "0 0 * * *" },	  { "@midnight", "0 0 * * *" },
	{ "@hourly", "0 * * * *" },
};

/* A number or one of f's names, the len bytes at s: 0 with *v, or EINVAL. */
static int value(const struct field *f, const char *s, size_t len, unsigned *v, struct err *err)
{
	unsigned n = 0;

	if (f->names && len == 3)
		for (unsigned i = 0; f->names[i]; i++)
			if (!strncasecmp(s, f->names[i], 3)) {
				*v = f->min + i;
				return 0;
			}
	if (!len)
		return err_set(err, EINVAL, "%s: a number is missing", f->what);
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return err_set(err, EINVAL, "%s: \"%.*s\" is no number%s", f->what,
				       (int)len, s, f->names ? " or name" : "");
		n = n * 10 + (unsigned)(s[i] - '0');
		if (n > 1000)
			return err_set(err, EINVAL, "%s: %.*s is out of range %u-%u", f->what,
				       (int)len, s, f->min, f->max);
	}
	*v = n;
	return 0;
}

/* One item of a list ("*", "5", "1-5", "*" "/15", "10/5"): its bits into *bits; *any when it
 * is "*" or "?" without a step above 1. */
static int item(const struct field *f, const char *s, size_t len, uint64_t *bits, bool *any,
		struct err *err)
{
	const char *slash = memchr(s, '/', len), *dash;
	size_t rlen = slash ? (size_t)(slash - s) : len;
	unsigned lo, hi, step = 1;
	bool star = false;

	if (slash && (memchr(slash + 1, '/', len - rlen - 1)))
		return err_set(err, EINVAL, "%s: \"%.*s\" has two steps", f->what, (int)len, s);
	if (slash && value(f, slash + 1, len - rlen - 1, &step, err) < 0)
		return -err->code;
	if (!step)
		return err_set(err, EINVAL, "%s: a step of 0 in \"%.*s\"; give a step of 1 or more",
			       f->what, (int)len, s);
	dash = memchr(s, '-', rlen);
	if (rlen == 1 && (s[0] == '*' || s[0] == '?')) {
		lo = f->min;
		hi = f->max;
		star = true;
	} else if (dash) {
		if (value(f, s, (size_t)(dash - s), &lo, err) < 0 ||
		    value(f, dash + 1, rlen - (size_t)(dash - s) - 1, &hi, err) < 0)
			return -err->code;
	} else {
		if (value(f, s, rlen, &lo, err) < 0)
			return -err->code;
		hi = slash ? f->max : lo; /* "a/n" is "a-max/n" */
	}
	if (lo < f->min || hi > f->max)
		return err_set(err, EINVAL, "%s: \"%.*s\" is out of range %u-%u", f->what, (int)len,
			       s, f->min, f->max);
	if (lo > hi)
		return err_set(err, EINVAL, "%s: the range \"%.*s\" ends before it starts", f->what,
			       (int)len, s);
	for (unsigned v = lo; v <= hi; v += step)
		*bits |= 1ull << v;
	if (star && step == 1)
		*any = true;
	return 0;
}

/* One field: its comma-separated items. */
static int field(const struct field *f, const char *s, size_t len, uint64_t *bits, bool *any,
		 struct err *err)
{
	*bits = 0;
	*any = false;
	while (len) {
		const char *comma = memchr(s, ',', len);
		size_t n = comma ? (size_t)(comma - s) : len;

		if (!n || (comma && n + 1 == len))
			return err_set(err, EINVAL, "%s: an empty item in a list", f->what);
		if (item(f, s, n, bits, any, err) < 0)
			return -err->code;
		if (!comma)
			break;
		s += n + 1;
		len -= n + 1;
	}
	return 0;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The five fields of text (a descriptor already replaced). */
static int fields5(struct cronsched *s, const char *text, struct err *err)
{
	uint64_t bits[5];
	bool any[5];
	size_t i = 0;
	const char *p = text;

	for (;;) {
		const char *start;

		while (blank(*p))
			p++;
		if (!*p)
			break;
		start = p;
		while (*p && !blank(*p))
			p++;
		if (i == 5)
			return err_set(err, EINVAL,
				       "more than 5 fields; give minute, hour, day of month, month "
				       "and day of week (no seconds)");
		if (field(&fields[i], start, (size_t)(p - start), &bits[i], &any[i], err) < 0)
			return -err->code;
		i++;
	}
	if (i < 5)
		return err_set(err, EINVAL,
			       "%zu fields; give 5: minute, hour, day of month, month and day of "
			       "week, or one of @yearly, @monthly, @weekly, @daily, @hourly",
			       i);
	*s = (struct cronsched){ .minute = bits[0],
				 .hour = (uint32_t)bits[1],
				 .dom = (uint32_t)bits[2],
				 .month = (uint16_t)bits[3],
				 .dow = (uint8_t)bits[4],
				 .dom_any = any[2],
				 .dow_any = any[4] };
	return 0;
}

int cronsched_parse(struct cronsched *out, const char *text, struct err *err)
{
	struct cronsched s;
	size_t len = strnlen(text, CRONSCHED_MAX_TEXT + 1);
	const char *p = text;

	if (len > CRONSCHED_MAX_TEXT)
		return err_set(err, EINVAL, "schedule: longer than %d bytes", CRONSCHED_MAX_TEXT);
	while (blank(*p))
		p++;
	if (!strncmp(p, "TZ=", 3) || !strncmp(p, "CRON_TZ=", 8))
		return err_set(err, EINVAL,
			       "schedule \"%s\": a time zone in the schedule; set .spec.timeZone "
			       "instead",
			       text);
	if (*p == '@') {
		size_t n = 0;
		const char *fields_of = NULL;

		while (p[n] && !blank(p[n]))
			n++;
		for (size_t i = 0; i < sizeof(descriptors) / sizeof(descriptors[0]); i++)
			if (strlen(descriptors[i].name) == n &&
			    !strncasecmp(p, descriptors[i].name, n))
				fields_of = descriptors[i].fields;
		for (size_t i = n; p[i]; i++)
			if (!blank(p[i]))
				fields_of = NULL;
		if (!fields_of)
			return err_set(err, EINVAL,
				       "schedule \"%s\": unknown descriptor; give 5 fields or one "
				       "of @yearly, @annually, @monthly, @weekly, @daily, "
				       "@midnight, @hourly",
				       text);
		p = fields_of;
	}
	if (fields5(&s, p, err) < 0)
		return err_wrap(err, "schedule \"%s\"", text);
	*out = s;
	return 0;
}

/* Howard Hinnant's days_from_civil and civil_from_days: exact over int64 years of interest. */
int64_t cronsched_day(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

void cronsched_civil(int64_t day, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t z = day + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
	return a / b - (a % b != 0 && (a < 0) != (b < 0));
}

/* Whether s runs on the Unix day. */
static bool day_runs(const struct cronsched *s, int64_t day)
{
	int64_t y;
	unsigned m, d, wd = (unsigned)(((day % 7) + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
	bool dom, dow;

	cronsched_civil(day, &y, &m, &d);
	if (!(s->month & (1u << m)))
		return false;
	dom = s->dom & (1u << d);
	dow = s->dow & (1u << wd);
	if (s->dom_any || s->dow_any)
		return dom && dow;
	return dom || dow;
}

int64_t cronsched_next(const struct cronsched *s, int64_t after_s)
{
	/* (the bounds keep the arithmetic in range; no schedule runs that far off) */
	const int64_t bound = (int64_t)1 << 50;
	int64_t t, day;
	unsigned h0, m0;

	if (after_s > bound || after_s < -bound)
		return -1;
	t = floor_div(after_s, 60) * 60 + 60;
	day = floor_div(t, 86400);
	h0 = (unsigned)((t - day * 86400) / 3600);
	m0 = (unsigned)((t - day * 86400) % 3600 / 60);
	for (int i = 0; i <= CRONSCHED_HORIZON_DAYS; i++, day++, h0 = m0 = 0) {
		if (!day_runs(s, day))
			continue;
		for (unsigned h = h0; h < 24; h++) {
			if (!(s->hour & (1u << h)))
				continue;
			for (unsigned m = h == h0 ? m0 : 0; m < 60; m++)
				if (s->minute & (1ull << m))
					return day * 86400 + h * 3600 + m * 60;
		}
	}
	return -1;
}
