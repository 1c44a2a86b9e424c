# test_explain_workload.sh - "why is my job pending, who preempted it?":
# `tenantctl explain workload` on the running batch queue with Kueue's
# example (borrowing, reclaim, a gang): the true cause, the position in the
# ClusterQueue with the workloads ahead, the preemptor and level, the
# ClusterQueue's quota; a tenant's key sees another tenant's workloads only
# as counts and cannot explain them.
. "$(dirname "$0")/lib.sh"
{ cat "$EX/kueue/platform.yaml"; cat <<Y
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-b}
spec: {namespaces: [team-b], apiKeys: [{sha256: "$(sha key-team-b)"}]}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec: {namespaces: [team-a], apiKeys: [{sha256: "$(sha key-team-a)"}]}
Y
} > "$TMP/platform.yaml"
printf 'admin-token-0123456789\n' > "$TMP/admin"
printf 'key-team-b\n' > "$TMP/b.key"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --admin-token-file "$TMP/admin" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
ADM=(--token-file "$TMP/admin")
expect_rc "submit Kueue's example workloads" 0 "$TENANTCTL" submit -f "$EX/kueue/workloads.yaml" "${ADM[@]}"

expect_rc "explain the reclaimed borrower" 0 "$TENANTCTL" explain workload team-b/b-pretrain "${ADM[@]}"
expect_grep "pending with Kueue's reason" "$TMP/out" "team-b/b-pretrain: Pending in ClusterQueue team-b"
expect_grep "the true cause: evicted by the returning owner" "$TMP/out" "Evicted by team-a/a-finetune (InCohortReclamation)"
expect_grep "history: admitted while borrowing" "$TMP/out" "admitted  workers: cpu=a100, nvidia.com/gpu=a100 (borrowing)"
expect_grep "history: preempted by whom, at which level" "$TMP/out" "preempted by team-a/a-finetune (InCohortReclamation)"
expect_grep "first in its ClusterQueue" "$TMP/out" "position:   1 of 2 pending in team-b"
expect_rc "explain the gang behind it" 0 "$TENANTCTL" explain workload b-gang -n team-b "${ADM[@]}"
expect_grep "second, with the workload ahead named" "$TMP/out" "position:   2 of 2 pending in team-b"
expect_grep "the one ahead" "$TMP/out" "ahead:    team-b/b-pretrain (priority 100)"
expect_rc "explain the owner" 0 "$TENANTCTL" explain workload team-a/a-finetune "${ADM[@]}"
expect_grep "admitted, placed" "$TMP/out" "placement:  workers: a100-0=4"
expect_grep "whom it preempted" "$TMP/out" "preempted:  team-b/b-pretrain"
expect_grep "its ClusterQueue's quota" "$TMP/out" "nvidia.com/gpu     8 / 8 / 0; requests 8"

# team-b's own key: its workloads, and team-a's only as "another tenant's"
expect_rc "team-b's key explains its workload" 0 "$TENANTCTL" explain workload team-b/b-pretrain --token-file "$TMP/b.key"
expect_grep "the preemptor of another tenant is not named" "$TMP/out" "preempted by another tenant's workload (InCohortReclamation)"
expect_no_grep "nothing of team-a leaks" "$TMP/out" "a-finetune"
expect_rc "team-b's key lists its workloads" 0 "$TENANTCTL" get workloads --token-file "$TMP/b.key"
expect_grep "the eviction reason is there" "$TMP/out" "Evicted by another tenant's workload (InCohortReclamation)"
expect_no_grep "but names nothing of team-a" "$TMP/out" "a-finetune"
expect_rc "team-b's key lists its namespace" 0 "$TENANTCTL" get workloads -n team-b --token-file "$TMP/b.key"
expect_grep "with -n the eviction reason is there" "$TMP/out" "Evicted by another tenant's workload (InCohortReclamation)"
expect_no_grep "with -n it names nothing of team-a either" "$TMP/out" "a-finetune"
awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } /namespace: team-b\n/' "$EX/kueue/workloads.yaml" > "$TMP/b-wls.yaml"
expect_rc "team-b reads its Workload objects" 0 "$TENANTCTL" get workloads -n team-b -o json --token-file "$TMP/b.key"
expect_grep "their recorded status keeps the eviction" "$TMP/out" "Evicted by another tenant's workload"
expect_no_grep "but names nothing of team-a" "$TMP/out" "a-finetune"
expect_rc "team-b resubmits its workloads (a retry)" 0 "$TENANTCTL" submit -f "$TMP/b-wls.yaml" --token-file "$TMP/b.key"
expect_grep "the answer shows the eviction" "$TMP/out" "another tenant's workload"
expect_no_grep "the submit answer names nothing of team-a" "$TMP/out" "a-finetune"
expect_rc "team-b's key cannot explain team-a's workload" 2 "$TENANTCTL" explain workload team-a/a-finetune --token-file "$TMP/b.key"
expect_grep "403" "$TMP/err" "HTTP 403"
expect_rc "json output" 0 "$TENANTCTL" explain workload team-b/b-gang -o json "${ADM[@]}"
expect_grep "json position" "$TMP/out" '"position": 2'
expect_rc "an unknown workload is named" 2 "$TENANTCTL" explain workload team-b/nope "${ADM[@]}"
expect_grep "not found" "$TMP/err" "Workload team-b/nope not found"
expect_rc "get clusterqueues shows Kueue's status columns" 0 "$TENANTCTL" get clusterqueues "${ADM[@]}"
grep -Eq "^team-b +gpu-pool +2 +0 +0/16 \(0\)" "$TMP/out" && ok "team-b: 2 pending, none admitted, 0 of 16 GPUs" || { not_ok "get cq"; cat "$TMP/out"; }
grep -Eq "^team-a +gpu-pool +0 +1 +8/8 \(0\)" "$TMP/out" && ok "team-a: 1 admitted, 8 of 8 GPUs" || { not_ok "get cq team-a"; cat "$TMP/out"; }
expect_rc "get cq -o json" 0 "$TENANTCTL" get cq team-a -o json "${ADM[@]}"
expect_grep "status in the object" "$TMP/out" '"admittedWorkloads": 1'
# Bad flags and arguments of every explain verb: exit 2, one line in one
# style ("tenantctl explain SUBJECT: WHAT; see --help"), nothing asked.
while IFS='|' read -r what args want; do
    # shellcheck disable=SC2086
    expect_rc "explain $what is bad input" 2 "$TENANTCTL" explain $args
    [ "$(wc -l < "$TMP/err")" -eq 1 ] && grep -qxF -- "$want" "$TMP/err" && ok "explain $what: $want" ||
        { not_ok "explain $what: want '$want'"; cat "$TMP/err"; }
done <<'ROWS'
workload unknown flag|workload team-b/b-gang --bogus|tenantctl explain workload: unknown or incomplete flag "--bogus"; see --help
workload flag without value|workload team-b/b-gang -n|tenantctl explain workload: unknown or incomplete flag "-n"; see --help
workload no name|workload|tenantctl explain workload: give one [NS/]NAME; see --help
workload two names|workload a b|tenantctl explain workload: give one [NS/]NAME; see --help
workload bad -o|workload team-b/b-gang -o yaml|tenantctl explain workload: -o must be table or json; see --help
request unknown flag|request --nope|tenantctl explain request: unknown or incomplete flag "--nope"; see --help
request argument|request extra|tenantctl explain request: unexpected argument; see --help
request bad -o|request -o xml|tenantctl explain request: -o must be table or json; see --help
pod unknown flag|pod --zzz|tenantctl explain pod: unknown or incomplete flag "--zzz"; see --help
tenant unknown flag|--zz|tenantctl explain: unknown or incomplete flag "--zz"; see --help
ROWS
stop_tenantd
finish
