# test_resource_version.sh - optimistic concurrency on apply, as Kubernetes'
# metadata.resourceVersion: get serves each object's version (the same on
# every replica), an apply naming a stale one is refused with 409 naming the
# object and nothing changes, one naming the current one commits, one
# without any is last-writer-wins; on the SQLite store (one replica) and on
# PostgreSQL with two replicas applying at once.
. "$(dirname "$0")/lib.sh"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
quota() { # NAME CPU [RV]
    printf 'apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: %s, namespace: team-a%s}\nspec: {hard: {cpu: "%s"}}\n' \
        "$1" "${3:+, resourceVersion: \"$3\"}" "$2"
}
rv_of() { # PORT NAME : the served resourceVersion
    "$TENANTCTL" get resourcequotas "$2" -n team-a -o json --server "http://127.0.0.1:$1" 2>/dev/null |
        python3 -c 'import json, sys; d = json.load(sys.stdin); d = d["items"][0] if "items" in d else d; print(d["metadata"]["resourceVersion"])' 2>/dev/null
}
cpu_of() { # PORT NAME
    "$TENANTCTL" get resourcequotas "$2" -n team-a -o yaml --server "http://127.0.0.1:$1" 2>/dev/null | awk '/cpu:/ {gsub(/"/, "", $2); print $2}'
}
apply_code() { # PORT FILE : the HTTP status of POST /v1/apply, body to FILE.out
    curl -s -o "$2.out" -w '%{http_code}' -X POST --data-binary @"$2" -H 'Content-Type: application/yaml' \
        "http://127.0.0.1:$1/v1/apply"
}

# each backend: PORT_1 PORT_2 (the same one twice on SQLite) LABEL
check_backend() {
    local p1=$1 p2=$2 label=$3 rv1 rv2 rv3 code
    quota q1 2 > "$TMP/q.yaml"
    expect_rc "$label: apply q1" 0 "$TENANTCTL" apply -f "$TMP/q.yaml" --server "http://127.0.0.1:$p1"
    rv1=$(rv_of "$p1" q1)
    [[ "$rv1" =~ ^[0-9a-f]{16}$ ]] && ok "$label: get serves metadata.resourceVersion $rv1" || not_ok "$label: resourceVersion '$rv1'"
    local t0; t0=$(now_ms)
    until [ "$(rv_of "$p2" q1)" = "$rv1" ] || [ $(( $(now_ms) - t0 )) -gt 5000 ]; do sleep 0.1; done
    [ "$(rv_of "$p2" q1)" = "$rv1" ] && ok "$label: the other replica serves the same version" || not_ok "$label: other replica: $(rv_of "$p2" q1)"
    # two clients read rv1; the second one's apply on the other replica wins
    quota q1 3 "$rv1" > "$TMP/win.yaml"
    code=$(apply_code "$p2" "$TMP/win.yaml")
    [ "$code" = 200 ] && ok "$label: an apply naming the current version commits" || { not_ok "$label: apply with current rv: $code"; cat "$TMP/win.yaml.out"; }
    quota q1 4 "$rv1" > "$TMP/lose.yaml"
    code=$(apply_code "$p1" "$TMP/lose.yaml")
    [ "$code" = 409 ] && ok "$label: one naming the stale version gets 409" || not_ok "$label: stale apply: $code"
    expect_grep "$label: naming the object and both versions" "$TMP/lose.yaml.out" "ResourceQuota team-a/q1 was changed by another apply: resourceVersion \\\"$rv1\\\" is stale"
    t0=$(now_ms)
    until [ "$(cpu_of "$p1" q1)" = 3 ] || [ $(( $(now_ms) - t0 )) -gt 5000 ]; do sleep 0.1; done
    [ "$(cpu_of "$p1" q1)" = 3 ] && [ "$(cpu_of "$p2" q1)" = 3 ] && ok "$label: nothing of the refused apply was stored" || not_ok "$label: cpu $(cpu_of "$p1" q1)/$(cpu_of "$p2" q1)"
    rv2=$(rv_of "$p1" q1)
    [ -n "$rv2" ] && [ "$rv2" != "$rv1" ] && ok "$label: the version moved ($rv2)" || not_ok "$label: rv2 '$rv2'"
    # without a version: the last writer wins, as kubectl apply
    quota q1 5 > "$TMP/plain.yaml"
    expect_rc "$label: an apply without a version commits" 0 "$TENANTCTL" apply -f "$TMP/plain.yaml" --server "http://127.0.0.1:$p1"
    # a version of an object that is not stored
    quota q-none 1 "$rv1" > "$TMP/none.yaml"
    code=$(apply_code "$p1" "$TMP/none.yaml")
    [ "$code" = 409 ] && ok "$label: a version of an object not stored: 409" || not_ok "$label: missing object: $code"
    expect_grep "$label: saying it is not stored" "$TMP/none.yaml.out" "the object is not stored"
    printf 'apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q1, namespace: team-a, resourceVersion: 7}\nspec: {hard: {cpu: "1"}}\n' > "$TMP/num.yaml"
    code=$(apply_code "$p1" "$TMP/num.yaml")
    [ "$code" = 400 ] && ok "$label: a resourceVersion that is not a string: 400" || not_ok "$label: numeric rv: $code"
    # applies racing with the same version, spread over both replicas:
    # exactly one commits
    rv3=$(rv_of "$p1" q1)
    t0=$(now_ms)
    until [ "$(rv_of "$p2" q1)" = "$rv3" ] || [ $(( $(now_ms) - t0 )) -gt 5000 ]; do sleep 0.1; done
    local i pids=()
    for i in 1 2 3 4 5 6 7 8; do
        quota q1 $((10 + i)) "$rv3" > "$TMP/race$i.yaml"
        if [ $((i % 2)) = 0 ]; then port=$p1; else port=$p2; fi
        (echo "$(apply_code "$port" "$TMP/race$i.yaml")" > "$TMP/race$i.code") &
        pids+=($!)
    done
    wait "${pids[@]}"
    local n200 n409
    n200=$(cat "$TMP"/race*.code | grep -c '^200$')
    n409=$(cat "$TMP"/race*.code | grep -c '^409$')
    [ "$n200" = 1 ] && [ "$n409" = 7 ] && ok "$label: 8 racing applies of one version: 1 committed, 7 got 409" ||
        not_ok "$label: racing applies: $(cat "$TMP"/race*.code | tr '\n' ' ')"
    local winner
    winner=$(grep -l '^200$' "$TMP"/race*.code | head -1 | sed 's/.*race\([0-9]*\).code/\1/')
    t0=$(now_ms)
    until [ "$(cpu_of "$p2" q1)" = $((10 + winner)) ] || [ $(( $(now_ms) - t0 )) -gt 5000 ]; do sleep 0.1; done
    [ "$(cpu_of "$p1" q1)" = $((10 + winner)) ] && [ "$(cpu_of "$p2" q1)" = $((10 + winner)) ] &&
        ok "$label: both serve the winner's object" || not_ok "$label: served $(cpu_of "$p1" q1)/$(cpu_of "$p2" q1), winner $((10 + winner))"
    rm -f "$TMP"/race*
}

# --- SQLite: one replica ---
start_tenantd "$TMP/sq" --ledger off || { finish; exit 1; }
check_backend "$TD_PORT" "$TD_PORT" sqlite
stop_tenantd

# --- PostgreSQL: two replicas ---
if [ -z "$(pg_bin)" ] || ! command -v psql >/dev/null; then
    bash "$TD_SOURCE_DIR/scripts/install-deps.sh" >/dev/null 2>&1
fi
if [ -z "$(pg_bin)" ]; then
    echo "SKIP: PostgreSQL part (no server)"
    finish; exit $?
fi
start_postgres || { finish; exit 1; }
for r in A B; do
    mkdir -p "$TMP/$r"
    "$TENANTD" --data "$TMP/$r/data" --admin-listen 127.0.0.1:0 --port-file "$TMP/$r/port" \
        --listen 127.0.0.1:0 --workers 1 --admin-threads 1 --ledger off --database "$PG_URL" \
        --replica-name "$r" 2>>"$TMP/$r/log" &
    PIDS+=($!)
    eval "PID_$r=$!"
    wait_file "$TMP/$r/port" 100 $! || { not_ok "replica $r did not start"; cat "$TMP/$r/log"; finish; exit 1; }
done
check_backend "$(cat "$TMP/A/port")" "$(cat "$TMP/B/port")" postgres
[ "$(psql_q "SELECT count(*) FROM tenantd_objects WHERE body LIKE '%resourceVersion%'")" = 0 ] &&
    ok "postgres: no stored body carries a resourceVersion" || not_ok "a stored body carries resourceVersion"
kill -TERM "$PID_A" "$PID_B"
wait "$PID_A" && wait "$PID_B" && ok "both replicas stop cleanly" || not_ok "replicas' exit"
finish
