# test_budget_overspend.sh - a request without max_tokens
# reserves the Route's spec.cost.maxOutputTokens (default 4096) of its
# budget, and a stream that passes what it holds is cut, with a last SSE
# error event in OpenAI's shape, when the budget has no room for more. The
# issue's figures: simmodel answers 100,001 tokens to a request naming no
# max_tokens, at $0.0017 per 1k tokens ($0.17 an answer); 50 concurrent
# streams against a $0.60 budget spent $8.50 of it. Now they spend at most
# the budget plus one reservation. A whole JSON answer (not a stream) is
# produced before its first byte: it is charged in full and the budget goes
# over, and the next request is refused.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 64 --ms-per-token 0.05 --default-max-tokens 100001 || { finish; exit 1; }

# An upstream whose 200 events ("abcdefgh", 2 tokens each) each arrive in
# two halves: every read the gateway makes ends inside an event.
cat >"$TMP/split.py" <<'P'
import http.server, json, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for _ in range(200):
                ev = ("data: %s\n\n" % json.dumps({"choices": [{"delta": {"content": "abcdefgh"}}]})).encode()
                for part in (ev[:17], ev[17:]):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                    self.wfile.flush()
                    time.sleep(0.003)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
P
python3 "$TMP/split.py" "$TMP/splitport" 2>"$TMP/split.log" &
PIDS+=($!)
wait_file "$TMP/splitport" || { not_ok "the split upstream did not start"; finish; exit 1; }
SPLIT="127.0.0.1:$(cat "$TMP/splitport")"

tenant() { # NAME BUDGET
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: $1}
spec:
  namespaces: [$1-prod]
  apiKeys: [{sha256: "$(sha "key-$1")"}]
  budgets: [{amount: "$2", period: day}]
  gateway: {concurrency: 100}
---
Y
}
{
    tenant spender 0.60
    tenant whole 0.05
    tenant tiny 0.005
    tenant capped 0.002
    tenant splitter 0.0002
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/chat/}
  upstream: {address: "$SIM", capacity: 64}
  cost: {model: tokens}
  # long enough that 50 concurrent 100,001-token streams through a
  # sanitized tenantd on a busy machine end by the budget, never by the
  # deadline (a CI run took 186 s and ended 11 streams at 120 s)
  timeout: 290s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: short}
spec:
  match: {pathPrefix: /v1/completions}
  upstream: {address: "$SIM", capacity: 64}
  cost: {model: tokens, maxOutputTokens: 1000}
  timeout: 120s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: split}
spec:
  match: {pathPrefix: /split/}
  upstream: {address: "$SPLIT"}
  cost: {model: tokens}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {route: chat, per1kTokens: "0.0017"}
  - {route: short, per1kTokens: "0.0017"}
  - {route: split, per1kTokens: "0.0017"}
Y
} >"$TMP/platform.yaml"

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
ADMIN="http://127.0.0.1:$TD_PORT"
metric() { curl -s --max-time 5 "$ADMIN/metrics" | grep -F "$1" | awk '{print $2}'; }
spent() { v=$(metric "tenantd_budget_spent{tenant=\"$1\",period=\"day\"}"); echo "${v:-0}"; }

# The client: N requests at once, each read to its end (a chunked body cut
# short raises in http.client); per request the status, the characters of
# content received and the last data event.
cat >"$TMP/client.py" <<'P'
import http.client, json, sys, threading, urllib.parse
gw, key, path, n, body = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
u = urllib.parse.urlparse(gw)
out = [None] * n
def one(i):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    c.request("POST", path, body=body, headers={"Authorization": "Bearer " + key,
                                                "Content-Type": "application/json"})
    r = c.getresponse()
    res = {"status": r.status, "chars": 0, "last": None, "complete": True, "bad": []}
    if r.getheader("Content-Type", "").startswith("text/event-stream"):
        try:
            for line in r:
                if line.strip() == b"":
                    continue
                if not line.startswith(b"data: "):
                    res["bad"].append(line[:200].decode("utf-8", "replace"))
                    continue
                d = line[6:].strip()
                res["last"] = d.decode()
                if d == b"[DONE]":
                    continue
                try:
                    o = json.loads(d)
                except ValueError:
                    res["bad"].append(d[:200].decode("utf-8", "replace"))
                    continue
                for ch in o.get("choices", []):
                    res["chars"] += len((ch.get("delta") or {}).get("content") or ch.get("text") or "")
        except http.client.IncompleteRead:
            res["complete"] = False
    else:
        b = r.read()
        res["last"] = b[:1000].decode()
        if r.status == 200:
            res["chars"] = len(json.loads(b)["choices"][0]["message"]["content"])
    out[i] = res
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[t.start() for t in ts]
[t.join() for t in ts]
json.dump(out, sys.stdout)
P
client() { python3 "$TMP/client.py" "$GW" "$@"; }
MSG='{"messages":[{"role":"user","content":"hello world!"}]'

# 1. The reservation: without max_tokens a request reserves 3 + 4096
# tokens ($0.0069683), more than tiny's $0.005 day budget: refused, naming
# that estimate; with max_tokens 10 (3 + 10 tokens) it is served.
client key-tiny /v1/chat/completions 1 "$MSG}" >"$TMP/tiny1.json"
client key-tiny /v1/chat/completions 1 "$MSG,\"max_tokens\":10}" >"$TMP/tiny2.json"
python3 - "$TMP/tiny1.json" "$TMP/tiny2.json" <<'P' && ok "no max_tokens reserves 3 + 4096 tokens: 429 with estimate 0.0069683; max_tokens 10 is served" || not_ok "tiny: $(cat "$TMP/tiny1.json") $(head -c 300 "$TMP/tiny2.json")"
import json, sys
a, b = json.load(open(sys.argv[1]))[0], json.load(open(sys.argv[2]))[0]
assert a["status"] == 429, a
e = json.loads(a["last"])["error"]
assert e["code"] == "budget_exceeded" and abs(e["estimate"] - 0.0069683) < 1e-12, e
assert b["status"] == 200, b
P

# 2. The issue's attack: 50 concurrent streams without max_tokens, each
# answered with 100,001 tokens ($0.17), against a $0.60 budget. Each
# reserves $0.0069683 (all 50 fit: $0.348) and, past that, extends its
# reservation while the budget has room; when it has none, the stream is
# cut: the event in progress is finished, then a last event
# {"error":{...,"code":"budget_exceeded"}} and the end of the chunked
# body. At most 3 can run to their end ($0.51; a 4th would pass $0.60);
# the rest are cut, or refused at the door when they arrive after the
# budget is spent. Bound: the spend is at most the budget plus one
# reservation, 0.60 + 0.0069683 (holds are taken before the tokens they
# cover are forwarded; past its hold a cut stream gets at most the rest of
# one event).
client key-spender /v1/chat/completions 50 "$MSG,\"stream\":true}" >"$TMP/crowd.json"
v=$(spent spender)
python3 - "$TMP/crowd.json" "$v" <<'P' >"$TMP/crowd.out" && ok "50 streams: $(cat "$TMP/crowd.out")" || not_ok "crowd: $(cat "$TMP/crowd.out") $(head -c 600 "$TMP/crowd.json")"
import json, math, sys
rs = json.load(open(sys.argv[1]))
spent = float(sys.argv[2])
# a request admitted after the first streams have spent the budget is
# refused at the door (a slow, sanitized run sends them late)
refused = [r for r in rs if r["status"] == 429]
assert all(json.loads(r["last"])["error"]["code"] == "budget_exceeded" for r in refused), refused[:2]
rs = [r for r in rs if r["status"] != 429]
assert all(r["status"] == 200 and r["complete"] and not r["bad"] for r in rs), \
    [(r["status"], r["complete"], r["bad"][:2]) for r in rs]
cut = done = 0
for r in rs:
    if r["last"] == "[DONE]":
        done += 1
        continue
    e = json.loads(r["last"])["error"]
    assert e["code"] == "budget_exceeded" and e["type"] == "insufficient_quota" and e["message"], e
    assert "param" in e, e
    cut += 1
delivered = sum(3 + math.ceil(r["chars"] / 4) for r in rs) * 0.0017 / 1000
print("%d cut with the SSE error event, %d ran to [DONE], %d refused at the door; spent %.7f of 0.60 "
      "(bound 0.6069683), %.7f of it delivered" % (cut, done, len(refused), spent, delivered))
assert cut + done + len(refused) == 50 and done <= 3 and cut >= 1
assert spent <= 0.6069683 + 1e-9, spent
assert spent >= 0.60 - 0.0069683, spent  # the budget was used, not refused early
assert delivered <= spent + 1e-9, (delivered, spent)
P
v=$(metric 'tenantd_requests_total{tenant="spender",route="chat",outcome="budget_cut"}')
c=$(python3 -c 'import json,sys; print(sum(r["status"] == 200 and r["last"] != "[DONE]" for r in json.load(open(sys.argv[1]))))' "$TMP/crowd.json")
[ "$v" = "$c" ] && ok "/metrics: outcome=\"budget_cut\" $v" || not_ok "budget_cut metric: '$v', cut $c"
client key-spender /v1/chat/completions 1 "$MSG,\"stream\":true}" >"$TMP/after.json"
grep -q '"status": 429' "$TMP/after.json" && grep -q budget_exceeded "$TMP/after.json" &&
    ok "the next request is refused: 429 budget_exceeded" || not_ok "after: $(cat "$TMP/after.json")"

# 3. A Route's spec.cost.maxOutputTokens (1000 on /v1/completions) is what
# a request naming no max_tokens reserves there: 3 + 1000 tokens
# ($0.0017051) fit capped's $0.002 budget where the default 4096 does not;
# its 100,001-token stream is cut once it passes what the budget can pay.
client key-capped /v1/chat/completions 1 "$MSG}" >"$TMP/cap1.json"
client key-capped /v1/completions 1 '{"prompt":"hello world!","stream":true}' >"$TMP/cap2.json"
v=$(spent capped)
python3 - "$TMP/cap1.json" "$TMP/cap2.json" "$v" <<'P' >"$TMP/cap.out" && ok "maxOutputTokens 1000: $(cat "$TMP/cap.out")" || not_ok "capped: $(cat "$TMP/cap.out") $(head -c 300 "$TMP/cap1.json") $(head -c 300 "$TMP/cap2.json")"
import json, sys
a, b = json.load(open(sys.argv[1]))[0], json.load(open(sys.argv[2]))[0]
spent = float(sys.argv[3])
assert a["status"] == 429 and abs(json.loads(a["last"])["error"]["estimate"] - 0.0069683) < 1e-12, a
assert b["status"] == 200 and b["complete"], b
assert json.loads(b["last"])["error"]["code"] == "budget_exceeded", b
print("the chat route (4096) refuses, the completions route (1000) serves and cuts at %.7f of 0.002" % spent)
assert 0.002 - 0.0017051 <= spent <= 0.002 + 0.0017051, spent
P

# 3b. Cut where every read ends inside an event: the event in progress is
# finished first, so every data line the client gets is whole JSON, the
# last the error; a budget of $0.0002 pays for 117 tokens (3 + 57 events).
client key-splitter /split/x 1 "$MSG,\"max_tokens\":10,\"stream\":true}" >"$TMP/split.json"
v=$(spent splitter)
python3 - "$TMP/split.json" "$v" <<'P' >"$TMP/split.out" && ok "split events: $(cat "$TMP/split.out")" || not_ok "split: $(cat "$TMP/split.out") $(head -c 600 "$TMP/split.json")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
spent = float(sys.argv[2])
print("%d characters delivered, every event whole, then the error; spent %.7f of 0.0002" % (r["chars"], spent))
assert r["status"] == 200 and r["complete"] and not r["bad"], r
assert json.loads(r["last"])["error"]["code"] == "budget_exceeded", r
assert r["chars"] % 8 == 0 and 0 < r["chars"] < 1600, r
assert abs(spent - (3 + r["chars"] / 4) * 0.0017 / 1000) < 1e-12 and spent <= 0.0002 + 2 * 0.0017 / 1000, spent
P

# 4. A whole JSON answer of 100,001 tokens (no stream) was produced before
# its first byte: charged in full, $0.1700068 against whole's $0.05 budget
# (which goes over), and the next request is refused.
client key-whole /v1/chat/completions 1 "$MSG}" >"$TMP/whole.json"
v=$(spent whole)
python3 - "$TMP/whole.json" "$v" <<'P' && ok "a non-streamed 100,001-token answer is served and charged in full: $v of 0.05" || not_ok "whole: $v $(head -c 300 "$TMP/whole.json")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["status"] == 200 and r["chars"] > 400000, r
assert abs(float(sys.argv[2]) - 0.1700068) < 1e-9, sys.argv[2]
P
client key-whole /v1/chat/completions 1 "$MSG,\"max_tokens\":1}" >"$TMP/whole2.json"
grep -q '"status": 429' "$TMP/whole2.json" && ok "then its next request is refused" ||
    not_ok "whole after: $(cat "$TMP/whole2.json")"
stop_tenantd
finish
