/*
 * podspec_node.c: where a pod may run, as far as its spec binds it: spec.nodeSelector and the
 * required terms of spec.affinity.nodeAffinity. Kiyot reads them for the labels a cell
 * answers for itself (kubernetes.io/arch: which architecture the cell may have); the
 * scheduler has already judged the rest against the virtual node.
 */
#include "podspec_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* Most terms, and requirements of a term, read (the API server sets no bound; a pod that
 * binds itself to a cell's labels needs a handful). */
#define PODSPEC_MAX_NODE_TERMS 64
#define PODSPEC_MAX_NODE_REQS 64

static const char *const node_ops[] = { "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt" };

/* One matchExpressions entry at path. */
static int node_req(const json_t *e, const char *path, struct podspec_node_req *r, struct err *err)
{
	int ret = podspec_expect(e, JSON_OBJECT, path, err);
	bool known = false;

	if (ret >= 0)
		ret = podspec_string(e, "key", path, true, &r->key, err);
	if (ret >= 0)
		ret = podspec_string(e, "operator", path, true, &r->op, err);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < ARRAY_SIZE(node_ops); i++)
		known = known || strcmp(r->op, node_ops[i]) == 0;
	if (!known)
		return err_set(err, EINVAL,
			       "%s.operator: \"%s\" is not one of In, NotIn, Exists, DoesNotExist, "
			       "Gt, Lt",
			       path, r->op);
	return podspec_string_list(e, "values", path, &r->values, &r->n_values, err);
}

/* One nodeSelectorTerms entry at path: its matchExpressions. */
static int node_term(const json_t *t, const char *path, struct podspec_node_term *term,
		     struct err *err)
{
	_cleanup_free_ char *ep = podspec_join(path, "matchExpressions");
	const json_t *exprs;
	size_t i;
	json_t *e;
	int ret = podspec_expect(t, JSON_OBJECT, path, err);

	if (ret < 0)
		return ret;
	exprs = podspec_member(t, "matchExpressions");
	if (!exprs)
		return 0;
	ret = podspec_expect(exprs, JSON_ARRAY, ep, err);
	if (ret < 0)
		return ret;
	if (json_array_size(exprs) > PODSPEC_MAX_NODE_REQS)
		return err_set(err, EINVAL, "%s: more than %d requirements", ep,
			       PODSPEC_MAX_NODE_REQS);
	term->reqs = xcalloc(json_array_size(exprs) + 1, sizeof(*term->reqs));
	json_array_foreach (exprs, i, e) {
		_cleanup_free_ char *rp = podspec_index(ep, i);

		term->n_reqs = i + 1;
		ret = node_req(e, rp, &term->reqs[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int podspec_read_node(const json_t *spec, struct podspec *ps, struct err *err)
{
	static const char path[] =
		"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
	_cleanup_free_ char *tp = NULL;
	const json_t *a, *terms;
	json_t *t;
	size_t i;
	int ret;

	ret = podspec_kv_map(spec, "nodeSelector", "spec", false, &ps->node_selector,
			     &ps->n_node_selector, err);
	if (ret < 0)
		return ret;
	a = podspec_member(spec, "affinity");
	if (a && (ret = podspec_expect(a, JSON_OBJECT, "spec.affinity", err)) < 0)
		return ret;
	a = a ? podspec_member(a, "nodeAffinity") : NULL;
	if (a && (ret = podspec_expect(a, JSON_OBJECT, "spec.affinity.nodeAffinity", err)) < 0)
		return ret;
	a = a ? podspec_member(a, "requiredDuringSchedulingIgnoredDuringExecution") : NULL;
	if (!a)
		return 0;
	if ((ret = podspec_expect(a, JSON_OBJECT, path, err)) < 0)
		return ret;
	tp = podspec_join(path, "nodeSelectorTerms");
	terms = podspec_member(a, "nodeSelectorTerms");
	if (!terms)
		return err_set(err, EINVAL, "%s: required", tp);
	if ((ret = podspec_expect(terms, JSON_ARRAY, tp, err)) < 0)
		return ret;
	if (json_array_size(terms) > PODSPEC_MAX_NODE_TERMS)
		return err_set(err, EINVAL, "%s: more than %d terms", tp, PODSPEC_MAX_NODE_TERMS);
	ps->node_terms = xcalloc(json_array_size(terms) + 1, sizeof(*ps->node_terms));
	json_array_foreach (terms, i, t) {
		_cleanup_free_ char *ip = podspec_index(tp, i);

		ps->n_node_terms = i + 1;
		ret = node_term(t, ip, &ps->node_terms[i], err);
		if (ret < 0)
			return ret;
	}
	return 0;
}

void podspec_node_release(struct podspec *ps)
{
	podspec_kv_free(ps->node_selector, ps->n_node_selector);
	for (size_t i = 0; ps->node_terms && i < ps->n_node_terms; i++) {
		struct podspec_node_term *t = &ps->node_terms[i];

		for (size_t j = 0; t->reqs && j < t->n_reqs; j++) {
			free(t->reqs[j].key);
			free(t->reqs[j].op);
			for (size_t v = 0; t->reqs[j].values && v < t->reqs[j].n_values; v++)
				free(t->reqs[j].values[v]);
			free(t->reqs[j].values);
		}
		free(t->reqs);
	}
	free(ps->node_terms);
	ps->node_selector = NULL;
	ps->node_terms = NULL;
	ps->n_node_selector = ps->n_node_terms = 0;
}
