#!/usr/bin/env bash
# quick_gateway.sh BUILD_DIR [SECONDS] - a quick side-by-side of tenantd's
# gateway and nginx (limit_req per key + proxy_pass with upstream keepalive)
# in front of the same simmodel (zero service time), same wrk settings.
# Limits are set high enough that nothing is rejected: this measures the
# proxied path with limits on. The full suite is `make bench` (issue 8).
set -u
BUILD=${1:-build}
SECS=${2:-8}
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT
for t in wrk nginx; do command -v $t >/dev/null || { echo "$t is required (apt-get install wrk nginx-light)"; exit 1; }; done

"$BUILD/simmodel" --listen 127.0.0.1:0 --port-file "$TMP/sim" --slots 4096 --ms-per-token 0 \
    --prefill-ms-per-token 0 --max-queue 100000 2>/dev/null &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$TMP/sim" ] && break; sleep 0.1; done
SIM=$(cat "$TMP/sim")

KEY=bench-key
cat > "$TMP/cfg.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: bench}
spec:
  apiKeys: [{sha256: "$(printf %s $KEY | sha256sum | cut -d' ' -f1)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 100000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /}
  upstream: {address: "127.0.0.1:$SIM", capacity: 4096, queue: 4096}
  cost: {model: requests}
Y
"$BUILD/tenantd" --data "$TMP/data" --config "$TMP/cfg.yaml" --admin-listen 127.0.0.1:0 \
    --listen 127.0.0.1:0 --listen-port-file "$TMP/gw" --workers 1 2>/dev/null &
PIDS+=($!)
for _ in $(seq 50); do [ -s "$TMP/gw" ] && break; sleep 0.1; done
GW=$(cat "$TMP/gw")

NG=$((30000 + RANDOM % 10000))
cat > "$TMP/nginx.conf" <<N
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  limit_req_zone \$http_authorization zone=perkey:10m rate=100000000r/s;
  upstream up { server 127.0.0.1:$SIM; keepalive 64; }
  server {
    listen 127.0.0.1:$NG;
    location / {
      limit_req zone=perkey burst=100000000 nodelay;
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
N
nginx -c "$TMP/nginx.conf" -p "$TMP" &
PIDS+=($!)
sleep 0.5

cat > "$TMP/post.lua" <<'L'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer bench-key"
wrk.body = '{"prompt":"hello","max_tokens":1}'
L
run() { # NAME PORT
    wrk -t1 -c32 -d"${SECS}s" --latency -s "$TMP/post.lua" "http://127.0.0.1:$2/v1/completions" >"$TMP/$1.out" 2>&1
    local rps p50 p99
    rps=$(awk '/Requests\/sec/ {print $2}' "$TMP/$1.out")
    p50=$(awk '$1=="50%" {print $2}' "$TMP/$1.out")
    p99=$(awk '$1=="99%" {print $2}' "$TMP/$1.out")
    printf '%-10s %12s %10s %10s\n' "$1" "$rps" "$p50" "$p99"
    eval "RPS_$1=$rps"
}
printf '%-10s %12s %10s %10s\n' system req/s p50 p99
run direct "$SIM"
run nginx "$NG"
run tenantd "$GW"
awk -v t="$RPS_tenantd" -v n="$RPS_nginx" 'BEGIN { printf "tenantd/nginx throughput: %.2fx\n", t / n }'
