#!/usr/bin/python
"""Ansible module: fail on inventory variables with a role's (or the shared) prefix that nothing declares."""

DOCUMENTATION = r"""
---
module: triton_fleet_variables
short_description: Refuse unknown variables with a role's prefix or triton_fleet_, suggesting the closest declared one
description:
  - Ansible ignores a variable that nothing reads, so a typo silently keeps a default. This module fails, before
    anything is changed, when a host has a variable whose name starts with a role's prefix (C(roles/<name>/) gives
    C(<name>_)) or the shared C(triton_fleet_) and that nothing declares, naming the hosts and the closest
    declared name (C(unknown variable model_artifacts_source (did you mean model_artifacts_source_type?))).
  - Declarations are the options of every entry point of every role's C(meta/argument_specs.yml) and the
    C(shared_variables) of C(meta/shared_variables.yml). Shared variables of kind C(internal) (set by the
    playbooks) or C(fact) are errors when an inventory sets them.
  - Run it on the controller (C(delegate_to localhost), C(run_once)) with the variable names of every host,
    before any fact is set (the preflight stage's first task). Only names are passed, never values.
  - Reads files only; changes nothing (C(changed) is always false).
options:
  hosts:
    description: Host name to the names of the variables set for it (inventory and extra vars).
    type: dict
    required: true
  ignore:
    description: Host name to names to leave out (the host's facts, which Ansible also exposes as variables).
    type: dict
    default: {}
  roles_dir:
    description: Directory holding the roles (each C(<role>/meta/argument_specs.yml) is read).
    type: path
    required: true
  shared_spec:
    description: The YAML file declaring the C(triton_fleet_) variables (C(shared_variables) mapping).
    type: path
    required: true
attributes:
  check_mode:
    description: Reads variables only; check mode runs it in full.
    support: full
  diff_mode:
    description: Changes nothing, so there is nothing to diff.
    support: none
requirements: [PyYAML (on the controller, where it runs)]
author: triton-fleet
"""

EXAMPLES = r"""
- name: Refuse unknown variables
  triton_fleet_variables:
    hosts: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars) | map('list'))) }}"
    ignore: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'ansible_facts') | map('list'))) }}"
    roles_dir: "{{ playbook_dir }}/../roles"
    shared_spec: "{{ playbook_dir }}/../meta/shared_variables.yml"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
problems:
  description: One entry per unknown variable (empty when the run goes on).
  returned: always
  type: list
  elements: dict
  sample: [{variable: model_artifacts_source, hosts: [a10-01], suggestion: model_artifacts_source_type,
            message: "unknown variable model_artifacts_source (did you mean model_artifacts_source_type?): ..."}]
declared:
  description: How many variables each prefix declares.
  returned: always
  type: dict
  sample: {model_artifacts_: 6, triton_fleet_: 44}
checked:
  description: Variable names checked (with a declared prefix), over all hosts.
  returned: always
  type: int
  sample: 212
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.triton_fleet.variables import VariablesError, check, declarations, owner

try:
    import yaml

    HAS_YAML = True
except ImportError:
    HAS_YAML = False


def _load(path):
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_declarations(roles_dir, shared_spec):
    if not os.path.isdir(roles_dir):
        raise VariablesError(f"roles_dir {roles_dir} is not a directory")
    specs = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if os.path.isfile(path):
            specs[role] = _load(path)
    if not os.path.isfile(shared_spec):
        raise VariablesError(f"shared_spec {shared_spec} does not exist")
    return declarations(specs, _load(shared_spec))


def run(params):
    """Module logic without AnsibleModule: ``(failed, result)``; raises VariablesError on bad declarations."""
    decl = load_declarations(params["roles_dir"], params["shared_spec"])
    hosts = {h: list(names or []) for h, names in (params["hosts"] or {}).items()}
    problems = check(hosts, decl, params.get("ignore") or {})
    checked = sum(1 for names in hosts.values() for n in names if owner(n, decl))
    result = {"problems": problems, "declared": {p: len(v) for p, v in decl.items()}, "checked": checked}
    if problems:
        result["msg"] = "; ".join(p["message"] for p in problems) + ". Nothing was changed."
    return bool(problems), result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="dict", required=True),
            ignore=dict(type="dict", default={}),
            roles_dir=dict(type="path", required=True),
            shared_spec=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    try:
        failed, result = run(module.params)
    except (VariablesError, OSError, yaml.YAMLError) as exc:
        module.fail_json(msg=f"cannot read the variable declarations: {exc}")
    if failed:
        module.fail_json(changed=False, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
