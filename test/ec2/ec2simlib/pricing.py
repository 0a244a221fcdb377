"""The AWS Price List Query API's GetProducts, for the catalog's instance types.

Requests are AWS's JSON 1.1 protocol on the same port as EC2's Query API: a POST of a JSON
body to "/" with X-Amz-Target: AWSPriceListService.<Operation>, signed with SigV4 for the
service "pricing" in us-east-1 (the Price List's home region, whatever region the sim serves).
GetProducts answers for ServiceCode AmazonEC2: one product a catalog type of the served region,
with the attributes kiyot filters on (regionCode, operatingSystem Linux, tenancy Shared,
preInstalledSw NA, capacitystatus Used, instanceType, ...) and one on-demand term whose "Hrs"
dimension is priced at the catalog's on-demand price x PRICE_FACTOR (so a price read from here
is told apart from the shipped one), unless POST /_admin/prices set the type's price. Filters
are TERM_MATCH on those attributes; pages hold at most --pricing-page-size products (and
MaxResults), with an opaque NextToken. Parameters are checked against botocore's pricing model;
the describe token bucket, forced throttling (ThrottlingException) and fault rules for the
action GetProducts apply as to EC2's actions, their errors in the JSON protocol's shape.
"""

import base64
import hashlib
import json
import threading
import uuid

import botocore.session
from botocore.validate import ParamValidator

from .errors import Ec2Error
from .sigv4 import Verifier

TARGET_PREFIX = "AWSPriceListService."
SIGNING_REGION = "us-east-1"
SERVICE = "pricing"
PRICE_FACTOR = 1.1
CONTENT_TYPE = "application/x-amz-json-1.1"
_NAMESPACE = "com.amazonaws.awspricelistservice#"
_LOCATIONS = {"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)",
              "us-west-2": "US West (Oregon)", "eu-west-1": "EU (Ireland)",
              "eu-central-1": "EU (Frankfurt)", "ap-south-1": "Asia Pacific (Mumbai)"}
# the JSON protocol's statuses of the codes the sim answers (others: 400)
_STATUS = {"InternalErrorException": 500, "ServiceUnavailableException": 503,
           "InvalidSignatureException": 403, "AccessDeniedException": 400}


class PricingError(Exception):
    def __init__(self, code, message, status=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status or _STATUS.get(code, 400)


def _error_body(code, message):
    return json.dumps({"__type": _NAMESPACE + code, "Message": message}).encode()


class PriceList:
    """GetProducts over the sim's catalog."""

    def __init__(self, sim):
        self.sim = sim
        self.page_size = sim.cfg.pricing_page_size
        self.verifier = Verifier(sim.cfg.keys, SIGNING_REGION, sim.cfg.max_skew,
                                 service=SERVICE)
        self._lock = threading.Lock()
        self._prices = {}  # instance type -> price set by the admin API
        model = botocore.session.get_session().get_service_model(SERVICE)
        self._input = model.operation_model("GetProducts").input_shape
        self._validator = ParamValidator()

    def set_prices(self, prices):
        """Set (a number) or clear (None) the price of types; returns every price set."""
        with self._lock:
            for name, price in prices.items():
                if price is None:
                    self._prices.pop(name, None)
                else:
                    self._prices[name] = float(price)
            return dict(self._prices)

    def price(self, name):
        """The on-demand USD price an hour GetProducts gives a type."""
        with self._lock:
            if name in self._prices:
                return self._prices[name]
        return round(float(self.sim.catalog.get(name)["price"]) * PRICE_FACTOR, 6)

    def _attributes(self, name):
        e = self.sim.catalog.get(name)
        region = self.sim.cfg.region
        return {"instanceType": name, "instanceFamily": "General purpose",
                "regionCode": region, "location": _LOCATIONS.get(region, region),
                "locationType": "AWS Region", "servicecode": "AmazonEC2",
                "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
                "capacitystatus": "Used", "licenseModel": "No License required",
                "vcpu": str(int(e["cpu"])), "memory": f"{float(e['memory']):g} GiB",
                "currentGeneration": "Yes" if e.get("generation", "current") == "current"
                else "No",
                "processorArchitecture": "64-bit",
                "usagetype": f"BoxUsage:{name}", "operation": "RunInstances"}

    def _product(self, name, attrs):
        sku = hashlib.sha1(f"{self.sim.cfg.region}/{name}".encode()).hexdigest()[:16].upper()
        term, dim = f"{sku}.JRTCKXETXF", f"{sku}.JRTCKXETXF.6YS6EN2CT7"
        price = self.price(name)
        doc = {"product": {"productFamily": "Compute Instance", "attributes": attrs,
                           "sku": sku},
               "serviceCode": "AmazonEC2",
               "terms": {"OnDemand": {term: {
                   "priceDimensions": {dim: {
                       "unit": "Hrs", "endRange": "Inf", "beginRange": "0",
                       "description": f"${price:.4f} per On Demand Linux {name} Instance Hour",
                       "appliesTo": [], "rateCode": dim,
                       "pricePerUnit": {"USD": f"{price:.10f}"}}},
                   "sku": sku, "effectiveDate": "2026-11-01T00:00:00Z",
                   "offerTermCode": "JRTCKXETXF", "termAttributes": {}}}},
               "version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z"}
        return json.dumps(doc, separators=(",", ":"))

    def _matching(self, filters):
        """The catalog's types whose attributes match every TERM_MATCH filter, in name order."""
        out = []
        for name in self.sim.catalog.names():
            attrs = self._attributes(name)
            if all(attrs.get(f["Field"]) == f["Value"] for f in filters):
                out.append((name, attrs))
        return out

    def _get_products(self, params):
        report = self._validator.validate(params, self._input)
        if report.has_errors():
            raise PricingError("InvalidParameterException",
                               "Input parameters are invalid. " + report.generate_report())
        if params.get("FormatVersion", "aws_v1") != "aws_v1":
            raise PricingError("InvalidParameterException",
                               f"FormatVersion {params['FormatVersion']} is not supported; "
                               "use aws_v1.")
        if params["ServiceCode"] != "AmazonEC2":
            raise PricingError("NotFoundException",
                               f"ec2sim serves the Price List of AmazonEC2 only, not "
                               f"{params['ServiceCode']}.")
        filters = params.get("Filters", [])
        query = hashlib.sha256(json.dumps([params["ServiceCode"], filters],
                                          sort_keys=True).encode()).hexdigest()[:16]
        offset = 0
        if "NextToken" in params:
            try:
                tok = json.loads(base64.urlsafe_b64decode(params["NextToken"].encode()))
                offset, tok_query = int(tok["o"]), tok["q"]
            except (ValueError, KeyError, TypeError) as e:
                raise PricingError("InvalidNextTokenException",
                                   "The pagination token is invalid. Try again without a "
                                   "pagination token.") from e
            if tok_query != query or offset < 0:
                raise PricingError("InvalidNextTokenException",
                                   "The pagination token is for another query. Try again "
                                   "without a pagination token.")
        products = self._matching(filters)
        size = min(int(params.get("MaxResults", 100)), self.page_size)
        page = products[offset:offset + size]
        out = {"FormatVersion": "aws_v1",
               "PriceList": [self._product(name, attrs) for name, attrs in page]}
        if offset + size < len(products):
            out["NextToken"] = base64.urlsafe_b64encode(json.dumps(
                {"o": offset + size, "q": query}).encode()).decode()
        return out

    def call(self, host_url, path, headers, body):
        """Serve one Price List request: (HTTP status, JSON body, request id)."""
        request_id = str(uuid.uuid4())
        target = dict((n.lower(), v) for n, v in headers).get("x-amz-target", "")
        operation = target[len(TARGET_PREFIX):]
        try:
            try:
                self.verifier.verify("POST", host_url, path, headers, body)
            except Ec2Error as e:
                if "unknown access key" in e.message:
                    raise PricingError("UnrecognizedClientException",
                                       "The security token included in the request is "
                                       "invalid.") from e
                raise PricingError("InvalidSignatureException", e.message) from e
            if operation != "GetProducts":
                raise PricingError("UnknownOperationException",
                                   f"ec2sim serves GetProducts of the Price List, not "
                                   f"{operation or '(no operation)'}.")
            if not self.sim.throttler.admit(operation):
                raise PricingError("ThrottlingException", "Rate exceeded")
            try:
                params = json.loads(body or b"{}")
            except ValueError as e:
                raise PricingError("SerializationException",
                                   f"The request body is not JSON: {e}") from e
            if not isinstance(params, dict):
                raise PricingError("SerializationException", "The request body must be a "
                                   "JSON object.")
            try:
                self.sim.faults.check(operation)
            except Ec2Error as e:
                raise PricingError(e.code, e.message,
                                   e.status if e.code not in _STATUS else None) from e
            out = self._get_products(params)
            self.sim.stats.record(operation or "?", None)
            return 200, json.dumps(out).encode(), request_id
        except PricingError as e:
            self.sim.stats.record(operation or "?", e.code)
            if self.sim.cfg.verbose:
                self.sim.log(f"{operation} {e.status} {e.code}: {e.message}")
            return e.status, _error_body(e.code, e.message), request_id
