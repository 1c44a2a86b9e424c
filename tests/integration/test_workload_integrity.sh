# test_workload_integrity.sh - what a tenant's own key can do to the batch
# queue (issue 17, items 3 and 5), with two tenants sharing a cohort:
# resubmitting an admitted Workload with larger pod sets (refused, Kueue's
# "field is immutable", its admission and the ClusterQueue's usage as they
# were, the other tenant's job admitted); a pending one resubmitted with a
# changed spec (re-queued with it, in its place); a client-written
# tenantd.dev/submitted-at-ns (ignored: the server stamps it, so "1" jumps
# no queue); spec.priority (from the class only; a disagreeing or wrapped
# value refused in kube-apiserver's words; a class the namespace may not
# use refused as kube-apiserver's quota admission does).
. "$(dirname "$0")/lib.sh"

KEY_A="alpha-key-$RANDOM$RANDOM" # tenant alpha, namespace team-a
KEY_B="beta-key-$RANDOM$RANDOM"  # tenant beta, namespace team-b
cat > "$TMP/platform.yaml" <<EOF
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: gpu}
---
# alpha owns 4 GPUs and may borrow; beta owns 96 and lends them while idle
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: alpha}
spec:
  namespaceSelector: {}
  cohort: pool
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: beta}
spec:
  namespaceSelector: {}
  cohort: pool
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors: [{name: gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 96}]}]
---
# one queue both tenants share, 2 GPUs, no cohort: who goes first
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: shared}
spec:
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: gpu, resources: [{name: cpu, nominalQuota: 2}]}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: alpha, namespace: team-a}
spec: {clusterQueue: alpha}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: beta, namespace: team-b}
spec: {clusterQueue: beta}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: shared, namespace: team-a}
spec: {clusterQueue: shared}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: shared, namespace: team-b}
spec: {clusterQueue: shared}
---
# urgent classes: only a namespace with a quota for them may use them, as
# kube-apiserver's ResourceQuota admission with limitedResources has it
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: urgent}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: wurgent}
value: 2000
---
apiVersion: tenantd.dev/v1alpha1
kind: AdmissionPolicy
metadata: {name: default}
spec:
  resourceQuota:
    limitedResources:
    - resource: pods
      matchScopes: [{scopeName: PriorityClass, operator: In, values: [urgent, wurgent]}]
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: urgent-pods, namespace: team-b}
spec:
  hard: {pods: "10"}
  scopeSelector:
    matchExpressions: [{scopeName: PriorityClass, operator: In, values: [urgent, wurgent]}]
---
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

# workload NAME NS QUEUE RESOURCE AMOUNT [ANNOTATIONS] [SPEC EXTRA]
workload() {
    printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: %s, namespace: %s, annotations: {%s}}\nspec:\n  queueName: %s\n%b  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {%s: "%s"}}}]}}}]\n' \
        "$1" "$2" "${6:-}" "$3" "${7:-}" "$4" "$5"
}

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
BASE="http://127.0.0.1:$TD_PORT"
# submit KEY FILE OUT -> prints the HTTP status
submit() { curl -s -o "$3" -w '%{http_code}' -H "Authorization: Bearer $1" --data-binary @"$2" "$BASE/v1/workloads"; }
state() { # KEY NS NAME -> Admitted|Pending|Finished
    curl -s -H "Authorization: Bearer $1" "$BASE/v1/workloads?namespace=$2" |
        jq -r --arg n "$3" '.items[] | select(.name == $n) | .state'
}
gpu_usage() { # CQ -> "used borrowed"
    curl -s "$BASE/v1/objects?kind=ClusterQueue&name=$1" |
        jq -r '.items[0].status.usage["nvidia.com/gpu"] | "\(.used) \(.borrowed)"'
}

# ---- item 3: an admitted Workload's pod sets are immutable ----
workload train team-a alpha nvidia.com/gpu 1 > "$TMP/small.yaml"
workload train team-a alpha nvidia.com/gpu 100 > "$TMP/big.yaml"
code=$(submit "$KEY_A" "$TMP/small.yaml" "$TMP/r")
[ "$code" = 200 ] && [ "$(state "$KEY_A" team-a train)" = Admitted ] &&
    ok "alpha's 1-GPU job is admitted" || { not_ok "small train: $code"; cat "$TMP/r"; }
code=$(submit "$KEY_A" "$TMP/small.yaml" "$TMP/r")
[ "$code" = 200 ] && [ "$(state "$KEY_A" team-a train)" = Admitted ] &&
    ok "an identical resubmission is accepted and keeps its admission" || { not_ok "same again: $code"; cat "$TMP/r"; }
code=$(submit "$KEY_A" "$TMP/big.yaml" "$TMP/r")
[ "$code" = 422 ] && ok "resubmitting it with 100 GPUs is refused (422)" || { not_ok "1 -> 100 GPUs: $code"; cat "$TMP/r"; }
expect_grep "in Kueue's words" "$TMP/r" 'Workload.kueue.x-k8s.io \"train\" is invalid: spec.podSets'
expect_grep "naming the field that changed and the rule" "$TMP/r" 'spec.podSets[0].template.spec.containers[0].resources.requests[nvidia.com/gpu]: Invalid value: \"100\": field is immutable'
u=$(gpu_usage alpha)
[ "$u" = "1 0" ] && ok "the ClusterQueue still reports 1 GPU used, none borrowed" || not_ok "alpha usage after the refused resubmission: '$u', want '1 0'"
curl -s -H "Authorization: Bearer $KEY_A" "$BASE/v1/objects?kind=Workload&namespace=team-a&name=train" > "$TMP/stored"
jq -e '.items[0].spec.podSets[0].template.spec.containers[0].resources.requests["nvidia.com/gpu"] == "1"' "$TMP/stored" >/dev/null &&
    ok "nothing of the refused resubmission was stored" || { not_ok "stored spec changed"; cat "$TMP/stored"; }
workload other team-b beta nvidia.com/gpu 90 > "$TMP/other.yaml"
code=$(submit "$KEY_B" "$TMP/other.yaml" "$TMP/r")
[ "$code" = 200 ] && [ "$(state "$KEY_B" team-b other)" = Admitted ] &&
    ok "the other tenant's 90-GPU job is admitted" || { not_ok "beta's job: $code $(state "$KEY_B" team-b other)"; cat "$TMP/r"; }
# the same through the admin's apply: Kueue refuses the update for everyone
curl -s -o "$TMP/r" -w '%{http_code}' -H "X-Tenantd-Filename: big.yaml" --data-binary @"$TMP/big.yaml" "$BASE/v1/apply" > "$TMP/code"
[ "$(cat "$TMP/code")" = 422 ] && ok "apply of the changed pod sets is refused as well (422)" || { not_ok "apply big: $(cat "$TMP/code")"; cat "$TMP/r"; }
# a finished one stays as it ran (its bill is its pod sets)
curl -s -o /dev/null -X POST -H "Authorization: Bearer $KEY_A" "$BASE/v1/workloads/finish?namespace=team-a&name=train"
workload train team-a alpha nvidia.com/gpu 0 > "$TMP/zero.yaml"
code=$(submit "$KEY_A" "$TMP/zero.yaml" "$TMP/r")
[ "$code" = 422 ] && ok "a finished Workload's pod sets cannot be rewritten either (422)" || { not_ok "finished -> 0 GPUs: $code"; cat "$TMP/r"; }

# a pending one may change: re-queued with its new spec, in its place
workload wide team-a alpha nvidia.com/gpu 50 > "$TMP/wide.yaml"
code=$(submit "$KEY_A" "$TMP/wide.yaml" "$TMP/r")
[ "$code" = 200 ] && [ "$(state "$KEY_A" team-a wide)" = Pending ] && ok "alpha's 50-GPU job waits" || { not_ok "wide: $code $(state "$KEY_A" team-a wide)"; cat "$TMP/r"; }
q0=$(curl -s "$BASE/v1/objects?kind=Workload&namespace=team-a&name=wide" | jq -r '.items[0].metadata.annotations["tenantd.dev/submitted-at-ns"]')
workload wide team-a alpha nvidia.com/gpu 4 > "$TMP/narrow.yaml"
code=$(submit "$KEY_A" "$TMP/narrow.yaml" "$TMP/r")
[ "$code" = 200 ] && [ "$(state "$KEY_A" team-a wide)" = Admitted ] &&
    ok "the pending job resubmitted with 4 GPUs is re-queued with them and admitted" || { not_ok "narrowed: $code $(state "$KEY_A" team-a wide)"; cat "$TMP/r"; }
q1=$(curl -s "$BASE/v1/objects?kind=Workload&namespace=team-a&name=wide" | jq -r '.items[0].metadata.annotations["tenantd.dev/submitted-at-ns"]')
[ -n "$q0" ] && [ "$q0" = "$q1" ] && ok "a resubmission keeps the stored submission stamp" || not_ok "stamp $q0 -> $q1"

# ---- item 5: the server stamps submission time ----
workload hog team-a shared cpu 2 > "$TMP/hog.yaml"
workload b-first team-b shared cpu 2 > "$TMP/bfirst.yaml"
workload a-jumper team-a shared cpu 2 '"tenantd.dev/submitted-at-ns": "1"' > "$TMP/jumper.yaml"
submit "$KEY_A" "$TMP/hog.yaml" "$TMP/r" >/dev/null
submit "$KEY_B" "$TMP/bfirst.yaml" "$TMP/r" >/dev/null
code=$(submit "$KEY_A" "$TMP/jumper.yaml" "$TMP/r")
[ "$code" = 200 ] && ok "a Workload with its own submitted-at annotation is taken" || { not_ok "jumper: $code"; cat "$TMP/r"; }
stamp=$(curl -s "$BASE/v1/objects?kind=Workload&namespace=team-a&name=a-jumper" | jq -r '.items[0].metadata.annotations["tenantd.dev/submitted-at-ns"]')
[ "$stamp" != 1 ] && [ "${#stamp}" -ge 19 ] && ok "the server stamped its own submission time ($stamp), not \"1\"" || not_ok "stored stamp: $stamp"
workload early-end team-a alpha nvidia.com/gpu 1 '"tenantd.dev/finished-at-ns": "2"' > "$TMP/early.yaml"
submit "$KEY_A" "$TMP/early.yaml" "$TMP/r" >/dev/null
curl -s -o /dev/null -X POST -H "Authorization: Bearer $KEY_A" "$BASE/v1/workloads/finish?namespace=team-a&name=hog"
# (that finish ran a pass after the one of early-end's submission)
[ "$(state "$KEY_A" team-a early-end)" = Admitted ] && ok "a client's finished-at is ignored too: the job runs" || not_ok "early-end: $(state "$KEY_A" team-a early-end)"
[ "$(state "$KEY_B" team-b b-first)" = Admitted ] && [ "$(state "$KEY_A" team-a a-jumper)" = Pending ] &&
    ok "the freed quota goes to beta's earlier job: \"1\" jumps no queue" ||
    not_ok "after hog: b-first $(state "$KEY_B" team-b b-first), a-jumper $(state "$KEY_A" team-a a-jumper)"

# ---- item 5: priority comes from the class ----
workload wrap team-a shared cpu 1 "" '  priority: -2147483649\n' > "$TMP/wrap.yaml"
code=$(submit "$KEY_A" "$TMP/wrap.yaml" "$TMP/r")
case "$code" in 4??) ok "spec.priority -2147483649 is refused ($code)" ;; *) not_ok "wrapped priority: $code"; cat "$TMP/r" ;; esac
expect_grep "naming field and value" "$TMP/r" "spec.priority"
expect_grep "naming the value" "$TMP/r" "-2147483649"
expect_no_grep "never wrapped" "$TMP/r" "2147483647,"
workload high team-a shared cpu 1 "" '  priority: 1000000\n' > "$TMP/high.yaml"
code=$(submit "$KEY_A" "$TMP/high.yaml" "$TMP/r")
[ "$code" = 403 ] && ok "a priority that disagrees with the class is refused (403)" || { not_ok "priority 1000000: $code"; cat "$TMP/r"; }
expect_grep "in kube-apiserver's words" "$TMP/r" "the integer value of priority (1000000) must not be provided in workload spec; priority admission controller computed 0 from the given PriorityClass name"
curl -s "$BASE/v1/workloads?namespace=team-a" | jq -r '.items[].name' > "$TMP/names"
expect_no_grep "nothing of a refused submission is stored" "$TMP/names" "wrap"
expect_no_grep "nor of the other" "$TMP/names" "high"

# a class the namespace may not use
workload pc team-a shared cpu 1 "" '  priorityClassName: urgent\n' > "$TMP/pc-a.yaml"
code=$(submit "$KEY_A" "$TMP/pc-a.yaml" "$TMP/r")
[ "$code" = 403 ] && ok "alpha may not use the limited PriorityClass (403)" || { not_ok "urgent for alpha: $code"; cat "$TMP/r"; }
expect_grep "with kube-apiserver's quota words" "$TMP/r" "insufficient quota to match these scopes: [{PriorityClass In [urgent wurgent]}]"
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: wpc, namespace: team-a, labels: {kueue.x-k8s.io/priority-class: wurgent}}\nspec:\n  queueName: shared\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}]\n' > "$TMP/wpc-a.yaml"
code=$(submit "$KEY_A" "$TMP/wpc-a.yaml" "$TMP/r")
[ "$code" = 403 ] && ok "nor the limited WorkloadPriorityClass by its label (403)" || { not_ok "wurgent for alpha: $code"; cat "$TMP/r"; }
workload pc team-b shared cpu 1 "" '  priorityClassName: urgent\n' > "$TMP/pc-b.yaml"
code=$(submit "$KEY_B" "$TMP/pc-b.yaml" "$TMP/r")
[ "$code" = 200 ] && jq -e '.workloads[0].priority == 1000' "$TMP/r" >/dev/null &&
    ok "beta, whose namespace has the quota, gets the class's priority 1000" || { not_ok "urgent for beta: $code"; cat "$TMP/r"; }
workload pc2 team-b shared cpu 1 "" '  priorityClassName: urgent\n  priority: 1000\n' > "$TMP/pc2-b.yaml"
code=$(submit "$KEY_B" "$TMP/pc2-b.yaml" "$TMP/r")
[ "$code" = 200 ] && ok "a spec.priority equal to the class's value is taken" || { not_ok "urgent + 1000: $code"; cat "$TMP/r"; }
workload nope team-a shared cpu 1 "" '  priorityClassName: nope\n' > "$TMP/nope.yaml"
code=$(submit "$KEY_A" "$TMP/nope.yaml" "$TMP/r")
[ "$code" = 403 ] && ok "an unknown class is refused (403)" || { not_ok "nope: $code"; cat "$TMP/r"; }
expect_grep "as kube-apiserver says it" "$TMP/r" "no PriorityClass with name nope was found"

stop_tenantd
finish
