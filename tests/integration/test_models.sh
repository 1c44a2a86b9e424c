# test_models.sh - a fleet behind one path, against
# the real tenantd and two real simmodels: examples/fleet.yaml's two Routes
# serve different models on /v1/, the body's "model" picks the upstream;
# tenants and named keys limited by spec.models get 403 model_not_allowed
# (a customer tier tenant the 404 an unserved model gets); GET /v1/models
# lists each caller's models without touching an upstream; every refusal
# has OpenAI's error shape.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }
SRC=${TD_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}

start_simmodel --slots 4 --ms-per-token 0 || { finish; exit 1; }
BIG=$SIM
start_simmodel --slots 4 --ms-per-token 0 || { finish; exit 1; }
SMALL=$SIM
# the example as shipped, its addresses pointed at the two simmodels, and a
# customer tier tenant beside it
sed -e "s/127.0.0.1:8001/$BIG/" -e "s/127.0.0.1:8002/$SMALL/" "$SRC/examples/fleet.yaml" > "$TMP/fleet.yaml"
cat >> "$TMP/fleet.yaml" <<Y
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: acme}
spec:
  tenancy: customer
  namespaces: [acme]
  labels: {team: acme, project: p, environment: prod}
  models: [llama-3-8b]
  apiKeys: [{sha256: "$(sha key-acme)"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: pricey}
spec:
  namespaces: [pricey]
  labels: {team: pricey, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha key-pricey)"}]
  gateway:
    rate: {cost: 100000, per: 1s}
    models: [{model: llama-3-70b, rate: {cost: 8, per: 10s, burst: 8}}]
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
Y
start_tenantd "$TMP/data" --config "$TMP/fleet.yaml" --access-log "$TMP/access.log" || { finish; exit 1; }
GW="http://127.0.0.1:$TD_DATA_PORT"
served() { curl -s "http://$1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["served"])'; }
# ask KEY MODEL [PATH]: status into $TMP/code, body $TMP/b, head $TMP/h
ask() {
    curl -s -D "$TMP/h" -o "$TMP/b" -w '%{http_code}' -H "Authorization: Bearer $1" \
        -H 'Content-Type: application/json' \
        -d "{\"model\":\"$2\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":3}" \
        "$GW${3:-/v1/chat/completions}" > "$TMP/code"
}
code() { cat "$TMP/code"; }
# error_is STATUS TYPE CODE PARAM: the body is exactly OpenAI's shape
error_is() {
    python3 - "$TMP/b" "$@" <<'P'
import json, sys
b = json.load(open(sys.argv[1]))
e = b["error"]
assert list(b) == ["error"], b
assert isinstance(e["message"], str) and e["message"], e
assert e["type"] == sys.argv[3] and e["code"] == sys.argv[4], e
assert e["param"] == (None if sys.argv[5] == "null" else sys.argv[5]), e
P
}

# ---- routing by model on one path ----
b0=$(served "$BIG"); s0=$(served "$SMALL")
ask sk-research-demo llama-3-70b
[ "$(code)" = 200 ] && ok "llama-3-70b: 200" || not_ok "llama-3-70b: $(code) $(cat "$TMP/b")"
b1=$(served "$BIG"); s1=$(served "$SMALL")
[ "$b1" = $((b0 + 1)) ] && [ "$s1" = "$s0" ] && ok "... served by the llama-70b upstream" || not_ok "big $b0->$b1 small $s0->$s1"
ask sk-research-demo qwen-2-7b
[ "$(code)" = 200 ] && [ "$(served "$SMALL")" = $((s1 + 1)) ] && [ "$(served "$BIG")" = "$b1" ] &&
    ok "qwen-2-7b (the prefix qwen-*): served by the small upstream" || not_ok "qwen: $(code) $(cat "$TMP/b")"
expect_grep "the access log names the route the model chose" "$TMP/access.log" "tenant=research route=small"
ask sk-research-demo mistral-7b
[ "$(code)" = 404 ] && error_is 404 invalid_request_error model_not_found model &&
    ok "a model no route serves: 404 model_not_found, OpenAI's shape, param model" || not_ok "unserved: $(code) $(cat "$TMP/b")"
expect_grep "... with OpenAI's message" "$TMP/b" 'The model `mistral-7b` does not exist or you do not have access to it.'
cp "$TMP/b" "$TMP/unserved.json"
curl -s -o "$TMP/b" -w '%{http_code}' -H "Authorization: Bearer sk-research-demo" -H 'Content-Type: application/json' \
    -d '{"messages":[]}' "$GW/v1/chat/completions" > "$TMP/code"
[ "$(code)" = 400 ] && error_is 400 invalid_request_error model_required model &&
    ok "a body naming no model where every route lists models: 400 model_required" || not_ok "no model: $(code) $(cat "$TMP/b")"
curl -s -o "$TMP/b" -w '%{http_code}' -H "Authorization: Bearer sk-research-demo" -d '{"model":' \
    "$GW/v1/chat/completions" > "$TMP/code"
[ "$(code)" = 400 ] && error_is 400 invalid_request_error bad_request null &&
    ok "a body that is not JSON: 400 bad_request" || not_ok "bad JSON: $(code) $(cat "$TMP/b")"

# ---- which tenant may use which model ----
ask sk-app-demo llama-3-8b
[ "$(code)" = 200 ] && ok "app may use llama-3-8b" || not_ok "app 8b: $(code) $(cat "$TMP/b")"
bb=$(served "$BIG")
ask sk-app-demo llama-3-70b
[ "$(code)" = 403 ] && error_is 403 permission_error model_not_allowed model &&
    ok "app asking for llama-3-70b: 403 model_not_allowed" || not_ok "app 70b: $(code) $(cat "$TMP/b")"
[ "$(served "$BIG")" = "$bb" ] && ok "... which never reached the upstream" || not_ok "the 403 reached llama-70b"
grep -qi '^x-should-retry: false' "$TMP/h" && ok "... with x-should-retry: false" || not_ok "403 head: $(cat "$TMP/h")"
expect_grep "... naming the tenant" "$TMP/b" '"tenant":"app"'
ask sk-app-bot-demo qwen-2-7b
[ "$(code)" = 200 ] && ok "app's bot key may use qwen-2-7b" || not_ok "bot qwen-2-7b: $(code) $(cat "$TMP/b")"
ask sk-app-bot-demo qwen-2-72b
[ "$(code)" = 403 ] && ok "the bot key is narrower than app: qwen-2-72b is 403" || not_ok "bot 72b: $(code) $(cat "$TMP/b")"
ask sk-app-bot-demo llama-3-8b
[ "$(code)" = 403 ] && ok "... and llama-3-8b too" || not_ok "bot 8b: $(code) $(cat "$TMP/b")"
ask key-acme llama-3-8b
[ "$(code)" = 200 ] && ok "customer acme may use llama-3-8b" || not_ok "acme 8b: $(code) $(cat "$TMP/b")"
ask key-acme llama-3-70b
sed 's/llama-3-70b/mistral-7b/' "$TMP/b" > "$TMP/acme70.json"
[ "$(code)" = 404 ] && cmp -s "$TMP/acme70.json" "$TMP/unserved.json" &&
    ok "customer acme asking for llama-3-70b gets the very 404 an unserved model gets" ||
    not_ok "acme 70b: $(code) $(cat "$TMP/b") vs $(cat "$TMP/unserved.json")"

# ---- a tighter limit for one model (spec.gateway.models[]) ----
# each request costs 1 + 3 tokens; llama-3-70b's own rate is 8 per 10 s
for i in 1 2 3; do ask key-pricey llama-3-70b; echo "$(code)" >> "$TMP/pricey70"; done
for i in 1 2 3 4 5 6; do ask key-pricey llama-3-8b; echo "$(code)" >> "$TMP/pricey8"; done
[ "$(tr '\n' ' ' < "$TMP/pricey70")" = "200 200 429 " ] && ok "pricey: llama-3-70b's own rate refuses its third request" ||
    not_ok "pricey 70b: $(tr '\n' ' ' < "$TMP/pricey70")"
ask key-pricey llama-3-70b
python3 - "$TMP/b" <<'P' && ok "... 429 rate_limited at level model, naming the model" || not_ok "pricey body: $(cat "$TMP/b")"
import json, sys
e = json.load(open(sys.argv[1]))["error"]
assert e["code"] == "rate_limited" and e["type"] == "rate_limit_error", e
assert e["level"] == "model" and e["model"] == "llama-3-70b" and e["tenant"] == "pricey", e
assert e["message"].startswith("rate limit reached for model llama-3-70b of tenant pricey; retry after "), e
assert 0 < e["retry_after_ms"] <= 10000, e
P
[ "$(tr '\n' ' ' < "$TMP/pricey8")" = "200 200 200 200 200 200 " ] && ok "... while llama-3-8b, under the tenant's limit alone, is served" ||
    not_ok "pricey 8b: $(tr '\n' ' ' < "$TMP/pricey8")"

# ---- GET /v1/models, per tenant, upstream untouched ----
b0=$(served "$BIG"); s0=$(served "$SMALL")
for k in sk-research-demo sk-app-demo sk-app-bot-demo key-acme; do
    curl -s -w '\n%{http_code}\n' -H "Authorization: Bearer $k" "$GW/v1/models" > "$TMP/models-$k"
done
python3 - "$TMP" <<'P' && ok "/v1/models: research the two exact names (not qwen-*), app llama-3-8b, its bot qwen-2-7b, acme llama-3-8b" || not_ok "/v1/models: $(cat "$TMP"/models-*)"
import json, sys
want = {"sk-research-demo": ["llama-3-70b", "llama-3-8b"], "sk-app-demo": ["llama-3-8b"],
        "sk-app-bot-demo": ["qwen-2-7b"], "key-acme": ["llama-3-8b"]}
for k, ids in want.items():
    body, code = open(f"{sys.argv[1]}/models-{k}").read().rstrip("\n").rsplit("\n", 1)
    assert code == "200", (k, code, body)
    o = json.loads(body)
    assert o["object"] == "list", o
    assert [m["id"] for m in o["data"]] == ids, (k, o)
    assert all(m["object"] == "model" and m["owned_by"] == "tenantd" for m in o["data"]), o
P
[ "$(served "$BIG")" = "$b0" ] && [ "$(served "$SMALL")" = "$s0" ] && ok "/v1/models touched no upstream" ||
    not_ok "upstreams served during /v1/models"
curl -s -o "$TMP/b" -w '%{http_code}' "$GW/v1/models" > "$TMP/code"
[ "$(code)" = 401 ] && error_is 401 authentication_error unauthorized null &&
    ok "/v1/models without a key: 401 in OpenAI's shape" || not_ok "/v1/models no key: $(code) $(cat "$TMP/b")"

# ---- a reload that drops a model ----
sed -i 's/models: \[llama-3-8b, "qwen-\*"\]}   #/models: [llama-3-8b]}   #/' "$TMP/fleet.yaml"
kill -HUP "$TD_PID"
for _ in $(seq 50); do
    ask sk-research-demo qwen-2-7b
    [ "$(code)" = 404 ] && break
    sleep 0.1
done
[ "$(code)" = 404 ] && ok "after a reload without qwen-*, qwen-2-7b is 404 model_not_found" || not_ok "reload: $(code) $(cat "$TMP/b")"

stop_tenantd
finish
