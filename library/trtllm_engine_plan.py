#!/usr/bin/python
"""Ansible module: decide, for the whole play, which host builds each engine and which hosts receive copies."""

DOCUMENTATION = r"""
---
module: trtllm_engine_plan
short_description: Group serving hosts by profile fingerprint and pick one builder per fingerprint
description:
  - Pure computation (run it once, on the controller). Hosts with the same profile fingerprint share one
    engine. For each fingerprint the builder is the first C(engine_builders) member of that group, else the
    group's first host. If any host already holds a valid artifact, nothing is built and the builder's (or
    the first valid host's) artifact is the reference; hosts whose artifact is missing, corrupt or differs
    from the reference receive a copy.
  - Every profile's fingerprint is checked against its build fields; a mismatch fails and names the host.
options:
  profiles:
    description: Host name to serving profile (C(triton_fleet_profile) of each host).
    type: dict
    required: true
  states:
    description: Host name to the result of C(trtllm_engine state=verified) on that host.
    type: dict
    required: true
  builders:
    description: Members of the C(engine_builders) group, in inventory order.
    type: list
    elements: str
    default: []
  order:
    description: Host order (inventory order; the play batch, so a play with serial plans only its batch); the first host of a group is the default builder.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Pure computation over the hosts' reports; the same in check mode.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: none
author: triton-fleet
"""

EXAMPLES = r"""
- name: Plan engine builds
  trtllm_engine_plan:
    profiles: "{{ dict(ansible_play_batch | zip(ansible_play_batch | map('extract', hostvars, 'triton_fleet_profile'))) }}"
    states: "{{ dict(ansible_play_batch | zip(ansible_play_batch | map('extract', hostvars, '_engine_state'))) }}"
    builders: "{{ groups['engine_builders'] | default([]) }}"
    order: "{{ ansible_play_batch }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
groups: {description: Per fingerprint - hosts, builder, source, build, copy_to., returned: always, type: dict, sample: {cbdc19e1...: {hosts: [node1, node2], builder: node1, source: node1, build: true, copy_to: [node2]}}}
hosts: {description: Per host - fingerprint, build, copy, source., returned: always, type: dict, sample: {node1: {fingerprint: cbdc19e1..., build: true, copy: false, source: node1}, node2: {fingerprint: cbdc19e1..., build: false, copy: true, source: node1}}}
builds: {description: Hosts that must build., returned: always, type: list, sample: [node1]}
sources: {description: Hosts whose artifact is copied to others., returned: always, type: list, sample: [node1]}"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.engine_store import EngineError, plan_fleet


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profiles=dict(type="dict", required=True),
            states=dict(type="dict", required=True),
            builders=dict(type="list", elements="str", default=[]),
            order=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    missing = [h for h, prof in p["profiles"].items() if not isinstance(prof, dict)]
    if missing:
        module.fail_json(msg="hosts without a serving profile: {}; run the preflight play (it sets "
                             "triton_fleet_profile) before the engines play".format(", ".join(sorted(missing))))
    try:
        plan = plan_fleet(p["profiles"], p["states"], builders=p["builders"], order=p["order"] or None)
    except EngineError as exc:
        module.fail_json(msg=str(exc))
    summary = ["{}: {}".format(fp[:12], ("build on {}".format(g["builder"])) if g.get("build") else
                           ("no build step ({})".format(g["runtime"])) if not g.get("build_required") else
                           ("copy from {} to {}".format(g["source"], ", ".join(g["copy_to"]))) if g.get("copy_to")
                           else "up to date")
               for fp, g in plan["groups"].items()]
    module.exit_json(changed=False, msg="; ".join(summary), **plan)


if __name__ == "__main__":
    main()
