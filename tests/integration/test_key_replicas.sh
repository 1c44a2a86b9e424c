# test_key_replicas.sh - a key's own limit holds across two tenantd replicas
# sharing a real redis-server: key ci-bot (10 requests per hour) is
# admitted at most 10 times plus the lease bound in all, not 10 per
# replica, each refusal names level "key", and the Redis bucket is keyed
# "tenant/key"; the tenant's (roomy) limit is shared beside it.
. "$(dirname "$0")/lib.sh"
command -v redis-server >/dev/null || { echo "redis-server is required (apt-get install redis-server)"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    >"$TMP/redis.log" 2>&1 &
PIDS+=($!)
wait_port "$REDIS_PORT" || { not_ok "redis-server did not start"; finish; exit 1; }

start_simmodel --slots 16 --ms-per-token 0 || { finish; exit 1; }

cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: shared-t}
spec:
  apiKeys:
  - {sha256: "$(printf %s key-ci | sha256sum | cut -d' ' -f1)", name: ci-bot, rate: {cost: 10, per: 1h}}
  gateway: {rate: {cost: 1000, per: 1h}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /}
  upstream: {address: "127.0.0.1:$SIM_PORT"}
  cost: {model: requests}
Y

start_replica() { # NAME
    local dir="$TMP/$1"
    mkdir -p "$dir"
    "$TENANTD" --data "$dir/data" --config "$TMP/platform.yaml" --admin-listen 127.0.0.1:0 \
        --port-file "$dir/port" --listen 127.0.0.1:0 --listen-port-file "$dir/dataport" \
        --workers 1 --redis "127.0.0.1:$REDIS_PORT" --replicas 2 2>"$dir/log" &
    PIDS+=($!)
    wait_file "$dir/dataport" 100 || { not_ok "replica $1 did not start"; cat "$dir/log"; return 1; }
}
start_replica r1 || { finish; exit 1; }
start_replica r2 || { finish; exit 1; }

# 40 requests, alternating replicas, 30 ms apart (leases refill in the
# background, never on the request path).
python3 - "$(cat "$TMP/r1/dataport")" "$(cat "$TMP/r2/dataport")" > "$TMP/res" <<'P'
import http.client, json, sys, time
ports = sys.argv[1:]
out = []
for i in range(40):
    c = http.client.HTTPConnection("127.0.0.1", int(ports[i % 2]), timeout=10)
    c.request("POST", "/v1/completions", body='{"prompt":"hi","max_tokens":1}',
              headers={"Authorization": "Bearer key-ci", "Content-Type": "application/json"})
    r = c.getresponse()
    out.append({"status": r.status, "body": r.read().decode(), "port": ports[i % 2]})
    c.close()
    time.sleep(0.03)
json.dump(out, sys.stdout)
P
python3 - "$TMP/res" > "$TMP/sum" <<'P' && ok "$(cat "$TMP/sum")" || not_ok "shared key limit: $(cat "$TMP/sum") $(head -c 500 "$TMP/res")"
import json, sys
rs = json.load(open(sys.argv[1]))
ok = [r for r in rs if r["status"] == 200]
no = [r for r in rs if r["status"] == 429]
assert len(ok) + len(no) == 40, [r["status"] for r in rs]
for r in no:
    b = json.loads(r["body"])["error"]
    assert b["level"] == "key" and b["key"] == "ci-bot", b
# global: 10 + lease bound (2 replicas x chunk of 5% of 10, at least 1 each);
# unshared, each replica would have admitted 10
assert 5 <= len(ok) <= 12, len(ok)
assert {r["port"] for r in ok} == set(sys.argv[1:] and {r["port"] for r in rs}), "both replicas admit"
print("key ci-bot across 2 replicas: %d of 40 admitted (limit 10 + lease bound 2), every refusal level key" % len(ok))
P
if command -v redis-cli >/dev/null; then
    redis-cli -p "$REDIS_PORT" --scan > "$TMP/keys"
    expect_grep "the key's bucket in Redis is named tenant/key" "$TMP/keys" "shared-t/ci-bot"
fi
finish
