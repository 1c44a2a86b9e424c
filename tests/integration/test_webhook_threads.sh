# test_webhook_threads.sh - the admin listener on 4 threads (--admin-threads 4,
# HTTPS) answers admission reviews from 16 concurrent clients exactly as one
# thread answers them for the config generation in force, while the control
# API applies new generations and takes Workloads (tests/integration/
# webhook_threads.py); the handed-over control requests answer correctly.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj /CN=localhost -keyout "$TMP/tls.key" -out "$TMP/tls.crt" 2>/dev/null
CONFIGS=(--config "$TD_SOURCE_DIR/bench/fixtures/webhook-platform.yaml" --config "$EX/kueue/platform.yaml")

start_tenantd "$TMP/ref" "${CONFIGS[@]}" --admin-threads 1 || { finish; exit 1; }
REF_PID=$TD_PID
REF_URL="http://127.0.0.1:$TD_PORT"
start_tenantd "$TMP/data" "${CONFIGS[@]}" --admin-threads 4 \
    --tls-cert "$TMP/tls.crt" --tls-key "$TMP/tls.key" || { finish; exit 1; }
grep -q "port $TD_PORT, 4 threads" "$TMP/tenantd.log" && ok "the admin listener runs 4 threads" || not_ok "4 threads not in the log"

python3 "$(dirname "$0")/webhook_threads.py" "$REF_URL" "https://127.0.0.1:$TD_PORT" "$TD_SOURCE_DIR" > "$TMP/py.out" 2>&1
rc=$?
cat "$TMP/py.out"
PASS=$((PASS + $(grep -c '^ok - ' "$TMP/py.out")))
FAIL=$((FAIL + $(grep -c '^not ok - ' "$TMP/py.out")))
[ "$rc" -eq 0 ] && ok "webhook_threads.py exits 0" || not_ok "webhook_threads.py exit $rc"

expect_rc "--admin-threads 0 is refused" 2 "$TENANTD" --data "$TMP/x" --admin-threads 0
expect_grep "names the range" "$TMP/err" "--admin-threads must be a number from 1 to 64"
# the address in use (by the 4-thread daemon): refused, although SO_REUSEPORT would share it
expect_rc "a busy admin port is refused with several threads" 1 "$TENANTD" --data "$TMP/y" \
    --admin-listen "127.0.0.1:$TD_PORT" --listen 127.0.0.1:0 --admin-threads 2
expect_grep "names the address" "$TMP/err" "cannot listen on 127.0.0.1:$TD_PORT"

stop_tenantd
TD_PID=$REF_PID
stop_tenantd
finish
