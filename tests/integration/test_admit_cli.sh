# test_admit_cli.sh - tenantctl quantity, admit and provision as a user
# runs them: exit codes, AdmissionReview output, messages, bad input.
. "$(dirname "$0")/lib.sh"
P="$EX/platform.yaml"
A="$EX/pods"

expect_rc "quantity canonical forms" 0 "$TENANTCTL" quantity 1024Mi 0.5 1.5Gi 1e3 1000m 100Ki 12E 0.1m
printf '1Gi\n500m\n1536Mi\n1e3\n1\n100Ki\n12E\n100u\n' > "$TMP/want"
if diff -u "$TMP/want" "$TMP/out" >/dev/null; then ok "quantity output"; else not_ok "quantity output"; diff -u "$TMP/want" "$TMP/out"; fi
expect_rc "quantity rejects 1.1.M" 2 "$TENANTCTL" quantity 1.1.M
expect_grep "quantity names the bad input" "$TMP/err" '1.1.M'
expect_rc "quantity rejects empty" 2 "$TENANTCTL" quantity ""
expect_rc "quantity --help" 0 "$TENANTCTL" quantity --help

expect_rc "allowed pod" 0 "$TENANTCTL" admit -c "$P" -f "$A/allowed.yaml"
expect_grep "allowed response" "$TMP/out" '"allowed": true'
expect_grep "AdmissionReview v1" "$TMP/out" '"apiVersion": "admission.k8s.io/v1"'

expect_rc "defaulted pod" 0 "$TENANTCTL" admit -c "$P" -f "$A/defaulted.yaml"
expect_grep "defaulted pod has a JSONPatch" "$TMP/out" '"patchType": "JSONPatch"'
patch=$(grep '"patch"' "$TMP/out" | sed 's/.*"patch": "\(.*\)".*/\1/' | base64 -d)
echo "$patch" > "$TMP/patch"
expect_grep "LimitRange default cpu limit" "$TMP/patch" '"limits":{"cpu":"2","memory":"4Gi"}'
expect_grep "LimitRange default requests" "$TMP/patch" '"requests":{"cpu":"500m","memory":"1Gi"}'
expect_grep "label inherited from namespace" "$TMP/patch" '"path":"/metadata/labels"'
expect_grep "inherited project label" "$TMP/patch" '"project":"search"'

expect_rc "over quota" 1 "$TENANTCTL" admit -c "$P" -f "$A/over-quota.yaml"
expect_grep "quota message, Kubernetes wording" "$TMP/out" 'exceeded quota: team-a-compute, requested: requests.nvidia.com/gpu=16, used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=8'
expect_grep "denied with 403" "$TMP/out" '"code": 403'

expect_rc "gpu pod within quota" 0 "$TENANTCTL" admit -c "$P" -f "$A/gpu.yaml" --used "$A/used.yaml"
patch=$(grep '"patch"' "$TMP/out" | sed 's/.*"patch": "\(.*\)".*/\1/' | base64 -d)
echo "$patch" > "$TMP/patch"
expect_grep "a100 toleration added" "$TMP/patch" '{"key":"nvidia.com/gpu","operator":"Equal","value":"a100","effect":"NoSchedule"}'
expect_grep "a100 node selector added" "$TMP/patch" '"path":"/spec/nodeSelector","value":{"tenantd.dev/pool":"a100"}'
expect_grep "priority resolved from PriorityClass" "$TMP/patch" '"path":"/spec/priority","value":100'

cp "$A/gpu.yaml" "$TMP/gpu3.yaml"
sed -i 's/nvidia.com\/gpu: "2"/nvidia.com\/gpu: "3"/' "$TMP/gpu3.yaml"
expect_rc "gpu pod over quota with used pods" 1 "$TENANTCTL" admit -c "$P" -f "$TMP/gpu3.yaml" --used "$A/used.yaml"
expect_grep "used counts running pods" "$TMP/out" 'requested: requests.nvidia.com/gpu=3, used: requests.nvidia.com/gpu=6, limited: requests.nvidia.com/gpu=8'

expect_rc "privileged pod denied" 1 "$TENANTCTL" admit -c "$P" -f "$A/privileged.yaml"
expect_grep "PSS message" "$TMP/out" 'violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true), privileged (container \"shell\" must not set securityContext.privileged=true)'

expect_rc "restricted namespace denies root pod" 1 "$TENANTCTL" admit -c "$P" -f "$A/missing-label.yaml"
expect_grep "restricted PSS" "$TMP/out" 'violates PodSecurity \"restricted:latest\"'

# Workloads: never denied, their pod template warned
# on as kube-apiserver's PodSecurity does (warn follows enforce); a kind
# that is neither is named as itself.
cat > "$TMP/deploy.yaml" <<'Y'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team-b-prod}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      hostNetwork: true
      containers: [{name: web, image: nginx}]
Y
expect_rc "deployment allowed" 0 "$TENANTCTL" admit -c "$P" -f "$TMP/deploy.yaml"
expect_grep "deployment: warning in the review" "$TMP/out" '"warnings": '
expect_grep "deployment: warning on stderr" "$TMP/err" 'warning: would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true)'
expect_rc "deployment summary" 0 "$TENANTCTL" admit -c "$P" -f "$TMP/deploy.yaml" -o summary
expect_grep "summary: warning" "$TMP/out" 'warning: would violate PodSecurity "restricted:latest": host namespaces'
cat > "$TMP/svc.yaml" <<'Y'
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team-b-prod}
spec: {ports: [{port: 80}]}
Y
expect_rc "service is bad input" 2 "$TENANTCTL" admit -c "$P" -f "$TMP/svc.yaml"
expect_grep "service named as itself" "$TMP/out" 'kind Service is not a Pod; '
# a volume without a source is an emptyDir, as the API server defaults it
cat > "$TMP/vol.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: vol, namespace: team-a-prod}
spec:
  volumes: [{name: scratch}]
  containers: [{name: c, image: x}]
Y
expect_rc "sourceless volume pod" 0 "$TENANTCTL" admit -c "$P" -f "$TMP/vol.yaml"
patch=$(grep '"patch"' "$TMP/out" | sed 's/.*"patch": "\(.*\)".*/\1/' | base64 -d)
echo "$patch" > "$TMP/patch"
expect_grep "sourceless volume defaulted to emptyDir" "$TMP/patch" '"path":"/spec/volumes/0/emptyDir","value":{}'

expect_rc "wrong pool denied" 1 "$TENANTCTL" admit -c "$P" -f "$A/wrong-pool.yaml"
expect_grep "names the pool" "$TMP/out" 'NodePool \"h100\"'

cat > "$TMP/nolabel.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: x, namespace: orphan}
spec:
  containers: [{name: c, image: busybox}]
Y
expect_rc "missing cost label denied" 1 "$TENANTCTL" admit -c "$P" -f "$TMP/nolabel.yaml"
expect_grep "names the label" "$TMP/out" 'missing required cost label \"team\"'

expect_rc "AdmissionReview input echoes uid" 0 "$TENANTCTL" admit -c "$P" -f "$A/review.json"
expect_grep "uid echoed" "$TMP/out" '"uid": "705ab4f5-6393-11e8-b7cc-42010a800002"'

# Bad input: exit 2, a message naming file, line and field; nothing printed as allowed.
printf 'apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q, namespace: team-a-prod}\nspec:\n  hard:\n    requests.cpu: 8Gx\n' > "$TMP/badq.yaml"
expect_rc "bad quantity in platform" 2 "$TENANTCTL" admit -c "$TMP/badq.yaml" -f "$A/allowed.yaml"
expect_grep "names file, line and field" "$TMP/err" "badq.yaml:6: ResourceQuota team-a-prod/q: spec.hard.requests.cpu: \"8Gx\" is not a quantity"
printf 'apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n' > "$TMP/unknown.yaml"
expect_rc "unknown kind" 2 "$TENANTCTL" admit -c "$TMP/unknown.yaml" -f "$A/allowed.yaml"
expect_grep "unknown kind named" "$TMP/err" 'unknown kind "Widget"'
printf 'apiVersion: v2\nkind: Namespace\nmetadata: {name: w}\n' > "$TMP/badapi.yaml"
expect_rc "wrong apiVersion" 2 "$TENANTCTL" admit -c "$TMP/badapi.yaml" -f "$A/allowed.yaml"
printf 'a: [1, 2\n' > "$TMP/broken.yaml"
expect_rc "malformed YAML" 2 "$TENANTCTL" admit -c "$TMP/broken.yaml" -f "$A/allowed.yaml"
expect_grep "YAML error has a position" "$TMP/err" "broken.yaml:"
sed 's/cpu: "4"/cpu: "4x"/' "$A/allowed.yaml" > "$TMP/badpod.yaml"
expect_rc "bad quantity in pod" 2 "$TENANTCTL" admit -c "$P" -f "$TMP/badpod.yaml"
expect_grep "pod quantity error" "$TMP/out" '4x'
expect_rc "missing -f" 2 "$TENANTCTL" admit -c "$P"
expect_rc "admit --help" 0 "$TENANTCTL" admit --help
expect_rc "no such file" 2 "$TENANTCTL" admit -c "$P" -f "$TMP/nope.yaml"

# Provisioning: the same output every time, and it round-trips into admit.
expect_rc "provision" 0 "$TENANTCTL" provision --team ml --env prod --cpu 64 --memory 256Gi --gpus 8
cp "$TMP/out" "$TMP/prov1"
"$TENANTCTL" provision --team ml --env prod --cpu 64 --memory 256Gi --gpus 8 > "$TMP/prov2"
if cmp -s "$TMP/prov1" "$TMP/prov2"; then ok "provision is deterministic"; else not_ok "provision differs between runs"; fi
for k in "kind: Namespace" "kind: RoleBinding" "name: default-deny" "name: allow-same-namespace" "name: allow-dns-egress" "kind: ResourceQuota" "kind: LimitRange" "kind: LocalQueue" "pod-security.kubernetes.io/enforce: baseline" "requests.nvidia.com/gpu: \"8\""; do
    expect_grep "provision emits $k" "$TMP/prov1" "$k"
done
cat > "$TMP/mlpod.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: job, namespace: ml-prod}
spec:
  containers: [{name: c, image: trainer}]
Y
expect_rc "provision output admits a pod" 0 "$TENANTCTL" admit -c "$TMP/prov1" -f "$TMP/mlpod.yaml"
patch=$(grep '"patch"' "$TMP/out" | sed 's/.*"patch": "\(.*\)".*/\1/' | base64 -d)
echo "$patch" > "$TMP/patch"
expect_grep "round trip: LimitRange defaults from provision" "$TMP/patch" '"requests":{"cpu":"100m","memory":"256Mi"}'
expect_grep "round trip: labels from provisioned namespace" "$TMP/patch" '"team":"ml"'
cat > "$TMP/mlbig.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: job, namespace: ml-prod}
spec:
  containers:
  - name: c
    image: trainer
    resources: {requests: {cpu: "100"}, limits: {cpu: "100"}}
Y
expect_rc "provisioned quota denies over-ask" 1 "$TENANTCTL" admit -c "$TMP/prov1" -f "$TMP/mlbig.yaml"
expect_grep "provisioned quota name" "$TMP/out" 'exceeded quota: ml-prod-compute'
expect_rc "provision rejects bad team" 2 "$TENANTCTL" provision --team ML_team --env prod
expect_rc "provision rejects bad quantity" 2 "$TENANTCTL" provision --team ml --env prod --cpu lots
expect_rc "provision needs --env" 2 "$TENANTCTL" provision --team ml

expect_rc "unknown verb" 2 "$TENANTCTL" frobnicate
expect_rc "tenantctl --help" 0 "$TENANTCTL" --help
finish
