#!/usr/bin/python
# Copyright: triton-fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: triton_fleet_firewall
short_description: Render, check and write this host's nftables allow-list from the inventory
description:
  - Computes which TCP ports of this host are open to which sources from inventory groups, the
    hosts' service addresses and the admin networks, renders an nft script that replaces only the
    C(inet triton_fleet) table, checks it with C(nft -c) and writes it atomically.
  - It does not load the rules; the role's handler does, so rules change only after a successful check.
  - Any unknown group, malformed CIDR or host without an address fails the module before the file is touched.
version_added: "1.0.0"
options:
  path:
    description: Where the nft script is written.
    type: path
    default: /etc/triton-fleet/firewall.nft
  host:
    description: The inventory name of this host.
    type: str
    required: true
  groups:
    description: The inventory groups (Ansible's C(groups) variable).
    type: dict
    required: true
  addresses:
    description: Inventory host name to service address.
    type: dict
    required: true
  services:
    description: Services and who may reach them.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Service name (lower case, used in rule comments).
        type: str
        required: true
      ports:
        description: TCP ports.
        type: list
        elements: int
        required: true
      on_groups:
        description: Groups whose hosts run the service.
        type: list
        elements: str
        required: true
      from_groups:
        description: Groups whose hosts may connect.
        type: list
        elements: str
        default: []
      from_networks:
        description: CIDRs that may connect.
        type: list
        elements: str
        default: []
  admin_networks:
    description: CIDRs that may reach SSH.
    type: list
    elements: str
    required: true
  ssh_port:
    description: The SSH port.
    type: int
    default: 22
  trusted_interfaces:
    description: Interfaces whose traffic is never filtered.
    type: list
    elements: str
    default: [lo]
  default_policy:
    description: What happens to TCP/UDP to this host that no rule allows.
    type: str
    choices: [drop, accept]
    default: drop
  validate:
    description: Check the rendered script with C(nft -c -f) before writing it.
    type: bool
    default: true
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Check mode renders and validates the rules (C(nft -c)) without replacing the file.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: full
    details: The diff is the nftables script before and after.
author:
  - triton-fleet contributors
"""

EXAMPLES = r"""
- name: Write the allow-list
  triton_fleet_firewall:
    host: "{{ inventory_hostname }}"
    groups: "{{ groups }}"
    addresses: {node1: 10.0.0.11, gw1: 10.0.0.10}
    admin_networks: [10.0.0.0/24]
    services:
      - {name: triton, ports: [8000, 8001, 8002], on_groups: [gpu_nodes], from_groups: [gateways]}
  notify: Reload triton-fleet firewall
"""

RETURN = r"""
plan:
  description: The allow-list of this host.
  returned: success
  type: dict
  sample: {"ssh": {"port": 22, "sources": ["10.0.0.0/24"]}, "services": [{"name": "triton", "ports": [8000], "sources": ["10.0.0.10/32"]}]}
path:
  description: The script path.
  returned: success
  type: str
  sample: /etc/triton-fleet/firewall.nft
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.firewall import FirewallError, plan, render


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/etc/triton-fleet/firewall.nft"},
            "host": {"type": "str", "required": True},
            "groups": {"type": "dict", "required": True},
            "addresses": {"type": "dict", "required": True},
            "services": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "name": {"type": "str", "required": True},
                    "ports": {"type": "list", "elements": "int", "required": True},
                    "on_groups": {"type": "list", "elements": "str", "required": True},
                    "from_groups": {"type": "list", "elements": "str", "default": []},
                    "from_networks": {"type": "list", "elements": "str", "default": []},
                },
            },
            "admin_networks": {"type": "list", "elements": "str", "required": True},
            "ssh_port": {"type": "int", "default": 22},
            "trusted_interfaces": {"type": "list", "elements": "str", "default": ["lo"]},
            "default_policy": {"type": "str", "choices": ["drop", "accept"], "default": "drop"},
            "validate": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = plan(p["host"], p["groups"], p["addresses"], p["services"], p["admin_networks"], p["ssh_port"])
        content = render(result, p["trusted_interfaces"], p["default_policy"])
    except FirewallError as exc:
        module.fail_json(msg=f"firewall not changed: {exc}")

    before = ""
    if os.path.exists(p["path"]):
        with open(p["path"], encoding="utf-8") as fh:
            before = fh.read()
    changed = before != content
    out = {"changed": changed, "plan": result, "path": p["path"]}
    if module._diff:
        out["diff"] = {"before": before, "after": content, "before_header": p["path"], "after_header": p["path"]}
    if not changed:
        module.exit_json(**out)

    directory = os.path.dirname(p["path"])
    if not os.path.isdir(directory):
        if module.check_mode:
            module.exit_json(**out)
        os.makedirs(directory, mode=0o755)
    fd, tmp = tempfile.mkstemp(prefix=".firewall.", suffix=".nft", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        if p["validate"]:
            nft = module.get_bin_path("nft", required=True)
            rc, _, err = module.run_command([nft, "-c", "-f", tmp])
            if rc != 0:
                module.fail_json(msg=f"firewall not changed: nft -c rejected the rendered rules: {err.strip()}", **out)
        if module.check_mode:
            module.exit_json(**out)
        os.chmod(tmp, 0o600)
        os.replace(tmp, p["path"])
        tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
