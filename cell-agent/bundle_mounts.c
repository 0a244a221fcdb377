/*
 * bundle_mounts.c: a unit's file systems: the mounts array of its config.json (the base file
 * systems, the pod's etc files, the unit's bind mounts of volumes and host paths), the pod's
 * resolv.conf, hosts and hostname those etc mounts bind, and the overlay that is the unit's
 * root.
 */
#include "bundle.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "buf.h"
#include "bundle_internal.h"
#include "fsutil.h"
#include "xalloc.h"

/* The file systems every unit gets: destination, type, source, comma-separated options. */
static const struct {
	const char *dest, *type, *source, *options;
} base_mounts[] = {
	{ "/proc", "proc", "proc", "nosuid,noexec,nodev" },
	{ "/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k" },
	{ "/dev/pts", "devpts", "devpts",
	  "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5" },
	{ "/dev/shm", "tmpfs", "shm", "nosuid,noexec,nodev,mode=1777,size=65536k" },
	{ "/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev" },
	{ "/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro" },
};

/* Appends a mount to the array; options is comma-separated (may be NULL). */
static void add_mount(json_t *mounts, const char *dest, const char *type, const char *source,
		      const char *options)
{
	json_t *m = json_object(), *opts = json_array();
	_cleanup_free_ char *copy = xstrdup(options ? options : "");
	char *save = NULL;

	for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save))
		json_array_append_new(opts, json_string(o));
	json_object_set_new(m, "destination", json_string(dest));
	json_object_set_new(m, "type", json_string(type));
	json_object_set_new(m, "source", json_string(source));
	json_object_set_new(m, "options", opts);
	json_array_append_new(mounts, m);
}

/* True when a unit mount already targets dest. */
static bool unit_mounts_cover(const Kiyot__Cell__V1__Unit *unit, const char *dest)
{
	for (size_t i = 0; i < unit->n_mounts; i++) {
		if (unit->mounts[i]->container_path &&
		    strcmp(unit->mounts[i]->container_path, dest) == 0)
			return true;
	}
	return false;
}

/* The host path backing one unit mount (emptyDir created); -EINVAL for unknown volumes. */
static int mount_source(const struct bundle_spec *spec, const Kiyot__Cell__V1__Mount *m, char **out,
			struct err *err)
{
	const char *vol = m->volume ? m->volume : "";

	if (!vol[0]) {
		if (!m->host_path || m->host_path[0] != '/')
			return err_set(err, EINVAL, "mount %s: no volume and no absolute host path",
				       m->container_path);
		*out = xstrdup(m->host_path);
		return 0;
	}
	for (size_t i = 0; spec->pod && i < spec->pod->n_volumes; i++) {
		const Kiyot__Cell__V1__Volume *v = spec->pod->volumes[i];
		int ret;

		if (strcmp(v->name, vol) != 0)
			continue;
		if (v->kind == KIYOT__CELL__V1__VOLUME__KIND__HOST_PATH) {
			if (!v->path || v->path[0] != '/')
				return err_set(err, EINVAL, "volume %s: host path must be absolute",
					       vol);
			*out = xstrdup(v->path);
			return 0;
		}
		if (strchr(vol, '/') || strcmp(vol, ".") == 0 || strcmp(vol, "..") == 0)
			return err_set(err, EINVAL, "volume name \"%s\" is not a plain name", vol);
		*out = xasprintf("%s/%s", spec->volumes_dir, vol);
		if (v->kind == KIYOT__CELL__V1__VOLUME__KIND__SHIPPED) {
			if (fs_exists(*out))
				return 0;
			free(*out);
			*out = NULL;
			return err_set(err, ENOENT,
				       "mount %s: volume \"%s\" has no content in the cell yet "
				       "(kiyot writes it with WriteVolume before Apply)",
				       m->container_path, vol);
		}
		ret = fs_mkdir_p(*out, 0755, err);
		if (ret < 0) {
			free(*out);
			*out = NULL;
		}
		return ret;
	}
	return err_set(err, EINVAL, "mount %s: volume \"%s\" is not a volume of the pod",
		       m->container_path, vol);
}

/* See the header. */
bool bundle_propagates_from_host(const Kiyot__Cell__V1__Mount *m)
{
	return m->propagation != KIYOT__CELL__V1__MOUNT__PROPAGATION__PRIVATE &&
	       (!m->volume || !m->volume[0]) && m->host_path && m->host_path[0] == '/';
}

/* A unit bind mount's options: its propagation and read-only flag. */
static const char *mount_options(const Kiyot__Cell__V1__Mount *m)
{
	switch (m->propagation) {
	case KIYOT__CELL__V1__MOUNT__PROPAGATION__HOST_TO_CONTAINER:
		return m->readonly ? "rbind,rslave,ro" : "rbind,rslave";
	case KIYOT__CELL__V1__MOUNT__PROPAGATION__BIDIRECTIONAL:
		return m->readonly ? "rbind,rshared,ro" : "rbind,rshared";
	default:
		return m->readonly ? "rbind,rprivate,ro" : "rbind,rprivate";
	}
}

/* The mounts array: base file systems, the pod's etc files, the unit's binds; see
 * bundle_internal.h. */
int bundle_build_mounts(const struct bundle_spec *spec, json_t *mounts, struct err *err)
{
	static const char *const etc_files[] = { "resolv.conf", "hosts", "hostname" };
	const Kiyot__Cell__V1__Unit *unit = spec->unit;

	for (size_t i = 0; i < ARRAY_SIZE(base_mounts); i++)
		add_mount(mounts, base_mounts[i].dest, base_mounts[i].type, base_mounts[i].source,
			  base_mounts[i].options);
	for (size_t i = 0; spec->etc_dir && i < ARRAY_SIZE(etc_files); i++) {
		_cleanup_free_ char *dest = xasprintf("/etc/%s", etc_files[i]);
		_cleanup_free_ char *src = xasprintf("%s/%s", spec->etc_dir, etc_files[i]);

		if (!unit_mounts_cover(unit, dest))
			add_mount(mounts, dest, "bind", src, "rbind,rprivate");
	}
	for (size_t i = 0; i < unit->n_mounts; i++) {
		const Kiyot__Cell__V1__Mount *m = unit->mounts[i];
		_cleanup_free_ char *src = NULL;
		int ret = 0;

		if (!m->container_path || m->container_path[0] != '/')
			return err_set(err, EINVAL, "mount \"%s\": container path must be absolute",
				       m->container_path ? m->container_path : "");
		if (bundle_propagates_from_host(m) && spec->propagated_dir)
			src = xasprintf("%s/%zu", spec->propagated_dir, i);
		else
			ret = mount_source(spec, m, &src, err);
		if (ret < 0)
			return ret;
		add_mount(mounts, m->container_path, "bind", src, mount_options(m));
	}
	return 0;
}

/* Appends "<prefix> <item>..." lines for DNS settings. */
static void resolv_lines(struct buf *b, const char *prefix, char **items, size_t n, bool one_line)
{
	if (!n)
		return;
	if (one_line) {
		buf_appendf(b, NULL, "%s", prefix);
		for (size_t i = 0; i < n; i++)
			buf_appendf(b, NULL, " %s", items[i]);
		buf_appendf(b, NULL, "\n");
		return;
	}
	for (size_t i = 0; i < n; i++)
		buf_appendf(b, NULL, "%s %s\n", prefix, items[i]);
}

/* Writes one file into dir, unless it already holds text (every apply comes here). */
static int write_etc(const char *dir, const char *name, const char *text, struct err *err)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", dir, name), *old = NULL;
	struct err rerr = ERR_INIT;

	if (fs_read_file(path, ETC_FILE_MAX, &old, NULL, &rerr) == 0 && strcmp(old, text) == 0)
		return 0;
	return fs_replace_file(path, text, strlen(text), 0644, err);
}

/* Writes resolv.conf, hosts and hostname; see the header. */
int bundle_write_etc(const Kiyot__Cell__V1__Pod *pod, const char *dir, const char *pod_ip,
		     struct err *err)
{
	const char *hostname = pod->hostname && pod->hostname[0] ? pod->hostname : pod->name;
	struct buf b = BUF_INIT;
	int ret;

	ret = fs_mkdir_p(dir, 0755, err);
	if (ret < 0)
		return ret;
	if (pod->n_dns_servers) {
		resolv_lines(&b, "nameserver", pod->dns_servers, pod->n_dns_servers, false);
		resolv_lines(&b, "search", pod->dns_searches, pod->n_dns_searches, true);
		resolv_lines(&b, "options", pod->dns_options, pod->n_dns_options, true);
	} else {
		_cleanup_free_ char *host = NULL;

		if (fs_read_file("/etc/resolv.conf", ETC_FILE_MAX, &host, NULL, err) == 0)
			buf_appendf(&b, NULL, "%s", host);
		err_clear(err);
	}
	ret = write_etc(dir, "resolv.conf", buf_str(&b), err);
	buf_reset(&b);
	buf_appendf(&b, NULL, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
	if (hostname && hostname[0] && pod_ip && pod_ip[0])
		buf_appendf(&b, NULL, "%s\t%s\n", pod_ip, hostname);
	if (ret == 0)
		ret = write_etc(dir, "hosts", buf_str(&b), err);
	buf_reset(&b);
	buf_appendf(&b, NULL, "%s\n", hostname ? hostname : "");
	if (ret == 0)
		ret = write_etc(dir, "hostname", buf_str(&b), err);
	buf_release(&b);
	return ret;
}

/* True when path is a mount point distinct from its parent directory. */
static bool is_mounted(const char *path, const char *parent)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Mounts the unit's overlay root; see the header. */
int bundle_mount_rootfs(const char *image_rootfs, const char *unit_dir, struct err *err)
{
	_cleanup_free_ char *upper = xasprintf("%s/upper", unit_dir);
	_cleanup_free_ char *work = xasprintf("%s/work", unit_dir);
	_cleanup_free_ char *target = xasprintf("%s/rootfs", unit_dir);
	_cleanup_free_ char *opts = NULL;
	int ret;

	if (strpbrk(image_rootfs, ",:") || strpbrk(unit_dir, ",:"))
		return err_set(err, EINVAL, "overlay paths may not contain ',' or ':' (%s, %s)",
			       image_rootfs, unit_dir);
	if (is_mounted(target, unit_dir))
		return 0;
	ret = fs_mkdir_p(upper, 0755, err);
	if (ret == 0)
		ret = fs_mkdir_p(work, 0700, err);
	if (ret == 0)
		ret = fs_mkdir_p(target, 0755, err);
	if (ret < 0)
		return ret;
	opts = xasprintf("lowerdir=%s,upperdir=%s,workdir=%s", image_rootfs, upper, work);
	if (mount("overlay", target, "overlay", 0, opts) < 0)
		return err_errno(err, "mount overlay on %s (lower %s)", target, image_rootfs);
	return 0;
}

/* Unmounts the unit's overlay root; see the header. */
int bundle_umount_rootfs(const char *unit_dir, struct err *err)
{
	_cleanup_free_ char *target = xasprintf("%s/rootfs", unit_dir);

	if (!is_mounted(target, unit_dir))
		return 0;
	if (umount2(target, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return err_errno(err, "unmount %s", target);
	return 0;
}
