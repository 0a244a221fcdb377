#!/usr/bin/env python3
"""A local Kubernetes API endpoint for tests: the pieces of the real API that kiyot, kubectl and
python3-kubernetes use for the Cell CRD, with the real API's semantics and error objects.

  kubeapi.py setup DIR [--port P]    writes DIR/ca.crt, DIR/server.{crt,key}, DIR/token and
                                     DIR/kubeconfig (token + CA data, server https://127.0.0.1:P)
  kubeapi.py serve DIR --port P [--state FILE]
                                     serves HTTPS with DIR's certificate; bearer token DIR/token;
                                     objects persist in FILE so a restarted endpoint keeps them

Served: /version, /api, /api/v1, /apis, /apis/<group>/<version> discovery; CRDs
(apiextensions.k8s.io/v1: create, get, list, delete); the custom resources those CRDs define
and core v1 pods (namespaced; namespaces exist implicitly, "default" always): create -> 409
AlreadyExists, get -> 404 NotFound, update with metadata.resourceVersion -> 409 Conflict when
stale, merge-patch and json-patch, delete, list with labelSelector and fieldSelector
metadata.name/metadata.namespace (pods also across namespaces, /api/v1/pods), and
meta.k8s.io Table output (the CRD's printer columns; for pods kubectl's NAME READY STATUS
RESTARTS AGE) when the client asks for it.
"""
import base64
import copy
import datetime
import http.server
import json
import os
import socketserver
import ssl
import subprocess
import sys
import threading
import urllib.parse
import uuid

MAX_BODY = 4 << 20
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
         "message": message, "reason": reason, "code": code}
    if details:
        s["details"] = details
    return s


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        super().__init__(message)
        self.code = code
        self.body = status(code, reason, message, details)


class Store:
    """Objects by (group, plural) then name; one resourceVersion counter, as etcd's."""

    def __init__(self, path=None):
        self.path = path
        self.lock = threading.Lock()
        self.rv = 1
        self.objs = {}
        if path and os.path.exists(path):
            with open(path) as f:
                d = json.load(f)
            self.rv = d["rv"]
            self.objs = {tuple(k.split("/", 1)): v for k, v in d["objs"].items()}

    def save(self):
        if not self.path:
            return
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"rv": self.rv, "objs": {"/".join(k): v for k, v in self.objs.items()}}, f)
        os.replace(tmp, self.path)

    def bump(self):
        self.rv += 1
        return str(self.rv)

    def kind(self, key):
        return self.objs.setdefault(key, {})

    def crds(self):
        return list(self.objs.get(("apiextensions.k8s.io", "customresourcedefinitions"),
                                  {}).values())

    def crd_for(self, group, version, plural):
        for c in self.crds():
            s = c["spec"]
            if s["group"] == group and s["names"]["plural"] == plural and \
                    any(v["name"] == version and v.get("served", True) for v in s["versions"]):
                return c
        return None


def field_matches(sel, obj):
    """fieldSelector: metadata.name and metadata.namespace equality, as kubectl sends them."""
    md = obj.get("metadata") or {}
    for part in filter(None, (p.strip() for p in (sel or "").split(","))):
        neg = "!=" in part
        k, v = part.split("!=" if neg else "=", 1)
        k, v = k.strip(), v.strip().lstrip("=")
        if k not in ("metadata.name", "metadata.namespace"):
            raise ApiError(400, "BadRequest", 'field label not supported: "%s"' % k)
        have = md.get(k.split(".", 1)[1])
        if (have == v) == neg:
            return False
    return True


def validate_pod(obj):
    """What the API server insists on for a pod, which a test may get wrong: containers, each
    with a name and an image."""
    cs = (obj.get("spec") or {}).get("containers")
    if not isinstance(cs, list) or not cs:
        raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec.containers: Required value'
                       % obj["metadata"]["name"])
    for i, c in enumerate(cs + (obj["spec"].get("initContainers") or [])):
        for f in ("name", "image"):
            if not isinstance(c, dict) or not c.get(f):
                raise ApiError(422, "Invalid", 'Pod "%s" is invalid: spec.containers[%d].%s: '
                               'Required value' % (obj["metadata"]["name"], i, f))


# The fields of apiextensions.k8s.io/v1 JSONSchemaProps: a schema node may carry these and
# nothing else (the real server's strict decoding refuses the rest).
SCHEMA_FIELDS = {
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum",
    "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern",
    "maxItems", "minItems", "uniqueItems", "multipleOf", "enum", "maxProperties",
    "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not", "properties",
    "additionalProperties", "patternProperties", "dependencies", "additionalItems",
    "definitions", "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys",
    "x-kubernetes-list-type", "x-kubernetes-map-type", "x-kubernetes-validations",
}


def check_schema(node, path, name):
    """A CRD's openAPIV3Schema as the real server checks it: known fields only (strict
    decoding), and a structural schema: every node that is not int-or-string or
    preserve-unknown-fields has a type."""
    if not isinstance(node, dict):
        raise ApiError(400, "BadRequest", "CustomResourceDefinition in version \"v1\" cannot "
                       "be handled as a CustomResourceDefinition: %s: must be an object" % path)
    for k in node:
        if k not in SCHEMA_FIELDS:
            raise ApiError(400, "BadRequest", "CustomResourceDefinition in version \"v1\" "
                           "cannot be handled as a CustomResourceDefinition: strict decoding "
                           "error: unknown field \"%s.%s\"" % (path, k))
    if "type" not in node and not node.get("x-kubernetes-int-or-string") and \
            not node.get("x-kubernetes-preserve-unknown-fields"):
        raise ApiError(422, "Invalid", "CustomResourceDefinition.apiextensions.k8s.io \"%s\" "
                       "is invalid: %s.type: Required value: must not be empty for specified "
                       "object fields" % (name, path))
    for k, sub in (node.get("properties") or {}).items():
        check_schema(sub, "%s.properties.%s" % (path, k), name)
    if isinstance(node.get("items"), dict):
        check_schema(node["items"], path + ".items", name)


def validate_crd(obj):
    """The schema of every version of a CRD (see check_schema)."""
    name = obj["metadata"].get("name", "")
    for i, v in enumerate((obj.get("spec") or {}).get("versions") or []):
        schema = ((v.get("schema") or {}).get("openAPIV3Schema"))
        if schema is not None:
            check_schema(schema, "spec.versions[%d].schema.openAPIV3Schema" % i, name)


def parse_selector(sel):
    """Equality, inequality and existence requirements, comma-separated, as kubectl sends."""
    reqs = []
    for part in filter(None, (p.strip() for p in (sel or "").split(","))):
        if "!=" in part:
            k, v = part.split("!=", 1)
            reqs.append(("!=", k.strip(), v.strip()))
        elif "==" in part:
            k, v = part.split("==", 1)
            reqs.append(("=", k.strip(), v.strip()))
        elif "=" in part:
            k, v = part.split("=", 1)
            reqs.append(("=", k.strip(), v.strip()))
        elif part.startswith("!"):
            reqs.append(("!", part[1:].strip(), None))
        else:
            reqs.append(("exists", part, None))
    return reqs


def selector_matches(reqs, labels):
    for op, k, v in reqs:
        if op == "=" and labels.get(k) != v:
            return False
        if op == "!=" and labels.get(k) == v:
            return False
        if op == "!" and k in labels:
            return False
        if op == "exists" and k not in labels:
            return False
    return True


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                i = len(parent) if last == "-" else int(last)
                if op["op"] == "add":
                    parent.insert(i, op["value"])
                else:
                    parent[i] = op["value"]
            else:
                if op["op"] == "replace" and last not in parent:
                    raise ApiError(422, "Invalid", "the path %s does not exist" % op["path"])
                parent[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                parent.pop(last)
        elif op["op"] == "test":
            cur = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if cur != op["value"]:
                raise ApiError(422, "Invalid", "test operation failed at %s" % op["path"])
        else:
            raise ApiError(415, "UnsupportedMediaType", "json-patch op %s" % op["op"])
    return doc


def human_age(ts):
    """A creationTimestamp as the API server's table shows it: 42s, 5m10s, 3h, 2d."""
    try:
        t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return "<unknown>"
    s = max(0, int((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds()))
    if s < 120:
        return "%ds" % s
    if s < 600:
        return "%dm%ds" % (s // 60, s % 60)
    if s < 3 * 3600:
        return "%dm" % (s // 60)
    if s < 48 * 3600:
        return "%dh" % (s // 3600)
    return "%dd" % (s // 86400)


def json_path(obj, path):
    cur = obj
    for p in path.lstrip(".").split("."):
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return cur


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kubeapi-test"

    def log_message(self, fmt, *args):
        if os.environ.get("KUBEAPI_VERBOSE"):
            sys.stderr.write("kubeapi: " + fmt % args + "\n")

    def reply(self, code, body, ctype="application/json"):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "request body too large")
        raw = self.rfile.read(n) if n else b""
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype not in ("application/json", "application/merge-patch+json",
                         "application/json-patch+json", "application/strategic-merge-patch+json",
                         "application/apply-patch+yaml"):
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json, application/merge-patch+json")
        try:
            return json.loads(raw or b"null"), ctype
        except ValueError as e:
            raise ApiError(400, "BadRequest", "the body is not JSON: %s" % e)

    def handle_any(self, method):
        try:
            store = self.server.store
            if self.headers.get("Authorization") != "Bearer " + self.server.token:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            u = urllib.parse.urlsplit(self.path)
            q = dict(urllib.parse.parse_qsl(u.query))
            parts = [p for p in u.path.split("/") if p]
            if method == "DELETE":
                # DeleteOptions (propagationPolicy...) are accepted and not needed; read them
                # so the connection's next request starts where it should
                n = int(self.headers.get("Content-Length") or 0)
                if 0 < n <= MAX_BODY:
                    self.rfile.read(n)
            with store.lock:
                code, out = self.route(method, parts, q, store)
            if isinstance(out, dict) and out.get("kind") == "Table":
                self.reply(code, out, "application/json;as=Table;v=v1;g=meta.k8s.io")
            else:
                self.reply(code, out)
        except ApiError as e:
            self.reply(e.code, e.body)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            self.reply(400, status(400, "BadRequest", "bad request: %r" % (e,)))

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def do_DELETE(self):
        self.handle_any("DELETE")

    # -- routing --
    def route(self, method, parts, q, store):
        if parts == ["version"]:
            return 200, {"major": "1", "minor": "28", "gitVersion": "v1.28.0",
                         "platform": "linux/amd64"}
        if parts == ["api"]:
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [
                             {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if parts == ["api", "v1"]:
            return 200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "namespaces", "singularName": "namespace", "namespaced": False,
                 "kind": "Namespace", "verbs": ["get", "list"], "shortNames": ["ns"]},
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
                 "verbs": ["create", "delete", "get", "list", "patch", "update"],
                 "shortNames": ["po"], "categories": ["all"]}]}
        if parts[:2] == ["api", "v1"]:
            return self.core(method, parts[2:], q, store)
        if parts == ["apis"]:
            return 200, self.group_list(store)
        if len(parts) == 3 and parts[0] == "apis":
            return 200, self.resource_list(store, parts[1], parts[2])
        if len(parts) in (4, 5) and parts[0] == "apis":
            group, version, plural = parts[1], parts[2], parts[3]
            name = parts[4] if len(parts) == 5 else None
            if (group, version, plural) == ("apiextensions.k8s.io", "v1",
                                            "customresourcedefinitions"):
                return self.objects(method, store, (group, plural), name, q, None, "v1",
                                    "CustomResourceDefinition")
            crd = store.crd_for(group, version, plural)
            if crd:
                return self.objects(method, store, (group, plural), name, q, crd,
                                    version, crd["spec"]["names"]["kind"])
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def core(self, method, rest, q, store):
        """Core v1: pods in namespaces, and the namespaces, which exist when named."""
        if rest == ["namespaces"] and method == "GET":
            names = {"default"} | {k.split("/", 1)[0] for k in store.kind(("", "pods"))}
            return 200, {"kind": "NamespaceList", "apiVersion": "v1",
                         "metadata": {"resourceVersion": str(store.rv)},
                         "items": [self.namespace(n) for n in sorted(names)]}
        if len(rest) == 2 and rest[0] == "namespaces" and method == "GET":
            return 200, self.namespace(rest[1])
        if rest == ["pods"] and method == "GET":
            return self.objects(method, store, ("", "pods"), None, q, None, "v1", "Pod",
                                ns="")
        if len(rest) in (3, 4) and rest[0] == "namespaces" and rest[2] == "pods":
            return self.objects(method, store, ("", "pods"), rest[3] if len(rest) == 4 else None,
                                q, None, "v1", "Pod", ns=rest[1])
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    @staticmethod
    def namespace(name):
        return {"kind": "Namespace", "apiVersion": "v1",
                "metadata": {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                             "resourceVersion": "1", "creationTimestamp": now()},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

    def group_list(self, store):
        groups = [{"name": "apiextensions.k8s.io",
                   "versions": [{"groupVersion": "apiextensions.k8s.io/v1", "version": "v1"}],
                   "preferredVersion": {"groupVersion": "apiextensions.k8s.io/v1",
                                        "version": "v1"}}]
        for c in store.crds():
            g = c["spec"]["group"]
            vs = [v["name"] for v in c["spec"]["versions"] if v.get("served", True)]
            gv = [{"groupVersion": "%s/%s" % (g, v), "version": v} for v in vs]
            groups.append({"name": g, "versions": gv, "preferredVersion": gv[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def resource_list(self, store, group, version):
        gv = "%s/%s" % (group, version)
        if gv == "apiextensions.k8s.io/v1":
            res = [{"name": "customresourcedefinitions", "singularName":
                    "customresourcedefinition", "namespaced": False,
                    "kind": "CustomResourceDefinition", "shortNames": ["crd", "crds"],
                    "verbs": ["create", "delete", "get", "list", "patch", "update"]}]
        else:
            res = []
            for c in store.crds():
                s = c["spec"]
                if s["group"] == group and any(v["name"] == version for v in s["versions"]):
                    res.append({"name": s["names"]["plural"],
                                "singularName": s["names"].get("singular", ""),
                                "namespaced": s["scope"] == "Namespaced",
                                "kind": s["names"]["kind"],
                                "shortNames": s["names"].get("shortNames", []),
                                "verbs": ["create", "delete", "get", "list", "patch",
                                          "update"]})
            if not res:
                raise ApiError(404, "NotFound",
                               "the server could not find the requested resource")
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": res}

    # -- objects --
    def objects(self, method, store, key, name, q, crd, version, kind, ns=None):
        """Objects of one kind; ns None: cluster-scoped, "" (lists only): every namespace,
        else the namespace (stored under "ns/name")."""
        group, plural = key
        objs = store.kind(key)
        api_version = "%s/%s" % (group, version) if group else version
        details = {"name": name, "group": group, "kind": plural}
        what = "%s.%s" % (plural, group) if group else plural
        skey = "%s/%s" % (ns, name) if ns else name

        def not_found():
            return ApiError(404, "NotFound", '%s "%s" not found' % (what, name), details)

        if method == "GET" and name is None:
            reqs = parse_selector(q.get("labelSelector"))
            items = [o for n, o in sorted(objs.items())
                     if selector_matches(reqs, o["metadata"].get("labels") or {}) and
                     (not ns or o["metadata"].get("namespace") == ns) and
                     field_matches(q.get("fieldSelector"), o)]
            if self.wants_table():
                return 200, self.table(items, crd, store, kind)
            return 200, {"kind": kind + "List", "apiVersion": api_version,
                         "metadata": {"resourceVersion": str(store.rv)}, "items": items}
        if method == "POST" and name is None:
            obj, _ = self.body()
            n = (obj.get("metadata") or {}).get("name")
            if not n:
                raise ApiError(422, "Invalid", "%s is invalid: metadata.name: Required value"
                               % what)
            skey = "%s/%s" % (ns, n) if ns else n
            if skey in objs:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists'
                               % (what, n), {"name": n, "group": group, "kind": plural})
            if obj.get("apiVersion") != api_version or obj.get("kind") != kind:
                raise ApiError(400, "BadRequest", "the object is %s %s, not %s %s" % (
                    obj.get("apiVersion"), obj.get("kind"), api_version, kind))
            md = obj["metadata"]
            if ns:
                if md.get("namespace", ns) != ns:
                    raise ApiError(400, "BadRequest", "the namespace of the provided object "
                                   "does not match the namespace sent on the request")
                md["namespace"] = ns
            if kind == "Pod":
                validate_pod(obj)
            if kind == "CustomResourceDefinition":
                validate_crd(obj)
                obj.setdefault("status", {"phase": "Pending"})
            md.pop("resourceVersion", None)
            md.update({"uid": str(uuid.uuid4()), "resourceVersion": store.bump(),
                       "creationTimestamp": now(), "generation": 1})
            if kind == "CustomResourceDefinition":
                obj["status"] = {"conditions": [
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "lastTransitionTime": now(), "message": "the initial names have been "
                     "accepted"}], "acceptedNames": obj["spec"]["names"],
                    "storedVersions": [v["name"] for v in obj["spec"]["versions"]
                                       if v.get("storage")]}
            objs[skey] = obj
            store.save()
            return 201, obj
        if name is None:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        cur = objs.get(skey)
        if method == "GET":
            if cur is None:
                raise not_found()
            if self.wants_table():
                return 200, self.table([cur], crd, store, kind)
            return 200, cur
        if method == "DELETE":
            if cur is None:
                raise not_found()
            del objs[skey]
            store.bump()
            store.save()
            return 200, cur
        if method == "PUT":
            obj, _ = self.body()
            if cur is None:
                raise not_found()
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if not rv:
                raise ApiError(422, "Invalid", '%s "%s" is invalid: metadata.resourceVersion: '
                               'Invalid value: 0x0: must be specified for an update'
                               % (what, name), details)
            if rv != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": '
                               'the object has been modified; please apply your changes to the '
                               'latest version and try again' % (what, name), details)
            return 200, self.replace(store, objs, skey, cur, obj)
        if method == "PATCH":
            patch, ctype = self.body()
            if cur is None:
                raise not_found()
            if ctype == "application/json-patch+json":
                new = json_patch(cur, patch)
            elif ctype in ("application/merge-patch+json",
                           "application/strategic-merge-patch+json"):
                new = merge_patch(cur, patch)
            else:
                raise ApiError(415, "UnsupportedMediaType", "patch type %s" % ctype)
            rv = (patch.get("metadata") or {}).get("resourceVersion") \
                if isinstance(patch, dict) else None
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": '
                               'the object has been modified; please apply your changes to the '
                               'latest version and try again' % (what, name), details)
            return 200, self.replace(store, objs, skey, cur, new)
        raise ApiError(405, "MethodNotAllowed", "method %s" % method)

    @staticmethod
    def replace(store, objs, name, cur, new):
        """Stores new in place of cur: identity fields stay, resourceVersion moves on."""
        md = new.setdefault("metadata", {})
        for k in ("uid", "creationTimestamp", "name", "namespace"):
            if k in cur["metadata"]:
                md[k] = cur["metadata"][k]
        new["apiVersion"], new["kind"] = cur["apiVersion"], cur["kind"]
        gen = cur["metadata"].get("generation", 1)
        md["generation"] = gen + 1 if new.get("spec") != cur.get("spec") else gen
        md["resourceVersion"] = store.bump()
        objs[name] = new
        store.save()
        return new

    def wants_table(self):
        return "as=Table" in (self.headers.get("Accept") or "")

    def table(self, items, crd, store, kind=None):
        if kind == "Pod":
            return self.pod_table(items, store)
        cols = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
                 "description": "Name must be unique within a namespace."}]
        paths = []
        version = crd["spec"]["versions"][0] if crd else None
        printer = (version or {}).get("additionalPrinterColumns")
        if printer is None:
            printer = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        for c in printer:
            cols.append({"name": c["name"], "type": c["type"], "format": c.get("format", ""),
                         "priority": c.get("priority", 0), "description": c.get("description",
                                                                              "")})
            paths.append((c["jsonPath"], c["type"]))
        rows = []
        for o in items:
            cells = [o["metadata"]["name"]]
            for p, t in paths:
                v = json_path(o, p)
                cells.append(human_age(v) if t == "date" and v is not None else v)
            rows.append({"cells": cells, "object": {
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": o["metadata"]}})
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": str(store.rv)}, "columnDefinitions": cols,
                "rows": rows}


    @staticmethod
    def pod_table(items, store):
        """Pods as the API server's table shows them: NAME READY STATUS RESTARTS AGE."""
        cols = [{"name": n, "type": t, "format": f, "priority": 0, "description": n}
                for n, t, f in (("Name", "string", "name"), ("Ready", "string", ""),
                                ("Status", "string", ""), ("Restarts", "string", ""),
                                ("Age", "string", ""))]
        rows = []
        for o in items:
            st = o.get("status") or {}
            cs = st.get("containerStatuses") or []
            total = len((o.get("spec") or {}).get("containers") or [])
            ready = sum(1 for c in cs if c.get("ready"))
            restarts = sum(c.get("restartCount", 0) for c in cs)
            rows.append({"cells": [o["metadata"]["name"], "%d/%d" % (ready, total),
                                   st.get("phase", "Pending"), str(restarts),
                                   human_age(o["metadata"].get("creationTimestamp"))],
                         "object": {"kind": "PartialObjectMetadata",
                                    "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}})
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": str(store.rv)}, "columnDefinitions": cols,
                "rows": rows}


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def setup(d, port):
    os.makedirs(d, exist_ok=True)
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = (os.path.join(d, n) for n in ("server.key", "server.csr", "server.crt"))
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", ca_key, "-out",
        ca, "-days", "2", "-subj", "/CN=kubeapi-test-ca")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr,
        "-subj", "/CN=127.0.0.1")
    ext = os.path.join(d, "san.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", crt, "-days", "2", "-extfile", ext)
    token = uuid.uuid4().hex
    with open(os.path.join(d, "token"), "w") as f:
        f.write(token)
    with open(ca, "rb") as f:
        ca_data = base64.b64encode(f.read()).decode()
    with open(os.path.join(d, "kubeconfig"), "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: test\n"
                "clusters:\n- name: test\n  cluster:\n    server: https://127.0.0.1:%d\n"
                "    certificate-authority-data: %s\n"
                "users:\n- name: tester\n  user:\n    token: %s\n"
                "contexts:\n- name: test\n  context: {cluster: test, user: tester}\n"
                % (port, ca_data, token))
    os.chmod(os.path.join(d, "kubeconfig"), 0o600)


def serve(d, port, state):
    with open(os.path.join(d, "token")) as f:
        token = f.read().strip()
    srv = Server(("127.0.0.1", port), Handler)
    srv.store = Store(state)
    srv.token = token
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    print("kubeapi: serving https://127.0.0.1:%d" % port, flush=True)
    srv.serve_forever()


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="kubeapi.py")
    ap.add_argument("cmd", choices=["setup", "serve"])
    ap.add_argument("dir")
    ap.add_argument("--port", type=int, default=6443)
    ap.add_argument("--state")
    a = ap.parse_args(argv)
    if a.cmd == "setup":
        setup(a.dir, a.port)
    else:
        serve(a.dir, a.port, a.state)


if __name__ == "__main__":
    main(sys.argv[1:])
