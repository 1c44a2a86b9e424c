# test_fd_exhaustion.sh - descriptors before authentication (issue 17 item
# 6): tenantd started with a soft open-file limit of 256 and a hard one of
# 512 raises the soft one to 512; more idle unauthenticated connections
# than that (64 from each of 13 loopback addresses, plus 8 over the
# per-address cap) do not keep a valid key from 200 nor /healthz from
# answering; the 8 over the cap are refused, every idle one and one that
# sent a wrong key are closed 10 s after accept, a connection that showed a
# valid key stays (tests/integration/fd_exhaustion.py).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
start_simmodel --slots 8 --ms-per-token 0 || { finish; exit 1; }
cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: good}
spec:
  apiKeys: [{sha256: "$(sha key-good-fd)"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: any}
spec:
  match: {pathPrefix: /}
  upstream: {address: "$SIM"}
  cost: {model: requests}
Y
# the low limits for tenantd alone: the client needs more descriptors
REAL_TENANTD=$TENANTD
printf '#!/bin/sh\nulimit -Sn 256 && ulimit -Hn 512 && exec "%s" "$@"\n' "$REAL_TENANTD" > "$TMP/tenantd-lowfd"
chmod +x "$TMP/tenantd-lowfd"
TENANTD="$TMP/tenantd-lowfd"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
TENANTD=$REAL_TENANTD
expect_grep "the soft open-file limit is raised to the hard one at start" "$TMP/tenantd.log" \
    "open files: soft limit 256 -> 512"
expect_grep "the client connection cap is the limit less the reserve" "$TMP/tenantd.log" \
    "at most 384 client connections"
python3 "$(dirname "$0")/fd_exhaustion.py" "$TD_PORT" "$TD_DATA_PORT" "$TD_PID" key-good-fd 64 \
    > "$TMP/out" 2>&1
rc=$?
cat "$TMP/out"
for c in "per-address cap" "flood exceeds the hard limit" "valid key served amid the flood" \
    "admin /healthz answers amid the flood" "idle connections closed after the deadline" \
    "the wrong-key connection is open before the deadline" \
    "the wrong-key connection is closed after the deadline" "the authenticated connection stays" \
    "places given back"; do
    expect_grep "$c" "$TMP/out" "check $c: ok"
done
[ "$rc" -eq 0 ] || not_ok "fd_exhaustion.py exit $rc"
expect_grep "refusals over the per-address cap are counted" "$TMP/out" \
    'tenantd_gateway_connections_closed_total{reason="per_address"} 8'
kill -0 "$TD_PID" 2>/dev/null && ok "tenantd is still running" || not_ok "tenantd died"
expect_rc "a negative --unauth-conns-per-addr is refused" 2 "$TENANTD" --data "$TMP/d2" \
    --unauth-conns-per-addr -1
expect_grep "... naming the flag" "$TMP/err" "--unauth-conns-per-addr must be a number"
stop_tenantd
finish
