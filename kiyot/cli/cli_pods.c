/*
 * cli_pods.c: `kiyot get`, `kiyot logs` and `kiyot delete`, through the same CRI state a
 * kubelet reads and changes.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cri_api.pb-c.h"
#include "crilog.h"
#include "xalloc.h"

static Runtime__V1__ListPodSandboxResponse *list_sandboxes(struct cli *c, struct err *err)
{
	Runtime__V1__ListPodSandboxRequest req = RUNTIME__V1__LIST_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__ListPodSandboxResponse *resp = NULL;

	if (cli_call(c, CLI_RT "ListPodSandbox", &req.base,
		     &runtime__v1__list_pod_sandbox_response__descriptor, &resp, err) < 0)
		return NULL;
	return resp;
}

static Runtime__V1__ListContainersResponse *list_containers(struct cli *c, const char *sandbox,
							    struct err *err)
{
	Runtime__V1__ListContainersRequest req = RUNTIME__V1__LIST_CONTAINERS_REQUEST__INIT;
	Runtime__V1__ContainerFilter f = RUNTIME__V1__CONTAINER_FILTER__INIT;
	Runtime__V1__ListContainersResponse *resp = NULL;

	if (sandbox) {
		f.pod_sandbox_id = (char *)sandbox;
		req.filter = &f;
	}
	if (cli_call(c, CLI_RT "ListContainers", &req.base,
		     &runtime__v1__list_containers_response__descriptor, &resp, err) < 0)
		return NULL;
	return resp;
}

/* The cell details from the verbose sandbox status (a small JSON object). */
static json_t *cell_info(struct cli *c, const char *id, char **ip)
{
	Runtime__V1__PodSandboxStatusRequest req = RUNTIME__V1__POD_SANDBOX_STATUS_REQUEST__INIT;
	Runtime__V1__PodSandboxStatusResponse *resp = NULL;
	struct err err = ERR_INIT;
	json_t *info = NULL;

	req.pod_sandbox_id = (char *)id;
	req.verbose = 1;
	*ip = xstrdup("");
	if (cli_call(c, CLI_RT "PodSandboxStatus", &req.base,
		     &runtime__v1__pod_sandbox_status_response__descriptor, &resp, &err) < 0)
		return NULL;
	for (size_t i = 0; i < resp->n_info; i++)
		if (strcmp(resp->info[i]->key, "info") == 0)
			info = json_loads(resp->info[i]->value, 0, NULL);
	if (resp->status && resp->status->network) {
		free(*ip);
		*ip = xstrdup(resp->status->network->ip);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return info;
}

static void age(int64_t created_ns, char *buf, size_t n)
{
	int64_t s = (clock_now_ns() - created_ns) / 1000000000LL;

	if (s < 120)
		snprintf(buf, n, "%llds", (long long)s);
	else if (s < 7200)
		snprintf(buf, n, "%lldm", (long long)(s / 60));
	else if (s < 172800)
		snprintf(buf, n, "%lldh", (long long)(s / 3600));
	else
		snprintf(buf, n, "%lldd", (long long)(s / 86400));
}

/* The pod's status as kubectl would summarise it, counting app containers only. */
static const char *pod_phase(struct cli *c, const Runtime__V1__PodSandbox *sb,
			     const Runtime__V1__ListContainersResponse *cs, int *ready, int *total)
{
	int exited = 0, failed = 0, created = 0;

	*ready = *total = 0;
	for (size_t i = 0; i < cs->n_containers; i++) {
		const Runtime__V1__Container *ct = cs->containers[i];
		int init = 0;

		if (strcmp(ct->pod_sandbox_id, sb->id) != 0)
			continue;
		for (size_t l = 0; l < ct->n_labels; l++)
			if (strcmp(ct->labels[l]->key, CLI_LABEL_INIT) == 0)
				init = 1;
		if (init)
			continue;
		(*total)++;
		switch (cs->containers[i]->state) {
		case RUNTIME__V1__CONTAINER_STATE__CONTAINER_RUNNING:
			(*ready)++;
			break;
		case RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED: {
			struct err err = ERR_INIT;
			int state, code = 0;

			exited++;
			if (cli_container_state(c, ct->id, &state, &code, &err) == 0 && code != 0)
				failed++;
			break;
		}
		default:
			created++;
		}
	}
	if (sb->state != RUNTIME__V1__POD_SANDBOX_STATE__SANDBOX_READY)
		return "Terminated";
	if (*total && *ready == *total)
		return "Running";
	if (failed)
		return "Error";
	if (*total && exited == *total)
		return "Completed";
	return created ? "Pending" : "Running";
}

/* Every cell kiyot has, pods' and standby ones: the verbose Status' "cells" (a JSON array),
 * or NULL with err set. */
static json_t *all_cells(struct cli *c, struct err *err)
{
	Runtime__V1__StatusRequest req = RUNTIME__V1__STATUS_REQUEST__INIT;
	Runtime__V1__StatusResponse *resp = NULL;
	json_t *cells = NULL;

	req.verbose = 1;
	if (cli_call(c, CLI_RT "Status", &req.base, &runtime__v1__status_response__descriptor,
		     &resp, err) < 0)
		return NULL;
	for (size_t i = 0; i < resp->n_info && !cells; i++)
		if (strcmp(resp->info[i]->key, "cells") == 0)
			cells = json_loads(resp->info[i]->value, 0, NULL);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	if (!json_is_array(cells)) {
		json_decref(cells);
		err_set(err, EPROTO,
			"kiyot's Status does not list its cells: is the kiyot serving this socket "
			"older than this command? Run the kiyot binary of the same build");
		return NULL;
	}
	return cells;
}

/* A JSON string member, or "<none>" when absent or empty (one word for a table's column). */
static const char *col(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v && v[0] ? v : "<none>";
}

/* `kiyot get cells [-o wide]`: the pods' cells and the warm pool's standby cells. */
static int get_cells(struct cli *c, int wide)
{
	struct err err = ERR_INIT;
	json_t *cells = all_cells(c, &err), *o;
	size_t i;

	if (!cells)
		return cli_fail("%s", err.msg);
	printf("%-22s %-16s %-24s %-8s %-14s %-9s %-15s %s%s\n", "CELL", "NAMESPACE", "POD",
	       "PHASE", "INSTANCE-TYPE", "$/H", "IP", "AGE", wide ? "   WHY" : "");
	json_array_foreach (cells, i, o) {
		char ago[16];

		age(json_integer_value(json_object_get(o, "createdNs")), ago, sizeof(ago));
		printf("%-22s %-16s %-24s %-8s %-14s %-9.4f %-15s %s%s%s\n", col(o, "cellId"),
		       col(o, "namespace"), col(o, "pod"), col(o, "phase"), col(o, "instanceType"),
		       json_number_value(json_object_get(o, "pricePerHour")), col(o, "ip"), ago,
		       wide ? "   " : "", wide ? col(o, "sizingReason") : "");
	}
	json_decref(cells);
	return 0;
}

int cli_get(struct cli *c, int argc, char **argv)
{
	struct err err = ERR_INIT;
	Runtime__V1__ListPodSandboxResponse *sbs;
	Runtime__V1__ListContainersResponse *cs;
	int cells, wide;

	if (argc < 2 || (strcmp(argv[1], "pods") && strcmp(argv[1], "pod") &&
			 strcmp(argv[1], "cells") && strcmp(argv[1], "cell")))
		return cli_fail("usage: kiyot get pods | kiyot get cells [-o wide]");
	cells = argv[1][1] == 'e';
	wide = argc >= 4 && strcmp(argv[2], "-o") == 0 && strcmp(argv[3], "wide") == 0;
	if (cells)
		return get_cells(c, wide);
	if (!(sbs = list_sandboxes(c, &err)) || !(cs = list_containers(c, NULL, &err)))
		return cli_fail("%s", err.msg);
	printf("%-24s %-16s %-7s %-11s %-15s %s\n", "NAME", "NAMESPACE", "READY", "STATUS", "IP",
	       "AGE");
	for (size_t i = 0; i < sbs->n_items; i++) {
		const Runtime__V1__PodSandbox *sb = sbs->items[i];
		char ago[16], readys[32];
		char *ip = NULL;
		json_t *info = cell_info(c, sb->id, &ip);
		int ready, total;
		const char *phase = pod_phase(c, sb, cs, &ready, &total);

		age(sb->created_at, ago, sizeof(ago));
		snprintf(readys, sizeof(readys), "%d/%d", ready, total);
		printf("%-24s %-16s %-7s %-11s %-15s %s\n", sb->metadata->name,
		       sb->metadata->namespace_, readys, phase, ip[0] ? ip : "<none>", ago);
		json_decref(info);
		free(ip);
	}
	protobuf_c_message_free_unpacked(&sbs->base, NULL);
	protobuf_c_message_free_unpacked(&cs->base, NULL);
	return 0;
}

int cli_find_pod(struct cli *c, const char *name, char **id, struct err *err)
{
	Runtime__V1__ListPodSandboxResponse *sbs = list_sandboxes(c, err);
	const Runtime__V1__PodSandbox *best = NULL;

	if (!sbs)
		return -err->code;
	for (size_t i = 0; i < sbs->n_items; i++) {
		const Runtime__V1__PodSandbox *sb = sbs->items[i];

		if (strcmp(sb->metadata->name, name) != 0 ||
		    strcmp(sb->metadata->namespace_, c->ns) != 0)
			continue;
		if (!best || sb->created_at > best->created_at)
			best = sb;
	}
	if (best)
		*id = xstrdup(best->id);
	protobuf_c_message_free_unpacked(&sbs->base, NULL);
	if (!best)
		return err_set(err, ENOENT, "pod \"%s\" not found in namespace %s", name, c->ns);
	return 0;
}

/* Prints the text of the CRI log records in buf[0..len) that end in a newline; returns the
 * bytes consumed. */
static size_t print_records(const char *buf, size_t len)
{
	size_t used = 0;

	while (used < len) {
		const char *nl = memchr(buf + used, '\n', len - used);
		struct crilog_record rec;
		struct err err = ERR_INIT;

		if (!nl)
			break;
		if (crilog_parse(buf + used, (size_t)(nl - (buf + used)), &rec, &err) == 0) {
			FILE *out = rec.stream == CRILOG_STDERR ? stderr : stdout;

			fwrite(rec.text, 1, rec.text_len, out);
			if (!rec.partial)
				fputc('\n', out);
			fflush(out);
		}
		used = (size_t)(nl - buf) + 1;
	}
	return used;
}

int cli_logs(struct cli *c, int argc, char **argv)
{
	struct err err = ERR_INIT;
	const char *cname = NULL;
	int follow = 0, opt;
	_cleanup_free_ char *sid = NULL;
	Runtime__V1__ListContainersResponse *cs;
	const Runtime__V1__Container *pick = NULL;
	Runtime__V1__ContainerStatusRequest sreq = RUNTIME__V1__CONTAINER_STATUS_REQUEST__INIT;
	Runtime__V1__ContainerStatusResponse *sresp = NULL;
	_cleanup_free_ char *path = NULL;
	_cleanup_free_ char *cid = NULL;
	char buf[65536];
	size_t have = 0;
	int fd;

	if (argc < 2 || argv[1][0] == '-')
		return cli_fail("usage: kiyot logs POD [-c CONTAINER] [-f]");
	optind = 2; /* options follow POD */
	while ((opt = getopt(argc, argv, "c:f")) != -1) {
		if (opt == 'c')
			cname = optarg;
		else if (opt == 'f')
			follow = 1;
		else
			return cli_fail("usage: kiyot logs POD [-c CONTAINER] [-f]");
	}
	if (cli_find_pod(c, argv[1], &sid, &err) < 0 || !(cs = list_containers(c, sid, &err)))
		return cli_fail("%s", err.msg);
	for (size_t i = 0; i < cs->n_containers; i++) {
		const Runtime__V1__Container *ct = cs->containers[i];

		if (cname && strcmp(ct->metadata->name, cname) != 0)
			continue;
		if (!cname && pick && strcmp(pick->metadata->name, ct->metadata->name) != 0) {
			protobuf_c_message_free_unpacked(&cs->base, NULL);
			return cli_fail("pod %s has several containers; name one with -c", argv[1]);
		}
		if (!pick || ct->created_at > pick->created_at)
			pick = ct;
	}
	if (!pick) {
		protobuf_c_message_free_unpacked(&cs->base, NULL);
		return cli_fail("pod %s has no container%s%s", argv[1], cname ? " named " : "",
				cname ? cname : "");
	}
	cid = xstrdup(pick->id);
	protobuf_c_message_free_unpacked(&cs->base, NULL);
	sreq.container_id = cid;
	if (cli_call(c, CLI_RT "ContainerStatus", &sreq.base,
		     &runtime__v1__container_status_response__descriptor, &sresp, &err) < 0)
		return cli_fail("%s", err.msg);
	path = xstrdup(sresp->status->log_path);
	protobuf_c_message_free_unpacked(&sresp->base, NULL);
	if (!path[0])
		return cli_fail("container %s has no log file", cid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cli_fail("open %s: %s", path, strerror(errno));
	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		size_t used;
		int state, code;

		if (n > 0) {
			have += (size_t)n;
			used = print_records(buf, have);
			if (used == 0 && have == sizeof(buf))
				used = have; /* a record longer than the buffer: skip it */
			memmove(buf, buf + used, have - used);
			have -= used;
			continue;
		}
		if (!follow)
			break;
		if (cli_container_state(c, cid, &state, &code, &err) < 0 ||
		    state == RUNTIME__V1__CONTAINER_STATE__CONTAINER_EXITED) {
			/* one last read catches what was written as it ended */
			while ((n = read(fd, buf + have, sizeof(buf) - have)) > 0) {
				have += (size_t)n;
				used = print_records(buf, have);
				memmove(buf, buf + used, have - used);
				have -= used;
			}
			break;
		}
		usleep(200 * 1000);
	}
	close(fd);
	return 0;
}

int cli_delete(struct cli *c, int argc, char **argv)
{
	Runtime__V1__StopPodSandboxRequest sreq = RUNTIME__V1__STOP_POD_SANDBOX_REQUEST__INIT;
	Runtime__V1__RemovePodSandboxRequest rreq = RUNTIME__V1__REMOVE_POD_SANDBOX_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct err err = ERR_INIT;
	Runtime__V1__ListContainersResponse *cs;
	_cleanup_free_ char *sid = NULL;

	if (argc < 3 || (strcmp(argv[1], "pod") && strcmp(argv[1], "pods")))
		return cli_fail("usage: kiyot delete pod NAME");
	if (cli_find_pod(c, argv[2], &sid, &err) < 0 || !(cs = list_containers(c, sid, &err)))
		return cli_fail("%s", err.msg);
	/* containers get their grace period, as the kubelet gives them */
	for (size_t i = 0; i < cs->n_containers; i++) {
		Runtime__V1__StopContainerRequest req = RUNTIME__V1__STOP_CONTAINER_REQUEST__INIT;

		req.container_id = cs->containers[i]->id;
		req.timeout = 10;
		if (cli_call(c, CLI_RT "StopContainer", &req.base,
			     &runtime__v1__stop_container_response__descriptor, &resp, &err) < 0)
			fprintf(stderr, "kiyot: %s\n", err.msg);
		else
			protobuf_c_message_free_unpacked(resp, NULL);
	}
	protobuf_c_message_free_unpacked(&cs->base, NULL);
	sreq.pod_sandbox_id = sid;
	rreq.pod_sandbox_id = sid;
	if (cli_call(c, CLI_RT "StopPodSandbox", &sreq.base,
		     &runtime__v1__stop_pod_sandbox_response__descriptor, &resp, &err) < 0)
		return cli_fail("%s", err.msg);
	protobuf_c_message_free_unpacked(resp, NULL);
	if (cli_call(c, CLI_RT "RemovePodSandbox", &rreq.base,
		     &runtime__v1__remove_pod_sandbox_response__descriptor, &resp, &err) < 0)
		return cli_fail("%s", err.msg);
	protobuf_c_message_free_unpacked(resp, NULL);
	printf("pod/%s deleted\n", argv[2]);
	return 0;
}
