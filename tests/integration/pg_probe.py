"""pg_probe.py - asks a tenantd's admin listener, every 100 ms until
STOP_FILE exists, for GET /healthz and POST /validate (REVIEW_FILE), each
on a new connection with a 10 s limit; writes one line per answer:
"MS_SINCE_START PATH STATUS LATENCY_MS" (status 0: no answer).
Usage: pg_probe.py PORT REVIEW_FILE STOP_FILE OUT_FILE"""
import http.client
import os
import sys
import time

port, review, stop, out = int(sys.argv[1]), open(sys.argv[2], "rb").read(), sys.argv[3], sys.argv[4]
t0 = time.monotonic()
with open(out, "w", buffering=1) as f:
    while not os.path.exists(stop):
        for method, path, body in (("GET", "/healthz", None), ("POST", "/validate", review)):
            t = time.monotonic()
            status = 0
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request(method, path, body=body, headers={"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                status = r.status
                c.close()
            except OSError:
                pass
            f.write("%d %s %d %d\n" % ((t - t0) * 1000, path, status, (time.monotonic() - t) * 1000))
        time.sleep(0.1)
