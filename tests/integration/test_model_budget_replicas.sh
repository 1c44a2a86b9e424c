# test_model_budget_replicas.sh - a budget for one model shared by two real
# tenantd replicas through a real redis-server: the
# model big-70b is priced 1 per 1k tokens by the CostPolicy, its day
# budget is 0.50; 60 requests for it, 20 at a time over both replicas,
# spend at most 0.50 together (the budget's hash in Redis says so), while
# 30 requests for small-8b in the same run are all served; the refusals
# name the model.
. "$(dirname "$0")/lib.sh"
command -v redis-server >/dev/null || { echo "redis-server is required"; echo "0 passed, 1 failed"; exit 1; }
command -v redis-cli >/dev/null || { echo "redis-cli is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    >>"$TMP/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 50); do redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
redis-cli -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG || { not_ok "redis-server did not start"; finish; exit 1; }
start_simmodel --slots 64 --ms-per-token 0 || { finish; exit 1; }

cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: crowd}
spec:
  labels: {team: crowd, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-crowd)"}]
  gateway: {concurrency: 200}
  budgets:
  - {amount: "100", period: month}
  - {amount: "0.5", period: day, models: [big-70b]}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 64, queue: 256}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  prices:
  - {route: chat, per1kTokens: "0.001"}
  - {model: big-70b, per1kTokens: "1"}
Y
start_replica() { # NAME
    local dir="$TMP/$1"
    mkdir -p "$dir"
    "$TENANTD" --data "$dir/data" --config "$TMP/platform.yaml" --admin-listen 127.0.0.1:0 \
        --port-file "$dir/port" --listen 127.0.0.1:0 --listen-port-file "$dir/dataport" \
        --workers 2 --redis "127.0.0.1:$REDIS_PORT" --replicas 2 2>>"$dir/log" &
    PIDS+=($!)
    wait_file "$dir/dataport" 100 && wait_file "$dir/port" 100 ||
        { not_ok "replica $1 did not start"; cat "$dir/log"; return 1; }
    eval "GW_$1=http://127.0.0.1:$(cat "$dir/dataport")"
}
start_replica r1 || { finish; exit 1; }
start_replica r2 || { finish; exit 1; }

# client.py KEY OUT GW1 GW2 MODEL:N... : every request, 20 at a time, the
# i-th to GW[i % 2]; a JSON list of {model, status, body, tokens} into OUT.
cat > "$TMP/client.py" <<'P'
import json, sys, threading, http.client, urllib.parse
key, out_file, gws, asks = sys.argv[1], sys.argv[2], sys.argv[3:5], sys.argv[5:]
jobs = [m for a in asks for m in [a.split(":")[0]] * int(a.split(":")[1])]
out, lock, idx = [], threading.Lock(), [0]
def worker():
    while True:
        with lock:
            if idx[0] >= len(jobs):
                return
            i = idx[0]
            idx[0] += 1
        u = urllib.parse.urlparse(gws[i % 2])
        body = json.dumps({"model": jobs[i], "max_tokens": 20,
                           "messages": [{"role": "user", "content": "hello world!"}]})
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
        c.request("POST", "/v1/chat/completions", body=body,
                  headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
        r = c.getresponse()
        raw = r.read().decode()
        c.close()
        tok = json.loads(raw)["usage"]["total_tokens"] if r.status == 200 else 0
        with lock:
            out.append({"model": jobs[i], "status": r.status, "body": raw, "tokens": tok})
ts = [threading.Thread(target=worker) for _ in range(20)]
[t.start() for t in ts]
[t.join() for t in ts]
json.dump(out, open(out_file, "w"))
P
python3 "$TMP/client.py" key-crowd "$TMP/run.json" "$GW_r1" "$GW_r2" big-70b:60 small-8b:30
python3 - "$TMP/run.json" <<'P' > "$TMP/run.out" && ok "$(cat "$TMP/run.out")" || not_ok "run: $(cat "$TMP/run.out")"
import json, sys
rs = json.load(open(sys.argv[1]))
big = [r for r in rs if r["model"] == "big-70b"]
small = [r for r in rs if r["model"] == "small-8b"]
ok = [r for r in big if r["status"] == 200]
no = [r for r in big if r["status"] == 429]
assert len(ok) + len(no) == 60, [r["status"] for r in big]
for r in no:
    e = json.loads(r["body"])["error"]
    assert e["code"] == "budget_exceeded" and e["model"] == "big-70b", e
spent = sum(r["tokens"] for r in ok) / 1000
assert 0.4 < spent <= 0.5 + 1e-9, (len(ok), spent)
assert all(r["status"] == 200 for r in small), [r["status"] for r in small]
print("big-70b: %d served (spent %.3f of 0.50 over both replicas), %d refused naming the model;"
      " small-8b: all 30 served" % (len(ok), spent, len(no)))
P
start=$(python3 -c 'import time,calendar; t=time.gmtime(); print(calendar.timegm((t.tm_year,t.tm_mon,t.tm_mday,0,0,0)))')
total=$(redis-cli -p "$REDIS_PORT" hget "tenantd:budget:crowd/budget:big-70b:day:$start" total)
python3 -c 'import sys; t=int(sys.argv[1]); assert 0 < t <= 500000, t' "${total:-0}" &&
    ok "the budget's spend is shared in Redis under crowd/budget:big-70b ($total micro-units, at most 0.50)" ||
    not_ok "redis total: '${total}' ($(redis-cli -p "$REDIS_PORT" keys '*' | tr '\n' ' '))"
finish
