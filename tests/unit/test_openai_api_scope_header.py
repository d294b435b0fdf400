"""openai_api_scope_header reaches the service's configuration as server_tools.scope_header.

The service reads X-Auth-Scope only with that flag (app.py); the gateway sets the header from the verified
token (roles/nginx_gateway, nginx_gateway_jwt_scopes_claim). The role renders the configuration in its
"Write the configuration" task: templated here with Ansible's Templar, as Ansible would.
"""

import json
import sys
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "openai_api"
if str(ROOT / "services" / "openai_api" / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "services" / "openai_api" / "src"))

from triton_fleet_openai.server_tools import ServerToolEngine  # noqa: E402

pytestmark = pytest.mark.controller


def _tasks(items):
    for t in items or []:
        yield t
        yield from _tasks(t.get("block"))


def _write_config_task(loader):
    tasks = loader.load_from_file(str(ROLE / "tasks" / "main.yml"), trusted_as_template=True)
    found = [t for t in _tasks(tasks) if str(t.get("name", "")).startswith("Write the configuration")]
    assert len(found) == 1, "roles/openai_api/tasks/main.yml: one 'Write the configuration' task expected"
    return found[0]


def _render(scope_header):
    loader = DataLoader()
    task = _write_config_task(loader)
    variables = {
        "openai_api_config": {"port": 8090, "server_tools": {"max_rounds": 3, "tools": []}},
        "openai_api_scope_header": scope_header,
    }
    templar = Templar(loader=loader, variables=variables)
    variables.update(templar.template(task["vars"]))
    content = Templar(loader=loader, variables=variables).template(task["ansible.builtin.copy"]["content"])
    return json.loads(content)


def test_default_is_off():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["openai_api_scope_header"] is False


@pytest.mark.parametrize("flag", [True, False])
def test_flag_lands_in_server_tools_and_the_service_reads_it(flag):
    config = _render(flag)
    assert config["server_tools"] == {"max_rounds": 3, "tools": [], "scope_header": flag}
    assert config["port"] == 8090
    engine = ServerToolEngine.from_config(config["server_tools"])
    assert engine.scope_header is flag
