# test_valgrind.sh - the daemon under valgrind's leak check: webhook
# decisions, an apply (good and bad), gateway requests proxied and
# rejected, a SIGHUP reload, then SIGTERM. Zero errors and zero leaks.
. "$(dirname "$0")/lib.sh"
command -v valgrind >/dev/null || { echo "valgrind is required (apt-get install valgrind)"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 4 --ms-per-token 0 || { finish; exit 1; }
sed "s/127.0.0.1:8000/$SIM/" "$EX/platform.yaml" > "$TMP/platform.yaml"
cat >> "$TMP/platform.yaml" <<Y
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: tiny}
spec:
  apiKeys: [{sha256: "$(printf %s key-tiny | sha256sum | cut -d' ' -f1)"}]
  gateway: {rate: {cost: 1, per: 1m, burst: 15}}
Y

rm -f "$TMP/port" "$TMP/dataport"
valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible \
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99 \
    --log-file="$TMP/valgrind.log" \
    "$TENANTD" --data "$TMP/data" --config "$TMP/platform.yaml" --admin-listen 127.0.0.1:0 \
    --port-file "$TMP/port" --listen 127.0.0.1:0 --listen-port-file "$TMP/dataport" \
    --workers 2 2>"$TMP/tenantd.log" &
VG=$!
for _ in $(seq 1 300); do [ -s "$TMP/port" ] && [ -s "$TMP/dataport" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || { not_ok "tenantd under valgrind did not start"; cat "$TMP/tenantd.log"; finish; exit 1; }
ADMIN="http://127.0.0.1:$(cat "$TMP/port")"
GW="http://127.0.0.1:$(cat "$TMP/dataport")"
C=(curl -s --max-time 30)

code=$("${C[@]}" -o "$TMP/v" -w '%{http_code}' --data-binary @"$EX/pods/review.json" "$ADMIN/mutate")
[ "$code" = 200 ] && ok "webhook answers under valgrind" || not_ok "webhook: $code"
"${C[@]}" --data-binary @"$EX/pods/review.json" "$ADMIN/validate" >/dev/null
"${C[@]}" --data-binary '{"kind":' "$ADMIN/validate" >/dev/null
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: vg}\n' > "$TMP/ok.yaml"
code=$("${C[@]}" -o /dev/null -w '%{http_code}' --data-binary @"$TMP/ok.yaml" "$ADMIN/v1/apply")
[ "$code" = 200 ] && ok "apply" || not_ok "apply: $code"
printf 'apiVersion: v1\nkind: Namespace\nmetadata: {name: BAD}\n' > "$TMP/bad.yaml"
code=$("${C[@]}" -o /dev/null -w '%{http_code}' --data-binary @"$TMP/bad.yaml" "$ADMIN/v1/apply")
[ "$code" = 400 ] && ok "bad apply rejected" || not_ok "bad apply: $code"
"${C[@]}" "$ADMIN/v1/objects?kind=ns" >/dev/null
"${C[@]}" "$ADMIN/metrics" >/dev/null

BODY='{"messages":[{"role":"user","content":"hello there"}],"max_tokens":4}'
code=$("${C[@]}" -o "$TMP/r" -w '%{http_code}' -H 'Authorization: Bearer demo-key-team-a' -H 'Content-Type: application/json' -d "$BODY" "$GW/v1/chat/completions")
[ "$code" = 200 ] && ok "gateway proxies under valgrind" || not_ok "gateway: $code $(cat "$TMP/r")"
"${C[@]}" -o /dev/null -H 'Authorization: Bearer demo-key-team-a' -d '{"stream":true,"messages":[{"role":"user","content":"x"}],"max_tokens":3}' "$GW/v1/chat/completions"
for i in 1 2; do "${C[@]}" -o /dev/null -H 'Authorization: Bearer key-tiny' -d "$BODY" "$GW/v1/chat/completions"; done
code=$("${C[@]}" -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer key-tiny' -d "$BODY" "$GW/v1/chat/completions")
[ "$code" = 429 ] && ok "rate limit under valgrind" || not_ok "rate limit: $code"
"${C[@]}" -o /dev/null -H 'Authorization: Bearer nope' -d "$BODY" "$GW/v1/chat/completions"
"${C[@]}" -o /dev/null -H 'Authorization: Bearer demo-key-team-a' -d 'not json' "$GW/v1/chat/completions"
kill -HUP "$VG"
sleep 2
kill -TERM "$VG"
wait "$VG"
rc=$?
if [ "$rc" -eq 0 ] && [ ! -s "$TMP/valgrind.log" ]; then ok "valgrind: no errors, no leaks"; else
    not_ok "valgrind exit $rc"; head -60 "$TMP/valgrind.log"; fi
grep -q "reloaded" "$TMP/tenantd.log" && ok "SIGHUP reload under valgrind" || { not_ok "no reload"; cat "$TMP/tenantd.log"; }
finish
