/*
 * Unit tests for kiyot/catalog_refresh: a catalog (test/fixtures/catalog/base.json) refreshed
 * from an HTTP server on 127.0.0.1 that answers DescribeInstanceTypes (two pages) and
 * DescribeSpotPriceHistory with the XML of test/fixtures/catalog/, or fails one action.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "sizing/catalog.h"
#include "sizing/catalog_refresh.h"
#include "sizing/sizing.h"
#include "buf.h"
#include "xalloc.h"

#include "awsstub.h"

#define FIX "test/fixtures/catalog/"

/* A fixture's text; the caller frees it. */
static char *fixture(const char *name)
{
	return awsstub_fixture(FIX, name);
}

/* What the fake EC2 answers: the fixtures, except fail_action, which gets fail_status. */
struct fake_ec2 {
	char *types1, *types2, *types_empty, *spots, *throttle, *auth;
	/* the Price List's GetProducts answer, and its status */
	char *prices, *prices_none, *prices_denied;
	const char *prices_body;
	int prices_status;
	const char *fail_action; /* "DescribeInstanceTypes", ...; NULL: none fails */
	int fail_status;
	const char *fail_body;
	bool empty_types; /* DescribeInstanceTypes lists nothing */
	/* when set, every answer waits until gate_open (or 30 s pass) */
	bool gated;
	bool gate_open;
	pthread_mutex_t gate_lock;
	pthread_cond_t gate_cond;
};

/* True when the form body has exactly this key=value pair. */
static bool form_has(const char *body, const char *pair)
{
	size_t n = strlen(pair);

	for (const char *p = body; (p = strstr(p, pair)); p++)
		if ((p == body || p[-1] == '&') && (p[n] == '&' || p[n] == '\0'))
			return true;
	return false;
}

/* Waits for the test to open the gate; 30 s at most, so a broken test ends. */
static void fake_wait_gate(struct fake_ec2 *f)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 30;
	pthread_mutex_lock(&f->gate_lock);
	while (f->gated && !f->gate_open)
		if (pthread_cond_timedwait(&f->gate_cond, &f->gate_lock, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->gate_lock);
}

/* The stub's handler: answers by the Action of the form body. */
static void fake_handler(struct stub *s, const struct stub_request *rq, struct stub_reply *out)
{
	struct fake_ec2 *f = s->ctx;
	const char *body = rq->body ? rq->body : "";

	fake_wait_gate(f);
	out->headers = NULL;
	if (strstr(rq->headers, "AWSPriceListService.GetProducts")) {
		out->status = f->prices_status ? f->prices_status : 200;
		out->body = f->prices_body ? f->prices_body : f->prices;
	} else if (f->fail_action && strstr(body, f->fail_action)) {
		out->status = f->fail_status;
		out->body = f->fail_body;
	} else if (form_has(body, "Action=DescribeInstanceTypes")) {
		out->status = 200;
		if (f->empty_types)
			out->body = f->types_empty;
		else if (form_has(body, "NextToken=catalog-page-2"))
			out->body = f->types2;
		else
			out->body = f->types1;
	} else if (form_has(body, "Action=DescribeSpotPriceHistory")) {
		out->status = 200;
		out->body = f->spots;
	} else {
		out->status = 400;
		out->body = f->auth;
	}
}

/* The test's world: the fake EC2, a client pointed at it, and the base catalog. */
struct harness {
	struct fake_ec2 fake;
	struct awsstub aws; /* retries do not really sleep */
	struct ec2_client *client;
	struct pricing_client *pricing; /* the same stub, as a Price List endpoint */
	struct catalog *catalog;
};

static int setup(void **state)
{
	struct harness *h = xcalloc(1, sizeof(*h));
	struct ec2_config cfg = { 0 };
	struct err err = ERR_INIT;

	h->fake.types1 = fixture("instance_types_page1.xml");
	h->fake.types2 = fixture("instance_types_page2.xml");
	h->fake.types_empty = fixture("instance_types_empty.xml");
	h->fake.spots = fixture("spot_prices.xml");
	h->fake.throttle = fixture("error_throttle.xml");
	h->fake.auth = fixture("error_auth.xml");
	h->fake.prices = fixture("price_list.json");
	h->fake.prices_none = fixture("price_list_none.json");
	h->fake.prices_denied = fixture("price_denied.json");
	pthread_mutex_init(&h->fake.gate_lock, NULL);
	pthread_cond_init(&h->fake.gate_cond, NULL);
	h->aws.stub.handler = fake_handler;
	h->aws.stub.ctx = &h->fake;
	awsstub_start(&h->aws, NULL);
	cfg.region = "us-east-1";
	cfg.endpoint = h->aws.url;
	cfg.creds = h->aws.creds;
	cfg.max_attempts = 3;
	cfg.sleep = awsstub_sleep;
	cfg.sleep_ctx = &h->aws;
	if (ec2_client_new(&cfg, &h->client, &err) < 0 ||
	    pricing_client_new(&(struct pricing_config){ .endpoint = h->aws.url,
							 .creds = h->aws.creds,
							 .max_attempts = 3,
							 .sleep = awsstub_sleep,
							 .sleep_ctx = &h->aws },
			       &h->pricing, &err) < 0 ||
	    catalog_load_file(FIX "base.json", "us-east-1", &h->catalog, &err) < 0)
		fail_msg("%s", err.msg);
	*state = h;
	return 0;
}

static int teardown(void **state)
{
	struct harness *h = *state;

	catalog_refresh_stop(h->catalog);
	catalog_free(h->catalog);
	awsstub_stop(&h->aws);
	ec2_client_free(h->client);
	pricing_client_free(h->pricing);
	awsstub_release(&h->aws);
	free(h->fake.types1);
	free(h->fake.types2);
	free(h->fake.types_empty);
	free(h->fake.spots);
	free(h->fake.throttle);
	free(h->fake.auth);
	free(h->fake.prices);
	free(h->fake.prices_none);
	free(h->fake.prices_denied);
	pthread_mutex_destroy(&h->fake.gate_lock);
	pthread_cond_destroy(&h->fake.gate_cond);
	free(h);
	return 0;
}

/* Every field of every type of c, one line each; the caller frees it. */
static char *dump(const struct catalog *c)
{
	struct buf b = BUF_INIT;
	struct err err = ERR_INIT;

	for (size_t i = 0; i < catalog_count(c); i++) {
		const struct catalog_type *t = catalog_at(c, i);

		buf_appendf(&b, &err, "%s %.6f %.6f %lld %lld %d %d %.6f %.6f %.6f %s\n", t->name,
			    t->cpu, t->memory_gib, (long long)t->cpu_milli,
			    (long long)t->memory_bytes, t->gpus, t->burstable, t->baseline,
			    t->price, t->spot_price, t->generation);
	}
	return buf_detach(&b, NULL);
}

/* Refreshes and fails the test with the error if that fails. */
static void refresh_ok(struct harness *h, struct catalog_refresh_counts *n)
{
	struct err err = ERR_INIT;

	if (catalog_refresh_counted(h->catalog, h->client, n, &err) < 0)
		fail_msg("%s", err.msg);
}

/* Spot prices come from EC2 (the latest of any zone); on-demand prices and baselines stay. */
static void test_catalog_refresh__prices_merge(void **state)
{
	struct harness *h = *state;
	struct catalog_refresh_counts n;
	struct catalog *now;
	const struct catalog_type *t;

	refresh_ok(h, &n);
	now = catalog_acquire(h->catalog);
	assert_ptr_not_equal(now, h->catalog);
	t = catalog_find(now, "t3.nano");
	assert_non_null(t);
	assert_true(fabs(t->spot_price - 0.003) < 1e-9);
	assert_true(fabs(t->price - 0.0052) < 1e-9);
	assert_true(t->burstable);
	assert_true(fabs(t->baseline - 0.1) < 1e-9);
	t = catalog_find(now, "m5.large");
	assert_true(fabs(t->spot_price - 0.038) < 1e-9); /* 10:00 in 1c beats 09:00 in 1a */
	/* and each zone's price is kept: 1a's and 1c's; 1b, not listed, has the latest */
	assert_int_equal(t->n_zone_spot, 2);
	assert_true(fabs(catalog_zone_spot_price(t, "us-east-1a") - 0.041) < 1e-9);
	assert_true(fabs(catalog_zone_spot_price(t, "us-east-1c") - 0.038) < 1e-9);
	assert_true(fabs(catalog_zone_spot_price(t, "us-east-1b") - 0.038) < 1e-9);
	assert_true(fabs(catalog_find(now, "c5.large")->spot_price - 0.029) < 1e-9);
	/* no spot price from EC2: the shipped one stays */
	assert_true(fabs(catalog_find(now, "t3a.nano")->spot_price - 0.002) < 1e-9);
	assert_true(fabs(catalog_find(now, "p3.2xlarge")->spot_price - 0.918) < 1e-9);
	assert_int_equal(n.types_listed, 8);
	assert_int_equal(n.spot_updated, 3);
	assert_int_equal(n.types_kept, 7);
	assert_int_equal(catalog_count(now), 7);
	/* the architectures come from ProcessorInfo: the file listed t4g.nano as x86_64 */
	assert_int_equal(catalog_find(h->catalog, "t4g.nano")->arch, CATALOG_ARCH_X86_64);
	assert_int_equal(catalog_find(now, "t4g.nano")->arch, CATALOG_ARCH_ARM64);
	assert_int_equal(catalog_find(now, "t3.nano")->arch, CATALOG_ARCH_X86_64);
	assert_string_equal(catalog_region(now), "us-east-1");
	/* both pages of DescribeInstanceTypes and the Linux spot prices were asked for */
	assert_int_equal(stub_count(&h->aws.stub), 3);
	assert_true(form_has(h->aws.stub.reqs[0].body, "Action=DescribeInstanceTypes"));
	assert_true(form_has(h->aws.stub.reqs[1].body, "NextToken=catalog-page-2"));
	assert_true(form_has(h->aws.stub.reqs[2].body, "Action=DescribeSpotPriceHistory"));
	assert_true(form_has(h->aws.stub.reqs[2].body, "ProductDescription.1=Linux%2FUNIX"));
	catalog_release(now);
}

/* A refresh keeps the Spot Instance Advisor's bands of every type, and its spot price, with
 * its source, where EC2 gives none; EC2's spot price wins where it gives one. */
static void test_catalog_refresh__keeps_spot_advice(void **state)
{
	static const char table[] = "{\"date\": \"2030-01-02\", \"regions\": {\"us-east-1\":"
				    " {\"t3.nano\": [3, 50], \"t3a.nano\": [1, 60]}}}";
	struct harness *h = *state;
	struct catalog_refresh_counts n;
	struct err err = ERR_INIT;
	struct catalog *now;
	const struct catalog_type *t;
	double od = catalog_find(h->catalog, "t3a.nano")->price;

	if (catalog_apply_advisor(h->catalog, table, sizeof(table) - 1, &err) < 0)
		fail_msg("%s", err.msg);
	refresh_ok(h, &n);
	now = catalog_acquire(h->catalog);
	t = catalog_find(now, "t3.nano");
	assert_true(fabs(t->spot_price - 0.003) < 1e-9); /* EC2's */
	assert_int_equal(t->spot_band, 3);
	assert_true(strncmp(catalog_price_source(now, t, true), "EC2 spot price history 20", 25) ==
		    0);
	t = catalog_find(now, "t3a.nano");
	assert_true(fabs(t->spot_price - od * 0.4) < 1e-12);
	assert_int_equal(t->spot_band, 1);
	assert_string_equal(catalog_price_source(now, t, true),
			    "Spot Instance Advisor savings of 2030-01-02 off catalog file " FIX
			    "base.json");
	assert_int_equal(catalog_find(now, "m5.large")->spot_band, CATALOG_SPOT_BAND_UNKNOWN);
	catalog_release(now);
}

/* A spot price far from the on-demand one (a broken answer: $0.00001, or 3x on-demand) is
 * dropped; the shipped one stays. */
static void test_catalog_refresh__implausible_spot_price_dropped(void **state)
{
	struct harness *h = *state;
	struct catalog_refresh_counts n;
	struct catalog *now;
	char *spots = h->fake.spots, *p;

	/* t3.nano (on demand $0.0052) at $0.000010, c5.large ($0.085) at $0.290 */
	p = strstr(spots, "<spotPrice>0.003000</spotPrice>");
	assert_non_null(p);
	memcpy(p, "<spotPrice>0.000010</spotPrice>", 31);
	p = strstr(spots, "<spotPrice>0.029");
	assert_non_null(p);
	memcpy(p, "<spotPrice>0.290", 16);
	refresh_ok(h, &n);
	now = catalog_acquire(h->catalog);
	assert_true(fabs(catalog_find(now, "t3.nano")->spot_price - 0.0016) < 1e-9);
	assert_true(fabs(catalog_find(now, "c5.large")->spot_price - 0.031) < 1e-9);
	assert_true(fabs(catalog_find(now, "m5.large")->spot_price - 0.038) < 1e-9);
	assert_int_equal(n.spot_dropped, 2);
	assert_int_equal(n.spot_updated, 1);
	catalog_release(now);
}

/* vCPUs, memory and GPUs follow the API; an unchanged type is not counted as updated. */
static void test_catalog_refresh__sizes_corrected(void **state)
{
	struct harness *h = *state;
	struct catalog_refresh_counts n;
	struct catalog *now;
	const struct catalog_type *t;

	refresh_ok(h, &n);
	now = catalog_acquire(h->catalog);
	t = catalog_find(now, "m5.large");
	assert_true(fabs(t->memory_gib - 8.0) < 1e-9);
	assert_int_equal(t->memory_bytes, 8LL << 30);
	assert_int_equal(t->cpu_milli, 2000);
	assert_true(fabs(t->price - 0.096) < 1e-9);
	t = catalog_find(now, "p3.2xlarge");
	assert_int_equal(t->gpus, 1);
	assert_int_equal(t->memory_bytes, 61LL << 30);
	assert_int_equal(n.types_updated, 2); /* m5.large, and t4g.nano's architecture */
	catalog_release(now);
}

/* A type EC2 lists that the shipped data has no on-demand price for is not added. */
static void test_catalog_refresh__unknown_type_without_price_not_added(void **state)
{
	struct harness *h = *state;
	struct catalog_refresh_counts n;
	struct catalog *now;

	refresh_ok(h, &n);
	now = catalog_acquire(h->catalog);
	assert_null(catalog_find(now, "m7i.large"));
	assert_int_equal(catalog_count_matching(now, "m7i*"), 0);
	assert_int_equal(n.types_unpriced, 1);
	catalog_release(now);
}

/* A type the region no longer offers is dropped; refreshing again changes nothing more. */
static void test_catalog_refresh__missing_type_dropped(void **state)
{
	struct harness *h = *state;
	struct catalog_refresh_counts n;
	struct catalog *now;
	_cleanup_free_ char *first = NULL;
	_cleanup_free_ char *second = NULL;

	refresh_ok(h, &n);
	now = catalog_acquire(h->catalog);
	assert_null(catalog_find(now, "m4.large"));
	assert_int_equal(n.types_dropped, 1);
	first = dump(now);
	catalog_release(now);
	/* the loaded catalog itself is untouched: readers of it are unaffected */
	assert_non_null(catalog_find(h->catalog, "m4.large"));
	assert_int_equal(catalog_count(h->catalog), 8);
	refresh_ok(h, &n);
	now = catalog_acquire(h->catalog);
	second = dump(now);
	assert_string_equal(first, second);
	assert_int_equal(n.types_dropped, 1);
	catalog_release(now);
}

/* Throttling that outlasts the retries fails the refresh, and the catalog stays exactly so. */
static void test_catalog_refresh__throttled_keeps_catalog(void **state)
{
	struct harness *h = *state;
	struct err err = ERR_INIT;
	struct catalog *before, *after;
	_cleanup_free_ char *was = NULL;
	_cleanup_free_ char *is = NULL;

	refresh_ok(h, NULL);
	before = catalog_acquire(h->catalog);
	was = dump(before);
	h->fake.fail_action = "Action=DescribeSpotPriceHistory";
	h->fake.fail_status = 500;
	h->fake.fail_body = h->fake.throttle;
	assert_int_equal(catalog_refresh(h->catalog, h->client, &err), -EAGAIN);
	assert_memory_equal(err.msg, "catalog refresh: ", 17);
	assert_non_null(strstr(err.msg, "DescribeSpotPriceHistory"));
	assert_non_null(strstr(err.msg, "RequestLimitExceeded"));
	/* 3 requests of the first refresh, 2 of the types, 3 tries of the prices */
	assert_int_equal(stub_count(&h->aws.stub), 8);
	after = catalog_acquire(h->catalog);
	assert_ptr_equal(before, after);
	is = dump(after);
	assert_string_equal(was, is);
	catalog_release(before);
	catalog_release(after);
}

/* Refused credentials fail the refresh at once, naming the call; nothing is published. */
static void test_catalog_refresh__auth_failure_keeps_catalog(void **state)
{
	struct harness *h = *state;
	struct err err = ERR_INIT;
	struct catalog *now;
	_cleanup_free_ char *was = dump(h->catalog);
	_cleanup_free_ char *is = NULL;

	h->fake.fail_action = "Action=DescribeInstanceTypes";
	h->fake.fail_status = 401;
	h->fake.fail_body = h->fake.auth;
	assert_int_equal(catalog_refresh(h->catalog, h->client, &err), -EACCES);
	assert_memory_equal(err.msg, "catalog refresh: ", 17);
	assert_non_null(strstr(err.msg, "DescribeInstanceTypes"));
	assert_non_null(strstr(err.msg, "AuthFailure"));
	assert_int_equal(stub_count(&h->aws.stub), 1);
	now = catalog_acquire(h->catalog);
	assert_ptr_equal(now, h->catalog);
	is = dump(now);
	assert_string_equal(was, is);
	catalog_release(now);
}

/* An answer without instance types would empty the catalog: it is refused. */
static void test_catalog_refresh__empty_answer_keeps_catalog(void **state)
{
	struct harness *h = *state;
	struct err err = ERR_INIT;
	struct catalog *now;

	h->fake.empty_types = true;
	assert_int_equal(catalog_refresh(h->catalog, h->client, &err), -EIO);
	assert_non_null(strstr(err.msg, "catalog refresh: DescribeInstanceTypes listed no"));
	now = catalog_acquire(h->catalog);
	assert_ptr_equal(now, h->catalog);
	assert_int_equal(catalog_count(now), 8);
	catalog_release(now);
}

/* A spot pod lands on the type that is cheapest at the refreshed spot prices. */
static void test_catalog_refresh__sizing_uses_refreshed_spot_price(void **state)
{
	struct harness *h = *state;
	struct pod_demand spot = { .memory_bytes = 400LL << 20, .spot = true };
	struct pod_demand big = { .memory_bytes = 7800LL << 20 };
	struct sizing_choice ch;
	struct err err = ERR_INIT;
	struct catalog *now;

	/* shipped: t3.nano $0.0016 beats t3a.nano $0.0020 */
	assert_int_equal(sizing_pick(h->catalog, &spot, NULL, &ch, &err), 0);
	assert_string_equal(ch.instance_type, "t3.nano");
	/* shipped: m5.large has 7.5 GiB, so 7.8 GiB goes to m4.large */
	assert_int_equal(sizing_pick(h->catalog, &big, NULL, &ch, &err), 0);
	assert_string_equal(ch.instance_type, "m4.large");
	refresh_ok(h, NULL);
	now = catalog_acquire(h->catalog);
	/* refreshed: t3.nano's spot price rose to $0.0030 */
	assert_int_equal(sizing_pick(now, &spot, NULL, &ch, &err), 0);
	assert_string_equal(ch.instance_type, "t3a.nano");
	assert_true(fabs(ch.list_price - 0.002) < 1e-9);
	assert_string_equal(ch.runners_up[0].instance_type, "t3.nano");
	assert_true(fabs(ch.runners_up[0].price - 0.003) < 1e-9);
	/* refreshed: m4.large is gone and m5.large really has 8 GiB */
	assert_int_equal(sizing_pick(now, &big, NULL, &ch, &err), 0);
	assert_string_equal(ch.instance_type, "m5.large");
	catalog_release(now);
}

/* What a reader thread saw; stop is shared, set by the test. */
struct reader {
	struct catalog *catalog;
	int *stop;
	int reads, bad;
};

/* Sizes a spot pod over and over with whatever catalog is current. */
static void *reader_main(void *arg)
{
	struct reader *r = arg;
	struct pod_demand spot = { .memory_bytes = 400LL << 20, .spot = true };

	while (!__atomic_load_n(r->stop, __ATOMIC_ACQUIRE) || r->reads == 0) {
		struct catalog *now = catalog_acquire(r->catalog);
		struct sizing_choice ch;
		struct err err = ERR_INIT;
		size_t n = catalog_count(now);

		if (sizing_pick(now, &spot, NULL, &ch, &err) < 0 || (n != 7 && n != 8) ||
		    (strcmp(ch.instance_type, "t3.nano") != 0 &&
		     strcmp(ch.instance_type, "t3a.nano") != 0))
			r->bad++;
		catalog_release(now);
		r->reads++;
	}
	return NULL;
}

/* Sizing on other threads goes on, consistent, while refreshes replace the catalog. */
static void test_catalog_refresh__readers_during_refresh(void **state)
{
	struct harness *h = *state;
	struct reader r[2];
	pthread_t thr[2];
	int stop = 0;

	for (int i = 0; i < 2; i++) {
		r[i] = (struct reader){ .catalog = h->catalog, .stop = &stop };
		assert_int_equal(pthread_create(&thr[i], NULL, reader_main, &r[i]), 0);
	}
	for (int i = 0; i < 5; i++)
		refresh_ok(h, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 2; i++) {
		pthread_join(thr[i], NULL);
		assert_true(r[i].reads > 0);
		assert_int_equal(r[i].bad, 0);
	}
}

/* Opens the fake's gate, letting gated answers go. */
static void open_gate(struct fake_ec2 *f)
{
	pthread_mutex_lock(&f->gate_lock);
	f->gate_open = true;
	pthread_cond_broadcast(&f->gate_cond);
	pthread_mutex_unlock(&f->gate_lock);
}

/* The background refresher returns before EC2 answers, then refreshes once at once. */
static void test_catalog_refresh__background_start(void **state)
{
	struct harness *h = *state;
	struct err err = ERR_INIT;
	struct catalog *now;

	h->fake.gated = true;
	assert_int_equal(catalog_refresh_start(h->catalog, h->client, 3600, &err), 0);
	/* EC2 has not answered yet, and start-up already goes on */
	now = catalog_acquire(h->catalog);
	assert_ptr_equal(now, h->catalog);
	catalog_release(now);
	assert_int_equal(catalog_refresh_start(h->catalog, h->client, 3600, &err), -EEXIST);
	/* stop ends the refresh under way at once (its EC2 call is cancelled), publishing
	 * nothing, instead of waiting for EC2's answer */
	while (stub_count(&h->aws.stub) < 1)
		usleep(10000);
	catalog_refresh_stop(h->catalog);
	open_gate(&h->fake);
	assert_int_equal(stub_count(&h->aws.stub), 1);
	now = catalog_acquire(h->catalog);
	assert_ptr_equal(now, h->catalog);
	catalog_release(now);
	/* stopped: a refresher can be started again; the next refresh is an hour away */
	assert_int_equal(catalog_refresh_start(h->catalog, h->client, 3600, &err), 0);
	for (int i = 0; i < 3000 && (now = catalog_acquire(h->catalog)) == h->catalog; i++) {
		catalog_release(now);
		usleep(10000);
	}
	catalog_refresh_stop(h->catalog);
	assert_int_equal(stub_count(&h->aws.stub), 4);
	assert_ptr_not_equal(now, h->catalog);
	assert_null(catalog_find(now, "m4.large"));
	catalog_release(now);
}

/* A background refresh that fails leaves the catalog as it was. */
static void test_catalog_refresh__background_failure_keeps_catalog(void **state)
{
	struct harness *h = *state;
	struct err err = ERR_INIT;
	struct catalog *now;

	h->fake.fail_action = "Action=DescribeInstanceTypes";
	h->fake.fail_status = 401;
	h->fake.fail_body = h->fake.auth;
	assert_int_equal(catalog_refresh_start(h->catalog, h->client, 3600, &err), 0);
	while (stub_count(&h->aws.stub) < 1) /* a stop before the call would cancel it */
		usleep(10000);
	catalog_refresh_stop(h->catalog);
	assert_int_equal(stub_count(&h->aws.stub), 1);
	now = catalog_acquire(h->catalog);
	assert_ptr_equal(now, h->catalog);
	catalog_release(now);
}

/* The Price List's on-demand prices replace the shipped ones of the types it prices (a price
 * far from the shipped one is not believed); each price says where it came from, and the
 * Cell's sizing reason quotes it. An EC2 refresh afterwards keeps them. */
static void test_catalog_refresh__price_list_replaces_shipped_prices(void **state)
{
	struct harness *h = *state;
	struct pod_demand d = { .memory_bytes = 7000LL << 20 };
	struct catalog_price_counts n;
	struct sizing_choice ch;
	struct err err = ERR_INIT;
	struct catalog *now;
	const struct catalog_type *t;
	const char *src;

	/* loaded: every price is the file's */
	t = catalog_find(h->catalog, "m5.large");
	assert_string_equal(catalog_price_source(h->catalog, t, false),
			    "catalog file " FIX "base.json");
	if (catalog_refresh_prices(h->catalog, h->pricing, &n, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(n.products, 4);
	assert_int_equal(n.priced, 2);
	assert_int_equal(n.not_believed, 1);
	assert_int_equal(n.unpriced, 5);
	now = catalog_acquire(h->catalog);
	t = catalog_find(now, "m5.large");
	assert_true(fabs(t->price - 0.1) < 1e-9);
	assert_int_equal(t->price_from, CATALOG_FROM_API);
	src = catalog_price_source(now, t, false);
	assert_true(strncmp(src, "AWS Price List 20", 17) == 0);
	assert_non_null(strstr(src, " UTC"));
	assert_true(fabs(catalog_find(now, "t3.nano")->price - 0.005) < 1e-9);
	/* $5.00 for c5.large is 59x the shipped $0.085: not believed */
	t = catalog_find(now, "c5.large");
	assert_true(fabs(t->price - 0.085) < 1e-9);
	assert_string_equal(catalog_price_source(now, t, false), "catalog file " FIX "base.json");
	/* spot prices are not the List's */
	assert_string_equal(catalog_price_source(now, catalog_find(now, "m5.large"), true),
			    "catalog file " FIX "base.json");
	assert_int_equal(sizing_pick(now, &d, NULL, &ch, &err), 0);
	assert_string_equal(ch.instance_type, "m5.large");
	assert_non_null(strstr(ch.reason, "m5.large $0.1000/h (AWS Price List 20"));
	catalog_release(now);
	/* the request: GetProducts for the catalog's region */
	assert_int_equal(stub_count(&h->aws.stub), 1);
	assert_non_null(strstr(h->aws.stub.reqs[0].body, "\"regionCode\""));
	assert_non_null(strstr(h->aws.stub.reqs[0].body, "\"us-east-1\""));
	/* an EC2 refresh keeps the List's prices and brings spot prices with their source */
	refresh_ok(h, NULL);
	now = catalog_acquire(h->catalog);
	t = catalog_find(now, "m5.large");
	assert_true(fabs(t->price - 0.1) < 1e-9);
	assert_true(strncmp(catalog_price_source(now, t, false), "AWS Price List 20", 17) == 0);
	assert_true(strncmp(catalog_price_source(now, t, true), "EC2 spot price history 20", 25) ==
		    0);
	assert_string_equal(catalog_price_source(now, catalog_find(now, "t3a.nano"), true),
			    "catalog file " FIX "base.json");
	catalog_release(now);
}

/* A Price List that refuses, or prices none of the catalog's types, changes nothing and says
 * why: which IAM action is missing. */
static void test_catalog_refresh__price_list_failure_keeps_prices(void **state)
{
	struct harness *h = *state;
	struct err err = ERR_INIT;
	struct catalog *now;

	h->fake.prices_status = 400;
	h->fake.prices_body = h->fake.prices_denied;
	assert_int_equal(catalog_refresh_prices(h->catalog, h->pricing, NULL, &err), -EACCES);
	assert_non_null(strstr(err.msg, "catalog prices: AWS Price List GetProducts: "
					"AccessDeniedException"));
	assert_non_null(strstr(err.msg, "need the IAM action pricing:GetProducts"));
	h->fake.prices_status = 200;
	h->fake.prices_body = h->fake.prices_none;
	assert_int_equal(catalog_refresh_prices(h->catalog, h->pricing, NULL, &err), -EIO);
	assert_non_null(strstr(err.msg, "priced none of the 8 instance types of the catalog of "
					"us-east-1 (1 products answered"));
	now = catalog_acquire(h->catalog);
	assert_ptr_equal(now, h->catalog);
	catalog_release(now);
}

/* The background refresher asks the Price List after EC2 when it is on, and not when off. */
static void test_catalog_refresh__background_price_list(void **state)
{
	struct harness *h = *state;
	struct catalog_refresh_config cfg = {
		.interval_s = 3600,
		.price_list = true,
		.price_list_endpoint = h->aws.url,
		.pricing = { .max_attempts = 2, .sleep = awsstub_sleep, .sleep_ctx = &h->aws }
	};
	struct err err = ERR_INIT;
	struct catalog *now = NULL;
	bool priced = false;

	assert_int_equal(catalog_refresh_start_config(h->catalog, h->client, &cfg, &err), 0);
	for (int i = 0; i < 3000 && !priced; i++) {
		now = catalog_acquire(h->catalog);
		priced = catalog_find(now, "m5.large") &&
			 catalog_find(now, "m5.large")->price_from == CATALOG_FROM_API;
		catalog_release(now);
		if (!priced)
			usleep(10000);
	}
	catalog_refresh_stop(h->catalog);
	assert_true(priced);
	/* both pages of DescribeInstanceTypes, the spot prices, then GetProducts */
	assert_int_equal(stub_count(&h->aws.stub), 4);
	now = catalog_acquire(h->catalog);
	assert_null(catalog_find(now, "m4.large")); /* the EC2 refresh's, kept */
	catalog_release(now);
	/* off: EC2 only */
	awsstub_forget(&h->aws);
	cfg.price_list = false;
	assert_int_equal(catalog_refresh_start_config(h->catalog, h->client, &cfg, &err), 0);
	while (stub_count(&h->aws.stub) < 3)
		usleep(10000);
	usleep(100000);
	catalog_refresh_stop(h->catalog);
	assert_int_equal(stub_count(&h->aws.stub), 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_catalog_refresh__prices_merge, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__keeps_spot_advice, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_catalog_refresh__implausible_spot_price_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__sizes_corrected, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_catalog_refresh__unknown_type_without_price_not_added, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__missing_type_dropped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__throttled_keeps_catalog,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__auth_failure_keeps_catalog,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__empty_answer_keeps_catalog,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_catalog_refresh__sizing_uses_refreshed_spot_price, setup, teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__readers_during_refresh, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__background_start, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_catalog_refresh__background_failure_keeps_catalog, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_catalog_refresh__price_list_replaces_shipped_prices, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_catalog_refresh__price_list_failure_keeps_prices, setup, teardown),
		cmocka_unit_test_setup_teardown(test_catalog_refresh__background_price_list, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
