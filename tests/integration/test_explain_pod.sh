# test_explain_pod.sh - `tenantctl explain pod`: every admission step in
# order with what it changed or checked, the denial that ends it, and a
# rule in shadow shown as shadow-denied while the pod is allowed.
. "$(dirname "$0")/lib.sh"

expect_rc "explain an allowed GPU pod" 0 "$TENANTCTL" explain pod -f "$EX/pods/gpu.yaml" -c "$EX/platform.yaml"
expect_grep "allowed" "$TMP/out" "team-a-prod/finetune: ALLOWED"
expect_grep "the pool step names its toleration" "$TMP/out" 'mutate    NodePool       changed        add /spec/tolerations = [{"key":"nvidia.com/gpu","operator":"Equal","value":"a100","effect":"NoSchedule"}]'
expect_grep "quota was checked" "$TMP/out" "validate  ResourceQuota  passed"
grep -n "^  \(mutate\|validate\)" "$TMP/out" | awk '{print $2 "/" $3}' | tr '\n' ' ' > "$TMP/order"
[ "$(cat "$TMP/order")" = "mutate/Defaults mutate/LimitRange mutate/Priority mutate/CostLabels mutate/NodePool mutate/Sandbox validate/LimitRange validate/PodSecurity validate/CostLabels validate/NodePool validate/Sandbox validate/Storage validate/ResourceQuota " ] &&
    ok "steps in the documented order" || not_ok "order: $(cat "$TMP/order")"

expect_rc "explain a privileged pod" 1 "$TENANTCTL" explain pod -f "$EX/pods/privileged.yaml" -c "$EX/platform.yaml"
expect_grep "denied by PodSecurity" "$TMP/out" "DENIED by PodSecurity"
expect_no_grep "nothing runs after the denial" "$TMP/out" "validate  CostLabels"

cat > "$TMP/shadow.yaml" <<'Y'
apiVersion: tenantd.dev/v1alpha1
kind: AdmissionPolicy
metadata: {name: roll-out}
spec:
  requiredLabels: [team, project, environment]
  inheritLabelsFromNamespace: true
  enforcement: {PodSecurity: shadow}
Y
# the example platform without its AdmissionPolicy document
awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/\nkind: AdmissionPolicy\n/' "$EX/platform.yaml" > "$TMP/platform.yaml"
grep -q "kind: AdmissionPolicy" "$TMP/platform.yaml" && not_ok "could not drop the example's AdmissionPolicy"
expect_rc "with PodSecurity in shadow the same pod is allowed" 0 "$TENANTCTL" explain pod \
    -f "$EX/pods/privileged.yaml" -c "$TMP/platform.yaml" -c "$TMP/shadow.yaml"
expect_grep "the summary counts the shadow rule" "$TMP/out" "ALLOWED (1 rule in shadow would deny)"
expect_grep "the step is shadow-denied with the message" "$TMP/out" 'validate  PodSecurity    shadow-denied  violates PodSecurity "baseline:latest"'
expect_rc "admit prints the shadow warning in the review" 0 "$TENANTCTL" admit \
    -f "$EX/pods/privileged.yaml" -c "$TMP/platform.yaml" -c "$TMP/shadow.yaml"
expect_grep "review warning" "$TMP/out" '"tenantd shadow: PodSecurity would deny: violates PodSecurity'
expect_grep "audit annotation" "$TMP/out" '"tenantd.dev/shadow-PodSecurity"'
expect_rc "json output" 0 "$TENANTCTL" explain pod -f "$EX/pods/gpu.yaml" -c "$EX/platform.yaml" -o json
expect_grep "json has steps" "$TMP/out" '"step": "ResourceQuota"'
expect_rc "a missing pod file is bad input" 2 "$TENANTCTL" explain pod -f /nonexistent -c "$EX/platform.yaml"
finish
