/*
 * quantity.h: Kubernetes resource quantities ("100m", "0.5", "2", "128Mi", "1Gi", "1G", "1e3",
 * "1.5Gi") turned into integers.
 *
 * Grammar (as the API server accepts it): an optional '+' sign, a decimal number ("2", "0.5",
 * ".5", "5."), then at most one suffix: a binary one (Ki Mi Gi Ti Pi Ei), a decimal one (n u m
 * k M G T P E) or an exponent (e3, E-2). "E" alone is exa; "1E3" is an exponent.
 *
 * Arithmetic is exact; the result is rounded up to the next whole unit, as the API server does
 * ("0.0001" CPU is 1 milli-CPU, "100m" bytes is 1 byte). Negative quantities, blanks and values
 * past INT64_MAX units (whatever the exponent: "1e400", "1e99999999999") are errors, all
 * -EINVAL as the text is what is wrong, whose message quotes the text:
 *	"abc" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)
 *	"-1" must not be negative
 *	"1e30" is out of range: more than 9223372036854775807 milli-units; use a smaller value
 * Callers prefix the field they read it from. Pure functions, thread-safe.
 */
#ifndef KIYOT_QUANTITY_H
#define KIYOT_QUANTITY_H

#include <stdint.h>

#include "err.h"

/* Longest quantity text accepted, in bytes. */
#define QUANTITY_MAX_LEN 64

/* CPU-style: the quantity in thousandths ("100m" -> 100, "2" -> 2000, "0.5" -> 500). */
int quantity_parse_milli(const char *s, int64_t *milli, struct err *err);

/* Memory-style: the quantity in whole units ("128Mi" -> 134217728, "1G" -> 1000000000). */
int quantity_parse_bytes(const char *s, int64_t *bytes, struct err *err);

#endif
