# test_explain_request.sh - "which limit did I hit?": GET /v1/explain/request
# shows a tenant's limits as enforced now, what it could spend this instant,
# and its latest refusals with the rule and the numbers, its budgets and
# its budgets for models with their spend; a tenant's key explains its own
# tenant and no other.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 8 --ms-per-token 0 || { finish; exit 1; }
cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: strict}
spec:
  namespaces: [strict-prod]
  apiKeys: [{sha256: "$(sha key-strict)"}]
  gateway: {rate: {cost: 1, per: 1h, burst: 3}, concurrency: 5}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: shadowy}
spec:
  namespaces: [shadowy-prod]
  apiKeys: [{sha256: "$(sha key-shadowy)"}]
  gateway: {rate: {cost: 1, per: 1h, burst: 1}, enforcement: {rate: shadow}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: priced}
spec:
  namespaces: [priced-prod]
  apiKeys: [{sha256: "$(sha key-priced)"}]
  budgets:
  - {amount: 100, period: month}
  - {amount: "50", period: day, models: [llama-70b, "qwen-*"]}
  - {amount: "5", period: month, models: [mistral-7b], enforcement: shadow}
---
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {model: llama-70b, perRequest: "0.5"}
  - {route: any, perRequest: "0.001"}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: any}
spec:
  match: {pathPrefix: /}
  upstream: {address: "$SIM"}
  cost: {model: requests}
Y
printf 'admin-secret-0123456789\n' > "$TMP/admin.token"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --admin-token-file "$TMP/admin.token" \
    || { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
API="http://127.0.0.1:$TD_PORT/v1/explain/request"
for key in key-strict key-shadowy; do
    for _ in 1 2 3 4 5; do
        curl -s -o /dev/null --max-time 5 -H "Authorization: Bearer $key" -d '{}' "$GW/v1/completions"
        sleep 0.02 # refusals are sampled at most every 10 ms per tenant
    done
done

# a refusal of a request naming its model: the refusal names it too
sleep 0.02
curl -s -o /dev/null --max-time 5 -H "Authorization: Bearer key-strict" -d '{"model":"llama-70b"}' "$GW/v1/completions"

# the tenant with budgets for models spends at the 70B one only
for _ in 1 2; do
    curl -s -o /dev/null --max-time 5 -H "Authorization: Bearer key-priced" -H 'Content-Type: application/json' \
        -d '{"model":"llama-70b","messages":[{"role":"user","content":"hello there"}],"max_tokens":8}' \
        "$GW/v1/chat/completions"
done

get() { curl -s -o "$TMP/body" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $1" "$2"; }
[ "$(get admin-secret-0123456789 "$API?tenant=strict")" = 200 ] && ok "admin explains strict" || not_ok "admin: $(cat "$TMP/body")"
python3 - "$TMP/body" <<'P' && ok "strict: limits, nothing available, refusals with rule and numbers" || not_ok "strict body: $(cat "$TMP/body")"
import json, sys
o = json.load(open(sys.argv[1]))
r = o["limits"]["rate"]
assert o["tenant"] == "strict" and r["burst"] == 3 and r["enforcement"] == "enforce", o
assert r["availableNow"] < 1, r
assert o["limits"]["concurrency"]["limit"] == 5, o
ref = o["recentRefusals"]
assert 2 <= len(ref) <= 3, ref
assert ref[0].get("model") == "llama-70b", ref[0]
assert all("model" not in x for x in ref[1:]), ref
for x in ref:
    assert x["reason"] == "rate_limited" and x["status"] == 429 and x["mode"] == "enforce", x
    assert "route any: cost 1 over the 0 available (rate 1 per 3600s, burst 3)" in x["detail"], x
assert ref == sorted(ref, key=lambda x: x["time"], reverse=True)
P
[ "$(get key-shadowy "$API")" = 200 ] && ok "a tenant key explains its own tenant by default" || not_ok "own: $(cat "$TMP/body")"
python3 - "$TMP/body" <<'P' && ok "shadowy: shadow refusals recorded as mode shadow with status 429" || not_ok "shadowy body: $(cat "$TMP/body")"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["tenant"] == "shadowy" and o["limits"]["rate"]["enforcement"] == "shadow", o
ref = o["recentRefusals"]
assert ref and all(x["mode"] == "shadow" and x["reason"] == "rate_limited" for x in ref), ref
P
[ "$(get key-shadowy "$API?tenant=strict")" = 403 ] && ! grep -q "strict" "$TMP/body" &&
    ok "a tenant key cannot explain another tenant (403, names nothing of it)" || not_ok "cross-tenant: $(cat "$TMP/body")"
[ "$(get nobody "$API?tenant=strict")" = 401 ] && ok "an unknown credential gets 401" || not_ok "bad credential: $(cat "$TMP/body")"
[ "$(get admin-secret-0123456789 "$API?tenant=ghost")" = 404 ] && grep -q "ghost" "$TMP/body" &&
    ok "an unknown tenant is 404 naming it" || not_ok "unknown tenant: $(cat "$TMP/body")"
printf 'key-strict\n' > "$TMP/strict.key"
expect_rc "tenantctl explain request (tenant key, own tenant)" 0 "$TENANTCTL" explain request \
    --server "http://127.0.0.1:$TD_PORT" --token-file "$TMP/strict.key"
expect_grep "the table names the rate limit and mode" "$TMP/out" "rate         1 per 3600s, burst 3, enforce; available now:"
expect_grep "the table lists a refusal with its numbers" "$TMP/out" "429 rate_limited        enforce route any: cost 1 over the 0 available"
expect_grep "the table names a refusal's model" "$TMP/out" "429 rate_limited        enforce model llama-70b: route any: cost 1"
expect_no_grep "a tenant's key is not shown the fleet's endpoints" "$TMP/out" "$SIM"
curl -s -o "$TMP/adm.json" --max-time 5 -H "Authorization: Bearer admin-secret-0123456789" "$API?tenant=strict"
python3 - "$TMP/adm.json" "$SIM" <<'P' && ok "the admin sees route any with its endpoint, requests counted" || not_ok "routes: $(cat "$TMP/adm.json")"
import json, sys
o = json.load(open(sys.argv[1]))
r = [x for x in o["routes"] if x["route"] == "any"][0]
e = r["endpoints"][0]
assert e["address"] == sys.argv[2] and e["state"] == "healthy" and e["inFlight"] == 0, e
assert e["requests"] >= 5 and e["ejections"] == 0 and "resolvedFrom" not in e, e
assert r["balance"] == "leastRequests" and e["workers"], r
P
[ "$(get key-priced "$API")" = 200 ] && cp "$TMP/body" "$TMP/priced.json"
python3 - "$TMP/priced.json" <<'P' && ok "priced: each budget for models with models, period, amount, spent, remaining, enforcement" || not_ok "priced body: $(cat "$TMP/priced.json")"
import json, sys
o = json.load(open(sys.argv[1]))
lim = o["limits"]
assert [b["period"] for b in lim["budgets"]] == ["month"], lim["budgets"]
mb = lim["modelBudgets"]
assert [m["models"] for m in mb] == [["llama-70b", "qwen-*"], ["mistral-7b"]], mb
big, small = mb
assert big["period"] == "day" and big["amount"] == 50 and big["currency"] == "USD", big
# two requests at 0.5 each
assert abs(big["spent"] - 1) < 1e-9 and abs(big["remaining"] - 49) < 1e-9, big
assert big["enforcement"] == "enforce" and big["resetsAt"] > big["periodStart"], big
# the 70B requests were held by the budget for all models too, at the same price
assert abs(lim["budgets"][0]["spent"] - big["spent"]) < 1e-9, lim["budgets"]
assert small["period"] == "month" and small["amount"] == 5 and small["spent"] == 0, small
assert small["remaining"] == 5 and small["enforcement"] == "shadow", small
assert "for its model" in lim["precedence"], lim["precedence"]
P
python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["limits"]["modelBudgets"] != [])' "$TMP/adm.json" &&
    ok "a tenant without budgets for models shows an empty modelBudgets" || not_ok "strict modelBudgets: $(cat "$TMP/adm.json")"
printf 'key-priced\n' > "$TMP/priced.key"
expect_rc "tenantctl explain request (budgets for models)" 0 "$TENANTCTL" explain request \
    --server "http://127.0.0.1:$TD_PORT" --token-file "$TMP/priced.key"
expect_grep "the table shows a budget for models, its spend and enforcement" "$TMP/out" \
    "budget       day for models llama-70b,qwen-*: 1 of 50 USD spent (49 left), enforce; resets at 20"
expect_grep "the table shows a shadow budget for models, nothing spent" "$TMP/out" \
    "budget       month for models mistral-7b: 0 of 5 USD spent (5 left), shadow; resets at 20"
expect_grep "the table still shows the budget for all models" "$TMP/out" \
    "budget       month: 1 of 100 USD spent (99 left), enforce"
expect_rc "tenantctl explain request -o json (budgets for models)" 0 "$TENANTCTL" explain request \
    -o json --server "http://127.0.0.1:$TD_PORT" --token-file "$TMP/priced.key"
python3 -c 'import json,sys; m = json.load(open(sys.argv[1]))["limits"]["modelBudgets"]; sys.exit(m[0]["models"] != ["llama-70b", "qwen-*"])' "$TMP/out" &&
    ok "-o json carries modelBudgets" || not_ok "json: $(cat "$TMP/out")"
expect_rc "tenantctl explain request for another tenant is refused" 2 "$TENANTCTL" explain request \
    --tenant shadowy --server "http://127.0.0.1:$TD_PORT" --token-file "$TMP/strict.key"
expect_grep "403 is reported" "$TMP/err" "HTTP 403"
stop_tenantd
finish
