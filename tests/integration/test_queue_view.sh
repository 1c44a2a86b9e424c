# test_queue_view.sh - the batch queue's read side: /metrics' queue series
# and `get clusterqueues` come from the view the last commit made, checked
# against numbers worked out by hand through submit (with a preemption),
# finish, apply of a smaller quota, delete, SIGHUP and a restart (which
# rebuilds the view from the records: the same numbers). Then with 20,000
# workloads stored: scrapes, ClusterQueue GETs, explain and the metering
# tick rebuild nothing (tenantd_queue_rebuilds_total stays), nor do
# one-workload commits (the queue is kept in memory between commits).
. "$(dirname "$0")/lib.sh"
obj() { # KIND NAME [NAMESPACE]: an object's head; the body follows
    printf -- '---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: %s\nmetadata: {name: %s%s}\n' "$1" "$2" "${3:+, namespace: $3}"
}
cq() { # NAME GPUS [PREEMPTION]: a ClusterQueue of cohort pool with GPUS a100s
    obj ClusterQueue "$1"
    printf 'spec:\n  namespaceSelector: {}\n  cohort: pool\n'
    [ -z "${3:-}" ] || printf '  preemption: %s\n' "$3"
    printf '  resourceGroups:\n  - coveredResources: [nvidia.com/gpu]\n    flavors:\n    - {name: a100, resources: [{name: nvidia.com/gpu, nominalQuota: %s}]}\n' "$2"
}
platform() { # TRAIN_GPUS: train (preempts lower priority) and serve (2 GPUs) share cohort pool
    obj ResourceFlavor a100
    cq train "$1" "{withinClusterQueue: LowerPriority}"
    cq serve 2
    for q in lab:train ops:serve; do obj LocalQueue main "${q%%:*}"; echo "spec: {clusterQueue: ${q#*:}}"; done
    for p in low:10 high:100; do obj WorkloadPriorityClass "${p%%:*}"; echo "value: ${p#*:}"; done
}
wl() { # NS NAME GPUS PRIORITYCLASS (none: priority 0)
    printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: %s, namespace: %s, labels: {kueue.x-k8s.io/queue-name: main}}\nspec:\n' "$2" "$1"
    [ "$4" = none ] || printf '  priorityClassSource: kueue.x-k8s.io/workloadpriorityclass\n  priorityClassName: %s\n' "$4"
    printf '  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: "%s"}}}]}}}]\n' "$3"
}
submit() { # NS NAME GPUS PRIORITYCLASS
    wl "$@" > "$TMP/wl.yaml"
    expect_rc "submit $1/$2 ($3 GPUs, $4)" 0 "$TENANTCTL" submit -f "$TMP/wl.yaml"
}
scrape() { curl -s --max-time 30 "$TENANTD_SERVER/metrics"; }
rebuilds() { scrape | awk '$1 == "tenantd_queue_rebuilds_total" { print $2 }'; }
# restart_same NAME: stops and starts tenantd; the ClusterQueue status and
# the queue series, now from a view rebuilt from the records, are unchanged
restart_same() {
    "$TENANTCTL" get clusterqueues -o json > "$TMP/before-cq.json"
    scrape | grep -E '^tenantd_queue_(pending|admitted|preemptions)' > "$TMP/before-metrics"
    stop_tenantd
    start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
    export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
    "$TENANTCTL" get clusterqueues -o json > "$TMP/after-cq.json"
    scrape | grep -E '^tenantd_queue_(pending|admitted|preemptions)' > "$TMP/after-metrics"
    if cmp -s "$TMP/before-cq.json" "$TMP/after-cq.json" && [ -s "$TMP/after-metrics" ] &&
        cmp -s "$TMP/before-metrics" "$TMP/after-metrics"; then ok "$1"; else
        not_ok "$1"; diff -u "$TMP/before-cq.json" "$TMP/after-cq.json" | head -20
        diff -u "$TMP/before-metrics" "$TMP/after-metrics"
    fi
}
# state NAME "train: pending admitted used nominal borrowed; serve: ..." [preemptions]
# compares get clusterqueues -o json and the /metrics series with the numbers
state() {
    local name=$1 want=$2 preempted=${3:-}
    "$TENANTCTL" get clusterqueues -o json > "$TMP/cq.json" 2>"$TMP/err"
    scrape > "$TMP/metrics"
    python3 - "$TMP/cq.json" "$TMP/metrics" "$want" "$preempted" <<'PY' && ok "$name: $want${preempted:+; preempted $preempted}" || not_ok "$name"
import json, re, sys
cqs = {i["metadata"]["name"]: i.get("status") for i in json.load(open(sys.argv[1]))}
metrics = open(sys.argv[2]).read()
def series(name, **labels):
    lab = ",".join('%s="%s"' % kv for kv in labels.items())
    m = re.search(r"^%s\{%s\} (\S+)$" % (re.escape(name), re.escape(lab)), metrics, re.M)
    return float(m.group(1)) if m else None
bad = []
for part in sys.argv[3].split(";"):
    cq, nums = part.split(":")
    cq = cq.strip()
    pending, admitted, used, nominal, borrowed = (float(x) for x in nums.split())
    st = cqs.get(cq) or {}
    gpu = st.get("usage", {}).get("nvidia.com/gpu", {})
    got = (st.get("pendingWorkloads"), st.get("admittedWorkloads"), gpu.get("used"),
           gpu.get("nominal"), gpu.get("borrowed"))
    if got != (pending, admitted, used, nominal, borrowed):
        bad.append("%s status %s, want %s" % (cq, got, (pending, admitted, used, nominal, borrowed)))
    m = (series("tenantd_queue_pending_workloads", cluster_queue=cq),
         series("tenantd_queue_admitted_workloads", cluster_queue=cq))
    if m != (pending, admitted):
        bad.append("%s metrics pending/admitted %s, want %s" % (cq, m, (pending, admitted)))
want_p = {}
for p in filter(None, sys.argv[4].split(";")):
    cq, level, n = p.split()
    want_p[(cq, level)] = float(n)
got_p = {(m.group(1), m.group(2)): float(m.group(3)) for m in re.finditer(
    r'^tenantd_queue_preemptions_total\{cluster_queue="([^"]*)",level="([^"]*)",mode="enforce"\} (\S+)$',
    metrics, re.M)}
if got_p != want_p:
    bad.append("preemptions %s, want %s" % (got_p, want_p))
for b in bad:
    print("    " + b)
sys.exit(1 if bad else 0)
PY
}

platform 4 > "$TMP/platform.yaml"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
export TENANTD_SERVER="http://127.0.0.1:$TD_PORT"
state "empty" "train: 0 0 0 4 0; serve: 0 0 0 2 0"

# burst (3) borrows 1 of train's unused GPUs; low-a (2) fits; low-b (2)
# finds 1 free in the cohort; urgent (2, high) preempts low-a in train.
submit ops burst 3 low
state "burst borrows" "train: 0 0 0 4 0; serve: 0 1 3 2 1"
submit lab low-a 2 low
submit lab low-b 2 low
state "low-b waits for the cohort" "train: 1 1 2 4 0; serve: 0 1 3 2 1"
submit lab urgent 2 high
state "urgent preempts low-a" "train: 2 1 2 4 0; serve: 0 1 3 2 1" "train InClusterQueue 1"
"$TENANTCTL" get workloads > "$TMP/all"
grep -Eq "^lab +low-a +Pending .*Evicted by lab/urgent \(InClusterQueue\)" "$TMP/all" &&
    ok "low-a is the one evicted" || { not_ok "low-a evicted"; cat "$TMP/all"; }

# burst finishes: low-b (queued first) gets train's nominal, low-a borrows serve's 2.
expect_rc "finish ops/burst" 0 "$TENANTCTL" finish burst -n ops
state "finish frees serve; train borrows" "train: 0 3 6 4 2; serve: 0 0 0 2 0" "train InClusterQueue 1"

# A smaller quota keeps what runs (as Kueue does): all of it above nominal now.
cq train 2 "{withinClusterQueue: LowerPriority}" > "$TMP/shrink.yaml"
expect_rc "apply train with nominalQuota 2" 0 "$TENANTCTL" apply -f "$TMP/shrink.yaml"
state "apply of a smaller quota" "train: 0 3 6 2 4; serve: 0 0 0 2 0" "train InClusterQueue 1"
submit lab late 1 low
state "late waits under the new quota" "train: 1 3 6 2 4; serve: 0 0 0 2 0" "train InClusterQueue 1"

r=$(rebuilds)
expect_rc "delete lab/urgent" 0 "$TENANTCTL" delete workload urgent -n lab
[ "$(rebuilds)" = $((r + 1)) ] && ok "a delete rebuilds the queue once (its pass)" || not_ok "delete: rebuilds $r -> $(rebuilds)"
state "delete frees 2; the cohort (4) is still full" "train: 1 2 4 2 2; serve: 0 0 0 2 0" "train InClusterQueue 1"

# SIGHUP reads the --config file again: train at 5 GPUs admits late.
platform 5 > "$TMP/platform.yaml"
kill -HUP "$TD_PID"
for _ in $(seq 1 100); do grep -q "SIGHUP: configuration reloaded" "$TMP/tenantd.log" && break; sleep 0.1; done
expect_grep "SIGHUP reloaded" "$TMP/tenantd.log" "SIGHUP: configuration reloaded"
state "SIGHUP with train at 5 admits late" "train: 0 3 5 5 0; serve: 0 0 0 2 0" "train InClusterQueue 1"

restart_same "restart: the view rebuilt from the records gives the same ClusterQueue status and queue series"
state "after the restart" "train: 0 3 5 5 0; serve: 0 0 0 2 0" "train InClusterQueue 1"

# ---- 20,000 stored workloads: reads rebuild nothing -----------------------
for k in 0 1 2 3; do
    python3 - "$k" > "$TMP/many$k.yaml" <<'PY'
import sys
k = int(sys.argv[1])
for i in range(k * 5000, (k + 1) * 5000):
    print("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w%05d, namespace: lab, "
          "labels: {kueue.x-k8s.io/queue-name: main}}\nspec:\n  podSets: [{name: main, count: 1, template: "
          "{spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: \"1\"}}}]}}}]\n---" % i)
PY
    expect_rc "submit 5,000 workloads (batch $((k + 1)) of 4)" 0 "$TENANTCTL" submit -f "$TMP/many$k.yaml"
done
# priority 0: the first two borrow serve's idle 2 GPUs, the rest wait
state "20,000 more: 2 borrow, the rest wait" "train: 19998 5 7 5 2; serve: 0 0 0 2 0" "train InClusterQueue 1"
r0=$(rebuilds)
sleep 2.5 # a metering tick on the newest snapshot reads the view too
for _ in $(seq 1 50); do echo "url = \"$TENANTD_SERVER/metrics\""; echo "output = /dev/null"; done > "$TMP/scrapes.cfg"
t0=$(date +%s%N)
curl -s --max-time 120 -K "$TMP/scrapes.cfg"
t1=$(date +%s%N)
for _ in $(seq 1 10); do "$TENANTCTL" get clusterqueues -o json > /dev/null; done
"$TENANTCTL" explain workload lab/late > "$TMP/explain" 2>&1
expect_grep "explain reads the view" "$TMP/explain" "late"
r1=$(rebuilds)
[ -n "$r0" ] && [ "$r0" = "$r1" ] && ok "50 scrapes, 10 ClusterQueue GETs, explain and a metering tick rebuild nothing (tenantd_queue_rebuilds_total $r0 -> $r1)" ||
    not_ok "reads rebuilt the queue: tenantd_queue_rebuilds_total $r0 -> $r1"
t2=$(date +%s%N)
for i in 1 2 3; do
    wl lab "one-$i" 1 none > "$TMP/one.yaml"
    "$TENANTCTL" submit -f "$TMP/one.yaml" > /dev/null || not_ok "submit one-$i"
done
t3=$(date +%s%N)
r2=$(rebuilds)
[ "$r2" = "$r1" ] && ok "3 submits rebuild nothing: the queue is kept between commits ($r1 -> $r2)" ||
    not_ok "3 commits: tenantd_queue_rebuilds_total $r1 -> $r2"
scrape_ms=$(((t1 - t0) / 1000000)) commit_ms=$(((t3 - t2) / 1000000))
echo "    50 scrapes: $scrape_ms ms; 3 one-workload commits over 20,000 workloads: $commit_ms ms"
[ "$scrape_ms" -lt 10000 ] && ok "50 scrapes take $scrape_ms ms (< 10 s: nothing rebuilt per scrape)" ||
    not_ok "50 scrapes took $scrape_ms ms"
state "the 3 wait too" "train: 20001 5 7 5 2; serve: 0 0 0 2 0" "train InClusterQueue 1"
TD_START_TENTHS=600 # loading 20,000 objects under ASan on a busy machine
restart_same "restart with 20,003 workloads: the rebuilt view equals the one the commits made"
stop_tenantd
finish
