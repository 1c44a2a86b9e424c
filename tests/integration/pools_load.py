"""pools_load.py - load for test_pools.sh: CONC threads send POSTs to URL
for SECONDS (or N requests in all when N > 0), one keep-alive connection
each, and print one line: "ok=K errors=E codes=CODE:COUNT,..." with the
first few error details on stderr. A response that fails (reset, no
status) or whose status is not 200 is an error.

usage: pools_load.py HOSTPORT PATH KEY CONC SECONDS N MAX_TOKENS"""
import http.client
import json
import sys
import threading
import time

host, port = sys.argv[1].rsplit(":", 1)
path, key = sys.argv[2], sys.argv[3]
conc, seconds, total = int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
max_tokens = int(sys.argv[7])
body = json.dumps({"input": "hi"} if "embeddings" in path else
                  {"messages": [{"role": "user", "content": "hi"}],
                   "max_tokens": max_tokens}).encode()
lock = threading.Lock()
codes, errors, left = {}, [], [total]
end = time.time() + seconds


def take():
    with lock:
        if total > 0:
            if left[0] <= 0:
                return False
            left[0] -= 1
            return True
    return time.time() < end


def worker():
    conn = None
    while take():
        try:
            if conn is None:
                conn = http.client.HTTPConnection(host, int(port), timeout=15)
            conn.request("POST", path, body, {"Authorization": "Bearer " + key,
                                              "Content-Type": "application/json"})
            r = conn.getresponse()
            data = r.read()
            code = str(r.status)
            if r.status != 200:
                errors.append("%s %s" % (code, data[:200]))
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except Exception as e:  # a reset or a truncated answer
            code = "exc"
            errors.append(repr(e))
            conn = None
        with lock:
            codes[code] = codes.get(code, 0) + 1


ts = [threading.Thread(target=worker) for _ in range(conc)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for e in errors[:5]:
    print(e, file=sys.stderr)
print("ok=%d errors=%d codes=%s" % (codes.get("200", 0), len(errors),
                                    ",".join("%s:%d" % kv for kv in sorted(codes.items()))))
