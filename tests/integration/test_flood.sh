# test_flood.sh - the flood defence (docs/gateway.md, "Clients that retry at
# once") against the issue's adversary at full strength: the real tenantd in
# front of the real simmodel (50 ms a request, Route capacity 8), three
# well-behaved tenants at 20 requests/s through the client library, and an
# abuser limited to 20 requests/s that offers 20x that over 64 connections
# and retries every 429 the instant it arrives (`client: abusive`, in a
# loadtest process of its own so that its event loop does not slow the
# others' measurement). Four runs:
#   (a) the three alone (the baseline), before and again after (b): the
#       machine's load drifts from minute to minute, and the two runs
#       bracket (b) and show how far the baseline moves by itself;
#   (b) the same beside the abuser, tenantd at its defaults;
#   (c) as (b) against a second tenantd started with --tarpit-after 0 (no
#       flood defence), the control: the abuser's attempts and the CPU they
#       cost are what the defence removes.
# (b) holds the others to 100% success and a p99 within max(1.2x (a),
# (a) + 20 ms), (a) the higher of its two runs (20 ms: the floor of
# test_isolation.sh: each tenant sends ~160 requests a run, so its p99 is
# its slowest one or two, which one scheduler hiccup on a loaded 2-core
# machine moves by more than 1.2x of 50 ms).
. "$(dirname "$0")/lib.sh"

RUN_S=${FLOOD_SECONDS:-8}
FLOOR_MS=20

start_simmodel --slots 64 --ms-per-token 2.5 --prefill-ms-per-token 0 || { finish; exit 1; }
: >"$TMP/platform.yaml"
for t in a b c; do cat >>"$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-$t}
spec:
  apiKeys: [{sha256: "$(sha key-$t)"}]
  gateway: {rate: {cost: 6000, per: 1s, burst: 12000}, concurrency: 32}
---
Y
done
cat >>"$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: abuser}
spec:
  apiKeys: [{sha256: "$(sha key-abuser)"}]
  gateway: {rate: {cost: 2400, per: 1s, burst: 2400}, concurrency: 2}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: completions}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 8, queue: 256}
  cost: {model: tokens}
  timeout: 10s
Y
start_tenantd "$TMP/data-on" --config "$TMP/platform.yaml" || { finish; exit 1; }
ON="http://127.0.0.1:$TD_DATA_PORT" ON_PID=$TD_PID ON_ADMIN=$TD_PORT
start_tenantd "$TMP/data-off" --config "$TMP/platform.yaml" --tarpit-after 0 || { finish; exit 1; }
OFF="http://127.0.0.1:$TD_DATA_PORT" OFF_PID=$TD_PID

printf 'apiVersion: tenantd.dev/v1alpha1\nkind: LoadScenario\nmetadata: {name: others}\nspec:\n  tenants:\n' >"$TMP/others.yaml"
for t in a b c; do
    echo "  - {name: team-$t, key: key-$t, rate: 20, promptTokens: 100, maxTokens: 20, client: wellBehaved, connections: 4}" >>"$TMP/others.yaml"
done
cat >"$TMP/abuser.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: LoadScenario
metadata: {name: abuser}
spec:
  tenants:
  - {name: abuser, key: key-abuser, rate: 400, promptTokens: 100, maxTokens: 20, client: abusive,
     connections: 64}
Y

lt() { # NAME SCENARIO TARGET SECS: the JSON report in $TMP/NAME.json
    "$TENANTCTL" loadtest --scenario "$2" --target "$3" --duration "$4" --format json -q \
        >"$TMP/$1.json" 2>"$TMP/$1.err"
    local rc=$?
    if [ "$rc" -le 1 ] && grep -q '"tenants"' "$TMP/$1.json"; then ok "run $1 (exit $rc)"; else
        not_ok "run $1: exit $rc"; sed 's/^/    /' "$TMP/$1.err" | head
    fi
}
jget() { grep -o "\"$2\":{[^}]*}" "$TMP/$1.json" | grep -o "\"$3\":[^,}]*" | cut -d: -f2; }
fcmp() { awk "BEGIN { exit !($*) }"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# flood NAME TARGET PID: the others for RUN_S beside the abuser, which
# starts a second before them and ends a second after; sets CPU_PCT (the
# tenantd's CPU over the abuser's run, % of one core).
flood() {
    local t0 c0 t1 c1
    t0=$(now_ms) c0=$(ticks "$3")
    lt "$1-abuser" "$TMP/abuser.yaml" "$2" $((RUN_S + 2)) &
    local ab=$!
    sleep 1
    lt "$1" "$TMP/others.yaml" "$2" "$RUN_S"
    wait $ab
    t1=$(now_ms) c1=$(ticks "$3")
    CPU_PCT=$(awk -v c=$((c1 - c0)) -v hz="$(getconf CLK_TCK)" -v ms=$((t1 - t0)) \
        'BEGIN { printf "%.1f", c / hz * 100000 / ms }')
}

lt warm "$TMP/others.yaml" "$ON" 1
lt a1 "$TMP/others.yaml" "$ON" "$RUN_S"
flood b "$ON" "$ON_PID"
CPU_B=$CPU_PCT
lt a2 "$TMP/others.yaml" "$ON" "$RUN_S"
# (a): per tenant, the run of the two with the higher p99
for t in team-a team-b team-c; do
    if fcmp "$(jget a1 "$t" p99Ms) >= $(jget a2 "$t" p99Ms)"; then jget_a=a1; else jget_a=a2; fi
    grep -o "\"$t\":{[^}]*}" "$TMP/$jget_a.json" >>"$TMP/a.part"
done
printf '{"tenants":{%s}}\n' "$(paste -sd, "$TMP/a.part")" >"$TMP/a.json"
flood c "$OFF" "$OFF_PID"
CPU_C=$CPU_PCT
curl -s "http://127.0.0.1:$ON_ADMIN/metrics" >"$TMP/metrics"

printf '    %-7s %-18s %-18s %-26s %-26s %s\n' tenant "(a) p99 before" "(a) p99 after" \
    "(b) success p50 p99 ms" "(c) defence off" "bound ms"
for t in team-a team-b team-c; do
    pa=$(jget a "$t" p99Ms)
    bound=$(awk -v a="$pa" -v f="$FLOOR_MS" 'BEGIN { b = a * 1.2; if (a + f > b) b = a + f; printf "%.1f", b }')
    printf '    %-7s %-18s %-18s %-26s %-26s %s\n' "$t" "$(jget a1 "$t" p99Ms)" "$(jget a2 "$t" p99Ms)" \
        "$(jget b "$t" success) $(jget b "$t" p50Ms) $(jget b "$t" p99Ms)" \
        "$(jget c "$t" success) $(jget c "$t" p50Ms) $(jget c "$t" p99Ms)" "$bound"
done
att() { # attempts per second of the abuser in run $1
    awk -v s="$(jget "$1-abuser" abuser sent)" -v d="$(grep -o '"durationS":[0-9.]*' "$TMP/$1-abuser.json" | cut -d: -f2)" \
        'BEGIN { printf "%.0f", s / d }'
}
ATT_B=$(att b) ATT_C=$(att c)
echo "    abuser attempts/s: (b) $ATT_B, (c) $ATT_C; tenantd CPU during the flood: (b) $CPU_B%, (c) $CPU_C% of a core"

# ---- the runs are what they claim to be ----
for r in a1 a2; do
    for t in team-a team-b team-c; do
        s=$(jget $r "$t" success) n=$(jget $r "$t" offered)
        if [ -n "$s" ] && [ "${n:-0}" -ge $((RUN_S * 15)) ] && fcmp "$s >= 1"; then
            ok "($r) $t is healthy alone ($n offered, success $s)"
        else
            not_ok "($r) $t: offered $n success $s"
        fi
    done
done
# the adversary at full strength: without the defence it retries at a
# rate only its own event loop limits (thousands a second)
if fcmp "$ATT_C >= 3000"; then ok "(c) the abuser floods an undefended tenantd ($ATT_C attempts/s)"; else
    not_ok "(c) the abuser is not flooding: $ATT_C attempts/s"; fi

# ---- the claim ----
for t in team-a team-b team-c; do
    pa=$(jget a "$t" p99Ms) s=$(jget b "$t" success) p=$(jget b "$t" p99Ms)
    if [ -n "$s" ] && [ "$p" != null ] && fcmp "$s >= 1" && fcmp "$p <= $pa * 1.2 || $p <= $pa + $FLOOR_MS"; then
        ok "(b) $t keeps 100% success and p99 $p ms within max(1.2x, +${FLOOR_MS} ms) of $pa ms"
    else
        not_ok "(b) $t: success $s, p99 $p ms against a baseline of $pa ms"
    fi
done
# held answers: 64 connections each answered about every Retry-After
# (50 ms at its limit), ~1,300/s, against thousands without
if fcmp "$ATT_B * 4 <= $ATT_C"; then ok "(b) the held abuser makes at most a quarter of (c)'s attempts ($ATT_B/s)"; else
    not_ok "(b) the abuser still makes $ATT_B attempts/s (undefended: $ATT_C)"; fi
if fcmp "$CPU_B * 2 <= $CPU_C"; then ok "(b) the flood costs tenantd at most half of (c)'s CPU ($CPU_B% vs $CPU_C%)"; else
    not_ok "(b) tenantd CPU $CPU_B% under the flood (undefended $CPU_C%)"; fi
acc=$(jget b-abuser abuser accepted)
if [ -n "$acc" ] && [ "$acc" -le $(((RUN_S + 2 + 3) * 20 + 20)) ] && [ "$acc" -ge $((RUN_S * 10)) ]; then
    ok "(b) the abuser is still served at its limit ($acc in $((RUN_S + 2)) s at 20/s)"
else
    not_ok "(b) the abuser was served $acc"
fi
tp=$(awk '/^tenantd_gateway_tarpitted_total / {print $2}' "$TMP/metrics")
cl=$(grep -o 'tenantd_gateway_connections_closed_total{reason="ignored_retry_after"} [0-9]*' "$TMP/metrics" | awk '{print $2}')
[ "${tp:-0}" -gt 0 ] && ok "tenantd_gateway_tarpitted_total counts the held 429s ($tp)" ||
    not_ok "tenantd_gateway_tarpitted_total: ${tp:-missing}"
[ "${cl:-0}" -gt 0 ] && ok "connections that kept ignoring Retry-After were closed ($cl)" ||
    not_ok "connections_closed_total{reason=\"ignored_retry_after\"}: ${cl:-missing}"

stop_tenantd
TD_PID=$ON_PID
stop_tenantd
finish
