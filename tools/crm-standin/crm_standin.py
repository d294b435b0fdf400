#!/usr/bin/env python3
"""CRM stand-in: a small real HTTP service that plays the internal CRM the server tools call, for tests and the lab.

It is a stand-in (no CRM exists here), named so wherever it appears. Python standard library only, so it runs in
any lab container and in unit tests (start it on port 0 and read the port back).

Endpoints:
  GET  /cases/{case_id}            the case as JSON, 404 JSON when unknown
  POST /cases/{case_id}/summary    body {"summary": "..."}: stores it, answers {"case_id", "saved", "summary_chars"}
  GET  /slow?seconds=S             answers after S seconds (at most 60)
  GET  /error?status=N             answers HTTP N (default 503) with a JSON error body
  GET  /oversized?bytes=N&declare=0|1   a JSON body of about N bytes (default 1 MiB), streamed in 64 KiB pieces;
                                   declare=1 sends Content-Length, otherwise the end is the connection's close
  GET  /not-json                   an HTML page
  GET  /redirect                   302 to another port
  GET  /_requests                  the raw request targets (method and path as received), oldest first
  GET  /healthz                    {"ok": true}
With a token (start(token=...) or CRM_STANDIN_TOKEN), every other endpoint wants "Authorization: Bearer <token>"
and answers 401 otherwise, so tests see that the tool's secret header is sent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

SEED_CASES = {
    "CS20240501": {"case_id": "CS20240501", "customer": "Example GmbH", "status": "open", "title": "Supply contract"},
    "CS20240502": {"case_id": "CS20240502", "customer": "Sample SA", "status": "closed", "title": "NDA renewal"},
}
_CASE_RE = re.compile(r"^/cases/([^/]+)$")
_SUMMARY_RE = re.compile(r"^/cases/([^/]+)/summary$")


class CrmStandin(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], token: str | None = None):
        super().__init__(address, _Handler)
        self.token = token
        self.lock = threading.Lock()
        self.cases: dict[str, dict[str, Any]] = {k: dict(v) for k, v in SEED_CASES.items()}
        self.requests: list[dict[str, str]] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: CrmStandin
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib's name)
        if not getattr(self.server, "quiet", False):
            sys.stderr.write("crm-standin: " + (format % args) + "\n")

    def _record(self) -> tuple[str, dict[str, list[str]]]:
        with self.server.lock:
            self.server.requests.append({"method": self.command, "target": self.path})
        parts = urlsplit(self.path)
        return parts.path, parse_qs(parts.query)

    def _authorized(self, path: str) -> bool:
        if self.server.token is None or path in ("/healthz", "/_requests"):
            return True
        if self.headers.get("Authorization") == f"Bearer {self.server.token}":
            return True
        self._json(401, {"error": "missing or wrong bearer token"})
        return False

    def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path, query = self._record()
        if not self._authorized(path):
            return
        if path == "/healthz":
            self._json(200, {"ok": True})
        elif path == "/_requests":
            with self.server.lock:
                self._json(200, list(self.server.requests))
        elif path == "/slow":
            seconds = min(float(query.get("seconds", ["5"])[0]), 60.0)
            time.sleep(seconds)
            self._json(200, {"slept_s": seconds})
        elif path == "/error":
            self._json(int(query.get("status", ["503"])[0]), {"error": "the CRM stand-in failed on purpose"})
        elif path == "/oversized":
            self._oversized(int(query.get("bytes", [str(1 << 20)])[0]), query.get("declare", ["0"])[0] == "1")
        elif path == "/not-json":
            body = b"<html><body>maintenance</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif path == "/redirect":
            self._json(302, {}, {"Location": "http://127.0.0.1:9/elsewhere"})
        else:
            m = _CASE_RE.match(path)
            case_id = unquote(m.group(1)) if m else None
            with self.server.lock:
                case = self.server.cases.get(case_id) if case_id else None
            if case is not None:
                self._json(200, case)
            else:
                self._json(404, {"error": "no such case", "case_id": case_id})

    def do_POST(self) -> None:
        path, _ = self._record()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not self._authorized(path):
            return
        m = _SUMMARY_RE.match(path)
        if not m:
            self._json(404, {"error": "no such endpoint"})
            return
        try:
            body = json.loads(raw or b"{}")
            summary = body["summary"]
            if not isinstance(summary, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            self._json(400, {"error": "body must be JSON with a string 'summary'"})
            return
        case_id = unquote(m.group(1))
        with self.server.lock:
            case = self.server.cases.setdefault(case_id, {"case_id": case_id, "status": "open"})
            case["summary"] = summary
        self._json(200, {"case_id": case_id, "saved": True, "summary_chars": len(summary)})

    def _oversized(self, size: int, declare: bool) -> None:
        piece = b"x" * 65536
        prefix, suffix = b'{"blob": "', b'"}'
        n_pieces = max(1, size // len(piece))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if declare:
            self.send_header("Content-Length", str(len(prefix) + n_pieces * len(piece) + len(suffix)))
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        try:
            self.wfile.write(prefix)
            for _ in range(n_pieces):
                self.wfile.write(piece)
            self.wfile.write(suffix)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading at its limit: what this endpoint is for


def start(host: str = "127.0.0.1", port: int = 0, quiet: bool = True, token: str | None = None) -> CrmStandin:
    """Start the stand-in in a background thread; ``server.url`` is its base URL, ``server.shutdown()`` stops it."""
    server = CrmStandin((host, port), token=token)
    server.quiet = quiet  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, name="crm-standin", daemon=True).start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="CRM stand-in for the server-tools tests and the lab")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    args = parser.parse_args(argv)
    # The lab passes the bearer token the server tool's header carries (from vault) in the environment.
    server = CrmStandin((args.host, args.port), token=os.environ.get("CRM_STANDIN_TOKEN") or None)
    print(f"crm stand-in listening on {server.url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
