/*
 * crihost.h: kiyot's CRI server in a unit test, without cells. A struct kiyot with its
 * configuration's defaults, a store in a fresh state directory and an event hub (no provider,
 * no catalog, no cell manager) serves the real method table (cri_table.c, through router.c)
 * on a unix socket; a client channel calls it as the kubelet would. Records are listed in
 * memory only (records_add_*), as if loaded. A test may give it a regconf and a node image store
 * (k.regconf, k.node_images), a cell manager without cells (cells_new) and a streaming
 * server (k.cells, k.stream): crihost_stop frees them.
 *
 *	struct crihost h;
 *	crihost_start(&h);                    h.k is kiyot, h.ch a client of its socket
 *	crihost_add_sandbox(&h, "sb1", "web", SANDBOX_READY, "");
 *	crihost_call(&h, "/runtime.v1.RuntimeService/ListPodSandbox", &req.base, desc, &resp);
 *	crihost_stop(&h);                     stops the server, frees the records, removes dir
 *
 * Only handlers that need no cell can be called: with a sandbox READY on a cell, a call that
 * asks the cell finds no cell manager. Included by the unit tests that need it; everything
 * here is static.
 */
#ifndef KIYOT_TEST_CRIHOST_H
#define KIYOT_TEST_CRIHOST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cells/cells.h"
#include "cri/cri.h"
#include "cri/events.h"
#include "cri/router.h"
#include "fsutil.h"
#include "image.h"
#include "regconf.h"
#include "rpc.h"
#include "daemon/kiyot.h"
#include "state/store.h"
#include "stream/server.h"
#include "xalloc.h"

#define CRIHOST_FN static __attribute__((unused))
#define CRI_RT(m) "/runtime.v1.RuntimeService/" m
#define CRI_IMG(m) "/runtime.v1.ImageService/" m

struct crihost {
	char dir[64];
	char addr[128];
	struct kiyot k;
	struct rpc_server *srv;
	struct rpc_channel *ch;
};

/* Starts kiyot's CRI server on dir/kiyot.sock, each call's end given to observe when not NULL
 * (as kiyot serve gives it to its metrics); 0 on success, the error printed otherwise. */
CRIHOST_FN int crihost_start_observed(struct crihost *h,
				      void (*observe)(void *, const char *, int, double))
{
	struct rpc_server_config cfg = { 0 };
	struct err err = ERR_INIT;
	_cleanup_free_ char *db = NULL;
	const struct rpc_pool *pools;
	static const char tmpl[] = "/tmp/kiyot-crihost.XXXXXX";

	_Static_assert(sizeof(tmpl) <= sizeof(h->dir), "dir too small");
	memset(h, 0, sizeof(*h));
	memcpy(h->dir, tmpl, sizeof(tmpl));
	if (!mkdtemp(h->dir))
		return -1;
	snprintf(h->addr, sizeof(h->addr), "unix://%s/kiyot.sock", h->dir);
	kiyot_config_defaults(&h->k.cfg);
	free(h->k.cfg.state_dir);
	h->k.cfg.state_dir = xstrdup(h->dir);
	h->k.cluster_id = xstrdup("cluster-test");
	h->k.events = events_new();
	db = xasprintf("%s/kiyot.db", h->dir);
	rpc_global_init();
	cfg.address = h->addr;
	cfg.methods = cri_method_table(&cfg.n_methods);
	pools = cri_pool_table(&cfg.n_pools);
	memcpy(cfg.pools, pools, cfg.n_pools * sizeof(*pools));
	cfg.svc = &h->k;
	cfg.observe = observe;
	if (store_open(db, &h->k.store, &err) < 0) {
		fprintf(stderr, "crihost: %s\n", err.msg);
		return -1;
	}
	h->k.records = records_new(h->k.store);
	if (rpc_server_start(&cfg, &h->srv, &err) < 0 ||
	    rpc_channel_new(h->addr, &h->ch, &err) < 0) {
		fprintf(stderr, "crihost: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* Starts kiyot's CRI server on dir/kiyot.sock; 0 on success, the error printed otherwise. */
CRIHOST_FN int crihost_start(struct crihost *h)
{
	return crihost_start_observed(h, NULL);
}

CRIHOST_FN void crihost_stop(struct crihost *h)
{
	struct err err = ERR_INIT;

	rpc_channel_free(h->ch);
	rpc_server_stop(h->srv);
	router_close(&h->k);
	stream_server_stop(h->k.stream);
	cells_free(h->k.cells);
	kiyot_auths_free(&h->k);
	if (kiyot_node_prepulls_stop(&h->k, 10000) == 0)
		image_store_free(h->k.node_images);
	records_free(h->k.records);
	regconf_free(h->k.regconf);
	events_free(h->k.events);
	store_close(h->k.store);
	free(h->k.cluster_id);
	free(h->k.runtime_config_cidr);
	kiyot_config_release(&h->k.cfg);
	fs_remove_tree(h->dir, &err);
}

/* A CRI map entry (labels, annotations) of any of CRI's map types: they share one layout. */
struct crihost_kv {
	ProtobufCMessage base;
	char *key;
	char *value;
};

/* A sandbox record of pod name in namespace "default" (uid "uid-<name>", attempt 0), with the
 * annotation key=value when key is not NULL, on cell_id ("" for none). */
CRIHOST_FN struct sandbox *crihost_add_sandbox_ann(struct crihost *h, const char *id,
						   const char *name, enum sandbox_state state,
						   const char *cell_id, const char *key,
						   const char *value)
{
	Runtime__V1__PodSandboxConfig cfg = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
	Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry ann =
		RUNTIME__V1__POD_SANDBOX_CONFIG__ANNOTATIONS_ENTRY__INIT;
	Runtime__V1__PodSandboxConfig__AnnotationsEntry *anns[] = { &ann };
	_cleanup_free_ char *uid = xasprintf("uid-%s", name);
	struct sandbox *sb = xcalloc(1, sizeof(*sb));

	md.name = (char *)name;
	md.namespace_ = "default";
	md.uid = uid;
	cfg.metadata = &md;
	if (key) {
		ann.key = (char *)key;
		ann.value = (char *)value;
		cfg.annotations = anns;
		cfg.n_annotations = 1;
	}
	sb->id = xstrdup(id);
	sb->config = cri_msg_copy(&cfg.base);
	sb->runtime_handler = xstrdup("");
	sb->state = state;
	sb->created_ns = 1000;
	sb->cell_id = xstrdup(cell_id);
	sb->ip = xstrdup(cell_id[0] ? "10.77.0.2" : "");
	sb->instance_type = xstrdup("");
	sb->sizing_reason = xstrdup("");
	records_lock(h->k.records);
	records_add_sandbox(h->k.records, sb);
	records_unlock(h->k.records);
	return sb;
}

CRIHOST_FN struct sandbox *crihost_add_sandbox(struct crihost *h, const char *id, const char *name,
					       enum sandbox_state state, const char *cell_id)
{
	return crihost_add_sandbox_ann(h, id, name, state, cell_id, ROUTER_ANNOTATION,
				       ROUTER_TARGET);
}

/* A container record named name in sandbox_id, of image, with the label app=<name>. */
CRIHOST_FN struct container *crihost_add_container(struct crihost *h, const char *id,
						   const char *sandbox_id, const char *name,
						   const char *image, enum container_state state)
{
	Runtime__V1__ContainerConfig cfg = RUNTIME__V1__CONTAINER_CONFIG__INIT;
	Runtime__V1__ContainerMetadata md = RUNTIME__V1__CONTAINER_METADATA__INIT;
	Runtime__V1__ImageSpec img = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__ContainerConfig__LabelsEntry label =
		RUNTIME__V1__CONTAINER_CONFIG__LABELS_ENTRY__INIT;
	Runtime__V1__ContainerConfig__LabelsEntry *labels[] = { &label };
	struct container *c = xcalloc(1, sizeof(*c));

	md.name = (char *)name;
	img.image = (char *)image;
	label.key = "app";
	label.value = (char *)name;
	cfg.metadata = &md;
	cfg.image = &img;
	cfg.labels = labels;
	cfg.n_labels = 1;
	c->id = xstrdup(id);
	c->sandbox_id = xstrdup(sandbox_id);
	c->config = cri_msg_copy(&cfg.base);
	c->state = state;
	c->created_ns = 2000;
	c->reason = xstrdup("");
	c->message = xstrdup("");
	c->image_ref = xstrdup("");
	c->image_id = xstrdup("");
	c->seccomp_profile = xstrdup("");
	records_lock(h->k.records);
	records_add_container(h->k.records, c);
	records_unlock(h->k.records);
	return c;
}

/* An image record (tags and digests newline-separated, as the store keeps them). */
CRIHOST_FN struct image_rec *crihost_add_image(struct crihost *h, const char *id, const char *tags,
					       const char *digests, uint64_t size, const char *user)
{
	struct image_rec *i = xcalloc(1, sizeof(*i));

	i->id = xstrdup(id);
	i->repo_tags = xstrdup(tags);
	i->repo_digests = xstrdup(digests);
	i->size = size;
	i->user = xstrdup(user);
	records_lock(h->k.records);
	records_add_image(h->k.records, i);
	records_unlock(h->k.records);
	return i;
}

/* One unary call to kiyot's socket; err says why it failed. */
CRIHOST_FN int crihost_call(struct crihost *h, const char *path, const ProtobufCMessage *req,
			    const ProtobufCMessageDescriptor *desc, void *resp, struct err *err)
{
	*err = (struct err)ERR_INIT;
	return rpc_unary(h->ch, path, req, desc, 10000, (ProtobufCMessage **)resp, err);
}

#endif
