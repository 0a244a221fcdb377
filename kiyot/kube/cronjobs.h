/*
 * cronjobs.h: the cluster's CronJobs (batch/v1) as the warm pool foresees them: when each runs
 * next, how many pods it starts, and the pod they are made of, so their cells can be booted
 * before the run (pool.h, pool.cronJobs).
 *
 *	struct cronjob *v;
 *	size_t n;
 *	if (cronjobs_list(kc, ANN_TARGET_RUNTIME, "kiyot", &v, &n, err) < 0)
 *		log_warn("pool: CronJobs: %s", err->msg);
 *	...
 *	cronjobs_free(v, n);
 *
 * Only the CronJobs whose pod template carries the annotation given (the pods kiyot runs, as
 * the router tells them) and that are not suspended are taken, at most CRONJOBS_MAX. A CronJob
 * kiyot cannot foresee (a schedule it cannot read, a time zone other than UTC) is taken with a
 * problem saying why, for the caller to log.
 *
 * Thread safety: pure functions, but for the client's (kube.h: one thread at a time).
 */
#ifndef KIYOT_CRONJOBS_H
#define KIYOT_CRONJOBS_H

#include <jansson.h>
#include <stddef.h>

#include "cronsched.h"
#include "err.h"

struct kube_client;

#define CRONJOBS_PATH "/apis/batch/v1/cronjobs"
#define CRONJOBS_MAX 1000     /* CronJobs taken from one list */
#define CRONJOBS_PODS_MAX 256 /* pods of one run counted at most */
/* The metadata.uid of the Pod objects made of templates: "cronjob:<namespace>/<name>" */
#define CRONJOBS_UID_PREFIX "cronjob:"

struct cronjob {
	char *ns, *name;
	char *version; /* metadata.resourceVersion; "" when it has none */
	struct cronsched sched;
	/* the pods a run starts: min(parallelism, completions), parallelism 1 and completions
	 * parallelism when unset; at most CRONJOBS_PODS_MAX */
	int pods;
	/* a Pod object of the job template's pod template (podobject_from_json reads it): its
	 * metadata's labels and annotations, name the CronJob's, namespace, uid
	 * CRONJOBS_UID_PREFIX "<ns>/<name>"; its spec */
	json_t *pod;
	char *problem; /* why its runs cannot be foreseen; NULL when they can */
};

/*
 * The CronJobs of list (a CronJobList's JSON) whose pod template's annotation key is value and
 * whose .spec.suspend is not true, in the list's order. Items without a name or namespace, and
 * those whose parallelism is 0, are left out. *out and *n (cronjobs_free) on success; EINVAL
 * when list is no CronJobList (no items array).
 */
int cronjobs_from_list(const json_t *list, const char *key, const char *value, struct cronjob **out,
		       size_t *n, struct err *err);
void cronjobs_free(struct cronjob *v, size_t n);

/* Lists the CronJobs of every namespace with c, then cronjobs_from_list. Errors: EIO when no
 * answer came (kube_request's), EACCES on 401 or 403 naming the RBAC rule kiyot needs, EPROTO
 * on any other answer, EINVAL for a body that is no CronJobList. */
int cronjobs_list(struct kube_client *c, const char *key, const char *value, struct cronjob **out,
		  size_t *n, struct err *err);

#endif
