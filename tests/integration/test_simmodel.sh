# test_simmodel.sh - the real simmodel on a free loopback port: OpenAI
# response shapes and token counts, X-GPU-Seconds, SSE streaming with
# chunked encoding, FIFO queueing behind busy slots, 503 past --max-queue,
# keep-alive and pipelining, bad input, every X-Simmodel-Fault, and a clean
# stop on SIGTERM.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
SIMMODEL="$TD_BIN/simmodel"

stop_simmodel() {
    kill -TERM "$SIM_PID" 2>/dev/null
    wait "$SIM_PID" 2>/dev/null
    local rc=$?
    if [ "$rc" -eq 0 ]; then ok "simmodel stops cleanly on SIGTERM ($*)"; else
        not_ok "simmodel exit $rc on SIGTERM ($*)"; tail -5 "$TMP/sim.log"
    fi
}

C=(curl -sS --max-time 10)
# code_of HEADERS : the final status in a curl -D file (after any 100 Continue).
code_of() { grep '^HTTP/' "$1" | tail -1 | cut -d' ' -f2; }
# ms_of FILE : a curl time_total in seconds, as whole milliseconds.
ms_of() { awk '{ printf "%d", $1 * 1000 }' "$1"; }

# ---- flags ----
expect_rc "--help" 0 "$SIMMODEL" --help
expect_grep "--help lists --max-queue" "$TMP/out" "--max-queue N"
expect_rc "bad --slots" 2 "$SIMMODEL" --slots 0
expect_grep "bad --slots says why" "$TMP/err" "--slots 0"
expect_rc "bad --listen" 2 "$SIMMODEL" --listen nowhere:80x
expect_grep "bad --listen says why" "$TMP/err" "--listen nowhere:80x: bad port"

# ---- one server with the defaults: 4 slots, 2 ms/token, prefill 0.05 ms/token ----
start_simmodel || { finish; exit 1; }
URL="http://$SIM"
[ "$("${C[@]}" "$URL/healthz")" = ok ] && ok "healthz" || not_ok "healthz"
expect_rc "--listen on a port in use" 1 "$SIMMODEL" --listen "127.0.0.1:$SIM_PORT"
expect_grep "port in use says so" "$TMP/err" "address already in use"

# "Hello world, hi!" is 16 characters: 4 prompt tokens; 4*0.05 + 5*2 = 10.2 ms.
"${C[@]}" -D "$TMP/h" -o "$TMP/b" \
    -d '{"model":"m1","messages":[{"role":"user","content":"Hello world, hi!"}],"max_tokens":5}' \
    "$URL/v1/chat/completions"
[ "$(code_of "$TMP/h")" = 200 ] && ok "chat: 200" || not_ok "chat: $(head -1 "$TMP/h")"
expect_grep "chat: object" "$TMP/b" '"object":"chat.completion"'
expect_grep "chat: id" "$TMP/b" '"id":"cmpl-'
expect_grep "chat: model echoed" "$TMP/b" '"model":"m1"'
expect_grep "chat: assistant message" "$TMP/b" '"message":{"role":"assistant","content":" The quick brown fox jumps"}'
expect_grep "chat: usage" "$TMP/b" '"usage":{"prompt_tokens":4,"completion_tokens":5,"total_tokens":9'
expect_grep "chat: X-GPU-Seconds" "$TMP/h" "X-GPU-Seconds: 0.010200"
expect_grep "chat: Content-Length" "$TMP/h" "Content-Length: $(wc -c < "$TMP/b")"

# Messages concatenate: "abcd" + "efghi" = 9 characters, 3 tokens.
"${C[@]}" -o "$TMP/b" -d '{"messages":[{"role":"system","content":"abcd"},{"role":"user","content":[{"type":"text","text":"efghi"}]}],"max_tokens":1}' "$URL/v1/chat/completions"
expect_grep "chat: contents concatenate, parts count" "$TMP/b" '"prompt_tokens":3,"completion_tokens":1,"total_tokens":4'
expect_grep "chat: model defaults to simmodel" "$TMP/b" '"model":"simmodel"'
# Characters, not bytes: 8 two-byte letters are 2 tokens.
"${C[@]}" -o "$TMP/b" -d '{"messages":[{"role":"user","content":"éééééééé"}],"max_tokens":0}' "$URL/v1/chat/completions"
expect_grep "chat: UTF-8 counts characters" "$TMP/b" '"prompt_tokens":2,"completion_tokens":0'

"${C[@]}" -D "$TMP/h" -o "$TMP/b" -d '{"prompt":"123456789"}' "$URL/v1/completions"
expect_grep "completions: object" "$TMP/b" '"object":"text_completion"'
expect_grep "completions: default 16 tokens" "$TMP/b" '"prompt_tokens":3,"completion_tokens":16,"total_tokens":19'
expect_grep "completions: X-GPU-Seconds" "$TMP/h" "X-GPU-Seconds: 0.032150"

"${C[@]}" -D "$TMP/h" -o "$TMP/b" -d '{"input":["abcdefgh","xyz"],"model":"emb"}' "$URL/v1/embeddings"
expect_grep "embeddings: object" "$TMP/b" '"object":"list"'
expect_grep "embeddings: two vectors" "$TMP/b" '"index":1,"embedding":['
expect_grep "embeddings: usage" "$TMP/b" '"prompt_tokens":3,"completion_tokens":0,"total_tokens":3'
expect_grep "embeddings: X-GPU-Seconds" "$TMP/h" "X-GPU-Seconds: 0.000150"
# encoding_format base64 (the OpenAI SDKs' default): the same vectors as
# little-endian float32, base64
"${C[@]}" -o "$TMP/bf" -d '{"input":["abcdefgh","xyz"],"model":"emb","encoding_format":"float"}' "$URL/v1/embeddings"
"${C[@]}" -o "$TMP/b64" -d '{"input":["abcdefgh","xyz"],"model":"emb","encoding_format":"base64"}' "$URL/v1/embeddings"
python3 - "$TMP/bf" "$TMP/b64" > "$TMP/emb" <<'PY' && ok "embeddings: base64 decodes to the float vectors" || { not_ok "embeddings: base64"; cat "$TMP/emb" "$TMP/b64"; }
import base64, json, struct, sys
f = json.load(open(sys.argv[1]))["data"]
b = json.load(open(sys.argv[2]))["data"]
for x, y in zip(f, b):
    raw = base64.b64decode(y["embedding"])
    got = struct.unpack("<%df" % (len(raw) // 4), raw)
    want = [struct.unpack("<f", struct.pack("<f", v))[0] for v in x["embedding"]]
    assert list(got) == want and len(want) == 8, (got, want)
PY
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -d '{"input":"x","encoding_format":"int8"}' "$URL/v1/embeddings"
[ "$(code_of "$TMP/h")" = 400 ] && ok "embeddings: an unknown encoding_format is 400" || not_ok "encoding_format int8: $(head -1 "$TMP/h")"

# ---- streaming ----
"${C[@]}" -N -D "$TMP/hs" -o "$TMP/stream" \
    -d '{"messages":[{"role":"user","content":"stream please"}],"max_tokens":7,"stream":true}' \
    "$URL/v1/chat/completions"
expect_grep "stream: chunked" "$TMP/hs" "Transfer-Encoding: chunked"
expect_grep "stream: event stream" "$TMP/hs" "Content-Type: text/event-stream"
expect_grep "stream: estimated X-GPU-Seconds header" "$TMP/hs" "X-GPU-Seconds: 0.014200"
n=$(grep -c '^data: {.*"delta"' "$TMP/stream")
[ "$n" = 7 ] && ok "stream: 7 token events" || { not_ok "stream: $n token events"; cat "$TMP/stream"; }
expect_grep "stream: first delta has the role" "$TMP/stream" '"delta":{"role":"assistant","content":" The"}'
expect_grep "stream: last token finishes" "$TMP/stream" '"delta":{"content":" the"},"finish_reason":"length"'
expect_grep "stream: usage chunk" "$TMP/stream" '"choices":[],"usage":{"prompt_tokens":4,"completion_tokens":7,"total_tokens":11,"gpu_seconds":0.0142}'
[ "$(grep -v '^$' "$TMP/stream" | tail -1)" = "data: [DONE]" ] && ok "stream: ends with [DONE]" || not_ok "stream: last event $(tail -2 "$TMP/stream")"
"${C[@]}" -N --raw -o "$TMP/raw" -d '{"prompt":"x","max_tokens":2,"stream":true}' "$URL/v1/completions"
[ "$(tail -c 5 "$TMP/raw" | od -An -c | tr -d ' ')" = '0\r\n\r\n' ] && ok "stream: zero chunk ends the body" || not_ok "stream: raw tail $(tail -c 20 "$TMP/raw" | od -c)"
expect_grep "stream: completions chunks carry text" "$TMP/raw" '"object":"text_completion","created"'
# Tokens arrive as they are generated: 50 tokens at 2 ms take ~100 ms.
"${C[@]}" -N -o /dev/null -w '%{time_starttransfer} %{time_total}\n' \
    -d '{"prompt":"x","max_tokens":50,"stream":true}' "$URL/v1/completions" > "$TMP/t"
total=$(awk '{ printf "%d", $2 * 1000 }' "$TMP/t")
[ "$total" -ge 95 ] && [ "$total" -lt 400 ] && ok "stream: 50 tokens paced over ${total} ms" || not_ok "stream: 50 tokens in ${total} ms"

# ---- keep-alive and pipelining ----
"${C[@]}" -o /dev/null -o /dev/null -w '%{num_connects} ' "$URL/healthz" "$URL/stats" > "$TMP/nc"
[ "$(cat "$TMP/nc")" = "1 0 " ] && ok "keep-alive: two requests, one connection" || not_ok "keep-alive: num_connects $(cat "$TMP/nc")"
"${C[@]}" -H 'Connection: close' -D "$TMP/h" -o /dev/null -o /dev/null -w '%{num_connects} ' \
    "$URL/healthz" "$URL/healthz" > "$TMP/nc"
[ "$(cat "$TMP/nc")" = "1 1 " ] && ok "Connection: close is honoured" || not_ok "Connection: close: num_connects $(cat "$TMP/nc")"
expect_grep "Connection: close is answered" "$TMP/h" "Connection: close"
# Two requests in one write; the answers come back in order on one connection.
exec 3<>"/dev/tcp/127.0.0.1/$SIM_PORT"
printf 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 31\r\n\r\n{"prompt":"abc","max_tokens":3}GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' >&3
timeout 5 cat <&3 > "$TMP/pipe"
exec 3<&-
[ "$(grep -o 'HTTP/1.1 200' "$TMP/pipe" | wc -l)" = 2 ] && ok "pipelining: both requests served" || { not_ok "pipelining (2)"; cat "$TMP/pipe"; }
[ "$(grep -o '"text":"[^"]*"\|^ok$' "$TMP/pipe" | tr -d '\r' | tr '\n' '|')" = '"text":" The quick brown"|ok|' ] && ok "pipelining: answers in request order" || { not_ok "pipelining order"; cat "$TMP/pipe"; }

# ---- bad input ----
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -d '{"messages": [' "$URL/v1/chat/completions"
[ "$(code_of "$TMP/h")" = 400 ] && ok "bad JSON: 400" || not_ok "bad JSON: $(head -1 "$TMP/h")"
expect_grep "bad JSON: OpenAI error" "$TMP/b" '"type":"invalid_request_error"'
expect_grep "bad JSON: says why" "$TMP/b" '"message":"invalid JSON body'
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -d '{"model":"m"}' "$URL/v1/chat/completions"
[ "$(code_of "$TMP/h")" = 400 ] && ok "no messages: 400" || not_ok "no messages: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -d '{"prompt":"x","max_tokens":-3}' "$URL/v1/completions"
[ "$(code_of "$TMP/h")" = 400 ] && ok "negative max_tokens: 400" || not_ok "max_tokens: $(head -1 "$TMP/h")"
expect_grep "negative max_tokens: names the field" "$TMP/b" "'max_tokens' must be"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -d '{}' "$URL/v1/nope"
[ "$(code_of "$TMP/h")" = 404 ] && ok "unknown path: 404" || not_ok "unknown path: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "$URL/v1/chat/completions"
[ "$(code_of "$TMP/h")" = 405 ] && ok "GET on chat: 405" || not_ok "GET chat: $(head -1 "$TMP/h")"
head -c 5000000 /dev/zero | tr '\0' a > "$TMP/huge"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" --data-binary @"$TMP/huge" "$URL/v1/completions"
[ "$(code_of "$TMP/h")" = 413 ] && ok "5 MB body: 413" || not_ok "huge body: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H 'Expect:' --data-binary @"$TMP/huge" "$URL/v1/completions"
[ "$(code_of "$TMP/h")" = 413 ] && ok "5 MB body without Expect: 413" || not_ok "huge body, no Expect: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/huge" "$URL/v1/completions"
[ "$(code_of "$TMP/h")" = 413 ] && ok "5 MB chunked body: 413" || not_ok "huge chunked body: $(head -1 "$TMP/h")"

# ---- faults ----
F=(-d '{"prompt":"x","max_tokens":2}' "$URL/v1/completions")
"${C[@]}" -o /dev/null -H 'X-Simmodel-Fault: reset' "${F[@]}" 2>/dev/null
rc=$?
[ "$rc" = 56 ] && ok "fault reset: curl 56" || not_ok "fault reset: curl $rc"
"${C[@]}" -o /dev/null -H 'X-Simmodel-Fault: close' "${F[@]}" 2>/dev/null
rc=$?
[ "$rc" = 52 ] || [ "$rc" = 56 ] && ok "fault close: curl $rc" || not_ok "fault close: curl $rc"
t0=$(date +%s%N)
curl -sS --max-time 1 -o /dev/null -H 'X-Simmodel-Fault: hang' "${F[@]}" 2>/dev/null
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$rc" = 28 ] && ok "fault hang: curl times out (${ms} ms)" || not_ok "fault hang: curl $rc"
"${C[@]}" -D "$TMP/h" -o /dev/null -H 'X-Simmodel-Fault: slow' "${F[@]}"
expect_grep "fault slow: double service time" "$TMP/h" "X-GPU-Seconds: 0.008100"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H 'X-Simmodel-Fault: status:429' "${F[@]}"
[ "$(code_of "$TMP/h")" = 429 ] && ok "fault status:429" || not_ok "fault status: $(head -1 "$TMP/h")"
expect_grep "fault status: error JSON" "$TMP/b" '"error":{"message":"injected fault: status 429"'
expect_grep "fault status:429 has Retry-After" "$TMP/h" "Retry-After: 1"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H 'X-Simmodel-Fault: status:500' "${F[@]}"
[ "$(code_of "$TMP/h")" = 500 ] && ok "fault status:500" || not_ok "fault status 500: $(head -1 "$TMP/h")"
"${C[@]}" -D "$TMP/h" -o "$TMP/b" -H 'X-Simmodel-Fault: explode' "${F[@]}"
[ "$(code_of "$TMP/h")" = 400 ] && ok "unknown fault: 400" || not_ok "unknown fault: $(head -1 "$TMP/h")"
[ "$("${C[@]}" "$URL/healthz")" = ok ] && ok "still serving after the faults" || not_ok "dead after faults"

"${C[@]}" -o "$TMP/stats" "$URL/stats"
expect_grep "stats: slots" "$TMP/stats" '"slots":4,"busy":0,"queued":0,'
expect_grep "stats: token totals" "$TMP/stats" '"prompt_tokens":'
# A hung connection left open must not stop a clean shutdown.
curl -sS --max-time 5 -o /dev/null -H 'X-Simmodel-Fault: hang' "${F[@]}" 2>/dev/null &
HUNG=$!
sleep 0.2
stop_simmodel "with a hung connection open"
wait "$HUNG"

# ---- queueing: 1 slot, 20 ms/token, 5 tokens = ~100 ms a request ----
start_simmodel --slots 1 --ms-per-token 20 --prefill-ms-per-token 0 --max-queue 3 || { finish; exit 1; }
URL="http://$SIM"
Q=(-d '{"prompt":"queue","max_tokens":5}' "$URL/v1/completions")
pids=()
for i in 1 2 3 4; do
    curl -sS --max-time 10 -o /dev/null -w '%{time_total}\n' "${Q[@]}" > "$TMP/q$i" &
    pids+=($!)
done
wait "${pids[@]}"
times=$(for i in 1 2 3 4; do ms_of "$TMP/q$i"; echo; done | sort -n | tr '\n' ' ')
read -r t1 t2 t3 t4 <<< "$times"
echo "    4 requests on 1 slot took: $times(ms)"
[ "$t1" -ge 95 ] && ok "queueing: the first takes its 100 ms ($t1)" || not_ok "queueing: first took $t1 ms"
[ "$t4" -ge 300 ] && [ "$t4" -lt 1000 ] && ok "queueing: the last waits for the other three ($t4 ms)" || not_ok "queueing: last took $t4 ms"
[ "$t2" -ge 150 ] && [ "$t3" -ge 250 ] && ok "queueing: latency grows in steps ($t2, $t3)" || not_ok "queueing: steps $t2 $t3"

# Past --max-queue: one long request runs, three wait, the fifth is refused.
curl -sS --max-time 10 -o /dev/null -d '{"prompt":"x","max_tokens":50}' "$URL/v1/completions" &
pids=($!)
sleep 0.2
for i in 1 2 3; do curl -sS --max-time 10 -o /dev/null "${Q[@]}" & pids+=($!); done
sleep 0.2
"${C[@]}" -o "$TMP/stats" "$URL/stats"
expect_grep "stats: one busy, three queued" "$TMP/stats" '"busy":1,"queued":3,'
"${C[@]}" -D "$TMP/h" -o "$TMP/b" "${Q[@]}"
[ "$(code_of "$TMP/h")" = 503 ] && ok "over --max-queue: 503" || not_ok "over queue: $(head -1 "$TMP/h")"
expect_grep "503 has Retry-After: 1" "$TMP/h" "Retry-After: 1"
expect_grep "503 is an OpenAI error" "$TMP/b" '"type":"server_error"'
wait "${pids[@]}"

# A body near the 4 MiB limit, read across many reads: 1000000 tokens.
head -c 4000000 /dev/zero | tr '\0' a | sed 's/^/{"prompt":"/; s/$/","max_tokens":1}/' > "$TMP/big.json"
"${C[@]}" -o "$TMP/b" --data-binary @"$TMP/big.json" "$URL/v1/completions"
expect_grep "4 MB prompt: 1000000 tokens" "$TMP/b" '"prompt_tokens":1000000,'

# A client that gives up frees its slot: nobody waits 1 s behind it.
curl -sS --max-time 0.3 -o /dev/null -d '{"prompt":"x","max_tokens":50}' "$URL/v1/completions" 2>/dev/null
"${C[@]}" -o /dev/null -w '%{time_total}\n' "${Q[@]}" > "$TMP/t"
ms=$(ms_of "$TMP/t")
[ "$ms" -lt 400 ] && ok "an abandoned request frees its slot (next took $ms ms)" || not_ok "after abandon: $ms ms"
"${C[@]}" -o "$TMP/stats" "$URL/stats"
expect_grep "stats: the abandoned request is counted" "$TMP/stats" '"cancelled":1,'
stop_simmodel "after queueing"

finish
