"""echo_upstream.py - a model server stand-in that records what it received:
python3 echo_upstream.py PORT_FILE RECORD_FILE. Answers every POST with a
chat-completion-shaped JSON (usage included) and appends one JSON line per
request to RECORD_FILE: method, path, the headers as received, the body's
length and SHA-256, and the body when it is text. It sets its own
Access-Control-Allow-Origin so a test can see tenantd replace it."""
import hashlib
import http.server
import json
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        rec = {
            "method": self.command,
            "path": self.path,
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "length": len(body),
            "sha256": hashlib.sha256(body).hexdigest(),
        }
        try:
            rec["body"] = body.decode()
        except UnicodeDecodeError:
            rec["body"] = None
        with open(sys.argv[2], "a") as f:
            f.write(json.dumps(rec) + "\n")
        out = json.dumps({"id": "echo", "object": "chat.completion", "choices": [],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                    "total_tokens": 2}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.send_header("Access-Control-Allow-Origin", "https://upstream.example")
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
