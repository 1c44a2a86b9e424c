#!/usr/bin/env python3
"""hostile.py - hostile clients and a hostile upstream for test_hostile.sh.

  hostile.py upstream PORTFILE
      an upstream that misbehaves by path: /bad/reset closes the connection
      without a word, /bad/hang reads the request and says nothing,
      /bad/garbage answers bytes that are not HTTP.
  hostile.py flood ADMIN_PORT DATA_PORT PID KEY N
      N generated malformed requests (half per listener, several threads),
      a well-formed request after every few dozen that must still be served,
      slowloris clients that must get 408, and tenantd's VmRSS before and
      after; prints a table per case and exits 1 if any check failed.

Every case is generated from a seeded random source, so a failing run can
be replayed with the same seed (HOSTILE_SEED).
"""
import os
import random
import socket
import sys
import threading
import time


def upstream(portfile):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(256)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    hung = []

    def serve(c):
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                got = c.recv(65536)
                if not got:
                    c.close()
                    return
                data += got
            line = data.split(b"\r\n", 1)[0]
            if b"/bad/reset" in line:
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                c.close()
            elif b"/bad/hang" in line:
                hung.append(c)  # keep it open, say nothing
            else:
                c.sendall(b"\x00\x01garbage that is not HTTP\r\n\r\n\xff\xfe")
                c.close()
        except OSError:
            c.close()

    while True:
        c, _ = srv.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()


def vmrss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def exchange(port, data, timeout=5.0, shut=True):
    """Sends data on a new connection; returns the status of the first
    response, or 'closed' if the server closed without one, or 'timeout'."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server may answer and close before taking it all
        buf = b""
        while b"\r\n" not in buf:
            try:
                got = s.recv(4096)
            except socket.timeout:
                return "timeout"
            except OSError:
                break
            if not got:
                break
            buf += got
        if not buf.startswith(b"HTTP/1."):
            return "closed" if not buf else "junk"
        return buf.split(b" ", 2)[1].decode()
    finally:
        s.close()


def cases(rnd, listener, key):
    """(name, bytes, acceptable statuses) for one generated malformed request."""
    auth = ("Authorization: Bearer %s\r\n" % key) if listener == "data" else ""
    path = "/v1/chat/completions" if listener == "data" else "/v1/apply"
    kind = rnd.randrange(15)
    if kind == 0:
        junk = bytes(rnd.randrange(1, 256) for _ in range(rnd.randrange(1, 200)))
        if junk[:1].isalpha() or junk[:1] in (b"\r", b"\n"):  # a method, or blank lines (skipped)
            junk = b"\x01" + junk
        return "random bytes", junk + b"\r\n\r\n", {"400"}
    if kind == 1:
        line = rnd.choice(["GET  HTTP/1.1", "GET / HTTP/2.0", "G\x00T / HTTP/1.1",
                           "GET / HTTP/1.1 extra", "/ GET HTTP/1.1", "GET /\x7f HTTP/1.1"])
        return "bad request line", (line + "\r\nHost: x\r\n\r\n").encode("latin1"), {"400", "505"}
    if kind == 2:
        name = rnd.choice(["Bad Name", "X(y)", "Transfer-Encoding ", "\x01ctl", "{}"])
        return "bad header name", ("GET / HTTP/1.1\r\nHost: x\r\n%s: v\r\n\r\n" % name).encode("latin1"), {"400"}
    if kind == 3:
        big = "X-Big: " + "a" * rnd.randrange(70000, 90000) + "\r\n"
        return "huge header", ("GET / HTTP/1.1\r\nHost: x\r\n" + big + "\r\n").encode(), {"431"}
    if kind == 4:
        hs = "".join("X-H%d: v\r\n" % i for i in range(rnd.randrange(200, 400)))
        return "too many headers", ("GET / HTTP/1.1\r\nHost: x\r\n" + hs + "\r\n").encode(), {"431"}
    if kind == 5:
        n = rnd.randrange(5 << 20, 1 << 30)
        return "body too large", ("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" % (path, auth, n)).encode(), {"413"}
    if kind == 6:
        return "CL+TE smuggling", ("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\n\r\n" % (path, auth)).encode(), {"400"}
    if kind == 7:
        return "two Content-Lengths", ("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello!!" % (path, auth)).encode(), {"400"}
    if kind == 8:
        chunk = rnd.choice(["zz\r\nabc\r\n0\r\n\r\n", "5\r\nabc\r\n0\r\n\r\n", "-1\r\n\r\n",
                            "ffffffffffffffffff\r\n"])
        return "bad chunked body", ("POST %s HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: chunked\r\n\r\n%s" % (path, auth, chunk)).encode(), {"400", "413"}
    if kind == 9:
        cl = rnd.choice(["-1", "abc", "1e3", "0x10", " 12 12", "99999999999999999999999"])
        return "bad Content-Length", ("POST %s HTTP/1.1\r\nHost: x\r\n%sContent-Length: %s\r\n\r\n" % (path, auth, cl)).encode(), {"400", "413"}
    if kind == 10:
        return "TE not chunked", ("POST %s HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: gzip, identity\r\n\r\nabc" % (path, auth)).encode(), {"400", "501"}
    if kind == 11:
        ctl = rnd.choice(["\x00", "\x01", "\x7f", "\x1b", "\r"])
        return "control byte in value", ("GET / HTTP/1.1\r\nHost: x\r\nX-A: a%sb\r\n\r\n" % ctl).encode("latin1"), {"400"}
    if kind == 12:
        # lenient chunk framing: each is read otherwise
        # by a strict parser in front, so each must get 400 (a path with
        # nothing behind it: read leniently, it would get 404)
        chunk = rnd.choice(["f;a=b\n0123456789abcde\r\n0\r\n\r\n",   # bare LF after an extension
                            "5\nhello\r\n0\r\n\r\n",                   # bare LF ending a size line
                            "5\r\nhelloXY0\r\n\r\n",                    # no CRLF after the data
                            "5\r\nhello\n0\r\n\r\n",                   # bare LF after the data
                            "5\r\nhello\r\n0;a\n\r\n\r\n",             # bare LF in the last chunk
                            "5\r\nhello\r\n0\r\nX-T: 1\n\r\n",          # bare LF ending a trailer
                            "5\r\nhello\r\n0\r\n\n",                   # bare LF ending the trailers
                            "5;a=\"x\x01\"\r\nhello\r\n0\r\n\r\n"])   # control byte in an extension
        return "lenient chunk framing", ("POST /nothing HTTP/1.1\r\nHost: x\r\n%sTransfer-Encoding: chunked\r\n\r\n%s" % (auth, chunk)).encode("latin1"), {"400"}
    if kind == 13:
        te = rnd.choice(["chunked", "identity", "gzip, chunked"])
        return "TE on HTTP/1.0", ("POST /nothing HTTP/1.0\r\nHost: x\r\n%sTransfer-Encoding: %s\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % (auth, te)).encode(), {"400"}
    bad = ("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" if listener == "admin" else
           "GET /nothing HTTP/1.1\r\nHost: x\r\n%s\r\n" % auth)
    return "pipelined then garbage", (bad + "\x16\x03\x01 garbage\r\n\r\n").encode(), {"200", "404"}


def good(listener, port, key):
    if listener == "admin":
        return exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
    req = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
           % (key, len(body))).encode() + body
    return exchange(port, req, shut=False)


def slowloris(port, out, idx):
    """Starts a request and dribbles a header byte every second: 408."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    t0 = time.time()
    try:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        s.settimeout(1.0)
        buf = b""
        while time.time() - t0 < 25:
            try:
                got = s.recv(4096)
                if not got:
                    break
                buf += got
                if b"\r\n" in buf:
                    break
            except socket.timeout:
                try:
                    s.sendall(b"a")
                except OSError:
                    break
        status = buf.split(b" ", 2)[1].decode() if buf.startswith(b"HTTP/1.") else "closed"
        out[idx] = (status, time.time() - t0)
    finally:
        s.close()


def flood(admin_port, data_port, pid, key, n):
    seed = int(os.environ.get("HOSTILE_SEED", "20261202"))
    ports = {"admin": admin_port, "data": data_port}
    failures = []
    lock = threading.Lock()
    stats = {}  # (listener, case) -> {status: count}
    good_stats = {"admin": [0, 0], "data": [0, 0]}  # served, tried

    # warm up (allocators, upstream pool), then the baseline
    for _ in range(50):
        good("admin", admin_port, key)
        good("data", data_port, key)
    rss0 = vmrss_kib(pid)

    slow = [None] * 4
    slow_threads = [threading.Thread(target=slowloris, args=(ports["admin" if i % 2 == 0 else "data"], slow, i))
                    for i in range(4)]
    for t in slow_threads:
        t.start()

    def worker(w, count):
        rnd = random.Random(seed * 1000 + w)
        for i in range(count):
            listener = "admin" if i % 2 == 0 else "data"
            name, data, want = cases(rnd, listener, key)
            try:
                got = exchange(ports[listener], data)
            except OSError as e:
                got = "connect:" + e.__class__.__name__
            with lock:
                d = stats.setdefault((listener, name), {})
                d[got] = d.get(got, 0) + 1
                if got not in want and len(failures) < 20:
                    failures.append("%s %s: got %s, want %s; request %r" %
                                    (listener, name, got, "/".join(sorted(want)), data[:120]))
            if i % 25 == 0:
                g = good(listener, ports[listener], key)
                with lock:
                    good_stats[listener][1] += 1
                    if g == "200":
                        good_stats[listener][0] += 1
                    elif len(failures) < 20:
                        failures.append("%s: a well-formed request got %s amid the flood" % (listener, g))

    threads = 8
    t0 = time.time()
    ws = [threading.Thread(target=worker, args=(w, n // threads)) for w in range(threads)]
    for t in ws:
        t.start()
    for t in ws:
        t.join()
    elapsed = time.time() - t0

    # hostile upstream: each gets its status and the worker serves on
    upstream_cases = [("/bad/reset", {"502"}), ("/bad/hang", {"504"}), ("/bad/garbage", {"502"})]
    for path, want in upstream_cases:
        body = b'{"model":"m","prompt":"x","max_tokens":1}'
        req = ("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n"
               "Connection: close\r\n\r\n" % (path, key, len(body))).encode() + body
        for _ in range(3):
            got = exchange(data_port, req, timeout=10, shut=False)
            d = stats.setdefault(("data", "upstream " + path[5:]), {})
            d[got] = d.get(got, 0) + 1
            if got not in want:
                failures.append("upstream %s: got %s, want %s" % (path, got, "/".join(want)))
        if good("data", data_port, key) != "200":
            failures.append("after upstream %s the gateway no longer serves" % path)

    # a valid chunk extension ("f;a=b" CRLF) is served, not refused
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":4}'
    chunked = b"f;a=b\r\n" + body[:15] + b"\r\n" + (b"%x;q=\"x y\"\r\n" % (len(body) - 15)) + body[15:] + b"\r\n0\r\n\r\n"
    req = ("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
           "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" % key).encode() + chunked
    got = exchange(data_port, req, shut=False)
    stats.setdefault(("data", "valid chunk extension"), {})[got] = 1
    if got != "200":
        failures.append("a chunked body with valid extensions got %s, want 200" % got)
    # the same dribbled in 3-byte pieces (the check resumes across reads),
    # then pipelined with a second request behind it on one connection
    # (the parser reads nothing past the checked end of the first)
    for name, pieces in (("dribbled", [req[i:i + 3] for i in range(0, len(req), 3)]),
                         ("pipelined", [req.replace(b"Connection: close\r\n", b"") + req])):
        s = socket.create_connection(("127.0.0.1", data_port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        statuses = []
        try:
            for piece in pieces:
                s.sendall(piece)
                if name == "dribbled":
                    time.sleep(0.001)
            buf = b""
            want = 2 if name == "pipelined" else 1
            while buf.count(b"HTTP/1.1 ") < want:
                got = s.recv(65536)
                if not got:
                    break
                buf += got
            statuses = [part.split(b" ", 1)[0].decode() for part in buf.split(b"HTTP/1.1 ")[1:]]
        except OSError:
            pass
        finally:
            s.close()
        stats.setdefault(("data", "chunk extension " + name), {})[",".join(statuses)] = 1
        if statuses != ["200"] * (2 if name == "pipelined" else 1):
            failures.append("chunked with extensions, %s: got %s" % (name, statuses))

    for t in slow_threads:
        t.join()
    for i, r in enumerate(slow):
        lst = "admin" if i % 2 == 0 else "data"
        st = r[0] if r else "none"
        secs = r[1] if r else 0
        d = stats.setdefault((lst, "slowloris"), {})
        d[st] = d.get(st, 0) + 1
        if st != "408" or not (8 <= secs <= 14):
            failures.append("slowloris on %s: got %s after %.1f s, want 408 after ~10 s" % (lst, st, secs))

    for lst in ("admin", "data"):
        if good(lst, ports[lst], key) != "200":
            failures.append("%s no longer serves after the flood" % lst)
    rss1 = vmrss_kib(pid)
    bound = int(os.environ.get("HOSTILE_RSS_BOUND_KIB", str(16 * 1024)))

    total = sum(sum(d.values()) for d in stats.values())
    print("%-7s %-24s %7s  statuses" % ("listener", "case", "sent"))
    for (lst, name), d in sorted(stats.items()):
        print("%-7s %-24s %7d  %s" % (lst, name, sum(d.values()),
                                       ", ".join("%s x%d" % kv for kv in sorted(d.items()))))
    print("malformed requests: %d in %.1f s (seed %d)" % (total, elapsed, seed))
    for lst in ("admin", "data"):
        print("well-formed requests amid the flood on %s: %d of %d served"
              % (lst, good_stats[lst][0], good_stats[lst][1]))
    print("VmRSS before %d KiB, after %d KiB, growth %d KiB (bound %d KiB)"
          % (rss0, rss1, rss1 - rss0, bound))
    if rss1 < 0 or rss1 - rss0 > bound:
        failures.append("RSS grew by %d KiB, over the bound of %d KiB" % (rss1 - rss0, bound))
    if total < n:
        failures.append("only %d malformed requests sent, want >= %d" % (total, n))
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "upstream":
        upstream(sys.argv[2])
    elif len(sys.argv) == 7 and sys.argv[1] == "flood":
        sys.exit(flood(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5],
                       int(sys.argv[6])))
    else:
        print(__doc__)
        sys.exit(2)
