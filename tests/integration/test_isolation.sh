# test_isolation.sh - the isolation proof: the real tenantd in front of the
# real simmodel, one scenario run three ways:
#   (a) team-a, team-b, team-c alone (the baseline);
#   (b) the same plus an abuser sending 20x its limit (100 requests/s where
#       examples/scenarios/gateway.yaml grants it 600 tokens/s, 5 requests/s
#       of 120 tokens) over 4 connections, retrying every 429/503 at once;
#   (c) as (b) against a second tenantd whose tenants keep their keys but
#       have no spec.gateway (no rate, no concurrency): plain pass-through.
# (b) holds every well-behaved tenant to >= 99.9% success and a p99 within
# max(1.2x (a), (a) + 20 ms); (c) must break that for at least one of them,
# the control that shows the limits are what protect them.
#
# Sizing: simmodel has 4 slots of about 40 ms a request (5 ms prefill of 100
# prompt tokens + 20 tokens at 1.75 ms), 100 requests/s in all. The three
# tenants offer 45/s (45%); with the abuser's 100/s the upstream is
# oversubscribed, so without limits its queue grows for the whole run and
# the abuser's 4 connections always hold 4 requests ahead of everyone else.
# With limits the abuser may hold one of the 4 slots (concurrency 1) and no
# more than one second of its rate at once (burst = rate): a share sized to
# the upstream. With concurrency 2 and a 2 s burst it could take half the
# upstream for its first seconds, which showed in (b)'s p99 (87 vs 64 ms).
# 4 connections, as in the built-in scenario: the load generator measures
# every tenant on one event loop, and more connections flooding 429s at
# once would slow the measurement itself (on 2 cores) as much as tenantd.
#
# Why the 20 ms floor: each tenant sends about 120 requests a run, so its p99
# is its slowest request or two, and a baseline p99 is about 60 ms; one
# scheduler hiccup on a 2-core machine that also runs the load generator,
# two tenantds, simmodel and (under ctest -j) other tests moves it by more
# than 12 ms (1.2x) with no tenant at fault. 20 ms is a third of a service
# time; without limits (c) lands near 120-140 ms, past either bound.
. "$(dirname "$0")/lib.sh"

RUN_S=${ISOLATION_SECONDS:-8}
FLOOR_MS=20

start_simmodel --slots 4 --ms-per-token 1.75 || { finish; exit 1; }

# the limited platform, and the same tenants and keys with no gateway limits
sed "s/127\.0\.0\.1:8000/$SIM/" "$EX/scenarios/gateway.yaml" >"$TMP/limited.yaml"
grep -v '^  gateway:' "$TMP/limited.yaml" >"$TMP/open.yaml"
if grep -q '^  gateway:' "$TMP/open.yaml" || [ "$(grep -c 'apiKeys' "$TMP/open.yaml")" -ne 4 ]; then
    not_ok "the pass-through config still has limits or lost keys"; finish; exit 1
fi
start_tenantd "$TMP/data-limited" --config "$TMP/limited.yaml" || { finish; exit 1; }
LIMITED="http://127.0.0.1:$TD_DATA_PORT"
LIMITED_PID=$TD_PID
start_tenantd "$TMP/data-open" --config "$TMP/open.yaml" || { finish; exit 1; }
OPEN="http://127.0.0.1:$TD_DATA_PORT"

scenario() { # scenario FILE WITH_ABUSER
    cat >"$1" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: LoadScenario
metadata: {name: isolation}
spec:
  duration: ${RUN_S}s
  tenants:
  - {name: team-a, key: key-a, rate: 15, promptTokens: 100, maxTokens: 20, client: wellBehaved,
     slo: {p99: 500ms, success: 0.999}}
  - {name: team-b, key: key-b, rate: 15, promptTokens: 100, maxTokens: 20, client: wellBehaved,
     slo: {p99: 500ms, success: 0.999}}
  - {name: team-c, key: key-c, rate: 15, promptTokens: 100, maxTokens: 20, client: wellBehaved,
     slo: {p99: 500ms, success: 0.999}}
Y
    [ "$2" = yes ] && cat >>"$1" <<Y
  - {name: abuser, key: key-abuser, rate: 100, promptTokens: 100, maxTokens: 20, client: abusive,
     connections: 4}
Y
    return 0
}
scenario "$TMP/well.yaml" no
scenario "$TMP/abused.yaml" yes

# run NAME SCENARIO TARGET [ARGS...]: the JSON report in $TMP/NAME.json.
# Exit 1 (an SLO missed) is a result here, not a failure of the run.
run() {
    local name=$1 scen=$2 target=$3
    shift 3
    "$TENANTCTL" loadtest --scenario "$scen" --target "$target" --format json -q "$@" \
        >"$TMP/$name.json" 2>"$TMP/$name.err"
    local rc=$?
    if [ "$rc" -le 1 ] && grep -q '"tenants"' "$TMP/$name.json"; then ok "run $name (exit $rc)"; else
        not_ok "run $name: exit $rc"; sed 's/^/    /' "$TMP/$name.err" | head
    fi
}
# jget NAME TENANT FIELD: one number of a report ("null" if there is none).
jget() {
    grep -o "\"$2\":{[^}]*}" "$TMP/$1.json" | grep -o "\"$3\":[^,}]*" | cut -d: -f2
}
# fcmp EXPR: awk's verdict on a comparison of decimals.
fcmp() { awk "BEGIN { exit !($*) }"; }

run a "$TMP/well.yaml" "$LIMITED"
run b "$TMP/abused.yaml" "$LIMITED" --html "$TMP/b.html"
run c "$TMP/abused.yaml" "$OPEN"

printf '    %-7s %-24s %-24s %-24s %s\n' tenant "(a) success p99ms" "(b) limits on" \
    "(c) limits off" "bound ms"
for t in team-a team-b team-c abuser; do
    pa=$(jget a "$t" p99Ms)
    bound=$( [ -n "$pa" ] && awk -v a="$pa" -v f="$FLOOR_MS" 'BEGIN { b = a * 1.2; if (a + f > b) b = a + f; printf "%.1f", b }')
    printf '    %-7s %-24s %-24s %-24s %s\n' "$t" "$(jget a "$t" success) $pa" \
        "$(jget b "$t" success) $(jget b "$t" p99Ms)" "$(jget c "$t" success) $(jget c "$t" p99Ms)" \
        "${bound:--}"
done

# ---- the runs are what they claim to be ----
for t in team-a team-b team-c; do
    s=$(jget a "$t" success) p=$(jget a "$t" p99Ms) n=$(jget a "$t" offered)
    if [ -n "$s" ] && [ "$p" != null ] && [ "${n:-0}" -ge $((RUN_S * 8)) ] && fcmp "$s >= 0.999"; then
        ok "(a) $t is healthy alone ($n offered, success $s, p99 $p ms)"
    else
        not_ok "(a) $t: offered $n success $s p99 $p"
    fi
done
sent=$(jget b abuser sent) offered=$(jget b abuser offered) r429=$(jget b abuser rateLimited)
acc=$(jget b abuser accepted)
# held to its limit (5/s over the run and the 3 s drain, a burst of 5) and
# answered mostly 429s; its 429s are held once it retries before their
# Retry-After, so many sent attempts are still waiting at the end
if [ -n "$sent" ] && [ "$sent" -gt "$offered" ] && [ "$r429" -gt $((acc * 3 / 2)) ] &&
    [ "$acc" -le $(((RUN_S + 3) * 5 + 5)) ]; then
    ok "(b) the abuser retries at once and is held to 429s ($r429 429s, $acc ok, $sent sent, $offered offered)"
else
    not_ok "(b) abuser: sent $sent offered $offered 429 $r429 ok $acc"
fi
r429=$(jget c abuser rateLimited) acc=$(jget c abuser accepted) offered=$(jget c abuser offered)
# Limits off: no 429 at all. Most of its requests are served; the rest time
# out or are shed by the overloaded upstream's queue, which is the point of
# (c) (on a loaded 2-core machine, 88-92% were served).
if [ "$r429" = 0 ] && [ -n "$acc" ] && [ $((acc * 4)) -ge $((offered * 3)) ]; then
    ok "(c) pass-through: the abuser is never limited ($acc of $offered accepted, no 429)"
else
    not_ok "(c) the abuser was limited: 429 $r429, accepted $acc of $offered"
fi

# ---- the claim: limits on, the others keep their objectives ----
broken=""
for t in team-a team-b team-c; do
    pa=$(jget a "$t" p99Ms)
    for r in b c; do
        s=$(jget $r "$t" success) p=$(jget $r "$t" p99Ms)
        if [ -n "$s" ] && [ "$p" != null ] && fcmp "$s >= 0.999" &&
            fcmp "$p <= $pa * 1.2 || $p <= $pa + $FLOOR_MS"; then
            verdict=kept
        else
            verdict=broken
        fi
        if [ $r = b ]; then
            [ $verdict = kept ] &&
                ok "(b) $t keeps success $s >= 0.999 and p99 $p ms within max(1.2x, +${FLOOR_MS} ms) of $pa ms" ||
                not_ok "(b) $t: success $s, p99 $p ms against a baseline of $pa ms"
        elif [ $verdict = broken ]; then
            broken="$broken $t (success $s, p99 $p ms vs $pa ms)"
        fi
    done
done
# ---- the control: limits off, the same abuser breaks someone ----
if [ -n "$broken" ]; then
    ok "(c) without limits the abuser breaks:$broken"
else
    not_ok "(c) without limits every tenant kept its objectives: the test proves nothing"
fi

# ---- the HTML report of (b) ----
h="$TMP/b.html"
expect_grep "--html writes a page" "$h" "</html>"
expect_grep "... with the summary table" "$h" "<th>p99 ms</th>"
expect_grep "... a latency chart per tenant" "$h" "<title>latency per second</title>"
expect_grep "... an outcomes chart per tenant" "$h" "<title>outcomes per second</title>"
expect_grep "... the abuser's 429s in it" "$h" "429 rate-limited</title></rect>"
[ "$(grep -c '<h2>' "$h")" -eq 4 ] && ok "... one section per tenant" || not_ok "sections: $(grep -c '<h2>' "$h")"
if grep -qiE '<script|<link|src=|href=|@import|url\(' "$h"; then
    not_ok "the page loads something from elsewhere"
else
    ok "the page is self-contained (no script, link, src, href, import, url())"
fi
expect_rc "--html to a path that cannot be written: exit 2" 2 \
    "$TENANTCTL" loadtest --scenario "$TMP/well.yaml" --target "$LIMITED" --duration 1 \
    --html "$TMP/no/such/dir/x.html"
expect_grep "... naming it" "$TMP/err" "--html $TMP/no/such/dir/x.html:"

stop_tenantd
TD_PID=$LIMITED_PID
stop_tenantd
finish
