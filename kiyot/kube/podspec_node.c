/*
 * podspec_node.c: where a pod may run, as far as its spec binds it: the required terms of
 * spec.affinity.nodeAffinity (spec.nodeSelector is a mapping of podspec.c's spec table).
 * Kiyot reads them for the labels a cell answers for itself (kubernetes.io/arch: which
 * architecture the cell may have); the scheduler has already judged the rest against the
 * virtual node.
 */
#include "podspec_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strvec.h"

/* Most terms, and requirements of a term, read (the API server sets no bound; a pod that
 * binds itself to a cell's labels needs a handful). */
#define PODSPEC_MAX_NODE_TERMS 64
#define PODSPEC_MAX_NODE_REQS 64

#define REQ struct podspec_node_req
#define TERM struct podspec_node_term

static int check_operator(void *obj, const json_t *v, const char *path, struct err *err)
{
	static const char *const ops[] = {
		"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", NULL
	};
	char val[64];

	(void)obj;
	if (strv_has((char **)ops, json_string_value(v)))
		return 0;
	return err_set(err, EINVAL, "%s: %s is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
		       path, jf_value_text(v, val));
}

static void req_release(void *e)
{
	REQ *r = e;

	free(r->key);
	free(r->op);
	strv_free(r->values);
}

static const struct jf_field req_fields[] = {
	{ PODSPEC_STR("key", REQ, key), .required = true, .min = 1 },
	{ PODSPEC_STR("operator", REQ, op), .required = true, .min = 1, .check = check_operator },
	{ PODSPEC_STRV("values", REQ, values, n_values) },
	JF_END,
};
static const struct jf_table req_table = {
	.fields = req_fields,
	.null_absent = true,
	.example = "{key: kubernetes.io/arch, operator: In, values: [arm64]}",
	.release = req_release,
};

static void term_release(void *e)
{
	TERM *t = e;

	for (size_t i = 0; t->reqs && i < t->n_reqs; i++)
		req_release(&t->reqs[i]);
	free(t->reqs);
}

/* A term's matchExpressions (its matchFields name no labels). */
static const struct jf_field term_fields[] = {
	{ JF_LIST("matchExpressions", TERM, reqs, n_reqs, REQ, PODSPEC_MAX_NODE_REQS, &req_table) },
	JF_END,
};
static const struct jf_table term_table = { .fields = term_fields,
					    .null_absent = true,
					    .example = "{matchExpressions: [...]}",
					    .release = term_release };

static const struct jf_field required_fields[] = {
	{ JF_LIST("nodeSelectorTerms", struct podspec, node_terms, n_node_terms, TERM,
		  PODSPEC_MAX_NODE_TERMS, &term_table),
	  .required = true },
	JF_END,
};
static const struct jf_table required_table = { .fields = required_fields, .null_absent = true };

/* Preferred affinity binds nothing and is not read. */
static const struct jf_field node_affinity_fields[] = {
	{ JF_OBJECT("requiredDuringSchedulingIgnoredDuringExecution", 0, &required_table) },
	JF_END,
};
static const struct jf_table node_affinity_table = { .fields = node_affinity_fields,
						     .null_absent = true };

static const struct jf_field affinity_fields[] = {
	{ JF_OBJECT("nodeAffinity", 0, &node_affinity_table) },
	JF_END,
};
const struct jf_table podspec_affinity_table = { .fields = affinity_fields, .null_absent = true };

void podspec_node_release(struct podspec *ps)
{
	podspec_kv_free(ps->node_selector, ps->n_node_selector);
	for (size_t i = 0; ps->node_terms && i < ps->n_node_terms; i++)
		term_release(&ps->node_terms[i]);
	free(ps->node_terms);
	ps->node_selector = NULL;
	ps->node_terms = NULL;
	ps->n_node_selector = ps->n_node_terms = 0;
}
