# test_auth.sh - who may do what on the admin listener: every endpoint x
# {no credential, a key of nobody, the wrong tenant's key, the right
# tenant's key, the admin token}, table-driven, printed as a table; then
# what a tenant sees (only its own workloads and Tenant, keys redacted, no
# other tenant named), revocation by apply without restart, and that no
# key or token reaches the log.
. "$(dirname "$0")/lib.sh"

ADMIN="admin-token-$RANDOM$RANDOM$RANDOM-long"
KEY_A="alpha-key-$RANDOM$RANDOM"    # tenant alpha, namespace team-a
KEY_B="beta-key-$RANDOM$RANDOM"     # tenant beta, namespace team-b
BOGUS="bogus-key-$RANDOM$RANDOM"
printf '%s\n' "$ADMIN" > "$TMP/admin"
printf '%s\n' "$KEY_A" > "$TMP/key-a"

tenants() { # $1: beta's apiKeys line
    cat <<EOF
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [team-a]
  labels: {team: a, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha "$KEY_A")"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  namespaces: [team-b]
  labels: {team: b, project: p, environment: prod}
  apiKeys: $1
EOF
}
tenants "[{sha256: \"$(sha "$KEY_B")\"}]" > "$TMP/tenants.yaml"

workload() { # name namespace queue
    printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: %s, namespace: %s}\nspec:\n  queueName: %s\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}]\n' "$1" "$2" "$3"
}
workload alpha-secret-job team-a team-a > "$TMP/wl-a.yaml"
workload beta-job team-b team-b > "$TMP/wl-b.yaml"
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: scratch}\n' > "$TMP/ns.yaml"
cat > "$TMP/review.json" <<'EOF'
{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"team-a","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team-a"},"spec":{"containers":[{"name":"c","image":"x"}]}}}}
EOF

start_tenantd "$TMP/data" --config "$EX/kueue/platform.yaml" --config "$TMP/tenants.yaml" \
    --admin-token-file "$TMP/admin" || { finish; exit 1; }
BASE="http://127.0.0.1:$TD_PORT"
# alpha's workload exists before the matrix, so reads have something to leak
curl -s -o /dev/null -H "Authorization: Bearer $ADMIN" --data-binary @"$TMP/wl-a.yaml" "$BASE/v1/workloads"

# call METHOD PATH BODYFILE CREDENTIAL OUTFILE -> prints the status
call() {
    local auth=()
    [ -n "$4" ] && auth=(-H "Authorization: Bearer $4")
    local data=()
    [ "$3" != - ] && data=(--data-binary @"$3")
    curl -s -o "$5" -w '%{http_code}' -X "$1" "${auth[@]}" "${data[@]}" "$BASE$2"
}

# The right tenant is alpha (namespace team-a), the wrong one beta. Columns:
# none bogus wrong right admin.
MATRIX=(
"healthz              |GET   |/healthz|-|200 200 200 200 200"
"readyz               |GET   |/readyz|-|200 200 200 200 200"
"webhook validate     |POST  |/validate|$TMP/review.json|200 200 200 200 200"
"webhook mutate       |POST  |/mutate|$TMP/review.json|200 200 200 200 200"
"webhook admit        |POST  |/admit|$TMP/review.json|200 200 200 200 200"
"metrics              |GET   |/metrics|-|401 401 403 403 200"
"apply                |POST  |/v1/apply|$TMP/ns.yaml|401 401 403 403 200"
"submit workload      |POST  |/v1/workloads|$TMP/wl-a.yaml|401 401 403 200 200"
"list workloads ns    |GET   |/v1/workloads?namespace=team-a|-|401 401 403 200 200"
"list workloads all   |GET   |/v1/workloads|-|401 401 200 200 200"
"get namespaced kind  |GET   |/v1/objects?kind=Workload&namespace=team-a|-|401 401 403 200 200"
"get one workload     |GET   |/v1/objects?kind=Workload&namespace=team-a&name=alpha-secret-job|-|401 401 403 200 200"
"get own Tenant       |GET   |/v1/objects?kind=Tenant&name=alpha|-|401 401 403 200 200"
"list Tenants         |GET   |/v1/objects?kind=Tenant|-|401 401 200 200 200"
"get cluster kind     |GET   |/v1/objects?kind=ClusterQueue|-|401 401 403 403 200"
"delete object        |DELETE|/v1/objects?kind=Namespace&name=scratch|-|401 401 403 403 200"
"dashboard page       |GET   |/ui|-|200 200 200 200 200"
"usage                |GET   |/v1/usage|-|401 401 200 200 200"
"explain request      |GET   |/v1/explain/request?tenant=alpha|-|401 401 403 200 200"
"explain workload     |GET   |/v1/explain/workload?namespace=team-a&name=alpha-secret-job|-|401 401 403 200 200"
"finish workload      |POST  |/v1/workloads/finish?namespace=team-a&name=nope|-|401 401 403 404 404"
"unknown endpoint     |GET   |/v1/nothing|-|404 404 404 404 404"
"wrong method         |PUT   |/v1/workloads|-|405 405 405 405 405"
)
CREDS=("" "$BOGUS" "$KEY_B" "$KEY_A" "$ADMIN")
printf '%-21s %-7s %-6s %-6s %-6s %-6s %-6s\n' endpoint method none bogus wrong right admin > "$TMP/table"
bad=0
n=0
for row in "${MATRIX[@]}"; do
    IFS='|' read -r name method path body want <<<"$row"
    read -r -a wants <<<"$want"
    line=$(printf '%-21s %-7s' "$name" "$method")
    for i in 0 1 2 3 4; do
        got=$(call "$method" "$path" "$body" "${CREDS[$i]}" "$TMP/resp")
        n=$((n + 1))
        if [ "$got" = "${wants[$i]}" ]; then
            line+=$(printf ' %-6s' "$got")
        else
            line+=$(printf ' %-6s' "$got!=${wants[$i]}")
            bad=$((bad + 1))
        fi
        # Whatever beta is told, it never hears of alpha's objects.
        if [ "$i" = 2 ] && grep -qE '"alpha"|tenant alpha|alpha-secret-job' "$TMP/resp"; then
            line+="(leak)"; bad=$((bad + 1))
        fi
    done
    echo "$line" >> "$TMP/table"
done
cat "$TMP/table"
[ "$bad" -eq 0 ] && ok "authorization matrix: $n cases as expected" || not_ok "authorization matrix: $bad of $n cases wrong"

# What each one sees.
call GET /v1/workloads - "$KEY_B" "$TMP/b-list" >/dev/null
expect_no_grep "beta's list holds no workload of alpha" "$TMP/b-list" "alpha-secret-job"
call POST /v1/workloads "$TMP/wl-b.yaml" "$KEY_B" "$TMP/b-sub" >/dev/null
call GET /v1/workloads - "$KEY_B" "$TMP/b-list" >/dev/null
expect_grep "beta sees its own workload" "$TMP/b-list" "beta-job"
call GET /v1/workloads - "$KEY_A" "$TMP/a-list" >/dev/null
expect_grep "alpha sees its own workload" "$TMP/a-list" "alpha-secret-job"
expect_no_grep "alpha does not see beta's" "$TMP/a-list" "beta-job"
call GET "/v1/objects?kind=Tenant" - "$KEY_B" "$TMP/b-tenants" >/dev/null
expect_grep "beta reads its own Tenant" "$TMP/b-tenants" '"name": "beta"'
expect_grep "its keys are redacted" "$TMP/b-tenants" '"redacted"'
expect_no_grep "the hash is not shown" "$TMP/b-tenants" "$(sha "$KEY_B")"
call GET "/v1/objects?kind=Workload" - "$KEY_B" "$TMP/b-objs" >/dev/null
expect_no_grep "a namespaced list without ?namespace is filtered" "$TMP/b-objs" "alpha-secret-job"
# a submission touching another namespace is refused whole
cat "$TMP/wl-b.yaml" > "$TMP/mixed.yaml"; echo --- >> "$TMP/mixed.yaml"
workload sneaky team-a team-a >> "$TMP/mixed.yaml"
code=$(call POST /v1/workloads "$TMP/mixed.yaml" "$KEY_B" "$TMP/resp")
[ "$code" = 403 ] && ok "a batch with one foreign Workload is refused (403)" || not_ok "mixed batch: $code"
call GET "/v1/workloads?namespace=team-a" - "$ADMIN" "$TMP/resp" >/dev/null
expect_no_grep "and nothing of it was stored" "$TMP/resp" "sneaky"
code=$(call POST /v1/workloads "$TMP/mixed.yaml" "$KEY_B" "$TMP/resp")
expect_grep "the 403 names only the caller's namespaces" "$TMP/resp" "only its own namespaces (team-b)"
# tenantctl takes a tenant key the way it takes the admin token
expect_rc "tenantctl with a tenant key: get workloads" 0 "$TENANTCTL" get workloads --server "$BASE" --token-file "$TMP/key-a"
expect_grep "shows its own" "$TMP/out" "alpha-secret-job"
expect_rc "tenantctl with a tenant key: apply is refused" 2 "$TENANTCTL" apply -f "$TMP/ns.yaml" --server "$BASE" --token-file "$TMP/key-a"

# Revocation: apply beta without its key; the key stops working at once.
tenants "[]" > "$TMP/revoked.yaml"
code=$(call POST /v1/apply "$TMP/revoked.yaml" "$ADMIN" "$TMP/resp")
[ "$code" = 200 ] && ok "admin applies beta without its key" || { not_ok "revoke apply: $code"; cat "$TMP/resp"; }
code=$(call GET /v1/workloads - "$KEY_B" "$TMP/resp")
[ "$code" = 401 ] && ok "the revoked key gets 401 at once, no restart" || not_ok "revoked key: $code"
code=$(call GET /v1/workloads - "$KEY_A" "$TMP/resp")
[ "$code" = 200 ] && ok "alpha's key still works" || not_ok "alpha after revoke: $code"

# Open mode (no --admin-token-file): no credential is the admin, as
# before, but a tenant key is still held to its tenant.
stop_tenantd
start_tenantd "$TMP/data" || { finish; exit 1; }
BASE="http://127.0.0.1:$TD_PORT"
code=$(call GET "/v1/objects?kind=ClusterQueue" - "" "$TMP/resp")
[ "$code" = 200 ] && ok "open mode: no credential reads everything" || not_ok "open mode: $code"
code=$(call GET "/v1/objects?kind=ClusterQueue" - "$KEY_A" "$TMP/resp")
[ "$code" = 403 ] && ok "open mode: a tenant key is still scoped" || not_ok "open mode tenant: $code"
stop_tenantd

for secret in "$ADMIN" "$KEY_A" "$KEY_B" "$BOGUS"; do
    expect_no_grep "no key or token in the log" "$TMP/tenantd.log" "$secret"
done
finish
