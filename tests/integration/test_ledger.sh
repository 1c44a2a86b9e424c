# test_ledger.sh - metering into the usage ledger with the real tenantd,
# simmodel and SQLite: every finished gateway request (ok with the usage
# simmodel reported; 429s summed per tenant, route and second) and every batch interval (a deleted workload
# finishes) is a record with its owner's labels; the records survive a
# restart without double counting; tenantd_cost_total prices them exactly;
# /v1/usage is scoped by credential; --ledger off writes nothing; a ledger
# of a newer schema is refused; tenantctl simulate --ledger writes the
# simulated intervals idempotently.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

# sql DIR QUERY: one value (python3's sqlite3 reads the real ledger.db)
sql() {
    python3 - "$1/ledger.db" "$2" <<'P'
import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print("|".join("" if v is None else str(v) for v in c.execute(sys.argv[2]).fetchone()))
P
}

start_simmodel --slots 4 --ms-per-token 0.2 || { finish; exit 1; }

cat >"$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  labels: {team: alpha, project: search, environment: prod}
  apiKeys: [{sha256: "$(sha key-alpha)"}]
  gateway: {rate: {cost: 1000000, per: 1s, burst: 1000000}, concurrency: 64}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  namespaces: [beta-prod]
  labels: {team: beta, project: ranking, environment: dev}
  apiKeys: [{sha256: "$(sha key-beta)"}]
  gateway: {rate: {cost: 100, per: 1s, burst: 100}, concurrency: 8}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 16, queue: 64}
  cost: {model: tokens}
  timeout: 5s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: dead}
spec:
  match: {pathPrefix: /dead/}
  upstream: {address: "127.0.0.1:1", capacity: 4, queue: 4}
  cost: {model: requests}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: tiny}
spec:
  match: {pathPrefix: /v1/chat/completions}
  upstream: {address: "$SIM", capacity: 1, queue: 1}
  cost: {model: requests}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {resource: nvidia.com/gpu, flavor: a100, perHour: "2.50"}
  - {resource: cpu, perHour: "0.031"}
  - {route: chat, per1kTokensIn: "0.002", per1kTokensOut: "0.006"}
  - {route: dead, perRequest: "0.001"}
  - {route: tiny, perRequest: "0.001"}
---
apiVersion: v1
kind: Namespace
metadata:
  name: alpha-prod
  labels: {team: alpha, project: training, environment: prod}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-alpha}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: alpha-prod}
spec: {clusterQueue: cq-alpha}
Y
cat >"$TMP/train.yaml" <<'Y'
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: train, namespace: alpha-prod}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: t
          resources: {requests: {cpu: "4", nvidia.com/gpu: "4"}}
Y

# wait_until SECONDS CMD...: polls CMD every 0.2 s until it succeeds (the
# metering tick is every 2 s, commits every 0.2 s; a loaded machine is slower)
wait_until() {
    local n=$(($1 * 5))
    shift
    for _ in $(seq 1 "$n"); do "$@" && return 0; sleep 0.2; done
    return 1
}
usage_has() { curl -s "$ADMIN/v1/usage" | python3 -c "$1" 2>/dev/null; }
alpha_gpus() { # N: alpha holds N GPUs on /v1/usage
    usage_has "import json,sys; u=json.load(sys.stdin); a=[t for t in u['tenants'] if t['name']=='alpha'][0]; sys.exit(0 if a['gpusInUse']==$1 else 1)"
}
metrics_have() { curl -s "$ADMIN/metrics" | grep -qF -- "$1"; }

DATA="$TMP/data"
start_tenantd "$DATA" --config "$TMP/platform.yaml" || { finish; exit 1; }
ADMIN="http://127.0.0.1:$TD_PORT"
GW="http://127.0.0.1:$TD_DATA_PORT"

# ---- requests: 12 ok for alpha, beta over its rate ----
: >"$TMP/alpha.json"
for i in $(seq 1 12); do
    curl -s -H "Authorization: Bearer key-alpha" \
        -d "{\"model\":\"m\",\"prompt\":\"request number $i of the ledger test\",\"max_tokens\":$((5 + i))}" \
        "$GW/v1/completions" >>"$TMP/alpha.json"
    echo >>"$TMP/alpha.json"
done
B429=0 BOK=0
for i in $(seq 1 10); do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer key-beta" \
        -d '{"model":"m","prompt":"beta","max_tokens":40}' "$GW/v1/completions")
    [ "$code" = 429 ] && B429=$((B429 + 1))
    [ "$code" = 200 ] && BOK=$((BOK + 1))
done
[ "$B429" -gt 0 ] && ok "beta was rate limited ($B429 x 429, $BOK ok)" || not_ok "beta never got 429"
# an upstream that refuses (502) and one too slow for the client's deadline (504)
expect_grep "502 from a dead upstream" <(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer key-beta" "$GW/dead/x") "502"
expect_grep "504 past the client's deadline" <(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer key-alpha" -H "X-Request-Timeout-Ms: 30" \
    -d '{"model":"m","prompt":"slow","max_tokens":2000}' "$GW/v1/completions") "504"
# 16 at once on a route of 1 slot and a short queue: some are shed (503)
CURLS=()
for i in $(seq 1 16); do
    curl -s -m 20 -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer key-alpha" \
        -H "X-Criticality: sheddable" -d '{"model":"m","prompt":"s","max_tokens":1500}' \
        "$GW/v1/chat/completions" >"$TMP/tiny.$i" &
    CURLS+=($!)
done
wait "${CURLS[@]}"
SHED=$(cat "$TMP"/tiny.* | grep -c 503)
TINY_OK=$(cat "$TMP"/tiny.* | grep -c 200)
[ "$SHED" -gt 0 ] && ok "the tiny route shed $SHED of 16 ($TINY_OK ok)" || { not_ok "nothing shed"; cat "$TMP"/tiny.*; }
read -r ALPHA_IN ALPHA_OUT <<<"$(python3 -c '
import json, sys
pi = po = 0
for line in open(sys.argv[1]):
    if line.strip():
        u = json.loads(line)["usage"]; pi += u["prompt_tokens"]; po += u["completion_tokens"]
print(pi, po)' "$TMP/alpha.json")"

# ---- a workload: admitted, then finished by deleting it ----
code=$(curl -s -o "$TMP/submit.out" -w '%{http_code}' --data-binary @"$TMP/train.yaml" "$ADMIN/v1/workloads")
[ "$code" = 200 ] && ok "workload submitted" || { not_ok "submit: $code"; cat "$TMP/submit.out"; }
wait_until 15 alpha_gpus 4.0 || not_ok "no metering tick saw the workload running"
curl -s "$ADMIN/v1/usage" >"$TMP/usage.json"
python3 - "$TMP/usage.json" "$TINY_OK" "$SHED" >"$TMP/check" 2>&1 <<'P'
import json, sys
u = json.load(open(sys.argv[1]))
a = [t for t in u["tenants"] if t["name"] == "alpha"][0]
assert a["gpusInUse"] == 4.0 and a["gpuQuota"] == 8.0, a
assert a["team"] == "alpha" and a["requests"]["accepted"] == 12 + int(sys.argv[2]), a
assert a["requests"]["shed"] == int(sys.argv[3]), a
print("ok")
P
expect_grep "/v1/usage: alpha holds 4 of its 8 GPUs, its accepted and shed requests" "$TMP/check" "ok"
sleep 1.1 # the interval lasts a measurable time
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE \
    "$ADMIN/v1/objects?kind=Workload&namespace=alpha-prod&name=train")
[ "$code" = 200 ] && ok "workload deleted (finished)" || not_ok "delete: $code"
# the next tick closes its interval; its commit prices it
wait_until 15 metrics_have 'item="gpu/a100"' || not_ok "the finished interval was not priced"
curl -s "$ADMIN/metrics" >"$TMP/metrics"
stop_tenantd

# ---- what the ledger holds ----
expect_grep "requests of alpha: 12 ok with simmodel's tokens" <(sql "$DATA" \
    "select sum(count), sum(tokens_in), sum(tokens_out), min(gpu_milli_seconds) > 0, count(*) < sum(count) from records where kind=0 and tenant='alpha' and outcome='ok' and route='chat'") \
    "12|$ALPHA_IN|$ALPHA_OUT|1|1"
expect_grep "alpha's labels from its Tenant" <(sql "$DATA" \
    "select distinct team || '/' || project || '/' || environment || '/' || route from records where tenant='alpha' and kind=0") \
    "alpha/search/prod/chat"
expect_grep "beta's 429s and its ok requests are counted in aggregated records" <(sql "$DATA" \
    "select sum(case when outcome='rejected' then count end), sum(case when outcome='ok' then count end), max(case when outcome='rejected' then tokens_in + tokens_out else 0 end), sum(outcome='rejected') < $B429 from records where tenant='beta' and route='chat'") \
    "$B429|$BOK|0|1"
expect_grep "the 503s are counted in shed records of route tiny" <(sql "$DATA" \
    "select sum(case when outcome='shed' then count end), sum(case when outcome='ok' then count end) from records where route='tiny'") \
    "$SHED|$TINY_OK"
expect_grep "the 502 is an error record of route dead" <(sql "$DATA" \
    "select count(*), tenant, route from records where outcome='error'") "1|beta|dead"
expect_grep "the 504 is a timeout record, no tokens billed" <(sql "$DATA" \
    "select count(*), tenant, tokens_in + tokens_out from records where outcome='timeout'") "1|alpha|0"
expect_grep "one finished interval of the workload, owner labels from its Namespace" <(sql "$DATA" \
    "select count(*), workload, flavor, cluster_queue, outcome, tenant, team, project, gpu_milli, cpu_milli, (end_ns - start_ns) >= 1000000000 from records where kind=1") \
    "1|alpha-prod/train|a100|cq-alpha|finished|alpha|alpha|training|4000|4000|1"
TOTAL=$(sql "$DATA" "select count(*) from records")

# ---- prices: tenantd_cost_total is exact ----
WANT=$(python3 -c "print('%.9f' % (($ALPHA_IN * 0.002 + $ALPHA_OUT * 0.006) / 1000))")
expect_grep "tenantd_cost_total prices alpha's tokens exactly" "$TMP/metrics" \
    "tenantd_cost_total{team=\"alpha\",project=\"search\",environment=\"prod\",item=\"tokens/chat\",model=\"\"} $WANT"
expect_grep "the workload's GPU-hours are priced for its labels" "$TMP/metrics" \
    'tenantd_cost_total{team="alpha",project="training",environment="prod",item="gpu/a100",model=""}'
expect_grep "ledger records counted" "$TMP/metrics" "tenantd_ledger_records_total $TOTAL"
expect_grep "nothing dropped" "$TMP/metrics" "tenantd_ledger_dropped_total 0"

# ---- restart: the replayed interval is not counted twice ----
start_tenantd "$DATA" --config "$TMP/platform.yaml" || { finish; exit 1; }
ADMIN="http://127.0.0.1:$TD_PORT"
curl -s -H "Authorization: Bearer key-alpha" -d '{"model":"m","prompt":"after","max_tokens":3}' \
    "http://127.0.0.1:$TD_DATA_PORT/v1/completions" >/dev/null
curl -s "$ADMIN/v1/usage" >"$TMP/usage2.json"
# the period's cost read back at start: alpha's cost includes the first run
python3 - "$TMP/usage2.json" "$WANT" >"$TMP/check" 2>&1 <<'P'
import json, sys
u = json.load(open(sys.argv[1]))
a = [t for t in u["tenants"] if t["name"] == "alpha"][0]
assert a["cost"] >= float(sys.argv[2]) and a["gpusInUse"] == 0, a
print("ok")
P
expect_grep "after a restart /v1/usage starts from the period in the ledger" "$TMP/check" "ok"
# scoping: a tenant's key sees itself only; nothing else without the token
curl -s -H "Authorization: Bearer key-beta" "$ADMIN/v1/usage" >"$TMP/beta.json"
python3 -c 'import json,sys; u=json.load(open(sys.argv[1])); t=u["tenants"]; assert [x["name"] for x in t]==["beta"], t; assert u["routes"]==[] and "unpriced" not in u, u; print("ok")' \
    "$TMP/beta.json" >"$TMP/check" 2>&1
expect_grep "a tenant's key reads only its own usage" "$TMP/check" "ok"
stop_tenantd
expect_grep "restart: +1 request, the interval not again" <(sql "$DATA" \
    "select count(*), sum(kind=1) from records") "$((TOTAL + 1))|1"

# ---- an admin token guards /v1/usage and /ui's data ----
echo "0123456789abcdef-token" >"$TMP/token"
start_tenantd "$DATA" --config "$TMP/platform.yaml" --admin-token-file "$TMP/token" || { finish; exit 1; }
ADMIN="http://127.0.0.1:$TD_PORT"
expect_grep "without a credential /v1/usage is 401" \
    <(curl -s -o /dev/null -w '%{http_code}' "$ADMIN/v1/usage") "401"
expect_grep "the admin token reads every tenant" \
    <(curl -s -H "Authorization: Bearer 0123456789abcdef-token" "$ADMIN/v1/usage") '"name": "alpha"'
expect_grep "/ui is the dashboard page" <(curl -s "$ADMIN/ui") "tenantd: usage by tenant"
stop_tenantd

# ---- --ledger off: nothing written ----
start_tenantd "$TMP/off" --config "$TMP/platform.yaml" --ledger off || { finish; exit 1; }
curl -s -H "Authorization: Bearer key-alpha" -d '{"model":"m","prompt":"x","max_tokens":3}' \
    "http://127.0.0.1:$TD_DATA_PORT/v1/completions" >/dev/null
expect_grep "--ledger off: /v1/usage says so" <(curl -s "http://127.0.0.1:$TD_PORT/v1/usage") \
    '"enabled": false'
stop_tenantd
[ ! -e "$TMP/off/ledger.db" ] && ok "--ledger off: no ledger.db" || not_ok "--ledger off wrote a ledger"
expect_rc "--ledger maybe is refused" 2 "$TENANTD" --data "$TMP/x" --ledger maybe
expect_grep "names the flag" "$TMP/err" "--ledger must be on or off"
expect_rc "--ledger-retention 3 parsecs is refused" 2 "$TENANTD" --data "$TMP/x" --ledger-retention 3pc

# ---- a newer schema is refused, the file untouched ----
python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"update meta set value=99 where key='schema'\"); c.commit()" "$DATA/ledger.db"
before=$(sha256sum "$DATA/ledger.db" | cut -d' ' -f1)
expect_rc "tenantd refuses a ledger of a newer schema" 1 "$TENANTD" --data "$DATA" --config "$TMP/platform.yaml" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0
expect_grep "says which and why" "$TMP/err" "ledger.db: ledger schema version 99 was written by a newer tenantd"
[ "$before" = "$(sha256sum "$DATA/ledger.db" | cut -d' ' -f1)" ] && ok "the newer ledger is unchanged" || not_ok "the newer ledger was modified"

# ---- tenantctl simulate --ledger ----
SIMDIR="$TMP/sim"
expect_rc "simulate --ledger" 0 "$TENANTCTL" simulate -c "$EX/kueue/platform.yaml" \
    -c "$EX/kueue/owners.yaml" -f "$EX/kueue/workloads.yaml" --ledger "$SIMDIR" --start 2026-11-01T00:00:00Z
expect_grep "says what it wrote" "$TMP/err" "6 interval records in $SIMDIR/ledger.db (6 new"
# b-pretrain: 2 pods x 8 A100 from t=0 to its preemption at t=300, then again
# from t=1500 for its remaining 3300 s; start = 2026-11-01T00:00:00Z
expect_grep "b-pretrain's two intervals on the virtual clock" <(sql "$SIMDIR" \
    "select group_concat(outcome || ':' || ((start_ns - 1793491200000000000) / 1000000000) || '-' || ((end_ns - 1793491200000000000) / 1000000000) || ':' || gpu_milli || ':' || team, ',') from (select * from records where workload='team-b/b-pretrain' order by start_ns)") \
    "evicted:0-300:16000:b,finished:1500-4800:16000:b"
expect_grep "b-gang: the launcher's CPUs on a100, the workers' GPUs and CPUs on h100" <(sql "$SIMDIR" \
    "select group_concat(flavor || ':' || gpu_milli || ':' || cpu_milli, ',') from (select * from records where workload='team-b/b-gang' order by flavor)") \
    "a100:0:2000,h100:12000:24000"
expect_grep "GPU-hours of the whole timeline" <(sql "$SIMDIR" \
    "select sum(gpu_milli * (end_ns - start_ns) / 1000000000) / 3600 from records") "$(python3 -c 'print((16*300 + 16*3300 + 8*1200 + 12*2400 + 4*1800)*1000//3600)')"
expect_rc "simulate --ledger again" 0 "$TENANTCTL" simulate -c "$EX/kueue/platform.yaml" \
    -c "$EX/kueue/owners.yaml" -f "$EX/kueue/workloads.yaml" --ledger "$SIMDIR" --start 2026-11-01T00:00:00Z
expect_grep "a rerun adds nothing" "$TMP/err" "(0 new"
expect_grep "still 6 records" <(sql "$SIMDIR" "select count(*) from records") "6"
expect_rc "simulate --start without --ledger" 2 "$TENANTCTL" simulate -c "$EX/kueue/platform.yaml" \
    -f "$EX/kueue/workloads.yaml" --start 2026-11-01T00:00:00Z
expect_rc "simulate --start not RFC 3339" 2 "$TENANTCTL" simulate -c "$EX/kueue/platform.yaml" \
    -f "$EX/kueue/workloads.yaml" --ledger "$SIMDIR" --start 2026-13-01
expect_grep "names the value" "$TMP/err" '"2026-13-01" is not an RFC 3339 time'
finish
