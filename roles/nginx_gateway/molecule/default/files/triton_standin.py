#!/usr/bin/env python3
"""Triton stand-in for the nginx_gateway tests and benchmark (NOT Triton).

Speaks just enough of Triton's KServe v2 HTTP API and generate extension on :8000, and of
the gRPC service `inference.GRPCInferenceService` on :8001 (when python3-grpcio is
installed), for the gateway to be tested without a model:

* GET  /v2/health/live|ready, /v2/models/<m>[/ready]
* POST /v2/models/<m>/generate, /infer: JSON answer that echoes what the gateway forwarded
  (X-Auth-Sub, X-Auth-Class, whether an Authorization header arrived, X-Request-ID), after
  STANDIN_GENERATE_MS milliseconds (default 0; the gateway benchmark sets a model-like service time)
* POST /v2/models/<m>/generate_stream: SSE, STANDIN_EVENTS events STANDIN_DELAY s apart
* any other path (repository, logging, trace, shared memory, stats): 200 with
  {"standin_admin": true}, so a 404 seen by a client can only come from the gateway
* gRPC: ServerLive, ServerReady, ModelReady, ModelInfer (answers model_name only), and any
  other method answers OK too (so UNIMPLEMENTED can only come from the gateway).
Standard library (+ python3-grpcio from Debian for gRPC); no protobuf classes: the few
responses are encoded by hand.
"""

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

EVENTS = int(os.environ.get("STANDIN_EVENTS", "6"))
DELAY = float(os.environ.get("STANDIN_DELAY", "0.5"))
GENERATE_S = float(os.environ.get("STANDIN_GENERATE_MS", "0")) / 1000.0
HTTP_PORT = int(os.environ.get("STANDIN_HTTP_PORT", "8000"))
GRPC_PORT = int(os.environ.get("STANDIN_GRPC_PORT", "8001"))
BIND = os.environ.get("STANDIN_BIND", "0.0.0.0")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "triton-standin"
    # headers and body are two writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):  # quiet: the benchmark would drown in logs
        pass

    def _json(self, code, obj):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _seen(self):
        return {
            "x_auth_sub": self.headers.get("X-Auth-Sub", ""),
            "x_auth_class": self.headers.get("X-Auth-Class", ""),
            "authorization_forwarded": "Authorization" in self.headers,
            "x_request_id": self.headers.get("X-Request-ID", ""),
        }

    def do_GET(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["v2", "health"]:
            self._json(200, {"standin": True})
        elif len(parts) >= 3 and parts[:2] == ["v2", "models"] and parts[-1] not in ("stats", "setting"):
            self._json(200, {"name": parts[2], "platform": "standin", "standin": True})
        else:
            self._json(200, {"standin_admin": True})

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) >= 4 and parts[:2] == ["v2", "models"] and parts[-1] in ("generate", "infer"):
            try:
                req = json.loads(raw or b"{}")
            except ValueError:
                return self._json(400, {"error": "bad json"})
            text = str(req.get("text_input", ""))
            if GENERATE_S > 0:
                time.sleep(GENERATE_S)
            self._json(200, {"model_name": parts[2], "text_output": "standin:" + str(len(text)), "seen": self._seen()})
        elif len(parts) >= 4 and parts[:2] == ["v2", "models"] and parts[-1] == "generate_stream":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(EVENTS):
                ev = {"model_name": parts[2], "text_output": f"tok{i}", "t": time.time(), "seen": self._seen()}
                data = ("data: " + json.dumps(ev) + "\n\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
                if i + 1 < EVENTS:
                    time.sleep(DELAY)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        else:
            self._json(200, {"standin_admin": True})


def _pb_bool(field, value):
    return bytes([field << 3 | 0, 1 if value else 0])


def _pb_str(field, s):
    b = s.encode()
    return bytes([field << 3 | 2, len(b)]) + b


def _pb_field1_string(msg):
    """model_name (field 1) of ModelInferRequest, read by hand; empty when absent."""
    i = 0
    while i < len(msg):
        key = msg[i]
        i += 1
        if key == 0x0A:
            n = msg[i]
            return msg[i + 1 : i + 1 + n].decode(errors="replace")
        break
    return ""


def serve_grpc():
    try:
        from concurrent import futures

        import grpc
    except ImportError:
        print("stand-in: python3-grpcio missing, gRPC disabled", file=sys.stderr)
        return None

    ident = lambda b: b  # noqa: E731 - raw bytes in, raw bytes out

    def unary(fn):
        return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=ident, response_serializer=ident)

    def seen(ctx):
        md = dict(ctx.invocation_metadata())
        return "sub={};auth={}".format(md.get("x-auth-sub", ""), "authorization" in md)

    def infer(req, ctx):
        ctx.set_trailing_metadata((("x-standin-seen", seen(ctx)),))
        # ModelInferResponse{model_name=1, id=3}
        return _pb_str(1, _pb_field1_string(req) or "unknown") + _pb_str(3, "standin")

    handlers = {
        "ServerLive": unary(lambda req, ctx: _pb_bool(1, True)),
        "ServerReady": unary(lambda req, ctx: _pb_bool(1, True)),
        "ModelReady": unary(lambda req, ctx: _pb_bool(1, True)),
        "ModelInfer": unary(infer),
    }

    class Generic(grpc.GenericRpcHandler):
        def service(self, details):
            svc, _, method = details.method.lstrip("/").partition("/")
            if svc != "inference.GRPCInferenceService":
                return None
            return handlers.get(method, unary(lambda req, ctx: b""))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((Generic(),))
    server.add_insecure_port(f"{BIND}:{GRPC_PORT}")
    server.start()
    return server


def main():
    grpc_server = serve_grpc()
    # the default listen backlog (5) drops SYNs when a benchmark opens its connections at once,
    # and each drop costs a 1 s retransmit in the latency figures
    ThreadingHTTPServer.request_queue_size = 256
    httpd = ThreadingHTTPServer((BIND, HTTP_PORT), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(f"triton stand-in: http {BIND}:{HTTP_PORT} grpc {'on' if grpc_server else 'off'}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
