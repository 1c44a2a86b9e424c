# test_queue_records.sh - the batch queue's decisions persisted on the
# Workloads, as Kueue writes status.admission: shrinking a ClusterQueue's
# quota after admission keeps the running workloads admitted on their
# flavors and nodes (Kueue does not evict on a quota decrease) while new ones
# wait under the new quota; a restart rebuilds exactly the same admissions
# (`get workloads -o json` byte for byte); a client cannot forge a record.
. "$(dirname "$0")/lib.sh"
cat > "$TMP/platform.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: small}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: small
      resources:
      - {name: cpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: main, namespace: lab}
spec: {clusterQueue: research}
---
apiVersion: tenantd.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec:
  flavor: small
  nodes: 2
  capacity: {cpu: "4"}
  nodeSelector: {tenantd.dev/pool: cpu}
  tenants: ["*"]
YAML
wl() { # name pods cpu-per-pod
    printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: %s, namespace: lab, labels: {kueue.x-k8s.io/queue-name: main}}\nspec:\n  podSets: [{name: workers, count: %s, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "%s"}}}]}}}]\n' "$1" "$2" "$3"
}
row() { grep -E "^lab +$1 " "$TMP/all"; }

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
wl train 2 2 > "$TMP/train.yaml"
wl eval 1 4 > "$TMP/eval.yaml"
expect_rc "submit train (2 pods x 2 cpu)" 0 "$TENANTCTL" submit -f "$TMP/train.yaml"
expect_rc "submit eval (1 pod x 4 cpu)" 0 "$TENANTCTL" submit -f "$TMP/eval.yaml"
"$TENANTCTL" get workloads > "$TMP/all"
row train | grep -q "Admitted .*workers: cpu=small on workers: cpu-0=2" && ok "train admitted, both pods on cpu-0" || { not_ok "train admitted"; cat "$TMP/all"; }
row eval | grep -q "Admitted .*workers: cpu=small on workers: cpu-1=1" && ok "eval admitted on cpu-1" || { not_ok "eval admitted"; cat "$TMP/all"; }
expect_rc "get workload train -o json" 0 "$TENANTCTL" get workload train -n lab -o json
cp "$TMP/out" "$TMP/train.json"
python3 - "$TMP/train.json" <<'PY' && ok "status.admission records flavor and nodes, conditions QuotaReserved and Admitted" || not_ok "status.admission"
import json, sys
w = json.load(open(sys.argv[1]))
a = w["status"]["admission"]
assert a["clusterQueue"] == "research", a
ps = a["podSetAssignments"][0]
assert ps["name"] == "workers" and ps["flavors"] == {"cpu": "small"} and ps["count"] == 2, ps
assert ps["resourceUsage"] == {"cpu": "4"}, ps
assert ps["topologyAssignment"]["domains"] == [{"values": ["cpu-0"], "count": 2}], ps
conds = {c["type"]: c for c in w["status"]["conditions"]}
assert conds["QuotaReserved"]["status"] == "True" and conds["Admitted"]["status"] == "True", conds
assert w["status"]["tenantd"]["state"] == "Admitted"
assert [h["type"] for h in w["status"]["tenantd"]["history"]] == ["Admitted"]
PY

# The quota shrinks to 4 cpu while 8 are in use.
sed 's/nominalQuota: 8/nominalQuota: 4/' "$TMP/platform.yaml" > "$TMP/shrunk.yaml"
expect_rc "apply the ClusterQueue with nominalQuota 4" 0 "$TENANTCTL" apply -f "$TMP/shrunk.yaml"
wl late 1 1 > "$TMP/late.yaml"
expect_rc "submit late (1 cpu)" 0 "$TENANTCTL" submit -f "$TMP/late.yaml"
"$TENANTCTL" get workloads > "$TMP/all"
row train | grep -q "Admitted .*on workers: cpu-0=2" && ok "train stays admitted on its nodes after the quota shrinks" || { not_ok "train after shrink"; cat "$TMP/all"; }
row eval | grep -q "Admitted .*on workers: cpu-1=1" && ok "eval stays admitted after the quota shrinks" || { not_ok "eval after shrink"; cat "$TMP/all"; }
row late | grep -q "Pending .*insufficient unused quota for cpu in flavor small" && ok "a new workload waits under the new quota" || { not_ok "late pending"; cat "$TMP/all"; }
expect_rc "get clusterqueue research -o json" 0 "$TENANTCTL" get clusterqueue research -o json
python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["status"]; assert s["admittedWorkloads"]==2 and s["pendingWorkloads"]==1 and s["usage"]["cpu"]["used"]==8 and s["usage"]["cpu"]["nominal"]==4, s' "$TMP/out" && ok "ClusterQueue status: 8 cpu used over a nominal 4, 2 admitted, 1 pending" || { not_ok "cq status"; cat "$TMP/out"; }

# A client cannot write the queue's record: a forged admission is dropped.
{ wl forged 1 1; printf 'status:\n  admission: {clusterQueue: research, podSetAssignments: [{name: workers, flavors: {cpu: small}, count: 1}]}\n  tenantd: {state: Admitted, admittedAt: "1"}\n'; } > "$TMP/forged.yaml"
expect_rc "submit a workload carrying a forged admission" 0 "$TENANTCTL" submit -f "$TMP/forged.yaml"
"$TENANTCTL" get workloads > "$TMP/all"
row forged | grep -q "Pending" && ok "the forged record is ignored: it waits" || { not_ok "forged"; cat "$TMP/all"; }

# Finishing train frees 4 cpu, but 4 (eval) already fill the new quota.
expect_rc "finish train" 0 "$TENANTCTL" finish train -n lab
"$TENANTCTL" get workloads > "$TMP/all"
row late | grep -q "Pending" && ok "with eval alone using the new quota, late still waits" || { not_ok "late after train"; cat "$TMP/all"; }
"$TENANTCTL" get workloads -o json > "$TMP/before.json"
"$TENANTCTL" get workloads > "$TMP/before.txt"
"$TENANTCTL" get clusterqueues -o json > "$TMP/before-cq.json"

stop_tenantd
start_tenantd "$TMP/data" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
"$TENANTCTL" get workloads -o json > "$TMP/after.json"
"$TENANTCTL" get workloads > "$TMP/after.txt"
"$TENANTCTL" get clusterqueues -o json > "$TMP/after-cq.json"
grep -q '"cpu-1"' "$TMP/after.json" && ok "the records name the nodes" || not_ok "nodes in json"
if cmp -s "$TMP/before.json" "$TMP/after.json"; then ok "get workloads -o json is byte for byte the same after a restart"; else not_ok "json changed across restart"; diff -u "$TMP/before.json" "$TMP/after.json" | head -40; fi
if cmp -s "$TMP/before.txt" "$TMP/after.txt"; then ok "get workloads is the same after a restart"; else not_ok "table changed across restart"; diff -u "$TMP/before.txt" "$TMP/after.txt"; fi
if cmp -s "$TMP/before-cq.json" "$TMP/after-cq.json"; then ok "ClusterQueue usage is the same after a restart"; else not_ok "cq changed across restart"; diff -u "$TMP/before-cq.json" "$TMP/after-cq.json" | head -30; fi

# After the restart the new quota still decides: eval finishing admits late.
expect_rc "finish eval" 0 "$TENANTCTL" finish eval -n lab
"$TENANTCTL" get workloads > "$TMP/all"
row late | grep -q "Admitted .*cpu=small" && ok "freed quota admits late after the restart" || { not_ok "late admitted"; cat "$TMP/all"; }
expect_rc "get workload eval -o json" 0 "$TENANTCTL" get workload eval -n lab -o json
python3 -c 'import json,sys; w=json.load(open(sys.argv[1])); assert [h["type"] for h in w["status"]["tenantd"]["history"]]==["Admitted","Finished"] and "admission" not in w["status"] and w["status"]["conditions"][0]["type"]=="Finished", w["status"]' "$TMP/out" && ok "eval's record: Admitted then Finished, admission released" || { not_ok "eval history"; cat "$TMP/out"; }
stop_tenantd
finish
