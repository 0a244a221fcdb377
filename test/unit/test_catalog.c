/* Unit tests for kiyot/catalog: the embedded EC2 instance catalog and catalog files. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sizing/catalog.h"
#include "sizing/catalog_advisor.h"

/* text (len bytes) is NUL-terminated and is the file at path, of more than 100 KB. */
static void assert_embedded_is_file(const char *text, size_t len, const char *path)
{
	FILE *f = fopen(path, "rb");
	char *file = malloc(len + 1);

	assert_non_null(f);
	assert_true(len > 100000);
	assert_int_equal(text[len], '\0');
	assert_int_equal(fread(file, 1, len + 1, f), len);
	assert_memory_equal(file, text, len);
	fclose(f);
	free(file);
}

/* The embedded catalog is in the binary, NUL-terminated, and is the shipped JSON file. */
static void test_catalog__embedded_text_is_the_data_file(void **state)
{
	size_t len = 0;
	const char *text = catalog_embedded(&len);
	(void)state;

	assert_embedded_is_file(text, len, "kiyot/sizing/data/aws-instance-catalog.json");
}

/* us-east-1 has its 1291 types with sizes, GPU counts, burstable baselines, both prices and
 * architectures. */
static void test_catalog__us_east_1_types(void **state)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	const struct catalog_type *t;
	(void)state;

	if (catalog_load("us-east-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(catalog_region(c), "us-east-1");
	assert_int_equal(catalog_count(c), 1291);
	assert_non_null(catalog_at(c, 1290));
	assert_null(catalog_at(c, 1291));
	assert_null(catalog_price_note(c)); /* its own prices */
	/* every price says where it came from: the shipped snapshot, with its date; a spot
	 * price the Spot Instance Advisor's savings gave, that and the table's date */
	assert_string_equal(catalog_price_source(c, catalog_at(c, 0), false),
			    "shipped snapshot of " CATALOG_SNAPSHOT_DATE);
	assert_string_equal(catalog_price_source(c, catalog_at(c, 0), true),
			    "Spot Instance Advisor savings of 2025-06-28 off shipped snapshot "
			    "of " CATALOG_SNAPSHOT_DATE);

	t = catalog_find(c, "t3.nano");
	assert_non_null(t);
	assert_string_equal(t->name, "t3.nano");
	assert_true(t->cpu == 2);
	assert_int_equal(t->cpu_milli, 2000);
	assert_int_equal(t->memory_bytes, 536870912);
	assert_true(t->burstable);
	assert_true(t->baseline == 0.1);
	assert_true(t->price == 0.0052);
	assert_true(fabs(t->spot_price - 0.0052 * 0.21) < 1e-12); /* the Advisor's 79% */
	assert_int_equal(t->spot_from, CATALOG_FROM_ADVISOR);
	assert_int_equal(t->gpus, 0);
	assert_string_equal(t->generation, "current");
	assert_int_equal(t->arch, CATALOG_ARCH_X86_64);
	assert_int_equal(t->spot_band, 0);

	t = catalog_find(c, "t4g.nano");
	assert_non_null(t);
	assert_int_equal(t->arch, CATALOG_ARCH_ARM64);
	assert_true(t->burstable);
	assert_true(t->baseline == 0.1);
	assert_true(t->price == 0.0042);

	t = catalog_find(c, "m7g.large");
	assert_non_null(t);
	assert_int_equal(t->arch, CATALOG_ARCH_ARM64);
	assert_int_equal(t->cpu_milli, 2000);
	assert_int_equal(t->memory_bytes, 8 * 1073741824LL);

	t = catalog_find(c, "t2.xlarge");
	assert_non_null(t);
	assert_true(fabs(t->baseline - 0.9) < 1e-9); /* 22.5% of 4 vCPUs */
	assert_null(catalog_find(c, "m1.small"));    /* previous generations are left out */

	t = catalog_find(c, "g4dn.xlarge");
	assert_non_null(t);
	assert_int_equal(t->gpus, 1);

	assert_null(catalog_find(c, "t3.nan"));
	catalog_free(c);
}

/* A region given as another's list times a factor has that list's types at those prices, and
 * says its prices are estimated. */
static void test_catalog__derived_region_scales_prices(void **state)
{
	static const char text[] =
		"{\"base-1\": [{\"instanceType\": \"x.small\", \"cpu\": 1, \"memory\": 2,"
		" \"price\": 0.1, \"spotPrice\": 0.04, \"arch\": [\"arm64\"]}],"
		" \"far-1\": {\"from\": \"base-1\", \"priceFactor\": 1.5},"
		" \"chain-1\": {\"from\": \"far-1\", \"priceFactor\": 1}}";
	struct err err = ERR_INIT;
	struct catalog *c = NULL, *eu = NULL, *us = NULL;
	const struct catalog_type *t;
	(void)state;

	if (catalog_load_text(text, strlen(text), "far-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	t = catalog_find(c, "x.small");
	assert_non_null(t);
	assert_true(fabs(t->price - 0.15) < 1e-12);
	assert_true(fabs(t->spot_price - 0.06) < 1e-12);
	assert_int_equal(t->arch, CATALOG_ARCH_ARM64);
	assert_string_equal(catalog_price_note(c),
			    "on-demand and spot prices estimated as base-1's x 1.5");
	catalog_free(c);
	assert_int_equal(catalog_load_text(text, strlen(text), "chain-1", &c, &err), -EINVAL);
	assert_string_equal(err.msg, "region chain-1: \"from\": region \"far-1\" must be listed "
				     "with its instance types");

	/* the shipped regions other than us-east-1 are derived from it */
	if (catalog_load("eu-west-1", &eu, &err) < 0 || catalog_load("us-east-1", &us, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(catalog_count(eu), catalog_count(us));
	assert_true(fabs(catalog_find(eu, "m7g.large")->price -
			 catalog_find(us, "m7g.large")->price * 1.115) < 1e-9);
	assert_non_null(strstr(catalog_price_note(eu), "estimated as us-east-1's"));
	assert_string_equal(catalog_price_source(eu, catalog_find(eu, "m7g.large"), false),
			    "shipped snapshot of " CATALOG_SNAPSHOT_DATE
			    ", estimated as us-east-1's x 1.115");
	catalog_free(eu);
	catalog_free(us);
}

/* Exact names and globs select types; a glob that matches nothing counts zero. */
static void test_catalog__glob_matching(void **state)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	size_t t3 = 0;
	(void)state;

	assert_int_equal(catalog_load("us-east-1", &c, &err), 0);
	for (size_t i = 0; i < catalog_count(c); i++)
		t3 += strncmp(catalog_at(c, i)->name, "t3.", 3) == 0;
	assert_int_equal(catalog_count_matching(c, "t3.*"), t3);
	assert_int_equal(t3, 7);
	assert_int_equal(catalog_count_matching(c, "t3.nano"), 1);
	assert_int_equal(catalog_count_matching(c, "t3?.nano"), 1);
	assert_int_equal(catalog_count_matching(c, "t[23].nano"), 2);
	assert_int_equal(catalog_count_matching(c, "c5.hugeX"), 0);
	assert_true(catalog_type_matches(catalog_find(c, "c5.xlarge"), "c5*"));
	assert_false(catalog_type_matches(catalog_find(c, "c5.xlarge"), "c4*"));
	assert_int_equal(catalog_count_matching(c, "*"), catalog_count(c));
	catalog_free(c);
}

/* Every region of the shipped catalog loads, and loading twice gives equal catalogs. */
static void test_catalog__every_region_loads(void **state)
{
	static const char *const regions[] = { "af-south-1", "ap-east-1", "eu-west-1",
					       "sa-east-1",  "us-west-2", "me-south-1" };
	(void)state;

	for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
		struct err err = ERR_INIT;
		struct catalog *a = NULL, *b = NULL;

		if (catalog_load(regions[i], &a, &err) < 0 ||
		    catalog_load(regions[i], &b, &err) < 0)
			fail_msg("%s: %s", regions[i], err.msg);
		assert_true(catalog_count(a) > 0);
		assert_int_equal(catalog_count(a), catalog_count(b));
		assert_string_equal(catalog_at(a, 0)->name, catalog_at(b, 0)->name);
		catalog_free(a);
		catalog_free(b);
	}
}

/* An unknown region is refused with the list of known ones, sorted. */
static void test_catalog__unknown_region_lists_valid_ones(void **state)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	(void)state;

	assert_int_equal(catalog_load("mars-1", &c, &err), -ENOENT);
	assert_null(c);
	assert_string_equal(err.msg,
			    "unknown region \"mars-1\"; known regions: af-south-1, ap-east-1, "
			    "ap-northeast-1, ap-northeast-2, ap-south-1, ap-southeast-1, "
			    "ap-southeast-2, ca-central-1, eu-central-1, eu-north-1, eu-south-1, "
			    "eu-west-1, eu-west-2, eu-west-3, me-south-1, sa-east-1, us-east-1, "
			    "us-east-2, us-west-1, us-west-2");
}

/* A refreshed catalog file replaces the embedded one; missing optional fields get defaults. */
static void test_catalog__load_file(void **state)
{
	static const char text[] =
		"{\"lab-1\": [{\"instanceType\": \"x.small\", \"cpu\": 1, \"memory\": 2,"
		" \"price\": 0.01},"
		" {\"instanceType\": \"x.gpu\", \"cpu\": 8, \"memory\": 61, \"gpu\": 2,"
		" \"burstable\": false, \"baseline\": 8, \"price\": 1.5, \"spotPrice\": 0.5,"
		" \"generation\": \"previous\", \"arch\": [\"x86_64\", \"i386\", \"arm64\"],"
		" \"spotBand\": 2}]}";
	char path[] = "/tmp/test_catalog_XXXXXX";
	int fd = mkstemp(path);
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	const struct catalog_type *t;
	char want[256];
	(void)state;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	if (catalog_load_file(path, "lab-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(catalog_count(c), 2);
	t = catalog_find(c, "x.small");
	assert_true(t->spot_price == 0.01);
	assert_true(t->baseline == 1);
	assert_int_equal(t->gpus, 0);
	assert_int_equal(t->memory_bytes, 2147483648LL);
	assert_string_equal(t->generation, "current");
	assert_int_equal(t->arch, CATALOG_ARCH_X86_64); /* no arch: x86_64 */
	assert_int_equal(t->spot_band, CATALOG_SPOT_BAND_UNKNOWN);
	t = catalog_find(c, "x.gpu");
	assert_int_equal(t->gpus, 2);
	assert_string_equal(t->generation, "previous");
	assert_int_equal(t->arch, CATALOG_ARCH_ALL); /* i386 skipped */
	assert_int_equal(t->spot_band, 2);
	catalog_free(c);

	assert_int_equal(catalog_load_file(path, "us-east-1", &c, &err), -ENOENT);
	snprintf(want, sizeof(want),
		 "instance catalog %s: unknown region \"us-east-1\"; known regions: lab-1", path);
	assert_string_equal(err.msg, want);
	unlink(path);
	assert_true(catalog_load_file(path, "lab-1", &c, &err) < 0);
	assert_non_null(strstr(err.msg, path));
}

/* The embedded Spot Instance Advisor table is in the binary, NUL-terminated, and is the shipped
 * file. */
static void test_catalog__embedded_advisor_is_the_data_file(void **state)
{
	size_t len = 0;
	const char *text = catalog_advisor_embedded(&len);
	(void)state;

	assert_embedded_is_file(text, len, "kiyot/sizing/data/aws-spot-advisor.json");
}

/* catalog_load gives each type the Advisor lists in the region its band and, where the table
 * has savings, a spot price of on-demand less them; a derived region takes its own region's
 * advice on its estimated on-demand price; a type the table lacks, or lists without savings,
 * keeps the catalog's spot price and has no band or that band. */
static void test_catalog__loads_the_regions_spot_advice(void **state)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	const struct catalog_type *t;
	(void)state;

	if (catalog_load("eu-west-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	t = catalog_find(c, "t3.nano"); /* eu-west-1: [0, 54] */
	assert_int_equal(t->spot_band, 0);
	assert_true(fabs(t->spot_price - 0.0052 * 1.115 * 0.46) < 1e-12);
	assert_string_equal(catalog_price_source(c, t, true),
			    "Spot Instance Advisor savings of 2025-06-28 off shipped snapshot of "
			    "2026-07-20, estimated as us-east-1's x 1.115");
	t = catalog_find(c, "c8a.large"); /* newer than the table: no band, spot as shipped */
	assert_non_null(t);
	assert_int_equal(t->spot_band, CATALOG_SPOT_BAND_UNKNOWN);
	assert_int_equal(t->spot_from, CATALOG_FROM_SHIPPED);
	assert_string_equal(catalog_price_source(c, t, true),
			    "shipped snapshot of 2026-07-20, estimated as us-east-1's x 1.115");
	catalog_free(c);

	if (catalog_load("ca-central-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	t = catalog_find(c, "p5.48xlarge"); /* [0]: a band, no usable savings */
	assert_int_equal(t->spot_band, 0);
	assert_int_equal(t->spot_from, CATALOG_FROM_SHIPPED);
	assert_true(fabs(t->spot_price - 38.528 * 1.1034) < 1e-9);
	catalog_free(c);
}

/* A table applied to a catalog: bands and savings for the types it lists in the catalog's
 * region, nothing for others or for a region it lacks; a bad table is refused saying where
 * and changes nothing. */
static void test_catalog__apply_advisor_table(void **state)
{
	static const char cat[] =
		"{\"lab-1\": [{\"instanceType\": \"a.small\", \"cpu\": 1, \"memory\": 1,"
		" \"price\": 0.1, \"spotPrice\": 0.05},"
		" {\"instanceType\": \"b.small\", \"cpu\": 1, \"memory\": 1, \"price\": 0.2,"
		" \"spotPrice\": 0.1, \"spotBand\": 3},"
		" {\"instanceType\": \"c.small\", \"cpu\": 1, \"memory\": 1, \"price\": 0.3,"
		" \"spotPrice\": 0.15}]}";
	static const char table[] =
		"{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\":"
		" {\"a.small\": [1, 70], \"b.small\": [4], \"z.small\": [0, 10]},"
		" \"lab-2\": {\"c.small\": [0, 90]}}}";
	static const struct cbad2 {
		const char *json, *msg;
	} bad[] = {
		{ "[]", "spot advisor table: must be an object with \"date\" and \"regions\"" },
		{ "{\"date\": \"2030-1-2\", \"regions\": {}}", "\"date\" must be YYYY-MM-DD" },
		{ "{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\": []}}",
		  "region lab-1: must be an object of instance types" },
		{ "{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\": {\"a.small\": [5, 1]}}}",
		  "\"a.small\": the band must be a whole number from 0 to 4" },
		{ "{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\": {\"a.small\": [1, 100]}}}",
		  "\"a.small\": the savings must be a whole percentage from 0 to 99" },
		{ "{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\": {\"a.small\": [1, -3]}}}",
		  "the savings must be a whole percentage" },
		{ "{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\": {\"a.small\": 1}}}",
		  "\"a.small\": must be [band] or [band, savings]" },
		{ "{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\": {\"\": [1]}}}",
		  "an instance type name must have 1 to 63 characters" },
		{ "{\"date\": \"2030-01-02\", \"regions\": {\"lab-1\": {\"a\": [1], \"a\": [2]}}}",
		  "spot advisor table: line 1" },
	};
	struct err err = ERR_INIT;
	struct catalog *c = NULL;
	const struct catalog_type *t;
	(void)state;

	if (catalog_load_text(cat, strlen(cat), "lab-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	/* a catalog text is read as it is: no advice */
	assert_int_equal(catalog_find(c, "a.small")->spot_band, CATALOG_SPOT_BAND_UNKNOWN);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = (struct err)ERR_INIT;
		assert_int_equal(catalog_apply_advisor(c, bad[i].json, strlen(bad[i].json), &err),
				 -EINVAL);
		if (!strstr(err.msg, bad[i].msg))
			fail_msg("case %zu: got \"%s\", want \"%s\"", i, err.msg, bad[i].msg);
	}
	t = catalog_find(c, "a.small");
	assert_int_equal(t->spot_band, CATALOG_SPOT_BAND_UNKNOWN);
	assert_true(t->spot_price == 0.05);

	if (catalog_apply_advisor(c, table, strlen(table), &err) < 0)
		fail_msg("%s", err.msg);
	t = catalog_find(c, "a.small");
	assert_int_equal(t->spot_band, 1);
	assert_true(fabs(t->spot_price - 0.03) < 1e-12);
	assert_string_equal(catalog_price_source(c, t, true),
			    "Spot Instance Advisor savings of 2030-01-02 off instance catalog");
	assert_string_equal(catalog_price_source(c, t, false), "instance catalog");
	t = catalog_find(c, "b.small"); /* a band without savings: the catalog's price */
	assert_int_equal(t->spot_band, 4);
	assert_true(t->spot_price == 0.1);
	assert_string_equal(catalog_price_source(c, t, true), "instance catalog");
	t = catalog_find(c, "c.small"); /* only another region's advice */
	assert_int_equal(t->spot_band, CATALOG_SPOT_BAND_UNKNOWN);
	assert_true(t->spot_price == 0.15);
	catalog_free(c);
}

/* The bands in words, as the Cell's reason and the EC2 provider's notes show them. */
static void test_catalog__spot_band_names(void **state)
{
	(void)state;
	assert_string_equal(catalog_spot_band_name(0), "<5%");
	assert_string_equal(catalog_spot_band_name(2), "10-15%");
	assert_string_equal(catalog_spot_band_name(4), ">20%");
	assert_string_equal(catalog_spot_band_name(CATALOG_SPOT_BAND_UNKNOWN), "unknown");
	assert_string_equal(catalog_spot_band_name(5), "unknown");
}

struct cbad {
	const char *json;
	const char *msg;
};

/* Malformed catalogs are refused with the region, entry and field at fault. */
static void test_catalog__malformed_entries(void **state)
{
	static const struct cbad cases[] = {
		{ "[]", "catalog must be an object of regions" },
		{ "{\"r\": {}}", "region r: must be a list of instance types, or {\"from\": " },
		{ "{\"r\": {\"from\": \"r\", \"priceFactor\": 0}}",
		  "region r: \"priceFactor\" must be from 0.01 to 100" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": 1, \"price\": 1,"
		  " \"arch\": [\"sparc\"]}]}",
		  "region r, entry 0 (a): \"arch\" must list x86_64 or arm64" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": 1, \"price\": 1,"
		  " \"arch\": \"arm64\"}]}",
		  "region r, entry 0 (a): \"arch\" must be a list of architectures" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": 1, \"price\": 1,"
		  " \"spotBand\": 5}]}",
		  "region r, entry 0 (a): \"spotBand\" must be a whole number from 0 to 4" },
		{ "{\"r\": [1]}", "region r, entry 0 (no name): must be an object" },
		{ "{\"r\": [{\"cpu\": 1}]}",
		  "region r, entry 0 (no name): \"instanceType\" must be a non-empty string" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"memory\": 1, \"price\": 1}]}",
		  "region r, entry 0 (a): \"cpu\" must be a number" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": \"1\", \"price\": "
		  "1}]}",
		  "region r, entry 0 (a): \"memory\" must be a number" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": 1, \"price\": -1}]}",
		  "region r, entry 0 (a): \"price\" must not be negative" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": 1, \"price\": 1,"
		  " \"gpu\": 0.5}]}",
		  "region r, entry 0 (a): \"gpu\" must be a whole number from 0 to 1024" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": 1, \"price\": 1,"
		  " \"burstable\": 1}]}",
		  "region r, entry 0 (a): \"burstable\" must be true or false" },
		{ "{\"r\": [{\"instanceType\": \"a\", \"cpu\": 1, \"memory\": 1, \"price\": 1},"
		  " {\"instanceType\": \"a\", \"cpu\": 2, \"memory\": 1, \"price\": 1}]}",
		  "region r, entry 1 (a): listed twice" },
		{ "{\"r\": [", "line 1, column 7: ']' expected near end of file" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct err err = ERR_INIT;
		struct catalog *c = NULL;

		if (catalog_load_text(cases[i].json, strlen(cases[i].json), "r", &c, &err) >= 0)
			fail_msg("accepted %s", cases[i].json);
		assert_null(c);
		if (strncmp(err.msg, cases[i].msg, strlen(cases[i].msg)) != 0)
			fail_msg("%s: message %s", cases[i].json, err.msg);
	}
}

/* One malloc'd type for catalog_new. */
static struct catalog_type *one_type(const char *name, double spot)
{
	struct catalog_type *t = calloc(1, sizeof(*t));

	t->name = strdup(name);
	t->generation = strdup("current");
	t->cpu = 2;
	t->cpu_milli = 2000;
	t->memory_gib = 1;
	t->memory_bytes = 1LL << 30;
	t->baseline = 2;
	t->price = 0.02;
	t->spot_price = spot;
	return t;
}

/*
 * Publishing a new catalog changes what catalog_acquire returns, never what a reader already
 * holds, nor the loaded catalog's own types; the last holder frees a replaced catalog.
 */
static void test_catalog__publish_keeps_readers_snapshot(void **state)
{
	struct err err = ERR_INIT;
	struct catalog *c = NULL, *first, *second, *third;
	(void)state;

	if (catalog_load("us-east-1", &c, &err) < 0)
		fail_msg("%s", err.msg);
	first = catalog_acquire(c);
	assert_ptr_equal(first, c);
	catalog_publish(c, catalog_new("us-east-1", one_type("x1.small", 0.01), 1));
	second = catalog_acquire(c);
	assert_ptr_not_equal(second, c);
	assert_int_equal(catalog_count(second), 1);
	assert_string_equal(catalog_region(second), "us-east-1");
	assert_non_null(catalog_find(second, "x1.small"));
	assert_int_equal(catalog_count(first), 1291);
	assert_non_null(catalog_find(c, "t3.nano"));
	catalog_publish(c, catalog_new("us-east-1", one_type("x2.small", 0.02), 1));
	/* the reader of the replaced catalog still reads it whole */
	assert_string_equal(catalog_at(second, 0)->name, "x1.small");
	assert_true(catalog_at(second, 0)->spot_price == 0.01);
	third = catalog_acquire(c);
	assert_string_equal(catalog_at(third, 0)->name, "x2.small");
	catalog_release(second);
	catalog_release(third);
	catalog_release(first);
	/* frees c and the catalog published for it */
	catalog_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_catalog__embedded_text_is_the_data_file),
		cmocka_unit_test(test_catalog__us_east_1_types),
		cmocka_unit_test(test_catalog__embedded_advisor_is_the_data_file),
		cmocka_unit_test(test_catalog__loads_the_regions_spot_advice),
		cmocka_unit_test(test_catalog__apply_advisor_table),
		cmocka_unit_test(test_catalog__spot_band_names),
		cmocka_unit_test(test_catalog__glob_matching),
		cmocka_unit_test(test_catalog__derived_region_scales_prices),
		cmocka_unit_test(test_catalog__every_region_loads),
		cmocka_unit_test(test_catalog__unknown_region_lists_valid_ones),
		cmocka_unit_test(test_catalog__load_file),
		cmocka_unit_test(test_catalog__malformed_entries),
		cmocka_unit_test(test_catalog__publish_keeps_readers_snapshot),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
