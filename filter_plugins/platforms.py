"""Filter for the roles whose tasks differ by release: does this role implement the host's release?

`triton_fleet_role_platform(meta, role, facts)`: ``{release, supported, releases}`` for the host whose
``ansible_facts`` are given, from the role's own meta/main.yml (``lookup('file', role_path ~ '/meta/main.yml')
| from_yaml``), the list the fleet's preflight reads too (library/triton_fleet_platforms.py). The role's
tasks/platform.yml asserts ``supported`` and names ``releases``.

Logic: module_utils/triton_fleet/platforms.py (tests/unit/test_platforms.py).
"""

import importlib.util
import sys
from collections.abc import Mapping
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


_mod = _logic("platforms")


def triton_fleet_role_platform(meta, role, facts):
    facts = facts if isinstance(facts, Mapping) else {}
    try:
        return _mod.role_platform(role, meta, facts.get("distribution"), facts.get("distribution_version"),
                                  facts.get("distribution_major_version"))
    except _mod.PlatformsError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"triton_fleet_role_platform": triton_fleet_role_platform}
