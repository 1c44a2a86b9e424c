# test_model_prices.sh - prices and budgets per model,
# against the real tenantd and two real simmodels serving two models on two
# Routes of one path: each request is charged at its model's price (exact
# model > route), a budget for the 70B model refuses it (429
# budget_exceeded naming the model) while the other model keeps being
# served, /metrics carries a bounded model label, the access log names the
# model and the endpoint, `tenantctl report --by model` equals what the
# upstreams reported, and a version-2 ledger (no model) is read as is,
# migrated when tenantd opens it, and refused by an older schema rule.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 4 --ms-per-token 0 || { finish; exit 1; }
BIG=$SIM
start_simmodel --slots 4 --ms-per-token 0 || { finish; exit 1; }
SMALL=$SIM
cat > "$TMP/p.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: big}
spec:
  match: {pathPrefix: /v1/, models: [llama-3-70b]}
  upstream: {address: "$BIG"}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: small}
spec:
  match: {pathPrefix: /v1/, models: ["qwen-*"]}
  upstream: {address: "$SMALL"}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {model: llama-3-70b, per1kTokensIn: "0.5", per1kTokensOut: "1.5"}
  - {model: qwen-2-72b, per1kTokens: "0.02"}
  - {route: small, per1kTokensIn: "0.001", per1kTokensOut: "0.002"}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha]
  labels: {team: alpha, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-alpha)"}]
  budgets:
  - {amount: 100, period: month}
  - {amount: "0.10", period: day, models: [llama-3-70b]}
Y
FROM=$(date -u -d '-2 hours' +%Y-%m-%dT%H:00:00Z)
TO=$(date -u -d '+2 hours' +%Y-%m-%dT%H:00:00Z)

# ---- an old ledger: version 2, no model column, one record ----
mkdir -p "$TMP/data"
python3 - "$TMP/data/ledger.db" <<'P'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
db.executescript("""
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE records (id TEXT PRIMARY KEY, kind INTEGER NOT NULL, rollup INTEGER NOT NULL,
  start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, tenant TEXT NOT NULL, team TEXT NOT NULL,
  project TEXT NOT NULL, environment TEXT NOT NULL, route TEXT NOT NULL, workload TEXT NOT NULL,
  cluster_queue TEXT NOT NULL, flavor TEXT NOT NULL, outcome TEXT NOT NULL,
  interruptible INTEGER NOT NULL, count INTEGER NOT NULL, tokens_in INTEGER NOT NULL,
  tokens_out INTEGER NOT NULL, gpu_milli_seconds INTEGER NOT NULL, gpu_milli INTEGER NOT NULL,
  cpu_milli INTEGER NOT NULL, memory_bytes INTEGER NOT NULL, storage_bytes INTEGER NOT NULL,
  gpu_used_milli INTEGER NOT NULL, api_key TEXT NOT NULL DEFAULT '') WITHOUT ROWID;
CREATE INDEX records_start ON records(start_ns);
INSERT INTO meta VALUES ('schema', 2), ('horizon_ns', 0);
""")
t = (int(time.time()) - 600) * 10**9
db.execute("INSERT INTO records VALUES ('old-1', 0, 0, ?, ?, 'alpha', 'alpha', 'p', 'prod', 'small',"
           " '', '', '', 'ok', 0, 1, 100000, 50000, 0, 0, 0, 0, 0, -1, '')", (t, t + 10**8))
db.commit()
P
schema() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT value FROM meta WHERE key='schema'\").fetchone()[0])" "$TMP/data/ledger.db"; }
expect_rc "report reads a version-2 ledger" 0 "$TENANTCTL" report --data "$TMP/data" -c "$TMP/p.yaml" \
    --from "$FROM" --to "$TO" --by model --format json -o "$TMP/old.json"
python3 - "$TMP/old.json" <<'P' && ok "... its record under (none), at the route's price (0.20)" || not_ok "old report: $(cat "$TMP/old.json")"
import json, sys
r = json.load(open(sys.argv[1]))
o = {x["owner"]: x for x in r["owners"]}
assert list(o) == ["(none)"], o
assert o["(none)"]["tokens_in"] == 100000 and o["(none)"]["direct"] == "0.20", o
P
[ "$(schema)" = 2 ] && ok "... and leaves it at version 2" || not_ok "schema $(schema) after a read"

start_tenantd "$TMP/data" --config "$TMP/p.yaml" --access-log "$TMP/access.log" || { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
[ "$(schema)" = 3 ] && ok "tenantd migrated the ledger to version 3" || not_ok "schema $(schema)"

# ask MODEL: one chat request; status to $TMP/code, body to $TMP/b; the
# usage of a 200 appended to $TMP/usage as "MODEL IN OUT"
ask() {
    curl -s -o "$TMP/b" -w '%{http_code}' -H "Authorization: Bearer key-alpha" \
        -H 'Content-Type: application/json' \
        -d "{\"model\":\"$1\",\"messages\":[{\"role\":\"user\",\"content\":\"hello there, how are you\"}],\"max_tokens\":8}" \
        "$GW/v1/chat/completions" > "$TMP/code"
    if [ "$(cat "$TMP/code")" = 200 ]; then
        python3 -c 'import json,sys; u=json.load(open(sys.argv[1]))["usage"]; print(sys.argv[2], u["prompt_tokens"], u["completion_tokens"])' \
            "$TMP/b" "$1" >> "$TMP/usage"
    fi
    echo "$1 $(cat "$TMP/code")" >> "$TMP/asked"
}
: > "$TMP/usage"
: > "$TMP/asked"

# ---- the 70B model's budget runs out; the other models go on ----
first429=""
for i in $(seq 1 14); do
    ask llama-3-70b
    if [ "$(cat "$TMP/code")" = 429 ] && [ -z "$first429" ]; then first429=$i; cp "$TMP/b" "$TMP/refused.json"; fi
done
n70=$(grep -c '^llama-3-70b 200' "$TMP/asked")
[ -n "$first429" ] && [ "$n70" -ge 3 ] && ok "llama-3-70b: $n70 served, then 429 (first at request $first429)" ||
    not_ok "llama-3-70b: $n70 served, first 429 at '${first429}'"
python3 - "$TMP/refused.json" <<'P' && ok "... budget_exceeded naming the model and its budget" || not_ok "refusal: $(cat "$TMP/refused.json")"
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["code"] == "budget_exceeded" and e["type"] == "insufficient_quota", e
assert e["model"] == "llama-3-70b" and e["period"] == "day" and e["budget"] == 0.1, e
assert "model llama-3-70b (budget for llama-3-70b)" in e["message"], e
P
for i in 1 2 3; do ask qwen-2-7b; done
for i in 1 2; do ask qwen-2-72b; done
[ "$(grep -c '^qwen-2-7b 200\|^qwen-2-72b 200' "$TMP/asked")" = 5 ] &&
    ok "qwen-2-7b and qwen-2-72b are served while llama-3-70b is refused" || not_ok "qwen: $(grep qwen "$TMP/asked")"
ask llama-3-70b
[ "$(cat "$TMP/code")" = 429 ] && ok "... and llama-3-70b is still refused" || not_ok "70b after qwen: $(cat "$TMP/code")"

# ---- /metrics: the model budget's spend, a bounded model label ----
curl -s "http://127.0.0.1:$TD_PORT/metrics" > "$TMP/metrics"
python3 - "$TMP/metrics" "$TMP/usage" <<'P' && ok "the 70B budget's spend is within it and equals its requests' price" || not_ok "metrics: $(grep model_budget "$TMP/metrics")"
import sys, re
from decimal import Decimal as D
m = open(sys.argv[1]).read()
spent = D(re.search(r'tenantd_model_budget_spent\{tenant="alpha",models="llama-3-70b",period="day"\} (\S+)', m).group(1))
amount = D(re.search(r'tenantd_model_budget_amount\{tenant="alpha",models="llama-3-70b",period="day"\} (\S+)', m).group(1))
want = sum(D(i) * D("0.5") / 1000 + D(o) * D("1.5") / 1000
           for mo, i, o in (l.split() for l in open(sys.argv[2])) if mo == "llama-3-70b")
assert amount == D("0.1") and spent <= amount and spent == want, (spent, want, amount)
P
sleep 1 # the workers' sums reach the ledger every 250 ms, its writer commits every 50 ms
curl -s "http://127.0.0.1:$TD_PORT/metrics" > "$TMP/metrics"
expect_grep "tenantd_usage_tokens names the model a Route lists" "$TMP/metrics" 'tenantd_usage_tokens{tenant="alpha",model="llama-3-70b",direction="in"}'
expect_grep "... and the Route's prefix pattern for a model it matches" "$TMP/metrics" 'tenantd_usage_tokens{tenant="alpha",model="qwen-*",direction="out"}'
expect_no_grep "... never the model a client sent" "$TMP/metrics" 'model="qwen-2-7b"'
expect_grep "tenantd_cost_total carries the model's item and label" "$TMP/metrics" 'item="tokens/big/llama-3-70b",model="llama-3-70b"}'
expect_grep "the access log names the model and the endpoint" "$TMP/access.log" "model=llama-3-70b endpoint=$BIG"
expect_grep "... of the other route too" "$TMP/access.log" "model=qwen-2-7b endpoint=$SMALL"

# ---- a restart keeps the 70B budget's spend (replayed from the ledger) ----
stop_tenantd
start_tenantd "$TMP/data" --config "$TMP/p.yaml" || { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
ask llama-3-70b
[ "$(cat "$TMP/code")" = 429 ] && ok "after a restart llama-3-70b is still refused" || not_ok "after restart: $(cat "$TMP/code") $(cat "$TMP/b")"
ask qwen-2-7b
[ "$(cat "$TMP/code")" = 200 ] && ok "... and qwen-2-7b served" || not_ok "qwen after restart: $(cat "$TMP/code")"
stop_tenantd

# ---- the report by model equals what the upstreams reported ----
expect_rc "report --by model" 0 "$TENANTCTL" report --data "$TMP/data" -c "$TMP/p.yaml" \
    --from "$FROM" --to "$TO" --by model --format json -o "$TMP/r.json"
python3 - "$TMP/r.json" "$TMP/usage" "$TMP/asked" <<'P' && ok "report by model: requests, tokens and cost per model equal what was served, at each model's price" || not_ok "report: $(cat "$TMP/r.json")"
import json, sys
from decimal import Decimal as D, ROUND_HALF_UP
r = json.load(open(sys.argv[1]))
assert r["by"] == "model", r["by"]
o = {x["owner"]: x for x in r["owners"]}
price = {"llama-3-70b": (D("0.5"), D("1.5")), "qwen-2-72b": (D("0.02"), D("0.02")),
         "qwen-2-7b": (D("0.001"), D("0.002"))}
use = {}
for l in open(sys.argv[2]):
    m, i, out = l.split()
    u = use.setdefault(m, [0, 0])
    u[0] += int(i); u[1] += int(out)
asked = {}
for l in open(sys.argv[3]):
    m, code = l.split()
    asked[m] = asked.get(m, 0) + 1
assert set(o) == {"(none)", "llama-3-70b", "qwen-2-72b", "qwen-2-7b"}, list(o)
for m, (i, out) in use.items():
    pi, po = price[m]
    want = (D(i) * pi / 1000 + D(out) * po / 1000).quantize(D("0.01"), ROUND_HALF_UP)
    assert o[m]["tokens_in"] == i and o[m]["tokens_out"] == out, (m, o[m], i, out)
    assert D(o[m]["direct"]) == want, (m, o[m]["direct"], want)
    assert o[m]["requests"] == asked[m], (m, o[m]["requests"], asked[m])
assert o["(none)"]["tokens_in"] == 100000, o["(none)"]
P
"$TENANTCTL" report --data "$TMP/data" -c "$TMP/p.yaml" --from "$FROM" --to "$TO" --by model --format csv > "$TMP/r.csv"
head -1 "$TMP/r.csv" | grep -q ',amount,model$' && grep -q ',tokens/big/llama-3-70b,.*,llama-3-70b$' "$TMP/r.csv" &&
    ok "csv by model: the model in a last column" || not_ok "csv: $(cat "$TMP/r.csv")"
"$TENANTCTL" report --data "$TMP/data" -c "$TMP/p.yaml" --from "$FROM" --to "$TO" --by model > "$TMP/r.txt"
expect_grep "table by model" "$TMP/r.txt" "by model"
expect_grep "... a row per model" "$TMP/r.txt" "qwen-2-72b"
"$TENANTCTL" report --data "$TMP/data" -c "$TMP/p.yaml" --from "$FROM" --to "$TO" --by model --format html > "$TMP/r.html"
expect_grep "html by model" "$TMP/r.html" "llama-3-70b"

# ---- a ledger of a newer schema is refused, both versions named ----
python3 -c "import sqlite3,sys; d=sqlite3.connect(sys.argv[1]); d.execute(\"UPDATE meta SET value=99 WHERE key='schema'\"); d.commit()" "$TMP/data/ledger.db"
expect_rc "tenantd refuses a ledger of schema 99" 1 "$TENANTD" --data "$TMP/data" --admin-listen 127.0.0.1:0 \
    --listen 127.0.0.1:0 --config "$TMP/p.yaml"
"$TENANTD" --data "$TMP/data" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0 --config "$TMP/p.yaml" 2> "$TMP/newer.err"
expect_grep "... naming both versions" "$TMP/newer.err" "ledger schema version 99 was written by a newer tenantd; this build reads version 3"

# ---- validation: a budget for models and a price by model name their field ----
cat > "$TMP/bad.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  prices:
  - {model: "llama-*-70b", per1kTokens: "1"}
Y
"$TENANTD" --data "$TMP/bad" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0 --config "$TMP/bad.yaml" 2> "$TMP/bad.err"
expect_grep "a bad model price names file, line and field" "$TMP/bad.err" "bad.yaml:6: CostPolicy default: spec.prices[0].model"
finish
