# test_webhook_answer.sh - the webhook's answers, written straight to bytes
# by the daemon (td_admission_review_body), against the real tenantd: the
# same bytes as the tree `tenantctl admit` prints, for an allowed review
# with a patch, a shadow warning, a denial, a passed DELETE and a body that
# is not JSON; and /metrics counts each decision by what its answer says.
. "$(dirname "$0")/lib.sh"

# the example platform with PodSecurity in shadow
awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/\nkind: AdmissionPolicy\n/' "$EX/platform.yaml" > "$TMP/platform.yaml"
cat >> "$TMP/platform.yaml" <<'Y'
apiVersion: tenantd.dev/v1alpha1
kind: AdmissionPolicy
metadata: {name: roll-out}
spec:
  requiredLabels: [team, project, environment]
  inheritLabelsFromNamespace: true
  enforcement: {PodSecurity: shadow}
---
apiVersion: v1
kind: Namespace
metadata:
  name: team-w
  labels: {team: w, project: w, environment: dev,
           pod-security.kubernetes.io/enforce: baseline, pod-security.kubernetes.io/enforce-version: v1.22,
           pod-security.kubernetes.io/warn: restricted,
           pod-security.kubernetes.io/audit: restricted, pod-security.kubernetes.io/audit-version: v1.22}
Y

# review.json: an AdmissionReview of the pod in YAML file $1, operation $2
review() {
    python3 - "$1" "$2" <<'P'
import json, sys, yaml
pod = next(d for d in yaml.safe_load_all(open(sys.argv[1])) if d)
ns = pod.get("metadata", {}).get("namespace", "team-a-prod")
print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": "u-" + sys.argv[2], "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "namespace": ns, "operation": sys.argv[2], "object": pod,
                              "userInfo": {"username": "x"}, "dryRun": False}}))
P
}
review "$EX/pods/privileged.yaml" CREATE > "$TMP/priv.json"
review "$EX/pods/defaulted.yaml" CREATE > "$TMP/defaulted.json"
review "$EX/pods/over-quota.yaml" CREATE > "$TMP/over.json"
review "$EX/pods/allowed.yaml" DELETE > "$TMP/delete.json"
# Pod Security warn and audit: a pod baseline allows and
# restricted does not; a Deployment with it as its template (item 11)
cat > "$TMP/warned.yaml" <<'Y'
apiVersion: v1
kind: Pod
metadata: {name: w, namespace: team-w}
spec:
  containers: [{name: c, image: x, securityContext: {runAsUser: 0}}]
Y
review "$TMP/warned.yaml" CREATE > "$TMP/warned.json"
python3 - "$TMP/warned.json" > "$TMP/deploy.json" <<'P'
import json, sys
r = json.load(open(sys.argv[1]))
pod = r["request"]["object"]
r["request"]["uid"] = "u-deploy"
r["request"]["kind"] = {"group": "apps", "version": "v1", "kind": "Deployment"}
r["request"]["object"] = {"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": "d", "namespace": "team-w"},
                          "spec": {"template": {"metadata": {"labels": {"app": "d"}}, "spec": pod["spec"]}}}
print(json.dumps(r))
P

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
URL="http://127.0.0.1:$TD_PORT"

# post NAME PATH FILE: the daemon's answer to $TMP/NAME.got
post() { curl -s --data-binary @"$3" "$URL$2" > "$TMP/$1.got"; }

# same NAME MODE FILE: the daemon's bytes are the compact form of the tree
# `tenantctl admit` prints (key order kept)
same() {
    "$TENANTCTL" admit -q -f "$3" -c "$TMP/platform.yaml" --mode "$2" > "$TMP/$1.cli" 2>/dev/null
    python3 -c 'import json, sys; sys.stdout.write(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":"), ensure_ascii=False))' \
        "$TMP/$1.cli" > "$TMP/$1.want"
    if cmp -s "$TMP/$1.want" "$TMP/$1.got"; then ok "$1: the same bytes as tenantctl admit"; else
        not_ok "$1: differs"; echo "    got:  $(cat "$TMP/$1.got")"; echo "    want: $(cat "$TMP/$1.want")"
    fi
}

post priv /validate "$TMP/priv.json"
expect_grep "a shadow rule's denial is a warning" "$TMP/priv.got" '"allowed":true,"status":{"code":200},"warnings":["tenantd shadow: PodSecurity would deny: '
expect_grep "and an audit annotation" "$TMP/priv.got" '"auditAnnotations":{"tenantd.dev/shadow-PodSecurity":'
same priv validate "$TMP/priv.json"

post defaulted /admit "$TMP/defaulted.json"
expect_grep "admit sends the patch" "$TMP/defaulted.got" '"patchType":"JSONPatch","patch":"'
same defaulted both "$TMP/defaulted.json"
post defaulted-m /mutate "$TMP/defaulted.json"
same defaulted-m mutate "$TMP/defaulted.json"

post over /validate "$TMP/over.json"
expect_grep "a denial names its rule" "$TMP/over.got" '"details":{"kind":"ResourceQuota"}'
same over validate "$TMP/over.json"

post delete /validate "$TMP/delete.json"
expect_grep "DELETE passes with the uid echoed" "$TMP/delete.got" '"response":{"uid":"u-DELETE","allowed":true}}'

printf '{"kind": tru' > "$TMP/garbage"
code=$(curl -s -o "$TMP/garbage.got" -w '%{http_code}' --data-binary @"$TMP/garbage" "$URL/validate")
[ "$code" = 200 ] && ok "a body that is not JSON: 200 with a review" || not_ok "not JSON: HTTP $code"
expect_grep "its answer says why" "$TMP/garbage.got" '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"","allowed":false,"status":{"code":400,"message":"request body is not JSON: line 1: '

curl -s "$URL/metrics" > "$TMP/metrics"
# allowed: priv, defaulted twice, delete; denied: over (quota), garbage (other)
expect_grep "allowed counted" "$TMP/metrics" 'tenantd_admission_decisions_total{rule="",decision="allowed",mode="enforce"} 4'
expect_grep "quota denial counted" "$TMP/metrics" 'tenantd_admission_decisions_total{rule="ResourceQuota",decision="denied",mode="enforce"} 1'
expect_grep "bad body counted as other" "$TMP/metrics" 'tenantd_admission_decisions_total{rule="other",decision="denied",mode="enforce"} 1'
expect_grep "shadow rule counted" "$TMP/metrics" 'tenantd_admission_decisions_total{rule="PodSecurity",decision="denied",mode="shadow"} 1'
post warned /validate "$TMP/warned.json"
expect_grep "warn level: a warning" "$TMP/warned.got" '"warnings":["would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false'
expect_grep "warn level: runAsUser=0 at latest" "$TMP/warned.got" 'runAsUser=0 (container \"c\" must not set runAsUser=0)'
expect_grep "audit level: at its version" "$TMP/warned.got" '"auditAnnotations":{"pod-security.kubernetes.io/audit-violations":"would violate PodSecurity \"restricted:v1.22\": '
same warned validate "$TMP/warned.json"
post warned-m /mutate "$TMP/warned.json"
if grep -q '"warnings"' "$TMP/warned-m.got"; then not_ok "/mutate leaves warnings to /validate"; else ok "/mutate leaves warnings to /validate"; fi
post deploy /validate "$TMP/deploy.json"
expect_grep "a Deployment is allowed" "$TMP/deploy.got" '"uid":"u-deploy","allowed":true'
expect_grep "its template warned on" "$TMP/deploy.got" '"warnings":["would violate PodSecurity \"restricted:latest\": '
same deploy validate "$TMP/deploy.json"
stop_tenantd
finish
