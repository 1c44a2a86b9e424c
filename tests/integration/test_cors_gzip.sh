# test_cors_gzip.sh - what browsers and compressing clients send,
# against the real tenantd, a real simmodel and a Python upstream
# that records what reached it: CORS preflights answered by tenantd per
# Route (allowed, denied, no key needed, never forwarded, not counted for
# a tenant), Access-Control-* on 200, 401 and 429 answers (the upstream's
# own replaced), headless Chromium's fetch() from an allowed origin (the
# chat and a 429's code and retry-after-ms readable) and from another
# (blocked), validation of spec.cors; gzip request bodies inflated and
# forwarded without Content-Encoding, a decompression bomb 413, a corrupt
# stream 400, br 415, each in OpenAI's error shape.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
HERE=$(cd "$(dirname "$0")" && pwd)

start_simmodel --slots 4 --ms-per-token 0 || { finish; exit 1; }
python3 "$HERE/echo_upstream.py" "$TMP/echoport" "$TMP/received" &
PIDS+=("$!")
wait_file "$TMP/echoport" 100 || { not_ok "echo upstream did not start"; finish; exit 1; }
ECHO="127.0.0.1:$(cat "$TMP/echoport")"
# the browser app's page, served from another origin than tenantd's
PAGE_PORT=$(free_port)
python3 -m http.server "$PAGE_PORT" --bind 127.0.0.1 --directory "$HERE/cors_page" >/dev/null 2>&1 &
PIDS+=("$!")
wait_port "$PAGE_PORT" 100 || { not_ok "the page server did not start"; finish; exit 1; }

cat > "$TMP/cors.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM"}
  cost: {model: tokens}
  cors:
    allowOrigins: ["https://app.example.com", "https://*.tools.example.com", "http://127.0.0.1:$PAGE_PORT"]
    allowMethods: [GET, POST]
    allowHeaders: [authorization, content-type]
    exposeHeaders: [x-trace-id, x-request-id]
    maxAge: 600
    allowCredentials: true
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: echo}
spec:
  match: {pathPrefix: /echo}
  upstream: {address: "$ECHO"}
  cost: {model: requests}
  cors: {allowOrigins: ["*"], allowHeaders: ["*"]}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: plain}
spec:
  match: {pathPrefix: /plain}
  upstream: {address: "$ECHO"}
  cost: {model: requests}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: web}
spec:
  namespaces: [web]
  apiKeys: [{sha256: "$(sha key-web)"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: tight}
spec:
  namespaces: [tight]
  apiKeys: [{sha256: "$(sha key-tight)"}]
  gateway: {rate: {cost: 6, per: 60s, burst: 6}}   # one chat request (4 tokens), then 429
Y
start_tenantd "$TMP/data" --config "$TMP/cors.yaml" || { finish; exit 1; }
D="http://127.0.0.1:$TD_DATA_PORT"
CHAT='{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}'

# head FILE NAME : the value of response header NAME in a curl -D dump
head_of() { tr -d '\r' < "$1" | awk -v n="$2" 'BEGIN{IGNORECASE=1} index(tolower($0), tolower(n) ":") == 1 {sub(/^[^:]*: */, ""); print; exit}'; }
status_of() { tr -d '\r' < "$1" | awk 'NR==1 {print $2}'; }
# check NAME GOT WANT
check() { if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1: got '$2', want '$3'"; fi; }

# ---- preflights ----
curl -s -o "$TMP/b" -D "$TMP/h" -X OPTIONS "$D/v1/chat/completions" \
    -H "Origin: https://app.example.com" -H "Access-Control-Request-Method: POST" \
    -H "Access-Control-Request-Headers: authorization, content-type"
check "preflight, allowed origin: 204 without a key" "$(status_of "$TMP/h")" 204
check "preflight: Allow-Origin is the origin (credentials)" "$(head_of "$TMP/h" access-control-allow-origin)" "https://app.example.com"
check "preflight: Allow-Methods" "$(head_of "$TMP/h" access-control-allow-methods)" "GET, POST"
check "preflight: Allow-Headers" "$(head_of "$TMP/h" access-control-allow-headers)" "authorization, content-type"
check "preflight: Max-Age" "$(head_of "$TMP/h" access-control-max-age)" 600
check "preflight: Allow-Credentials" "$(head_of "$TMP/h" access-control-allow-credentials)" true
check "preflight: Vary" "$(head_of "$TMP/h" vary)" Origin
check "preflight: no Content-Length on a 204" "$(head_of "$TMP/h" content-length)" ""
check "preflight: empty body" "$(wc -c < "$TMP/b")" 0

curl -s -o /dev/null -D "$TMP/h" -X OPTIONS "$D/v1/chat/completions" \
    -H "Origin: https://a.b.tools.example.com" -H "Access-Control-Request-Method: POST"
check "preflight, subdomain pattern: allowed" "$(head_of "$TMP/h" access-control-allow-origin)" "https://a.b.tools.example.com"
curl -s -o /dev/null -D "$TMP/h" -X OPTIONS "$D/v1/chat/completions" \
    -H "Origin: https://tools.example.com" -H "Access-Control-Request-Method: POST"
check "preflight, the pattern's own domain: no CORS headers" "$(head_of "$TMP/h" access-control-allow-origin)" ""
curl -s -o /dev/null -D "$TMP/h" -X OPTIONS "$D/v1/chat/completions" \
    -H "Origin: https://evil.example" -H "Access-Control-Request-Method: POST"
check "preflight, denied origin: still answered 204" "$(status_of "$TMP/h")" 204
if grep -qi '^access-control-' "$TMP/h"; then not_ok "denied origin got Access-Control-* headers"; cat "$TMP/h"; else ok "denied origin: no Access-Control-* headers"; fi

# "*" origins and headers (no credentials): "*" back, the asked headers echoed
curl -s -o /dev/null -D "$TMP/h" -X OPTIONS "$D/echo/x" \
    -H "Origin: https://anyone.example" -H "Access-Control-Request-Method: PUT" \
    -H "Access-Control-Request-Headers: authorization, x-custom"
check "preflight, \"*\" origins: Allow-Origin *" "$(head_of "$TMP/h" access-control-allow-origin)" "*"
check "preflight, \"*\" headers: the asked ones echoed (a literal * never covers authorization)" \
    "$(head_of "$TMP/h" access-control-allow-headers)" "authorization, x-custom"
: > "$TMP/received"
curl -s -o /dev/null -D "$TMP/h" -X OPTIONS "$D/plain/x" \
    -H "Origin: https://app.example.com" -H "Access-Control-Request-Method: POST"
check "preflight on a Route without spec.cors: not answered as one (401, no key)" "$(status_of "$TMP/h")" 401
check "preflights never reach an upstream" "$(wc -l < "$TMP/received")" 0

# ---- actual responses ----
curl -s -o "$TMP/b" -D "$TMP/h" "$D/v1/chat/completions" -H "Authorization: Bearer key-web" \
    -H "Origin: https://app.example.com" -H "Content-Type: application/json" -d "$CHAT"
check "200 through tenantd" "$(status_of "$TMP/h")" 200
check "200: Allow-Origin" "$(head_of "$TMP/h" access-control-allow-origin)" "https://app.example.com"
check "200: Allow-Credentials" "$(head_of "$TMP/h" access-control-allow-credentials)" true
check "200: Expose-Headers, tenantd's own included" "$(head_of "$TMP/h" access-control-expose-headers)" \
    "x-trace-id, retry-after, retry-after-ms, x-should-retry, x-request-id, x-tenantd-cost-estimate, x-tenantd-shed"
curl -s -o /dev/null -D "$TMP/h" "$D/v1/chat/completions" -H "Authorization: Bearer key-web" \
    -H "Origin: https://evil.example" -H "Content-Type: application/json" -d "$CHAT"
check "200, other origin: served, no Allow-Origin" "$(head_of "$TMP/h" access-control-allow-origin)" ""
curl -s -o "$TMP/b" -D "$TMP/h" "$D/v1/chat/completions" \
    -H "Origin: https://app.example.com" -H "Content-Type: application/json" -d "$CHAT"
check "401 (no key) carries Allow-Origin" "$(status_of "$TMP/h") $(head_of "$TMP/h" access-control-allow-origin)" "401 https://app.example.com"
for i in 1 2; do
    curl -s -o "$TMP/b" -D "$TMP/h" "$D/v1/chat/completions" -H "Authorization: Bearer key-tight" \
        -H "Origin: https://app.example.com" -H "Content-Type: application/json" -d "$CHAT"
done
check "429 carries Allow-Origin" "$(status_of "$TMP/h") $(head_of "$TMP/h" access-control-allow-origin)" "429 https://app.example.com"
check "429 exposes retry-after-ms" "$(head_of "$TMP/h" access-control-expose-headers | grep -c retry-after-ms)" 1
check "429 has retry-after-ms to read" "$(head_of "$TMP/h" retry-after-ms | grep -c '^[0-9]')" 1
expect_grep "429 body readable: OpenAI's error shape" "$TMP/b" '"type":"rate_limit_error","code":"rate_limited"'
curl -s -o /dev/null -D "$TMP/h" "$D/echo/x" -H "Authorization: Bearer key-web" \
    -H "Origin: https://anyone.example" -H "Content-Type: application/json" -d '{}'
check "the upstream's own Allow-Origin replaced by the route's" "$(grep -ci '^access-control-allow-origin' "$TMP/h") $(head_of "$TMP/h" access-control-allow-origin)" "1 *"

# ---- a real browser: headless Chromium runs the page's fetch() calls ----
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
in_browser() { # PAGE_ORIGIN: the page's #out as Chromium left it
    local profile
    profile=$(mktemp -d "$TMP/profile.XXXXXX")
    timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --virtual-time-budget=8000 --dump-dom \
        "$1/page.html?td=$D" 2>>"$TMP/chromium.log" |
        python3 -c "import sys,re,html; m=re.search(r'<pre id=\"out\">(.*?)</pre>', sys.stdin.read(), re.S); print(html.unescape(m.group(1)) if m else 'no page')"
}
if [ -z "$CHROMIUM" ]; then
    echo "# chromium is not installed: the browser checks are left out (scripts/install-deps.sh installs it)"
else
    in_browser "http://127.0.0.1:$PAGE_PORT" > "$TMP/browser"
    python3 - "$TMP/browser" > "$TMP/browser.txt" <<'PY'
import json, sys
o = json.loads(open(sys.argv[1]).read())
c, l = o["chat"], o["limited"]
print(c["status"], c["tokens"], l["status"], l["code"], l["retryMs"] is not None)
PY
    check "browser on an allowed origin: preflight passed, chat read, a 429's code and retry-after-ms read" \
        "$(cat "$TMP/browser.txt" 2>/dev/null || cat "$TMP/browser")" "200 3 429 rate_limited True"
    in_browser "http://localhost:$PAGE_PORT" > "$TMP/browser"
    check "browser on another origin (localhost): the call is blocked" \
        "$(cat "$TMP/browser")" '{"chat":{"status":"blocked"},"limited":{"status":"blocked"}}'
fi

# ---- spec.cors validation ----
bad_cors() { # NAME CORS WANT: applying the echo Route with spec.cors CORS is refused
    cat > "$TMP/bad.yaml" <<B
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: echo}
spec:
  match: {pathPrefix: /echo}
  upstream: {address: "$ECHO"}
  cors: $2
B
    "$TENANTCTL" apply -f "$TMP/bad.yaml" --server "http://127.0.0.1:$TD_PORT" > "$TMP/out" 2>&1
    expect_grep "$1" "$TMP/out" "$3"
}
bad_cors "\"*\" origin with credentials refused, naming the field" \
    '{allowOrigins: ["*"], allowCredentials: true}' 'spec.cors.allowOrigins: "*" cannot be used with allowCredentials'
bad_cors "an origin with a path refused" '{allowOrigins: ["https://a.example/"]}' 'spec.cors.allowOrigins: item 0'
bad_cors "an unknown method refused" '{allowOrigins: ["*"], allowMethods: [FETCH]}' 'spec.cors.allowMethods: item 0'
bad_cors "maxAge out of range refused" '{allowOrigins: ["*"], maxAge: 100000}' 'spec.cors.maxAge'

# ---- gzip request bodies ----
: > "$TMP/received"
PLAIN='{"model":"m","messages":[{"role":"user","content":"hello gzip"}],"max_tokens":2}'
printf %s "$PLAIN" | gzip -9 > "$TMP/body.gz"
curl -s -o "$TMP/b" -w '%{http_code}' "$D/echo/v1/chat" -H "Authorization: Bearer key-web" \
    -H "Content-Type: application/json" -H "Content-Encoding: gzip" --data-binary @"$TMP/body.gz" > "$TMP/code"
check "gzip body accepted" "$(cat "$TMP/code")" 200
python3 - "$TMP/received" > "$TMP/rec" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
h = r["headers"]
print(h.get("content-encoding", "-"), h.get("content-length"), r["length"], r["body"])
PY
check "the upstream got the inflated body, Content-Length fixed, no Content-Encoding" "$(cat "$TMP/rec")" \
    "- ${#PLAIN} ${#PLAIN} $PLAIN"
curl -s -o "$TMP/b" -w '%{http_code}' "$D/v1/chat/completions" -H "Authorization: Bearer key-web" \
    -H "Content-Type: application/json" -H "Content-Encoding: gzip" --data-binary @"$TMP/body.gz" > "$TMP/code"
check "gzip body to simmodel: a completion" "$(cat "$TMP/code") $(grep -c '"completion_tokens":2' "$TMP/b")" "200 1"

# a bomb: 64 MiB of zeros in about 64 KB, past the 1 MiB maximum body
python3 -c "import gzip,sys; sys.stdout.buffer.write(gzip.compress(bytes(64 << 20), 9))" > "$TMP/bomb.gz"
: > "$TMP/received"
curl -s -o "$TMP/b" -w '%{http_code}' "$D/echo/v1/chat" -H "Authorization: Bearer key-web" \
    -H "Content-Encoding: gzip" --data-binary @"$TMP/bomb.gz" > "$TMP/code"
check "decompression bomb ($(wc -c < "$TMP/bomb.gz") bytes): 413" "$(cat "$TMP/code")" 413
expect_grep "413 names body_too_large" "$TMP/b" '"code":"body_too_large"'
head -c 40 "$TMP/body.gz" > "$TMP/trunc.gz"
curl -s -o "$TMP/b" -w '%{http_code}' "$D/echo/v1/chat" -H "Authorization: Bearer key-web" \
    -H "Content-Encoding: gzip" --data-binary @"$TMP/trunc.gz" > "$TMP/code"
check "truncated gzip: 400" "$(cat "$TMP/code")" 400
expect_grep "400 says why" "$TMP/b" '"reason":"bad_gzip"'
curl -s -o "$TMP/b" -w '%{http_code}' "$D/echo/v1/chat" -H "Authorization: Bearer key-web" \
    -H "Content-Encoding: gzip" --data-binary '{"not":"gzip"}' > "$TMP/code"
check "a plain body labelled gzip: 400" "$(cat "$TMP/code")" 400
curl -s -o "$TMP/b" -w '%{http_code}' "$D/echo/v1/chat" -H "Authorization: Bearer key-web" \
    -H "Content-Encoding: br" --data-binary @"$TMP/body.gz" > "$TMP/code"
check "br: 415" "$(cat "$TMP/code")" 415
expect_grep "415 in OpenAI's shape, code unsupported_media_type" "$TMP/b" '"type":"invalid_request_error","code":"unsupported_media_type"'
curl -s -o "$TMP/b" -w '%{http_code}' "$D/echo/v1/chat" -H "Authorization: Bearer key-web" \
    -H "Content-Encoding: gzip, gzip" --data-binary @"$TMP/body.gz" > "$TMP/code"
check "gzip twice: 415" "$(cat "$TMP/code")" 415
check "none of the refused bodies reached the upstream" "$(wc -l < "$TMP/received")" 0
curl -s -o "$TMP/b" -w '%{http_code}' "$D/echo/v1/chat" -H "Authorization: Bearer key-web" \
    -H "Content-Encoding: identity" --data-binary '{"model":"m"}' > "$TMP/code"
check "identity: forwarded as it is" "$(cat "$TMP/code")" 200

# ---- the preflights were counted for no tenant ----
curl -s "http://127.0.0.1:$TD_PORT/metrics" > "$TMP/metrics"
# web's requests on chat: the two 200s by curl, the browser's and the gzip
# body (without chromium, one fewer), none of the preflights
WANT=4
[ -z "$CHROMIUM" ] && WANT=3
expect_grep "preflights are counted for no tenant" "$TMP/metrics" \
    "tenantd_requests_total{tenant=\"web\",route=\"chat\",outcome=\"accepted\"} $WANT"
stop_tenantd
finish
