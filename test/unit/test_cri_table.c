/*
 * Unit tests for the RPC method tables: kiyot's CRI table (kiyot/cri/cri_table.c) and the
 * cell-agent's table (cell-agent/api.c) against the protobuf-c service descriptors generated
 * from proto/. A method missing from a table answers UNIMPLEMENTED to the kubelet; a wrong
 * message descriptor decodes garbage; a wrong streaming flag hangs or truncates the call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent.h"
#include "cellagent.pb-c.h"
#include "cri_api.pb-c.h"
#include "daemon/kiyot.h"
#include "rpc.h"

/*
 * Server-streaming methods ("returns (stream ...)" in proto/). protoc-c does not record
 * streaming in its descriptors, so the set is written here by hand: keep it in step with
 * the .proto files.
 */
static const char *const streaming_methods[] = {
	"/runtime.v1.RuntimeService/GetContainerEvents",
	"/kiyot.cell.v1.CellAgent/Watch",
	NULL,
};

/* True when path names a server-streaming method. */
static int is_streaming(const char *path)
{
	for (const char *const *s = streaming_methods; *s; s++)
		if (strcmp(*s, path) == 0)
			return 1;
	return 0;
}

/* How many table entries carry exactly this path. */
static size_t count_path(const struct rpc_method *t, size_t n, const char *path,
			 const struct rpc_method **found)
{
	size_t hits = 0;

	for (size_t i = 0; i < n; i++) {
		if (t[i].path && strcmp(t[i].path, path) == 0) {
			hits++;
			*found = &t[i];
		}
	}
	return hits;
}

/*
 * Every method of svc has exactly one table entry with path "/<package>.<Service>/<Method>",
 * the descriptor's input and output messages, a handler, and the streaming flag exactly when
 * the method streams. Returns how many table entries belong to svc.
 */
static size_t check_service(const struct rpc_method *t, size_t n,
			    const ProtobufCServiceDescriptor *svc)
{
	for (unsigned i = 0; i < svc->n_methods; i++) {
		const ProtobufCMethodDescriptor *md = &svc->methods[i];
		const struct rpc_method *m = NULL;
		char path[256];
		size_t hits;

		snprintf(path, sizeof(path), "/%s/%s", svc->name, md->name);
		hits = count_path(t, n, path, &m);
		if (hits != 1)
			fail_msg("%s: %zu table entries, want exactly 1", path, hits);
		if (m->req != md->input)
			fail_msg("%s: request descriptor %s, the service says %s", path,
				 m->req ? m->req->name : "(null)", md->input->name);
		if (m->resp != md->output)
			fail_msg("%s: response descriptor %s, the service says %s", path,
				 m->resp ? m->resp->name : "(null)", md->output->name);
		if (!m->handler)
			fail_msg("%s: no handler", path);
		if (!!(m->flags & RPC_SERVER_STREAM) != is_streaming(path))
			fail_msg("%s: RPC_SERVER_STREAM is %s but the method %s", path,
				 (m->flags & RPC_SERVER_STREAM) ? "set" : "clear",
				 is_streaming(path) ? "streams" : "is unary");
	}
	return svc->n_methods;
}

/* Fails on a table entry whose path is no method of any of the given services. */
static void check_no_strays(const struct rpc_method *t, size_t n,
			    const ProtobufCServiceDescriptor *const *svcs, size_t n_svcs)
{
	for (size_t i = 0; i < n; i++) {
		int known = 0;

		for (size_t s = 0; s < n_svcs && !known; s++) {
			size_t len = strlen(svcs[s]->name);

			if (!t[i].path || t[i].path[0] != '/' ||
			    strncmp(t[i].path + 1, svcs[s]->name, len) != 0 ||
			    t[i].path[len + 1] != '/')
				continue;
			for (unsigned m = 0; m < svcs[s]->n_methods; m++)
				if (strcmp(t[i].path + len + 2, svcs[s]->methods[m].name) == 0)
					known = 1;
		}
		if (!known)
			fail_msg("table entry %zu (%s) is no method of the services", i,
				 t[i].path ? t[i].path : "(null)");
	}
}

/* The kubelet calls every RuntimeService and ImageService method; each one is served. */
static void test_cri_table__every_cri_method_has_one_entry(void **state)
{
	const ProtobufCServiceDescriptor *const svcs[] = {
		&runtime__v1__runtime_service__descriptor,
		&runtime__v1__image_service__descriptor,
	};
	size_t n = 0, covered = 0;
	const struct rpc_method *t = cri_method_table(&n);

	(void)state;
	assert_non_null(t);
	for (size_t s = 0; s < 2; s++)
		covered += check_service(t, n, svcs[s]);
	check_no_strays(t, n, svcs, 2);
	assert_int_equal(n, covered);
}

/* The service names the table is checked against are CRI v1's, not an older version's. */
static void test_cri_table__services_are_runtime_v1(void **state)
{
	(void)state;
	assert_string_equal(runtime__v1__runtime_service__descriptor.name,
			    "runtime.v1.RuntimeService");
	assert_string_equal(runtime__v1__image_service__descriptor.name, "runtime.v1.ImageService");
	/* the checks above would pass on an empty service */
	assert_true(runtime__v1__runtime_service__descriptor.n_methods >= 25);
	assert_true(runtime__v1__image_service__descriptor.n_methods >= 5);
}

/* GetContainerEvents streams: the kubelet's evented PLEG keeps the call open. */
static void test_cri_table__get_container_events_streams(void **state)
{
	size_t n = 0;
	const struct rpc_method *t = cri_method_table(&n);
	const struct rpc_method *m = NULL;

	(void)state;
	assert_int_equal(count_path(t, n, "/runtime.v1.RuntimeService/GetContainerEvents", &m), 1);
	assert_true(m->flags & RPC_SERVER_STREAM);
	assert_int_equal(count_path(t, n, "/runtime.v1.RuntimeService/Version", &m), 1);
	assert_false(m->flags & RPC_SERVER_STREAM);
}

/* kiyot calls every CellAgent method; the agent serves each one, Watch as a stream. */
static void test_cri_table__every_agent_method_has_one_entry(void **state)
{
	const ProtobufCServiceDescriptor *const svcs[] = {
		&kiyot__cell__v1__cell_agent__descriptor,
	};
	size_t n = 0, covered;
	const struct rpc_method *t = agent_method_table(&n);
	const struct rpc_method *m = NULL;

	(void)state;
	assert_non_null(t);
	assert_string_equal(kiyot__cell__v1__cell_agent__descriptor.name,
			    "kiyot.cell.v1.CellAgent");
	covered = check_service(t, n, svcs[0]);
	check_no_strays(t, n, svcs, 1);
	assert_int_equal(n, covered);
	assert_int_equal(count_path(t, n, "/kiyot.cell.v1.CellAgent/Watch", &m), 1);
	assert_true(m->flags & RPC_SERVER_STREAM);
}

/* The pool of the method at path of table t. */
static unsigned pool_of(const struct rpc_method *t, size_t n, const char *path)
{
	const struct rpc_method *m = NULL;

	assert_int_equal(count_path(t, n, path, &m), 1);
	return m->pool;
}

/* The kubelet's status calls, exec probes and stats never wait for threads that pulls or cell
 * launches hold, and every method names a pool its server has. */
static void test_cri_table__fast_calls_never_share_a_pool_with_pulls_or_launches(void **state)
{
	static const char *const fast[] = {
		"/runtime.v1.RuntimeService/Version",
		"/runtime.v1.RuntimeService/Status",
		"/runtime.v1.RuntimeService/ListPodSandbox",
		"/runtime.v1.RuntimeService/ListContainers",
		"/runtime.v1.RuntimeService/PodSandboxStatus",
		"/runtime.v1.RuntimeService/ContainerStatus",
		"/runtime.v1.RuntimeService/ExecSync",
		"/runtime.v1.RuntimeService/ContainerStats",
		"/runtime.v1.ImageService/ImageStatus",
		"/runtime.v1.RuntimeService/Exec",
	};
	static const char *const agent_fast[] = { "/kiyot.cell.v1.CellAgent/Hello",
						  "/kiyot.cell.v1.CellAgent/Stats",
						  "/kiyot.cell.v1.CellAgent/ExecSync",
						  "/kiyot.cell.v1.CellAgent/Apply" };
	size_t n = 0, np = 0;
	const struct rpc_method *t = cri_method_table(&n);
	unsigned pull = pool_of(t, n, "/runtime.v1.ImageService/PullImage");
	unsigned launch = pool_of(t, n, "/runtime.v1.RuntimeService/RunPodSandbox");

	(void)state;
	cri_pool_table(&np);
	for (size_t i = 0; i < n; i++)
		assert_true(t[i].pool < np);
	assert_int_not_equal(pull, launch);
	for (size_t i = 0; i < sizeof(fast) / sizeof(fast[0]); i++) {
		assert_int_not_equal(pool_of(t, n, fast[i]), pull);
		assert_int_not_equal(pool_of(t, n, fast[i]), launch);
	}
	t = agent_method_table(&n);
	agent_pool_table(&np);
	pull = pool_of(t, n, "/kiyot.cell.v1.CellAgent/PullImage");
	for (size_t i = 0; i < n; i++)
		assert_true(t[i].pool < np);
	for (size_t i = 0; i < sizeof(agent_fast) / sizeof(agent_fast[0]); i++)
		assert_int_not_equal(pool_of(t, n, agent_fast[i]), pull);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cri_table__every_cri_method_has_one_entry),
		cmocka_unit_test(test_cri_table__services_are_runtime_v1),
		cmocka_unit_test(test_cri_table__get_container_events_streams),
		cmocka_unit_test(test_cri_table__every_agent_method_has_one_entry),
		cmocka_unit_test(
			test_cri_table__fast_calls_never_share_a_pool_with_pulls_or_launches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
