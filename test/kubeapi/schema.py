"""The fields of the objects the endpoint serves, checked as a Kubernetes 1.26 API server checks
them: unknown fields (which the server drops, warns about or refuses, per the request's
fieldValidation) and a CustomResourceDefinition's structural schema.

Built-in kinds take their fields from python3-kubernetes's models (Kubernetes 1.22) plus what
1.23 to 1.26 changed in the kinds served (ADDED, NEW_MODELS, REMOVED); custom resources take
theirs from their CRD's openAPIV3Schema, as the server's pruning does.

Paths read as the server writes them: "spec.containers[0].extra". Where the server converts a
strategic merge patch it leaves map keys out ("...openAPIV3Schema.properties.properties.x"),
and so does unknown_fields(..., map_keys=False).
"""

# What the API gained from 1.23 to 1.26 in the kinds served (python3-kubernetes 22 knows 1.22):
# JSON name -> type in the models' notation.
ADDED = {
    "V1PodSpec": {"hostUsers": "bool", "os": "V1PodOS",
                  "resourceClaims": "list[V1PodResourceClaim]",
                  "schedulingGates": "list[V1PodSchedulingGate]"},
    "V1Probe": {"grpc": "V1GRPCAction"},
    "V1ResourceRequirements": {"claims": "list[V1ResourceClaim]"},
    "V1TopologySpreadConstraint": {"matchLabelKeys": "list[str]", "minDomains": "int",
                                   "nodeAffinityPolicy": "str", "nodeTaintsPolicy": "str"},
    "V1PersistentVolumeClaimSpec": {"dataSourceRef": "V1TypedObjectReference"},
    "V1JSONSchemaProps": {"x-kubernetes-validations": "list[V1ValidationRule]"},
    "V1CronJobSpec": {"timeZone": "str"},  # beta in 1.25, on by default
}
NEW_MODELS = {
    "V1PodOS": {"name": "str"},
    "V1PodResourceClaim": {"name": "str", "source": "V1ClaimSource"},
    "V1ClaimSource": {"resourceClaimName": "str", "resourceClaimTemplateName": "str"},
    "V1PodSchedulingGate": {"name": "str"},
    "V1GRPCAction": {"port": "int", "service": "str"},
    "V1ResourceClaim": {"name": "str"},
    "V1TypedObjectReference": {"apiGroup": "str", "kind": "str", "name": "str",
                               "namespace": "str"},
    "V1ValidationRule": {"rule": "str", "message": "str"},
}
REMOVED = {"V1ObjectMeta": {"clusterName"}}  # gone in 1.25

_fields_cache = {}


def model_fields(name):
    """JSON field name -> type of model `name` (e.g. "V1PodSpec"); None for a type that is not
    a model (str, int, object, ...)."""
    if name in _fields_cache:
        return _fields_cache[name]
    if name in NEW_MODELS:
        fields = dict(NEW_MODELS[name])
    else:
        from kubernetes.client import models  # python3-kubernetes, imported when first needed
        cls = getattr(models, name, None)
        if cls is None or not hasattr(cls, "openapi_types"):
            return None
        fields = {cls.attribute_map[a]: t for a, t in cls.openapi_types.items()}
    fields.update(ADDED.get(name, {}))
    for f in REMOVED.get(name, ()):
        fields.pop(f, None)
    _fields_cache[name] = fields
    return fields


def model_for(group, version, kind):
    """The model of a built-in kind: V1Pod, V1Deployment, V1CustomResourceDefinition...;
    core/v1 Event's is CoreV1Event (events.k8s.io has its own)."""
    if (group, kind) == ("", "Event"):
        return "CoreV1Event"
    return version[0].upper() + version[1:] + kind


def _join(path, key):
    return "%s.%s" % (path, key) if path else key


def _walk_model(value, typ, path, out, map_keys):
    if value is None:
        return
    if typ.startswith("list["):
        if isinstance(value, list):
            for i, v in enumerate(value):
                _walk_model(v, typ[5:-1], "%s[%d]" % (path, i), out, map_keys)
        return
    if typ.startswith("dict("):
        if isinstance(value, dict):
            inner = typ[5:-1].split(",", 1)[1].strip()
            for k, v in value.items():
                _walk_model(v, inner, _join(path, k) if map_keys else path, out, map_keys)
        return
    fields = model_fields(typ)
    if fields is None or not isinstance(value, dict):
        return  # a scalar, or free-form (object: IntOrString, RawExtension, JSON...)
    for k in list(value):
        if k in fields:
            _walk_model(value[k], fields[k], _join(path, k), out, map_keys)
        else:
            out.append(_join(path, k))
            del value[k]


def unknown_fields(obj, model, map_keys=True):
    """Removes from obj (in place) every field that model does not have, at any depth; returns
    their paths in the order met."""
    out = []
    _walk_model(obj, model, "", out, map_keys)
    return out


def _walk_schema(value, s, path, out):
    if not isinstance(s, dict):
        return
    if isinstance(value, list) and isinstance(s.get("items"), dict):
        for i, v in enumerate(value):
            _walk_schema(v, s["items"], "%s[%d]" % (path, i), out)
        return
    if not isinstance(value, dict):
        return
    props = s.get("properties") or {}
    extra = s.get("additionalProperties")
    keep = s.get("x-kubernetes-preserve-unknown-fields") or extra is True
    embedded = s.get("x-kubernetes-embedded-resource")
    for k in list(value):
        if embedded and k in ("apiVersion", "kind"):
            continue
        if embedded and k == "metadata":
            out.extend(_join(path, p) for p in unknown_fields(value[k], "V1ObjectMeta"))
        elif k in props:
            _walk_schema(value[k], props[k], _join(path, k), out)
        elif isinstance(extra, dict):
            _walk_schema(value[k], extra, _join(path, k), out)
        elif not keep:
            out.append(_join(path, k))
            del value[k]


def cr_unknown_fields(obj, schema):
    """The same for a custom resource whose CRD version has openAPIV3Schema `schema`: what the
    server prunes. metadata is ObjectMeta whatever the schema says, and comes first; the rest
    come sorted, as the server sorts what it prunes."""
    out = []
    if isinstance(obj.get("metadata"), dict):
        out = ["metadata." + p for p in unknown_fields(obj["metadata"], "V1ObjectMeta")]
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    pruned = []
    _walk_schema(rest, schema, "", pruned)
    out += sorted(pruned)
    for k in list(obj):
        if k not in ("apiVersion", "kind", "metadata") and k not in rest:
            del obj[k]
    return out


# -- structural schemas --

def _field_error(field, kind, detail, value=None):
    if kind == "Required":
        return field, "FieldValueRequired", "Required value: " + detail
    if kind == "Forbidden":
        return field, "FieldValueForbidden", "Forbidden: " + detail
    return field, "FieldValueInvalid", 'Invalid value: "%s": %s' % (value, detail)


def _structural(s, level, path, errs):
    """The invariants the server checks (apiextensions schema.validateStructuralInvariants):
    a type everywhere (but int-or-string and preserve-unknown-fields nodes), items for arrays,
    an object at the root, and a root metadata that restricts at most name and generateName."""
    if not isinstance(s, dict):
        return
    if s.get("type") == "array" and s.get("items") is None:
        errs.append(_field_error(path + ".items", "Required", "must be specified"))
    if isinstance(s.get("items"), dict):
        _structural(s["items"], "item", path + ".items", errs)
    for k, v in (s.get("properties") or {}).items():
        _structural(v, "field", "%s.properties[%s]" % (path, k), errs)
    if isinstance(s.get("additionalProperties"), dict):
        _structural(s["additionalProperties"], "field", path + ".additionalProperties", errs)
    if not s.get("type") and not s.get("x-kubernetes-int-or-string") and \
            not s.get("x-kubernetes-preserve-unknown-fields"):
        where = {"root": "at the root", "item": "for specified array items",
                 "field": "for specified object fields"}[level]
        errs.append(_field_error(path + ".type", "Required", "must not be empty " + where))
    if level == "root" and s.get("type") and s["type"] != "object":
        errs.append(_field_error(path + ".type", "Invalid", "must be object at the root",
                                 s["type"]))
    md = (s.get("properties") or {}).get("metadata")
    if level == "root" and isinstance(md, dict):
        if md.get("type") != "object":
            errs.append(_field_error(path + ".properties[metadata].type", "Invalid",
                                     "must be object", md.get("type", "")))
        names = set((md.get("properties") or {}).keys())
        if set(md) - {"type", "properties"} or names - {"name", "generateName"}:
            errs.append(_field_error(path + ".properties[metadata]", "Forbidden",
                                     "must not specify anything other than name and "
                                     "generateName, but metadata is implicitly specified"))


def structural_errors(crd):
    """A CRD's schema errors as the server reports them, sorted as it sorts them: a list of
    (field, cause reason, message). One schema shared by every version is checked once, under
    spec.validation, as the server's internal form has it."""
    versions = (crd.get("spec") or {}).get("versions") or []
    schemas = [((v.get("schema") or {}).get("openAPIV3Schema")) for v in versions]
    errs = []
    if schemas and all(s == schemas[0] for s in schemas) and schemas[0] is not None:
        _structural(schemas[0], "root", "spec.validation.openAPIV3Schema", errs)
    else:
        for i, s in enumerate(schemas):
            if s is not None:
                _structural(s, "root", "spec.versions[%d].schema.openAPIV3Schema" % i, errs)
    return sorted(errs, key=lambda e: "%s: %s" % (e[0], e[2]))
