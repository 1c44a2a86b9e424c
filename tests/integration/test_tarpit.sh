# test_tarpit.sh - what one connection that retries its 429s at once meets
# (docs/gateway.md, "Clients that retry at once"), checked by the clock on
# the real tenantd and simmodel: its first 429s come at once, from the 3rd
# early one in a row each is held for its Retry-After (at most 1 s) and
# counted in tenantd_gateway_tarpitted_total; a client on another
# connection that waits retry-after-ms is never held; --tarpit-after 0
# turns the hold off. Timing-light (holds of ~1 s against answers of a few
# ms), so it also runs under ASan, unlike test_flood.sh's p99 claim.
. "$(dirname "$0")/lib.sh"

start_simmodel --slots 4 --ms-per-token 0 --prefill-ms-per-token 0 || { finish; exit 1; }
cat >"$TMP/p.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: rusher}
spec:
  apiKeys: [{sha256: "$(sha key-rusher)"}]
  gateway: {rate: {cost: 1, per: 10s, burst: 1}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: polite}
spec:
  apiKeys: [{sha256: "$(sha key-polite)"}]
  gateway: {rate: {cost: 2, per: 1s, burst: 1}}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /v1/}
  upstream: {address: "$SIM"}
  cost: {model: requests}
Y

# client.py PORT KEY N MODE: N requests on one keep-alive connection, each
# sent the instant the last answer arrived (MODE at-once) or after its
# retry-after-ms (MODE polite); prints "status seconds" per answer.
cat >"$TMP/client.py" <<'P'
import http.client, sys, time
port, key, n, mode = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
body = '{"model":"m","prompt":"hi","max_tokens":1}'
for _ in range(n):
    t = time.monotonic()
    c.request("POST", "/v1/completions", body, {"Authorization": "Bearer " + key,
                                                 "Content-Type": "application/json"})
    r = c.getresponse()
    r.read()
    print(r.status, "%.3f" % (time.monotonic() - t), flush=True)
    ms = r.getheader("retry-after-ms")
    if mode == "polite" and r.status == 429 and ms:
        time.sleep(int(ms) / 1000)
P
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }

start_tenantd "$TMP/d1" --config "$TMP/p.yaml" || { finish; exit 1; }
python3 "$TMP/client.py" "$TD_DATA_PORT" key-rusher 7 at-once >"$TMP/rush" 2>"$TMP/rush.err" &
rush=$!
python3 "$TMP/client.py" "$TD_DATA_PORT" key-polite 6 polite >"$TMP/polite" 2>"$TMP/polite.err"
wait $rush
sed 's/^/    rusher: /' "$TMP/rush"
sed 's/^/    polite: /' "$TMP/polite"
# answer i (1-based) of the rusher: its status and seconds
ans() { sed -n "${1}p" "$TMP/rush"; }
read -r s t <<<"$(ans 1)"
[ "$s" = 200 ] && ok "the rusher's first request fits its burst" || not_ok "rusher 1: $s $t"
for i in 2 3 4; do
    read -r s t <<<"$(ans $i)"
    if [ "$s" = 429 ] && awk -v t="$t" 'BEGIN { exit !(t < 0.5) }'; then
        ok "its 429 #$((i - 1)) comes at once (${t} s)"
    else
        not_ok "rusher $i: $s $t, want a 429 at once"
    fi
done
for i in 5 6 7; do
    read -r s t <<<"$(ans $i)"
    if [ "$s" = 429 ] && awk -v t="$t" 'BEGIN { exit !(t >= 0.9 && t < 3) }'; then
        ok "its 429 #$((i - 1)), 3rd or later before Retry-After, is held about 1 s (${t} s)"
    else
        not_ok "rusher $i: $s $t, want a 429 held 1 s"
    fi
done
n=$(wc -l <"$TMP/polite")
slow=$(awk '$2 >= 0.5' "$TMP/polite" | wc -l)
oks=$(awk '$1 == 200' "$TMP/polite" | wc -l)
if [ "$n" = 6 ] && [ "$slow" = 0 ] && [ "$oks" -ge 3 ]; then
    ok "a client that waits retry-after-ms is never held ($oks of $n served, every answer < 0.5 s)"
else
    not_ok "polite client: $n answers, $slow slow, $oks served"; cat "$TMP/polite.err"
fi
tp=$(metric "$TD_PORT" tenantd_gateway_tarpitted_total)
[ "$tp" = 3 ] && ok "tenantd_gateway_tarpitted_total is 3" || not_ok "tarpitted_total ${tp:-missing}, want 3"
stop_tenantd

start_tenantd "$TMP/d2" --config "$TMP/p.yaml" --tarpit-after 0 || { finish; exit 1; }
python3 "$TMP/client.py" "$TD_DATA_PORT" key-rusher 7 at-once >"$TMP/rush0" 2>&1
held=$(awk 'NR > 1 && $2 >= 0.5' "$TMP/rush0" | wc -l)
n429=$(awk '$1 == 429' "$TMP/rush0" | wc -l)
[ "$n429" = 6 ] && [ "$held" = 0 ] && ok "--tarpit-after 0: all 6 429s at once" ||
    not_ok "--tarpit-after 0: $(tr '\n' ' ' <"$TMP/rush0")"
expect_rc "--tarpit-after x: exit 2" 2 "$TENANTD" --tarpit-after x
expect_grep "... naming the flag" "$TMP/err" "--tarpit-after must be a number"
stop_tenantd
finish
