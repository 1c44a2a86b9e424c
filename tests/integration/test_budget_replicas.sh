# test_budget_replicas.sh - money budgets shared by two real tenantd replicas
# (each its own data dir and ledger) through a real redis-server, simmodel
# upstream, CostPolicy 0.001 per token (a request of 3 + 20 tokens costs
# 0.023): 120 requests 40 at a time split across both replicas against a
# budget of 1.00 spend at most 1.00 together (41..43 served: at the end
# each replica may hold less than one request of lease), the same for a
# key's own budget; explain and /metrics show the shared spend; Redis
# killed mid-run -> each replica keeps to budget/2 (less the lease it
# holds), logs once, counts it, and the spend decided meanwhile reaches
# Redis when it is back; a restart of both replicas, and a third replica
# with an empty data dir, keep the spend (it lives in Redis); 20 streams of
# 100,001 tokens over both replicas are cut when the shared budget of 0.50
# has no room for more.
. "$(dirname "$0")/lib.sh"
command -v redis-server >/dev/null || { echo "redis-server is required"; echo "0 passed, 1 failed"; exit 1; }
command -v redis-cli >/dev/null || { echo "redis-cli is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

start_redis() {
    for _attempt in 1 2 3 4 5; do
        redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
            --daemonize no >>"$TMP/redis.log" 2>&1 &
        REDIS_PID=$!
        PIDS+=("$REDIS_PID")
        for _ in $(seq 1 50); do
            redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && return 0
            kill -0 "$REDIS_PID" 2>/dev/null || break
            sleep 0.1
        done
        sleep 0.5
    done
    not_ok "redis-server did not start"; cat "$TMP/redis.log"; return 1
}
REDIS_PORT=$(free_port)
start_redis || { finish; exit 1; }
start_simmodel --slots 64 --ms-per-token 0.05 --default-max-tokens 100001 || { finish; exit 1; }
LONG=$SIM
start_simmodel --slots 64 --ms-per-token 0 || { finish; exit 1; }

tenant() { # NAME BUDGETS [KEYS]
    local keys="[{sha256: \"$(sha "key-$1")\"}]"
    [ $# -ge 3 ] && keys=$3
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: $1}
spec:
  labels: {team: $1, project: p, environment: prod}
  apiKeys: $keys
  budgets: $2
  gateway: {concurrency: 200}
---
Y
}
{
    tenant crowd '[{amount: "1", period: week}]'
    tenant kcrowd '[{amount: "10", period: month}]' \
        "[{sha256: \"$(sha key-bulk)\", name: bulk, budgets: [{amount: \"1\", period: day}]}]"
    tenant outage '[{amount: "1", period: month}]'
    tenant slow '[{amount: "1", period: month}]'
    tenant lstream '[{amount: "0.5", period: month}]'
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
metadata: {name: long}
spec:
  match: {pathPrefix: /v1/completions}
  upstream: {address: "$LONG", capacity: 64}
  cost: {model: tokens}
  timeout: 120s
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {route: chat, per1kTokens: "1"}
  - {route: long, per1kTokens: "0.0017"}
Y
} > "$TMP/platform.yaml"

start_replica() { # NAME
    local dir="$TMP/$1"
    mkdir -p "$dir"
    rm -f "$dir/port" "$dir/dataport"
    "$TENANTD" --data "$dir/data" --config "$TMP/platform.yaml" --admin-listen 127.0.0.1:0 \
        --port-file "$dir/port" --listen 127.0.0.1:0 --listen-port-file "$dir/dataport" \
        --workers 2 --redis "127.0.0.1:$REDIS_PORT" --replicas 2 2>>"$dir/log" &
    eval "PID_$1=$!"
    PIDS+=($!)
    wait_file "$dir/dataport" 100 && wait_file "$dir/port" 100 ||
        { not_ok "replica $1 did not start"; cat "$dir/log"; return 1; }
    eval "GW_$1=http://127.0.0.1:$(cat "$dir/dataport")"
    eval "AD_$1=http://127.0.0.1:$(cat "$dir/port")"
}
stop_replica() { # NAME
    local pid
    eval "pid=\$PID_$1"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null && ok "replica $1 stops cleanly" || not_ok "replica $1: exit $? on SIGTERM"
}
start_replica r1 || { finish; exit 1; }
start_replica r2 || { finish; exit 1; }

# client.py KEY N PAR GW... : N requests, PAR at a time, request i to GW[i % len];
# prints a JSON list of {gw, status, body, tokens}.
cat > "$TMP/client.py" <<'P'
import json, sys, threading, time, http.client, urllib.parse
key, n, par, gws = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
body = json.dumps({"messages": [{"role": "user", "content": "hello world!"}], "max_tokens": 20})
out, lock, idx = [], threading.Lock(), [0]
def worker():
    while True:
        with lock:
            if idx[0] >= n:
                return
            i = idx[0]
            idx[0] += 1
        u = urllib.parse.urlparse(gws[i % len(gws)])
        t0 = time.monotonic()
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
        c.request("POST", "/v1/chat/completions", body=body,
                  headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read().decode()
        c.close()
        tok = json.loads(raw)["usage"]["total_tokens"] if r.status == 200 else 0
        with lock:
            out.append({"gw": i % len(gws), "status": r.status, "body": raw, "tokens": tok,
                        "ms": (time.monotonic() - t0) * 1000})
ts = [threading.Thread(target=worker) for _ in range(par)]
[t.start() for t in ts]
[t.join() for t in ts]
json.dump(out, sys.stdout)
P
client() { python3 "$TMP/client.py" "$@"; }
# served FILE [GW] : requests served (of replica GW)
served() {
    python3 -c 'import json,sys; rs=json.load(open(sys.argv[1])); g=sys.argv[2:]
print(sum(1 for r in rs if r["status"] == 200 and (not g or r["gw"] == int(g[0]))))' "$@"
}
metric() { curl -s --max-time 5 "$1/metrics" | grep -v '^#' | grep -F "$2" | awk '{print $2}'; }
# hash_total NAME PERIOD : the budget's total in Redis (micro-units)
hash_total() {
    local start
    start=$(python3 -c 'import sys,time,calendar,datetime as d
now=d.datetime.now(d.timezone.utc); p=sys.argv[1]
s={"day": now.replace(hour=0,minute=0,second=0,microsecond=0),
   "week": (now-d.timedelta(days=now.weekday())).replace(hour=0,minute=0,second=0,microsecond=0),
   "month": now.replace(day=1,hour=0,minute=0,second=0,microsecond=0)}[p]
print(calendar.timegm(s.timetuple()))' "$2")
    redis-cli -p "$REDIS_PORT" hget "tenantd:budget:$1:$2:$start" total
}

# 1. 120 requests, 40 at a time, alternating between the replicas.
client key-crowd 120 40 "$GW_r1" "$GW_r2" > "$TMP/crowd.json"
python3 - "$TMP/crowd.json" <<'P' > "$TMP/crowd.out" && ok "crowd: $(cat "$TMP/crowd.out")" || not_ok "crowd: $(cat "$TMP/crowd.out") $(head -c 300 "$TMP/crowd.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
ok = [r for r in rs if r["status"] == 200]
no = [r for r in rs if r["status"] == 429]
assert len(ok) + len(no) == 120, [r["status"] for r in rs]
assert all(json.loads(r["body"])["error"]["code"] == "budget_exceeded" for r in no)
spent = sum(r["tokens"] for r in ok) * 0.001
per = [sum(1 for r in ok if r["gw"] == g) for g in (0, 1)]
assert 41 <= len(ok) <= 43 and spent <= 1.0 + 1e-9, (len(ok), spent)
assert per[0] > 0 and per[1] > 0, per
print("120 requests 40 at a time over 2 replicas: %d served (%d + %d), spend %.3f of 1" % (len(ok), per[0], per[1], spent))
P
CROWD=$(served "$TMP/crowd.json")
# Without sharing each replica would have served 43 on its own (86).
t=$(hash_total crowd week)
python3 -c "import sys; t=int('$t' or 0); s=$CROWD*23000; assert s <= t <= 1000000, (s, t)" &&
    ok "Redis holds the week's claims: $t micro-units, within [$((CROWD * 23000)), 1000000]" ||
    not_ok "redis total '$t' for $CROWD served"
curl -s --max-time 5 "$AD_r1/v1/explain/request?tenant=crowd" > "$TMP/explain.json"
python3 - "$TMP/explain.json" "$CROWD" <<'P' && ok "explain on replica 1 shows the shared spend ($(cat "$TMP/ex.out"))" || not_ok "explain: $(head -c 600 "$TMP/explain.json")"
import json, sys
e = json.load(open(sys.argv[1]))
b = e["limits"]["budgets"][0]
served = int(sys.argv[2])
assert e["sharedBudgets"]["shared"] is True and e["sharedBudgets"]["degraded"] is False, e
assert served * 0.023 - 1e-9 <= b["spent"] <= 1.0 + 1e-9, (b, served)
open(sys.argv[1].replace("explain.json", "ex.out"), "w").write("spent %.3f, %d served" % (b["spent"], served))
P
v1=$(metric "$AD_r1" 'tenantd_budget_spent{tenant="crowd",period="week"}')
v2=$(metric "$AD_r2" 'tenantd_budget_spent{tenant="crowd",period="week"}')
python3 -c "
for v in ('$v1', '$v2'):
    assert $CROWD * 0.023 - 0.05 - 1e-9 <= float(v) <= 1.0 + 1e-9, v" &&
    ok "metrics of both replicas show the shared week spend ($v1, $v2), not their own halves" ||
    not_ok "spend metrics: '$v1' '$v2' for $CROWD served"
c1=$(metric "$AD_r1" 'tenantd_budget_redis_calls_total')
c2=$(metric "$AD_r2" 'tenantd_budget_redis_calls_total')
echo "# Redis calls for budgets: $c1 + $c2 for 120 requests ($CROWD served)"
[ -n "$c1" ] && [ "$c1" -gt 0 ] && [ $((c1 + c2)) -le 40 ] &&
    ok "leases keep Redis off most requests: $((c1 + c2)) calls for 120 requests (at most 1 in 3)" ||
    not_ok "redis calls: '$c1' '$c2'"

# 1b. Streams held to a shared budget: 20 streams without
# max_tokens, alternating between the replicas, each answered with
# 100,001 tokens ($0.17) against a $0.50 month budget. Each reserves
# $0.0069683 and extends its holds through Redis as it goes; a stream the
# shared budget cannot pay for is cut with the SSE error event. At most 2
# run to their end ($0.34; a third would pass $0.50), and the two
# replicas' ledgers together charge at most the budget + one reservation.
cat > "$TMP/streams.py" <<'P'
import http.client, json, sys, threading, urllib.parse
key, n, gws = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
out = [None] * n
def one(i):
    u = urllib.parse.urlparse(gws[i % len(gws)])
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    c.request("POST", "/v1/completions", body='{"prompt":"hello world!","stream":true}',
              headers={"Authorization": "Bearer " + key})
    r = c.getresponse()
    last = None
    for line in r:
        if line.startswith(b"data: "):
            last = line[6:].strip().decode()
    out[i] = {"status": r.status, "last": last}
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[t.start() for t in ts]
[t.join() for t in ts]
json.dump(out, sys.stdout)
P
python3 "$TMP/streams.py" key-lstream 20 "$GW_r1" "$GW_r2" > "$TMP/streams.json"
lsum() { # the tokens of lstream's ledger records on both replicas
    python3 - "$TMP/r1/data/ledger.db" "$TMP/r2/data/ledger.db" <<'P'
import sqlite3, sys
n = t = 0
for f in sys.argv[1:]:
    c = sqlite3.connect("file:" + f + "?mode=ro", uri=True)
    a, b = c.execute("select coalesce(sum(count), 0), coalesce(sum(tokens_in + tokens_out), 0) from records where tenant='lstream'").fetchone()
    n += a
    t += b
print(n, t)
P
}
for _ in $(seq 1 25); do set -- $(lsum 2>/dev/null); [ "${1:-0}" -ge 20 ] && break; sleep 0.2; done
python3 - "$TMP/streams.json" "${1:-0}" "${2:-0}" <<'P' > "$TMP/streams.out" && ok "shared budget: $(cat "$TMP/streams.out")" || not_ok "shared streams: $(cat "$TMP/streams.out") $(head -c 600 "$TMP/streams.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
n, tokens = int(sys.argv[2]), int(sys.argv[3])
refused = [r for r in rs if r["status"] == 429]
served = [r for r in rs if r["status"] == 200]
done = [r for r in served if r["last"] == "[DONE]"]
cut = [r for r in served if r["last"] != "[DONE]" and json.loads(r["last"])["error"]["code"] == "budget_exceeded"]
spent = tokens * 0.0017 / 1000
print("20 streams over 2 replicas: %d cut, %d ran to their end, %d refused; the ledgers charge %.7f of 0.50 (bound 0.5069683)"
      % (len(cut), len(done), len(refused), spent))
assert len(cut) + len(done) + len(refused) == 20 and len(done) <= 2 and cut, rs
assert n == len(served), (n, len(served))
assert 0.5 - 0.0069683 <= spent <= 0.5069683, spent
P

# 2. A key's own budget of 1 (day), the tenant's 10: the same bound at the key.
client key-bulk 120 40 "$GW_r1" "$GW_r2" > "$TMP/bulk.json"
python3 - "$TMP/bulk.json" <<'P' > "$TMP/bulk.out" && ok "key bulk: $(cat "$TMP/bulk.out")" || not_ok "key bulk: $(cat "$TMP/bulk.out") $(head -c 300 "$TMP/bulk.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
ok = [r for r in rs if r["status"] == 200]
no = [r for r in rs if r["status"] == 429]
assert len(ok) + len(no) == 120
for r in no:
    b = json.loads(r["body"])["error"]
    assert b["code"] == "budget_exceeded" and b["level"] == "key" and b["key"] == "bulk", b
spent = sum(r["tokens"] for r in ok) * 0.001
assert 41 <= len(ok) <= 43 and spent <= 1.0 + 1e-9, (len(ok), spent)
print("120 requests over 2 replicas against the key's 1.00: %d served, spend %.3f, refusals name the key" % (len(ok), spent))
P
t=$(hash_total kcrowd/bulk day)
[ -n "$t" ] && [ "$t" -le 1000000 ] && ok "the key's budget is one Redis hash (kcrowd/bulk): $t" ||
    not_ok "key hash total '$t'"

# 3. Redis killed mid-run. 10 requests on each replica first (0.46 of 1).
client key-outage 20 4 "$GW_r1" "$GW_r2" > "$TMP/o1.json"
[ "$(served "$TMP/o1.json")" = 20 ] && ok "outage tenant: 20 served before Redis dies" ||
    not_ok "before the outage: $(served "$TMP/o1.json") served"
kill -9 "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
client key-outage 80 8 "$GW_r1" "$GW_r2" > "$TMP/o2.json"
a=$(served "$TMP/o2.json" 0)
b=$(served "$TMP/o2.json" 1)
# each replica: own spend 0.23 + new <= 0.5 - its lease (< 0.05): 9 to 11 more each
[ "$a" -ge 9 ] && [ "$a" -le 11 ] && [ "$b" -ge 9 ] && [ "$b" -le 11 ] &&
    ok "Redis down: each replica keeps to its share (1/2 less its lease): $a and $b more served" ||
    not_ok "during the outage: $a and $b served"
for r in r1 r2; do
    n=$(grep -c "unreachable for tenant budgets" "$TMP/$r/log")
    [ "$n" = 1 ] && ok "$r logs the outage once" || not_ok "$r outage lines: $n"
done
eval ad=\$AD_r1
[ "$(metric "$ad" 'tenantd_budget_shared_degraded')" = 1 ] && ok "tenantd_budget_shared_degraded 1" ||
    not_ok "degraded metric: $(metric "$ad" 'tenantd_budget_shared_degraded')"
v=$(metric "$ad" 'tenantd_budget_fallback_total')
[ -n "$v" ] && [ "$v" -ge 40 ] && ok "fallback reservations counted: $v" || not_ok "fallback metric '$v'"

start_redis || { finish; exit 1; }
sleep 1.1 # past the breaker's longest backoff
client key-outage 20 4 "$GW_r1" "$GW_r2" > "$TMP/o3.json"
OUT_TOTAL=$(( 20 + a + b + $(served "$TMP/o3.json") ))
[ "$OUT_TOTAL" -le 43 ] && ok "across the outage at most the budget is spent: $OUT_TOTAL served in all" ||
    not_ok "outage tenant: $OUT_TOTAL served"
t=$(hash_total outage month)
[ -n "$t" ] && [ "$t" -ge $(( (20 + a + b) * 23000 )) ] &&
    ok "the spend decided while Redis was away reached the new Redis: $t micro-units for $((20 + a + b)) served" ||
    not_ok "after recovery Redis holds '$t' for $((20 + a + b)) served"
for r in r1 r2; do
    grep -q "reachable again for tenant budgets" "$TMP/$r/log" && ok "$r logs the recovery" ||
        not_ok "$r: no recovery line"
done
[ "$(metric "$ad" 'tenantd_budget_shared_degraded')" = 0 ] && ok "tenantd_budget_shared_degraded back to 0" ||
    not_ok "degraded metric after recovery"

# 4. Redis hangs (SIGSTOP): a call times out after 50 ms, then the breaker
# keeps requests from waiting; each replica keeps to its share meanwhile.
client key-slow 4 2 "$GW_r1" "$GW_r2" > /dev/null
kill -STOP "$REDIS_PID"
client key-slow 40 4 "$GW_r1" "$GW_r2" > "$TMP/slow.json"
kill -CONT "$REDIS_PID"
python3 - "$TMP/slow.json" <<'P' > "$TMP/slow.out" && ok "Redis hung: $(cat "$TMP/slow.out")" || not_ok "Redis hung: $(cat "$TMP/slow.out") $(head -c 300 "$TMP/slow.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
per = [sum(1 for r in rs if r["status"] == 200 and r["gw"] == g) for g in (0, 1)]
worst = max(r["ms"] for r in rs)
# 2 before + at most 0.5/0.023 = 21 each (less the lease held)
assert all(17 <= p + 2 <= 21 for p in per), per
assert worst < 1000, worst
print("%d and %d served at budget/2 each, slowest request %.0f ms" % (per[0], per[1], worst))
P
for r in r1 r2; do
    grep -q "unreachable for tenant budgets (timed out)" "$TMP/$r/log" && ok "$r logs the timeout" ||
        not_ok "$r: no timeout line: $(grep unreachable "$TMP/$r/log")"
done
sleep 1.5 # the breaker's longest wait, then the pushers
t=$(hash_total slow month)
s=$(served "$TMP/slow.json")
[ -n "$t" ] && [ "$t" -ge $(( (4 + s) * 23000 )) ] &&
    ok "after the hang the spend of $((4 + s)) requests is in Redis: $t micro-units" ||
    not_ok "after the hang Redis holds '$t' for $((4 + s)) served"

# 5. Restart both replicas (leases go back to Redis at shutdown), and start a
# third with an empty data dir: the week's spend holds for all of them.
client key-crowd 4 2 "$GW_r1" "$GW_r2" > /dev/null # the crowd hash again in the new Redis
before=$(hash_total crowd week)
stop_replica r1
stop_replica r2
after=$(hash_total crowd week)
[ -n "$after" ] && [ -n "$before" ] && [ "$after" -le "$before" ] &&
    ok "stopped replicas gave their unused leases back: $before -> $after micro-units" ||
    not_ok "give-back at shutdown: '$before' -> '$after'"
start_replica r1 || { finish; exit 1; }
start_replica r2 || { finish; exit 1; }
start_replica r3 || { finish; exit 1; }
client key-crowd 30 6 "$GW_r1" "$GW_r2" "$GW_r3" > "$TMP/again.json"
more=$(served "$TMP/again.json")
[ $((CROWD + more)) -le 43 ] &&
    ok "after a restart (and on a new replica with no ledger) the week's spend holds: $more more served, $((CROWD + more)) in all" ||
    not_ok "after restart: $more more served on top of $CROWD"
curl -s --max-time 5 "$AD_r3/v1/explain/request?tenant=crowd" > "$TMP/explain3.json"
python3 -c "
import json; b = json.load(open('$TMP/explain3.json'))['limits']['budgets'][0]
assert b['spent'] >= $CROWD * 0.023 - 1e-9, b" &&
    ok "the new replica's explain shows the spend of the others" ||
    not_ok "explain on r3: $(head -c 400 "$TMP/explain3.json")"
stop_replica r1
stop_replica r2
stop_replica r3
finish
