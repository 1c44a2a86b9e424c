#!/usr/bin/env bash
# gateway_ir.sh BUILD_DIR [N] - instructions per request of the gateway's
# proxied and rejected paths under callgrind: tenantd (one worker) and a
# simmodel from BUILD_DIR, the config of scripts/bench.sh (the abuser at
# 1 per hour, so that every request past the first is a 429), a warm-up of
# 300 requests, counters zeroed, then N (default 2000) requests through
# bench/gateway_ir.py, all threads counted. Prints "proxied IR" and
# "reject IR" per request; ONLY=proxied or ONLY=reject runs one of them.
set -eu
BUILD=$1
N=${2:-2000}
root=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; [ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
wait_file() { for _ in $(seq 600); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "no $1" >&2; exit 1; }
"$BUILD/simmodel" --listen 127.0.0.1:0 --port-file "$TMP/sim.port" --slots 4096 --ms-per-token 0 \
    --prefill-ms-per-token 0 --max-queue 100000 2>/dev/null &
PIDS+=($!)
wait_file "$TMP/sim.port"
SIM=$(cat "$TMP/sim.port")
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
: > "$TMP/td.yaml"
for t in a b c; do cat >> "$TMP/td.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-$t}
spec:
  apiKeys: [{sha256: "$(sha key-$t)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 100000}
---
Y
done
cat >> "$TMP/td.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: abuser}
spec:
  apiKeys: [{sha256: "$(sha key-x)"}]
  gateway: {rate: {cost: 1, per: 1h, burst: 1}, concurrency: 100000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /}
  upstream: {address: "127.0.0.1:$SIM", capacity: 4096, queue: 4096}
  cost: {model: requests}
Y
run() { # NAME KEYS
    rm -f "$TMP/td.port"
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$1.%p" \
        "$BUILD/tenantd" --data "$TMP/data.$1" --config "$TMP/td.yaml" --admin-listen 127.0.0.1:0 \
        --port-file "$TMP/td.admin" --listen 127.0.0.1:0 --listen-port-file "$TMP/td.port" \
        --workers 1 2>"$TMP/td.$1.err" &
    local pid=$!
    PIDS+=($pid)
    wait_file "$TMP/td.port"
    local port
    port=$(cat "$TMP/td.port")
    python3 "$root/bench/gateway_ir.py" "$port" "$2" 300 >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    local seen
    seen=$(python3 "$root/bench/gateway_ir.py" "$port" "$2" "$N")
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    # the dump after zeroing (the other file is the shutdown's)
    local ir
    ir=$(awk '/^desc: Trigger: dump/ {d = 1} /^summary:/ && d {print $2; exit}' "$TMP"/cg."$1".*)
    echo "$1 $((ir / N)) Ir/request ($seen)"
}
[ "${ONLY:-}" = reject ] || run proxied key-a,key-b,key-c
[ "${ONLY:-}" = proxied ] || run reject key-x
