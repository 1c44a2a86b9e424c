#!/usr/bin/env python3
"""wire_compare.py OLD_PORT NEW_PORT - sends the same raw request sequences
(proxied, repeated and alternating keys on one connection, 401, 429, 502,
413, 431, 400, 405, pipelined, HTTP/1.0, chunked, bad headers, close) to two
gateways and compares the response bytes, with Date, Retry-After,
retry_after_ms and simmodel's id/created normalised. Both tenantds need the
same config: tenants team-a/b/c (key-a/b/c, high limits), abuser (key-z,
rate 2 per 1h, burst 2), Route /dead/ to 127.0.0.1:1, Route / to a simmodel
of their own (so simmodel's ids match). Exit 1 if any case differs."""
import re, socket, sys, time
def raw(port, reqs, wait=0.3):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    out = b""
    for r in reqs:
        s.sendall(r)
        time.sleep(0.05)
    s.settimeout(wait)
    try:
        while True:
            d = s.recv(65536)
            if not d: break
            out += d
    except socket.timeout:
        pass
    s.close()
    return out
def norm(b):
    b = re.sub(rb"Date: [^\r]*", b"Date: X", b)
    b = re.sub(rb'"created":\d+', b'"created":X', b)
    b = re.sub(rb'"id":"cmpl-\d+"', b'"id":"cmpl-X"', b)
    b = re.sub(rb'"retry_after_ms":\d+', b'"retry_after_ms":X', b)
    b = re.sub(rb"Retry-After: \d+", b"Retry-After: X", b)
    b = re.sub(rb"retry-after-ms: \d+", b"retry-after-ms: X", b)
    b = re.sub(rb"retry after \d+ ms", b"retry after X ms", b)
    return b
body = b'{"prompt":"hello","max_tokens":1}'
def post(key, path=b"/v1/completions", extra=b"", b=body):
    h = b"POST " + path + b" HTTP/1.1\r\nHost: x\r\n"
    if key is not None: h += b"Authorization: Bearer " + key + b"\r\n"
    return h + b"Content-Type: application/json\r\n" + extra + b"Content-Length: " + str(len(b)).encode() + b"\r\n\r\n" + b
cases = {
 "proxied": [post(b"key-a")],
 "proxied x3 same key": [post(b"key-a")] * 3,
 "alternating keys": [post(b"key-a"), post(b"key-b"), post(b"key-a"), post(b"key-c")],
 "401": [post(b"nope")],
 "401 then ok on one conn": [post(b"nope"), post(b"key-a"), post(b"key-a ")],
 "no auth": [post(None)],
 "429 abuser": [post(b"key-z")] * 5,
 "502 dead upstream": [post(b"key-a", b"/dead/x")],
 "413": [post(b"key-a", b=b"x" * (2 << 20))],
 "431": [b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-A: " + b"y" * 70000 + b"\r\n\r\n"],
 "400 garbage": [b"GARBAGE\r\n\r\n"],
 "405 connect": [b"CONNECT x:443 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-a\r\n\r\n"],
 "pipelined": [post(b"key-a") + post(b"key-b") + post(b"key-z")],
 "http/1.0": [b"POST /v1/completions HTTP/1.0\r\nAuthorization: Bearer key-a\r\nContent-Length: 33\r\n\r\n" + body],
 "GET": [b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-a\r\n\r\n"],
 "chunked": [b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-a\r\nTransfer-Encoding: chunked\r\n\r\n21\r\n" + body + b"\r\n0\r\n\r\n"],
 "bad criticality": [post(b"key-a", extra=b"X-Criticality: bogus\r\n")],
 "bad timeout": [post(b"key-a", extra=b"X-Request-Timeout-Ms: -1\r\n")],
 "conn close": [post(b"key-a", extra=b"Connection: close\r\n")],
}
old, new = int(sys.argv[1]), int(sys.argv[2])
# exhaust the abuser's burst on both first
for p in (old, new):
    raw(p, [post(b"key-z")] * 20)
same = diff = 0
for name, reqs in cases.items():
    a, b = norm(raw(old, reqs)), norm(raw(new, reqs))
    if a == b and a:
        same += 1
    else:
        diff += 1
        print("DIFF", name, "\n old:", a[:400], "\n new:", b[:400])
print("%d cases identical, %d differ" % (same, diff))
sys.exit(1 if diff else 0)
