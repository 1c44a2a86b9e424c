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

finish
