# test_openai_sdk.sh - the official OpenAI Node SDK (npm "openai", pinned in
# tests/integration/sdk/package-lock.json) against the real tenantd and
# simmodel: non-streaming and streaming with
# stream_options.include_usage, models.list(), a 429 seen as RateLimitError
# with tenantd's message, code and type, retries that wait retry-after-ms
# rather than Retry-After's whole second, and refusals waiting cannot cure
# (cost_exceeds_burst, budget_exceeded, model_not_allowed) not retried.
# Skips (77) only when node or the SDK cannot be installed.
. "$(dirname "$0")/lib.sh"
SDK="$(cd "$(dirname "$0")" && pwd)/sdk"
command -v node >/dev/null || { echo "SKIP: node is not installed (apt-get install nodejs npm)"; finish; exit 77; }
if [ ! -d "$SDK/node_modules/openai" ]; then
    (cd "$SDK" && { npm ci --no-audit --no-fund >/dev/null 2>&1 || npm install --no-audit --no-fund >/dev/null 2>&1; }) ||
        { echo "SKIP: npm could not install the openai package into $SDK"; finish; exit 77; }
fi

start_simmodel --slots 4 --ms-per-token 1 || { finish; exit 1; }
cat > "$TMP/sdk.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: big}
spec:
  match: {pathPrefix: /v1/, models: [llama-3-70b]}
  upstream: {address: "$SIM"}
  cost: {model: tokens}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: small}
spec:
  match: {pathPrefix: /v1/, models: [llama-3-8b]}
  upstream: {address: "$SIM"}
  cost: {model: tokens}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {route: big, per1kTokens: "1"}
  - {route: small, per1kTokens: "1"}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: sdk}
spec:
  namespaces: [sdk]
  apiKeys: [{sha256: "$(sha key-sdk)"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: tight}
spec:
  namespaces: [tight]
  apiKeys: [{sha256: "$(sha key-tight)"}]
  gateway: {rate: {cost: 20, per: 1s, burst: 20}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: poor}
spec:
  namespaces: [poor]
  apiKeys: [{sha256: "$(sha key-poor)"}]
  budgets: [{amount: "0.06", period: day}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: lim}
spec:
  namespaces: [lim]
  models: [llama-3-8b]
  apiKeys: [{sha256: "$(sha key-lim)"}]
Y
start_tenantd "$TMP/data" --config "$TMP/sdk.yaml" || { finish; exit 1; }
echo "openai $(node -p "require('$SDK/node_modules/openai/package.json').version"), node $(node --version)"
node "$SDK/sdk_check.mjs" "http://127.0.0.1:$TD_DATA_PORT" > "$TMP/sdk.out" 2>&1
cat "$TMP/sdk.out"
PASS=$((PASS + $(grep -c '^ok - ' "$TMP/sdk.out")))
FAIL=$((FAIL + $(grep -c '^not ok - ' "$TMP/sdk.out")))
grep -q ' passed, 0 failed$' "$TMP/sdk.out" || not_ok "the SDK check did not finish cleanly"
stop_tenantd
finish
