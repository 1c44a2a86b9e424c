#!/usr/bin/env python3
"""gateway_ir.py PORT KEYS N [CONNS] - sends N small completion requests to
a gateway over CONNS keep-alive connections (default 8), one at a time,
rotating the Bearer key over KEYS (comma-separated) request by request, as
bench/wrk_keys.lua does. For counting instructions per request under
callgrind (bench/gateway_ir.sh), where wrk's rate does not matter. Prints
the status codes seen."""
import socket, sys
from collections import Counter

port, keys, n = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3])
nconn = int(sys.argv[4]) if len(sys.argv) > 4 else 8
body = b'{"prompt":"hello","max_tokens":1}'
reqs = [b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
        k.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
        str(len(body)).encode() + b"\r\n\r\n" + body for k in keys]
conns = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(nconn)]
bufs = [b""] * nconn
seen = Counter()

def read_response(i):
    s, buf = conns[i], bufs[i]
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise SystemExit("connection closed")
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for l in lines[1:]:
        k, _, v = l.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    while len(rest) < length:
        d = s.recv(65536)
        if not d:
            raise SystemExit("connection closed in a body")
        rest += d
    bufs[i] = rest[length:]
    return status

for j in range(n):
    i = j % nconn
    conns[i].sendall(reqs[j % len(reqs)])
    seen[read_response(i)] += 1
print(" ".join("%d:%d" % kv for kv in sorted(seen.items())))
