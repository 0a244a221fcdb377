"""Rendering of EC2 XML answers from plain Python values.

A response body is a dict; its keys are element names in order. Dict values become nested
elements, lists become "sets" whose members are <item> elements, booleans become true/false,
None omits the element.
"""

import datetime
from xml.sax.saxutils import escape

from . import XML_NAMESPACE


def _scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = format(value, "f").rstrip("0").rstrip(".")
        return text or "0"
    return escape(str(value))


def _emit(out, name, value):
    if value is None:
        return
    if isinstance(value, dict):
        out.append(f"<{name}>")
        for key, child in value.items():
            _emit(out, key, child)
        out.append(f"</{name}>")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append(f"<{name}/>")
            return
        out.append(f"<{name}>")
        for child in value:
            _emit(out, "item", child)
        out.append(f"</{name}>")
    else:
        out.append(f"<{name}>{_scalar(value)}</{name}>")


def response(action, body, request_id):
    """The XML document answering a successful call of action."""
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n',
           f'<{action}Response xmlns="{XML_NAMESPACE}">',
           f"<requestId>{escape(request_id)}</requestId>"]
    for key, value in body.items():
        _emit(out, key, value)
    out.append(f"</{action}Response>")
    return "".join(out).encode("utf-8")


def error(code, message, request_id):
    """The XML document of an EC2 error (Response/Errors/Error and RequestID)."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Response><Errors><Error><Code>{escape(code)}</Code>"
            f"<Message>{escape(message)}</Message></Error></Errors>"
            f"<RequestID>{escape(request_id)}</RequestID></Response>").encode("utf-8")


def timestamp(epoch):
    """EC2's timestamp format: ISO 8601 in UTC with milliseconds."""
    when = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
