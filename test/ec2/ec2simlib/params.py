"""Request parameters of the EC2 Query protocol: decoding, checking and the list shapes.

Names are checked against the EC2 service model that botocore ships, so a parameter the real
API would not recognise (a misspelt name, a wrong list shape) is refused with UnknownParameter
as EC2 does, and values of integer and boolean members are checked.
"""

import re
import urllib.parse

import botocore.session

from .errors import Ec2Error

MAX_PARAMS = 2000
_INDEX_RE = re.compile(r"^[1-9][0-9]{0,4}$")
_RESERVED = {"Action", "Version"}


def decode(body, query):
    """The request's parameters (query string, then form body) as a dict of name -> value."""
    params = {}
    for source in (query, body.decode("utf-8", "replace") if body else ""):
        if not source:
            continue
        pairs = urllib.parse.parse_qsl(source, keep_blank_values=True)
        if len(pairs) + len(params) > MAX_PARAMS:
            raise Ec2Error("InvalidParameterValue",
                           f"The request has more than {MAX_PARAMS} parameters.")
        for name, value in pairs:
            if name in params and params[name] != value:
                raise Ec2Error("InvalidParameterValue",
                               f"The parameter {name} is given twice with different values.")
            params[name] = value
    return params


def _template(name):
    """A parameter name with its list indexes replaced by '#'."""
    return ".".join("#" if _INDEX_RE.match(p) else p for p in name.split("."))


class Model:
    """The input shapes of EC2 operations, flattened into parameter name templates."""

    def __init__(self):
        self._service = botocore.session.get_session().get_service_model("ec2")
        self._cache = {}

    def operation_names(self):
        return set(self._service.operation_names)

    def _walk(self, shape, prefix, out, depth):
        if depth > 12:
            return
        kind = shape.type_name
        if kind == "structure":
            for member_name, member in shape.members.items():
                ser = member.serialization
                if "queryName" in ser:
                    name = ser["queryName"]
                elif "name" in ser:
                    name = ser["name"][0].upper() + ser["name"][1:]
                else:
                    name = member_name
                self._walk(member, f"{prefix}.{name}" if prefix else name, out, depth + 1)
        elif kind == "list":
            self._walk(shape.member, f"{prefix}.#", out, depth + 1)
        elif kind == "map":
            self._walk(shape.key, f"{prefix}.#.key", out, depth + 1)
            self._walk(shape.value, f"{prefix}.#.value", out, depth + 1)
        else:
            out[prefix] = kind

    def _templates(self, action):
        if action not in self._cache:
            op = self._service.operation_model(action)
            templates = {}
            required = []
            if op.input_shape is not None:
                self._walk(op.input_shape, "", templates, 0)
                for member_name in op.input_shape.required_members:
                    member = op.input_shape.members[member_name]
                    ser = member.serialization
                    name = ser.get("queryName") or (
                        ser["name"][0].upper() + ser["name"][1:] if "name" in ser
                        else member_name)
                    required.append(name)
            self._cache[action] = (templates, required)
        return self._cache[action]

    def check(self, action, params):
        """Raise Ec2Error for unknown parameters, bad scalar values, missing required ones."""
        templates, required = self._templates(action)
        for name, value in params.items():
            if name in _RESERVED:
                continue
            kind = templates.get(_template(name))
            if kind is None:
                raise Ec2Error("UnknownParameter",
                               f"The parameter {name} is not recognized by {action}.")
            if kind in ("integer", "long"):
                if not re.match(r"^-?[0-9]{1,18}$", value):
                    raise Ec2Error("InvalidParameterValue",
                                   f"Value ({value}) for parameter {name} is invalid: "
                                   "expected an integer.")
            elif kind == "boolean" and value.lower() not in ("true", "false"):
                raise Ec2Error("InvalidParameterValue",
                               f"Value ({value}) for parameter {name} is invalid: expected "
                               "true or false.")
        for name in required:
            if name not in params and not any(p.startswith(name + ".") for p in params):
                raise Ec2Error("MissingParameter",
                               f"The request must contain the parameter {name}.")


def indexed(params, prefix):
    """Values of prefix.1, prefix.2, ... in index order."""
    found = []
    for name, value in params.items():
        head, _, index = name.rpartition(".")
        if head == prefix and _INDEX_RE.match(index):
            found.append((int(index), value))
    return [v for _, v in sorted(found)]


def groups(params, prefix):
    """The sub-parameters of prefix.N.*: a list, in index order, of dicts rest -> value."""
    found = {}
    plen = len(prefix) + 1
    for name, value in params.items():
        if not name.startswith(prefix + "."):
            continue
        index, _, rest = name[plen:].partition(".")
        if _INDEX_RE.match(index) and rest:
            found.setdefault(int(index), {})[rest] = value
    return [found[i] for i in sorted(found)]


def filters(params):
    """Filter.N.Name / Filter.N.Value.M as a list of (name, [values])."""
    out = []
    for group in groups(params, "Filter"):
        name = group.get("Name")
        if not name:
            raise Ec2Error("InvalidParameterValue", "A filter is missing its Name.")
        values = indexed(group, "Value")
        if not values:
            raise Ec2Error("InvalidParameterValue", f"The filter '{name}' has no values.")
        out.append((name, values))
    return out


def tags(group_params, prefix="Tag"):
    """prefix.N.Key / prefix.N.Value as a list of (key, value)."""
    out = []
    for group in groups(group_params, prefix):
        if "Key" not in group:
            raise Ec2Error("InvalidParameterValue", f"A {prefix} entry is missing its Key.")
        out.append((group["Key"], group.get("Value", "")))
    return out


def integer(params, name, default=None, low=None, high=None):
    """An integer parameter within [low, high], or default when absent."""
    if name not in params:
        return default
    value = int(params[name])
    if (low is not None and value < low) or (high is not None and value > high):
        raise Ec2Error("InvalidParameterValue",
                       f"Value ({value}) for parameter {name} is invalid: expected a value "
                       f"between {low} and {high}.")
    return value


def boolean(params, name):
    return params.get(name, "false").lower() == "true"
