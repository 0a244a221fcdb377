#!/usr/bin/python3
"""imds-conn.py USER_DATA_FILE: one connection to a stand-in for EC2's instance metadata service,
on stdin and stdout (QEMU's guestfwd runs it for each connection the VM opens to
169.254.169.254:80; smoke.sh --user-data). IMDSv2 only: PUT /latest/api/token with the TTL
header gives a token; GET /latest/user-data with it gives the file; without it, 401; other
paths 404. Keep-alive: answers requests until the VM closes the connection."""
import sys

TOKEN = b"smoke-token-0123456789"


def answer(out, status, body=b""):
    reason = {200: b"OK", 400: b"Bad Request", 401: b"Unauthorized", 404: b"Not Found",
              405: b"Method Not Allowed"}[status]
    out.write(b"HTTP/1.1 %d %s\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n\r\n"
              % (status, reason, len(body)) + body)
    out.flush()


def main():
    user_data = open(sys.argv[1], "rb").read()
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = inp.readline(8192)
        if not line:
            return
        if not line.strip():
            continue
        method, path = line.split()[:2]
        headers = {}
        while True:
            h = inp.readline(8192)
            if not h or h in (b"\r\n", b"\n"):
                break
            k, _, v = h.partition(b":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get(b"content-length", b"0"))
        if n:
            inp.read(min(n, 65536))
        if path == b"/latest/api/token":
            if method != b"PUT":
                answer(out, 405)
            elif b"x-aws-ec2-metadata-token-ttl-seconds" not in headers:
                answer(out, 400)
            else:
                answer(out, 200, TOKEN)
        elif headers.get(b"x-aws-ec2-metadata-token") != TOKEN:
            answer(out, 401)
        elif method == b"GET" and path == b"/latest/user-data":
            answer(out, 200, user_data)
        else:
            answer(out, 404)


main()
