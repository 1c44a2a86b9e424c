# test_daemon.sh - the real tenantd over HTTPS on a free loopback port:
# health, the webhook endpoints, apply/get/delete, an invalid apply that
# changes nothing, and state that survives a restart.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; exit 1; }

# A CA and a serving certificate for 127.0.0.1, made for this run.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=test-ca -keyout "$TMP/ca.key" -out "$TMP/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
    -keyout "$TMP/tls.key" -out "$TMP/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$TMP/ext"
openssl x509 -req -in "$TMP/tls.csr" -CA "$TMP/ca.crt" -CAkey "$TMP/ca.key" -CAcreateserial \
    -days 1 -extfile "$TMP/ext" -out "$TMP/tls.crt" 2>/dev/null

DATA="$TMP/data"
start_tenantd "$DATA" --config "$EX/platform.yaml" --tls-cert "$TMP/tls.crt" --tls-key "$TMP/tls.key" || { finish; exit 1; }
URL="https://127.0.0.1:$TD_PORT"
CURL=(curl -sS --max-time 10 --cacert "$TMP/ca.crt")
expect_rc "a second tenantd on the same gateway port fails" 1 "$TENANTD" --data "$TMP/other" \
    --admin-listen 127.0.0.1:0 --listen "127.0.0.1:$TD_DATA_PORT"
expect_grep "and says the port is in use" "$TMP/err" "Address already in use"
export TENANTD_SERVER="$URL"
CTL=("$TENANTCTL")

code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' "$URL/healthz")
[ "$code" = 200 ] && ok "healthz over HTTPS" || not_ok "healthz: $code"
code=$("${CURL[@]}" -o "$TMP/body" -w '%{http_code}' "$URL/readyz")
[ "$code" = 200 ] && ok "readyz" || not_ok "readyz: $code"
if curl -sS --max-time 5 -o /dev/null "$URL/healthz" 2>/dev/null; then not_ok "unverified CA accepted"; else ok "server certificate is verified by curl"; fi

"${CURL[@]}" -H 'Content-Type: application/json' --data-binary @"$EX/pods/review.json" "$URL/mutate" > "$TMP/mutate"
expect_grep "mutate echoes uid" "$TMP/mutate" '"uid":"705ab4f5-6393-11e8-b7cc-42010a800002"'
expect_grep "mutate allows" "$TMP/mutate" '"allowed":true'
expect_grep "mutate returns a JSONPatch" "$TMP/mutate" '"patchType":"JSONPatch"'
"${CURL[@]}" -H 'Content-Type: application/json' --data-binary @"$EX/pods/review.json" "$URL/validate" > "$TMP/validate"
expect_grep "validate allows" "$TMP/validate" '"allowed":true'
expect_no_grep "validate sends no patch" "$TMP/validate" '"patch"'

sed 's/"spec": {"containers": \[{"name": "web", "image": "nginx"}\]}/"spec": {"hostPID": true, "containers": [{"name": "web", "image": "nginx"}]}/' "$EX/pods/review.json" > "$TMP/hostpid.json"
"${CURL[@]}" --data-binary @"$TMP/hostpid.json" "$URL/validate" > "$TMP/v2"
expect_grep "validate denies hostPID" "$TMP/v2" '"allowed":false'
expect_grep "PSS message over the webhook" "$TMP/v2" 'host namespaces (hostPID=true)'
"${CURL[@]}" --data-binary @"$TMP/hostpid.json" "$URL/mutate" > "$TMP/m2"
expect_grep "mutate leaves denial to validate" "$TMP/m2" '"allowed":true'

printf '{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": ' > "$TMP/bad.json"
code=$("${CURL[@]}" -o "$TMP/badresp" -w '%{http_code}' --data-binary @"$TMP/bad.json" "$URL/validate")
expect_grep "malformed review: allowed=false" "$TMP/badresp" '"allowed":false'
expect_grep "malformed review: code 400" "$TMP/badresp" '"code":400'
head -c 4000000 /dev/zero | tr '\0' 'a' > "$TMP/huge"
code=$("${CURL[@]}" -o /dev/null -w '%{http_code}' --data-binary @"$TMP/huge" "$URL/validate")
[ "$code" = 413 ] && ok "oversized body: 413" || not_ok "oversized body: $code"

expect_rc "get tenants" 0 "${CTL[@]}" get tenants --cacert "$TMP/ca.crt"
expect_grep "team-a listed" "$TMP/out" "team-a"
expect_rc "get quota -n" 0 "${CTL[@]}" get quota -n team-a-prod --cacert "$TMP/ca.crt"
expect_grep "quota listed" "$TMP/out" "team-a-compute"

cat > "$TMP/new.yaml" <<'Y'
apiVersion: v1
kind: Namespace
metadata: {name: team-c-dev, labels: {team: c, project: x, environment: dev}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: team-c-compute, namespace: team-c-dev}
spec:
  hard: {requests.cpu: "4", requests.memory: 8Gi, limits.cpu: "4", limits.memory: 8Gi}
Y
expect_rc "apply" 0 "${CTL[@]}" apply -f "$TMP/new.yaml" --cacert "$TMP/ca.crt"
expect_grep "apply reports created" "$TMP/out" "ResourceQuota team-c-dev/team-c-compute created"
expect_rc "apply again" 0 "${CTL[@]}" apply -f "$TMP/new.yaml" --cacert "$TMP/ca.crt"
expect_grep "apply reports unchanged" "$TMP/out" "unchanged"

cat > "$TMP/pod-c.json" <<'Y'
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},"namespace":"team-c-dev","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"x","resources":{"limits":{"cpu":"8","memory":"1Gi"}}}]}}}}
Y
"${CURL[@]}" --data-binary @"$TMP/pod-c.json" "$URL/validate" > "$TMP/v3"
expect_grep "applied quota is enforced at once" "$TMP/v3" 'exceeded quota: team-c-compute'

# An invalid apply: second document bad. Nothing of it may be stored.
cat > "$TMP/bad.yaml" <<'Y'
apiVersion: v1
kind: Namespace
metadata: {name: team-d-dev}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: team-d-compute, namespace: team-d-dev}
spec:
  hard:
    requests.cpu: 8Gx
Y
expect_rc "invalid apply rejected" 2 "${CTL[@]}" apply -f "$TMP/bad.yaml" --cacert "$TMP/ca.crt"
expect_grep "error names file:line and field" "$TMP/err" "bad.yaml:10: ResourceQuota team-d-dev/team-d-compute: spec.hard.requests.cpu: \"8Gx\" is not a quantity"
expect_rc "get ns after bad apply" 0 "${CTL[@]}" get ns --cacert "$TMP/ca.crt"
expect_no_grep "nothing of the invalid apply stored" "$TMP/out" "team-d-dev"
expect_rc "get a missing object" 2 "${CTL[@]}" get ns team-d-dev --cacert "$TMP/ca.crt"

expect_rc "tenantctl get -o yaml" 0 "${CTL[@]}" get quota team-c-compute -n team-c-dev -o yaml --cacert "$TMP/ca.crt"
expect_grep "yaml output" "$TMP/out" "requests.memory: 8Gi"

stop_tenantd
start_tenantd "$DATA" --tls-cert "$TMP/tls.crt" --tls-key "$TMP/tls.key" || { finish; exit 1; }
URL="https://127.0.0.1:$TD_PORT"
export TENANTD_SERVER="$URL"
expect_rc "get after restart" 0 "${CTL[@]}" get quota -n team-c-dev --cacert "$TMP/ca.crt"
expect_grep "applied object survives restart" "$TMP/out" "team-c-compute"
expect_rc "config objects were stored too" 0 "${CTL[@]}" get tenant team-a --cacert "$TMP/ca.crt"

expect_rc "delete" 0 "${CTL[@]}" delete quota team-c-compute -n team-c-dev --cacert "$TMP/ca.crt"
expect_rc "deleted object is gone" 2 "${CTL[@]}" get quota team-c-compute -n team-c-dev --cacert "$TMP/ca.crt"
expect_rc "delete missing" 2 "${CTL[@]}" delete quota team-c-compute -n team-c-dev --cacert "$TMP/ca.crt"
expect_rc "unreachable server" 3 "${CTL[@]}" get ns --server http://127.0.0.1:1
stop_tenantd

# The admin token: the control API and /metrics need it; the webhook and
# health checks do not (kube-apiserver reaches them with mTLS).
printf 'a-long-enough-admin-token-%s\n' "$RANDOM$RANDOM" > "$TMP/token"
printf 'a-long-enough-but-wrong-token\n' > "$TMP/wrong"
start_tenantd "$TMP/data3" --config "$EX/platform.yaml" --admin-token-file "$TMP/token" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
expect_rc "no token: refused" 2 "${CTL[@]}" get ns
expect_grep "says why" "$TMP/err" "unauthorized"
expect_rc "wrong token: refused" 2 "${CTL[@]}" get ns --token-file "$TMP/wrong"
expect_rc "admin token: allowed" 0 "${CTL[@]}" get ns --token-file "$TMP/token"
expect_grep "lists namespaces" "$TMP/out" "team-a-prod"
TENANTD_TOKEN_FILE="$TMP/token" expect_rc "token from TENANTD_TOKEN_FILE" 0 "${CTL[@]}" apply -f "$TMP/new.yaml"
code=$(curl -s -o /dev/null -w '%{http_code}' "$TENANTD_SERVER/metrics")
[ "$code" = 401 ] && ok "/metrics needs the token" || not_ok "/metrics without token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary @"$EX/pods/review.json" "$TENANTD_SERVER/validate")
[ "$code" = 200 ] && ok "the webhook needs no token" || not_ok "webhook with token set: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "$TENANTD_SERVER/healthz")
[ "$code" = 200 ] && ok "healthz needs no token" || not_ok "healthz: $code"
expect_no_grep "the token is never logged" "$TMP/tenantd.log" "a-long-enough-admin-token"
stop_tenantd
printf 'short\n' > "$TMP/short"
expect_rc "a short token is refused" 2 "$TENANTD" --data "$TMP/d4" --admin-token-file "$TMP/short" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0

# No --config and an empty store: the built-in example platform.
: > "$TMP/tenantd.log"
start_tenantd "$TMP/data5" || { finish; exit 1; }
expect_grep "built-in platform announced" "$TMP/tenantd.log" "serving the built-in example platform"
expect_rc "built-in platform served" 0 "$TENANTCTL" get quota -n team-a-prod --server "http://127.0.0.1:$TD_PORT"
expect_grep "built-in quota" "$TMP/out" "team-a-compute"
stop_tenantd
: > "$TMP/tenantd.log"
start_tenantd "$TMP/data5" || { finish; exit 1; }
expect_no_grep "a restart serves the store, not the built-in" "$TMP/tenantd.log" "built-in"
stop_tenantd

expect_rc "tenantd --help" 0 "$TENANTD" --help
expect_rc "tenantd without --data" 2 "$TENANTD"
printf 'kind: Nope\n' > "$TMP/nope.yaml"
expect_rc "tenantd with a bad config" 2 "$TENANTD" --data "$TMP/d2" --config "$TMP/nope.yaml" --admin-listen 127.0.0.1:0
finish
