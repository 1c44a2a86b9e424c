# test_request_checks.sh - what a tenant's own key can do to a request (issue
# 17 items 4, 7, 9), against the real tenantd: X-Criticality may lower a
# request's class, never raise it above the tenant's; paths are normalized
# (dot segments, encoded '.' and '/', segment-boundary prefixes, fragments,
# control bytes) before routing, billing and forwarding; what reaches the
# upstream carries no client credential, no client X-Tenant/X-Tenantd-*, an
# X-Forwarded-For with the peer appended, always a Host, and only the
# methods a Route lists (tests/integration/request_checks.py).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
RC="$(dirname "$0")/request_checks.py"

# ---- item 4: a tenant cannot raise its own criticality ----
# simmodel: 2 slots, 50 ms a token, 10 tokens: 500 ms a request. Route
# "chat" with one worker: 2 in flight, 20 waiting. 60 requests of the
# sheddable tenant claim critical_plus: 2 start, 20 wait, 38 are shed; then
# 20 of the critical tenant come. Served at its own class (sheddable), each
# claimer is evicted for a critical request; honoured, they would keep the
# queue and every critical request would be shed.
start_simmodel --slots 2 --ms-per-token 50 --prefill-ms-per-token 0 || { finish; exit 1; }
cat > "$TMP/crit.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: batch}
spec:
  namespaces: [batch-ns]
  labels: {team: batch, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-batch)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 256, criticality: sheddable}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: prod}
spec:
  namespaces: [prod-ns]
  labels: {team: prod, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-prod)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 256, criticality: critical}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 2, queue: 20}
  cost: {model: tokens}
  timeout: 60s
Y
start_tenantd "$TMP/crit-data" --config "$TMP/crit.yaml" --workers 1 \
    --access-log "$TMP/crit-access.log" || { finish; exit 1; }
python3 "$RC" crit "$TD_DATA_PORT" key-batch key-prod /v1/chat/completions 60 20 > "$TMP/crit.out" 2>&1
sed "s/^/    /" "$TMP/crit.out"
expect_grep "a critical tenant beside 60 sheddable requests claiming critical_plus: 20 of 20 served" \
    "$TMP/crit.out" "key-prod: served 20 shed 0 other 0"
stop_tenantd
expect_grep "the claimers ran at their tenant's class" "$TMP/crit-access.log" "crit=sheddable"
expect_no_grep "no request ran as critical_plus" "$TMP/crit-access.log" "crit=critical_plus"

# ---- items 7 and 9 against an upstream that echoes what it got ----
python3 "$RC" echo "$TMP/echoport" 2>"$TMP/echo.log" &
PIDS+=($!)
wait_file "$TMP/echoport" || { not_ok "the echo upstream did not start"; finish; exit 1; }
ECHO="127.0.0.1:$(cat "$TMP/echoport")"
cat > "$TMP/echo.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-ns]
  labels: {team: alpha, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-alpha)"}, {sha256: "$(sha key-alpha-batch)", name: batch, criticality: sheddable_plus}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 256}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: embeddings}
spec:
  match: {pathPrefix: /v1/embeddings}
  upstream: {address: "$ECHO"}
  cost: {model: requests}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$ECHO"}
  cost: {model: requests}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: cred}
spec:
  match: {pathPrefix: /cred/}
  methods: [GET, POST, PUT]
  upstream: {address: "$ECHO", authorization: {fromEnv: TD_TEST_UPSTREAM_AUTH}}
  cost: {model: requests}
Y
TD_TEST_UPSTREAM_AUTH="Bearer upstream-secret" start_tenantd "$TMP/echo-data" \
    --config "$TMP/echo.yaml" --access-log "$TMP/echo-access.log" || { finish; exit 1; }
AUTH="Authorization: Bearer key-alpha"
n=0
# send NAME METHOD TARGET [HEADER...]: the request, its answer in $TMP/r.NAME
send() {
    local name=$1
    shift
    python3 "$RC" req "$TD_DATA_PORT" "$@" > "$TMP/r.$name" 2>&1
}
# route_of TARGET: the route the access log billed the last request of that path to
route_of() { grep -F " path=$1 " "$TMP/echo-access.log" | tail -1 | sed -n 's/.* route=\([^ ]*\).*/\1/p'; }
status_is() { # NAME WANT: the answer to request NAME had status WANT
    if grep -qx "status $2" "$TMP/r.$1"; then ok "$3 ($2)"; else
        not_ok "$3: want $2"; sed 's/^/    /' "$TMP/r.$1" | head -20; fi
}

# -- item 7: the path as routed, billed and forwarded --
send dotdot POST /v1/embeddings/../chat/completions "$AUTH"
status_is dotdot 200 "/v1/embeddings/../chat/completions is served"
expect_grep "... forwarded as the normalized path" "$TMP/r.dotdot" "target /v1/chat/completions"
sleep 0.3 # the access log is written by the worker's next check
[ "$(route_of /v1/chat/completions)" = chat ] && ok "... routed and billed as chat, not embeddings" \
    || not_ok "... routed as '$(route_of /v1/chat/completions)'"
send enc POST /v1/embeddings/%2e%2e/chat/completions "$AUTH"
status_is enc 400 "%2e%2e in the path is refused"
expect_grep "... naming the escaped dot" "$TMP/r.enc" "escaped '.'"
send encup POST /v1/embeddings/%2E%2E/chat/completions "$AUTH"
status_is encup 400 "%2E%2E in the path is refused"
send slash POST /v1/embeddings%2f..%2fchat/completions "$AUTH"
status_is slash 400 "%2f in the path is refused"
send bslash POST '/v1/embeddings%5c..%5cchat/completions' "$AUTH"
status_is bslash 400 "%5c in the path is refused"
send xyz POST /v1/embeddingsXYZ "$AUTH"
status_is xyz 200 "/v1/embeddingsXYZ is served"
sleep 0.3
[ "$(route_of /v1/embeddingsXYZ)" = chat ] && ok "... by the /v1/ route: /v1/embeddings matches on a segment boundary" \
    || not_ok "/v1/embeddingsXYZ routed as '$(route_of /v1/embeddingsXYZ)'"
send sub POST /v1/embeddings/x "$AUTH"
sleep 0.3
[ "$(route_of /v1/embeddings/x)" = embeddings ] && ok "/v1/embeddings/x is the embeddings route" \
    || not_ok "/v1/embeddings/x routed as '$(route_of /v1/embeddings/x)'"
send merged POST //v1//embeddings "$AUTH"
expect_grep "//v1//embeddings is forwarded as /v1/embeddings" "$TMP/r.merged" "target /v1/embeddings"
send above GET /../v1/models "$AUTH"
status_is above 400 "a .. above the root is refused"
send semi GET '/v1/embeddings/..;x=1/chat/completions' "$AUTH"
status_is semi 400 "a ..; dot segment with parameters is refused"
send frag GET '/v1/models#/../../embeddings' "$AUTH"
status_is frag 400 "a target with a fragment is refused"
send tab GET "$(printf '/v1/mo\tdels')" "$AUTH"
status_is tab 400 "a target with a tab is refused"
send absolute POST 'http://gw.test/v1/embeddings/../chat/completions?a=1' "$AUTH"
expect_grep "an absolute-form target is normalized too, forwarded in origin-form" "$TMP/r.absolute" \
    "target /v1/chat/completions?a=1"
send asterisk OPTIONS '*' "$AUTH"
status_is asterisk 400 "an asterisk-form target is refused"
send query GET '/v1/models?next=/../x&y=%2e%2e' "$AUTH"
expect_grep "the query is forwarded unchanged" "$TMP/r.query" "target /v1/models?next=/../x&y=%2e%2e"

# -- item 9: what the upstream gets --
send hdrs POST /v1/chat/completions "$AUTH" "X-Tenant: mallory" "X-Tenantd-Tenant: mallory" \
    "X-Tenantd-Cost-Estimate: 0" "X-Forwarded-For: 203.0.113.7" "X-Forwarded-For: 198.51.100.1" \
    "X-Other: kept"
status_is hdrs 200 "a request with spoofed identity headers is served"
expect_no_grep "the tenant's Authorization is not forwarded" "$TMP/r.hdrs" "key-alpha"
expect_no_grep "the client's X-Tenant is dropped" "$TMP/r.hdrs" "fwd X-Tenant: mallory"
expect_no_grep "the client's X-Tenantd-Tenant is dropped" "$TMP/r.hdrs" "mallory"
expect_no_grep "the client's X-Tenantd-Cost-Estimate is dropped" "$TMP/r.hdrs" "fwd X-Tenantd-Cost-Estimate"
[ "$(grep -c '^fwd X-Tenantd-Tenant: alpha$' "$TMP/r.hdrs")" = 1 ] && ok "one X-Tenantd-Tenant, set by tenantd" \
    || not_ok "X-Tenantd-Tenant: $(grep -i '^fwd X-Tenantd-Tenant' "$TMP/r.hdrs" | tr '\n' '|')"
expect_grep "X-Forwarded-For: every client value in order, then the peer" "$TMP/r.hdrs" \
    "fwd X-Forwarded-For: 203.0.113.7, 198.51.100.1, 127.0.0.1"
[ "$(grep -ci '^fwd X-Forwarded-For:' "$TMP/r.hdrs")" = 1 ] && ok "... in one field" \
    || not_ok "X-Forwarded-For fields: $(grep -ci '^fwd X-Forwarded-For:' "$TMP/r.hdrs")"
expect_grep "other headers pass" "$TMP/r.hdrs" "fwd X-Other: kept"
send critfwd POST /v1/chat/completions "$AUTH" "X-Criticality: critical_plus"
expect_grep "X-Criticality is forwarded as the class served (alpha is critical)" "$TMP/r.critfwd" \
    "fwd X-Criticality: critical"
expect_no_grep "... not the class claimed" "$TMP/r.critfwd" "critical_plus"
send critkey POST /v1/chat/completions "Authorization: Bearer key-alpha-batch" "X-Criticality: critical"
expect_grep "a named key's criticality caps its requests below the tenant's" "$TMP/r.critkey" \
    "fwd X-Criticality: sheddable_plus"
send critlow POST /v1/chat/completions "$AUTH" "X-Criticality: sheddable"
expect_grep "the header still lowers a request" "$TMP/r.critlow" "fwd X-Criticality: sheddable"
send cred POST /cred/x "$AUTH"
expect_grep "a route's own upstream credential replaces the tenant's" "$TMP/r.cred" \
    "fwd Authorization: Bearer upstream-secret"
expect_no_grep "... and the tenant's key is not sent with it" "$TMP/r.cred" "key-alpha"
send connhost GET /v1/models "$AUTH" "Connection: Host"
status_is connhost 400 "Connection: Host is refused"
send connxff GET /v1/models "$AUTH" "Connection: keep-alive, X-Forwarded-For" "X-Forwarded-For: 1.2.3.4"
status_is connxff 400 "Connection naming X-Forwarded-For is refused (as Envoy)"
send conncl GET /v1/models "$AUTH" "Connection: Content-Length"
status_is conncl 400 "Connection naming Content-Length is refused"
send connmany GET /v1/models "$AUTH" "Connection: a, b, c, d, e, f, g, h, i, j"
status_is connmany 400 "Connection naming ten fields is refused (as Envoy)"
send connpseudo GET /v1/models "$AUTH" "Connection: :authority"
status_is connpseudo 400 "Connection naming a pseudo-header is refused"
send connfoo GET /v1/models "$AUTH" "Connection: X-Hop" "X-Hop: one hop" "Connection: X-Hop2" "X-Hop2: v"
status_is connfoo 200 "Connection naming another field is served"
expect_grep "... with a Host" "$TMP/r.connfoo" "fwd Host: gw.test"
expect_no_grep "... without the fields every Connection header names" "$TMP/r.connfoo" "fwd X-Hop"
send trace TRACE /v1/models "$AUTH"
status_is trace 405 "TRACE is refused"
send put PUT /v1/chat/completions "$AUTH"
status_is put 405 "PUT on a route with the default methods is refused"
expect_grep "... with Allow: GET, POST" "$TMP/r.put" "resp Allow: GET, POST"
send putcred PUT /cred/x "$AUTH"
status_is putcred 200 "PUT on a route listing it is served"
send delcred DELETE /cred/x "$AUTH"
status_is delcred 405 "DELETE on a route not listing it is refused"
expect_grep "... with Allow: GET, POST, PUT" "$TMP/r.delcred" "resp Allow: GET, POST, PUT"

# ---- the new Route and key fields are validated ----
bad_config() { # NAME WANT_TEXT YAML
    printf '%s\n' "$3" > "$TMP/bad.yaml"
    "$TENANTCTL" apply -f "$TMP/bad.yaml" --server "http://127.0.0.1:$TD_PORT" > "$TMP/bad.out" 2>&1
    if [ $? -ne 0 ] && grep -qF -- "$2" "$TMP/bad.out"; then ok "$1"; else
        not_ok "$1"; sed 's/^/    /' "$TMP/bad.out" | head -5; fi
}
ROUTE='apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: r}
spec:
  upstream: {address: "127.0.0.1:9"}'
bad_config "spec.methods with TRACE is refused" "TRACE is never forwarded" \
    "$ROUTE
  match: {pathPrefix: /v1/}
  methods: [GET, TRACE]"
bad_config "spec.methods with an unknown method is refused" "is not one of GET" \
    "$ROUTE
  match: {pathPrefix: /v1/}
  methods: [get]"
bad_config "a pathPrefix that normalization would change is refused" "is not a normalized path" \
    "$ROUTE
  match: {pathPrefix: /v1//x/../}"
bad_config "a pathPrefix with %2e is refused" "escaped '.'" \
    "$ROUTE
  match: {pathPrefix: /v1/%2e/}"
bad_config "an inline spec.upstream.authorization is refused" "must be {fromEnv: VARIABLE}" \
    "$ROUTE
  match: {pathPrefix: /v1/}
  methods: [GET]
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: r2}
spec:
  match: {pathPrefix: /v2/}
  upstream: {address: \"127.0.0.1:9\", authorization: \"Bearer sk-inline\"}"
bad_config "an unset spec.upstream.authorization.fromEnv is refused" "TD_TEST_UNSET_VAR is not set" \
    "apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: r3}
spec:
  match: {pathPrefix: /v3/}
  upstream: {address: \"127.0.0.1:9\", authorization: {fromEnv: TD_TEST_UNSET_VAR}}"
bad_config "a key's criticality above its tenant's is refused" "is above the tenant's" \
    "apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: t}
spec:
  apiKeys: [{sha256: \"$(sha k)\", name: k1, criticality: critical_plus}]
  gateway: {criticality: sheddable}"

stop_tenantd
finish
