#!/usr/bin/env bash
# bench.sh BUILD_DIR - `make bench`: every performance target (docs/performance.md)
# measured side by side with its peer in one run on this machine, then
# bench/results/latest.json and docs/benchmarks.md written from the figures.
# QUICK=1 shortens every run (whole suite <= 2 min; full <= 10 min).
# REPS (default 3) runs of each figure; the median is reported, min and max
# shown. Runs of different systems are interleaved so machine noise lands
# on all of them alike.
#
# CPU placement (2 cores): the proxy under test (tenantd / nginx / haproxy,
# one worker each, and the two floors of bench/bench_floor.c) on cpu 0, wrk
# on cpu 1, simmodel unpinned (it shares).
set -euo pipefail
BUILD=${1:-build-bench}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
QUICK=${QUICK:-0}
REPS=${REPS:-3}
# QUICK: 1 s runs, each system warmed up once (before its first run) rather
# than before every run; the full suite warms up before every run.
if [ "$QUICK" = 1 ]; then DUR=${DUR:-1}; WARM=1; LIMOPS=2000000; RSECS=0.5; LSECS=0.5; else
    DUR=${DUR:-5}; WARM=1; LIMOPS=10000000; RSECS=3; LSECS=$DUR; fi
CONNS=${CONNS:-32}
# Each section says how long it took (progress on a long run).
SECTION_T0=$(date +%s%N)
section_done() { local t1; t1=$(date +%s%N)
    awk -v d=$(( (t1 - SECTION_T0) / 1000000 )) -v n="$1" 'BEGIN { printf "  %s: %.1f s\n", n, d / 1000 }'
    SECTION_T0=$t1; }
# warm_up: true when a run needs its warm-up (QUICK: only the first rep's).
warm_up() { [ "$QUICK" != 1 ] || [ "$rep" = 1 ]; }

NCPU=$(nproc)
PIN_PROXY=""; PIN_WRK=""
if command -v taskset >/dev/null && [ "$NCPU" -ge 2 ]; then
    PIN_PROXY="taskset -c 0"; PIN_WRK="taskset -c 1"
fi

# ---- packages (idempotent) and the build ----
bash scripts/install-deps.sh wrk haproxy redis-server python3 >/dev/null
if ! command -v nginx >/dev/null; then
    bash scripts/install-deps.sh nginx-light >/dev/null 2>&1 || bash scripts/install-deps.sh nginx >/dev/null
fi
for t in wrk nginx haproxy redis-server cc curl; do
    command -v $t >/dev/null || { echo "bench: $t is missing and could not be installed" >&2; exit 1; }
done
# s-flood: never time a sanitizer build (a benchmark that picked up
# the ASan binary read 0.55-0.75x nginx); checked before configuring, so that
# a sanitizer build directory is left as it is; say which binary is timed
BENCH_SAN=$(awk -F= '/^TD_SANITIZE:/ {print $2}' "$BUILD/CMakeCache.txt" 2>/dev/null)
case "${BENCH_SAN^^}" in ON | 1 | TRUE | YES | Y)
    echo "bench: $BUILD is a sanitizer build (TD_SANITIZE=$BENCH_SAN): its timings mislead; use a fresh build directory (default build-bench)" >&2
    exit 1 ;;
esac
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j "$NCPU" --target tenantd tenantctl simmodel td_core td_admission td_gateway td_queue td_cost td_io td_client td_kinds -- -s --no-print-directory ||
    { echo "bench: the Release build failed" >&2; exit 1; }
if grep -qa -e __asan_init -e __ubsan_handle "$BUILD/tenantd"; then
    echo "bench: $BUILD/tenantd is built with a sanitizer: its timings mislead" >&2; exit 1
fi
BENCH_BIN="$BUILD/tenantd (CMAKE_BUILD_TYPE=$(awk -F= '/^CMAKE_BUILD_TYPE:/ {print $2}' "$BUILD/CMakeCache.txt"), TD_SANITIZE=${BENCH_SAN:-OFF}, $(git rev-parse --short HEAD 2>/dev/null || echo no-git)$(git diff --quiet HEAD 2>/dev/null || echo +changes))"
echo "timing $BENCH_BIN"
CFLAGS_B="-O2 -std=c11 -Wall -Wextra -Werror -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc"
# the per-layer libraries, top unit first: each calls only the ones after it
# (cmake/layers.cmake), so one pass of the linker resolves them; then what
# they link (CMakeLists.txt's DEPS: libpq for the ledger on PostgreSQL, zlib
# for gzip request bodies)
TD_A="$(for u in kinds client io admission queue gateway cost core; do printf '%s ' "$BUILD/libtd_$u.a"; done)"
TD_A="$TD_A $(pkg-config --libs libfyaml jansson sqlite3 libuv openssl hiredis libpq zlib) -lhttp_parser -lpthread -lm"
cc $CFLAGS_B bench/bench_floor.c -o "$BUILD/bench_floor"
cc $CFLAGS_B bench/bench_limiter.c src/core/limiter.c -lpthread -lm -o "$BUILD/bench_limiter"
cc $CFLAGS_B bench/bench_shared.c $TD_A -lhiredis -lpthread -lm -o "$BUILD/bench_shared"
cc $CFLAGS_B bench/bench_queue.c $TD_A $(pkg-config --libs jansson libfyaml) -lm \
    -o "$BUILD/bench_queue"
cc $CFLAGS_B bench/bench_admit.c $TD_A $(pkg-config --libs jansson libfyaml) -lm \
    -o "$BUILD/bench_admit"
cc $CFLAGS_B bench/bench_loadgen.c -lssl -lcrypto -o "$BUILD/bench_loadgen"
cc $CFLAGS_B bench/bench_ledger.c $TD_A $(pkg-config --libs jansson libfyaml sqlite3) \
    -lpthread -lm -o "$BUILD/bench_ledger"

section_done "packages and build"

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$TMP"
}
trap cleanup EXIT
REC="$TMP/records"
: > "$REC"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.05; done; echo "bench: nothing listens on port $1 ($2 failed to start)" >&2; return 1; }
wait_file() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.05; done; return 1; }

# wrk NAME KEYS PORT SECS CONNS [DELAY_MS] -> "requests dur non2xx errs p50 p99 p999"
wrk_run() {
    local out="$TMP/wrk.$1.out"
    WRK_KEYS=$2 WRK_DELAY_MS=${6:-0} $PIN_WRK wrk -t1 -c"$5" -d"$4s" --timeout 5s \
        -s bench/wrk_keys.lua "http://127.0.0.1:$3${WRK_URL_PATH:-/v1/completions}" >"$out" 2>&1 || true
    awk '/^RESULT/ {print $2, $3, $4, $5, $6, $7, $8}' "$out"
}
record() { echo "$*" >> "$REC"; }
# CPU ticks (utime + stime, all threads) of the given processes.
cpu_ticks() { local t=0 p; for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
# proxy CPU microseconds per request: TICKS_BEFORE REQUESTS PIDS...
cpu_per_req() { local t0=$1 n=$2; shift 2; local t1; t1=$(cpu_ticks "$@")
    awk -v d=$((t1 - t0)) -v n="$n" -v u="$TICK_US" 'BEGIN { printf "%.2f", (n > 0 ? d * u / n : -1) }'; }

MACHINE="$(nproc) cpus, $(lscpu | awk -F: '/Model name/ {gsub(/^ +/, "", $2); print $2; exit}'), Linux $(uname -r)"
echo "tenantd benchmarks  ($MACHINE)"
echo "quick=$QUICK reps=$REPS duration=${DUR}s conns=$CONNS; proxy on cpu 0, wrk on cpu 1, simmodel unpinned"
echo

# ---- 1. gateway vs nginx and haproxy ----
SIMPF="$TMP/sim.port"
"$BUILD/simmodel" --listen 127.0.0.1:0 --port-file "$SIMPF" --slots 4096 --ms-per-token 0 \
    --prefill-ms-per-token 0 --max-queue 100000 2>/dev/null &
PIDS+=($!)
SIM_PID=$!
wait_file "$SIMPF"
SIM=$(cat "$SIMPF")
HIGH=100000000
ABUSE_RATE=300
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
: > "$TMP/td.yaml"
for t in a b c; do cat >> "$TMP/td.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-$t}
spec:
  apiKeys: [{sha256: "$(sha key-$t)"}]
  gateway: {rate: {cost: $HIGH, per: 1s, burst: $HIGH}, concurrency: 100000}
---
Y
done
cat >> "$TMP/td.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: abuser}
spec:
  apiKeys: [{sha256: "$(sha key-x)"}]
  gateway: {rate: {cost: $ABUSE_RATE, per: 1s, burst: $ABUSE_RATE}, concurrency: 100000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /}
  upstream: {address: "127.0.0.1:$SIM", capacity: 4096, queue: 4096}
  cost: {model: requests}
Y
TDP="$TMP/td.port"
$PIN_PROXY "$BUILD/tenantd" --data "$TMP/tddata" --config "$TMP/td.yaml" --admin-listen 127.0.0.1:0 \
    --port-file "$TMP/td.admin" --listen 127.0.0.1:0 --listen-port-file "$TDP" --workers 1 \
    2>"$TMP/tenantd.err" &
PIDS+=($!)
TD_PID=$!
wait_file "$TDP"
TD=$(cat "$TDP")

NG=$(free_port)
cat > "$TMP/nginx.conf" <<N
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx.err warn;
events { worker_connections 4096; }
http {
  access_log off;
  map \$http_authorization \$key_abuse { "Bearer key-x" \$http_authorization; default ""; }
  map \$http_authorization \$key_norm  { "Bearer key-x" ""; default \$http_authorization; }
  limit_req_zone \$key_norm  zone=norm:10m rate=${HIGH}r/s;
  limit_req_zone \$key_abuse zone=abuse:1m rate=${ABUSE_RATE}r/s;
  limit_req_status 429;
  upstream up { server 127.0.0.1:$SIM; keepalive 64; }
  server {
    listen 127.0.0.1:$NG;
    location / {
      limit_req zone=norm burst=$HIGH nodelay;
      limit_req zone=abuse burst=$ABUSE_RATE nodelay;
      proxy_pass http://up;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
N
$PIN_PROXY nginx -c "$TMP/nginx.conf" -p "$TMP" &
PIDS+=($!)
NG_PID=$!
wait_port "$NG" nginx

HA=$(free_port)
cat > "$TMP/haproxy.cfg" <<H
global
  nbthread 1
  maxconn 8000
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
frontend fe
  bind 127.0.0.1:$HA
  stick-table type string len 64 size 100k expire 30s store http_req_rate(1s)
  http-request track-sc0 req.hdr(Authorization)
  acl abuser req.hdr(Authorization) -m str "Bearer key-x"
  http-request deny deny_status 429 if abuser { sc_http_req_rate(0) gt $ABUSE_RATE }
  http-request deny deny_status 429 if { sc_http_req_rate(0) gt $HIGH }
  default_backend be
backend be
  http-reuse always
  server up 127.0.0.1:$SIM maxconn 4096
H
$PIN_PROXY haproxy -db -f "$TMP/haproxy.cfg" 2>"$TMP/haproxy.err" &
PIDS+=($!)
HA_PID=$!
wait_port "$HA" haproxy || { cat "$TMP/haproxy.err" >&2; exit 1; }

# The floors: a byte forwarder (phase A) and a canned 429 (reject path),
# one thread each, pinned like the proxies.
FF=$(free_port)
$PIN_PROXY "$BUILD/bench_floor" forward "$FF" "$SIM" 2>"$TMP/floor.err" &
PIDS+=($!)
FF_PID=$!
wait_port "$FF" "bench_floor forward"
FR=$(free_port)
$PIN_PROXY "$BUILD/bench_floor" reject "$FR" 2>>"$TMP/floor.err" &
PIDS+=($!)
FR_PID=$!
wait_port "$FR" "bench_floor reject"

declare -A PORT=([direct]=$SIM [tenantd]=$TD [nginx]=$NG [haproxy]=$HA [floor-fwd]=$FF [floor-429]=$FR)
NG_WORKERS=$(pgrep -P "$NG_PID" | tr '\n' ' ')
declare -A PROC=([direct]=$SIM_PID [tenantd]=$TD_PID [nginx]="$NG_PID $NG_WORKERS" [haproxy]=$HA_PID
    [floor-fwd]=$FF_PID [floor-429]=$FR_PID)
echo "gateway: tenantd :$TD, nginx :$NG, haproxy :$HA, floors :$FF (forward) :$FR (429), simmodel :$SIM; $REPS x ${DUR}s per figure"
# A measured run: record KIND SYS PHASE ROLE REP + wrk's figures + the
# system's CPU us per request (the direct run's is simmodel's).
measure() { # SYS PHASE KEYS PORT CONNS
    local t0 line
    t0=$(cpu_ticks ${PROC[$1]})
    line=$(wrk_run "$2" "$3" "$4" "$DUR" "$5")
    record gateway "$1" "$2" "${ROLE:-all}" "$rep" $line $(cpu_per_req "$t0" "${line%% *}" ${PROC[$1]})
}
for rep in $(seq "$REPS"); do
    for sys in direct tenantd nginx haproxy floor-fwd floor-429; do
        p=${PORT[$sys]}
        if [ "$sys" = floor-429 ]; then # the reject path's floor: R only
            warm_up && wrk_run warm key-x "$p" "$WARM" "$CONNS" >/dev/null
            ROLE=abuser measure "$sys" R key-x "$p" "$CONNS"
            continue
        fi
        warm_up && wrk_run warm key-a,key-b,key-c "$p" "$WARM" "$CONNS" >/dev/null
        measure "$sys" A key-a,key-b,key-c "$p" "$CONNS"
        [ "$sys" = direct ] || [ "$sys" = floor-fwd ] && continue
        # B: the abuser paced at ~10x its limit (4 conns x 1 ms delay) next
        # to the others' closed loop. CPU per request over both.
        wrk_run B-abuser key-x "$p" "$DUR" 4 1 > "$TMP/abuser.line" &
        ab=$!
        t0=$(cpu_ticks ${PROC[$sys]})
        line=$(wrk_run B key-b,key-c "$p" "$DUR" "$CONNS")
        wait $ab
        ab_line=$(cat "$TMP/abuser.line")
        cpu=$(cpu_per_req "$t0" $((${line%% *} + ${ab_line%% *})) ${PROC[$sys]})
        record gateway "$sys" B others "$rep" $line "$cpu"
        record gateway "$sys" B abuser "$rep" $ab_line "$cpu"
        # R: every request over the limit (closed loop, the abuser's key).
        ROLE=abuser measure "$sys" R key-x "$p" "$CONNS"
    done
    echo "  run $rep/$REPS done"
done
section_done gateway

# ---- 1b. (s-flood) the gateway at defaults, as users start it: nothing
# pinned, every system with as many workers as cores (tenantd with no
# tuning flag, nginx worker_processes auto, haproxy nbthread = cores), wrk
# unpinned, phase A's load. CPU per request over all the system's threads.
TDDP="$TMP/tdd.port"
"$BUILD/tenantd" --data "$TMP/tdddata" --config "$TMP/td.yaml" --admin-listen 127.0.0.1:0 \
    --listen 127.0.0.1:0 --listen-port-file "$TDDP" 2>"$TMP/tdd.err" &
PIDS+=($!)
TDD_PID=$!
wait_file "$TDDP"
NGD=$(free_port)
sed -e 's/^worker_processes 1;/worker_processes auto;/' -e "s/listen 127.0.0.1:$NG;/listen 127.0.0.1:$NGD;/" \
    -e "s#^pid .*#pid $TMP/nginxd.pid;#" "$TMP/nginx.conf" >"$TMP/nginxd.conf"
nginx -c "$TMP/nginxd.conf" -p "$TMP" &
PIDS+=($!)
NGD_PID=$!
wait_port "$NGD" "nginx (defaults)"
HAD=$(free_port)
sed -e "s/nbthread 1/nbthread $NCPU/" -e "s/bind 127.0.0.1:$HA\$/bind 127.0.0.1:$HAD/" \
    "$TMP/haproxy.cfg" >"$TMP/haproxyd.cfg"
haproxy -db -f "$TMP/haproxyd.cfg" 2>"$TMP/haproxyd.err" &
PIDS+=($!)
HAD_PID=$!
wait_port "$HAD" "haproxy (defaults)" || { cat "$TMP/haproxyd.err" >&2; exit 1; }
sleep 0.2
declare -A DPORT=([tenantd]=$(cat "$TDDP") [nginx]=$NGD [haproxy]=$HAD)
declare -A DPROC=([tenantd]=$TDD_PID [nginx]="$NGD_PID $(pgrep -P "$NGD_PID" | tr '\n' ' ')" [haproxy]=$HAD_PID)
echo "gateway at defaults: $NCPU workers each, nothing pinned; $REPS x ${DUR}s"
for rep in $(seq "$REPS"); do
    for sys in tenantd nginx haproxy; do
        p=${DPORT[$sys]}
        warm_up && PIN_WRK="" wrk_run warm key-a,key-b,key-c "$p" "$WARM" "$CONNS" >/dev/null
        t0=$(cpu_ticks ${DPROC[$sys]})
        line=$(PIN_WRK="" wrk_run D key-a,key-b,key-c "$p" "$DUR" "$CONNS")
        record gateway-defaults "$sys" A all "$rep" $line $(cpu_per_req "$t0" "${line%% *}" ${DPROC[$sys]})
    done
done
kill "$TDD_PID" "$NGD_PID" "$HAD_PID" 2>/dev/null || true
section_done gateway-defaults

# ---- 1c. (s-flood) the flood phase (bench/flood.sh): three tenants at
# 20/s through a 50 ms upstream, alone and beside an abuser at 20x its
# 20/s limit over 64 connections retrying each 429 at once; tenantd at its
# defaults, tenantd with the flood defence off, nginx (limit_req per key)
# and haproxy (stick-table per key), as many workers as cores, unpinned.
if [ "$QUICK" = 1 ]; then FLOOD_S=4 FLOOD_REPS=1; else FLOOD_S=8 FLOOD_REPS=$REPS; fi
echo "flood: $FLOOD_REPS x (${FLOOD_S}s alone + ${FLOOD_S}s beside the abuser) per system"
for rep in $(seq "$FLOOD_REPS"); do
    for sys in tenantd tenantd-off nginx haproxy; do
        if [ "$sys" = tenantd-off ]; then
            line=$(TD_FLOOD_FLAGS="--tarpit-after 0" bash bench/flood.sh "$BUILD" tenantd "$FLOOD_S" "$NCPU" |
                awk '/^FLOOD/ {$1 = $2 = ""; print}') || true
        else
            line=$(bash bench/flood.sh "$BUILD" "$sys" "$FLOOD_S" "$NCPU" | awk '/^FLOOD/ {$1 = $2 = ""; print}') || true
        fi
        record flood "$sys" F all "$rep" $line
    done
done
section_done flood

# ---- 6b. metering on vs off: the same tenantd (--ledger on, the default,
# as above) against one started with --ledger off, phase A's load, runs
# interleaved. The ledger's committed records during each run come from
# the on instance's /metrics (tenantd_ledger_records_total).
TDOFFP="$TMP/tdoff.port"
$PIN_PROXY "$BUILD/tenantd" --data "$TMP/tdoffdata" --config "$TMP/td.yaml" --admin-listen 127.0.0.1:0 \
    --listen 127.0.0.1:0 --listen-port-file "$TDOFFP" --workers 1 --ledger off 2>"$TMP/tdoff.err" &
PIDS+=($!)
TDOFF_PID=$!
wait_file "$TDOFFP"
wait_file "$TMP/td.admin"
PORT[tenantd-nometer]=$(cat "$TDOFFP")
PROC[tenantd-nometer]=$TDOFF_PID
PORT[tenantd-meter]=$TD
PROC[tenantd-meter]=$TD_PID
TDADM=$(cat "$TMP/td.admin")
ledger_total() { curl -s "http://127.0.0.1:$TDADM/metrics" | awk '/^tenantd_ledger_records_total / {print $2}'; }
ledger_dropped() { curl -s "http://127.0.0.1:$TDADM/metrics" | awk '/^tenantd_ledger_dropped_total / {print $2}'; }
echo "metering: tenantd --ledger on vs off, phase A load, $REPS x ${DUR}s"
for rep in $(seq "$REPS"); do
    for sys in tenantd-meter tenantd-nometer; do
        p=${PORT[$sys]}
        warm_up && wrk_run warm key-a,key-b,key-c "$p" "$WARM" "$CONNS" >/dev/null
        if [ "$sys" = tenantd-meter ]; then
            sleep 0.3 # the last warm-up records committed (flush_ms 200)
            l0=$(ledger_total); d0=$(ledger_dropped)
            measure "$sys" M key-a,key-b,key-c "$p" "$CONNS"
            sleep 0.3
            l1=$(ledger_total); d1=$(ledger_dropped)
            # committed, dropped, then that run's requests and duration (us)
            record ledger gateway committed all "$rep" $((l1 - l0)) $((d1 - d0)) \
                $(tail -1 "$REC" | awk '{print $6, $7}')
        else
            measure "$sys" M key-a,key-b,key-c "$p" "$CONNS"
        fi
    done
done
kill "$TD_PID" "$TDOFF_PID" 2>/dev/null || true
section_done metering

# ---- 6a. ledger writer: sustained records/s with durability on ----
echo "ledger: td_ledger writer, WAL + synchronous=NORMAL, batches <= 1024, $REPS x ${LSECS}s"
: > "$TMP/ledger.jsonl"
for rep in $(seq "$REPS"); do
    for np in 1 2; do
        rm -rf "$TMP/ledgerbench"
        mkdir -p "$TMP/ledgerbench"
        "$BUILD/bench_ledger" "$TMP/ledgerbench" "$LSECS" "$np" >> "$TMP/ledger.jsonl" ||
            echo "bench_ledger $np producers failed" >&2
    done
done
rm -rf "$TMP/ledgerbench"
section_done ledger

# ---- 2. limiter microbenchmark ----
echo "limiter: $LIMOPS calls per thread"
"$BUILD/bench_limiter" "$LIMOPS" > "$TMP/limiter.out"
grep -v '^JSON' "$TMP/limiter.out" | sed 's/^/  /'
sed -n 's/^JSON //p' "$TMP/limiter.out" > "$TMP/limiter.json"
section_done limiter

# ---- 3. shared limits on Redis ----
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
PIDS+=($!)
wait_port "$RP" redis-server
echo "redis: $REPS x ${RSECS}s per design and mode, two replicas"
: > "$TMP/shared.jsonl"
for rep in $(seq "$REPS"); do
    "$BUILD/bench_shared" "127.0.0.1:$RP" "$RSECS" >> "$TMP/shared.jsonl"
done

section_done redis

# ---- 4. admission webhook ----
# HTTPS keep-alive on loopback (a throwaway
# self-signed certificate), bench/fixtures/review.json (a Deployment's Pod)
# against bench/fixtures/webhook-platform.yaml (10 ResourceQuotas, a
# LimitRange, PSS baseline). Saturation with wrk (closed loop, c=16) over
# HTTPS and, labelled, plain HTTP; latency at fixed offered rates (half the
# first run's saturation rate, 10k/s and 20k/s; open loop, coordinated
# omission corrected) with bench_loadgen.
# Two figures: per core (tenantd --admin-threads 1 pinned to cpu 0, the
# load generator on cpu 1) and the whole machine (tenantd --admin-threads 2
# and the load generator both unpinned: on 2 cores the load generator
# takes its share of them, so this is what the machine does, not tenantd).
WH_CFG=bench/fixtures/webhook-platform.yaml
WH_BODY="$ROOT/bench/fixtures/review.json"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TMP/wh.key" -out "$TMP/wh.crt" -days 1 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
start_webhook() { # NAME [TLS flags...]: starts tenantd (pinned unless WH_PIN= ); sets WH_PID, WH_PORT
    local name=$1; shift
    ${WH_PIN-$PIN_PROXY} "$BUILD/tenantd" --data "$TMP/$name.data" --config "$WH_CFG" --admin-listen 127.0.0.1:0 \
        --port-file "$TMP/$name.port" --listen 127.0.0.1:0 --workers 1 "$@" \
        2>"$TMP/$name.err" &
    WH_PID=$!
    PIDS+=($WH_PID)
    wait_file "$TMP/$name.port" || { cat "$TMP/$name.err" >&2; exit 1; }
    WH_PORT=$(cat "$TMP/$name.port")
}
start_webhook whtls --admin-threads 1 --tls-cert "$TMP/wh.crt" --tls-key "$TMP/wh.key"
WHT_PID=$WH_PID WHT=$WH_PORT
start_webhook whplain --admin-threads 1
WHP_PID=$WH_PID WHP=$WH_PORT
WH_PIN="" start_webhook whtls2 --admin-threads 2 --tls-cert "$TMP/wh.crt" --tls-key "$TMP/wh.key"
WH2_PID=$WH_PID WH2=$WH_PORT
if [ "$QUICK" = 1 ]; then WH_PLAIN_DUR=1 LG_DUR=0.6; else WH_PLAIN_DUR=$DUR LG_DUR=$DUR; fi
curl -sk "https://127.0.0.1:$WHT/validate" --data-binary @"$WH_BODY" | grep -q '"allowed":true' ||
    echo "bench: the webhook fixture's review is not allowed" >&2
wh_wrk() { # NAME SCHEME PORT SECS [CONNS] (pinned unless WH_WRK_PIN= )
    WRK_PATH=/validate WRK_BODY_FILE="$WH_BODY" ${WH_WRK_PIN-$PIN_WRK} wrk -t1 -c"${5:-16}" -d"$4s" --timeout 5s \
        -s bench/wrk_keys.lua "$2://127.0.0.1:$3/validate" >"$TMP/wrk.$1.out" 2>&1 || true
    awk '/^RESULT/ {print $2, $3, $4, $5, $6, $7, $8}' "$TMP/wrk.$1.out"
}
# tenantd's own work per review, without the network (bench/bench_admit.c:
# parse, admission, parse + admission + answer as the daemon does it), on
# the proxy's core.
if [ "$QUICK" = 1 ]; then ADMIT_N=2000; else ADMIT_N=10000; fi
: > "$TMP/admit.jsonl"
for rep in $(seq "$REPS"); do
    $PIN_PROXY "$BUILD/bench_admit" "$WH_CFG" "$WH_BODY" "$ADMIT_N" --json >> "$TMP/admit.jsonl" ||
        echo "bench_admit failed" >&2
done
wh_wrk warm https "$WHT" "$WARM" >/dev/null
wh_wrk warm http "$WHP" "$WARM" >/dev/null
if [ "$QUICK" = 1 ]; then WH2_RATES="20000" WH2_DUR=1; else WH2_RATES="10000 20000" WH2_DUR=$DUR; fi
echo "webhook: POST /validate bench/fixtures/review.json, $REPS x (per core: wrk c=16 ${DUR}s https + ${WH_PLAIN_DUR}s http (QUICK: once), loadgen https at half the first run's saturation rate, 10k/s and 20k/s, ${LG_DUR}s each; whole machine, 2 admin threads, all unpinned: wrk ${WH2_DUR}s https, loadgen at $WH2_RATES/s)"
for rep in $(seq "$REPS"); do
    t0=$(cpu_ticks "$WHT_PID")
    line=$(wh_wrk V https "$WHT" "$DUR")
    record webhook tenantd validate-tls all "$rep" $line $(cpu_per_req "$t0" "${line%% *}" "$WHT_PID")
    # Besides 10k/s and 20k/s, latency at half the saturation rate of the
    # first https run: what the webhook answers when it is not overloaded.
    [ "$rep" = 1 ] && WH_HALF=$(echo "$line" | awk '{r = ($2 > 0 ? $1 / ($2 / 1e6) : 0) / 2;
        r = int(r / 100) * 100; print (r >= 100 ? r : 100)}')
    if [ "$QUICK" != 1 ] || [ "$rep" = 1 ]; then # QUICK: the reference row from one run
        t0=$(cpu_ticks "$WHP_PID")
        line=$(wh_wrk V http "$WHP" "$WH_PLAIN_DUR")
        record webhook tenantd validate all "$rep" $line $(cpu_per_req "$t0" "${line%% *}" "$WHP_PID")
    fi
    for rate in "$WH_HALF" 10000 20000; do
        t0=$(cpu_ticks "$WHT_PID")
        out=$($PIN_WRK "$BUILD/bench_loadgen" --url "https://127.0.0.1:$WHT/validate" --body "$WH_BODY" \
            --rate "$rate" --conns 16 --duration "$LG_DUR" --warmup 0.2 --expect '"allowed":true' 2>&1) || true
        lg=$(echo "$out" | awk '/^LOADGEN/ {$1 = ""; print}')
        n=$(echo "$lg" | awk '{print $4}')
        record webhook-open tenantd tls "$rate" "$rep" $lg $(cpu_per_req "$t0" "${n:-0}" "$WHT_PID")
    done
    # the whole machine: tenantd --admin-threads 2, nothing pinned
    t0=$(cpu_ticks "$WH2_PID")
    line=$(WH_WRK_PIN="" wh_wrk V2 https "$WH2" "$WH2_DUR")
    record webhook tenantd validate-tls-2t all "$rep" $line $(cpu_per_req "$t0" "${line%% *}" "$WH2_PID")
    for rate in $WH2_RATES; do
        t0=$(cpu_ticks "$WH2_PID")
        out=$("$BUILD/bench_loadgen" --url "https://127.0.0.1:$WH2/validate" --body "$WH_BODY" \
            --rate "$rate" --conns 16 --duration "$LG_DUR" --warmup 0.2 --expect '"allowed":true' 2>&1) || true
        lg=$(echo "$out" | awk '/^LOADGEN/ {$1 = ""; print}')
        n=$(echo "$lg" | awk '{print $4}')
        record webhook-open2 tenantd tls "$rate" "$rep" $lg $(cpu_per_req "$t0" "${n:-0}" "$WH2_PID")
    done
done
kill "$WHT_PID" "$WHP_PID" "$WH2_PID" 2>/dev/null || true
section_done webhook

# ---- 5. batch queue scale ----
# One process per size, so each size's peak RSS is its own.
echo "queue: one admission pass, 1k/10k/100k workloads over 100 and 1,000 ClusterQueues"
: > "$TMP/queue.jsonl"
for cqs in 100 1000; do
    for n in 1000 10000 100000; do
        "$BUILD/bench_queue" --json "$n" "$cqs" >> "$TMP/queue.jsonl" ||
            echo "bench_queue $n $cqs failed" >&2
    done
done

section_done queue

# ---- 6. the batch queue daemon: submit latency at N stored ----
echo "queue daemon: submits, finish -> admission, RSS and restart with N stored workloads"
: > "$TMP/submit.jsonl"
if [ "$QUICK" = 1 ]; then SUBMIT_NS="1000"; SUBMIT_Q=--quick; else SUBMIT_NS="1000 10000 100000"; SUBMIT_Q=; fi
for n in $SUBMIT_NS; do
    python3 bench/bench_submit.py "$BUILD/tenantd" "$n" $SUBMIT_Q >> "$TMP/submit.jsonl" ||
        echo "bench_submit $n failed" >&2
done
section_done queue-daemon

# ---- 7. tenantd on PostgreSQL beside SQLite (bench/bench_pg.py,
# its own real server; s-pg's block) ----
echo "postgres: gateway on a PostgreSQL store vs SQLite, ledger shipped, spool drain, takeover"
bash scripts/install-deps.sh postgresql postgresql-client >/dev/null 2>&1 || true
export BENCH_PG_JSONL="$TMP/pg.jsonl"
: > "$BENCH_PG_JSONL"
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 &&
    cc $CFLAGS_B $(pkg-config --cflags libpq) bench/bench_ledger_pg.c $TD_A \
        $(pkg-config --libs jansson libfyaml sqlite3 libpq libuv hiredis openssl) -lpthread -lm \
        -o "$BUILD/bench_ledger_pg"; then
    python3 bench/bench_pg.py "$BUILD" "$BENCH_PG_JSONL" $([ "$QUICK" = 1 ] && echo --quick) ||
        echo "bench_pg failed" >&2
else
    echo "bench_pg: no PostgreSQL server or bench_ledger_pg did not build" >&2
fi
section_done postgres

# ---- 7. serving a fleet (bench/fleet.sh): tenantd's pool of three, one
# slow, vs nginx least_conn and haproxy leastconn; report.py reads the
# lines from TD_BENCH_FLEET ----
if QUICK=$QUICK REPS=$REPS bash bench/fleet.sh "$BUILD" "$TMP/fleet.jsonl"; then
    export TD_BENCH_FLEET="$TMP/fleet.jsonl"
else
    echo "bench: the fleet bench failed" >&2
fi
section_done fleet

VERSIONS="nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), haproxy $(haproxy -v | awk 'NR==1 {print $3}'), $(wrk -v 2>&1 | awk 'NR==1 {print $1, $2}'), redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')"
python3 bench/report.py --records "$REC" --limiter "$TMP/limiter.json" --shared "$TMP/shared.jsonl" \
    --queue "$TMP/queue.jsonl" --submit "$TMP/submit.jsonl" --ledger "$TMP/ledger.jsonl" --admit "$TMP/admit.jsonl" \
    --machine "$MACHINE" --versions "$VERSIONS" --quick "$QUICK" --reps "$REPS" --dur "$DUR" \
    --conns "$CONNS" --abuse-rate "$ABUSE_RATE" --pinning "${PIN_PROXY:+proxy: $PIN_PROXY; wrk: $PIN_WRK; simmodel unpinned}" \
    --json bench/results/latest.json --doc docs/benchmarks.md --binary "$BENCH_BIN"
