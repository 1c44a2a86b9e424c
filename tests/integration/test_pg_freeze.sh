# test_pg_freeze.sh - tenantd replicas when PostgreSQL goes silent without
# closing anything (a frozen server, or a path to it that stops answering
# while the kernel still acknowledges): the admin loop keeps answering
# /healthz and the webhook within a measured bound, the leader steps down
# by its self-check, a follower on a healthy path takes over within the
# lease bound, an apply fails with 503 within its bound, everything
# recovers after SIGCONT, and a stop under a silent server is bounded.
. "$(dirname "$0")/lib.sh"
if [ -z "$(pg_bin)" ] || ! command -v psql >/dev/null; then
    bash "$TD_SOURCE_DIR/scripts/install-deps.sh" >/dev/null 2>&1
    if [ -z "$(pg_bin)" ] || ! command -v psql >/dev/null; then
        echo "SKIP: the PostgreSQL server could not be installed (apt-get install postgresql)"
        exit 77
    fi
fi
start_postgres || { finish; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
HERE=$(cd "$(dirname "$0")" && pwd)
# the bounds checked here (docs/replicas.md, "When PostgreSQL hangs")
PROBE_MAX_MS=${PROBE_MAX_MS:-2000}   # one 1 s version check, on a loaded machine
TAKEOVER_MAX_MS=${TAKEOVER_MAX_MS:-6000} # lease 3 s + tick 1 s + a busy machine

# A reaches the server through a relay that SIGSTOP freezes
python3 "$HERE/pg_proxy.py" 0 "$PG_PORT" "$TMP/proxy_port" &
PROXY=$!
PIDS+=($PROXY)
wait_file "$TMP/proxy_port" 50 $PROXY || { not_ok "the relay did not start"; finish; exit 1; }
URL_A="postgresql://postgres@127.0.0.1:$(cat "$TMP/proxy_port")/postgres"

start_replica() { # NAME URL [ARGS...]
    local name=$1 url=$2 dir="$TMP/$1"
    shift 2
    mkdir -p "$dir"
    rm -f "$dir/port"
    "$TENANTD" --data "$dir/data" --admin-listen 127.0.0.1:0 --port-file "$dir/port" \
        --listen 127.0.0.1:0 --workers 1 --admin-threads 1 --ledger off \
        --database "$url" --replica-name "$name" "$@" 2>>"$dir/log" &
    eval "PID_$name=$!"
    PIDS+=($!)
    wait_file "$dir/port" 100 $! || { not_ok "replica $name did not start"; cat "$dir/log"; return 1; }
    eval "PORT_$name=$(cat "$dir/port")"
}
leader() { psql_q "SELECT holder FROM tenantd_leader"; }
term() { psql_q "SELECT term FROM tenantd_leader"; }
is_leader() { curl -s --max-time 10 "http://127.0.0.1:$1/metrics" | grep -q "^tenantd_scheduling_leader 1"; }
# pg_pids : the server's postmaster and its children
pg_pids() {
    local pm
    pm=$(head -1 "$PG_DIR/data/postmaster.pid")
    echo "$pm" $(ps -o pid= --ppid "$pm")
}
# probe_max PATH FILE FROM_MS : the slowest answer (ms) to PATH after FROM_MS,
# or "fail" if one did not get 200
probe_max() {
    awk -v p="$1" -v from="$3" '$2 == p && $1 >= from { if ($3 != 200) bad = 1; if ($4 > m) m = $4 }
        END { if (bad) print "fail"; else print m + 0 }' "$2"
}
quota() { # NAME HARD_CPU
    printf 'apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: %s, namespace: team-a}\nspec: {hard: {cpu: "%s"}}\n' "$1" "$2"
}
seen_on() { # PORT NAME MAX_MS : 0 once the replica serves the quota
    local t0
    t0=$(now_ms)
    until "$TENANTCTL" get resourcequotas --server "http://127.0.0.1:$1" 2>/dev/null | grep -q "$2"; do
        [ $(( $(now_ms) - t0 )) -gt "$3" ] && return 1
        sleep 0.1
    done
}

cat > "$TMP/platform.yaml" <<'Y'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default}
Y
start_replica A "$URL_A" --config "$TMP/platform.yaml" || { finish; exit 1; }
start_replica B "$PG_URL" || { finish; exit 1; }
[ "$(leader)" = A ] && ok "A leads (term $(term))" || not_ok "leader: $(leader)"
T0=$(term)

# --- A's path to the server goes silent ---
rm -f "$TMP/stop_probe"
python3 "$HERE/pg_probe.py" "$PORT_A" "$TD_SOURCE_DIR/examples/pods/review.json" "$TMP/stop_probe" "$TMP/probe_a" &
PROBE=$!
sleep 1.5
base=$(probe_max /healthz "$TMP/probe_a" 0)
frozen_at=$(( $(now_ms) ))
probe_from=$(awk 'END { print $1 }' "$TMP/probe_a")
kill -STOP "$PROXY"
taken=""
while [ $(( $(now_ms) - frozen_at )) -lt 15000 ]; do
    if [ "$(leader)" = B ]; then taken=$(( $(now_ms) - frozen_at )); break; fi
    sleep 0.05
done
[ -n "$taken" ] && [ "$taken" -le "$TAKEOVER_MAX_MS" ] && ok "B, on a healthy path, took over ${taken} ms after A's path froze (term $(term))" ||
    not_ok "takeover after A's path froze: ${taken:-none within 15 s} ms, leader $(leader)"
t=""
while [ $(( $(now_ms) - frozen_at )) -lt 10000 ]; do
    if ! is_leader "$PORT_A"; then t=$(( $(now_ms) - frozen_at )); break; fi
    sleep 0.1
done
[ -n "$t" ] && ok "A stepped down by its self-check ${t} ms after its path froze" || not_ok "A still says it leads"
sleep 4
touch "$TMP/stop_probe"; wait $PROBE
for p in /healthz /validate; do
    m=$(probe_max "$p" "$TMP/probe_a" "$probe_from")
    n=$(awk -v p="$p" -v f="$probe_from" '$2 == p && $1 >= f' "$TMP/probe_a" | wc -l)
    [ "$m" != fail ] && [ "$m" -le "$PROBE_MAX_MS" ] && ok "A answered $p $n times while frozen, slowest ${m} ms (before: ${base} ms)" ||
        not_ok "A's $p while frozen: slowest $m ms over $n answers"
done
expect_grep "A logs the lost renewal" "$TMP/A/log" "cannot renew the scheduling lease"
expect_grep "A logs that it no longer leads" "$TMP/A/log" "no longer the scheduling leader"
is_leader "$PORT_B" && ok "B's /metrics: the leader" || not_ok "B's /metrics"

# an apply on A, whose server does not answer: 503 within its bound
quota frozen 3 > "$TMP/frozen.yaml"
t0=$(now_ms)
"$TENANTCTL" apply -f "$TMP/frozen.yaml" --server "http://127.0.0.1:$PORT_A" >"$TMP/out" 2>"$TMP/err"
rc=$?
t=$(( $(now_ms) - t0 ))
[ "$rc" != 0 ] && [ "$t" -le 10000 ] && ok "an apply on A fails after ${t} ms (exit $rc)" || not_ok "apply on A: exit $rc after ${t} ms"
expect_grep "with 503" "$TMP/err" "(HTTP 503)"
expect_grep "naming the server" "$TMP/err" "PostgreSQL 127.0.0.1:"
[ "$(psql_q "SELECT count(*) FROM tenantd_objects WHERE name = 'frozen'")" = 0 ] && ok "nothing stored" || not_ok "frozen was stored"

# --- the path answers again: A follows B and picks up its commits ---
quota on-b 2 > "$TMP/on-b.yaml"
expect_rc "an apply on B meanwhile" 0 "$TENANTCTL" apply -f "$TMP/on-b.yaml" --server "http://127.0.0.1:$PORT_B"
kill -CONT "$PROXY"
thawed=$(now_ms)
seen_on "$PORT_A" on-b 8000 && ok "A picked B's commit up $(( $(now_ms) - thawed )) ms after the path came back" || not_ok "A did not pick up B's commit"
expect_rc "an apply on A works again" 0 "$TENANTCTL" apply -f "$TMP/frozen.yaml" --server "http://127.0.0.1:$PORT_A"
seen_on "$PORT_B" frozen 5000 && ok "B serves A's apply" || not_ok "B did not see A's apply"
sleep 1.5
[ "$(leader)" = B ] && ! is_leader "$PORT_A" && ok "B keeps leading; A follows" || not_ok "leader $(leader)"
expect_grep "A logs the lease reachable again" "$TMP/A/log" "scheduling lease is reachable again"

# --- the whole server frozen (postmaster and backends) ---
rm -f "$TMP/stop_probe"
python3 "$HERE/pg_probe.py" "$PORT_B" "$TD_SOURCE_DIR/examples/pods/review.json" "$TMP/stop_probe" "$TMP/probe_b" &
PROBE=$!
sleep 1
probe_from=$(awk 'END { print $1 }' "$TMP/probe_b")
T1=$(term)
PGP=$(pg_pids)
kill -STOP $PGP 2>/dev/null
frozen_at=$(now_ms)
t=""
while [ $(( $(now_ms) - frozen_at )) -lt 10000 ]; do
    if ! is_leader "$PORT_B"; then t=$(( $(now_ms) - frozen_at )); break; fi
    sleep 0.1
done
[ -n "$t" ] && ok "B stepped down ${t} ms after the server froze" || not_ok "B still leads on a frozen server"
is_leader "$PORT_A" && not_ok "A leads on a frozen server" || ok "nobody leads while the server is frozen"
sleep 3
touch "$TMP/stop_probe"; wait $PROBE
for p in /healthz /validate; do
    m=$(probe_max "$p" "$TMP/probe_b" "$probe_from")
    [ "$m" != fail ] && [ "$m" -le "$PROBE_MAX_MS" ] && ok "B answered $p while the server was frozen, slowest ${m} ms" ||
        not_ok "B's $p while the server was frozen: slowest $m ms"
done
kill -CONT $PGP 2>/dev/null
thawed=$(now_ms)
t=""
while [ $(( $(now_ms) - thawed )) -lt 15000 ]; do
    if is_leader "$PORT_A" || is_leader "$PORT_B"; then t=$(( $(now_ms) - thawed )); break; fi
    sleep 0.1
done
[ -n "$t" ] && ok "a leader again ${t} ms after the server thawed ($(leader), term $(term), was $T1)" || not_ok "no leader after the thaw"
quota thawed 4 > "$TMP/thawed.yaml"
expect_rc "an apply on B after the thaw" 0 "$TENANTCTL" apply -f "$TMP/thawed.yaml" --server "http://127.0.0.1:$PORT_B"
seen_on "$PORT_A" thawed 5000 && ok "A serves it" || not_ok "A did not pick up the apply after the thaw"

# --- a stop while the server does not answer is bounded ---
kill -STOP "$PROXY"
sleep 0.5
t0=$(now_ms)
kill -TERM "$PID_A"
wait "$PID_A"; rc=$?
t=$(( $(now_ms) - t0 ))
[ "$rc" = 0 ] && [ "$t" -le 8000 ] && ok "A stopped in ${t} ms with its path frozen (exit $rc)" || not_ok "A's stop: exit $rc after ${t} ms"
kill -CONT "$PROXY"
kill -TERM "$PID_B"
wait "$PID_B" && ok "B stops cleanly" || not_ok "B's exit"
[ "$T0" -ge 1 ] || not_ok "term"
kill "$PROXY" 2>/dev/null
finish
