# test_simulate_live.sh - `tenantctl simulate --server`: a dry run of new
# workloads from the running tenantd's live queues (its admitted and
# pending workloads as the starting state); nothing changes on the server;
# the timeline prints from the moment the new workloads arrive.
. "$(dirname "$0")/lib.sh"
printf 'admin-token-0123456789\n' > "$TMP/admin"
start_tenantd "$TMP/data" --config "$EX/kueue/platform.yaml" --admin-token-file "$TMP/admin" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT" TENANTD_TOKEN_FILE="$TMP/admin"
expect_rc "submit Kueue's example" 0 "$TENANTCTL" submit -f "$EX/kueue/workloads.yaml"
"$TENANTCTL" get workloads -o json > "$TMP/before"
cat > "$TMP/new.yaml" <<'Y'
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: c-sweep
  namespace: team-c
  annotations: {tenantd.dev/submit-at-seconds: "60", tenantd.dev/runtime-seconds: "600"}
spec:
  queueName: team-c
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: "4", nvidia.com/gpu: "4"}}}]}}
Y
expect_rc "simulate from the live state" 0 "$TENANTCTL" simulate --server "$TENANTD_SERVER" -f "$TMP/new.yaml"
expect_grep "it says what it started from" "$TMP/err" "2 admitted workloads"
expect_grep "... and the pending ones" "$TMP/err" "2 pending"
grep -Eq "^60 +admitted +team-c/c-sweep" "$TMP/out" && ok "the new workload is admitted 60 s after now" || { not_ok "c-sweep"; cat "$TMP/out"; }
[ "$(awk 'NR > 1 && $1 ~ /^[0-9.]+$/ && $1 + 0 < 60' "$TMP/out" | wc -l)" = 0 ] && ok "nothing of the live history is printed" || { not_ok "history printed"; cat "$TMP/out"; }
expect_rc "with --live-runtime the live workloads finish in the simulation" 0 "$TENANTCTL" simulate --server "$TENANTD_SERVER" -f "$TMP/new.yaml" --live-runtime 300 --format json
expect_grep "a live workload finishes at 300 s" "$TMP/out" '"workload": "team-a/a-finetune"'
expect_rc "table output of the same" 0 "$TENANTCTL" simulate --server "$TENANTD_SERVER" -f "$TMP/new.yaml" --live-runtime 300
grep -Eq "^300 +finished +team-c/c-eval +team-c +main: cpu=h100, nvidia.com/gpu=h100" "$TMP/out" &&
    ok "a live workload keeps its recorded flavors (c-eval runs on H100, as live)" || { not_ok "c-eval flavors"; cat "$TMP/out"; }
grep -Eq "^[0-9.]+ +admitted +team-b/b-gang" "$TMP/out" && ! grep -Eq "^(0|60) +admitted +team-b/b-gang" "$TMP/out" &&
    ok "the live pending gang waits until the live workloads finish" || { not_ok "b-gang timing"; cat "$TMP/out"; }
"$TENANTCTL" get workloads -o json > "$TMP/after"
cmp -s "$TMP/before" "$TMP/after" && ok "the dry run changed nothing on the server" || { not_ok "server state changed"; diff "$TMP/before" "$TMP/after" | head; }
expect_rc "a bad workload file is exit 2 naming it" 2 "$TENANTCTL" simulate --server "$TENANTD_SERVER" -f /nonexistent.yaml
printf 'nobody-0123456789\n' > "$TMP/bad"
expect_rc "without the admin token it is refused" 2 "$TENANTCTL" simulate --server "$TENANTD_SERVER" -f "$TMP/new.yaml" --token-file "$TMP/bad"
stop_tenantd
finish
