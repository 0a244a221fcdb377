#!/usr/bin/python3
"""Builds the integration suite's container images and pushes them to a registry.

No docker engine and no internet: layers are made with tarfile, gzipped deterministically,
described by an image config and an OCI or Docker schema-2 manifest (or an OCI index), and
pushed with the Registry HTTP API v2. The result of a build is a directory:

    <out>/blobs/<hex>        every blob (layers, configs, manifests) by sha256
    <out>/catalog.json       {"tags": {"repo:tag": {"digest", "media_type"}},
                              "corrupt": [{"repo", "digest", "with"}], "info": {...}}

The "corrupt" entries are applied after a push, straight into the registry's filesystem
storage: the registry then serves content that does not match its digest, or is not JSON.

Usage:
    build.py build OUT                       build (skipped when OUT has this input hash)
    build.py push OUT HOST:PORT [STORAGE]    push everything; corrupt when STORAGE is given
"""

import gzip
import hashlib
import http.client
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BUSYBOX = "/bin/busybox"

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"

ACCEPT = ", ".join([OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST,
                    "application/vnd.docker.distribution.manifest.list.v2+json"])

MTIME = 1700000000
CREATED = "2023-11-14T22:13:20Z"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# What the multilayer image's /data holds after all whiteouts (checked by the tests).
MULTILAYER_PRESENT = ["b.txt", "c.txt", "keep/k1", "opq/new1", "big.bin"]
MULTILAYER_ABSENT = ["a.txt", "opq/old1"]


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def input_hash():
    """Hash of everything a build depends on, so a cached build is reused only if identical."""
    h = hashlib.sha256()
    for p in [os.path.abspath(__file__), os.path.join(HERE, "hello", "hello.c"),
              os.path.join(HERE, "pause", "pause.c"), BUSYBOX]:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


class Layer:
    """An uncompressed tar built entry by entry, turned into a gzip blob on finish()."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)

    def _info(self, name, kind, mode):
        ti = tarfile.TarInfo(name)
        ti.type = kind
        ti.mode = mode
        ti.mtime = MTIME
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    def dir(self, name, mode=0o755):
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode))
        return self

    def file(self, name, data, mode=0o644):
        if isinstance(data, str):
            data = data.encode()
        ti = self._info(name, tarfile.REGTYPE, mode)
        ti.size = len(data)
        self.tar.addfile(ti, io.BytesIO(data))
        return self

    def symlink(self, name, target):
        ti = self._info(name, tarfile.SYMTYPE, 0o777)
        ti.linkname = target
        self.tar.addfile(ti)
        return self

    def finish(self, level=6):
        """Returns (gzip bytes, diff_id) of the layer."""
        self.tar.close()
        raw = self.buf.getvalue()
        gz = gzip.compress(raw, compresslevel=level, mtime=0)
        return gz, "sha256:" + sha256(raw)


class Builder:
    """Collects blobs and tags into an output directory."""

    def __init__(self, out):
        self.out = out
        self.tags = {}
        self.corrupt = []
        self.info = {}
        os.makedirs(os.path.join(out, "blobs"), exist_ok=True)

    def blob(self, data):
        hexd = sha256(data)
        p = os.path.join(self.out, "blobs", hexd)
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(data)
        return "sha256:" + hexd

    def image(self, layers, config, arch="amd64", docker=False):
        """Stores layers, config and manifest; returns (manifest digest, media type, size)."""
        diff_ids, descs = [], []
        for gz, diff_id in layers:
            d = self.blob(gz)
            diff_ids.append(diff_id)
            descs.append({"mediaType": DOCKER_LAYER if docker else OCI_LAYER,
                          "digest": d, "size": len(gz)})
        cfg = {
            "architecture": arch,
            "os": "linux",
            "created": CREATED,
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            "history": [{"created": CREATED, "created_by": "test/images/build.py"}
                        for _ in diff_ids],
        }
        cfg_bytes = json.dumps(cfg, sort_keys=True, separators=(",", ":")).encode()
        cfg_digest = self.blob(cfg_bytes)
        man = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
            "config": {"mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
                       "digest": cfg_digest, "size": len(cfg_bytes)},
            "layers": descs,
        }
        mbytes = json.dumps(man, sort_keys=True, indent=2).encode()
        return self.blob(mbytes), man["mediaType"], len(mbytes), cfg_digest

    def tag(self, ref, digest, media_type, **extra):
        self.tags[ref] = dict(digest=digest, media_type=media_type, **extra)

    def index(self, entries):
        """entries: [(manifest digest, media type, size, arch)] -> (index digest, media type)."""
        idx = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": [{"mediaType": mt, "digest": d, "size": sz,
                           "platform": {"architecture": arch, "os": "linux"}}
                          for d, mt, sz, arch in entries],
        }
        data = json.dumps(idx, sort_keys=True, indent=2).encode()
        return self.blob(data), OCI_INDEX

    def save(self, h):
        cat = {"input_hash": h, "tags": self.tags, "corrupt": self.corrupt, "info": self.info}
        with open(os.path.join(self.out, "catalog.json"), "w") as f:
            json.dump(cat, f, indent=2, sort_keys=True)


def compile_static(src, out):
    subprocess.run(["gcc", "-static", "-O2", "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra",
                    "-Werror", "-o", out, src], check=True)
    with open(out, "rb") as f:
        return f.read()


def base_layer(group="root:x:0:\nnogroup:x:65534:\n"):
    """Directories and the account files every image has."""
    lay = Layer()
    for d in ["bin", "dev", "etc", "proc", "root", "sys", "usr", "usr/bin", "var"]:
        lay.dir(d)
    lay.dir("tmp", 0o1777)
    lay.file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
    lay.file("etc/group", group)
    return lay


def busybox_layer():
    """/bin/busybox and a symlink for every applet it has; root is in wheel (10), as in
    Docker Hub's busybox."""
    lay = base_layer("root:x:0:\nwheel:x:10:root\nnogroup:x:65534:\n")
    with open(BUSYBOX, "rb") as f:
        lay.file("bin/busybox", f.read(), 0o755)
    applets = subprocess.run([BUSYBOX, "--list"], check=True, capture_output=True,
                             text=True).stdout.split()
    for a in sorted(set(applets)):
        if a != "busybox" and "/" not in a:
            lay.symlink("bin/" + a, "busybox")
    return lay.finish()


def stored_payload_layer(payload):
    """A layer gzipped without compression: its size depends only on the payload's length,
    so another payload of the same length gives a valid blob of the same size."""
    return Layer().dir("payload").file("payload/data", payload).finish(level=0)


def build(out):
    h = input_hash()
    cat_path = os.path.join(out, "catalog.json")
    if os.path.exists(cat_path):
        with open(cat_path) as f:
            if json.load(f).get("input_hash") == h:
                return out
    shutil.rmtree(out, ignore_errors=True)
    b = Builder(out)
    work = tempfile.mkdtemp(prefix="kiyot-img-")
    try:
        hello_bin = compile_static(os.path.join(HERE, "hello", "hello.c"),
                                   os.path.join(work, "hello"))
        pause_bin = compile_static(os.path.join(HERE, "pause", "pause.c"),
                                   os.path.join(work, "pause"))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    bb = busybox_layer()
    bb_cfg = {"Env": [PATH_ENV], "Cmd": ["sh"]}

    # hello: OCI (hello:1) and Docker schema 2 (hello:docker), same content.
    hello_layers = [base_layer().finish(), Layer().file("hello", hello_bin, 0o755).finish()]
    hello_cfg = {"Env": [PATH_ENV, "PORT=8080"], "Entrypoint": ["/hello"],
                 "ExposedPorts": {"8080/tcp": {}}, "WorkingDir": "/"}
    d, mt, _, cfgd = b.image(hello_layers, hello_cfg)
    b.tag("hello:1", d, mt, config=cfgd)
    d, mt, _, cfgd = b.image(hello_layers, hello_cfg, docker=True)
    b.tag("hello:docker", d, mt, config=cfgd)

    # busybox: several tags of one image; "down" is pulled only by the registry-down test.
    d, mt, _, cfgd = b.image([bb], bb_cfg)
    for t in ["busybox:1", "busybox:latest", "busybox:down"]:
        b.tag(t, d, mt, config=cfgd)

    # users: accounts for the security context tests; the default user "app" (1000) belongs
    # to group "extra" (50000) in the image; users:named runs as "www-data:1004".
    accounts = (Layer().dir("etc")
                .file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"
                      "www-data:x:33:33:www-data:/var/www:/bin/sh\n"
                      "app:x:1000:1000:app:/home/app:/bin/sh\n")
                .file("etc/group", "root:x:0:\nwww-data:x:33:\napp:x:1000:\n"
                      "extra:x:50000:app\n").finish())
    d, mt, _, cfgd = b.image([bb, accounts], dict(bb_cfg, User="app"))
    b.tag("users:1", d, mt, config=cfgd)
    d, mt, _, cfgd = b.image([bb, accounts], dict(bb_cfg, User="www-data:1004"))
    b.tag("users:named", d, mt, config=cfgd)

    # multiarch: an OCI index with linux/amd64 and linux/arm64; /arch tells which was run.
    amd = b.image([bb, Layer().file("arch", "amd64\n").finish()], bb_cfg, arch="amd64")
    arm = b.image([Layer().dir("bin").file("bin/sh", "not a program\n", 0o755)
                   .file("arch", "arm64\n").finish()], bb_cfg, arch="arm64")
    d, mt = b.index([(amd[0], amd[1], amd[2], "amd64"), (arm[0], arm[1], arm[2], "arm64")])
    b.tag("multiarch:1", d, mt, amd64_manifest=amd[0], amd64_config=amd[3])

    # multilayer: whiteouts and an opaque directory over six layers.
    big = hashlib.shake_256(b"kiyot multilayer").digest(1 << 20)
    ml = [
        bb,
        Layer().dir("data").file("data/a.txt", "a\n").file("data/b.txt", "b\n")
        .dir("data/keep").file("data/keep/k1", "k1\n")
        .dir("data/opq").file("data/opq/old1", "old\n").finish(),
        Layer().dir("data").file("data/.wh.a.txt", "").file("data/c.txt", "c\n").finish(),
        Layer().dir("data").dir("data/opq").file("data/opq/.wh..wh..opq", "")
        .file("data/opq/new1", "new\n").finish(),
        Layer().dir("data").file("data/b.txt", "b2\n").finish(),
        Layer().dir("data").file("data/big.bin", big).finish(),
    ]
    d, mt, _, cfgd = b.image(ml, bb_cfg)
    b.tag("multilayer:1", d, mt, config=cfgd)
    b.info["multilayer_present"] = MULTILAYER_PRESENT
    b.info["multilayer_absent"] = MULTILAYER_ABSENT

    # pause:3.9, reached as registry.k8s.io/pause:3.9 through the mirror.
    d, mt, _, cfgd = b.image([Layer().file("pause", pause_bin, 0o755).finish()],
                             {"Entrypoint": ["/pause"], "Env": [PATH_ENV]})
    b.tag("pause:3.9", d, mt, config=cfgd)

    # bad/digest: a layer whose stored content is replaced by a valid gzip of the same size.
    good = stored_payload_layer(b"G" * 4096)
    evil = stored_payload_layer(b"E" * 4096)
    assert len(good[0]) == len(evil[0])
    d, mt, _, _ = b.image([bb, good], bb_cfg)
    b.tag("bad/digest:1", d, mt)
    b.corrupt.append({"repo": "bad/digest", "digest": "sha256:" + sha256(good[0]),
                      "with": b.blob(evil[0])})

    # bad/manifest: the manifest blob is replaced by text that is not JSON.
    d, mt, _, _ = b.image([bb, Layer().file("marker", "malformed\n").finish()], bb_cfg)
    b.tag("bad/manifest:1", d, mt)
    b.corrupt.append({"repo": "bad/manifest", "digest": d,
                      "with": b.blob(b'{"schemaVersion": 2, "layers": [ this is not json')})
    # The registry refuses to serve what it cannot parse (500), so bad/manifest:2 is JSON the
    # registry serves with a matching digest (stored directly, tag pointed at it) but no client
    # may accept: no config, and a layer whose digest is not a digest.
    junk = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                       "layers": [{"mediaType": OCI_LAYER, "digest": "sha256:../../etc/passwd",
                                   "size": -1}]}).encode()
    b.tag("bad/manifest:2", d, mt)
    b.corrupt.append({"repo": "bad/manifest", "tag": "2", "with": b.blob(junk)})

    # bad/deep: JSON the registry serves (Go reads 10000 levels) but nested deeper than any
    # reader of images need go (jansson stops at 2048): a manifest like bad/manifest:2's.
    deep = (b'{"schemaVersion": 2, "mediaType": "%s", "config": {"mediaType": "%s", '
            b'"digest": "sha256:%s", "size": 2}, "layers": [], "x": '
            % (OCI_MANIFEST.encode(), OCI_CONFIG.encode(), b"0" * 64)
            + b"[" * 3000 + b"]" * 3000 + b"}")
    d, mt, _, _ = b.image([bb, Layer().file("marker", "deep\n").finish()], bb_cfg)
    b.tag("bad/deep:1", d, mt)
    b.corrupt.append({"repo": "bad/deep", "tag": "1", "with": b.blob(deep)})

    # bad/nested-index: an index whose linux/amd64 entry is another index (of hello:1).
    hd, hmt, hsz, _ = b.image(hello_layers, hello_cfg)
    inner, _ = b.index([(hd, hmt, hsz, "amd64")])
    inner_size = os.path.getsize(os.path.join(out, "blobs", inner.split(":", 1)[1]))
    d, mt = b.index([(inner, OCI_INDEX, inner_size, "amd64")])
    b.tag("bad/nested-index:1", d, mt, inner=inner)

    # bad/escape: a layer with entries that climb out of the root.
    esc = Layer().dir("etc").file("etc/ok", "ok\n").file("../../etc/evil", "evil\n")
    d, mt, _, _ = b.image([bb, esc.finish()], bb_cfg)
    b.tag("bad/escape:1", d, mt)

    # bad/symlink: x -> / then a file through it, in one layer...
    sl = Layer().symlink("x", "/").file("x/etc/evil2", "evil2\n")
    d, mt, _, _ = b.image([bb, sl.finish()], bb_cfg)
    b.tag("bad/symlink:1", d, mt)
    # ...and across two layers.
    d, mt, _, _ = b.image([bb, Layer().symlink("y", "/").finish(),
                           Layer().file("y/etc/evil3", "evil3\n").finish()], bb_cfg)
    b.tag("bad/symlink2:1", d, mt)
    b.info["evil_host_paths"] = ["/etc/evil", "/etc/evil2", "/etc/evil3"]
    b.info["evil_names"] = ["evil", "evil2", "evil3"]

    b.save(h)
    return out


class Registry:
    """The few Registry HTTP API v2 calls a push needs."""

    def __init__(self, hostport):
        self.hostport = hostport

    def _req(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection(self.hostport, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data
        finally:
            conn.close()

    def has_blob(self, repo, digest):
        st, _, _ = self._req("HEAD", "/v2/%s/blobs/%s" % (repo, digest))
        return st == 200

    def put_blob(self, repo, digest, data):
        if self.has_blob(repo, digest):
            return
        st, hdr, body = self._req("POST", "/v2/%s/blobs/uploads/" % repo,
                                  headers={"Content-Length": "0"})
        if st != 202:
            raise RuntimeError("upload start %s: %d %s" % (repo, st, body[:200]))
        loc = hdr["location"]
        if loc.startswith("http"):
            loc = "/" + loc.split("/", 3)[3]
        loc += ("&" if "?" in loc else "?") + "digest=" + digest
        st, _, body = self._req("PUT", loc, body=data, headers={
            "Content-Type": "application/octet-stream", "Content-Length": str(len(data))})
        if st != 201:
            raise RuntimeError("upload %s %s: %d %s" % (repo, digest, st, body[:200]))

    def put_manifest(self, repo, ref, data, media_type):
        st, hdr, body = self._req("PUT", "/v2/%s/manifests/%s" % (repo, ref), body=data,
                                  headers={"Content-Type": media_type})
        if st != 201:
            raise RuntimeError("manifest %s:%s: %d %s" % (repo, ref, st, body[:300]))
        return hdr.get("docker-content-digest")

    def get_manifest(self, repo, ref):
        return self._req("GET", "/v2/%s/manifests/%s" % (repo, ref), headers={"Accept": ACCEPT})


def _read_blob(out, digest):
    with open(os.path.join(out, "blobs", digest.split(":", 1)[1]), "rb") as f:
        return f.read()


def _push_manifest(reg, out, repo, ref, digest, media_type):
    data = _read_blob(out, digest)
    man = json.loads(data)
    if media_type == OCI_INDEX:
        for m in man["manifests"]:
            _push_manifest(reg, out, repo, m["digest"], m["digest"], m["mediaType"])
    else:
        for desc in [man["config"]] + man["layers"]:
            reg.put_blob(repo, desc["digest"], _read_blob(out, desc["digest"]))
    got = reg.put_manifest(repo, ref, data, media_type)
    if got and got != digest:
        raise RuntimeError("registry stored %s:%s as %s, expected %s" % (repo, ref, got, digest))


def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _corrupt(storage, out, c):
    """Replaces a stored blob's content ("digest"), or points a tag at a new manifest blob
    stored under its true digest ("tag"), behind the registry's back."""
    v2 = os.path.join(storage, "docker/registry/v2")
    data = _read_blob(out, c["with"])
    if "tag" not in c:
        hexd = c["digest"].split(":", 1)[1]
        p = os.path.join(v2, "blobs/sha256", hexd[:2], hexd, "data")
        if not os.path.exists(p):
            raise RuntimeError("registry storage has no blob " + p)
        _write(p, data)
        return
    hexd = c["with"].split(":", 1)[1]
    man = os.path.join(v2, "repositories", c["repo"], "_manifests")
    _write(os.path.join(v2, "blobs/sha256", hexd[:2], hexd, "data"), data)
    _write(os.path.join(man, "revisions/sha256", hexd, "link"), c["with"].encode())
    _write(os.path.join(man, "tags", c["tag"], "current/link"), c["with"].encode())
    _write(os.path.join(man, "tags", c["tag"], "index/sha256", hexd, "link"), c["with"].encode())


def push(out, hostport, storage=None):
    """Pushes every tag of a build; with storage (the registry's filesystem root), also
    applies the corruptions. Returns the catalog."""
    with open(os.path.join(out, "catalog.json")) as f:
        cat = json.load(f)
    reg = Registry(hostport)
    for ref, t in sorted(cat["tags"].items()):
        repo, tag = ref.rsplit(":", 1)
        _push_manifest(reg, out, repo, tag, t["digest"], t["media_type"])
    if storage:
        for c in cat["corrupt"]:
            _corrupt(storage, out, c)
    return cat


def main(argv):
    if len(argv) >= 3 and argv[1] == "build":
        build(argv[2])
        print(argv[2])
        return 0
    if len(argv) in (4, 5) and argv[1] == "push":
        push(argv[2], argv[3], argv[4] if len(argv) == 5 else None)
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
