#!/usr/bin/python
"""Ansible module: refuse hosts whose distribution a role they run does not implement."""

DOCUMENTATION = r"""
---
module: triton_fleet_platforms
short_description: Refuse, before any change, a host whose release the roles it runs do not all implement
description:
  - Every role lists the releases it implements in its C(meta/main.yml) (C(galaxy_info.platforms)). A host runs
    the roles of its groups (C(FLEET_ROLES) in C(module_utils/triton_fleet/platforms.py), the plays of site.yml),
    so its release (C(Debian 12), C(Ubuntu 24.04), ...) must be listed by all of them.
  - Fails naming each refused host, its release, the roles that lack it and the releases its roles do support.
  - Run it on the controller (C(delegate_to localhost), C(run_once)) in the preflight, after gathering the
    distribution facts of every host and before anything is changed. Reads files only; changes nothing.
options:
  hosts:
    description: Host name to C({groups, distribution, version, major}) (C(group_names) and the facts
      C(distribution), C(distribution_version), C(distribution_major_version)).
    type: dict
    required: true
  roles_dir:
    description: Directory holding the roles (each C(<role>/meta/main.yml) is read).
    type: path
    required: true
attributes:
  check_mode:
    description: Reads files only; check mode runs it in full.
    support: full
  diff_mode:
    description: Changes nothing, so there is nothing to diff.
    support: none
requirements: [PyYAML (on the controller, where it runs)]
author: triton-fleet
"""

EXAMPLES = r"""
- name: Refuse a release the host's roles do not implement
  triton_fleet_platforms:
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'triton_fleet_platform_input'))) }}"
    roles_dir: "{{ playbook_dir }}/../roles"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
platforms:
  description: Host name to its release.
  returned: always
  type: dict
  sample: {a10-01: Debian 12, gw-01: Debian 12}
problems:
  description: One message per refused release and reason (empty when the run goes on).
  returned: always
  type: list
  elements: str
  sample: ["a10-01 runs Ubuntu 24.04, which node_exporter does not support (roles/<role>/meta/main.yml): the roles
            of this host support Debian 12. Install a supported release or leave the host out of the inventory
            (docs/compatibility.md)"]
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.triton_fleet.platforms import PlatformsError, check, role_releases

try:
    import yaml

    HAS_YAML = True
except ImportError:
    HAS_YAML = False


def load_role_releases(roles_dir):
    """role -> releases, from every ``<role>/meta/main.yml`` under ``roles_dir``."""
    if not os.path.isdir(roles_dir):
        raise PlatformsError(f"roles_dir {roles_dir} is not a directory")
    out = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "main.yml")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as fh:
                out[role] = role_releases(role, yaml.safe_load(fh))
    return out


def run(params):
    """``(failed, result)`` without AnsibleModule; raises PlatformsError on unusable declarations or input."""
    problems, platforms = check(params["hosts"] or {}, load_role_releases(params["roles_dir"]))
    result = {"platforms": platforms, "problems": problems}
    if problems:
        result["msg"] = "; ".join(problems) + ". Nothing was changed."
    return bool(problems), result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="dict", required=True),
            roles_dir=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    try:
        failed, result = run(module.params)
    except (PlatformsError, OSError, yaml.YAMLError) as exc:
        module.fail_json(msg=f"cannot check the hosts' platforms: {exc}. Nothing was changed.")
    if failed:
        module.fail_json(changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
