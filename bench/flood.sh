#!/usr/bin/env bash
# flood.sh BUILD_DIR SYS [SECS] [WORKERS] - the flood phase: three
# well-behaved tenants at 20 requests/s (tenantctl loadtest, client library)
# through SYS (tenantd, nginx or haproxy) to simmodel at 50 ms a request
# (Route capacity 8), alone (the baseline) and then beside an abuser
# limited to 20 requests/s that sends over 64 connections and retries every
# 429 at once (a second loadtest process, `client: abusive`, so that its
# event loop does not slow the others' measurement). Prints one line:
#   FLOOD sys base_p50 base_p99 base_success flood_p50 flood_p99
#         flood_success abuser_attempts_per_s abuser_429 cpu_us_per_attempt
#         abuser_accepted cpu_pct
# (p50/p99: the worst of the three tenants, ms; success: the lowest; CPU:
# SYS's utime+stime over the abuser's run, less the others' share measured
# in the baseline, divided by the abuser's attempts; cpu_pct: SYS's CPU over
# the abuser's run in % of one core, the others' share included.)
set -euo pipefail
BUILD=${1:?usage: flood.sh BUILD_DIR SYS [SECS] [WORKERS]}
SYS=${2:?usage: flood.sh BUILD_DIR SYS [SECS] [WORKERS]}
SECS=${3:-8}
WORKERS=${4:-$(nproc)}
ABUSER_CONNS=${ABUSER_CONNS:-64}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done
    echo "flood: nothing listens on port $1 ($2)" >&2; return 1; }
cpu_ticks() { local t=0 p; for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

# simmodel: 20 output tokens at 2.5 ms, no prefill: 50 ms a request
"$BUILD/simmodel" --listen 127.0.0.1:0 --port-file "$TMP/sim.port" --slots 64 --ms-per-token 2.5 \
    --prefill-ms-per-token 0 2>"$TMP/sim.err" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$TMP/sim.port" ] && break; sleep 0.05; done
SIM=$(cat "$TMP/sim.port")

PORT=$(free_port)
case $SYS in
tenantd)
    : >"$TMP/td.yaml"
    for t in a b c; do cat >>"$TMP/td.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-$t}
spec:
  apiKeys: [{sha256: "$(sha key-$t)"}]
  gateway: {rate: {cost: 6000, per: 1s, burst: 12000}, concurrency: 32}
---
Y
    done
    cat >>"$TMP/td.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: abuser}
spec:
  apiKeys: [{sha256: "$(sha key-abuser)"}]
  gateway: {rate: {cost: 2400, per: 1s, burst: 2400}, concurrency: 2}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: completions}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "127.0.0.1:$SIM", capacity: 8, queue: 256}
  cost: {model: tokens}
  timeout: 10s
Y
    "$BUILD/tenantd" --data "$TMP/tddata" --config "$TMP/td.yaml" --admin-listen 127.0.0.1:0 \
        --port-file "$TMP/td.admin" --listen "127.0.0.1:$PORT" --workers "$WORKERS" \
        ${TD_FLOOD_FLAGS:-} 2>"$TMP/sys.err" &
    PIDS+=($!)
    SYS_PIDS=$!
    ;;
nginx)
    cat >"$TMP/nginx.conf" <<N
worker_processes $WORKERS;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  map \$http_authorization \$key_abuse { "Bearer key-abuser" \$http_authorization; default ""; }
  map \$http_authorization \$key_norm  { "Bearer key-abuser" ""; default \$http_authorization; }
  limit_req_zone \$key_norm  zone=norm:10m rate=50r/s;
  limit_req_zone \$key_abuse zone=abuse:1m rate=20r/s;
  limit_req_status 429;
  upstream up { server 127.0.0.1:$SIM; keepalive 64; } # no max_conns: without a queue (nginx Plus) it answers 502
  server {
    listen 127.0.0.1:$PORT;
    location / {
      limit_req zone=norm burst=100 nodelay;
      limit_req zone=abuse burst=20 nodelay;
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
N
    nginx -c "$TMP/nginx.conf" -p "$TMP" 2>"$TMP/sys.err" &
    PIDS+=($!)
    ;;
haproxy)
    cat >"$TMP/haproxy.cfg" <<H
global
  nbthread $WORKERS
  maxconn 8000
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  timeout queue 10s
frontend fe
  bind 127.0.0.1:$PORT
  stick-table type string len 64 size 100k expire 30s store http_req_rate(1s)
  http-request track-sc0 req.hdr(Authorization)
  acl abuser req.hdr(Authorization) -m str "Bearer key-abuser"
  http-request deny deny_status 429 if abuser { sc_http_req_rate(0) gt 20 }
  http-request deny deny_status 429 if { sc_http_req_rate(0) gt 50 }
  default_backend be
backend be
  http-reuse always
  server up 127.0.0.1:$SIM maxconn 8
H
    haproxy -db -f "$TMP/haproxy.cfg" 2>"$TMP/sys.err" &
    PIDS+=($!)
    ;;
*) echo "flood: SYS is tenantd, nginx or haproxy, not $SYS" >&2; exit 2 ;;
esac
SYS_PID=$!
wait_port "$PORT" "$SYS" || { cat "$TMP/sys.err" >&2; exit 1; }
sleep 0.2
SYS_PIDS="$SYS_PID $( (pgrep -P "$SYS_PID" || true) | tr "\n" " ")"

scenario() { # FILE WHO
    printf 'apiVersion: tenantd.dev/v1alpha1\nkind: LoadScenario\nmetadata: {name: flood}\nspec:\n  tenants:\n' >"$1"
    if [ "$2" = others ]; then
        for t in a b c; do
            echo "  - {name: team-$t, key: key-$t, rate: 20, promptTokens: 100, maxTokens: 20, client: wellBehaved, connections: 4}" >>"$1"
        done
    else
        echo "  - {name: abuser, key: key-abuser, rate: ${ABUSER_RATE:-400}, promptTokens: 100, maxTokens: 20, client: ${ABUSER_CLIENT:-abusive}, connections: $ABUSER_CONNS}" >>"$1"
    fi
}
scenario "$TMP/others.yaml" others
scenario "$TMP/abuser.yaml" abuser
TARGET="http://127.0.0.1:$PORT"
lt() { # SCENARIO SECS OUT
    "$BUILD/tenantctl" loadtest --scenario "$1" --target "$TARGET" --duration "$2" --format json -q \
        >"$3" 2>"$3.err" || [ $? -le 1 ]
}
# worst p50, worst p99, lowest success and requests of the three tenants
others_figs() {
    python3 - "$1" <<'P'
import json, sys
t = json.load(open(sys.argv[1]))["tenants"]
o = [t["team-" + x] for x in "abc"]
print(max(v["p50Ms"] or 0 for v in o), max(v["p99Ms"] or 0 for v in o),
      min(v["success"] for v in o), sum(v["offered"] for v in o))
P
}
lt "$TMP/others.yaml" 1 "$TMP/warm.json" # warm-up: upstream connections, caches
t0=$(cpu_ticks $SYS_PIDS)
lt "$TMP/others.yaml" "$SECS" "$TMP/base.json"
t1=$(cpu_ticks $SYS_PIDS)
read -r bp50 bp99 bsucc bn <<<"$(others_figs "$TMP/base.json")"
base_ticks_per_req=$(awk -v d=$((t1 - t0)) -v n="$bn" 'BEGIN { print (n > 0 ? d / n : 0) }')

t0=$(cpu_ticks $SYS_PIDS) w0=$(date +%s%N)
lt "$TMP/abuser.yaml" $((SECS + 2)) "$TMP/abuser.json" &
AB=$!
sleep 1
lt "$TMP/others.yaml" "$SECS" "$TMP/flood.json"
wait $AB
t1=$(cpu_ticks $SYS_PIDS) w1=$(date +%s%N)
read -r fp50 fp99 fsucc fn <<<"$(others_figs "$TMP/flood.json")"
python3 - "$TMP/abuser.json" "$SYS" $((t1 - t0)) "$base_ticks_per_req" "$fn" "$TICK_US" \
    "$bp50" "$bp99" "$bsucc" "$fp50" "$fp99" "$fsucc" $(((w1 - w0) / 1000)) <<'P'
import json, sys
a = json.load(open(sys.argv[1]))
ab, dur = a["tenants"]["abuser"], a["durationS"]
sys_, ticks, base_tpr, fn, tick_us = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
net = max(ticks - base_tpr * fn, 0) * tick_us
att = ab["sent"]
print("FLOOD", sys_, *sys.argv[7:13], "%.1f" % (att / dur), ab["rateLimited"],
      "%.2f" % (net / att if att else -1), ab["accepted"],
      "%.1f" % (ticks * tick_us * 100 / int(sys.argv[13])))
P
