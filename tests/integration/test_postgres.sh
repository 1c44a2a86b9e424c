# test_postgres.sh - tenantd replicas sharing one real PostgreSQL server
# (Debian's package, started in a temp dir on a free loopback port): an
# apply or a delete on one replica is served by the others within the
# documented bound (NOTIFY, and the 1 s version check when no notification
# comes), its gateway too and the queue's admissions; a restarted replica serves the stored objects; a newer schema is
# refused, naming both versions, and nothing changes; bad URLs and an
# unreachable server fail the start with a clear message; replicas survive
# a server restart.
. "$(dirname "$0")/lib.sh"
if [ -z "$(pg_bin)" ] || ! command -v psql >/dev/null; then
    bash "$TD_SOURCE_DIR/scripts/install-deps.sh" >/dev/null 2>&1
    if [ -z "$(pg_bin)" ] || ! command -v psql >/dev/null; then
        echo "SKIP: the PostgreSQL server could not be installed (apt-get install postgresql)"
        exit 77
    fi
fi
start_postgres || { finish; exit 1; }

start_replica() { # NAME [ARGS...]
    local name=$1 dir="$TMP/$1"
    shift
    mkdir -p "$dir"
    rm -f "$dir/port"
    "$TENANTD" --data "$dir/data" --admin-listen 127.0.0.1:0 --port-file "$dir/port" \
        --listen 127.0.0.1:0 --listen-port-file "$dir/dataport" --workers 1 --admin-threads 1 \
        --ledger off "$@" 2>>"$dir/log" &
    eval "PID_$name=$!"
    PIDS+=($!)
    wait_file "$dir/port" 100 $! || { not_ok "replica $name did not start"; cat "$dir/log"; return 1; }
    wait_file "$dir/dataport" 50 || { not_ok "replica $name has no gateway port"; return 1; }
    eval "PORT_$name=$(cat "$dir/port") DATA_$name=$(cat "$dir/dataport")"
}
stop_replica() { # NAME
    local pid
    eval "pid=\$PID_$1"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# has NAME PORT KIND NS OBJ : PORT's replica serves the object.
has() {
    curl -sS --max-time 5 "http://127.0.0.1:$2/v1/objects?kind=$3&namespace=$4&name=$5" 2>/dev/null |
        grep -q "\"name\": \"$5\""
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# seen_within PORT KIND NS NAME MAX_MS [absent] : waits until the replica
# serves (or no longer serves) the object; prints the ms it took; 1 if not
# within MAX_MS.
seen_within() {
    local port=$1 kind=$2 ns=$3 name=$4 max=$5 want=${6:-present} t0 t
    t0=$(now_ms)
    while :; do
        if has x "$port" "$kind" "$ns" "$name"; then [ "$want" = present ] && break
        else [ "$want" = absent ] && break; fi
        t=$(( $(now_ms) - t0 ))
        [ "$t" -gt "$max" ] && { echo "$t"; return 1; }
        sleep 0.02
    done
    echo $(( $(now_ms) - t0 ))
}

quota() { # NAME NS PODS
    cat <<Y
apiVersion: v1
kind: ResourceQuota
metadata: {name: $1, namespace: $2}
spec: {hard: {pods: "$3"}}
Y
}

# --- three replicas on one database; only A has --config ---
start_replica A --database "$PG_URL" --config "$EX/platform.yaml" --ledger on || { finish; exit 1; }
start_replica B --database "$PG_URL" || { finish; exit 1; }
TENANTD_DATABASE="$PG_URL" start_replica C || { finish; exit 1; }
# the line comes once the listeners are up and the scheduling lease was tried
for r in A C; do
    for _ in $(seq 50); do grep -q "objects kept in" "$TMP/$r/log" && break; sleep 0.1; done
done
expect_grep "A names the server it keeps objects in" "$TMP/A/log" "objects kept in PostgreSQL 127.0.0.1:$PG_PORT/postgres"
expect_grep "C took the database from \$TENANTD_DATABASE" "$TMP/C/log" "objects kept in PostgreSQL 127.0.0.1:$PG_PORT/postgres"
has x "$PORT_B" ResourceQuota team-a-prod team-a-compute && ok "B serves A's --config objects from the database" || not_ok "B lacks team-a-compute"
has x "$PORT_C" ResourceQuota team-a-prod team-a-compute && ok "C too" || not_ok "C lacks team-a-compute"
[ "$(psql_q 'SELECT version FROM tenantd_schema')" = 4 ] && ok "schema version 4 recorded in tenantd_schema" || not_ok "schema version: $(psql_q 'SELECT version FROM tenantd_schema')"
[ ! -e "$TMP/B/data/tenantd.db" ] && ok "no SQLite object store with --database" || not_ok "B wrote tenantd.db"

# --- an apply on A, seen on B and C within the bound (1 s) ---
quota pg-one team-a-prod 11 > "$TMP/one.yaml"
expect_rc "apply on A" 0 "$TENANTCTL" apply -f "$TMP/one.yaml" --server "http://127.0.0.1:$PORT_A"
if t=$(seen_within "$PORT_B" ResourceQuota team-a-prod pg-one 1000); then ok "B serves A's apply after ${t} ms (bound 1000 ms)"; else not_ok "B did not serve pg-one within 1000 ms"; fi
if t=$(seen_within "$PORT_C" ResourceQuota team-a-prod pg-one 1000); then ok "C serves it after ${t} ms"; else not_ok "C did not serve pg-one within 1000 ms"; fi
grep -q "picked up a commit from another replica" "$TMP/B/log" && ok "B logs the pick-up" || not_ok "B logged no pick-up"

# --- the gateway too: a Tenant and Route applied on A admit a request
# through B's gateway (B's snapshot swap reloads its gateway, as an apply) ---
start_simmodel --slots 8 --ms-per-token 0 || { finish; exit 1; }
cat > "$TMP/tenant.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: pg-tenant}
spec:
  apiKeys: [{sha256: "$(sha key-pg)"}]
  gateway: {rate: {cost: 100, per: 1s, burst: 100}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: pg-route}
spec:
  match: {pathPrefix: /v1/completions} # longer than the example's /v1/: wins
  upstream: {address: "$SIM", capacity: 8, queue: 8}
  cost: {model: requests}
Y
gw() { # DATA_PORT : the status of one request with key-pg
    curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer key-pg' \
        -H 'Content-Type: application/json' --data '{"prompt":"hi","max_tokens":1}' \
        "http://127.0.0.1:$1/v1/completions"
}
code=$(gw "$DATA_B")
[ "$code" = 401 ] && ok "B's gateway refuses the key before the apply (401)" || not_ok "B before the apply: $code"
expect_rc "apply a Tenant and a Route on A" 0 "$TENANTCTL" apply -f "$TMP/tenant.yaml" --server "http://127.0.0.1:$PORT_A"
seen_within "$PORT_B" Tenant "" pg-tenant 1000 >/dev/null || not_ok "B did not pick up pg-tenant"
code=$(gw "$DATA_B")
[ "$code" = 200 ] && ok "B's gateway admits the new tenant's key through the new route (200)" || { not_ok "B after the apply: $code"; tail -5 "$TMP/B/log"; }

# --- a delete on B, gone from A and C ---
expect_rc "delete on B" 0 "$TENANTCTL" delete quota pg-one -n team-a-prod --server "http://127.0.0.1:$PORT_B"
if t=$(seen_within "$PORT_A" ResourceQuota team-a-prod pg-one 1000 absent); then ok "A no longer serves it after ${t} ms"; else not_ok "A still serves pg-one after 1000 ms"; fi
if t=$(seen_within "$PORT_C" ResourceQuota team-a-prod pg-one 1000 absent); then ok "C neither, after ${t} ms"; else not_ok "C still serves pg-one"; fi
[ "$(psql_q "SELECT count(*) FROM tenantd_objects WHERE name='pg-one'")" = 0 ] && ok "the row is gone from the database" || not_ok "pg-one row still stored"

# --- applies on A and B at once, to different objects: both kept ---
quota pg-a team-a-prod 5 > "$TMP/a.yaml"
quota pg-b team-b-prod 6 > "$TMP/b.yaml"
"$TENANTCTL" apply -f "$TMP/a.yaml" --server "http://127.0.0.1:$PORT_A" >/dev/null 2>&1 &
pa=$!
"$TENANTCTL" apply -f "$TMP/b.yaml" --server "http://127.0.0.1:$PORT_B" >/dev/null 2>&1
rb=$?
wait $pa
ra=$?
[ "$ra" = 0 ] && [ "$rb" = 0 ] && ok "concurrent applies on A and B both succeed" || not_ok "concurrent applies: $ra $rb"
for r in A B C; do
    eval "p=\$PORT_$r"
    seen_within "$p" ResourceQuota team-a-prod pg-a 1000 >/dev/null && seen_within "$p" ResourceQuota team-b-prod pg-b 1000 >/dev/null &&
        ok "$r serves both concurrent applies" || not_ok "$r lacks one of pg-a, pg-b"
done

# --- the fallback: a commit that sends no notification is found by the
# periodic version check ---
psql_q "BEGIN; UPDATE tenantd_objects SET body = replace(body, '\"pods\":\"5\"', '\"pods\":\"7\"') WHERE name = 'pg-a'; UPDATE tenantd_generation SET generation = generation + 1; COMMIT;" >/dev/null
t0=$(now_ms)
while :; do
    curl -sS "http://127.0.0.1:$PORT_B/v1/objects?kind=ResourceQuota&namespace=team-a-prod&name=pg-a" | grep -q '"pods": "7"' && break
    [ $(( $(now_ms) - t0 )) -gt 2500 ] && break
    sleep 0.05
done
t=$(( $(now_ms) - t0 ))
[ "$t" -le 2500 ] && ok "without a NOTIFY, the version check picks the commit up after ${t} ms (bound 1 s + a load)" || not_ok "un-notified commit not picked up in 2.5 s"

# --- A's own apply right after a commit it has not picked up yet (no
# NOTIFY): A's commit does not count as having seen that one ---
psql_q "BEGIN; INSERT INTO tenantd_objects(kind, namespace, name, body) VALUES ('ResourceQuota', 'team-a-prod', 'pg-sql', '{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":{\"name\":\"pg-sql\",\"namespace\":\"team-a-prod\"},\"spec\":{\"hard\":{\"pods\":\"9\"}}}'); UPDATE tenantd_generation SET generation = generation + 1; COMMIT;" >/dev/null
quota pg-own team-a-prod 4 > "$TMP/own.yaml"
"$TENANTCTL" apply -f "$TMP/own.yaml" --server "http://127.0.0.1:$PORT_A" >/dev/null 2>&1 || not_ok "apply pg-own on A"
if t=$(seen_within "$PORT_A" ResourceQuota team-a-prod pg-sql 2500); then ok "A serves the commit its own apply landed on, after ${t} ms"; else not_ok "A never picked up the commit under its own apply"; fi
has x "$PORT_A" ResourceQuota team-a-prod pg-own && ok "and its own apply" || not_ok "A lost its own apply"

# --- a restarted replica serves the stored objects ---
stop_replica C
start_replica C --database "$PG_URL" || { finish; exit 1; }
has x "$PORT_C" ResourceQuota team-b-prod pg-b && has x "$PORT_C" ResourceQuota team-a-prod team-a-compute &&
    ok "restarted C serves the stored objects" || not_ok "restarted C lacks stored objects"

# --- the server restarts: replicas reconnect, applies and pick-ups go on ---
as_postgres "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m fast -w restart >/dev/null 2>&1 || not_ok "pg_ctl restart"
quota pg-after team-a-prod 3 > "$TMP/after.yaml"
expect_rc "apply on A after the server restarted" 0 "$TENANTCTL" apply -f "$TMP/after.yaml" --server "http://127.0.0.1:$PORT_A"
# bound: a check that failed while the server was down retries after 2 s,
# on the next 1 s tick: 3 s, plus the load
if t=$(seen_within "$PORT_B" ResourceQuota team-a-prod pg-after 3500); then ok "B serves it after ${t} ms (bound 3 s after a server restart)"; else not_ok "B did not pick up within 3.5 s of the server restart"; fi

# --- the server down for a while: applies fail whole (503, naming the
# server), every replica keeps serving what it had; back up: applies and
# pick-ups go on ---
pg_stop || not_ok "pg_ctl stop"
quota pg-down team-a-prod 2 > "$TMP/down.yaml"
"$TENANTCTL" apply -f "$TMP/down.yaml" --server "http://127.0.0.1:$PORT_A" >"$TMP/out" 2>"$TMP/err"
rc=$?
[ "$rc" != 0 ] && ok "an apply while the server is down fails (exit $rc)" || not_ok "apply with the server down succeeded"
expect_grep "naming the server" "$TMP/err" "PostgreSQL 127.0.0.1:$PG_PORT/postgres: cannot connect"
expect_grep "as 503" "$TMP/err" "(HTTP 503)"
has x "$PORT_A" ResourceQuota team-a-prod pg-after && has x "$PORT_B" ResourceQuota team-a-prod pg-after &&
    ok "A and B still serve their objects" || not_ok "a replica lost its objects while the server was down"
sleep 1.5 # a version check or two fail meanwhile
grep -q "cannot pick up other replicas' commits" "$TMP/B/log" && ok "B logs that it cannot check" || not_ok "B logged nothing while the server was down"
pg_start_again || not_ok "pg_ctl start again"
expect_rc "the apply, again once the server is back" 0 "$TENANTCTL" apply -f "$TMP/down.yaml" --server "http://127.0.0.1:$PORT_A"
if t=$(seen_within "$PORT_B" ResourceQuota team-a-prod pg-down 3500); then ok "B serves it after ${t} ms"; else not_ok "B did not pick up after the server came back"; fi
[ "$(psql_q "SELECT count(*) FROM tenantd_objects WHERE name='pg-down'")" = 1 ] && ok "stored once" || not_ok "pg-down rows"

# --- a statement that waits on a lock is cancelled (lock_timeout 2 s):
# another session holds the generation row, as a stuck replica's
# transaction would; the apply fails, nothing is stored, A keeps serving
# (and its reads, MVCC, never wait on that lock) ---
psql -X -q "$PG_URL" -c "BEGIN; UPDATE tenantd_generation SET generation = generation; SELECT pg_sleep(9); COMMIT;" >/dev/null 2>&1 &
locker=$!
sleep 0.5
quota pg-locked team-a-prod 2 > "$TMP/locked.yaml"
t0=$(now_ms)
"$TENANTCTL" apply -f "$TMP/locked.yaml" --server "http://127.0.0.1:$PORT_A" >"$TMP/out" 2>"$TMP/err"
rc=$?
t=$(( $(now_ms) - t0 ))
[ "$rc" != 0 ] && ok "an apply blocked on a lock fails (exit $rc)" || not_ok "blocked apply succeeded"
expect_grep "saying the statement timed out" "$TMP/err" "cannot lock tenantd_generation for the commit: ERROR: canceling statement due to lock timeout"
expect_grep "with 503" "$TMP/err" "(HTTP 503)"
[ "$t" -ge 1800 ] && [ "$t" -lt 5000 ] && ok "after ${t} ms (lock_timeout 2 s)" || not_ok "blocked apply returned after ${t} ms"
wait $locker
[ "$(psql_q "SELECT count(*) FROM tenantd_objects WHERE name='pg-locked'")" = 0 ] && ok "the failed apply stored nothing" || not_ok "pg-locked stored"
has x "$PORT_A" ResourceQuota team-a-prod pg-locked && not_ok "A serves the failed apply" || ok "A does not serve the failed apply"
has x "$PORT_A" ResourceQuota team-a-prod pg-after && ok "A still serves what it had" || not_ok "A lost pg-after"

# --- the batch queue's admissions: Workloads submitted on A are served by
# B with the statuses the leader's scheduling pass gave them ---
expect_rc "apply the Kueue platform on A" 0 "$TENANTCTL" apply -f "$EX/kueue/platform.yaml" --server "http://127.0.0.1:$PORT_A"
expect_rc "submit Workloads on A" 0 "$TENANTCTL" submit -f "$EX/kueue/workloads.yaml" --server "http://127.0.0.1:$PORT_A"
# whichever replica leads schedules them (A itself only if it leads: it
# was restarted above); A serves the decisions once it picks them up
t0=$(now_ms)
while :; do
    "$TENANTCTL" get workloads --server "http://127.0.0.1:$PORT_A" > "$TMP/wl_a" 2>&1
    grep -q Admitted "$TMP/wl_a" && break
    [ $(( $(now_ms) - t0 )) -gt 2000 ] && break
    sleep 0.05
done
grep -q Admitted "$TMP/wl_a" && ok "the leader admitted some, A serves them" || { not_ok "none admitted"; cat "$TMP/wl_a"; }
sleep 0.3 # the last pass's decisions reach every replica
t0=$(now_ms)
while :; do
    "$TENANTCTL" get workloads --server "http://127.0.0.1:$PORT_B" > "$TMP/wl_b" 2>&1
    cmp -s "$TMP/wl_a" "$TMP/wl_b" && break
    [ $(( $(now_ms) - t0 )) -gt 1000 ] && break
    sleep 0.05
done
cmp -s "$TMP/wl_a" "$TMP/wl_b" && ok "B serves the same Workloads and admissions as A after $(( $(now_ms) - t0 )) ms" ||
    { not_ok "B's workloads differ from A's"; diff "$TMP/wl_a" "$TMP/wl_b" | head; }

# --- tenantctl report reads the platform (its CostPolicy) from the
# database; the ledger stays the replica's own ---
expect_rc "report --data without objects there says so" 2 "$TENANTCTL" report --data "$TMP/A/data"
expect_grep "naming the missing file" "$TMP/err" "no platform: pass -c PLATFORM.yaml"
expect_rc "report --database reads the objects from PostgreSQL" 0 "$TENANTCTL" report --data "$TMP/A/data" --database "$PG_URL" --format csv
expect_grep "a chargeback CSV" "$TMP/out" "total"
TENANTD_DATABASE="$PG_URL" expect_rc "and from \$TENANTD_DATABASE" 0 "$TENANTCTL" report --data "$TMP/A/data" --format csv
expect_rc "report --database that is not a URL" 2 "$TENANTCTL" report --data "$TMP/A/data" --database /tmp/x
expect_grep "says so" "$TMP/err" "--database must be a postgres:// or postgresql:// URL"

# --- a newer schema is refused, naming both versions; nothing changes ---
psql_q "UPDATE tenantd_schema SET version = 99" >/dev/null
before=$(psql_q "SELECT count(*), max(tenantd_generation.generation) FROM tenantd_objects, tenantd_generation")
expect_rc "a tenantd meeting schema version 99 refuses to start" 1 "$TENANTD" --data "$TMP/D" \
    --database "$PG_URL" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0 --ledger off --config "$EX/platform.yaml"
expect_grep "naming both versions" "$TMP/err" "schema version 99 was written by a newer tenantd; this build reads version 4"
expect_grep "and the server" "$TMP/err" "PostgreSQL 127.0.0.1:$PG_PORT/postgres"
[ "$(psql_q 'SELECT version FROM tenantd_schema')" = 99 ] && [ "$(psql_q "SELECT count(*), max(tenantd_generation.generation) FROM tenantd_objects, tenantd_generation")" = "$before" ] &&
    ok "nothing changed in the database" || not_ok "the refused start changed the database"
psql_q "UPDATE tenantd_schema SET version = 4" >/dev/null

# --- a migration that fails changes nothing: a database holding a table
# of tenantd's name but not its schema ---
psql_q "CREATE DATABASE clash" >/dev/null
CLASH_URL="postgresql://postgres@127.0.0.1:$PG_PORT/clash"
psql -X -q "$CLASH_URL" -c "CREATE TABLE tenantd_generation (x integer)" >/dev/null
expect_rc "a migration that fails fails the start" 1 "$TENANTD" --data "$TMP/D" --database "$CLASH_URL" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0 --ledger off
expect_grep "saying which step" "$TMP/err" "PostgreSQL 127.0.0.1:$PG_PORT/clash: cannot migrate the schema from version 0 to 1: ERROR: relation \"tenantd_generation\" already exists"
[ "$(psql -X -A -t "$CLASH_URL" -c "SELECT count(*) FROM pg_tables WHERE tablename IN ('tenantd_schema', 'tenantd_objects')")" = 0 ] &&
    ok "and its transaction left no tenantd_schema, no tenantd_objects" || not_ok "a failed migration left tables behind"

# --- two replicas starting at once on an empty database migrate it once ---
psql_q "CREATE DATABASE fresh" >/dev/null
FRESH_URL="postgresql://postgres@127.0.0.1:$PG_PORT/fresh"
for r in E F; do
    mkdir -p "$TMP/$r"
    "$TENANTD" --data "$TMP/$r/data" --database "$FRESH_URL" --admin-listen 127.0.0.1:0 \
        --port-file "$TMP/$r/port" --listen 127.0.0.1:0 --workers 1 --admin-threads 1 \
        --ledger off 2>"$TMP/$r/log" &
    eval "PID_$r=$!"
    PIDS+=($!)
done
wait_file "$TMP/E/port" 100 "$PID_E" && wait_file "$TMP/F/port" 100 "$PID_F" && ok "both start" ||
    { not_ok "concurrent first start"; tail -3 "$TMP/E/log" "$TMP/F/log"; }
[ "$(psql -X -A -t "$FRESH_URL" -c "SELECT count(*) || ' ' || max(version) FROM tenantd_schema")" = "1 4" ] &&
    ok "one schema row, version 4" || not_ok "schema rows: $(psql -X -A -t "$FRESH_URL" -c "SELECT * FROM tenantd_schema")"

# --- bad URLs and an unreachable server ---
expect_rc "--database that is not a URL" 2 "$TENANTD" --data "$TMP/D" --database /var/lib/x --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0
expect_grep "says what it wants" "$TMP/err" "must be a postgres:// or postgresql:// URL"
expect_rc "a URL libpq cannot parse" 2 "$TENANTD" --data "$TMP/D" --database "postgres://127.0.0.1/x?nosuchoption=1" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0
expect_grep "says it is not a PostgreSQL URL, and why" "$TMP/err" '--database: not a PostgreSQL URL: invalid URI query parameter: "nosuchoption"'
dead=$(free_port)
t0=$(now_ms)
expect_rc "an unreachable server fails the start" 1 "$TENANTD" --data "$TMP/D" --database "postgresql://tenantd:s3cret-pw@127.0.0.1:$dead/platform" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0
expect_grep "naming the server" "$TMP/err" "PostgreSQL 127.0.0.1:$dead/platform: cannot connect"
expect_no_grep "never the password" "$TMP/err" "s3cret-pw"
# A server that takes the connection and never answers: the connect bound.
mute=$(free_port)
python3 -c 'import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); time.sleep(60)' "$mute" &
PIDS+=($!)
wait_port "$mute" 50
t0=$(now_ms)
expect_rc "a server that never answers fails the start" 1 "$TENANTD" --data "$TMP/D" --database "postgresql://postgres@127.0.0.1:$mute/postgres" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0
t=$(( $(now_ms) - t0 ))
expect_grep "saying it timed out" "$TMP/err" "PostgreSQL 127.0.0.1:$mute/postgres: cannot connect: no answer within 3000 ms"
[ "$t" -ge 2800 ] && [ "$t" -lt 6000 ] && ok "after ${t} ms (connect bound 3 s)" || not_ok "mute server: start failed after ${t} ms, want 3 s"
expect_rc "a missing database fails the start" 1 "$TENANTD" --data "$TMP/D" --database "postgresql://postgres@127.0.0.1:$PG_PORT/nosuchdb" --admin-listen 127.0.0.1:0 --listen 127.0.0.1:0
expect_grep "naming it" "$TMP/err" "PostgreSQL 127.0.0.1:$PG_PORT/nosuchdb: cannot connect"
expect_grep "with the server's reason" "$TMP/err" 'database "nosuchdb" does not exist'

for r in A B C E F; do
    eval "pid=\$PID_$r"
    kill "$pid"; wait "$pid"; rc=$?
    [ "$rc" = 0 ] && ok "replica $r stops cleanly" || { not_ok "replica $r exit $rc"; tail -20 "$TMP/$r/log"; }
done
finish
