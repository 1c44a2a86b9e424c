# test_dashboard.sh - the dashboard in a real browser: tenantd (admin token)
# in front of simmodel with traffic (accepted and 429s) in a few rounds,
# workloads in two ClusterQueues of a cohort (one borrowing, one pending)
# and an inactive one; headless Chromium loads /ui at 1,280 and 1,920 px.
# Checked: no horizontal scroll at 1,280; every number of the tenants'
# table against /metrics; the charts' requests against /metrics; the
# ClusterQueues' GPUs against `tenantctl get clusterqueues`; the budgets
# against tenantd_budget_spent; one sign-in state without a token (and
# with a wrong one); a tenant's key sees its own tenant only, in the page
# and in the JSON (another tenant's is 403). Screenshots are saved in the
# temp dir and kept as $TD_BIN/dashboard-{1280,1920,signin,beta}.png. Without
# chromium the test is skipped (exit 77), not passed.
. "$(dirname "$0")/lib.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "SKIP: chromium is not installed (scripts/install-deps.sh installs it)"
    exit 77
fi
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 4 --ms-per-token 0.2 || { finish; exit 1; }
cat >"$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  labels: {team: alpha, project: search, environment: prod}
  apiKeys: [{sha256: "$(sha key-alpha)"}]
  gateway: {rate: {cost: 1000000, per: 1s, burst: 1000000}, concurrency: 64}
  budgets: [{amount: "5.00", period: month}, {amount: "0.0001", period: day, enforcement: shadow}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  namespaces: [beta-prod]
  labels: {team: beta, project: ranking, environment: dev}
  apiKeys: [{sha256: "$(sha key-beta)"}]
  gateway: {rate: {cost: 100, per: 1s, burst: 100}, concurrency: 8}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM", capacity: 16, queue: 64}
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
  cohort: pool
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-beta}
spec:
  namespaceSelector: {}
  cohort: pool
  resourceGroups:
  - coveredResources: [cpu, nvidia.com/gpu]
    flavors:
    - name: a100
      resources:
      - {name: cpu, nominalQuota: 32}
      - {name: nvidia.com/gpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: cq-idle}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 2}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: alpha-prod}
spec: {clusterQueue: cq-alpha}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: lq, namespace: beta-prod}
spec: {clusterQueue: cq-beta}
Y
TOKEN=0123456789abcdef-dashboard
echo "$TOKEN" >"$TMP/token"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --admin-token-file "$TMP/token" ||
    { finish; exit 1; }
ADMIN="http://127.0.0.1:$TD_PORT"
GW="http://127.0.0.1:$TD_DATA_PORT"
# Requests in rounds 6 s apart: sampled at least 10 s apart, in two buckets or more.
for round in 1 2 3; do
    for i in $(seq 1 3); do
        curl -s -o /dev/null -H "Authorization: Bearer key-alpha" \
            -d "{\"model\":\"m\",\"prompt\":\"dashboard $round $i\",\"max_tokens\":$((10 + i))}" \
            "$GW/v1/completions"
    done
    for i in $(seq 1 $((round * 2))); do
        curl -s -o /dev/null -H "Authorization: Bearer key-beta" \
            -d '{"model":"m","prompt":"beta","max_tokens":40}' "$GW/v1/completions"
    done
    [ "$round" = 3 ] || sleep 6
done
submit() { # NS NAME PODS GPUS_PER_POD
    printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: %s, namespace: %s}\nspec:\n  queueName: lq\n  podSets: [{name: main, count: %s, template: {spec: {containers: [{name: t, resources: {requests: {cpu: "2", nvidia.com/gpu: "%s"}}}]}}}]\n' \
        "$2" "$1" "$3" "$4" >"$TMP/wl.yaml"
    curl -s -o "$TMP/submit" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
        --data-binary @"$TMP/wl.yaml" "$ADMIN/v1/workloads"
}
# alpha takes 10 GPUs: its 8 and 2 borrowed from cq-beta; beta's 6 then wait.
code=$(submit alpha-prod train 2 5)
[ "$code" = 200 ] && ok "a 10-GPU workload submitted" || { not_ok "submit: $code"; cat "$TMP/submit"; }
code=$(submit beta-prod tune 2 3)
[ "$code" = 200 ] && ok "a 6-GPU workload submitted (it waits)" || { not_ok "submit: $code"; cat "$TMP/submit"; }
# Wait for a metering tick (GPUs in use) and for the ledger to have
# committed everything (the records counter unchanged for 1.6 s: rejections
# are flushed each second, commits every 0.2 s), then for the history to
# hold every request: then nothing moves while the page is read.
settled=0 prev=-1 same=0
for _ in $(seq 1 60); do
    curl -s -H "Authorization: Bearer $TOKEN" "$ADMIN/metrics" >"$TMP/metrics"
    n=$(sed -n 's/^tenantd_ledger_records_total //p' "$TMP/metrics")
    if [ "$n" = "$prev" ]; then same=$((same + 1)); else same=0; fi
    prev=$n
    if [ "$same" -ge 4 ] && [ "${n:-0}" -gt 0 ] &&
        grep -qF 'tenantd_gpus_in_use{tenant="alpha"} 10' "$TMP/metrics"; then
        settled=1
        break
    fi
    sleep 0.4
done
[ "$settled" = 1 ] && ok "metering settled: $n records committed, alpha holds 10 GPUs" ||
    { not_ok "metering did not settle"; grep -E 'ledger|gpus_in_use' "$TMP/metrics"; }
# The history is sampled at each metering tick (2 s): wait for the one
# that saw every request /metrics counts.
sampled=0
for _ in $(seq 1 40); do
    curl -s -H "Authorization: Bearer $TOKEN" "$ADMIN/v1/dashboard" >"$TMP/dash.json"
    python3 - "$TMP/dash.json" "$TMP/metrics" <<'P' && { sampled=1; break; }
import json, re, sys
h = json.load(open(sys.argv[1]))["history"]["tenants"]
inh = sum(sum(v) for t in ("alpha", "beta") for k, v in h[t].items() if k not in ("p99Ms", "cost"))
n = sum(float(v) for t, v in re.findall(r'^tenantd_requests_total\{tenant="(alpha|beta)".*\} (\S+)$',
                                         open(sys.argv[2]).read(), re.M))
sys.exit(0 if inh == n else 1)
P
    sleep 0.25
done
[ "$sampled" = 1 ] && ok "the history holds every request /metrics counts" ||
    not_ok "the history did not catch up with /metrics"
"$TENANTCTL" get clusterqueues --server "$ADMIN" --token-file "$TMP/token" >"$TMP/cqs.txt" 2>&1
cat "$TMP/cqs.txt"
grep -Eq "^cq-idle +0 +0 +0/2 \(0\) +inactive: Can't admit new workloads: references missing ResourceFlavor\(s\): h100" "$TMP/cqs.txt" &&
    ok "tenantctl get clusterqueues says cq-idle is inactive, and why" || not_ok "cq-idle not shown inactive"
grep -Eq "^cq-alpha +pool +0 +1 +10/8 \(2\) +active$" "$TMP/cqs.txt" &&
    ok "and cq-alpha active, borrowing 2 GPUs" || not_ok "cq-alpha not shown active"

# ---- the JSON: history against /metrics, queues against tenantctl ------
python3 - "$TMP/dash.json" "$TMP/metrics" "$TMP/cqs.txt" >"$TMP/jsoncheck" 2>&1 <<'P'
import json, re, sys
from datetime import datetime
d = json.load(open(sys.argv[1]))
metrics = {}
for line in open(sys.argv[2]):
    if line.startswith("#") or not line.strip(): continue
    name_labels, value = line.rsplit(" ", 1)
    m = re.match(r'([a-z_]+)(?:\{(.*)\})?$', name_labels)
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
    metrics.setdefault(m.group(1), []).append((labels, float(value)))
def msum(name, **want):
    return sum(v for l, v in metrics.get(name, []) if all(l.get(k) in (x if isinstance(x, tuple) else (x,)) for k, x in want.items()))
fails = 0
def check(what, got, want, tol=1e-9):
    global fails
    good = abs(got - want) <= tol
    print("ok" if good else "MISMATCH", what, "got", got, "want", want)
    fails += not good
groups = {"accepted": ("accepted",), "limited": ("rate_limited", "concurrency_limited", "budget_exceeded"),
          "shed": ("shed",), "errors": ("upstream_error", "timeout")}
h = d["history"]
check("history: 360 buckets of 10 s", h["buckets"] * h["bucketSeconds"], 3600)
for t in ("alpha", "beta"):
    s = h["tenants"][t]
    for g, outs in groups.items():
        check(f"{t} {g} in the hour", sum(s[g]), msum("tenantd_requests_total", tenant=t, outcome=outs))
    check(f"{t}: requests in more than one bucket", min(sum(1 for x in s["accepted"] if x), 2), 2)
    check(f"{t}: a p99 where requests reached the upstream", min(sum(1 for x in s["p99Ms"] if x), 1), 1)
beta_cost = [x for x in d["tenants"] if x["name"] == "beta"][0]["cost"]
check("beta: the hour's cost is its cost this period", sum(h["tenants"]["beta"]["cost"]), beta_cost)
# tenantctl get clusterqueues: NAME COHORT PENDING ADMITTED USED/NOMINAL (BORROWED)
cli = {}
for line in open(sys.argv[3]).read().splitlines()[1:]:
    m = re.match(r'(\S+)\s+(\S*)\s+(\d+)\s+(\d+)\s+([\d.]+)/([\d.]+) \(([\d.]+)\)', line)
    if m: cli[m.group(1)] = [float(x) for x in m.group(3, 4, 5, 6, 7)]
qs = {q["name"]: q for q in d["clusterQueues"]}
check("the ClusterQueues of tenantctl", len(set(cli) & set(qs)), 3)
for n, (pend, adm, used, nom, bor) in cli.items():
    q = qs[n]
    check(f"{n} pending", q["pendingWorkloads"], pend)
    check(f"{n} admitted", q["admittedWorkloads"], adm)
    check(f"{n} GPUs used", q["gpus"]["used"], used)
    check(f"{n} GPUs nominal", q["gpus"]["nominal"], nom)
    check(f"{n} GPUs borrowed", q["gpus"]["borrowed"], bor)
check("cq-alpha borrows 2 GPUs", qs["cq-alpha"]["gpus"]["borrowed"], 2)
check("cq-beta has a workload pending for > 0 s", qs["cq-beta"]["oldestPendingSeconds"] > 0, True)
check("cq-idle is inactive", "ResourceFlavor" in (qs["cq-idle"]["inactive"] or ""), True)
b = {(x["tenant"], x["period"]): x for x in d["budgets"]}
for p in ("month", "day"):
    x = b[("alpha", p)]
    check(f"alpha {p} budget spent", x["spent"], msum("tenantd_budget_spent", tenant="alpha", period=p), 1e-9)
    check(f"alpha {p} budget remaining", x["remaining"], max(x["amount"] - x["spent"], 0), 1e-9)
    check(f"alpha {p} forecast >= spent", x["forecast"] >= x["spent"] > 0, True)
    left_h = (datetime.strptime(x["periodEnd"], "%Y-%m-%dT%H:%M:%SZ") -
              datetime.strptime(d["time"], "%Y-%m-%dT%H:%M:%SZ")).total_seconds() / 3600
    check(f"alpha {p} forecast = spent + burn x hours left", x["forecast"],
          x["spent"] + x["burnPerHour"] * left_h, x["burnPerHour"] * 2 / 3600 + 1e-9)
    check(f"alpha {p} forecastOver", x["forecastOver"], x["forecast"] > x["amount"])
check("alpha's day budget (0.0001, shadow) spent past: forecast over", b[("alpha", "day")]["forecastOver"], True)
print("FAILS", fails)
P
expect_grep "/v1/dashboard: history, ClusterQueues and budgets agree with /metrics and tenantctl" \
    "$TMP/jsoncheck" "FAILS 0"
grep -q "FAILS 0" "$TMP/jsoncheck" || cat "$TMP/jsoncheck"

# ---- a tenant's key: its own tenant only, refused another's -------------
curl -s -H "Authorization: Bearer key-beta" "$ADMIN/v1/dashboard" >"$TMP/beta.json"
python3 - "$TMP/beta.json" >"$TMP/betacheck" 2>&1 <<'P'
import json, sys
d = json.load(open(sys.argv[1]))
print("tenants", [t["name"] for t in d["tenants"]], "history", sorted(d["history"]["tenants"]),
      "queues", [q["name"] for q in d["clusterQueues"]], "budgets", [b["tenant"] for b in d["budgets"]],
      "routes", d["routes"], "principal", d["principal"])
P
expect_grep "key-beta's /v1/dashboard: beta only, its ClusterQueue only" "$TMP/betacheck" \
    "tenants ['beta'] history ['beta'] queues ['cq-beta'] budgets [] routes [] principal {'kind': 'tenant', 'tenant': 'beta'}"
expect_no_grep "key-beta's /v1/dashboard names nothing of alpha" "$TMP/beta.json" "alpha"
for ep in dashboard usage; do
    code=$(curl -s -o "$TMP/out" -w '%{http_code}' -H "Authorization: Bearer key-beta" \
        "$ADMIN/v1/$ep?tenant=alpha")
    [ "$code" = 403 ] && ok "key-beta asking /v1/$ep?tenant=alpha: 403" ||
        { not_ok "/v1/$ep?tenant=alpha with key-beta: $code"; cat "$TMP/out"; }
done
code=$(curl -s -o /dev/null -w '%{http_code}' "$ADMIN/v1/dashboard")
[ "$code" = 401 ] && ok "/v1/dashboard without a credential: 401" || not_ok "no credential: $code"
code=$(curl -s -o "$TMP/out" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    "$ADMIN/v1/dashboard?tenant=beta")
grep -q '"name":"alpha"' "$TMP/out"; alpha_in=$?
[ "$code" = 200 ] && [ "$alpha_in" = 1 ] && ok "the admin's ?tenant=beta: beta only" ||
    not_ok "admin ?tenant=beta: $code"

# ---- the page in Chromium ------------------------------------------------
run_chromium() { # URL WIDTH HEIGHT [flags...]
    local url=$1 w=$2 h=$3 profile
    shift 3
    profile=$(mktemp -d "$TMP/profile.XXXXXX")
    timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --hide-scrollbars --window-size="$w,$h" \
        --virtual-time-budget=6000 "$@" "$url" 2>>"$TMP/chromium.log"
}
URL="$ADMIN/ui#token=$TOKEN"
for w in 1280 1920; do
    run_chromium "$URL" "$w" 1000 --dump-dom >"$TMP/dom-$w.html"
    grep -q 'data-loaded="1"' "$TMP/dom-$w.html" && ok "$w px: the page loaded its data" ||
        { not_ok "$w px: no data in the page"; grep -o 'id="status"[^<]*<' "$TMP/dom-$w.html"; tail -5 "$TMP/chromium.log"; }
    read -r scroll_w client_w < <(grep -o 'data-width="[0-9]* [0-9]*"' "$TMP/dom-$w.html" | tr -dc '0-9 \n')
    if [ -n "${scroll_w:-}" ] && [ "$client_w" -ge $((w - 20)) ] && [ "$scroll_w" -le "$client_w" ]; then
        ok "$w px: no horizontal scroll (layout $scroll_w px in a $client_w px window)"
    else
        not_ok "$w px: layout ${scroll_w:-?} px in a ${client_w:-?} px window"
    fi
    run_chromium "$URL" "$w" 1150 --screenshot="$TMP/dashboard-$w.png" >/dev/null
    if [ -s "$TMP/dashboard-$w.png" ]; then
        cp "$TMP/dashboard-$w.png" "$TD_BIN/dashboard-$w.png"
        ok "$w px screenshot saved: $TMP/dashboard-$w.png (kept as $TD_BIN/dashboard-$w.png)"
    else
        not_ok "$w px: no screenshot"
    fi
done
curl -s -H "Authorization: Bearer $TOKEN" "$ADMIN/metrics" >"$TMP/metrics2"
cmp -s <(grep -v '^#' "$TMP/metrics" | grep -v 'tenantd_inflight') \
    <(grep -v '^#' "$TMP/metrics2" | grep -v 'tenantd_inflight') &&
    ok "/metrics did not move while the page was read" || not_ok "/metrics moved during the test"

# Every number the page shows against /metrics, the charts' requests too,
# and the ClusterQueues' GPUs against tenantctl.
python3 - "$TMP/dom-1280.html" "$TMP/metrics" "$TMP/cqs.txt" >"$TMP/compare" 2>&1 <<'P'
import re, sys
from html.parser import HTMLParser

class Cells(HTMLParser):
    def __init__(self):
        super().__init__(); self.cells = {}; self.cur = None; self.charts = {}; self.cqs = {}
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "data-tenant" in a:
            self.cur = (a["data-tenant"], a["data-field"])
            self.cells[self.cur] = {"text": "", **a}
        if tag == "svg" and "data-chart" in a:
            self.charts[(a["data-tenant"], a["data-chart"])] = a
        if tag == "td" and a.get("data-field") == "gpus" and "data-nominal" in a:
            self.cqs[self.cq] = a
        if tag == "tr" and "data-cq" in a:
            self.cq = a["data-cq"]
    def handle_endtag(self, tag):
        if tag == "td": self.cur = None
    def handle_data(self, d):
        if self.cur: self.cells[self.cur]["text"] += d

p = Cells(); p.feed(open(sys.argv[1]).read())
metrics = {}
for line in open(sys.argv[2]):
    if line.startswith("#") or not line.strip(): continue
    name_labels, value = line.rsplit(" ", 1)
    m = re.match(r'([a-z_]+)(?:\{(.*)\})?$', name_labels)
    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
    metrics.setdefault(m.group(1), []).append((labels, float(value)))

def msum(name, **want):
    return sum(v for l, v in metrics.get(name, []) if all(l.get(k) == x for k, x in want.items()))

fails = 0
def check(tenant, field, shown, want, what=""):
    global fails
    good = abs(shown - want) < 1e-9
    print(("ok" if good else "MISMATCH"), tenant, field, "page", shown, "want", want, what)
    fails += not good

tenants = sorted({t for t, _ in p.cells})
assert tenants == ["alpha", "beta"], tenants
for t in tenants:
    c = lambda f: p.cells[(t, f)]
    num = lambda f: float(c(f)["text"].split()[0])
    check(t, "accepted", num("accepted"), msum("tenantd_requests_total", tenant=t, outcome="accepted"), "requests")
    check(t, "rejected", num("rejected"),
          msum("tenantd_requests_total", tenant=t, outcome="rate_limited") +
          msum("tenantd_requests_total", tenant=t, outcome="concurrency_limited"), "429s")
    check(t, "shed", num("shed"), msum("tenantd_requests_total", tenant=t, outcome="shed"), "503s")
    check(t, "errors", num("errors"),
          msum("tenantd_requests_total", tenant=t, outcome="upstream_error") +
          msum("tenantd_requests_total", tenant=t, outcome="timeout"), "502/504")
    check(t, "gpus in use", float(c("gpus")["data-in-use"]), msum("tenantd_gpus_in_use", tenant=t))
    check(t, "gpu quota", float(c("gpus")["data-quota"]), msum("tenantd_gpu_quota", tenant=t))
    check(t, "pending", num("pendingWorkloads"), msum("tenantd_workloads_pending", tenant=t))
    check(t, "tokens in", float(c("tokens")["data-in"]), msum("tenantd_usage_tokens", tenant=t, direction="in"))
    check(t, "tokens out", float(c("tokens")["data-out"]), msum("tenantd_usage_tokens", tenant=t, direction="out"))
    ch = p.charts[(t, "requests")]
    check(t, "requests in the chart", float(ch["data-total"]), msum("tenantd_requests_total", tenant=t))
    check(t, "buckets with requests >= 2", min(float(ch["data-points"]), 2), 2)
    check(t, "p99 points >= 1", min(float(p.charts[(t, "p99")]["data-points"]), 1), 1)
    check(t, "cost points >= 1", min(float(p.charts[(t, "cost")]["data-points"]), 1), 1)
# beta runs no workload: its cost is exactly its requests' tenantd_cost_total
# (the page rounds to 4 decimals); alpha's adds its running workload.
check("beta", "cost", float(p.cells[("beta", "cost")]["text"]), round(msum("tenantd_cost_total", team="beta"), 4), "USD")
alpha_req = msum("tenantd_cost_total", team="alpha")
alpha_shown = float(p.cells[("alpha", "cost")]["text"])
print("alpha cost shown", alpha_shown, ">= requests", alpha_req)
if not alpha_shown + 0.00005 >= alpha_req or alpha_req <= 0: fails += 1
check("alpha", "GPUs in use", float(p.cells[("alpha", "gpus")]["data-in-use"]), 10)
check("beta", "GPU cell", "no ClusterQueue" in p.cells[("beta", "gpus")]["text"], False)
check("beta", "rejected > 0", float(p.cells[("beta", "rejected")]["text"]) > 0, True)
for line in open(sys.argv[3]).read().splitlines()[1:]:
    m = re.match(r'(\S+)\s+(\S*)\s+(\d+)\s+(\d+)\s+([\d.]+)/([\d.]+) \(([\d.]+)\)', line)
    if not m: continue
    a = p.cqs[m.group(1)]
    for k, i in (("data-used", 5), ("data-nominal", 6), ("data-borrowed", 7)):
        check(m.group(1), k, float(a[k]), float(m.group(i)), "tenantctl get clusterqueues")
check("page", "ClusterQueues", len(p.cqs), 3)
print("FAILS", fails)
P
expect_grep "every number on the page equals /metrics and tenantctl" "$TMP/compare" "FAILS 0"
grep -q "FAILS 0" "$TMP/compare" || cat "$TMP/compare"
expect_grep "the page shows alpha's GPUs: 10 of 8" "$TMP/dom-1280.html" "10 / 8"
expect_grep "the page says cq-idle is inactive" "$TMP/dom-1280.html" "inactive: "
expect_grep "the page shows alpha's month budget" "$TMP/dom-1280.html" 'data-budget="alpha/month"'

# Without a token: one sign-in state, nothing else.
run_chromium "$ADMIN/ui" 1280 900 --dump-dom >"$TMP/dom-noauth.html"
run_chromium "$ADMIN/ui" 1280 700 --screenshot="$TMP/signin.png" >/dev/null
cp "$TMP/signin.png" "$TD_BIN/dashboard-signin.png" 2>/dev/null
expect_grep "without a token the page is in its sign-in state" "$TMP/dom-noauth.html" 'data-state="signin"'
expect_grep "with one message" "$TMP/dom-noauth.html" "This tenantd needs the admin token"
expect_no_grep "and no loading or connecting beside it" <(sed 's/<script.*//' "$TMP/dom-noauth.html" | grep -o '<div id="status"[^>]*>[^<]*') "ing"
expect_no_grep "and shows no tenant" "$TMP/dom-noauth.html" 'data-tenant="alpha"'
grep -o 'data-width="[0-9]* [0-9]*"' "$TMP/dom-noauth.html" | tr -dc '0-9 \n' | {
    read -r sw cw; [ "$sw" -le "$cw" ]; } && ok "the sign-in page does not scroll sideways" ||
    not_ok "the sign-in page scrolls sideways"
run_chromium "$ADMIN/ui#token=wrong-token" 1280 900 --dump-dom >"$TMP/dom-bad.html"
expect_grep "a wrong token: signed out, told it was not accepted" "$TMP/dom-bad.html" "was not accepted (HTTP 401)"
expect_grep "in the sign-in state" "$TMP/dom-bad.html" 'data-state="signin"'

# A tenant's key in the page: that tenant only.
run_chromium "$ADMIN/ui#token=key-beta" 1280 1000 --dump-dom >"$TMP/dom-beta.html"
run_chromium "$ADMIN/ui#token=key-beta" 1280 1000 --screenshot="$TMP/dashboard-beta.png" >/dev/null
cp "$TMP/dashboard-beta.png" "$TD_BIN/dashboard-beta.png" 2>/dev/null
expect_grep "key-beta's page loaded" "$TMP/dom-beta.html" 'data-loaded="1"'
expect_grep "it shows beta" "$TMP/dom-beta.html" 'data-tenant="beta"'
expect_grep "signed in as tenant beta" "$TMP/dom-beta.html" "signed in: tenant beta"
expect_no_grep "and nothing of alpha (tenant, ClusterQueue, budget)" "$TMP/dom-beta.html" "alpha"

# the page loads nothing from elsewhere (no CDN, no fonts)
curl -s "$ADMIN/ui" >"$TMP/ui.html"
expect_no_grep "no external scripts" "$TMP/ui.html" "<script src"
expect_no_grep "no external stylesheets or fonts" "$TMP/ui.html" "<link"
expect_no_grep "no remote URL but the SVG namespace" <(grep -o 'https\?://[^"]*' "$TMP/ui.html" | grep -v '^http://www.w3.org/2000/svg$') "http"
stop_tenantd
finish
