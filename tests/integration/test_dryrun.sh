# test_dryrun.sh - `tenantctl admit --server`: the running tenantd decides a
# pod against its live objects (the quota's usage from the pods it holds),
# prints the same AdmissionReview as the offline decision, and stores
# nothing.
. "$(dirname "$0")/lib.sh"

start_tenantd "$TMP/data" --config "$EX/platform.yaml" || { finish; exit 1; }
SRV=(--server "http://127.0.0.1:$TD_PORT")

expect_rc "live: a 2-GPU pod in an empty namespace is allowed" 0 \
    "$TENANTCTL" admit "${SRV[@]}" -f "$EX/pods/gpu.yaml"
cp "$TMP/out" "$TMP/live.json"
expect_rc "offline: the same pod" 0 "$TENANTCTL" admit -c "$EX/platform.yaml" -f "$EX/pods/gpu.yaml" -q
cmp -s "$TMP/out" "$TMP/live.json" && ok "live and offline reviews are byte-identical" ||
    { not_ok "live and offline reviews differ"; diff "$TMP/out" "$TMP/live.json" | head; }

# Four running pods take the namespace's 8 GPUs.
for i in 1 2 3 4; do cat <<Y
apiVersion: v1
kind: Pod
metadata: {name: running-$i, namespace: team-a-prod}
spec:
  containers:
  - name: main
    image: x
    resources:
      requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "2"}
      limits: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "2"}
---
Y
done > "$TMP/running.yaml"
expect_rc "apply 4 running pods" 0 "$TENANTCTL" apply "${SRV[@]}" -f "$TMP/running.yaml"
expect_rc "live: the pod is now over the quota" 1 "$TENANTCTL" admit "${SRV[@]}" -f "$EX/pods/gpu.yaml"
expect_grep "the message is Kubernetes' quota message with the live usage" "$TMP/err" \
    "exceeded quota: team-a-compute, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"
expect_rc "offline without usage still allows it" 0 \
    "$TENANTCTL" admit -c "$EX/platform.yaml" -f "$EX/pods/gpu.yaml" -q
expect_rc "get pods" 0 "$TENANTCTL" get pods -n team-a-prod "${SRV[@]}" -o json
[ "$(grep -c '"name": "running-' "$TMP/out")" = 4 ] && ! grep -q finetune "$TMP/out" &&
    ok "the dry run stored nothing (4 pods, no finetune)" || not_ok "stored pods: $(cat "$TMP/out")"
expect_rc "live: --mode validate" 1 "$TENANTCTL" admit "${SRV[@]}" -f "$EX/pods/gpu.yaml" --mode validate
expect_rc "live: bad input is exit 2" 2 "$TENANTCTL" admit "${SRV[@]}" -f /nonexistent.yaml
expect_rc "live: unreachable tenantd is exit 3" 3 "$TENANTCTL" admit --server http://127.0.0.1:1 \
    -f "$EX/pods/gpu.yaml"
stop_tenantd
finish
