# test_budget.sh - money budgets and key-level limits in the real gateway,
# with simmodel upstream and a CostPolicy at 0.001 per token:
# a day budget runs out (429 budget_exceeded with the budget, the spend and
# the reset time), 120 requests 40 at a time never spend past the budget, a
# streamed response is charged its real tokens (from the stream's usage,
# more than the estimate), a restart keeps the spend (replayed from the
# ledger), a shadow budget never refuses and is counted apart; a key's own
# rate refuses with level "key" while its tenant has room, and the tenant
# level refuses a second key; a key's own budget runs out (level "key",
# the key named) while the tenant and its other key keep being served, a
# shadow key budget never refuses, and a restart keeps the key's spend
# (replayed from ledger records carrying the key's name), 90 requests 30
# at a time never pass a key budget; budgets added later by apply (a
# tenant's, a key's) count the ledger's spend of their period, once;
# explain shows
# budgets, keys and levels; bad budgets and looser key limits are refused
# at apply naming file:line.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

# No max_tokens in a request: tenantd estimates 16 output tokens, simmodel
# writes 40, so the real cost is above the estimate.
start_simmodel --slots 16 --ms-per-token 0 --default-max-tokens 40 || { finish; exit 1; }

# An upstream that streams its text and never reports usage.
cat > "$TMP/nousage.py" <<'P'
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        ev = "".join("data: %s\n\n" % json.dumps({"choices": [{"delta": {"content": "abcdefghij"}}]})
                     for _ in range(4)) + "data: [DONE]\n\n"
        b = ev.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
P
python3 "$TMP/nousage.py" "$TMP/rawport" 2>"$TMP/raw.log" &
PIDS+=($!)
wait_file "$TMP/rawport" || { not_ok "the no-usage upstream did not start"; finish; exit 1; }
RAW="127.0.0.1:$(cat "$TMP/rawport")"

tenant() { # NAME BUDGETS [GATEWAY] [KEYS]
    local keys="[{sha256: \"$(sha "key-$1")\"}]" gw="{concurrency: 200}"
    [ $# -ge 3 ] && gw=$3
    [ $# -ge 4 ] && keys=$4
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: $1}
spec:
  namespaces: [$1-prod]
  labels: {team: $1, project: p, environment: prod}
  apiKeys: $keys
  budgets: $2
  gateway: $gw
---
Y
}
{
    tenant capped '[{amount: "0.2", period: day}, {amount: 100, period: month}]'
    tenant crowd '[{amount: "1", period: week}]'
    tenant streamer '[{amount: "10", period: month}]'
    tenant counted '[{amount: "10", period: month}]'
    tenant conc '[]' '{concurrency: 5}' \
        "[{sha256: \"$(sha key-batch)\", name: batch, concurrency: 1}, {sha256: \"$(sha key-other)\", name: other}]"
    tenant shadowy '[{amount: "0.05", period: day, enforcement: shadow}]'
    tenant keyed '[]' '{rate: {cost: 100, per: 1h, burst: 100}}' \
        "[{sha256: \"$(sha key-ci)\", name: ci-bot, rate: {cost: 30, per: 1h}}, {sha256: \"$(sha key-web)\", name: web}]"
    tenant kcrowd '[{amount: "10", period: month}]' '{concurrency: 200}' \
        "[{sha256: \"$(sha key-bulk)\", name: bulk, budgets: [{amount: \"0.5\", period: day}]}]"
    tenant late '[]'
    tenant latekey '[]' '{concurrency: 200}' "[{sha256: \"$(sha key-lk)\", name: lk}]"
    tenant keybud '[{amount: "1", period: month}]' '{concurrency: 200}' \
        "[{sha256: \"$(sha key-kb-ci)\", name: ci, budgets: [{amount: \"0.1\", period: day}]},
          {sha256: \"$(sha key-kb-web)\", name: web},
          {sha256: \"$(sha key-kb-sh)\", name: trial, budgets: [{amount: \"0.03\", period: day, enforcement: shadow}]}]"
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 64, queue: 256}
  cost: {model: tokens}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: raw}
spec:
  match: {pathPrefix: /raw/}
  upstream: {address: "$RAW"}
  cost: {model: tokens}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {route: chat, per1kTokens: "1"}
  - {route: raw, per1kTokens: "1"}
Y
} > "$TMP/platform.yaml"

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --access-log "$TMP/access.log" ||
    { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
ADMIN="http://127.0.0.1:$TD_PORT"

# The client: sends requests, keeps status, body and the usage it reports.
cat > "$TMP/client.py" <<'P'
import json, sys, threading, http.client, urllib.parse
def send(gw, key, body, stream=False):
    u = urllib.parse.urlparse(gw)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    c.request("POST", "/v1/chat/completions", body=json.dumps(body),
              headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read().decode()
    c.close()
    usage = None
    if r.status == 200:
        if stream:
            for line in raw.splitlines():
                if line.startswith("data: ") and line[6:] != "[DONE]":
                    d = json.loads(line[6:])
                    if d.get("usage"):
                        usage = d["usage"]
        else:
            usage = json.loads(raw)["usage"]
    return {"status": r.status, "body": raw, "usage": usage,
            "retry_after": r.getheader("Retry-After")}
def main():
    gw, key, n, par, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    msg = {"messages": [{"role": "user", "content": "hello world!"}]}
    if mode == "fixed":
        msg["max_tokens"] = 20
    if mode == "stream":
        msg["stream"] = True
    out, lock, idx = [], threading.Lock(), [0]
    def worker():
        while True:
            with lock:
                if idx[0] >= n:
                    return
                idx[0] += 1
            res = send(gw, key, msg, mode == "stream")
            with lock:
                out.append(res)
    ts = [threading.Thread(target=worker) for _ in range(par)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    json.dump(out, sys.stdout)
main()
P
client() { python3 "$TMP/client.py" "$GW" "$@"; }
metric() { curl -s --max-time 5 "$ADMIN/metrics" | grep -F "$1" | awk '{print $2}'; }

# 1. A day budget of 0.2 runs out: 23 tokens (3 prompt + 20) cost 0.023, so
# 8 pass (0.184) and the 9th would pass 0.2.
client key-capped 10 1 fixed > "$TMP/capped.json"
python3 - "$TMP/capped.json" <<'P' && ok "capped: 8 served, then 429 budget_exceeded with the budget, the spend and resetsAt (next UTC midnight)" || not_ok "capped: $(head -c 600 "$TMP/capped.json")"
import json, sys, datetime
rs = json.load(open(sys.argv[1]))
codes = [r["status"] for r in rs]
assert codes == [200] * 8 + [429] * 2, codes
spent = sum(r["usage"]["total_tokens"] for r in rs if r["status"] == 200) * 0.001
b = json.loads(rs[8]["body"])["error"]
assert b["code"] == "budget_exceeded" and b["level"] == "tenant" and b["tenant"] == "capped", b
assert b["budget"] == 0.2 and b["period"] == "day" and b["currency"] == "USD", b
assert abs(b["spent"] - spent) < 1e-9 and abs(b["spent"] - 0.184) < 1e-9, (b, spent)
tomorrow = datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=1)
assert b["resetsAt"] == tomorrow.strftime("%Y-%m-%dT00:00:00Z"), b
assert rs[8]["retry_after"] and 0 < int(rs[8]["retry_after"]) <= 86400, rs[8]
P
v=$(metric 'tenantd_budget_spent{tenant="capped",period="day"}')
[ "$v" = 0.184 ] && ok "metric tenantd_budget_spent{capped,day} = 0.184" || not_ok "capped day spend metric: '$v'"
v=$(metric 'tenantd_limit_rejections_total{tenant="capped",limit="budget",mode="enforce"}')
[ "$v" = 2 ] && ok "budget refusals counted: limit=budget mode=enforce 2" || not_ok "rejections metric: '$v'"
v=$(metric 'tenantd_requests_total{tenant="capped",route="chat",outcome="budget_exceeded"}')
[ "$v" = 2 ] && ok "outcome budget_exceeded counted" || not_ok "outcome metric: '$v'"

# 2. 120 requests, 40 in parallel, against a week budget of 1: reservations
# are atomic, so at most floor(1/0.023) = 43 are served and the real spend
# stays within the budget (each request's real cost equals its estimate).
client key-crowd 120 40 fixed > "$TMP/crowd.json"
python3 - "$TMP/crowd.json" <<'P' > "$TMP/crowd.out" && ok "crowd: $(cat "$TMP/crowd.out")" || not_ok "crowd: $(cat "$TMP/crowd.out") $(head -c 400 "$TMP/crowd.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
ok = [r for r in rs if r["status"] == 200]
no = [r for r in rs if r["status"] == 429]
assert len(ok) + len(no) == 120, [r["status"] for r in rs]
assert all(json.loads(r["body"])["error"]["code"] == "budget_exceeded" for r in no)
spent = sum(r["usage"]["total_tokens"] for r in ok) * 0.001
assert len(ok) == 43 and spent <= 1.0 + 1e-9, (len(ok), spent)
print("120 requests 40 at a time: %d served, spend %.3f of 1, %d refused" % (len(ok), spent, len(no)))
P
v=$(metric 'tenantd_budget_spent{tenant="crowd",period="week"}')
[ "$v" = 0.989 ] && ok "crowd: the week's spend is 43 x 0.023 = 0.989" || not_ok "crowd spend metric: '$v'"

# 3. A streamed response is charged what its final usage chunk says
# (3 + 40 tokens), not the estimate (3 + 16).
client key-streamer 1 1 stream > "$TMP/stream.json"
python3 - "$TMP/stream.json" <<'P' && ok "stream: served with usage 43 tokens in its last chunk" || not_ok "stream: $(head -c 600 "$TMP/stream.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
assert rs[0]["status"] == 200 and rs[0]["usage"]["total_tokens"] == 43, rs
P
v=$(metric 'tenantd_budget_spent{tenant="streamer",period="month"}')
[ "$v" = 0.043 ] && ok "stream: charged 0.043 (real tokens), not the 0.019 estimate" || not_ok "stream spend: '$v'"

# A stream without usage is charged its counted tokens: the prompt as
# estimated (3) and the text (40 characters = 10 tokens), not the estimate
# (3 + max_tokens 100); the access log says usage=counted.
code=$(curl -s -o "$TMP/raw.out" -w '%{http_code}' --max-time 10 -H "Authorization: Bearer key-counted" \
    -H 'Content-Type: application/json' \
    -d '{"messages":[{"role":"user","content":"hello world!"}],"max_tokens":100,"stream":true}' \
    "$GW/raw/v1/chat/completions")
[ "$code" = 200 ] && grep -q abcdefghij "$TMP/raw.out" && ok "a stream without usage is proxied" ||
    not_ok "no-usage stream: $code $(head -c 300 "$TMP/raw.out")"
v=$(metric 'tenantd_budget_spent{tenant="counted",period="month"}')
[ "$v" = 0.013 ] && ok "a stream without usage is charged its counted tokens: 0.013, not 0.103" ||
    not_ok "counted spend: '$v'"
kill -HUP "$TD_PID" 2>/dev/null
sleep 0.5
expect_grep "the access log marks it usage=counted" "$TMP/access.log" "usage=counted"
grep 'tenant=counted' "$TMP/access.log" | grep -q 'cost=13 ' && ok "its cost in the access log is 13 tokens" ||
    not_ok "access log: $(grep 'tenant=counted' "$TMP/access.log")"

# 4. A shadow budget never refuses; its would-be refusals are counted apart.
client key-shadowy 5 1 fixed > "$TMP/shadowy.json"
python3 - "$TMP/shadowy.json" <<'P' && ok "shadow: 5 served past a budget of 0.05 (3 would have been refused)" || not_ok "shadow: $(head -c 300 "$TMP/shadowy.json")"
import json, sys
assert [r["status"] for r in json.load(open(sys.argv[1]))] == [200] * 5
P
v=$(metric 'tenantd_limit_rejections_total{tenant="shadowy",limit="budget",mode="shadow"}')
[ "$v" = 3 ] && ok "shadow refusals counted with mode=shadow: 3" || not_ok "shadow metric: '$v'"
[ "$(metric 'tenantd_limit_rejections_total{tenant="shadowy",limit="budget",mode="enforce"}')" = 0 ] &&
    ok "no enforced budget refusal for the shadow tenant" || not_ok "shadow tenant has enforce refusals"
v=$(metric 'tenantd_budget_spent{tenant="shadowy",period="day"}')
[ "$v" = 0.115 ] && ok "the shadow budget still counts the spend: 0.115" || not_ok "shadow spend: '$v'"

# 5. Key level: ci-bot's own rate (30 per hour) refuses its second request
# (23 + 23 > 30) while the tenant has 77 of 100 left; the key "web" then
# gets exactly 3 (the refused request charged the tenant nothing), and the
# tenant level refuses its 4th.
client key-ci 2 1 fixed > "$TMP/ci.json"
client key-web 4 1 fixed > "$TMP/web.json"
python3 - "$TMP/ci.json" "$TMP/web.json" <<'P' && ok "key ci-bot refused at level key; key web served 3 and refused at level tenant" || not_ok "levels: $(head -c 300 "$TMP/ci.json") $(head -c 600 "$TMP/web.json")"
import json, sys
ci, web = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert [r["status"] for r in ci] == [200, 429], ci
b = json.loads(ci[1]["body"])["error"]
assert b["code"] == "rate_limited" and b["level"] == "key" and b["key"] == "ci-bot" and b["tenant"] == "keyed", b
assert [r["status"] for r in web] == [200, 200, 200, 429], web
b = json.loads(web[3]["body"])["error"]
assert b["code"] == "rate_limited" and b["level"] == "tenant" and "key" not in b, b
P
v=$(metric 'tenantd_limit_rejections_total{tenant="keyed",limit="key_rate",mode="enforce"}')
[ "$v" = 1 ] && ok "key-level refusal counted as limit=key_rate" || not_ok "key_rate metric: '$v'"

# Key budgets: ci's own day budget of 0.1 serves 4 requests of 0.023
# (0.092) and refuses the 5th at level key, naming the key; the tenant
# (month budget 1) and its key web keep being served; trial's shadow
# budget of 0.03 never refuses and is counted apart.
client key-kb-ci 6 1 fixed > "$TMP/kbci.json"
client key-kb-web 3 1 fixed > "$TMP/kbweb.json"
client key-kb-sh 3 1 fixed > "$TMP/kbsh.json"
python3 - "$TMP/kbci.json" "$TMP/kbweb.json" "$TMP/kbsh.json" <<'P' && ok "key ci's budget runs out: 4 served, then 429 budget_exceeded at level key naming ci; web and the shadow-budget key trial are served" || not_ok "key budgets: $(head -c 600 "$TMP/kbci.json") $(head -c 300 "$TMP/kbweb.json") $(head -c 300 "$TMP/kbsh.json")"
import json, sys
ci, web, sh = (json.load(open(f)) for f in sys.argv[1:4])
assert [r["status"] for r in ci] == [200] * 4 + [429] * 2, [r["status"] for r in ci]
b = json.loads(ci[4]["body"])["error"]
assert b["code"] == "budget_exceeded" and b["level"] == "key" and b["key"] == "ci", b
assert b["tenant"] == "keybud" and b["period"] == "day" and b["budget"] == 0.1, b
assert abs(b["spent"] - 0.092) < 1e-9 and b["estimate"] == 0.023, b
assert b["resetsAt"].endswith("T00:00:00Z") and ci[4]["retry_after"], (b, ci[4])
assert [r["status"] for r in web] == [200] * 3, web
assert [r["status"] for r in sh] == [200] * 3, sh
P
v=$(metric 'tenantd_key_budget_spent{tenant="keybud",key="ci",period="day"}')
[ "$v" = 0.092 ] && ok "metric tenantd_key_budget_spent{keybud,ci,day} = 0.092" || not_ok "key spend metric: '$v'"
v=$(metric 'tenantd_key_budget_spent{tenant="keybud",key="trial",period="day"}')
[ "$v" = 0.069 ] && ok "the shadow key budget still counts its key's spend: 0.069" || not_ok "trial spend metric: '$v'"
v=$(metric 'tenantd_budget_spent{tenant="keybud",period="month"}')
[ "$v" = 0.23 ] && ok "the tenant's month spend has all three keys: 0.23" || not_ok "keybud month spend: '$v'"
v=$(metric 'tenantd_limit_rejections_total{tenant="keybud",limit="key_budget",mode="enforce"}')
[ "$v" = 2 ] && ok "key budget refusals counted as limit=key_budget mode=enforce: 2" || not_ok "key_budget enforce metric: '$v'"
v=$(metric 'tenantd_limit_rejections_total{tenant="keybud",limit="key_budget",mode="shadow"}')
[ "$v" = 2 ] && ok "trial's would-be refusals counted apart with mode=shadow: 2" || not_ok "key_budget shadow metric: '$v'"
[ "$(metric 'tenantd_limit_rejections_total{tenant="keybud",limit="budget",' | sort -u)" = 0 ] &&
    ok "no refusal of the tenant's own budget" || not_ok "keybud has tenant-level budget refusals"

# 90 requests of one key, 30 at a time, against its day budget of 0.5: at
# most floor(0.5/0.023) = 21 served, and the tenant's spend is the key's.
client key-bulk 90 30 fixed > "$TMP/bulk.json"
python3 - "$TMP/bulk.json" <<'P' > "$TMP/bulk.out" && ok "key bulk: $(cat "$TMP/bulk.out")" || not_ok "bulk: $(cat "$TMP/bulk.out") $(head -c 400 "$TMP/bulk.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
ok = [r for r in rs if r["status"] == 200]
no = [json.loads(r["body"])["error"] for r in rs if r["status"] == 429]
assert len(ok) + len(no) == 90, [r["status"] for r in rs]
assert all(b["code"] == "budget_exceeded" and b["level"] == "key" and b["key"] == "bulk" for b in no), no[:2]
spent = sum(r["usage"]["total_tokens"] for r in ok) * 0.001
assert len(ok) == 21 and spent <= 0.5 + 1e-9, (len(ok), spent)
print("90 requests 30 at a time against a key budget of 0.5: %d served, spend %.3f, %d refused at level key" % (len(ok), spent, len(no)))
P
v=$(metric 'tenantd_budget_spent{tenant="kcrowd",period="month"}')
[ "$v" = 0.483 ] && ok "kcrowd: the tenant's spend is the key's, 21 x 0.023 = 0.483 (refused requests cost the tenant nothing)" ||
    not_ok "kcrowd spend: '$v'"

# Key concurrency: batch may hold one request; while one hangs upstream its
# second is refused at level key, and another key of the tenant still passes.
curl -s -o /dev/null --max-time 3 -H "Authorization: Bearer key-batch" -H 'X-Simmodel-Fault: hang' \
    -d '{"prompt":"hi","max_tokens":1}' "$GW/v1/completions" &
hung=$!
sleep 0.5
code=$(curl -s -o "$TMP/b2" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer key-batch" \
    -d '{"prompt":"hi","max_tokens":1}' "$GW/v1/completions")
[ "$code" = 429 ] && grep -q '"code":"concurrency_limited".*"level":"key","key":"batch"' "$TMP/b2" &&
    ok "key batch's second request in flight: 429 concurrency_limited at level key" ||
    not_ok "key concurrency: $code $(cat "$TMP/b2")"
code=$(curl -s -o "$TMP/b3" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer key-other" \
    -d '{"prompt":"hi","max_tokens":1}' "$GW/v1/completions")
[ "$code" = 200 ] && ok "meanwhile the tenant's other key is served" || not_ok "other key: $code $(cat "$TMP/b3")"
wait $hung
v=$(metric 'tenantd_limit_rejections_total{tenant="conc",limit="key_concurrency",mode="enforce"}')
[ "$v" = 1 ] && ok "counted as limit=key_concurrency" || not_ok "key_concurrency metric: '$v'"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -H "Authorization: Bearer key-batch" \
    -d '{"prompt":"hi","max_tokens":1}' "$GW/v1/completions")
[ "$code" = 200 ] && ok "the key's slot is released when its request ends" || not_ok "after release: $code"

# 6. Explain: budgets with amount, spend, reset and mode; keys; levels.
curl -s --max-time 5 "$ADMIN/v1/explain/request?tenant=capped" > "$TMP/ex1"
python3 - "$TMP/ex1" <<'P' && ok "explain capped: both budgets, the spend, resetsAt, and the budget_exceeded refusal" || not_ok "explain capped: $(cat "$TMP/ex1")"
import json, sys
o = json.load(open(sys.argv[1]))
bs = {b["period"]: b for b in o["limits"]["budgets"]}
assert bs["day"]["amount"] == 0.2 and abs(bs["day"]["spent"] - 0.184) < 1e-9, bs
assert bs["day"]["enforcement"] == "enforce" and bs["day"]["resetsAt"].endswith("T00:00:00Z"), bs
assert bs["month"]["amount"] == 100 and abs(bs["month"]["spent"] - 0.184) < 1e-9, bs
assert bs["month"]["resetsAt"][8:] == "01T00:00:00Z", bs
ref = o["recentRefusals"]
assert ref and ref[0]["reason"] == "budget_exceeded" and ref[0]["level"] == "tenant", ref
assert "day budget 0.2 USD, spent 0.184, this request's estimate 0.023" in ref[0]["detail"], ref
P
curl -s --max-time 5 "$ADMIN/v1/explain/request?tenant=keyed" > "$TMP/ex2"
python3 - "$TMP/ex2" <<'P' && ok "explain keyed: key limits, and refusals naming level and key" || not_ok "explain keyed: $(cat "$TMP/ex2")"
import json, sys
o = json.load(open(sys.argv[1]))
ks = {k["name"]: k for k in o["limits"]["keys"]}
assert ks["ci-bot"]["rate"]["cost"] == 30 and ks["ci-bot"]["concurrency"]["inherits"] == "tenant", ks
assert ks["web"]["rate"]["inherits"] == "tenant", ks
lv = {(x["level"], x.get("key")) for x in o["recentRefusals"]}
assert ("key", "ci-bot") in lv and ("tenant", None) in lv, o["recentRefusals"]
assert "precedence" in o["limits"]
P
curl -s --max-time 5 "$ADMIN/v1/explain/request?tenant=keybud" > "$TMP/ex3"
python3 - "$TMP/ex3" <<'P' && ok "explain keybud: each key's own budgets with spend, web inherits, the refusal names key ci" || not_ok "explain keybud: $(cat "$TMP/ex3")"
import json, sys
o = json.load(open(sys.argv[1]))
ks = {k["name"]: k for k in o["limits"]["keys"]}
b = ks["ci"]["budgets"][0]
assert b["period"] == "day" and b["amount"] == 0.1 and abs(b["spent"] - 0.092) < 1e-9, b
assert abs(b["remaining"] - 0.008) < 1e-9 and b["enforcement"] == "enforce", b
assert ks["trial"]["budgets"][0]["enforcement"] == "shadow", ks
assert ks["web"]["budgets"] == {"inherits": "tenant"}, ks
ref = [x for x in o["recentRefusals"] if x["reason"] == "budget_exceeded" and x["mode"] == "enforce"]
assert ref and ref[0]["level"] == "key" and ref[0]["key"] == "ci", o["recentRefusals"]
assert "key ci, route chat: day budget 0.1 USD, spent 0.092" in ref[0]["detail"], ref
P
expect_rc "tenantctl explain request shows key budgets" 0 "$TENANTCTL" explain request --tenant keybud \
    --server "$ADMIN"
expect_grep "the table has ci's day budget" "$TMP/out" "key ci       budget day: 0.092 of 0.1 USD spent (0.008 left), enforce; resets at"
expect_rc "tenantctl explain request shows budgets" 0 "$TENANTCTL" explain request --tenant capped \
    --server "$ADMIN"
expect_grep "the table has the day budget" "$TMP/out" "budget       day: 0.184 of 0.2 USD spent (0.016 left), enforce; resets at"

# 7. Bad input at apply: nothing applied, the error names file:line and field.
bad() { # NAME FILE-CONTENT WANT
    printf '%s\n' "$2" > "$TMP/bad.yaml"
    expect_rc "refused: $1" 2 "$TENANTCTL" apply -f "$TMP/bad.yaml" --server "$ADMIN"
    expect_grep "message: $1" "$TMP/err" "$3"
}
T='apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: bad}
spec:'
bad "negative amount" "$T
  budgets: [{amount: \"-5\", period: day}]" 'bad.yaml:5: Tenant bad: spec.budgets[0].amount: -5 is negative'
bad "unknown period" "$T
  budgets: [{amount: 5, period: fortnight}]" 'spec.budgets[0].period: "fortnight" is not a period; must be day, week or month'
bad "two budgets for one period" "$T
  budgets: [{amount: 5, period: day}, {amount: 6, period: day}]" 'a second budget for the period day'
bad "budget enforcement" "$T
  budgets: [{amount: 5, period: day, enforcement: audit}]" 'spec.budgets[0].enforcement: must be enforce or shadow'
bad "key rate looser than the tenant's" "$T
  apiKeys: [{sha256: \"$(sha k1)\", name: k1, rate: {cost: 200, per: 1s}}]
  gateway: {rate: {cost: 100, per: 1s}}" "key k1: 200 per second (burst 200) is looser than the tenant's spec.gateway.rate 100 per second (burst 100)"
bad "key concurrency looser than the tenant's" "$T
  apiKeys: [{sha256: \"$(sha k1)\", name: k1, concurrency: 9}]
  gateway: {concurrency: 4}" "spec.apiKeys[0].concurrency: key k1: 9 in flight is looser than the tenant's spec.gateway.concurrency 4"
bad "key limits without a name" "$T
  apiKeys: [{sha256: \"$(sha k1)\", concurrency: 2}]" 'a key with its own rate or concurrency needs a name'
bad "a key budget above the tenant's" "$T
  budgets: [{amount: 5, period: day}]
  apiKeys: [{sha256: \"$(sha k1)\", name: k1, budgets: [{amount: 6, period: day}]}]" \
    "spec.apiKeys[0].budgets[0].amount: key k1: its day budget 6 is above the tenant's day budget 5 (spec.budgets[0].amount)"
bad "a key budget without a name" "$T
  apiKeys: [{sha256: \"$(sha k1)\", budgets: [{amount: 1, period: day}]}]" 'a key with its own budgets needs a name'
bad "a key budget's period" "$T
  apiKeys: [{sha256: \"$(sha k1)\", name: k1, budgets: [{amount: 1, period: hour}]}]" 'spec.apiKeys[0].budgets[0].period: "hour" is not a period'
bad "a Route the CostPolicy does not price" 'apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: unpriced}
spec:
  match: {pathPrefix: /other/}
  upstream: {address: "127.0.0.1:9"}' 'CostPolicy default has no price for Route unpriced, which the tenant can use'

# 8. A restart keeps the period's spend: replayed from the ledger.
stop_tenantd
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --access-log "$TMP/access.log" ||
    { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
ADMIN="http://127.0.0.1:$TD_PORT"
v=$(metric 'tenantd_budget_spent{tenant="capped",period="day"}')
[ "$v" = 0.184 ] && ok "after a restart capped's day spend is still 0.184" || not_ok "after restart: '$v'"
v=$(metric 'tenantd_budget_spent{tenant="streamer",period="month"}')
[ "$v" = 0.043 ] && ok "after a restart the streamed request's cost is still counted" || not_ok "streamer after restart: '$v'"
v=$(metric 'tenantd_key_budget_spent{tenant="keybud",key="ci",period="day"}')
[ "$v" = 0.092 ] && ok "after a restart key ci's day spend is still 0.092 (ledger records carry its name)" ||
    not_ok "key spend after restart: '$v'"
client key-kb-ci 1 1 fixed > "$TMP/kbci2.json"
client key-kb-web 1 1 fixed > "$TMP/kbweb2.json"
python3 - "$TMP/kbci2.json" "$TMP/kbweb2.json" <<'P' && ok "after a restart key ci is still refused at level key, web still served" || not_ok "key after restart: $(cat "$TMP/kbci2.json") $(head -c 200 "$TMP/kbweb2.json")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
b = json.loads(r["body"])["error"]
assert r["status"] == 429 and b["level"] == "key" and b["key"] == "ci", r
assert abs(b["spent"] - 0.092) < 1e-9, b
assert json.load(open(sys.argv[2]))[0]["status"] == 200
P
client key-capped 1 1 fixed > "$TMP/capped2.json"
python3 - "$TMP/capped2.json" <<'P' && ok "after a restart capped is still refused" || not_ok "capped after restart: $(cat "$TMP/capped2.json")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["status"] == 429 and abs(json.loads(r["body"])["error"]["spent"] - 0.184) < 1e-9, r
P

# 9. A budget added later by apply counts the ledger's spend of its period:
# late and latekey/lk spend with no budget (4 and 2 requests at 0.023, since
# this start), then an apply gives late a day budget of 0.1, latekey one of
# 1 and its key lk one of 0.05.
client key-late 4 2 fixed > "$TMP/late.json"
client key-lk 2 1 fixed > "$TMP/lk.json"
python3 -c 'import json,sys; assert [r["status"] for f in sys.argv[1:] for r in json.load(open(f))] == [200] * 6' \
    "$TMP/late.json" "$TMP/lk.json" && ok "late and lk served without budgets" || not_ok "late/lk before the budget"
{
    tenant late '[{amount: "0.1", period: day}]'
    tenant latekey '[{amount: "1", period: day}]' '{concurrency: 200}' \
        "[{sha256: \"$(sha key-lk)\", name: lk, budgets: [{amount: \"0.05\", period: day}]}]"
} > "$TMP/late.yaml"
expect_rc "apply: budgets added to late, latekey and key lk" 0 "$TENANTCTL" apply -f "$TMP/late.yaml" --server "$ADMIN"
v=$(metric 'tenantd_budget_spent{tenant="late",period="day"}')
[ "$v" = 0.092 ] && ok "a budget added by apply counts the period's spend so far: 0.092" ||
    not_ok "late's added budget: spent '$v', want 0.092"
v=$(metric 'tenantd_budget_amount{tenant="late",period="day"}')
[ "$v" = 0.1 ] && ok "tenantd_budget_amount{late,day} = 0.1" || not_ok "late's amount: '$v'"
v=$(metric 'tenantd_key_budget_spent{tenant="latekey",key="lk",period="day"}')
[ "$v" = 0.046 ] && ok "a key budget added by apply counts the key's spend so far: 0.046" ||
    not_ok "lk's added budget: spent '$v', want 0.046"
v=$(metric 'tenantd_key_budget_amount{tenant="latekey",key="lk",period="day"}')
[ "$v" = 0.05 ] && ok "tenantd_key_budget_amount{latekey,lk,day} = 0.05" || not_ok "lk's amount: '$v'"
client key-late 1 1 fixed > "$TMP/late2.json"
client key-lk 1 1 fixed > "$TMP/lk2.json"
python3 - "$TMP/late2.json" "$TMP/lk2.json" <<'P' && ok "the added budgets refuse with the ledger's spend (0.092 + 0.023 > 0.1; 0.046 + 0.023 > 0.05 at level key)" || not_ok "after the added budgets: $(cat "$TMP/late2.json" "$TMP/lk2.json")"
import json, sys
r = json.load(open(sys.argv[1]))[0]
b = json.loads(r["body"])["error"]
assert r["status"] == 429 and b["code"] == "budget_exceeded" and abs(b["spent"] - 0.092) < 1e-9, r
r = json.load(open(sys.argv[2]))[0]
b = json.loads(r["body"])["error"]
assert r["status"] == 429 and b["level"] == "key" and abs(b["spent"] - 0.046) < 1e-9, r
P
# Applied again, nothing is added: the spend is not counted twice.
expect_rc "apply the same budgets again" 0 "$TENANTCTL" apply -f "$TMP/late.yaml" --server "$ADMIN"
v=$(metric 'tenantd_budget_spent{tenant="late",period="day"}')
w=$(metric 'tenantd_budget_spent{tenant="latekey",period="day"}')
[ "$v" = 0.092 ] && [ "$w" = 0.046 ] && ok "applied again: late 0.092, latekey 0.046 (once)" ||
    not_ok "applied again: late '$v' latekey '$w'"
stop_tenantd
finish
