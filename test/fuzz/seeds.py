#!/usr/bin/env python3
"""Writes the seed corpora (test/fuzz/corpus/<name>/) of the fuzz targets for documents from
outside: image layers (unpack), WriteVolume requests (volume), registry manifests and configs
(image_manifest), EC2's XML (ec2_xml), YAML (yaml), kiyot's config (config), kubeconfigs
(kubeconfig), Pod objects (podobject), the table-driven JSON reader (jfields), the bootstrap document (agent_config) and the cell
feed's frames of WatchEvents (frame) and registries' WWW-Authenticate headers (registry). Each
gets a
handful of valid inputs, some taken from test/fixtures, and invalid or hostile ones.

Layers mix what images hold (Debian's /var/run -> /run, whiteouts, opaque directories, hard
links, xattrs, FIFOs, devices) with escapes a hostile registry would try, all relative: the
sandbox the target unpacks into has a decoy at ../outside. Volume requests are protobuf
encoded by hand. Deterministic (fixed times, gzip without a name or date). Run from the top of
the tree; it rewrites the files it owns and leaves others alone."""
import gzip
import hashlib
import io
import os
import struct
import tarfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(name, seed, data):
    os.makedirs(os.path.join(ROOT, name), exist_ok=True)
    with open(os.path.join(ROOT, name, seed), "wb") as f:
        f.write(data)


def tar(entries, fmt=tarfile.PAX_FORMAT):
    """entries: (name, type, extra) with extra the content of a file or the link target."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, kind, extra, *pax in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 1700000000
            info.type = kind
            info.mode = 0o755 if kind == tarfile.DIRTYPE else 0o644
            if pax:
                info.pax_headers = pax[0]
            data = None
            if kind == tarfile.REGTYPE:
                data = io.BytesIO(extra)
                info.size = len(extra)
            elif kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = extra
            elif kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
                info.devmajor, info.devminor = 1, 3
            t.addfile(info, data)
    return buf.getvalue()


def gz(data):
    return gzip.compress(data, mtime=0)


F, D, L, H = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE


def layers():
    write("unpack", "debian_var_run", gz(tar([
        ("run", D, None), ("var", D, None), ("var/run", L, "/run"),
        ("var/run/pid", F, b"1\n"), ("etc/hostname", F, b"cell\n")])))
    write("unpack", "whiteout_opaque", tar([
        ("app", D, None), ("app/.wh..wh..opq", F, b""), ("app/new", F, b"x"),
        ("etc/.wh.passwd", F, b""), ("bin/.wh.sh", F, b"")]))
    write("unpack", "hardlink_xattr_fifo", tar([
        ("bin", D, None), ("bin/busybox", F, b"\x7fELF" + bytes(60),
                           {"SCHILY.xattr.user.note": "kept",
                            "SCHILY.xattr.security.capability": "\x01\x00\x00\x02"}),
        ("bin/sh", H, "bin/busybox"), ("dev", D, None), ("dev/null", tarfile.CHRTYPE, None),
        ("run/fifo", tarfile.FIFOTYPE, None), ("/abs/./path//file", F, b"leading slash")]))
    write("unpack", "gnu_long_names", gz(tar([
        ("d" * 120 + "/" + "f" * 150, F, b"long"),
        ("l" * 130, L, "t" * 140)], fmt=tarfile.GNU_FORMAT)))
    # escapes: each must stay inside the root or be refused
    write("unpack", "escape_dotdot", tar([("../outside/file", F, b"overwritten")]))
    write("unpack", "escape_symlink_parent", tar([
        ("esc", L, "../outside"), ("esc/file", F, b"through a link"),
        ("abs", L, "/"), ("abs/../outside/dir/x", F, b"")]))
    write("unpack", "escape_dangling_link", tar([
        ("up", L, "../outside/dir/new"), ("up/file", F, b"created where?")]))
    write("unpack", "escape_hardlink", tar([
        ("h", H, "../outside/file"), ("g", H, "/proc/self/exe")]))
    write("unpack", "replace_link_by_name", tar([
        ("x", L, "../outside/file"), ("x", F, b"replaces the link, not its target")]))
    write("unpack", "bomb_bounded", gz(tar([("zeros", F, bytes(2 << 20))])))
    noise = b"".join(hashlib.sha256(bytes([i])).digest() for i in range(128))
    write("unpack", "truncated", gz(tar([("a", F, noise)]))[:2048])
    write("unpack", "not_tar", b"this is not an archive\n")


def varint(n):
    out = b""
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(num << 3 | 2) + varint(len(value)) + value


def entry(path, kind=0, mode=0o755, uid=-1, gid=-1, data=b"", target=""):
    """A FileEntry; kind 0 DIR, 1 FILE, 2 SYMLINK."""
    m = field(1, path) if path else b""
    m += field(2, kind) if kind else b""
    m += field(3, mode) + field(4, uid) + field(5, gid)
    m += field(6, data) if data else b""
    m += field(7, target) if target else b""
    return m


def request(volume, entries):
    return field(1, volume) + b"".join(field(2, e) for e in entries)


def update(first, second):
    """An input of two requests: the second updates what the first wrote."""
    return struct.pack("<H", len(first)) + first + second


def configmap(stamp, files):
    """The kubelet's atomic writer: ..<stamp>/ files, ..data -> it, links through ..data."""
    entries = [entry(""), entry(".." + stamp, mode=0o755)]
    for name, data in files:
        entries.append(entry(".." + stamp + "/" + name, 1, 0o644, data=data))
    entries.append(entry("..data", 2, 0o777, target=".." + stamp))
    for name, _ in files:
        entries.append(entry(name, 2, 0o777, target="..data/" + name))
    return request("config", entries)


def volumes():
    v1 = configmap("2024_01_01_00_00_00.1", [("app.conf", b"key=value\n"), ("empty", b"")])
    v2 = configmap("2024_01_01_00_05_00.2", [("app.conf", b"key=other\n"), ("new", b"n")])
    write("volume", "configmap", v1)
    write("volume", "update_configmap", update(v1, v2))
    write("volume", "update_kinds_swap", update(
        request("swap", [entry(""), entry("a", 1, data=b"a"), entry("b"), entry("b/c", 1),
                         entry("d", 2, target="a")]),
        request("swap", [entry(""), entry("a"), entry("a/x", 1, data=b"x"), entry("b", 1),
                         entry("d"), entry("e", 2, target="b")])))
    write("volume", "update_tree_to_file", update(
        request("vol", [entry(""), entry("a", 1, data=b"a")]),
        request("vol", [entry("", 1, 0o600, data=b"one file")])))
    write("volume", "update_link_owner", update(
        request("own", [entry(""), entry("l", 2, uid=0, gid=0, target="x")]),
        request("own", [entry(""), entry("l", 2, uid=1000, gid=1000, target="x")])))
    write("volume", "update_refused_keeps", update(
        request("vol", [entry(""), entry("a", 1, data=b"a")]),
        request("vol", [entry(""), entry("a/../../outside/file", 1, data=b"x")])))
    write("volume", "secret_owner", request("token", [
        entry("", mode=0o750, uid=0, gid=1000),
        entry("ca.crt", 1, 0o440, 0, 1000, data=b"-----BEGIN CERTIFICATE-----\n"),
        entry("sub", mode=0o700), entry("sub/deep", 1, 0o600, data=b"x" * 100)]))
    write("volume", "one_file", request("hosts", [
        entry("", 1, 0o644, data=b"127.0.0.1 localhost\n")]))
    write("volume", "link_outside", request("links", [
        entry(""), entry("up", 2, target="../../outside"), entry("abs", 2, target="/etc")]))
    write("volume", "bad_dotdot", request("bad", [entry(""), entry("../outside/x", 1)]))
    write("volume", "bad_parent_link", request("bad", [
        entry(""), entry("l", 2, target="/tmp"), entry("l/x", 1, data=b"x")]))
    write("volume", "bad_duplicate", request("bad", [entry(""), entry("a", 1), entry("a")]))
    write("volume", "bad_name", request("Bad/Name", [entry("")]))
    write("volume", "bad_tmp_name", request("bad", [entry(""), entry("..kiyot-tmp", 1)]))


def fixture(path):
    with open(os.path.join("test/fixtures", path), "rb") as f:
        return f.read()


DIGEST = "sha256:" + "ab" * 32
OCI_MANIFEST, OCI_INDEX, DOCKER_MANIFEST, DOCKER_LIST, DOCKER_V1, JSON_TYPE = range(1, 7)
AS_TOP, AS_PICKED, AS_CONFIG = range(3)


def manifests():
    def doc(seed, content_type, how, body):
        write("image_manifest", seed, bytes([content_type, how]) + body.encode())

    layer = '{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"%s",' \
        '"size":%d}'
    doc("oci_manifest", OCI_MANIFEST, AS_TOP,
        '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'
        '"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s",'
        '"size":1469},"layers":[%s,%s]}' % (DIGEST, layer % (DIGEST, 2479),
                                            layer % (DIGEST.replace("ab", "cd"), 0)))
    doc("docker_manifest_no_type", 0, AS_PICKED,
        '{"schemaVersion":2,"config":{"digest":"%s","size":7},"layers":[{"mediaType":'
        '"application/vnd.docker.image.rootfs.diff.tar.gzip","digest":"%s","size":1}]}'
        % (DIGEST, DIGEST))
    doc("index_arm_then_amd64", OCI_INDEX, AS_TOP,
        '{"schemaVersion":2,"manifests":[{"digest":"%s","platform":{"os":"linux",'
        '"architecture":"arm64","variant":"v8"}},{"digest":"%s","size":528,"platform":'
        '{"os":"linux","architecture":"amd64"}}]}' % (DIGEST, DIGEST))
    doc("index_no_amd64", DOCKER_LIST, AS_TOP,
        '{"manifests":[{"digest":"%s","platform":{"os":"windows","architecture":"amd64"}}]}'
        % DIGEST)
    doc("index_where_manifest_expected", OCI_INDEX, AS_PICKED, '{"manifests":[]}')
    doc("schema1", DOCKER_V1, AS_TOP, '{"schemaVersion":1,"name":"x","fsLayers":[]}')
    doc("encrypted_layer", JSON_TYPE, AS_TOP,
        '{"schemaVersion":2,"config":{"digest":"%s","size":1},"layers":[{"mediaType":'
        '"application/vnd.oci.image.layer.v1.tar+gzip+encrypted","digest":"%s","size":1}]}'
        % (DIGEST, DIGEST))
    doc("bad_digest_size", OCI_MANIFEST, AS_TOP,
        '{"schemaVersion":2,"config":{"digest":"sha256:xyz","size":-1},"layers":[]}')
    doc("duplicate_keys", OCI_MANIFEST, AS_TOP, '{"schemaVersion":2,"schemaVersion":2}')
    doc("config", 0, AS_CONFIG,
        '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/bin"],'
        '"Entrypoint":["/bin/sh","-c"],"Cmd":null,"User":"1000:1000","WorkingDir":"/app"},'
        '"rootfs":{"type":"layers","diff_ids":[]}}')
    doc("config_bad_env", 0, AS_CONFIG, '{"config":{"Env":["A=1",2],"User":7}}')
    doc("config_not_object", 0, AS_CONFIG, '[{"config":{}}]')


ERROR, RUN, DESCRIBE, TYPES, SPOT, TIME, TERMINATE, NOT_FOUND_IDS, SUBNETS = range(9)


def ec2():
    def answer(seed, reader, body):
        write("ec2_xml", seed, bytes([reader]) + body)

    answer("error", ERROR, fixture("ec2/error_capacity.xml"))
    answer("error_legacy", ERROR, fixture("ec2/error_legacy.xml"))
    answer("run_instances", RUN, fixture("ec2/run_instances.xml"))
    answer("describe_instances", DESCRIBE, fixture("ec2/describe_instances_page2.xml"))
    answer("instance_types", TYPES, fixture("ec2/instance_types_page2.xml"))
    answer("spot_prices", SPOT, fixture("ec2/spot_prices.xml"))
    answer("subnets", SUBNETS, fixture("ec2/describe_subnets.xml"))
    answer("terminate_instances", TERMINATE, fixture("ec2/ok_terminate.xml"))
    answer("not_found_ids", NOT_FOUND_IDS,
           b"The instance IDs 'i-1, i-0123456789abcdef0, xi-abc' do not exist")
    answer("entity_expansion", DESCRIBE, b"""<?xml version="1.0"?>
<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">
<!ENTITY x SYSTEM "file:///etc/passwd">]>
<DescribeInstancesResponse><reservationSet><item><instancesSet><item>
<instanceId>&b;&x;</instanceId><launchTime>9999-12-31T23:59:59.999999999Z</launchTime>
</item></instancesSet></item></reservationSet><nextToken></nextToken>
</DescribeInstancesResponse>""")
    answer("spot_nan", SPOT, b"<DescribeSpotPriceHistoryResponse><spotPriceHistorySet><item>"
           b"<instanceType>t3.nano</instanceType><spotPrice>nan</spotPrice><timestamp>"
           b"2024-02-30T10:00:00+00:00</timestamp></item></spotPriceHistorySet>"
           b"</DescribeSpotPriceHistoryResponse>")
    answer("deep", TYPES, b"<a>" * 40 + b"</a>" * 40)
    answer("time", TIME, b"2020-12-01T10:00:00.123Z")
    answer("time_far", TIME, b"9999-12-31T23:59:59.999999999+00:00")


def text(name, seed, body):
    write(name, seed, body.encode() if isinstance(body, str) else body)


def yamls():
    text("yaml", "pod", fixture("podspec/full.yaml"))
    text("yaml", "scalars", """plain: [null, ~, true, False, yes, 0644, 0o17, 0x1F, -7, 1.5,
  .5, -2e3, .inf, .nan, 18446744073709551616]
quoted: ["0644", 'true', !!str 12, !!int "12", !!float "1", !!bool "true", !!null ""]
block: |
  two
  lines
folded: >-
  one
  line
"\u00e9\U0001F600\x80": "\t\0"
""")
    text("yaml", "anchors_merge", """base: &b {cpu: 1, memory: 2}
other: {<<: *b, cpu: 3}
list: [*b, *b]
""")
    text("yaml", "billion_laughs", "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        "%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n" % ((c, c) + (p,) * 9)
        for p, c in zip("abcdefg", "bcdefgh")))
    text("yaml", "two_documents", "a: 1\n---\nb: 2\n")
    text("yaml", "json", '{"a": [1, 2.5, "x", {"b": null}], "c": true}')
    text("yaml", "bad_tag_dup_key", "a: !custom 1\na: 2\n")
    text("yaml", "deep", "[" * 70 + "]" * 70)


def configs():
    text("config", "full", fixture("config/full.yaml"))
    text("config", "full_json", fixture("config/full.json"))
    text("config", "ec2", """cells:
  provider: ec2
  kubeProxy: {image: registry.k8s.io/kube-proxy:v1.30.2, args: [--v=2]}
ec2: {region: eu-west-1, imageId: ami-123, securityGroupIds: [sg-1, sg-2],
      noInstanceMetadata: true, launchTimeoutSeconds: 600}
reserve: {cpu: 0.5, memory: 128Mi}
""")
    text("config", "bad_port", fixture("config/port-out-of-range.json"))
    text("config", "bad_reserve", fixture("config/bad-reserve-cpu.yaml"))
    text("config", "bad_unknown", fixture("config/unknown-cells-key.yaml"))
    text("config", "bad_list", "- socket\n- stateDir\n")


def jfields():
    text("jfields", "every_kind", '{"name": "web", "args": ["a", "b"], "port": 8080, '
         '"big": -9000000000, "bytes": 9000000000, "flag": true, "price": 0.5, '
         '"mode": "Never", "limits": {"ceiling": null}, "entries": [{"type": "t3.small", '
         '"count": 2, "spot": true, "kids": [{"type": "k", "kids": [{"type": "kk"}]}]}, '
         '{"type": "c5"}], "labels": {"app": "web", "tier": ""}, "twice": 21}')
    text("jfields", "bad_types", '{"name": 5, "args": "x", "port": "x", "flag": 1, '
         '"price": "1", "mode": 2, "entries": {}, "labels": [], "twice": null}')
    text("jfields", "bounds", '{"name": "abcdefghi", "args": ["a", "b", "c", "d"], '
         '"port": 0, "bytes": -1, "price": -0.5, "entries": [{"type": "a"}, {"type": "a"}]}')
    text("jfields", "unknown_and_nul", '{"nmae": "x", "Port": 1, "name": "a\\u0000b"}')
    text("jfields", "deep", '{"entries": [' + '{"type": "a", "kids": [' * 20 + ']}' * 20 + ']}')
    text("jfields", "not_a_mapping", '[1, 2, 3]')


KUBECONFIG = """apiVersion: v1
kind: Config
current-context: %s
contexts:
- name: ctx
  context: {cluster: c, user: u}
clusters:
- name: c
  cluster:
    server: https://10.0.0.1:6443/
    %s
users:
- name: u
  user:
    %s
"""


def kubeconfigs():
    pem = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    text("kubeconfig", "token_ca_data", KUBECONFIG % (
        "ctx", "certificate-authority-data: " + pem, "token: abc.def"))
    text("kubeconfig", "client_cert_files", KUBECONFIG % (
        "ctx", "certificate-authority: ca.crt",
        "client-certificate: /etc/kiyot/cert.pem\n    client-key: key.pem"))
    text("kubeconfig", "token_file_insecure", KUBECONFIG % (
        "ctx", "insecure-skip-tls-verify: true", "tokenFile: ../token"))
    text("kubeconfig", "no_context", KUBECONFIG % ('""', "", "token: x"))
    text("kubeconfig", "undefined_context", KUBECONFIG % ("other", "", "token: x"))
    text("kubeconfig", "bad_server_slashes", (KUBECONFIG % ("ctx", "", "token: x")).replace(
        "https://10.0.0.1:6443/", "///"))
    text("kubeconfig", "bad_base64", KUBECONFIG % (
        "ctx", "certificate-authority-data: '!!!'", "client-key-data: YQ"))


def pods():
    text("podobject", "pod", fixture("podobject/pod.json"))
    text("podobject", "minimal", fixture("podspec/minimal.json"))
    text("podobject", "resources_sidecar", """{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"web","namespace":"prod","uid":"8d3c5a1e-0000-4000-8000-000000000001"},
 "spec":{"overhead":{"cpu":"250m","memory":"120Mi"},
  "initContainers":[{"name":"proxy","image":"envoy:1","restartPolicy":"Always"}],
  "containers":[{"name":"app","image":"registry.local:5000/app@sha256:%s",
   "imagePullPolicy":"Never","resources":{"limits":{"cpu":"2","memory":"1Gi",
   "nvidia.com/gpu":"1"},"requests":{"cpu":"500m"}}}]}}""" % ("ab" * 32))
    text("podobject", "secret_volume_valuefrom", """{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"s","uid":"u1"},"spec":{"volumes":[{"name":"t","secret":{"secretName":
 "t"}}],"containers":[{"name":"c","image":"busybox","env":[{"name":"A","valueFrom":
 {"fieldRef":{"fieldPath":"metadata.name"}}}]}]}}""")
    text("podobject", "bad_request_over_limit", """{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"x","uid":"u"},"spec":{"containers":[{"name":"c","image":"i",
 "resources":{"limits":{"memory":"1Mi"},"requests":{"memory":"2Mi"}}}]}}""")
    text("podobject", "bad_quantity_past_64_bits", """{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"x","uid":"u"},"spec":{"containers":[{"name":"c","image":"i",
 "resources":{"requests":{"cpu":"50000000000000000000000000e1"}}}]}}""")
    text("podobject", "bad_types", '{"metadata":{"name":7},"spec":{"containers":{}}}')
    text("podobject", "owner_references", """{"apiVersion":"v1","kind":"Pod",
 "metadata":{"name":"web-7c9-x","uid":"u","annotations":{"pod.elotl.co/burst-sizing":
 "observed"},"ownerReferences":[{"kind":"Deployment","name":"web"},{"apiVersion":"apps/v1",
 "kind":"ReplicaSet","name":"web-7c9","uid":"r","controller":true},7,{"controller":true}]},
 "spec":{"containers":[{"name":"c","image":"i","resources":{"requests":{"cpu":"250m"},
 "limits":{"cpu":"2"}}}]}}""")


BOOTSTRAP = {
    "version": 1, "cell_id": "cell-0a1b", "cluster_id": "kiyot-test",
    "pod": {"uid": "8d3c5a1e", "name": "web", "namespace": "default"},
    "instance_type": "t3.nano", "agent_port": 7443, "state_dir": "/var/lib/cell-agent",
    "log_level": "info", "restart_backoff_ms": 10000,
    "registries": {"10.77.0.1:5000": {"insecure": True}},
    "prepull": ["busybox:1", "10.77.0.1:5000/hello:1"],
    "ca": "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n",
    "enroll_secret": "5e" * 32,
    "pulls": {"min_bytes": 10240, "window_s": 30, "deadline_base_s": 60,
              "deadline_rate": 32768, "max_transfers": 8, "max_per_registry": 4},
    "host_netns": "/run/netns/kiyotnode", "node_images": "/var/lib/kiyot/images"}


def bootstraps():
    import json

    def doc(seed, **changes):
        d = dict(BOOTSTRAP)
        for k, v in changes.items():
            if v is None:
                d.pop(k)
            else:
                d[k] = v
        text("agent_config", seed, json.dumps(d))

    doc("full")
    doc("minimal", cluster_id=None, instance_type=None, agent_port=None, state_dir=None,
        log_level=None, restart_backoff_ms=None, registries=None, prepull=None, ca=None,
        enroll_secret=None, pulls=None, host_netns=None, node_images=None)
    doc("bad_pulls", pulls={"max_transfers": -1, "window_s": 1 << 40})
    doc("bad_port_wraps", agent_port=4294967297)
    doc("bad_prepull", prepull=["busy box"] + ["x"] * 70)
    doc("bad_version", version=2)
    doc("bad_relative_images", node_images="images")
    doc("bad_secret_too_long", enroll_secret="5e" * 129)
    text("agent_config", "bad_duplicate", '{"version":1,"version":1}')


def frames():
    """Streams of WatchEvent frames as an agent sends them; the first byte is the target's
    options (read size, max frame, dropping the buffer)."""
    def frame(msg):
        return struct.pack(">I", len(msg)) + msg

    status = field(1, 0) + field(2, field(1, "u1") + field(2, 1) + field(4, 1700000000)) + \
        field(3, "u1")
    log = field(1, 1) + field(3, "u1") + field(4, 0) + field(5, b"2026-01-01T00:00:00Z stdout F hi\n")
    synced = field(1, 2)
    usage = field(1, "") + field(2, 1700000000) + field(3, 1000000) + field(4, 1 << 20)
    stats = field(1, 3) + field(6, field(1, usage) + field(2, field(1, "u1") + field(3, 5)))
    stream = frame(status) + frame(log) + frame(synced) + frame(stats)
    for opt in (0x0, 0x1, 0x6, 0x7, 0xB, 0xF):
        write("frame", "stream_%x" % opt, bytes([opt]) + stream)
    write("frame", "empty_frames", b"\x07" + frame(b"") * 5)
    write("frame", "partial_tail", b"\x05" + frame(log) + frame(status)[:7])
    write("frame", "bad_over_limit", b"\x02" + frame(log) + struct.pack(">I", 65) + b"x" * 65)
    write("frame", "bad_huge_length", b"\x07" + b"\xff\xff\xff\xff" + b"x" * 32)
    write("frame", "bad_not_protobuf", b"\x07" + frame(b"\xff" * 20) + frame(synced))


def challenges():
    # even first byte: the header as sent; odd: a value the target quotes into realm and scope
    for seed, body in (
            ("bearer", 'Bearer realm="https://auth.example.com/token",service="registry.example.com",'
                       'scope="repository:library/busybox:pull"'),
            ("basic", 'Basic realm="Registry Realm"'),
            ("unquoted", "Bearer realm=https://a/t,service=reg,scope=repository:x:pull"),
            ("escaped", r'Bearer realm="a\"b\\c",scope="x"'),
            ("case", 'bearer REALM="r",Service="s",SCOPE="p"'),
            ("repeated", 'Bearer realm="first",realm="second"'),
            ("bad_unterminated", 'Bearer realm="never ends'),
            ("bad_no_value", "Bearer realm,service=,=x,,  ,scope"),
            ("bad_empty", ""),
            ("bad_spaces", "   ")):
        write("registry", seed, b"\x00" + body.encode())
    for seed, value in (("value_plain", "https://auth.example.com/token"),
                        ("value_quotes", 'he said "hi" \\ bye'),
                        ("value_empty", "")):
        write("registry", seed, b"\x01" + value.encode())


def schedules():
    """CronJob schedules (cronsched.h): fields, ranges, steps, lists, names, descriptors."""
    for seed, body in (("every_15", "*/15 * * * *"),
                       ("office_hours", "0 9-17 * * 1-5"),
                       ("feb_29", "0 0 29 2 *"),
                       ("dom_or_dow", "0 0 13 * FRI"),
                       ("names", "30 2 * jan-mar sun,sat"),
                       ("steps", "5/20 1-23/6 */2 * ?"),
                       ("lists", "0,15,30,45 0,12 1,15 1,4,7,10 *"),
                       ("hourly", "@hourly"),
                       ("weekly", "@weekly"),
                       ("never", "0 0 30 2 *"),
                       ("bad_range", "5-1 * * * *"),
                       ("bad_step", "*/0 * * * *"),
                       ("bad_every", "@every 1h"),
                       ("bad_tz", "TZ=UTC 0 * * * *"),
                       ("bad_six", "0 0 * * * *")):
        text("cronsched", seed, body)


if __name__ == "__main__":
    layers()
    volumes()
    manifests()
    ec2()
    yamls()
    configs()
    jfields()
    kubeconfigs()
    pods()
    bootstraps()
    frames()
    challenges()
    schedules()
