/*
 * Unit tests for kiyot/providers/ec2/provider_ec2.c: cells as EC2 instances, against a fake
 * EC2 on 127.0.0.1 (test/fixtures/ec2/httpstub.h with a handler) that keeps instances in
 * memory and answers RunInstances, DescribeInstances (the filters kiyot sends) and
 * TerminateInstances the way EC2's Query API does. A launch is tagged and idempotent by its
 * ClientToken, moves to the next type when one has no capacity, and waits for the instance to
 * run with an address; list and terminate touch only the cluster's instances.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>

#include "../fixtures/ec2/httpstub.h"
#include "buf.h"
#include "clock.h"
#include "fsutil.h"
#include "providers/ec2/ec2.h"
#include "providers/provider.h"
#include "xalloc.h"

#define CLUSTER "c-test"
#define MAX_INSTANCES 16
#define MAX_PARAMS 96

/* ---- the fake EC2 ---- */

struct instance {
	char id[32], type[32], state[16], ip[24], token[80];
	char cluster[64], cell[64], uid[64];
	char node[64]; /* its EC2_TAG_NODE, "" when it has none */
	char user_data[512];
	const char *reason; /* its stateReason's code, or NULL */
	int hidden;	    /* not known yet to DescribeInstances and TerminateInstances */
	char subnet[32];
	int spot;
};

enum after_launch {
	RUNS,	    /* pending, then running at the first DescribeInstances */
	STAYS,	    /* pending for ever */
	TERMINATES, /* shutting down at the first DescribeInstances (a failed boot) */
	RECLAIMED,  /* terminated at the first one, as a spot instance reclaimed in its boot */
};

struct fake_ec2 {
	pthread_mutex_t lock;
	struct instance inst[MAX_INSTANCES];
	size_t n;
	const char *no_capacity[4]; /* instance types EC2 has no capacity for */
	const char *full_subnet;    /* a subnet with no capacity for any type */
	int no_spot;		    /* no spot capacity for any type */
	enum after_launch after;
	int runs, describes, terminates; /* calls of each action */
	char terminated[256];		 /* the ids of the last TerminateInstances, ' '-separated */
	char *xml;			 /* the last answer (the stub sends it after the handler) */
	const char *term_fault;		 /* TerminateInstances answers this error body */
	int hide_new;			 /* new instances are hidden (eventual consistency) */
	int subnet_calls;		 /* DescribeSubnets asked */
	int subnets_fail;		 /* DescribeSubnets answers an error */
};

struct param {
	char key[96];
	char value[512];
};

static void decode(const char *s, size_t n, char *out, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < size; i++) {
		unsigned int c;

		if (s[i] == '%' && i + 2 < n && sscanf(s + i + 1, "%2x", &c) == 1) {
			out[o++] = (char)c;
			i += 2;
		} else {
			out[o++] = s[i] == '+' ? ' ' : s[i];
		}
	}
	out[o] = '\0';
}

/* Splits a form body into its decoded pairs. */
static size_t parse_form(const char *body, struct param *p, size_t max)
{
	size_t n = 0;

	for (const char *s = body; *s && n < max;) {
		size_t len = strcspn(s, "&");
		const char *eq = memchr(s, '=', len);

		if (eq) {
			decode(s, (size_t)(eq - s), p[n].key, sizeof(p[n].key));
			decode(eq + 1, len - (size_t)(eq + 1 - s), p[n].value, sizeof(p[n].value));
			n++;
		}
		s += len + (s[len] == '&');
	}
	return n;
}

static const char *param(const struct param *p, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(p[i].key, key) == 0)
			return p[i].value;
	return NULL;
}

/* The value of the tag key of a RunInstances request, or "". */
static const char *run_tag(const struct param *p, size_t n, const char *key)
{
	for (size_t i = 1; i <= EC2_MAX_TAGS; i++) {
		char k[64], v[64];
		const char *got;

		snprintf(k, sizeof(k), "TagSpecification.1.Tag.%zu.Key", i);
		snprintf(v, sizeof(v), "TagSpecification.1.Tag.%zu.Value", i);
		got = param(p, n, k);
		if (!got)
			break;
		if (strcmp(got, key) == 0)
			return param(p, n, v);
	}
	return "";
}

static char *item_xml(const struct instance *in)
{
	_cleanup_free_ char *reason =
		in->reason ? xasprintf("<stateReason><code>%s</code><message>%s: Spot instance "
				       "termination</message></stateReason>",
				       in->reason, in->reason)
			   : xstrdup("");
	_cleanup_free_ char *node = in->node[0] ? xasprintf("<item><key>" EC2_TAG_NODE
							    "</key><value>%s</value></item>",
							    in->node)
						: xstrdup("");

	return xasprintf("<item><instanceId>%s</instanceId><instanceState><code>0</code><name>%s"
			 "</name></instanceState>%s<instanceType>%s</instanceType><launchTime>"
			 "2020-12-01T10:20:30.000Z</launchTime><privateIpAddress>%s"
			 "</privateIpAddress><clientToken>%s</clientToken><tagSet>"
			 "<item><key>" EC2_TAG_CLUSTER_ID "</key><value>%s</value></item>"
			 "<item><key>" EC2_TAG_CELL_ID "</key><value>%s</value></item>"
			 "<item><key>" EC2_TAG_POD_UID "</key><value>%s</value></item>%s"
			 "</tagSet></item>",
			 in->id, in->state, reason, in->type, in->ip, in->token, in->cluster,
			 in->cell, in->uid, node);
}

static int one_of(const char *v, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(v, *list) == 0)
			return 1;
	return 0;
}

/* The values of filter name in a DescribeInstances request (NULL-terminated), or NULL. */
static int filter_values(const struct param *p, size_t n, const char *name, const char **out,
			 size_t max)
{
	for (size_t f = 1; f <= 8; f++) {
		char k[64];
		const char *got;
		size_t m = 0;

		snprintf(k, sizeof(k), "Filter.%zu.Name", f);
		got = param(p, n, k);
		if (!got)
			return 0;
		if (strcmp(got, name) != 0)
			continue;
		for (size_t v = 1; m + 1 < max; v++) {
			snprintf(k, sizeof(k), "Filter.%zu.Value.%zu", f, v);
			if (!(out[m] = param(p, n, k)))
				break;
			m++;
		}
		out[m] = NULL;
		return 1;
	}
	return 0;
}

static int matches(const struct instance *in, const struct param *p, size_t n)
{
	static const struct {
		const char *name;
		size_t offset;
	} filters[] = {
		{ "tag:" EC2_TAG_CLUSTER_ID, offsetof(struct instance, cluster) },
		{ "tag:" EC2_TAG_CELL_ID, offsetof(struct instance, cell) },
		{ "instance-id", offsetof(struct instance, id) },
		{ "instance-state-name", offsetof(struct instance, state) },
	};

	for (size_t i = 0; i < ARRAY_SIZE(filters); i++) {
		const char *values[128];

		if (filter_values(p, n, filters[i].name, values, ARRAY_SIZE(values)) &&
		    !one_of((const char *)in + filters[i].offset, values))
			return 0;
	}
	return 1;
}

static void answer(struct fake_ec2 *e, struct stub_reply *out, int status, char *xml)
{
	free(e->xml);
	e->xml = xml;
	*out = (struct stub_reply){ status, xml, NULL };
}

static void run_instances(struct fake_ec2 *e, const struct param *p, size_t n,
			  struct stub_reply *out)
{
	const char *type = param(p, n, "InstanceType");
	const char *token = param(p, n, "ClientToken");
	struct instance *in = NULL;
	_cleanup_free_ char *item = NULL;

	e->runs++;
	const char *subnet = param(p, n, "SubnetId");
	const char *market = param(p, n, "InstanceMarketOptions.MarketType");

	if (one_of(type, e->no_capacity) ||
	    (e->full_subnet && subnet && strcmp(subnet, e->full_subnet) == 0) ||
	    (e->no_spot && market && strcmp(market, "spot") == 0)) {
		answer(e, out, 500,
		       xasprintf("<Response><Errors><Error><Code>InsufficientInstanceCapacity"
				 "</Code><Message>We currently do not have sufficient %s capacity"
				 "</Message></Error></Errors></Response>",
				 type));
		return;
	}
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->inst[i].token, token) == 0)
			in = &e->inst[i]; /* the same launch again: the same instance */
	if (in && strncmp(in->user_data, param(p, n, "UserData") ? param(p, n, "UserData") : "",
			  sizeof(in->user_data) - 1) != 0) {
		answer(e, out, 400,
		       xasprintf("<Response><Errors><Error><Code>IdempotentParameterMismatch</Code>"
				 "<Message>The client token '%s' was used before with other "
				 "parameters.</Message></Error></Errors></Response>",
				 token));
		return;
	}
	if (!in) {
		assert_true(e->n < MAX_INSTANCES);
		in = &e->inst[e->n++];
		snprintf(in->id, sizeof(in->id), "i-%017zx", e->n);
		snprintf(in->type, sizeof(in->type), "%.31s", type);
		snprintf(in->state, sizeof(in->state), "pending");
		snprintf(in->token, sizeof(in->token), "%.79s", token);
		snprintf(in->cluster, sizeof(in->cluster), "%.63s",
			 run_tag(p, n, EC2_TAG_CLUSTER_ID));
		snprintf(in->cell, sizeof(in->cell), "%.63s", run_tag(p, n, EC2_TAG_CELL_ID));
		snprintf(in->uid, sizeof(in->uid), "%.63s", run_tag(p, n, EC2_TAG_POD_UID));
		snprintf(in->node, sizeof(in->node), "%.63s",
			 run_tag(p, n, EC2_TAG_NODE) ? run_tag(p, n, EC2_TAG_NODE) : "");
		snprintf(in->subnet, sizeof(in->subnet), "%.31s", subnet ? subnet : "");
		in->spot = market != NULL;
		in->hidden = e->hide_new;
		snprintf(in->user_data, sizeof(in->user_data), "%.511s",
			 param(p, n, "UserData") ? param(p, n, "UserData") : "");
	}
	item = item_xml(in);
	answer(e, out, 200,
	       xasprintf("<RunInstancesResponse><reservationId>r-1</reservationId><instancesSet>"
			 "%s</instancesSet></RunInstancesResponse>",
			 item));
}

static void describe_instances(struct fake_ec2 *e, const struct param *p, size_t n,
			       struct stub_reply *out)
{
	char *items = xstrdup("");

	e->describes++;
	for (size_t i = 0; i < e->n; i++) {
		struct instance *in = &e->inst[i];
		char *item, *all;

		if (strcmp(in->state, "pending") == 0 && e->after != STAYS) {
			snprintf(in->state, sizeof(in->state), "%s",
				 e->after == RUNS	 ? "running"
				 : e->after == RECLAIMED ? "terminated"
							 : "shutting-down");
			snprintf(in->ip, sizeof(in->ip), "10.1.0.%d", (int)i + 10);
			if (e->after != RUNS)
				in->ip[0] = '\0';
			if (e->after == RECLAIMED)
				in->reason = "Server.SpotInstanceTermination";
		}
		if (in->hidden || !matches(in, p, n))
			continue;
		item = item_xml(in);
		all = xasprintf("%s%s", items, item);
		free(item);
		free(items);
		items = all;
	}
	answer(e, out, 200,
	       xasprintf("<DescribeInstancesResponse><reservationSet><item><reservationId>r-1"
			 "</reservationId><instancesSet>%s</instancesSet></item></reservationSet>"
			 "</DescribeInstancesResponse>",
			 items));
	free(items);
}

/* As EC2: one unknown id fails the whole call, naming the unknown ones, and terminates none;
 * otherwise the answer lists every instance. fault (when set) answers instead. */
static void terminate_instances(struct fake_ec2 *e, const struct param *p, size_t n,
				struct stub_reply *out)
{
	char unknown[1024] = "", items[2048] = "";
	size_t n_unknown = 0;

	e->terminates++;
	if (e->term_fault) {
		answer(e, out, 400, xstrdup(e->term_fault));
		return;
	}
	for (int pass = 0; pass < 2; pass++) {
		e->terminated[0] = '\0';
		for (size_t i = 1;; i++) {
			char k[32];
			const char *id;
			size_t used = strlen(e->terminated), j;

			snprintf(k, sizeof(k), "InstanceId.%zu", i);
			if (!(id = param(p, n, k)))
				break;
			for (j = 0; j < e->n; j++)
				if (strcmp(e->inst[j].id, id) == 0 && !e->inst[j].hidden)
					break;
			if (pass == 0 && j == e->n) {
				used = strlen(unknown);
				snprintf(unknown + used, sizeof(unknown) - used, "%s%.64s",
					 used ? ", " : "", id);
				n_unknown++;
			}
			if (pass == 0 || j == e->n)
				continue;
			snprintf(e->terminated + used, sizeof(e->terminated) - used, "%s%.64s",
				 used ? " " : "", id);
			used = strlen(items);
			snprintf(items + used, sizeof(items) - used,
				 "<item><instanceId>%.64s</instanceId></item>", id);
			snprintf(e->inst[j].state, sizeof(e->inst[j].state), "terminated");
		}
		if (n_unknown) {
			answer(e, out, 400,
			       xasprintf("<Response><Errors><Error><Code>InvalidInstanceID.NotFound"
					 "</Code><Message>The instance ID%s '%s' do%s not exist"
					 "</Message></Error></Errors></Response>",
					 n_unknown > 1 ? "s" : "", unknown,
					 n_unknown > 1 ? "" : "es"));
			return;
		}
	}
	answer(e, out, 200,
	       xasprintf("<TerminateInstancesResponse><instancesSet>%s</instancesSet>"
			 "</TerminateInstancesResponse>",
			 items));
}

/* Subnets "subnet-X" are in zone "us-east-1X" (their last letter). */
static void describe_subnets(struct fake_ec2 *e, const struct param *p, size_t n,
			     struct stub_reply *out)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	e->subnet_calls++;
	if (e->subnets_fail) {
		answer(e, out, 400,
		       xstrdup("<Response><Errors><Error><Code>UnauthorizedOperation</Code>"
			       "<Message>You are not authorized to perform this operation."
			       "</Message></Error></Errors></Response>"));
		return;
	}
	buf_appendf(&b, &err, "<DescribeSubnetsResponse><subnetSet>");
	for (size_t i = 1; i <= 8; i++) {
		char key[32];
		const char *id;

		snprintf(key, sizeof(key), "SubnetId.%zu", i);
		if (!(id = param(p, n, key)))
			break;
		buf_appendf(&b, &err,
			    "<item><subnetId>%s</subnetId><availabilityZone>us-east-1%c"
			    "</availabilityZone></item>",
			    id, id[strlen(id) - 1]);
	}
	buf_appendf(&b, &err, "</subnetSet></DescribeSubnetsResponse>");
	answer(e, out, 200, buf_detach(&b, NULL));
}

static void ec2_handler(struct stub *s, const struct stub_request *rq, struct stub_reply *out)
{
	struct fake_ec2 *e = s->ctx;
	struct param *p = xcalloc(MAX_PARAMS, sizeof(*p));
	size_t n = parse_form(rq->body, p, MAX_PARAMS);
	const char *action = param(p, n, "Action");

	pthread_mutex_lock(&e->lock);
	if (action && strcmp(action, "RunInstances") == 0)
		run_instances(e, p, n, out);
	else if (action && strcmp(action, "DescribeInstances") == 0)
		describe_instances(e, p, n, out);
	else if (action && strcmp(action, "TerminateInstances") == 0)
		terminate_instances(e, p, n, out);
	else if (action && strcmp(action, "DescribeSubnets") == 0)
		describe_subnets(e, p, n, out);
	else
		answer(e, out, 400,
		       xstrdup("<Response><Errors><Error><Code>InvalidAction</Code>"
			       "</Error></Errors></Response>"));
	pthread_mutex_unlock(&e->lock);
	free(p);
}

/* ---- fixture: the fake, a credentials file and a provider pointed at both ---- */

struct fix {
	struct stub stub;
	struct fake_ec2 ec2;
	char dir[64];
	char endpoint[64];
	char *creds_file;
	struct provider p;
};

static const char *const groups[] = { "sg-1", "sg-2" };

static void provider_config(struct fix *f, int launch_timeout_s, struct ec2_provider_config *out)
{
	struct ec2_provider_config cfg = { 0 };

	cfg.cluster_id = CLUSTER;
	cfg.node = "node-a";
	cfg.region = "us-east-1";
	cfg.endpoint = f->endpoint;
	cfg.image_id = "ami-cell";
	cfg.subnet_id = "subnet-1";
	cfg.security_group_ids = groups;
	cfg.n_security_group_ids = ARRAY_SIZE(groups);
	cfg.instance_profile = "kiyot-cell";
	cfg.credentials_file = f->creds_file;
	cfg.profile = "default";
	cfg.no_imds = 1;
	cfg.launch_timeout_s = launch_timeout_s;
	cfg.poll_ms = 20;
	*out = cfg;
}

static int provider_new(struct fix *f, int launch_timeout_s, struct err *err)
{
	struct ec2_provider_config cfg;

	provider_config(f, launch_timeout_s, &cfg);
	return provider_ec2_new(&cfg, &f->p, err);
}

static const char creds[] = "[default]\naws_access_key_id = AKIDEXAMPLE\n"
			    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY\n";

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;

	/* the credentials come from the file alone */
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	unsetenv("AWS_PROFILE");
	pthread_mutex_init(&f->ec2.lock, NULL);
	f->stub.handler = ec2_handler;
	f->stub.ctx = &f->ec2;
	if (stub_start(&f->stub) < 0)
		return -1;
	snprintf(f->endpoint, sizeof(f->endpoint), "http://127.0.0.1:%d/", f->stub.port);
	snprintf(f->dir, sizeof(f->dir), "/tmp/kiyot-ec2p.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->creds_file = xasprintf("%s/credentials", f->dir);
	if (fs_write_file(f->creds_file, creds, strlen(creds), 0600, &err) < 0 ||
	    provider_new(f, 2, &err) < 0) {
		fprintf(stderr, "setup: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	struct err err = ERR_INIT;

	if (f->p.ops)
		f->p.ops->destroy(f->p.self);
	stub_stop(&f->stub);
	stub_release(&f->stub);
	free(f->ec2.xml);
	pthread_mutex_destroy(&f->ec2.lock);
	fs_remove_tree(f->dir, &err);
	free(f->creds_file);
	free(f);
	return 0;
}

/* The request of the last call of action the fake saw, decoded; NULL if none. */
static struct param *last_request(struct fix *f, const char *action, size_t *n)
{
	for (size_t i = stub_count(&f->stub); i-- > 0;) {
		struct param *p = xcalloc(MAX_PARAMS, sizeof(*p));

		*n = parse_form(f->stub.reqs[i].body, p, MAX_PARAMS);
		if (strcmp(param(p, *n, "Action"), action) == 0)
			return p;
		free(p);
	}
	return NULL;
}

static void spec_init(struct cell_spec *s, const char *cell, const char *type)
{
	memset(s, 0, sizeof(*s));
	s->cell_id = cell;
	s->cluster_id = CLUSTER;
	s->pod_uid = "0b6f1c3e-uid";
	s->pod_name = "web";
	s->pod_namespace = "default";
	s->instance_type = type;
	s->bootstrap = "{\"cellId\":\"cell-1\"}";
}

static int launch(struct fix *f, const struct cell_spec *s, struct cell_info *out, struct err *err)
{
	memset(out, 0, sizeof(*out));
	*err = (struct err)ERR_INIT;
	return f->p.ops->launch(f->p.self, s, out, err);
}

static void test_provider_ec2__new_says_what_is_missing(void **state)
{
	struct ec2_provider_config cfg = { 0 };
	struct provider p = { 0 };
	struct err err = ERR_INIT;

	(void)state;
	assert_int_equal(provider_ec2_new(&cfg, &p, &err), -EINVAL);
	assert_string_equal(err.msg, "ec2: no cluster id");
	cfg.cluster_id = CLUSTER;
	assert_int_equal(provider_ec2_new(&cfg, &p, &err), -EINVAL);
	assert_string_equal(err.msg, "ec2.region: required (or set AWS_REGION)");
	cfg.region = "us-east-1";
	assert_int_equal(provider_ec2_new(&cfg, &p, &err), -EINVAL);
	assert_string_equal(err.msg, "ec2.imageId: required: the AMI cells boot from");
	assert_null(p.ops);
}

/* A launch sends one tagged RunInstances with the settings and the bootstrap as user data,
 * waits for the instance to run, and answers its address. */
static void test_provider_ec2__launch_runs_a_tagged_instance(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err;
	struct param *p;
	size_t n = 0;
	char b64[128];

	spec_init(&s, "cell-1", "t3.nano");
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(out.cell_id, "cell-1");
	assert_string_equal(out.instance_id, f->ec2.inst[0].id);
	assert_string_equal(out.instance_type, "t3.nano");
	assert_string_equal(out.ip, "10.1.0.10");
	assert_string_equal(out.pod_uid, "0b6f1c3e-uid");
	assert_int_equal(out.phase, CELL_RUNNING);
	assert_true(out.launched_ns > 0);
	cell_info_release(&out);

	assert_int_equal(f->ec2.runs, 1);
	assert_string_equal(f->ec2.inst[0].cluster, CLUSTER);
	assert_string_equal(f->ec2.inst[0].cell, "cell-1");
	assert_string_equal(f->ec2.inst[0].uid, "0b6f1c3e-uid");
	assert_string_equal(f->ec2.inst[0].node, "node-a");
	EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)s.bootstrap,
			(int)strlen(s.bootstrap));
	assert_string_equal(f->ec2.inst[0].user_data, b64);
	p = last_request(f, "RunInstances", &n);
	assert_non_null(p);
	assert_string_equal(param(p, n, "ImageId"), "ami-cell");
	assert_string_equal(param(p, n, "SubnetId"), "subnet-1");
	assert_string_equal(param(p, n, "SecurityGroupId.1"), "sg-1");
	assert_string_equal(param(p, n, "SecurityGroupId.2"), "sg-2");
	assert_string_equal(param(p, n, "IamInstanceProfile.Name"), "kiyot-cell");
	/* the token names the pod and is at most 64 characters */
	assert_int_equal(strncmp(param(p, n, "ClientToken"), "kiyot-0b6f1c3e-uid-", 19), 0);
	assert_true(strlen(param(p, n, "ClientToken")) <= EC2_MAX_CLIENT_TOKEN);
	free(p);
}

/* The same launch again (a retry after a crash) gets the same instance, not a second. */
static void test_provider_ec2__launch_again_is_the_same_instance(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info a, b;
	struct err err;

	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &a, &err), 0);
	assert_int_equal(launch(f, &s, &b, &err), 0);
	assert_string_equal(a.instance_id, b.instance_id);
	assert_int_equal(f->ec2.n, 1);
	assert_int_equal(f->ec2.runs, 2);
	cell_info_release(&b);
	/* resumed after the cell enrolled, with a new secret in its user-data: EC2 refuses the
	 * token with other parameters, and the launch takes the instance the token made */
	s.bootstrap = "{\"enroll_secret\":\"another\"}";
	assert_int_equal(launch(f, &s, &b, &err), 0);
	assert_string_equal(a.instance_id, b.instance_id);
	assert_int_equal(f->ec2.n, 1);
	cell_info_release(&a);
	cell_info_release(&b);
	/* another cell of the same pod is another instance */
	spec_init(&s, "cell-2", "t3.nano");
	assert_int_equal(launch(f, &s, &a, &err), 0);
	assert_int_equal(f->ec2.n, 2);
	assert_string_not_equal(f->ec2.inst[0].token, f->ec2.inst[1].token);
	cell_info_release(&a);
}

/* A type without capacity passes the launch to the next candidate; none left is an error
 * that says so. */
static void test_provider_ec2__no_capacity_tries_the_next_type(void **state)
{
	static const char *const fallback[] = { "t3a.nano", "t3.micro" };
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err;

	f->ec2.no_capacity[0] = "t3.nano";
	f->ec2.no_capacity[1] = "t3a.nano";
	spec_init(&s, "cell-1", "t3.nano");
	s.fallback_types = fallback;
	s.n_fallback_types = ARRAY_SIZE(fallback);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(out.instance_type, "t3.micro");
	assert_int_equal(f->ec2.runs, 3);
	cell_info_release(&out);

	f->ec2.no_capacity[2] = "t3.micro";
	spec_init(&s, "cell-2", "t3.nano");
	s.fallback_types = fallback;
	s.n_fallback_types = ARRAY_SIZE(fallback);
	assert_true(launch(f, &s, &out, &err) < 0);
	assert_int_equal(strncmp(err.msg, "cell cell-2: ", 13), 0);
	if (!strstr(err.msg, "t3.micro capacity"))
		fail_msg("\"%s\" does not name the last type's shortage", err.msg);
	assert_int_equal(f->ec2.n, 1);
}

/* With ec2.subnetIds, a launch whose types have no capacity in one subnet tries them in the
 * next; the cell says what was tried before. */
static void test_provider_ec2__no_capacity_in_a_subnet_moves_to_the_next(void **state)
{
	static const char *const fallback[] = { "t3.micro" };
	static const char *const subnets[] = { "subnet-a", "subnet-b" };
	struct fix *f = *state;
	struct ec2_provider_config cfg;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	f->p.ops->destroy(f->p.self);
	provider_config(f, 2, &cfg);
	cfg.subnet_id = NULL;
	cfg.subnet_ids = subnets;
	cfg.n_subnet_ids = ARRAY_SIZE(subnets);
	if (provider_ec2_new(&cfg, &f->p, &err) < 0)
		fail_msg("%s", err.msg);
	f->ec2.full_subnet = "subnet-a";
	spec_init(&s, "cell-1", "t3.nano");
	s.fallback_types = fallback;
	s.n_fallback_types = ARRAY_SIZE(fallback);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(f->ec2.runs, 3); /* t3.nano and t3.micro in a, t3.nano in b */
	assert_string_equal(out.instance_type, "t3.nano");
	assert_string_equal(f->ec2.inst[0].subnet, "subnet-b");
	assert_non_null(out.launch_note);
	assert_string_equal(out.launch_note,
			    "t3.nano in subnet-a: InsufficientInstanceCapacity; t3.micro in "
			    "subnet-a: InsufficientInstanceCapacity; launched t3.nano in subnet-b");
	cell_info_release(&out);
}

/* An arm64 cell boots ec2.imageIds' arm64 image, an x86_64 one (arch 0 or x86_64) the x86_64
 * image; without an arm64 image an arm64 launch is refused before EC2 is asked, saying what
 * to add. */
static void test_provider_ec2__arm64_cell_boots_the_arm64_image(void **state)
{
	struct fix *f = *state;
	struct ec2_provider_config cfg;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;
	struct param *p;
	size_t n = 0;

	/* the fixture's provider has no arm64 image */
	spec_init(&s, "cell-arm", "t4g.nano");
	s.arch = CELL_ARCH_ARM64;
	assert_int_equal(launch(f, &s, &out, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "t4g.nano is an arm64 type and ec2.imageIds has no arm64 "
					"cell image; add one"));
	assert_int_equal(f->ec2.runs, 0);

	f->p.ops->destroy(f->p.self);
	provider_config(f, 2, &cfg);
	cfg.image_id_arm64 = "ami-cell-arm64";
	if (provider_ec2_new(&cfg, &f->p, &err) < 0)
		fail_msg("%s", err.msg);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	cell_info_release(&out);
	p = last_request(f, "RunInstances", &n);
	assert_non_null(p);
	assert_string_equal(param(p, n, "InstanceType"), "t4g.nano");
	assert_string_equal(param(p, n, "ImageId"), "ami-cell-arm64");
	free(p);
	spec_init(&s, "cell-x86", "t3.nano");
	s.arch = CELL_ARCH_X86_64;
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	cell_info_release(&out);
	p = last_request(f, "RunInstances", &n);
	assert_string_equal(param(p, n, "ImageId"), "ami-cell");
	free(p);
}

/* A provider with subnets a, b and c (zones us-east-1a, -1b, -1c). */
static void three_subnets(struct fix *f)
{
	static const char *const subnets[] = { "subnet-a", "subnet-b", "subnet-c" };
	struct ec2_provider_config cfg;
	struct err err = ERR_INIT;

	f->p.ops->destroy(f->p.self);
	provider_config(f, 2, &cfg);
	cfg.subnet_id = NULL;
	cfg.subnet_ids = subnets;
	cfg.n_subnet_ids = ARRAY_SIZE(subnets);
	if (provider_ec2_new(&cfg, &f->p, &err) < 0)
		fail_msg("%s", err.msg);
}

/* A spot cell goes to the subnet whose zone has the chosen type's lowest spot price, the
 * subnets' zones asked once; without capacity there, the next cheapest zone's subnet; a
 * zone without a price comes last. The note says why. */
static void test_provider_ec2__spot_goes_to_the_cheapest_zone_first(void **state)
{
	static const struct cell_zone_price prices[] = {
		{ "t3.nano", NULL, 0.0030, -1 },
		{ "t3.nano", "us-east-1a", 0.0041, -1 },
		{ "t3.nano", "us-east-1b", 0.0036, -1 },
		{ "t3.nano", "us-east-1c", 0.0022, -1 },
	};
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	three_subnets(f);
	spec_init(&s, "cell-1", "t3.nano");
	s.spot = CELL_SPOT;
	s.zone_prices = prices;
	s.n_zone_prices = ARRAY_SIZE(prices);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(f->ec2.inst[0].subnet, "subnet-c");
	assert_non_null(out.launch_note);
	assert_non_null(strstr(out.launch_note, "subnet-c (us-east-1c) first: t3.nano's spot price "
						"there is $0.0022/h, $0.0041/h in us-east-1a"));
	cell_info_release(&out);
	assert_int_equal(f->ec2.subnet_calls, 1);

	/* no capacity in c: b (cheaper than a) next; the zones are not asked again */
	f->ec2.full_subnet = "subnet-c";
	spec_init(&s, "cell-2", "t3.nano");
	s.spot = CELL_SPOT;
	s.zone_prices = prices;
	s.n_zone_prices = ARRAY_SIZE(prices);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(f->ec2.inst[1].subnet, "subnet-b");
	cell_info_release(&out);
	assert_int_equal(f->ec2.subnet_calls, 1);
}

/* Without zone prices, an on-demand cell, or when DescribeSubnets fails, the subnets are
 * tried in their configured order. */
static void test_provider_ec2__zones_unknown_keep_the_configured_order(void **state)
{
	static const struct cell_zone_price prices[] = {
		{ "t3.nano", NULL, 0.0030, -1 },
		{ "t3.nano", "us-east-1b", 0.0010, -1 },
	};
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	three_subnets(f);
	f->ec2.subnets_fail = 1;
	spec_init(&s, "cell-1", "t3.nano");
	s.spot = CELL_SPOT;
	s.zone_prices = prices;
	s.n_zone_prices = ARRAY_SIZE(prices);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(f->ec2.inst[0].subnet, "subnet-a");
	cell_info_release(&out);
	assert_int_equal(f->ec2.subnet_calls, 1);
	/* on demand: the zones' spot prices do not matter */
	f->ec2.subnets_fail = 0;
	spec_init(&s, "cell-2", "t3.nano");
	s.zone_prices = prices;
	s.n_zone_prices = ARRAY_SIZE(prices);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(f->ec2.inst[1].subnet, "subnet-a");
	cell_info_release(&out);
}

/* A runner-up whose spot price is within 5% of the chosen type's and that is interrupted
 * less often (a lower band) is tried first; one 10% dearer, or of an unknown band, is not. */
static void test_provider_ec2__near_tie_goes_to_the_lower_interruption_band(void **state)
{
	static const char *const fallback[] = { "t3a.nano", "t2.nano" };
	static const struct cell_zone_price tie[] = {
		{ "t3.nano", NULL, 0.0030, 3 },
		{ "t3a.nano", NULL, 0.0031, 0 },
		{ "t2.nano", NULL, 0.0030, 1 },
	};
	static const struct cell_zone_price apart[] = {
		{ "t3.nano", NULL, 0.0030, 3 },
		{ "t3a.nano", NULL, 0.0033, 0 },
		{ "t2.nano", NULL, 0.0030, -1 },
	};
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	spec_init(&s, "cell-1", "t3.nano");
	s.spot = CELL_SPOT;
	s.fallback_types = fallback;
	s.n_fallback_types = ARRAY_SIZE(fallback);
	s.zone_prices = tie;
	s.n_zone_prices = ARRAY_SIZE(tie);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(out.instance_type, "t3a.nano");
	assert_non_null(strstr(out.launch_note,
			       "t3a.nano first: its spot price is within 5% of "
			       "t3.nano's and it is interrupted less often (interruption "
			       "<5%, not 15-20%)"));
	cell_info_release(&out);
	spec_init(&s, "cell-2", "t3.nano");
	s.spot = CELL_SPOT;
	s.fallback_types = fallback;
	s.n_fallback_types = ARRAY_SIZE(fallback);
	s.zone_prices = apart;
	s.n_zone_prices = ARRAY_SIZE(apart);
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(out.instance_type, "t3.nano");
	assert_null(out.launch_note);
	cell_info_release(&out);
}

/* One spot launch of t3.nano with runners-up t3a.nano and t2.nano at these spot prices and
 * bands: the type launched. */
static void near_tie_launch(struct fix *f, const char *id, const struct cell_zone_price *prices,
			    char *type, size_t type_size)
{
	static const char *const fallback[] = { "t3a.nano", "t2.nano" };
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	spec_init(&s, id, "t3.nano");
	s.spot = CELL_SPOT;
	s.fallback_types = fallback;
	s.n_fallback_types = ARRAY_SIZE(fallback);
	s.zone_prices = prices;
	s.n_zone_prices = 3;
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	snprintf(type, type_size, "%s", out.instance_type);
	cell_info_release(&out);
}

/* The near-tie is 5% of the lower price and no more: a lower band 4.8% dearer goes first, one
 * 5.2% dearer does not, however low its band; of two runners-up within it, the lowest band
 * wins. A type without a band neither displaces the chosen type nor is displaced. */
static void test_provider_ec2__near_tie_bounds_and_unknown_bands(void **state)
{
	static const struct cell_zone_price within[] = {
		{ "t3.nano", NULL, 0.0030, 4 },
		{ "t3a.nano", NULL, 0.003145, 1 },
		{ "t2.nano", NULL, 0.00303, 0 },
	};
	static const struct cell_zone_price beyond[] = {
		{ "t3.nano", NULL, 0.0030, 4 },
		{ "t3a.nano", NULL, 0.003156, 0 },
		{ "t2.nano", NULL, 0.0040, 0 },
	};
	static const struct cell_zone_price runner_unknown[] = {
		{ "t3.nano", NULL, 0.0030, 4 },
		{ "t3a.nano", NULL, 0.0030, -1 },
		{ "t2.nano", NULL, 0.0031, -1 },
	};
	static const struct cell_zone_price chosen_unknown[] = {
		{ "t3.nano", NULL, 0.0030, -1 },
		{ "t3a.nano", NULL, 0.0030, 0 },
		{ "t2.nano", NULL, 0.0031, 0 },
	};
	struct fix *f = *state;
	char type[64];

	near_tie_launch(f, "cell-1", within, type, sizeof(type));
	assert_string_equal(type, "t2.nano");
	near_tie_launch(f, "cell-2", beyond, type, sizeof(type));
	assert_string_equal(type, "t3.nano");
	near_tie_launch(f, "cell-3", runner_unknown, type, sizeof(type));
	assert_string_equal(type, "t3.nano");
	near_tie_launch(f, "cell-4", chosen_unknown, type, sizeof(type));
	assert_string_equal(type, "t3.nano");
}

/* A spot pod without spot capacity runs on demand only when it allows it; otherwise the
 * error says how to allow it. */
static void test_provider_ec2__spot_falls_back_to_on_demand_only_if_allowed(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	f->ec2.no_spot = 1;
	spec_init(&s, "cell-1", "t3.nano");
	s.spot = CELL_SPOT;
	assert_true(launch(f, &s, &out, &err) < 0);
	assert_int_equal(f->ec2.n, 0);
	assert_non_null(strstr(err.msg, "pod.elotl.co/spot-fallback: on-demand"));

	spec_init(&s, "cell-2", "t3.nano");
	s.spot = CELL_SPOT_OR_ON_DEMAND;
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(f->ec2.n, 1);
	assert_false(f->ec2.inst[0].spot);
	assert_non_null(out.launch_note);
	assert_non_null(strstr(out.launch_note, "launched t3.nano in subnet-1 (on-demand)"));
	cell_info_release(&out);
}

/* An instance that ends instead of running fails the launch at once, naming its state. */
static void test_provider_ec2__instance_that_dies_fails_the_launch(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err;
	_cleanup_free_ char *want = NULL;

	f->ec2.after = TERMINATES;
	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), -EIO);
	want = xasprintf("cell cell-1: the instance %s was shutting-down during boot",
			 f->ec2.inst[0].id);
	assert_string_equal(err.msg, want);
}

/* An instance terminated while it is pending (a spot instance reclaimed in its boot), which
 * the poller no longer lists, fails the launch once it is described by itself, naming its
 * state and EC2's reason; the provider's state of the cell says the same. */
static void test_provider_ec2__instance_reclaimed_in_its_boot_fails_the_launch(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out, st = { 0 };
	struct err err;
	_cleanup_free_ char *want = NULL;

	f->p.ops->destroy(f->p.self);
	assert_int_equal(provider_new(f, 60, &err), 0);
	f->ec2.after = RECLAIMED;
	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), -EIO);
	want = xasprintf("cell cell-1: the instance %s was terminated during boot: "
			 "Server.SpotInstanceTermination: Spot instance termination",
			 f->ec2.inst[0].id);
	assert_string_equal(err.msg, want);

	assert_int_equal(f->p.ops->state(f->p.self, "cell-1", &st, &err), 0);
	assert_int_equal(st.phase, CELL_TERMINATED);
	assert_string_equal(st.instance_id, f->ec2.inst[0].id);
	assert_string_equal(st.reason, "Server.SpotInstanceTermination: Spot instance termination");
	cell_info_release(&st);
	assert_int_equal(f->p.ops->state(f->p.self, "cell-nope", &st, &err), -ENOENT);
}

/* How many DescribeInstances the fake answered. */
static size_t describes(struct fix *f)
{
	size_t n = 0;

	for (size_t i = 0; i < stub_count(&f->stub); i++)
		n += strstr(f->stub.reqs[i].body, "Action=DescribeInstances") != NULL;
	return n;
}

struct state_call {
	struct fix *f;
	int ret;
	enum cell_phase phase;
};

static void *state_thread(void *arg)
{
	struct state_call *c = arg;
	struct cell_info st = { 0 };
	struct err err = ERR_INIT;

	c->ret = c->f->p.ops->state(c->f->p.self, "cell-1", &st, &err);
	c->phase = st.phase;
	cell_info_release(&st);
	return NULL;
}

/* The launches waiting for their agents ask for their instances' states every few seconds;
 * those asked at once share the poller's one description instead of one DescribeInstances
 * each (ten waiting launches made ten a round before). */
static void test_provider_ec2__states_asked_at_once_share_a_description(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err;
	struct state_call c[10];
	pthread_t t[10];
	size_t before;

	spec_init(&s, "cell-1", "t3.nano");
	if (launch(f, &s, &out, &err) < 0)
		fail_msg("%s", err.msg);
	cell_info_release(&out);
	usleep(100 * 1000); /* the cache ages past two poll periods (20 ms) */
	before = describes(f);
	for (int i = 0; i < 10; i++) {
		c[i] = (struct state_call){ f, -1, CELL_FAILED };
		assert_int_equal(pthread_create(&t[i], NULL, state_thread, &c[i]), 0);
	}
	for (int i = 0; i < 10; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(c[i].ret, 0);
		assert_int_equal(c[i].phase, CELL_RUNNING);
	}
	assert_true(describes(f) - before <= 2);
}

/* An instance that stays pending fails the launch after the launch timeout. */
static void test_provider_ec2__pending_past_the_timeout(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err;
	int64_t t0 = clock_mono_ns();

	f->ec2.after = STAYS;
	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), -ETIMEDOUT);
	assert_non_null(strstr(err.msg, "did not run with an address within 2 s"));
	assert_true(clock_mono_ns() - t0 >= 2000LL * 1000 * 1000);
	assert_true(f->ec2.describes >= 2); /* it kept asking */
}

/* list answers the cluster's instances only, each by its cell (or its own id without one),
 * with the phase its state means. */
static void test_provider_ec2__list_is_the_clusters_instances(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out, *all = NULL;
	size_t n = 0;
	struct err err;

	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), 0);
	cell_info_release(&out);
	pthread_mutex_lock(&f->ec2.lock);
	f->ec2.inst[f->ec2.n] = f->ec2.inst[0];
	snprintf(f->ec2.inst[f->ec2.n].id, 32, "i-other");
	snprintf(f->ec2.inst[f->ec2.n].cluster, 64, "c-someone-else");
	f->ec2.n++;
	f->ec2.inst[f->ec2.n] = f->ec2.inst[0];
	snprintf(f->ec2.inst[f->ec2.n].id, 32, "i-nocell");
	snprintf(f->ec2.inst[f->ec2.n].state, 16, "stopping");
	f->ec2.inst[f->ec2.n].cell[0] = '\0';
	f->ec2.n++;
	/* the same cluster's instance of another node is that node's; one of no node (launched
	 * before instances carried it) is every node's */
	f->ec2.inst[f->ec2.n] = f->ec2.inst[0];
	snprintf(f->ec2.inst[f->ec2.n].id, 32, "i-node-b");
	snprintf(f->ec2.inst[f->ec2.n].cell, 64, "cell-b");
	snprintf(f->ec2.inst[f->ec2.n].node, 64, "node-b");
	f->ec2.n++;
	f->ec2.inst[f->ec2.n] = f->ec2.inst[0];
	snprintf(f->ec2.inst[f->ec2.n].id, 32, "i-no-node");
	snprintf(f->ec2.inst[f->ec2.n].cell, 64, "cell-old");
	f->ec2.inst[f->ec2.n].node[0] = '\0';
	f->ec2.n++;
	pthread_mutex_unlock(&f->ec2.lock);
	assert_int_equal(f->p.ops->list(f->p.self, &all, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(all[2].cell_id, "cell-old");
	assert_string_equal(all[0].cell_id, "cell-1");
	assert_int_equal(all[0].phase, CELL_RUNNING);
	assert_string_equal(all[0].ip, "10.1.0.10");
	assert_string_equal(all[0].pod_uid, "0b6f1c3e-uid");
	assert_string_equal(all[1].cell_id, "i-nocell");
	assert_int_equal(all[1].phase, CELL_TERMINATING);
	cell_info_array_free(all, n);
}

/* terminate finds a cell's instance by its tag (or an instance by its id) among the
 * cluster's and terminates it; an unknown cell is no error and terminates nothing. */
static void test_provider_ec2__terminate_by_cell_or_instance(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;
	_cleanup_free_ char *id2 = NULL;

	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), 0);
	cell_info_release(&out);
	spec_init(&s, "cell-2", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), 0);
	id2 = xstrdup(out.instance_id);
	cell_info_release(&out);

	assert_int_equal(f->p.ops->terminate(f->p.self, "cell-1", &err), 0);
	assert_string_equal(f->ec2.terminated, f->ec2.inst[0].id);
	assert_string_equal(f->ec2.inst[0].state, "terminated");
	assert_string_equal(f->ec2.inst[1].state, "running");
	assert_int_equal(f->p.ops->terminate(f->p.self, id2, &err), 0);
	assert_string_equal(f->ec2.inst[1].state, "terminated");
	assert_int_equal(f->ec2.terminates, 2);
	/* gone already, or never ours: nothing to do */
	assert_int_equal(f->p.ops->terminate(f->p.self, "cell-1", &err), 0);
	assert_int_equal(f->p.ops->terminate(f->p.self, "cell-unknown", &err), 0);
	assert_int_equal(f->ec2.terminates, 2);
}

/* Only InvalidInstanceID.NotFound says an instance is gone: another error (even another
 * *.NotFound code) leaves the instance running, and the terminate fails saying it is left for
 * the next attempt; the next attempt terminates it. */
static void test_provider_ec2__terminate_fails_when_ec2_refuses(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), 0);
	cell_info_release(&out);
	f->ec2.term_fault = "<Response><Errors><Error><Code>InvalidAttachment.NotFound</Code>"
			    "<Message>The attachment 'eni-attach-1' does not exist</Message>"
			    "</Error></Errors></Response>";
	err = (struct err)ERR_INIT;
	assert_true(f->p.ops->terminate(f->p.self, "cell-1", &err) < 0);
	assert_non_null(strstr(err.msg, "left for the next attempt"));
	assert_non_null(strstr(err.msg, "InvalidAttachment.NotFound"));
	assert_non_null(strstr(err.msg, f->ec2.inst[0].id));
	assert_string_equal(f->ec2.inst[0].state, "running");
	f->ec2.term_fault = NULL;
	assert_int_equal(f->p.ops->terminate(f->p.self, "cell-1", &err), 0);
	assert_string_equal(f->ec2.inst[0].state, "terminated");
}

/* Right after a launch EC2 may not list the instance nor know its id (eventual consistency):
 * terminating its cell then fails for a retry instead of reporting nothing to terminate; once
 * EC2 knows the id, the retry terminates it. */
static void test_provider_ec2__terminate_of_a_launch_ec2_does_not_know_yet(void **state)
{
	struct fix *f = *state;
	struct cell_spec s;
	struct cell_info out;
	struct err err = ERR_INIT;

	spec_init(&s, "cell-1", "t3.nano");
	assert_int_equal(launch(f, &s, &out, &err), 0);
	cell_info_release(&out);
	pthread_mutex_lock(&f->ec2.lock);
	f->ec2.inst[0].hidden = 1;
	pthread_mutex_unlock(&f->ec2.lock);
	err = (struct err)ERR_INIT;
	assert_true(f->p.ops->terminate(f->p.self, "cell-1", &err) < 0);
	assert_int_equal(err.code, EAGAIN);
	assert_non_null(strstr(err.msg, "left for the next attempt"));
	assert_string_equal(f->ec2.inst[0].state, "running");
	pthread_mutex_lock(&f->ec2.lock);
	f->ec2.inst[0].hidden = 0;
	pthread_mutex_unlock(&f->ec2.lock);
	assert_int_equal(f->p.ops->terminate(f->p.self, "cell-1", &err), 0);
	assert_string_equal(f->ec2.inst[0].state, "terminated");
}

struct term_arg {
	struct fix *f;
	const char *cell;
	int ret;
};

static void *terminate_main(void *arg)
{
	struct term_arg *a = arg;
	struct err err = ERR_INIT;

	a->ret = a->f->p.ops->terminate(a->f->p.self, a->cell, &err);
	return NULL;
}

/* Terminates that come together share one TerminateInstances. */
static void test_provider_ec2__terminates_together_are_batched(void **state)
{
	static const char *const cells[] = { "cell-a", "cell-b", "cell-c" };
	struct fix *f = *state;
	struct term_arg args[ARRAY_SIZE(cells)];
	pthread_t t[ARRAY_SIZE(cells)];

	for (size_t i = 0; i < ARRAY_SIZE(cells); i++) {
		struct cell_spec s;
		struct cell_info out;
		struct err err;

		spec_init(&s, cells[i], "t3.nano");
		assert_int_equal(launch(f, &s, &out, &err), 0);
		cell_info_release(&out);
	}
	for (size_t i = 0; i < ARRAY_SIZE(cells); i++) {
		args[i] = (struct term_arg){ f, cells[i], -1 };
		assert_int_equal(pthread_create(&t[i], NULL, terminate_main, &args[i]), 0);
	}
	for (size_t i = 0; i < ARRAY_SIZE(cells); i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(args[i].ret, 0);
	}
	for (size_t i = 0; i < ARRAY_SIZE(cells); i++)
		assert_string_equal(f->ec2.inst[i].state, "terminated");
	/* the batch window is 50 ms: threads started together land in one batch, or two when
	 * the scheduler is slow; never one call each */
	assert_true(f->ec2.terminates >= 1 && f->ec2.terminates < (int)ARRAY_SIZE(cells));
}

/* The provider's EC2 client is there for the catalog refresh; other providers have none. */
static void test_provider_ec2__client_of_an_ec2_provider_only(void **state)
{
	struct fix *f = *state;
	struct provider other = { .ops = NULL };
	static const struct provider_ops other_ops = { .name = "other" };

	assert_non_null(provider_ec2_client(&f->p));
	other.ops = &other_ops;
	assert_null(provider_ec2_client(&other));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(test_provider_ec2__##name, setup, teardown)
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_provider_ec2__new_says_what_is_missing),
		T(launch_runs_a_tagged_instance),
		T(launch_again_is_the_same_instance),
		T(no_capacity_tries_the_next_type),
		T(no_capacity_in_a_subnet_moves_to_the_next),
		T(arm64_cell_boots_the_arm64_image),
		T(spot_goes_to_the_cheapest_zone_first),
		T(zones_unknown_keep_the_configured_order),
		T(near_tie_goes_to_the_lower_interruption_band),
		T(near_tie_bounds_and_unknown_bands),
		T(spot_falls_back_to_on_demand_only_if_allowed),
		T(instance_that_dies_fails_the_launch),
		T(states_asked_at_once_share_a_description),
		T(instance_reclaimed_in_its_boot_fails_the_launch),
		T(pending_past_the_timeout),
		T(list_is_the_clusters_instances),
		T(terminate_by_cell_or_instance),
		T(terminates_together_are_batched),
		T(terminate_fails_when_ec2_refuses),
		T(terminate_of_a_launch_ec2_does_not_know_yet),
		T(client_of_an_ec2_provider_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
