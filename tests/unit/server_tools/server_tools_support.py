"""The OpenAI service's package (services/openai_api/src) and the CRM stand-in, importable for these tests.

A helper module, not a conftest.py: tests/unit/openai_api's tests import names from their own conftest, and a
second conftest module here would take its place in sys.modules."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "services" / "openai_api" / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

_spec = importlib.util.spec_from_file_location("crm_standin", ROOT / "tools" / "crm-standin" / "crm_standin.py")
crm_standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crm_standin)
sys.modules["crm_standin"] = crm_standin

CRM_TOKEN = "stand-in-secret-7f3a"


def crm_server():
    """The CRM stand-in on 127.0.0.1, an ephemeral port, wanting a bearer token (a fixture body)."""
    server = crm_standin.start(token=CRM_TOKEN)
    yield server
    server.shutdown()
    server.server_close()
