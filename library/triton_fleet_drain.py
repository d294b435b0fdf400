#!/usr/bin/python
# Copyright: triton-fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: triton_fleet_drain
short_description: Take a serving node out of rotation at this gateway, or put it back (the drain file)
description:
  - Adds a serving node's address to this gateway host's drain file, or removes it. The drain file is the
    one record of which nodes are out of rotation; the nginx_gateway role marks them C(down) in its
    upstream pools and the OpenAI-compatible service stops sending them requests when reloaded.
  - It only writes the file; the caller reloads NGINX and the service (see playbooks/rolling.yml).
  - A drain file that is not a valid drain file fails the module and is left as it is.
version_added: "1.0.0"
options:
  path:
    description: The drain file.
    type: path
    default: /etc/triton-fleet/drained-nodes.json
  address:
    description: The serving node's address as the gateway's pools name it (its C(triton_fleet_service_address)).
    type: str
    required: true
  host:
    description: The node's inventory name (recorded, for operators).
    type: str
    default: ""
  state:
    description: C(drained) takes the node out of rotation, C(active) puts it back.
    type: str
    choices: [drained, active]
    default: drained
  reason:
    description: Why (recorded).
    type: str
    default: ""
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: full
    details: The diff is the drain file before and after.
author:
  - triton-fleet contributors
"""

EXAMPLES = r"""
- name: Take node1 out of rotation at this gateway
  triton_fleet_drain:
    address: 10.0.0.11
    host: node1
    reason: rolling change
  notify: Reload the gateway pools

- name: Put it back
  triton_fleet_drain:
    address: 10.0.0.11
    state: active
"""

RETURN = r"""
drained:
  description: The addresses out of rotation at this gateway after the change.
  returned: success
  type: list
  elements: str
  sample: ["10.0.0.11"]
path:
  description: The drain file.
  returned: success
  type: str
  sample: /etc/triton-fleet/drained-nodes.json
"""

import os
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.drain import DrainError, apply, drained_addresses, dump_state, parse_state


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "default": "/etc/triton-fleet/drained-nodes.json"},
            "address": {"type": "str", "required": True},
            "host": {"type": "str", "default": ""},
            "state": {"type": "str", "choices": ["drained", "active"], "default": "drained"},
            "reason": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    p = module.params
    before = ""
    if os.path.exists(p["path"]):
        with open(p["path"], encoding="utf-8") as fh:
            before = fh.read()
    try:
        state = parse_state(before, p["path"])
        new, changed = apply(state, p["address"], p["host"], p["state"] == "drained", now=time.time(), reason=p["reason"])
    except DrainError as exc:
        module.fail_json(msg=f"drain file not changed: {exc}")
    after = dump_state(new) if changed else before
    out = {"changed": changed, "drained": drained_addresses(new), "path": p["path"]}
    if module._diff:
        out["diff"] = {"before": before, "after": after, "before_header": p["path"], "after_header": p["path"]}
    if not changed or module.check_mode:
        module.exit_json(**out)
    directory = os.path.dirname(p["path"])
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o755)
    fd, tmp = tempfile.mkstemp(prefix=".drained-nodes.", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(after)
        # Read by the OpenAI-compatible service's own user.
        os.chmod(tmp, 0o644)
        os.replace(tmp, p["path"])
        tmp = None
    finally:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
    module.exit_json(**out)


if __name__ == "__main__":
    main()
