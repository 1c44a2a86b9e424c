#!/usr/bin/env bash
# demo.sh - what `make demo` shows: tenantd's admission deciding example pods
# against examples/platform.yaml (quota, LimitRange, cost labels, Pod
# Security, GPU pools), then a provisioned namespace baseline.
set -u
BUILD=${1:-build}
CTL="$BUILD/tenantctl"
EX=examples
bold() { printf '\n\033[1m%s\033[0m\n' "$*"; }

bold "1. Kubernetes quantities, canonical as kube-apiserver prints them"
for q in 1024Mi 0.5 1.5Gi 1000m 0.1m 12E; do
    printf '  %-8s -> %s\n' "$q" "$("$CTL" quantity "$q")"
done

bold "2. Admission against $EX/platform.yaml (two teams, two GPU pools)"
for pod in allowed defaulted gpu over-quota privileged missing-label wrong-pool; do
    printf '\n# %s\n' "$(sed -n '1p' "$EX/pods/$pod.yaml" | sed 's/^# //')"
    extra=()
    [ "$pod" = gpu ] && extra=(--used "$EX/pods/used.yaml")
    "$CTL" admit -c "$EX/platform.yaml" -f "$EX/pods/$pod.yaml" "${extra[@]}" -o summary
done

bold "3. The same decision as a webhook would answer (AdmissionReview v1)"
"$CTL" admit -c "$EX/platform.yaml" -f "$EX/pods/review.json" -q | head -20

bold "4. A namespace baseline for team ml, env prod (tenantctl provision)"
"$CTL" provision --team ml --env prod --cpu 64 --memory 256Gi --gpus 8 |
    awk '/^kind:/ {k=$2} /^  name:/ && k {printf "  %-15s %s\n", k, $2; k=""}'
echo
echo "Run 'tenantd --config $EX/platform.yaml --data /tmp/tenantd' to serve these decisions"
echo "as a webhook; see README.md."
