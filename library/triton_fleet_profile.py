#!/usr/bin/python
"""Ansible module: check a serving profile against its schema and return what the roles read from it."""

DOCUMENTATION = r"""
---
module: triton_fleet_profile
short_description: Validate a serving profile and return its served name, runtime and artifact paths
description:
  - The one validator of the serving profile (C(docs/profile.md)), with C(module_utils/triton_fleet/profile.py).
    Fails naming the first missing or wrong field and what to do (re-run the preflight stage).
  - Returns the values every role and playbook reads from a profile (served model name, runtime, the checkpoint
    and engine directories), so that none of them derives these from inventory variables.
  - With I(path), reads the profile from that JSON file on the host the module runs on (the profile the
    preflight stage wrote to C(/etc/triton-fleet/profile.json)) instead of taking I(profile).
  - With I(expected), also compares the profile with I(expected) (a fresh plan) and fails listing the fields
    that differ, naming the stage to run first.
  - Reads only; changes nothing (C(changed) is always false).
options:
  profile:
    description: The profile (the host var C(triton_fleet_profile)). Exactly one of I(profile) and I(path).
    type: dict
  path:
    description: JSON file holding the profile, on the host the module runs on.
    type: path
  expected:
    description: A freshly planned profile that the profile must equal (C(reasons), C(alternatives) and C(predicted) aside).
    type: dict
  stage:
    description: The stage asking (named in the messages).
    type: str
    default: this stage
  models_dir:
    description: Root of the model cache; the checkpoint is C(<models_dir>/<checkpoint_name>).
    type: path
    default: /var/lib/triton-fleet/models
  engines_dir:
    description: Root of the engine store; the engine is C(<engines_dir>/<fingerprint>).
    type: path
    default: /var/lib/triton-fleet/engines
attributes:
  check_mode:
    description: Reads the profile only; check mode runs it in full.
    support: full
  diff_mode:
    description: Changes nothing, so there is nothing to diff.
    support: none
author: triton-fleet
"""

EXAMPLES = r"""
- name: Check the profile and derive its paths
  triton_fleet_profile:
    profile: "{{ triton_fleet_profile | default(none) }}"
    stage: triton
    models_dir: /var/lib/triton-fleet/models
  delegate_to: localhost
  become: false
  register: triton_server__profile

- name: Read back the profile the preflight stage wrote, and check it against a fresh plan
  triton_fleet_profile:
    path: /etc/triton-fleet/profile.json
    expected: "{{ triton_fleet_profile }}"
    stage: gateway
"""

RETURN = r"""
profile:
  description: The validated profile.
  returned: always
  type: dict
  sample: {schema_version: 1, name: qwen3-tiny_cpu_fp32_tp1_transformers, runtime: transformers}
served_name:
  description: Name the model is served under (C(model.served_name)).
  returned: always
  type: str
  sample: qwen3-14b
runtime:
  description: The serving runtime.
  returned: always
  type: str
  sample: trtllm-engine
device:
  description: gpu or cpu.
  returned: always
  type: str
  sample: gpu
image:
  description: The pinned Triton image (C(image.ref)).
  returned: always
  type: str
  sample: nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3
fingerprint:
  description: The profile fingerprint.
  returned: always
  type: str
  sample: 3f0c9a5e0d2b4c6a8e1f7d9b2c4e6a8f0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a
checkpoint_name:
  description:
    - C(<key>@<revision>) of the checkpoint the host loads - C(<model.key>@<model.revision>), or the pre-quantized
      checkpoint's C(<model.checkpoint.key>@<model.checkpoint.revision>) when the profile names one.
  returned: always
  type: str
  sample: qwen3-14b@main
checkpoint_dir:
  description: The checkpoint directory on a serving host (C(<models_dir>/<checkpoint_name>)).
  returned: always
  type: str
  sample: /var/lib/triton-fleet/models/qwen3-14b@main
checkpoint_key:
  description: The checkpoint's name without revision (its directory under a controller source or a bundle).
  returned: always
  type: str
  sample: qwen3-14b-fp8
checkpoint_hf_id:
  description: The repository the checkpoint comes from (C(model.hf_id), or C(model.checkpoint.hf_id)); null for a model known only by its config.json.
  returned: always
  type: str
  sample: Qwen/Qwen3-14B-FP8
pre_quantized:
  description: Whether the checkpoint is a pre-quantized one (C(model.checkpoint)) rather than the base model's.
  returned: always
  type: bool
  sample: false
engine_dir:
  description: The engine directory on a serving host (used by the trtllm-engine runtime).
  returned: always
  type: str
  sample: /var/lib/triton-fleet/engines/3f0c9a5e0d2b4c6a8e1f7d9b2c4e6a8f0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a
build_required:
  description: Whether the runtime needs an engine build.
  returned: always
  type: bool
  sample: true
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet import profile as schema

PREFLIGHT = "ansible-playbook site.yml --tags preflight"


class StageError(ValueError):
    pass


def run(params):
    """Module logic without AnsibleModule: the result dict, or StageError / ProfileError."""
    stage = params.get("stage") or "this stage"
    if params.get("profile") is not None and params.get("path") is not None:
        raise StageError("give one of profile and path, not both")
    if params.get("path") is not None:
        try:
            with open(params["path"], encoding="utf-8") as fh:
                profile = json.load(fh)
        except FileNotFoundError:
            raise StageError(
                f"{params['path']} does not exist: the preflight stage has not run on this host. Run it first "
                f"({PREFLIGHT}, or the whole site.yml), then {stage}."
            ) from None
        except (OSError, ValueError) as exc:
            raise StageError(f"{params['path']} cannot be read as a profile ({exc}): run {PREFLIGHT} to rewrite it") from None
    else:
        profile = params["profile"]
    if not profile:
        raise StageError(
            f"no serving profile: {stage} needs the one the preflight stage plans. Run site.yml (or "
            f"{PREFLIGHT} first); the preflight planning runs with every --tags selection of site.yml."
        )
    try:
        schema.validate(profile)
    except schema.ProfileError as exc:
        raise StageError(f"{exc} (asked by {stage})") from None
    expected = params.get("expected")
    if expected is not None:
        diff = schema.differences(profile, expected)
        if diff:
            raise StageError(
                "the profile on this host differs from a fresh plan in {}: the inventory or the planner changed "
                "since the preflight stage last ran. Run {} (it writes the new profile), then the stages "
                "that follow it (engines, triton, gateway), or the whole site.yml, before {} alone.".format(
                    ", ".join(diff), PREFLIGHT, stage)
            )
    result = schema.derived(profile, params.get("models_dir") or schema.DEFAULT_MODELS_DIR,
                            params.get("engines_dir") or schema.DEFAULT_ENGINES_DIR)
    result["profile"] = profile
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type="dict"),
            path=dict(type="path"),
            expected=dict(type="dict"),
            stage=dict(type="str", default="this stage"),
            models_dir=dict(type="path", default=schema.DEFAULT_MODELS_DIR),
            engines_dir=dict(type="path", default=schema.DEFAULT_ENGINES_DIR),
        ),
        mutually_exclusive=[("profile", "path")],
        supports_check_mode=True,
    )
    try:
        result = run(module.params)
    except (StageError, schema.ProfileError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
