# test_data_tls.sh - the gateway's data listener over HTTPS
# (--data-tls-cert/--data-tls-key), checked with curl: proxied requests and
# keep-alive over TLS, 401 and 413 answered inside TLS, a wrong CA refused
# by the client, plain HTTP to the TLS port answered with nothing, and the
# flags refused one without the other.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }

mkcert() { # DIR: a CA and a certificate for 127.0.0.1 signed by it
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
        -subj /CN=test-ca -keyout "$1/ca.key" -out "$1/ca.crt" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
        -keyout "$1/tls.key" -out "$1/tls.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$1/ext"
    openssl x509 -req -in "$1/tls.csr" -CA "$1/ca.crt" -CAkey "$1/ca.key" -CAcreateserial \
        -days 1 -extfile "$1/ext" -out "$1/tls.crt" 2>/dev/null
}
mkdir -p "$TMP/pki" "$TMP/other"
mkcert "$TMP/pki"
mkcert "$TMP/other"

start_simmodel --slots 4 --ms-per-token 1 || { finish; exit 1; }
cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  labels: {team: alpha, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-tls)"}]
  gateway: {rate: {cost: 1000000, per: 1s, burst: 1000000}, concurrency: 16}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 8, queue: 16}
  cost: {model: tokens}
  timeout: 5s
Y
expect_rc "--data-tls-cert without --data-tls-key is refused" 2 "$TENANTD" --data "$TMP/d0" \
    --data-tls-cert "$TMP/pki/tls.crt" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0
expect_grep "says which flags" "$TMP/err" "--data-tls-cert and --data-tls-key go together"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --data-tls-cert "$TMP/pki/tls.crt" \
    --data-tls-key "$TMP/pki/tls.key" || { finish; exit 1; }
URL="https://127.0.0.1:$TD_DATA_PORT/v1/chat/completions"
BODY='{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}'
CURL=(curl -sS --max-time 10 --cacert "$TMP/pki/ca.crt")

code=$("${CURL[@]}" -o "$TMP/resp" -w '%{http_code}' -H 'Authorization: Bearer key-tls' -d "$BODY" "$URL")
[ "$code" = 200 ] && ok "a request through the gateway over HTTPS: 200" || not_ok "https request: $code"
expect_grep "the upstream's answer with usage" "$TMP/resp" '"completion_tokens":3'
# two requests on one connection: curl says it re-used it
"${CURL[@]}" -v -o /dev/null -o /dev/null -H 'Authorization: Bearer key-tls' -d "$BODY" "$URL" "$URL" 2> "$TMP/v"
expect_grep "keep-alive over TLS" "$TMP/v" "Re-using existing connection"
code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' -d "$BODY" "$URL")
[ "$code" = 401 ] && ok "no key over HTTPS: 401" || not_ok "no key: $code"
head -c 2000000 /dev/zero | tr '\0' 'a' > "$TMP/big"
code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer key-tls' --data-binary @"$TMP/big" "$URL")
[ "$code" = 413 ] && ok "a 2 MB body over HTTPS: 413" || not_ok "big body: $code"
expect_rc "a client trusting another CA refuses the gateway" 60 curl -sS --max-time 5 \
    --cacert "$TMP/other/ca.crt" -d "$BODY" "$URL"
code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' -d "$BODY" "http://127.0.0.1:$TD_DATA_PORT/v1/chat/completions")
[ "$code" = 000 ] && ok "plain HTTP to the TLS port gets no HTTP answer" || not_ok "plain http to tls: $code"
code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer key-tls' -d "$BODY" "$URL")
[ "$code" = 200 ] && ok "and the gateway still serves HTTPS after it" || not_ok "after plain: $code"
expect_grep "the log says https" "$TMP/tenantd.log" "gateway on https://"
stop_tenantd
finish
