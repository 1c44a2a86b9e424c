# test_pools.sh - a Route in front of three real simmodel processes:
# leastRequests gives the endpoint made slow by its
# per-token latency measurably less traffic, roundRobin spreads evenly; a
# simmodel killed with SIGKILL mid-run costs no client an error (requests
# that had not started streaming go to another endpoint), and it gets
# traffic again after it restarts on its port; with every endpoint killed
# the client gets 503 with Retry-After within 100 ms, not a hang.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
LOAD="$(dirname "$0")/pools_load.py"

# simmodel's /metrics has the two vLLM series queueDepth reads
start_simmodel --slots 2 || { finish; exit 1; }
m=$(curl -sS --max-time 5 "http://$SIM/metrics")
case "$m" in *'vllm:num_requests_waiting{model_name="simmodel"} 0'*'vllm:gpu_cache_usage_perc{model_name="simmodel"} 0.000000'*)
    ok "simmodel /metrics: vllm:num_requests_waiting, vllm:gpu_cache_usage_perc" ;;
    *) not_ok "simmodel /metrics: $m" ;; esac
kill "$SIM_PID"; wait "$SIM_PID" 2>/dev/null

# A and B: 1 ms a token; C: 15 ms a token, so a 20-token answer takes
# 20 ms on A or B and 300 ms on C.
SIMARGS=(--slots 32 --default-max-tokens 20)
start_simmodel "${SIMARGS[@]}" --ms-per-token 1 || { finish; exit 1; }
A=$SIM; A_PID=$SIM_PID
start_simmodel "${SIMARGS[@]}" --ms-per-token 1 || { finish; exit 1; }
B=$SIM; B_PID=$SIM_PID; B_PORT=$SIM_PORT
start_simmodel "${SIMARGS[@]}" --ms-per-token 15 || { finish; exit 1; }
C=$SIM; C_PID=$SIM_PID
# BAD: answers everything with 503
python3 "$(dirname "$0")/pools_bad.py" "$TMP/badport" &
BAD_PID=$!
PIDS+=("$BAD_PID")
wait_file "$TMP/badport" 50 "$BAD_PID" || not_ok "the 503 endpoint did not start"
BAD="127.0.0.1:$(cat "$TMP/badport")"

cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  apiKeys: [{sha256: "$(sha key-alpha)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 1000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/chat/}
  upstream:
    endpoints: [{address: "$A"}, {address: "$B"}, {address: "$C"}]
    healthCheck: {path: /health, interval: 200ms, timeout: 300ms, unhealthyThreshold: 2}
    capacity: 32
    queue: 256
  cost: {model: tokens}
  timeout: 10s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: completions}
spec:
  match: {pathPrefix: /v1/completions}
  upstream:
    endpoints: [{address: "$A"}, {address: "$B"}, {address: "$C"}]
    balance: roundRobin
  cost: {model: tokens}
  timeout: 10s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: embeddings}
spec:
  match: {pathPrefix: /v1/embeddings}
  upstream:
    endpoints: [{address: "$BAD"}, {address: "$A"}]
    balance: roundRobin
  cost: {model: requests}
  timeout: 10s
Y
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
GW="127.0.0.1:$TD_DATA_PORT"

served() { curl -sS --max-time 5 "http://$1/stats" | sed 's/.*"served":\([0-9]*\).*/\1/'; }
snap() { SA=$(served "$A"); SB=$(served "$B"); SC=$(served "$C"); }

# 1. leastRequests: 12 clients for 3 s; the slow endpoint holds its
# requests 15 times as long, so it has more in flight and is picked less.
snap
out=$(python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 12 3 0 20 2>"$TMP/load1.err")
a=$(($(served "$A") - SA)); b=$(($(served "$B") - SB)); c=$(($(served "$C") - SC))
echo "# leastRequests: $out; served A=$a B=$b C=$c"
case "$out" in *" errors=0 "*) ok "leastRequests: no errors" ;; *) not_ok "leastRequests: $out"; cat "$TMP/load1.err" ;; esac
[ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ "$c" -gt 0 ] && [ $((c * 4)) -lt "$a" ] && [ $((c * 4)) -lt "$b" ] \
    && ok "leastRequests: the slow endpoint gets under a quarter of a fast one's (A=$a B=$b C=$c)" \
    || not_ok "leastRequests spread A=$a B=$b C=$c"

# 2. roundRobin: 90 requests one after the other; each worker turns over
# A, B, C in order, so each endpoint gets 30, give or take one per worker.
snap
out=$(python3 "$LOAD" "$GW" /v1/completions key-alpha 1 60 90 1 2>"$TMP/load2.err")
a=$(($(served "$A") - SA)); b=$(($(served "$B") - SB)); c=$(($(served "$C") - SC))
echo "# roundRobin: $out; served A=$a B=$b C=$c"
spread_ok=1
for n in "$a" "$b" "$c"; do [ "$n" -ge 28 ] && [ "$n" -le 32 ] || spread_ok=0; done
[ "$spread_ok" = 1 ] && [ $((a + b + c)) = 90 ] \
    && ok "roundRobin: even spread (A=$a B=$b C=$c)" || not_ok "roundRobin spread A=$a B=$b C=$c ($out)"

# 2b. queueDepth (a second tenantd, same endpoints): the gateway scrapes
# each simmodel's /metrics every 250 ms for vllm:num_requests_waiting and
# vllm:gpu_cache_usage_perc and sends to the least waiting work. C is
# kept busy by 48 clients of its own, straight to it (its 32 slots full,
# requests waiting): the gateway cannot see that load in its own counts,
# only in C's metrics, and sends C almost nothing (leastRequests, with
# only its own requests in flight to go by, sent C 1 in 8 in step 1).
cat > "$TMP/qd.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  apiKeys: [{sha256: "$(sha key-alpha)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 1000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream:
    endpoints: [{address: "$A"}, {address: "$B"}, {address: "$C"}]
    balance: queueDepth
    scrapeEvery: 250ms
    capacity: 32
  cost: {model: tokens}
  timeout: 10s
Y
MAIN_PID=$TD_PID
start_tenantd "$TMP/data-qd" --config "$TMP/qd.yaml" || { finish; exit 1; }
QD_GW="127.0.0.1:$TD_DATA_PORT"
sleep 0.6 # the first scrapes (a worker scrapes once it has served the route)
python3 "$LOAD" "$C" /v1/chat/completions none 48 4.5 0 20 >/dev/null 2>&1 &
DIRECT_PID=$!
sleep 0.7
snap
out=$(python3 "$LOAD" "$QD_GW" /v1/chat/completions key-alpha 12 3 0 20 2>"$TMP/loadqd.err")
a=$(($(served "$A") - SA)); b=$(($(served "$B") - SB))
# C's own count holds the direct load: the gateway's share of it is what
# A and B did not serve (every answer was a 200 from one of the three)
n=$(echo "$out" | sed 's/^ok=\([0-9]*\).*/\1/'); c=$((n - a - b))
wait "$DIRECT_PID"
echo "# queueDepth: $out; served A=$a B=$b C=$c"
case "$out" in *" errors=0 "*) ok "queueDepth: no errors" ;; *) not_ok "queueDepth: $out"; cat "$TMP/loadqd.err" ;; esac
[ "$a" -gt 0 ] && [ "$b" -gt 0 ] && [ $((c * 20)) -lt "$a" ] && [ $((c * 20)) -lt "$b" ] \
    && ok "queueDepth: the endpoint with requests waiting gets under 1/20 of a free one's (A=$a B=$b C=$c)" \
    || not_ok "queueDepth spread A=$a B=$b C=$c"
stop_tenantd
TD_PID=$MAIN_PID

# 2c. An endpoint that answers 503 (BAD, first in a round-robin pair):
# each request it gets is sent once more to the other endpoint, so every
# client gets a 200; after 3 in a row it is ejected.
out=$(python3 "$LOAD" "$GW" /v1/embeddings key-alpha 1 60 20 1 2>"$TMP/loadbad.err")
hits=$(wc -l <"$TMP/badport.hits" 2>/dev/null || echo 0)
echo "# 503 endpoint: $out; it answered $hits"
case "$out" in *" errors=0 "*) ok "503 from an endpoint: retried on the other, no client saw it" ;;
    *) not_ok "503 endpoint: $out"; cat "$TMP/loadbad.err" ;; esac
[ "$hits" -ge 1 ] && [ "$hits" -le 6 ] && ok "503 endpoint: asked $hits times, then ejected" \
    || not_ok "503 endpoint answered $hits of 20"

# 3. SIGKILL of B in the middle of a 4 s run of 12 clients: no client
# sees an error (answers are not streamed, so no request had started
# streaming when B died: each is retried on another endpoint).
python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 12 4 0 20 >"$TMP/load3.out" 2>"$TMP/load3.err" &
LOAD_PID=$!
sleep 1.5
kill -9 "$B_PID"
wait "$B_PID" 2>/dev/null
wait "$LOAD_PID"
out=$(cat "$TMP/load3.out")
echo "# SIGKILL of one endpoint: $out"
case "$out" in *" errors=0 "*) ok "SIGKILL mid-run: no client saw an error" ;; *) not_ok "SIGKILL mid-run: $out"; cat "$TMP/load3.err" ;; esac
case "$out" in ok=[1-9]*) ok "SIGKILL mid-run: requests were served" ;; *) not_ok "no requests served: $out" ;; esac

# ... and while B is down, requests are served fast: the ejected endpoint
# is not tried by each request (a connect refused would be retried, but
# ejection keeps the retries off the hot path)
out=$(python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 4 1 0 20 2>"$TMP/load4.err")
case "$out" in *" errors=0 "*) ok "B down: no errors ($out)" ;; *) not_ok "B down: $out"; cat "$TMP/load4.err" ;; esac

# 4. B restarts on its port: within the ejection back-off (at most a few
# seconds here) it is taken back and serves requests again.
"$TD_BIN/simmodel" --listen "127.0.0.1:$B_PORT" "${SIMARGS[@]}" --ms-per-token 1 2>>"$TMP/sim.log" &
B_PID=$!
PIDS+=("$B_PID")
wait_port "$B_PORT" 50 || not_ok "B did not restart"
back=0
for _ in $(seq 1 40); do
    python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 4 0.25 0 20 >/dev/null 2>&1
    [ "$(served "$B")" -gt 0 ] && { back=1; break; }
done
[ "$back" = 1 ] && ok "B restarted: taken back ($(served "$B") served)" \
    || not_ok "B restarted but got no requests in 10 s"

# 5. C stops answering (SIGSTOP: its socket still accepts, nothing comes
# back). Without traffic, the health checks (every 200 ms, 300 ms
# timeout, 2 in a row) mark it unhealthy within about a second; after
# 2 s no request is sent to it, so none waits for the route's 10 s
# timeout. SIGCONT: the next passing check takes it back.
kill -STOP "$C_PID"
sleep 2
t0=$(date +%s%N)
out=$(python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 8 1.5 0 20 2>"$TMP/load5.err")
el=$((($(date +%s%N) - t0) / 1000000))
echo "# C stopped: $out in ${el} ms"
case "$out" in *" errors=0 "*) ok "C stopped: no errors ($out)" ;; *) not_ok "C stopped: $out"; cat "$TMP/load5.err" ;; esac
[ "$el" -lt 4000 ] && ok "C stopped: no request waited on it (${el} ms for a 1.5 s run)" \
    || not_ok "C stopped: the run took ${el} ms"
kill -CONT "$C_PID"
sleep 1
SC=$(served "$C")
python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 8 1.5 0 20 >/dev/null 2>&1
c=$(($(served "$C") - SC))
[ "$c" -gt 0 ] && ok "C resumed: taken back ($c served)" || not_ok "C resumed but got no requests"

# 6. Every endpoint killed: 503 with Retry-After, fast: at once (each
# request's connect is refused, and the retry's), and once the checks
# have marked every endpoint unhealthy (no connect at all).
kill -9 "$A_PID" "$B_PID" "$C_PID"
wait "$A_PID" "$B_PID" "$C_PID" 2>/dev/null
slow=0; bad=0
for i in $(seq 1 20); do
    [ "$i" = 11 ] && sleep 1.5
    t=$(curl -sS -o "$TMP/b$i" -D "$TMP/h$i" -w '%{time_total}' --max-time 5 \
        -H "Authorization: Bearer key-alpha" -H "Content-Type: application/json" \
        -d '{"messages":[{"role":"user","content":"hi"}]}' "http://$GW/v1/chat/completions")
    grep -q '^HTTP/1.1 503' "$TMP/h$i" && grep -qi '^Retry-After: [0-9]' "$TMP/h$i" || bad=$((bad + 1))
    awk -v t="$t" 'BEGIN { exit !(t < 0.1) }' || slow=$((slow + 1))
    echo "# all down, request $i: $(head -1 "$TMP/h$i" | tr -d '\r') in ${t}s"
done
[ "$bad" = 0 ] && ok "all endpoints down: 503 with Retry-After" \
    || { not_ok "all down: $bad of 20 not 503 + Retry-After"; cat "$TMP/h1" "$TMP/b1"; }
[ "$slow" = 0 ] && ok "all endpoints down: every answer within 100 ms" \
    || not_ok "all down: $slow of 20 took 100 ms or more"
grep -q upstream_unavailable "$TMP/b20" && ok "all down and unhealthy: upstream_unavailable" \
    || not_ok "all down, unhealthy body: $(cat "$TMP/b20")"
grep -q upstream_unavailable "$TMP/b1" && ok "all down: the body says upstream_unavailable" \
    || not_ok "all down body: $(cat "$TMP/b1")"

stop_tenantd
finish
