# lib.sh - shared helpers of the integration tests: checks that count, a
# temp dir removed on exit, and starting the real tenantd on a free port.
set -u
TD_BIN=${TD_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build}
TD_SOURCE_DIR=${TD_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
TENANTCTL="$TD_BIN/tenantctl"
TENANTD="$TD_BIN/tenantd"
EX="$TD_SOURCE_DIR/examples"
PASS=0
FAIL=0
TMP=$(mktemp -d)
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    [ -n "${PG_DIR:-}" ] && stop_postgres
    rm -rf "$TMP"
}
trap cleanup EXIT

ok() { PASS=$((PASS + 1)); echo "ok - $*"; }
not_ok() { FAIL=$((FAIL + 1)); echo "not ok - $*"; }

# expect_rc NAME WANT CMD... : runs CMD, output to $TMP/out and $TMP/err.
expect_rc() {
    local name=$1 want=$2
    shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$name (exit $rc)"; else
        not_ok "$name: exit $rc, want $want"; sed 's/^/    out: /' "$TMP/out" | head -20
        sed 's/^/    err: /' "$TMP/err" | head -20
    fi
}

# expect_grep NAME FILE PATTERN : FILE contains the fixed string PATTERN.
expect_grep() {
    if grep -qF -- "$3" "$2"; then ok "$1"; else
        not_ok "$1: '$3' not in $2"; sed 's/^/    /' "$2" | head -20
    fi
}

expect_no_grep() {
    if grep -qF -- "$3" "$2"; then not_ok "$1: '$3' unexpectedly in $2"; else ok "$1"; fi
}

# start_tenantd DATA_DIR [ARGS...] : starts tenantd with both listeners on
# 127.0.0.1:0, sets TD_PORT (admin), TD_DATA_PORT (gateway) and TD_PID;
# fails the test if it is not listening within 10 s ($TD_START_TENTHS
# tenths of a second, for a store of many objects).
start_tenantd() {
    local data=$1
    shift
    rm -f "$TMP/port"
    rm -f "$TMP/dataport"
    "$TENANTD" --data "$data" --admin-listen 127.0.0.1:0 --port-file "$TMP/port" \
        --listen 127.0.0.1:0 --listen-port-file "$TMP/dataport" --workers 2 \
        ${TD_ADMIN_THREADS:+--admin-threads "$TD_ADMIN_THREADS"} "$@" \
        2>>"$TMP/tenantd.log" &
    TD_PID=$!
    PIDS+=("$TD_PID")
    if ! wait_file "$TMP/port" "${TD_START_TENTHS:-100}" "$TD_PID"; then
        not_ok "tenantd did not start"; cat "$TMP/tenantd.log"; return 1
    fi
    TD_PORT=$(cat "$TMP/port")
    TD_DATA_PORT=$(cat "$TMP/dataport" 2>/dev/null)
}

# start_simmodel [ARGS...] : starts the real simmodel on 127.0.0.1:0 with
# ARGS, its stderr to $TMP/sim.log; sets SIM_PID, SIM_PORT and SIM
# (127.0.0.1:PORT); fails the test if it is not listening within 10 s.
start_simmodel() {
    rm -f "$TMP/simport"
    "$TD_BIN/simmodel" --listen 127.0.0.1:0 --port-file "$TMP/simport" "$@" 2>>"$TMP/sim.log" &
    SIM_PID=$!
    PIDS+=("$SIM_PID")
    wait_file "$TMP/simport" 100 "$SIM_PID"
    if [ ! -s "$TMP/simport" ]; then
        not_ok "simmodel did not start"; cat "$TMP/sim.log"; return 1
    fi
    SIM_PORT=$(cat "$TMP/simport")
    SIM="127.0.0.1:$SIM_PORT"
}

# wait_file FILE [TENTHS] [PID] : waits until FILE is not empty, at most
# TENTHS tenths of a second (50), or until PID has exited; 1 if still empty.
wait_file() {
    local _
    for _ in $(seq 1 "${2:-50}"); do
        [ -s "$1" ] && return 0
        [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && break
        sleep 0.1
    done
    [ -s "$1" ]
}

# wait_port PORT [TENTHS] : waits until 127.0.0.1:PORT accepts a
# connection, at most TENTHS tenths of a second (50); 1 if it never did.
wait_port() {
    local _
    for _ in $(seq 1 "${2:-50}"); do
        (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# free_port : prints a free loopback port below the kernel's ephemeral
# range, so that no client socket can be holding it when a server (Redis)
# is started again on it.
free_port() {
    local p lo _
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    for _ in $(seq 1 50); do
        p=$((10000 + RANDOM % (lo - 10000)))
        (echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
    return 1
}

# sha KEY : the hex SHA-256 of the string KEY, as apiKeys[].sha256 wants it.
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }

stop_tenantd() {
    kill "$TD_PID" 2>/dev/null
    wait "$TD_PID" 2>/dev/null
    local rc=$?
    if [ "$rc" -eq 0 ]; then ok "tenantd stops cleanly on SIGTERM"; else not_ok "tenantd exit $rc on SIGTERM"; cat "$TMP/tenantd.log"; fi
}

finish() {
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" -eq 0 ]
}

# as_postgres CMD... : runs CMD as the postgres user when root (CI runs as
# root, and the server refuses to run as root), else as ourselves.
as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# pg_bin : the newest Debian PostgreSQL server's bin dir, or nothing.
pg_bin() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
    [ -n "$d" ] && [ -x "$d/initdb" ] && echo "$d"
}

# start_postgres : a real PostgreSQL server (Debian's package) in a fresh
# dir owned by postgres, on a free loopback port, its unix socket in that
# dir; sets PG_DIR, PG_PORT and PG_URL (user postgres, trust auth). Stopped
# and removed at exit. 1 if it did not start.
start_postgres() {
    local bin
    bin=$(pg_bin) || { not_ok "no PostgreSQL server (scripts/install-deps.sh installs it)"; return 1; }
    PG_DIR=$(mktemp -d /tmp/td-pg.XXXXXX)
    chmod 755 "$PG_DIR"
    [ "$(id -u)" -eq 0 ] && chown postgres: "$PG_DIR"
    if ! as_postgres "$bin/initdb" -D "$PG_DIR/data" -U postgres -A trust --no-sync \
        >"$PG_DIR/initdb.log" 2>&1; then
        not_ok "initdb failed"; cat "$PG_DIR/initdb.log"; return 1
    fi
    for _attempt in 1 2 3; do
        PG_PORT=$(free_port)
        if pg_start_again; then
            PG_URL="postgresql://postgres@127.0.0.1:$PG_PORT/postgres"
            return 0
        fi
    done
    not_ok "PostgreSQL did not start"; cat "$PG_DIR/pg_ctl.log" "$PG_DIR/server.log"; return 1
}

# pg_start_again : starts the server of start_postgres (stopped with
# pg_stop) on the same port.
pg_start_again() {
    as_postgres "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 30 \
        -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$PG_DIR -c fsync=off" \
        start >"$PG_DIR/pg_ctl.log" 2>&1
}

# pg_stop : stops it (fast: sessions are cut), keeping its data.
pg_stop() {
    as_postgres "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m fast -w stop >/dev/null 2>&1
}

# psql_q SQL : runs SQL on the test server, unaligned, tuples only.
psql_q() {
    psql -X -q -A -t -v ON_ERROR_STOP=1 "$PG_URL" -c "$1"
}

stop_postgres() {
    as_postgres "$(pg_bin)/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1
    rm -rf "$PG_DIR"
    PG_DIR=
}
