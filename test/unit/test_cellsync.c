/*
 * Unit tests for kiyot/cells/cellsync.c: Cell objects kept in step with kiyot's sandboxes,
 * against a fake API server on 127.0.0.1 (test/fixtures/ec2/httpstub.h with a handler) that
 * keeps Cell objects with resource versions and answers list (by label selector), get,
 * create, replace and delete as the API server does, conflicts included. It can also answer
 * as a cluster without the CRD, or one that refuses kiyot's credentials.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <unistd.h>

#include "../fixtures/ec2/httpstub.h"
#include "cells/cellsync.h"
#include "crihost.h"
#include "kube/kube.h"

#define CELLS "/apis/kiyot.elotl.co/v1/cells"
#define NODE "node-a"

enum api_mode {
	API_OK,
	API_NO_CRD,	/* the cells resource does not exist: 404 */
	API_FORBIDDEN,	/* RBAC refuses kiyot: 403 */
	API_CONFLICTED, /* every replace conflicts (someone else keeps writing) */
};

/* The fake API server's Cell objects. */
struct api {
	pthread_mutex_t lock;
	json_t *cells; /* name -> object */
	int version;   /* the last resourceVersion given */
	enum api_mode mode;
	int creates, replaces, deletes; /* successful writes */
	char *reply;			/* the last answer's body */
};

static const char *label_of(json_t *obj, const char *key)
{
	return json_string_value(
		json_object_get(json_object_get(json_object_get(obj, "metadata"), "labels"), key));
}

static void set_version(struct api *a, json_t *obj)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", ++a->version);
	json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion", json_string(v));
}

static int reply(struct api *a, struct stub_reply *out, int status, json_t *body)
{
	free(a->reply);
	a->reply = body ? json_dumps(body, JSON_COMPACT) : strdup("{}");
	json_decref(body);
	*out = (struct stub_reply){ status, a->reply, NULL };
	return status;
}

static json_t *status_body(const char *reason, const char *message, int code)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:i}", "kind", "Status", "status", "Failure", "reason",
			 reason, "message", message, "code", code);
}

/* The selector kiyot lists with: this node's cells of cluster-test. */
#define SELECTOR                                                                                   \
	"?labelSelector=kiyot.elotl.co%2Fcluster-id%3Dcluster-test%2Ckiyot.elotl.co%2Fnode%"       \
	"3D" NODE

static void list(struct api *a, struct stub_reply *out)
{
	json_t *items = json_array(), *obj;
	const char *name;

	json_object_foreach (a->cells, name, obj)
		if (strcmp(label_of(obj, CELLSYNC_LABEL_NODE), NODE) == 0)
			json_array_append(items, obj);
	reply(a, out, 200, json_pack("{s:s,s:o}", "kind", "CellList", "items", items));
}

static void put(struct api *a, const char *name, const char *body, struct stub_reply *out)
{
	json_t *obj = json_loads(body, 0, NULL);
	json_t *have = json_object_get(a->cells, name);
	const char *rv = json_string_value(
		json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
	const char *cur = json_string_value(
		json_object_get(json_object_get(have, "metadata"), "resourceVersion"));

	if (!have) {
		json_decref(obj);
		reply(a, out, 404, status_body("NotFound", "not found", 404));
	} else if (a->mode == API_CONFLICTED || !rv || strcmp(rv, cur) != 0) {
		json_decref(obj);
		set_version(a, have); /* it moved on again */
		reply(a, out, 409, status_body("Conflict", "the object has been modified", 409));
	} else {
		set_version(a, obj);
		json_object_set(a->cells, name, obj);
		a->replaces++;
		reply(a, out, 200, obj);
	}
}

static void api_handler(struct stub *s, const struct stub_request *rq, struct stub_reply *out)
{
	struct api *a = s->ctx;
	const char *name = strncmp(rq->path, CELLS "/", strlen(CELLS) + 1) == 0
				   ? rq->path + strlen(CELLS) + 1
				   : NULL;
	json_t *have = name ? json_object_get(a->cells, name) : NULL;

	pthread_mutex_lock(&a->lock);
	if (a->mode == API_NO_CRD)
		reply(a, out, 404,
		      status_body("NotFound", "the server could not find the resource", 404));
	else if (a->mode == API_FORBIDDEN)
		reply(a, out, 403,
		      status_body("Forbidden",
				  "cells.kiyot.elotl.co is forbidden: User "
				  "\"system:node:node-a\" cannot list resource",
				  403));
	else if (strcmp(rq->method, "GET") == 0 && strcmp(rq->path, CELLS SELECTOR) == 0)
		list(a, out);
	else if (strcmp(rq->method, "GET") == 0 && have)
		reply(a, out, 200, json_incref(have));
	else if (strcmp(rq->method, "POST") == 0 && strcmp(rq->path, CELLS) == 0) {
		json_t *obj = json_loads(rq->body, 0, NULL);
		const char *n = json_string_value(
			json_object_get(json_object_get(obj, "metadata"), "name"));

		if (json_object_get(a->cells, n)) {
			json_decref(obj);
			reply(a, out, 409, status_body("AlreadyExists", "already exists", 409));
		} else {
			set_version(a, obj);
			json_object_set(a->cells, n, obj);
			a->creates++;
			reply(a, out, 201, obj);
		}
	} else if (strcmp(rq->method, "PUT") == 0 && name)
		put(a, name, rq->body, out);
	else if (strcmp(rq->method, "DELETE") == 0 && have) {
		json_object_del(a->cells, name);
		a->deletes++;
		reply(a, out, 200, NULL);
	} else
		reply(a, out, 404, status_body("NotFound", "not found", 404));
	pthread_mutex_unlock(&a->lock);
}

/* A Cell object as it stands in the API server. */
static void api_put_cell(struct api *a, const char *name, const char *node, const char *pod)
{
	json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:{s:s,s:s}},s:{s:s},s:{s:s}}", "apiVersion",
				"kiyot.elotl.co/v1", "kind", "Cell", "metadata", "name", name,
				"labels", CELLSYNC_LABEL_CLUSTER, "cluster-test",
				CELLSYNC_LABEL_NODE, node, "spec", "podName", pod, "status",
				"phase", "Running");

	pthread_mutex_lock(&a->lock);
	set_version(a, obj);
	json_object_set_new(a->cells, name, obj);
	pthread_mutex_unlock(&a->lock);
}

/* A field of a Cell object the fake holds ("spec", "podName"); NULL when absent. */
static const char *api_field(struct api *a, const char *name, const char *part, const char *key)
{
	const char *v;

	pthread_mutex_lock(&a->lock);
	v = json_string_value(
		json_object_get(json_object_get(json_object_get(a->cells, name), part), key));
	pthread_mutex_unlock(&a->lock);
	return v;
}

static int api_has(struct api *a, const char *name)
{
	int has;

	pthread_mutex_lock(&a->lock);
	has = json_object_get(a->cells, name) != NULL;
	pthread_mutex_unlock(&a->lock);
	return has;
}

/* The provider's instances: every cell is "i-" and its name. */
static int fake_list(void *self, struct cell_info **out, size_t *n, struct err *err)
{
	struct crihost *h = self;
	struct sandbox **v;
	size_t count;

	(void)err;
	records_lock(h->k.records);
	count = records_sandboxes(h->k.records, &v);
	*out = xcalloc(count + 1, sizeof(**out));
	for (*n = 0; *n < count; (*n)++) {
		(*out)[*n].cell_id = xstrdup(v[*n]->cell_id);
		(*out)[*n].instance_id = xasprintf("i-%s", v[*n]->cell_id);
	}
	records_unlock(h->k.records);
	sandboxes_put(v, count);
	return 0;
}

static const struct provider_ops fake_ops = { .name = "fake", .list = fake_list };

struct fix {
	struct crihost h;
	struct stub stub;
	struct api api;
	struct cellsync *cs;
};

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));

	pthread_mutex_init(&f->api.lock, NULL);
	f->api.cells = json_object();
	f->stub.handler = api_handler;
	f->stub.ctx = &f->api;
	if (crihost_start(&f->h) < 0 || stub_start(&f->stub) < 0)
		return -1;
	f->h.k.provider.ops = &fake_ops;
	f->h.k.provider.self = &f->h;
	*state = f;
	return 0;
}

/* Starts the worker (it reconciles at once, then when kicked). */
static void start(struct fix *f)
{
	struct kube_auth a = { 0 };

	a.server = xasprintf("http://127.0.0.1:%d", f->stub.port);
	f->cs = cellsync_start(&f->h.k, kube_client_from_auth(&a), NODE);
}

/* The same, stopped after its first pass: the test's reconciles are then the only ones. */
static void start_stopped(struct fix *f)
{
	start(f);
	cellsync_stop(f->cs);
}

static int teardown(void **state)
{
	struct fix *f = *state;

	cellsync_free(f->cs);
	f->h.k.provider.ops = NULL;
	crihost_stop(&f->h);
	stub_stop(&f->stub);
	stub_release(&f->stub);
	json_decref(f->api.cells);
	free(f->api.reply);
	pthread_mutex_destroy(&f->api.lock);
	free(f);
	return 0;
}

static int reconcile(struct fix *f, struct err *err)
{
	*err = (struct err)ERR_INIT;
	return cellsync_reconcile(f->cs, err);
}

/* A ready pod's cell gets an object saying where it runs and that it runs; a launching one's
 * says Pending; a cell of no sandbox here is deleted, another node's is left alone. */
static void test_cellsync__objects_follow_the_sandboxes(void **state)
{
	struct fix *f = *state;
	struct sandbox *sb;
	struct err err;

	sb = crihost_add_sandbox(&f->h, "sb-web", "web", SANDBOX_READY, "cell-web");
	free(sb->instance_type);
	sb->instance_type = xstrdup("t3.nano");
	sb = crihost_add_sandbox(&f->h, "sb-new", "new", SANDBOX_NOTREADY, "cell-new");
	sb->phase = SANDBOX_LAUNCHING;
	crihost_add_sandbox(&f->h, "sb-old", "old", SANDBOX_NOTREADY, "cell-old");
	api_put_cell(&f->api, "cell-ghost", NODE, "gone");
	api_put_cell(&f->api, "cell-elsewhere", "node-b", "theirs");
	start_stopped(f);
	if (reconcile(f, &err) < 0)
		fail_msg("%s", err.msg);
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "podName"), "web");
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "podNamespace"), "default");
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "node"), NODE);
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "instanceType"), "t3.nano");
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "instanceId"), "i-cell-web");
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "ip"), "10.77.0.2");
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "launchType"), "on-demand");
	assert_string_equal(api_field(&f->api, "cell-web", "status", "phase"), "Running");
	assert_string_equal(api_field(&f->api, "cell-new", "status", "phase"), "Pending");
	assert_string_equal(api_field(&f->api, "cell-new", "spec", "ip"), "");
	assert_false(api_has(&f->api, "cell-old"));
	assert_false(api_has(&f->api, "cell-ghost"));
	assert_true(api_has(&f->api, "cell-elsewhere"));
}

/* In step, a reconcile writes nothing; a change is one replace of the object. */
static void test_cellsync__only_changes_are_written(void **state)
{
	struct fix *f = *state;
	struct sandbox *sb;
	struct err err;
	int creates, replaces;

	sb = crihost_add_sandbox(&f->h, "sb-web", "web", SANDBOX_NOTREADY, "cell-web");
	sb->phase = SANDBOX_LAUNCHING;
	start_stopped(f);
	assert_int_equal(reconcile(f, &err), 0);
	pthread_mutex_lock(&f->api.lock);
	creates = f->api.creates;
	replaces = f->api.replaces;
	pthread_mutex_unlock(&f->api.lock);
	assert_int_equal(creates, 1);
	assert_int_equal(reconcile(f, &err), 0);
	assert_int_equal(f->api.replaces, replaces);
	/* the launch ends: Running, by a replace */
	records_lock(f->h.k.records);
	sb->phase = SANDBOX_IDLE;
	sb->state = SANDBOX_READY;
	records_unlock(f->h.k.records);
	assert_int_equal(reconcile(f, &err), 0);
	assert_string_equal(api_field(&f->api, "cell-web", "status", "phase"), "Running");
	assert_int_equal(f->api.replaces, replaces + 1);
	assert_int_equal(f->api.creates, 1);
}

/* An object made by someone else meanwhile (create answers 409) is replaced. */
static void test_cellsync__created_meanwhile_is_replaced(void **state)
{
	struct fix *f = *state;
	struct err err;

	crihost_add_sandbox(&f->h, "sb-web", "web", SANDBOX_READY, "cell-web");
	start_stopped(f);
	assert_int_equal(reconcile(f, &err), 0);
	/* another writer's object of another node with the same name */
	api_put_cell(&f->api, "cell-web", "node-b", "someone-else");
	assert_int_equal(reconcile(f, &err), 0);
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "podName"), "web");
	assert_string_equal(api_field(&f->api, "cell-web", "spec", "node"), NODE);
}

/* What the API server refuses is said in words that tell what to do. */
static void test_cellsync__refusals_say_what_to_do(void **state)
{
	struct fix *f = *state;
	struct err err;

	crihost_add_sandbox(&f->h, "sb-web", "web", SANDBOX_READY, "cell-web");
	f->api.mode = API_NO_CRD;
	start_stopped(f);
	assert_int_equal(reconcile(f, &err), -ENOENT);
	assert_string_equal(err.msg, "list cells: the Cell CRD is not installed; kubectl apply -f "
				     "deploy/crd-cells.yaml");
	f->api.mode = API_FORBIDDEN;
	assert_int_equal(reconcile(f, &err), -EACCES);
	assert_non_null(strstr(err.msg, "list cells: 403 "));
	assert_non_null(strstr(err.msg, "check the credentials and deploy/rbac.yaml"));
}

/* An object that keeps changing under kiyot is given up on after a few reads, saying so. */
static void test_cellsync__endless_conflicts_give_up(void **state)
{
	struct fix *f = *state;
	struct err err;

	crihost_add_sandbox(&f->h, "sb-web", "web", SANDBOX_READY, "cell-web");
	api_put_cell(&f->api, "cell-web", NODE, "stale");
	f->api.mode = API_CONFLICTED;
	start_stopped(f);
	assert_int_equal(reconcile(f, &err), -EAGAIN);
	assert_string_equal(err.msg, "cell cell-web: still conflicting after 5 attempts");
	assert_int_equal(f->api.replaces, 0);
}

/* The worker reconciles when kicked, and keeps retrying while the API server is away. */
static void test_cellsync__worker_follows_kicks(void **state)
{
	struct fix *f = *state;
	int ok = 0;

	f->api.mode = API_NO_CRD;
	start(f);
	usleep(100000); /* its first pass fails; it retries after 1 s */
	f->api.mode = API_OK;
	crihost_add_sandbox(&f->h, "sb-web", "web", SANDBOX_READY, "cell-web");
	cellsync_kick(f->cs);
	for (int i = 0; i < 500 && !ok; i++) {
		usleep(10000);
		ok = api_has(&f->api, "cell-web");
	}
	assert_true(ok);
	cellsync_stop(f->cs);
	cellsync_kick(f->cs); /* after stop: ignored */
	cellsync_kick(NULL);
}

/* Without an API server configured there is no worker. */
static void test_cellsync__no_api_server_no_worker(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *missing = xasprintf("%s/no-kubeconfig", f->h.dir);

	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBECONFIG");
	free(f->h.k.cfg.kubeconfig);
	f->h.k.cfg.kubeconfig = xstrdup(missing);
	assert_null(cellsync_start_configured(&f->h.k));
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(test_cellsync__##name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(objects_follow_the_sandboxes),  T(only_changes_are_written),
		T(created_meanwhile_is_replaced), T(refusals_say_what_to_do),
		T(endless_conflicts_give_up),	  T(worker_follows_kicks),
		T(no_api_server_no_worker),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
