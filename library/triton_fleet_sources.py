#!/usr/bin/python
"""Ansible module: where every download of each host comes from (triton_fleet_mirrors resolved)."""

DOCUMENTATION = r"""
---
module: triton_fleet_sources
short_description: Resolve the site's mirrors into each host's download sources and say where each comes from
description:
  - Takes every host's C(triton_fleet_mirrors) (registry mirrors, per-image references, apt repository mirrors,
    the Python index, the checkpoint source), its own explicit role variables, its groups and its serving
    profile, and returns for each host the role variables its roles read (set them as C(triton_fleet_sources))
    and a table of every artefact it will download, from where, and why (upstream, a mirror, the inventory,
    an archive).
  - A malformed C(triton_fleet_mirrors) (an unknown key, a URL without a scheme, a mirrored repository without
    its signing key) fails naming the host, the key and the closest valid one, before anything is changed.
  - An explicit role variable (e.g. C(dcgm_exporter_image) in a host's inventory) always wins over the mirror.
  - Run it on the controller (C(delegate_to localhost), C(run_once)); it reads nothing and changes nothing.
  - The logic is in C(module_utils/triton_fleet/sources.py); docs/offline.md describes the variable group.
options:
  hosts:
    description:
      - Host name to its input, C({groups, mirrors, variables, profile}). C(variables) maps every name of
        C(variables_expected) to the host's own value (C("") when unset); C(profile) is the serving profile or null.
    type: dict
    required: true
  variables_expected:
    description:
      - The variable names each host's C(variables) carries. Checked against what the resolver reads, so that a
        playbook that passes too few fails here rather than ignoring an inventory setting.
    type: list
    elements: str
    required: true
attributes:
  check_mode:
    description: Computes only; check mode runs it in full.
    support: full
  diff_mode:
    description: Changes nothing, so there is nothing to diff.
    support: none
author: triton-fleet
"""

EXAMPLES = r"""
- name: Where every download comes from
  triton_fleet_sources:
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'triton_fleet_sources_input'))) }}"
    variables_expected: "{{ triton_fleet_source_variables }}"
  delegate_to: localhost
  run_once: true
  register: triton_fleet_sources_plan
"""

RETURN = r"""
sources:
  description: Host name to the role variables its roles read (role variable -> value).
  returned: success
  type: dict
  sample: {a10-01: {triton_server_image: harbor.example.com/nvcr/nvidia/tritonserver:26.07-trtllm-python-py3,
                    dcgm_exporter_image: harbor.example.com/nvcr/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless}}
rows:
  description: Host name to one row per artefact (artefact, source, origin, variable).
  returned: success
  type: dict
  sample: {a10-01: [{artefact: DCGM exporter image, source: harbor.example.com/nvcr/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless,
                     origin: mirror (registries.nvcr.io), variable: dcgm_exporter_image}]}
table:
  description: The lines to show; hosts with the same sources share one block.
  returned: success
  type: list
  elements: str
  sample: ["=== a10-01, a10-02: where each download comes from",
           "  DCGM exporter image  harbor.example.com/nvcr/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless  [mirror (registries.nvcr.io)]"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.sources import VARIABLES, SourcesError, format_table, host_roles, resolve


def run(params):
    """``(error message or None, result)`` without AnsibleModule."""
    expected = sorted(params["variables_expected"])
    if expected != sorted(VARIABLES):
        missing = sorted(set(VARIABLES) - set(expected))
        extra = sorted(set(expected) - set(VARIABLES))
        return (f"the playbook passes the wrong variable list to triton_fleet_sources (missing {missing}, "
                f"not read {extra}): fix triton_fleet_source_variables in playbooks/preflight.yml"), {}
    sources, rows, errors = {}, {}, []
    for host in sorted(params["hosts"]):
        item = params["hosts"][host] or {}
        variables = item.get("variables") or {}
        try:
            r = resolve(item.get("mirrors"), explicit=variables, profile=item.get("profile") or None,
                        roles=host_roles(item.get("groups") or [], variables))
        except SourcesError as exc:
            errors.append(f"{host}: {exc}")
            continue
        sources[host], rows[host] = r["values"], r["rows"]
    if errors:
        return "; ".join(errors) + ". Nothing was changed.", {}
    return None, {"sources": sources, "rows": rows, "table": format_table(rows)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            hosts=dict(type="dict", required=True),
            variables_expected=dict(type="list", elements="str", required=True),
        ),
        supports_check_mode=True,
    )
    error, result = run(module.params)
    if error:
        module.fail_json(msg=error, changed=False)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
