/*
 * cronjobs.c: the cluster's CronJobs as the warm pool foresees them (cronjobs.h).
 */
#include "cronjobs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "xalloc.h"

void cronjobs_free(struct cronjob *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].ns);
		free(v[i].name);
		free(v[i].version);
		json_decref(v[i].pod);
		free(v[i].problem);
	}
	free(v);
}

/* A Job's count field (parallelism, completions): -1 when unset, else at least 0. */
static json_int_t count_of(const json_t *spec, const char *key)
{
	const json_t *v = json_object_get(spec, key);

	if (!json_is_integer(v))
		return -1;
	return json_integer_value(v) < 0 ? 0 : json_integer_value(v);
}

/* The pods a run of the job spec starts, as the Job controller starts them at once. */
static int pods_of(const json_t *job_spec)
{
	json_int_t p = count_of(job_spec, "parallelism"), c = count_of(job_spec, "completions");

	if (p < 0)
		p = 1;
	if (c >= 0 && c < p)
		p = c;
	return p > CRONJOBS_PODS_MAX ? CRONJOBS_PODS_MAX : (int)p;
}

/* A Pod object of the pod template tmpl for CronJob ns/name. */
static json_t *pod_of(const json_t *tmpl, const char *ns, const char *name)
{
	const json_t *md = json_object_get(tmpl, "metadata");
	json_t *meta = json_object(), *pod = json_object();
	const char *keys[] = { "labels", "annotations" };

	json_object_set_new(meta, "name", json_string(name));
	json_object_set_new(meta, "namespace", json_string(ns));
	json_object_set_new(meta, "uid", json_sprintf("%s%s/%s", CRONJOBS_UID_PREFIX, ns, name));
	for (size_t i = 0; i < 2; i++)
		if (json_is_object(json_object_get(md, keys[i])))
			json_object_set(meta, keys[i], json_object_get(md, keys[i]));
	json_object_set_new(pod, "apiVersion", json_string("v1"));
	json_object_set_new(pod, "kind", json_string("Pod"));
	json_object_set_new(pod, "metadata", meta);
	json_object_set(pod, "spec",
			json_is_object(json_object_get(tmpl, "spec"))
				? json_object_get(tmpl, "spec")
				: json_object());
	if (!json_object_get(pod, "spec") || !json_object_get(meta, "uid"))
		abort(); /* (jansson fails only out of memory) */
	return pod;
}

/* Why the runs of a CronJob with spec cannot be foreseen (a new string), after reading its
 * schedule into *s; NULL when they can. */
static char *problem_of(const json_t *spec, struct cronsched *s)
{
	const char *sched = json_string_value(json_object_get(spec, "schedule"));
	const char *tz = json_string_value(json_object_get(spec, "timeZone"));
	struct err err = ERR_INIT;

	if (!sched)
		return xstrdup(".spec.schedule: missing");
	if (cronsched_parse(s, sched, &err) < 0)
		return xasprintf(".spec.schedule: %s", err.msg);
	if (tz && tz[0] && strcmp(tz, "UTC") && strcmp(tz, "Etc/UTC"))
		return xasprintf(".spec.timeZone \"%.64s\": kiyot foresees schedules in UTC only",
				 tz);
	return NULL;
}

int cronjobs_from_list(const json_t *list, const char *key, const char *value, struct cronjob **out,
		       size_t *n, struct err *err)
{
	const json_t *items = json_object_get(list, "items"), *it;
	struct cronjob *v = NULL;
	size_t len = 0, cap = 0, i;

	if (!json_is_array(items) && !json_is_null(items))
		return err_set(err, EINVAL, "the CronJob list has no items array");
	json_array_foreach (items, i, it) {
		const json_t *md = json_object_get(it, "metadata"),
			     *spec = json_object_get(it, "spec");
		const json_t *job = json_object_get(json_object_get(spec, "jobTemplate"), "spec");
		const json_t *tmpl = json_object_get(job, "template");
		const json_t *ann =
			json_object_get(json_object_get(tmpl, "metadata"), "annotations");
		const char *ns = json_string_value(json_object_get(md, "namespace"));
		const char *name = json_string_value(json_object_get(md, "name"));
		const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
		const char *mark = json_string_value(json_object_get(ann, key));
		struct cronjob *c;

		if (len == CRONJOBS_MAX)
			break;
		if (!ns || !name || !mark || strcmp(mark, value) ||
		    json_is_true(json_object_get(spec, "suspend")) || !pods_of(job))
			continue;
		xgrow((void **)&v, &cap, len + 1, sizeof(*v));
		c = &v[len++];
		*c = (struct cronjob){ .ns = xstrdup(ns),
				       .name = xstrdup(name),
				       .version = xstrdup(rv ? rv : ""),
				       .pods = pods_of(job),
				       .pod = pod_of(tmpl, ns, name) };
		c->problem = problem_of(spec, &c->sched);
	}
	*out = v;
	*n = len;
	return 0;
}

int cronjobs_list(struct kube_client *c, const char *key, const char *value, struct cronjob **out,
		  size_t *n, struct err *err)
{
	json_t *resp = NULL;
	long status = 0;
	int ret;

	if (kube_request(c, "GET", CRONJOBS_PATH, NULL, NULL, &status, &resp, err) < 0)
		return err_wrap(err, "listing CronJobs");
	if (status == 401 || status == 403)
		ret = err_set(err, EACCES,
			      "the API server refused to list CronJobs (%ld: %s); kiyot's account "
			      "needs list on cronjobs in group batch (deploy/rbac.yaml)",
			      status, kube_status_message(resp, "no message"));
	else if (status != 200)
		ret = err_set(err, EPROTO, "listing CronJobs: the API server answered %ld: %s",
			      status, kube_status_message(resp, "no message"));
	else if ((ret = cronjobs_from_list(resp, key, value, out, n, err)) < 0)
		err_wrap(err, "listing CronJobs");
	json_decref(resp);
	return ret;
}
