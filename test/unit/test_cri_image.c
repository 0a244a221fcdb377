/*
 * Unit tests for kiyot/cri/cri_image.c, CRI's ImageService: kiyot's CRI server (crihost.h)
 * and a registry on 127.0.0.1 (test/fixtures/ec2/httpstub.h) holding test/app, whose images
 * have a config and no layer. Pulls without a pod resolve the image at the registry (remote
 * cells) or fill the node's image store (local cells); kiyot remembers what it pulled, answers
 * ImageStatus and ListImages from that, and forgets it on RemoveImage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <openssl/evp.h>
#include <unistd.h>

#include "../fixtures/ec2/httpstub.h"
#include "codec.h"
#include "crihost.h"

#define N_IMAGES 2

/* test/app:v1 (USER 1000:1000) and test/app:v2 (USER nginx); :latest is one of them. */
struct registry {
	char *config[N_IMAGES], *config_digest[N_IMAGES];
	char *manifest[N_IMAGES], *manifest_digest[N_IMAGES];
	int latest;
};

static char *sha256_of(const char *s)
{
	unsigned char md[32];
	char hex[65];

	EVP_Digest(s, strlen(s), md, NULL, EVP_sha256(), NULL);
	hex_encode(md, sizeof(md), hex);
	return xasprintf("sha256:%s", hex);
}

static void registry_init(struct registry *r)
{
	static const char *const users[N_IMAGES] = { "1000:1000", "nginx" };

	for (int i = 0; i < N_IMAGES; i++) {
		r->config[i] = xasprintf("{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":"
					 "{\"User\":\"%s\",\"Cmd\":[\"/app\"]},\"rootfs\":"
					 "{\"type\":\"layers\",\"diff_ids\":[]}}",
					 users[i]);
		r->config_digest[i] = sha256_of(r->config[i]);
		r->manifest[i] = xasprintf(
			"{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest."
			"v1+json\",\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+"
			"json\",\"digest\":\"%s\",\"size\":%zu},\"layers\":[]}",
			r->config_digest[i], strlen(r->config[i]));
		r->manifest_digest[i] = sha256_of(r->manifest[i]);
	}
}

static void registry_release(struct registry *r)
{
	for (int i = 0; i < N_IMAGES; i++) {
		free(r->config[i]);
		free(r->config_digest[i]);
		free(r->manifest[i]);
		free(r->manifest_digest[i]);
	}
}

static void registry_handler(struct stub *s, const struct stub_request *rq, struct stub_reply *out)
{
	static const char prefix[] = "/v2/test/app/";
	struct registry *r = s->ctx;
	const char *p = rq->path + strlen(prefix);

	*out = (struct stub_reply){ 404, "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\"}]}", NULL };
	if (strncmp(rq->path, prefix, strlen(prefix)) != 0)
		return;
	for (int i = 0; i < N_IMAGES; i++) {
		char tag[16];

		snprintf(tag, sizeof(tag), "v%d", i + 1);
		if ((strncmp(p, "manifests/", 10) == 0 &&
		     (strcmp(p + 10, tag) == 0 || strcmp(p + 10, r->manifest_digest[i]) == 0 ||
		      (strcmp(p + 10, "latest") == 0 && r->latest == i))))
			*out = (struct stub_reply){ 200, r->manifest[i], NULL };
		else if (strncmp(p, "blobs/", 6) == 0 && strcmp(p + 6, r->config_digest[i]) == 0)
			*out = (struct stub_reply){ 200, r->config[i], NULL };
	}
}

struct fix {
	struct crihost h;
	struct stub reg;
	struct registry images;
};

static int setup(void **state)
{
	struct fix *f = xcalloc(1, sizeof(*f));
	struct err err = ERR_INIT;
	_cleanup_free_ char *conf = NULL;
	json_t *j;

	registry_init(&f->images);
	f->reg.handler = registry_handler;
	f->reg.ctx = &f->images;
	if (stub_start(&f->reg) < 0 || crihost_start(&f->h) < 0)
		return -1;
	conf = xasprintf("{\"127.0.0.1:%d\": {\"insecure\": true}}", f->reg.port);
	j = json_loads(conf, 0, NULL);
	if (regconf_from_json(j, &f->h.k.regconf, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	json_decref(j);
	*state = f;
	return 0;
}

/* The same with a node image store, as for local cells. */
static int setup_node_store(void **state)
{
	struct fix *f;
	struct err err = ERR_INIT;
	_cleanup_free_ char *root = NULL;

	if (setup(state) < 0)
		return -1;
	f = *state;
	root = xasprintf("%s/images", f->h.dir);
	if (image_store_new(root, f->h.k.regconf, &f->h.k.node_images, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	crihost_stop(&f->h);
	stub_stop(&f->reg);
	stub_release(&f->reg);
	registry_release(&f->images);
	free(f);
	return 0;
}

static char *ref_of(struct fix *f, const char *tail)
{
	return xasprintf("127.0.0.1:%d/test/app%s", f->reg.port, tail);
}

/* PullImage of ref; the image id it answers, or NULL with err filled. */
static char *pull(struct fix *f, const char *ref, const Runtime__V1__AuthConfig *auth,
		  Runtime__V1__PodSandboxConfig *pod, struct err *err)
{
	Runtime__V1__PullImageRequest req = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
	Runtime__V1__PullImageResponse *resp = NULL;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	char *id;

	spec.image = (char *)ref;
	req.image = &spec;
	req.auth = (Runtime__V1__AuthConfig *)auth;
	req.sandbox_config = pod;
	if (crihost_call(&f->h, CRI_IMG("PullImage"), &req.base,
			 &runtime__v1__pull_image_response__descriptor, &resp, err) < 0)
		return NULL;
	id = xstrdup(resp->image_ref);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return id;
}

static Runtime__V1__ListImagesResponse *list(struct fix *f, const char *filter)
{
	Runtime__V1__ListImagesRequest req = RUNTIME__V1__LIST_IMAGES_REQUEST__INIT;
	Runtime__V1__ImageFilter flt = RUNTIME__V1__IMAGE_FILTER__INIT;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__ListImagesResponse *resp = NULL;
	struct err err;

	if (filter) {
		spec.image = (char *)filter;
		flt.image = &spec;
		req.filter = &flt;
	}
	if (crihost_call(&f->h, CRI_IMG("ListImages"), &req.base,
			 &runtime__v1__list_images_response__descriptor, &resp, &err) < 0)
		fail_msg("ListImages: %s", err.msg);
	return resp;
}

/* ImageStatus of ref: its image (the caller frees the response), NULL when kiyot has none. */
static Runtime__V1__ImageStatusResponse *status(struct fix *f, const char *ref, struct err *err)
{
	Runtime__V1__ImageStatusRequest req = RUNTIME__V1__IMAGE_STATUS_REQUEST__INIT;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	Runtime__V1__ImageStatusResponse *resp = NULL;

	spec.image = (char *)ref;
	req.image = &spec;
	if (crihost_call(&f->h, CRI_IMG("ImageStatus"), &req.base,
			 &runtime__v1__image_status_response__descriptor, &resp, err) < 0)
		return NULL;
	return resp;
}

static int remove_image(struct fix *f, const char *ref, struct err *err)
{
	Runtime__V1__RemoveImageRequest req = RUNTIME__V1__REMOVE_IMAGE_REQUEST__INIT;
	Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
	ProtobufCMessage *resp = NULL;
	int ret;

	spec.image = (char *)ref;
	req.image = &spec;
	ret = crihost_call(&f->h, CRI_IMG("RemoveImage"), &req.base,
			   &runtime__v1__remove_image_response__descriptor, &resp, err);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	return ret;
}

/* What the store holds on disk (what a restarted kiyot would list): its images, the number
 * returned; release with store_contents_release. */
static size_t stored_images(struct fix *f, struct store_contents *c)
{
	struct err err = ERR_INIT;

	assert_int_equal(store_load(f->h.k.store, c, &err), 0);
	assert_int_equal(c->n_sandboxes, 0);
	assert_int_equal(c->n_containers, 0);
	return c->n_images;
}

/* A pull with no pod on a node without an image store resolves the image at its registry
 * (manifest and config, no layer), remembers it with its tag and digest, on disk too, and
 * keeps the credentials for the cell that pulls it later. */
static void test_cri_image__pull_without_a_pod_resolves_and_remembers(void **state)
{
	struct fix *f = *state;
	Runtime__V1__AuthConfig auth = RUNTIME__V1__AUTH_CONFIG__INIT;
	Runtime__V1__ListImagesResponse *imgs;
	const Kiyot__Cell__V1__RegistryAuth *kept;
	_cleanup_free_ char *ref = ref_of(f, ":v1");
	_cleanup_free_ char *digest = NULL, *id = NULL;
	struct store_contents stored;
	struct err err;

	auth.username = "alice";
	auth.password = "s3cret";
	id = pull(f, ref, &auth, NULL, &err);
	if (!id)
		fail_msg("%s", err.msg);
	assert_string_equal(id, f->images.config_digest[0]);
	digest = xasprintf("127.0.0.1:%d/test/app@%s", f->reg.port, f->images.manifest_digest[0]);
	imgs = list(f, NULL);
	assert_int_equal(imgs->n_images, 1);
	assert_string_equal(imgs->images[0]->id, id);
	assert_int_equal(imgs->images[0]->n_repo_tags, 1);
	assert_string_equal(imgs->images[0]->repo_tags[0], ref);
	assert_int_equal(imgs->images[0]->n_repo_digests, 1);
	assert_string_equal(imgs->images[0]->repo_digests[0], digest);
	assert_non_null(imgs->images[0]->uid); /* USER 1000:1000: the uid part */
	assert_int_equal(imgs->images[0]->uid->value, 1000);
	assert_string_equal(imgs->images[0]->username, "");
	protobuf_c_message_free_unpacked(&imgs->base, NULL);

	records_lock(f->h.k.records);
	kept = kiyot_auth_for(&f->h.k, id);
	assert_non_null(kept);
	assert_string_equal(kept->username, "alice");
	assert_string_equal(kept->password, "s3cret");
	records_unlock(f->h.k.records);

	assert_int_equal(stored_images(f, &stored), 1);
	assert_string_equal(stored.images[0]->id, id);
	assert_string_equal(stored.images[0]->repo_tags, ref);
	assert_string_equal(stored.images[0]->repo_digests, digest);
	store_contents_release(&stored);

	/* pulled again without credentials: the old ones are forgotten */
	free(id);
	id = pull(f, ref, NULL, NULL, &err);
	assert_non_null(id);
	records_lock(f->h.k.records);
	assert_null(kiyot_auth_for(&f->h.k, id));
	records_unlock(f->h.k.records);
}

/* A pod that has no ready sandbox in kiyot gets the same pull on the node. */
static void test_cri_image__pull_for_a_pod_without_a_cell_is_the_nodes(void **state)
{
	struct fix *f = *state;
	Runtime__V1__PodSandboxConfig pod = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
	Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
	_cleanup_free_ char *ref = ref_of(f, ":v2");
	_cleanup_free_ char *id = NULL;
	Runtime__V1__ImageStatusResponse *st;
	struct err err;

	crihost_add_sandbox(&f->h, "sb-stopped", "web", SANDBOX_NOTREADY, "cell-gone");
	crihost_add_sandbox(&f->h, "sb-other", "db", SANDBOX_READY, "cell-db");
	md.name = "web";
	md.namespace_ = "default";
	md.uid = "uid-web";
	pod.metadata = &md;
	id = pull(f, ref, NULL, &pod, &err);
	if (!id)
		fail_msg("%s", err.msg);
	assert_string_equal(id, f->images.config_digest[1]);
	st = status(f, ref, &err);
	assert_non_null(st);
	assert_non_null(st->image);
	assert_null(st->image->uid); /* USER nginx: a name */
	assert_string_equal(st->image->username, "nginx");
	protobuf_c_message_free_unpacked(&st->base, NULL);
}

/* A tag pulled again after it moved points at the new image only. */
static void test_cri_image__a_moved_tag_leaves_the_old_image(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *ref = ref_of(f, ":latest");
	_cleanup_free_ char *v1 = ref_of(f, ":v1");
	_cleanup_free_ char *a = NULL, *b = NULL;
	Runtime__V1__ListImagesResponse *imgs;
	struct store_contents stored;
	struct err err;

	a = pull(f, v1, NULL, NULL, &err);
	assert_non_null(a);
	free(a);
	a = pull(f, ref, NULL, NULL, &err);
	assert_non_null(a);
	f->images.latest = 1;
	b = pull(f, ref, NULL, NULL, &err);
	assert_non_null(b);
	assert_string_not_equal(a, b);
	imgs = list(f, NULL);
	assert_int_equal(imgs->n_images, 2);
	for (size_t i = 0; i < imgs->n_images; i++) {
		const Runtime__V1__Image *im = imgs->images[i];

		if (strcmp(im->id, a) == 0) {
			assert_int_equal(im->n_repo_tags, 1);
			assert_string_equal(im->repo_tags[0], v1);
		} else {
			assert_string_equal(im->id, b);
			assert_int_equal(im->n_repo_tags, 1);
			assert_string_equal(im->repo_tags[0], ref);
		}
	}
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
	/* and so it is on disk */
	assert_int_equal(stored_images(f, &stored), 2);
	for (size_t i = 0; i < stored.n_images; i++)
		assert_string_equal(stored.images[i]->repo_tags,
				    strcmp(stored.images[i]->id, a) == 0 ? v1 : ref);
	store_contents_release(&stored);
}

/* A tag the registry does not have: the registry's answer, and nothing remembered. */
static void test_cri_image__failed_pull_remembers_nothing(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *ref = ref_of(f, ":nope");
	Runtime__V1__ListImagesResponse *imgs;
	struct err err;

	assert_null(pull(f, ref, NULL, NULL, &err));
	assert_int_equal(err.code, ENOENT);
	assert_non_null(strstr(err.msg, "manifest unknown"));
	assert_null(pull(f, "", NULL, NULL, &err));
	assert_int_equal(err.code, EINVAL);
	assert_non_null(strstr(err.msg, "image.image: required"));
	imgs = list(f, NULL);
	assert_int_equal(imgs->n_images, 0);
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
}

#define BUSYBOX_ID "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define BUSYBOX_DIGEST                                                                             \
	"docker.io/library/busybox@sha256:"                                                        \
	"2222222222222222222222222222222222222222222222222222222222222222"

/* ImageStatus finds an image by id (with or without "sha256:"), by tag as the kubelet writes it
 * (short names are Docker Hub's) and by repo digest; anything else is an empty answer. */
static void test_cri_image__status_finds_by_id_tag_and_digest(void **state)
{
	static const char *const found[] = {
		BUSYBOX_ID,	  BUSYBOX_ID + 7,    "busybox",
		"busybox:latest", "library/busybox", "docker.io/library/busybox:latest",
		BUSYBOX_DIGEST,
	};
	static const char *const absent[] = { "busybox:1.36", "nginx", "quay.io/busybox",
					      "sha256:1111" };
	struct fix *f = *state;
	Runtime__V1__ImageStatusResponse *st;
	struct err err;

	crihost_add_image(&f->h, BUSYBOX_ID, "docker.io/library/busybox:latest", BUSYBOX_DIGEST,
			  4096, "0");
	for (size_t i = 0; i < ARRAY_SIZE(found); i++) {
		st = status(f, found[i], &err);
		assert_non_null(st);
		if (!st->image)
			fail_msg("%s: not found", found[i]);
		assert_string_equal(st->image->id, BUSYBOX_ID);
		assert_int_equal(st->image->size, 4096);
		assert_int_equal(st->image->uid->value, 0);
		protobuf_c_message_free_unpacked(&st->base, NULL);
	}
	for (size_t i = 0; i < ARRAY_SIZE(absent); i++) {
		st = status(f, absent[i], &err);
		assert_non_null(st);
		if (st->image)
			fail_msg("%s: found %s", absent[i], st->image->id);
		protobuf_c_message_free_unpacked(&st->base, NULL);
	}
	assert_null(status(f, "", &err));
	assert_int_equal(err.code, EINVAL);
}

/* ListImages with a filter answers that image alone, or nothing; users without a numeric
 * part are names, an empty one neither. */
static void test_cri_image__list_filters_by_reference(void **state)
{
	struct fix *f = *state;
	Runtime__V1__ListImagesResponse *imgs;

	crihost_add_image(&f->h, BUSYBOX_ID, "docker.io/library/busybox:latest", "", 1, "");
	crihost_add_image(&f->h, "sha256:aa", "docker.io/library/nginx:1.25", "", 2, "www:www");
	crihost_add_image(&f->h, "sha256:bb", "quay.io/app:1\nquay.io/app:stable", "", 3, ":grp");
	imgs = list(f, "nginx:1.25");
	assert_int_equal(imgs->n_images, 1);
	assert_string_equal(imgs->images[0]->id, "sha256:aa");
	assert_string_equal(imgs->images[0]->username, "www");
	assert_null(imgs->images[0]->uid);
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
	imgs = list(f, "quay.io/app:stable");
	assert_int_equal(imgs->n_images, 1);
	assert_int_equal(imgs->images[0]->n_repo_tags, 2);
	assert_string_equal(imgs->images[0]->repo_tags[1], "quay.io/app:stable");
	assert_string_equal(imgs->images[0]->username, "");
	assert_null(imgs->images[0]->uid);
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
	imgs = list(f, "redis");
	assert_int_equal(imgs->n_images, 0);
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
	imgs = list(f, "");
	assert_int_equal(imgs->n_images, 3);
	assert_string_equal(imgs->images[0]->username, ""); /* busybox: no USER */
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
}

/* RemoveImage forgets the image, on disk too; an absent one is no error, a missing name is. */
static void test_cri_image__remove_forgets_the_image(void **state)
{
	struct fix *f = *state;
	Runtime__V1__ListImagesResponse *imgs;
	struct store_contents stored;
	_cleanup_free_ char *ref = ref_of(f, ":v1");
	_cleanup_free_ char *id = NULL;
	struct err err;

	id = pull(f, ref, NULL, NULL, &err);
	assert_non_null(id);
	assert_int_equal(stored_images(f, &stored), 1);
	store_contents_release(&stored);
	assert_int_equal(remove_image(f, ref, &err), 0);
	imgs = list(f, NULL);
	assert_int_equal(imgs->n_images, 0);
	protobuf_c_message_free_unpacked(&imgs->base, NULL);
	assert_int_equal(stored_images(f, &stored), 0);
	store_contents_release(&stored);
	assert_int_equal(remove_image(f, ref, &err), 0);
	assert_int_equal(remove_image(f, "", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "image.image: required"));
}

static int node_has(struct fix *f, const char *id)
{
	struct image_info *info = NULL;
	struct err err = ERR_INIT;
	int ret = image_lookup(f->h.k.node_images, id, &info, &err);

	image_info_free(info);
	return ret == 0;
}

/* With a node image store (local cells), PullImage fills it; RemoveImage takes the image out
 * of it unless a container still uses it, and then the sweep after that container does. */
static void test_cri_image__node_store_keeps_what_containers_use(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *v1 = ref_of(f, ":v1");
	_cleanup_free_ char *v2 = ref_of(f, ":v2");
	_cleanup_free_ char *a = NULL, *b = NULL;
	struct container *c;
	struct err err;

	a = pull(f, v1, NULL, NULL, &err);
	if (!a)
		fail_msg("%s", err.msg);
	b = pull(f, v2, NULL, NULL, &err);
	assert_non_null(b);
	assert_true(node_has(f, a));
	assert_true(node_has(f, b));
	c = crihost_add_container(&f->h, "ctr-1", "sb-1", "app", v1, CTR_RUNNING);
	free(c->image_id); /* as its unit's status reported it */
	c->image_id = xstrdup(a);

	assert_int_equal(remove_image(f, v2, &err), 0);
	assert_false(node_has(f, b)); /* nobody used it: gone at once */
	assert_int_equal(remove_image(f, v1, &err), 0);
	assert_true(node_has(f, a)); /* ctr-1 runs on it */
	kiyot_node_images_sweep(&f->h.k);
	assert_true(node_has(f, a));
	records_lock(f->h.k.records);
	assert_int_equal(records_remove_container(f->h.k.records, c, &err), 0);
	records_unlock(f->h.k.records);
	kiyot_node_images_sweep(&f->h.k);
	assert_false(node_has(f, a));
}

/* Pre-pulls fill the node's store in the background and stop cleanly. */
static void test_cri_image__node_prepull_fills_the_store(void **state)
{
	struct fix *f = *state;
	_cleanup_free_ char *v2 = ref_of(f, ":v2");
	json_t *refs = json_pack("[s]", v2);

	kiyot_node_prepull(&f->h.k, refs);
	json_decref(refs);
	for (int i = 0; i < 500 && !node_has(f, f->images.config_digest[1]); i++)
		usleep(10000);
	assert_true(node_has(f, f->images.config_digest[1]));
	assert_int_equal(kiyot_node_prepulls_stop(&f->h.k, 5000), 0);
	assert_null(f->h.k.node_prepulls);
	/* no refs: nothing starts */
	refs = json_array();
	kiyot_node_prepull(&f->h.k, refs);
	json_decref(refs);
	assert_null(f->h.k.node_prepulls);
}

/* ImageFsInfo: the state directory; what the node's store holds, counted by the images'
 * sizes; the same file system for containers' writable layers. */
static void test_cri_image__fs_info_counts_the_node_store(void **state)
{
	struct fix *f = *state;
	Runtime__V1__ImageFsInfoRequest req = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
	Runtime__V1__ImageFsInfoResponse *fs = NULL;
	struct err err;

	crihost_add_image(&f->h, "sha256:aa", "", "", 1000, "");
	crihost_add_image(&f->h, "sha256:bb", "", "", 24, "");
	assert_int_equal(crihost_call(&f->h, CRI_IMG("ImageFsInfo"), &req.base,
				      &runtime__v1__image_fs_info_response__descriptor, &fs, &err),
			 0);
	assert_int_equal(fs->n_image_filesystems, 1);
	assert_string_equal(fs->image_filesystems[0]->fs_id->mountpoint, f->h.dir);
	assert_int_equal(fs->image_filesystems[0]->used_bytes->value, 1024);
	assert_true(fs->image_filesystems[0]->timestamp > 0);
	assert_int_equal(fs->n_container_filesystems, 1);
	assert_string_equal(fs->container_filesystems[0]->fs_id->mountpoint, f->h.dir);
	protobuf_c_message_free_unpacked(&fs->base, NULL);
}

/* Without a node store (remote cells) the node holds no layers: nothing used. */
static void test_cri_image__fs_info_without_a_node_store(void **state)
{
	struct fix *f = *state;
	Runtime__V1__ImageFsInfoRequest req = RUNTIME__V1__IMAGE_FS_INFO_REQUEST__INIT;
	Runtime__V1__ImageFsInfoResponse *fs = NULL;
	struct err err;

	crihost_add_image(&f->h, "sha256:aa", "", "", 1000, "");
	assert_int_equal(crihost_call(&f->h, CRI_IMG("ImageFsInfo"), &req.base,
				      &runtime__v1__image_fs_info_response__descriptor, &fs, &err),
			 0);
	assert_int_equal(fs->image_filesystems[0]->used_bytes->value, 0);
	protobuf_c_message_free_unpacked(&fs->base, NULL);
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(test_cri_image__##name, setup, teardown)
#define N(name) cmocka_unit_test_setup_teardown(test_cri_image__##name, setup_node_store, teardown)
	const struct CMUnitTest tests[] = {
		T(pull_without_a_pod_resolves_and_remembers),
		T(pull_for_a_pod_without_a_cell_is_the_nodes),
		T(a_moved_tag_leaves_the_old_image),
		T(failed_pull_remembers_nothing),
		T(status_finds_by_id_tag_and_digest),
		T(list_filters_by_reference),
		T(remove_forgets_the_image),
		N(node_store_keeps_what_containers_use),
		N(node_prepull_fills_the_store),
		N(fs_info_counts_the_node_store),
		T(fs_info_without_a_node_store),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
