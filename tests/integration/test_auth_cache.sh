# test_auth_cache.sh - a keep-alive connection's API key is resolved once
# and reused while it repeats (the per-connection cache of the gateway):
# keys that differ from the cached one by a byte or a length resolve on
# their own, a key alternating with another on one connection counts for its
# own tenant each time, and a config reload (SIGHUP) that moves the key to
# another tenant, then revokes it, is seen by the next request on the same
# open connection, not only on new ones. The real tenantd and simmodel.
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is required"; echo "0 passed, 1 failed"; exit 1; }

start_simmodel --slots 8 --ms-per-token 0 || { finish; exit 1; }

# platform KEY1_TENANT: key-1 belongs to KEY1_TENANT (alpha, beta or none).
platform() {
    local k1a="" k1b=""
    [ "$1" = alpha ] && k1a=", {sha256: \"$(sha key-1)\"}"
    [ "$1" = beta ] && k1b=", {sha256: \"$(sha key-1)\"}"
    cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: alpha}
spec:
  apiKeys: [{sha256: "$(sha key-alpha)"}$k1a]
  gateway: {rate: {cost: 1000000, per: 1s, burst: 1000000}, concurrency: 64}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: beta}
spec:
  apiKeys: [{sha256: "$(sha key-2)"}$k1b]
  gateway: {rate: {cost: 1, per: 1h, burst: 1}, concurrency: 64}
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: all}
spec:
  match: {pathPrefix: /}
  upstream: {address: "$SIM", capacity: 8, queue: 8}
  cost: {model: requests}
Y
}
platform alpha
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }

# conn.py PORT: one keep-alive connection; reads a key per line on stdin
# ("-" alone: close and open a new connection), prints "STATUS BODY" per
# request, in order.
cat > "$TMP/conn.py" <<'PY'
import socket, sys
port = int(sys.argv[1])
def connect():
    return socket.create_connection(("127.0.0.1", port), timeout=10)
def response(s, buf):
    while b"\r\n\r\n" not in buf:
        d = s.recv(65536)
        if not d:
            raise SystemExit("connection closed")
        buf += d
    head, buf = buf.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    status = lines[0].split()[1].decode()
    hdrs = {l.split(b":", 1)[0].strip().lower(): l.split(b":", 1)[1].strip() for l in lines[1:]}
    if hdrs.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = b""
        while True:
            while b"\r\n" not in buf:
                buf += s.recv(65536)
            size, buf = buf.split(b"\r\n", 1)
            n = int(size.split(b";")[0], 16)
            while len(buf) < n + 2:
                buf += s.recv(65536)
            body, buf = body + buf[:n], buf[n + 2:]
            if n == 0:
                break
    else:
        n = int(hdrs.get(b"content-length", b"0"))
        while len(buf) < n:
            buf += s.recv(65536)
        body, buf = buf[:n], buf[n:]
    return status, body, buf
s, buf = connect(), b""
for line in sys.stdin:
    key = line.strip()
    if key == "-":
        s.close()
        s, buf = connect(), b""
        continue
    body = b'{"prompt":"hello","max_tokens":1}'
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
              key.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(body)).encode() + b"\r\n\r\n" + body)
    status, rbody, buf = response(s, buf)
    print(status, rbody.decode(errors="replace").replace("\n", " "), flush=True)
PY

# The same key again, keys a byte or a length away, another key in between.
printf '%s\n' key-alpha key-alpha key-alphb key-alph key-alpha2 key-alpha key-2 key-alpha key-2 \
    | python3 "$TMP/conn.py" "$TD_DATA_PORT" > "$TMP/seq.out" 2>&1
cut -c1-3 "$TMP/seq.out" | tr '\n' ' ' > "$TMP/seq.codes"
expect_grep "one connection: repeated, near-miss and alternating keys each resolve on their own" \
    "$TMP/seq.codes" "200 200 401 401 401 200 200 200 429 "
expect_grep "the alternating key counts for its own tenant (beta's burst of 1 spent, then 429)" \
    "$TMP/seq.out" '"tenant":"beta"'

# A reload seen by an open connection: key-1 is alpha's, then beta's
# (whose only request of the hour went to key-2 above: 429 naming beta),
# then nobody's (401).
mkfifo "$TMP/in"
python3 "$TMP/conn.py" "$TD_DATA_PORT" < "$TMP/in" > "$TMP/reload.out" 2>&1 &
CONN_PID=$!
exec 8>"$TMP/in"
lines() { wc -l < "$TMP/reload.out"; }
wait_lines() { for _ in $(seq 100); do [ "$(lines)" -ge "$1" ] && return 0; sleep 0.05; done; return 1; }
echo key-1 >&8
echo key-1 >&8
wait_lines 2
# reload; a new connection tells when it is in force
reload_to() {
    platform "$1"
    kill -HUP "$TD_PID"
    for _ in $(seq 100); do
        printf 'key-1\n' | python3 "$TMP/conn.py" "$TD_DATA_PORT" > "$TMP/probe.out" 2>&1
        grep -q "^$2" "$TMP/probe.out" && return 0
        sleep 0.05
    done
    return 1
}
reload_to beta 429 || not_ok "reload to beta not seen by a new connection"
echo key-1 >&8
wait_lines 3
reload_to none 401 || not_ok "reload revoking key-1 not seen by a new connection"
echo key-1 >&8
wait_lines 4
exec 8>&-
wait "$CONN_PID"
cut -c1-3 "$TMP/reload.out" | tr '\n' ' ' > "$TMP/reload.codes"
expect_grep "an open connection sees the key moved to another tenant, then revoked" \
    "$TMP/reload.codes" "200 200 429 401 "
sed -n 3p "$TMP/reload.out" > "$TMP/moved.out"
expect_grep "after the move the key counts for beta" "$TMP/moved.out" '"tenant":"beta"'

stop_tenantd
finish
