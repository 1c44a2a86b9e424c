# test_ledger_pg.sh - the shared ledger on a real PostgreSQL server: two
# replicas' gateways under load while the server is stopped and started
# again; afterwards every request answered 200 is billed once in
# tenantd_ledger (per replica and in total), the outage logged once each
# way and seen in /metrics; a batch sent twice (a crash between the
# server's commit and the spool's delete) stores nothing twice; a replica
# restarted under its name keeps its records and adds new ones; a full
# spool counts what did not fit; tenantctl report --database reads every
# replica's records.
. "$(dirname "$0")/lib.sh"
if [ -z "$(pg_bin)" ] || ! command -v psql >/dev/null; then
    bash "$TD_SOURCE_DIR/scripts/install-deps.sh" >/dev/null 2>&1
    if [ -z "$(pg_bin)" ] || ! command -v psql >/dev/null; then
        echo "SKIP: the PostgreSQL server could not be installed (apt-get install postgresql)"
        exit 77
    fi
fi
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
start_postgres || { finish; exit 1; }
start_simmodel --slots 8 --ms-per-token 0.05 || { finish; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

cat >"$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  labels: {team: alpha, project: search, environment: prod}
  apiKeys: [{sha256: "$(sha key-alpha)"}]
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
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {route: chat, perRequest: "0.001"}
Y

start_replica() { # NAME [ARGS...]
    local name=$1 dir="$TMP/$1"
    shift
    mkdir -p "$dir"
    rm -f "$dir/port" "$dir/dataport"
    "$TENANTD" --data "$dir/data" --admin-listen 127.0.0.1:0 --port-file "$dir/port" \
        --listen 127.0.0.1:0 --listen-port-file "$dir/dataport" --workers 1 --admin-threads 1 \
        --database "$PG_URL" --replica-name "$name" "$@" 2>>"$dir/log" &
    eval "PID_$name=$!"
    PIDS+=($!)
    wait_file "$dir/port" 100 $! || { not_ok "replica $name did not start"; cat "$dir/log"; return 1; }
    wait_file "$dir/dataport" 50 || { not_ok "replica $name has no gateway port"; return 1; }
    eval "PORT_$name=$(cat "$dir/port") GW_$name=$(cat "$dir/dataport")"
}
stop_replica() { local pid; eval "pid=\$PID_$1"; kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }
metric() { # NAME METRIC : its value on the replica's /metrics
    local port
    eval "port=\$PORT_$1"
    curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$2" '$1 == m {print $2}'
}
request() { # NAME : one completion through the replica's gateway; prints the status
    local gw
    eval "gw=\$GW_$1"
    curl -s -o /dev/null -w '%{http_code}\n' --max-time 10 -H "Authorization: Bearer key-alpha" \
        -d '{"model":"m","prompt":"ledger on postgres","max_tokens":4}' "http://127.0.0.1:$gw/v1/completions"
}
load() { # NAME : requests until $TMP/stop exists; status codes into $TMP/NAME.codes
    while [ ! -e "$TMP/stop" ]; do request "$1" >> "$TMP/$1.codes"; done
}
billed() { # [REPLICA] : requests answered ok in the shared ledger
    psql_q "SELECT coalesce(sum(count), 0) FROM tenantd_ledger WHERE kind = 0 AND outcome = 'ok'${1:+ AND replica = '$1'}"
}
# wait_billed N [REPLICA] : waits (10 s at most) until the shared ledger
# bills N requests answered ok (of REPLICA); 1 if it does not
wait_billed() {
    local t0
    t0=$(now_ms)
    while [ "$(billed "${2:-}")" != "$1" ]; do
        [ $(( $(now_ms) - t0 )) -gt 10000 ] && return 1
        sleep 0.1
    done
}
drained() { # NAME... : waits (10 s at most) until each replica's spool is empty and sent
    local r t0
    t0=$(now_ms)
    for r in "$@"; do
        while [ "$(metric "$r" tenantd_ledger_spooled)" != 0 ] || [ "$(metric "$r" tenantd_ledger_database_degraded)" != 0 ]; do
            [ $(( $(now_ms) - t0 )) -gt 10000 ] && return 1
            sleep 0.1
        done
    done
}

start_replica A --config "$TMP/platform.yaml" || { finish; exit 1; }
start_replica B || { finish; exit 1; }
[ "$(request A)" = 200 ] && [ "$(request B)" = 200 ] && ok "both gateways serve" || not_ok "a gateway does not serve"
wait_billed 2 && ok "two requests, two rows in tenantd_ledger" || not_ok "billed: $(billed)"
psql_q "SELECT id FROM tenantd_ledger WHERE kind = 0" > "$TMP/ids"
grep -q '^A|' "$TMP/ids" && grep -q '^B|' "$TMP/ids" && ok "each request's id names its replica" || { not_ok "ids"; cat "$TMP/ids"; }

# --- PostgreSQL stopped and started again under load on both gateways ---
rm -f "$TMP/stop" "$TMP/A.codes" "$TMP/B.codes"
load A & la=$!
load B & lb=$!
sleep 1
t_stop=$(now_ms)
pg_stop || not_ok "pg_ctl stop failed"
sleep 1.5
during_a=$(metric A tenantd_ledger_database_degraded) spooled_a=$(metric A tenantd_ledger_spooled)
served_down=$(cat "$TMP"/A.codes "$TMP"/B.codes | grep -c '^200$')
sleep 1
pg_start_again || not_ok "PostgreSQL did not start again"
t_start=$(now_ms)
sleep 1.5
touch "$TMP/stop"
wait $la $lb
ok200=$(cat "$TMP"/A.codes "$TMP"/B.codes | grep -c '^200$')
other=$(cat "$TMP"/A.codes "$TMP"/B.codes | grep -vc '^200$')
echo "# answered 200 while PostgreSQL was down (1.5 s of it): $served_down"
echo "# load: $ok200 answered 200 ($other other) on two gateways; PostgreSQL down for $((t_start - t_stop)) ms"
[ "$other" = 0 ] && ok "the gateways kept serving: $ok200 x 200, no other answer" || not_ok "$other answers were not 200"
[ "$during_a" = 1 ] && ok "tenantd_ledger_database_degraded 1 while the server was down" || not_ok "degraded: $during_a"
[ "${spooled_a:-0}" -gt 0 ] && ok "A spooled $spooled_a records meanwhile" || not_ok "A spooled: $spooled_a"
t0=$(now_ms)
drained A B && ok "both spools drained $(( $(now_ms) - t_start )) ms after the server was back" || not_ok "spool not drained: A $(metric A tenantd_ledger_spooled), B $(metric B tenantd_ledger_spooled)"
a200=$(grep -c '^200$' "$TMP/A.codes") b200=$(grep -c '^200$' "$TMP/B.codes")
wait_billed $((a200 + 1)) A && ok "A: every 200 billed once ($a200 + the first one)" || not_ok "A billed $(billed A), answered $((a200 + 1))"
wait_billed $((b200 + 1)) B && ok "B: every 200 billed once ($b200 + the first one)" || not_ok "B billed $(billed B), answered $((b200 + 1))"
[ "$(billed)" = $((ok200 + 2)) ] && ok "the shared ledger holds $((ok200 + 2)) requests, as answered" || not_ok "billed $(billed), answered $((ok200 + 2))"
for r in A B; do
    [ "$(grep -c 'unreachable\|Connection refused' "$TMP/$r/log" | head -1)" -ge 1 ] || true
    [ "$(grep -c 'tenantd: ledger: .*spooling in' "$TMP/$r/log")" = 1 ] && ok "$r logged the outage once" || not_ok "$r: $(grep -c 'spooling in' "$TMP/$r/log") outage lines"
    [ "$(grep -c 'tenantd: ledger: .*reachable again' "$TMP/$r/log")" = 1 ] && ok "$r logged the return once" || not_ok "$r: $(grep -c 'reachable again' "$TMP/$r/log") return lines"
done

# --- a batch sent twice stores nothing twice: A's records put back in its
# spool (as after a crash between the server's commit and the spool's delete) ---
stop_replica A
before=$(billed)
python3 - "$TMP/A/data/ledger.db" <<'P'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
cols = [r[1] for r in c.execute("PRAGMA table_info(records)")]
c.execute("INSERT INTO spool(%s) SELECT %s FROM records WHERE kind = 0" % (", ".join(cols), ", ".join(cols)))
c.commit()
P
start_replica A || { finish; exit 1; }
drained A && ok "A sent its spool again at start ($(metric A tenantd_ledger_shipped_total) records)" || not_ok "A's spool: $(metric A tenantd_ledger_spooled)"
[ "$(billed)" = "$before" ] && ok "nothing stored twice ($before requests)" || not_ok "billed $(billed) after the resend, $before before"
# restarted under its name: new records with new ids beside the old ones
[ "$(request A)" = 200 ] && wait_billed $((a200 + 2)) A &&
    ok "A restarted: its new request billed beside its old ones ($(billed A))" || not_ok "A after restart: billed $(billed A)"
[ "$(psql_q "SELECT count(DISTINCT split_part(id, '-', 1)) FROM tenantd_ledger WHERE replica = 'A' AND kind = 0")" = 2 ] &&
    ok "two lives of A, two boot ids in its record ids" || not_ok "boot ids: $(psql_q "SELECT DISTINCT split_part(id, '-', 1) FROM tenantd_ledger WHERE replica = 'A'")"

# --- a full spool counts what did not fit (records: a gateway worker
# sums its requests per tenant, route and outcome every 250 ms) ---
start_replica C --ledger-spool-max 1 || { finish; exit 1; }
as_postgres "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop > "$TMP/pgstop" 2>&1 || { not_ok "pg_ctl stop"; cat "$TMP/pgstop"; }
for i in $(seq 1 6); do request C > /dev/null; sleep 0.3; done
sleep 0.5
local_rows() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT $1 FROM records WHERE kind = 0 AND outcome = 'ok'\").fetchone()[0])" "$TMP/C/data/ledger.db"; }
rows=$(local_rows 'count(*)') over=$(metric C tenantd_ledger_spool_overflow_total)
echo "# C: 6 requests in $rows records; spooled $(metric C tenantd_ledger_spooled), overflow $over"
[ "$(metric C tenantd_ledger_spooled)" = 1 ] && ok "C's spool holds its one record" || not_ok "C spooled $(metric C tenantd_ledger_spooled)"
[ "$rows" -ge 2 ] && [ "$over" = $((rows - 1)) ] && ok "the other $over records counted in tenantd_ledger_spool_overflow_total" || not_ok "overflow $over of $rows records"
[ "$(local_rows 'sum(count)')" = 6 ] && ok "C's own ledger keeps all 6 requests (its budgets, --data reports)" || not_ok "C's local ledger: $(local_rows 'sum(count)')"
pg_start_again
drained C && [ "$(psql_q "SELECT count(*) FROM tenantd_ledger WHERE replica = 'C'")" = 1 ] &&
    ok "the spooled record reaches the shared ledger, the rest does not" || not_ok "C's rows: $(psql_q "SELECT count(*) FROM tenantd_ledger WHERE replica = 'C'")"

# --- tenantctl report --database: every replica's records ---
expect_rc "report --database (no --data)" 0 "$TENANTCTL" report --database "$PG_URL" --format csv
total=$(billed)
python3 - "$TMP/out" "$total" <<'P' && ok "the chargeback counts all $total requests the three replicas shipped" || { not_ok "report's requests"; cat "$TMP/out"; }
import csv, sys
n = sum(int(r["quantity"]) for r in csv.DictReader(open(sys.argv[1])) if r["item"] == "requests/chat")
sys.exit(0 if n == int(sys.argv[2]) else (print("requests/chat", n) or 1))
P
for r in A B C; do stop_replica $r; done
finish
