#!/usr/bin/python
"""Ansible wrapper around module_utils/triton_fleet/driver_policy.py (decisions of the nvidia_driver role)."""

DOCUMENTATION = r"""
---
module: nvidia_driver_policy
short_description: Decide driver branch, kernel module flavour, packages, reboot and verification for NVIDIA GPU hosts
description:
  - Pure decision module used by the C(nvidia_driver) role; it never changes the host.
  - C(mode=plan) checks the pinned branch against the Triton image's minimum driver, refuses hosts without an
    NVIDIA GPU unless told otherwise, picks open or proprietary kernel modules from the GPU facts and returns the
    packages to install for the OS family, distribution, source, branch and flavour.
  - C(mode=reboot) decides whether the change needs a reboot (new module, nouveau loaded, driver/library mismatch),
    and whether it may happen here (containers and C(reboot_allowed=false) skip it).
  - C(mode=verify) compares the C(gpu_facts) facts with the expectation and fails with every difference.
options:
  mode:
    description: Which decision to make.
    type: str
    choices: [plan, reboot, verify]
    required: true
  os_family: {description: ansible_facts os_family (plan)., type: str, default: ""}
  distribution: {description: ansible_facts distribution (plan)., type: str, default: ""}
  major_version: {description: ansible_facts distribution_major_version (plan)., type: str, default: ""}
  kernel: {description: Running kernel release (plan)., type: str, default: ""}
  source: {description: Package source., type: str, choices: [cuda, distribution], default: cuda}
  branch: {description: Driver branch pin, e.g. 580., type: str, default: ""}
  version: {description: Exact driver version pin, e.g. 580.159.04 (optional)., type: str, default: ""}
  kernel_modules: {description: Kernel module flavour., type: str, choices: [auto, open, proprietary], default: auto}
  compute_capability_hint: {description: Compute capability used when no GPU reports one., type: str, default: ""}
  image_ref: {description: The Triton image the host must run., type: str, default: ""}
  image_min_branch: {description: Explicit minimum branch for the image (wins over the built-in matrix)., type: str, default: ""}
  gpu_facts: {description: The C(triton_fleet_gpus) fact of the gpu_facts module., type: dict, default: {}}
  require_gpu: {description: Fail when no NVIDIA GPU is found., type: bool, default: true}
  fabric_manager: {description: Fabric Manager policy., type: str, choices: [auto, always, never], default: auto}
  virtualization_type: {description: ansible_facts virtualization_type., type: str, default: ""}
  virtualization_role: {description: ansible_facts virtualization_role., type: str, default: ""}
  in_container: {description: Override container detection (true/false); unset = from the facts., type: bool}
  install: {description: Whether the role installs (false = verify an existing driver only)., type: bool, default: true}
  packages_changed: {description: Driver packages changed in this run (reboot)., type: bool, default: false}
  blacklist_changed: {description: The nouveau blacklist changed in this run (reboot)., type: bool, default: false}
  nouveau_loaded: {description: The nouveau module is loaded (reboot)., type: bool, default: false}
  loaded_version: {description: Content of /sys/module/nvidia/version (reboot)., type: str, default: ""}
  installed_version: {description: Installed driver version (reboot)., type: str, default: ""}
  smi_output: {description: Output of nvidia-smi (reboot)., type: str, default: ""}
  reboot_allowed: {description: Whether a reboot may happen (reboot)., type: bool, default: true}
  expected_count: {description: GPUs expected on the host; -1 = at least one (verify)., type: int, default: -1}
  persistence: {description: Require persistence mode on every GPU (verify)., type: bool, default: true}
  fabric_manager_required: {description: Fabric Manager must be active (verify)., type: bool, default: false}
  fabric_manager_active: {description: nvidia-fabricmanager is active (verify)., type: bool, default: false}
  fabric_manager_version: {description: Installed Fabric Manager package version (verify)., type: str, default: ""}
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Pure decisions from facts; the same in check mode.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: none
author: triton-fleet
"""

EXAMPLES = r"""
- name: Plan the driver install
  nvidia_driver_policy:
    mode: plan
    os_family: "{{ ansible_facts['os_family'] }}"
    distribution: "{{ ansible_facts['distribution'] }}"
    major_version: "{{ ansible_facts['distribution_major_version'] }}"
    kernel: "{{ ansible_facts['kernel'] }}"
    branch: "580"
    image_ref: nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3
    gpu_facts: "{{ triton_fleet_gpus }}"
  register: plan
"""

RETURN = r"""
plan:
  description: The decisions (mode=plan).
  returned: mode=plan
  type: dict
  sample: {branch: 580, flavour: open, packages: {driver: [nvidia-driver-580-open]}, kernel_steps: true}
decision:
  description: action (reboot, load, none, skip), needed, reasons, message (mode=reboot).
  returned: mode=reboot
  type: dict
  sample: {action: reboot, needed: true, reasons: [driver packages changed], message: reboot to load driver 580.95.05}
differences:
  description: What differs from the expectation; empty when the node is good (mode=verify).
  returned: mode=verify
  type: list
  elements: str
  sample: ["expected 8 GPUs, found 7"]
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402 (documentation first, as Ansible modules do)
from ansible.module_utils.triton_fleet.driver_policy import (  # noqa: E402
    PolicyError,
    plan,
    reboot_decision,
    verify,
)


def main():
    module = AnsibleModule(
        argument_spec={
            "mode": {"type": "str", "required": True, "choices": ["plan", "reboot", "verify"]},
            "os_family": {"type": "str", "default": ""},
            "distribution": {"type": "str", "default": ""},
            "major_version": {"type": "str", "default": ""},
            "kernel": {"type": "str", "default": ""},
            "source": {"type": "str", "default": "cuda", "choices": ["cuda", "distribution"]},
            "branch": {"type": "str", "default": ""},
            "version": {"type": "str", "default": ""},
            "kernel_modules": {"type": "str", "default": "auto", "choices": ["auto", "open", "proprietary"]},
            "compute_capability_hint": {"type": "str", "default": ""},
            "image_ref": {"type": "str", "default": ""},
            "image_min_branch": {"type": "str", "default": ""},
            "gpu_facts": {"type": "dict", "default": {}},
            "require_gpu": {"type": "bool", "default": True},
            "fabric_manager": {"type": "str", "default": "auto", "choices": ["auto", "always", "never"]},
            "virtualization_type": {"type": "str", "default": ""},
            "virtualization_role": {"type": "str", "default": ""},
            "in_container": {"type": "bool"},
            "install": {"type": "bool", "default": True},
            "packages_changed": {"type": "bool", "default": False},
            "blacklist_changed": {"type": "bool", "default": False},
            "nouveau_loaded": {"type": "bool", "default": False},
            "loaded_version": {"type": "str", "default": ""},
            "installed_version": {"type": "str", "default": ""},
            "smi_output": {"type": "str", "default": ""},
            "reboot_allowed": {"type": "bool", "default": True},
            "expected_count": {"type": "int", "default": -1},
            "persistence": {"type": "bool", "default": True},
            "fabric_manager_required": {"type": "bool", "default": False},
            "fabric_manager_active": {"type": "bool", "default": False},
            "fabric_manager_version": {"type": "str", "default": ""},
        },
        required_if=[("mode", "plan", ("branch", "os_family", "kernel")), ("mode", "verify", ("branch",))],
        supports_check_mode=True,
    )
    p = module.params
    try:
        if p["mode"] == "plan":
            result = plan(
                os_family=p["os_family"], distribution=p["distribution"], major_version=p["major_version"],
                kernel=p["kernel"], source=p["source"], branch=p["branch"], version=p["version"],
                kernel_modules=p["kernel_modules"], compute_capability_hint=p["compute_capability_hint"],
                image_ref=p["image_ref"], image_min_branch=p["image_min_branch"] or None,
                gpu_facts=p["gpu_facts"], require_gpu=p["require_gpu"], fabric_manager=p["fabric_manager"],
                virtualization_type=p["virtualization_type"], virtualization_role=p["virtualization_role"],
                in_container=p["in_container"], install=p["install"])
            module.exit_json(changed=False, plan=result)
        if p["mode"] == "reboot":
            in_container = bool(p["in_container"])
            decision = reboot_decision(
                packages_changed=p["packages_changed"], blacklist_changed=p["blacklist_changed"],
                nouveau_loaded=p["nouveau_loaded"], loaded_version=p["loaded_version"],
                installed_version=p["installed_version"], smi_output=p["smi_output"],
                in_container=in_container, reboot_allowed=p["reboot_allowed"])
            module.exit_json(changed=False, decision=decision)
        diffs = verify(p["gpu_facts"], expected_count=p["expected_count"], branch=p["branch"],
                       version=p["version"], persistence=p["persistence"],
                       fabric_manager_required=p["fabric_manager_required"],
                       fabric_manager_active=p["fabric_manager_active"],
                       fabric_manager_version=p["fabric_manager_version"])
        if diffs:
            module.fail_json(msg="NVIDIA driver verification failed: " + "; ".join(diffs)
                             + ". Fix the host (or the expected count/branch in the inventory) and re-run.",
                             differences=diffs)
        module.exit_json(changed=False, differences=[])
    except PolicyError as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
