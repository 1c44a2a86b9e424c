# test_gateway.sh - the real tenantd gateway (2 workers) in front of the real
# simmodel, three tenants with keys and limits: proxying with usage, 401,
# 404, fast 429s (rate, concurrency) that never reach the upstream,
# streaming, sheddable shed before critical, cost reconciled from usage,
# upstream reset and hang, bad input (413, 400, 431, slow headers), keep-
# alive pipelining, /metrics, and a clean stop.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }

# simmodel: 2 slots, 1 ms a token, 40 tokens when a request names none (the
# gateway's estimate assumes 16, so reconciliation has work to do).
start_simmodel --slots 2 --ms-per-token 1 --default-max-tokens 40 || { finish; exit 1; }

cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  labels: {team: alpha, project: search, environment: prod}
  apiKeys: [{sha256: "$(sha key-alpha)"}]
  gateway: {rate: {cost: 1000000, per: 1s, burst: 1000000}, concurrency: 64, criticality: critical}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  namespaces: [beta-prod]
  labels: {team: beta, project: ranking, environment: prod}
  apiKeys: [{sha256: "$(sha key-beta)"}]
  gateway: {rate: {cost: 20, per: 1s, burst: 20}, concurrency: 8}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: gamma}
spec:
  namespaces: [gamma-prod]
  labels: {team: gamma, project: ads, environment: prod}
  apiKeys: [{sha256: "$(sha key-gamma)"}]
  gateway: {rate: {cost: 1000000, per: 1s, burst: 1000000}, concurrency: 1, criticality: sheddable}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 64, queue: 256}
  cost: {model: tokens}
  timeout: 3s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: small}
spec:
  match: {pathPrefix: /v1/completions}
  upstream: {address: "$SIM", capacity: 2, queue: 8}
  cost: {model: tokens}
  timeout: 20s
Y

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --access-log "$TMP/access.log" \
    || { finish; exit 1; }
[ -n "${TD_DATA_PORT:-}" ] || { not_ok "no data port file"; finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
ADMIN="http://127.0.0.1:$TD_PORT"
C=(curl -sS --max-time 10)
CHAT="$GW/v1/chat/completions"
KA=(-H "Authorization: Bearer key-alpha")
JSON=(-H "Content-Type: application/json")

served() { curl -sS --max-time 5 "http://$SIM/stats" | sed 's/.*"served":\([0-9]*\).*/\1/'; }
msg() { printf '{"messages":[{"role":"user","content":"%s"}],"max_tokens":%s}' "$1" "$2"; }
code_of() { sed -n '1s/^HTTP\/1\.[01] \([0-9]*\).*/\1/p' "$1"; }

# A slow-headers client (slowloris), opened first and checked at the end:
# the gateway must close it after its 10 s header deadline.
exec 7<>"/dev/tcp/127.0.0.1/$TD_DATA_PORT"
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ' >&7
SLOW_START=$(date +%s)

# ---- proxied completion ----
"${C[@]}" -D "$TMP/h1" -o "$TMP/b1" "${KA[@]}" "${JSON[@]}" \
    -d '{"messages":[{"role":"user","content":"hello world!"}],"max_tokens":8}' "$CHAT"
[ "$(code_of "$TMP/h1")" = 200 ] && ok "proxied completion: 200" || { not_ok "proxied completion: $(head -1 "$TMP/h1")"; cat "$TMP/b1"; }
expect_grep "simmodel's JSON comes back" "$TMP/b1" '"object":"chat.completion"'
expect_grep "with usage" "$TMP/b1" '"usage":{"prompt_tokens":3,"completion_tokens":8,"total_tokens":11'
expect_grep "the estimate is announced" "$TMP/h1" "X-Tenantd-Cost-Estimate: 11"
expect_grep "simmodel's X-GPU-Seconds passes" "$TMP/h1" "X-GPU-Seconds:"

# ---- upstream connections are pooled (keep-alive), not one per request ----
for i in 1 2 3 4 5 6; do
    "${C[@]}" -o /dev/null "${KA[@]}" "${JSON[@]}" -d "$(msg pool 1)" "$CHAT"
done
conns=$(curl -sS --max-time 5 "http://$SIM/stats" | sed 's/.*"connections":\([0-9]*\).*/\1/')
# one idle connection per worker used (1 or 2, kept open), plus the one
# asking for /stats
[ "$conns" -ge 2 ] && [ "$conns" -le 3 ] && ok "6 sequential requests reuse pooled upstream connections ($conns open)" \
    || not_ok "upstream connections open after 6 sequential requests: $conns"

# ---- identity and routing ----
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H "Authorization: Bearer wrong" -d '{}' "$CHAT"
[ "$(code_of "$TMP/h")" = 401 ] && ok "unknown key: 401" || not_ok "unknown key: $(head -1 "$TMP/h")"
expect_grep "401 body: OpenAI's shape" "$TMP/b" '{"error":{"message":"no valid API key: send Authorization: Bearer KEY","type":"authentication_error","code":"unauthorized","param":null}}'
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H "X-Tenant: alpha" -d '{}' "$CHAT"
[ "$(code_of "$TMP/h")" = 401 ] && ok "X-Tenant not trusted by default: 401" || not_ok "X-Tenant: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -d '{}' "$GW/v2/unknown"
[ "$(code_of "$TMP/h")" = 404 ] && ok "unknown path: 404" || not_ok "unknown path: $(head -1 "$TMP/h")"

# ---- rate limit: fast 429, upstream untouched ----
BETA=(-H "Authorization: Bearer key-beta" "${JSON[@]}" -d "$(msg abcd 10)")
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${BETA[@]}" "$GW/v1/chat/completions"
[ "$(code_of "$TMP/h")" = 200 ] && ok "beta's first request fits its burst" || not_ok "beta first: $(head -1 "$TMP/h")"
before=$(served)
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${BETA[@]}" "$GW/v1/chat/completions"
after=$(served)
[ "$(code_of "$TMP/h")" = 429 ] && ok "beta over its rate: 429" || not_ok "beta over rate: $(head -1 "$TMP/h")"
grep -qiE '^Retry-After: [1-9][0-9]*' "$TMP/h" && ok "429 has Retry-After in seconds" || not_ok "no Retry-After: $(cat "$TMP/h")"
expect_grep "429 body names the error" "$TMP/b" '"type":"rate_limit_error","code":"rate_limited","param":null,"tenant":"beta","retry_after_ms":'
grep -qiE '^retry-after-ms: [1-9][0-9]*' "$TMP/h" && ok "429 has retry-after-ms" || not_ok "no retry-after-ms: $(cat "$TMP/h")"
python3 - "$TMP/b" "$TMP/h" <<'P' && ok "retry-after-ms equals the body's retry_after_ms, Retry-After is it rounded up to seconds" || not_ok "retry headers: $(cat "$TMP/h") $(cat "$TMP/b")"
import json, math, sys
e = json.load(open(sys.argv[1]))["error"]
h = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in open(sys.argv[2]).read().splitlines()[1:] if ":" in l)}
assert e["message"].startswith("rate limit reached for tenant beta; retry after "), e
assert int(h["retry-after-ms"]) == e["retry_after_ms"], (h, e)
assert int(h["retry-after"]) == max(1, math.ceil(e["retry_after_ms"] / 1000)), (h, e)
assert "x-should-retry" not in h, h
P
[ "$before" = "$after" ] && ok "the rejected request never reached simmodel ($before served)" || not_ok "simmodel served $before -> $after"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H "Authorization: Bearer key-beta" "${JSON[@]}" -d "$(msg abcd 100)" "$CHAT"
[ "$(code_of "$TMP/h")" = 429 ] && ok "a request costing more than the burst: 429" || not_ok "over burst: $(head -1 "$TMP/h")"
expect_grep "it says the cost exceeds the burst" "$TMP/b" '"code":"cost_exceeds_burst","param":null,"limit":"rate_limited","tenant":"beta","cost":101,"burst":20'
grep -qi '^x-should-retry: false' "$TMP/h" && ok "cost_exceeds_burst: x-should-retry: false" || not_ok "no x-should-retry: $(cat "$TMP/h")"
grep -qi '^Retry-After:' "$TMP/h" && not_ok "no Retry-After when waiting cannot help" || ok "no Retry-After when waiting cannot help"

# ---- concurrency limit ----
"${C[@]}" -o "$TMP/slow" -H "Authorization: Bearer key-gamma" "${JSON[@]}" \
    -d "$(msg x 800)" "$CHAT" &
SLOWPID=$!
sleep 0.3
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H "Authorization: Bearer key-gamma" "${JSON[@]}" \
    -d "$(msg x 1)" "$CHAT"
[ "$(code_of "$TMP/h")" = 429 ] && ok "gamma's second concurrent request: 429" || not_ok "concurrency: $(head -1 "$TMP/h")"
expect_grep "concurrency 429 body" "$TMP/b" '"code":"concurrency_limited","param":null,"tenant":"gamma"'
grep -qi '^Retry-After: ' "$TMP/h" && ok "concurrency 429 has Retry-After" || not_ok "no Retry-After"
wait "$SLOWPID"
expect_grep "the first one completes" "$TMP/slow" '"completion_tokens":800'
"${C[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer key-gamma" "${JSON[@]}" \
    -d "$(msg x 1)" "$CHAT" > "$TMP/code"
[ "$(cat "$TMP/code")" = 200 ] && ok "its slot is released afterwards" || not_ok "after release: $(cat "$TMP/code")"

# ---- streaming ----
"${C[@]}" -N -D "$TMP/hs" -o "$TMP/stream" "${KA[@]}" "${JSON[@]}" \
    -d '{"messages":[{"role":"user","content":"stream please"}],"max_tokens":5,"stream":true}' "$CHAT"
expect_grep "stream is chunked to the client" "$TMP/hs" "Transfer-Encoding: chunked"
expect_grep "stream is an event stream" "$TMP/hs" "Content-Type: text/event-stream"
n=$(grep -c '^data: {' "$TMP/stream")
[ "$n" = 6 ] && ok "all 6 events arrive (5 tokens + usage)" || { not_ok "stream events: $n"; cat "$TMP/stream"; }
expect_grep "stream ends with [DONE]" "$TMP/stream" "data: [DONE]"

# ---- cost reconciled from usage (simmodel writes 40 tokens, we guessed 16) ----
"${C[@]}" -o "$TMP/b" "${KA[@]}" "${JSON[@]}" -H "X-Recon: 1" \
    -d '{"messages":[{"role":"user","content":"reconcile"}]}' "$CHAT"
expect_grep "simmodel used its default of 40" "$TMP/b" '"completion_tokens":40,"total_tokens":43'
"${C[@]}" -N -o "$TMP/b" "${KA[@]}" "${JSON[@]}" \
    -d '{"messages":[{"role":"user","content":"reconcile2"}],"stream":true}' "$CHAT"

# ---- sheddable shed before critical under overload ----
# Route "small": capacity 2, queue 8 (1 + 4 per worker). 16 sheddable and 4
# critical requests of 300 ms each at once: criticals evict queued
# sheddables, so none of them is shed.
SMALL="$GW/v1/completions"
BG=()
for i in $(seq 1 16); do
    "${C[@]}" -o /dev/null -D "$TMP/shed-s$i" "${KA[@]}" "${JSON[@]}" -H "X-Criticality: sheddable" \
        -d '{"prompt":"shed me","max_tokens":300}' "$SMALL" &
    BG+=($!)
done
for i in $(seq 1 4); do
    "${C[@]}" -o /dev/null -D "$TMP/shed-c$i" "${KA[@]}" "${JSON[@]}" -H "X-Criticality: critical" \
        -d '{"prompt":"keep me","max_tokens":300}' "$SMALL" &
    BG+=($!)
done
wait "${BG[@]}"
s_shed=$(cat "$TMP"/shed-s* | grep -ci '^X-Tenantd-Shed: overload')
c_shed=$(cat "$TMP"/shed-c* | grep -ci '^X-Tenantd-Shed:')
c_ok=$(cat "$TMP"/shed-c* | grep -c '^HTTP/1.1 200')
echo "    sheddable shed: $s_shed/16; critical shed: $c_shed/4, critical served: $c_ok/4"
[ "$s_shed" -gt 0 ] && ok "sheddable requests are shed under overload" || not_ok "no sheddable shed"
[ "$c_shed" = 0 ] && [ "$c_ok" = 4 ] && ok "no critical request is shed" || not_ok "critical shed $c_shed, served $c_ok"
grep -l '^X-Tenantd-Shed' "$TMP"/shed-s* | head -1 | xargs grep -q '^HTTP/1.1 503' && ok "shed is 503" || not_ok "shed status"
grep -h '^Retry-After' $(grep -l '^X-Tenantd-Shed' "$TMP"/shed-s* | head -1) >/dev/null && ok "shed has Retry-After" || not_ok "shed without Retry-After"

# ---- upstream faults ----
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -H "X-Simmodel-Fault: reset" -d "$(msg x 1)" "$CHAT"
[ "$(code_of "$TMP/h")" = 502 ] && ok "upstream reset: 502" || not_ok "reset: $(head -1 "$TMP/h")"
t0=$(date +%s%N)
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -H "X-Simmodel-Fault: hang" -d "$(msg x 1)" "$CHAT"
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
[ "$(code_of "$TMP/h")" = 504 ] && ok "upstream hang: 504" || not_ok "hang: $(head -1 "$TMP/h")"
[ "$ms" -ge 2900 ] && [ "$ms" -lt 4500 ] && ok "504 after the route's 3 s timeout (${ms} ms)" || not_ok "504 after ${ms} ms"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -H "X-Simmodel-Fault: hang" -H "X-Request-Timeout-Ms: 500" \
    -d "$(msg x 1)" "$CHAT"
[ "$(code_of "$TMP/h")" = 504 ] && ok "X-Request-Timeout-Ms shortens the deadline" || not_ok "short deadline: $(head -1 "$TMP/h")"
"${C[@]}" -o /dev/null -w '%{http_code}' "${KA[@]}" -d "$(msg after-faults 1)" "$CHAT" > "$TMP/code"
[ "$(cat "$TMP/code")" = 200 ] && ok "the gateway still serves after faults" || not_ok "after faults: $(cat "$TMP/code")"

# ---- bad input ----
head -c 2000000 /dev/zero | tr '\0' a > "$TMP/huge"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" --data-binary @"$TMP/huge" "$CHAT"
[ "$(code_of "$TMP/h")" = 413 ] && ok "oversized body: 413" || not_ok "oversized: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -d 'this is not json' "$CHAT"
[ "$(code_of "$TMP/h")" = 400 ] && ok "non-JSON body on a tokens route: 400" || not_ok "non-JSON: $(head -1 "$TMP/h")"
expect_grep "400 says why" "$TMP/b" "not JSON"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -d '{"prompt":"x","max_tokens":-3}' "$CHAT"
[ "$(code_of "$TMP/h")" = 400 ] && ok "negative max_tokens: 400" || not_ok "max_tokens: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -H "X-Criticality: urgent" -d "$(msg x 1)" "$CHAT"
[ "$(code_of "$TMP/h")" = 400 ] && ok "unknown X-Criticality: 400" || not_ok "criticality: $(head -1 "$TMP/h")"
big=$(head -c 70000 /dev/zero | tr '\0' b)
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${KA[@]}" -H "X-Big: $big" -d '{}' "$CHAT"
[ "$(code_of "$TMP/h")" = 431 ] && ok "64 KiB of headers: 431" || not_ok "big headers: $(head -1 "$TMP/h")"
printf 'GARBAGE\r\n\r\n' > "$TMP/garbage"
timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$TD_DATA_PORT; cat $TMP/garbage >&3; cat <&3" > "$TMP/gout"
grep -q '^HTTP/1.1 400' "$TMP/gout" && ok "malformed request: 400 and close" || not_ok "garbage: $(head -1 "$TMP/gout")"

# ---- keep-alive and pipelining: answers in order on one connection ----
REQ=$(msg pipe 2)
{
    printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-alpha\r\nContent-Length: %d\r\n\r\n%s' ${#REQ} "$REQ"
    printf 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n'
    printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-alpha\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s' ${#REQ} "$REQ"
} > "$TMP/pipe"
timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$TD_DATA_PORT; cat $TMP/pipe >&3; cat <&3" > "$TMP/pout"
order=$(grep -ao "HTTP/1.1 [0-9]*" "$TMP/pout" | awk '{print $2}' | tr '\n' ' ')
[ "$order" = "200 401 200 " ] && ok "pipelined requests answered in order" || not_ok "pipelined order: '$order'"

# ---- observability ----
"${C[@]}" -o "$TMP/metrics" "$ADMIN/metrics"
expect_grep "metrics: alpha accepted" "$TMP/metrics" 'tenantd_requests_total{tenant="alpha",route="chat",outcome="accepted"}'
expect_grep "metrics: beta rate_limited" "$TMP/metrics" 'tenantd_requests_total{tenant="beta",route="chat",outcome="rate_limited"} 2'
expect_grep "metrics: gamma concurrency_limited" "$TMP/metrics" 'tenantd_requests_total{tenant="gamma",route="chat",outcome="concurrency_limited"} 1'
expect_grep "metrics: shed counted" "$TMP/metrics" 'tenantd_requests_total{tenant="alpha",route="small",outcome="shed"}'
expect_grep "metrics: unauthorized under tenant \"\"" "$TMP/metrics" 'tenantd_requests_total{tenant="",route="",outcome="unauthorized"}'
expect_grep "metrics: cost by tenant" "$TMP/metrics" 'tenantd_cost_units_total{tenant="alpha"'
# an unknown path is no_route (not bad_request), under the tenant of its key
expect_grep "metrics: the 404 is outcome=no_route" "$TMP/metrics" 'tenantd_requests_total{tenant="alpha",route="",outcome="no_route"} 1'
expect_grep "metrics: nothing of alpha's is bad_request on route \"\"" "$TMP/metrics" 'tenantd_requests_total{tenant="alpha",route="",outcome="bad_request"} 0'
# sheds by the criticality they were served at: exactly the ones shed above
expect_grep "metrics: sheds of sheddable counted by criticality" "$TMP/metrics" "tenantd_shed_total{tenant=\"alpha\",route=\"small\",criticality=\"sheddable\"} $s_shed"
expect_grep "metrics: no critical shed" "$TMP/metrics" 'tenantd_shed_total{tenant="alpha",route="small",criticality="critical"} 0'
expect_grep "metrics: the outcome agrees" "$TMP/metrics" "tenantd_requests_total{tenant=\"alpha\",route=\"small\",outcome=\"shed\"} $s_shed"
# gauges at 0 are exported, not left out
expect_grep "metrics: tenantd_inflight at 0" "$TMP/metrics" 'tenantd_inflight{tenant="beta"} 0'
expect_grep "metrics: tenantd_queue_depth at 0" "$TMP/metrics" 'tenantd_queue_depth{route="small",criticality="sheddable"} 0'
expect_grep "metrics: a histogram for a tenant" "$TMP/metrics" 'tenantd_request_duration_seconds_count{tenant="beta"}'
expect_grep "metrics: limit rejections at 0" "$TMP/metrics" 'tenantd_limit_rejections_total{tenant="alpha",limit="rate",mode="enforce"} 0'
if command -v promtool >/dev/null; then
    expect_rc "metrics: promtool check metrics is clean" 0 promtool check metrics <"$TMP/metrics"
fi

sleep 0.3 # the workers write their log lines once per loop turn
expect_grep "access log: a proxied line" "$TMP/access.log" "tenant=alpha route=chat crit=critical method=POST path=/v1/chat/completions status=200 outcome=accepted cost_est=11 cost=11"
expect_grep "access log: reconciled upwards (16 guessed, 40 used)" "$TMP/access.log" "cost_est=19 cost=43"
expect_grep "access log: reconciled from the stream's usage" "$TMP/access.log" "cost_est=19 cost=43"
expect_grep "access log: the 429" "$TMP/access.log" "tenant=beta route=chat crit=critical method=POST path=/v1/chat/completions status=429 outcome=rate_limited cost_est=11 cost=0"
expect_grep "access log: shed sheddable" "$TMP/access.log" "crit=sheddable method=POST path=/v1/completions status=503 outcome=shed"
grep -q 'queue_ms=[0-9.]* upstream_ms=[0-9.]* total_ms=[0-9.]*' "$TMP/access.log" && ok "access log: times" || not_ok "access log times"
n_stream=$(grep -c 'cost_est=19 cost=43' "$TMP/access.log")
[ "$n_stream" = 2 ] && ok "both reconciled requests (JSON and stream) logged" || not_ok "reconciled lines: $n_stream"

# ---- the slow-headers client was cut off ----
now=$(date +%s)
[ $((now - SLOW_START)) -lt 11 ] && sleep $((11 - (now - SLOW_START)))
if timeout 3 cat <&7 >/dev/null 2>&1; then ok "slow headers: closed by the gateway"; else not_ok "slow headers: still open after 11 s"; fi
exec 7<&-

stop_tenantd
finish
