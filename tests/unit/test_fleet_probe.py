"""tools/fleet-probe: time to first token is the time to the first generated output, not to the first event.

A stand-in gateway streams as the service does: /v1's role chunk at once, the first generated piece (content,
reasoning or a tool call) DELAY_S later; /v2 generate_stream an empty text_output first."""

import importlib.machinery
import importlib.util
import json
import threading
import time
from argparse import Namespace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DELAY_S = 0.3


def _load_probe():
    loader = importlib.machinery.SourceFileLoader("fleet_probe", str(ROOT / "tools" / "fleet-probe"))
    spec = importlib.util.spec_from_loader("fleet_probe", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


probe = _load_probe()


def _chunk(delta, finish=None):
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


TOOL_DELTA = {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                              "function": {"name": "get_weather", "arguments": ""}}]}
STREAMS = {
    "content": [_chunk({"role": "assistant", "content": ""}), None, _chunk({"content": "Hello"}),
                _chunk({"content": " there"}), _chunk({}, "stop")],
    "reasoning": [_chunk({"role": "assistant"}), None, _chunk({"reasoning": "Let", "reasoning_content": "Let"}),
                  _chunk({"content": "Hi"}), _chunk({}, "stop")],
    "reasoning_content": [_chunk({"role": "assistant", "content": None}), None,
                          _chunk({"reasoning_content": "Let"}), _chunk({"content": "Hi"}), _chunk({}, "stop")],
    "tool_calls": [_chunk({"role": "assistant"}), None, _chunk(TOOL_DELTA),
                   _chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}), _chunk({}, "tool_calls")],
    "generate_stream": [{"text_output": "", "model_name": "m"}, None, {"text_output": "Hello", "model_name": "m"},
                        {"text_output": " there", "model_name": "m"}],
}


class Gateway(BaseHTTPRequestHandler):
    stream = []

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for event in self.stream:
            if event is None:
                time.sleep(DELAY_S)
                continue
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")

    def log_message(self, *args):
        pass


@pytest.fixture
def gateway():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("kind", list(STREAMS))
def test_time_to_first_token_is_timed_to_the_first_generated_output(gateway, kind):
    Gateway.stream = STREAMS[kind]
    api = "triton" if kind == "generate_stream" else "openai"
    a = Namespace(api=api, url=gateway, model="m", token="T", max_tokens=4, timeout=10)
    sample = probe.stream_once(a, None, "Hi")
    assert sample["ok"] is True, sample
    # The empty first event came at once; the first generated output DELAY_S later.
    assert DELAY_S <= sample["ttft_s"] <= sample["e2e_s"], sample
    assert sample["tokens"] == 2, sample


def test_events_without_generated_output_count_no_token():
    usage = {"id": "c", "object": "chat.completion.chunk", "choices": [],
             "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    for ev in (_chunk({"role": "assistant", "content": ""}), _chunk({}, "stop"), usage,
               _chunk({"tool_calls": []})):
        assert probe.generated(ev, "openai") == (0, False), ev
    assert probe.generated({"text_output": "", "output_ids": []}, "triton") == (0, False)
    assert probe.generated({"text_output": "ab", "output_ids": [5, 6]}, "triton") == (2, True)
