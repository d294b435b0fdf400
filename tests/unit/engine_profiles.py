"""Hand-written serving profiles (docs/profile.md) for the engine tests. The planner is not used here."""

import copy

from triton_fleet.fingerprint import fingerprint

BASE = {
    "schema_version": 1,
    "name": "qwen3-14b_a100-80gb-sxm-x1_bf16_tp1_trtllm-engine",
    "group": "gpu_a100",
    "model": {
        "key": "qwen3-14b", "hf_id": "Qwen/Qwen3-14B", "revision": "main", "served_name": "qwen3-14b",
        "architecture": "Qwen3ForCausalLM", "num_layers": 40, "hidden_size": 5120, "num_attention_heads": 40,
        "num_kv_heads": 8, "head_dim": 128, "intermediate_size": 17408, "vocab_size": 151936,
        "max_position_embeddings": 40960, "tie_word_embeddings": False, "params": 14768307200,
    },
    "runtime": "trtllm-engine",
    "device": "gpu",
    "gpu": {"sku": "a100-80gb-sxm", "name": "NVIDIA A100-SXM4-80GB", "count_per_host": 1,
            "memory_bytes": 85899345920, "compute_capability": "8.0", "nvlink": True},
    "precision": {"dtype": "bfloat16", "weights": "bf16", "kv_cache": "bf16"},
    "parallel": {"tp": 1, "pp": 1, "gpus_per_replica": 1, "replicas_per_host": 1, "gpu_device_ids": ["0"]},
    "limits": {"max_batch_size": 16, "max_input_len": 7168, "max_seq_len": 8192, "max_num_tokens": 8192,
               "max_output_len": 1024, "max_beam_width": 1},
    "kv_cache": {"free_gpu_mem_fraction": 0.9, "enable_block_reuse": True, "tokens_per_block": 32},
    "scheduler": {"batch_scheduler_policy": "guaranteed_no_evict", "enable_chunked_context": True,
                  "max_queue_delay_microseconds": 0, "max_queue_size": 0},
    "image": {"ref": "nvcr.io/nvidia/tritonserver:26.07-trtllm-python-py3", "triton": "26.07",
              "trtllm": "1.2.1", "cuda": "13.1", "min_driver_branch": 580},
    "predicted": {},
    "reasons": [],
    "alternatives": [],
}

H100 = {"sku": "h100-80gb-sxm", "name": "NVIDIA H100 80GB HBM3", "count_per_host": 8,
        "memory_bytes": 85899345920, "compute_capability": "9.0", "nvlink": True}


def make(**changes):
    """A profile with dotted-path changes (``**{"precision.weights": "fp8"}``), fingerprint recomputed."""
    prof = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        node = prof
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = value
    prof["fingerprint"] = fingerprint(prof)
    return prof


def lab(**changes):
    """The lab's transformers/CPU profile."""
    base = {"runtime": "transformers", "device": "cpu", "model.key": "qwen3-tiny", "model.revision": "local",
            "gpu": {"sku": "cpu", "count_per_host": 0}, "precision": {"dtype": "float32", "weights": "fp32",
                                                                      "kv_cache": "fp32"},
            "image.trtllm": None, "image.ref": "triton-fleet/tritonserver-lab:test"}
    base.update(changes)
    return make(**base)
