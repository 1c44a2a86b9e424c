# test_dashboard.sh - the dashboard in a real browser: tenantd (admin token)
# in front of simmodel with traffic (accepted and 429s) and a running batch
# workload; headless Chromium loads /ui#token=..., runs its JavaScript
# against /v1/usage, and every number the page shows is checked against
# /metrics. The screenshot is kept as $TD_BIN/dashboard.png. Without
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
Y
TOKEN=0123456789abcdef-dashboard
echo "$TOKEN" >"$TMP/token"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --admin-token-file "$TMP/token" ||
    { finish; exit 1; }
ADMIN="http://127.0.0.1:$TD_PORT"
GW="http://127.0.0.1:$TD_DATA_PORT"
for i in $(seq 1 9); do
    curl -s -o /dev/null -H "Authorization: Bearer key-alpha" \
        -d "{\"model\":\"m\",\"prompt\":\"dashboard $i\",\"max_tokens\":$((10 + i))}" "$GW/v1/completions"
done
for i in $(seq 1 8); do
    curl -s -o /dev/null -H "Authorization: Bearer key-beta" \
        -d '{"model":"m","prompt":"beta","max_tokens":40}' "$GW/v1/completions"
done
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: train, namespace: alpha-prod}\nspec:\n  queueName: lq\n  podSets: [{name: main, count: 2, template: {spec: {containers: [{name: t, resources: {requests: {cpu: "2", nvidia.com/gpu: "3"}}}]}}}]\n' >"$TMP/wl.yaml"
code=$(curl -s -o "$TMP/submit" -w '%{http_code}' -H "Authorization: Bearer $TOKEN" \
    --data-binary @"$TMP/wl.yaml" "$ADMIN/v1/workloads")
[ "$code" = 200 ] && ok "a 6-GPU workload submitted" || { not_ok "submit: $code"; cat "$TMP/submit"; }
# Wait for a metering tick (GPUs in use) and for the ledger to have
# committed everything (the records counter unchanged for 1.6 s: rejections
# are flushed each second, commits every 0.2 s): then nothing moves while
# the page is read.
settled=0 prev=-1 same=0
for _ in $(seq 1 60); do
    curl -s -H "Authorization: Bearer $TOKEN" "$ADMIN/metrics" >"$TMP/metrics"
    n=$(sed -n 's/^tenantd_ledger_records_total //p' "$TMP/metrics")
    if [ "$n" = "$prev" ]; then same=$((same + 1)); else same=0; fi
    prev=$n
    if [ "$same" -ge 4 ] && [ "${n:-0}" -gt 0 ] &&
        grep -qF 'tenantd_gpus_in_use{tenant="alpha"} 6' "$TMP/metrics"; then
        settled=1
        break
    fi
    sleep 0.4
done
[ "$settled" = 1 ] && ok "metering settled: $n records committed, alpha holds 6 GPUs" ||
    { not_ok "metering did not settle"; grep -E 'ledger|gpus_in_use' "$TMP/metrics"; }

URL="$ADMIN/ui#token=$TOKEN"
run_chromium() {
    timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$TMP/profile" --hide-scrollbars --virtual-time-budget=6000 "$@" \
        2>>"$TMP/chromium.log"
}
run_chromium --dump-dom "$URL" >"$TMP/dom.html"
grep -q 'data-loaded="1"' "$TMP/dom.html" && ok "the page loaded its data in Chromium" ||
    { not_ok "no data in the page"; grep -o 'id="error">[^<]*' "$TMP/dom.html"; tail -5 "$TMP/chromium.log"; }
run_chromium --window-size=1900,520 --screenshot="$TD_BIN/dashboard.png" "$URL" >/dev/null
[ -s "$TD_BIN/dashboard.png" ] && ok "screenshot saved: $TD_BIN/dashboard.png" || not_ok "no screenshot"
curl -s -H "Authorization: Bearer $TOKEN" "$ADMIN/metrics" >"$TMP/metrics2"
cmp -s <(grep -v '^#' "$TMP/metrics" | grep -v 'tenantd_inflight') \
    <(grep -v '^#' "$TMP/metrics2" | grep -v 'tenantd_inflight') &&
    ok "/metrics did not move while the page was read" || not_ok "/metrics moved during the test"

# Every number the page shows against /metrics.
python3 - "$TMP/dom.html" "$TMP/metrics" >"$TMP/compare" 2>&1 <<'P'
import re, sys
from html.parser import HTMLParser

class Cells(HTMLParser):
    def __init__(self):
        super().__init__(); self.cells = {}; self.cur = None
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "td" and "data-tenant" in a:
            self.cur = (a["data-tenant"], a["data-field"])
            self.cells[self.cur] = {"text": "", **a}
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
def check(tenant, field, shown, want, what):
    global fails
    good = abs(shown - want) < 1e-9
    print(("ok" if good else "MISMATCH"), tenant, field, "page", shown, "metrics", want, what)
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
    check(t, "gpus in use", float(c("gpus")["data-in-use"]), msum("tenantd_gpus_in_use", tenant=t), "")
    check(t, "gpu quota", float(c("gpus")["data-quota"]), msum("tenantd_gpu_quota", tenant=t), "")
    check(t, "pending", num("pendingWorkloads"), msum("tenantd_workloads_pending", tenant=t), "")
    check(t, "tokens in", num("tokensIn"), msum("tenantd_usage_tokens", tenant=t, direction="in"), "")
    check(t, "tokens out", num("tokensOut"), msum("tenantd_usage_tokens", tenant=t, direction="out"), "")
# beta runs no workload: its cost is exactly its requests' tenantd_cost_total
# (the page rounds to 4 decimals); alpha's adds its running workload.
team = {"alpha": "alpha", "beta": "beta"}
beta_cost = msum("tenantd_cost_total", team="beta")
check("beta", "cost", float(p.cells[("beta", "cost")]["text"]), round(beta_cost, 4), "USD")
alpha_req = msum("tenantd_cost_total", team="alpha")
alpha_shown = float(p.cells[("alpha", "cost")]["text"])
print("alpha cost shown", alpha_shown, ">= requests", alpha_req)
if not alpha_shown + 0.00005 >= alpha_req or alpha_req <= 0: fails += 1
assert float(p.cells[("alpha", "gpus")]["data-in-use"]) == 6.0
assert float(p.cells[("beta", "rejected")]["text"]) > 0
print("FAILS", fails)
P
expect_grep "every number on the page equals /metrics" "$TMP/compare" "FAILS 0"
grep -q "FAILS 0" "$TMP/compare" || cat "$TMP/compare"
expect_grep "alpha's GPUs shown: 6 of 8" "$TMP/dom.html" "6.0 / 8.0"

# Without the token the page shows why, and no numbers.
run_chromium --dump-dom "$ADMIN/ui" >"$TMP/dom-noauth.html"
expect_grep "without a token the page says unauthorized" "$TMP/dom-noauth.html" "unauthorized"
expect_no_grep "and shows no tenant" "$TMP/dom-noauth.html" 'data-tenant="alpha"'
# the page loads nothing from elsewhere (no CDN, no fonts)
curl -s "$ADMIN/ui" >"$TMP/ui.html"
expect_no_grep "no external scripts" "$TMP/ui.html" "<script src"
expect_no_grep "no external stylesheets or fonts" "$TMP/ui.html" "<link"
expect_no_grep "no remote URL but the SVG namespace" <(grep -o 'https\?://[^"]*' "$TMP/ui.html" | grep -v '^http://www.w3.org/2000/svg$') "http"
stop_tenantd
finish
