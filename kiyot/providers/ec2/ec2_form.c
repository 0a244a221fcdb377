/*
 * ec2_form.c: building EC2 Query API forms, and the tags a pod's instance carries (see
 * ec2.h, ec2_internal.h).
 */
#include "ec2_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "codec.h"
#include "xalloc.h"

/* Appends "key=value" to a form, percent-encoding both (RFC 3986 unreserved kept). */
void ec2_form_add(struct buf *f, const char *key, const char *value)
{
	_cleanup_free_ char *k = pct_encode(key);
	_cleanup_free_ char *v = pct_encode(value);
	struct err e = ERR_INIT;

	buf_appendf(f, &e, "%s%s=%s", f->len ? "&" : "", k, v);
}

void ec2_form_addf(struct buf *f, const char *value, const char *keyfmt, ...)
{
	_cleanup_free_ char *key = NULL;
	va_list ap;

	va_start(ap, keyfmt);
	key = xvasprintf(keyfmt, ap);
	va_end(ap);
	ec2_form_add(f, key, value);
}

/* Adds prefix.N.Key / prefix.N.Value for each tag. */
void ec2_form_tags(struct buf *f, const char *prefix, const struct ec2_tags *t)
{
	for (size_t i = 0; i < t->n; i++) {
		ec2_form_addf(f, t->items[i].key, "%s.%zu.Key", prefix, i + 1);
		ec2_form_addf(f, t->items[i].value, "%s.%zu.Value", prefix, i + 1);
	}
}

/* Adds prefix.N for each id, checking the per-call limit. */
int ec2_form_ids(struct buf *f, const char *prefix, const char *const *ids, size_t n)
{
	if (n == 0 || n > EC2_MAX_IDS_PER_CALL)
		return -1;
	for (size_t i = 0; i < n; i++)
		ec2_form_addf(f, ids[i], "%s.%zu", prefix, i + 1);
	return 0;
}

void ec2_tags_release(struct ec2_tags *t)
{
	for (size_t i = 0; i < t->n; i++) {
		free(t->items[i].key);
		free(t->items[i].value);
	}
	free(t->items);
	t->items = NULL;
	t->n = t->cap = 0;
}

void ec2_tags_add(struct ec2_tags *t, const char *key, const char *value)
{
	xgrow((void **)&t->items, &t->cap, t->n + 1, sizeof(*t->items));
	t->items[t->n].key = xstrdup(key);
	t->items[t->n].value = xstrdup(value ? value : "");
	t->n++;
}

const char *ec2_tags_get(const struct ec2_tags *t, const char *key)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->items[i].key, key) == 0)
			return t->items[i].value;
	return NULL;
}

/* True for label keys that must not become tags: Kubernetes' own and AWS-reserved ones. */
static bool label_reserved(const char *key)
{
	return strncmp(key, "kubernetes.io/", 14) == 0 || strncmp(key, "io.kubernetes", 13) == 0 ||
	       strncasecmp(key, "aws:", 4) == 0;
}

/* A label, for sorting by key. */
struct label_ref {
	const char *key;
	const char *value;
};

static int label_cmp(const void *pa, const void *pb)
{
	const struct label_ref *a = pa, *b = pb;

	return strcmp(a->key, b->key);
}

int ec2_pod_tags(const struct ec2_pod_ident *p, struct ec2_tags *out, struct err *err)
{
	struct ec2_tags t = EC2_TAGS_INIT;
	_cleanup_free_ struct label_ref *labels = NULL;
	_cleanup_free_ char *name = NULL;
	size_t ours;

	if (!p->cluster_id || !*p->cluster_id || strlen(p->cluster_id) > EC2_MAX_TAG_VALUE)
		return err_set(err, EINVAL, "tags: the cluster id must be 1 to 256 characters");
	if (p->node && strlen(p->node) > EC2_MAX_TAG_VALUE)
		return err_set(err, EINVAL, "tags: the node name must be at most 256 characters");
	if (p->standby) {
		if (!p->cell_id || !*p->cell_id || strlen(p->cell_id) > EC2_MAX_TAG_VALUE - 14)
			return err_set(err, EINVAL,
				       "tags: a standby cell's id must be 1 to 242 characters");
		ec2_tags_add(&t, EC2_TAG_CLUSTER_ID, p->cluster_id);
		if (p->node && *p->node)
			ec2_tags_add(&t, EC2_TAG_NODE, p->node);
		ec2_tags_add(&t, EC2_TAG_CELL_ID, p->cell_id);
		ec2_tags_add(&t, EC2_TAG_STANDBY, p->cluster_id);
		name = xasprintf("kiyot-standby-%s", p->cell_id);
		ec2_tags_add(&t, "Name", name);
		*out = t;
		return 0;
	}
	if (!p->pod_uid || !*p->pod_uid || strlen(p->pod_uid) > EC2_MAX_TAG_VALUE)
		return err_set(err, EINVAL, "tags: the pod uid must be 1 to 256 characters");
	ec2_tags_add(&t, EC2_TAG_CLUSTER_ID, p->cluster_id);
	if (p->node && *p->node)
		ec2_tags_add(&t, EC2_TAG_NODE, p->node);
	if (p->cell_id && *p->cell_id)
		ec2_tags_add(&t, EC2_TAG_CELL_ID, p->cell_id);
	ec2_tags_add(&t, EC2_TAG_POD_UID, p->pod_uid);
	if (p->pod_name)
		ec2_tags_add(&t, EC2_TAG_POD_NAME, p->pod_name);
	if (p->pod_namespace)
		ec2_tags_add(&t, EC2_TAG_POD_NAMESPACE, p->pod_namespace);
	name = xasprintf("kiyot-%s-%s", p->pod_namespace ? p->pod_namespace : "",
			 p->pod_name ? p->pod_name : p->pod_uid);
	if (strlen(name) > EC2_MAX_TAG_VALUE)
		name[EC2_MAX_TAG_VALUE] = '\0';
	ec2_tags_add(&t, "Name", name);
	/* a pod name or namespace too long for a tag value is cut, like Name */
	for (size_t i = 0; i < t.n; i++)
		if (strlen(t.items[i].value) > EC2_MAX_TAG_VALUE)
			t.items[i].value[EC2_MAX_TAG_VALUE] = '\0';
	ours = t.n;
	labels = xcalloc(p->n_labels ? p->n_labels : 1, sizeof(*labels));
	for (size_t i = 0; i < p->n_labels; i++)
		labels[i] = (struct label_ref){ p->label_keys[i],
						p->label_values[i] ? p->label_values[i] : "" };
	if (p->n_labels)
		qsort(labels, p->n_labels, sizeof(*labels), label_cmp);
	for (size_t i = 0; i < p->n_labels && t.n < EC2_MAX_TAGS; i++) {
		const struct label_ref *l = &labels[i];
		bool clash = false;

		if (!l->key || !*l->key || label_reserved(l->key) ||
		    strlen(l->key) > EC2_MAX_TAG_KEY || strlen(l->value) > EC2_MAX_TAG_VALUE)
			continue;
		for (size_t j = 0; j < ours && !clash; j++)
			clash = strcmp(t.items[j].key, l->key) == 0;
		if (!clash)
			ec2_tags_add(&t, l->key, l->value);
	}
	*out = t;
	return 0;
}
