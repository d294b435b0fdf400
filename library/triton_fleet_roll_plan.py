#!/usr/bin/python
# Copyright: triton-fleet contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
---
module: triton_fleet_roll_plan
short_description: Size the batches of a rolling change from the measured load and the nodes' planned capacity
description:
  - Reads the peak load at the gateways from Prometheus (mean requests in flight, by Little's law from the
    gateways' upstream time), takes each serving node's capacity from its serving profile
    (C(limits.max_batch_size) times C(parallel.replicas_per_host)), and returns the batches of the roll,
    the batch size asked for, cut down to the largest one whose worst case still carries the load within
    I(margin) of the remaining capacity.
  - Refuses (fails, naming the figures) when not even one node can be taken out, or when there is no
    measurement, unless I(force) is set. Runs on the controller and changes nothing.
version_added: "1.0.0"
options:
  profiles:
    description: Every serving node (inventory name) to its serving profile.
    type: dict
    required: true
  roll:
    description: The nodes to change, in order (default every node in I(profiles)); the others still carry load.
    type: list
    elements: str
  batch_size:
    description: Nodes per batch, a count or a percentage of the nodes such as C(25%).
    type: raw
    default: 1
  margin:
    description: Share of the remaining nodes' capacity the measured load may use while a batch is out.
    type: float
    default: 0.8
  force:
    description: Roll even when the capacity check refuses or cannot measure (requests may queue or fail).
    type: bool
    default: false
  prometheus_url:
    description: Prometheus base URL; empty for no measurement (then only I(force) lets the roll start).
    type: str
    default: ""
  query:
    description: Instant query whose value is the peak requests in flight at the gateways.
    type: str
    default: max_over_time(sum(rate(triton_fleet_gateway_upstream_seconds_sum[1m]))[15m:30s])
  timeout:
    description: Seconds for the Prometheus query.
    type: int
    default: 10
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: none
author:
  - triton-fleet contributors
"""

EXAMPLES = r"""
- name: Size the roll
  triton_fleet_roll_plan:
    profiles: "{{ dict(groups['gpu_nodes'] | zip(groups['gpu_nodes'] | map('extract', hostvars, 'triton_fleet_profile'))) }}"
    batch_size: 25%
    prometheus_url: http://10.0.0.13:9090
  register: roll
"""

RETURN = r"""
batch_size:
  description: Nodes per batch.
  returned: success
  type: int
  sample: 1
batches:
  description: The nodes of each batch, in order.
  returned: success
  type: list
  elements: list
  sample: [["node1"], ["node2"]]
measured_load:
  description: Peak requests in flight at the gateways over the query's window (null without a measurement).
  returned: success
  type: float
  sample: 1.8
capacities:
  description: Requests each node runs at once (from its profile).
  returned: success
  type: dict
  sample: {"node1": 4, "node2": 4}
reason:
  description: Why the batch has this size.
  returned: success
  type: str
  sample: "1 node(s) per batch: with them out the others run 4 at once, 80% of it carries the peak load of 1.80"
"""

import json
from urllib.error import URLError
from urllib.parse import urlencode
from urllib.request import urlopen

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.rolling import RollError, concurrency_from_prometheus, node_capacity, plan


def measure(module, url, query, timeout):
    if not url:
        return None
    full = url.rstrip("/") + "/api/v1/query?" + urlencode({"query": query})
    try:
        with urlopen(full, timeout=timeout) as resp:
            return concurrency_from_prometheus(json.loads(resp.read().decode("utf-8")))
    except (URLError, OSError, ValueError) as exc:
        if module.params["force"]:
            module.warn(f"no load measurement from {url} ({exc}); rolling anyway (force)")
            return None
        module.fail_json(msg=f"cannot query Prometheus at {url} for the load ({exc}); nothing was changed. Fix "
                         "the monitoring host or set rolling_force=true to roll without the capacity check")


def main():
    module = AnsibleModule(
        argument_spec={
            "profiles": {"type": "dict", "required": True},
            "roll": {"type": "list", "elements": "str"},
            "batch_size": {"type": "raw", "default": 1},
            "margin": {"type": "float", "default": 0.8},
            "force": {"type": "bool", "default": False},
            "prometheus_url": {"type": "str", "default": ""},
            "query": {"type": "str",
                      "default": "max_over_time(sum(rate(triton_fleet_gateway_upstream_seconds_sum[1m]))[15m:30s])"},
            "timeout": {"type": "int", "default": 10},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        capacities = {node: node_capacity(profile) for node, profile in p["profiles"].items()}
        load = measure(module, p["prometheus_url"], p["query"], p["timeout"])
        result = plan(capacities, load, p["batch_size"], margin=p["margin"], force=p["force"], roll=p["roll"])
    except RollError as exc:
        module.fail_json(msg=f"the roll does not start, nothing was changed: {exc}")
    module.exit_json(changed=False, capacities=capacities, **result)


if __name__ == "__main__":
    main()
