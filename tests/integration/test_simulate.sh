#!/usr/bin/env bash
# test_simulate.sh - `tenantctl simulate` on examples/kueue: borrowing,
# reclaim preemption, gang admission, requeue with kept runtime, the JSON
# form, determinism, and bad input (exit 2 naming file:line: field).
. "$(dirname "$0")/lib.sh"

P="$EX/kueue/platform.yaml"
W="$EX/kueue/workloads.yaml"

expect_rc "simulate runs" 0 "$TENANTCTL" simulate -c "$P" -f "$W"
cp "$TMP/out" "$TMP/table"
expect_grep "b-pretrain borrows A100s at t=0" "$TMP/table" \
    "team-b/b-pretrain        team-b         workers: cpu=a100, nvidia.com/gpu=a100 Quota reserved in ClusterQueue team-b, borrowing in cohort gpu-pool"
expect_grep "c-eval falls through to the second flavor" "$TMP/table" \
    "team-c/c-eval            team-c         main: cpu=h100, nvidia.com/gpu=h100"
expect_grep "team-a reclaims at t=300" "$TMP/table" \
    "Preempted to accommodate a workload (team-a/a-finetune) due to reclamation within the cohort [InCohortReclamation]"
expect_grep "b-pretrain restarts when quota frees" "$TMP/table" "1500      admitted   team-b/b-pretrain"
expect_grep "the gang is admitted whole, only when all of it fits" "$TMP/table" \
    "1800      admitted   team-b/b-gang            team-b         launcher: cpu=a100; workers: cpu=h100, nvidia.com/gpu=h100"
expect_grep "the gang's placement: every pod on a node at once" "$TMP/table" \
    "placed on launcher: a100-0=1; workers: h100-0=1, h100-1=1, h100-2=1"
expect_grep "a-finetune's 4 pods share one A100 node (best fit)" "$TMP/table" \
    "Quota reserved in ClusterQueue team-a; placed on workers: a100-0=4"
expect_grep "b-pretrain keeps the 300 s it ran (3600 s total)" "$TMP/table" \
    "4800      finished   team-b/b-pretrain"
expect_grep "summary counts the preemption" "$TMP/table" \
    "team-b                3         1      0"

expect_rc "json" 0 "$TENANTCTL" simulate -c "$P" -f "$W" --format json
if python3 - "$TMP/out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["events"]
pre = [e for e in ev if e["type"] == "preempted"]
assert len(pre) == 1 and pre[0]["by"] == "team-a/a-finetune" and pre[0]["workload"] == "team-b/b-pretrain"
assert pre[0]["level"] == "InCohortReclamation"
assert ev[0]["borrowing"] is True and ev[0]["flavors"]["nvidia.com/gpu"] == "a100"
assert [e["t"] for e in ev] == sorted(e["t"] for e in ev)
assert d["queues"]["team-b"]["preemptedWorkloads"] == 1
req = [e for e in ev if e["type"] == "requeued"]
assert len(req) == 1 and req[0]["workload"] == "team-b/b-pretrain" and req[0]["t"] == 300
assert req[0]["reason"] == "Evicted by team-a/a-finetune (InCohortReclamation) at 300s; requeued"
assert ev.index(req[0]) == ev.index(pre[0]) + 1
gang = [e for e in ev if e["type"] == "admitted" and e["workload"] == "team-b/b-gang"][0]
assert gang["podSetAssignments"] == [{"name": "launcher", "flavors": {"cpu": "a100"}},
                                     {"name": "workers", "flavors": {"cpu": "h100", "nvidia.com/gpu": "h100"}}]
assert ev[0]["podSetAssignments"] == [{"name": "workers", "flavors": {"cpu": "a100", "nvidia.com/gpu": "a100"}}]
assert gang["placement"] == {"launcher": {"a100-0": 1}, "workers": {"h100-0": 1, "h100-1": 1, "h100-2": 1}}
assert ev[0]["placement"] == {"workers": {"a100-0": 1, "a100-1": 1}}
assert 0 < d["utilization"] <= 1
PY
then ok "json shape"; else not_ok "json shape"; fi

"$TENANTCTL" simulate -c "$P" -f "$W" --format json >"$TMP/run2" 2>&1
"$TENANTCTL" simulate -c "$P" -f "$W" --format json >"$TMP/run3" 2>&1
if cmp -s "$TMP/run2" "$TMP/run3"; then ok "deterministic"; else not_ok "deterministic"; fi

printf 'apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nnamespace: kueue-system\nfairSharing:\n  enable: true\n  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n' >"$TMP/fair.yaml"
"$TENANTCTL" simulate -c "$P" -c "$TMP/fair.yaml" -f "$W" --format json >"$TMP/fair1" 2>&1
"$TENANTCTL" simulate -c "$P" -c "$TMP/fair.yaml" -f "$W" --format json >"$TMP/fair2" 2>&1
if cmp -s "$TMP/fair1" "$TMP/fair2" && grep -q '"events"' "$TMP/fair1"; then ok "fair sharing (Kueue's Configuration, no metadata) runs, deterministic"; else not_ok "fair sharing run"; cat "$TMP/fair1"; fi
if cmp -s "$TMP/fair1" "$TMP/run2"; then not_ok "fair sharing changes the order"; else ok "fair sharing changes the order"; fi
printf 'apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady: {enable: true}\n' >"$TMP/wfpr.yaml"
expect_rc "Configuration fields that change semantics are refused" 2 "$TENANTCTL" simulate -c "$P" -c "$TMP/wfpr.yaml" -f "$W"
expect_grep "by name" "$TMP/err" "wfpr.yaml:3: Configuration kueue: waitForPodsReady: not supported by tenantd's queue"

expect_rc "--until stops the clock" 0 "$TENANTCTL" simulate -c "$P" -f "$W" --until 400
expect_no_grep "nothing after --until" "$TMP/out" "1500      admitted"
expect_grep "pending listed with why" "$TMP/out" "team-b/b-pretrain"
expect_grep "an evicted workload says by whom, at which level, when" "$TMP/out" \
    "team-b/b-pretrain        Evicted by team-a/a-finetune (InCohortReclamation) at 300s; requeued: couldn't assign flavors"

# Bad input: exit 2, file:line: field.
sed 's/tenantd.dev\/runtime-seconds: "1200"/tenantd.dev\/runtime-seconds: "soon"/' "$W" >"$TMP/bad1.yaml"
expect_rc "bad runtime" 2 "$TENANTCTL" simulate -c "$P" -f "$TMP/bad1.yaml"
expect_grep "bad runtime names the place" "$TMP/err" \
    "bad1.yaml:66: Workload a-finetune: metadata.annotations.tenantd.dev/runtime-seconds: must be seconds"
sed 's/        nominalQuota: 8$/        nominalQuota: 8Gx/' "$P" >"$TMP/bad2.yaml"
expect_rc "bad quota" 2 "$TENANTCTL" simulate -c "$TMP/bad2.yaml" -f "$W"
expect_grep "bad quota names the place" "$TMP/err" "bad2.yaml:"
expect_grep "bad quota names the field" "$TMP/err" "nominalQuota: \"8Gx\" is not a quantity"
sed 's/  clusterQueue: team-c/  clusterQueue: team-x/' "$P" >"$TMP/bad3.yaml"
expect_rc "LocalQueue to a missing ClusterQueue" 2 "$TENANTCTL" simulate -c "$TMP/bad3.yaml" -f "$W"
expect_grep "missing ClusterQueue message" "$TMP/err" \
    "LocalQueue team-c/team-c: spec.clusterQueue: ClusterQueue \"team-x\" does not exist"
sed 's/  queueingStrategy: StrictFIFO/  queueingStrategy: StrictFIFO\n  admissionChecks: [prov]/' "$P" >"$TMP/bad4.yaml"
expect_rc "unsupported field" 2 "$TENANTCTL" simulate -c "$TMP/bad4.yaml" -f "$W"
expect_grep "unsupported field by name" "$TMP/err" "ClusterQueue team-c: spec.admissionChecks: not supported"
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: gpu-pool}\nspec: {parentName: org}\n---\napiVersion: kueue.x-k8s.io/v1alpha1\nkind: Cohort\nmetadata: {name: org}\nspec: {parent: gpu-pool}\n' >"$TMP/cycle.yaml"
expect_rc "a cycle of cohorts" 2 "$TENANTCTL" simulate -c "$P" -c "$TMP/cycle.yaml" -f "$W"
expect_grep "the cycle named with file:line" "$TMP/err" \
    "cycle.yaml:1: Cohort gpu-pool: spec.parentName: cycle gpu-pool -> org -> gpu-pool"
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Cohort\nmetadata: {name: gpu-pool}\nspec:\n  resourceGroups:\n  - coveredResources: [cpu, nvidia.com/gpu]\n    flavors:\n    - name: a100\n      resources: [{name: cpu, nominalQuota: 96}, {name: nvidia.com/gpu, nominalQuota: 8}]\n' >"$TMP/pool.yaml"
expect_rc "a Cohort with its own quota (Kueue's v1beta1 shape) loads" 0 "$TENANTCTL" simulate -c "$P" -c "$TMP/pool.yaml" -f "$W"
expect_grep "quota is not nodes: a-finetune still reclaims the A100 nodes" "$TMP/out" \
    "300       preempted  team-b/b-pretrain"
expect_rc "missing -f" 2 "$TENANTCTL" simulate -c "$P"
expect_rc "help" 0 "$TENANTCTL" simulate --help

finish
