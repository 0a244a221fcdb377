/*
 * ec2_actions.c: the EC2 actions kiyot calls, and freeing what they return (see ec2.h).
 */
#include "ec2_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "codec.h"
#include "ec2_xml.h"
#include "xalloc.h"

/* A plain validation error of a request, before anything is sent. */
static int invalid(enum ec2_errclass *cls, struct err *err, const char *action, const char *what)
{
	err_set(err, EINVAL, "ec2 %s: %s", action, what);
	return ec2_fail(EC2_INVALID, cls, err);
}

/* Checks a RunInstances spec against EC2's rules that we can know in advance. */
static const char *run_spec_problem(const struct ec2_run_spec *s)
{
	if (!s->client_token || !*s->client_token || strlen(s->client_token) > EC2_MAX_CLIENT_TOKEN)
		return "a ClientToken of 1 to 64 characters is required";
	for (const char *p = s->client_token; *p; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			return "the ClientToken must be printable ASCII";
	if (!s->image_id || !*s->image_id)
		return "no image (AMI) id; set it in the ec2 provider configuration";
	if (!s->instance_type || !*s->instance_type)
		return "no instance type";
	if (s->user_data_len > EC2_MAX_USER_DATA)
		return "user data is larger than EC2's 16 KiB";
	if (s->tags && s->tags->n > EC2_MAX_TAGS)
		return "more than 50 tags";
	return NULL;
}

int ec2_run_instance(struct ec2_client *c, const struct ec2_run_spec *spec,
		     struct ec2_instance *out, enum ec2_errclass *cls, struct err *err)
{
	_cleanup_free_ char *body = NULL;
	const char *problem = run_spec_problem(spec);
	struct buf f = BUF_INIT;
	size_t len;
	int ret;

	if (problem)
		return invalid(cls, err, "RunInstances", problem);
	ec2_form_add(&f, "ClientToken", spec->client_token);
	ec2_form_add(&f, "ImageId", spec->image_id);
	ec2_form_add(&f, "InstanceType", spec->instance_type);
	ec2_form_add(&f, "MinCount", "1");
	ec2_form_add(&f, "MaxCount", "1");
	if (spec->subnet_id && *spec->subnet_id)
		ec2_form_add(&f, "SubnetId", spec->subnet_id);
	for (size_t i = 0; i < spec->n_security_group_ids; i++)
		ec2_form_addf(&f, spec->security_group_ids[i], "SecurityGroupId.%zu", i + 1);
	if (spec->iam_instance_profile && *spec->iam_instance_profile)
		ec2_form_add(&f,
			     strncmp(spec->iam_instance_profile, "arn:", 4) == 0
				     ? "IamInstanceProfile.Arn"
				     : "IamInstanceProfile.Name",
			     spec->iam_instance_profile);
	if (spec->user_data && spec->user_data_len) {
		_cleanup_free_ char *b64 = b64_encode(spec->user_data, spec->user_data_len);

		ec2_form_add(&f, "UserData", b64);
	}
	/* the metadata service with session tokens only (no IMDSv1 for a request forged through
	 * a pod), and their answers go no further than the instance itself */
	ec2_form_add(&f, "MetadataOptions.HttpEndpoint", "enabled");
	ec2_form_add(&f, "MetadataOptions.HttpTokens", "required");
	ec2_form_add(&f, "MetadataOptions.HttpPutResponseHopLimit", "1");
	if (spec->tags && spec->tags->n) {
		ec2_form_add(&f, "TagSpecification.1.ResourceType", "instance");
		ec2_form_tags(&f, "TagSpecification.1.Tag", spec->tags);
	}
	if (spec->spot) {
		ec2_form_add(&f, "InstanceMarketOptions.MarketType", "spot");
		ec2_form_add(&f, "InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time");
		ec2_form_add(&f, "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
			     "terminate");
	}
	ret = ec2_call(c, "RunInstances", buf_str(&f), &body, &len, cls, err);
	buf_release(&f);
	if (ret < 0)
		return ret;
	if (ec2_xml_run_instances(body, len, out, err) < 0) {
		err_wrap(err, "ec2 RunInstances");
		return ec2_fail(EC2_INVALID, cls, err);
	}
	return 0;
}

/* The accumulator of DescribeInstances pages. */
struct inst_acc {
	struct ec2_instance *arr;
	size_t n, cap;
};

static int inst_page(const char *body, size_t len, void *acc, char **next, struct err *err)
{
	struct inst_acc *a = acc;

	return ec2_xml_describe_instances(body, len, &a->arr, &a->n, &a->cap, next, err);
}

int ec2_describe_instances(struct ec2_client *c, const struct ec2_describe_query *q,
			   struct ec2_instance **out, size_t *n, enum ec2_errclass *cls,
			   struct err *err)
{
	struct inst_acc acc = { NULL, 0, 0 };
	struct pager pg = { "DescribeInstances", inst_page, &acc };
	struct buf f = BUF_INIT;
	int ret;

	if (q->n_instance_ids > EC2_MAX_IDS_PER_CALL)
		return invalid(cls, err, "DescribeInstances", "more than 1000 instance ids");
	for (size_t i = 0; i < q->n_filters; i++) {
		ec2_form_addf(&f, q->filters[i].name, "Filter.%zu.Name", i + 1);
		for (size_t j = 0; j < q->filters[i].n_values; j++)
			ec2_form_addf(&f, q->filters[i].values[j], "Filter.%zu.Value.%zu", i + 1,
				      j + 1);
	}
	for (size_t i = 0; i < q->n_instance_ids; i++)
		ec2_form_addf(&f, q->instance_ids[i], "InstanceId.%zu", i + 1);
	if (!q->n_instance_ids) {
		int ps = q->page_size ? q->page_size : 1000;
		char num[16];

		snprintf(num, sizeof(num), "%d", ps < 5 ? 5 : ps > 1000 ? 1000 : ps);
		ec2_form_add(&f, "MaxResults", num);
	}
	ret = ec2_paginate(c, &pg, buf_str(&f), cls, err);
	buf_release(&f);
	if (ret < 0) {
		ec2_instances_free(acc.arr, acc.n);
		return ret;
	}
	*out = acc.arr;
	*n = acc.n;
	return 0;
}

/* Marks out[i] for every id the answer lists; those it leaves out stay as they were. */
static void mark_listed(char **listed, size_t n_listed, const char *const *ids, size_t n,
			enum ec2_term *out)
{
	for (size_t i = 0; i < n_listed; i++)
		for (size_t j = 0; j < n; j++)
			if (out[j] == EC2_TERM_LEFT && strcmp(listed[i], ids[j]) == 0)
				out[j] = EC2_TERM_DONE;
}

/* One TerminateInstances of the ids not settled yet; 0, or the failure with *fault. */
static int terminate_once(struct ec2_client *c, const char *const *ids, size_t n,
			  enum ec2_term *out, enum ec2_errclass *cls, struct ec2_fault *fault,
			  struct err *err)
{
	_cleanup_free_ char *body = NULL;
	char **listed = NULL;
	size_t len, n_listed = 0, k = 0;
	struct buf f = BUF_INIT;
	int ret;

	for (size_t i = 0; i < n; i++)
		if (out[i] == EC2_TERM_LEFT)
			ec2_form_addf(&f, ids[i], "InstanceId.%zu", ++k);
	ret = ec2_call_fault(c, "TerminateInstances", buf_str(&f), &body, &len, cls, fault, err);
	buf_release(&f);
	if (ret < 0)
		return ret;
	if (ec2_xml_terminate_instances(body, len, &listed, &n_listed, err) < 0) {
		err_wrap(err, "ec2 TerminateInstances");
		return ec2_fail(EC2_INVALID, cls, err);
	}
	mark_listed(listed, n_listed, ids, n, out);
	for (size_t i = 0; i < n_listed; i++)
		free(listed[i]);
	free(listed);
	return 0;
}

int ec2_terminate_instances(struct ec2_client *c, const char *const *ids, size_t n,
			    enum ec2_term *out, enum ec2_errclass *cls, struct err *err)
{
	size_t left = n;
	int ret = 0;

	if (cls)
		*cls = EC2_OK;
	if (n == 0 || n > EC2_MAX_IDS_PER_CALL)
		return invalid(cls, err, "TerminateInstances", "1 to 1000 instance ids are needed");
	for (size_t i = 0; i < n; i++)
		out[i] = EC2_TERM_LEFT;
	/* each round settles at least one id, or ends */
	while (left) {
		struct ec2_fault fault = { NULL, NULL };
		size_t gone;

		ret = terminate_once(c, ids, n, out, cls, &fault, err);
		if (ret == 0) {
			ec2_fault_release(&fault);
			break;
		}
		gone = fault.code && strcmp(fault.code, "InvalidInstanceID.NotFound") == 0
			       ? ec2_not_found_ids(fault.message, ids, n, out)
			       : 0;
		ec2_fault_release(&fault);
		if (!gone)
			break;
		err_clear(err);
		left -= gone;
		ret = 0;
	}
	left = 0;
	for (size_t i = 0; i < n; i++)
		left += out[i] == EC2_TERM_LEFT;
	if (ret == 0 && left) {
		err_set(err, EIO,
			"ec2 TerminateInstances: the answer did not list %zu of the instances",
			left);
		ret = ec2_fail(EC2_RETRY, cls, err);
	}
	return ret;
}

int ec2_create_tags(struct ec2_client *c, const char *const *resource_ids, size_t n,
		    const struct ec2_tags *tags, enum ec2_errclass *cls, struct err *err)
{
	_cleanup_free_ char *body = NULL;
	struct buf f = BUF_INIT;
	size_t len;
	int ret;

	if (!tags || tags->n == 0 || tags->n > EC2_MAX_TAGS)
		return invalid(cls, err, "CreateTags", "1 to 50 tags are needed");
	if (ec2_form_ids(&f, "ResourceId", resource_ids, n) < 0) {
		buf_release(&f);
		return invalid(cls, err, "CreateTags", "1 to 1000 resource ids are needed");
	}
	ec2_form_tags(&f, "Tag", tags);
	ret = ec2_call(c, "CreateTags", buf_str(&f), &body, &len, cls, err);
	buf_release(&f);
	return ret;
}

int ec2_delete_tags(struct ec2_client *c, const char *const *resource_ids, size_t n,
		    const char *const *keys, size_t n_keys, enum ec2_errclass *cls, struct err *err)
{
	_cleanup_free_ char *body = NULL;
	struct buf f = BUF_INIT;
	size_t len;
	int ret;

	if (!keys || n_keys == 0 || n_keys > EC2_MAX_TAGS)
		return invalid(cls, err, "DeleteTags", "1 to 50 tag keys are needed");
	if (ec2_form_ids(&f, "ResourceId", resource_ids, n) < 0) {
		buf_release(&f);
		return invalid(cls, err, "DeleteTags", "1 to 1000 resource ids are needed");
	}
	for (size_t i = 0; i < n_keys; i++)
		ec2_form_addf(&f, keys[i], "Tag.%zu.Key", i + 1);
	ret = ec2_call(c, "DeleteTags", buf_str(&f), &body, &len, cls, err);
	buf_release(&f);
	return ret;
}

/* The accumulator of DescribeInstanceTypes pages. */
struct type_acc {
	struct ec2_type_info *arr;
	size_t n, cap;
};

static int type_page(const char *body, size_t len, void *acc, char **next, struct err *err)
{
	struct type_acc *a = acc;

	return ec2_xml_instance_types(body, len, &a->arr, &a->n, &a->cap, next, err);
}

int ec2_describe_instance_types(struct ec2_client *c, struct ec2_type_info **out, size_t *n,
				enum ec2_errclass *cls, struct err *err)
{
	struct type_acc acc = { NULL, 0, 0 };
	struct pager pg = { "DescribeInstanceTypes", type_page, &acc };
	int ret = ec2_paginate(c, &pg, "MaxResults=100", cls, err);

	if (ret < 0) {
		ec2_type_infos_free(acc.arr, acc.n);
		return ret;
	}
	*out = acc.arr;
	*n = acc.n;
	return 0;
}

/* The accumulator of DescribeSpotPriceHistory pages. */
struct spot_acc {
	struct ec2_spot_price *arr;
	size_t n, cap;
};

static int spot_page(const char *body, size_t len, void *acc, char **next, struct err *err)
{
	struct spot_acc *a = acc;

	return ec2_xml_spot_prices(body, len, &a->arr, &a->n, &a->cap, next, err);
}

/* Orders by type, then latest first, then cheapest first. */
static int spot_cmp(const void *pa, const void *pb)
{
	const struct ec2_spot_price *a = pa, *b = pb;
	int r = strcmp(a->instance_type, b->instance_type);

	if (r)
		return r;
	if (a->timestamp_ns != b->timestamp_ns)
		return a->timestamp_ns > b->timestamp_ns ? -1 : 1;
	return (a->price > b->price) - (a->price < b->price);
}

/* By type, then zone, then latest first (ties: the lower price). */
static int spot_zone_cmp(const void *pa, const void *pb)
{
	const struct ec2_spot_price *a = pa, *b = pb;
	int r = strcmp(a->instance_type, b->instance_type);

	if (r)
		return r;
	r = strcmp(a->availability_zone ? a->availability_zone : "",
		   b->availability_zone ? b->availability_zone : "");
	if (r)
		return r;
	return spot_cmp(pa, pb);
}

/* Whether two entries are of the same type (and, by_zone, the same zone). */
static bool spot_same(const struct ec2_spot_price *a, const struct ec2_spot_price *b, bool by_zone)
{
	if (strcmp(a->instance_type, b->instance_type) != 0)
		return false;
	return !by_zone || strcmp(a->availability_zone ? a->availability_zone : "",
				  b->availability_zone ? b->availability_zone : "") == 0;
}

/* Keeps the first entry of each type (by_zone: of each type and zone) of a sorted array,
 * freeing the rest; returns the count. */
static size_t spot_reduce(struct ec2_spot_price *a, size_t n, bool by_zone)
{
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		if (w && spot_same(&a[w - 1], &a[i], by_zone)) {
			free(a[i].instance_type);
			free(a[i].availability_zone);
			continue;
		}
		a[w++] = a[i];
	}
	return w;
}

static int describe_spot(struct ec2_client *c, const char *const *types, size_t n_types,
			 const char *availability_zone, bool by_zone, struct ec2_spot_price **out,
			 size_t *n, enum ec2_errclass *cls, struct err *err)
{
	struct spot_acc acc = { NULL, 0, 0 };
	struct pager pg = { "DescribeSpotPriceHistory", spot_page, &acc };
	struct buf f = BUF_INIT;
	char now[40];
	int ret;

	clock_rfc3339nano(clock_now_ns(), now, sizeof(now));
	ec2_form_add(&f, "ProductDescription.1", "Linux/UNIX");
	ec2_form_add(&f, "StartTime", now);
	ec2_form_add(&f, "MaxResults", "1000");
	if (availability_zone && *availability_zone)
		ec2_form_add(&f, "AvailabilityZone", availability_zone);
	for (size_t i = 0; i < n_types; i++)
		ec2_form_addf(&f, types[i], "InstanceType.%zu", i + 1);
	ret = ec2_paginate(c, &pg, buf_str(&f), cls, err);
	buf_release(&f);
	if (ret < 0) {
		ec2_spot_prices_free(acc.arr, acc.n);
		return ret;
	}
	if (acc.n)
		qsort(acc.arr, acc.n, sizeof(*acc.arr), by_zone ? spot_zone_cmp : spot_cmp);
	*n = spot_reduce(acc.arr, acc.n, by_zone);
	*out = acc.arr;
	return 0;
}

int ec2_describe_spot_prices(struct ec2_client *c, const char *const *types, size_t n_types,
			     const char *availability_zone, struct ec2_spot_price **out, size_t *n,
			     enum ec2_errclass *cls, struct err *err)
{
	return describe_spot(c, types, n_types, availability_zone, false, out, n, cls, err);
}

int ec2_describe_spot_prices_by_zone(struct ec2_client *c, const char *const *types, size_t n_types,
				     struct ec2_spot_price **out, size_t *n, enum ec2_errclass *cls,
				     struct err *err)
{
	return describe_spot(c, types, n_types, NULL, true, out, n, cls, err);
}

void ec2_instance_release(struct ec2_instance *i)
{
	free(i->instance_id);
	free(i->instance_type);
	free(i->state);
	free(i->private_ip);
	free(i->image_id);
	free(i->subnet_id);
	free(i->client_token);
	free(i->reservation_id);
	free(i->state_reason_code);
	free(i->state_reason_message);
	ec2_tags_release(&i->tags);
	memset(i, 0, sizeof(*i));
}

void ec2_instances_free(struct ec2_instance *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ec2_instance_release(&a[i]);
	free(a);
}

void ec2_type_infos_free(struct ec2_type_info *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(a[i].name);
	free(a);
}

void ec2_spot_prices_free(struct ec2_spot_price *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(a[i].instance_type);
		free(a[i].availability_zone);
	}
	free(a);
}

/* The accumulator of DescribeSubnets pages. */
struct subnet_acc {
	struct ec2_subnet *arr;
	size_t n, cap;
};

static int subnet_page(const char *body, size_t len, void *acc, char **next, struct err *err)
{
	struct subnet_acc *a = acc;

	return ec2_xml_subnets(body, len, &a->arr, &a->n, &a->cap, next, err);
}

int ec2_describe_subnets(struct ec2_client *c, const char *const *ids, size_t n_ids,
			 struct ec2_subnet **out, size_t *n, enum ec2_errclass *cls,
			 struct err *err)
{
	struct subnet_acc acc = { NULL, 0, 0 };
	struct pager pg = { "DescribeSubnets", subnet_page, &acc };
	struct buf f = BUF_INIT;
	int ret;

	if (ec2_form_ids(&f, "SubnetId", ids, n_ids) < 0) {
		buf_release(&f);
		return err_set(err, EINVAL, "ec2 DescribeSubnets: 1 to %d subnet ids, not %zu",
			       EC2_MAX_IDS_PER_CALL, n_ids);
	}
	ret = ec2_paginate(c, &pg, buf_str(&f), cls, err);
	buf_release(&f);
	if (ret < 0) {
		ec2_subnets_free(acc.arr, acc.n);
		return ret;
	}
	*out = acc.arr;
	*n = acc.n;
	return 0;
}

void ec2_subnets_free(struct ec2_subnet *a, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(a[i].subnet_id);
		free(a[i].availability_zone);
	}
	free(a);
}
