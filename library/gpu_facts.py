#!/usr/bin/python
"""Ansible module: NVIDIA GPU facts of a host from nvidia-smi, or lspci when no driver is loaded yet."""

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU facts (SKU, count, memory, compute capability, NVLink) into triton_fleet_gpus
description:
  - Runs C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits), C(nvidia-smi -q -x) and
    C(nvidia-smi topo -m) and returns C(ansible_facts.triton_fleet_gpus) with the driver and CUDA versions,
    every GPU (index, name, catalog SKU, uuid, memory, compute capability, MIG / persistence / ECC mode,
    PCI bus id), whether GPUs are joined by NVLink and whether an NVSwitch fabric is present.
  - When nvidia-smi is missing or fails (no driver installed yet) the GPUs are identified from
    C(lspci -nn) PCI device ids through the GPU catalog (source C(lspci)); driver facts are then null.
  - Read-only; safe in check mode. Fails with an explanation when the host has no NVIDIA GPU, unless
    I(allow_none) is true (then C(count) is 0).
options:
  allow_none:
    description: Return C(count=0) instead of failing when no NVIDIA GPU is found.
    type: bool
    default: false
  nvidia_smi_path:
    description: The nvidia-smi binary (name looked up in PATH, or an absolute path).
    type: str
    default: nvidia-smi
  lspci_path:
    description: The lspci binary (name looked up in PATH, or an absolute path).
    type: str
    default: lspci
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Read-only, reads nvidia-smi and /proc; the same in check mode.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: none
author: triton-fleet
"""

EXAMPLES = r"""
- name: Read GPU facts
  gpu_facts:

- name: Show them
  ansible.builtin.debug:
    var: ansible_facts['triton_fleet_gpus']

- name: A host that may have no GPU yet
  gpu_facts:
    allow_none: true
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  sample: {triton_fleet_gpus: {driver_version: "580.159.04", cuda_version: "13.0", count: 1}}
  contains:
    triton_fleet_gpus:
      description: GPU facts of the host.
      type: dict
      sample:
        driver_version: "580.159.04"
        cuda_version: "13.0"
        count: 1
        gpus:
          - index: 0
            name: NVIDIA H200
            sku: h200
            uuid: GPU-3190a514-9a5c-3254-d6ef-4a810cbfc82d
            memory_bytes: 150754820096
            compute_capability: "9.0"
            mig_mode: disabled
            persistence_mode: enabled
            ecc_mode: enabled
            pci_bus_id: "00000000:00:06.0"
        nvlink: false
        nvlink_links: {}
        nvswitch: false
        source: nvidia-smi
        unknown_skus: []
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.nvidia_smi import GpuFactsError, collect


def make_runner(module):
    def run(argv):
        exe = module.get_bin_path(argv[0]) if "/" not in argv[0] else argv[0]
        if not exe:
            return None, "", f"{argv[0]} not found"
        rc, out, err = module.run_command([exe] + list(argv[1:]), environ_update={"LC_ALL": "C"})
        return rc, out, err
    return run


def main():
    module = AnsibleModule(
        argument_spec={
            "allow_none": {"type": "bool", "default": False},
            "nvidia_smi_path": {"type": "str", "default": "nvidia-smi"},
            "lspci_path": {"type": "str", "default": "lspci"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        facts = collect(make_runner(module), allow_none=p["allow_none"], nvidia_smi=p["nvidia_smi_path"],
                        lspci=p["lspci_path"])
    except GpuFactsError as exc:
        module.fail_json(msg=str(exc))
    if facts.get("unknown_skus"):
        module.warn("GPU(s) {} are not in the GPU catalog (module_utils/triton_fleet/gpu_catalog.py): the "
                        "planner cannot size them; add the SKU with its sources".format(", ".join(facts["unknown_skus"])))
    module.exit_json(changed=False, ansible_facts={"triton_fleet_gpus": facts})


if __name__ == "__main__":
    main()
