"""The endpoint's OpenAPI documents, just enough for kubectl to learn that every kind served
takes the fieldValidation query parameter, so that `kubectl apply --validate=strict` (kubectl's
default since 1.25) asks the server to refuse unknown fields instead of validating on the
client: kubectl up to 1.26 reads that from /openapi/v2 (protobuf), later ones from /openapi/v3.
Neither carries schemas: kubectl then validates nothing itself and builds its patches from
the types it was built with, as it does for kinds it finds no schema for. One difference
follows: kubectl apply patches a CRD it finds no schema for with a JSON merge patch, which
leaves out the nulls a strategic merge patch (what it sends a real server) keeps, so applying
a CRD text whose schema has a null-valued unknown field over an existing CRD passes here where
a real server refuses it; creating or replacing it is refused the same.

A kind is (group, version, plural, kind, namespaced).
"""
import hashlib
import json

PARAM_DOC = ("fieldValidation instructs the server on how to handle objects in the request "
             "containing unknown or duplicate fields. Valid values are: Ignore, Warn (the "
             "default), Strict.")


def item_path(group, version, plural, namespaced):
    base = "/api/%s" % version if not group else "/apis/%s/%s" % (group, version)
    ns = "/namespaces/{namespace}" if namespaced else ""
    return "%s%s/%s/{name}" % (base, ns, plural)


def gv_key(group, version):
    """How /openapi/v3 names a group-version: api/v1, apis/apps/v1."""
    return "api/%s" % version if not group else "apis/%s/%s" % (group, version)


# -- v3 (JSON) --

def v3_doc(kinds, group, version):
    """The document of one group-version: a PATCH operation per kind, with the parameter."""
    paths = {}
    for g, v, plural, kind, namespaced in kinds:
        if (g, v) != (group, version):
            continue
        paths[item_path(g, v, plural, namespaced)] = {"patch": {
            "operationId": "patch" + kind,
            "parameters": [{"name": "fieldValidation", "in": "query", "description": PARAM_DOC,
                            "schema": {"type": "string", "uniqueItems": True}}],
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": g, "version": v, "kind": kind}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.26.1"},
            "paths": paths, "components": {"schemas": {}}}


def v3_root(kinds):
    """/openapi/v3: each group-version and the URL of its document (with a content hash, which
    kubectl caches by)."""
    out = {}
    for g, v in sorted({(k[0], k[1]) for k in kinds}):
        h = hashlib.sha256(json.dumps(v3_doc(kinds, g, v), sort_keys=True).encode())
        out[gv_key(g, v)] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (
            gv_key(g, v), h.hexdigest().upper())}
    return {"paths": out}


# -- v2 (gnostic openapi_v2.Document, protobuf) --

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _bytes(num, data):
    """A length-delimited field: a string or an embedded message."""
    if isinstance(data, str):
        data = data.encode()
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _patch_item(g, v, plural, kind, namespaced):
    # QueryParameterSubSchema{in=2, description=3, name=4, type=6} in NonBodyParameter (3) in
    # Parameter (2) in ParametersItem (1); the GVK as a NamedAny whose Any holds YAML (2)
    query = (_bytes(2, "query") + _bytes(3, PARAM_DOC) + _bytes(4, "fieldValidation") +
             _bytes(6, "string"))
    param = _bytes(1, _bytes(2, _bytes(3, query)))
    gvk = "group: \"%s\"\nkind: %s\nversion: %s\n" % (g, kind, v)
    ext = _bytes(1, "x-kubernetes-group-version-kind") + _bytes(2, _bytes(2, gvk))
    op = _bytes(5, "patch" + kind) + _bytes(8, param) + _bytes(13, ext)  # Operation
    item = _bytes(8, op)  # PathItem.patch
    return _bytes(2, _bytes(1, item_path(g, v, plural, namespaced)) + _bytes(2, item))


def v2_protobuf(kinds):
    """/openapi/v2 as kubectl asks for it (application/com.github.proto-openapi.spec.v2@v1.0
    +protobuf): Document{swagger=1, info=2, paths=8}, Paths.path=2, NamedPathItem{name, value}."""
    info = _bytes(1, "Kubernetes") + _bytes(2, "v1.26.1")
    paths = b"".join(_patch_item(*k) for k in kinds)
    return _bytes(1, "2.0") + _bytes(2, info) + _bytes(8, paths)


def v2_json(kinds):
    """The same document as JSON, for a client that asks for JSON."""
    paths = {}
    for g, v, plural, kind, namespaced in kinds:
        paths[item_path(g, v, plural, namespaced)] = {"patch": {
            "operationId": "patch" + kind,
            "parameters": [{"name": "fieldValidation", "in": "query", "type": "string",
                            "description": PARAM_DOC}],
            "x-kubernetes-group-version-kind": {"group": g, "version": v, "kind": kind}}}
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.26.1"},
            "paths": paths}
