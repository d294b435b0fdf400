"""Filter `triton_fleet_alertmanager_config`: alertmanager.yml as a dict from the role's variables.

Logic: module_utils/triton_fleet/alertmanager_config.py (tests/unit/test_alertmanager_config.py).
"""

from pathlib import Path

import ansible.module_utils
from ansible import constants as C
from ansible.errors import AnsibleFilterError

# Controller-side plugins do not see the configured module_utils path under `ansible.module_utils`: add it.
_CANDIDATES = list(getattr(C, "DEFAULT_MODULE_UTILS_PATH", None) or [])
_CANDIDATES.append(str(Path(__file__).resolve().parents[3] / "module_utils"))
for _p in _CANDIDATES:
    if Path(_p, "triton_fleet").is_dir() and _p not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_p)

from ansible.module_utils.triton_fleet.alertmanager_config import (  # noqa: E402
    AlertmanagerConfigError,
    build_config,
)


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
