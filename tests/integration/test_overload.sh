# test_overload.sh - overload survival: the gateway in front of simmodel
# (4 slots x 50 ms = 80 requests/s) offered 400 requests/s for 20 s (5x):
# a critical tenant at 40/s, a sheddable one retrying at once at 320/s, and
# one over its rate limit at 40/s (tests/integration/overload.py). tenantd
# keeps answering /healthz within 1 s, its fds and RSS stay bounded, it
# sheds (503) the sheddable tenant and rate-limits (429) the capped one
# while the critical one is served, and latency is back to normal within
# 5 s after. OVERLOAD_SECONDS sets the length (make bench / manual: 60).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
SECS=${OVERLOAD_SECONDS:-20}

start_simmodel --slots 4 --ms-per-token 5 --prefill-ms-per-token 0 || { finish; exit 1; }

tenant() { # name key criticality rate
    cat <<Y
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: $1}
spec:
  namespaces: [$1-ns]
  labels: {team: $1, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha "$2")"}]
  gateway: {rate: {cost: $4, per: 1s, burst: $4}, concurrency: 64, criticality: $3}
Y
}
{
    tenant prod key-prod critical 1000000
    tenant batch key-batch sheddable 1000000
    tenant capped key-capped critical 140
    cat <<Y
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 4, queue: 32}
  cost: {model: tokens}
  timeout: 2s
Y
} > "$TMP/platform.yaml"
cat > "$TMP/scenario.yaml" <<'Y'
apiVersion: tenantd.dev/v1alpha1
kind: LoadScenario
metadata: {name: overload}
spec:
  target: http://127.0.0.1:8080
  duration: 20s
  tenants:
  - {name: prod, key: key-prod, rate: 40, criticality: {critical: 1}, promptTokens: 4, maxTokens: 10,
     client: wellBehaved}
  - {name: batch, key: key-batch, rate: 320, criticality: {sheddable: 1}, promptTokens: 4,
     maxTokens: 10, client: abusive, connections: 64}
  - {name: capped, key: key-capped, rate: 40, criticality: {critical: 1}, promptTokens: 4,
     maxTokens: 10, client: abusive, connections: 1}
Y
# Under ASan freed memory sits in its quarantine (256 MiB) and allocator
# caches before reuse, so RSS is judged in the normal build only; LSan's
# check at the clean exit (stop_tenantd wants exit 0) is the leak test of
# the sanitized build.
if ldd "$TENANTD" 2>/dev/null | grep -q libasan; then export OVERLOAD_RSS_KIB=$((4096 * 1024)); fi
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
python3 "$(dirname "$0")/overload.py" "$TENANTCTL" "$TMP/scenario.yaml" "$TD_DATA_PORT" "$TD_PORT" \
    "$TD_PID" key-prod "$SECS" > "$TMP/overload" 2>&1
rc=$?
cat "$TMP/overload"
[ "$rc" -eq 0 ] && ok "${SECS} s at 5x capacity: healthz answered, fds and RSS bounded, shed and rate-limited, recovered" \
    || not_ok "overload survival (see FAIL lines above)"
kill -0 "$TD_PID" 2>/dev/null && ok "tenantd survived" || not_ok "tenantd died"
stop_tenantd
finish
