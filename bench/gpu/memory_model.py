#!/usr/bin/env python3
"""Predicted (module_utils/triton_fleet/memory_model.py) vs measured (PyTorch on a real GPU) memory.

Builds a Qwen3 architecture from the model catalog with random bf16 weights directly on the GPU (no
download), then measures: parameters, weight bytes allocated, the KV-cache bytes after a prefill of B x T
tokens, and the transient peak of that prefill against the planner's activation reserve. Prints a table
and writes JSON (--out). Run on a GPU host:  python3 bench/gpu/memory_model.py --model qwen3-14b
"""

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "module_utils"))

import torch  # noqa: E402
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402
from triton_fleet import memory_model, model_catalog  # noqa: E402


def hf_config(m):
    return Qwen3Config(
        vocab_size=m["vocab_size"],
        hidden_size=m["hidden_size"],
        intermediate_size=m["intermediate_size"],
        num_hidden_layers=m["num_layers"],
        num_attention_heads=m["num_attention_heads"],
        num_key_value_heads=m["num_kv_heads"],
        head_dim=m["head_dim"],
        max_position_embeddings=m["max_position_embeddings"],
        tie_word_embeddings=m["tie_word_embeddings"],
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        attention_bias=False,
    )


def pct(pred, meas):
    return 100.0 * (pred - meas) / meas if meas else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="qwen3-14b")
    ap.add_argument("--shapes", default="1x4096,4x2048,8x8192", help="BxT prefills")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    m = model_catalog.get(a.model)
    torch.set_default_dtype(torch.bfloat16)
    torch.manual_seed(0)
    t0 = time.time()
    base = torch.cuda.memory_allocated()
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(hf_config(m))
    model.eval()
    torch.cuda.synchronize()
    weights_meas = torch.cuda.memory_allocated() - base
    params_meas = sum(p.numel() for p in model.parameters())
    rows = {
        "model": a.model,
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "build_seconds": round(time.time() - t0, 1),
        "params": {"pred": memory_model.param_count(m), "meas": params_meas},
        "weights_bytes": {"pred": memory_model.weight_bytes(m, "bf16"), "meas": weights_meas},
        "prefill": {},
    }
    kv_tok = memory_model.kv_bytes_per_token(m, "bf16")
    for shape in a.shapes.split(","):
        b, t = (int(x) for x in shape.split("x"))
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        ids = torch.randint(0, m["vocab_size"], (b, t), device="cuda")
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        torch.cuda.synchronize()
        kv_meas = torch.cuda.memory_allocated() - before - ids.numel() * ids.element_size() - out.logits.numel() * 2
        peak_over = torch.cuda.max_memory_allocated() - before
        act_pred = b * t * memory_model.activation_bytes_per_token(m, "bf16")
        rows["prefill"][shape] = {
            "kv_pred": kv_tok * b * t,
            "kv_meas": kv_meas,
            "transient_pred": act_pred,
            "transient_meas": peak_over - kv_meas,
        }
        del out, ids
    print(f"{a.model} on {rows['gpu']} (torch {rows['torch']})")
    print(f"{'quantity':34} {'predicted':>16} {'measured':>16} {'error':>9}")

    def line(name, p, q):
        print(f"{name:34} {p:16,d} {q:16,d} {pct(p, q):8.3f}%")

    line("parameters", rows["params"]["pred"], rows["params"]["meas"])
    line("weight bytes (bf16)", rows["weights_bytes"]["pred"], rows["weights_bytes"]["meas"])
    for shape, r in rows["prefill"].items():
        line(f"KV cache after prefill {shape}", r["kv_pred"], r["kv_meas"])
        line(f"prefill transient {shape}", r["transient_pred"], r["transient_meas"])
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
