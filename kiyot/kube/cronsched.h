/*
 * cronsched.h: a CronJob's schedule (.spec.schedule), read as Kubernetes reads it (robfig/cron's
 * standard parser), and the next time it runs, in UTC.
 *
 *	struct cronsched s;
 *	if (cronsched_parse(&s, "0 9-17 * * 1-5", err) < 0)
 *		return err_wrap(err, "CronJob %s/%s: .spec.schedule", ns, name);
 *	int64_t next = cronsched_next(&s, now_s);   (Unix seconds; -1: never)
 *
 * Five fields separated by blanks: minute (0-59), hour (0-23), day of month (1-31), month
 * (1-12 or JAN-DEC), day of week (0-6, Sunday 0, or SUN-SAT); names in any case. Each field is
 * a list of items separated by commas; an item is "*" (or "?"), a number or name, or a range
 * "a-b", each optionally followed by a step "/n" ("*" + "/15": every 15 minutes; "a/n" is
 * "a-max/n"). Or one of @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.
 * When both day of month and day of week are restricted (neither starts with "*" or "?", or
 * one does with a step above 1), a day matching either runs; otherwise a day must match both.
 *
 * Refused (EINVAL, the message says which field and why): anything else, such as a sixth field
 * (seconds), "@every", "TZ=" or "CRON_TZ=" prefixes (Kubernetes has .spec.timeZone instead), a
 * value out of its field's range, a range ending before it starts, a step of 0, a text longer
 * than CRONSCHED_MAX_TEXT. Time zones are the caller's: cronsched_next reads and returns UTC,
 * with no daylight-saving time and independently of $TZ.
 *
 * Thread safety: pure functions.
 */
#ifndef KIYOT_CRONSCHED_H
#define KIYOT_CRONSCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

#define CRONSCHED_MAX_TEXT 256
/* cronsched_next looks this many days ahead at most (robfig/cron gives up after five years) */
#define CRONSCHED_HORIZON_DAYS (5 * 366)

struct cronsched {
	uint64_t minute; /* bit m: minute m runs */
	uint32_t hour;	 /* bit h */
	uint32_t dom;	 /* bit d, 1-31 */
	uint16_t month;	 /* bit m, 1-12 */
	uint8_t dow;	 /* bit d, 0-6 (Sunday 0) */
	bool dom_any;	 /* the field was "*" or "?" (no step above 1) */
	bool dow_any;
};

/* Reads text into *out (written only on success). */
int cronsched_parse(struct cronsched *out, const char *text, struct err *err);

/* The first time (Unix seconds, UTC, a whole minute) strictly after after_s that s runs; -1
 * when it runs on no day within CRONSCHED_HORIZON_DAYS (such as "0 0 30 2 *"). */
int64_t cronsched_next(const struct cronsched *s, int64_t after_s);

/* The civil date of a Unix day (days since 1970-01-01), proleptic Gregorian, and back. */
void cronsched_civil(int64_t day, int64_t *y, unsigned *m, unsigned *d);
int64_t cronsched_day(int64_t y, unsigned m, unsigned d);

#endif
