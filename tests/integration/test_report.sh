#!/usr/bin/env bash
# test_report.sh - `tenantctl report` and `tenantctl recommend` over a real
# ledger: `tenantctl simulate --ledger` writes the batch intervals of
# examples/kueue into DIR/ledger.db; the report is checked in every format
# (the chargeback CSV's lines add up exactly to its total line, hand-computed
# lines, HTML with inline SVG and nothing external), bad input exits 2 naming
# the problem, and the recommended ResourceQuotas are accepted by a real
# tenantd, which then meters real gateway requests to simmodel (priced per
# 1k tokens in the report) and serves as the platform source
# (DIR/tenantd.db).
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 4 --ms-per-token 0.2 || { finish; exit 1; }

D="$TMP/data"
P="$TMP/platform.yaml"
{
    # the example's queues, without its NodePools: this test sizes its own
    awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/\nkind: NodePool\n/' "$EX/kueue/platform.yaml"
    cat <<'YAML'
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a, project: search, environment: prod}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b, labels: {team: b, project: ranking, environment: dev}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-c, labels: {team: c, project: eval, environment: dev}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: compute, namespace: team-b}
spec:
  hard: {requests.nvidia.com/gpu: "32", requests.cpu: "64", pods: "100"}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-b}
spec: {namespaces: [team-b], labels: {team: b, project: ranking, environment: dev}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-c}
spec: {namespaces: [team-c], labels: {team: c, project: eval, environment: dev}}
---
apiVersion: tenantd.dev/v1alpha1
kind: NodePool
metadata: {name: a100}
spec:
  flavor: a100
  nodes: 2
  capacity: {nvidia.com/gpu: "8", cpu: "96"}
  taint: {key: nvidia.com/gpu, value: a100, effect: NoSchedule}
---
apiVersion: tenantd.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  flavor: h100
  nodes: 2
  capacity: {nvidia.com/gpu: "8", cpu: "128"}
  taint: {key: nvidia.com/gpu, value: h100, effect: NoSchedule}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {resource: nvidia.com/gpu, flavor: a100, perHour: "2.50"}
  - {resource: nvidia.com/gpu, flavor: h100, perHour: "6.00"}
  - {resource: cpu, perHour: "0.031"}
  - {resource: memory, perGiBHour: "0.0042"}
  - {route: completions, per1kTokens: "1.30"}
  interruptible: {priorityClasses: [batch-low], discount: "0.6"}
  shared:
  - {name: control-plane, monthly: "730", allocate: even}
  - {name: idle-gpu, source: idleCapacity, allocate: proportional}
  - {name: platform-team, hourly: "10", allocate: {weights: {team-a: "2", team-b: "1"}}}
YAML
    cat <<YAML
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  labels: {team: a, project: search, environment: prod}
  apiKeys: [{sha256: "$(printf %s key-team-a | sha256sum | cut -d' ' -f1)"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: completions}
spec: {match: {pathPrefix: /v1/}, upstream: {address: "$SIM"}, cost: {model: tokens}, timeout: 5s}
YAML
} >"$P"

R=(--data "$D" -c "$P" --from 2026-12-01 --to 2026-12-01T02:00:00Z)

# ---- the ledger: real intervals from the batch queue on a virtual clock ----
expect_rc "simulate writes the intervals to DIR/ledger.db" 0 \
    "$TENANTCTL" simulate -c "$P" -f "$EX/kueue/workloads.yaml" --ledger "$D" --start 2026-12-01T00:00:00Z
[ -s "$D/ledger.db" ] && ok "ledger.db exists" || not_ok "no ledger.db"

# ---- table ----
expect_rc "report table" 0 "$TENANTCTL" report "${R[@]}"
cp "$TMP/out" "$TMP/table"
expect_grep "table: period" "$TMP/table" "period 2026-12-01T00:00:00Z .. 2026-12-01T02:00:00Z   by tenant   currency USD"
expect_grep "table: team-c ran 2 h100 GPU-hours, 24 for team-b" "$TMP/table" "team-b                           24     33.333"
expect_grep "table: idle GPUs are a shared item" "$TMP/table" "idle-gpu             idleGpu  proportional"
expect_grep "table: right-sizing section" "$TMP/table" "right-sizing (p50/p95"
expect_grep "table: the route nobody called" "$TMP/table" "scale-to-zero candidates): completions"

# ---- csv: one line per owner per item; the lines add up to the total ----
expect_rc "report csv" 0 "$TENANTCTL" report "${R[@]}" --format csv -o "$TMP/report.csv"
expect_grep "csv header" "$TMP/report.csv" "period_start,period_end,tenant,team,project,environment,item,quantity,unit,amount"
expect_grep "csv: team-c's H100 line, 2 GPU-h x 6.00" "$TMP/report.csv" \
    "2026-12-01T00:00:00Z,2026-12-01T02:00:00Z,team-c,c,eval,dev,gpu/h100,2,gpu-hour,12.00"
expect_grep "csv: team-a's A100 line, 8 GPUs x 1200 s x 2.50" "$TMP/report.csv" \
    "team-a,a,search,prod,gpu/a100,2.666666,gpu-hour,6.67"
if python3 - "$TMP/report.csv" <<'PY'
import csv, sys
from decimal import Decimal
rows = list(csv.DictReader(open(sys.argv[1])))
total = [r for r in rows if r["item"] == "total"]
lines = [r for r in rows if r["item"] != "total"]
assert len(total) == 1 and rows[-1]["item"] == "total", "one total line, last"
s = sum(Decimal(r["amount"]) for r in lines)
assert s == Decimal(total[0]["amount"]), (s, total[0]["amount"])
keys = [(r["tenant"], r["item"]) for r in lines]
assert len(keys) == len(set(keys)), "one line per owner per item"
for r in lines:
    assert Decimal(r["amount"]).as_tuple().exponent == -2, r["amount"]
# a fixed shared item over 2 h: 730/month prorated = 2.00, split evenly
cp = [Decimal(r["amount"]) for r in lines if r["item"] == "shared/control-plane"]
assert sum(cp) == Decimal("2.00") and max(cp) - min(cp) <= Decimal("0.01"), cp
pt = {r["tenant"]: Decimal(r["amount"]) for r in lines if r["item"] == "shared/platform-team"}
assert pt == {"team-a": Decimal("13.33"), "team-b": Decimal("6.67")}, pt
print("csv total", total[0]["amount"], "over", len(lines), "lines")
PY
then ok "csv lines add up exactly to the total line; weights 2:1 of 20.00 = 13.33/6.67"; else not_ok "csv reconciliation"; fi

# ---- json agrees with the csv ----
expect_rc "report json" 0 "$TENANTCTL" report "${R[@]}" --format json
cp "$TMP/out" "$TMP/report.json"
if python3 - "$TMP/report.json" "$TMP/report.csv" <<'PY'
import csv, json, sys
from decimal import Decimal
d = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2])))
assert d["total"] == rows[-1]["amount"]
assert Decimal(d["total"]) == Decimal(d["direct"]) + Decimal(d["shared"])
assert sum(Decimal(o["total"]) for o in d["owners"]) == Decimal(d["total"])
for s in d["shared_items"]:
    got = sum(Decimal(l["amount"]) for l in d["lines"] if l["item"] == "shared/" + s["name"])
    assert got == Decimal(s["amount"]), (s, got)
idle = [s for s in d["shared_items"] if s["kind"] == "idleGpu"][0]
assert Decimal(idle["idle_gpu_hours"]) > 0
rs = {o["owner"]: o for o in d["rightsizing"]["owners"]}
assert rs["team-b"]["gpu_quota_milli"] == 32000 and rs["team-a"]["gpu_quota_milli"] == -1
assert rs["team-b"]["gpu_used_estimated"] is True
assert rs["team-b"]["recommended_gpus"] >= 1
assert d["rightsizing"]["idle_routes"] == ["completions"]
PY
then ok "json: totals, shared items and right-sizing agree"; else not_ok "json checks"; fi

# ---- the same period written with an offset and fractions ----
expect_rc "report with RFC 3339 offsets" 0 "$TENANTCTL" report --data "$D" -c "$P" \
    --from 2026-12-01T01:00:00+01:00 --to 2026-12-01T01:59:60.000-00:00 --format csv
tail -1 "$TMP/out" | cut -d, -f7- >"$TMP/t1"
tail -1 "$TMP/report.csv" | cut -d, -f7- >"$TMP/t2"
cmp -s "$TMP/t1" "$TMP/t2" && ok "offsets name the same instants (same total)" || {
    not_ok "offset period differs"; cat "$TMP/t1" "$TMP/t2"; }

# ---- --by team: owners are the team labels ----
expect_rc "report --by team" 0 "$TENANTCTL" report "${R[@]}" --by team --format csv
expect_grep "by team: team column holds the owner" "$TMP/out" "team-b,b,ranking,dev,gpu/a100,"
expect_grep "by team: a tenant's weight goes to its team" "$TMP/out" "team-a,a,search,prod,shared/platform-team,"
expect_no_grep "by team: no owner named after a tenant" "$TMP/out" ",team-a,,,"

# ---- html: inline SVG, nothing external ----
expect_rc "report html" 0 "$TENANTCTL" report "${R[@]}" --format html -o "$TMP/report.html"
expect_grep "html: stacked cost chart" "$TMP/report.html" '<svg id="cost-chart"'
expect_grep "html: utilisation against quota" "$TMP/report.html" '<svg id="util-chart"'
expect_grep "html: the total" "$TMP/report.html" "<b id=\"total\">$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total"])' "$TMP/report.json")</b>"
expect_no_grep "html: no scripts" "$TMP/report.html" "<script"
expect_no_grep "html: no external URLs" "$TMP/report.html" "http"
expect_no_grep "html: no fonts or external resources" "$TMP/report.html" "url("

# ---- bad input: exit 2, naming what is wrong, nothing written ----
grep -v 'flavor: h100, perHour' "$P" >"$TMP/noh100.yaml"
rm -f "$TMP/none.csv"
expect_rc "a used flavor without a price is an error" 2 \
    "$TENANTCTL" report --data "$D" -c "$TMP/noh100.yaml" --from 2026-12-01 --to 2026-12-02 -o "$TMP/none.csv"
expect_grep "names the flavor" "$TMP/err" "no price for nvidia.com/gpu flavor h100"
[ ! -e "$TMP/none.csv" ] && ok "no output file on error" || not_ok "output written on error"
expect_rc "inverted period" 2 "$TENANTCTL" report --data "$D" -c "$P" --from 2026-12-02 --to 2026-12-01
expect_grep "says inverted" "$TMP/err" "inverted"
expect_rc "bad time" 2 "$TENANTCTL" report --data "$D" -c "$P" --from yesterday
expect_grep "names the flag" "$TMP/err" '--from "yesterday"'
sed 's/discount: "0.6"/discount: "1.6"/' "$P" >"$TMP/bad.yaml"
expect_rc "a bad CostPolicy" 2 "$TENANTCTL" report "${R[@]/$P/$TMP/bad.yaml}"
expect_grep "names file, line and field" "$TMP/err" "bad.yaml:$(grep -n 'discount: "1.6"' "$TMP/bad.yaml" | cut -d: -f1): CostPolicy default: spec.interruptible.discount"
expect_rc "no ledger" 2 "$TENANTCTL" report --data "$TMP/nothing" -c "$P"
expect_grep "names the missing ledger" "$TMP/err" "$TMP/nothing"
mkdir -p "$TMP/newer"
cp "$D/ledger.db" "$TMP/newer/"
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("UPDATE meta SET value=value+1 WHERE key=\"schema\""); c.commit()' "$TMP/newer/ledger.db"
expect_rc "a ledger of a newer schema is refused" 2 "$TENANTCTL" report --data "$TMP/newer" -c "$P"
expect_grep "names the newer version" "$TMP/err" "was written by a newer tenantd"
expect_rc "report --help" 0 "$TENANTCTL" report --help
expect_grep "help names the formats" "$TMP/out" "table (default), csv"

# ---- recommend, applied to a real tenantd that then is the platform source ----
expect_rc "recommend" 0 "$TENANTCTL" recommend "${R[@]}"
cp "$TMP/out" "$TMP/rec.yaml"
expect_grep "recommend: team-b's quota keeps its name" "$TMP/rec.yaml" "name: compute"
expect_grep "recommend: GPUs" "$TMP/rec.yaml" "requests.nvidia.com/gpu:"
expect_grep "recommend: pods kept" "$TMP/rec.yaml" 'pods: "100"'
expect_rc "recommend --help" 0 "$TENANTCTL" recommend --help

start_tenantd "$D" || { finish; exit 1; }
S=(--server "http://127.0.0.1:$TD_PORT")
expect_rc "apply the platform" 0 "$TENANTCTL" apply "${S[@]}" -f "$P"
expect_rc "apply the recommendation" 0 "$TENANTCTL" apply "${S[@]}" -f "$TMP/rec.yaml"
want=$(grep -A8 'namespace: team-b' "$TMP/rec.yaml" | grep -m1 'requests.nvidia.com/gpu' | sed 's/.*: *"\{0,1\}\([0-9]*\)"\{0,1\}/\1/')
expect_rc "get the quota back" 0 "$TENANTCTL" get "${S[@]}" quota compute -n team-b -o json
expect_grep "tenantd holds the recommended GPUs ($want)" "$TMP/out" "\"requests.nvidia.com/gpu\": \"$want\""

# ---- real requests through the gateway, metered by tenantd, priced per 1k tokens ----
NOW_FROM=$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)
: >"$TMP/resp.json"
for i in $(seq 1 6); do
    curl -s --max-time 10 -H "Authorization: Bearer key-team-a" \
        -d "{\"model\":\"m\",\"prompt\":\"report test request $i\",\"max_tokens\":$((10 * i))}" \
        "http://127.0.0.1:$TD_DATA_PORT/v1/completions" >>"$TMP/resp.json"
    echo >>"$TMP/resp.json"
done
stop_tenantd
NOW_TO=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
expect_rc "report over the requests" 0 \
    "$TENANTCTL" report --data "$D" --from "$NOW_FROM" --to "$NOW_TO" --format csv
cp "$TMP/out" "$TMP/req.csv"
if python3 - "$TMP/resp.json" "$TMP/req.csv" <<'PY'
import csv, json, sys
from decimal import Decimal, ROUND_HALF_UP
toks = 0
n = 0
for line in open(sys.argv[1]):
    if line.strip():
        u = json.loads(line)["usage"]
        toks += u["prompt_tokens"] + u["completion_tokens"]
        n += 1
assert n == 6, n
rows = [r for r in csv.DictReader(open(sys.argv[2])) if r["item"] == "tokens/completions"]
assert len(rows) == 1 and rows[0]["tenant"] == "team-a", rows
want = (Decimal(toks) * Decimal("1.30") / 1000).quantize(Decimal("0.01"), ROUND_HALF_UP)
assert Decimal(rows[0]["quantity"]) == Decimal(toks) / 1000, (rows[0], toks)
assert Decimal(rows[0]["amount"]) == want, (rows[0], want)
print("tokens", toks, "->", rows[0]["amount"])
PY
then ok "the metered requests' tokens, priced per 1k: the line matches simmodel's usage"; else not_ok "request pricing"; fi

expect_rc "report reads the platform from DIR/tenantd.db" 0 \
    "$TENANTCTL" report --data "$D" --from 2026-12-01 --to 2026-12-01T02:00:00Z --format csv
tail -1 "$TMP/out" >"$TMP/total_db"
tail -1 "$TMP/report.csv" >"$TMP/total_c"
cmp -s "$TMP/total_db" "$TMP/total_c" && ok "same total from the stored objects" || {
    not_ok "totals differ"; cat "$TMP/total_db" "$TMP/total_c"; }

finish
