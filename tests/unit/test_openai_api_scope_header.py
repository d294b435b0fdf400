"""openai_api_scope_header reaches the service's configuration as server_tools.scope_header.

The service reads X-Auth-Scope only with that flag (app.py); the gateway sets the header from the verified
token (roles/nginx_gateway, nginx_gateway_jwt_scopes_claim). The role's configuration is openai_api_config
(vars/main.yml): its server_tools part is templated here with Ansible's Templar, as Ansible would.
"""

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


def _render(scope_header):
    loader = DataLoader()
    config = loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True)["openai_api_config"]
    variables = {"openai_api_server_tool_rounds": 3, "openai_api_server_tools": [], "openai_api_scope_header": scope_header}
    return {"server_tools": Templar(loader=loader, variables=variables).template(config["server_tools"])}


def test_default_is_off():
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["openai_api_scope_header"] is False


@pytest.mark.parametrize("flag", [True, False])
def test_flag_lands_in_server_tools_and_the_service_reads_it(flag):
    config = _render(flag)
    assert config["server_tools"] == {"max_rounds": 3, "tools": [], "scope_header": flag}
    engine = ServerToolEngine.from_config(config["server_tools"])
    assert engine.scope_header is flag


def _docs_declarations():
    """The declarations docs/server-tools.md shows an operator, with the vault reference replaced."""
    text = (ROOT / "docs" / "server-tools.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    block = block.replace("{{ vault_crm_api_token }}", "test-token")
    return yaml.safe_load(block)["openai_api_server_tools"]


def test_documented_declarations_pass_the_spec_and_reach_the_service():
    """What an operator declares (docs/server-tools.md) -> the role's spec, defaults filled -> the service."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    declared = _docs_declarations()
    result = ArgumentSpecValidator({"openai_api_server_tools": spec["openai_api_server_tools"]}).validate(
        {"openai_api_server_tools": declared}
    )
    assert result.error_messages == []
    tools = result.validated_parameters["openai_api_server_tools"]
    loader = DataLoader()
    config = loader.load_from_file(str(ROLE / "vars" / "main.yml"), trusted_as_template=True)["openai_api_config"]
    variables = {"openai_api_server_tool_rounds": 3, "openai_api_server_tools": tools, "openai_api_scope_header": False}
    rendered = Templar(loader=loader, variables=variables).template(config["server_tools"])
    engine = ServerToolEngine.from_config(rendered)
    assert sorted(engine.tools) == sorted(d["name"] for d in declared)
    first = engine.tools[declared[0]["name"]]
    # The spec's defaults reach the service as values it accepts.
    assert (first.method, first.connect_timeout_s, first.response_format) == ("GET", 2.0, "json")
    assert first.headers == {"Authorization": "Bearer test-token"}
    assert "test-token" not in repr(first)


def test_a_declaration_the_spec_refuses():
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    spec = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    bad = dict(_docs_declarations()[0], method="TRACE")
    result = ArgumentSpecValidator({"openai_api_server_tools": spec["openai_api_server_tools"]}).validate(
        {"openai_api_server_tools": [bad]}
    )
    assert any("method" in m and "TRACE" in m for m in result.error_messages), result.error_messages
