"""Filter `triton_fleet_scrape_targets`: file_sd targets from the inventory.

The logic lives in module_utils/triton_fleet/scrape_targets.py (unit-tested in
tests/unit/test_scrape_targets.py); this file only adapts Ansible's objects to it.
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


_mod = _logic("scrape_targets")
ScrapeTargetError = _mod.ScrapeTargetError
build_targets = _mod.build_targets
hostvars_subset = _mod.hostvars_subset


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
