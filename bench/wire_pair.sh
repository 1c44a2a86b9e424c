#!/usr/bin/env bash
# wire_pair.sh OLD_BUILD NEW_BUILD - starts a tenantd + simmodel from each
# build with the config bench/wire_compare.py expects, runs it, stops them.
set -eu
OLD=$1; NEW=$2
root=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"' EXIT
wait_file() { for _ in $(seq 300); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "no $1" >&2; exit 1; }
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
start() { # NAME BUILD
    "$2/simmodel" --listen 127.0.0.1:0 --port-file "$TMP/$1.sim" --ms-per-token 0 --prefill-ms-per-token 0 2>/dev/null &
    PIDS+=($!)
    wait_file "$TMP/$1.sim"
    local sim; sim=$(cat "$TMP/$1.sim")
    : > "$TMP/$1.yaml"
    for t in a b c; do cat >> "$TMP/$1.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-$t}
spec:
  apiKeys: [{sha256: "$(sha key-$t)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 100000}
---
Y
    done
    cat >> "$TMP/$1.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: abuser}
spec:
  apiKeys: [{sha256: "$(sha key-z)"}]
  gateway: {rate: {cost: 2, per: 1h, burst: 2}, concurrency: 100000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: dead}
spec:
  match: {pathPrefix: /dead/}
  upstream: {address: "127.0.0.1:1"}
  cost: {model: requests}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /}
  upstream: {address: "127.0.0.1:$sim"}
  cost: {model: requests}
Y
    "$2/tenantd" --data "$TMP/$1.data" --config "$TMP/$1.yaml" --admin-listen 127.0.0.1:0 \
        --port-file "$TMP/$1.admin" --listen 127.0.0.1:0 --listen-port-file "$TMP/$1.port" --workers 1 2>"$TMP/$1.err" &
    PIDS+=($!)
    wait_file "$TMP/$1.port"
}
start old "$OLD"
start new "$NEW"
python3 "$root/bench/wire_compare.py" "$(cat "$TMP/old.port")" "$(cat "$TMP/new.port")"
