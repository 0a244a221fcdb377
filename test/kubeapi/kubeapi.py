#!/usr/bin/env python3
"""A local Kubernetes API endpoint for tests: the pieces of the real API that kiyot, kubectl and
python3-kubernetes use for the Cell CRD, with the real API's semantics and error objects.

  kubeapi.py setup DIR [--port P]    writes DIR/ca.crt, DIR/server.{crt,key}, DIR/token and
                                     DIR/kubeconfig (token + CA data, server https://127.0.0.1:P)
  kubeapi.py serve DIR --port P [--state FILE]
                                     serves HTTPS with DIR's certificate; bearer token DIR/token;
                                     objects persist in FILE so a restarted endpoint keeps them

Served: /version, /api, /api/v1, /apis, /apis/<group>/<version> discovery, /openapi/v2 and
/openapi/v3 (only what tells kubectl that fieldValidation is taken, see openapi.py); CRDs
(apiextensions.k8s.io/v1); the custom resources those CRDs define, cluster-scoped or namespaced;
and the built-in kinds of BUILTIN, which the manifests under deploy/ use (namespaces exist
implicitly: "default", "kube-system" and any that holds an object). For all of them: create ->
409 AlreadyExists, get -> 404 NotFound, update with metadata.resourceVersion -> 409 Conflict when
stale, merge-patch and json-patch, delete, list with labelSelector and fieldSelector
metadata.name/metadata.namespace (namespaced kinds also across namespaces), and meta.k8s.io
Table output (a CRD's printer columns; for pods kubectl's NAME READY STATUS RESTARTS AGE; else
NAME AGE) when the client asks for it.

Fields are checked as a 1.26 server checks them (schema.py): a field the kind does not have is
dropped with a Warning header (fieldValidation=Warn, the default), dropped silently (Ignore) or
refused (Strict: 400 "strict decoding error: unknown field ..." on create and update, 422 on a
patch); a CRD's schema must be structural (422). Pods need containers with names and images.
"""
import base64
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

import openapi
import patches
import schema

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


# Fields an Event list may be selected by besides metadata's (the server's event field set).
EVENT_FIELDS = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.fieldPath",
                "reason", "type", "source", "reportingComponent")


def field_matches(sel, obj):
    """fieldSelector: metadata.name and metadata.namespace equality, as kubectl sends them, and
    an Event's own fields (kubectl describe asks for a pod's by involvedObject.*)."""
    md = obj.get("metadata") or {}
    event = obj.get("kind") == "Event"
    for part in filter(None, (p.strip() for p in (sel or "").split(","))):
        neg = "!=" in part
        k, v = part.split("!=" if neg else "=", 1)
        k, v = k.strip(), v.strip().lstrip("=")
        if k in ("metadata.name", "metadata.namespace"):
            have = md.get(k.split(".", 1)[1])
        elif event and k in EVENT_FIELDS:
            have = obj.get("source", {}).get("component") if k == "source" else json_path(
                obj, "." + k)
        else:
            raise ApiError(400, "BadRequest", 'field label not supported: "%s"' % k)
        if (have or "") == v and neg or (have or "") != v and not neg:
            return False
    return True


# The built-in kinds served besides pods' namespaces and CRDs: (group, version, plural, kind,
# namespaced, short names). Their fields are python3-kubernetes's models' (see schema.py).
BUILTIN = [
    ("", "v1", "pods", "Pod", True, ["po"]),
    ("", "v1", "services", "Service", True, ["svc"]),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"]),
    ("", "v1", "secrets", "Secret", True, []),
    ("", "v1", "configmaps", "ConfigMap", True, ["cm"]),
    ("", "v1", "events", "Event", True, ["ev"]),
    ("apps", "v1", "deployments", "Deployment", True, ["deploy"]),
    ("apps", "v1", "daemonsets", "DaemonSet", True, ["ds"]),
    ("batch", "v1", "cronjobs", "CronJob", True, ["cj"]),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, []),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, []),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, []),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, []),
]
CRD_KIND = ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
            False, ["crd", "crds"])
DIRECTIVES = ("", "Ignore", "Strict", "Warn")


def invalid(group, kind, name, causes):
    """A 422 as the server builds it (errors.NewInvalid): causes are (field, reason, message);
    kubectl prints them from the details ("The Pod "x" is invalid: spec...: Required value")."""
    errs = ["%s: %s" % (f, m) for f, _, m in causes]
    what = "%s.%s" % (kind, group) if group else kind
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (
        what, name, errs[0] if len(errs) == 1 else "[%s]" % ", ".join(errs)),
        {"name": name, "group": group, "kind": kind,
         "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes]})


def validate_pod(obj):
    """What the API server insists on for a pod, which a test may get wrong: containers, each
    with a name and an image."""
    name = obj["metadata"]["name"]
    cs = (obj.get("spec") or {}).get("containers")
    if not isinstance(cs, list) or not cs:
        raise invalid("", "Pod", name, [("spec.containers", "FieldValueRequired",
                                         "Required value")])
    for i, c in enumerate(cs + (obj["spec"].get("initContainers") or [])):
        for f in ("name", "image"):
            if not isinstance(c, dict) or not c.get(f):
                raise invalid("", "Pod", name, [("spec.containers[%d].%s" % (i, f),
                                                 "FieldValueRequired", "Required value")])


def validate_crd(obj):
    """A CRD's schemas must be structural (schema.structural_errors)."""
    errs = schema.structural_errors(obj)
    if errs:
        raise invalid("apiextensions.k8s.io", "CustomResourceDefinition",
                      obj["metadata"].get("name", ""), errs)


def validate_event(obj):
    """What a 1.26 server insists on for a core/v1 Event (legacy validation): the involved
    object's namespace is the event's (a cluster-scoped object's events go to "default"), a
    type of Normal or Warning, a reason and a message within their sizes."""
    md = obj["metadata"]
    name, ns = md["name"], md.get("namespace", "")
    io = obj.get("involvedObject") or {}
    causes = []
    if io.get("namespace"):
        if io["namespace"] != ns:
            causes.append(("involvedObject.namespace", "FieldValueInvalid",
                           'Invalid value: "%s": does not match event.namespace' %
                           io["namespace"]))
    elif ns not in ("", "default"):
        causes.append(("involvedObject.namespace", "FieldValueInvalid",
                       'Invalid value: "": does not match event.namespace'))
    if obj.get("type") not in (None, "", "Normal", "Warning"):
        causes.append(("type", "FieldValueNotSupported", 'Unsupported value: "%s": supported '
                       'values: "Normal", "Warning"' % obj.get("type")))
    if len(obj.get("reason") or "") > 128:
        causes.append(("reason", "FieldValueTooLong", "Too long: may not be more than 128 "
                       "bytes"))
    if len((obj.get("message") or "").encode()) > 4096:
        causes.append(("message", "FieldValueTooLong", "Too long: may not be more than 4096 "
                       "bytes"))
    if causes:
        raise invalid("", "Event", name, causes)


VALIDATE = {"Pod": validate_pod, "CustomResourceDefinition": validate_crd,
            "Event": validate_event}


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
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for w in self.warnings:
            # RFC 7234 warn-text: a quoted string, as the API server sends it (code 299)
            self.send_header("Warning", '299 - "%s"' % w.replace("\\", "\\\\")
                             .replace('"', '\\"'))
        self.end_headers()
        self.wfile.write(data)

    def raw_body(self):
        """The request's body, sized by Content-Length or sent in chunks (kubectl create --raw
        does), at most MAX_BODY bytes."""
        too_large = ApiError(413, "RequestEntityTooLarge", "request body too large")
        if "chunked" not in (self.headers.get("Transfer-Encoding") or "").lower():
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                raise too_large
            return self.rfile.read(n) if n else b""
        raw = b""
        while True:
            size = int(self.rfile.readline(64).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers, up to the empty line
                    pass
                return raw
            if len(raw) + size > MAX_BODY:
                raise too_large
            raw += self.rfile.read(size)
            self.rfile.readline(64)  # the CRLF that ends the chunk

    def body(self):
        raw = self.raw_body()
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
        self.warnings = []
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
                self.raw_body()
            if parts[:1] == ["openapi"] and method == "GET":
                with store.lock:
                    kinds = self.kinds(store)
                return self.reply(*self.openapi(parts[1:], kinds))
            with store.lock:
                code, out = self.route(method, parts, q, store)
            if isinstance(out, dict) and out.get("kind") == "Table":
                self.reply(code, out, "application/json;as=Table;v=v1;g=meta.k8s.io")
            else:
                self.reply(code, out)
        except ApiError as e:
            self.reply(e.code, e.body)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
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
    @staticmethod
    def kinds(store):
        """Every kind served: BUILTIN, CRDs, and the served versions of each CRD's kind."""
        out = [k[:5] for k in BUILTIN] + [CRD_KIND[:5]]
        for c in store.crds():
            s = c["spec"]
            out += [(s["group"], v["name"], s["names"]["plural"], s["names"]["kind"],
                     s["scope"] == "Namespaced") for v in s["versions"] if v.get("served", True)]
        return out

    def openapi(self, rest, kinds):
        """(code, body, content type) of /openapi/v2, /openapi/v3 and /openapi/v3/<gv>."""
        if rest == ["v2"]:
            if "protobuf" in (self.headers.get("Accept") or ""):
                return 200, openapi.v2_protobuf(kinds), "application/octet-stream"
            return 200, openapi.v2_json(kinds), "application/json"
        if rest == ["v3"]:
            return 200, openapi.v3_root(kinds), "application/json"
        if rest[:1] == ["v3"] and len(rest) in (3, 4):
            gv = ("", rest[2]) if rest[1] == "api" and len(rest) == 3 else \
                (rest[2], rest[3]) if rest[1] == "apis" and len(rest) == 4 else None
            if gv and any((k[0], k[1]) == gv for k in kinds):
                return 200, openapi.v3_doc(kinds, *gv), "application/json"
        return 404, status(404, "NotFound", "the server could not find the requested "
                           "resource"), "application/json"

    def route(self, method, parts, q, store):
        if parts == ["version"]:
            return 200, {"major": "1", "minor": "26", "gitVersion": "v1.26.1",
                         "platform": "linux/amd64"}
        if parts == ["api"]:
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [
                             {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
        if parts == ["api", "v1"]:
            return 200, self.resource_list(store, "", "v1")
        if parts[:2] == ["api", "v1"]:
            return self.resources(method, "", "v1", parts[2:], q, store)
        if parts == ["apis"]:
            return 200, self.group_list(store)
        if len(parts) == 3 and parts[0] == "apis":
            return 200, self.resource_list(store, parts[1], parts[2])
        if len(parts) > 3 and parts[0] == "apis":
            return self.resources(method, parts[1], parts[2], parts[3:], q, store)
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def resources(self, method, group, version, rest, q, store):
        """Objects of a group-version: rest is [plural(, name)] or [namespaces, ns, plural(,
        name)]; in core v1, [namespaces(, name)] are the namespaces."""
        not_found = ApiError(404, "NotFound", "the server could not find the requested resource")
        if group == "" and rest[0] == "namespaces" and len(rest) <= 2:
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "namespaces exist when named")
            if len(rest) == 2:
                return 200, self.namespace(rest[1])
            names = {"default", "kube-system"} | {
                o["metadata"]["namespace"] for objs in store.objs.values() for o in objs.values()
                if o.get("metadata", {}).get("namespace")}
            return 200, {"kind": "NamespaceList", "apiVersion": "v1",
                         "metadata": {"resourceVersion": str(store.rv)},
                         "items": [self.namespace(n) for n in sorted(names)]}
        ns = None
        if rest[0] == "namespaces" and len(rest) in (3, 4):
            ns, rest = rest[1], rest[2:]
        if len(rest) not in (1, 2):
            raise not_found
        plural, name = rest[0], rest[1] if len(rest) == 2 else None
        crd = None
        for g, v, p, k, namespaced, _ in BUILTIN + [CRD_KIND]:
            if (g, v, p) == (group, version, plural):
                kind = k
                break
        else:
            crd = store.crd_for(group, version, plural)
            if crd is None:
                raise not_found
            kind, namespaced = crd["spec"]["names"]["kind"], crd["spec"]["scope"] == "Namespaced"
        if namespaced and ns is None:
            if method != "GET" or name is not None:
                raise not_found
            ns = ""  # a list across namespaces
        if not namespaced and ns is not None:
            raise not_found
        return self.objects(method, store, (group, plural), name, q, crd, version, kind, ns=ns)

    @staticmethod
    def namespace(name):
        return {"kind": "Namespace", "apiVersion": "v1",
                "metadata": {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                             "resourceVersion": "1", "creationTimestamp": now()},
                "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}

    def group_list(self, store):
        groups = {}
        for g, v, _, _, _ in self.kinds(store):
            if g and v not in groups.setdefault(g, []):
                groups[g].append(v)
        out = []
        for g, vs in groups.items():
            gv = [{"groupVersion": "%s/%s" % (g, v), "version": v} for v in vs]
            out.append({"name": g, "versions": gv, "preferredVersion": gv[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}

    def resource_list(self, store, group, version):
        gv = "%s/%s" % (group, version) if group else version
        verbs = ["create", "delete", "get", "list", "patch", "update"]
        res = []
        if gv == "v1":
            res.append({"name": "namespaces", "singularName": "namespace", "namespaced": False,
                        "kind": "Namespace", "verbs": ["get", "list"], "shortNames": ["ns"]})
        for g, v, p, k, namespaced, short in BUILTIN + [CRD_KIND]:
            if (g, v) == (group, version):
                res.append({"name": p, "singularName": k.lower(), "namespaced": namespaced,
                            "kind": k, "verbs": verbs, "shortNames": short})
                if k in ("Pod", "Service", "Deployment", "DaemonSet"):
                    res[-1]["categories"] = ["all"]
        for c in store.crds():
            s = c["spec"]
            if s["group"] == group and any(v["name"] == version for v in s["versions"]):
                res.append({"name": s["names"]["plural"],
                            "singularName": s["names"].get("singular", ""),
                            "namespaced": s["scope"] == "Namespaced",
                            "kind": s["names"]["kind"],
                            "shortNames": s["names"].get("shortNames", []), "verbs": verbs})
        if not res:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                "resources": res}

    # -- fields --
    def directive(self, q, options):
        """The request's fieldValidation: Ignore, Warn (also when not given) or Strict."""
        d = q.get("fieldValidation", "")
        if d not in DIRECTIVES:
            raise invalid("meta.k8s.io", options, "", [(
                "fieldValidation", "FieldValueNotSupported",
                'Unsupported value: "%s": supported values: %s' % (
                    d, ", ".join('"%s"' % x for x in DIRECTIVES)))])
        return d or "Warn"

    def check_fields(self, obj, group, version, kind, crd, directive, patched=False,
                     map_keys=True):
        """Drops the fields obj's kind does not have; with Warn says so in Warning headers,
        with Strict refuses the request as the server does: 400 for a body that is the object,
        422 for the result of a patch."""
        if crd:
            v = [x for x in crd["spec"]["versions"] if x["name"] == version][0]
            unknown = schema.cr_unknown_fields(obj, (v.get("schema") or {}).get(
                "openAPIV3Schema") or {"x-kubernetes-preserve-unknown-fields": True})
        else:
            unknown = schema.unknown_fields(obj, schema.model_for(group, version, kind),
                                            map_keys=map_keys)
        if not unknown:
            return
        said = ['unknown field "%s"' % p for p in unknown]
        if directive == "Warn":
            self.warnings += said
        if directive != "Strict":
            return
        if not patched:
            raise ApiError(400, "BadRequest", '%s in version "%s" cannot be handled as a %s: '
                           'strict decoding error: %s' % (kind, version, kind, ", ".join(said)))
        raise invalid("", "", "", [("patch", "FieldValueInvalid", 'Invalid value: "%s": '
                                    'strict decoding error: %s' % (
                                        json.dumps(obj, separators=(",", ":")),
                                        ", ".join(said)))])

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

        def conflict():
            return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the '
                            'object has been modified; please apply your changes to the latest '
                            'version and try again' % (what, name), details)

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
            directive = self.directive(q, "CreateOptions")
            if not isinstance(obj, dict) or obj.get("apiVersion") != api_version or \
                    obj.get("kind") != kind:
                raise ApiError(400, "BadRequest", "the object is %s %s, not %s %s" % (
                    obj.get("apiVersion"), obj.get("kind"), api_version, kind))
            self.check_fields(obj, group, version, kind, crd, directive)
            n = (obj.get("metadata") or {}).get("name")
            if not n:
                raise ApiError(422, "Invalid", "%s is invalid: metadata.name: Required value"
                               % what)
            md = obj["metadata"]
            if ns:
                if md.get("namespace", ns) != ns:
                    raise ApiError(400, "BadRequest", "the namespace of the provided object "
                                   "does not match the namespace sent on the request")
                md["namespace"] = ns
            if kind in VALIDATE:
                VALIDATE[kind](obj)
            skey = "%s/%s" % (ns, n) if ns else n
            if skey in objs:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists'
                               % (what, n), {"name": n, "group": group, "kind": plural})
            if kind == "Pod":
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
            directive = self.directive(q, "UpdateOptions")
            self.check_fields(obj, group, version, kind, crd, directive)
            if cur is None:
                raise not_found()
            rv = (obj.get("metadata") or {}).get("resourceVersion")
            if not rv:
                raise ApiError(422, "Invalid", '%s "%s" is invalid: metadata.resourceVersion: '
                               'Invalid value: 0x0: must be specified for an update'
                               % (what, name), details)
            if rv != cur["metadata"]["resourceVersion"]:
                raise conflict()
            if kind in VALIDATE:
                VALIDATE[kind](dict(obj, metadata=dict(obj["metadata"], name=name)))
            return 200, self.replace(store, objs, skey, cur, obj)
        if method == "PATCH":
            body, ctype = self.body()
            directive = self.directive(q, "PatchOptions")
            if cur is None:
                raise not_found()
            apply = {"application/json-patch+json": patches.json_patch,
                     "application/merge-patch+json": patches.merge_patch,
                     "application/strategic-merge-patch+json": patches.strategic_merge}
            if ctype not in apply:
                raise ApiError(415, "UnsupportedMediaType", "patch type %s" % ctype)
            try:
                new = apply[ctype](cur, body)
            except patches.PatchError as e:
                raise ApiError(e.code, e.reason, str(e))
            # the server turns a strategic merge patch's result into the object without
            # naming map keys in the paths of unknown fields
            self.check_fields(new, group, version, kind, crd, directive, patched=True,
                              map_keys=ctype != "application/strategic-merge-patch+json")
            rv = (body.get("metadata") or {}).get("resourceVersion") \
                if isinstance(body, dict) else None
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise conflict()
            if kind in VALIDATE:
                VALIDATE[kind](new)
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
        if kind == "Event":
            return self.event_table(items, store)
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


    @staticmethod
    def event_table(items, store):
        """Events as the API server's table shows them: LAST SEEN TYPE REASON OBJECT MESSAGE."""
        cols = [{"name": n, "type": "string", "format": f, "priority": 0, "description": n}
                for n, f in (("Last Seen", ""), ("Type", ""), ("Reason", ""), ("Object", ""),
                             ("Message", ""), ("Name", "name"))]
        cols[-1]["priority"] = 1
        rows = []
        for o in items:
            io = o.get("involvedObject") or {}
            rows.append({"cells": [human_age(o.get("lastTimestamp") or
                                             o["metadata"].get("creationTimestamp")),
                                   o.get("type", ""), o.get("reason", ""),
                                   "%s/%s" % (io.get("kind", "").lower(), io.get("name", "")),
                                   o.get("message", ""), o["metadata"]["name"]],
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
