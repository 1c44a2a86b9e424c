# test_group_commit.sh - group commit of submits: concurrent submit
# connections (12, in rounds that arrive together) are committed in one
# transaction and one pass, an invalid submit among them fails alone, every
# acknowledged Workload is stored; and after SIGKILL right after an
# acknowledgement, every acknowledged one is there after the restart
# (tests/integration/group_commit.py).
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
PY="$(dirname "$0")/group_commit.py"

# py ARGS... : runs group_commit.py; its ok / not ok lines count here
py() {
    python3 "$PY" "$@" > "$TMP/py" 2>&1
    cat "$TMP/py"
    PASS=$((PASS + $(grep -c '^ok - ' "$TMP/py")))
    FAIL=$((FAIL + $(grep -c '^not ok - ' "$TMP/py")))
    grep -q '^ok - \|^not ok - ' "$TMP/py" || not_ok "group_commit.py $1 reported nothing"
}

TD_ADMIN_THREADS=2 start_tenantd "$TMP/data" --config "$EX/kueue/platform.yaml" \
    || { finish; exit 1; }
py "$TD_PORT" concurrent
echo "$TD_PID" > "$TMP/state.pid"
py "$TD_PORT" kill "$TMP/state" 200
wait "$TD_PID" 2>/dev/null
TD_ADMIN_THREADS=2 start_tenantd "$TMP/data" || { finish; exit 1; }
py "$TD_PORT" check "$TMP/state"
stop_tenantd
finish
