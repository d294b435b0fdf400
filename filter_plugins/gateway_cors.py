"""Filters for roles/nginx_gateway's CORS allow-list (nginx_gateway_cors_allowed_origins).

`triton_fleet_gateway_cors_problems`: the entries that cannot be used, 'entry: why' (tasks/validate.yml asserts
it is empty, so a bad list fails the run before anything changes); `triton_fleet_gateway_cors`: what
gateway.conf.j2 formats (normalised origins, the preflight's request-header regex, the header lists).

Logic: module_utils/triton_fleet/gateway_cors.py (tests/unit/test_gateway_cors.py).
"""

import importlib.util
import sys
from pathlib import Path

from ansible.errors import AnsibleFilterError


def _logic(name):
    """module_utils/triton_fleet/<name>.py, loaded from this repository under a private module name.

    Ansible makes the configured module_utils importable only inside module payloads, not in
    controller plugins; loading the file by path keeps ansible.module_utils and sys.path untouched.
    """
    qualified = "_triton_fleet_filter_" + name
    if qualified in sys.modules:
        return sys.modules[qualified]
    path = Path(__file__).resolve().parents[1] / "module_utils" / "triton_fleet" / (name + ".py")
    spec = importlib.util.spec_from_file_location(qualified, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module


_mod = _logic("gateway_cors")


def triton_fleet_gateway_cors_problems(origins):
    return _mod.problems(list(origins) if isinstance(origins, (list, tuple)) else origins)


def triton_fleet_gateway_cors(origins):
    try:
        return _mod.gateway_cors(list(origins) if isinstance(origins, (list, tuple)) else origins)
    except _mod.CorsError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {
            "triton_fleet_gateway_cors_problems": triton_fleet_gateway_cors_problems,
            "triton_fleet_gateway_cors": triton_fleet_gateway_cors,
        }
