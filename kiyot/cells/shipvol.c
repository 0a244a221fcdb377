/*
 * shipvol.c: which mounts a remote cell gets how, and volume snapshots read from the node.
 */
#include "shipvol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "xalloc.h"

/* The kubelet's volume plugins whose files kiyot ships. */
static const char *const shipped_plugins[] = {
	"kubernetes.io~configmap",
	"kubernetes.io~secret",
	"kubernetes.io~projected",
	"kubernetes.io~downward-api",
};

static bool label_ok(const char *s, size_t n)
{
	if (n == 0 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static void sha256(const void *data, size_t len, uint8_t out[32])
{
	unsigned int n = 32;

	EVP_Digest(data, len, out, &n, EVP_sha256(), NULL);
}

int shipvol_classify(const char *pod_uid, const char *host_path, enum shipvol_kind *kind,
		     char name[SHIPVOL_NAME_MAX], struct err *err)
{
	_cleanup_free_ char *needle = xasprintf("/pods/%s/", pod_uid);
	const char *rest = pod_uid[0] ? strstr(host_path, needle) : NULL;

	if (!rest)
		return err_set(
			err, EINVAL,
			"%s is a path on the node (a hostPath volume), which a cell on "
			"another machine cannot see; use an emptyDir, configMap, secret, "
			"projected or downwardAPI volume, or run the pod in the node's own "
			"runtime (without the kubernetes.io/target-runtime: kiyot annotation)",
			host_path);
	rest += strlen(needle);
	if (strncmp(rest, "volumes/", 8) == 0) {
		const char *plugin = rest + 8;
		const char *slash = strchr(plugin, '/');
		const char *vol = slash ? slash + 1 : "";
		size_t plen = slash ? (size_t)(slash - plugin) : strlen(plugin);
		size_t vlen = strcspn(vol, "/");
		bool shipped = false;

		if (plen == strlen("kubernetes.io~empty-dir") &&
		    strncmp(plugin, "kubernetes.io~empty-dir", plen) == 0) {
			if (!label_ok(vol, vlen) || vol[vlen])
				return err_set(err, EINVAL,
					       "%s: not an emptyDir volume directory "
					       "(.../volumes/kubernetes.io~empty-dir/<name>)",
					       host_path);
			*kind = SHIPVOL_EMPTY_DIR;
			snprintf(name, SHIPVOL_NAME_MAX, "ed-%.*s", (int)vlen, vol);
			return 0;
		}
		for (size_t i = 0; i < ARRAY_SIZE(shipped_plugins); i++)
			if (plen == strlen(shipped_plugins[i]) &&
			    strncmp(plugin, shipped_plugins[i], plen) == 0)
				shipped = true;
		if (!shipped)
			return err_set(
				err, EINVAL,
				"%s is a %.*s volume, which lives on the node; a cell on "
				"another machine can mount only emptyDir, configMap, secret, "
				"projected and downwardAPI volumes",
				host_path, (int)plen, plugin);
	}
	*kind = SHIPVOL_SHIPPED;
	shipvol_name(host_path, name);
	return 0;
}

void shipvol_name(const char *host_path, char name[SHIPVOL_NAME_MAX])
{
	uint8_t d[32];
	char hex[2 * 8 + 1];

	sha256(host_path, strlen(host_path), d);
	hex_encode(d, 8, hex);
	snprintf(name, SHIPVOL_NAME_MAX, "sv-%s", hex);
}

/* The walk of one snapshot. */
struct walk {
	struct shipvol_snapshot *s;
	size_t cap;
	const char *root; /* for messages */
	struct err *err;
};

static Kiyot__Cell__V1__FileEntry *entry_new(struct walk *w, const char *path,
					     const struct stat *st)
{
	struct shipvol_snapshot *s = w->s;
	Kiyot__Cell__V1__FileEntry *e;

	if (s->req.n_entries >= SHIPVOL_MAX_ENTRIES) {
		err_set(w->err, E2BIG, "%s: more than %d files", w->root, SHIPVOL_MAX_ENTRIES);
		return NULL;
	}
	if (s->req.n_entries == w->cap) {
		Kiyot__Cell__V1__FileEntry **grown;

		w->cap = w->cap ? w->cap * 2 : 16;
		grown = arena_alloc(&s->arena, w->cap * sizeof(*grown));
		if (s->req.n_entries)
			memcpy(grown, s->req.entries, s->req.n_entries * sizeof(*grown));
		s->req.entries = grown;
	}
	e = arena_alloc(&s->arena, sizeof(*e));
	kiyot__cell__v1__file_entry__init(e);
	e->path = arena_strdup(&s->arena, path);
	e->mode = st->st_mode & 07777;
	e->uid = st->st_uid;
	e->gid = st->st_gid;
	s->req.entries[s->req.n_entries++] = e;
	return e;
}

/* Reads a regular file's content (fd open) into e. */
static int read_content(struct walk *w, int fd, const struct stat *st, const char *path,
			Kiyot__Cell__V1__FileEntry *e)
{
	size_t want = (size_t)st->st_size, got = 0;

	if (w->s->bytes + want > SHIPVOL_MAX_BYTES)
		return err_set(w->err, E2BIG, "%s: more than %u bytes of files", w->root,
			       SHIPVOL_MAX_BYTES);
	e->data.data = arena_alloc(&w->s->arena, want ? want : 1);
	while (got < want) {
		ssize_t r = read(fd, e->data.data + got, want - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return err_set(w->err, errno, "%s/%s: %s", w->root, path, strerror(errno));
		if (r == 0)
			break; /* shrank while read; the next event ships the rest */
		got += (size_t)r;
	}
	e->data.len = got;
	w->s->bytes += got;
	return 0;
}

static int walk_dir(struct walk *w, int dfd, const char *prefix, int depth);

/* One name in directory dfd, at relative path path. */
static int walk_one(struct walk *w, int dfd, const char *name, const char *path, int depth)
{
	Kiyot__Cell__V1__FileEntry *e;
	struct stat st;
	int fd, ret = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0
				       : err_set(w->err, errno, "%s/%s: %s", w->root, path,
						 strerror(errno));
	if (S_ISLNK(st.st_mode)) {
		char target[4097];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);

		if (n < 0)
			return errno == ENOENT ? 0
					       : err_set(w->err, errno, "%s/%s: %s", w->root, path,
							 strerror(errno));
		target[n] = '\0';
		if (!(e = entry_new(w, path, &st)))
			return -w->err->code;
		e->type = KIYOT__CELL__V1__FILE_ENTRY__TYPE__SYMLINK;
		e->target = arena_strdup(&w->s->arena, target);
		return 0;
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return 0; /* sockets, fifos, devices: not content */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0
				       : err_set(w->err, errno, "%s/%s: %s", w->root, path,
						 strerror(errno));
	if (fstat(fd, &st) < 0) {
		ret = err_set(w->err, errno, "%s/%s: %s", w->root, path, strerror(errno));
	} else if (!(e = entry_new(w, path, &st))) {
		ret = -w->err->code;
	} else if (S_ISDIR(st.st_mode)) {
		e->type = KIYOT__CELL__V1__FILE_ENTRY__TYPE__DIR;
		ret = walk_dir(w, fd, path, depth + 1);
	} else if (S_ISREG(st.st_mode)) {
		e->type = KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE;
		ret = read_content(w, fd, &st, path, e);
	}
	close(fd);
	return ret;
}

static int walk_dir(struct walk *w, int dfd, const char *prefix, int depth)
{
	struct dirent *d;
	DIR *dir;
	int fd, ret = 0;

	if (depth > SHIPVOL_MAX_DEPTH)
		return err_set(w->err, E2BIG, "%s/%s: deeper than %d directories", w->root, prefix,
			       SHIPVOL_MAX_DEPTH);
	fd = dup(dfd);
	if (fd < 0 || !(dir = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return err_set(w->err, errno, "%s/%s: %s", w->root, prefix, strerror(errno));
	}
	rewinddir(dir);
	while (ret == 0 && (d = readdir(dir))) {
		_cleanup_free_ char *path = NULL;

		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		path = prefix[0] ? xasprintf("%s/%s", prefix, d->d_name) : xstrdup(d->d_name);
		ret = walk_one(w, dfd, d->d_name, path, depth);
	}
	closedir(dir);
	return ret;
}

static int by_path(const void *a, const void *b)
{
	const Kiyot__Cell__V1__FileEntry *x = *(Kiyot__Cell__V1__FileEntry *const *)a;
	const Kiyot__Cell__V1__FileEntry *y = *(Kiyot__Cell__V1__FileEntry *const *)b;

	return strcmp(x->path, y->path);
}

int shipvol_snapshot(const char *host_path, const char *name, struct shipvol_snapshot *out,
		     struct err *err)
{
	struct walk w = { out, 0, host_path, err };
	Kiyot__Cell__V1__FileEntry *root;
	struct stat st;
	uint8_t *packed;
	size_t len;
	int fd, ret = 0;

	memset(out, 0, sizeof(*out));
	kiyot__cell__v1__write_volume_request__init(&out->req);
	out->req.volume = arena_strdup(&out->arena, name);
	fd = open(host_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		ret = err_set(err, errno, "%s: %s", host_path, strerror(errno));
		shipvol_snapshot_release(out);
		return ret;
	}
	if (fstat(fd, &st) < 0) {
		ret = err_set(err, errno, "%s: %s", host_path, strerror(errno));
	} else if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		ret = err_set(err, EINVAL, "%s: neither a directory nor a file", host_path);
	} else {
		root = entry_new(&w, "", &st);
		if (S_ISDIR(st.st_mode)) {
			root->type = KIYOT__CELL__V1__FILE_ENTRY__TYPE__DIR;
			ret = walk_dir(&w, fd, "", 0);
		} else {
			root->type = KIYOT__CELL__V1__FILE_ENTRY__TYPE__FILE;
			ret = read_content(&w, fd, &st, "", root);
		}
	}
	close(fd);
	if (ret < 0) {
		shipvol_snapshot_release(out);
		return ret;
	}
	/* in path order, so the digest does not depend on the order readdir gave */
	qsort(out->req.entries, out->req.n_entries, sizeof(*out->req.entries), by_path);
	len = kiyot__cell__v1__write_volume_request__get_packed_size(&out->req);
	packed = xmalloc(len ? len : 1);
	kiyot__cell__v1__write_volume_request__pack(&out->req, packed);
	sha256(packed, len, out->digest);
	free(packed);
	return 0;
}

void shipvol_snapshot_release(struct shipvol_snapshot *s)
{
	arena_release(&s->arena);
	memset(s, 0, sizeof(*s));
}
