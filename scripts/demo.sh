#!/usr/bin/env bash
# demo.sh - what `make demo` shows, in about a minute: simmodel behind
# tenantd's gateway with one abusive tenant (contained, the others keep
# their SLOs), the same run without limits as the control, a batch-queue
# simulation with borrowing and preemption, admission decisions, and the
# cost report over the usage ledger both wrote (demo-out/data/ledger.db).
# Reports go to demo-out/ (index.html links them all); every process it
# starts is stopped on exit.
set -u
BUILD=${1:-build}
CTL="$BUILD/tenantctl"
EX=examples
OUT=demo-out
RUN_S=${DEMO_SECONDS:-8}
T0=$(date +%s)
bold() { printf '\n\033[1m%s\033[0m\n' "$*"; }
die() { echo "demo: $*" >&2; exit 1; }

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rm -rf "$OUT"
mkdir -p "$OUT"

# wait_file FILE PID: the port file of a process that started on port 0.
wait_file() {
    for _ in $(seq 1 100); do
        [ -s "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# ---- the system: simmodel, tenantd with limits, tenantd without ----
bold "1. simmodel (4 GPU slots, ~40 ms a request: 100 requests/s in all) behind tenantd"
"$BUILD/simmodel" --listen 127.0.0.1:0 --port-file "$TMP/simport" --slots 4 --ms-per-token 1.75 \
    2>"$TMP/sim.log" &
PIDS+=($!)
wait_file "$TMP/simport" $! || { cat "$TMP/sim.log"; die "simmodel did not start"; }
SIM="127.0.0.1:$(cat "$TMP/simport")"
# examples/scenarios/gateway.yaml: team-a..c (keys key-a..c) may spend 6000
# tokens/s, the abuser (key-abuser) 600 tokens/s and 4 requests at once;
# the control has the same tenants and keys and no limits at all.
sed "s/127\.0\.0\.1:8000/$SIM/" "$EX/scenarios/gateway.yaml" >"$TMP/limited.yaml"
grep -v '^  gateway:' "$TMP/limited.yaml" >"$TMP/open.yaml"
start_tenantd() { # NAME DATA CONFIG...: sets GW, ADMIN, TD_PID
    local name=$1 data=$2
    shift 2
    local cfgs=()
    for c in "$@"; do cfgs+=(--config "$c"); done
    "$BUILD/tenantd" --data "$data" "${cfgs[@]}" --admin-listen 127.0.0.1:0 \
        --port-file "$TMP/admin-$name" --listen 127.0.0.1:0 --listen-port-file "$TMP/gw-$name" \
        --workers 2 2>"$TMP/tenantd-$name.log" &
    TD_PID=$!
    PIDS+=($TD_PID)
    wait_file "$TMP/admin-$name" $TD_PID && [ -s "$TMP/gw-$name" ] ||
        { cat "$TMP/tenantd-$name.log"; die "tenantd ($name) did not start"; }
    GW="http://127.0.0.1:$(cat "$TMP/gw-$name")"
    ADMIN="http://127.0.0.1:$(cat "$TMP/admin-$name")"
}
# The limited tenantd meters every request into the usage ledger in
# $OUT/data/ledger.db, priced by examples/costpolicy.yaml.
start_tenantd limited "$OUT/data" "$TMP/limited.yaml" "$EX/costpolicy.yaml"
LIMITED=$GW LIMITED_ADMIN=$ADMIN LIMITED_PID=$TD_PID
start_tenantd open "$TMP/data-open" "$TMP/open.yaml"
OPEN=$GW
echo "  simmodel $SIM; tenantd gateway $LIMITED (limits on), $OPEN (limits off)"

# ---- the load tests ----
# (a) without the abuser: examples/scenarios/abusive.yaml minus its abuser
grep -v 'name: abuser\|client: abusive' "$EX/scenarios/abusive.yaml" >"$TMP/alone.yaml"
loadtest() { # NAME TITLE SCENARIO TARGET SECONDS
    printf '  %-46s' "$2"
    "$CTL" loadtest --scenario "$3" --target "$4" --duration "$5" -q --format json \
        --html "$OUT/loadtest-$1.html" >"$OUT/loadtest-$1.json" 2>"$TMP/$1.err"
    local rc=$?
    [ "$rc" -le 1 ] || { echo; cat "$TMP/$1.err"; die "loadtest $1: exit $rc"; }
    echo "done ($OUT/loadtest-$1.html)"
}
bold "2. The abusive-tenant load test: team-a, team-b, team-c at 20 requests/s (SLO p99 500 ms,
   99.9% success); the abuser at 100 requests/s, 20x its limit, retrying every 429 at once"
loadtest alone "(a) the three teams alone, limits on" "$TMP/alone.yaml" "$LIMITED" 5
loadtest abusive "(b) + the abuser, limits on" abusive "$LIMITED" "$RUN_S"
loadtest no-limits "(c) + the abuser, limits off (the control)" abusive "$OPEN" 5

jget() { # NAME TENANT FIELD
    grep -o "\"$2\":{[^}]*}" "$OUT/loadtest-$1.json" | grep -o "\"$3\":[^,}]*" | cut -d: -f2
}
cell() { # NAME TENANT: "99.95%  123 ms"
    awk -v s="$(jget "$1" "$2" success)" -v p="$(jget "$1" "$2" p99Ms)" \
        'BEGIN { if (p == "null" || p == "") p = "-"; else p = sprintf("%.0f ms", p);
                 printf "%7.2f%% %8s", 100 * s, p }'
}
{
    echo "Isolation: the same tenants three ways (success, p99 latency of successes)"
    printf '  %-8s %-18s %-18s %-18s %s\n' tenant "(a) alone" "(b) +abuser" "(c) +abuser," \
        "SLO (b)"
    printf '  %-8s %-18s %-18s %-18s %s\n' "" "limits on" "limits on" "limits OFF" ""
    for t in team-a team-b team-c; do
        met=$(jget abusive "$t" sloMet)
        printf '  %-8s %-18s %-18s %-18s %s\n' "$t" "$(cell alone "$t")" "$(cell abusive "$t")" \
            "$(cell no-limits "$t")" "$([ "$met" = true ] && echo "met" || echo "MISSED")"
    done
    printf '  %-8s %-18s %-18s %-18s\n' abuser "-" "$(cell abusive abuser)" "$(cell no-limits abuser)"
    echo
    sent=$(jget abusive abuser sent) acc=$(jget abusive abuser accepted)
    off=$(jget abusive abuser offered) r429=$(jget abusive abuser rateLimited)
    echo "  Contained: with limits on, the abuser offered $off requests and, retrying at once,"
    echo "  sent $sent; tenantd answered $r429 of them 429 and let $acc through."
    worst=$(for t in team-a team-b team-c; do
        awk -v a="$(jget alone "$t" p99Ms)" -v b="$(jget abusive "$t" p99Ms)" \
            -v c="$(jget no-limits "$t" p99Ms)" -v t="$t" \
            'BEGIN { if (a > 0) printf "%s %.2f %.2f\n", t, b / a, c / a }'
    done | sort -k3 -n -r | head -1)
    read -r wt wb wc <<<"$worst"
    echo "  Protected: p99 with the abuser is ${wb}x of alone for $wt with limits on;"
    echo "  with limits off the same abuser makes it ${wc}x (the isolation test's bar is 1.2x)."
} | tee "$OUT/summary.txt"

# ---- the dashboard, then the ledger is closed ----
if command -v chromium >/dev/null; then
    timeout 60 chromium --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$TMP/chromium" --hide-scrollbars --window-size=1900,520 \
        --virtual-time-budget=6000 --screenshot="$OUT/dashboard.png" "$LIMITED_ADMIN/ui" \
        >/dev/null 2>&1 && echo "  the live dashboard ($LIMITED_ADMIN/ui): $OUT/dashboard.png"
fi
kill "$LIMITED_PID" 2>/dev/null
wait "$LIMITED_PID" 2>/dev/null

# ---- the batch queue ----
bold "3. Batch queue: Kueue's ClusterQueues with borrowing and preemption (tenantctl simulate)"
# Its timeline starts two hours before this hour on the ledger's clock, so
# the report below holds the batch GPU-hours beside the requests.
NOW_S=$(date +%s)
START=$(date -u -d "@$((NOW_S / 3600 * 3600 - 7200))" +%Y-%m-%dT%H:%M:%SZ)
END=$(date -u -d "@$((NOW_S / 3600 * 3600 + 3600))" +%Y-%m-%dT%H:%M:%SZ)
"$CTL" simulate -c "$EX/kueue/platform.yaml" -c "$EX/kueue/owners.yaml" \
    -f "$EX/kueue/workloads.yaml" --ledger "$OUT/data" --start "$START" \
    >"$OUT/simulate.txt" 2>"$TMP/simulate.err" ||
    die "simulate failed: $(cat "$OUT/simulate.txt" "$TMP/simulate.err")"
sed 's/^/  /' "$OUT/simulate.txt" "$TMP/simulate.err"

# ---- admission ----
bold "4. Admission against $EX/platform.yaml (quota, LimitRange, Pod Security, GPU pools)"
{
    for pod in allowed defaulted gpu over-quota privileged missing-label wrong-pool; do
        printf '\n# %s\n' "$(sed -n '1p' "$EX/pods/$pod.yaml" | sed 's/^# //')"
        extra=()
        [ "$pod" = gpu ] && extra=(--used "$EX/pods/used.yaml")
        "$CTL" admit -c "$EX/platform.yaml" -f "$EX/pods/$pod.yaml" "${extra[@]}" -o summary
    done
    printf '\n# The same decision as a webhook would answer (AdmissionReview v1)\n'
    "$CTL" admit -c "$EX/platform.yaml" -f "$EX/pods/review.json" -q | head -20
    printf '\n# A namespace baseline for team ml, env prod (tenantctl provision)\n'
    "$CTL" provision --team ml --env prod --cpu 64 --memory 256Gi --gpus 8 |
        awk '/^kind:/ {k=$2} /^  name:/ && k {printf "  %-15s %s\n", k, $2; k=""}'
} >"$OUT/admission.txt" 2>&1
sed 's/^/  /' "$OUT/admission.txt"

# ---- the cost report over the ledger ----
REPORT_LI=""
if "$CTL" report --help >/dev/null 2>&1; then
    bold "5. Who used what and what it cost: tenantctl report over $OUT/data/ledger.db ($START to $END)"
    report() { # FORMAT FILE
        "$CTL" report --data "$OUT/data" -c "$TMP/limited.yaml" -c "$EX/costpolicy.yaml" \
            -c "$EX/kueue/platform.yaml" -c "$EX/kueue/owners.yaml" --from "$START" --to "$END" \
            --by team --format "$1" -o "$2" 2>"$TMP/report.err" ||
            die "report failed: $(cat "$TMP/report.err")"
    }
    report table "$OUT/report.txt"
    report html "$OUT/report.html"
    report csv "$OUT/chargeback.csv"
    sed 's/^/  /' "$OUT/report.txt"
    REPORT_LI='<li><a href="report.html">cost report: showback, chargeback, right-sizing
  (tenantctl report over the ledger)</a> (<a href="chargeback.csv">chargeback CSV</a>)</li>'
fi
DASH_LI=""
[ -s "$OUT/dashboard.png" ] && DASH_LI='<li><a href="dashboard.png">the live dashboard (/ui) during the run</a></li>'

# ---- the index ----
esc() { sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g' "$1"; }
page() { # FILE TITLE SOURCE: a preformatted page of SOURCE
    { printf '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>%s</title>' "$2"
      printf '<style>body{font:14px system-ui,sans-serif;margin:2em}pre{font-size:13px}</style>'
      printf '</head><body><h1>%s</h1><pre>\n' "$2"
      esc "$3"
      printf '</pre></body></html>\n'; } >"$1"
}
page "$OUT/summary.html" "Isolation summary" "$OUT/summary.txt"
page "$OUT/simulate.html" "Batch queue simulation (tenantctl simulate)" "$OUT/simulate.txt"
page "$OUT/admission.html" "Admission decisions (tenantctl admit)" "$OUT/admission.txt"
cat >"$OUT/index.html" <<H
<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tenantd demo</title>
<style>body{font:15px/1.5 system-ui,sans-serif;margin:2em;max-width:60em}pre{font-size:13px}</style>
</head><body>
<h1>tenantd demo</h1>
<pre>$(esc "$OUT/summary.txt")</pre>
<h2>Reports</h2>
<ul>
<li><a href="loadtest-abusive.html">(b) the abusive-tenant load test, limits on</a>
  (<a href="loadtest-abusive.json">JSON</a>)</li>
<li><a href="loadtest-alone.html">(a) the same tenants alone: the baseline</a>
  (<a href="loadtest-alone.json">JSON</a>)</li>
<li><a href="loadtest-no-limits.html">(c) the abuser with limits off: the control</a>
  (<a href="loadtest-no-limits.json">JSON</a>)</li>
<li><a href="summary.html">the isolation summary</a></li>
$REPORT_LI
$DASH_LI
<li><a href="simulate.html">batch queue: borrowing and preemption (tenantctl simulate)</a>
  (<a href="simulate.txt">text</a>)</li>
<li><a href="admission.html">admission decisions (tenantctl admit, provision)</a>
  (<a href="admission.txt">text</a>)</li>
</ul>
</body></html>
H

bold "Done in $(($(date +%s) - T0)) s. Open $OUT/index.html for every report."
