# test_gpu_used.sh - GPUs really used for right-sizing: a Workload's
# measured GPU utilization (annotation tenantd.dev/gpu-utilization, set by
# the job runner through `tenantctl finish --gpu-utilization`) becomes the
# ledger's gpu_used_milli, and right-sizing recommends from it instead of
# from the requested GPUs; without it the report says use is unknown.
. "$(dirname "$0")/lib.sh"
wl() { # NAME NAMESPACE GPUS [UTILIZATION]
    cat <<Y
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: $1
  namespace: $2
  annotations: {tenantd.dev/runtime-seconds: "3600"${4:+, tenantd.dev/gpu-utilization: \"$4\"}}
spec:
  queueName: $2
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "4", nvidia.com/gpu: "$3"}}}]}}
---
Y
}
{ wl a-train team-a 8 0.25; wl c-eval team-c 4; } > "$TMP/wl.yaml"
P=(-c "$EX/kueue/platform.yaml" -c "$EX/kueue/owners.yaml")
expect_rc "simulate into a ledger" 0 "$TENANTCTL" simulate "${P[@]}" -f "$TMP/wl.yaml" \
    --ledger "$TMP/sim" --start 2026-12-01T00:00:00Z
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(sorted(c.execute("select workload, gpu_milli, gpu_used_milli from records where kind=1").fetchall()))' \
    "$TMP/sim/ledger.db" > "$TMP/rows"
expect_grep "the measured share becomes GPUs used; unknown stays -1" "$TMP/rows" \
    "[('team-a/a-train', 8000, 2000), ('team-c/c-eval', 4000, -1)]"
expect_rc "report" 0 "$TENANTCTL" report --data "$TMP/sim" "${P[@]}" -c "$EX/costpolicy.yaml" \
    --from 2026-12-01T00:00:00Z --to 2026-12-01T02:00:00Z --by team
grep -Eq "^  a +0/8 +0/2 +- +3 " "$TMP/out" && ok "team a: 8 GPUs requested, 2 used, 3 recommended (2 x 1.2 up)" || { not_ok "team a right-sizing"; cat "$TMP/out"; }
grep -Eq "^  c +0/4 +0/4\* " "$TMP/out" && ok "team c: use unknown, the requested GPUs stand in, marked" || { not_ok "team c right-sizing"; cat "$TMP/out"; }

# the daemon: the job runner reports utilization with finish
start_tenantd "$TMP/data" --config "$EX/kueue/platform.yaml" --config "$EX/kueue/owners.yaml" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
wl a-live team-a 8 > "$TMP/live.yaml"
expect_rc "submit" 0 "$TENANTCTL" submit -f "$TMP/live.yaml"
expect_rc "a utilization above 1 is refused" 2 "$TENANTCTL" finish a-live -n team-a --gpu-utilization 1.5
expect_grep "saying what it must be" "$TMP/err" "gpuUtilization must be a fraction from 0 to 1"
expect_rc "finish with the measured utilization" 0 "$TENANTCTL" finish a-live -n team-a --gpu-utilization 0.5
expect_rc "get the stored Workload" 0 "$TENANTCTL" get workload a-live -n team-a -o json
expect_grep "the annotation is stored with the finish" "$TMP/out" '"tenantd.dev/gpu-utilization": "0.5"'
# the metering tick (every 2 s) appends the closed interval
for _ in $(seq 1 100); do
    python3 -c 'import sqlite3,sys; c=sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True); print(c.execute("select gpu_milli, gpu_used_milli from records where kind=1 and workload=?", ("team-a/a-live",)).fetchall())' \
        "$TMP/data/ledger.db" > "$TMP/rows" 2>/dev/null
    grep -q "(" "$TMP/rows" && break
    sleep 0.1
done
stop_tenantd
expect_grep "the daemon's interval record carries half of the 8 GPUs as used" "$TMP/rows" "[(8000, 4000)]"
finish
