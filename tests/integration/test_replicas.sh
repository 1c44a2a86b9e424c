# test_replicas.sh - two tenantd replicas share one tenant's limit through a
# real redis-server: together they admit no more than the global limit
# (within the documented lease bound), fall back to limit/replicas each when
# Redis dies, and recover when it returns.
. "$(dirname "$0")/lib.sh"
command -v redis-server >/dev/null || { echo "redis-server is required (apt-get install redis-server)"; echo "0 passed, 1 failed"; exit 1; }

start_redis() {
    for _attempt in 1 2 3 4 5; do
        redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no \
            --daemonize no >"$TMP/redis.log" 2>&1 &
        REDIS_PID=$!
        PIDS+=("$REDIS_PID")
        for _ in $(seq 1 50); do
            (echo >"/dev/tcp/127.0.0.1/$REDIS_PORT") 2>/dev/null && return 0
            kill -0 "$REDIS_PID" 2>/dev/null || break
            sleep 0.1
        done
        sleep 0.5 # the port may still be held for a moment after the last Redis died
    done
    not_ok "redis-server did not start"; cat "$TMP/redis.log"; return 1
}

REDIS_PORT=$(free_port)
start_redis || { finish; exit 1; }

start_simmodel --slots 64 --ms-per-token 0 || { finish; exit 1; }

# One tenant, 20 requests/s with a burst of 20, shared by both replicas.
cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: shared-t}
spec:
  apiKeys: [{sha256: "$(printf %s key-shared | sha256sum | cut -d' ' -f1)"}]
  gateway: {rate: {cost: 20, per: 1s, burst: 20}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /}
  upstream: {address: "127.0.0.1:$SIM_PORT", capacity: 64, queue: 64}
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
P1=$(cat "$TMP/r1/dataport")
P2=$(cat "$TMP/r2/dataport")

# fire PORT SECONDS OUT : sequential requests for SECONDS, status codes to OUT.
fire() {
    local end=$(( $(date +%s%N) + $2 * 1000000000 ))
    while [ "$(date +%s%N)" -lt "$end" ]; do
        curl -s -o /dev/null -w '%{http_code}\n' -H 'Authorization: Bearer key-shared' \
            -H 'Content-Type: application/json' --data '{"prompt":"hi","max_tokens":1}' \
            "http://127.0.0.1:$1/v1/completions"
    done >"$3"
}

T=4
fire "$P1" $T "$TMP/c1" & f1=$!
fire "$P2" $T "$TMP/c2" & f2=$!
fire "$P1" $T "$TMP/c3" & f3=$!
fire "$P2" $T "$TMP/c4" & f4=$!
wait $f1 $f2 $f3 $f4
ok_count=$(cat "$TMP"/c[1-4] | grep -c '^200$')
limited=$(cat "$TMP"/c[1-4] | grep -c '^429$')
total=$(cat "$TMP"/c[1-4] | wc -l)
echo "# shared limit: $ok_count admitted, $limited limited of $total in ${T}s (limit: burst 20 + 20/s)"
# Global bound: burst + rate*T, plus the lease bound (replicas x chunk, chunk = 5% of burst -> 1 each).
bound=$((20 + 20 * T + 2 * 2))
[ "$total" -gt $((bound * 2)) ] && ok "load exceeded the limit ($total requests)" || not_ok "load too small to test ($total requests)"
[ "$ok_count" -le "$bound" ] && ok "two replicas admit at most the global limit ($ok_count <= $bound)" || not_ok "over-admission: $ok_count > $bound"
[ "$ok_count" -ge $(( (20 + 20 * (T - 1)) * 8 / 10 )) ] && ok "and most of it ($ok_count)" || not_ok "under-admission: only $ok_count"
[ "$(grep -c '^200$' "$TMP/c1")" -gt 0 ] && [ "$(grep -c '^200$' "$TMP/c2")" -gt 0 ] && ok "both replicas admit" || not_ok "a replica admitted nothing"

# Redis dies: each replica falls back to rate/replicas locally and says so.
kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null
sleep 1.5
fire "$P1" 3 "$TMP/d1" & f1=$!
fire "$P2" 3 "$TMP/d2" & f2=$!
wait $f1 $f2
down_ok=$(cat "$TMP"/d[12] | grep -c '^200$')
echo "# redis down: $down_ok admitted in 3s (fallback 10/s per replica, burst 10 each)"
grep -q "unreachable" "$TMP/r1/log" && ok "replica logs that redis is unreachable" || { not_ok "no degradation log line"; cat "$TMP/r1/log"; }
[ "$down_ok" -gt 0 ] && ok "still serving while redis is down" || not_ok "nothing served while redis is down"
[ "$down_ok" -le $((2 * (10 + 10 * 3) + 4)) ] && ok "fallback keeps the global limit ($down_ok)" || not_ok "fallback over-admits: $down_ok"
curl -s "http://127.0.0.1:$(cat "$TMP/r1/port")/metrics" > "$TMP/metrics"
expect_grep "metrics show degradation" "$TMP/metrics" "tenantd_shared_limit_degraded 1"

start_redis || { finish; exit 1; }
sleep 2
grep -q "reachable again" "$TMP/r1/log" && ok "replica recovers when redis returns" || { not_ok "no recovery log line"; cat "$TMP/r1/log"; }
curl -s "http://127.0.0.1:$(cat "$TMP/r1/port")/metrics" > "$TMP/metrics"
expect_grep "metrics show recovery" "$TMP/metrics" "tenantd_shared_limit_degraded 0"
finish
