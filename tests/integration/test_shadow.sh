# test_shadow.sh - shadow enforcement of the gateway's limits: a tenant whose
# rate and concurrency limits are in shadow is never refused, the refusals it
# would have had are counted apart (mode="shadow") from another tenant's
# enforced ones and named in the access log, and an ordinary apply turns the
# same limits to enforce without a restart.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 8 --ms-per-token 0 || { finish; exit 1; }

tenant() { # NAME ENFORCEMENT
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: $1}
spec:
  namespaces: [$1-prod]
  labels: {team: $1, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha "key-$1")"}]
  gateway: {rate: {cost: 1, per: 1h, burst: 3}, concurrency: 100, enforcement: $2}
---
Y
}
{ tenant shadowy shadow; tenant strict enforce; cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: any}
spec:
  match: {pathPrefix: /}
  upstream: {address: "$SIM"}
  cost: {model: requests}
Y
} > "$TMP/platform.yaml"

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --access-log "$TMP/access.log" \
    || { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"

send() { # KEY N -> counts of each status in $TMP/codes
    : > "$TMP/codes"
    for _ in $(seq 1 "$2"); do
        curl -s -o /dev/null -w '%{http_code}\n' --max-time 5 -H "Authorization: Bearer $1" \
            -H 'Content-Type: application/json' -d '{"prompt":"hi","max_tokens":1}' \
            "$GW/v1/completions" >> "$TMP/codes"
    done
}
count() { grep -c "^$1\$" "$TMP/codes"; }

send key-shadowy 10
[ "$(count 200)" = 10 ] && ok "shadow: all 10 requests served over a burst of 3" ||
    not_ok "shadow: $(sort "$TMP/codes" | uniq -c | tr '\n' ' ')"
send key-strict 10
[ "$(count 200)" = 3 ] && [ "$(count 429)" = 7 ] && ok "enforce: 3 served, 7 refused with 429" ||
    not_ok "enforce: $(sort "$TMP/codes" | uniq -c | tr '\n' ' ')"

curl -s --max-time 5 "http://127.0.0.1:$TD_PORT/metrics" > "$TMP/metrics"
expect_grep "shadow refusals counted with mode=shadow" "$TMP/metrics" \
    'tenantd_limit_rejections_total{tenant="shadowy",limit="rate",mode="shadow"} 7'
expect_grep "enforced refusals counted with mode=enforce" "$TMP/metrics" \
    'tenantd_limit_rejections_total{tenant="strict",limit="rate",mode="enforce"} 7'
# (served at 0: a series that exists is not left out)
expect_grep "nothing of the shadow tenant counted as enforced" "$TMP/metrics" \
    'tenantd_limit_rejections_total{tenant="shadowy",limit="rate",mode="enforce"} 0'
expect_grep "the shadow tenant has no rate_limited outcome" "$TMP/metrics" \
    'tenantd_requests_total{tenant="shadowy",route="any",outcome="rate_limited"} 0'
kill -HUP "$TD_PID" 2>/dev/null # nothing to reload; the access log is flushed on its own
sleep 0.5
[ "$(grep -c 'tenant=shadowy .*outcome=accepted shadow_would=rate_limited' "$TMP/access.log")" = 7 ] &&
    ok "access log names the 7 would-be refusals" ||
    not_ok "access log: $(grep -c shadow_would "$TMP/access.log") shadow lines"

# Shadow -> enforce is an ordinary apply.
tenant shadowy enforce > "$TMP/enforce.yaml"
expect_rc "apply enforcement: enforce" 0 "$TENANTCTL" apply -f "$TMP/enforce.yaml" \
    --server "http://127.0.0.1:$TD_PORT"
send key-shadowy 2
[ "$(count 429)" = 2 ] && ok "after the apply the same tenant is refused" ||
    not_ok "after apply: $(sort "$TMP/codes" | uniq -c | tr '\n' ' ')"

printf 'apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: bad}\nspec:\n  gateway: {enforcement: audit}\n' > "$TMP/bad.yaml"
expect_rc "an unknown enforcement mode is refused" 2 "$TENANTCTL" apply -f "$TMP/bad.yaml" \
    --server "http://127.0.0.1:$TD_PORT"
expect_grep "the error names the field" "$TMP/err" "spec.gateway.enforcement: must be enforce or shadow"
stop_tenantd
finish
