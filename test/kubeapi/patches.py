"""The endpoint's patches, applied as the API server applies them: JSON merge patch (RFC 7386,
with the server's library pruning nulls from the values it puts in place), JSON patch
(RFC 6902) and kubectl's strategic merge patch, whose lists with a merge key are merged element
by element. The endpoint knows no patch strategies of its own: a strategic merge patch names
its merge keys in its $setElementOrder/<list> directives (kubectl always sends them with the
elements of such a list), and every other list is replaced, as lists without a strategy are.
"""
import copy


class PatchError(Exception):
    """A patch that does not apply: (HTTP code, reason, message)."""

    def __init__(self, code, reason, message):
        super().__init__(message)
        self.code, self.reason = code, reason


def prune_nulls(v):
    """v without the null members of its objects, at any depth."""
    if isinstance(v, dict):
        return {k: prune_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [prune_nulls(x) for x in v]
    return copy.deepcopy(v)


def merge_patch(target, patch):
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return prune_nulls(patch)
    out = copy.deepcopy(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


ORDER, DELETE_FROM = "$setElementOrder/", "$deleteFromPrimitiveList/"


def _merge_list(cur, plist, order):
    """A list with a merge key: the key is what each $setElementOrder entry names; patch
    elements merge into the current ones with the same key ({"$patch": "delete"} removes one);
    the result follows the order, the current elements it does not name after it."""
    if not order or not isinstance(order[0], dict):  # primitives merged as a set
        out = [x for x in order or []]
        return out + [x for x in (cur or []) + (plist or []) if x not in out]
    key = next(iter(order[0]))
    have = {e.get(key): e for e in cur or [] if isinstance(e, dict)}
    gone = set()
    for e in plist or []:
        if e.get("$patch") == "delete":
            gone.add(e.get(key))
        else:
            have[e.get(key)] = strategic_merge(have.get(e.get(key)), e)
    named = [o.get(key) for o in order]
    return [have[k] for k in named if k in have and k not in gone] + \
        [e for k, e in have.items() if k not in named and k not in gone]


def strategic_merge(cur, patch):
    """A strategic merge patch (kubectl's apply and patch --type=strategic) applied to cur. A
    list replaces the current one as it is, nulls and all, as the server's library does."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    patch = dict(patch)
    how = patch.pop("$patch", None)
    retain = patch.pop("$retainKeys", None)
    orders = {k[len(ORDER):]: patch.pop(k) for k in list(patch) if k.startswith(ORDER)}
    dels = {k[len(DELETE_FROM):]: patch.pop(k) for k in list(patch) if k.startswith(DELETE_FROM)}
    if how == "replace" or not isinstance(cur, dict):
        cur = {}
    out = copy.deepcopy(cur)
    if retain is not None:
        out = {k: v for k, v in out.items() if k in retain}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif k in orders and isinstance(v, list):
            out[k] = _merge_list(out.get(k), v, orders[k])
        else:
            out[k] = strategic_merge(out.get(k), v)
    for k, order in orders.items():
        if k not in patch and isinstance(out.get(k), list):
            out[k] = _merge_list(out[k], [], order)
    for k, vals in dels.items():
        if isinstance(out.get(k), list):
            out[k] = [x for x in out[k] if x not in vals]
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
                    raise PatchError(422, "Invalid", "the path %s does not exist" % op["path"])
                parent[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                parent.pop(last)
        elif op["op"] == "test":
            cur = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if cur != op["value"]:
                raise PatchError(422, "Invalid", "test operation failed at %s" % op["path"])
        else:
            raise PatchError(415, "UnsupportedMediaType", "json-patch op %s" % op["op"])
    return doc
