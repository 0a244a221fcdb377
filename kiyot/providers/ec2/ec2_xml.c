#include "ec2_xml.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "xalloc.h"

/* Deepest element nesting under n (n itself counts 1), stopping past limit. */
static int xml_depth(const xmlNode *n, int limit)
{
	int best = 0;

	for (const xmlNode *c = n->children; c; c = c->next) {
		int d;

		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (limit <= 1)
			return limit + 1;
		d = xml_depth(c, limit - 1);
		if (d > best)
			best = d;
		if (best >= limit)
			break;
	}
	return best + 1;
}

/* Parses a document of at most EC2_MAX_RESPONSE bytes and EC2_MAX_XML_DEPTH levels. */
static int xml_load(const char *body, size_t len, xmlDoc **out, struct err *err)
{
	xmlDoc *doc;

	if (len > EC2_MAX_RESPONSE || len > INT_MAX)
		return err_set(err, EPROTO, "answer of %zu bytes is larger than %u", len,
			       EC2_MAX_RESPONSE);
	doc = xmlReadMemory(body, (int)len, "ec2.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOBLANKS | XML_PARSE_NOERROR |
				    XML_PARSE_NOWARNING | XML_PARSE_NOCDATA);
	if (!doc || !xmlDocGetRootElement(doc)) {
		xmlFreeDoc(doc);
		return err_set(err, EPROTO, "answer is not XML");
	}
	if (xml_depth(xmlDocGetRootElement(doc), EC2_MAX_XML_DEPTH) > EC2_MAX_XML_DEPTH) {
		xmlFreeDoc(doc);
		return err_set(err, EPROTO, "answer nests elements deeper than %d",
			       EC2_MAX_XML_DEPTH);
	}
	*out = doc;
	return 0;
}

/* True when n is an element of that local name, whatever its namespace. */
static int is_elem(const xmlNode *n, const char *name)
{
	return n && n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* The first child element of that local name, or NULL. */
static xmlNode *child(const xmlNode *n, const char *name)
{
	if (!n)
		return NULL;
	for (xmlNode *c = n->children; c; c = c->next)
		if (is_elem(c, name))
			return c;
	return NULL;
}

/* The next sibling element of that local name after n, or NULL. */
static xmlNode *next_elem(const xmlNode *n, const char *name)
{
	for (xmlNode *c = n->next; c; c = c->next)
		if (is_elem(c, name))
			return c;
	return NULL;
}

/* A copy of n's text content, or NULL when n is NULL. */
static char *text_of(const xmlNode *n)
{
	xmlChar *t;
	char *s;

	if (!n)
		return NULL;
	t = xmlNodeGetContent(n);
	s = xstrdup(t ? (const char *)t : "");
	xmlFree(t);
	return s;
}

/* A copy of the text of n's child of that name, or NULL. */
static char *child_text(const xmlNode *n, const char *name)
{
	return text_of(child(n, name));
}

/* The integer in n's child of that name; dflt when absent or not a number. */
static long long child_int(const xmlNode *n, const char *name, long long dflt)
{
	_cleanup_free_ char *t = child_text(n, name);
	char *end;
	long long v;

	if (!t)
		return dflt;
	errno = 0;
	v = strtoll(t, &end, 10);
	return errno || end == t || *end ? dflt : v;
}

/* True when n's child of that name says "true". */
static bool child_bool(const xmlNode *n, const char *name)
{
	_cleanup_free_ char *t = child_text(n, name);

	return t && strcmp(t, "true") == 0;
}

/* The first element named name at any depth under n (pre-order), or NULL. */
static xmlNode *find_desc(xmlNode *n, const char *name)
{
	for (xmlNode *c = n->children; c; c = c->next) {
		xmlNode *f;

		if (c->type != XML_ELEMENT_NODE)
			continue;
		if (is_elem(c, name))
			return c;
		f = find_desc(c, name);
		if (f)
			return f;
	}
	return NULL;
}

int64_t ec2_xml_time(const char *s)
{
	struct tm tm = { 0 };
	const char *rest;
	int64_t frac = 0, scale = 100000000;
	time_t secs;

	if (!s)
		return -1;
	rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!rest)
		return -1;
	if (*rest == '.') {
		while (isdigit((unsigned char)*++rest)) {
			frac += (*rest - '0') * scale;
			scale /= 10;
		}
	}
	if (*rest != 'Z' && strcmp(rest, "+00:00") != 0)
		return -1;
	/* before 1970, or past what 64 bits of nanoseconds hold (the year 2262) */
	secs = timegm(&tm);
	if (secs < 0 || secs >= INT64_MAX / 1000000000)
		return -1;
	return (int64_t)secs * 1000000000 + frac;
}

int ec2_xml_error(const char *body, size_t len, char **code, char **message, struct err *err)
{
	xmlDoc *doc;
	xmlNode *e;
	int ret = 0;

	if (xml_load(body, len, &doc, err) < 0)
		return -err->code;
	e = find_desc(xmlDocGetRootElement(doc), "Error");
	if (!e || !child(e, "Code")) {
		ret = err_set(err, ENOENT, "answer holds no <Error>");
	} else {
		*code = child_text(e, "Code");
		*message = child_text(e, "Message");
	}
	xmlFreeDoc(doc);
	return ret;
}

/* Fills tags from a <tagSet> of <item><key/><value/></item>. */
static void parse_tags(const xmlNode *set, struct ec2_tags *tags)
{
	if (!set)
		return;
	for (xmlNode *it = child(set, "item"); it; it = next_elem(it, "item")) {
		_cleanup_free_ char *k = child_text(it, "key");
		_cleanup_free_ char *v = child_text(it, "value");

		if (k && tags->n < EC2_MAX_TAGS * 4)
			ec2_tags_add(tags, k, v ? v : "");
	}
}

/* One <instancesSet><item> into *out. */
static void parse_instance(const xmlNode *it, const char *reservation, struct ec2_instance *out)
{
	_cleanup_free_ char *launch = child_text(it, "launchTime");
	_cleanup_free_ char *lifecycle = child_text(it, "instanceLifecycle");
	const xmlNode *st = child(it, "instanceState");

	memset(out, 0, sizeof(*out));
	out->instance_id = child_text(it, "instanceId");
	out->instance_type = child_text(it, "instanceType");
	out->state = child_text(st, "name");
	out->state_code = st ? (int)child_int(st, "code", -1) : -1;
	out->private_ip = child_text(it, "privateIpAddress");
	out->image_id = child_text(it, "imageId");
	out->subnet_id = child_text(it, "subnetId");
	out->client_token = child_text(it, "clientToken");
	out->reservation_id = reservation ? xstrdup(reservation) : NULL;
	out->launch_ns = launch ? ec2_xml_time(launch) : 0;
	if (out->launch_ns < 0)
		out->launch_ns = 0;
	out->spot = lifecycle && strcmp(lifecycle, "spot") == 0;
	parse_tags(child(it, "tagSet"), &out->tags);
	out->state_reason_code = child_text(child(it, "stateReason"), "code");
	out->state_reason_message = child_text(child(it, "stateReason"), "message");
}

/* Checks the root element's name; EPROTO naming what came instead. */
static int expect_root(xmlDoc *doc, const char *name, xmlNode **root, struct err *err)
{
	*root = xmlDocGetRootElement(doc);
	if (!is_elem(*root, name))
		return err_set(err, EPROTO, "expected <%s>, got <%s>", name, (*root)->name);
	return 0;
}

int ec2_xml_run_instances(const char *body, size_t len, struct ec2_instance *out, struct err *err)
{
	_cleanup_free_ char *res = NULL;
	xmlNode *root, *it;
	xmlDoc *doc;
	int ret;

	if (xml_load(body, len, &doc, err) < 0)
		return -err->code;
	ret = expect_root(doc, "RunInstancesResponse", &root, err);
	if (ret == 0) {
		it = child(child(root, "instancesSet"), "item");
		if (!it || !child(it, "instanceId")) {
			ret = err_set(err, EPROTO, "RunInstances answer lists no instance");
		} else {
			res = child_text(root, "reservationId");
			parse_instance(it, res, out);
		}
	}
	xmlFreeDoc(doc);
	return ret;
}

int ec2_xml_terminate_instances(const char *body, size_t len, char ***ids, size_t *n,
				struct err *err)
{
	xmlNode *root;
	xmlDoc *doc;
	size_t cap = 0;
	int ret;

	*ids = NULL;
	*n = 0;
	if (xml_load(body, len, &doc, err) < 0)
		return -err->code;
	ret = expect_root(doc, "TerminateInstancesResponse", &root, err);
	for (xmlNode *it = ret ? NULL : child(child(root, "instancesSet"), "item"); it;
	     it = next_elem(it, "item")) {
		char *id = child_text(it, "instanceId");

		if (!id)
			continue;
		if (*n >= EC2_MAX_IDS_PER_CALL) {
			free(id);
			ret = err_set(err, EPROTO, "more than %d instances in the answer",
				      EC2_MAX_IDS_PER_CALL);
			break;
		}
		xgrow((void **)ids, &cap, *n + 2, sizeof(**ids));
		(*ids)[(*n)++] = id;
		(*ids)[*n] = NULL;
	}
	if (ret < 0) {
		for (size_t i = 0; i < *n; i++)
			free((*ids)[i]);
		free(*ids);
		*ids = NULL;
		*n = 0;
	}
	xmlFreeDoc(doc);
	return ret;
}

/* Makes room for one more element in a growing result array, within EC2_MAX_ITEMS. */
static int grow(void **arr, size_t *n, size_t *cap, size_t sz, struct err *err)
{
	if (*n >= EC2_MAX_ITEMS)
		return err_set(err, EPROTO, "more than %d items in the answer", EC2_MAX_ITEMS);
	xgrow(arr, cap, *n + 1, sz);
	return 0;
}

int ec2_xml_describe_instances(const char *body, size_t len, struct ec2_instance **arr, size_t *n,
			       size_t *cap, char **next_token, struct err *err)
{
	xmlNode *root;
	xmlDoc *doc;
	int ret;

	*next_token = NULL;
	if (xml_load(body, len, &doc, err) < 0)
		return -err->code;
	ret = expect_root(doc, "DescribeInstancesResponse", &root, err);
	for (xmlNode *r = ret ? NULL : child(child(root, "reservationSet"), "item"); r && !ret;
	     r = next_elem(r, "item")) {
		_cleanup_free_ char *res = child_text(r, "reservationId");

		for (xmlNode *it = child(child(r, "instancesSet"), "item"); it;
		     it = next_elem(it, "item")) {
			ret = grow((void **)arr, n, cap, sizeof(**arr), err);
			if (ret < 0)
				break;
			parse_instance(it, res, &(*arr)[(*n)++]);
		}
	}
	if (ret == 0) {
		*next_token = child_text(root, "nextToken");
		if (*next_token && !**next_token)
			free(steal_ptr(*next_token));
	}
	xmlFreeDoc(doc);
	return ret;
}

/* One <instanceTypeSet><item> into *out. */
static void parse_type(const xmlNode *it, struct ec2_type_info *out)
{
	const xmlNode *gpus = child(child(it, "gpuInfo"), "gpus");

	memset(out, 0, sizeof(*out));
	out->name = child_text(it, "instanceType");
	out->vcpus = (int)child_int(child(it, "vCpuInfo"), "defaultVCpus", 0);
	out->memory_mib = child_int(child(it, "memoryInfo"), "sizeInMiB", 0);
	out->burstable = child_bool(it, "burstablePerformanceSupported");
	out->current_generation = child_bool(it, "currentGeneration");
	for (xmlNode *a =
		     child(child(child(it, "processorInfo"), "supportedArchitectures"), "item");
	     a; a = next_elem(a, "item")) {
		_cleanup_free_ char *name = text_of(a);

		if (name && strcmp(name, "x86_64") == 0)
			out->arch |= EC2_ARCH_X86_64;
		else if (name && strcmp(name, "arm64") == 0)
			out->arch |= EC2_ARCH_ARM64;
	}
	for (xmlNode *g = child(gpus, "item"); g; g = next_elem(g, "item")) {
		long long c = child_int(g, "count", 0);

		if (c > 0 && c < 1024)
			out->gpus += (int)c;
	}
}

/* One instance type item into out (as parse_type); false when it names no type. */
static bool parse_type_item(const xmlNode *it, void *out)
{
	if (!child(it, "instanceType"))
		return false;
	parse_type(it, out);
	return true;
}

/*
 * A page of a Describe* answer: the root must be root_name; each <item> of its set_name goes
 * through parse into a new slot of *arr (sz bytes each, at most EC2_MAX_ITEMS), kept when
 * parse says so; *next_token is the page's nextToken (NULL on the last page).
 */
static int parse_page(const char *body, size_t len, const char *root_name, const char *set_name,
		      bool (*parse)(const xmlNode *it, void *out), void **arr, size_t sz, size_t *n,
		      size_t *cap, char **next_token, struct err *err)
{
	xmlNode *root;
	xmlDoc *doc;
	int ret;

	*next_token = NULL;
	if (xml_load(body, len, &doc, err) < 0)
		return -err->code;
	ret = expect_root(doc, root_name, &root, err);
	for (xmlNode *it = ret ? NULL : child(child(root, set_name), "item"); it;
	     it = next_elem(it, "item")) {
		ret = grow(arr, n, cap, sz, err);
		if (ret < 0)
			break;
		if (parse(it, (char *)*arr + *n * sz))
			(*n)++;
	}
	if (ret == 0) {
		*next_token = child_text(root, "nextToken");
		if (*next_token && !**next_token)
			free(steal_ptr(*next_token));
	}
	xmlFreeDoc(doc);
	return ret;
}

int ec2_xml_instance_types(const char *body, size_t len, struct ec2_type_info **arr, size_t *n,
			   size_t *cap, char **next_token, struct err *err)
{
	return parse_page(body, len, "DescribeInstanceTypesResponse", "instanceTypeSet",
			  parse_type_item, (void **)arr, sizeof(**arr), n, cap, next_token, err);
}

/* One <spotPriceHistorySet><item> into *out; false when it lacks a type or a valid price (a
 * finite number, not negative: strtod also reads "nan" and "inf"). */
static bool parse_spot(const xmlNode *it, void *slot)
{
	struct ec2_spot_price *out = slot;

	_cleanup_free_ char *price = child_text(it, "spotPrice");
	_cleanup_free_ char *ts = child_text(it, "timestamp");
	char *end;
	double p;

	if (!price || !child(it, "instanceType"))
		return false;
	errno = 0;
	p = strtod(price, &end);
	if (errno || end == price || *end || !isfinite(p) || p < 0)
		return false;
	memset(out, 0, sizeof(*out));
	out->instance_type = child_text(it, "instanceType");
	out->availability_zone = child_text(it, "availabilityZone");
	out->price = p;
	out->timestamp_ns = ts ? ec2_xml_time(ts) : 0;
	if (out->timestamp_ns < 0)
		out->timestamp_ns = 0;
	return true;
}

int ec2_xml_spot_prices(const char *body, size_t len, struct ec2_spot_price **arr, size_t *n,
			size_t *cap, char **next_token, struct err *err)
{
	return parse_page(body, len, "DescribeSpotPriceHistoryResponse", "spotPriceHistorySet",
			  parse_spot, (void **)arr, sizeof(**arr), n, cap, next_token, err);
}

/* One subnet item: its id and zone; false when either is missing. */
static bool parse_subnet(const xmlNode *it, void *slot)
{
	struct ec2_subnet *out = slot;

	if (!child(it, "subnetId") || !child(it, "availabilityZone"))
		return false;
	out->subnet_id = child_text(it, "subnetId");
	out->availability_zone = child_text(it, "availabilityZone");
	if (out->subnet_id && out->availability_zone && *out->subnet_id && *out->availability_zone)
		return true;
	free(out->subnet_id);
	free(out->availability_zone);
	memset(out, 0, sizeof(*out));
	return false;
}

int ec2_xml_subnets(const char *body, size_t len, struct ec2_subnet **arr, size_t *n, size_t *cap,
		    char **next_token, struct err *err)
{
	return parse_page(body, len, "DescribeSubnetsResponse", "subnetSet", parse_subnet,
			  (void **)arr, sizeof(**arr), n, cap, next_token, err);
}
