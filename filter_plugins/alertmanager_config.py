"""Filter `triton_fleet_alertmanager_config`: alertmanager.yml as a dict from the role's variables.

Logic: module_utils/triton_fleet/alertmanager_config.py (tests/unit/test_alertmanager_config.py).
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


_mod = _logic("alertmanager_config")
AlertmanagerConfigError = _mod.AlertmanagerConfigError
build_config = _mod.build_config


def triton_fleet_alertmanager_config(  # noqa: PLR0917 (Jinja passes filter arguments positionally)
    receivers, default_receiver, critical_receiver="", smtp=None, group_by=None, timing=None
):
    try:
        return build_config(
            list(receivers),
            default_receiver,
            critical_receiver,
            dict(smtp or {}),
            group_by=list(group_by or []) or None,
            timing=dict(timing or {}),
        )
    except AlertmanagerConfigError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {"triton_fleet_alertmanager_config": triton_fleet_alertmanager_config}
