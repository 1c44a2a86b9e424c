# test_dns_pool.sh - an endpoint given as a DNS name is a headless
# Service: every address the name resolves to is an endpoint, looked up
# again every spec.upstream.resolveEvery off the workers' loops. The
# name comes from a hosts file bind-mounted over /etc/hosts in a mount
# namespace of tenantd's own (root and unshare needed, else skipped); three
# simmodels listen on 127.0.0.2, .3 and .4 at the one port the Route
# names. An address removed from the file is drained under load with no
# client error (its requests in flight finish, its connections close, it
# gets no new ones); a lookup that fails keeps the last set; the address
# put back gets traffic again. A name whose DNS server never answers (a
# UDP sink as tenantd's nameserver) stalls no worker: the other Routes
# keep their latency and its own requests are answered at once.
. "$(dirname "$0")/lib.sh"
LOAD="$(dirname "$0")/pools_load.py"
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null ||
    ! unshare --mount true 2>/dev/null; then
    echo "skipped: needs root and unshare --mount to give tenantd a hosts file of its own"
    exit 77
fi

HOSTS="$TMP/hosts"
# rewritten in place (cat >), never renamed: the bind mount pins the inode
hosts() {
    { echo "127.0.0.1 localhost"; for a in "$@"; do echo "$a fleet.test"; done; } > "$HOSTS"
}
hosts 127.0.0.2 127.0.0.3 127.0.0.4
got=$(unshare --mount sh -c 'mount --bind "$0" /etc/hosts && getent ahosts fleet.test' "$HOSTS" |
    awk '/STREAM/ {print $1}' | sort | tr '\n' ' ')
[ "$got" = "127.0.0.2 127.0.0.3 127.0.0.4 " ] && ok "the hosts file gives fleet.test three addresses" ||
    { not_ok "getent ahosts fleet.test through the bind mount: '$got'"; finish; exit 1; }

# the nameserver of tenantd's resolv.conf: reads queries, answers none
printf 'nameserver 127.0.0.77\noptions timeout:3 attempts:1\n' > "$TMP/resolv.conf"
python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.77", 53))
while True:
    s.recvfrom(4096)
' &
PIDS+=("$!")

P=$(free_port)
declare -A SIMPID
for a in 2 3 4; do
    rm -f "$TMP/simport"
    "$TD_BIN/simmodel" --listen "127.0.0.$a:$P" --port-file "$TMP/simport" --slots 64 \
        --default-max-tokens 20 --ms-per-token 5 2>>"$TMP/sim.log" &
    SIMPID[$a]=$!
    PIDS+=("$!")
    wait_file "$TMP/simport" 100 "$!" || { not_ok "simmodel on 127.0.0.$a:$P did not start"; finish; exit 1; }
done

cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  namespaces: [alpha-prod]
  apiKeys: [{sha256: "$(sha key-alpha)"}]
  gateway: {rate: {cost: 100000000, per: 1s, burst: 100000000}, concurrency: 1000}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: chat}
spec:
  match: {pathPrefix: /v1/chat/}
  upstream:
    endpoints: [{address: "fleet.test:$P", weight: 2}]
    resolveEvery: 200ms
    capacity: 32
  cost: {model: tokens}
  timeout: 10s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: stuck}
spec:
  match: {pathPrefix: /v1/embeddings}
  upstream:
    endpoints: [{address: "nowhere.test:$P"}]
    resolveEvery: 200ms
  cost: {model: requests}
  timeout: 10s
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: narrow}
spec:
  match: {pathPrefix: /v1/completions}
  upstream:
    endpoints: [{address: "fleet.test:$P"}]
    resolveEvery: 200ms
    capacity: 2
  cost: {model: tokens}
  timeout: 10s
Y
cat > "$TMP/wrap.sh" <<'W'
#!/bin/sh
# tenantd with $HOSTS over /etc/hosts, in a mount namespace of its own
exec unshare --mount sh -c 'mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/resolv.conf &&
    shift && exec "$@"' "$TD_HOSTS" "$TD_RESOLV" "$TD_REAL" "$@"
W
chmod +x "$TMP/wrap.sh"
export TD_HOSTS="$HOSTS" TD_RESOLV="$TMP/resolv.conf" TD_REAL="$TENANTD"
TENANTD="$TMP/wrap.sh"
printf 'admin-secret-0123456789\n' > "$TMP/admin.token"
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --admin-token-file "$TMP/admin.token" ||
    { finish; exit 1; }
GW="127.0.0.1:$TD_DATA_PORT"

served() { curl -sS --max-time 5 "http://127.0.0.$1:$P/stats" | sed 's/.*"served":\([0-9]*\).*/\1/'; }
conns_to() { ss -Htn state established "( dst 127.0.0.$1 and dport = :$P )" 2>/dev/null | wc -l; }
spread() { S2=$(served 2); S3=$(served 3); S4=$(served 4); }

# 1. every address is an endpoint
spread
out=$(python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 8 2 0 20 2>"$TMP/load1.err")
d2=$(($(served 2) - S2)); d3=$(($(served 3) - S3)); d4=$(($(served 4) - S4))
echo "# three addresses: $out; served .2=$d2 .3=$d3 .4=$d4"
case "$out" in *" errors=0 "*) ok "three addresses: no errors" ;; *) not_ok "three addresses: $out"; head -5 "$TMP/load1.err" ;; esac
[ "$d2" -gt 20 ] && [ "$d3" -gt 20 ] && [ "$d4" -gt 20 ] &&
    ok "each address of the name gets traffic (.2=$d2 .3=$d3 .4=$d4)" || not_ok "spread .2=$d2 .3=$d3 .4=$d4"

# 1b. capacity is per endpoint: two in flight at each of the three
# addresses (one per worker), so 8 clients of 100 ms requests get about
# 6 at a time, not the 2 of one endpoint (about 40 in 2 s)
out=$(python3 "$LOAD" "$GW" /v1/completions key-alpha 8 2 0 20 2>"$TMP/load1b.err")
n=$(echo "$out" | sed 's/ok=\([0-9]*\).*/\1/')
echo "# capacity 2 per endpoint, 8 clients for 2 s: $out"
[ "$n" -gt 70 ] && ok "the queue admits capacity times the name's addresses ($n requests)" ||
    not_ok "capacity did not follow the addresses: $out"

# explain and /metrics: each address an endpoint, resolved from the name
ADM=(-s --max-time 5 -H "Authorization: Bearer admin-secret-0123456789")
sleep 0.6 # the workers publish their pools every 250 ms
curl "${ADM[@]}" -o "$TMP/ex1.json" "http://127.0.0.1:$TD_PORT/v1/explain/request?tenant=alpha"
python3 - "$TMP/ex1.json" "$P" <<'PY' && ok "explain: three endpoints from fleet.test, healthy, requests summed over workers" ||
import json, sys
o = json.load(open(sys.argv[1])); p = sys.argv[2]
eps = [r for r in o["routes"] if r["route"] == "chat"][0]["endpoints"]
assert sorted(e["address"] for e in eps) == ["127.0.0.%d:%s" % (a, p) for a in (2, 3, 4)], eps
assert [r for r in o["routes"] if r["route"] == "narrow"][0]["capacityPerEndpoint"] == 2
for e in eps:
    assert e["resolvedFrom"] == "fleet.test:" + p and e["state"] == "healthy", e
    assert e["requests"] > 5 and e["inFlight"] == 0 and not e["lookupFailing"], e
    assert e["resolvedMsAgo"] < 2000 and e["workers"], e
PY
    not_ok "explain: $(cat "$TMP/ex1.json")"
"$TENANTCTL" explain request --tenant alpha --server "http://127.0.0.1:$TD_PORT" \
    --token-file "$TMP/admin.token" > "$TMP/ex1.txt" 2>&1
expect_grep "the table shows an endpoint and its name" "$TMP/ex1.txt" "127.0.0.4:$P"
expect_grep "the table says where it came from" "$TMP/ex1.txt" "from fleet.test:$P"
curl "${ADM[@]}" -o "$TMP/m1.txt" "http://127.0.0.1:$TD_PORT/metrics"
expect_grep "/metrics: per-endpoint requests" "$TMP/m1.txt" "tenantd_gateway_endpoint_requests_total{route=\"chat\",endpoint=\"127.0.0.4:$P\"}"
expect_grep "/metrics: per-endpoint health" "$TMP/m1.txt" "tenantd_gateway_endpoint_healthy{route=\"chat\",endpoint=\"127.0.0.2:$P\"} 1"
expect_grep "/metrics: lookup failures per name" "$TMP/m1.txt" "tenantd_gateway_dns_lookup_failures_total{route=\"chat\",name=\"fleet.test:$P\"} 0"

# 2. .4 leaves the file under load: drained with no client error
spread
python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 8 4 0 20 >"$TMP/load2.out" 2>"$TMP/load2.err" &
LP=$!
sleep 1
[ "$(conns_to 4)" -gt 0 ] && ok "connections to .4 open under load ($(conns_to 4))" || not_ok "no connection to .4 under load"
hosts 127.0.0.2 127.0.0.3
sleep 1 # a lookup (200 ms) and the last requests there (100 ms each)
mid4=$(served 4)
wait "$LP"
out=$(cat "$TMP/load2.out")
end4=$(served 4); d4=$((end4 - S4)); after=$((end4 - mid4))
echo "# .4 removed: $out; .4 served $d4 in all, $after after the drain"
case "$out" in *" errors=0 "*) ok "drain under load: no client errors" ;; *) not_ok "drain: $out"; head -5 "$TMP/load2.err" ;; esac
[ "$d4" -gt 0 ] && [ "$after" = 0 ] && ok ".4 drained: no new request after its address went ($d4 before)" ||
    not_ok ".4 still served $after after its removal"
sleep 0.5
n4=$(conns_to 4)
[ "$n4" = 0 ] && ok "the connections to .4 are closed" || not_ok "$n4 connections to .4 left open"
expect_grep "the change is logged" "$TMP/tenantd.log" "Route chat: fleet.test:$P now gives 2 address(es): 0 joined, 1 draining"

# 3. a lookup that fails keeps the last good set (not in the file, the
# name goes to the nameserver that never answers: 3 s, then a failure)
hosts
sleep 4
spread
out=$(python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 4 1 0 20 2>"$TMP/load3.err")
d2=$(($(served 2) - S2)); d3=$(($(served 3) - S3)); d4=$(($(served 4) - S4))
echo "# name gone from the file: $out; served .2=$d2 .3=$d3 .4=$d4"
case "$out" in *" errors=0 "*) ok "failed lookup: the last set still serves" ;; *) not_ok "failed lookup: $out" ;; esac
[ "$d2" -gt 0 ] && [ "$d3" -gt 0 ] && [ "$d4" = 0 ] && ok "failed lookup: .2 and .3 kept (.2=$d2 .3=$d3)" ||
    not_ok "failed lookup spread .2=$d2 .3=$d3 .4=$d4"
expect_grep "the failure is logged" "$TMP/tenantd.log" "Route chat: looking up fleet.test:$P failed"
curl "${ADM[@]}" -o "$TMP/ex2.json" "http://127.0.0.1:$TD_PORT/v1/explain/request?tenant=alpha"
python3 - "$TMP/ex2.json" "$P" <<'PY' && ok "explain: .4 gone, .2 and .3 kept with lookups failing" || not_ok "explain after: $(cat "$TMP/ex2.json")"
import json, sys
o = json.load(open(sys.argv[1])); p = sys.argv[2]
eps = [r for r in o["routes"] if r["route"] == "chat"][0]["endpoints"]
assert sorted(e["address"] for e in eps) == ["127.0.0.%d:%s" % (a, p) for a in (2, 3)], eps
assert all(e["lookupFailing"] for e in eps), eps
PY
curl "${ADM[@]}" -o "$TMP/m2.txt" "http://127.0.0.1:$TD_PORT/metrics"
grep -q "tenantd_gateway_dns_lookup_failures_total{route=\"chat\",name=\"fleet.test:$P\"} [1-9]" "$TMP/m2.txt" &&
    ok "/metrics counts the failed lookups" || not_ok "/metrics: $(grep dns_lookup "$TMP/m2.txt")"
nfail=$(grep -c "Route chat: looking up fleet.test:$P failed" "$TMP/tenantd.log")
[ "$nfail" = 1 ] && ok "logged once per Route, not once per lookup" || not_ok "the failure logged $nfail times"

# 4. .4 back: it joins and gets traffic again (after the lookup still
# waiting on the nameserver gives up)
hosts 127.0.0.2 127.0.0.3 127.0.0.4
sleep 4
spread
out=$(python3 "$LOAD" "$GW" /v1/chat/completions key-alpha 8 2 0 20 2>"$TMP/load4.err")
d4=$(($(served 4) - S4))
echo "# .4 back: $out; .4 served $d4"
case "$out" in *" errors=0 "*) ok "back: no errors" ;; *) not_ok "back: $out" ;; esac
[ "$d4" -gt 20 ] && ok ".4 gets traffic again ($d4)" || not_ok ".4 served $d4 after it came back"
expect_grep "recovery is logged" "$TMP/tenantd.log" "Route chat: fleet.test:$P resolves again"

# 5. nowhere.test is asked of a nameserver that never answers (3 s per
# lookup, one always under way): the workers do not wait for it
worst=0
for _ in $(seq 1 20); do
    t=$(curl -s -o /dev/null -w '%{time_total}' --max-time 5 -H 'Authorization: Bearer key-alpha' \
        -H 'Content-Type: application/json' --data '{"messages":[{"role":"user","content":"hi"}],"max_tokens":20}' \
        "http://$GW/v1/chat/completions")
    worst=$(awk -v a="$worst" -v b="$t" 'BEGIN { print (b > a ? b : a) }')
done
awk -v w="$worst" 'BEGIN { exit !(w < 1.0) }' && ok "lookups hanging on another Route: chat's slowest of 20 took ${worst}s" ||
    not_ok "a hanging lookup held a worker: chat took ${worst}s"
code=$(curl -s -o "$TMP/stuck.body" -w '%{http_code} %{time_total}' --max-time 5 \
    -H 'Authorization: Bearer key-alpha' --data '{"input":"hi"}' "http://$GW/v1/embeddings")
case "$code" in 50[23]\ 0.[0-4]*) ok "the unresolved Route answers at once ($code s)" ;;
    *) not_ok "the unresolved Route: $code $(cat "$TMP/stuck.body")" ;; esac
expect_grep "the hanging name's failure is logged" "$TMP/tenantd.log" "Route stuck: looking up nowhere.test:$P failed"

stop_tenantd
finish
