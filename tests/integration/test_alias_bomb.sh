# test_alias_bomb.sh - issue 17: YAML alias bombs posted to the admin
# listener, by a tenant's key to POST /v1/workloads and by the admin to
# POST /v1/apply. Each is refused (400, a message naming the line),
# nothing is stored, tenantd's peak RSS (VmHWM) barely moves, and the
# daemon and the gateway still answer. Then the worst body the admin
# endpoint accepts (3 MiB, aliases at the budget) is parsed while
# /healthz and another tenant's submit are answered at once: the parse
# runs on a prepare thread, not on the loop that serves them. tenantd runs
# with one admin loop, where everything else shares the main loop.
#
# On code that lets libfyaml expand aliases, the 5-level bomb (475 bytes)
# took 665 MB and 1.7 s and the 10-level one 24 GB: a watchdog kills
# tenantd past WATCH_MB of RSS, and the 10-level bomb is only sent once
# the 5-level one was refused within bounds.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; exit 1; }

ADMIN="admin-token-$RANDOM$RANDOM$RANDOM-long"
KEY_A="alpha-key-$RANDOM$RANDOM"
KEY_B="beta-key-$RANDOM$RANDOM"
printf '%s\n' "$ADMIN" > "$TMP/admin"
cat > "$TMP/tenants.yaml" <<EOF
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [team-a]
  labels: {team: a, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha "$KEY_A")"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  namespaces: [team-b]
  labels: {team: b, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha "$KEY_B")"}]
EOF

# bomb LEVELS: a Workload whose spec holds x0 (ten scalars) and LEVELS
# lists of ten aliases of the list before: 10^(LEVELS+1) scalars once
# expanded. 5 levels is the 475-byte Workload of the issue.
bomb() {
    python3 - "$1" <<'PY'
import sys
levels = int(sys.argv[1])
s = ("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: bomb, namespace: team-a}\n"
     "spec:\n  queueName: team-a\n  podSets: [{name: main, count: 1}]\n  priorityClassName: default\n"
     "  x0: &a0 [x,x,x,x,x,x,x,x,x,x]\n")
for l in range(1, levels + 1):
    s += "  x%d: &a%d [%s]\n" % (l, l, ",".join(["*a%d" % (l - 1)] * 10))
sys.stdout.write(s)
PY
}
bomb 5 > "$TMP/bomb5.yaml"
bomb 10 > "$TMP/bomb10.yaml"
[ "$(wc -c < "$TMP/bomb5.yaml")" = 475 ] && ok "the 5-level bomb is the issue's 475 bytes" || not_ok "bomb5 is $(wc -c < "$TMP/bomb5.yaml") bytes"
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: beta-job, namespace: team-b}\nspec:\n  queueName: team-b\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}]\n' > "$TMP/wl-b.yaml"

start_tenantd "$TMP/data" --config "$EX/kueue/platform.yaml" --config "$TMP/tenants.yaml" \
    --admin-token-file "$TMP/admin" --admin-threads 1 || { finish; exit 1; }
BASE="http://127.0.0.1:$TD_PORT"

kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$TD_PID/status" 2>/dev/null; }
WATCH_MB=${WATCH_MB:-2048}
(
    limit=$(($(kb VmRSS) + WATCH_MB * 1024))
    while kill -0 "$TD_PID" 2>/dev/null; do
        rss=$(kb VmRSS)
        if [ -n "$rss" ] && [ "$rss" -gt "$limit" ]; then
            echo "$rss" > "$TMP/killed"
            kill -9 "$TD_PID"
            break
        fi
        sleep 0.05
    done
) &
PIDS+=("$!")

# post CREDENTIAL PATH FILE OUT: prints the status and the seconds taken
post() {
    curl -s --max-time 60 -o "$4" -w '%{http_code} %{time_total}' -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/yaml' -H 'X-Tenantd-Filename: bomb.yaml' \
        --data-binary @"$3" "$BASE$2"
}
# one warm-up submit, so that the baseline holds a commit's memory
read -r code _ < <(post "$KEY_B" /v1/workloads "$TMP/wl-b.yaml" "$TMP/warm")
[ "$code" = 200 ] && ok "a tenant's ordinary submit: 200" || { not_ok "warm-up submit: $code"; cat "$TMP/warm"; }
HWM0=$(kb VmHWM)
HWM_BOUND_KB=$((64 * 1024)) # a refused bomb costs ~2 MB (its 10,000 copies)

bombs_ok=1
round() { # LEVELS
    local f="$TMP/bomb$1.yaml" code secs
    read -r code secs < <(post "$KEY_A" /v1/workloads "$f" "$TMP/t$1")
    if [ "$code" = 400 ] && grep -qF 'bomb.yaml:9: aliases are not accepted here (*a0)' "$TMP/t$1"; then
        ok "$1 levels to /v1/workloads with a tenant's key: 400, aliases not accepted, line 9 (${secs} s)"
    else
        not_ok "$1 levels, tenant: $code in ${secs:-?} s: $(head -c 300 "$TMP/t$1")"; bombs_ok=0
    fi
    read -r code secs < <(post "$ADMIN" /v1/apply "$f" "$TMP/a$1")
    if [ "$code" = 400 ] && grep -qF 'bomb.yaml:11: excessive aliasing' "$TMP/a$1"; then
        ok "$1 levels to /v1/apply with the admin token: 400, excessive aliasing at line 11 (${secs} s)"
    else
        not_ok "$1 levels, admin: $code in ${secs:-?} s: $(head -c 300 "$TMP/a$1")"; bombs_ok=0
    fi
    local hwm
    hwm=$(kb VmHWM)
    if [ -n "$hwm" ] && [ $((hwm - HWM0)) -lt "$HWM_BOUND_KB" ]; then
        ok "after the $1-level bombs tenantd's peak RSS grew $(((hwm - HWM0) / 1024)) MB (bound $((HWM_BOUND_KB / 1024)) MB; VmHWM $((hwm / 1024)) MB)"
    else
        not_ok "after the $1-level bombs: VmHWM ${hwm:-gone} kB, was $HWM0 kB$([ -s "$TMP/killed" ] && echo ", killed by the watchdog at $(cat "$TMP/killed") kB RSS")"
        bombs_ok=0
    fi
}
round 5
if [ "$bombs_ok" = 1 ]; then round 10; else not_ok "10 levels not sent: the 5-level bomb was not refused within bounds"; fi

code=$(curl -s --max-time 10 -o "$TMP/objs" -w '%{http_code}' -H "Authorization: Bearer $ADMIN" "$BASE/v1/objects?kind=Workload&namespace=team-a")
[ "$code" = 200 ] && ! grep -q '"bomb"' "$TMP/objs" && ok "nothing stored: team-a has no Workload bomb" || not_ok "objects: $code $(head -c 300 "$TMP/objs")"
code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$BASE/healthz")
[ "$code" = 200 ] && ok "the daemon answers /healthz" || not_ok "healthz after the bombs: $code"
code=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$TD_DATA_PORT/v1/models")
[ "$code" != 000 ] && ok "the gateway answers ($code)" || not_ok "the gateway does not answer"

# Aliases still work for the admin's own configs, merge keys included.
cat > "$TMP/anchors.yaml" <<'Y'
apiVersion: v1
kind: Namespace
metadata:
  name: scratch-a
  labels: &labels {team: a, tier: std}
  annotations: *labels
---
apiVersion: v1
kind: Namespace
metadata:
  name: scratch-b
  annotations: &base {team: b, tier: std}
  labels:
    <<: *base
    tier: gold
Y
read -r code _ < <(post "$ADMIN" /v1/apply "$TMP/anchors.yaml" "$TMP/anch")
[ "$code" = 200 ] && ok "an admin's apply with anchors, an alias and a merge key: 200" || not_ok "anchors: $code $(head -c 300 "$TMP/anch")"
curl -s --max-time 10 -H "Authorization: Bearer $ADMIN" "$BASE/v1/objects?kind=Namespace&name=scratch-b" > "$TMP/nsb"
python3 - "$TMP/nsb" <<'P' && ok "the merge key's keys are there, the explicit one wins" || not_ok "scratch-b: $(head -c 300 "$TMP/nsb")"
import json, sys
md = json.load(open(sys.argv[1]))["items"][0]["metadata"]
assert md["labels"] == {"team": "b", "tier": "gold"}, md
assert md["annotations"] == {"team": "b", "tier": "std"}, md
P
sed 's/^metadata: {name: beta-job, namespace: team-b}$/metadata: {name: w-alias, namespace: team-a, labels: \&l {a: b}, annotations: *l}/' "$TMP/wl-b.yaml" | sed 's/queueName: team-b/queueName: team-a/' > "$TMP/wl-alias.yaml"
read -r code _ < <(post "$KEY_A" /v1/workloads "$TMP/wl-alias.yaml" "$TMP/wlal")
[ "$code" = 400 ] && grep -qF 'bomb.yaml:3: aliases are not accepted here (*l)' "$TMP/wlal" && ok "any alias from a tenant's key, in an ordinary Workload: 400 naming it" || not_ok "tenant alias: $code $(head -c 300 "$TMP/wlal")"

# The worst body /v1/apply accepts: 3 MiB, a list of 1.57 million values
# used three more times (the budget's edge). While it is parsed, the
# admin listener's /healthz and beta's submit are answered at once.
python3 - > "$TMP/worst.yaml" <<'PY'
limit = 3 << 20
head, tail = "a: &a [", "]\nb: [*a, *a, *a]\n"
n = (limit - len(head) - len(tail) + 1) // 2
import sys
sys.stdout.write(head + ",".join(["1"] * n) + tail)
PY
HWM1=$(kb VmHWM)
post "$ADMIN" /v1/apply "$TMP/worst.yaml" "$TMP/worst.out" > "$TMP/worst.code" &
WPID=$!
sleep 0.3
h=$(curl -s --max-time 30 -o /dev/null -w '%{http_code} %{time_total}' "$BASE/healthz")
s=$(post "$KEY_B" /v1/workloads "$TMP/wl-b.yaml" "$TMP/during")
wait "$WPID"
read -r wcode wsecs < "$TMP/worst.code"
read -r hcode hsecs <<<"$h"
read -r scode ssecs <<<"$s"
# it was refused after the parse (the text is no Kubernetes object), not by the budget
[ "$wcode" = 400 ] && ! grep -q "excessive aliasing" "$TMP/worst.out" && ok "the 3 MiB body at the alias budget is parsed (then refused as no object: $(head -c 120 "$TMP/worst.out" | tr -d '\n'); ${wsecs} s)" || not_ok "worst: $wcode $(head -c 300 "$TMP/worst.out")"
hwm=$(kb VmHWM)
echo "# worst accepted parse: ${wsecs} s for the request, tenantd's peak RSS $((${hwm:-0} / 1024)) MB (was $((HWM1 / 1024)) MB)"
python3 - "$hcode" "$hsecs" "$scode" "$ssecs" "$wsecs" <<'P' && ok "during its parse: /healthz in ${hsecs} s, beta's submit in ${ssecs} s (the apply took ${wsecs} s)" || not_ok "during the parse: healthz $hcode in $hsecs s, submit $scode in $ssecs s, apply $wsecs s"
import sys
hc, hs, sc, ss, ws = sys.argv[1], float(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5])
assert hc == "200" and sc == "200", (hc, sc)
# both answered within 1 s, while the apply (started 0.3 s before) was still out
assert hs < 1.0 and ss < 1.0, (hs, ss)
assert ws > 0.3 + hs + ss, "the parse ended before they were asked: nothing measured"
P
[ ! -s "$TMP/killed" ] && ok "the watchdog never fired" || not_ok "the watchdog killed tenantd at $(cat "$TMP/killed") kB"
stop_tenantd
finish
