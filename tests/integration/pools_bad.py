"""pools_bad.py - an endpoint that answers every request with 503 (or the
status given), for test_pools.sh: writes its port to PORTFILE and appends
one line to PORTFILE.hits per request it answered.

usage: pools_bad.py PORTFILE [STATUS]"""
import http.server
import sys

port_file = sys.argv[1]
status = int(sys.argv[2]) if len(sys.argv) > 2 else 503


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        with open(port_file + ".hits", "a") as f:
            f.write(self.path + "\n")
        body = b'{"error":"overloaded"}'
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = answer
    do_POST = answer

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(port_file + ".tmp", port_file)
srv.serve_forever()
