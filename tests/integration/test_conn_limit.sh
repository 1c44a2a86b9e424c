# test_conn_limit.sh - client connections per tenant (Tenant
# spec.gateway.maxConnections): a connection counts for the tenant of its
# first request until it closes; one over the cap gets 429
# too_many_connections and is closed; closing one makes room; another
# tenant is not affected. A connection that has shown no valid key (a
# wrong one, or none) is closed 10 s after accept; one that has stays.
. "$(dirname "$0")/lib.sh"
start_simmodel --slots 8 --ms-per-token 0 || { finish; exit 1; }
cat > "$TMP/platform.yaml" <<Y
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: capped}
spec:
  apiKeys: [{sha256: "$(sha key-capped)"}]
  gateway: {maxConnections: 2}
---
apiVersion: tenantd.dev/v1alpha1
kind: Tenant
metadata: {name: other}
spec:
  apiKeys: [{sha256: "$(sha key-other)"}]
---
apiVersion: tenantd.dev/v1alpha1
kind: Route
metadata: {name: any}
spec:
  match: {pathPrefix: /}
  upstream: {address: "$SIM"}
  cost: {model: requests}
Y
start_tenantd "$TMP/data" --config "$TMP/platform.yaml" || { finish; exit 1; }
python3 - "$TD_DATA_PORT" > "$TMP/out" 2>&1 <<'P'
import socket, sys
port = int(sys.argv[1])
def conn():
    return socket.create_connection(("127.0.0.1", port), timeout=5)
def ask(s, key):
    s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
               "Content-Type: application/json\r\nContent-Length: 30\r\n\r\n"
               '{"prompt":"hi","max_tokens":1}' % key).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1]) if head else 0
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    while len(body) < n:
        body += s.recv(65536)
    return status, body
a, b, c = conn(), conn(), conn()
print("a", ask(a, "key-capped")[0])
print("b", ask(b, "key-capped")[0])
st, body = ask(c, "key-capped")
print("c", st, body.decode())
print("c closed", c.recv(1) == b"")
o = conn()
print("other", ask(o, "key-other")[0])
print("a again", ask(a, "key-capped")[0])
a.close()
import time; time.sleep(0.2)
d = conn()
print("d", ask(d, "key-capped")[0])
# the deadline to show a valid key: a connection whose
# requests had a wrong key or none is closed 10 s after accept, however
# busy; one that showed a valid key keeps the 60 s idle timeout
def noauth(s):
    s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
    return s.recv(65536).split(b" ")[1].decode()
wrong, none, kept = conn(), conn(), conn()
t0 = time.time()
print("wrong key", ask(wrong, "key-wrong")[0])
print("no key", noauth(none))
print("kept", ask(kept, "key-other")[0])
time.sleep(5)
print("wrong key again", ask(wrong, "key-wrong")[0])
def closed_by(s, until):
    s.settimeout(max(0.1, until - time.time()))
    try:
        return s.recv(1) == b""
    except socket.timeout:
        return False
    except OSError:
        return True
print("wrong key closed by the deadline", closed_by(wrong, t0 + 11.5), round(time.time() - t0))
print("no key closed by the deadline", closed_by(none, t0 + 11.5))
print("kept still served", ask(kept, "key-other")[0])
P
expect_grep "two connections of the capped tenant are served" "$TMP/out" "b 200"
expect_grep "the third gets 429 too_many_connections" "$TMP/out" 'c 429 {"error":{"message":"tenant capped has its maxConnections open; reuse one","type":"rate_limit_error","code":"too_many_connections","param":null,"tenant":"capped"}}'
expect_grep "... and is closed" "$TMP/out" "c closed True"
expect_grep "another tenant is not affected" "$TMP/out" "other 200"
expect_grep "a counted connection keeps serving" "$TMP/out" "a again 200"
expect_grep "closing one makes room for a new one" "$TMP/out" "d 200"
expect_grep "a wrong key gets 401" "$TMP/out" "wrong key 401"
expect_grep "a wrong key does not authenticate: closed at the deadline" "$TMP/out" \
    "wrong key closed by the deadline True"
expect_grep "no key: closed at the deadline" "$TMP/out" "no key closed by the deadline True"
expect_grep "a connection that showed a valid key stays" "$TMP/out" "kept still served 200"
printf 'apiVersion: tenantd.dev/v1alpha1\nkind: Tenant\nmetadata: {name: bad}\nspec:\n  gateway: {maxConnections: -1}\n' > "$TMP/bad.yaml"
expect_rc "a negative cap is refused" 2 "$TENANTCTL" apply -f "$TMP/bad.yaml" --server "http://127.0.0.1:$TD_PORT"
expect_grep "naming the field" "$TMP/err" "spec.gateway.maxConnections"
stop_tenantd
finish
