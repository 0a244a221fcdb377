#!/usr/bin/python3
"""Compares kiyot's EC2 request signatures with botocore's SigV4 signer.

Runs an HTTP server on 127.0.0.1 that plays EC2 for the probe (test/ec2sign/probe.c). For every
request it rebuilds the same request (method, URL, the headers the client signed, body) as a
botocore AWSRequest, signs it with botocore.auth.SigV4Auth at the X-Amz-Date the client sent
(botocore's clock is pinned to it), and compares the Authorization headers. A mismatch is
answered with EC2's AuthFailure, so the probe fails too. It also checks that X-Amz-Date is sent
once, that the signature covers host and x-amz-date (and the session token when there is one),
that a wrong secret would have been caught, and that the form body decodes to what the probe
meant to send.

    check.py <probe binary>      prints "ec2sign: N passed, N failed", exits 1 on any failure
"""
import base64
import datetime
import http.server
import os
import subprocess
import sys
import threading
import types
import urllib.parse

import botocore.auth
import botocore.awsrequest
import botocore.credentials

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "ec2")

USER_DATA = ('#!/bin/sh\n{"cell": "caf\u00e9 \\u00e9", '
             '"args": ["a b", "x=1&y=2", "~/+*%"]}\n').encode()
NOTE_TAG = "caf\u00e9 a+b=c&d/e~f*g"

RUNS = [
    # (region, access key, secret, session token)
    ("us-east-1", "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None),
    ("eu-west-3", "ASIAEXAMPLE2", "s3cr3t/with+odd=chars", "FwoGZXIvYXdzEJr//////////token+/="),
]

_sign_lock = threading.Lock()


def fixture(name):
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return f.read()


ANSWERS = {
    "DescribeInstances": fixture("describe_instances_empty.xml"),
    "RunInstances": fixture("run_instances.xml"),
    "TerminateInstances": fixture("ok_terminate_two.xml"),  # both ids the probe ends
    "CreateTags": b'<?xml version="1.0" encoding="UTF-8"?>\n<CreateTagsResponse '
                  b'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>1</requestId>'
                  b'<return>true</return></CreateTagsResponse>',
    "DescribeSpotPriceHistory": b'<?xml version="1.0" encoding="UTF-8"?>\n'
                                b'<DescribeSpotPriceHistoryResponse '
                                b'xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                                b'<requestId>1</requestId><spotPriceHistorySet/>'
                                b'</DescribeSpotPriceHistoryResponse>',
}


def botocore_authorization(method, url, headers, body, amz_date, region, key, secret, token):
    """The Authorization header botocore computes for this request at amz_date."""
    fixed = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")

    class PinnedDatetime(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return fixed

    req = botocore.awsrequest.AWSRequest(method=method, url=url, data=body, headers=headers)
    creds = botocore.credentials.Credentials(key, secret, token)
    with _sign_lock:
        saved = botocore.auth.datetime
        botocore.auth.datetime = types.SimpleNamespace(datetime=PinnedDatetime)
        try:
            botocore.auth.SigV4Auth(creds, "ec2", region).add_auth(req)
        finally:
            botocore.auth.datetime = saved
    return req.headers["Authorization"]


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.lock = threading.Lock()

    def check(self, ok, what):
        with self.lock:
            if ok:
                self.passed += 1
            else:
                self.failed += 1
                print("ec2sign: FAIL: " + what, file=sys.stderr)
        return ok


RESULTS = Results()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    run = None  # (region, key, secret, token) of the probe being served

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "text/xml;charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def auth_failure(self, why):
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
                '<Code>AuthFailure</Code><Message>%s</Message></Error></Errors>'
                '<RequestID>0</RequestID></Response>' % why).encode()
        self.answer(401, body)

    def do_POST(self):
        region, key, secret, token = Handler.run
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        form = urllib.parse.parse_qs(body.decode(), keep_blank_values=True, strict_parsing=True)
        action = form.get("Action", ["?"])[0]
        what = "%s %s" % (region, action)
        dates = self.headers.get_all("X-Amz-Date") or []
        auth = self.headers.get_all("Authorization") or []
        if not RESULTS.check(len(dates) == 1 and len(auth) == 1,
                             "%s: %d X-Amz-Date and %d Authorization headers"
                             % (what, len(dates), len(auth))):
            return self.auth_failure("bad headers")
        try:
            scheme, rest = auth[0].split(" ", 1)
            parts = dict(p.strip().split("=", 1) for p in rest.split(","))
            signed = parts["SignedHeaders"].split(";")
        except (ValueError, KeyError):
            RESULTS.check(False, "%s: unparsable Authorization %r" % (what, auth[0]))
            return self.auth_failure("unparsable")
        needed = {"host", "x-amz-date"} | ({"x-amz-security-token"} if token else set())
        RESULTS.check(scheme == "AWS4-HMAC-SHA256" and needed <= set(signed),
                      "%s: signed headers %s lack %s" % (what, signed, needed - set(signed)))
        RESULTS.check(parts["Credential"] == "%s/%s/%s/ec2/aws4_request"
                      % (key, dates[0][:8], region),
                      "%s: credential scope %s" % (what, parts["Credential"]))
        headers = {}
        for name in signed:
            values = self.headers.get_all(name) or []
            if len(values) != 1:
                RESULTS.check(False, "%s: signed header %s sent %d times"
                              % (what, name, len(values)))
                return self.auth_failure("signed header count")
            headers[name] = values[0]
        url = "http://%s%s" % (self.headers["Host"], self.path)
        ours = botocore_authorization("POST", url, headers, body, dates[0], region, key, secret,
                                      token)
        wrong = botocore_authorization("POST", url, headers, body, dates[0], region, key,
                                       secret + "x", token)
        RESULTS.check(wrong != auth[0], "%s: a wrong secret gives the same signature" % what)
        if not RESULTS.check(ours == auth[0], "%s: signature differs\n  client:   %s\n"
                             "  botocore: %s" % (what, auth[0], ours)):
            return self.auth_failure("The request signature we calculated does not match")
        self.check_form(what, action, form)
        if action not in ANSWERS:
            return self.auth_failure("unexpected action " + action)
        self.answer(200, ANSWERS[action])

    def check_form(self, what, action, form):
        """The body decodes to what the probe meant to send."""
        RESULTS.check(form.get("Version") == ["2016-11-15"], what + ": Version")
        if action == "RunInstances":
            ud = base64.b64decode(form.get("UserData", [""])[0])
            RESULTS.check(ud == USER_DATA, "%s: UserData decodes to %r" % (what, ud))
        if action == "DescribeInstances":
            RESULTS.check(form.get("Filter.1.Value.1") == ["c-1234 +/=&~"],
                          "%s: filter value %r" % (what, form.get("Filter.1.Value.1")))
        if action == "CreateTags":
            notes = [form["Tag.%s.Value" % k.split(".")[1]][0]
                     for k, v in form.items() if k.endswith(".Key") and v == ["note"]]
            RESULTS.check(notes == [NOTE_TAG], "%s: note tag %r" % (what, notes))


def main():
    if len(sys.argv) != 2:
        print("usage: check.py <probe binary>", file=sys.stderr)
        return 2
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = "http://127.0.0.1:%d/" % server.server_address[1]
    for run in RUNS:
        Handler.run = run
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=run[1], AWS_SECRET_ACCESS_KEY=run[2])
        if run[3]:
            env["AWS_SESSION_TOKEN"] = run[3]
        proc = subprocess.run([sys.argv[1], endpoint, run[0]], env=env, timeout=60)
        RESULTS.check(proc.returncode == 0, "probe in %s exited %d" % (run[0], proc.returncode))
    server.shutdown()
    print("ec2sign: %d passed, %d failed" % (RESULTS.passed, RESULTS.failed))
    return 1 if RESULTS.failed or not RESULTS.passed else 0


if __name__ == "__main__":
    sys.exit(main())
