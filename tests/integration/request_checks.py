#!/usr/bin/env python3
"""request_checks.py - helpers of test_request_checks.sh.

  request_checks.py echo PORTFILE
      an upstream that answers every request, whatever its method, with
      200 and a JSON body naming what it received: the method, the request
      target exactly as it came, every header in order (name, value) and
      the body's length. The test reads what tenantd forwarded from it.
  request_checks.py req PORT METHOD TARGET [HEADER...]
      sends "METHOD TARGET HTTP/1.1" with Host, the headers given (raw
      "Name: value"), Connection: close and, for POST/PUT, a small body;
      prints "status N", each response header as "resp Name: value", and
      from an echo body "target T" and each forwarded header as
      "fwd Name: value".
  request_checks.py crit PORT SHED_KEY CRIT_KEY PATH N_SHED N_CRIT
      N_SHED requests of SHED_KEY, each claiming X-Criticality:
      critical_plus, all at once; once they fill the route's capacity and
      queue, N_CRIT requests of CRIT_KEY (no header: its tenant's class);
      prints "shed_key: served S shed X other O" and the same for crit_key.
"""
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        out = json.dumps({
            "method": self.command,
            "target": self.path,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": len(body),
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(out)

    def __getattr__(self, name):
        # do_GET, do_POST, do_TRACE, do_FOO...: every method is echoed
        if name.startswith("do_"):
            return self.answer
        raise AttributeError(name)


def echo(portfile):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    srv.daemon_threads = True
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(portfile + ".tmp", portfile)
    srv.serve_forever()


def exchange(port, data, timeout=10.0, shut=True):
    """The response to data on a new connection, read until the server
    closes. shut: half-close after sending (tenantd then ends the request
    on the client's EOF, as a proxy must, so only for requests refused at
    once)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        buf = b""
        while True:
            try:
                got = s.recv(65536)
            except socket.timeout:
                break
            if not got:
                break
            buf += got
        return buf
    finally:
        s.close()


def status_of(resp):
    try:
        return int(resp.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return 0


def crit(port, shed_key, crit_key, path, n_shed, n_crit):
    port, n_shed, n_crit = int(port), int(n_shed), int(n_crit)
    body = b'{"messages":[{"role":"user","content":"c"}],"max_tokens":10}'
    results = {"shed": [], "crit": []}
    lock = threading.Lock()

    def one(kind, key, extra):
        req = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
               key.encode() + b"\r\nContent-Type: application/json\r\n" + extra +
               b"Connection: close\r\nContent-Length: " + str(len(body)).encode() +
               b"\r\n\r\n" + body)
        try:
            st = status_of(exchange(port, req, timeout=60, shut=False))
        except OSError as e:
            sys.stderr.write("%s request: %r\n" % (kind, e))
            st = 0  # counted as "other": the check wants none
        with lock:
            results[kind].append(st)

    ts = [threading.Thread(target=one, args=("shed", shed_key, b"X-Criticality: critical_plus\r\n"))
          for _ in range(n_shed)]
    for t in ts:
        t.start()
    # the claimed critical_plus requests fill the capacity and the queue
    # (the rest are shed at once) before the critical tenant comes
    deadline = time.time() + 10
    while time.time() < deadline:
        with lock:
            done = len(results["shed"])
        if done >= n_shed // 2:
            break
        time.sleep(0.05)
    time.sleep(0.3)
    tc = [threading.Thread(target=one, args=("crit", crit_key, b"")) for _ in range(n_crit)]
    for t in tc:
        t.start()
    for t in ts + tc:
        t.join()
    for kind, key in (("shed", shed_key), ("crit", crit_key)):
        r = results[kind]
        served, shed = r.count(200), r.count(503)
        other = sorted(set(x for x in r if x not in (200, 503)))
        print("%s: served %d shed %d other %d%s" % (key, served, shed, len(r) - served - shed,
                                                   " (%s)" % other if other else ""))


def req(port, method, target, *headers):
    body = b'{"input":"x"}' if method in ("POST", "PUT", "PATCH") else b""
    head = "%s %s HTTP/1.1\r\nHost: gw.test\r\n" % (method, target)
    for h in headers:
        head += h + "\r\n"
    head += "Connection: close\r\n"
    if body:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    resp = exchange(int(port), head.encode("latin1") + b"\r\n" + body, shut=False)
    hd, _, rb = resp.partition(b"\r\n\r\n")
    lines = hd.decode("latin1").split("\r\n")
    print("status %d" % status_of(resp))
    for line in lines[1:]:
        print("resp " + line)
    try:
        j = json.loads(rb)
    except ValueError:
        print("body " + rb.decode("latin1"))
        return
    if "target" in j:
        print("target " + j["target"])
        print("method " + j["method"])
        for k, v in j["headers"]:
            print("fwd %s: %s" % (k, v))
    else:
        print("body " + rb.decode("latin1"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    {"echo": echo, "crit": crit, "req": req}[cmd](*sys.argv[2:])
