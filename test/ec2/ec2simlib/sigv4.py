"""Verification of AWS Signature Version 4 on incoming requests.

The expected signature is recomputed with botocore's signer (the reference implementation the
clients use) over the headers the client says it signed, at the client's X-Amz-Date, and
compared with the one in the Authorization header.
"""

import datetime
import hashlib
import hmac
import re
from urllib.parse import unquote

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

from .errors import Ec2Error

SERVICE = "ec2"
_AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256\s+Credential=(?P<cred>[^,\s]+)\s*,\s*"
                      r"SignedHeaders=(?P<signed>[^,\s]+)\s*,\s*"
                      r"Signature=(?P<sig>[0-9a-f]{64})\s*$")
_DATE_FORMAT = "%Y%m%dT%H%M%SZ"


class _ClientHeaderSigner(SigV4Auth):
    """botocore's SigV4 signer restricted to the header set named by the client."""

    def __init__(self, credentials, region, headers, query_pairs, service=SERVICE):
        super().__init__(credentials, service, region)
        self._client_headers = headers
        self._query_pairs = query_pairs

    def headers_to_sign(self, request):
        return self._client_headers

    def canonical_query_string(self, request):
        # Decoded pairs, re-encoded by botocore the way SigV4 prescribes, so clients that
        # send "tag:x" or "%3A" in a query string are judged alike.
        return self._canonical_query_string_params(self._query_pairs)


def _fail(message):
    raise Ec2Error("AuthFailure", message)


class Verifier:
    """Checks requests against a table of access key -> (secret key, session token or None)."""

    def __init__(self, keys, region, max_skew, service=SERVICE):
        self.keys = dict(keys)
        self.region = region
        self.max_skew = max_skew
        self.service = service

    def verify(self, method, host_url, path, headers, body, now=None):
        """Raise Ec2Error unless the request carries a valid signature; return the access key.

        headers is a list of (name, value) pairs as received; path is the raw request target
        (path and query); host_url is "http://host:port" as the client addressed it.
        """
        auth = [v for n, v in headers if n.lower() == "authorization"]
        if not auth:
            _fail("AWS was not able to validate the provided access credentials: the request "
                  "has no Authorization header (sign it with SigV4).")
        m = _AUTH_RE.match(auth[0].strip())
        if not m:
            _fail("The Authorization header is not a well-formed AWS4-HMAC-SHA256 "
                  "authorization.")
        parts = m.group("cred").split("/")
        if len(parts) != 5:
            _fail("The Credential in the Authorization header must be "
                  "KEY/DATE/REGION/SERVICE/aws4_request.")
        access_key, scope_date, scope_region, scope_service, terminator = parts
        if access_key not in self.keys:
            _fail("AWS was not able to validate the provided access credentials "
                  f"(unknown access key {access_key}).")
        if scope_region != self.region or scope_service != self.service or \
                terminator != "aws4_request":
            _fail(f"Credential should be scoped to region '{self.region}' and service "
                  f"'{self.service}', not '{scope_region}'/'{scope_service}'.")
        amz_dates = [v for n, v in headers if n.lower() == "x-amz-date"]
        if not amz_dates:
            _fail("The request must carry an X-Amz-Date header.")
        amz_date = amz_dates[0].strip()
        try:
            when = datetime.datetime.strptime(amz_date, _DATE_FORMAT)
        except ValueError:
            _fail(f"X-Amz-Date '{amz_date}' is not in the form YYYYMMDDTHHMMSSZ.")
        if scope_date != amz_date[:8]:
            _fail("The Credential scope date does not match X-Amz-Date.")
        if self.max_skew > 0:
            now = now if now is not None else datetime.datetime.utcnow()
            if abs((now - when).total_seconds()) > self.max_skew:
                raise Ec2Error("RequestExpired",
                               f"Request has expired: X-Amz-Date {amz_date} is more than "
                               f"{self.max_skew} s away from the server's clock.")

        signed_names = m.group("signed").split(";")
        if "host" not in signed_names:
            _fail("The host header must be signed.")
        secret, token = self.keys[access_key]
        if token is not None:
            sent = [v for n, v in headers if n.lower() == "x-amz-security-token"]
            if sent != [token] or "x-amz-security-token" not in signed_names:
                _fail("The security token included in the request is invalid.")
        to_sign = HTTPHeaders()
        for name in signed_names:
            values = [v for n, v in headers if n.lower() == name]
            if not values:
                _fail(f"Signed header '{name}' is missing from the request.")
            for value in values:
                to_sign[name] = value
        for name, value in headers:
            if name.lower() == "x-amz-content-sha256" and value != "UNSIGNED-PAYLOAD" and \
                    value != hashlib.sha256(body).hexdigest():
                _fail("X-Amz-Content-SHA256 does not match the request body.")

        raw_path, _, raw_query = path.partition("?")
        pairs = []
        for pair in raw_query.split("&") if raw_query else []:
            key, _, value = pair.partition("=")
            pairs.append((unquote(key), unquote(value)))
        request = AWSRequest(method=method, url=host_url + raw_path, data=body)
        for name, value in headers:
            if name.lower() == "x-amz-content-sha256":
                request.headers[name] = value
        request.context["timestamp"] = amz_date
        signer = _ClientHeaderSigner(Credentials(access_key, secret, token), self.region,
                                     to_sign, pairs, self.service)
        canonical = signer.canonical_request(request)
        expected = signer.signature(signer.string_to_sign(request, canonical), request)
        if not hmac.compare_digest(expected, m.group("sig")):
            _fail("AWS was not able to validate the provided access credentials: the "
                  "signature does not match (check the secret key and the region).")
        return access_key
