/*
 * fuzz_ec2_xml: EC2's XML answers as a hostile or broken endpoint would send them. The first
 * byte picks the reader (an error body, RunInstances, DescribeInstances, DescribeInstanceTypes,
 * DescribeSpotPriceHistory, DescribeSubnets, or a timestamp), the rest is the body. Besides what the sanitizers
 * catch, it checks ec2_xml.h's promises: a refusal is EPROTO (ENOENT for an error body without
 * <Error>) with a message and nothing to free; pages stay within EC2_MAX_ITEMS and a next
 * token is never empty; an instance has its id, at most 200 tags and no negative time; a spot
 * price is a finite number of dollars, not negative; a timestamp that reads reads back the
 * same.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "providers/ec2/ec2_xml.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what, const char *body)
{
	fprintf(stderr, "%s\n%s\n", what, body);
	abort();
}

/* ret is 0, or the refusal ec2_xml.h describes. */
static void outcome(int ret, const struct err *err, int other, const char *body)
{
	if (ret == 0)
		return;
	if (ret != -err->code || (err->code != EPROTO && err->code != other) || !err->msg[0])
		fail("refused without EPROTO and a message", body);
}

static void check_instance(const struct ec2_instance *in, const char *body)
{
	if (in->launch_ns < 0 || in->tags.n > EC2_MAX_TAGS * 4)
		fail("an instance out of bounds", body);
	for (size_t i = 0; i < in->tags.n; i++)
		if (!in->tags.items[i].key || !in->tags.items[i].value)
			fail("a tag without key or value", body);
}

static void check_token(const char *token, const char *body)
{
	if (token && !*token)
		fail("an empty next token", body);
}

/* A timestamp that reads is written again in EC2's form and reads the same. */
static void check_time(const char *text)
{
	int64_t ns = ec2_xml_time(text), again;
	time_t s = (time_t)(ns / 1000000000);
	char out[64];
	struct tm tm;

	if (ns < 0)
		return;
	if (!gmtime_r(&s, &tm) || tm.tm_year + 1900 > 9999)
		fail("a time past year 9999", text);
	snprintf(out, sizeof(out), "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (long long)(ns % 1000000000));
	again = ec2_xml_time(out);
	if (again != ns) {
		fprintf(stderr, "%s: %lld, written %s: %lld\n", text, (long long)ns, out,
			(long long)again);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_free_ char *body = NULL;
	struct err err = ERR_INIT;
	char *a = NULL, *b = NULL, *token = NULL;
	size_t n = 0, cap = 0, len;
	int ret;

	if (size < 1)
		return 0;
	len = size - 1;
	body = xmalloc(len + 1); /* NUL-terminated for the timestamp, NULs inside kept */
	memcpy(body, data + 1, len);
	body[len] = '\0';
	switch (data[0] % 9) {
	case 0:
		ret = ec2_xml_error(body, len, &a, &b, &err);
		outcome(ret, &err, ENOENT, body);
		if (ret == 0 && !a)
			fail("an error without a code", body);
		free(a);
		free(b);
		break;
	case 1: {
		struct ec2_instance in = { 0 };

		ret = ec2_xml_run_instances(body, len, &in, &err);
		outcome(ret, &err, EPROTO, body);
		if (ret == 0 && !in.instance_id)
			fail("an instance without an id", body);
		check_instance(&in, body);
		ec2_instance_release(&in);
		break;
	}
	case 2: {
		struct ec2_instance *arr = NULL;

		ret = ec2_xml_describe_instances(body, len, &arr, &n, &cap, &token, &err);
		outcome(ret, &err, EPROTO, body);
		for (size_t i = 0; i < n; i++)
			check_instance(&arr[i], body);
		ec2_instances_free(arr, n);
		break;
	}
	case 3: {
		struct ec2_type_info *arr = NULL;

		ret = ec2_xml_instance_types(body, len, &arr, &n, &cap, &token, &err);
		outcome(ret, &err, EPROTO, body);
		for (size_t i = 0; i < n; i++)
			if (!arr[i].name || arr[i].gpus < 0)
				fail("an instance type out of bounds", body);
		ec2_type_infos_free(arr, n);
		break;
	}
	case 4: {
		struct ec2_spot_price *arr = NULL;

		ret = ec2_xml_spot_prices(body, len, &arr, &n, &cap, &token, &err);
		outcome(ret, &err, EPROTO, body);
		for (size_t i = 0; i < n; i++)
			if (!arr[i].instance_type || !isfinite(arr[i].price) || arr[i].price < 0 ||
			    arr[i].timestamp_ns < 0)
				fail("a spot price out of bounds", body);
		ec2_spot_prices_free(arr, n);
		break;
	}
	case 6: {
		char **ids = NULL;

		ret = ec2_xml_terminate_instances(body, len, &ids, &n, &err);
		outcome(ret, &err, EPROTO, body);
		if (n > EC2_MAX_IDS_PER_CALL || (n && ids[n] != NULL))
			fail("terminated ids out of bounds", body);
		for (size_t i = 0; i < n; i++)
			free(ids[i]);
		free(ids);
		n = 0;
		break;
	}
	case 8: {
		struct ec2_subnet *arr = NULL;

		ret = ec2_xml_subnets(body, len, &arr, &n, &cap, &token, &err);
		outcome(ret, &err, EPROTO, body);
		for (size_t i = 0; i < n; i++)
			if (!arr[i].subnet_id || !*arr[i].subnet_id || !arr[i].availability_zone ||
			    !*arr[i].availability_zone)
				fail("a subnet without its id or zone", body);
		ec2_subnets_free(arr, n);
		break;
	}
	case 7: {
		/* an InvalidInstanceID.NotFound message: only ids asked are marked, once */
		const char *ids[] = { "i-1", "i-0123456789abcdef0", "i-abc" };
		enum ec2_term out[3] = { EC2_TERM_LEFT, EC2_TERM_LEFT, EC2_TERM_LEFT };
		size_t k = ec2_not_found_ids(body, ids, 3, out), marked = 0;

		for (size_t i = 0; i < 3; i++)
			marked += out[i] == EC2_TERM_GONE;
		if (k != marked || k > 3)
			fail("not-found ids miscounted", body);
		return 0;
	}
	default:
		check_time(body);
		return 0;
	}
	if (n > EC2_MAX_ITEMS)
		fail("more items than EC2_MAX_ITEMS", body);
	check_token(token, body);
	free(token);
	return 0;
}
