/*
 * records.c: the records of sandboxes, containers and images (see records.h). Each kind is a
 * table: a doubly linked list in answer order and a hash of the ids' first KEY_LEN characters
 * (the whole id when shorter), so the ids a prefix of KEY_LEN or more matches all share its
 * bucket. A shorter prefix, which only a person types, walks the list.
 *
 * Two more ways in, so what the kubelet's calls and the cells' Watches do walks no list: the
 * cell id of a sandbox kiyot made is the sandbox id's first CELL_ID_LEN characters
 * (cri_sandbox.c), so that sandbox is in the bucket of the cell id (only a miss walks the
 * list); and the containers of a sandbox are chained in an index hashed by sandbox id, each
 * chain in list order, with as many buckets as the containers' table.
 */
#include "records.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>

#include "codec.h"
#include "ctrlog.h"
#include "store.h"
#include "xalloc.h"

/* Hex digits of an id that choose its bucket: a prefix this long or longer is looked up in
 * one bucket. */
#define KEY_LEN 8
#define MIN_BUCKETS 64

struct table {
	struct rec_head head; /* the list's ends: head.next is the first, head.prev the last */
	struct rec_head **buckets;
	size_t n_buckets; /* a power of two */
	size_t n;
};

/* The containers by sandbox id: chains through sb_hnext. */
struct sb_index {
	struct container **buckets;
	size_t n_buckets; /* the containers' table's, once built */
};

struct records {
	struct store *store;
	pthread_mutex_t lock;
	pthread_cond_t phase_changed; /* a sandbox went back to IDLE */
	struct table sandboxes, containers, images;
	struct sb_index by_sandbox;
};

#define REC_OF(type, h) ((type *)((char *)(h)-offsetof(type, rec)))

static void table_init(struct table *t)
{
	t->head.prev = t->head.next = &t->head;
	t->n_buckets = MIN_BUCKETS;
	t->buckets = xcalloc(t->n_buckets, sizeof(*t->buckets));
	t->n = 0;
}

/* FNV-1a of the first n characters. */
static size_t key_hash(const char *id, size_t n)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < n && id[i]; i++) {
		h ^= (unsigned char)id[i];
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

static struct rec_head **bucket_of(const struct table *t, const char *id, size_t len)
{
	return &t->buckets[key_hash(id, len < KEY_LEN ? len : KEY_LEN) & (t->n_buckets - 1)];
}

static void bucket_insert(struct table *t, struct rec_head *h)
{
	struct rec_head **b = bucket_of(t, h->id, strlen(h->id));

	h->hnext = *b;
	*b = h;
}

static void rec_get(struct rec_head *h)
{
	__atomic_add_fetch(&h->refs, 1, __ATOMIC_RELAXED);
}

/* Drops a reference; whether it was the last. */
static bool rec_put(struct rec_head *h)
{
	return __atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0;
}

/* Doubles the buckets before they would hold more than one record each on average. */
static void table_grow(struct table *t)
{
	if (t->n + 1 <= t->n_buckets)
		return;
	free(t->buckets);
	t->n_buckets *= 2;
	t->buckets = xcalloc(t->n_buckets, sizeof(*t->buckets));
	for (struct rec_head *h = t->head.next; h != &t->head; h = h->next)
		bucket_insert(t, h);
}

/* Lists h first (at_end: last) under id; the records' reference is the caller's. */
static void table_add(struct table *t, struct rec_head *h, const char *id, bool at_end)
{
	struct rec_head *before = at_end ? &t->head : t->head.next;

	table_grow(t); /* first: it rehashes what is listed */
	h->id = id;
	h->listed = 1;
	rec_get(h);
	h->next = before;
	h->prev = before->prev;
	before->prev->next = h;
	before->prev = h;
	t->n++;
	bucket_insert(t, h);
}

/* Unlists h; whether it was listed (the records' reference is then the caller's to drop). */
static bool table_remove(struct table *t, struct rec_head *h)
{
	struct rec_head **b;

	if (!h->listed)
		return false;
	for (b = bucket_of(t, h->id, strlen(h->id)); *b != h; b = &(*b)->hnext)
		;
	*b = h->hnext;
	h->prev->next = h->next;
	h->next->prev = h->prev;
	h->prev = h->next = h->hnext = NULL;
	h->listed = 0;
	t->n--;
	return true;
}

static struct rec_head *table_exact(const struct table *t, const char *id)
{
	for (struct rec_head *h = *bucket_of(t, id, strlen(id)); h; h = h->hnext)
		if (strcmp(h->id, id) == 0)
			return h;
	return NULL;
}

/* The record with id, else the only one id is a prefix of; NULL for none, "" or several. */
static struct rec_head *table_find(const struct table *t, const char *id)
{
	size_t len = strlen(id);
	struct rec_head *hit;

	if (len == 0)
		return NULL;
	if ((hit = table_exact(t, id)))
		return hit;
	if (len >= KEY_LEN) {
		for (struct rec_head *h = *bucket_of(t, id, len); h; h = h->hnext) {
			if (strncmp(h->id, id, len) != 0)
				continue;
			if (hit)
				return NULL; /* ambiguous prefix */
			hit = h;
		}
		return hit;
	}
	for (struct rec_head *h = t->head.next; h != &t->head; h = h->next) {
		if (strncmp(h->id, id, len) != 0)
			continue;
		if (hit)
			return NULL;
		hit = h;
	}
	return hit;
}

static struct container **sb_bucket(const struct sb_index *x, const char *sandbox_id)
{
	return &x->buckets[key_hash(sandbox_id, strlen(sandbox_id)) & (x->n_buckets - 1)];
}

/* Rebuilds the index for the containers' table as it is (after it grew): walking the list
 * from its end and putting each first keeps every chain in list order. */
static void sb_rebuild(struct records *r)
{
	const struct table *t = &r->containers;

	free(r->by_sandbox.buckets);
	r->by_sandbox.n_buckets = t->n_buckets;
	r->by_sandbox.buckets = xcalloc(t->n_buckets, sizeof(*r->by_sandbox.buckets));
	for (struct rec_head *h = t->head.prev; h != &t->head; h = h->prev) {
		struct container *c = REC_OF(struct container, h);
		struct container **b = sb_bucket(&r->by_sandbox, c->sandbox_id);

		c->sb_hnext = *b;
		*b = c;
	}
}

/* Indexes c, just listed first (at_end: last). */
static void sb_add(struct records *r, struct container *c, bool at_end)
{
	struct container **b;

	if (r->by_sandbox.n_buckets != r->containers.n_buckets) {
		sb_rebuild(r); /* c among them */
		return;
	}
	b = sb_bucket(&r->by_sandbox, c->sandbox_id);
	if (at_end)
		while (*b)
			b = &(*b)->sb_hnext;
	c->sb_hnext = *b;
	*b = c;
}

static void sb_remove(struct records *r, struct container *c)
{
	struct container **b = sb_bucket(&r->by_sandbox, c->sandbox_id);

	while (*b && *b != c)
		b = &(*b)->sb_hnext;
	if (*b)
		*b = c->sb_hnext;
	c->sb_hnext = NULL;
}

struct records *records_new(struct store *st)
{
	struct records *r = xcalloc(1, sizeof(*r));

	r->store = st;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->phase_changed, NULL);
	table_init(&r->sandboxes);
	table_init(&r->containers);
	table_init(&r->images);
	return r;
}

/* The first listed record, unlisted: the records' reference is the caller's. */
static struct rec_head *table_pop(struct table *t)
{
	struct rec_head *h = t->head.next;

	table_remove(t, h);
	return h;
}

void records_lock(struct records *r)
{
	pthread_mutex_lock(&r->lock);
}

void records_unlock(struct records *r)
{
	pthread_mutex_unlock(&r->lock);
}

bool records_trylock(struct records *r)
{
	return pthread_mutex_trylock(&r->lock) == 0;
}

struct records *records_locked(struct records *r)
{
	pthread_mutex_lock(&r->lock);
	return r;
}

void records_free(struct records *r)
{
	if (!r)
		return;
	while (r->sandboxes.n)
		sandbox_put(REC_OF(struct sandbox, table_pop(&r->sandboxes)));
	while (r->containers.n) {
		struct container *c = REC_OF(struct container, table_pop(&r->containers));

		c->sb_hnext = NULL;
		container_put(c);
	}
	while (r->images.n)
		image_rec_put(REC_OF(struct image_rec, table_pop(&r->images)));
	free(r->sandboxes.buckets);
	free(r->containers.buckets);
	free(r->by_sandbox.buckets);
	free(r->images.buckets);
	pthread_cond_destroy(&r->phase_changed);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

int records_load(struct records *r, struct err *err)
{
	struct store_contents c;

	if (store_load(r->store, &c, err) < 0)
		return -err->code;
	for (size_t i = 0; i < c.n_sandboxes; i++)
		table_add(&r->sandboxes, &c.sandboxes[i]->rec, c.sandboxes[i]->id, true);
	for (size_t i = 0; i < c.n_containers; i++) {
		table_add(&r->containers, &c.containers[i]->rec, c.containers[i]->id, true);
		sb_add(r, c.containers[i], true);
	}
	for (size_t i = 0; i < c.n_images; i++)
		table_add(&r->images, &c.images[i]->rec, c.images[i]->id, true);
	c.n_sandboxes = c.n_containers = c.n_images = 0; /* listed: not freed below */
	store_contents_release(&c);
	return 0;
}

struct sandbox *records_sandbox(struct records *r, const char *id)
{
	struct rec_head *h = table_find(&r->sandboxes, id);

	return h ? REC_OF(struct sandbox, h) : NULL;
}

struct sandbox *records_sandbox_exact(struct records *r, const char *id)
{
	struct rec_head *h = table_exact(&r->sandboxes, id);

	return h ? REC_OF(struct sandbox, h) : NULL;
}

struct container *records_container(struct records *r, const char *id)
{
	struct rec_head *h = table_find(&r->containers, id);

	return h ? REC_OF(struct container, h) : NULL;
}

struct container *records_container_exact(struct records *r, const char *id)
{
	struct rec_head *h = table_exact(&r->containers, id);

	return h ? REC_OF(struct container, h) : NULL;
}

struct image_rec *records_image_exact(struct records *r, const char *id)
{
	struct rec_head *h = table_exact(&r->images, id);

	return h ? REC_OF(struct image_rec, h) : NULL;
}

struct sandbox *records_sandbox_of_cell(struct records *r, const char *cell_id)
{
	size_t len = strlen(cell_id);

	/* where kiyot's own cells are: a sandbox id's first CELL_ID_LEN characters */
	if (len >= KEY_LEN)
		for (struct rec_head *h = *bucket_of(&r->sandboxes, cell_id, len); h;
		     h = h->hnext) {
			struct sandbox *sb = REC_OF(struct sandbox, h);

			if (sb->cell_id[0] && strcmp(sb->cell_id, cell_id) == 0)
				return sb;
		}
	/* else (a cell no sandbox here made, or records written otherwise) every one */
	for (struct rec_head *h = r->sandboxes.head.next; h != &r->sandboxes.head; h = h->next) {
		struct sandbox *sb = REC_OF(struct sandbox, h);

		if (sb->cell_id[0] && strcmp(sb->cell_id, cell_id) == 0)
			return sb;
	}
	return NULL;
}

void records_add_sandbox(struct records *r, struct sandbox *sb)
{
	table_add(&r->sandboxes, &sb->rec, sb->id, false);
}

void records_add_container(struct records *r, struct container *c)
{
	table_add(&r->containers, &c->rec, c->id, false);
	sb_add(r, c, false);
}

void records_add_image(struct records *r, struct image_rec *i)
{
	table_add(&r->images, &i->rec, i->id, false);
}

int records_save_sandbox(struct records *r, const struct sandbox *sb, struct err *err)
{
	return store_put_sandbox(r->store, sb, err);
}

int records_save_container(struct records *r, const struct container *c, struct err *err)
{
	return store_put_container(r->store, c, err);
}

int records_save_image(struct records *r, const struct image_rec *i, struct err *err)
{
	return store_put_image(r->store, i, err);
}

int records_remove_sandbox(struct records *r, struct sandbox *sb, struct err *err)
{
	int ret;

	if (!table_remove(&r->sandboxes, &sb->rec))
		return 0;
	ret = store_delete_sandbox(r->store, sb->id, err);
	pthread_cond_broadcast(&r->phase_changed); /* a stop waiting for it finds it gone */
	sandbox_put(sb);
	return ret;
}

int records_remove_container(struct records *r, struct container *c, struct err *err)
{
	int ret;

	if (!table_remove(&r->containers, &c->rec))
		return 0;
	sb_remove(r, c);
	ret = store_delete_container(r->store, c->id, err);
	container_put(c);
	return ret;
}

int records_remove_image(struct records *r, struct image_rec *i, struct err *err)
{
	int ret;

	if (!table_remove(&r->images, &i->rec))
		return 0;
	ret = store_delete_image(r->store, i->id, err);
	image_rec_put(i);
	return ret;
}

/* The snapshots walk the list themselves: each fills an array of its own record type. */
size_t records_sandboxes(struct records *r, struct sandbox ***out)
{
	const struct table *t = &r->sandboxes;
	struct sandbox **v = xcalloc(t->n + 1, sizeof(*v));
	size_t n = 0;

	for (struct rec_head *h = t->head.next; h != &t->head; h = h->next)
		v[n++] = sandbox_get(REC_OF(struct sandbox, h));
	*out = v;
	return n;
}

size_t records_containers(struct records *r, const char *sandbox_id, struct container ***out)
{
	const struct table *t = &r->containers;
	struct container **v, *c;
	size_t n = 0;

	if (sandbox_id) {
		struct container *first =
			r->by_sandbox.n_buckets ? *sb_bucket(&r->by_sandbox, sandbox_id) : NULL;

		for (c = first; c; c = c->sb_hnext)
			n += strcmp(c->sandbox_id, sandbox_id) == 0;
		v = xcalloc(n + 1, sizeof(*v));
		n = 0;
		for (c = first; c; c = c->sb_hnext)
			if (strcmp(c->sandbox_id, sandbox_id) == 0)
				v[n++] = container_get(c);
		*out = v;
		return n;
	}
	v = xcalloc(t->n + 1, sizeof(*v));
	for (struct rec_head *h = t->head.next; h != &t->head; h = h->next)
		v[n++] = container_get(REC_OF(struct container, h));
	*out = v;
	return n;
}

size_t records_images(struct records *r, struct image_rec ***out)
{
	const struct table *t = &r->images;
	struct image_rec **v = xcalloc(t->n + 1, sizeof(*v));
	size_t n = 0;

	for (struct rec_head *h = t->head.next; h != &t->head; h = h->next)
		v[n++] = image_rec_get(REC_OF(struct image_rec, h));
	*out = v;
	return n;
}

void sandboxes_put(struct sandbox **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sandbox_put(v[i]);
	free(v);
}

void containers_put(struct container **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		container_put(v[i]);
	free(v);
}

void images_put(struct image_rec **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		image_rec_put(v[i]);
	free(v);
}

int sandbox_begin(struct records *r, struct sandbox *sb, enum sandbox_phase to, struct err *err)
{
	while (to == SANDBOX_STOPPING && sb->phase == SANDBOX_STOPPING && sb->rec.listed)
		pthread_cond_wait(&r->phase_changed, &r->lock);
	if (!sb->rec.listed)
		return err_set(err, ENOENT, "pod sandbox %s not found", sb->id);
	if (sb->phase == SANDBOX_LAUNCHING)
		return err_set(err, EAGAIN, "pod sandbox %s is still starting; retry when it is",
			       sb->id);
	if (sb->phase == SANDBOX_STOPPING)
		return err_set(err, EAGAIN, "pod sandbox %s is stopping; retry when it is", sb->id);
	sb->phase = to;
	return 0;
}

void sandbox_end(struct records *r, struct sandbox *sb)
{
	sb->phase = SANDBOX_IDLE;
	pthread_cond_broadcast(&r->phase_changed);
}

bool sandbox_listed(const struct sandbox *sb)
{
	return sb->rec.listed;
}

void sandbox_launching(struct sandbox *sb)
{
	sb->state = SANDBOX_NOTREADY;
	sb->phase = SANDBOX_LAUNCHING;
}

int sandbox_launched(struct records *r, struct sandbox *sb, const char *ip, struct err *err)
{
	if (strcmp(sb->ip ? sb->ip : "", ip) != 0) {
		free(sb->ip);
		sb->ip = xstrdup(ip);
	}
	sb->state = SANDBOX_READY;
	if (records_save_sandbox(r, sb, err) < 0) {
		sb->state = SANDBOX_NOTREADY;
		return -err->code;
	}
	sandbox_end(r, sb);
	return 0;
}

void sandbox_not_ready(struct sandbox *sb)
{
	sb->state = SANDBOX_NOTREADY;
}

struct sandbox *sandbox_get(struct sandbox *sb)
{
	rec_get(&sb->rec);
	return sb;
}

void sandbox_put(struct sandbox *sb)
{
	if (sb && rec_put(&sb->rec))
		sandbox_free(sb);
}

struct container *container_get(struct container *c)
{
	rec_get(&c->rec);
	return c;
}

void container_put(struct container *c)
{
	if (c && rec_put(&c->rec))
		container_free(c);
}

struct image_rec *image_rec_get(struct image_rec *i)
{
	rec_get(&i->rec);
	return i;
}

void image_rec_put(struct image_rec *i)
{
	if (i && rec_put(&i->rec))
		image_rec_free(i);
}

void sandbox_free(struct sandbox *s)
{
	if (!s)
		return;
	free(s->id);
	if (s->config)
		protobuf_c_message_free_unpacked(&s->config->base, NULL);
	free(s->runtime_handler);
	free(s->cell_id);
	free(s->ip);
	free(s->instance_type);
	free(s->sizing_reason);
	free(s);
}

void container_free(struct container *c)
{
	if (!c)
		return;
	free(c->id);
	free(c->sandbox_id);
	if (c->config)
		protobuf_c_message_free_unpacked(&c->config->base, NULL);
	free(c->reason);
	free(c->message);
	free(c->image_ref);
	free(c->image_id);
	free(c->seccomp_profile);
	ctrlog_close(c->log);
	ctrlog_put(c->log);
	free(c);
}

void image_rec_free(struct image_rec *i)
{
	if (!i)
		return;
	free(i->id);
	free(i->repo_tags);
	free(i->repo_digests);
	free(i->user);
	free(i);
}

/* A random id of 64 hex digits, like other runtimes use. */
char *kiyot_new_id(void)
{
	unsigned char raw[32];
	char *id = xmalloc(65);

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		for (size_t i = 0; i < sizeof(raw); i++)
			raw[i] = (unsigned char)(rand() & 0xff);
	}
	hex_encode(raw, sizeof(raw), id);
	return id;
}
