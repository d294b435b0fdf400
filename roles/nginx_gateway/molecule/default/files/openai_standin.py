#!/usr/bin/env python3
"""Stand-in for the OpenAI-compatible service, for the nginx_gateway tests (NOT the service).

The real service (the openai_api role) listens on 127.0.0.1 on each gateway host, one port per
worker; this stand-in takes its place on the same ports (STANDIN_PORTS) so that the gateway's /v1
routing, and its balancing over the workers, can be tested without a model. It echoes what the
gateway forwarded, and on which port ("port"):

* GET  /v1/models: {"object": "list", "data": [...], "headers": [[name, value], ...]}
* GET  /v1/models/<id>: the id percent-decoded as the service's web server does (Starlette's {name:path});
  qwen3-tiny -> 200 model card, another -> 404 OpenAI error model_not_found; both with "raw_path" (the
  request line's path as it arrived) and "id"
* OPTIONS anything: 200 {"standin_reached": "OPTIONS"} (a CORS preflight must never get here)
* POST /v1/chat/completions, /v1/completions: without "stream", one JSON answer with the
  headers; with "stream": true, STANDIN_EVENTS SSE chunks STANDIN_DELAY s apart, each with the
  time it was sent ("t"), then "data: [DONE]"
* anything else: 200 {"standin_other": true}, so a 404 seen by a client can only come from
  the gateway
Every header is echoed as received (a list of pairs, so a duplicate would show). Standard
library only.
"""

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

PORTS = [int(p) for p in os.environ.get("STANDIN_PORTS", "8090").split()]
BIND = os.environ.get("STANDIN_BIND", "127.0.0.1")
EVENTS = int(os.environ.get("STANDIN_EVENTS", "6"))
DELAY = float(os.environ.get("STANDIN_DELAY", "0.5"))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "openai-standin"
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def _port(self):
        return self.server.server_address[1]

    def _headers(self):
        return [[k.lower(), v] for k, v in self.headers.items()]

    def _json(self, code, obj):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        # the gateway sets its own X-Request-ID: this one must not reach the client
        self.send_header("X-Request-ID", "from-the-standin")
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        # always read it: a body left unread would be parsed as the next request on the
        # gateway's keepalive connection
        length = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        self._body()
        path = self.path.split("?")[0]
        if path == "/v1/models":
            data = [{"id": "qwen3-tiny", "object": "model", "owned_by": "standin"}]
            self._json(200, {"object": "list", "data": data, "headers": self._headers(), "port": self._port()})
        elif path.startswith("/v1/models/"):
            name = unquote(path[len("/v1/models/"):])
            seen = {"raw_path": self.path, "id": name, "headers": self._headers()}
            if name == "qwen3-tiny":
                self._json(200, {"id": name, "object": "model", "created": 0, "owned_by": "standin", **seen})
            else:
                self._json(404, {"error": {"message": f"The model {name!r} does not exist",
                                           "type": "invalid_request_error", "param": "model",
                                           "code": "model_not_found"}, **seen})
        else:
            self._json(200, {"standin_other": True})

    def do_OPTIONS(self):
        self._body()
        self._json(200, {"standin_reached": "OPTIONS"})

    def do_POST(self):
        raw = self._body()
        path = self.path.split("?")[0]
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._json(200, {"standin_other": True})
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            return self._json(400, {"error": {"message": "bad json", "type": "invalid_request_error",
                                              "param": None, "code": None}})
        if not req.get("stream"):
            return self._json(200, {"object": "chat.completion", "model": req.get("model", ""),
                                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "standin"},
                                                 "finish_reason": "stop"}],
                                    "headers": self._headers(), "port": self._port()})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i in range(EVENTS):
            ev = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": f"tok{i}"}}],
                  "t": time.time(), "headers": self._headers() if i == 0 else None, "port": self._port()}
            self._chunk(("data: " + json.dumps(ev) + "\n\n").encode())
            if i + 1 < EVENTS:
                time.sleep(DELAY)
        self._chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def main():
    ThreadingHTTPServer.request_queue_size = 128
    servers = [ThreadingHTTPServer((BIND, port), Handler) for port in PORTS]
    for httpd in servers:
        httpd.daemon_threads = True
        print(f"openai stand-in: http {BIND}:{httpd.server_address[1]}", flush=True)
    for httpd in servers[1:]:
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
    servers[0].serve_forever()


if __name__ == "__main__":
    main()
