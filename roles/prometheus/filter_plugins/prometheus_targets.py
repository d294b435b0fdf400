"""Filter `triton_fleet_scrape_targets`: file_sd targets from the inventory.

The logic lives in module_utils/triton_fleet/scrape_targets.py (unit-tested in
tests/unit/test_scrape_targets.py); this file only adapts Ansible's objects to it.
"""

from pathlib import Path

import ansible.module_utils
from ansible import constants as C
from ansible.errors import AnsibleFilterError

# Controller-side plugins do not see the configured module_utils path (ansible.cfg `module_utils`)
# under `ansible.module_utils`; add it, then the project's own copy relative to this file.
_CANDIDATES = list(getattr(C, "DEFAULT_MODULE_UTILS_PATH", None) or [])
_CANDIDATES.append(str(Path(__file__).resolve().parents[3] / "module_utils"))
for _p in _CANDIDATES:
    if Path(_p, "triton_fleet").is_dir() and _p not in ansible.module_utils.__path__:
        ansible.module_utils.__path__.append(_p)

from ansible.module_utils.triton_fleet.scrape_targets import (  # noqa: E402
    ScrapeTargetError,
    build_targets,
    hostvars_subset,
)


def triton_fleet_scrape_targets(hostvars, groups, jobs):
    """{job: [ {targets: [addr:port], labels: {host, group, gpu_sku}} ]} for every job."""
    try:
        hosts = groups.get("all") or sorted({h for members in groups.values() for h in members})
        return build_targets(dict(groups), hostvars_subset(hostvars, hosts), list(jobs))
    except ScrapeTargetError as exc:
        raise AnsibleFilterError(str(exc)) from None


class FilterModule:
    def filters(self):
        return {
            "triton_fleet_scrape_targets": triton_fleet_scrape_targets,
        }
