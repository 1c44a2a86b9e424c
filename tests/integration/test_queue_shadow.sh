# test_queue_shadow.sh - queue preemption in shadow on the running daemon:
# Kueue's example with team-a's ClusterQueue annotated
# tenantd.dev/preemption-enforcement: shadow. The returning owner would
# reclaim from the borrower; in shadow nothing is evicted, the owner waits
# saying so, explain and /metrics show the would-be preemption apart
# (mode="shadow"); an ordinary apply to enforce preempts for real.
. "$(dirname "$0")/lib.sh"
annotate() { # MODE: the example with team-a's ClusterQueue in MODE
    awk -v mode="$1" '{ print } /^kind: ClusterQueue$/ { cq = 1 }
        cq && /^  name: team-a$/ { print "  annotations: {tenantd.dev/preemption-enforcement: " mode "}"; cq = 0 }
        /^  name: / { cq = 0 }' "$EX/kueue/platform.yaml"
}
annotate shadow > "$TMP/platform.yaml"
grep -q "preemption-enforcement: shadow" "$TMP/platform.yaml" || not_ok "could not annotate the example"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
expect_rc "submit Kueue's example workloads" 0 "$TENANTCTL" submit -f "$EX/kueue/workloads.yaml"
"$TENANTCTL" get workloads > "$TMP/all"
grep -Eq "^team-b +b-pretrain +Admitted" "$TMP/all" && ok "shadow: the borrower keeps running" || { not_ok "b-pretrain"; cat "$TMP/all"; }
grep -Eq "^team-a +a-finetune +Pending .*preemption in shadow: would preempt 1 workload \(team-b/b-pretrain\)" "$TMP/all" &&
    ok "shadow: the owner waits, saying what it would have preempted" || { not_ok "a-finetune"; cat "$TMP/all"; }
expect_rc "explain the owner" 0 "$TENANTCTL" explain workload team-a/a-finetune
expect_grep "explain names the would-be preemption" "$TMP/out" "would preempt (shadow): team-b/b-pretrain"
expect_rc "explain the borrower" 0 "$TENANTCTL" explain workload team-b/b-pretrain
expect_grep "its history has it, by whom, at which level" "$TMP/out" "wouldPreempt by team-a/a-finetune (InCohortReclamation)"
curl -s --max-time 5 "$TENANTD_SERVER/metrics" > "$TMP/metrics"
expect_grep "counted apart as shadow" "$TMP/metrics" 'tenantd_queue_preemptions_total{cluster_queue="team-b",level="InCohortReclamation",mode="shadow"} 1'
expect_no_grep "nothing counted as enforced" "$TMP/metrics" 'mode="enforce"} '

# shadow -> enforce is an ordinary apply
annotate enforce | awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } /\nkind: ClusterQueue\n/ && /name: team-a\n/' > "$TMP/enforce.yaml"
expect_rc "apply the ClusterQueue with enforce" 0 "$TENANTCTL" apply -f "$TMP/enforce.yaml"
"$TENANTCTL" get workloads > "$TMP/all"
grep -Eq "^team-a +a-finetune +Admitted" "$TMP/all" && ok "enforce: the owner is admitted" || { not_ok "a-finetune after enforce"; cat "$TMP/all"; }
grep -Eq "^team-b +b-pretrain +Pending .*Evicted by team-a/a-finetune \(InCohortReclamation\)" "$TMP/all" &&
    ok "enforce: the borrower is evicted" || { not_ok "b-pretrain after enforce"; cat "$TMP/all"; }
curl -s --max-time 5 "$TENANTD_SERVER/metrics" > "$TMP/metrics"
expect_grep "the real preemption counted as enforced" "$TMP/metrics" 'tenantd_queue_preemptions_total{cluster_queue="team-b",level="InCohortReclamation",mode="enforce"} 1'
sed 's/preemption-enforcement: enforce/preemption-enforcement: audit/' "$TMP/enforce.yaml" > "$TMP/bad.yaml"
expect_rc "an unknown mode is refused at apply" 2 "$TENANTCTL" apply -f "$TMP/bad.yaml"
expect_grep "naming the annotation" "$TMP/err" "tenantd.dev/preemption-enforcement: must be enforce or shadow"
stop_tenantd
finish
