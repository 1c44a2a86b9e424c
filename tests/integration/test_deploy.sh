# test_deploy.sh - deploy/ and deploy/monitoring/ against the real tenantd.
# 1. Each overlay renders with `kubectl kustomize`, with the objects, probes,
#    volumes, webhooks and certificates it should have (deploy_check.py).
# 2. Every flag of the rendered Deployment is one of `tenantd --help`, and a
#    real tenantd starts with exactly those args (paths under a temp root,
#    listeners on loopback), its rendered ConfigMap as --config and a P-256
#    certificate like cert-manager's: the probes' /healthz and /readyz answer
#    200 over HTTPS, /metrics wants the admin token.
# 3. The Deployment's pod template, as a Pod in the rendered Namespace
#    (pod-security.kubernetes.io/enforce: restricted), is allowed by
#    `tenantctl admit`; without its securityContext, or with any one of the
#    fields restricted requires broken, it is denied by PodSecurity.
# 4. promtool check rules, promtool test rules, the dashboard is JSON, every
#    alert's runbook is a section of docs/operations.md, and every metric
#    the rules and the dashboard read is served by a real tenantd with
#    traffic, workloads and a (dead) Redis; the exceptions are named below.
# kubectl (with kustomize v4+, kubectl >= 1.21) and promtool (Debian's
# prometheus) are installed by scripts/install-deps.sh; without them the
# test is skipped (exit 77), not passed.
. "$(dirname "$0")/lib.sh"
DEPLOY="$TD_SOURCE_DIR/deploy"
CHECK="$TD_SOURCE_DIR/tests/integration/deploy_check.py"
for tool in kubectl promtool; do
    command -v "$tool" >/dev/null ||
        { echo "SKIP: $tool is not installed (scripts/install-deps.sh installs it)"; exit 77; }
done
minor=$(kubectl version --client -o json 2>/dev/null |
    python3 -c 'import json,sys; print(int("".join(c for c in json.load(sys.stdin)["clientVersion"]["minor"] if c.isdigit())))' 2>/dev/null)
if [ "${minor:-0}" -lt 21 ]; then
    echo "SKIP: kubectl 1.${minor:-?} has kustomize v2/v3, too old for deploy/ (kubectl >= 1.21 needed)"
    exit 77
fi
python3 -c 'import yaml' 2>/dev/null || { echo "python3 yaml is required"; echo "0 passed, 1 failed"; exit 1; }

# checked CMD...: runs a deploy_check.py command and counts its ok/not ok
# lines; a command that fails (a traceback) is a failure too.
checked() {
    local line rc
    python3 "$CHECK" "$@" >"$TMP/check" 2>&1
    rc=$?
    while IFS= read -r line; do
        echo "$line"
        case $line in
        "ok - "*) PASS=$((PASS + 1)) ;;
        "not ok - "*) FAIL=$((FAIL + 1)) ;;
        esac
    done <"$TMP/check"
    [ "$rc" -eq 0 ] || not_ok "deploy_check.py $1 exited $rc"
}

# ---- 1. render ---------------------------------------------------------------
for o in single ha; do
    mkdir -p "$TMP/$o"
    expect_rc "kubectl kustomize deploy/overlays/$o" 0 kubectl kustomize "$DEPLOY/overlays/$o"
    cp "$TMP/out" "$TMP/$o.yaml"
    checked render "$o" "$TMP/$o.yaml" "$TMP/$o"
done

# ---- 2. the flags and a real start -------------------------------------------
"$TENANTD" --help >"$TMP/help" 2>&1
for o in single ha; do
    bad=""
    while IFS= read -r a; do
        case $a in
        --*) grep -qE -- "(^|[ ,])$a( |$)" "$TMP/help" || bad="$bad $a" ;;
        esac
    done <"$TMP/$o/args"
    [ -z "$bad" ] && ok "$o: every flag of the Deployment is in tenantd --help" ||
        not_ok "$o: flags tenantd does not have:$bad"
done
# The checker of flags can fail: a made-up flag is caught.
grep -qE -- "(^|[ ,])--no-such-flag( |$)" "$TMP/help" &&
    not_ok "the flag checker accepts a made-up flag" ||
    ok "the flag checker refuses a made-up flag (--no-such-flag)"
grep -qE -- "(^|[ ,])--database( |$)" "$TMP/help" && grep -qF 'TENANTD_DATABASE' "$TMP/help" &&
    ok "--database and \$TENANTD_DATABASE (what deploy/overlays/ha sets) are in tenantd --help" ||
    not_ok "--database or \$TENANTD_DATABASE missing from tenantd --help"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=tenantd.tenantd-system.svc \
    -addext subjectAltName=DNS:tenantd.tenantd-system.svc,DNS:tenantd.tenantd-system.svc.cluster.local \
    -keyout "$TMP/tls.key" -out "$TMP/tls.crt" 2>/dev/null
TOKEN=0123456789abcdef-deploy-test

# start_rendered OVERLAY: runs tenantd with the overlay's args, each mount
# path under $TMP/OVERLAY/root, listeners on 127.0.0.1:0; sets TD_PORT.
start_rendered() {
    local o=$1 root="$TMP/$1/root" name path a
    local args=()
    while read -r name path; do
        mkdir -p "$root$path"
        case $name in
        config) cp "$TMP/$o/config/"* "$root$path/" ;;
        tls) cp "$TMP/tls.crt" "$TMP/tls.key" "$root$path/" ;;
        admin-token) echo "$TOKEN" >"$root$path/token" ;;
        esac
    done <"$TMP/$o/mounts"
    while IFS= read -r a; do
        local orig=$a
        while read -r name path; do
            case $orig in "$path" | "$path"/*) a="$root$orig" ;; esac
        done <"$TMP/$o/mounts"
        case $a in
        0.0.0.0:*) a=127.0.0.1:0 ;;
        '$(TENANTD_REDIS)') a="127.0.0.1:$(free_port)" ;; # no Redis there: degraded
        esac
        args+=("$a")
    done <"$TMP/$o/args"
    rm -f "$TMP/$o/port"
    "$TENANTD" "${args[@]}" --port-file "$TMP/$o/port" 2>>"$TMP/$o/tenantd.log" &
    TD_PID=$!
    PIDS+=("$TD_PID")
    if ! wait_file "$TMP/$o/port" 100 "$TD_PID"; then
        not_ok "$o: tenantd did not start with the rendered args"; cat "$TMP/$o/tenantd.log"; return 1
    fi
    ok "$o: tenantd starts with the rendered args and ConfigMap"
    TD_PORT=$(cat "$TMP/$o/port")
}
for o in single ha; do
    start_rendered "$o" || continue
    for path in /healthz /readyz; do
        code=$(curl -sk -o "$TMP/body" -w '%{http_code}' "https://127.0.0.1:$TD_PORT$path")
        [ "$code" = 200 ] && ok "$o: probe GET $path over HTTPS: 200" || not_ok "$o: GET $path: $code"
    done
    code=$(curl -sk -o /dev/null -w '%{http_code}' "https://127.0.0.1:$TD_PORT/metrics")
    [ "$code" = 401 ] && ok "$o: /metrics without the token: 401" || not_ok "$o: /metrics without token: $code"
    code=$(curl -sk -o "$TMP/$o/metrics" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
        "https://127.0.0.1:$TD_PORT/metrics")
    [ "$code" = 200 ] && ok "$o: /metrics with the admin token from the Secret's file: 200" ||
        not_ok "$o: /metrics with token: $code"
    if [ "$o" = ha ]; then
        expect_grep "ha: --redis and --replicas taken (Redis unreachable here: degraded)" \
            "$TMP/$o/metrics" "tenantd_shared_limit_degraded 1"
    fi
    stop_tenantd
done

# ---- 3. the pod under Pod Security restricted ----------------------------------
# The test's AdmissionPolicy requires no cost labels, so that Pod Security is
# the rule that decides (tenantd's own namespace is outside its webhooks).
printf 'apiVersion: tenantd.dev/v1alpha1\nkind: AdmissionPolicy\nmetadata: {name: default}\nspec:\n  requiredLabels: []\n' \
    >"$TMP/policy.yaml"
decided_by() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["response"]; print(r["allowed"], r.get("status",{}).get("details",{}).get("kind",""))' "$1"; }
for o in single ha; do
    expect_rc "$o: tenantctl admit allows the Deployment's pod in its restricted namespace" 0 \
        "$TENANTCTL" admit -c "$TMP/$o/namespace.yaml" -c "$TMP/policy.yaml" -f "$TMP/$o/pod.yaml"
    [ "$(decided_by "$TMP/out")" = "True " ] && ok "$o: allowed, no rule objected" ||
        not_ok "$o: $(decided_by "$TMP/out")"
done
for how in no-securitycontext privilege-escalation capabilities root seccomp; do
    python3 "$CHECK" mutate "$TMP/single/pod.yaml" "$how" "$TMP/bad.yaml"
    expect_rc "the pod with $how is denied" 1 \
        "$TENANTCTL" admit -c "$TMP/single/namespace.yaml" -c "$TMP/policy.yaml" -f "$TMP/bad.yaml"
    [ "$(decided_by "$TMP/out")" = "False PodSecurity" ] && ok "$how: denied by PodSecurity" ||
        not_ok "$how: $(decided_by "$TMP/out")"
done

# ---- 4. monitoring -----------------------------------------------------------
MON="$DEPLOY/monitoring"
expect_rc "promtool check rules" 0 promtool check rules "$MON/tenantd-rules.yaml"
expect_rc "promtool test rules" 0 promtool test rules "$MON"/tests/*.yaml
grep -q SUCCESS "$TMP/out" && ! grep -q FAILED "$TMP/out" && ok "every rule unit test passed" ||
    { not_ok "promtool test rules"; cat "$TMP/out"; }
expect_rc "the dashboard is JSON" 0 python3 -m json.tool "$MON/tenantd-dashboard.json"
checked runbooks "$MON/tenantd-rules.yaml" "$TD_SOURCE_DIR/docs/operations.md"

# A tenantd with every kind of series: gateway traffic (accepted, 429 by
# rate, by budget), budgets of a tenant, of a named key and for a model, a CostPolicy,
# the ledger, a ClusterQueue with an admitted and a pending workload, an
# admission review, requests waiting in a route's queue, and --redis to a
# port where nothing listens (so the shared budgets' series exist).
start_simmodel --slots 1 --ms-per-token 15 || { finish; exit 1; }
cat >"$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  labels: {team: alpha, project: search, environment: prod}
  apiKeys: [{sha256: "$(sha key-alpha)", name: ci, budgets: [{amount: "50", period: day}]}]
  gateway: {rate: {cost: 1000000, per: 1s, burst: 1000000}, concurrency: 64}
  budgets: [{amount: "100", period: day}, {amount: "90", period: day, models: [m]}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  namespaces: [beta-prod]
  labels: {team: beta, project: ranking, environment: dev}
  apiKeys: [{sha256: "$(sha key-beta)"}]
  gateway: {rate: {cost: 60, per: 1s, burst: 60}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: gamma}
spec:
  namespaces: [gamma-prod]
  labels: {team: gamma, project: ads, environment: prod}
  apiKeys: [{sha256: "$(sha key-gamma)"}]
  budgets: [{amount: "0.000001", period: day}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 1, queue: 64}
  cost: {model: tokens}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {resource: nvidia.com/gpu, flavor: a100, perHour: "2.50"}
  - {resource: cpu, perHour: "0.031"}
  - {route: chat, per1kTokensIn: "0.002", per1kTokensOut: "0.006"}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: a100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-alpha}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: alpha-prod}
spec: {clusterQueue: cq-alpha}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a-prod, labels: {team: a, project: search, environment: prod}}
Y
echo "$TOKEN" >"$TMP/token"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --admin-token-file "$TMP/token" \
    --redis "127.0.0.1:$(free_port)" --replicas 3 || { finish; exit 1; }
ADMIN="http://127.0.0.1:$TD_PORT"
GW="http://127.0.0.1:$TD_DATA_PORT"
req() { curl -s --max-time 30 -o /dev/null -w '%{http_code}\n' -H "Authorization: Bearer $1" \
    -d "{\"model\":\"m\",\"prompt\":\"deploy\",\"max_tokens\":$2}" "$GW/v1/completions"; }
for i in 1 2 3; do req key-alpha 4; done >"$TMP/codes"
for i in $(seq 1 12); do req key-beta 20; done >>"$TMP/codes"
req key-gamma 4 >>"$TMP/codes"
grep -qx 200 "$TMP/codes" && grep -qx 429 "$TMP/codes" && ok "gateway traffic: 200s and 429s" ||
    { not_ok "gateway traffic"; sort "$TMP/codes" | uniq -c; }
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: train, namespace: alpha-prod}\nspec:\n  queueName: lq\n  podSets: [{name: main, count: 2, template: {spec: {containers: [{name: t, resources: {requests: {cpu: "2", nvidia.com/gpu: "3"}}}]}}}]\n---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: big, namespace: alpha-prod}\nspec:\n  queueName: lq\n  podSets: [{name: main, count: 1, template: {spec: {containers: [{name: t, resources: {requests: {nvidia.com/gpu: "8"}}}]}}}]\n' >"$TMP/wl.yaml"
code=$(curl -s -o "$TMP/submit" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    --data-binary @"$TMP/wl.yaml" "$ADMIN/v1/workloads")
[ "$code" = 200 ] && ok "workloads submitted (one admitted, one pending)" || { not_ok "submit: $code"; cat "$TMP/submit"; }
code=$(curl -s -o /dev/null -w '%{http_code}' --data-binary @"$EX/pods/review.json" "$ADMIN/validate")
[ "$code" = 200 ] && ok "an admission review decided" || not_ok "/validate: $code"
# Requests waiting: one slot upstream, each request ~1.5 s; scrape while
# the others queue behind the first.
for i in 1 2 3 4; do req key-alpha 100 >/dev/null & done
seen=0
for _ in $(seq 1 60); do
    curl -s -H "Authorization: Bearer $TOKEN" "$ADMIN/metrics" >"$TMP/metrics.q"
    if grep -qE '^tenantd_queue_depth{.*} [1-9]' "$TMP/metrics.q" && grep -qE '^tenantd_inflight{.*} [1-9]' "$TMP/metrics.q"; then
        seen=1; break
    fi
    sleep 0.1
done
[ "$seen" = 1 ] && ok "scraped while requests queued and in flight" || not_ok "never saw requests queued"
wait_background() { local j; for j in $(jobs -p); do case " ${PIDS[*]} " in *" $j "*) ;; *) wait "$j";; esac; done; }
wait_background
# metering: GPUs in use, cost and the ledger once it has committed
settled=0
for _ in $(seq 1 60); do
    curl -s -H "Authorization: Bearer $TOKEN" "$ADMIN/metrics" >"$TMP/metrics"
    if grep -q '^tenantd_cost_total{' "$TMP/metrics" &&
        grep -qF 'tenantd_gpus_in_use{tenant="alpha"} 6' "$TMP/metrics"; then
        settled=1; break
    fi
    sleep 0.25
done
[ "$settled" = 1 ] && ok "metering ticked: cost priced, alpha holds 6 GPUs" ||
    { not_ok "metering did not tick"; grep -E 'cost_total|gpus_in_use' "$TMP/metrics"; }
cat "$TMP/metrics.q" >>"$TMP/metrics"

# Names not served by tenantd on purpose, each with its reason:
EXTERNAL="up apiserver_admission_webhook_admission_duration_seconds_bucket apiserver_admission_webhook_rejection_count"
# Served by tenantd only when the event happened (none here): their names
# must be in the source.
CONDITIONAL="tenantd_queue_preemptions_total tenantd_gateway_dns_lookup_failures_total"
# served NAME: "live" when a sample of NAME is in the scrape, "conditional"
# when it is a conditional name that the source prints, "external", else
# "missing".
served() {
    case " $EXTERNAL " in *" $1 "*) echo external; return ;; esac
    if grep -qE "^$1(\{| )" "$TMP/metrics"; then echo live; return; fi
    case " $CONDITIONAL " in
    *" $1 "*) grep -rqF "\"$1" "$TD_SOURCE_DIR/src" && { echo conditional; return; } ;;
    esac
    echo missing
}
python3 "$CHECK" metrics "$MON/tenantd-rules.yaml" "$MON/tenantd-dashboard.json" >"$TMP/names"
[ "$(wc -l <"$TMP/names")" -gt 15 ] && ok "$(wc -l <"$TMP/names") metric names read by the rules and the dashboard" ||
    not_ok "only $(wc -l <"$TMP/names") metric names found"
while read -r n; do
    s=$(served "$n")
    [ "$s" != missing ] && ok "$n: $s" || not_ok "$n: neither served by a real tenantd nor an exception"
done <"$TMP/names"
# The manuals: every metric name docs/*.md and the README mention is served
# (a name inside a recording rule's name, a:tenantd_x:b, is the rule's),
# and every family the scrape has is in docs/daemon.md's table of /metrics.
grep -ohP '(?<![:\w])tenantd_[a-z0-9_]+(?![:\w])' "$TD_SOURCE_DIR"/docs/*.md "$TD_SOURCE_DIR/README.md" |
    sort -u >"$TMP/docnames"
# not metrics: the CMake library of README's build section, and the
# PostgreSQL store's tables and NOTIFY channel, the lease's and the shared
# ledger's tables (docs/replicas.md)
NOT_METRICS="tenantd_lib tenantd_schema tenantd_generation tenantd_objects tenantd_leader tenantd_ledger"
[ "$(wc -l <"$TMP/docnames")" -gt 25 ] && ok "$(wc -l <"$TMP/docnames") metric names in the manuals" ||
    not_ok "only $(wc -l <"$TMP/docnames") metric names in the manuals"
while read -r n; do
    case " $NOT_METRICS " in *" $n "*) continue ;; esac
    # a histogram is served as NAME_bucket, _sum, _count
    s=$(served "$n")
    [ "$s" = missing ] && grep -qE "^${n}_(bucket|count)(\{| )" "$TMP/metrics" && s=live
    [ "$s" != missing ] && ok "docs: $n: $s" || not_ok "docs name $n: not served by a real tenantd"
done <"$TMP/docnames"
sed -n 's/^# TYPE \([a-z_0-9]*\) .*/\1/p' "$TMP/metrics" | sort -u >"$TMP/families"
[ "$(wc -l <"$TMP/families")" -gt 25 ] && ok "$(wc -l <"$TMP/families") metric families served" ||
    not_ok "only $(wc -l <"$TMP/families") families served"
undocumented=""
while read -r f; do
    grep -qF "\`$f" "$TD_SOURCE_DIR/docs/daemon.md" || undocumented="$undocumented $f"
done <"$TMP/families"
[ -z "$undocumented" ] && ok "every family /metrics serves is in docs/daemon.md" ||
    not_ok "served and not in docs/daemon.md:$undocumented"
promtool check metrics <"$TMP/metrics.q" >"$TMP/lint" 2>&1 &&
    ok "promtool check metrics: the scrape is clean" || { not_ok "promtool check metrics"; head "$TMP/lint"; }
# The name check can fail: a metric tenantd does not export is caught.
echo 'sum by (tenant) (rate(tenantd_made_up_total{tenant="a"}[5m])) / on (tenant) tenantd_requests_total' |
    python3 "$CHECK" names >"$TMP/made"
grep -qx tenantd_made_up_total "$TMP/made" && [ "$(served tenantd_made_up_total)" = missing ] &&
    ok "a made-up metric name in a query is found and reported missing" ||
    not_ok "the name check missed tenantd_made_up_total: $(cat "$TMP/made")"
# Every label value a query selects: in the scrape, else a string the
# source prints (an alert on a value tenantd never emits would never fire).
python3 "$CHECK" labels "$MON/tenantd-rules.yaml" "$MON/tenantd-dashboard.json" >"$TMP/labels"
[ -s "$TMP/labels" ] && ok "$(wc -l <"$TMP/labels") label values selected by the queries" || not_ok "no label values found"
while read -r metric label value; do
    case $metric in
    tenantd_*)
        if grep -qE "^$metric\{([^}]*,)?$label=\"$value\"" "$TMP/metrics"; then
            ok "$metric{$label=\"$value\"}: live"
        elif grep -rqF "\"$value\"" "$TD_SOURCE_DIR/src/gateway" "$TD_SOURCE_DIR/src/daemon" "$TD_SOURCE_DIR/src/io"; then
            ok "$metric{$label=\"$value\"}: a value the source prints (not seen here)"
        else
            not_ok "$metric{$label=\"$value\"}: tenantd never prints $label=\"$value\""
        fi ;;
    up)
        [ "$label $value" = "job tenantd" ] && grep -qF "job_name: tenantd" "$TD_SOURCE_DIR/docs/operations.md" &&
            ok "up{job=\"tenantd\"}: the scrape job of docs/operations.md" || not_ok "up{$label=\"$value\"}" ;;
    apiserver_*)
        [ "$label" = name ] && checked webhook-regex "$TMP/single.yaml" "${value#\~}" ||
            { [ "$label" = name ] || not_ok "$metric: unexpected matcher $label"; } ;;
    *) not_ok "$metric{$label=\"$value\"}: not a metric this test knows" ;;
    esac
done <"$TMP/labels"

# ---- 5. backup and restore as docs/operations.md says ----------------------
# SQLite's online backup of the running tenantd's two files, then a new
# tenantd on the copies: the objects, the workloads and the ledger are there.
mkdir -p "$TMP/restore"
for f in tenantd.db ledger.db; do
    expect_rc "sqlite3 .backup of the running tenantd's $f" 0 \
        sqlite3 "$TMP/data/$f" ".backup $TMP/restore/$f"
    [ "$(sqlite3 "$TMP/restore/$f" 'PRAGMA integrity_check')" = ok ] && ok "$f backup: integrity ok" ||
        not_ok "$f backup: integrity_check failed"
done
n=$(sqlite3 "$TMP/restore/ledger.db" 'SELECT count(*) FROM records')
[ "${n:-0}" -gt 0 ] && ok "the ledger's backup holds $n records" || not_ok "no records in the ledger's backup"
stop_tenantd
expect_rc "tenantctl report reads the restored ledger" 0 \
    "$TENANTCTL" report --data "$TMP/restore" -c "$TMP/platform.yaml" --format csv
expect_grep "the restored ledger bills alpha's requests" "$TMP/out" ",alpha,alpha,search,prod,tokens/chat,"
start_tenantd "$TMP/restore" --admin-token-file "$TMP/token" || { finish; exit 1; }
expect_rc "tenantd on the restored store: get workloads" 0 env TENANTD_TOKEN_FILE="$TMP/token" \
    "$TENANTCTL" get workloads -n alpha-prod --server "http://127.0.0.1:$TD_PORT"
expect_grep "the restored store has the admitted workload" "$TMP/out" "train"
expect_grep "the restored store has the pending workload" "$TMP/out" "big"
expect_rc "tenantd on the restored store: get tenants" 0 env TENANTD_TOKEN_FILE="$TMP/token" \
    "$TENANTCTL" get tenants --server "http://127.0.0.1:$TD_PORT"
expect_grep "the restored store has the tenants" "$TMP/out" "gamma"
stop_tenantd
finish
