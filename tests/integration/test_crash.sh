# test_crash.sh - crash safety: 1,000 workloads submitted through the
# control API in concurrent batches, with the gateway under load, while
# tenantd is killed with SIGKILL at random points and restarted on the same
# data dir (tests/integration/crash.py): every acknowledged submission is
# there exactly once, no unacknowledged batch is half there, and the gateway
# serves again within a second of each restart.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 8 --ms-per-token 1 || { finish; exit 1; }
{
    cat "$EX/kueue/platform.yaml"
    cat <<Y
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: crash-a}
spec:
  namespaces: [team-a]
  labels: {team: a, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-crash)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 64}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 16, queue: 64}
  cost: {model: tokens}
  timeout: 5s
Y
} > "$TMP/platform.yaml"

python3 "$(dirname "$0")/crash.py" "$TENANTD" "$TMP/data" "$TMP/platform.yaml" key-crash \
    "$TMP/tenantd.log" "${CRASH_WORKLOADS:-1000}" "${CRASH_KILLS:-8}" > "$TMP/crash" 2>&1
rc=$?
cat "$TMP/crash"
[ "$rc" -eq 0 ] && ok "SIGKILL during submission: acknowledged work kept once, nothing half-applied, gateway back within 1 s" \
    || { not_ok "crash safety (see FAIL lines above)"; tail -20 "$TMP/tenantd.log"; }
finish
