# test_workloads.sh - the batch queue behind the daemon: submit Kueue
# Workloads, see Admitted/Pending with Kueue's reasons and placement on
# nodes, reclaim preemption by a returning owner, `tenantctl finish`
# (kept in history, idempotent, never rerun by a resubmission), a deleted
# workload freeing quota, bad input rejected whole, state surviving a restart.
. "$(dirname "$0")/lib.sh"
start_tenantd "$TMP/data" --config "$EX/kueue/platform.yaml" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"

expect_rc "submit" 0 "$TENANTCTL" submit -f "$EX/kueue/workloads.yaml"
expect_grep "submit prints where each stands" "$TMP/out" "c-eval"
expect_rc "get workloads" 0 "$TENANTCTL" get workloads
cp "$TMP/out" "$TMP/all"
row() { grep -E "^$1 +$2 " "$TMP/all"; }
row team-a a-finetune | grep -q "Admitted.*workers: cpu=a100, nvidia.com/gpu=a100 on workers: a100-0=4" && ok "owner's workload admitted in its flavor, placed on a node" || { not_ok "a-finetune"; cat "$TMP/all"; }
row team-b b-pretrain | grep -q "Pending.*insufficient unused quota for" && ok "the borrower was reclaimed and waits, with Kueue's reason" || { not_ok "b-pretrain"; cat "$TMP/all"; }
row team-b b-gang | grep -q "Pending" && ok "the gang waits whole" || not_ok "b-gang"
expect_rc "get workloads -n" 0 "$TENANTCTL" get workloads -n team-c
expect_grep "namespace filter" "$TMP/out" "c-eval"
expect_no_grep "namespace filter excludes others" "$TMP/out" "b-gang"

# The job runner reports completions: tenantctl finish.
expect_rc "finishing a pending workload is refused" 2 "$TENANTCTL" finish b-gang -n team-b
expect_grep "says it is not running" "$TMP/err" "Workload team-b/b-gang is Pending, not Admitted"
expect_rc "finishing an unknown workload is refused" 2 "$TENANTCTL" finish nope -n team-b
expect_grep "unknown workload named" "$TMP/err" "Workload team-b/nope not found"
expect_rc "finish c-eval" 0 "$TENANTCTL" finish c-eval -n team-c
expect_grep "finish says so" "$TMP/out" "Workload team-c/c-eval finished"
"$TENANTCTL" get workloads > "$TMP/all"
row team-c c-eval | grep -q "Finished .*Finished at 20[0-9-]*T[0-9:]*Z (reported by the job runner)" && ok "c-eval is Finished, kept in history" || { not_ok "c-eval finished"; cat "$TMP/all"; }
row team-b b-gang | grep -q "Admitted.*on launcher: a100-0=1; workers: h100-0=1, h100-1=1, h100-2=1" && ok "the H100s c-eval freed admit the whole gang, placed" || { not_ok "b-gang after finish"; cat "$TMP/all"; }
expect_rc "finishing twice is a no-op" 0 "$TENANTCTL" finish c-eval -n team-c
expect_grep "no-op says so" "$TMP/out" "was already finished"
expect_rc "resubmitting (a client's retry) is accepted" 0 "$TENANTCTL" submit -f "$EX/kueue/workloads.yaml"
"$TENANTCTL" get workloads > "$TMP/all"
row team-c c-eval | grep -q "Finished" && ok "a resubmission never runs a finished workload again" || { not_ok "c-eval resubmitted"; cat "$TMP/all"; }
[ "$(grep -c '' "$TMP/all")" = 5 ] && ok "no workload is duplicated" || { not_ok "duplicates"; cat "$TMP/all"; }
expect_rc "finish --help" 0 "$TENANTCTL" finish --help

expect_rc "finish a workload (delete)" 0 "$TENANTCTL" delete workload a-finetune -n team-a
"$TENANTCTL" get workloads > "$TMP/all"
row team-b b-pretrain | grep -q "Admitted" && ok "the freed quota admits the borrower again" || { not_ok "b-pretrain after finish"; cat "$TMP/all"; }

printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: nq, namespace: team-a}\nspec:\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}]\n' > "$TMP/noqueue.yaml"
expect_rc "a workload without a queue is rejected" 2 "$TENANTCTL" submit -f "$TMP/noqueue.yaml"
expect_grep "names the field" "$TMP/err" "spec.queueName: required"
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n' > "$TMP/ns.yaml"
expect_rc "submit takes only Workloads" 2 "$TENANTCTL" submit -f "$TMP/ns.yaml"
expect_rc "deleting a ClusterQueue still in use is refused" 2 "$TENANTCTL" delete clusterqueue team-a
expect_grep "says what would break" "$TMP/err" "would break the batch queue"
"$TENANTCTL" get workloads > "$TMP/before"

stop_tenantd
start_tenantd "$TMP/data" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
"$TENANTCTL" get workloads > "$TMP/after"
if diff -u "$TMP/before" "$TMP/after" >/dev/null; then ok "the queue's state survives a restart"; else not_ok "state changed across restart"; diff -u "$TMP/before" "$TMP/after"; fi
expect_rc "submit --help" 0 "$TENANTCTL" submit --help
stop_tenantd
finish
