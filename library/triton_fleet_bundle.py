#!/usr/bin/python
"""Ansible module: plan, write, verify and check the offline bundle (docs/offline.md)."""

DOCUMENTATION = r"""
---
module: triton_fleet_bundle
short_description: Plan, write, verify and check an offline bundle of everything a fleet downloads
description:
  - C(action=plan) takes what each host needs (its distribution and packages with the extra repositories they
    come from, its images, checkpoints and wheelhouses) and returns what the bundle must hold, one entry per
    apt repository, image, checkpoint and wheelhouse, each with the hosts that need it and whether the last
    build of the same inputs is still complete there (C(reuse)), so that a second run with nothing changed
    downloads nothing.
  - C(action=manifest) writes C(bundle-manifest.json) for the directory from the items collected into it
    (sha256 of every file, what it is for, where it came from; hashes of unchanged files are reused) and
    returns the bundle's size. Files of an earlier build under the bundle's own directories (C(apt), C(images),
    C(models), C(wheels), C(keys)) that no item accounts for any more are removed; any other file is an error.
  - C(action=verify) compares the directory with its manifest (missing, resized, changed and added files) and
    C(action=check) compares the manifest with what the fleet needs (a distribution, an image, a checkpoint or
    a wheelhouse missing), each failing with one line per problem, naming the hosts concerned.
  - Runs on the controller (C(delegate_to localhost)). The logic is in C(module_utils/triton_fleet/bundle.py).
options:
  action:
    description: What to do.
    type: str
    required: true
    choices: [plan, manifest, verify, check]
  dir:
    description: The bundle directory on the controller.
    type: path
    required: true
  needs:
    description:
      - For C(plan) and C(check). Host name to C({distribution, arch, packages, repos, images, models, wheels}).
    type: dict
  build_images:
    description: For C(plan). Distribution key (C(debian-12), C(ubuntu-22.04)) to the container image apt resolves in.
    type: dict
    default: {}
  refresh:
    description: For C(plan). Resolve every item again, even when the last build of the same inputs is complete.
    type: bool
    default: false
  plan:
    description: For C(manifest). The result of C(action=plan) (what was collected into the directory).
    type: dict
  image_ids:
    description: For C(manifest). Image reference to its image ID (recorded with each image).
    type: dict
    default: {}
  inventory:
    description: For C(manifest). The inventory the bundle was built for (recorded in the manifest).
    type: str
  full:
    description: For C(verify). Hash every file (false compares sizes only).
    type: bool
    default: true
attributes:
  check_mode:
    description: C(plan), C(verify) and C(check) only read and run in full; C(manifest) reports whether it would change the manifest.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
author: triton-fleet
"""

EXAMPLES = r"""
- name: What the bundle must hold
  triton_fleet_bundle:
    action: plan
    dir: /srv/triton-fleet-bundle
    needs: "{{ dict(groups['all'] | zip(groups['all'] | map('extract', hostvars, 'triton_fleet_bundle_need'))) }}"
    build_images: {debian-12: debian:12}
  register: bundle_plan

- name: The bundle on the controller is intact (preflight of an install from it)
  triton_fleet_bundle:
    action: verify
    dir: /srv/triton-fleet-bundle
"""

RETURN = r"""
apt:
  description: For C(plan). One apt repository per distribution and architecture.
  returned: action is plan
  type: list
  elements: dict
  sample: [{path: apt/debian-12-amd64, distribution: debian-12, arch: amd64, packages: [nginx, jq], repos: [],
            build_image: "debian:12", hosts: [gw-01], fingerprint: 3f2a9c0d1e2b4a5c, reuse: false}]
images:
  description: For C(plan). One docker-save archive per image reference.
  returned: action is plan
  type: list
  elements: dict
  sample: [{path: images/nvcr.io_nvidia_tritonserver_26.07-trtllm-python-py3.tar,
            ref: "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", archive: "", hosts: [a10-01], reuse: false}]
models:
  description: For C(plan). One directory per checkpoint.
  returned: action is plan
  type: list
  elements: dict
  sample: [{path: models/qwen3-8b, name: qwen3-8b, source: /home/ops/triton-fleet/.cache/models/qwen3-8b, hosts: [a10-01]}]
wheels:
  description: For C(plan). One wheelhouse per Python version and architecture of the gateways.
  returned: action is plan
  type: list
  elements: dict
  sample: [{path: wheels/cp311-x86_64, tag: cp311-x86_64, python: "3.11", arch: x86_64, hosts: [gw-01]}]
size:
  description: For C(manifest). One line per kind and the total.
  returned: action is manifest
  type: list
  elements: str
  sample: ["  apt           48.3 MiB", "  image       1790.2 MiB", "  total       1928.9 MiB  (171 files)"]
manifest:
  description: For C(manifest). The manifest written (without the per-file list).
  returned: action is manifest
  type: dict
  sample: {schema_version: 1, created: "2026-12-04T22:40:00Z", inventory: inventories/lab,
           totals: {bytes: 2021654528, files: 171, by_kind: {apt: 50650112, image: 1879048192}}}
removed:
  description: For C(manifest). Files of an earlier build removed (no item accounts for them any more).
  returned: action is manifest
  type: list
  elements: str
  sample: [images/triton-fleet_tritonserver-lab_0123456789ab.tar]
hosts:
  description: For C(check). Host name to where its artefacts are in the bundle (the apt repository, each image's archive).
  returned: action is check and nothing is missing
  type: dict
  sample: {node1: {apt: apt/debian-12-amd64, images: {"triton-fleet/tritonserver-lab:a583": images/triton-fleet_tritonserver-lab_a583.tar}}}
problems:
  description: For C(verify) and C(check). What is wrong (empty when nothing is).
  returned: action is verify or check
  type: list
  elements: str
  sample: ["models/qwen3-tiny/model.safetensors: sha256 differs from the manifest (corrupted or changed after the build)"]
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.bundle import (
    MANIFEST, BundleError, build, check, install_paths, items_from_plan, plan, size_report, stale, verify)


def _read(root):
    path = os.path.join(root, MANIFEST)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _same(a, b):
    strip = ("created",)
    return {k: v for k, v in (a or {}).items() if k not in strip} == {k: v for k, v in (b or {}).items() if k not in strip}


def run(params, check_mode=False):
    """``(error or None, changed, result)`` without AnsibleModule."""
    root, action = params["dir"], params["action"]
    try:
        previous = _read(root)
    except ValueError as exc:
        previous = None
        if action != "plan":
            return f"{os.path.join(root, MANIFEST)} is not JSON ({exc}): rebuild the bundle", False, {}
    try:
        if action == "plan":
            return None, False, plan(root, params["needs"] or {}, previous, build_images=params["build_images"],
                                     refresh=params["refresh"])
        if action == "manifest":
            items = items_from_plan(params["plan"], params["image_ids"])
            removed = stale(root, items)
            if removed and check_mode:
                return None, True, {"removed": removed, "size": [], "manifest": {}}
            for rel in removed:
                os.remove(os.path.join(root, rel))
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            new = build(root, items, created=created, inventory=params["inventory"] or "",
                        hashes=(previous or {}).get("files"))
            changed = bool(removed) or not _same(previous, new)
            if changed and not check_mode:
                tmp = os.path.join(root, f".{MANIFEST}.tmp")
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump(new, fh, indent=1, sort_keys=True)
                    fh.write("\n")
                os.replace(tmp, os.path.join(root, MANIFEST))
            summary = {k: v for k, v in new.items() if k != "files"}
            return None, changed, {"size": size_report(new), "manifest": summary, "removed": removed}
        if previous is None:
            return (f"{root} has no {MANIFEST}: it is not a bundle (build one with playbooks/bundle.yml, "
                    "or point triton_fleet_bundle at the directory that holds it)"), False, {}
        problems = verify(root, previous, full=params["full"]) if action == "verify" else check(previous, params["needs"] or {})
    except BundleError as exc:
        return f"{exc}. Nothing was changed.", False, {}
    if problems:
        what = "does not match its manifest" if action == "verify" else "lacks what the inventory needs"
        return (f"the bundle {root} {what} ({len(problems)} problem{'s' if len(problems) > 1 else ''}): "
                + "; ".join(problems[:20]) + ("; ..." if len(problems) > 20 else "")
                + ". Nothing was changed."), False, {"problems": problems}
    if action == "check":
        return None, False, {"problems": [], "hosts": install_paths(previous, params["needs"] or {})}
    return None, False, {"problems": []}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type="str", required=True, choices=["plan", "manifest", "verify", "check"]),
            dir=dict(type="path", required=True),
            needs=dict(type="dict"),
            build_images=dict(type="dict", default={}),
            refresh=dict(type="bool", default=False),
            plan=dict(type="dict"),
            image_ids=dict(type="dict", default={}),
            inventory=dict(type="str"),
            full=dict(type="bool", default=True),
        ),
        required_if=[("action", "plan", ["needs"]), ("action", "check", ["needs"]), ("action", "manifest", ["plan"])],
        supports_check_mode=True,
    )
    error, changed, result = run(module.params, module.check_mode)
    if error:
        module.fail_json(msg=error, changed=False, **result)
    module.exit_json(changed=changed, **result)


if __name__ == "__main__":
    main()
