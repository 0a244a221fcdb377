#include "quantity.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/*
 * A parsed quantity as exact decimal digits: value = 0.d[0]d[1]...d[n-1] * 10^ipos, or, put
 * another way, the first ipos digits are the integer part. Binary suffixes are applied by
 * doubling the digit string, so no precision is ever lost.
 */
struct qnum {
	unsigned char d[QUANTITY_MAX_LEN + 32]; /* 60 doublings add at most 19 digits */
	int n;
	int ipos;
};

/* One suffix: its text, its power of ten and its power of two. */
struct qsuffix {
	const char *text;
	int exp10;
	int exp2;
};

/* The suffixes of the Kubernetes quantity grammar; "" is a plain number. */
static const struct qsuffix qsuffixes[] = {
	{ "", 0, 0 },	 { "n", -9, 0 },  { "u", -6, 0 },  { "m", -3, 0 },
	{ "k", 3, 0 },	 { "M", 6, 0 },	  { "G", 9, 0 },   { "T", 12, 0 },
	{ "P", 15, 0 },	 { "E", 18, 0 },  { "Ki", 0, 10 }, { "Mi", 0, 20 },
	{ "Gi", 0, 30 }, { "Ti", 0, 40 }, { "Pi", 0, 50 }, { "Ei", 0, 60 },
};

/* Exponents past this magnitude are clamped: the value over- or underflows anyway. */
#define QEXP_CLAMP 10000

/* Parses an exponent suffix "e<int>" / "E<int>"; returns false when r is not one. */
static bool qparse_exponent(const char *r, int *exp10)
{
	bool neg = false;
	int v = 0;

	if (*r != 'e' && *r != 'E')
		return false;
	r++;
	if (*r == '+' || *r == '-')
		neg = *r++ == '-';
	if (*r < '0' || *r > '9')
		return false;
	for (; *r >= '0' && *r <= '9'; r++) {
		if (v < QEXP_CLAMP)
			v = v * 10 + (*r - '0');
	}
	if (*r)
		return false;
	*exp10 = neg ? -v : v;
	return true;
}

/* Reads the unsigned number and suffix of s into q; returns false when s is not a quantity. */
static bool qparse(const char *s, struct qnum *q, int *exp10, int *exp2)
{
	bool dot = false;
	const char *p = s;

	q->n = 0;
	q->ipos = 0;
	for (; (*p >= '0' && *p <= '9') || *p == '.'; p++) {
		if (*p == '.') {
			if (dot)
				return false;
			dot = true;
			continue;
		}
		q->d[q->n++] = (unsigned char)(*p - '0');
		if (!dot)
			q->ipos++;
	}
	if (q->n == 0)
		return false;
	for (size_t i = 0; i < sizeof(qsuffixes) / sizeof(qsuffixes[0]); i++) {
		if (strcmp(p, qsuffixes[i].text) == 0) {
			*exp10 = qsuffixes[i].exp10;
			*exp2 = qsuffixes[i].exp2;
			return true;
		}
	}
	*exp2 = 0;
	return qparse_exponent(p, exp10);
}

/* Multiplies q by two, growing it by one leading digit on carry. */
static void qdouble(struct qnum *q)
{
	int carry = 0;

	for (int i = q->n - 1; i >= 0; i--) {
		int v = q->d[i] * 2 + carry;

		q->d[i] = (unsigned char)(v % 10);
		carry = v / 10;
	}
	if (carry) {
		memmove(q->d + 1, q->d, (size_t)q->n);
		q->d[0] = (unsigned char)carry;
		q->n++;
		q->ipos++;
	}
}

/*
 * Rounds q up to an integer; returns false when it exceeds INT64_MAX. Leading zeros are dropped
 * first so that ipos counts significant integer digits.
 */
static bool qround_up(struct qnum *q, int64_t *out)
{
	unsigned long long v = 0;
	bool frac = false;
	int skip = 0;

	while (skip < q->n && q->d[skip] == 0)
		skip++;
	if (skip == q->n) {
		*out = 0;
		return true;
	}
	q->ipos -= skip;
	if (q->ipos > 19)
		return false;
	for (int i = 0; i < q->ipos; i++) {
		int k = skip + i;

		v = v * 10 + (k < q->n ? q->d[k] : 0);
	}
	for (int k = skip + (q->ipos > 0 ? q->ipos : 0); k < q->n; k++)
		frac |= q->d[k] != 0;
	if (v > (unsigned long long)INT64_MAX || (frac && v == (unsigned long long)INT64_MAX))
		return false;
	*out = (int64_t)(v + (frac ? 1 : 0));
	return true;
}

/* Parses s scaled by 10^scale (3 for milli-units), rounding up; `unit` names the result. */
static int quantity_parse_scaled(const char *s, int scale, const char *unit, int64_t *out,
				 struct err *err)
{
	struct qnum q;
	int exp10 = 0, exp2 = 0;
	bool neg = false;
	const char *p = s;
	int64_t v;

	if (!s || !*s)
		return err_set(err, EINVAL, "empty quantity (examples: 500m, 2, 128Mi, 1Gi)");
	if (strlen(s) > QUANTITY_MAX_LEN)
		return err_set(err, EINVAL, "quantity is longer than %d characters",
			       QUANTITY_MAX_LEN);
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (!qparse(p, &q, &exp10, &exp2))
		return err_set(err, EINVAL,
			       "\"%s\" is not a quantity (examples: 500m, 2, 128Mi, 1Gi)", s);
	q.ipos += exp10 + scale;
	for (int i = 0; i < exp2; i++)
		qdouble(&q);
	if (!qround_up(&q, &v)) {
		if (neg)
			return err_set(err, EINVAL, "\"%s\" must not be negative", s);
		return err_set(err, EINVAL,
			       "\"%s\" is out of range: more than %lld %s; use a smaller value", s,
			       (long long)INT64_MAX, unit);
	}
	if (neg && v != 0)
		return err_set(err, EINVAL, "\"%s\" must not be negative", s);
	*out = v;
	return 0;
}

/* CPU quantities are kept in milli-units, the API server's own precision for CPU. */
int quantity_parse_milli(const char *s, int64_t *milli, struct err *err)
{
	return quantity_parse_scaled(s, 3, "milli-units", milli, err);
}

/* Memory quantities are whole bytes; fractions of a byte round up. */
int quantity_parse_bytes(const char *s, int64_t *bytes, struct err *err)
{
	return quantity_parse_scaled(s, 0, "bytes", bytes, err);
}
