# test_cut_streams.sh - a request that ends before its
# response does is charged what it was delivered (the tokens counted in the
# body forwarded, or its reservation if higher), and is in the ledger and
# /metrics like any other, however it ends: three ~2,000-token streams the
# client closes before their last event move the budget by about 6,000
# tokens' cost (they moved it by nothing); a stream delivered past its
# reservation is charged its counted tokens; a client closing before the
# first byte pays the reservation; an upstream closing mid-body and a
# stream going silent past the route's timeout are charged their counted
# tokens; a request the client gives up while it is queued costs nothing
# and is counted as cancelled. A restart replays the charges.
. "$(dirname "$0")/lib.sh"
command -v curl >/dev/null || { echo "curl is required"; echo "0 passed, 1 failed"; exit 1; }
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

# 2 ms a token: a 2,000-token stream lasts 4 s, and the client closes at
# its 1,000th event, 2 s before the end (room for a slow, sanitized run).
start_simmodel --slots 16 --ms-per-token 2 --default-max-tokens 2000 || { finish; exit 1; }

# An upstream that streams 50 one-token events ("abcd") and then either
# closes the connection mid-body (/part/drop) or goes silent (/part/stall);
# or one that never answers (/q/...).
cat >"$TMP/partial.py" <<'P'
import http.server, json, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/q/"):
            time.sleep(8)
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for _ in range(50):
            ev = ("data: %s\n\n" % json.dumps({"choices": [{"delta": {"content": "abcd"}}]})).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
        self.wfile.flush()
        if self.path.startswith("/part/drop"):
            self.close_connection = True
            return
        time.sleep(8)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
P
python3 "$TMP/partial.py" "$TMP/pport" 2>"$TMP/partial.log" &
PIDS+=($!)
wait_file "$TMP/pport" || { not_ok "the partial upstream did not start"; finish; exit 1; }
PART="127.0.0.1:$(cat "$TMP/pport")"

tenant() { # NAME
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: $1}
spec:
  namespaces: [$1-prod]
  labels: {team: $1, project: p, environment: prod}
  apiKeys: [{sha256: "$(sha "key-$1")"}]
  budgets: [{amount: "100", period: month}]
  gateway: {concurrency: 50}
---
Y
}
route() { # NAME PREFIX ADDRESS COST-EXTRA UPSTREAM-EXTRA TIMEOUT
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: $1}
spec:
  match: {pathPrefix: $2}
  upstream: {address: "$3"$5}
  cost: {model: tokens$4}
  timeout: $6
---
Y
}
{
    for t in cutter long early dropper staller queuer; do tenant $t; done
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: blocker}
spec:
  namespaces: [blocker-prod]
  apiKeys: [{sha256: "$(sha key-blocker)"}]
---
Y
    # the streams last 4 s; the part route's 3 s are the stall test's
    # silence; q has one slot (tenantd runs one worker, so it is the
    # route's only one) for the queue test
    route chat /v1/chat/ "$SIM" "" "" 10s
    route short /v1/completions "$SIM" ", maxOutputTokens: 200" "" 10s
    route part /part/ "$PART" "" "" 3s
    route q /q/ "$PART" "" ", capacity: 1, queue: 4" 10s
    cat <<Y
apiVersion: tenantd.dev/v1alpha1
kind: CostPolicy
metadata: {name: default}
spec:
  currency: USD
  prices:
  - {route: chat, per1kTokens: "1"}
  - {route: short, per1kTokens: "1"}
  - {route: part, per1kTokens: "1"}
  - {route: q, per1kTokens: "1"}
Y
} >"$TMP/platform.yaml"

start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --access-log "$TMP/access.log" --workers 1 ||
    { finish; exit 1; }
GW="127.0.0.1:$TD_DATA_PORT"
ADMIN="http://127.0.0.1:$TD_PORT"

metric() { curl -s --max-time 5 "$ADMIN/metrics" | grep -F "$1" | awk '{print $2}'; }
spent() { v=$(metric "tenantd_budget_spent{tenant=\"$1\",period=\"month\"}"); echo "${v:-0}"; }
# settled TENANT [WANT]: waits up to 5 s for the tenant's spend to be WANT
# (or, without WANT, not 0): the gateway settles a request when it sees
# its client's close, a moment after the client is gone
settled() {
    local _ v
    for _ in $(seq 1 25); do
        v=$(spent "$1")
        if [ $# -ge 2 ]; then [ "$v" = "$2" ] && return; else [ "$v" != 0 ] && return; fi
        sleep 0.2
    done
}
# sql QUERY: one row of the real ledger.db
sql() {
    python3 - "$TMP/data/ledger.db" "$1" <<'P'
import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True)
print("|".join("" if v is None else str(v) for v in c.execute(sys.argv[2]).fetchone()))
P
}
# wait_sql QUERY WANT: the ledger's writer batches; wait up to 5 s for WANT
wait_sql() {
    local _ got=""
    for _ in $(seq 1 25); do
        got=$(sql "$1" 2>/dev/null)
        [ "$got" = "$2" ] && break
        sleep 0.2
    done
    echo "$got"
}

# The client: N streams at once; each reads events and closes its socket
# after CLOSE_AT content events (0: before the first byte, after 0.5 s),
# and prints the characters of content it received per stream.
cat >"$TMP/closer.py" <<'P'
import json, socket, sys, threading, time
gw, key, path, n, close_at, body = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
host, port = gw.split(":")
out = [None] * n
def one(i):
    s = socket.create_connection((host, int(port)), timeout=20)
    b = body.encode()
    s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (path, key, len(b))).encode() + b)
    if close_at == 0:
        time.sleep(0.5)
        s.close()
        out[i] = {"events": 0, "chars": 0, "usage": False}
        return
    buf, events, chars, usage = b"", 0, 0, False
    while events < close_at:
        d = s.recv(65536)
        if not d:
            break
        buf += d
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            line = ev[ev.find(b"data: "):]
            if not line.startswith(b"data: ") or line[6:] == b"[DONE]":
                continue
            try:
                o = json.loads(line[6:])
            except ValueError:
                continue
            if o.get("usage"):
                usage = True
            for c in o.get("choices", []):
                t = (c.get("delta") or {}).get("content") or c.get("text")
                if t:
                    events += 1
                    chars += len(t)
    s.close()
    out[i] = {"events": events, "chars": chars, "usage": usage}
ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
[t.start() for t in ts]
[t.join() for t in ts]
json.dump(out, sys.stdout)
P
closer() { python3 "$TMP/closer.py" "$GW" "$@"; }
# the prompt "hello world!" is 12 characters: 3 tokens
MSG='{"messages":[{"role":"user","content":"hello world!"}]'

# 1. Three ~2,000-token streams (max_tokens 2000), closed by their client
# at the 1,000th of 2,000 events, before the final usage event. Each is
# charged max(counted, reserved) = its reservation 3 + 2000 = 2003 tokens
# (the text forwarded counts 1,125-1,200 tokens): 6,009 tokens = 6.009.
closer key-cutter /v1/chat/completions 3 1000 "$MSG,\"max_tokens\":2000,\"stream\":true}" >"$TMP/c1.json"
python3 - "$TMP/c1.json" <<'P' && ok "three streams closed by their client at about event 1000 of 2000, before the usage event" || not_ok "closer: $(cat "$TMP/c1.json")"
import json, sys
rs = json.load(open(sys.argv[1]))
assert len(rs) == 3 and all(1000 <= r["events"] < 2000 and not r["usage"] for r in rs), rs
P
settled cutter 6.009
v=$(spent cutter)
[ "$v" = 6.009 ] && ok "the budget moved by 3 x 2003 tokens = 6.009 (each charged its reservation, more than its counted text)" ||
    not_ok "cutter spend: '$v', want 6.009"
v=$(metric 'tenantd_requests_total{tenant="cutter",route="chat",outcome="client_closed"}')
[ "$v" = 3 ] && ok "/metrics counts them: outcome=\"client_closed\" 3" || not_ok "client_closed metric: '$v'"
v=$(metric 'tenantd_cost_units_total{tenant="cutter",route="chat"}')
[ "$v" = 6009 ] && ok "/metrics cost units: 6009" || not_ok "cost units metric: '$v'"
# (readers sum count: a record per worker and flush)
got=$(wait_sql "select sum(count), sum(tokens_in), sum(tokens_out) from records where tenant='cutter' and outcome='client_closed'" "3|9|6000")
[ "$got" = "3|9|6000" ] && ok "ledger: 3 client_closed requests, 9 tokens in, 6000 out" ||
    not_ok "ledger cutter: '$got'"
kill -HUP "$TD_PID" 2>/dev/null
sleep 0.3
n=$(grep 'tenant=cutter' "$TMP/access.log" | grep -c 'status=499 outcome=client_closed cost_est=2003 cost=2003 ')
[ "$n" = 3 ] && ok "access log: status=499 outcome=client_closed cost=2003, three times" ||
    not_ok "access log: $(grep 'tenant=cutter' "$TMP/access.log")"

# 2. Repeated, the budget keeps moving: three more.
closer key-cutter /v1/chat/completions 3 1000 "$MSG,\"max_tokens\":2000,\"stream\":true}" >/dev/null
settled cutter 12.018
v=$(spent cutter)
[ "$v" = 12.018 ] && ok "three more: 12.018" || not_ok "cutter spend after six: '$v'"

# 3. A stream delivered past its reservation (no max_tokens on a Route of
# maxOutputTokens 200: reserved 203) is charged the tokens counted in the
# text forwarded: at least what the client read, at most the whole answer.
closer key-long /v1/completions 1 1000 '{"prompt":"hello world!","stream":true}' >"$TMP/c3.json"
settled long
v=$(spent long)
python3 - "$TMP/c3.json" "$v" <<'P' >"$TMP/c3.out" && ok "past its reservation: $(cat "$TMP/c3.out")" || not_ok "long: $(cat "$TMP/c3.out") $(cat "$TMP/c3.json")"
import json, math, sys
r = json.load(open(sys.argv[1]))[0]
spent = float(sys.argv[2])
low = (3 + math.ceil(r["chars"] / 4)) / 1000
high = (3 + math.ceil(2000 * 4.5 / 4)) / 1000  # the whole answer: 4.5 characters a token
print("read %d events (%d characters): charged %.3f, within [%.3f, %.3f]" % (r["events"], r["chars"], spent, low, high))
assert 1000 <= r["events"] < 2000 and low <= spent + 1e-9 and spent <= high + 1e-9
P
got=$(wait_sql "select sum(count), outcome, tokens_in from records where tenant='long'" "1|client_closed|3")
[ "$got" = "1|client_closed|3" ] && ok "ledger: its record is client_closed, 3 tokens in" || not_ok "ledger long: '$got'"

# 4. A client closing before the first byte (the upstream never answers)
# pays its reservation: 3 + 300 tokens.
closer key-early /v1/chat/completions 1 0 "$MSG,\"max_tokens\":300}" >/dev/null
settled early 0.303
v=$(spent early)
[ "$v" = 0.303 ] && ok "closed before the first byte: charged the reservation, 0.303" || not_ok "early spend: '$v'"

# 5. The upstream closes mid-body after 50 one-token events: 502 is no
# longer possible (200 is out), the client's connection is cut, and the
# request is charged the 50 tokens it was delivered (more than its
# reservation of 3 + 10), as upstream_error.
code=$(curl -s -o "$TMP/drop.out" -w '%{http_code}' --max-time 10 -H "Authorization: Bearer key-dropper" \
    -d "$MSG,\"max_tokens\":10,\"stream\":true}" "http://$GW/part/drop")
grep -c abcd "$TMP/drop.out" | grep -qx 50 && ok "upstream closed mid-body: the client got the 50 events ($code)" ||
    not_ok "drop: $code $(head -c 300 "$TMP/drop.out")"
settled dropper 0.053
v=$(spent dropper)
[ "$v" = 0.053 ] && ok "charged what it delivered: 3 + 50 tokens = 0.053" || not_ok "dropper spend: '$v'"
v=$(metric 'tenantd_requests_total{tenant="dropper",route="part",outcome="upstream_error"}')
[ "$v" = 1 ] && ok "counted as upstream_error" || not_ok "dropper metric: '$v'"

# 6. The stream goes silent after 50 events for longer than the route's 3 s
# timeout: cut, charged 3 + 50 tokens, as timeout.
curl -s -o "$TMP/stall.out" --max-time 10 -H "Authorization: Bearer key-staller" \
    -d "$MSG,\"max_tokens\":10,\"stream\":true}" "http://$GW/part/stall"
grep -c abcd "$TMP/stall.out" | grep -qx 50 && ok "a stream silent past the route's timeout is cut after its 50 events" ||
    not_ok "stall: $(head -c 300 "$TMP/stall.out")"
settled staller 0.053
v=$(spent staller)
[ "$v" = 0.053 ] && ok "charged what it delivered: 0.053" || not_ok "staller spend: '$v'"
v=$(metric 'tenantd_requests_total{tenant="staller",route="part",outcome="timeout"}')
[ "$v" = 1 ] && ok "counted as timeout" || not_ok "staller metric: '$v'"
got=$(wait_sql "select group_concat(outcome || ':' || tokens_in || '+' || tokens_out) from (select * from records where tenant in ('dropper','staller') order by tenant)" "cut:3+50,cut:3+50")
[ "$got" = "cut:3+50,cut:3+50" ] && ok "ledger: both are 'cut' records of 3 + 50 tokens" || not_ok "ledger cut: '$got'"

# 7. Given up while queued (the route's one slot is held by a request the
# upstream never answers): nothing was sent upstream, nothing is charged,
# and it is counted (client_closed) and ledgered (cancelled).
curl -s -o /dev/null --max-time 3 -H "Authorization: Bearer key-blocker" \
    -d "$MSG,\"max_tokens\":5}" "http://$GW/q/hang" &
hung=$!
sleep 0.3
closer key-queuer /q/queued 1 0 "$MSG,\"max_tokens\":300}" >/dev/null
for _ in $(seq 1 25); do
    [ "$(metric 'tenantd_requests_total{tenant="queuer",route="q",outcome="client_closed"}')" = 1 ] && break
    sleep 0.2
done
v=$(spent queuer)
[ "$v" = 0 ] && ok "given up in the queue: nothing charged" || not_ok "queuer spend: '$v'"
v=$(metric 'tenantd_requests_total{tenant="queuer",route="q",outcome="client_closed"}')
[ "$v" = 1 ] && ok "and counted: outcome=\"client_closed\" 1" || not_ok "queuer metric: '$v'"
got=$(wait_sql "select outcome, sum(count), sum(tokens_in + tokens_out) from records where tenant='queuer'" "cancelled|1|0")
[ "$got" = "cancelled|1|0" ] && ok "ledger: cancelled, no tokens" || not_ok "ledger queuer: '$got'"
wait $hung

# 8. A restart replays the charges of requests ended early from the ledger.
stop_tenantd
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" --workers 1 || { finish; exit 1; }
ADMIN="http://127.0.0.1:$TD_PORT"
v=$(spent cutter)
[ "$v" = 12.018 ] && ok "after a restart cutter's spend is still 12.018" || not_ok "cutter after restart: '$v'"
v=$(spent dropper)
[ "$v" = 0.053 ] && ok "after a restart dropper's spend is still 0.053" || not_ok "dropper after restart: '$v'"
v=$(spent queuer)
[ "$v" = 0 ] && ok "after a restart queuer's is still 0" || not_ok "queuer after restart: '$v'"
stop_tenantd
finish
