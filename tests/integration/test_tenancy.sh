# test_tenancy.sh - isolation tiers end to end: provision a team and a
# customer, check that the outputs differ exactly by the layers of the
# tiers table of docs/admission.md, apply both to a real tenantd, admit pods through its
# webhook (and offline), explain both tenants, and refuse a bad tier setup
# whole.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; exit 1; }

# ---- provisioning ----------------------------------------------------------
expect_rc "provision a team" 0 "$TENANTCTL" provision --team ml --env prod --gpus 8 \
    --bucket ml-data --prefix teams/ml/ --gcp-service-account ml@proj.iam.gserviceaccount.com
cp "$TMP/out" "$TMP/team.yaml"
expect_rc "provision a customer" 0 "$TENANTCTL" provision --team acme --env prod --gpus 8 \
    --tenancy customer --bucket ml-data --prefix customers/acme/ --storage-classes encrypted-ssd \
    --gcp-service-account acme@proj.iam.gserviceaccount.com \
    --aws-role-arn arn:aws:iam::123456789012:role/acme --gateway-namespace tenantd-system \
    --gateway-port 8443
cp "$TMP/out" "$TMP/cust.yaml"
"$TENANTCTL" provision --team acme --env prod --gpus 8 --tenancy customer --bucket ml-data \
    --prefix customers/acme/ --storage-classes encrypted-ssd \
    --gcp-service-account acme@proj.iam.gserviceaccount.com \
    --aws-role-arn arn:aws:iam::123456789012:role/acme --gateway-port 8443 > "$TMP/cust2.yaml"
if cmp -s "$TMP/cust.yaml" "$TMP/cust2.yaml"; then ok "customer provision is deterministic"; else not_ok "customer provision differs between runs"; fi

# "Kind name" of every object, the tenant's name replaced by T.
objects() {
    awk -v t="$2" '/^kind: /{k=$2} /^  name: /{ if (k != "") { n=$2; gsub(t, "T", n); print k, n; k="" } }' "$1" | sort
}
objects "$TMP/team.yaml" ml > "$TMP/team.objs"
objects "$TMP/cust.yaml" acme > "$TMP/cust.objs"
comm -13 "$TMP/team.objs" "$TMP/cust.objs" > "$TMP/only-cust"
comm -23 "$TMP/team.objs" "$TMP/cust.objs" > "$TMP/only-team"
# docs/admission.md's tiers table: what a customer gets that a team does not, and back.
printf '%s\n' "NetworkPolicy allow-gateway-egress" "NodePool T-dedicated" "Role T-tenant" \
    "RoleBinding T-tenant" "RuntimeClass gvisor" "ServiceAccount default" | sort > "$TMP/want-cust"
printf '%s\n' "NetworkPolicy allow-same-namespace" "RoleBinding T-edit" | sort > "$TMP/want-team"
if diff -u "$TMP/want-cust" "$TMP/only-cust"; then ok "customer-only objects are exactly the table's"; else not_ok "customer-only objects differ from the table"; fi
if diff -u "$TMP/want-team" "$TMP/only-team"; then ok "team-only objects are exactly the table's"; else not_ok "team-only objects differ from the table"; fi
# Objects both tiers get, with different content where the table says so.
expect_grep "team namespace: baseline" "$TMP/team.yaml" "pod-security.kubernetes.io/enforce: baseline"
expect_grep "customer namespace: restricted" "$TMP/cust.yaml" "pod-security.kubernetes.io/enforce: restricted"
expect_grep "customer namespace labelled by tier" "$TMP/cust.yaml" "tenantd.dev/tenancy: customer"
expect_grep "customer egress to the gateway's namespace" "$TMP/cust.yaml" "kubernetes.io/metadata.name: tenantd-system"
expect_grep "customer egress on the gateway's port" "$TMP/cust.yaml" "{protocol: TCP, port: 8443}"
expect_grep "no default token" "$TMP/cust.yaml" "automountServiceAccountToken: false"
expect_grep "sandbox handler" "$TMP/cust.yaml" "handler: runsc"
expect_grep "dedicated taint" "$TMP/cust.yaml" "taint: {key: tenantd.dev/tenant, value: acme, effect: NoSchedule}"
expect_grep "team Tenant tier" "$TMP/team.yaml" "tenancy: team"
expect_grep "customer Tenant tier" "$TMP/cust.yaml" "tenancy: customer"
expect_grep "GKE workload identity" "$TMP/cust.yaml" "iam.gke.io/gcp-service-account: acme@proj.iam.gserviceaccount.com"
expect_grep "EKS IRSA" "$TMP/cust.yaml" 'eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/acme"'
expect_grep "team GKE identity" "$TMP/team.yaml" "iam.gke.io/gcp-service-account: ml@proj.iam.gserviceaccount.com"
expect_no_grep "team has no EKS role" "$TMP/team.yaml" "eks.amazonaws.com/role-arn"
expect_no_grep "customer binds no ClusterRole" "$TMP/cust.yaml" "kind: ClusterRole"
expect_no_grep "customer Role cannot touch NetworkPolicies" "$TMP/cust.yaml" "networkpolicies"

expect_rc "virtual cluster" 0 "$TENANTCTL" provision --team acme --env prod --tenancy customer --virtual-cluster
cp "$TMP/out" "$TMP/vc.yaml"
expect_grep "vcluster HelmChart" "$TMP/vc.yaml" "kind: HelmChart"
expect_grep "vcluster chart" "$TMP/vc.yaml" "chart: vcluster"
expect_grep "vcluster in the host namespace" "$TMP/vc.yaml" "targetNamespace: acme-prod"
expect_grep "synced pods sandboxed" "$TMP/vc.yaml" "runtimeClassName: gvisor"
expect_grep "vcluster control plane netpol" "$TMP/vc.yaml" "name: allow-vcluster-control-plane"
objects "$TMP/vc.yaml" acme > "$TMP/vc.objs"
objects "$TMP/cust.yaml" acme | grep -v "ServiceAccount T-data" > "$TMP/cust-nostore.objs"
comm -13 "$TMP/cust-nostore.objs" "$TMP/vc.objs" | grep -v "^Tenant" > "$TMP/only-vc"
printf '%s\n' "HelmChart T-vcluster" "NetworkPolicy allow-vcluster-control-plane" "NetworkPolicy allow-vcluster-workloads" > "$TMP/want-vc"
if diff -u "$TMP/want-vc" "$TMP/only-vc"; then ok "--virtual-cluster adds exactly its layer"; else not_ok "--virtual-cluster objects"; fi

expect_rc "unknown tier refused" 2 "$TENANTCTL" provision --team x --env prod --tenancy partner
expect_grep "names the tier" "$TMP/err" '--tenancy: "partner" is not a tier'
expect_rc "customer cannot weaken Pod Security" 2 "$TENANTCTL" provision --team x --env prod --tenancy customer --pss baseline
expect_rc "virtual cluster is a customer layer" 2 "$TENANTCTL" provision --team x --env prod --virtual-cluster
expect_rc "prefix without bucket" 2 "$TENANTCTL" provision --team x --env prod --prefix x/
expect_rc "prefix without slash" 2 "$TENANTCTL" provision --team x --env prod --bucket b-1 --prefix x
expect_grep "prefix message" "$TMP/err" "must end with '/'"
expect_rc "bad gateway port" 2 "$TENANTCTL" provision --team x --env prod --tenancy customer --gateway-port 0
expect_rc "provision --help" 0 "$TENANTCTL" provision --help
expect_grep "help lists --tenancy" "$TMP/out" "--tenancy TIER"

# ---- offline round trip: provision -> admit -------------------------------
cat > "$TMP/cpod.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata:
  name: train
  namespace: acme-prod
  annotations: {tenantd.dev/data-uri: "s3://ml-data/customers/acme/datasets/v1"}
spec:
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: c
    image: trainer
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
    resources: {limits: {nvidia.com/gpu: "1"}}
Y
expect_rc "customer pod admitted offline" 0 "$TENANTCTL" admit -c "$TMP/team.yaml" -c "$TMP/cust.yaml" -f "$TMP/cpod.yaml" -o summary
expect_grep "sandbox set" "$TMP/out" 'add /spec/runtimeClassName = "gvisor"'
expect_grep "dedicated pool selected" "$TMP/out" 'add /spec/nodeSelector = {"tenantd.dev/tenant":"acme"}'
sed 's|customers/acme/datasets|teams/ml/datasets|' "$TMP/cpod.yaml" > "$TMP/cpod-steal.yaml"
expect_rc "customer reading the team's prefix denied" 1 "$TENANTCTL" admit -c "$TMP/team.yaml" -c "$TMP/cust.yaml" -f "$TMP/cpod-steal.yaml"
expect_grep "names the prefix" "$TMP/out" "lies outside tenant \\\"acme\\\"'s storage s3://ml-data/customers/acme/"
cat > "$TMP/tpod.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: nb, namespace: ml-prod, labels: {tenantd.dev/workload: notebook}}
spec:
  runtimeClassName: runc
  containers: [{name: c, image: jupyter}]
Y
expect_rc "team notebook escaping the sandbox denied" 1 "$TENANTCTL" admit -c "$TMP/team.yaml" -c "$TMP/cust.yaml" -f "$TMP/tpod.yaml"
expect_grep "Sandbox rule named" "$TMP/out" '"kind": "Sandbox"'
sed '/runtimeClassName: runc/d' "$TMP/tpod.yaml" > "$TMP/tpod2.yaml"
expect_rc "team notebook admitted into the sandbox" 0 "$TENANTCTL" admit -c "$TMP/team.yaml" -c "$TMP/cust.yaml" -f "$TMP/tpod2.yaml" -o summary
expect_grep "notebook gets gvisor" "$TMP/out" 'add /spec/runtimeClassName = "gvisor"'

# The shipped example: a customer beside platform.yaml's teams.
expect_rc "example customer pod admitted" 0 "$TENANTCTL" admit -c "$EX/platform.yaml" -c "$EX/tenancy.yaml" -f "$EX/pods/customer.yaml" -o summary
expect_grep "example: sandboxed" "$TMP/out" 'add /spec/runtimeClassName = "gvisor"'
expect_grep "example: dedicated pool" "$TMP/out" 'add /spec/nodeSelector = {"tenantd.dev/tenant":"acme"}'
sed 's|customers/acme/datasets|customers/acme-evil/datasets|' "$EX/pods/customer.yaml" > "$TMP/evil.yaml"
expect_rc "example: sibling prefix denied" 1 "$TENANTCTL" admit -c "$EX/platform.yaml" -c "$EX/tenancy.yaml" -f "$TMP/evil.yaml"
sed 's|^spec:|spec:\n  nodeSelector: {tenantd.dev/pool: a100}|' "$EX/pods/customer.yaml" > "$TMP/shared.yaml"
expect_rc "example: customer on team-a's a100 pool denied" 1 "$TENANTCTL" admit -c "$EX/platform.yaml" -c "$EX/tenancy.yaml" -f "$TMP/shared.yaml"
expect_grep "example: pool denial names the pool" "$TMP/out" 'NodePool \"a100\", which tenant \"acme\" may not use'

# ---- explain ----------------------------------------------------------------
expect_rc "explain customer" 0 "$TENANTCTL" explain tenant acme -c "$TMP/team.yaml" -c "$TMP/cust.yaml"
cp "$TMP/out" "$TMP/explain-cust"
expect_grep "explain: tier" "$TMP/explain-cust" "Tenant acme: tenancy customer"
expect_grep "explain: PSS" "$TMP/explain-cust" "Pod Security in acme-prod: restricted"
expect_grep "explain: sandbox" "$TMP/explain-cust" "every pod runs in RuntimeClass gvisor (handler runsc)"
expect_grep "explain: pools" "$TMP/explain-cust" "GPU pools: acme-dedicated (dedicated)"
expect_grep "explain: storage" "$TMP/explain-cust" "s3://ml-data/customers/acme/"
expect_grep "explain: object present" "$TMP/explain-cust" "allow-gateway-egress"
expect_no_grep "explain: every emitted object is in the config" "$TMP/explain-cust" "not in config"
expect_grep "explain: PVC check" "$TMP/explain-cust" "spec.storageClassName must be one of its StorageClasses"
expect_rc "explain team" 0 "$TENANTCTL" explain tenant ml -c "$TMP/team.yaml" -c "$TMP/cust.yaml"
expect_grep "explain team: tier" "$TMP/out" "Tenant ml: tenancy team"
expect_grep "explain team: notebooks only" "$TMP/out" "only untrusted workloads"
expect_grep "explain team: RoleBinding edit" "$TMP/out" "ml-edit"
expect_rc "explain unknown tenant" 2 "$TENANTCTL" explain tenant nobody -c "$TMP/cust.yaml"
expect_rc "explain unknown subject" 2 "$TENANTCTL" explain widget x -c "$TMP/cust.yaml"
expect_grep "lists the subjects" "$TMP/err" "known: tenant"
expect_rc "explain --help" 0 "$TENANTCTL" explain --help

# ---- the real daemon: provision -> apply -> admit over the webhook ------------
start_tenantd "$TMP/data" || { finish; exit 1; }
URL="http://127.0.0.1:$TD_PORT"
export TENANTD_SERVER="$URL"
# The LocalQueues provisioning emits point at ClusterQueues named after the
# tenants; the platform team defines those (the daemon's queue checks it).
cat > "$TMP/queues.yaml" <<'Y'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: dedicated}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: ml}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: dedicated
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: acme}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: dedicated
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
Y
expect_rc "apply the ClusterQueues" 0 "$TENANTCTL" apply -f "$TMP/queues.yaml"
expect_rc "apply the team baseline" 0 "$TENANTCTL" apply -f "$TMP/team.yaml"
expect_rc "apply the customer baseline" 0 "$TENANTCTL" apply -f "$TMP/cust.yaml"
expect_rc "get tenants" 0 "$TENANTCTL" get tenants
expect_grep "customer tenant stored" "$TMP/out" "acme"

review() { # review FILE NS: AdmissionReview v1 around the JSON pod in FILE
    printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-%s","kind":{"group":"","version":"v1","kind":"%s"},"namespace":"%s","operation":"CREATE","object":%s}}' \
        "$2" "${3:-Pod}" "$2" "$(cat "$1")"
}
cat > "$TMP/c.json" <<'Y'
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"train"},"spec":{"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},"containers":[{"name":"c","image":"t","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}},"env":[{"name":"DATA_URI","value":"s3://ml-data/customers/acme/x"}],"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}
Y
review "$TMP/c.json" acme-prod > "$TMP/c-review.json"
curl -sS --max-time 10 --data-binary @"$TMP/c-review.json" "$URL/mutate" > "$TMP/m"
expect_grep "webhook mutates the customer pod" "$TMP/m" '"allowed":true'
patch=$(sed 's/.*"patch":"\([^"]*\)".*/\1/' "$TMP/m" | base64 -d)
echo "$patch" > "$TMP/patch"
expect_grep "webhook patch: sandbox" "$TMP/patch" '{"op":"add","path":"/spec/runtimeClassName","value":"gvisor"}'
expect_grep "webhook patch: dedicated toleration" "$TMP/patch" '"key":"tenantd.dev/tenant","operator":"Equal","value":"acme"'
# /validate judges a pod as tenantd's own mutation leaves it, so the raw pod passes too ...
curl -sS --max-time 10 --data-binary @"$TMP/c-review.json" "$URL/validate" > "$TMP/v"
expect_grep "webhook validates the raw customer pod" "$TMP/v" '"allowed":true'
# ... but a pod that names another runtime class does not.
sed 's/"spec":{/"spec":{"runtimeClassName":"runc",/' "$TMP/c.json" > "$TMP/c-runc.json"
review "$TMP/c-runc.json" acme-prod > "$TMP/c-review-runc.json"
curl -sS --max-time 10 --data-binary @"$TMP/c-review-runc.json" "$URL/validate" > "$TMP/v1"
expect_grep "runc denied over the webhook" "$TMP/v1" 'spec.runtimeClassName \"runc\" is not allowed'
expect_grep "denial kind Sandbox" "$TMP/v1" '"details":{"kind":"Sandbox"}'
# Kubernetes calls /validate with the patched pod: the fields the patch's
# tenancy operations set (checked above) are in it.
sed 's|"spec":{|"spec":{"runtimeClassName":"gvisor","nodeSelector":{"tenantd.dev/tenant":"acme"},"tolerations":[{"key":"tenantd.dev/tenant","operator":"Equal","value":"acme","effect":"NoSchedule"}],|' \
    "$TMP/c.json" > "$TMP/c-patched.json"
review "$TMP/c-patched.json" acme-prod > "$TMP/c-review2.json"
curl -sS --max-time 10 --data-binary @"$TMP/c-review2.json" "$URL/validate" > "$TMP/v2"
expect_grep "patched customer pod validates" "$TMP/v2" '"allowed":true'
sed 's|customers/acme/x|customers/acme-evil/x|' "$TMP/c-patched.json" > "$TMP/c-evil.json"
review "$TMP/c-evil.json" acme-prod > "$TMP/c-review3.json"
curl -sS --max-time 10 --data-binary @"$TMP/c-review3.json" "$URL/validate" > "$TMP/v3"
expect_grep "sibling prefix denied over the webhook" "$TMP/v3" '"allowed":false'
expect_grep "denial kind Storage" "$TMP/v3" '"kind":"Storage"'
printf '{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"data"},"spec":{"storageClassName":"standard","accessModes":["ReadWriteOnce"]}}' > "$TMP/pvc.json"
review "$TMP/pvc.json" acme-prod PersistentVolumeClaim > "$TMP/pvc-review.json"
curl -sS --max-time 10 --data-binary @"$TMP/pvc-review.json" "$URL/validate" > "$TMP/v4"
expect_grep "PVC of a foreign StorageClass denied" "$TMP/v4" 'uses StorageClass \"standard\", which tenant \"acme\" may not use'
sed 's/standard/encrypted-ssd/' "$TMP/pvc.json" > "$TMP/pvc-ok.json"
review "$TMP/pvc-ok.json" acme-prod PersistentVolumeClaim > "$TMP/pvc-review2.json"
curl -sS --max-time 10 --data-binary @"$TMP/pvc-review2.json" "$URL/validate" > "$TMP/v5"
expect_grep "PVC of its StorageClass allowed" "$TMP/v5" '"allowed":true'
# The team pod in the same daemon: no sandbox, shared pools stay open to it.
printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"t"},"spec":{"containers":[{"name":"c","image":"t"}]}}' > "$TMP/t.json"
review "$TMP/t.json" ml-prod > "$TMP/t-review.json"
curl -sS --max-time 10 --data-binary @"$TMP/t-review.json" "$URL/mutate" > "$TMP/tm"
patch=$(sed 's/.*"patch":"\([^"]*\)".*/\1/' "$TMP/tm" | base64 -d)
echo "$patch" > "$TMP/tpatch"
expect_no_grep "team pod is not sandboxed" "$TMP/tpatch" "runtimeClassName"
expect_grep "team pod gets its labels" "$TMP/tpatch" '"team":"ml"'

# Bad tier setups are refused whole; what was there stays.
cat > "$TMP/share.yaml" <<'Y'
apiVersion: v1
kind: Namespace
metadata: {name: zeta-prod, labels: {team: zeta, project: z, environment: prod}}
---
apiVersion: tenantd.dev/v1alpha1
kind: NodePool
metadata: {name: acme-dedicated}
spec:
  taint: {key: tenantd.dev/tenant, value: acme, effect: NoSchedule}
  nodeSelector: {tenantd.dev/tenant: acme}
  tenants: [acme, ml]
Y
expect_rc "customer on a shared pool refused" 2 "$TENANTCTL" apply -f "$TMP/share.yaml"
expect_grep "names pool and customer" "$TMP/err" 'NodePool acme-dedicated: spec.tenants: customer tenant "acme" shares this pool with other tenants'
expect_rc "get namespaces" 0 "$TENANTCTL" get namespaces
expect_no_grep "nothing half-applied" "$TMP/out" "zeta-prod"
cat > "$TMP/overlap.yaml" <<'Y'
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: snoop}
spec:
  namespaces: [snoop-prod]
  storage: {bucket: ml-data, prefix: customers/}
Y
expect_rc "overlapping prefix refused" 2 "$TENANTCTL" apply -f "$TMP/overlap.yaml"
expect_grep "names the overlap" "$TMP/err" "overlaps"
expect_rc "delete the sandbox RuntimeClass refused" 2 "$TENANTCTL" delete runtimeclass gvisor
expect_grep "RuntimeClass still needed" "$TMP/err" 'RuntimeClass "gvisor", which is not defined'
stop_tenantd
finish
