#!/usr/bin/env bash
# fleet.sh BUILD_DIR OUT.jsonl - the fleet table of `make bench`: tenantd
# with one Route of three endpoints (balance leastRequests) against nginx
# (least_conn) and haproxy (balance leastconn) over the same three simmodel
# upstreams, one of them slow (SLOW_MS ms a token against FAST_MS), all
# three proxies at their defaults (workers = cores). Closed loop: wrk with
# CONNS connections POSTs completions of TOKENS tokens for DUR s, REPS runs
# per system, interleaved. One JSON line per run: requests/s, p50/p99 of
# all, the share of requests the slow upstream served (its /stats), the
# proxy's CPU microseconds per request, and errors.
# Env: DUR (5), REPS (3), QUICK (1: DUR 2, no warm-up but the first),
# CONNS (32), TOKENS (16), FAST_MS (1), SLOW_MS (8).
set -euo pipefail
BUILD=${1:?usage: fleet.sh BUILD_DIR OUT.jsonl}
OUT=${2:?usage: fleet.sh BUILD_DIR OUT.jsonl}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=${QUICK:-0}
REPS=${REPS:-3}
if [ "$QUICK" = 1 ]; then DUR=${FLEET_DUR:-2}; else DUR=${FLEET_DUR:-5}; fi
CONNS=${CONNS:-32}
TOKENS=${TOKENS:-16}
FAST_MS=${FAST_MS:-1}
SLOW_MS=${SLOW_MS:-8}
NCPU=$(nproc)
for t in wrk nginx haproxy curl python3; do
    command -v $t >/dev/null || { echo "fleet: $t is missing" >&2; exit 1; }
done
[ -x "$BUILD/tenantd" ] && [ -x "$BUILD/simmodel" ] || { echo "fleet: build $BUILD first" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done
    echo "fleet: nothing listens on port $1 ($2 failed to start)" >&2; return 1; }
wait_file() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.05; done; return 1; }
cpu_ticks() { local t=0 p; for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# the three upstreams: A and B fast, C slow
declare -A UP UP_PID
for u in A B C; do
    ms=$FAST_MS; [ "$u" = C ] && ms=$SLOW_MS
    "$BUILD/simmodel" --listen 127.0.0.1:0 --port-file "$TMP/sim.$u" --slots 4096 --max-queue 100000 \
        --ms-per-token "$ms" --prefill-ms-per-token 0 2>/dev/null &
    PIDS+=($!); UP_PID[$u]=$!
    wait_file "$TMP/sim.$u" || { echo "fleet: simmodel $u did not start" >&2; exit 1; }
    UP[$u]=$(cat "$TMP/sim.$u")
done

sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
cat > "$TMP/td.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: fleet}
spec:
  apiKeys: [{sha256: "$(sha key-f)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 100000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: fleet}
spec:
  match: {pathPrefix: /}
  upstream:
    endpoints: [{address: "127.0.0.1:${UP[A]}"}, {address: "127.0.0.1:${UP[B]}"}, {address: "127.0.0.1:${UP[C]}"}]
    capacity: 4096
    queue: 4096
  cost: {model: requests}
Y
"$BUILD/tenantd" --data "$TMP/tddata" --config "$TMP/td.yaml" --admin-listen 127.0.0.1:0 \
    --port-file "$TMP/td.admin" --listen 127.0.0.1:0 --listen-port-file "$TMP/td.port" \
    2>"$TMP/tenantd.err" &
PIDS+=($!); TD_PID=$!
wait_file "$TMP/td.port" || { cat "$TMP/tenantd.err" >&2; exit 1; }

NG=$(free_port)
cat > "$TMP/nginx.conf" <<N
worker_processes auto;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  upstream up {
    least_conn;
    server 127.0.0.1:${UP[A]}; server 127.0.0.1:${UP[B]}; server 127.0.0.1:${UP[C]};
    keepalive 64;
  }
  server {
    listen 127.0.0.1:$NG;
    location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
N
nginx -c "$TMP/nginx.conf" -p "$TMP" &
PIDS+=($!); NG_PID=$!
wait_port "$NG" nginx

HA=$(free_port)
cat > "$TMP/haproxy.cfg" <<H
global
  maxconn 8000
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe
  bind 127.0.0.1:$HA
  default_backend be
backend be
  balance leastconn
  http-reuse always
  server a 127.0.0.1:${UP[A]}
  server b 127.0.0.1:${UP[B]}
  server c 127.0.0.1:${UP[C]}
H
haproxy -db -f "$TMP/haproxy.cfg" 2>"$TMP/haproxy.err" &
PIDS+=($!); HA_PID=$!
wait_port "$HA" haproxy || { cat "$TMP/haproxy.err" >&2; exit 1; }
sleep 0.2
NG_WORKERS=$(pgrep -P "$NG_PID" | tr '\n' ' ')
declare -A PORT=([tenantd]=$(cat "$TMP/td.port") [nginx]=$NG [haproxy]=$HA)
declare -A PROC=([tenantd]=$TD_PID [nginx]="$NG_PID $NG_WORKERS" [haproxy]=$HA_PID)

printf '{"prompt":"hello","max_tokens":%d}' "$TOKENS" > "$TMP/body.json"
served() { curl -s --max-time 5 "http://127.0.0.1:$1/stats" | sed 's/.*"served":\([0-9]*\).*/\1/'; }
run() { # SYS SECS -> "requests duration_us non2xx errors p50_us p99_us p999_us"
    WRK_KEYS=key-f WRK_BODY_FILE="$TMP/body.json" WRK_PATH=/v1/completions \
        wrk -t1 -c"$CONNS" -d"$2s" --timeout 10s -s "$ROOT/bench/wrk_keys.lua" \
        "http://127.0.0.1:${PORT[$1]}/v1/completions" 2>&1 | awk '/^RESULT/ {print $2, $3, $4, $5, $6, $7, $8}'
}
echo "fleet: 3 simmodels (A, B at ${FAST_MS} ms/token, C at ${SLOW_MS} ms/token), $TOKENS tokens a request," \
    "wrk c=$CONNS, $REPS x ${DUR}s; tenantd (leastRequests), nginx least_conn, haproxy leastconn," \
    "workers = cores ($NCPU); load: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$OUT"
for rep in $(seq 1 "$REPS"); do
    for sys in tenantd nginx haproxy; do
        { [ "$QUICK" != 1 ] || [ "$rep" = 1 ]; } && run "$sys" 1 >/dev/null
        a0=$(served "${UP[A]}"); b0=$(served "${UP[B]}"); c0=$(served "${UP[C]}")
        t0=$(cpu_ticks ${PROC[$sys]})
        read -r n dur non2xx errs p50 p99 p999 <<< "$(run "$sys" "$DUR")"
        t1=$(cpu_ticks ${PROC[$sys]})
        a=$(($(served "${UP[A]}") - a0)); b=$(($(served "${UP[B]}") - b0)); c=$(($(served "${UP[C]}") - c0))
        python3 - "$sys" "$rep" "$n" "$dur" "$non2xx" "$errs" "$p50" "$p99" "$a" "$b" "$c" \
            "$((t1 - t0))" "$TICK_US" "$(cut -d' ' -f1 /proc/loadavg)" >> "$OUT" <<'P'
import json, sys
s, rep, n, dur, non2xx, errs, p50, p99, a, b, c, ticks, tick_us, load = sys.argv[1:]
n, dur, a, b, c = int(n), int(dur), int(a), int(b), int(c)
tot = a + b + c
print(json.dumps({"system": s, "rep": int(rep), "requests": n, "rps": n * 1e6 / dur if dur else 0,
                  "p50_ms": int(p50) / 1000, "p99_ms": int(p99) / 1000,
                  "non2xx": int(non2xx), "errors": int(errs),
                  "served": {"A": a, "B": b, "C": c}, "slow_share": c / tot if tot else 0,
                  "cpu_us_per_req": int(ticks) * int(tick_us) / n if n else -1,
                  "load1": float(load)}))
P
        tail -1 "$OUT" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("  %-8s rep %d: %7.0f req/s  p50 %6.1f ms  p99 %6.1f ms  slow share %4.1f%%  cpu %5.1f us/req  errors %d" % (r["system"], r["rep"], r["rps"], r["p50_ms"], r["p99_ms"], 100*r["slow_share"], r["cpu_us_per_req"], r["errors"] + r["non2xx"]))'
    done
done
