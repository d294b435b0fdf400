#!/usr/bin/python
"""Ansible module: plan the serving profile (docs/profile.md) of one GPU group, or of every group of a fleet."""

DOCUMENTATION = r"""
---
module: llm_plan
short_description: Choose runtime, precision, TP and limits for a model on a GPU group; return the serving profile
description:
  - Computes the profile of C(docs/profile.md) with C(module_utils/triton_fleet/planner.py) - weights and KV-cache
    memory per GPU, the precision and tensor parallelism that fit the requested context length and
    concurrency, the runtime for the GPU and the pinned Triton image, the predicted bs=1 decode speed, the
    alternatives considered with the reason each was rejected, and the profile fingerprint.
  - Single mode plans one group from I(model), I(gpu_facts) (or I(gpu_sku) + I(gpu_count)) and the request.
  - Fleet mode (I(hosts)) groups hosts by their child group of I(parent_group), checks every group is
    homogeneous (same GPU SKU and count, same planning variables) naming the host that differs, plans every
    group, and fails listing every problem when any group fails.
  - Pure computation, changes nothing (C(changed) is always false); safe in check mode. Reads
    I(model_config) on the host the module runs on (delegate to the controller for controller paths).
options:
  hosts:
    description:
      - Fleet mode. Host name -> C({group_names, gpu_facts, host_memory_bytes, request}); C(request) holds the
        single-mode request options below (C(model), C(context_length), ...; C(gpu_group) to force the group).
    type: dict
  groups:
    description: The inventory's C(groups) (fleet mode), to find each host's child group of I(parent_group).
    type: dict
    default: {}
  parent_group:
    description: The group whose child groups each get one profile.
    type: str
    default: gpu_nodes
  group:
    description: Single mode. Name of the group being planned (recorded in the profile).
    type: str
    default: adhoc
  model:
    description: Model key (C(qwen3-14b), ... C(qwen3-tiny)), see C(tools/plan --list-models).
    type: str
  model_config:
    description: Local path of the model's Hugging Face C(config.json) (or its directory); required for C(qwen3-tiny).
    type: path
  model_revision:
    description: Model revision recorded in the profile.
    type: str
    default: main
  hf_id:
    description: Hugging Face id to record (defaults to the catalog's).
    type: str
  served_name:
    description: Name the model is served under (default the model key).
    type: str
  device:
    description: C(gpu) or C(cpu) (the lab).
    type: str
    choices: [gpu, cpu]
    default: gpu
  gpu_facts:
    description: The C(triton_fleet_gpus) facts of a host of the group (from M(gpu_facts) or given).
    type: dict
  gpu_sku:
    description: GPU catalog SKU when I(gpu_facts) is not given.
    type: str
  gpu_count:
    description: GPUs per host when I(gpu_facts) is not given.
    type: int
  host_memory_bytes:
    description: Host memory, used for the fit check of C(cpu) devices.
    type: int
  context_length:
    description: Longest sequence (prompt + output) to serve, tokens.
    type: int
    default: 8192
  concurrency:
    description: Sequences of I(context_length) tokens each host must hold at once.
    type: int
    default: 8
  max_output_len:
    description: Longest output, tokens (capped at half the context).
    type: int
    default: 1024
  runtime:
    description:
      - Override of the runtime choice (still checked). The planner picks C(trtllm-llmapi), TensorRT-LLM's PyTorch
        backend, on every GPU its support matrix lists (Ampere and newer); C(trtllm-engine) is the legacy TensorRT
        engine path (TensorRT-LLM removed it after v1.3.0rc20), planned only when asked for and only with a
        TensorRT-LLM 1.2.x image.
    type: str
    choices: [trtllm-engine, trtllm-llmapi, transformers]
  precision:
    description: Override of the weight precision (still checked).
    type: str
    choices: [bf16, fp16, fp32, fp8, int8_wo, int4_awq, int4_gptq]
  kv_cache_dtype:
    description: Override of the KV-cache dtype.
    type: str
    choices: [bf16, fp16, fp32, fp8, int8]
  tp:
    description: Override of the tensor-parallel size (still checked).
    type: int
  image:
    description: The pinned Triton image reference.
    type: str
    default: nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3
  trtllm_version:
    description: TensorRT-LLM version inside I(image) when the matrix does not know it (a custom or newer image).
    type: str
  yarn_factor:
    description: YaRN rope-scaling factor for contexts beyond the model's native maximum (Qwen only).
    type: float
  kv_cache_free_gpu_mem_fraction:
    description: Share of the GPU memory left after weights that the KV cache takes.
    type: float
    default: 0.9
  quantized_checkpoints:
    description:
      - Pre-quantized checkpoints by precision (C(fp8), C(int4_awq), C(int4_gptq)) -> C({repo, revision, format})
        (the inventory's C(triton_fleet_quantized_checkpoints)). C(trtllm-llmapi) loads fp8 / int4 weights only
        from such a checkpoint; a precision is only tried when there is one that TensorRT-LLM's PyTorch backend
        loads on the GPU (Qwen's own from the catalog, or C(repo) and C(format) given here), and the profile names
        it in C(model.checkpoint). C(revision) pins it (a full commit hash); in fleet mode a planned checkpoint
        without one fails the plan.
    type: dict
attributes:
  check_mode:
    description: Can run in check mode and return the changed status without modifying the target.
    support: full
    details: Pure computation; the same in check mode.
  diff_mode:
    description: Returns details on what has changed (or would change in check mode) when run with C(--diff).
    support: none
author: triton-fleet
"""

EXAMPLES = r"""
- name: Plan one group from given facts
  llm_plan:
    model: qwen3-14b
    gpu_sku: a100-80gb-sxm
    gpu_count: 1
    context_length: 8192
    concurrency: 16
  delegate_to: localhost
  register: plan

- name: Plan the fleet (what playbooks/preflight.yml does)
  llm_plan:
    hosts: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'triton_fleet_preflight_input'))) }}"
    groups: "{{ groups }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
profile: {description: The profile (single mode)., returned: single mode success, type: dict, sample: {name: qwen3-14b_a100-80gb-sxm-x1_bf16_tp1_trtllm-llmapi, group: gpu_a100, runtime: trtllm-llmapi, device: gpu, fingerprint: 0707e222762108bf0fe2756c44541b54119776e1aa8c44e936d631da220eda4a}}
fingerprint: {description: The profile fingerprint (single mode)., returned: single mode success, type: str, sample: cbdc19e13624fab7f2735a48b0749bd534f7ce09d646c5fafa3f1f1a4c7a96f5}
profiles: {description: Group name -> profile (fleet mode)., returned: fleet mode success, type: dict, sample: {gpu_a100: {name: qwen3-14b_a100-80gb-sxm-x1_bf16_tp1_trtllm-llmapi, runtime: trtllm-llmapi}}}
host_groups: {description: Host -> the group whose profile it serves (fleet mode)., returned: fleet mode, type: dict, sample: {node1: gpu_a100, node2: gpu_a100}}
table: {description: Readable plan, one line per element., returned: success, type: list, elements: str, sample: ["runtime      trtllm-llmapi  image nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3 (TRT-LLM 1.2.1, CUDA 13.1, driver >= R580)"]}
alternatives: {description: Candidates rejected, with reasons (single mode failure)., returned: failure, type: list, sample: [{precision: bf16, tp: 1, reason: "KV cache for 16 x 32768 tokens needs 96 GiB, 51 GiB free"}]}
options: {description: What would fit instead (single mode failure)., returned: failure, type: list, sample: ["context_length 8192 at concurrency 16 fits with bf16 tp1"]}
errors: {description: Every planning error (fleet mode failure)., returned: fleet mode failure, type: list, sample: ["group gpu_a10 is not homogeneous: node3 has 2 x A10 where node4 has 1 x A10"]}"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.triton_fleet.planner import PlanError, format_table, gpu_from_facts, plan, plan_fleet

SINGLE = ("model", "model_config", "model_revision", "hf_id", "served_name", "device", "host_memory_bytes",
          "context_length", "concurrency", "max_output_len", "runtime", "precision", "kv_cache_dtype", "tp", "image",
          "trtllm_version", "yarn_factor", "kv_cache_free_gpu_mem_fraction", "group", "quantized_checkpoints")


def main():
    module = AnsibleModule(
        argument_spec={
            "hosts": {"type": "dict"},
            "groups": {"type": "dict", "default": {}},
            "parent_group": {"type": "str", "default": "gpu_nodes"},
            "group": {"type": "str", "default": "adhoc"},
            "model": {"type": "str"},
            "model_config": {"type": "path"},
            "model_revision": {"type": "str", "default": "main"},
            "hf_id": {"type": "str"},
            "served_name": {"type": "str"},
            "device": {"type": "str", "choices": ["gpu", "cpu"], "default": "gpu"},
            "gpu_facts": {"type": "dict"},
            "gpu_sku": {"type": "str"},
            "gpu_count": {"type": "int"},
            "host_memory_bytes": {"type": "int"},
            "context_length": {"type": "int", "default": 8192},
            "concurrency": {"type": "int", "default": 8},
            "max_output_len": {"type": "int", "default": 1024},
            "runtime": {"type": "str", "choices": ["trtllm-engine", "trtllm-llmapi", "transformers"]},
            "precision": {"type": "str", "choices": ["bf16", "fp16", "fp32", "fp8", "int8_wo", "int4_awq",
                                                      "int4_gptq"]},
            "kv_cache_dtype": {"type": "str", "choices": ["bf16", "fp16", "fp32", "fp8", "int8"]},
            "tp": {"type": "int"},
            "image": {"type": "str", "default": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3"},
            "trtllm_version": {"type": "str"},
            "yarn_factor": {"type": "float"},
            "kv_cache_free_gpu_mem_fraction": {"type": "float", "default": 0.9},
            "quantized_checkpoints": {"type": "dict"},
        },
        mutually_exclusive=[("hosts", "model"), ("gpu_facts", "gpu_sku")],
        required_one_of=[("hosts", "model")],
        supports_check_mode=True,
    )
    p = module.params
    if p["hosts"] is not None:
        profiles, host_groups, errors = plan_fleet(p["hosts"], p["groups"] or {}, p["parent_group"])
        if errors:
            module.fail_json(msg="preflight planning failed, nothing was changed: " + " | ".join(errors),
                             errors=errors, host_groups=host_groups)
        table = []
        for grp in sorted(profiles):
            table += ["=== group {}: {}".format(grp, ", ".join(sorted(h for h, g in host_groups.items() if g == grp)))]
            table += format_table(profiles[grp])
        module.exit_json(changed=False, profiles=profiles, host_groups=host_groups, table=table)

    req = {k: p[k] for k in SINGLE if p.get(k) is not None}
    if p["gpu_facts"] is not None:
        req.update(gpu_from_facts(p["gpu_facts"]))
    else:
        req["gpu_sku"], req["gpu_count"] = p["gpu_sku"], p["gpu_count"]
    try:
        profile = plan(req)
    except PlanError as exc:
        module.fail_json(msg=str(exc), alternatives=exc.alternatives, options=exc.options)
    module.exit_json(changed=False, profile=profile, fingerprint=profile["fingerprint"], table=format_table(profile))


if __name__ == "__main__":
    main()
